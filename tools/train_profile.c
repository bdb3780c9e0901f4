/* train_profile.c -- printing the step profile of `ffn train --profile`:
 * per part of the step, seconds per step and share of the measured step
 * time; the weight matrix products' achieved GFLOP/s and their share of
 * the FMA peak (measured once, after training, by `ffn bench peak`'s code).
 * The measuring itself is the library's (src/nn/model.c, src/train/train.c). */
#include "train_profile.h"
#include "cli.h"

#include <math.h>

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
    fprintf(f,
            "\"profile\": {\"steps\": %lld, \"threads\": %d, \"step_seconds\": %s, "
            "\"parts_seconds\": %s, \"seconds\": {",
            (long long)p->steps, threads, cli_json_num(p->step_seconds, "%.6f"),
            cli_json_num(parts_sum(p), "%.6f"));
    for (int k = 0; k < FFN_PROFILE_PARTS; k++)
        fprintf(f, "%s\"%s\": %s", k ? ", " : "", ffn_profile_part_name((ffn_profile_part)k),
                cli_json_num(p->seconds[k], "%.6f"));
    fprintf(f,
            "}, \"product_flops\": %s, \"product_seconds\": %s, \"product_gflops\": %s, "
            "\"fma_peak_gflops\": ",
            cli_json_num(p->product_flops, "%.0f"), cli_json_num(p->product_seconds, "%.6f"),
            cli_json_num(g, "%.2f"));
    if (peak > 0)
        fprintf(f, "%s, \"product_pct_peak\": %s}", cli_json_num(peak, "%.2f"), cli_json_num(100.0 * g / peak, "%.1f"));
    else fprintf(f, "null, \"product_pct_peak\": null}");
}

/* Per step: compute, communication, waiting (seconds) and the hidden share
 * (NAN when nothing was communicated). */
static void comm_parts(const ffn_profile *p, const ffn_dist_grad_stats *g, double out[4]) {
    const double steps = g->calls > 0 ? (double)g->calls : 1.0;
    const double ps = p->steps > 0 ? (double)p->steps : 1.0;
    out[1] = g->comm_seconds / steps;
    out[2] = g->wait_seconds / steps;
    out[0] = p->step_seconds / ps - out[2];
    double h = out[1] > 0 ? 1.0 - out[2] / out[1] : NAN;
    out[3] = isnan(h) ? h : h < 0 ? 0.0 : h > 1 ? 1.0 : h;
}

void train_profile_comm_table(FILE *f, const ffn_profile *p, const ffn_dist_grad_stats *g,
                              int overlap) {
    double c[4];
    comm_parts(p, g, c);
    fprintf(f, "  gradient sums (--overlap %d, rank 0): compute %.2f ms/step, communication "
            "%.2f ms/step (first bucket's start to last's end), waiting %.2f ms/step, hidden ",
            overlap, 1e3 * c[0], 1e3 * c[1], 1e3 * c[2]);
    if (isnan(c[3])) fprintf(f, "-\n");
    else fprintf(f, "%.1f%%\n", 100.0 * c[3]);
}

void train_profile_comm_json(FILE *f, const ffn_profile *p, const ffn_dist_grad_stats *g,
                             int overlap) {
    double c[4];
    comm_parts(p, g, c);
    fprintf(f, "\"comm\": {\"overlap\": %d, \"compute_s_per_step\": %s, \"comm_s_per_step\": %s, "
            "\"wait_s_per_step\": %s, \"hidden_share\": %s}", overlap,
            cli_json_num(c[0], "%.6f"), cli_json_num(c[1], "%.6f"), cli_json_num(c[2], "%.6f"),
            isnan(c[3]) ? "null" : cli_json_num(c[3], "%.4f"));
}
