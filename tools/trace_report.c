/* trace_report.c -- the facts-corpus average of causal tracing as JSON, for
 * `ffn trace --facts --json` and for the trace section of the HTML report
 * (drawn by tools/report/trace.js). */
#include "trace_report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void num(FILE *f, double x) { cli_json_number(f, x, "%.6g"); }

void trace_summary_json(FILE *f, const ffn_trace_summary *s, int64_t n_facts, int64_t n_recalled,
                        const ffn_trace_options *o) {
    const int64_t L = s->n_layers, C = FFN_TRACE_N_CLASSES;
    fprintf(f, "\"facts\": %lld, \"recalled\": %lld, \"averaged\": %lld, \"samples\": %lld, \"noise\": ",
            (long long)n_facts, (long long)n_recalled, (long long)s->n_results, (long long)o->samples);
    num(f, o->noise);
    fputs(", \"p_clean\": ", f);
    num(f, s->p_clean);
    fputs(", \"p_corrupt\": ", f);
    num(f, s->p_corrupt);
    fputs(", \"classes\": [", f);
    for (int c = 0; c < C; c++) fprintf(f, "%s\"%s\"", c ? ", " : "", ffn_trace_class_name(c));
    fputs("], \"n_class\": [", f);
    for (int c = 0; c < C; c++) fprintf(f, "%s%lld", c ? ", " : "", (long long)s->n_class[c]);
    fputc(']', f);
    for (int k = 0; k < FFN_TRACE_N_KINDS; k++) {
        fprintf(f, ", \"%s\": [", ffn_trace_kind_name((ffn_trace_kind)k));
        for (int64_t l = 0; l < L; l++) {
            fprintf(f, "%s[", l ? ", " : "");
            for (int64_t c = 0; c < C; c++) {
                if (c) fputs(", ", f);
                num(f, s->effect[k][l * C + c]);
            }
            fputc(']', f);
        }
        fputc(']', f);
    }
    fprintf(f, ", \"mlp_peak\": {\"layer\": %lld, \"class\": \"%s\", \"effect\": ",
            (long long)s->mlp_peak_layer, ffn_trace_class_name(s->mlp_peak_class));
    num(f, s->mlp_peak);
    fprintf(f, "}, \"mlp_peak_last_subject\": {\"layer\": %lld, \"effect\": ", (long long)s->mlp_peak_layer_subject);
    num(f, s->mlp_peak_subject);
    fprintf(f, "}, \"mlp_peak_last\": {\"layer\": %lld, \"effect\": ", (long long)s->mlp_peak_layer_last);
    num(f, s->mlp_peak_last);
    fputs("}, \"mlp_layer_share\": ", f);
    num(f, s->mlp_layer_share);
}

int trace_report_json(FILE *f, const char *cmd, ffn_ctx *ctx, const char *model_dir, int64_t n) {
    ffn_model *model = NULL;
    ffn_vocab *vocab = NULL;
    ffn_facts *facts = NULL;
    ffn_trace_summary *s = calloc(1, sizeof *s);
    if (!s) {
        cli_error(cmd, "out of memory");
        return CLI_EXIT_FAIL;
    }
    ffn_status st = ffn_run_dir_load_vocab(ctx, model_dir, &model, &vocab);
    if (!st) st = ffn_facts_generate(FFN_FACTS_DEFAULT, 1, &facts);
    ffn_trace_options o;
    ffn_trace_options_default(&o);
    int64_t recalled = 0;
    if (n > FFN_FACTS_DEFAULT) n = FFN_FACTS_DEFAULT;
    if (!st) st = ffn_trace_facts(ctx, model, vocab, facts, n, &o, s, &recalled);
    int rc = 0;
    if (st) {
        cli_error(cmd, "trace of %s: %s", model_dir, ffn_last_error());
        rc = CLI_EXIT_FAIL;
    } else {
        fputs("\"trace\":{\"model\":", f);
        cli_json_string(f, model_dir);
        fputs(", ", f);
        trace_summary_json(f, s, n, recalled, &o);
        fputs("},\n", f);
    }
    free(s);
    ffn_facts_free(facts);
    ffn_vocab_free(vocab);
    ffn_model_free(model);
    return rc;
}
