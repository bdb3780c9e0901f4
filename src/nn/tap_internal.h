/* tap_internal.h -- the taps' side of the model (src/nn/tap.c) as
 * model.c and the analysis floor use it.  The public half is
 * include/ffn/tap.h.  Not installed.
 *
 * Letters: B batch, T positions, N = B·T rows, D hidden, W a point's width,
 * H heads, S key positions, L layers. */
#ifndef FFN_NN_TAP_INTERNAL_H
#define FFN_NN_TAP_INTERNAL_H

#include "base/common.h"
#include "ffn/model.h"
#include "ffn/tap.h"
#include "nn/ffn_hook.h"

typedef struct ffn_taps ffn_taps;

/* ---- provided by model.c ------------------------------------------------ */

/* The model's taps slot (NULL while nothing was ever selected or patched). */
ffn_taps **ffn_model_taps_ref(ffn_model *model);
/* Rows the model's activations hold: max_batch·max_seq, and max_seq. */
void ffn_model_rows(const ffn_model *model, int64_t *max_n, int64_t *max_seq);

/* The neurons of one FFN of layer l through the model's own layer object
 * (expert -1: the layer's FFN; e >= 0 a routed expert; -2 the shared
 * expert) for rows x (n, D), run in chunks of at most max_batch·max_seq
 * rows: gu (n, P) and h (n, Fw) as the layer's hook sees them
 * (src/nn/ffn_hook.h); either may be NULL.  The rows go through the same
 * buffers as the forward's FFN input, so a chunk of the same rows as a
 * forward call gives that call's values bit for bit. */
ffn_status ffn_model_ffn_neurons(ffn_model *model, int64_t layer, int64_t expert,
                                 const float *x, int64_t n, float *gu, float *h);

/* The body of ffn_model_forward_backward_taps (src/nn/model_grad.c checks
 * the taps first): the training forward, the head in chunks handed to fn,
 * backward without the MoE loss terms. */
ffn_status ffn_model_backward_from_logits(ffn_model *model, const int32_t *tokens, int64_t B,
                                          int64_t T, ffn_logits_grad_fn fn, void *user,
                                          double *loss);

/* ---- provided by tap.c, called from the forward --------------------------
 * With t NULL or nothing selected or patched the forward calls none of
 * these (ffn_taps_begin returns 0). */
void ffn_taps_free(ffn_taps *t);
/* Start a forward of B·T rows at pos0; returns 1 when the taps take part
 * (a training forward: only inside ffn_taps_train_begin/_end). */
int ffn_taps_begin(ffn_taps *t, int64_t B, int64_t T, int64_t pos0, int training);
/* Patch, then capture, the (N, W) rows x of point p of layer l. */
void ffn_taps_point(ffn_taps *t, int64_t l, int p, float *x);
/* The capture buffer of a point the forward writes itself (router_logits,
 * expert_ids, expert_weights), or NULL when not selected. */
void *ffn_taps_out(ffn_taps *t, int64_t l, int p);
/* attn_probs: the (B, H, T, S) buffer for the attention, or NULL; after the
 * attention, ffn_taps_probs_done rearranges it into the tap's rows. */
float *ffn_taps_probs(ffn_taps *t, int64_t l);
void ffn_taps_probs_done(ffn_taps *t, int64_t l);
/* The hook of layer l's FFN, or NULL when no neuron point of l is tapped. */
const ffn_neuron_hook *ffn_taps_hook(ffn_taps *t, int64_t l);
/* The forward finished: the captures become readable. */
void ffn_taps_end(ffn_taps *t);
/* A training forward and backward with taps (ffn_model_forward_backward_taps):
 * begin checks that every selection and patch is one backward honours
 * (the error names the first that is not, with fn) and lets the taps run;
 * end stops them, making the gradients readable when ok. */
ffn_status ffn_taps_train_begin(ffn_taps *t, int64_t B, int64_t T, const char *fn);
void ffn_taps_train_end(ffn_taps *t, int ok);
/* Backward: d (N, D) is d loss / d point p of layer l (resid_pre, mlp_in,
 * resid_mid, resid_post; mlp_out and attn_out share the last two). */
void ffn_taps_grad(ffn_taps *t, int64_t l, int p, const float *d);
/* The model's rows changed (ffn_model_reserve): reallocate the buffers. */
ffn_status ffn_taps_resize(ffn_taps *t, int64_t max_n, int64_t max_seq);

/* ---- for the analysis floor ------------------------------------------------
 * Analysis selects its own taps without disturbing the caller's: stash
 * detaches the model's taps (returns them, maybe NULL), restore frees
 * whatever analysis attached and puts the stashed ones back. */
ffn_taps *ffn_model_taps_stash(ffn_model *model);
void ffn_model_taps_restore(ffn_model *model, ffn_taps *stash);

/* The gate a gated FFN multiplies up by, from the gate_pre tap: gate (n) =
 * act(gate_pre) by the array kernel of the layer's epilogue, so that
 * gate · up equals the m tap bit for bit. */
void ffn_taps_gate(ffn_act act, float *gate, const float *gate_pre, int64_t n);

/* The weight of layer l's shared expert for one row x (D) of the MoE's
 * input: sigmoid(shared_expert_gate.weight · x), the dot product and the
 * sigmoid in double (the forward's own is in float).  FFN_ERR_INTERNAL
 * when the layer has no shared expert gate. */
ffn_status ffn_model_shared_gate(ffn_model *model, int64_t l, const float *x, float *w);

#endif /* FFN_NN_TAP_INTERNAL_H */
