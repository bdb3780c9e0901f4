/* test_qgemm_int8.c -- the int8 prompt path of AVX2 machines
 * (ffn_qgemm_int8, src/kernels/qgemm_int8_avx2.c) against a scalar oracle
 * of what it promises: the weight (ggml's decoder) dotted, in double, with
 * the activations quantized to int8 by the row kernels' rule (d = amax/127
 * per block of 32 for the 32-element formats, of 256 for the super-block
 * ones; q = x · (1/d) rounded to nearest even, clamped to ±127).
 *
 * Tolerance per output: the integer dot products are exact, what rounds is
 * the float epilogue (per block: the convert, the product with the token
 * scale, one or two FMAs with the weight's scale and offset; per 1024
 * columns a horizontal sum; the chunks added), of terms that can cancel:
 * a code times its scale and the block's offset each at most |w| + 2·max
 * |w| of the block.  So tol = (cols/8 + 32) · 2^-24 · Σ_k (|w_k| + 2·M_b(k))
 * · |xq_k|, with M_b the largest |w| of k's block: generous for the
 * summation, and still some 10^4 below what one wrong code, scale or
 * activation would give.  Every n from 1 to 70 (every split of the
 * 3-token micro-tile), 130 and 512, rows cut short of the 4-row
 * micro-tile and the 32-row panel, cols short of, across and past the
 * 128- or 256-column group and the 2048-column chunk (a partial last
 * group after it for the 32-element formats), padded ldx and ldy,
 * accumulate on odd n.
 * Beyond the bound: a token's output is bitwise the same at any n and
 * with 1 or 2 threads, nothing outside rows × n is written, the row
 * kernels (the same real number) agree within the bound, with exactly
 * representable activations the result is the plain product (to the
 * bound), and ffn_qgemm takes this path from ffn_qgemm_int8_min_n on
 * (bitwise) and not below it.  Below AVX2 the path is refused. */
#include "check.h"
#include "kernels/kernels.h"
#include "kernels/qgemm.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static float frand(void) { return (float)((rnd() >> 40) * (1.0 / 8388608.0)) - 1.0f; }

enum { NMAX = 512 };

/* the row kernels' activation block of a type */
static int act_block(ffn_ggml_type t) { return ffn_ggml_block_size(t) == 256 ? 256 : 32; }

/* x rounded to the int8 rule, in place of a copy (xq), per block of ab */
static void quantize_acts(const float *x, float *xq, int64_t cols, int ab) {
    for (int64_t b = 0; b < cols / ab; b++) {
        const float *v = x + b * ab;
        float amax = 0;
        for (int j = 0; j < ab; j++) amax = fmaxf(amax, fabsf(v[j]));
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int j = 0; j < ab; j++) {
            float q = nearbyintf(v[j] * id);
            q = q > 127 ? 127 : q < -127 ? -127 : q;
            xq[b * ab + j] = d * q; /* exact: d·q as the kernel's d times an int */
        }
    }
}

static int64_t int8_types_tested;

static void test_case(ffn_ctx *ctx1, ffn_ctx *ctx2, ffn_ggml_type type, int64_t rows, int64_t cols, int exact) {
    size_t rb;
    if (ffn_ggml_row_size(type, cols, &rb)) return;
    const int64_t ldx = cols + 3, ldy = rows + 2, N = NMAX;
    const int ab = act_block(type);
    float *src = malloc((size_t)cols * 4), *x = malloc((size_t)(N * ldx) * 4), *xq = malloc((size_t)cols * 4);
    float *wf = malloc((size_t)(rows * cols) * 4);
    uint8_t *wq = malloc((size_t)rows * rb);
    const size_t ny = (size_t)(N * ldy);
    double *ref = malloc((size_t)(N * rows) * 8), *tol = malloc((size_t)(N * rows) * 8);
    float *y = malloc(ny * 4), *yfull = malloc(ny * 4), *yrow = malloc(ny * 4);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < cols; c++) src[c] = frand() * (1.0f + (float)((c / 32) % 3));
        (void)ffn_ggml_quantize_row(type, src, wq + (size_t)r * rb, cols);
        (void)ffn_ggml_dequantize_row(type, wq + (size_t)r * rb, wf + r * cols, cols);
    }
    for (int64_t t = 0; t < N; t++) {
        float *xt = x + t * ldx;
        for (int64_t k = 0; k < cols; k++) {
            if (exact) { /* k·2^e with |k| <= 127, a ±127 in every block: the rounding is exact */
                int q = (int)(rnd() % 255) - 127;
                if (k % 32 == 5) q = rnd() & 1 ? 127 : -127;
                xt[k] = ldexpf((float)q, -6);
            } else {
                xt[k] = frand() * ldexpf(1.0f, (int)((k / 32) % 5) - 2);
            }
        }
        for (int64_t k = cols; k < ldx; k++) xt[k] = NAN; /* padding: never read */
        quantize_acts(xt, xq, cols, ab);
        for (int64_t r = 0; r < rows; r++) {
            const float *w = wf + r * cols;
            double s = 0, S = 0;
            for (int64_t b = 0; b < cols / 32; b++) {
                double M = 0;
                for (int j = 0; j < 32; j++) M = fmax(M, fabs(w[32 * b + j]));
                for (int j = 0; j < 32; j++) {
                    int64_t k = 32 * b + j;
                    s += (double)w[k] * xq[k];
                    S += (fabs(w[k]) + 2 * M) * fabs(xq[k]);
                }
            }
            ref[t * rows + r] = s;
            tol[t * rows + r] = ((double)cols / 8 + 32) * ldexp(1.0, -24) * S + 1e-30;
            if (exact) { /* xq == x */
                double e = 0;
                for (int64_t k = 0; k < cols; k++) e = fmax(e, fabs((double)xq[k] - xt[k]));
                CHECK(e == 0, "exact activations are not exact under the rule");
            }
        }
    }
    ffn_qweight w;
    CHECK(ffn_qweight_init(&w, type, rows, cols, wq) == FFN_OK, "%s", ffn_last_error());
    ffn_status st = ffn_qgemm_int8(ctx2, &w, x, ldx, N, yfull, ldy, 0);
    if (st == FFN_ERR_UNSUPPORTED) { /* a type without the path */
        CHECK(ffn_qgemm_int8_min_n(type) == INT64_MAX, "%s: refused but has a crossover", ffn_ggml_type_name(type));
        goto done;
    }
    CHECK(st == FFN_OK, "%s", ffn_last_error());
    int ok = 1, same = 1, outside = 1;
    double worst = 0;
    for (int64_t n = 1; n <= N; n = n < 70 ? n + 1 : n == 70 ? 130 : n == 130 ? N : N + 1) {
        const int acc = (int)(n % 2);
        ffn_ctx *ctx = n % 3 ? ctx1 : ctx2;
        for (size_t k = 0; k < ny; k++) y[k] = acc ? 1.0f : -5.0f;
        CHECK(ffn_qgemm_int8(ctx, &w, x, ldx, n, y, ldy, acc) == FFN_OK, "%s", ffn_last_error());
        for (int64_t t = 0; t < N; t++)
            for (int64_t r = 0; r < ldy; r++) {
                float v = y[t * ldy + r];
                if (t >= n || r >= rows) {
                    outside &= v == (acc ? 1.0f : -5.0f);
                    continue;
                }
                if (!acc) same &= !memcmp(&v, &yfull[t * ldy + r], 4);
                double e = fabs(v - ((acc ? 1.0 : 0.0) + ref[t * rows + r]));
                double tl = tol[t * rows + r] + (acc ? ldexp(1.0, -23) : 0);
                if (e / tl > worst) worst = e / tl;
                ok &= e <= tl;
            }
    }
    /* the row kernels compute the same real number */
    double worst_rows = 0;
    CHECK(ffn_qgemm_at_level(ctx2, ffn_simd(), &w, x, ldx, N, yrow, ldy, 0) == FFN_OK, "%s", ffn_last_error());
    for (int64_t t = 0; t < N; t++)
        for (int64_t r = 0; r < rows; r++) {
            double e = fabs((double)yrow[t * ldy + r] - yfull[t * ldy + r]) / (2 * tol[t * rows + r]);
            worst_rows = fmax(worst_rows, e);
        }
    CHECK(ok, "int8 %s rows %lld cols %lld%s: worst error/tol %.3g", ffn_ggml_type_name(type), (long long)rows,
          (long long)cols, exact ? " (exact x)" : "", worst);
    CHECK(outside, "int8 %s: wrote outside rows × n", ffn_ggml_type_name(type));
    CHECK(same, "int8 %s: a token's output depends on n or the thread count", ffn_ggml_type_name(type));
    CHECK(worst_rows <= 1, "int8 %s: the row kernels differ by %.3g of the bound", ffn_ggml_type_name(type), worst_rows);
    /* the entry point */
    int64_t mn = ffn_qgemm_int8_min_n(type);
    if (mn != INT64_MAX) {
        CHECK(mn >= 2 && mn <= N, "int8 crossover %lld", (long long)mn);
        CHECK(ffn_qgemm(ctx2, &w, x, ldx, mn, y, ldy, 0) == FFN_OK, "%s", ffn_last_error());
        int entry = 1;
        for (int64_t t = 0; t < mn; t++) entry &= !memcmp(y + t * ldy, yfull + t * ldy, (size_t)rows * 4);
        CHECK(entry, "ffn_qgemm at n = %lld is not the int8 path", (long long)mn);
        CHECK(ffn_qgemm(ctx2, &w, x, ldx, mn - 1, y, ldy, 0) == FFN_OK, "%s", ffn_last_error());
        int below = 0;
        for (int64_t t = 0; t < mn - 1; t++) below |= memcmp(y + t * ldy, yfull + t * ldy, (size_t)rows * 4);
        CHECK(below || exact, "ffn_qgemm below the int8 crossover still the int8 path (%s)",
              ffn_ggml_type_name(type));
    }
    printf("  int8 %-6s rows %3lld cols %4lld%s  n 1..70, 130, 512  worst error/tol %.3f  rows kernels %.3f  crossover %lld\n",
           ffn_ggml_type_name(type), (long long)rows, (long long)cols, exact ? " exact x" : "        ", worst,
           worst_rows, (long long)(mn == INT64_MAX ? -1 : mn));
    int8_types_tested++;
done:
    free(src); free(x); free(xq); free(wf); free(wq); free(ref); free(tol); free(y); free(yfull); free(yrow);
}

int main(void) {
    ffn_ctx *ctx1 = NULL, *ctx2 = NULL;
    if (ffn_ctx_create(1, &ctx1) || ffn_ctx_create(2, &ctx2)) return 1;
    printf("simd level: %s\n", ffn_simd_level());
    if (ffn_simd() < FFN_SIMD_AVX2) {
        float x1[32] = {0}, y1[1];
        uint8_t blk[34] = {0};
        ffn_qweight w1;
        CHECK(ffn_qweight_init(&w1, FFN_GGML_TYPE_Q8_0, 1, 32, blk) == FFN_OK, "%s", ffn_last_error());
        ffn_status st = ffn_qgemm_int8(ctx1, &w1, x1, 32, 1, y1, 1, 0);
        CHECK(st == FFN_ERR_UNSUPPORTED && strstr(ffn_last_error(), "AVX2"),
              "int8 path below AVX2: status %d, %s", (int)st, ffn_last_error());
        for (int t = 0; t < FFN_GGML_TYPE_COUNT; t++)
            CHECK(ffn_qgemm_int8_min_n((ffn_ggml_type)t) == INT64_MAX, "int8 path chosen below AVX2");
        check_note("SIMD level %s: the int8 path's refusal tested", ffn_simd_level());
    } else {
        for (int t = 0; t < FFN_GGML_TYPE_COUNT; t++) {
            ffn_ggml_type ty = (ffn_ggml_type)t;
            if (!(ffn_ggml_type_caps(ty) & FFN_GGML_COMPUTES) || !ffn_ggml_can_dequantize(ty) ||
                !ffn_ggml_can_quantize(ty) || ffn_ggml_block_size(ty) == 1)
                continue;
            int64_t b = ffn_ggml_block_size(ty);
            if (b < 256) {
                test_case(ctx1, ctx2, ty, 37, 9 * b, 0);
                test_case(ctx1, ctx2, ty, 17, b, 0);
                test_case(ctx1, ctx2, ty, 5, 73 * b, 0);
                test_case(ctx1, ctx2, ty, 19, 8 * b, 1);
            } else {
                test_case(ctx1, ctx2, ty, 19, 3 * b, 0);
                test_case(ctx1, ctx2, ty, 33, b, 0);
                test_case(ctx1, ctx2, ty, 6, 9 * b, 0);
                test_case(ctx1, ctx2, ty, 19, 2 * b, 1);
            }
        }
        CHECK(int8_types_tested >= 4 * 9, "int8 path: %lld cases, expected every type it has",
              (long long)int8_types_tested);
    }
    ffn_ctx_free(ctx1);
    ffn_ctx_free(ctx2);
    return check_done("test_qgemm_int8");
}
