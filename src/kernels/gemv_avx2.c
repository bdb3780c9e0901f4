/* gemv_avx2.c -- the streaming dot-product kernel for AVX2 + FMA: blocks
 * of up to 4 weight rows × 3 tokens held in 12 accumulators (16 ymm
 * registers in all), 8 floats a step, the K tail by masked loads.
 * The kernel is gemv_impl.h; this file gives it the AVX2 operations.
 * Contract in kernels.h (ffn_gemv). */
#include "kernels/kernels.h"

#include <immintrin.h>

#define GEMV_INLINE static inline __attribute__((always_inline))
#define GEMV_NAME ffn_gemv_avx2
#define GEMV_TOKENS 3
#define GEMV_LANES 8
typedef __m256 gemv_vec;
typedef __m256i gemv_mask;

GEMV_INLINE gemv_vec gemv_zero(void) { return _mm256_setzero_ps(); }
GEMV_INLINE gemv_vec gemv_load(const float *p) { return _mm256_loadu_ps(p); }
GEMV_INLINE gemv_vec gemv_fma(gemv_vec a, gemv_vec b, gemv_vec c) { return _mm256_fmadd_ps(a, b, c); }
GEMV_INLINE gemv_mask gemv_tail_mask(int rem) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(rem), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
GEMV_INLINE gemv_vec gemv_load_masked(const float *p, gemv_mask m) { return _mm256_maskload_ps(p, m); }
GEMV_INLINE float gemv_hsum(gemv_vec v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#include "kernels/gemv_impl.h"
