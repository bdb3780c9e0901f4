/* pp_model.c -- pipeline stages (ffn train --pp P; see include/ffn/dist.h):
 * the layers split over the P stages (the uneven split of L), the
 * embedding on stage 0, the final norm and the head on the last; a step's
 * micro-batches (--grad-accum) in a 1F1B schedule, the residual stream
 * sent forward and its gradient back with MPI point-to-point.  A stage
 * keeps the whole model's layout in place (the trainer's sharded state:
 * parameters, gradients and moments of the tensors it holds only), so
 * the checkpoints take each tensor from its stage as with --ep. */
#include "dist/dist_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* The stage that owns tensor t of m: its layer's, the embedding stage 0's,
 * the final norm and head the last stage's.  A tied head's embedding lives
 * on stage 0 and, as the head, on the last stage too (held_tied). */
static int64_t owner_stage(const ffn_dist *d, const ffn_model *m, const ffn_model_tensor *t) {
    const int64_t P = ffn_dist_size(d, FFN_DIST_PP);
    if (t->layer >= 0) {
        const int64_t L = ffn_model_get_config(m)->num_hidden_layers;
        for (int64_t s = 0; s < P; s++) {
            int64_t first, count;
            dist_split(L, P, s, &first, &count);
            if (t->layer >= first && t->layer < first + count) return s;
        }
        return P - 1;
    }
    return !strncmp(t->name, "model.embed", 11) ? 0 : P - 1;
}

static int tied_embedding(const ffn_model *m, const ffn_model_tensor *t) {
    return ffn_model_get_config(m)->tie_word_embeddings &&
           !strcmp(t->name, "model.embed_tokens.weight");
}

void dist_pp_layers(const ffn_dist *d, int64_t L, int64_t *l0, int64_t *l1) {
    int64_t first, count;
    dist_split(L, ffn_dist_size(d, FFN_DIST_PP), ffn_dist_rank(d, FFN_DIST_PP), &first, &count);
    *l0 = first;
    *l1 = first + count;
}

ffn_status dist_pp_check(ffn_dist *d, const ffn_model_config *cfg) {
    const int64_t P = ffn_dist_size(d, FFN_DIST_PP), L = cfg->num_hidden_layers;
    if (P > L)
        return ffn_set_error(FFN_ERR_CONFIG, "--pp %lld needs at least %lld layers; the model "
                             "has %lld", (long long)P, (long long)P, (long long)L);
    return FFN_OK;
}

ffn_status ffn_dist_pp_model_check(ffn_dist *d, const ffn_model_config *cfg) {
    return dist_pp_check(d, cfg);
}

int dist_pp_holds(const ffn_dist *d, const ffn_model *m, int64_t i) {
    const ffn_model_tensor *t = ffn_model_tensor_at(m, i);
    const int64_t s = ffn_dist_rank(d, FFN_DIST_PP), P = ffn_dist_size(d, FFN_DIST_PP);
    if (!t) return 0;
    return owner_stage(d, m, t) == s || (tied_embedding(m, t) && s == P - 1);
}

/* Each tensor from its stage's first rank (inner rank 0: the writer's
 * place in that stage) to world rank 0. */
ffn_status dist_pp_gather_tensors(ffn_dist *d, const ffn_model *m, float *const *where) {
    const int64_t nt = ffn_model_num_tensors(m), inner = ffn_dist_size(d, FFN_DIST_WORLD) /
                                                         ffn_dist_size(d, FFN_DIST_PP);
    const int me = ffn_dist_rank(d, FFN_DIST_WORLD);
    MPI_Request *req = malloc(((size_t)nt + 1) * sizeof *req);
    if (!req) return ffn_set_error(FFN_ERR_NOMEM, "out of memory");
    int n = 0;
    ffn_status st = FFN_OK;
    for (int64_t i = 0; i < nt && st == FFN_OK; i++) {
        const ffn_model_tensor *t = ffn_model_tensor_at(m, i);
        const int src = (int)(owner_stage(d, m, t) * inner);
        if (src == 0 || !where[i] || (me != 0 && me != src)) continue;
        if (t->numel > INT_MAX) {
            st = ffn_set_error(FFN_ERR_UNSUPPORTED, "--pp: %s has %lld floats, more than one "
                               "message takes", t->name, (long long)t->numel);
            break;
        }
        int rc = me == 0 ? MPI_Irecv(where[i], (int)t->numel, MPI_FLOAT, src, (int)(i % 32768),
                                     dist_comm(d, FFN_DIST_WORLD), &req[n])
                         : MPI_Isend(where[i], (int)t->numel, MPI_FLOAT, 0, (int)(i % 32768),
                                     dist_comm(d, FFN_DIST_WORLD), &req[n]);
        if (rc != MPI_SUCCESS) st = dist_mpi_error(rc, "--pp: the checkpoint's tensors");
        else n++;
    }
    if (n > 0) {
        ffn_status ws = dist_wait(d, n, req, NULL, "--pp: the checkpoint's tensors");
        if (st == FFN_OK) st = ws;
    }
    free(req);
    return st;
}

/* One tensor from its stage's first rank to world rank 0 (the streamed
 * save: every rank calls it for each tensor in the same order). */
ffn_status dist_pp_gather_one(ffn_dist *d, const ffn_model *m, int64_t i, float *buf) {
    const ffn_model_tensor *t = ffn_model_tensor_at(m, i);
    if (!t) return FFN_OK;
    const int me = ffn_dist_rank(d, FFN_DIST_WORLD);
    const int src = (int)(owner_stage(d, m, t) * (ffn_dist_size(d, FFN_DIST_WORLD) /
                                                  ffn_dist_size(d, FFN_DIST_PP)));
    if (src == 0 || (me != 0 && me != src)) return FFN_OK;
    return dist_move_to_writer(d, dist_comm(d, FFN_DIST_WORLD), src, me, buf, t,
                               "--pp: the checkpoint's tensors");
}

/* --zero 1 (the trainer's held_group): every tensor a stage holds is
 * replicated over the stage's dp group (group 0).  FFN_DIST_MUTATE=
 * zero-held-owner: the part of another rank of the group. */
int dist_pp_held_group(void *u, const ffn_model *m, int64_t i, int64_t *rank, int64_t *size) {
    const ffn_dist *d = u;
    (void)m, (void)i;
    const int64_t P = ffn_dist_size(d, FFN_DIST_DP), r = ffn_dist_rank(d, FFN_DIST_DP);
    const char *mu = getenv("FFN_DIST_MUTATE");
    *rank = mu && !strcmp(mu, "zero-held-owner") ? (r + 1) % P : r;
    *size = P;
    return 0;
}

/* The stage's gradients: each run of held tensors summed over the stage's
 * data-parallel group; a tied embedding's two parts (the embedding's on
 * stage 0, the head's on the last stage) then added, the same sum on both. */
ffn_status dist_pp_reduce_grads(ffn_dist *d, ffn_model *m, float *g) {
    const int64_t nt = ffn_model_num_tensors(m), P = ffn_dist_size(d, FFN_DIST_PP),
                  s = ffn_dist_rank(d, FFN_DIST_PP);
    ffn_status st = FFN_OK;
    if (ffn_dist_size(d, FFN_DIST_DP) > 1)
        for (int64_t i = 0; i < nt && st == FFN_OK;) {
            if (!dist_pp_holds(d, m, i)) {
                i++;
                continue;
            }
            int64_t j = i, lo = ffn_model_tensor_at(m, i)->offset, hi = lo;
            while (j < nt && dist_pp_holds(d, m, j)) {
                const ffn_model_tensor *t = ffn_model_tensor_at(m, j++);
                hi = t->offset + t->numel;
            }
            st = ffn_dist_allreduce_f32(d, FFN_DIST_DP, g + lo, hi - lo);
            i = j;
        }
    for (int64_t i = 0; i < nt && st == FFN_OK && (s == 0 || s == P - 1); i++) {
        const ffn_model_tensor *t = ffn_model_tensor_at(m, i);
        if (!tied_embedding(m, t)) continue;
        float *other = malloc((size_t)t->numel * sizeof *other);
        if (!other) return ffn_set_error(FFN_ERR_NOMEM, "out of memory");
        const int peer = s == 0 ? (int)(P - 1) : 0;
        MPI_Request r[2];
        int rc = MPI_Irecv(other, (int)t->numel, MPI_FLOAT, peer, 7, dist_comm(d, FFN_DIST_PP), &r[0]);
        if (rc == MPI_SUCCESS)
            rc = MPI_Isend(g + t->offset, (int)t->numel, MPI_FLOAT, peer, 7,
                           dist_comm(d, FFN_DIST_PP), &r[1]);
        st = rc != MPI_SUCCESS ? dist_mpi_error(rc, "--pp: the tied embedding's gradient")
                               : dist_wait(d, 2, r, NULL, "--pp: the tied embedding's gradient");
        if (st == FFN_OK) { /* stage 0's part first on both */
            float *mine = g + t->offset;
            for (int64_t k = 0; k < t->numel; k++)
                mine[k] = s == 0 ? mine[k] + other[k] : other[k] + mine[k];
        }
        free(other);
    }
    return st;
}

/* The whole model's squared gradient norm: each stage's tensors (a tied
 * embedding once, on stage 0), summed over the stages. */
ffn_status dist_pp_grad_sq(ffn_dist *d, const ffn_model *m, const float *g, double *sq) {
    const int64_t nt = ffn_model_num_tensors(m), s = ffn_dist_rank(d, FFN_DIST_PP);
    double sum = 0;
    for (int64_t i = 0; i < nt; i++) {
        const ffn_model_tensor *t = ffn_model_tensor_at(m, i);
        if (owner_stage(d, m, t) != s) continue;
        const float *x = g + t->offset;
        for (int64_t k = 0; k < t->numel; k++) sum += (double)x[k] * x[k];
    }
    ffn_status st = ffn_dist_allreduce_f64(d, FFN_DIST_PP, &sum, 1);
    *sq = sum;
    return st;
}

/* ---- the 1F1B schedule -------------------------------------------------------- */

typedef struct pp_run {
    ffn_dist *d;
    ffn_model *m;
    int64_t s, P, l0, l1, L, N, D;
    MPI_Comm comm;
    float *rx;           /* (N, D) the stream received */
    float *sendbuf;      /* (2M, N, D) each micro-batch's outgoing stream and gradient */
    MPI_Request *sreq;   /* (2M) */
    int nsend;
    void *acts;          /* the stage's saved activations in the model */
    size_t acts_bytes;
    char *stash;         /* (S, acts_bytes): micro-batch i's at slot i % S */
    int64_t S, live;     /* in flight at most; the micro-batch in the model's buffers (-1 none) */
    int mutate;          /* FFN_DIST_MUTATE=pp-skip-send: the last micro-batch's stream never
                          * sent (the next stage waits until --dist-timeout) */
} pp_run;

static ffn_status pp_recv(pp_run *r, float *buf, int64_t from, int tag) {
    MPI_Request q;
    int rc = MPI_Irecv(buf, (int)(r->N * r->D), MPI_FLOAT, (int)from, tag, r->comm, &q);
    if (rc != MPI_SUCCESS) return dist_mpi_error(rc, "--pp: receive");
    return dist_wait(r->d, 1, &q, NULL, "--pp: a stage's stream");
}

static ffn_status pp_send(pp_run *r, const float *x, int64_t to, int tag) {
    float *b = r->sendbuf + (size_t)r->nsend * (size_t)(r->N * r->D);
    memcpy(b, x, (size_t)(r->N * r->D) * sizeof *b);
    int rc = MPI_Isend(b, (int)(r->N * r->D), MPI_FLOAT, (int)to, tag, r->comm, &r->sreq[r->nsend]);
    if (rc != MPI_SUCCESS) return dist_mpi_error(rc, "--pp: send");
    r->nsend++;
    return FFN_OK;
}

/* Micro-batch i's activations into the model's buffers (the one there
 * kept aside first when its backward is still to come). */
static void pp_bring(pp_run *r, int64_t i, int restore) {
    if (r->live == i) return;
    if (r->live >= 0)
        memcpy(r->stash + (size_t)(r->live % r->S) * r->acts_bytes, r->acts, r->acts_bytes);
    if (restore) memcpy(r->acts, r->stash + (size_t)(i % r->S) * r->acts_bytes, r->acts_bytes);
    r->live = i;
}

ffn_status dist_pp_step(ffn_dist *d, ffn_model *m, const int32_t *tokens,
                        const int32_t *targets, int64_t A, int64_t B, int64_t T,
                        float grad_scale, double *ce_out, double *total_out) {
    const ffn_model_config *c = ffn_model_get_config(m);
    pp_run r = {.d = d, .m = m, .s = ffn_dist_rank(d, FFN_DIST_PP),
                .P = ffn_dist_size(d, FFN_DIST_PP), .L = c->num_hidden_layers, .N = B * T,
                .D = c->hidden_size, .comm = dist_comm(d, FFN_DIST_PP), .live = -1};
    const char *mut = getenv("FFN_DIST_MUTATE");
    r.mutate = mut && !strcmp(mut, "pp-skip-send");
    dist_pp_layers(d, r.L, &r.l0, &r.l1);
    /* FFN_DIST_MUTATE=pp-boundary: stage 0 ends a layer early (a wrong
     * stage boundary: that layer never runs) */
    if (mut && !strcmp(mut, "pp-boundary") && r.s == 0 && r.l1 - 1 > r.l0) r.l1--;
    if (r.N * r.D > INT_MAX)
        return ffn_set_error(FFN_ERR_UNSUPPORTED, "--pp: a micro-batch's stream of %lld floats is "
                             "more than one message takes", (long long)(r.N * r.D));
    r.S = r.P - r.s < A ? r.P - r.s : A;
    ffn_status st = ffn_model_stage_acts(m, r.l0, r.l1, &r.acts, &r.acts_bytes);
    if (st != FFN_OK) return st;
    const size_t row = (size_t)(r.N * r.D) * sizeof(float);
    r.rx = malloc(row);
    r.sendbuf = malloc(row * (size_t)(2 * A)); /* a middle stage sends both ways */
    r.sreq = malloc((size_t)(2 * A) * sizeof *r.sreq);
    r.stash = r.S > 1 ? malloc(r.acts_bytes * (size_t)r.S) : NULL;
    if (!r.rx || !r.sendbuf || !r.sreq || (r.S > 1 && !r.stash)) {
        st = ffn_set_error(FFN_ERR_NOMEM, "out of memory (--pp buffers)");
        goto done;
    }
    const int first = r.s == 0, last = r.s == r.P - 1;
    double ce = 0, total = 0;
    int64_t warm = r.P - r.s - 1 < A ? r.P - r.s - 1 : A, nf = 0, nb = 0;
    while (st == FFN_OK && nb < A) {
        /* warm-up forwards, then one forward and one backward, then the rest */
        int forward = nf < warm || (nf < A && nf == nb + warm);
        if (forward) {
            const int64_t i = nf++;
            const size_t off = (size_t)(i * r.N);
            if (!first && (st = pp_recv(&r, r.rx, r.s - 1, (int)(2 * i))) != FFN_OK) break;
            if (r.S > 1) pp_bring(&r, i, 0);
            float *x = NULL;
            ffn_model_loss loss;
            st = ffn_model_stage_forward(m, tokens + off, targets + off, B, T, r.l0, r.l1, 1,
                                         grad_scale, first ? NULL : r.rx, last ? NULL : &x, &loss);
            if (st != FFN_OK) break;
            ce += loss.ce;
            total += last ? loss.total
                          : c->router_aux_loss_coef * loss.aux + c->router_z_loss_coef * loss.z;
            if (!last && !(r.mutate && i == A - 1)) st = pp_send(&r, x, r.s + 1, (int)(2 * i));
        } else {
            const int64_t i = nb++;
            const size_t off = (size_t)(i * r.N);
            if (!last && (st = pp_recv(&r, r.rx, r.s + 1, (int)(2 * i + 1))) != FFN_OK) break;
            if (r.S > 1) pp_bring(&r, i, 1);
            float *dx = NULL;
            st = ffn_model_stage_backward(m, tokens + off, B, T, r.l0, r.l1, grad_scale,
                                          last ? NULL : r.rx, first ? NULL : &dx);
            r.live = -1;
            if (st == FFN_OK && !first) st = pp_send(&r, dx, r.s - 1, (int)(2 * i + 1));
        }
        /* a rank that failed stops; its neighbours then time out waiting */
    }
    if (r.nsend > 0) {
        ffn_status ws = dist_wait(d, r.nsend, r.sreq, NULL, "--pp: the streams sent");
        if (st == FFN_OK) st = ws;
    }
    if (st == FFN_OK) { /* the loss lives on the last stage (the others add their MoE terms) */
        double l[2] = {ce, total};
        st = ffn_dist_allreduce_f64(d, FFN_DIST_PP, l, 2);
        *ce_out = l[0];
        *total_out = l[1];
    }
done:
    free(r.rx);
    free(r.sendbuf);
    free(r.sreq);
    free(r.stash);
    return st;
}

ffn_status dist_pp_eval(ffn_dist *d, ffn_model *m, const int32_t *tokens, const int32_t *targets,
                        int64_t B, int64_t T, double *ce_out) {
    const ffn_model_config *c = ffn_model_get_config(m);
    pp_run r = {.d = d, .m = m, .s = ffn_dist_rank(d, FFN_DIST_PP),
                .P = ffn_dist_size(d, FFN_DIST_PP), .L = c->num_hidden_layers, .N = B * T,
                .D = c->hidden_size, .comm = dist_comm(d, FFN_DIST_PP), .live = -1};
    dist_pp_layers(d, r.L, &r.l0, &r.l1);
    const int first = r.s == 0, last = r.s == r.P - 1;
    r.rx = malloc((size_t)(r.N * r.D) * sizeof(float));
    r.sendbuf = malloc((size_t)(r.N * r.D) * sizeof(float));
    r.sreq = malloc(sizeof *r.sreq);
    ffn_status st = r.rx && r.sendbuf && r.sreq ? FFN_OK
                    : ffn_set_error(FFN_ERR_NOMEM, "out of memory (--pp buffers)");
    float *x = NULL;
    ffn_model_loss loss = {0};
    if (st == FFN_OK && !first) st = pp_recv(&r, r.rx, r.s - 1, 0);
    if (st == FFN_OK)
        st = ffn_model_stage_forward(m, tokens, targets, B, T, r.l0, r.l1, 0, 0.0f,
                                     first ? NULL : r.rx, last ? NULL : &x, &loss);
    if (st == FFN_OK && !last) {
        st = pp_send(&r, x, r.s + 1, 0);
        if (st == FFN_OK) st = dist_wait(d, 1, r.sreq, NULL, "--pp: the stream sent");
    }
    double ce = last ? loss.ce : 0.0;
    if (st == FFN_OK) st = ffn_dist_allreduce_f64(d, FFN_DIST_PP, &ce, 1);
    *ce_out = ce;
    free(r.rx);
    free(r.sendbuf);
    free(r.sreq);
    return st;
}

/* ---- the trainer's hooks ----------------------------------------------------- */

static ffn_status hook_shard(void *u, ffn_model *full, const ffn_model_options *opt,
                             ffn_model **out) {
    (void)opt;
    ffn_status st = dist_pp_check(u, ffn_model_get_config(full));
    if (st == FFN_OK) *out = full; /* in place: the state sharded by hook_holds */
    return st;
}
static int hook_holds(void *u, const ffn_model *m, int64_t i) { return dist_pp_holds(u, m, i); }
static ffn_status hook_gather_tensors(void *u, const ffn_model *m, float *const *where) {
    return dist_pp_gather_tensors(u, m, where);
}
static ffn_status hook_gather_one(void *u, const ffn_model *m, int64_t i, float *buf) {
    return dist_pp_gather_one(u, m, i, buf);
}
static ffn_status hook_copy(void *u, const ffn_model *a, const float *src, const ffn_model *b,
                            float *dst) {
    (void)u, (void)b;
    memcpy(dst, src, (size_t)ffn_model_num_params(a) * sizeof *dst);
    return FFN_OK;
}
static ffn_status hook_sq(void *u, const ffn_model *r, const ffn_model *full, const float *g,
                          double *sq) {
    (void)full;
    return dist_pp_grad_sq(u, r, g, sq);
}
static ffn_status hook_reduce(void *u, ffn_model *m, float *g, int64_t n) {
    if (n != ffn_model_num_params(m))
        return ffn_set_error(FFN_ERR_INVALID_ARG, "gradient reduction: %lld values for a model of "
                             "%lld parameters", (long long)n, (long long)ffn_model_num_params(m));
    return dist_pp_reduce_grads(u, m, g);
}
static ffn_status hook_step(void *u, ffn_model *m, const int32_t *tokens, const int32_t *targets,
                            int64_t A, int64_t B, int64_t T, float grad_scale, double *ce,
                            double *total) {
    return dist_pp_step(u, m, tokens, targets, A, B, T, grad_scale, ce, total);
}
static ffn_status hook_eval(void *u, ffn_model *m, const int32_t *tokens, const int32_t *targets,
                            int64_t B, int64_t T, double *ce) {
    return dist_pp_eval(u, m, tokens, targets, B, T, ce);
}

static ffn_status hook_stage_layers(void *u, const ffn_model_config *cfg, int64_t *l0,
                                    int64_t *l1) {
    ffn_status st = dist_pp_check(u, cfg);
    if (st == FFN_OK) dist_pp_layers(u, cfg->num_hidden_layers, l0, l1);
    return st;
}

void dist_pp_train_hooks(ffn_dist *d, ffn_train_dist *t) {
    (void)d;
    t->stage_layers = hook_stage_layers;
    t->shard = hook_shard;
    t->holds = hook_holds;
    t->gather_tensors = hook_gather_tensors;
    t->gather_tensor = hook_gather_one;
    t->slice_flat = hook_copy;
    t->gather_flat = hook_copy;
    t->sync_grads = NULL;
    t->grad_sq = hook_sq;
    t->reduce_grads = hook_reduce;
    t->pipeline = hook_step;
    t->pipeline_eval = hook_eval;
}
