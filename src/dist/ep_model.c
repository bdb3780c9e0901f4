/* ep_model.c -- the expert-parallel model (see include/ffn/dist.h): a
 * rank's model is an ordinary ffn_model of the whole config whose MoE
 * layers hand their routed experts to an expert-parallel runner (ep_moe.c)
 * holding this rank's experts; the gradient reduction that sums each
 * tensor over the ranks sharing it (replicated tensors over the
 * data-parallel group, an expert's over its replicas), in fixed buckets;
 * the consolidation of the experts from their owners; the norm.
 *
 * Every rank's model has the whole flat blocks, but under ffn train a rank
 * keeps (dist_ep_holds) only the replicated tensors and its own experts:
 * a run from the seed initialises those alone, the others' parameter and
 * gradient pages are never written (a resume's given back), their moments
 * not allocated (src/train/train.c), and the model's own MoE layers pack
 * no expert (the runners hold this rank's); a checkpoint
 * takes each expert from its owner (dist_ep_gather_tensors). */
#include "dist/dist_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- which tensors a rank holds ------------------------------------------------ */

/* 1: an expert tensor this rank computes; 0: replicated (every rank the
 * same values); -1: an expert tensor of another rank (zero gradient here). */
static int ep_role(const ffn_dist *d, const ffn_model_tensor *t, int64_t E) {
    if (t->expert < 0 || ffn_dist_size(d, FFN_DIST_EP) == 1) return 0;
    int64_t first, count;
    dist_split(E, ffn_dist_size(d, FFN_DIST_EP), ffn_dist_rank(d, FFN_DIST_EP), &first, &count);
    return t->expert >= first && t->expert < first + count ? 1 : -1;
}

static ffn_layer_params expert_tensors(ffn_model *m, float *block, int64_t layer, int64_t e) {
    ffn_layer_params p = {0};
    static const char *const kind[3] = {"gate_proj", "up_proj", "down_proj"};
    float **w[3] = {&p.gate_w, &p.up_w, &p.down_w}, **b[3] = {&p.gate_b, &p.up_b, &p.down_b};
    char name[160];
    for (int k = 0; k < 3; k++) {
        snprintf(name, sizeof name, "model.layers.%lld.mlp.experts.%lld.%s.weight", (long long)layer,
                 (long long)e, kind[k]);
        const ffn_model_tensor *t = ffn_model_find_tensor(m, name);
        if (t) *w[k] = block + t->offset;
        snprintf(name, sizeof name, "model.layers.%lld.mlp.experts.%lld.%s.bias", (long long)layer,
                 (long long)e, kind[k]);
        t = ffn_model_find_tensor(m, name);
        if (t) *b[k] = block + t->offset;
    }
    return p;
}

ffn_status ffn_dist_ep_model_check(ffn_dist *d, const ffn_model_config *c) {
    const int64_t P = ffn_dist_size(d, FFN_DIST_EP);
    if (P == 1) return FFN_OK;
    if (c->num_experts == 0)
        return ffn_set_error(FFN_ERR_CONFIG, "--ep %lld: the model has no MoE layers (give "
                             "--num-experts, or leave --ep out)", (long long)P);
    if (c->num_experts < P)
        return ffn_set_error(FFN_ERR_CONFIG, "--ep %lld is larger than the %lld experts (each "
                             "rank of the expert-parallel group holds at least one)",
                             (long long)P, (long long)c->num_experts);
    return FFN_OK;
}

/* Hand every MoE layer of m to an expert-parallel runner of this rank's
 * experts (the uneven split of E over the EP group). */
ffn_status dist_ep_install_runners(ffn_dist *d, ffn_ctx *ctx, ffn_model *m) {
    const ffn_model_config *c = ffn_model_get_config(m);
    float *g = ffn_model_grads(m, NULL);
    ffn_status st = FFN_OK;
    ffn_moe_config mc;
    memset(&mc, 0, sizeof mc);
    mc.hidden_size = c->hidden_size;
    mc.num_experts = c->num_experts;
    mc.num_experts_per_tok = c->num_experts_per_tok;
    mc.moe_intermediate_size = c->moe_intermediate_size ? c->moe_intermediate_size : c->intermediate_size;
    mc.act = c->hidden_act;
    mc.expert_type = c->mlp_type == FFN_MODEL_MLP_GATED ? FFN_MLP_GATED : FFN_MLP_DENSE;
    mc.bias = c->mlp_bias;
    mc.norm_topk_prob = c->norm_topk_prob;
    mc.scoring = FFN_MOE_SCORING_SOFTMAX;
    mc.routed_scaling_factor = 1.0;
    for (int64_t layer = 0; st == FFN_OK && ffn_dist_size(d, FFN_DIST_EP) > 1 &&
                            layer < c->num_hidden_layers; layer++) {
        if (!ffn_model_config_layer_is_moe(c, layer)) continue;
        ffn_dist_ep_moe *l = NULL;
        st = dist_ep_moe_create(d, ctx, &mc, 0, &l);
        if (st == FFN_OK) st = dist_keep_ep_layer(d, l);
        else ffn_dist_ep_moe_free(l);
        if (st != FFN_OK) break;
        int64_t first, count;
        ffn_dist_ep_moe_experts(l, &first, &count);
        ffn_layer_params *grads = g ? dist_ep_moe_grad_slots(l) : NULL;
        for (int64_t j = 0; grads && j < count; j++) grads[j] = expert_tensors(m, g, layer, first + j);
        if (grads) ffn_dist_ep_moe_set_expert_grads(l, grads);
        ffn_moe_runner r = dist_ep_moe_runner(l);
        st = ffn_model_set_moe_runner(m, layer, &r); /* sets the weights: set_experts */
        if (st != FFN_OK) st = ffn_set_error(st, "expert parallel: layer %lld: %s", (long long)layer, ffn_last_error());
    }
    return st;
}

ffn_status ffn_dist_ep_model_create(ffn_dist *d, ffn_ctx *ctx, ffn_model *full,
                                    const ffn_model_options *opt, ffn_model **out) {
    if (!d || !ctx || !full || !out)
        return ffn_set_error(FFN_ERR_INVALID_ARG, "ffn_dist_ep_model_create: NULL argument");
    *out = NULL;
    const ffn_model_config *c = ffn_model_get_config(full);
    ffn_status st = ffn_dist_ep_model_check(d, c);
    if (st != FFN_OK) return st;
    ffn_model *m = NULL;
    st = ffn_model_create(ctx, c, opt, &m);
    if (st != FFN_OK) return st;
    int64_t np = 0;
    float *w = ffn_model_params(m, &np);
    memcpy(w, ffn_model_params(full, NULL), (size_t)np * sizeof *w);
    st = dist_ep_install_runners(d, ctx, m);
    if (st == FFN_OK) st = ffn_model_params_changed(m);
    if (st != FFN_OK) {
        ffn_model_free(m);
        return st;
    }
    *out = m;
    return FFN_OK;
}

/* ---- the gradients --------------------------------------------------------------- */

/* The buckets of the gradient sum of an expert-parallel (or plain
 * data-parallel) model: runs of adjacent tensors of one role, cut into
 * buckets of at most `bucket` floats, each summed over its group;
 * other ranks' expert tensors are skipped (zero here).  The buckets follow
 * the tensor table, so the cut -- and every sum -- is the same on every
 * run; fn gets each bucket in the table's order (the blocking sum below
 * and the overlapped one, overlap.c, share it). */
ffn_status dist_grad_buckets(ffn_dist *d, const ffn_model *m, int64_t bucket,
                             ffn_status (*fn)(void *u, ffn_dist_group g, int64_t at, int64_t n),
                             void *u) {
    const int64_t E = ffn_model_get_config(m)->num_experts, nt = ffn_model_num_tensors(m);
    int64_t i = 0;
    while (i < nt) {
        const ffn_model_tensor *t = ffn_model_tensor_at(m, i);
        const int role = ep_role(d, t, E);
        int64_t j = i + 1, end = t->offset + t->numel;
        while (j < nt) { /* extend the run while the role and adjacency hold */
            const ffn_model_tensor *v = ffn_model_tensor_at(m, j);
            if (v->offset != end || ep_role(d, v, E) != role) break;
            end += v->numel;
            j++;
        }
        if (role >= 0) {
            ffn_dist_group grp = role ? FFN_DIST_EXPERT_REPLICAS : FFN_DIST_DP;
            for (int64_t at = t->offset; at < end; at += bucket) {
                ffn_status st = fn(u, grp, at, end - at < bucket ? end - at : bucket);
                if (st != FFN_OK) return st;
            }
        }
        i = j;
    }
    return FFN_OK;
}

typedef struct { ffn_dist *d; float *g; int64_t buckets, floats; } sum_state;
static ffn_status sum_bucket(void *u, ffn_dist_group g, int64_t at, int64_t n) {
    sum_state *s = u;
    s->buckets++, s->floats += n;
    return ffn_dist_allreduce_f32(s->d, g, s->g + at, n);
}

/* Each bucket summed over its group in the fixed ring order, one after
 * the other. */
ffn_status ffn_dist_reduce_grads(ffn_dist *d, const ffn_model *m, float *g, int64_t bucket) {
    if (!d || !m || !g || bucket < 1)
        return ffn_set_error(FFN_ERR_INVALID_ARG, "ffn_dist_reduce_grads: bad argument");
    const double t0 = MPI_Wtime();
    sum_state s = {d, g, 0, 0};
    ffn_status st = dist_grad_buckets(d, m, bucket, sum_bucket, &s);
    if (st != FFN_OK) return st;
    dist_add_grad_stats(d, MPI_Wtime() - t0, s.buckets, s.floats);
    return FFN_OK;
}

/* The squared norm of the whole model's gradient: replicated tensors from
 * ep rank 0, each expert from its owner, summed over the EP group. */
ffn_status ffn_dist_ep_grad_sq(ffn_dist *d, const ffn_model *m, const float *g, double *sq) {
    const int64_t E = ffn_model_get_config(m)->num_experts, nt = ffn_model_num_tensors(m);
    const int lead = ffn_dist_rank(d, FFN_DIST_EP) == 0;
    double s = 0;
    for (int64_t i = 0; i < nt; i++) {
        const ffn_model_tensor *t = ffn_model_tensor_at(m, i);
        int role = ep_role(d, t, E);
        if (role < 0 || (role == 0 && !lead)) continue;
        for (int64_t k = 0; k < t->numel; k++) s += (double)g[t->offset + k] * g[t->offset + k];
    }
    ffn_status st = ffn_dist_allreduce_f64(d, FFN_DIST_EP, &s, 1);
    *sq = s;
    return st;
}

int dist_ep_holds(const ffn_dist *d, const ffn_model *m, int64_t i) {
    return ep_role(d, ffn_model_tensor_at(m, i), ffn_model_get_config(m)->num_experts) >= 0;
}

/* A test's mutation (FFN_DIST_MUTATE=skip-gather): the gather leaves out
 * the last expert tensor, so a test comparing checkpoints must fail. */
static int mutate(const char *what) {
    const char *e = getenv("FFN_DIST_MUTATE");
    return e && !strcmp(e, what);
}

/* The EP rank that owns expert e (the uneven split of E over P). */
static int expert_owner(int64_t P, int64_t E, int64_t e) {
    int owner = 0;
    for (int64_t k = 0, first, count; k < P; k++) {
        dist_split(E, P, k, &first, &count);
        if (e >= first && e < first + count) owner = (int)k;
    }
    return owner;
}

/* The last expert tensor of the table (skip-gather's), or -1. */
static int64_t last_expert_tensor(const ffn_model *m) {
    int64_t last = -1;
    for (int64_t i = 0; i < ffn_model_num_tensors(m); i++)
        if (ffn_model_tensor_at(m, i)->expert >= 0) last = i;
    return last;
}

ffn_status dist_ep_gather_tensors(ffn_dist *d, const ffn_model *m, float *const *where) {
    const int64_t P = ffn_dist_size(d, FFN_DIST_EP), E = ffn_model_get_config(m)->num_experts;
    const int64_t nt = ffn_model_num_tensors(m);
    const int me = ffn_dist_rank(d, FFN_DIST_EP);
    /* the EP group of world rank 0 (ep rank 0 there); --tp 1: EP group q / P */
    if (P == 1 || ffn_dist_rank(d, FFN_DIST_DP) >= P) return FFN_OK;
    MPI_Comm comm = dist_comm(d, FFN_DIST_EP);
    const int64_t last = last_expert_tensor(m);
    for (int64_t i = 0; i < nt; i++) {
        const ffn_model_tensor *t = ffn_model_tensor_at(m, i);
        if (t->expert < 0 || (i == last && mutate("skip-gather"))) continue;
        const int owner = expert_owner(P, E, t->expert);
        if (owner == 0 || (me != 0 && me != owner)) continue;
        if (!where[i] || t->numel > INT_MAX)
            return ffn_set_error(FFN_ERR_INVALID_ARG, "gathering %s: %s", t->name,
                                 where[i] ? "more than INT_MAX floats" : "no buffer");
        MPI_Request req;
        int rc = me == 0 ? MPI_Irecv(where[i], (int)t->numel, MPI_FLOAT, owner, 11, comm, &req)
                         : MPI_Isend(where[i], (int)t->numel, MPI_FLOAT, 0, 11, comm, &req);
        if (rc != MPI_SUCCESS) return dist_mpi_error(rc, "gathering the experts");
        MPI_Status sts;
        ffn_status st = dist_wait(d, 1, &req, &sts, "gathering the experts for the checkpoint");
        if (st != FFN_OK) return st;
        int got = -1;
        if (me == 0 && (MPI_Get_count(&sts, MPI_FLOAT, &got), got != (int)t->numel))
            return ffn_set_error(FFN_ERR_CONFIG, "gathering %s: rank %d sent %d floats, expected "
                                 "%lld", t->name, owner, got, (long long)t->numel);
    }
    return FFN_OK;
}

/* One tensor to the writer from its owner (the streamed save: every rank
 * calls it for each tensor in the same order): the writer receives into
 * buf, the owner sends buf, the others do nothing. */
ffn_status dist_ep_gather_one(ffn_dist *d, const ffn_model *m, int64_t i, float *buf) {
    const int64_t P = ffn_dist_size(d, FFN_DIST_EP), E = ffn_model_get_config(m)->num_experts;
    const ffn_model_tensor *t = ffn_model_tensor_at(m, i);
    const int me = ffn_dist_rank(d, FFN_DIST_EP);
    if (P == 1 || ffn_dist_rank(d, FFN_DIST_DP) >= P || !t || t->expert < 0) return FFN_OK;
    const int64_t last = last_expert_tensor(m);
    if (i == last && mutate("skip-gather")) return FFN_OK;
    const int owner = expert_owner(P, E, t->expert);
    if (owner == 0 || (me != 0 && me != owner)) return FFN_OK;
    return dist_move_to_writer(d, dist_comm(d, FFN_DIST_EP), owner, me, buf, t,
                               "gathering the experts for the checkpoint");
}

/* Any array laid out like the parameters, consolidated on every rank of
 * the EP group: each expert tensor from its owner, the rest from ep rank 0
 * (a sum of one value and zeros, so the owner's bits). */
ffn_status ffn_dist_ep_gather_flat(ffn_dist *d, const ffn_model *m, const float *src, float *dst) {
    const int64_t E = ffn_model_get_config(m)->num_experts, nt = ffn_model_num_tensors(m);
    const int lead = ffn_dist_rank(d, FFN_DIST_EP) == 0;
    const int64_t n = ffn_model_num_params(m);
    if (ffn_dist_size(d, FFN_DIST_EP) == 1) {
        if (dst != src) memcpy(dst, src, (size_t)n * sizeof *dst);
        return FFN_OK;
    }
    for (int64_t i = 0; i < nt; i++) {
        const ffn_model_tensor *t = ffn_model_tensor_at(m, i);
        int role = ep_role(d, t, E), mine = role > 0 || (role == 0 && lead);
        if (mine && dst != src) memcpy(dst + t->offset, src + t->offset, (size_t)t->numel * sizeof *dst);
        else if (!mine) memset(dst + t->offset, 0, (size_t)t->numel * sizeof *dst);
    }
    return ffn_dist_allreduce_f32(d, FFN_DIST_EP, dst, n);
}
