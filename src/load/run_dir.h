/* run_dir.h -- reading an ffn run directory (written by the trainer:
 * config.json with ffn's keys, model.safetensors, tokenizer.txt,
 * train_state.safetensors) for inference or to resume.  Not installed.
 * The trainer (src/train) writes run directories; this floor reads them,
 * beside the loaders of foreign model files. */
#ifndef FFN_LOAD_RUN_DIR_H
#define FFN_LOAD_RUN_DIR_H

#include "base/common.h"
#include "ffn/checkpoint.h"
#include "ffn/model.h"
#include "ffn/data.h"

/* Read every tensor of the model's table from model.safetensors at `path`
 * (names and shapes checked), then ffn_model_params_changed. */
ffn_status run_dir_load_weights(ffn_model *model, const char *path);

#endif /* FFN_LOAD_RUN_DIR_H */
