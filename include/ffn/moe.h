/* ffn/moe.h -- Mixture of Experts: a router picks k of E expert FFNs per
 * token; optional always-on shared experts; load-balancing and z losses;
 * forward and backward.
 *
 * Part of the public API; include <ffn.h>, not this file.
 *
 * Letters:  N tokens, D hidden_size, F moe_intermediate_size (one routed
 * expert's width), E num_experts, K num_experts_per_tok (top-k),
 * S kept routed slots (S <= N·K), Fs a shared expert's width.
 *
 * Each expert is an ffn_layer (include/ffn/layer.h) of the same type: dense
 * or gated, any activation, biases or not.  Weights are W[out][in] and a
 * projection is y = x · Wᵀ, as everywhere in ffn.
 *
 * ---- Forward, per token n (x_n a row of X (N, D)) ------------------------
 *   logits  l_n = x_n · Wrᵀ                          Wr = gate.weight (E, D)
 *   scores  p_n = softmax(l_n)        (scoring_func "softmax": Mixtral, Qwen2-MoE)
 *           p_n = sigmoid(l_n)        (scoring_func "sigmoid": DeepSeek-V3)
 *   top-k   i_n1..i_nK = the K largest p_n,e in descending order; equal
 *           scores go to the lower expert index, so routing is deterministic.
 *   weights w_nj = r · p_n,i_nj / Z_n     r = routed_scaling_factor
 *           Z_n = Σ_j p_n,i_nj + 1e-20   when norm_topk_prob (renormalise;
 *                                        the 1e-20, as in DeepSeek-V3, keeps
 *                                        all-underflowed sigmoid scores finite)
 *           Z_n = 1                      otherwise
 *   output  y_n = Σ_j w_nj · expert_{i_nj}(x_n)            (kept slots only)
 *               + σ(x_n · wsgᵀ) · shared_expert(x_n)        (Qwen2-MoE style)
 *               + shared_experts(x_n)                       (DeepSeek style)
 *   wsg = shared_expert_gate.weight (1, D); shared_expert has width
 *   shared_expert_intermediate_size; shared_experts (ungated) has width
 *   n_shared_experts · moe_intermediate_size.  Either, both or none.
 *
 * Capacity.  With capacity_factor c > 0 each expert takes at most
 *   C = ceil(c · N · K / E)
 * slots, in token order (token 0 first): the slot (n, j) routed to e is kept
 * when fewer than C earlier tokens were routed to e.  A dropped slot adds
 * nothing to y and gets no gradient through its weight (its score still
 * counts in Z_n and in the aux loss).  c = 0 is dropless.
 *
 * Execution is grouped: count the tokens per expert, permute the kept rows
 * into one contiguous block per expert (token order inside a block), run one
 * batched ffn_layer_forward per expert that has rows (an expert without
 * tokens is not touched: at N = 1 only the K chosen experts' weights are
 * read), then combine per token with a weighted sum over j = 1..K in a fixed
 * order.  No loop ever runs over experts × all tokens.  When at least as
 * many experts have rows as there are threads and no block is much larger
 * than a thread's share, the experts run side by side, one single-threaded
 * call per expert (one synchronisation for all of them); otherwise one
 * after another, each with every thread.  The result is bitwise
 * reproducible from run to run at a given thread count.
 *
 * ---- Auxiliary losses (reported in ffn_moe_outputs) -----------------------
 * Load balancing (Switch Transformer / Mixtral form):
 *   aux = E · Σ_e f_e · P_e
 *   f_e = (number of the N·K top-k slots routed to e, before capacity) / (N·K)
 *   P_e = (1/N) Σ_n q_n,e,   q_n = p_n (softmax scoring), or
 *                            q_n = p_n / (Σ_e p_n,e + 1e-20) (sigmoid scoring,
 *                            the normalised scores of DeepSeek-V3's
 *                            balance loss)
 *   aux = 1 under perfect balance (f_e = P_e = 1/E); it grows as routing
 *   concentrates on few experts, up to at most E.
 *   f_e is a count: it is treated as a constant (no gradient), exactly as in
 *   the Hugging Face implementation; the gradient flows through P_e only.
 *   Relation to Hugging Face's load_balancing_loss_func(gate_logits, E, k):
 *   it sums over the k slot positions, so for one layer it returns k · aux;
 *   given a tuple of L layers it concatenates their logits as L·N tokens
 *   and computes the same quantity over the pooled tokens (not the mean of
 *   per-layer losses).  Set router_aux_loss_coef to k times HF's value to
 *   get the same gradient for a single layer.
 * Router z-loss (ST-MoE):
 *   z = (1/N) Σ_n (logsumexp_e l_n,e)²      (independent of scoring_func)
 * Both are 0 when N = 0.
 *
 * ---- Backward ----------------------------------------------------------
 * Gradients are of  L = Σ y ⊙ dy + router_aux_loss_coef · aux
 *                                + router_z_loss_coef · z.
 * Backward covers the routed experts (one ffn_layer_backward per expert on
 * its permuted block), the combine weights (through the scaling and the
 * renormalisation), the scoring function through the chosen top-k (the
 * indices i_nj and the kept/dropped decisions are held fixed: they are
 * piecewise constant), the aux loss through P_e and the z-loss through the
 * logits, the shared expert and its sigmoid gate, the DeepSeek shared
 * experts, and finally the router weight and dX.  Gradients accumulate
 * (+=); dx is written.
 *
 * ---- Memory --------------------------------------------------------------
 * The layer keeps pointers to the caller's weights and one ffn_layer per
 * expert (each with its prepacked copy, ~1x the weight bytes).  Forward and
 * backward never allocate: the caller passes a workspace of
 * ffn_moe_workspace_size(n) bytes and, for training, a `saved` buffer of
 * ffn_moe_saved_size(n) bytes that forward fills and backward reads:
 * logits, routing (ids, weights, permutation), the routed expert outputs
 * (N·K·D floats), the experts' own saved activations (see layer.h; none
 * under FFN_SAVE_NONE), and the shared experts' outputs and activations.
 * Per token that is about E + 5·K + K·D floats, plus K·2F (gated experts)
 * or K·F (dense) with FFN_SAVE_ACTIVATIONS, plus D + 1 + the shared
 * expert's own for the gated shared expert.  The workspace holds three
 * (N·K, D) blocks (x, w·dy and dx, permuted), small per-token buffers, and
 * the expert layers' workspace for up to N rows once per thread (when
 * threads <= E, for the side-by-side schedule).
 *
 * Not supported (rejected by the loader with FFN_ERR_UNSUPPORTED): group-
 * limited routing (n_group, topk_group > 1) and topk_method other than
 * "greedy" (DeepSeek-V3's "noaux_tc" with e_score_correction_bias).
 *
 * Example:
 *     ffn_moe_config cfg;  ffn_moe_config_load("config.json", &cfg);
 *     cfg.expert_type = FFN_MLP_GATED;          (if the file left it auto)
 *     ffn_moe *m;  ffn_moe_create(ctx, &cfg, &m);
 *     ffn_moe_params w = { .router_w = Wr, .experts = expert_params };
 *     ffn_moe_set_weights(m, &w);
 *     void *ws = malloc(ffn_moe_workspace_size(m, n));
 *     ffn_moe_outputs out = { .y = y };
 *     ffn_moe_forward(m, &out, x, n, NULL, ws, ffn_moe_workspace_size(m, n));
 */
#ifndef FFN_MOE_H
#define FFN_MOE_H
#pragma GCC visibility push(default) /* what this header declares is the exported API */

#include "core.h"
#include "layer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ffn_moe_scoring {
    FFN_MOE_SCORING_SOFTMAX = 0, /* "softmax" over all E experts */
    FFN_MOE_SCORING_SIGMOID      /* "sigmoid" per expert */
} ffn_moe_scoring;

typedef struct ffn_moe_config {
    int64_t hidden_size;                     /* D */
    int64_t num_experts;                     /* E (num_local_experts, n_routed_experts) */
    int64_t num_experts_per_tok;             /* K, 1 <= K <= E */
    int64_t moe_intermediate_size;           /* F of each routed expert */
    ffn_act act;                             /* hidden_act of every expert */
    ffn_mlp_type expert_type;                /* DENSE or GATED when creating */
    int bias;                                /* mlp_bias: biases on every projection */
    int norm_topk_prob;                      /* renormalise the K weights */
    ffn_moe_scoring scoring;                 /* scoring_func */
    double routed_scaling_factor;            /* r, default 1, > 0 */
    int64_t shared_expert_intermediate_size; /* Fs of the gated shared expert, 0 = none */
    int64_t n_shared_experts;                /* DeepSeek shared experts, 0 = none */
    double capacity_factor;                  /* c >= 0, 0 = dropless */
    double router_aux_loss_coef;             /* weight of aux in L (default 0) */
    double router_z_loss_coef;               /* weight of z in L (default 0) */
    ffn_save_mode save;                      /* passed to every expert layer */
    ffn_precision precision;                 /* of the experts' products (the router: fp32) */
} ffn_moe_config;

/* Read an MoE config from a JSON file with Hugging Face names:
 *   hidden_size (required);
 *   num_experts | num_local_experts | n_routed_experts (required, must agree
 *     if several are given);
 *   num_experts_per_tok (required);
 *   moe_intermediate_size (default: intermediate_size; one is required);
 *   hidden_act (default "silu"; family names like "swiglu" imply gated);
 *   mlp_type ("dense" | "gated" | "auto"; default auto: decided from the weights);
 *   mlp_bias (default false);
 *   norm_topk_prob (renormalise the top-k weights).  When absent:
 *     - with model_type: true for "mixtral" (which always renormalises),
 *       false for any other;
 *     - without model_type: true when num_local_experts is the only expert
 *       count given (that key is Mixtral's alone), false otherwise
 *       (num_experts: Qwen2-MoE and others; n_routed_experts: DeepSeek,
 *       whose configs state norm_topk_prob when they renormalise);
 *   scoring_func ("softmax" | "sigmoid", default "softmax");
 *   routed_scaling_factor (default 1);
 *   shared_expert_intermediate_size, n_shared_experts (default 0; null = 0);
 *   capacity_factor (default 0 = dropless);
 *   router_aux_loss_coef, router_z_loss_coef (default 0).
 * Unknown keys are ignored; JSON null counts as absent.  The result is
 * validated; errors name the file, the field and the value. */
ffn_status ffn_moe_config_load(const char *path, ffn_moe_config *cfg);
/* Check every field (K = 0, K > E, E = 0, negative capacity, sizes whose
 * products overflow, ...).  expert_type may still be FFN_MLP_AUTO here. */
ffn_status ffn_moe_config_validate(const ffn_moe_config *cfg);
const char *ffn_moe_scoring_name(ffn_moe_scoring s); /* "softmax", "sigmoid" */

/* The expert config derived from an MoE config (width F, or Fs, or
 * n_shared_experts·F for which = 0, 1, 2 = routed, shared_expert,
 * shared_experts).  The shared experts have the routed experts' type. */
ffn_layer_config ffn_moe_expert_config(const ffn_moe_config *cfg, int which);

/* Weights (read-only) or gradients (+=; any NULL pointer is skipped).
 *   router_w        gate.weight                 (E, D)
 *   experts[e]      experts.{e}.*_proj.*        E entries, each width F
 *   shared          shared_expert.*_proj.*      width Fs (when Fs > 0)
 *   shared_gate_w   shared_expert_gate.weight   (1, D)   (when Fs > 0)
 *   shared_experts  shared_experts.*_proj.*     width n_shared_experts·F */
typedef struct ffn_moe_params {
    float *router_w;
    ffn_layer_params *experts; /* array of E (may be NULL in a gradient struct) */
    ffn_layer_params shared;
    float *shared_gate_w;
    ffn_layer_params shared_experts;
} ffn_moe_params;

/* What forward reports.  y is required; every other pointer may be NULL
 * (not wanted).  The scalars are always written. */
typedef struct ffn_moe_outputs {
    float *y;                   /* (N, D) */
    float *router_logits;       /* (N, E) */
    int32_t *topk_ids;          /* (N, K) expert ids, descending score */
    float *topk_weights;        /* (N, K) w_nj (dropped slots included) */
    int64_t *tokens_per_expert; /* (E) slots routed to e before capacity;
                                   an expert ran min(count, C) rows */
    int64_t dropped_slots;      /* Σ_e max(0, count_e - C); 0 when dropless */
    int64_t capacity;           /* C, or N·K when dropless */
    double aux_loss;            /* aux (see above) */
    double z_loss;              /* z */
} ffn_moe_outputs;

typedef struct ffn_moe ffn_moe;

/* expert_type must be DENSE or GATED.  Creates one ffn_layer per expert. */
ffn_status ffn_moe_create(ffn_ctx *ctx, const ffn_moe_config *cfg, ffn_moe **out);
void ffn_moe_free(ffn_moe *moe); /* NULL is a no-op */
const ffn_moe_config *ffn_moe_get_config(const ffn_moe *moe);
/* Change the weights of the aux and z losses in the gradient (backward reads
 * them; forward does not).  A model scales them by its grad_scale for
 * gradient accumulation.  Both must be finite. */
ffn_status ffn_moe_set_loss_coefs(ffn_moe *moe, double router_aux_loss_coef,
                                  double router_z_loss_coef);

/* Point at the weights and prepack them (allocates; not a hot path).  Every
 * tensor the config implies must be non-NULL (biases only with bias). */
ffn_status ffn_moe_set_weights(ffn_moe *moe, const ffn_moe_params *weights);

/* Run the routed experts elsewhere (expert parallelism: libffn_dist).
 * With a runner set, the layer still routes, drops over capacity, weights,
 * combines, runs the shared experts and computes the losses and the
 * router's gradients itself; the runner receives the kept slots' rows
 * grouped by expert (rows [offsets[e], offsets[e+1]) go to expert e,
 * E + 1 offsets, D values a row) and writes the experts' outputs
 * (forward) or, given the rows' output gradients w·dy, their input
 * gradients (backward; `drows` may be NULL when dx is not wanted) in the
 * same order; it keeps what its experts' backward needs and accumulates
 * their weight gradients.  Then ffn_moe_set_weights needs no expert
 * weights (weights->experts may be NULL) and the experts' taps (the
 * neuron hook) are not called.  `set_experts` (may be NULL): when
 * ffn_moe_set_weights is given expert weights (all E entries), the layer
 * hands them to the runner instead of packing its own experts (a model
 * whose MoE runs elsewhere keeps its expert tensors in its flat block; the
 * runner points its experts at them after every change; setting such a
 * runner gives back the packed weights of the layer's own experts).
 * NULL: run the experts here (default). */
typedef struct ffn_moe_runner {
    ffn_status (*forward)(void *user, float *out, const float *rows, const int64_t *offsets);
    ffn_status (*backward)(void *user, float *drows, const float *dy_rows,
                           const int64_t *offsets);
    void *user;
    ffn_status (*set_experts)(void *user, const ffn_layer_params *experts);
} ffn_moe_runner;
ffn_status ffn_moe_set_runner(ffn_moe *moe, const ffn_moe_runner *runner);

/* Parameters in total, and active per token (router + K experts + shared). */
int64_t ffn_moe_num_params(const ffn_moe_config *cfg);
int64_t ffn_moe_active_params(const ffn_moe_config *cfg);

/* Bytes of workspace forward and backward need for up to max_n tokens. */
size_t ffn_moe_workspace_size(const ffn_moe *moe, int64_t max_n);
/* Bytes of `saved` forward writes for n tokens and backward reads. */
size_t ffn_moe_saved_size(const ffn_moe *moe, int64_t n);

/* Forward over x (N, D).  `saved` (ffn_moe_saved_size(n) bytes, or NULL for
 * inference) receives what backward needs.  out->y must not alias x. */
ffn_status ffn_moe_forward(ffn_moe *moe, ffn_moe_outputs *out, const float *x, int64_t n,
                           void *saved, void *workspace, size_t workspace_bytes);

/* Given dy (N, D), write dx (N, D) (may be NULL) and accumulate the
 * gradients of L (see above) into `grads` (+=; NULL pointers skipped).  x
 * and `saved` are what forward was given and wrote. */
ffn_status ffn_moe_backward(ffn_moe *moe, float *dx, const ffn_moe_params *grads,
                            const float *dy, const float *x, int64_t n, const void *saved,
                            void *workspace, size_t workspace_bytes);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif /* FFN_MOE_H */
