/* qgemm_int8.c -- the prompt-size question of AVX2 machines, timed in one
 * run: the row kernels of ffn_qgemm (ffn_qgemm_at_level), the fp32 panels
 * (ffn_qgemm_panel_f32) and the int8 products (ffn_qgemm_int8), taken in
 * turn REPS times (so a load that comes and goes hits all three alike),
 * the best of each.  Built and run by bench/bench_qgemm_int8.sh against
 * build/libffn_internal.a.
 *   qgemm_int8 TYPE ROWS COLS THREADS REPS N...
 * At 1 thread the times are the thread's CPU time, else wall time.
 * Prints one line per N: GFLOP/s (2·n·rows·cols per call) of each, the
 * ratios int8/rows and int8/panels, the int8 rate as a share of the fp32
 * FMA peak in QGEMM_PEAK (GFLOP/s; 0 without it), and the largest
 * difference of the panels and of int8 from the row kernels relative to
 * max |y|. */
#include "kernels/qgemm.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* At 1 thread the calling thread's CPU time (what a loaded machine's other
 * jobs disturb least), else wall time. */
static int cpu_clock;
static double now_s(void) {
    struct timespec ts;
    clock_gettime(cpu_clock ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: qgemm_int8 TYPE ROWS COLS THREADS REPS N...\n");
        return 2;
    }
    ffn_ggml_type type;
    if (!ffn_ggml_type_parse(argv[1], &type)) return 2;
    int64_t R = atoll(argv[2]), C = atoll(argv[3]);
    int threads = atoi(argv[4]), reps = atoi(argv[5]);
    cpu_clock = threads == 1;
    size_t rb;
    if (ffn_ggml_row_size(type, C, &rb)) return 2;
    uint8_t *w = malloc((size_t)R * rb);
    float *row = malloc((size_t)C * sizeof *row);
    srand(1);
    for (int64_t r = 0; r < R; r++) {
        for (int64_t c = 0; c < C; c++) row[c] = (float)rand() / RAND_MAX - 0.5f;
        ffn_ggml_quantize_row(type, row, w + (size_t)r * rb, C);
    }
    ffn_qweight qw;
    ffn_ctx *ctx;
    if (ffn_qweight_init(&qw, type, R, C, w) || ffn_ctx_create(threads, &ctx)) {
        fprintf(stderr, "%s\n", ffn_last_error());
        return 1;
    }
    const char *pk = getenv("QGEMM_PEAK");
    const double peak = pk ? atof(pk) : 0;
    printf("%-6s %11s %5s %3s %9s %9s %9s %10s %10s %9s %9s %9s\n", "type", "rows×cols", "n", "thr", "rows_GF/s",
           "panel_GF/s", "int8_GF/s", "int8/rows", "int8/panel", "int8_%pk", "panel_d", "int8_d");
    for (int a = 6; a < argc; a++) {
        int64_t n = atoll(argv[a]);
        float *x = malloc((size_t)(n * C) * sizeof *x);
        float *y[3];
        for (int m = 0; m < 3; m++) y[m] = malloc((size_t)(n * R) * sizeof *y[m]);
        for (int64_t i = 0; i < n * C; i++) x[i] = (float)rand() / RAND_MAX - 0.5f;
        double best[3] = {1e30, 1e30, 1e30};
        for (int rep = 0; rep < reps; rep++)
            for (int m = 0; m < 3; m++) {
                double t0 = now_s();
                ffn_status st = m == 0   ? ffn_qgemm_at_level(ctx, ffn_simd(), &qw, x, C, n, y[0], R, 0)
                                : m == 1 ? ffn_qgemm_panel_f32(ctx, &qw, x, C, n, y[1], R, 0)
                                         : ffn_qgemm_int8(ctx, &qw, x, C, n, y[2], R, 0);
                double t = now_s() - t0;
                if (st) {
                    fprintf(stderr, "%s\n", ffn_last_error());
                    return 1;
                }
                if (t < best[m]) best[m] = t;
            }
        double ymax = 0, d1 = 0, d2 = 0;
        for (int64_t i = 0; i < n * R; i++) {
            ymax = fmax(ymax, fabs(y[0][i]));
            d1 = fmax(d1, fabs(y[0][i] - y[1][i]));
            d2 = fmax(d2, fabs(y[0][i] - y[2][i]));
        }
        if (ymax <= 0) ymax = 1;
        double fl = 2.0 * n * R * C * 1e-9;
        char shape[32];
        snprintf(shape, sizeof shape, "%lldx%lld", (long long)R, (long long)C);
        printf("%-6s %11s %5lld %3d %9.1f %9.1f %9.1f %10.2f %10.2f %8.0f%% %9.2e %9.2e\n", argv[1], shape,
               (long long)n, ffn_ctx_threads(ctx), fl / best[0], fl / best[1], fl / best[2], best[0] / best[2],
               best[1] / best[2], peak > 0 ? 100 * fl / best[2] / peak : 0.0, d1 / ymax, d2 / ymax);
        fflush(stdout);
        free(x);
        for (int m = 0; m < 3; m++) free(y[m]);
    }
    ffn_ctx_free(ctx);
    free(w);
    free(row);
    return 0;
}
