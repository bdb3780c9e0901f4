/* qgemm_avx2.c -- the AVX2 kernels of ffn_qgemm (contract in
 * qgemm_impl.h) for q8_0, q4_0 and the float types, and the fallback of
 * the AVX-512 level on CPUs without VNNI or AVX512_BF16: one weight row at
 * a time against up to 4 tokens (q8_0 and q4_0: 4 rows against one token,
 * 2 against two; QG_AVX2_ROWS_MULTI).  (The super-block formats q2_K .. q6_K
 * and iq4_xs are in qgemm_k_avx2.c, the other 32-blocks in
 * qgemm_legacy_avx2.c.)
 *
 *   q8_0        per 32-block: vpsignb moves the weight signs onto the
 *               activations, vpmaddubsw (|w| × ±x, pairs to int16; at most
 *               2·128·127, no saturation) and vpmaddwd by ones to int32.
 *   q4_0        nibbles × activations the same way, from the lane
 *               corrections (−8 · 4-sums) so the +8 cancels in integers.
 *   f16, bf16   converted to fp32 (F16C; bf16 by a 16-bit shift) and FMA
 *               on the fp32 activations; the cols % 8 tail in scalar.
 * Float accumulators follow a sequence fixed by cols alone (q8_0, q4_0:
 * even blocks in one, odd ones in another, named apart so that they stay
 * in registers -- indexed by the block's parity they went through the
 * stack every block, and decode ran 1.4× slower per weight byte). */
#include "kernels/qgemm_avx2.h"
#include "kernels/kernels.h"

#define QA QG_AVX2_INLINE

/* One block of len (a multiple of 8) activations to int8, qgemm.c's rule
 * (d = amax / 127, q = x · (1/d) rounded to nearest even, clamped to
 * ±127): bit for bit its scalar version (vcvtps2dq rounds to nearest even). */
float ffn_qg_quant_block_avx2(const float *x, int len, int8_t *q) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < len; j += 8) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + j), absmask));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    const float amax = _mm_cvtss_f32(h);
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m256 idv = _mm256_set1_ps(id);
    const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
    for (int j = 0; j < len; j += 8) {
        __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + j), idv));
        v = _mm256_min_epi32(_mm256_max_epi32(v, lo), hi);
        __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
        _mm_storel_epi64((__m128i *)(q + j), _mm_packs_epi16(w, w));
    }
    return d;
}

/* ---- q8_0 / q4_0 ------------------------------------------------------------ */

/* Block b of the R rows p[i] against T tokens: acc[i·T + t] += (float)(the
 * block's int32 lane sums) · (weight scale · token scale).  Up to two
 * tokens the scales come as broadcasts (the fp16 one from ffn_qg_f16_tab)
 * and one vmulps; more tokens would run out of registers that way and
 * take the scalar product. */
QA void qa_q32_block(const uint8_t *const *p, const int R, int64_t b, const int q8, const qg_avx2_tok *k,
                     const int T, __m256 *acc) {
    const int bsz = q8 ? 34 : 18;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i xq[QG_AVX2_T], c[QG_AVX2_T];
    __m256 dx[QG_AVX2_T];
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) { /* the tokens' loads, shared by the R rows */
        xq[t] = _mm256_loadu_si256((const __m256i *)(k->q[t] + b * 32));
        if (!q8) c[t] = _mm256_loadu_si256((const __m256i *)(k->c[t] + b * 8));
        if (T <= 2) dx[t] = _mm256_broadcast_ss(k->d[t] + b);
    }
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
        const uint8_t *pb = p[i] + b * bsz;
        uint16_t h;
        memcpy(&h, pb, 2);
        __m256i w;
        if (q8) {
            w = _mm256_loadu_si256((const __m256i *)(pb + 2));
        } else { /* both halves in one load, the high one shifted by 4 */
            const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(pb + 2)));
            w = _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_set_epi64x(4, 4, 0, 0)), _mm256_set1_epi8(0x0F));
        }
        const __m256i aw = q8 ? _mm256_sign_epi8(w, w) : w;
        const __m256 wd = T <= 2 ? _mm256_broadcast_ss(&ffn_qg_f16_tab[h]) : _mm256_setzero_ps();
        const float wds = T <= 2 ? 0.0f : ffn_qg_f16_tab[h];
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            __m256i s;
            if (q8) s = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(xq[t], w)), ones);
            else s = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(aw, xq[t]), ones), c[t]);
            const __m256 sc = T <= 2 ? _mm256_mul_ps(wd, dx[t]) : _mm256_set1_ps(wds * k->d[t][b]);
            acc[i * T + t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), sc, acc[i * T + t]);
        }
    }
}

/* Rows row + i·rb (i < R) against tokens t0 .. t0 + T - 1: even blocks in
 * one accumulator, odd ones in another, their sum's horizontal sum last
 * (per row, the same sequence for any R, T). */
QA void qa_dot_q32(const uint8_t *row, size_t rb, const int R, int64_t cols, const int q8, const qg_acts *a,
                   int64_t t0, const int T, float *out) {
    const int64_t nblk = cols / 32;
    const uint8_t *p[4];
    qg_avx2_tok k;
    __m256 acc0[QG_AVX2_T], acc1[QG_AVX2_T];
    qg_avx2_group(row, rb, R, a, t0, T, p, &k, acc0, acc1);
    /* The rows after this group (the rows lie end to end) prefetched at
     * the pace this group is read: the hardware prefetcher follows the R
     * streams of a group, each short of a page, badly (4 rows of 2048
     * columns ran at 0.7x the speed of 1 row from memory, and with this
     * at 1.4x), and even one row's stream gains (q8_0, n = 3: 0.82x the
     * time). */
    const int bsz = q8 ? 34 : 18;
    const uint8_t *pf = row + (size_t)R * rb;
    int64_t b = 0;
    for (; b + 2 <= nblk; b += 2) {
#pragma GCC unroll 8
        for (int l = 0; l < R * 2 * bsz; l += 64) _mm_prefetch((const char *)pf + b * R * bsz + l, _MM_HINT_T0);
        qa_q32_block(p, R, b, q8, &k, T, acc0);
        qa_q32_block(p, R, b + 1, q8, &k, T, acc1);
    }
    if (b < nblk) qa_q32_block(p, R, b, q8, &k, T, acc0);
#pragma GCC unroll 4
    for (int j = 0; j < R * T; j++) out[j] = vf_hsum(_mm256_add_ps(acc0[j], acc1[j]));
}

/* ---- f32, f16, bf16 ------------------------------------------------------------- */

enum { QA_F32 = 0, QA_F16 = 1, QA_BF16 = 2 };

QA __m256 qa_w8(const uint8_t *row, int64_t k, const int kind) {
    if (kind == QA_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + 2 * k)));
    if (kind == QA_BF16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(row + 2 * k))), 16));
    return _mm256_loadu_ps((const float *)(row + 4 * k));
}

static inline float qa_w1(const uint8_t *row, int64_t k, int kind) {
    uint16_t h;
    float f;
    if (kind == QA_F32) {
        memcpy(&f, row + 4 * k, 4);
        return f;
    }
    memcpy(&h, row + 2 * k, 2);
    return kind == QA_F16 ? ffn_f16_to_f32(h) : ffn_bf16_to_f32(h);
}

QA void qa_dot_float(const uint8_t *row, int64_t cols, const int kind, const qg_acts *a, int64_t t0,
                     const int T, float *out) {
    __m256 acc0[QG_AVX2_T], acc1[QG_AVX2_T];
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) acc0[t] = acc1[t] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= cols; k += 16) {
        __m256 w0 = qa_w8(row, k, kind), w1 = qa_w8(row, k + 8, kind);
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            const float *x = a->x + (t0 + t) * a->ldx + k;
            acc0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x), acc0[t]);
            acc1[t] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + 8), acc1[t]);
        }
    }
    if (k + 8 <= cols) {
        __m256 w0 = qa_w8(row, k, kind);
#pragma GCC unroll 4
        for (int t = 0; t < T; t++)
            acc0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(a->x + (t0 + t) * a->ldx + k), acc0[t]);
        k += 8;
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
        float tail = 0.0f;
        const float *x = a->x + (t0 + t) * a->ldx;
        for (int64_t j = k; j < cols; j++) tail += qa_w1(row, j, kind) * x[j];
        out[t] = vf_hsum(_mm256_add_ps(acc0[t], acc1[t])) + tail;
    }
}

/* ---- rows ---------------------------------------------------------------------------- */

QA void qa_dot(ffn_ggml_type type, const uint8_t *row, int64_t cols, const qg_acts *a, int64_t t0,
               const int T, float *out) {
    switch (type) {
    case FFN_GGML_TYPE_BF16: qa_dot_float(row, cols, QA_BF16, a, t0, T, out); break;
    case FFN_GGML_TYPE_F16: qa_dot_float(row, cols, QA_F16, a, t0, T, out); break;
    default: qa_dot_float(row, cols, QA_F32, a, t0, T, out); break;
    }
}

#define QA_DOT_Q32(q8, row, rb, R, cols, a, t0, T, out) qa_dot_q32(row, rb, R, cols, q8, a, t0, T, out)
QG_AVX2_ROWS_MULTI(ffn_qg_rows_avx2_q8_0, QA_DOT_Q32, 1)
QG_AVX2_ROWS_MULTI(ffn_qg_rows_avx2_q4_0, QA_DOT_Q32, 0)
QG_AVX2_ROWS(ffn_qg_rows_avx2_bf16, qa_dot, FFN_GGML_TYPE_BF16)
QG_AVX2_ROWS(ffn_qg_rows_avx2_f16, qa_dot, FFN_GGML_TYPE_F16)
QG_AVX2_ROWS(ffn_qg_rows_avx2_f32, qa_dot, FFN_GGML_TYPE_F32)
