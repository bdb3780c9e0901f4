/* trace_dist.h -- `ffn trace MODEL --distributed` (tools/trace_dist.c):
 * for each fact of the facts corpus the smallest set of FFN neurons (or of
 * a transcoder's features) whose ablation removes it
 * (ffn_fact_min_ablation, include/ffn/trace.h), per layer and over all
 * layers; the distribution of the set sizes and what else each ablation
 * breaks; a table or JSON, and the same JSON as a section of the report. */
#ifndef FFN_TOOLS_TRACE_DIST_H
#define FFN_TOOLS_TRACE_DIST_H

#include "ffn.h"

#include <stdio.h>

typedef struct trace_dist_args {
    const char *model_path;  /* for the held-out text it was trained on */
    const char *transcoder;  /* a transcoder / SAE file, or NULL: neurons only */
    const char *data;        /* the held-out text's file, or NULL: the model's own */
    int64_t layer;           /* -1: every layer and all layers together */
    double threshold;        /* 0: removed when the object is no longer top-1 */
    int64_t max_set;         /* 0: no cap on the greedy set */
    int64_t windows;         /* windows of held-out text for the loss */
    int side;                /* 1: measure what else each ablation breaks */
    int per_fact;            /* 1: the JSON lists every fact's set */
} trace_dist_args;

void trace_dist_args_default(trace_dist_args *a);

/* Run over facts [0, n) and print (json 0: tables; 1: one JSON object and
 * a newline).  The model must be a training model (ffn_model_options
 * .training = 1).  Returns 0 or the CLI exit status after printing the
 * error under `cmd`. */
int trace_dist_run(const char *cmd, ffn_ctx *ctx, ffn_model *model, const ffn_vocab *vocab,
                   const ffn_facts *facts, int64_t n, const trace_dist_args *a, int json);

/* The report's section: `"fact_dist": {...},` (the --json object without
 * the per-fact sets) for the first n_facts facts of the facts corpus on
 * the model in dir. */
int trace_dist_report_json(FILE *out, const char *cmd, ffn_ctx *ctx, const char *dir,
                           int64_t n_facts);

#endif
