/* gemv_avx512.c -- the streaming dot-product kernel for AVX-512: blocks of
 * up to 4 weight rows × 4 tokens held in 16 accumulators, 16 floats a
 * step, the K tail by masked loads.  The kernel is gemv_impl.h; vec_avx512.h
 * gives it the AVX-512 operations.  Contract in kernels.h (ffn_gemv). */
#include "kernels/kernels.h"

#include "kernels/vec_avx512.h"

#define GEMV_NAME ffn_gemv_avx512
#define GEMV_TOKENS 4

#include "kernels/gemv_impl.h"
