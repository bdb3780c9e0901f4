/* gemv.c -- the streaming small-N (decode) path: the scalar baseline of
 * the row-block dot-product kernel, its run-time dispatch, and the layer
 * forward built on it (ffn_decode_forward).
 *
 * Why: at N = 1..8 a matrix engine is memory-bound and its packing and
 * blocking only add traffic; here each weight row is streamed once, dotted
 * with the n token vectors, and the gate⊙up epilogue runs on a row block
 * while it is still in cache.  Threads take contiguous row ranges (static
 * schedule), so each thread streams its own slice of the weights, and no
 * output is ever split across threads: results are bitwise identical at
 * every thread count. */
#include "kernels.h"

void ffn_gemv_scalar(float *out, int64_t ldo, const float *W, int64_t K, const float *x,
                     int64_t ldx, int64_t n, int64_t rows) {
    for (int64_t r = 0; r < rows; r++) {
        const float *w = W + r * K;
        for (int64_t t = 0; t < n; t++) {
            const float *xv = x + t * ldx;
            float acc[8] = {0};
            int64_t k = 0;
            for (; k + 8 <= K; k += 8)
                for (int j = 0; j < 8; j++) acc[j] += w[k + j] * xv[k + j];
            for (int j = 0; k < K; k++, j++) acc[j] += w[k] * xv[k];
            out[t * ldo + r] =
                ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
        }
    }
}

void ffn_gemv(float *out, int64_t ldo, const float *W, int64_t K, const float *x, int64_t ldx,
              int64_t n, int64_t rows) {
    switch (ffn_simd()) {
    case FFN_SIMD_AVX512: ffn_gemv_avx512(out, ldo, W, K, x, ldx, n, rows); return;
    case FFN_SIMD_AVX2: ffn_gemv_avx2(out, ldo, W, K, x, ldx, n, rows); return;
    default: ffn_gemv_scalar(out, ldo, W, K, x, ldx, n, rows); return;
    }
}

/* Rows per work item: small enough to balance two threads on any F, large
 * enough to amortise the loop and keep the hardware prefetchers streaming. */
enum { ROW_BLOCK = 16 };
/* Below this many multiply-adds one thread beats a parallel region. */
#define PAR_MIN_MACS 65536

void ffn_gemv_mt(const ffn_ctx *ctx, float *out, int64_t ldo, const float *W, int64_t K,
                 const float *x, int64_t ldx, int64_t n, int64_t rows) {
    ffn_ctx_enter(ctx);
    int64_t nb = (rows + ROW_BLOCK - 1) / ROW_BLOCK;
#pragma omp parallel for schedule(static) if (n * rows * K >= PAR_MIN_MACS)
    for (int64_t b = 0; b < nb; b++) {
        int64_t r0 = b * ROW_BLOCK, len = rows - r0 < ROW_BLOCK ? rows - r0 : ROW_BLOCK;
        ffn_gemv(out + r0, ldo, W + r0 * K, K, x, ldx, n, len);
    }
}

ffn_status ffn_decode_forward(const ffn_ctx *ctx, float *y, float *gu, float *h, const float *x,
                              int64_t n, int64_t D, int64_t F, int gated, ffn_act act,
                              const float *w_in, const float *b_in, const float *w_down,
                              const float *b_down) {
    ffn_ctx_enter(ctx);
    int64_t P = gated ? 2 * F : F;
    int64_t n_in = (F + ROW_BLOCK - 1) / ROW_BLOCK;
#pragma omp parallel for schedule(static) if (n * P * D >= PAR_MIN_MACS)
    for (int64_t b = 0; b < n_in; b++) {
        int64_t j0 = b * ROW_BLOCK, rows = F - j0 < ROW_BLOCK ? F - j0 : ROW_BLOCK;
        float *g = gu + j0, *u = gated ? gu + F + j0 : g;
        ffn_gemv(g, P, w_in + j0 * D, D, x, D, n, rows);
        if (gated) ffn_gemv(u, P, w_in + (F + j0) * D, D, x, D, n, rows);
        for (int64_t t = 0; t < n; t++) {
            if (b_in) {
                ffn_add_bias(g + t * P, b_in + j0, rows);
                if (gated) ffn_add_bias(u + t * P, b_in + F + j0, rows);
            }
            if (gated) ffn_glu_fwd(act, h + t * F + j0, g + t * P, u + t * P, rows);
            else ffn_act_fwd(act, h + t * F + j0, g + t * P, rows);
        }
    }
    int64_t n_out = (D + ROW_BLOCK - 1) / ROW_BLOCK;
#pragma omp parallel for schedule(static) if (n * D * F >= PAR_MIN_MACS)
    for (int64_t b = 0; b < n_out; b++) {
        int64_t i0 = b * ROW_BLOCK, rows = D - i0 < ROW_BLOCK ? D - i0 : ROW_BLOCK;
        ffn_gemv(y + i0, D, w_down + i0 * F, F, h, F, n, rows);
        if (b_down)
            for (int64_t t = 0; t < n; t++) ffn_add_bias(y + t * D + i0, b_down + i0, rows);
    }
    return FFN_OK;
}
