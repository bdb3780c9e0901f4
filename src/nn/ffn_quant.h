/* ffn_quant.h -- the FFN and MoE layers over low-precision weights (entry
 * points in ffn.c and moe.c; the products are the ggml kind of
 * nn/ffn_prod.h).  Internal; not installed.  The public face is
 * include/ffn/quant.h, at the model.
 *
 * Letters: N tokens, D hidden, F intermediate, P = 2F (gated) or F.
 *
 * A layer given ffn_layer_set_qweights computes every product with
 * ffn_qgemm (src/kernels/qgemm.h) over the three weights as given (each in
 * any type ffn_qgemm takes, f32 included: the type of each projection
 * picks its kernels from the type table), keeps no fp32 copy and packs
 * nothing.  Forward only: ffn_layer_backward on it fails with
 * FFN_ERR_UNSUPPORTED.  ffn_layer_set_weights turns it back into an fp32
 * layer.  One path at every n: gate and up as two products into [g | u]
 * (one ffn_qgemm call each, activations quantized once per call), the
 * epilogue over the rows, then down.
 * It leaves gu (n, P) and h (n, F) intact, so the taps' hook
 * (src/nn/ffn_hook.h) sees them as on the fp32 layer; a writing hook runs
 * the unfused batch path. */
#ifndef FFN_NN_FFN_QUANT_H
#define FFN_NN_FFN_QUANT_H

#include "base/common.h"
#include "ffn/layer.h"
#include "ffn/moe.h"
#include "kernels/qgemm.h"
#include "nn/ffn_hook.h"

/* The weights of one FFN: gate unused (rows 0) when dense; biases as in
 * ffn_layer_params (NULL without bias). */
typedef struct ffn_layer_qweights {
    ffn_qweight gate, up, down; /* (F, D), (F, D), (D, F); `packed` not used */
    const float *gate_b, *up_b, *down_b;
} ffn_layer_qweights;

/* In ffn.c: point layer l at w (see above).  Frees the packed fp32 copies. */
ffn_status ffn_layer_set_qweights(ffn_layer *l, const ffn_layer_qweights *w);
/* 1 when the layer runs on ffn_layer_set_qweights's weights. */
int ffn_layer_is_quantized(const ffn_layer *l);

/* The low-precision weights of a MoE layer: NULL entries keep fp32 (the
 * pointers of ffn_moe_params).  experts has E entries (or is NULL). */
typedef struct ffn_moe_qweights {
    const ffn_layer_qweights *const *experts; /* (E) */
    const ffn_layer_qweights *shared;         /* Qwen2-style shared expert */
    const ffn_qweight *router;                /* (E, D) */
    const ffn_qweight *shared_gate;           /* (1, D) */
} ffn_moe_qweights;

/* In moe.c: ffn_moe_set_weights, with the experts, the router and the
 * shared expert given by q where q has them.  q NULL: ffn_moe_set_weights. */
ffn_status ffn_moe_set_qweights(ffn_moe *m, const ffn_moe_params *w, const ffn_moe_qweights *q);

#endif /* FFN_NN_FFN_QUANT_H */
