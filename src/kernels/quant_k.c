/* quant_k.c -- the reference decoders and encoders of the 256-element
 * super-block formats q2_K, q3_K, q5_K and iq4_xs (layouts in quant.h;
 * q4_K and q6_K are in quant.c).
 *
 * Decoders follow ggml's dequantize_row_<t> operation for operation in
 * fp32 (this file is built without FMA, so nothing is contracted): the
 * oracle of the SIMD kernels.  Encoders follow ggml's reference quantizers
 * (quantize_row_<t>_ref, the ones llama.cpp's quantizer runs without an
 * importance matrix) in the same fp32 operations and order, so the bytes
 * equal ggml's: q2_K and q5_K fit each sub-block's scale and min by a
 * weighted least-squares search over 16 grid stretches, q3_K its signed
 * scale by coordinate descent on the codes, iq4_xs its scale by a search
 * over 15 stretches of the non-linear grid.  tests/cli/test_kquants.sh
 * holds both against ggml's own functions. */
#include "kernels/quant.h"
#include "kernels/quant_bits.h"

#include <math.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "quant_k.c assumes a little-endian host (the block formats are little-endian)"
#endif

/* ---- helpers ------------------------------------------------------------ */

static inline int k_clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Sub-blocks whose largest magnitude is below this are all zero (ggml's GROUP_MAX_EPS). */
#define K_GROUP_EPS 1e-15f

/* ---- the asymmetric fit of q2_K and q5_K --------------------------------------
 * x ≈ scale·L − min with L in [0, nmax], min >= 0 (returned in *the_min):
 * the min/max grid first, then nstep + 1 stretches of it (nmax + rmin +
 * rdelta·is steps over the range), each refitted by weighted least squares
 * on its codes; the stretch of least weighted error (absolute with mad,
 * else squared) wins. */
static float k_fit_min(int n, int nmax, const float *x, const float *w, uint8_t *L, float *the_min,
                       float rmin, float rdelta, int nstep, int mad) {
    uint8_t Laux[32];
    float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.0f;
    }
    float iscale = nmax / (max - min), scale = 1 / iscale, best_error = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)k_clampi(qb_nearest(iscale * (x[i] - min)), 0, nmax);
        float diff = scale * L[i] + min - x[i];
        diff = mad ? fabsf(diff) : diff * diff;
        best_error += w[i] * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = k_clampi(qb_nearest(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = mad ? fabsf(diff) : diff * diff;
                cur_error += w[i] * diff;
            }
            if (cur_error < best_error) {
                memcpy(L, Laux, (size_t)n);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* ---- q2_K ----------------------------------------------------------------- */

void quant_dequantize_q2_K(const uint8_t *src, float *dst, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 84) {
        const float d = qb_load_f16(src + 80), min = qb_load_f16(src + 82);
        const uint8_t *sc = src, *q = src + 16;
        for (int h = 0; h < 2; h++, q += 32)
            for (int shift = 0; shift < 8; shift += 2)
                for (int half = 0; half < 2; half++) {
                    const uint8_t s = *sc++;
                    const float dl = d * (s & 0xF), ml = min * (s >> 4);
                    for (int l = 0; l < 16; l++) *dst++ = dl * ((q[16 * half + l] >> shift) & 3) - ml;
                }
    }
}

void quant_quantize_q2_K(const float *x, uint8_t *dst, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 256, dst += 84) {
        uint8_t L[256], *scb = dst, *qs = dst + 16;
        float w[16], mins[16], scales[16], max_scale = 0, max_min = 0;
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++) w[l] = fabsf(x[16 * j + l]);
            scales[j] = k_fit_min(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, 1);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            const float iscale = 15.0f / max_scale;
            for (int j = 0; j < 16; j++) scb[j] = (uint8_t)qb_nearest(iscale * scales[j]);
            qb_store_f16(dst + 80, max_scale / 15.0f);
        } else {
            memset(scb, 0, 16);
            qb_store_f16(dst + 80, 0.0f);
        }
        if (max_min > 0) {
            const float iscale = 15.0f / max_min;
            for (int j = 0; j < 16; j++) scb[j] |= (uint8_t)(qb_nearest(iscale * mins[j]) << 4);
            qb_store_f16(dst + 82, max_min / 15.0f);
        } else {
            qb_store_f16(dst + 82, 0.0f);
        }
        for (int j = 0; j < 16; j++) {
            const float d = qb_load_f16(dst + 80) * (scb[j] & 0xF);
            if (!d) continue;
            const float dm = qb_load_f16(dst + 82) * (scb[j] >> 4);
            for (int l = 0; l < 16; l++) L[16 * j + l] = (uint8_t)k_clampi(qb_nearest((x[16 * j + l] + dm) / d), 0, 3);
        }
        for (int h = 0; h < 256; h += 128)
            for (int l = 0; l < 32; l++)
                qs[h / 4 + l] = (uint8_t)(L[h + l] | (L[h + l + 32] << 2) | (L[h + l + 64] << 4) | (L[h + l + 96] << 6));
    }
}

/* ---- q3_K ----------------------------------------------------------------- */

/* The 16 signed 6-bit scales (−32..31) of a q3_K block from its 12 bytes. */
static inline void k_scales_q3(const uint8_t *s, int out[16]) {
    for (int j = 0; j < 16; j++) {
        const int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
        out[j] = (lo | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
    }
}

void quant_dequantize_q3_K(const uint8_t *src, float *dst, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 110) {
        const float d_all = qb_load_f16(src + 108);
        const uint8_t *hm = src, *q = src + 32;
        int sc[16], is = 0;
        k_scales_q3(src + 96, sc);
        unsigned m = 1;
        for (int h = 0; h < 2; h++, q += 32)
            for (int shift = 0; shift < 8; shift += 2, m <<= 1)
                for (int half = 0; half < 2; half++) {
                    const float dl = d_all * sc[is++];
                    for (int l = 0; l < 16; l++) {
                        const int k = 16 * half + l;
                        *dst++ = dl * (((q[k] >> shift) & 3) - ((hm[k] & m) ? 0 : 4));
                    }
                }
    }
}

/* The symmetric fit of q3_K: L in [−nmax, nmax − 1] (returned + nmax),
 * x ≈ scale·L; the extreme maps to −nmax, then up to 5 rounds move single
 * codes while the x²-weighted fit improves. */
static float k_fit_q3(const float *x, int8_t *L) {
    const int n = 16, nmax = 4;
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < K_GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    const float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = k_clampi(qb_nearest(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)l;
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * L[i] * L[i];
                const int nl = k_clampi(qb_nearest(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (nl != L[i]) {
                    slx += w * x[i] * nl;
                    sl2 += w * nl * nl;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)nl;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

void quant_quantize_q3_K(const float *x, uint8_t *dst, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 256, dst += 110) {
        int8_t L[256];
        float scales[16], max_scale = 0, amax = 0;
        uint8_t *hmask = dst, *qs = dst + 32, *s = dst + 96;
        for (int j = 0; j < 16; j++) {
            scales[j] = k_fit_q3(x + 16 * j, L + 16 * j);
            const float a = fabsf(scales[j]);
            if (a > amax) {
                amax = a;
                max_scale = scales[j];
            }
        }
        memset(s, 0, 12);
        if (max_scale) {
            const float iscale = -32.0f / max_scale;
            for (int j = 0; j < 16; j++) {
                int l = k_clampi((int8_t)qb_nearest(iscale * scales[j]), -32, 31) + 32;
                if (j < 8) s[j] = (uint8_t)(l & 0xF);
                else s[j - 8] |= (uint8_t)((l & 0xF) << 4);
                s[j % 4 + 8] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
            }
            qb_store_f16(dst + 108, 1 / iscale);
        } else {
            qb_store_f16(dst + 108, 0.0f);
        }
        int sc[16];
        k_scales_q3(s, sc);
        for (int j = 0; j < 16; j++) {
            const float d = qb_load_f16(dst + 108) * sc[j];
            if (!d) continue;
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (int8_t)(k_clampi(qb_nearest(x[16 * j + l] / d), -4, 3) + 4);
        }
        memset(hmask, 0, 32);
        for (int j = 0; j < 256; j++)
            if (L[j] > 3) {
                hmask[j % 32] |= (uint8_t)(1u << (j / 32));
                L[j] = (int8_t)(L[j] - 4);
            }
        for (int h = 0; h < 256; h += 128)
            for (int l = 0; l < 32; l++)
                qs[h / 4 + l] = (uint8_t)(L[h + l] | (L[h + l + 32] << 2) | (L[h + l + 64] << 4) | (L[h + l + 96] << 6));
    }
}

/* ---- q5_K ----------------------------------------------------------------- */

void quant_dequantize_q5_K(const uint8_t *src, float *dst, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 176) {
        const float d = qb_load_f16(src), min = qb_load_f16(src + 2);
        const uint8_t *scales = src + 4, *qh = src + 16, *ql = src + 48;
        unsigned u1 = 1, u2 = 2;
        for (int j = 0; j < 8; j += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
            uint8_t sc, m;
            quant_scale_min_k4(j, scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            quant_scale_min_k4(j + 1, scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++) *dst++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++) *dst++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        }
    }
}

void quant_quantize_q5_K(const float *x, uint8_t *dst, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 256, dst += 176) {
        uint8_t L[256], *s = dst + 4, *qh = dst + 16, *ql = dst + 48;
        float mins[8], scales[8], w[32], max_scale = 0, max_min = 0;
        for (int j = 0; j < 8; j++) {
            float sum_x2 = 0;
            for (int l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
            const float av_x = sqrtf(sum_x2 / 32);
            for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(x[32 * j + l]);
            scales[j] = k_fit_min(32, 31, x + 32 * j, w, L + 32 * j, &mins[j], -0.5f, 0.1f, 15, 0);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
        const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
        for (int j = 0; j < 8; j++) {
            uint8_t ls = (uint8_t)qb_nearest(inv_scale * scales[j]), lm = (uint8_t)qb_nearest(inv_min * mins[j]);
            ls = ls < 63 ? ls : 63;
            lm = lm < 63 ? lm : 63;
            if (j < 4) {
                s[j] = ls;
                s[j + 4] = lm;
            } else {
                s[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
                s[j - 4] |= (uint8_t)((ls >> 4) << 6);
                s[j] |= (uint8_t)((lm >> 4) << 6);
            }
        }
        qb_store_f16(dst, max_scale / 63.0f);
        qb_store_f16(dst + 2, max_min / 63.0f);
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            quant_scale_min_k4(j, s, &sc, &m);
            const float d = qb_load_f16(dst) * sc;
            if (!d) continue;
            const float dm = qb_load_f16(dst + 2) * m;
            for (int l = 0; l < 32; l++) L[32 * j + l] = (uint8_t)k_clampi(qb_nearest((x[32 * j + l] + dm) / d), 0, 31);
        }
        memset(qh, 0, 32);
        uint8_t m1 = 1, m2 = 2;
        for (int n = 0; n < 256; n += 64, ql += 32, m1 <<= 2, m2 <<= 2)
            for (int j = 0; j < 32; j++) {
                int l1 = L[n + j], l2 = L[n + j + 32];
                if (l1 > 15) l1 -= 16, qh[j] |= m1;
                if (l2 > 15) l2 -= 16, qh[j] |= m2;
                ql[j] = (uint8_t)(l1 | (l2 << 4));
            }
    }
}

/* ---- iq4_xs --------------------------------------------------------------- */

static const int8_t k_iq4_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                       1,    13,   25,  38,  53,  69,  89,  113};

void quant_dequantize_iq4_xs(const uint8_t *src, float *dst, int64_t nb) {
    const int8_t *kv = k_iq4_values;
    for (int64_t i = 0; i < nb; i++, src += 136) {
        const float d = qb_load_f16(src);
        const unsigned sh = (unsigned)src[2] | ((unsigned)src[3] << 8);
        const uint8_t *sl = src + 4, *qs = src + 8;
        for (int ib = 0; ib < 8; ib++, dst += 32, qs += 16) {
            const int ls = ((sl[ib / 2] >> 4 * (ib % 2)) & 0xF) | (((sh >> 2 * ib) & 3) << 4);
            const float dl = d * (ls - 32);
            for (int j = 0; j < 16; j++) {
                dst[j] = dl * kv[qs[j] & 0xF];
                dst[j + 16] = dl * kv[qs[j] >> 4];
            }
        }
    }
}

/* The grid value nearest x (ggml's best_index_int8: the lower one on a tie). */
static inline int k_best_index(const int8_t *val, float x) {
    if (x <= val[0]) return 0;
    if (x >= val[15]) return 15;
    int ml = 0, mu = 15;
    while (mu - ml > 1) {
        const int mav = (ml + mu) / 2;
        if (x < val[mav]) mu = mav;
        else ml = mav;
    }
    return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

/* ggml's reference iq4_xs (no importance weights: each value weighs x²):
 * per sub-block of 32 the scale of the best of 15 stretches of the grid
 * (−127 .. 113 mapped onto the extreme), then the 8 scales as 6-bit
 * multiples of d = −max_scale / 32 and every code chosen again against
 * its sub-block's stored scale. */
void quant_quantize_iq4_xs(const float *x, uint8_t *dst, int64_t nb) {
    const int8_t *kv = k_iq4_values;
    const int ntry = 7;
    for (int64_t i = 0; i < nb; i++, x += 256, dst += 136) {
        uint8_t L[256], *sl = dst + 4, *q4 = dst + 8;
        float scales[8], max_scale = 0, amax_scale = 0;
        for (int ib = 0; ib < 8; ib++) {
            const float *xb = x + 32 * ib;
            float w[32], amax = 0, max = 0;
            for (int j = 0; j < 32; j++) w[j] = xb[j] * xb[j];
            for (int j = 0; j < 32; j++) {
                const float ax = fabsf(xb[j]);
                if (ax > amax) {
                    amax = ax;
                    max = xb[j];
                }
            }
            if (amax < K_GROUP_EPS) {
                scales[ib] = 0;
                continue;
            }
            float d = -max / kv[0], id = 1 / d, sumqx = 0, sumq2 = 0;
            for (int j = 0; j < 32; j++) {
                const float q = kv[k_best_index(kv, id * xb[j])];
                sumqx += w[j] * q * xb[j];
                sumq2 += w[j] * q * q;
            }
            d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
            float best = d * sumqx;
            for (int itry = -ntry; itry <= ntry; itry++) {
                id = (itry + kv[0]) / max;
                sumqx = sumq2 = 0;
                for (int j = 0; j < 32; j++) {
                    const float q = kv[k_best_index(kv, id * xb[j])];
                    sumqx += w[j] * q * xb[j];
                    sumq2 += w[j] * q * q;
                }
                if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                    d = sumqx / sumq2;
                    best = d * sumqx;
                }
            }
            scales[ib] = d;
            if (fabsf(d) > amax_scale) {
                amax_scale = fabsf(d);
                max_scale = d;
            }
        }
        unsigned sh = 0;
        const float d = -max_scale / 32;
        qb_store_f16(dst, d);
        const float id = d ? 1 / d : 0.0f;
        for (int ib = 0; ib < 8; ib++) {
            int l = k_clampi(qb_nearest(id * scales[ib]), -32, 31);
            const float dl = d * l, idl = dl ? 1 / dl : 0.0f;
            for (int j = 0; j < 32; j++) L[32 * ib + j] = (uint8_t)k_best_index(kv, idl * x[32 * ib + j]);
            l += 32;
            if (ib % 2 == 0) sl[ib / 2] = (uint8_t)(l & 0xF);
            else sl[ib / 2] |= (uint8_t)((l & 0xF) << 4);
            sh |= (unsigned)(l >> 4) << (2 * ib);
        }
        dst[2] = (uint8_t)sh;
        dst[3] = (uint8_t)(sh >> 8);
        for (int b = 0; b < 8; b++)
            for (int j = 0; j < 16; j++) q4[16 * b + j] = (uint8_t)(L[32 * b + j] | (L[32 * b + 16 + j] << 4));
    }
}
