/* safetensors.c -- the safetensors format: dtypes, fp16/bf16 conversion,
 * a validating memory-mapped reader, and an atomic writer.
 * The format and the guarantees are described in include/ffn/safetensors.h.
 *
 * Reading validates the whole header before any tensor is handed out, so
 * that later code may trust every offset and size: all size arithmetic is
 * 64-bit and overflow-checked, and nothing is read outside the mapping.
 * Messages read "<file>: <tensor>: <what>: expected X, found Y". */
#include "ffn/safetensors.h"

#include "base/common.h"
#include "base/open.h"
#include "base/dtype.h"
#include "format/float_buf.h"
#include "format/json.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host (the format is little-endian)"
#endif

/* ---- dtypes ----------------------------------------------------------- */

static const struct {
    const char *name;
    size_t size;
} dtype_table[FFN_DTYPE_COUNT] = {
    [FFN_DTYPE_F64] = {"F64", 8}, [FFN_DTYPE_F32] = {"F32", 4}, [FFN_DTYPE_F16] = {"F16", 2},
    [FFN_DTYPE_BF16] = {"BF16", 2}, [FFN_DTYPE_I64] = {"I64", 8}, [FFN_DTYPE_I32] = {"I32", 4},
    [FFN_DTYPE_I16] = {"I16", 2}, [FFN_DTYPE_I8] = {"I8", 1}, [FFN_DTYPE_U8] = {"U8", 1},
    [FFN_DTYPE_BOOL] = {"BOOL", 1},
};

static int dtype_valid(ffn_dtype d) { return (unsigned)d < FFN_DTYPE_COUNT; }

const char *ffn_dtype_name(ffn_dtype dtype) { return dtype_valid(dtype) ? dtype_table[dtype].name : "?"; }

size_t ffn_dtype_size(ffn_dtype dtype) { return dtype_valid(dtype) ? dtype_table[dtype].size : 0; }

int ffn_dtype_parse(const char *name, ffn_dtype *out) {
    if (!name) return 0;
    for (int d = 0; d < FFN_DTYPE_COUNT; d++) {
        if (!strcmp(name, dtype_table[d].name)) {
            if (out) *out = (ffn_dtype)d;
            return 1;
        }
    }
    return 0;
}

static int dtype_is_float(ffn_dtype d) {
    return d == FFN_DTYPE_F32 || d == FFN_DTYPE_F16 || d == FFN_DTYPE_BF16 || d == FFN_DTYPE_F64;
}

/* fp16 / bf16 conversions: src/base/dtype.c. */

/* ---- the reader ------------------------------------------------------- */

typedef struct st_entry {
    const char *name;
    ffn_dtype dtype;
    int ndim;
    int64_t shape[FFN_ST_MAX_DIMS];
    int64_t numel;
    uint64_t begin, end; /* data_offsets, relative to the data buffer */
} st_entry;

struct ffn_st_file {
    FFN_VIEW_HEAD
    uint64_t data_start;    /* 8 + header length */
    json_doc *header;       /* owns the names and metadata strings */
    st_entry *entries;      /* n, in data order */
    size_t n;
    const st_entry **by_name; /* n, sorted by name */
    const char **meta_keys, **meta_values;
    size_t n_meta;
};

void ffn_st_close(ffn_st_file *file) {
    if (!file) return;
    if (file->map) munmap(file->map, file->map_size);
    json_free(file->header);
    FFN_FREE_ALL(file->entries, file->by_name, file->meta_keys, file->meta_values, file->path, file);
}

const char *ffn_st_path(const ffn_st_file *file) { return file ? file->path : ""; }

/* "[2816, 1024]" into buf. */
static const char *shape_str(char *buf, size_t size, int ndim, const int64_t *shape) {
    size_t n = 0;
    n += (size_t)snprintf(buf + n, size - n, "[");
    for (int d = 0; d < ndim && n < size; d++)
        n += (size_t)snprintf(buf + n, size - n, "%s%" PRId64, d ? ", " : "", shape[d]);
    if (n < size) snprintf(buf + n, size - n, "]");
    return buf;
}

static int compare_by_offset(const void *a, const void *b) {
    const st_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int compare_by_name(const void *a, const void *b) {
    const st_entry *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

/* Validate one header entry `v` named `name` into *e. */
static ffn_status parse_entry(const ffn_st_file *f, const char *name, const json_value *v,
                              uint64_t data_size, st_entry *e) {
    const char *path = f->path;
    memset(e, 0, sizeof *e);
    e->name = name;
    if (v->type != JSON_OBJECT)
        return ffn_error(FFN_ERR_FORMAT, "%s: %s: expected an object with dtype, shape and data_offsets, found %s",
                         path, name, json_type_name(v->type));

    const json_value *dt = json_get(v, "dtype");
    if (!dt) return ffn_error(FFN_ERR_FORMAT, "%s: %s: missing \"dtype\"", path, name);
    if (dt->type != JSON_STRING)
        return ffn_error(FFN_ERR_FORMAT, "%s: %s: dtype: expected a string, found %s", path, name,
                         json_type_name(dt->type));
    if (!ffn_dtype_parse(dt->string, &e->dtype))
        return ffn_error(FFN_ERR_FORMAT,
                         "%s: %s: unknown dtype '%.40s' (expected one of F64, F32, F16, BF16, I64, I32, "
                         "I16, I8, U8, BOOL)",
                         path, name, dt->string);

    const json_value *sh = json_get(v, "shape");
    if (!sh) return ffn_error(FFN_ERR_FORMAT, "%s: %s: missing \"shape\"", path, name);
    if (sh->type != JSON_ARRAY)
        return ffn_error(FFN_ERR_FORMAT, "%s: %s: shape: expected an array of integers, found %s", path,
                         name, json_type_name(sh->type));
    if (sh->length > FFN_ST_MAX_DIMS)
        return ffn_error(FFN_ERR_FORMAT, "%s: %s: shape: expected at most %d dimensions, found %zu", path,
                         name, FFN_ST_MAX_DIMS, sh->length);
    e->ndim = (int)sh->length;
    int64_t numel = 1;
    for (int d = 0; d < e->ndim; d++) {
        const json_value *dim = sh->items[d];
        if (dim->type != JSON_NUMBER || !dim->is_integer)
            return ffn_error(FFN_ERR_FORMAT, "%s: %s: shape[%d]: expected an integer, found %s", path, name,
                             d, dim->type == JSON_NUMBER ? "a non-integer number" : json_type_name(dim->type));
        if (dim->integer < 0)
            return ffn_error(FFN_ERR_FORMAT, "%s: %s: shape[%d]: expected a dimension >= 0, found %" PRId64,
                             path, name, d, dim->integer);
        e->shape[d] = dim->integer;
        if (ffn_mul_i64(numel, dim->integer, &numel))
            return ffn_error(FFN_ERR_FORMAT, "%s: %s: shape: the number of elements overflows 64 bits", path,
                             name);
    }
    e->numel = numel;

    const json_value *off = json_get(v, "data_offsets");
    if (!off) return ffn_error(FFN_ERR_FORMAT, "%s: %s: missing \"data_offsets\"", path, name);
    if (off->type != JSON_ARRAY || off->length != 2)
        return ffn_error(FFN_ERR_FORMAT, "%s: %s: data_offsets: expected an array [begin, end], found %s%s",
                         path, name, json_type_name(off->type),
                         off->type == JSON_ARRAY ? (off->length < 2 ? " of fewer than 2" : " of more than 2") : "");
    for (int k = 0; k < 2; k++) {
        const json_value *o = off->items[k];
        if (o->type != JSON_NUMBER || !o->is_integer || o->integer < 0)
            return ffn_error(FFN_ERR_FORMAT, "%s: %s: data_offsets[%d]: expected an integer >= 0, found %s", path,
                             name, k,
                             o->type != JSON_NUMBER ? json_type_name(o->type)
                             : o->is_integer        ? "a negative integer"
                                                    : "a non-integer number");
    }
    e->begin = (uint64_t)off->items[0]->integer;
    e->end = (uint64_t)off->items[1]->integer;
    if (e->begin > e->end)
        return ffn_error(FFN_ERR_FORMAT, "%s: %s: data_offsets [%" PRIu64 ", %" PRIu64 "]: expected begin <= end",
                         path, name, e->begin, e->end);
    if (e->end > data_size)
        return ffn_error(FFN_ERR_FORMAT,
                         "%s: %s: data_offsets [%" PRIu64 ", %" PRIu64 "] out of range (expected end <= %" PRIu64
                         ", the size of the data buffer)",
                         path, name, e->begin, e->end, data_size);
    int64_t nbytes;
    char buf[256];
    if (ffn_mul_i64(numel, (int64_t)ffn_dtype_size(e->dtype), &nbytes))
        return ffn_error(FFN_ERR_FORMAT, "%s: %s: shape %s x %s overflows 64 bits", path, name,
                         shape_str(buf, sizeof buf, e->ndim, e->shape), ffn_dtype_name(e->dtype));
    if ((uint64_t)nbytes != e->end - e->begin)
        return ffn_error(FFN_ERR_FORMAT,
                         "%s: %s: shape %s x %s (%zu bytes) = %" PRId64 " bytes expected, but data_offsets [%" PRIu64
                         ", %" PRIu64 "] span %" PRIu64 " bytes",
                         path, name, shape_str(buf, sizeof buf, e->ndim, e->shape), ffn_dtype_name(e->dtype),
                         ffn_dtype_size(e->dtype), nbytes, e->begin, e->end, e->end - e->begin);
    return FFN_OK;
}

static ffn_status parse_metadata(ffn_st_file *f, const json_value *m) {
    if (m->type != JSON_OBJECT)
        return ffn_error(FFN_ERR_FORMAT, "%s: __metadata__: expected an object of strings, found %s", f->path,
                         json_type_name(m->type));
    f->n_meta = m->length;
    f->meta_keys = malloc((m->length ? m->length : 1) * sizeof *f->meta_keys);
    f->meta_values = malloc((m->length ? m->length : 1) * sizeof *f->meta_values);
    if (!f->meta_keys || !f->meta_values) return ffn_error(FFN_ERR_NOMEM, "%s: out of memory", f->path);
    for (size_t k = 0; k < m->length; k++) {
        if (m->items[k]->type != JSON_STRING)
            return ffn_error(FFN_ERR_FORMAT, "%s: __metadata__: %.200s: expected a string value, found %s",
                             f->path, m->keys[k], json_type_name(m->items[k]->type));
        f->meta_keys[k] = m->keys[k];
        f->meta_values[k] = m->items[k]->string;
    }
    return FFN_OK;
}

/* Validate the mapped bytes f->base[0, f->size). */
static ffn_status validate(ffn_st_file *f) {
    const char *path = f->path;
    if (f->size < 8)
        return ffn_error(FFN_ERR_FORMAT,
                         "%s: file too short: expected at least 8 bytes (the header length), found %zu", path,
                         f->size);
    ffn_sniff kind = ffn_sniff_bytes(f->base, f->size);
    if (ffn_sniff_is_magic(kind) && kind != FFN_SNIFF_SAFETENSORS)
        return ffn_error(FFN_ERR_FORMAT, "%s is %s, not a safetensors file%s%s", path,
                         ffn_sniff_name(kind), kind == FFN_SNIFF_GGUF ? "; " : "",
                         kind == FFN_SNIFF_GGUF ? ffn_sniff_advice(kind) : "");
    uint64_t header_len;
    memcpy(&header_len, f->base, 8);
    if (header_len == 0)
        return ffn_error(FFN_ERR_FORMAT, "%s: header length is 0 (expected a JSON object of at least 2 bytes)",
                         path);
    if (header_len > FFN_ST_MAX_HEADER)
        return ffn_error(FFN_ERR_FORMAT,
                         "%s: header length %" PRIu64 " is absurd (expected at most %" PRIu64
                         " bytes; not a safetensors file?)",
                         path, header_len, FFN_ST_MAX_HEADER);
    if (header_len > f->size - 8)
        return ffn_error(FFN_ERR_FORMAT,
                         "%s: header length %" PRIu64 " exceeds the file (expected at most %zu bytes after "
                         "the 8-byte length; truncated file?)",
                         path, header_len, f->size - 8);
    f->data_start = 8 + header_len;
    uint64_t data_size = f->size - f->data_start;

    char what[1100];
    snprintf(what, sizeof what, "%s: JSON header", path);
    /* A valid header needs about 6-12 bytes of parse tree per header byte
     * (one entry of ~50 bytes is 7+ values of 64 bytes); the cap keeps a
     * hostile header such as {"a":[0,0,0,...]} from costing 40x its size. */
    ffn_status s = json_parse_bounded((const char *)f->base + 8, (size_t)header_len, what,
                                      16 * (size_t)header_len + ((size_t)1 << 20), &f->header);
    if (s != FFN_OK) return s;
    const json_value *root = json_root(f->header);
    if (root->type != JSON_OBJECT)
        return ffn_error(FFN_ERR_FORMAT, "%s: JSON header: expected an object, found %s", path,
                         json_type_name(root->type));

    f->entries = malloc((root->length ? root->length : 1) * sizeof *f->entries);
    if (!f->entries) return ffn_error(FFN_ERR_NOMEM, "%s: out of memory for %zu tensors", path, root->length);
    for (size_t k = 0; k < root->length; k++) {
        if (!strcmp(root->keys[k], "__metadata__")) {
            s = parse_metadata(f, root->items[k]);
        } else {
            s = parse_entry(f, root->keys[k], root->items[k], data_size, &f->entries[f->n]);
            if (s == FFN_OK) f->n++;
        }
        if (s != FFN_OK) return s;
    }

    /* The data buffer must be covered exactly: sorted by offset, each tensor
     * starts where the previous one ended, the first at 0, the last at the
     * end of the file.  (Zero-sized tensors sort first at their offset.) */
    qsort(f->entries, f->n, sizeof *f->entries, compare_by_offset);
    uint64_t pos = 0;
    const char *prev = NULL;
    for (size_t k = 0; k < f->n; k++) {
        const st_entry *e = &f->entries[k];
        if (e->begin < pos)
            return ffn_error(FFN_ERR_FORMAT,
                             "%s: %s: data_offsets [%" PRIu64 ", %" PRIu64 "] overlap tensor %s (expected begin >= %" PRIu64 ")",
                             path, e->name, e->begin, e->end, prev, pos);
        if (e->begin > pos)
            return ffn_error(FFN_ERR_FORMAT,
                             "%s: %s: data_offsets [%" PRIu64 ", %" PRIu64 "] leave a gap of %" PRIu64
                             " bytes after %s%s (expected begin = %" PRIu64 ")",
                             path, e->name, e->begin, e->end, e->begin - pos, prev ? "tensor " : "",
                             prev ? prev : "the start of the data", pos);
        pos = e->end;
        prev = e->name;
    }
    if (pos != data_size)
        return ffn_error(FFN_ERR_FORMAT,
                         "%s: the tensors cover %" PRIu64 " bytes of data but the file holds %" PRIu64
                         " (expected them to cover the data buffer exactly; %" PRIu64 " trailing bytes)",
                         path, pos, data_size, data_size - pos);

    f->by_name = malloc((f->n ? f->n : 1) * sizeof *f->by_name);
    if (!f->by_name) return ffn_error(FFN_ERR_NOMEM, "%s: out of memory", path);
    for (size_t k = 0; k < f->n; k++) f->by_name[k] = &f->entries[k];
    qsort(f->by_name, f->n, sizeof *f->by_name, compare_by_name);
    return FFN_OK;
}

FFN_VIEW_OPENS(ffn_st, ffn_st_file, validate, ffn_st_close)

/* ---- lookups ---------------------------------------------------------- */

static void fill_tensor(const ffn_st_file *f, const st_entry *e, ffn_st_tensor *t) {
    memset(t, 0, sizeof *t);
    t->name = e->name;
    t->dtype = e->dtype;
    t->ndim = e->ndim;
    memcpy(t->shape, e->shape, sizeof t->shape);
    t->numel = e->numel;
    t->nbytes = (size_t)(e->end - e->begin);
    t->offset = (size_t)(f->data_start + e->begin);
    t->data = f->base + t->offset;
}

size_t ffn_st_count(const ffn_st_file *file) { return file ? file->n : 0; }

ffn_status ffn_st_get(const ffn_st_file *file, size_t i, ffn_st_tensor *out) {
    if (!file || !out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_st_get: file or out is NULL");
    if (i >= file->n)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: tensor index %zu out of range (the file holds %zu)", file->path,
                         i, file->n);
    fill_tensor(file, &file->entries[i], out);
    return FFN_OK;
}

static const st_entry *lookup(const ffn_st_file *file, const char *name) {
    if (!file || !name) return NULL;
    size_t lo = 0, hi = file->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, file->by_name[mid]->name);
        if (c == 0) return file->by_name[mid];
        if (c < 0) hi = mid;
        else lo = mid + 1;
    }
    return NULL;
}

int ffn_st_has(const ffn_st_file *file, const char *name) { return lookup(file, name) != NULL; }

ffn_status ffn_st_find(const ffn_st_file *file, const char *name, ffn_st_tensor *out) {
    if (!file || !name || !out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_st_find: an argument is NULL");
    const st_entry *e = lookup(file, name);
    if (!e)
        return ffn_error(FFN_ERR_MISSING, "%s: %s: tensor not found (the file holds %zu tensors)", file->path, name,
                         file->n);
    fill_tensor(file, e, out);
    return FFN_OK;
}

const char *ffn_st_metadata(const ffn_st_file *file, const char *key) {
    if (!file || !key) return NULL;
    for (size_t k = 0; k < file->n_meta; k++)
        if (!strcmp(file->meta_keys[k], key)) return file->meta_values[k];
    return NULL;
}

size_t ffn_st_metadata_count(const ffn_st_file *file) { return file ? file->n_meta : 0; }

ffn_status ffn_st_metadata_at(const ffn_st_file *file, size_t i, const char **key, const char **value) {
    if (!file || i >= file->n_meta)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_st_metadata_at: index %zu out of range", i);
    if (key) *key = file->meta_keys[i];
    if (value) *value = file->meta_values[i];
    return FFN_OK;
}

/* ---- fp32 access ------------------------------------------------------ */

ffn_status ffn_st_check_shape(const ffn_st_file *file, const ffn_st_tensor *t, int ndim,
                              const int64_t *expected_shape) {
    if (!t) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_st_check_shape: tensor is NULL");
    if (!expected_shape) return FFN_OK;
    int same = ndim == t->ndim;
    for (int d = 0; same && d < ndim; d++) same = expected_shape[d] == t->shape[d];
    if (same) return FFN_OK;
    char want[256], got[256];
    if (ndim < 0 || ndim > FFN_ST_MAX_DIMS) ndim = ndim < 0 ? 0 : FFN_ST_MAX_DIMS;
    return ffn_error(FFN_ERR_SHAPE, "%s: %s: expected shape %s, found %s", ffn_st_path(file), t->name,
                     shape_str(want, sizeof want, ndim, expected_shape),
                     shape_str(got, sizeof got, t->ndim, t->shape));
}

ffn_status ffn_st_tensor_to_f32(const ffn_st_file *file, const ffn_st_tensor *t, float *dst) {
    if (!t || (!dst && t->numel)) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_st_tensor_to_f32: NULL argument");
    const unsigned char *src = t->data;
    size_t n = (size_t)t->numel;
    switch (t->dtype) {
    case FFN_DTYPE_F32:
        if (n) memcpy(dst, src, n * 4);
        return FFN_OK;
    case FFN_DTYPE_F16:
    case FFN_DTYPE_BF16:
        ffn_halves_to_f32(dst, src, n, t->dtype == FFN_DTYPE_BF16);
        return FFN_OK;
    case FFN_DTYPE_F64:
        ffn_f64_bytes_to_f32(dst, src, n);
        return FFN_OK;
    default:
        return ffn_error(FFN_ERR_FORMAT, "%s: %s: expected a floating-point dtype (F32, F16, BF16 or F64), found %s",
                         ffn_st_path(file), t->name, ffn_dtype_name(t->dtype));
    }
}

/* find + shape check + dtype check, shared by read/load/view. */
static ffn_status find_float(const ffn_st_file *file, const char *name, int ndim, const int64_t *expected_shape,
                             ffn_st_tensor *t) {
    ffn_status s = ffn_st_find(file, name, t);
    if (s != FFN_OK) return s;
    s = ffn_st_check_shape(file, t, ndim, expected_shape);
    if (s != FFN_OK) return s;
    if (!dtype_is_float(t->dtype))
        return ffn_error(FFN_ERR_FORMAT, "%s: %s: expected a floating-point dtype (F32, F16, BF16 or F64), found %s",
                         file->path, name, ffn_dtype_name(t->dtype));
    return FFN_OK;
}

ffn_status ffn_st_read_f32(const ffn_st_file *file, const char *name, int ndim, const int64_t *expected_shape,
                           float *dst) {
    ffn_st_tensor t;
    ffn_status s = find_float(file, name, ndim, expected_shape, &t);
    if (s != FFN_OK) return s;
    return ffn_st_tensor_to_f32(file, &t, dst);
}

ffn_status ffn_st_load_f32(const ffn_st_file *file, const char *name, int ndim, const int64_t *expected_shape,
                           float **out) {
    if (!out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_st_load_f32: out is NULL");
    *out = NULL;
    ffn_st_tensor t;
    ffn_status s = find_float(file, name, ndim, expected_shape, &t);
    if (s != FFN_OK) return s;
    float *buf;
    if ((s = float_buf_alloc(t.numel, file->path, name, &buf))) return s;
    return float_buf_done(ffn_st_tensor_to_f32(file, &t, buf), buf, out);
}

ffn_status ffn_st_view_f32(const ffn_st_file *file, const char *name, int ndim, const int64_t *expected_shape,
                           const float **out) {
    if (!out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_st_view_f32: out is NULL");
    *out = NULL;
    ffn_st_tensor t;
    ffn_status s = find_float(file, name, ndim, expected_shape, &t);
    if (s != FFN_OK) return s;
    if (t.dtype != FFN_DTYPE_F32)
        return ffn_error(FFN_ERR_UNSUPPORTED, "%s: %s: zero-copy view needs F32, found %s (load it instead)",
                         file->path, name, ffn_dtype_name(t.dtype));
    if ((uintptr_t)t.data % sizeof(float))
        return ffn_error(FFN_ERR_UNSUPPORTED, "%s: %s: data at file offset %zu is not 4-byte aligned (load it instead)",
                         file->path, name, t.offset);
    *out = t.data;
    return FFN_OK;
}

/* ---- the writer ------------------------------------------------------- */

typedef struct st_item {
    char *name;
    ffn_dtype dtype;
    int ndim;
    int64_t shape[FFN_ST_MAX_DIMS];
    size_t nbytes;
    const void *data; /* the caller's, or `owned` */
    void *owned;
    ffn_st_source next; /* or the pieces of a source */
    void *next_user;
    size_t order;     /* insertion index */
} st_item;

struct ffn_st_writer {
    st_item *items;
    size_t n, cap;
    char **meta_keys, **meta_values;
    size_t n_meta, cap_meta;
    size_t *slots;  /* (n_slots) item index + 1 by name hash, 0 empty; at most half full */
    size_t n_slots; /* a power of two */
};

/* The duplicate-name check is a hash lookup: a model of 450,000 tensors
 * is written without comparing every name with every other. */
static size_t name_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (size_t)h;
}

static size_t *name_slot(const ffn_st_writer *w, const char *name) {
    size_t h = name_hash(name) & (w->n_slots - 1);
    while (w->slots[h] && strcmp(w->items[w->slots[h] - 1].name, name)) h = (h + 1) & (w->n_slots - 1);
    return &w->slots[h];
}

static int names_reserve(ffn_st_writer *w, size_t n) {
    if (w->n_slots >= 2 * n && w->n_slots > 0) return 1;
    size_t ns = w->n_slots ? w->n_slots : 32;
    while (ns < 2 * n) ns *= 2;
    size_t *slots = calloc(ns, sizeof *slots);
    if (!slots) return 0;
    free(w->slots);
    w->slots = slots;
    w->n_slots = ns;
    for (size_t i = 0; i < w->n; i++) *name_slot(w, w->items[i].name) = i + 1;
    return 1;
}

ffn_status ffn_st_writer_create(ffn_st_writer **out) {
    if (!out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_st_writer_create: out is NULL");
    *out = calloc(1, sizeof **out);
    return *out ? FFN_OK : ffn_error(FFN_ERR_NOMEM, "ffn_st_writer_create: out of memory");
}

void ffn_st_writer_free(ffn_st_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n; i++) {
        free(w->items[i].name);
        free(w->items[i].owned);
    }
    for (size_t i = 0; i < w->n_meta; i++) {
        free(w->meta_keys[i]);
        free(w->meta_values[i]);
    }
    free(w->items);
    free(w->slots);
    free(w->meta_keys);
    free(w->meta_values);
    free(w);
}

/* Check the arguments of an add (data may be NULL only for an empty
 * tensor) and append an item without data. */
static ffn_status add_item(ffn_st_writer *w, const char *name, ffn_dtype dtype, int ndim, const int64_t *shape,
                           const void *data, st_item **out) {
    if (!w || !name) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_st_writer_add: writer or name is NULL");
    size_t len = strlen(name);
    if (len == 0 || !json_utf8_valid(name, len) || !strcmp(name, "__metadata__"))
        return ffn_error(FFN_ERR_INVALID_ARG,
                         "safetensors writer: tensor name '%.200s': expected a non-empty UTF-8 name other than "
                         "__metadata__",
                         name);
    if (!dtype_valid(dtype))
        return ffn_error(FFN_ERR_INVALID_ARG, "safetensors writer: %s: invalid dtype %d", name, (int)dtype);
    if (ndim < 0 || ndim > FFN_ST_MAX_DIMS || (ndim > 0 && !shape))
        return ffn_error(FFN_ERR_INVALID_ARG, "safetensors writer: %s: expected 0..%d dimensions, found %d", name,
                         FFN_ST_MAX_DIMS, ndim);
    int64_t numel = 1, nbytes;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return ffn_error(FFN_ERR_INVALID_ARG, "safetensors writer: %s: shape[%d]: expected >= 0, found %" PRId64,
                             name, d, shape[d]);
        if (ffn_mul_i64(numel, shape[d], &numel))
            return ffn_error(FFN_ERR_OVERFLOW, "safetensors writer: %s: shape overflows 64 bits", name);
    }
    if (ffn_mul_i64(numel, (int64_t)ffn_dtype_size(dtype), &nbytes) || (uint64_t)nbytes > SIZE_MAX)
        return ffn_error(FFN_ERR_OVERFLOW, "safetensors writer: %s: byte size overflows", name);
    if (!data && nbytes) return ffn_error(FFN_ERR_INVALID_ARG, "safetensors writer: %s: data is NULL", name);
    if (!names_reserve(w, w->n + 1)) return ffn_error(FFN_ERR_NOMEM, "safetensors writer: out of memory");
    if (*name_slot(w, name))
        return ffn_error(FFN_ERR_INVALID_ARG, "safetensors writer: %s: a tensor of this name was already added",
                         name);
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 16;
        st_item *items = realloc(w->items, cap * sizeof *items);
        if (!items) return ffn_error(FFN_ERR_NOMEM, "safetensors writer: out of memory");
        w->items = items;
        w->cap = cap;
    }
    st_item *it = &w->items[w->n];
    memset(it, 0, sizeof *it);
    it->name = strdup(name);
    if (!it->name) return ffn_error(FFN_ERR_NOMEM, "safetensors writer: out of memory");
    it->dtype = dtype;
    it->ndim = ndim;
    for (int d = 0; d < ndim; d++) it->shape[d] = shape[d];
    it->nbytes = (size_t)nbytes;
    it->order = w->n;
    w->n++;
    *name_slot(w, it->name) = w->n;
    *out = it;
    return FFN_OK;
}

/* Give the item add_item just appended a buffer of its own; on failure the
 * item is taken back (and the name table rebuilt on the next add). */
static ffn_status own_buffer(ffn_st_writer *w, st_item *it) {
    it->owned = malloc(it->nbytes ? it->nbytes : 1);
    if (it->owned) return FFN_OK;
    ffn_status s = ffn_error(FFN_ERR_NOMEM, "safetensors writer: %s: out of memory for %zu bytes", it->name,
                             it->nbytes);
    free(it->name);
    w->n--;
    free(w->slots);
    w->slots = NULL;
    w->n_slots = 0;
    return s;
}

ffn_status ffn_st_writer_add(ffn_st_writer *w, const char *name, ffn_dtype dtype, int ndim, const int64_t *shape,
                             const void *data) {
    st_item *it;
    ffn_status s = add_item(w, name, dtype, ndim, shape, data, &it);
    if (s != FFN_OK) return s;
    it->data = data;
    return FFN_OK;
}

ffn_status ffn_st_writer_add_source(ffn_st_writer *w, const char *name, ffn_dtype dtype, int ndim,
                                    const int64_t *shape, ffn_st_source next, void *user) {
    if (!next) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_st_writer_add_source: next is NULL");
    st_item *it;
    ffn_status s = add_item(w, name, dtype, ndim, shape, (const void *)next, &it);
    if (s != FFN_OK) return s;
    it->next = next;
    it->next_user = user;
    return FFN_OK;
}

static int write_all(int fd, const void *data, size_t n);

/* A source's pieces, written as they come. */
static ffn_status write_source(int fd, const st_item *it, int *io_err) {
    size_t done = 0;
    while (done < it->nbytes) {
        const void *p = NULL;
        size_t n = 0;
        ffn_status s = it->next(it->next_user, &p, &n);
        if (s != FFN_OK) return s;
        if (n == 0 || !p || n > it->nbytes - done)
            return ffn_error(FFN_ERR_INVALID_ARG, "safetensors writer: %s: a piece of %zu bytes at "
                             "byte %zu of %zu", it->name, n, done, it->nbytes);
        if (!write_all(fd, p, n)) {
            *io_err = 1;
            return FFN_OK;
        }
        done += n;
    }
    return FFN_OK;
}

ffn_status ffn_st_writer_add_copy(ffn_st_writer *w, const char *name, ffn_dtype dtype, int ndim,
                                  const int64_t *shape, const void *data) {
    st_item *it;
    ffn_status s = add_item(w, name, dtype, ndim, shape, data, &it);
    if (s == FFN_OK) s = own_buffer(w, it);
    if (s != FFN_OK) return s;
    if (it->nbytes) memcpy(it->owned, data, it->nbytes);
    it->data = it->owned;
    return FFN_OK;
}

ffn_status ffn_st_writer_add_f32(ffn_st_writer *w, const char *name, ffn_dtype dtype, int ndim,
                                 const int64_t *shape, const float *data) {
    if (!dtype_is_float(dtype))
        return ffn_error(FFN_ERR_INVALID_ARG, "safetensors writer: %s: expected F32, F16, BF16 or F64, found %s",
                         name ? name : "?", ffn_dtype_name(dtype));
    st_item *it;
    ffn_status s = add_item(w, name, dtype, ndim, shape, data, &it);
    if (s == FFN_OK) s = own_buffer(w, it);
    if (s != FFN_OK) return s;
    size_t n = it->nbytes / ffn_dtype_size(dtype);
    unsigned char *buf = it->owned;
    for (size_t i = 0; i < n; i++) {
        if (dtype == FFN_DTYPE_F32) {
            memcpy(buf + 4 * i, &data[i], 4);
        } else if (dtype == FFN_DTYPE_F64) {
            double x = data[i];
            memcpy(buf + 8 * i, &x, 8);
        } else {
            uint16_t h = dtype == FFN_DTYPE_F16 ? ffn_f32_to_f16(data[i]) : ffn_f32_to_bf16(data[i]);
            memcpy(buf + 2 * i, &h, 2);
        }
    }
    it->data = buf;
    return FFN_OK;
}

ffn_status ffn_st_writer_set_metadata(ffn_st_writer *w, const char *key, const char *value) {
    if (!w || !key || !value)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_st_writer_set_metadata: an argument is NULL");
    if (!json_utf8_valid(key, strlen(key)) || !json_utf8_valid(value, strlen(value)))
        return ffn_error(FFN_ERR_INVALID_ARG, "safetensors writer: __metadata__: %.200s: expected valid UTF-8", key);
    char *v = strdup(value);
    if (!v) return ffn_error(FFN_ERR_NOMEM, "safetensors writer: out of memory");
    for (size_t i = 0; i < w->n_meta; i++) {
        if (!strcmp(w->meta_keys[i], key)) {
            free(w->meta_values[i]);
            w->meta_values[i] = v;
            return FFN_OK;
        }
    }
    if (w->n_meta == w->cap_meta) {
        size_t cap = w->cap_meta ? 2 * w->cap_meta : 8;
        char **keys = realloc(w->meta_keys, cap * sizeof *keys);
        if (keys) w->meta_keys = keys;
        char **values = keys ? realloc(w->meta_values, cap * sizeof *values) : NULL;
        if (values) w->meta_values = values;
        if (!keys || !values) {
            free(v);
            return ffn_error(FFN_ERR_NOMEM, "safetensors writer: out of memory");
        }
        w->cap_meta = cap;
    }
    char *k = strdup(key);
    if (!k) {
        free(v);
        return ffn_error(FFN_ERR_NOMEM, "safetensors writer: out of memory");
    }
    w->meta_keys[w->n_meta] = k;
    w->meta_values[w->n_meta] = v;
    w->n_meta++;
    return FFN_OK;
}

/* Data order: larger elements first (so each tensor is aligned to its
 * element size, the data buffer starting at a multiple of 8), then the
 * order of addition. */
static int compare_items(const void *a, const void *b) {
    const st_item *const *x = a, *const *y = b;
    size_t sx = ffn_dtype_size((*x)->dtype), sy = ffn_dtype_size((*y)->dtype);
    if (sx != sy) return sx > sy ? -1 : 1;
    return ((*x)->order > (*y)->order) - ((*x)->order < (*y)->order);
}

/* The header JSON, padded with spaces to a multiple of 8 bytes. */
static ffn_status build_header(const ffn_st_writer *w, const st_item *const *order, const char *path,
                               char **out, size_t *out_len) {
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) return ffn_error(FFN_ERR_NOMEM, "%s: out of memory for the header", path);
    fputc('{', m);
    int first = 1;
    if (w->n_meta) {
        fputs("\"__metadata__\":{", m);
        for (size_t i = 0; i < w->n_meta; i++) {
            if (i) fputc(',', m);
            json_write_string(m, w->meta_keys[i]);
            fputc(':', m);
            json_write_string(m, w->meta_values[i]);
        }
        fputc('}', m);
        first = 0;
    }
    uint64_t offset = 0;
    for (size_t i = 0; i < w->n; i++) {
        const st_item *it = order[i];
        if (!first) fputc(',', m);
        first = 0;
        json_write_string(m, it->name);
        fprintf(m, ":{\"dtype\":\"%s\",\"shape\":[", ffn_dtype_name(it->dtype));
        for (int d = 0; d < it->ndim; d++) fprintf(m, "%s%" PRId64, d ? "," : "", it->shape[d]);
        fprintf(m, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", offset, offset + it->nbytes);
        offset += it->nbytes;
    }
    fputc('}', m);
    while ((ftell(m) % 8) != 0) fputc(' ', m);
    if (fclose(m) != 0 || !buf) {
        free(buf);
        return ffn_error(FFN_ERR_NOMEM, "%s: out of memory for the header", path);
    }
    *out = buf;
    *out_len = len;
    return FFN_OK;
}

static int write_all(int fd, const void *data, size_t n) {
    const unsigned char *p = data;
    while (n > 0) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t r = write(fd, p, chunk);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = EIO;
            return 0;
        }
        p += r;
        n -= (size_t)r;
    }
    return 1;
}

/* The process umask, read without changing it (umask(2) would race with
 * other threads creating files). */
static mode_t current_umask(void) {
    mode_t mask = 022;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return mask;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        unsigned v;
        if (sscanf(line, "Umask: %o", &v) == 1) {
            mask = (mode_t)v;
            break;
        }
    }
    fclose(f);
    return mask;
}

ffn_status ffn_st_writer_save(const ffn_st_writer *w, const char *path) {
    if (!w || !path || !*path) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_st_writer_save: writer or path is NULL");
    const st_item **order = malloc((w->n ? w->n : 1) * sizeof *order);
    if (!order) return ffn_error(FFN_ERR_NOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < w->n; i++) order[i] = &w->items[i];
    qsort(order, w->n, sizeof *order, compare_items);

    char *header = NULL;
    size_t header_len = 0;
    ffn_status s = build_header(w, order, path, &header, &header_len);
    if (s != FFN_OK) {
        free(order);
        return s;
    }

    /* The temporary file lives next to the target so that rename(2) is an
     * atomic replacement on the same file system. */
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    char *dir_copy = strdup(path);
    if (!tmp || !dir_copy) {
        free(order);
        free(header);
        free(tmp);
        free(dir_copy);
        return ffn_error(FFN_ERR_NOMEM, "%s: out of memory", path);
    }
    snprintf(tmp, plen + 16, "%s.tmp.XXXXXX", path);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        s = ffn_error(FFN_ERR_IO, "%s: cannot create a temporary file in its directory: %s", path, strerror(errno));
        goto done;
    }
    /* mkstemp creates 0600; give the file the mode open(2) would have. */
    if (fchmod(fd, 0666 & ~current_umask()) != 0) { /* best effort */ }
    uint64_t n = header_len;
    const char *step = "write";
    int ok = write_all(fd, &n, 8) && write_all(fd, header, header_len);
    for (size_t i = 0; ok && i < w->n; i++) {
        if (!order[i]->nbytes) continue;
        if (!order[i]->next) {
            ok = write_all(fd, order[i]->data, order[i]->nbytes);
            continue;
        }
        int io_err = 0;
        s = write_source(fd, order[i], &io_err);
        if (s != FFN_OK) { /* the source's error, the file not left */
            close(fd);
            unlink(tmp);
            goto done;
        }
        ok = !io_err;
    }
    if (ok) {
        step = "fsync";
        ok = fsync(fd) == 0;
    }
    int err = errno;
    if (close(fd) != 0 && ok) {
        ok = 0;
        err = errno;
        step = "close";
    }
    if (!ok) {
        unlink(tmp);
        s = ffn_error(FFN_ERR_IO, "%s: cannot %s the temporary file %s: %s", path, step, tmp, strerror(err));
        goto done;
    }
    if (rename(tmp, path) != 0) {
        err = errno;
        unlink(tmp);
        s = ffn_error(FFN_ERR_IO, "%s: cannot rename the temporary file over it: %s", path, strerror(err));
        goto done;
    }
    /* Make the rename itself durable. */
    int dfd = open(dirname(dir_copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    s = FFN_OK;
done:
    free(order);
    free(header);
    free(tmp);
    free(dir_copy);
    return s;
}
