/* kernels_export.c -- the per-SIMD-level array kernels, exported for the
 * parity tests that call them through ctypes (tests/parity/test_act.py).
 * libffn.so exports only the public API, so the tests load this library
 * instead, built by `make unit` into build/tests/libffn_kernels.so from the
 * same objects as libffn_internal.a: kx_<kernel>_<level> calls ffn_<kernel>_<level>. */
#include "kernels/kernels.h"

#define KX_EXPORT __attribute__((visibility("default")))
#define KX_LEVEL(lv)                                                                          \
    KX_EXPORT void kx_act_fwd_##lv(ffn_act act, float *y, const float *x, int64_t n) {        \
        ffn_act_fwd_##lv(act, y, x, n);                                                        \
    }                                                                                          \
    KX_EXPORT void kx_act_bwd_##lv(ffn_act act, float *dx, const float *dy, const float *x,   \
                                   int64_t n) {                                                \
        ffn_act_bwd_##lv(act, dx, dy, x, n);                                                   \
    }

KX_LEVEL(scalar)
KX_LEVEL(avx2)
KX_LEVEL(avx512)
