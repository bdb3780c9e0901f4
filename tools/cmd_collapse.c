/* cmd_collapse.c -- `ffn collapse`: a dense FFN whose activation is the
 * identity is two linear maps in a row, so it is one:
 *     y = W_down (W_up x + b_up) + b_down = W x + b,
 *     W = W_down · W_up  (D, D),   b = W_down · b_up + b_down  (D).
 * The command builds W and b, writes them, and measures the difference
 * between the two-layer forward and the merged one on seeded random inputs.
 * Any other layer is refused with the reason no such merge exists.
 *
 * Letters: S samples, D hidden_size, F intermediate_size.
 *
 * The merge and the check are the library's (ffn/collapse.h): W with double
 * sums, then the layer's own forward against W x + b on seeded inputs.
 * This file reads the files, explains refusals and prints. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Shared with `ffn layer` (defined in cmd_layer.c). */
int layer_resolve_type(ffn_layer_config *cfg, const ffn_st_file *wf, const char *config_path,
                       const char *cmd);
int layer_load_weights(const char *cmd, const ffn_st_file *wf, const ffn_layer_config *cfg,
                       ffn_layer_params *w);
void layer_free_params(ffn_layer_params *p);

static const char about[] =
    "Merge a dense FFN layer with hidden_act \"linear\" into one matrix, and measure\n"
    "how far the merged layer is from the two-layer one.\n"
    "\n"
    "  two layers:  y = W_down (W_up x + b_up) + b_down\n"
    "  merged:      y = W x + b,   W = W_down . W_up [D, D],\n"
    "                              b = W_down . b_up + b_down [D]\n"
    "\n"
    "No layer at hand?  `ffn layer --make-example DIR` writes DIR/linear.json and\n"
    "DIR/linear.safetensors.\n";

static const char synopsis[] =
    "--config layer.json --weights w.safetensors\n"
    "                    --output merged.safetensors [--samples N] [--seed S]\n"
    "                    [--threads N] [--json]";

static const char epilog[] =
    "The report: the max absolute difference between the two forwards, the same\n"
    "relative to max|y|, and the parameter counts before and after.\n"
    "\n"
    "Why only a linear, dense layer: with a nonlinear act, act(W_up x) is not\n"
    "linear in x, so no matrix W gives W x for every x; a gated layer\n"
    "act(gate(x)) * up(x) multiplies two functions of x, and even with a linear\n"
    "act (Bilinear) the product of two linear maps of x is quadratic in x.\n"
    "Exit status: 0 merged, 1 refused or failed (reason on stderr), 2 bad usage.\n";

/* ---- why a layer does not collapse ------------------------------------ */

static int refuse(const char *config_path, const ffn_layer_config *cfg, int gated) {
    const char *act = ffn_act_name(cfg->act);
    if (gated) {
        cli_error("collapse",
                  "%s: no single matrix exists for a gated layer: y = down(act(gate(x)) * up(x)) "
                  "multiplies two functions of x elementwise.  Even with hidden_act linear "
                  "(Bilinear) it is the product of two linear maps of x, which is quadratic in x "
                  "(doubling x quadruples y), so no W gives y = W x + b for every x.  Only a "
                  "dense layer with hidden_act linear collapses.",
                  config_path);
    } else if (cfg->act == FFN_ACT_RELU) {
        cli_error("collapse",
                  "%s: no single matrix exists for hidden_act '%s': relu is only piecewise "
                  "linear, so W_down relu(W_up x + b_up) is not linear in x: each pattern of "
                  "signs of W_up x + b_up selects a different matrix, and none fits every x.  "
                  "Only hidden_act linear collapses.",
                  config_path, act);
    } else {
        cli_error("collapse",
                  "%s: no single matrix exists for hidden_act '%s': the activation is "
                  "nonlinear (act(a + b) != act(a) + act(b)), so act(W_up x + b_up) is not "
                  "linear in x and W_down act(W_up x + b_up) + b_down cannot be written as "
                  "W x + b.  Only hidden_act linear collapses.",
                  config_path, act);
    }
    return CLI_EXIT_FAIL;
}

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

/* ---- the merge -------------------------------------------------------- */

typedef struct collapse_args {
    const char *config, *weights, *output;
    int64_t samples, seed, threads;
    int json;
} collapse_args;

static float *alloc_floats(int64_t a, int64_t b) {
    size_t count, bytes;
    if (a < 0 || b < 0 || __builtin_mul_overflow((size_t)a, (size_t)b, &count) ||
        __builtin_mul_overflow(count, sizeof(float), &bytes))
        return NULL;
    return calloc(count ? count : 1, sizeof(float));
}

static int run(const collapse_args *a) {
    const char *cmd = "collapse";
    ffn_layer_config cfg;
    ffn_status st = ffn_layer_config_load(a->config, &cfg);
    if (st == FFN_ERR_UNSUPPORTED) {
        cli_fail(cmd, st);
        cli_error(cmd, "collapse works on one dense FFN layer, not a Mixture of Experts");
        return CLI_EXIT_FAIL;
    }
    if (st != FFN_OK) return cli_fail(cmd, st);

    int rc = CLI_EXIT_FAIL;
    ffn_st_file *wf = NULL;
    ffn_ctx *ctx = NULL;
    ffn_layer_params w = {0};
    float *merged_w = NULL, *merged_b = NULL;
    ffn_st_writer *wr = NULL;

    if ((st = ffn_st_open(a->weights, &wf)) != FFN_OK) { rc = cli_fail(cmd, st); goto done; }
    if (cfg.type == FFN_MLP_GATED || ffn_st_has(wf, "gate_proj.weight")) {
        rc = refuse(a->config, &cfg, 1);
        goto done;
    }
    if (cfg.act != FFN_ACT_LINEAR) {
        rc = refuse(a->config, &cfg, 0);
        goto done;
    }
    if ((rc = layer_resolve_type(&cfg, wf, a->config, cmd)) != 0) goto done;
    if ((rc = layer_load_weights(cmd, wf, &cfg, &w)) != 0) goto done;
    rc = CLI_EXIT_FAIL;

    const int64_t D = cfg.hidden_size, F = cfg.intermediate_size, S = a->samples;
    if (cli_make_ctx(cmd, a->threads, &ctx)) goto done;
    merged_w = alloc_floats(D, D); /* (D, D) W */
    merged_b = alloc_floats(D, 1); /* (D) b */
    if (!merged_w || !merged_b) {
        cli_error(cmd, "out of memory for D = %lld (the merged matrix needs D x D floats)",
                  (long long)D);
        goto done;
    }
    /* the merge and the check: the library's (ffn/collapse.h) */
    ffn_collapse_result res;
    if ((st = ffn_collapse_merge(&cfg, &w, merged_w, merged_b)) != FFN_OK ||
        (st = ffn_collapse_check(ctx, &cfg, &w, merged_w, merged_b, S, (uint64_t)a->seed,
                                 &res)) != FFN_OK) {
        rc = cli_fail(cmd, st);
        goto done;
    }
    double max_abs = res.max_abs_diff, max_rel = res.max_rel_diff, max_y = res.max_abs_y;

    /* write weight (and bias) */
    const int64_t wshape[2] = {D, D}, bshape[1] = {D};
    if ((st = ffn_st_writer_create(&wr)) != FFN_OK) { rc = cli_fail(cmd, st); goto done; }
    st = ffn_st_writer_add(wr, "weight", FFN_DTYPE_F32, 2, wshape, merged_w);
    if (st == FFN_OK && cfg.bias) st = ffn_st_writer_add(wr, "bias", FFN_DTYPE_F32, 1, bshape, merged_b);
    if (st == FFN_OK) st = ffn_st_writer_set_metadata(wr, "ffn_collapse", "W = W_down . W_up, b = W_down . b_up + b_down");
    if (st == FFN_OK) st = ffn_st_writer_save(wr, a->output);
    if (st != FFN_OK) { rc = cli_fail(cmd, st); goto done; }

    const int64_t before = res.params_before, after = res.params_after;
    if (a->json) {
        printf("{\"hidden_size\": %lld, \"intermediate_size\": %lld, \"bias\": %s, "
               "\"samples\": %lld, \"seed\": %lld, \"max_abs_diff\": %s, "
               "\"max_rel_diff\": %s, \"max_abs_y\": %s, \"params_before\": %lld, "
               "\"params_after\": %lld, \"flops_per_token_before\": %lld, "
               "\"flops_per_token_after\": %lld, \"output\": ",
               (long long)D, (long long)F, cfg.bias ? "true" : "false", (long long)S,
               (long long)a->seed, cli_json_num(max_abs, "%.9g"), cli_json_num(max_rel, "%.9g"),
               cli_json_num(max_y, "%.9g"), (long long)before, (long long)after,
               (long long)ffn_layer_flops_per_token(&cfg), (long long)(2 * D * D));
        json_string(stdout, a->output);
        printf("}\n");
    } else {
        printf("collapsed a dense linear layer (D %lld, F %lld%s) into one matrix:\n"
               "  W = W_down . W_up [%lld, %lld]%s\n"
               "  parameters: %lld -> %lld (x%.3f); FLOPs per token: %lld -> %lld\n"
               "  on %lld random inputs x ~ N(0, 1) (seed %lld): max abs difference %.3e, "
               "max relative %.3e (of max|y| %.3e)\n"
               "wrote %s (weight%s)\n",
               (long long)D, (long long)F, cfg.bias ? ", biases" : "", (long long)D, (long long)D,
               cfg.bias ? ", b = W_down . b_up + b_down [D]" : "", (long long)before,
               (long long)after, (double)after / (double)before,
               (long long)ffn_layer_flops_per_token(&cfg), (long long)(2 * D * D),
               (long long)S, (long long)a->seed, max_abs, max_rel, max_y, a->output,
               cfg.bias ? ", bias" : "");
    }
    rc = 0;
done:
    ffn_st_writer_free(wr);
    ffn_ctx_free(ctx);
    layer_free_params(&w);
    free(merged_w);
    free(merged_b);
    ffn_st_close(wf);
    return rc;
}

int cmd_collapse(int argc, char **argv) {
    const char *cmd = "collapse";
    collapse_args a = {.samples = 64, .seed = 1};
    const cli_opt opts[] = {
        {.name = "--config", .type = CLI_PATH, .dst = &a.config, .metavar = "layer.json",
         .help = "hidden_size (D), intermediate_size (F), hidden_act (must be \"linear\"), "
                 "mlp_bias (see ffn layer --help)"},
        {.name = "--weights", .type = CLI_PATH, .dst = &a.weights, .metavar = "w.safetensors",
         .help = "up_proj.weight [F, D], down_proj.weight [D, F] (+ up_proj.bias [F], "
                 "down_proj.bias [D] with mlp_bias)"},
        {.name = "--output", .type = CLI_PATH, .dst = &a.output,
         .metavar = "merged.safetensors",
         .help = "weight [D, D] (and bias [D] with mlp_bias), F32, written atomically"},
        {.name = "--samples", .type = CLI_INT, .dst = &a.samples, .metavar = "N", .imin = 1,
         .imax = 1 << 20, .help = "random inputs x ~ N(0, 1) to compare on"},
        CLI_OPT_SEED(&a.seed, "their seed"),
        CLI_OPT_THREADS(&a.threads),
        CLI_OPT_JSON(&a.json, "print the report as one JSON object"),
        {0}};
    const cli_spec spec = {.cmd = cmd, .synopsis = synopsis, .about = about, .epilog = epilog,
                           .opts = opts};
    int rc;
    if (cli_parse(&spec, argc, argv, &rc)) return rc;
    const char *missing = !a.config ? "--config" : !a.weights ? "--weights"
                        : !a.output ? "--output" : NULL;
    if (missing) {
        cli_error(cmd, "missing %s (usage: ffn collapse --config layer.json --weights "
                  "w.safetensors --output merged.safetensors)", missing);
        return CLI_EXIT_USAGE;
    }
    return run(&a);
}
