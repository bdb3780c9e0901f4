/* report.h -- the interactive HTML report of a run directory: one
 * self-contained file (inline CSS, JS and data; no network request, no
 * external script or font) that `ffn report` writes and `ffn demo` writes at
 * its end.
 *
 * What the page shows:
 *   1. validation-loss curves of every run in the directory (from
 *      DIR/<variant>-seed<k>.metrics.jsonl, or DIR/metrics.jsonl for a
 *      single `ffn train` run), and the table of DIR/compare.json;
 *   2. where the parameters go: attention / FFN (incl. router) / embeddings /
 *      norms / LM head, as proportions, for every model of the directory
 *      (counted from its tensor table) and for published config.json files
 *      (ffn_params_from_config; the built-in Llama-2-7B config by default);
 *   3. the prompt's tokens: clicking one shows, for a chosen layer, its top-K
 *      neurons (gate, up and product bars) and the tokens each neuron's value
 *      vector promotes (logit lens), computed by ffn_inspect_run; MoE layers
 *      also show the experts the token went to;
 *   4. the linear-collapse check of the `linear` run: per layer the merged
 *      W = W_down·W_up (D×D), the parameter counts before and after, and the
 *      max difference between the two-layer and the merged map on random
 *      inputs.
 *
 * A run directory is either the output of `ffn compare` / `ffn demo`
 * (compare.json, <variant>-seed<k>/ checkpoints, their .metrics.jsonl) or
 * one checkpoint directory of `ffn train --out DIR` (config.json inside;
 * its metrics are read from DIR/metrics.jsonl or DIR.metrics.jsonl when
 * present). */
#ifndef FFN_REPORT_H
#define FFN_REPORT_H

#include "cli.h"

#define REPORT_MAX_MODELS 4
#define REPORT_MAX_CONFIGS 8
#define REPORT_MAX_TRANSCODERS 8

typedef struct report_options {
    const char *cmd;         /* names the command in messages ("report", "demo") */
    const char *prompt;      /* NULL: REPORT_DEFAULT_PROMPT */
    int64_t layer;           /* -1: every layer (the page has a selector); else only this one */
    int64_t top_k;           /* neurons per token per layer (8) */
    int64_t n_promoted;      /* promoted tokens per neuron (6) */
    /* the models whose neurons are shown: variant names of the run directory
     * or checkpoint directories; none: the best gated run (swiglu first) and
     * the moe run when there is one */
    int n_models;
    const char *models[REPORT_MAX_MODELS];
    /* published config.json files for the parameter chart; none: the
     * built-in Llama-2-7B config */
    int n_configs;
    const char *configs[REPORT_MAX_CONFIGS];
    uint64_t seed;           /* random inputs of the collapse check (1) */
    int64_t trace_facts;     /* > 0: a causal-trace section over that many facts of the
                                facts corpus, on the first model shown (0: none) */
    int64_t fact_dist;       /* > 0: a section on how distributed each of that many facts is
                                (the smallest ablation set, tools/trace_dist.c; 0: none) */
    ffn_lang lang;           /* the page's language (EN; ZH: the catalogue's Chinese, tools/i18n.c) */
    /* transcoder / SAE files of the first model shown: a feature section
     * (tools/tc_report.c): each token's most active features, promoted tokens */
    int n_transcoders;
    const char *transcoders[REPORT_MAX_TRANSCODERS];
    /* measured tables from other tools' --json output, shown in the feature
     * section: `ffn transcoder purity --json` (neurons vs transcoder vs SAE
     * features) and `ffn edit --compare --json` (ROME / FT / MEMIT; one file
     * per batch size N) */
    int n_purity;
    const char *purity[REPORT_MAX_TRANSCODERS];
    int n_edit_compare;
    const char *edit_compare[REPORT_MAX_TRANSCODERS];
} report_options;

#define REPORT_DEFAULT_PROMPT "Mary gave John the apple because he was hungry."

void report_options_default(report_options *opts);

/* Example (the end of `ffn demo`):
 *     report_options ro;
 *     report_options_default(&ro);
 *     ro.cmd = "demo";
 *     int rc = report_write(ctx, plan.out_dir, &ro, NULL);   // OUT/report.html
 *     if (rc) return rc;                                      // message already printed
 */

/* Write the report of run_dir to out_path (NULL: run_dir/report.html),
 * atomically (out_path.tmp-XXXXXX, fsync, rename).  Prints nothing on success and
 * returns 0; on failure prints one message naming the file on stderr
 * ("ffn <cmd>: ...") and returns CLI_EXIT_FAIL (CLI_EXIT_USAGE for a bad
 * option such as an unknown --model variant or a --layer out of range). */
int report_write(ffn_ctx *ctx, const char *run_dir, const report_options *opts,
                 const char *out_path);

#endif
