/* test_bf16.c -- the bf16 precision's kernels and layer (src/kernels/bf16.c,
 * the bf16 kind of src/nn/ffn_prod.c) against oracles written here:
 *   - ffn_bf16_convert (AVX512_BF16 path) equals ffn_f32_to_bf16 bit for
 *     bit on normal values, ties, infinities and NaN (quieted), and rounds a
 *     subnormal to itself or to a zero of the same sign (vcvtneps2bf16
 *     flushes them), over row strides and lengths 0..70;
 *   - ffn_bf16_gemm_run, every (transa, transb, accumulate) on odd shapes,
 *     against a double-precision product of the same bf16 values:
 *     |err| <= 1e-5 · Σ|a·b| (fp32 accumulation of exact bf16 products);
 *   - the layer at FFN_PRECISION_BF16 for N = 1..70 (gated and dense, odd
 *     D and F): forward and backward against the double-precision layer on
 *     bf16-rounded product inputs (8e-3 of each tensor's max: an fp32 value
 *     near a bf16 rounding boundary may round the other way than the
 *     double one), bitwise equal when run twice, and with the workspace
 *     ffn_layer_workspace_size promised;
 *   - refusal: ffn_precision_parse("fp16"), and an out-of-range enum.
 * Where the CPU (or FFN_SIMD) has no AVX512_BF16, which CPUID read here
 * decides: ffn_precision_supported says so, and the products and the layer
 * are refused (FFN_ERR_UNSUPPORTED, a message naming AVX512_BF16 and bf16,
 * nothing made) instead; the output's "note:" line says which was tested. */
#include "check.h"
#include "kernels/bf16.h"
#include "kernels/kernels.h"
#include "ffn/safetensors.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double urand(void) { /* [0, 1) */
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) * (1.0 / 9007199254740992.0);
}
static float srand1(void) { return (float)(2.0 * urand() - 1.0); }
static float b(float x) { return ffn_bf16_to_f32(ffn_f32_to_bf16(x)); }
static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void test_convert(void) {
    enum { COLS = 70, ROWS = 3, LDS = 75, LDD = 73 };
    float src[ROWS * LDS];
    uint16_t dst[ROWS * LDD];
    for (int len = 0; len <= COLS; len++) {
        for (int i = 0; i < ROWS * LDS; i++) {
            switch (i % 9) {
            case 0: src[i] = from_bits(0x3F808000u + (uint32_t)(i & 1) * 0x10000u); break; /* ties */
            case 1: src[i] = INFINITY * (i & 2 ? -1.0f : 1.0f); break;
            case 2: src[i] = NAN; break;
            case 3: src[i] = from_bits(0x00012345u | (i & 4 ? 0x80000000u : 0)); break; /* subnormal */
            case 4: src[i] = 3.0e38f; break; /* rounds to infinity */
            default: src[i] = srand1() * powf(10.0f, (float)(i % 7) - 3.0f);
            }
        }
        memset(dst, 0xAB, sizeof dst);
        ffn_bf16_convert(dst, LDD, src, LDS, ROWS, len);
        int bad = 0;
        for (int r = 0; r < ROWS; r++)
            for (int c = 0; c < LDD; c++) {
                uint16_t got = dst[r * LDD + c];
                if (c >= len) {
                    bad += got != 0xABAB; /* past the row: untouched */
                    continue;
                }
                float x = src[r * LDS + c];
                uint16_t want = ffn_f32_to_bf16(x);
                if (isnan(x)) bad += (got & 0x7F80) != 0x7F80 || !(got & 0x7F);
                else if (fpclassify(x) == FP_SUBNORMAL)
                    bad += got != want && got != (uint16_t)((bits(x) >> 16) & 0x8000);
                else bad += got != want;
            }
        CHECK(bad == 0, "convert, %d columns: %d values differ from ffn_f32_to_bf16", len, bad);
    }
}

/* C (M, N) [+]= op(A)·op(B) in double over the bf16 values */
static void gemm_oracle(int ta, int tb, int M, int N, int K, const uint16_t *A, int lda,
                        const uint16_t *B, int ldb, double *C, double *mag) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0, m = 0;
            for (int k = 0; k < K; k++) {
                double a = ffn_bf16_to_f32(ta ? A[k * lda + i] : A[i * lda + k]);
                double v = ffn_bf16_to_f32(tb ? B[j * ldb + k] : B[k * ldb + j]);
                s += a * v, m += fabs(a * v);
            }
            C[i * N + j] = s, mag[i * N + j] = m;
        }
}

static void test_gemm(const ffn_ctx *ctx) {
    ffn_bf16_gemm *g = NULL;
    CHECK(ffn_bf16_gemm_create(&g) == FFN_OK, "create: %s", ffn_last_error());
    if (!g) return;
    const int shapes[][3] = {{1, 1, 1}, {7, 13, 5}, {37, 70, 129}, {64, 33, 300}, {3, 257, 64}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int acc = 0; acc < 2; acc++) {
                    const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                    const int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
                    const int arows = ta ? K : M, brows = tb ? N : K;
                    uint16_t *A = calloc((size_t)arows * lda, 2), *B = calloc((size_t)brows * ldb, 2);
                    float *C = malloc((size_t)M * ldc * 4), *C0 = malloc((size_t)M * ldc * 4);
                    double *R = malloc((size_t)M * N * 8), *mag = malloc((size_t)M * N * 8);
                    for (int i = 0; i < arows * lda; i++) A[i] = ffn_f32_to_bf16(srand1());
                    for (int i = 0; i < brows * ldb; i++) B[i] = ffn_f32_to_bf16(srand1());
                    for (int i = 0; i < M * ldc; i++) C[i] = C0[i] = srand1();
                    ffn_status st = ffn_bf16_gemm_run(g, ctx, ta, tb, M, N, K, A, lda, B, ldb, acc,
                                                      C, ldc);
                    CHECK(st == FFN_OK, "gemm %dx%dx%d: %s", M, N, K, ffn_last_error());
                    gemm_oracle(ta, tb, M, N, K, A, lda, B, ldb, R, mag);
                    double worst = 0;
                    int pad_ok = 1;
                    for (int i = 0; i < M; i++) {
                        for (int j = 0; j < N; j++) {
                            double want = R[i * N + j] + (acc ? C0[i * ldc + j] : 0.0);
                            double e = fabs(C[i * ldc + j] - want) /
                                       (mag[i * N + j] + (acc ? fabs(C0[i * ldc + j]) : 0) + 1e-30);
                            if (e > worst) worst = e;
                        }
                        for (int j = N; j < ldc; j++) pad_ok &= C[i * ldc + j] == C0[i * ldc + j];
                    }
                    CHECK(worst <= 1e-5 && pad_ok,
                          "gemm M=%d N=%d K=%d ta=%d tb=%d acc=%d: rel error %.3g (tol 1e-5), "
                          "padding %s", M, N, K, ta, tb, acc, worst, pad_ok ? "kept" : "written");
                    free(A), free(B), free(C), free(C0), free(R), free(mag);
                }
    ffn_bf16_gemm_free(g);
}

/* ---- the layer ------------------------------------------------------------ */

typedef struct lay {
    int64_t D, F;
    int gated;
    ffn_act act;
    float *wg, *wu, *wd; /* (F, D) (F, D) (D, F) */
} lay;

static double act_d(ffn_act a, double x) { return ffn_act_forward(a, (float)x); }
static double actg_d(ffn_act a, double x) { return ffn_act_grad(a, (float)x); }

/* double-precision reference on bf16-rounded product inputs; outputs y, dx,
 * dWg, dWu, dWd */
static void layer_oracle(const lay *L, int64_t n, const float *x, const float *dy, double *y,
                         double *dx, double *dwg, double *dwu, double *dwd) {
    const int64_t D = L->D, F = L->F;
    double *g = calloc((size_t)(n * F), 8), *u = calloc((size_t)(n * F), 8);
    double *h = calloc((size_t)(n * F), 8), *dh = calloc((size_t)(n * F), 8);
    double *dg = calloc((size_t)(n * F), 8), *du = calloc((size_t)(n * F), 8);
    for (int64_t t = 0; t < n; t++)
        for (int64_t f = 0; f < F; f++) {
            double sg = 0, su = 0;
            for (int64_t k = 0; k < D; k++) {
                double xv = b(x[t * D + k]);
                if (L->gated) sg += xv * b(L->wg[f * D + k]);
                su += xv * b(L->wu[f * D + k]);
            }
            g[t * F + f] = sg, u[t * F + f] = su;
            h[t * F + f] = L->gated ? act_d(L->act, (float)sg) * (float)su : act_d(L->act, (float)su);
        }
    for (int64_t t = 0; t < n; t++)
        for (int64_t d = 0; d < D; d++) {
            double s = 0;
            for (int64_t f = 0; f < F; f++) s += b((float)h[t * F + f]) * b(L->wd[d * F + f]);
            y[t * D + d] = s;
        }
    memset(dwd, 0, (size_t)(D * F) * 8);
    for (int64_t t = 0; t < n; t++)
        for (int64_t d = 0; d < D; d++)
            for (int64_t f = 0; f < F; f++)
                dwd[d * F + f] += (double)b(dy[t * D + d]) * b((float)h[t * F + f]);
    for (int64_t t = 0; t < n; t++)
        for (int64_t f = 0; f < F; f++) {
            double s = 0;
            for (int64_t d = 0; d < D; d++) s += (double)b(dy[t * D + d]) * b(L->wd[d * F + f]);
            dh[t * F + f] = s;
            double gv = (float)g[t * F + f], uv = (float)u[t * F + f];
            if (L->gated) {
                dg[t * F + f] = s * uv * actg_d(L->act, gv);
                du[t * F + f] = s * act_d(L->act, gv);
            } else {
                du[t * F + f] = s * actg_d(L->act, uv);
            }
        }
    memset(dwg, 0, (size_t)(F * D) * 8), memset(dwu, 0, (size_t)(F * D) * 8);
    for (int64_t t = 0; t < n; t++)
        for (int64_t k = 0; k < D; k++) {
            double s = 0, xv = b(x[t * D + k]);
            for (int64_t f = 0; f < F; f++) {
                double dgr = b((float)dg[t * F + f]), dur = b((float)du[t * F + f]);
                if (L->gated) s += dgr * b(L->wg[f * D + k]), dwg[f * D + k] += dgr * xv;
                s += dur * b(L->wu[f * D + k]);
                dwu[f * D + k] += dur * xv;
            }
            dx[t * D + k] = s;
        }
    free(g), free(u), free(h), free(dh), free(dg), free(du);
}

static double rel_err(const float *got, const double *ref, int64_t len) {
    double e = 0, m = 0;
    for (int64_t i = 0; i < len; i++) {
        double d = fabs(got[i] - ref[i]);
        if (d > e) e = d;
        if (fabs(ref[i]) > m) m = fabs(ref[i]);
    }
    return m > 0 ? e / m : e;
}

static void test_layer(ffn_ctx *ctx, int64_t D, int64_t F, int gated, ffn_act act) {
    lay L = {D, F, gated, act, NULL, NULL, NULL};
    ffn_layer_config cfg = {.hidden_size = D, .intermediate_size = F, .act = act,
                            .type = gated ? FFN_MLP_GATED : FFN_MLP_DENSE,
                            .precision = FFN_PRECISION_BF16};
    ffn_layer *l = NULL;
    CHECK(ffn_layer_create(ctx, &cfg, &l) == FFN_OK, "create: %s", ffn_last_error());
    if (!l) return;
    const int64_t NMAX = 70, DF = D * F;
    float *w = malloc((size_t)(3 * DF) * 4), *gw = malloc((size_t)(3 * DF) * 4);
    float *gw2 = malloc((size_t)(3 * DF) * 4);
    for (int64_t i = 0; i < 3 * DF; i++) w[i] = srand1() / sqrtf((float)D);
    L.wg = w, L.wu = w + DF, L.wd = w + 2 * DF;
    ffn_layer_params p = {gated ? L.wg : NULL, NULL, L.wu, NULL, L.wd, NULL};
    CHECK(ffn_layer_set_weights(l, &p) == FFN_OK, "set_weights: %s", ffn_last_error());
    float *x = malloc((size_t)(NMAX * D) * 4), *dy = malloc((size_t)(NMAX * D) * 4);
    float *y = malloc((size_t)(NMAX * D) * 4), *dx = malloc((size_t)(NMAX * D) * 4);
    float *y2 = malloc((size_t)(NMAX * D) * 4), *dx2 = malloc((size_t)(NMAX * D) * 4);
    double *ry = malloc((size_t)(NMAX * D) * 8), *rdx = malloc((size_t)(NMAX * D) * 8);
    double *rg = malloc((size_t)DF * 8), *ru = malloc((size_t)DF * 8), *rd = malloc((size_t)DF * 8);
    for (int64_t i = 0; i < NMAX * D; i++) x[i] = srand1(), dy[i] = srand1();
    size_t ws_bytes = ffn_layer_workspace_size(l, NMAX), sv = ffn_layer_saved_size(l, NMAX);
    void *ws = malloc(ws_bytes);
    float *saved = malloc(sv);
    double worst = 0;
    int64_t worst_n = 0, mismatch = 0;
    for (int64_t n = 1; n <= NMAX; n++) {
        for (int rep = 0; rep < 2; rep++) {
            float *yy = rep ? y2 : y, *dd = rep ? dx2 : dx, *gg = rep ? gw2 : gw;
            memset(gg, 0, (size_t)(3 * DF) * 4);
            ffn_layer_params g = {gated ? gg : NULL, NULL, gg + DF, NULL, gg + 2 * DF, NULL};
            ffn_status st = ffn_layer_forward(l, yy, x, n, saved, ws, ws_bytes);
            if (!st) st = ffn_layer_backward(l, dd, &g, dy, x, n, saved, ws, ws_bytes);
            CHECK(st == FFN_OK, "D=%lld F=%lld n=%lld: %s", (long long)D, (long long)F,
                  (long long)n, ffn_last_error());
            if (st) break;
        }
        mismatch += memcmp(y, y2, (size_t)(n * D) * 4) || memcmp(dx, dx2, (size_t)(n * D) * 4) ||
                    memcmp(gw, gw2, (size_t)(3 * DF) * 4);
        if (n % 3 != 1 && n != NMAX && n != 64) continue; /* the oracle is slow: a sample of n */
        layer_oracle(&L, n, x, dy, ry, rdx, rg, ru, rd);
        double e = rel_err(y, ry, n * D);
        double e2 = rel_err(dx, rdx, n * D), e3 = rel_err(gw + DF, ru, DF);
        double e4 = rel_err(gw + 2 * DF, rd, DF), e5 = gated ? rel_err(gw, rg, DF) : 0;
        double m = fmax(fmax(fmax(e, e2), fmax(e3, e4)), e5);
        if (m > worst) worst = m, worst_n = n;
    }
    printf("bf16 layer %s D=%lld F=%lld: worst error against the oracle %.3g (n=%lld)\n",
           ffn_act_name(act), (long long)D, (long long)F, worst, (long long)worst_n);
    CHECK(worst <= 8e-3, "D=%lld F=%lld %s: error %.3g at n=%lld (tol 8e-3)", (long long)D,
          (long long)F, gated ? "gated" : "dense", worst, (long long)worst_n);
    CHECK(mismatch == 0, "D=%lld F=%lld: %lld token counts not bitwise reproducible",
          (long long)D, (long long)F, (long long)mismatch);
    free(w), free(gw), free(gw2), free(x), free(dy), free(y), free(dx), free(y2), free(dx2);
    free(ry), free(rdx), free(rg), free(ru), free(rd), free(ws), free(saved);
    ffn_layer_free(l);
}

/* Without AVX512_BF16: the products and the layer are refused with
 * FFN_ERR_UNSUPPORTED, a message naming the instruction set and bf16, and
 * nothing made. */
static void test_refusal(ffn_ctx *ctx) {
    ffn_bf16_gemm *g = NULL;
    ffn_status st = ffn_bf16_gemm_create(&g);
    CHECK(st == FFN_ERR_UNSUPPORTED && g == NULL, "bf16 products without AVX512_BF16: status %d",
          (int)st);
    CHECK(strstr(ffn_last_error(), "AVX512_BF16") && strstr(ffn_last_error(), "bf16"),
          "the refusal names neither the instruction set nor the type: %s", ffn_last_error());
    ffn_layer_config cfg = {.hidden_size = 8, .intermediate_size = 12, .type = FFN_MLP_GATED,
                            .act = FFN_ACT_SILU, .precision = FFN_PRECISION_BF16};
    ffn_layer *l = NULL;
    st = ffn_layer_create(ctx, &cfg, &l);
    CHECK(st == FFN_ERR_UNSUPPORTED && l == NULL, "bf16 layer without AVX512_BF16: status %d", (int)st);
    CHECK(strstr(ffn_last_error(), "AVX512_BF16") && strstr(ffn_last_error(), "bf16"),
          "the layer's refusal names neither the instruction set nor the type: %s",
          ffn_last_error());
    printf("refused without AVX512_BF16: %s\n", ffn_last_error());
    ffn_layer_free(l);
    ffn_bf16_gemm_free(g);
}

int main(void) {
    ffn_precision p;
    CHECK(ffn_precision_parse("fp16", &p) != FFN_OK && strstr(ffn_last_error(), "fp16"),
          "fp16 accepted or not named: %s", ffn_last_error());
    CHECK(ffn_precision_parse("bf16", &p) == FFN_OK && p == FFN_PRECISION_BF16, "bf16");
    ffn_layer_config bad = {.hidden_size = 4, .intermediate_size = 4, .type = FFN_MLP_DENSE,
                            .precision = (ffn_precision)7};
    CHECK(ffn_layer_config_validate(&bad) != FFN_OK && strstr(ffn_last_error(), "precision"),
          "precision 7 accepted: %s", ffn_last_error());
    /* the library's answer against CPUID read here (capped by FFN_SIMD) */
    const int hw = check_cpu_has("avx512bf16");
    CHECK(ffn_precision_supported(FFN_PRECISION_BF16) == hw,
          "ffn_precision_supported(bf16) = %d, but CPUID (FFN_SIMD cap) says AVX512_BF16 %d",
          ffn_precision_supported(FFN_PRECISION_BF16), hw);
    ffn_ctx *ctx = NULL;
    if (ffn_ctx_create(2, &ctx)) return 1;
    if (!hw) {
        test_refusal(ctx);
        ffn_ctx_free(ctx);
        check_note("no AVX512_BF16 (CPUID, FFN_SIMD=%s): tested the refusal of bf16 products "
                   "and layers, not the kernels", getenv("FFN_SIMD") ? getenv("FFN_SIMD") : "unset");
        return check_done("test_bf16");
    }
    check_note("AVX512_BF16 present: bf16 kernels and layers tested");
    test_convert();
    test_gemm(ctx);
    test_layer(ctx, 37, 53, 1, FFN_ACT_SILU);
    test_layer(ctx, 24, 70, 0, FFN_ACT_GELU);
    ffn_ctx_free(ctx);
    return check_done("test_bf16");
}
