/* test_safetensors.c -- the safetensors reader and writer: round trips of
 * several dtypes, every kind of bad file (one test each, each expecting its
 * own message), metadata, fp16/bf16 conversions on known values, fp32
 * access (read/load/view, shape errors), and atomic writes. */
#include "check.h"
#include "ffn.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[] = "/tmp/ffn_test_st_XXXXXX";
static char path[1024];

/* Write a file: an explicit 8-byte header length, the header text, then
 * `data_len` bytes of data (zeros when data is NULL). */
static void write_raw(const char *p, uint64_t header_len, const char *header, size_t header_bytes,
                      const void *data, size_t data_len) {
    FILE *f = fopen(p, "wb");
    if (!f) return;
    fwrite(&header_len, 8, 1, f);
    fwrite(header, 1, header_bytes, f);
    for (size_t i = 0; i < data_len; i++) fputc(data ? ((const unsigned char *)data)[i] : 0, f);
    fclose(f);
}

/* A consistent header (length = its size) with `data_len` zero bytes. */
static void write_header(const char *header, size_t data_len) {
    write_raw(path, strlen(header), header, strlen(header), NULL, data_len);
}

/* Opening `path` fails with `status` and a message holding the file name
 * and `fragment`. */
static void expect_open_fail(ffn_status status, const char *fragment, const char *what) {
    ffn_st_file *f = (ffn_st_file *)1;
    ffn_status s = ffn_st_open(path, &f);
    CHECK(s == status, "%s: status %d (expected %d): %s", what, s, status, ffn_last_error());
    CHECK(f == NULL, "%s: file NULL after failure", what);
    CHECK(strstr(ffn_last_error(), path) != NULL, "%s: message names the file: %s", what, ffn_last_error());
    CHECK(strstr(ffn_last_error(), fragment) != NULL, "%s: message '%s' lacks '%s'", what, ffn_last_error(),
          fragment);
}

static void test_dtypes(void) {
    const char *names[] = {"F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL"};
    const size_t sizes[] = {8, 4, 2, 2, 8, 4, 2, 1, 1, 1};
    for (int d = 0; d < FFN_DTYPE_COUNT; d++) {
        ffn_dtype got;
        CHECK(ffn_dtype_parse(names[d], &got) && got == (ffn_dtype)d, "parse %s", names[d]);
        CHECK(!strcmp(ffn_dtype_name((ffn_dtype)d), names[d]), "name %d", d);
        CHECK(ffn_dtype_size((ffn_dtype)d) == sizes[d], "size %s", names[d]);
    }
    ffn_dtype got;
    CHECK(!ffn_dtype_parse("f32", &got) && !ffn_dtype_parse("F8_E4M3", &got) && !ffn_dtype_parse("", &got) &&
          !ffn_dtype_parse(NULL, &got), "unknown names");
    CHECK(ffn_dtype_size((ffn_dtype)99) == 0 && !strcmp(ffn_dtype_name((ffn_dtype)99), "?"), "invalid dtype");
}

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void test_conversions(void) {
    /* f16 -> f32, known encodings */
    CHECK(ffn_f16_to_f32(0x3C00) == 1.0f, "1");
    CHECK(ffn_f16_to_f32(0xC000) == -2.0f, "-2");
    CHECK(ffn_f16_to_f32(0x7BFF) == 65504.0f, "max half");
    CHECK(ffn_f16_to_f32(0x0400) == ldexpf(1, -14), "min normal");
    CHECK(ffn_f16_to_f32(0x0001) == ldexpf(1, -24), "min subnormal");
    CHECK(ffn_f16_to_f32(0x03FF) == ldexpf(1023, -24), "max subnormal");
    CHECK(ffn_f16_to_f32(0x8001) == -ldexpf(1, -24), "negative subnormal");
    CHECK(bits(ffn_f16_to_f32(0x8000)) == 0x80000000u, "-0");
    CHECK(ffn_f16_to_f32(0x0000) == 0.0f && !signbit(ffn_f16_to_f32(0)), "+0");
    CHECK(isinf(ffn_f16_to_f32(0x7C00)) && ffn_f16_to_f32(0x7C00) > 0, "+inf");
    CHECK(isinf(ffn_f16_to_f32(0xFC00)) && ffn_f16_to_f32(0xFC00) < 0, "-inf");
    CHECK(isnan(ffn_f16_to_f32(0x7E00)) && isnan(ffn_f16_to_f32(0x7C01)), "nan");
    CHECK(ffn_f16_to_f32(0x3555) == 0.333251953125f, "1/3 rounded");
    /* every half round-trips through f32 exactly (NaNs stay NaN) */
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = ffn_f16_to_f32((uint16_t)h);
        uint16_t back = ffn_f32_to_f16(f);
        if (isnan(f) ? !(isnan(ffn_f16_to_f32(back)) && (back & 0x8000) == (h & 0x8000)) : back != h) bad++;
    }
    CHECK(bad == 0, "%d halves do not round-trip", bad);

    /* f32 -> f16 rounding: ties to even, overflow, underflow */
    CHECK(ffn_f32_to_f16(1.0f) == 0x3C00, "1");
    CHECK(ffn_f32_to_f16(1.0f + ldexpf(1, -11)) == 0x3C00, "tie rounds to even (down)");
    CHECK(ffn_f32_to_f16(1.0f + 3 * ldexpf(1, -11)) == 0x3C02, "tie rounds to even (up)");
    CHECK(ffn_f32_to_f16(1.0f + ldexpf(1, -11) + ldexpf(1, -20)) == 0x3C01, "above the tie rounds up");
    CHECK(ffn_f32_to_f16(65504.0f) == 0x7BFF, "max");
    CHECK(ffn_f32_to_f16(65519.0f) == 0x7BFF, "below the overflow tie");
    CHECK(ffn_f32_to_f16(65520.0f) == 0x7C00, "overflow tie rounds to inf");
    CHECK(ffn_f32_to_f16(1e10f) == 0x7C00 && ffn_f32_to_f16(-1e10f) == 0xFC00, "overflow to inf");
    CHECK(ffn_f32_to_f16(INFINITY) == 0x7C00 && ffn_f32_to_f16(-INFINITY) == 0xFC00, "inf");
    CHECK((ffn_f32_to_f16(NAN) & 0x7C00) == 0x7C00 && (ffn_f32_to_f16(NAN) & 0x3FF), "nan stays nan");
    CHECK(ffn_f32_to_f16(ldexpf(1, -24)) == 0x0001, "min subnormal");
    CHECK(ffn_f32_to_f16(ldexpf(1, -25)) == 0x0000, "half the min subnormal ties to 0");
    CHECK(ffn_f32_to_f16(ldexpf(3, -26)) == 0x0001, "0.75 min subnormal rounds up");
    CHECK(ffn_f32_to_f16(ldexpf(3, -25)) == 0x0002, "1.5 min subnormal ties to even 2");
    CHECK(ffn_f32_to_f16(ldexpf(5, -25)) == 0x0002, "2.5 min subnormal ties to even 2");
    CHECK(ffn_f32_to_f16(ldexpf(1, -14) - ldexpf(1, -26)) == 0x0400, "rounds up into min normal");
    CHECK(ffn_f32_to_f16(1e-10f) == 0 && ffn_f32_to_f16(-1e-10f) == 0x8000, "underflow keeps the sign");
    CHECK(ffn_f32_to_f16(ldexpf(1, -130)) == 0, "f32 subnormal to 0");

    /* bf16 */
    CHECK(ffn_bf16_to_f32(0x3F80) == 1.0f && ffn_bf16_to_f32(0xC040) == -3.0f, "bf16 1, -3");
    CHECK(ffn_bf16_to_f32(0x0001) == ldexpf(1, -133), "bf16 min subnormal");
    CHECK(isinf(ffn_bf16_to_f32(0x7F80)) && isnan(ffn_bf16_to_f32(0x7FC0)), "bf16 inf/nan");
    CHECK(ffn_f32_to_bf16(1.0f) == 0x3F80, "1");
    CHECK(ffn_f32_to_bf16(1.0f + ldexpf(1, -8)) == 0x3F80, "bf16 tie to even (down)");
    CHECK(ffn_f32_to_bf16(1.0f + 3 * ldexpf(1, -8)) == 0x3F82, "bf16 tie to even (up)");
    CHECK(ffn_f32_to_bf16(1.0f + ldexpf(1, -8) + ldexpf(1, -20)) == 0x3F81, "bf16 above tie");
    CHECK(ffn_f32_to_bf16(3.4028235e38f) == 0x7F80, "FLT_MAX rounds to inf in bf16");
    CHECK(ffn_f32_to_bf16(INFINITY) == 0x7F80 && ffn_f32_to_bf16(-INFINITY) == 0xFF80, "bf16 inf");
    uint16_t qn = ffn_f32_to_bf16(NAN);
    CHECK((qn & 0x7F80) == 0x7F80 && (qn & 0x7F), "bf16 nan stays nan (0x%04x)", qn);
    float snan;
    uint32_t snan_bits = 0x7F800001u; /* a NaN whose payload lives only in the dropped bits */
    memcpy(&snan, &snan_bits, 4);
    CHECK(isnan(ffn_bf16_to_f32(ffn_f32_to_bf16(snan))), "low-payload NaN does not become inf");
    CHECK(ffn_f32_to_bf16(ldexpf(1, -133)) == 0x0001, "bf16 subnormal");
    bad = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        float f = ffn_bf16_to_f32((uint16_t)b);
        if (!isnan(f) && ffn_f32_to_bf16(f) != b) bad++;
    }
    CHECK(bad == 0, "%d bf16 values do not round-trip", bad);
}

/* Independent references for narrowing: the CPU's F16C instruction for
 * f16 (round-to-nearest-even), and for bf16 the nearer of the two
 * neighbouring bf16 values computed in double (ties to the even one). */
#include <immintrin.h>
__attribute__((target("f16c"))) static uint16_t f16c_ref(float f) {
    return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

static uint16_t bf16_ref(float f) {
    uint32_t u = bits(f);
    if (isnan(f)) return (uint16_t)((u >> 16) | 0x40);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1); /* same sign, one ulp further from 0 */
    double x = fabs((double)f), a = fabs((double)ffn_bf16_to_f32(lo));
    /* the value one bf16 ulp above |lo| (may be inf: use the exact power of 2) */
    int e = (int)((u >> 23) & 0xFF);
    double ulp = ldexp(1.0, (e ? e : 1) - 127 - 7);
    double b = a + ulp;
    if (x - a < b - x) return lo;
    if (x - a > b - x) return hi;
    return (lo & 1) ? hi : lo;
}

static void test_narrowing_against_references(void) {
    uint64_t state = 0x9E3779B97F4A7C15ull; /* fixed seed */
    int bad16 = 0, badbf = 0, n = 2000000;
    int have_f16c = __builtin_cpu_supports("f16c");
    for (int i = 0; i < n; i++) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        uint32_t u = (uint32_t)state;
        /* a quarter of the cases sit exactly on or next to a rounding tie */
        if ((i & 3) == 1) u = (u & ~0x1FFFu) | 0x1000u;
        if ((i & 3) == 2) u = (u & ~0xFFFFu) | 0x8000u;
        if ((i & 7) == 3) u = (u & 0x807FFFFFu) | ((uint32_t)(100 + (u >> 27)) << 23); /* near half's range */
        float f;
        memcpy(&f, &u, 4);
        if (have_f16c) {
            uint16_t got = ffn_f32_to_f16(f), want = f16c_ref(f);
            if (isnan(f) ? !((got & 0x7C00) == 0x7C00 && (got & 0x3FF) && (got & 0x8000) == (want & 0x8000))
                         : got != want) {
                if (bad16++ < 5) fprintf(stderr, "f16 of 0x%08x: got 0x%04x, F16C 0x%04x\n", u, got, want);
            }
        }
        uint16_t gb = ffn_f32_to_bf16(f), wb = bf16_ref(f);
        if (gb != wb && badbf++ < 5) fprintf(stderr, "bf16 of 0x%08x: got 0x%04x, reference 0x%04x\n", u, gb, wb);
    }
    CHECK(bad16 == 0, "%d of %d f32->f16 differ from F16C%s", bad16, n, have_f16c ? "" : " (no F16C: skipped)");
    CHECK(badbf == 0, "%d of %d f32->bf16 differ from the double-precision reference", badbf, n);
}

__attribute__((target("f16c"))) static float f16c_widen(uint16_t h) { return _cvtsh_ss(h); }

/* Bulk widening through a file (the chunked, vectorised path) on every
 * 16-bit pattern, against F16C for f16 and the definition for bf16.  The
 * tensors sit at odd offsets (after a 1-byte tensor) to exercise unaligned
 * sources. */
static void test_bulk_widening(void) {
    uint16_t *all = malloc(65536 * sizeof *all);
    float *out = malloc(65536 * sizeof *out);
    for (uint32_t i = 0; i < 65536; i++) all[i] = (uint16_t)i;
    snprintf(path, sizeof path, "%s/all16.safetensors", dir);
    char header[256];
    int hl = snprintf(header, sizeof header,
                      "{\"pad\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                      "\"h\":{\"dtype\":\"F16\",\"shape\":[256,256],\"data_offsets\":[1,131073]},"
                      "\"b\":{\"dtype\":\"BF16\",\"shape\":[65536],\"data_offsets\":[131073,262145]}}");
    FILE *fp = fopen(path, "wb");
    uint64_t len = (uint64_t)hl;
    fwrite(&len, 8, 1, fp);
    fwrite(header, 1, (size_t)hl, fp);
    fputc(7, fp);
    fwrite(all, 2, 65536, fp);
    fwrite(all, 2, 65536, fp);
    fclose(fp);
    ffn_st_file *f = NULL;
    CHECK(ffn_st_open(path, &f) == FFN_OK, "open all16: %s", ffn_last_error());
    if (f) {
        int have_f16c = __builtin_cpu_supports("f16c"), bad = 0;
        CHECK(ffn_st_read_f32(f, "h", 2, (int64_t[]){256, 256}, out) == FFN_OK, "read h");
        for (uint32_t i = 0; i < 65536; i++) {
            float want = have_f16c ? f16c_widen((uint16_t)i) : ffn_f16_to_f32((uint16_t)i);
            if (isnan(want) ? !isnan(out[i]) || signbit(out[i]) != signbit(want) : bits(out[i]) != bits(want)) bad++;
            if (!isnan(want) && bits(ffn_f16_to_f32((uint16_t)i)) != bits(want)) bad++;
        }
        CHECK(bad == 0, "%d f16 patterns widen differently from F16C", bad);
        bad = 0;
        CHECK(ffn_st_read_f32(f, "b", 1, (int64_t[]){65536}, out) == FFN_OK, "read b");
        for (uint32_t i = 0; i < 65536; i++) bad += bits(out[i]) != i << 16;
        CHECK(bad == 0, "%d bf16 patterns widen wrongly", bad);
        ffn_st_close(f);
    }
    free(all);
    free(out);
}

static void test_round_trip(void) {
    enum { R = 3, C = 5 };
    float w32[R * C];
    double w64[4] = {1.5, -2.25, 1e300, 0.1};
    int64_t i64[3] = {INT64_MIN, 0, INT64_MAX};
    int32_t i32[2] = {-7, 123456};
    int16_t i16[3] = {-32768, 1, 32767};
    int8_t i8[5] = {-128, -1, 0, 1, 127};
    uint8_t u8[1] = {255}, bools[3] = {1, 0, 1};
    for (int i = 0; i < R * C; i++) w32[i] = (float)i * 0.37f - 2.0f;
    uint16_t f16[4] = {0x3C00, 0xC000, 0x0001, 0x7BFF}, bf16[4] = {0x3F80, 0xC040, 0x0001, 0x4049};

    ffn_st_writer *w = NULL;
    CHECK(ffn_st_writer_create(&w) == FFN_OK, "create writer");
    /* the odd-sized I8 first: the writer must still align the wider tensors */
    CHECK(ffn_st_writer_add(w, "i8", FFN_DTYPE_I8, 1, (int64_t[]){5}, i8) == FFN_OK, "add i8");
    CHECK(ffn_st_writer_add(w, "w32", FFN_DTYPE_F32, 2, (int64_t[]){R, C}, w32) == FFN_OK, "add f32");
    CHECK(ffn_st_writer_add_copy(w, "w64", FFN_DTYPE_F64, 2, (int64_t[]){2, 2}, w64) == FFN_OK, "add f64");
    CHECK(ffn_st_writer_add(w, "f16", FFN_DTYPE_F16, 1, (int64_t[]){4}, f16) == FFN_OK, "add f16");
    CHECK(ffn_st_writer_add(w, "bf16", FFN_DTYPE_BF16, 2, (int64_t[]){2, 2}, bf16) == FFN_OK, "add bf16");
    CHECK(ffn_st_writer_add(w, "i64", FFN_DTYPE_I64, 1, (int64_t[]){3}, i64) == FFN_OK, "add i64");
    CHECK(ffn_st_writer_add(w, "i32", FFN_DTYPE_I32, 1, (int64_t[]){2}, i32) == FFN_OK, "add i32");
    CHECK(ffn_st_writer_add(w, "i16", FFN_DTYPE_I16, 1, (int64_t[]){3}, i16) == FFN_OK, "add i16");
    CHECK(ffn_st_writer_add(w, "u8", FFN_DTYPE_U8, 0, NULL, u8) == FFN_OK, "add a scalar");
    CHECK(ffn_st_writer_add(w, "mask", FFN_DTYPE_BOOL, 1, (int64_t[]){3}, bools) == FFN_OK, "add bool");
    CHECK(ffn_st_writer_add(w, "empty", FFN_DTYPE_F32, 2, (int64_t[]){0, 7}, NULL) == FFN_OK, "add empty");
    CHECK(ffn_st_writer_add_f32(w, "as_bf16", FFN_DTYPE_BF16, 2, (int64_t[]){R, C}, w32) == FFN_OK, "add_f32 bf16");
    CHECK(ffn_st_writer_add_f32(w, "as_f16", FFN_DTYPE_F16, 2, (int64_t[]){R, C}, w32) == FFN_OK, "add_f32 f16");
    CHECK(ffn_st_writer_add(w, "ünïcode \"quoted\"\n", FFN_DTYPE_F32, 1, (int64_t[]){1}, w32) == FFN_OK,
          "add a name needing escapes");
    CHECK(ffn_st_writer_set_metadata(w, "format", "pt") == FFN_OK, "metadata");
    CHECK(ffn_st_writer_set_metadata(w, "note", "x") == FFN_OK && ffn_st_writer_set_metadata(w, "note", "a \"b\"\tc") == FFN_OK,
          "metadata replaced");

    /* writer errors */
    CHECK(ffn_st_writer_add(w, "w32", FFN_DTYPE_F32, 1, (int64_t[]){1}, w32) == FFN_ERR_INVALID_ARG &&
          strstr(ffn_last_error(), "w32: a tensor of this name was already added"), "duplicate name: %s",
          ffn_last_error());
    CHECK(ffn_st_writer_add(w, "__metadata__", FFN_DTYPE_F32, 1, (int64_t[]){1}, w32) == FFN_ERR_INVALID_ARG,
          "reserved name");
    CHECK(ffn_st_writer_add(w, "", FFN_DTYPE_F32, 1, (int64_t[]){1}, w32) == FFN_ERR_INVALID_ARG, "empty name");
    CHECK(ffn_st_writer_add(w, "bad\xff", FFN_DTYPE_F32, 1, (int64_t[]){1}, w32) == FFN_ERR_INVALID_ARG, "bad UTF-8");
    CHECK(ffn_st_writer_add(w, "neg", FFN_DTYPE_F32, 1, (int64_t[]){-1}, w32) == FFN_ERR_INVALID_ARG, "negative dim");
    CHECK(ffn_st_writer_add(w, "big", FFN_DTYPE_F32, 2, (int64_t[]){INT64_MAX / 2, 4}, w32) == FFN_ERR_OVERFLOW,
          "overflowing shape");
    CHECK(ffn_st_writer_add(w, "null", FFN_DTYPE_F32, 1, (int64_t[]){2}, NULL) == FFN_ERR_INVALID_ARG, "NULL data");
    CHECK(ffn_st_writer_add(w, "nine", FFN_DTYPE_F32, 9, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1}, w32) ==
          FFN_ERR_INVALID_ARG, "too many dims");
    CHECK(ffn_st_writer_add_f32(w, "int", FFN_DTYPE_I32, 1, (int64_t[]){1}, w32) == FFN_ERR_INVALID_ARG,
          "add_f32 wants a float dtype");

    snprintf(path, sizeof path, "%s/rt.safetensors", dir);
    w64[0] = 99; /* add_copy copied: the file keeps 1.5 */
    CHECK(ffn_st_writer_save(w, path) == FFN_OK, "save: %s", ffn_last_error());
    ffn_st_writer_free(w);
    ffn_st_writer_free(NULL);

    ffn_st_file *f = NULL;
    CHECK(ffn_st_open(path, &f) == FFN_OK, "open: %s", ffn_last_error());
    if (!f) return;
    CHECK(ffn_st_count(f) == 14, "14 tensors, found %zu", ffn_st_count(f));
    CHECK(!strcmp(ffn_st_path(f), path), "path");
    ffn_st_tensor t;
    /* every tensor is aligned to its element size in the file */
    for (size_t i = 0; i < ffn_st_count(f); i++) {
        CHECK(ffn_st_get(f, i, &t) == FFN_OK, "get %zu", i);
        CHECK(t.offset % ffn_dtype_size(t.dtype) == 0, "%s aligned: offset %zu", t.name, t.offset);
        if (i > 0) {
            ffn_st_tensor prev;
            ffn_st_get(f, i - 1, &prev);
            CHECK(prev.offset + prev.nbytes == t.offset, "data order contiguous");
        }
    }
    CHECK(ffn_st_get(f, 14, &t) == FFN_ERR_INVALID_ARG, "get out of range");

    CHECK(ffn_st_find(f, "i8", &t) == FFN_OK && t.dtype == FFN_DTYPE_I8 && t.ndim == 1 && t.shape[0] == 5 &&
          t.nbytes == 5 && !memcmp(t.data, i8, 5), "i8 back");
    CHECK(ffn_st_find(f, "i64", &t) == FFN_OK && !memcmp(t.data, i64, sizeof i64), "i64 back");
    CHECK(ffn_st_find(f, "i32", &t) == FFN_OK && !memcmp(t.data, i32, sizeof i32), "i32 back");
    CHECK(ffn_st_find(f, "i16", &t) == FFN_OK && !memcmp(t.data, i16, sizeof i16), "i16 back");
    CHECK(ffn_st_find(f, "u8", &t) == FFN_OK && t.ndim == 0 && t.numel == 1 && *(const uint8_t *)t.data == 255,
          "scalar back");
    CHECK(ffn_st_find(f, "mask", &t) == FFN_OK && t.dtype == FFN_DTYPE_BOOL && !memcmp(t.data, bools, 3), "bool back");
    CHECK(ffn_st_find(f, "empty", &t) == FFN_OK && t.numel == 0 && t.nbytes == 0 && t.shape[0] == 0 &&
          t.shape[1] == 7, "empty back");
    CHECK(ffn_st_find(f, "ünïcode \"quoted\"\n", &t) == FFN_OK, "escaped name back");
    CHECK(ffn_st_has(f, "w32") && !ffn_st_has(f, "nope"), "has");

    float out[R * C];
    CHECK(ffn_st_read_f32(f, "w32", 2, (int64_t[]){R, C}, out) == FFN_OK && !memcmp(out, w32, sizeof w32), "f32 read");
    const float *view = NULL;
    CHECK(ffn_st_view_f32(f, "w32", 2, (int64_t[]){R, C}, &view) == FFN_OK && view &&
          !memcmp(view, w32, sizeof w32), "zero-copy view");
    float *loaded = NULL;
    CHECK(ffn_st_load_f32(f, "w64", 2, (int64_t[]){2, 2}, &loaded) == FFN_OK && loaded && loaded[0] == 1.5f &&
          loaded[1] == -2.25f && isinf(loaded[2]) && loaded[3] == 0.1f, "f64 load converts");
    free(loaded);
    float f4[4];
    CHECK(ffn_st_read_f32(f, "f16", 1, (int64_t[]){4}, f4) == FFN_OK && f4[0] == 1 && f4[1] == -2 &&
          f4[2] == ldexpf(1, -24) && f4[3] == 65504, "f16 read");
    CHECK(ffn_st_read_f32(f, "bf16", 2, (int64_t[]){2, 2}, f4) == FFN_OK && f4[0] == 1 && f4[1] == -3 &&
          f4[2] == ldexpf(1, -133) && f4[3] == 3.140625f, "bf16 read");
    CHECK(ffn_st_read_f32(f, "as_bf16", 2, (int64_t[]){R, C}, out) == FFN_OK, "as_bf16 read");
    int ok = 1;
    for (int i = 0; i < R * C; i++) ok &= out[i] == ffn_bf16_to_f32(ffn_f32_to_bf16(w32[i]));
    CHECK(ok, "add_f32 -> bf16 rounds each value");
    CHECK(ffn_st_read_f32(f, "as_f16", 2, (int64_t[]){R, C}, out) == FFN_OK, "as_f16 read");
    ok = 1;
    for (int i = 0; i < R * C; i++) ok &= out[i] == ffn_f16_to_f32(ffn_f32_to_f16(w32[i])) && fabsf(out[i] - w32[i]) < 2e-3f;
    CHECK(ok, "add_f32 -> f16 rounds each value");
    CHECK(ffn_st_read_f32(f, "w32", 0, NULL, out) == FFN_OK, "no shape check with NULL");
    CHECK(ffn_st_read_f32(f, "i32", 1, (int64_t[]){2}, out) == FFN_ERR_FORMAT &&
          strstr(ffn_last_error(), "i32: expected a floating-point dtype (F32, F16, BF16 or F64), found I32"),
          "ints are not read as f32: %s", ffn_last_error());
    CHECK(ffn_st_view_f32(f, "f16", 1, (int64_t[]){4}, &view) == FFN_ERR_UNSUPPORTED, "view needs F32");

    /* metadata */
    CHECK(ffn_st_metadata(f, "format") && !strcmp(ffn_st_metadata(f, "format"), "pt"), "metadata format");
    CHECK(ffn_st_metadata(f, "note") && !strcmp(ffn_st_metadata(f, "note"), "a \"b\"\tc"), "metadata replaced value");
    CHECK(ffn_st_metadata(f, "absent") == NULL && ffn_st_metadata_count(f) == 2, "metadata count");
    const char *k = NULL, *v = NULL;
    CHECK(ffn_st_metadata_at(f, 0, &k, &v) == FFN_OK && !strcmp(k, "format") && !strcmp(v, "pt"), "metadata_at");
    CHECK(ffn_st_metadata_at(f, 2, &k, &v) == FFN_ERR_INVALID_ARG, "metadata_at range");
    ffn_st_close(f);
    ffn_st_close(NULL);

    /* the header is padded to 8 bytes with spaces */
    FILE *fp = fopen(path, "rb");
    uint64_t hl = 0;
    CHECK(fp && fread(&hl, 8, 1, fp) == 1 && hl % 8 == 0, "header length %llu multiple of 8", (unsigned long long)hl);
    if (fp) fclose(fp);
}

/* The reader's validation: one bad file per check, each with its message. */
static void test_bad_files(void) {
    snprintf(path, sizeof path, "%s/bad.safetensors", dir);

    write_raw(path, 0, "", 0, NULL, 0);
    FILE *fp = fopen(path, "wb");
    fwrite("abc", 1, 3, fp);
    fclose(fp);
    expect_open_fail(FFN_ERR_FORMAT, "file too short: expected at least 8 bytes (the header length), found 3",
                     "short file");
    fp = fopen(path, "wb");
    fclose(fp);
    expect_open_fail(FFN_ERR_FORMAT, "found 0", "empty file");

    write_raw(path, 0, "", 0, NULL, 16);
    expect_open_fail(FFN_ERR_FORMAT, "header length is 0", "header length 0");

    write_raw(path, (uint64_t)1 << 40, "{}", 2, NULL, 0);
    expect_open_fail(FFN_ERR_FORMAT, "header length 1099511627776 is absurd (expected at most 104857600", "absurd length");

    write_raw(path, 100, "{}", 2, NULL, 0);
    expect_open_fail(FFN_ERR_FORMAT, "header length 100 exceeds the file (expected at most 2 bytes", "length > file");

    write_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]", 4);
    expect_open_fail(FFN_ERR_FORMAT, "JSON header: byte 59: expected ',' or '}' in object, found end of input",
                     "invalid JSON (unterminated: the data is not parsed as header)");

    write_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4],}}", 4);
    expect_open_fail(FFN_ERR_FORMAT, "JSON header: byte 60: expected a string key, found '}'", "invalid JSON");

    write_header("[1, 2]", 0);
    expect_open_fail(FFN_ERR_FORMAT, "JSON header: expected an object, found an array", "not an object");

    write_header("{\"a\": [0, 4]}", 4);
    expect_open_fail(FFN_ERR_FORMAT, "a: expected an object with dtype, shape and data_offsets, found an array",
                     "entry not an object");

    write_header("{\"a\": {\"dtype\": \"F8_E4M3\", \"shape\": [1], \"data_offsets\": [0, 1]}}", 1);
    expect_open_fail(FFN_ERR_FORMAT, "a: unknown dtype 'F8_E4M3' (expected one of F64, F32", "unknown dtype");

    write_header("{\"a\": {\"dtype\": 4, \"shape\": [1], \"data_offsets\": [0, 4]}}", 4);
    expect_open_fail(FFN_ERR_FORMAT, "a: dtype: expected a string, found a number", "dtype not a string");

    write_header("{\"a\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 4);
    expect_open_fail(FFN_ERR_FORMAT, "a: missing \"dtype\"", "missing dtype");

    write_header("{\"a\": {\"dtype\": \"F32\", \"data_offsets\": [0, 4]}}", 4);
    expect_open_fail(FFN_ERR_FORMAT, "a: missing \"shape\"", "missing shape");

    write_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [2, 3]}}", 24);
    expect_open_fail(FFN_ERR_FORMAT, "a: missing \"data_offsets\"", "missing data_offsets");

    write_header("{\"w\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 20]}}", 20);
    expect_open_fail(FFN_ERR_FORMAT,
                     "w: shape [2, 3] x F32 (4 bytes) = 24 bytes expected, but data_offsets [0, 20] span 20 bytes",
                     "shape x dtype != span");

    write_header("{\"w\": {\"dtype\": \"F32\", \"shape\": [2, -3], \"data_offsets\": [0, 24]}}", 24);
    expect_open_fail(FFN_ERR_FORMAT, "w: shape[1]: expected a dimension >= 0, found -3", "negative dim");

    write_header("{\"w\": {\"dtype\": \"F32\", \"shape\": [2.5], \"data_offsets\": [0, 8]}}", 8);
    expect_open_fail(FFN_ERR_FORMAT, "w: shape[0]: expected an integer, found a non-integer number", "fractional dim");

    write_header("{\"w\": {\"dtype\": \"F32\", \"shape\": \"2\", \"data_offsets\": [0, 8]}}", 8);
    expect_open_fail(FFN_ERR_FORMAT, "w: shape: expected an array of integers, found a string", "shape not an array");

    write_header("{\"w\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,1,1,1,1,1], \"data_offsets\": [0, 4]}}", 4);
    expect_open_fail(FFN_ERR_FORMAT, "w: shape: expected at most 8 dimensions, found 9", "too many dims");

    write_header("{\"w\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296], \"data_offsets\": [0, 0]}}", 0);
    expect_open_fail(FFN_ERR_FORMAT, "w: shape: the number of elements overflows 64 bits", "numel overflow");

    write_header("{\"w\": {\"dtype\": \"F64\", \"shape\": [2305843009213693952], \"data_offsets\": [0, 0]}}", 0);
    expect_open_fail(FFN_ERR_FORMAT, "w: shape [2305843009213693952] x F64 overflows 64 bits", "bytes overflow");

    write_header("{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 4);
    expect_open_fail(FFN_ERR_FORMAT, "w: data_offsets [0, 8] out of range (expected end <= 4, the size of the data buffer)",
                     "offsets out of range (truncated data)");

    write_header("{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 4]}}", 8);
    expect_open_fail(FFN_ERR_FORMAT, "w: data_offsets [8, 4]: expected begin <= end", "begin > end");

    write_header("{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [-4, 0]}}", 8);
    expect_open_fail(FFN_ERR_FORMAT, "w: data_offsets[0]: expected an integer >= 0, found a negative integer",
                     "negative offset");

    write_header("{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0]}}", 4);
    expect_open_fail(FFN_ERR_FORMAT, "w: data_offsets: expected an array [begin, end], found an array of fewer than 2",
                     "one offset");

    write_header("{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4.0]}}", 4);
    expect_open_fail(FFN_ERR_FORMAT, "w: data_offsets[1]: expected an integer >= 0, found a non-integer number",
                     "non-integer offset");

    write_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
                 " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}", 12);
    expect_open_fail(FFN_ERR_FORMAT, "b: data_offsets [4, 12] overlap tensor a (expected begin >= 8)", "overlap");

    write_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
                 " \"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]}}", 12);
    expect_open_fail(FFN_ERR_FORMAT, "b: data_offsets [8, 12] leave a gap of 4 bytes after tensor a (expected begin = 4)",
                     "gap between tensors");

    write_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", 8);
    expect_open_fail(FFN_ERR_FORMAT, "a: data_offsets [4, 8] leave a gap of 4 bytes after the start of the data",
                     "gap at the start");

    write_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 10);
    expect_open_fail(FFN_ERR_FORMAT, "the tensors cover 4 bytes of data but the file holds 10", "trailing bytes");

    write_header("{\"__metadata__\": {\"a\": 1}}", 0);
    expect_open_fail(FFN_ERR_FORMAT, "__metadata__: a: expected a string value, found a number", "metadata not strings");

    write_header("{\"__metadata__\": [\"a\"]}", 0);
    expect_open_fail(FFN_ERR_FORMAT, "__metadata__: expected an object of strings, found an array", "metadata not object");

    write_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
                 " \"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", 8);
    expect_open_fail(FFN_ERR_FORMAT, "duplicate object key \"a\"", "duplicate tensor names");

    /* a hostile header: valid JSON whose parse tree would be ~40x its size */
    {
        size_t n = 1 << 20, len = 0;
        char *h = malloc(2 * n + 16);
        len += (size_t)sprintf(h, "{\"a\":[");
        for (size_t i = 0; i < n; i++) {
            h[len++] = '0';
            h[len++] = ',';
        }
        h[len - 1] = ']';
        h[len++] = '}';
        write_raw(path, len, h, len, NULL, 0);
        free(h);
        expect_open_fail(FFN_ERR_FORMAT, "JSON header: byte ", "tree budget");
        CHECK(strstr(ffn_last_error(), "too many values for a document of this size"), "budget message: %s",
              ffn_last_error());
    }

    /* truncated file: a valid file cut short */
    write_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}}      ", 16);
    CHECK(truncate(path, 8 + 68 + 10) == 0, "truncate");
    expect_open_fail(FFN_ERR_FORMAT, "a: data_offsets [0, 16] out of range (expected end <= 10", "truncated file");
    CHECK(truncate(path, 40) == 0, "truncate into the header");
    expect_open_fail(FFN_ERR_FORMAT, "header length 68 exceeds the file (expected at most 32 bytes", "truncated header");

    /* not a file / missing */
    snprintf(path, sizeof path, "%s/none.safetensors", dir);
    expect_open_fail(FFN_ERR_IO, "cannot open: No such file or directory", "missing file");
    snprintf(path, sizeof path, "%s", dir);
    expect_open_fail(FFN_ERR_IO, "not a regular file", "a directory");

    /* valid edge cases: no tensors at all; header padded with spaces;
     * zero-sized tensors sharing an offset */
    snprintf(path, sizeof path, "%s/edge.safetensors", dir);
    write_header("{}", 0);
    ffn_st_file *f = NULL;
    CHECK(ffn_st_open(path, &f) == FFN_OK && ffn_st_count(f) == 0, "empty file: %s", ffn_last_error());
    ffn_st_close(f);
    write_header("{\"e\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [4, 4]},"
                 " \"z\": {\"dtype\": \"I8\", \"shape\": [0, 3], \"data_offsets\": [4, 4]},"
                 " \"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
                 " \"b\": {\"dtype\": \"F16\", \"shape\": [], \"data_offsets\": [4, 6]}}        ", 6);
    f = NULL;
    CHECK(ffn_st_open(path, &f) == FFN_OK && ffn_st_count(f) == 4, "zero-sized tensors: %s", ffn_last_error());
    ffn_st_tensor t;
    CHECK(f && ffn_st_find(f, "b", &t) == FFN_OK && t.ndim == 0 && t.numel == 1 && t.nbytes == 2, "scalar F16");
    ffn_st_close(f);
}

/* find / read errors on a valid file */
static void test_lookup_errors(void) {
    snprintf(path, sizeof path, "%s/w.safetensors", dir);
    float wu[6] = {1, 2, 3, 4, 5, 6};
    ffn_st_writer *w = NULL;
    ffn_st_writer_create(&w);
    ffn_st_writer_add(w, "up_proj.weight", FFN_DTYPE_F32, 2, (int64_t[]){3, 2}, wu);
    CHECK(ffn_st_writer_save(w, path) == FFN_OK, "save");
    ffn_st_writer_free(w);
    ffn_st_file *f = NULL;
    CHECK(ffn_st_open(path, &f) == FFN_OK, "open");
    if (!f) return;
    ffn_st_tensor t;
    CHECK(ffn_st_find(f, "gate_proj.weight", &t) == FFN_ERR_MISSING && strstr(ffn_last_error(), path) &&
          strstr(ffn_last_error(), "gate_proj.weight: tensor not found"), "missing tensor: %s", ffn_last_error());
    float out[6];
    CHECK(ffn_st_read_f32(f, "down_proj.weight", 2, (int64_t[]){2, 3}, out) == FFN_ERR_MISSING, "read missing");
    CHECK(ffn_st_read_f32(f, "up_proj.weight", 2, (int64_t[]){2, 3}, out) == FFN_ERR_SHAPE &&
          strstr(ffn_last_error(), "w.safetensors: up_proj.weight: expected shape [2, 3], found [3, 2]"),
          "wrong shape: %s", ffn_last_error());
    CHECK(ffn_st_read_f32(f, "up_proj.weight", 1, (int64_t[]){6}, out) == FFN_ERR_SHAPE &&
          strstr(ffn_last_error(), "expected shape [6], found [3, 2]"), "wrong rank: %s", ffn_last_error());
    float *p = (float *)1;
    CHECK(ffn_st_load_f32(f, "up_proj.weight", 2, (int64_t[]){3, 3}, &p) == FFN_ERR_SHAPE && p == NULL, "load shape");
    const float *v = (const float *)1;
    CHECK(ffn_st_view_f32(f, "x", 1, (int64_t[]){1}, &v) == FFN_ERR_MISSING && v == NULL, "view missing");
    ffn_st_close(f);
}

static int count_entries(const char *d) {
    DIR *dp = opendir(d);
    int n = 0;
    if (!dp) return -1;
    struct dirent *e;
    while ((e = readdir(dp)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(dp);
    return n;
}

static void test_atomic_write(void) {
    float x[4] = {1, 2, 3, 4};
    ffn_st_writer *w = NULL;
    ffn_st_writer_create(&w);
    ffn_st_writer_add(w, "x", FFN_DTYPE_F32, 1, (int64_t[]){4}, x);

    /* a directory that does not exist */
    snprintf(path, sizeof path, "%s/no/such/dir/out.safetensors", dir);
    CHECK(ffn_st_writer_save(w, path) == FFN_ERR_IO && strstr(ffn_last_error(), path) &&
          strstr(ffn_last_error(), "cannot create a temporary file"), "missing dir: %s", ffn_last_error());
    CHECK(access(path, F_OK) != 0, "no file left");

    /* an unwritable directory (only meaningful when not root) */
    char ro[600];
    snprintf(ro, sizeof ro, "%s/ro", dir);
    mkdir(ro, 0500);
    snprintf(path, sizeof path, "%s/out.safetensors", ro);
    if (geteuid() != 0) {
        CHECK(ffn_st_writer_save(w, path) == FFN_ERR_IO && strstr(ffn_last_error(), "Permission denied"),
              "unwritable dir: %s", ffn_last_error());
        CHECK(access(path, F_OK) != 0 && count_entries(ro) == 0, "nothing left in the unwritable dir");
    }
    chmod(ro, 0700);
    rmdir(ro);

    /* the rename fails (the target is a non-empty directory): the target is
     * untouched and no temporary file remains */
    char sub[600], inner[1100];
    snprintf(sub, sizeof sub, "%s/atomic", dir);
    mkdir(sub, 0700);
    snprintf(path, sizeof path, "%s/target.safetensors", sub);
    mkdir(path, 0700);
    snprintf(inner, sizeof inner, "%s/keep", path);
    FILE *fp = fopen(inner, "w");
    if (fp) fclose(fp);
    CHECK(ffn_st_writer_save(w, path) == FFN_ERR_IO && strstr(ffn_last_error(), "cannot rename the temporary file"),
          "rename failure: %s", ffn_last_error());
    CHECK(count_entries(sub) == 1 && access(inner, F_OK) == 0, "no temporary file left, target intact");
    unlink(inner);
    rmdir(path);

    /* replacing an existing file: readers of the old file keep their data */
    snprintf(path, sizeof path, "%s/replace.safetensors", sub);
    CHECK(ffn_st_writer_save(w, path) == FFN_OK, "first save");
    ffn_st_file *old = NULL;
    CHECK(ffn_st_open(path, &old) == FFN_OK, "open old");
    x[0] = 42;
    CHECK(ffn_st_writer_save(w, path) == FFN_OK, "second save (add references the data)");
    ffn_st_file *cur = NULL;
    float a[4] = {0}, b[4] = {0};
    CHECK(ffn_st_open(path, &cur) == FFN_OK, "open new");
    CHECK(old && ffn_st_read_f32(old, "x", 1, (int64_t[]){4}, a) == FFN_OK && a[0] == 1, "old mapping intact");
    CHECK(cur && ffn_st_read_f32(cur, "x", 1, (int64_t[]){4}, b) == FFN_OK && b[0] == 42, "new content");
    ffn_st_close(old);
    ffn_st_close(cur);
    struct stat st;
    mode_t mask = umask(0);
    umask(mask);
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == (0666 & ~mask), "mode 0%o follows the umask 0%o",
          (unsigned)(st.st_mode & 0777), (unsigned)mask);
    CHECK(count_entries(sub) == 1, "only the target in the directory");
    unlink(path);
    rmdir(sub);
    ffn_st_writer_free(w);
}

/* A save killed at a random moment leaves either no file or a complete
 * one at the target, never a truncated one (a stray *.tmp.* file may stay
 * behind; it is never at the target's name). */
static void test_killed_save(void) {
    char sub[700];
    snprintf(sub, sizeof sub, "%s/killed", dir);
    mkdir(sub, 0700);
    snprintf(path, sizeof path, "%s/big.safetensors", sub);
    size_t n = (size_t)16 << 20; /* 64 MiB of fp32 */
    float *big = calloc(n, sizeof *big);
    if (!big) return;
    for (size_t i = 0; i < n; i += 4096) big[i] = (float)i;
    int complete = 0, absent = 0, broken = 0;
    for (int round = 0; round < 6; round++) {
        unlink(path);
        pid_t pid = fork();
        if (pid == 0) {
            ffn_st_writer *w = NULL;
            ffn_st_writer_create(&w);
            ffn_st_writer_add(w, "big", FFN_DTYPE_F32, 1, (int64_t[]){(int64_t)n}, big);
            for (;;) ffn_st_writer_save(w, path); /* until killed */
        }
        if (round % 2 == 0) {
            usleep(20000 + 30000 * (useconds_t)round); /* most likely during the first save */
        } else {
            /* after the first save landed: kill during the replacing save */
            for (int waited = 0; waited < 1000 && access(path, F_OK) != 0; waited++) usleep(10000);
            usleep(10000 * (useconds_t)round);
        }
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        ffn_st_file *f = NULL;
        ffn_status st = ffn_st_open(path, &f);
        if (st == FFN_OK) complete++;
        else if (st == FFN_ERR_IO && strstr(ffn_last_error(), "No such file")) absent++;
        else {
            broken++;
            fprintf(stderr, "after kill: %s\n", ffn_last_error());
        }
        ffn_st_close(f);
    }
    free(big);
    printf("killed saves: %d complete, %d absent, %d broken\n", complete, absent, broken);
    CHECK(broken == 0, "%d killed saves left a broken file", broken);
    char cmd[800];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", sub);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", sub);
}

/* The in-memory entry point used by the fuzzer. */
static void test_open_buffer(void) {
    const char header[] = "{\"a\":{\"dtype\":\"I8\",\"shape\":[2],\"data_offsets\":[0,2]}}";
    unsigned char buf[8 + sizeof header - 1 + 2];
    uint64_t n = sizeof header - 1;
    memcpy(buf, &n, 8);
    memcpy(buf + 8, header, n);
    buf[8 + n] = 7;
    buf[9 + n] = 9;
    ffn_st_file *f = NULL;
    CHECK(ffn_st_open_buffer(buf, sizeof buf, "mem", &f) == FFN_OK, "open buffer: %s", ffn_last_error());
    ffn_st_tensor t;
    CHECK(f && ffn_st_find(f, "a", &t) == FFN_OK && ((const int8_t *)t.data)[1] == 9, "buffer data");
    ffn_st_close(f);
    CHECK(ffn_st_open_buffer(buf, sizeof buf - 1, "mem", &f) == FFN_ERR_FORMAT && !strncmp(ffn_last_error(), "mem: ", 5),
          "short buffer named: %s", ffn_last_error());
}

int main(void) {
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_dtypes();
    test_conversions();
    test_narrowing_against_references();
    test_bulk_widening();
    test_round_trip();
    test_bad_files();
    test_lookup_errors();
    test_atomic_write();
    test_killed_save();
    test_open_buffer();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return check_done("test_safetensors");
}
