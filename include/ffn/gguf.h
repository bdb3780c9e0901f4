/* ffn/gguf.h -- GGUF files (v2/v3: reading memory-mapped and validated,
 * writing atomically) and the ggml tensor types they hold (every type of
 * the type table, ffn/dtype.h), row by row.
 *
 * Part of the public API; include <ffn.h>, not this file.
 *
 * ---- the tensor types ---------------------------------------------------
 * ffn_ggml_type carries ggml's own numbers, so a GGUF file's type field is
 * one of them.  A row of n elements of a block type is n / block_size
 * blocks laid out exactly as ggml lays them out (little-endian, no padding;
 * each format's layout and formulas: src/kernels/quant.h, beside its
 * decoder).  Dequantization follows ggml's formulas in fp32, operation for
 * operation; quantization follows ggml's reference rounding (bytes equal
 * to ggml's quantize_row_<type>_ref) where the table's encoder is ggml's,
 * else ffn's own search for the scales (the decoding is ggml's).  f16 and
 * bf16 round to nearest, ties to even; NaN stays NaN.
 *
 * ---- GGUF ---------------------------------------------------------------
 * The format (little-endian; ggml's docs/gguf.md):
 *   "GGUF"  uint32 version  uint64 n_tensors  uint64 n_kv
 *   n_kv times:      string key; uint32 value type; value
 *   n_tensors times: string name; uint32 n_dims; uint64 ne[n_dims];
 *                    uint32 ggml type; uint64 offset
 *   padding to `general.alignment` (a uint32, a power of two; default 32)
 *   the data section: each tensor at its offset, each padded to the alignment
 * A string is uint64 length + bytes (no NUL); an array is uint32 element
 * type + uint64 count + the elements.  ne[] lists the dimensions fastest
 * first: a row-major W[out][in] is ne = {in, out}, and a row is ne[0]
 * elements.
 *
 * Reading validates everything before returning: the magic; version 2 or
 * 3; the counts against the bytes left in the file; every string length
 * against the bytes left; value types; bools 0 or 1; keys non-empty,
 * without NUL bytes and unique; general.alignment a uint32 power of two;
 * arrays nested at most FFN_GGUF_MAX_NESTING deep; tensor names non-empty,
 * unique and shorter than FFN_GGUF_MAX_NAME bytes; at most FFN_GGUF_MAX_DIMS
 * dims, each >= 0, with no overflow of the element count or the byte size;
 * a known type with ne[0] a multiple of its block size; offsets equal to
 * the running sum of the aligned sizes; the data inside the file.  A
 * failure returns FFN_ERR_FORMAT (FFN_ERR_IO when the file cannot be read)
 * and ffn_last_error() names the file, the key or tensor, the expected and
 * the found.  Pointers handed out (names, strings, tensor data) stay valid
 * until ffn_gguf_close; strings are also NUL-terminated for convenience,
 * their length is authoritative.
 *
 * Writing collects metadata and tensors and saves through ffn_atomic_*
 * (core.h): the file appears whole or not at all.  Keys keep the order in
 * which they were first set; the writer never emits nested arrays.
 *
 * Example:
 *     ffn_gguf_file *f;
 *     if (ffn_gguf_open("m.gguf", &f) != FFN_OK) { puts(ffn_last_error()); ... }
 *     uint32_t n_layer;  ffn_gguf_get_u32(f, "llama.block_count", &n_layer);
 *     ffn_gguf_tensor t;  ffn_gguf_find(f, "blk.0.ffn_up.weight", &t);
 *     float *w;  ffn_gguf_load_f32(f, "blk.0.ffn_up.weight", &w);  ... free(w);
 *     ffn_gguf_close(f);
 *
 *     ffn_gguf_writer *wr;  ffn_gguf_writer_create(&wr);
 *     ffn_gguf_writer_set_str(wr, "general.architecture", "llama");
 *     ffn_gguf_writer_add_f32(wr, "w", type, 2, (int64_t[]){D, F}, w);  (any type the table encodes)
 *     ffn_gguf_writer_save(wr, "out.gguf");  ffn_gguf_writer_free(wr);
 */
#ifndef FFN_GGUF_H
#define FFN_GGUF_H
#pragma GCC visibility push(default)

#include "core.h"
#include "dtype.h" /* ffn_ggml_type and the type table */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- GGUF metadata values ------------------------------------------- */

typedef enum ffn_gguf_vtype {
    FFN_GGUF_VTYPE_UINT8 = 0,
    FFN_GGUF_VTYPE_INT8 = 1,
    FFN_GGUF_VTYPE_UINT16 = 2,
    FFN_GGUF_VTYPE_INT16 = 3,
    FFN_GGUF_VTYPE_UINT32 = 4,
    FFN_GGUF_VTYPE_INT32 = 5,
    FFN_GGUF_VTYPE_FLOAT32 = 6,
    FFN_GGUF_VTYPE_BOOL = 7,
    FFN_GGUF_VTYPE_STRING = 8,
    FFN_GGUF_VTYPE_ARRAY = 9,
    FFN_GGUF_VTYPE_UINT64 = 10,
    FFN_GGUF_VTYPE_INT64 = 11,
    FFN_GGUF_VTYPE_FLOAT64 = 12
} ffn_gguf_vtype;

#define FFN_GGUF_VTYPE_COUNT 13

/* "uint8", ..., "float64"; "?" for an invalid value. */
const char *ffn_gguf_vtype_name(ffn_gguf_vtype type);
/* Bytes of one value of a fixed-size type (1, 1, 2, 2, 4, 4, 4, 1, -, -, 8,
 * 8, 8); 0 for STRING, ARRAY and invalid values. */
size_t ffn_gguf_vtype_size(ffn_gguf_vtype type);

/* An array value.  For fixed-size element types `data` points at the count
 * packed little-endian elements in the file (any alignment: read with
 * memcpy, or element by element with ffn_gguf_array_get); for strings and
 * arrays `data` is NULL. */
typedef struct ffn_gguf_array {
    ffn_gguf_vtype type; /* of the elements */
    uint64_t count;
    const void *data;
    const void *impl; /* internal */
} ffn_gguf_array;

/* One value.  Read the member of its type. */
typedef struct ffn_gguf_value {
    ffn_gguf_vtype type;
    union {
        uint8_t u8;
        int8_t i8;
        uint16_t u16;
        int16_t i16;
        uint32_t u32;
        int32_t i32;
        float f32;
        int boolean; /* 0 or 1 */
        struct {
            const char *ptr; /* NUL-terminated copy; len is authoritative */
            size_t len;
        } str;
        ffn_gguf_array arr;
        uint64_t u64;
        int64_t i64;
        double f64;
    } v;
} ffn_gguf_value;

/* ---- reading ---------------------------------------------------------- */

#define FFN_GGUF_MAX_DIMS 4
#define FFN_GGUF_MAX_NAME 64 /* tensor names are shorter than this */
#define FFN_GGUF_DEFAULT_ALIGNMENT 32
#define FFN_GGUF_MAX_NESTING 8 /* arrays of arrays, levels */

typedef struct ffn_gguf_file ffn_gguf_file;

/* A tensor.  `name` and `data` belong to the file (valid until close). */
typedef struct ffn_gguf_tensor {
    const char *name;
    ffn_ggml_type type;
    int n_dims;                      /* 0 .. FFN_GGUF_MAX_DIMS */
    int64_t ne[FFN_GGUF_MAX_DIMS];   /* fastest first; ne[n_dims..] are 1 */
    int64_t numel;                   /* product of ne */
    size_t nbytes;                   /* numel / block size x type size */
    uint64_t offset;                 /* of the data from the start of the file */
    const void *data;                /* any alignment the file gives it */
} ffn_gguf_tensor;

/* Map and validate `path` (see the overview).  *out is NULL on failure. */
ffn_status ffn_gguf_open(const char *path, ffn_gguf_file **out);
/* The same over `size` bytes the caller keeps alive and unchanged until
 * close; `name` (may be NULL) is used in messages. */
ffn_status ffn_gguf_open_buffer(const void *data, size_t size, const char *name, ffn_gguf_file **out);
void ffn_gguf_close(ffn_gguf_file *file); /* NULL is a no-op */

const char *ffn_gguf_path(const ffn_gguf_file *file);
uint32_t ffn_gguf_version(const ffn_gguf_file *file);
size_t ffn_gguf_alignment(const ffn_gguf_file *file);
uint64_t ffn_gguf_data_offset(const ffn_gguf_file *file); /* start of the data section */

/* Metadata, in file order: i < ffn_gguf_kv_count. */
size_t ffn_gguf_kv_count(const ffn_gguf_file *file);
const char *ffn_gguf_kv_key(const ffn_gguf_file *file, size_t i); /* NULL when out of range */
ffn_status ffn_gguf_kv_value(const ffn_gguf_file *file, size_t i, ffn_gguf_value *out);
/* The index of `key` (binary search), or -1. */
int64_t ffn_gguf_find_key(const ffn_gguf_file *file, const char *key);
/* By key: FFN_ERR_MISSING naming file and key when absent. */
ffn_status ffn_gguf_get(const ffn_gguf_file *file, const char *key, ffn_gguf_value *out);

/* Typed getters: FFN_ERR_MISSING when absent, FFN_ERR_FORMAT naming the
 * key, the expected and the found type when the type differs.  _str gives
 * a NUL-terminated pointer into the file's copy (len may be NULL). */
ffn_status ffn_gguf_get_u8(const ffn_gguf_file *file, const char *key, uint8_t *out);
ffn_status ffn_gguf_get_i8(const ffn_gguf_file *file, const char *key, int8_t *out);
ffn_status ffn_gguf_get_u16(const ffn_gguf_file *file, const char *key, uint16_t *out);
ffn_status ffn_gguf_get_i16(const ffn_gguf_file *file, const char *key, int16_t *out);
ffn_status ffn_gguf_get_u32(const ffn_gguf_file *file, const char *key, uint32_t *out);
ffn_status ffn_gguf_get_i32(const ffn_gguf_file *file, const char *key, int32_t *out);
ffn_status ffn_gguf_get_f32(const ffn_gguf_file *file, const char *key, float *out);
ffn_status ffn_gguf_get_bool(const ffn_gguf_file *file, const char *key, int *out);
ffn_status ffn_gguf_get_u64(const ffn_gguf_file *file, const char *key, uint64_t *out);
ffn_status ffn_gguf_get_i64(const ffn_gguf_file *file, const char *key, int64_t *out);
ffn_status ffn_gguf_get_f64(const ffn_gguf_file *file, const char *key, double *out);
ffn_status ffn_gguf_get_str(const ffn_gguf_file *file, const char *key, const char **out, size_t *len);
ffn_status ffn_gguf_get_array(const ffn_gguf_file *file, const char *key, ffn_gguf_array *out);
/* Any integer type, when the value fits an int64_t (writers disagree on
 * uint32 against uint64 for counts); any float type, as a double. */
ffn_status ffn_gguf_get_int(const ffn_gguf_file *file, const char *key, int64_t *out);
ffn_status ffn_gguf_get_float(const ffn_gguf_file *file, const char *key, double *out);

/* Element i of an array (any element type, nested arrays included);
 * FFN_ERR_INVALID_ARG when i >= count. */
ffn_status ffn_gguf_array_get(const ffn_gguf_array *array, uint64_t i, ffn_gguf_value *out);

/* Tensors, in file order. */
size_t ffn_gguf_count(const ffn_gguf_file *file);
ffn_status ffn_gguf_get_tensor(const ffn_gguf_file *file, size_t i, ffn_gguf_tensor *out);
/* By name (binary search): FFN_ERR_MISSING naming file and tensor. */
ffn_status ffn_gguf_find(const ffn_gguf_file *file, const char *name, ffn_gguf_tensor *out);
/* Dequantize a whole tensor to numel fp32 values (row by row);
 * FFN_ERR_UNSUPPORTED naming the tensor and the type ffn cannot decode. */
ffn_status ffn_gguf_tensor_to_f32(const ffn_gguf_file *file, const ffn_gguf_tensor *t, float *dst);
/* The same by name into a new 64-byte-aligned buffer; release with free(). */
ffn_status ffn_gguf_load_f32(const ffn_gguf_file *file, const char *name, float **out);

/* ---- writing ---------------------------------------------------------- */

typedef struct ffn_gguf_writer ffn_gguf_writer;

ffn_status ffn_gguf_writer_create(ffn_gguf_writer **out);
void ffn_gguf_writer_free(ffn_gguf_writer *w); /* NULL is a no-op */

/* Set (or replace) a metadata value; keys are non-empty.  The key
 * "general.alignment" must be set with _u32 to a power of two; it sets the
 * alignment of the file written. */
ffn_status ffn_gguf_writer_set_u8(ffn_gguf_writer *w, const char *key, uint8_t v);
ffn_status ffn_gguf_writer_set_i8(ffn_gguf_writer *w, const char *key, int8_t v);
ffn_status ffn_gguf_writer_set_u16(ffn_gguf_writer *w, const char *key, uint16_t v);
ffn_status ffn_gguf_writer_set_i16(ffn_gguf_writer *w, const char *key, int16_t v);
ffn_status ffn_gguf_writer_set_u32(ffn_gguf_writer *w, const char *key, uint32_t v);
ffn_status ffn_gguf_writer_set_i32(ffn_gguf_writer *w, const char *key, int32_t v);
ffn_status ffn_gguf_writer_set_f32(ffn_gguf_writer *w, const char *key, float v);
ffn_status ffn_gguf_writer_set_bool(ffn_gguf_writer *w, const char *key, int v);
ffn_status ffn_gguf_writer_set_u64(ffn_gguf_writer *w, const char *key, uint64_t v);
ffn_status ffn_gguf_writer_set_i64(ffn_gguf_writer *w, const char *key, int64_t v);
ffn_status ffn_gguf_writer_set_f64(ffn_gguf_writer *w, const char *key, double v);
ffn_status ffn_gguf_writer_set_str(ffn_gguf_writer *w, const char *key, const char *s);
/* An array of `count` elements of a fixed-size type, packed in host
 * (little-endian) order at data; copied. */
ffn_status ffn_gguf_writer_set_array(ffn_gguf_writer *w, const char *key, ffn_gguf_vtype type,
                                     const void *data, uint64_t count);
ffn_status ffn_gguf_writer_set_str_array(ffn_gguf_writer *w, const char *key, const char *const *strs,
                                         uint64_t count);

/* Add a tensor of n_dims (0..4) dims ne (fastest first, each >= 0, ne[0] a
 * multiple of the type's block size); names unique, 1..63 bytes.
 *   _add_f32  converts numel fp32 values to `type` (ffn_ggml_quantize_row,
 *             row by row) into a copy;
 *   _add_raw  copies nbytes of already-encoded data (nbytes must equal the
 *             tensor's size). */
ffn_status ffn_gguf_writer_add_f32(ffn_gguf_writer *w, const char *name, ffn_ggml_type type, int n_dims,
                                   const int64_t *ne, const float *data);
ffn_status ffn_gguf_writer_add_raw(ffn_gguf_writer *w, const char *name, ffn_ggml_type type, int n_dims,
                                   const int64_t *ne, const void *data, size_t nbytes);

/* Write version 3 atomically (ffn_atomic_open/commit).  FFN_ERR_IO names
 * the path; nothing is left behind on failure.  May be saved again. */
ffn_status ffn_gguf_writer_save(const ffn_gguf_writer *w, const char *path);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif /* FFN_GGUF_H */
