/* wgrad_kernel.c -- the weight-gradient product C (M, N) += Aᵀ·B with
 * small K, three ways in one process, interleaved: ffn_wgrad_mt (the
 * register-tiled kernel), ffn_gemm (oneDNN's dnnl_sgemm) and oneDNN's
 * matmul primitive (brgemm, plain operands, sum post-op).  Prints one line
 * per engine: min ms over the repeats, GFLOP/s, and the ratio to the
 * fastest oneDNN engine; also the minimum process CPU time and its ratio
 * (steadier than wall time on a shared machine; the sum over threads).  Built and run by bench/bench_backward.sh.
 *   wgrad_kernel M N K THREADS [REPEATS] */
#include "kernels/kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: wgrad_kernel M N K THREADS [REPEATS]\n");
        return 2;
    }
    int64_t M = atoll(argv[1]), N = atoll(argv[2]), K = atoll(argv[3]);
    int threads = atoi(argv[4]), reps = argc > 5 ? atoi(argv[5]) : 10;
    if (M <= 0 || N <= 0 || K <= 0 || threads <= 0 || reps <= 0) {
        fprintf(stderr, "wgrad_kernel: sizes, threads and repeats must be positive\n");
        return 2;
    }
    ffn_ctx *ctx;
    if (ffn_ctx_create(threads, &ctx)) return 1;
    float *A = ffn_malloc_aligned((size_t)(K * M) * 4), *B = ffn_malloc_aligned((size_t)(K * N) * 4);
    float *C = ffn_malloc_aligned((size_t)(M * N) * 4);
    if (!A || !B || !C) return 1;
    for (int64_t i = 0; i < K * M; i++) A[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
    for (int64_t i = 0; i < K * N; i++) B[i] = (float)((i * 104729) % 1000) * 1e-3f - 0.5f;
    memset(C, 0, (size_t)(M * N) * 4);

    ffn_mm_engine *eng = NULL;
    ffn_mm *mm = NULL;
    void *scratch = NULL;
    size_t scratch_bytes = 0;
    ffn_ctx_enter(ctx);
    ffn_mm_desc d = {.M = M, .N = N, .K = K, .a_trans = 1, .lda = M, .b_kind = FFN_MM_B_PLAIN,
                     .ldb = N, .ldc = N, .accumulate = 1};
    if (!ffn_mm_engine_create(&eng) && !ffn_mm_create(eng, &d, NULL, &mm)) {
        scratch_bytes = ffn_mm_scratch_bytes(mm);
        scratch = scratch_bytes ? ffn_malloc_aligned(scratch_bytes) : NULL;
    }
    const char *names[3] = {"wgrad", "sgemm", "matmul"};
    double best[3] = {1e30, 1e30, 1e30}, best_cpu[3] = {1e30, 1e30, 1e30};
    for (int r = 0; r < reps + 1; r++) /* the first round warms up */
        for (int e = 0; e < 3; e++) {
            if (e == 2 && !mm) continue;
            double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
            if (e == 0) ffn_wgrad_mt(ctx, C, N, A, M, B, N, M, N, K);
            else if (e == 1) ffn_gemm(ctx, 1, 0, M, N, K, 1.0f, A, M, B, N, 1.0f, C, N);
            else ffn_mm_run(eng, mm, C, A, B, NULL, scratch, scratch_bytes);
            double t = clock_s(CLOCK_MONOTONIC) - t0, c = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
            if (r > 0 && t < best[e]) best[e] = t;
            if (r > 0 && c < best_cpu[e]) best_cpu[e] = c;
        }
    double onednn = best[1] < best[2] ? best[1] : best[2];
    double onednn_cpu = best_cpu[1] < best_cpu[2] ? best_cpu[1] : best_cpu[2];
    double flops = 2.0 * (double)M * (double)N * (double)K;
    for (int e = 0; e < 3; e++) {
        if (e == 2 && !mm) continue;
        printf("{\"bench\": \"wgrad\", \"engine\": \"%s\", \"M\": %lld, \"N\": %lld, \"K\": %lld, "
               "\"threads\": %d, \"min_ms\": %.4f, \"gflops\": %.1f, \"vs_onednn\": %.3f, "
               "\"cpu_ms\": %.4f, \"cpu_vs_onednn\": %.3f}\n",
               names[e], (long long)M, (long long)N, (long long)K, threads, best[e] * 1e3,
               flops / best[e] * 1e-9, onednn / best[e], best_cpu[e] * 1e3,
               onednn_cpu / best_cpu[e]);
    }
    ffn_mm_free(mm);
    ffn_mm_engine_free(eng);
    ffn_free_aligned(scratch);
    ffn_free_aligned(A), ffn_free_aligned(B), ffn_free_aligned(C);
    ffn_ctx_free(ctx);
    return 0;
}
