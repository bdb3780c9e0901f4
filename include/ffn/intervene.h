/* ffn/intervene.h -- switching FFN neurons off (or scaling them) through
 * the taps, and what that does to the model's next-token distribution.
 *
 * Part of the public API; include <ffn.h>, not this file.
 *
 * Letters:  T tokens, V vocab, W a layer's neuron width (F, or E·Fe in a
 *           MoE layer: neuron (e, i) is e·Fe + i, ffn_inspect_layer_width),
 *           N tokens of a data stream.
 *
 * An edit multiplies neuron i of layer l, m_i (the input of down_proj, tap
 * layers.l.m), by a factor at every position: 0 ablates it, so the FFN's
 * output loses exactly m_i·v_i (v_i = column i of down_proj; in a MoE layer
 * w·m_i·v_i), and x scales it.  Edits are tap patches on the model's one
 * forward (include/ffn/tap.h); the caller's own taps are set aside while
 * these functions run and are put back after, so they never leak into
 * later forwards.  These functions allocate (analysis, not a hot path)
 * and never change the weights; a model created for shorter sequences
 * grows its activations (ffn_model_reserve).
 *
 * Spec strings (the CLI's --ablate / --scale):
 *   ablate  "L:i[,L:j...]"      e.g. "1:17,2:5"
 *   scale   "L:i=x[,L:j=y...]"  e.g. "1:17=2.5"
 * Layers are 0-based; L and i are decimal integers, x a finite number.
 * Errors name the item, e.g.
 *   --ablate '9:1': layer 9 out of range (the model has 4 layers: 0..3)
 *   --ablate '1:400': neuron 400 out of range (layer 1 has 344 neurons: 0..343)
 *   --scale '1:3': expected L:i=x (layer:neuron=factor)
 *
 * Example (what switching off two neurons does to the next token):
 *     ffn_neuron_edit *e = NULL;  int64_t n = 0;
 *     ffn_neuron_edits_parse(model, "1:17,2:5", 0, "--ablate", &e, &n);
 *     float *before = malloc(V * 4), *after = malloc(V * 4);  double kl;
 *     ffn_predict_with_edits(ctx, model, ids, T, e, n, before, after, &kl);
 *     free(e);
 */
#ifndef FFN_INTERVENE_H
#define FFN_INTERVENE_H
#pragma GCC visibility push(default)

#include "core.h"
#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ffn_neuron_edit {
    int64_t layer;  /* 0-based */
    int64_t neuron; /* in [0, W) */
    float factor;   /* m_i becomes factor · m_i; 0 ablates */
} ffn_neuron_edit;

/* Parse a spec (above) and APPEND its edits to *edits (realloc'd; start
 * with *edits = NULL, *n_edits = 0; free() it).  with_factor 0 reads the
 * ablate form, 1 the scale form.  Layers and neurons are checked against
 * the model (a layer without an FFN has no neurons).  `what` names the
 * spec in messages ("--ablate"; NULL: "edit").  On an error nothing is
 * appended. */
ffn_status ffn_neuron_edits_parse(const ffn_model *model, const char *spec, int with_factor,
                                  const char *what, ffn_neuron_edit **edits, int64_t *n_edits);

/* The next-token distribution after tokens (T) without and with the edits:
 * p_before, p_after (V) probabilities (softmax of the last position's
 * logits, computed in double), and kl = KL(before ‖ after) in nats
 * (Σ p_before · (log p_before − log p_after)).  p_before, p_after and kl
 * may each be NULL.  No edits: both runs are the same forward and kl = 0.
 * Token ids in [0, V), 1 <= T <= max_position_embeddings. */
ffn_status ffn_predict_with_edits(ffn_ctx *ctx, ffn_model *model, const int32_t *tokens, int64_t T,
                                  const ffn_neuron_edit *edits, int64_t n_edits, float *p_before,
                                  float *p_after, double *kl);

/* The effect of ablating each neuron of one layer on a token stream
 * (N tokens), cut into consecutive windows of `window` tokens (0: the
 * context; the tail shorter than 2 tokens is dropped), each run from
 * position 0.  For neuron i, with every position of every window:
 *   mean_kl[i]     the mean over positions of KL(before ‖ after) of the
 *                  next-token distribution, in nats
 *   delta_loss[i]  the mean cross-entropy of the next token with neuron i
 *                  ablated minus without (nats; > 0: the neuron helped)
 * for neurons 0 .. n_neurons-1 (n_neurons <= W; 0 means W).  Either array
 * may be NULL; base_loss (may be NULL) receives the loss without edits.
 * Costs one forward of the whole stream per neuron. */
ffn_status ffn_neuron_effects(ffn_ctx *ctx, ffn_model *model, const int32_t *tokens, int64_t n,
                              int64_t layer, int64_t window, int64_t n_neurons, double *mean_kl,
                              double *delta_loss, double *base_loss);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif /* FFN_INTERVENE_H */
