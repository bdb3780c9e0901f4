/* test_gguf.c -- the GGUF reader and writer (src/format/gguf.c): a round
 * trip of every metadata type and every tensor type ffn writes, at
 * alignments 32 (default), 64 and 1; the typed getters and their errors;
 * nested arrays; and one hand-built hostile file per validation rule,
 * checking the status and that the message names the file, the key or
 * tensor, and what was expected. */
#include "check.h"
#include "ffn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/ffn_test_gguf_XXXXXX";

/* ---- a byte builder for hand-made files ---------------------------------- */

typedef struct buf {
    unsigned char *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void str(buf *b, const char *s) {
    u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void header(buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    b->n = 0;
    put(b, "GGUF", 4);
    u32(b, version);
    u64(b, n_tensors);
    u64(b, n_kv);
}
static void kv_u32(buf *b, const char *key, uint32_t v) {
    str(b, key);
    u32(b, FFN_GGUF_VTYPE_UINT32);
    u32(b, v);
}
static void tinfo(buf *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t offset) {
    str(b, name);
    u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) u64(b, ne[d]);
    u32(b, type);
    u64(b, offset);
}
static void pad(buf *b, size_t align) {
    static const unsigned char z[256];
    put(b, z, (align - b->n % align) % align);
}
static void zeros(buf *b, size_t n) {
    for (size_t i = 0; i < n; i++) put(b, "", 1);
}

/* Open b; expect `status`, and every needle (NULL-terminated list) in the message. */
static void expect_reject(const buf *b, ffn_status status, const char *what, const char *const *needles) {
    ffn_gguf_file *f = (ffn_gguf_file *)1;
    ffn_status s = ffn_gguf_open_buffer(b->p, b->n, "hostile.gguf", &f);
    CHECK(s == status, "%s: status %s, expected %s (%s)", what, ffn_status_str(s), ffn_status_str(status),
          ffn_last_error());
    if (s == FFN_OK) {
        ffn_gguf_close(f);
        return;
    }
    CHECK(f == NULL, "%s: *out is NULL on failure", what);
    CHECK(strstr(ffn_last_error(), "hostile.gguf") != NULL, "%s: names the file: %s", what, ffn_last_error());
    for (int i = 0; needles && needles[i]; i++)
        CHECK(strstr(ffn_last_error(), needles[i]) != NULL, "%s: message lacks '%s': %s", what, needles[i],
              ffn_last_error());
}
#define REJECT(b, what, ...) expect_reject(b, FFN_ERR_FORMAT, what, (const char *const[]){__VA_ARGS__, NULL})

/* ---- the round trip --------------------------------------------------------- */

static void test_roundtrip(uint32_t alignment) {
    char path[128];
    snprintf(path, sizeof path, "%s/rt_%u.gguf", dir, alignment);
    ffn_gguf_writer *w;
    CHECK(ffn_gguf_writer_create(&w) == FFN_OK, "create");
    if (alignment != 32) CHECK(ffn_gguf_writer_set_u32(w, "general.alignment", alignment) == FFN_OK, "alignment");
    ffn_gguf_writer_set_u8(w, "t.u8", 250);
    ffn_gguf_writer_set_i8(w, "t.i8", -120);
    ffn_gguf_writer_set_u16(w, "t.u16", 65000);
    ffn_gguf_writer_set_i16(w, "t.i16", -32000);
    ffn_gguf_writer_set_u32(w, "t.u32", 4000000000u);
    ffn_gguf_writer_set_i32(w, "t.i32", -2000000000);
    ffn_gguf_writer_set_f32(w, "t.f32", 0.1f);
    ffn_gguf_writer_set_bool(w, "t.bool", 1);
    ffn_gguf_writer_set_str(w, "t.str", "héllo");
    ffn_gguf_writer_set_u64(w, "t.u64", UINT64_MAX);
    ffn_gguf_writer_set_i64(w, "t.i64", INT64_MIN);
    ffn_gguf_writer_set_f64(w, "t.f64", -1e300);
    ffn_gguf_writer_set_str(w, "t.replaced", "first");
    ffn_gguf_writer_set_i32(w, "t.replaced", 42); /* replaced in place, with a new type */
    const int32_t ai[3] = {1, -2, 3};
    const double ad[2] = {0.5, -0.25};
    const uint8_t ab[4] = {1, 0, 0, 1};
    const char *as[3] = {"a", "", "ccc"};
    CHECK(ffn_gguf_writer_set_array(w, "a.i32", FFN_GGUF_VTYPE_INT32, ai, 3) == FFN_OK, "array i32");
    CHECK(ffn_gguf_writer_set_array(w, "a.f64", FFN_GGUF_VTYPE_FLOAT64, ad, 2) == FFN_OK, "array f64");
    CHECK(ffn_gguf_writer_set_array(w, "a.bool", FFN_GGUF_VTYPE_BOOL, ab, 4) == FFN_OK, "array bool");
    CHECK(ffn_gguf_writer_set_array(w, "a.empty", FFN_GGUF_VTYPE_UINT16, NULL, 0) == FFN_OK, "empty array");
    CHECK(ffn_gguf_writer_set_str_array(w, "a.str", as, 3) == FFN_OK, "array str");
    /* tensors: every type ffn writes, odd numbers of blocks and rows */
    const ffn_ggml_type types[] = {FFN_GGML_TYPE_F32, FFN_GGML_TYPE_F16, FFN_GGML_TYPE_BF16, FFN_GGML_TYPE_Q8_0,
                                   FFN_GGML_TYPE_Q4_0, FFN_GGML_TYPE_Q4_K, FFN_GGML_TYPE_Q6_K};
    const int64_t ne0[] = {5, 7, 3, 96, 160, 768, 256};
    static float data[7][768 * 3];
    for (int k = 0; k < 7; k++)
        for (int i = 0; i < 768 * 3; i++) data[k][i] = sinf(0.37f * (float)i + (float)k) * (1.0f + (float)(i % 5));
    for (int k = 0; k < 7; k++) {
        char name[32];
        snprintf(name, sizeof name, "blk.%d.%s", k, ffn_ggml_type_name(types[k]));
        CHECK(ffn_gguf_writer_add_f32(w, name, types[k], 2, (int64_t[]){ne0[k], 3}, data[k]) == FFN_OK, "add %s: %s",
              name, ffn_last_error());
    }
    const uint8_t raw[17] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17};
    CHECK(ffn_gguf_writer_add_raw(w, "raw.mxfp4", FFN_GGML_TYPE_MXFP4, 1, (int64_t[]){32}, raw, 17) == FFN_OK,
          "raw mxfp4");
    CHECK(ffn_gguf_writer_add_f32(w, "scalar", FFN_GGML_TYPE_F32, 0, NULL, (float[]){2.5f}) == FFN_OK, "scalar");
    CHECK(ffn_gguf_writer_save(w, path) == FFN_OK, "save: %s", ffn_last_error());
    ffn_gguf_writer_free(w);
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CHECK(access(tmp, F_OK) != 0, "no temporary file left");

    ffn_gguf_file *f;
    CHECK(ffn_gguf_open(path, &f) == FFN_OK, "open: %s", ffn_last_error());
    if (!f) return;
    CHECK(ffn_gguf_version(f) == 3 && ffn_gguf_alignment(f) == alignment, "version/alignment %zu",
          ffn_gguf_alignment(f));
    CHECK(ffn_gguf_data_offset(f) % alignment == 0, "data section aligned");
    uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32v; int32_t i32; float f32; int b;
    uint64_t u64v; int64_t i64; double f64; const char *s; size_t len;
    CHECK(ffn_gguf_get_u8(f, "t.u8", &u8) == FFN_OK && u8 == 250, "u8");
    CHECK(ffn_gguf_get_i8(f, "t.i8", &i8) == FFN_OK && i8 == -120, "i8");
    CHECK(ffn_gguf_get_u16(f, "t.u16", &u16) == FFN_OK && u16 == 65000, "u16");
    CHECK(ffn_gguf_get_i16(f, "t.i16", &i16) == FFN_OK && i16 == -32000, "i16");
    CHECK(ffn_gguf_get_u32(f, "t.u32", &u32v) == FFN_OK && u32v == 4000000000u, "u32");
    CHECK(ffn_gguf_get_i32(f, "t.i32", &i32) == FFN_OK && i32 == -2000000000, "i32");
    CHECK(ffn_gguf_get_f32(f, "t.f32", &f32) == FFN_OK && f32 == 0.1f, "f32");
    CHECK(ffn_gguf_get_bool(f, "t.bool", &b) == FFN_OK && b == 1, "bool");
    CHECK(ffn_gguf_get_str(f, "t.str", &s, &len) == FFN_OK && len == 6 && !strcmp(s, "héllo"), "str");
    CHECK(ffn_gguf_get_u64(f, "t.u64", &u64v) == FFN_OK && u64v == UINT64_MAX, "u64");
    CHECK(ffn_gguf_get_i64(f, "t.i64", &i64) == FFN_OK && i64 == INT64_MIN, "i64");
    CHECK(ffn_gguf_get_f64(f, "t.f64", &f64) == FFN_OK && f64 == -1e300, "f64");
    CHECK(ffn_gguf_get_i32(f, "t.replaced", &i32) == FFN_OK && i32 == 42, "replaced value");
    CHECK(!strcmp(ffn_gguf_kv_key(f, alignment != 32 ? 13 : 12), "t.replaced"), "a replaced key keeps its place");
    CHECK(ffn_gguf_get_int(f, "t.u32", &i64) == FFN_OK && i64 == 4000000000ll, "get_int of a u32");
    CHECK(ffn_gguf_get_int(f, "t.u64", &i64) == FFN_ERR_FORMAT && strstr(ffn_last_error(), "t.u64"),
          "get_int of u64 max: %s", ffn_last_error());
    CHECK(ffn_gguf_get_float(f, "t.f32", &f64) == FFN_OK && f64 == (double)0.1f, "get_float of f32");
    CHECK(ffn_gguf_get_u32(f, "t.str", &u32v) == FFN_ERR_FORMAT, "type mismatch");
    CHECK(strstr(ffn_last_error(), "t.str: expected a uint32, found a string"), "message: %s", ffn_last_error());
    CHECK(ffn_gguf_get_u32(f, "no.such", &u32v) == FFN_ERR_MISSING && strstr(ffn_last_error(), "no.such"),
          "missing: %s", ffn_last_error());
    ffn_gguf_array a;
    ffn_gguf_value v;
    CHECK(ffn_gguf_get_array(f, "a.i32", &a) == FFN_OK && a.type == FFN_GGUF_VTYPE_INT32 && a.count == 3, "a.i32");
    CHECK(ffn_gguf_array_get(&a, 1, &v) == FFN_OK && v.v.i32 == -2, "a.i32[1]");
    CHECK(ffn_gguf_array_get(&a, 3, &v) == FFN_ERR_INVALID_ARG, "a.i32[3] out of range");
    CHECK(a.data && !memcmp(a.data, ai, sizeof ai), "a.i32 raw data");
    CHECK(ffn_gguf_get_array(f, "a.f64", &a) == FFN_OK && ffn_gguf_array_get(&a, 1, &v) == FFN_OK &&
              v.v.f64 == -0.25, "a.f64");
    CHECK(ffn_gguf_get_array(f, "a.bool", &a) == FFN_OK && ffn_gguf_array_get(&a, 3, &v) == FFN_OK &&
              v.type == FFN_GGUF_VTYPE_BOOL && v.v.boolean == 1, "a.bool");
    CHECK(ffn_gguf_get_array(f, "a.empty", &a) == FFN_OK && a.count == 0 && a.type == FFN_GGUF_VTYPE_UINT16, "empty");
    CHECK(ffn_gguf_get_array(f, "a.str", &a) == FFN_OK && a.count == 3 && !a.data, "a.str");
    int ok = 1;
    for (int i = 0; i < 3; i++)
        ok &= ffn_gguf_array_get(&a, (uint64_t)i, &v) == FFN_OK && v.type == FFN_GGUF_VTYPE_STRING &&
              !strcmp(v.v.str.ptr, as[i]) && v.v.str.len == strlen(as[i]);
    CHECK(ok, "a.str elements");
    /* iteration covers every key once, in the order written */
    CHECK(ffn_gguf_kv_count(f) == (alignment != 32 ? 19u : 18u), "kv count %zu", ffn_gguf_kv_count(f));
    for (size_t i = 0; i < ffn_gguf_kv_count(f); i++)
        CHECK(ffn_gguf_find_key(f, ffn_gguf_kv_key(f, i)) == (int64_t)i, "find_key of key %zu", i);
    /* tensors: bytes equal ffn_ggml_quantize_row's, offsets aligned, values decode */
    CHECK(ffn_gguf_count(f) == 9, "tensor count %zu", ffn_gguf_count(f));
    for (int k = 0; k < 7; k++) {
        char name[32];
        snprintf(name, sizeof name, "blk.%d.%s", k, ffn_ggml_type_name(types[k]));
        ffn_gguf_tensor t;
        CHECK(ffn_gguf_find(f, name, &t) == FFN_OK, "find %s", name);
        CHECK(t.type == types[k] && t.n_dims == 2 && t.ne[0] == ne0[k] && t.ne[1] == 3 && t.ne[2] == 1 &&
                  t.numel == ne0[k] * 3, "%s shape", name);
        CHECK(t.offset % alignment == 0, "%s offset %llu aligned to %u", name, (unsigned long long)t.offset, alignment);
        size_t rb;
        ffn_ggml_row_size(types[k], ne0[k], &rb);
        unsigned char *want = malloc(rb * 3);
        float *back = malloc(sizeof(float) * (size_t)ne0[k] * 3), *got;
        for (int r = 0; r < 3; r++) ffn_ggml_quantize_row(types[k], data[k] + r * ne0[k], want + r * rb, ne0[k]);
        CHECK(t.nbytes == rb * 3 && !memcmp(t.data, want, rb * 3), "%s bytes", name);
        for (int r = 0; r < 3; r++) ffn_ggml_dequantize_row(types[k], want + r * rb, back + r * ne0[k], ne0[k]);
        CHECK(ffn_gguf_load_f32(f, name, &got) == FFN_OK && !memcmp(got, back, sizeof(float) * (size_t)ne0[k] * 3),
              "%s dequantized", name);
        free(got);
        free(want);
        free(back);
    }
    ffn_gguf_tensor t;
    CHECK(ffn_gguf_find(f, "raw.mxfp4", &t) == FFN_OK && t.nbytes == 17 && !memcmp(t.data, raw, 17), "raw tensor");
    float one[32];
    CHECK(ffn_gguf_tensor_to_f32(f, &t, one) == FFN_ERR_UNSUPPORTED && strstr(ffn_last_error(), "raw.mxfp4") &&
              strstr(ffn_last_error(), "mxfp4"), "mxfp4 not decoded: %s", ffn_last_error());
    CHECK(ffn_gguf_find(f, "scalar", &t) == FFN_OK && t.n_dims == 0 && t.numel == 1 &&
              ffn_gguf_tensor_to_f32(f, &t, one) == FFN_OK && one[0] == 2.5f, "0-dim tensor");
    CHECK(ffn_gguf_get_tensor(f, 0, &t) == FFN_OK && !strcmp(t.name, "blk.0.f32"), "file order");
    CHECK(ffn_gguf_find(f, "nope", &t) == FFN_ERR_MISSING && strstr(ffn_last_error(), "nope"), "missing tensor");
    ffn_gguf_close(f);
    unlink(path);
}

static void test_writer_errors(void) {
    ffn_gguf_writer *w;
    ffn_gguf_writer_create(&w);
    CHECK(ffn_gguf_writer_set_u32(w, "general.alignment", 48) == FFN_ERR_INVALID_ARG &&
              strstr(ffn_last_error(), "power of two"), "alignment 48: %s", ffn_last_error());
    CHECK(ffn_gguf_writer_set_u32(w, "general.alignment", 0) == FFN_ERR_INVALID_ARG, "alignment 0");
    CHECK(ffn_gguf_writer_set_u64(w, "general.alignment", 64) == FFN_ERR_INVALID_ARG &&
              strstr(ffn_last_error(), "uint32"), "alignment as u64: %s", ffn_last_error());
    CHECK(ffn_gguf_writer_set_u32(w, "", 1) == FFN_ERR_INVALID_ARG, "empty key");
    CHECK(ffn_gguf_writer_set_array(w, "x", FFN_GGUF_VTYPE_STRING, "a", 1) == FFN_ERR_INVALID_ARG, "string via set_array");
    CHECK(ffn_gguf_writer_set_array(w, "x", FFN_GGUF_VTYPE_BOOL, (uint8_t[]){2}, 1) == FFN_ERR_INVALID_ARG, "bool 2");
    float x[64] = {0};
    CHECK(ffn_gguf_writer_add_f32(w, "a", FFN_GGML_TYPE_Q8_0, 2, (int64_t[]){16, 2}, x) == FFN_ERR_INVALID_ARG &&
              strstr(ffn_last_error(), "a: ne[0] = 16: expected a multiple of the q8_0 block size 32"),
          "ne0 16 for q8_0: %s", ffn_last_error());
    CHECK(ffn_gguf_writer_add_f32(w, "a", FFN_GGML_TYPE_F32, 5, (int64_t[]){1, 1, 1, 1, 1}, x) == FFN_ERR_INVALID_ARG,
          "5 dims");
    CHECK(ffn_gguf_writer_add_f32(w, "a", FFN_GGML_TYPE_IQ2_XXS, 1, (int64_t[]){256}, x) == FFN_ERR_UNSUPPORTED,
          "iq2_xxs encode");
    char long_name[80];
    memset(long_name, 'n', 64);
    long_name[64] = 0;
    CHECK(ffn_gguf_writer_add_f32(w, long_name, FFN_GGML_TYPE_F32, 1, (int64_t[]){1}, x) == FFN_ERR_INVALID_ARG,
          "64-byte name");
    CHECK(ffn_gguf_writer_add_f32(w, "a", FFN_GGML_TYPE_F32, 1, (int64_t[]){4}, x) == FFN_OK, "a");
    CHECK(ffn_gguf_writer_add_f32(w, "a", FFN_GGML_TYPE_F32, 1, (int64_t[]){4}, x) == FFN_ERR_INVALID_ARG &&
              strstr(ffn_last_error(), "already"), "duplicate name");
    CHECK(ffn_gguf_writer_add_raw(w, "r", FFN_GGML_TYPE_Q8_0, 1, (int64_t[]){32}, x, 33) == FFN_ERR_INVALID_ARG &&
              strstr(ffn_last_error(), "expected 34 bytes"), "raw size: %s", ffn_last_error());
    x[3] = NAN;
    CHECK(ffn_gguf_writer_add_f32(w, "n", FFN_GGML_TYPE_Q4_0, 1, (int64_t[]){32}, x) == FFN_ERR_INVALID_ARG &&
              strstr(ffn_last_error(), "n: row 0") && strstr(ffn_last_error(), "element 3"), "NaN: %s",
          ffn_last_error());
    CHECK(ffn_gguf_writer_save(w, "/nonexistent-dir/x.gguf") == FFN_ERR_IO, "save into a missing directory");
    ffn_gguf_writer_free(w);
    ffn_gguf_file *f;
    CHECK(ffn_gguf_open("/nonexistent-dir/x.gguf", &f) == FFN_ERR_IO && f == NULL, "open a missing file");
    CHECK(ffn_gguf_open(dir, &f) == FFN_ERR_IO && strstr(ffn_last_error(), "not a regular file"), "open a directory: %s",
          ffn_last_error());
}

/* ---- hostile files -------------------------------------------------------------- */

static void test_hostile(void) {
    buf b = {0};
    /* a valid base: one key, one q8_0 tensor of 32 */
    header(&b, 3, 1, 1);
    kv_u32(&b, "k", 1);
    tinfo(&b, "w", 1, (uint64_t[]){32}, FFN_GGML_TYPE_Q8_0, 0);
    pad(&b, 32);
    zeros(&b, 34);
    expect_reject(&b, FFN_OK, "the valid base", NULL);
    b.n = 20;
    REJECT(&b, "too short", "too short", "24 bytes");
    header(&b, 3, 0, 0);
    memcpy(b.p, "GGUG", 4);
    REJECT(&b, "magic", "magic", "GGUF");
    header(&b, 1, 0, 0);
    REJECT(&b, "version 1", "version: expected 2 or 3, found 1");
    header(&b, 4, 0, 0);
    REJECT(&b, "version 4", "expected 2 or 3, found 4");
    header(&b, 0x03000000u, 0, 0);
    REJECT(&b, "big-endian", "big-endian");
    header(&b, 3, 0, 1000);
    REJECT(&b, "n_kv", "metadata count", "found 1000");
    header(&b, 3, 1000, 0);
    REJECT(&b, "n_tensors", "tensor count", "found 1000");
    header(&b, 3, 0, 1);
    u64(&b, 500);
    put(&b, "key", 3);
    zeros(&b, 20);
    REJECT(&b, "key length", "metadata entry 0", "key: length 500", "bytes left");
    header(&b, 3, 0, 1);
    str(&b, "");
    u32(&b, 0);
    zeros(&b, 4);
    REJECT(&b, "empty key", "metadata entry 0", "non-empty");
    header(&b, 3, 0, 1);
    u64(&b, 3);
    put(&b, "a\0b", 3);
    u32(&b, 0);
    zeros(&b, 4);
    REJECT(&b, "NUL in key", "NUL");
    header(&b, 3, 0, 2);
    kv_u32(&b, "dup", 1);
    kv_u32(&b, "dup", 2);
    REJECT(&b, "duplicate key", "dup: expected each key once");
    header(&b, 3, 0, 1);
    str(&b, "t");
    u32(&b, 13);
    zeros(&b, 8);
    REJECT(&b, "value type 13", "t: value type: expected 0..12, found 13");
    header(&b, 3, 0, 1);
    str(&b, "flag");
    u32(&b, FFN_GGUF_VTYPE_BOOL);
    put(&b, "\x02", 1);
    zeros(&b, 10);
    REJECT(&b, "bool 2", "flag: bool: expected 0 or 1, found 2");
    header(&b, 3, 0, 1);
    str(&b, "s");
    u32(&b, FFN_GGUF_VTYPE_STRING);
    u64(&b, 1u << 20);
    zeros(&b, 16);
    REJECT(&b, "string value length", "s: string value: length 1048576");
    header(&b, 3, 0, 1);
    str(&b, "arr");
    u32(&b, FFN_GGUF_VTYPE_ARRAY);
    u32(&b, 14);
    u64(&b, 0);
    REJECT(&b, "array element type", "arr: array element type: expected 0..12, found 14");
    header(&b, 3, 0, 1);
    str(&b, "arr");
    u32(&b, FFN_GGUF_VTYPE_ARRAY);
    u32(&b, FFN_GGUF_VTYPE_UINT32);
    u64(&b, 1000);
    zeros(&b, 40);
    REJECT(&b, "array count", "arr: array of 1000 uint32", "expected at most 10 elements");
    header(&b, 3, 0, 1);
    str(&b, "deep");
    u32(&b, FFN_GGUF_VTYPE_ARRAY);
    for (int i = 0; i < FFN_GGUF_MAX_NESTING + 1; i++) {
        u32(&b, FFN_GGUF_VTYPE_ARRAY);
        u64(&b, 1);
    }
    u32(&b, 0);
    u64(&b, 0);
    REJECT(&b, "nesting", "deep: arrays nested 9 deep: expected at most 8");
    header(&b, 3, 0, 1);
    str(&b, "general.alignment");
    u32(&b, FFN_GGUF_VTYPE_UINT64);
    u64(&b, 64);
    REJECT(&b, "alignment as u64", "general.alignment: expected a uint32, found a uint64");
    header(&b, 3, 0, 1);
    kv_u32(&b, "general.alignment", 48);
    REJECT(&b, "alignment 48", "general.alignment: expected a power of two, found 48");
    header(&b, 3, 0, 1);
    kv_u32(&b, "general.alignment", 0);
    REJECT(&b, "alignment 0", "power of two, found 0");
    /* tensor infos */
    header(&b, 3, 1, 0);
    tinfo(&b, "", 1, (uint64_t[]){1}, 0, 0);
    zeros(&b, 40);
    REJECT(&b, "empty name", "tensor info 0", "expected 1..63 bytes");
    char name64[65];
    memset(name64, 'x', 64);
    name64[64] = 0;
    header(&b, 3, 1, 0);
    tinfo(&b, name64, 1, (uint64_t[]){1}, 0, 0);
    zeros(&b, 40);
    REJECT(&b, "64-byte name", "found 64 bytes");
    header(&b, 3, 2, 0);
    tinfo(&b, "same", 1, (uint64_t[]){8}, 0, 0);
    tinfo(&b, "same", 1, (uint64_t[]){8}, 0, 32);
    pad(&b, 32);
    zeros(&b, 64);
    REJECT(&b, "duplicate tensor", "same: expected each tensor name once");
    header(&b, 3, 1, 0);
    tinfo(&b, "d5", 5, (uint64_t[]){1, 1, 1, 1, 1}, 0, 0);
    zeros(&b, 40);
    REJECT(&b, "5 dims", "d5: n_dims: expected at most 4, found 5");
    header(&b, 3, 1, 0);
    tinfo(&b, "neg", 2, (uint64_t[]){4, (uint64_t)1 << 63}, 0, 0);
    zeros(&b, 40);
    REJECT(&b, "ne >= 2^63", "neg: ne[1]");
    header(&b, 3, 1, 0);
    tinfo(&b, "big", 3, (uint64_t[]){(uint64_t)1 << 32, (uint64_t)1 << 32, 4}, 0, 0);
    zeros(&b, 40);
    REJECT(&b, "numel overflow", "big: ne: the number of elements overflows");
    header(&b, 3, 1, 0);
    tinfo(&b, "bytes", 2, (uint64_t[]){(uint64_t)1 << 31, (uint64_t)1 << 30}, FFN_GGML_TYPE_F64, 0);
    zeros(&b, 40);
    REJECT(&b, "byte size overflow", "bytes: the byte size");
    header(&b, 3, 1, 0);
    tinfo(&b, "t4", 1, (uint64_t[]){32}, 4, 0);
    zeros(&b, 40);
    REJECT(&b, "type 4", "t4: type 4: expected a known ggml type");
    header(&b, 3, 1, 0);
    tinfo(&b, "odd", 2, (uint64_t[]){48, 2}, FFN_GGML_TYPE_Q8_0, 0);
    zeros(&b, 200);
    REJECT(&b, "ne0 not a multiple", "odd: ne[0] = 48: expected a multiple of the q8_0 block size 32");
    header(&b, 3, 2, 0);
    tinfo(&b, "a", 1, (uint64_t[]){3}, 0, 0);
    tinfo(&b, "b", 1, (uint64_t[]){3}, 0, 12);
    pad(&b, 32);
    zeros(&b, 64);
    REJECT(&b, "offset", "b: offset 12: expected 32");
    header(&b, 3, 1, 0);
    tinfo(&b, "cut", 1, (uint64_t[]){64}, 0, 0);
    pad(&b, 32);
    zeros(&b, 255);
    REJECT(&b, "truncated data", "cut: data", "expected inside its");
    header(&b, 3, 1, 1);
    kv_u32(&b, "k", 1);
    tinfo(&b, "w", 1, (uint64_t[]){32}, FFN_GGML_TYPE_Q8_0, 0);
    b.n -= 3;
    REJECT(&b, "truncated tensor info", "w: offset: expected 8 bytes");
    free(b.p);
}

static void test_nested_and_v2(void) {
    buf b = {0};
    header(&b, 2, 0, 1);
    str(&b, "nest");
    u32(&b, FFN_GGUF_VTYPE_ARRAY);
    u32(&b, FFN_GGUF_VTYPE_ARRAY);
    u64(&b, 2);
    u32(&b, FFN_GGUF_VTYPE_INT16);
    u64(&b, 2);
    put(&b, "\x01\x00\xff\xff", 4);
    u32(&b, FFN_GGUF_VTYPE_STRING);
    u64(&b, 1);
    str(&b, "in");
    ffn_gguf_file *f;
    CHECK(ffn_gguf_open_buffer(b.p, b.n, "nested.gguf", &f) == FFN_OK, "nested: %s", ffn_last_error());
    if (f) {
        ffn_gguf_array a;
        ffn_gguf_value v, e;
        CHECK(ffn_gguf_version(f) == 2, "version 2 accepted");
        CHECK(ffn_gguf_get_array(f, "nest", &a) == FFN_OK && a.type == FFN_GGUF_VTYPE_ARRAY && a.count == 2, "outer");
        CHECK(ffn_gguf_array_get(&a, 0, &v) == FFN_OK && v.v.arr.type == FFN_GGUF_VTYPE_INT16 &&
                  ffn_gguf_array_get(&v.v.arr, 1, &e) == FFN_OK && e.v.i16 == -1, "inner int16");
        CHECK(ffn_gguf_array_get(&a, 1, &v) == FFN_OK && ffn_gguf_array_get(&v.v.arr, 0, &e) == FFN_OK &&
                  e.type == FFN_GGUF_VTYPE_STRING && !strcmp(e.v.str.ptr, "in"), "inner string");
        CHECK(ffn_gguf_alignment(f) == 32 && ffn_gguf_count(f) == 0, "defaults");
        ffn_gguf_close(f);
    }
    free(b.p);
}

int main(void) {
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_roundtrip(32);
    test_roundtrip(64);
    test_roundtrip(1);
    test_writer_errors();
    test_hostile();
    test_nested_and_v2();
    rmdir(dir);
    return check_done("test_gguf");
}
