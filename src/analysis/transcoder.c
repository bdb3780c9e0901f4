/* transcoder.c -- the TopK transcoder / SAE of one FFN layer: forward,
 * loss and gradients (FVU + AuxK), Adam, the firing counters, files.  What
 * it does is in include/ffn/transcoder.h; the model side (capture through
 * taps, evaluation with the FFN replaced) is in transcoder_model.c.
 *
 * Letters: n rows, D hidden_size, Fp features, k active features per row,
 * ka AuxK's k.
 *
 * Cost: the encoder is the one dense product (n·Fp·D multiply-adds, by
 * ffn_gemm); everything after TopK is sparse, O(n·k·D): decoding a row
 * adds k decoder rows, and the gradients of the encoder and decoder rows
 * are gathered per feature from the rows that selected it (the entries
 * sorted by feature, so each row of the gradient has one writer and a
 * fixed order of sums). */
#include "ffn/transcoder.h"

#include "base/common.h"
#include "ffn/json.h"
#include "ffn/profile.h"
#include "ffn/rng.h"
#include "ffn/safetensors.h"
#include "kernels/kernels.h"
#include "analysis/transcoder_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *ffn_tc_kind_name(ffn_tc_kind kind) {
    switch (kind) {
    case FFN_TC_KIND_TRANSCODER: return "transcoder";
    case FFN_TC_KIND_SAE: return "sae";
    }
    return NULL;
}

void ffn_tc_config_default(ffn_tc_config *cfg, ffn_tc_kind kind, int64_t layer, int64_t d_model,
                           int64_t features, int64_t k) {
    memset(cfg, 0, sizeof *cfg);
    cfg->kind = kind;
    cfg->layer = layer;
    cfg->d_model = d_model;
    cfg->features = features;
    cfg->k = k;
    cfg->k_aux = d_model / 2 > 0 ? d_model / 2 : 1;
    cfg->aux_coef = 1.0 / 32;
    cfg->dead_tokens = 10000;
}

static ffn_status check_config(const ffn_tc_config *c) {
    if (!ffn_tc_kind_name(c->kind))
        return ffn_error(FFN_ERR_INVALID_ARG, "transcoder: kind %d is not transcoder or sae",
                         (int)c->kind);
    if (c->d_model < 1 || c->features < 1 || c->k < 1 || c->k > c->features)
        return ffn_error(FFN_ERR_INVALID_ARG,
                         "transcoder: need d_model >= 1, features >= 1 and 1 <= k <= features "
                         "(got d_model %lld, features %lld, k %lld)",
                         (long long)c->d_model, (long long)c->features, (long long)c->k);
    if (c->features > INT32_MAX / 2 || c->d_model > (1 << 20))
        return ffn_error(FFN_ERR_INVALID_ARG, "transcoder: %lld features of width %lld is too big",
                         (long long)c->features, (long long)c->d_model);
    if (c->skip && c->kind == FFN_TC_KIND_SAE)
        return ffn_error(FFN_ERR_INVALID_ARG,
                         "transcoder: a skip connection is for a transcoder, not an sae");
    if (c->k_aux < 0 || c->dead_tokens < 1 || !(c->aux_coef >= 0) || c->layer < 0)
        return ffn_error(FFN_ERR_INVALID_ARG,
                         "transcoder: need layer >= 0, k_aux >= 0, aux_coef >= 0, "
                         "dead_tokens >= 1");
    return FFN_OK;
}

/* ---- create / free -------------------------------------------------------------- */

void ffn_tc_free(ffn_transcoder *tc) {
    if (!tc) return;
    FFN_FREE_ALL(tc->p, tc->g, tc->m, tc->v, tc->last_fired, tc->pre, tc->yhat, tc->dy,
                 tc->ehat, tc->de, tc->idx, tc->val, tc->dval, tc->aidx, tc->aval, tc->daval,
                 tc->fstart, tc->entries, tc->dead, tc);
}

ffn_status tc_alloc(const ffn_tc_config *cfg, ffn_transcoder **out) {
    *out = NULL;
    ffn_status st = check_config(cfg);
    if (st) return st;
    ffn_transcoder *tc = calloc(1, sizeof *tc);
    if (!tc) return ffn_error(FFN_ERR_NOMEM, "transcoder: out of memory");
    tc->cfg = *cfg;
    const int64_t D = cfg->d_model, Fp = cfg->features;
    int64_t o = 0;
    tc->off_W_enc = o; o += Fp * D;
    tc->off_b_enc = o; o += Fp;
    tc->off_W_dec = o; o += Fp * D;
    tc->off_b_dec = o; o += D;
    tc->off_W_skip = cfg->skip ? o : -1;
    if (cfg->skip) o += D * D;
    tc->n_params = o;
    tc->p = calloc((size_t)o, sizeof(float));
    tc->g = calloc((size_t)o, sizeof(float));
    tc->m = calloc((size_t)o, sizeof(float));
    tc->v = calloc((size_t)o, sizeof(float));
    tc->last_fired = calloc((size_t)Fp, sizeof(int64_t));
    tc->dead = calloc((size_t)Fp, 1);
    tc->fstart = calloc((size_t)Fp + 1, sizeof(int64_t));
    if (!tc->p || !tc->g || !tc->m || !tc->v || !tc->last_fired || !tc->dead || !tc->fstart) {
        ffn_tc_free(tc);
        return ffn_error(FFN_ERR_NOMEM, "transcoder: out of memory (%lld parameters)",
                         (long long)o);
    }
    *out = tc;
    return FFN_OK;
}

ffn_status ffn_tc_create(const ffn_tc_config *cfg, uint64_t seed, ffn_transcoder **out) {
    if (!cfg || !out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_tc_create: NULL argument");
    ffn_transcoder *tc;
    ffn_status st = tc_alloc(cfg, &tc);
    if (st) return st;
    const int64_t D = cfg->d_model, Fp = cfg->features;
    ffn_rng r;
    ffn_rng_seed(&r, seed);
    float *Wd = tc->p + tc->off_W_dec, *We = tc->p + tc->off_W_enc;
    for (int64_t j = 0; j < Fp; j++) {
        double s = 0;
        for (int64_t d = 0; d < D; d++) {
            const double z = ffn_rng_normal(&r);
            Wd[j * D + d] = (float)z;
            s += z * z;
        }
        const float inv = (float)(1.0 / sqrt(s > 0 ? s : 1));
        for (int64_t d = 0; d < D; d++) Wd[j * D + d] *= inv;
    }
    memcpy(We, Wd, (size_t)(Fp * D) * sizeof(float));
    tc->b_dec_unset = 1;
    tc->scale_unset = 1;
    *out = tc;
    return FFN_OK;
}

const ffn_tc_config *ffn_tc_get_config(const ffn_transcoder *tc) { return tc ? &tc->cfg : NULL; }

static ffn_tc_weights view(float *base, const ffn_transcoder *tc) {
    ffn_tc_weights w = {base + tc->off_W_enc, base + tc->off_b_enc, base + tc->off_W_dec,
                        base + tc->off_b_dec, tc->off_W_skip >= 0 ? base + tc->off_W_skip : NULL};
    return w;
}

ffn_tc_weights ffn_tc_get_weights(ffn_transcoder *tc) {
    tc->b_dec_unset = 0; /* the caller may write them: they are the weights now */
    tc->scale_unset = 0;
    return view(tc->p, tc);
}

ffn_tc_weights ffn_tc_get_grads(ffn_transcoder *tc) { return view(tc->g, tc); }

void ffn_tc_progress(const ffn_transcoder *tc, int64_t *step, int64_t *tokens) {
    if (step) *step = tc->step;
    if (tokens) *tokens = tc->tokens;
}

/* The row scratch for n rows (grown, never shrunk). */
static ffn_status reserve_rows(ffn_transcoder *tc, int64_t n) {
    if (n <= tc->cap_n) return FFN_OK;
    const int64_t D = tc->cfg.d_model, Fp = tc->cfg.features, k = tc->cfg.k;
    const int64_t ka = tc->cfg.k_aux < Fp ? tc->cfg.k_aux : Fp;
    if (n * (k + ka) >= INT32_MAX)
        return ffn_error(FFN_ERR_INVALID_ARG, "transcoder: %lld rows in one batch is too many",
                         (long long)n);
#define GROW(ptr, count)                                                                    \
    do {                                                                                    \
        void *q = realloc((ptr), (size_t)(count) * sizeof *(ptr));                         \
        if (!q) return ffn_error(FFN_ERR_NOMEM, "transcoder: out of memory (%lld rows)",     \
                                 (long long)n);                                             \
        (ptr) = q;                                                                          \
    } while (0)
    GROW(tc->pre, n * Fp);
    GROW(tc->yhat, n * D);
    GROW(tc->dy, n * D);
    GROW(tc->ehat, n * D);
    GROW(tc->de, n * D);
    GROW(tc->idx, n * k);
    GROW(tc->val, n * k);
    GROW(tc->dval, n * k);
    GROW(tc->aidx, n * (ka > 0 ? ka : 1));
    GROW(tc->aval, n * (ka > 0 ? ka : 1));
    GROW(tc->daval, n * (ka > 0 ? ka : 1));
    GROW(tc->entries, n * (k + ka));
#undef GROW
    tc->cap_n = n;
    return FFN_OK;
}

/* ---- forward ------------------------------------------------------------------------ */

/* a better than b: larger, or equal and lower index */
static inline int better(float va, int32_t ia, float vb, int32_t ib) {
    return va > vb || (va == vb && ia < ib);
}

/* The k best entries of row (Fp) among those with mask[j] (NULL: all),
 * into idx/val; a min-heap of the k kept, its worst at the root. */
static void topk_row(const float *row, int64_t Fp, int64_t k, const unsigned char *mask,
                     int32_t *idx, float *val) {
    int64_t size = 0;
    float worst = 0; /* val[0] once the heap is full: j only grows, so an equal value never
                      * beats a kept one (the lower index stays) */
    for (int64_t j = 0; j < Fp; j++) {
        if (mask && !mask[j]) continue;
        const float x = row[j];
        if (size == k && !(x > worst)) continue;
        int64_t at;
        if (size < k) { /* sift up */
            at = size++;
            while (at > 0) {
                const int64_t up = (at - 1) / 2;
                if (!better(val[up], idx[up], x, (int32_t)j)) break;
                val[at] = val[up];
                idx[at] = idx[up];
                at = up;
            }
        } else {
            if (!better(x, (int32_t)j, val[0], idx[0])) continue;
            at = 0; /* sift down from the root */
            for (;;) {
                int64_t c = 2 * at + 1;
                if (c >= k) break;
                if (c + 1 < k && better(val[c], idx[c], val[c + 1], idx[c + 1])) c++;
                if (!better(x, (int32_t)j, val[c], idx[c])) break;
                val[at] = val[c];
                idx[at] = idx[c];
                at = c;
            }
        }
        val[at] = x;
        idx[at] = (int32_t)j;
        if (size == k) worst = val[0];
    }
}

/* y (D) += Σ val[s] · W_dec[idx[s]] over the kk entries, relu first (val < 0 set to 0). */
static void decode_add(float *y, const int32_t *idx, float *val, int64_t kk, const float *Wd,
                       int64_t D) {
    for (int64_t s = 0; s < kk; s++) {
        if (!(val[s] > 0)) {
            val[s] = 0;
            continue;
        }
        const float a = val[s], *w = Wd + (int64_t)idx[s] * D;
        for (int64_t d = 0; d < D; d++) y[d] += a * w[d];
    }
}

/* d loss / d pre at kk entries of a row: g (D) · W_dec[idx[s]] where val[s] > 0 (relu), else 0. */
static void entry_grads(float *dval, const float *g, const int32_t *idx, const float *val,
                        int64_t kk, const float *Wd, int64_t D) {
    for (int64_t s = 0; s < kk; s++) {
        float acc = 0;
        if (val[s] > 0) {
            const float *w = Wd + (int64_t)idx[s] * D;
            for (int64_t d = 0; d < D; d++) acc += g[d] * w[d];
        }
        dval[s] = acc;
    }
}

/* pre = x·W_encᵀ + b_enc; idx/val = relu(TopK); yhat = a·W_dec + b_dec (+ skip). */
static ffn_status forward_rows(const ffn_ctx *ctx, ffn_transcoder *tc, const float *x, int64_t n,
                               float *yhat, int32_t *idx, float *val) {
    const int64_t D = tc->cfg.d_model, Fp = tc->cfg.features, k = tc->cfg.k;
    const float *We = tc->p + tc->off_W_enc, *be = tc->p + tc->off_b_enc;
    const float *Wd = tc->p + tc->off_W_dec, *bd = tc->p + tc->off_b_dec;
    ffn_status st = FFN_OK;
    const double t0 = ffn_profile_now();
    if (n * Fp * D < 8192) { /* a few rows (a feature's contexts, tests): the plain loop,
                              * not a matrix engine's set-up */
        ffn_gemm_ref(0, 1, n, Fp, D, 1.0f, x, D, We, D, 0.0f, tc->pre, Fp);
        if (tc->off_W_skip >= 0)
            ffn_gemm_ref(0, 1, n, D, D, 1.0f, x, D, tc->p + tc->off_W_skip, D, 0.0f, yhat, D);
    } else {
        st = ffn_gemm(ctx, 0, 1, n, Fp, D, 1.0f, x, D, We, D, 0.0f, tc->pre, Fp);
        if (!st && tc->off_W_skip >= 0)
            st = ffn_gemm(ctx, 0, 1, n, D, D, 1.0f, x, D, tc->p + tc->off_W_skip, D, 0.0f, yhat,
                          D);
    }
    if (st) return st;
    const int skip = tc->off_W_skip >= 0;
    tc->prod_seconds += ffn_profile_now() - t0;
    tc->prod_flops += 2.0 * (double)n * (double)D * (double)(Fp + (skip ? D : 0));
    ffn_ctx_enter(ctx);
#pragma omp parallel for schedule(static) if (n * Fp > 65536)
    for (int64_t i = 0; i < n; i++) {
        float *pre = tc->pre + i * Fp;
        for (int64_t j = 0; j < Fp; j++) pre[j] += be[j];
        int32_t *ix = idx + i * k;
        float *vx = val + i * k;
        topk_row(pre, Fp, k, NULL, ix, vx);
        float *y = yhat + i * D;
        if (skip) for (int64_t d = 0; d < D; d++) y[d] += bd[d];
        else memcpy(y, bd, (size_t)D * sizeof(float));
        decode_add(y, ix, vx, k, Wd, D);
    }
    return FFN_OK;
}

ffn_status ffn_tc_forward(const ffn_ctx *ctx, ffn_transcoder *tc, const float *x, int64_t n,
                          float *y_hat, int32_t *idx, float *val) {
    if (!ctx || !tc || !x || n < 0)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_tc_forward: bad arguments");
    if (n == 0) return FFN_OK;
    ffn_status st = reserve_rows(tc, n);
    if (st) return st;
    st = forward_rows(ctx, tc, x, n, tc->yhat, tc->idx, tc->val);
    if (st) return st;
    const int64_t D = tc->cfg.d_model, k = tc->cfg.k;
    if (y_hat) memcpy(y_hat, tc->yhat, (size_t)(n * D) * sizeof(float));
    if (idx) memcpy(idx, tc->idx, (size_t)(n * k) * sizeof(int32_t));
    if (val) memcpy(val, tc->val, (size_t)(n * k) * sizeof(float));
    return FFN_OK;
}

/* ---- loss and gradients -------------------------------------------------------------- */

void ffn_tc_products(const ffn_transcoder *tc, double *flops, double *seconds) {
    if (flops) *flops = tc ? tc->prod_flops : 0;
    if (seconds) *seconds = tc ? tc->prod_seconds : 0;
}

int64_t ffn_tc_dead(const ffn_transcoder *tc, unsigned char *out) {
    int64_t n = 0;
    for (int64_t j = 0; j < tc->cfg.features; j++) {
        const int d = tc->tokens - tc->last_fired[j] > tc->cfg.dead_tokens;
        if (out) out[j] = (unsigned char)d;
        n += d;
    }
    return n;
}

/* Σ|a − ā|² over n rows of D, in double (two passes). */
static double centered_ss(const float *a, int64_t n, int64_t D, double *mean) {
    for (int64_t d = 0; d < D; d++) mean[d] = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t d = 0; d < D; d++) mean[d] += a[i * D + d];
    for (int64_t d = 0; d < D; d++) mean[d] /= (double)n;
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t d = 0; d < D; d++) {
            const double e = a[i * D + d] - mean[d];
            s += e * e;
        }
    return s;
}

ffn_status ffn_tc_loss_grad(const ffn_ctx *ctx, ffn_transcoder *tc, const float *x,
                            const float *y, int64_t n, const unsigned char *dead,
                            ffn_tc_stats *stats) {
    if (!ctx || !tc || !x || !y || n < 1)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_tc_loss_grad: bad arguments");
    const int64_t D = tc->cfg.d_model, Fp = tc->cfg.features, k = tc->cfg.k;
    ffn_status st = reserve_rows(tc, n);
    if (st) return st;
    double *mean = malloc((size_t)D * sizeof *mean);
    if (!mean) return ffn_error(FFN_ERR_NOMEM, "transcoder: out of memory");
    float *bd = tc->p + tc->off_b_dec;
    const double sst = centered_ss(y, n, D, mean);
    if (tc->b_dec_unset) { /* the first batch's mean output row */
        for (int64_t d = 0; d < D; d++) bd[d] = (float)mean[d];
        tc->b_dec_unset = 0;
    }
    if ((st = forward_rows(ctx, tc, x, n, tc->yhat, tc->idx, tc->val))) {
        free(mean);
        return st;
    }
    if (tc->scale_unset) {
        /* the first batch: the encoder scaled so that the features' part of ŷ has
         * the norm of y − ȳ (TopK and relu commute with a positive scale, b_enc is 0:
         * the same features fire, their activations scaled) */
        double s2 = 0;
        for (int64_t i = 0; i < n * D; i++) {
            const double r = (double)tc->yhat[i] - bd[i % D];
            s2 += r * r;
        }
        tc->scale_unset = 0;
        if (s2 > 0 && sst > 0) {
            const float f = (float)sqrt(sst / s2);
            float *We = tc->p + tc->off_W_enc;
            for (int64_t i = 0; i < Fp * D; i++) We[i] *= f;
            if ((st = forward_rows(ctx, tc, x, n, tc->yhat, tc->idx, tc->val))) {
                free(mean);
                return st;
            }
        }
    }
    /* the dead features: given, or from the counters */
    int64_t n_dead = 0;
    if (dead) {
        for (int64_t j = 0; j < Fp; j++) n_dead += (tc->dead[j] = dead[j] ? 1 : 0);
    } else {
        n_dead = ffn_tc_dead(tc, tc->dead);
    }
    const int64_t ka = tc->cfg.k_aux == 0 || n_dead == 0 || tc->cfg.aux_coef == 0
                           ? 0 : (tc->cfg.k_aux < n_dead ? tc->cfg.k_aux : n_dead);
    tc->last_ka = ka;
    tc->last_n = n;
    /* main residual */
    const double inv_sst = 1.0 / (sst > 0 ? sst : 1e-30);
    double sse = 0;
    int64_t active = 0;
    for (int64_t i = 0; i < n * D; i++) {
        const double r = (double)tc->yhat[i] - y[i];
        sse += r * r;
        tc->dy[i] = (float)(2.0 * r * inv_sst);
    }
    for (int64_t i = 0; i < n * k; i++) active += tc->val[i] > 0;
    /* AuxK: the dead features' TopK models e = y − ŷ */
    double aux = 0;
    const float *Wd = tc->p + tc->off_W_dec;
    if (ka > 0) {
        ffn_ctx_enter(ctx);
#pragma omp parallel for schedule(static) if (n * Fp > 65536)
        for (int64_t i = 0; i < n; i++) {
            int32_t *ix = tc->aidx + i * ka;
            float *vx = tc->aval + i * ka;
            topk_row(tc->pre + i * Fp, Fp, ka, tc->dead, ix, vx);
            float *eh = tc->ehat + i * D;
            memset(eh, 0, (size_t)D * sizeof(float));
            decode_add(eh, ix, vx, ka, Wd, D);
        }
        /* e into de first, then de = d loss / d ê */
        for (int64_t i = 0; i < n * D; i++) tc->de[i] = y[i] - tc->yhat[i];
        const double sst_e = centered_ss(tc->de, n, D, mean);
        const double scale = fmin((double)n_dead / (double)tc->cfg.k_aux, 1.0);
        const double inv = 1.0 / (sst_e > 0 ? sst_e : 1e-30);
        double ssa = 0;
        for (int64_t i = 0; i < n * D; i++) {
            const double r = (double)tc->ehat[i] - tc->de[i];
            ssa += r * r;
            tc->de[i] = (float)(tc->cfg.aux_coef * scale * 2.0 * r * inv);
        }
        aux = scale * ssa * inv;
    }
    free(mean);
    /* d loss / d pre at the entries: dy·w_j (relu passes where a > 0) */
    ffn_ctx_enter(ctx);
#pragma omp parallel for schedule(static) if (n * k * D > 65536)
    for (int64_t i = 0; i < n; i++) {
        entry_grads(tc->dval + i * k, tc->dy + i * D, tc->idx + i * k, tc->val + i * k, k, Wd, D);
        if (ka > 0)
            entry_grads(tc->daval + i * ka, tc->de + i * D, tc->aidx + i * ka, tc->aval + i * ka,
                        ka, Wd, D);
    }
    /* the entries by feature (counting sort; row order inside a feature) */
    int64_t *fs = tc->fstart;
    memset(fs, 0, (size_t)(Fp + 1) * sizeof *fs);
    for (int64_t e = 0; e < n * k; e++)
        if (tc->val[e] > 0) fs[tc->idx[e] + 1]++;
    for (int64_t e = 0; e < n * ka; e++)
        if (tc->aval[e] > 0) fs[tc->aidx[e] + 1]++;
    for (int64_t j = 0; j < Fp; j++) fs[j + 1] += fs[j];
    {
        int64_t *fill = malloc((size_t)Fp * sizeof *fill);
        if (!fill) return ffn_error(FFN_ERR_NOMEM, "transcoder: out of memory");
        memcpy(fill, fs, (size_t)Fp * sizeof *fill);
        for (int64_t i = 0; i < n; i++) {
            for (int64_t s = 0; s < k; s++)
                if (tc->val[i * k + s] > 0)
                    tc->entries[fill[tc->idx[i * k + s]]++] = (int32_t)(i * k + s);
            for (int64_t s = 0; s < ka; s++)
                if (tc->aval[i * ka + s] > 0)
                    tc->entries[fill[tc->aidx[i * ka + s]]++] =
                        (int32_t)(n * k + i * ka + s);
        }
        free(fill);
    }
    /* gradients */
    memset(tc->g, 0, (size_t)tc->n_params * sizeof(float));
    float *gWe = tc->g + tc->off_W_enc, *gbe = tc->g + tc->off_b_enc;
    float *gWd = tc->g + tc->off_W_dec, *gbd = tc->g + tc->off_b_dec;
    ffn_ctx_enter(ctx);
#pragma omp parallel for schedule(dynamic, 16) if (n * k * D > 65536)
    for (int64_t j = 0; j < Fp; j++) {
        float *ge = gWe + j * D, *gd = gWd + j * D;
        double gb = 0;
        for (int64_t q = fs[j]; q < fs[j + 1]; q++) {
            const int64_t e = tc->entries[q];
            int64_t i;
            float a, dp;
            const float *up;
            if (e < n * k) {
                i = e / k;
                a = tc->val[e];
                dp = tc->dval[e];
                up = tc->dy + i * D;
            } else {
                const int64_t ea = e - n * k;
                i = ea / ka;
                a = tc->aval[ea];
                dp = tc->daval[ea];
                up = tc->de + i * D;
            }
            const float *xi = x + i * D;
            for (int64_t d = 0; d < D; d++) {
                gd[d] += a * up[d];
                ge[d] += dp * xi[d];
            }
            gb += dp;
        }
        gbe[j] = (float)gb;
    }
    for (int64_t d = 0; d < D; d++) {
        double s = 0;
        for (int64_t i = 0; i < n; i++) s += tc->dy[i * D + d];
        gbd[d] = (float)s;
    }
    if (tc->off_W_skip >= 0) {
        const double t0 = ffn_profile_now();
        if ((st = ffn_gemm(ctx, 1, 0, D, D, n, 1.0f, tc->dy, D, x, D, 0.0f, tc->g + tc->off_W_skip,
                           D)))
            return st;
        tc->prod_seconds += ffn_profile_now() - t0;
        tc->prod_flops += 2.0 * (double)D * (double)D * (double)n;
    }
    if (stats) {
        stats->fvu = sse * inv_sst;
        stats->aux = aux;
        stats->loss = stats->fvu + tc->cfg.aux_coef * aux;
        stats->sse = sse;
        stats->sst = sst;
        stats->l0 = (double)active / (double)n;
        stats->n_dead = n_dead;
    }
    tc->have_grads = 1;
    return FFN_OK;
}

/* ---- Adam ------------------------------------------------------------------------------ */

ffn_status ffn_tc_adam_step(const ffn_ctx *ctx, ffn_transcoder *tc, double lr) {
    if (!ctx || !tc || !(lr >= 0))
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_tc_adam_step: bad arguments");
    if (!tc->have_grads)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_tc_adam_step: no gradients (call "
                         "ffn_tc_loss_grad first)");
    const int64_t D = tc->cfg.d_model, Fp = tc->cfg.features, k = tc->cfg.k;
    float *Wd = tc->p + tc->off_W_dec, *gWd = tc->g + tc->off_W_dec;
    ffn_ctx_enter(ctx);
    /* the decoder rows stay unit: no gradient along a row */
#pragma omp parallel for schedule(static) if (Fp * D > 65536)
    for (int64_t j = 0; j < Fp; j++) {
        const float *w = Wd + j * D;
        float *g = gWd + j * D;
        double dot = 0;
        for (int64_t d = 0; d < D; d++) dot += (double)g[d] * w[d];
        const float f = (float)dot;
        for (int64_t d = 0; d < D; d++) g[d] -= f * w[d];
    }
    tc->step++;
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    const float c1 = (float)(1.0 / (1.0 - pow(b1, (double)tc->step)));
    const float c2 = (float)(1.0 / (1.0 - pow(b2, (double)tc->step)));
    const float flr = (float)lr, fb1 = (float)b1, fb2 = (float)b2, feps = (float)eps;
    const int64_t np = tc->n_params;
    float *p = tc->p, *g = tc->g, *m = tc->m, *v = tc->v;
#pragma omp parallel for schedule(static) if (np > 65536)
    for (int64_t i = 0; i < np; i++) {
        const float gi = g[i];
        m[i] = fb1 * m[i] + (1 - fb1) * gi;
        v[i] = fb2 * v[i] + (1 - fb2) * gi * gi;
        p[i] -= flr * (m[i] * c1) / (sqrtf(v[i] * c2) + feps);
    }
#pragma omp parallel for schedule(static) if (Fp * D > 65536)
    for (int64_t j = 0; j < Fp; j++) {
        float *w = Wd + j * D;
        double s = 0;
        for (int64_t d = 0; d < D; d++) s += (double)w[d] * w[d];
        if (s > 0) {
            const float inv = (float)(1.0 / sqrt(s));
            for (int64_t d = 0; d < D; d++) w[d] *= inv;
        }
    }
    /* the batch's firing */
    const int64_t n = tc->last_n;
    tc->tokens += n;
    for (int64_t e = 0; e < n * k; e++)
        if (tc->val[e] > 0) tc->last_fired[tc->idx[e]] = tc->tokens;
    tc->have_grads = 0;
    return FFN_OK;
}

/* ---- files ------------------------------------------------------------------------------ */

static void config_json(const ffn_tc_config *c, char *buf, size_t cap) {
    snprintf(buf, cap,
             "{\"format\": \"ffn-transcoder\", \"version\": 1, \"kind\": \"%s\", \"layer\": %lld, "
             "\"d_model\": %lld, \"features\": %lld, \"k\": %lld, \"skip\": %s, "
             "\"input\": \"layers.%lld.%s\", \"output\": \"layers.%lld.mlp_out\", "
             "\"k_aux\": %lld, \"aux_coef\": %.17g, \"dead_tokens\": %lld}",
             ffn_tc_kind_name(c->kind), (long long)c->layer, (long long)c->d_model,
             (long long)c->features, (long long)c->k, c->skip ? "true" : "false",
             (long long)c->layer, c->kind == FFN_TC_KIND_SAE ? "mlp_out" : "mlp_in",
             (long long)c->layer, (long long)c->k_aux, c->aux_coef, (long long)c->dead_tokens);
}

ffn_status ffn_tc_save(const ffn_transcoder *tc, const char *path, int with_state) {
    if (!tc || !path) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_tc_save: NULL argument");
    const int64_t D = tc->cfg.d_model, Fp = tc->cfg.features;
    ffn_st_writer *w = NULL;
    ffn_status st = ffn_st_writer_create(&w);
    int64_t sFD[2] = {Fp, D}, sF[1] = {Fp}, sD[1] = {D}, sDD[2] = {D, D}, sP[1] = {tc->n_params};
    if (!st) st = ffn_st_writer_add(w, "encoder.weight", FFN_DTYPE_F32, 2, sFD, tc->p + tc->off_W_enc);
    if (!st) st = ffn_st_writer_add(w, "encoder.bias", FFN_DTYPE_F32, 1, sF, tc->p + tc->off_b_enc);
    if (!st) st = ffn_st_writer_add(w, "decoder.weight", FFN_DTYPE_F32, 2, sFD, tc->p + tc->off_W_dec);
    if (!st) st = ffn_st_writer_add(w, "decoder.bias", FFN_DTYPE_F32, 1, sD, tc->p + tc->off_b_dec);
    if (!st && tc->off_W_skip >= 0)
        st = ffn_st_writer_add(w, "skip.weight", FFN_DTYPE_F32, 2, sDD, tc->p + tc->off_W_skip);
    char buf[1024];
    config_json(&tc->cfg, buf, sizeof buf);
    if (!st) st = ffn_st_writer_set_metadata(w, "ffn_transcoder", buf);
    if (!st && with_state) {
        st = ffn_st_writer_add(w, "adam.m", FFN_DTYPE_F32, 1, sP, tc->m);
        if (!st) st = ffn_st_writer_add(w, "adam.v", FFN_DTYPE_F32, 1, sP, tc->v);
        if (!st) st = ffn_st_writer_add(w, "last_fired", FFN_DTYPE_I64, 1, sF, tc->last_fired);
        snprintf(buf, sizeof buf, "%lld", (long long)tc->step);
        if (!st) st = ffn_st_writer_set_metadata(w, "step", buf);
        snprintf(buf, sizeof buf, "%lld", (long long)tc->tokens);
        if (!st) st = ffn_st_writer_set_metadata(w, "tokens", buf);
    }
    if (!st) st = ffn_st_writer_save(w, path);
    ffn_st_writer_free(w);
    return st;
}

static ffn_status bad_field(const char *path, const char *key, const char *expected) {
    return ffn_error(FFN_ERR_FORMAT, "%s: transcoder config (metadata \"ffn_transcoder\"): "
                     "field \"%s\": expected %s", path, key, expected);
}

static ffn_status int_field(const char *path, const ffn_json_value *root, const char *key,
                            int64_t lo, int64_t *out) {
    const ffn_json_value *v = ffn_json_get(root, key);
    if (!v) return ffn_error(FFN_ERR_FORMAT, "%s: transcoder config: field \"%s\" is missing",
                             path, key);
    if (!ffn_json_integer(v, out) || *out < lo) {
        char e[64];
        snprintf(e, sizeof e, "an integer >= %lld", (long long)lo);
        return bad_field(path, key, e);
    }
    return FFN_OK;
}

/* tensor name into dst (count floats), shape checked */
static ffn_status read_tensor(const ffn_st_file *f, const char *name, ffn_dtype dtype, int ndim,
                              const int64_t *shape, void *dst) {
    ffn_st_tensor t;
    ffn_status st = ffn_st_find(f, name, &t);
    if (st) return st;
    if ((st = ffn_st_check_shape(f, &t, ndim, shape))) return st;
    if (t.dtype != dtype)
        return ffn_error(FFN_ERR_FORMAT, "%s: %s: expected dtype %s, found %s", ffn_st_path(f),
                         name, ffn_dtype_name(dtype), ffn_dtype_name(t.dtype));
    memcpy(dst, t.data, t.nbytes);
    return FFN_OK;
}

static ffn_status load_from(ffn_st_file *f, ffn_transcoder **out);

ffn_status ffn_tc_load(const char *path, ffn_transcoder **out) {
    if (!path || !out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_tc_load: NULL argument");
    *out = NULL;
    ffn_st_file *f = NULL;
    ffn_status st = ffn_st_open(path, &f);
    return st ? st : load_from(f, out);
}

ffn_status ffn_tc_load_buffer(const void *data, size_t size, const char *name,
                              ffn_transcoder **out) {
    if (!data || !out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_tc_load_buffer: NULL argument");
    *out = NULL;
    ffn_st_file *f = NULL;
    ffn_status st = ffn_st_open_buffer(data, size, name, &f);
    return st ? st : load_from(f, out);
}

/* (closes f) */
static ffn_status load_from(ffn_st_file *f, ffn_transcoder **out) {
    const char *path = ffn_st_path(f);
    ffn_status st;
    const char *meta = ffn_st_metadata(f, "ffn_transcoder");
    if (!meta) {
        st = ffn_error(FFN_ERR_FORMAT, "%s: not a transcoder (no metadata \"ffn_transcoder\"; "
                       "ffn transcoder train writes one)", path);
        ffn_st_close(f);
        return st;
    }
    ffn_json *doc = NULL;
    if ((st = ffn_json_parse(meta, strlen(meta), path, &doc))) {
        ffn_st_close(f);
        return st;
    }
    const ffn_json_value *root = ffn_json_root(doc);
    ffn_tc_config c;
    memset(&c, 0, sizeof c);
    const char *fmt = ffn_json_string(ffn_json_get(root, "format"));
    const char *kind = ffn_json_string(ffn_json_get(root, "kind"));
    int64_t version = 0;
    if (!fmt || strcmp(fmt, "ffn-transcoder") != 0) st = bad_field(path, "format", "\"ffn-transcoder\"");
    if (!st && (st = int_field(path, root, "version", 1, &version)) == FFN_OK && version != 1)
        st = ffn_error(FFN_ERR_FORMAT, "%s: transcoder format version %lld; this ffn reads "
                       "version 1 (a newer ffn wrote it)", path, (long long)version);
    if (!st) {
        if (kind && !strcmp(kind, "transcoder")) c.kind = FFN_TC_KIND_TRANSCODER;
        else if (kind && !strcmp(kind, "sae")) c.kind = FFN_TC_KIND_SAE;
        else st = bad_field(path, "kind", "\"transcoder\" or \"sae\"");
    }
    if (!st) st = int_field(path, root, "layer", 0, &c.layer);
    if (!st) st = int_field(path, root, "d_model", 1, &c.d_model);
    if (!st) st = int_field(path, root, "features", 1, &c.features);
    if (!st) st = int_field(path, root, "k", 1, &c.k);
    if (!st) st = int_field(path, root, "k_aux", 0, &c.k_aux);
    if (!st) st = int_field(path, root, "dead_tokens", 1, &c.dead_tokens);
    if (!st) {
        const ffn_json_value *v = ffn_json_get(root, "skip");
        const ffn_json_type ty = ffn_json_type_of(v);
        if (ty != FFN_JSON_TRUE && ty != FFN_JSON_FALSE) st = bad_field(path, "skip", "true or false");
        c.skip = ty == FFN_JSON_TRUE;
        c.aux_coef = ffn_json_number(ffn_json_get(root, "aux_coef"));
        if (!st && !(c.aux_coef >= 0)) st = bad_field(path, "aux_coef", "a number >= 0");
    }
    ffn_json_free(doc);
    ffn_transcoder *tc = NULL;
    if (!st && (st = tc_alloc(&c, &tc))) {
        char why[512];
        snprintf(why, sizeof why, "%s", ffn_last_error());
        st = ffn_error(st, "%s: %s", path, why);
    }
    const int64_t D = c.d_model, Fp = c.features;
    int64_t sFD[2] = {Fp, D}, sF[1] = {Fp}, sD[1] = {D}, sDD[2] = {D, D};
    if (!st) st = read_tensor(f, "encoder.weight", FFN_DTYPE_F32, 2, sFD, tc->p + tc->off_W_enc);
    if (!st) st = read_tensor(f, "encoder.bias", FFN_DTYPE_F32, 1, sF, tc->p + tc->off_b_enc);
    if (!st) st = read_tensor(f, "decoder.weight", FFN_DTYPE_F32, 2, sFD, tc->p + tc->off_W_dec);
    if (!st) st = read_tensor(f, "decoder.bias", FFN_DTYPE_F32, 1, sD, tc->p + tc->off_b_dec);
    if (!st && c.skip) st = read_tensor(f, "skip.weight", FFN_DTYPE_F32, 2, sDD, tc->p + tc->off_W_skip);
    if (!st && ffn_st_has(f, "adam.m")) {
        int64_t sP[1] = {tc->n_params};
        st = read_tensor(f, "adam.m", FFN_DTYPE_F32, 1, sP, tc->m);
        if (!st) st = read_tensor(f, "adam.v", FFN_DTYPE_F32, 1, sP, tc->v);
        if (!st) st = read_tensor(f, "last_fired", FFN_DTYPE_I64, 1, sF, tc->last_fired);
        const char *s1 = ffn_st_metadata(f, "step"), *s2 = ffn_st_metadata(f, "tokens");
        char *e1 = NULL, *e2 = NULL;
        if (!st && s1 && s2) {
            tc->step = strtoll(s1, &e1, 10);
            tc->tokens = strtoll(s2, &e2, 10);
        }
        if (!st && (!s1 || !s2 || *e1 || *e2 || tc->step < 0 || tc->tokens < 0))
            st = ffn_error(FFN_ERR_FORMAT, "%s: training state: metadata \"step\" and "
                           "\"tokens\" must be integers >= 0", path);
        if (!st) tc->has_state = 1;
    }
    ffn_st_close(f);
    if (st) {
        ffn_tc_free(tc);
        return st;
    }
    *out = tc;
    return FFN_OK;
}
