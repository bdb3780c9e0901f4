/* ep_moe.c -- the expert-parallel MoE layer (see include/ffn/dist.h): a
 * local ffn_moe for routing and combining, an ffn_moe_runner that sends the
 * kept rows to the ranks holding their experts and brings the results back.
 *
 * Buffers grow to the largest call and are kept (no allocation once the
 * sizes are reached). */
#include "dist/dist_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ffn_dist_ep_moe {
    ffn_dist *d;
    ffn_ctx *ctx;
    ffn_moe_config cfg;
    ffn_moe *moe;
    int P, me;                 /* EP group size and rank */
    int64_t E, D, first, count, emax; /* emax = ceil(E / P): counts exchanged per rank */
    ffn_layer **experts;       /* count local experts */
    const ffn_layer_params *grads;
    ffn_layer_params *grad_slots; /* (count) where a model's experts' gradients live */
    /* per call */
    int *scount, *sdispl, *rcount, *rdispl; /* (P) in floats */
    int *cnt_send, *cnt_recv;  /* (P, emax) rows per expert */
    int64_t *local_off;        /* (count + 1) start of each local expert's rows in xin */
    int64_t *pos;              /* (count) regroup's cursors */
    float *discard;            /* backward's dx rows when the caller wants none */
    size_t cap_discard;
    int64_t rows;              /* rows received in the last forward */
    float *recv, *xin, *yout;  /* (rows, D) */
    char *saved;               /* the local experts' saved areas */
    size_t *saved_off;         /* (count) */
    void *ws;
    size_t ws_bytes;
    size_t cap_rows, cap_saved;
    int64_t sent_fwd, sent_bwd;
    MPI_Comm comm;             /* the EP group's (dist.c's; not ours to free) */
    int local;                 /* the EP group is the TP group: same rows everywhere, no exchange */
};

static int grow(void **p, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    void *q = realloc(*p, need);
    if (!q) return 1;
    *p = q;
    *cap = need;
    return 0;
}

static ffn_status runner_forward(void *u, float *out, const float *rows, const int64_t *off);
static ffn_status runner_backward(void *u, float *drows, const float *dy, const int64_t *off);
static ffn_status runner_set_experts(void *u, const ffn_layer_params *experts);

/* own_moe: the layer routes with its own ffn_moe (ffn_dist_ep_moe_create);
 * otherwise it is only the runner of a model's MoE layer (ep_model.c). */
ffn_status dist_ep_moe_create(ffn_dist *d, ffn_ctx *ctx, const ffn_moe_config *cfg, int own_moe,
                              ffn_dist_ep_moe **out) {
    if (!d || !ctx || !cfg || !out)
        return ffn_set_error(FFN_ERR_INVALID_ARG, "ffn_dist_ep_moe_create: NULL argument");
    *out = NULL;
    ffn_status st = ffn_moe_config_validate(cfg);
    if (st != FFN_OK) return st;
    const int P = ffn_dist_size(d, FFN_DIST_EP);
    if (cfg->num_experts < P)
        return ffn_set_error(FFN_ERR_CONFIG,
                             "expert parallel: --ep %d is larger than the %lld experts", P,
                             (long long)cfg->num_experts);
    ffn_dist_ep_moe *l = calloc(1, sizeof *l);
    if (!l) return ffn_set_error(FFN_ERR_NOMEM, "out of memory");
    l->d = d, l->ctx = ctx, l->cfg = *cfg, l->P = P, l->me = ffn_dist_rank(d, FFN_DIST_EP);
    l->E = cfg->num_experts, l->D = cfg->hidden_size, l->emax = (l->E + P - 1) / P;
    dist_split(l->E, P, l->me, &l->first, &l->count);
    l->experts = calloc((size_t)l->count, sizeof *l->experts);
    l->grad_slots = calloc((size_t)l->count, sizeof *l->grad_slots);
    l->scount = calloc((size_t)P * 4, sizeof(int));
    l->cnt_send = calloc((size_t)(P * l->emax) * 2, sizeof(int));
    l->local_off = calloc((size_t)l->count + 1, sizeof(int64_t));
    l->saved_off = calloc((size_t)l->count, sizeof(size_t));
    l->pos = calloc((size_t)l->count + 1, sizeof(int64_t));
    l->comm = dist_comm(d, FFN_DIST_EP);
    l->local = !own_moe && dist_tp_ep(d); /* a model runner in the TP group */
    st = !l->experts || !l->grad_slots || !l->scount || !l->cnt_send || !l->local_off || !l->saved_off || !l->pos
             ? ffn_set_error(FFN_ERR_NOMEM, "out of memory")
             : FFN_OK;
    if (st == FFN_OK) {
        l->sdispl = l->scount + P, l->rcount = l->scount + 2 * P, l->rdispl = l->scount + 3 * P;
        l->cnt_recv = l->cnt_send + P * l->emax;
        if (own_moe) st = ffn_moe_create(ctx, cfg, &l->moe);
    }
    ffn_layer_config lc = ffn_moe_expert_config(cfg, 0);
    for (int64_t j = 0; st == FFN_OK && j < l->count; j++) st = ffn_layer_create(ctx, &lc, &l->experts[j]);
    ffn_moe_runner r = {runner_forward, runner_backward, l, NULL};
    if (st == FFN_OK && own_moe) st = ffn_moe_set_runner(l->moe, &r);
    if (st != FFN_OK) {
        ffn_dist_ep_moe_free(l);
        return st;
    }
    *out = l;
    return FFN_OK;
}

ffn_status ffn_dist_ep_moe_create(ffn_dist *d, ffn_ctx *ctx, const ffn_moe_config *cfg,
                                  ffn_dist_ep_moe **out) {
    return dist_ep_moe_create(d, ctx, cfg, 1, out);
}

ffn_layer_params *dist_ep_moe_grad_slots(ffn_dist_ep_moe *l) { return l->grad_slots; }

ffn_moe_runner dist_ep_moe_runner(ffn_dist_ep_moe *l) {
    ffn_moe_runner r = {runner_forward, runner_backward, l, runner_set_experts};
    return r;
}

/* The model's expert weights changed (ffn_moe_set_weights): point this
 * rank's experts at theirs. */
static ffn_status runner_set_experts(void *u, const ffn_layer_params *experts) {
    ffn_dist_ep_moe *l = u;
    for (int64_t j = 0; j < l->count; j++) {
        ffn_status st = ffn_layer_set_weights(l->experts[j], &experts[l->first + j]);
        if (st != FFN_OK) return ffn_set_error(st, "experts.%lld: %s", (long long)(l->first + j), ffn_last_error());
    }
    return FFN_OK;
}

void ffn_dist_ep_moe_free(ffn_dist_ep_moe *l) {
    if (!l) return;
    for (int64_t j = 0; l->experts && j < l->count; j++) ffn_layer_free(l->experts[j]);
    free(l->experts);
    free(l->grad_slots);
    ffn_moe_free(l->moe);
    free(l->scount), free(l->cnt_send), free(l->local_off), free(l->saved_off), free(l->pos);
    free(l->discard);
    free(l->recv), free(l->xin), free(l->yout), free(l->saved), free(l->ws);
    free(l);
}

void ffn_dist_ep_moe_experts(const ffn_dist_ep_moe *l, int64_t *first, int64_t *count) {
    if (first) *first = l->first;
    if (count) *count = l->count;
}

ffn_moe *ffn_dist_ep_moe_layer(ffn_dist_ep_moe *l) { return l->moe; }

ffn_status ffn_dist_ep_moe_set_weights(ffn_dist_ep_moe *l, const ffn_moe_params *w) {
    if (!w || !w->experts)
        return ffn_set_error(FFN_ERR_MISSING, "expert parallel: the expert weights are missing");
    for (int64_t j = 0; j < l->count; j++) {
        ffn_status st = ffn_layer_set_weights(l->experts[j], &w->experts[l->first + j]);
        if (st != FFN_OK) return st;
    }
    ffn_moe_params mine = *w;
    mine.experts = NULL; /* routed experts run here, through the runner */
    return ffn_moe_set_weights(l->moe, &mine);
}

void ffn_dist_ep_moe_set_expert_grads(ffn_dist_ep_moe *l, const ffn_layer_params *g) { l->grads = g; }

void ffn_dist_ep_moe_bytes_sent(const ffn_dist_ep_moe *l, int64_t *fwd, int64_t *bwd) {
    if (fwd) *fwd = l->sent_fwd;
    if (bwd) *bwd = l->sent_bwd;
}


/* Send `rows` (grouped by expert, offsets off) to the experts' ranks and
 * receive this rank's rows into l->recv; with `counts`, exchange the row
 * counts first and lay out the local experts' blocks.  Returns the bytes
 * sent to other ranks in *sent. */
static ffn_status dispatch(ffn_dist_ep_moe *l, const float *rows, const int64_t *off, int counts,
                           int64_t *sent) {
    const int P = l->P;
    const int64_t D = l->D;
    *sent = 0;
    if (counts) {
        for (int p = 0; p < P; p++) {
            int64_t f, c;
            dist_split(l->E, P, p, &f, &c);
            for (int64_t j = 0; j < l->emax; j++) {
                int64_t n = j < c ? off[f + j + 1] - off[f + j] : 0;
                if (n > INT_MAX / D) return ffn_set_error(FFN_ERR_OVERFLOW, "expert parallel: %lld rows", (long long)n);
                l->cnt_send[p * l->emax + j] = (int)n;
            }
        }
        MPI_Request req;
        const char *what = "expert parallel: MPI_Alltoall of the counts";
        int rc = MPI_Ialltoall(l->cnt_send, (int)l->emax, MPI_INT, l->cnt_recv, (int)l->emax, MPI_INT,
                               l->comm, &req);
        if (rc != MPI_SUCCESS) return dist_mpi_error(rc, what);
        ffn_status st = dist_wait(l->d, 1, &req, NULL, what);
        if (st != FFN_OK) return st;
        *sent += (int64_t)(P - 1) * l->emax * (int64_t)sizeof(int);
        int64_t rtot = 0;
        for (int p = 0; p < P; p++) {
            int64_t f, c, s = 0, r = 0;
            dist_split(l->E, P, p, &f, &c);
            for (int64_t j = 0; j < c; j++) s += l->cnt_send[p * l->emax + j];
            for (int64_t j = 0; j < l->count; j++) r += l->cnt_recv[p * l->emax + j];
            if (s * D > INT_MAX || r * D > INT_MAX || (off[f] * D) > INT_MAX || rtot * D > INT_MAX)
                return ffn_set_error(FFN_ERR_OVERFLOW, "expert parallel: a message of more than 2^31 values");
            l->scount[p] = (int)(s * D), l->sdispl[p] = (int)(off[f] * D);
            l->rcount[p] = (int)(r * D), l->rdispl[p] = (int)(rtot * D);
            rtot += r;
        }
        l->rows = rtot;
        l->local_off[0] = 0;
        for (int64_t j = 0; j < l->count; j++) {
            int64_t n = 0;
            for (int p = 0; p < P; p++) n += l->cnt_recv[p * l->emax + j];
            l->local_off[j + 1] = l->local_off[j] + n;
        }
        size_t need = (size_t)(rtot ? rtot : 1) * (size_t)D * sizeof(float);
        if (need > l->cap_rows) {
            size_t c1 = l->cap_rows, c2 = l->cap_rows, c3 = l->cap_rows;
            if (grow((void **)&l->recv, &c1, need) || grow((void **)&l->xin, &c2, need) ||
                grow((void **)&l->yout, &c3, need))
                return ffn_set_error(FFN_ERR_NOMEM, "expert parallel: out of memory for %lld rows", (long long)rtot);
            l->cap_rows = need;
        }
    }
    MPI_Request req;
    const char *what = "expert parallel: MPI_Alltoallv of the rows";
    int rc = MPI_Ialltoallv(rows, l->scount, l->sdispl, MPI_FLOAT, l->recv, l->rcount, l->rdispl,
                            MPI_FLOAT, l->comm, &req);
    if (rc != MPI_SUCCESS) return dist_mpi_error(rc, what);
    ffn_status st = dist_wait(l->d, 1, &req, NULL, what);
    if (st != FFN_OK) return st;
    for (int p = 0; p < P; p++)
        if (p != l->me) *sent += (int64_t)l->scount[p] * (int64_t)sizeof(float);
    return FFN_OK;
}

/* recv (by source rank, then local expert) <-> xin (by local expert, then
 * source rank). */
static void regroup(ffn_dist_ep_moe *l, float *dst, const float *src, int to_expert) {
    const int64_t D = l->D;
    int64_t r = 0; /* row in the received layout */
    int64_t *pos = l->pos; /* walk each expert's block in source order */
    for (int64_t j = 0; j < l->count; j++) pos[j] = l->local_off[j];
    for (int p = 0; p < l->P; p++)
        for (int64_t j = 0; j < l->count; j++) {
            int64_t n = l->cnt_recv[p * l->emax + j];
            const float *s = to_expert ? src + r * D : src + pos[j] * D;
            float *t = to_expert ? dst + pos[j] * D : dst + r * D;
            memcpy(t, s, (size_t)(n * D) * sizeof(float));
            pos[j] += n;
            r += n;
        }
}

/* Return rows from l->recv's layout (in `back`) to their senders' `out`. */
static ffn_status give_back(ffn_dist_ep_moe *l, const float *back, float *out, int64_t *sent) {
    MPI_Request req;
    const char *what = "expert parallel: MPI_Alltoallv of the results";
    int rc = MPI_Ialltoallv(back, l->rcount, l->rdispl, MPI_FLOAT, out, l->scount, l->sdispl,
                            MPI_FLOAT, l->comm, &req);
    if (rc != MPI_SUCCESS) return dist_mpi_error(rc, what);
    ffn_status st = dist_wait(l->d, 1, &req, NULL, what);
    if (st != FFN_OK) return st;
    for (int p = 0; p < l->P; p++)
        if (p != l->me) *sent += (int64_t)l->rcount[p] * (int64_t)sizeof(float);
    return FFN_OK;
}

/* Experts spread over the tensor-parallel group (dist_tp_ep): every rank
 * has every row, so it takes its experts' blocks in place, leaves the
 * other experts' outputs (and dx) zero, and the model's reducer sums the
 * layer's output (dx) over the group as it does for split experts. */
static ffn_status local_rows(ffn_dist_ep_moe *l, const float *rows, const int64_t *off) {
    const int64_t D = l->D, base = off[l->first];
    for (int64_t j = 0; j <= l->count; j++) l->local_off[j] = off[l->first + j] - base;
    l->rows = l->local_off[l->count];
    size_t need = (size_t)(l->rows ? l->rows : 1) * (size_t)D * sizeof(float);
    if (need > l->cap_rows) {
        size_t c1 = l->cap_rows, c2 = l->cap_rows, c3 = l->cap_rows;
        if (grow((void **)&l->recv, &c1, need) || grow((void **)&l->xin, &c2, need) ||
            grow((void **)&l->yout, &c3, need))
            return ffn_set_error(FFN_ERR_NOMEM, "expert parallel: out of memory for %lld rows",
                                 (long long)l->rows);
        l->cap_rows = need;
    }
    if (rows) memcpy(l->xin, rows + base * D, (size_t)(l->rows * D) * sizeof(float));
    return FFN_OK;
}

static ffn_status runner_forward(void *u, float *out, const float *rows, const int64_t *off) {
    ffn_dist_ep_moe *l = u;
    const int64_t D = l->D;
    int64_t sent = 0, more = 0;
    ffn_status st = l->local ? local_rows(l, rows, off) : dispatch(l, rows, off, 1, &sent);
    if (st != FFN_OK) return st;
    if (!l->local) regroup(l, l->xin, l->recv, 1);
    /* saved areas and the workspace for this call's blocks */
    size_t total = 0, ws = 0;
    for (int64_t j = 0; j < l->count; j++) {
        int64_t n = l->local_off[j + 1] - l->local_off[j];
        l->saved_off[j] = total;
        total += (ffn_layer_saved_size(l->experts[j], n) + 63) & ~(size_t)63;
        size_t w = ffn_layer_workspace_size(l->experts[j], n);
        if (w > ws) ws = w;
    }
    if (grow((void **)&l->saved, &l->cap_saved, total + 64) || grow(&l->ws, &l->ws_bytes, ws + 64))
        return ffn_set_error(FFN_ERR_NOMEM, "expert parallel: out of memory (saved areas)");
    for (int64_t j = 0; j < l->count && st == FFN_OK; j++) {
        int64_t r0 = l->local_off[j], n = l->local_off[j + 1] - r0;
        if (n == 0) continue;
        st = ffn_layer_forward(l->experts[j], l->yout + r0 * D, l->xin + r0 * D, n,
                               (float *)(l->saved + l->saved_off[j]), l->ws, l->ws_bytes);
        if (st != FFN_OK) st = ffn_set_error(st, "experts.%lld: %s", (long long)(l->first + j), ffn_last_error());
    }
    if (l->local) {
        const int64_t E = l->E, b = off[l->first], e = off[l->first + l->count];
        memset(out, 0, (size_t)(b * D) * sizeof(float));
        memcpy(out + b * D, l->yout, (size_t)((e - b) * D) * sizeof(float));
        memset(out + e * D, 0, (size_t)((off[E] - e) * D) * sizeof(float));
        l->sent_fwd = 0;
        return st;
    }
    /* every rank takes part in the way back even after a local failure: a
     * failing rank still answers, so no rank waits forever */
    regroup(l, l->recv, l->yout, 0);
    ffn_status st2 = give_back(l, l->recv, out, &more);
    l->sent_fwd = sent + more;
    return st != FFN_OK ? st : st2;
}

static ffn_status runner_backward(void *u, float *drows, const float *dy, const int64_t *off) {
    ffn_dist_ep_moe *l = u;
    static const ffn_layer_params none = {0};
    const int64_t D = l->D;
    float *dst = drows;
    if (!dst) { /* not wanted: received into a scratch block */
        size_t need = (size_t)(off[l->E] ? off[l->E] : 1) * (size_t)D * sizeof(float);
        if (grow((void **)&l->discard, &l->cap_discard, need))
            return ffn_set_error(FFN_ERR_NOMEM, "expert parallel: out of memory");
        dst = l->discard;
    }
    int64_t sent = 0, more = 0;
    ffn_status st = FFN_OK;
    if (l->local) /* yout: w·dy of this rank's experts */
        memcpy(l->yout, dy + off[l->first] * D, (size_t)(l->rows * D) * sizeof(float));
    else {
        st = dispatch(l, dy, off, 0, &sent); /* the same counts as the forward */
        if (st != FFN_OK) return st;
        regroup(l, l->yout, l->recv, 1); /* yout: w·dy by expert */
    }
    for (int64_t j = 0; j < l->count && st == FFN_OK; j++) {
        int64_t r0 = l->local_off[j], n = l->local_off[j + 1] - r0;
        if (n == 0) continue;
        const ffn_layer_params *g = l->grads ? &l->grads[j] : &none;
        /* dx of the block overwrites its x (xin is not needed after this) */
        st = ffn_layer_backward(l->experts[j], l->recv + r0 * D, g, l->yout + r0 * D,
                                l->xin + r0 * D, n, (const float *)(l->saved + l->saved_off[j]),
                                l->ws, l->ws_bytes);
        if (st != FFN_OK) st = ffn_set_error(st, "experts.%lld: %s", (long long)(l->first + j), ffn_last_error());
    }
    if (l->local) {
        const int64_t E = l->E, b = off[l->first], e = off[l->first + l->count];
        memset(dst, 0, (size_t)(b * D) * sizeof(float));
        memcpy(dst + b * D, l->recv, (size_t)((e - b) * D) * sizeof(float));
        memset(dst + e * D, 0, (size_t)((off[E] - e) * D) * sizeof(float));
        l->sent_bwd = 0;
        return st;
    }
    regroup(l, l->xin, l->recv, 0);
    ffn_status st2 = give_back(l, l->xin, dst, &more);
    l->sent_bwd = sent + more;
    return st != FFN_OK ? st : st2;
}
