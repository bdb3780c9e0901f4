/* cmd_report.c -- `ffn report RUN_DIR`: write the interactive HTML report of
 * a run directory.  The flags are parsed here; the page is built by
 * report_write (tools/report.c), which `ffn demo` also calls. */
#include "report.h"

#include <stdio.h>
#include <string.h>

static const char usage_text[] =
    "usage: ffn report RUN_DIR [--out FILE.html] [--prompt TEXT] [--layer L]\n"
    "                  [--model VARIANT|DIR]... [--config config.json]... [--top K]\n"
    "                  [--promoted P] [--threads N]\n"
    "\n"
    "Writes ONE self-contained HTML file about a run directory: open it in any\n"
    "browser, offline.  It makes no network request and loads no external script,\n"
    "style or font (everything is inline; a Content-Security-Policy forbids the\n"
    "rest).\n"
    "\n"
    "RUN_DIR is the --out directory of `ffn compare` or `ffn demo` (compare.json,\n"
    "<variant>-seed<k>/ checkpoints and <variant>-seed<k>.metrics.jsonl), or one\n"
    "checkpoint directory of `ffn train --out DIR` (its metrics are read from\n"
    "DIR/metrics.jsonl or DIR.metrics.jsonl when present).\n"
    "\n"
    "The page shows:\n"
    "  1. validation loss: the curves of every run (from the metrics files; a legend\n"
    "     entry hides a variant; hover for values), and compare.json's table\n"
    "     (parameters, active parameters, FLOPs per token, val loss, tokens/s);\n"
    "  2. where the parameters go: attention / FFN / MoE router / embeddings /\n"
    "     norms / LM head as shares of the total (or of the active parameters per\n"
    "     token), for each variant's model and for published configs (--config;\n"
    "     by default a built-in copy of Llama-2-7B's config.json);\n"
    "  3. the prompt's tokens: click one (or use the arrow keys) to see, at the\n"
    "     chosen layer, its top-K neurons by |m_i| with their gate, up and product\n"
    "     bars, the tokens each neuron's value vector promotes (the logit lens,\n"
    "     v_i read through the final norm's scale and the output embedding), how\n"
    "     much of the FFN output the top-K explain, and for MoE layers the experts\n"
    "     the token went to and their router weights.  Computed in C by\n"
    "     ffn_inspect_run (see ffn inspect --help) and embedded as JSON: only the\n"
    "     top K per token per layer, drawn on click, so a long prompt stays fast;\n"
    "  4. the linear collapse: for the `linear` run, each layer's W_down.W_up\n"
    "     merged into one D x D matrix, the parameters before and after, and the\n"
    "     max difference between the two-layer and the merged map on 64 random\n"
    "     inputs.\n"
    "\n"
    "options:\n"
    "  --out FILE.html     where to write (default RUN_DIR/report.html); written to\n"
    "                      FILE.html.tmp-XXXXXX, flushed to disk, then renamed into place\n"
    "  --prompt TEXT       the text whose tokens are inspected (default\n"
    "                      \"" REPORT_DEFAULT_PROMPT "\").\n"
    "                      Longer than the model's context, it runs in windows,\n"
    "                      each from position 0; characters outside the vocabulary\n"
    "                      become <unk> (counted on the page); at most 4096 tokens\n"
    "  --layer L           embed only layer L (default: every layer, chosen on the\n"
    "                      page; the last layer is shown first)\n"
    "  --model NAME|DIR    the model whose neurons are shown: a variant of RUN_DIR\n"
    "                      (its best seed per compare.json) or a checkpoint\n"
    "                      directory; repeat for several (at most 4; the page has a\n"
    "                      selector).  Default: the best gated variant (swiglu first)\n"
    "                      and the moe variant when there is one\n"
    "  --config FILE       a published Hugging Face config.json for the parameter\n"
    "                      chart (llama, mistral, mixtral, qwen2, qwen2_moe, gpt2,\n"
    "                      bert, deepseek_v2/v3; see ffn params --help); repeat for\n"
    "                      several (at most 8).  Replaces the built-in Llama-2-7B\n"
    "  --top K             neurons per token per layer (default 8)\n"
    "  --promoted P        promoted tokens per neuron (default 6)\n"
    "  --threads N         (default FFN_NUM_THREADS or all cores)\n"
    "\n"
    "Prints the written file's path on stdout.  Exit status: 0 written, 1 failed\n"
    "(the message names the file), 2 bad usage.\n"
    "\n"
    "example:\n"
    "  ffn compare --variants none,linear,gelu,swiglu,moe --steps 300 --out runs\n"
    "  ffn report runs --config tests/data/configs/Mixtral-8x7B-v0.1.json\n"
    "  xdg-open runs/report.html\n";

int cmd_report(int argc, char **argv) {
    const char *cmd = "report";
    report_options o;
    report_options_default(&o);
    o.cmd = cmd;
    const char *run_dir = NULL, *out = NULL;
    int64_t threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int r;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage_text, stdout);
            return 0;
        }
        if ((r = cli_flag(cmd, argc, argv, &i, "--out", &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            out = v;
        } else if ((r = cli_flag(cmd, argc, argv, &i, "--prompt", &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            o.prompt = v;
        } else if ((r = cli_flag(cmd, argc, argv, &i, "--layer", &v))) {
            if (r < 0 || !cli_parse_i64(cmd, "--layer", v, 0, 1 << 20, &o.layer)) return CLI_EXIT_USAGE;
        } else if ((r = cli_flag(cmd, argc, argv, &i, "--top", &v))) {
            if (r < 0 || !cli_parse_i64(cmd, "--top", v, 1, 256, &o.top_k)) return CLI_EXIT_USAGE;
        } else if ((r = cli_flag(cmd, argc, argv, &i, "--promoted", &v))) {
            if (r < 0 || !cli_parse_i64(cmd, "--promoted", v, 1, 64, &o.n_promoted)) return CLI_EXIT_USAGE;
        } else if ((r = cli_flag(cmd, argc, argv, &i, "--threads", &v))) {
            if (r < 0 || !cli_parse_i64(cmd, "--threads", v, 0, 4096, &threads)) return CLI_EXIT_USAGE;
        } else if ((r = cli_flag(cmd, argc, argv, &i, "--model", &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            if (o.n_models >= REPORT_MAX_MODELS) {
                cli_error(cmd, "--model: at most %d models", REPORT_MAX_MODELS);
                return CLI_EXIT_USAGE;
            }
            o.models[o.n_models++] = v;
        } else if ((r = cli_flag(cmd, argc, argv, &i, "--config", &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            if (o.n_configs >= REPORT_MAX_CONFIGS) {
                cli_error(cmd, "--config: at most %d configs", REPORT_MAX_CONFIGS);
                return CLI_EXIT_USAGE;
            }
            o.configs[o.n_configs++] = v;
        } else if (a[0] == '-' && a[1] != '\0') {
            cli_error(cmd, "unknown option '%s' (see ffn report --help)", a);
            return CLI_EXIT_USAGE;
        } else if (!run_dir) {
            run_dir = a;
        } else {
            cli_error(cmd, "one RUN_DIR expected, got '%s' and '%s'", run_dir, a);
            return CLI_EXIT_USAGE;
        }
    }
    if (!run_dir) {
        cli_error(cmd, "missing RUN_DIR (see ffn report --help)");
        return CLI_EXIT_USAGE;
    }
    ffn_ctx *ctx = NULL;
    int rc = cli_make_ctx(cmd, (int)threads, &ctx);
    if (rc) return rc;
    rc = report_write(ctx, run_dir, &o, out);
    ffn_ctx_free(ctx);
    if (rc == 0) {
        if (out) printf("%s\n", out);
        else printf("%s/report.html\n", run_dir);
    }
    return rc;
}
