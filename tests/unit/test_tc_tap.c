/* test_tc_tap.c -- a transcoder's features as a tap and as a switch
 * (include/ffn/transcoder.h, "As a tap"):
 *   - layers.L.tc_features after a forward equals the features computed
 *     here in double from the captured layers.L.mlp_in (an SAE: mlp_out):
 *     pre = x W_encᵀ + b_enc, the k largest kept, relu; at most k per row;
 *   - a wrong name, a layer the transcoder does not read, too few rows are
 *     errors naming the tap;
 *   - switching feature j off (scale 0) at one position gives the logits of
 *     the model with −a_j d_j added to layers.L.mlp_out there (a_j computed
 *     here), leaves the earlier positions bitwise as they were and changes
 *     that one; scale 1 is the model bitwise; a neuron patch of an earlier
 *     layer acts on a (the features read under it);
 *   - scale 2 at every position adds a_j d_j at each. */
#include "check.h"

#include <ffn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { V = 23, D = 16, F = 28, L = 3, CTX = 12, FP = 40, K = 5, T = 9 };

static ffn_ctx *ctx;
static uint64_t rng = 5;
static float frand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) / 16777216.0) - 0.5f;
}

static ffn_model *make(void) {
    ffn_model_config c;
    ffn_model_config_default(&c);
    c.vocab_size = V;
    c.hidden_size = D;
    c.intermediate_size = F;
    c.num_hidden_layers = L;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.max_position_embeddings = CTX;
    c.mlp_type = FFN_MODEL_MLP_GATED;
    ffn_model_options o = {.max_batch = 1};
    ffn_model *m = NULL;
    ffn_status st = ffn_model_create(ctx, &c, &o, &m);
    CHECK(st == FFN_OK, "create: %s", ffn_last_error());
    if (st) return NULL;
    ffn_model_init_weights(m, 3);
    int64_t n;
    float *p = ffn_model_params(m, &n);
    for (int64_t i = 0; i < n; i++) p[i] *= 8.0f;
    ffn_model_params_changed(m);
    return m;
}

static ffn_transcoder *make_tc(ffn_tc_kind kind, int64_t layer) {
    ffn_tc_config cfg;
    ffn_tc_config_default(&cfg, kind, layer, D, FP, K);
    ffn_transcoder *tc = NULL;
    CHECK(ffn_tc_create(&cfg, 11, &tc) == FFN_OK, "tc create: %s", ffn_last_error());
    if (!tc) return NULL;
    ffn_tc_weights w = ffn_tc_get_weights(tc);
    for (int64_t j = 0; j < FP; j++) w.b_enc[j] = 0.3f * frand();
    for (int64_t d = 0; d < D; d++) w.b_dec[d] = 0.2f * frand();
    return tc;
}

/* the features of rows x (n, D) in double: dense (n, FP) */
static void ref_features(ffn_transcoder *tc, const float *x, int64_t n, double *a) {
    ffn_tc_weights w = ffn_tc_get_weights(tc);
    for (int64_t r = 0; r < n; r++) {
        double pre[FP];
        unsigned char kept[FP] = {0};
        for (int64_t j = 0; j < FP; j++) {
            double s = w.b_enc[j];
            for (int64_t d = 0; d < D; d++) s += (double)x[r * D + d] * w.W_enc[j * D + d];
            pre[j] = s;
        }
        for (int s = 0; s < K; s++) { /* the largest not yet kept; ties: the lower index */
            int64_t best = -1;
            for (int64_t j = 0; j < FP; j++)
                if (!kept[j] && (best < 0 || pre[j] > pre[best])) best = j;
            kept[best] = 1;
        }
        for (int64_t j = 0; j < FP; j++) a[r * FP + j] = kept[j] && pre[j] > 0 ? pre[j] : 0;
    }
}

static double max_abs_diff(const float *a, const float *b, int64_t n) {
    double e = 0;
    for (int64_t i = 0; i < n; i++) e = fmax(e, fabs((double)a[i] - b[i]));
    return e;
}

static void fill_tokens(int32_t *tok, int64_t n) {
    for (int64_t i = 0; i < n; i++) tok[i] = (int32_t)((i * 7 + 3) % V);
}

/* the rows of `point` of layer l from a forward of tok under the model's current patches */
static void capture(ffn_model *m, const char *name, const int32_t *tok, float *out) {
    float lg[T * V];
    CHECK(ffn_model_tap_select(m, name) == FFN_OK, "select %s: %s", name, ffn_last_error());
    CHECK(ffn_model_logits(m, lg, tok, 1, T) == FFN_OK, "logits: %s", ffn_last_error());
    ffn_tap_view v;
    CHECK(ffn_model_tap_read(m, name, &v) == FFN_OK, "read %s: %s", name, ffn_last_error());
    memcpy(out, v.data, (size_t)(T * D) * sizeof *out);
}

static void test_tap(ffn_model *m, ffn_tc_kind kind) {
    const char *kn = ffn_tc_kind_name(kind);
    ffn_transcoder *tc = make_tc(kind, 1);
    if (!tc) return;
    int32_t tok[T];
    fill_tokens(tok, T);
    float lg[T * V], x[T * D], *a = malloc(sizeof(float) * T * FP);
    double *ref = malloc(sizeof(double) * T * FP);
    ffn_model_taps_clear(m);
    capture(m, kind == FFN_TC_KIND_SAE ? "layers.1.mlp_out" : "layers.1.mlp_in", tok, x);
    ffn_model_taps_clear(m);
    CHECK(ffn_tc_tap_select(m, tc) == FFN_OK, "tc select: %s", ffn_last_error());
    CHECK(ffn_model_logits(m, lg, tok, 1, T) == FFN_OK, "logits: %s", ffn_last_error());
    char name[64];
    CHECK(!strcmp(ffn_tc_tap_name(name, sizeof name, 1), "layers.1.tc_features"), "name %s", name);
    ffn_tap_view v;
    CHECK(ffn_tc_tap_read(ctx, m, tc, name, a, T, &v) == FFN_OK, "tc read: %s", ffn_last_error());
    CHECK(v.rows == T && v.cols == FP && v.B == 1 && v.T == T && v.layer == 1 && v.data == a,
          "%s view: rows %lld cols %lld", kn, (long long)v.rows, (long long)v.cols);
    ref_features(tc, x, T, ref);
    double e = 0, mx = 0;
    int most_k = 1, active = 0;
    for (int64_t r = 0; r < T; r++) {
        int nz = 0;
        for (int64_t j = 0; j < FP; j++) {
            e = fmax(e, fabs(a[r * FP + j] - ref[r * FP + j]));
            mx = fmax(mx, fabs(ref[r * FP + j]));
            nz += a[r * FP + j] != 0;
        }
        most_k &= nz <= K;
        active += nz;
    }
    printf("%-10s layers.1.tc_features against double: max |diff| %.3g (max %.3g, %d active)\n",
           kn, e, mx, active);
    CHECK(e <= 1e-5 * (1 + mx), "%s: tc_features differ from the reference by %g", kn, e);
    CHECK(most_k && active > T, "%s: %d active features over %d rows (at most %d each)", kn,
          active, T, K);
    /* errors */
    CHECK(ffn_tc_tap_read(ctx, m, tc, "layers.2.tc_features", a, T, NULL) ==
              FFN_ERR_INVALID_ARG && strstr(ffn_last_error(), "layers.1.tc_features"),
          "wrong layer: %s", ffn_last_error());
    CHECK(ffn_tc_tap_read(ctx, m, tc, "layers.1.tc_feature", a, T, NULL) == FFN_ERR_INVALID_ARG,
          "bad name accepted");
    CHECK(ffn_tc_tap_read(ctx, m, tc, name, a, T - 1, NULL) == FFN_ERR_INVALID_ARG &&
              strstr(ffn_last_error(), "rows"), "too few rows: %s", ffn_last_error());
    ffn_model_taps_clear(m);
    CHECK(ffn_tc_tap_read(ctx, m, tc, name, a, T, NULL) != FFN_OK, "read without selection");
    free(a);
    free(ref);
    ffn_tc_free(tc);
}

/* the logits with vector add[t] (D) ADDed to layers.1.mlp_out at each t where given */
static void logits_with(ffn_model *m, const int32_t *tok, const double *add, const int *at,
                        float *lg) {
    for (int64_t t = 0; t < T; t++) {
        if (!at[t]) continue;
        float vec[D];
        for (int d = 0; d < D; d++) vec[d] = (float)add[t * D + d];
        CHECK(ffn_model_tap_patch_vector(m, "layers.1.mlp_out", t, FFN_TAP_OP_ADD, vec, D) ==
                  FFN_OK, "patch: %s", ffn_last_error());
    }
    CHECK(ffn_model_logits(m, lg, tok, 1, T) == FFN_OK, "logits: %s", ffn_last_error());
}

static void test_switch(ffn_model *m, ffn_tc_kind kind, int with_neuron) {
    const char *kn = ffn_tc_kind_name(kind);
    ffn_transcoder *tc = make_tc(kind, 1);
    if (!tc) return;
    ffn_tc_weights w = ffn_tc_get_weights(tc);
    int32_t tok[T];
    fill_tokens(tok, T);
    float base[T * V], got[T * V], want[T * V], x[T * D];
    double ref[T * FP], add[T * D];
    int at[T];
    ffn_model_taps_clear(m);
    if (with_neuron)
        ffn_model_tap_patch(m, "layers.0.m", -1, 3, FFN_TAP_OP_SCALE, 0.0f);
    capture(m, kind == FFN_TC_KIND_SAE ? "layers.1.mlp_out" : "layers.1.mlp_in", tok, x);
    ref_features(tc, x, T, ref);
    CHECK(ffn_model_logits(m, base, tok, 1, T) == FFN_OK, "logits");
    /* a feature active at position p >= 2 */
    int64_t j = -1, p = -1;
    for (int64_t t = 2; t < T && j < 0; t++)
        for (int64_t f = 0; f < FP && j < 0; f++)
            if (ref[t * FP + f] > 0.05) j = f, p = t;
    CHECK(j >= 0, "%s: no active feature", kn);
    if (j < 0) return;
    /* off at p */
    ffn_tc_feature_edit ed = {j, 0.0, p};
    CHECK(ffn_tc_patch_features(ctx, m, tc, tok, T, &ed, 1) == FFN_OK, "patch features: %s",
          ffn_last_error());
    CHECK(ffn_model_logits(m, got, tok, 1, T) == FFN_OK, "logits");
    ffn_model_taps_clear(m);
    if (with_neuron) ffn_model_tap_patch(m, "layers.0.m", -1, 3, FFN_TAP_OP_SCALE, 0.0f);
    memset(at, 0, sizeof at);
    at[p] = 1;
    for (int d = 0; d < D; d++) add[p * D + d] = -ref[p * FP + j] * w.W_dec[j * D + d];
    logits_with(m, tok, add, at, want);
    double e = max_abs_diff(got, want, T * V), mx = 0;
    for (int i = 0; i < T * V; i++) mx = fmax(mx, fabs(want[i]));
    printf("%-10s%s feature %lld off at %lld: against -a d added here %.3g\n", kn,
           with_neuron ? " (+neuron)" : "", (long long)j, (long long)p, e);
    CHECK(e <= 1e-5 * (1 + mx), "%s: switch off differs by %g", kn, e);
    CHECK(max_abs_diff(got, base, p * V) == 0.0, "%s: positions before %lld changed", kn,
          (long long)p);
    CHECK(max_abs_diff(got + p * V, base + p * V, V) > 1e-4, "%s: switching off changed nothing",
          kn);
    /* scale 1: the model bitwise */
    ffn_model_taps_clear(m);
    if (with_neuron) ffn_model_tap_patch(m, "layers.0.m", -1, 3, FFN_TAP_OP_SCALE, 0.0f);
    ed.scale = 1.0;
    ed.position = -1;
    CHECK(ffn_tc_patch_features(ctx, m, tc, tok, T, &ed, 1) == FFN_OK, "patch");
    ffn_model_logits(m, got, tok, 1, T);
    CHECK(max_abs_diff(got, base, T * V) == 0.0, "%s: scale 1 is not the model", kn);
    /* scale 2 everywhere: + a_j d_j at every position where it is active */
    ffn_model_taps_clear(m);
    if (with_neuron) ffn_model_tap_patch(m, "layers.0.m", -1, 3, FFN_TAP_OP_SCALE, 0.0f);
    ed.scale = 2.0;
    CHECK(ffn_tc_patch_features(ctx, m, tc, tok, T, &ed, 1) == FFN_OK, "patch");
    ffn_model_logits(m, got, tok, 1, T);
    ffn_model_taps_clear(m);
    if (with_neuron) ffn_model_tap_patch(m, "layers.0.m", -1, 3, FFN_TAP_OP_SCALE, 0.0f);
    for (int64_t t = 0; t < T; t++) {
        at[t] = ref[t * FP + j] != 0;
        for (int d = 0; d < D; d++) add[t * D + d] = ref[t * FP + j] * w.W_dec[j * D + d];
    }
    logits_with(m, tok, add, at, want);
    e = max_abs_diff(got, want, T * V);
    CHECK(e <= 1e-5 * (1 + mx), "%s: scale 2 differs by %g", kn, e);
    /* bad edits */
    ffn_tc_feature_edit bad = {FP, 0.0, -1};
    CHECK(ffn_tc_patch_features(ctx, m, tc, tok, T, &bad, 1) == FFN_ERR_INVALID_ARG &&
              strstr(ffn_last_error(), "out of range"), "feature out of range: %s",
          ffn_last_error());
    bad.feature = 0;
    bad.position = T;
    CHECK(ffn_tc_patch_features(ctx, m, tc, tok, T, &bad, 1) == FFN_ERR_INVALID_ARG,
          "position out of range accepted");
    ffn_model_taps_clear(m);
    ffn_tc_free(tc);
}

int main(void) {
    ffn_ctx_create(0, &ctx);
    ffn_model *m = make();
    if (m) {
        test_tap(m, FFN_TC_KIND_TRANSCODER);
        test_tap(m, FFN_TC_KIND_SAE);
        test_switch(m, FFN_TC_KIND_TRANSCODER, 0);
        test_switch(m, FFN_TC_KIND_TRANSCODER, 1);
        test_switch(m, FFN_TC_KIND_SAE, 0);
        ffn_model_free(m);
    }
    ffn_ctx_free(ctx);
    return check_done("test_tc_tap");
}
