/* gemv_avx2.c -- the streaming dot-product kernel for AVX2 + FMA: blocks
 * of up to 4 weight rows × 3 tokens held in 12 accumulators (16 ymm
 * registers in all), 8 floats a step, the K tail by masked loads.
 * The kernel is gemv_impl.h; vec_avx2.h gives it the AVX2 operations.
 * Contract in kernels.h (ffn_gemv). */
#include "kernels/kernels.h"

#include "kernels/vec_avx2.h"

#define GEMV_NAME ffn_gemv_avx2
#define GEMV_TOKENS 3

#include "kernels/gemv_impl.h"
