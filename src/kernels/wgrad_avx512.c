/* wgrad_avx512.c -- the weight-gradient kernel for AVX-512: tiles of 6 rows
 * × 64 columns (24 zmm accumulators, 4 loads of B and 6 broadcasts of A
 * per 24 FMAs), column tails by masked loads and stores.  The kernel is
 * wgrad_impl.h; this file gives it the AVX-512 operations.  Contract in
 * kernels.h (ffn_wgrad). */
#include "kernels/kernels.h"

#include <immintrin.h>

#define WG_INLINE static inline __attribute__((always_inline))
#define WG_NAME ffn_wgrad_avx512
#define WG_LANES 16
#define WG_NV 4
#define WG_MR 6
typedef __m512 wg_vec;
typedef __mmask16 wg_mask;

WG_INLINE wg_vec wg_zero(void) { return _mm512_setzero_ps(); }
WG_INLINE wg_vec wg_load(const float *p) { return _mm512_loadu_ps(p); }
WG_INLINE void wg_store(float *p, wg_vec v) { _mm512_storeu_ps(p, v); }
WG_INLINE wg_vec wg_bcast(float f) { return _mm512_set1_ps(f); }
WG_INLINE wg_vec wg_fma(wg_vec a, wg_vec b, wg_vec c) { return _mm512_fmadd_ps(a, b, c); }
WG_INLINE wg_vec wg_add(wg_vec a, wg_vec b) { return _mm512_add_ps(a, b); }
WG_INLINE wg_mask wg_tail_mask(int rem) { return (wg_mask)((1u << rem) - 1u); }
WG_INLINE wg_vec wg_load_masked(const float *p, wg_mask m) { return _mm512_maskz_loadu_ps(m, p); }
WG_INLINE void wg_store_masked(float *p, wg_mask m, wg_vec v) { _mm512_mask_storeu_ps(p, m, v); }

#include "kernels/wgrad_impl.h"
