/* ffn/trace.h -- causal tracing (after Meng et al. 2022, "Locating and
 * Editing Factual Associations in GPT", ROME): where in the model does a
 * prompt's answer come from?
 *
 * Part of the public API; include <ffn.h>, not this file.
 *
 * Letters:  T tokens of the prompt, L layers, D hidden_size, S noise
 *           samples, K kinds of state (3), P position classes (7).
 *
 * ---- The experiment -----------------------------------------------------------
 * Three runs of the model's one forward, through its taps (ffn/tap.h):
 *   clean      the prompt as it is: p_clean = P(target | prompt);
 *   corrupted  Gaussian noise N(0, σ²) added to the embedding
 *              (layers.0.resid_pre) of every subject token, with
 *              σ = noise · (the standard deviation of embed_tokens.weight
 *              over all its entries; ROME takes 3 times the embeddings'
 *              spread): p_corrupt, averaged over S draws;
 *   restored   the corrupted run with ONE state put back to its clean
 *              value: the hidden state of (layer l, position t)
 *              (resid_post), the FFN's output there (mlp_out) or the
 *              attention's output (attn_out).
 * The indirect effect of a state is p_restored − p_corrupt, averaged over
 * the same S draws (draw s uses the same noise in every restored run).  A
 * large effect of mlp_out at (l, last subject token) says the FFN of layer
 * l, reading the subject, recalls what the answer needs.
 * Check built in: restoring layers.0.resid_pre at every position undoes
 * the noise, so p_restore_input equals p_clean to float rounding.
 * Cost: (1 + S·(1 + K·L·T)) forwards of T tokens.
 *
 * ---- Averaging over facts ------------------------------------------------------
 * Prompts differ in length, so effects are averaged by position class:
 *   before (tokens before the subject), first subject, middle subject,
 *   last subject, first after (the first token after the subject), further
 *   (later tokens but the last), last (the prompt's last token).
 * A token takes the first class that applies in the order last, last
 * subject, first subject, middle subject, first after, further, before.
 * ffn_trace_summarize reports where the MLP effect peaks and how much of
 * it one layer holds.
 *
 * Example:
 *     int32_t *ids; int64_t T, b, e; int32_t target;
 *     ffn_trace_prepare(vocab, "Mira lives in", "Mira", "Velm", &ids, &T, &b, &e, &target);
 *     ffn_trace_options o;  ffn_trace_options_default(&o);
 *     ffn_trace_result *r;
 *     ffn_trace_run(ctx, model, ids, T, b, e, target, &o, &r);
 *     ... r->effect[FFN_TRACE_MLP][l * T + t] ...
 *     ffn_trace_result_free(r);  free(ids);
 */
#ifndef FFN_TRACE_H
#define FFN_TRACE_H
#pragma GCC visibility push(default)

#include "core.h"
#include "model.h"
#include "data.h"
#include "vocab.h"
#include "transcoder.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ffn_trace_kind {
    FFN_TRACE_RESID = 0, /* layers.l.resid_post: the hidden state after block l */
    FFN_TRACE_MLP,       /* layers.l.mlp_out */
    FFN_TRACE_ATTN,      /* layers.l.attn_out */
    FFN_TRACE_N_KINDS
} ffn_trace_kind;

/* "resid_post", "mlp_out", "attn_out" (the tap names); NULL out of range. */
const char *ffn_trace_kind_name(ffn_trace_kind kind);

typedef struct ffn_trace_options {
    int64_t samples; /* S noise draws (10) */
    double noise;    /* σ as a multiple of the embedding's standard deviation (3) */
    uint64_t seed;   /* of the noise (1) */
} ffn_trace_options;

void ffn_trace_options_default(ffn_trace_options *opts);

typedef struct ffn_trace_result {
    int64_t n_layers, n_tokens;         /* L, T */
    int64_t subject_begin, subject_end; /* the subject's tokens [begin, end) */
    int32_t target;                     /* the token whose probability is traced */
    int64_t samples;
    double noise_std;                   /* σ */
    double p_clean;                     /* P(target) without noise */
    double p_corrupt;                   /* mean over draws with noise */
    double p_restore_input;             /* noise, then layers.0.resid_pre restored everywhere */
    int32_t clean_top;                  /* the clean run's most probable token (lowest id on ties) */
    double *effect[FFN_TRACE_N_KINDS];  /* (L, T) p_restored − p_corrupt, layer-major */
} ffn_trace_result;

/* Trace tokens (T >= 1), the subject at positions [subject_begin,
 * subject_end) (0 <= begin < end <= T), the target token in [0, V).
 * opts may be NULL (defaults).  Free with ffn_trace_result_free. */
ffn_status ffn_trace_run(ffn_ctx *ctx, ffn_model *model, const int32_t *tokens, int64_t T,
                         int64_t subject_begin, int64_t subject_end, int32_t target,
                         const ffn_trace_options *opts, ffn_trace_result **out);
void ffn_trace_result_free(ffn_trace_result *result); /* NULL is a no-op */

/* Tokens of a prompt and where its subject is: tokens = encode(prompt),
 * the subject's tokens are those of the first occurrence of `subject` in
 * the prompt (the tokens of the prompt's bytes up to the subject's end
 * minus those up to its start, spaces before it going with the subject
 * when the vocabulary attaches them to the next word; both must be
 * prefixes of the prompt's tokens, else an error saying the subject does
 * not fall on token boundaries).  target (may be NULL: *target_id = -1) is the answer as a
 * word: its first token after the prompt, as in the text "prompt target"
 * (a space-only token of a char or byte vocabulary is appended to the
 * prompt and the next token taken).  *tokens is malloc'd (free() it).
 * Errors: a subject not in the prompt, an empty prompt or subject. */
ffn_status ffn_trace_prepare(const ffn_vocab *vocab, const char *prompt, const char *subject,
                             const char *target, int32_t **tokens, int64_t *n_tokens,
                             int64_t *subject_begin, int64_t *subject_end, int32_t *target_id);

/* ---- averages over facts ---------------------------------------------------- */

#define FFN_TRACE_N_CLASSES 7
#define FFN_TRACE_SUMMARY_MAX_LAYERS 64
/* "before", "first subject", "middle subject", "last subject", "first after",
 * "further", "last"; NULL out of range. */
const char *ffn_trace_class_name(int cls);
/* The class of position t of a result (above). */
int ffn_trace_position_class(const ffn_trace_result *r, int64_t t);

typedef struct ffn_trace_summary {
    int64_t n_results, n_layers;
    double p_clean, p_corrupt;   /* means over the results */
    /* (L, P) mean effect per layer and position class over the results
     * that have the class (0 where none has it); n_class (P) counts them */
    double effect[FFN_TRACE_N_KINDS][FFN_TRACE_SUMMARY_MAX_LAYERS * FFN_TRACE_N_CLASSES];
    int64_t n_class[FFN_TRACE_N_CLASSES];
    /* the MLP effect: its largest entry (layer, class), and per class
     * "last subject" and "last" the layer where it peaks and the value */
    int64_t mlp_peak_layer;
    int mlp_peak_class;
    double mlp_peak;
    int64_t mlp_peak_layer_subject, mlp_peak_layer_last;
    double mlp_peak_subject, mlp_peak_last;
    /* the share of the MLP effect at the last subject token that its
     * strongest layer holds: max_l e(l) / Σ_l max(e(l), 0) (0 when the
     * sum is 0) */
    double mlp_layer_share;
} ffn_trace_summary;

/* Average n results (of one model, at most FFN_TRACE_SUMMARY_MAX_LAYERS
 * layers). */
ffn_status ffn_trace_summarize(const ffn_trace_result *const *results, int64_t n,
                               ffn_trace_summary *out);

/* Trace facts [0, n) of a set (n <= facts->n_facts; the prompt, subject and
 * object of each, through ffn_trace_prepare and ffn_trace_run) and average
 * the facts the model recalls (clean top token = the object's first token),
 * as ROME does; when it recalls none, all of them.  *n_recalled (may be
 * NULL) receives how many it recalls; out->n_results how many were
 * averaged.  Costs n traces. */
ffn_status ffn_trace_facts(ffn_ctx *ctx, ffn_model *model, const ffn_vocab *vocab,
                           const ffn_facts *facts, int64_t n, const ffn_trace_options *opts,
                           ffn_trace_summary *out, int64_t *n_recalled);

/* ---- How distributed is a fact: the smallest ablation that removes it -----------
 * Units are the FFN neurons of one layer (columns of layers.l.m), of every
 * layer, or the features of a transcoder / SAE of one layer
 * (ffn/transcoder.h).  Ablating a neuron multiplies m_i by 0 at every
 * position (tap layers.l.m); ablating a feature j subtracts its part of the
 * FFN's output, a_j(t)·d_j (d_j its decoder row, a_j(t) its activation on
 * the clean run), from layers.l.mlp_out at every position t (the
 * transcoder's error is kept, so with nothing ablated the model is exact).
 *
 * A fact is present while the target is the top-1 token after the prompt
 * (threshold 0) or while p(target) >= threshold (threshold > 0).  The set:
 *   1. attribution of every unit of the scope: the first-order effect of
 *      its ablation on log p(target), A_u = Σ_t a_u(t) · (d_u · ∇_{mlp_out(t)}
 *      log p(target)) (a_u the neuron's m_i or the feature's activation, d_u
 *      its down_proj column or decoder row; one backward through the taps);
 *   2. greedy: the units with A_u > 0, largest first, ablated together one
 *      more at a time until the fact is gone (one forward each; at most
 *      max_set of them);
 *   3. pruning: each unit of that set, smallest A_u first, is dropped when
 *      the fact stays gone without it (one forward each);
 *   4. verification: the final set ablated once more (p_after, top_after).
 * No unit of the result can be dropped alone; the set is small, not proven
 * smallest.  size -1: the fact was not present, or the candidates did not
 * remove it.  Needs a training model (the backward of step 1) whose FFN
 * layers in scope are dense or gated (not MoE). */

typedef struct ffn_ablation_unit {
    int64_t layer; /* 0-based */
    int64_t index; /* the neuron (column of layers.l.m) or the feature */
} ffn_ablation_unit;

typedef struct ffn_fact_dist_options {
    double threshold; /* 0: present while top-1 (default); in (0, 1): while p >= threshold */
    int64_t max_set;  /* 0: every unit with A_u > 0 may join the greedy set (default) */
} ffn_fact_dist_options;

void ffn_fact_dist_options_default(ffn_fact_dist_options *opts);

typedef struct ffn_fact_dist_result {
    double p_clean;           /* p(target) without ablation */
    int32_t clean_top;        /* the top-1 token then */
    int present;              /* the fact is there to remove */
    int64_t n_units;          /* units in the scope */
    int64_t n_candidates;     /* of them with A_u > 0 */
    int64_t n_greedy;         /* the greedy prefix that removed it (0: none did) */
    int64_t size;             /* after pruning; -1 (above) */
    ffn_ablation_unit *units; /* (size) by A_u, largest first (malloc'd) */
    double *attribution;      /* (size) their A_u */
    double p_after;           /* the verification ablation (p_clean when size < 1) */
    int32_t top_after;
    int64_t forwards;         /* forwards run, the backward's included */
} ffn_fact_dist_result;

void ffn_fact_dist_result_free(ffn_fact_dist_result *result); /* zeroes it; NULL is a no-op */

/* The set for tokens (T) and target of one fact over the scope: layer
 * (0 .. L-1) or -1 (every layer; with tc: its layer), neurons when tc is
 * NULL, else tc's features (tc's layer must be `layer` unless -1, its
 * width the model's hidden_size).  opts may be NULL. */
ffn_status ffn_fact_min_ablation(const ffn_ctx *ctx, ffn_model *model, ffn_transcoder *tc,
                                 const int32_t *tokens, int64_t T, int32_t target, int64_t layer,
                                 const ffn_fact_dist_options *opts, ffn_fact_dist_result *out);

/* With units (n; neurons when tc is NULL, else tc's features) ablated:
 * p(target) (may be NULL) and the top-1 token (may be NULL) after tokens
 * (T), and (ffn_ablation_loss) the mean next-token loss over up to
 * `windows` windows of the model's max_seq tokens of a text (n_tok), taken
 * from its end as ffn_edit_heldout_loss does.  n = 0: the model as it is. */
ffn_status ffn_ablation_predict(const ffn_ctx *ctx, ffn_model *model, ffn_transcoder *tc,
                                const ffn_ablation_unit *units, int64_t n, const int32_t *tokens,
                                int64_t T, int32_t target, double *p, int32_t *top);
ffn_status ffn_ablation_loss(const ffn_ctx *ctx, ffn_model *model, ffn_transcoder *tc,
                             const ffn_ablation_unit *units, int64_t n, const int32_t *tokens,
                             int64_t n_tok, int64_t windows, double *loss);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif /* FFN_TRACE_H */
