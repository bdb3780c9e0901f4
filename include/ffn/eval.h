/* ffn/eval.h -- perplexity of a model over a token stream and, against a
 * reference model, the divergence of their next-token distributions (what
 * llama.cpp's `perplexity --kl-divergence` reports): the measure of what a
 * quantized or otherwise changed model lost.
 *
 * Part of the public API; include <ffn.h>, not this file.
 *
 * Windows.  The stream of N tokens is read in windows of W tokens starting
 * at 0, S, 2S, ... (stride S <= W; the last window ends at the stream's
 * end).  Each window is one forward from position 0.  The first window
 * scores every prediction in it (token t+1 after tokens 0..t); a later
 * window scores only the predictions of tokens not scored before, so each
 * of them sees at least W - S tokens of context and, for S < W, every
 * token but the first is scored exactly once (the strided evaluation of
 * Hugging Face's perplexity guide).  S = W cuts the stream into
 * independent chunks, and the first token of each chunk is not scored.
 *
 * Per scored position with next-token distributions P (the model) and R
 * (the reference), natural logarithms:
 *   nll        -log P(next token), averaged: ppl = exp(mean nll)
 *   KL         KL(R || P) = Σ_v R_v (log R_v - log P_v)
 *   top-1      argmax P == argmax R
 * reported as the mean and the 99th percentile of KL (nearest rank over
 * the scored positions), its maximum, the top-1 agreement and the
 * reference's own perplexity.  Sums are in double, in position order.
 *
 * Memory: logits for one window of each model (W·V floats each) and one
 * double per scored position, allocated by the call (not a hot path).
 *
 * Example:
 *     ffn_eval_options o;  ffn_eval_options_default(&o);  o.window = 128;
 *     ffn_eval_result r;
 *     ffn_eval_run(model, reference, tokens, n, &o, &r);
 *     printf("ppl %.3f  KL %.5f\n", r.ppl, r.kl_mean);
 */
#ifndef FFN_EVAL_H
#define FFN_EVAL_H
#pragma GCC visibility push(default)

#include "core.h"
#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ffn_eval_options {
    int64_t window; /* W: tokens per window (0: the context, max_position_embeddings) */
    int64_t stride; /* S: 0 = W/2 (at least 1) */
    /* called after each window (may be NULL) */
    void (*progress)(void *user, int64_t window, int64_t n_windows);
    void *progress_user;
} ffn_eval_options;

void ffn_eval_options_default(ffn_eval_options *opts); /* window 0, stride 0 */

typedef struct ffn_eval_result {
    int64_t n_tokens;  /* N */
    int64_t n_scored;  /* N - 1 */
    int64_t n_windows;
    int64_t window, stride; /* as used */
    double nll;        /* mean, nats */
    double ppl;        /* exp(nll) */
    /* with a reference (0 without) */
    int has_reference;
    double ref_nll, ref_ppl;
    double kl_mean, kl_p99, kl_max; /* KL(reference || model), nats */
    double top1_agree;              /* fraction of scored positions */
} ffn_eval_result;

/* Evaluate `model` on tokens (n >= 2, ids in [0, V)); reference may be
 * NULL, else it must have the same vocabulary size.  W must fit both
 * models' contexts (FFN_ERR_INVALID_ARG naming the numbers); the models'
 * activations are grown to W with ffn_model_reserve when smaller. */
ffn_status ffn_eval_run(ffn_model *model, ffn_model *reference, const int32_t *tokens, int64_t n,
                        const ffn_eval_options *opts, ffn_eval_result *result);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif /* FFN_EVAL_H */
