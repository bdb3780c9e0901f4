/* ffn/dist.h -- ffn on several processes: the MPI part (libffn_dist).
 *
 * A second library beside libffn: libffn_dist.a / libffn_dist.so, built
 * from src/dist/ with Open MPI (mpicc's flags) and linked into the `ffn`
 * command.  libffn itself never needs MPI; this header does not include
 * <mpi.h> either (the handles are opaque), so a program includes it as any
 * other ffn header and links -lffn_dist -lffn plus `mpicc --showme:link`.
 * It is not included by <ffn.h>.
 *
 * ---- the layout -------------------------------------------------------------
 * world = tp · dp ranks (MPI_COMM_WORLD), times pp with pipeline stages
 * (layout.pp below: each stage's groups as these, inside the stage).  World rank r is tensor-parallel
 * rank r % tp of group r / tp (a group's ranks are consecutive, so they sit
 * on one host when mpirun fills hosts in order) and data-parallel rank
 * r / tp.  Expert parallelism lives inside the data-parallel group (ep
 * divides dp): dp rank q is expert rank q % ep of EP group q / ep; the
 * ranks holding the same experts (same ep rank, same tp rank) are the
 * expert-replica group, over which the experts' gradients are reduced.
 * With tp > 1 expert parallelism lives inside the tensor-parallel group
 * instead, and only as ep = tp: the EP group is the TP group (tp rank t is
 * ep rank t) and the expert-replica group is the DP group (the ranks of
 * tp rank t hold the same experts); any other ep with tp > 1 is refused.
 * The groups are MPI_Comm_split's of the world by colours (key = rank in
 * the group):
 *   TP: colour q, key t          DP: colour t, key q      (t = r % tp, q = r / tp)
 *   EP: colour t·65536 + q / ep, key q % ep; with tp = ep > 1: colour q, key t
 *   expert replicas: colour t·65536 + q % ep, key q / ep; with tp = ep > 1:
 *   colour t, key q.
 *
 * ---- reductions ---------------------------------------------------------------
 * ffn_dist_allreduce_* sum in a fixed order: a ring reduce-scatter and
 * all-gather written on MPI_Sendrecv, each chunk summed in ring order; the
 * result depends on the layout and the data only (never on timing), and
 * every rank of the group receives the same bits.
 *
 * ---- failures ------------------------------------------------------------------
 * The communicators return errors (MPI_ERRORS_RETURN); a failed call is
 * an ffn_status with MPI's message.  ffn_dist_agree is the collective
 * check a driver runs after anything that may fail on one rank alone (open
 * the data, read a checkpoint, write one): every rank returns the status
 * and the message of the lowest failing rank, so all stop together with
 * that message instead of waiting forever in the next collective.  A rank
 * that dies (kill -9) is mpirun's to report: it names the rank, ends the
 * others and exits non-zero. */
#ifndef FFN_DIST_H
#define FFN_DIST_H
#pragma GCC visibility push(default) /* what this header declares is the exported API */

#include "core.h"
#include "layer.h"
#include "model.h"
#include "moe.h"
#include "train.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ffn_dist ffn_dist;

typedef enum ffn_dist_group {
    FFN_DIST_WORLD = 0,
    FFN_DIST_TP,      /* the tensor-parallel group of this rank */
    FFN_DIST_DP,      /* the data-parallel group (same tp rank) */
    FFN_DIST_EP,      /* the expert-parallel group inside dp */
    FFN_DIST_EXPERT_REPLICAS, /* ranks holding the same experts */
    FFN_DIST_PP       /* the pipeline: the ranks of the same place in every stage */
} ffn_dist_group;

typedef struct ffn_dist_layout {
    int64_t tp, dp, ep; /* 1 each when 0 */
    /* The options every rank must share, as lines "KEY=VALUE\n" (KEY the
     * flag that sets it, VALUE exact: e.g. "--lr=0.001\n"; no '\n' or NUL
     * inside a value; at most 64 KiB in all), compared by ffn_dist_init
     * before anything else; NULL: none beyond the layout. */
    const char *options;
    /* The deadline of every wait of libffn_dist, in seconds: 0 gives
     * FFN_DIST_TIMEOUT_DEFAULT, a negative value none. */
    double timeout_s;
    /* Pipeline stages (0: 1).  world = pp · (tp · dp): world rank r is on
     * stage r / (tp · dp), and the groups above are those of the rank
     * r % (tp · dp) inside its stage; the PP group is the ranks of the same
     * place in every stage (colour r % (tp · dp), key the stage).  --pp > 1
     * with --tp or --ep is refused (not in this build). */
    int64_t pp;
} ffn_dist_layout;

#define FFN_DIST_TIMEOUT_DEFAULT 600.0

/* 1 when this process was started by mpirun (Open MPI's environment), so
 * a driver may initialise MPI; 0 for a plain process. */
int ffn_dist_launched(void);

/* Initialise MPI (once per process; argc/argv may be NULL) and build the
 * groups of `layout`.  The first thing every rank does is the agreement:
 * the text "ffn=VERSION (built DATE)\n--tp=T\n--dp=D\n--ep=E\n" followed
 * by layout->options is compared between the ranks (a 64-bit hash, then,
 * when they differ, the texts, line by line), so ranks started with
 * different options all fail with FFN_ERR_CONFIG and one message naming
 * the first line that differs and both values: "the ranks were started
 * with different options: --steps: rank 0 has 20, rank 1 has 30 (...)".
 * Then, with the same outcome on every rank: tp·dp different from the
 * number of ranks, ep not dividing dp (tp 1), ep other than 1 or tp with
 * tp > 1 (FFN_ERR_UNSUPPORTED); each names the numbers.  A layout of more
 * than one rank in a process that mpirun did not start fails before MPI
 * starts (*out NULL).
 *
 * The deadline: every wait of libffn_dist (the agreement, the reductions,
 * the all-to-alls, ffn_dist_agree, ffn_dist_free's) is a nonblocking MPI
 * call polled with MPI_Testall, and fails after layout->timeout_s seconds
 * with a message naming the wait and the deadline.  MPI cannot cancel a
 * collective, so the handle is then broken: later waits fail at once and
 * ffn_dist_free does not finalise MPI; the process should end (exit
 * non-zero), and mpirun ends the other ranks.
 *
 * On a failure after MPI started, *out is still set, to a handle that
 * ffn_dist_free (and ffn_dist_agree, which returns the status given)
 * alone accept: report the error, then free it, so every rank has
 * reported before any exits (ffn_dist_free waits for all of them). */
ffn_status ffn_dist_init(int *argc, char ***argv, const ffn_dist_layout *layout,
                         ffn_dist **out);
/* The deadline in force (seconds; 0: none). */
double ffn_dist_timeout(const ffn_dist *d);
/* Threads for a rank when the user gave none: the host's online cores
 * divided by the ranks mpirun put on it (OMPI_COMM_WORLD_LOCAL_SIZE), at
 * least 1. */
int ffn_dist_local_threads(void);

/* Free the groups (and the expert-parallel models' runners: call it
 * before freeing the context the models were made in) and finalise MPI
 * (NULL is a no-op).  Collective when ffn_dist_init started MPI: a barrier
 * of every rank first (within the deadline; past it, MPI is not
 * finalised), so a rank never exits while another is still reporting. */
void ffn_dist_free(ffn_dist *d);

/* The trainer's gradient sum (ffn_dist_reduce_grads) goes in buckets of
 * this many floats (default FFN_DIST_BUCKET_FLOATS; <= 0: the default).
 * Every rank must set the same value. */
#define FFN_DIST_BUCKET_FLOATS ((int64_t)1 << 20) /* 4 MiB of fp32 */
/* floats 0: no cut (one bucket per run of tensors summed over one group) */
void ffn_dist_set_bucket(ffn_dist *d, int64_t floats);
/* Overlap (on 1; set before ffn_dist_train_hooks): the trainer's gradient
 * sums start during the backward, each bucket once its tensors are
 * complete (ffn_train_dist.grads_begin), the same buckets and collectives
 * as without, so the same bits.  Used for the sum of ffn_dist_reduce_grads
 * (--dp, --tp, --ep) and ZeRO-2's reduce-scatter with --tp 1 and --ep 1;
 * ZeRO-1's one ring over the whole block and ZeRO with --tp or --ep stay
 * after the backward.  Every rank must set the same value. */
void ffn_dist_set_overlap(ffn_dist *d, int on);
/* What the gradient sums (ffn_dist_reduce_grads) cost this rank so far:
 * calls, wall seconds inside them, buckets and floats summed; with the
 * overlap, wait_seconds blocked after the backward and comm_seconds from
 * the first bucket's start to the last's end (the blocking sums: both
 * equal to seconds). */
typedef struct ffn_dist_grad_stats {
    int64_t calls, buckets, floats;
    double seconds;
    double wait_seconds, comm_seconds;
} ffn_dist_grad_stats;
void ffn_dist_get_grad_stats(const ffn_dist *d, ffn_dist_grad_stats *stats);

int ffn_dist_rank(const ffn_dist *d, ffn_dist_group g);
int ffn_dist_size(const ffn_dist *d, ffn_dist_group g);

/* Sum buf (n elements) over the group, in place, in a fixed order. */
ffn_status ffn_dist_allreduce_f32(ffn_dist *d, ffn_dist_group g, float *buf, int64_t n);
ffn_status ffn_dist_allreduce_f64(ffn_dist *d, ffn_dist_group g, double *buf, int64_t n);
/* The two halves of the all-reduce above, alone.  reduce_scatter: the
 * fixed-order sum lands complete on this rank for the range
 * ffn_dist_owned_range gives (the rest of buf is left partial);
 * all_gather: every rank's owned range copied to every rank. */
ffn_status ffn_dist_reduce_scatter_f32(ffn_dist *d, ffn_dist_group g, float *buf, int64_t n);
ffn_status ffn_dist_all_gather_f32(ffn_dist *d, ffn_dist_group g, float *buf, int64_t n);
/* The range [*first, *first + *count) of n values this rank owns in the
 * two calls above (the uneven split of n over the group). */
void ffn_dist_owned_range(const ffn_dist *d, ffn_dist_group g, int64_t n, int64_t *first,
                          int64_t *count);

/* Copy root's n bytes to every rank of the group. */
ffn_status ffn_dist_broadcast(ffn_dist *d, ffn_dist_group g, void *buf, size_t n, int root);
ffn_status ffn_dist_barrier(ffn_dist *d);

/* Collective over the world: every rank passes its own status (and has its
 * message in ffn_last_error()); all return FFN_OK, or all return the lowest
 * failing rank's status with its message prefixed by "rank R". */
ffn_status ffn_dist_agree(ffn_dist *d, ffn_status st);

/* Collective: fail on every rank unless every rank passed the same bytes
 * (compared by a 64-bit hash); the message names `what` and the first rank
 * that differs from rank 0. */
ffn_status ffn_dist_check_same(ffn_dist *d, const char *what, const void *bytes, size_t n);

/* Fill the trainer's hooks (include/ffn/train.h) for this rank: dp rank
 * and size, the fixed-order gradient sum over the dp group (in buckets,
 * ffn_dist_reduce_grads), the writer (world rank 0), the agreement, the
 * same-bytes check; with tp > 1 also the tensor-parallel model (made in
 * ctx) and its slicing, gathering, gradient sync and norm; with ep > 1
 * (tp 1) the expert-parallel model, its consolidation and norm.  `t` stays
 * valid while d lives. */
void ffn_dist_train_hooks(ffn_dist *d, ffn_ctx *ctx, ffn_train_dist *t);
/* Add ZeRO-1 to hooks filled by ffn_dist_train_hooks: AdamW's moments
 * sharded over the data-parallel group (this rank keeps
 * ffn_dist_owned_range's range of them), the gradients reduce-scattered
 * in one fixed-order ring over the whole block (no buckets), the updated
 * parameters all-gathered (with --tp over the rank's share).  With --ep
 * alone (the sharded state in place) the held tensors of each group --
 * the replicated ones over dp, each expert over the ranks holding it --
 * are split over that group as one block (held_group, held_allgatherv):
 * gradients summed whole as without ZeRO, each rank updates its part,
 * parts all-gathered in place tensor by tensor.  The optimizer's bytes on
 * this rank: 8 x the owned count. */
ffn_status ffn_dist_train_hooks_zero1(ffn_dist *d, ffn_train_dist *t);
/* ZeRO-2: ZeRO-1 whose gradients are reduce-scattered bucket by bucket
 * (the buckets of ffn_dist_set_bucket, MPI_Ireduce_scatter with each
 * rank's owned floats of the bucket as its count), each rank keeping only
 * its owned range of the summed gradient (t->zero_grads: the trainer gives
 * the rest back); with --ep alone each held tensor's gradient
 * reduce-scattered over its group (held_reduce_scatter).  The layouts of
 * ZeRO-1, and --dp 2 or more (an error naming --dp otherwise).  Gradient bytes kept between steps:
 * 4 x the owned count (the backward still writes the whole block). */
ffn_status ffn_dist_train_hooks_zero2(ffn_dist *d, ffn_train_dist *t);

/* ---- the tensor-parallel FFN layer (Megatron layout) ------------------------
 * gate and up split by rows (output units), down by columns, over the tp
 * group: rank k of P holds F/P units, the first F % P ranks one more; the
 * GLU pair of a unit stays on one rank.  forward: the local layer, then one
 * all-reduce of y (the down bias lives on tp rank 0 only, so it is added
 * once); backward: the local layer's backward, then one all-reduce of dx.
 * Weight gradients are the local slices (ffn_dist_tp_layer_slice says
 * which units). */
typedef struct ffn_dist_tp_layer ffn_dist_tp_layer;

ffn_status ffn_dist_tp_layer_create(ffn_dist *d, ffn_ctx *ctx, const ffn_layer_config *full,
                                    ffn_dist_tp_layer **out);
void ffn_dist_tp_layer_free(ffn_dist_tp_layer *l);
/* The units [*first, *first + *count) of F this rank holds. */
void ffn_dist_tp_layer_slice(const ffn_dist_tp_layer *l, int64_t *first, int64_t *count);
/* The local layer (config with intermediate_size = count). */
ffn_layer *ffn_dist_tp_layer_local(ffn_dist_tp_layer *l);
/* Copy this rank's slices out of the full-size weights (every rank passes
 * the same full tensors). */
ffn_status ffn_dist_tp_layer_set_weights(ffn_dist_tp_layer *l, const ffn_layer_params *full);
size_t ffn_dist_tp_layer_workspace_size(const ffn_dist_tp_layer *l, int64_t max_n);
size_t ffn_dist_tp_layer_saved_size(const ffn_dist_tp_layer *l, int64_t n);
ffn_status ffn_dist_tp_layer_forward(ffn_dist_tp_layer *l, float *y, const float *x, int64_t n,
                                     float *saved, void *ws, size_t ws_bytes);
/* grads: local-size tensors (count units); dx may be NULL. */
ffn_status ffn_dist_tp_layer_backward(ffn_dist_tp_layer *l, float *dx,
                                      const ffn_layer_params *grads, const float *dy,
                                      const float *x, int64_t n, const float *saved, void *ws,
                                      size_t ws_bytes);

/* ---- the tensor-parallel model (Megatron layout) -----------------------------
 * A rank's model is an ordinary ffn_model of the same depth: its attention
 * keeps H/P query heads and G/P key/value heads (head_dim that of the full
 * model; tp must divide both, so a GQA group stays on one rank: q/k/v by
 * rows, o_proj by columns), its FFNs F/P units (gate/up by rows, down by
 * columns; the first F % P ranks one more).  Embeddings (token and
 * position), every norm (and per-head q/k norms) and the LM head are
 * replicated (the head is not vocabulary-parallel: each rank computes the
 * whole logits).  The o_proj and down_proj biases, added after the sum,
 * live on tp rank 0 (zero elsewhere).  The model's reducer sums the
 * attention and FFN outputs in forward and the norms' output gradients in
 * backward: two all-reduces of (N, D) each way per layer.  MoE layers are
 * split the same way (Megatron style): every routed expert and the shared
 * expert keep Fe/P (Fs/P) units, the router and the shared expert's gate
 * are replicated, so every rank routes alike, and their gradients are
 * summed over the group (ffn_dist_tp_model_sync_grads); the aux and z
 * losses count on tp rank 0 only (the loss total of the other ranks is
 * their cross-entropy).  With --ep tp (the EP group is the TP group) the
 * routed experts are not split: each stays whole on one rank of the group
 * (the uneven split of E over tp), every rank routes every token (the
 * ranks of a TP group see the same tokens, so nothing is exchanged), its
 * MoE layers' runner computes its own experts' rows and leaves the other
 * experts' outputs (and dx) zero, and the same reducer sums the layer's
 * output and input gradient over the group; an expert's gradient lives on
 * its owner and is summed over the DP group; the shared expert is still
 * split by units.  Not with a q/k norm over the whole projection. */
/* The rank's config from the full one; errors name --tp and the numbers. */
ffn_status ffn_dist_tp_model_config(ffn_dist *d, const ffn_model_config *full,
                                    ffn_model_config *out);
/* The rank's model with its slices of `full`'s weights, the reducer set. */
ffn_status ffn_dist_tp_model_create(ffn_dist *d, ffn_ctx *ctx, ffn_model *full,
                                    const ffn_model_options *opt, ffn_model **out);
/* Any array laid out like the parameters (gradients, Adam's moments):
 * the rank's slices out of the full layout, and back (collective: one
 * all-reduce of the full size over the group). */
ffn_status ffn_dist_tp_slice_flat(ffn_dist *d, const ffn_model *full, const float *src,
                                  const ffn_model *rank_model, float *dst);
ffn_status ffn_dist_tp_gather_flat(ffn_dist *d, const ffn_model *rank_model, const float *src,
                                   const ffn_model *full, float *dst);
/* The squared L2 norm of the whole model's gradient from the ranks' g
 * (collective): sliced tensors summed over the group, replicated ones once. */
ffn_status ffn_dist_tp_grad_sq(ffn_dist *d, const ffn_model *rank_model, const ffn_model *full,
                               const float *g, double *sq);
/* After backward, before the optimizer: sum the per-head q/k norm weights'
 * and the MoE routers' (and shared expert gates') gradients over the group
 * (each rank has its heads' or its units' part) and zero the
 * rank-0-only biases' gradients elsewhere (so they stay zero). */
ffn_status ffn_dist_tp_model_sync_grads(ffn_dist *d, ffn_model *rank_model);
/* Put the ranks' slices back together into `full` (its parameters, or with
 * grads = 1 its gradients), on every rank of the group: one all-reduce of
 * the whole model.  Replicated tensors come from tp rank 0. */
ffn_status ffn_dist_tp_model_gather(ffn_dist *d, ffn_model *rank_model, ffn_model *full,
                                    int grads);

/* ---- the expert-parallel MoE layer --------------------------------------------
 * The E routed experts spread over the EP group: rank k of P holds experts
 * [first, first + count) (E/P each, the first E % P ranks one more).  Each
 * rank routes its own tokens with its own ffn_moe (replicated router and
 * shared experts: capacity, drops, weights, combine and losses are those
 * of one process on this rank's tokens), and an ffn_moe_runner moves the
 * kept rows: MPI_Alltoall of the per-expert row counts, MPI_Alltoallv of
 * the rows to the experts' ranks (the rows leave grouped by expert, so no
 * (token, slot) metadata travels: the reverse MPI_Alltoallv brings the
 * outputs back in the same order and the weights stay home), the local
 * experts as one batched call each over the rows of every rank, and the
 * way back.  Backward mirrors it with w·dy rows; each rank accumulates
 * the weight gradients of its own experts over every rank's tokens. */
typedef struct ffn_dist_ep_moe ffn_dist_ep_moe;

ffn_status ffn_dist_ep_moe_create(ffn_dist *d, ffn_ctx *ctx, const ffn_moe_config *cfg,
                                  ffn_dist_ep_moe **out);
void ffn_dist_ep_moe_free(ffn_dist_ep_moe *l);
void ffn_dist_ep_moe_experts(const ffn_dist_ep_moe *l, int64_t *first, int64_t *count);
/* The rank's ffn_moe: call ffn_moe_forward / ffn_moe_backward on it (its
 * grads' experts may be NULL: expert gradients go where
 * ffn_dist_ep_moe_set_expert_grads says). */
ffn_moe *ffn_dist_ep_moe_layer(ffn_dist_ep_moe *l);
/* Router and shared experts from `w`, and this rank's experts from
 * w->experts[first .. first + count): pass the array of all E as one
 * process would; the other entries are not read. */
ffn_status ffn_dist_ep_moe_set_weights(ffn_dist_ep_moe *l, const ffn_moe_params *w);
/* Where backward accumulates this rank's experts' gradients: count entries
 * (NULL: not wanted). */
void ffn_dist_ep_moe_set_expert_grads(ffn_dist_ep_moe *l, const ffn_layer_params *grads);
/* Bytes this rank sent to other ranks in the last forward and backward
 * (rows and counts). */
void ffn_dist_ep_moe_bytes_sent(const ffn_dist_ep_moe *l, int64_t *forward, int64_t *backward);

/* ---- the expert-parallel model (ffn train --ep) --------------------------------
 * A rank's model has the whole config and the whole flat blocks; each MoE
 * layer routes its own tokens (router, capacity, shared experts, losses:
 * as one process on this rank's tokens) and hands the kept rows to an
 * expert-parallel layer as above, which runs the EP group's rank k's
 * experts (the uneven split of E over --ep) on every rank's rows.  The
 * other ranks' expert tensors are kept but neither computed nor used here:
 * their gradients stay zero, and a checkpoint takes each expert from its
 * owner (ffn_dist_ep_gather_flat).  The gradient sum: replicated tensors
 * over the data-parallel group, an expert's over the expert-replica group
 * (the ranks holding it), in buckets of fixed size in the tensor table's
 * order, so the result is independent of timing. */
/* Errors for a layout this config cannot take: --ep > 1 without MoE
 * layers, --ep larger than the experts; each names both numbers. */
ffn_status ffn_dist_ep_model_check(ffn_dist *d, const ffn_model_config *cfg);
/* The rank's model with `full`'s weights (its runners live until
 * ffn_dist_free). */
ffn_status ffn_dist_ep_model_create(ffn_dist *d, ffn_ctx *ctx, ffn_model *full,
                                    const ffn_model_options *opt, ffn_model **out);
/* Collective: the gradient sum described above, in buckets of `bucket`
 * floats (a plain or tensor-parallel model: every tensor over dp). */
ffn_status ffn_dist_reduce_grads(ffn_dist *d, const ffn_model *model, float *grads, int64_t bucket);
/* Collective over the EP group: the whole model's squared gradient norm. */
ffn_status ffn_dist_ep_grad_sq(ffn_dist *d, const ffn_model *model, const float *grads, double *sq);
/* Collective over the EP group: an array laid out like the parameters,
 * consolidated (each expert from its owner, the rest from ep rank 0). */
ffn_status ffn_dist_ep_gather_flat(ffn_dist *d, const ffn_model *model, const float *src,
                                   float *dst);

/* ---- pipeline stages (ffn train --pp) -------------------------------------------
 * Stage s of P (FFN_DIST_PP's rank) holds layers [s·L/P ..) by the uneven
 * split of L (the first L % P stages one more), the embedding on stage 0,
 * the final norm and head on the last (a tied head's embedding on both:
 * its two gradient parts are added, the same sum on both).  Each stage
 * keeps the whole model's layout and trains, in place, only the tensors it
 * holds (the trainer's sharded state; a save takes each tensor from its
 * stage).  A step's A micro-batches run 1F1B: stage s does P - s - 1
 * forwards first, then one forward and one backward in turn, then the
 * backwards left; the residual stream (B·T, D, float32) goes forward and
 * its gradient back with MPI_Isend / MPI_Irecv over the PP group, and a
 * stage with several micro-batches in flight keeps copies of its layers'
 * saved activations.  Every micro-batch's backward runs in order on every
 * stage, so the gradients are accumulated as one process accumulates them.
 * The stage's gradients are summed over its DP group.  --pp larger than
 * the layers: an error naming both numbers. */
ffn_status ffn_dist_pp_model_check(ffn_dist *d, const ffn_model_config *cfg);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif /* FFN_DIST_H */
