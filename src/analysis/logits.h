/* analysis/logits.h -- the softmax over the vocabulary that the analysis
 * tools share, in double: one pass for the largest logit, one for the sum
 * of exp(z - max); the log-sum-exp, the log-probabilities and single
 * probabilities are built on them, so every tool normalizes a row of
 * logits the same way.  z is a row of V float logits, V >= 1. */
#ifndef FFN_ANALYSIS_LOGITS_H
#define FFN_ANALYSIS_LOGITS_H

#include <stdint.h>

/* Σ_v exp(z[v] - max) with max = max_v z[v] stored in *max. */
double ffn_logits_sum_exp(const float *z, int64_t V, double *max);

/* log Σ_v exp(z[v]) = max + log(Σ exp(z - max)). */
double ffn_logits_lse(const float *z, int64_t V);

/* out[v] = z[v] - lse, the log-probabilities (V). */
void ffn_logits_log_softmax(const float *z, int64_t V, double *out);

#endif /* FFN_ANALYSIS_LOGITS_H */
