/* quant_bits.h -- the little pieces every reference block codec uses
 * (quant.c, quant_k.c, quant_legacy.c): an fp16 scale read from and
 * written to a block's bytes, and ggml's round-to-nearest-even.  Internal. */
#ifndef FFN_KERNELS_QUANT_BITS_H
#define FFN_KERNELS_QUANT_BITS_H

#include "base/dtype.h"

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

#endif /* FFN_KERNELS_QUANT_BITS_H */
