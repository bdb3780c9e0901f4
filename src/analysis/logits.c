/* logits.c -- the softmax over the vocabulary for the analysis tools
 * (analysis/logits.h), and p(target) after one forward. */
#include "analysis/logits.h"

#include <math.h>
#include <string.h>

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

double ffn_logits_ce_grad(float *z, int64_t V, int32_t y, double f) {
    double mx;
    const double s = ffn_logits_sum_exp(z, V, &mx);
    const double loss = f * (log(s) + mx - z[y]);
    for (int64_t k = 0; k < V; k++) z[k] = (float)(f * exp(z[k] - mx) / s);
    z[y] -= (float)f;
    return loss;
}

float *ffn_logits_grad_row(float *lg, int64_t r0, int64_t rows, int64_t V, int64_t row) {
    float *keep = NULL;
    for (int64_t r = 0; r < rows; r++) {
        float *z = lg + r * V;
        if (r0 + r == row) keep = z;
        else memset(z, 0, (size_t)V * sizeof *z);
    }
    return keep;
}

ffn_status ffn_logits_last_prob(ffn_model *m, const int32_t *tokens, int64_t T, int32_t target,
                                float *logits, double *p, int32_t *top) {
    ffn_status st = ffn_model_logits(m, logits, tokens, 1, T);
    if (st) return st;
    const int64_t V = ffn_model_get_config(m)->vocab_size;
    const float *z = logits + (T - 1) * V;
    double mx;
    const double s = ffn_logits_sum_exp(z, V, &mx);
    if (p) *p = target >= 0 ? exp((double)z[target] - mx) / s : NAN;
    if (top) {
        int32_t best = 0;
        for (int32_t v = 1; v < V; v++)
            if (z[v] > z[best]) best = v;
        *top = best;
    }
    return FFN_OK;
}
