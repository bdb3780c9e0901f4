/* qgemm_batch.c -- the large-n question for low-precision weights, timed:
 * the row kernels of ffn_qgemm (int8 activations, VNNI; the weight
 * streamed once per tile of tokens), the bf16 panels decoded inside the
 * call (ffn_qgemm_panel; on a CPU without AVX512_BF16 the fp32 panels
 * ffn_qgemm_panel_f32 instead) and a bf16 copy of the weight with oneDNN's bf16
 * matmul (src/kernels/qgemm_batch.c; the copy is made once, outside the
 * timing; x's conversion to bf16 is timed).  Built and run by
 * bench/qgemm_batch.sh against build/libffn_internal.a.
 *   qgemm_batch TYPE ROWS COLS THREADS N...
 * Prints one line per N: the best of 3 (at least 0.2 s) of each, GFLOP/s,
 * and the largest difference of the panels and of oneDNN from the row
 * kernels, relative to max |y|. */
#include "kernels/qgemm.h"
#include "kernels/qgemm_batch.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: qgemm_batch TYPE ROWS COLS THREADS N...\n");
        return 2;
    }
    ffn_ggml_type type;
    if (!ffn_ggml_type_parse(argv[1], &type)) return 2;
    int64_t R = atoll(argv[2]), C = atoll(argv[3]);
    int threads = atoi(argv[4]);
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
    printf("%-5s %5s %7s %9s %9s %9s %9s %9s %9s %9s %9s\n", "type", "n", "threads", "rows_ms",
           "rows_GF/s", "panel_ms", "panel_GF/s", "dnn_ms", "dnn_GF/s", "panel_d", "dnn_d");
    for (int a = 5; a < argc; a++) {
        int64_t n = atoll(argv[a]);
        float *x = malloc((size_t)(n * C) * sizeof *x);
        float *y1 = malloc((size_t)(n * R) * sizeof *y1), *y2 = malloc((size_t)(n * R) * sizeof *y2);
        float *y3 = malloc((size_t)(n * R) * sizeof *y3);
        for (int64_t i = 0; i < n * C; i++) x[i] = (float)rand() / RAND_MAX - 0.5f;
        /* a path this CPU cannot run (the panels and oneDNN's bf16 matmul
         * without AVX512_BF16) is refused: its columns print n/a */
        ffn_qgemm_bf16mm *mm = NULL;
        int na[3] = {0, 0, 0};
        if (ffn_qgemm_bf16mm_create(&qw, &mm)) {
            fprintf(stderr, "oneDNN bf16 matmul: n/a here: %s\n", ffn_last_error());
            na[2] = 1;
        }
        double best[3] = {1e30, 1e30, 1e30};
        const int f32_panels = ffn_qgemm_panel_min_n(type) == INT64_MAX; /* no bf16 panels here */
        for (int method = 0; method < 3; method++) {
            double spent = 0;
            for (int rep = 0; !na[method] && (rep < 3 || spent < 0.2); rep++) {
                double t0 = now_s();
                ffn_status st = method == 2 ? ffn_qgemm_bf16mm_run(mm, ctx, x, C, n, y2, R, 0)
                                : method == 1 ? (f32_panels ? ffn_qgemm_panel_f32 : ffn_qgemm_panel)(
                                                    ctx, &qw, x, C, n, y3, R, 0)
                                              : ffn_qgemm_at_level(ctx, ffn_simd(), &qw, x, C, n, y1, R, 0);
                double t = now_s() - t0;
                if (st == FFN_ERR_UNSUPPORTED && method > 0 && rep == 0) {
                    fprintf(stderr, "%s: n/a here: %s\n", method == 1 ? "panels" : "oneDNN bf16",
                            ffn_last_error());
                    na[method] = 1;
                    break;
                }
                if (st) {
                    fprintf(stderr, "%s\n", ffn_last_error());
                    return 1;
                }
                spent += t;
                if (t < best[method]) best[method] = t;
            }
        }
        double ymax = 0, dmax = 0, pmax = 0;
        for (int64_t i = 0; i < n * R; i++) {
            ymax = fmax(ymax, fabs(y1[i]));
            if (!na[2]) dmax = fmax(dmax, fabs(y1[i] - y2[i]));
            if (!na[1]) pmax = fmax(pmax, fabs(y1[i] - y3[i]));
        }
        double fl = 2.0 * n * R * C * 1e-9;
        if (ymax <= 0) ymax = 1;
        char col[3][2][16], dif[3][16];
        for (int m = 0; m < 3; m++) {
            if (na[m]) {
                snprintf(col[m][0], 16, "n/a"), snprintf(col[m][1], 16, "n/a"), snprintf(dif[m], 16, "n/a");
                continue;
            }
            snprintf(col[m][0], 16, "%.3f", best[m] * 1e3);
            snprintf(col[m][1], 16, "%.1f", fl / best[m]);
            snprintf(dif[m], 16, "%.2e", (m == 1 ? pmax : dmax) / ymax);
        }
        printf("%-5s %5lld %7d %9s %9s %9s %9s %9s %9s %9s %9s\n", argv[1], (long long)n,
               ffn_ctx_threads(ctx), col[0][0], col[0][1], col[1][0], col[1][1], col[2][0],
               col[2][1], dif[1], dif[2]);
        ffn_qgemm_bf16mm_free(mm);
        free(x); free(y1); free(y2); free(y3);
    }
    ffn_ctx_free(ctx);
    free(w); free(row);
    return 0;
}
