/* qgemm_legacy_avx2.c -- the AVX2 row kernels of q4_1, q5_0, q5_1 and
 * iq4_nl (contract in qgemm_impl.h; reference decoders in quant_legacy.c),
 * also the AVX-512 level's on a CPU without VNNI (with it,
 * qgemm_avx512.c's).  One weight row at a time against up to 4 tokens (4
 * rows against one token, 2 against two: QG_AVX2_ROWS_MULTI),
 * on the QG_ACT_Q32 activations (int8 blocks of 32, d per block, c the
 * lanes' −K · 4-sums with K the type's q32_offset):
 *
 *   q5_0    (K 16): the 5-bit q unsigned (nibble | the qh bit spread to
 *           bytes by a shuffle and compare); vpmaddubsw + vpmaddwd by ones
 *           from c, so Σ (q − 16)·x8 in int32, × d·dx.
 *   q4_1, q5_1  (K 1): Σ q·x8 the same way without c, × d·dx; m·dx·Σ x8
 *           from c (which holds −Σ x8 per lane) in a second accumulator.
 *   iq4_nl  (K 128, what an AVX-512 VNNI kernel would want): the nibbles
 *           through vpshufb into the signed values, then q8_0's vpsignb.
 *
 * No product saturates: vpmaddubsw pairs are at most 2·31·127 (q5) or
 * 2·127·127 (iq4_nl's |value| <= 127 against |x8| <= 127), and the int32
 * lane of a block at most 4·2·127·127.  Accumulators follow a sequence
 * fixed by cols alone. */
#include "kernels/qgemm_avx2.h"
#include "kernels/quant.h"

#define QL QG_AVX2_INLINE
enum { QL_Q4_1, QL_Q5_0, QL_Q5_1, QL_IQ4_NL };

/* 16 bytes of nibbles -> 32 bytes: elements 0..15 (low nibbles), 16..31 (high) */
QL __m256i ql_nibbles(const uint8_t *qs) { /* one load into both halves, the high one shifted */
    const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    return _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_set_epi64x(4, 4, 0, 0)), _mm256_set1_epi8(0x0F));
}

/* byte j: 0x10 where bit j of the 32-bit qh is set, else 0 */
QL __m256i ql_high_bits(const uint8_t *qh4) {
    uint32_t qh;
    memcpy(&qh, qh4, 4);
    const __m256i spread = _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL,
                                              0x0303030303030303LL);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), spread);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    b = _mm256_cmpeq_epi8(_mm256_and_si256(b, bit), bit);
    return _mm256_and_si256(b, _mm256_set1_epi8(0x10));
}

/* Block b of the R rows p[i] against T tokens (their arrays in k):
 * acc[i·T + t] += (float)(the int32 lane sums) · (d · dx), and for q4_1 /
 * q5_1 accm[i·T + t] −= (float)c · (m · dx).  Up to two tokens the scale
 * products are vector ones of broadcasts (fp16 from ffn_qg_f16_tab), past
 * that scalar ones (registers run out). */
QL void ql_block(const int kind, const uint8_t *const *p, const int R, int64_t b, const qg_avx2_tok *k, const int T,
                 __m256 *acc, __m256 *accm) {
    const int bsz = kind == QL_Q4_1 ? 20 : kind == QL_Q5_0 ? 22 : kind == QL_Q5_1 ? 24 : 18;
    const int has_m = kind == QL_Q4_1 || kind == QL_Q5_1;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i xq[QG_AVX2_T], c[QG_AVX2_T];
    __m256 dx[QG_AVX2_T];
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
        xq[t] = _mm256_loadu_si256((const __m256i *)(k->q[t] + b * 32));
        if (kind != QL_IQ4_NL) c[t] = _mm256_loadu_si256((const __m256i *)(k->c[t] + b * 8));
        if (T <= 2) dx[t] = _mm256_broadcast_ss(k->d[t] + b);
    }
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
        const uint8_t *pb = p[i] + b * bsz;
        uint16_t hd, hm = 0;
        memcpy(&hd, pb, 2);
        if (has_m) memcpy(&hm, pb + 2, 2);
        __m256i w, aw;
        switch (kind) {
        case QL_Q4_1: w = ql_nibbles(pb + 4); break;
        case QL_Q5_0: w = _mm256_or_si256(ql_nibbles(pb + 6), ql_high_bits(pb + 2)); break;
        case QL_Q5_1: w = _mm256_or_si256(ql_nibbles(pb + 8), ql_high_bits(pb + 4)); break;
        default: {
            const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)quant_iq4nl_values));
            w = _mm256_shuffle_epi8(lut, ql_nibbles(pb + 2));
            break;
        }
        }
        aw = kind == QL_IQ4_NL ? _mm256_sign_epi8(w, w) : w;
        const __m256 wd = T <= 2 ? _mm256_broadcast_ss(&ffn_qg_f16_tab[hd]) : _mm256_setzero_ps();
        const __m256 wm = T <= 2 && has_m ? _mm256_broadcast_ss(&ffn_qg_f16_tab[hm]) : _mm256_setzero_ps();
        const float wds = ffn_qg_f16_tab[hd], wms = has_m ? ffn_qg_f16_tab[hm] : 0.0f;
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            __m256i s;
            if (kind == QL_IQ4_NL) {
                s = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(xq[t], w)), ones);
            } else {
                s = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, xq[t]), ones);
                if (kind == QL_Q5_0) s = _mm256_add_epi32(s, c[t]);
            }
            const float dxs = T <= 2 ? 0.0f : k->d[t][b];
            const __m256 sd = T <= 2 ? _mm256_mul_ps(wd, dx[t]) : _mm256_set1_ps(wds * dxs);
            acc[i * T + t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), sd, acc[i * T + t]);
            if (has_m) { /* c = −Σ x8 per lane: subtract m·dx·c */
                const __m256 sm = T <= 2 ? _mm256_mul_ps(wm, dx[t]) : _mm256_set1_ps(wms * dxs);
                accm[i * T + t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(c[t]), sm, accm[i * T + t]);
            }
        }
    }
}

/* Rows row + i·rb (i < R) against tokens t0 .. t0 + T - 1 (QG_AVX2_ROWS_MULTI's DOT). */
QL void ql_dot(const int kind, const uint8_t *row, size_t rb, const int R, int64_t cols, const qg_acts *a,
               int64_t t0, const int T, float *out) {
    const int has_m = kind == QL_Q4_1 || kind == QL_Q5_1;
    const int64_t nblk = cols / 32;
    const uint8_t *p[4];
    qg_avx2_tok k;
    __m256 acc[QG_AVX2_T], accm[QG_AVX2_T];
    qg_avx2_group(row, rb, R, a, t0, T, p, &k, acc, accm);
    /* the rows after this group prefetched at the pace it is read (see
     * qa_dot_q32 in qgemm_avx2.c): from memory 0.44-0.52x the time at
     * n = 1 */
    const int bsz = kind == QL_Q4_1 ? 20 : kind == QL_Q5_0 ? 22 : kind == QL_Q5_1 ? 24 : 18;
    const uint8_t *pf = row + (size_t)R * rb;
    for (int64_t b = 0; b < nblk; b++) {
        if (b % 2 == 0)
#pragma GCC unroll 8
            for (int l = 0; l < R * 2 * bsz; l += 64) _mm_prefetch((const char *)pf + b * R * bsz + l, _MM_HINT_T0);
        ql_block(kind, p, R, b, &k, T, acc, accm);
    }
#pragma GCC unroll 4
    for (int j = 0; j < R * T; j++) out[j] = vf_hsum(has_m ? _mm256_add_ps(acc[j], accm[j]) : acc[j]);
}

QG_AVX2_ROWS_MULTI(ffn_qg_rows_avx2_q4_1, ql_dot, QL_Q4_1)
QG_AVX2_ROWS_MULTI(ffn_qg_rows_avx2_q5_0, ql_dot, QL_Q5_0)
QG_AVX2_ROWS_MULTI(ffn_qg_rows_avx2_q5_1, ql_dot, QL_Q5_1)
QG_AVX2_ROWS_MULTI(ffn_qg_rows_avx2_iq4_nl, ql_dot, QL_IQ4_NL)
