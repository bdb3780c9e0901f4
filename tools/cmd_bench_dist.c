/* cmd_bench_dist.c -- `ffn bench layer --tp T` and `ffn bench moe --ep E`
 * under mpirun: the tensor-parallel FFN layer and the expert-parallel MoE
 * of libffn_dist, timed with the communication apart.  Every repeat starts
 * at a barrier, so rank 0's clock covers the slowest rank; the compute and
 * the communication are timed separately (the layer's own pieces called in
 * the order the library calls them). */
#include "cli.h"
#include "ffn/dist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n ? v[n / 2] : 0;
}

/* MPI may be started only under mpirun; the threads of a host are shared by its ranks. */
/* Every rank compares its flags (all but --threads, --json, --dist-timeout)
 * with the others' first: a rank given other sizes would wait forever in
 * a collective of another size. */
static int start(const char *cmd, const cli_opt *opts, ffn_dist_layout *lay, double timeout,
                 int64_t threads, ffn_dist **d, ffn_ctx **ctx) {
    static const char *const host_only[] = {"--threads", "--json", "--dist-timeout", NULL};
    static char agree[8192];
    if (cli_agree_text(opts, host_only, agree, sizeof agree) < 0) {
        cli_error(cmd, "the options do not fit the %zu bytes the ranks compare", sizeof agree);
        return CLI_EXIT_FAIL;
    }
    lay->options = agree;
    lay->timeout_s = timeout > 0 ? timeout : -1;
    ffn_status st = ffn_dist_init(NULL, NULL, lay, d);
    if (st != FFN_OK) {
        int rc = cli_fail(cmd, st);
        ffn_dist_free(*d); /* every rank has said it before any ends */
        return rc;
    }
    if (threads == 0) threads = ffn_dist_local_threads();
    if (cli_make_ctx(cmd, threads, ctx)) {
        ffn_dist_free(*d);
        return CLI_EXIT_FAIL;
    }
    return 0;
}

/* The end of every benchmark that start() began: the context, then the
 * ranks' state (after every rank's last collective); returns rc. */
static int finish(ffn_ctx *ctx, ffn_dist *d, int rc) {
    ffn_ctx_free(ctx);
    ffn_dist_free(d);
    return rc;
}

/* the flags every benchmark here ends its table with: those start() leaves
 * out of the ranks' agreement */
#define DIST_BENCH_TAIL(threads, timeout, json)                                      \
    CLI_OPT_THREADS(threads), CLI_OPT_DIST_TIMEOUT(timeout),                         \
        CLI_OPT_JSON(json, "one JSON object on stdout (rank 0)"), {0}

static void fill(float *a, size_t n, ffn_rng *r, float s) {
    for (size_t i = 0; i < n; i++) a[i] = (2.0f * ffn_rng_float(r) - 1.0f) * s;
}

int bench_layer_tp(int argc, char **argv) {
    const char *cmd = "bench layer";
    const char *type_name = "swiglu";
    int64_t D = 4096, F = 11008, N = 1, threads = 0, repeats = 10, tp = 1;
    double timeout = FFN_DIST_TIMEOUT_DEFAULT;
    int json = 0, bias = 0;
    const cli_opt opts[] = {
        {.name = "--type", .type = CLI_STR, .dst = &type_name, .metavar = "T",
         .help = "a gated family (swiglu, geglu, ...) or a dense activation (relu, gelu, ...)"},
        CLI_OPT_HIDDEN(&D),
        CLI_OPT_INTERMEDIATE(&F, "intermediate_size"),
        {CLI_INT_FIELDS("--tokens", &N, "N", 1, 1 << 24, "rows per call")},
        CLI_OPT_REPEATS(&repeats, NULL, "timed runs"),
        {.name = "--bias", .type = CLI_FLAG, .dst = &bias, .help = "give every projection a bias"},
        CLI_OPT_TP(&tp),
        DIST_BENCH_TAIL(&threads, &timeout, &json)};
    const cli_spec spec = {
        .cmd = cmd, .synopsis = "--tp T [--hidden D --intermediate F --tokens N] [--json]",
        .about = "The tensor-parallel FFN layer under mpirun -np T: forward and\n"
                 "forward+backward, the local products and the all-reduces timed apart.\n",
        .opts = opts};
    int rc;
    if (cli_parse(&spec, argc, argv, &rc)) return rc;
    ffn_layer_config cfg = {.hidden_size = D, .intermediate_size = F, .bias = bias,
                            .save = FFN_SAVE_ACTIVATIONS};
    if ((rc = cli_layer_config(cmd, type_name, &cfg))) return rc;
    ffn_status st;
    ffn_dist *d;
    ffn_ctx *ctx;
    ffn_dist_layout lay = {.tp = tp};
    if ((rc = start(cmd, opts, &lay, timeout, threads, &d, &ctx))) return rc;
    int rank = ffn_dist_rank(d, FFN_DIST_WORLD);
    ffn_dist_tp_layer *l = NULL;
    st = ffn_dist_tp_layer_create(d, ctx, &cfg, &l);
    int64_t f0, Fl;
    if (st == FFN_OK) ffn_dist_tp_layer_slice(l, &f0, &Fl);
    /* full weights are never needed: each rank fills its own slice */
    size_t nl = st == FFN_OK ? (size_t)(3 * Fl * D + 2 * Fl + D) : 1;
    float *w = malloc(nl * sizeof *w), *gw = calloc(nl, sizeof *gw);
    float *x = malloc((size_t)(N * D) * sizeof *x), *y = malloc((size_t)(N * D) * sizeof *y);
    float *dx = malloc((size_t)(N * D) * sizeof *dx);
    ffn_rng r;
    ffn_rng_seed(&r, 1 + (uint64_t)rank);
    int gated = cfg.type == FFN_MLP_GATED;
    if (st == FFN_OK && (!w || !gw || !x || !y || !dx))
        st = ffn_set_error(FFN_ERR_NOMEM, "out of memory");
    ffn_layer *loc = st == FFN_OK ? ffn_dist_tp_layer_local(l) : NULL;
    if (st == FFN_OK) {
        fill(w, nl, &r, 1.0f / sqrtf((float)D));
        fill(x, (size_t)(N * D), &r, 1.0f);
        float *q = w, *g = gw;
        ffn_layer_params p = {0}, gp = {0};
        if (gated) p.gate_w = q, q += Fl * D, gp.gate_w = g, g += Fl * D;
        p.up_w = q, q += Fl * D, gp.up_w = g, g += Fl * D;
        p.down_w = q, q += D * Fl, gp.down_w = g, g += D * Fl;
        if (bias) p.up_b = q, p.down_b = q + Fl, gp.up_b = g, gp.down_b = g + Fl,
                  p.gate_b = gated ? q + Fl + D : NULL, gp.gate_b = gated ? g + Fl + D : NULL;
        st = ffn_layer_set_weights(loc, &p);
        size_t wsb = ffn_layer_workspace_size(loc, N), svb = ffn_layer_saved_size(loc, N);
        void *ws = malloc(wsb + 64);
        float *sv = malloc(svb + 64);
        int64_t R = repeats;
        double *tf = malloc((size_t)R * sizeof *tf), *tfc = malloc((size_t)R * sizeof *tfc);
        double *tb = malloc((size_t)R * sizeof *tb), *tbc = malloc((size_t)R * sizeof *tbc);
        for (int64_t k = -1; k < R && st == FFN_OK; k++) { /* k = -1: warm-up */
            ffn_dist_barrier(d);
            double t0 = cli_seconds();
            st = ffn_layer_forward(loc, y, x, N, sv, ws, wsb);
            double t1 = cli_seconds();
            if (st == FFN_OK) st = ffn_dist_allreduce_f32(d, FFN_DIST_TP, y, N * D);
            double t2 = cli_seconds();
            ffn_dist_barrier(d);
            double t3 = cli_seconds();
            if (st == FFN_OK) st = ffn_layer_backward(loc, dx, &gp, y, x, N, sv, ws, wsb);
            double t4 = cli_seconds();
            if (st == FFN_OK) st = ffn_dist_allreduce_f32(d, FFN_DIST_TP, dx, N * D);
            double t5 = cli_seconds();
            if (k >= 0) {
                tf[k] = t2 - t0, tfc[k] = t2 - t1, tb[k] = (t2 - t0) + (t5 - t3);
                tbc[k] = (t2 - t1) + (t5 - t4);
            }
        }
        if (st == FFN_OK && rank == 0) {
            double mf = median(tf, (int)R), mfc = median(tfc, (int)R), mb = median(tb, (int)R),
                   mbc = median(tbc, (int)R);
            double flops = (double)ffn_layer_flops_per_token(&cfg) * (double)N;
            double sent = 2.0 * (double)(tp - 1) / (double)tp * (double)(N * D) * 4.0;
            if (json)
                printf(
                    "{\"bench\": \"layer_tp\", \"tp\": %lld, \"hidden\": %lld, \"intermediate\": "
                    "%lld, \"tokens\": %lld, \"threads\": %d, \"type\": \"%s\", "
                    "\"forward_ms\": %s, \"forward_comm_ms\": %s, \"forward_backward_ms\": "
                    "%s, \"forward_backward_comm_ms\": %s, \"gflops_forward\": %s, "
                    "\"bytes_sent_per_allreduce\": %s}\n",
                    (long long)tp, (long long)D, (long long)F, (long long)N, ffn_ctx_threads(ctx),
                    type_name, cli_json_num(mf * 1e3, "%.4f"), cli_json_num(mfc * 1e3, "%.4f"),
                    cli_json_num(mb * 1e3, "%.4f"), cli_json_num(mbc * 1e3, "%.4f"),
                    cli_json_num(flops / mf * 1e-9, "%.2f"), cli_json_num(sent, "%.0f"));
            else
                printf("tp layer %s D=%lld F=%lld N=%lld, tp %lld x %d threads: forward %.3f ms "
                       "(all-reduce %.1f%%), forward+backward %.3f ms (all-reduce %.1f%%), "
                       "%.1f GFLOP/s forward; %.0f B sent a rank per all-reduce\n",
                       type_name, (long long)D, (long long)F, (long long)N, (long long)tp,
                       ffn_ctx_threads(ctx), mf * 1e3, 100 * mfc / mf, mb * 1e3, 100 * mbc / mb,
                       flops / mf * 1e-9, sent);
        }
        free(ws), free(sv), free(tf), free(tfc), free(tb), free(tbc);
    }
    st = ffn_dist_agree(d, st);
    rc = st == FFN_OK ? 0 : cli_fail(cmd, st);
    free(w), free(gw), free(x), free(y), free(dx);
    ffn_dist_tp_layer_free(l);
    return finish(ctx, d, rc);
}

int bench_moe_ep(int argc, char **argv) {
    const char *cmd = "bench moe";
    int64_t D = 1024, F = 1408, E = 8, K = 2, N = 256, threads = 0, repeats = 10, ep = 1;
    double timeout = FFN_DIST_TIMEOUT_DEFAULT;
    int json = 0;
    const cli_opt opts[] = {
        CLI_OPT_HIDDEN(&D),
        {CLI_INT_FIELDS("--moe-intermediate", &F, "F", 1, 1 << 22, "each expert's width")},
        {CLI_INT_FIELDS("--experts", &E, "E", 1, 4096, "routed experts")},
        {CLI_INT_FIELDS("--top-k", &K, "K", 1, 4096, "experts a token uses")},
        {CLI_INT_FIELDS("--tokens", &N, "N", 1, 1 << 24, "tokens per call on each rank")},
        CLI_OPT_REPEATS(&repeats, NULL, "timed runs"),
        CLI_OPT_EP(&ep),
        DIST_BENCH_TAIL(&threads, &timeout, &json)};
    const cli_spec spec = {
        .cmd = cmd, .synopsis = "--ep E [--hidden D --moe-intermediate F --experts E --top-k K] [--json]",
        .about = "The expert-parallel MoE under mpirun -np E (each rank its own N tokens):\n"
                 "forward and forward+backward, tokens/s over all ranks, and the bytes a rank\n"
                 "sends per layer.\n",
        .opts = opts};
    int rc;
    if (cli_parse(&spec, argc, argv, &rc)) return rc;
    ffn_dist *d;
    ffn_ctx *ctx;
    ffn_dist_layout lay = {.dp = ep, .ep = ep};
    if ((rc = start(cmd, opts, &lay, timeout, threads, &d, &ctx))) return rc;
    int rank = ffn_dist_rank(d, FFN_DIST_WORLD);
    ffn_moe_config cfg = {.hidden_size = D, .num_experts = E, .num_experts_per_tok = K,
                          .moe_intermediate_size = F, .act = FFN_ACT_SILU,
                          .expert_type = FFN_MLP_GATED, .norm_topk_prob = 1,
                          .routed_scaling_factor = 1, .save = FFN_SAVE_ACTIVATIONS};
    ffn_dist_ep_moe *l = NULL;
    ffn_status st = ffn_dist_ep_moe_create(d, ctx, &cfg, &l);
    int64_t e0 = 0, El = 0;
    if (st == FFN_OK) ffn_dist_ep_moe_experts(l, &e0, &El);
    ffn_layer_params *ex = calloc((size_t)E, sizeof *ex), *eg = calloc((size_t)(El ? El : 1), sizeof *eg);
    size_t per = (size_t)(3 * F * D);
    float *w = malloc((size_t)(El ? El : 1) * per * sizeof *w), *gw = calloc((size_t)(El ? El : 1) * per, sizeof *gw);
    float *wr = malloc((size_t)(E * D) * sizeof *wr), *gwr = calloc((size_t)(E * D), sizeof *gwr);
    float *x = malloc((size_t)(N * D) * sizeof *x), *y = malloc((size_t)(N * D) * sizeof *y);
    float *dx = malloc((size_t)(N * D) * sizeof *dx);
    if (st == FFN_OK && (!ex || !eg || !w || !gw || !wr || !gwr || !x || !y || !dx))
        st = ffn_set_error(FFN_ERR_NOMEM, "out of memory");
    ffn_rng r;
    ffn_rng_seed(&r, 7);
    if (st == FFN_OK) {
        fill(wr, (size_t)(E * D), &r, 1.0f / sqrtf((float)D));
        fill(w, (size_t)El * per, &r, 1.0f / sqrtf((float)D));
        ffn_rng_seed(&r, 100 + (uint64_t)rank);
        fill(x, (size_t)(N * D), &r, 1.0f);
        for (int64_t j = 0; j < El; j++) { /* only this rank's experts are read */
            float *q = w + (size_t)j * per, *g = gw + (size_t)j * per;
            ex[e0 + j] = (ffn_layer_params){.gate_w = q, .up_w = q + F * D, .down_w = q + 2 * F * D};
            eg[j] = (ffn_layer_params){.gate_w = g, .up_w = g + F * D, .down_w = g + 2 * F * D};
        }
        ffn_moe_params mp = {.router_w = wr, .experts = ex};
        st = ffn_dist_ep_moe_set_weights(l, &mp);
        ffn_dist_ep_moe_set_expert_grads(l, eg);
    }
    if (st == FFN_OK) {
        ffn_moe *m = ffn_dist_ep_moe_layer(l);
        size_t wsb = ffn_moe_workspace_size(m, N), svb = ffn_moe_saved_size(m, N);
        void *ws = malloc(wsb + 64), *sv = malloc(svb + 64);
        ffn_moe_params gp = {.router_w = gwr};
        double *tf = malloc((size_t)repeats * sizeof *tf), *tb = malloc((size_t)repeats * sizeof *tb);
        for (int64_t k = -1; k < repeats && st == FFN_OK; k++) {
            ffn_moe_outputs o = {.y = y};
            ffn_dist_barrier(d);
            double t0 = cli_seconds();
            st = ffn_moe_forward(m, &o, x, N, sv, ws, wsb);
            ffn_dist_barrier(d);
            double t1 = cli_seconds();
            if (st == FFN_OK) st = ffn_moe_backward(m, dx, &gp, y, x, N, sv, ws, wsb);
            ffn_dist_barrier(d);
            double t2 = cli_seconds();
            if (k >= 0) tf[k] = t1 - t0, tb[k] = t2 - t0;
        }
        int64_t sf = 0, sb = 0;
        ffn_dist_ep_moe_bytes_sent(l, &sf, &sb);
        if (st == FFN_OK && rank == 0) {
            double mf = median(tf, (int)repeats), mb = median(tb, (int)repeats);
            double tokens = (double)N * (double)ep;
            if (json)
                printf(
                    "{\"bench\": \"moe_ep\", \"ep\": %lld, \"hidden\": %lld, \"moe_intermediate\": "
                    "%lld, \"experts\": %lld, \"top_k\": %lld, \"tokens_per_rank\": %lld, "
                    "\"threads\": %d, \"forward_ms\": %s, \"forward_backward_ms\": %s, "
                    "\"tokens_per_s_forward\": %s, \"tokens_per_s_forward_backward\": %s, "
                    "\"bytes_sent_forward\": %lld, \"bytes_sent_backward\": %lld}\n",
                    (long long)ep, (long long)D, (long long)F, (long long)E, (long long)K,
                    (long long)N, ffn_ctx_threads(ctx), cli_json_num(mf * 1e3, "%.4f"),
                    cli_json_num(mb * 1e3, "%.4f"), cli_json_num(tokens / mf, "%.1f"),
                    cli_json_num(tokens / mb, "%.1f"), (long long)sf, (long long)sb);
            else
                printf("ep moe D=%lld F=%lld E=%lld top-%lld, %lld tokens a rank, ep %lld x %d "
                       "threads: forward %.3f ms (%.0f tokens/s), forward+backward %.3f ms (%.0f "
                       "tokens/s); rank 0 sent %lld B forward, %lld B backward\n",
                       (long long)D, (long long)F, (long long)E, (long long)K, (long long)N,
                       (long long)ep, ffn_ctx_threads(ctx), mf * 1e3, tokens / mf, mb * 1e3,
                       tokens / mb, (long long)sf, (long long)sb);
        }
        free(ws), free(sv), free(tf), free(tb);
    }
    st = ffn_dist_agree(d, st);
    rc = st == FFN_OK ? 0 : cli_fail(cmd, st);
    free(ex), free(eg), free(w), free(gw), free(wr), free(gwr), free(x), free(y), free(dx);
    ffn_dist_ep_moe_free(l);
    return finish(ctx, d, rc);
}

/* ---- the link: what a rank sends per second in the fixed-order all-reduce ---- */

int bench_link(int argc, char **argv) {
    const char *cmd = "bench link";
    int64_t mb = 16, repeats = 10, threads = 1, gap_us = 0;
    double timeout = FFN_DIST_TIMEOUT_DEFAULT;
    int json = 0;
    const cli_opt opts[] = {
        {CLI_INT_FIELDS("--mb", &mb, "M", 1, 1 << 14, "MiB all-reduced per call")},
        {CLI_INT_FIELDS("--gap-us", &gap_us, "U", 0, 1000000,
                        "each rank computes U us before each 1-float all-reduce (as training "
                        "does between messages): on a loaded host the time per message then "
                        "includes waiting for a partner that was not running")},
        CLI_OPT_REPEATS(&repeats, NULL, "timed runs"),
        DIST_BENCH_TAIL(&threads, &timeout, &json)};
    const cli_spec spec = {
        .cmd = cmd, .synopsis = "[--mb M] [--json]   (under mpirun -np P)",
        .about = "The link between the ranks as libffn_dist uses it, under mpirun -np P: the\n"
                 "fixed-order ring all-reduce of M MiB (a rank sends 2(P-1)/P of it), giving\n"
                 "the GB/s a rank sends, and of 1 float, giving the time per message (the\n"
                 "all-reduce of 1 float is 2(P-1) messages).  These are ffn plan's\n"
                 "--link-gbps and --latency-us for this host (ffn plan --link-json reads the\n"
                 "--json line).  --gap-us U: U us of work on every rank before each small\n"
                 "all-reduce, left out of the time per message.\n",
        .opts = opts};
    int rc;
    if (cli_parse(&spec, argc, argv, &rc)) return rc;
    ffn_dist *d;
    ffn_ctx *ctx;
    ffn_dist_layout lay = {.dp = 0};
    if (ffn_dist_launched()) { /* the world is one data-parallel group */
        const char *ws = getenv("OMPI_COMM_WORLD_SIZE");
        lay.dp = ws ? atoll(ws) : 1;
    }
    if ((rc = start(cmd, opts, &lay, timeout, threads, &d, &ctx))) return rc;
    const int P = ffn_dist_size(d, FFN_DIST_WORLD), rank = ffn_dist_rank(d, FFN_DIST_WORLD);
    const int64_t n = mb * (1 << 20) / (int64_t)sizeof(float);
    float *buf = malloc((size_t)n * sizeof *buf);
    double *tb = malloc((size_t)repeats * sizeof *tb), *ts = malloc((size_t)repeats * sizeof *ts);
    ffn_status st = buf && tb && ts ? FFN_OK : ffn_set_error(FFN_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; st == FFN_OK && i < n; i++) buf[i] = 1e-3f * (float)(i % 1000);
    for (int64_t k = -1; st == FFN_OK && k < repeats; k++) { /* k = -1: warm-up */
        float one = 1.0f;
        st = ffn_dist_barrier(d);
        double t0 = cli_seconds();
        if (st == FFN_OK) st = ffn_dist_allreduce_f32(d, FFN_DIST_WORLD, buf, n);
        double t1 = cli_seconds();
        if (st == FFN_OK) st = ffn_dist_barrier(d);
        double t2 = cli_seconds();
        double spun = 0;
        for (int j = 0; st == FFN_OK && j < 100; j++) {
            if (gap_us) { /* work, not sleep: the rank holds its core as a computing rank does */
                double g0 = cli_seconds(), g1 = g0;
                while (g1 - g0 < (double)gap_us * 1e-6) g1 = cli_seconds();
                spun += g1 - g0;
            }
            st = ffn_dist_allreduce_f32(d, FFN_DIST_WORLD, &one, 1);
        }
        double t3 = cli_seconds();
        if (k >= 0) tb[k] = t1 - t0, ts[k] = (t3 - t2 - spun) / 100.0;
    }
    if (st == FFN_OK && rank == 0) {
        double big = median(tb, (int)repeats), small = median(ts, (int)repeats);
        double sent = 2.0 * (double)(P - 1) / (double)P * (double)n * sizeof(float);
        double gbps = P > 1 ? sent / big / 1e9 : 0, lat = P > 1 ? small / (2.0 * (P - 1)) * 1e6 : 0;
        if (json)
            printf("{\"bench\": \"link\", \"ranks\": %d, \"bytes\": %lld, \"allreduce_ms\": %s, "
                   "\"sent_bytes\": %s, \"link_gbps\": %s, \"allreduce_1_us\": %s, "
                   "\"latency_us\": %s, \"gap_us\": %lld}\n",
                   P, (long long)(n * (int64_t)sizeof(float)), cli_json_num(big * 1e3, "%.4f"),
                   cli_json_num(sent, "%.0f"), cli_json_num(gbps, "%.4f"),
                   cli_json_num(small * 1e6, "%.3f"), cli_json_num(lat, "%.3f"), (long long)gap_us);
        else
            printf("link, %d ranks: all-reduce of %lld MiB in %.3f ms: a rank sends %.2f GB/s; "
                   "all-reduce of 1 float %.2f us = %.2f us a message\n",
                   P, (long long)mb, big * 1e3, gbps, small * 1e6, lat);
    }
    st = ffn_dist_agree(d, st);
    rc = st == FFN_OK ? 0 : cli_fail(cmd, st);
    free(buf), free(tb), free(ts);
    return finish(ctx, d, rc);
}
