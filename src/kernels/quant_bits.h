/* quant_bits.h -- the little pieces every reference block codec uses
 * (quant.c, quant_k.c, quant_legacy.c): an fp16 scale read from and
 * written to a block's bytes, ggml's round-to-nearest-even and the signed
 * extreme of a block.  Internal. */
#ifndef FFN_KERNELS_QUANT_BITS_H
#define FFN_KERNELS_QUANT_BITS_H

#include "base/dtype.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float qb_load_f16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return ffn_f16_to_f32(h);
}
static inline void qb_store_f16(uint8_t *p, float f) {
    uint16_t h = ffn_f32_to_f16(f);
    memcpy(p, &h, 2);
}
/* ggml's nearest_int: round to nearest, ties to even, for |v| < 2^22
 * (callers clamp first; beyond, the same bits as ggml's): adding 1.5·2^23
 * leaves the rounded integer in the low mantissa bits, without a call
 * into libm. */
static inline int qb_nearest(float v) {
    float shifted = v + 12582912.0f;
    int32_t bits;
    memcpy(&bits, &shifted, 4);
    return (bits & 0x007FFFFF) - 0x00400000;
}

/* The element of x[0 .. n) of largest magnitude, the first one on a tie
 * (ggml's "max" of q4_0, q5_0, q6_K; NaN elements never win); *amax (may be
 * NULL) gets its magnitude. */
static inline float qb_signed_max(const float *x, int n, float *amax) {
    float a = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (a < fabsf(x[j])) {
            a = fabsf(x[j]);
            max = x[j];
        }
    }
    if (amax) *amax = a;
    return max;
}

#endif /* FFN_KERNELS_QUANT_BITS_H */
