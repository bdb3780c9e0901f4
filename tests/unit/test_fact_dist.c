/* test_fact_dist.c -- how distributed is a fact (include/ffn/trace.h,
 * ffn_fact_min_ablation) on models built by hand, where the answer is
 * known:
 *   - attention is zero, so each position is on its own; the prompt's last
 *     token is the subject s, whose embedding is e_0;
 *   - layer 0's FFN is zero; in layer 1 (dense relu) K "carrier" neurons
 *     read e_0 and each write +1 on dim 1, one "helper" neuron writes
 *     +0.2 there, the rest are zero; the LM head reads dim 1 for the
 *     object O and 0.5·dim 0 for the rival R, so O is top-1 while the sum
 *     on dim 1 exceeds 0.5: ablating every carrier removes the fact, any
 *     K-1 of them do not; the helper is never needed.
 * Checked for K = 1 and K = 3: the set is exactly the carriers (size K),
 * found in layer 1 and over all layers, not removable in layer 0; the
 * verification (p_after, top_after) and an independent ablation through
 * ffn_predict_with_edits agree; every unit of the set is needed (dropping
 * any one brings the fact back); with a threshold the criterion is
 * p(O) < P; the same over a transcoder whose features are the neurons
 * (encoder = up rows · |down column|, decoder = the unit down columns);
 * ffn_ablation_loss with nothing ablated is the model's loss; bad input:
 * a layer out of range, a transcoder of another layer or width, a model
 * without gradients, a unit out of range. */
#include "check.h"

#include <ffn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { V = 8, D = 8, F = 12, L = 2, CTX = 4, T = 2, OBJ = 2, RIVAL = 1, HELPER = 10 };

static ffn_ctx *ctx;
static const int32_t prompt[T] = {5, 0};

static float *tensor(ffn_model *m, const char *fmt, long long l) {
    char name[128];
    snprintf(name, sizeof name, fmt, l);
    const ffn_model_tensor *t = ffn_model_find_tensor(m, name);
    CHECK(t != NULL, "no tensor %s", name);
    return t ? ffn_model_params(m, NULL) + t->offset : NULL;
}

static ffn_model *make(int K, int training) {
    ffn_model_config c;
    ffn_model_config_default(&c);
    c.vocab_size = V;
    c.hidden_size = D;
    c.intermediate_size = F;
    c.num_hidden_layers = L;
    c.num_attention_heads = 2;
    c.num_key_value_heads = 2;
    c.max_position_embeddings = CTX;
    c.mlp_type = FFN_MODEL_MLP_DENSE;
    c.hidden_act = FFN_ACT_RELU;
    c.tie_word_embeddings = 0;
    ffn_model_options mo = {.max_batch = 1, .training = training};
    ffn_model *m = NULL;
    ffn_status st = ffn_model_create(ctx, &c, &mo, &m);
    CHECK(st == FFN_OK, "create: %s", ffn_last_error());
    if (st) return NULL;
    int64_t n;
    float *p = ffn_model_params(m, &n);
    memset(p, 0, (size_t)n * sizeof *p);
    for (int64_t i = 0; i < ffn_model_num_tensors(m); i++) {
        const ffn_model_tensor *t = ffn_model_tensor_at(m, i);
        if (strstr(t->name, "norm.weight"))
            for (int64_t j = 0; j < t->numel; j++) p[t->offset + j] = 1.0f;
    }
    float *emb = tensor(m, "model.embed_tokens.weight", 0);
    emb[0 * D + 0] = 1.0f; /* the subject: e_0 */
    emb[5 * D + 7] = 1.0f; /* the token before it */
    float *up = tensor(m, "model.layers.%lld.mlp.up_proj.weight", 1);
    float *down = tensor(m, "model.layers.%lld.mlp.down_proj.weight", 1);
    /* mlp_in = rmsnorm(e_0) = sqrt(D)·e_0, so neuron i's m_i = sqrt(D)·up[i][0] */
    const float s = sqrtf((float)D);
    for (int i = 0; i < K; i++) {
        up[i * D + 0] = 1.0f;
        down[1 * F + i] = 1.0f / s; /* +1 on dim 1 */
    }
    up[HELPER * D + 0] = 1.0f;
    down[1 * F + HELPER] = 0.2f / s;
    float *head = tensor(m, "lm_head.weight", 0);
    head[OBJ * D + 1] = 1.0f;
    head[RIVAL * D + 0] = 0.5f;
    CHECK(ffn_model_params_changed(m) == FFN_OK, "%s", ffn_last_error());
    return m;
}

/* top-1 after the prompt with neurons (layer 1) ablated */
static int32_t top_with(ffn_model *m, const int *neurons, int n, double *p_obj) {
    ffn_neuron_edit e[F];
    for (int i = 0; i < n; i++) e[i] = (ffn_neuron_edit){.layer = 1, .neuron = neurons[i], .factor = 0};
    float after[V];
    CHECK(ffn_predict_with_edits(ctx, m, prompt, T, e, n, NULL, after, NULL) == FFN_OK, "%s", ffn_last_error());
    int32_t best = 0;
    for (int v = 1; v < V; v++)
        if (after[v] > after[best]) best = v;
    if (p_obj) *p_obj = after[OBJ];
    return best;
}

static void check_set(ffn_model *m, const ffn_fact_dist_result *r, int K, const char *what) {
    CHECK(r->present && r->clean_top == OBJ, "%s: the fact is not there (top %d)", what, r->clean_top);
    CHECK(r->size == K, "%s: set of %lld units, expected %d", what, (long long)r->size, K);
    if (r->size != K) return;
    int seen[F] = {0}, idx[F];
    for (int i = 0; i < K; i++) {
        CHECK(r->units[i].layer == 1 && r->units[i].index < K, "%s: unit %d is %lld:%lld (not a carrier)", what, i,
              (long long)r->units[i].layer, (long long)r->units[i].index);
        if (r->units[i].index >= 0 && r->units[i].index < F) seen[r->units[i].index]++;
        idx[i] = (int)r->units[i].index;
        CHECK(r->attribution[i] > 0, "%s: attribution %g <= 0", what, r->attribution[i]);
    }
    for (int i = 0; i < K; i++) CHECK(seen[i] == 1, "%s: carrier %d appears %d times", what, i, seen[i]);
    CHECK(r->top_after != OBJ, "%s: verification says the fact stays (top %d)", what, r->top_after);
    /* independent verification through the neuron edits */
    CHECK(top_with(m, idx, K, NULL) != OBJ, "%s: ablating the set does not remove the fact", what);
    for (int drop = 0; drop < K; drop++) {
        int rest[F], n = 0;
        for (int i = 0; i < K; i++)
            if (i != drop) rest[n++] = idx[i];
        CHECK(top_with(m, rest, n, NULL) == OBJ, "%s: the set without unit %d still removes the fact", what, drop);
    }
    CHECK(r->n_candidates >= K + 1, "%s: %lld candidates (the carriers and the helper have A > 0)", what,
          (long long)r->n_candidates);
}

static void test_carriers(int K) {
    ffn_model *m = make(K, 1);
    if (!m) return;
    char what[64];
    ffn_fact_dist_result r;
    /* layer 1 and every layer: exactly the carriers */
    for (int64_t layer = 1; layer >= -1; layer -= 2) {
        snprintf(what, sizeof what, "K %d, layer %lld", K, (long long)layer);
        CHECK(ffn_fact_min_ablation(ctx, m, NULL, prompt, T, OBJ, layer, NULL, &r) == FFN_OK, "%s: %s", what,
              ffn_last_error());
        CHECK(r.n_units == (layer < 0 ? L * F : F), "%s: %lld units", what, (long long)r.n_units);
        check_set(m, &r, K, what);
        ffn_fact_dist_result_free(&r);
    }
    /* layer 0 carries nothing: no set */
    CHECK(ffn_fact_min_ablation(ctx, m, NULL, prompt, T, OBJ, 0, NULL, &r) == FFN_OK, "%s", ffn_last_error());
    CHECK(r.present && r.size == -1 && r.n_candidates == 0 && r.units == NULL, "K %d layer 0: size %lld, %lld candidates",
          K, (long long)r.size, (long long)r.n_candidates);
    ffn_fact_dist_result_free(&r);
    /* a capped greedy stops before the carriers are all in */
    ffn_fact_dist_options o;
    ffn_fact_dist_options_default(&o);
    if (K > 1) {
        o.max_set = K - 1;
        CHECK(ffn_fact_min_ablation(ctx, m, NULL, prompt, T, OBJ, 1, &o, &r) == FFN_OK, "%s", ffn_last_error());
        CHECK(r.size == -1, "K %d, max_set %d: size %lld", K, K - 1, (long long)r.size);
        ffn_fact_dist_result_free(&r);
    }
    /* a threshold: p(O) < P.  With P just below p_clean any one carrier
     * is enough; with P just above it the fact is not there at all */
    int all[F];
    for (int i = 0; i < K; i++) all[i] = i;
    double p_none, p_all;
    top_with(m, all, 0, &p_none);
    top_with(m, all, K, &p_all);
    o.max_set = 0;
    o.threshold = p_none * 0.9999;
    CHECK(ffn_fact_min_ablation(ctx, m, NULL, prompt, T, OBJ, 1, &o, &r) == FFN_OK, "%s", ffn_last_error());
    CHECK(r.present && r.size == 1 && r.units[0].index < K && r.p_after < o.threshold,
          "K %d, threshold just below p_clean: size %lld, p_after %g (threshold %g)", K, (long long)r.size, r.p_after,
          o.threshold);
    ffn_fact_dist_result_free(&r);
    o.threshold = p_none * 1.0001;
    CHECK(ffn_fact_min_ablation(ctx, m, NULL, prompt, T, OBJ, 1, &o, &r) == FFN_OK, "%s", ffn_last_error());
    CHECK(!r.present && r.size == -1, "K %d, threshold above p_clean: present %d", K, r.present);
    ffn_fact_dist_result_free(&r);
    o.threshold = p_all * 0.5;
    CHECK(ffn_fact_min_ablation(ctx, m, NULL, prompt, T, OBJ, 1, &o, &r) == FFN_OK, "%s", ffn_last_error());
    CHECK(r.size == -1 || r.p_after < o.threshold, "K %d, threshold below p with every carrier gone: size %lld",
          K, (long long)r.size);
    ffn_fact_dist_result_free(&r);

    /* features that are the neurons */
    ffn_tc_config tcc;
    ffn_tc_config_default(&tcc, FFN_TC_KIND_TRANSCODER, 1, D, F, F);
    tcc.k_aux = 0;
    ffn_transcoder *tc = NULL;
    CHECK(ffn_tc_create(&tcc, 3, &tc) == FFN_OK, "%s", ffn_last_error());
    if (tc) {
        ffn_tc_weights w = ffn_tc_get_weights(tc);
        const float *up = tensor(m, "model.layers.%lld.mlp.up_proj.weight", 1);
        const float *down = tensor(m, "model.layers.%lld.mlp.down_proj.weight", 1);
        for (int j = 0; j < F; j++) {
            double nrm = 0;
            for (int d = 0; d < D; d++) nrm += (double)down[d * F + j] * down[d * F + j];
            nrm = sqrt(nrm);
            w.b_enc[j] = 0;
            for (int d = 0; d < D; d++) {
                w.W_enc[j * D + d] = (float)(up[j * D + d] * nrm);
                if (nrm > 0) w.W_dec[j * D + d] = (float)(down[d * F + j] / nrm);
            }
        }
        snprintf(what, sizeof what, "K %d, features", K);
        CHECK(ffn_fact_min_ablation(ctx, m, tc, prompt, T, OBJ, -1, NULL, &r) == FFN_OK, "%s: %s", what,
              ffn_last_error());
        check_set(m, &r, K, what);
        double p;
        int32_t top;
        CHECK(ffn_ablation_predict(ctx, m, tc, r.units, r.size > 0 ? r.size : 0, prompt, T, OBJ, &p, &top) == FFN_OK,
              "%s", ffn_last_error());
        CHECK(top != OBJ && fabs(p - r.p_after) < 1e-12, "%s: predict after %g top %d, result %g", what, p, top,
              r.p_after);
        ffn_fact_dist_result_free(&r);
        /* bad input: a transcoder of another layer, or of another width */
        CHECK(ffn_fact_min_ablation(ctx, m, tc, prompt, T, OBJ, 0, NULL, &r) == FFN_ERR_INVALID_ARG &&
                  strstr(ffn_last_error(), "of layer 1, not of layer 0"),
              "a transcoder of layer 1 at layer 0: %s", ffn_last_error());
        ffn_tc_free(tc);
        ffn_tc_config_default(&tcc, FFN_TC_KIND_TRANSCODER, 1, D + 1, F, 2);
        tc = NULL;
        CHECK(ffn_tc_create(&tcc, 3, &tc) == FFN_OK, "%s", ffn_last_error());
        CHECK(ffn_fact_min_ablation(ctx, m, tc, prompt, T, OBJ, -1, NULL, &r) == FFN_ERR_INVALID_ARG &&
                  strstr(ffn_last_error(), "hidden_size"),
              "a transcoder of width D+1: %s", ffn_last_error());
        ffn_tc_free(tc);
    }
    ffn_model_free(m);
}

static void test_errors(void) {
    ffn_model *m = make(1, 1);
    if (!m) return;
    ffn_fact_dist_result r;
    CHECK(ffn_fact_min_ablation(ctx, m, NULL, prompt, T, OBJ, 2, NULL, &r) == FFN_ERR_INVALID_ARG &&
              strstr(ffn_last_error(), "layer 2 out of range (the model has 2 layers: 0..1)"),
          "layer 2: %s", ffn_last_error());
    CHECK(ffn_fact_min_ablation(ctx, m, NULL, prompt, T, V, 1, NULL, &r) == FFN_ERR_INVALID_ARG, "target V");
    ffn_fact_dist_options o = {.threshold = 1.0};
    CHECK(ffn_fact_min_ablation(ctx, m, NULL, prompt, T, OBJ, 1, &o, &r) == FFN_ERR_INVALID_ARG, "threshold 1");
    ffn_ablation_unit bad = {1, F};
    CHECK(ffn_ablation_predict(ctx, m, NULL, &bad, 1, prompt, T, OBJ, NULL, NULL) == FFN_ERR_INVALID_ARG &&
              strstr(ffn_last_error(), "out of range"),
          "unit out of range: %s", ffn_last_error());
    /* the loss with nothing ablated is the model's own */
    const int32_t text[9] = {5, 0, 2, 5, 0, 1, 5, 0, 2};
    double l1 = 0;
    CHECK(ffn_ablation_loss(ctx, m, NULL, NULL, 0, text, 9, 2, &l1) == FFN_OK, "%s", ffn_last_error());
    ffn_model_loss ml;
    CHECK(ffn_model_eval_loss(m, text + 9 - 1 - CTX * 2, text + 9 - CTX * 2, 1, CTX, &ml) == FFN_OK, "%s",
          ffn_last_error());
    double ml2 = ml.ce;
    CHECK(ffn_model_eval_loss(m, text + 9 - 1 - CTX, text + 9 - CTX, 1, CTX, &ml) == FFN_OK, "%s", ffn_last_error());
    CHECK(fabs(l1 - 0.5 * (ml.ce + ml2)) < 1e-9, "ablation loss %g, the model's %g", l1, 0.5 * (ml.ce + ml2));
    /* the model's loss on that text goes up when the carrier goes */
    ffn_ablation_unit carrier = {1, 0};
    double l2 = 0;
    CHECK(ffn_ablation_loss(ctx, m, NULL, &carrier, 1, text, 9, 2, &l2) == FFN_OK && l2 != l1,
          "the carrier's ablation does not change the loss (%g, %g)", l1, l2);
    ffn_model_free(m);
    /* no gradients */
    m = make(1, 0);
    if (!m) return;
    CHECK(ffn_fact_min_ablation(ctx, m, NULL, prompt, T, OBJ, 1, NULL, &r) == FFN_ERR_INVALID_ARG &&
              strstr(ffn_last_error(), "training model"),
          "no gradients: %s", ffn_last_error());
    ffn_model_free(m);
}

int main(void) {
    CHECK(ffn_ctx_create(1, &ctx) == FFN_OK, "ctx");
    test_carriers(1);
    test_carriers(3);
    test_errors();
    ffn_ctx_free(ctx);
    return check_done("test_fact_dist");
}
