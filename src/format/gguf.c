/* gguf.c -- GGUF files: a validating memory-mapped reader (versions 2 and
 * 3) and an atomic writer (version 3).  The format and the promises are in
 * include/ffn/gguf.h; the tensor types are src/kernels/quant.c.
 *
 * Reading checks every count, length, type and offset against the bytes
 * left before it allocates or reads, with 64-bit overflow-checked
 * arithmetic, so that later code may trust every tensor it is handed.
 * Strings (keys, names, values) are copied once into one arena with a NUL
 * after each; tensor data and fixed-size arrays stay in the mapping.
 * Messages read "<file>: <key or tensor>: <what>: expected X, found Y". */
#include "ffn/gguf.h"

#include "base/common.h"
#include "base/open.h"
#include "format/float_buf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf.c assumes a little-endian host (GGUF files are little-endian)"
#endif

#define GGUF_ALIGNMENT_KEY "general.alignment"
/* the most metadata entries and tensors a file may declare (see ffn_gguf_open) */
#define GGUF_MAX_KV 65536
#define GGUF_MAX_TENSORS (1 << 20)

/* ---- value types -------------------------------------------------------- */

static const struct {
    const char *name;
    size_t size;
} vtypes[FFN_GGUF_VTYPE_COUNT] = {
    {"uint8", 1}, {"int8", 1},    {"uint16", 2}, {"int16", 2}, {"uint32", 4}, {"int32", 4},  {"float32", 4},
    {"bool", 1},  {"string", 0}, {"array", 0},  {"uint64", 8}, {"int64", 8}, {"float64", 8},
};

const char *ffn_gguf_vtype_name(ffn_gguf_vtype type) {
    return (unsigned)type < FFN_GGUF_VTYPE_COUNT ? vtypes[type].name : "?";
}

size_t ffn_gguf_vtype_size(ffn_gguf_vtype type) {
    return (unsigned)type < FFN_GGUF_VTYPE_COUNT ? vtypes[type].size : 0;
}

/* The fewest bytes one element of an array of this type can take. */
static uint64_t min_element_bytes(uint32_t type) {
    if (type == FFN_GGUF_VTYPE_STRING) return 8;                  /* the length */
    if (type == FFN_GGUF_VTYPE_ARRAY) return 12;                  /* type + count */
    return vtypes[type].size;
}

/* ---- the reader's structures --------------------------------------------- */

typedef struct gg_str { /* a string in the arena */
    uint64_t off, len;
} gg_str;

typedef struct gg_arr {
    const struct ffn_gguf_file *file;
    uint32_t type;
    uint64_t count;
    const uint8_t *data;  /* fixed-size elements, in the mapping */
    gg_str *strs;         /* STRING elements */
    struct gg_arr *subs;  /* ARRAY elements */
} gg_arr;

typedef struct gg_kv {
    gg_str key;
    uint32_t type;
    const uint8_t *raw; /* fixed-size value, in the mapping */
    gg_str str;
    gg_arr arr;
} gg_kv;

typedef struct gg_tensor {
    gg_str name;
    uint32_t type;
    int n_dims;
    int64_t ne[FFN_GGUF_MAX_DIMS];
    int64_t numel;
    size_t nbytes;
    uint64_t offset; /* from the start of the data section */
} gg_tensor;

struct ffn_gguf_file {
    FFN_VIEW_HEAD
    uint32_t version;
    size_t alignment;
    uint64_t data_offset;
    gg_kv *kvs;
    size_t n_kv;
    size_t *kv_by_key;
    gg_tensor *tensors;
    size_t n_tensors;
    size_t *t_by_name;
    char *arena;
    size_t arena_len, arena_cap;
};

static void free_arr(gg_arr *a) {
    if (a->subs)
        for (uint64_t i = 0; i < a->count; i++) free_arr(&a->subs[i]);
    free(a->subs);
    free(a->strs);
    a->subs = NULL;
    a->strs = NULL;
}

void ffn_gguf_close(ffn_gguf_file *f) {
    if (!f) return;
    for (size_t i = 0; i < f->n_kv; i++) free_arr(&f->kvs[i].arr);
    free(f->kvs);
    free(f->kv_by_key);
    free(f->tensors);
    free(f->t_by_name);
    free(f->arena);
    if (f->map) munmap(f->map, f->map_size);
    free(f->path);
    free(f);
}

static const char *arena_str(const ffn_gguf_file *f, gg_str s) { return f->arena + s.off; }

/* ---- the cursor ------------------------------------------------------------ */

typedef struct rd {
    ffn_gguf_file *f;
    size_t pos;
} rd;

static uint64_t left(const rd *r) { return r->f->size - r->pos; }

static ffn_status short_read(const rd *r, const char *ctx, const char *what, uint64_t need) {
    return ffn_error(FFN_ERR_FORMAT, "%s: %s: %s: expected %" PRIu64 " bytes at offset %zu, found %" PRIu64
                     " (truncated file?)", r->f->path, ctx, what, need, r->pos, left(r));
}

static ffn_status rd_u32(rd *r, const char *ctx, const char *what, uint32_t *out) {
    if (left(r) < 4) return short_read(r, ctx, what, 4);
    memcpy(out, r->f->base + r->pos, 4);
    r->pos += 4;
    return FFN_OK;
}

static ffn_status rd_u64(rd *r, const char *ctx, const char *what, uint64_t *out) {
    if (left(r) < 8) return short_read(r, ctx, what, 8);
    memcpy(out, r->f->base + r->pos, 8);
    r->pos += 8;
    return FFN_OK;
}

/* A string into the arena (NUL appended). */
static ffn_status rd_string(rd *r, const char *ctx, const char *what, gg_str *out) {
    uint64_t len;
    ffn_status s = rd_u64(r, ctx, what, &len);
    if (s != FFN_OK) return s;
    if (len > left(r))
        return ffn_error(FFN_ERR_FORMAT, "%s: %s: %s: length %" PRIu64 " at offset %zu: expected at most the %" PRIu64
                         " bytes left in the file", r->f->path, ctx, what, len, r->pos - 8, left(r));
    ffn_gguf_file *f = r->f;
    if (f->arena_cap - f->arena_len < len + 1) {
        size_t cap = f->arena_cap ? f->arena_cap : 4096;
        while (cap - f->arena_len < len + 1) cap *= 2; /* len < file size: cannot overflow */
        char *a = realloc(f->arena, cap);
        if (!a) return ffn_error(FFN_ERR_NOMEM, "%s: out of memory for strings", f->path);
        f->arena = a;
        f->arena_cap = cap;
    }
    memcpy(f->arena + f->arena_len, f->base + r->pos, len);
    f->arena[f->arena_len + len] = '\0';
    out->off = f->arena_len;
    out->len = len;
    f->arena_len += len + 1;
    r->pos += len;
    return FFN_OK;
}

static ffn_status check_bools(const rd *r, const char *key, const uint8_t *p, uint64_t n) {
    for (uint64_t i = 0; i < n; i++)
        if (p[i] > 1)
            return ffn_error(FFN_ERR_FORMAT, "%s: %s: bool%s: expected 0 or 1, found %u", r->f->path, key,
                             n > 1 ? " array element" : "", p[i]);
    return FFN_OK;
}

static ffn_status rd_vtype(rd *r, const char *key, const char *what, uint32_t *out) {
    ffn_status s = rd_u32(r, key, what, out);
    if (s != FFN_OK) return s;
    if (*out >= FFN_GGUF_VTYPE_COUNT)
        return ffn_error(FFN_ERR_FORMAT, "%s: %s: %s: expected 0..12, found %" PRIu32, r->f->path, key, what, *out);
    return FFN_OK;
}

/* An array: element type, count, elements. */
static ffn_status rd_array(rd *r, const char *key, int depth, gg_arr *a) {
    a->file = r->f;
    if (depth > FFN_GGUF_MAX_NESTING)
        return ffn_error(FFN_ERR_FORMAT, "%s: %s: arrays nested %d deep: expected at most %d levels", r->f->path, key,
                         depth, FFN_GGUF_MAX_NESTING);
    uint32_t type;
    uint64_t count;
    ffn_status s = rd_vtype(r, key, "array element type", &type);
    if (s == FFN_OK) s = rd_u64(r, key, "array count", &count);
    if (s != FFN_OK) return s;
    a->type = type;
    const uint64_t min = min_element_bytes(type);
    if (count > left(r) / min)
        return ffn_error(FFN_ERR_FORMAT, "%s: %s: array of %" PRIu64 " %s: expected at most %" PRIu64
                         " elements in the %" PRIu64 " bytes left", r->f->path, key, count, vtypes[type].name,
                         left(r) / min, left(r));
    if (type == FFN_GGUF_VTYPE_STRING) {
        a->strs = malloc((count ? count : 1) * sizeof *a->strs);
        if (!a->strs) return ffn_error(FFN_ERR_NOMEM, "%s: %s: out of memory", r->f->path, key);
        a->count = count;
        for (uint64_t i = 0; i < count; i++)
            if ((s = rd_string(r, key, "array string", &a->strs[i])) != FFN_OK) return s;
    } else if (type == FFN_GGUF_VTYPE_ARRAY) {
        a->subs = calloc(count ? count : 1, sizeof *a->subs);
        if (!a->subs) return ffn_error(FFN_ERR_NOMEM, "%s: %s: out of memory", r->f->path, key);
        a->count = count;
        for (uint64_t i = 0; i < count; i++)
            if ((s = rd_array(r, key, depth + 1, &a->subs[i])) != FFN_OK) return s;
    } else {
        a->count = count;
        a->data = r->f->base + r->pos;
        if (type == FFN_GGUF_VTYPE_BOOL && (s = check_bools(r, key, a->data, count)) != FFN_OK) return s;
        r->pos += count * min; /* checked above */
    }
    return FFN_OK;
}

static ffn_status rd_kv(rd *r, size_t index, gg_kv *kv) {
    char ctx[64];
    snprintf(ctx, sizeof ctx, "metadata entry %zu", index);
    ffn_status s = rd_string(r, ctx, "key", &kv->key);
    if (s != FFN_OK) return s;
    const char *full = arena_str(r->f, kv->key);
    if (kv->key.len == 0) return ffn_error(FFN_ERR_FORMAT, "%s: %s: key: expected a non-empty string, found \"\"",
                                           r->f->path, ctx);
    if (strlen(full) != kv->key.len)
        return ffn_error(FFN_ERR_FORMAT, "%s: %s: key '%.200s': expected no NUL byte, found one at %zu", r->f->path,
                         ctx, full, strlen(full));
    /* messages below use a copy: reading an array of strings may move the arena */
    char key[208];
    snprintf(key, sizeof key, "%s", full);
    if ((s = rd_vtype(r, key, "value type", &kv->type)) != FFN_OK) return s;
    if (kv->type == FFN_GGUF_VTYPE_STRING) return rd_string(r, key, "string value", &kv->str);
    if (kv->type == FFN_GGUF_VTYPE_ARRAY) return rd_array(r, key, 1, &kv->arr);
    const size_t n = vtypes[kv->type].size;
    if (left(r) < n) return short_read(r, key, vtypes[kv->type].name, n);
    kv->raw = r->f->base + r->pos;
    if (kv->type == FFN_GGUF_VTYPE_BOOL && (s = check_bools(r, key, kv->raw, 1)) != FFN_OK) return s;
    r->pos += n;
    return FFN_OK;
}

static ffn_status rd_tensor(rd *r, size_t index, gg_tensor *t) {
    ffn_gguf_file *f = r->f;
    char ctx[64];
    snprintf(ctx, sizeof ctx, "tensor info %zu", index);
    ffn_status s = rd_string(r, ctx, "name", &t->name);
    if (s != FFN_OK) return s;
    const char *name = arena_str(f, t->name);
    if (t->name.len == 0 || t->name.len >= FFN_GGUF_MAX_NAME || strlen(name) != t->name.len)
        return ffn_error(FFN_ERR_FORMAT, "%s: %s: name '%.80s%s': expected 1..%d bytes without NUL, found %" PRIu64
                         " bytes%s", f->path, ctx, name, t->name.len > 80 ? "..." : "", FFN_GGUF_MAX_NAME - 1,
                         t->name.len, strlen(name) != t->name.len ? " with a NUL" : "");
    uint32_t n_dims;
    if ((s = rd_u32(r, name, "n_dims", &n_dims)) != FFN_OK) return s;
    if (n_dims > FFN_GGUF_MAX_DIMS)
        return ffn_error(FFN_ERR_FORMAT, "%s: %s: n_dims: expected at most %d, found %" PRIu32, f->path, name,
                         FFN_GGUF_MAX_DIMS, n_dims);
    t->n_dims = (int)n_dims;
    t->numel = 1;
    for (int d = 0; d < FFN_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (int d = 0; d < t->n_dims; d++) {
        uint64_t ne;
        if ((s = rd_u64(r, name, "ne", &ne)) != FFN_OK) return s;
        if (ne > (uint64_t)INT64_MAX)
            return ffn_error(FFN_ERR_FORMAT, "%s: %s: ne[%d]: expected a dimension in [0, 2^63), found %" PRIu64,
                             f->path, name, d, ne);
        t->ne[d] = (int64_t)ne;
        if (ffn_mul_i64(t->numel, t->ne[d], &t->numel))
            return ffn_error(FFN_ERR_FORMAT, "%s: %s: ne: the number of elements overflows 64 bits", f->path, name);
    }
    if ((s = rd_u32(r, name, "type", &t->type)) != FFN_OK) return s;
    const int64_t block = ffn_ggml_block_size((ffn_ggml_type)t->type);
    if (block == 0)
        return ffn_error(FFN_ERR_FORMAT, "%s: %s: type %" PRIu32 ": expected a known ggml type (0..%d, not 4, 5, "
                         "31..33, 36..38)", f->path, name, t->type, FFN_GGML_TYPE_COUNT - 1);
    if (t->ne[0] % block != 0)
        return ffn_error(FFN_ERR_FORMAT, "%s: %s: ne[0] = %" PRId64 ": expected a multiple of the %s block size %" PRId64,
                         f->path, name, t->ne[0], ffn_ggml_type_name((ffn_ggml_type)t->type), block);
    int64_t nbytes, row_bytes; /* the row's size too: a tensor of 0 elements may still have a huge ne[0] */
    if (ffn_mul_i64(t->numel / block, (int64_t)ffn_ggml_type_size((ffn_ggml_type)t->type), &nbytes) ||
        (uint64_t)nbytes > SIZE_MAX ||
        ffn_mul_i64(t->ne[0] / block, (int64_t)ffn_ggml_type_size((ffn_ggml_type)t->type), &row_bytes))
        return ffn_error(FFN_ERR_FORMAT, "%s: %s: the byte size of %" PRId64 " %s elements overflows", f->path, name,
                         t->numel, ffn_ggml_type_name((ffn_ggml_type)t->type));
    t->nbytes = (size_t)nbytes;
    return rd_u64(r, name, "offset", &t->offset);
}

static int cmp_kv(const void *a, const void *b, void *ctx) {
    const ffn_gguf_file *f = ctx;
    const size_t *x = a, *y = b;
    return strcmp(arena_str(f, f->kvs[*x].key), arena_str(f, f->kvs[*y].key));
}
static int cmp_tensor(const void *a, const void *b, void *ctx) {
    const ffn_gguf_file *f = ctx;
    const size_t *x = a, *y = b;
    return strcmp(arena_str(f, f->tensors[*x].name), arena_str(f, f->tensors[*y].name));
}

static ffn_status sorted_index(ffn_gguf_file *f, size_t n, int (*cmp)(const void *, const void *, void *),
                               size_t **out) {
    size_t *idx = malloc((n ? n : 1) * sizeof *idx);
    if (!idx) return ffn_error(FFN_ERR_NOMEM, "%s: out of memory", f->path);
    for (size_t i = 0; i < n; i++) idx[i] = i;
    qsort_r(idx, n, sizeof *idx, cmp, f);
    *out = idx;
    return FFN_OK;
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }

static ffn_status validate(ffn_gguf_file *f) {
    const char *path = f->path;
    if (f->size < 24)
        return ffn_error(FFN_ERR_FORMAT, "%s: file too short: expected at least 24 bytes (magic, version, counts), "
                         "found %zu", path, f->size);
    if (memcmp(f->base, "GGUF", 4) != 0)
        return ffn_error(FFN_ERR_FORMAT, "%s: magic: expected \"GGUF\" (47 47 55 46), found %02x %02x %02x %02x "
                         "(not a GGUF file?)", path, f->base[0], f->base[1], f->base[2], f->base[3]);
    rd r = {f, 4};
    uint64_t n_tensors, n_kv;
    rd_u32(&r, "header", "version", &f->version);
    if (f->version != 2 && f->version != 3)
        return ffn_error(FFN_ERR_FORMAT, "%s: version: expected 2 or 3, found %" PRIu32 "%s", path, f->version,
                         f->version == 1 ? " (version 1 used 32-bit counts; convert the file with a current tool)"
                         : (f->version & 0xFFFF) == 0 ? " (a big-endian file?)" : "");
    rd_u64(&r, "header", "tensor count", &n_tensors);
    rd_u64(&r, "header", "metadata count", &n_kv);
    /* the smallest metadata entry is 14 bytes (a 1-byte key, a type, a
     * 1-byte value), the smallest tensor info 25 (a 1-byte name, no dims) */
    /* Caps beside the file's size: an entry takes about 100 bytes in memory
     * (its record, an index, the key's copy) against its 14 in the file, so
     * a file of tiny entries would cost seven times its size and a sort;
     * llama.cpp's files hold tens of entries and at most thousands of
     * tensors. */
    if (n_kv > GGUF_MAX_KV)
        return ffn_error(FFN_ERR_FORMAT, "%s: metadata count: expected at most %d entries, found %" PRIu64,
                         path, GGUF_MAX_KV, n_kv);
    if (n_tensors > GGUF_MAX_TENSORS)
        return ffn_error(FFN_ERR_FORMAT, "%s: tensor count: expected at most %d tensors, found %" PRIu64,
                         path, GGUF_MAX_TENSORS, n_tensors);
    if (n_kv > left(&r) / 14)
        return ffn_error(FFN_ERR_FORMAT, "%s: metadata count: expected at most %" PRIu64 " entries in a file of %zu "
                         "bytes, found %" PRIu64, path, left(&r) / 14, f->size, n_kv);
    if (n_tensors > left(&r) / 25)
        return ffn_error(FFN_ERR_FORMAT, "%s: tensor count: expected at most %" PRIu64 " tensors in a file of %zu "
                         "bytes, found %" PRIu64, path, left(&r) / 25, f->size, n_tensors);
    f->kvs = calloc(n_kv ? n_kv : 1, sizeof *f->kvs);
    f->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *f->tensors);
    if (!f->kvs || !f->tensors) return ffn_error(FFN_ERR_NOMEM, "%s: out of memory", path);
    ffn_status s;
    for (uint64_t i = 0; i < n_kv; i++) {
        f->n_kv = i + 1; /* so that close frees what this entry allocated */
        if ((s = rd_kv(&r, (size_t)i, &f->kvs[i])) != FFN_OK) return s;
    }
    if ((s = sorted_index(f, f->n_kv, cmp_kv, &f->kv_by_key)) != FFN_OK) return s;
    for (size_t i = 1; i < f->n_kv; i++) {
        const char *a = arena_str(f, f->kvs[f->kv_by_key[i - 1]].key), *b = arena_str(f, f->kvs[f->kv_by_key[i]].key);
        if (!strcmp(a, b))
            return ffn_error(FFN_ERR_FORMAT, "%s: %.200s: expected each key once, found it twice", path, a);
    }
    f->alignment = FFN_GGUF_DEFAULT_ALIGNMENT;
    int64_t ai = ffn_gguf_find_key(f, GGUF_ALIGNMENT_KEY);
    if (ai >= 0) {
        const gg_kv *kv = &f->kvs[ai];
        if (kv->type != FFN_GGUF_VTYPE_UINT32)
            return ffn_error(FFN_ERR_FORMAT, "%s: " GGUF_ALIGNMENT_KEY ": expected a uint32, found a %s", path,
                             vtypes[kv->type].name);
        uint32_t a;
        memcpy(&a, kv->raw, 4);
        if (a == 0 || (a & (a - 1)) != 0)
            return ffn_error(FFN_ERR_FORMAT, "%s: " GGUF_ALIGNMENT_KEY ": expected a power of two, found %" PRIu32,
                             path, a);
        f->alignment = a;
    }
    for (uint64_t i = 0; i < n_tensors; i++) {
        if ((s = rd_tensor(&r, (size_t)i, &f->tensors[i])) != FFN_OK) return s;
        f->n_tensors = i + 1;
    }
    if ((s = sorted_index(f, f->n_tensors, cmp_tensor, &f->t_by_name)) != FFN_OK) return s;
    for (size_t i = 1; i < f->n_tensors; i++) {
        const char *a = arena_str(f, f->tensors[f->t_by_name[i - 1]].name);
        if (!strcmp(a, arena_str(f, f->tensors[f->t_by_name[i]].name)))
            return ffn_error(FFN_ERR_FORMAT, "%s: %s: expected each tensor name once, found it twice", path, a);
    }
    f->data_offset = align_up(r.pos, f->alignment); /* pos < 2^63, alignment <= 2^31: no overflow */
    uint64_t running = 0;
    for (size_t i = 0; i < f->n_tensors; i++) {
        const gg_tensor *t = &f->tensors[i];
        const char *name = arena_str(f, t->name);
        if (t->offset != running)
            return ffn_error(FFN_ERR_FORMAT, "%s: %s: offset %" PRIu64 ": expected %" PRIu64 " (the sizes of the "
                             "tensors before it, each padded to %zu bytes)", path, name, t->offset, running,
                             f->alignment);
        if (f->data_offset > f->size || running > f->size - f->data_offset ||
            t->nbytes > f->size - f->data_offset - running)
            return ffn_error(FFN_ERR_FORMAT, "%s: %s: data [%" PRIu64 ", %" PRIu64 ") of the file: expected inside "
                             "its %zu bytes (truncated file?)", path, name, f->data_offset + running,
                             f->data_offset + running + t->nbytes, f->size);
        running += align_up(t->nbytes, f->alignment); /* < file size + alignment */
    }
    return FFN_OK;
}

/* ---- open / close ------------------------------------------------------------ */

FFN_VIEW_OPENS(ffn_gguf, ffn_gguf_file, validate, ffn_gguf_close)

const char *ffn_gguf_path(const ffn_gguf_file *f) { return f ? f->path : ""; }
uint32_t ffn_gguf_version(const ffn_gguf_file *f) { return f ? f->version : 0; }
size_t ffn_gguf_alignment(const ffn_gguf_file *f) { return f ? f->alignment : 0; }
uint64_t ffn_gguf_data_offset(const ffn_gguf_file *f) { return f ? f->data_offset : 0; }

/* ---- metadata --------------------------------------------------------------- */

size_t ffn_gguf_kv_count(const ffn_gguf_file *f) { return f ? f->n_kv : 0; }

const char *ffn_gguf_kv_key(const ffn_gguf_file *f, size_t i) {
    return f && i < f->n_kv ? arena_str(f, f->kvs[i].key) : NULL;
}

int64_t ffn_gguf_find_key(const ffn_gguf_file *f, const char *key) {
    if (!f || !key || !f->kv_by_key) return -1;
    size_t lo = 0, hi = f->n_kv;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(key, arena_str(f, f->kvs[f->kv_by_key[mid]].key));
        if (c == 0) return (int64_t)f->kv_by_key[mid];
        if (c < 0) hi = mid;
        else lo = mid + 1;
    }
    return -1;
}

/* A fixed-size value of `type` at p into out. */
static void fixed_value(uint32_t type, const uint8_t *p, ffn_gguf_value *out) {
    memset(&out->v, 0, sizeof out->v);
    out->type = (ffn_gguf_vtype)type;
    if (type == FFN_GGUF_VTYPE_BOOL) out->v.boolean = p[0];
    else memcpy(&out->v, p, vtypes[type].size); /* every member starts at the union's start */
}

static void array_value(const gg_arr *a, ffn_gguf_array *out) {
    out->type = (ffn_gguf_vtype)a->type;
    out->count = a->count;
    out->data = a->data;
    out->impl = a;
}

ffn_status ffn_gguf_kv_value(const ffn_gguf_file *f, size_t i, ffn_gguf_value *out) {
    if (!f || !out || i >= f->n_kv) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_gguf_kv_value: index out of range");
    const gg_kv *kv = &f->kvs[i];
    if (kv->type == FFN_GGUF_VTYPE_STRING) {
        memset(&out->v, 0, sizeof out->v);
        out->type = FFN_GGUF_VTYPE_STRING;
        out->v.str.ptr = arena_str(f, kv->str);
        out->v.str.len = (size_t)kv->str.len;
    } else if (kv->type == FFN_GGUF_VTYPE_ARRAY) {
        memset(&out->v, 0, sizeof out->v);
        out->type = FFN_GGUF_VTYPE_ARRAY;
        array_value(&kv->arr, &out->v.arr);
    } else {
        fixed_value(kv->type, kv->raw, out);
    }
    return FFN_OK;
}

ffn_status ffn_gguf_get(const ffn_gguf_file *f, const char *key, ffn_gguf_value *out) {
    if (!f || !key || !out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_gguf_get: NULL argument");
    int64_t i = ffn_gguf_find_key(f, key);
    if (i < 0) return ffn_error(FFN_ERR_MISSING, "%s: metadata key '%.200s' not found", f->path, key);
    return ffn_gguf_kv_value(f, (size_t)i, out);
}

static ffn_status get_typed(const ffn_gguf_file *f, const char *key, ffn_gguf_vtype type, ffn_gguf_value *v) {
    ffn_status s = ffn_gguf_get(f, key, v);
    if (s != FFN_OK) return s;
    if (v->type != type)
        return ffn_error(FFN_ERR_FORMAT, "%s: %.200s: expected a %s, found a %s", f->path, key, vtypes[type].name,
                         vtypes[v->type].name);
    return FFN_OK;
}

#define GGUF_GETTER(sfx, ctype, vtype, member)                                            \
    ffn_status ffn_gguf_get_##sfx(const ffn_gguf_file *f, const char *key, ctype *out) {  \
        ffn_gguf_value v;                                                                 \
        ffn_status s = get_typed(f, key, vtype, &v);                                      \
        if (s == FFN_OK && out) *out = v.v.member;                                        \
        return s;                                                                         \
    }
/* The scalar types read and written as they are: (suffix, C type, value
 * type, member of ffn_gguf_value).  u32 (the alignment) and bool (one byte)
 * have setters of their own. */
#define GGUF_PLAIN_SCALARS(X)                                                             \
    X(u8, uint8_t, FFN_GGUF_VTYPE_UINT8, u8)                                              \
    X(i8, int8_t, FFN_GGUF_VTYPE_INT8, i8)                                                \
    X(u16, uint16_t, FFN_GGUF_VTYPE_UINT16, u16)                                          \
    X(i16, int16_t, FFN_GGUF_VTYPE_INT16, i16)                                            \
    X(i32, int32_t, FFN_GGUF_VTYPE_INT32, i32)                                            \
    X(f32, float, FFN_GGUF_VTYPE_FLOAT32, f32)                                            \
    X(u64, uint64_t, FFN_GGUF_VTYPE_UINT64, u64)                                          \
    X(i64, int64_t, FFN_GGUF_VTYPE_INT64, i64)                                            \
    X(f64, double, FFN_GGUF_VTYPE_FLOAT64, f64)
GGUF_PLAIN_SCALARS(GGUF_GETTER)
GGUF_GETTER(u32, uint32_t, FFN_GGUF_VTYPE_UINT32, u32)
GGUF_GETTER(bool, int, FFN_GGUF_VTYPE_BOOL, boolean)
GGUF_GETTER(array, ffn_gguf_array, FFN_GGUF_VTYPE_ARRAY, arr)

ffn_status ffn_gguf_get_str(const ffn_gguf_file *f, const char *key, const char **out, size_t *len) {
    ffn_gguf_value v;
    ffn_status s = get_typed(f, key, FFN_GGUF_VTYPE_STRING, &v);
    if (s != FFN_OK) return s;
    if (out) *out = v.v.str.ptr;
    if (len) *len = v.v.str.len;
    return FFN_OK;
}

/* A number of an integer type as int64: 0 when it does not fit, -1 when not an integer. */
static int value_to_int(const ffn_gguf_value *v, int64_t *out) {
    switch (v->type) {
    case FFN_GGUF_VTYPE_UINT8: *out = v->v.u8; return 1;
    case FFN_GGUF_VTYPE_INT8: *out = v->v.i8; return 1;
    case FFN_GGUF_VTYPE_UINT16: *out = v->v.u16; return 1;
    case FFN_GGUF_VTYPE_INT16: *out = v->v.i16; return 1;
    case FFN_GGUF_VTYPE_UINT32: *out = v->v.u32; return 1;
    case FFN_GGUF_VTYPE_INT32: *out = v->v.i32; return 1;
    case FFN_GGUF_VTYPE_INT64: *out = v->v.i64; return 1;
    case FFN_GGUF_VTYPE_UINT64:
        if (v->v.u64 > (uint64_t)INT64_MAX) return 0;
        *out = (int64_t)v->v.u64;
        return 1;
    default: return -1;
    }
}

ffn_status ffn_gguf_get_int(const ffn_gguf_file *f, const char *key, int64_t *out) {
    ffn_gguf_value v;
    ffn_status s = ffn_gguf_get(f, key, &v);
    if (s != FFN_OK) return s;
    int64_t x = 0;
    int r = value_to_int(&v, &x);
    if (r < 0)
        return ffn_error(FFN_ERR_FORMAT, "%s: %.200s: expected an integer, found a %s", f->path, key,
                         vtypes[v.type].name);
    if (r == 0)
        return ffn_error(FFN_ERR_FORMAT, "%s: %.200s: expected an integer below 2^63, found %" PRIu64, f->path, key,
                         v.v.u64);
    if (out) *out = x;
    return FFN_OK;
}

ffn_status ffn_gguf_get_float(const ffn_gguf_file *f, const char *key, double *out) {
    ffn_gguf_value v;
    ffn_status s = ffn_gguf_get(f, key, &v);
    if (s != FFN_OK) return s;
    if (v.type != FFN_GGUF_VTYPE_FLOAT32 && v.type != FFN_GGUF_VTYPE_FLOAT64)
        return ffn_error(FFN_ERR_FORMAT, "%s: %.200s: expected a float32 or float64, found a %s", f->path, key,
                         vtypes[v.type].name);
    if (out) *out = v.type == FFN_GGUF_VTYPE_FLOAT32 ? (double)v.v.f32 : v.v.f64;
    return FFN_OK;
}

ffn_status ffn_gguf_array_get(const ffn_gguf_array *array, uint64_t i, ffn_gguf_value *out) {
    if (!array || !array->impl || !out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_gguf_array_get: NULL argument");
    const gg_arr *a = array->impl;
    if (i >= a->count)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_gguf_array_get: index %" PRIu64 ": expected below %" PRIu64, i,
                         a->count);
    if (a->type == FFN_GGUF_VTYPE_STRING) {
        memset(&out->v, 0, sizeof out->v);
        out->type = FFN_GGUF_VTYPE_STRING;
        out->v.str.ptr = arena_str(a->file, a->strs[i]);
        out->v.str.len = (size_t)a->strs[i].len;
    } else if (a->type == FFN_GGUF_VTYPE_ARRAY) {
        memset(&out->v, 0, sizeof out->v);
        out->type = FFN_GGUF_VTYPE_ARRAY;
        array_value(&a->subs[i], &out->v.arr);
    } else {
        fixed_value(a->type, a->data + i * vtypes[a->type].size, out);
    }
    return FFN_OK;
}

/* ---- tensors ------------------------------------------------------------------ */

size_t ffn_gguf_count(const ffn_gguf_file *f) { return f ? f->n_tensors : 0; }

static void tensor_out(const ffn_gguf_file *f, const gg_tensor *t, ffn_gguf_tensor *out) {
    out->name = arena_str(f, t->name);
    out->type = (ffn_ggml_type)t->type;
    out->n_dims = t->n_dims;
    memcpy(out->ne, t->ne, sizeof out->ne);
    out->numel = t->numel;
    out->nbytes = t->nbytes;
    out->offset = f->data_offset + t->offset;
    out->data = f->base + out->offset;
}

ffn_status ffn_gguf_get_tensor(const ffn_gguf_file *f, size_t i, ffn_gguf_tensor *out) {
    if (!f || !out || i >= f->n_tensors)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_gguf_get_tensor: index out of range");
    tensor_out(f, &f->tensors[i], out);
    return FFN_OK;
}

ffn_status ffn_gguf_find(const ffn_gguf_file *f, const char *name, ffn_gguf_tensor *out) {
    if (!f || !name) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_gguf_find: NULL argument");
    size_t lo = 0, hi = f->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const gg_tensor *t = &f->tensors[f->t_by_name[mid]];
        int c = strcmp(name, arena_str(f, t->name));
        if (c == 0) {
            if (out) tensor_out(f, t, out);
            return FFN_OK;
        }
        if (c < 0) hi = mid;
        else lo = mid + 1;
    }
    return ffn_error(FFN_ERR_MISSING, "%s: tensor '%.200s' not found", f->path, name);
}

ffn_status ffn_gguf_tensor_to_f32(const ffn_gguf_file *f, const ffn_gguf_tensor *t, float *dst) {
    if (!f || !t || (!dst && t->numel)) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_gguf_tensor_to_f32: NULL argument");
    if (!ffn_ggml_can_dequantize(t->type)) {
        char list[256];
        return ffn_error(FFN_ERR_UNSUPPORTED, "%s: %s: type %s: ffn cannot decode it (it decodes %s)", f->path,
                         t->name, ffn_ggml_type_name(t->type),
                         ffn_ggml_type_list(FFN_GGML_DECODES, ", ", list, sizeof list));
    }
    if (t->numel == 0) return FFN_OK;
    const int64_t rows = t->numel / t->ne[0];
    const size_t row_bytes = t->nbytes / (size_t)rows;
    const uint8_t *src = t->data;
    for (int64_t r = 0; r < rows; r++) {
        ffn_status s = ffn_ggml_dequantize_row(t->type, src + (size_t)r * row_bytes, dst + r * t->ne[0], t->ne[0]);
        if (s != FFN_OK) return ffn_error_prefix(s, "%s: %s", f->path, t->name);
    }
    return FFN_OK;
}

ffn_status ffn_gguf_load_f32(const ffn_gguf_file *f, const char *name, float **out) {
    if (!out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_gguf_load_f32: out is NULL");
    *out = NULL;
    ffn_gguf_tensor t;
    ffn_status s = ffn_gguf_find(f, name, &t);
    if (s != FFN_OK) return s;
    float *dst;
    if ((s = float_buf_alloc(t.numel, f->path, name, &dst))) return s;
    return float_buf_done(ffn_gguf_tensor_to_f32(f, &t, dst), dst, out);
}

/* ---- the writer --------------------------------------------------------------- */

typedef struct w_kv {
    char *key;
    uint32_t type;
    uint8_t scalar[8];
    char *str;         /* STRING */
    uint32_t arr_type; /* ARRAY */
    uint64_t arr_count;
    uint8_t *arr_data; /* fixed-size elements */
    char **arr_strs;   /* string elements */
} w_kv;

typedef struct w_tensor {
    char *name;
    ffn_ggml_type type;
    int n_dims;
    int64_t ne[FFN_GGUF_MAX_DIMS];
    size_t nbytes;
    uint8_t *data;
} w_tensor;

struct ffn_gguf_writer {
    w_kv *kvs;
    size_t n_kv;
    int64_t cap_kv; /* ffn_grow's capacity */
    w_tensor *ts;
    size_t n_t;
    int64_t cap_t;
    uint32_t alignment;
};

ffn_status ffn_gguf_writer_create(ffn_gguf_writer **out) {
    if (!out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_gguf_writer_create: out is NULL");
    *out = calloc(1, sizeof **out);
    if (!*out) return ffn_error(FFN_ERR_NOMEM, "gguf writer: out of memory");
    (*out)->alignment = FFN_GGUF_DEFAULT_ALIGNMENT;
    return FFN_OK;
}

static void free_kv_value(w_kv *kv) {
    free(kv->str);
    free(kv->arr_data);
    if (kv->arr_strs)
        for (uint64_t i = 0; i < kv->arr_count; i++) free(kv->arr_strs[i]);
    free(kv->arr_strs);
    kv->str = NULL;
    kv->arr_data = NULL;
    kv->arr_strs = NULL;
    kv->arr_count = 0;
}

void ffn_gguf_writer_free(ffn_gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free_kv_value(&w->kvs[i]);
        free(w->kvs[i].key);
    }
    for (size_t i = 0; i < w->n_t; i++) FFN_FREE_ALL(w->ts[i].name, w->ts[i].data);
    FFN_FREE_ALL(w->kvs, w->ts, w);
}

/* A writer's array of n items with room for one more, item n zeroed (16
 * items first, then doubling); NULL when out of memory (items unchanged). */
static void *grow_zeroed(void *items, size_t n, int64_t *cap, size_t elem) {
    char *p = ffn_grow(items, (int64_t)n, cap, elem, 16);
    if (p) memset(p + n * elem, 0, elem);
    return p;
}

/* The entry for key (existing, its old value released, or new). */
static ffn_status kv_slot(ffn_gguf_writer *w, const char *key, uint32_t type, w_kv **out) {
    if (!w || !key) return ffn_error(FFN_ERR_INVALID_ARG, "gguf writer: writer or key is NULL");
    if (!*key) return ffn_error(FFN_ERR_INVALID_ARG, "gguf writer: key: expected a non-empty string, found \"\"");
    if (!strcmp(key, GGUF_ALIGNMENT_KEY) && type != FFN_GGUF_VTYPE_UINT32)
        return ffn_error(FFN_ERR_INVALID_ARG, "gguf writer: " GGUF_ALIGNMENT_KEY ": expected a uint32, found a %s",
                         vtypes[type].name);
    for (size_t i = 0; i < w->n_kv; i++) {
        if (!strcmp(w->kvs[i].key, key)) {
            free_kv_value(&w->kvs[i]);
            w->kvs[i].type = type;
            *out = &w->kvs[i];
            return FFN_OK;
        }
    }
    w_kv *kvs = grow_zeroed(w->kvs, w->n_kv, &w->cap_kv, sizeof *kvs);
    if (!kvs) return ffn_error(FFN_ERR_NOMEM, "gguf writer: out of memory");
    w->kvs = kvs;
    w_kv *kv = &kvs[w->n_kv];
    kv->key = strdup(key);
    if (!kv->key) return ffn_error(FFN_ERR_NOMEM, "gguf writer: out of memory");
    kv->type = type;
    w->n_kv++;
    *out = kv;
    return FFN_OK;
}

static ffn_status set_scalar(ffn_gguf_writer *w, const char *key, uint32_t type, const void *v) {
    w_kv *kv;
    ffn_status s = kv_slot(w, key, type, &kv);
    if (s != FFN_OK) return s;
    memcpy(kv->scalar, v, vtypes[type].size);
    return FFN_OK;
}

#define GGUF_SETTER(sfx, ctype, vtype, member)                                            \
    ffn_status ffn_gguf_writer_set_##sfx(ffn_gguf_writer *w, const char *key, ctype v) { \
        return set_scalar(w, key, vtype, &v);                                             \
    }
GGUF_PLAIN_SCALARS(GGUF_SETTER)

ffn_status ffn_gguf_writer_set_u32(ffn_gguf_writer *w, const char *key, uint32_t v) {
    if (w && key && !strcmp(key, GGUF_ALIGNMENT_KEY)) {
        if (v == 0 || (v & (v - 1)) != 0)
            return ffn_error(FFN_ERR_INVALID_ARG, "gguf writer: " GGUF_ALIGNMENT_KEY ": expected a power of two, "
                             "found %" PRIu32, v);
        ffn_status s = set_scalar(w, key, FFN_GGUF_VTYPE_UINT32, &v);
        if (s == FFN_OK) w->alignment = v;
        return s;
    }
    return set_scalar(w, key, FFN_GGUF_VTYPE_UINT32, &v);
}

ffn_status ffn_gguf_writer_set_bool(ffn_gguf_writer *w, const char *key, int v) {
    uint8_t b = v ? 1 : 0;
    return set_scalar(w, key, FFN_GGUF_VTYPE_BOOL, &b);
}

/* kv_slot for a value the caller has copied: the copy is freed when no
 * slot can be had, and belongs to the slot otherwise. */
static ffn_status kv_slot_or_free(ffn_gguf_writer *w, const char *key, ffn_gguf_vtype type, void *copy,
                                  w_kv **out) {
    ffn_status s = kv_slot(w, key, type, out);
    if (s != FFN_OK) free(copy);
    return s;
}

ffn_status ffn_gguf_writer_set_str(ffn_gguf_writer *w, const char *key, const char *str) {
    if (!str) return ffn_error(FFN_ERR_INVALID_ARG, "gguf writer: %s: string is NULL", key ? key : "?");
    char *copy = strdup(str);
    if (!copy) return ffn_error(FFN_ERR_NOMEM, "gguf writer: out of memory");
    w_kv *kv;
    ffn_status s = kv_slot_or_free(w, key, FFN_GGUF_VTYPE_STRING, copy, &kv);
    if (s != FFN_OK) return s;
    kv->str = copy;
    return FFN_OK;
}

ffn_status ffn_gguf_writer_set_array(ffn_gguf_writer *w, const char *key, ffn_gguf_vtype type, const void *data,
                                     uint64_t count) {
    if ((unsigned)type >= FFN_GGUF_VTYPE_COUNT || vtypes[type].size == 0)
        return ffn_error(FFN_ERR_INVALID_ARG, "gguf writer: %s: array element type %d: expected a fixed-size type "
                         "(strings: ffn_gguf_writer_set_str_array; nested arrays are not written)",
                         key ? key : "?", (int)type);
    size_t bytes;
    if (ffn_mul_size((size_t)count, vtypes[type].size, &bytes) || count > SIZE_MAX)
        return ffn_error(FFN_ERR_OVERFLOW, "gguf writer: %s: array of %" PRIu64 " elements overflows", key ? key : "?",
                         count);
    if (!data && count) return ffn_error(FFN_ERR_INVALID_ARG, "gguf writer: %s: data is NULL", key ? key : "?");
    if (type == FFN_GGUF_VTYPE_BOOL)
        for (uint64_t i = 0; i < count; i++)
            if (((const uint8_t *)data)[i] > 1)
                return ffn_error(FFN_ERR_INVALID_ARG, "gguf writer: %s: bool element %" PRIu64 ": expected 0 or 1, "
                                 "found %u", key ? key : "?", i, ((const uint8_t *)data)[i]);
    uint8_t *copy = malloc(bytes ? bytes : 1);
    if (!copy) return ffn_error(FFN_ERR_NOMEM, "gguf writer: out of memory");
    if (bytes) memcpy(copy, data, bytes);
    w_kv *kv;
    ffn_status s = kv_slot_or_free(w, key, FFN_GGUF_VTYPE_ARRAY, copy, &kv);
    if (s != FFN_OK) return s;
    kv->arr_type = type;
    kv->arr_count = count;
    kv->arr_data = copy;
    return FFN_OK;
}

ffn_status ffn_gguf_writer_set_str_array(ffn_gguf_writer *w, const char *key, const char *const *strs,
                                         uint64_t count) {
    if ((!strs && count) || count > SIZE_MAX / sizeof(char *))
        return ffn_error(FFN_ERR_INVALID_ARG, "gguf writer: %s: strings are NULL", key ? key : "?");
    char **copy = calloc(count ? (size_t)count : 1, sizeof *copy);
    if (!copy) return ffn_error(FFN_ERR_NOMEM, "gguf writer: out of memory");
    for (uint64_t i = 0; i < count; i++) {
        copy[i] = strs[i] ? strdup(strs[i]) : NULL;
        if (!copy[i]) {
            for (uint64_t j = 0; j < i; j++) free(copy[j]);
            free(copy);
            return strs[i] ? ffn_error(FFN_ERR_NOMEM, "gguf writer: out of memory")
                           : ffn_error(FFN_ERR_INVALID_ARG, "gguf writer: %s: string %" PRIu64 " is NULL",
                                       key ? key : "?", i);
        }
    }
    w_kv *kv;
    ffn_status s = kv_slot(w, key, FFN_GGUF_VTYPE_ARRAY, &kv);
    if (s != FFN_OK) {
        for (uint64_t j = 0; j < count; j++) free(copy[j]);
        free(copy);
        return s;
    }
    kv->arr_type = FFN_GGUF_VTYPE_STRING;
    kv->arr_count = count;
    kv->arr_strs = copy;
    return FFN_OK;
}

/* Check a tensor's description and append it without data. */
static ffn_status add_tensor(ffn_gguf_writer *w, const char *name, ffn_ggml_type type, int n_dims,
                             const int64_t *ne, w_tensor **out) {
    if (!w || !name) return ffn_error(FFN_ERR_INVALID_ARG, "gguf writer: writer or name is NULL");
    size_t len = strlen(name);
    if (len == 0 || len >= FFN_GGUF_MAX_NAME)
        return ffn_error(FFN_ERR_INVALID_ARG, "gguf writer: tensor name '%.80s': expected 1..%d bytes, found %zu", name,
                         FFN_GGUF_MAX_NAME - 1, len);
    const int64_t block = ffn_ggml_block_size(type);
    if (block == 0) return ffn_error(FFN_ERR_INVALID_ARG, "gguf writer: %s: type %d: not a known ggml type", name,
                                     (int)type);
    if (n_dims < 0 || n_dims > FFN_GGUF_MAX_DIMS || (n_dims > 0 && !ne))
        return ffn_error(FFN_ERR_INVALID_ARG, "gguf writer: %s: expected 0..%d dims, found %d", name,
                         FFN_GGUF_MAX_DIMS, n_dims);
    int64_t numel = 1, e[FFN_GGUF_MAX_DIMS] = {1, 1, 1, 1};
    for (int d = 0; d < n_dims; d++) {
        if (ne[d] < 0)
            return ffn_error(FFN_ERR_INVALID_ARG, "gguf writer: %s: ne[%d]: expected >= 0, found %" PRId64, name, d,
                             ne[d]);
        e[d] = ne[d];
        if (ffn_mul_i64(numel, ne[d], &numel))
            return ffn_error(FFN_ERR_OVERFLOW, "gguf writer: %s: the element count overflows 64 bits", name);
    }
    if (e[0] % block != 0)
        return ffn_error(FFN_ERR_INVALID_ARG, "gguf writer: %s: ne[0] = %" PRId64 ": expected a multiple of the %s "
                         "block size %" PRId64, name, e[0], ffn_ggml_type_name(type), block);
    int64_t nbytes;
    if (ffn_mul_i64(numel / block, (int64_t)ffn_ggml_type_size(type), &nbytes) || (uint64_t)nbytes > SIZE_MAX)
        return ffn_error(FFN_ERR_OVERFLOW, "gguf writer: %s: the byte size overflows", name);
    for (size_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->ts[i].name, name))
            return ffn_error(FFN_ERR_INVALID_ARG, "gguf writer: %s: a tensor of this name was already added", name);
    w_tensor *ts = grow_zeroed(w->ts, w->n_t, &w->cap_t, sizeof *ts);
    if (!ts) return ffn_error(FFN_ERR_NOMEM, "gguf writer: out of memory");
    w->ts = ts;
    w_tensor *t = &ts[w->n_t];
    t->name = strdup(name);
    t->data = malloc(nbytes ? (size_t)nbytes : 1);
    if (!t->name || !t->data) {
        free(t->name);
        free(t->data);
        return ffn_error(FFN_ERR_NOMEM, "gguf writer: %s: out of memory for %" PRId64 " bytes", name, nbytes);
    }
    t->type = type;
    t->n_dims = n_dims;
    memcpy(t->ne, e, sizeof e);
    t->nbytes = (size_t)nbytes;
    *out = t; /* counted by the caller once the data is in */
    return FFN_OK;
}

static void drop_tensor(w_tensor *t) {
    free(t->name);
    free(t->data);
}

ffn_status ffn_gguf_writer_add_raw(ffn_gguf_writer *w, const char *name, ffn_ggml_type type, int n_dims,
                                   const int64_t *ne, const void *data, size_t nbytes) {
    w_tensor *t;
    ffn_status s = add_tensor(w, name, type, n_dims, ne, &t);
    if (s != FFN_OK) return s;
    if (nbytes != t->nbytes || (!data && nbytes)) {
        s = ffn_error(FFN_ERR_INVALID_ARG, "gguf writer: %s: expected %zu bytes of %s data, found %zu%s", name,
                      t->nbytes, ffn_ggml_type_name(type), nbytes, data ? "" : " (NULL)");
        drop_tensor(t);
        return s;
    }
    if (nbytes) memcpy(t->data, data, nbytes);
    w->n_t++;
    return FFN_OK;
}

ffn_status ffn_gguf_writer_add_f32(ffn_gguf_writer *w, const char *name, ffn_ggml_type type, int n_dims,
                                   const int64_t *ne, const float *data) {
    w_tensor *t;
    ffn_status s = add_tensor(w, name, type, n_dims, ne, &t);
    if (s != FFN_OK) return s;
    if (!ffn_ggml_can_quantize(type)) {
        drop_tensor(t);
        char list[256];
        return ffn_error(FFN_ERR_UNSUPPORTED, "gguf writer: %s: ffn cannot encode type %s (it encodes %s)", name,
                         ffn_ggml_type_name(type), ffn_ggml_type_list(FFN_GGML_ENCODES, ", ", list, sizeof list));
    }
    const int64_t row = t->ne[0];
    const int64_t numel = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    if (numel > 0 && !data) {
        drop_tensor(t);
        return ffn_error(FFN_ERR_INVALID_ARG, "gguf writer: %s: data is NULL", name);
    }
    const size_t row_bytes = numel > 0 ? t->nbytes / (size_t)(numel / row) : 0;
    for (int64_t r = 0; numel > 0 && r < numel / row; r++) {
        s = ffn_ggml_quantize_row(type, data + r * row, t->data + (size_t)r * row_bytes, row);
        if (s != FFN_OK) {
            drop_tensor(t);
            return ffn_error_prefix(s, "gguf writer: %s: row %" PRId64, name, r);
        }
    }
    w->n_t++;
    return FFN_OK;
}

static void put(ffn_atomic_file *af, const void *p, size_t n) {
    if (n) fwrite(p, 1, n, af->f); /* errors are caught by ffn_atomic_commit (ferror) */
}
static void put_u32(ffn_atomic_file *af, uint32_t v) { put(af, &v, 4); }
static void put_u64(ffn_atomic_file *af, uint64_t v) { put(af, &v, 8); }
static void put_str(ffn_atomic_file *af, const char *s) {
    size_t n = strlen(s);
    put_u64(af, n);
    put(af, s, n);
}
static void put_pad(ffn_atomic_file *af, uint64_t pos, uint64_t alignment) {
    static const uint8_t zeros[64];
    uint64_t n = align_up(pos, alignment) - pos;
    while (n > 0) {
        size_t k = n > sizeof zeros ? sizeof zeros : (size_t)n;
        put(af, zeros, k);
        n -= k;
    }
}

ffn_status ffn_gguf_writer_save(const ffn_gguf_writer *w, const char *path) {
    if (!w || !path || !*path) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_gguf_writer_save: writer or path is NULL");
    ffn_atomic_file af;
    ffn_status s = ffn_atomic_open(&af, path);
    if (s != FFN_OK) return s;
    put(&af, "GGUF", 4);
    put_u32(&af, 3);
    put_u64(&af, w->n_t);
    put_u64(&af, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) {
        const w_kv *kv = &w->kvs[i];
        put_str(&af, kv->key);
        put_u32(&af, kv->type);
        if (kv->type == FFN_GGUF_VTYPE_STRING) {
            put_str(&af, kv->str);
        } else if (kv->type == FFN_GGUF_VTYPE_ARRAY) {
            put_u32(&af, kv->arr_type);
            put_u64(&af, kv->arr_count);
            if (kv->arr_type == FFN_GGUF_VTYPE_STRING)
                for (uint64_t j = 0; j < kv->arr_count; j++) put_str(&af, kv->arr_strs[j]);
            else
                put(&af, kv->arr_data, (size_t)kv->arr_count * vtypes[kv->arr_type].size);
        } else {
            put(&af, kv->scalar, vtypes[kv->type].size);
        }
    }
    uint64_t offset = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        const w_tensor *t = &w->ts[i];
        put_str(&af, t->name);
        put_u32(&af, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++) put_u64(&af, (uint64_t)t->ne[d]);
        put_u32(&af, (uint32_t)t->type);
        put_u64(&af, offset);
        offset += align_up(t->nbytes, w->alignment);
    }
    long pos = ftell(af.f);
    if (pos < 0) {
        ffn_atomic_abort(&af);
        return ffn_error(FFN_ERR_IO, "%s: cannot tell the write position: %s", path, strerror(errno));
    }
    if (w->n_t) put_pad(&af, (uint64_t)pos, w->alignment);
    for (size_t i = 0; i < w->n_t; i++) {
        put(&af, w->ts[i].data, w->ts[i].nbytes);
        put_pad(&af, w->ts[i].nbytes, w->alignment);
    }
    return ffn_atomic_commit(&af);
}
