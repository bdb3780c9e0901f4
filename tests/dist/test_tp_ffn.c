/* test_tp_ffn.c -- the tensor-parallel FFN layer against the single-process
 * layer (run under mpirun -np 2 and -np 4 by tests/cli/test_dist.sh).
 *
 * Every rank builds the same random weights, input and output gradient
 * (one seed), runs the whole layer alone (the reference) and its share of
 * the tensor-parallel layer; y, dx and every weight gradient (the rank's
 * slice of the reference's) must agree to 1e-5 relative (max |a-b| over
 * max |b|).  Cases: dense and gated, with and without biases, F that does
 * not divide by the ranks (37 over 4: units 10,9,9,9), F = P + 1, N = 1 and
 * N > 1.  Also: the fixed-order all-reduce gives every rank the same bits
 * and the same bits run to run (sum of a rank-dependent vector checked
 * against a hash broadcast from rank 0). */
#include "ffn.h"
#include "ffn/dist.h"
#include "ffn/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void fill(float *a, int64_t n, ffn_rng *r, float scale) {
    for (int64_t i = 0; i < n; i++) a[i] = (float)(ffn_rng_normal(r) * scale);
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

#define CHECK(cond, ...)                           \
    do {                                           \
        if (!(cond)) {                             \
            fprintf(stderr, "FAIL rank %d: ", rank); \
            fprintf(stderr, __VA_ARGS__);          \
            fprintf(stderr, "\n");                 \
            failures++;                            \
        }                                          \
    } while (0)

static int rank;

static void one_case(ffn_dist *d, ffn_ctx *ctx, ffn_mlp_type type, ffn_act act, int bias,
                     int64_t D, int64_t F, int64_t N) {
    ffn_layer_config cfg = {.hidden_size = D, .intermediate_size = F, .act = act, .type = type,
                            .bias = bias, .save = FFN_SAVE_ACTIVATIONS};
    const int gated = type == FFN_MLP_GATED;
    ffn_rng r;
    ffn_rng_seed(&r, 1000 + (uint64_t)(D * 31 + F * 7 + N + bias + 3 * gated));
    /* full weights and gradients (reference), one block each */
    int64_t sizes[6] = {gated ? F * D : 0, gated && bias ? F : 0, F * D, bias ? F : 0, D * F,
                        bias ? D : 0};
    float *w[6], *g[6];
    for (int k = 0; k < 6; k++) {
        w[k] = sizes[k] ? malloc((size_t)sizes[k] * sizeof(float)) : NULL;
        g[k] = sizes[k] ? calloc((size_t)sizes[k], sizeof(float)) : NULL;
        if (w[k]) fill(w[k], sizes[k], &r, 0.3f);
    }
    float *x = malloc((size_t)(N * D) * sizeof(float)), *dy = malloc((size_t)(N * D) * sizeof(float));
    fill(x, N * D, &r, 1.0f);
    fill(dy, N * D, &r, 1.0f);
    ffn_layer_params full = {w[0], w[1], w[2], w[3], w[4], w[5]};
    ffn_layer_params gfull = {g[0], g[1], g[2], g[3], g[4], g[5]};

    ffn_layer *ref = NULL;
    ffn_status st = ffn_layer_create(ctx, &cfg, &ref);
    if (st == FFN_OK) st = ffn_layer_set_weights(ref, &full);
    CHECK(st == FFN_OK, "reference layer: %s", ffn_last_error());
    size_t ws_b = ffn_layer_workspace_size(ref, N), sv_b = ffn_layer_saved_size(ref, N);
    void *ws = malloc(ws_b + 64);
    float *saved = malloc(sv_b + 64);
    float *y_ref = malloc((size_t)(N * D) * sizeof(float)), *dx_ref = malloc((size_t)(N * D) * sizeof(float));
    st = ffn_layer_forward(ref, y_ref, x, N, saved, ws, ws_b);
    if (st == FFN_OK) st = ffn_layer_backward(ref, dx_ref, &gfull, dy, x, N, saved, ws, ws_b);
    CHECK(st == FFN_OK, "reference pass: %s", ffn_last_error());

    ffn_dist_tp_layer *tp = NULL;
    st = ffn_dist_tp_layer_create(d, ctx, &cfg, &tp);
    if (st == FFN_OK) st = ffn_dist_tp_layer_set_weights(tp, &full);
    CHECK(st == FFN_OK, "tp layer: %s", ffn_last_error());
    int64_t f0, Fl;
    ffn_dist_tp_layer_slice(tp, &f0, &Fl);
    int64_t ls[6] = {gated ? Fl * D : 0, gated && bias ? Fl : 0, Fl * D, bias ? Fl : 0, D * Fl,
                     bias ? D : 0};
    float *lg[6];
    for (int k = 0; k < 6; k++) lg[k] = ls[k] ? calloc((size_t)ls[k], sizeof(float)) : NULL;
    ffn_layer_params glocal = {lg[0], lg[1], lg[2], lg[3], lg[4], lg[5]};
    size_t tws_b = ffn_dist_tp_layer_workspace_size(tp, N), tsv_b = ffn_dist_tp_layer_saved_size(tp, N);
    void *tws = malloc(tws_b + 64);
    float *tsaved = malloc(tsv_b + 64);
    float *y = malloc((size_t)(N * D) * sizeof(float)), *dx = malloc((size_t)(N * D) * sizeof(float));
    st = ffn_dist_tp_layer_forward(tp, y, x, N, tsaved, tws, tws_b);
    if (st == FFN_OK) st = ffn_dist_tp_layer_backward(tp, dx, &glocal, dy, x, N, tsaved, tws, tws_b);
    CHECK(st == FFN_OK, "tp pass: %s", ffn_last_error());

    const double tol = 1e-5;
    double ey = rel(y, y_ref, N * D), edx = rel(dx, dx_ref, N * D);
    CHECK(ey <= tol, "y differs by %.3g (%s D %lld F %lld N %lld bias %d)", ey,
          gated ? "gated" : "dense", (long long)D, (long long)F, (long long)N, bias);
    CHECK(edx <= tol, "dx differs by %.3g", edx);
    /* the gradients: this rank's slice of the reference's */
    double eg = 0;
    float *slice = malloc((size_t)(D * F + F + D) * sizeof(float));
    for (int k = 0; k < 6; k++) {
        if (!ls[k]) continue;
        int64_t n = ls[k];
        if (k == 0 || k == 2) memcpy(slice, g[k] + f0 * D, (size_t)n * sizeof(float));
        else if (k == 1 || k == 3) memcpy(slice, g[k] + f0, (size_t)n * sizeof(float));
        else if (k == 4)
            for (int64_t i = 0; i < D; i++)
                memcpy(slice + i * Fl, g[4] + i * F + f0, (size_t)Fl * sizeof(float));
        else memcpy(slice, g[5], (size_t)D * sizeof(float));
        double e = rel(lg[k], slice, n);
        if (e > eg) eg = e;
        CHECK(e <= tol, "gradient %d differs by %.3g", k, e);
    }
    if (rank == 0)
        printf("ok   tp %d: %s %s%s D %lld F %lld N %lld: y %.2g dx %.2g grads %.2g\n",
               ffn_dist_size(d, FFN_DIST_TP), gated ? "gated" : "dense", ffn_act_name(act),
               bias ? " +bias" : "", (long long)D, (long long)F, (long long)N, ey, edx, eg);
    free(slice);
    for (int k = 0; k < 6; k++) free(w[k]), free(g[k]), free(lg[k]);
    free(x), free(dy), free(ws), free(saved), free(y_ref), free(dx_ref);
    free(tws), free(tsaved), free(y), free(dx);
    ffn_layer_free(ref);
    ffn_dist_tp_layer_free(tp);
}

static uint64_t hash_bytes(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

int main(int argc, char **argv) {
    int64_t tp = argc > 1 ? atoll(argv[1]) : 1;
    ffn_dist_layout lay = {.tp = tp, .dp = 1};
    ffn_dist *d = NULL;
    ffn_status st = ffn_dist_init(&argc, &argv, &lay, &d);
    if (st != FFN_OK) {
        fprintf(stderr, "init: %s\n", ffn_last_error());
        return 1;
    }
    rank = ffn_dist_rank(d, FFN_DIST_WORLD);
    ffn_ctx *ctx = NULL;
    ffn_ctx_create(1, &ctx);
    const int P = ffn_dist_size(d, FFN_DIST_TP);

    one_case(d, ctx, FFN_MLP_GATED, FFN_ACT_SILU, 0, 24, 64, 5);
    one_case(d, ctx, FFN_MLP_GATED, FFN_ACT_GELU_TANH, 1, 17, 37, 3);
    one_case(d, ctx, FFN_MLP_DENSE, FFN_ACT_GELU, 1, 20, 37, 1);
    one_case(d, ctx, FFN_MLP_DENSE, FFN_ACT_RELU, 0, 9, P + 1, 7);
    one_case(d, ctx, FFN_MLP_GATED, FFN_ACT_SIGMOID, 1, 33, 101, 70);

    /* the fixed-order all-reduce: same bits on every rank, and run to run */
    for (int rep = 0; rep < 2; rep++) {
        int64_t n = 1001;
        float *v = malloc((size_t)n * sizeof(float));
        ffn_rng r;
        ffn_rng_seed(&r, 77 + (uint64_t)rank);
        fill(v, n, &r, 1.0f);
        st = ffn_dist_allreduce_f32(d, FFN_DIST_TP, v, n);
        CHECK(st == FFN_OK, "allreduce: %s", ffn_last_error());
        uint64_t h = hash_bytes(v, (size_t)n * sizeof(float)), h0 = h;
        ffn_dist_broadcast(d, FFN_DIST_TP, &h0, sizeof h0, 0);
        CHECK(h == h0, "all-reduce bits differ from rank 0's");
        if (rank == 0 && rep == 1) printf("ok   all-reduce: the same bits on every rank (%016llx)\n",
                                          (unsigned long long)h);
        free(v);
    }
    /* agreement: a failure on the last rank reaches every rank with its message */
    ffn_status mine = rank == P - 1 ? ffn_set_error(FFN_ERR_IO, "cannot open x.bin") : FFN_OK;
    st = ffn_dist_agree(d, mine);
    char want[64];
    snprintf(want, sizeof want, "rank %d: cannot open x.bin", P - 1);
    CHECK(st == FFN_ERR_IO && !strcmp(ffn_last_error(), want), "agree: got %d '%s'", (int)st,
          ffn_last_error());
    if (rank == 0 && !failures) printf("ok   agree: every rank has '%s'\n", want);
    st = ffn_dist_agree(d, FFN_OK);
    CHECK(st == FFN_OK, "agree all ok");

    int all_fail = failures;
    double f = failures;
    ffn_dist_allreduce_f64(d, FFN_DIST_WORLD, &f, 1);
    ffn_ctx_free(ctx);
    ffn_dist_free(d);
    if (rank == 0) printf("%s: %d failure(s) over all ranks\n", f ? "FAIL" : "PASS", (int)f);
    return all_fail || f ? 1 : 0;
}
