/* qgemm_avx2.h -- what the AVX2 row kernels of ffn_qgemm share
 * (qgemm_avx2.c, qgemm_k_avx2.c, qgemm_legacy_avx2.c; the f16 scale also
 * qgemm_panel_avx2.c): the block of tokens a weight row meets at once, the
 * fp16 scale widened, the integer horizontal sum and the row loop around a
 * file's dot kernel.  Included only by files built with -mavx2 -mfma
 * -mf16c. */
#ifndef FFN_KERNELS_QGEMM_AVX2_H
#define FFN_KERNELS_QGEMM_AVX2_H

#include "kernels/qgemm_impl.h"
#include "kernels/vec_avx2.h" /* vf_hsum */

#include <immintrin.h>
#include <string.h>

#define QG_AVX2_INLINE static inline __attribute__((always_inline))
enum { QG_AVX2_T = 4 }; /* tokens a weight row is decoded for at once */

/* A block's fp16 scale, widened by F16C in the kernel (exact, as
 * ffn_f16_to_f32, which as a call per block took 13% of a q8_0 decode;
 * a signalling NaN comes out quiet, which every product that uses a scale
 * would make it anyway). */
static inline float qg_avx2_f16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* The same scale from ffn_qg_f16_tab, broadcast: loads only, no
 * arithmetic (what a kernel with one fp16 scale per 32 weights wants). */
QG_AVX2_INLINE __m256 qg_avx2_f16_bcast(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _mm256_broadcast_ss(&ffn_qg_f16_tab[h]);
}

/* The tokens' arrays a 32-element-block kernel reads (token t0 + t's at
 * index t), and the R rows' starts, set once per row group (qgemm_avx2.c's
 * q8_0 / q4_0 and qgemm_legacy_avx2.c's kernels: recomputing them from the
 * strides in the block loop spilled). */
typedef struct qg_avx2_tok {
    const int8_t *q[QG_AVX2_T];
    const int32_t *c[QG_AVX2_T];
    const float *d[QG_AVX2_T];
} qg_avx2_tok;

/* The start of a group's dot products: the R rows' pointers p, the T
 * tokens' k, and the two accumulators of each (row, token) in acc0, acc1
 * (R·T of each) zeroed. */
QG_AVX2_INLINE void qg_avx2_group(const uint8_t *row, size_t rb, const int R, const qg_acts *a,
                                  int64_t t0, const int T, const uint8_t **p, qg_avx2_tok *k,
                                  __m256 *acc0, __m256 *acc1) {
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) p[i] = row + i * rb;
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
        k->q[t] = a->q + (t0 + t) * a->qs;
        k->c[t] = a->c + (t0 + t) * a->cs;
        k->d[t] = a->d + (t0 + t) * a->ds;
    }
#pragma GCC unroll 4
    for (int j = 0; j < R * T; j++) acc0[j] = acc1[j] = _mm256_setzero_ps();
}

QG_AVX2_INLINE int32_t qg_avx2_hsum_i32(__m256i v) {
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
    return _mm_cvtsi128_si32(h);
}

/* The row kernel `name` (qgemm_impl.h's contract) over DOT(KIND, row,
 * cols, a, t0, T, out), which writes the dots of one weight row with
 * tokens t0 .. t0 + T - 1 (T a constant 1..4, so each is inlined apart). */
#define QG_AVX2_ROWS(name, DOT, KIND)                                                           \
    void name(const ffn_qweight *w, const qg_acts *a, int64_t r0, int64_t r1, float *y,         \
              int64_t ldy, int accumulate) {                                                    \
        float out[QG_AVX2_T];                                                                   \
        for (int64_t r = r0; r < r1; r++) {                                                     \
            const uint8_t *row = w->data + (size_t)r * w->row_bytes;                            \
            for (int64_t t0 = 0; t0 < a->n; t0 += QG_AVX2_T) {                                  \
                int T = a->n - t0 < QG_AVX2_T ? (int)(a->n - t0) : QG_AVX2_T;                   \
                switch (T) {                                                                    \
                case 1: DOT(KIND, row, w->cols, a, t0, 1, out); break;                          \
                case 2: DOT(KIND, row, w->cols, a, t0, 2, out); break;                          \
                case 3: DOT(KIND, row, w->cols, a, t0, 3, out); break;                          \
                default: DOT(KIND, row, w->cols, a, t0, 4, out); break;                         \
                }                                                                               \
                for (int t = 0; t < T; t++) {                                                   \
                    float *o = y + (t0 + t) * ldy + r;                                          \
                    *o = accumulate ? *o + out[t] : out[t];                                     \
                }                                                                               \
            }                                                                                   \
        }                                                                                       \
    }

/* The row kernel `name` over DOT(KIND, row, rb, R, cols, a, t0, T, out),
 * which writes the dots of R consecutive weight rows (row, row + rb, ...)
 * with tokens t0 .. t0 + T - 1 to out[i·T + t] (R·T <= 4, both constants,
 * so each pair is inlined apart).  One token takes 4 rows per pass and two
 * take 2 (the activation loads shared by the rows, the weight's decode by
 * the tokens); more take one row against up to 4 tokens.  A DOT computes
 * each row exactly as it would alone, so the rows' grouping (r0, r1, n)
 * never changes a result. */
#define QG_AVX2_ROWS_MULTI(name, DOT, KIND)                                                     \
    void name(const ffn_qweight *w, const qg_acts *a, int64_t r0, int64_t r1, float *y,         \
              int64_t ldy, int accumulate) {                                                    \
        float out[QG_AVX2_T];                                                                   \
        const size_t rb = w->row_bytes;                                                         \
        const int Rn = a->n == 1 ? 4 : a->n == 2 ? 2 : 1;                                       \
        for (int64_t r = r0; r < r1;) {                                                         \
            const uint8_t *row = w->data + (size_t)r * rb;                                      \
            const int R = r1 - r >= Rn ? Rn : 1;                                                \
            for (int64_t t0 = 0; t0 < a->n; t0 += QG_AVX2_T) {                                  \
                int T = a->n - t0 < QG_AVX2_T ? (int)(a->n - t0) : QG_AVX2_T;                   \
                if (R == 4) /* n = 1 */ DOT(KIND, row, rb, 4, w->cols, a, t0, 1, out);          \
                else if (R == 2) /* n = 2 */ DOT(KIND, row, rb, 2, w->cols, a, t0, 2, out);     \
                else switch (T) {                                                               \
                    case 1: DOT(KIND, row, rb, 1, w->cols, a, t0, 1, out); break;               \
                    case 2: DOT(KIND, row, rb, 1, w->cols, a, t0, 2, out); break;               \
                    case 3: DOT(KIND, row, rb, 1, w->cols, a, t0, 3, out); break;               \
                    default: DOT(KIND, row, rb, 1, w->cols, a, t0, 4, out); break;              \
                    }                                                                           \
                for (int i = 0; i < R; i++)                                                     \
                    for (int t = 0; t < T; t++) {                                               \
                        float *o = y + (t0 + t) * ldy + r + i;                                  \
                        *o = accumulate ? *o + out[i * T + t] : out[i * T + t];                 \
                    }                                                                           \
            }                                                                                   \
            r += R;                                                                             \
        }                                                                                       \
    }

#endif /* FFN_KERNELS_QGEMM_AVX2_H */
