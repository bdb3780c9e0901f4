/* quant.c -- the reference decoders (fp32 out) and encoders (fp32 in) of
 * the ggml tensor types ffn converts; the table that lists them, and the
 * public ffn_ggml_* functions over it, are src/kernels/types.c.
 *
 * Decoders follow ggml's formulas operation for operation in fp32 (this
 * file is built without FMA, so nothing is contracted), which makes them
 * the oracle of later SIMD kernels.  The q8_0 and q4_0 encoders follow
 * ggml's reference rounding (so the bytes match ggml's); the q4_K and q6_K
 * encoders choose their scales by their own small search.
 * What does not live here: files (src/format/gguf.c), the table (types.c). */
#include "kernels/quant.h"
#include "kernels/quant_bits.h"

#include <math.h>
#include <string.h>
#include <strings.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "quant.c assumes a little-endian host (the block formats are little-endian)"
#endif

/* ---- helpers ------------------------------------------------------------ */

static inline float clampf(float v, float lo, float hi) { return v < lo ? lo : (v > hi ? hi : v); }

#define F16_MAX 65504.0f

/* ---- q8_0 ----------------------------------------------------------------- */

void quant_dequantize_q8_0(const uint8_t *src, float *dst, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 34, dst += 32) {
        const float d = qb_load_f16(src);
        const int8_t *qs = (const int8_t *)(src + 2);
        for (int j = 0; j < 32; j++) dst[j] = (float)qs[j] * d;
    }
}

/* ggml's reference: d = amax / 127 and q = round(x / d), half away from
 * zero, with x / d computed as x · (1 / d) in fp32.  A scale whose inverse
 * overflows (amax below about 2^-121; its fp16 is 0) saturates instead of
 * ggml's undefined cast. */
void quant_quantize_q8_0(const float *src, uint8_t *dst, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 32, dst += 34) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) {
            const float a = fabsf(src[j]);
            amax = amax > a ? amax : a;
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        qb_store_f16(dst, d);
        for (int j = 0; j < 32; j++) {
            const float r = roundf(clampf(src[j] * id, -127.0f, 127.0f));
            dst[2 + j] = (uint8_t)(int8_t)r;
        }
    }
}

/* ---- q4_0 ----------------------------------------------------------------- */

void quant_dequantize_q4_0(const uint8_t *src, float *dst, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 18, dst += 32) {
        const float d = qb_load_f16(src);
        const uint8_t *qs = src + 2;
        for (int j = 0; j < 16; j++) {
            dst[j] = (float)((qs[j] & 0x0F) - 8) * d;
            dst[j + 16] = (float)((qs[j] >> 4) - 8) * d;
        }
    }
}

/* ggml's reference: the element of largest magnitude (the first one on a
 * tie) maps to −8, d = max / −8, and q = min(15, trunc(x · (1/d) + 8.5)). */
void quant_quantize_q4_0(const float *src, uint8_t *dst, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 32, dst += 18) {
        const float d = qb_signed_max(src, 32, NULL) / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        qb_store_f16(dst, d);
        for (int j = 0; j < 16; j++) {
            /* x · id lies in [−8, 8] up to rounding, so the sum is in
             * [0.5, 16.5]; the clamp only matters for an infinite id. */
            const float t0 = clampf(src[j] * id + 8.5f, 0.0f, 15.0f);
            const float t1 = clampf(src[j + 16] * id + 8.5f, 0.0f, 15.0f);
            dst[2 + j] = (uint8_t)((int)t0 | ((int)t1 << 4));
        }
    }
}

/* ---- q4_K ----------------------------------------------------------------- */

void quant_dequantize_q4_K(const uint8_t *src, float *dst, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 144) {
        const float d = qb_load_f16(src), min = qb_load_f16(src + 2);
        const uint8_t *scales = src + 4, *q = src + 16;
        for (int j = 0; j < 256; j += 64, q += 32) {
            uint8_t sc, m;
            quant_scale_min_k4(j / 32, scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            quant_scale_min_k4(j / 32 + 1, scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++) *dst++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *dst++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

/* Squared error of x ≈ step·q − off over n values, q = round((x + off) / step) in [0, 15]. */
static float q4k_sse(const float *x, int n, float step, float off) {
    float sse = 0.0f;
    const float inv = step > 0.0f ? 1.0f / step : 0.0f;
    for (int l = 0; l < n; l++) {
        const int q = qb_nearest(clampf((x[l] + off) * inv, 0.0f, 15.0f));
        const float e = step * (float)q - off - x[l];
        sse += e * e;
    }
    return sse;
}

/* The step and offset (>= 0) of one sub-block of 32: the min/max grid,
 * then scaled variants each refitted by least squares on its assignment;
 * the one of least squared error wins. */
static void q4k_fit(const float *x, float *step_out, float *off_out) {
    float mn = x[0], mx = x[0];
    for (int l = 1; l < 32; l++) {
        mn = x[l] < mn ? x[l] : mn;
        mx = x[l] > mx ? x[l] : mx;
    }
    if (mn > 0.0f) mn = 0.0f;
    float best_step = (mx - mn) / 15.0f, best_off = -mn;
    if (!(best_step > 0.0f)) {
        *step_out = 0.0f;
        *off_out = -mn;
        return;
    }
    float best = q4k_sse(x, 32, best_step, best_off);
    for (int k = -6; k <= 6; k++) {
        const float inv = (15.0f + 0.2f * (float)k) / (mx - mn);
        double sq = 0, sq2 = 0, sx = 0, sqx = 0;
        for (int l = 0; l < 32; l++) {
            const int q = qb_nearest(clampf((x[l] - mn) * inv, 0.0f, 15.0f));
            sq += q;
            sq2 += (double)q * q;
            sx += x[l];
            sqx += (double)q * x[l];
        }
        const double den = 32.0 * sq2 - sq * sq;
        if (den <= 0) continue;
        double s = (32.0 * sqx - sq * sx) / den, o = (s * sq - sx) / 32.0;
        if (o < 0) { /* the offset cannot be negative: refit the step alone */
            o = 0;
            s = sq2 > 0 ? sqx / sq2 : 0;
        }
        if (!(s > 0)) continue;
        const float e = q4k_sse(x, 32, (float)s, (float)o);
        if (e < best) {
            best = e;
            best_step = (float)s;
            best_off = (float)o;
        }
    }
    *step_out = best_step;
    *off_out = best_off;
}

void quant_quantize_q4_K(const float *src, uint8_t *dst, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 256, dst += 144) {
        float step[8], off[8], max_step = 0.0f, max_off = 0.0f;
        for (int j = 0; j < 8; j++) {
            q4k_fit(src + 32 * j, &step[j], &off[j]);
            max_step = step[j] > max_step ? step[j] : max_step;
            max_off = off[j] > max_off ? off[j] : max_off;
        }
        qb_store_f16(dst, clampf(max_step / 63.0f, 0.0f, F16_MAX));
        qb_store_f16(dst + 2, clampf(max_off / 63.0f, 0.0f, F16_MAX));
        const float d = qb_load_f16(dst), dmin = qb_load_f16(dst + 2);
        uint8_t sc[8], m[8];
        for (int j = 0; j < 8; j++) {
            sc[j] = d > 0.0f ? (uint8_t)qb_nearest(clampf(step[j] / d, 0.0f, 63.0f)) : 0;
            m[j] = dmin > 0.0f ? (uint8_t)qb_nearest(clampf(off[j] / dmin, 0.0f, 63.0f)) : 0;
        }
        uint8_t *scales = dst + 4, *qs = dst + 16;
        for (int j = 0; j < 4; j++) {
            scales[j] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
            scales[j + 4] = (uint8_t)(m[j] | ((m[j + 4] >> 4) << 6));
            scales[j + 8] = (uint8_t)((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
        }
        uint8_t q[256];
        for (int j = 0; j < 8; j++) {
            const float D = d * sc[j], M = dmin * m[j];
            for (int l = 0; l < 32; l++)
                q[32 * j + l] = D > 0.0f ? (uint8_t)qb_nearest(clampf((src[32 * j + l] + M) / D, 0.0f, 15.0f)) : 0;
        }
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) qs[32 * c + l] = (uint8_t)(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
    }
}

/* ---- q6_K ----------------------------------------------------------------- */

void quant_dequantize_q6_K(const uint8_t *src, float *dst, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 210) {
        const float d = qb_load_f16(src + 208);
        const uint8_t *ql = src, *qh = src + 128;
        const int8_t *sc = (const int8_t *)(src + 192);
        for (int n = 0; n < 256; n += 128, dst += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                dst[l] = d * sc[is] * (float)q1;
                dst[l + 32] = d * sc[is + 2] * (float)q2;
                dst[l + 64] = d * sc[is + 4] * (float)q3;
                dst[l + 96] = d * sc[is + 6] * (float)q4;
            }
        }
    }
}

static float q6k_sse(const float *x, float s) {
    float sse = 0.0f;
    const float inv = 1.0f / s;
    for (int l = 0; l < 16; l++) {
        const int q = qb_nearest(clampf(x[l] * inv, -32.0f, 31.0f));
        const float e = s * (float)q - x[l];
        sse += e * e;
    }
    return sse;
}

void quant_quantize_q6_K(const float *src, uint8_t *dst, int64_t nb) {
    static const float nmax[] = {32.0f, 31.75f, 31.5f, 31.25f, 31.0f, 30.5f, 30.0f};
    for (int64_t i = 0; i < nb; i++, src += 256, dst += 210) {
        float s[16], max_scale = 0.0f, max_abs = 0.0f;
        for (int ib = 0; ib < 16; ib++) {
            const float *x = src + 16 * ib;
            float amax;
            const float max = qb_signed_max(x, 16, &amax);
            s[ib] = 0.0f;
            if (amax > 0.0f) { /* the extreme maps to about −32, the one end of [−32, 31] reached by both signs */
                float best = INFINITY;
                for (size_t k = 0; k < sizeof nmax / sizeof nmax[0]; k++) {
                    const float cand = max / -nmax[k];
                    if (cand == 0.0f) continue;
                    const float e = q6k_sse(x, cand);
                    if (e < best) {
                        best = e;
                        s[ib] = cand;
                    }
                }
            }
            if (fabsf(s[ib]) > max_abs) {
                max_abs = fabsf(s[ib]);
                max_scale = s[ib];
            }
        }
        qb_store_f16(dst + 208, max_abs > 0.0f ? clampf(max_scale / -128.0f, -F16_MAX, F16_MAX) : 0.0f);
        const float d = qb_load_f16(dst + 208);
        int8_t sc[16];
        for (int ib = 0; ib < 16; ib++)
            sc[ib] = d != 0.0f ? (int8_t)qb_nearest(clampf(s[ib] / d, -128.0f, 127.0f)) : 0;
        uint8_t L[256];
        for (int ib = 0; ib < 16; ib++) {
            const float D = d * sc[ib];
            for (int l = 0; l < 16; l++) {
                const int q = D != 0.0f ? qb_nearest(clampf(src[16 * ib + l] / D, -32.0f, 31.0f)) : 0;
                L[16 * ib + l] = (uint8_t)(q + 32);
            }
        }
        uint8_t *ql = dst, *qh = dst + 128;
        memcpy(dst + 192, sc, 16);
        for (int h = 0; h < 2; h++, ql += 64, qh += 32) {
            const uint8_t *Lh = L + 128 * h;
            for (int l = 0; l < 32; l++) {
                const uint8_t l1 = Lh[l], l2 = Lh[l + 32], l3 = Lh[l + 64], l4 = Lh[l + 96];
                ql[l] = (uint8_t)((l1 & 0xF) | ((l3 & 0xF) << 4));
                ql[l + 32] = (uint8_t)((l2 & 0xF) | ((l4 & 0xF) << 4));
                qh[l] = (uint8_t)((l1 >> 4) | ((l2 >> 4) << 2) | ((l3 >> 4) << 4) | ((l4 >> 4) << 6));
            }
        }
    }
}

/* ---- the 1-element types ------------------------------------------------------ */

void quant_dequantize_f32(const uint8_t *src, float *dst, int64_t n) {
    if (n) memcpy(dst, src, (size_t)n * 4);
}
void quant_dequantize_f16(const uint8_t *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = qb_load_f16(src + 2 * i);
}
void quant_dequantize_bf16(const uint8_t *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        uint16_t b;
        memcpy(&b, src + 2 * i, 2);
        dst[i] = ffn_bf16_to_f32(b);
    }
}
void quant_dequantize_f64(const uint8_t *src, float *dst, int64_t n) {
    ffn_f64_bytes_to_f32(dst, src, (size_t)n);
}
void quant_quantize_f32(const float *src, uint8_t *dst, int64_t n) {
    if (n) memcpy(dst, src, (size_t)n * 4);
}
void quant_quantize_f16(const float *src, uint8_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) qb_store_f16(dst + 2 * i, src[i]);
}
void quant_quantize_bf16(const float *src, uint8_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        uint16_t b = ffn_f32_to_bf16(src[i]);
        memcpy(dst + 2 * i, &b, 2);
    }
}
