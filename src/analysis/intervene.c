/* intervene.c -- neuron edits (ablate, scale) as tap patches on the
 * model's one forward: parsing the specs, the next-token distribution
 * before and after, and the effect of ablating each neuron of a layer on a
 * token stream.  Everything runs through include/ffn/tap.h; the caller's
 * taps are set aside (ffn_model_taps_stash) and put back after.
 *
 * Letters: T positions, V vocab, W a layer's neuron width, B windows per
 * forward call. */
#include "ffn/intervene.h"
#include "ffn/inspect.h"
#include "ffn/tap.h"
#include "base/common.h"
#include "nn/tap_internal.h"
#include "analysis/logits.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- specs ----------------------------------------------------------------- */

/* A decimal integer >= 0 in [p, e). */
static int parse_index(const char *p, const char *e, int64_t *out) {
    if (p == e) return 1;
    int64_t v = 0;
    for (; p < e; p++) {
        if (*p < '0' || *p > '9') return 1;
        if (v > (INT64_MAX - 9) / 10) return 1;
        v = v * 10 + (*p - '0');
    }
    *out = v;
    return 0;
}

static ffn_status parse_item(const ffn_model *m, const char *p, const char *e, int with_factor,
                             const char *what, ffn_neuron_edit *out) {
    const int len = (int)(e - p);
    const char *form = with_factor ? "L:i=x (layer:neuron=factor)" : "L:i (layer:neuron)";
    const char *colon = memchr(p, ':', (size_t)(e - p));
    const char *eq = memchr(p, '=', (size_t)(e - p));
    if (!colon || (with_factor && (!eq || eq < colon)) || (!with_factor && eq))
        return ffn_error(FFN_ERR_INVALID_ARG, "%s '%.*s': expected %s", what, len, p, form);
    const char *ne = with_factor ? eq : e;
    int64_t layer, neuron;
    if (parse_index(p, colon, &layer) || parse_index(colon + 1, ne, &neuron))
        return ffn_error(FFN_ERR_INVALID_ARG,
                         "%s '%.*s': expected %s with L and i non-negative integers", what, len, p, form);
    float factor = 0.0f;
    if (with_factor) {
        char buf[64];
        size_t n = (size_t)(e - eq - 1);
        if (n == 0 || n >= sizeof buf)
            return ffn_error(FFN_ERR_INVALID_ARG, "%s '%.*s': expected a number after '='", what, len, p);
        memcpy(buf, eq + 1, n);
        buf[n] = 0;
        char *end;
        errno = 0;
        double x = strtod(buf, &end);
        if (*end || errno || !isfinite(x) || fabs(x) > 3.4e38)
            return ffn_error(FFN_ERR_INVALID_ARG, "%s '%.*s': expected a finite number after '=', got '%s'",
                             what, len, p, buf);
        factor = (float)x;
    }
    const int64_t L = ffn_model_get_config(m)->num_hidden_layers;
    if (layer >= L)
        return ffn_error(FFN_ERR_INVALID_ARG,
                         "%s '%.*s': layer %lld out of range (the model has %lld layers: 0..%lld)",
                         what, len, p, (long long)layer, (long long)L, (long long)(L - 1));
    const int64_t W = ffn_inspect_layer_width(m, layer);
    if (W == 0)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s '%.*s': layer %lld has no FFN (mlp_type none)",
                         what, len, p, (long long)layer);
    if (neuron >= W)
        return ffn_error(FFN_ERR_INVALID_ARG,
                         "%s '%.*s': neuron %lld out of range (layer %lld has %lld neurons: 0..%lld)",
                         what, len, p, (long long)neuron, (long long)layer, (long long)W,
                         (long long)(W - 1));
    *out = (ffn_neuron_edit){.layer = layer, .neuron = neuron, .factor = factor};
    return FFN_OK;
}

ffn_status ffn_neuron_edits_parse(const ffn_model *m, const char *spec, int with_factor,
                                  const char *what, ffn_neuron_edit **edits, int64_t *n_edits) {
    if (!m || !spec || !edits || !n_edits || *n_edits < 0)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_neuron_edits_parse: NULL argument");
    if (!what) what = "edit";
    if (!*spec)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: empty (expected %s)", what,
                         with_factor ? "L:i=x[,L:j=y...]" : "L:i[,L:j...]");
    int64_t count = 1;
    for (const char *p = spec; *p; p++) count += *p == ',';
    ffn_neuron_edit *add = calloc((size_t)count, sizeof *add);
    if (!add) return ffn_error(FFN_ERR_NOMEM, "%s", what);
    int64_t k = 0;
    for (const char *p = spec;; k++) {
        const char *e = strchr(p, ',');
        if (!e) e = p + strlen(p);
        if (e == p) {
            free(add);
            return ffn_error(FFN_ERR_INVALID_ARG, "%s '%s': item %lld is empty", what, spec, (long long)k + 1);
        }
        ffn_status st = parse_item(m, p, e, with_factor, what, &add[k]);
        if (st) {
            free(add);
            return st;
        }
        if (!*e) break;
        p = e + 1;
    }
    int64_t total = *n_edits + count;
    ffn_neuron_edit *all = realloc(*edits, (size_t)total * sizeof *all);
    if (!all) {
        free(add);
        return ffn_error(FFN_ERR_NOMEM, "%s", what);
    }
    memcpy(all + *n_edits, add, (size_t)count * sizeof *add);
    free(add);
    *edits = all;
    *n_edits = total;
    return FFN_OK;
}

/* ---- running with edits ---------------------------------------------------------- */

static ffn_status check_edits(const ffn_model *m, const ffn_neuron_edit *e, int64_t n) {
    const int64_t L = ffn_model_get_config(m)->num_hidden_layers;
    for (int64_t k = 0; k < n; k++) {
        if (e[k].layer < 0 || e[k].layer >= L)
            return ffn_error(FFN_ERR_INVALID_ARG, "edit %lld: layer %lld out of range (the model has %lld layers: 0..%lld)",
                             (long long)k, (long long)e[k].layer, (long long)L, (long long)(L - 1));
        const int64_t W = ffn_inspect_layer_width(m, e[k].layer);
        if (e[k].neuron < 0 || e[k].neuron >= W)
            return ffn_error(FFN_ERR_INVALID_ARG, "edit %lld: neuron %lld out of range (layer %lld has %lld neurons)",
                             (long long)k, (long long)e[k].neuron, (long long)e[k].layer, (long long)W);
        if (!isfinite(e[k].factor))
            return ffn_error(FFN_ERR_INVALID_ARG, "edit %lld: factor is not finite", (long long)k);
    }
    return FFN_OK;
}

/* Patch every edit into the (stashed-away, fresh) taps. */
static ffn_status apply_edits(ffn_model *m, const ffn_neuron_edit *e, int64_t n) {
    char name[64];
    for (int64_t k = 0; k < n; k++) {
        ffn_tap_name(name, sizeof name, e[k].layer, FFN_TAP_M);
        ffn_tap_op op = e[k].factor == 0.0f ? FFN_TAP_OP_SET : FFN_TAP_OP_SCALE;
        ffn_status st = ffn_model_tap_patch(m, name, -1, e[k].neuron, op, e[k].factor);
        if (st) return st;
    }
    return FFN_OK;
}

/* KL(p ‖ q) from log-probabilities (V). */
static double kl_div(const double *lp, const double *lq, int64_t V) {
    double s = 0;
    for (int64_t v = 0; v < V; v++)
        if (lp[v] > -745) s += exp(lp[v]) * (lp[v] - lq[v]);
    return s > 0 ? s : 0;
}

static ffn_status check_tokens(const ffn_model *m, const int32_t *tokens, int64_t T, const char *who) {
    const ffn_model_config *c = ffn_model_get_config(m);
    if (T < 1 || T > c->max_position_embeddings)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: %lld tokens (expected 1 .. %lld, the context)",
                         who, (long long)T, (long long)c->max_position_embeddings);
    for (int64_t t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= c->vocab_size)
            return ffn_error(FFN_ERR_INVALID_ARG, "%s: token %lld is id %d (expected 0 .. %lld)", who,
                             (long long)t, tokens[t], (long long)(c->vocab_size - 1));
    return FFN_OK;
}

ffn_status ffn_predict_with_edits(ffn_ctx *ctx, ffn_model *m, const int32_t *tokens, int64_t T,
                                  const ffn_neuron_edit *edits, int64_t n_edits, float *p_before,
                                  float *p_after, double *kl) {
    (void)ctx;
    if (!m || !tokens || (n_edits > 0 && !edits) || n_edits < 0)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_predict_with_edits: NULL argument");
    ffn_status st = check_tokens(m, tokens, T, "predict with edits");
    if (!st) st = check_edits(m, edits, n_edits);
    if (st) return st;
    const int64_t V = ffn_model_get_config(m)->vocab_size;
    float *logits = malloc((size_t)(T * V) * sizeof *logits);
    double *lb = malloc((size_t)V * sizeof *lb), *la = malloc((size_t)V * sizeof *la);
    if (!logits || !lb || !la) {
        free(logits), free(lb), free(la);
        return ffn_error(FFN_ERR_NOMEM, "predict with edits: %lld logits", (long long)(T * V));
    }
    ffn_taps *stash = ffn_model_taps_stash(m);
    if ((st = ffn_model_reserve(m, 1, T))) goto done;
    if ((st = ffn_model_logits(m, logits, tokens, 1, T))) goto done;
    ffn_logits_log_softmax(logits + (T - 1) * V, V, lb);
    if (n_edits > 0) {
        if ((st = apply_edits(m, edits, n_edits))) goto done;
        if ((st = ffn_model_logits(m, logits, tokens, 1, T))) goto done;
        ffn_logits_log_softmax(logits + (T - 1) * V, V, la);
    } else memcpy(la, lb, (size_t)V * sizeof *la);
    for (int64_t v = 0; v < V; v++) {
        if (p_before) p_before[v] = (float)exp(lb[v]);
        if (p_after) p_after[v] = (float)exp(la[v]);
    }
    if (kl) *kl = kl_div(lb, la, V);
done:
    ffn_model_taps_restore(m, stash);
    free(logits), free(lb), free(la);
    return st;
}

/* ---- effects of ablating each neuron of a layer ---------------------------------------- */

/* Windows per forward call (bounded so the logits stay small). */
#define EFFECT_BATCH 8

ffn_status ffn_neuron_effects(ffn_ctx *ctx, ffn_model *m, const int32_t *tokens, int64_t n,
                              int64_t layer, int64_t window, int64_t n_neurons, double *mean_kl,
                              double *delta_loss, double *base_loss) {
    (void)ctx;
    if (!m || !tokens) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_neuron_effects: NULL argument");
    const ffn_model_config *c = ffn_model_get_config(m);
    const int64_t L = c->num_hidden_layers, V = c->vocab_size;
    if (layer < 0 || layer >= L)
        return ffn_error(FFN_ERR_INVALID_ARG, "neuron effects: layer %lld out of range (the model has %lld layers: 0..%lld)",
                         (long long)layer, (long long)L, (long long)(L - 1));
    const int64_t W = ffn_inspect_layer_width(m, layer);
    if (W == 0)
        return ffn_error(FFN_ERR_INVALID_ARG, "neuron effects: layer %lld has no FFN", (long long)layer);
    if (n_neurons <= 0 || n_neurons > W) n_neurons = W;
    if (window <= 0 || window > c->max_position_embeddings) window = c->max_position_embeddings;
    if (n < 2) return ffn_error(FFN_ERR_INVALID_ARG, "neuron effects: %lld tokens (need at least 2)", (long long)n);
    if (window > n) window = n;
    if (window < 2) window = 2;
    ffn_status st = check_tokens(m, tokens, window, "neuron effects");
    for (int64_t t = 0; t < n && !st; t++)
        if (tokens[t] < 0 || tokens[t] >= V)
            st = ffn_error(FFN_ERR_INVALID_ARG, "neuron effects: token %lld is id %d (expected 0 .. %lld)",
                           (long long)t, tokens[t], (long long)(V - 1));
    if (st) return st;
    const int64_t n_win = n / window, T = window;
    const int64_t B = n_win < EFFECT_BATCH ? n_win : EFFECT_BATCH;
    const int64_t n_pos = n_win * T; /* positions with a distribution */
    float *logits = malloc((size_t)(B * T * V) * sizeof *logits);
    float *base = malloc((size_t)(n_pos * V) * sizeof *base); /* log-probabilities */
    double *row = malloc((size_t)V * sizeof *row), *brow = malloc((size_t)V * sizeof *brow);
    if (!logits || !base || !row || !brow) {
        st = ffn_error(FFN_ERR_NOMEM, "neuron effects: %lld positions x %lld tokens", (long long)n_pos, (long long)V);
        goto out;
    }
    ffn_taps *stash = ffn_model_taps_stash(m);
    if ((st = ffn_model_reserve(m, B, T))) goto done;
    /* baseline: log-probabilities of every position, and the loss */
    double loss0 = 0;
    int64_t n_targets = 0;
    for (int64_t w0 = 0; w0 < n_win && !st; w0 += B) {
        int64_t b = n_win - w0 < B ? n_win - w0 : B;
        if ((st = ffn_model_logits(m, logits, tokens + w0 * T, b, T))) break;
        for (int64_t r = 0; r < b * T; r++) {
            ffn_logits_log_softmax(logits + r * V, V, row);
            for (int64_t v = 0; v < V; v++) base[(w0 * T + r) * V + v] = (float)row[v];
            if (r % T < T - 1) {
                loss0 -= row[tokens[w0 * T + r + 1]];
                n_targets++;
            }
        }
    }
    if (st) goto done;
    if (base_loss) *base_loss = loss0 / (double)n_targets;
    char name[64];
    ffn_tap_name(name, sizeof name, layer, FFN_TAP_M);
    for (int64_t i = 0; i < n_neurons && !st; i++) {
        ffn_model_taps_clear(m);
        if ((st = ffn_model_tap_patch(m, name, -1, i, FFN_TAP_OP_SET, 0.0f))) break;
        double kl = 0, loss = 0;
        for (int64_t w0 = 0; w0 < n_win && !st; w0 += B) {
            int64_t b = n_win - w0 < B ? n_win - w0 : B;
            if ((st = ffn_model_logits(m, logits, tokens + w0 * T, b, T))) break;
            for (int64_t r = 0; r < b * T; r++) {
                ffn_logits_log_softmax(logits + r * V, V, row);
                const float *bp = base + (w0 * T + r) * V;
                for (int64_t v = 0; v < V; v++) brow[v] = bp[v];
                kl += kl_div(brow, row, V);
                if (r % T < T - 1) loss -= row[tokens[w0 * T + r + 1]];
            }
        }
        if (mean_kl) mean_kl[i] = kl / (double)n_pos;
        if (delta_loss) delta_loss[i] = (loss - loss0) / (double)n_targets;
    }
done:
    ffn_model_taps_restore(m, stash);
out:
    free(logits), free(base), free(row), free(brow);
    return st;
}
