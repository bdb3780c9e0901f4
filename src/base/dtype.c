/* dtype.c -- the fp16 and bf16 conversions (public: ffn/dtype.h), used by
 * the readers (safetensors, GGUF), the type table's decoders and the
 * kernels. */
#include "base/dtype.h"

#include <string.h>

/* ---- fp16 / bf16 ------------------------------------------------------ */

static float bits_to_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint32_t f32_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Branch-free so that bulk conversion vectorises: a subnormal half is
 * mant * 2^-24, computed exactly in float (mant <= 1023 converts exactly and
 * the product is a normal float, so FTZ/DAZ modes cannot touch it). */
static inline uint32_t f16_bits_to_f32_bits(uint32_t h) {
    uint32_t sign = (h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
    uint32_t normal = ((exp + 112) << 23) | (mant << 13);
    uint32_t special = 0x7F800000u | (mant << 13); /* inf, NaN (payload kept) */
    uint32_t subnormal = f32_to_bits((float)(int32_t)mant * 0x1p-24f);
    uint32_t is_sub = 0u - (uint32_t)(exp == 0), is_special = 0u - (uint32_t)(exp == 0x1F);
    return sign | (subnormal & is_sub) | (special & is_special) | (normal & ~(is_sub | is_special));
}

float ffn_f16_to_f32(uint16_t h) { return bits_to_f32(f16_bits_to_f32_bits(h)); }

float ffn_bf16_to_f32(uint16_t b) { return bits_to_f32((uint32_t)b << 16); }

uint16_t ffn_f32_to_bf16(float f) {
    uint32_t x = f32_to_bits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 0x40); /* NaN: keep sign, quiet */
    x += 0x7FFFu + ((x >> 16) & 1); /* round to nearest, ties to even; overflow carries to inf */
    return (uint16_t)(x >> 16);
}

uint16_t ffn_f32_to_f16(float f) {
    uint32_t x = f32_to_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    x &= 0x7FFFFFFFu;
    if (x >= 0x7F800000u) /* inf or NaN (quieted, top payload bits kept) */
        return sign | 0x7C00 | (x > 0x7F800000u ? (uint16_t)(0x200 | ((x >> 13) & 0x3FF)) : 0);
    if (x >= 0x477FF000u) return sign | 0x7C00; /* >= 65520 rounds to infinity */
    if (x < 0x38800000u) {                      /* below 2^-14: a subnormal half or zero */
        if (x <= 0x33000000u) return sign;      /* <= 2^-25 rounds to zero (the tie goes to even 0) */
        uint32_t e = x >> 23, m = (x & 0x7FFFFFu) | 0x800000u;
        uint32_t shift = 126 - e; /* value * 2^24 = m * 2^(e - 126); shift in [14, 24] */
        uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return sign | (uint16_t)r;
    }
    uint32_t r = (x - 0x38000000u) >> 13, rem = x & 0x1FFF; /* rebias the exponent by 127 - 15 */
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) r++;
    return sign | (uint16_t)r;
}

void ffn_halves_to_f32(float *dst, const void *src_bytes, size_t n, int is_bf16) {
    /* In chunks through aligned buffers: the source may be unaligned,
     * and loops of a constant trip count over aligned arrays vectorise
     * at -O2 (the tail of the last chunk is zero-filled and dropped). */
    enum { CHUNK = 1024 };
    const unsigned char *src = src_bytes;
    uint16_t half[CHUNK];
    uint32_t wide[CHUNK];
    for (size_t i0 = 0; i0 < n; i0 += CHUNK) {
        size_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
        memcpy(half, src + 2 * i0, 2 * m);
        if (m < CHUNK) memset(half + m, 0, 2 * (CHUNK - m));
        if (is_bf16)
            for (size_t i = 0; i < CHUNK; i++) wide[i] = (uint32_t)half[i] << 16;
        else
            for (size_t i = 0; i < CHUNK; i++) wide[i] = f16_bits_to_f32_bits(half[i]);
        memcpy(dst + i0, wide, 4 * m);
    }
}
