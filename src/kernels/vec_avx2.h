/* vec_avx2.h -- the float-vector operations of AVX2 + FMA, under the names
 * the kernel templates (*_impl.h) use: vf_vec (8 floats), vf_mask (a tail's
 * lanes), vf_zero, vf_load, vf_store, vf_bcast, vf_fma(a, b, c) = a*b + c,
 * vf_add, vf_tail_mask(rem) (the first rem lanes, 0 < rem <= VF_LANES),
 * vf_load_masked (lanes outside the mask read as 0, never touched) and
 * vf_store_masked (lanes outside it untouched), vf_hsum (the sum of the
 * lanes: halves, then pairs, then the last two).  Included by the kernel
 * files built with -mavx2 -mfma; vec_avx512.h is the same for AVX-512
 * (the operations that differ only in width are vec_ops.h's). */
#ifndef FFN_KERNELS_VEC_AVX2_H
#define FFN_KERNELS_VEC_AVX2_H

#include "kernels/vec_ops.h"

#define VF_LANES 8
typedef __m256 vf_vec;
typedef __m256i vf_mask;

VF_COMMON_OPS(_mm256)

VF_INLINE vf_mask vf_tail_mask(int rem) { /* lane i set iff i < rem */
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(rem), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
VF_INLINE vf_vec vf_load_masked(const float *p, vf_mask m) { return _mm256_maskload_ps(p, m); }
VF_INLINE void vf_store_masked(float *p, vf_mask m, vf_vec v) { _mm256_maskstore_ps(p, m, v); }
VF_INLINE float vf_hsum(vf_vec v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#endif
