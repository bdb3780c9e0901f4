/* test_model_grad.c -- ffn_model_forward_backward_taps (include/ffn/tap.h):
 *   - the gradient read at layers.l.mlp_out (and resid_pre, mlp_in) equals
 *     central finite differences of the caller's loss with respect to a
 *     vector added there (ADD patch), for a dense, a gated and a MoE model,
 *     at odd sizes; tolerance 2e-3 relative to the largest component
 *     (float32 forward, step 1e-2 on a loss summed in double);
 *   - with a one-hot cross-entropy loss and no taps the parameter
 *     gradients equal ffn_model_forward_backward's bit for bit;
 *   - an ADD patch changes the forward exactly as in inference (the loss
 *     the callback sees equals one computed from ffn_model_logits);
 *   - SET patches, neuron points and attn_probs selections are refused by
 *     name; a gradient of a point without one is refused. */
#include "check.h"

#include <ffn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { V = 19, D = 12, F = 15, L = 3, CTX = 9, B = 2, T = 7 };

static uint64_t rng = 12345;
static float frand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) / 16777216.0) - 0.5f;
}

static ffn_ctx *ctx;

static ffn_model *make(ffn_model_mlp type, int64_t E, int training) {
    ffn_model_config c;
    ffn_model_config_default(&c);
    c.vocab_size = V;
    c.hidden_size = D;
    c.intermediate_size = F;
    c.num_hidden_layers = L;
    c.num_attention_heads = 3;
    c.num_key_value_heads = 3;
    c.max_position_embeddings = CTX;
    c.mlp_type = type;
    c.hidden_act = type == FFN_MODEL_MLP_DENSE ? FFN_ACT_GELU : FFN_ACT_SILU;
    c.num_experts = E;
    c.num_experts_per_tok = 2;
    c.moe_intermediate_size = 5;
    c.moe_layer_freq = 2;
    ffn_model_options o = {.max_batch = B, .max_seq = T, .training = training};
    ffn_model *m = NULL;
    ffn_status st = ffn_model_create(ctx, &c, &o, &m);
    CHECK(st == FFN_OK, "create: %s", ffn_last_error());
    if (st) return NULL;
    ffn_model_init_weights(m, 3);
    int64_t n;
    float *p = ffn_model_params(m, &n);
    for (int64_t i = 0; i < n; i++) p[i] += 0.15f * frand(); /* larger than init */
    ffn_model_params_changed(m);
    return m;
}

/* soft-target cross-entropy: loss = -Σ q log softmax(z), dz = softmax(z) - q */
typedef struct soft {
    const float *q; /* (N, V) */
} soft;

static double soft_loss_row(const float *z, const float *q) {
    double mx = z[0], s = 0, l = 0;
    for (int j = 1; j < V; j++) mx = z[j] > mx ? z[j] : mx;
    for (int j = 0; j < V; j++) s += exp(z[j] - mx);
    for (int j = 0; j < V; j++) l -= q[j] * (z[j] - mx - log(s));
    return l;
}

static int soft_fn(void *user, int64_t r0, int64_t rows, int64_t nv, float *lg,
                          double *loss) {
    const soft *sf = user;
    for (int64_t r = 0; r < rows; r++) {
        float *z = lg + r * nv;
        const float *q = sf->q + (r0 + r) * nv;
        *loss += soft_loss_row(z, q);
        double mx = z[0], s = 0;
        for (int j = 1; j < nv; j++) mx = z[j] > mx ? z[j] : mx;
        for (int j = 0; j < nv; j++) s += exp(z[j] - mx);
        for (int j = 0; j < nv; j++) z[j] = (float)(exp(z[j] - mx) / s) - q[j];
    }
    return FFN_OK;
}

/* the same loss from an inference forward with the same patches */
static double eval_soft(ffn_model *mi, const int32_t *tok, const float *q) {
    static float lg[B * T * V];
    ffn_status st = ffn_model_logits(mi, lg, tok, B, T);
    CHECK(st == FFN_OK, "logits: %s", ffn_last_error());
    double l = 0;
    for (int r = 0; r < B * T; r++) l += soft_loss_row(lg + r * V, q + r * V);
    return l;
}

static void copy_weights(ffn_model *dst, ffn_model *src) {
    int64_t n;
    memcpy(ffn_model_params(dst, &n), ffn_model_params(src, NULL),
           (size_t)ffn_model_num_params(src) * sizeof(float));
    ffn_model_params_changed(dst);
}

/* d loss / d delta at (point, position) against finite differences */
static void check_point(ffn_model *mt, ffn_model *mi, const char *point, int64_t pos,
                        const int32_t *tok, const float *q, const char *what) {
    float delta[D];
    for (int i = 0; i < D; i++) delta[i] = 0.3f * frand();
    soft sf = {q};
    ffn_model_taps_clear(mt);
    ffn_status st = ffn_model_tap_patch_vector(mt, point, pos, FFN_TAP_OP_ADD, delta, D);
    if (!st) st = ffn_model_tap_select_grad(mt, point);
    CHECK(st == FFN_OK, "%s: %s", what, ffn_last_error());
    ffn_model_zero_grads(mt);
    double loss = 0;
    st = ffn_model_forward_backward_taps(mt, tok, B, T, soft_fn, &sf, &loss);
    CHECK(st == FFN_OK, "%s: forward_backward_taps: %s", what, ffn_last_error());
    ffn_tap_view g;
    st = ffn_model_tap_read_grad(mt, point, &g);
    CHECK(st == FFN_OK && g.rows == B * T && g.cols == D, "%s: read_grad: %s", what,
          ffn_last_error());
    if (st) return;
    double an[D], gmax = 0;
    for (int i = 0; i < D; i++) {
        an[i] = 0;
        for (int b = 0; b < B; b++) an[i] += ((const float *)g.data)[(b * T + pos) * D + i];
        gmax = fabs(an[i]) > gmax ? fabs(an[i]) : gmax;
    }
    /* the callback's loss is the inference loss with the same patch */
    ffn_model_taps_clear(mi);
    ffn_model_tap_patch_vector(mi, point, pos, FFN_TAP_OP_ADD, delta, D);
    double li = eval_soft(mi, tok, q);
    CHECK(fabs(li - loss) < 1e-4 * (1 + fabs(li)), "%s: loss %.8f vs inference %.8f", what, loss,
          li);
    const float h = 1e-2f;
    double worst = 0;
    for (int i = 0; i < D; i++) {
        float dp[D], dm[D];
        memcpy(dp, delta, sizeof dp);
        memcpy(dm, delta, sizeof dm);
        dp[i] += h;
        dm[i] -= h;
        ffn_model_taps_clear(mi);
        ffn_model_tap_patch_vector(mi, point, pos, FFN_TAP_OP_ADD, dp, D);
        double lp = eval_soft(mi, tok, q);
        ffn_model_taps_clear(mi);
        ffn_model_tap_patch_vector(mi, point, pos, FFN_TAP_OP_ADD, dm, D);
        double lm = eval_soft(mi, tok, q);
        double fd = (lp - lm) / (2.0 * h), e = fabs(fd - an[i]);
        worst = e > worst ? e : worst;
    }
    printf("%-28s %-26s max|grad| %.4e  max|fd - grad| %.3e\n", what, point, gmax, worst);
    CHECK(gmax > 1e-4, "%s: gradient vanishes (%g)", what, gmax);
    CHECK(worst <= 2e-3 * gmax + 1e-5, "%s: finite differences differ by %g (max grad %g)", what,
          worst, gmax);
    ffn_model_taps_clear(mi);
    ffn_model_taps_clear(mt);
}

static int onehot_fn(void *user, int64_t r0, int64_t rows, int64_t nv, float *lg,
                            double *loss) {
    const int32_t *y = user;
    const int64_t N = B * T;
    for (int64_t r = 0; r < rows; r++) {
        float *z = lg + r * nv;
        float mx = z[0];
        for (int j = 1; j < nv; j++) mx = z[j] > mx ? z[j] : mx;
        const float zy = z[y[r0 + r]];
        double s = 0;
        for (int j = 0; j < nv; j++) {
            const float e = expf(z[j] - mx);
            z[j] = e;
            s += e;
        }
        *loss += (log(s) + mx - zy) / N;
        const float f = (float)(1.0 / s) * (1.0f / (float)N);
        for (int j = 0; j < nv; j++) z[j] *= f;
        z[y[r0 + r]] -= 1.0f / (float)N;
    }
    return FFN_OK;
}

static void run_model(ffn_model_mlp type, int64_t E, const char *what) {
    ffn_model *mt = make(type, E, 1), *mi = make(type, E, 0);
    if (!mt || !mi) return;
    copy_weights(mi, mt);
    int32_t tok[B * T], y[B * T];
    float q[B * T * V];
    for (int i = 0; i < B * T; i++) {
        tok[i] = (int32_t)((frand() + 0.5f) * V) % V;
        y[i] = (int32_t)((frand() + 0.5f) * V) % V;
        double s = 0;
        for (int j = 0; j < V; j++) s += (q[i * V + j] = 0.5f + frand());
        for (int j = 0; j < V; j++) q[i * V + j] /= (float)s;
    }
    check_point(mt, mi, "layers.1.mlp_out", 4, tok, q, what);
    check_point(mt, mi, "layers.2.resid_pre", 6, tok, q, what);
    check_point(mt, mi, "layers.0.mlp_in", 2, tok, q, what);
    check_point(mt, mi, "layers.2.resid_post", 5, tok, q, what);

    /* one-hot CE through the callback == ffn_model_forward_backward */
    int64_t n;
    ffn_model_zero_grads(mt);
    ffn_model_loss ref;
    ffn_status st = ffn_model_forward_backward(mt, tok, y, B, T, 1.0f, &ref);
    CHECK(st == FFN_OK, "%s: forward_backward: %s", what, ffn_last_error());
    float *g = ffn_model_grads(mt, &n), *g0 = malloc((size_t)n * sizeof *g0);
    memcpy(g0, g, (size_t)n * sizeof *g0);
    ffn_model_zero_grads(mt);
    double loss = 0;
    st = ffn_model_forward_backward_taps(mt, tok, B, T, onehot_fn, y, &loss);
    CHECK(st == FFN_OK, "%s: taps: %s", what, ffn_last_error());
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)g[i] - g0[i]);
        worst = e > worst ? e : worst;
    }
    /* MoE: ffn_model_forward_backward adds the router losses' gradient */
    if (E == 0) {
        CHECK(worst == 0.0, "%s: parameter gradients differ by %g", what, worst);
        CHECK(fabs(loss - ref.ce) < 1e-6, "%s: loss %f vs %f", what, loss, ref.ce);
    }
    /* two pipeline stages (layers [0, 1) and [1, L)), the boundary stream
     * and its gradient passed by copies: forward_backward's bits */
    ffn_model_zero_grads(mt);
    float *x = NULL, *dx = NULL, *buf = malloc((size_t)(B * T * D) * sizeof *buf);
    ffn_model_loss l0, l1;
    st = ffn_model_stage_forward(mt, tok, y, B, T, 0, 1, 1, 1.0f, NULL, &x, &l0);
    CHECK(st == FFN_OK && x, "%s: stage 0 forward: %s", what, ffn_last_error());
    memcpy(buf, x, (size_t)(B * T * D) * sizeof *buf);
    st = ffn_model_stage_forward(mt, tok, y, B, T, 1, L, 1, 1.0f, buf, NULL, &l1);
    CHECK(st == FFN_OK, "%s: stage 1 forward: %s", what, ffn_last_error());
    st = ffn_model_stage_backward(mt, tok, B, T, 1, L, 1.0f, NULL, &dx);
    CHECK(st == FFN_OK && dx, "%s: stage 1 backward: %s", what, ffn_last_error());
    memcpy(buf, dx, (size_t)(B * T * D) * sizeof *buf);
    st = ffn_model_stage_backward(mt, tok, B, T, 0, 1, 1.0f, buf, NULL);
    CHECK(st == FFN_OK, "%s: stage 0 backward: %s", what, ffn_last_error());
    worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)g[i] - g0[i]);
        worst = e > worst ? e : worst;
    }
    CHECK(worst == 0.0, "%s: two stages: parameter gradients differ by %g", what, worst);
    CHECK(l1.ce == ref.ce && l0.aux + l1.aux == ref.aux, "%s: two stages: loss %.17g vs %.17g",
          what, l1.ce, ref.ce);
    CHECK(ffn_model_stage_forward(mt, tok, y, B, T, 1, 1, 1, 1.0f, buf, NULL, &l1) ==
              FFN_ERR_INVALID_ARG, "%s: an empty stage accepted", what);

    /* the same two stages as two models of their layers only
     * (ffn_model_options.layer_begin/end): the gradients of
     * forward_backward (a tied embedding's two parts added apart: 1e-6),
     * smaller activation blocks, other layers refused */
    ffn_model *sm[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        ffn_model_options o = {.max_batch = B, .max_seq = T, .training = 1,
                               .layer_begin = k ? 1 : 0, .layer_end = k ? L : 1};
        st = ffn_model_create(ctx, ffn_model_get_config(mt), &o, &sm[k]);
        CHECK(st == FFN_OK, "%s: stage model %d: %s", what, k, ffn_last_error());
        if (st) break;
        copy_weights(sm[k], mt);
        CHECK(ffn_model_activation_bytes(sm[k]) < ffn_model_activation_bytes(mt),
              "%s: stage model %d: %zu activation bytes, the whole model %zu", what, k,
              ffn_model_activation_bytes(sm[k]), ffn_model_activation_bytes(mt));
    }
    if (sm[0] && sm[1]) {
        st = ffn_model_stage_forward(sm[0], tok, y, B, T, 0, 1, 1, 1.0f, NULL, &x, &l0);
        if (st == FFN_OK) memcpy(buf, x, (size_t)(B * T * D) * sizeof *buf);
        if (st == FFN_OK) st = ffn_model_stage_forward(sm[1], tok, y, B, T, 1, L, 1, 1.0f, buf, NULL, &l1);
        if (st == FFN_OK) st = ffn_model_stage_backward(sm[1], tok, B, T, 1, L, 1.0f, NULL, &dx);
        if (st == FFN_OK) memcpy(buf, dx, (size_t)(B * T * D) * sizeof *buf);
        if (st == FFN_OK) st = ffn_model_stage_backward(sm[0], tok, B, T, 0, 1, 1.0f, buf, NULL);
        CHECK(st == FFN_OK, "%s: stage models: %s", what, ffn_last_error());
        const float *ga = ffn_model_grads(sm[0], NULL), *gb = ffn_model_grads(sm[1], NULL);
        worst = 0;
        for (int64_t i = 0; i < n; i++) {
            double e = fabs((double)(ga[i] + gb[i]) - g0[i]);
            worst = e > worst ? e : worst;
        }
        CHECK(worst < 1e-6, "%s: stage models: parameter gradients differ by %g", what, worst);
        CHECK(l1.ce == ref.ce, "%s: stage models: loss %.17g vs %.17g", what, l1.ce, ref.ce);
        CHECK(ffn_model_stage_forward(sm[1], tok, y, B, T, 0, L, 1, 1.0f, NULL, NULL, &l1) ==
                  FFN_ERR_INVALID_ARG, "%s: stage model 1 ran layer 0", what);
        CHECK(ffn_model_forward_backward(sm[0], tok, y, B, T, 1.0f, &l1) == FFN_ERR_INVALID_ARG,
              "%s: stage model 0 ran the whole model", what);
        /* its tensors from the seed: ffn_model_init_weights's bits */
        const int64_t nt = ffn_model_num_tensors(sm[1]);
        unsigned char *which = calloc((size_t)nt, 1);
        for (int64_t i = 0; which && i < nt; i++) which[i] = ffn_model_tensor_at(sm[1], i)->layer >= 1;
        memset(ffn_model_params(sm[1], NULL), 0, (size_t)n * sizeof(float));
        ffn_model_init_tensors(sm[1], 3, which);
        ffn_model_init_weights(mt, 3);
        const float *pa = ffn_model_params(sm[1], NULL), *pb = ffn_model_params(mt, NULL);
        int bad = 0;
        for (int64_t i = 0; which && i < nt; i++) {
            const ffn_model_tensor *t = ffn_model_tensor_at(sm[1], i);
            for (int64_t j = 0; j < t->numel; j++)
                bad += which[i] ? pa[t->offset + j] != pb[t->offset + j] : pa[t->offset + j] != 0.0f;
        }
        CHECK(which && bad == 0, "%s: ffn_model_init_tensors: %d floats differ", what, bad);
        free(which);
    }
    ffn_model_free(sm[0]);
    ffn_model_free(sm[1]);
    {
        ffn_model *bad = NULL;
        ffn_model_options o = {.max_batch = B, .max_seq = T, .training = 1, .layer_begin = 2,
                               .layer_end = L + 1};
        CHECK(ffn_model_create(ctx, ffn_model_get_config(mt), &o, &bad) == FFN_ERR_INVALID_ARG,
              "%s: layers [2, L + 1) accepted", what);
        ffn_model_free(bad);
    }
    free(buf);
    free(g0);
    ffn_model_free(mt);
    ffn_model_free(mi);
}

static void errors(void) {
    ffn_model *mt = make(FFN_MODEL_MLP_GATED, 0, 1), *mi = make(FFN_MODEL_MLP_GATED, 0, 0);
    int32_t tok[B * T] = {0};
    soft sf = {NULL};
    double loss;
    ffn_model_tap_patch(mt, "layers.1.mlp_out", 2, 3, FFN_TAP_OP_SET, 1.0f);
    ffn_status st = ffn_model_forward_backward_taps(mt, tok, B, T, soft_fn, &sf, &loss);
    CHECK(st == FFN_ERR_INVALID_ARG && strstr(ffn_last_error(), "layers.1.mlp_out") &&
          strstr(ffn_last_error(), "SET"), "SET refused: %s", ffn_last_error());
    ffn_model_taps_clear(mt);
    ffn_model_tap_select(mt, "layers.0.attn_probs");
    st = ffn_model_forward_backward_taps(mt, tok, B, T, soft_fn, &sf, &loss);
    CHECK(st == FFN_ERR_INVALID_ARG && strstr(ffn_last_error(), "layers.0.attn_probs"),
          "attn_probs refused: %s", ffn_last_error());
    ffn_model_taps_clear(mt);
    ffn_model_tap_patch(mt, "layers.0.m", -1, 3, FFN_TAP_OP_ADD, 1.0f);
    st = ffn_model_forward_backward_taps(mt, tok, B, T, soft_fn, &sf, &loss);
    CHECK(st == FFN_ERR_INVALID_ARG && strstr(ffn_last_error(), "layers.0.m"),
          "neuron patch refused: %s", ffn_last_error());
    ffn_model_taps_clear(mt);
    st = ffn_model_tap_select_grad(mt, "layers.0.m");
    CHECK(st == FFN_ERR_INVALID_ARG && strstr(ffn_last_error(), "no gradient"),
          "grad of m refused: %s", ffn_last_error());
    ffn_tap_view v;
    st = ffn_model_tap_read_grad(mt, "layers.0.mlp_out", &v);
    CHECK(st == FFN_ERR_INVALID_ARG && strstr(ffn_last_error(), "not selected"),
          "unselected grad: %s", ffn_last_error());
    st = ffn_model_forward_backward_taps(mi, tok, B, T, soft_fn, &sf, &loss);
    CHECK(st == FFN_ERR_INVALID_ARG && strstr(ffn_last_error(), "without training"),
          "inference model: %s", ffn_last_error());
    ffn_model_free(mt);
    ffn_model_free(mi);
}

int main(void) {
    if (ffn_ctx_create(0, &ctx)) return 1;
    run_model(FFN_MODEL_MLP_DENSE, 0, "dense gelu");
    run_model(FFN_MODEL_MLP_GATED, 0, "gated silu");
    run_model(FFN_MODEL_MLP_GATED, 3, "MoE layer 1");
    errors();
    ffn_ctx_free(ctx);
    return check_done("test_model_grad");
}
