/* qgemm_k_avx2.c -- the AVX2 kernels of the super-block formats q2_K,
 * q3_K, q5_K and iq4_xs (contract in qgemm_impl.h; the table in
 * src/kernels/types.c also runs them at the AVX-512 level): one weight row
 * at a time against up to 4 tokens, each weight byte decoded once for all
 * of them, on the QG_ACT_Q256 activations (q int8, d per 256, bs the
 * 16-sums).
 *
 *   q2_K    2-bit codes by shifts of the 32-byte code vector; vpmaddubsw
 *           (codes × int8 activations, pairs to int16), vpmaddwd by the
 *           4-bit sub-block scales: the block's sum in int32; the mins'
 *           part from the 16-sums by one vpmaddwd.
 *   q3_K    the same with the high bit from hmask: codes q + 4 in 0..7,
 *           the −4 offset from the 16-sums times the signed scales.
 *   q5_K    q4_K's scheme with the fifth bit from qh: codes 0..31.
 *   iq4_xs  nibbles through vpshufb into the signed grid values; vpsignb
 *           moves their signs onto the activations, vpmaddubsw of |v| ×
 *           ±x (at most 2·127·127, no saturation), vpmaddwd by the signed
 *           6-bit sub-block scale.
 * Integer sums are exact; per block one convert and one FMA by weight
 * scale × activation scale, so the float sequence depends on cols alone
 * (never on n, r0 or the thread count). */
#include "kernels/qgemm_avx2.h"
#include "kernels/qgemm_k.h"
#include "kernels/quant.h"

#define KA QG_AVX2_INLINE

/* 16 lanes of a, then 16 of b (int16): the scales of two sub-blocks of 16. */
KA __m256i ka_pair16(int a, int b) { return _mm256_set_m128i(_mm_set1_epi16((short)b), _mm_set1_epi16((short)a)); }

KA __m256i ka_x(const qg_acts *a, int64_t tt, int64_t k) {
    return _mm256_loadu_si256((const __m256i *)(a->q + tt * a->qs + k));
}

/* ---- q2_K ---------------------------------------------------------------------- */

KA void ka_dot_q2K(const uint8_t *row, int64_t cols, const qg_acts *a, int64_t t0, const int T,
                   float *out) {
    const int64_t nblk = cols / 256;
    const __m256i m2 = _mm256_set1_epi8(3);
    __m256 acc[QG_AVX2_T];
    float accm[QG_AVX2_T];
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) acc[t] = _mm256_setzero_ps(), accm[t] = 0.0f;
    for (int64_t blk = 0; blk < nblk; blk++) {
        const uint8_t *p = row + blk * QUANT_Q2_K_BYTES, *sc = p;
        const float d = qg_avx2_f16(p + 80), dmin = qg_avx2_f16(p + 82);
        __m256i s[QG_AVX2_T];
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) s[t] = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i Q = _mm256_loadu_si256((const __m256i *)(p + 16 + 32 * h));
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) { /* elements 128h + 32j .., sub-blocks 8h + 2j, +1 */
                const __m256i w = _mm256_and_si256(_mm256_srli_epi16(Q, 2 * j), m2);
                const int k = 8 * h + 2 * j;
                const __m256i scv = ka_pair16(sc[k] & 0xF, sc[k + 1] & 0xF);
#pragma GCC unroll 4
                for (int t = 0; t < T; t++)
                    s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(_mm256_maddubs_epi16(w, ka_x(a, t0 + t, blk * 256 + 128 * h + 32 * j)), scv));
            }
        }
        const __m256i mins = _mm256_srli_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)sc)), 4);
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            const int64_t tt = t0 + t;
            const __m256i bs = _mm256_loadu_si256((const __m256i *)(a->bs + tt * a->bss + blk * 16));
            const int32_t m = qg_avx2_hsum_i32(_mm256_madd_epi16(bs, mins));
            const float dx = a->d[tt * a->ds + blk];
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t]), _mm256_set1_ps(d * dx), acc[t]);
            accm[t] += dmin * dx * (float)m;
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) out[t] = vf_hsum(acc[t]) - accm[t];
}

/* ---- q3_K ---------------------------------------------------------------------- */

KA void ka_dot_q3K(const uint8_t *row, int64_t cols, const qg_acts *a, int64_t t0, const int T,
                   float *out) {
    const int64_t nblk = cols / 256;
    const __m256i m2 = _mm256_set1_epi8(3), m1 = _mm256_set1_epi8(1);
    __m256 acc[QG_AVX2_T];
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t blk = 0; blk < nblk; blk++) {
        const uint8_t *p = row + blk * QUANT_Q3_K_BYTES, *s12 = p + 96;
        const float d = qg_avx2_f16(p + 108);
        int16_t sc[16] __attribute__((aligned(32)));
        {   /* the 16 six-bit scales (ggml's aux trick), minus 32 */
            uint32_t aux[4];
            memcpy(aux, s12, 12);
            const uint32_t m2 = 0x03030303, m4 = 0x0f0f0f0f, tmp = aux[2];
            aux[2] = ((aux[0] >> 4) & m4) | (((tmp >> 4) & m2) << 4);
            aux[3] = ((aux[1] >> 4) & m4) | (((tmp >> 6) & m2) << 4);
            aux[0] = (aux[0] & m4) | ((tmp & m2) << 4);
            aux[1] = (aux[1] & m4) | (((tmp >> 2) & m2) << 4);
            const __m256i v = _mm256_sub_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)aux)),
                                               _mm256_set1_epi16(32));
            _mm256_store_si256((__m256i *)sc, v);
        }
        const __m256i H = _mm256_loadu_si256((const __m256i *)p);
        __m256i s[QG_AVX2_T];
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) s[t] = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i Q = _mm256_loadu_si256((const __m256i *)(p + 32 + 32 * h));
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) { /* codes q + 4 of elements 128h + 32j .. */
                const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(Q, 2 * j), m2);
                const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(H, 4 * h + j), m1);
                const __m256i w = _mm256_or_si256(lo, _mm256_slli_epi16(hb, 2));
                const int k = 8 * h + 2 * j;
                const __m256i scv = ka_pair16(sc[k], sc[k + 1]);
#pragma GCC unroll 4
                for (int t = 0; t < T; t++)
                    s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(_mm256_maddubs_epi16(w, ka_x(a, t0 + t, blk * 256 + 128 * h + 32 * j)), scv));
            }
        }
        const __m256i sc_all = _mm256_loadu_si256((const __m256i *)sc);
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            const int64_t tt = t0 + t;
            /* the codes are q + 4: subtract 4 · Σ_k scale_k · (16-sum k) */
            const __m256i corr = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(a->bs + tt * a->bss + blk * 16)), sc_all);
            const __m256i v = _mm256_sub_epi32(s[t], _mm256_slli_epi32(corr, 2));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), _mm256_set1_ps(d * a->d[tt * a->ds + blk]), acc[t]);
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) out[t] = vf_hsum(acc[t]);
}

/* ---- q5_K ---------------------------------------------------------------------- */

KA void ka_dot_q5K(const uint8_t *row, int64_t cols, const qg_acts *a, int64_t t0, const int T,
                   float *out) {
    const int64_t nblk = cols / 256;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m1 = _mm256_set1_epi8(1);
    __m256 acc[QG_AVX2_T];
    float accm[QG_AVX2_T];
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) acc[t] = _mm256_setzero_ps(), accm[t] = 0.0f;
    for (int64_t blk = 0; blk < nblk; blk++) {
        const uint8_t *p = row + blk * QUANT_Q5_K_BYTES;
        const float d = qg_avx2_f16(p), dmin = qg_avx2_f16(p + 2);
        uint8_t sc[8], mn[8];
        for (int j = 0; j < 8; j++) quant_scale_min_k4(j, p + 4, &sc[j], &mn[j]);
        const __m256i QH = _mm256_loadu_si256((const __m256i *)(p + 16));
        __m256i s[QG_AVX2_T];
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) s[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) { /* elements 64i .. 64i + 63: sub-blocks 2i, 2i + 1 */
            const __m256i q = _mm256_loadu_si256((const __m256i *)(p + 48 + 32 * i));
            const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(QH, 2 * i), m1), 4);
            const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(QH, 2 * i + 1), m1), 4);
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(q, m4), h0);
            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), h1);
            const __m256i sc0 = _mm256_set1_epi16(sc[2 * i]), sc1 = _mm256_set1_epi16(sc[2 * i + 1]);
#pragma GCC unroll 4
            for (int t = 0; t < T; t++) {
                const int64_t k = blk * 256 + 64 * i;
                const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, ka_x(a, t0 + t, k)), sc0);
                const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, ka_x(a, t0 + t, k + 32)), sc1);
                s[t] = _mm256_add_epi32(s[t], _mm256_add_epi32(p0, p1));
            }
        }
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            const int64_t tt = t0 + t;
            const int16_t *bs = a->bs + tt * a->bss + blk * 16;
            int32_t mins = 0;
            for (int j = 0; j < 8; j++) mins += mn[j] * (bs[2 * j] + bs[2 * j + 1]);
            const float dx = a->d[tt * a->ds + blk];
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t]), _mm256_set1_ps(d * dx), acc[t]);
            accm[t] += dmin * dx * (float)mins;
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) out[t] = vf_hsum(acc[t]) - accm[t];
}

/* ---- iq4_xs -------------------------------------------------------------------- */

KA void ka_dot_iq4xs(const uint8_t *row, int64_t cols, const qg_acts *a, int64_t t0, const int T,
                     float *out) {
    const int64_t nblk = cols / 256;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i lut = _mm256_broadcastsi128_si256(
        _mm_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113));
    __m256 acc[QG_AVX2_T];
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t blk = 0; blk < nblk; blk++) {
        const uint8_t *p = row + blk * QUANT_IQ4_XS_BYTES;
        const float d = qg_avx2_f16(p);
        const unsigned sh = (unsigned)p[2] | ((unsigned)p[3] << 8);
        __m256i s[QG_AVX2_T];
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) s[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int ib = 0; ib < 8; ib++) {
            const int ls = (((p[4 + ib / 2] >> 4 * (ib % 2)) & 0xF) | (((sh >> 2 * ib) & 3) << 4)) - 32;
            const __m128i v = _mm_loadu_si128((const __m128i *)(p + 8 + 16 * ib));
            const __m256i codes = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), m4);
            const __m256i wv = _mm256_shuffle_epi8(lut, codes);
            const __m256i aw = _mm256_sign_epi8(wv, wv);
            const __m256i scv = _mm256_set1_epi16((short)ls);
#pragma GCC unroll 4
            for (int t = 0; t < T; t++) {
                const __m256i xs = _mm256_sign_epi8(ka_x(a, t0 + t, blk * 256 + 32 * ib), wv);
                s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, xs), scv));
            }
        }
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            const int64_t tt = t0 + t;
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t]), _mm256_set1_ps(d * a->d[tt * a->ds + blk]), acc[t]);
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) out[t] = vf_hsum(acc[t]);
}

/* ---- rows ---------------------------------------------------------------------------- */

enum { KA_Q2_K, KA_Q3_K, KA_Q5_K, KA_IQ4_XS };

KA void ka_dot(const int type, const uint8_t *row, int64_t cols, const qg_acts *a, int64_t t0, const int T,
               float *out) {
    switch (type) {
    case KA_Q2_K: ka_dot_q2K(row, cols, a, t0, T, out); break;
    case KA_Q3_K: ka_dot_q3K(row, cols, a, t0, T, out); break;
    case KA_Q5_K: ka_dot_q5K(row, cols, a, t0, T, out); break;
    default: ka_dot_iq4xs(row, cols, a, t0, T, out); break;
    }
}

QG_AVX2_ROWS(ffn_qg_rows_avx2_q2_K, ka_dot, KA_Q2_K)
QG_AVX2_ROWS(ffn_qg_rows_avx2_q3_K, ka_dot, KA_Q3_K)
QG_AVX2_ROWS(ffn_qg_rows_avx2_q5_K, ka_dot, KA_Q5_K)
QG_AVX2_ROWS(ffn_qg_rows_avx2_iq4_xs, ka_dot, KA_IQ4_XS)
