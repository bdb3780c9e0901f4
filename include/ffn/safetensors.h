/* ffn/safetensors.h -- reading (memory-mapped, validated) and writing
 * (atomic) safetensors files, dtypes, and fp16/bf16 conversions.
 *
 * Part of the public API; include <ffn.h>, not this file.
 *
 * The format (https://github.com/huggingface/safetensors), little-endian:
 *   bytes [0, 8)          N, the header length, an unsigned 64-bit integer
 *   bytes [8, 8+N)        a JSON object:
 *                           "name": {"dtype": "F32", "shape": [F, D],
 *                                    "data_offsets": [begin, end]}, ...
 *                           "__metadata__": {"key": "value", ...} (optional)
 *                         possibly padded with trailing spaces
 *   bytes [8+N, size)     the data buffer; a tensor's bytes are
 *                         [8+N+begin, 8+N+end), row-major, little-endian.
 *
 * Reading.  ffn_st_open memory-maps the file read-only (never a second copy
 * of the data) and validates everything before returning:
 *   - the header length against the file size and a cap (100 MiB);
 *   - the header is valid, strict JSON (see src/format/json.h) and an object;
 *   - every entry has a known "dtype" string, a "shape" array of integers
 *     >= 0 (at most FFN_ST_MAX_DIMS), and "data_offsets" [begin, end] with
 *     begin <= end;
 *   - shape product x dtype size equals end - begin (overflow-checked);
 *   - offsets lie inside the data buffer, do not overlap, and cover it
 *     exactly with no gap (as the format requires);
 *   - "__metadata__", when present, maps strings to strings.
 * A failure returns FFN_ERR_FORMAT (or FFN_ERR_IO when the file cannot be
 * read) and ffn_last_error() names the file, the tensor and what was
 * expected against what was found.  Tensor data pointers point into the
 * mapping and stay valid until ffn_st_close.  (As with any mmap, if another
 * process truncates the file while it is open, touching the lost pages
 * raises SIGBUS; ffn never rewrites a file in place -- see writing.)
 *
 * Writing.  A writer collects tensors and metadata, then ffn_st_writer_save
 * writes a temporary file in the target's directory, fsyncs it, renames it
 * over the target and fsyncs the directory: a failed or interrupted save
 * never leaves a truncated or half-written file at `path` (the old file, if
 * any, stays intact until the rename).  A process killed mid-save may leave
 * its temporary file, `path`.tmp.XXXXXX, behind; a save that fails removes
 * it.  Tensors are laid out by decreasing dtype size, then in the order
 * added, so every tensor is aligned to its element size; the header is
 * padded with spaces to a multiple of 8 bytes.
 *
 * Example:
 *     ffn_st_file *f;
 *     if (ffn_st_open("w.safetensors", &f) != FFN_OK) { puts(ffn_last_error()); ... }
 *     int64_t shape[2] = {2816, 1024};
 *     float *w;
 *     ffn_st_load_f32(f, "up_proj.weight", 2, shape, &w);   // F32/F16/BF16/F64
 *     ...  free(w);  ffn_st_close(f);
 *
 *     ffn_st_writer *wr;  ffn_st_writer_create(&wr);
 *     ffn_st_writer_add(wr, "y", FFN_DTYPE_F32, 2, (int64_t[]){n, d}, y);
 *     ffn_st_writer_set_metadata(wr, "format", "pt");
 *     ffn_st_writer_save(wr, "out.safetensors");  ffn_st_writer_free(wr);
 */
#ifndef FFN_SAFETENSORS_H
#define FFN_SAFETENSORS_H
#pragma GCC visibility push(default) /* what this header declares is the exported API */

#include "core.h"
#include "dtype.h" /* ffn_f16_to_f32 and the other conversions */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- dtypes ----------------------------------------------------------- */

typedef enum ffn_dtype {
    FFN_DTYPE_F64,
    FFN_DTYPE_F32,
    FFN_DTYPE_F16,
    FFN_DTYPE_BF16,
    FFN_DTYPE_I64,
    FFN_DTYPE_I32,
    FFN_DTYPE_I16,
    FFN_DTYPE_I8,
    FFN_DTYPE_U8,
    FFN_DTYPE_BOOL
} ffn_dtype;

#define FFN_DTYPE_COUNT 10

/* The safetensors name ("F32", "BF16", ...); "?" for an invalid value. */
const char *ffn_dtype_name(ffn_dtype dtype);
/* Bytes per element (8, 4, 2, 2, 8, 4, 2, 1, 1, 1); 0 for an invalid value. */
size_t ffn_dtype_size(ffn_dtype dtype);
/* Parse a safetensors dtype name (exact, upper case).  Returns 1 and sets
 * *out when known, 0 otherwise. */
int ffn_dtype_parse(const char *name, ffn_dtype *out);

/* fp16 / bf16 conversions: ffn/dtype.h (included here). */

/* ---- reading ---------------------------------------------------------- */

#define FFN_ST_MAX_DIMS 8
#define FFN_ST_MAX_HEADER ((uint64_t)100 << 20) /* 100 MiB */

typedef struct ffn_st_file ffn_st_file;

/* A tensor's description.  `name` and `data` belong to the file and stay
 * valid until ffn_st_close.  `data` may be unaligned in files written by
 * other tools (read it with memcpy, or use ffn_st_view_f32). */
typedef struct ffn_st_tensor {
    const char *name;
    ffn_dtype dtype;
    int ndim;                        /* 0 (a scalar) .. FFN_ST_MAX_DIMS */
    int64_t shape[FFN_ST_MAX_DIMS];  /* shape[ndim..] are 0 */
    int64_t numel;                   /* product of the shape (1 for a scalar) */
    size_t nbytes;                   /* numel * ffn_dtype_size(dtype) */
    size_t offset;                   /* of the data in the file, in bytes */
    const void *data;
} ffn_st_tensor;

/* Map and validate `path` (see the overview).  *out is NULL on failure. */
ffn_status ffn_st_open(const char *path, ffn_st_file **out);
/* The same over `size` bytes in memory, which the caller keeps alive and
 * unchanged until ffn_st_close; `name` (may be NULL) is used in messages. */
ffn_status ffn_st_open_buffer(const void *data, size_t size, const char *name, ffn_st_file **out);
void ffn_st_close(ffn_st_file *file); /* NULL is a no-op */

/* The path (or buffer name) given at open. */
const char *ffn_st_path(const ffn_st_file *file);

/* Tensors, in the order of their data in the file. */
size_t ffn_st_count(const ffn_st_file *file);
ffn_status ffn_st_get(const ffn_st_file *file, size_t i, ffn_st_tensor *out);
/* By name (binary search).  FFN_ERR_MISSING, naming the file and the
 * tensor, when absent; ffn_st_has is the silent test. */
ffn_status ffn_st_find(const ffn_st_file *file, const char *name, ffn_st_tensor *out);
int ffn_st_has(const ffn_st_file *file, const char *name);

/* "__metadata__" values: NULL when absent. */
const char *ffn_st_metadata(const ffn_st_file *file, const char *key);
size_t ffn_st_metadata_count(const ffn_st_file *file);
/* The i-th metadata pair in file order; FFN_ERR_INVALID_ARG when out of range. */
ffn_status ffn_st_metadata_at(const ffn_st_file *file, size_t i, const char **key,
                              const char **value);

/* Check a tensor's shape: FFN_ERR_SHAPE with
 *   "w.safetensors: up_proj.weight: expected shape [2816, 1024], found [1024, 2816]". */
ffn_status ffn_st_check_shape(const ffn_st_file *file, const ffn_st_tensor *t, int ndim,
                              const int64_t *expected_shape);

/* Read tensor `name` as fp32 into dst (numel floats), converting F32, F16,
 * BF16 and F64 (other dtypes: FFN_ERR_FORMAT).  When expected_shape is not
 * NULL the shape must equal it (ndim dims) or FFN_ERR_SHAPE; when it is NULL
 * the caller must know dst holds numel floats (ffn_st_find first). */
ffn_status ffn_st_read_f32(const ffn_st_file *file, const char *name, int ndim,
                           const int64_t *expected_shape, float *dst);
/* The same into a new 64-byte-aligned buffer; release it with free(). */
ffn_status ffn_st_load_f32(const ffn_st_file *file, const char *name, int ndim,
                           const int64_t *expected_shape, float **out);
/* Zero-copy: *out points into the mapping when the tensor is F32 and its
 * data is 4-byte aligned; otherwise FFN_ERR_UNSUPPORTED (use load_f32).
 * Read-only; valid until ffn_st_close. */
ffn_status ffn_st_view_f32(const ffn_st_file *file, const char *name, int ndim,
                           const int64_t *expected_shape, const float **out);
/* Convert a tensor obtained from get/find to fp32 (numel floats). */
ffn_status ffn_st_tensor_to_f32(const ffn_st_file *file, const ffn_st_tensor *t, float *dst);

/* ---- writing ---------------------------------------------------------- */

typedef struct ffn_st_writer ffn_st_writer;

ffn_status ffn_st_writer_create(ffn_st_writer **out);
void ffn_st_writer_free(ffn_st_writer *w); /* NULL is a no-op */

/* Add a tensor of ndim (0..FFN_ST_MAX_DIMS) dims >= 0.  `data` holds
 * numel elements of `dtype` in little-endian row-major order.
 *   ffn_st_writer_add       REFERENCES data: it must stay alive and
 *                           unchanged until save returns (no copy, for
 *                           large checkpoints);
 *   ffn_st_writer_add_copy  copies data now;
 *   ffn_st_writer_add_f32   converts fp32 data to `dtype` (F32, F16, BF16
 *                           or F64; round-to-nearest-even) into a copy.
 * Names must be non-empty valid UTF-8, not "__metadata__", and unique
 * (FFN_ERR_INVALID_ARG otherwise, naming the tensor). */
ffn_status ffn_st_writer_add(ffn_st_writer *w, const char *name, ffn_dtype dtype, int ndim,
                             const int64_t *shape, const void *data);
ffn_status ffn_st_writer_add_copy(ffn_st_writer *w, const char *name, ffn_dtype dtype, int ndim,
                                  const int64_t *shape, const void *data);
ffn_status ffn_st_writer_add_f32(ffn_st_writer *w, const char *name, ffn_dtype dtype, int ndim,
                                 const int64_t *shape, const float *data);
/* A tensor whose bytes are asked for while save writes the file, piece
 * by piece in the file's order: each call of `next` sets *data and *n to
 * the next piece (valid until the following call); the pieces must add
 * up to the tensor's bytes exactly (a piece of 0 bytes before that, or
 * one past it, is an error).  An error from `next` fails the save. */
typedef ffn_status (*ffn_st_source)(void *user, const void **data, size_t *n);
ffn_status ffn_st_writer_add_source(ffn_st_writer *w, const char *name, ffn_dtype dtype, int ndim,
                                    const int64_t *shape, ffn_st_source next, void *user);
/* Set (or replace) a "__metadata__" string; both copied, valid UTF-8. */
ffn_status ffn_st_writer_set_metadata(ffn_st_writer *w, const char *key, const char *value);

/* Write atomically (see the overview).  FFN_ERR_IO names the path and the
 * system error; on failure nothing is left at `path` that was not there
 * before, and no temporary file remains.  The writer may be saved again. */
ffn_status ffn_st_writer_save(const ffn_st_writer *w, const char *path);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif /* FFN_SAFETENSORS_H */
