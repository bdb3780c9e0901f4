/* tc_report.h -- the report's feature section (tools/tc_report.c): what
 * the features of transcoder / SAE files (ffn transcoder train) do on the
 * report's prompt, beside the neurons of section 3. */
#ifndef FFN_TOOLS_TC_REPORT_H
#define FFN_TOOLS_TC_REPORT_H

#include "cli.h"

/* The report's "features" member (with its trailing comma): for each file
 * (a transcoder or SAE of a layer of the model in model_dir) its config,
 * and for every token of prompt its `top` most
 * active features, each with the n_promoted tokens its decoder row
 * promotes most (U (g * d_j), ffn_tc_feature_logits).  Returns 0, or an
 * exit code after printing "ffn <cmd>: ..." naming the file on stderr. */
int tc_report_json(FILE *f, const char *cmd, ffn_ctx *ctx, const char *model_dir,
                   const char *const *files, int n_files, const char *prompt, int64_t top,
                   int64_t n_promoted);

#endif
