/* tp_model.c -- the tensor-parallel model (see include/ffn/dist.h): a
 * rank's model is an ordinary ffn_model of the rank's heads and units,
 * sliced from the full model by the tensor table, whose attention and FFN
 * outputs (forward) and input gradients (backward) are summed over the tp
 * group by the model's reducer hook. */
#include "dist/dist_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* Biases added after the sum: tp rank 0 holds them, the others zeros. */
static int after_sum_bias(const char *name) {
    return ends_with(name, "self_attn.o_proj.bias") || ends_with(name, "down_proj.bias");
}

/* With dist_tp_ep: 1 for an expert tensor (held whole by its owner), 0
 * otherwise; *mine says whether this rank owns it. */
static int whole_expert(const ffn_dist *d, const ffn_model_tensor *t, int64_t E, int *mine) {
    if (!dist_tp_ep(d) || t->expert < 0) return 0;
    int64_t first, count;
    dist_split(E, ffn_dist_size(d, FFN_DIST_TP), ffn_dist_rank(d, FFN_DIST_TP), &first, &count);
    if (mine) *mine = t->expert >= first && t->expert < first + count;
    return 1;
}

ffn_status ffn_dist_tp_model_config(ffn_dist *d, const ffn_model_config *full,
                                    ffn_model_config *out) {
    const int64_t P = ffn_dist_size(d, FFN_DIST_TP), k = ffn_dist_rank(d, FFN_DIST_TP);
    ffn_model_config c = *full;
    if (full->num_attention_heads % P)
        return ffn_set_error(FFN_ERR_CONFIG, "--tp %lld does not divide the %lld attention heads",
                             (long long)P, (long long)full->num_attention_heads);
    if (full->num_key_value_heads % P)
        return ffn_set_error(FFN_ERR_CONFIG,
                             "--tp %lld does not divide the %lld key/value heads (a GQA group "
                             "stays on one rank)", (long long)P,
                             (long long)full->num_key_value_heads);
    const int by_expert = dist_tp_ep(d);
    if (by_expert && full->num_experts < P)
        return ffn_set_error(FFN_ERR_CONFIG, "--tp %lld --ep %lld is larger than the %lld experts "
                             "(each rank of the tensor-parallel group holds at least one)",
                             (long long)P, (long long)P, (long long)full->num_experts);
    /* MoE layers, Megatron style: every expert (and the shared expert)
     * split by units like a dense FFN; the router is replicated, so every
     * rank routes alike.  Its gradient (and dx) from each rank's partial
     * expert outputs is a part to be summed; the aux and z losses, which
     * every rank would compute whole, count on tp rank 0 only.  With --ep
     * T (dist_tp_ep) the routed experts stay whole, each on one rank of the
     * group (its runner computes them; the others' outputs are zero there),
     * and the same sums hold; the shared expert is split by units still. */
    if (full->num_experts > 0 && k != 0) c.router_aux_loss_coef = c.router_z_loss_coef = 0.0;
    if (full->qk_norm == FFN_QK_NORM_FULL && P > 1)
        return ffn_set_error(FFN_ERR_UNSUPPORTED,
                             "--tp %lld: a q/k norm over the whole projection (olmoe) needs the "
                             "sum of squares of every rank's heads; not in this build", (long long)P);
    int64_t dh = full->head_dim ? full->head_dim : full->hidden_size / full->num_attention_heads;
    c.num_attention_heads /= P;
    c.num_key_value_heads /= P;
    c.head_dim = dh;
    int64_t f0;
    struct { const char *name; int64_t *v; } w[] = {
        {"intermediate_size", &c.intermediate_size},
        {"moe_intermediate_size", &c.moe_intermediate_size},
        {"shared_expert_intermediate_size", &c.shared_expert_intermediate_size}};
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        if (*w[i].v == 0 || (by_expert && i == 1)) continue;
        if (*w[i].v < P)
            return ffn_set_error(FFN_ERR_CONFIG, "--tp %lld is larger than %s %lld", (long long)P,
                                 w[i].name, (long long)*w[i].v);
        dist_split(*w[i].v, P, k, &f0, w[i].v);
    }
    if (!full->moe_intermediate_size && full->num_experts > 0 && by_expert)
        c.moe_intermediate_size = full->intermediate_size; /* whole experts */
    else if (!full->moe_intermediate_size && full->num_experts > 0) { /* experts of intermediate_size */
        int64_t cnt;
        dist_split(full->intermediate_size, P, k, &f0, &cnt);
        c.moe_intermediate_size = cnt;
    }
    *out = c;
    return FFN_OK;
}

/* Copy tensor t of the rank's model out of the full model's f. */
static ffn_status slice_one(const ffn_model_tensor *t, const float *src, const ffn_model_tensor *f,
                            float *dst, int64_t P, int64_t k) {
    if (t->shape[0] == f->shape[0] && t->shape[1] == f->shape[1]) {
        if (after_sum_bias(t->name) && k != 0) memset(dst, 0, (size_t)t->numel * sizeof *dst);
        else memcpy(dst, src, (size_t)t->numel * sizeof *dst);
        return FFN_OK;
    }
    int64_t first, count;
    if (t->shape[1] == f->shape[1]) { /* rows: q/k/v, gate/up (+ their biases) */
        dist_split(f->shape[0], P, k, &first, &count);
        if (count != t->shape[0]) goto bad;
        memcpy(dst, src + first * f->shape[1], (size_t)t->numel * sizeof *dst);
        return FFN_OK;
    }
    if (t->shape[0] == f->shape[0]) { /* columns: o_proj, down_proj */
        dist_split(f->shape[1], P, k, &first, &count);
        if (count != t->shape[1]) goto bad;
        for (int64_t r = 0; r < t->shape[0]; r++)
            memcpy(dst + r * count, src + r * f->shape[1] + first, (size_t)count * sizeof *dst);
        return FFN_OK;
    }
bad:
    return ffn_set_error(FFN_ERR_SHAPE, "tensor parallel: %s is (%lld, %lld) on this rank and "
                         "(%lld, %lld) in the full model: no slice of %lld ranks fits",
                         t->name, (long long)t->shape[0], (long long)t->shape[1],
                         (long long)f->shape[0], (long long)f->shape[1], (long long)P);
}

ffn_status ffn_dist_tp_slice_flat(ffn_dist *d, const ffn_model *full, const float *src,
                                  const ffn_model *rank_model, float *dst) {
    const int64_t P = ffn_dist_size(d, FFN_DIST_TP), k = ffn_dist_rank(d, FFN_DIST_TP);
    for (int64_t i = 0; i < ffn_model_num_tensors(rank_model); i++) {
        const ffn_model_tensor *t = ffn_model_tensor_at(rank_model, i),
                               *f = ffn_model_find_tensor(full, t->name);
        if (f && f->numel == t->numel && whole_expert(d, t, ffn_model_get_config(full)->num_experts, NULL)) {
            memcpy(dst + t->offset, src + f->offset, (size_t)t->numel * sizeof *dst);
            continue;
        }
        ffn_status st = f ? slice_one(t, src + f->offset, f, dst + t->offset, P, k)
                          : ffn_set_error(FFN_ERR_INTERNAL,
                                          "tensor parallel: %s is not in the full model", t->name);
        if (st != FFN_OK) return st;
    }
    return FFN_OK;
}

static ffn_status reduce_hook(void *u, float *buf, int64_t n) {
    return ffn_dist_allreduce_f32(u, FFN_DIST_TP, buf, n);
}

ffn_status ffn_dist_tp_model_create(ffn_dist *d, ffn_ctx *ctx, ffn_model *full,
                                    const ffn_model_options *opt, ffn_model **out) {
    if (!d || !ctx || !full || !out)
        return ffn_set_error(FFN_ERR_INVALID_ARG, "ffn_dist_tp_model_create: NULL argument");
    *out = NULL;
    ffn_model_config c;
    ffn_status st = ffn_dist_tp_model_config(d, ffn_model_get_config(full), &c);
    if (st != FFN_OK) return st;
    ffn_model *m = NULL;
    st = ffn_model_create(ctx, &c, opt, &m);
    if (st != FFN_OK) return st;
    st = ffn_dist_tp_slice_flat(d, full, ffn_model_params(full, NULL), m, ffn_model_params(m, NULL));
    ffn_model_reducer r = {reduce_hook, d};
    if (st == FFN_OK) st = ffn_model_set_reducer(m, &r);
    if (st == FFN_OK && dist_tp_ep(d)) st = dist_ep_install_runners(d, ctx, m);
    if (st == FFN_OK) st = ffn_model_params_changed(m);
    if (st != FFN_OK) {
        ffn_model_free(m);
        return st;
    }
    *out = m;
    return FFN_OK;
}

/* The inverse of slice_one, into a zeroed full-size tensor (replicated
 * tensors from tp rank 0 only), so that a sum over the group rebuilds it. */
static void unslice_one(const ffn_model_tensor *t, const float *src, const ffn_model_tensor *f,
                        float *dst, int64_t P, int64_t k) {
    int64_t first, count;
    if (t->shape[0] == f->shape[0] && t->shape[1] == f->shape[1]) {
        if (k == 0) memcpy(dst, src, (size_t)t->numel * sizeof *dst);
    } else if (t->shape[1] == f->shape[1]) {
        dist_split(f->shape[0], P, k, &first, &count);
        memcpy(dst + first * f->shape[1], src, (size_t)t->numel * sizeof *dst);
    } else {
        dist_split(f->shape[1], P, k, &first, &count);
        for (int64_t r = 0; r < t->shape[0]; r++)
            memcpy(dst + r * f->shape[1] + first, src + r * count, (size_t)count * sizeof *dst);
    }
}

/* Replicated weights whose gradient is a sum over the group: each rank
 * holds the part from its own heads (q/k norms) or from its units of the
 * experts (the router, the shared expert's gate). */
static int summed_over_heads(const char *name) {
    return ends_with(name, "self_attn.q_norm.weight") || ends_with(name, "self_attn.k_norm.weight") ||
           ends_with(name, "mlp.gate.weight") || ends_with(name, "mlp.shared_expert_gate.weight");
}

ffn_status ffn_dist_tp_model_sync_grads(ffn_dist *d, ffn_model *m) {
    const int64_t k = ffn_dist_rank(d, FFN_DIST_TP), E = ffn_model_get_config(m)->num_experts;
    float *g = ffn_model_grads(m, NULL);
    if (!g) return ffn_set_error(FFN_ERR_INVALID_ARG, "tensor parallel: the model has no gradients");
    for (int64_t i = 0; i < ffn_model_num_tensors(m); i++) {
        const ffn_model_tensor *t = ffn_model_tensor_at(m, i);
        if (whole_expert(d, t, E, NULL)) continue; /* its owner's; zero elsewhere */
        if (summed_over_heads(t->name)) {
            ffn_status st = ffn_dist_allreduce_f32(d, FFN_DIST_TP, g + t->offset, t->numel);
            if (st != FFN_OK) return st;
        } else if (after_sum_bias(t->name) && k != 0) {
            memset(g + t->offset, 0, (size_t)t->numel * sizeof *g); /* stays zero here */
        }
    }
    return FFN_OK;
}

ffn_status ffn_dist_tp_gather_flat(ffn_dist *d, const ffn_model *rank_model, const float *src,
                                   const ffn_model *full, float *dst) {
    const int64_t P = ffn_dist_size(d, FFN_DIST_TP), k = ffn_dist_rank(d, FFN_DIST_TP);
    int64_t n = ffn_model_num_params(full);
    memset(dst, 0, (size_t)n * sizeof *dst);
    for (int64_t i = 0; i < ffn_model_num_tensors(rank_model); i++) {
        const ffn_model_tensor *t = ffn_model_tensor_at(rank_model, i),
                               *f = ffn_model_find_tensor(full, t->name);
        if (!f) return ffn_set_error(FFN_ERR_INTERNAL, "tensor parallel: %s is not in the full model", t->name);
        int mine = 0;
        if (whole_expert(d, t, ffn_model_get_config(full)->num_experts, &mine)) {
            if (mine) memcpy(dst + f->offset, src + t->offset, (size_t)t->numel * sizeof *dst);
            continue;
        }
        unslice_one(t, src + t->offset, f, dst + f->offset, P, k);
    }
    return ffn_dist_allreduce_f32(d, FFN_DIST_TP, dst, n);
}

ffn_status ffn_dist_tp_model_gather(ffn_dist *d, ffn_model *rank_model, ffn_model *full,
                                    int grads) {
    float *dst = grads ? ffn_model_grads(full, NULL) : ffn_model_params(full, NULL);
    const float *src = grads ? ffn_model_grads(rank_model, NULL) : ffn_model_params(rank_model, NULL);
    if (!dst || !src) return ffn_set_error(FFN_ERR_INVALID_ARG, "tensor parallel: no gradients to gather");
    ffn_status st = ffn_dist_tp_gather_flat(d, rank_model, src, full, dst);
    if (st == FFN_OK && !grads) st = ffn_model_params_changed(full);
    return st;
}

/* The squares of [lo, hi) of the rank's block, each tensor weighted as its
 * sum over the TP group needs (this rank's sum, not yet reduced). */
static double tp_sq_part(ffn_dist *d, const ffn_model *rank_model, const ffn_model *full,
                         const float *g, int64_t lo, int64_t hi) {
    const int64_t P = ffn_dist_size(d, FFN_DIST_TP);
    double s = 0;
    for (int64_t i = 0; i < ffn_model_num_tensors(rank_model); i++) {
        const ffn_model_tensor *t = ffn_model_tensor_at(rank_model, i),
                               *f = ffn_model_find_tensor(full, t->name);
        int64_t a = t->offset > lo ? t->offset : lo;
        int64_t b = t->offset + t->numel < hi ? t->offset + t->numel : hi;
        if (b <= a) continue;
        double part = 0;
        for (int64_t j = a; j < b; j++) part += (double)g[j] * g[j];
        /* a tensor every rank holds whole counts once: 1/P of it on each */
        int replicated = f && f->numel == t->numel && !after_sum_bias(t->name) &&
                         !whole_expert(d, t, ffn_model_get_config(full)->num_experts, NULL);
        s += replicated ? part / (double)P : part;
    }
    return s;
}

ffn_status ffn_dist_tp_grad_sq(ffn_dist *d, const ffn_model *rank_model, const ffn_model *full,
                               const float *g, double *sq) {
    double s = tp_sq_part(d, rank_model, full, g, 0, ffn_model_num_params(rank_model));
    ffn_status st = ffn_dist_allreduce_f64(d, FFN_DIST_TP, &s, 1);
    *sq = s;
    return st;
}

ffn_status dist_tp_grad_sq_range(ffn_dist *d, const ffn_model *rank_model, const ffn_model *full,
                                 const float *g, int64_t lo, int64_t hi, double *sq) {
    double s = tp_sq_part(d, rank_model, full, g, lo, hi);
    ffn_status st = ffn_dist_allreduce_f64(d, FFN_DIST_WORLD, &s, 1);
    *sq = s;
    return st;
}
