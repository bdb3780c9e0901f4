/* train_internal.h -- pieces of the trainer shared by src/train/train.c and
 * src/train/run_dir.c: the seeded RNG whose state goes into run directories,
 * the learning-rate schedule, the AdamW update and gradient norm over flat
 * blocks, and the writers of a run directory's files.  Not installed.
 *
 * Letters: P parameters (the model's flat block), C chunks of the norm. */
#ifndef FFN_TRAIN_INTERNAL_H
#define FFN_TRAIN_INTERNAL_H

#include "ffn/data.h"
#include "ffn/model.h"
#include "base/common.h"
#include "base/dirswap.h"
#include "base/rng.h"
#include "load/run_dir.h"

#include <stdint.h>

/* ---- RNG: xoshiro256** (src/base/rng.h) --------------------------------------
 * The whole state is four words; it is saved in train_state.safetensors so
 * a resumed run draws the same batches as an uninterrupted one. */

/* ---- schedule --------------------------------------------------------------
 * Linear warmup from lr/warmup to lr over `warmup` steps, then cosine decay
 * to min_lr at step `total`; `step` counts from 1 (the step being taken).
 * After `total` the rate stays at min_lr. */
double train_lr_at(int64_t step, int64_t warmup, int64_t total, double lr, double min_lr);

/* ---- AdamW over a flat block ---------------------------------------------
 * One update of n elements (decoupled weight decay, as torch.optim.AdamW):
 *   g  = grad_scale · grad                        (1/accum and the clip factor)
 *   p -= lr · weight_decay · p                    (only where decay applies)
 *   m  = β1·m + (1-β1)·g
 *   v  = β2·v + (1-β2)·g²
 *   p -= (lr / (1-β1^t)) · m / (√v / √(1-β2^t) + ε)
 * Elementwise, so the result is the same at every thread count. */
typedef struct adamw_step {
    float lr;           /* this step's learning rate */
    float decay;        /* lr · weight_decay, or 0 for tensors without decay */
    float beta1, beta2, eps;
    float step_size;    /* lr / (1 - β1^t) */
    float bc2_sqrt;     /* √(1 - β2^t) */
    float grad_scale;
} adamw_step;

void adamw_update(float *param, float *m, float *v, const float *grad, int64_t n,
                  const adamw_step *s);

/* Sum of squares of n floats (times scale²), accumulated in double over
 * fixed chunks of TRAIN_NORM_CHUNK elements whose partials are added in
 * order: bitwise the same at every thread count.  `partials` holds
 * train_norm_chunks(n) doubles. */
#define TRAIN_NORM_CHUNK 8192
int64_t train_norm_chunks(int64_t n);
double train_sum_squares(const float *x, int64_t n, double *partials);

/* ---- the run directory ----------------------------------------------------
 * Written whole beside DIR and swapped in by the directory swap
 * (base/dirswap.h); read back by the loaders' run-directory reader
 * (load/run_dir.h). */

/* config.json: add "ffn_tokenizer": kind (ffn_vocab_kind_name: byte, char,
 * word, llama2c) and "ffn_tokenizer_file": file to the file
 * ffn_model_config_save wrote. */
ffn_status run_dir_config_add_tokenizer(const char *path, const char *kind, const char *file);
/* model.safetensors: every tensor of the model's table, fp32, HF names. */
ffn_status run_dir_save_weights(ffn_model *model, const char *path);

#endif /* FFN_TRAIN_INTERNAL_H */
