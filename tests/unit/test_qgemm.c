/* test_qgemm.c -- ffn_qgemm's kernels against the scalar oracle
 * ffn_qgemm_ref (ggml's decoders, double accumulation), for every weight
 * type ffn computes with × every SIMD level this CPU has (and FFN_SIMD
 * allows) × n = 1..70 (every split of the 8- and 4-token passes and of the
 * 64-token tile) × odd row counts (thread splits of 16-row blocks, and the
 * AVX2 32-block kernels' 4-row passes at n = 1 and 2-row passes at n = 2
 * with their 1-row tails: 5 = 4 + 1, 19 = 16 + 3, 37 = 2·16 + 4 + 1) × cols of
 * 1, 3, 5, 9 blocks of 32 (q4_1, q5_0, q5_1, iq4_nl also 2, 7 and 41) and
 * 1, 3 blocks of 256 (float types also cols
 * that are no multiple of a vector), with padded ldx/ldy, accumulate = 1,
 * and 1 vs 2 threads.
 *
 * Tolerances, per output y = Σ_i w_i x_i, with S = Σ |w_i x_i|:
 *   summation  (m + 8) · 2^-24 · (S + A): a float sum of products with at
 *              most m roundings in a chain (m = cols/16 + 16 for the vector
 *              levels: lane accumulators, pairs of them, the horizontal sum
 *              and the block scale; m = 256 + cols/256 for the scalar
 *              level's chunked sums).  The worst case, so it cannot flake.
 *   activation A: the int8 kernels (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl in
 *              blocks of 32; q2_K..q6_K
 *              and iq4_xs in blocks of 256) use x rounded to d·q with d = amax/127 of
 *              the block, |x − d·q| <= d/2, so A = Σ_i |w_i| · d_b(i)/2.
 *              The bf16 kernel with AVX512_BF16 uses x rounded to bf16
 *              (8 significant bits: unit roundoff u = 2^-8), so
 *              A = Σ_i |w_i x_i| · 2^-8.  Otherwise A = 0.
 *   Exactly representable activations (values k·2^e with |k| <= 127 and a
 *   ±127 in every 32-block, so the int8 and bf16 roundings are exact): A = 0
 *   for every kernel, only the summation order differs.
 * Beyond the tolerances: a token's output at n = 1 equals, bit for bit, the
 * same token's output in any larger call, and 1 and 2 threads agree bit for
 * bit; outputs outside the rows × n region (the ldy padding) stay intact.
 * The packed large-n path (ffn_qweight_pack_batch) and the prompt-size
 * panels (ffn_qgemm_panel, and the fp32 ones of CPUs without AVX512_BF16,
 * ffn_qgemm_panel_f32) have their own bounds (test_packed, test_panel,
 * test_panel_f32); the fused ffn_qgemm_glu equals ffn_qgemm + ffn_glu_fwd bit
 * for bit (test_glu). */
#include "check.h"
#include "kernels/kernels.h"
#include "kernels/qgemm.h"
#include "kernels/qgemm_impl.h"
#include "kernels/types.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static float frand(void) { return (float)((rnd() >> 40) * (1.0 / 8388608.0)) - 1.0f; }

static const char *level_name[] = {"scalar", "avx2", "avx512"};

enum { NMAX = 70 };

typedef struct tcase {
    ffn_ggml_type type;
    int64_t rows, cols;
} tcase;

/* The activation block a kernel of `level` quantizes to int8, 0 if none. */
static int act_block(ffn_ggml_type t, int level) {
    if (level == FFN_SIMD_SCALAR) return 0;
    if (t == FFN_GGML_TYPE_Q8_0 || t == FFN_GGML_TYPE_Q4_0 || t == FFN_GGML_TYPE_Q4_1 ||
        t == FFN_GGML_TYPE_Q5_0 || t == FFN_GGML_TYPE_Q5_1 || t == FFN_GGML_TYPE_IQ4_NL)
        return 32;
    if (ffn_ggml_block_size(t) == 256) return 256; /* the K formats, iq4_xs */
    return 0;
}
static int bf16_acts(ffn_ggml_type t, int level) {
    if (t != FFN_GGML_TYPE_BF16 || level != FFN_SIMD_AVX512) return 0;
    unsigned a = 0, b = 0, c = 0, d = 0;
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(1));
    return (a >> 5) & 1;
}

/* Activations of n tokens (row stride ldx): random with a different scale
 * per 32-block, or exactly representable (see the top of the file). */
static void make_x(float *x, int64_t n, int64_t cols, int64_t ldx, int exact) {
    for (int64_t t = 0; t < n; t++) {
        float *xt = x + t * ldx;
        for (int64_t k0 = 0; k0 < cols; k0 += 256) {
            int e = (int)(rnd() % 12) - 8;
            float s = ldexpf(1.0f, e);
            for (int64_t k = k0; k < cols && k < k0 + 256; k++) {
                if (exact) {
                    int q = (int)(rnd() % 255) - 127;
                    if (k % 32 == 7) q = rnd() & 1 ? 127 : -127;
                    xt[k] = (float)q * s;
                } else {
                    float blk = ldexpf(1.0f, (int)((k / 32) % 5) - 2);
                    xt[k] = frand() * blk * s * 64.0f;
                }
            }
        }
        for (int64_t k = cols; k < ldx; k++) xt[k] = NAN; /* padding: never read */
    }
}

/* tol[t·rows + r] for weights wf (rows, cols) dequantized and x. */
static void make_tol(double *tol, const float *wf, const float *x, int64_t ldx, int64_t n,
                     int64_t rows, int64_t cols, ffn_ggml_type type, int level, int exact) {
    int ab = exact ? 0 : act_block(type, level), bf = exact ? 0 : bf16_acts(type, level);
    double m = level == FFN_SIMD_SCALAR ? 256.0 + (double)cols / 256 : (double)cols / 16 + 16;
    for (int64_t t = 0; t < n; t++) {
        const float *xt = x + t * ldx;
        for (int64_t r = 0; r < rows; r++) {
            const float *w = wf + r * cols;
            double S = 0, A = 0;
            for (int64_t k = 0; k < cols; k++) S += fabs((double)w[k] * xt[k]);
            if (ab) {
                for (int64_t b = 0; b < cols / ab; b++) {
                    double amax = 0, sw = 0;
                    for (int j = 0; j < ab; j++) {
                        amax = fmax(amax, fabs(xt[b * ab + j]));
                        sw += fabs(w[b * ab + j]);
                    }
                    A += sw * (amax / 127.0) / 2.0 * (1 + 1e-6);
                }
            } else if (bf) {
                A = S * ldexp(1.0, -8);
            }
            tol[t * rows + r] = A + (m + 8) * ldexp(1.0, -24) * (S + A);
        }
    }
}

static void run_case(ffn_ctx *ctx1, ffn_ctx *ctx2, const tcase *tc) {
    const int64_t rows = tc->rows, cols = tc->cols, ldx = cols + 3, ldy = rows + 5;
    size_t rb;
    if (ffn_ggml_row_size(tc->type, cols, &rb)) {
        CHECK(0, "row size of %s × %lld", ffn_ggml_type_name(tc->type), (long long)cols);
        return;
    }
    float *wsrc = malloc((size_t)(rows * cols) * sizeof *wsrc);
    float *wf = malloc((size_t)(rows * cols) * sizeof *wf);
    uint8_t *wq = malloc((size_t)rows * rb);
    float *x = malloc((size_t)(NMAX * ldx) * sizeof *x);
    float *ref = malloc((size_t)(NMAX * ldy) * sizeof *ref);
    float *y = malloc((size_t)(NMAX * ldy) * sizeof *y);
    float *y0 = malloc((size_t)(NMAX * ldy) * sizeof *y0);
    float *yfull = malloc((size_t)(NMAX * ldy) * sizeof *yfull);
    double *tol = malloc((size_t)(NMAX * rows) * sizeof *tol);
    for (int64_t i = 0; i < rows * cols; i++) wsrc[i] = frand() * (1.0f + (float)(i % 7));
    for (int64_t r = 0; r < rows; r++) {
        (void)ffn_ggml_quantize_row(tc->type, wsrc + r * cols, wq + (size_t)r * rb, cols);
        (void)ffn_ggml_dequantize_row(tc->type, wq + (size_t)r * rb, wf + r * cols, cols);
    }
    ffn_qweight w;
    CHECK(ffn_qweight_init(&w, tc->type, rows, cols, wq) == FFN_OK, "%s", ffn_last_error());
    for (int exact = 0; exact < 2; exact++) {
        make_x(x, NMAX, cols, ldx, exact);
        ffn_qgemm_ref(&w, x, ldx, NMAX, ref, ldy, 0);
        for (int level = 0; level <= ffn_simd(); level++) {
            make_tol(tol, wf, x, ldx, NMAX, rows, cols, tc->type, level, exact);
            double worst = 0; /* max |err| / tol */
            int bad_n = -1, bitwise_ok = 1, pad_ok = 1;
            /* the reference for the bitwise check: all 70 tokens at once */
            CHECK(ffn_qgemm_at_level(ctx1, level, &w, x, ldx, NMAX, yfull, ldy, 0) == FFN_OK, "%s",
                  ffn_last_error());
            for (int64_t n = 1; n <= NMAX; n++) {
                for (int64_t i = 0; i < NMAX * ldy; i++) y[i] = -777.0f;
                ffn_status st = ffn_qgemm_at_level(n % 2 ? ctx1 : ctx2, level, &w, x, ldx, n, y, ldy, 0);
                CHECK(st == FFN_OK, "%s", ffn_last_error());
                for (int64_t t = 0; t < n; t++) {
                    for (int64_t r = 0; r < rows; r++) {
                        double e = fabs((double)y[t * ldy + r] - ref[t * ldy + r]);
                        double q = e / tol[t * rows + r];
                        if (!(q <= 1.0) && bad_n < 0) bad_n = (int)n;
                        if (q > worst || q != q) worst = q;
                        if (memcmp(&y[t * ldy + r], &yfull[t * ldy + r], 4)) bitwise_ok = 0;
                    }
                    for (int64_t r = rows; r < ldy; r++) pad_ok &= y[t * ldy + r] == -777.0f;
                }
                for (int64_t t = n; t < NMAX; t++) pad_ok &= y[t * ldy] == -777.0f;
            }
            CHECK(bad_n < 0, "%s %s rows %lld cols %lld %s: error/tol %.3g first over at n = %d",
                  ffn_ggml_type_name(tc->type), level_name[level], (long long)rows, (long long)cols,
                  exact ? "exact x" : "random x", worst, bad_n);
            CHECK(bitwise_ok, "%s %s cols %lld: a token's result depends on n or the threads",
                  ffn_ggml_type_name(tc->type), level_name[level], (long long)cols);
            CHECK(pad_ok, "%s %s: wrote outside the output", ffn_ggml_type_name(tc->type),
                  level_name[level]);
            /* accumulate = 1: y = y0 + x·Wᵀ */
            for (int64_t i = 0; i < NMAX * ldy; i++) y[i] = y0[i] = frand() * 10.0f;
            int64_t n = 1 + (int64_t)(rnd() % NMAX);
            CHECK(ffn_qgemm_at_level(ctx2, level, &w, x, ldx, n, y, ldy, 1) == FFN_OK, "%s",
                  ffn_last_error());
            int acc_ok = 1;
            for (int64_t t = 0; t < NMAX; t++)
                for (int64_t r = 0; r < ldy; r++) {
                    size_t i = (size_t)(t * ldy + r);
                    if (t >= n || r >= rows) {
                        acc_ok &= y[i] == y0[i];
                        continue;
                    }
                    double want = (double)y0[i] + ref[i];
                    acc_ok &= fabs(y[i] - want) <= tol[t * rows + r] + ldexp(1.0, -23) * (fabs(y0[i]) + fabs(ref[i]));
                }
            CHECK(acc_ok, "%s %s cols %lld: accumulate = 1 at n = %lld", ffn_ggml_type_name(tc->type),
                  level_name[level], (long long)cols, (long long)n);
            printf("  %-5s %-6s rows %3lld cols %4lld %-8s worst error/tol %.3f\n",
                   ffn_ggml_type_name(tc->type), level_name[level], (long long)rows, (long long)cols,
                   exact ? "exact" : "random", worst);
        }
    }
    /* the entry point agrees with its level */
    CHECK(ffn_qgemm(ctx2, &w, x, ldx, 5, y, ldy, 0) == FFN_OK, "%s", ffn_last_error());
    CHECK(ffn_qgemm_at_level(ctx1, ffn_simd(), &w, x, ldx, 5, yfull, ldy, 0) == FFN_OK, "%s",
          ffn_last_error());
    int same = 1;
    for (int64_t t = 0; t < 5; t++) same &= !memcmp(y + t * ldy, yfull + t * ldy, (size_t)rows * 4);
    CHECK(same, "ffn_qgemm differs from its own level");
    ffn_qweight_release(&w);
    free(wsrc); free(wf); free(wq); free(x); free(ref); free(y); free(y0); free(yfull); free(tol);
}

/* The packed large-n path (bf16 copy + oneDNN bf16 matmul) at the n
 * around its crossover and its 8- and 64-row runs.  Both x and W are
 * rounded to bf16 (u = 2^-8 each), so per product |Δ| <= |w x| ·
 * (2^-7 + 2^-16); oneDNN's summation order is its own: m = cols + 64. */
static void test_packed(ffn_ctx *ctx, ffn_ggml_type type, int64_t rows, int64_t cols) {
    size_t rb;
    (void)ffn_ggml_row_size(type, cols, &rb);
    const int64_t ldx = cols + 1, ldy = rows + 2, N = 150;
    float *src = malloc((size_t)cols * sizeof *src), *x = malloc((size_t)(N * ldx) * sizeof *x);
    float *wf = malloc((size_t)(rows * cols) * sizeof *wf);
    uint8_t *wq = malloc((size_t)rows * rb);
    float *ref = malloc((size_t)(N * ldy) * sizeof *ref), *y = malloc((size_t)(N * ldy) * sizeof *y);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < cols; c++) src[c] = frand();
        (void)ffn_ggml_quantize_row(type, src, wq + (size_t)r * rb, cols);
        (void)ffn_ggml_dequantize_row(type, wq + (size_t)r * rb, wf + r * cols, cols);
    }
    make_x(x, N, cols, ldx, 0);
    ffn_qweight w;
    CHECK(ffn_qweight_init(&w, type, rows, cols, wq) == FFN_OK, "%s", ffn_last_error());
    CHECK(ffn_qweight_pack_batch(&w) == FFN_OK, "%s", ffn_last_error());
    if (!w.packed) {
        /* only where CPUID (capped by FFN_SIMD) has no AVX-512 with AVX512_BF16 */
        CHECK(!check_cpu_has("avx512bf16") || ffn_qgemm_batch_min_n(type) == INT64_MAX,
              "%s: no packed path on a CPU with AVX512_BF16", ffn_ggml_type_name(type));
        printf("  packed path: not used on this CPU / level (%s)\n", ffn_ggml_type_name(type));
        ffn_qweight_release(&w);
        free(src); free(x); free(wf); free(wq); free(ref); free(y);
        return;
    }
    ffn_qgemm_ref(&w, x, ldx, N, ref, ldy, 0);
    const int64_t ns[] = {1, 7, 8, 9, 63, 64, 65, 72, 150};
    double worst = 0;
    int ok = 1;
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        int64_t n = ns[i];
        int acc = (int)(i % 2);
        for (int64_t k = 0; k < N * ldy; k++) y[k] = acc ? 1.0f : -5.0f;
        CHECK(ffn_qgemm(ctx, &w, x, ldx, n, y, ldy, acc) == FFN_OK, "%s", ffn_last_error());
        for (int64_t t = 0; t < N; t++)
            for (int64_t r = 0; r < ldy; r++) {
                float v = y[t * ldy + r];
                if (t >= n || r >= rows) {
                    ok &= v == (acc ? 1.0f : -5.0f);
                    continue;
                }
                double S = 0;
                for (int64_t c = 0; c < cols; c++) S += fabs((double)wf[r * cols + c] * x[t * ldx + c]);
                double A = S * (ldexp(1.0, -7) + ldexp(1.0, -16));
                double tol = A + ((double)cols + 64) * ldexp(1.0, -24) * (S + A) + (acc ? ldexp(1.0, -23) : 0);
                double e = fabs(v - ((acc ? 1.0 : 0.0) + ref[t * ldy + r]));
                if (e / tol > worst) worst = e / tol;
                ok &= e <= tol;
            }
    }
    CHECK(ok, "packed %s: worst error/tol %.3g (or wrote outside the output)",
          ffn_ggml_type_name(type), worst);
    printf("  packed %-5s rows %3lld cols %4lld  n 1..150 worst error/tol %.3f\n",
           ffn_ggml_type_name(type), (long long)rows, (long long)cols, worst);
    ffn_qweight_release(&w);
    CHECK(w.packed == NULL, "release frees the packed copy");
    free(src); free(x); free(wf); free(wq); free(ref); free(y);
}

/* The prompt-size path (ffn_qgemm_panel: the weight decoded into bf16
 * panels inside the call).  x and W are rounded to bf16 (u = 2^-8 each),
 * so per product |Δ| <= |w x| · (2^-7 + 2^-16); each lane adds cols/2
 * pairs in order, two roundings a pair: m = cols + 64.  Rows of 5, 19, 37
 * and 70 (panels of 32 cut short), odd cols for bf16/f16, n across the
 * 14-token micro-tile and the 512-token tile.  Beyond the bound: a
 * token's output is bitwise the same at any n and with 1 or 2 threads,
 * ffn_qgemm takes this path from ffn_qgemm_panel_min_n on (bitwise equal
 * there), and nothing outside rows × n is written. */
static void test_panel(ffn_ctx *ctx1, ffn_ctx *ctx2, ffn_ggml_type type, int64_t rows, int64_t cols) {
    {
        float x1[2] = {0, 0}, y1[1];
        uint8_t zero[8] = {0};
        ffn_qweight w1;
        CHECK(ffn_qweight_init(&w1, FFN_GGML_TYPE_BF16, 1, 2, zero) == FFN_OK, "%s",
              ffn_last_error());
        ffn_status st = ffn_qgemm_panel(ctx1, &w1, x1, 2, 1, y1, 1, 0);
        if (!check_cpu_has("avx512bf16")) { /* then refused, naming it */
            CHECK(st == FFN_ERR_UNSUPPORTED && strstr(ffn_last_error(), "AVX512_BF16") &&
                      strstr(ffn_last_error(), "bf16"),
                  "panels without AVX512_BF16: status %d, %s", (int)st, ffn_last_error());
            CHECK(ffn_qgemm_panel_min_n(type) == INT64_MAX, "%s: panels chosen without AVX512_BF16",
                  ffn_ggml_type_name(type));
            printf("  panel path: refused on this CPU (%s): %s\n", ffn_ggml_type_name(type),
                   ffn_last_error());
            return;
        }
        CHECK(st == FFN_OK, "panels on a CPU with AVX512_BF16: %s", ffn_last_error());
    }
    size_t rb;
    (void)ffn_ggml_row_size(type, cols, &rb);
    const int64_t ldx = cols + 3, ldy = rows + 2, N = 530;
    float *src = malloc((size_t)cols * sizeof *src), *x = malloc((size_t)(N * ldx) * sizeof *x);
    float *wf = malloc((size_t)(rows * cols) * sizeof *wf);
    uint8_t *wq = malloc((size_t)rows * rb);
    size_t ny = (size_t)(N * ldy);
    float *ref = malloc(ny * 4), *y = malloc(ny * 4), *yfull = malloc(ny * 4);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < cols; c++) src[c] = frand();
        (void)ffn_ggml_quantize_row(type, src, wq + (size_t)r * rb, cols);
        (void)ffn_ggml_dequantize_row(type, wq + (size_t)r * rb, wf + r * cols, cols);
    }
    make_x(x, N, cols, ldx, 0);
    ffn_qweight w;
    CHECK(ffn_qweight_init(&w, type, rows, cols, wq) == FFN_OK, "%s", ffn_last_error());
    ffn_qgemm_ref(&w, x, ldx, N, ref, ldy, 0);
    CHECK(ffn_qgemm_panel(ctx2, &w, x, ldx, N, yfull, ldy, 0) == FFN_OK, "%s", ffn_last_error());
    const int64_t ns[] = {1, 13, 14, 15, 29, 64, 511, 512, 513, 530};
    double worst = 0;
    int ok = 1, same = 1;
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        int64_t n = ns[i];
        int acc = (int)(i % 2);
        ffn_ctx *ctx = i % 3 ? ctx1 : ctx2;
        for (size_t k = 0; k < ny; k++) y[k] = acc ? 1.0f : -5.0f;
        CHECK(ffn_qgemm_panel(ctx, &w, x, ldx, n, y, ldy, acc) == FFN_OK, "%s", ffn_last_error());
        for (int64_t t = 0; t < N; t++)
            for (int64_t r = 0; r < ldy; r++) {
                float v = y[t * ldy + r];
                if (t >= n || r >= rows) {
                    ok &= v == (acc ? 1.0f : -5.0f);
                    continue;
                }
                if (!acc) same &= !memcmp(&v, &yfull[t * ldy + r], 4);
                double S = 0;
                for (int64_t c = 0; c < cols; c++) S += fabs((double)wf[r * cols + c] * x[t * ldx + c]);
                double A = S * (ldexp(1.0, -7) + ldexp(1.0, -16));
                double tol = A + ((double)cols + 64) * ldexp(1.0, -24) * (S + A) + (acc ? ldexp(1.0, -23) : 0);
                double e = fabs(v - ((acc ? 1.0 : 0.0) + ref[t * ldy + r]));
                if (e / tol > worst) worst = e / tol;
                ok &= e <= tol;
            }
    }
    CHECK(ok, "panel %s rows %lld cols %lld: worst error/tol %.3g (or wrote outside the output)",
          ffn_ggml_type_name(type), (long long)rows, (long long)cols, worst);
    CHECK(same, "panel %s: a token's output depends on n or the thread count", ffn_ggml_type_name(type));
    /* the entry point: the panels from the crossover on, the row kernels
     * below it (f16 stays on the row kernels at every n) */
    int64_t mn = ffn_qgemm_panel_min_n(type);
    if (type == FFN_GGML_TYPE_F16) {
        CHECK(mn == INT64_MAX, "f16 has a panel crossover (%lld)", (long long)mn);
        mn = 65;
    } else {
        CHECK(mn >= 2 && mn <= 64, "panel crossover %lld", (long long)mn);
    }
    if (type != FFN_GGML_TYPE_F16) {
        CHECK(ffn_qgemm(ctx2, &w, x, ldx, mn, y, ldy, 0) == FFN_OK, "%s", ffn_last_error());
        int entry = 1;
        for (int64_t t = 0; t < mn; t++) entry &= !memcmp(y + t * ldy, yfull + t * ldy, (size_t)rows * 4);
        CHECK(entry, "ffn_qgemm at n = %lld is not the panel path", (long long)mn);
    }
    CHECK(ffn_qgemm(ctx2, &w, x, ldx, mn - 1, y, ldy, 0) == FFN_OK, "%s", ffn_last_error());
    float *yrow = malloc((size_t)(mn * ldy) * 4);
    CHECK(ffn_qgemm_at_level(ctx2, ffn_simd(), &w, x, ldx, mn - 1, yrow, ldy, 0) == FFN_OK, "%s",
          ffn_last_error());
    int below = 1;
    for (int64_t t = 0; t < mn - 1; t++) below &= !memcmp(y + t * ldy, yrow + t * ldy, (size_t)rows * 4);
    CHECK(below, "ffn_qgemm below the crossover is not the row kernels");
    printf("  panel  %-5s rows %3lld cols %4lld  n 1..530 worst error/tol %.3f\n",
           ffn_ggml_type_name(type), (long long)rows, (long long)cols, worst);
    free(yrow);
    free(src); free(x); free(wf); free(wq); free(ref); free(y); free(yfull);
}

/* The AVX2 activation quantizer (ffn_qg_quant_block_avx2) against the rule
 * written out here (d = amax/127, q = nearest-even of x · (1/d), clamped
 * to ±127), bit for bit: random blocks of 32 and 256 at scales 2^-20..2^20,
 * blocks with exact ties (k + 1/2 after the scaling), all zeros, one
 * nonzero, and −0. */
static void test_quant_block(void) {
    if (!check_cpu_has("avx2") || ffn_simd() < FFN_SIMD_AVX2) return;
    float x[256];
    int8_t q[256], want[256];
    int ok = 1, cases = 0;
    for (int it = 0; it < 3000; it++) {
        int len = it % 3 ? 32 : 256, kind = it % 7;
        float sc = ldexpf(1.0f, (int)(rnd() % 41) - 20);
        for (int j = 0; j < len; j++) {
            if (kind == 0) x[j] = 0.0f;
            else if (kind == 1) x[j] = j == (int)(rnd() % (unsigned)len) ? sc : -0.0f;
            else if (kind == 2) x[j] = j == 0 ? 127.0f : (float)((int)(rnd() % 253) - 126) * 0.5f; /* ties */
            else x[j] = frand() * sc;
        }
        float amax = 0.0f;
        for (int j = 0; j < len; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int j = 0; j < len; j++) {
            float v = nearbyintf(x[j] * id);
            want[j] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
        float got = ffn_qg_quant_block_avx2(x, len, q);
        ok &= !memcmp(&got, &d, 4) && !memcmp(q, want, (size_t)len);
        cases++;
    }
    CHECK(ok, "ffn_qg_quant_block_avx2 differs from the rule");
    printf("  quant block avx2: %d blocks bit for bit the rule\n", cases);
}

/* The prompt-size path of CPUs without AVX512_BF16 (ffn_qgemm_panel_f32:
 * the weight decoded by the type table's decoder into fp32 panels inside
 * the call, x as it is, FMA).  W is the decoder's (the oracle's) fp32 and
 * x is not rounded, so only the summation differs: per output one FMA
 * chain per 256 columns and the blocks' sums added in order,
 * m = cols + cols/256 + 2 roundings at most (+1 accumulating).  Every n
 * from 1 to 70 (every split of the 6-token micro-tile) and across the
 * 256-token tile, rows cut short of the 16-row panel, cols short of and
 * across the 256-column block, every type the table computes with and
 * decodes (so a format added to the table is tested here with no new
 * code).  With x = I the outputs are the decoded weights, equal to the
 * table decoder's (the vector decoders' claim).  Beyond the bound: a token's output is bitwise the same at any n
 * and with 1 or 2 threads, ffn_qgemm takes this path from
 * ffn_qgemm_panel_f32_min_n on (bitwise) and the row kernels below it,
 * and nothing outside rows × n is written. */
static void test_panel_f32(ffn_ctx *ctx1, ffn_ctx *ctx2, ffn_ggml_type type, int64_t rows, int64_t cols) {
    if (ffn_simd() < FFN_SIMD_AVX2) {
        float x1[2] = {0, 0}, y1[1];
        uint8_t zero[8] = {0};
        ffn_qweight w1;
        CHECK(ffn_qweight_init(&w1, FFN_GGML_TYPE_BF16, 1, 2, zero) == FFN_OK, "%s", ffn_last_error());
        ffn_status st = ffn_qgemm_panel_f32(ctx1, &w1, x1, 2, 1, y1, 1, 0);
        CHECK(st == FFN_ERR_UNSUPPORTED && strstr(ffn_last_error(), "AVX2"),
              "fp32 panels below AVX2: status %d, %s", (int)st, ffn_last_error());
        CHECK(ffn_qgemm_panel_f32_min_n(type) == INT64_MAX, "%s: fp32 panels chosen below AVX2",
              ffn_ggml_type_name(type));
        return;
    }
    size_t rb;
    (void)ffn_ggml_row_size(type, cols, &rb);
    const int64_t ldx = cols + 3, ldy = rows + 2, N = 300;
    float *src = malloc((size_t)cols * sizeof *src), *x = malloc((size_t)(N * ldx) * sizeof *x);
    float *wf = malloc((size_t)(rows * cols) * sizeof *wf);
    uint8_t *wq = malloc((size_t)rows * rb);
    size_t ny = (size_t)(N * ldy);
    float *ref = malloc(ny * 4), *y = malloc(ny * 4), *yfull = malloc(ny * 4);
    double *S = malloc((size_t)(N * rows) * sizeof *S);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < cols; c++) src[c] = frand();
        (void)ffn_ggml_quantize_row(type, src, wq + (size_t)r * rb, cols);
        (void)ffn_ggml_dequantize_row(type, wq + (size_t)r * rb, wf + r * cols, cols);
    }
    make_x(x, N, cols, ldx, 0);
    for (int64_t t = 0; t < N; t++)
        for (int64_t r = 0; r < rows; r++) {
            double s = 0;
            for (int64_t c = 0; c < cols; c++) s += fabs((double)wf[r * cols + c] * x[t * ldx + c]);
            S[t * rows + r] = s;
        }
    ffn_qweight w;
    CHECK(ffn_qweight_init(&w, type, rows, cols, wq) == FFN_OK, "%s", ffn_last_error());
    ffn_qgemm_ref(&w, x, ldx, N, ref, ldy, 0);
    CHECK(ffn_qgemm_panel_f32(ctx2, &w, x, ldx, N, yfull, ldy, 0) == FFN_OK, "%s", ffn_last_error());
    double worst = 0;
    int ok = 1, same = 1;
    for (int64_t n = 1; n <= N; n = n < 70 ? n + 1 : n == 70 ? 255 : n == 257 ? N : n + 1) {
        int acc = (int)(n % 2);
        ffn_ctx *ctx = n % 3 ? ctx1 : ctx2;
        for (size_t k = 0; k < ny; k++) y[k] = acc ? 1.0f : -5.0f;
        CHECK(ffn_qgemm_panel_f32(ctx, &w, x, ldx, n, y, ldy, acc) == FFN_OK, "%s", ffn_last_error());
        for (int64_t t = 0; t < N; t++)
            for (int64_t r = 0; r < ldy; r++) {
                float v = y[t * ldy + r];
                if (t >= n || r >= rows) {
                    ok &= v == (acc ? 1.0f : -5.0f);
                    continue;
                }
                if (!acc) same &= !memcmp(&v, &yfull[t * ldy + r], 4);
                double m = (double)cols + (double)(cols / 256) + 3;
                double tol = m * ldexp(1.0, -24) * S[t * rows + r] * 1.01 + (acc ? ldexp(1.0, -23) : 0) + 1e-30;
                double e = fabs(v - ((acc ? 1.0 : 0.0) + ref[t * ldy + r]));
                if (e / tol > worst) worst = e / tol;
                ok &= e <= tol;
            }
    }
    CHECK(ok, "fp32 panel %s rows %lld cols %lld: worst error/tol %.3g (or wrote outside the output)",
          ffn_ggml_type_name(type), (long long)rows, (long long)cols, worst);
    CHECK(same, "fp32 panel %s: a token's output depends on n or the thread count", ffn_ggml_type_name(type));
    /* the decode itself, exactly: x = I (cols tokens) gives y[t][r] = W[r][t],
     * which must equal the table decoder's value (== : a −0 sums to +0) */
    {
        float *xi = calloc((size_t)(cols * cols), sizeof *xi), *yi = malloc((size_t)(cols * rows) * 4);
        for (int64_t c = 0; c < cols; c++) xi[c * cols + c] = 1.0f;
        CHECK(ffn_qgemm_panel_f32(ctx2, &w, xi, cols, cols, yi, rows, 0) == FFN_OK, "%s", ffn_last_error());
        int exact = 1;
        for (int64_t t = 0; t < cols; t++)
            for (int64_t r = 0; r < rows; r++) exact &= yi[t * rows + r] == wf[r * cols + t];
        CHECK(exact, "fp32 panel %s: a decoded weight differs from the table decoder's", ffn_ggml_type_name(type));
        free(xi); free(yi);
    }
    /* the entry point: these panels from their crossover on where the bf16
     * ones do not run, the row kernels below it */
    int64_t mn = ffn_qgemm_panel_f32_min_n(type);
    if (check_cpu_has("avx512bf16") && ffn_simd() >= FFN_SIMD_AVX512) {
        CHECK(mn == INT64_MAX, "%s: fp32 panels chosen where the bf16 ones run", ffn_ggml_type_name(type));
    } else if (mn != INT64_MAX && mn < ffn_qgemm_int8_min_n(type)) { /* else the int8 path comes first */
        CHECK(mn >= 2 && mn <= N, "fp32 panel crossover %lld", (long long)mn);
        CHECK(ffn_qgemm(ctx2, &w, x, ldx, mn, y, ldy, 0) == FFN_OK, "%s", ffn_last_error());
        int entry = 1;
        for (int64_t t = 0; t < mn; t++) entry &= !memcmp(y + t * ldy, yfull + t * ldy, (size_t)rows * 4);
        CHECK(entry, "ffn_qgemm at n = %lld is not the fp32 panel path", (long long)mn);
        CHECK(ffn_qgemm(ctx2, &w, x, ldx, mn - 1, y, ldy, 0) == FFN_OK, "%s", ffn_last_error());
        float *yrow = malloc((size_t)(mn * ldy) * 4);
        CHECK(ffn_qgemm_at_level(ctx2, ffn_simd(), &w, x, ldx, mn - 1, yrow, ldy, 0) == FFN_OK, "%s",
              ffn_last_error());
        int below = 1;
        for (int64_t t = 0; t < mn - 1; t++) below &= !memcmp(y + t * ldy, yrow + t * ldy, (size_t)rows * 4);
        CHECK(below, "ffn_qgemm below the fp32 panel crossover is not the row kernels");
        free(yrow);
    }
    printf("  fp32 panel %-6s rows %3lld cols %4lld  n 1..70, 255..257, 300  worst error/tol %.3f  crossover %lld\n",
           ffn_ggml_type_name(type), (long long)rows, (long long)cols, worst,
           mn == INT64_MAX ? -1LL : (long long)mn);
    free(src); free(x); free(wf); free(wq); free(ref); free(y); free(yfull); free(S);
}

/* ffn_qgemm_glu: g and u bitwise equal to ffn_qgemm of each weight (the
 * same kernels), h = act(g) ⊙ u equal to ffn_glu_fwd on them, for gate and
 * up of the same type and of different types, n across the tile. */
static void test_glu(ffn_ctx *ctx, ffn_ggml_type tg, ffn_ggml_type tu, int64_t rows, int64_t cols) {
    size_t rbg, rbu;
    (void)ffn_ggml_row_size(tg, cols, &rbg);
    (void)ffn_ggml_row_size(tu, cols, &rbu);
    const int64_t N = 70, ldx = cols + 2, ldh = rows + 3;
    float *src = malloc((size_t)cols * sizeof *src), *x = malloc((size_t)(N * ldx) * sizeof *x);
    uint8_t *wg = malloc((size_t)rows * rbg), *wu = malloc((size_t)rows * rbu);
    size_t ny = (size_t)(N * ldh);
    float *h = malloc(ny * 4), *g = malloc(ny * 4), *u = malloc(ny * 4);
    float *g2 = malloc(ny * 4), *u2 = malloc(ny * 4), *h2 = malloc(ny * 4);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < cols; c++) src[c] = frand();
        (void)ffn_ggml_quantize_row(tg, src, wg + (size_t)r * rbg, cols);
        for (int64_t c = 0; c < cols; c++) src[c] = frand();
        (void)ffn_ggml_quantize_row(tu, src, wu + (size_t)r * rbu, cols);
    }
    make_x(x, N, cols, ldx, 0);
    ffn_qweight G, U;
    CHECK(ffn_qweight_init(&G, tg, rows, cols, wg) == FFN_OK && ffn_qweight_init(&U, tu, rows, cols, wu) == FFN_OK,
          "%s", ffn_last_error());
    int ok = 1;
    const int64_t ns[] = {1, 3, 8, 9, 33, 70};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        int64_t n = ns[i];
        for (size_t k = 0; k < ny; k++) h[k] = g[k] = u[k] = h2[k] = -3.0f;
        CHECK(ffn_qgemm_glu(ctx, FFN_ACT_SILU, &G, &U, x, ldx, n, h, ldh, g, u) == FFN_OK, "%s",
              ffn_last_error());
        CHECK(ffn_qgemm(ctx, &G, x, ldx, n, g2, ldh, 0) == FFN_OK, "%s", ffn_last_error());
        CHECK(ffn_qgemm(ctx, &U, x, ldx, n, u2, ldh, 0) == FFN_OK, "%s", ffn_last_error());
        for (int64_t t = 0; t < n; t++) ffn_glu_fwd(FFN_ACT_SILU, h2 + t * ldh, g2 + t * ldh, u2 + t * ldh, rows);
        for (int64_t t = 0; t < N; t++)
            for (int64_t r = 0; r < ldh; r++) {
                size_t k = (size_t)(t * ldh + r);
                if (t >= n || r >= rows) {
                    ok &= h[k] == -3.0f && g[k] == -3.0f && u[k] == -3.0f;
                    continue;
                }
                ok &= !memcmp(&g[k], &g2[k], 4) && !memcmp(&u[k], &u2[k], 4) && !memcmp(&h[k], &h2[k], 4);
            }
    }
    CHECK(ok, "ffn_qgemm_glu %s/%s differs from ffn_qgemm + ffn_glu_fwd (or wrote outside)",
          ffn_ggml_type_name(tg), ffn_ggml_type_name(tu));
    /* without the pre-activations, h alone */
    CHECK(ffn_qgemm_glu(ctx, FFN_ACT_GELU, &G, &U, x, ldx, 5, h, ldh, NULL, NULL) == FFN_OK, "%s",
          ffn_last_error());
    ffn_qweight bad = U;
    bad.rows = rows - 1;
    CHECK(ffn_qgemm_glu(ctx, FFN_ACT_SILU, &G, &bad, x, ldx, 1, h, ldh, NULL, NULL) == FFN_ERR_SHAPE,
          "gate and up of different shapes");
    free(src); free(x); free(wg); free(wu); free(h); free(g); free(u); free(g2); free(u2); free(h2);
}

/* The integer formats with an AVX-512 VNNI kernel of their own run it on
 * a CPU with VNNI (not the AVX2 one the level falls back to without). */
static void test_levels(void) {
    const ffn_ggml_type own[] = {FFN_GGML_TYPE_Q8_0, FFN_GGML_TYPE_Q4_0, FFN_GGML_TYPE_Q4_1,
                                 FFN_GGML_TYPE_Q5_0, FFN_GGML_TYPE_Q5_1, FFN_GGML_TYPE_IQ4_NL,
                                 FFN_GGML_TYPE_Q4_K, FFN_GGML_TYPE_Q6_K};
    if (!check_cpu_has("avx512vnni")) return;
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
        int act = -1;
        qg_rows_fn k512 = ffn_type_rows(own[i], FFN_SIMD_AVX512, &act);
        CHECK(k512 && k512 != ffn_type_rows(own[i], FFN_SIMD_AVX2, NULL),
              "%s: the AVX-512 level runs the AVX2 kernel on a CPU with VNNI", ffn_ggml_type_name(own[i]));
    }
}

static void test_errors(ffn_ctx *ctx) {
    ffn_qweight w;
    uint8_t buf[34 * 4] = {0};
    CHECK(ffn_qweight_init(&w, FFN_GGML_TYPE_Q8_0, 2, 48, buf) != FFN_OK, "cols 48 is no q8_0 row");
    CHECK(ffn_qweight_init(&w, FFN_GGML_TYPE_IQ2_XXS, 1, 256, buf) == FFN_ERR_UNSUPPORTED, "iq2_xxs");
    CHECK(ffn_qweight_init(&w, FFN_GGML_TYPE_Q8_0, 2, 64, buf) == FFN_OK, "%s", ffn_last_error());
    float x[64] = {0}, y[2];
    CHECK(ffn_qgemm(ctx, &w, NULL, 64, 1, y, 2, 0) == FFN_ERR_INVALID_ARG, "NULL x");
    CHECK(ffn_qgemm(ctx, &w, x, 10, 2, y, 2, 0) == FFN_ERR_INVALID_ARG, "ldx below cols");
    CHECK(strstr(ffn_last_error(), "ldx") != NULL, "message names ldx: %s", ffn_last_error());
    if (ffn_simd() > FFN_SIMD_SCALAR) {
        size_t need = ffn_qgemm_workspace_size(&w, 1);
        CHECK(need > 0, "q8_0 needs activation workspace");
        static unsigned char ws[4096] __attribute__((aligned(64)));
        CHECK(need <= sizeof ws, "workspace %zu", need);
        CHECK(ffn_qgemm_ws(ctx, &w, x, 64, 1, y, 2, 0, ws, need - 1) == FFN_ERR_WORKSPACE, "small ws");
        CHECK(ffn_qgemm_ws(ctx, &w, x, 64, 1, y, 2, 0, ws, need) == FFN_OK, "%s", ffn_last_error());
        CHECK(y[0] == 0.0f && y[1] == 0.0f, "zero weights give zero");
        CHECK(ffn_qgemm_workspace_size(&w, 1000) == ffn_qgemm_workspace_size(&w, 64),
              "workspace stops growing at the tile");
    }
    CHECK(ffn_qgemm_at_level(ctx, 3, &w, x, 64, 1, y, 2, 0) == FFN_ERR_UNSUPPORTED, "level 3");
}

int main(void) {
    ffn_ctx *ctx1 = NULL, *ctx2 = NULL;
    if (ffn_ctx_create(1, &ctx1) || ffn_ctx_create(2, &ctx2)) return 1;
    printf("simd level: %s\n", ffn_simd_level());
    const tcase cases[] = {
        {FFN_GGML_TYPE_Q8_0, 37, 32},  {FFN_GGML_TYPE_Q8_0, 37, 96},  {FFN_GGML_TYPE_Q8_0, 5, 160},
        {FFN_GGML_TYPE_Q8_0, 19, 288}, {FFN_GGML_TYPE_Q4_0, 37, 32},  {FFN_GGML_TYPE_Q4_0, 37, 96},
        {FFN_GGML_TYPE_Q4_0, 5, 160},  {FFN_GGML_TYPE_Q4_0, 19, 288}, {FFN_GGML_TYPE_Q4_K, 37, 256},
        {FFN_GGML_TYPE_Q4_K, 19, 768}, {FFN_GGML_TYPE_Q6_K, 37, 256}, {FFN_GGML_TYPE_Q6_K, 19, 768},
        {FFN_GGML_TYPE_BF16, 37, 37},  {FFN_GGML_TYPE_BF16, 19, 96},  {FFN_GGML_TYPE_BF16, 5, 777},
        {FFN_GGML_TYPE_F16, 37, 37},   {FFN_GGML_TYPE_F16, 19, 96},   {FFN_GGML_TYPE_F16, 5, 777},
        {FFN_GGML_TYPE_F32, 37, 37},   {FFN_GGML_TYPE_F32, 19, 200},
        /* the other 32-element formats (qgemm_legacy_avx2.c; at AVX-512 in
         * qgemm_avx512.c's groups of four blocks): every width above and
         * each tail of a group (1, 2, 3 blocks), 41 blocks across the
         * 1024-column chunk of the multi-token passes */
#define LEGACY(t) {t, 37, 32}, {t, 21, 64}, {t, 37, 96}, {t, 5, 160}, {t, 3, 224}, {t, 19, 288}, {t, 7, 1312}
        LEGACY(FFN_GGML_TYPE_Q4_1), LEGACY(FFN_GGML_TYPE_Q5_0), LEGACY(FFN_GGML_TYPE_Q5_1),
        LEGACY(FFN_GGML_TYPE_IQ4_NL),
#undef LEGACY
        /* the 256-element formats (qgemm_k_avx2.c) */
        {FFN_GGML_TYPE_Q2_K, 37, 256}, {FFN_GGML_TYPE_Q2_K, 19, 768}, {FFN_GGML_TYPE_Q3_K, 37, 256},
        {FFN_GGML_TYPE_Q3_K, 19, 768}, {FFN_GGML_TYPE_Q5_K, 37, 256}, {FFN_GGML_TYPE_Q5_K, 19, 768},
        {FFN_GGML_TYPE_IQ4_XS, 37, 256}, {FFN_GGML_TYPE_IQ4_XS, 19, 768},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(ctx1, ctx2, &cases[i]);
    test_packed(ctx2, FFN_GGML_TYPE_Q4_0, 37, 288);
    test_packed(ctx2, FFN_GGML_TYPE_Q8_0, 19, 96);
    test_packed(ctx1, FFN_GGML_TYPE_Q4_K, 21, 512);
    test_packed(ctx2, FFN_GGML_TYPE_Q6_K, 5, 256);
    test_packed(ctx1, FFN_GGML_TYPE_BF16, 33, 77);
    test_packed(ctx2, FFN_GGML_TYPE_F16, 17, 130);
    test_packed(ctx1, FFN_GGML_TYPE_Q5_K, 21, 512);
    test_packed(ctx2, FFN_GGML_TYPE_IQ4_XS, 5, 256);
    test_panel(ctx1, ctx2, FFN_GGML_TYPE_Q4_0, 37, 288);
    test_panel(ctx1, ctx2, FFN_GGML_TYPE_Q8_0, 70, 96);
    test_panel(ctx1, ctx2, FFN_GGML_TYPE_Q4_K, 19, 512);
    test_panel(ctx1, ctx2, FFN_GGML_TYPE_Q6_K, 5, 256);
    test_panel(ctx1, ctx2, FFN_GGML_TYPE_BF16, 33, 77);
    test_panel(ctx1, ctx2, FFN_GGML_TYPE_F16, 17, 777);
    test_panel(ctx1, ctx2, FFN_GGML_TYPE_Q2_K, 19, 512);
    test_panel(ctx1, ctx2, FFN_GGML_TYPE_Q3_K, 5, 256);
    test_panel(ctx1, ctx2, FFN_GGML_TYPE_Q5_K, 37, 512);
    test_panel(ctx1, ctx2, FFN_GGML_TYPE_IQ4_XS, 19, 256);
    /* every type the table computes with and decodes, rows cut short of
     * the 16-row panel and cols short of, at and across 256 */
    for (int t = 0; t < FFN_GGML_TYPE_COUNT; t++) {
        ffn_ggml_type ty = (ffn_ggml_type)t;
        if (!(ffn_ggml_type_caps(ty) & FFN_GGML_COMPUTES) || !ffn_ggml_can_dequantize(ty) ||
            !ffn_ggml_can_quantize(ty))
            continue;
        int64_t b = ffn_ggml_block_size(ty);
        if (b == 1) {
            test_panel_f32(ctx1, ctx2, ty, 19, 301);
            test_panel_f32(ctx1, ctx2, ty, 5, 8);
        } else if (b < 256) {
            test_panel_f32(ctx1, ctx2, ty, 37, 9 * b);
            test_panel_f32(ctx1, ctx2, ty, 16, 3 * b);
        } else {
            test_panel_f32(ctx1, ctx2, ty, 19, 3 * b);
            test_panel_f32(ctx1, ctx2, ty, 33, b);
        }
    }
    test_glu(ctx2, FFN_GGML_TYPE_Q4_0, FFN_GGML_TYPE_Q4_0, 37, 160);
    test_glu(ctx1, FFN_GGML_TYPE_Q4_K, FFN_GGML_TYPE_Q6_K, 21, 512);
    test_glu(ctx2, FFN_GGML_TYPE_BF16, FFN_GGML_TYPE_F16, 19, 77);
    test_glu(ctx1, FFN_GGML_TYPE_Q2_K, FFN_GGML_TYPE_IQ4_XS, 21, 512);
    test_glu(ctx2, FFN_GGML_TYPE_Q3_K, FFN_GGML_TYPE_Q5_K, 19, 256);
    test_glu(ctx1, FFN_GGML_TYPE_Q5_0, FFN_GGML_TYPE_Q4_1, 21, 160);
    test_glu(ctx2, FFN_GGML_TYPE_IQ4_NL, FFN_GGML_TYPE_IQ4_NL, 19, 288);
    test_glu(ctx1, FFN_GGML_TYPE_Q5_1, FFN_GGML_TYPE_Q8_0, 5, 96);
    test_levels();
    test_quant_block();
    test_errors(ctx1);
    if (check_cpu_has("avx512bf16"))
        check_note("AVX512_BF16 present: the packed and panel paths tested");
    else
        check_note("no AVX512_BF16 (CPUID, FFN_SIMD=%s): the packed and panel paths' refusal "
                   "tested, the row kernels at %s and below", getenv("FFN_SIMD") ? getenv("FFN_SIMD") : "unset",
                   ffn_simd_level());
    ffn_ctx_free(ctx1);
    ffn_ctx_free(ctx2);
    return check_done("test_qgemm");
}
