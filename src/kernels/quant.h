/* quant.h -- the ggml block formats, byte for byte, and their scalar
 * decoders and encoders.  Internal; not installed.  The public face is
 * ffn/dtype.h, over the type table (src/kernels/types.c).
 *
 * The structs document the layouts (offsets are checked below); the code
 * reads blocks as bytes, because blocks in a file or a buffer have any
 * alignment.  The scalar decoders are the oracle of any SIMD kernel that
 * comes later: a fast kernel must produce the same floats.
 * fp16 fields are raw IEEE binary16 bits. */
#ifndef FFN_QUANT_H
#define FFN_QUANT_H

#include "base/common.h"
#include "base/dtype.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define QUANT_QK8_0 32
#define QUANT_QK4_0 32
#define QUANT_QK_K 256

typedef struct quant_block_q8_0 { /* 34 bytes, x = d·q */
    uint16_t d;
    int8_t qs[QUANT_QK8_0];
} quant_block_q8_0;

typedef struct quant_block_q4_0 { /* 18 bytes, x = d·(q − 8) */
    uint16_t d;
    uint8_t qs[QUANT_QK4_0 / 2]; /* element j: low nibble of qs[j]; j + 16: high nibble */
} quant_block_q4_0;

typedef struct quant_block_q4_K { /* 144 bytes, x = d·sc·q − dmin·m per sub-block of 32 */
    uint16_t d, dmin;
    uint8_t scales[12]; /* 8 six-bit scales and 8 six-bit mins (quant_scale_min_k4) */
    uint8_t qs[QUANT_QK_K / 2]; /* 64 elements per 32 bytes: low nibbles first, then high */
} quant_block_q4_K;

typedef struct quant_block_q6_K { /* 210 bytes, x = d·sc·(q − 32) per sub-block of 16 */
    uint8_t ql[QUANT_QK_K / 2]; /* low 4 bits */
    uint8_t qh[QUANT_QK_K / 4]; /* high 2 bits */
    int8_t scales[QUANT_QK_K / 16];
    uint16_t d;
} quant_block_q6_K;

/* The other 32-element formats (src/kernels/quant_legacy.c):
 *   q4_1    20 bytes: d, m (fp16), qs[16]; x = d·q + m, q = nibble (element
 *           j: low nibble of qs[j]; j + 16: high nibble, as q4_0).
 *   q5_0    22 bytes: d (fp16), qh[4], qs[16]; x = d·(q − 16), q = nibble |
 *           bit j of the little-endian uint32 qh << 4.
 *   q5_1    24 bytes: d, m (fp16), qh[4], qs[16]; x = d·q + m, q as q5_0.
 *   iq4_nl  18 bytes: d (fp16), qs[16]; x = d·quant_iq4nl_values[nibble]. */
typedef struct quant_block_q4_1 {
    uint16_t d, m;
    uint8_t qs[16];
} quant_block_q4_1;
typedef struct quant_block_q5_0 {
    uint16_t d;
    uint8_t qh[4], qs[16];
} quant_block_q5_0;
typedef struct quant_block_q5_1 {
    uint16_t d, m;
    uint8_t qh[4], qs[16];
} quant_block_q5_1;
_Static_assert(sizeof(quant_block_q4_1) == 20 && sizeof(quant_block_q5_0) == 22 &&
                   sizeof(quant_block_q5_1) == 24, "q4_1, q5_0, q5_1 blocks");
/* iq4_nl's 16 values (ggml's kvalues_iq4nl) */
extern const int8_t quant_iq4nl_values[16];

/* The 256-element formats of quant_k.c, as byte offsets (ggml's structs):
 *   q2_K   84 bytes, x = d·(sc & 15)·q − dmin·(sc >> 4), q in 0..3, per sub-block of 16:
 *          scales[16] @0 (4-bit scale | 4-bit min << 4), qs[64] @16, d @80, dmin @82.
 *          Element 128h + 32j + l (l < 32): bits 2j of qs[32h + l].
 *   q3_K   110 bytes, x = d·(s − 32)·(q − 4), q in 0..7, per sub-block of 16:
 *          hmask[32] @0 (bit 2 of q: element e in bit e/32 of hmask[e % 32]),
 *          qs[64] @32 (the low 2 bits, placed as q2_K's), scales[12] @96 (16 six-bit
 *          s: low 4 bits in nibbles of bytes 0..7, top 2 bits in bytes 8..11), d @108.
 *   q5_K   176 bytes, x = d·sc·q − dmin·m per sub-block of 32, q in 0..31:
 *          d @0, dmin @2, scales[12] @4 (as q4_K), qh[32] @16 (bit 4 of element
 *          64c + l in bit 2c of qh[l], of 64c + 32 + l in bit 2c + 1), qs[128] @48 (the
 *          low 4 bits, as q4_K's nibbles).
 *   iq4_xs 136 bytes, x = d·(s − 32)·v[q] per sub-block of 32, v the 16 values
 *          −127 .. 113 of ggml's kvalues_iq4nl: d @0, scales_h (u16) @2 (top 2 bits
 *          of s, 2 per sub-block), scales_l[4] @4 (low 4 bits, a nibble each),
 *          qs[128] @8 (16 bytes a sub-block: element j low nibble, j + 16 high). */
#define QUANT_Q2_K_BYTES 84
#define QUANT_Q3_K_BYTES 110
#define QUANT_Q5_K_BYTES 176
#define QUANT_IQ4_XS_BYTES 136

_Static_assert(sizeof(quant_block_q8_0) == 34, "q8_0 block");
_Static_assert(sizeof(quant_block_q4_0) == 18, "q4_0 block");
_Static_assert(sizeof(quant_block_q4_K) == 144 && offsetof(quant_block_q4_K, qs) == 16, "q4_K block");
_Static_assert(sizeof(quant_block_q6_K) == 210 && offsetof(quant_block_q6_K, d) == 208, "q6_K block");

/* Scale and min of sub-block j (0..7) of a q4_K block from its 12 bytes:
 * sub-blocks 0-3 keep 6 bits in bytes j and j + 4; sub-blocks 4-7 keep
 * their low 4 bits in byte j + 4 (scale low nibble, min high nibble) and
 * their top 2 bits in the top bits of bytes j − 4 (scale) and j (min). */
static inline void quant_scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* All eight at once (the same values, by 32-bit masks): out[0..7] the
 * scales, out[8..15] the mins.  The SIMD kernels of q4_K and q5_K. */
static inline void quant_scales_mins_k4(const uint8_t *q, uint8_t out[16]) {
    uint32_t u[4];
    memcpy(u, q, 12);
    const uint32_t m6 = 0x3f3f3f3f, m4 = 0x0f0f0f0f, m2 = 0x03030303;
    u[3] = ((u[2] >> 4) & m4) | (((u[1] >> 6) & m2) << 4); /* mins 4..7 */
    const uint32_t mins03 = u[1] & m6;
    u[1] = (u[2] & m4) | (((u[0] >> 6) & m2) << 4); /* scales 4..7 */
    u[2] = mins03;
    u[0] &= m6; /* scales 0..3 */
    memcpy(out, u, 16);
}

/* Decoders and encoders of nb whole blocks (any alignment). */
void quant_dequantize_q8_0(const uint8_t *src, float *dst, int64_t nb);
void quant_dequantize_q4_0(const uint8_t *src, float *dst, int64_t nb);
void quant_dequantize_q4_K(const uint8_t *src, float *dst, int64_t nb);
void quant_dequantize_q6_K(const uint8_t *src, float *dst, int64_t nb);
void quant_dequantize_q2_K(const uint8_t *src, float *dst, int64_t nb);
void quant_dequantize_q3_K(const uint8_t *src, float *dst, int64_t nb);
void quant_dequantize_q5_K(const uint8_t *src, float *dst, int64_t nb);
void quant_dequantize_iq4_xs(const uint8_t *src, float *dst, int64_t nb);
void quant_quantize_q2_K(const float *src, uint8_t *dst, int64_t nb);
void quant_quantize_q3_K(const float *src, uint8_t *dst, int64_t nb);
void quant_quantize_q5_K(const float *src, uint8_t *dst, int64_t nb);
void quant_quantize_iq4_xs(const float *src, uint8_t *dst, int64_t nb);
void quant_quantize_q8_0(const float *src, uint8_t *dst, int64_t nb);
void quant_quantize_q4_0(const float *src, uint8_t *dst, int64_t nb);
void quant_quantize_q4_K(const float *src, uint8_t *dst, int64_t nb);
void quant_quantize_q6_K(const float *src, uint8_t *dst, int64_t nb);
void quant_dequantize_q4_1(const uint8_t *src, float *dst, int64_t nb);
void quant_dequantize_q5_0(const uint8_t *src, float *dst, int64_t nb);
void quant_dequantize_q5_1(const uint8_t *src, float *dst, int64_t nb);
void quant_dequantize_iq4_nl(const uint8_t *src, float *dst, int64_t nb);
void quant_quantize_q4_1(const float *src, uint8_t *dst, int64_t nb);
void quant_quantize_q5_0(const float *src, uint8_t *dst, int64_t nb);
void quant_quantize_q5_1(const float *src, uint8_t *dst, int64_t nb);
void quant_quantize_iq4_nl(const float *src, uint8_t *dst, int64_t nb);
/* The 1-element types: n elements. */
void quant_dequantize_f32(const uint8_t *src, float *dst, int64_t n);
void quant_dequantize_f16(const uint8_t *src, float *dst, int64_t n);
void quant_dequantize_bf16(const uint8_t *src, float *dst, int64_t n);
void quant_dequantize_f64(const uint8_t *src, float *dst, int64_t n);
void quant_quantize_f32(const float *src, uint8_t *dst, int64_t n);
void quant_quantize_f16(const float *src, uint8_t *dst, int64_t n);
void quant_quantize_bf16(const float *src, uint8_t *dst, int64_t n);

#endif /* FFN_QUANT_H */
