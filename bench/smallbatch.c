/* smallbatch.c -- the layer forward at small batches, the three splits side
 * by side in one process (built and run by bench/bench_smallbatch.sh
 * against build/libffn_internal.a):
 *   table   the library's split (ffn_stream_max_n: streaming up to it)
 *   engine  every n on the matrix engine (split forced to 0)
 *   old     streaming only up to FFN_DECODE_MAX_N (the split before the
 *           small-batch kernels)
 * One layer, one set of weights; per token count the three are timed in
 * interleaved rounds (one forward each per round, the minimum kept), so
 * drift on the machine hits them alike.
 *   smallbatch TYPE D F THREADS N...
 * Prints one JSON object per N (times in ms, wall clock unless
 * SMALLBATCH_CPU_TIME=1). */
#include "ffn/layer.h"
#include "kernels/kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* wall time; process CPU time with SMALLBATCH_CPU_TIME=1 (for one thread on
 * a loaded machine: time spent descheduled does not count) */
static clockid_t clock_id = CLOCK_MONOTONIC;
static double now_s(void) {
    struct timespec ts;
    clock_gettime(clock_id, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x243F6A8885A308D3ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: smallbatch TYPE D F THREADS N...\n");
        return 2;
    }
    const char *cpu = getenv("SMALLBATCH_CPU_TIME");
    if (cpu && !strcmp(cpu, "1")) clock_id = CLOCK_PROCESS_CPUTIME_ID;
    const char *type = argv[1];
    int64_t D = atoll(argv[2]), F = atoll(argv[3]);
    int threads = atoi(argv[4]), nn = argc - 5;
    int64_t nmax = 0;
    for (int i = 0; i < nn; i++)
        if (atoll(argv[5 + i]) > nmax) nmax = atoll(argv[5 + i]);
    ffn_act act;
    ffn_mlp_type implied;
    if (ffn_act_parse(type, &act, &implied)) {
        fprintf(stderr, "smallbatch: %s\n", ffn_last_error());
        return 2;
    }
    ffn_layer_config cfg = {.hidden_size = D, .intermediate_size = F, .act = act,
                            .type = implied == FFN_MLP_GATED ? FFN_MLP_GATED : FFN_MLP_DENSE,
                            .save = FFN_SAVE_ACTIVATIONS};
    ffn_ctx *ctx = NULL;
    ffn_layer *l = NULL;
    ffn_status st = ffn_ctx_create(threads, &ctx);
    if (!st) st = ffn_layer_create(ctx, &cfg, &l);
    int gated = cfg.type == FFN_MLP_GATED;
    size_t wn = (size_t)(D * F);
    float *w = malloc(3 * wn * sizeof *w), *x = malloc((size_t)(nmax * D) * sizeof *x),
          *y = malloc((size_t)(nmax * D) * sizeof *y);
    size_t ws_bytes = l ? ffn_layer_workspace_size(l, nmax) : 0;
    void *ws = malloc(ws_bytes ? ws_bytes : 1);
    if (st || !w || !x || !y || !ws) {
        fprintf(stderr, "smallbatch: %s\n", st ? ffn_last_error() : "out of memory");
        return 1;
    }
    float scale = 0.03f;
    for (size_t i = 0; i < 3 * wn; i++) w[i] = frand() * scale;
    for (int64_t i = 0; i < nmax * D; i++) x[i] = frand();
    ffn_layer_params p = {gated ? w : NULL, NULL, w + wn, NULL, w + 2 * wn, NULL};
    if ((st = ffn_layer_set_weights(l, &p))) {
        fprintf(stderr, "smallbatch: %s\n", ffn_last_error());
        return 1;
    }
    int packed = ffn_simd() == FFN_SIMD_AVX512; /* as the layer decides (views exist) */
    ffn_stream_force_max_n(-1);
    int64_t table = ffn_stream_max_n(packed);
    const int64_t modes[3] = {-1, 0, FFN_DECODE_MAX_N};
    const char *names[3] = {"table", "engine", "old"};
    double flops_tok = (double)ffn_layer_flops_per_token(&cfg);
    double wbytes = 4.0 * (double)ffn_layer_num_params(&cfg);
    for (int i = 0; i < nn; i++) {
        int64_t n = atoll(argv[5 + i]);
        double best[3], t1 = 0;
        for (int m = 0; m < 3; m++) { /* warm up: primitives, packs, caches */
            ffn_stream_force_max_n(modes[m]);
            double t0 = now_s();
            st = ffn_layer_forward(l, y, x, n, NULL, ws, ws_bytes);
            t1 += now_s() - t0;
            best[m] = 1e30;
        }
        int rounds = t1 > 0 ? (int)(0.6 / t1) : 30;
        rounds = rounds < 5 ? 5 : rounds > 40 ? 40 : rounds;
        for (int r = 0; r < rounds && !st; r++)
            for (int m = 0; m < 3 && !st; m++) {
                ffn_stream_force_max_n(modes[m]);
                double t0 = now_s();
                st = ffn_layer_forward(l, y, x, n, NULL, ws, ws_bytes);
                double t = now_s() - t0;
                if (t < best[m]) best[m] = t;
            }
        ffn_stream_force_max_n(-1);
        if (st) {
            fprintf(stderr, "smallbatch: n=%lld: %s\n", (long long)n, ffn_last_error());
            return 1;
        }
        printf("{\"bench\": \"smallbatch\", \"peer\": \"ffn\", \"type\": \"%s\", \"hidden\": %lld, "
               "\"intermediate\": %lld, \"tokens\": %lld, \"threads\": %d, \"simd\": \"%s\", "
               "\"stream_max_n\": %lld, \"rounds\": %d, \"clock\": \"%s\", \"flops\": %.0f, "
               "\"weight_bytes\": %.0f",
               type, (long long)D, (long long)F, (long long)n, ffn_ctx_threads(ctx),
               ffn_simd_level(), (long long)table, rounds,
               clock_id == CLOCK_MONOTONIC ? "wall" : "cpu", flops_tok * (double)n, wbytes);
        for (int m = 0; m < 3; m++) printf(", \"%s_ms\": %.4f", names[m], best[m] * 1e3);
        printf("}\n");
        fflush(stdout);
    }
    free(w), free(x), free(y), free(ws);
    ffn_layer_free(l);
    ffn_ctx_free(ctx);
    return 0;
}
