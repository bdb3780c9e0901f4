/* cmd_report.c -- `ffn report RUN_DIR`: write the interactive HTML report of
 * a run directory.  The flags are parsed here; the page is built by
 * report_write (tools/report.c), which `ffn demo` also calls. */
#include "report.h"

#include <stdio.h>
#include <string.h>

static const char about[] =
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
    "     inputs;\n"
    "  5. when asked for (options below): causal tracing of the facts\n"
    "     (--trace-facts), how distributed a fact is (--fact-dist), a\n"
    "     transcoder's features on the prompt (--transcoder), neurons vs\n"
    "     features (--purity) and ROME / FT / MEMIT on N edits (--edit-compare).\n";

static const char synopsis[] =
    "RUN_DIR [--out FILE.html] [--prompt TEXT] [--layer L]\n"
    "                  [--model VARIANT|DIR]... [--config config.json]... [--top K]\n"
    "                  [--promoted P] [--lang en|zh] [--threads N]";

static const char epilog[] =
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
    int lang = FFN_LANG_EN;
    const cli_opt opts[] = {
        {.name = "--out", .type = CLI_PATH, .dst = &out, .metavar = "FILE.html",
         .def = "RUN_DIR/report.html",
         .help = "where to write; written to FILE.html.tmp-XXXXXX, flushed to disk, then renamed into "
                 "place"},
        {.name = "--prompt", .type = CLI_STR, .dst = &o.prompt, .metavar = "TEXT",
         .def = "\"" REPORT_DEFAULT_PROMPT "\"",
         .help = "the text whose tokens are inspected.  Longer than the model's context, it "
                 "runs in windows, each from position 0; characters outside the vocabulary "
                 "become <unk> (counted on the page); at most 4096 tokens"},
        {.name = "--layer", .type = CLI_INT, .dst = &o.layer, .metavar = "L", .imin = 0,
         .imax = 1 << 20, .def = "every layer, chosen on the page; the last layer is shown first",
         .help = "embed only layer L (" CLI_LAYER_HELP ")"},
        {.name = "--model", .type = CLI_STR, .dst = (void *)o.models, .metavar = "NAME|DIR",
         .max_count = REPORT_MAX_MODELS, .count = &o.n_models,
         .def = "the best gated variant (swiglu first) and the moe variant when there is one",
         .help = "the model whose neurons are shown: a variant of RUN_DIR (its best seed per "
                 "compare.json) or a checkpoint directory; repeat for several (at most 4; the "
                 "page has a selector)"},
        {.name = "--config", .type = CLI_PATH, .dst = (void *)o.configs, .metavar = "FILE",
         .max_count = REPORT_MAX_CONFIGS, .count = &o.n_configs,
         .help = "a published Hugging Face config.json for the parameter chart (llama, "
                 "mistral, mixtral, qwen2, qwen2_moe, gpt2, bert, deepseek_v2/v3; see ffn params "
                 "--help); repeat for several (at most 8).  Replaces the built-in Llama-2-7B"},
        {.name = "--top", .type = CLI_INT, .dst = &o.top_k, .metavar = "K", .imin = 1,
         .imax = 256, .help = "neurons per token per layer"},
        {.name = "--promoted", .type = CLI_INT, .dst = &o.n_promoted, .metavar = "P", .imin = 1,
         .imax = 64, .help = "promoted tokens per neuron"},
        {.name = "--trace-facts", .type = CLI_INT, .dst = &o.trace_facts, .metavar = "N", .imin = 0,
         .imax = FFN_FACTS_DEFAULT, .def = "0: no trace section",
         .help = "add a causal-trace section: the first N facts of the facts corpus traced on "
                 "the first model (see ffn trace --help; for a model trained with --corpus facts)"},
        {.name = "--fact-dist", .type = CLI_INT, .dst = &o.fact_dist, .metavar = "N", .imin = 0,
         .imax = FFN_FACTS_DEFAULT, .def = "0: no such section",
         .help = "add a section on how distributed each of the first N facts is: the smallest "
                 "ablation set of neurons (see ffn trace --distributed)"},
        {.name = "--transcoder", .type = CLI_PATH, .dst = (void *)o.transcoders,
         .metavar = "FILE", .max_count = REPORT_MAX_TRANSCODERS, .count = &o.n_transcoders,
         .def = "none: no feature section",
         .help = "a transcoder or SAE of a layer of the first model (ffn transcoder train): "
                 "adds a feature section, each prompt token's most active features and the "
                 "tokens their decoder rows promote; repeat for several (at most 8)"},
        {.name = "--purity", .type = CLI_PATH, .dst = (void *)o.purity, .metavar = "FILE",
         .max_count = REPORT_MAX_TRANSCODERS, .count = &o.n_purity, .def = "none",
         .help = "the JSON of `ffn transcoder purity --json`: a table of neurons vs "
                 "transcoder vs SAE features (purity, units needed to read a relation or an "
                 "object out) in the feature section; repeat for several layers (at most 8)"},
        {.name = "--edit-compare", .type = CLI_PATH, .dst = (void *)o.edit_compare,
         .metavar = "FILE", .max_count = REPORT_MAX_TRANSCODERS, .count = &o.n_edit_compare,
         .def = "none",
         .help = "the JSON of `ffn edit --compare --json`: ROME one after another, FT and "
                 "MEMIT on one batch (efficacy, generalisation, specificity, held-out change); "
                 "repeat for several batch sizes N (at most 8), one table row group each"},
        CLI_OPT_LANG("--lang", &lang, "the language of the page's words (en, zh)"),
        CLI_OPT_THREADS(&threads),
        {0}};
    const cli_pos pos[] = {{.name = "RUN_DIR", .dst = &run_dir, .required = 1,
                            .help = "a compare/demo --out directory or a checkpoint directory",
                            .missing = "missing RUN_DIR: the directory to report on"},
                           {0}};
    const cli_spec spec = {.cmd = cmd, .synopsis = synopsis, .about = about, .epilog = epilog,
                           .opts = opts, .pos = pos};
    int rc;
    if (cli_parse(&spec, argc, argv, &rc)) return rc;
    o.lang = (ffn_lang)lang;
    ffn_ctx *ctx = NULL;
    rc = cli_make_ctx(cmd, threads, &ctx);
    if (rc) return rc;
    rc = report_write(ctx, run_dir, &o, out);
    ffn_ctx_free(ctx);
    if (rc == 0) {
        if (out) printf("%s\n", out);
        else printf("%s/report.html\n", run_dir);
    }
    return rc;
}
