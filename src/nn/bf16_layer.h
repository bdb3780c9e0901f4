/* bf16_layer.h -- the FFN layer's products at FFN_PRECISION_BF16
 * (include/ffn/layer.h): what ffn.c hands a bf16 layer's forward and
 * backward to.  Internal; not installed.
 *
 * Letters: N tokens, D hidden_size, F intermediate_size, P = 2F gated
 * ([g | u]) or F dense.
 *
 * The object holds the bf16 packs of the weights (made from the caller's
 * fp32 ones by ffn_bf16layer_set_weights: the refresh after an optimizer
 * step) and the oneDNN primitives per token count.  Forward and backward
 * take ffn.c's carved buffers gu (n, P) and h (n, F) (fp32) and the rest of
 * the workspace, from which they carve the bf16 copies of the products'
 * activation operands and oneDNN's scratchpad. */
#ifndef FFN_NN_BF16_LAYER_H
#define FFN_NN_BF16_LAYER_H

#include "base/common.h"
#include "ffn/layer.h"
#include "nn/ffn_hook.h"

typedef struct ffn_bf16layer ffn_bf16layer;

/* Fails with FFN_ERR_UNSUPPORTED when the machine has no bf16 products. */
ffn_status ffn_bf16layer_create(ffn_ctx *ctx, const ffn_layer_config *cfg, ffn_bf16layer **out);
void ffn_bf16layer_free(ffn_bf16layer *b); /* NULL is a no-op */

/* Pack the fp32 weights into bf16 (w_gate NULL when dense; biases fp32,
 * kept as pointers: b_in (P) = [b_gate; b_up] or b_up, NULL without). */
ffn_status ffn_bf16layer_set_weights(ffn_bf16layer *b, const float *w_gate, const float *w_up,
                                     const float *w_down, const float *b_in,
                                     const float *b_down);
/* Bytes of workspace beyond ffn.c's own (gu, h, its minimum scratch) for
 * up to max_n tokens; makes the primitives for max_n now. */
size_t ffn_bf16layer_workspace_extra(ffn_bf16layer *b, int64_t max_n);

/* gu (n, P) = x·W_inᵀ + b_in, h (n, F) = epilogue(gu), y (n, D) = h·W_downᵀ +
 * b_down, with a writing hook (or NULL) called on gu and on h. */
ffn_status ffn_bf16layer_forward(ffn_bf16layer *b, float *y, float *gu, float *h, const float *x,
                                 int64_t n, void *ws, size_t ws_bytes,
                                 const ffn_neuron_hook *writer, const ffn_hook_rows *rows);
/* Backward as ffn_layer_backward (gradients +=, NULL ones skipped); saved
 * is forward's gu, or NULL to recompute it into dgu (n, P); h (n, F) is a
 * buffer. */
ffn_status ffn_bf16layer_backward(ffn_bf16layer *b, float *dx, const ffn_layer_params *g,
                                  const float *dy, const float *x, int64_t n, const float *saved,
                                  float *dgu, float *h, void *ws, size_t ws_bytes);

#endif
