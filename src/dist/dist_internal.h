/* dist_internal.h -- what the files of libffn_dist share.  Internal; not
 * installed.  (libffn_dist uses libffn's public API only, so this header
 * stays within src/dist.) */
#ifndef FFN_DIST_INTERNAL_H
#define FFN_DIST_INTERNAL_H

#include "ffn/dist.h"

#include <mpi.h>
#include <stdint.h>

/* The one uneven split of n units over P ranks: n / P each, the first
 * n % P ranks one more; rank k holds [*first, *first + *count). */
static inline void dist_split(int64_t n, int64_t P, int64_t k, int64_t *first, int64_t *count) {
    int64_t base = n / P, extra = n % P;
    *first = k * base + (k < extra ? k : extra);
    *count = base + (k < extra);
}

/* The experts spread by expert over the tensor-parallel group (--tp T
 * --ep T): the EP group is the TP group, an expert's replicas the DP group. */
static inline int dist_tp_ep(const ffn_dist *d) {
    return ffn_dist_size(d, FFN_DIST_TP) > 1 && ffn_dist_size(d, FFN_DIST_EP) > 1;
}

/* The communicator of group g (owned by d; never freed by the caller). */
MPI_Comm dist_comm(const ffn_dist *d, ffn_dist_group g);

/* The expert-parallel layer without a routing ffn_moe of its own (own_moe
 * 0): the runner of a model's MoE layer, whose set_experts points the
 * rank's experts at the model's tensors (ep_moe.c, used by ep_model.c). */
ffn_status dist_ep_moe_create(ffn_dist *d, ffn_ctx *ctx, const ffn_moe_config *cfg, int own_moe,
                              ffn_dist_ep_moe **out);
ffn_moe_runner dist_ep_moe_runner(ffn_dist_ep_moe *l);
/* count entries the layer owns, for ffn_dist_ep_moe_set_expert_grads */
ffn_layer_params *dist_ep_moe_grad_slots(ffn_dist_ep_moe *l);
/* Every MoE layer of m run by an expert-parallel runner of this rank's
 * experts (ep_model.c; also the TP model's with dist_tp_ep). */
ffn_status dist_ep_install_runners(ffn_dist *d, ffn_ctx *ctx, ffn_model *m);
/* Sharded expert state (--ep with --tp 1): 1 when this rank holds tensor i
 * of m (replicated, or one of its experts), 0 for another rank's expert. */
int dist_ep_holds(const ffn_dist *d, const ffn_model *m, int64_t i);
/* Collective over the EP group of world rank 0: each expert tensor i sent
 * by its owner from where[i] to world rank 0, which receives it into
 * where[i] (where[i] may be NULL where a rank neither sends nor receives). */
ffn_status dist_ep_gather_tensors(ffn_dist *d, const ffn_model *m, float *const *where);
ffn_status dist_ep_gather_one(ffn_dist *d, const ffn_model *m, int64_t i, float *buf);
/* A ring step's received count: FFN_OK when got is nr, else the error
 * naming rank prev of the group (the ranks sum different things). */
ffn_status dist_ring_count(const char *what, int prev, int got, int64_t nr);
ffn_status dist_move_to_writer(ffn_dist *d, MPI_Comm comm, int src, int me, float *buf,
                               const ffn_model_tensor *t, const char *what);
/* ZeRO-1 with --tp: ffn_dist_tp_grad_sq over [lo, hi) of the rank's
 * block only, summed over every rank (tp_model.c). */
ffn_status dist_tp_grad_sq_range(ffn_dist *d, const ffn_model *rank_model, const ffn_model *full,
                                 const float *g, int64_t lo, int64_t hi, double *sq);
/* d keeps the model runners it made and frees them in ffn_dist_free. */
ffn_status dist_keep_ep_layer(ffn_dist *d, ffn_dist_ep_moe *l);

/* Pipeline stages (pp_model.c): this stage's layers [*l0, *l1) of L;
 * --pp larger than the layers refused; tensor i held here; the tensors
 * to the writer from their stages; the stage's gradient sum over its dp
 * group (and the tied embedding's over the two end stages); the whole
 * model's squared gradient norm; one step's A micro-batches in 1F1B (the
 * losses summed over the stages); one evaluation batch. */
void dist_pp_layers(const ffn_dist *d, int64_t L, int64_t *l0, int64_t *l1);
ffn_status dist_pp_check(ffn_dist *d, const ffn_model_config *cfg);
int dist_pp_holds(const ffn_dist *d, const ffn_model *m, int64_t i);
ffn_status dist_pp_gather_tensors(ffn_dist *d, const ffn_model *m, float *const *where);
ffn_status dist_pp_gather_one(ffn_dist *d, const ffn_model *m, int64_t i, float *buf);
int dist_pp_held_group(void *u, const ffn_model *m, int64_t i, int64_t *rank, int64_t *size);
ffn_status dist_pp_reduce_grads(ffn_dist *d, ffn_model *m, float *g);
ffn_status dist_pp_grad_sq(ffn_dist *d, const ffn_model *m, const float *g, double *sq);
ffn_status dist_pp_step(ffn_dist *d, ffn_model *m, const int32_t *tokens,
                        const int32_t *targets, int64_t A, int64_t B, int64_t T,
                        float grad_scale, double *ce, double *total);
/* Pipeline stages: the trainer's hooks over the plain ones (dist.c). */
void dist_pp_train_hooks(ffn_dist *d, ffn_train_dist *t);
ffn_status dist_pp_eval(ffn_dist *d, ffn_model *m, const int32_t *tokens, const int32_t *targets,
                        int64_t B, int64_t T, double *ce);

/* One gradient sum's time, buckets and floats (ffn_dist_get_grad_stats). */
void dist_add_grad_stats(ffn_dist *d, double seconds, int64_t buckets, int64_t floats);

/* The overlapped path's sum: as dist_add_grad_stats, with the seconds
 * blocked after the backward and those from the first bucket's start to
 * the last's end apart (the blocking sums count their time as both). */
void dist_add_overlap_stats(ffn_dist *d, double seconds, int64_t buckets, int64_t floats,
                            double wait, double comm);
/* The deadline of a poll that has waited `waited` seconds: an error (and d
 * marked broken) past it, as in dist_wait. */
ffn_status dist_deadline(ffn_dist *d, double waited, const char *what);

/* The buckets of ffn_dist_reduce_grads, in the table's order (ep_model.c). */
ffn_status dist_grad_buckets(ffn_dist *d, const ffn_model *m, int64_t bucket,
                             ffn_status (*fn)(void *u, ffn_dist_group g, int64_t at, int64_t n),
                             void *u);

/* The overlapped gradient sums (overlap.c): a plan of buckets for a model
 * (kept while the model, block size and bucket stay), begun before the
 * last micro-batch's backward, moved on at each ready point, finished
 * after it.  RING: the buckets of dist_grad_buckets, each the fixed-order
 * ring all-reduce; RS: ZeRO-2's buckets of the whole block, each
 * MPI_Ireduce_scatter over dp into this rank's range [lo, hi), the rest of
 * a finished bucket given back at once. */
typedef struct dist_overlap dist_overlap;
enum { DIST_OVERLAP_RING = 1, DIST_OVERLAP_RS = 2 };
ffn_status dist_overlap_plan(ffn_dist *d, dist_overlap **o, int mode, const ffn_model *m,
                             int64_t n, int64_t bucket);
void dist_overlap_begin(dist_overlap *o, float *g, int64_t lo, int64_t hi);
ffn_status dist_overlap_ready(ffn_dist *d, dist_overlap *o, int64_t level);
ffn_status dist_overlap_finish(ffn_dist *d, dist_overlap *o);
void dist_overlap_free(dist_overlap *o);

/* Wait for n requests within the deadline of d (dist.c: the one wait of
 * libffn_dist; sts may be NULL).  A timeout marks d broken. */
ffn_status dist_wait(ffn_dist *d, int n, MPI_Request *req, MPI_Status *sts, const char *what);

/* An MPI return code as an ffn_status with MPI's message after `what`. */
ffn_status dist_mpi_error(int rc, const char *what);

#endif /* FFN_DIST_INTERNAL_H */
