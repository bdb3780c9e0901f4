/* vec_ops.h -- the float-vector operations of vec_avx2.h and vec_avx512.h
 * that differ only in the intrinsics' prefix, written once:
 * VF_COMMON_OPS(_mm256) or VF_COMMON_OPS(_mm512) defines vf_zero, vf_load,
 * vf_store, vf_bcast, vf_fma(a, b, c) = a*b + c and vf_add over that
 * width's vf_vec (typedef'd before).  Each including header adds what
 * differs: the tail masks and the horizontal sum. */
#ifndef FFN_KERNELS_VEC_OPS_H
#define FFN_KERNELS_VEC_OPS_H

#include <immintrin.h>

#define VF_INLINE static inline __attribute__((always_inline))

#define VF_COMMON_OPS(P)                                                                        \
    VF_INLINE vf_vec vf_zero(void) { return P##_setzero_ps(); }                                 \
    VF_INLINE vf_vec vf_load(const float *p) { return P##_loadu_ps(p); }                        \
    VF_INLINE void vf_store(float *p, vf_vec v) { P##_storeu_ps(p, v); }                        \
    VF_INLINE vf_vec vf_bcast(float f) { return P##_set1_ps(f); }                               \
    VF_INLINE vf_vec vf_fma(vf_vec a, vf_vec b, vf_vec c) { return P##_fmadd_ps(a, b, c); }     \
    VF_INLINE vf_vec vf_add(vf_vec a, vf_vec b) { return P##_add_ps(a, b); }

#endif
