/* fact_dist.c -- how distributed is a fact (include/ffn/trace.h): the
 * smallest set of FFN neurons, or of a transcoder's features, whose
 * ablation removes a fact -- attribution by one backward through the taps,
 * greedy by attribution, pruned and verified by ablating -- and the
 * model's prediction and loss with a set ablated.
 *
 * Letters: T positions, L layers, D hidden, F a layer's neurons, Fp a
 * transcoder's features, k its active features per row, V vocab. */
#include "ffn/trace.h"
#include "ffn/tap.h"
#include "base/common.h"
#include "nn/tap_internal.h"
#include "analysis/logits.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void ffn_fact_dist_options_default(ffn_fact_dist_options *o) {
    if (o) *o = (ffn_fact_dist_options){.threshold = 0, .max_set = 0};
}

void ffn_fact_dist_result_free(ffn_fact_dist_result *r) {
    if (!r) return;
    free(r->units);
    free(r->attribution);
    memset(r, 0, sizeof *r);
}

/* ---- checks --------------------------------------------------------------------- */

/* Layer l's FFN as ablation units: its width, or an error naming why not. */
static ffn_status layer_width(const ffn_model *m, int64_t l, int64_t *F) {
    const ffn_model_config *c = ffn_model_get_config(m);
    if (l < 0 || l >= c->num_hidden_layers)
        return ffn_error(FFN_ERR_INVALID_ARG, "ablation: layer %lld out of range (the model has %lld layers: 0..%lld)",
                         (long long)l, (long long)c->num_hidden_layers, (long long)c->num_hidden_layers - 1);
    if (c->mlp_type == FFN_MODEL_MLP_NONE)
        return ffn_error(FFN_ERR_INVALID_ARG, "ablation: layer %lld has no FFN (mlp_type none)", (long long)l);
    if (ffn_model_config_layer_is_moe(c, l))
        return ffn_error(FFN_ERR_UNSUPPORTED, "ablation: layer %lld is a MoE layer (only dense and gated FFNs)",
                         (long long)l);
    *F = c->intermediate_size;
    return FFN_OK;
}

static ffn_status check_tc(const ffn_model *m, const ffn_transcoder *tc, int64_t layer) {
    const ffn_tc_config *tcc = ffn_tc_get_config(tc);
    const ffn_model_config *c = ffn_model_get_config(m);
    if (tcc->layer < 0 || tcc->layer >= c->num_hidden_layers)
        return ffn_error(FFN_ERR_INVALID_ARG, "ablation: the %s reads layer %lld, but the model has %lld layers (0..%lld)",
                         ffn_tc_kind_name(tcc->kind), (long long)tcc->layer,
                         (long long)c->num_hidden_layers, (long long)c->num_hidden_layers - 1);
    if (layer >= 0 && layer != tcc->layer)
        return ffn_error(FFN_ERR_INVALID_ARG, "ablation: the %s is of layer %lld, not of layer %lld",
                         ffn_tc_kind_name(tcc->kind), (long long)tcc->layer, (long long)layer);
    if (tcc->d_model != c->hidden_size)
        return ffn_error(FFN_ERR_INVALID_ARG, "ablation: the %s's width %lld is not the model's hidden_size %lld "
                         "(a transcoder of another model?)", ffn_tc_kind_name(tcc->kind),
                         (long long)tcc->d_model, (long long)c->hidden_size);
    int64_t F;
    return layer_width(m, tcc->layer, &F);
}

static ffn_status check_tokens(const ffn_model *m, const int32_t *tokens, int64_t T, int32_t target) {
    const ffn_model_config *c = ffn_model_get_config(m);
    int64_t max_n, max_seq;
    ffn_model_rows(m, &max_n, &max_seq);
    if (T < 1 || T > max_seq)
        return ffn_error(FFN_ERR_INVALID_ARG, "ablation: %lld tokens (expected 1 .. %lld)", (long long)T,
                         (long long)max_seq);
    for (int64_t t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= c->vocab_size)
            return ffn_error(FFN_ERR_INVALID_ARG, "ablation: token %lld is id %d (expected 0 .. %lld)",
                             (long long)t, tokens[t], (long long)c->vocab_size - 1);
    if (target < -1 || target >= c->vocab_size)
        return ffn_error(FFN_ERR_INVALID_ARG, "ablation: target id %d (expected 0 .. %lld)", target,
                         (long long)c->vocab_size - 1);
    return FFN_OK;
}

static ffn_status check_units(const ffn_model *m, const ffn_transcoder *tc, const ffn_ablation_unit *u,
                              int64_t n) {
    if (n < 0 || (n > 0 && !u)) return ffn_error(FFN_ERR_INVALID_ARG, "ablation: no units");
    for (int64_t i = 0; i < n; i++) {
        int64_t W = 0;
        ffn_status st;
        if (tc) {
            const ffn_tc_config *c = ffn_tc_get_config(tc);
            if (u[i].layer != c->layer)
                return ffn_error(FFN_ERR_INVALID_ARG, "ablation: unit %lld is of layer %lld, the %s of layer %lld",
                                 (long long)i, (long long)u[i].layer, ffn_tc_kind_name(c->kind), (long long)c->layer);
            W = c->features;
        } else if ((st = layer_width(m, u[i].layer, &W))) return st;
        if (u[i].index < 0 || u[i].index >= W)
            return ffn_error(FFN_ERR_INVALID_ARG, "ablation: unit %lld of layer %lld out of range (0..%lld)",
                             (long long)u[i].index, (long long)u[i].layer, (long long)W - 1);
    }
    return FFN_OK;
}

/* ---- ablating ----------------------------------------------------------------------- */

/* Patch the model (its taps cleared first) so that its next forward on
 * tokens (B = 1, T) runs with the units ablated.  Features need the clean
 * activations of those tokens: one capture forward here.  x, cap (T·D),
 * idx, val (T·k) and contrib (T·D) are the caller's buffers (features
 * only); mask (the widest layer's F) for neurons. */
typedef struct ablate_work {
    float *x, *cap, *val, *contrib, *mask;
    int32_t *idx;
    int64_t T;
} ablate_work;

static void work_free(ablate_work *w) {
    free(w->x), free(w->cap), free(w->val), free(w->contrib), free(w->mask), free(w->idx);
    memset(w, 0, sizeof *w);
}

static ffn_status work_alloc(const ffn_model *m, const ffn_transcoder *tc, int64_t T, ablate_work *w) {
    memset(w, 0, sizeof *w);
    const ffn_model_config *c = ffn_model_get_config(m);
    const int64_t D = c->hidden_size;
    w->T = T;
    w->mask = malloc((size_t)(c->intermediate_size > 0 ? c->intermediate_size : 1) * sizeof *w->mask);
    int ok = w->mask != NULL;
    if (tc) {
        const int64_t k = ffn_tc_get_config(tc)->k;
        w->x = malloc((size_t)(T * D) * sizeof *w->x);
        w->cap = malloc((size_t)(T * D) * sizeof *w->cap);
        w->contrib = malloc((size_t)(T * D) * sizeof *w->contrib);
        w->val = malloc((size_t)(T * k) * sizeof *w->val);
        w->idx = malloc((size_t)(T * k) * sizeof *w->idx);
        ok = ok && w->x && w->cap && w->contrib && w->val && w->idx;
    }
    if (!ok) {
        work_free(w);
        return ffn_error(FFN_ERR_NOMEM, "ablation: out of memory");
    }
    return FFN_OK;
}

static int cmp_unit(const void *a, const void *b) {
    const ffn_ablation_unit *x = a, *y = b;
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* The feature codes of tokens (T) at tc's layer, into w->idx / w->val. */
static ffn_status feature_codes(const ffn_ctx *ctx, ffn_model *m, ffn_transcoder *tc, const int32_t *tokens,
                                int64_t T, ablate_work *w) {
    const ffn_tc_config *c = ffn_tc_get_config(tc);
    ffn_status st = ffn_tc_capture(m, c->kind, c->layer, tokens, 1, T, w->x, w->cap, NULL);
    if (!st) st = ffn_tc_forward(ctx, tc, c->kind == FFN_TC_KIND_SAE ? w->cap : w->x, T, NULL, w->idx, w->val);
    return st;
}

static ffn_status patch_units(const ffn_ctx *ctx, ffn_model *m, ffn_transcoder *tc, const ffn_ablation_unit *u,
                              int64_t n, const int32_t *tokens, int64_t T, int have_codes, ablate_work *w) {
    ffn_model_taps_clear(m);
    if (n == 0) return FFN_OK;
    const ffn_model_config *c = ffn_model_get_config(m);
    const int64_t D = c->hidden_size;
    char name[64];
    ffn_status st = FFN_OK;
    if (!tc) {
        /* one SCALE patch of a 0/1 mask per layer that has units */
        ffn_ablation_unit *s = malloc((size_t)n * sizeof *s);
        if (!s) return ffn_error(FFN_ERR_NOMEM, "ablation: out of memory");
        memcpy(s, u, (size_t)n * sizeof *s);
        qsort(s, (size_t)n, sizeof *s, cmp_unit);
        const int64_t F = c->intermediate_size;
        for (int64_t i = 0; i < n && !st;) {
            const int64_t l = s[i].layer;
            for (int64_t j = 0; j < F; j++) w->mask[j] = 1.0f;
            for (; i < n && s[i].layer == l; i++) w->mask[s[i].index] = 0.0f;
            ffn_tap_name(name, sizeof name, l, FFN_TAP_M);
            st = ffn_model_tap_patch_vector(m, name, -1, FFN_TAP_OP_SCALE, w->mask, F);
        }
        free(s);
        return st;
    }
    const ffn_tc_config *tcc = ffn_tc_get_config(tc);
    const int64_t k = tcc->k;
    if (!have_codes && (st = feature_codes(ctx, m, tc, tokens, T, w))) return st;
    const float *Wd = ffn_tc_get_weights(tc).W_dec;
    unsigned char *in = calloc((size_t)tcc->features, 1);
    if (!in) return ffn_error(FFN_ERR_NOMEM, "ablation: out of memory");
    for (int64_t i = 0; i < n; i++) in[u[i].index] = 1;
    ffn_tap_name(name, sizeof name, tcc->layer, FFN_TAP_MLP_OUT);
    for (int64_t t = 0; t < T && !st; t++) {
        float *cv = w->contrib + t * D;
        memset(cv, 0, (size_t)D * sizeof *cv);
        int any = 0;
        for (int64_t s = 0; s < k; s++) {
            const int32_t j = w->idx[t * k + s];
            const float a = w->val[t * k + s];
            if (j < 0 || !in[j] || a == 0.0f) continue;
            any = 1;
            for (int64_t d = 0; d < D; d++) cv[d] -= a * Wd[(int64_t)j * D + d];
        }
        if (any) st = ffn_model_tap_patch_vector(m, name, t, FFN_TAP_OP_ADD, cv, D);
    }
    free(in);
    return st;
}

ffn_status ffn_ablation_predict(const ffn_ctx *ctx, ffn_model *m, ffn_transcoder *tc,
                                const ffn_ablation_unit *units, int64_t n, const int32_t *tokens,
                                int64_t T, int32_t target, double *p, int32_t *top) {
    if (!m || !tokens) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_ablation_predict: NULL argument");
    ffn_status st = check_tokens(m, tokens, T, target);
    if (!st && tc) st = check_tc(m, tc, -1);
    if (!st) st = check_units(m, tc, units, n);
    if (st) return st;
    const int64_t V = ffn_model_get_config(m)->vocab_size;
    float *logits = malloc((size_t)(T * V) * sizeof *logits);
    ablate_work w;
    if (!logits) return ffn_error(FFN_ERR_NOMEM, "ablation: out of memory");
    if ((st = work_alloc(m, tc, T, &w))) {
        free(logits);
        return st;
    }
    ffn_taps *stash = ffn_model_taps_stash(m);
    st = patch_units(ctx, m, tc, units, n, tokens, T, 0, &w);
    if (!st) st = ffn_logits_last_prob(m, tokens, T, target, logits, p, top);
    ffn_model_taps_restore(m, stash);
    work_free(&w);
    free(logits);
    return st;
}

ffn_status ffn_ablation_loss(const ffn_ctx *ctx, ffn_model *m, ffn_transcoder *tc,
                             const ffn_ablation_unit *units, int64_t n, const int32_t *tokens,
                             int64_t n_tok, int64_t windows, double *loss) {
    if (!m || !tokens || !loss || windows < 1)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_ablation_loss: bad arguments");
    ffn_status st = tc ? check_tc(m, tc, -1) : FFN_OK;
    if (!st) st = check_units(m, tc, units, n);
    if (st) return st;
    int64_t max_n, max_seq;
    ffn_model_rows(m, &max_n, &max_seq);
    const int64_t T = n_tok - 1 < max_seq ? n_tok - 1 : max_seq;
    if (T < 1) return ffn_error(FFN_ERR_INVALID_ARG, "ablation: the held-out text has fewer than 2 tokens");
    ablate_work w;
    if ((st = work_alloc(m, tc, T, &w))) return st;
    ffn_taps *stash = ffn_model_taps_stash(m);
    double sum = 0;
    int64_t count = 0;
    for (int64_t k = 0; k < windows && !st; k++) {
        const int64_t at = n_tok - 1 - (k + 1) * T;
        if (at < 0) break;
        ffn_model_loss l;
        st = patch_units(ctx, m, tc, units, n, tokens + at, T, 0, &w);
        if (!st) st = ffn_model_eval_loss(m, tokens + at, tokens + at + 1, 1, T, &l);
        if (st) break;
        sum += l.ce * (double)l.n_targets;
        count += l.n_targets;
    }
    ffn_model_taps_restore(m, stash);
    work_free(&w);
    if (st) return st;
    *loss = count ? sum / (double)count : NAN;
    return FFN_OK;
}

/* ---- attribution -------------------------------------------------------------------- */

typedef struct grad_last {
    int64_t last; /* the row whose target counts */
    int32_t target;
} grad_last;

/* loss = −log p(target) at row `last`; d loss / d logits = softmax − onehot
 * there, 0 elsewhere. */
static int grad_fn(void *user, int64_t r0, int64_t rows, int64_t V, float *logits, double *loss) {
    const grad_last *g = user;
    float *z = ffn_logits_grad_row(logits, r0, rows, V, g->last);
    if (z) *loss += ffn_logits_ce_grad(z, V, g->target, 1.0);
    return 0;
}

typedef struct scored {
    ffn_ablation_unit u;
    double a;
} scored;

static int cmp_scored(const void *x, const void *y) {
    const scored *a = x, *b = y;
    if (a->a != b->a) return a->a > b->a ? -1 : 1;
    return cmp_unit(&a->u, &b->u);
}

/* A_u of every unit of the layers [l0, l1] (neurons) or of tc's features:
 * out (n_units) in order layer-major; gl (L·T·D) the gradients of log p. */
static ffn_status attribute(const ffn_ctx *ctx, ffn_model *m, ffn_transcoder *tc, const int32_t *tokens,
                            int64_t T, int32_t target, int64_t l0, int64_t l1, ablate_work *w,
                            scored *out) {
    const ffn_model_config *c = ffn_model_get_config(m);
    const int64_t D = c->hidden_size, F = c->intermediate_size, nl = l1 - l0 + 1;
    char name[64];
    float *g = malloc((size_t)(nl * T * D) * sizeof *g);
    float *act = tc ? NULL : malloc((size_t)(nl * T * F) * sizeof *act);
    float *logits = malloc((size_t)(T * c->vocab_size) * sizeof *logits);
    ffn_status st = g && logits && (tc || act) ? FFN_OK : ffn_error(FFN_ERR_NOMEM, "ablation: out of memory");
    /* the gradients of −log p at every mlp_out in scope */
    ffn_model_taps_clear(m);
    for (int64_t l = l0; l <= l1 && !st; l++) {
        ffn_tap_name(name, sizeof name, l, FFN_TAP_MLP_OUT);
        st = ffn_model_tap_select_grad(m, name);
    }
    grad_last gl = {.last = T - 1, .target = target};
    double loss = 0;
    if (!st) st = ffn_model_forward_backward_taps(m, tokens, 1, T, grad_fn, &gl, &loss);
    for (int64_t l = l0; l <= l1 && !st; l++) {
        ffn_tap_view v;
        ffn_tap_name(name, sizeof name, l, FFN_TAP_MLP_OUT);
        if (!(st = ffn_model_tap_read_grad(m, name, &v)))
            for (int64_t i = 0; i < T * D; i++) g[(l - l0) * T * D + i] = -((const float *)v.data)[i];
    }
    ffn_model_taps_clear(m);
    if (!st) ffn_model_zero_grads(m);
    if (!st && tc) {
        const ffn_tc_config *tcc = ffn_tc_get_config(tc);
        const int64_t k = tcc->k, Fp = tcc->features;
        const float *Wd = ffn_tc_get_weights(tc).W_dec;
        for (int64_t j = 0; j < Fp; j++) out[j] = (scored){.u = {tcc->layer, j}, .a = 0};
        if (!(st = feature_codes(ctx, m, tc, tokens, T, w)))
            for (int64_t t = 0; t < T; t++)
                for (int64_t s = 0; s < k; s++) {
                    const int32_t j = w->idx[t * k + s];
                    const float a = w->val[t * k + s];
                    if (j < 0 || a == 0.0f) continue;
                    double dot = 0;
                    for (int64_t d = 0; d < D; d++) dot += (double)Wd[(int64_t)j * D + d] * g[t * D + d];
                    out[j].a += a * dot;
                }
    } else if (!st) {
        /* m at every layer in scope (one forward) */
        for (int64_t l = l0; l <= l1 && !st; l++) {
            ffn_tap_name(name, sizeof name, l, FFN_TAP_M);
            st = ffn_model_tap_select(m, name);
        }
        if (!st) st = ffn_model_logits(m, logits, tokens, 1, T);
        for (int64_t l = l0; l <= l1 && !st; l++) {
            ffn_tap_view v;
            ffn_tap_name(name, sizeof name, l, FFN_TAP_M);
            if (!(st = ffn_model_tap_read(m, name, &v)))
                memcpy(act + (l - l0) * T * F, v.data, (size_t)(T * F) * sizeof *act);
        }
        ffn_model_taps_clear(m);
        for (int64_t l = l0; l <= l1 && !st; l++) {
            char wn[96];
            snprintf(wn, sizeof wn, "model.layers.%lld.mlp.down_proj.weight", (long long)l);
            const ffn_model_tensor *tw = ffn_model_find_tensor(m, wn);
            if (!tw) {
                st = ffn_error(FFN_ERR_MISSING, "ablation: no tensor %s", wn);
                break;
            }
            const float *Wn = ffn_model_params(m, NULL) + tw->offset; /* (D, F) */
            scored *o = out + (l - l0) * F;
            for (int64_t i = 0; i < F; i++) o[i] = (scored){.u = {l, i}, .a = 0};
            for (int64_t t = 0; t < T; t++) {
                const float *gt = g + ((l - l0) * T + t) * D;
                const float *mt = act + ((l - l0) * T + t) * F;
                for (int64_t d = 0; d < D; d++) {
                    const double gd = gt[d];
                    const float *row = Wn + d * F;
                    for (int64_t i = 0; i < F; i++) o[i].a += (double)mt[i] * row[i] * gd;
                }
            }
        }
    }
    free(g), free(act), free(logits);
    return st;
}

/* ---- the smallest set ---------------------------------------------------------------- */

static int is_present(const ffn_fact_dist_options *o, double p, int32_t top, int32_t target) {
    return o->threshold > 0 ? p >= o->threshold : top == target;
}

ffn_status ffn_fact_min_ablation(const ffn_ctx *ctx, ffn_model *m, ffn_transcoder *tc,
                                 const int32_t *tokens, int64_t T, int32_t target, int64_t layer,
                                 const ffn_fact_dist_options *opts, ffn_fact_dist_result *out) {
    if (!m || !tokens || !out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_fact_min_ablation: NULL argument");
    memset(out, 0, sizeof *out);
    out->size = -1;
    ffn_fact_dist_options o;
    ffn_fact_dist_options_default(&o);
    if (opts) o = *opts;
    if (!(o.threshold >= 0 && o.threshold < 1))
        return ffn_error(FFN_ERR_INVALID_ARG, "ablation: threshold %g (expected 0, or a probability in (0, 1))",
                         o.threshold);
    if (o.max_set < 0) return ffn_error(FFN_ERR_INVALID_ARG, "ablation: max_set %lld < 0", (long long)o.max_set);
    if (target < 0) return ffn_error(FFN_ERR_INVALID_ARG, "ablation: no target");
    ffn_status st = check_tokens(m, tokens, T, target);
    if (st) return st;
    if (!ffn_model_grads(m, NULL))
        return ffn_error(FFN_ERR_INVALID_ARG, "ablation: the attribution needs a training model (gradients)");
    const ffn_model_config *c = ffn_model_get_config(m);
    int64_t l0 = layer, l1 = layer, F = 0;
    if (tc) {
        if ((st = check_tc(m, tc, layer))) return st;
        l0 = l1 = ffn_tc_get_config(tc)->layer;
    } else if (layer < 0) {
        l0 = 0;
        l1 = c->num_hidden_layers - 1;
    }
    if (!tc)
        for (int64_t l = l0; l <= l1; l++)
            if ((st = layer_width(m, l, &F))) return st;
    const int64_t n_units = tc ? ffn_tc_get_config(tc)->features : (l1 - l0 + 1) * c->intermediate_size;
    out->n_units = n_units;
    const int64_t V = c->vocab_size;
    float *logits = malloc((size_t)(T * V) * sizeof *logits);
    scored *sc = malloc((size_t)n_units * sizeof *sc);
    ffn_ablation_unit *set = malloc((size_t)n_units * sizeof *set);
    unsigned char *keep = malloc((size_t)n_units);
    ablate_work w;
    memset(&w, 0, sizeof w);
    if (!logits || !sc || !set || !keep) st = ffn_error(FFN_ERR_NOMEM, "ablation: out of memory");
    if (!st) st = work_alloc(m, tc, T, &w);
    ffn_taps *stash = ffn_model_taps_stash(m);
    if (!st) st = ffn_model_reserve(m, 1, T);
    if (!st) st = ffn_logits_last_prob(m, tokens, T, target, logits, &out->p_clean, &out->clean_top);
    out->forwards = 1;
    out->p_after = out->p_clean;
    out->top_after = out->clean_top;
    out->present = !st && is_present(&o, out->p_clean, out->clean_top, target);
    if (!st && out->present) {
        st = attribute(ctx, m, tc, tokens, T, target, l0, l1, &w, sc);
        out->forwards += 2; /* the backward's forward, and the capture of m or of the codes */
    }
    int64_t n_cand = 0, n = 0;
    if (!st && out->present) {
        qsort(sc, (size_t)n_units, sizeof *sc, cmp_scored);
        while (n_cand < n_units && sc[n_cand].a > 0) n_cand++;
        out->n_candidates = n_cand;
        const int64_t cap = o.max_set > 0 && o.max_set < n_cand ? o.max_set : n_cand;
        /* attribute() left the feature codes of these tokens in w: kept, as
         * ablating at the transcoder's own layer does not change its input */
        double p = out->p_clean;
        int32_t top = out->clean_top;
        int gone = 0;
        for (n = 0; n < cap && !st && !gone;) {
            set[n] = sc[n].u;
            n++;
            st = patch_units(ctx, m, tc, set, n, tokens, T, 1, &w);
            if (!st) st = ffn_logits_last_prob(m, tokens, T, target, logits, &p, &top);
            out->forwards++;
            gone = !st && !is_present(&o, p, top, target);
        }
        if (!st && gone) {
            out->n_greedy = n;
            /* prune, the weakest first */
            memset(keep, 1, (size_t)n);
            for (int64_t i = n - 1; i >= 0 && !st; i--) {
                int64_t m2 = 0;
                for (int64_t j = 0; j < n; j++)
                    if (keep[j] && j != i) set[m2++] = sc[j].u;
                st = patch_units(ctx, m, tc, set, m2, tokens, T, 1, &w);
                if (!st) st = ffn_logits_last_prob(m, tokens, T, target, logits, &p, &top);
                out->forwards++;
                if (!st && !is_present(&o, p, top, target)) keep[i] = 0;
            }
            int64_t size = 0;
            for (int64_t j = 0; j < n; j++)
                if (keep[j]) set[size++] = sc[j].u;
            out->units = malloc((size_t)(size ? size : 1) * sizeof *out->units);
            out->attribution = malloc((size_t)(size ? size : 1) * sizeof *out->attribution);
            if (!st && (!out->units || !out->attribution)) st = ffn_error(FFN_ERR_NOMEM, "ablation: out of memory");
            for (int64_t j = 0, q = 0; !st && j < n; j++)
                if (keep[j]) out->units[q] = sc[j].u, out->attribution[q++] = sc[j].a;
            /* verify */
            if (!st) st = patch_units(ctx, m, tc, out->units, size, tokens, T, 1, &w);
            if (!st) st = ffn_logits_last_prob(m, tokens, T, target, logits, &out->p_after, &out->top_after);
            out->forwards++;
            if (!st && is_present(&o, out->p_after, out->top_after, target))
                st = ffn_error(FFN_ERR_INTERNAL, "ablation: the pruned set of %lld units does not remove the fact",
                               (long long)size);
            out->size = size;
        }
    }
    ffn_model_taps_restore(m, stash);
    work_free(&w);
    free(logits), free(sc), free(set), free(keep);
    if (st) ffn_fact_dist_result_free(out), out->size = -1;
    return st;
}
