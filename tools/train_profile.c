/* train_profile.c -- printing the step profile of `ffn train --profile`:
 * per part of the step, seconds per step and share of the measured step
 * time; the weight matrix products' achieved GFLOP/s and their share of
 * the FMA peak (measured once, after training, by `ffn bench peak`'s code).
 * The measuring itself is the library's (src/nn/model.c, src/train/train.c). */
#include "train_profile.h"

static double parts_sum(const ffn_profile *p) {
    double s = 0.0;
    for (int k = 0; k < FFN_PROFILE_PARTS; k++) s += p->seconds[k];
    return s;
}

static double product_gflops(const ffn_profile *p) {
    return p->product_seconds > 0 ? p->product_flops / p->product_seconds * 1e-9 : 0.0;
}

void train_profile_table(FILE *f, const ffn_profile *p, double peak, int threads) {
    const double steps = p->steps > 0 ? (double)p->steps : 1.0;
    const double step = p->step_seconds / steps, sum = parts_sum(p);
    fprintf(f, "ffn train: profile of %lld steps on %d threads, %.4f s per step (wall clock)\n",
            (long long)p->steps, threads, step);
    fprintf(f, "  %-14s %10s %7s\n", "part", "ms/step", "share");
    for (int k = 0; k < FFN_PROFILE_PARTS; k++)
        fprintf(f, "  %-14s %10.2f %6.1f%%\n", ffn_profile_part_name((ffn_profile_part)k),
                1e3 * p->seconds[k] / steps,
                p->step_seconds > 0 ? 100.0 * p->seconds[k] / p->step_seconds : 0.0);
    fprintf(f, "  %-14s %10.2f %6.1f%%  (of the measured step time)\n", "sum", 1e3 * sum / steps,
            p->step_seconds > 0 ? 100.0 * sum / p->step_seconds : 0.0);
    const double g = product_gflops(p);
    fprintf(f, "  matrix products (projections, FFN, head): %.2f GFLOP per step in %.2f ms, "
            "%.1f GFLOP/s", p->product_flops / steps * 1e-9, 1e3 * p->product_seconds / steps, g);
    if (peak > 0) fprintf(f, " = %.1f%% of the %.1f GFLOP/s FMA peak\n", 100.0 * g / peak, peak);
    else fprintf(f, " (no FMA peak measured)\n");
}

void train_profile_json(FILE *f, const ffn_profile *p, double peak, int threads) {
    const double g = product_gflops(p);
    fprintf(f, "\"profile\": {\"steps\": %lld, \"threads\": %d, \"step_seconds\": %.6f, "
            "\"parts_seconds\": %.6f, \"seconds\": {", (long long)p->steps, threads,
            p->step_seconds, parts_sum(p));
    for (int k = 0; k < FFN_PROFILE_PARTS; k++)
        fprintf(f, "%s\"%s\": %.6f", k ? ", " : "", ffn_profile_part_name((ffn_profile_part)k),
                p->seconds[k]);
    fprintf(f, "}, \"product_flops\": %.0f, \"product_seconds\": %.6f, \"product_gflops\": %.2f, "
            "\"fma_peak_gflops\": ", p->product_flops, p->product_seconds, g);
    if (peak > 0) fprintf(f, "%.2f, \"product_pct_peak\": %.1f}", peak, 100.0 * g / peak);
    else fprintf(f, "null, \"product_pct_peak\": null}");
}
