/* quant.c -- the ggml tensor types: the table of block sizes, scalar
 * decoders (fp32 out) and encoders (fp32 in) of f16, bf16, q8_0, q4_0,
 * q4_K and q6_K, and the public ffn_ggml_* functions (include/ffn/gguf.h).
 *
 * Decoders follow ggml's formulas operation for operation in fp32 (this
 * file is built without FMA, so nothing is contracted), which makes them
 * the oracle of later SIMD kernels.  The q8_0 and q4_0 encoders follow
 * ggml's reference rounding (so the bytes match ggml's); the q4_K and q6_K
 * encoders choose their scales by their own small search.
 * What does not live here: files (src/format/gguf.c). */
#include "kernels/quant.h"

#include <math.h>
#include <string.h>
#include <strings.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "quant.c assumes a little-endian host (the block formats are little-endian)"
#endif

/* ---- helpers ------------------------------------------------------------ */

static inline float load_f16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return ffn_f16_to_f32(h);
}
static inline void store_f16(uint8_t *p, float f) {
    uint16_t h = ffn_f32_to_f16(f);
    memcpy(p, &h, 2);
}
/* Round to nearest, ties to even, for |v| < 2^22 (callers clamp first):
 * adding 1.5·2^23 leaves the rounded integer in the low mantissa bits,
 * without a call into libm. */
static inline int nearest(float v) {
    float shifted = v + 12582912.0f;
    int32_t bits;
    memcpy(&bits, &shifted, 4);
    return (bits & 0x007FFFFF) - 0x00400000;
}
static inline float clampf(float v, float lo, float hi) { return v < lo ? lo : (v > hi ? hi : v); }

#define F16_MAX 65504.0f

/* ---- q8_0 ----------------------------------------------------------------- */

void quant_dequantize_q8_0(const uint8_t *src, float *dst, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 34, dst += 32) {
        const float d = load_f16(src);
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
        store_f16(dst, d);
        for (int j = 0; j < 32; j++) {
            const float r = roundf(clampf(src[j] * id, -127.0f, 127.0f));
            dst[2 + j] = (uint8_t)(int8_t)r;
        }
    }
}

/* ---- q4_0 ----------------------------------------------------------------- */

void quant_dequantize_q4_0(const uint8_t *src, float *dst, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 18, dst += 32) {
        const float d = load_f16(src);
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
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; j++) {
            if (amax < fabsf(src[j])) {
                amax = fabsf(src[j]);
                max = src[j];
            }
        }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        store_f16(dst, d);
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
        const float d = load_f16(src), min = load_f16(src + 2);
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
        const int q = nearest(clampf((x[l] + off) * inv, 0.0f, 15.0f));
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
            const int q = nearest(clampf((x[l] - mn) * inv, 0.0f, 15.0f));
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
        store_f16(dst, clampf(max_step / 63.0f, 0.0f, F16_MAX));
        store_f16(dst + 2, clampf(max_off / 63.0f, 0.0f, F16_MAX));
        const float d = load_f16(dst), dmin = load_f16(dst + 2);
        uint8_t sc[8], m[8];
        for (int j = 0; j < 8; j++) {
            sc[j] = d > 0.0f ? (uint8_t)nearest(clampf(step[j] / d, 0.0f, 63.0f)) : 0;
            m[j] = dmin > 0.0f ? (uint8_t)nearest(clampf(off[j] / dmin, 0.0f, 63.0f)) : 0;
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
                q[32 * j + l] = D > 0.0f ? (uint8_t)nearest(clampf((src[32 * j + l] + M) / D, 0.0f, 15.0f)) : 0;
        }
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) qs[32 * c + l] = (uint8_t)(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
    }
}

/* ---- q6_K ----------------------------------------------------------------- */

void quant_dequantize_q6_K(const uint8_t *src, float *dst, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 210) {
        const float d = load_f16(src + 208);
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
        const int q = nearest(clampf(x[l] * inv, -32.0f, 31.0f));
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
            float amax = 0.0f, max = 0.0f;
            for (int l = 0; l < 16; l++) {
                if (amax < fabsf(x[l])) {
                    amax = fabsf(x[l]);
                    max = x[l];
                }
            }
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
        store_f16(dst + 208, max_abs > 0.0f ? clampf(max_scale / -128.0f, -F16_MAX, F16_MAX) : 0.0f);
        const float d = load_f16(dst + 208);
        int8_t sc[16];
        for (int ib = 0; ib < 16; ib++)
            sc[ib] = d != 0.0f ? (int8_t)nearest(clampf(s[ib] / d, -128.0f, 127.0f)) : 0;
        uint8_t L[256];
        for (int ib = 0; ib < 16; ib++) {
            const float D = d * sc[ib];
            for (int l = 0; l < 16; l++) {
                const int q = D != 0.0f ? nearest(clampf(src[16 * ib + l] / D, -32.0f, 31.0f)) : 0;
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

/* ---- the type table --------------------------------------------------------- */

typedef struct qtype_info {
    const char *name;
    int64_t block;  /* elements per block */
    size_t size;    /* bytes per block */
    int decode;     /* ffn converts it to fp32 */
    int encode;     /* ffn converts fp32 to it */
} qtype_info;

static const qtype_info qtypes[FFN_GGML_TYPE_COUNT] = {
    [FFN_GGML_TYPE_F32] = {"f32", 1, 4, 1, 1},
    [FFN_GGML_TYPE_F16] = {"f16", 1, 2, 1, 1},
    [FFN_GGML_TYPE_Q4_0] = {"q4_0", 32, 18, 1, 1},
    [FFN_GGML_TYPE_Q4_1] = {"q4_1", 32, 20, 0, 0},
    [FFN_GGML_TYPE_Q5_0] = {"q5_0", 32, 22, 0, 0},
    [FFN_GGML_TYPE_Q5_1] = {"q5_1", 32, 24, 0, 0},
    [FFN_GGML_TYPE_Q8_0] = {"q8_0", 32, 34, 1, 1},
    [FFN_GGML_TYPE_Q8_1] = {"q8_1", 32, 36, 0, 0},
    [FFN_GGML_TYPE_Q2_K] = {"q2_K", 256, 84, 0, 0},
    [FFN_GGML_TYPE_Q3_K] = {"q3_K", 256, 110, 0, 0},
    [FFN_GGML_TYPE_Q4_K] = {"q4_K", 256, 144, 1, 1},
    [FFN_GGML_TYPE_Q5_K] = {"q5_K", 256, 176, 0, 0},
    [FFN_GGML_TYPE_Q6_K] = {"q6_K", 256, 210, 1, 1},
    [FFN_GGML_TYPE_Q8_K] = {"q8_K", 256, 292, 0, 0},
    [FFN_GGML_TYPE_IQ2_XXS] = {"iq2_xxs", 256, 66, 0, 0},
    [FFN_GGML_TYPE_IQ2_XS] = {"iq2_xs", 256, 74, 0, 0},
    [FFN_GGML_TYPE_IQ3_XXS] = {"iq3_xxs", 256, 98, 0, 0},
    [FFN_GGML_TYPE_IQ1_S] = {"iq1_s", 256, 50, 0, 0},
    [FFN_GGML_TYPE_IQ4_NL] = {"iq4_nl", 32, 18, 0, 0},
    [FFN_GGML_TYPE_IQ3_S] = {"iq3_s", 256, 110, 0, 0},
    [FFN_GGML_TYPE_IQ2_S] = {"iq2_s", 256, 82, 0, 0},
    [FFN_GGML_TYPE_IQ4_XS] = {"iq4_xs", 256, 136, 0, 0},
    [FFN_GGML_TYPE_I8] = {"i8", 1, 1, 0, 0},
    [FFN_GGML_TYPE_I16] = {"i16", 1, 2, 0, 0},
    [FFN_GGML_TYPE_I32] = {"i32", 1, 4, 0, 0},
    [FFN_GGML_TYPE_I64] = {"i64", 1, 8, 0, 0},
    [FFN_GGML_TYPE_F64] = {"f64", 1, 8, 1, 0},
    [FFN_GGML_TYPE_IQ1_M] = {"iq1_m", 256, 56, 0, 0},
    [FFN_GGML_TYPE_BF16] = {"bf16", 1, 2, 1, 1},
    [FFN_GGML_TYPE_TQ1_0] = {"tq1_0", 256, 54, 0, 0},
    [FFN_GGML_TYPE_TQ2_0] = {"tq2_0", 256, 66, 0, 0},
    [FFN_GGML_TYPE_MXFP4] = {"mxfp4", 32, 17, 0, 0},
};

static const qtype_info *qtype(ffn_ggml_type t) {
    if ((unsigned)t >= FFN_GGML_TYPE_COUNT || !qtypes[t].name) return NULL;
    return &qtypes[t];
}

const char *ffn_ggml_type_name(ffn_ggml_type type) {
    const qtype_info *q = qtype(type);
    return q ? q->name : "?";
}

int ffn_ggml_type_parse(const char *name, ffn_ggml_type *out) {
    if (!name) return 0;
    for (int t = 0; t < FFN_GGML_TYPE_COUNT; t++) {
        if (qtypes[t].name && !strcasecmp(name, qtypes[t].name)) {
            if (out) *out = (ffn_ggml_type)t;
            return 1;
        }
    }
    return 0;
}

/* The table row of a type, or an all-zero row for an unknown one (block 0,
 * size 0, neither decoded nor encoded). */
static const qtype_info *qtype_or_none(ffn_ggml_type t) {
    static const qtype_info none;
    const qtype_info *q = qtype(t);
    return q ? q : &none;
}

int64_t ffn_ggml_block_size(ffn_ggml_type type) { return qtype_or_none(type)->block; }
size_t ffn_ggml_type_size(ffn_ggml_type type) { return qtype_or_none(type)->size; }
int ffn_ggml_can_dequantize(ffn_ggml_type type) { return qtype_or_none(type)->decode; }
int ffn_ggml_can_quantize(ffn_ggml_type type) { return qtype_or_none(type)->encode; }

ffn_status ffn_ggml_row_size(ffn_ggml_type type, int64_t n, size_t *bytes) {
    const qtype_info *q = qtype(type);
    if (!q) return ffn_error(FFN_ERR_UNSUPPORTED, "ggml type %d: not a known type", (int)type);
    if (n < 0 || n % q->block != 0)
        return ffn_error(FFN_ERR_INVALID_ARG,
                         "%s: a row of %lld elements: expected a multiple of the block size %lld", q->name,
                         (long long)n, (long long)q->block);
    size_t r;
    if (ffn_mul_size((size_t)(n / q->block), q->size, &r))
        return ffn_error(FFN_ERR_OVERFLOW, "%s: a row of %lld elements overflows size_t", q->name, (long long)n);
    if (bytes) *bytes = r;
    return FFN_OK;
}

ffn_status ffn_ggml_dequantize_row(ffn_ggml_type type, const void *src, float *dst, int64_t n) {
    size_t bytes;
    ffn_status s = ffn_ggml_row_size(type, n, &bytes);
    if (s != FFN_OK) return s;
    if (n > 0 && (!src || !dst)) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_ggml_dequantize_row: NULL buffer");
    const uint8_t *p = src;
    const int64_t nb = n / qtypes[type].block;
    switch (type) {
    case FFN_GGML_TYPE_F32: if (n) memcpy(dst, p, bytes); return FFN_OK;
    case FFN_GGML_TYPE_F16:
        for (int64_t i = 0; i < n; i++) dst[i] = load_f16(p + 2 * i);
        return FFN_OK;
    case FFN_GGML_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t b;
            memcpy(&b, p + 2 * i, 2);
            dst[i] = ffn_bf16_to_f32(b);
        }
        return FFN_OK;
    case FFN_GGML_TYPE_F64:
        ffn_f64_bytes_to_f32(dst, p, (size_t)n);
        return FFN_OK;
    case FFN_GGML_TYPE_Q8_0: quant_dequantize_q8_0(p, dst, nb); return FFN_OK;
    case FFN_GGML_TYPE_Q4_0: quant_dequantize_q4_0(p, dst, nb); return FFN_OK;
    case FFN_GGML_TYPE_Q4_K: quant_dequantize_q4_K(p, dst, nb); return FFN_OK;
    case FFN_GGML_TYPE_Q6_K: quant_dequantize_q6_K(p, dst, nb); return FFN_OK;
    default: break;
    }
    return ffn_error(FFN_ERR_UNSUPPORTED, "%s: ffn cannot decode this type (it decodes f32, f16, bf16, f64, "
                     "q8_0, q4_0, q4_K, q6_K)", qtypes[type].name);
}

ffn_status ffn_ggml_quantize_row(ffn_ggml_type type, const float *src, void *dst, int64_t n) {
    size_t bytes;
    ffn_status s = ffn_ggml_row_size(type, n, &bytes);
    if (s != FFN_OK) return s;
    if (n > 0 && (!src || !dst)) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_ggml_quantize_row: NULL buffer");
    if (!qtypes[type].encode)
        return ffn_error(FFN_ERR_UNSUPPORTED, "%s: ffn cannot encode this type (it encodes f32, f16, bf16, "
                         "q8_0, q4_0, q4_K, q6_K)", qtypes[type].name);
    uint8_t *p = dst;
    const int64_t nb = n / qtypes[type].block;
    if (qtypes[type].block > 1)
        for (int64_t i = 0; i < n; i++)
            if (!isfinite(src[i]))
                return ffn_error(FFN_ERR_INVALID_ARG, "%s: element %lld is %g: expected a finite value",
                                 qtypes[type].name, (long long)i, (double)src[i]);
    switch (type) {
    case FFN_GGML_TYPE_F32: if (n) memcpy(p, src, bytes); break;
    case FFN_GGML_TYPE_F16:
        for (int64_t i = 0; i < n; i++) store_f16(p + 2 * i, src[i]);
        break;
    case FFN_GGML_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t b = ffn_f32_to_bf16(src[i]);
            memcpy(p + 2 * i, &b, 2);
        }
        break;
    case FFN_GGML_TYPE_Q8_0: quant_quantize_q8_0(src, p, nb); break;
    case FFN_GGML_TYPE_Q4_0: quant_quantize_q4_0(src, p, nb); break;
    case FFN_GGML_TYPE_Q4_K: quant_quantize_q4_K(src, p, nb); break;
    case FFN_GGML_TYPE_Q6_K: quant_quantize_q6_K(src, p, nb); break;
    default: return ffn_error(FFN_ERR_INTERNAL, "%s: encoder missing", qtypes[type].name);
    }
    return FFN_OK;
}
