/* wgrad_avx2.c -- the weight-gradient kernel for AVX2+FMA: tiles of 6 rows
 * × 16 columns (12 ymm accumulators, 2 loads of B and 6 broadcasts of A
 * per 12 FMAs: 15 of the 16 registers), column tails by maskload and
 * maskstore.  The kernel is wgrad_impl.h; this file gives it the AVX2
 * operations.  Contract in kernels.h (ffn_wgrad). */
#include "kernels/kernels.h"

#include <immintrin.h>

#define WG_INLINE static inline __attribute__((always_inline))
#define WG_NAME ffn_wgrad_avx2
#define WG_LANES 8
#define WG_NV 2
#define WG_MR 6
typedef __m256 wg_vec;
typedef __m256i wg_mask;

WG_INLINE wg_vec wg_zero(void) { return _mm256_setzero_ps(); }
WG_INLINE wg_vec wg_load(const float *p) { return _mm256_loadu_ps(p); }
WG_INLINE void wg_store(float *p, wg_vec v) { _mm256_storeu_ps(p, v); }
WG_INLINE wg_vec wg_bcast(float f) { return _mm256_set1_ps(f); }
WG_INLINE wg_vec wg_fma(wg_vec a, wg_vec b, wg_vec c) { return _mm256_fmadd_ps(a, b, c); }
WG_INLINE wg_vec wg_add(wg_vec a, wg_vec b) { return _mm256_add_ps(a, b); }
WG_INLINE wg_mask wg_tail_mask(int rem) { /* lane i set iff i < rem */
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(rem), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
WG_INLINE wg_vec wg_load_masked(const float *p, wg_mask m) { return _mm256_maskload_ps(p, m); }
WG_INLINE void wg_store_masked(float *p, wg_mask m, wg_vec v) { _mm256_maskstore_ps(p, m, v); }

#include "kernels/wgrad_impl.h"
