/* train_internal.h -- pieces of the trainer shared by src/train/train.c and
 * src/train/checkpoint.c: the seeded RNG whose state goes into checkpoints, the
 * learning-rate schedule, the AdamW update and gradient norm over flat
 * blocks, and the crash-safe checkpoint directory swap.  Not installed.
 *
 * Letters: P parameters (the model's flat block), C chunks of the norm. */
#ifndef FFN_TRAIN_INTERNAL_H
#define FFN_TRAIN_INTERNAL_H

#include "ffn/data.h"
#include "ffn/model.h"
#include "base/common.h"
#include "base/rng.h"

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

/* ---- checkpoint directory swap ---------------------------------------------
 * A checkpoint is a directory DIR written whole to DIR.tmp (every file and
 * the directory fsynced), then exchanged with DIR in one atomic
 * renameat2(RENAME_EXCHANGE); the old contents, now at DIR.tmp, are then
 * removed.  Where the file system has no exchange, DIR is renamed to
 * DIR.old, DIR.tmp to DIR, then DIR.old is removed; a crash between the two
 * renames leaves DIR.old whole, and ckpt_resolve() finds it.  At no moment
 * is there no whole checkpoint on disk. */

/* Make sure `dir` can be used as an output: it is absent, empty, or an ffn
 * checkpoint (never overwrite a user's unrelated directory); its parent is
 * writable.  Also finishes an interrupted swap (DIR absent, DIR.old whole). */
ffn_status ckpt_prepare_out(const char *dir);

/* Create a fresh DIR.tmp (removing a stale one) and return its path
 * (malloc'd). */
ffn_status ckpt_begin(const char *dir, char **tmp_path);

/* fsync one file by path (after writing it with stdio). */
ffn_status ckpt_fsync_path(const char *path, int is_dir);

/* fsync every file in tmp and tmp itself, then swap it into place as
 * described above.  On failure DIR is untouched (and tmp is removed). */
ffn_status ckpt_commit(const char *dir, const char *tmp);

/* The directory to load for a checkpoint named `dir`: dir itself when it
 * holds config.json, else DIR.old (an interrupted swap).  malloc'd. */
ffn_status ckpt_resolve(const char *dir, char **out);

/* Remove the files in a directory we created, then the directory.  Only
 * regular files at the top level are removed: we never recurse. */
ffn_status ckpt_remove_dir(const char *path);

/* config.json: add "ffn_tokenizer" and "ffn_tokenizer_file" to the file
 * ffn_model_config_save wrote. */
ffn_status ckpt_config_add_tokenizer(const char *path, ffn_tokenizer_mode mode);
/* model.safetensors: every tensor of the model's table, fp32, HF names. */
ffn_status ckpt_save_weights(ffn_model *model, const char *path);
/* Read them back (names and shapes checked), then ffn_model_params_changed. */
ffn_status ckpt_load_weights(ffn_model *model, const char *path);

/* "DIR" + suffix, malloc'd (NULL when out of memory). */
char *ckpt_path_join(const char *a, const char *sep, const char *b);

#endif /* FFN_TRAIN_INTERNAL_H */
