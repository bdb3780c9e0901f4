/* ffn/inspect.h -- looking inside the FFN of a model: per-token neurons,
 * the logit lens of value vectors, MoE routing, key-value memories (trigger
 * examples, after Geva et al. 2021) and linear probes of gate activations.
 *
 * Part of the public API; include <ffn.h>, not this file.
 *
 * Letters:  T tokens of the sequence, D hidden_size, F a layer's width (a
 *           routed expert's width Fe in MoE layers), E experts, K experts
 *           per token, V vocab, L layers, P promoted tokens per neuron,
 *           C word classes.
 *
 * ---- The FFN as a key-value memory ------------------------------------------
 * At layer l, with x = post_attention_layernorm(h) the FFN's input (D):
 *   gated:  m_i = act(gate_i·x + bg_i) · (up_i·x + bu_i)
 *   dense:  m_i = act(up_i·x + bu_i)
 *   y = Σ_i m_i · v_i + b_down,    v_i = down_proj[:, i]  (column i, D)
 * so neuron i's "key" is row i of gate_proj/up_proj and its "value" is v_i.
 * MoE layers: y = Σ_j w_j Σ_i m_{e_j,i} v_{e_j,i} (+ the shared expert,
 * weighted by σ(shared_expert_gate·x)); a neuron is (expert, i) and its
 * contribution to y is w · m_i · v_i (w = the router weight; w = 1 outside
 * MoE).
 *
 * Per neuron the fields reported are
 *   gate_pre = gate_i·x + bg_i, gate = act(gate_pre)   (gated)
 *   up       = up_i·x + bu_i                             (pre-activation)
 *   product  = m_i
 * and for a DENSE layer gate_pre = up, gate = act(up) = m_i (the dense
 * layer's "gate" is its activation: how far the neuron is open).
 *
 * Explained fraction.  For the top-k neurons S of a token (by |w·m_i|):
 *   partial  = Σ_{i∈S} w·m_i·v_i            (D)
 *   explained = ‖partial‖ / ‖y − b_down‖    the NORM RATIO (can exceed 1
 *                                           when the other neurons cancel)
 *   cosine    = cos(partial, y − b_down)    direction agreement
 *   residual  = ‖(y − b_down) − partial‖ / ‖y − b_down‖
 * Both ratio and cosine are reported; `explained` is the headline number.
 * The bias is excluded because no neuron can explain it.
 * With a post-FFN norm (Gemma 2/3's post_feedforward_layernorm) y is what
 * is added to the residual, RMSNorm(z) for the down projection's output
 * z = Σ w·m_i·v_i + b_down: per token a diagonal gain g = (offset + w_norm)
 * / rms(z) on every term, so partial = Σ_{i∈S} w·m_i·(g ⊙ v_i) and the
 * bias removed is g ⊙ b_down (value_norm stays ‖v_i‖, a property of the
 * neuron, not of a token).
 *
 * Logit lens of a value vector.  With g = model.norm.weight and U the
 * output embedding (lm_head.weight, or embed_tokens.weight when tied):
 *   lens_i = U · (g ⊙ v_i)      (V)
 * the logits a direction v_i in the residual stream adds after the final
 * norm's scale (the norm's 1/rms is a positive scalar per token and does
 * not change the ranking).  With a post-FFN norm of weight p the direction
 * in the residual is p ⊙ v_i: lens_i = U · (g ⊙ p ⊙ v_i) (Gemma's offset
 * on both).  "Promoted tokens" are the P largest entries.
 *
 * ---- Running a sequence -------------------------------------------------------
 * Everything here reads the model's own forward through taps
 * (include/ffn/tap.h): mlp_in, mlp_out, gate_pre, up, m and the routing of
 * one ffn_model call (ffn_inspect_probe: many windows per call).  Neurons
 * the forward did not compute (ffn_inspect_neurons on given rows, an
 * expert on every row, the shared expert) come from the model's own layer
 * objects through the same hook.  The FFN output y is the layer's, from its
 * down projection, independent of the decomposition, so Σ m_i v_i + b = y
 * is a real check.  The caller's own taps are set aside and restored.
 * They allocate (analysis, not a hot path) and never change the weights;
 * a model created for shorter or fewer sequences than a call needs grows
 * its activation block (ffn_model_reserve), which resets its KV cache.
 * Token ids must be in [0, V) and 1 <= T <= max_position_embeddings.
 *
 * Example (the report's per-token data):
 *     ffn_inspect_options o;  ffn_inspect_options_default(&o);
 *     o.layer = 1;  o.top_k = 8;
 *     ffn_inspect_result *r;
 *     ffn_inspect_run(ctx, model, ids, T, &o, &r);
 *     for (int64_t t = 0; t < r->n_tokens; t++) {
 *         const ffn_inspect_token *tk = ffn_inspect_token_at(r, 0, t);
 *         for (int64_t j = 0; j < tk->n_top; j++) {
 *             const ffn_inspect_neuron *nu = &tk->top[j];
 *             ... nu->index, nu->gate, nu->up, nu->product,
 *                 nu->promoted[0 .. r->n_promoted) (token ids) ...
 *         }
 *     }
 *     ffn_inspect_result_free(r);
 */
#ifndef FFN_INSPECT_H
#define FFN_INSPECT_H
#pragma GCC visibility push(default) /* what this header declares is the exported API */

#include "core.h"
#include "data.h"
#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- capture: every layer's FFN input and output ----------------------------- */

/* Run tokens (T) through the model and write, for every layer l,
 *   ffn_in[l]  (T, D)  the FFN's input x = post_attention_layernorm(h)
 *   ffn_out[l] (T, D)  the FFN's output y (MoE: the routed sum plus the
 *                      shared expert), as the model adds it to the residual
 * as (L, T, D) arrays, and logits (T, V) after the head.  Any output may be
 * NULL.  Layers without an FFN (mlp_type none) get zeros.  MoE routing per
 * layer goes to topk_ids / topk_weights (L, T, K) when not NULL (-1 / 0 in
 * non-MoE layers; K = num_experts_per_tok, or 1 when the model has no MoE). */
ffn_status ffn_inspect_capture(ffn_ctx *ctx, ffn_model *model, const int32_t *tokens, int64_t T,
                               float *ffn_in, float *ffn_out, float *logits, int32_t *topk_ids,
                               float *topk_weights);

/* Width of the neuron space of layer l: F for dense/gated layers, E·Fe for
 * MoE layers (neuron (e, i) has flat index e·Fe + i; the shared expert is
 * not counted), 0 for a layer without an FFN or an l out of range. */
int64_t ffn_inspect_layer_width(const ffn_model *model, int64_t layer);

/* The neurons of one FFN of layer l for N rows of its input x (N, D):
 * expert = -1 for a dense/gated layer, e in [0, E) for a routed expert of
 * an MoE layer, -2 for the shared expert.  Writes (N, W) arrays, W its
 * width (F, Fe or Fs); any may be NULL:
 *   gate_pre, gate   (see the overview; dense: gate_pre = up, gate = act(up))
 *   up               up_i·x + b
 *   m                the product m_i
 * No routing weight is applied here.  The rows run through the model's own
 * layer object for that FFN (the forward's kernels, in chunks of at most
 * max_batch·max_seq rows), so rows and a row count equal to a forward
 * call's give that call's tapped values bit for bit. */
ffn_status ffn_inspect_neurons(ffn_ctx *ctx, ffn_model *model, int64_t layer, int64_t expert,
                               const float *x, int64_t n, float *gate_pre, float *gate, float *up,
                               float *m);

/* The value vector v_i (D) of neuron i of that FFN (column i of its
 * down_proj). */
ffn_status ffn_inspect_value_vector(ffn_model *model, int64_t layer, int64_t expert,
                                    int64_t neuron, float *v);

/* Logit lens of neuron i: lens (V) = U · (g ⊙ v_i) (g ⊙ p ⊙ v_i with a
 * post-FFN norm p).  And the P tokens it
 * promotes most: ids (P) and their lens values (P), largest first (equal
 * values: lower id first).  lens_out may be NULL. */
ffn_status ffn_inspect_value_logits(ffn_model *model, int64_t layer, int64_t expert,
                                    int64_t neuron, float *lens);
ffn_status ffn_inspect_value_top(ffn_model *model, int64_t layer, int64_t expert, int64_t neuron,
                                 int64_t p, int32_t *ids, float *lens_out);

/* ---- per-token neurons -------------------------------------------------------- */

typedef struct ffn_inspect_options {
    int64_t layer;      /* the layer to inspect, -1 = every layer (default -1) */
    int64_t top_k;      /* neurons per token, by |w·m_i| (default 10) */
    int64_t n_promoted; /* P promoted tokens per listed neuron (default 5) */
} ffn_inspect_options;

void ffn_inspect_options_default(ffn_inspect_options *opts);

#define FFN_INSPECT_SHARED_EXPERT (-2) /* expert field of a shared-expert neuron */

typedef struct ffn_inspect_neuron {
    int64_t expert;       /* -1: the layer's FFN; e: routed expert e; -2: shared expert */
    int64_t index;        /* i within that FFN's width */
    float gate_pre;       /* gate_i·x + b (dense: up_i·x + b) */
    float gate;           /* act(gate_pre) */
    float up;             /* up_i·x + b (pre-activation) */
    float product;        /* m_i */
    float weight;         /* router weight w (1 outside MoE; shared: σ(gate·x)) */
    float contribution;   /* w · m_i (the coefficient of v_i in y) */
    float value_norm;     /* ‖v_i‖ */
    const int32_t *promoted;     /* (P) token ids, strongest first */
    const float *promoted_logit; /* (P) their logit-lens values */
} ffn_inspect_neuron;

typedef struct ffn_inspect_token {
    int64_t layer;        /* model layer */
    int64_t position;     /* t */
    int32_t token;        /* token id at t */
    int64_t n_top;        /* top_k, or fewer when the layer is narrower */
    const ffn_inspect_neuron *top; /* (n_top) by |contribution|, largest first */
    float out_norm;       /* ‖y − b_down‖ */
    float partial_norm;   /* ‖Σ_top contribution·v_i‖ */
    float explained;      /* partial_norm / out_norm (0 when out_norm is 0) */
    float cosine;         /* cos(partial, y − b_down) */
    float residual;       /* ‖(y − b_down) − partial‖ / out_norm */
    /* MoE layers: the K experts the token went to, descending score;
     * n_experts = 0 in other layers. */
    int64_t n_experts;
    const int32_t *experts;        /* (K) */
    const float *expert_weights;   /* (K) router weights w */
} ffn_inspect_token;

typedef struct ffn_inspect_result {
    int64_t n_tokens;     /* T */
    int64_t n_layers;     /* layers inspected */
    const int64_t *layers;/* (n_layers) their model indices */
    const int32_t *token_ids; /* (T) */
    int64_t top_k, n_promoted;
    int64_t vocab_size;   /* V */
    const int *layer_is_moe; /* (n_layers) */
    const ffn_inspect_token *tokens; /* (n_layers, T): layer-major */
    void *storage_;       /* private */
} ffn_inspect_result;

/* Inspect tokens (T) at opts->layer (or all layers; layers without an FFN
 * are skipped).  opts may be NULL (defaults).  Free with
 * ffn_inspect_result_free. */
ffn_status ffn_inspect_run(ffn_ctx *ctx, ffn_model *model, const int32_t *tokens, int64_t T,
                           const ffn_inspect_options *opts, ffn_inspect_result **out);
void ffn_inspect_result_free(ffn_inspect_result *result); /* NULL is a no-op */
/* Entry (li, t): li indexes result->layers; NULL when out of range. */
const ffn_inspect_token *ffn_inspect_token_at(const ffn_inspect_result *result, int64_t li,
                                              int64_t t);

/* ---- key-value memories: trigger examples (Geva et al., 2021) ---------------- */

typedef struct ffn_keys_options {
    int64_t top_examples; /* t trigger examples per neuron (default 25) */
    int64_t n_promoted;   /* P promoted tokens per neuron (default 5) */
    int64_t max_neurons;  /* neurons per layer reported: 0 = all; else the
                             first max_neurons (agreement still over all) */
    int64_t window;       /* positions per forward window: the data is cut
                             into consecutive windows of this many tokens,
                             each run from position 0 (0 = the context) */
} ffn_keys_options;

void ffn_keys_options_default(ffn_keys_options *opts);

typedef struct ffn_key_example {
    int64_t position;     /* index into the token stream */
    float activation;     /* w·m_i at that position */
} ffn_key_example;

typedef struct ffn_keys_layer {
    int64_t layer;
    int64_t n_neurons;    /* ffn_inspect_layer_width */
    int64_t n_reported;   /* min(n_neurons, max_neurons or all) */
    int64_t n_examples;   /* t (fewer when the data is shorter) */
    int64_t fe;           /* neuron i of an MoE layer is expert i / fe, index i % fe;
                             fe = n_neurons for dense/gated layers */
    /* (n_reported, n_examples): best first (ties: lower position first);
     * unused slots have position -1 (an MoE neuron fires only where its
     * expert is chosen) */
    ffn_key_example *examples;
    int32_t *promoted;          /* (n_reported, P) */
    float *promoted_logit;      /* (n_reported, P) */
    int32_t *next_token;        /* (n_reported) token after the top example, -1 if none */
    int64_t n_agree;            /* over ALL neurons with a top example that has a next token */
    int64_t n_counted;
    double agreement;           /* n_agree / n_counted (0 when none counted) */
    double chance;              /* the agreement expected by chance: the mean over the
                                   counted neurons of the frequency of their top promoted
                                   token among next tokens (tokens[1..n)) */
} ffn_keys_layer;

typedef struct ffn_keys_result {
    int64_t n_layers;
    ffn_keys_layer *layers;     /* (n_layers) */
    int64_t n_tokens;           /* positions searched */
    int64_t window, top_examples, n_promoted;
} ffn_keys_result;

/* Trigger examples for layer `layer` (-1: every layer with an FFN) over the
 * token stream tokens (N).  The search keeps, per neuron, the t positions
 * with the largest activation over every position (ties broken by the
 * lower position).  Free with ffn_keys_result_free. */
ffn_status ffn_inspect_keys(ffn_ctx *ctx, ffn_model *model, const int32_t *tokens, int64_t n,
                            int64_t layer, const ffn_keys_options *opts, ffn_keys_result **out);
void ffn_keys_result_free(ffn_keys_result *result); /* NULL is a no-op */

/* ---- gate probes on the built-in corpus -------------------------------------- */

/* Held-out tokens are
 *   WORDS      the tokens of held-out word TYPES (per class, every word type
 *              whose hash ranks in the held-out share; a class with one type
 *              keeps it in training): the probe must generalise to words it
 *              never saw, so it cannot succeed by memorising token identity.
 *              A random model's features carry identity but no class, so it
 *              fails here (the control), while a trained model's do not.
 *              With a char or byte tokenizer the characters of an unseen
 *              word were seen in other words and still carry class cues
 *              (capitals, Chinese surnames), so a random model beats the
 *              baseline somewhat; use TOKENS there.
 *   SENTENCES  the tokens of the last sentences: the same words appear on
 *              both sides; even random features can be decoded by identity.
 *   TOKENS     every occurrence of held-out token IDS (the held-out share
 *              of the ids that occur, by hash): the probe never sees the
 *              held-out tokens' own embeddings, whatever the tokenizer. */
typedef enum ffn_probe_split {
    FFN_PROBE_SPLIT_WORDS = 0,
    FFN_PROBE_SPLIT_SENTENCES,
    FFN_PROBE_SPLIT_TOKENS
} ffn_probe_split;
/* "words", "sentences", "tokens" */
const char *ffn_probe_split_name(ffn_probe_split split);

typedef struct ffn_probe_options {
    ffn_lang lang;              /* built-in corpus language (EN) */
    int64_t sentences;          /* corpus sentences to label (500) */
    uint64_t corpus_seed;       /* (20260101, not the training corpus's seed) */
    ffn_probe_split split;      /* how tokens are split train / held-out (WORDS) */
    double heldout_fraction;    /* share of word types (WORDS) or of sentences
                                   (SENTENCES) held out (0.3) */
    int64_t epochs;             /* passes of mini-batch SGD (30) */
    int64_t batch;              /* mini-batch size (64) */
    double lr;                  /* SGD learning rate on standardised features (0.1) */
    double l2;                  /* weight decay (1e-3) */
    uint64_t seed;              /* shuffling (7) */
    int64_t top_selective;      /* neurons listed per class (5) */
} ffn_probe_options;

void ffn_probe_options_default(ffn_probe_options *opts);

typedef struct ffn_probe_layer {
    int64_t layer;
    int64_t n_features_gate;    /* F (MoE: E·Fe, every expert's gate computed densely) */
    double acc_gate;            /* held-out accuracy of the probe on gate activations */
    double acc_input;           /* ... on the FFN input x (D) */
    double train_acc_gate, train_acc_input;
    /* per class c (FFN_WORD_N_CLASSES), the top_selective neurons with the
     * largest d = (mean_in − mean_out) / pooled sd of the gate activation,
     * over training tokens: (C, top_selective) each; -1 / 0 when a class
     * has no tokens */
    int64_t *selective;
    float *selective_d;
} ffn_probe_layer;

typedef struct ffn_probe_result {
    int64_t n_layers;
    ffn_probe_layer *layers;
    int64_t n_train, n_test;            /* labelled tokens */
    int64_t class_count_train[FFN_WORD_N_CLASSES];
    int64_t class_count_test[FFN_WORD_N_CLASSES];
    int majority_class;                 /* of the training tokens */
    double baseline;                    /* held-out accuracy of always predicting it */
    int64_t top_selective;
} ffn_probe_result;

/* A probe on any labelled token stream: tokens (N), labels (N) in
 * [0, FFN_WORD_N_CLASSES) or -1 (not counted), split (N): 0 train, 1
 * held-out.  The stream is run in windows of the model's context, each
 * window starting at a sentence boundary when boundaries (N, 1 = a window
 * may start here; NULL = anywhere) says so.  Multinomial logistic
 * regression on standardised features (train-set mean and sd), mini-batch
 * SGD, deterministic for a seed. */
ffn_status ffn_inspect_probe(ffn_ctx *ctx, ffn_model *model, const int32_t *tokens,
                             const int8_t *labels, const int8_t *split,
                             const uint8_t *boundaries, int64_t n,
                             const ffn_probe_options *opts, ffn_probe_result **out);

/* The probe on the built-in corpus: generates opts->sentences sentences,
 * encodes them with `tok` (the model's tokenizer), labels every token with
 * its word's class (ffn_corpus_word_at; tokens that cover no word are not
 * counted), splits per opts->split, each window of the model's context
 * starting at a sentence start, and runs ffn_inspect_probe. */
ffn_status ffn_inspect_gates_corpus(ffn_ctx *ctx, ffn_model *model, const ffn_tokenizer *tok,
                                    const ffn_probe_options *opts, ffn_probe_result **out);
void ffn_probe_result_free(ffn_probe_result *result); /* NULL is a no-op */

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif /* FFN_INSPECT_H */
