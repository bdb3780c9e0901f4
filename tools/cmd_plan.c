/* cmd_plan.c -- `ffn plan`: what a tensor/expert/data/pipeline-parallel
 * layout costs each rank (memory, bytes sent, a predicted step time and
 * decode time), from a config.json.  The arithmetic is ffn_plan_compute
 * (include/ffn/plan.h); this file parses and prints. */
#include "cli.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMD "plan"

static const char about[] =
    "What a parallel layout costs each rank, from a Hugging Face config.json: the\n"
    "parameters, weight, gradient, optimizer and activation bytes a rank holds, the\n"
    "bytes it sends per step and per token (tensor-parallel all-reduces, expert\n"
    "all-to-alls, data-parallel gradient all-reduce, pipeline sends), and a predicted\n"
    "training step time (FLOPs / peak + bytes / link + latency per message) and\n"
    "decode time per token (weight bytes read / memory bandwidth + the TP\n"
    "all-reduces).  world = tp * dp * pp ranks; ep spreads the experts inside the\n"
    "data-parallel group.  Every figure is for the busiest rank.\n"
    "\n"
    "The model of each part (what is split, what is replicated, what is counted) is\n"
    "written in include/ffn/plan.h and summarised below.  A prediction is as good as\n"
    "the peak, link and bandwidth given: measure them where you can -- the link with\n"
    "mpirun -np P ffn bench link --gap-us 1000 --json >link.json (--link-json\n"
    "link.json), the compute as the GFLOP/s one process training the model at a\n"
    "rank's batch reaches (bench/bench_plan.sh does both, in the same run as the\n"
    "ffn train it checks).\n";

static const char epilog[] =
    "Layout: tp splits heads (q/k/v by columns, o by rows; GQA groups whole) and the\n"
    "FFN (gate/up by columns, down by rows: ceil(F/tp) units a rank); norms, router,\n"
    "embedding and LM head are replicated.  ep: ceil(E/ep) experts a rank, ep divides\n"
    "dp, routing assumed uniform.  dp: gradients ring-all-reduced (--zero 1 shards\n"
    "the Adam state, --zero 2 also the gradients kept after the reduce-scatter; the\n"
    "backward still writes the whole block: \"gradients in backward\").  pp:\n"
    "ceil(L/pp) layers a stage, 1F1B, bubble (pp-1)/grad-accum.\n"
    "Optimizer: Adam m and v in fp32 (8 bytes a parameter) + a 4-byte fp32 master\n"
    "copy when the weights are narrower.  Activations: what ffn's backward keeps.\n"
    "\n"
    "Examples:\n"
    "  ffn plan Llama-2-7b-hf.json --tp 8 --batch-size 1 --seq-len 4096 \\\n"
    "      --weight-type bf16 --act-type bf16 --peak-gflops 312000 --link-gbps 300\n"
    "  ffn plan Mixtral-8x7B-v0.1.json --dp 8 --ep 8 --zero 1\n"
    "  ffn plan --layer ffn --tp 2 --hidden 4096 --intermediate 11008 --tokens 512 \\\n"
    "      --peak-gflops 34 --link-gbps 3   (check against ffn bench layer --tp 2)\n"
    "\n"
    "Exit status: 0 ok, 1 a bad config or a layout that does not fit it (the numbers\n"
    "are named), 2 bad usage.\n";

static const char *const act_names[] = {"f32", "bf16", "f16", NULL};
static const char *const layer_names[] = {"model", "ffn", "moe", NULL};
enum { LAYER_MODEL, LAYER_FFN, LAYER_MOE };

static const char *bytes_h(double b, char *buf, size_t n) {
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (b >= 1024 && u < 5) b /= 1024, u++;
    snprintf(buf, n, u ? "%.2f %s" : "%.0f %s", b, unit[u]);
    return buf;
}

static const char *secs_h(double s, char *buf, size_t n) {
    if (s >= 1) snprintf(buf, n, "%.3f s", s);
    else if (s >= 1e-3) snprintf(buf, n, "%.3f ms", s * 1e3);
    else snprintf(buf, n, "%.3f us", s * 1e6);
    return buf;
}

static void print_text(const char *path, const ffn_params_report *r, const ffn_plan *p,
                       const char *wtype, const char *atype, const char *link_from) {
    const ffn_plan_options *o = &p->opt;
    char a[32], b[32], c[32];
    printf("ffn plan: %s (%s, %" PRId64 " layers, D %" PRId64 ", %" PRId64 " params)\n", path,
           r->model_type, r->n_layers, r->hidden_size, r->params.total);
    printf("layout: tp %" PRId64 " x dp %" PRId64 " x pp %" PRId64 " = %" PRId64
           " ranks; ep %" PRId64 "%s\n",
           o->tp, o->dp, o->pp, p->world, o->ep, o->zero2 ? "; ZeRO-2" : o->zero1 ? "; ZeRO-1" : "");
    printf("a rank: %" PRId64 " of %" PRId64 " heads (%" PRId64 " kv), %" PRId64
           " FFN units, %" PRId64 " layers",
           p->heads_per_rank, r->n_heads, p->kv_heads_per_rank, p->ffn_units_per_rank,
           p->layers_per_stage);
    if (p->experts_per_rank) printf(", %" PRId64 " of %" PRId64 " experts", p->experts_per_rank, r->n_experts);
    printf("\nweights %s, activations and messages %s; batch %" PRId64 " x %" PRId64
           " tokens a rank, %" PRId64 " micro-batches a step\n\n",
           wtype, atype, o->micro_batch, o->seq_len, o->n_micro);

    printf("memory on the busiest rank (training)\n");
    printf("  %-22s %16" PRId64 "  (%" PRId64 " in routed experts)\n", "parameters",
           p->params_rank, p->params_rank_expert);
    printf("  %-22s %16s\n", "weights", bytes_h(p->weight_bytes, a, sizeof a));
    printf("  %-22s %16s\n", "gradients", bytes_h(p->grad_bytes, a, sizeof a));
    if (o->zero2)
        printf("  %-22s %16s  (the whole block, before the reduce-scatter)\n",
               "gradients in backward", bytes_h(p->grad_backward_bytes, a, sizeof a));
    printf("  %-22s %16s\n", "optimizer state", bytes_h(p->optim_bytes, a, sizeof a));
    printf("  %-22s %16s\n", "activations", bytes_h(p->act_bytes, a, sizeof a));
    printf("  %-22s %16s\n\n", "total", bytes_h(p->total_bytes, a, sizeof a));

    printf("bytes a rank sends in one step (%" PRId64 " tokens on the rank, %" PRId64
           " in all)\n",
           p->tokens_rank_step, p->tokens_global_step);
    struct { const char *name; double v; } rows[] = {
        {"tensor parallel", p->sent_step.tp}, {"expert all-to-all", p->sent_step.ep},
        {"data parallel", p->sent_step.dp},   {"pipeline", p->sent_step.pp},
        {"total", p->sent_step.total}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        printf("  %-22s %16s  %12.1f B/token\n", rows[i].name, bytes_h(rows[i].v, a, sizeof a),
               rows[i].v / (double)p->tokens_rank_step);
    printf("  %-22s %16.0f\n\n", "messages (latency)", p->messages_step);

    printf("predicted step (compute %.2f GFLOP/s a rank%s, link %.3f GB/s, latency %.2f us%s%s)\n",
           o->peak_gflops * p->core_share, p->core_share < 1 ? ", ranks sharing the cores" : "",
           o->link_gbps, o->latency_us, link_from ? " from " : "", link_from ? link_from : "");
    printf("  %-22s %16.3e\n", "FLOPs on the rank", p->flops_rank_step);
    printf("  %-22s %16s\n", "compute", secs_h(p->compute_s, a, sizeof a));
    if (o->pp > 1) printf("  %-22s %16s\n", "pipeline bubble", secs_h(p->bubble_s, a, sizeof a));
    printf("  %-22s %16s  (%.1f%% of the serial step)\n", "communication",
           secs_h(p->comm_s, a, sizeof a), 100.0 * p->comm_s / p->step_s_serial);
    printf("  %-22s %16s  %s;  %s no overlap, %s with perfect overlap\n", "step",
           secs_h(p->step_s, a, sizeof a),
           o->overlap ? "the DP sums beside the backward" : "no overlap",
           secs_h(p->step_s_serial, b, sizeof b), secs_h(p->step_s_overlap, c, sizeof c));
    printf("  %-22s %16.0f tokens/s (all ranks)\n\n", "throughput", p->tokens_per_s);

    printf("predicted decode, batch 1 (memory %.2f GB/s a rank)\n", o->mem_gbps);
    printf("  %-22s %16s\n", "weights read a token", bytes_h(p->decode_bytes_rank, a, sizeof a));
    printf("  %-22s %16s\n", "TP all-reduces", secs_h(p->decode_comm_s, a, sizeof a));
    printf("  %-22s %16s  = %.1f tokens/s\n", "a token", secs_h(p->decode_s, a, sizeof a),
           1.0 / p->decode_s);
}

static void print_json(const char *path, const ffn_params_report *r, const ffn_plan *p,
                       const char *wtype, const char *atype, const char *link_from) {
    const ffn_plan_options *o = &p->opt;
    printf("{\"config\": ");
    cli_json_string(stdout, path);
    printf(", \"model_type\": ");
    cli_json_string(stdout, r->model_type);
    printf(", \"total_params\": %" PRId64 ",\n", r->params.total);
    printf(" \"layout\": {\"tp\": %" PRId64 ", \"ep\": %" PRId64 ", \"dp\": %" PRId64
           ", \"pp\": %" PRId64 ", \"world\": %" PRId64 ", \"zero1\": %s, \"zero\": %d},\n",
           o->tp, o->ep, o->dp, o->pp, p->world, o->zero1 || o->zero2 ? "true" : "false",
           o->zero2 ? 2 : o->zero1 ? 1 : 0);
    printf(
        " \"assumptions\": {\"weight_type\": \"%s\", \"act_type\": \"%s\", \"weight_bytes\": %s, "
        "\"grad_bytes\": %s, \"act_bytes\": %s, \"batch_size\": %" PRId64
        ", \"grad_accum\": %" PRId64 ", \"seq_len\": %" PRId64
        ", \"peak_gflops\": %s, \"link_gbps\": %s, \"latency_us\": %s, \"mem_gbps\": %s, ",
        wtype, atype, cli_json_num(o->weight_bytes, "%.17g"), cli_json_num(o->grad_bytes, "%.17g"),
        cli_json_num(o->act_bytes, "%.17g"), o->micro_batch, o->n_micro, o->seq_len,
        cli_json_num(o->peak_gflops, "%.17g"), cli_json_num(o->link_gbps, "%.17g"),
        cli_json_num(o->latency_us, "%.17g"), cli_json_num(o->mem_gbps, "%.17g"));
    printf("\"overlap\": %d, \"host_cores\": %" PRId64 ", \"threads\": %" PRId64
           ", \"core_share\": %s, \"compute_gflops\": %s, \"link_from\": ",
           o->overlap, o->host_cores, o->threads, cli_json_num(p->core_share, "%.17g"),
           cli_json_num(o->peak_gflops * p->core_share, "%.17g"));
    if (link_from) cli_json_string(stdout, link_from);
    else printf("null");
    printf("},\n");
    printf(" \"rank\": {\"heads\": %" PRId64 ", \"kv_heads\": %" PRId64 ", \"ffn_units\": %" PRId64
           ", \"layers\": %" PRId64 ", \"experts\": %" PRId64 ", \"params\": %" PRId64
           ", \"params_experts\": %" PRId64 "},\n",
           p->heads_per_rank, p->kv_heads_per_rank, p->ffn_units_per_rank, p->layers_per_stage,
           p->experts_per_rank, p->params_rank, p->params_rank_expert);
    printf(" \"memory_bytes\": {\"weights\": %s, \"gradients\": %s, \"gradients_backward\": %s, "
           "\"optimizer\": %s, \"activations\": %s, \"total\": %s},\n",
           cli_json_num(p->weight_bytes, "%.17g"), cli_json_num(p->grad_bytes, "%.17g"),
           cli_json_num(p->grad_backward_bytes, "%.17g"),
           cli_json_num(p->optim_bytes, "%.17g"), cli_json_num(p->act_bytes, "%.17g"),
           cli_json_num(p->total_bytes, "%.17g"));
    printf(" \"sent_bytes_step\": {\"tp\": %s, \"ep\": %s, \"dp\": %s, \"pp\": %s, "
           "\"total\": %s}, \"sent_bytes_per_token\": %s, \"messages_step\": %s,\n",
           cli_json_num(p->sent_step.tp, "%.17g"), cli_json_num(p->sent_step.ep, "%.17g"),
           cli_json_num(p->sent_step.dp, "%.17g"), cli_json_num(p->sent_step.pp, "%.17g"),
           cli_json_num(p->sent_step.total, "%.17g"), cli_json_num(p->sent_per_token, "%.17g"),
           cli_json_num(p->messages_step, "%.17g"));
    printf(" \"tokens_rank_step\": %" PRId64 ", \"tokens_global_step\": %" PRId64
           ", \"flops_rank_step\": %s,\n",
           p->tokens_rank_step, p->tokens_global_step, cli_json_num(p->flops_rank_step, "%.17g"));
    printf(" \"time_s\": {\"compute\": %s, \"bubble\": %s, \"comm\": %s, \"comm_dp\": %s, "
           "\"step\": %s, \"step_serial\": %s, \"step_overlap\": %s}, \"tokens_per_s\": %s,\n",
           cli_json_num(p->compute_s, "%.17g"), cli_json_num(p->bubble_s, "%.17g"),
           cli_json_num(p->comm_s, "%.17g"), cli_json_num(p->comm_dp_s, "%.17g"),
           cli_json_num(p->step_s, "%.17g"), cli_json_num(p->step_s_serial, "%.17g"),
           cli_json_num(p->step_s_overlap, "%.17g"), cli_json_num(p->tokens_per_s, "%.17g"));
    printf(" \"decode\": {\"bytes_rank\": %s, \"comm_s\": %s, \"token_s\": %s, "
           "\"tokens_per_s\": %s}}\n",
           cli_json_num(p->decode_bytes_rank, "%.17g"), cli_json_num(p->decode_comm_s, "%.17g"),
           cli_json_num(p->decode_s, "%.17g"), cli_json_num(1.0 / p->decode_s, "%.17g"));
}

/* --layer ffn|moe: one layer alone, as ffn bench layer --tp / bench moe --ep time it. */
static int plan_layer(int kind, const ffn_plan_layer_options *l, const ffn_plan_options *o,
                      const char *type_name, int json) {
    ffn_plan_layer p;
    ffn_status st = ffn_plan_layer_compute(l, o, &p);
    if (st != FFN_OK) return cli_fail(CMD, st);
    const int64_t ranks = kind == LAYER_FFN ? o->tp : o->ep;
    if (json) {
        printf("{\"layer\": \"%s\", \"type\": ", layer_names[kind]);
        cli_json_string(stdout, type_name);
        printf(", \"hidden\": %" PRId64 ", \"intermediate\": %" PRId64 ", \"experts\": %" PRId64
               ", \"top_k\": %" PRId64 ", \"tokens\": %" PRId64 ", \"%s\": %" PRId64 ",\n"
               " \"assumptions\": {\"peak_gflops\": %s, \"link_gbps\": %s, \"latency_us\": "
               "%s, \"act_bytes\": %s},\n"
               " \"flops_forward\": %s, \"flops_backward\": %s, \"sent_bytes_forward\": "
               "%s, \"sent_bytes_backward\": %s,\n"
               " \"time_s\": {\"forward\": %s, \"forward_comm\": %s, \"forward_backward\": "
               "%s, \"forward_backward_comm\": %s}}\n",
               l->hidden, l->intermediate, l->experts, l->top_k, l->tokens,
               kind == LAYER_FFN ? "tp" : "ep", ranks, cli_json_num(o->peak_gflops, "%.17g"),
               cli_json_num(o->link_gbps, "%.17g"), cli_json_num(o->latency_us, "%.17g"),
               cli_json_num(o->act_bytes, "%.17g"), cli_json_num(p.flops_forward, "%.17g"),
               cli_json_num(p.flops_backward, "%.17g"), cli_json_num(p.sent_forward, "%.17g"),
               cli_json_num(p.sent_backward, "%.17g"), cli_json_num(p.forward_s, "%.17g"),
               cli_json_num(p.forward_comm_s, "%.17g"), cli_json_num(p.forward_backward_s, "%.17g"),
               cli_json_num(p.forward_backward_comm_s, "%.17g"));
        return 0;
    }
    char a[32], b[32];
    if (kind == LAYER_FFN)
        printf("ffn plan: FFN layer %s D %" PRId64 " F %" PRId64 ", %" PRId64 " tokens, tp %" PRId64
               "\n", type_name, l->hidden, l->intermediate, l->tokens, ranks);
    else
        printf("ffn plan: MoE layer %s D %" PRId64 " Fe %" PRId64 ", %" PRId64 " experts top-%" PRId64
               ", %" PRId64 " tokens a rank, ep %" PRId64 "\n", type_name, l->hidden,
               l->intermediate, l->experts, l->top_k, l->tokens, ranks);
    printf("(peak %.1f GFLOP/s a rank, link %.2f GB/s, latency %.1f us)\n", o->peak_gflops,
           o->link_gbps, o->latency_us);
    printf("  %-20s %12.3e FLOPs  %12.0f B sent  %10s (communication %s)\n", "forward",
           p.flops_forward, p.sent_forward, secs_h(p.forward_s, a, sizeof a),
           secs_h(p.forward_comm_s, b, sizeof b));
    printf("  %-20s %12.3e FLOPs  %12.0f B sent  %10s (communication %s)\n", "forward+backward",
           p.flops_forward + p.flops_backward, p.sent_forward + p.sent_backward,
           secs_h(p.forward_backward_s, a, sizeof a), secs_h(p.forward_backward_comm_s, b, sizeof b));
    return 0;
}
static const double act_sizes[] = {4, 2, 2};

/* "KEY": number in the text of FILE; 0 found, else -1 said */
static int json_field(const char *path, const char *text, const char *key, double *v) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *at = strstr(text, pat);
    char *end = NULL;
    double x = at ? strtod(at + strlen(pat), &end) : NAN;
    if (!at || end == at + strlen(pat) || !(x >= 0) || !isfinite(x)) {
        cli_error(CMD, "--link-json %s: no number \"%s\" (expected the line of ffn bench link "
                  "--json)", path, key);
        return -1;
    }
    *v = x;
    return 0;
}

/* the link_gbps and latency_us of an ffn bench link --json line */
static int read_link(const char *path, double *gbps, double *lat) {
    size_t n = 0;
    char *t = cli_read_file(path, &n);
    if (!t) {
        cli_error(CMD, "--link-json %s: cannot read it", path);
        return -1;
    }
    double g = 0, l = 0;
    int rc = json_field(path, t, "link_gbps", &g) || json_field(path, t, "latency_us", &l) ? -1 : 0;
    free(t);
    if (!rc && !(g > 0)) {
        cli_error(CMD, "--link-json %s: link_gbps %g: expected > 0 (a run of more than one rank)",
                  path, g);
        rc = -1;
    }
    if (!rc) *gbps = g, *lat = l;
    return rc;
}

int cmd_plan(int argc, char **argv) {
    const char *config = NULL, *wtype = "f32";
    int json = 0, act_k = 0;
    int64_t zero = 0;
    ffn_plan_options d;
    ffn_plan_options_default(&d);
    int64_t tp = d.tp, ep = d.ep, dp = d.dp, pp = d.pp, batch = d.micro_batch,
            accum = d.n_micro, seq_len = d.seq_len;
    double peak = d.peak_gflops, link = d.link_gbps, latency = d.latency_us, mem = d.mem_gbps;
    int layer = LAYER_MODEL;
    const char *type_name = "swiglu", *link_json = NULL;
    int64_t host_cores = 0, threads = 1, overlap = 0;
    int64_t hidden = 4096, inter = 11008, moe_inter = 1408, experts = 8, top_k = 2, tokens = 512;
    const cli_types wtypes = cli_ggml_types(FFN_GGML_COMPUTES, 1);
    char wt_help[640];
    snprintf(wt_help, sizeof wt_help, "weight storage: %s (bytes per weight from the block "
             "size; for the decode estimate)", wtypes.list);
    const cli_opt opts[] = {
        CLI_OPT_TP(&tp),
        CLI_OPT_EP(&ep),
        CLI_OPT_DP(&dp),
        {CLI_INT_FIELDS("--pp", &pp, "P", 1, 65536, "pipeline stages")},
        {CLI_INT_FIELDS("--zero", &zero, "S", 0, 2,
                        "ZeRO stage, as in ffn train: 1 shards the optimizer state over the "
                        "data-parallel ranks, 2 also the gradients kept between steps; 0: every "
                        "rank keeps all of it")},
        {CLI_INT_FIELDS("--batch-size", &batch, "B", 1, 1 << 20,
                        "sequences per micro-batch on each data-parallel rank"),
         .group = "work"},
        {CLI_INT_FIELDS("--grad-accum", &accum, "A", 1, 1 << 20,
                        "micro-batches per optimizer step")},
        {CLI_INT_FIELDS("--seq-len", &seq_len, "T", 1, (int64_t)1 << 30,
                        "tokens per sequence (also the attention context)")},
        {.name = "--weight-type", .type = CLI_STR, .dst = &wtype, .metavar = "TYPE",
         .help = wt_help},
        {.name = "--act-type", .type = CLI_ENUM, .dst = &act_k, .names = act_names,
         .help = "activations, gradients and messages"},
        {CLI_FLOAT_FIELDS("--peak-gflops", &peak, "X", 0, 1e12,
                          "matrix-product peak of one rank, GFLOP/s (default: one Zen 4 core, "
                          "fp32 FMA)"),
         .fmin_open = 1, .group = "machine"},
        {CLI_FLOAT_FIELDS("--link-gbps", &link, "X", 0, 1e12,
                          "bytes a rank can send, GB/s (default: shared memory between two "
                          "processes on one host)"),
         .fmin_open = 1},
        {CLI_FLOAT_FIELDS("--latency-us", &latency, "X", 0, 1e9, "time per message, microseconds")},
        {.name = "--link-json", .type = CLI_STR, .dst = &link_json, .metavar = "FILE",
         .help = "the link measured here: the JSON line of mpirun -np 2 ffn bench link --json "
                 "(its link_gbps and latency_us replace --link-gbps and --latency-us)"},
        {CLI_INT_FIELDS("--host-cores", &host_cores, "C", 0, 1 << 20,
                        "the ranks share C cores (one host): a rank computes at "
                        "peak * min(1, C / (ranks * threads)); 0: each rank has its own")},
        {CLI_INT_FIELDS("--threads", &threads, "N", 1, 1 << 20, "threads a rank (for --host-cores)")},
        {CLI_INT_FIELDS("--overlap", &overlap, "0|1", 0, 1,
                        "1: the data-parallel gradient sums run beside the backward (ffn train "
                        "--overlap): step = forward + max(backward, sums) + the other messages")},
        {CLI_FLOAT_FIELDS("--mem-gbps", &mem, "X", 0, 1e12,
                          "memory read bandwidth of one rank, GB/s (default: half of the 33.5 "
                          "GB/s measured on a 2-core Zen 4 host)"),
         .fmin_open = 1},
        CLI_OPT_JSON(&json, "one JSON object on stdout with every figure and the assumptions"),
        {.name = "--layer", .type = CLI_ENUM, .dst = &layer, .names = layer_names,
         .group = "one layer alone (no CONFIG.json: what ffn bench layer --tp / moe --ep time)",
         .help = "model: the CONFIG.json's whole model; ffn: one FFN layer split over --tp "
                 "ranks; moe: one MoE layer, experts spread over --ep ranks"},
        {.name = "--type", .type = CLI_STR, .dst = &type_name, .metavar = "T",
         .help = "the layer's (the experts') activation: a gated family (swiglu, geglu, ...) or "
                 "a dense one (relu, gelu, ...)"},
        {CLI_INT_FIELDS("--hidden", &hidden, "D", 1, 1 << 20, "hidden_size")},
        {CLI_INT_FIELDS("--intermediate", &inter, "F", 1, 1 << 22, "intermediate_size (ffn)")},
        {CLI_INT_FIELDS("--moe-intermediate", &moe_inter, "F", 1, 1 << 22, "each expert's width (moe)")},
        {CLI_INT_FIELDS("--experts", &experts, "E", 1, 4096, "routed experts (moe)")},
        {CLI_INT_FIELDS("--top-k", &top_k, "K", 1, 4096, "experts a token uses (moe)")},
        {CLI_INT_FIELDS("--tokens", &tokens, "N", 1, 1 << 24, "tokens per call (moe: on each rank)")},
        {0}};
    const cli_pos pos[] = {{.name = "CONFIG.json", .dst = &config,
                            .help = "a Hugging Face config.json (any model_type ffn params reads)"},
                           {0}};
    const cli_spec spec = {.cmd = CMD, .about = about, .epilog = epilog, .opts = opts,
                           .pos = pos};
    int rc;
    if (cli_parse(&spec, argc, argv, &rc)) return rc;
    if ((layer == LAYER_MODEL) == !config) {
        cli_error(CMD, layer == LAYER_MODEL ? "give a CONFIG.json (or --layer ffn|moe)"
                                            : "--layer %s plans one layer: no CONFIG.json (%s)",
                  layer_names[layer], config);
        return CLI_EXIT_USAGE;
    }
    if (link_json && read_link(link_json, &link, &latency)) return CLI_EXIT_FAIL;
    if (layer != LAYER_MODEL) {
        ffn_act act;
        ffn_mlp_type type;
        if (cli_layer_type(CMD, type_name, &act, &type)) return CLI_EXIT_USAGE;
        ffn_plan_options o;
        ffn_plan_options_default(&o);
        o.tp = tp, o.ep = ep, o.act_bytes = act_sizes[act_k];
        o.peak_gflops = peak, o.link_gbps = link, o.latency_us = latency, o.mem_gbps = mem;
        ffn_plan_layer_options l = {.hidden = hidden, .gated = type == FFN_MLP_GATED,
                                    .tokens = tokens};
        l.intermediate = layer == LAYER_FFN ? inter : moe_inter;
        if (layer == LAYER_MOE) l.experts = experts, l.top_k = top_k;
        return plan_layer(layer, &l, &o, type_name, json);
    }

    ffn_ggml_type wt;
    if (!ffn_ggml_type_parse(wtype, &wt) || !(ffn_ggml_type_caps(wt) & FFN_GGML_COMPUTES)) {
        cli_error(CMD, "--weight-type '%s': expected %s", wtype, wtypes.list);
        return CLI_EXIT_USAGE;
    }
    double wbytes = (double)ffn_ggml_type_size(wt) / (double)ffn_ggml_block_size(wt);
    double abytes = act_sizes[act_k];

    ffn_params_options popt = {.seq_len = seq_len};
    ffn_params_report *r = NULL;
    ffn_status st = ffn_params_from_config(config, &popt, &r);
    if (st != FFN_OK) return cli_fail(CMD, st);
    ffn_plan_options o;
    ffn_plan_options_default(&o);
    o.tp = tp, o.ep = ep, o.dp = dp, o.pp = pp, o.zero1 = zero >= 1, o.zero2 = zero == 2;
    o.micro_batch = batch, o.n_micro = accum, o.seq_len = seq_len;
    o.weight_bytes = wbytes;
    o.grad_bytes = wbytes < 2 ? abytes : wbytes; /* a block format's gradient: the compute type */
    o.act_bytes = abytes;
    o.peak_gflops = peak, o.link_gbps = link, o.latency_us = latency, o.mem_gbps = mem;
    o.overlap = (int)overlap, o.host_cores = host_cores, o.threads = threads;
    ffn_plan p;
    st = ffn_plan_compute(r, &o, &p);
    if (st != FFN_OK) {
        ffn_params_report_free(r);
        return cli_fail(CMD, st);
    }
    if (json) print_json(config, r, &p, ffn_ggml_type_name(wt), act_names[act_k], link_json);
    else print_text(config, r, &p, ffn_ggml_type_name(wt), act_names[act_k], link_json);
    ffn_params_report_free(r);
    return 0;
}
