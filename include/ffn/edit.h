/* ffn/edit.h -- editing one fact in a model: ROME (a rank-one update of
 * one layer's down_proj) and the fine-tuning baseline, the facts files
 * that say what to edit and how to score it, and the scores.
 *
 * Part of the public API; include <ffn.h>, not this file.
 *
 * Letters:  D hidden_size, F intermediate_size (the width of m, the input
 *           of down_proj), V vocabulary, L layers, n rows of keys.
 *
 * ---- ROME ---------------------------------------------------------------------
 * The FFN of layer l is read as a key-value memory: down_proj maps a key
 * k (the `m` tap point, (F)) to a value W·k + b (D).  To make a prompt
 * about a subject continue with a new target:
 *   k*  the mean key at the subject's last token, over the prompt alone
 *       and the prompt after n_prefixes - 1 short texts the model
 *       generates itself (prefix_len tokens each, then a newline);
 *   C   E[k kᵀ] (F, F) over keys of ordinary text (every token of windows
 *       of the model's corpus), so the update disturbs other keys little;
 *   v*  = W·k* + b + δ, where δ (D) is added at layer l's mlp_out (as the
 *       update will add it, δ·uᵀk_t/(uᵀk*) at every position t, or at the
 *       subject's last token only: ffn_edit_fit) and optimised by Adam
 *       (steps, lr) to minimise
 *         mean over prompts of -log p(target | prefix + prompt)
 *         + kl_weight · KL(p₀ ‖ p) on kl_prompt ("{} is a", the subject in
 *           place of {}) at its last token, p₀ before the edit,
 *         + weight_decay · |δ| / |W·k* + b|² (ROME's form),
 *       its norm clamped to clamp_norm · |W·k* + b|; it stops early once
 *       the mean target loss is below 0.05;
 *   ΔW  = (v* − W·k* − b) uᵀ / (uᵀ k*),  u = (C + λI)⁻¹ k*, by a Cholesky
 *       factorisation in double, λ = lambda · tr(C) / F,
 * so that afterwards down_proj(k*) = v* (to float rounding).
 * ---- FT -----------------------------------------------------------------------
 * The baseline: Adam (ft_steps, ft_lr) on layer l's down_proj alone,
 * minimising -log p(target | prompt), with no constraint.
 * ---- Scores ---------------------------------------------------------------------
 * p(text | prompt) is the product of the probabilities of the tokens of
 * " " + text after the prompt (teacher-forced).  For a set of edits:
 *   efficacy        fraction of prompts with p(new) > p(old);
 *   generalisation  fraction of paraphrases with p(new) > p(old);
 *   specificity     fraction of neighbour prompts whose own object is
 *                   still more likely than the new target (neighbours
 *                   whose object is the new target are left out: p(x) >
 *                   p(x) can never hold, so they would count as failures
 *                   whatever the edit does).
 * old is the request's old object, or the model's most likely next token
 * on the prompt before the edit.
 *
 * Errors: a subject not in the prompt, a layer out of range or without a
 * dense/gated FFN, a word the vocabulary does not have (word-level
 * vocabularies map it to <unk>), a sequence longer than the model's
 * context: FFN_ERR_INVALID_ARG naming what and where.  Nothing here prints. */
#ifndef FFN_EDIT_H
#define FFN_EDIT_H
#pragma GCC visibility push(default)

#include "core.h"
#include "data.h"
#include "model.h"
#include "vocab.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- facts ------------------------------------------------------------------
 * Facts files are read by ffn_facts_load (include/ffn/data.h: JSON lines of
 * id, subject, relation, prompt, object, paraphrases, neighbours). */

/* ---- edits ------------------------------------------------------------------------ */

typedef struct ffn_edit_request {
    const char *prompt, *subject, *target;
    const char *old_object; /* NULL: the model's most likely next token before the edit */
    const char *const *paraphrases;
    int64_t n_paraphrases;
    const ffn_fact_prompt *neighbours; /* other facts' prompts and their objects */
    int64_t n_neighbours;
} ffn_edit_request;

/* A request from a fact of a facts file with a new target. */
ffn_edit_request ffn_edit_request_from_fact(const ffn_fact *fact, const char *target);

/* Edit requests as JSON lines, one a line: {"fact": id, "target": str}
 * (the fact from `facts`, which may then not be NULL) or {"prompt": str,
 * "subject": str, "target": str} with optional "object", "paraphrases" and
 * "neighbours" as in a facts file.  The requests borrow strings from the
 * list and from `facts`. */
typedef struct ffn_edit_list ffn_edit_list;
ffn_status ffn_edit_list_load(const char *path, const ffn_facts *facts, ffn_edit_list **out);
void ffn_edit_list_free(ffn_edit_list *list); /* NULL is a no-op */
int64_t ffn_edit_list_count(const ffn_edit_list *list);
const ffn_edit_request *ffn_edit_list_at(const ffn_edit_list *list, int64_t i);

typedef enum ffn_edit_method {
    FFN_EDIT_ROME = 0, /* the rank-one update */
    FFN_EDIT_FT,       /* fine-tuning down_proj */
    FFN_EDIT_MEMIT     /* many edits over a range of layers: ffn_edit_memit */
} ffn_edit_method;

const char *ffn_edit_method_name(ffn_edit_method method); /* "rome", "ft", "memit" */

/* How ROME fits δ: FFN_EDIT_FIT_UPDATE adds δ·uᵀk_t/(uᵀk*) at every
 * position t, which is exactly what the rank-one update then adds to
 * down_proj's output there (k_t the key at t, unchanged by the edit), so
 * the loss minimised is the edited model's own; FFN_EDIT_FIT_SUBJECT adds
 * δ at the subject's last token only, as ROME does (after the update the
 * prompt's subject then gets δ·uᵀk/(uᵀk*), not δ, and other positions get
 * their share too). */
typedef enum ffn_edit_fit {
    FFN_EDIT_FIT_UPDATE = 0,
    FFN_EDIT_FIT_SUBJECT
} ffn_edit_fit;

typedef struct ffn_edit_options {
    ffn_edit_method method;  /* FFN_EDIT_ROME */
    int64_t layer;           /* the block whose down_proj changes (0-based; 0) */
    int64_t n_prefixes;      /* prompts for k* and v*, the bare prompt included (6) */
    int64_t prefix_len;      /* tokens of each generated prefix (5) */
    int64_t steps;           /* Adam steps for δ (20) */
    double lr;               /* their learning rate (0.5) */
    double kl_weight;        /* 0.0625 */
    double weight_decay;     /* on |δ| / |W·k* + b|² (0.5) */
    double clamp_norm;       /* |δ| <= clamp_norm · |W·k* + b| (4) */
    double lambda;           /* λ = lambda · tr(C) / F (1e-3) */
    const char *kl_prompt;   /* "{} is a"; words the vocabulary lacks: the subject alone */
    int64_t ft_steps;        /* FT: Adam steps (25) */
    double ft_lr;            /* FT: learning rate (1e-2) */
    uint64_t seed;           /* the generated prefixes (1) */
    ffn_edit_fit fit;        /* ROME: how δ is fitted (FFN_EDIT_FIT_UPDATE) */
    double cov_weight;       /* MEMIT: the weight w of C against the edits' keys (100) */
    double ft_norm;          /* FT over layers (ffn_edit_ft_batch): |ΔW_ij| <= ft_norm, the
                                L∞ bound of FT-L (0: no bound; 5e-3) */
} ffn_edit_options;

void ffn_edit_options_default(ffn_edit_options *opts);

/* What one edit computed (malloc'd arrays; ffn_edit_result_free). */
typedef struct ffn_edit_result {
    int64_t layer, D, F;
    float *k_star;          /* (F) */
    float *v_star;          /* (D) ROME: the value down_proj now gives k* */
    float *v_old;           /* (D) W·k* + b before the edit */
    double lambda;          /* the absolute λ added to C's diagonal (ROME) */
    int64_t steps_run;      /* optimiser steps taken (δ or FT) */
    double loss_first;      /* mean target loss at the first step */
    double loss_last;       /* ... at the last */
    double kl_last;         /* ROME: the KL term at the last step */
    int kl_subject_only;    /* 1: kl_prompt had words the vocabulary lacks */
    char old_object[64];    /* the old object scored against (the request's or the model's) */
} ffn_edit_result;

void ffn_edit_result_free(ffn_edit_result *result); /* zeroes it; NULL is a no-op */

/* E[k kᵀ] (F, F), row-major doubles, of layer `layer`'s keys over the
 * windows of `tokens` (windows of the model's max_seq, every row a key),
 * until `samples` keys (fewer when the text ends first: *rows_used).  The
 * model must not be a MoE layer there. */
ffn_status ffn_edit_covariance(ffn_model *model, int64_t layer, const int32_t *tokens,
                               int64_t n_tokens, int64_t samples, double *C, int64_t *rows_used);

/* The same through a cache file in `cache_dir` (NULL: no cache) named
 * by the layer, the sample count and a hash of the model's weights
 * (ffn_edit_model_hash): read when it is there and whole, else computed
 * and written atomically.  *from_cache tells which (may be NULL). */
ffn_status ffn_edit_covariance_cached(ffn_model *model, int64_t layer, const int32_t *tokens,
                                      int64_t n_tokens, int64_t samples, const char *cache_dir,
                                      double *C, int64_t *rows_used, int *from_cache);
/* FNV-1a of the weights' bytes. */
uint64_t ffn_edit_model_hash(ffn_model *model);

/* Apply one edit to `model` in place (a training model: created with
 * ffn_model_options.training = 1).  C (F, F) is needed by ROME (NULL for
 * FT).  result may be NULL. */
ffn_status ffn_edit_apply(ffn_model *model, const ffn_vocab *vocab, const ffn_edit_request *req,
                          const ffn_edit_options *opts, const double *C,
                          ffn_edit_result *result);

/* ---- MEMIT (Meng et al. 2023) ------------------------------------------------------
 * n requests written at once into the down_proj of layers a..b (b last):
 *   z_i  = h_b + δ_i, h_b the residual stream after block b (resid_post)
 *        at the subject's last token, averaged over the request's prompts
 *        as k* is; δ_i fitted as ROME's v* at layer b with the fit
 *        FFN_EDIT_FIT_SUBJECT (δ at the subject's last token), all on the
 *        unedited model;
 *   for l = a..b in turn, with the layers before l already updated:
 *     K (n, F) the keys k*_i at layer l, R (n, D) = (z_i − h_b,i) / (b − l + 1)
 *     (the residual still missing, shared among the layers left), and
 *     ΔW_l = Rᵀ K (w·C_l + λI + KᵀK)⁻¹,  λ = lambda · w · tr(C_l) / F,
 *     the least-squares update that maps K to R while moving the keys of
 *     C_l (layer l's E[k kᵀ] of the unedited model) little.
 * Only the down_proj weights of layers a..b change. */

/* ΔW (D, F) = Rᵀ K (w·C + λI + KᵀK)⁻¹ with K (n, F), R (n, D), C (F, F),
 * row-major doubles (Cholesky).  Not positive definite: FFN_ERR_INVALID_ARG. */
ffn_status ffn_memit_solve(int64_t D, int64_t F, int64_t n, const double *K, const double *R,
                           const double *C, double w, double lambda, double *dW);

typedef struct ffn_memit_layer {
    int64_t layer;
    double *K, *R, *dW; /* (n, F), (n, D), (D, F) as solved */
    double lambda;      /* the absolute λ */
} ffn_memit_layer;

typedef struct ffn_memit_result {
    int64_t n, n_layers, D, F;
    ffn_memit_layer *layers;  /* (n_layers), a..b */
    char (*old_objects)[64];  /* (n) the old objects scored against */
    double loss_first, loss_last; /* the v* fits' target losses, means over the requests */
    double resid_first, resid_last; /* mean |z_i − h_b,i| before and after the update */
} ffn_memit_result;

void ffn_memit_result_free(ffn_memit_result *result); /* zeroes it; NULL is a no-op */

/* Apply n requests to `model` (a training model) over layers first..last;
 * C[j] (F, F) is layer first + j's E[k kᵀ] (ffn_edit_covariance).  Uses
 * opts' n_prefixes, prefix_len, steps, lr, kl_weight, kl_prompt,
 * weight_decay, clamp_norm, lambda, cov_weight, seed.  result may be NULL. */
ffn_status ffn_edit_memit(ffn_model *model, const ffn_vocab *vocab, const ffn_edit_request *reqs,
                          int64_t n, int64_t first, int64_t last, const ffn_edit_options *opts,
                          const double *const *C, ffn_memit_result *result);

/* ---- The fine-tuning baseline over layers (FT-L) ------------------------------------
 * n requests written at once by Adam (ft_steps steps at ft_lr, β 0.9,
 * 0.999, ε 1e-8) on the down_proj weights of layers first..last, as the
 * FT-L baseline of the ROME and MEMIT papers: the loss is the mean over
 * the requests of each one's mean target NLL after its bare prompt; after
 * every step each weight is clamped to within ft_norm of its value before
 * the edit (the L∞ norm bound; ft_norm 0: no bound).  Stops early when the
 * loss is below 0.05.  Only the down_proj weights of layers first..last
 * change. */
typedef struct ffn_ft_result {
    int64_t n, steps_run;
    double loss_first, loss_last; /* the mean target loss at the first and last step */
    double max_change;            /* max |ΔW_ij| over the layers */
    char (*old_objects)[64];      /* (n) the old objects scored against */
    int64_t n_layers, D, F;
    float *W_before;              /* (n_layers, D, F) the down_projs before the edit */
    float *grad_first;            /* (n_layers, D, F) their gradient at the first step */
} ffn_ft_result;

void ffn_ft_result_free(ffn_ft_result *result); /* zeroes it; NULL is a no-op */

/* One step of it on its own (the tests): W (numel) updated in place from
 * the gradient g, the moments m, v (numel, doubles) and the unedited W0;
 * step counts from 1. */
void ffn_edit_ft_step(float *W, const float *g, double *m, double *v, const float *W0,
                      int64_t numel, int64_t step, double lr, double norm);

ffn_status ffn_edit_ft_batch(ffn_model *model, const ffn_vocab *vocab,
                             const ffn_edit_request *reqs, int64_t n, int64_t first, int64_t last,
                             const ffn_edit_options *opts, ffn_ft_result *result);

typedef struct ffn_edit_scores {
    double efficacy;        /* fraction of the requests (NaN: none) */
    double generalisation;  /* fraction of their paraphrases (NaN: none) */
    double specificity;     /* fraction of their neighbours (NaN: none) */
    double logp_new, logp_old; /* on the prompts, means over the requests */
    int64_t n_edits, n_paraphrases, n_neighbours;
} ffn_edit_scores;

/* Score requests against the model as it is now.  old_objects (n) gives
 * each request's old object when its old_object is NULL (as the edit
 * recorded it in ffn_edit_result.old_object); may be NULL. */
ffn_status ffn_edit_score(ffn_model *model, const ffn_vocab *vocab, const ffn_edit_request *reqs,
                          int64_t n, const char *const *old_objects, ffn_edit_scores *out);

/* Mean cross-entropy over up to `windows` windows of the model's max_seq
 * tokens (the last windows of `tokens`). */
ffn_status ffn_edit_heldout_loss(ffn_model *model, const int32_t *tokens, int64_t n_tokens,
                                 int64_t windows, double *loss);

/* Write `model` as a complete model directory `out_dir` in the layout of
 * `model_path`, the model it was loaded from (an ffn run directory: its
 * config.json and vocabulary copied and model.safetensors written; any
 * other: a Hugging Face directory with the vocabulary `tokenizer_path`,
 * maybe NULL).  Written beside and swapped in whole.  An existing
 * out_dir is replaced only with force (and only when it is an ffn model
 * directory or empty); out_dir may never be model_path itself. */
ffn_status ffn_edit_save(ffn_model *model, const char *model_path, const char *tokenizer_path,
                         int tokenizer_is_llama2c, const char *out_dir, int force);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif /* FFN_EDIT_H */
