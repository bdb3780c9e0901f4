/* test_quant.c -- the ggml tensor types (src/kernels/quant.c): the type
 * table, row sizes and their errors, hand-built blocks decoded to known
 * values (ggml's layouts: nibble order, q4_K's packed 6-bit scales, q6_K's
 * split bits), quantize→dequantize error bounds over odd numbers of blocks,
 * special blocks (all zero, one large value, constant, one sign), f16/bf16
 * rounding and NaN, and the errors of bad input. */
#include "check.h"
#include "ffn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double uniform(void) { /* xorshift64*, fixed seed */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}
static float gauss(void) {
    double u = uniform() + 1e-12, v = uniform();
    return (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
}

static void test_table(void) {
    CHECK(ffn_ggml_block_size(FFN_GGML_TYPE_Q8_0) == 32 && ffn_ggml_type_size(FFN_GGML_TYPE_Q8_0) == 34, "q8_0");
    CHECK(ffn_ggml_block_size(FFN_GGML_TYPE_Q4_0) == 32 && ffn_ggml_type_size(FFN_GGML_TYPE_Q4_0) == 18, "q4_0");
    CHECK(ffn_ggml_block_size(FFN_GGML_TYPE_Q4_K) == 256 && ffn_ggml_type_size(FFN_GGML_TYPE_Q4_K) == 144, "q4_K");
    CHECK(ffn_ggml_block_size(FFN_GGML_TYPE_Q6_K) == 256 && ffn_ggml_type_size(FFN_GGML_TYPE_Q6_K) == 210, "q6_K");
    CHECK(ffn_ggml_block_size(FFN_GGML_TYPE_F16) == 1 && ffn_ggml_type_size(FFN_GGML_TYPE_BF16) == 2, "f16/bf16");
    CHECK(ffn_ggml_block_size((ffn_ggml_type)4) == 0 && !strcmp(ffn_ggml_type_name((ffn_ggml_type)4), "?"),
          "4 was removed from ggml");
    CHECK(ffn_ggml_block_size((ffn_ggml_type)FFN_GGML_TYPE_COUNT) == 0, "past the end");
    CHECK(!strcmp(ffn_ggml_type_name(FFN_GGML_TYPE_Q4_K), "q4_K"), "name %s", ffn_ggml_type_name(FFN_GGML_TYPE_Q4_K));
    ffn_ggml_type t;
    CHECK(ffn_ggml_type_parse("Q6_K", &t) && t == FFN_GGML_TYPE_Q6_K, "parse");
    CHECK(!ffn_ggml_type_parse("q7_0", &t), "parse unknown");
    CHECK(ffn_ggml_can_dequantize(FFN_GGML_TYPE_Q6_K) && !ffn_ggml_can_dequantize(FFN_GGML_TYPE_IQ2_XXS), "decode set");
    CHECK(ffn_ggml_can_quantize(FFN_GGML_TYPE_Q4_K) && !ffn_ggml_can_quantize(FFN_GGML_TYPE_F64), "encode set");
}

static void test_row_size(void) {
    size_t b = 0;
    CHECK(ffn_ggml_row_size(FFN_GGML_TYPE_Q8_0, 96, &b) == FFN_OK && b == 3 * 34, "q8_0 3 blocks: %zu", b);
    CHECK(ffn_ggml_row_size(FFN_GGML_TYPE_Q4_K, 768, &b) == FFN_OK && b == 3 * 144, "q4_K 3 blocks: %zu", b);
    CHECK(ffn_ggml_row_size(FFN_GGML_TYPE_Q6_K, 0, &b) == FFN_OK && b == 0, "empty row");
    CHECK(ffn_ggml_row_size(FFN_GGML_TYPE_F16, 7, &b) == FFN_OK && b == 14, "f16");
    CHECK(ffn_ggml_row_size(FFN_GGML_TYPE_Q8_0, 33, &b) == FFN_ERR_INVALID_ARG, "33 not a multiple of 32");
    CHECK(strstr(ffn_last_error(), "q8_0") && strstr(ffn_last_error(), "33") &&
              strstr(ffn_last_error(), "multiple of the block size 32"), "message: %s", ffn_last_error());
    CHECK(ffn_ggml_row_size(FFN_GGML_TYPE_Q4_K, 255, &b) == FFN_ERR_INVALID_ARG, "255 for q4_K");
    CHECK(strstr(ffn_last_error(), "256"), "message: %s", ffn_last_error());
    CHECK(ffn_ggml_row_size(FFN_GGML_TYPE_Q4_0, -32, &b) == FFN_ERR_INVALID_ARG, "negative");
    CHECK(ffn_ggml_row_size((ffn_ggml_type)5, 32, &b) == FFN_ERR_UNSUPPORTED, "unknown type");
    float x[32] = {0};
    uint8_t q[64];
    CHECK(ffn_ggml_quantize_row(FFN_GGML_TYPE_Q4_0, x, q, 31) == FFN_ERR_INVALID_ARG, "quantize 31");
    CHECK(ffn_ggml_dequantize_row(FFN_GGML_TYPE_Q6_K, q, x, 32) == FFN_ERR_INVALID_ARG, "dequantize 32 of q6_K");
    CHECK(ffn_ggml_dequantize_row(FFN_GGML_TYPE_IQ2_XXS, q, x, 256) == FFN_ERR_UNSUPPORTED, "iq2_xxs decode");
    CHECK(strstr(ffn_last_error(), "iq2_xxs"), "message: %s", ffn_last_error());
    CHECK(ffn_ggml_quantize_row(FFN_GGML_TYPE_F64, x, q, 4) == FFN_ERR_UNSUPPORTED, "f64 encode");
    x[5] = NAN;
    CHECK(ffn_ggml_quantize_row(FFN_GGML_TYPE_Q8_0, x, q, 32) == FFN_ERR_INVALID_ARG, "NaN into q8_0");
    CHECK(strstr(ffn_last_error(), "element 5") && strstr(ffn_last_error(), "finite"), "message: %s",
          ffn_last_error());
    x[5] = INFINITY;
    CHECK(ffn_ggml_quantize_row(FFN_GGML_TYPE_Q4_K, (float[256]){[7] = INFINITY}, q, 256) == FFN_ERR_INVALID_ARG,
          "inf into q4_K");
}

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

static void test_known_blocks(void) {
    float y[256];
    /* q8_0: d = 0.5 (0x3800), q = j - 16 */
    uint8_t b8[34];
    put16(b8, 0x3800);
    for (int j = 0; j < 32; j++) b8[2 + j] = (uint8_t)(int8_t)(j - 16);
    CHECK(ffn_ggml_dequantize_row(FFN_GGML_TYPE_Q8_0, b8, y, 32) == FFN_OK, "q8_0");
    int bad = 0;
    for (int j = 0; j < 32; j++) bad += y[j] != 0.5f * (float)(j - 16);
    CHECK(bad == 0, "q8_0 values (%d wrong)", bad);
    /* q4_0: d = 2 (0x4000); low nibble of byte j = element j, high = element j+16 */
    uint8_t b4[18];
    put16(b4, 0x4000);
    for (int j = 0; j < 16; j++) b4[2 + j] = (uint8_t)(j | ((15 - j) << 4));
    CHECK(ffn_ggml_dequantize_row(FFN_GGML_TYPE_Q4_0, b4, y, 32) == FFN_OK, "q4_0");
    bad = 0;
    for (int j = 0; j < 16; j++) bad += y[j] != 2.0f * (j - 8) || y[j + 16] != 2.0f * (7 - j);
    CHECK(bad == 0, "q4_0 nibble order (%d wrong)", bad);
    /* q4_K: d = 1, dmin = 0.5; sub-block s has scale s+1 and min 2s (6-bit packing), q = l % 16 */
    uint8_t bk[144] = {0};
    put16(bk, 0x3C00);
    put16(bk + 2, 0x3800);
    uint8_t sc[8], mn[8];
    for (int s = 0; s < 8; s++) sc[s] = (uint8_t)(s + 1 + (s >= 4 ? 40 : 0)), mn[s] = (uint8_t)(2 * s + (s >= 4 ? 33 : 0));
    for (int j = 0; j < 4; j++) {
        bk[4 + j] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
        bk[8 + j] = (uint8_t)(mn[j] | ((mn[j + 4] >> 4) << 6));
        bk[12 + j] = (uint8_t)((sc[j + 4] & 0xF) | ((mn[j + 4] & 0xF) << 4));
    }
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) bk[16 + 32 * c + l] = (uint8_t)((l % 16) | (((l + 3) % 16) << 4));
    CHECK(ffn_ggml_dequantize_row(FFN_GGML_TYPE_Q4_K, bk, y, 256) == FFN_OK, "q4_K");
    bad = 0;
    for (int e = 0; e < 256; e++) {
        int s = e / 32, l = e % 32, q = (s % 2 == 0) ? l % 16 : (l + 3) % 16;
        float want = (1.0f * sc[s]) * (float)q - 0.5f * mn[s];
        if (y[e] != want) bad++;
    }
    CHECK(bad == 0, "q4_K decoded values (%d wrong)", bad);
    /* q6_K: d = 0.25, scale of sub-block s = s - 8; q of element e = e % 64 (split 4 + 2 bits) */
    uint8_t b6[210] = {0};
    put16(b6 + 208, 0x3400);
    for (int s = 0; s < 16; s++) b6[192 + s] = (uint8_t)(int8_t)(s - 8);
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            int L[4];
            for (int k = 0; k < 4; k++) L[k] = (128 * h + 32 * k + l) % 64;
            b6[64 * h + l] = (uint8_t)((L[0] & 0xF) | ((L[2] & 0xF) << 4));
            b6[64 * h + l + 32] = (uint8_t)((L[1] & 0xF) | ((L[3] & 0xF) << 4));
            b6[128 + 32 * h + l] = (uint8_t)((L[0] >> 4) | ((L[1] >> 4) << 2) | ((L[2] >> 4) << 4) | ((L[3] >> 4) << 6));
        }
    CHECK(ffn_ggml_dequantize_row(FFN_GGML_TYPE_Q6_K, b6, y, 256) == FFN_OK, "q6_K");
    bad = 0;
    for (int e = 0; e < 256; e++)
        if (y[e] != 0.25f * (float)(e / 16 - 8) * (float)(e % 64 - 32)) bad++;
    CHECK(bad == 0, "q6_K decoded values (%d wrong)", bad);
}

/* Quantize n values of x, decode, return the max abs and the RMS error. */
static void roundtrip(ffn_ggml_type t, const float *x, int64_t n, float *y, double *max_err, double *rms) {
    size_t bytes = 0;
    CHECK(ffn_ggml_row_size(t, n, &bytes) == FFN_OK, "row size");
    uint8_t *q = malloc(bytes + 1);
    q[bytes] = 0xA5; /* a canary: the encoder writes exactly row_size bytes */
    CHECK(ffn_ggml_quantize_row(t, x, q + 0, n) == FFN_OK, "%s quantize: %s", ffn_ggml_type_name(t), ffn_last_error());
    CHECK(q[bytes] == 0xA5, "%s wrote past its row", ffn_ggml_type_name(t));
    CHECK(ffn_ggml_dequantize_row(t, q, y, n) == FFN_OK, "%s dequantize", ffn_ggml_type_name(t));
    double m = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)x[i] - y[i]);
        m = e > m ? e : m;
        s += e * e;
    }
    *max_err = m;
    *rms = sqrt(s / (double)n);
    free(q);
}

static void test_bounds(void) {
    enum { N = 5 * 256 + 0 };
    static float x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = gauss() * (i % 97 == 0 ? 4.0f : 1.0f);
    double m, r;
    /* q8_0 over 39 blocks (odd): |err| <= d/2 plus the fp16 rounding of d over |q| <= 127 */
    roundtrip(FFN_GGML_TYPE_Q8_0, x, 39 * 32, y, &m, &r);
    int bad = 0;
    for (int b = 0; b < 39; b++) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[32 * b + j]));
        double d = amax / 127.0, bound = 0.5 * d * (1 + 1e-3) + amax * 0x1p-11 + 1e-12;
        for (int j = 0; j < 32; j++) bad += fabs(x[32 * b + j] - y[32 * b + j]) > bound;
    }
    CHECK(bad == 0, "q8_0: %d elements over d/2 (+fp16 of d)", bad);
    printf("q8_0: max err %.3g, rms %.3g (data rms 1)\n", m, r);
    /* q4_0: |err| <= d (the far end clamps from 8 to 7 steps) plus fp16 of d over |q| <= 8 */
    roundtrip(FFN_GGML_TYPE_Q4_0, x, 37 * 32, y, &m, &r);
    bad = 0;
    for (int b = 0; b < 37; b++) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[32 * b + j]));
        double d = amax / 8.0, bound = d * (1 + 1e-3) + amax * 0x1p-10 + 1e-12;
        for (int j = 0; j < 32; j++) bad += fabs(x[32 * b + j] - y[32 * b + j]) > bound;
    }
    CHECK(bad == 0, "q4_0: %d elements over d", bad);
    printf("q4_0: max err %.3g, rms %.3g\n", m, r);
    /* q4_K over 5 super-blocks: per sub-block of 32, the error is at most one
     * step of its range/15 grid after the 6-bit scale rounding; RMS well under */
    roundtrip(FFN_GGML_TYPE_Q4_K, x, 5 * 256, y, &m, &r);
    bad = 0;
    for (int s = 0; s < 5 * 8; s++) {
        float lo = 0, hi = x[32 * s];
        for (int j = 0; j < 32; j++) lo = fminf(lo, x[32 * s + j]), hi = fmaxf(hi, x[32 * s + j]);
        double bound = (hi - lo) / 15.0 * 1.5 + 1e-6;
        for (int j = 0; j < 32; j++) bad += fabs(x[32 * s + j] - y[32 * s + j]) > bound;
    }
    CHECK(bad == 0, "q4_K: %d elements over 1.5 steps of their sub-block", bad);
    CHECK(r < 0.10, "q4_K rms %.4f (expected < 0.10 for unit normal data)", r);
    printf("q4_K: max err %.3g, rms %.3g\n", m, r);
    roundtrip(FFN_GGML_TYPE_Q6_K, x, 5 * 256, y, &m, &r);
    bad = 0;
    for (int s = 0; s < 5 * 16; s++) {
        float amax = 0;
        for (int j = 0; j < 16; j++) amax = fmaxf(amax, fabsf(x[16 * s + j]));
        double bound = amax / 32.0 * 1.5 + 1e-6;
        for (int j = 0; j < 16; j++) bad += fabs(x[16 * s + j] - y[16 * s + j]) > bound;
    }
    CHECK(bad == 0, "q6_K: %d elements over 1.5 steps of their sub-block", bad);
    CHECK(r < 0.025, "q6_K rms %.4f (expected < 0.025)", r);
    printf("q6_K: max err %.3g, rms %.3g\n", m, r);
}

static void test_special_blocks(void) {
    const ffn_ggml_type types[] = {FFN_GGML_TYPE_Q8_0, FFN_GGML_TYPE_Q4_0, FFN_GGML_TYPE_Q4_K, FFN_GGML_TYPE_Q6_K};
    static float x[256], y[256];
    double m, r;
    for (int k = 0; k < 4; k++) {
        ffn_ggml_type t = types[k];
        const char *name = ffn_ggml_type_name(t);
        memset(x, 0, sizeof x);
        roundtrip(t, x, 256, y, &m, &r);
        /* q4_0's scale is max / -8 = -0 here, as in ggml, so it decodes to -0 */
        int bits = 0;
        for (int i = 0; i < 256; i++) bits += y[i] != 0.0f || (t != FFN_GGML_TYPE_Q4_0 && signbit(y[i]));
        CHECK(bits == 0, "%s: all-zero input decodes to 0 (%d not)", name, bits);
        x[77] = -1000.0f; /* one large value */
        roundtrip(t, x, 256, y, &m, &r);
        CHECK(fabsf(y[77] + 1000.0f) <= 1000.0f * 0.01f, "%s: the large value: %g", name, y[77]);
        /* q4_K's zeros next to it sit on its sub-block's grid (top of 15 steps
         * below an offset of 1000), so they are 0 up to the scales' rounding */
        bits = 0;
        for (int i = 0; i < 256; i++) {
            int same = t == FFN_GGML_TYPE_Q4_K && i / 32 == 77 / 32;
            bits += i != 77 && (same ? fabsf(y[i]) > 1000.0f * 0.01f : y[i] != 0.0f);
        }
        CHECK(bits == 0, "%s: zeros around the large value stay 0 (%d not)", name, bits);
        for (int i = 0; i < 256; i++) x[i] = 3.0f; /* constant */
        roundtrip(t, x, 256, y, &m, &r);
        CHECK(m <= 3.0f * 0.01f, "%s: constant 3: max err %g", name, m);
        for (int i = 0; i < 256; i++) x[i] = -0.5f - (float)i / 512.0f; /* all negative */
        roundtrip(t, x, 256, y, &m, &r);
        CHECK(m <= 0.1, "%s: negative ramp: max err %g", name, m);
    }
}

static void test_half(void) {
    const float vals[] = {0.0f, -0.0f, 1.0f, 65504.0f, 65520.0f, 1e-8f, 3.14159f, -2.5e-5f, INFINITY, -INFINITY};
    float y[10];
    uint16_t h[10];
    CHECK(ffn_ggml_quantize_row(FFN_GGML_TYPE_F16, vals, h, 10) == FFN_OK, "f16 encode");
    CHECK(ffn_ggml_dequantize_row(FFN_GGML_TYPE_F16, h, y, 10) == FFN_OK, "f16 decode");
    int bad = 0;
    for (int i = 0; i < 10; i++) bad += h[i] != ffn_f32_to_f16(vals[i]);
    CHECK(bad == 0, "f16 bits equal ffn_f32_to_f16 (RNE)");
    CHECK(h[4] == 0x7C00 && y[3] == 65504.0f && isinf(y[8]) && y[9] < 0, "f16 overflow and infinities");
    CHECK(h[2] == 0x3C00, "1.0 = 0x3C00");
    float nan_in[2] = {NAN, -NAN};
    CHECK(ffn_ggml_quantize_row(FFN_GGML_TYPE_BF16, nan_in, h, 2) == FFN_OK, "bf16 NaN");
    CHECK(ffn_ggml_dequantize_row(FFN_GGML_TYPE_BF16, h, y, 2) == FFN_OK && isnan(y[0]) && isnan(y[1]),
          "bf16 NaN stays NaN");
    CHECK(ffn_ggml_quantize_row(FFN_GGML_TYPE_F16, nan_in, h, 2) == FFN_OK && (h[0] & 0x7C00) == 0x7C00 &&
              (h[0] & 0x3FF) != 0, "f16 NaN stays NaN");
    /* bf16 ties to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 -> 1 (even) */
    float tie[2] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f};
    CHECK(ffn_ggml_quantize_row(FFN_GGML_TYPE_BF16, tie, h, 2) == FFN_OK && h[0] == 0x3F80 && h[1] == 0x3F82,
          "bf16 ties to even: %04x %04x", h[0], h[1]);
}

int main(void) {
    test_table();
    test_row_size();
    test_known_blocks();
    test_bounds();
    test_special_blocks();
    test_half();
    return check_done("test_quant");
}
