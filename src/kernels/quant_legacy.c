/* quant_legacy.c -- the reference decoders and encoders of ggml's other
 * 32-element block formats: q4_1, q5_0, q5_1 and iq4_nl (layouts in
 * quant.h).  Like quant.c: decoders follow ggml's dequantize_row_<t>
 * operation for operation in fp32 (no FMA in this file's build, so nothing
 * is contracted), encoders ggml's quantize_row_<t>_ref rounding, so the
 * bytes equal ggml's (tests/llamacpp/quant_ref.py compares both through
 * libggml-base).  Where ggml's reference is undefined (a scale whose
 * inverse overflows, so the cast of an infinity to an integer) these
 * saturate; an iq4_nl block of all |x| < 1e-15 is written with d = 0 and
 * zero indices (ggml leaves them as the previous block's). */
#include "kernels/quant.h"
#include "kernels/quant_bits.h"

#include <float.h>
#include <math.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "quant_legacy.c assumes a little-endian host (the block formats are little-endian)"
#endif

const int8_t quant_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                       1,    13,   25,  38,  53,  69,  89,  113};

/* (int)v for v in [lo, hi] after clamping: the truncating cast of ggml's
 * reference, defined for every input (NaN goes to lo). */
static inline int lg_trunc(float v, float lo, float hi) {
    return v >= lo ? (v <= hi ? (int)v : (int)hi) : (int)lo;
}

/* ---- q4_1: x = d·q + m, q in 0..15 ---------------------------------------------- */

void quant_dequantize_q4_1(const uint8_t *src, float *dst, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 20, dst += 32) {
        const float d = qb_load_f16(src), m = qb_load_f16(src + 2);
        const uint8_t *qs = src + 4;
        for (int j = 0; j < 16; j++) {
            dst[j] = (float)(qs[j] & 0x0F) * d + m;
            dst[j + 16] = (float)(qs[j] >> 4) * d + m;
        }
    }
}

/* The head of a q4_1 / q5_1 block of 32 at dst: d = (max − min) / levels
 * and m = min as fp16; *mn gets min, *id 1/d (0 for a constant block). */
static void lg_min_scale(const float *x, float levels, uint8_t *dst, float *mn, float *id) {
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < 32; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    const float d = (hi - lo) / levels;
    *id = d != 0.0f ? 1.0f / d : 0.0f;
    *mn = lo;
    qb_store_f16(dst, d);
    qb_store_f16(dst + 2, lo);
}

/* ggml's reference: d = (max − min) / 15, m = min, q = min(15, trunc((x − min)·(1/d) + 0.5)). */
void quant_quantize_q4_1(const float *src, uint8_t *dst, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 32, dst += 20) {
        float mn, id;
        lg_min_scale(src, 15.0f, dst, &mn, &id);
        for (int j = 0; j < 16; j++) {
            const int q0 = lg_trunc((src[j] - mn) * id + 0.5f, 0.0f, 15.0f);
            const int q1 = lg_trunc((src[j + 16] - mn) * id + 0.5f, 0.0f, 15.0f);
            dst[4 + j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

/* ---- q5_0 / q5_1: the fifth bit of element j is bit j of qh ---------------------- */

static inline void lg_q5_decode(const uint8_t *qh4, const uint8_t *qs, int q[32]) {
    uint32_t qh;
    memcpy(&qh, qh4, 4);
    for (int j = 0; j < 16; j++) {
        q[j] = (qs[j] & 0x0F) | (int)(((qh >> j) << 4) & 0x10);
        q[j + 16] = (qs[j] >> 4) | (int)((qh >> (j + 12)) & 0x10);
    }
}

static inline void lg_q5_encode(const int q[32], uint8_t *qh4, uint8_t *qs) {
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4));
        qh |= ((uint32_t)(q[j] & 0x10) >> 4) << j;
        qh |= ((uint32_t)(q[j + 16] & 0x10) >> 4) << (j + 16);
    }
    memcpy(qh4, &qh, 4);
}

void quant_dequantize_q5_0(const uint8_t *src, float *dst, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 22, dst += 32) {
        const float d = qb_load_f16(src);
        int q[32];
        lg_q5_decode(src + 2, src + 6, q);
        for (int j = 0; j < 32; j++) dst[j] = (float)(q[j] - 16) * d;
    }
}

/* ggml's reference: the element of largest magnitude (the first on a tie)
 * maps to −16, d = max / −16, q = min(31, trunc(x · (1/d) + 16.5)). */
void quant_quantize_q5_0(const float *src, uint8_t *dst, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 32, dst += 22) {
        const float d = qb_signed_max(src, 32, NULL) / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        qb_store_f16(dst, d);
        int q[32];
        for (int j = 0; j < 32; j++) q[j] = lg_trunc(src[j] * id + 16.5f, 0.0f, 31.0f);
        lg_q5_encode(q, dst + 2, dst + 6);
    }
}

void quant_dequantize_q5_1(const uint8_t *src, float *dst, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 24, dst += 32) {
        const float d = qb_load_f16(src), m = qb_load_f16(src + 2);
        int q[32];
        lg_q5_decode(src + 4, src + 8, q);
        for (int j = 0; j < 32; j++) dst[j] = (float)q[j] * d + m;
    }
}

/* ggml's reference: d = (max − min) / 31, m = min, q = trunc((x − min)·(1/d) + 0.5). */
void quant_quantize_q5_1(const float *src, uint8_t *dst, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 32, dst += 24) {
        float mn, id;
        lg_min_scale(src, 31.0f, dst, &mn, &id);
        int q[32];
        for (int j = 0; j < 32; j++) q[j] = lg_trunc((src[j] - mn) * id + 0.5f, 0.0f, 31.0f);
        lg_q5_encode(q, dst + 4, dst + 8);
    }
}

/* ---- iq4_nl: x = d·values[q] ----------------------------------------------------- */

void quant_dequantize_iq4_nl(const uint8_t *src, float *dst, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 18, dst += 32) {
        const float d = qb_load_f16(src);
        const uint8_t *qs = src + 2;
        for (int j = 0; j < 16; j++) {
            dst[j] = d * (float)quant_iq4nl_values[qs[j] & 0x0F];
            dst[j + 16] = d * (float)quant_iq4nl_values[qs[j] >> 4];
        }
    }
}

/* The index of the value nearest to v (the lower one on a tie), by
 * bisection as ggml's best_index_int8. */
static int lg_iq4_index(float v) {
    const int8_t *val = quant_iq4nl_values;
    if (!(v > val[0])) return 0; /* also NaN (an infinite scale) */
    if (v >= val[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (v < val[mid]) hi = mid;
        else lo = mid;
    }
    return v - val[hi - 1] < val[hi] - v ? hi - 1 : hi;
}

/* ggml's reference (no importance weights, no search): the element of
 * largest magnitude maps to −127, each element to its nearest value, and d
 * refitted by weighted least squares, weights x²: d = Σ w q x / Σ w q². */
void quant_quantize_iq4_nl(const float *src, uint8_t *dst, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 32, dst += 18) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; j++) {
            const float ax = fabsf(src[j]);
            if (ax > amax) {
                amax = ax;
                max = src[j];
            }
        }
        uint8_t l[32] = {0};
        float d = 0.0f;
        if (!(amax < 1e-15f)) {
            const float id = 1.0f / (max / (float)quant_iq4nl_values[0]);
            float sumqx = 0.0f, sumq2 = 0.0f;
            for (int j = 0; j < 32; j++) {
                l[j] = (uint8_t)lg_iq4_index(id * src[j]);
                const float q = (float)quant_iq4nl_values[l[j]], w = src[j] * src[j];
                sumqx += w * q * src[j];
                sumq2 += w * q * q;
            }
            d = sumq2 > 0.0f ? sumqx / sumq2 : 0.0f;
        }
        qb_store_f16(dst, d);
        for (int j = 0; j < 16; j++) dst[2 + j] = (uint8_t)(l[j] | (l[j + 16] << 4));
    }
}
