/* ffn_prod.h -- the matrix products of one projection (a Linear's weight),
 * whose number type picks the back-end.  Internal; not installed.
 *
 * A projection is W (rows, cols), given as one or two blocks of rows
 * stacked (the FFN's W_in = [W_gate; W_up] is one projection of two
 * parts, its W_down one of one part).  Its products:
 *   forward    y (n, rows) = x (n, cols) · Wᵀ + b     (every kind)
 *   backward   dx (n, cols) = dy (n, rows) · W         (fp32, bf16)
 *   wgrad      dW_part += dy_partᵀ · x                 (fp32, bf16)
 * The kind is the number type the weight is held in:
 *   FFN_PROD_FP32  fp32 masters: streaming kernels (gemv.c) for small n,
 *                  oneDNN matmul over packs of W made here (matmul.c),
 *                  ffn_wgrad / sgemm for dW, ffn_gemm where no primitive;
 *   FFN_PROD_BF16  fp32 masters computed in bf16 (FFN_PRECISION_BF16): the
 *                  bf16 copies and packs made here, oneDNN's bf16 matmul
 *                  for all three products (needs AVX512_BF16);
 *   FFN_PROD_GGML  any type ffn computes with (each part its own type,
 *                  f32 included) through ffn_qgemm, whose kernels the type
 *                  table (src/kernels/types.c) picks by type, n and CPU;
 *                  forward only: backward and wgrad are refused
 *                  (FFN_ERR_UNSUPPORTED, naming the type).
 * A projection holds no layer: the FFN layer (ffn.c) owns two and runs
 * its one algorithm over them, the MoE layer (moe.c) runs its experts as
 * such layers.
 *
 * Memory: the fp32 packs are 1x the weight bytes per direction (forward's
 * at set, backward's at the first backward); bf16's plain copy and packs
 * 0.5x each.  The workspace a call gets (ws, ws_bytes) holds the bf16
 * operands and oneDNN's scratchpad; ffn_prod_workspace says how much. */
#ifndef FFN_NN_FFN_PROD_H
#define FFN_NN_FFN_PROD_H

#include "base/common.h"
#include "kernels/kernels.h"
#include "kernels/qgemm.h"

typedef enum ffn_prod_kind { FFN_PROD_FP32, FFN_PROD_BF16, FFN_PROD_GGML } ffn_prod_kind;

/* Which streaming kernel of gemv.c takes a small-n fp32 forward: the
 * layer's input projection or its down projection (they are blocked for
 * those shapes). */
typedef enum ffn_prod_role { FFN_PROD_IN, FFN_PROD_DOWN } ffn_prod_role;

typedef struct ffn_prod ffn_prod;

/* An empty projection of (rows, cols) in parts of rows / parts rows each
 * (parts 1 or 2), of kind FFN_PROD_FP32 or FFN_PROD_BF16 until weights say
 * otherwise (the workspace it asks for before weights are set is that
 * kind's). */
ffn_status ffn_prod_create(ffn_ctx *ctx, ffn_prod_role role, ffn_prod_kind kind, int parts,
                           int64_t rows, int64_t cols, ffn_prod **out);
void ffn_prod_free(ffn_prod *p); /* NULL is a no-op */

/* Hold fp32 masters w[0..parts) (rows/parts × cols each, not copied),
 * computed in fp32 or (bf16 set) in bf16, and (re)pack them: the refresh
 * after an optimizer step rewrites the packs in place.  bias (rows) or
 * NULL is added by forward.  engine: the oneDNN engine the packs and
 * primitives are made on (borrowed; NULL: the fp32 kind runs on ffn_gemm,
 * the bf16 kind fails). */
ffn_status ffn_prod_set_f32(ffn_prod *p, ffn_mm_engine *engine, const float *const *w,
                            const float *bias, int bf16);
/* Hold low-precision weights q[0..parts) (copied, their bytes not). */
ffn_status ffn_prod_set_ggml(ffn_prod *p, const ffn_qweight *q, const float *bias);

ffn_prod_kind ffn_prod_kind_of(const ffn_prod *p);
/* "fp32", "bf16", or the ggml type's name (the table's; the first part's) */
const char *ffn_prod_type_name(const ffn_prod *p);
/* 1 when backward and wgrad run (fp32 and bf16 masters) */
int ffn_prod_trains(const ffn_prod *p);

/* Bytes of workspace a call with up to max_n rows needs; makes the
 * primitives for max_n now (backward's too after a backward). */
size_t ffn_prod_workspace(ffn_prod *p, int64_t max_n);

/* y (n, rows) at row stride ldy = x (n, cols) · Wᵀ (+ bias). */
ffn_status ffn_prod_forward(ffn_prod *p, float *y, int64_t ldy, const float *x, int64_t n,
                            void *ws, size_t ws_bytes);
/* dx (n, cols) = dy (n, rows), row stride ldy, · W. */
ffn_status ffn_prod_backward(ffn_prod *p, float *dx, const float *dy, int64_t ldy, int64_t n,
                             void *ws, size_t ws_bytes);
/* dW (rows/parts, cols) += dy_partᵀ · x: dy_part (n, rows/parts) at row
 * stride ldy, x (n, cols). */
ffn_status ffn_prod_wgrad(ffn_prod *p, float *dw, const float *dy, int64_t ldy, const float *x,
                          int64_t n, void *ws, size_t ws_bytes);

/* The fp32 kind's plain rows and packed view for the layer's fused
 * streaming kernel (gemv.c's ffn_decode_forward): w[part], and the view
 * of forward's pack or NULL. */
const float *ffn_prod_f32_part(const ffn_prod *p, int part);
const ffn_packed_view *ffn_prod_view(const ffn_prod *p);
/* Whether forward's pack has a view (AVX-512 and a panel layout), and
 * whether the streaming kernels use it: the layer turns it on only when
 * both its projections have one, as ffn_stream_max_n's table assumes. */
int ffn_prod_has_view(const ffn_prod *p);
void ffn_prod_use_view(ffn_prod *p, int on);

#endif /* FFN_NN_FFN_PROD_H */
