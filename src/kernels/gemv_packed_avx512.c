/* gemv_packed_avx512.c -- the streaming small-N kernel over the matrix
 * engine's own packed weights (AVX-512).  oneDNN's brgemm packs B (K, N)
 * into panels of nb columns (64) made of kb-row tiles (16): within a panel
 * the weights for k = 0, 1, 2, ... follow each other, nb floats apiece, so
 * one panel is one sequential stream.  For each 64-column group this kernel
 * keeps 64 columns × up to 4 tokens in 16 accumulators (four independent
 * FMA chains even for one token), broadcasts x[t][k] and walks k upward:
 * every weight is read once per 4 tokens, and every output is a plain
 * k-ordered sum (no dependence on the thread split).
 * Contract in kernels.h (ffn_gemv_packed). */
#include "kernels/kernels.h"

#include <immintrin.h>

#define GP_INLINE static inline __attribute__((always_inline))

/* out[t·ldo + (c - c_out0)] for the 64 columns at panel offset `off` of
 * panel p, tokens t < T (T <= 4, compile-time after inlining); store only
 * columns in [c0, c1). */
GP_INLINE void group64(float *out, int64_t ldo, int64_t c_out0, const ffn_packed_view *B,
                       int64_t p, int64_t off, const float *x, int64_t ldx, int T, int64_t c0,
                       int64_t c1) {
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int t = 0; t < 4; t++)
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) acc[t][v] = _mm512_setzero_ps();
    const float *panel = B->data + p * B->stride_nblk + off;
    int64_t K = B->K, kb = B->kb, nb = B->nb;
    for (int64_t k0 = 0; k0 < K; k0 += kb) {
        const float *tile = panel + (k0 / kb) * B->stride_kblk;
        int64_t kend = K - k0 < kb ? K - k0 : kb;
        for (int64_t i = 0; i < kend; i++) {
            const float *w = tile + i * nb;
            __m512 w0 = _mm512_loadu_ps(w), w1 = _mm512_loadu_ps(w + 16);
            __m512 w2 = _mm512_loadu_ps(w + 32), w3 = _mm512_loadu_ps(w + 48);
#pragma GCC unroll 4
            for (int t = 0; t < T; t++) {
                __m512 xb = _mm512_set1_ps(x[t * ldx + k0 + i]);
                acc[t][0] = _mm512_fmadd_ps(w0, xb, acc[t][0]);
                acc[t][1] = _mm512_fmadd_ps(w1, xb, acc[t][1]);
                acc[t][2] = _mm512_fmadd_ps(w2, xb, acc[t][2]);
                acc[t][3] = _mm512_fmadd_ps(w3, xb, acc[t][3]);
            }
        }
    }
    int64_t col0 = p * nb + off; /* first column of this group */
    int64_t lo = c0 > col0 ? c0 - col0 : 0, hi = c1 - col0 < 64 ? c1 - col0 : 64;
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
        float tmp[64];
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) _mm512_storeu_ps(tmp + 16 * v, acc[t][v]);
        float *o = out + t * ldo + (col0 - c_out0);
        for (int64_t j = lo; j < hi; j++) o[j] = tmp[j];
    }
}

void ffn_gemv_packed_avx512(float *out, int64_t ldo, const ffn_packed_view *B, const float *x,
                            int64_t ldx, int64_t n, int64_t c0, int64_t c1) {
    if (c1 <= c0) return;
    for (int64_t t0 = 0; t0 < n; t0 += 4) {
        int T = n - t0 < 4 ? (int)(n - t0) : 4;
        const float *xt = x + t0 * ldx;
        float *ot = out + t0 * ldo;
        for (int64_t p = c0 / B->nb; p * B->nb < c1; p++)
            for (int64_t off = 0; off < B->nb; off += 64) {
                int64_t col0 = p * B->nb + off;
                if (col0 >= c1 || col0 + 64 <= c0) continue;
                switch (T) {
                case 1: group64(ot, ldo, c0, B, p, off, xt, ldx, 1, c0, c1); break;
                case 2: group64(ot, ldo, c0, B, p, off, xt, ldx, 2, c0, c1); break;
                case 3: group64(ot, ldo, c0, B, p, off, xt, ldx, 3, c0, c1); break;
                default: group64(ot, ldo, c0, B, p, off, xt, ldx, 4, c0, c1); break;
                }
            }
    }
}
