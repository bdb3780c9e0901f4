/* logits.c -- the softmax over the vocabulary for the analysis tools
 * (analysis/logits.h). */
#include "analysis/logits.h"

#include <math.h>

double ffn_logits_sum_exp(const float *z, int64_t V, double *max) {
    double mx = -INFINITY;
    for (int64_t v = 0; v < V; v++) mx = z[v] > mx ? z[v] : mx;
    double s = 0;
    for (int64_t v = 0; v < V; v++) s += exp((double)z[v] - mx);
    *max = mx;
    return s;
}

double ffn_logits_lse(const float *z, int64_t V) {
    double mx;
    const double s = ffn_logits_sum_exp(z, V, &mx);
    return mx + log(s);
}

void ffn_logits_log_softmax(const float *z, int64_t V, double *out) {
    const double lse = ffn_logits_lse(z, V);
    for (int64_t v = 0; v < V; v++) out[v] = (double)z[v] - lse;
}
