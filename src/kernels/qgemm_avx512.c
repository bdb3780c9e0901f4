/* qgemm_avx512.c -- the AVX-512 kernels of ffn_qgemm (contract in
 * qgemm_impl.h): one weight row at a time against up to 8 tokens, each
 * weight byte decoded once for all of them.
 *
 *   q8_0, q4_0  two 32-blocks per 64-byte vector; vpdpbusd multiplies the
 *               unsigned weight bytes (q8_0 offset by +128, q4_0 nibbles
 *               0..15) by the int8 activations, starting from the lane
 *               corrections that cancel the offset; per block pair one
 *               convert and one FMA by weight scale × activation scale.
 *   q4_1, q5_0, q5_1, iq4_nl  q4_0's groups of four blocks, gathered by
 *               word permutes; codes unsigned as vpdpbusd wants them
 *               (q5: nibble + 16 · high bit; iq4_nl: value + 128) from a
 *               start that cancels the offset; q4_1/q5_1's mins from the
 *               activations' lane sums; one FMA per group (see below).
 *   q4_K, q6_K  a 256-block as four 64-byte vectors of unsigned codes;
 *               vpmaddubsw (codes × int8 activations, pairs to int16) then
 *               VNNI vpdpwssd by the sub-block scales, all in int32 for the
 *               block; mins (q4_K) and the −32 offset (q6_K) from the
 *               activations' 16-sums; one FMA per block.
 *   bf16        vdpbf16ps on the activations rounded to bf16.
 *   f16, f32    F16C conversion (f16) and FMA on the fp32 activations.
 * Integer sums are exact; every float accumulator sequence depends only on
 * cols (two accumulators per token, alternating steps), so a token's
 * result is the same whatever n or the thread split.  Without VNNI or
 * AVX512_BF16 on the CPU the format goes to the AVX2 kernel.  The VNNI and
 * BF16 instructions are enabled per function (the file is built for the
 * base AVX-512 set). */
#include "kernels/qgemm_impl.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"

#include <immintrin.h>
#include <string.h>

#define QK_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512vbmi,avx512bf16,avx2,fma,f16c")))
#define QK static inline __attribute__((always_inline)) QK_TARGET
enum { QK_T = 8 }; /* tokens per pass over a row */
/* Bytes ahead of a row's stream that the decode kernels (one or two tokens,
 * whole rows) prefetch: the hardware prefetcher alone kept the single
 * stream well below the read bandwidth. */
enum { QK_PF = 2048, QK_STREAM_T = 2 /* = QK_WHOLE_ROW_T below */ };
#define QK_PREFETCH(p, lines)                                                      \
    do {                                                                           \
        for (int pf_ = 0; pf_ < (lines); pf_++)                                    \
            _mm_prefetch((const char *)(p) + QK_PF + 64 * pf_, _MM_HINT_T0);       \
    } while (0)

static inline float qk_f16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return ffn_f16_to_f32(h);
}

/* [v0 ×8, v1 ×8] from two floats in the low lanes of v. */
QK __m512 qk_pair(__m128 v) {
    const __m512i idx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(v));
}

/* ---- activation quantization ------------------------------------------------- */

/* qg_quant_block of qgemm.c in vectors (len a multiple of 32): the same
 * amax (a max is exact), the same d = amax / 127 and 1 / d, the same
 * products, rounded to nearest even by the conversion, so q and d are
 * bit for bit the scalar ones. */
QK_TARGET float ffn_qg_quant_block_avx512(const float *x, int len, int8_t *q) {
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
    __m512 m = _mm512_setzero_ps();
    for (int j = 0; j < len; j += 16) m = _mm512_max_ps(m, _mm512_and_ps(_mm512_loadu_ps(x + j), absmask));
    float amax = _mm512_reduce_max_ps(m);
    float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m512 idv = _mm512_set1_ps(id);
    const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
    for (int j = 0; j < len; j += 16) {
        __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + j), idv));
        v = _mm512_min_epi32(_mm512_max_epi32(v, lo), hi);
        _mm_storeu_si128((__m128i *)(q + j), _mm512_cvtepi32_epi8(v));
    }
    return d;
}

/* Token x (cols) as QG_ACT_Q32 (k = 128, q8_0) or QG_ACT_Q4X (k = 8,
 * grouped) arrays: the same values as qgemm.c's scalar preparation (the
 * lane sums by vpdpbusd against ones are exact).  Needs VNNI. */
QK_TARGET void ffn_qg_prepare_avx512(const float *x, int64_t cols, int grouped, int8_t *q, float *d,
                                     int32_t *c, float *dl) {
    const int64_t nblk = cols / 32;
    const __m512i ones = _mm512_set1_epi8(1);
    if (!grouped) {
        for (int64_t b = 0; b < nblk; b++) d[b] = ffn_qg_quant_block_avx512(x + 32 * b, 32, q + 32 * b);
        int64_t b = 0;
        for (; b + 2 <= nblk; b += 2) {
            __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, _mm512_loadu_si512(q + 32 * b));
            _mm512_storeu_si512(c + 8 * b, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(s, 7)));
            _mm512_storeu_ps(dl + 8 * b, _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(d[b]), _mm512_set1_ps(d[b + 1])));
        }
        if (b < nblk) {
            __m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1),
                                            _mm256_loadu_si256((const __m256i *)(q + 32 * b)));
            _mm256_storeu_si256((__m256i *)(c + 8 * b), _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(s, 7)));
            _mm256_storeu_ps(dl + 8 * b, _mm256_set1_ps(d[b]));
        }
        return;
    }
    const int64_t ng = (nblk + 3) / 4;
    int8_t buf[32];
    for (int64_t g = 0; g < ng; g++) {
        int8_t *qg = q + 128 * g;
        int nb = nblk - 4 * g >= 4 ? 4 : (int)(nblk - 4 * g);
        float dg[4] = {0, 0, 0, 0};
        if (nb < 4) memset(qg, 0, 128);
        for (int i = 0; i < nb; i++) {
            int64_t b = 4 * g + i;
            dg[i] = d[b] = ffn_qg_quant_block_avx512(x + 32 * b, 32, buf);
            memcpy(qg + 16 * i, buf, 16);
            memcpy(qg + 64 + 16 * i, buf + 16, 16);
        }
        __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, _mm512_loadu_si512(qg));
        s = _mm512_dpbusd_epi32(s, ones, _mm512_loadu_si512(qg + 64));
        _mm512_storeu_si512(c + 16 * g, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(s, 3)));
        _mm512_storeu_ps(dl + 16 * g, _mm512_permutexvar_ps(_mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0),
                                                            _mm512_castps128_ps512(_mm_loadu_ps(dg))));
    }
}

/* ---- q8_0 / q4_0 ------------------------------------------------------------ */

/* 64 unsigned weight bytes of blocks p0, p1 (q8: +128; q4: the nibbles,
 * each block's 16 bytes broadcast to two 128-bit lanes, the second lane
 * shifted by 4: low nibbles then high ones, as the block orders them). */
QK __m512i qk_w32(const uint8_t *p0, const uint8_t *p1, int q8) {
    if (q8) {
        __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(p0 + 2))),
                                       _mm256_loadu_si256((const __m256i *)(p1 + 2)), 1);
        return _mm512_xor_si512(v, _mm512_set1_epi8((char)0x80));
    }
    __m256i a = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(p0 + 2)));
    __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(p1 + 2)));
    __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
    const __m512i sh = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
    return _mm512_and_si512(_mm512_srlv_epi64(v, sh), _mm512_set1_epi8(0x0F));
}

/* acc[t] += the products of blocks b, b + 1 with token t0 + t. */
QK void qk_q32_pair(const uint8_t *row, int bsz, int q8, const qg_acts *a, int64_t t0,
                    const int T, int64_t b, __m512 *acc) {
    const uint8_t *p0 = row + b * bsz, *p1 = p0 + bsz;
    __m512i wv = qk_w32(p0, p1, q8);
    uint16_t h0, h1;
    memcpy(&h0, p0, 2);
    memcpy(&h1, p1, 2);
    __m512 wd = qk_pair(_mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)h0 | (uint32_t)h1 << 16))));
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) {
        int64_t tt = t0 + t;
        __m512i s = _mm512_dpbusd_epi32(_mm512_loadu_si512(a->c + tt * a->cs + b * 8), wv,
                                        _mm512_loadu_si512(a->q + tt * a->qs + b * 32));
        __m512 xd = _mm512_loadu_ps(a->dl + tt * a->cs + b * 8);
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(wd, xd), acc[t]);
    }
}

/* Blocks [k0/32, k1/32) of a row into acc0/acc1 of T tokens: pairs of
 * blocks alternate between the two, an odd pair or block at the row's end
 * goes to acc0 (k0 is a multiple of 128, so the sequence depends on cols
 * alone). */
QK void qk_part_q32(const uint8_t *row, int64_t k0, int64_t k1, int q8, const qg_acts *a,
                    int64_t t0, const int T, __m512 *acc0, __m512 *acc1) {
    const int bsz = q8 ? 34 : 18;
    const int64_t nblk = k1 / 32;
    int64_t b = k0 / 32;
    for (; b + 4 <= nblk; b += 4) {
        qk_q32_pair(row, bsz, q8, a, t0, T, b, acc0);
        qk_q32_pair(row, bsz, q8, a, t0, T, b + 2, acc1);
    }
    if (b + 2 <= nblk) {
        qk_q32_pair(row, bsz, q8, a, t0, T, b, acc0);
        b += 2;
    }
    if (b < nblk) { /* the last block of an odd count: lanes 0..7 */
        const uint8_t *p0 = row + b * bsz;
        __m512i wv = qk_w32(p0, p0, q8);
        float wd = qk_f16(p0);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            int64_t tt = t0 + t;
            __m512i s = _mm512_maskz_dpbusd_epi32(
                0x00FF, _mm512_maskz_loadu_epi32(0x00FF, a->c + tt * a->cs + b * 8), wv,
                _mm512_maskz_loadu_epi8(0xFFFFFFFFull, a->q + tt * a->qs + b * 32));
            acc0[t] = _mm512_mask3_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(wd * a->d[tt * a->ds + b]),
                                            acc0[t], 0x00FF);
        }
    }
}

/* ---- q4_0 in groups of four blocks ------------------------------------------------
 * The activations come in groups (qgemm_impl.h, QG_ACT_Q4X): a group's
 * four blocks of 16 weight bytes are gathered into one vector, whose low
 * nibbles meet the group's first halves and whose high nibbles its second
 * halves, two vpdpbusd for 128 weights; then one convert and one FMA per
 * group instead of per pair of blocks.  With AVX512_VBMI the bytes and the
 * four scales are gathered by two byte permutes from two loads; without
 * it by inserts and scalar loads (the same values, so the same results). */
static int qk_have_vbmi(void) { return (ffn_cpu_features() & FFN_CPU_VBMI) != 0; }

/* The weight bytes of the nb (1..4) blocks at p, as [qs0 | qs1 | qs2 | qs3]
 * (zero past nb), split into low and high nibbles, and the scales
 * [d0 ×4, d1 ×4, d2 ×4, d3 ×4] (zero past nb). */
QK void qk_q4x_w(const uint8_t *p, int nb, int vbmi, __m512i *lo, __m512i *hi, __m512 *wd) {
    __m512i w;
    if (vbmi) {
        const __m512i widx = _mm512_set_epi8(
            71, 70, 69, 68, 67, 66, 65, 64, 63, 62, 61, 60, 59, 58, 57, 56,
            53, 52, 51, 50, 49, 48, 47, 46, 45, 44, 43, 42, 41, 40, 39, 38,
            35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20,
            17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2);
        const __m512i sidx = _mm512_set_epi8(
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            55, 54, 55, 54, 55, 54, 55, 54, 37, 36, 37, 36, 37, 36, 37, 36,
            19, 18, 19, 18, 19, 18, 19, 18, 1, 0, 1, 0, 1, 0, 1, 0);
        __mmask64 ma = nb >= 4 ? ~(__mmask64)0 : (((__mmask64)1 << (18 * nb)) - 1);
        __m512i A = _mm512_maskz_loadu_epi8(ma, p);
        __m512i B = _mm512_maskz_loadu_epi8(nb >= 4 ? 0xFF : 0, p + 64);
        w = _mm512_permutex2var_epi8(A, widx, B);
        *wd = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi8(sidx, A)));
    } else {
        uint16_t h[4] = {0, 0, 0, 0};
        w = _mm512_setzero_si512();
        w = _mm512_inserti32x4(w, _mm_loadu_si128((const __m128i *)(p + 2)), 0);
        memcpy(&h[0], p, 2);
        if (nb > 1) w = _mm512_inserti32x4(w, _mm_loadu_si128((const __m128i *)(p + 20)), 1), memcpy(&h[1], p + 18, 2);
        if (nb > 2) w = _mm512_inserti32x4(w, _mm_loadu_si128((const __m128i *)(p + 38)), 2), memcpy(&h[2], p + 36, 2);
        if (nb > 3) w = _mm512_inserti32x4(w, _mm_loadu_si128((const __m128i *)(p + 56)), 3), memcpy(&h[3], p + 54, 2);
        __m256i hv = _mm256_setr_epi16((short)h[0], (short)h[0], (short)h[0], (short)h[0], (short)h[1], (short)h[1],
                                       (short)h[1], (short)h[1], (short)h[2], (short)h[2], (short)h[2], (short)h[2],
                                       (short)h[3], (short)h[3], (short)h[3], (short)h[3]);
        *wd = _mm512_cvtph_ps(hv);
    }
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    *lo = _mm512_and_si512(w, m4);
    *hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
}

/* ---- q4_1, q5_0, q5_1, iq4_nl in the same groups -----------------------------------
 * The other 32-element formats share q4_0's nibble order, so they take the
 * same grouped activations: a group's four blocks gathered into one vector
 * of 16-byte runs (every field of these blocks starts at an even byte, so
 * AVX512BW's word permute vpermt2w gathers them from two loads, on every
 * AVX-512 CPU alike), low nibbles against the first halves, high against
 * the second.  The codes vpdpbusd multiplies, and the start of its sum:
 *   q5_0    nibble + 16 · its qh bit (0..31; the bits from two 64-bit
 *           masks), from 2c = −16 · the 4-sums: Σ (q − 16)·x8.
 *   iq4_nl  the signed value + 128 (vpshufb of the 16-entry table), from
 *           16c = −128 · the 4-sums: Σ value·x8.
 *   q4_1, q5_1  the codes (q5_1 with its qh bits) from 0: Σ q·x8; the
 *           block's m · Σ x8 from c itself (c = −8 · Σ x8 per lane), so a
 *           lane's weight part is Σ q·x8 · d + c · (−m/8), exact in c and
 *           rounded twice, then × the activation scale.
 * Every integer sum is exact (a lane at most 8·255·127 + |16c|). */
enum { QX_Q8_0, QX_Q4_0, QX_Q4_1, QX_Q5_0, QX_Q5_1, QX_IQ4_NL }; /* the formats of the 32-blocks */

static inline int qx_bsz(int kind) {
    return kind == QX_Q8_0 ? 34 : kind == QX_Q4_1 ? 20 : kind == QX_Q5_0 ? 22 : kind == QX_Q5_1 ? 24 : 18;
}
static inline int qx_has_m(int kind) { return kind == QX_Q4_1 || kind == QX_Q5_1; }

/* Word indices into the 64 words of two loads (A: bytes 0..63 of a group,
 * B: 64..127): qs of the four blocks (8 words each); their d (×4 each)
 * then m (×4 each); their qh's low words then high words (8, the rest 0). */
#define QX_R8(b) (b), (b) + 1, (b) + 2, (b) + 3, (b) + 4, (b) + 5, (b) + 6, (b) + 7
#define QX_R4(b) (b), (b), (b), (b)
#define QX_QS(bs, o) {QX_R8((o) / 2), QX_R8(((bs) + (o)) / 2), QX_R8((2 * (bs) + (o)) / 2), QX_R8((3 * (bs) + (o)) / 2)}
#define QX_SC(bs) {QX_R4(0), QX_R4((bs) / 2), QX_R4(bs), QX_R4(3 * (bs) / 2),                         \
                   QX_R4(1), QX_R4((bs) / 2 + 1), QX_R4((bs) + 1), QX_R4(3 * (bs) / 2 + 1)}
#define QX_QH(bs, o) {(o) / 2, ((bs) + (o)) / 2, (2 * (bs) + (o)) / 2, (3 * (bs) + (o)) / 2,               \
                      (o) / 2 + 1, ((bs) + (o)) / 2 + 1, (2 * (bs) + (o)) / 2 + 1, (3 * (bs) + (o)) / 2 + 1}
static const uint16_t qx_idx[QX_IQ4_NL + 1][3][32] __attribute__((aligned(64))) = {
    [QX_Q4_1] = {QX_QS(20, 4), QX_SC(20), {0}},
    [QX_Q5_0] = {QX_QS(22, 6), QX_SC(22), QX_QH(22, 2)},
    [QX_Q5_1] = {QX_QS(24, 8), QX_SC(24), QX_QH(24, 4)},
    [QX_IQ4_NL] = {QX_QS(18, 2), QX_SC(18), {0}},
};
#undef QX_R8
#undef QX_R4
#undef QX_QS
#undef QX_SC
#undef QX_QH

/* The codes of the nb (1..4) blocks at p split into lo and hi (zero past
 * nb: masked loads), their scales [d0 ×4, .., d3 ×4] and, for q4_1 and
 * q5_1, wm = [−m0/8 ×4, ..]. */
QK void qx_w(const int kind, const uint8_t *p, int nb, __m512i *lo, __m512i *hi, __m512 *wd, __m512 *wm) {
    const int total = nb * qx_bsz(kind);
    const __mmask64 ma = total >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << total) - 1);
    const __mmask64 mb = total > 64 ? (((__mmask64)1 << (total - 64)) - 1) : 0;
    const __m512i A = _mm512_maskz_loadu_epi8(ma, p), B = _mm512_maskz_loadu_epi8(mb, p + 64);
    const __m512i w = _mm512_permutex2var_epi16(A, _mm512_load_si512(qx_idx[kind][0]), B);
    const __m512i sv = _mm512_permutex2var_epi16(A, _mm512_load_si512(qx_idx[kind][1]), B);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    *lo = _mm512_and_si512(w, m4);
    *hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
    *wd = _mm512_cvtph_ps(_mm512_castsi512_si256(sv));
    if (qx_has_m(kind)) *wm = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(sv, 1)), _mm512_set1_ps(-0.125f));
    else *wm = _mm512_setzero_ps();
    if (kind == QX_Q5_0 || kind == QX_Q5_1) {
        const __m128i h = _mm512_castsi512_si128(_mm512_permutex2var_epi16(A, _mm512_load_si512(qx_idx[kind][2]), B));
        const __m512i b16 = _mm512_set1_epi8(0x10);
        *lo = _mm512_mask_add_epi8(*lo, (__mmask64)(uint64_t)_mm_cvtsi128_si64(h), *lo, b16);
        *hi = _mm512_mask_add_epi8(*hi, (__mmask64)(uint64_t)_mm_extract_epi64(h, 1), *hi, b16);
    }
    if (kind == QX_IQ4_NL) {
        const __m512i lut = _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)quant_iq4nl_values)),
                                             _mm512_set1_epi8((char)0x80));
        *lo = _mm512_shuffle_epi8(lut, *lo);
        *hi = _mm512_shuffle_epi8(lut, *hi);
    }
}

/* Any grouped format's weights (q4_0 by qk_q4x_w, the others by qx_w). */
QK void qx_group_w(const int kind, const uint8_t *p, int nb, int vbmi, __m512i *lo, __m512i *hi, __m512 *wd,
                   __m512 *wm) {
    if (kind == QX_Q4_0) {
        qk_q4x_w(p, nb, vbmi, lo, hi, wd);
        *wm = _mm512_setzero_ps();
    } else {
        qx_w(kind, p, nb, lo, hi, wd, wm);
    }
}

/* vpdpbusd's start for a group from the activations' c (see above). */
QK __m512i qx_start(const int kind, __m512i c) {
    switch (kind) {
    case QX_Q4_0: return c;
    case QX_Q5_0: return _mm512_slli_epi32(c, 1);
    case QX_IQ4_NL: return _mm512_slli_epi32(c, 4);
    default: return _mm512_setzero_si512();
    }
}

/* acc + a group's products (s the exact sum, c the activations' lanes,
 * xd their scales) by the weight scales wd (and mins wm). */
QK __m512 qx_scale(const int kind, __m512i s, __m512i c, __m512 xd, __m512 wd, __m512 wm, __m512 acc) {
    if (qx_has_m(kind))
        return _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_cvtepi32_ps(c), wm, _mm512_mul_ps(_mm512_cvtepi32_ps(s), wd)),
                               xd, acc);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(wd, xd), acc);
}

/* acc += group g of a row (its weights lo, hi, wd, wm) times token tt. */
QK __m512 qk_q4x_dot(const int kind, __m512i lo, __m512i hi, __m512 wd, __m512 wm, const qg_acts *a, int64_t tt,
                     int64_t g, __m512 acc) {
    const int8_t *xq = a->q + tt * a->qs + g * 128;
    const __m512i c = _mm512_loadu_si512(a->c + tt * a->cs + g * 16);
    __m512i s = _mm512_dpbusd_epi32(qx_start(kind, c), lo, _mm512_loadu_si512(xq));
    s = _mm512_dpbusd_epi32(s, hi, _mm512_loadu_si512(xq + 64));
    return qx_scale(kind, s, c, _mm512_loadu_ps(a->dl + tt * a->cs + g * 16), wd, wm, acc);
}

/* Group g (nb blocks) of a row into acc[t] of T tokens. */
QK void qk_q4x_group(const int kind, const uint8_t *row, int64_t g, int nb, int vbmi, const qg_acts *a,
                     int64_t t0, const int T, __m512 *acc) {
    const uint8_t *p = row + g * 4 * qx_bsz(kind);
    if (T <= QK_STREAM_T) QK_PREFETCH(p, 2);
    __m512i lo, hi;
    __m512 wd, wm;
    qx_group_w(kind, p, nb, vbmi, &lo, &hi, &wd, &wm);
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) acc[t] = qk_q4x_dot(kind, lo, hi, wd, wm, a, t0 + t, g, acc[t]);
}

/* Columns [k0, k1) of a row (k0 a multiple of 256): group g into acc0 when
 * g is even, acc1 when odd, so the sequence depends on cols alone. */
QK void qk_part_q4x(const int kind, const uint8_t *row, int64_t k0, int64_t k1, const qg_acts *a, int64_t t0,
                    const int T, __m512 *acc0, __m512 *acc1) {
    const int vbmi = kind == QX_Q4_0 && qk_have_vbmi();
    const int64_t nblk = k1 / 32, nfull = nblk / 4;
    int64_t g = k0 / 128;
    for (; g + 2 <= nfull; g += 2) {
        qk_q4x_group(kind, row, g, 4, vbmi, a, t0, T, acc0);
        qk_q4x_group(kind, row, g + 1, 4, vbmi, a, t0, T, acc1);
    }
    if (g < nfull) qk_q4x_group(kind, row, g++, 4, vbmi, a, t0, T, acc0);
    if (4 * g < nblk) qk_q4x_group(kind, row, g, (int)(nblk - 4 * g), vbmi, a, t0, T, g & 1 ? acc1 : acc0);
}

/* ---- q8_0 / q4_0 at n = 1: rows side by side -------------------------------------
 * One token: QK_N1_R rows go through their blocks together, so each pair
 * of activation blocks (its int8 values, lane corrections and scales) is
 * loaded once for all of them, and each row's stream is prefetched
 * QK_PF bytes ahead (measured on 2048 × 8192, 1 thread, loaded machine:
 * q4_0 1.4× and q8_0 1.15× from the prefetch alone; the hardware
 * prefetcher alone ran well below the bandwidth; the rows side by side
 * took the kernel time of an L2-resident q8_0 weight down by 15%, q4_0
 * unchanged).  Every row's arithmetic is qk_part_q32's, operation for
 * operation, so the result equals the one-row kernel's bit for bit. */
enum { QK_N1_R = 4 };

/* The weight bytes and the scales [d0 ×8, d1 ×8] of blocks p0, p0 + 1. */
QK void qk_w32_fast(const uint8_t *p0, int q8, __m512i *wv, __m512 *wd) {
    const uint8_t *p1 = p0 + (q8 ? 34 : 18);
    uint16_t h0, h1;
    *wv = qk_w32(p0, p1, q8);
    memcpy(&h0, p0, 2); /* one broadcast per scale instead of qk_pair's permute */
    memcpy(&h1, p1, 2);
    *wd = _mm512_cvtph_ps(_mm256_mask_set1_epi16(_mm256_set1_epi16((short)h0), 0xFF00, (short)h1));
}

/* acc[r] += blocks b, b + 1 of row r (the step of qk_q32_pair for one token). */
QK void qk_n1_pair(const uint8_t *const *rows, int bsz, int q8, const qg_acts *a, int64_t b,
                   const int R, __m512 *acc) {
    const __m512i cv = _mm512_loadu_si512(a->c + b * 8), qv = _mm512_loadu_si512(a->q + b * 32);
    const __m512 xd = _mm512_loadu_ps(a->dl + b * 8);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        const uint8_t *p0 = rows[r] + b * bsz;
        _mm_prefetch((const char *)p0 + QK_PF, _MM_HINT_T0);
        __m512i wv;
        __m512 wd;
        qk_w32_fast(p0, q8, &wv, &wd);
        __m512i s = _mm512_dpbusd_epi32(cv, wv, qv);
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(wd, xd), acc[r]);
    }
}

QK void qk_n1_q32(const uint8_t *const *rows, int q8, const qg_acts *a, int64_t nblk, const int R,
                  float *out, int accumulate) {
    const int bsz = q8 ? 34 : 18;
    __m512 acc0[QK_N1_R], acc1[QK_N1_R];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) acc0[r] = acc1[r] = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 4 <= nblk; b += 4) {
        qk_n1_pair(rows, bsz, q8, a, b, R, acc0);
        qk_n1_pair(rows, bsz, q8, a, b + 2, R, acc1);
    }
    if (b + 2 <= nblk) {
        qk_n1_pair(rows, bsz, q8, a, b, R, acc0);
        b += 2;
    }
    if (b < nblk) { /* as qk_part_q32's last block */
        __m512i cv = _mm512_maskz_loadu_epi32(0x00FF, a->c + b * 8);
        __m512i qv = _mm512_maskz_loadu_epi8(0xFFFFFFFFull, a->q + b * 32);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const uint8_t *p0 = rows[r] + b * bsz;
            __m512i wv = qk_w32(p0, p0, q8);
            float wd = qk_f16(p0);
            __m512i s = _mm512_maskz_dpbusd_epi32(0x00FF, cv, wv, qv);
            acc0[r] = _mm512_mask3_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(wd * a->d[b]), acc0[r], 0x00FF);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        float v = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r]));
        out[r] = accumulate ? out[r] + v : v;
    }
}

/* n = 1, the grouped formats: the rows of qk_part_q4x side by side, each
 * group's activations loaded once for R rows. */
QK void qk_n1_q4x_group(const int kind, const uint8_t *const *rows, const qg_acts *a, int64_t g, int nb,
                        int vbmi, const int R, __m512 *acc) {
    const __m512i cv = _mm512_loadu_si512(a->c + g * 16), st = qx_start(kind, cv);
    const __m512i x0 = _mm512_loadu_si512(a->q + g * 128), x1 = _mm512_loadu_si512(a->q + g * 128 + 64);
    const __m512 xd = _mm512_loadu_ps(a->dl + g * 16);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        const uint8_t *p = rows[r] + g * 4 * qx_bsz(kind);
        QK_PREFETCH(p, 2);
        __m512i lo, hi;
        __m512 wd, wm;
        qx_group_w(kind, p, nb, vbmi, &lo, &hi, &wd, &wm);
        __m512i s = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(st, lo, x0), hi, x1);
        acc[r] = qx_scale(kind, s, cv, xd, wd, wm, acc[r]);
    }
}

QK void qk_n1_q4x(const int kind, const uint8_t *const *rows, const qg_acts *a, int64_t nblk, const int R,
                  float *out, int accumulate) {
    const int vbmi = kind == QX_Q4_0 && qk_have_vbmi();
    const int64_t nfull = nblk / 4;
    __m512 acc0[QK_N1_R], acc1[QK_N1_R];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) acc0[r] = acc1[r] = _mm512_setzero_ps();
    int64_t g = 0;
    for (; g + 2 <= nfull; g += 2) {
        qk_n1_q4x_group(kind, rows, a, g, 4, vbmi, R, acc0);
        qk_n1_q4x_group(kind, rows, a, g + 1, 4, vbmi, R, acc1);
    }
    if (g < nfull) qk_n1_q4x_group(kind, rows, a, g++, 4, vbmi, R, acc0);
    if (4 * g < nblk) qk_n1_q4x_group(kind, rows, a, g, (int)(nblk - 4 * g), vbmi, R, g & 1 ? acc1 : acc0);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        float v = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r]));
        out[r] = accumulate ? out[r] + v : v;
    }
}

/* n = 1 of q8_0 (kind QX_Q8_0) or a grouped format: QK_N1_R rows at a time. */
QK void qk_rows_n1_q32(const ffn_qweight *w, const qg_acts *a, int64_t r0, int64_t r1, float *y,
                       int accumulate, const int kind) {
    const int64_t nblk = w->cols / 32;
    const uint8_t *rows[QK_N1_R];
    int64_t r = r0;
    for (; r + QK_N1_R <= r1; r += QK_N1_R) {
        for (int i = 0; i < QK_N1_R; i++) rows[i] = w->data + (size_t)(r + i) * w->row_bytes;
        if (kind == QX_Q8_0) qk_n1_q32(rows, 1, a, nblk, QK_N1_R, y + r, accumulate);
        else qk_n1_q4x(kind, rows, a, nblk, QK_N1_R, y + r, accumulate);
    }
    for (; r < r1; r++) {
        rows[0] = w->data + (size_t)r * w->row_bytes;
        if (kind == QX_Q8_0) qk_n1_q32(rows, 1, a, nblk, 1, y + r, accumulate);
        else qk_n1_q4x(kind, rows, a, nblk, 1, y + r, accumulate);
    }
}

/* ---- q4_K ---------------------------------------------------------------------- */

/* 32 int16 lanes: 16 × byte i0 of v, then 16 × byte i1. */
QK __m512i qk_bcast16(__m128i v, int i0, int i1) {
    __m256i b = _mm256_broadcastsi128_si256(v);
    __m256i idx = _mm256_set_m128i(_mm_set1_epi8((char)i1), _mm_set1_epi8((char)i0));
    return _mm512_cvtepu8_epi16(_mm256_shuffle_epi8(b, idx));
}

/* Blocks [k0/256, k1/256): the scaled sums into acc, minus the mins' part
 * into accm (lanes 0..7). */
/* One super-block's Σ codes × int8 activations × int16 sub-block scales in
 * int32 lanes: wv[i] (unsigned codes, 64 bytes) against xq + 64·i,
 * vpmaddubsw pairs to int16, vpdpwssd by sc[i]; two chains (0, 1 and 2, 3)
 * for latency, added at the end (exact in integers).  q4_K and q6_K. */
QK __m512i qk_dot256(const __m512i wv[4], const __m512i sc[4], const int8_t *xq) {
    const __m512i z = _mm512_setzero_si512();
    __m512i s0 = _mm512_dpwssd_epi32(z, _mm512_maddubs_epi16(wv[0], _mm512_loadu_si512(xq)), sc[0]);
    __m512i s1 = _mm512_dpwssd_epi32(z, _mm512_maddubs_epi16(wv[2], _mm512_loadu_si512(xq + 128)), sc[2]);
    s0 = _mm512_dpwssd_epi32(s0, _mm512_maddubs_epi16(wv[1], _mm512_loadu_si512(xq + 64)), sc[1]);
    s1 = _mm512_dpwssd_epi32(s1, _mm512_maddubs_epi16(wv[3], _mm512_loadu_si512(xq + 192)), sc[3]);
    return _mm512_add_epi32(s0, s1);
}

QK void qk_part_q4K(const uint8_t *row, int64_t k0, int64_t k1, const qg_acts *a, int64_t t0,
                    const int T, __m512 *acc, __m512 *accm) {
    const __m128i mins_idx = _mm_set_epi8(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8);
    for (int64_t blk = k0 / 256; blk < k1 / 256; blk++) {
        const uint8_t *p = row + blk * 144;
        if (T <= QK_STREAM_T) QK_PREFETCH(p, 2);
        const float d = qk_f16(p), dmin = qk_f16(p + 2);
        uint8_t sm8[16];
        quant_scales_mins_k4(p + 4, sm8);
        const __m128i sm = _mm_loadu_si128((const __m128i *)sm8);
        __m512i wv[4], sc[4];
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(p + 16 + 32 * i));
            wv[i] = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4), 1),
                                     _mm512_set1_epi8(0x0F));
            sc[i] = qk_bcast16(sm, 2 * i, 2 * i + 1);
        }
        __m256i m16 = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sm, mins_idx));
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            int64_t tt = t0 + t;
            const int8_t *xq = a->q + tt * a->qs + blk * 256;
            const __m512i s01 = qk_dot256(wv, sc, xq);
            const float dx = a->d[tt * a->ds + blk];
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s01), _mm512_set1_ps(d * dx), acc[t]);
            __m256i mm = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(a->bs + tt * a->bss + blk * 16)), m16);
            accm[t] = _mm512_fnmadd_ps(_mm512_zextps256_ps512(_mm256_cvtepi32_ps(mm)),
                                       _mm512_set1_ps(dmin * dx), accm[t]);
        }
    }
}

/* ---- q6_K ------------------------------------------------------------------------ */

/* 32 int16 lanes: 8 × each of bytes 4i..4i+3 of v (signed). */
QK __m512i qk_bcast8(__m128i v, int i) {
    __m256i b = _mm256_broadcastsi128_si256(v);
    __m256i idx = _mm256_set_m128i(
        _mm_set_epi8(4 * i + 3, 4 * i + 3, 4 * i + 3, 4 * i + 3, 4 * i + 3, 4 * i + 3, 4 * i + 3, 4 * i + 3,
                     4 * i + 2, 4 * i + 2, 4 * i + 2, 4 * i + 2, 4 * i + 2, 4 * i + 2, 4 * i + 2, 4 * i + 2),
        _mm_set_epi8(4 * i + 1, 4 * i + 1, 4 * i + 1, 4 * i + 1, 4 * i + 1, 4 * i + 1, 4 * i + 1, 4 * i + 1,
                     4 * i, 4 * i, 4 * i, 4 * i, 4 * i, 4 * i, 4 * i, 4 * i));
    return _mm512_cvtepi8_epi16(_mm256_shuffle_epi8(b, idx));
}

QK void qk_part_q6K(const uint8_t *row, int64_t k0, int64_t k1, const qg_acts *a, int64_t t0,
                    const int T, __m512 *acc) {
    const __m512i lo4 = _mm512_set1_epi8(0x0F), lo2 = _mm512_set1_epi8(0x03);
    for (int64_t blk = k0 / 256; blk < k1 / 256; blk++) {
        const uint8_t *p = row + blk * 210;
        if (T <= QK_STREAM_T) QK_PREFETCH(p, 3);
        const float d = qk_f16(p + 208);
        __m128i scv = _mm_loadu_si128((const __m128i *)(p + 192));
        __m512i wv[4], sc[4];
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m512i L = _mm512_loadu_si512(p + 64 * h);
            __m256i H = _mm256_loadu_si256((const __m256i *)(p + 128 + 32 * h));
            __m512i Hz = _mm512_inserti64x4(_mm512_castsi256_si512(H), _mm256_srli_epi16(H, 2), 1);
            wv[2 * h] = _mm512_or_si512(_mm512_and_si512(L, lo4),
                                        _mm512_slli_epi16(_mm512_and_si512(Hz, lo2), 4));
            wv[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L, 4), lo4),
                                            _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(Hz, 4), lo2), 4));
        }
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) sc[i] = qk_bcast8(scv, i);
        __m256i sc_all = _mm256_cvtepi8_epi16(scv);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            int64_t tt = t0 + t;
            const int8_t *xq = a->q + tt * a->qs + blk * 256;
            const __m512i s01 = qk_dot256(wv, sc, xq);
            /* the codes are q + 32: subtract 32 · Σ_k scale_k · (16-sum k) */
            __m256i corr = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(a->bs + tt * a->bss + blk * 16)), sc_all);
            __m512i s = _mm512_sub_epi32(s01, _mm512_zextsi256_si512(_mm256_slli_epi32(corr, 5)));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(d * a->d[tt * a->ds + blk]), acc[t]);
        }
    }
}

/* ---- bf16, f16, f32 ------------------------------------------------------------- */

/* Columns [k0, k1): steps of 64 alternate 32-column halves between acc0
 * and acc1; the tail (at the row's end) in steps of 32 into acc0. */
QK void qk_part_bf16(const uint8_t *row, int64_t k0, int64_t k1, const qg_acts *a, int64_t t0,
                     const int T, __m512 *acc0, __m512 *acc1) {
    int64_t k = k0;
    for (; k + 64 <= k1; k += 64) {
        if (T <= QK_STREAM_T) QK_PREFETCH(row + 2 * k, 2);
        __m512i w0 = _mm512_loadu_si512(row + 2 * k), w1 = _mm512_loadu_si512(row + 2 * k + 64);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const uint16_t *xb = a->xb + (t0 + t) * a->xbs + k;
            acc0[t] = _mm512_dpbf16_ps(acc0[t], (__m512bh)w0, (__m512bh)_mm512_loadu_si512(xb));
            acc1[t] = _mm512_dpbf16_ps(acc1[t], (__m512bh)w1, (__m512bh)_mm512_loadu_si512(xb + 32));
        }
    }
    for (; k < k1; k += 32) {
        __mmask32 m = k1 - k >= 32 ? 0xFFFFFFFFu : (__mmask32)((1u << (k1 - k)) - 1u);
        __m512i w0 = _mm512_maskz_loadu_epi16(m, row + 2 * k);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++)
            acc0[t] = _mm512_dpbf16_ps(acc0[t], (__m512bh)w0,
                                       (__m512bh)_mm512_maskz_loadu_epi16(m, a->xb + (t0 + t) * a->xbs + k));
    }
}

/* 16 weights from k as floats (f16: converted; f32: loaded), lanes outside m zero. */
QK __m512 qk_wf(const uint8_t *row, int64_t k, int f16, __mmask16 m) {
    if (f16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * k));
    return _mm512_maskz_loadu_ps(m, row + 4 * k);
}

QK void qk_part_float(const uint8_t *row, int64_t k0, int64_t k1, int f16, const qg_acts *a,
                      int64_t t0, const int T, __m512 *acc0, __m512 *acc1) {
    int64_t k = k0;
    for (; k + 32 <= k1; k += 32) {
        if (T <= QK_STREAM_T) QK_PREFETCH(row + (f16 ? 2 : 4) * k, f16 ? 1 : 2);
        __m512 w0 = qk_wf(row, k, f16, 0xFFFF), w1 = qk_wf(row, k + 16, f16, 0xFFFF);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const float *x = a->x + (t0 + t) * a->ldx + k;
            acc0[t] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x), acc0[t]);
            acc1[t] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + 16), acc1[t]);
        }
    }
    for (; k < k1; k += 16) {
        __mmask16 m = k1 - k >= 16 ? 0xFFFF : (__mmask16)((1u << (k1 - k)) - 1u);
        __m512 w0 = qk_wf(row, k, f16, m);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++)
            acc0[t] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(m, a->x + (t0 + t) * a->ldx + k), acc0[t]);
    }
}

/* ---- rows ---------------------------------------------------------------------------- */

/* Columns per pass over a block of rows: the chunk's activations of 8
 * tokens (int8 layouts ~3 bytes per value, f32 4) stay in L1 while the
 * rows go by; whole activations of 8 tokens × thousands of columns do not,
 * and were re-read from L2 for every row (measured: n = 8 cost 10× n = 1
 * on an L2-resident q4_0 weight before the chunking).  A multiple of 256,
 * so chunk edges never split a block or change a summation sequence. */
enum { QK_CHUNK = 1024, QK_RB = 8 };
/* Up to this many tokens a row is done whole before the next: one
 * sequential weight stream, which the prefetchers follow (chunks over 8
 * rows made n = 1 on a streamed 2048 × 8192 q4_0 weight 1.6× slower); the
 * activations of 2 tokens fit in L1 anyway. */
enum { QK_WHOLE_ROW_T = 2 };

/* Columns [k0, k1) of one row into the state of T tokens (T a constant in
 * every case of the switch in QK_ROWS). */
QK void qk_part(ffn_ggml_type type, const uint8_t *row, int64_t k0, int64_t k1, const qg_acts *a,
                int64_t t0, const int T, __m512 *s0, __m512 *s1) {
    __m512 acc0[QK_T], acc1[QK_T];
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) acc0[t] = s0[t], acc1[t] = s1[t];
    switch (type) {
    case FFN_GGML_TYPE_Q8_0: qk_part_q32(row, k0, k1, 1, a, t0, T, acc0, acc1); break;
    case FFN_GGML_TYPE_Q4_0: qk_part_q4x(QX_Q4_0, row, k0, k1, a, t0, T, acc0, acc1); break;
    case FFN_GGML_TYPE_Q4_1: qk_part_q4x(QX_Q4_1, row, k0, k1, a, t0, T, acc0, acc1); break;
    case FFN_GGML_TYPE_Q5_0: qk_part_q4x(QX_Q5_0, row, k0, k1, a, t0, T, acc0, acc1); break;
    case FFN_GGML_TYPE_Q5_1: qk_part_q4x(QX_Q5_1, row, k0, k1, a, t0, T, acc0, acc1); break;
    case FFN_GGML_TYPE_IQ4_NL: qk_part_q4x(QX_IQ4_NL, row, k0, k1, a, t0, T, acc0, acc1); break;
    case FFN_GGML_TYPE_Q4_K: qk_part_q4K(row, k0, k1, a, t0, T, acc0, acc1); break;
    case FFN_GGML_TYPE_Q6_K: qk_part_q6K(row, k0, k1, a, t0, T, acc0); break;
    case FFN_GGML_TYPE_BF16: qk_part_bf16(row, k0, k1, a, t0, T, acc0, acc1); break;
    case FFN_GGML_TYPE_F16: qk_part_float(row, k0, k1, 1, a, t0, T, acc0, acc1); break;
    default: qk_part_float(row, k0, k1, 0, a, t0, T, acc0, acc1); break;
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) s0[t] = acc0[t], s1[t] = acc1[t];
}

#define QK_CASE(TYPE, n) \
    case n: qk_part(TYPE, row, k0, k1, a, t0, n, st0[r], st1[r]); break;
#define QK_ROWS(name, TYPE)                                                                     \
    QK_TARGET void name(const ffn_qweight *w, const qg_acts *a, int64_t r0, int64_t r1,  \
                               float *y, int64_t ldy, int accumulate) {                         \
        __m512 st0[QK_RB][QK_T], st1[QK_RB][QK_T];                                              \
        for (int64_t rb = r0; rb < r1; rb += QK_RB) {                                           \
            int R = r1 - rb < QK_RB ? (int)(r1 - rb) : QK_RB;                                   \
            for (int64_t t0 = 0; t0 < a->n; t0 += QK_T) {                                       \
                int T = a->n - t0 < QK_T ? (int)(a->n - t0) : QK_T;                             \
                for (int r = 0; r < R; r++)                                                     \
                    for (int t = 0; t < T; t++) st0[r][t] = st1[r][t] = _mm512_setzero_ps();    \
                int64_t chunk = T <= QK_WHOLE_ROW_T ? w->cols : QK_CHUNK;                        \
                for (int64_t k0 = 0; k0 < w->cols; k0 += chunk) {                               \
                    int64_t k1 = w->cols - k0 < chunk ? w->cols : k0 + chunk;                   \
                    for (int r = 0; r < R; r++) {                                               \
                        const uint8_t *row = w->data + (size_t)(rb + r) * w->row_bytes;         \
                        switch (T) {                                                            \
                            QK_CASE(TYPE, 1) QK_CASE(TYPE, 2) QK_CASE(TYPE, 3)                  \
                            QK_CASE(TYPE, 4) QK_CASE(TYPE, 5) QK_CASE(TYPE, 6)                  \
                            QK_CASE(TYPE, 7) default: QK_CASE(TYPE, 8)                          \
                        }                                                                       \
                    }                                                                           \
                }                                                                               \
                for (int r = 0; r < R; r++)                                                     \
                    for (int t = 0; t < T; t++) {                                               \
                        float v = _mm512_reduce_add_ps(_mm512_add_ps(st0[r][t], st1[r][t]));    \
                        float *o = y + (t0 + t) * ldy + rb + r;                                 \
                        *o = accumulate ? *o + v : v;                                           \
                    }                                                                           \
            }                                                                                   \
        }                                                                                       \
    }
static QK_ROWS(qk_rows_q8_0, FFN_GGML_TYPE_Q8_0)
static QK_ROWS(qk_rows_q4_0, FFN_GGML_TYPE_Q4_0)
static QK_ROWS(qk_rows_q4_1, FFN_GGML_TYPE_Q4_1)
static QK_ROWS(qk_rows_q5_0, FFN_GGML_TYPE_Q5_0)
static QK_ROWS(qk_rows_q5_1, FFN_GGML_TYPE_Q5_1)
static QK_ROWS(qk_rows_iq4_nl, FFN_GGML_TYPE_IQ4_NL)
QK_ROWS(ffn_qg_rows_avx512_q4_K, FFN_GGML_TYPE_Q4_K)
QK_ROWS(ffn_qg_rows_avx512_q6_K, FFN_GGML_TYPE_Q6_K)
QK_ROWS(ffn_qg_rows_avx512_bf16, FFN_GGML_TYPE_BF16)
QK_ROWS(ffn_qg_rows_avx512_f16, FFN_GGML_TYPE_F16)
QK_ROWS(ffn_qg_rows_avx512_f32, FFN_GGML_TYPE_F32)

/* The table's AVX-512 kernels (src/kernels/types.c): the integer formats
 * need VNNI and bf16 AVX512_BF16 there, else the AVX2 kernel runs; the
 * 32-element formats take a one-token kernel of their own at n = 1. */
#define QK_ROWS_N1(name, multi, KIND)                                                               \
    QK_TARGET void name(const ffn_qweight *w, const qg_acts *a, int64_t r0, int64_t r1, float *y,   \
                        int64_t ldy, int accumulate) {                                              \
        if (a->n == 1) qk_rows_n1_q32(w, a, r0, r1, y, accumulate, KIND);                           \
        else multi(w, a, r0, r1, y, ldy, accumulate);                                               \
    }
QK_ROWS_N1(ffn_qg_rows_avx512_q8_0, qk_rows_q8_0, QX_Q8_0)
QK_ROWS_N1(ffn_qg_rows_avx512_q4_0, qk_rows_q4_0, QX_Q4_0)
QK_ROWS_N1(ffn_qg_rows_avx512_q4_1, qk_rows_q4_1, QX_Q4_1)
QK_ROWS_N1(ffn_qg_rows_avx512_q5_0, qk_rows_q5_0, QX_Q5_0)
QK_ROWS_N1(ffn_qg_rows_avx512_q5_1, qk_rows_q5_1, QX_Q5_1)
QK_ROWS_N1(ffn_qg_rows_avx512_iq4_nl, qk_rows_iq4_nl, QX_IQ4_NL)
