/* qknorm.c -- RMSNorm of q and k inside the fused q|k|v rows (Qwen3 per
 * head, OLMoE over the whole projection), forward in place and backward in
 * place.  The rows are strided (row r at x + r·ld) and hold `groups`
 * adjacent groups of w features, each normalised on its own with the one
 * weight vector (w): y = x · rstd · weight, rstd = 1/sqrt(mean(x²) + eps),
 * the sum of squares in double as in norm.c.
 * Letters: N rows, W group width, G groups per row. */
#include "nn/model_internal.h"

#include <math.h>
#include <string.h>

void ffn_group_rmsnorm_forward(float *x, int64_t ld, float *saved, int64_t ld_saved, float *rstd,
                               int64_t n, int64_t groups, int64_t w, const float *weight,
                               float eps) {
#pragma omp parallel for schedule(static) if (n * groups * w > 16384)
    for (int64_t r = 0; r < n; r++) {
        float *xr = x + r * ld;
        if (saved) memcpy(saved + r * ld_saved, xr, (size_t)(groups * w) * sizeof *xr);
        for (int64_t g = 0; g < groups; g++) {
            float *xg = xr + g * w;
            double ss = 0.0;
#pragma omp simd reduction(+ : ss)
            for (int64_t i = 0; i < w; i++) ss += (double)xg[i] * xg[i];
            const float s = (float)(1.0 / sqrt(ss / (double)w + (double)eps));
            if (rstd) rstd[r * groups + g] = s;
#pragma omp simd
            for (int64_t i = 0; i < w; i++) xg[i] = xg[i] * s * weight[i];
        }
    }
}

/* dx holds dy on entry and d(loss)/dx on return; dweight += Σ dy ⊙ x·rstd
 * over rows then groups, in that fixed order. */
void ffn_group_rmsnorm_backward(float *dx, int64_t ld, const float *saved, int64_t ld_saved,
                                const float *rstd, int64_t n, int64_t groups, int64_t w,
                                const float *weight, float *dweight) {
    if (dweight)
        for (int64_t r = 0; r < n; r++)
            for (int64_t g = 0; g < groups; g++) {
                const float *xg = saved + r * ld_saved + g * w, *dy = dx + r * ld + g * w;
                const float s = rstd[r * groups + g];
                for (int64_t i = 0; i < w; i++) dweight[i] += dy[i] * xg[i] * s;
            }
#pragma omp parallel for schedule(static) if (n * groups * w > 16384)
    for (int64_t r = 0; r < n; r++)
        for (int64_t g = 0; g < groups; g++) {
            const float *xg = saved + r * ld_saved + g * w;
            float *d = dx + r * ld + g * w;
            const float s = rstd[r * groups + g];
            double dot = 0.0;
            for (int64_t i = 0; i < w; i++) dot += (double)(d[i] * weight[i]) * xg[i];
            const float cc = (float)(dot / (double)w) * s * s;
            for (int64_t i = 0; i < w; i++) d[i] = s * (d[i] * weight[i] - xg[i] * cc);
        }
}
