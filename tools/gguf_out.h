/* gguf_out.h -- writing a loaded model as a GGUF file, shared by `ffn
 * quantize` and `ffn export --format gguf` (tools/cmd_quantize.c). */
#ifndef FFN_TOOLS_GGUF_OUT_H
#define FFN_TOOLS_GGUF_OUT_H

#include "ffn/checkpoint.h"

/* Refuse an --out that is MODEL itself, or that exists without --force
 * (printed; returns 1). */
int gguf_out_refuse(const char *cmd, const char *model, const char *out, int force);

/* Write m (loaded from model_path, described by info) to out as a GGUF of
 * weight type `type`, with the vocabulary found beside the model (if any),
 * a progress line on a terminal and a summary on stderr.  Returns 0 or
 * prints the error and returns CLI_EXIT_FAIL. */
int gguf_out_write(const char *cmd, ffn_model *m, const char *model_path,
                   const ffn_checkpoint_info *info, const char *out, int type);

#endif
