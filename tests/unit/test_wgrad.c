/* test_wgrad.c -- the weight-gradient kernel C += Aᵀ·B (kernels.h,
 * ffn_wgrad) against the double-precision triple loop ffn_gemm_ref:
 *   every SIMD variant this CPU has, K = 1..70 and 64, 128, 255, 256, 257,
 *   300, 520 (across the K chunk of FFN_WGRAD_KC = 256), odd M and N around
 *   the tile sizes (6 rows; 16 / 64 columns) and across a column chunk,
 *   padded leading dimensions (padding must stay untouched), accumulation
 *   into non-zero C;
 *   the dispatch and threaded entry point (the level FFN_SIMD selects;
 *   the test re-runs itself under FFN_SIMD=avx2 and scalar): bitwise equal
 *   at 1, 2 and 3 threads and for a split of the rows at any row;
 *   the layer's backward on the kernel's range against the same products
 *   computed by ffn_gemm_ref.
 * Tolerance: |got - ref| <= 2·(K + 2)·2⁻²⁴ · (Σ_k |a·b| + |C₀|) per element,
 * the worst-case bound of a K-term fp32 sum plus the final add, doubled. */
#include "check.h"
#include "kernels/kernels.h"
#include "ffn/layer.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static float frand(void) { /* uniform in [-1, 1), seeded */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
static void fill(float *p, int64_t n) {
    for (int64_t i = 0; i < n; i++) p[i] = frand();
}

static int have_level(int level) {
    __builtin_cpu_init();
    if (level == FFN_SIMD_AVX2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (level == FFN_SIMD_AVX512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    return 1;
}
static const char *level_name[] = {"scalar", "avx2", "avx512"};

typedef void (*wgrad_fn)(float *, int64_t, const float *, int64_t, const float *, int64_t,
                         int64_t, int64_t, int64_t);
static const wgrad_fn variants[3] = {ffn_wgrad_scalar, ffn_wgrad_avx2, ffn_wgrad_avx512};

/* One case: returns the worst error relative to the bound's scale. */
static double one_case(wgrad_fn fn, int64_t M, int64_t N, int64_t K, const char *what) {
    int64_t lda = M + 3, ldb = N + 5, ldc = N + 2;
    float *A = malloc((size_t)(K * lda) * 4), *B = malloc((size_t)(K * ldb) * 4);
    float *Aa = malloc((size_t)(K * lda) * 4), *Ba = malloc((size_t)(K * ldb) * 4);
    float *C = malloc((size_t)(M * ldc) * 4), *R = malloc((size_t)(M * ldc) * 4);
    float *S = malloc((size_t)(M * ldc) * 4);
    fill(A, K * lda), fill(B, K * ldb), fill(C, M * ldc);
    for (int64_t i = 0; i < K * lda; i++) Aa[i] = fabsf(A[i]);
    for (int64_t i = 0; i < K * ldb; i++) Ba[i] = fabsf(B[i]);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < ldc; j++) {
            if (j >= N) C[i * ldc + j] = 7.0f; /* padding */
            R[i * ldc + j] = C[i * ldc + j];
            S[i * ldc + j] = fabsf(C[i * ldc + j]);
        }
    ffn_gemm_ref(1, 0, M, N, K, 1.0f, A, lda, B, ldb, 1.0f, R, ldc);
    ffn_gemm_ref(1, 0, M, N, K, 1.0f, Aa, lda, Ba, ldb, 1.0f, S, ldc);
    fn(C, ldc, A, lda, B, ldb, M, N, K);
    double worst = 0, tol = 2.0 * (double)(K + 2) / 16777216.0;
    int bad = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < ldc; j++) {
            float v = C[i * ldc + j];
            if (j >= N) {
                bad |= v != 7.0f;
                continue;
            }
            double e = fabs((double)v - R[i * ldc + j]) / ((double)S[i * ldc + j] + 1e-30);
            if (!(e <= tol)) bad = 1;
            if (e > worst || e != e) worst = e;
        }
    CHECK(!bad, "%s M=%lld N=%lld K=%lld: error %.3g over %.3g or padding touched", what,
          (long long)M, (long long)N, (long long)K, worst, tol);
    free(A), free(B), free(Aa), free(Ba), free(C), free(R), free(S);
    return worst / tol;
}

static void test_variants(void) {
    static const int64_t Ms[] = {1, 5, 6, 7, 13, 19};
    static const int64_t Ns[] = {1, 7, 15, 17, 63, 65, 131};
    static const int64_t bigK[] = {64, 128, 255, 256, 257, 300, 520};
    for (int lv = 0; lv < 3; lv++) {
        if (!have_level(lv)) {
            check_note("no %s (CPUID): wgrad not run at that level", level_name[lv]);
            continue;
        }
        double worst = 0, w;
        int cases = 0;
        for (int64_t K = 1; K <= 70; K++) { /* every K, shapes rotating through the tails */
            w = one_case(variants[lv], Ms[K % 6], Ns[K % 7], K, level_name[lv]);
            worst = w > worst ? w : worst, cases++;
            w = one_case(variants[lv], 13, 131, K, level_name[lv]);
            worst = w > worst ? w : worst, cases++;
        }
        for (size_t i = 0; i < sizeof bigK / sizeof bigK[0]; i++)
            for (size_t m = 0; m < 6; m += 2)
                for (size_t n = 1; n < 7; n += 2) {
                    w = one_case(variants[lv], Ms[m], Ns[n], bigK[i], level_name[lv]);
                    worst = w > worst ? w : worst, cases++;
                }
        /* wider than one column chunk (ffn_wgrad_chunk_cols) */
        static const int64_t wide[][3] = {{7, 1031, 64}, {13, 777, 300}, {11, 2100, 17}};
        for (int i = 0; i < 3; i++) {
            w = one_case(variants[lv], wide[i][0], wide[i][1], wide[i][2], level_name[lv]);
            worst = w > worst ? w : worst, cases++;
        }
        printf("wgrad %s: %d cases, worst error %.3g of the tolerance\n", level_name[lv], cases,
               worst);
    }
}

/* The dispatch at the level in use: 1, 2, 3 threads and any row split give
 * the same bits. */
static void test_threads(void) {
    const int64_t M = 1001, N = 523, K = 70;
    float *A = malloc(K * M * 4), *B = malloc(K * N * 4), *C0 = malloc(M * N * 4);
    float *C1 = malloc(M * N * 4), *C2 = malloc(M * N * 4);
    fill(A, K * M), fill(B, K * N), fill(C0, M * N);
    memcpy(C1, C0, M * N * 4);
    ffn_wgrad(C1, N, A, M, B, N, M, N, K);
    for (int threads = 1; threads <= 3; threads++) {
        ffn_ctx *ctx;
        CHECK(!ffn_ctx_create(threads, &ctx), "ctx");
        memcpy(C2, C0, M * N * 4);
        ffn_wgrad_mt(ctx, C2, N, A, M, B, N, M, N, K);
        CHECK(!memcmp(C1, C2, M * N * 4), "wgrad_mt at %d threads differs from ffn_wgrad",
              threads);
        ffn_ctx_free(ctx);
    }
    static const int64_t splits[] = {1, 5, 7, 500, 1000};
    for (int s = 0; s < 5; s++) {
        int64_t r = splits[s];
        memcpy(C2, C0, M * N * 4);
        ffn_wgrad(C2, N, A, M, B, N, r, N, K);
        ffn_wgrad(C2 + r * N, N, A + r, M, B, N, M - r, N, K);
        CHECK(!memcmp(C1, C2, M * N * 4), "wgrad split at row %lld differs", (long long)r);
    }
    /* degenerate sizes leave C alone */
    memcpy(C2, C0, M * N * 4);
    ffn_wgrad(C2, N, A, M, B, N, 0, N, K);
    ffn_wgrad(C2, N, A, M, B, N, M, 0, K);
    ffn_wgrad(C2, N, A, M, B, N, M, N, 0);
    CHECK(!memcmp(C0, C2, M * N * 4), "wgrad with a zero size changed C");
    printf("wgrad %s: bitwise equal at 1, 2, 3 threads and across row splits\n",
           ffn_simd_level());
    free(A), free(B), free(C0), free(C1), free(C2);
}

/* The layer's weight gradients on the kernel's token range, odd shapes,
 * against dW = Σ dGᵀ·x built from the layer's own dx-free pieces: the
 * reference runs the layer once with the matrix products recomputed by
 * ffn_gemm_ref from GU (saved) and dy. */
static void test_layer(void) {
    static const int64_t shapes[][3] = {{37, 70, 16}, {67, 131, 64}, {33, 95, 70},
                                        {19, 45, 129}, {40, 21, 1}};
    for (int s = 0; s < 5; s++) {
        int64_t D = shapes[s][0], F = shapes[s][1], n = shapes[s][2];
        ffn_ctx *ctx;
        CHECK(!ffn_ctx_create(2, &ctx), "ctx");
        ffn_layer_config cfg = {.hidden_size = D, .intermediate_size = F, .act = FFN_ACT_SILU,
                                .type = FFN_MLP_GATED, .save = FFN_SAVE_ACTIVATIONS};
        ffn_layer *l;
        CHECK(!ffn_layer_create(ctx, &cfg, &l), "layer create");
        float *wg = malloc(F * D * 4), *wu = malloc(F * D * 4), *wd = malloc(D * F * 4);
        float *x = malloc(n * D * 4), *dy = malloc(n * D * 4), *y = malloc(n * D * 4);
        float *gu = malloc(n * 2 * F * 4);
        float *dwg = calloc(F * D, 4), *dwu = calloc(F * D, 4), *dwd = calloc(D * F, 4);
        fill(wg, F * D), fill(wu, F * D), fill(wd, D * F), fill(x, n * D), fill(dy, n * D);
        ffn_layer_params w = {.gate_w = wg, .up_w = wu, .down_w = wd};
        CHECK(!ffn_layer_set_weights(l, &w), "set weights");
        size_t ws_bytes = ffn_layer_workspace_size(l, n);
        void *ws = malloc(ws_bytes);
        CHECK(!ffn_layer_forward(l, y, x, n, gu, ws, ws_bytes), "forward");
        ffn_layer_params g = {.gate_w = dwg, .up_w = dwu, .down_w = dwd};
        CHECK(!ffn_layer_backward(l, NULL, &g, dy, x, n, gu, ws, ws_bytes), "backward");
        /* reference: h, dh, dgu from gu in fp32 kernels, products in double */
        float *h = malloc(n * F * 4), *dh = malloc(n * F * 4), *dgu = malloc(n * 2 * F * 4);
        float *rg = calloc(F * D, 4), *ru = calloc(F * D, 4), *rd = calloc(D * F, 4);
        for (int64_t t = 0; t < n; t++) {
            ffn_glu_fwd(FFN_ACT_SILU, h + t * F, gu + t * 2 * F, gu + t * 2 * F + F, F);
        }
        ffn_gemm_ref(1, 0, D, F, n, 1, dy, D, h, F, 0, rd, F);
        ffn_gemm_ref(0, 0, n, F, D, 1, dy, D, wd, F, 0, dh, F);
        for (int64_t t = 0; t < n; t++)
            ffn_glu_bwd(FFN_ACT_SILU, dgu + t * 2 * F, dgu + t * 2 * F + F, dh + t * F,
                        gu + t * 2 * F, gu + t * 2 * F + F, F);
        ffn_gemm_ref(1, 0, F, D, n, 1, dgu, 2 * F, x, D, 0, rg, D);
        ffn_gemm_ref(1, 0, F, D, n, 1, dgu + F, 2 * F, x, D, 0, ru, D);
        const float *got[3] = {dwg, dwu, dwd}, *ref[3] = {rg, ru, rd};
        static const char *names[3] = {"gate_proj", "up_proj", "down_proj"};
        for (int k = 0; k < 3; k++) {
            double scale = 0, err = 0;
            for (int64_t i = 0; i < F * D; i++) {
                scale = fabs(ref[k][i]) > scale ? fabs(ref[k][i]) : scale;
                double e = fabs((double)got[k][i] - ref[k][i]);
                err = e > err || e != e ? e : err;
            }
            /* dH enters through a D-term fp32 product on the layer's side */
            CHECK(err <= 1e-5 * scale, "layer D=%lld F=%lld n=%lld %s: max error %.3g, scale %.3g",
                  (long long)D, (long long)F, (long long)n, names[k], err, scale);
        }
        printf("layer D=%lld F=%lld n=%lld: weight gradients within 1e-5 of the reference\n",
               (long long)D, (long long)F, (long long)n);
        free(wg), free(wu), free(wd), free(x), free(dy), free(y), free(gu), free(dwg), free(dwu);
        free(dwd), free(ws), free(h), free(dh), free(dgu), free(rg), free(ru), free(rd);
        ffn_layer_free(l);
        ffn_ctx_free(ctx);
    }
}

int main(int argc, char **argv) {
    (void)argc;
    int child = getenv("TEST_WGRAD_CHILD") != NULL;
    printf("simd level in use: %s\n", ffn_simd_level());
    if (!child) test_variants(); /* once: every variant is called directly */
    test_threads();
    test_layer();
    /* the dispatch at the lower levels, in a fresh process each (the level
     * is fixed at the first call) */
    if (!child) {
        static const char *levels[] = {"avx2", "scalar"};
        for (int i = 0; i < 2; i++) {
            char cmd[4096];
            snprintf(cmd, sizeof cmd, "TEST_WGRAD_CHILD=1 FFN_SIMD=%s '%s'", levels[i], argv[0]);
            int rc = system(cmd);
            CHECK(rc == 0, "FFN_SIMD=%s %s failed (status %d)", levels[i], argv[0], rc);
        }
    }
    return check_done("test_wgrad");
}
