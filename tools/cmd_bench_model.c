/* cmd_bench_model.c -- `ffn bench model`: prompt and decode speed of a whole
 * model as `ffn run` loads it (a GGUF keeps its matrices in their type,
 * memory-mapped), in the terms llama.cpp reports: prompt tokens/s (one
 * forward over P tokens), decode tokens/s (single-token steps with the KV
 * cache after a C-token context), and for decode the bytes read per token
 * and the effective read bandwidth.  bench/bench_llamacpp.sh runs it beside
 * llama.cpp on the same file.
 *
 * Letters: P prompt tokens, C context tokens, G generated (timed) steps,
 * L layers, Gk kv heads, Dh head dim, E experts, K experts per token. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char model_about[] =
    "Times a model as `ffn run` loads it (a GGUF file keeps its matrices in their\n"
    "type, read from the memory-mapped file).  Two measurements, on random token\n"
    "ids (seeded) in one run:\n"
    "  prompt  one forward of P tokens from an empty cache (ffn_model_prefill; the\n"
    "          logits of the last token only): P / time, the best of R runs;\n"
    "  decode  after a C-token context (prefilled, not timed), G single-token steps\n"
    "          (ffn_model_step, KV cache, logits of every step): G / their total\n"
    "          time.\n"
    "Bytes read per decoded token: every weight once, except the token embedding\n"
    "(one row; unless tied, when it is the head), MoE experts counted K of E; plus\n"
    "the fp32 K and V cache rows the steps attend to (their mean over the steps).\n"
    "Effective bandwidth: those bytes × decode tokens/s.\n";

static const char model_epilog[] =
    "Output: one line per measurement, or with --json one object with prompt_tok_s,\n"
    "decode_tok_s, bytes_per_token (weight_bytes_per_token + kv_bytes_per_token),\n"
    "decode_gbps, weight_bytes, file_bytes and peak_rss_bytes (VmHWM).\n"
    "Compare decode_gbps with `ffn bench bandwidth --json` at the same --threads.\n\n"
    "Example:\n"
    "  ffn bench model m.gguf --prompt-tokens 512 --context 128 --gen 32 \\\n"
    "      --threads 2 --json\n";

/* The bytes of tensor t as the model holds it. */
static double tensor_bytes(const ffn_model *m, const ffn_model_tensor *t) {
    int type = ffn_model_tensor_type(m, t->name);
    size_t rb = 0;
    if (type < 0 || type == FFN_GGML_TYPE_F32 || t->ndim != 2 ||
        ffn_ggml_row_size((ffn_ggml_type)type, t->shape[1], &rb))
        return (double)t->numel * sizeof(float);
    return (double)rb * (double)t->shape[0];
}

/* Weight bytes one decoded token reads (see model_about). */
static double weight_bytes_per_token(const ffn_model *m) {
    const ffn_model_config *c = ffn_model_get_config(m);
    const double routed = c->num_experts > 0 ? (double)c->num_experts_per_tok / (double)c->num_experts : 1;
    double total = 0;
    for (int64_t i = 0; i < ffn_model_num_tensors(m); i++) {
        const ffn_model_tensor *t = ffn_model_tensor_at(m, i);
        double b = tensor_bytes(m, t);
        if (t->kind == FFN_TENSOR_EMBEDDING && !c->tie_word_embeddings) b /= (double)t->shape[0];
        else if (t->expert >= 0) b *= routed;
        total += b;
    }
    return total;
}

static int bench_model_fail(const char *cmd, ffn_status st, ffn_model *m, ffn_ctx *ctx,
                            int32_t *ids, float *logits) {
    free(ids);
    free(logits);
    ffn_model_free(m);
    ffn_ctx_free(ctx);
    return cli_fail(cmd, st);
}

int bench_model(int argc, char **argv) {
    const char *cmd = "bench model";
    const char *path = NULL, *ids_s = NULL;
    int64_t P = 512, C = 128, G = 32, threads = 0, repeats = 2, seed = 1;
    int json = 0, rc;
    const cli_opt opts[] = {
        {.name = "--prompt-tokens", .type = CLI_INT, .dst = &P, .metavar = "P", .imin = 0,
         .imax = INT64_C(1) << 20, .help = "tokens of the timed prompt forward (0: no prompt "
                                           "measurement)"},
        {.name = "--context", .type = CLI_INT, .dst = &C, .metavar = "C", .imin = 0,
         .imax = INT64_C(1) << 20, .help = "tokens in the KV cache before the timed decode steps"},
        {.name = "--gen", .type = CLI_INT, .dst = &G, .metavar = "G", .imin = 0,
         .imax = INT64_C(1) << 20, .help = "timed decode steps (0: no decode measurement)"},
        {.name = "--repeats", .type = CLI_INT, .dst = &repeats, .metavar = "R", .imin = 1,
         .imax = 1000, .help = "prompt forwards timed (the best counts); decode is timed once"},
        {.name = "--ids", .type = CLI_STR, .dst = &ids_s, .metavar = "\"1 2 3\"",
         .def = "random ids (--seed) in [3, V)",
         .help = "token ids, separated by spaces or commas: the prompt is the first P, the "
                 "context the first C and the decode steps the next G (at least max(P, C + G) "
                 "ids), so that another engine can be timed on the same ids"},
        CLI_OPT_THREADS(&threads),
        CLI_OPT_SEED(&seed, "seed of the random token ids"),
        CLI_OPT_JSON(&json, "one JSON object on stdout"),
        {0}};
    const cli_pos pos[] = {{.name = "MODEL", .dst = &path, .required = 1,
                            .help = "any model `ffn run` reads (a GGUF file, a Hugging Face or "
                                    "run directory, a llama2.c .bin)"},
                           {0}};
    const cli_spec spec = {.cmd = cmd, .about = model_about, .epilog = model_epilog,
                           .opts = opts, .pos = pos};
    if (cli_parse(&spec, argc, argv, &rc)) return rc;
    if (P == 0 && G == 0) return cli_usage_error(cmd, "--prompt-tokens 0 and --gen 0: nothing to time");

    ffn_ctx *ctx = NULL;
    if (cli_make_ctx(cmd, threads, &ctx)) return CLI_EXIT_FAIL;
    ffn_model_config cfg;
    ffn_checkpoint_info info;
    ffn_status st = ffn_checkpoint_read_config_any(path, &cfg, &info);
    if (st) return bench_model_fail(cmd, st, NULL, ctx, NULL, NULL);
    const int64_t need = (P > C + G ? P : C + G) + 1;
    if (need > cfg.max_position_embeddings) {
        cli_error(cmd, "%s: the model's context is %lld tokens; --prompt-tokens %lld and "
                  "--context %lld + --gen %lld need %lld", path,
                  (long long)cfg.max_position_embeddings, (long long)P, (long long)C,
                  (long long)G, (long long)need);
        ffn_ctx_free(ctx);
        return CLI_EXIT_FAIL;
    }
    ffn_model_options mo = {.max_batch = 1, .max_seq = need, .low_precision = 1};
    ffn_model *m = NULL;
    double t0 = cli_seconds();
    if ((st = ffn_checkpoint_load_any(ctx, path, &mo, &m, &info)))
        return bench_model_fail(cmd, st, NULL, ctx, NULL, NULL);
    const double load_s = cli_seconds() - t0;
    const ffn_model_config *c = ffn_model_get_config(m);
    const int64_t V = c->vocab_size, n_ids = P > C + G ? P : C + G;
    int32_t *ids = NULL;
    float *logits = malloc((size_t)V * sizeof *logits);
    if (ids_s) {
        int64_t n_given = 0;
        if (!cli_parse_ids(cmd, "--ids", ids_s, V, &ids, &n_given)) {
            free(logits);
            ffn_model_free(m);
            ffn_ctx_free(ctx);
            return CLI_EXIT_USAGE;
        }
        if (n_given < n_ids) {
            free(ids);
            free(logits);
            ffn_model_free(m);
            ffn_ctx_free(ctx);
            return cli_usage_error(cmd, "--ids has %lld ids; --prompt-tokens %lld, --context %lld "
                                   "and --gen %lld need %lld", (long long)n_given, (long long)P,
                                   (long long)C, (long long)G, (long long)n_ids);
        }
    } else if ((ids = malloc((size_t)(n_ids + 1) * sizeof *ids))) {
        ffn_rng rng;
        ffn_rng_seed(&rng, (uint64_t)seed);
        const int64_t lo = V > 8 ? 3 : 0; /* past the usual special ids */
        for (int64_t i = 0; i < n_ids; i++)
            ids[i] = (int32_t)(lo + (int64_t)ffn_rng_below(&rng, (uint64_t)(V - lo)));
    }
    if (!ids || !logits)
        return bench_model_fail(cmd, FFN_ERR_NOMEM, m, ctx, ids, logits);

    /* warm-up: a few tokens through every layer (pages of the file, the
     * kernels' first-call setup) */
    ffn_model_reset(m);
    st = ffn_model_prefill(m, ids, n_ids < 4 ? n_ids : 4, logits);
    double prompt_s = 0;
    for (int64_t r = 0; P > 0 && r < repeats && !st; r++) {
        ffn_model_reset(m);
        t0 = cli_seconds();
        st = ffn_model_prefill(m, ids, P, logits);
        double dt = cli_seconds() - t0;
        if (r == 0 || dt < prompt_s) prompt_s = dt;
    }
    double decode_s = 0, step_min = 0;
    if (G > 0 && !st) {
        ffn_model_reset(m);
        if (C > 0) st = ffn_model_prefill(m, ids, C, logits);
        for (int64_t g = 0; g < G && !st; g++) {
            t0 = cli_seconds();
            st = ffn_model_step(m, ids[C + g], logits);
            double dt = cli_seconds() - t0;
            decode_s += dt;
            if (g == 0 || dt < step_min) step_min = dt;
        }
    }
    if (st) return bench_model_fail(cmd, st, m, ctx, ids, logits);
    for (int64_t v = 0; v < V; v++)
        if (!isfinite(logits[v])) {
            cli_error(cmd, "%s: logit %lld is not finite after the run", path, (long long)v);
            free(ids);
            free(logits);
            ffn_model_free(m);
            ffn_ctx_free(ctx);
            return CLI_EXIT_FAIL;
        }

    const int64_t Dh = c->head_dim > 0 ? c->head_dim : c->hidden_size / c->num_attention_heads;
    /* step at position p reads p + 1 cached K and V rows per layer */
    const double kv_rows = G > 0 ? (double)C + (double)(G + 1) / 2.0 : 0;
    const double kv_bytes = 2.0 * (double)c->num_hidden_layers * kv_rows *
                            (double)(c->num_key_value_heads * Dh) * sizeof(float);
    const double w_bytes = weight_bytes_per_token(m);
    const double prompt_tps = prompt_s > 0 ? (double)P / prompt_s : 0;
    const double decode_tps = decode_s > 0 ? (double)G / decode_s : 0;
    const double gbps = (w_bytes + kv_bytes) * decode_tps * 1e-9;
    const int nt = ffn_ctx_threads(ctx);
    const int64_t rss = cli_peak_rss_bytes();
    if (json) {
        printf("{\"bench\": \"model\", \"model\": ");
        cli_json_string(stdout, path);
        printf(", \"threads\": %d, \"load_s\": %s, \"prompt_tokens\": %lld, \"repeats\": %lld, "
               "\"prompt_s\": %s, \"prompt_tok_s\": %s, \"context\": %lld, \"gen\": %lld, "
               "\"decode_s\": %s, \"decode_tok_s\": %s, \"decode_step_min_ms\": %s, "
               "\"weight_bytes_per_token\": %s, \"kv_bytes_per_token\": %s, "
               "\"bytes_per_token\": %s, \"decode_gbps\": %s, \"weight_bytes\": %zu, "
               "\"file_bytes\": %lld, \"peak_rss_bytes\": %lld}\n",
               nt, cli_json_num(load_s, "%.3f"), (long long)P, (long long)repeats,
               cli_json_num(prompt_s, "%.6f"), cli_json_num(prompt_tps, "%.3f"), (long long)C,
               (long long)G, cli_json_num(decode_s, "%.6f"), cli_json_num(decode_tps, "%.3f"),
               cli_json_num(step_min * 1e3, "%.4f"), cli_json_num(w_bytes, "%.0f"),
               cli_json_num(kv_bytes, "%.0f"), cli_json_num(w_bytes + kv_bytes, "%.0f"),
               cli_json_num(gbps, "%.3f"), ffn_model_weight_bytes(m), (long long)info.file_bytes,
               (long long)rss);
    } else {
        printf("model %s: %d threads, loaded in %.2f s, weights %zu bytes, peak RSS %lld bytes\n",
               path, nt, load_s, ffn_model_weight_bytes(m), (long long)rss);
        if (P > 0)
            printf("  prompt  %lld tokens: %.3f s, %.2f tokens/s (best of %lld)\n", (long long)P,
                   prompt_s, prompt_tps, (long long)repeats);
        if (G > 0)
            printf("  decode  %lld steps after %lld tokens: %.2f tokens/s (fastest step %.2f "
                   "ms); %.0f bytes/token read (%.0f weights, %.0f KV): %.2f GB/s\n",
                   (long long)G, (long long)C, decode_tps, step_min * 1e3, w_bytes + kv_bytes,
                   w_bytes, kv_bytes, gbps);
    }
    free(ids);
    free(logits);
    ffn_model_free(m);
    ffn_ctx_free(ctx);
    return 0;
}
