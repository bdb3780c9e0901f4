/* test_taps.c -- taps on the model's forward (include/ffn/tap.h):
 *   - captures are the model's own values: the last resid_post through the
 *     final norm and the head gives the logits; Σ m_i v_i + b_down equals
 *     mlp_out (dense, gated, MoE routed experts); resid_post = resid_mid +
 *     mlp_out; the logit lens of a value vector against U·(g ⊙ v_i);
 *     attention probabilities are causal rows that sum to 1;
 *   - interventions change what they must and nothing else: zeroing m_i of
 *     a layer equals zeroing column i of its down_proj (full forward and
 *     decode path); patching the residual at position p leaves positions
 *     < p bitwise unchanged and changes p; steering adds exactly;
 *   - the KV-cache path's captures equal the full sequence's, batched
 *     captures equal per-sequence ones;
 *   - the untapped forward is bitwise the same before, with captures only,
 *     and after the taps were cleared; ffn_model_reserve keeps the weights;
 *   - every bad input is an error naming the tap, and leaves the model as
 *     it was; analysis keeps the caller's taps. */
#include "check.h"

#include <ffn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 99;
static float frand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) / 16777216.0) - 0.5f;
}

enum { V = 23, D = 16, F = 28, L = 3, CTX = 12 };

static ffn_ctx *ctx;

static ffn_model *make(ffn_model_mlp type, int64_t E, int bias, int64_t max_batch) {
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
    c.mlp_bias = bias;
    c.tie_word_embeddings = !bias;
    c.num_experts = E;
    c.num_experts_per_tok = 2;
    c.moe_intermediate_size = 6;
    c.moe_layer_freq = 2; /* layer 1 is MoE when E > 0 */
    ffn_model_options o = {.max_batch = max_batch};
    ffn_model *m = NULL;
    ffn_status st = ffn_model_create(ctx, &c, &o, &m);
    CHECK(st == FFN_OK, "create: %s", ffn_last_error());
    if (st) return NULL;
    ffn_model_init_weights(m, 7);
    int64_t n;
    float *p = ffn_model_params(m, &n);
    for (int64_t i = 0; i < ffn_model_num_tensors(m); i++) { /* larger than init */
        const ffn_model_tensor *t = ffn_model_tensor_at(m, i);
        for (int64_t j = 0; j < t->numel; j++)
            if (t->kind == FFN_TENSOR_NORM) p[t->offset + j] = 1.0f + 0.5f * frand();
            else if (t->kind == FFN_TENSOR_MLP_BIAS) p[t->offset + j] = 0.3f * frand();
            else p[t->offset + j] *= 12.0f;
    }
    ffn_model_params_changed(m);
    return m;
}

static const float *tensor(ffn_model *m, const char *fmt, long long a, long long b) {
    char name[128];
    snprintf(name, sizeof name, fmt, a, b);
    const ffn_model_tensor *t = ffn_model_find_tensor(m, name);
    return t ? ffn_model_params(m, NULL) + t->offset : NULL;
}

static ffn_tap_view view(ffn_model *m, const char *name) {
    ffn_tap_view v;
    memset(&v, 0, sizeof v);
    ffn_status st = ffn_model_tap_read(m, name, &v);
    CHECK(st == FFN_OK, "read %s: %s", name, ffn_last_error());
    return v;
}

static const float *rows(ffn_model *m, const char *name) {
    ffn_tap_view v = view(m, name);
    return v.data;
}

static double max_abs_diff(const float *a, const float *b, int64_t n) {
    double e = 0.0;
    for (int64_t i = 0; i < n; i++) e = fmax(e, fabs((double)a[i] - b[i]));
    return e;
}

static void fill_tokens(int32_t *tok, int64_t n) {
    for (int64_t i = 0; i < n; i++) tok[i] = (int32_t)((unsigned)((frand() + 0.5f) * V) % V);
}

/* ---- captures are the model's values ---------------------------------------------- */

static void test_capture(ffn_model *m, const char *name) {
    const ffn_model_config *c = ffn_model_get_config(m);
    enum { T = 9 };
    int32_t tok[T];
    fill_tokens(tok, T);
    float logits[T * V], base[T * V];
    CHECK(ffn_model_logits(m, base, tok, 1, T) == FFN_OK, "logits: %s", ffn_last_error());
    static const char *sel[] = {"layers.2.resid_post", "layers.0.mlp_in", "layers.0.m",
                                "layers.0.mlp_out", "layers.0.resid_mid", "layers.0.resid_post",
                                "layers.0.attn_probs", "layers.1.m", "layers.1.mlp_out",
                                "layers.1.mlp_in"};
    for (size_t i = 0; i < sizeof sel / sizeof sel[0]; i++)
        CHECK(ffn_model_tap_select(m, sel[i]) == FFN_OK, "select %s: %s", sel[i], ffn_last_error());
    CHECK(ffn_model_logits(m, logits, tok, 1, T) == FFN_OK, "logits: %s", ffn_last_error());
    CHECK(!memcmp(logits, base, sizeof base), "%s: capture changed the logits", name);
    /* resid_post of the last layer -> final norm -> head = the logits */
    ffn_tap_view v = view(m, "layers.2.resid_post");
    CHECK(v.rows == T && v.cols == D && v.B == 1 && v.T == T && v.pos0 == 0, "view shape");
    const float *x = v.data, *g = tensor(m, "model.norm.weight%.0lld", 0, 0);
    const float *U = c->tie_word_embeddings ? tensor(m, "model.embed_tokens.weight%.0lld", 0, 0)
                                            : tensor(m, "lm_head.weight%.0lld", 0, 0);
    double err = 0.0, mx = 0.0;
    for (int t = 0; t < T; t++) {
        double ss = 0.0;
        for (int d = 0; d < D; d++) ss += (double)x[t * D + d] * x[t * D + d];
        double r = 1.0 / sqrt(ss / D + c->rms_norm_eps);
        for (int j = 0; j < V; j++) {
            double a = 0.0;
            for (int d = 0; d < D; d++) a += x[t * D + d] * r * g[d] * U[j * D + d];
            err = fmax(err, fabs(a - logits[t * V + j]));
            mx = fmax(mx, fabs(a));
        }
    }
    printf("%-14s resid_post(L-1) -> norm -> head vs logits: %.3g (max |logit| %.3g)\n", name, err, mx);
    CHECK(err <= 2e-5 * (1 + mx), "%s: the last resid_post does not give the logits (%g)", name, err);
    /* Σ m_i v_i + b_down = mlp_out of layer 0 (dense or gated) */
    const float *mm = rows(m, "layers.0.m"), *y = rows(m, "layers.0.mlp_out");
    const float *down = tensor(m, "model.layers.%lld.mlp.down_proj.weight%.0lld", 0, 0);
    const float *bd = c->mlp_bias ? tensor(m, "model.layers.%lld.mlp.down_proj.bias%.0lld", 0, 0) : NULL;
    double worst = 0.0;
    for (int t = 0; t < T; t++)
        for (int d = 0; d < D; d++) {
            double s = bd ? bd[d] : 0.0, bound = bd ? fabs(bd[d]) : 0.0;
            for (int i = 0; i < F; i++) {
                s += (double)mm[t * F + i] * down[d * F + i];
                bound += fabs((double)mm[t * F + i] * down[d * F + i]);
            }
            worst = fmax(worst, fabs(s - y[t * D + d]) / (2e-6 * bound + 1e-7));
        }
    printf("%-14s sum-back: worst err/tol %.3f\n", name, worst);
    CHECK(worst <= 1.0, "%s: Σ m_i v_i + b differs from mlp_out (err/tol %g)", name, worst);
    /* resid_post = resid_mid + mlp_out exactly as the model adds it */
    const float *mid = rows(m, "layers.0.resid_mid"), *post = rows(m, "layers.0.resid_post");
    int exact = 1;
    for (int i = 0; i < T * D; i++) exact &= post[i] == mid[i] + y[i];
    CHECK(exact, "%s: resid_post != resid_mid + mlp_out", name);
    /* MoE layer 1: the routed experts' m, weighted, sum back to mlp_out */
    if (ffn_model_config_layer_is_moe(c, 1)) {
        CHECK(ffn_model_tap_select(m, "layers.1.expert_ids") == FFN_OK &&
                  ffn_model_tap_select(m, "layers.1.expert_weights") == FFN_OK &&
                  ffn_model_tap_select(m, "layers.1.router_logits") == FFN_OK,
              "select routing: %s", ffn_last_error());
        CHECK(ffn_model_logits(m, logits, tok, 1, T) == FFN_OK, "logits: %s", ffn_last_error());
        ffn_tap_view iv = view(m, "layers.1.expert_ids");
        const int32_t *ids = iv.data;
        const float *w = rows(m, "layers.1.expert_weights"), *rl = rows(m, "layers.1.router_logits");
        const float *m1 = rows(m, "layers.1.m"), *y1 = rows(m, "layers.1.mlp_out");
        const int64_t E = c->num_experts, K = c->num_experts_per_tok, Fe = c->moe_intermediate_size;
        CHECK(iv.is_int32 && iv.cols == K, "expert_ids view");
        double w1 = 0.0;
        int zeros_ok = 1, topk_ok = 1;
        for (int t = 0; t < T; t++) {
            for (int64_t e = 0; e < E; e++) {
                int routed = 0;
                for (int64_t j = 0; j < K; j++) routed |= ids[t * K + j] == e;
                for (int64_t i = 0; i < Fe && !routed; i++) zeros_ok &= m1[t * E * Fe + e * Fe + i] == 0.0f;
                /* a chosen expert's logit is not below an unchosen one's */
                for (int64_t j = 0; j < K && !routed; j++)
                    topk_ok &= rl[t * E + ids[t * K + j]] >= rl[t * E + e];
            }
            for (int d = 0; d < D; d++) {
                double s = 0.0, bound = 0.0;
                for (int64_t j = 0; j < K; j++) {
                    int64_t e = ids[t * K + j];
                    const float *dw = tensor(m, "model.layers.1.mlp.experts.%lld.down_proj.weight%.0lld", e, 0);
                    const float *db = c->mlp_bias ? tensor(m, "model.layers.1.mlp.experts.%lld.down_proj.bias%.0lld", e, 0) : NULL;
                    double a = db ? db[d] : 0.0;
                    for (int64_t i = 0; i < Fe; i++) {
                        a += (double)m1[t * E * Fe + e * Fe + i] * dw[d * Fe + i];
                        bound += fabs(w[t * K + j] * (double)m1[t * E * Fe + e * Fe + i] * dw[d * Fe + i]);
                    }
                    s += w[t * K + j] * a;
                }
                w1 = fmax(w1, fabs(s - y1[t * D + d]) / (4e-6 * bound + 1e-6));
            }
        }
        printf("%-14s MoE sum-back: worst err/tol %.3f\n", name, w1);
        CHECK(zeros_ok, "%s: m of an unrouted expert is not 0", name);
        CHECK(topk_ok, "%s: expert_ids are not the top router logits", name);
        CHECK(w1 <= 1.0, "%s: MoE Σ w m v + b differs from mlp_out (err/tol %g)", name, w1);
    }
    /* attention rows: causal, summing to 1 */
    ffn_tap_view pv = view(m, "layers.0.attn_probs");
    const int64_t H = c->num_attention_heads, S = pv.cols / H;
    CHECK(S == T && pv.rows == T, "attn_probs shape %lld x %lld", (long long)pv.rows, (long long)pv.cols);
    double sum_err = 0.0;
    int causal = 1;
    for (int t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++) {
            const float *p = (const float *)pv.data + t * H * S + h * S;
            double s = 0.0;
            for (int64_t k = 0; k < S; k++) {
                s += p[k];
                if (k > t) causal &= p[k] == 0.0f;
            }
            sum_err = fmax(sum_err, fabs(s - 1.0));
        }
    CHECK(causal && sum_err < 1e-5, "%s: attention rows (sum err %g, causal %d)", name, sum_err, causal);
    /* the lens of a value vector against U·(g ⊙ v_i) */
    float lens[V];
    CHECK(ffn_inspect_value_logits(m, 0, -1, 5, lens) == FFN_OK, "lens: %s", ffn_last_error());
    double le = 0.0;
    for (int j = 0; j < V; j++) {
        double a = 0.0;
        for (int d = 0; d < D; d++) a += (double)U[j * D + d] * g[d] * down[d * F + 5];
        le = fmax(le, fabs(a - lens[j]));
    }
    CHECK(le < 1e-5, "%s: logit lens off by %g", name, le);
    ffn_model_taps_clear(m);
    CHECK(ffn_model_logits(m, logits, tok, 1, T) == FFN_OK, "logits: %s", ffn_last_error());
    CHECK(!memcmp(logits, base, sizeof base), "%s: logits changed after the taps were cleared", name);
}

/* ---- interventions ------------------------------------------------------------------- */

static void test_zero_neuron(ffn_model *m, const char *name) {
    enum { T = 8, I = 11 };
    int32_t tok[T];
    fill_tokens(tok, T);
    float a[T * V], b[T * V], s1[V], s2[V];
    /* the intervention: m_I of layer 0 zeroed everywhere */
    CHECK(ffn_model_tap_patch(m, "layers.0.m", -1, I, FFN_TAP_OP_SET, 0.0f) == FFN_OK,
          "patch: %s", ffn_last_error());
    CHECK(ffn_model_tap_select(m, "layers.0.m") == FFN_OK, "select: %s", ffn_last_error());
    CHECK(ffn_model_logits(m, a, tok, 1, T) == FFN_OK, "logits: %s", ffn_last_error());
    const float *mm = rows(m, "layers.0.m");
    int zero = 1;
    for (int t = 0; t < T; t++) zero &= mm[t * F + I] == 0.0f;
    CHECK(zero, "%s: the captured m_I is not 0", name);
    /* the KV path (decode-sized calls run the unfused layer) */
    ffn_model_reset(m);
    for (int t = 0; t < T; t++) ffn_model_step(m, tok[t], s1);
    ffn_model_taps_clear(m);
    /* the reference: column I of down_proj zeroed */
    float *down = (float *)tensor(m, "model.layers.%lld.mlp.down_proj.weight%.0lld", 0, 0);
    float keep[D];
    for (int d = 0; d < D; d++) keep[d] = down[d * F + I], down[d * F + I] = 0.0f;
    ffn_model_params_changed(m);
    CHECK(ffn_model_logits(m, b, tok, 1, T) == FFN_OK, "logits: %s", ffn_last_error());
    ffn_model_reset(m);
    for (int t = 0; t < T; t++) ffn_model_step(m, tok[t], s2);
    for (int d = 0; d < D; d++) down[d * F + I] = keep[d];
    ffn_model_params_changed(m);
    double e = max_abs_diff(a, b, T * V), e2 = max_abs_diff(s1, s2, V), mx = 0.0;
    for (int i = 0; i < T * V; i++) mx = fmax(mx, fabs(b[i]));
    printf("%-14s zero m_%d vs down_proj column zeroed: %.3g (decode %.3g)\n", name, I, e, e2);
    CHECK(e <= 1e-5 * (1 + mx) && e2 <= 1e-5 * (1 + mx), "%s: zeroing m_i (%g, decode %g)",
          name, e, e2);
    /* ... and it did change something */
    float base[T * V];
    ffn_model_logits(m, base, tok, 1, T);
    CHECK(max_abs_diff(base, a, T * V) > 1e-4, "%s: zeroing m_%d changed nothing", name, I);
    /* up_I = 0 gives m_I = act(g)·0 (gated) or silu(0) = 0 (dense): the same logits */
    CHECK(ffn_model_tap_patch(m, "layers.0.up", -1, I, FFN_TAP_OP_SET, 0.0f) == FFN_OK,
          "patch up: %s", ffn_last_error());
    ffn_model_logits(m, b, tok, 1, T);
    CHECK(max_abs_diff(a, b, T * V) == 0.0, "%s: up_I = 0 differs from m_I = 0", name);
    ffn_model_taps_clear(m);
    /* a routed expert's neuron (MoE layer 1): expert e's down_proj column i zeroed */
    const ffn_model_config *c = ffn_model_get_config(m);
    if (!ffn_model_config_layer_is_moe(c, 1)) return;
    const int64_t Fe = c->moe_intermediate_size, ex = 1, i = 4;
    CHECK(ffn_model_tap_patch(m, "layers.1.m", -1, ex * Fe + i, FFN_TAP_OP_SET, 0.0f) == FFN_OK,
          "patch: %s", ffn_last_error());
    ffn_model_logits(m, a, tok, 1, T);
    ffn_model_reset(m);
    for (int t = 0; t < T; t++) ffn_model_step(m, tok[t], s1);
    ffn_model_taps_clear(m);
    float *ed = (float *)tensor(m, "model.layers.1.mlp.experts.%lld.down_proj.weight%.0lld", ex, 0);
    for (int d = 0; d < D; d++) keep[d] = ed[d * Fe + i], ed[d * Fe + i] = 0.0f;
    ffn_model_params_changed(m);
    ffn_model_logits(m, b, tok, 1, T);
    ffn_model_reset(m);
    for (int t = 0; t < T; t++) ffn_model_step(m, tok[t], s2);
    for (int d = 0; d < D; d++) ed[d * Fe + i] = keep[d];
    ffn_model_params_changed(m);
    e = max_abs_diff(a, b, T * V), e2 = max_abs_diff(s1, s2, V);
    printf("%-14s zero expert %lld neuron %lld vs its down_proj column zeroed: %.3g (decode %.3g)\n",
           name, (long long)ex, (long long)i, e, e2);
    CHECK(e <= 1e-5 * (1 + mx) && e2 <= 1e-5 * (1 + mx), "%s: zeroing an expert's m_i (%g, %g)",
          name, e, e2);
    CHECK(max_abs_diff(base, a, T * V) > 1e-5, "%s: zeroing the expert neuron changed nothing", name);
}

static void test_patch_position(ffn_model *m, const char *name) {
    enum { T = 10, P = 6 };
    int32_t tok[T];
    fill_tokens(tok, T);
    float base[T * V], a[T * V], vec[D];
    for (int d = 0; d < D; d++) vec[d] = 3.0f * frand();
    ffn_model_logits(m, base, tok, 1, T);
    CHECK(ffn_model_tap_patch_vector(m, "layers.1.resid_pre", P, FFN_TAP_OP_SET, vec, D) == FFN_OK,
          "patch: %s", ffn_last_error());
    CHECK(ffn_model_logits(m, a, tok, 1, T) == FFN_OK, "logits: %s", ffn_last_error());
    CHECK(!memcmp(a, base, sizeof(float) * P * V), "%s: positions < %d changed", name, P);
    for (int t = P; t < T; t++)
        CHECK(max_abs_diff(a + t * V, base + t * V, V) > 1e-4, "%s: position %d unchanged", name, t);
    ffn_model_taps_clear(m);
    /* steering: ADD v to mlp_out of layer 0 at every position */
    CHECK(ffn_model_tap_select(m, "layers.0.mlp_out") == FFN_OK &&
              ffn_model_tap_select(m, "layers.0.resid_mid") == FFN_OK,
          "select: %s", ffn_last_error());
    ffn_model_logits(m, a, tok, 1, T);
    float y0[T * D];
    memcpy(y0, rows(m, "layers.0.mlp_out"), sizeof y0);
    CHECK(ffn_model_tap_patch_vector(m, "layers.0.mlp_out", -1, FFN_TAP_OP_ADD, vec, D) == FFN_OK,
          "steer: %s", ffn_last_error());
    CHECK(ffn_model_tap_select(m, "layers.0.resid_post") == FFN_OK, "select: %s", ffn_last_error());
    ffn_model_logits(m, a, tok, 1, T);
    const float *y1 = rows(m, "layers.0.mlp_out"), *mid = rows(m, "layers.0.resid_mid");
    const float *post = rows(m, "layers.0.resid_post");
    int exact = 1;
    for (int t = 0; t < T; t++)
        for (int d = 0; d < D; d++) {
            exact &= y1[t * D + d] == y0[t * D + d] + vec[d];
            exact &= post[t * D + d] == mid[t * D + d] + (y0[t * D + d] + vec[d]);
        }
    CHECK(exact, "%s: steering did not add the vector exactly", name);
    ffn_model_taps_clear(m);
    /* SCALE one index of one position */
    ffn_model_tap_select(m, "layers.2.mlp_in");
    ffn_model_logits(m, a, tok, 1, T);
    float x0[T * D];
    memcpy(x0, rows(m, "layers.2.mlp_in"), sizeof x0);
    ffn_model_tap_patch(m, "layers.2.mlp_in", 3, 4, FFN_TAP_OP_SCALE, -2.0f);
    ffn_model_logits(m, a, tok, 1, T);
    const float *x1 = rows(m, "layers.2.mlp_in");
    int only = 1;
    for (int i = 0; i < T * D; i++) only &= i == 3 * D + 4 ? x1[i] == -2.0f * x0[i] : x1[i] == x0[i];
    CHECK(only, "%s: SCALE touched more than (3, 4)", name);
    ffn_model_taps_clear(m);
}

/* ---- the KV-cache path and batches ------------------------------------------------------ */

static void test_cache_and_batch(ffn_model *m, const char *name) {
    enum { T = 9, NB = 3 };
    int32_t tok[NB * T];
    fill_tokens(tok, NB * T);
    static const char *pts[] = {"layers.0.mlp_in", "layers.0.m", "layers.1.resid_post",
                                "layers.2.gate_pre", "layers.2.up"};
    enum { NP = sizeof pts / sizeof pts[0] };
    float *full[NP];
    int64_t w[NP];
    float lg[NB * T * V];
    for (int i = 0; i < NP; i++) {
        CHECK(ffn_model_tap_select(m, pts[i]) == FFN_OK, "select %s: %s", pts[i], ffn_last_error());
        ffn_model_tap_lookup(m, pts[i], NULL, NULL, &w[i]);
    }
    /* per sequence, full forward */
    for (int i = 0; i < NP; i++) full[i] = malloc(sizeof(float) * NB * T * w[i]);
    for (int b = 0; b < NB; b++) {
        ffn_model_logits(m, lg, tok + b * T, 1, T);
        for (int i = 0; i < NP; i++)
            memcpy(full[i] + b * T * w[i], rows(m, pts[i]), sizeof(float) * T * w[i]);
    }
    /* the KV path, one token at a time: row t of sequence 0 */
    double ek = 0.0;
    int pos_ok = 1;
    ffn_model_reset(m);
    for (int t = 0; t < T; t++) {
        ffn_model_step(m, tok[t], lg);
        for (int i = 0; i < NP; i++) {
            ffn_tap_view v = view(m, pts[i]);
            pos_ok &= v.pos0 == t && v.rows == 1;
            ek = fmax(ek, max_abs_diff(v.data, full[i] + t * w[i], w[i]));
        }
    }
    /* a prefill then steps */
    ffn_model_reset(m);
    ffn_model_prefill(m, tok, 5, lg);
    ffn_tap_view pv = view(m, "layers.0.m");
    pos_ok &= pv.pos0 == 0 && pv.rows == 5;
    ek = fmax(ek, max_abs_diff(pv.data, full[1], 5 * w[1]));
    ffn_model_step(m, tok[5], lg);
    ek = fmax(ek, max_abs_diff(rows(m, "layers.0.m"), full[1] + 5 * w[1], w[1]));
    printf("%-14s KV-cache captures vs full sequence: max diff %.3g\n", name, ek);
    CHECK(pos_ok, "%s: pos0 / rows of the KV path's captures", name);
    CHECK(ek < 1e-4, "%s: KV-cache captures differ from the full sequence by %g", name, ek);
    /* batched */
    CHECK(ffn_model_reserve(m, NB, T) == FFN_OK, "reserve: %s", ffn_last_error());
    CHECK(ffn_model_logits(m, lg, tok, NB, T) == FFN_OK, "batched logits: %s", ffn_last_error());
    double eb = 0.0;
    for (int i = 0; i < NP; i++) {
        ffn_tap_view v = view(m, pts[i]);
        CHECK(v.B == NB && v.T == T && v.rows == NB * T, "batched view shape");
        eb = fmax(eb, max_abs_diff(v.data, full[i], NB * T * w[i]));
    }
    printf("%-14s batched captures vs per sequence: max diff %.3g\n", name, eb);
    CHECK(eb < 1e-4, "%s: batched captures differ from per-sequence ones by %g", name, eb);
    for (int i = 0; i < NP; i++) free(full[i]);
    ffn_model_taps_clear(m);
}

/* ---- bitwise identity of the untapped forward, reserve ------------------------------------ */

static void test_untapped(ffn_model *m, const char *name) {
    enum { T = 7 };
    int32_t tok[T];
    fill_tokens(tok, T);
    float a[T * V], b[T * V], s[V], s0[V];
    ffn_model_logits(m, a, tok, 1, T);
    ffn_model_reset(m);
    ffn_model_prefill(m, tok, T, s0);
    /* captures of every point of every layer: the same bits */
    int n_sel = 0;
    for (int64_t l = 0; l < L; l++)
        for (int p = 0; p < FFN_TAP_N_POINTS; p++) {
            char nm[64];
            ffn_tap_name(nm, sizeof nm, l, (ffn_tap_point)p);
            if (ffn_model_tap_lookup(m, nm, NULL, NULL, NULL) == FFN_OK)
                n_sel += ffn_model_tap_select(m, nm) == FFN_OK;
        }
    CHECK(n_sel >= 9 * L, "%s: selected %d points", name, n_sel);
    ffn_model_logits(m, b, tok, 1, T);
    CHECK(!memcmp(a, b, sizeof a), "%s: capturing changed the logits", name);
    ffn_model_reset(m);
    for (int t = 0; t < T; t++) ffn_model_step(m, tok[t], s);
    ffn_model_reset(m);
    ffn_model_prefill(m, tok, T, b);
    CHECK(!memcmp(b, s0, sizeof s0), "%s: capturing changed the prefill logits", name);
    ffn_model_taps_clear(m);
    ffn_model_logits(m, b, tok, 1, T);
    CHECK(!memcmp(a, b, sizeof a), "%s: logits changed after clearing the taps", name);
    /* reserve keeps the weights: the same bits for the same call */
    CHECK(ffn_model_reserve(m, 4, CTX) == FFN_OK, "reserve: %s", ffn_last_error());
    ffn_model_logits(m, b, tok, 1, T);
    CHECK(!memcmp(a, b, sizeof a), "%s: logits changed after ffn_model_reserve", name);
    CHECK(ffn_model_reserve(m, 0, 4) == FFN_ERR_INVALID_ARG, "reserve(0) accepted");
    CHECK(ffn_model_reserve(m, 1, CTX + 1) == FFN_ERR_INVALID_ARG, "reserve past the context");
}

/* ---- bad input ----------------------------------------------------------------------------- */

static void expect(ffn_status st, const char *want, const char *what) {
    CHECK(st == FFN_ERR_INVALID_ARG, "%s: accepted", what);
    CHECK(strstr(ffn_last_error(), want) != NULL, "%s: message '%s' lacks '%s'", what,
          ffn_last_error(), want);
}

static void test_errors(ffn_model *m) {
    enum { T = 5 };
    int32_t tok[T] = {1, 2, 3, 4, 5};
    float a[T * V], b[T * V], v[D + 1];
    memset(v, 0, sizeof v);
    ffn_model_logits(m, a, tok, 1, T);
    expect(ffn_model_tap_select(m, "layers.9.m"),
           "tap 'layers.9.m': layer 9 out of range (model has 3 layers: 0..2)", "layer 9");
    expect(ffn_model_tap_select(m, "layers.-1.m"), "layer -1 out of range", "layer -1");
    expect(ffn_model_tap_select(m, "layers.0.bogus"), "unknown point 'bogus' (expected one of "
           "resid_pre, attn_out", "unknown point");
    expect(ffn_model_tap_select(m, "blocks.0.m"), "expected 'layers.<layer>.<point>'", "bad form");
    expect(ffn_model_tap_select(m, "layers.x.m"), "expected 'layers.<layer>.<point>'", "bad layer");
    expect(ffn_model_tap_select(m, NULL), "NULL", "NULL name");
    expect(ffn_model_tap_select(m, "layers.0.router_logits"), "not a MoE layer", "router in dense");
    expect(ffn_model_tap_patch(m, "layers.0.m", -1, F, FFN_TAP_OP_SET, 0.0f),
           "tap 'layers.0.m': index 28 out of range (width 28: 0..27)", "neuron F");
    expect(ffn_model_tap_patch(m, "layers.0.m", -1, -1, FFN_TAP_OP_SET, 0.0f), "index -1 out of range",
           "neuron -1");
    expect(ffn_model_tap_patch(m, "layers.0.resid_pre", CTX, 0, FFN_TAP_OP_SET, 0.0f),
           "position 12 out of range (expected -1 for every position, or 0..11)", "position");
    expect(ffn_model_tap_patch(m, "layers.0.resid_pre", 0, 0, (ffn_tap_op)7, 0.0f), "unknown op 7",
           "op");
    expect(ffn_model_tap_patch_vector(m, "layers.1.resid_post", 0, FFN_TAP_OP_SET, v, D + 1),
           "tap 'layers.1.resid_post': vector of 17 floats, expected 16", "vector length");
    expect(ffn_model_tap_patch_vector(m, "layers.1.m", 0, FFN_TAP_OP_ADD, v, D),
           "vector of 16 floats, expected 28", "m vector length");
    expect(ffn_model_tap_patch_vector(m, "layers.1.m", 0, FFN_TAP_OP_ADD, NULL, F), "(NULL)",
           "NULL vector");
    expect(ffn_model_tap_patch(m, "layers.0.attn_probs", 0, 0, FFN_TAP_OP_SET, 0.0f), "read-only",
           "patch probs");
    ffn_tap_view tv;
    expect(ffn_model_tap_read(m, "layers.0.m", &tv), "not selected", "read unselected");
    CHECK(ffn_model_tap_select(m, "layers.0.m") == FFN_OK, "select: %s", ffn_last_error());
    expect(ffn_model_tap_read(m, "layers.0.m", &tv), "no forward has run", "read before forward");
    ffn_model_taps_clear(m);
    /* none of that changed the model */
    ffn_model_logits(m, b, tok, 1, T);
    CHECK(!memcmp(a, b, sizeof a), "a rejected tap changed the model");
}

/* analysis (inspect.h) sets the caller's taps aside and puts them back */
static void test_analysis_keeps_taps(ffn_model *m) {
    enum { T = 6 };
    int32_t tok[T];
    fill_tokens(tok, T);
    float a[T * V], b[T * V];
    CHECK(ffn_model_tap_select(m, "layers.1.resid_mid") == FFN_OK &&
              ffn_model_tap_patch(m, "layers.0.m", 2, 3, FFN_TAP_OP_SCALE, 4.0f) == FFN_OK,
          "taps: %s", ffn_last_error());
    ffn_model_logits(m, a, tok, 1, T);
    float mid[T * D];
    memcpy(mid, rows(m, "layers.1.resid_mid"), sizeof mid);
    ffn_inspect_result *r = NULL;
    CHECK(ffn_inspect_run(ctx, m, tok, T, NULL, &r) == FFN_OK, "run: %s", ffn_last_error());
    ffn_inspect_result_free(r);
    CHECK(!memcmp(rows(m, "layers.1.resid_mid"), mid, sizeof mid), "analysis clobbered a capture");
    ffn_model_logits(m, b, tok, 1, T);
    CHECK(!memcmp(a, b, sizeof a), "analysis dropped the caller's patch");
    ffn_model_taps_clear(m);
}

static void test_none_layer(void) {
    ffn_model *m = make(FFN_MODEL_MLP_NONE, 0, 0, 1);
    if (!m) return;
    expect(ffn_model_tap_select(m, "layers.1.m"), "layer 1 has no FFN", "m without FFN");
    CHECK(ffn_model_tap_select(m, "layers.1.resid_post") == FFN_OK &&
              ffn_model_tap_select(m, "layers.1.resid_mid") == FFN_OK,
          "select: %s", ffn_last_error());
    int32_t tok[4] = {3, 1, 4, 1};
    float lg[4 * V];
    ffn_model_logits(m, lg, tok, 1, 4);
    CHECK(!memcmp(rows(m, "layers.1.resid_post"), rows(m, "layers.1.resid_mid"), 4 * D * sizeof(float)),
          "no FFN: resid_post != resid_mid");
    ffn_model_free(m);
}

int main(void) {
    ffn_ctx_create(0, &ctx);
    struct { const char *name; ffn_model_mlp type; int64_t E; int bias; } cases[] = {
        {"gated", FFN_MODEL_MLP_GATED, 0, 0},
        {"dense + bias", FFN_MODEL_MLP_DENSE, 0, 1},
        {"MoE gated", FFN_MODEL_MLP_GATED, 4, 0},
        {"MoE dense+bias", FFN_MODEL_MLP_DENSE, 3, 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ffn_model *m = make(cases[k].type, cases[k].E, cases[k].bias, 1);
        if (!m) continue;
        test_untapped(m, cases[k].name);
        test_capture(m, cases[k].name);
        test_zero_neuron(m, cases[k].name);
        test_patch_position(m, cases[k].name);
        test_cache_and_batch(m, cases[k].name);
        if (k == 0) test_errors(m);
        if (k == 0) test_analysis_keeps_taps(m);
        ffn_model_free(m);
    }
    test_none_layer();
    ffn_ctx_free(ctx);
    return check_done("test_taps");
}
