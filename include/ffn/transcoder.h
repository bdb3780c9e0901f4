/* ffn/transcoder.h -- transcoders and sparse autoencoders of one FFN
 * layer: a wide sparse layer trained on the model's own activations, whose
 * features (not the FFN's neurons) are the units to read.
 *
 * Part of the public API; include <ffn.h>, not this file.
 *
 * Letters:  n rows (tokens), D hidden_size, Fp features (the wide layer's
 *           width), k active features per row.
 *
 * ---- The layer ---------------------------------------------------------------
 *   pre  = x · W_encᵀ + b_enc                         (n, Fp)
 *   a    = relu(TopK_k(pre))   the k largest of each row kept (ties: the
 *                              lower index), the rest 0, then relu
 *   ŷ    = a · W_dec + b_dec  [+ x · W_skipᵀ]         (n, D)
 * W_enc (Fp, D), b_enc (Fp), W_dec (Fp, D) with unit-norm rows (a
 * feature's decoder row is its direction in the output), b_dec (D),
 * W_skip (D, D) only with a skip connection.
 *   transcoder  x = layers.L.mlp_in (the FFN's input), y = layers.L.mlp_out
 *               (its output): a sparse stand-in for the FFN;
 *   sae         x = y = layers.L.mlp_out: a sparse autoencoder of the
 *               FFN's output (no skip), for comparison.
 *
 * ---- The objective -------------------------------------------------------------
 *   fvu  = Σ |ŷ − y|² / Σ |y − ȳ|²   over the batch (ȳ its mean row);
 *   aux  = AuxK (Gao et al. 2024) for dead features: e = y − ŷ (a
 *          constant), ê = relu(TopK_kaux over dead features of pre)·W_dec
 *          (no bias), aux = min(n_dead / k_aux, 1) · Σ|ê − e|² / Σ|e − ē|²;
 *          k_aux = min(k_aux, n_dead); 0 when no feature is dead;
 *   loss = fvu + aux_coef · aux.
 * A feature is dead once it has not been active (a > 0) in the last
 * dead_tokens training rows.  Adam (β 0.9, 0.999, ε 1e-8, bias-corrected,
 * no weight decay) updates every tensor; before it the gradient of each
 * decoder row loses its component along the row, after it each decoder
 * row is scaled back to norm 1.
 *
 * ---- Files -------------------------------------------------------------------------
 * A transcoder is one safetensors file: encoder.weight, encoder.bias,
 * decoder.weight, decoder.bias [, skip.weight] (F32) and the metadata key
 * "ffn_transcoder" holding its JSON config ({"format": "ffn-transcoder",
 * "version": 1, "kind", "layer", "d_model", "features", "k", "skip",
 * "input", "output", "k_aux", "aux_coef", "dead_tokens"}).  A training
 * state adds adam.m, adam.v (every parameter, in that order, flattened),
 * last_fired (I64, Fp) and the metadata "step" and "tokens".  Both are
 * written atomically.
 *
 * Nothing here prints.  Bad arguments are FFN_ERR_INVALID_ARG, a bad file
 * FFN_ERR_FORMAT naming the file and the key. */
#ifndef FFN_TRANSCODER_H
#define FFN_TRANSCODER_H
#pragma GCC visibility push(default)

#include "core.h"
#include "model.h"
#include "tap.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ffn_tc_kind {
    FFN_TC_KIND_TRANSCODER = 0,
    FFN_TC_KIND_SAE
} ffn_tc_kind;

const char *ffn_tc_kind_name(ffn_tc_kind kind); /* "transcoder", "sae"; NULL out of range */

typedef struct ffn_tc_config {
    ffn_tc_kind kind;
    int64_t layer;       /* the model's layer it reads */
    int64_t d_model;     /* D */
    int64_t features;    /* Fp */
    int64_t k;           /* 1 <= k <= Fp */
    int skip;            /* 1: a D x D skip connection (transcoder only) */
    int64_t k_aux;       /* AuxK's k (0: no AuxK) */
    double aux_coef;     /* AuxK's weight */
    int64_t dead_tokens; /* rows without firing before a feature counts as dead */
} ffn_tc_config;

/* k_aux = D/2, aux_coef 1/32, dead_tokens 10000, no skip. */
void ffn_tc_config_default(ffn_tc_config *cfg, ffn_tc_kind kind, int64_t layer, int64_t d_model,
                           int64_t features, int64_t k);

typedef struct ffn_transcoder ffn_transcoder;

/* A new layer: decoder rows Gaussian, scaled to norm 1; the encoder their
 * copy (W_enc = W_dec); biases and skip zero (b_dec is set from the first
 * training batch: its mean row, and the encoder scaled there so that the
 * features' part of the output has the norm of y − ȳ). */
ffn_status ffn_tc_create(const ffn_tc_config *cfg, uint64_t seed, ffn_transcoder **out);
void ffn_tc_free(ffn_transcoder *tc); /* NULL is a no-op */
const ffn_tc_config *ffn_tc_get_config(const ffn_transcoder *tc);

/* The tensors (row-major, owned by tc; W_skip NULL without skip). */
typedef struct ffn_tc_weights {
    float *W_enc, *b_enc, *W_dec, *b_dec, *W_skip;
} ffn_tc_weights;
ffn_tc_weights ffn_tc_get_weights(ffn_transcoder *tc);
/* Training so far: optimizer steps and rows seen. */
void ffn_tc_progress(const ffn_transcoder *tc, int64_t *step, int64_t *tokens);

/* Forward for rows x (n, D): y_hat (n, D) (may be NULL) and the codes,
 * idx (n, k) and val (n, k), the k selected features of each row and
 * their activations (>= 0; 0 where relu cut a selected one); either may be
 * NULL.  Uses the context's threads. */
ffn_status ffn_tc_forward(const ffn_ctx *ctx, ffn_transcoder *tc, const float *x, int64_t n,
                          float *y_hat, int32_t *idx, float *val);

/* Batch statistics of a training step or an evaluation. */
typedef struct ffn_tc_stats {
    double loss;     /* fvu + aux_coef · aux */
    double fvu;      /* of this batch */
    double aux;      /* AuxK term (unweighted), 0 when no feature is dead */
    double sse, sst; /* Σ|ŷ − y|², Σ|y − ȳ|² */
    double l0;       /* mean active features (a > 0) per row */
    int64_t n_dead;  /* dead features when the step ran */
} ffn_tc_stats;

/* Loss and gradients for x, y (n, D) (y may equal x): the gradients are
 * kept inside tc (overwritten, not accumulated) and *stats filled.  dead
 * (Fp, 0/1) may be given to override the dead features of the counters
 * (tests); NULL: from the counters.  Does not change the weights or the
 * counters.  On the first step of a new layer b_dec is the batch's mean
 * row first. */
ffn_status ffn_tc_loss_grad(const ffn_ctx *ctx, ffn_transcoder *tc, const float *x,
                            const float *y, int64_t n, const unsigned char *dead,
                            ffn_tc_stats *stats);
/* The gradients of the last ffn_tc_loss_grad, as ffn_tc_get_weights. */
ffn_tc_weights ffn_tc_get_grads(ffn_transcoder *tc);
/* One Adam step with the gradients of the last ffn_tc_loss_grad (the
 * decoder rows' parallel part removed first, rows renormalised after);
 * then the firing counters of that batch are counted. */
ffn_status ffn_tc_adam_step(const ffn_ctx *ctx, ffn_transcoder *tc, double lr);

/* The dense matrix products since the layer was created or loaded: the
 * encoder's x·W_encᵀ and, with skip, x·W_skipᵀ and its weight gradient, in
 * every forward and loss_grad.  *flops counts 2 a multiply-add, *seconds
 * is their wall-clock time (either may be NULL).  The rest of a step is
 * sparse (O(n·k·D)): the step time less *seconds. */
void ffn_tc_products(const ffn_transcoder *tc, double *flops, double *seconds);

/* Features dead by the counters (out: Fp bytes, 0/1); returns how many. */
int64_t ffn_tc_dead(const ffn_transcoder *tc, unsigned char *out);

/* Save the layer (with_state 0) or the layer and its training state
 * (with_state 1) to path, atomically, replacing what is there. */
ffn_status ffn_tc_save(const ffn_transcoder *tc, const char *path, int with_state);
/* Load a file of ffn_tc_save (its training state when the file has one). */
ffn_status ffn_tc_load(const char *path, ffn_transcoder **out);
/* The same from size bytes in memory (name for messages). */
ffn_status ffn_tc_load_buffer(const void *data, size_t size, const char *name,
                              ffn_transcoder **out);

/* ---- With a model ----------------------------------------------------------------
 * The rows a transcoder of `kind` at `layer` reads and reproduces, from
 * the model's own forward on tokens (B, T) (through taps; the caller's
 * own taps are set aside and restored): x (B·T, D), y (B·T, D) (for an
 * SAE both the FFN's output), and the model's loss on the next tokens
 * (targets: tokens shifted by one, the last of each row ignored; NULL to
 * skip).  B·T <= the model's rows. */
ffn_status ffn_tc_capture(ffn_model *model, ffn_tc_kind kind, int64_t layer,
                          const int32_t *tokens, int64_t B, int64_t T, float *x, float *y,
                          double *loss);

typedef struct ffn_tc_eval {
    double fvu;            /* Σ|ŷ − y|² / Σ|y − ȳ|² over every evaluated row */
    double mse;            /* Σ|ŷ − y|² / (rows · D) */
    double l0;             /* mean active features per row */
    int64_t dead;          /* features never active on these rows */
    int64_t rows;          /* rows evaluated */
    double loss_original;  /* the model's mean next-token loss */
    double loss_replaced;  /* with layer L's mlp_out replaced by ŷ (the SAE's
                              reconstruction for an SAE) at every position */
    double loss_zero;      /* with layer L's mlp_out set to 0 */
    double loss_recovered; /* (zero − replaced) / (zero − original) */
} ffn_tc_eval;

/* Evaluate on `windows` windows of T tokens from tokens (n_tok), one after
 * another from the start (B = 1 each; T = min(model's max_seq, n_tok-1)). */
ffn_status ffn_tc_evaluate(const ffn_ctx *ctx, ffn_model *model, ffn_transcoder *tc,
                           const int32_t *tokens, int64_t n_tok, int64_t windows,
                           ffn_tc_eval *out);

/* ---- Reading a feature ------------------------------------------------------------ */

/* Logit effect of feature j: lens (V) = U · (g ⊙ d_j), d_j its decoder row,
 * g the final norm's weight, U the output embedding (as
 * ffn_inspect_value_logits for a neuron's value vector). */
ffn_status ffn_tc_feature_logits(ffn_model *model, const ffn_transcoder *tc, int64_t feature,
                                 float *lens);

/* The codes of every position of tokens (n_tok), run through the model in
 * consecutive windows of at most max_seq tokens (B = 1): idx (n_tok, k) and
 * val (n_tok, k) as ffn_tc_forward. */
ffn_status ffn_tc_codes(const ffn_ctx *ctx, ffn_model *model, ffn_transcoder *tc,
                        const int32_t *tokens, int64_t n_tok, int32_t *idx, float *val);

/* The n_top positions of tokens (n_tok) where feature j is most active
 * (by ffn_tc_codes): at (n_top) positions, act (n_top) activations, largest
 * first (equal: earlier first); *n_found <= n_top of them are > 0. */
ffn_status ffn_tc_top_activations(const ffn_ctx *ctx, ffn_model *model, ffn_transcoder *tc,
                                  int64_t feature, const int32_t *tokens, int64_t n_tok,
                                  int64_t n_top, int64_t *at, float *act, int64_t *n_found);

/* ---- As a tap: layers.L.tc_features ------------------------------------------------
 * The features of a transcoder of layer L are a tap like the neurons
 * (layers.L.m): ffn_tc_tap_select keeps the point the transcoder reads
 * (layers.L.mlp_in; an SAE: layers.L.mlp_out) from then on, and after any
 * forward ffn_tc_tap_read gives "layers.L.tc_features", the activations a
 * (rows, Fp) of every row of that forward, dense (0 for the features not
 * selected), computed from the captured rows by ffn_tc_forward.  view
 * (may be NULL) gets rows, cols = Fp, B, T, pos0 and layer of that
 * forward, data = out and point = the point read.  A name other than
 * layers.<tc's layer>.tc_features is FFN_ERR_INVALID_ARG naming it;
 * fewer than the forward's rows in max_rows too. */
char *ffn_tc_tap_name(char *buf, size_t size, int64_t layer);
ffn_status ffn_tc_tap_select(ffn_model *model, const ffn_transcoder *tc);
ffn_status ffn_tc_tap_read(const ffn_ctx *ctx, const ffn_model *model, ffn_transcoder *tc,
                           const char *name, float *out, int64_t max_rows, ffn_tap_view *view);

/* Switching features off or on, as a neuron is switched by a SCALE patch
 * of layers.L.m: feature j at `position` (-1: every position) gets
 * a_j := scale · a_j, i.e. (scale − 1) · a_j · d_j is ADDed to
 * layers.L.mlp_out there; the transcoder's error (y − ŷ) stays in the
 * output, so scale 1 everywhere is the model itself.  Runs tokens (1, T)
 * once with the caller's patches as they are (patches of earlier layers
 * act on a), reads a at layer L and adds one ADD patch on layers.L.mlp_out
 * per position that changes; the next forward of the same tokens sees the
 * edit.  Several edits of one call add their changes.  Call once per
 * layer, earlier layers first; the point ffn_tc_tap_select keeps stays
 * selected. */
typedef struct ffn_tc_feature_edit {
    int64_t feature;
    double scale;     /* 0 switches the feature off */
    int64_t position; /* -1: every position */
} ffn_tc_feature_edit;

ffn_status ffn_tc_patch_features(const ffn_ctx *ctx, ffn_model *model, ffn_transcoder *tc,
                                 const int32_t *tokens, int64_t T,
                                 const ffn_tc_feature_edit *edits, int64_t n_edits);

/* ---- Superposition, measured (src/analysis/purity.c) ---------------------------------
 * Units (neurons, transcoder or SAE features) as columns of act (S, U):
 * one row per sample (e.g. a facts prompt at its last token), label (S)
 * an attribute of each sample in [0, n_classes) (its relation, its
 * object).
 *
 * Purity of unit u: among the n_top samples where u is largest (and > 0),
 * the share that carry the most common label.  Units with fewer than
 * n_top such samples are not scored.  *mean is over the scored units;
 * *chance the same share for n_top samples drawn at random (the mean over
 * `draws` draws of the seeded generator), the floor to compare with. */
ffn_status ffn_purity(const float *act, int64_t S, int64_t U, const int32_t *label,
                      int64_t n_classes, int64_t n_top, double *mean, int64_t *n_scored,
                      double *chance);

/* Linear readout of the label from the m best units: units ranked by the
 * correlation ratio (between-class / total variance on the training
 * samples, is_test[s] = 0), a ridge least-squares classifier (one-hot
 * targets, a bias, lambda = 1e-3 · mean diagonal) fitted on the training
 * samples over the units standardized there, accuracy = share of the test
 * samples whose largest output is their label.  For each m of sizes
 * (n_sizes, each <= U): acc (n_sizes).  *needed = the smallest m of sizes
 * with acc >= target, -1 when none. */
ffn_status ffn_readout(const float *act, int64_t S, int64_t U, const int32_t *label,
                       int64_t n_classes, const unsigned char *is_test, const int64_t *sizes,
                       int64_t n_sizes, double target, double *acc, int64_t *needed);

#ifdef __cplusplus
}
#endif

#pragma GCC visibility pop
#endif /* FFN_TRANSCODER_H */
