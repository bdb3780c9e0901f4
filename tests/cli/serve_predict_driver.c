/* serve_predict_driver.c -- the next-token prediction of `ffn serve`'s
 * /api/predict computed on its own, for the tests: load MODEL with the
 * public API, run the token ids once as they are and once with every edit
 * applied as a SCALE patch on layers.L.m (the public tap API), and print
 * the probabilities of the last position as JSON:
 *   {"before": [p_0 .. p_V-1], "after": [...], "kl": KL(before || after)}
 * Usage: serve_predict_driver MODEL "ID ID ..." [L:I:SCALE ...]
 * Built by tests/cli/test_serve.sh and tests/browser/test_serve.mjs
 * against build/libffn.a. */
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

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: serve_predict_driver MODEL \"ID ...\" [L:I:SCALE ...]\n");
        return 2;
    }
    ffn_ctx *ctx = NULL;
    ffn_model *m = NULL;
    if (ffn_ctx_create(1, &ctx) != FFN_OK ||
        ffn_checkpoint_load_model(ctx, argv[1], NULL, &m, NULL) != FFN_OK) {
        fprintf(stderr, "driver: %s\n", ffn_last_error());
        return 1;
    }
    int32_t ids[4096];
    int64_t T = 0;
    for (char *s = argv[2], *end; *s && T < 4096; s = end) {
        long v = strtol(s, &end, 10);
        if (end == s) break;
        ids[T++] = (int32_t)v;
    }
    const int64_t V = ffn_model_get_config(m)->vocab_size;
    double *before = malloc((size_t)V * sizeof *before), *after = malloc((size_t)V * sizeof *after);
    if (probs(m, ids, T, V, before)) return 1;
    for (int a = 3; a < argc; a++) {
        long long layer, neuron;
        double scale;
        if (sscanf(argv[a], "%lld:%lld:%lf", &layer, &neuron, &scale) != 3) return 2;
        char name[64];
        snprintf(name, sizeof name, "layers.%lld.m", layer);
        if (ffn_model_tap_patch(m, name, -1, neuron, FFN_TAP_OP_SCALE, (float)scale) != FFN_OK) {
            fprintf(stderr, "driver: %s\n", ffn_last_error());
            return 1;
        }
    }
    if (probs(m, ids, T, V, after)) return 1;
    double kl = 0;
    for (int64_t v = 0; v < V; v++)
        if (before[v] > 0) kl += before[v] * (log(before[v]) - log(fmax(after[v], 1e-300)));
    printf("{\"before\":[");
    for (int64_t v = 0; v < V; v++) printf("%s%.12g", v ? "," : "", before[v]);
    printf("],\"after\":[");
    for (int64_t v = 0; v < V; v++) printf("%s%.12g", v ? "," : "", after[v]);
    printf("],\"kl\":%.12g}\n", kl);
    free(before), free(after);
    ffn_model_free(m);
    ffn_ctx_free(ctx);
    return 0;
}
