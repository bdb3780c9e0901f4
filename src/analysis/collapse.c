/* collapse.c -- merging a linear dense FFN into one matrix and checking the
 * merge (include/ffn/collapse.h).  The check runs the real layer (the same
 * engines as every forward) against a plain double-precision W x + b, so it
 * measures the layer's rounding, not a second implementation's. */
#include "base/common.h"
#include "ffn/collapse.h"
#include "ffn/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static ffn_status check_collapsible(const ffn_layer_config *cfg, const ffn_layer_params *p) {
    if (!cfg || !p) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_collapse: cfg or params is NULL");
    if (cfg->hidden_size <= 0 || cfg->intermediate_size <= 0)
        return ffn_error(FFN_ERR_CONFIG, "ffn_collapse: hidden_size %lld and intermediate_size "
                         "%lld must be positive", (long long)cfg->hidden_size,
                         (long long)cfg->intermediate_size);
    if (cfg->type == FFN_MLP_GATED || p->gate_w)
        return ffn_error(FFN_ERR_UNSUPPORTED,
                         "ffn_collapse: a gated layer multiplies two functions of x, so it is "
                         "quadratic in x even with a linear act: no single matrix exists");
    if (cfg->act != FFN_ACT_LINEAR)
        return ffn_error(FFN_ERR_UNSUPPORTED,
                         "ffn_collapse: hidden_act '%s' is not linear, so W_down act(W_up x) is "
                         "not linear in x: no single matrix exists", ffn_act_name(cfg->act));
    if (!p->up_w || !p->down_w || (cfg->bias && (!p->up_b || !p->down_b)))
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_collapse: up_w and down_w (and, with bias, "
                         "up_b and down_b) are required");
    return FFN_OK;
}

ffn_status ffn_collapse_merge(const ffn_layer_config *cfg, const ffn_layer_params *p, float *w,
                              float *b) {
    ffn_status st = check_collapsible(cfg, p);
    if (st != FFN_OK) return st;
    if (!w || (cfg->bias && !b))
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_collapse_merge: w (and b with bias) is NULL");
    const int64_t D = cfg->hidden_size, F = cfg->intermediate_size;
    const float *wu = p->up_w, *wd = p->down_w; /* (F, D), (D, F) */
    double *row = malloc((size_t)D * sizeof *row);
    if (!row) return ffn_error(FFN_ERR_NOMEM, "ffn_collapse_merge: out of memory");
    for (int64_t i = 0; i < D; i++) {
        /* row i of W = sum_k W_down[i][k] · W_up[k][:] */
        memset(row, 0, (size_t)D * sizeof *row);
        for (int64_t k = 0; k < F; k++) {
            double a = wd[i * F + k];
            const float *u = wu + k * D;
            for (int64_t j = 0; j < D; j++) row[j] += a * u[j];
        }
        for (int64_t j = 0; j < D; j++) w[i * D + j] = (float)row[j];
        if (cfg->bias) {
            double s = p->down_b[i];
            for (int64_t k = 0; k < F; k++) s += (double)wd[i * F + k] * p->up_b[k];
            b[i] = (float)s;
        }
    }
    free(row);
    return FFN_OK;
}

ffn_status ffn_collapse_check(ffn_ctx *ctx, const ffn_layer_config *cfg,
                              const ffn_layer_params *p, const float *w, const float *b,
                              int64_t n_inputs, uint64_t seed, ffn_collapse_result *out) {
    ffn_status st = check_collapsible(cfg, p);
    if (st != FFN_OK) return st;
    if (!ctx || !w || !out || (cfg->bias && !b) || n_inputs < 1)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_collapse_check: ctx, w (b with bias) and out "
                         "are required and n_inputs >= 1 (got %lld)", (long long)n_inputs);
    memset(out, 0, sizeof *out);
    const int64_t D = cfg->hidden_size, F = cfg->intermediate_size, S = n_inputs;
    size_t count;
    if (__builtin_mul_overflow((size_t)S, (size_t)D, &count) || count > SIZE_MAX / sizeof(float))
        return ffn_error(FFN_ERR_CONFIG, "ffn_collapse_check: %lld inputs of %lld overflow",
                         (long long)S, (long long)D);
    ffn_layer_config c = *cfg;
    c.save = FFN_SAVE_NONE;
    ffn_layer *layer = NULL;
    float *x = malloc(count * sizeof *x), *y = malloc(count * sizeof *y);
    void *ws = NULL;
    if (!x || !y) {
        st = ffn_error(FFN_ERR_NOMEM, "ffn_collapse_check: out of memory");
        goto done;
    }
    if ((st = ffn_layer_create(ctx, &c, &layer)) != FFN_OK) goto done;
    if ((st = ffn_layer_set_weights(layer, p)) != FFN_OK) goto done;
    size_t ws_bytes = ffn_layer_workspace_size(layer, S);
    ws = malloc(ws_bytes ? ws_bytes : 1);
    if (!ws) {
        st = ffn_error(FFN_ERR_NOMEM, "ffn_collapse_check: out of memory");
        goto done;
    }
    ffn_rng r;
    ffn_rng_seed(&r, seed);
    for (size_t i = 0; i < count; i++) x[i] = (float)ffn_rng_normal(&r);
    if ((st = ffn_layer_forward(layer, y, x, S, NULL, ws, ws_bytes)) != FFN_OK) goto done;
    double max_abs = 0, max_y = 0;
    for (int64_t s = 0; s < S; s++)
        for (int64_t i = 0; i < D; i++) {
            double acc = cfg->bias ? b[i] : 0.0;
            const float *wr = w + i * D, *xr = x + s * D;
            for (int64_t j = 0; j < D; j++) acc += (double)wr[j] * xr[j];
            double two = y[s * D + i], diff = fabs(two - acc);
            if (!(diff <= max_abs)) max_abs = diff; /* NaN propagates */
            if (fabs(two) > max_y) max_y = fabs(two);
        }
    double fro = 0;
    for (int64_t i = 0; i < D * D; i++) fro += (double)w[i] * w[i];
    out->max_abs_diff = max_abs;
    out->max_abs_y = max_y;
    out->max_rel_diff = max_y > 0 ? max_abs / max_y : max_abs;
    out->w_norm = sqrt(fro);
    out->params_before = 2 * D * F + (cfg->bias ? F + D : 0);
    out->params_after = D * D + (cfg->bias ? D : 0);
done:
    ffn_layer_free(layer);
    free(ws);
    free(x);
    free(y);
    return st;
}
