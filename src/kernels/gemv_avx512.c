/* gemv_avx512.c -- the streaming dot-product kernel for AVX-512: blocks of
 * up to 4 weight rows × 4 tokens held in 16 accumulators, 16 floats a
 * step, the K tail by masked loads.  Contract in kernels.h (ffn_gemv). */
#include "kernels/kernels.h"

#include <immintrin.h>

#define GEMV_INLINE static inline __attribute__((always_inline))

/* out[t·ldo + r] for r < R, t < T (R, T compile-time after inlining) */
GEMV_INLINE void block(float *out, int64_t ldo, const float *W, int64_t K, const float *x,
                       int64_t ldx, int R, int T) {
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++) acc[r][t] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) {
        __m512 w[4], xv[4];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) w[r] = _mm512_loadu_ps(W + r * K + k);
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) xv[t] = _mm512_loadu_ps(x + t * ldx + k);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
#pragma GCC unroll 4
            for (int t = 0; t < T; t++) acc[r][t] = _mm512_fmadd_ps(w[r], xv[t], acc[r][t]);
    }
    if (k < K) {
        __mmask16 m = (__mmask16)((1u << (K - k)) - 1u);
        __m512 w[4], xv[4];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) w[r] = _mm512_maskz_loadu_ps(m, W + r * K + k);
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) xv[t] = _mm512_maskz_loadu_ps(m, x + t * ldx + k);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
#pragma GCC unroll 4
            for (int t = 0; t < T; t++) acc[r][t] = _mm512_fmadd_ps(w[r], xv[t], acc[r][t]);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) out[t * ldo + r] = _mm512_reduce_add_ps(acc[r][t]);
}

#define TOKENS(R)                                                                             \
    switch (T) {                                                                               \
    case 1: block(o, ldo, w, K, xt, ldx, R, 1); break;                                         \
    case 2: block(o, ldo, w, K, xt, ldx, R, 2); break;                                         \
    case 3: block(o, ldo, w, K, xt, ldx, R, 3); break;                                         \
    default: block(o, ldo, w, K, xt, ldx, R, 4); break;                                        \
    }

void ffn_gemv_avx512(float *out, int64_t ldo, const float *W, int64_t K, const float *x,
                     int64_t ldx, int64_t n, int64_t rows) {
    for (int64_t t0 = 0; t0 < n; t0 += 4) {
        int T = n - t0 < 4 ? (int)(n - t0) : 4;
        const float *xt = x + t0 * ldx;
        int64_t r = 0;
        for (; r + 4 <= rows; r += 4) {
            float *o = out + t0 * ldo + r;
            const float *w = W + r * K;
            TOKENS(4)
        }
        for (; r < rows; r++) {
            float *o = out + t0 * ldo + r;
            const float *w = W + r * K;
            TOKENS(1)
        }
    }
}
