/* gemv_impl.h -- the streaming dot-product kernel over plain weight rows,
 * written once and instantiated per SIMD level: gemv_avx2.c and
 * gemv_avx512.c define the vector operations below and include this file.
 * Contract in kernels.h (ffn_gemv).  Internal.
 *
 * A block is up to 4 weight rows × GEMV_TOKENS tokens held in as many
 * accumulators, VF_LANES floats a step along K, the K tail by masked
 * loads; each output is the horizontal sum of its accumulator, so the sum
 * order depends only on K and the ISA (never on the blocking or threads).
 * Register budget: per step GEMV_TOKENS vectors of x and one row of W at a
 * time are live next to the 4 × GEMV_TOKENS accumulators (AVX2: 12 + 3 + 1
 * = 16 ymm; AVX-512: 16 + 4 + 1 of 32 zmm).
 *
 * The including file includes vec_avx2.h or vec_avx512.h (the vector
 * operations, vf_*, each an always-inline function, so that R and T below
 * are compile-time constants in every instance and the loops unroll into
 * registers) and defines, before including this one:
 *   GEMV_NAME                  the function (ffn_gemv_avx2, ...)
 *   GEMV_TOKENS                tokens per block (3 or 4) */
#if !defined GEMV_NAME || !defined VF_LANES
#error "define GEMV_NAME and include a vec_*.h before including gemv_impl.h"
#endif

#include "kernels/kernels.h"

/* out[t·ldo + r] = W[r] · x[t] for r < R (<= 4), t < T (<= GEMV_TOKENS). */
VF_INLINE void gemv_block(float *out, int64_t ldo, const float *W, int64_t K, const float *x,
                            int64_t ldx, int R, int T) {
    vf_vec acc[4][GEMV_TOKENS];
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
#pragma GCC unroll 4
        for (int t = 0; t < GEMV_TOKENS; t++) acc[r][t] = vf_zero();
    int64_t k = 0;
    for (; k + VF_LANES <= K; k += VF_LANES) {
        vf_vec xv[GEMV_TOKENS];
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) xv[t] = vf_load(x + t * ldx + k);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            vf_vec w = vf_load(W + r * K + k);
#pragma GCC unroll 4
            for (int t = 0; t < T; t++) acc[r][t] = vf_fma(w, xv[t], acc[r][t]);
        }
    }
    if (k < K) {
        vf_mask m = vf_tail_mask((int)(K - k));
        vf_vec xv[GEMV_TOKENS];
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) xv[t] = vf_load_masked(x + t * ldx + k, m);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            vf_vec w = vf_load_masked(W + r * K + k, m);
#pragma GCC unroll 4
            for (int t = 0; t < T; t++) acc[r][t] = vf_fma(w, xv[t], acc[r][t]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) out[t * ldo + r] = vf_hsum(acc[r][t]);
}

/* The block for T tokens (1..GEMV_TOKENS), T made a constant per case. */
VF_INLINE void gemv_tokens(float *out, int64_t ldo, const float *W, int64_t K, const float *x,
                             int64_t ldx, int R, int T) {
    switch (T) {
    case 1: gemv_block(out, ldo, W, K, x, ldx, R, 1); break;
    case 2: gemv_block(out, ldo, W, K, x, ldx, R, 2); break;
#if GEMV_TOKENS > 3
    case 3: gemv_block(out, ldo, W, K, x, ldx, R, 3); break;
#endif
    default: gemv_block(out, ldo, W, K, x, ldx, R, GEMV_TOKENS); break;
    }
}

void GEMV_NAME(float *out, int64_t ldo, const float *W, int64_t K, const float *x, int64_t ldx,
               int64_t n, int64_t rows) {
    /* rows outer: a block of up to 4 rows (4·K floats, in L1/L2) serves
     * every token group before the next block is read, so each weight
     * comes from DRAM once for all n tokens */
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4)
        for (int64_t t0 = 0; t0 < n; t0 += GEMV_TOKENS) {
            int T = n - t0 < GEMV_TOKENS ? (int)(n - t0) : GEMV_TOKENS;
            gemv_tokens(out + t0 * ldo + r, ldo, W + r * K, K, x + t0 * ldx, ldx, 4, T);
        }
    for (; r < rows; r++)
        for (int64_t t0 = 0; t0 < n; t0 += GEMV_TOKENS) {
            int T = n - t0 < GEMV_TOKENS ? (int)(n - t0) : GEMV_TOKENS;
            gemv_tokens(out + t0 * ldo + r, ldo, W + r * K, K, x + t0 * ldx, ldx, 1, T);
        }
}
