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

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif /* FFN_TRACE_H */
