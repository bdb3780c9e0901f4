/* gemv_avx512.c -- the streaming dot-product kernel for AVX-512: blocks of
 * up to 4 weight rows × 4 tokens held in 16 accumulators, 16 floats a
 * step, the K tail by masked loads.  The kernel is gemv_impl.h; this file
 * gives it the AVX-512 operations.  Contract in kernels.h (ffn_gemv). */
#include "kernels/kernels.h"

#include <immintrin.h>

#define GEMV_INLINE static inline __attribute__((always_inline))
#define GEMV_NAME ffn_gemv_avx512
#define GEMV_TOKENS 4
#define GEMV_LANES 16
typedef __m512 gemv_vec;
typedef __mmask16 gemv_mask;

GEMV_INLINE gemv_vec gemv_zero(void) { return _mm512_setzero_ps(); }
GEMV_INLINE gemv_vec gemv_load(const float *p) { return _mm512_loadu_ps(p); }
GEMV_INLINE gemv_vec gemv_fma(gemv_vec a, gemv_vec b, gemv_vec c) { return _mm512_fmadd_ps(a, b, c); }
GEMV_INLINE gemv_mask gemv_tail_mask(int rem) { return (gemv_mask)((1u << rem) - 1u); }
GEMV_INLINE gemv_vec gemv_load_masked(const float *p, gemv_mask m) { return _mm512_maskz_loadu_ps(m, p); }
GEMV_INLINE float gemv_hsum(gemv_vec v) { return _mm512_reduce_add_ps(v); }

#include "kernels/gemv_impl.h"
