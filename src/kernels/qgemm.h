/* qgemm.h -- matrix products with low-precision weights.  Internal.
 *
 * A weight matrix W (rows, cols), y = W·x, stored row by row in one of the
 * ggml tensor types ffn computes with (the type table, src/kernels/types.c;
 * include/ffn/gguf.h gives the layouts).  A row is
 * ffn_ggml_row_size(type, cols) bytes; rows follow each other without
 * padding, so the bytes can be a tensor of a memory-mapped GGUF file (any
 * alignment).  cols must be a multiple of the type's block size.
 *
 * ffn_qgemm is the one entry point the layers call; it picks a kernel from
 * the CPU level and n.  ffn_qgemm_ref is the scalar oracle: it decodes a
 * row with ggml's formulas (ffn_ggml_dequantize_row) and accumulates the
 * dot product in double, then rounds to float.  Every faster kernel is
 * tested against it with a stated tolerance. */
#ifndef FFN_QGEMM_H
#define FFN_QGEMM_H

#include "base/common.h"
#include "base/dtype.h"
#include "ffn/layer.h" /* ffn_act */

#include <stddef.h>
#include <stdint.h>

typedef struct ffn_qweight {
    ffn_ggml_type type;
    int64_t rows, cols;   /* W (rows, cols) */
    size_t row_bytes;     /* ffn_ggml_row_size(type, cols) */
    const uint8_t *data;  /* rows · row_bytes bytes, any alignment; not owned */
    void *packed;         /* a kernel's repacked copy, or NULL; owned by the weight */
} ffn_qweight;

/* Fill w for the bytes at data (not copied).  FFN_ERR_INVALID_ARG when
 * cols is not a multiple of the block size, FFN_ERR_UNSUPPORTED for a type
 * ffn does not compute with. */
ffn_status ffn_qweight_init(ffn_qweight *w, ffn_ggml_type type, int64_t rows, int64_t cols,
                            const void *data);
void ffn_qweight_release(ffn_qweight *w); /* frees w->packed only */
size_t ffn_qweight_bytes(const ffn_qweight *w); /* rows · row_bytes */

/* y (n, rows), row stride ldy, = [y +] x (n, cols), row stride ldx, · Wᵀ.
 * accumulate 0: y = x·Wᵀ;  1: y += x·Wᵀ. */
ffn_status ffn_qgemm(const ffn_ctx *ctx, const ffn_qweight *w, const float *x, int64_t ldx,
                     int64_t n, float *y, int64_t ldy, int accumulate);
void ffn_qgemm_ref(const ffn_qweight *w, const float *x, int64_t ldx, int64_t n, float *y,
                   int64_t ldy, int accumulate);

/* ---- additions: caller workspace, a chosen level ----------------------------
 * ffn_qgemm prepares the activations (qgemm_impl.h) in a buffer of the
 * calling thread, grown on the first call that needs more and reused after,
 * so steady-state calls do not allocate.  ffn_qgemm_ws takes the caller's
 * buffer instead: ffn_qgemm_workspace_size(w, n) bytes (0 for f32/f16 and
 * at the scalar level; the size stops growing past n = 64, the token tile).
 * ffn_qgemm_at_level runs the kernels of one SIMD level (FFN_SIMD_SCALAR,
 * _AVX2, _AVX512 of kernels.h), no higher than ffn_simd(): for the tests
 * and `ffn bench qgemm`.  The AVX-512 level uses VNNI for the integer
 * formats and AVX512_BF16 for bf16 when the CPU has them, else the AVX2
 * kernel of that format. */
size_t ffn_qgemm_workspace_size(const ffn_qweight *w, int64_t n);
ffn_status ffn_qgemm_ws(const ffn_ctx *ctx, const ffn_qweight *w, const float *x, int64_t ldx,
                        int64_t n, float *y, int64_t ldy, int accumulate, void *ws,
                        size_t ws_bytes);
ffn_status ffn_qgemm_at_level(const ffn_ctx *ctx, int level, const ffn_qweight *w, const float *x,
                              int64_t ldx, int64_t n, float *y, int64_t ldy, int accumulate);


/* Large n: a bf16 copy of the weight (rows · cols · 2 bytes, plus two
 * tiles of x and y) and oneDNN's bf16 matmul, kept in w->packed and freed
 * by ffn_qweight_release.  ffn_qgemm then uses it from
 * ffn_qgemm_batch_min_n(w->type) rows of x on (a measured crossover; x and
 * W are rounded to bf16 there, accumulation in fp32).  Does nothing (and
 * succeeds) where it would not pay: f32 weights, a CPU without AVX512_BF16
 * or FFN_SIMD below avx512, or a weight already packed.  Allocates; the
 * runs do not. */
ffn_status ffn_qweight_pack_batch(ffn_qweight *w);
int64_t ffn_qgemm_batch_min_n(ffn_ggml_type type); /* INT64_MAX: never */

/* Prompt sizes without a copy: from ffn_qgemm_panel_min_n(w->type) rows of
 * x on (a measured crossover; INT64_MAX where the CPU lacks AVX512_BF16,
 * and for f32 and f16 weights, which bf16 would round) ffn_qgemm decodes the weight into bf16 panels of 32
 * rows inside the call, 512 tokens at a time, and multiplies them with x
 * rounded to bf16 (fp32 accumulation).  ffn_qgemm_panel runs that path at
 * any n (FFN_ERR_UNSUPPORTED where it does not exist).  Its workspace is
 * the calling thread's (about 2·cols bytes per token of a 512-token tile
 * plus 64·cols per thread), grown once and reused.  Within the path a
 * token's result does not depend on n or the thread count; it is not the
 * row kernels' result (x and W are rounded to bf16 instead of x to int8). */
int64_t ffn_qgemm_panel_min_n(ffn_ggml_type type);
ffn_status ffn_qgemm_panel(const ffn_ctx *ctx, const ffn_qweight *w, const float *x, int64_t ldx,
                           int64_t n, float *y, int64_t ldy, int accumulate);

/* The same on CPUs without the bf16 panels (AVX2, or AVX-512 without
 * AVX512_BF16, at FFN_SIMD avx2 or above): from ffn_qgemm_panel_f32_min_n
 * rows of x on (a measured crossover, INT64_MAX where the bf16 panels run
 * instead, below AVX2, or for a type without one) ffn_qgemm decodes the
 * weight with the type table's decoder into fp32 panels of 16 rows × 256
 * columns inside the call, 256 tokens at a time, and multiplies them with
 * x in fp32 by FMA.  ffn_qgemm_panel_f32 runs that path at any n on an
 * AVX2 CPU (FFN_ERR_UNSUPPORTED below AVX2).  Workspace: 32 KiB per thread
 * of the calling thread's own, grown once and reused.  A token's result
 * does not depend on n or the thread count; it is the dequantized weight's
 * product in fp32 (x is not quantized), not the row kernels' result. */
int64_t ffn_qgemm_panel_f32_min_n(ffn_ggml_type type);
ffn_status ffn_qgemm_panel_f32(const ffn_ctx *ctx, const ffn_qweight *w, const float *x,
                               int64_t ldx, int64_t n, float *y, int64_t ldy, int accumulate);

/* The int8 prompt path of the same CPUs (qgemm_int8_avx2.c): from
 * ffn_qgemm_int8_min_n rows of x on (a measured crossover; INT64_MAX where
 * the bf16 panels run, below AVX2, or for a type without it; taken before
 * the fp32 panels) ffn_qgemm quantizes every token once to the row
 * kernels' int8 blocks and multiplies them with the weight's blocks
 * unpacked to int8 codes inside the call (vpmaddubsw, 4 rows × 3 tokens at
 * a time).  ffn_qgemm_int8 runs that path at any n on an AVX2 CPU for the
 * types it has (FFN_ERR_UNSUPPORTED otherwise).  Workspace: about cols +
 * cols/4 bytes per token and 36 KiB per thread, the calling thread's own.
 * A token's result does not depend on n or the thread count; it is the
 * product with int8 activations, as the row kernels' (to fp32 rounding,
 * not bitwise). */
int64_t ffn_qgemm_int8_min_n(ffn_ggml_type type);
ffn_status ffn_qgemm_int8(const ffn_ctx *ctx, const ffn_qweight *w, const float *x, int64_t ldx,
                          int64_t n, float *y, int64_t ldy, int accumulate);

/* The gated input projection of the decode path in one pass:
 *   g = x·W_gateᵀ, u = x·W_upᵀ (n, rows),  h = act(g) ⊙ u  (row stride ldh)
 * The activations are prepared once for both weights, and each block of
 * rows applies the epilogue while its g and u are in cache.  g_out and
 * u_out (row stride ldh) receive the pre-activations when not NULL (what
 * the taps read).  gate and up must have the same shape; their types may
 * differ.  Each output equals what ffn_qgemm gives for it (the same
 * kernels; the packed large-n path is not used here).  From
 * ffn_qgemm_panel_min_n of either type on, both products run as ffn_qgemm
 * runs them, then the epilogue; without g_out and u_out they go through a
 * buffer of the calling thread (2 · n · rows floats, kept for the next
 * call). */
ffn_status ffn_qgemm_glu(const ffn_ctx *ctx, ffn_act act, const ffn_qweight *gate,
                         const ffn_qweight *up, const float *x, int64_t ldx, int64_t n, float *h,
                         int64_t ldh, float *g_out, float *u_out);

#endif /* FFN_QGEMM_H */
