/* kernels.h -- the hot loops: matrix products, streaming small-N kernels,
 * activations, fused gate⊙up epilogues; and the run-time SIMD choice.
 * Internal; not installed.  (Owned by the kernels work; extend freely.) */
#ifndef FFN_KERNELS_H
#define FFN_KERNELS_H

#include "../common.h"

enum { FFN_SIMD_SCALAR = 0, FFN_SIMD_AVX2 = 1, FFN_SIMD_AVX512 = 2 };
int ffn_simd(void); /* the level in use (see cpu.c) */

#endif
