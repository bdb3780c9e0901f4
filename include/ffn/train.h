/* ffn/train.h -- training a model on text, run directories (the
 * checkpoints a run writes), resuming, and generating text.
 *
 * Part of the public API; include <ffn.h>, not this file.
 *
 * Letters: B batch, T sequence (context), A micro-batches per step,
 *          P parameters, V vocabulary.
 *
 * Optimizer.  AdamW with decoupled weight decay (torch.optim.AdamW):
 * weight decay applies to matrices only -- embeddings, attention and MLP
 * projections, the router, the LM head; never to RMSNorm weights nor to
 * biases.  The learning rate rises linearly over `warmup` steps from lr/warmup
 * to lr, then follows a cosine down to min_lr at step `steps`.  Before each
 * update the gradient (averaged over A micro-batches of B sequences) is
 * clipped to global L2 norm `clip` (clip_grad_norm_, 0 = no clipping).  The
 * update is one flat loop over the model's parameter block; the moments m
 * and v live in one contiguous block of 2·P floats.
 *
 * Data.  Text (a file, a buffer, or the built-in corpus) is tokenized with a
 * vocabulary built from the whole text, then split: the first
 * (1 - val_fraction) of the tokens train, the rest are held out.  A
 * training batch is B windows of T+1 tokens at offsets drawn uniformly from
 * the training part by a seeded RNG (xoshiro256**).  Evaluation uses
 * eval_batches fixed batches of windows evenly spaced over the held-out
 * part: the same windows at every evaluation and in every run.
 *
 * Fine-tuning (init_path).  The model -- config, weights, vocabulary -- is
 * the pretrained one's and the data is encoded with its vocabulary (a
 * llama2.c tokenizer.bin line by line); train_only freezes everything but
 * the FFN or the attention sublayers.  A resume reads all of it back from
 * the run directory.
 *
 * Reproducibility.  A fixed seed gives the same losses and weights bit for
 * bit at a given thread count.  A checkpoint holds everything the loop
 * depends on (weights, moments, step, RNG state, loss history), so training
 * S steps, then resuming to 2·S, gives byte-identical weights and the same
 * losses as training 2·S steps at once.  The schedule spans `steps`: to
 * stop early and resume later with the same schedule, use `stop_at`.
 *
 * Run directory (--out DIR; "checkpoint" in option and callback names):
 *   config.json              Hugging Face Llama names, plus ffn's fields
 *                            (mlp_type, hidden_act, MoE settings) and
 *                            "ffn_tokenizer": "byte"|"char"|"word"
 *   model.safetensors        fp32 weights under their HF names
 *   tokenizer.txt            the vocabulary (see data.h), or tokenizer.bin: the
 *                            llama2.c vocabulary of a model fine-tuned from one,
 *                            copied byte for byte ("ffn_tokenizer": "llama2c";
 *                            read back by ffn_run_dir_load_vocab, checkpoint.h)
 *   train_state.safetensors  AdamW moments "adamw.m"/"adamw.v" (P), the loss
 *                            history, and in its metadata the step, the RNG
 *                            state, the data fingerprint and every training
 *                            option (train_only among them), and for a
 *                            fine-tuned run "init" (the model it started from)
 *   metrics.jsonl            the log up to the saved step (see metrics_path)
 * The directory swap: written to a new DIR.tmp-XXXXXX beside DIR (mkdtemp),
 * every file and the directory fsynced, then swapped with DIR atomically
 * (renameat2 RENAME_EXCHANGE; elsewhere through DIR.old), so a crash at any
 * moment leaves a whole, loadable run directory.  The previous contents
 * are retired: the files listed above are deleted, any other file in DIR
 * is moved into the new one, and no symbolic link is ever followed.  DIR
 * may be a symbolic link to a run directory (the real one is replaced, the
 * link kept).  DIR must be absent, empty or an earlier ffn run directory:
 * an unrelated directory is never replaced.  One writer at a time: the run
 * holds a lock (".DIR.lock" beside DIR) and a second run on DIR fails at
 * once naming the first one's pid.  (The environment variable
 * FFN_CHECKPOINT_NO_EXCHANGE=1 forces the DIR.old path, for its test.)
 *
 * Example (train two variants in one process):
 *     ffn_train_options o;  ffn_train_options_default(&o);
 *     o.text = corpus->text;  o.text_len = corpus->n_bytes;
 *     o.model.mlp_type = FFN_MODEL_MLP_DENSE;  o.model.hidden_act = FFN_ACT_GELU;
 *     o.steps = 300;
 *     ffn_train_result r;
 *     if (ffn_train_run(ctx, &o, NULL, &r) == FFN_OK)
 *         printf("val %.3f at %.0f tok/s\n", r.final_val_loss, r.tokens_per_s);
 *     ffn_train_result_free(&r);
 */
#ifndef FFN_TRAIN_H
#define FFN_TRAIN_H
#pragma GCC visibility push(default) /* what this header declares is the exported API */

#include "core.h"
#include "data.h"
#include "vocab.h"
#include "model.h"
#include "checkpoint.h" /* the run directory's file names */

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The names of a run directory's files (FFN_MODEL_FILENAME, FFN_CONFIG_FILENAME,
 * FFN_TRAIN_STATE_FILENAME, FFN_METRICS_FILENAME, ...) are in checkpoint.h:
 * the loaders read them as well as the trainer writes them. */

/* Which tensors training updates.  The others are frozen: no update, no
 * weight decay, their gradients are zeroed before the norm is taken (so
 * clipping sees the trained tensors only) and their AdamW moments stay 0.
 *   FFN_TRAIN_FFN        the FFN sublayer of every block: its RMSNorm
 *                        (post_attention_layernorm) and every mlp.* tensor
 *                        (projections and biases, the router, the experts,
 *                        the shared expert and its gate);
 *   FFN_TRAIN_ATTENTION  the attention sublayer: its RMSNorm
 *                        (input_layernorm) and q/k/v/o_proj (and biases).
 * The embedding, the final norm and the LM head are trained by
 * FFN_TRAIN_ALL only. */
typedef enum ffn_train_only {
    FFN_TRAIN_ALL = 0,
    FFN_TRAIN_FFN,
    FFN_TRAIN_ATTENTION
} ffn_train_only;

/* "all", "ffn", "attention". */
const char *ffn_train_only_name(ffn_train_only which);
/* 1 when `which` trains the tensor named `name` (a tensor table name). */
int ffn_train_only_trains(ffn_train_only which, const char *name);

typedef struct ffn_train_options {
    /* ---- data: the first of text, data_path, built-in corpus ---- */
    const char *text;          /* borrowed UTF-8 text (text_len bytes), or NULL */
    size_t text_len;
    const char *data_path;     /* a text file, or NULL */
    ffn_lang corpus_lang;      /* built-in corpus when text and data_path are NULL */
    int64_t corpus_sentences;  /* 20000 */
    uint64_t corpus_seed;      /* 1 */
    ffn_tokenizer_mode tokenizer; /* FFN_TOK_CHAR */
    int64_t max_vocab;         /* 0: no cap (char, word) */
    double val_fraction;       /* 0.1 */

    /* ---- the model (vocab_size comes from the tokenizer and
     *      max_position_embeddings from seq_len; both are overwritten) ---- */
    ffn_model_config model;

    /* ---- fine-tuning: start from a pretrained model ---- */
    const char *init_path;     /* NULL, or any model ffn_checkpoint_load_model reads (a
                                  llama2.c .bin, a Hugging Face directory, an ffn run
                                  directory): its config and weights replace `model`
                                  (sizes from the file; max_position_embeddings kept, seq_len
                                  must fit in it) and its vocabulary encodes the data
                                  (tokenizer and max_vocab are ignored).  Not with resume_dir:
                                  a run directory remembers it. */
    const char *init_tokenizer;/* its vocabulary file when none is beside it (a llama2.c
                                  tokenizer.bin or ffn's tokenizer.txt), or NULL */
    ffn_train_only train_only; /* which tensors the optimizer updates (FFN_TRAIN_ALL) */

    /* ---- the loop ---- */
    int64_t steps;             /* optimizer steps of the schedule (600) */
    int64_t stop_at;           /* 0, or stop (and checkpoint) after this step */
    uint64_t seed;             /* weights and batches (1234) */
    int64_t batch_size;        /* B (8) */
    int64_t seq_len;           /* T (128) */
    int64_t grad_accum;        /* A (1) */
    double lr, min_lr;         /* 1e-3, 1e-4 */
    int64_t warmup;            /* -1: min(100, steps / 10) */
    double weight_decay;       /* 0.1 */
    double beta1, beta2, eps;  /* 0.9, 0.95, 1e-8 */
    double clip;               /* 1.0 (0: no clipping) */
    int64_t eval_every;        /* 100 (0: only at the end) */
    int64_t eval_batches;      /* 8 */
    int64_t save_every;        /* 0: only at the end and on a stop request */

    /* ---- files ---- */
    const char *out_dir;       /* checkpoint directory, or NULL for none */
    const char *resume_dir;    /* continue from this checkpoint, or NULL */
    const char *metrics_path;  /* JSON lines, one per step.  NULL (or out_dir's own
                                  FFN_METRICS_FILENAME): the log is out_dir/metrics.jsonl,
                                  written whole with each save, so it always matches the
                                  saved step and a resume (also into another out_dir)
                                  carries it on.  Elsewhere: written live; when resuming,
                                  lines after the checkpoint's step are dropped, then
                                  appended to.  NULL without out_dir: no log. */

    /* Set to non-zero (from a signal handler) to stop: the loop finishes the
     * current step, saves a checkpoint and returns FFN_ERR_INTERRUPTED. */
    volatile sig_atomic_t *stop_flag;

    /* Where each step's time goes (include/ffn/profile.h), or NULL (off).
     * The caller's: reset it first; the loop adds every step of this run
     * (evaluation and checkpointing excluded). */
    ffn_profile *profile;

    /* Data parallelism across processes, or NULL for one process (see
     * ffn_train_dist below; include/ffn/dist.h fills one from MPI). */
    const struct ffn_train_dist *dist;

    /* Precision of the model's matrix products (FFN_PRECISION_FP32; bf16:
     * include/ffn/layer.h).  Master weights, gradients and AdamW moments
     * stay fp32; recorded in train_state, so --resume keeps it. */
    ffn_precision precision;
} ffn_train_options;

/* Data-parallel training: every rank runs ffn_train_run with the same
 * options; batch_size is per rank, so a step trains on size · batch_size
 * sequences.  Every rank draws the same size · batch_size windows (the
 * ones a single process with that batch draws) and takes rows
 * [rank · B, (rank + 1) · B); the gradients and the losses are summed by
 * `allreduce` and divided by size, so the step equals one process's with
 * batch size · B up to the order of the float sums.  The held-out batches
 * are shared out the same way.  Only the writer touches the run directory
 * and the log (it takes the lock); `agree` (collective) is called after
 * the set-up and after every step (with the writer's save), so a failure on
 * one rank stops every rank with that rank's message; then `check_same`
 * compares the data and the starting weights of all ranks (a mismatched
 * checkpoint or data file on one host is an error, not a silent fork). */
typedef struct ffn_train_dist {
    int64_t rank, size;
    int writer;
    /* sum n values over the ranks in place; every rank gets the same bits */
    ffn_status (*allreduce_f32)(void *user, float *buf, int64_t n);
    ffn_status (*allreduce_f64)(void *user, double *buf, int64_t n);
    ffn_status (*agree)(void *user, ffn_status st);
    /* collective: fail on every rank unless all passed the same bytes (the
     * starting weights and the data's fingerprint are checked; may be NULL) */
    ffn_status (*check_same)(void *user, const char *what, const void *bytes, size_t n);
    /* Tensor parallelism (all NULL: none).  The trainer builds the whole
     * model as one process would (the seed, --init or the checkpoint), then
     * trains the rank's share `shard` makes of it with Adam's moments sliced
     * alike; `sync_grads` runs after every backward, `grad_sq` gives the
     * whole model's squared gradient norm for clipping; a checkpoint is
     * written whole: parameters and moments put back together by
     * `gather_flat` (collective) before the writer saves, so a run resumes
     * under any layout. */
    ffn_status (*shard)(void *user, ffn_model *full, const ffn_model_options *opt,
                        ffn_model **rank_model);
    ffn_status (*slice_flat)(void *user, const ffn_model *full, const float *src,
                             const ffn_model *rank_model, float *dst);
    ffn_status (*gather_flat)(void *user, const ffn_model *rank_model, const float *src,
                              const ffn_model *full, float *dst);
    ffn_status (*sync_grads)(void *user, ffn_model *rank_model);
    ffn_status (*grad_sq)(void *user, const ffn_model *rank_model, const ffn_model *full,
                          const float *grads, double *sq);
    void *user;
    /* Sum the (rank) model's gradient block over the ranks that share each
     * tensor, in a fixed order (may be NULL: allreduce_f32 of the whole
     * block).  Expert parallelism: an expert's gradient is summed over the
     * ranks holding that expert only. */
    ffn_status (*reduce_grads)(void *user, ffn_model *model, float *grads, int64_t n);
    /* ZeRO-1 (all NULL: none): the optimizer's moments are kept for the
     * range [*lo, *hi) of the n parameters only (`zero_range`);
     * `reduce_scatter` sums the gradient block so that at least that range
     * is complete on this rank (the rest is left undefined), the optimizer
     * updates the range, and `all_gather` gives every rank every range of
     * the parameters.  The clipping norm sums the ranges' squares with
     * allreduce_f64; a checkpoint's moments are all-gathered whole (every
     * rank, before the writer saves), so it resumes under any layout. */
    void (*zero_range)(void *user, int64_t n, int64_t *lo, int64_t *hi);
    ffn_status (*reduce_scatter)(void *user, float *buf, int64_t n);
    ffn_status (*all_gather)(void *user, float *buf, int64_t n);
    /* ZeRO-1 with tensor parallelism: the whole model's squared gradient
     * norm from every rank's range [lo, hi) of its share (collective over
     * all ranks; the weights of grad_sq). */
    ffn_status (*grad_sq_range)(void *user, const ffn_model *rank_model, const ffn_model *full,
                                const float *grads, int64_t lo, int64_t hi, double *sq);
    /* Sharded state (both NULL: none; expert parallelism).  `shard` may
     * give back the whole model itself (in place): the rank then keeps
     * parameters, gradients and moments only of the tensors `holds` names
     * (the others' pages are given back after the start and never written;
     * their gradients are zero here, their moments not allocated); a run
     * from the seed initialises those alone, after `shard`
     * (ffn_model_init_tensors: the bits one process gives them), and the
     * starting weights are not compared (the seed is in the options text).  Before
     * a save, `gather_tensors` (collective) hands every tensor to the
     * writer from the rank holding it: where[i] points at tensor i's floats
     * (NULL where this rank has nothing to send or receive). */
    int (*holds)(void *user, const ffn_model *model, int64_t tensor);
    ffn_status (*gather_tensors)(void *user, const ffn_model *model, float *const *where);
    /* The same for one tensor (may be NULL: gather_tensors): the writer
     * receives tensor i into buf, the rank holding it sends buf, the others
     * do nothing.  With it a save streams: every rank calls it for each
     * tensor's m, then v, then parameters, in the table's order, and the
     * writer writes each as it arrives (one tensor's buffer, never the
     * whole model's). */
    ffn_status (*gather_tensor)(void *user, const ffn_model *model, int64_t tensor, float *buf);
    /* ZeRO-2 (with zero_range): reduce_scatter completes [lo, hi) only and
     * the trainer keeps only that range of the gradients: the floats
     * outside it are given back (zero, their pages returned to the system)
     * after every reduce-scatter, and only the range is zeroed before the
     * next backward, which writes the whole block again. */
    int zero_grads;
    /* ZeRO without tensor parallelism, before a save (collective; may be
     * NULL: all_gather on every rank): the writer receives every rank's
     * range [lo, lo + count) of an n-float block into `all` (its own
     * included); the other ranks send `range` only (their `all` is NULL),
     * so no rank but the writer holds the whole moments. */
    ffn_status (*gather_range)(void *user, const float *range, int64_t lo, int64_t count,
                               float *all, int64_t n);
    /* ZeRO-1 over sharded state (expert parallelism; both NULL: none).
     * `held_group` names the group (0 or 1) tensor i is replicated over,
     * this rank's index and the group's size; the held tensors of a group,
     * in the table's order, make one block split over the group as
     * dist_split does (rank r: n / P, the first n % P one more), and the
     * rank keeps m and v for its part only.  The gradients are summed
     * whole (reduce_grads), the norm is grad_sq's, each rank updates its
     * part, and `held_allgatherv` (collective over the group) gives every
     * rank every part of one tensor's floats in place: counts and displs
     * (the group's size of each) in floats from buf. */
    int (*held_group)(void *user, const ffn_model *model, int64_t tensor, int64_t *rank,
                      int64_t *size);
    ffn_status (*held_allgatherv)(void *user, int group, float *buf, const int *counts,
                                  const int *displs);
    /* ZeRO-2 over sharded state (with zero_grads; NULL: ZeRO-1): instead of
     * reduce_grads, each held tensor's gradient reduce-scattered over its
     * group (collective): rank r of the group gets the sum of its counts[r]
     * floats, in rank order from buf, in place; the rest is left partial. */
    ffn_status (*held_reduce_scatter)(void *user, int group, float *buf, const int *counts);
    /* ZeRO over sharded state, before a save (collective over group 0, the
     * replicated tensors' group, whose rank 0 is the writer; may be NULL:
     * held_allgatherv): the writer receives every rank's part of one
     * tensor into buf (its own already there); the others send `part`. */
    ffn_status (*held_gatherv)(void *user, float *buf, const float *part, const int *counts,
                               const int *displs);
    /* Pipeline stages (both NULL: none; with the sharded state above: a
     * stage holds its layers' tensors).  `pipeline` runs one step's A
     * micro-batches (tokens and targets: A · B · T, micro-batch a at
     * a · B · T; drawn as one process draws them) forward and backward
     * over the stages, the gradients scaled by grad_scale and accumulated
     * in the model's block, and returns the sums over the micro-batches
     * of the cross-entropy and of the objective (collective over the
     * stages: every stage gets them); `pipeline_eval` one held-out batch's
     * cross-entropy. */
    ffn_status (*pipeline)(void *user, ffn_model *model, const int32_t *tokens,
                           const int32_t *targets, int64_t A, int64_t B, int64_t T,
                           float grad_scale, double *ce, double *total);
    ffn_status (*pipeline_eval)(void *user, ffn_model *model, const int32_t *tokens,
                                const int32_t *targets, int64_t B, int64_t T, double *ce);
    /* The layers [*l0, *l1) this rank's stage runs (may be NULL: all),
     * asked before the model is created (ffn_model_options.layer_begin,
     * layer_end: activations and packed weights for those only); with it
     * and `holds`, a run from the seed initialises the held tensors only
     * (as for any `holds`, above). */
    ffn_status (*stage_layers)(void *user, const ffn_model_config *cfg, int64_t *l0, int64_t *l1);
    /* Overlap (all NULL: none): the last micro-batch's backward starts the
     * gradient sums itself, in place of reduce_grads (or of reduce_scatter
     * under zero_grads): grads_begin (n floats of `grads`) before it,
     * grads_ready at each of the model's ready points
     * (ffn_model_set_grad_ready), grads_finish (collective) after it, which
     * returns once every sum is complete -- the bits of the call replaced. */
    ffn_status (*grads_begin)(void *user, ffn_model *model, float *grads, int64_t n);
    ffn_status (*grads_ready)(void *user, int64_t level);
    ffn_status (*grads_finish)(void *user);
} ffn_train_dist;

/* The defaults above (model: ffn_model_config_default). */
void ffn_train_options_default(ffn_train_options *opts);

/* Every field of the options that a resume records (the set it compares,
 * and steps, eval_every, save_every, the corpus), as lines "key=value\n"
 * with exact values (the keys of train_state's metadata: "lr=0.001",
 * "rms_norm_eps=1.0000000000000001e-05"), for ranks that must agree on
 * them (ffn_dist_layout.options).  Returns the length it needs, as
 * snprintf (buf may be NULL when n is 0). */
size_t ffn_train_options_text(const ffn_train_options *opts, char *buf, size_t n);


/* Fill opts with what the checkpoint in `dir` was trained with (the model
 * config, every training option, the data source), leaving out_dir,
 * resume_dir, metrics_path and stop_flag alone.  A command line applies
 * this, then the user's flags, so that ffn_train_run can tell a flag that
 * disagrees with the checkpoint. */
ffn_status ffn_train_options_from_checkpoint(const char *dir, ffn_train_options *opts);

/* One step's report, passed to the callback. */
typedef struct ffn_train_point {
    int64_t step;          /* 1-based, the step just taken */
    int64_t steps;         /* the schedule's length */
    double loss;           /* training cross-entropy of this step (mean of its micro-batches) */
    double loss_total;     /* the differentiated objective (ce + MoE aux terms) */
    double lr;             /* learning rate used by this step */
    double grad_norm;      /* global gradient norm before clipping */
    double val_loss;       /* held-out cross-entropy if evaluated at this step, else NaN */
    double tokens_per_s;   /* training tokens per second in this run so far (eval excluded) */
    double elapsed_s;      /* wall time of this run so far */
    double eta_s;          /* estimated seconds to the last step */
    int64_t tokens;        /* training tokens seen since step 0 (across resumes) */
} ffn_train_point;

typedef struct ffn_train_callbacks {
    void (*on_start)(const ffn_train_options *opts, int64_t start_step, int64_t n_params,
                     int64_t n_train_tokens, int64_t n_val_tokens, void *user);
    void (*on_step)(const ffn_train_point *point, void *user);
    void (*on_checkpoint)(const char *dir, int64_t step, void *user);
    void *user;
    /* Something done to the output's surroundings that the user should
     * hear of (one line, no newline): a DIR.tmp-XXXXXX left by a killed
     * save removed, or one of that name left alone and why.  May be NULL. */
    void (*on_note)(const char *message, void *user);
} ffn_train_callbacks;

typedef struct ffn_train_result {
    int64_t steps_done;       /* the step reached (across resumes) */
    double final_loss;        /* last step's training loss */
    double final_val_loss;    /* last evaluation's held-out loss (NaN if none) */
    double tokens_per_s;      /* training throughput of this run */
    double seconds;           /* wall time of this run */
    int64_t n_params, active_params;
    /* History from step 1 (across resumes): loss[i] is step i+1's loss. */
    double *loss;             /* (steps_done) */
    int64_t n_evals;
    int64_t *eval_step;       /* (n_evals) */
    double *eval_loss;        /* (n_evals) */
    char *checkpoint_dir;     /* the last checkpoint written, or NULL */
    /* This rank's training state as allocated and kept (bytes, fp32):
     * parameters and gradients of the tensors it holds, AdamW's m and v
     * (its share under ZeRO-1/2 or sharded experts; ZeRO-2 keeps only that
     * share of the gradients between steps), and under tensor
     * parallelism also the whole model's copy kept for the checkpoints. */
    int64_t state_bytes, optimizer_bytes;
    int64_t grad_bytes; /* of state_bytes: the gradients kept (ZeRO-2: the rank's range) */
    int64_t activation_bytes; /* the model's activation block (a pipeline stage: its layers') */
} ffn_train_result;

/* Train.  result may be NULL; callbacks may be NULL.  Errors: bad options
 * (the field named), data too short for one context of T+1 tokens in either
 * split, invalid UTF-8 (the byte offset), a resume whose options differ
 * from the checkpoint's (the field named), an unwritable out_dir (found
 * before training starts; a failing save leaves the previous checkpoint
 * whole).  FFN_ERR_INTERRUPTED when stop_flag was raised (after saving). */
ffn_status ffn_train_run(ffn_ctx *ctx, const ffn_train_options *opts,
                         const ffn_train_callbacks *callbacks, ffn_train_result *result);
void ffn_train_result_free(ffn_train_result *result); /* zeroes it; NULL is a no-op */

/* ---- the optimizer alone (for a loop of your own) --------------------------
 * AdamW over a model's flat blocks, with the schedule and clipping of the
 * options above (lr, min_lr, warmup (-1 resolved with steps), steps,
 * weight_decay, beta1, beta2, eps, clip; other fields ignored).  The moments
 * are one block of 2·P floats, zero at create.  ffn_adamw_step takes step
 * `step` (1-based: the bias correction and the schedule use it) from the
 * gradients in ffn_model_grads() -- already averaged over micro-batches
 * (grad_scale = 1/A in ffn_model_forward_backward) -- then calls
 * ffn_model_params_changed.  lr and grad_norm (before clipping) may be NULL. */
typedef struct ffn_adamw ffn_adamw;
ffn_status ffn_adamw_create(ffn_model *model, const ffn_train_options *opts, ffn_adamw **out);
void ffn_adamw_free(ffn_adamw *opt); /* NULL is a no-op */
ffn_status ffn_adamw_step(ffn_adamw *opt, int64_t step, double *lr, double *grad_norm);
/* The moments block (2, P): m then v. */
float *ffn_adamw_moments(ffn_adamw *opt, int64_t *n_params);

/* ---- generating ------------------------------------------------------------
 * (A run directory is loaded for inference by ffn_run_dir_load or
 * ffn_run_dir_load_vocab, in checkpoint.h.) */

typedef struct ffn_generate_options {
    int64_t steps;       /* tokens to generate (100) */
    double temperature;  /* 0: greedy (argmax); else softmax(logits / temperature) (0.8) */
    double top_p;        /* nucleus: sample from the smallest set of tokens whose
                            probability reaches top_p (0.95; 1 = all) */
    uint64_t seed;       /* 42 */
    int allow_unk;       /* 0: "<unk>" is never generated (default); 1: it may be */
    int add_bos;         /* ffn_generate_text: prepend the vocabulary's bos (0) */
    int whole_prompt;    /* 0: a prompt of T tokens or more is cut to its last T/2
                            (default); 1: a prompt of exactly T is fed whole */
} ffn_generate_options;

void ffn_generate_options_default(ffn_generate_options *opts);

/* The sampler ffn_generate uses, for loops of your own: greedy (argmax,
 * lowest id on ties) at temperature 0, else nucleus sampling (top_p) from
 * softmax(logits / temperature), drawing from a seeded xoshiro256** stream,
 * so the same seed gives the same tokens.  Create allocates its V-entry
 * work buffer; sampling never allocates. */
typedef struct ffn_sampler ffn_sampler;
ffn_status ffn_sampler_create(int64_t vocab_size, double temperature, double top_p,
                              uint64_t seed, ffn_sampler **out);
int32_t ffn_sampler_sample(ffn_sampler *sampler, const float *logits); /* logits (V) */
void ffn_sampler_free(ffn_sampler *sampler); /* NULL is a no-op */

/* Feed the prompt (its tokens; an empty prompt starts from a newline token
 * when the vocabulary has one, else token 0) then sample `steps` tokens with
 * the KV cache, calling on_token with each token's bytes as it comes (the
 * bytes of one token; a multi-byte character may span tokens only with the
 * byte tokenizer).  "<unk>" is never generated.  When the context fills,
 * the last half is re-fed and generation goes on.  on_token returning non-zero stops early. */
ffn_status ffn_generate(ffn_model *model, const ffn_tokenizer *tok, const char *prompt,
                        const ffn_generate_options *opts,
                        int (*on_token)(const char *bytes, size_t len, void *user), void *user);

/* Generation in one place: feed `prompt` (N >= 1 ids in [0, V)), then
 * sample opts->steps tokens with the KV cache, as above (a full cache
 * keeps its last half and goes on).  vocab may be NULL (ids only); with
 * one, "<unk>" is never generated unless opts->allow_unk, and each token's
 * text is its ffn_vocab_piece after the previous token.  Callbacks (cb
 * and each member may be NULL): on_token with each sampled id and its text
 * (NULL, 0 without a vocab), non-zero stops; on_logits with the logits (V)
 * after each sampled token is fed back (every token but the last). */
typedef struct ffn_generate_callbacks {
    int (*on_token)(int32_t id, const char *bytes, size_t len, void *user);
    void (*on_logits)(int32_t fed, const float *logits, void *user);
    void *user;
} ffn_generate_callbacks;

ffn_status ffn_generate_tokens(ffn_model *model, const ffn_vocab *vocab, const int32_t *prompt,
                               int64_t n_prompt, const ffn_generate_options *opts,
                               const ffn_generate_callbacks *cb);

/* The same from text: the prompt is encoded with `vocab` (with its bos when
 * opts->add_bos); an empty prompt starts from a newline token when the
 * vocabulary has one, else token 0.  ffn_generate is this over an
 * ffn_tokenizer. */
ffn_status ffn_generate_text(ffn_model *model, const ffn_vocab *vocab, const char *prompt,
                             const ffn_generate_options *opts, const ffn_generate_callbacks *cb);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif /* FFN_TRAIN_H */
