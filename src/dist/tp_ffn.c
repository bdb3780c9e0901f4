/* tp_ffn.c -- the tensor-parallel FFN layer (see include/ffn/dist.h):
 * a local ffn_layer over this rank's units and one all-reduce after
 * forward (y) and after backward (dx). */
#include "dist/dist_internal.h"

#include <stdlib.h>
#include <string.h>

struct ffn_dist_tp_layer {
    ffn_dist *d;
    ffn_layer_config full, local;
    int64_t first, count; /* units [first, first + count) of F */
    ffn_layer *layer;
    float *w;             /* the local weights, one block */
    ffn_layer_params p;
};

ffn_status ffn_dist_tp_layer_create(ffn_dist *d, ffn_ctx *ctx, const ffn_layer_config *full,
                                    ffn_dist_tp_layer **out) {
    if (!d || !ctx || !full || !out)
        return ffn_set_error(FFN_ERR_INVALID_ARG, "ffn_dist_tp_layer_create: NULL argument");
    *out = NULL;
    ffn_status st = ffn_layer_config_validate(full);
    if (st != FFN_OK) return st;
    const int64_t P = ffn_dist_size(d, FFN_DIST_TP), k = ffn_dist_rank(d, FFN_DIST_TP);
    const int64_t F = full->intermediate_size, D = full->hidden_size;
    if (F < P)
        return ffn_set_error(FFN_ERR_CONFIG,
                         "tensor parallel: intermediate_size %lld is smaller than --tp %lld (every "
                         "rank needs at least one unit)", (long long)F, (long long)P);
    ffn_dist_tp_layer *l = calloc(1, sizeof *l);
    if (!l) return ffn_set_error(FFN_ERR_NOMEM, "out of memory");
    l->d = d;
    l->full = *full;
    dist_split(F, P, k, &l->first, &l->count);
    l->local = *full;
    l->local.intermediate_size = l->count;
    const int gated = full->type == FFN_MLP_GATED, bias = full->bias;
    const int64_t Fl = l->count;
    size_t n = (size_t)((gated ? 2 : 1) * Fl * D + D * Fl + (bias ? (gated ? 2 : 1) * Fl + D : 0));
    l->w = calloc(n, sizeof(float));
    st = l->w ? ffn_layer_create(ctx, &l->local, &l->layer)
              : ffn_set_error(FFN_ERR_NOMEM, "out of memory (%zu local weights)", n);
    if (st != FFN_OK) {
        ffn_dist_tp_layer_free(l);
        return st;
    }
    float *q = l->w;
    if (gated) l->p.gate_w = q, q += Fl * D;
    l->p.up_w = q, q += Fl * D;
    l->p.down_w = q, q += D * Fl;
    if (bias) {
        if (gated) l->p.gate_b = q, q += Fl;
        l->p.up_b = q, q += Fl;
        l->p.down_b = q;
    }
    *out = l;
    return FFN_OK;
}

void ffn_dist_tp_layer_free(ffn_dist_tp_layer *l) {
    if (!l) return;
    ffn_layer_free(l->layer);
    free(l->w);
    free(l);
}

void ffn_dist_tp_layer_slice(const ffn_dist_tp_layer *l, int64_t *first, int64_t *count) {
    if (first) *first = l->first;
    if (count) *count = l->count;
}

ffn_layer *ffn_dist_tp_layer_local(ffn_dist_tp_layer *l) { return l->layer; }

ffn_status ffn_dist_tp_layer_set_weights(ffn_dist_tp_layer *l, const ffn_layer_params *w) {
    const int64_t D = l->full.hidden_size, F = l->full.intermediate_size, f0 = l->first,
                  Fl = l->count;
    const int gated = l->full.type == FFN_MLP_GATED, bias = l->full.bias;
    if (!w || !w->up_w || !w->down_w || (gated && !w->gate_w) ||
        (bias && (!w->up_b || !w->down_b || (gated && !w->gate_b))))
        return ffn_set_error(FFN_ERR_INVALID_ARG, "tensor parallel: a weight the config needs is NULL");
    if (gated) memcpy(l->p.gate_w, w->gate_w + f0 * D, (size_t)(Fl * D) * sizeof(float));
    memcpy(l->p.up_w, w->up_w + f0 * D, (size_t)(Fl * D) * sizeof(float));
    for (int64_t i = 0; i < D; i++) /* down (D, F): columns [f0, f0 + Fl) */
        memcpy(l->p.down_w + i * Fl, w->down_w + i * F + f0, (size_t)Fl * sizeof(float));
    if (bias) {
        if (gated) memcpy(l->p.gate_b, w->gate_b + f0, (size_t)Fl * sizeof(float));
        memcpy(l->p.up_b, w->up_b + f0, (size_t)Fl * sizeof(float));
        /* the output bias is added once: by tp rank 0 */
        if (ffn_dist_rank(l->d, FFN_DIST_TP) == 0)
            memcpy(l->p.down_b, w->down_b, (size_t)D * sizeof(float));
        else
            memset(l->p.down_b, 0, (size_t)D * sizeof(float));
    }
    return ffn_layer_set_weights(l->layer, &l->p);
}

size_t ffn_dist_tp_layer_workspace_size(const ffn_dist_tp_layer *l, int64_t max_n) {
    return ffn_layer_workspace_size(l->layer, max_n);
}

size_t ffn_dist_tp_layer_saved_size(const ffn_dist_tp_layer *l, int64_t n) {
    return ffn_layer_saved_size(l->layer, n);
}

ffn_status ffn_dist_tp_layer_forward(ffn_dist_tp_layer *l, float *y, const float *x, int64_t n,
                                     float *saved, void *ws, size_t ws_bytes) {
    ffn_status st = ffn_layer_forward(l->layer, y, x, n, saved, ws, ws_bytes);
    if (st == FFN_OK) st = ffn_dist_allreduce_f32(l->d, FFN_DIST_TP, y, n * l->full.hidden_size);
    return st;
}

ffn_status ffn_dist_tp_layer_backward(ffn_dist_tp_layer *l, float *dx,
                                      const ffn_layer_params *grads, const float *dy,
                                      const float *x, int64_t n, const float *saved, void *ws,
                                      size_t ws_bytes) {
    ffn_status st = ffn_layer_backward(l->layer, dx, grads, dy, x, n, saved, ws, ws_bytes);
    if (st == FFN_OK && dx)
        st = ffn_dist_allreduce_f32(l->d, FFN_DIST_TP, dx, n * l->full.hidden_size);
    return st;
}
