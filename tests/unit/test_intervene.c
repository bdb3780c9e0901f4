/* test_intervene.c -- neuron edits (include/ffn/intervene.h):
 *   - ablating neuron i of layer l changes that layer's FFN output by
 *     exactly -m_i·v_i (v_i = column i of down_proj), read through the
 *     taps, at every position, in a gated, a dense and a MoE layer; scaling
 *     by x changes it by (x - 1)·m_i·v_i;
 *   - ffn_predict_with_edits: before is the softmax of the model's own
 *     logits, no edits gives after == before and KL 0, an ablation gives
 *     the distribution of the same patch made by hand and KL computed
 *     from the two; the caller's taps are kept and not applied;
 *   - ffn_neuron_effects equals one ablated forward per neuron by hand;
 *   - specs: every malformed or out-of-range item is an error naming it
 *     and the limits, and appends nothing. */
#include "check.h"

#include <ffn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { V = 19, D = 16, F = 24, L = 3, CTX = 10, T = 7 };

static ffn_ctx *ctx;

static ffn_model *make(ffn_model_mlp type, int64_t E) {
    ffn_model_config c;
    ffn_model_config_default(&c);
    c.vocab_size = V;
    c.hidden_size = D;
    c.intermediate_size = F;
    c.num_hidden_layers = L;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.max_position_embeddings = CTX;
    c.mlp_type = type;
    c.num_experts = E;
    c.num_experts_per_tok = 2;
    c.moe_intermediate_size = 6;
    c.moe_layer_freq = 2; /* layer 1 is MoE when E > 0 */
    ffn_model *m = NULL;
    ffn_model_options o = {.max_batch = 2};
    ffn_status st = ffn_model_create(ctx, &c, &o, &m);
    CHECK(st == FFN_OK, "create: %s", ffn_last_error());
    if (st) return NULL;
    ffn_model_init_weights(m, 11);
    int64_t n;
    float *p = ffn_model_params(m, &n);
    for (int64_t i = 0; i < n; i++) p[i] *= 10.0f; /* activations well away from 0 */
    ffn_model_params_changed(m);
    return m;
}

static const int32_t tokens[T] = {3, 1, 4, 1, 5, 9, 2};

/* Copy of a tap's rows after a forward. */
static float *read_tap(ffn_model *m, const char *name) {
    ffn_tap_view v;
    if (ffn_model_tap_read(m, name, &v)) return NULL;
    float *out = malloc((size_t)(v.rows * v.cols) * sizeof *out);
    memcpy(out, v.data, (size_t)(v.rows * v.cols) * sizeof *out);
    return out;
}

/* mlp_out(after) - mlp_out(before) == (factor - 1)·m_i·v_i at layer l. */
static void check_identity(ffn_model *m, int64_t layer, int64_t neuron, float factor, const char *what) {
    char mname[64], oname[64];
    ffn_tap_name(mname, sizeof mname, layer, FFN_TAP_M);
    ffn_tap_name(oname, sizeof oname, layer, FFN_TAP_MLP_OUT);
    const int64_t W = ffn_inspect_layer_width(m, layer);
    float *logits = malloc((size_t)(T * V) * sizeof *logits);
    ffn_model_tap_select(m, mname);
    ffn_model_tap_select(m, oname);
    CHECK(ffn_model_logits(m, logits, tokens, 1, T) == FFN_OK, "%s", ffn_last_error());
    float *mm = read_tap(m, mname), *y0 = read_tap(m, oname);
    ffn_model_tap_patch(m, mname, -1, neuron, factor == 0.0f ? FFN_TAP_OP_SET : FFN_TAP_OP_SCALE, factor);
    CHECK(ffn_model_logits(m, logits, tokens, 1, T) == FFN_OK, "%s", ffn_last_error());
    float *y1 = read_tap(m, oname);
    ffn_model_taps_clear(m);
    /* the value vector: expert e = neuron / Fe in a MoE layer */
    float v[D];
    const int moe = ffn_model_config_layer_is_moe(ffn_model_get_config(m), layer);
    const int64_t fe = moe ? 6 : W;
    CHECK(ffn_inspect_value_vector(m, layer, moe ? neuron / fe : -1, neuron % fe, v) == FFN_OK, "%s",
          ffn_last_error());
    /* MoE: the routed neuron's contribution is weighted by the router */
    float *w = NULL;
    if (moe) {
        char wname[64], iname[64];
        ffn_tap_name(wname, sizeof wname, layer, FFN_TAP_EXPERT_WEIGHTS);
        ffn_tap_name(iname, sizeof iname, layer, FFN_TAP_EXPERT_IDS);
        ffn_model_tap_select(m, wname);
        ffn_model_tap_select(m, iname);
        ffn_model_logits(m, logits, tokens, 1, T);
        ffn_tap_view iv, wv;
        ffn_model_tap_read(m, iname, &iv);
        ffn_model_tap_read(m, wname, &wv);
        w = calloc(T, sizeof *w);
        for (int64_t t = 0; t < T; t++)
            for (int64_t k = 0; k < iv.cols; k++)
                if (((const int32_t *)iv.data)[t * iv.cols + k] == neuron / fe)
                    w[t] = ((const float *)wv.data)[t * wv.cols + k];
        ffn_model_taps_clear(m);
    }
    double worst = 0, scale = 0;
    int moved = 0;
    for (int64_t t = 0; t < T; t++) {
        const double mi = mm[t * W + neuron] * (w ? w[t] : 1.0f);
        moved += mi != 0;
        for (int64_t d = 0; d < D; d++) {
            const double want = (factor - 1.0) * mi * v[d];
            const double got = (double)y1[t * D + d] - y0[t * D + d];
            worst = fmax(worst, fabs(got - want));
            scale = fmax(scale, fabs(y0[t * D + d]));
        }
    }
    CHECK(moved > 0, "%s: neuron %lld is never active; the test proves nothing", what, (long long)neuron);
    CHECK(worst <= 1e-5 * (scale + 1), "%s: max |Δy - (x-1)·m_i·v_i| = %g (|y| up to %g)", what, worst, scale);
    free(logits), free(mm), free(y0), free(y1), free(w);
}

static void test_identities(void) {
    ffn_model *g = make(FFN_MODEL_MLP_GATED, 0), *d = make(FFN_MODEL_MLP_DENSE, 0);
    ffn_model *moe = make(FFN_MODEL_MLP_GATED, 4);
    if (!g || !d || !moe) return;
    check_identity(g, 1, 5, 0.0f, "gated ablate");
    check_identity(g, 2, 23, 2.5f, "gated scale");
    check_identity(d, 0, 17, 0.0f, "dense ablate");
    /* find an expert some token goes to: try every neuron 0 of each expert */
    for (int64_t e = 0; e < 4; e++) check_identity(moe, 1, e * 6 + 2, 0.0f, "moe ablate");
    ffn_model_free(g), ffn_model_free(d), ffn_model_free(moe);
}

static void softmax_last(const float *logits, double *p) {
    const float *z = logits + (T - 1) * V;
    double mx = -INFINITY, s = 0;
    for (int v = 0; v < V; v++) mx = fmax(mx, z[v]);
    for (int v = 0; v < V; v++) s += exp(z[v] - mx);
    for (int v = 0; v < V; v++) p[v] = exp(z[v] - mx) / s;
}

static void test_predict(void) {
    ffn_model *m = make(FFN_MODEL_MLP_GATED, 0);
    if (!m) return;
    float logits[T * V], before[V], after[V];
    double p0[V], p1[V], kl = -1;
    ffn_model_logits(m, logits, tokens, 1, T);
    softmax_last(logits, p0);
    /* the caller's own patch must be kept aside */
    ffn_model_tap_patch(m, "layers.0.m", -1, 3, FFN_TAP_OP_SET, 100.0f);
    CHECK(ffn_predict_with_edits(ctx, m, tokens, T, NULL, 0, before, after, &kl) == FFN_OK, "%s",
          ffn_last_error());
    double sum = 0, worst = 0;
    for (int v = 0; v < V; v++) {
        sum += before[v];
        worst = fmax(worst, fabs(before[v] - p0[v]));
        CHECK(before[v] == after[v], "no edits: after[%d] %g != before %g", v, after[v], before[v]);
    }
    CHECK(fabs(sum - 1) < 1e-5, "before sums to %g", sum);
    CHECK(worst < 1e-6, "before differs from softmax(logits) by %g", worst);
    CHECK(kl == 0, "no edits: kl %g", kl);

    ffn_neuron_edit e[2] = {{1, 5, 0.0f}, {2, 7, 3.0f}};
    CHECK(ffn_predict_with_edits(ctx, m, tokens, T, e, 2, before, after, &kl) == FFN_OK, "%s", ffn_last_error());
    /* the same by hand (the caller's patch is still there: clear it first) */
    ffn_model_taps_clear(m);
    ffn_model_tap_patch(m, "layers.1.m", -1, 5, FFN_TAP_OP_SET, 0.0f);
    ffn_model_tap_patch(m, "layers.2.m", -1, 7, FFN_TAP_OP_SCALE, 3.0f);
    ffn_model_logits(m, logits, tokens, 1, T);
    ffn_model_taps_clear(m);
    softmax_last(logits, p1);
    double want_kl = 0, changed = 0;
    worst = 0;
    for (int v = 0; v < V; v++) {
        worst = fmax(worst, fabs(after[v] - p1[v]));
        want_kl += p0[v] * (log(p0[v]) - log(p1[v]));
        changed = fmax(changed, fabs(p1[v] - p0[v]));
    }
    CHECK(changed > 1e-4, "the edits change nothing (%g): the test proves nothing", changed);
    CHECK(worst < 1e-6, "after differs from the hand-made patch by %g", worst);
    CHECK(fabs(kl - want_kl) < 1e-6 * (1 + want_kl), "kl %g, expected %g", kl, want_kl);
    /* the caller's patch was put back: the first forward had it */
    ffn_model_logits(m, logits, tokens, 1, T);
    softmax_last(logits, p1);
    CHECK(fabs(p1[0] - p0[0]) < 1e-12, "taps left behind by predict");
    /* errors */
    ffn_neuron_edit bad = {L, 0, 0.0f};
    CHECK(ffn_predict_with_edits(ctx, m, tokens, T, &bad, 1, before, after, &kl) == FFN_ERR_INVALID_ARG, "layer L");
    int32_t badtok[2] = {0, V};
    CHECK(ffn_predict_with_edits(ctx, m, badtok, 2, NULL, 0, before, after, &kl) == FFN_ERR_INVALID_ARG, "token V");
    CHECK(strstr(ffn_last_error(), "token 1") != NULL, "message: %s", ffn_last_error());
    ffn_model_free(m);
}

static void test_effects(void) {
    ffn_model *m = make(FFN_MODEL_MLP_GATED, 0);
    if (!m) return;
    int32_t stream[23];
    for (int i = 0; i < 23; i++) stream[i] = (i * 7 + 3) % V;
    double kl[F], dl[F], base;
    /* windows of 5: 4 windows (3 tokens dropped) */
    CHECK(ffn_neuron_effects(ctx, m, stream, 23, 1, 5, 6, kl, dl, &base) == FFN_OK, "%s", ffn_last_error());
    float lg[4 * 5 * V];
    for (int i = 0; i < 6; i += 5) { /* neurons 0 and 5 by hand */
        double want_kl = 0, loss0 = 0, loss1 = 0;
        for (int w = 0; w < 4; w++) {
            float l0[5 * V], l1[5 * V];
            ffn_model_logits(m, l0, stream + 5 * w, 1, 5);
            ffn_model_tap_patch(m, "layers.1.m", -1, i, FFN_TAP_OP_SET, 0.0f);
            ffn_model_logits(m, l1, stream + 5 * w, 1, 5);
            ffn_model_taps_clear(m);
            for (int t = 0; t < 5; t++) {
                double a[V], b[V], ma = -INFINITY, mb = -INFINITY, sa = 0, sb = 0;
                for (int v = 0; v < V; v++) ma = fmax(ma, l0[t * V + v]), mb = fmax(mb, l1[t * V + v]);
                for (int v = 0; v < V; v++) sa += exp(l0[t * V + v] - ma), sb += exp(l1[t * V + v] - mb);
                for (int v = 0; v < V; v++) a[v] = l0[t * V + v] - ma - log(sa), b[v] = l1[t * V + v] - mb - log(sb);
                for (int v = 0; v < V; v++) want_kl += exp(a[v]) * (a[v] - b[v]);
                if (t < 4) loss0 -= a[stream[5 * w + t + 1]], loss1 -= b[stream[5 * w + t + 1]];
            }
        }
        want_kl /= 20;
        CHECK(fabs(kl[i] - want_kl) < 1e-5 * (1 + want_kl), "neuron %d: kl %g, by hand %g", i, kl[i], want_kl);
        CHECK(fabs(dl[i] - (loss1 - loss0) / 16) < 1e-5, "neuron %d: Δloss %g, by hand %g", i, dl[i], (loss1 - loss0) / 16);
        CHECK(fabs(base - loss0 / 16) < 1e-5, "base loss %g, by hand %g", base, loss0 / 16);
        CHECK(want_kl > 0, "neuron %d: no effect; the test proves nothing", i);
    }
    (void)lg;
    CHECK(ffn_neuron_effects(ctx, m, stream, 23, L, 5, 0, kl, dl, &base) == FFN_ERR_INVALID_ARG, "layer L");
    ffn_model_free(m);
}

static void expect_error(ffn_model *m, const char *spec, int factor, const char *needle) {
    ffn_neuron_edit *e = NULL;
    int64_t n = 0;
    ffn_status st = ffn_neuron_edits_parse(m, spec, factor, "--ablate", &e, &n);
    CHECK(st == FFN_ERR_INVALID_ARG, "'%s' accepted", spec);
    CHECK(n == 0 && e == NULL, "'%s': appended %lld", spec, (long long)n);
    CHECK(strstr(ffn_last_error(), needle) != NULL, "'%s': message '%s' lacks '%s'", spec, ffn_last_error(), needle);
    free(e);
}

static void test_specs(void) {
    ffn_model *m = make(FFN_MODEL_MLP_GATED, 0);
    if (!m) return;
    ffn_neuron_edit *e = NULL;
    int64_t n = 0;
    CHECK(ffn_neuron_edits_parse(m, "0:3,2:23", 0, "--ablate", &e, &n) == FFN_OK, "%s", ffn_last_error());
    CHECK(ffn_neuron_edits_parse(m, "1:4=2.5,1:0=-1e-3", 1, "--scale", &e, &n) == FFN_OK, "%s", ffn_last_error());
    CHECK(n == 4, "n %lld", (long long)n);
    if (n == 4) {
        CHECK(e[0].layer == 0 && e[0].neuron == 3 && e[0].factor == 0.0f, "item 0");
        CHECK(e[1].layer == 2 && e[1].neuron == 23, "item 1");
        CHECK(e[2].layer == 1 && e[2].neuron == 4 && e[2].factor == 2.5f, "item 2");
        CHECK(e[3].factor == -1e-3f, "item 3");
    }
    free(e);
    expect_error(m, "3:0", 0, "layer 3 out of range (the model has 3 layers: 0..2)");
    expect_error(m, "1:24", 0, "neuron 24 out of range (layer 1 has 24 neurons: 0..23)");
    expect_error(m, "1:2,1:99", 0, "neuron 99");
    expect_error(m, "1", 0, "expected L:i");
    expect_error(m, "1:", 0, "non-negative integers");
    expect_error(m, "-1:2", 0, "non-negative integers");
    expect_error(m, "1:2,", 0, "item 2 is empty");
    expect_error(m, "", 0, "empty");
    expect_error(m, "1:2=3", 0, "expected L:i");
    expect_error(m, "1:2", 1, "expected L:i=x");
    expect_error(m, "1:2=", 1, "number after '='");
    expect_error(m, "1:2=abc", 1, "finite number");
    expect_error(m, "1:2=inf", 1, "finite number");
    ffn_model_free(m);
}

int main(void) {
    CHECK(ffn_ctx_create(1, &ctx) == FFN_OK, "ctx");
    test_identities();
    test_predict();
    test_effects();
    test_specs();
    ffn_ctx_free(ctx);
    return check_done("test_intervene");
}
