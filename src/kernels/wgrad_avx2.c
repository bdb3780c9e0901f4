/* wgrad_avx2.c -- the weight-gradient kernel for AVX2+FMA: tiles of 6 rows
 * × 16 columns (12 ymm accumulators, 2 loads of B and 6 broadcasts of A
 * per 12 FMAs: 15 of the 16 registers), column tails by maskload and
 * maskstore.  The kernel is wgrad_impl.h; this file gives it the AVX2
 * operations (vec_avx2.h).  Contract in kernels.h (ffn_wgrad). */
#include "kernels/kernels.h"

#include "kernels/vec_avx2.h"

#define WG_NAME ffn_wgrad_avx2
#define WG_NV 2
#define WG_MR 6

#include "kernels/wgrad_impl.h"
