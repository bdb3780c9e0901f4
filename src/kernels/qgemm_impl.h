/* qgemm_impl.h -- what the qgemm kernels share: the activations of one
 * call, prepared once for the weight type (quantized to int8 for the
 * integer formats, rounded to bf16 for bf16 weights), and the per-level
 * row kernels qgemm.c dispatches to.  Internal to src/kernels/qgemm*.c.
 *
 * Activation layouts (n tokens, cols columns; token t of an array starts
 * t · its stride in, a stride padded to an odd number of 64-byte lines so
 * that the tokens' rows fall into different L1 sets -- with strides of a
 * multiple of 4 KiB, 8 tokens' streams would share one set and evict each
 * other):
 *   q8_0, q4_0  blocks of 32: q int8 (cols), d float (cols/32) with
 *               x ≈ d·q, and c int32 (cols/4): lane i holds −K·Σ q[4i..4i+3]
 *               with K = 128 (q8_0: weights are offset to unsigned by +128)
 *               or 8 (q4_0: nibbles are q + 8).  A kernel starts each
 *               4-element dot product from c, so the offset cancels exactly
 *               in integers.  dl float (cols/4): lane i holds d of its
 *               block (d[i/8]), so a vector of lanes loads its scales.
 *   q4_0 (and q4_1, q5_0, q5_1, iq4_nl, which use c scaled or, for
 *               their mins, as −8 · the block's Σ) at the AVX-512 VNNI
 *               level: blocks in groups of four (the last
 *               group padded with zero blocks), 128 q int8 per group: the
 *               first 16 values of blocks 0..3, then their last 16 (the
 *               order of a group's low and high nibbles); per group 16
 *               lanes of c (lane 4i + j: −8 · the sum of values 4j..4j+3
 *               and 16+4j..16+4j+3 of block i) and of dl (d of block i);
 *               d float (cols/32) as above.
 *   q4_K, q6_K  blocks of 256 (ggml's q8_K): q int8, d float (cols/256),
 *               bs int16 (cols/16): the sum of each 16 q.
 *   bf16        xb (cols) the activations rounded to bf16 (AVX-512 BF16).
 *   f32, f16    nothing: the kernels read x itself.
 * Activation quantization: d = amax/127 per block, q = round(x / d) to
 * nearest, ties to even, so |x − d·q| <= d/2 per element. */
#ifndef FFN_QGEMM_IMPL_H
#define FFN_QGEMM_IMPL_H

#include "kernels/qgemm.h"
#include "base/dtype.h" /* fp16 / bf16 conversions */

typedef struct qg_acts {
    int64_t n, cols;
    const float *x; /* the caller's activations, row stride ldx */
    int64_t ldx;
    int8_t *q;
    float *d;
    int32_t *c;
    float *dl;
    int16_t *bs;
    uint16_t *xb;
    int64_t qs, ds, cs, bss, xbs; /* per-token strides in elements: q; d; c and dl; bs; xb */
} qg_acts;

/* y[t·ldy + r] (+)= W[r] · x[t] for r0 <= r < r1, t < a->n.  The scalar
 * level's one kernel handles every type ffn computes with (it decodes with
 * the type table's decoder); the SIMD levels have one kernel per type,
 * listed in the type table (src/kernels/types.c), which also says what
 * each needs beyond its level.  Each output is one dot product in a fixed
 * order that depends only on cols and the level, never on n, r0 or the
 * thread count. */
typedef void (*qg_rows_fn)(const ffn_qweight *w, const qg_acts *a, int64_t r0, int64_t r1,
                           float *y, int64_t ldy, int accumulate);
#define QG_ROWS_DECL(name)                                                                   \
    void name(const ffn_qweight *w, const qg_acts *a, int64_t r0, int64_t r1, float *y,      \
              int64_t ldy, int accumulate)
QG_ROWS_DECL(ffn_qg_rows_scalar);
QG_ROWS_DECL(ffn_qg_rows_avx2_q8_0);
QG_ROWS_DECL(ffn_qg_rows_avx2_q4_0);
QG_ROWS_DECL(ffn_qg_rows_avx2_q4_K);
QG_ROWS_DECL(ffn_qg_rows_avx2_q6_K);
QG_ROWS_DECL(ffn_qg_rows_avx2_bf16);
QG_ROWS_DECL(ffn_qg_rows_avx2_f16);
QG_ROWS_DECL(ffn_qg_rows_avx2_f32);
QG_ROWS_DECL(ffn_qg_rows_avx512_q8_0);
QG_ROWS_DECL(ffn_qg_rows_avx512_q4_0);
QG_ROWS_DECL(ffn_qg_rows_avx512_q4_K);
QG_ROWS_DECL(ffn_qg_rows_avx512_q6_K);
QG_ROWS_DECL(ffn_qg_rows_avx512_bf16);
QG_ROWS_DECL(ffn_qg_rows_avx512_f16);
QG_ROWS_DECL(ffn_qg_rows_avx512_f32);
/* q4_1, q5_0, q5_1, iq4_nl (qgemm_legacy_avx2.c) */
QG_ROWS_DECL(ffn_qg_rows_avx2_q4_1);
QG_ROWS_DECL(ffn_qg_rows_avx2_q5_0);
QG_ROWS_DECL(ffn_qg_rows_avx2_q5_1);
QG_ROWS_DECL(ffn_qg_rows_avx2_iq4_nl);
/* the same four at the AVX-512 VNNI level (qgemm_avx512.c, QG_ACT_Q4X) */
QG_ROWS_DECL(ffn_qg_rows_avx512_q4_1);
QG_ROWS_DECL(ffn_qg_rows_avx512_q5_0);
QG_ROWS_DECL(ffn_qg_rows_avx512_q5_1);
QG_ROWS_DECL(ffn_qg_rows_avx512_iq4_nl);

/* ffn_qg_f16_tab[h] = the fp16 value h as a float (exact), for the AVX2
 * kernels' block scales; filled before any row kernel runs (qgemm.c). */
extern float ffn_qg_f16_tab[65536];

/* One block of len (a multiple of 32) activations to int8 (the rule at the
 * top), returning d; bit for bit qgemm.c's scalar version.  AVX-512 only. */
float ffn_qg_quant_block_avx512(const float *x, int len, int8_t *q);
float ffn_qg_quant_block_avx2(const float *x, int len, int8_t *q); /* the same, AVX2 */

/* A token's QG_ACT_Q32 arrays for q8_0 (grouped 0) or its QG_ACT_Q4X
 * arrays (grouped 1), the scalar preparation's values.  Needs AVX-512
 * VNNI. */
void ffn_qg_prepare_avx512(const float *x, int64_t cols, int grouped, int8_t *q, float *d,
                           int32_t *c, float *dl);

/* The activation layouts (the table says which a kernel wants). */
enum { QG_ACT_NONE = 0, QG_ACT_Q32 = 1, QG_ACT_Q256 = 2, QG_ACT_BF16 = 3, QG_ACT_Q4X = 4 };
/* Bytes of prepared activations per token for a layout (QG_ACT_*). */
size_t ffn_qgemm_token_bytes(int kind, int64_t cols);

/* 1 when this CPU has AVX-512 VNNI (the int8 kernels) / AVX-512 BF16. */
int ffn_qg_have_vnni(void);
int ffn_qg_have_bf16(void);

/* The prompt-size path (qgemm_panel_avx512.c; AVX512_BF16 only): the
 * weight decoded into bf16 panels of 32 rows inside the call, the tokens
 * rounded to bf16, a register-blocked vdpbf16ps product.  ws holds
 * ffn_qg_panel_ws_bytes(w, n, threads) bytes for the context's thread
 * count (the rounded tokens of one tile and one panel per thread); the
 * weight must be a type other than f32, with w->rows, w->cols, n > 0. */
size_t ffn_qg_panel_ws_bytes(const ffn_qweight *w, int64_t n, int threads);
void ffn_qg_panel_run(const ffn_qweight *w, const float *x, int64_t ldx, int64_t n, float *y,
                      int64_t ldy, int accumulate, void *ws);

/* The prompt-size path of AVX2 machines (qgemm_panel_avx2.c): the weight
 * decoded by the type table's decoder into fp32 panels of 16 rows × 256
 * columns inside the call, an FMA product with x as it is.  ws holds
 * ffn_qg_panel_avx2_ws_bytes(threads) bytes for the context's thread count
 * (one decode buffer and one panel per thread); the weight's type must
 * decode, with w->rows, w->cols, n > 0. */
size_t ffn_qg_panel_avx2_ws_bytes(int threads);
void ffn_qg_panel_avx2_run(const ffn_qweight *w, const float *x, int64_t ldx, int64_t n, float *y,
                           int64_t ldy, int accumulate, void *ws);

#endif /* FFN_QGEMM_IMPL_H */
