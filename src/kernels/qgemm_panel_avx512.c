/* qgemm_panel_avx512.c -- ffn_qgemm at prompt sizes (many tokens): the
 * weight decoded, 32 rows at a time, into a bf16 panel inside the call,
 * and a register-blocked AVX512_BF16 product of the panel with every token
 * of the tile.  No copy of the weight outlives the call.
 *
 *   x   (n, cols) fp32 -> xb (T, xs) bf16, T <= QP_TOK tokens per tile,
 *       xs padded so that a token's row is an odd number of 64-byte lines
 *       (the 14 rows a micro-tile reads then fall into different L1 sets)
 *       and to an even count (a zero past an odd cols).
 *   W   rows r0..r0+31, all cols -> panel (cols/2 pairs, 32 rows) of
 *       dwords: dword p·32 + i holds (W[r0+i][2p], W[r0+i][2p+1]) in
 *       bf16, the operand layout of vdpbf16ps (16 rows per vector, one
 *       pair of columns per lane).  Rows past the weight's end are zero.
 *       The panel (64·cols bytes, 512 KiB at cols = 8192) stays in the
 *       thread's L2 while every token of the tile goes past it.
 *   y   micro-tile of QP_MT tokens × 32 rows: 28 fp32 accumulators, one
 *       broadcast of a token's column pair and two panel loads per pair.
 *
 * Decoding: bf16 as stored, f16 by F16C, q8_0, q4_0, q4_K and q6_K by
 * vector code following ggml's formulas (in fp32, then rounded to bf16);
 * each weight is
 * decoded once per tile of QP_TOK tokens, so the decode is a small share
 * of the product from a few dozen tokens on.  The row panels are split
 * across the threads in contiguous runs; each output is one sum in a fixed
 * order (column pairs in order, per lane), so a token's result does not
 * depend on n, the tile or the thread count. */
#include "kernels/qgemm_impl.h"
#include "kernels/quant.h"

#include <immintrin.h>
#include <omp.h>
#include <string.h>

#define QP_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c")))
#define QP static inline __attribute__((always_inline)) QP_TARGET

enum {
    QP_RB = 32,   /* rows per panel: two vectors of 16 lanes */
    QP_MT = 14,   /* tokens per micro-tile: 28 accumulators */
    QP_TOK = 512, /* tokens per tile: the weight is decoded once per tile */
    QP_KC = 256   /* columns decoded per step (a multiple of every block) */
};

/* bf16 elements per token row of xb (see the top). */
static int64_t qp_xs(int64_t cols) {
    int64_t lines = (cols + 1 + 31) / 32; /* 32 bf16 per 64-byte line */
    if (!(lines & 1)) lines++;
    return lines * 32;
}

static size_t qp_panel_bytes(int64_t cols) { return (size_t)((cols + 1) / 2) * QP_RB * 4 + 64; }

size_t ffn_qg_panel_ws_bytes(const ffn_qweight *w, int64_t n, int threads) {
    if (!w || n <= 0 || !w->cols) return 0;
    int64_t T = n < QP_TOK ? n : QP_TOK;
    if (threads < 1) threads = 1;
    return (size_t)T * (size_t)qp_xs(w->cols) * 2 + (size_t)threads * qp_panel_bytes(w->cols) + 128;
}

/* ---- decoding 32 columns of one row to bf16 ------------------------------------ */

QP void qp_store32(uint16_t *dst, __m512 lo, __m512 hi) {
    _mm512_storeu_si512(dst, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

static inline float qp_f16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return ffn_f16_to_f32(h);
}

/* Columns [k0, k0 + len) of row `row` (len <= QP_KC) as bf16 into dst[0..QP_KC),
 * zero past len.  k0 is a multiple of QP_KC. */
QP_TARGET static void qp_decode(ffn_ggml_type type, const uint8_t *row, int64_t k0, int64_t len,
                                uint16_t *dst) {
    int64_t k = 0;
    switch (type) {
    case FFN_GGML_TYPE_BF16:
        for (; k < len; k += 32) {
            int64_t m = len - k;
            __mmask32 mk = m >= 32 ? 0xFFFFFFFFu : (__mmask32)((1u << m) - 1u);
            _mm512_storeu_si512(dst + k, _mm512_maskz_loadu_epi16(mk, row + 2 * (k0 + k)));
        }
        k = len;
        break;
    case FFN_GGML_TYPE_F16:
        for (; k < len; k += 32) {
            int64_t m = len - k;
            __mmask16 m0 = m >= 16 ? 0xFFFF : (__mmask16)((1u << m) - 1u);
            __mmask16 m1 = m >= 32 ? 0xFFFF : m > 16 ? (__mmask16)((1u << (m - 16)) - 1u) : 0;
            const uint8_t *p = row + 2 * (k0 + k);
            qp_store32(dst + k, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m0, p)),
                       _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m1, p + 32)));
        }
        k = len;
        break;
    case FFN_GGML_TYPE_Q8_0:
        for (; k < len; k += 32) {
            const uint8_t *p = row + (size_t)((k0 + k) / 32) * 34;
            __m512 d = _mm512_set1_ps(qp_f16(p));
            __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p + 2))));
            __m512 hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p + 18))));
            qp_store32(dst + k, _mm512_mul_ps(lo, d), _mm512_mul_ps(hi, d));
        }
        break;
    case FFN_GGML_TYPE_Q4_0:
        for (; k < len; k += 32) {
            const uint8_t *p = row + (size_t)((k0 + k) / 32) * 18;
            __m512 d = _mm512_set1_ps(qp_f16(p));
            __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(p + 2)));
            const __m512i eight = _mm512_set1_epi32(8);
            __m512i lo = _mm512_sub_epi32(_mm512_and_si512(v, _mm512_set1_epi32(15)), eight);
            __m512i hi = _mm512_sub_epi32(_mm512_srli_epi32(v, 4), eight);
            qp_store32(dst + k, _mm512_mul_ps(_mm512_cvtepi32_ps(lo), d),
                       _mm512_mul_ps(_mm512_cvtepi32_ps(hi), d));
        }
        break;
    case FFN_GGML_TYPE_Q4_K: /* ggml's dequantize_row_q4_K, 16 values a vector */
        for (; k < len; k += 256) {
            const uint8_t *p = row + (size_t)((k0 + k) / 256) * 144;
            const float d = qp_f16(p), dmin = qp_f16(p + 2);
            uint8_t sm[16]; /* scales 0..7, mins 0..7 */
            quant_scales_mins_k4(p + 4, sm);
            for (int j = 0; j < 4; j++) {
                const __m512 d1 = _mm512_set1_ps(d * (float)sm[2 * j]), m1 = _mm512_set1_ps(dmin * (float)sm[8 + 2 * j]);
                const __m512 d2 = _mm512_set1_ps(d * (float)sm[2 * j + 1]),
                             m2 = _mm512_set1_ps(dmin * (float)sm[9 + 2 * j]);
                const uint8_t *q = p + 16 + 32 * j;
                __m512i v0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)q));
                __m512i v1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(q + 16)));
                const __m512i m4 = _mm512_set1_epi32(15);
#define QP_Q4K(v, dd, mm) _mm512_sub_ps(_mm512_mul_ps(dd, _mm512_cvtepi32_ps(v)), mm)
                qp_store32(dst + k + 64 * j, QP_Q4K(_mm512_and_si512(v0, m4), d1, m1),
                           QP_Q4K(_mm512_and_si512(v1, m4), d1, m1));
                qp_store32(dst + k + 64 * j + 32, QP_Q4K(_mm512_srli_epi32(v0, 4), d2, m2),
                           QP_Q4K(_mm512_srli_epi32(v1, 4), d2, m2));
#undef QP_Q4K
            }
        }
        break;
    case FFN_GGML_TYPE_Q6_K: /* ggml's dequantize_row_q6_K, 16 values a vector */
        for (; k < len; k += 256) {
            const uint8_t *p = row + (size_t)((k0 + k) / 256) * 210;
            const float d = qp_f16(p + 208);
            const __m512i m4 = _mm512_set1_epi32(15), m2 = _mm512_set1_epi32(3), o32 = _mm512_set1_epi32(32);
            for (int n = 0; n < 2; n++) {
                const uint8_t *ql = p + 64 * n, *qh = p + 128 + 32 * n;
                const int8_t *sc = (const int8_t *)(p + 192 + 8 * n);
                float f[4][32] __attribute__((aligned(64)));
                for (int l = 0; l < 32; l += 16) {
                    int is = l / 16;
                    __m512i a = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(ql + l)));
                    __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(ql + l + 32)));
                    __m512i h = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(qh + l)));
                    __m512i q1 = _mm512_or_si512(_mm512_and_si512(a, m4), _mm512_slli_epi32(_mm512_and_si512(h, m2), 4));
                    __m512i q2 = _mm512_or_si512(_mm512_and_si512(b, m4),
                                                 _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h, 2), m2), 4));
                    __m512i q3 = _mm512_or_si512(_mm512_srli_epi32(a, 4),
                                                 _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h, 4), m2), 4));
                    __m512i q4 = _mm512_or_si512(_mm512_srli_epi32(b, 4),
                                                 _mm512_slli_epi32(_mm512_srli_epi32(h, 6), 4));
#define QP_Q6K(q, i) _mm512_mul_ps(_mm512_set1_ps(d * (float)sc[is + (i)]), _mm512_cvtepi32_ps(_mm512_sub_epi32(q, o32)))
                    _mm512_store_ps(f[0] + l, QP_Q6K(q1, 0));
                    _mm512_store_ps(f[1] + l, QP_Q6K(q2, 2));
                    _mm512_store_ps(f[2] + l, QP_Q6K(q3, 4));
                    _mm512_store_ps(f[3] + l, QP_Q6K(q4, 6));
#undef QP_Q6K
                }
                for (int i = 0; i < 4; i++)
                    qp_store32(dst + k + 128 * n + 32 * i, _mm512_load_ps(f[i]), _mm512_load_ps(f[i] + 16));
            }
        }
        break;
    default: { /* any other type: ggml's formulas, then rounded in vectors */
        float buf[QP_KC];
        size_t bb = 0;
        (void)ffn_ggml_row_size(type, QP_KC, &bb);
        (void)ffn_ggml_dequantize_row(type, row + (size_t)(k0 / QP_KC) * bb, buf, len);
        for (; k < len; k += 32) qp_store32(dst + k, _mm512_loadu_ps(buf + k), _mm512_loadu_ps(buf + k + 16));
        break;
    }
    }
    for (k = (len + 31) / 32 * 32; k < QP_KC; k += 32) _mm512_storeu_si512(dst + k, _mm512_setzero_si512());
    if (len % 32) memset(dst + len, 0, (size_t)(32 - len % 32) * 2);
}

/* 16 × 16 dwords: r[i] = row i  ->  r[j] = column j. */
QP void qp_transpose16(__m512i r[16]) {
    __m512i t[16];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) { /* s[i][j] = r[4i + j]: lane L holds column 4L + j, rows 4i..4i+3 */
        r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m512i u0 = _mm512_shuffle_i32x4(r[j], r[4 + j], 0x88);
        __m512i u1 = _mm512_shuffle_i32x4(r[j], r[4 + j], 0xDD);
        __m512i u2 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0x88);
        __m512i u3 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0xDD);
        t[j] = _mm512_shuffle_i32x4(u0, u2, 0x88);      /* column j */
        t[8 + j] = _mm512_shuffle_i32x4(u0, u2, 0xDD);  /* column 8 + j */
        t[4 + j] = _mm512_shuffle_i32x4(u1, u3, 0x88);  /* column 4 + j */
        t[12 + j] = _mm512_shuffle_i32x4(u1, u3, 0xDD); /* column 12 + j */
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) r[i] = t[i];
}

/* Rows r0.. r0 + 31 of w (zero past w->rows) into the panel. */
QP_TARGET static void qp_fill_panel(const ffn_qweight *w, int64_t r0, uint32_t *panel) {
    uint16_t tmp[16][QP_KC] __attribute__((aligned(64)));
    const int64_t cols = w->cols;
    for (int g = 0; g < 2; g++) {
        for (int64_t k0 = 0; k0 < cols; k0 += QP_KC) {
            int64_t len = cols - k0 < QP_KC ? cols - k0 : QP_KC;
            for (int i = 0; i < 16; i++) {
                int64_t r = r0 + 16 * g + i;
                if (r < w->rows) qp_decode(w->type, w->data + (size_t)r * w->row_bytes, k0, len, tmp[i]);
                else memset(tmp[i], 0, sizeof tmp[i]);
            }
            for (int64_t k = 0; k < len; k += 32) { /* 16 column pairs */
                __m512i v[16];
#pragma GCC unroll 16
                for (int i = 0; i < 16; i++) v[i] = _mm512_load_si512(tmp[i] + k);
                qp_transpose16(v);
                int64_t p0 = (k0 + k) / 2, np = (len - k + 1) / 2 < 16 ? (len - k + 1) / 2 : 16;
                for (int j = 0; j < np; j++) _mm512_storeu_si512(panel + (p0 + j) * QP_RB + 16 * g, v[j]);
            }
        }
    }
}

/* ---- the product ------------------------------------------------------------------ */

/* y[m·ldy + r0 + i] (+)= Σ_p panel[p][i] · xb[m][p] for M tokens, nv <= 32 rows. */
QP void qp_tile(const uint32_t *panel, int64_t pairs, const uint16_t *xb, int64_t xs, const int M,
                float *y, int64_t ldy, int nv, int accumulate) {
    __m512 a0[QP_MT], a1[QP_MT];
#pragma GCC unroll 14
    for (int m = 0; m < M; m++) a0[m] = a1[m] = _mm512_setzero_ps();
    const uint16_t *xp = xb;
    for (int64_t p = 0; p < pairs; p++, xp += 2) {
        __m512bh w0 = (__m512bh)_mm512_loadu_si512(panel + p * QP_RB);
        __m512bh w1 = (__m512bh)_mm512_loadu_si512(panel + p * QP_RB + 16);
#pragma GCC unroll 14
        for (int m = 0; m < M; m++) {
            int32_t xv;
            memcpy(&xv, xp + m * xs, 4);
            __m512bh b = (__m512bh)_mm512_set1_epi32(xv);
            a0[m] = _mm512_dpbf16_ps(a0[m], w0, b);
            a1[m] = _mm512_dpbf16_ps(a1[m], w1, b);
        }
    }
    __mmask16 k0 = nv >= 16 ? 0xFFFF : (__mmask16)((1u << nv) - 1u);
    __mmask16 k1 = nv >= 32 ? 0xFFFF : nv > 16 ? (__mmask16)((1u << (nv - 16)) - 1u) : 0;
#pragma GCC unroll 14
    for (int m = 0; m < M; m++) {
        float *o = y + m * ldy;
        if (accumulate) {
            a0[m] = _mm512_add_ps(_mm512_maskz_loadu_ps(k0, o), a0[m]);
            a1[m] = _mm512_add_ps(_mm512_maskz_loadu_ps(k1, o + 16), a1[m]);
        }
        _mm512_mask_storeu_ps(o, k0, a0[m]);
        _mm512_mask_storeu_ps(o + 16, k1, a1[m]);
    }
}

#define QP_CASE(M) \
    case M: qp_tile(panel, pairs, xb, xs, M, y, ldy, nv, accumulate); break;
QP_TARGET static void qp_tiles(const uint32_t *panel, int64_t pairs, const uint16_t *xb, int64_t xs,
                               int M, float *y, int64_t ldy, int nv, int accumulate) {
    switch (M) {
        QP_CASE(1) QP_CASE(2) QP_CASE(3) QP_CASE(4) QP_CASE(5) QP_CASE(6) QP_CASE(7)
        QP_CASE(8) QP_CASE(9) QP_CASE(10) QP_CASE(11) QP_CASE(12) QP_CASE(13)
        default: QP_CASE(14)
    }
}

/* Token t of the tile rounded to bf16 (round to nearest even, as the
 * decode kernel's ffn_f32_to_bf16), zero from cols to the stride's end. */
QP_TARGET static void qp_round_x(const float *x, int64_t cols, uint16_t *xb, int64_t xs) {
    int64_t k = 0;
    for (; k + 32 <= cols; k += 32)
        qp_store32(xb + k, _mm512_loadu_ps(x + k), _mm512_loadu_ps(x + k + 16));
    for (; k < cols; k++) xb[k] = ffn_f32_to_bf16(x[k]);
    for (; k < xs; k++) xb[k] = 0;
}

void ffn_qg_panel_run(const ffn_qweight *w, const float *x, int64_t ldx, int64_t n, float *y,
                      int64_t ldy, int accumulate, void *ws) {
    const int64_t cols = w->cols, rows = w->rows, xs = qp_xs(cols), pairs = (cols + 1) / 2;
    const int64_t npanels = (rows + QP_RB - 1) / QP_RB;
    uint16_t *xb = (uint16_t *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);
    int64_t T = n < QP_TOK ? n : QP_TOK;
    uint8_t *panels = (uint8_t *)xb + (size_t)T * (size_t)xs * 2;
    const size_t pb = qp_panel_bytes(cols);
    for (int64_t t0 = 0; t0 < n; t0 += QP_TOK) {
        int64_t tn = n - t0 < QP_TOK ? n - t0 : QP_TOK;
        int par = npanels > 1 && tn * rows * cols >= (INT64_C(1) << 20);
#pragma omp parallel if (par)
        {
            uint32_t *panel = (uint32_t *)(panels + (size_t)omp_get_thread_num() * pb);
#pragma omp for schedule(static)
            for (int64_t t = 0; t < tn; t++) qp_round_x(x + (t0 + t) * ldx, cols, xb + t * xs, xs);
#pragma omp for schedule(static)
            for (int64_t p = 0; p < npanels; p++) {
                int64_t r0 = p * QP_RB;
                int nv = rows - r0 < QP_RB ? (int)(rows - r0) : QP_RB;
                qp_fill_panel(w, r0, panel);
                for (int64_t m0 = 0; m0 < tn; m0 += QP_MT) {
                    int M = tn - m0 < QP_MT ? (int)(tn - m0) : QP_MT;
                    qp_tiles(panel, pairs, xb + m0 * xs, xs, M, y + (t0 + m0) * ldy + r0, ldy, nv,
                             accumulate);
                }
            }
        }
    }
}
