/* ffn/tap.h -- taps: named points of the model's one forward, to read
 * (capture) and to write (intervene) while it runs.
 *
 * Part of the public API; include <ffn.h>, not this file.
 *
 * Letters:  B batch, T positions of the call, N = B·T rows, D hidden_size,
 *           F intermediate_size, E experts, Fe an expert's width, K experts
 *           per token, H attention heads, S = pos0 + T key positions,
 *           W a layer's neuron width (F, or E·Fe in a MoE layer), L layers.
 *
 * ---- The points of block l ------------------------------------------------
 *   name                     shape     what
 *   layers.l.resid_pre       (N, D)    the residual stream into the block
 *   layers.l.attn_out        (N, D)    attention after o_proj
 *   layers.l.resid_mid       (N, D)    resid_pre + attn_out
 *   layers.l.mlp_in          (N, D)    post_attention_layernorm(resid_mid)
 *   layers.l.gate_pre        (N, W)    gate_proj·x + b (dense: up_proj·x + b)
 *   layers.l.up              (N, W)    up_proj·x + b
 *   layers.l.m               (N, W)    act(gate_pre) ⊙ up (dense act(up)):
 *                                      the input of down_proj
 *   layers.l.mlp_out         (N, D)    the FFN's output as it is added
 *   layers.l.resid_post      (N, D)    resid_mid + mlp_out
 *   layers.l.router_logits   (N, E)    MoE layers: x·Wrᵀ
 *   layers.l.expert_ids      (N, K)    MoE layers: the chosen experts (int32)
 *   layers.l.expert_weights  (N, K)    MoE layers: their router weights
 *   layers.l.attn_probs      (N, H·S)  softmax rows: row (b, t), head h,
 *                                      key s at h·S + s (0 past the causal
 *                                      limit pos0 + t)
 * In a MoE layer gate_pre/up/m cover the routed experts: neuron (e, i) is
 * column e·Fe + i (ffn_inspect_layer_width's numbering), unweighted by the
 * router; a token's row holds zeros for the experts it did not go to.  The
 * shared expert is not tapped.  Layers without an FFN (mlp_type none) have
 * resid_pre, attn_out, resid_mid, resid_post and attn_probs only.
 *
 * ---- Capture ---------------------------------------------------------------
 * ffn_model_tap_select(model, "layers.3.m") keeps that point from then on:
 * each later forward (ffn_model_logits, ffn_model_eval_loss,
 * ffn_model_prefill, ffn_model_step) overwrites it with the rows of the
 * call, (b, t) order; ffn_model_tap_read gives them with B, T and the
 * position of the call's first token (pos0, nonzero on the KV-cache path).
 * A prefill longer than max_batch·max_seq runs in chunks; the tap holds the
 * last chunk.  A capture records the value the rest of the forward used,
 * after the interventions below.
 *
 * ---- Interventions ---------------------------------------------------------
 * A patch changes a point before the rest of the forward reads it, at one
 * absolute position (pos0 + t, in every sequence of the batch) or at every
 * position (-1), in the order the patches were added:
 *   ffn_model_tap_patch         one index: SET to value (zero = SET 0),
 *                               SCALE by value, or ADD value;
 *   ffn_model_tap_patch_vector  a whole row of the point's width: SET
 *                               (replace a residual vector) or ADD (steer).
 * Patchable points: everything but router_logits, expert_ids,
 * expert_weights and attn_probs (read-only).  Patching gate_pre or up
 * changes m through the activation; patching m changes mlp_out.
 *
 * ---- Cost and memory --------------------------------------------------------
 * A selected point allocates max_batch·max_seq·width floats when it is
 * selected (attn_probs: twice max_batch·max_seq·H·max_seq), never in the
 * forward; patches hold their vectors.  With nothing selected and nothing patched a forward is the
 * untapped one, bit for bit and at the same speed.  Capturing copies the
 * rows once.  Capturing gate_pre/up/m keeps the layer's usual (fused)
 * kernels; patching them makes that layer run unfused (input projection,
 * patch, epilogue, patch, down projection), and a decode-sized call
 * (N <= 4) then computes its down projection with the general matrix
 * product: equal to the untapped forward to float rounding.
 * ffn_model_forward_backward does not run taps (ffn_model_forward_backward_taps
 * below does).  ffn_model_reserve drops the captured rows (the buffers grow
 * with the model).
 *
 * ---- Errors -----------------------------------------------------------------
 * A bad name, a layer out of range, a point the layer does not have, an
 * index >= the point's width, a position outside [-1, max_seq) or a vector
 * of the wrong length is FFN_ERR_INVALID_ARG with a message naming the tap
 * and what is accepted, e.g.
 *   tap 'layers.9.m': layer 9 out of range (model has 4 layers: 0..3)
 * and the model is left as it was.
 *
 * Example (zero neuron 17 of layer 2, read what layer 3's FFN saw):
 *     ffn_model_tap_select(model, "layers.3.mlp_in");
 *     ffn_model_tap_patch(model, "layers.2.m", -1, 17, FFN_TAP_OP_SET, 0.0f);
 *     ffn_model_logits(model, logits, tokens, B, T);
 *     ffn_tap_view v;  ffn_model_tap_read(model, "layers.3.mlp_in", &v);
 *     ... v.data (v.rows, v.cols) floats ...
 *     ffn_model_taps_clear(model);
 */
#ifndef FFN_TAP_H
#define FFN_TAP_H
#pragma GCC visibility push(default)

#include "core.h"
#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ffn_tap_point {
    FFN_TAP_RESID_PRE = 0,
    FFN_TAP_ATTN_OUT,
    FFN_TAP_RESID_MID,
    FFN_TAP_MLP_IN,
    FFN_TAP_GATE_PRE,
    FFN_TAP_UP,
    FFN_TAP_M,
    FFN_TAP_MLP_OUT,
    FFN_TAP_RESID_POST,
    FFN_TAP_ROUTER_LOGITS,
    FFN_TAP_EXPERT_IDS,
    FFN_TAP_EXPERT_WEIGHTS,
    FFN_TAP_ATTN_PROBS,
    FFN_TAP_N_POINTS
} ffn_tap_point;

/* "resid_pre", "attn_out", ... ; NULL for a value out of range. */
const char *ffn_tap_point_name(ffn_tap_point point);
/* Writes "layers.{layer}.{point}" into buf (size bytes); returns buf. */
char *ffn_tap_name(char *buf, size_t size, int64_t layer, ffn_tap_point point);

/* Resolve a name against a model: layer, point and the point's width (its
 * columns; attn_probs: H·max_seq).  Any output may be NULL. */
ffn_status ffn_model_tap_lookup(const ffn_model *model, const char *name, int64_t *layer,
                                ffn_tap_point *point, int64_t *width);

/* Keep a point from the next forward on (allocates; selecting twice is
 * one selection). */
ffn_status ffn_model_tap_select(ffn_model *model, const char *name);

typedef struct ffn_tap_view {
    const void *data;  /* (rows, cols): float, int32_t for expert_ids */
    int is_int32;      /* 1 for expert_ids */
    int64_t rows;      /* N = B·T of the last forward */
    int64_t cols;      /* the width (attn_probs: H·S of that call) */
    int64_t B, T;      /* of that call */
    int64_t pos0;      /* position of its first token (KV-cache path), else 0 */
    int64_t layer;
    ffn_tap_point point;
} ffn_tap_view;

/* The rows of a selected point from the last forward.  The data belongs
 * to the model and stays valid until the next forward, reserve or clear.
 * Errors when the point is not selected or no forward ran since. */
ffn_status ffn_model_tap_read(const ffn_model *model, const char *name, ffn_tap_view *out);

typedef enum ffn_tap_op {
    FFN_TAP_OP_SET = 0, /* x = value */
    FFN_TAP_OP_SCALE,   /* x = x · value */
    FFN_TAP_OP_ADD      /* x = x + value */
} ffn_tap_op;

/* Patch index `index` of the point at `position` (-1: every position). */
ffn_status ffn_model_tap_patch(ffn_model *model, const char *name, int64_t position,
                               int64_t index, ffn_tap_op op, float value);
/* Patch the whole row: values (n) with n the point's width; SET replaces,
 * ADD adds (steering), SCALE multiplies elementwise.  values are copied. */
ffn_status ffn_model_tap_patch_vector(ffn_model *model, const char *name, int64_t position,
                                      ffn_tap_op op, const float *values, int64_t n);

/* Forget every selection and patch (frees their memory).  Afterwards the
 * forward is the untapped one again. */
void ffn_model_taps_clear(ffn_model *model);

/* ---- Gradients at a point -----------------------------------------------------
 * ffn_model_forward_backward_taps is the training forward with the taps
 * honoured, a loss of the caller's, and backward:
 *   - the forward runs the ADD patches (one index or a whole row) of the
 *     residual-width points resid_pre, attn_out, resid_mid, mlp_in,
 *     mlp_out, resid_post, and captures those points; any other selection
 *     or patch (SET, SCALE, a neuron point, routing, attn_probs) is
 *     FFN_ERR_INVALID_ARG naming it, because backward would not see it;
 *   - the head's logits go to `fn` in chunks of rows (r0, rows), (rows, V)
 *     row-major in (b, t) order; fn overwrites them, in place, with
 *     d loss / d logits, adds the chunk's loss to *loss and returns 0
 *     (non-zero stops the call: FFN_ERR_INVALID_ARG naming the value);
 *   - backward accumulates (+=) d loss / d param into ffn_model_grads() (MoE
 *     load-balancing and z losses are not part of this loss) and writes the
 *     gradient of every point selected with ffn_model_tap_select_grad.
 * Because an ADD patch leaves the Jacobian unchanged, the gradient at a
 * point is d loss / d (the vector added there): row (b, t) of
 * layers.l.mlp_out is d loss / d delta for a delta added at position t of
 * sequence b (summed over b when the patch applies to every sequence).
 * d mlp_out = d resid_post and d attn_out = d resid_mid (a sum's two terms
 * share their gradient).  The model must be a training model; gradients
 * are (N, D) floats, allocated when selected.  Every sequence starts at
 * position 0 (as in ffn_model_forward_backward). */
typedef int (*ffn_logits_grad_fn)(void *user, int64_t r0, int64_t rows, int64_t V,
                                  float *logits, double *loss);

ffn_status ffn_model_forward_backward_taps(ffn_model *model, const int32_t *tokens, int64_t B,
                                           int64_t T, ffn_logits_grad_fn fn, void *user,
                                           double *loss);

/* Keep d loss / d point from the next ffn_model_forward_backward_taps on
 * (the six residual-width points above). */
ffn_status ffn_model_tap_select_grad(ffn_model *model, const char *name);
/* The gradient rows (N, D) of the last ffn_model_forward_backward_taps. */
ffn_status ffn_model_tap_read_grad(const ffn_model *model, const char *name, ffn_tap_view *out);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif /* FFN_TAP_H */
