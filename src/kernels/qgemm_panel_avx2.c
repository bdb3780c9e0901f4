/* qgemm_panel_avx2.c -- ffn_qgemm at prompt sizes on AVX2 machines (no
 * AVX512_BF16): the weight decoded, 16 rows × 256 columns at a time, into
 * an fp32 panel inside the call with the type table's own decoder
 * (src/kernels/types.c; so every block format the table decodes gets this
 * path with no code of its own), and a register-blocked FMA product of the
 * panel with every token of the tile.  No copy of the weight outlives the
 * call.
 *
 *   W   rows r0..r0+15, columns k0..k0+255 -> tmp (16 rows of 256 fp32,
 *       the decoder's output), transposed in 8 × 8 blocks into the panel:
 *       float k·16 + i holds W[r0 + i][k0 + k] (16 rows = two ymm vectors
 *       per column).  Rows past the weight's end are zero.  tmp and panel
 *       (16 KiB each) stay in L1 while every token of the tile goes past.
 *   x   read in place: one broadcast per token and column.
 *   y   micro-tile of PA_MT tokens × 16 rows: 12 ymm accumulators, two
 *       panel loads and six broadcasts per column.
 *
 * Decoding: vector code for q8_0, q4_0, q4_K, q6_K, f16 and bf16 (each
 * value bit for bit the table decoder's), the table's decoder for any
 * other type.  Each weight is decoded once per tile of PA_TOK tokens.  The panels are
 * split across the threads; an output is a fixed sum: per block of 256
 * columns one fp32 FMA chain in column order from zero, the blocks added
 * to y in order (to y's value when accumulating, else from the first
 * block's sum).  So a token's result does not depend on n, the tile or the
 * thread count.  x and W stay fp32 (W as the decoder gives it): the
 * result is the dequantized weight's product to fp32 rounding, not the row
 * kernels' (which quantize x to int8). */
#include "kernels/qgemm_avx2.h"
#include "kernels/qgemm_impl.h"
#include "kernels/quant.h"
#include "kernels/types.h"

#include <immintrin.h>
#include <omp.h>
#include <string.h>

#define PA static inline __attribute__((always_inline))

enum {
    PA_RB = 16,   /* rows per panel: two vectors of 8 lanes */
    PA_MT = 6,    /* tokens per micro-tile: 12 accumulators */
    PA_KC = 256,  /* columns per panel (a multiple of every block) */
    PA_TOK = 256  /* tokens per tile: the weight is decoded once per tile */
};

/* One thread's tmp and panel (floats), 64-byte aligned. */
enum { PA_THREAD_FLOATS = 2 * PA_RB * PA_KC };

size_t ffn_qg_panel_avx2_ws_bytes(int threads) {
    if (threads < 1) threads = 1;
    return (size_t)threads * PA_THREAD_FLOATS * sizeof(float) + 64;
}

/* r[i] = row i of an 8 × 8 block -> r[j] = column j. */
PA void pa_transpose8(__m256 r[8]) {
    __m256 t[8], s[8];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++) {
        s[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        s[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        s[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        s[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        r[j] = _mm256_permute2f128_ps(s[j], s[4 + j], 0x20);
        r[4 + j] = _mm256_permute2f128_ps(s[j], s[4 + j], 0x31);
    }
}

/* ---- decoding ---------------------------------------------------------------------
 * nb whole blocks of a row to fp32: vector code for the types whose table
 * decoder is scalar, with the table decoder's formulas operation for
 * operation (each value bit for bit the decoder's: the same products and
 * differences in fp32, fp16 scales widened exactly by F16C), and the table's
 * own decoder for every other type. */

PA __m256i pa_u8x8(const uint8_t *p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)); }

static void pa_decode(const ffn_type_info *q, ffn_ggml_type type, const uint8_t *src, float *dst,
                      int64_t nb) {
    const __m256i m4 = _mm256_set1_epi32(15), m2 = _mm256_set1_epi32(3);
    switch (type) {
    case FFN_GGML_TYPE_Q8_0: /* (float)q · d */
        for (int64_t b = 0; b < nb; b++, src += 34, dst += 32) {
            const __m256 d = _mm256_set1_ps(qg_avx2_f16(src));
            for (int i = 0; i < 4; i++) {
                __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(src + 2 + 8 * i)));
                _mm256_storeu_ps(dst + 8 * i, _mm256_mul_ps(_mm256_cvtepi32_ps(v), d));
            }
        }
        return;
    case FFN_GGML_TYPE_Q4_0: /* (float)(nibble − 8) · d, low nibbles first */
        for (int64_t b = 0; b < nb; b++, src += 18, dst += 32) {
            const __m256 d = _mm256_set1_ps(qg_avx2_f16(src));
            const __m256i eight = _mm256_set1_epi32(8);
            for (int i = 0; i < 2; i++) {
                __m256i v = pa_u8x8(src + 2 + 8 * i);
                __m256i lo = _mm256_sub_epi32(_mm256_and_si256(v, m4), eight);
                __m256i hi = _mm256_sub_epi32(_mm256_srli_epi32(v, 4), eight);
                _mm256_storeu_ps(dst + 8 * i, _mm256_mul_ps(_mm256_cvtepi32_ps(lo), d));
                _mm256_storeu_ps(dst + 16 + 8 * i, _mm256_mul_ps(_mm256_cvtepi32_ps(hi), d));
            }
        }
        return;
    case FFN_GGML_TYPE_Q4_K: /* (d · sc) · q − (dmin · m), per 32 values */
        for (int64_t b = 0; b < nb; b++, src += 144) {
            const float d = qg_avx2_f16(src), dmin = qg_avx2_f16(src + 2);
            const uint8_t *qs = src + 16;
            uint8_t sm[16]; /* scales 0..7, mins 0..7 */
            quant_scales_mins_k4(src + 4, sm);
            for (int j = 0; j < 4; j++, qs += 32, dst += 64) {
                const __m256 d1 = _mm256_set1_ps(d * (float)sm[2 * j]), m1 = _mm256_set1_ps(dmin * (float)sm[8 + 2 * j]);
                const __m256 d2 = _mm256_set1_ps(d * (float)sm[2 * j + 1]),
                             mv2 = _mm256_set1_ps(dmin * (float)sm[9 + 2 * j]);
                for (int i = 0; i < 4; i++) {
                    __m256i v = pa_u8x8(qs + 8 * i);
                    __m256 lo = _mm256_cvtepi32_ps(_mm256_and_si256(v, m4));
                    __m256 hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4));
                    _mm256_storeu_ps(dst + 8 * i, _mm256_sub_ps(_mm256_mul_ps(d1, lo), m1));
                    _mm256_storeu_ps(dst + 32 + 8 * i, _mm256_sub_ps(_mm256_mul_ps(d2, hi), mv2));
                }
            }
        }
        return;
    case FFN_GGML_TYPE_Q6_K: /* (d · sc) · (float)(q − 32) */
        for (int64_t b = 0; b < nb; b++, src += 210) {
            const float d = qg_avx2_f16(src + 208);
            const __m256i o32 = _mm256_set1_epi32(32);
            const uint8_t *ql = src, *qh = src + 128;
            const int8_t *sc = (const int8_t *)(src + 192);
            for (int n = 0; n < 2; n++, ql += 64, qh += 32, sc += 8, dst += 128)
                for (int l = 0; l < 32; l += 8) {
                    const int is = l / 16;
                    __m256i a = pa_u8x8(ql + l), c = pa_u8x8(ql + l + 32), h = pa_u8x8(qh + l);
                    __m256i q1 = _mm256_or_si256(_mm256_and_si256(a, m4), _mm256_slli_epi32(_mm256_and_si256(h, m2), 4));
                    __m256i q2 = _mm256_or_si256(_mm256_and_si256(c, m4),
                                                 _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(h, 2), m2), 4));
                    __m256i q3 = _mm256_or_si256(_mm256_srli_epi32(a, 4),
                                                 _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(h, 4), m2), 4));
                    __m256i q4 = _mm256_or_si256(_mm256_srli_epi32(c, 4), _mm256_slli_epi32(_mm256_srli_epi32(h, 6), 4));
#define PA_Q6K(qv, i) _mm256_mul_ps(_mm256_set1_ps(d * (float)sc[is + (i)]), _mm256_cvtepi32_ps(_mm256_sub_epi32(qv, o32)))
                    _mm256_storeu_ps(dst + l, PA_Q6K(q1, 0));
                    _mm256_storeu_ps(dst + l + 32, PA_Q6K(q2, 2));
                    _mm256_storeu_ps(dst + l + 64, PA_Q6K(q3, 4));
                    _mm256_storeu_ps(dst + l + 96, PA_Q6K(q4, 6));
#undef PA_Q6K
                }
        }
        return;
    case FFN_GGML_TYPE_F16: { /* exact widening */
        int64_t k = 0;
        for (; k + 8 <= nb; k += 8)
            _mm256_storeu_ps(dst + k, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + 2 * k))));
        if (k < nb) q->decode(src + 2 * k, dst + k, nb - k);
        return;
    }
    case FFN_GGML_TYPE_BF16: { /* the upper half of a float */
        int64_t k = 0;
        for (; k + 8 <= nb; k += 8) {
            __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + 2 * k)));
            _mm256_storeu_ps(dst + k, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
        }
        if (k < nb) q->decode(src + 2 * k, dst + k, nb - k);
        return;
    }
    default: q->decode(src, dst, nb); return;
    }
}

/* Rows r0..r0+15 (zero past w->rows), columns [k0, k0 + len) into the
 * panel; len is a whole number of blocks, len8 = len rounded up to 8. */
static void pa_fill(const ffn_qweight *w, const ffn_type_info *q, int64_t r0, int64_t k0,
                    int64_t len, float *tmp, float *panel) {
    const int64_t len8 = (len + 7) & ~(int64_t)7;
    const size_t off = (size_t)(k0 / q->block) * q->bytes;
    for (int i = 0; i < PA_RB; i++) {
        float *t = tmp + i * PA_KC;
        if (r0 + i < w->rows) {
            pa_decode(q, w->type, w->data + (size_t)(r0 + i) * w->row_bytes + off, t, len / q->block);
            for (int64_t k = len; k < len8; k++) t[k] = 0.0f;
        } else {
            memset(t, 0, (size_t)len8 * sizeof *t);
        }
    }
    for (int64_t k = 0; k < len8; k += 8)
        for (int g = 0; g < 2; g++) {
            __m256 v[8];
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) v[i] = _mm256_load_ps(tmp + (8 * g + i) * PA_KC + k);
            pa_transpose8(v);
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) _mm256_store_ps(panel + (k + j) * PA_RB + 8 * g, v[j]);
        }
}

/* y[m·ldy + i] (+)= Σ_k panel[k][i] · x[m·ldx + k] for M tokens, nv <= 16 rows;
 * add: y's value is the start (else the sum is stored). */
PA void pa_tile(const float *panel, int64_t len, const float *x, int64_t ldx, const int M, float *y,
                int64_t ldy, int nv, int add) {
    __m256 a0[PA_MT], a1[PA_MT];
#pragma GCC unroll 6
    for (int m = 0; m < M; m++) a0[m] = a1[m] = _mm256_setzero_ps();
    for (int64_t k = 0; k < len; k++) {
        const __m256 w0 = _mm256_load_ps(panel + k * PA_RB), w1 = _mm256_load_ps(panel + k * PA_RB + 8);
#pragma GCC unroll 6
        for (int m = 0; m < M; m++) {
            const __m256 b = _mm256_broadcast_ss(x + m * ldx + k);
            a0[m] = _mm256_fmadd_ps(w0, b, a0[m]);
            a1[m] = _mm256_fmadd_ps(w1, b, a1[m]);
        }
    }
    if (nv == PA_RB) {
#pragma GCC unroll 6
        for (int m = 0; m < M; m++) {
            float *o = y + m * ldy;
            if (add) {
                a0[m] = _mm256_add_ps(_mm256_loadu_ps(o), a0[m]);
                a1[m] = _mm256_add_ps(_mm256_loadu_ps(o + 8), a1[m]);
            }
            _mm256_storeu_ps(o, a0[m]);
            _mm256_storeu_ps(o + 8, a1[m]);
        }
        return;
    }
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i k0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nv), lane);
    const __m256i k1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nv - 8), lane);
#pragma GCC unroll 6
    for (int m = 0; m < M; m++) {
        float *o = y + m * ldy;
        if (add) {
            a0[m] = _mm256_add_ps(_mm256_maskload_ps(o, k0), a0[m]);
            a1[m] = _mm256_add_ps(_mm256_maskload_ps(o + 8, k1), a1[m]);
        }
        _mm256_maskstore_ps(o, k0, a0[m]);
        _mm256_maskstore_ps(o + 8, k1, a1[m]);
    }
}

#define PA_CASE(M) \
    case M: pa_tile(panel, len, x, ldx, M, y, ldy, nv, add); break;
static void pa_tiles(const float *panel, int64_t len, const float *x, int64_t ldx, int M, float *y,
                     int64_t ldy, int nv, int add) {
    switch (M) {
        PA_CASE(1) PA_CASE(2) PA_CASE(3) PA_CASE(4) PA_CASE(5)
        default: PA_CASE(6)
    }
}
#undef PA_CASE

void ffn_qg_panel_avx2_run(const ffn_qweight *w, const float *x, int64_t ldx, int64_t n, float *y,
                           int64_t ldy, int accumulate, void *ws) {
    const ffn_type_info *q = ffn_type_info_of(w->type);
    const int64_t cols = w->cols, rows = w->rows, npanels = (rows + PA_RB - 1) / PA_RB;
    float *base = (float *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);
    for (int64_t t0 = 0; t0 < n; t0 += PA_TOK) {
        const int64_t tn = n - t0 < PA_TOK ? n - t0 : PA_TOK;
        const int par = npanels > 1 && tn * rows * cols >= (INT64_C(1) << 20);
#pragma omp parallel if (par)
        {
            float *tmp = base + (size_t)omp_get_thread_num() * PA_THREAD_FLOATS, *panel = tmp + PA_RB * PA_KC;
#pragma omp for schedule(static)
            for (int64_t p = 0; p < npanels; p++) {
                const int64_t r0 = p * PA_RB;
                const int nv = rows - r0 < PA_RB ? (int)(rows - r0) : PA_RB;
                for (int64_t k0 = 0; k0 < cols; k0 += PA_KC) {
                    const int64_t len = cols - k0 < PA_KC ? cols - k0 : PA_KC;
                    pa_fill(w, q, r0, k0, len, tmp, panel);
                    const int add = accumulate || k0 > 0;
                    for (int64_t m0 = 0; m0 < tn; m0 += PA_MT) {
                        const int M = tn - m0 < PA_MT ? (int)(tn - m0) : PA_MT;
                        pa_tiles(panel, len, x + (t0 + m0) * ldx + k0, ldx, M,
                                 y + (t0 + m0) * ldy + r0, ldy, nv, add);
                    }
                }
            }
        }
    }
}
