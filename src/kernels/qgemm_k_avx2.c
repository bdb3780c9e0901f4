/* qgemm_k_avx2.c -- the AVX2 kernels of the 256-element super-block
 * formats q2_K, q3_K, q4_K, q5_K, q6_K and iq4_xs (contract in
 * qgemm_impl.h; the table in src/kernels/types.c also runs them at the
 * AVX-512 level where there is no AVX-512 kernel or no VNNI): one weight
 * row at a time against up to 4 tokens, each weight byte decoded once for
 * all of them, on the QG_ACT_Q256 activations (q int8, d per 256, bs the
 * 16-sums).
 *
 * One loop over the super-blocks serves all six (ka_dot); a format gives
 * only its block (ka_<t>): its codes as unsigned bytes, 32 elements a
 * vector, multiplied by vpmaddubsw (codes × int8 activations, pairs to
 * int16) and vpmaddwd by the sub-block scales into exact int32 lane sums
 * (ka_acc), and the block's end (ka_end) from the 16-sums bs:
 *   q2_K    2-bit codes by shifts of the 32-byte code vector, 4-bit
 *           scales; the mins' part Σ min·bs by one vpmaddwd.
 *   q3_K    the same with the high bit from hmask: codes q + 4 in 0..7,
 *           the −4 offset from Σ scale·bs.
 *   q4_K    nibbles, 6-bit scales and mins as q2_K's.
 *   q5_K    q4_K with the fifth bit from qh: codes 0..31.
 *   q6_K    4 low bits and 2 high ones: codes q + 32, the −32 offset as
 *           q3_K's.
 *   iq4_xs  nibbles through vpshufb into the signed grid values; vpsignb
 *           moves their signs onto the activations, vpmaddubsw of |v| ×
 *           ±x (at most 2·127·127, no saturation), vpmaddwd by the signed
 *           6-bit sub-block scale.
 * Integer sums are exact; per block one convert and one FMA by weight
 * scale × activation scale (and for the mins one float product), so the
 * float sequence depends on cols alone (never on n, r0 or the thread
 * count). */
#include "kernels/qgemm_avx2.h"
#include "kernels/qgemm_k.h"
#include "kernels/quant.h"

#define KA QG_AVX2_INLINE

/* vpshufb patterns over 16-bit lanes: ka_one[j] repeats lane j in both
 * halves, ka_two[m] lane 2m in the low half and 2m + 1 in the high one. */
static const uint8_t ka_one[8][32] __attribute__((aligned(32))) = {
#define KA_ONE(j) {2 * j, 2 * j + 1, 2 * j, 2 * j + 1, 2 * j, 2 * j + 1, 2 * j, 2 * j + 1,                \
                   2 * j, 2 * j + 1, 2 * j, 2 * j + 1, 2 * j, 2 * j + 1, 2 * j, 2 * j + 1,                \
                   2 * j, 2 * j + 1, 2 * j, 2 * j + 1, 2 * j, 2 * j + 1, 2 * j, 2 * j + 1,                \
                   2 * j, 2 * j + 1, 2 * j, 2 * j + 1, 2 * j, 2 * j + 1, 2 * j, 2 * j + 1}
    KA_ONE(0), KA_ONE(1), KA_ONE(2), KA_ONE(3), KA_ONE(4), KA_ONE(5), KA_ONE(6), KA_ONE(7),
#undef KA_ONE
};
static const uint8_t ka_two[4][32] __attribute__((aligned(32))) = {
#define KA_TWO(m) {4 * m, 4 * m + 1, 4 * m, 4 * m + 1, 4 * m, 4 * m + 1, 4 * m, 4 * m + 1,                \
                   4 * m, 4 * m + 1, 4 * m, 4 * m + 1, 4 * m, 4 * m + 1, 4 * m, 4 * m + 1,                \
                   4 * m + 2, 4 * m + 3, 4 * m + 2, 4 * m + 3, 4 * m + 2, 4 * m + 3, 4 * m + 2, 4 * m + 3, \
                   4 * m + 2, 4 * m + 3, 4 * m + 2, 4 * m + 3, 4 * m + 2, 4 * m + 3, 4 * m + 2, 4 * m + 3}
    KA_TWO(0), KA_TWO(1), KA_TWO(2), KA_TWO(3),
#undef KA_TWO
};

/* v: 16 int16 scales (sub-blocks 0..7 in the low half, 8..15 in the high
 * one).  The scales of sub-blocks k and k + 1 (k even): 16 lanes of each. */
KA __m256i ka_pair(__m256i v, const int k) {
    const __m256i src = k < 8 ? _mm256_permute2x128_si256(v, v, 0x00) : _mm256_permute2x128_si256(v, v, 0x11);
    return _mm256_shuffle_epi8(src, _mm256_load_si256((const __m256i *)ka_two[(k % 8) / 2]));
}

/* lo: scales 0..7 in both halves (int16).  Scale j in every lane. */
KA __m256i ka_one_of(__m256i lo, const int j) {
    return _mm256_shuffle_epi8(lo, _mm256_load_si256((const __m256i *)ka_one[j]));
}

KA __m256i ka_x(const qg_acts *a, int64_t tt, int64_t k) {
    return _mm256_loadu_si256((const __m256i *)(a->q + tt * a->qs + k));
}

/* s[t] += the int32 lane sums of codes w (32 unsigned bytes: elements k ..
 * k + 31) × token t0 + t's int8 activations × the int16 scales scv. */
KA void ka_acc(__m256i w, __m256i scv, const qg_acts *a, int64_t t0, const int T, int64_t k, __m256i *s) {
#pragma GCC unroll 4
    for (int t = 0; t < T; t++)
        s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(_mm256_maddubs_epi16(w, ka_x(a, t0 + t, k)), scv));
}

/* What the end of a block needs beyond its int32 lane sums s[t]: the
 * weight scale d, dmin (the mins' scale) and v16 (16 int16 lanes, one per
 * 16 elements: the mins, or the scales for the code offset). */
typedef struct ka_blk {
    float d, dmin;
    __m256i v16;
} ka_blk;

/* The end of super-block blk for T tokens, dx the token's scale, bs its 16
 * sums of 16 activations (int16):
 *   KA_PLAIN   acc[t] += (float)s[t] · (d · dx)
 *   KA_MINS    the same, and accm[t] += (float)(v16 · bs, pairs to int32) ·
 *              (dmin · dx), in 8 lanes
 *   KA_OFFSET  acc[t] += (float)(s[t] − (Σ_k v16[k] · bs[k] << shift)) · (d · dx)
 *              (codes q + 2^shift)
 * The integer sums are exact (|bs| <= 16·127, |v16| <= 63). */
enum { KA_PLAIN, KA_MINS, KA_OFFSET };

KA void ka_end(const int kind, const int shift, const qg_acts *a, int64_t t0, const int T, int64_t blk,
               ka_blk b, const __m256i *s, __m256 *acc, __m256 *accm) {
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
        const int64_t tt = t0 + t;
        const float dx = a->d[tt * a->ds + blk];
        __m256i v = s[t];
        if (kind != KA_PLAIN) {
            const __m256i bs = _mm256_loadu_si256((const __m256i *)(a->bs + tt * a->bss + blk * 16));
            const __m256i m = _mm256_madd_epi16(bs, b.v16);
            if (kind == KA_MINS) accm[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), _mm256_set1_ps(b.dmin * dx), accm[t]);
            else v = _mm256_sub_epi32(v, _mm256_slli_epi32(m, shift));
        }
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), _mm256_set1_ps(b.d * dx), acc[t]);
    }
}

/* Each format's block function (ka_q2K ...): block blk at p, s[t] += its
 * codes × token t0 + t's activations × the sub-block scales; it returns
 * what ka_end needs. */

/* ---- q2_K ---------------------------------------------------------------------- */

KA ka_blk ka_q2K(const uint8_t *p, const qg_acts *a, int64_t t0, const int T, int64_t blk, __m256i *s) {
    const __m256i m2 = _mm256_set1_epi8(3);
    const uint8_t *sc = p;
    const __m256i raw = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)sc));
    const __m256i scales = _mm256_and_si256(raw, _mm256_set1_epi16(0xF));
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m256i Q = _mm256_loadu_si256((const __m256i *)(p + 16 + 32 * h));
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) { /* elements 128h + 32j .., sub-blocks 8h + 2j, +1 */
            const int k = 8 * h + 2 * j;
            ka_acc(_mm256_and_si256(_mm256_srli_epi16(Q, 2 * j), m2), ka_pair(scales, k), a, t0, T,
                   blk * 256 + 128 * h + 32 * j, s);
        }
    }
    const __m256i mins = _mm256_srli_epi16(raw, 4);
    return (ka_blk){qg_avx2_f16(p + 80), qg_avx2_f16(p + 82), mins};
}

/* ---- q3_K ---------------------------------------------------------------------- */

/* The 16 six-bit scales of a q3_K block (the 12 bytes at sc: low nibbles
 * of scales 0..7 and, above them, of 8..15 in bytes 0..7; two high bits
 * each in bytes 8..11, scale j's at bit 2·(j / 4) of byte j % 4), minus
 * 32, as int16 lanes.  Built in registers: ggml's way, four 32-bit stores
 * read back by one vector load, stalled store forwarding on every block
 * (a third of the q3_K decode's time in perf). */
KA __m256i ka_q3K_scales(const uint8_t *sc) {
    uint64_t lo;
    uint32_t hi;
    memcpy(&lo, sc, 8);
    memcpy(&hi, sc + 8, 4);
    const __m128i x = _mm_cvtsi64_si128((long long)lo);
    const __m128i nib = _mm_and_si128(_mm_unpacklo_epi64(x, _mm_srli_epi16(x, 4)), _mm_set1_epi8(0x0F));
    const __m128i hb = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32((int)hi), _mm_set_epi32(6, 4, 2, 0)),
                                     _mm_set1_epi8(3));
    const __m128i s8 = _mm_or_si128(nib, _mm_slli_epi16(hb, 4)); /* 0..63 */
    return _mm256_sub_epi16(_mm256_cvtepu8_epi16(s8), _mm256_set1_epi16(32));
}

KA ka_blk ka_q3K(const uint8_t *p, const qg_acts *a, int64_t t0, const int T, int64_t blk, __m256i *s) {
    const __m256i m2 = _mm256_set1_epi8(3), m4 = _mm256_set1_epi8(4);
    const __m256i scv = ka_q3K_scales(p + 96);
    const __m256i H = _mm256_loadu_si256((const __m256i *)p);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m256i Q = _mm256_loadu_si256((const __m256i *)(p + 32 + 32 * h));
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) { /* codes q + 4 of elements 128h + 32j .. */
            const int b = 4 * h + j; /* the high bit's place in H, moved to bit 2 in one shift */
            const __m256i lo = _mm256_and_si256(j ? _mm256_srli_epi16(Q, 2 * j) : Q, m2);
            const __m256i hs = b < 2 ? _mm256_slli_epi16(H, 2 - b) : b > 2 ? _mm256_srli_epi16(H, b - 2) : H;
            const int k = 8 * h + 2 * j;
            ka_acc(_mm256_or_si256(lo, _mm256_and_si256(hs, m4)), ka_pair(scv, k), a, t0, T,
                   blk * 256 + 128 * h + 32 * j, s);
        }
    }
    return (ka_blk){qg_avx2_f16(p + 108), 0.0f, scv};
}

/* ---- q4_K, q5_K ------------------------------------------------------------------ */

/* quant_scales_mins_k4's 16 bytes (scales 0..7, mins 0..7) of the 12 at
 * q, as a vector built from its words in registers (stored as bytes and
 * read back as one vector, they stalled store forwarding every block). */
KA __m128i ka_scales_mins_k4(const uint8_t *q) {
    uint32_t u0, u1, u2;
    memcpy(&u0, q, 4);
    memcpy(&u1, q + 4, 4);
    memcpy(&u2, q + 8, 4);
    const uint32_t m6 = 0x3f3f3f3f, m4 = 0x0f0f0f0f, m2 = 0x03030303;
    const uint32_t sc03 = u0 & m6, sc47 = (u2 & m4) | (((u0 >> 6) & m2) << 4);
    const uint32_t mn03 = u1 & m6, mn47 = ((u2 >> 4) & m4) | (((u1 >> 6) & m2) << 4);
    return _mm_unpacklo_epi64(_mm_cvtsi64_si128((long long)((uint64_t)sc47 << 32 | sc03)),
                              _mm_cvtsi64_si128((long long)((uint64_t)mn47 << 32 | mn03)));
}

/* q5 0: q4_K (144 bytes, nibbles at 16); 1: q5_K (176 bytes, qh at 16,
 * nibbles at 48). */
KA ka_blk ka_q45K(const int q5, const uint8_t *p, const qg_acts *a, int64_t t0, const int T, int64_t blk,
                  __m256i *s) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m1 = _mm256_set1_epi8(1);
    const __m128i sm8 = ka_scales_mins_k4(p + 4);
    const __m256i sc16 = _mm256_cvtepu8_epi16(sm8);
    const __m256i sclo = _mm256_permute2x128_si256(sc16, sc16, 0x00); /* scales 0..7 in both halves */
    const __m256i QH = q5 ? _mm256_loadu_si256((const __m256i *)(p + 16)) : _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) { /* elements 64i .. 64i + 63: sub-blocks 2i, 2i + 1 */
        const __m256i q = _mm256_loadu_si256((const __m256i *)(p + (q5 ? 48 : 16) + 32 * i));
        __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        if (q5) {
            lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(QH, 2 * i), m1), 4));
            hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(QH, 2 * i + 1), m1), 4));
        }
        ka_acc(lo, ka_one_of(sclo, 2 * i), a, t0, T, blk * 256 + 64 * i, s);
        ka_acc(hi, ka_one_of(sclo, 2 * i + 1), a, t0, T, blk * 256 + 64 * i + 32, s);
    }
    /* the min of 32 elements for both of their 16-sums */
    const __m128i idx = _mm_set_epi8(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8);
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sm8, idx));
    return (ka_blk){qg_avx2_f16(p), qg_avx2_f16(p + 2), mins};
}

/* ---- q6_K ------------------------------------------------------------------------ */

KA ka_blk ka_q6K(const uint8_t *p, const qg_acts *a, int64_t t0, const int T, int64_t blk, __m256i *s) {
    const __m256i lo4 = _mm256_set1_epi8(0x0F), lo2 = _mm256_set1_epi8(0x03);
    const int8_t *sc = (const int8_t *)(p + 192);
    const __m256i scv = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc));
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m256i L0 = _mm256_loadu_si256((const __m256i *)(p + 64 * h));
        const __m256i L1 = _mm256_loadu_si256((const __m256i *)(p + 64 * h + 32));
        const __m256i H = _mm256_loadu_si256((const __m256i *)(p + 128 + 32 * h));
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) { /* 32 codes: elements 128h + 32c .. */
            const __m256i L = c & 1 ? L1 : L0;
            const __m256i lowbits = c < 2 ? _mm256_and_si256(L, lo4) : _mm256_and_si256(_mm256_srli_epi16(L, 4), lo4);
            const __m256i highbits = _mm256_and_si256(_mm256_srli_epi16(H, 2 * c), lo2);
            const int k = 8 * h + 2 * c;
            ka_acc(_mm256_or_si256(lowbits, _mm256_slli_epi16(highbits, 4)), ka_pair(scv, k), a, t0, T,
                   blk * 256 + 128 * h + 32 * c, s);
        }
    }
    return (ka_blk){qg_avx2_f16(p + 208), 0.0f, scv};
}

/* ---- iq4_xs -------------------------------------------------------------------- */

/* The 8 six-bit scales of an iq4_xs block (scales_h, 2 bits each, at p +
 * 2; scales_l, a nibble each, at p + 4), minus 32, as int16 lanes 0..7 in
 * both halves: built in registers once per block (extracted one by one in
 * scalar code and broadcast, they were the largest part of the decode's
 * instructions). */
KA __m256i ka_iq4xs_scales(const uint8_t *p) {
    uint16_t sh;
    uint32_t sl;
    memcpy(&sh, p + 2, 2);
    memcpy(&sl, p + 4, 4);
    const __m128i x = _mm_cvtsi32_si128((int)sl);
    /* byte 2i: scales_l[i] & 15 (scale 2i), byte 2i + 1: its high nibble */
    const __m128i lo = _mm_cvtepu8_epi16(_mm_and_si128(_mm_unpacklo_epi8(x, _mm_srli_epi16(x, 4)), _mm_set1_epi8(0x0F)));
    /* lane j: bits 2j, 2j + 1 of scales_h moved to 14, 15 by × 2^(14 - 2j), then to 4, 5 */
    const __m128i up = _mm_mullo_epi16(_mm_set1_epi16((short)sh),
                                       _mm_set_epi16(1, 4, 16, 64, 256, 1024, 4096, 16384));
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(up, 10), _mm_set1_epi16(0x30));
    return _mm256_broadcastsi128_si256(_mm_sub_epi16(_mm_or_si128(lo, hi), _mm_set1_epi16(32)));
}

KA ka_blk ka_iq4xs(const uint8_t *p, const qg_acts *a, int64_t t0, const int T, int64_t blk,
                  __m256i *s) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)quant_iq4nl_values));
    const __m256i sc8 = ka_iq4xs_scales(p);
#pragma GCC unroll 8
    for (int ib = 0; ib < 8; ib++) {
        /* the 16 bytes in both halves, the high half's shifted by 4: low nibbles then high ones */
        const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(p + 8 + 16 * ib)));
        const __m256i codes = _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_set_epi64x(4, 4, 0, 0)), m4);
        const __m256i wv = _mm256_shuffle_epi8(lut, codes);
        const __m256i aw = _mm256_sign_epi8(wv, wv);
        const __m256i scv = ka_one_of(sc8, ib);
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            const __m256i xs = _mm256_sign_epi8(ka_x(a, t0 + t, blk * 256 + 32 * ib), wv);
            s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, xs), scv));
        }
    }
    return (ka_blk){qg_avx2_f16(p), 0.0f, _mm256_setzero_si256()};
}

/* ---- rows ---------------------------------------------------------------------------- */

enum { KA_Q2_K, KA_Q3_K, KA_Q4_K, KA_Q5_K, KA_Q6_K, KA_IQ4_XS };
enum { KA_PF = 2048 };

/* The dots of one row with tokens t0 .. t0 + T - 1 (QG_AVX2_ROWS's DOT). */
KA void ka_dot(const int type, const uint8_t *row, int64_t cols, const qg_acts *a, int64_t t0, const int T,
               float *out) {
    const size_t bytes = type == KA_Q2_K   ? QUANT_Q2_K_BYTES
                         : type == KA_Q3_K ? QUANT_Q3_K_BYTES
                         : type == KA_Q4_K ? sizeof(quant_block_q4_K)
                         : type == KA_Q5_K ? QUANT_Q5_K_BYTES
                         : type == KA_Q6_K ? sizeof(quant_block_q6_K)
                                           : QUANT_IQ4_XS_BYTES;
    const int end = type == KA_Q3_K || type == KA_Q6_K ? KA_OFFSET : type == KA_IQ4_XS ? KA_PLAIN : KA_MINS;
    const int shift = type == KA_Q3_K ? 2 : 5; /* the offsets 4 and 32 */
    const int64_t nblk = cols / 256;
    __m256 acc[QG_AVX2_T], accm[QG_AVX2_T];
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) acc[t] = accm[t] = _mm256_setzero_ps();
    for (int64_t blk = 0; blk < nblk; blk++) {
        const uint8_t *p = row + blk * bytes;
        /* the bytes KA_PF ahead (the rows lie end to end: past this row's
         * end, the next one's) prefetched at the pace this block is read */
#pragma GCC unroll 4
        for (size_t l = 0; l < bytes; l += 64) _mm_prefetch((const char *)p + KA_PF + l, _MM_HINT_T0);
        __m256i s[QG_AVX2_T];
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) s[t] = _mm256_setzero_si256();
        ka_blk b;
        switch (type) {
        case KA_Q2_K: b = ka_q2K(p, a, t0, T, blk, s); break;
        case KA_Q3_K: b = ka_q3K(p, a, t0, T, blk, s); break;
        case KA_Q4_K: b = ka_q45K(0, p, a, t0, T, blk, s); break;
        case KA_Q5_K: b = ka_q45K(1, p, a, t0, T, blk, s); break;
        case KA_Q6_K: b = ka_q6K(p, a, t0, T, blk, s); break;
        default: b = ka_iq4xs(p, a, t0, T, blk, s); break;
        }
        ka_end(end, shift, a, t0, T, blk, b, s, acc, accm);
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) out[t] = end == KA_MINS ? vf_hsum(acc[t]) - vf_hsum(accm[t]) : vf_hsum(acc[t]);
}

QG_AVX2_ROWS(ffn_qg_rows_avx2_q2_K, ka_dot, KA_Q2_K)
QG_AVX2_ROWS(ffn_qg_rows_avx2_q3_K, ka_dot, KA_Q3_K)
QG_AVX2_ROWS(ffn_qg_rows_avx2_q4_K, ka_dot, KA_Q4_K)
QG_AVX2_ROWS(ffn_qg_rows_avx2_q5_K, ka_dot, KA_Q5_K)
QG_AVX2_ROWS(ffn_qg_rows_avx2_q6_K, ka_dot, KA_Q6_K)
QG_AVX2_ROWS(ffn_qg_rows_avx2_iq4_xs, ka_dot, KA_IQ4_XS)
