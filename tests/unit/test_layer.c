/* test_layer.c -- the dense/gated FFN layer against a naive double-precision
 * C reference, for every activation × dense/gated × bias × save mode on odd
 * shapes (D or F = 1, primes) and N ∈ {0, 1, 3, 4, 5, 129} (both sides of
 * the decode threshold); forward, dx and every weight and bias gradient,
 * accumulated onto non-zero gradients.  Then the properties: both save modes
 * give bitwise identical gradients, rows are independent (permutation, one
 * by one), runs are bitwise reproducible, the decode path agrees across
 * thread counts, dx = NULL and NULL gradients are skipped, bad configs and
 * calls get their specific errors.
 *
 * Tolerance: every tensor's max |ffn - ref| must be within 1e-5 of
 * max(the tensor's max |ref|, 1) (fp32 sums of at most 129 products; the
 * floor of 1 covers one-element tensors (D or F = 1) whose sums cancel;
 * the worst error per tensor is printed). */
#include "check.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static float frand(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
static float *rnd(size_t n, float scale) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = frand() * scale;
    return p;
}
static float *dup_floats(const float *p, size_t n) {
    float *q = malloc((n ? n : 1) * sizeof *q);
    if (n) memcpy(q, p, n * sizeof *q);
    return q;
}

static const ffn_act all_acts[] = {FFN_ACT_LINEAR, FFN_ACT_RELU, FFN_ACT_GELU,
                                   FFN_ACT_GELU_TANH, FFN_ACT_SILU, FFN_ACT_SIGMOID};

/* ---- a layer's tensors ---------------------------------------------------- */

typedef struct tensors {
    int64_t D, F;
    int gated, bias;
    float *w[6]; /* gate_w, gate_b, up_w, up_b, down_w, down_b (as ffn_layer_params) */
} tensors;
static const char *tensor_name[6] = {"gate_w", "gate_b", "up_w", "up_b", "down_w", "down_b"};

static size_t tensor_len(const tensors *t, int i) {
    switch (i) {
    case 0: return t->gated ? (size_t)(t->F * t->D) : 0;
    case 1: return t->gated && t->bias ? (size_t)t->F : 0;
    case 2: return (size_t)(t->F * t->D);
    case 3: return t->bias ? (size_t)t->F : 0;
    case 4: return (size_t)(t->D * t->F);
    default: return t->bias ? (size_t)t->D : 0;
    }
}
static void tensors_init(tensors *t, int64_t D, int64_t F, int gated, int bias, float scale) {
    t->D = D, t->F = F, t->gated = gated, t->bias = bias;
    for (int i = 0; i < 6; i++) {
        size_t n = tensor_len(t, i);
        t->w[i] = n ? rnd(n, scale) : NULL;
    }
}
static void tensors_copy(tensors *dst, const tensors *src) {
    *dst = *src;
    for (int i = 0; i < 6; i++) dst->w[i] = src->w[i] ? dup_floats(src->w[i], tensor_len(src, i)) : NULL;
}
static void tensors_free(tensors *t) {
    for (int i = 0; i < 6; i++) free(t->w[i]);
}
static ffn_layer_params as_params(const tensors *t) {
    ffn_layer_params p = {t->w[0], t->w[1], t->w[2], t->w[3], t->w[4], t->w[5]};
    return p;
}

/* ---- the naive reference, in double ---------------------------------------
 * y = down(act(gate(x)) ⊙ up(x)) or down(act(up(x))); grads added to g. */
static void reference(const tensors *w, ffn_act act, int64_t n, const float *x, const float *dy,
                      float *y, float *dx, tensors *g) {
    int64_t D = w->D, F = w->F;
    double *pg = malloc(F * sizeof *pg), *pu = malloc(F * sizeof *pu), *h = malloc(F * sizeof *h);
    double *dg = malloc(F * sizeof *dg), *du = malloc(F * sizeof *du);
    double *acc[6]; /* gradient sums over the tokens, in double */
    for (int i = 0; i < 6; i++) acc[i] = calloc(tensor_len(w, i) + 1, sizeof(double));
    for (int64_t t = 0; t < n; t++) {
        const float *xt = x + t * D;
        for (int64_t j = 0; j < F; j++) {
            double a = w->bias ? w->w[3][j] : 0, b = (w->gated && w->bias) ? w->w[1][j] : 0;
            for (int64_t k = 0; k < D; k++) {
                a += (double)w->w[2][j * D + k] * xt[k];
                if (w->gated) b += (double)w->w[0][j * D + k] * xt[k];
            }
            pu[j] = a, pg[j] = b;
            h[j] = w->gated ? ffn_act_forward(act, (float)b) * a : ffn_act_forward(act, (float)a);
        }
        for (int64_t i = 0; i < D; i++) {
            double s = w->bias ? w->w[5][i] : 0;
            for (int64_t j = 0; j < F; j++) s += (double)w->w[4][i * F + j] * h[j];
            y[t * D + i] = (float)s;
        }
        if (!dy) continue;
        const float *dyt = dy + t * D;
        for (int64_t j = 0; j < F; j++) {
            double dh = 0;
            for (int64_t i = 0; i < D; i++) dh += (double)dyt[i] * w->w[4][i * F + j];
            if (w->gated) {
                dg[j] = dh * pu[j] * ffn_act_grad(act, (float)pg[j]);
                du[j] = dh * ffn_act_forward(act, (float)pg[j]);
            } else {
                du[j] = dh * ffn_act_grad(act, (float)pu[j]);
                dg[j] = 0;
            }
        }
        for (int64_t i = 0; i < D; i++) {
            for (int64_t j = 0; j < F; j++) acc[4][i * F + j] += dyt[i] * h[j];
            if (w->bias) acc[5][i] += dyt[i];
        }
        for (int64_t j = 0; j < F; j++) {
            for (int64_t k = 0; k < D; k++) {
                acc[2][j * D + k] += du[j] * xt[k];
                if (w->gated) acc[0][j * D + k] += dg[j] * xt[k];
            }
            if (w->bias) acc[3][j] += du[j];
            if (w->bias && w->gated) acc[1][j] += dg[j];
        }
        for (int64_t k = 0; k < D; k++) {
            double s = 0;
            for (int64_t j = 0; j < F; j++) {
                s += du[j] * w->w[2][j * D + k];
                if (w->gated) s += dg[j] * w->w[0][j * D + k];
            }
            dx[t * D + k] = (float)s;
        }
    }
    for (int i = 0; i < 6; i++) {
        for (size_t j = 0; j < tensor_len(w, i); j++) g->w[i][j] = (float)(g->w[i][j] + acc[i][j]);
        free(acc[i]);
    }
    free(pg); free(pu); free(h); free(dg); free(du);
}

/* max |a - b| / max(max |b|, 1): relative for tensors of size ~1 and more,
 * absolute below (one-element tensors whose sums cancel, D or F = 1) */
static double rel_err(const float *a, const float *b, size_t n) {
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= e)) e = d; /* NaN wins */
        if (fabs(b[i]) > m) m = fabs(b[i]);
    }
    return e / (m > 1 ? m : 1);
}

/* ---- one layer run: create, forward, backward ----------------------------- */

typedef struct run_out {
    float *y, *dx;
    tensors g;
} run_out;

static ffn_status run_layer(ffn_ctx *ctx, const tensors *w, ffn_act act, ffn_save_mode save,
                            int64_t n, const float *x, const float *dy, const tensors *g0,
                            int want_dx, run_out *out) {
    ffn_layer_config cfg = {.hidden_size = w->D, .intermediate_size = w->F, .act = act,
                            .type = w->gated ? FFN_MLP_GATED : FFN_MLP_DENSE, .bias = w->bias,
                            .save = save};
    ffn_layer *l = NULL;
    ffn_status st = ffn_layer_create(ctx, &cfg, &l);
    if (st) return st;
    ffn_layer_params p = as_params(w);
    st = ffn_layer_set_weights(l, &p);
    size_t ws_bytes = ffn_layer_workspace_size(l, n), saved_bytes = ffn_layer_saved_size(l, n);
    void *ws = malloc(ws_bytes ? ws_bytes : 1);
    float *saved = saved_bytes ? malloc(saved_bytes) : NULL;
    out->y = rnd((size_t)(n * w->D), 1);
    out->dx = rnd((size_t)(n * w->D), 1);
    tensors_copy(&out->g, g0);
    if (!st) st = ffn_layer_forward(l, out->y, x, n, saved, ws, ws_bytes);
    ffn_layer_params gp = as_params(&out->g);
    if (!st && dy)
        st = ffn_layer_backward(l, want_dx ? out->dx : NULL, &gp, dy, x, n, saved, ws, ws_bytes);
    free(ws);
    free(saved);
    ffn_layer_free(l);
    return st;
}
static void run_free(run_out *r) {
    free(r->y);
    free(r->dx);
    tensors_free(&r->g);
}

/* ---- against the reference ------------------------------------------------- */

static double worst_by_tensor[8];

static void test_against_reference(ffn_ctx *ctx) {
    static const int64_t shapes[][2] = {{1, 1}, {7, 13}, {16, 1}, {1, 9}, {33, 65}};
    static const int64_t ns[] = {0, 1, 3, 4, 5, 129};
    const double tol = 1e-5;
    int cases = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int gated = 0; gated < 2; gated++)
            for (int bias = 0; bias < 2; bias++)
                for (size_t a = 0; a < 6; a++)
                    for (size_t in = 0; in < sizeof ns / sizeof ns[0]; in++)
                        for (int save = 0; save < 2; save++) {
                            int64_t D = shapes[s][0], F = shapes[s][1], n = ns[in];
                            ffn_act act = all_acts[a];
                            tensors w, g0, gref;
                            tensors_init(&w, D, F, gated, bias, 0.5f);
                            tensors_init(&g0, D, F, gated, bias, 1.0f);
                            tensors_copy(&gref, &g0);
                            float *x = rnd((size_t)(n * D), 2.0f), *dy = rnd((size_t)(n * D), 1.0f);
                            float *yref = malloc((n * D + 1) * 4), *dxref = malloc((n * D + 1) * 4);
                            reference(&w, act, n, x, dy, yref, dxref, &gref);
                            run_out r;
                            ffn_status st = run_layer(ctx, &w, act, save, n, x, dy, &g0, 1, &r);
                            CHECK(st == FFN_OK, "run: %s", ffn_last_error());
                            double e[8];
                            e[6] = rel_err(r.y, yref, (size_t)(n * D));
                            e[7] = rel_err(r.dx, dxref, (size_t)(n * D));
                            for (int i = 0; i < 6; i++)
                                e[i] = r.g.w[i] ? rel_err(r.g.w[i], gref.w[i], tensor_len(&w, i)) : 0;
                            for (int i = 0; i < 8; i++) {
                                if (e[i] > worst_by_tensor[i] || isnan(e[i])) worst_by_tensor[i] = e[i];
                                CHECK(e[i] <= tol, "%s %s bias=%d %s D=%lld F=%lld N=%lld save=%d: "
                                      "%s rel. error %.3g > %.0e",
                                      gated ? "gated" : "dense", ffn_act_name(act), bias,
                                      "", (long long)D, (long long)F, (long long)n, save,
                                      i < 6 ? tensor_name[i] : i == 6 ? "y" : "dx", e[i], tol);
                            }
                            cases++;
                            run_free(&r);
                            tensors_free(&w); tensors_free(&g0); tensors_free(&gref);
                            free(x); free(dy); free(yref); free(dxref);
                        }
    printf("reference: %d cases; max error relative to max(max |ref|, 1) "
           "(tolerance %.0e):\n ", cases, tol);
    static const char *names[8] = {"gate_w", "gate_b", "up_w", "up_b", "down_w", "down_b", "y", "dx"};
    for (int i = 0; i < 8; i++) printf(" %s %.2g", names[i], worst_by_tensor[i]);
    printf("\n");
}

/* ---- properties ------------------------------------------------------------ */

static int same_bits(const float *a, const float *b, size_t n) { return !memcmp(a, b, n * 4); }
static int same_grads(const run_out *a, const run_out *b) {
    for (int i = 0; i < 6; i++)
        if (a->g.w[i] && !same_bits(a->g.w[i], b->g.w[i], tensor_len(&a->g, i))) return 0;
    return 1;
}

static void test_properties(ffn_ctx *ctx) {
    static const int64_t ns[] = {1, 3, 4, 5, 129};
    for (int gated = 0; gated < 2; gated++)
        for (size_t in = 0; in < sizeof ns / sizeof ns[0]; in++) {
            int64_t D = 24, F = 40, n = ns[in];
            ffn_act act = gated ? FFN_ACT_SILU : FFN_ACT_GELU;
            tensors w, g0;
            tensors_init(&w, D, F, gated, 1, 0.5f);
            tensors_init(&g0, D, F, gated, 1, 0.0f);
            float *x = rnd(n * D, 1), *dy = rnd(n * D, 1);
            run_out a, b, c, d;
            run_layer(ctx, &w, act, FFN_SAVE_ACTIVATIONS, n, x, dy, &g0, 1, &a);
            run_layer(ctx, &w, act, FFN_SAVE_NONE, n, x, dy, &g0, 1, &b);
            run_layer(ctx, &w, act, FFN_SAVE_ACTIVATIONS, n, x, dy, &g0, 1, &c);
            run_layer(ctx, &w, act, FFN_SAVE_ACTIVATIONS, n, x, dy, &g0, 0, &d);
            CHECK(same_bits(a.y, b.y, n * D) && same_bits(a.dx, b.dx, n * D) && same_grads(&a, &b),
                  "%s n=%lld: save modes differ", gated ? "gated" : "dense", (long long)n);
            CHECK(same_bits(a.y, c.y, n * D) && same_bits(a.dx, c.dx, n * D) && same_grads(&a, &c),
                  "%s n=%lld: not bitwise reproducible run to run", gated ? "gated" : "dense",
                  (long long)n);
            CHECK(same_grads(&a, &d), "%s n=%lld: dx = NULL changes the weight gradients",
                  gated ? "gated" : "dense", (long long)n);
            run_free(&a); run_free(&b); run_free(&c); run_free(&d);
            tensors_free(&w); tensors_free(&g0);
            free(x); free(dy);
        }
}

/* Row independence: permuting the rows permutes the outputs, and a batch
 * equals the rows run one by one, within 1e-5 of max |y| (the batch may
 * take the matrix engine, one row the streaming path). */
static void test_position_wise(ffn_ctx *ctx) {
    const int64_t D = 37, F = 83, n = 129;
    tensors w, g0;
    tensors_init(&w, D, F, 1, 1, 0.5f);
    tensors_init(&g0, D, F, 1, 1, 0.0f);
    float *x = rnd(n * D, 1), *xp = malloc(n * D * 4), *yrow = malloc(n * D * 4);
    int64_t *perm = malloc(n * sizeof *perm);
    for (int64_t i = 0; i < n; i++) perm[i] = (i * 53 + 7) % n; /* 53 is coprime to 129 */
    for (int64_t i = 0; i < n; i++) memcpy(xp + i * D, x + perm[i] * D, D * 4);
    run_out a, b, r;
    run_layer(ctx, &w, FFN_ACT_SILU, FFN_SAVE_ACTIVATIONS, n, x, NULL, &g0, 0, &a);
    run_layer(ctx, &w, FFN_ACT_SILU, FFN_SAVE_ACTIVATIONS, n, xp, NULL, &g0, 0, &b);
    float *yb = malloc(n * D * 4);
    for (int64_t i = 0; i < n; i++) memcpy(yb + perm[i] * D, b.y + i * D, D * 4);
    double e_perm = rel_err(yb, a.y, n * D);
    for (int64_t i = 0; i < n; i++) {
        run_layer(ctx, &w, FFN_ACT_SILU, FFN_SAVE_ACTIVATIONS, 1, x + i * D, NULL, &g0, 0, &r);
        memcpy(yrow + i * D, r.y, D * 4);
        run_free(&r);
    }
    double e_rows = rel_err(yrow, a.y, n * D);
    CHECK(e_perm <= 1e-5, "permuted rows: error %g", e_perm);
    CHECK(e_rows <= 1e-5, "rows one by one: error %g", e_rows);
    printf("position-wise: permuted rows %s (%.2g), one by one vs batch %.2g (tolerance 1e-5 of "
           "max |y|)\n", e_perm == 0 ? "bitwise equal" : "differ", e_perm, e_rows);
    run_free(&a); run_free(&b);
    tensors_free(&w); tensors_free(&g0);
    free(x); free(xp); free(yrow); free(yb); free(perm);
}

/* The decode path (n <= FFN_DECODE_MAX_N) promises the same bits at every
 * thread count; the matrix-engine path is reported, not promised. */
static void test_threads(void) {
    ffn_ctx *c1, *c2;
    ffn_ctx_create(1, &c1);
    ffn_ctx_create(2, &c2);
    const int64_t D = 512, F = 1040; /* n·2F·D >= 2^20 even at n = 1: runs parallel */
    tensors w, g0;
    tensors_init(&w, D, F, 1, 1, 0.5f);
    tensors_init(&g0, D, F, 1, 1, 0.0f);
    for (int64_t n = 1; n <= 129; n += 128) { /* decode path, matrix engine */
        float *x = rnd(n * D, 1), *dy = rnd(n * D, 1);
        run_out a, b;
        run_layer(c1, &w, FFN_ACT_SILU, FFN_SAVE_ACTIVATIONS, n, x, dy, &g0, 1, &a);
        run_layer(c2, &w, FFN_ACT_SILU, FFN_SAVE_ACTIVATIONS, n, x, dy, &g0, 1, &b);
        int fwd = same_bits(a.y, b.y, n * D), bwd = same_bits(a.dx, b.dx, n * D) && same_grads(&a, &b);
        if (n <= FFN_DECODE_MAX_N) CHECK(fwd, "decode forward n=%lld differs between 1 and 2 threads", (long long)n);
        printf("threads 1 vs 2, n=%lld: forward %s, backward %s\n", (long long)n,
               fwd ? "bitwise equal" : "differs", bwd ? "bitwise equal" : "differs");
        run_free(&a); run_free(&b);
        free(x); free(dy);
    }
    tensors_free(&w); tensors_free(&g0);
    ffn_ctx_free(c1);
    ffn_ctx_free(c2);
}

/* NULL gradient pointers are skipped and the others still accumulate. */
static void test_null_grads(ffn_ctx *ctx) {
    const int64_t D = 5, F = 11, n = 4;
    tensors w, g0, gnull;
    tensors_init(&w, D, F, 1, 1, 0.5f);
    tensors_init(&g0, D, F, 1, 1, 0.0f);
    float *x = rnd(n * D, 1), *dy = rnd(n * D, 1);
    run_out full;
    run_layer(ctx, &w, FFN_ACT_GELU, FFN_SAVE_ACTIVATIONS, n, x, dy, &g0, 1, &full);
    for (int keep = 0; keep < 6; keep++) {
        tensors_copy(&gnull, &g0);
        for (int i = 0; i < 6; i++)
            if (i != keep) {
                free(gnull.w[i]);
                gnull.w[i] = NULL;
            }
        run_out r;
        ffn_status st = run_layer(ctx, &w, FFN_ACT_GELU, FFN_SAVE_ACTIVATIONS, n, x, dy, &gnull, 1, &r);
        CHECK(st == FFN_OK && same_bits(r.g.w[keep], full.g.w[keep], tensor_len(&w, keep)) &&
                  same_bits(r.dx, full.dx, n * D),
              "only %s requested: differs", tensor_name[keep]);
        run_free(&r);
        tensors_free(&gnull);
    }
    run_free(&full);
    tensors_free(&w); tensors_free(&g0);
    free(x); free(dy);
}

/* ---- errors ----------------------------------------------------------------- */

static void expect(ffn_status got, ffn_status want, const char *needle, const char *what) {
    CHECK(got == want, "%s: status %d, expected %d (%s)", what, got, want, ffn_last_error());
    CHECK(strstr(ffn_last_error(), needle) != NULL, "%s: message '%s' lacks '%s'", what,
          ffn_last_error(), needle);
}

static void test_errors(ffn_ctx *ctx) {
    ffn_layer_config ok = {.hidden_size = 8, .intermediate_size = 16, .act = FFN_ACT_SILU,
                           .type = FFN_MLP_GATED};
    ffn_layer_config c = ok;
    CHECK(ffn_layer_config_validate(&ok) == FFN_OK, "valid config rejected: %s", ffn_last_error());
    c.hidden_size = 0;
    expect(ffn_layer_config_validate(&c), FFN_ERR_CONFIG, "hidden_size", "D = 0");
    c = ok, c.intermediate_size = -3;
    expect(ffn_layer_config_validate(&c), FFN_ERR_CONFIG, "intermediate_size", "F < 0");
    c = ok, c.hidden_size = INT64_C(1) << 40, c.intermediate_size = INT64_C(1) << 30;
    expect(ffn_layer_config_validate(&c), FFN_ERR_OVERFLOW, "overflow", "D·F overflow");
    c = ok, c.act = (ffn_act)42;
    expect(ffn_layer_config_validate(&c), FFN_ERR_CONFIG, "hidden_act", "act out of range");
    c = ok, c.type = (ffn_mlp_type)7;
    expect(ffn_layer_config_validate(&c), FFN_ERR_CONFIG, "mlp_type", "type out of range");
    c = ok, c.save = (ffn_save_mode)5;
    expect(ffn_layer_config_validate(&c), FFN_ERR_CONFIG, "save", "save out of range");
    c = ok, c.type = FFN_MLP_AUTO;
    CHECK(ffn_layer_config_validate(&c) == FFN_OK, "auto is a valid config");
    ffn_layer *l = NULL;
    expect(ffn_layer_create(ctx, &c, &l), FFN_ERR_CONFIG, "mlp_type", "create with auto");
    CHECK(l == NULL, "no layer on failure");

    CHECK(ffn_layer_num_params(&ok) == 3 * 8 * 16, "num_params gated");
    c = ok, c.type = FFN_MLP_DENSE, c.bias = 1;
    CHECK(ffn_layer_num_params(&c) == 2 * 8 * 16 + 16 + 8, "num_params dense+bias");
    c = ok, c.bias = 1;
    CHECK(ffn_layer_num_params(&c) == 3 * 8 * 16 + 2 * 16 + 8, "num_params gated+bias");
    CHECK(ffn_layer_flops_per_token(&ok) == 6 * 8 * 16, "flops gated");

    CHECK(ffn_layer_create(ctx, &ok, &l) == FFN_OK, "create");
    float *wt = rnd(3 * 8 * 16, 1), *x = rnd(8 * 4, 1), *y = malloc(8 * 4 * 4);
    size_t ws_bytes = ffn_layer_workspace_size(l, 4);
    void *ws = malloc(ws_bytes);
    expect(ffn_layer_forward(l, y, x, 4, NULL, ws, ws_bytes), FFN_ERR_INVALID_ARG, "weights",
           "forward without weights");
    ffn_layer_params p = {.gate_w = wt, .up_w = wt + 128};
    expect(ffn_layer_set_weights(l, &p), FFN_ERR_MISSING, "down_proj.weight", "missing down");
    p.down_w = wt + 256;
    CHECK(ffn_layer_set_weights(l, &p) == FFN_OK, "set weights");
    expect(ffn_layer_forward(l, y, x, 4, NULL, ws, ws_bytes - 65), FFN_ERR_WORKSPACE, "workspace",
           "small workspace");
    expect(ffn_layer_forward(l, y, x, -1, NULL, ws, ws_bytes), FFN_ERR_INVALID_ARG, "n = -1",
           "negative n");
    CHECK(ffn_layer_forward(l, y, x, 0, NULL, NULL, 0) == FFN_OK, "n = 0 is a no-op");
    CHECK(ffn_layer_backward(l, NULL, NULL, NULL, NULL, 0, NULL, NULL, 0) == FFN_OK,
          "n = 0 backward is a no-op");
    CHECK(ffn_layer_forward(l, y, x, 4, NULL, ws, ws_bytes) == FFN_OK, "inference without saved");
    expect(ffn_layer_backward(l, y, NULL, x, x, 4, NULL, ws, ws_bytes), FFN_ERR_INVALID_ARG,
           "saved", "backward without saved");
    CHECK(ffn_layer_saved_size(l, 4) == 4 * 32 * 4, "saved size gated = 2F floats a token");
    ffn_layer_free(l);
    ffn_layer_free(NULL);
    free(wt); free(x); free(y); free(ws);
}

int main(void) {
    ffn_ctx *ctx;
    if (ffn_ctx_create(0, &ctx)) return 1;
    printf("simd %s, threads %d, decode path for n <= %d\n", ffn_simd_level(),
           ffn_ctx_threads(ctx), FFN_DECODE_MAX_N);
    test_errors(ctx);
    test_against_reference(ctx);
    test_properties(ctx);
    test_position_wise(ctx);
    test_null_grads(ctx);
    test_threads();
    ffn_ctx_free(ctx);
    return check_done("test_layer");
}
