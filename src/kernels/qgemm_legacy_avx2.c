/* qgemm_legacy_avx2.c -- the AVX2 row kernels of q4_1, q5_0, q5_1 and
 * iq4_nl (contract in qgemm_impl.h; reference decoders in quant_legacy.c),
 * also the AVX-512 level's on a CPU without VNNI (with it,
 * qgemm_avx512.c's).  One weight row at a time against up to 4 tokens,
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
QL __m256i ql_nibbles(const uint8_t *qs) {
    __m128i v = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(0x0F));
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

QL void ql_dot(const int kind, const uint8_t *row, int64_t cols, const qg_acts *a, int64_t t0, const int T,
               float *out) {
    const int bsz = kind == QL_Q4_1 ? 20 : kind == QL_Q5_0 ? 22 : kind == QL_Q5_1 ? 24 : 18;
    const int has_m = kind == QL_Q4_1 || kind == QL_Q5_1;
    const int64_t nblk = cols / 32;
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)quant_iq4nl_values));
    __m256 acc[QG_AVX2_T], accm[QG_AVX2_T];
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) acc[t] = accm[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nblk; b++) {
        const uint8_t *p = row + b * bsz;
        const float wd = qg_avx2_f16(p), wm = has_m ? qg_avx2_f16(p + 2) : 0.0f;
        __m256i w, aw;
        switch (kind) {
        case QL_Q4_1: w = ql_nibbles(p + 4); break;
        case QL_Q5_0: w = _mm256_or_si256(ql_nibbles(p + 6), ql_high_bits(p + 2)); break;
        case QL_Q5_1: w = _mm256_or_si256(ql_nibbles(p + 8), ql_high_bits(p + 4)); break;
        default: w = _mm256_shuffle_epi8(lut, ql_nibbles(p + 2)); break;
        }
        aw = kind == QL_IQ4_NL ? _mm256_sign_epi8(w, w) : w;
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            const int64_t tt = t0 + t;
            const __m256i xq = _mm256_loadu_si256((const __m256i *)(a->q + tt * a->qs + b * 32));
            const float dx = a->d[tt * a->ds + b];
            __m256i s;
            if (kind == QL_IQ4_NL) {
                s = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(xq, w)), ones);
            } else {
                s = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, xq), ones);
                if (kind == QL_Q5_0)
                    s = _mm256_add_epi32(s, _mm256_loadu_si256((const __m256i *)(a->c + tt * a->cs + b * 8)));
            }
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(wd * dx), acc[t]);
            if (has_m) { /* c = −Σ x8 per lane: subtract m·dx·c */
                const __m256i c = _mm256_loadu_si256((const __m256i *)(a->c + tt * a->cs + b * 8));
                accm[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(c), _mm256_set1_ps(wm * dx), accm[t]);
            }
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) out[t] = vf_hsum(has_m ? _mm256_add_ps(acc[t], accm[t]) : acc[t]);
}

QG_AVX2_ROWS(ffn_qg_rows_avx2_q4_1, ql_dot, QL_Q4_1)
QG_AVX2_ROWS(ffn_qg_rows_avx2_q5_0, ql_dot, QL_Q5_0)
QG_AVX2_ROWS(ffn_qg_rows_avx2_q5_1, ql_dot, QL_Q5_1)
QG_AVX2_ROWS(ffn_qg_rows_avx2_iq4_nl, ql_dot, QL_IQ4_NL)
