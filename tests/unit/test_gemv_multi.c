/* test_gemv_multi.c -- the streaming kernels at small batches (n = 1..70,
 * every n across the streaming / engine split and across the kernels'
 * token groupings) and the layer built on them:
 *   - ffn_gemv at every SIMD level against a double-precision oracle on odd
 *     K and row counts, and bitwise equal to the same kernel run one token
 *     at a time (the summation order depends on K and the ISA only);
 *   - the packed-panel kernel (AVX-512) likewise, on column ranges that
 *     start and end inside panels and K that ends inside a k block;
 *   - the layer (gated with bias, dense without) for n = 1..70: forward,
 *     dx and every gradient against a double-precision reference, in both
 *     save modes (recompute must reproduce the streaming forward: the two
 *     modes' gradients are compared bitwise), the streaming forward bitwise
 *     equal row by row and at 1 and 2 threads; a writing hook that writes
 *     nothing (the unfused path) gives the usual path's bits;
 *   - then the same layer checks again in child processes under
 *     FFN_SIMD=avx2 and FFN_SIMD=scalar (the level is chosen once per
 *     process).
 * Tolerances: kernels, |err| <= 1e-6·(K+2)·Σ|w·x| per output; the layer,
 * max |ffn - ref| <= 1e-5 · max(max |ref|, 1) per tensor. */
#include "check.h"
#include "ffn/layer.h"
#include "kernels/kernels.h"
#include "nn/ffn_hook.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t rng_state = 0x6A09E667F3BCC909ull;
static float frand(void) { /* uniform in [-1, 1), seeded */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
static float *rnd(size_t n, float scale) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = frand() * scale;
    return p;
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

/* out (n, N) = x (n, K) · W (N, K)ᵀ in double, and Σ|w·x| for the bound */
static void oracle(double *out, double *mag, const float *W, const float *x, int64_t ldx,
                   int64_t n, int64_t N, int64_t K) {
    for (int64_t t = 0; t < n; t++)
        for (int64_t r = 0; r < N; r++) {
            double s = 0, m = 0;
            for (int64_t k = 0; k < K; k++) {
                double p = (double)W[r * K + k] * x[t * ldx + k];
                s += p, m += fabs(p);
            }
            out[t * N + r] = s, mag[t * N + r] = m;
        }
}

/* ---- ffn_gemv over plain rows --------------------------------------------- */

typedef void (*gemv_fn)(float *, int64_t, const float *, int64_t, const float *, int64_t,
                        int64_t, int64_t);

static void test_gemv_rows(void) {
    static const gemv_fn fns[3] = {ffn_gemv_scalar, ffn_gemv_avx2, ffn_gemv_avx512};
    static const int64_t shapes[][2] = {{37, 13}, {131, 6}, {1031, 5}}; /* K, rows */
    for (int lv = 0; lv < 3; lv++) {
        if (!have_level(lv)) {
            check_note("no %s (CPUID): gemv rows not run at that level", level_name[lv]);
            continue;
        }
        double worst = 0;
        int bits_ok = 1;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int64_t K = shapes[s][0], rows = shapes[s][1], nmax = 70;
            int64_t ldx = K + 1, ldo = rows + 3;
            float *W = rnd(rows * K, 1), *x = rnd(nmax * ldx, 1);
            double *ref = malloc(nmax * rows * sizeof *ref), *mag = malloc(nmax * rows * sizeof *mag);
            oracle(ref, mag, W, x, ldx, nmax, rows, K);
            float *one = malloc(nmax * ldo * 4), *o = malloc(nmax * ldo * 4);
            for (int64_t t = 0; t < nmax; t++) fns[lv](one + t * ldo, ldo, W, K, x + t * ldx, ldx, 1, rows);
            for (int64_t n = 1; n <= nmax; n++) {
                for (int64_t i = 0; i < n * ldo; i++) o[i] = 7.0f;
                fns[lv](o, ldo, W, K, x, ldx, n, rows);
                int bad = 0, same = 1;
                for (int64_t t = 0; t < n; t++)
                    for (int64_t j = 0; j < ldo; j++) {
                        float v = o[t * ldo + j];
                        if (j >= rows) { bad |= v != 7.0f; continue; } /* untouched */
                        double e = fabs(v - ref[t * rows + j]) / (mag[t * rows + j] + 1e-30);
                        if (e > worst) worst = e;
                        bad |= !(e <= 1e-6 * (K + 2));
                        same &= memcmp(&v, &one[t * ldo + j], 4) == 0;
                    }
                CHECK(!bad, "gemv rows %s K=%lld rows=%lld n=%lld wrong", level_name[lv],
                      (long long)K, (long long)rows, (long long)n);
                CHECK(same, "gemv rows %s K=%lld n=%lld: not the bits of one token at a time",
                      level_name[lv], (long long)K, (long long)n);
                bits_ok &= same;
            }
            free(W); free(x); free(ref); free(mag); free(one); free(o);
        }
        printf("gemv rows %s, n = 1..70: worst error / Σ|w·x| = %.3g (tolerance 1e-6·(K+2)); "
               "one token at a time: %s\n", level_name[lv], worst,
               bits_ok ? "bitwise equal" : "DIFFERS");
    }
}

/* ---- the packed-panel kernel ---------------------------------------------- */

static void test_gemv_packed(void) {
    if (!have_level(FFN_SIMD_AVX512)) {
        check_note("no AVX-512 (CPUID): the packed-panel gemv (AVX-512 only) not run");
        return;
    }
    /* K, N: K ends inside a 16-row tile and inside a 64-row block; N ends
     * inside a panel; 4133 spans three k blocks, the last ending inside a tile */
    static const int64_t shapes[][2] = {{37, 67}, {131, 129}, {1031, 70}, {4133, 65}};
    ffn_mm_engine *e = NULL;
    CHECK(ffn_mm_engine_create(&e) == FFN_OK, "engine: %s", ffn_last_error());
    if (!e) return;
    double worst = 0;
    int viewed = 0, bits_ok = 1;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t K = shapes[s][0], N = shapes[s][1], nmax = 70, ldx = K + 2;
        float *W = rnd(N * K, 1); /* B stored transposed (N, K) */
        ffn_mm_desc d = {.M = 64, .N = N, .K = K, .lda = K, .b_kind = FFN_MM_B_PLAIN_T, .ldb = K,
                         .ldc = N};
        ffn_mm_packed pk;
        ffn_packed_view v;
        if (ffn_mm_pack(e, &d, W, &pk) || !ffn_mm_packed_view(&pk, K, N, &v)) {
            printf("gemv packed K=%lld N=%lld: layout not viewable, skipped\n", (long long)K,
                   (long long)N);
            free(W);
            continue;
        }
        viewed++;
        float *x = rnd(nmax * ldx, 1);
        double *ref = malloc(nmax * N * sizeof *ref), *mag = malloc(nmax * N * sizeof *mag);
        oracle(ref, mag, W, x, ldx, nmax, N, K);
        int64_t ldo = N + 3;
        float *one = malloc(nmax * ldo * 4), *o = malloc(nmax * ldo * 4);
        for (int64_t t = 0; t < nmax; t++)
            ffn_gemv_packed_avx512(one + t * ldo, ldo, &v, x + t * ldx, ldx, 1, 0, N);
        for (int64_t n = 1; n <= nmax; n++)
            for (int pass = 0; pass < 2; pass++) {
                int64_t a = pass ? N / 3 : 0, b = pass ? N - 1 : N; /* inside panels */
                for (int64_t i = 0; i < n * ldo; i++) o[i] = 7.0f;
                ffn_gemv_packed_avx512(o, ldo, &v, x, ldx, n, a, b);
                int bad = 0, same = 1;
                for (int64_t t = 0; t < n; t++)
                    for (int64_t j = 0; j < ldo; j++) {
                        float got = o[t * ldo + j];
                        if (j >= b - a) { bad |= got != 7.0f; continue; } /* untouched */
                        double e2 = fabs(got - ref[t * N + a + j]) / (mag[t * N + a + j] + 1e-30);
                        if (e2 > worst) worst = e2;
                        bad |= !(e2 <= 1e-6 * (K + 2));
                        same &= memcmp(&got, &one[t * ldo + a + j], 4) == 0;
                    }
                CHECK(!bad, "gemv packed K=%lld N=%lld n=%lld columns [%lld, %lld) wrong",
                      (long long)K, (long long)N, (long long)n, (long long)a, (long long)b);
                CHECK(same, "gemv packed K=%lld n=%lld columns [%lld, %lld): not the bits of "
                      "one token and all columns at a time", (long long)K, (long long)n,
                      (long long)a, (long long)b);
                bits_ok &= same;
            }
        ffn_mm_packed_free(&pk);
        free(W); free(x); free(ref); free(mag); free(one); free(o);
    }
    ffn_mm_engine_free(e);
    printf("gemv packed, n = 1..70: %d shapes viewed, worst error / Σ|w·x| = %.3g (tolerance "
           "1e-6·(K+2)); one token at a time: %s\n", viewed, worst,
           bits_ok ? "bitwise equal" : "DIFFERS");
}

/* ---- the layer ------------------------------------------------------------- */

typedef struct weights {
    int64_t D, F;
    int gated, bias;
    float *gw, *gb, *uw, *ub, *dw, *db;
} weights;

static void weights_init(weights *w, int64_t D, int64_t F, int gated, int bias) {
    *w = (weights){.D = D, .F = F, .gated = gated, .bias = bias};
    w->uw = rnd(F * D, 0.3f), w->dw = rnd(D * F, 0.3f);
    if (gated) w->gw = rnd(F * D, 0.3f);
    if (bias) {
        w->ub = rnd(F, 0.3f), w->db = rnd(D, 0.3f);
        if (gated) w->gb = rnd(F, 0.3f);
    }
}
static void weights_zero_like(weights *g, const weights *w) {
    *g = *w;
    g->uw = calloc(w->F * w->D, 4), g->dw = calloc(w->D * w->F, 4);
    g->gw = w->gated ? calloc(w->F * w->D, 4) : NULL;
    g->ub = w->bias ? calloc(w->F, 4) : NULL, g->db = w->bias ? calloc(w->D, 4) : NULL;
    g->gb = w->bias && w->gated ? calloc(w->F, 4) : NULL;
}
static void weights_free(weights *w) {
    free(w->gw), free(w->gb), free(w->uw), free(w->ub), free(w->dw), free(w->db);
}
static ffn_layer_params params(const weights *w) {
    return (ffn_layer_params){w->gw, w->gb, w->uw, w->ub, w->dw, w->db};
}

/* y, dx and the gradients (into g, from zero) in double, rounded at the end */
static void reference(const weights *w, ffn_act act, int64_t n, const float *x, const float *dy,
                      float *y, float *dx, weights *g) {
    int64_t D = w->D, F = w->F;
    double *a = malloc(F * 8), *b = malloc(F * 8), *h = malloc(F * 8), *du = malloc(F * 8),
           *dg = malloc(F * 8);
    double *gu = calloc(F * D, 8), *gg = calloc(F * D, 8), *gd = calloc(D * F, 8),
           *gub = calloc(F, 8), *ggb = calloc(F, 8), *gdb = calloc(D, 8);
    for (int64_t t = 0; t < n; t++) {
        const float *xt = x + t * D, *dyt = dy + t * D;
        for (int64_t j = 0; j < F; j++) {
            double su = w->bias ? w->ub[j] : 0, sg = w->gated && w->bias ? w->gb[j] : 0;
            for (int64_t k = 0; k < D; k++) {
                su += (double)w->uw[j * D + k] * xt[k];
                if (w->gated) sg += (double)w->gw[j * D + k] * xt[k];
            }
            a[j] = su, b[j] = sg;
            h[j] = w->gated ? ffn_act_forward(act, (float)sg) * su : ffn_act_forward(act, (float)su);
        }
        for (int64_t i = 0; i < D; i++) {
            double s = w->bias ? w->db[i] : 0;
            for (int64_t j = 0; j < F; j++) s += (double)w->dw[i * F + j] * h[j];
            y[t * D + i] = (float)s;
        }
        for (int64_t j = 0; j < F; j++) {
            double dh = 0;
            for (int64_t i = 0; i < D; i++) dh += (double)dyt[i] * w->dw[i * F + j];
            if (w->gated) {
                dg[j] = dh * a[j] * ffn_act_grad(act, (float)b[j]);
                du[j] = dh * ffn_act_forward(act, (float)b[j]);
            } else {
                du[j] = dh * ffn_act_grad(act, (float)a[j]), dg[j] = 0;
            }
        }
        for (int64_t i = 0; i < D; i++) {
            for (int64_t j = 0; j < F; j++) gd[i * F + j] += dyt[i] * h[j];
            gdb[i] += dyt[i];
        }
        for (int64_t j = 0; j < F; j++) {
            for (int64_t k = 0; k < D; k++) {
                gu[j * D + k] += du[j] * xt[k];
                gg[j * D + k] += dg[j] * xt[k];
            }
            gub[j] += du[j], ggb[j] += dg[j];
        }
        for (int64_t k = 0; k < D; k++) {
            double s = 0;
            for (int64_t j = 0; j < F; j++)
                s += du[j] * w->uw[j * D + k] + (w->gated ? dg[j] * w->gw[j * D + k] : 0);
            dx[t * D + k] = (float)s;
        }
    }
    for (int64_t i = 0; i < F * D; i++) {
        g->uw[i] = (float)gu[i], g->dw[i] = (float)gd[i];
        if (g->gw) g->gw[i] = (float)gg[i];
    }
    for (int64_t j = 0; j < F && g->ub; j++) {
        g->ub[j] = (float)gub[j];
        if (g->gb) g->gb[j] = (float)ggb[j];
    }
    for (int64_t i = 0; i < D && g->db; i++) g->db[i] = (float)gdb[i];
    free(a), free(b), free(h), free(du), free(dg);
    free(gu), free(gg), free(gd), free(gub), free(ggb), free(gdb);
}

static double rel_err(const float *a, const float *b, size_t n) {
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= e)) e = d;
        if (fabs(b[i]) > m) m = fabs(b[i]);
    }
    return e / (m > 1 ? m : 1);
}

/* forward (y) and, with dy, backward (dx, g from zero) on one layer */
static ffn_status run(ffn_ctx *ctx, const weights *w, ffn_act act, ffn_save_mode save, int64_t n,
                      const float *x, const float *dy, float *y, float *dx, weights *g) {
    ffn_layer_config cfg = {.hidden_size = w->D, .intermediate_size = w->F, .act = act,
                            .type = w->gated ? FFN_MLP_GATED : FFN_MLP_DENSE, .bias = w->bias,
                            .save = save};
    ffn_layer *l = NULL;
    ffn_status st = ffn_layer_create(ctx, &cfg, &l);
    if (st) return st;
    ffn_layer_params p = params(w);
    st = ffn_layer_set_weights(l, &p);
    size_t ws_bytes = ffn_layer_workspace_size(l, n), saved_bytes = ffn_layer_saved_size(l, n);
    void *ws = malloc(ws_bytes ? ws_bytes : 1);
    float *saved = saved_bytes ? malloc(saved_bytes) : NULL;
    if (!st) st = ffn_layer_forward(l, y, x, n, saved, ws, ws_bytes);
    if (!st && dy) {
        ffn_layer_params gp = params(g);
        st = ffn_layer_backward(l, dx, &gp, dy, x, n, saved, ws, ws_bytes);
    }
    free(ws), free(saved);
    ffn_layer_free(l);
    return st;
}

static int same_grads(const weights *a, const weights *b) {
    int64_t FD = a->F * a->D;
    int same = !memcmp(a->uw, b->uw, FD * 4) && !memcmp(a->dw, b->dw, FD * 4);
    if (a->gw) same &= !memcmp(a->gw, b->gw, FD * 4);
    if (a->ub) same &= !memcmp(a->ub, b->ub, a->F * 4) && !memcmp(a->db, b->db, a->D * 4);
    if (a->gb) same &= !memcmp(a->gb, b->gb, a->F * 4);
    return same;
}

static double grads_err(const weights *a, const weights *r) {
    int64_t FD = a->F * a->D;
    double e = rel_err(a->uw, r->uw, FD), t;
    if ((t = rel_err(a->dw, r->dw, FD)) > e) e = t;
    if (a->gw && (t = rel_err(a->gw, r->gw, FD)) > e) e = t;
    if (a->ub && (t = rel_err(a->ub, r->ub, a->F)) > e) e = t;
    if (a->db && (t = rel_err(a->db, r->db, a->D)) > e) e = t;
    if (a->gb && (t = rel_err(a->gb, r->gb, a->F)) > e) e = t;
    return e;
}

static void test_layer(ffn_ctx *ctx, const char *level) {
    static const struct { int64_t D, F; int gated, bias; ffn_act act; } cases[] = {
        {37, 67, 1, 1, FFN_ACT_SILU}, {70, 131, 0, 0, FFN_ACT_GELU}};
    const int64_t nmax = 70;
    const double tol = 1e-5;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        weights w, g, ga, gr;
        int64_t D = cases[c].D, F = cases[c].F;
        weights_init(&w, D, F, cases[c].gated, cases[c].bias);
        int64_t split = ffn_stream_max_n(ffn_simd() == FFN_SIMD_AVX512);
        float *x = rnd(nmax * D, 1), *dy = rnd(nmax * D, 1);
        float *y = malloc(nmax * D * 4), *dx = malloc(nmax * D * 4), *ya = malloc(nmax * D * 4),
              *dxa = malloc(nmax * D * 4), *yr = malloc(nmax * D * 4), *dxr = malloc(nmax * D * 4),
              *row = malloc(D * 4);
        double worst = 0;
        int rows_same = 1;
        for (int64_t n = 1; n <= nmax; n++) {
            weights_zero_like(&g, &w), weights_zero_like(&ga, &w), weights_zero_like(&gr, &w);
            ffn_status s1 = run(ctx, &w, cases[c].act, FFN_SAVE_NONE, n, x, dy, y, dx, &g);
            ffn_status s2 = run(ctx, &w, cases[c].act, FFN_SAVE_ACTIVATIONS, n, x, dy, ya, dxa, &ga);
            CHECK(!s1 && !s2, "layer n=%lld: %s", (long long)n, ffn_last_error());
            reference(&w, cases[c].act, n, x, dy, yr, dxr, &gr);
            double ey = rel_err(y, yr, n * D), ed = rel_err(dx, dxr, n * D), eg = grads_err(&g, &gr);
            double e = ey > ed ? ey : ed;
            if (eg > e) e = eg;
            if (e > worst) worst = e;
            CHECK(e <= tol, "%s layer D=%lld F=%lld n=%lld: y %.3g, dx %.3g, grads %.3g (tol %g)",
                  level, (long long)D, (long long)F, (long long)n, ey, ed, eg, tol);
            CHECK(!memcmp(y, ya, n * D * 4) && !memcmp(dx, dxa, n * D * 4) && same_grads(&g, &ga),
                  "%s layer n=%lld: the save modes differ (recompute must reproduce forward)",
                  level, (long long)n);
            if (n <= split) { /* streaming: each row alone gives the same bits */
                int same = 1;
                for (int64_t t = 0; t < n && same; t++) {
                    run(ctx, &w, cases[c].act, FFN_SAVE_NONE, 1, x + t * D, NULL, row, NULL, NULL);
                    same = !memcmp(row, y + t * D, D * 4);
                }
                CHECK(same, "%s layer n=%lld: streaming forward differs from one row at a time",
                      level, (long long)n);
                rows_same &= same;
            }
            weights_free(&g), weights_free(&ga), weights_free(&gr);
        }
        printf("%s layer %s D=%lld F=%lld, n = 1..70 (streaming up to %lld): worst error %.3g "
               "(tolerance %g); streaming rows alone: %s\n", level,
               w.gated ? "gated" : "dense", (long long)D, (long long)F, (long long)split, worst,
               tol, rows_same ? "bitwise equal" : "DIFFER");
        free(x), free(dy), free(y), free(dx), free(ya), free(dxa), free(yr), free(dxr), free(row);
        weights_free(&w);
    }
}

/* A writing hook takes the unfused path (input projection, hook, epilogue,
 * hook, down projection); writing nothing it must give the usual path's
 * bits, on both sides of the split. */
static void noop_hook(void *user, int stage, float *buf, int64_t n, const ffn_hook_rows *rows) {
    (void)stage, (void)buf, (void)n, (void)rows;
    (*(int *)user)++;
}

static void test_writing_hook(ffn_ctx *ctx, const char *level) {
    const int64_t D = 67, F = 131, nmax = 70;
    weights w;
    weights_init(&w, D, F, 1, 1);
    ffn_layer_config cfg = {.hidden_size = D, .intermediate_size = F, .act = FFN_ACT_SILU,
                            .type = FFN_MLP_GATED, .bias = 1, .save = FFN_SAVE_NONE};
    ffn_layer *l = NULL;
    CHECK(!ffn_layer_create(ctx, &cfg, &l), "hook layer: %s", ffn_last_error());
    if (!l) return;
    ffn_layer_params p = params(&w);
    CHECK(!ffn_layer_set_weights(l, &p), "hook weights: %s", ffn_last_error());
    size_t ws_bytes = ffn_layer_workspace_size(l, nmax);
    void *ws = malloc(ws_bytes);
    float *x = rnd(nmax * D, 1), *y0 = malloc(nmax * D * 4), *y1 = malloc(nmax * D * 4);
    int calls = 0, same = 1;
    ffn_neuron_hook hook = {.fn = noop_hook, .user = &calls, .writes = 1};
    for (int64_t n = 1; n <= nmax; n++) {
        CHECK(!ffn_layer_forward(l, y0, x, n, NULL, ws, ws_bytes) &&
              !ffn_layer_forward_hooked(l, y1, x, n, NULL, ws, ws_bytes, &hook, NULL),
              "hook n=%lld: %s", (long long)n, ffn_last_error());
        int s = !memcmp(y0, y1, n * D * 4);
        CHECK(s, "%s n=%lld: a writing hook that writes nothing changed the result", level,
              (long long)n);
        same &= s;
    }
    CHECK(calls == 2 * nmax, "hook called %d times (expected %lld)", calls, (long long)(2 * nmax));
    printf("%s writing hook (no-op), n = 1..70: %s the usual path\n", level,
           same ? "bitwise equal to" : "DIFFERS from");
    free(ws), free(x), free(y0), free(y1);
    ffn_layer_free(l);
    weights_free(&w);
}

/* The streaming forward at 1 and 2 threads, on a shape large enough to run
 * in parallel, for every n it takes. */
static void test_threads(const char *level) {
    ffn_ctx *c1, *c2;
    ffn_ctx_create(1, &c1);
    ffn_ctx_create(2, &c2);
    const int64_t D = 515, F = 1043;
    weights w;
    weights_init(&w, D, F, 1, 0);
    int64_t split = ffn_stream_max_n(ffn_simd() == FFN_SIMD_AVX512);
    float *x = rnd(split * D, 1), *y1 = malloc(split * D * 4), *y2 = malloc(split * D * 4);
    int same = 1;
    for (int64_t n = 1; n <= split; n++) {
        CHECK(!run(c1, &w, FFN_ACT_SILU, FFN_SAVE_NONE, n, x, NULL, y1, NULL, NULL) &&
              !run(c2, &w, FFN_ACT_SILU, FFN_SAVE_NONE, n, x, NULL, y2, NULL, NULL),
              "threads n=%lld: %s", (long long)n, ffn_last_error());
        int s = !memcmp(y1, y2, n * D * 4);
        CHECK(s, "%s streaming forward n=%lld differs between 1 and 2 threads", level, (long long)n);
        same &= s;
    }
    printf("%s streaming forward D=%lld F=%lld, n = 1..%lld, 1 vs 2 threads: %s\n", level,
           (long long)D, (long long)F, (long long)split, same ? "bitwise equal" : "DIFFERS");
    free(x), free(y1), free(y2);
    weights_free(&w);
    ffn_ctx_free(c1);
    ffn_ctx_free(c2);
}

/* run this binary again with FFN_SIMD=level and "--layer-only"; 0 on success */
static int child(const char *self, const char *level) {
    pid_t pid = fork();
    if (pid == 0) {
        setenv("FFN_SIMD", level, 1);
        execl(self, self, "--layer-only", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int main(int argc, char **argv) {
    int layer_only = argc > 1 && !strcmp(argv[1], "--layer-only");
    const char *level = level_name[ffn_simd()];
    ffn_ctx *ctx = NULL;
    ffn_ctx_create(0, &ctx);
    if (!layer_only) {
        test_gemv_rows();
        test_gemv_packed();
    }
    test_layer(ctx, level);
    test_writing_hook(ctx, level);
    test_threads(level);
    ffn_ctx_free(ctx);
    if (!layer_only) {
        static const char *levels[] = {"avx2", "scalar"};
        for (int i = 0; i < 2; i++) {
            if (!have_level(i == 0 ? FFN_SIMD_AVX2 : FFN_SIMD_SCALAR)) continue;
            fflush(stdout);
            int rc = child(argv[0], levels[i]);
            CHECK(rc == 0, "the layer checks under FFN_SIMD=%s failed (exit %d)", levels[i], rc);
        }
    }
    return check_done(layer_only ? "test_gemv_multi (child)" : "test_gemv_multi");
}
