/* norm.c -- RMSNorm forward and backward (Zhang & Sennrich 2019, as in
 * Llama):  y = x · rstd · w,  rstd = 1/sqrt(mean(x²) + eps).
 * Letters: N rows, D features.  The sum of squares is taken in double (its
 * rounding then hardly depends on the order the vector lanes impose); the
 * row loop is parallel (rows are independent), the weight-gradient
 * reduction runs over rows in a fixed order. */
#include "nn/model_internal.h"

#include <math.h>

void ffn_rmsnorm_forward(float *y, float *rstd, const float *x, const float *w, int64_t n,
                         int64_t d, float eps) {
    ffn_rmsnorm_forward_offset(y, rstd, x, w, 0.0f, n, d, eps);
}

void ffn_rmsnorm_backward_accumulate(float *dx, float *dw, const float *dy, const float *x,
                                     const float *w, const float *rstd, int64_t n, int64_t d) {
    ffn_rmsnorm_backward_offset(dx, dw, dy, x, w, 0.0f, rstd, n, d);
}

/* The weight is (offset + w): Gemma stores w around 0 and scales by 1 + w. */
void ffn_rmsnorm_forward_offset(float *y, float *rstd, const float *x, const float *w,
                                float offset, int64_t n, int64_t d, float eps) {
#pragma omp parallel for schedule(static) if (n * d > 16384)
    for (int64_t r = 0; r < n; r++) {
        const float *xr = x + r * d;
        float *yr = y + r * d;
        double ss = 0.0;
#pragma omp simd reduction(+ : ss)
        for (int64_t i = 0; i < d; i++) ss += (double)xr[i] * xr[i];
        float s = (float)(1.0 / sqrt(ss / (double)d + (double)eps));
        if (rstd) rstd[r] = s;
#pragma omp simd
        for (int64_t i = 0; i < d; i++) yr[i] = xr[i] * s * (w[i] + offset);
    }
}

/* With u = x·rstd (the normalised row) and g = dy ⊙ w:
 *   dx = rstd · (g − u · mean(g ⊙ u)),   dw = Σ_rows dy ⊙ u. */
void ffn_rmsnorm_backward_offset(float *dx, float *dw, const float *dy, const float *x,
                                 const float *w, float offset, const float *rstd, int64_t n,
                                 int64_t d) {
#pragma omp parallel for schedule(static) if (n * d > 16384)
    for (int64_t r = 0; r < n; r++) {
        const float *xr = x + r * d, *gr = dy + r * d;
        float *dxr = dx + r * d;
        float s = rstd[r];
        double dot = 0.0; /* Σ g ⊙ x */
#pragma omp simd reduction(+ : dot)
        for (int64_t i = 0; i < d; i++) dot += (double)(gr[i] * (w[i] + offset)) * xr[i];
        float c = (float)(dot / (double)d) * s * s; /* mean(g ⊙ u) · rstd (per unit of x) */
#pragma omp simd
        for (int64_t i = 0; i < d; i++) dxr[i] += s * (gr[i] * (w[i] + offset) - xr[i] * c);
    }
    if (!dw) return;
    /* Column sums in row order: each feature's reduction order is fixed. */
    for (int64_t r = 0; r < n; r++) {
        const float *xr = x + r * d, *gr = dy + r * d;
        float s = rstd[r];
#pragma omp simd
        for (int64_t i = 0; i < d; i++) dw[i] += gr[i] * xr[i] * s;
    }
}
