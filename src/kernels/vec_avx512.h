/* vec_avx512.h -- the float-vector operations of AVX-512F (16 floats),
 * with the names and contracts of vec_avx2.h.  Included by the kernel
 * files built with -mavx512f. */
#ifndef FFN_KERNELS_VEC_AVX512_H
#define FFN_KERNELS_VEC_AVX512_H

#include "kernels/vec_ops.h"

#define VF_LANES 16
typedef __m512 vf_vec;
typedef __mmask16 vf_mask;

VF_COMMON_OPS(_mm512)

VF_INLINE vf_mask vf_tail_mask(int rem) { return (vf_mask)((1u << rem) - 1u); }
VF_INLINE vf_vec vf_load_masked(const float *p, vf_mask m) { return _mm512_maskz_loadu_ps(m, p); }
VF_INLINE void vf_store_masked(float *p, vf_mask m, vf_vec v) { _mm512_mask_storeu_ps(p, m, v); }
VF_INLINE float vf_hsum(vf_vec v) { return _mm512_reduce_add_ps(v); }

#endif
