/* layernorm.c -- LayerNorm with weight and bias (GPT-2), forward and
 * backward:  y = (x − mean) · rstd · w + b,  rstd = 1/sqrt(var + eps),
 * var the biased variance of the row.  Letters: N rows, D features.  As in
 * norm.c the row sums are taken in double, the row loop is parallel and
 * the weight / bias gradients are reduced over rows in a fixed order.
 * Backward recomputes the row mean from x (the same double sum as the
 * forward) rather than keeping it. */
#include "nn/model_internal.h"

#include <math.h>

static double row_mean(const float *x, int64_t d) {
    double s = 0.0;
    for (int64_t i = 0; i < d; i++) s += x[i];
    return s / (double)d;
}

void ffn_layernorm_forward(float *y, float *rstd, const float *x, const float *w, const float *b,
                           int64_t n, int64_t d, float eps) {
#pragma omp parallel for schedule(static) if (n * d > 16384)
    for (int64_t r = 0; r < n; r++) {
        const float *xr = x + r * d;
        float *yr = y + r * d;
        const double mu = row_mean(xr, d);
        double ss = 0.0;
        for (int64_t i = 0; i < d; i++) ss += ((double)xr[i] - mu) * ((double)xr[i] - mu);
        const float s = (float)(1.0 / sqrt(ss / (double)d + (double)eps)), m = (float)mu;
        if (rstd) rstd[r] = s;
        for (int64_t i = 0; i < d; i++) yr[i] = (xr[i] - m) * s * w[i] + b[i];
    }
}

/* With u = (x − mean)·rstd and g = dy ⊙ w:
 *   dx = rstd · (g − mean(g) − u · mean(g ⊙ u)),  dw = Σ dy ⊙ u,  db = Σ dy. */
void ffn_layernorm_backward_accumulate(float *dx, float *dw, float *db, const float *dy,
                                       const float *x, const float *w, const float *rstd,
                                       int64_t n, int64_t d) {
#pragma omp parallel for schedule(static) if (n * d > 16384)
    for (int64_t r = 0; r < n; r++) {
        const float *xr = x + r * d, *gr = dy + r * d;
        float *dxr = dx + r * d;
        const float s = rstd[r], m = (float)row_mean(xr, d);
        double sg = 0.0, sgu = 0.0;
        for (int64_t i = 0; i < d; i++) {
            const double g = (double)gr[i] * w[i];
            sg += g;
            sgu += g * (double)((xr[i] - m) * s);
        }
        const float mg = (float)(sg / (double)d), mgu = (float)(sgu / (double)d);
        for (int64_t i = 0; i < d; i++)
            dxr[i] += s * (gr[i] * w[i] - mg - (xr[i] - m) * s * mgu);
    }
    for (int64_t r = 0; r < n; r++) {
        const float *xr = x + r * d, *gr = dy + r * d;
        const float s = rstd[r], m = (float)row_mean(xr, d);
        if (dw)
            for (int64_t i = 0; i < d; i++) dw[i] += gr[i] * (xr[i] - m) * s;
        if (db)
            for (int64_t i = 0; i < d; i++) db[i] += gr[i];
    }
}
