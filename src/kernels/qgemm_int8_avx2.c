/* qgemm_int8_avx2.c -- ffn_qgemm at prompt sizes on AVX2 machines with
 * int8 products (see qgemm_int8.h): the answer llama.cpp gives on the same
 * CPUs, register-blocked so that each weight byte meets several tokens and
 * each activation byte several rows.
 *
 * Layout.  A format's scales come per lane of L elements: L = 32 (the
 * 32-element formats, q4_K, q5_K, iq4_xs, q3_K and q6_K) or 16 (q2_K).
 * Columns go in groups of 8 lanes (8L columns, the last group padded with
 * zero codes and zero scales), stored as L/4 steps of 32 bytes: step s
 * holds elements 4s..4s+3 of each of the 8 lanes, so that after
 * vpmaddubsw + vpmaddwd lane i of a step's int32 vector holds 4 products
 * of lane i only, and the steps of a group add up, lane by lane, to the 8
 * lanes' integer dot products.  The per-lane scales then go on as one
 * vector per group: lane i of the weight's w1 / w2 and of the token's
 * t1 / t2.
 *   x   once per call, every token, to the row kernels' int8 blocks
 *       (qgemm_impl.h's rule: 32 values per scale for the 32-element
 *       formats, 256 for the super-block ones, so the product is the same
 *       real number the row kernels compute): q in the step order,
 *       t1[i] = d of the block holding lane i, t2[i] = t1[i] · Σ q over
 *       lane i (or the int32 k · Σ q, below).
 *   W   32 rows × 2048 columns at a time, per thread (64 KiB, in L2),
 *       unpacked to codes in the step order (4 rows interleaved per step)
 *       with w1, w2 per lane:
 *         unsigned codes c (q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, q2_K): the
 *         row's values are w1·c + w2 per lane (q4_0: w1 = d, w2 = −8d;
 *         q4_K: w1 = d·sc, w2 = −dmin·m), and the product is
 *         Σ_lanes w1·(Σ c·q)·t1 + w2·t2; where w2 = k·w1 (q4_0 k = −8,
 *         q5_0 −16) the token holds k·Σ q as an int32 in t2's place and
 *         the product is Σ_lanes w1·(Σ c·q + k·Σ q)·t1, one FMA fewer.
 *         The int16 pair sums of vpmaddubsw
 *         add up in int16 for 8 steps when the codes are at most 15
 *         (8 · 2 · 15 · 127 < 2^15), for 4 when at most 31 (q5_*), then go
 *         to int32.
 *         signed codes v (q8_0, iq4_nl, iq4_xs): vpsignb moves v's sign
 *         onto q and vpmaddubsw multiplies |v| (at most 128 · 127 · 2, no
 *         saturation), sums in int32 per step; the product is
 *         Σ_lanes w1·(Σ v·q)·t1.
 *         signed codes with integer scales (q3_K: v = c − 4, q6_K:
 *         v = c − 32, scales s per 16): lanes of 32 whose steps 0-3 are
 *         one sub-block and 4-7 the next, the int16 sums of 4 steps
 *         (4 · 2 · 32 · 127 < 2^15) times the sub-block's s by vpmaddwd,
 *         exact in int32; the product is Σ_lanes d·(Σ s·v·q)·t1.
 *   y   micro-tiles of 4 rows × 3 tokens: 12 integer accumulators in
 *       registers (the steps in inline assembly: the compiler spilled
 *       them), 12 float accumulators in memory, one update per group.
 * Each output is a fixed sum: per chunk of 2048 columns, per group one
 * exact integer per lane, converted, then the FMAs above in lane order
 * from zero, the 8 lanes summed (pairs, pairs of pairs, halves: i8_sums)
 * and the chunks added to y in order (to y's value when accumulating,
 * else from the first chunk's).  So a token's result does not depend on
 * n, the tile or the thread count (the panels of 32 rows are split across
 * threads).  It is W · q8(x) to fp32 rounding, as the row kernels' (to
 * which it is not bitwise equal: they sum in another order).
 *
 * The bound on Zen 3 (measured): one ymm vpmaddubsw per cycle, 32 MACs,
 * twice the fp32 FMA rate; the unsigned kind spends 1 + 1/8 of them per
 * 32 MACs (the vpmaddwd per group), the signed kind 2 (vpmaddwd per
 * step), plus per group and (row, token) a convert, a multiply and one or
 * two FMAs. */
#include "kernels/qgemm_int8.h"
#include "kernels/qgemm_avx2.h" /* qg_avx2_f16 */
#include "kernels/quant.h"
#include "kernels/types.h"

#include <immintrin.h>
#include <omp.h>
#include <string.h>

#define I8 static inline __attribute__((always_inline))


enum {
    I8_RM = 4,    /* rows per micro-tile (interleaved in the panel) */
    I8_RP = 32,      /* rows per panel (a thread's unit of work) */
    I8_CHUNK = 2048, /* columns per panel chunk: 64 KiB of codes, in L2 (measured: 16 × 1024 in L1 is
                        13% slower, the activations streamed twice as often) */
    I8_LANES = 8, /* blocks per group, one per int32 lane */
    I8_MAXT = 3,  /* tokens per micro-tile, at most */
    I8_PF = 24    /* floats of a row's scales per group: w1[8], w2[8] (or q6_K's int16 scales) */
};

/* the two ways of multiplying a format's codes */
enum { I8_U = 1, I8_S = 2, I8_SC = 3 }; /* unsigned, signed, signed with int16 scales */
#ifndef I8_RN_S
#define I8_RN_S 3
#endif

/* A format's place in the kernel: unsigned codes (the value w1·c + w2 per
 * block) or signed ones (w1·v); lane: the elements per block of one scale
 * (32, or 16 for q2_K, q3_K, q6_K); flush: steps of 4 columns a lane's
 * int16 sums hold before they go to int32 (8 · 2 · 15 · 127, 4 · 2 · 31 ·
 * 127, 2 · 2 · 63 · 127 < 2^15 for codes up to 15, 31, 63). */
typedef struct {
    int kind, lane, flush, fold; /* fold: w2 = fold · w1 (q4_0: −8, q5_0: −16), else 0 */
} i8_fmt;

static int i8_fmt_of(ffn_ggml_type t, i8_fmt *f) {
    switch (t) {
    case FFN_GGML_TYPE_Q4_0: *f = (i8_fmt){I8_U, 32, 8, -8}; return 1;
    case FFN_GGML_TYPE_Q5_0: *f = (i8_fmt){I8_U, 32, 4, -16}; return 1;
    case FFN_GGML_TYPE_Q4_1: case FFN_GGML_TYPE_Q4_K: *f = (i8_fmt){I8_U, 32, 8, 0}; return 1;
    case FFN_GGML_TYPE_Q5_1: case FFN_GGML_TYPE_Q5_K: *f = (i8_fmt){I8_U, 32, 4, 0}; return 1;
    case FFN_GGML_TYPE_Q8_0: case FFN_GGML_TYPE_IQ4_NL: case FFN_GGML_TYPE_IQ4_XS: *f = (i8_fmt){I8_S, 32, 8, 0}; return 1;
    case FFN_GGML_TYPE_Q2_K: *f = (i8_fmt){I8_U, 16, 4, 0}; return 1;
    case FFN_GGML_TYPE_Q3_K: case FFN_GGML_TYPE_Q6_K: *f = (i8_fmt){I8_SC, 32, 4, 0}; return 1;
    default: return 0;
    }
}

int ffn_qg_int8_has(ffn_ggml_type type) {
    i8_fmt f;
    return i8_fmt_of(type, &f);
}

/* tokens per micro-tile: 4 rows × 3 int16 accumulators, two tokens'
 * activations in registers and the third's read by the products (U); the
 * signed kind needs |v| and v per row, so 4 × 2 int32 accumulators (S) */
static int i8_rn(int kind) { return kind == I8_S ? I8_RN_S : 3; }

/* values per activation scale: the row kernels' (QG_ACT_Q32 or QG_ACT_Q256) */
static int i8_ablock(ffn_ggml_type t) { return ffn_type_info_of(t)->block == 256 ? 256 : 32; }

/* Bytes of an array of `bytes` per token: whole 64-byte lines, an odd count
 * (the tokens' strips fall into different L1 sets; qgemm.c does the same). */
static size_t i8_stride(size_t bytes) { return (((bytes + 63) / 64) | 1) * 64; }

/* groups of 8 lanes per row */
static int64_t i8_groups(int64_t cols, int lane) { return (cols + 8 * lane - 1) / (8 * lane); }

/* a thread's panel: codes, |codes|, scales (groups of 128 or 256 columns),
 * the float accumulators and the int32 partial sums of a micro-tile */
enum {
    I8_T_CODES = I8_RP * I8_CHUNK,
    I8_T_SCALES = I8_RP * (I8_CHUNK / 128) * I8_PF * 4,
    I8_T_ACC = I8_RM * I8_MAXT * 32,
    I8_T_BYTES = 2 * I8_T_CODES + I8_T_SCALES + 2 * I8_T_ACC
};

size_t ffn_qg_int8_ws_bytes(const ffn_qweight *w, int64_t n, int threads) {
    if (threads < 1) threads = 1;
    i8_fmt f = {I8_U, 32, 8, 0};
    (void)i8_fmt_of(w->type, &f);
    const int64_t G = i8_groups(w->cols, f.lane);
    return 64 + (size_t)n * (i8_stride((size_t)G * 8 * f.lane) + i8_stride((size_t)G * 64)) +
           (size_t)threads * I8_T_BYTES;
}

/* lin: 256 values, lanes of L in order -> dst (the groups of 8 lanes one
 * after the other): step s of a group holds 4 values of each of its lanes. */
static void i8_interleave(const uint8_t *lin, int L, uint8_t *dst) {
    uint32_t u[64], v[64];
    const int SG = L / 4;
    memcpy(u, lin, 256);
    for (int h = 0; h < 32 / L; h++)
        for (int s = 0; s < SG; s++)
            for (int i = 0; i < 8; i++) v[h * 8 * SG + 8 * s + i] = u[h * 8 * SG + SG * i + s];
    memcpy(dst, v, 256);
}

/* ---- activations ----------------------------------------------------------------- */

static void i8_prep(const float *x, int64_t cols, int ab, int L, int fold, int8_t *q, float *f) {
    const int64_t U = (cols + 255) / 256;
    const int gpu = 32 / L;
    int8_t lin[256];
    for (int64_t u = 0; u < U; u++) {
        float d[8] = {0};
        memset(lin, 0, sizeof lin);
        const int64_t k0 = u * 256;
        if (ab == 256) {
            const float dd = ffn_qg_quant_block_avx2(x + k0, 256, lin);
            for (int i = 0; i < 8; i++) d[i] = dd;
        } else {
            for (int i = 0; i < 8 && k0 + 32 * i < cols; i++)
                d[i] = ffn_qg_quant_block_avx2(x + k0 + 32 * i, 32, lin + 32 * i);
        }
        for (int h = 0; h < gpu; h++) {
            float *fg = f + 16 * (u * gpu + h);
            for (int i = 0; i < 8; i++) {
                const int e0 = 8 * L * h + L * i;
                int s = 0;
                for (int j = 0; j < L; j++) s += lin[e0 + j];
                fg[i] = d[e0 / 32];
                if (fold) { /* the integer fold · Σ q in place of t2 */
                    const int32_t k = fold * s;
                    memcpy(fg + 8 + i, &k, 4);
                } else {
                    fg[8 + i] = d[e0 / 32] * (float)s;
                }
            }
        }
        i8_interleave((const uint8_t *)lin, L, (uint8_t *)q + 256 * u);
    }
}

/* ---- weights --------------------------------------------------------------------- */

/* 16 bytes of nibbles -> 32 codes: element j the low nibble of byte j,
 * j + 16 the high one (q4_0, q4_1); with tbl, looked up (iq4_nl, iq4_xs). */
I8 void i8_nib16(const uint8_t *qs, uint8_t *o, const __m128i *tbl) {
    const __m128i m = _mm_set1_epi8(15), b = _mm_loadu_si128((const __m128i *)qs);
    __m128i lo = _mm_and_si128(b, m), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m);
    if (tbl) lo = _mm_shuffle_epi8(*tbl, lo), hi = _mm_shuffle_epi8(*tbl, hi);
    _mm_storeu_si128((__m128i *)o, lo);
    _mm_storeu_si128((__m128i *)(o + 16), hi);
}

/* bit `from` of each byte of v moved to bit `to`, the other bits cleared */
I8 __m256i i8_bit(__m256i v, int from, int to) {
    const __m256i m = _mm256_set1_epi8((char)(1 << to));
    v = from >= to ? _mm256_srl_epi16(v, _mm_cvtsi32_si128(from - to))
                   : _mm256_sll_epi16(v, _mm_cvtsi32_si128(to - from));
    return _mm256_and_si256(v, m);
}

#define I8_LD(p) _mm256_loadu_si256((const __m256i *)(p))
#define I8_ST(p, v) _mm256_storeu_si256((__m256i *)(p), (v))

/* The 32 five-bit codes of a Q5_0 or Q5_1 block: the high bits at qh (4
 * bytes, bit j for code j), the low nibbles at qs (16 bytes).  Byte j of
 * the vector gets qh's byte j / 8, tests bit j % 8. */
static void q5_codes(const uint8_t *qh_at, const uint8_t *qs, uint8_t *o) {
    uint32_t qh;
    memcpy(&qh, qh_at, 4);
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2,
                                            3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i h = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), spread);
    h = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(h, bit), bit), _mm256_set1_epi8(16));
    i8_nib16(qs, o, NULL);
    I8_ST(o, _mm256_or_si256(I8_LD(o), h));
}

/* The eight scales and mins of a Q4_K or Q5_K super-block at p (d, dmin,
 * then the 12 packed bytes) as w1 = d * scale and w2 = -dmin * min. */
static void k4_scales(const uint8_t *p, float *w1, float *w2) {
    const float d = qg_avx2_f16(p), dmin = qg_avx2_f16(p + 2);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, mn;
        quant_scale_min_k4(j, p + 4, &sc, &mn);
        w1[j] = d * (float)sc, w2[j] = -(dmin * (float)mn);
    }
}

/* Columns 256u .. 256u + 255 of a row: 256 codes (lin, in order), w1 and w2
 * per lane of the format (8 of 32 or 16 of 16; zero past cols). */
static void i8_unpack(ffn_ggml_type type, const uint8_t *row, int64_t u, int64_t cols, uint8_t *lin,
                      float *w1, float *w2, int16_t *sc16) {
    const __m256i m4 = _mm256_set1_epi8(15);
    for (int i = 0; i < 16; i++) w1[i] = w2[i] = 0.0f;
    switch (type) {
    case FFN_GGML_TYPE_Q4_K: {
        const uint8_t *p = row + u * 144, *qs = p + 16;
        k4_scales(p, w1, w2);
        for (int i = 0; i < 4; i++) {
            const __m256i v = I8_LD(qs + 32 * i);
            I8_ST(lin + 64 * i, _mm256_and_si256(v, m4));
            I8_ST(lin + 64 * i + 32, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
        }
        return;
    }
    case FFN_GGML_TYPE_Q5_K: {
        const uint8_t *p = row + u * 176, *qh = p + 16, *qs = p + 48;
        k4_scales(p, w1, w2);
        const __m256i h = I8_LD(qh);
        for (int i = 0; i < 4; i++) {
            const __m256i v = I8_LD(qs + 32 * i);
            I8_ST(lin + 64 * i, _mm256_or_si256(_mm256_and_si256(v, m4), i8_bit(h, 2 * i, 4)));
            I8_ST(lin + 64 * i + 32,
                  _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), i8_bit(h, 2 * i + 1, 4)));
        }
        return;
    }
    case FFN_GGML_TYPE_Q6_K: { /* x = d·sc·v per 16, v = c − 32 (signed codes, sc16 the scales) */
        const uint8_t *p = row + u * 210;
        const float d = qg_avx2_f16(p + 208);
        const int8_t *sc = (const int8_t *)(p + 192);
        for (int j = 0; j < 8; j++) w1[j] = d;
        for (int j = 0; j < 16; j++) sc16[j] = sc[j];
        const __m256i m2 = _mm256_set1_epi8(0x30), c32 = _mm256_set1_epi8(32);
        for (int hf = 0; hf < 2; hf++) {
            const uint8_t *ql = p + 64 * hf, *qh = p + 128 + 32 * hf;
            const __m256i a = I8_LD(ql), b = I8_LD(ql + 32), h = I8_LD(qh);
            uint8_t *o = lin + 128 * hf;
            I8_ST(o, _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(a, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m2)), c32));
            I8_ST(o + 32,
                  _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(b, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m2)), c32));
            I8_ST(o + 64,
                  _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4), _mm256_and_si256(h, m2)), c32));
            I8_ST(o + 96, _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), m4),
                                                          _mm256_and_si256(_mm256_srli_epi16(h, 2), m2)),
                                          c32));
        }
        return;
    }
    case FFN_GGML_TYPE_Q2_K: { /* x = d·(s & 15)·c − dmin·(s >> 4) per 16 */
        const uint8_t *p = row + u * 84;
        const float d = qg_avx2_f16(p + 80), dmin = qg_avx2_f16(p + 82);
        for (int j = 0; j < 16; j++) w1[j] = d * (float)(p[j] & 15), w2[j] = -(dmin * (float)(p[j] >> 4));
        const __m256i m3 = _mm256_set1_epi8(3);
        for (int hf = 0; hf < 2; hf++) {
            const __m256i v = I8_LD(p + 16 + 32 * hf);
            for (int j = 0; j < 4; j++)
                I8_ST(lin + 128 * hf + 32 * j, _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(2 * j)), m3));
        }
        return;
    }
    case FFN_GGML_TYPE_Q3_K: { /* x = d·s·v per 16, v = c − 4, c = 2 low bits | the hmask bit << 2
                                  (signed codes, sc16 the scales s) */
        const uint8_t *p = row + u * 110, *s = p + 96;
        const float d = qg_avx2_f16(p + 108);
        for (int j = 0; j < 8; j++) w1[j] = d;
        for (int j = 0; j < 16; j++) {
            const int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
            sc16[j] = (int16_t)((lo | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32);
        }
        const __m256i m3 = _mm256_set1_epi8(3), c4 = _mm256_set1_epi8(4), hm = I8_LD(p);
        for (int hf = 0; hf < 2; hf++) {
            const __m256i v = I8_LD(p + 32 + 32 * hf);
            for (int j = 0; j < 4; j++)
                I8_ST(lin + 128 * hf + 32 * j,
                      _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(2 * j)), m3),
                                                      i8_bit(hm, 4 * hf + j, 2)),
                                      c4));
        }
        return;
    }
    case FFN_GGML_TYPE_IQ4_XS: {
        const uint8_t *p = row + u * 136;
        const float d = qg_avx2_f16(p);
        const unsigned sh = (unsigned)p[2] | ((unsigned)p[3] << 8);
        const __m128i tbl = _mm_loadu_si128((const __m128i *)quant_iq4nl_values);
        for (int ib = 0; ib < 8; ib++) {
            const int ls = (((p[4 + ib / 2] >> 4 * (ib % 2)) & 0xF) | (((sh >> 2 * ib) & 3) << 4)) - 32;
            w1[ib] = d * (float)ls;
            i8_nib16(p + 8 + 16 * ib, lin + 32 * ib, &tbl);
        }
        return;
    }
    default: break;
    }
    /* the 32-element formats */
    memset(lin, 0, 256);
    const int64_t nblk = cols / 32;
    const size_t bb = ffn_type_info_of(type)->bytes;
    const __m128i tbl = _mm_loadu_si128((const __m128i *)quant_iq4nl_values);
    for (int i = 0; i < 8 && 8 * u + i < nblk; i++) {
        const uint8_t *p = row + (size_t)(8 * u + i) * bb;
        uint8_t *o = lin + 32 * i;
        const float d = qg_avx2_f16(p);
        switch (type) {
        case FFN_GGML_TYPE_Q8_0:
            memcpy(o, p + 2, 32);
            w1[i] = d;
            break;
        case FFN_GGML_TYPE_Q4_0:
            i8_nib16(p + 2, o, NULL);
            w1[i] = d, w2[i] = -8.0f * d;
            break;
        case FFN_GGML_TYPE_Q4_1:
            i8_nib16(p + 4, o, NULL);
            w1[i] = d, w2[i] = qg_avx2_f16(p + 2);
            break;
        case FFN_GGML_TYPE_Q5_0:
            q5_codes(p + 2, p + 6, o);
            w1[i] = d, w2[i] = -16.0f * d;
            break;
        case FFN_GGML_TYPE_Q5_1:
            q5_codes(p + 4, p + 8, o);
            w1[i] = d, w2[i] = qg_avx2_f16(p + 2);
            break;
        default: /* iq4_nl */
            i8_nib16(p + 2, o, &tbl);
            w1[i] = d;
            break;
        }
    }
}

/* Rows r0..r0+15 (zero past w->rows), groups g0..g0+kg-1 into the panel:
 * codes pc[((rq·kg + g)·SG + s)·4 + r] (32 bytes each, SG = lane / 4
 * steps a group; pa the same with |v| for the signed kind), scales
 * pf[(rq·kg + g)·4 + r] (w1[8], w2[8]). */
static void i8_fill(const ffn_qweight *w, const i8_fmt *f, int64_t r0, int64_t g0, int kg, uint8_t *pc,
                    uint8_t *pa, float *pf) {
    const int L = f->lane, SG = L / 4, gpu = 32 / L;
    uint8_t lin[256] __attribute__((aligned(32))), il[256] __attribute__((aligned(32)));
    float w1[16], w2[16];
    int16_t sc16[16] = {0};
    for (int rr = 0; rr < I8_RP; rr++) {
        const int rq = rr / I8_RM, r = rr % I8_RM;
        const int live = r0 + rr < w->rows;
        for (int g = 0; g < kg; g += gpu) {
            if (live) {
                i8_unpack(w->type, w->data + (size_t)(r0 + rr) * w->row_bytes, (g0 + g) / gpu, w->cols, lin,
                          w1, w2, sc16);
                i8_interleave(lin, L, il);
            } else {
                memset(il, 0, sizeof il);
                for (int i = 0; i < 16; i++) w1[i] = w2[i] = 0.0f, sc16[i] = 0;
            }
            for (int h = 0; h < gpu; h++) {
                float *pg = pf + ((size_t)(rq * kg + g + h) * I8_RM + r) * I8_PF;
                memcpy(pg, w1 + 8 * h, 32);
                if (f->kind == I8_SC) { /* lane i: sub-block 2i in steps 0-3, 2i + 1 in steps 4-7 */
                    int16_t sv[32];
                    for (int i = 0; i < 8; i++)
                        sv[2 * i] = sv[2 * i + 1] = sc16[2 * i], sv[16 + 2 * i] = sv[17 + 2 * i] = sc16[2 * i + 1];
                    memcpy(pg + 8, sv, 64);
                } else {
                    memcpy(pg + 8, w2 + 8 * h, 32);
                }
                for (int s = 0; s < SG; s++) {
                    const size_t o = (((size_t)(rq * kg + g + h) * SG + s) * I8_RM + r) * 32;
                    const __m256i v = _mm256_load_si256((const __m256i *)(il + 128 * h + 32 * s));
                    _mm256_store_si256((__m256i *)(pc + o), v);
                    if (f->kind != I8_U) _mm256_store_si256((__m256i *)(pa + o), _mm256_sign_epi8(v, v));
                }
            }
        }
    }
}

/* ---- the micro-kernels -------------------------------------------------------------
 * 4 rows of the panel (pc/pa/pf at the row quad's first group) × T tokens
 * (xq, xf at the chunk's first group; strides qs bytes, fs floats) over kg
 * groups of SG steps; out[r·I8_MAXT + t] the 8 lanes' sum.  fa (the float
 * accumulators) and ip (int32 partial sums) are memory: the registers
 * hold the integer sums of the steps. */

/* the float epilogue of a group: fa += w1 · (Σ · t1) (+ w2 · t2) */
I8 void i8_epi(int kind, __m256i m, const float *fw, const float *tf, float *fa) {
    const __m256 c = _mm256_mul_ps(_mm256_cvtepi32_ps(m), _mm256_loadu_ps(tf));
    __m256 a = _mm256_fmadd_ps(_mm256_load_ps(fw), c, _mm256_load_ps(fa));
    if (kind == I8_U) a = _mm256_fmadd_ps(_mm256_load_ps(fw + 8), _mm256_loadu_ps(tf + 8), a);
    _mm256_store_ps(fa, a);
}

/* fa's 12 float accumulators set to zero by 12 stores (written as a loop,
 * GCC made it a `rep stos`: its start-up cost was 3% of the int8 kernel's
 * time in perf, once per micro-tile and chunk) */
I8 void i8_zero(float *fa) {
    const __m256 z = _mm256_setzero_ps();
    _mm256_store_ps(fa, z), _mm256_store_ps(fa + 8, z), _mm256_store_ps(fa + 16, z);
    _mm256_store_ps(fa + 24, z), _mm256_store_ps(fa + 32, z), _mm256_store_ps(fa + 40, z);
    _mm256_store_ps(fa + 48, z), _mm256_store_ps(fa + 56, z), _mm256_store_ps(fa + 64, z);
    _mm256_store_ps(fa + 72, z), _mm256_store_ps(fa + 80, z), _mm256_store_ps(fa + 88, z);
}

/* The 4 × 3 micro-tile's steps in assembly (below): x0, x1 of tokens 0 and 1
 * in ymm12 and ymm13, then I8_ROW (each step's own) for rows 0-3 with
 * their three accumulators; the twelve accumulators as the outputs
 * a0..d2, ymm12-15 clobbered. */
#define I8_TILE_ROWS                                                                              \
    "vmovdqa (%[x]), %%ymm12\n\t"                                                                \
    "vmovdqa (%[x],%[qs]), %%ymm13\n\t"                                                          \
    I8_ROW(0, a0, a1, a2) I8_ROW(1, b0, b1, b2) I8_ROW(2, c0, c1, c2) I8_ROW(3, d0, d1, d2)
#define I8_TILE_OUT(h)                                                                            \
    [a0] "+x"(h[0][0]), [a1] "+x"(h[0][1]), [a2] "+x"(h[0][2]), [b0] "+x"(h[1][0]),              \
        [b1] "+x"(h[1][1]), [b2] "+x"(h[1][2]), [c0] "+x"(h[2][0]), [c1] "+x"(h[2][1]),          \
        [c2] "+x"(h[2][2]), [d0] "+x"(h[3][0]), [d1] "+x"(h[3][1]), [d2] "+x"(h[3][2])
#define I8_TILE_CLOBBERS "xmm12", "xmm13", "xmm14", "xmm15", "memory"
/* the signed kinds' row: |v| (at a) in ymm14, then I8_PROD (v at w) with each token */
#define I8_ROW_SIGNED(R, A, B, C)                                                                 \
    "vmovdqa " #R "*32(%[a]), %%ymm14\n\t" I8_PROD(R, "%%ymm12", A) I8_PROD(R, "%%ymm13", B)      \
    "vmovdqa (%[x],%[qs],2), %%ymm15\n\t" I8_PROD(R, "%%ymm15", C)

/* One step of the 4 × 3 micro-tile: h[r][t] += the int16 pair sums of
 * row r's 32 codes (w + 32r) with token t's 32 activations (x + t·qs).
 * In assembly because the compiler, short of one register, spills the
 * accumulators: 12 of them, x0, x1, the row's codes and the product make
 * the 16 ymm registers, the third token's activations come from memory. */
I8 void i8_step3(const uint8_t *w, const int8_t *x, int64_t qs, __m256i h[I8_RM][I8_MAXT]) {
#define I8_ROW(R, A, B, C)                                                                        \
    "vmovdqa " #R "*32(%[w]), %%ymm14\n\t"                                                       \
    "vpmaddubsw %%ymm12, %%ymm14, %%ymm15\n\t"                                                   \
    "vpaddw %%ymm15, %[" #A "], %[" #A "]\n\t"                                                   \
    "vpmaddubsw %%ymm13, %%ymm14, %%ymm15\n\t"                                                   \
    "vpaddw %%ymm15, %[" #B "], %[" #B "]\n\t"                                                   \
    "vpmaddubsw (%[x],%[qs],2), %%ymm14, %%ymm15\n\t"                                            \
    "vpaddw %%ymm15, %[" #C "], %[" #C "]\n\t"
    __asm__(I8_TILE_ROWS : I8_TILE_OUT(h) : [w] "r"(w), [x] "r"(x), [qs] "r"(qs) : I8_TILE_CLOBBERS);
#undef I8_ROW
}

/* The same for the signed kind: ia[r][t] += the int32 sums of row r's 32
 * codes v (|v| at a + 32r, v at w + 32r) times token t's activations, as
 * vpmaddubsw(|v|, sign(x, v)) and vpmaddwd with ones (a product of two
 * codes and two activations, up to 2 · 128 · 127, fills an int16). */
static const int16_t i8_ones[16] __attribute__((aligned(32))) = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
I8 void i8_step3s(const uint8_t *w, const uint8_t *a, const int8_t *x, int64_t qs, __m256i ia[I8_RM][I8_MAXT]) {
#define I8_PROD(R, X, A)                                                                          \
    "vpsignb " #R "*32(%[w]), " X ", %%ymm15\n\t"                                                  \
    "vpmaddubsw %%ymm15, %%ymm14, %%ymm15\n\t"                                                   \
    "vpmaddwd (%[one]), %%ymm15, %%ymm15\n\t"                                                    \
    "vpaddd %%ymm15, %[" #A "], %[" #A "]\n\t"
#define I8_ROW I8_ROW_SIGNED
    __asm__(I8_TILE_ROWS
            : I8_TILE_OUT(ia)
            : [w] "r"(w), [a] "r"(a), [x] "r"(x), [qs] "r"(qs), [one] "r"(i8_ones)
            : I8_TILE_CLOBBERS);
#undef I8_ROW
#undef I8_PROD
}

/* out[4t + r] = the sum of fa's 8 lanes for row r, token t: pairs, then
 * pairs of pairs (vhaddps twice), then the two halves. */
I8 void i8_sums(const int T, const float *fa, float *out) {
#pragma GCC unroll 3
    for (int t = 0; t < T; t++) {
        const __m256 a = _mm256_hadd_ps(_mm256_load_ps(fa + 8 * t), _mm256_load_ps(fa + 8 * (I8_MAXT + t)));
        const __m256 b = _mm256_hadd_ps(_mm256_load_ps(fa + 8 * (2 * I8_MAXT + t)),
                                        _mm256_load_ps(fa + 8 * (3 * I8_MAXT + t)));
        const __m256 c = _mm256_hadd_ps(a, b);
        _mm_storeu_ps(out + 4 * t, _mm_add_ps(_mm256_castps256_ps128(c), _mm256_extractf128_ps(c, 1)));
    }
}

/* the integer accumulators of a micro-tile's T tokens set to zero */
I8 void i8_zero_h(const int T, __m256i h[I8_RM][I8_MAXT]) {
#pragma GCC unroll 4
    for (int r = 0; r < I8_RM; r++)
#pragma GCC unroll 3
        for (int t = 0; t < T; t++) h[r][t] = _mm256_setzero_si256();
}

I8 void i8_mk_u(const int SG, const int FL, const int FOLD, const int T, const uint8_t *pc, const float *pf, const int8_t *xq,
                int64_t qs, const float *xf, int64_t fs, int kg, float *fa, __m256i *ip, float *out) {
    const __m256i ones = _mm256_set1_epi16(1);
    i8_zero(fa);
    for (int g = 0; g < kg; g++) {
        const uint8_t *wg = pc + (size_t)g * SG * I8_RM * 32;
        const int8_t *xg = xq + (size_t)g * SG * 32;
        const float *fg = pf + (size_t)g * I8_RM * I8_PF;
#pragma GCC unroll 1
        for (int s0 = 0; s0 < SG; s0 += FL) {
            __m256i h[I8_RM][I8_MAXT];
            i8_zero_h(T, h);
            if (T == 3) {
#pragma GCC unroll 1
                for (int s = s0; s < s0 + FL; s++) i8_step3(wg + s * I8_RM * 32, xg + 32 * s, qs, h);
            } else {
#pragma GCC unroll 1
                for (int s = s0; s < s0 + FL; s++) {
                    const __m256i x0 = _mm256_load_si256((const __m256i *)(xg + 32 * s));
                    const __m256i x1 = T > 1 ? _mm256_load_si256((const __m256i *)(xg + qs + 32 * s)) : x0;
#pragma GCC unroll 4
                    for (int r = 0; r < I8_RM; r++) {
                        const __m256i u = _mm256_load_si256((const __m256i *)(wg + (s * I8_RM + r) * 32));
                        h[r][0] = _mm256_add_epi16(h[r][0], _mm256_maddubs_epi16(u, x0));
                        if (T > 1) h[r][1] = _mm256_add_epi16(h[r][1], _mm256_maddubs_epi16(u, x1));
                    }
                }
            }
#pragma GCC unroll 4
            for (int r = 0; r < I8_RM; r++)
#pragma GCC unroll 3
                for (int t = 0; t < T; t++) {
                    __m256i m = _mm256_madd_epi16(h[r][t], ones);
                    __m256i *pp = ip + r * I8_MAXT + t;
                    if (FL < SG) {
                        if (s0 > 0) m = _mm256_add_epi32(m, _mm256_load_si256(pp));
                        if (s0 + FL < SG) {
                            _mm256_store_si256(pp, m);
                            continue;
                        }
                    }
                    const float *tf = xf + t * fs + 16 * g;
                    if (FOLD) { /* Σ c·q + fold · Σ q, exact: then w1 alone */
                        m = _mm256_add_epi32(m, _mm256_loadu_si256((const __m256i *)(tf + 8)));
                        i8_epi(I8_S, m, fg + I8_PF * r, tf, fa + 8 * (r * I8_MAXT + t));
                    } else {
                        i8_epi(I8_U, m, fg + I8_PF * r, tf, fa + 8 * (r * I8_MAXT + t));
                    }
                }
        }
    }
    i8_sums(T, fa, out);
}

/* One step of the 4 × 3 micro-tile of q3_K and q6_K: h[r][t] += the int16
 * pair sums of |v| with sign(x, v) (codes v of −32..31: 4 steps add up in
 * int16, 4 · 2 · 32 · 127 < 2^15). */
I8 void i8_step3q(const uint8_t *w, const uint8_t *a, const int8_t *x, int64_t qs, __m256i h[I8_RM][I8_MAXT]) {
#define I8_PROD(R, X, A)                                                                          \
    "vpsignb " #R "*32(%[w]), " X ", %%ymm15\n\t"                                                  \
    "vpmaddubsw %%ymm15, %%ymm14, %%ymm15\n\t"                                                   \
    "vpaddw %%ymm15, %[" #A "], %[" #A "]\n\t"
#define I8_ROW I8_ROW_SIGNED
    __asm__(I8_TILE_ROWS : I8_TILE_OUT(h) : [w] "r"(w), [a] "r"(a), [x] "r"(x), [qs] "r"(qs) : I8_TILE_CLOBBERS);
#undef I8_ROW
#undef I8_PROD
}

/* Steps s0 .. s1 - 1 of a group of the signed kinds into h (zeroed first):
 * vpmaddubsw(|v|, sign(x, v)) per row and token, added in int32 through
 * vpmaddwd (wide: q8_0, iq4_nl, iq4_xs) or as int16 (q3_K, q6_K, whose
 * codes let 4 steps add up in int16); 3 tokens in the assembly above. */
I8 void i8_steps_s(const int T, const int wide, const uint8_t *wg, const uint8_t *ag, const int8_t *xg, int64_t qs,
                   int s0, int s1, __m256i h[I8_RM][I8_MAXT]) {
    const __m256i ones = _mm256_set1_epi16(1);
    i8_zero_h(T, h);
    if (T == 3) {
#pragma GCC unroll 1
        for (int s = s0; s < s1; s++) {
            if (wide) i8_step3s(wg + s * I8_RM * 32, ag + s * I8_RM * 32, xg + 32 * s, qs, h);
            else i8_step3q(wg + s * I8_RM * 32, ag + s * I8_RM * 32, xg + 32 * s, qs, h);
        }
        return;
    }
#pragma GCC unroll 1
    for (int s = s0; s < s1; s++) {
        __m256i xv[2];
#pragma GCC unroll 2
        for (int t = 0; t < T && t < 2; t++) xv[t] = _mm256_load_si256((const __m256i *)(xg + t * qs + 32 * s));
#pragma GCC unroll 4
        for (int r = 0; r < I8_RM; r++) {
            const __m256i v = _mm256_load_si256((const __m256i *)(wg + (s * I8_RM + r) * 32));
            const __m256i av = _mm256_load_si256((const __m256i *)(ag + (s * I8_RM + r) * 32));
#pragma GCC unroll 2
            for (int t = 0; t < T && t < 2; t++) {
                const __m256i p = _mm256_maddubs_epi16(av, _mm256_sign_epi8(xv[t], v));
                h[r][t] = wide ? _mm256_add_epi32(h[r][t], _mm256_madd_epi16(p, ones)) : _mm256_add_epi16(h[r][t], p);
            }
        }
    }
}

I8 void i8_mk_s(const int T, const uint8_t *pc, const uint8_t *pa, const float *pf, const int8_t *xq,
                int64_t qs, const float *xf, int64_t fs, int kg, float *fa, float *out) {
    i8_zero(fa);
    for (int g = 0; g < kg; g++) {
        const uint8_t *wg = pc + (size_t)g * 8 * I8_RM * 32, *ag = pa + (size_t)g * 8 * I8_RM * 32;
        const int8_t *xg = xq + (size_t)g * 256;
        __m256i ia[I8_RM][I8_MAXT];
        i8_steps_s(T, 1, wg, ag, xg, qs, 0, 8, ia);
        const float *fg = pf + (size_t)g * I8_RM * I8_PF;
#pragma GCC unroll 4
        for (int r = 0; r < I8_RM; r++)
#pragma GCC unroll 3
            for (int t = 0; t < T; t++) i8_epi(I8_S, ia[r][t], fg + I8_PF * r, xf + t * fs + 16 * g, fa + 8 * (r * I8_MAXT + t));
    }
    i8_sums(T, fa, out);
}

/* q3_K, q6_K: signed codes with integer scales.  Per half group (4 steps, one
 * sub-block of 16 per lane) the int16 sums times the row's int16 scales
 * (vpmaddwd, exact: 2 · 32512 · 128 per half), the two halves added in
 * int32, then fa += d · (Σ · t1). */
I8 void i8_mk_q6(const int T, const uint8_t *pc, const uint8_t *pa, const float *pf, const int8_t *xq,
                 int64_t qs, const float *xf, int64_t fs, int kg, float *fa, __m256i *ip, float *out) {
    i8_zero(fa);
    for (int g = 0; g < kg; g++) {
        const uint8_t *wg = pc + (size_t)g * 8 * I8_RM * 32, *ag = pa + (size_t)g * 8 * I8_RM * 32;
        const int8_t *xg = xq + (size_t)g * 256;
        const float *fg = pf + (size_t)g * I8_RM * I8_PF;
#pragma GCC unroll 1
        for (int s0 = 0; s0 < 8; s0 += 4) {
            __m256i h[I8_RM][I8_MAXT];
            i8_steps_s(T, 0, wg, ag, xg, qs, s0, s0 + 4, h);
#pragma GCC unroll 4
            for (int r = 0; r < I8_RM; r++) {
                const __m256i sc = _mm256_load_si256((const __m256i *)(fg + I8_PF * r + 8 + 2 * s0));
#pragma GCC unroll 3
                for (int t = 0; t < T; t++) {
                    __m256i m = _mm256_madd_epi16(h[r][t], sc);
                    __m256i *pp = ip + r * I8_MAXT + t;
                    if (s0 == 0) {
                        _mm256_store_si256(pp, m);
                        continue;
                    }
                    m = _mm256_add_epi32(m, _mm256_load_si256(pp));
                    i8_epi(I8_S, m, fg + I8_PF * r, xf + t * fs + 16 * g, fa + 8 * (r * I8_MAXT + t));
                }
            }
        }
    }
    i8_sums(T, fa, out);
}

typedef void (*i8_mk_fn)(int T, const uint8_t *pc, const uint8_t *pa, const float *pf, const int8_t *xq,
                         int64_t qs, const float *xf, int64_t fs, int kg, float *fa, __m256i *ip, float *out);

#define I8_U_KERNEL(SG, FL, FOLD)                                                                        \
    static void i8_mk_u##SG##_##FL##_##FOLD(int T, const uint8_t *pc, const uint8_t *pa, const float *pf,        \
                                   const int8_t *xq, int64_t qs, const float *xf, int64_t fs, int kg,   \
                                   float *fa, __m256i *ip, float *out) {                                \
        (void)pa;                                                                                        \
        if (T == 1) i8_mk_u(SG, FL, FOLD, 1, pc, pf, xq, qs, xf, fs, kg, fa, ip, out);                   \
        else if (T == 2) i8_mk_u(SG, FL, FOLD, 2, pc, pf, xq, qs, xf, fs, kg, fa, ip, out);              \
        else i8_mk_u(SG, FL, FOLD, 3, pc, pf, xq, qs, xf, fs, kg, fa, ip, out);                          \
    }
I8_U_KERNEL(8, 8, 0)
I8_U_KERNEL(8, 8, 1)
I8_U_KERNEL(8, 4, 0)
I8_U_KERNEL(8, 4, 1)
I8_U_KERNEL(4, 4, 0)
#undef I8_U_KERNEL

static void i8_mk_s8(int T, const uint8_t *pc, const uint8_t *pa, const float *pf, const int8_t *xq, int64_t qs,
                     const float *xf, int64_t fs, int kg, float *fa, __m256i *ip, float *out) {
    (void)ip;
    if (T == 1) i8_mk_s(1, pc, pa, pf, xq, qs, xf, fs, kg, fa, out);
    else if (T == 2) i8_mk_s(2, pc, pa, pf, xq, qs, xf, fs, kg, fa, out);
    else i8_mk_s(3, pc, pa, pf, xq, qs, xf, fs, kg, fa, out);
}

static void i8_mk_q6k(int T, const uint8_t *pc, const uint8_t *pa, const float *pf, const int8_t *xq, int64_t qs,
                      const float *xf, int64_t fs, int kg, float *fa, __m256i *ip, float *out) {
    if (T == 1) i8_mk_q6(1, pc, pa, pf, xq, qs, xf, fs, kg, fa, ip, out);
    else if (T == 2) i8_mk_q6(2, pc, pa, pf, xq, qs, xf, fs, kg, fa, ip, out);
    else i8_mk_q6(3, pc, pa, pf, xq, qs, xf, fs, kg, fa, ip, out);
}

static i8_mk_fn i8_kernel(const i8_fmt *f) {
    if (f->kind == I8_S) return i8_mk_s8;
    if (f->kind == I8_SC) return i8_mk_q6k;
    if (f->lane == 16) return i8_mk_u4_4_0; /* q2_K */
    if (f->flush == 8) return f->fold ? i8_mk_u8_8_1 : i8_mk_u8_8_0;
    return f->fold ? i8_mk_u8_4_1 : i8_mk_u8_4_0;
}

/* ---- the call ---------------------------------------------------------------------- */

void ffn_qg_int8_run(const ffn_qweight *w, const float *x, int64_t ldx, int64_t n, float *y,
                     int64_t ldy, int accumulate, void *ws) {
    i8_fmt f;
    (void)i8_fmt_of(w->type, &f);
    const int ab = i8_ablock(w->type), L = f.lane, SG = L / 4, RN = i8_rn(f.kind);
    const int64_t cols = w->cols, rows = w->rows, G = i8_groups(cols, L);
    const int KG = I8_CHUNK / (8 * L);
    const int64_t npanels = (rows + I8_RP - 1) / I8_RP;
    const int64_t qs = (int64_t)i8_stride((size_t)G * 8 * L), fs = (int64_t)i8_stride((size_t)G * 64) / 4;
    uint8_t *base = (uint8_t *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);
    int8_t *aq = (int8_t *)base;
    float *af = (float *)(base + (size_t)n * qs);
    uint8_t *thr = (uint8_t *)(af + (size_t)n * fs);
    const i8_mk_fn mk = i8_kernel(&f);
    const int par = npanels > 1 && n * rows * cols >= (INT64_C(1) << 20);
#pragma omp parallel if (par)
    {
#pragma omp for schedule(static)
        for (int64_t t = 0; t < n; t++) i8_prep(x + t * ldx, cols, ab, L, f.fold, aq + t * qs, af + t * fs);
        uint8_t *pc = thr + (size_t)omp_get_thread_num() * I8_T_BYTES;
        uint8_t *pa = pc + I8_T_CODES;
        float *pf = (float *)(pa + I8_T_CODES);
        float *fa = (float *)((uint8_t *)pf + I8_T_SCALES);
        __m256i *ip = (__m256i *)((uint8_t *)fa + I8_T_ACC);
#pragma omp for schedule(static)
        for (int64_t p = 0; p < npanels; p++) {
            const int64_t r0 = p * I8_RP;
            const int nv = rows - r0 < I8_RP ? (int)(rows - r0) : I8_RP;
            for (int64_t g0 = 0; g0 < G; g0 += KG) {
                const int kg = G - g0 < KG ? (int)(G - g0) : KG;
                i8_fill(w, &f, r0, g0, kg, pc, pa, pf);
                const int add = accumulate || g0 > 0;
                for (int64_t t0 = 0; t0 < n; t0 += RN) {
                    const int T = n - t0 < RN ? (int)(n - t0) : RN;
                    const int8_t *xq = aq + t0 * qs + g0 * 8 * L;
                    const float *xf = af + t0 * fs + g0 * 16;
                    for (int rq = 0; rq * I8_RM < nv; rq++) {
                        float out[I8_RM * I8_MAXT] __attribute__((aligned(16)));
                        const size_t co = (size_t)rq * kg * SG * I8_RM * 32;
                        mk(T, pc + co, pa + co, pf + (size_t)rq * kg * I8_RM * I8_PF, xq, qs, xf, fs, kg, fa, ip, out);
                        const int nr = nv - rq * I8_RM < I8_RM ? nv - rq * I8_RM : I8_RM;
                        for (int t = 0; t < T; t++) {
                            float *o = y + (t0 + t) * ldy + r0 + rq * I8_RM;
                            if (nr == I8_RM) {
                                const __m128 v = _mm_loadu_ps(out + 4 * t);
                                _mm_storeu_ps(o, add ? _mm_add_ps(_mm_loadu_ps(o), v) : v);
                            } else {
                                for (int r = 0; r < nr; r++) o[r] = add ? o[r] + out[4 * t + r] : out[4 * t + r];
                            }
                        }
                    }
                }
            }
        }
    }
}
