/* analysis/logits.h -- the softmax over the vocabulary that the analysis
 * tools share, in double: one pass for the largest logit, one for the sum
 * of exp(z - max); the log-sum-exp, the log-probabilities and single
 * probabilities are built on them, so every tool normalizes a row of
 * logits the same way.  z is a row of V float logits, V >= 1. */
#ifndef FFN_ANALYSIS_LOGITS_H
#define FFN_ANALYSIS_LOGITS_H

#include "ffn/model.h"

#include <stdint.h>

/* Σ_v exp(z[v] - max) with max = max_v z[v] stored in *max. */
double ffn_logits_sum_exp(const float *z, int64_t V, double *max);

/* log Σ_v exp(z[v]) = max + log(Σ exp(z - max)). */
double ffn_logits_lse(const float *z, int64_t V);

/* out[v] = z[v] - lse, the log-probabilities (V). */
void ffn_logits_log_softmax(const float *z, int64_t V, double *out);

/* Cross-entropy on one row of logits z (V), scaled by f: returns
 * f * -log softmax(z)[y] and replaces z by its gradient
 * f * (softmax(z) - onehot(y)). */
double ffn_logits_ce_grad(float *z, int64_t V, int32_t y, double f);

/* For a loss at one row of the sequence: of the block of logit rows
 * r0 .. r0+rows-1 (rows, V) given to an ffn_logits_grad_fn, every row but
 * `row` is zeroed (its gradient: none); returns row `row`, or NULL when
 * the block does not hold it. */
float *ffn_logits_grad_row(float *lg, int64_t r0, int64_t rows, int64_t V, int64_t row);

/* One forward of the T tokens (one sequence) under the model's current
 * taps, its logits into logits (T, V); *p = p(target) at the last position
 * (target < 0: NaN) and *top its top-1 token (the first of equals); either
 * may be NULL. */
ffn_status ffn_logits_last_prob(ffn_model *m, const int32_t *tokens, int64_t T, int32_t target,
                                float *logits, double *p, int32_t *top);

#endif /* FFN_ANALYSIS_LOGITS_H */
