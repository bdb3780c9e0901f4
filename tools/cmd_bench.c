/* cmd_bench.c -- `ffn bench`: timings for the benchmark scripts (bench/).
 *   ffn bench layer      forward and forward+backward of one FFN layer
 *   ffn bench peak       measured fp32 FMA, bf16 and int8 dot-product peaks (all threads)
 *   ffn bench bandwidth  measured memory read bandwidth (all threads)
 *   ffn bench moe        (tools/cmd_bench_moe.c)
 *   ffn bench qgemm      y = x·Wᵀ with low-precision weights (ffn_ggml_matmul)
 *   ffn bench model      a whole model: prompt and decode tokens/s (tools/cmd_bench_model.c)
 * Speed is only ever measured here, never asserted in tests.  The peak and
 * bandwidth loops need SIMD; they are compiled with target attributes and
 * chosen from ffn_simd_level() at run time. */
#include "cli.h"

#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* tools/cmd_bench_dist.c: the same benchmarks across ranks (mpirun). */
int bench_layer_tp(int argc, char **argv);
int bench_moe_ep(int argc, char **argv);
int bench_link(int argc, char **argv);
/* tools/cmd_bench_model.c: a whole model's prompt and decode speed. */
int bench_model(int argc, char **argv);

/* Is `flag` (or flag=...) among the arguments? */
static int has_flag(int argc, char **argv, const char *flag) {
    size_t n = strlen(flag);
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], flag, n) && (argv[i][n] == '\0' || argv[i][n] == '=')) return 1;
    return 0;
}

/* Written by the MoE work; weak so that this file links before it lands. */
extern int cmd_bench_moe(int argc, char **argv) __attribute__((weak));

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- ffn bench layer ------------------------------------------------------ */

static const char layer_about[] =
    "Times one FFN layer on random fp32 weights: forward, and forward followed by\n"
    "backward (dx and every weight gradient).  Prints the minimum and the median over\n"
    "R repeats (after one warm-up run each) and GFLOP/s at the minimum.\n";

static const char layer_epilog[] =
    "FLOPs count the matrix products only: forward 2·N·(P+F)·D with P = 2F gated, F\n"
    "dense; forward+backward three times that (recompute not counted).\n";

static const char *const save_names[] = {"activations", "none", NULL};
static const int save_values[] = {FFN_SAVE_ACTIVATIONS, FFN_SAVE_NONE};

typedef struct timing {
    double min_s, median_s;
} timing;

static timing summarize(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    timing r = {t[0], n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2])};
    return r;
}

static int bench_layer(int argc, char **argv) {
    const char *cmd = "bench layer";
    const char *type_name = "swiglu";
    int64_t D = 1024, F = 2816, N = 512, threads = 0, repeats = 0;
    int json = 0, bias = 0, save = FFN_SAVE_ACTIVATIONS, precision = FFN_PRECISION_FP32;
    const cli_opt opts[] = {
        {.name = "--type", .type = CLI_STR, .dst = &type_name, .metavar = "T",
         .help = "a gated family (swiglu, geglu, reglu, glu, bilinear) or a dense activation "
                 "(relu, gelu, gelu_pytorch_tanh, silu, sigmoid, linear)"},
        CLI_OPT_HIDDEN(&D),
        CLI_OPT_INTERMEDIATE(&F, "intermediate_size"),
        {CLI_INT_FIELDS("--tokens", &N, "N", 0, 1 << 24, "rows per call")},
        CLI_OPT_THREADS(&threads),
        CLI_OPT_REPEATS(&repeats, "enough for about 1 s, 3..50", "timed runs"),
        {.name = "--bias", .type = CLI_FLAG, .dst = &bias, .help = "give every projection a bias"},
        {.name = "--save", .type = CLI_ENUM, .dst = &save, .names = save_names,
         .values = save_values, .metavar = "MODE",
         .help = "activations or none (backward recomputes)"},
        CLI_OPT_PRECISION(&precision),
        CLI_OPT_JSON(&json, "one JSON object on stdout"),
        {0}};
    const cli_spec spec = {.cmd = cmd, .about = layer_about, .epilog = layer_epilog,
                           .opts = opts};
    int prc;
    if (cli_parse(&spec, argc, argv, &prc)) return prc;
    ffn_layer_config cfg = {.hidden_size = D, .intermediate_size = F, .bias = bias,
                            .save = (ffn_save_mode)save, .precision = (ffn_precision)precision};
    if ((prc = cli_layer_config(cmd, type_name, &cfg))) return prc;
    ffn_status st;
    ffn_ctx *ctx = NULL;
    if (cli_make_ctx(cmd, (int)threads, &ctx)) return CLI_EXIT_FAIL;
    ffn_layer *layer = NULL;
    if ((st = ffn_layer_create(ctx, &cfg, &layer))) {
        ffn_ctx_free(ctx);
        return cli_fail(cmd, st);
    }
    int gated = cfg.type == FFN_MLP_GATED;
    size_t wn = (size_t)(D * F), nd = (size_t)(N * D);
    /* one block of parameters, one of gradients (gate, up, down, 3 biases) */
    size_t total = 3 * wn + 2 * (size_t)F + (size_t)D;
    float *w = malloc(total * sizeof *w), *gw = calloc(total, sizeof *gw);
    float *x = malloc((nd + 1) * sizeof *x), *dy = malloc((nd + 1) * sizeof *dy);
    float *y = malloc((nd + 1) * sizeof *y), *dx = malloc((nd + 1) * sizeof *dx);
    size_t ws_bytes = ffn_layer_workspace_size(layer, N), sv_bytes = ffn_layer_saved_size(layer, N);
    void *ws = malloc(ws_bytes ? ws_bytes : 1);
    float *saved = sv_bytes ? malloc(sv_bytes) : NULL;
    if (!w || !gw || !x || !dy || !y || !dx || !ws || (sv_bytes && !saved)) {
        cli_error(cmd, "out of memory");
        return CLI_EXIT_FAIL;
    }
    ffn_rng rng; /* uniform in [-1, 1): the library's generator */
    ffn_rng_seed(&rng, 1);
    float scale = 1.0f / sqrtf((float)D);
    for (size_t i = 0; i < total; i++) w[i] = (2.0f * ffn_rng_float(&rng) - 1.0f) * scale;
    for (size_t i = 0; i < nd; i++) {
        x[i] = 2.0f * ffn_rng_float(&rng) - 1.0f;
        dy[i] = 0.5f * x[i];
    }
    float *b = w + 3 * wn, *gb = gw + 3 * wn;
    ffn_layer_params p = {gated ? w : NULL, gated && bias ? b : NULL, w + wn, bias ? b + F : NULL,
                          w + 2 * wn, bias ? b + 2 * F : NULL};
    ffn_layer_params g = {gated ? gw : NULL, gated && bias ? gb : NULL, gw + wn,
                          bias ? gb + F : NULL, gw + 2 * wn, bias ? gb + 2 * F : NULL};
    if ((st = ffn_layer_set_weights(layer, &p))) return cli_fail(cmd, st);

    /* warm up, then pick the repeat count from the first run's time */
    double t0 = cli_seconds();
    if ((st = ffn_layer_forward(layer, y, x, N, saved, ws, ws_bytes))) return cli_fail(cmd, st);
    if ((st = ffn_layer_backward(layer, dx, &g, dy, x, N, saved, ws, ws_bytes)))
        return cli_fail(cmd, st);
    double t_both = cli_seconds() - t0;
    /* the refresh a training step pays after its optimizer update (bf16:
     * both bf16 packs of the fp32 weights), once backward has run */
    double t_refresh = cli_seconds();
    if ((st = ffn_layer_set_weights(layer, &p))) return cli_fail(cmd, st);
    t_refresh = cli_seconds() - t_refresh;
    if (!repeats) {
        repeats = t_both > 0 ? (int64_t)ceil(0.5 / t_both) : 50;
        if (repeats < 3) repeats = 3;
        if (repeats > 50) repeats = 50;
    }
    double *tf = malloc((size_t)repeats * sizeof *tf), *tb = malloc((size_t)repeats * sizeof *tb);
    for (int64_t r = 0; r < repeats; r++) {
        t0 = cli_seconds();
        st = ffn_layer_forward(layer, y, x, N, saved, ws, ws_bytes);
        tf[r] = cli_seconds() - t0;
        if (st) return cli_fail(cmd, st);
    }
    for (int64_t r = 0; r < repeats; r++) {
        t0 = cli_seconds();
        st = ffn_layer_forward(layer, y, x, N, saved, ws, ws_bytes);
        if (!st) st = ffn_layer_backward(layer, dx, &g, dy, x, N, saved, ws, ws_bytes);
        tb[r] = cli_seconds() - t0;
        if (st) return cli_fail(cmd, st);
    }
    timing fwd = summarize(tf, (int)repeats), both = summarize(tb, (int)repeats);
    double flops_fwd = (double)ffn_layer_flops_per_token(&cfg) * (double)N;
    double flops_both = 3.0 * flops_fwd;
    double weight_bytes = 4.0 * (double)ffn_layer_num_params(&cfg);
    double gf_fwd = fwd.min_s > 0 ? flops_fwd / fwd.min_s * 1e-9 : 0;
    double gf_both = both.min_s > 0 ? flops_both / both.min_s * 1e-9 : 0;
    if (json) {
        printf("{\"bench\": \"layer\", \"type\": \"%s\", \"mlp_type\": \"%s\", \"act\": \"%s\", "
               "\"hidden\": %lld, \"intermediate\": %lld, \"tokens\": %lld, \"threads\": %d, "
               "\"bias\": %s, \"save\": \"%s\", \"simd\": \"%s\", \"repeats\": %lld, "
               "\"flops_forward\": %s, \"flops_forward_backward\": %s, "
               "\"weight_bytes\": %s, \"precision\": \"%s\", \"refresh_ms\": %s, "
               "\"forward\": {\"min_ms\": %s, \"median_ms\": %s, \"gflops\": %s}, "
               "\"forward_backward\": {\"min_ms\": %s, \"median_ms\": %s, \"gflops\": %s}}\n",
               type_name, ffn_mlp_type_name(cfg.type), ffn_act_name(cfg.act), (long long)D,
               (long long)F, (long long)N, ffn_ctx_threads(ctx), bias ? "true" : "false",
               save == FFN_SAVE_NONE ? "none" : "activations", ffn_simd_level(), (long long)repeats,
               cli_json_num(flops_fwd, "%.0f"), cli_json_num(flops_both, "%.0f"),
               cli_json_num(weight_bytes, "%.0f"), ffn_precision_name((ffn_precision)precision),
               cli_json_num(t_refresh * 1e3, "%.4f"), cli_json_num(fwd.min_s * 1e3, "%.4f"),
               cli_json_num(fwd.median_s * 1e3, "%.4f"), cli_json_num(gf_fwd, "%.2f"),
               cli_json_num(both.min_s * 1e3, "%.4f"), cli_json_num(both.median_s * 1e3, "%.4f"),
               cli_json_num(gf_both, "%.2f"));
    } else {
        printf("layer %s (%s, %s) D=%lld F=%lld N=%lld, %d threads, simd %s, %s, %lld repeats\n",
               type_name, ffn_mlp_type_name(cfg.type), ffn_act_name(cfg.act), (long long)D,
               (long long)F, (long long)N, ffn_ctx_threads(ctx), ffn_simd_level(),
               ffn_precision_name((ffn_precision)precision), (long long)repeats);
        printf("  forward           min %10.3f ms  median %10.3f ms  %8.1f GFLOP/s\n",
               fwd.min_s * 1e3, fwd.median_s * 1e3, gf_fwd);
        printf("  forward+backward  min %10.3f ms  median %10.3f ms  %8.1f GFLOP/s\n",
               both.min_s * 1e3, both.median_s * 1e3, gf_both);
        printf("  weight refresh    %10.3f ms (set_weights after an optimizer step)\n",
               t_refresh * 1e3);
    }
    free(tf); free(tb); free(w); free(gw); free(x); free(dy); free(y); free(dx); free(ws);
    free(saved);
    ffn_layer_free(layer);
    ffn_ctx_free(ctx);
    return 0;
}

/* ---- ffn bench peak --------------------------------------------------------
 * Each thread runs chains of independent FMAs (enough accumulators to cover
 * the FMA latency times the number of FMA pipes) on registers only. */

enum { PEAK_ITERS = 1 << 22 };

/* Twelve named accumulators (an array would live in memory). */
#define FMA12(fma, m, c)                                                                      \
    a0 = fma(a0, m, c), a1 = fma(a1, m, c), a2 = fma(a2, m, c), a3 = fma(a3, m, c),            \
    a4 = fma(a4, m, c), a5 = fma(a5, m, c), a6 = fma(a6, m, c), a7 = fma(a7, m, c),            \
    a8 = fma(a8, m, c), a9 = fma(a9, m, c), a10 = fma(a10, m, c), a11 = fma(a11, m, c)

/* Twelve accumulators of vector type V, set to 0..11 by SET1, each chained
 * through OP(a, m, c) `iters` times, then summed pairwise by ADD into s. */
#define CHAINS12(V, SET1, OP, ADD, m, c, iters, s)                                              \
    V a0 = SET1(0), a1 = SET1(1), a2 = SET1(2), a3 = SET1(3), a4 = SET1(4), a5 = SET1(5),          \
      a6 = SET1(6), a7 = SET1(7), a8 = SET1(8), a9 = SET1(9), a10 = SET1(10), a11 = SET1(11);      \
    for (int64_t i = 0; i < (iters); i++) FMA12(OP, m, c);                                       \
    V s = ADD(ADD(ADD(a0, a1), ADD(a2, a3)), ADD(ADD(a4, a5), ADD(a6, a7)));                     \
    s = ADD(s, ADD(ADD(a8, a9), ADD(a10, a11)))

/* One FMA loop per instruction set: V the vector type, P the intrinsics'
 * prefix (_mm512, _mm256); the lanes are summed by HSUM. */
#define FMA_LOOP(name, isa, V, P, HSUM)                                                           \
    __attribute__((target(isa), noinline)) static float name(int64_t iters) {                  \
        V m = P##_set1_ps(0.999999f), c = P##_set1_ps(1e-7f);                                 \
        CHAINS12(V, P##_set1_ps, P##_fmadd_ps, P##_add_ps, m, c, iters, s);                    \
        return HSUM(s);                                                                        \
    }

__attribute__((target("avx2"))) static inline float hsum_avx2(__m256 s) {
    float t[8];
    _mm256_storeu_ps(t, s);
    return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}

FMA_LOOP(fma_loop_avx512, "avx512f", __m512, _mm512, _mm512_reduce_add_ps)
FMA_LOOP(fma_loop_avx2, "avx2,fma", __m256, _mm256, hsum_avx2)

/* The dot-product instructions of the low-precision kernels, 12 chains
 * each: vdpbf16ps (32 bf16 pairs into 16 floats: 64 FLOPs) and vpdpbusd
 * (64 u8×s8 products into 16 int32: 128 ops).  Only with AVX-512 and the
 * CPU feature (see dot_peaks). */
__attribute__((target("avx512f,avx512bf16"), noinline)) static float bf16_loop(int64_t iters) {
    __m512bh m = (__m512bh)_mm512_set1_epi16(0x3f80), c = (__m512bh)_mm512_set1_epi16(0x3380);
    CHAINS12(__m512, _mm512_set1_ps, _mm512_dpbf16_ps, _mm512_add_ps, m, c, iters, s);
    return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx512f,avx512vnni"), noinline)) static float int8_loop(int64_t iters) {
    /* bytes +1, −1, +1, −1 against ones: every dot product is 0, so the
     * sums stay put (no int32 overflow however long the loop) */
    __m512i m = _mm512_set1_epi8(1), c = _mm512_set1_epi32(0x01FF01FF);
    CHAINS12(__m512i, _mm512_set1_epi32, _mm512_dpbusd_epi32, _mm512_add_epi32, m, c, iters, s);
    return (float)_mm512_reduce_add_epi32(s);
}

/* The start of peak and bandwidth: --threads, --json and (bandwidth) --mb,
 * the context, and the floats per vector (16 with AVX-512, 8 with AVX2).
 * Returns 1 when the command goes on, else 0 with *rc its exit status. */
static int bench_start(const char *cmd, const char *about, int argc, char **argv, int *json,
                       int64_t *mb, ffn_ctx **ctx, int *lanes, int *rc) {
    int64_t threads = 0;
    cli_opt opts[4] = {CLI_OPT_THREADS(&threads), CLI_OPT_JSON(json, "one JSON object on stdout")};
    if (mb)
        opts[2] = (cli_opt){.name = "--mb", .type = CLI_INT, .dst = mb, .metavar = "M",
                            .imin = 1, .imax = 1 << 20, .help = "buffer size in MiB"};
    const cli_spec spec = {.cmd = cmd, .about = about, .opts = opts};
    if (cli_parse(&spec, argc, argv, rc)) return 0;
    *rc = CLI_EXIT_FAIL;
    if (cli_make_ctx(cmd, (int)threads, ctx)) return 0;
    const char *simd = ffn_simd_level();
    *lanes = !strcmp(simd, "avx512") ? 16 : !strcmp(simd, "avx2") ? 8 : 0;
    if (!*lanes) {
        cli_error(cmd, "needs AVX2 or AVX-512 (simd level here: %s)", simd);
        ffn_ctx_free(*ctx);
        return 0;
    }
    return 1;
}

static int thread_num(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* The best of 5 runs of work(t, arg) on each of nt threads at once, in
 * units per second (units: what one run does on all threads). */
static double best_of_5(int nt, float (*work)(int t, const void *arg), const void *arg,
                        double units) {
    double best = 0;
    volatile float sink = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = cli_seconds();
#pragma omp parallel num_threads(nt)
        {
            float r = work(thread_num(), arg);
#pragma omp atomic
            sink += r;
        }
        double rate = units / (cli_seconds() - t0);
        if (rate > best) best = rate;
    }
    (void)sink;
    return best;
}

static const char peak_about[] =
    "Measures the fp32 FMA peak: every thread runs 12 independent chains of\n"
    "AVX-512 (else AVX2) fused multiply-adds on registers; prints GFLOP/s over\n"
    "all threads (best of 5 runs, 2 FLOPs per lane per FMA).  With AVX-512 and\n"
    "the CPU features, also the bf16 dot-product peak (vdpbf16ps, 64 FLOPs per\n"
    "instruction) and the int8 one (vpdpbusd, 128 ops per instruction): the\n"
    "instructions of the low-precision kernels (ffn bench qgemm).\n";

static float peak_work(int t, const void *arg) {
    (void)t;
    return *(const int *)arg == 16 ? fma_loop_avx512(PEAK_ITERS) : fma_loop_avx2(PEAK_ITERS);
}
static float bf16_work(int t, const void *arg) {
    (void)t, (void)arg;
    return bf16_loop(PEAK_ITERS);
}
static float int8_work(int t, const void *arg) {
    (void)t, (void)arg;
    return int8_loop(PEAK_ITERS);
}

/* The three peaks on nt threads; a dot-product peak is 0 when the CPU (or
 * the SIMD level in use) lacks its instruction. */
typedef struct peaks {
    double fma_gflops, bf16_gflops, int8_gops;
} peaks;

static peaks measure_peaks(int nt, int lanes) {
    peaks p = {0, 0, 0};
    p.fma_gflops = best_of_5(nt, peak_work, &lanes, (double)nt * PEAK_ITERS * 12.0 * lanes * 2.0 * 1e-9);
    __builtin_cpu_init();
    if (lanes == 16 && __builtin_cpu_supports("avx512bf16"))
        p.bf16_gflops = best_of_5(nt, bf16_work, NULL, (double)nt * PEAK_ITERS * 12.0 * 64.0 * 1e-9);
    if (lanes == 16 && __builtin_cpu_supports("avx512vnni"))
        p.int8_gops = best_of_5(nt, int8_work, NULL, (double)nt * PEAK_ITERS * 12.0 * 128.0 * 1e-9);
    return p;
}

/* A JSON number, or null for a figure that was not measured. */
static void json_num(char *buf, size_t cap, double v) {
    if (v > 0) snprintf(buf, cap, "%.2f", v);
    else snprintf(buf, cap, "null");
}

static int bench_peak(int argc, char **argv) {
    const char *cmd = "bench peak";
    int json = 0, lanes = 0, rc;
    ffn_ctx *ctx = NULL;
    if (!bench_start(cmd, peak_about, argc, argv, &json, NULL, &ctx, &lanes, &rc)) return rc;
    int nt = ffn_ctx_threads(ctx);
    const char *simd = ffn_simd_level();
    peaks p = measure_peaks(nt, lanes);
    if (json) {
        char b[32], i[32];
        json_num(b, sizeof b, p.bf16_gflops);
        json_num(i, sizeof i, p.int8_gops);
        printf("{\"bench\": \"peak\", \"threads\": %d, \"simd\": \"%s\", \"gflops\": %s, "
               "\"bf16_gflops\": %s, \"int8_gops\": %s}\n",
               nt, simd, cli_json_num(p.fma_gflops, "%.2f"), b, i);
    } else {
        printf("fp32 FMA peak: %.1f GFLOP/s (%d threads, %s)\n", p.fma_gflops, nt, simd);
        if (p.bf16_gflops > 0) printf("bf16 dot-product peak (vdpbf16ps): %.1f GFLOP/s\n", p.bf16_gflops);
        else printf("bf16 dot-product peak (vdpbf16ps): n/a (no AVX-512 with AVX512_BF16 here)\n");
        if (p.int8_gops > 0) printf("int8 dot-product peak (vpdpbusd): %.1f GOP/s\n", p.int8_gops);
        else printf("int8 dot-product peak (vpdpbusd): n/a (no AVX-512 with AVX512_VNNI here)\n");
    }
    ffn_ctx_free(ctx);
    return 0;
}

/* ---- ffn bench bandwidth ---------------------------------------------------
 * Each thread sums its contiguous slice of a buffer far larger than the
 * caches (default 1 GiB), with several accumulators so that loads, not the
 * add latency, are the limit. */

/* One sum per instruction set: V the vector type of W floats, P the
 * intrinsics' prefix, HSUM the sum of the lanes (hsum_avx2 above). */
#define SUM_LOOP(name, isa, V, W, P, HSUM)                                                        \
    __attribute__((target(isa), noinline)) static float name(const float *p, size_t n) {        \
        V a0 = P##_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                                    \
        for (size_t i = 0; i + 4 * (W) <= n; i += 4 * (W)) {                                   \
            a0 = P##_add_ps(a0, P##_load_ps(p + i));                                           \
            a1 = P##_add_ps(a1, P##_load_ps(p + i + (W)));                                     \
            a2 = P##_add_ps(a2, P##_load_ps(p + i + 2 * (W)));                                 \
            a3 = P##_add_ps(a3, P##_load_ps(p + i + 3 * (W)));                                 \
        }                                                                                      \
        return HSUM(P##_add_ps(P##_add_ps(a0, a1), P##_add_ps(a2, a3)));                       \
    }

SUM_LOOP(sum_avx512, "avx512f", __m512, 16, _mm512, _mm512_reduce_add_ps)
SUM_LOOP(sum_avx2, "avx2", __m256, 8, _mm256, hsum_avx2)

static const char bandwidth_about[] =
    "Measures the memory read bandwidth: every thread streams its contiguous\n"
    "slice of an M MiB buffer (far beyond the caches) with vector loads;\n"
    "prints GB/s (10^9 bytes per second), best of 5 passes.\n";

typedef struct slices {
    const float *buf;
    size_t chunk; /* floats per thread */
    int lanes;
} slices;

static float bandwidth_work(int t, const void *arg) {
    const slices *sl = arg;
    const float *p = sl->buf + (size_t)t * sl->chunk;
    return sl->lanes == 16 ? sum_avx512(p, sl->chunk) : sum_avx2(p, sl->chunk);
}

/* GB/s reading an mb MiB buffer on nt threads (best of 5); −1 when the
 * buffer cannot be allocated. */
static double measure_bandwidth(int nt, int64_t mb, int lanes) {
    size_t bytes = (size_t)mb << 20, n = bytes / sizeof(float);
    float *buf = NULL;
    if (posix_memalign((void **)&buf, 64, bytes)) return -1;
    /* first touch by the threads that will read (pages near their core) */
    size_t chunk = (n / (size_t)nt) & ~(size_t)63;
#pragma omp parallel num_threads(nt)
    {
        int t = thread_num();
        for (size_t i = (size_t)t * chunk; i < (size_t)(t + 1) * chunk; i++) buf[i] = 1.0f;
    }
    const slices sl = {buf, chunk, lanes};
    double best = best_of_5(nt, bandwidth_work, &sl,
                            (double)chunk * (size_t)nt * sizeof(float) * 1e-9);
    free(buf);
    return best;
}

static int bench_bandwidth(int argc, char **argv) {
    const char *cmd = "bench bandwidth";
    int64_t mb = 1024;
    int json = 0, lanes = 0, rc;
    ffn_ctx *ctx = NULL;
    if (!bench_start(cmd, bandwidth_about, argc, argv, &json, &mb, &ctx, &lanes, &rc)) return rc;
    int nt = ffn_ctx_threads(ctx);
    double best = measure_bandwidth(nt, mb, lanes);
    if (best < 0) {
        cli_error(cmd, "cannot allocate %lld MiB", (long long)mb);
        ffn_ctx_free(ctx);
        return CLI_EXIT_FAIL;
    }
    if (json)
        printf("{\"bench\": \"bandwidth\", \"threads\": %d, \"mib\": %lld, \"gbps\": %s}\n", nt,
               (long long)mb, cli_json_num(best, "%.2f"));
    else
        printf("memory read bandwidth: %.1f GB/s (%d threads, %lld MiB buffer)\n", best, nt,
               (long long)mb);
    ffn_ctx_free(ctx);
    return 0;
}

/* ---- ffn bench qgemm -------------------------------------------------------
 * The products with low-precision weights (ffn_ggml_matmul, the kernels of
 * src/kernels/qgemm*.c) against this run's own roofline: the read
 * bandwidth and the peak of the instruction the kernel is built on. */

static const char qgemm_about[] =
    "Times y = x·Wᵀ for a random weight W (R rows, C columns) stored as ggml\n"
    "type T and N rows of x: the kernels the model uses for low-precision\n"
    "weights (ffn_ggml_matmul).  Prints the minimum and median time over the\n"
    "repeats (after one warm-up call), the weight bytes read per second at the\n"
    "minimum (GB/s) and GFLOP/s, each also as a percentage of this run's\n"
    "measured read bandwidth and of the peak of the kernel's instruction (as\n"
    "ffn bench peak).  The bandwidth is measured the way the kernel is: the\n"
    "same copies of W summed by the loop of ffn bench bandwidth, one copy per\n"
    "timed pass, the best of as many passes as the kernel had.\n";

static const char qgemm_epilog[] =
    "FLOPs are 2·N·R·C per call.  The peak is the int8 dot product (vpdpbusd)\n"
    "for the integer block formats, the bf16 one (vdpbf16ps) for bf16, and the\n"
    "fp32 FMA for the others (or the FMA peak where the CPU lacks the\n"
    "instruction; the type table says which a type's kernels use).  Weight\n"
    "bytes count each byte once per call; below the prompt-size crossover\n"
    "(32 to 64 rows of x by type) the kernels read the weights once per tile\n"
    "of up to 64 rows of x, from it on (bf16 panels decoded in the call) once\n"
    "per 512 rows.  Unless --hot, the calls\n"
    "cycle through copies of W totalling at least 256 MiB, so that each call\n"
    "reads its weights from memory rather than from the caches.\n";

static int bench_qgemm(int argc, char **argv) {
    const char *cmd = "bench qgemm";
    const char *type_name = ffn_ggml_type_name(FFN_GGML_TYPE_DEFAULT);
    int64_t R = 2048, C = 8192, N = 1, threads = 0, repeats = 0;
    int json = 0, hot = 0;
    const cli_types types = cli_ggml_types(FFN_GGML_COMPUTES, 1);
    char help[640];
    snprintf(help, sizeof help, "the weight's ggml type: %s", types.list);
    const cli_opt opts[] = {
        {.name = "--type", .type = CLI_STR, .dst = &type_name, .metavar = "T", .help = help},
        {CLI_INT_FIELDS("--rows", &R, "R", 1, 1 << 20, "rows of W (outputs)")},
        {CLI_INT_FIELDS("--cols", &C, "C", 1, 1 << 20,
                        "columns of W (inputs); a multiple of the type's block")},
        {CLI_INT_FIELDS("--n", &N, "N", 1, 1 << 16, "rows of x (tokens) per call")},
        CLI_OPT_THREADS(&threads),
        CLI_OPT_REPEATS(&repeats, "enough for about 0.5 s, 3..200", "timed calls"),
        {.name = "--hot", .type = CLI_FLAG, .dst = &hot,
         .help = "one copy of W, read from the caches when it fits"},
        CLI_OPT_JSON(&json, "one JSON object on stdout"),
        {0}};
    const cli_spec spec = {.cmd = cmd, .about = qgemm_about, .epilog = qgemm_epilog, .opts = opts};
    int prc;
    if (cli_parse(&spec, argc, argv, &prc)) return prc;
    ffn_ggml_type type;
    if (!ffn_ggml_type_parse(type_name, &type)) {
        cli_error(cmd, "--type: unknown ggml type '%s' (expected %s)", type_name, types.list);
        return CLI_EXIT_USAGE;
    }
    int64_t bs = ffn_ggml_block_size(type);
    if (bs > 0 && C % bs) {
        cli_error(cmd, "--cols: %lld is not a multiple of %s's block of %lld", (long long)C,
                  ffn_ggml_type_name(type), (long long)bs);
        return CLI_EXIT_USAGE;
    }
    size_t row_bytes;
    ffn_status st = ffn_ggml_row_size(type, C, &row_bytes);
    if (st) return cli_fail(cmd, st);
    const char *simd = ffn_simd_level();
    int lanes = !strcmp(simd, "avx512") ? 16 : !strcmp(simd, "avx2") ? 8 : 0;
    ffn_ctx *ctx = NULL;
    if (cli_make_ctx(cmd, (int)threads, &ctx)) return CLI_EXIT_FAIL;
    int nt = ffn_ctx_threads(ctx);
    size_t wbytes = (size_t)R * row_bytes;
    size_t copies = hot ? 1 : ((size_t)256 << 20) / (wbytes ? wbytes : 1) + 1;
    if (copies > 1 && copies * wbytes > ((size_t)512 << 20)) copies = ((size_t)512 << 20) / wbytes;
    if (copies < 1) copies = 1;
    size_t stride = (wbytes + 63) & ~(size_t)63; /* copies 64-byte aligned for the read loop */
    uint8_t *w = NULL;
    if (posix_memalign((void **)&w, 64, copies * stride > 0 ? copies * stride : 64)) w = NULL;
    float *row = malloc((size_t)C * sizeof *row);
    float *x = malloc((size_t)(N * C) * sizeof *x), *y = malloc((size_t)(N * R) * sizeof *y);
    if (!w || !row || !x || !y) {
        cli_error(cmd, "out of memory (%zu bytes of weights)", wbytes);
        free(w); free(row); free(x); free(y);
        ffn_ctx_free(ctx);
        return CLI_EXIT_FAIL;
    }
    ffn_rng rng;
    ffn_rng_seed(&rng, 1);
    for (int64_t r = 0; r < R && !st; r++) {
        for (int64_t c = 0; c < C; c++) row[c] = 2.0f * ffn_rng_float(&rng) - 1.0f;
        st = ffn_ggml_quantize_row(type, row, w + (size_t)r * row_bytes, C);
    }
    for (size_t k = 1; k < copies; k++) memcpy(w + k * stride, w, wbytes);
    for (int64_t i = 0; i < N * C; i++) x[i] = 2.0f * ffn_rng_float(&rng) - 1.0f;
    double t0 = cli_seconds();
    if (!st) st = ffn_ggml_matmul(ctx, type, R, C, w, x, N, y);
    double t_one = cli_seconds() - t0;
    if (st) {
        free(w); free(row); free(x); free(y);
        ffn_ctx_free(ctx);
        return cli_fail(cmd, st);
    }
    if (!repeats) {
        repeats = t_one > 0 ? (int64_t)ceil(0.5 / t_one) : 200;
        if (repeats < 3) repeats = 3;
        if (repeats > 200) repeats = 200;
    }
    double *tv = malloc((size_t)repeats * sizeof *tv);
    for (int64_t r = 0; r < repeats && tv && !st; r++) {
        const uint8_t *wk = w + (size_t)(r + 1) % copies * stride;
        t0 = cli_seconds();
        st = ffn_ggml_matmul(ctx, type, R, C, wk, x, N, y);
        tv[r] = cli_seconds() - t0;
    }
    if (!tv || st) {
        free(w); free(row); free(x); free(y); free(tv);
        ffn_ctx_free(ctx);
        return tv ? cli_fail(cmd, st) : CLI_EXIT_FAIL;
    }
    timing tm = summarize(tv, (int)repeats);
    /* the roofline of this run, measured after the kernel's timing: the
     * same bytes read the same way (split across the threads) */
    double bw = 0;
    size_t per_thread = (wbytes / sizeof(float) / (size_t)nt) & ~(size_t)63;
    for (int64_t r = 0; lanes && per_thread && r < repeats; r++) {
        const float *wk = (const float *)(w + (size_t)(r + 1) % copies * stride);
        const slices sl = {wk, per_thread, lanes};
        volatile float sink = 0;
        t0 = cli_seconds();
#pragma omp parallel num_threads(nt)
        {
            float v = bandwidth_work(thread_num(), &sl);
#pragma omp atomic
            sink += v;
        }
        double rate = (double)(per_thread * (size_t)nt * sizeof(float)) / (cli_seconds() - t0) * 1e-9;
        if (rate > bw) bw = rate;
        (void)sink;
    }
    peaks pk = lanes ? measure_peaks(nt, lanes) : (peaks){0, 0, 0};
    const char *dot = ffn_ggml_type_dot(type), *peak_name = "fp32 FMA";
    double peak = pk.fma_gflops;
    if (!strcmp(dot, "int8") && pk.int8_gops > 0) peak = pk.int8_gops, peak_name = "int8 vpdpbusd";
    if (!strcmp(dot, "bf16") && pk.bf16_gflops > 0) peak = pk.bf16_gflops, peak_name = "bf16 vdpbf16ps";
    double flops = 2.0 * (double)N * (double)R * (double)C;
    double gbps = tm.min_s > 0 ? (double)wbytes / tm.min_s * 1e-9 : 0;
    double gflops = tm.min_s > 0 ? flops / tm.min_s * 1e-9 : 0;
    double pct_bw = bw > 0 ? 100.0 * gbps / bw : 0, pct_peak = peak > 0 ? 100.0 * gflops / peak : 0;
    if (json) {
        printf("{\"bench\": \"qgemm\", \"type\": \"%s\", \"rows\": %lld, \"cols\": %lld, "
               "\"n\": %lld, \"threads\": %d, \"simd\": \"%s\", \"repeats\": %lld, "
               "\"copies\": %zu, \"weight_bytes\": %zu, \"min_ms\": %s, \"median_ms\": %s, "
               "\"weight_gbps\": %s, \"gflops\": %s, \"bandwidth_gbps\": %s, "
               "\"peak_name\": \"%s\", \"peak_gflops\": %s, \"pct_bandwidth\": %s, "
               "\"pct_peak\": %s}\n",
               ffn_ggml_type_name(type), (long long)R, (long long)C, (long long)N, nt, simd,
               (long long)repeats, copies, wbytes, cli_json_num(tm.min_s * 1e3, "%.6f"),
               cli_json_num(tm.median_s * 1e3, "%.6f"), cli_json_num(gbps, "%.2f"),
               cli_json_num(gflops, "%.2f"), cli_json_num(bw, "%.2f"), peak_name,
               cli_json_num(peak, "%.2f"), cli_json_num(pct_bw, "%.1f"),
               cli_json_num(pct_peak, "%.1f"));
    } else {
        printf("qgemm %s W (%lld, %lld), n = %lld, %d threads, simd %s, %lld repeats, "
               "%zu cop%s of W\n", ffn_ggml_type_name(type), (long long)R, (long long)C,
               (long long)N, nt, simd, (long long)repeats, copies, copies == 1 ? "y" : "ies");
        printf("  time     min %10.4f ms  median %10.4f ms\n", tm.min_s * 1e3, tm.median_s * 1e3);
        printf("  weights  %8.2f GB/s  (%zu bytes; %.0f%% of the %.1f GB/s read bandwidth)\n",
               gbps, wbytes, pct_bw, bw);
        printf("  compute  %8.2f GFLOP/s  (%.1f%% of the %.1f G/s %s peak)\n", gflops, pct_peak,
               peak, peak_name);
    }
    free(w); free(row); free(x); free(y); free(tv);
    ffn_ctx_free(ctx);
    return 0;
}

/* ---- dispatch --------------------------------------------------------------- */

static void usage(FILE *f) {
    fprintf(f, "usage: ffn bench <layer|moe|peak|bandwidth|link|qgemm|model> [options]\n"
               "(--help on each)\n\n"
               "  layer      forward and forward+backward time of one FFN layer, GFLOP/s\n"
               "  moe        the same for a Mixture-of-Experts layer\n"
               "  peak       measured fp32 FMA peak GFLOP/s on all threads\n"
               "  bandwidth  measured memory read bandwidth GB/s on all threads\n"
               "  link       under mpirun: GB/s a rank sends in the all-reduce, us a message\n"
               "  qgemm      y = x·Wᵀ with low-precision weights: GB/s, GFLOP/s, and their\n"
               "             share of the measured bandwidth and peak\n"
               "  model      a whole model (a GGUF as `ffn run` loads it): prompt and decode\n"
               "             tokens/s, bytes read per decoded token, effective GB/s\n\n"
               "bench/run.sh (make bench) compares these against PyTorch and the roofline.\n");
}

int cmd_bench(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "--help") || !strcmp(sub, "-h")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(sub, "layer") && has_flag(argc - 1, argv + 1, "--tp"))
        return bench_layer_tp(argc - 1, argv + 1);
    if (!strcmp(sub, "moe") && has_flag(argc - 1, argv + 1, "--ep"))
        return bench_moe_ep(argc - 1, argv + 1);
    if (!strcmp(sub, "layer")) return bench_layer(argc - 1, argv + 1);
    if (!strcmp(sub, "peak")) return bench_peak(argc - 1, argv + 1);
    if (!strcmp(sub, "bandwidth")) return bench_bandwidth(argc - 1, argv + 1);
    if (!strcmp(sub, "link")) return bench_link(argc - 1, argv + 1);
    if (!strcmp(sub, "qgemm")) return bench_qgemm(argc - 1, argv + 1);
    if (!strcmp(sub, "model")) return bench_model(argc - 1, argv + 1);
    if (!strcmp(sub, "moe")) {
        if (!cmd_bench_moe) {
            cli_error("bench", "moe: not built into this binary");
            return CLI_EXIT_FAIL;
        }
        return cmd_bench_moe(argc - 1, argv + 1);
    }
    cli_error("bench", "unknown benchmark '%s' (expected layer, moe, peak, bandwidth, link, qgemm or model)", sub);
    return CLI_EXIT_USAGE;
}

/* For `ffn train --profile`: the FMA peak the step's products are set
 * against, measured as `ffn bench peak` does. */
double cli_fma_peak_gflops(int threads) {
    const char *simd = ffn_simd_level();
    int lanes = !strcmp(simd, "avx512") ? 16 : !strcmp(simd, "avx2") ? 8 : 0;
    if (!lanes || threads < 1) return 0.0;
    return best_of_5(threads, peak_work, &lanes,
                     (double)threads * PEAK_ITERS * 12.0 * lanes * 2.0 * 1e-9);
}
