/* wgrad_avx512.c -- the weight-gradient kernel for AVX-512: tiles of 6 rows
 * × 64 columns (24 zmm accumulators, 4 loads of B and 6 broadcasts of A
 * per 24 FMAs), column tails by masked loads and stores.  The kernel is
 * wgrad_impl.h; this file gives it the AVX-512 operations (vec_avx512.h).
 * Contract in kernels.h (ffn_wgrad). */
#include "kernels/kernels.h"

#include "kernels/vec_avx512.h"

#define WG_NAME ffn_wgrad_avx512
#define WG_NV 4
#define WG_MR 6

#include "kernels/wgrad_impl.h"
