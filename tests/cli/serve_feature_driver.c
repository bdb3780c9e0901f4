/* serve_feature_driver.c -- `ffn serve`'s feature switch computed on its
 * own, for tests/cli/test_serve_features.sh: load MODEL and a transcoder
 * file with the public API, read layers.L.tc_features of the token ids
 * (ffn_tc_tap_read), then add (scale − 1) · a_j · d_j to layers.L.mlp_out
 * at every position for each edit J:SCALE (ADD patches of the tap API,
 * not ffn_tc_patch_features) and print, as JSON,
 *   {"active": [[j, a_j], ...] at the last position, "before": [p_v],
 *    "after": [p_v], "kl": KL(before || after)}
 * Usage: serve_feature_driver MODEL TC "ID ID ..." [J:SCALE ...] */
#include "ffn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int probs(ffn_model *m, const int32_t *ids, int64_t T, int64_t V, double *p) {
    float *logits = malloc((size_t)(T * V) * sizeof *logits);
    if (!logits || ffn_model_logits(m, logits, ids, 1, T) != FFN_OK) {
        fprintf(stderr, "driver: %s\n", ffn_last_error());
        return 1;
    }
    const float *z = logits + (T - 1) * V;
    double mx = -INFINITY, s = 0;
    for (int64_t v = 0; v < V; v++) mx = fmax(mx, z[v]);
    for (int64_t v = 0; v < V; v++) s += p[v] = exp(z[v] - mx);
    for (int64_t v = 0; v < V; v++) p[v] /= s;
    free(logits);
    return 0;
}

static int die(void) {
    fprintf(stderr, "driver: %s\n", ffn_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: serve_feature_driver MODEL TC \"ID ...\" [J:SCALE ...]\n");
        return 2;
    }
    ffn_ctx *ctx = NULL;
    ffn_model *m = NULL;
    ffn_transcoder *tc = NULL;
    if (ffn_ctx_create(1, &ctx) != FFN_OK ||
        ffn_checkpoint_load_model(ctx, argv[1], NULL, &m, NULL) != FFN_OK ||
        ffn_tc_load(argv[2], &tc) != FFN_OK)
        return die();
    int32_t ids[4096];
    int64_t T = 0;
    for (char *s = argv[3], *end; *s && T < 4096; s = end) {
        long v = strtol(s, &end, 10);
        if (end == s) break;
        ids[T++] = (int32_t)v;
    }
    const ffn_tc_config *c = ffn_tc_get_config(tc);
    const int64_t V = ffn_model_get_config(m)->vocab_size, D = c->d_model, Fp = c->features;
    double *before = malloc((size_t)V * sizeof *before), *after = malloc((size_t)V * sizeof *after);
    float *a = malloc((size_t)(T * Fp) * sizeof *a), *delta = malloc((size_t)D * sizeof *delta);
    char name[64], out[64];
    if (ffn_tc_tap_select(m, tc) != FFN_OK) return die();
    if (probs(m, ids, T, V, before)) return 1;
    if (ffn_tc_tap_read(ctx, m, tc, ffn_tc_tap_name(name, sizeof name, c->layer), a, T, NULL))
        return die();
    const float *W_dec = ffn_tc_get_weights(tc).W_dec;
    snprintf(out, sizeof out, "layers.%lld.mlp_out", (long long)c->layer);
    for (int64_t t = 0; t < T; t++) {
        int any = 0;
        memset(delta, 0, (size_t)D * sizeof *delta);
        for (int e = 4; e < argc; e++) {
            long long j;
            double scale;
            if (sscanf(argv[e], "%lld:%lf", &j, &scale) != 2 || j < 0 || j >= Fp) return 2;
            const double k = (scale - 1.0) * a[t * Fp + j];
            for (int64_t d = 0; d < D && k != 0; d++) delta[d] += (float)(k * W_dec[j * D + d]);
            any |= k != 0;
        }
        if (any && ffn_model_tap_patch_vector(m, out, t, FFN_TAP_OP_ADD, delta, D) != FFN_OK)
            return die();
    }
    if (probs(m, ids, T, V, after)) return 1;
    double kl = 0;
    for (int64_t v = 0; v < V; v++)
        if (before[v] > 0) kl += before[v] * (log(before[v]) - log(fmax(after[v], 1e-300)));
    printf("{\"active\":[");
    int first = 1;
    for (int64_t j = 0; j < Fp; j++)
        if (a[(T - 1) * Fp + j] != 0) {
            printf("%s[%lld,%.9g]", first ? "" : ",", (long long)j, a[(T - 1) * Fp + j]);
            first = 0;
        }
    printf("],\"before\":[");
    for (int64_t v = 0; v < V; v++) printf("%s%.12g", v ? "," : "", before[v]);
    printf("],\"after\":[");
    for (int64_t v = 0; v < V; v++) printf("%s%.12g", v ? "," : "", after[v]);
    printf("],\"kl\":%.12g}\n", kl);
    free(before), free(after), free(a), free(delta);
    ffn_tc_free(tc);
    ffn_model_free(m);
    ffn_ctx_free(ctx);
    return 0;
}
