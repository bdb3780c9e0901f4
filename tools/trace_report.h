/* trace_report.h -- what `ffn trace --facts` and the report's trace
 * section share: the facts-corpus average as JSON, and the report's data
 * of that section (tools/trace_report.c). */
#ifndef FFN_TOOLS_TRACE_REPORT_H
#define FFN_TOOLS_TRACE_REPORT_H

#include "cli.h"

/* The members of an averaged trace (no braces): "facts", "recalled",
 * "averaged", "samples", "noise", "p_clean", "p_corrupt", "classes",
 * "n_class", the three (L, 7) tables by kind name, "mlp_peak",
 * "mlp_peak_last_subject", "mlp_peak_last", "mlp_layer_share". */
void trace_summary_json(FILE *f, const ffn_trace_summary *s, int64_t n_facts, int64_t n_recalled,
                        const ffn_trace_options *o);

/* The report's "trace" member (with its trailing comma): the first n facts
 * of the facts corpus traced on the model in model_dir.  Returns 0, or an
 * exit code after printing "ffn <cmd>: ..." on stderr. */
int trace_report_json(FILE *f, const char *cmd, ffn_ctx *ctx, const char *model_dir, int64_t n);

#endif
