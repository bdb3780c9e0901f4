/* overlap.c -- the gradient sums started during the backward (ffn train
 * --overlap 1): at each of the model's "gradients ready" points
 * (ffn_model_set_grad_ready) the buckets whose tensors are complete are
 * started without blocking, and the ones in flight are moved on; the
 * trainer waits for all after the backward.
 *
 * The bits are those of the blocking sums: the same buckets (the plan of
 * dist_grad_buckets, or ZeRO-2's cut of the whole block, hook_rs2) and the
 * same collective per bucket -- the fixed-order ring of dist.c, here as a
 * state machine of Isend/Irecv steps (a tag per bucket, so buckets in
 * flight together never match each other's messages), or ZeRO-2's
 * MPI_Ireduce_scatter with the same counts.  Only the start time differs.
 * Progress: Open MPI moves nonblocking requests only inside MPI calls,
 * so every ready point tests the requests in flight (and a ring bucket
 * whose step completed posts its next one).  MPI is called from the main
 * thread only (MPI_THREAD_FUNNELED, dist.c).
 *
 * A bucket is ready at level v (the model's levels: L after the head and
 * the final norm, l after block l) when each of its tensors is: a block's
 * at its block, the final norm's and the head's at L, the embeddings'
 * (before the first block in the table) only after the backward (-1). */
#include "dist/dist_internal.h"
#include "base/release.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { OV_WAITING, OV_FLIGHT, OV_DONE };
/* Buckets in flight at once: each holds its receive buffer and Open MPI's
 * temporaries of a nonblocking collective (as large as the bucket), so
 * all of them in flight at the end of the backward cost about a whole
 * gradient block (measured: ZeRO-2 at --dp 2, rank 0 peak RSS +17 MB on a
 * 17 MB block); two keep the link busy while the next is prepared. */
#define OV_FLIGHT_MAX 2
#define OV_TAG0 1000
#define OV_TAGS 30000 /* within MPI's guaranteed tag bound (32767) */

typedef struct ov_bucket {
    int64_t at, n;          /* floats of the gradient block */
    int64_t level;          /* ready once the backward is past this level */
    ffn_dist_group group;
    int state, step;        /* ring: the step in flight, 0 .. 2 (P - 1) - 1 */
    int skip;               /* a test's mutation: never summed */
    MPI_Request req[2];
    float *recv;            /* ring: a chunk; reduce-scatter: this rank's floats */
    int *counts;            /* reduce-scatter: every rank's floats of the bucket */
} ov_bucket;

struct dist_overlap {
    int mode;               /* DIST_OVERLAP_RING or _RS */
    const ffn_model *model; /* the plan's model, block size and bucket */
    int64_t n, bucket;
    ov_bucket *b;
    int64_t nb;
    float *g;               /* the step's gradient block */
    int64_t lo, hi;         /* ZeRO-2: this rank's range */
    int early;              /* a test's mutation: buckets started a level too soon */
    int64_t started, done;
    int64_t next, at;       /* the next bucket to start (they start last first, one order on
                             * every rank) and the level the backward has passed */
    double t_first, t_last, poll_seconds;
};

void dist_overlap_free(dist_overlap *o) {
    if (!o) return;
    for (int64_t k = 0; k < o->nb; k++) {
        free(o->b[k].recv);
        free(o->b[k].counts);
    }
    free(o->b);
    free(o);
}

/* ---- the plan ------------------------------------------------------------------- */

typedef struct { dist_overlap *o; int64_t cap; } plan_state;
static ffn_status plan_add(void *u, ffn_dist_group g, int64_t at, int64_t n) {
    plan_state *p = u;
    dist_overlap *o = p->o;
    if (o->nb == p->cap) {
        int64_t cap = p->cap ? 2 * p->cap : 64;
        ov_bucket *b = realloc(o->b, (size_t)cap * sizeof *b);
        if (!b) return ffn_set_error(FFN_ERR_NOMEM, "out of memory (overlap plan)");
        o->b = b, p->cap = cap;
    }
    o->b[o->nb++] = (ov_bucket){.at = at, .n = n, .group = g};
    return FFN_OK;
}

/* Each bucket's level: the lowest of its tensors' (the table is in offset
 * order; a bucket may span tensors and a tensor buckets). */
static void plan_levels(dist_overlap *o, const ffn_model *m) {
    const int64_t nt = ffn_model_num_tensors(m), L = ffn_model_get_config(m)->num_hidden_layers;
    int64_t first_block = INT64_MAX;
    for (int64_t i = 0; i < nt; i++) {
        const ffn_model_tensor *t = ffn_model_tensor_at(m, i);
        if (t->layer >= 0 && t->offset < first_block) first_block = t->offset;
    }
    int64_t i = 0;
    for (int64_t k = 0; k < o->nb; k++) {
        ov_bucket *b = &o->b[k];
        while (i > 0 && ffn_model_tensor_at(m, i)->offset > b->at) i--;
        int64_t level = INT64_MAX;
        for (int64_t j = i; j < nt; j++) {
            const ffn_model_tensor *t = ffn_model_tensor_at(m, j);
            if (t->offset >= b->at + b->n) break;
            if (t->offset + t->numel <= b->at) {
                i = j + 1;
                continue;
            }
            int64_t lv = t->layer >= 0 ? t->layer : t->offset < first_block ? -1 : L;
            if (lv < level) level = lv;
        }
        b->level = level == INT64_MAX ? -1 : level;
    }
}

ffn_status dist_overlap_plan(ffn_dist *d, dist_overlap **op, int mode, const ffn_model *m,
                             int64_t n, int64_t bucket) {
    dist_overlap *o = *op;
    if (o && o->mode == mode && o->model == m && o->n == n && o->bucket == bucket) return FFN_OK;
    dist_overlap_free(o);
    *op = NULL;
    o = calloc(1, sizeof *o);
    if (!o) return ffn_set_error(FFN_ERR_NOMEM, "out of memory (overlap plan)");
    o->mode = mode, o->model = m, o->n = n, o->bucket = bucket;
    plan_state p = {o, 0};
    ffn_status st = FFN_OK;
    if (mode == DIST_OVERLAP_RING) st = dist_grad_buckets(d, m, bucket, plan_add, &p);
    else { /* ZeRO-2: the whole block cut as hook_rs2 cuts it */
        int64_t B = bucket < n ? bucket : n;
        if (B > (int64_t)1 << 28) B = (int64_t)1 << 28;
        for (int64_t b0 = 0; st == FFN_OK && b0 < n; b0 += B)
            st = plan_add(&p, FFN_DIST_DP, b0, b0 + B < n ? B : n - b0);
    }
    if (st == FFN_OK && o->nb > OV_TAGS)
        st = ffn_set_error(FFN_ERR_UNSUPPORTED, "--overlap 1: %lld gradient buckets, at most %d "
                           "(give a larger --bucket-mb, or --overlap 0)", (long long)o->nb, OV_TAGS);
    if (st != FFN_OK) {
        dist_overlap_free(o);
        return st;
    }
    plan_levels(o, m);
    /* the tests' mutations: one bucket never summed (the first to be
     * ready), or every bucket started one level before it is ready
     * (tests/cli/test_dist_overlap.sh) */
    const char *mu = getenv("FFN_DIST_MUTATE");
    if (mu && !strcmp(mu, "overlap-skip") && o->nb) o->b[o->nb - 1].skip = 1;
    if (mu && !strcmp(mu, "zero2-skip-bucket") && mode == DIST_OVERLAP_RS)
        o->b[o->nb > 1 ? 1 : 0].skip = 1; /* hook_rs2's bucket */
    o->early = mu && !strcmp(mu, "overlap-early");
    *op = o;
    return FFN_OK;
}

/* ---- the buckets ---------------------------------------------------------------- */

/* The ring of dist.c (RING), step s of bucket b: the reduce-scatter's
 * P - 1 steps, then the all-gather's. */
static ffn_status ring_post(ffn_dist *d, ov_bucket *b, float *g, int tag) {
    const MPI_Comm comm = dist_comm(d, b->group);
    const int P = ffn_dist_size(d, b->group), r = ffn_dist_rank(d, b->group), s = b->step;
    const int64_t base = b->n / P, extra = b->n % P;
    const int next = (r + 1) % P, prev = (r + P - 1) % P, rs = s < P - 1;
    const int cs = rs ? ((r - s) % P + P) % P : ((r + 1 - (s - P + 1)) % P + P) % P;
    const int cr = rs ? ((r - s - 1) % P + P) % P : ((r - (s - P + 1)) % P + P) % P;
    const int64_t os = cs * base + (cs < extra ? cs : extra), ns = base + (cs < extra);
    const int64_t orr = cr * base + (cr < extra ? cr : extra), nr = base + (cr < extra);
    if (ns > INT_MAX || nr > INT_MAX)
        return ffn_set_error(FFN_ERR_OVERFLOW, "all-reduce chunk of %lld values", (long long)ns);
    float *buf = g + b->at;
    int rc = MPI_Irecv(rs ? b->recv : buf + orr, (int)nr, MPI_FLOAT, prev, tag, comm, &b->req[0]);
    if (rc != MPI_SUCCESS) return dist_mpi_error(rc, "gradient all-reduce");
    rc = MPI_Isend(buf + os, (int)ns, MPI_FLOAT, next, tag, comm, &b->req[1]);
    if (rc != MPI_SUCCESS) return dist_mpi_error(rc, "gradient all-reduce");
    return FFN_OK;
}

/* The received chunk of a finished step added as RING adds it. */
static ffn_status ring_land(ffn_dist *d, ov_bucket *b, float *g, const MPI_Status *sts) {
    const int P = ffn_dist_size(d, b->group), r = ffn_dist_rank(d, b->group), s = b->step;
    const int64_t base = b->n / P, extra = b->n % P;
    const int rs = s < P - 1;
    const int cr = rs ? ((r - s - 1) % P + P) % P : ((r - (s - P + 1)) % P + P) % P;
    const int64_t orr = cr * base + (cr < extra ? cr : extra), nr = base + (cr < extra);
    int got = -1;
    MPI_Get_count(&sts[0], MPI_FLOAT, &got);
    ffn_status st = dist_ring_count("gradient all-reduce", (r + P - 1) % P, got, nr);
    if (st != FFN_OK) return st;
    if (rs) {
        float *dst = g + b->at + orr;
        for (int64_t i = 0; i < nr; i++) dst[i] = b->recv[i] + dst[i];
    }
    return FFN_OK;
}

static void bucket_done(dist_overlap *o, ov_bucket *b) {
    b->state = OV_DONE;
    free(b->recv);
    b->recv = NULL;
    o->done++;
    o->t_last = MPI_Wtime();
}

/* ZeRO-2: the bucket's sums of this rank's range put in place, and the
 * rest of the bucket given back at once (zero, its pages returned), so
 * the gradient pages of the finished part of the backward do not stay. */
static void rs_land(dist_overlap *o, ov_bucket *b, int me) {
    const int64_t b0 = b->at, b1 = b->at + b->n;
    const int64_t a = o->lo > b0 ? o->lo : b0, e = o->hi < b1 ? o->hi : b1;
    if (e <= a) { /* none of this rank's range in the bucket */
        ffn_give_back_floats(o->g + b0, b1 - b0);
        return;
    }
    if (b->counts[me]) memcpy(o->g + a, b->recv, (size_t)b->counts[me] * sizeof *b->recv);
    if (a > b0) ffn_give_back_floats(o->g + b0, a - b0);
    if (e < b1) ffn_give_back_floats(o->g + e, b1 - e);
}

static ffn_status bucket_start(ffn_dist *d, dist_overlap *o, int64_t k) {
    ov_bucket *b = &o->b[k];
    if (!o->started++) o->t_first = MPI_Wtime();
    if (b->skip) {
        bucket_done(o, b);
        return FFN_OK;
    }
    const int P = ffn_dist_size(d, b->group), me = ffn_dist_rank(d, b->group);
    b->state = OV_FLIGHT;
    b->step = 0;
    if (o->mode == DIST_OVERLAP_RING) {
        if (P == 1 || b->n == 0) {
            bucket_done(o, b);
            return FFN_OK;
        }
        b->recv = malloc((size_t)(b->n / P + 1) * sizeof *b->recv);
        if (!b->recv) return ffn_set_error(FFN_ERR_NOMEM, "out of memory (all-reduce of %lld values)",
                                           (long long)b->n);
        return ring_post(d, b, o->g, OV_TAG0 + (int)k);
    }
    if (!b->counts && !(b->counts = malloc((size_t)P * sizeof *b->counts)))
        return ffn_set_error(FFN_ERR_NOMEM, "out of memory");
    for (int r = 0; r < P; r++) {
        int64_t f, c;
        dist_split(o->n, P, r, &f, &c);
        const int64_t a = f > b->at ? f : b->at, e = f + c < b->at + b->n ? f + c : b->at + b->n;
        b->counts[r] = e > a ? (int)(e - a) : 0;
    }
    b->recv = malloc((size_t)(b->counts[me] ? b->counts[me] : 1) * sizeof *b->recv);
    if (!b->recv) return ffn_set_error(FFN_ERR_NOMEM, "out of memory (reduce-scatter of %lld values)",
                                       (long long)b->n);
    int rc = MPI_Ireduce_scatter(o->g + b->at, b->recv, b->counts, MPI_FLOAT, MPI_SUM,
                                 dist_comm(d, FFN_DIST_DP), &b->req[0]);
    return rc != MPI_SUCCESS ? dist_mpi_error(rc, "gradient reduce-scatter") : FFN_OK;
}

/* One pass over the buckets in flight: each finished request handled. */
static ffn_status progress(ffn_dist *d, dist_overlap *o) {
    for (int64_t k = 0; k < o->nb; k++) {
        ov_bucket *b = &o->b[k];
        if (b->state != OV_FLIGHT) continue;
        int flag = 0;
        if (o->mode == DIST_OVERLAP_RS) {
            int rc = MPI_Test(&b->req[0], &flag, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS) return dist_mpi_error(rc, "gradient reduce-scatter");
            if (!flag) continue;
            rs_land(o, b, ffn_dist_rank(d, FFN_DIST_DP));
            bucket_done(o, b);
            continue;
        }
        MPI_Status sts[2];
        int rc = MPI_Testall(2, b->req, &flag, sts);
        if (rc != MPI_SUCCESS) return dist_mpi_error(rc, "gradient all-reduce");
        if (!flag) continue;
        ffn_status st = ring_land(d, b, o->g, sts);
        if (st != FFN_OK) return st;
        if (++b->step == 2 * (ffn_dist_size(d, b->group) - 1)) bucket_done(o, b);
        else if ((st = ring_post(d, b, o->g, OV_TAG0 + (int)k))) return st;
    }
    return FFN_OK;
}

/* ---- the step ------------------------------------------------------------------- */

void dist_overlap_begin(dist_overlap *o, float *g, int64_t lo, int64_t hi) {
    o->g = g, o->lo = lo, o->hi = hi;
    o->started = o->done = 0;
    o->next = o->nb - 1, o->at = INT64_MAX;
    o->poll_seconds = 0;
    for (int64_t k = 0; k < o->nb; k++) o->b[k].state = OV_WAITING;
}

/* The buckets now complete started, last in the table first, while
 * fewer than OV_FLIGHT_MAX are in flight (a bucket that needs no sum is
 * done at once). */
static ffn_status start_more(ffn_dist *d, dist_overlap *o) {
    ffn_status st = FFN_OK;
    while (st == FFN_OK && o->next >= 0 && o->b[o->next].level >= o->at &&
           o->started - o->done < OV_FLIGHT_MAX)
        st = bucket_start(d, o, o->next--);
    return st;
}

/* Ready point `level`: the ones in flight moved on, then the buckets now
 * complete started, the last in the table first (the order every rank
 * follows: it depends on the model only). */
ffn_status dist_overlap_ready(ffn_dist *d, dist_overlap *o, int64_t level) {
    const double t0 = MPI_Wtime();
    ffn_status st = progress(d, o);
    o->at = o->early ? level - 1 : level;
    if (st == FFN_OK) st = start_more(d, o);
    o->poll_seconds += MPI_Wtime() - t0;
    return st;
}

/* After the backward: the rest started, then every bucket waited for
 * (polled as dist_wait polls, within the deadline). */
ffn_status dist_overlap_finish(ffn_dist *d, dist_overlap *o) {
    const double t0 = MPI_Wtime();
    o->at = INT64_MIN; /* every bucket is complete now */
    ffn_status st = start_more(d, o);
    for (unsigned long spin = 1; st == FFN_OK && o->done < o->nb; spin++) {
        if ((st = progress(d, o)) || (st = start_more(d, o)) || o->done == o->nb || spin % 64)
            continue;
        const double waited = MPI_Wtime() - t0;
        st = dist_deadline(d, waited, "gradient sums (overlapped)");
        if (st == FFN_OK && waited > 0.002)
            nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 50000}, NULL);
    }
    const double t1 = MPI_Wtime();
    if (st == FFN_OK) {
        int64_t floats = 0, summed = 0;
        for (int64_t k = 0; k < o->nb; k++) floats += o->b[k].n, summed += !o->b[k].skip;
        dist_add_overlap_stats(d, t1 - t0 + o->poll_seconds, summed, floats, t1 - t0,
                               o->nb ? o->t_last - o->t_first : 0.0);
    }
    return st;
}
