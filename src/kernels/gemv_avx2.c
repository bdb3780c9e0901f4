/* gemv_avx2.c -- the streaming dot-product kernel for AVX2 + FMA: blocks
 * of up to 4 weight rows × 3 tokens held in 12 accumulators (16 ymm
 * registers in all), 8 floats a step, the K tail by masked loads.
 * Contract in kernels.h (ffn_gemv). */
#include "kernels/kernels.h"

#include <immintrin.h>

#define GEMV_INLINE static inline __attribute__((always_inline))

GEMV_INLINE float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

GEMV_INLINE void block(float *out, int64_t ldo, const float *W, int64_t K, const float *x,
                       int64_t ldx, int R, int T) {
    __m256 acc[4][3];
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
#pragma GCC unroll 3
        for (int t = 0; t < 3; t++) acc[r][t] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
        __m256 xv[3];
#pragma GCC unroll 3
        for (int t = 0; t < T; t++) xv[t] = _mm256_loadu_ps(x + t * ldx + k);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            __m256 w = _mm256_loadu_ps(W + r * K + k);
#pragma GCC unroll 3
            for (int t = 0; t < T; t++) acc[r][t] = _mm256_fmadd_ps(w, xv[t], acc[r][t]);
        }
    }
    if (k < K) {
        int rem = (int)(K - k);
        __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(rem), idx);
        __m256 xv[3];
#pragma GCC unroll 3
        for (int t = 0; t < T; t++) xv[t] = _mm256_maskload_ps(x + t * ldx + k, m);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            __m256 w = _mm256_maskload_ps(W + r * K + k, m);
#pragma GCC unroll 3
            for (int t = 0; t < T; t++) acc[r][t] = _mm256_fmadd_ps(w, xv[t], acc[r][t]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 3
        for (int t = 0; t < T; t++) out[t * ldo + r] = hsum(acc[r][t]);
}

#define TOKENS(R)                                                                             \
    switch (T) {                                                                               \
    case 1: block(o, ldo, w, K, xt, ldx, R, 1); break;                                         \
    case 2: block(o, ldo, w, K, xt, ldx, R, 2); break;                                         \
    default: block(o, ldo, w, K, xt, ldx, R, 3); break;                                        \
    }

void ffn_gemv_avx2(float *out, int64_t ldo, const float *W, int64_t K, const float *x,
                   int64_t ldx, int64_t n, int64_t rows) {
    for (int64_t t0 = 0; t0 < n; t0 += 3) {
        int T = n - t0 < 3 ? (int)(n - t0) : 3;
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
