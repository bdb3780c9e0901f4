/* test_ep_moe.c -- the expert-parallel MoE against the single-process MoE
 * (mpirun -np 2 and -np 4, run by tests/cli/test_dist.sh).
 *
 * Every rank has its own tokens (a different count per rank) and runs the
 * whole MoE alone on them (the reference) and the expert-parallel layer.
 * y, dx, the router's and the shared expert's gradients must equal the
 * rank's reference to 1e-5 relative; the gradients of each rank's experts
 * must equal the sum over all ranks of the references' gradients of those
 * experts.  Cases: E divisible and not divisible by the ranks, K = 1 and
 * K > 1, capacity drops, a shared expert, dense and gated experts, and a
 * rank with so few tokens that some experts get none from it.  Also: with
 * identity experts and unit weights (K = 1, renormalised), dispatch then
 * combine gives back x bitwise. */
#include "ffn.h"
#include "ffn/dist.h"
#include "ffn/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, failures;

#define CHECK(cond, ...)                                \
    do {                                                \
        if (!(cond)) {                                  \
            fprintf(stderr, "FAIL rank %d: ", rank);    \
            fprintf(stderr, __VA_ARGS__);               \
            fprintf(stderr, "\n");                      \
            failures++;                                 \
        }                                               \
    } while (0)

static void fill(float *a, int64_t n, ffn_rng *r, float s) {
    for (int64_t i = 0; i < n; i++) a[i] = (float)(ffn_rng_normal(r) * s);
}

static double rel(const float *a, const float *b, int64_t n) {
    double m = 0, d = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (e > d) d = e;
        if (fabs(b[i]) > m) m = fabs(b[i]);
    }
    return m > 0 ? d / m : d;
}

/* The six tensors of a layer config, zeroed or random. */
static int64_t psize(const ffn_layer_config *c, int k) {
    int64_t D = c->hidden_size, F = c->intermediate_size;
    int g = c->type == FFN_MLP_GATED, b = c->bias;
    int64_t s[6] = {g ? F * D : 0, g && b ? F : 0, F * D, b ? F : 0, D * F, b ? D : 0};
    return s[k];
}
static ffn_layer_params palloc(const ffn_layer_config *c, ffn_rng *r) {
    float *t[6];
    for (int k = 0; k < 6; k++) {
        int64_t n = psize(c, k);
        t[k] = n ? calloc((size_t)n, sizeof(float)) : NULL;
        if (t[k] && r) fill(t[k], n, r, 0.3f);
    }
    return (ffn_layer_params){t[0], t[1], t[2], t[3], t[4], t[5]};
}
static void pfree(ffn_layer_params *p) {
    free(p->gate_w), free(p->gate_b), free(p->up_w), free(p->up_b), free(p->down_w), free(p->down_b);
}
static float **ptr(ffn_layer_params *p, int k) {
    float **a[6] = {&p->gate_w, &p->gate_b, &p->up_w, &p->up_b, &p->down_w, &p->down_b};
    return a[k];
}

static void one_case(ffn_dist *d, ffn_ctx *ctx, int64_t E, int64_t K, ffn_mlp_type type,
                     double capacity, int64_t Fs, int64_t N0, int identity) {
    const int P = ffn_dist_size(d, FFN_DIST_EP);
    const int64_t D = identity ? 16 : 12, F = identity ? 16 : 10;
    ffn_moe_config cfg = {.hidden_size = D, .num_experts = E, .num_experts_per_tok = K,
                          .moe_intermediate_size = F,
                          .act = identity ? FFN_ACT_LINEAR : FFN_ACT_SILU,
                          .expert_type = type, .norm_topk_prob = 1,
                          .scoring = FFN_MOE_SCORING_SOFTMAX, .routed_scaling_factor = 1,
                          .shared_expert_intermediate_size = Fs, .capacity_factor = capacity,
                          .save = FFN_SAVE_ACTIVATIONS};
    ffn_layer_config ec = ffn_moe_expert_config(&cfg, 0), sc = ffn_moe_expert_config(&cfg, 1);
    ffn_rng r;
    ffn_rng_seed(&r, 4242 + (uint64_t)(E * 10 + K + (int)type * 100 + Fs));
    /* weights: the same on every rank */
    ffn_layer_params *ex = calloc((size_t)E, sizeof *ex), *eg = calloc((size_t)E, sizeof *eg);
    for (int64_t e = 0; e < E; e++) {
        ex[e] = palloc(&ec, &r);
        eg[e] = palloc(&ec, NULL);
        if (identity) { /* up = I, down = I: the expert returns its input */
            memset(ex[e].up_w, 0, (size_t)(F * D) * sizeof(float));
            memset(ex[e].down_w, 0, (size_t)(D * F) * sizeof(float));
            for (int64_t i = 0; i < D; i++) ex[e].up_w[i * D + i] = ex[e].down_w[i * F + i] = 1.0f;
        }
    }
    float *wr = malloc((size_t)(E * D) * sizeof(float)), *gwr = calloc((size_t)(E * D), sizeof(float));
    fill(wr, E * D, &r, 0.5f);
    ffn_layer_params sh = {0}, gsh = {0};
    float *sgate = NULL, *gsgate = NULL;
    if (Fs) {
        sh = palloc(&sc, &r), gsh = palloc(&sc, NULL);
        sgate = malloc((size_t)D * sizeof(float)), gsgate = calloc((size_t)D, sizeof(float));
        fill(sgate, D, &r, 0.5f);
    }
    /* this rank's tokens */
    int64_t N = N0 + rank * 3;
    ffn_rng_seed(&r, 99 + (uint64_t)rank);
    float *x = malloc((size_t)(N * D) * sizeof(float)), *dy = malloc((size_t)(N * D) * sizeof(float));
    fill(x, N * D, &r, 1.0f);
    fill(dy, N * D, &r, 1.0f);

    ffn_moe_params w = {.router_w = wr, .experts = ex, .shared = sh, .shared_gate_w = sgate};
    ffn_moe_params g = {.router_w = gwr, .experts = eg, .shared = gsh, .shared_gate_w = gsgate};
    /* the reference: the whole MoE here, on this rank's tokens */
    ffn_moe *ref = NULL;
    ffn_status st = ffn_moe_create(ctx, &cfg, &ref);
    if (st == FFN_OK) st = ffn_moe_set_weights(ref, &w);
    CHECK(st == FFN_OK, "reference: %s", ffn_last_error());
    size_t wsb = ffn_moe_workspace_size(ref, N), svb = ffn_moe_saved_size(ref, N);
    void *ws = malloc(wsb), *sv = malloc(svb);
    float *y_ref = malloc((size_t)(N * D) * sizeof(float)), *dx_ref = malloc((size_t)(N * D) * sizeof(float));
    ffn_moe_outputs o = {.y = y_ref};
    st = ffn_moe_forward(ref, &o, x, N, sv, ws, wsb);
    if (st == FFN_OK) st = ffn_moe_backward(ref, dx_ref, &g, dy, x, N, sv, ws, wsb);
    CHECK(st == FFN_OK, "reference pass: %s", ffn_last_error());
    int64_t dropped = o.dropped_slots;

    /* expert parallel */
    ffn_dist_ep_moe *ep = NULL;
    st = ffn_dist_ep_moe_create(d, ctx, &cfg, &ep);
    if (st == FFN_OK) st = ffn_dist_ep_moe_set_weights(ep, &w);
    CHECK(st == FFN_OK, "ep: %s", ffn_last_error());
    int64_t e0, El;
    ffn_dist_ep_moe_experts(ep, &e0, &El);
    ffn_layer_params *leg = calloc((size_t)(El ? El : 1), sizeof *leg);
    for (int64_t j = 0; j < El; j++) leg[j] = palloc(&ec, NULL);
    ffn_dist_ep_moe_set_expert_grads(ep, leg);
    float *gwr2 = calloc((size_t)(E * D), sizeof(float)), *gsgate2 = Fs ? calloc((size_t)D, sizeof(float)) : NULL;
    ffn_layer_params gsh2 = Fs ? palloc(&sc, NULL) : (ffn_layer_params){0};
    ffn_moe_params g2 = {.router_w = gwr2, .experts = NULL, .shared = gsh2, .shared_gate_w = gsgate2};
    ffn_moe *m = ffn_dist_ep_moe_layer(ep);
    size_t wsb2 = ffn_moe_workspace_size(m, N), svb2 = ffn_moe_saved_size(m, N);
    void *ws2 = malloc(wsb2), *sv2 = malloc(svb2);
    float *y = malloc((size_t)(N * D) * sizeof(float)), *dx = malloc((size_t)(N * D) * sizeof(float));
    ffn_moe_outputs o2 = {.y = y};
    st = ffn_moe_forward(m, &o2, x, N, sv2, ws2, wsb2);
    if (st == FFN_OK) st = ffn_moe_backward(m, dx, &g2, dy, x, N, sv2, ws2, wsb2);
    CHECK(st == FFN_OK, "ep pass: %s", ffn_last_error());

    char what[160];
    snprintf(what, sizeof what, "E %lld K %lld %s cap %g shared %lld N %lld%s", (long long)E,
             (long long)K, type == FFN_MLP_GATED ? "gated" : "dense", capacity, (long long)Fs,
             (long long)N, identity ? " identity" : "");
    if (identity) {
        CHECK(!memcmp(y, x, (size_t)(N * D) * sizeof(float)), "%s: dispatch + combine is not the identity", what);
    } else {
        const double tol = 1e-5;
        double ey = rel(y, y_ref, N * D), edx = rel(dx, dx_ref, N * D), er = rel(gwr2, gwr, E * D);
        CHECK(ey <= tol, "%s: y %.3g", what, ey);
        CHECK(edx <= tol, "%s: dx %.3g", what, edx);
        CHECK(er <= tol, "%s: router grad %.3g", what, er);
        CHECK(o2.dropped_slots == dropped, "%s: dropped %lld vs %lld", what, (long long)o2.dropped_slots, (long long)dropped);
        if (Fs) {
            CHECK(rel(gsgate2, gsgate, D) <= tol, "%s: shared gate grad", what);
            for (int k = 0; k < 6; k++)
                if (psize(&sc, k)) CHECK(rel(*ptr(&gsh2, k), *ptr(&gsh, k), psize(&sc, k)) <= tol, "%s: shared grad %d", what, k);
        }
        /* experts: the sum over ranks of the references' gradients */
        double eg_max = 0;
        for (int64_t e = 0; e < E; e++)
            for (int k = 0; k < 6; k++) {
                int64_t n = psize(&ec, k);
                if (!n) continue;
                float *sum = *ptr(&eg[e], k);
                ffn_dist_allreduce_f32(d, FFN_DIST_EP, sum, n);
                if (e >= e0 && e < e0 + El) {
                    double er2 = rel(*ptr(&leg[e - e0], k), sum, n);
                    if (er2 > eg_max) eg_max = er2;
                    CHECK(er2 <= tol, "%s: expert %lld grad %d %.3g", what, (long long)e, k, er2);
                }
            }
        int64_t fwd, bwd;
        ffn_dist_ep_moe_bytes_sent(ep, &fwd, &bwd);
        if (rank == 0)
            printf("ok   ep %d: %s: y %.2g dx %.2g router %.2g experts %.2g; dropped %lld; "
                   "rank 0 sent %lld B forward, %lld B backward\n",
                   P, what, ey, edx, er, eg_max, (long long)dropped, (long long)fwd, (long long)bwd);
    }
    if (identity && rank == 0) printf("ok   ep %d: %s: y == x bitwise\n", P, what);
    for (int64_t e = 0; e < E; e++) pfree(&ex[e]), pfree(&eg[e]);
    for (int64_t j = 0; j < El; j++) pfree(&leg[j]);
    if (Fs) pfree(&sh), pfree(&gsh), pfree(&gsh2);
    free(ex), free(eg), free(leg), free(wr), free(gwr), free(gwr2), free(sgate), free(gsgate), free(gsgate2);
    free(x), free(dy), free(ws), free(sv), free(y_ref), free(dx_ref), free(ws2), free(sv2), free(y), free(dx);
    ffn_moe_free(ref);
    ffn_dist_ep_moe_free(ep);
}

int main(int argc, char **argv) {
    int64_t P = argc > 1 ? atoll(argv[1]) : 1;
    ffn_dist_layout lay = {.dp = P, .ep = P};
    ffn_dist *d = NULL;
    if (ffn_dist_init(&argc, &argv, &lay, &d) != FFN_OK) {
        fprintf(stderr, "init: %s\n", ffn_last_error());
        return 1;
    }
    rank = ffn_dist_rank(d, FFN_DIST_WORLD);
    ffn_ctx *ctx = NULL;
    ffn_ctx_create(1, &ctx);
    one_case(d, ctx, 4, 2, FFN_MLP_GATED, 0, 0, 9, 0);   /* E divisible by 2 and 4 */
    one_case(d, ctx, 6, 1, FFN_MLP_DENSE, 0, 0, 7, 0);   /* 6 over 4: 2,2,1,1 */
    one_case(d, ctx, 7, 3, FFN_MLP_GATED, 1.0, 0, 11, 0); /* capacity drops */
    one_case(d, ctx, 8, 2, FFN_MLP_GATED, 0, 6, 2, 0);   /* shared expert; 2 tokens: empty experts */
    one_case(d, ctx, 5, 1, FFN_MLP_DENSE, 0, 0, 13, 1);  /* identity experts, unit weights */
    /* a bad layout: more ranks than experts */
    ffn_moe_config small = {.hidden_size = 4, .num_experts = 1, .num_experts_per_tok = 1,
                            .moe_intermediate_size = 4, .act = FFN_ACT_SILU,
                            .expert_type = FFN_MLP_GATED, .routed_scaling_factor = 1};
    ffn_dist_ep_moe *bad = NULL;
    ffn_status st = ffn_dist_ep_moe_create(d, ctx, &small, &bad);
    CHECK(P == 1 || (st == FFN_ERR_CONFIG && strstr(ffn_last_error(), "larger than the 1 experts")),
          "ep > E: %d %s", (int)st, ffn_last_error());
    ffn_dist_ep_moe_free(bad);
    double f = failures;
    ffn_dist_allreduce_f64(d, FFN_DIST_WORLD, &f, 1);
    ffn_ctx_free(ctx);
    ffn_dist_free(d);
    if (rank == 0) printf("%s: %d failure(s) over all ranks\n", f ? "FAIL" : "PASS", (int)f);
    return f ? 1 : 0;
}
