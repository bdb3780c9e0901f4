/* transcoder_model.c -- a transcoder / SAE with its model: the rows it
 * reads, captured from the model's one forward through taps, and its
 * evaluation, including the model's loss with the FFN's output replaced
 * by the transcoder's (the honest measure of faithfulness: small errors
 * that matter to the next layers show up here, not in the FVU).
 * Letters: B batch, T positions, n = B·T rows, D hidden_size. */
#include "ffn/transcoder.h"

#include "base/common.h"
#include "ffn/tap.h"
#include "nn/tap_internal.h"
#include "analysis/topk.h"
#include "analysis/transcoder_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ffn_status check_layer(const ffn_model *m, ffn_tc_kind kind, int64_t layer, int64_t D) {
    const ffn_model_config *cfg = ffn_model_get_config(m);
    if (layer < 0 || layer >= cfg->num_hidden_layers)
        return ffn_error(FFN_ERR_INVALID_ARG, "transcoder: layer %lld out of range (model has %lld "
                         "layers: 0..%lld)", (long long)layer, (long long)cfg->num_hidden_layers,
                         (long long)cfg->num_hidden_layers - 1);
    if (D >= 0 && D != cfg->hidden_size)
        return ffn_error(FFN_ERR_INVALID_ARG, "transcoder: its width %lld is not the model's "
                         "hidden_size %lld (a transcoder of another model?)", (long long)D,
                         (long long)cfg->hidden_size);
    (void)kind;
    return FFN_OK;
}

/* taps of mlp_in and mlp_out of `layer` selected; then one forward */
static ffn_status capture_rows(ffn_model *m, ffn_tc_kind kind, int64_t layer, const int32_t *tok,
                               const int32_t *targets, int64_t B, int64_t T, float *x, float *y,
                               double *loss, int64_t *n_targets) {
    char nin[64], nout[64];
    ffn_tap_name(nin, sizeof nin, layer, FFN_TAP_MLP_IN);
    ffn_tap_name(nout, sizeof nout, layer, FFN_TAP_MLP_OUT);
    ffn_status st = ffn_model_tap_select(m, nout);
    if (!st && kind == FFN_TC_KIND_TRANSCODER) st = ffn_model_tap_select(m, nin);
    ffn_model_loss l;
    if (!st) st = ffn_model_eval_loss(m, tok, targets, B, T, &l);
    if (st) return st;
    const int64_t D = ffn_model_get_config(m)->hidden_size, n = B * T;
    ffn_tap_view v;
    if ((st = ffn_model_tap_read(m, nout, &v))) return st;
    if (v.rows != n || v.cols != D)
        return ffn_error(FFN_ERR_INTERNAL, "transcoder: tap %s has %lld x %lld rows, expected "
                         "%lld x %lld", nout, (long long)v.rows, (long long)v.cols, (long long)n,
                         (long long)D);
    if (y) memcpy(y, v.data, (size_t)(n * D) * sizeof(float));
    if (kind == FFN_TC_KIND_SAE) {
        if (x && x != y) memcpy(x, v.data, (size_t)(n * D) * sizeof(float));
    } else {
        if ((st = ffn_model_tap_read(m, nin, &v))) return st;
        if (x) memcpy(x, v.data, (size_t)(n * D) * sizeof(float));
    }
    if (loss) *loss = l.ce;
    if (n_targets) *n_targets = l.n_targets;
    return FFN_OK;
}

ffn_status ffn_tc_capture(ffn_model *model, ffn_tc_kind kind, int64_t layer,
                          const int32_t *tokens, int64_t B, int64_t T, float *x, float *y,
                          double *loss) {
    if (!model || !tokens || B < 1 || T < 1 || !ffn_tc_kind_name(kind))
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_tc_capture: bad arguments");
    ffn_status st = check_layer(model, kind, layer, -1);
    if (st) return st;
    int32_t *targets = malloc((size_t)(B * T) * sizeof *targets);
    if (!targets) return ffn_error(FFN_ERR_NOMEM, "transcoder: out of memory");
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            targets[b * T + t] = t + 1 < T ? tokens[b * T + t + 1] : FFN_IGNORE_INDEX;
    ffn_taps *stash = ffn_model_taps_stash(model);
    st = capture_rows(model, kind, layer, tokens, targets, B, T, x, y, loss, NULL);
    ffn_model_taps_restore(model, stash);
    free(targets);
    return st;
}

/* ---- evaluation -------------------------------------------------------------------- */

ffn_status ffn_tc_evaluate(const ffn_ctx *ctx, ffn_model *model, ffn_transcoder *tc,
                           const int32_t *tokens, int64_t n_tok, int64_t windows,
                           ffn_tc_eval *out) {
    if (!ctx || !model || !tc || !tokens || windows < 1 || !out)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_tc_evaluate: bad arguments");
    const ffn_tc_config *c = &tc->cfg;
    const int64_t D = c->d_model, Fp = c->features, k = c->k;
    ffn_status st = check_layer(model, c->kind, c->layer, D);
    if (st) return st;
    int64_t max_n, max_seq;
    ffn_model_rows(model, &max_n, &max_seq);
    const int64_t T = n_tok - 1 < max_seq ? n_tok - 1 : max_seq;
    if (T < 1) return ffn_error(FFN_ERR_INVALID_ARG, "transcoder evaluation: fewer than 2 tokens");
    float *x = malloc((size_t)(T * D) * sizeof *x), *y = malloc((size_t)(T * D) * sizeof *y);
    float *yh = malloc((size_t)(T * D) * sizeof *yh), *zero = calloc((size_t)D, sizeof *zero);
    float *val = malloc((size_t)(T * k) * sizeof *val);
    int32_t *idx = malloc((size_t)(T * k) * sizeof *idx);
    unsigned char *fired = calloc((size_t)Fp, 1);
    double *sum = calloc((size_t)D, sizeof *sum), *sum2 = calloc((size_t)D, sizeof *sum2);
    if (!x || !y || !yh || !zero || !val || !idx || !fired || !sum || !sum2) {
        st = ffn_error(FFN_ERR_NOMEM, "transcoder evaluation: out of memory");
        goto done;
    }
    char nout[64];
    ffn_tap_name(nout, sizeof nout, c->layer, FFN_TAP_MLP_OUT);
    ffn_taps *stash = ffn_model_taps_stash(model);
    double sse = 0, lo = 0, lr = 0, lz = 0;
    int64_t rows = 0, active = 0, targets = 0;
    for (int64_t w = 0; w < windows && !st; w++) {
        const int64_t at = w * T;
        if (at + T + 1 > n_tok) break;
        const int32_t *tok = tokens + at, *tgt = tokens + at + 1;
        double l0;
        int64_t nt;
        ffn_model_taps_clear(model);
        if ((st = capture_rows(model, c->kind, c->layer, tok, tgt, 1, T, x, y, &l0, &nt))) break;
        if ((st = ffn_tc_forward(ctx, tc, x, T, yh, idx, val))) break;
        for (int64_t i = 0; i < T * D; i++) {
            const double r = (double)yh[i] - y[i];
            sse += r * r;
        }
        for (int64_t i = 0; i < T; i++)
            for (int64_t d = 0; d < D; d++) {
                sum[d] += y[i * D + d];
                sum2[d] += (double)y[i * D + d] * y[i * D + d];
            }
        for (int64_t e = 0; e < T * k; e++)
            if (val[e] > 0) {
                active++;
                fired[idx[e]] = 1;
            }
        rows += T;
        /* the FFN's output replaced, position by position */
        ffn_model_taps_clear(model);
        for (int64_t t = 0; t < T && !st; t++)
            st = ffn_model_tap_patch_vector(model, nout, t, FFN_TAP_OP_SET, yh + t * D, D);
        ffn_model_loss l;
        if (!st) st = ffn_model_eval_loss(model, tok, tgt, 1, T, &l);
        if (st) break;
        const double l1 = l.ce;
        ffn_model_taps_clear(model);
        st = ffn_model_tap_patch_vector(model, nout, -1, FFN_TAP_OP_SET, zero, D);
        if (!st) st = ffn_model_eval_loss(model, tok, tgt, 1, T, &l);
        if (st) break;
        lo += l0 * (double)nt;
        lr += l1 * (double)nt;
        lz += l.ce * (double)nt;
        targets += nt;
    }
    ffn_model_taps_restore(model, stash);
    if (!st && rows == 0) st = ffn_error(FFN_ERR_INVALID_ARG, "transcoder evaluation: no window");
    if (!st) {
        double sst = 0;
        for (int64_t d = 0; d < D; d++) sst += sum2[d] - sum[d] * sum[d] / (double)rows;
        memset(out, 0, sizeof *out);
        out->fvu = sse / (sst > 0 ? sst : 1e-30);
        out->mse = sse / ((double)rows * (double)D);
        out->l0 = (double)active / (double)rows;
        out->rows = rows;
        for (int64_t j = 0; j < Fp; j++) out->dead += !fired[j];
        out->loss_original = lo / (double)targets;
        out->loss_replaced = lr / (double)targets;
        out->loss_zero = lz / (double)targets;
        const double gap = out->loss_zero - out->loss_original;
        out->loss_recovered = gap != 0 ? (out->loss_zero - out->loss_replaced) / gap : NAN;
    }
done:
    free(x);
    free(y);
    free(yh);
    free(zero);
    free(val);
    free(idx);
    free(fired);
    free(sum);
    free(sum2);
    return st;
}

/* ---- reading a feature ------------------------------------------------------------ */

static const float *model_tensor(ffn_model *m, const char *name, int64_t rows, int64_t cols) {
    const ffn_model_tensor *t = ffn_model_find_tensor(m, name);
    if (!t) return NULL;
    const int64_t n = t->ndim == 1 ? t->shape[0] : t->shape[0] * t->shape[1];
    if (n != rows * cols) return NULL;
    return ffn_model_params(m, NULL) + t->offset;
}

ffn_status ffn_tc_feature_logits(ffn_model *m, const ffn_transcoder *tc, int64_t j, float *lens) {
    if (!m || !tc || !lens)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_tc_feature_logits: NULL argument");
    const ffn_model_config *c = ffn_model_get_config(m);
    const int64_t V = c->vocab_size, D = c->hidden_size;
    ffn_status st = check_layer(m, tc->cfg.kind, tc->cfg.layer, tc->cfg.d_model);
    if (st) return st;
    if (j < 0 || j >= tc->cfg.features)
        return ffn_error(FFN_ERR_INVALID_ARG, "feature %lld out of range (the transcoder has "
                         "%lld: 0..%lld)", (long long)j, (long long)tc->cfg.features,
                         (long long)tc->cfg.features - 1);
    const float *U = c->tie_word_embeddings ? model_tensor(m, "model.embed_tokens.weight", V, D)
                                            : model_tensor(m, "lm_head.weight", V, D);
    const float *g = model_tensor(m, "model.norm.weight", D, 1);
    if (!U || !g)
        return ffn_error(FFN_ERR_UNSUPPORTED, "transcoder: the model's output embedding or "
                         "model.norm.weight is not in its fp32 table (load it without "
                         "low-precision weights)");
    const float *dj = tc->p + tc->off_W_dec + j * D;
    double *gv = malloc((size_t)D * sizeof *gv);
    if (!gv) return ffn_error(FFN_ERR_NOMEM, "transcoder: out of memory");
    const double off = (double)(float)c->norm_weight_offset;
    for (int64_t d = 0; d < D; d++) gv[d] = ((double)g[d] + off) * (double)dj[d];
    for (int64_t t = 0; t < V; t++) {
        double acc = 0;
        for (int64_t d = 0; d < D; d++) acc += (double)U[t * D + d] * gv[d];
        lens[t] = (float)acc;
    }
    free(gv);
    return FFN_OK;
}

ffn_status ffn_tc_codes(const ffn_ctx *ctx, ffn_model *m, ffn_transcoder *tc,
                        const int32_t *tokens, int64_t n_tok, int32_t *idx, float *val) {
    if (!ctx || !m || !tc || !tokens || n_tok < 1 || !idx || !val)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_tc_codes: bad arguments");
    const int64_t D = tc->cfg.d_model, k = tc->cfg.k;
    ffn_status st = check_layer(m, tc->cfg.kind, tc->cfg.layer, D);
    if (st) return st;
    int64_t max_n, max_seq;
    ffn_model_rows(m, &max_n, &max_seq);
    const int64_t T = n_tok < max_seq ? n_tok : max_seq;
    float *x = malloc((size_t)(T * D) * sizeof *x), *y = malloc((size_t)(T * D) * sizeof *y);
    int32_t *tgt = malloc((size_t)T * sizeof *tgt);
    if (!x || !y || !tgt) st = ffn_error(FFN_ERR_NOMEM, "transcoder: out of memory");
    for (int64_t t = 0; t < T && !st; t++) tgt[t] = FFN_IGNORE_INDEX;
    ffn_taps *stash = ffn_model_taps_stash(m);
    for (int64_t at = 0; at < n_tok && !st; at += T) {
        const int64_t len = n_tok - at < T ? n_tok - at : T;
        ffn_model_taps_clear(m);
        st = capture_rows(m, tc->cfg.kind, tc->cfg.layer, tokens + at, tgt, 1, len, x, y, NULL,
                          NULL);
        if (!st) st = ffn_tc_forward(ctx, tc, x, len, NULL, idx + at * k, val + at * k);
    }
    ffn_model_taps_restore(m, stash);
    free(x);
    free(y);
    free(tgt);
    return st;
}

ffn_status ffn_tc_top_activations(const ffn_ctx *ctx, ffn_model *m, ffn_transcoder *tc,
                                  int64_t j, const int32_t *tokens, int64_t n_tok, int64_t n_top,
                                  int64_t *at, float *act, int64_t *n_found) {
    if (!at || !act || n_top < 1 || !tc)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_tc_top_activations: bad arguments");
    if (j < 0 || j >= tc->cfg.features)
        return ffn_error(FFN_ERR_INVALID_ARG, "feature %lld out of range (the transcoder has "
                         "%lld: 0..%lld)", (long long)j, (long long)tc->cfg.features,
                         (long long)tc->cfg.features - 1);
    const int64_t k = tc->cfg.k;
    int32_t *idx = malloc((size_t)(n_tok * k) * sizeof *idx);
    float *val = malloc((size_t)(n_tok * k) * sizeof *val);
    ffn_status st = !idx || !val ? ffn_error(FFN_ERR_NOMEM, "transcoder: out of memory")
                                 : ffn_tc_codes(ctx, m, tc, tokens, n_tok, idx, val);
    int64_t kept = 0;
    for (int64_t t = 0; t < n_tok && !st; t++)
        for (int64_t s = 0; s < k; s++)
            if (idx[t * k + s] == j && val[t * k + s] > 0)
                ffn_topk_push_i64(act, at, &kept, n_top, val[t * k + s], t);
    if (n_found) *n_found = st ? 0 : kept;
    for (int64_t i = kept; i < n_top; i++) {
        at[i] = -1;
        act[i] = 0;
    }
    free(idx);
    free(val);
    return st;
}

/* ---- as a tap: layers.L.tc_features ----------------------------------------------- */

char *ffn_tc_tap_name(char *buf, size_t size, int64_t layer) {
    if (buf && size) snprintf(buf, size, "layers.%lld.tc_features", (long long)layer);
    return buf;
}

/* the point the transcoder reads: mlp_in (an SAE: mlp_out) of its layer */
static void source_name(const ffn_transcoder *tc, char *buf, size_t size) {
    ffn_tap_name(buf, size, tc->cfg.layer,
                 tc->cfg.kind == FFN_TC_KIND_SAE ? FFN_TAP_MLP_OUT : FFN_TAP_MLP_IN);
}

ffn_status ffn_tc_tap_select(ffn_model *m, const ffn_transcoder *tc) {
    if (!m || !tc) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_tc_tap_select: NULL argument");
    ffn_status st = check_layer(m, tc->cfg.kind, tc->cfg.layer, tc->cfg.d_model);
    if (st) return st;
    char src[64];
    source_name(tc, src, sizeof src);
    return ffn_model_tap_select(m, src);
}

ffn_status ffn_tc_tap_read(const ffn_ctx *ctx, const ffn_model *m, ffn_transcoder *tc,
                           const char *name, float *out, int64_t max_rows, ffn_tap_view *view) {
    if (!ctx || !m || !tc || !name || !out)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_tc_tap_read: NULL argument");
    char want[64], src[64];
    ffn_tc_tap_name(want, sizeof want, tc->cfg.layer);
    if (strcmp(name, want))
        return ffn_error(FFN_ERR_INVALID_ARG, "tap '%s': this transcoder's features are '%s' "
                         "(it reads layer %lld)", name, want, (long long)tc->cfg.layer);
    source_name(tc, src, sizeof src);
    ffn_tap_view v;
    ffn_status st = ffn_model_tap_read(m, src, &v);
    if (st) return st;
    const int64_t D = tc->cfg.d_model, Fp = tc->cfg.features, k = tc->cfg.k, n = v.rows;
    if (v.cols != D)
        return ffn_error(FFN_ERR_INVALID_ARG, "tap '%s': %s has width %lld, the transcoder %lld",
                         name, src, (long long)v.cols, (long long)D);
    if (n > max_rows)
        return ffn_error(FFN_ERR_INVALID_ARG, "tap '%s': the last forward has %lld rows, out "
                         "holds %lld", name, (long long)n, (long long)max_rows);
    int32_t *idx = malloc((size_t)(n * k) * sizeof *idx + 1);
    float *val = malloc((size_t)(n * k) * sizeof *val + 1);
    if (!idx || !val) st = ffn_error(FFN_ERR_NOMEM, "transcoder: out of memory");
    if (!st && n > 0) st = ffn_tc_forward(ctx, tc, v.data, n, NULL, idx, val);
    if (!st) {
        memset(out, 0, (size_t)(n * Fp) * sizeof *out);
        for (int64_t r = 0; r < n; r++)
            for (int64_t s = 0; s < k; s++) out[r * Fp + idx[r * k + s]] = val[r * k + s];
        if (view) {
            *view = v;
            view->data = out;
            view->cols = Fp;
        }
    }
    free(idx);
    free(val);
    return st;
}

ffn_status ffn_tc_patch_features(const ffn_ctx *ctx, ffn_model *m, ffn_transcoder *tc,
                                 const int32_t *tokens, int64_t T,
                                 const ffn_tc_feature_edit *edits, int64_t n_edits) {
    if (!ctx || !m || !tc || !tokens || T < 1 || (n_edits && !edits) || n_edits < 0)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_tc_patch_features: bad arguments");
    const int64_t D = tc->cfg.d_model, Fp = tc->cfg.features, k = tc->cfg.k;
    for (int64_t e = 0; e < n_edits; e++) {
        if (edits[e].feature < 0 || edits[e].feature >= Fp)
            return ffn_error(FFN_ERR_INVALID_ARG, "feature %lld out of range (the transcoder "
                             "has %lld: 0..%lld)", (long long)edits[e].feature, (long long)Fp,
                             (long long)Fp - 1);
        if (edits[e].position < -1 || edits[e].position >= T)
            return ffn_error(FFN_ERR_INVALID_ARG, "feature %lld: position %lld out of range "
                             "(-1 for every position, or 0..%lld)", (long long)edits[e].feature,
                             (long long)edits[e].position, (long long)T - 1);
        if (!isfinite(edits[e].scale))
            return ffn_error(FFN_ERR_INVALID_ARG, "feature %lld: scale is not finite",
                             (long long)edits[e].feature);
    }
    ffn_status st = ffn_tc_tap_select(m, tc);
    if (st || n_edits == 0) return st;
    int64_t max_n, max_seq;
    ffn_model_rows(m, &max_n, &max_seq);
    if (T > max_seq)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_tc_patch_features: %lld tokens, more than the "
                         "model's rows (%lld)", (long long)T, (long long)max_seq);
    int32_t *tgt = malloc((size_t)T * sizeof *tgt), *idx = malloc((size_t)(T * k) * sizeof *idx);
    float *val = malloc((size_t)(T * k) * sizeof *val), *delta = malloc((size_t)D * sizeof *delta);
    if (!tgt || !idx || !val || !delta) st = ffn_error(FFN_ERR_NOMEM, "transcoder: out of memory");
    for (int64_t t = 0; !st && t < T; t++) tgt[t] = FFN_IGNORE_INDEX;
    ffn_model_loss l;
    if (!st) st = ffn_model_eval_loss(m, tokens, tgt, 1, T, &l);
    char src[64], nout[64];
    source_name(tc, src, sizeof src);
    ffn_tap_name(nout, sizeof nout, tc->cfg.layer, FFN_TAP_MLP_OUT);
    ffn_tap_view v;
    if (!st) st = ffn_model_tap_read(m, src, &v);
    if (!st && (v.rows != T || v.cols != D))
        st = ffn_error(FFN_ERR_INTERNAL, "transcoder: tap %s has %lld x %lld rows, expected "
                       "%lld x %lld", src, (long long)v.rows, (long long)v.cols, (long long)T,
                       (long long)D);
    if (!st) st = ffn_tc_forward(ctx, tc, v.data, T, NULL, idx, val);
    const float *W_dec = tc->p + tc->off_W_dec;
    for (int64_t t = 0; !st && t < T; t++) {
        int changed = 0;
        memset(delta, 0, (size_t)D * sizeof *delta);
        for (int64_t e = 0; e < n_edits; e++) {
            if (edits[e].position >= 0 && edits[e].position != t) continue;
            float a = 0;
            for (int64_t s = 0; s < k; s++)
                if (idx[t * k + s] == edits[e].feature) a = val[t * k + s];
            const double c = (edits[e].scale - 1.0) * (double)a;
            if (c == 0) continue;
            const float *dj = W_dec + edits[e].feature * D;
            for (int64_t d = 0; d < D; d++) delta[d] += (float)(c * (double)dj[d]);
            changed = 1;
        }
        if (changed) st = ffn_model_tap_patch_vector(m, nout, t, FFN_TAP_OP_ADD, delta, D);
    }
    free(tgt);
    free(idx);
    free(val);
    free(delta);
    return st;
}
