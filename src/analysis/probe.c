/* probe.c -- do gates differ by token?  Linear probes that predict a
 * token's word class from a layer's gate activations (act(gate·x); dense
 * layers act(up·x)) and, for comparison, from the FFN's input x; the
 * class-frequency baseline; and per class the most selective neurons
 * (include/ffn/inspect.h).  The probe is multinomial logistic regression on
 * standardised features, trained by mini-batch SGD in double precision with
 * a fixed shuffle: the same numbers on every run.
 *
 * The features come from the model's own forward through taps: windows of
 * the stream run as one batch per forward (B windows of up to the context,
 * padded at the end, which a causal model never reads back), with mlp_in
 * and gate_pre (dense: m = act(up)) tapped.  A MoE layer's gates of every
 * expert come from the experts' own layer objects on the tapped mlp_in.
 *
 * Letters: N labelled tokens, D hidden, Fw a layer's gate features (F, or
 * E·Fe for MoE layers: every expert's gate, computed densely), C classes,
 * L layers, B windows per forward, T their length. */
#include "ffn/data.h"
#include "ffn/inspect.h"
#include "ffn/model.h"
#include "base/common.h"
#include "base/rng.h"
#include "nn/tap_internal.h"
#include "analysis/topk.h"

#include <math.h>
#include <string.h>

#define C_CLASSES FFN_WORD_N_CLASSES
/* Tokens per forward of the probe (B = this / context windows, at least 1). */
#define PROBE_BATCH_TOKENS 2048

const char *ffn_probe_split_name(ffn_probe_split s) {
    static const char *const names[] = {[FFN_PROBE_SPLIT_WORDS] = "words",
        [FFN_PROBE_SPLIT_SENTENCES] = "sentences", [FFN_PROBE_SPLIT_TOKENS] = "tokens"};
    return FFN_ENUM_NAME(names, s, "?");
}

void ffn_probe_options_default(ffn_probe_options *o) {
    static const ffn_probe_options defaults = {
        .lang = FFN_LANG_EN, .sentences = 500, .corpus_seed = 20260101, /* the corpus */
        .split = FFN_PROBE_SPLIT_WORDS, .heldout_fraction = 0.3,          /* the split */
        .epochs = 20, .batch = 64, .lr = 0.1, .l2 = 1e-3, .seed = 7,      /* the SGD */
        .top_selective = 5};
    if (o) *o = defaults;
}

void ffn_probe_result_free(ffn_probe_result *r) {
    if (!r) return;
    for (int64_t i = 0; r->layers && i < r->n_layers; i++) {
        free(r->layers[i].selective);
        free(r->layers[i].selective_d);
    }
    free(r->layers);
    free(r);
}


/* ---- the probe: multinomial logistic regression ------------------------------------ */

/* Fit on the rows with split 0, report accuracy on split 0 and split 1.
 * X (N, d) is read-only; it is standardised on the fly with the training
 * rows' mean and sd (a constant feature contributes nothing). */
static ffn_status probe_fit(const float *X, int64_t N, int64_t d, const int8_t *y,
                            const int8_t *split, const ffn_probe_options *o, double *train_acc,
                            double *test_acc) {
    const int64_t C = C_CLASSES, d1 = d + 1;
    double *mean = calloc((size_t)d, sizeof *mean), *inv = calloc((size_t)d, sizeof *inv);
    double *W = calloc((size_t)(C * d1), sizeof *W), *G = calloc((size_t)(C * d1), sizeof *G);
    double *z = malloc((size_t)d * sizeof *z);
    int64_t *idx = malloc((size_t)(N > 0 ? N : 1) * sizeof *idx);
    ffn_status st = FFN_OK;
    if (!mean || !inv || !W || !G || !z || !idx) {
        st = ffn_error(FFN_ERR_NOMEM, "probe: out of memory");
        goto done;
    }
    int64_t n_train = 0;
    for (int64_t r = 0; r < N; r++)
        if (split[r] == 0) idx[n_train++] = r;
    for (int64_t k = 0; k < n_train; k++)
        for (int64_t j = 0; j < d; j++) mean[j] += X[idx[k] * d + j];
    for (int64_t j = 0; j < d; j++) mean[j] /= n_train > 0 ? (double)n_train : 1.0;
    for (int64_t k = 0; k < n_train; k++)
        for (int64_t j = 0; j < d; j++) {
            double a = X[idx[k] * d + j] - mean[j];
            inv[j] += a * a;
        }
    for (int64_t j = 0; j < d; j++) {
        double sd = n_train > 1 ? sqrt(inv[j] / (double)(n_train - 1)) : 0.0;
        inv[j] = sd > 1e-8 ? 1.0 / sd : 0.0;
    }
    uint64_t rng = o->seed;
    double p[C_CLASSES];
    for (int64_t ep = 0; ep < o->epochs && n_train > 0; ep++) {
        for (int64_t k = n_train - 1; k > 0; k--) { /* Fisher-Yates */
            int64_t j = (int64_t)(ffn_splitmix64(&rng) % (uint64_t)(k + 1));
            int64_t t = idx[k];
            idx[k] = idx[j];
            idx[j] = t;
        }
        for (int64_t b0 = 0; b0 < n_train; b0 += o->batch) {
            int64_t bn = n_train - b0 < o->batch ? n_train - b0 : o->batch;
            memset(G, 0, (size_t)(C * d1) * sizeof *G);
            for (int64_t k = b0; k < b0 + bn; k++) {
                const float *x = X + idx[k] * d;
                for (int64_t j = 0; j < d; j++) z[j] = (x[j] - mean[j]) * inv[j];
                double mx = -INFINITY, sum = 0.0;
                for (int64_t c = 0; c < C; c++) {
                    const double *w = W + c * d1;
                    double a = w[d];
                    for (int64_t j = 0; j < d; j++) a += w[j] * z[j];
                    p[c] = a;
                    if (a > mx) mx = a;
                }
                for (int64_t c = 0; c < C; c++) sum += (p[c] = exp(p[c] - mx));
                for (int64_t c = 0; c < C; c++) {
                    double g = p[c] / sum - (c == y[idx[k]]);
                    double *gr = G + c * d1;
                    for (int64_t j = 0; j < d; j++) gr[j] += g * z[j];
                    gr[d] += g;
                }
            }
            for (int64_t i = 0; i < C * d1; i++)
                W[i] -= o->lr * (G[i] / (double)bn + ((i % d1) != d ? o->l2 * W[i] : 0.0));
        }
    }
    int64_t right[2] = {0, 0}, total[2] = {0, 0};
    for (int64_t r = 0; r < N; r++) {
        const float *x = X + r * d;
        for (int64_t j = 0; j < d; j++) z[j] = (x[j] - mean[j]) * inv[j];
        int64_t best = 0;
        double bv = -INFINITY;
        for (int64_t c = 0; c < C; c++) {
            const double *w = W + c * d1;
            double a = w[d];
            for (int64_t j = 0; j < d; j++) a += w[j] * z[j];
            if (a > bv) bv = a, best = c;
        }
        int s = split[r] != 0;
        total[s]++;
        right[s] += best == y[r];
    }
    *train_acc = total[0] ? (double)right[0] / (double)total[0] : 0.0;
    *test_acc = total[1] ? (double)right[1] / (double)total[1] : 0.0;
done:
    free(mean), free(inv), free(W), free(G), free(z), free(idx);
    return st;
}

/* Per class the k features with the largest (mean_in − mean_out) / pooled
 * sd over the training rows.  sel/sd_out (C, k). */
static ffn_status selectivity(const float *X, int64_t N, int64_t d, const int8_t *y,
                              const int8_t *split, int64_t k, int64_t *sel, float *d_out) {
    const int64_t C = C_CLASSES;
    double *s1 = calloc((size_t)((C + 1) * d), sizeof *s1);
    double *s2 = calloc((size_t)((C + 1) * d), sizeof *s2);
    if (!s1 || !s2) {
        free(s1), free(s2);
        return ffn_error(FFN_ERR_NOMEM, "probe: out of memory");
    }
    int64_t cnt[C_CLASSES + 1] = {0};
    /* row C holds the totals */
    for (int64_t r = 0; r < N; r++) {
        if (split[r] != 0) continue;
        int c = y[r];
        cnt[c]++, cnt[C]++;
        for (int64_t j = 0; j < d; j++) {
            double a = X[r * d + j];
            s1[c * d + j] += a, s2[c * d + j] += a * a;
            s1[C * d + j] += a, s2[C * d + j] += a * a;
        }
    }
    for (int64_t c = 0; c < C; c++) {
        int64_t *ids = sel + c * k;
        float *vals = d_out + c * k;
        for (int64_t i = 0; i < k; i++) ids[i] = -1, vals[i] = 0.0f;
        int64_t n_in = cnt[c], n_out = cnt[C] - cnt[c];
        if (n_in < 2 || n_out < 2) continue;
        int64_t kept = 0;
        for (int64_t j = 0; j < d; j++) {
            double si = s1[c * d + j], qi = s2[c * d + j];
            double so = s1[C * d + j] - si, qo = s2[C * d + j] - qi;
            double mi = si / (double)n_in, mo = so / (double)n_out;
            double ss = (qi - (double)n_in * mi * mi) + (qo - (double)n_out * mo * mo);
            double var = ss / (double)(n_in + n_out - 2);
            float dv = var > 1e-20 ? (float)((mi - mo) / sqrt(var)) : 0.0f;
            ffn_topk_push_i64(vals, ids, &kept, k, dv, j);
        }
    }
    free(s1), free(s2);
    return FFN_OK;
}

/* ---- features -------------------------------------------------------------------------- */

/* The gate activations of every expert of MoE layer l for rows x (n, D):
 * (n, Fw). */
static ffn_status gate_features(ffn_ctx *ctx, ffn_model *m, int64_t l, const float *x, int64_t n,
                                float *out, int64_t Fw) {
    const ffn_model_config *c = ffn_model_get_config(m);
    const int64_t E = c->num_experts, Fe = Fw / E;
    float *g = malloc((size_t)(n * Fe) * sizeof *g);
    if (!g) return ffn_error(FFN_ERR_NOMEM, "probe: out of memory");
    ffn_status st = FFN_OK;
    for (int64_t e = 0; e < E && !st; e++) {
        if ((st = ffn_inspect_neurons(ctx, m, l, e, x, n, NULL, g, NULL, NULL))) break;
        for (int64_t r = 0; r < n; r++)
            memcpy(out + r * Fw + e * Fe, g + r * Fe, (size_t)Fe * sizeof *g);
    }
    free(g);
    return st;
}

ffn_status ffn_inspect_probe(ffn_ctx *ctx, ffn_model *m, const int32_t *tokens,
                             const int8_t *labels, const int8_t *split,
                             const uint8_t *boundaries, int64_t n,
                             const ffn_probe_options *opts, ffn_probe_result **out) {
    static const char *fn = "ffn_inspect_probe";
    if (!out) return ffn_error(FFN_ERR_INVALID_ARG, "%s: out is NULL", fn);
    *out = NULL;
    if (!m || !tokens || !labels || !split || n < 1)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: model, tokens, labels and split must not be "
                         "NULL and n >= 1", fn);
    ffn_probe_options o;
    ffn_probe_options_default(&o);
    if (opts) o = *opts;
    if (o.epochs < 0 || o.batch < 1 || !(o.lr > 0.0) || !(o.l2 >= 0.0) || o.top_selective < 1)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: expected epochs >= 0, batch >= 1, lr > 0, "
                         "l2 >= 0, top_selective >= 1", fn);
    const ffn_model_config *c = ffn_model_get_config(m);
    const int64_t L = c->num_hidden_layers, D = c->hidden_size, T = c->max_position_embeddings;
    int64_t n_lab = 0;
    for (int64_t i = 0; i < n; i++) {
        if (labels[i] >= C_CLASSES || labels[i] < -1)
            return ffn_error(FFN_ERR_INVALID_ARG, "%s: labels[%lld] = %d is outside [-1, %d)", fn,
                             (long long)i, labels[i], C_CLASSES);
        n_lab += labels[i] >= 0;
    }
    if (n_lab < 2) return ffn_error(FFN_ERR_INVALID_ARG, "%s: fewer than 2 labelled tokens", fn);
    int64_t NL = 0;
    for (int64_t l = 0; l < L; l++) NL += ffn_inspect_layer_width(m, l) > 0;
    if (NL == 0) return ffn_error(FFN_ERR_INVALID_ARG, "%s: the model has no FFN layer", fn);
    ffn_status st = FFN_OK;
    ffn_probe_result *r = calloc(1, sizeof *r);
    float *xin = malloc((size_t)(L * n_lab * D) * sizeof *xin); /* (L, n_lab, D) */
    float **gfeat = calloc((size_t)L, sizeof *gfeat);          /* (n_lab, F) dense/gated layers */
    const float **xrows = calloc((size_t)L, sizeof *xrows);    /* tapped rows of one forward */
    const float **grows = calloc((size_t)L, sizeof *grows);
    int8_t *y = malloc((size_t)n_lab), *sp = malloc((size_t)n_lab);
    int64_t *w0 = malloc((size_t)(n + 1) * sizeof *w0);          /* window starts */
    int32_t *batch = NULL, *ignore = NULL;
    float *feat = NULL;
    ffn_taps *stash = ffn_model_taps_stash(m);
    if (r) r->layers = calloc((size_t)NL, sizeof *r->layers);
    if (!r || !r->layers || !xin || !gfeat || !xrows || !grows || !y || !sp || !w0) {
        st = ffn_error(FFN_ERR_NOMEM, "%s: out of memory (%lld labelled tokens)", fn,
                       (long long)n_lab);
        goto fail;
    }
    r->n_layers = NL;
    r->top_selective = o.top_selective;
    /* 1. the windows: at most T tokens, ending at a sentence boundary */
    int64_t nw = 0;
    for (int64_t s0 = 0; s0 < n;) {
        int64_t end = s0 + T < n ? s0 + T : n;
        if (boundaries && end < n) {
            int64_t b = end;
            while (b > s0 + 1 && !boundaries[b]) b--;
            if (b > s0 + 1) end = b;
        }
        for (int64_t i = s0; i < end; i++) {
            if (tokens[i] < 0 || tokens[i] >= c->vocab_size) {
                st = ffn_error(FFN_ERR_INVALID_ARG, "%s: tokens[%lld] = %d is outside the "
                               "vocabulary", fn, (long long)i, tokens[i]);
                goto fail;
            }
        }
        w0[nw++] = s0;
        s0 = end;
    }
    w0[nw] = n;
    /* 2. the FFN inputs and gates of every labelled token, B windows per forward */
    const int64_t B = PROBE_BATCH_TOKENS / T > 0 ? PROBE_BATCH_TOKENS / T : 1;
    batch = malloc((size_t)(B * T) * sizeof *batch);
    ignore = malloc((size_t)(B * T) * sizeof *ignore);
    if (!batch || !ignore) {
        st = ffn_error(FFN_ERR_NOMEM, "%s: out of memory", fn);
        goto fail;
    }
    for (int64_t i = 0; i < B * T; i++) ignore[i] = FFN_IGNORE_INDEX;
    for (int64_t l = 0; l < L; l++) {
        if (ffn_inspect_layer_width(m, l) == 0) continue;
        char name[64];
        ffn_tap_name(name, sizeof name, l, FFN_TAP_MLP_IN);
        if ((st = ffn_model_tap_select(m, name))) goto fail;
        if (ffn_model_config_layer_is_moe(c, l)) continue;
        const int gated = c->mlp_type == FFN_MODEL_MLP_GATED;
        ffn_tap_name(name, sizeof name, l, gated ? FFN_TAP_GATE_PRE : FFN_TAP_M);
        if ((st = ffn_model_tap_select(m, name))) goto fail;
        if (!(gfeat[l] = malloc((size_t)(n_lab * c->intermediate_size) * sizeof(float)))) {
            st = ffn_error(FFN_ERR_NOMEM, "%s: out of memory (gates of layer %lld)", fn,
                           (long long)l);
            goto fail;
        }
    }
    if ((st = ffn_model_reserve(m, B, T))) goto fail;
    int64_t k = 0;
    for (int64_t w = 0; w < nw; w += B) {
        const int64_t nb = nw - w < B ? nw - w : B;
        int64_t Tb = 0;
        for (int64_t b = 0; b < nb; b++)
            if (w0[w + b + 1] - w0[w + b] > Tb) Tb = w0[w + b + 1] - w0[w + b];
        for (int64_t b = 0; b < nb; b++) {
            const int64_t s0 = w0[w + b], len = w0[w + b + 1] - s0;
            memcpy(batch + b * Tb, tokens + s0, (size_t)len * sizeof *batch);
            for (int64_t t = len; t < Tb; t++) batch[b * Tb + t] = tokens[s0]; /* padding */
        }
        ffn_model_loss loss;
        if ((st = ffn_model_eval_loss(m, batch, ignore, nb, Tb, &loss))) goto fail;
        const int gated = c->mlp_type == FFN_MODEL_MLP_GATED;
        const int64_t F = c->intermediate_size;
        for (int64_t l = 0; l < L; l++) { /* this forward's rows of every tapped point */
            char name[64];
            ffn_tap_view v;
            xrows[l] = grows[l] = NULL;
            if (ffn_inspect_layer_width(m, l) == 0) continue;
            ffn_tap_name(name, sizeof name, l, FFN_TAP_MLP_IN);
            if ((st = ffn_model_tap_read(m, name, &v))) goto fail;
            xrows[l] = v.data;
            if (!gfeat[l]) continue;
            ffn_tap_name(name, sizeof name, l, gated ? FFN_TAP_GATE_PRE : FFN_TAP_M);
            if ((st = ffn_model_tap_read(m, name, &v))) goto fail;
            grows[l] = v.data;
        }
        for (int64_t b = 0; b < nb; b++) {
            const int64_t s0 = w0[w + b], end = w0[w + b + 1];
            for (int64_t i = s0; i < end; i++) {
                if (labels[i] < 0) continue;
                const int64_t row = b * Tb + (i - s0);
                for (int64_t l = 0; l < L; l++) {
                    if (!xrows[l]) continue;
                    memcpy(xin + (l * n_lab + k) * D, xrows[l] + row * D, (size_t)D * sizeof *xin);
                    if (!grows[l]) continue;
                    const float *g = grows[l] + row * F;
                    if (gated) ffn_taps_gate(c->hidden_act, gfeat[l] + k * F, g, F);
                    else memcpy(gfeat[l] + k * F, g, (size_t)F * sizeof(float)); /* act(up) */
                }
                y[k] = labels[i];
                sp[k] = split[i] != 0;
                k++;
            }
        }
    }
    /* 3. the baseline */
    for (int64_t i = 0; i < n_lab; i++) {
        if (sp[i]) r->class_count_test[y[i]]++, r->n_test++;
        else r->class_count_train[y[i]]++, r->n_train++;
    }
    if (r->n_train == 0 || r->n_test == 0) {
        st = ffn_error(FFN_ERR_INVALID_ARG, "%s: the split leaves %lld training and %lld "
                       "held-out tokens; both must be > 0", fn, (long long)r->n_train,
                       (long long)r->n_test);
        goto fail;
    }
    r->majority_class = 0;
    for (int cc = 1; cc < C_CLASSES; cc++)
        if (r->class_count_train[cc] > r->class_count_train[r->majority_class])
            r->majority_class = cc;
    r->baseline = (double)r->class_count_test[r->majority_class] / (double)r->n_test;
    /* 4. per layer: gate features, probes, selectivity */
    for (int64_t l = 0, li = 0; l < L; l++) {
        int64_t Fw = ffn_inspect_layer_width(m, l);
        if (Fw == 0) continue;
        ffn_probe_layer *pl = &r->layers[li++];
        pl->layer = l;
        pl->n_features_gate = Fw;
        pl->selective = malloc((size_t)(C_CLASSES * o.top_selective) * sizeof *pl->selective);
        pl->selective_d = malloc((size_t)(C_CLASSES * o.top_selective) * sizeof *pl->selective_d);
        free(feat);
        feat = gfeat[l] ? NULL : malloc((size_t)(n_lab * Fw) * sizeof *feat);
        if (!pl->selective || !pl->selective_d || (!gfeat[l] && !feat)) {
            st = ffn_error(FFN_ERR_NOMEM, "%s: out of memory (features of layer %lld)", fn,
                           (long long)l);
            goto fail;
        }
        const float *xl = xin + l * n_lab * D;
        if (!gfeat[l] && (st = gate_features(ctx, m, l, xl, n_lab, feat, Fw))) goto fail;
        const float *gf = gfeat[l] ? gfeat[l] : feat;
        if ((st = probe_fit(gf, n_lab, Fw, y, sp, &o, &pl->train_acc_gate, &pl->acc_gate)) ||
            (st = probe_fit(xl, n_lab, D, y, sp, &o, &pl->train_acc_input, &pl->acc_input)) ||
            (st = selectivity(gf, n_lab, Fw, y, sp, o.top_selective, pl->selective,
                              pl->selective_d)))
            goto fail;
    }
    *out = r;
    r = NULL;
fail:
    ffn_model_taps_restore(m, stash);
    ffn_probe_result_free(r);
    for (int64_t l = 0; gfeat && l < L; l++) free(gfeat[l]);
    free(xin), free(gfeat), free(y), free(sp), free(feat), free(w0), free(batch), free(ignore);
    free(xrows), free(grows);
    return st;
}

/* ---- the built-in corpus ---------------------------------------------------------------- */

static uint64_t fnv1a(const char *s, int64_t n, uint64_t seed) {
    uint64_t h = 1469598103934665603ull ^ (seed * 0x9e3779b97f4a7c15ull);
    for (int64_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

typedef struct word_key {
    int64_t word;   /* index into corpus->words */
    uint64_t hash;  /* of the word's bytes */
    int cls;
} word_key;

/* By class, then bytes: equal types become adjacent (glibc qsort_r). */
static int cmp_type(const void *pa, const void *pb, void *ctx) {
    const word_key *a = pa, *b = pb;
    const ffn_corpus *sort_corpus = ctx;
    if (a->cls != b->cls) return a->cls < b->cls ? -1 : 1;
    const ffn_word *wa = &sort_corpus->words[a->word], *wb = &sort_corpus->words[b->word];
    int64_t n = wa->length < wb->length ? wa->length : wb->length;
    int r = memcmp(sort_corpus->text + wa->offset, sort_corpus->text + wb->offset, (size_t)n);
    if (r) return r;
    return wa->length < wb->length ? -1 : wa->length > wb->length ? 1 : 0;
}

/* A type: its first entry in the sorted keys (for token ids, the id), how
 * many entries, its hash and class; held 1 when it is held out. */
typedef struct word_type {
    int64_t first, count;
    uint64_t hash;
    int cls, held;
} word_type;

static int cmp_type_hash(const void *pa, const void *pb) {
    const word_type *a = pa, *b = pb;
    if (a->cls != b->cls) return a->cls < b->cls ? -1 : 1;
    if (a->hash != b->hash) return a->hash < b->hash ? -1 : 1;
    return a->first < b->first ? -1 : a->first > b->first;
}

/* Orders the types by class, hash and first entry, and holds out the first
 * round(frac·n) of each class's n types: at least one, and at most n − 1. */
static void hold_out_share(word_type *types, int64_t nt, double frac) {
    qsort(types, (size_t)nt, sizeof *types, cmp_type_hash);
    for (int64_t i = 0; i < nt;) {
        int64_t j = i;
        while (j < nt && types[j].cls == types[i].cls) j++;
        int64_t ntc = j - i, h = (int64_t)floor(frac * (double)ntc + 0.5);
        if (ntc >= 2 && h < 1) h = 1;
        if (h > ntc - 1) h = ntc - 1;
        for (int64_t q = i; q < i + h; q++) types[q].held = 1;
        i = j;
    }
}

/* heldout (n_words): 1 when the word's type is held out. */
static ffn_status held_out_types(const ffn_corpus *cp, double frac, uint64_t seed,
                                 uint8_t *heldout) {
    const int64_t nw = cp->n_words;
    word_key *keys = malloc((size_t)(nw > 0 ? nw : 1) * sizeof *keys);
    word_type *types = malloc((size_t)(nw > 0 ? nw : 1) * sizeof *types);
    if (!keys || !types) {
        free(keys), free(types);
        return ffn_error(FFN_ERR_NOMEM, "probe: out of memory (word types)");
    }
    for (int64_t w = 0; w < nw; w++) {
        keys[w].word = w;
        keys[w].cls = cp->words[w].cls;
        keys[w].hash = fnv1a(cp->text + cp->words[w].offset, cp->words[w].length, seed);
    }
    qsort_r(keys, (size_t)nw, sizeof *keys, cmp_type, (void *)cp);
    int64_t nt = 0;
    for (int64_t i = 0; i < nw; i++) {
        const ffn_word *a = &cp->words[keys[i].word];
        if (i > 0) {
            const ffn_word *b = &cp->words[keys[i - 1].word];
            if (keys[i].cls == keys[i - 1].cls && a->length == b->length &&
                !memcmp(cp->text + a->offset, cp->text + b->offset, (size_t)a->length)) {
                types[nt - 1].count++;
                continue;
            }
        }
        types[nt++] = (word_type){i, 1, keys[i].hash, keys[i].cls, 0};
    }
    hold_out_share(types, nt, frac);
    if (nw > 0) memset(heldout, 0, (size_t)nw);
    for (int64_t q = 0; q < nt; q++)
        for (int64_t e = 0; types[q].held && e < types[q].count; e++)
            heldout[keys[types[q].first + e].word] = 1;
    free(keys), free(types);
    return FFN_OK;
}

/* heldout_id (V): 1 for the held-out share of the token ids that occur with
 * a label, chosen by hash. */
static ffn_status held_out_ids(const int32_t *ids, const int8_t *labels, int64_t n, int64_t V,
                               double frac, uint64_t seed, uint8_t *heldout_id) {
    word_type *seen = malloc((size_t)V * sizeof *seen);
    uint8_t *occurs = calloc((size_t)V, 1);
    if (!seen || !occurs) {
        free(seen), free(occurs);
        return ffn_error(FFN_ERR_NOMEM, "probe: out of memory (token ids)");
    }
    for (int64_t i = 0; i < n; i++)
        if (labels[i] >= 0) occurs[ids[i]] = 1;
    int64_t k = 0;
    for (int64_t v = 0; v < V; v++) {
        heldout_id[v] = 0;
        if (occurs[v]) {
            int32_t id = (int32_t)v;
            seen[k++] = (word_type){v, 1, fnv1a((const char *)&id, sizeof id, seed), 0, 0};
        }
    }
    hold_out_share(seen, k, frac);
    for (int64_t j = 0; j < k; j++) heldout_id[seen[j].first] = seen[j].held;
    free(seen), free(occurs);
    return FFN_OK;
}

ffn_status ffn_inspect_gates_corpus(ffn_ctx *ctx, ffn_model *m, const ffn_tokenizer *tok,
                                    const ffn_probe_options *opts, ffn_probe_result **out) {
    static const char *fn = "ffn_inspect_gates_corpus";
    if (!out) return ffn_error(FFN_ERR_INVALID_ARG, "%s: out is NULL", fn);
    *out = NULL;
    if (!m || !tok) return ffn_error(FFN_ERR_INVALID_ARG, "%s: model and tokenizer must not be NULL", fn);
    ffn_probe_options o;
    ffn_probe_options_default(&o);
    if (opts) o = *opts;
    if (!(o.heldout_fraction > 0.0 && o.heldout_fraction < 1.0))
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: heldout_fraction %g must be in (0, 1)", fn,
                         o.heldout_fraction);
    if (ffn_tokenizer_vocab_size(tok) != ffn_model_get_config(m)->vocab_size)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: the tokenizer has %lld tokens but the model's "
                         "vocab_size is %lld", fn, (long long)ffn_tokenizer_vocab_size(tok),
                         (long long)ffn_model_get_config(m)->vocab_size);
    ffn_corpus *cp = NULL;
    int32_t *ids = NULL;
    int64_t *offs = NULL, n = 0;
    int8_t *labels = NULL, *split = NULL;
    uint8_t *bound = NULL, *heldout = NULL;
    ffn_status st;
    if ((st = ffn_corpus_generate(o.lang, o.corpus_seed, o.sentences, &cp)) ||
        (st = ffn_tokenizer_encode(tok, cp->text, (size_t)cp->n_bytes, &ids, &offs, &n, NULL)))
        goto done;
    labels = malloc((size_t)n);
    split = malloc((size_t)n);
    bound = malloc((size_t)n);
    heldout = malloc((size_t)(cp->n_words > 0 ? cp->n_words : 1));
    if (!labels || !split || !bound || !heldout) {
        st = ffn_error(FFN_ERR_NOMEM, "%s: out of memory", fn);
        goto done;
    }
    if (o.split == FFN_PROBE_SPLIT_WORDS &&
        (st = held_out_types(cp, o.heldout_fraction, o.seed, heldout)))
        goto done;
    const int64_t first_test = (int64_t)ceil((1.0 - o.heldout_fraction) * (double)cp->n_sentences);
    for (int64_t i = 0; i < n; i++) {
        int64_t a = offs[i], len = (i + 1 < n ? offs[i + 1] : cp->n_bytes) - a;
        int64_t w = len > 0 ? ffn_corpus_word_at(cp, a, len) : -1;
        labels[i] = w < 0 ? -1 : cp->words[w].cls;
        split[i] = w < 0 ? 0
                   : o.split == FFN_PROBE_SPLIT_WORDS ? (int8_t)heldout[w]
                                                      : (int8_t)(cp->words[w].sentence >= first_test);
        bound[i] = a == 0 || cp->text[a - 1] == '\n';
    }
    { /* coverage: a word any of whose tokens is <unk> is not in the vocabulary */
        const int32_t unk = ffn_tokenizer_unk_id(tok);
        int64_t words = 0, missing = 0, prev_w = -1, prev_bad = 0;
        for (int64_t i = 0; i < n; i++) {
            int64_t a = offs[i], len = (i + 1 < n ? offs[i + 1] : cp->n_bytes) - a;
            int64_t w = len > 0 ? ffn_corpus_word_at(cp, a, len) : -1;
            if (w < 0) continue;
            if (w != prev_w) {
                missing += prev_bad;
                words++, prev_w = w, prev_bad = 0;
            }
            if (ids[i] == unk) prev_bad = 1;
        }
        missing += prev_bad;
        if (words > 0 && 2 * missing > words) {
            st = ffn_error(FFN_ERR_CONFIG, "%s: only %.0f%% of the %s corpus's words (%lld of %lld) "
                           "are in the model's vocabulary, the rest encode to <unk>; the probe "
                           "needs a vocabulary that covers at least half of them (a model trained "
                           "on the built-in %s corpus, or the corpus language the model was "
                           "trained on)", fn, 100.0 * (double)(words - missing) / (double)words,
                           ffn_lang_name(o.lang), (long long)(words - missing), (long long)words,
                           ffn_lang_name(o.lang));
            goto done;
        }
    }
    if (o.split == FFN_PROBE_SPLIT_TOKENS) {
        const int64_t V = ffn_tokenizer_vocab_size(tok);
        uint8_t *hid = malloc((size_t)V);
        if (!hid) {
            st = ffn_error(FFN_ERR_NOMEM, "%s: out of memory", fn);
            goto done;
        }
        st = held_out_ids(ids, labels, n, V, o.heldout_fraction, o.seed, hid);
        for (int64_t i = 0; !st && i < n; i++) split[i] = (int8_t)hid[ids[i]];
        free(hid);
        if (st) goto done;
    }
    st = ffn_inspect_probe(ctx, m, ids, labels, split, bound, n, &o, out);
done:
    ffn_corpus_free(cp);
    free(ids), free(offs), free(labels), free(split), free(bound), free(heldout);
    return st;
}
