/* test_kernels.c -- the hot loops against their references:
 *   ffn_gemm vs ffn_gemm_ref on odd shapes (0, 1, primes), all transposes,
 *     alpha/beta, padded leading dimensions, beta = 0 over NaN;
 *   the streaming gemv at every SIMD level this CPU has vs the reference,
 *     and bitwise agreement across thread counts;
 *   activations: the array kernels and fused epilogues at every SIMD level
 *     vs the double-precision scalar reference; finite everywhere up to
 *     |x| = FLT_MAX; finite-difference checks of every derivative;
 *   names and parsing;
 *   every width 1..70 and every tensor-parallel split of the models'
 *     widths: gemv, activations (each element's bits independent of the
 *     array's length) and the decode layer (test_widths).
 * Tolerances are stated next to each check. */
#include "check.h"
#include "kernels/kernels.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float frand(void) { /* uniform in [-1, 1), seeded */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
static void fill(float *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = frand();
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

/* ---- gemm ----------------------------------------------------------------- */

static void test_gemm(ffn_ctx *ctx) {
    static const int64_t dims[] = {0, 1, 2, 7, 17, 64, 129};
    const int nd = sizeof dims / sizeof dims[0];
    int cases = 0;
    double worst = 0;
    for (int im = 0; im < nd; im++)
        for (int in = 0; in < nd; in++)
            for (int ik = 0; ik < nd; ik++)
                for (int tr = 0; tr < 4; tr++) {
                    int64_t M = dims[im], N = dims[in], K = dims[ik];
                    if ((im + in + ik + tr) % 3 && M > 17 && N > 17 && K > 17) continue;
                    int ta = tr & 1, tb = tr >> 1;
                    int64_t pad = (im + ik) % 3; /* padded leading dimensions */
                    int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
                    if (lda < 1) lda = 1;
                    if (ldb < 1) ldb = 1;
                    if (ldc < 1) ldc = 1;
                    size_t an = (size_t)((ta ? K : M) * lda), bn = (size_t)((tb ? N : K) * ldb),
                           cn = (size_t)(M * ldc);
                    float *A = malloc((an + 1) * 4), *B = malloc((bn + 1) * 4);
                    float *C = malloc((cn + 1) * 4), *R = malloc((cn + 1) * 4);
                    float *Aa = malloc((an + 1) * 4), *Ba = malloc((bn + 1) * 4);
                    float *Mg = malloc((cn + 1) * 4);
                    fill(A, an);
                    fill(B, bn);
                    fill(C, cn);
                    float alpha = (tr == 3) ? -0.5f : 1.0f;
                    float beta = (ik % 3 == 0) ? 0.0f : (ik % 3 == 1 ? 1.0f : 0.25f);
                    if (beta == 0.0f)
                        for (size_t i = 0; i < cn; i++) C[i] = NAN; /* must be ignored */
                    memcpy(R, C, cn * 4);
                    for (size_t i = 0; i < an; i++) Aa[i] = fabsf(A[i]);
                    for (size_t i = 0; i < bn; i++) Ba[i] = fabsf(B[i]);
                    for (size_t i = 0; i < cn; i++) Mg[i] = beta == 0.0f ? 0.0f : fabsf(C[i]);
                    ffn_status st = ffn_gemm(ctx, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
                    CHECK(st == FFN_OK, "ffn_gemm status %d: %s", st, ffn_last_error());
                    ffn_gemm_ref(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, R, ldc);
                    ffn_gemm_ref(ta, tb, M, N, K, fabsf(alpha), Aa, lda, Ba, ldb,
                                 fabsf(beta), Mg, ldc);
                    /* tolerance: 1e-6·(K+2) relative to Σ|α·a·b| + |β·c| */
                    double bad = 0;
                    for (int64_t i = 0; i < M; i++)
                        for (int64_t j = 0; j < N; j++) {
                            double e = fabs((double)C[i * ldc + j] - R[i * ldc + j]);
                            double tol = 1e-6 * (double)(K + 2) * (Mg[i * ldc + j] + 1e-30);
                            if (!(e <= tol)) bad = e > bad || isnan(e) ? (isnan(e) ? INFINITY : e) : bad;
                            double rel = e / (Mg[i * ldc + j] + 1e-30);
                            if (rel > worst) worst = rel;
                        }
                    CHECK(bad == 0, "gemm M=%lld N=%lld K=%lld ta=%d tb=%d beta=%g: error %g",
                          (long long)M, (long long)N, (long long)K, ta, tb, beta, bad);
                    cases++;
                    free(A); free(B); free(C); free(R); free(Aa); free(Ba); free(Mg);
                }
    printf("gemm: %d cases, worst error relative to Σ|a·b| = %.3g (tolerance 1e-6·(K+2))\n",
           cases, worst);

    /* bad arguments are errors, not crashes */
    float a = 1, b = 1, c = 1;
    CHECK(ffn_gemm(ctx, 0, 0, -1, 1, 1, 1, &a, 1, &b, 1, 0, &c, 1) == FFN_ERR_INVALID_ARG, "M<0");
    CHECK(ffn_gemm(ctx, 0, 0, 2, 2, 2, 1, &a, 1, &b, 2, 0, &c, 2) == FFN_ERR_INVALID_ARG, "lda");
}

/* Does the matrix engine agree with itself across runs and thread counts? */
static void test_gemm_determinism(void) {
    const int64_t M = 129, N = 515, K = 1031;
    float *A = malloc(M * K * 4), *B = malloc(N * K * 4), *C1 = malloc(M * N * 4),
          *C2 = malloc(M * N * 4), *C3 = malloc(M * N * 4);
    fill(A, M * K);
    fill(B, N * K);
    ffn_ctx *c1, *c2;
    ffn_ctx_create(1, &c1);
    ffn_ctx_create(2, &c2);
    ffn_gemm(c2, 0, 1, M, N, K, 1, A, K, B, K, 0, C1, N);
    ffn_gemm(c2, 0, 1, M, N, K, 1, A, K, B, K, 0, C2, N);
    CHECK(!memcmp(C1, C2, M * N * 4), "gemm not bitwise reproducible run to run (2 threads)");
    ffn_gemm(c1, 0, 1, M, N, K, 1, A, K, B, K, 0, C3, N);
    int same = !memcmp(C1, C3, M * N * 4);
    /* weight-gradient shape: K is the token count */
    ffn_gemm(c2, 1, 0, N, M, K, 1, B, N, A, M, 0, C1, M);
    ffn_gemm(c1, 1, 0, N, M, K, 1, B, N, A, M, 0, C3, M);
    int same_t = !memcmp(C1, C3, M * N * 4);
    printf("gemm across thread counts 1 vs 2 (informational): x·Wᵀ %s, Aᵀ·B %s\n",
           same ? "bitwise equal" : "differs", same_t ? "bitwise equal" : "differs");
    ffn_ctx_free(c1);
    ffn_ctx_free(c2);
    free(A); free(B); free(C1); free(C2); free(C3);
}

/* ---- gemv ------------------------------------------------------------------ */

typedef void (*gemv_fn)(float *, int64_t, const float *, int64_t, const float *, int64_t,
                        int64_t, int64_t);

static void test_gemv(void) {
    static const gemv_fn fns[3] = {ffn_gemv_scalar, ffn_gemv_avx2, ffn_gemv_avx512};
    static const int64_t Ks[] = {1, 7, 8, 16, 17, 100, 1031};
    static const int64_t ns[] = {1, 2, 3, 4, 5, 8, 9};
    static const int64_t rowss[] = {1, 3, 4, 5, 33};
    for (int lv = 0; lv < 3; lv++) {
        if (!have_level(lv)) {
            printf("gemv %s: not supported by this CPU, skipped\n", level_name[lv]);
            continue;
        }
        double worst = 0;
        for (size_t a = 0; a < sizeof Ks / 8; a++)
            for (size_t b = 0; b < sizeof ns / 8; b++)
                for (size_t c = 0; c < sizeof rowss / 8; c++) {
                    int64_t K = Ks[a], n = ns[b], rows = rowss[c];
                    int64_t ldx = K + 3, ldo = rows + 2;
                    float *W = malloc(rows * K * 4), *x = malloc(n * ldx * 4);
                    float *o = malloc(n * ldo * 4), *r = malloc(n * ldo * 4);
                    float *Wa = malloc(rows * K * 4), *xa = malloc(n * ldx * 4),
                          *m = malloc(n * ldo * 4);
                    fill(W, rows * K);
                    fill(x, n * ldx);
                    for (int64_t i = 0; i < rows * K; i++) Wa[i] = fabsf(W[i]);
                    for (int64_t i = 0; i < n * ldx; i++) xa[i] = fabsf(x[i]);
                    for (int64_t i = 0; i < n * ldo; i++) o[i] = r[i] = m[i] = 7.0f;
                    fns[lv](o, ldo, W, K, x, ldx, n, rows);
                    ffn_gemm_ref(0, 1, n, rows, K, 1, x, ldx, W, K, 0, r, ldo);
                    ffn_gemm_ref(0, 1, n, rows, K, 1, xa, ldx, Wa, K, 0, m, ldo);
                    int bad = 0;
                    for (int64_t t = 0; t < n; t++)
                        for (int64_t j = 0; j < ldo; j++) {
                            float v = o[t * ldo + j], ref = r[t * ldo + j];
                            if (j >= rows) { bad |= v != 7.0f; continue; } /* untouched */
                            double e = fabs((double)v - ref) / (m[t * ldo + j] + 1e-30);
                            if (e > worst) worst = e;
                            bad |= !(e <= 1e-6 * (K + 2));
                        }
                    CHECK(!bad, "gemv %s K=%lld n=%lld rows=%lld wrong", level_name[lv],
                          (long long)K, (long long)n, (long long)rows);
                    free(W); free(x); free(o); free(r); free(Wa); free(xa); free(m);
                }
        printf("gemv %s: worst error relative to Σ|w·x| = %.3g (tolerance 1e-6·(K+2))\n",
               level_name[lv], worst);
    }
    /* threads: the parallel gemv gives the same bits at 1 and 2 threads */
    const int64_t K = 1031, n = 5, rows = 777;
    float *W = malloc(rows * K * 4), *x = malloc(n * K * 4), *o1 = malloc(n * rows * 4),
          *o2 = malloc(n * rows * 4);
    fill(W, rows * K);
    fill(x, n * K);
    ffn_ctx *c1, *c2;
    ffn_ctx_create(1, &c1);
    ffn_ctx_create(2, &c2);
    ffn_gemv_mt(c1, o1, rows, W, K, x, K, n, rows);
    ffn_gemv_mt(c2, o2, rows, W, K, x, K, n, rows);
    CHECK(!memcmp(o1, o2, n * rows * 4), "gemv differs between 1 and 2 threads");
    ffn_ctx_free(c1);
    ffn_ctx_free(c2);
    free(W); free(x); free(o1); free(o2);
}

/* The streaming kernel over oneDNN's packed weights (AVX-512 only), on odd
 * shapes, token counts across the 4-token grouping, and column ranges that
 * start and end inside panels. */
static void test_gemv_packed(void) {
    if (!have_level(FFN_SIMD_AVX512)) {
        printf("gemv packed: no AVX-512, skipped\n");
        return;
    }
    static const int64_t shapes[][2] = {{1, 1}, {17, 65}, {100, 130}, {1031, 64}, {64, 200}};
    ffn_mm_engine *e = NULL;
    CHECK(ffn_mm_engine_create(&e) == FFN_OK, "engine: %s", ffn_last_error());
    if (!e) return;
    double worst = 0;
    int viewed = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t K = shapes[s][0], N = shapes[s][1];
        float *W = malloc(N * K * 4), *Wa = malloc(N * K * 4); /* B stored transposed (N, K) */
        fill(W, N * K);
        for (int64_t i = 0; i < N * K; i++) Wa[i] = fabsf(W[i]);
        ffn_mm_desc d = {.M = 64, .N = N, .K = K, .lda = K, .b_kind = FFN_MM_B_PLAIN_T, .ldb = K,
                         .ldc = N};
        ffn_mm_packed pk;
        ffn_packed_view v;
        if (ffn_mm_pack(e, &d, W, &pk) || !ffn_mm_packed_view(&pk, K, N, &v)) {
            printf("gemv packed K=%lld N=%lld: layout not viewable, skipped\n", (long long)K,
                   (long long)N);
            free(W); free(Wa);
            continue;
        }
        viewed++;
        for (int64_t n = 1; n <= 9; n++) {
            int64_t c0 = N > 3 ? N / 3 : 0, c1 = N > 3 ? N - 1 : N, ldo = N + 3;
            float *x = malloc(n * K * 4), *xa = malloc(n * K * 4), *o = malloc(n * ldo * 4);
            float *r = malloc(n * N * 4), *m = malloc(n * N * 4);
            fill(x, n * K);
            for (int64_t i = 0; i < n * K; i++) xa[i] = fabsf(x[i]);
            ffn_gemm_ref(0, 1, n, N, K, 1, x, K, W, K, 0, r, N);
            ffn_gemm_ref(0, 1, n, N, K, 1, xa, K, Wa, K, 0, m, N);
            for (int pass = 0; pass < 2; pass++) {
                int64_t a = pass ? c0 : 0, b = pass ? c1 : N;
                for (int64_t i = 0; i < n * ldo; i++) o[i] = 7.0f;
                ffn_gemv_packed_avx512(o, ldo, &v, x, K, n, a, b);
                int bad = 0;
                for (int64_t t = 0; t < n; t++)
                    for (int64_t j = 0; j < ldo; j++) {
                        float got = o[t * ldo + j];
                        if (j >= b - a) { bad |= got != 7.0f; continue; } /* untouched */
                        double e2 = fabs((double)got - r[t * N + a + j]) / (m[t * N + a + j] + 1e-30);
                        if (e2 > worst) worst = e2;
                        bad |= !(e2 <= 1e-6 * (K + 2));
                    }
                CHECK(!bad, "gemv packed K=%lld N=%lld n=%lld columns [%lld, %lld) wrong",
                      (long long)K, (long long)N, (long long)n, (long long)a, (long long)b);
            }
            free(x); free(xa); free(o); free(r); free(m);
        }
        ffn_mm_packed_free(&pk);
        free(W); free(Wa);
    }
    ffn_mm_engine_free(e);
    printf("gemv packed: %d shapes viewed, worst error relative to Σ|w·x| = %.3g "
           "(tolerance 1e-6·(K+2))\n", viewed, worst);
}

/* ---- activations ---------------------------------------------------------- */

static const ffn_act all_acts[] = {FFN_ACT_LINEAR, FFN_ACT_RELU, FFN_ACT_GELU,
                                   FFN_ACT_GELU_TANH, FFN_ACT_SILU, FFN_ACT_SIGMOID};
enum { N_ACTS = 6 };

/* Inputs: a grid over [-12, 12], extremes, and the neighbourhood of 0. */
static int64_t act_inputs(float *x, int64_t cap) {
    int64_t n = 0;
    for (int i = -2400; i <= 2400 && n < cap; i++) x[n++] = i * 0.005f + 0.00123f;
    static const float special[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-7f, -1e-7f, 30.0f, -30.0f,
                                    87.0f, -87.0f, 89.0f, -89.0f, 100.0f, -100.0f, 1e3f, -1e3f,
                                    1e4f, -1e4f, 1e6f, -1e6f, 1e20f, -1e20f, 1e38f, -1e38f,
                                    FLT_MAX, -FLT_MAX};
    for (size_t i = 0; i < sizeof special / sizeof special[0] && n < cap; i++) x[n++] = special[i];
    return n;
}

/* |a - ref| within `rel` relative plus `abs` absolute.  Forward values
 * are held to 8e-6 relative (2e-5 for gelu, whose erfc runs through
 * exp(-z²) with z² rounded to float) plus 1e-30 (subnormal flush);
 * derivatives to the same relative bound plus 1e-6·|dy| absolute, since
 * silu' and gelu' cross zero where only an absolute bound means anything. */
static int close_tol(float a, float ref, double rel, double abs) {
    if (!isfinite(a) && isfinite(ref)) return 0;
    if (!isfinite(ref)) return a == ref;
    double e = fabs((double)a - ref);
    return e <= rel * fabs((double)ref) + abs;
}
#define close_rel(a, ref, rel) close_tol(a, ref, rel, 1e-30)

typedef void (*act_fn)(ffn_act, float *, const float *, int64_t);
typedef void (*act_bwd_fn)(ffn_act, float *, const float *, const float *, int64_t);
typedef void (*glu_fwd_fn)(ffn_act, float *, const float *, const float *, int64_t);
typedef void (*glu_bwd_fn)(ffn_act, float *, float *, const float *, const float *,
                           const float *, int64_t);

static void test_act_arrays(void) {
    static const act_fn fwd[3] = {ffn_act_fwd_scalar, ffn_act_fwd_avx2, ffn_act_fwd_avx512};
    static const act_bwd_fn bwd[3] = {ffn_act_bwd_scalar, ffn_act_bwd_avx2, ffn_act_bwd_avx512};
    static const glu_fwd_fn gf[3] = {ffn_glu_fwd_scalar, ffn_glu_fwd_avx2, ffn_glu_fwd_avx512};
    static const glu_bwd_fn gb[3] = {ffn_glu_bwd_scalar, ffn_glu_bwd_avx2, ffn_glu_bwd_avx512};
    enum { CAP = 5000 };
    float *x = malloc(CAP * 4), *y = malloc(CAP * 4), *dy = malloc(CAP * 4), *u = malloc(CAP * 4);
    float *g2 = malloc(CAP * 4), *u2 = malloc(CAP * 4), *dg = malloc(CAP * 4), *du = malloc(CAP * 4);
    int64_t n = act_inputs(x, CAP);
    for (int64_t i = 0; i < n; i++) {
        dy[i] = frand();
        u[i] = frand(); /* |u| < 1: act(g)·u stays finite at g = FLT_MAX */
    }
    for (int lv = 0; lv < 3; lv++) {
        if (!have_level(lv)) continue;
        for (int a = 0; a < N_ACTS; a++) {
            ffn_act act = all_acts[a];
            double rel = act == FFN_ACT_GELU ? 2e-5 : 8e-6;
            double worst_f = 0, worst_g = 0;
            int bad_f = 0, bad_g = 0, bad_glu = 0;
            fwd[lv](act, y, x, n);
            for (int64_t i = 0; i < n; i++) {
                float r = ffn_act_forward(act, x[i]);
                if (!close_rel(y[i], r, rel)) {
                    if (bad_f++ < 3)
                        fprintf(stderr, "  %s %s(%g) = %.9g, reference %.9g\n", level_name[lv],
                                ffn_act_name(act), x[i], y[i], r);
                }
                double e = fabs((double)y[i] - r) / (rel * fabs(r) + 1e-30);
                if (isfinite(r) && e > worst_f) worst_f = e;
            }
            bwd[lv](act, y, dy, x, n);
            for (int64_t i = 0; i < n; i++) {
                float r = dy[i] * ffn_act_grad(act, x[i]);
                if (!close_tol(y[i], r, rel, 1e-6 * fabsf(dy[i]) + 1e-30)) {
                    if (bad_g++ < 3)
                        fprintf(stderr, "  %s %s'(%g)·dy = %.9g, reference %.9g\n",
                                level_name[lv], ffn_act_name(act), x[i], y[i], r);
                }
                double e = fabs((double)y[i] - r) / (rel * fabs(r) + 1e-6 * fabsf(dy[i]) + 1e-30);
                if (e > worst_g) worst_g = e;
            }
            /* fused epilogues, also in place (dg = g, du = u) */
            gf[lv](act, y, x, u, n);
            memcpy(g2, x, n * 4);
            memcpy(u2, u, n * 4);
            gb[lv](act, dg, du, dy, x, u, n);
            gb[lv](act, g2, u2, dy, g2, u2, n);
            for (int64_t i = 0; i < n; i++) {
                float rh = ffn_act_forward(act, x[i]) * u[i];
                float rdg = dy[i] * u[i] * ffn_act_grad(act, x[i]);
                float rdu = dy[i] * ffn_act_forward(act, x[i]);
                int ok = close_rel(y[i], rh, 2 * rel) && close_tol(dg[i], rdg, 2 * rel, 1e-6 * fabsf(dy[i] * u[i]) + 1e-30) &&
                         close_rel(du[i], rdu, 2 * rel) && g2[i] == dg[i] && u2[i] == du[i];
                if (!ok && bad_glu++ < 3)
                    fprintf(stderr, "  %s glu %s at g=%g u=%g: h %g/%g dg %g/%g du %g/%g\n",
                            level_name[lv], ffn_act_name(act), x[i], u[i], y[i], rh, dg[i],
                            rdg, du[i], rdu);
            }
            CHECK(!bad_f, "%s %s forward: %d of %lld off", level_name[lv], ffn_act_name(act),
                  bad_f, (long long)n);
            CHECK(!bad_g, "%s %s backward: %d off", level_name[lv], ffn_act_name(act), bad_g);
            CHECK(!bad_glu, "%s glu %s: %d off", level_name[lv], ffn_act_name(act), bad_glu);
            printf("act %-6s %-17s worst error/tolerance fwd %.2f grad %.2f (tol. %.0e relative)\n",
                   level_name[lv], ffn_act_name(act), worst_f, worst_g, rel);
        }
    }
    /* the bias kernel */
    for (int lv = 0; lv < 3; lv++) {
        if (!have_level(lv)) continue;
        for (int64_t i = 0; i < 37; i++) y[i] = x[i] = frand();
        (lv == 0 ? ffn_add_bias_scalar : lv == 1 ? ffn_add_bias_avx2 : ffn_add_bias_avx512)(y, u, 37);
        int bad = 0;
        for (int64_t i = 0; i < 37; i++) bad |= y[i] != x[i] + u[i];
        CHECK(!bad, "%s add_bias", level_name[lv]);
    }
    free(x); free(y); free(dy); free(u); free(g2); free(u2); free(dg); free(du);
}

/* ---- every width ------------------------------------------------------------
 * The widths a layer meets: every width 1..70 (every vector tail and block
 * split at 8 and 16 lanes, the 4-row blocks, the 3- and 4-token groups) and
 * every tensor-parallel split (ceil and floor of W/P, P = 1..8) of the
 * widths of the models the suite runs -- stories260K's F = 172 (86 a rank at
 * --tp 2, 43 at --tp 4), D = 64, heads of 8 -- at every SIMD level the CPU
 * has (the dispatched layer at the level in use: tests/run.sh runs this
 * file again under FFN_SIMD=avx2 and FFN_SIMD=scalar):
 *   - gemv with K, and with rows, each such width (n = 1, 2, 3, 4, 7)
 *     against the double reference, 1e-6·(K+2) of Σ|w·x|;
 *   - the activations and fused epilogues at n = each width against the
 *     double reference (the tolerances of test_act_arrays), and every
 *     element's bits the same at every n: a value never depends on where
 *     the array's vector tail falls, so a split of F changes no unit;
 *   - ffn_decode_forward (SwiGLU, D 64, F each width, n = 1 and 3: the
 *     decode and prompt steps of ffn run) against the double layer,
 *     1e-5 of max|y| (and at F = 86, n = 1: each unit of h bitwise the
 *     unit of the F = 172 layer, the split the --tp 2 run makes). */
static int64_t layer_widths(int64_t *w, int64_t cap) {
    int64_t n = 0;
    for (int64_t i = 1; i <= 70 && n < cap; i++) w[n++] = i;
    static const int64_t full[] = {172, 96, 131, 257, 64};
    for (size_t f = 0; f < sizeof full / sizeof full[0]; f++)
        for (int64_t P = 1; P <= 8; P++)
            for (int64_t c = full[f] / P; c <= (full[f] + P - 1) / P; c++) {
                int seen = 0;
                for (int64_t i = 0; i < n; i++) seen |= w[i] == c;
                if (!seen && n < cap) w[n++] = c;
            }
    return n;
}

static void test_widths(ffn_ctx *ctx) {
    static const gemv_fn gv[3] = {ffn_gemv_scalar, ffn_gemv_avx2, ffn_gemv_avx512};
    static const glu_fwd_fn gf[3] = {ffn_glu_fwd_scalar, ffn_glu_fwd_avx2, ffn_glu_fwd_avx512};
    static const glu_bwd_fn gb[3] = {ffn_glu_bwd_scalar, ffn_glu_bwd_avx2, ffn_glu_bwd_avx512};
    static const act_fn af[3] = {ffn_act_fwd_scalar, ffn_act_fwd_avx2, ffn_act_fwd_avx512};
    static const int64_t other[] = {1, 3, 8, 17, 64}, ns[] = {1, 2, 3, 4, 7};
    int64_t widths[128];
    const int64_t nw = layer_widths(widths, 128);
    enum { WMAX = 257, NMAX = 7 };
    float *W = malloc(WMAX * WMAX * 4), *Wa = malloc(WMAX * WMAX * 4);
    float *x = malloc(NMAX * WMAX * 4), *xa = malloc(NMAX * WMAX * 4);
    float *o = malloc(NMAX * WMAX * 4), *r = malloc(NMAX * WMAX * 4), *m = malloc(NMAX * WMAX * 4);
    fill(W, WMAX * WMAX);
    fill(x, NMAX * WMAX);
    for (int64_t i = 0; i < WMAX * WMAX; i++) Wa[i] = fabsf(W[i]);
    for (int64_t i = 0; i < NMAX * WMAX; i++) xa[i] = fabsf(x[i]);
    int levels = 0;
    for (int lv = 0; lv < 3; lv++) {
        if (!have_level(lv)) continue;
        levels++;
        /* gemv: K a width with rows from `other`, and rows a width with K from it */
        int bad = 0, calls = 0;
        double worst = 0;
        for (int64_t a = 0; a < nw; a++)
            for (size_t b = 0; b < sizeof other / sizeof other[0]; b++)
                for (int swap = 0; swap < 2; swap++)
                    for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++) {
                        int64_t K = swap ? other[b] : widths[a], rows = swap ? widths[a] : other[b];
                        int64_t n = ns[c];
                        gv[lv](o, rows, W, K, x, K, n, rows);
                        ffn_gemm_ref(0, 1, n, rows, K, 1, x, K, W, K, 0, r, rows);
                        ffn_gemm_ref(0, 1, n, rows, K, 1, xa, K, Wa, K, 0, m, rows);
                        calls++;
                        for (int64_t i = 0; i < n * rows; i++) {
                            double e = fabs((double)o[i] - r[i]) / (m[i] + 1e-30);
                            if (e > worst) worst = e;
                            if (!(e <= 1e-6 * (K + 2)) && bad++ < 3)
                                fprintf(stderr, "  gemv %s K=%lld rows=%lld n=%lld: %g, reference %g\n",
                                        level_name[lv], (long long)K, (long long)rows, (long long)n,
                                        o[i], r[i]);
                        }
                    }
        CHECK(!bad, "gemv %s at the layer widths: %d outputs off", level_name[lv], bad);
        printf("widths %s: gemv %d shapes (K or rows each of %lld widths), worst error relative to "
               "Σ|w·x| %.3g (tolerance 1e-6·(K+2))\n", level_name[lv], calls, (long long)nw, worst);
        /* activations and epilogues at each width: within tolerance, and the
         * bits of the longest array's first n elements */
        enum { AMAX = 257 };
        float g[AMAX], u[AMAX], dy[AMAX], h0[AMAX], dg0[AMAX], du0[AMAX], y0[AMAX];
        float h[AMAX], dg[AMAX], du[AMAX], y[AMAX];
        for (int64_t i = 0; i < AMAX; i++) g[i] = 6.0f * frand(), u[i] = frand(), dy[i] = frand();
        int bad_tol = 0, bad_bits = 0;
        for (int a = 0; a < N_ACTS; a++) {
            ffn_act act = all_acts[a];
            double rel = act == FFN_ACT_GELU ? 2e-5 : 8e-6;
            gf[lv](act, h0, g, u, AMAX);
            gb[lv](act, dg0, du0, dy, g, u, AMAX);
            af[lv](act, y0, g, AMAX);
            for (int64_t wi = 0; wi < nw; wi++) {
                int64_t n = widths[wi];
                gf[lv](act, h, g, u, n);
                gb[lv](act, dg, du, dy, g, u, n);
                af[lv](act, y, g, n);
                for (int64_t i = 0; i < n; i++) {
                    float rh = ffn_act_forward(act, g[i]) * u[i];
                    float rdg = dy[i] * u[i] * ffn_act_grad(act, g[i]);
                    float rdu = dy[i] * ffn_act_forward(act, g[i]);
                    if (!(close_rel(h[i], rh, 2 * rel) && close_rel(du[i], rdu, 2 * rel) &&
                          close_tol(dg[i], rdg, 2 * rel, 1e-6 * fabsf(dy[i] * u[i]) + 1e-30) &&
                          close_rel(y[i], ffn_act_forward(act, g[i]), rel)) &&
                        bad_tol++ < 3)
                        fprintf(stderr, "  %s %s n=%lld at %lld: h %g/%g\n", level_name[lv],
                                ffn_act_name(act), (long long)n, (long long)i, h[i], rh);
                    if ((memcmp(&h[i], &h0[i], 4) || memcmp(&dg[i], &dg0[i], 4) ||
                         memcmp(&du[i], &du0[i], 4) || memcmp(&y[i], &y0[i], 4)) &&
                        bad_bits++ < 3)
                        fprintf(stderr, "  %s %s: element %lld of %lld differs from the same element "
                                "of %d: h %.9g/%.9g\n", level_name[lv], ffn_act_name(act),
                                (long long)i, (long long)n, AMAX, h[i], h0[i]);
                }
            }
        }
        CHECK(!bad_tol, "%s activations at the layer widths: %d off", level_name[lv], bad_tol);
        CHECK(!bad_bits, "%s activations: %d elements depend on the array's length", level_name[lv],
              bad_bits);
        printf("widths %s: activations and epilogues at %lld widths within tolerance, each element "
               "the same bits at every length\n", level_name[lv], (long long)nw);
    }
    /* the decode layer at the level in use: SwiGLU, D 64, F each width */
    const int64_t D = 64;
    double worst = 0;
    int bad = 0;
    float *gu = malloc(3 * 2 * WMAX * 4), *hh = malloc(3 * WMAX * 4), *yy = malloc(3 * D * 4);
    float *wg = malloc(WMAX * D * 4), *wu = malloc(WMAX * D * 4), *wd = malloc(D * WMAX * 4);
    float *h172 = malloc(WMAX * 4);
    fill(wg, WMAX * D);
    fill(wu, WMAX * D);
    fill(wd, D * WMAX);
    for (int64_t wi = 0; wi < nw; wi++) {
        const int64_t F = widths[wi];
        for (int64_t n = 1; n <= 3; n += 2) {
            /* the rank's slice: rows [0, F) of gate/up, columns [0, F) of down */
            float *wdF = malloc(D * F * 4);
            for (int64_t i = 0; i < D; i++) memcpy(wdF + i * F, wd + i * WMAX, F * 4);
            ffn_decode_weights w = {.w_gate = wg, .w_up = wu, .w_down = wdF};
            CHECK(ffn_decode_forward(ctx, yy, gu, hh, x, n, D, F, FFN_ACT_SILU, &w) == FFN_OK, "%s",
                  ffn_last_error());
            double ymax = 0, emax = 0;
            for (int64_t t = 0; t < n; t++) {
                double href[WMAX];
                for (int64_t j = 0; j < F; j++) {
                    double gj = 0, uj = 0;
                    for (int64_t k = 0; k < D; k++) {
                        gj += (double)wg[j * D + k] * x[t * D + k];
                        uj += (double)wu[j * D + k] * x[t * D + k];
                    }
                    href[j] = gj / (1 + exp(-gj)) * uj;
                }
                for (int64_t i = 0; i < D; i++) {
                    double acc = 0;
                    for (int64_t j = 0; j < F; j++) acc += (double)wd[i * WMAX + j] * href[j];
                    ymax = fmax(ymax, fabs(acc));
                    emax = fmax(emax, fabs(acc - yy[t * D + i]));
                }
            }
            double e = emax / (ymax + 1e-30);
            if (e > worst) worst = e;
            if (!(e <= 1e-5) && bad++ < 3)
                fprintf(stderr, "  decode F=%lld n=%lld: error %.3g of max|y|\n", (long long)F,
                        (long long)n, e);
            if (F == 172 && n == 1) memcpy(h172, hh, 172 * 4);
            free(wdF);
        }
    }
    CHECK(!bad, "ffn_decode_forward (%s) at the layer widths: %d off", ffn_simd_level(), bad);
    /* --tp 2's rank 0 holds units 0..85 of stories260K's 172: the same bits */
    {
        float *wdF = malloc(D * 86 * 4);
        for (int64_t i = 0; i < D; i++) memcpy(wdF + i * 86, wd + i * WMAX, 86 * 4);
        ffn_decode_weights w = {.w_gate = wg, .w_up = wu, .w_down = wdF};
        CHECK(ffn_decode_forward(ctx, yy, gu, hh, x, 1, D, 86, FFN_ACT_SILU, &w) == FFN_OK, "%s",
              ffn_last_error());
        CHECK(!memcmp(hh, h172, 86 * 4), "decode %s: h of F = 86 differs from units 0..85 of F = 172",
              ffn_simd_level());
        free(wdF);
    }
    printf("widths: ffn_decode_forward (%s, SwiGLU, D 64) at %lld widths F, n = 1 and 3: worst "
           "%.3g of max|y| (tolerance 1e-5); F = 86 (--tp 2 of 172) h bitwise F = 172's\n",
           ffn_simd_level(), (long long)nw, worst);
    if (levels < 3)
        check_note("no AVX-512 (CPUID): gemv (plain and packed), activations and widths at %s only",
                   levels == 2 ? "scalar and avx2" : "scalar");
    free(W); free(Wa); free(x); free(xa); free(o); free(r); free(m);
    free(gu); free(hh); free(yy); free(wg); free(wu); free(wd); free(h172);
}

/* The scalar reference: finite everywhere, exact known values, and its
 * derivative against central finite differences (in double around float
 * evaluation: h = 1e-2·max(1, |x|), tolerance 2e-3·(1 + |f'|)). */
static void test_act_reference(void) {
    enum { CAP = 5000 };
    float x[CAP];
    int64_t n = act_inputs(x, CAP);
    for (int a = 0; a < N_ACTS; a++) {
        ffn_act act = all_acts[a];
        int nonfinite = 0;
        for (int64_t i = 0; i < n; i++)
            nonfinite += !isfinite(ffn_act_forward(act, x[i])) && fabsf(x[i]) < FLT_MAX;
        for (int64_t i = 0; i < n; i++) nonfinite += !isfinite(ffn_act_grad(act, x[i]));
        CHECK(!nonfinite, "%s: %d non-finite values", ffn_act_name(act), nonfinite);
        double worst = 0;
        for (double xv = -9.87; xv <= 9.9; xv += 0.173) {
            if (act == FFN_ACT_RELU && fabs(xv) < 0.05) continue;
            double h = 1e-2;
            double fd = ((double)ffn_act_forward(act, (float)(xv + h)) -
                         (double)ffn_act_forward(act, (float)(xv - h))) / (2 * h);
            /* (float)(xv±h) is not exactly xv±h: use the true spacing */
            fd = ((double)ffn_act_forward(act, (float)(xv + h)) -
                  (double)ffn_act_forward(act, (float)(xv - h))) /
                 ((double)(float)(xv + h) - (double)(float)(xv - h));
            double g = ffn_act_grad(act, (float)xv);
            double e = fabs(fd - g) / (1 + fabs(g));
            if (e > worst) worst = e;
        }
        CHECK(worst < 2e-3, "%s: derivative vs finite difference off by %g", ffn_act_name(act),
              worst);
        printf("fd %-17s worst |fd - grad|/(1+|grad|) = %.2g (tolerance 2e-3)\n",
               ffn_act_name(act), worst);
    }
    /* known values */
    CHECK(fabsf(ffn_act_forward(FFN_ACT_GELU, 1.0f) - 0.8413447461f) < 1e-7f, "gelu(1)");
    CHECK(fabsf(ffn_act_forward(FFN_ACT_GELU_TANH, 1.0f) - 0.8411919906f) < 1e-7f, "gelu_tanh(1)");
    CHECK(fabsf(ffn_act_forward(FFN_ACT_SILU, 1.0f) - 0.7310585786f) < 1e-7f, "silu(1)");
    CHECK(ffn_act_forward(FFN_ACT_SIGMOID, -1e4f) == 0.0f, "sigmoid(-1e4)");
    CHECK(ffn_act_forward(FFN_ACT_SIGMOID, 1e4f) == 1.0f, "sigmoid(1e4)");
    CHECK(ffn_act_forward(FFN_ACT_SILU, 1e4f) == 1e4f, "silu(1e4)");
    CHECK(ffn_act_forward(FFN_ACT_GELU, -1e4f) == 0.0f, "gelu(-1e4)");
    CHECK(ffn_act_grad(FFN_ACT_RELU, 0.0f) == 0.0f, "relu'(0) = 0 as in PyTorch");
}

static void test_names(void) {
    static const struct { const char *name; ffn_act act; ffn_mlp_type type; } cases[] = {
        {"linear", FFN_ACT_LINEAR, FFN_MLP_AUTO}, {"relu", FFN_ACT_RELU, FFN_MLP_AUTO},
        {"gelu", FFN_ACT_GELU, FFN_MLP_AUTO}, {"gelu_pytorch_tanh", FFN_ACT_GELU_TANH, FFN_MLP_AUTO},
        {"gelu_new", FFN_ACT_GELU_TANH, FFN_MLP_AUTO}, {"silu", FFN_ACT_SILU, FFN_MLP_AUTO},
        {"swish", FFN_ACT_SILU, FFN_MLP_AUTO}, {"sigmoid", FFN_ACT_SIGMOID, FFN_MLP_AUTO},
        {"glu", FFN_ACT_SIGMOID, FFN_MLP_GATED}, {"bilinear", FFN_ACT_LINEAR, FFN_MLP_GATED},
        {"reglu", FFN_ACT_RELU, FFN_MLP_GATED}, {"geglu", FFN_ACT_GELU, FFN_MLP_GATED},
        {"swiglu", FFN_ACT_SILU, FFN_MLP_GATED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ffn_act act = 99;
        ffn_mlp_type type = 99;
        ffn_status st = ffn_act_parse(cases[i].name, &act, &type);
        CHECK(st == FFN_OK && act == cases[i].act && type == cases[i].type, "parse %s",
              cases[i].name);
    }
    ffn_act act;
    CHECK(ffn_act_parse("tanh", &act, NULL) == FFN_ERR_CONFIG &&
              strstr(ffn_last_error(), "hidden_act") && strstr(ffn_last_error(), "'tanh'"),
          "unknown act message: %s", ffn_last_error());
    for (int a = 0; a < N_ACTS; a++) {
        ffn_act back;
        CHECK(ffn_act_parse(ffn_act_name(all_acts[a]), &back, NULL) == FFN_OK &&
                  back == all_acts[a], "name round trip %d", a);
    }
    CHECK(!strcmp(ffn_mlp_type_name(FFN_MLP_GATED), "gated"), "type name");
    CHECK(!strcmp(ffn_mlp_type_name(FFN_MLP_DENSE), "dense"), "type name");
    CHECK(!strcmp(ffn_mlp_type_name(FFN_MLP_AUTO), "auto"), "type name");
}

int main(void) {
    ffn_ctx *ctx;
    if (ffn_ctx_create(0, &ctx)) return 1;
    printf("simd level in use: %s, threads %d\n", ffn_simd_level(), ffn_ctx_threads(ctx));
    test_names();
    test_act_reference();
    test_act_arrays();
    test_gemm(ctx);
    test_gemm_determinism();
    test_gemv();
    test_gemv_packed();
    test_widths(ctx);
    ffn_ctx_free(ctx);
    return check_done("test_kernels");
}
