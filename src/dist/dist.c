/* dist.c -- the MPI job, its groups, fixed-order reductions, agreement
 * (see include/ffn/dist.h). */
#include "dist/dist_internal.h"

#include <stdio.h>

#include "dist/agree_text.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct ffn_dist {
    int rank, size;
    int tp, dp, ep, pp;
    MPI_Comm comm[6]; /* by ffn_dist_group */
    int grank[6], gsize[6];
    int finalize;     /* MPI_Init was ours */
    ffn_ctx *ctx;     /* the trainer's tensor-parallel models are made in it */
    void *scratch;    /* the reductions' receive buffer */
    size_t scratch_bytes;
    ffn_train_dist train;
    ffn_dist_ep_moe **ep_layers; /* the expert-parallel models' runners (ep_model.c) */
    int64_t n_ep_layers;
    int64_t bucket;   /* floats per gradient bucket (ffn_dist_set_bucket) */
    ffn_dist_grad_stats grad_stats;
    const float *rs_prev; /* ZeRO-2 with --ep: the last tensor reduce-scattered (a step's first
                           * comes at or before it) */
    int overlap;      /* gradient sums started during the backward (ffn_dist_set_overlap) */
    int overlap_mode; /* the hooks' path: DIST_OVERLAP_RING or _RS (0: none) */
    dist_overlap *ov; /* its plan */
    double timeout;   /* seconds a wait may last (0: none) */
    int broken;       /* a wait timed out: a request is pending for good */
    int failed;       /* ffn_dist_init failed after MPI started: only free it */
};

void ffn_dist_get_grad_stats(const ffn_dist *d, ffn_dist_grad_stats *s) {
    if (s) *s = d ? d->grad_stats : (ffn_dist_grad_stats){0};
}
void dist_add_grad_stats(ffn_dist *d, double seconds, int64_t buckets, int64_t floats) {
    d->grad_stats.calls++;
    d->grad_stats.seconds += seconds;
    d->grad_stats.buckets += buckets;
    d->grad_stats.floats += floats;
    d->grad_stats.wait_seconds += seconds;
    d->grad_stats.comm_seconds += seconds;
}
void dist_add_overlap_stats(ffn_dist *d, double seconds, int64_t buckets, int64_t floats,
                            double wait, double comm) {
    d->grad_stats.calls++;
    d->grad_stats.seconds += seconds;
    d->grad_stats.buckets += buckets;
    d->grad_stats.floats += floats;
    d->grad_stats.wait_seconds += wait;
    d->grad_stats.comm_seconds += comm;
}

ffn_status dist_keep_ep_layer(ffn_dist *d, ffn_dist_ep_moe *l) {
    ffn_dist_ep_moe **p = realloc(d->ep_layers, (size_t)(d->n_ep_layers + 1) * sizeof *p);
    if (!p) return ffn_set_error(FFN_ERR_NOMEM, "out of memory");
    d->ep_layers = p;
    d->ep_layers[d->n_ep_layers++] = l;
    return FFN_OK;
}

void ffn_dist_set_overlap(ffn_dist *d, int on) {
    if (d) d->overlap = on != 0;
}

void ffn_dist_set_bucket(ffn_dist *d, int64_t floats) {
    if (d) d->bucket = floats > 0 ? floats : floats == 0 ? INT64_MAX : FFN_DIST_BUCKET_FLOATS;
}

int ffn_dist_launched(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMI_SIZE") != NULL ||
           getenv("PMIX_RANK") != NULL;
}

ffn_status dist_mpi_error(int rc, const char *what) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "error %d", rc);
    return ffn_set_error(FFN_ERR_IO, "%s: MPI: %.*s", what, len, msg);
}
#define MPI_TRY(call, what)                          \
    do {                                             \
        int rc_ = (call);                            \
        if (rc_ != MPI_SUCCESS) return dist_mpi_error(rc_, what); \
    } while (0)

double ffn_dist_timeout(const ffn_dist *d) { return d ? d->timeout : 0; }

/* Every wait of libffn_dist: MPI_Testall until the requests complete, or
 * until the deadline (d->timeout seconds) passes.  Open MPI's blocking
 * calls wait forever, and progress on nonblocking ones happens only inside
 * MPI calls, so this loop polls: busily for the first 2 ms (the latency of
 * a small all-reduce), then with 50 us naps, which leave the core to a
 * rank that is still computing.  A request that timed out cannot be
 * cancelled (MPI has no cancel for collectives): the handle is marked
 * broken, every later wait fails at once, and ffn_dist_free does not
 * finalise MPI, so the process ends and mpirun ends the job. */
ffn_status dist_deadline(ffn_dist *d, double waited, const char *what) {
    if (!(d->timeout > 0 && waited > d->timeout)) return FFN_OK;
    d->broken = 1;
    return ffn_set_error(FFN_ERR_IO,
                         "%s: rank %d had no answer from the other ranks for %g s (the "
                         "deadline, --dist-timeout): a rank stopped, is stuck, or runs "
                         "other steps than this one; giving up (mpirun ends the job)",
                         what, d->rank, d->timeout);
}

ffn_status dist_wait(ffn_dist *d, int n, MPI_Request *req, MPI_Status *sts, const char *what) {
    if (d->broken)
        return ffn_set_error(FFN_ERR_IO, "%s: not started: an earlier wait of this rank timed out",
                             what);
    const double t0 = MPI_Wtime();
    for (unsigned long spin = 1;; spin++) {
        int done = 0;
        int rc = MPI_Testall(n, req, &done, sts ? sts : MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) return dist_mpi_error(rc, what);
        if (done) return FFN_OK;
        if (spin % 64) continue;
        const double waited = MPI_Wtime() - t0;
        ffn_status st = dist_deadline(d, waited, what);
        if (st != FFN_OK) return st;
        if (waited > 0.002) nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 50000}, NULL);
    }
}

int ffn_dist_local_threads(void) {
    const char *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    long cores = sysconf(_SC_NPROCESSORS_ONLN), local = ls ? atol(ls) : 1;
    return local > 0 && cores / local >= 1 ? (int)(cores / local) : 1;
}

static uint64_t fnv1a(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

ffn_status ffn_dist_check_same(ffn_dist *d, const char *what, const void *bytes, size_t n) {
    uint64_t mine = fnv1a(bytes, n);
    uint64_t *all = malloc((size_t)d->size * sizeof *all);
    if (!all) return ffn_set_error(FFN_ERR_NOMEM, "out of memory");
    MPI_Request req;
    int rc = MPI_Iallgather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, d->comm[FFN_DIST_WORLD],
                            &req);
    ffn_status st = rc != MPI_SUCCESS ? dist_mpi_error(rc, what) : dist_wait(d, 1, &req, NULL, what);
    if (st != FFN_OK) {
        free(all);
        return st;
    }
    for (int r = 1; r < d->size && st == FFN_OK; r++)
        if (all[r] != all[0])
            st = ffn_set_error(FFN_ERR_CONFIG,
                           "%s differs between the ranks: rank %d has %016llx, rank 0 %016llx", what,
                           r, (unsigned long long)all[r], (unsigned long long)all[0]);
    free(all);
    return st;
}

/* The agreement (collective over MPI_COMM_WORLD): a 64-bit hash of every
 * rank's text first; only when they differ the texts themselves, so every
 * rank finds the same first difference (rank 0's text against the lowest
 * rank whose text differs) and returns the same message. */
static ffn_status agree_texts(ffn_dist *d, const char *text, size_t n) {
    const char *what = "the start of the job (every rank's options compared)";
    int line;
    if (n > DIST_AGREE_MAX_BYTES || dist_agree_check(text, n, &line))
        return ffn_set_error(FFN_ERR_INVALID_ARG, "%s: this rank's options text is malformed "
                             "(line %d of %zu bytes)", what, line, n);
    const int P = d->size;
    uint64_t mine = fnv1a(text, n), *hash = malloc((size_t)P * sizeof *hash);
    int *len = malloc((size_t)P * sizeof *len), *at = malloc((size_t)P * sizeof *at);
    char *all = NULL;
    ffn_status st = hash && len && at ? FFN_OK : ffn_set_error(FFN_ERR_NOMEM, "out of memory");
    MPI_Request req;
    /* the hash, not the texts, when they agree (the usual case) */
    if (st == FFN_OK) {
        int rc = MPI_Iallgather(&mine, 1, MPI_UINT64_T, hash, 1, MPI_UINT64_T, MPI_COMM_WORLD, &req);
        st = rc != MPI_SUCCESS ? dist_mpi_error(rc, what) : dist_wait(d, 1, &req, NULL, what);
    }
    int differ = 0;
    for (int r = 1; st == FFN_OK && r < P; r++) differ |= hash[r] != hash[0];
    if (st == FFN_OK && differ) {
        int me = (int)n;
        int rc = MPI_Iallgather(&me, 1, MPI_INT, len, 1, MPI_INT, MPI_COMM_WORLD, &req);
        st = rc != MPI_SUCCESS ? dist_mpi_error(rc, what) : dist_wait(d, 1, &req, NULL, what);
        size_t total = 0;
        for (int r = 0; st == FFN_OK && r < P; r++) {
            if (len[r] < 0 || len[r] > DIST_AGREE_MAX_BYTES)
                st = ffn_set_error(FFN_ERR_FORMAT, "%s: rank %d sent %d bytes", what, r, len[r]);
            at[r] = (int)total;
            total += (size_t)(len[r] > 0 ? len[r] : 0);
        }
        if (st == FFN_OK && total > INT_MAX)
            st = ffn_set_error(FFN_ERR_OVERFLOW, "%s: %zu bytes of options", what, total);
        if (st == FFN_OK && !(all = malloc(total ? total : 1)))
            st = ffn_set_error(FFN_ERR_NOMEM, "out of memory");
        if (st == FFN_OK) {
            rc = MPI_Iallgatherv(text, me, MPI_CHAR, all, len, at, MPI_CHAR, MPI_COMM_WORLD, &req);
            st = rc != MPI_SUCCESS ? dist_mpi_error(rc, what) : dist_wait(d, 1, &req, NULL, what);
        }
        for (int r = 1; st == FFN_OK && r < P; r++) {
            dist_agree_diff diff;
            int c = dist_agree_compare(all + at[0], (size_t)len[0], all + at[r], (size_t)len[r], &diff);
            if (c == 0) continue;
            char msg[1024];
            if (c == 1) dist_agree_message(&diff, 0, r, msg, sizeof msg);
            else snprintf(msg, sizeof msg, "rank %d's options text is malformed (line %d)",
                          c == -1 ? 0 : r, diff.line);
            st = ffn_set_error(FFN_ERR_CONFIG,
                               "the ranks were started with different options: %s (every rank "
                               "of the job must be given the same ones)", msg);
        }
    }
    free(hash);
    free(len);
    free(at);
    free(all);
    return st;
}

ffn_status ffn_dist_init(int *argc, char ***argv, const ffn_dist_layout *layout,
                         ffn_dist **out) {
    if (!out) return ffn_set_error(FFN_ERR_INVALID_ARG, "ffn_dist_init: NULL argument");
    *out = NULL;
    int64_t tp = layout && layout->tp ? layout->tp : 1, dp = layout && layout->dp ? layout->dp : 1,
            ep = layout && layout->ep ? layout->ep : 1, pp = layout && layout->pp ? layout->pp : 1;
    if (tp * dp * pp > 1 && !ffn_dist_launched())
        return ffn_set_error(FFN_ERR_INVALID_ARG,
                         "layout: --tp %lld --dp %lld --pp %lld needs %lld processes: start "
                         "them with mpirun -np %lld (this process is alone)",
                         (long long)tp, (long long)dp, (long long)pp, (long long)(tp * dp * pp),
                         (long long)(tp * dp * pp));
    ffn_dist *d = calloc(1, sizeof *d);
    if (!d) return ffn_set_error(FFN_ERR_NOMEM, "out of memory");
    for (int g = 0; g < 6; g++) d->comm[g] = MPI_COMM_NULL;
    d->bucket = FFN_DIST_BUCKET_FLOATS;
    const double to = layout ? layout->timeout_s : 0;
    d->timeout = to > 0 ? to : to < 0 ? 0 : FFN_DIST_TIMEOUT_DEFAULT;
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided;
        if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
            free(d);
            return ffn_set_error(FFN_ERR_IO, "MPI_Init failed");
        }
        d->finalize = 1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->size);
    /* First of all, before any check that could stop one rank alone: the
     * ranks agree on the ffn they run, the layout and the caller's options
     * (each check below then has the same outcome on every rank). */
    ffn_status st = FFN_OK;
    {
        const char *opts = layout && layout->options ? layout->options : "";
        size_t no = strlen(opts);
        char head[512];
        int nh = snprintf(head, sizeof head, "ffn=%s (built %s %s)\n--tp=%lld\n--dp=%lld\n--ep=%lld\n"
                          "--pp=%lld\n", ffn_version(), __DATE__, __TIME__, (long long)tp,
                          (long long)dp, (long long)ep, (long long)pp);
        char *text = malloc((size_t)nh + no + 1);
        if (!text) st = ffn_set_error(FFN_ERR_NOMEM, "out of memory");
        else {
            memcpy(text, head, (size_t)nh);
            memcpy(text + nh, opts, no + 1);
            st = agree_texts(d, text, (size_t)nh + no);
            free(text);
        }
    }
    const int tp_ep = tp > 1 && ep == tp; /* experts spread over the tensor-parallel group */
    if (st == FFN_OK && (tp < 1 || dp < 1 || ep < 1 || tp > 65536 || dp > 65536 || ep > 65536))
        st = ffn_set_error(FFN_ERR_INVALID_ARG, "layout: --tp %lld --dp %lld --ep %lld: expected 1..65536",
                         (long long)tp, (long long)dp, (long long)ep);
    else if (st == FFN_OK && (pp < 1 || pp > 65536))
        st = ffn_set_error(FFN_ERR_INVALID_ARG, "layout: --pp %lld: expected 1..65536", (long long)pp);
    else if (st == FFN_OK && pp > 1 && tp > 1)
        st = ffn_set_error(FFN_ERR_UNSUPPORTED, "layout: --pp %lld with --tp %lld is not supported "
                           "yet (pipeline stages compose with --dp and --zero 1 only)", (long long)pp, (long long)tp);
    else if (st == FFN_OK && pp > 1 && ep > 1)
        st = ffn_set_error(FFN_ERR_UNSUPPORTED, "layout: --pp %lld with --ep %lld is not supported "
                           "yet (pipeline stages compose with --dp and --zero 1 only)", (long long)pp, (long long)ep);
    else if (st == FFN_OK && tp > 1 && ep > 1 && ep != tp)
        st = ffn_set_error(FFN_ERR_UNSUPPORTED,
                         "layout: --tp %lld with --ep %lld: with --tp T the experts are either "
                         "split by units (--ep 1) or spread by expert over the T ranks of the "
                         "tensor-parallel group (--ep T); --ep E != T with --tp > 1 is not in "
                         "this build (supported: --tp T --ep T --dp D, --ep E --dp D with E "
                         "dividing D, --tp T --dp D)", (long long)tp, (long long)ep);
    else if (st == FFN_OK && !tp_ep && dp % ep)
        st = ffn_set_error(FFN_ERR_INVALID_ARG,
                         "layout: --ep %lld does not divide --dp %lld (experts are spread inside "
                         "the data-parallel group)", (long long)ep, (long long)dp);
    else if (st == FFN_OK && pp > 1 && (int64_t)d->size != tp * dp * pp)
        st = ffn_set_error(FFN_ERR_INVALID_ARG,
                       "layout: --pp %lld x --dp %lld x --tp %lld = %lld ranks, but mpirun started "
                       "%d (give -np %lld)", (long long)pp, (long long)dp, (long long)tp,
                       (long long)(tp * dp * pp), d->size, (long long)(tp * dp * pp));
    else if (st == FFN_OK && (int64_t)d->size != tp * dp * pp)
        st = ffn_set_error(FFN_ERR_INVALID_ARG,
                       "layout: --tp %lld x --dp %lld = %lld ranks, but mpirun started %d (give "
                       "-np %lld)", (long long)tp, (long long)dp, (long long)(tp * dp), d->size,
                       (long long)(tp * dp));
    d->tp = (int)tp, d->dp = (int)dp, d->ep = (int)ep, d->pp = (int)pp;
    /* pipeline stages: the groups of each stage are split from the stage's
     * own communicator (the rank's place r % (tp·dp) in it) */
    MPI_Comm base = MPI_COMM_WORLD;
    if (st == FFN_OK && pp > 1) {
        const int inner = d->tp * d->dp, stage = d->rank / inner, place = d->rank % inner;
        int rc = MPI_Comm_split(MPI_COMM_WORLD, stage, place, &base);
        if (rc == MPI_SUCCESS) rc = MPI_Comm_split(MPI_COMM_WORLD, place, stage, &d->comm[FFN_DIST_PP]);
        if (rc != MPI_SUCCESS) st = dist_mpi_error(rc, "MPI_Comm_split");
    } else if (st == FFN_OK) {
        int rc = MPI_Comm_split(MPI_COMM_WORLD, d->rank, 0, &d->comm[FFN_DIST_PP]);
        if (rc != MPI_SUCCESS) st = dist_mpi_error(rc, "MPI_Comm_split");
    }
    if (st == FFN_OK) {
        MPI_Comm_set_errhandler(d->comm[FFN_DIST_PP], MPI_ERRORS_RETURN);
        MPI_Comm_rank(d->comm[FFN_DIST_PP], &d->grank[FFN_DIST_PP]);
        MPI_Comm_size(d->comm[FFN_DIST_PP], &d->gsize[FFN_DIST_PP]);
    }
    if (st == FFN_OK) {
        int r = d->rank % (d->tp * d->dp), t = r % d->tp, q = r / d->tp;
        int colour[5] = {0, q, t, t * 65536 + q / d->ep, t * 65536 + q % d->ep};
        int key[5] = {r, t, q, q % d->ep, q / d->ep};
        if (tp_ep) { /* EP = the TP group; an expert's replicas = the DP group */
            colour[3] = q, key[3] = t;
            colour[4] = t, key[4] = q;
        }
        for (int g = 0; g < 5 && st == FFN_OK; g++) {
            int rc = g == 0 ? MPI_Comm_dup(MPI_COMM_WORLD, &d->comm[0])
                            : MPI_Comm_split(base, colour[g], key[g], &d->comm[g]);
            if (rc != MPI_SUCCESS) st = dist_mpi_error(rc, "MPI_Comm_split");
            else {
                MPI_Comm_set_errhandler(d->comm[g], MPI_ERRORS_RETURN);
                MPI_Comm_rank(d->comm[g], &d->grank[g]);
                MPI_Comm_size(d->comm[g], &d->gsize[g]);
            }
        }
    }
    if (base != MPI_COMM_WORLD) MPI_Comm_free(&base);
    if (st != FFN_OK) {
        /* kept, to be freed after the caller has reported the error: its
         * ffn_dist_free waits for every rank, so each has said it */
        d->failed = 1;
    }
    *out = d;
    return st;
}

/* Every rank reaches ffn_dist_free before any finalises (and exits):
 * a rank that reports an error first has it printed before mpirun, seeing
 * another rank's exit status, ends the job.  Bounded by the deadline. */
void ffn_dist_free(ffn_dist *d) {
    if (!d) return;
    for (int64_t i = 0; i < d->n_ep_layers; i++) ffn_dist_ep_moe_free(d->ep_layers[i]);
    free(d->ep_layers);
    int done = 0;
    MPI_Finalized(&done);
    int clean = !d->broken && !done;
    if (clean && d->finalize) {
        char saved[1536];
        snprintf(saved, sizeof saved, "%s", ffn_last_error()); /* the caller's error stays */
        MPI_Request req;
        clean = MPI_Ibarrier(MPI_COMM_WORLD, &req) == MPI_SUCCESS &&
                dist_wait(d, 1, &req, NULL, "the end of the job") == FFN_OK;
        ffn_set_error(FFN_ERR_IO, "%s", saved);
    }
    if (clean) {
        for (int g = 0; g < 6; g++)
            if (d->comm[g] != MPI_COMM_NULL) MPI_Comm_free(&d->comm[g]);
        if (d->finalize) MPI_Finalize();
    }
    dist_overlap_free(d->ov);
    free(d->scratch);
    free(d);
}

static int group_ok(ffn_dist_group g) { return g >= FFN_DIST_WORLD && g <= FFN_DIST_PP; }
MPI_Comm dist_comm(const ffn_dist *d, ffn_dist_group g) {
    return d && group_ok(g) ? d->comm[g] : MPI_COMM_NULL;
}
int ffn_dist_rank(const ffn_dist *d, ffn_dist_group g) { return d && group_ok(g) ? d->grank[g] : 0; }
int ffn_dist_size(const ffn_dist *d, ffn_dist_group g) { return d && group_ok(g) ? d->gsize[g] : 1; }

static void *scratch(ffn_dist *d, size_t bytes) {
    if (bytes > d->scratch_bytes) {
        void *p = realloc(d->scratch, bytes);
        if (!p) return NULL;
        d->scratch = p;
        d->scratch_bytes = bytes;
    }
    return d->scratch;
}

ffn_status dist_ring_count(const char *what, int prev, int got, int64_t nr) {
    if (got == nr) return FFN_OK;
    return ffn_set_error(FFN_ERR_CONFIG,
                         "%s: rank %d of the group sent %d values where this rank expects %lld: "
                         "the ranks do not sum the same thing (different options or models)",
                         what, prev, got, (long long)nr);
}

/* One step of a ring: send ns values to `next`, receive nr from `prev`,
 * within the deadline; the received count must be nr (a rank that sums
 * something else -- other options, another model -- is named, not read
 * past). */
static ffn_status ring_step(ffn_dist *d, MPI_Comm comm, const void *sbuf, int ns, void *rbuf,
                            int nr, MPI_Datatype type, int next, int prev, int tag,
                            const char *what) {
    MPI_Request req[2];
    MPI_Status sts[2];
    int rc = MPI_Irecv(rbuf, nr, type, prev, tag, comm, &req[0]);
    if (rc != MPI_SUCCESS) return dist_mpi_error(rc, what);
    rc = MPI_Isend(sbuf, ns, type, next, tag, comm, &req[1]);
    if (rc != MPI_SUCCESS) {
        MPI_Cancel(&req[0]);
        MPI_Request_free(&req[0]);
        return dist_mpi_error(rc, what);
    }
    ffn_status st = dist_wait(d, 2, req, sts, what);
    if (st != FFN_OK) return st;
    int got = -1;
    MPI_Get_count(&sts[0], type, &got);
    return dist_ring_count(what, prev, got, nr);
}

/* Ring all-reduce in a fixed order: P chunks; reduce-scatter (P-1 steps,
 * chunk c accumulates ranks c+1, c+2, ... in ring order, so rank r ends
 * with chunk (r + 1) % P complete), then all-gather (P-1 steps of copies),
 * so every rank ends with the same bits.  The two phases also serve alone
 * (ZeRO-1: the gradients' reduce-scatter, the parameters' all-gather). */
#define RING(NAME, T, MPI_T)                                                                  \
    __attribute__((unused)) static ffn_status NAME##_rs(ffn_dist *d, MPI_Comm comm, int r, int P, T *buf, int64_t n) { \
        if (P == 1 || n == 0) return FFN_OK;                                                  \
        int64_t base = n / P, extra = n % P;                                                  \
        _Static_assert(sizeof(T) <= 8, "element");                                            \
        T *recv = scratch(d, (size_t)(base + 1) * sizeof(T));                                \
        if (!recv) return ffn_set_error(FFN_ERR_NOMEM, "out of memory (all-reduce of %lld values)", \
                                    (long long)n);                                            \
        int next = (r + 1) % P, prev = (r + P - 1) % P;                                       \
        for (int s = 0; s < P - 1; s++) {                                                     \
            int cs = ((r - s) % P + P) % P, cr = ((r - s - 1) % P + P) % P;                   \
            int64_t os = cs * base + (cs < extra ? cs : extra), ns = base + (cs < extra);     \
            int64_t orr = cr * base + (cr < extra ? cr : extra), nr = base + (cr < extra);    \
            if (ns > INT_MAX || nr > INT_MAX)                                                 \
                return ffn_set_error(FFN_ERR_OVERFLOW, "all-reduce chunk of %lld values", (long long)ns); \
            ffn_status st_ = ring_step(d, comm, buf + os, (int)ns, recv, (int)nr, MPI_T, next, prev, \
                                       7, "all-reduce");                                      \
            if (st_ != FFN_OK) return st_;                                                    \
            T *dst = buf + orr;                                                               \
            for (int64_t i = 0; i < nr; i++) dst[i] = recv[i] + dst[i];                       \
        }                                                                                     \
        return FFN_OK;                                                                        \
    }                                                                                         \
    __attribute__((unused)) static ffn_status NAME##_ag(ffn_dist *d, MPI_Comm comm, int r, int P, T *buf, int64_t n) { \
        if (P == 1 || n == 0) return FFN_OK;                                                  \
        int64_t base = n / P, extra = n % P;                                                  \
        int next = (r + 1) % P, prev = (r + P - 1) % P;                                       \
        for (int s = 0; s < P - 1; s++) {                                                     \
            int cs = ((r + 1 - s) % P + P) % P, cr = ((r - s) % P + P) % P;                   \
            int64_t os = cs * base + (cs < extra ? cs : extra), ns = base + (cs < extra);     \
            int64_t orr = cr * base + (cr < extra ? cr : extra), nr = base + (cr < extra);    \
            if (ns > INT_MAX || nr > INT_MAX)                                                 \
                return ffn_set_error(FFN_ERR_OVERFLOW, "all-gather chunk of %lld values", (long long)ns); \
            ffn_status st_ = ring_step(d, comm, buf + os, (int)ns, buf + orr, (int)nr, MPI_T, next, \
                                       prev, 8, "all-gather");                                \
            if (st_ != FFN_OK) return st_;                                                    \
        }                                                                                     \
        return FFN_OK;                                                                        \
    }                                                                                         \
    static ffn_status NAME(ffn_dist *d, MPI_Comm comm, int r, int P, T *buf, int64_t n) {    \
        ffn_status st = NAME##_rs(d, comm, r, P, buf, n);                                     \
        return st != FFN_OK ? st : NAME##_ag(d, comm, r, P, buf, n);                          \
    }
RING(ring_f32, float, MPI_FLOAT)
RING(ring_f64, double, MPI_DOUBLE)

void ffn_dist_owned_range(const ffn_dist *d, ffn_dist_group g, int64_t n, int64_t *first,
                          int64_t *count) {
    const int P = ffn_dist_size(d, g), r = ffn_dist_rank(d, g);
    dist_split(n, P, (r + 1) % P, first, count); /* the chunk the reduce-scatter completes here */
}

/* The public ring collectives: arguments checked, then the group's ring. */
#define COLLECTIVE(name, T, ring)                                                     \
    ffn_status name(ffn_dist *d, ffn_dist_group g, T *buf, int64_t n) {               \
        if (!d || !group_ok(g) || (!buf && n) || n < 0)                               \
            return ffn_set_error(FFN_ERR_INVALID_ARG, #name ": bad argument");        \
        return ring(d, d->comm[g], d->grank[g], d->gsize[g], buf, n);                 \
    }
COLLECTIVE(ffn_dist_reduce_scatter_f32, float, ring_f32_rs)
COLLECTIVE(ffn_dist_all_gather_f32, float, ring_f32_ag)
COLLECTIVE(ffn_dist_allreduce_f32, float, ring_f32)
COLLECTIVE(ffn_dist_allreduce_f64, double, ring_f64)

ffn_status ffn_dist_broadcast(ffn_dist *d, ffn_dist_group g, void *buf, size_t n, int root) {
    if (!d || !group_ok(g) || n > INT_MAX)
        return ffn_set_error(FFN_ERR_INVALID_ARG, "ffn_dist_broadcast: bad argument");
    MPI_Request req;
    MPI_TRY(MPI_Ibcast(buf, (int)n, MPI_BYTE, root, d->comm[g], &req), "broadcast");
    return dist_wait(d, 1, &req, NULL, "broadcast");
}

ffn_status ffn_dist_barrier(ffn_dist *d) {
    MPI_Request req;
    MPI_TRY(MPI_Ibarrier(d->comm[FFN_DIST_WORLD], &req), "barrier");
    return dist_wait(d, 1, &req, NULL, "barrier");
}

/* The agreement's own wait failed: this rank's error (if any) first. */
static ffn_status agree_lost(ffn_status st, ffn_status ws, const char *saved) {
    if (st == FFN_OK) return ws;
    char then[1024];
    snprintf(then, sizeof then, "%s", ffn_last_error());
    return ffn_set_error(st, "%s (and then %s)", saved, then);
}

ffn_status ffn_dist_agree(ffn_dist *d, ffn_status st) {
    if (!d) return st;
    if (d->failed) /* the job did not start: nothing to agree on */
        return st != FFN_OK ? st : ffn_set_error(FFN_ERR_INVALID_ARG, "agree: the job did not start");
    int mine = st != FFN_OK ? d->rank : INT_MAX, first = INT_MAX;
    char saved[1536];
    snprintf(saved, sizeof saved, "%s", st != FFN_OK ? ffn_last_error() : "");
    MPI_Request req;
    MPI_TRY(MPI_Iallreduce(&mine, &first, 1, MPI_INT, MPI_MIN, d->comm[FFN_DIST_WORLD], &req), "agree");
    ffn_status ws = dist_wait(d, 1, &req, NULL, "agree (every rank's status)");
    if (ws != FFN_OK) return agree_lost(st, ws, saved);
    if (first == INT_MAX) return FFN_OK;
    struct { int status; char msg[1536]; } m;
    memset(&m, 0, sizeof m);
    if (d->rank == first) {
        m.status = (int)st;
        snprintf(m.msg, sizeof m.msg, "%s", saved);
    }
    MPI_TRY(MPI_Ibcast(&m, (int)sizeof m, MPI_BYTE, first, d->comm[FFN_DIST_WORLD], &req), "agree");
    ws = dist_wait(d, 1, &req, NULL, "agree (the failing rank's message)");
    if (ws != FFN_OK) return agree_lost(st, ws, saved);
    m.msg[sizeof m.msg - 1] = '\0';
    return ffn_set_error((ffn_status)m.status, "rank %d: %s", first, m.msg);
}

/* ---- the trainer's hooks ---------------------------------------------------- */

static ffn_status hook_f32(void *u, float *buf, int64_t n) {
    return ffn_dist_allreduce_f32(u, FFN_DIST_DP, buf, n);
}
static ffn_status hook_f64(void *u, double *buf, int64_t n) {
    return ffn_dist_allreduce_f64(u, FFN_DIST_DP, buf, n);
}
static ffn_status hook_agree(void *u, ffn_status st) { return ffn_dist_agree(u, st); }
static ffn_status hook_same(void *u, const char *what, const void *b, size_t n) {
    return ffn_dist_check_same(u, what, b, n);
}

/* The rank's model: tensor-parallel (tp > 1; experts split by units), or
 * expert-parallel (ep > 1: the whole layout, experts run by their owners). */
static int ep_layout(const ffn_dist *d) { return d->gsize[FFN_DIST_TP] == 1 && d->ep > 1; }
static ffn_status hook_shard(void *u, ffn_model *full, const ffn_model_options *opt,
                             ffn_model **out) {
    ffn_dist *d = u;
    ffn_status st = ffn_dist_ep_model_check(d, ffn_model_get_config(full));
    if (st != FFN_OK) return st;
    if (!ep_layout(d)) return ffn_dist_tp_model_create(d, d->ctx, full, opt, out);
    /* expert parallel: the whole model itself, its routed experts run by
     * this rank's runners; the state sharded by hook_holds */
    st = dist_ep_install_runners(d, d->ctx, full);
    if (st == FFN_OK) st = ffn_model_params_changed(full);
    if (st == FFN_OK) *out = full;
    return st;
}
static int hook_holds(void *u, const ffn_model *m, int64_t tensor) {
    return dist_ep_holds(u, m, tensor);
}
static ffn_status hook_gather_tensors(void *u, const ffn_model *m, float *const *where) {
    return dist_ep_gather_tensors(u, m, where);
}
static ffn_status hook_gather_one(void *u, const ffn_model *m, int64_t i, float *buf) {
    return dist_ep_gather_one(u, m, i, buf);
}

/* One tensor's floats from rank src to rank 0 of comm (me: this rank's
 * place there, src or 0): received into buf on rank 0, sent from buf on
 * src; the count checked. */
ffn_status dist_move_to_writer(ffn_dist *d, MPI_Comm comm, int src, int me, float *buf,
                               const ffn_model_tensor *t, const char *what) {
    if (!buf || t->numel > INT_MAX)
        return ffn_set_error(FFN_ERR_INVALID_ARG, "%s: %s: %s", what, t->name,
                             buf ? "more than INT_MAX floats" : "no buffer");
    MPI_Request req;
    int rc = me == 0 ? MPI_Irecv(buf, (int)t->numel, MPI_FLOAT, src, 12, comm, &req)
                     : MPI_Isend(buf, (int)t->numel, MPI_FLOAT, 0, 12, comm, &req);
    if (rc != MPI_SUCCESS) return dist_mpi_error(rc, what);
    MPI_Status sts;
    ffn_status st = dist_wait(d, 1, &req, &sts, what);
    int got = -1;
    if (st == FFN_OK && me == 0 && (MPI_Get_count(&sts, MPI_FLOAT, &got), got != (int)t->numel))
        return ffn_set_error(FFN_ERR_CONFIG, "%s: %s: rank %d sent %d floats, expected %lld", what,
                             t->name, src, got, (long long)t->numel);
    return st;
}
static ffn_status hook_slice(void *u, const ffn_model *full, const float *src, const ffn_model *r,
                             float *dst) {
    if (ep_layout(u)) {
        memcpy(dst, src, (size_t)ffn_model_num_params(r) * sizeof *dst);
        return FFN_OK;
    }
    return ffn_dist_tp_slice_flat(u, full, src, r, dst);
}
static ffn_status hook_gather(void *u, const ffn_model *r, const float *src, const ffn_model *full,
                              float *dst) {
    return ep_layout(u) ? ffn_dist_ep_gather_flat(u, r, src, dst)
                        : ffn_dist_tp_gather_flat(u, r, src, full, dst);
}
static ffn_status hook_sync(void *u, ffn_model *r) {
    return ep_layout(u) ? FFN_OK : ffn_dist_tp_model_sync_grads(u, r);
}
static ffn_status hook_sq(void *u, const ffn_model *r, const ffn_model *full, const float *g,
                          double *sq) {
    return ep_layout(u) ? ffn_dist_ep_grad_sq(u, r, g, sq) : ffn_dist_tp_grad_sq(u, r, full, g, sq);
}
static ffn_status hook_reduce(void *u, ffn_model *m, float *g, int64_t n) {
    ffn_dist *d = u;
    if (n != ffn_model_num_params(m))
        return ffn_set_error(FFN_ERR_INVALID_ARG, "gradient reduction: %lld values for a model of "
                             "%lld parameters", (long long)n, (long long)ffn_model_num_params(m));
    return ffn_dist_reduce_grads(d, m, g, d->bucket);
}

static ffn_status hook_sq_range(void *u, const ffn_model *r, const ffn_model *full, const float *g,
                                int64_t lo, int64_t hi, double *sq) {
    return dist_tp_grad_sq_range(u, r, full, g, lo, hi, sq);
}
static void hook_zero_range(void *u, int64_t n, int64_t *lo, int64_t *hi) {
    int64_t first, count;
    ffn_dist_owned_range(u, FFN_DIST_DP, n, &first, &count);
    /* a test's mutation: the range of another rank, so the update misses
     * the sums this rank completed (tests/cli/test_dist_zero.sh) */
    const char *mu = getenv("FFN_DIST_MUTATE");
    if (mu && !strcmp(mu, "zero-owner"))
        dist_split(n, ffn_dist_size(u, FFN_DIST_DP), ffn_dist_rank(u, FFN_DIST_DP), &first, &count);
    *lo = first, *hi = first + count;
}
static ffn_status hook_rs(void *u, float *buf, int64_t n) {
    ffn_dist *d = u;
    const double t0 = MPI_Wtime();
    ffn_status st = ffn_dist_reduce_scatter_f32(d, FFN_DIST_DP, buf, n);
    dist_add_grad_stats(d, MPI_Wtime() - t0, 1, n);
    return st;
}
static ffn_status hook_ag(void *u, float *buf, int64_t n) {
    return ffn_dist_all_gather_f32(u, FFN_DIST_DP, buf, n);
}

/* ZeRO-2.  Rank r of the dp group owns [first, first + count) =
 * dist_split(n, P, r) (ranks in the block's order, so a bucket's owned
 * parts are MPI_Reduce_scatter's segments).  The gradient block is
 * reduce-scattered bucket by bucket (d->bucket floats, the tensor table's
 * order): MPI_Ireduce_scatter with, for each rank, the floats of its range
 * inside the bucket (a bucket within one rank's range is a reduce to that
 * rank, one across a boundary is split); the sums land in a scratch of one
 * bucket and are copied to the owned range (the trainer then gives the
 * floats outside it back: ffn_train_dist.zero_grads).  The parameters are
 * all-gathered by MPI_Iallgatherv in place.  For two ranks each sum is
 * a + b: the bits of ZeRO-1's ring. */
static void hook_zero_range2(void *u, int64_t n, int64_t *lo, int64_t *hi) {
    ffn_dist *d = u;
    const int P = d->gsize[FFN_DIST_DP], r = d->grank[FFN_DIST_DP];
    int64_t first, count;
    /* the mutation zero-owner: another rank's range (as for ZeRO-1) */
    const char *mu = getenv("FFN_DIST_MUTATE");
    dist_split(n, P, mu && !strcmp(mu, "zero-owner") ? (r + 1) % P : r, &first, &count);
    *lo = first, *hi = first + count;
}
static ffn_status hook_rs2(void *u, float *buf, int64_t n) {
    ffn_dist *d = u;
    const double t0 = MPI_Wtime();
    const int P = d->gsize[FFN_DIST_DP], me = d->grank[FFN_DIST_DP];
    int64_t B = d->bucket < n ? d->bucket : n;
    if (B > (int64_t)1 << 28) B = (int64_t)1 << 28; /* counts are ints */
    int64_t buckets = 0;
    int *counts = malloc((size_t)P * sizeof *counts);
    int64_t *first = malloc((size_t)P * 2 * sizeof *first);
    float *recv = B > 0 ? scratch(d, (size_t)B * sizeof *recv) : NULL;
    ffn_status st = counts && first && (recv || B == 0)
                        ? FFN_OK
                        : ffn_set_error(FFN_ERR_NOMEM, "out of memory (reduce-scatter of %lld values)",
                                        (long long)n);
    for (int r = 0; st == FFN_OK && r < P; r++) dist_split(n, P, r, &first[2 * r], &first[2 * r + 1]);
    const int64_t lo = st == FFN_OK ? first[2 * me] : 0;
    /* a test's mutation: one bucket (the second, or the only one) left out,
     * so its gradients stay this rank's partial sums
     * (tests/cli/test_dist_zero.sh) */
    const char *mu = getenv("FFN_DIST_MUTATE");
    const int64_t skip = mu && !strcmp(mu, "zero2-skip-bucket") ? (n > B ? 1 : 0) : -1;
    for (int64_t b0 = 0, k = 0; st == FFN_OK && b0 < n; b0 += B, k++) {
        const int64_t b1 = b0 + B < n ? b0 + B : n;
        for (int r = 0; r < P; r++) {
            int64_t a = first[2 * r] > b0 ? first[2 * r] : b0;
            int64_t e = first[2 * r] + first[2 * r + 1] < b1 ? first[2 * r] + first[2 * r + 1] : b1;
            counts[r] = e > a ? (int)(e - a) : 0;
        }
        if (k == skip) continue;
        MPI_Request req;
        int rc = MPI_Ireduce_scatter(buf + b0, recv, counts, MPI_FLOAT, MPI_SUM,
                                     d->comm[FFN_DIST_DP], &req);
        st = rc != MPI_SUCCESS ? dist_mpi_error(rc, "gradient reduce-scatter")
                               : dist_wait(d, 1, &req, NULL, "gradient reduce-scatter");
        if (st == FFN_OK && counts[me])
            memcpy(buf + (lo > b0 ? lo : b0), recv, (size_t)counts[me] * sizeof *recv);
        buckets++;
    }
    free(counts);
    free(first);
    dist_add_grad_stats(d, MPI_Wtime() - t0, buckets, n);
    return st;
}
static ffn_status hook_ag2(void *u, float *buf, int64_t n) {
    ffn_dist *d = u;
    const int P = d->gsize[FFN_DIST_DP];
    if (n / P + 1 > INT_MAX)
        return ffn_set_error(FFN_ERR_OVERFLOW, "all-gather of %lld values over %d ranks",
                             (long long)n, P);
    int *cnt = malloc((size_t)P * 2 * sizeof *cnt);
    if (!cnt) return ffn_set_error(FFN_ERR_NOMEM, "out of memory");
    for (int r = 0; r < P; r++) {
        int64_t f, c;
        dist_split(n, P, r, &f, &c);
        cnt[r] = (int)c, cnt[P + r] = (int)f;
    }
    ffn_status st = FFN_OK;
    if (n > INT_MAX) /* displacements are ints: a derived type of 1024 floats would lift it */
        st = ffn_set_error(FFN_ERR_OVERFLOW, "--zero 2: %lld parameters: the all-gather takes at "
                           "most %d in this build", (long long)n, INT_MAX);
    MPI_Request req;
    int rc = st == FFN_OK ? MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, cnt, cnt + P,
                                            MPI_FLOAT, d->comm[FFN_DIST_DP], &req)
                          : MPI_SUCCESS;
    if (st == FFN_OK)
        st = rc != MPI_SUCCESS ? dist_mpi_error(rc, "parameter all-gather")
                               : dist_wait(d, 1, &req, NULL, "parameter all-gather");
    free(cnt);
    return st;
}

/* ZeRO, before a save: every dp rank's range to dp rank 0 (world rank 0,
 * the writer, when --tp is 1): each range's (first, count) gathered, then
 * the floats by MPI_Igatherv.  (An allocation failure on the writer, as
 * in ffn_dist_check_same, leaves the others to their deadline.) */
static ffn_status hook_gather_range(void *u, const float *range, int64_t lo, int64_t count,
                                    float *all, int64_t n) {
    ffn_dist *d = u;
    const int P = d->gsize[FFN_DIST_DP], me = d->grank[FFN_DIST_DP];
    const MPI_Comm comm = d->comm[FFN_DIST_DP];
    if (n > INT_MAX)
        return ffn_set_error(FFN_ERR_OVERFLOW, "--zero: %lld parameters: the checkpoint's gather "
                             "takes at most %d in this build", (long long)n, INT_MAX);
    if (me == 0 && !all) return ffn_set_error(FFN_ERR_INVALID_ARG, "gather_range: no buffer on the writer");
    int64_t mine[2] = {lo, count}, *ranges = NULL;
    int *cd = NULL;
    if (me == 0) {
        ranges = malloc((size_t)P * 2 * sizeof *ranges);
        cd = malloc((size_t)P * 2 * sizeof *cd);
        if (!ranges || !cd) {
            free(ranges);
            free(cd);
            return ffn_set_error(FFN_ERR_NOMEM, "out of memory");
        }
    }
    MPI_Request req;
    int rc = MPI_Igather(mine, 2, MPI_INT64_T, ranges, 2, MPI_INT64_T, 0, comm, &req);
    ffn_status st = rc != MPI_SUCCESS ? dist_mpi_error(rc, "the checkpoint's gather")
                                      : dist_wait(d, 1, &req, NULL, "the checkpoint's gather");
    for (int r = 0; st == FFN_OK && me == 0 && r < P; r++) { /* the ranges tile [0, n) */
        int64_t f = ranges[2 * r], c = ranges[2 * r + 1];
        cd[r] = (int)(f >= 0 && c >= 0 && f + c <= n ? c : 0), cd[P + r] = (int)(f >= 0 && f <= n ? f : 0);
    }
    if (st == FFN_OK) {
        rc = MPI_Igatherv(range, (int)count, MPI_FLOAT, all, cd, cd ? cd + P : NULL, MPI_FLOAT, 0,
                          comm, &req);
        st = rc != MPI_SUCCESS ? dist_mpi_error(rc, "the checkpoint's gather")
                               : dist_wait(d, 1, &req, NULL, "the checkpoint's gather");
    }
    free(ranges);
    free(cd);
    return st;
}

/* ZeRO-1 with --ep alone (the sharded state in place): a replicated
 * tensor's group is the dp group (0), an expert's the ranks holding it
 * (1: the expert replicas). */
static int hook_held_group(void *u, const ffn_model *m, int64_t i, int64_t *rank, int64_t *size) {
    ffn_dist *d = u;
    const int g = ffn_model_tensor_at(m, i)->expert >= 0 ? 1 : 0;
    const ffn_dist_group grp = g ? FFN_DIST_EXPERT_REPLICAS : FFN_DIST_DP;
    const int P = d->gsize[grp], r = d->grank[grp];
    /* a test's mutation: the part of another rank of the group, so the
     * update misses this rank's own (tests/cli/test_dist_zero2.sh) */
    const char *mu = getenv("FFN_DIST_MUTATE");
    *rank = mu && !strcmp(mu, "zero-held-owner") ? (r + 1) % P : r;
    *size = P;
    return g;
}
static ffn_status hook_held_allgatherv(void *u, int group, float *buf, const int *counts,
                                       const int *displs) {
    ffn_dist *d = u;
    MPI_Request req;
    int rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs, MPI_FLOAT,
                             d->comm[group ? FFN_DIST_EXPERT_REPLICAS : FFN_DIST_DP], &req);
    return rc != MPI_SUCCESS ? dist_mpi_error(rc, "parameter all-gather")
                             : dist_wait(d, 1, &req, NULL, "parameter all-gather");
}

static ffn_status hook_held_gatherv(void *u, float *buf, const float *part, const int *counts,
                                    const int *displs) {
    ffn_dist *d = u;
    const int me = d->grank[FFN_DIST_DP];
    MPI_Request req;
    int rc = MPI_Igatherv(me == 0 ? MPI_IN_PLACE : part, counts[me], MPI_FLOAT, buf, counts, displs,
                          MPI_FLOAT, 0, d->comm[FFN_DIST_DP], &req);
    return rc != MPI_SUCCESS ? dist_mpi_error(rc, "the checkpoint's gather")
                             : dist_wait(d, 1, &req, NULL, "the checkpoint's gather");
}

static ffn_status hook_held_rs(void *u, int group, float *buf, const int *counts) {
    ffn_dist *d = u;
    const ffn_dist_group grp = group ? FFN_DIST_EXPERT_REPLICAS : FFN_DIST_DP;
    const int P = d->gsize[grp], me = d->grank[grp];
    const double t0 = MPI_Wtime();
    int64_t at = 0, total = 0;
    for (int r = 0; r < P; r++) {
        if (r < me) at += counts[r];
        total += counts[r];
    }
    /* a test's mutation: the reduce-scatters of the tensors of 2048 or more
     * floats left out, so their gradients stay this rank's partial sums
     * (tests/cli/test_dist_zero2.sh) */
    const char *mu = getenv("FFN_DIST_MUTATE");
    if (mu && !strcmp(mu, "zero2-skip-bucket") && total >= 2048) return FFN_OK;
    float *recv = scratch(d, (size_t)(counts[me] ? counts[me] : 1) * sizeof *recv);
    if (!recv) return ffn_set_error(FFN_ERR_NOMEM, "out of memory (reduce-scatter of %lld values)",
                                    (long long)total);
    MPI_Request req;
    int rc = MPI_Ireduce_scatter(buf, recv, counts, MPI_FLOAT, MPI_SUM, d->comm[grp], &req);
    ffn_status st = rc != MPI_SUCCESS ? dist_mpi_error(rc, "gradient reduce-scatter")
                                      : dist_wait(d, 1, &req, NULL, "gradient reduce-scatter");
    if (st == FFN_OK) memcpy(buf + at, recv, (size_t)counts[me] * sizeof *recv);
    /* one call a step (the tensors come in the block's order), a bucket a tensor */
    d->grad_stats.calls += !d->rs_prev || buf <= d->rs_prev;
    d->rs_prev = buf;
    d->grad_stats.seconds += MPI_Wtime() - t0;
    d->grad_stats.wait_seconds += MPI_Wtime() - t0;
    d->grad_stats.comm_seconds += MPI_Wtime() - t0;
    d->grad_stats.buckets++;
    d->grad_stats.floats += total;
    return st;
}

/* The overlapped sums (overlap.c): the path the hooks chose
 * (d->overlap_mode), planned for the model at the step's start. */
static ffn_status hook_grads_begin(void *u, ffn_model *m, float *g, int64_t n) {
    ffn_dist *d = u;
    if (d->overlap_mode == DIST_OVERLAP_RING && n != ffn_model_num_params(m))
        return ffn_set_error(FFN_ERR_INVALID_ARG, "gradient reduction: %lld values for a model of "
                             "%lld parameters", (long long)n, (long long)ffn_model_num_params(m));
    ffn_status st = dist_overlap_plan(d, &d->ov, d->overlap_mode, m, n, d->bucket);
    if (st != FFN_OK) return st;
    int64_t lo = 0, hi = n;
    if (d->overlap_mode == DIST_OVERLAP_RS) { /* this rank's segments (as hook_rs2's) */
        int64_t count;
        dist_split(n, d->gsize[FFN_DIST_DP], d->grank[FFN_DIST_DP], &lo, &count);
        hi = lo + count;
    }
    dist_overlap_begin(d->ov, g, lo, hi);
    return FFN_OK;
}
static ffn_status hook_grads_ready(void *u, int64_t level) {
    ffn_dist *d = u;
    return dist_overlap_ready(d, d->ov, level);
}
static ffn_status hook_grads_finish(void *u) {
    ffn_dist *d = u;
    return dist_overlap_finish(d, d->ov);
}
static void overlap_hooks(ffn_dist *d, ffn_train_dist *t, int mode) {
    d->overlap_mode = d->overlap ? mode : 0;
    t->grads_begin = d->overlap_mode ? hook_grads_begin : NULL;
    t->grads_ready = d->overlap_mode ? hook_grads_ready : NULL;
    t->grads_finish = d->overlap_mode ? hook_grads_finish : NULL;
}

static ffn_status zero_hooks(ffn_dist *d, ffn_train_dist *t, int stage) {
    if (!d || !t) return ffn_set_error(FFN_ERR_INVALID_ARG, "ffn_dist_train_hooks_zero%d: NULL argument", stage);
    if (d->pp > 1 && stage == 2)
        return ffn_set_error(FFN_ERR_UNSUPPORTED, "--zero %d with --pp %d is not supported yet "
                             "(--zero 1 is: a stage's moments sharded over its --dp ranks)", stage,
                             d->pp);
    if (d->pp > 1) { /* a stage's held tensors, split over the stage's dp group */
        t->held_group = dist_pp_held_group;
        t->held_allgatherv = hook_held_allgatherv; /* group 0: the stage's dp group */
        return FFN_OK; /* a save all-gathers the stage's moments (its dp rank 0 is no writer) */
    }
    /* overlapped: ZeRO-2's bucketed reduce-scatter with --tp 1 and --ep 1
     * only (ZeRO-1 is one ring over the whole block; with --tp the tensor-
     * parallel sums come first, with --ep a tensor at a time) */
    overlap_hooks(d, t, stage == 2 && d->tp == 1 && !ep_layout(d) ? DIST_OVERLAP_RS : 0);
    if (ep_layout(d)) { /* the sharded state's tensors, split over their groups */
        t->held_group = hook_held_group;
        t->held_allgatherv = hook_held_allgatherv;
        t->held_gatherv = hook_held_gatherv;
        if (stage == 2) t->held_reduce_scatter = hook_held_rs, t->zero_grads = 1;
        return FFN_OK;
    }
    if (stage == 2 && d->gsize[FFN_DIST_DP] < 2)
        return ffn_set_error(FFN_ERR_INVALID_ARG,
                             "--zero 2 with --dp %d: ZeRO-2 shards the gradients and the optimizer "
                             "over the data-parallel ranks, and the %d ranks of the job are --tp "
                             "%d x --dp %d: give --dp 2 or more", d->dp, d->size, d->tp, d->dp);
    t->zero_range = stage == 2 ? hook_zero_range2 : hook_zero_range;
    if (d->tp > 1) t->grad_sq_range = hook_sq_range;
    t->reduce_scatter = stage == 2 ? hook_rs2 : hook_rs;
    t->zero_grads = stage == 2;
    t->all_gather = stage == 2 ? hook_ag2 : hook_ag;
    if (d->tp == 1) t->gather_range = hook_gather_range;
    return FFN_OK;
}
ffn_status ffn_dist_train_hooks_zero1(ffn_dist *d, ffn_train_dist *t) { return zero_hooks(d, t, 1); }
ffn_status ffn_dist_train_hooks_zero2(ffn_dist *d, ffn_train_dist *t) { return zero_hooks(d, t, 2); }

void ffn_dist_train_hooks(ffn_dist *d, ffn_ctx *ctx, ffn_train_dist *t) {
    memset(t, 0, sizeof *t);
    d->ctx = ctx;
    if (d->gsize[FFN_DIST_TP] > 1 || d->ep > 1) {
        t->shard = hook_shard;
        t->slice_flat = hook_slice;
        t->gather_flat = hook_gather;
        t->sync_grads = hook_sync;
        t->grad_sq = hook_sq;
        if (ep_layout(d)) {
            t->holds = hook_holds;
            t->gather_tensors = hook_gather_tensors;
            t->gather_tensor = hook_gather_one;
        }
    }
    t->rank = d->grank[FFN_DIST_DP];
    t->size = d->gsize[FFN_DIST_DP];
    t->writer = d->rank == 0;
    t->allreduce_f32 = hook_f32;
    t->allreduce_f64 = hook_f64;
    t->agree = hook_agree;
    t->check_same = hook_same;
    t->reduce_grads = hook_reduce;
    overlap_hooks(d, t, d->pp > 1 ? 0 : DIST_OVERLAP_RING); /* a stage sums its own gradients (pp_model.c) */
    t->user = d;
    if (d->pp > 1) dist_pp_train_hooks(d, t);
}
