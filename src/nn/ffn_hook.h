/* ffn_hook.h -- the hook inside an FFN layer between its epilogue and its
 * down projection, used by the model's taps (src/nn/tap.c).  Not part of
 * the public layer API (include/ffn/layer.h); not installed.
 *
 * Letters: n rows of the call, F the layer's width, P = 2F (gated: [g | u])
 * or F (dense: [u]), K experts per token.
 *
 * A hook sees two buffers of one ffn_layer_forward call:
 *   FFN_HOOK_GU  gu (n, P): the input projections with their biases, gate
 *                pre-activations in columns [0, F) and up in [F, 2F)
 *                (gated), or up in [0, F) (dense);
 *   FFN_HOOK_H   h (n, F): the product m = act(g) ⊙ u (dense act(u)), the
 *                input of down_proj.
 * With `writes` 0 the layer runs its usual path (the fused decode kernel
 * for n <= ffn_stream_max_n) and calls the hook on both buffers after the
 * call: capture only, the result is bitwise that of ffn_layer_forward.
 * With `writes` 1 the layer runs unfused -- input projection, hook on gu,
 * epilogue, hook on h, down projection -- so that what the hook writes is
 * what the rest of the layer sees; on the same kernels as the usual path,
 * so a hook that writes nothing leaves the result bitwise unchanged.
 *
 * rows describes the rows of the call: NULL for a layer's own FFN (row r
 * is token r); for a routed expert of a MoE layer, token row_slot[r] / k
 * (the slot index n·K + j) and the expert's index.  Experts may run side
 * by side on several threads: a hook must only touch the cells of its own
 * rows. */
#ifndef FFN_NN_FFN_HOOK_H
#define FFN_NN_FFN_HOOK_H

#include "base/common.h"
#include "ffn/layer.h"
#include "ffn/moe.h"

enum { FFN_HOOK_GU = 0, FFN_HOOK_H = 1 };

typedef struct ffn_hook_rows {
    int64_t expert;          /* routed expert index */
    const int32_t *row_slot; /* (n) slot n·K + j of each row */
    int64_t k;               /* K */
} ffn_hook_rows;

typedef struct ffn_neuron_hook {
    void (*fn)(void *user, int stage, float *buf, int64_t n, const ffn_hook_rows *rows);
    void *user;
    int writes; /* 1: the hook modifies gu or h (unfused path) */
} ffn_neuron_hook;

/* ffn_layer_forward with a hook (hook NULL: exactly ffn_layer_forward). */
ffn_status ffn_layer_forward_hooked(ffn_layer *layer, float *y, const float *x, int64_t n,
                                    float *saved, void *workspace, size_t workspace_bytes,
                                    const ffn_neuron_hook *hook, const ffn_hook_rows *rows);

/* ffn_moe_forward with a hook on every routed expert's call (the shared
 * experts are not hooked).  hook NULL: exactly ffn_moe_forward. */
ffn_status ffn_moe_forward_hooked(ffn_moe *moe, ffn_moe_outputs *out, const float *x, int64_t n,
                                  void *saved, void *workspace, size_t workspace_bytes,
                                  const ffn_neuron_hook *hook);

/* The routed expert e's layer object, or the Qwen2-style shared expert for
 * e = -2 (NULL when absent or out of range). */
ffn_layer *ffn_moe_expert_layer(ffn_moe *moe, int64_t e);

#endif /* FFN_NN_FFN_HOOK_H */
