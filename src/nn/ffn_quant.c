/* ffn_quant.c -- the FFN layer's forward over low-precision weights (see
 * ffn_quant.h): the weights, the decode path with the epilogue fused per
 * block of neurons, and the batch path.  The entry points that switch a
 * layer to these weights live in ffn.c (ffn_layer_set_qweights) and moe.c
 * (ffn_moe_set_qweights); this file holds no fp32 copy of anything.
 *
 * Letters: n rows of the call, D hidden, F intermediate, P = 2F (gated) or
 * F (dense), BF the neurons of one decode block.
 *
 * Rounding: the epilogue runs on spans that start at multiples of 64
 * columns in both paths, so the SIMD kernels split every span into vectors
 * and a tail at the same columns, and the decode and batch paths give the
 * same m bit for bit when the products agree. */
#include "nn/ffn_quant.h"
#include "nn/ffn_ew.h"
#include "nn/ffn_backend.h"
#include "kernels/kernels.h"

#include <stdlib.h>
#include <string.h>

struct ffn_qlayer {
    ffn_layer_config cfg;
    int gated;
    int64_t D, F, P;
    ffn_layer_qweights w;
};

/* Neurons per decode block: 64 gate rows and 64 up rows of a q4_0 layer of
 * D = 4096 are 288 KiB, about what one core's L2 keeps. */
enum { QBLOCK_F = 64, QSPAN = 2048 };

static ffn_status check_weight(const ffn_qweight *w, const char *name, int64_t rows,
                               int64_t cols) {
    if (!w->data && rows && cols)
        return ffn_error(FFN_ERR_MISSING, "ffn_layer_set_qweights: %s has no data", name);
    if (w->rows != rows || w->cols != cols)
        return ffn_error(FFN_ERR_SHAPE, "ffn_layer_set_qweights: %s: expected (%lld, %lld), "
                         "got (%lld, %lld)", name, (long long)rows, (long long)cols,
                         (long long)w->rows, (long long)w->cols);
    return FFN_OK;
}

ffn_status ffn_qlayer_create(const ffn_layer_config *cfg, const ffn_layer_qweights *w,
                             ffn_qlayer **out) {
    if (!cfg || !w || !out)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_layer_set_qweights: NULL argument");
    *out = NULL;
    const int gated = cfg->type == FFN_MLP_GATED;
    const int64_t D = cfg->hidden_size, F = cfg->intermediate_size;
    ffn_status st;
    if ((gated && (st = check_weight(&w->gate, "gate_proj.weight", F, D))) ||
        (st = check_weight(&w->up, "up_proj.weight", F, D)) ||
        (st = check_weight(&w->down, "down_proj.weight", D, F)))
        return st;
    const char *missing = NULL;
    if (cfg->bias && gated && !w->gate_b) missing = "gate_proj.bias";
    else if (cfg->bias && !w->up_b) missing = "up_proj.bias";
    else if (cfg->bias && !w->down_b) missing = "down_proj.bias";
    if (missing)
        return ffn_error(FFN_ERR_MISSING, "ffn_layer_set_qweights: %s is NULL", missing);
    ffn_qlayer *q = calloc(1, sizeof *q);
    if (!q) return ffn_error(FFN_ERR_NOMEM, "ffn_layer_set_qweights: out of memory");
    q->cfg = *cfg;
    q->gated = gated;
    q->D = D;
    q->F = F;
    q->P = gated ? 2 * F : F;
    q->w = *w;
    q->w.gate.packed = q->w.up.packed = q->w.down.packed = NULL;
    if (!gated) memset(&q->w.gate, 0, sizeof q->w.gate), q->w.gate_b = NULL;
    if (!cfg->bias) q->w.gate_b = q->w.up_b = q->w.down_b = NULL;
    *out = q;
    return FFN_OK;
}

void ffn_qlayer_free(ffn_qlayer *q) { free(q); }

/* Rows [r0, r0 + count) of w, as a weight of their own. */
static ffn_qweight rows_of(const ffn_qweight *w, int64_t r0, int64_t count) {
    ffn_qweight s = *w;
    s.rows = count;
    s.data = w->data + (size_t)r0 * w->row_bytes;
    s.packed = NULL;
    return s;
}

/* h[r, c0..c0+len) = epilogue of gu's row r on those columns, plus the
 * input biases first. */
static void epilogue_span(const ffn_qlayer *q, float *gu, float *h, int64_t r, int64_t c0,
                          int64_t len) {
    const int64_t F = q->F, P = q->P;
    float *g = gu + r * P + c0, *u = q->gated ? g + F : g;
    if (q->gated && q->w.gate_b) ffn_add_bias(g, q->w.gate_b + c0, len);
    if (q->w.up_b) ffn_add_bias(u, q->w.up_b + c0, len);
    if (q->gated) ffn_glu_fwd(q->cfg.act, h + r * F + c0, g, u, len);
    else ffn_act_fwd(q->cfg.act, h + r * F + c0, u, len);
}

/* gu = x·W_inᵀ (no bias yet), both products over all rows */
static ffn_status project_in(const ffn_qlayer *q, const ffn_ctx *ctx, float *gu, const float *x,
                             int64_t n) {
    ffn_status st;
    if (q->gated && (st = ffn_qgemm(ctx, &q->w.gate, x, q->D, n, gu, q->P, 0))) return st;
    return ffn_qgemm(ctx, &q->w.up, x, q->D, n, q->gated ? gu + q->F : gu, q->P, 0);
}

static ffn_status project_down(const ffn_qlayer *q, const ffn_ctx *ctx, float *y, const float *h,
                               int64_t n) {
    ffn_status st = ffn_qgemm(ctx, &q->w.down, h, q->F, n, y, q->D, 0);
    if (st || !q->w.down_b) return st;
    for (int64_t r = 0; r < n; r++) ffn_add_bias(y + r * q->D, q->w.down_b, q->D);
    return FFN_OK;
}

/* The decode path's first half: per block of BF neurons (in parallel), the
 * block's gate and up rows against every row of x, then its epilogue. */
static ffn_status decode_in(const ffn_qlayer *q, const ffn_ctx *ctx, float *gu, float *h,
                            const float *x, int64_t n) {
    const int64_t F = q->F, P = q->P, D = q->D, nb = (F + QBLOCK_F - 1) / QBLOCK_F;
    ffn_status first = FFN_OK;
#pragma omp parallel for schedule(dynamic, 4) if (nb > 1 && n * F * D >= ((int64_t)1 << 18))
    for (int64_t b = 0; b < nb; b++) {
        const int64_t f0 = b * QBLOCK_F, len = F - f0 < QBLOCK_F ? F - f0 : QBLOCK_F;
        ffn_status st = FFN_OK;
        if (q->gated) {
            ffn_qweight g = rows_of(&q->w.gate, f0, len);
            st = ffn_qgemm(ctx, &g, x, D, n, gu + f0, P, 0);
        }
        if (!st) {
            ffn_qweight u = rows_of(&q->w.up, f0, len);
            st = ffn_qgemm(ctx, &u, x, D, n, (q->gated ? gu + F : gu) + f0, P, 0);
        }
        if (st) {
#pragma omp critical(ffn_qlayer_error)
            if (!first) first = st;
            continue;
        }
        for (int64_t r = 0; r < n; r++) epilogue_span(q, gu, h, r, f0, len);
    }
    return first;
}

ffn_status ffn_qlayer_forward(const ffn_qlayer *q, const ffn_ctx *ctx, float *y, float *gu,
                              float *h, const float *x, int64_t n, const ffn_neuron_hook *writer,
                              const ffn_hook_rows *rows) {
    ffn_status st;
    if (!writer && n <= FFN_DECODE_MAX_N) {
        if ((st = decode_in(q, ctx, gu, h, x, n))) return st;
        return project_down(q, ctx, y, h, n);
    }
    if ((st = project_in(q, ctx, gu, x, n))) return st;
    const int64_t nspan = (q->F + QSPAN - 1) / QSPAN, total = n * nspan;
    if (writer) {
        /* the hook sees gu with its biases, before the epilogue */
        if (q->gated && q->w.gate_b) ffn_ew_add_bias_rows(gu, q->w.gate_b, n, q->F, q->P);
        if (q->w.up_b) ffn_ew_add_bias_rows(q->gated ? gu + q->F : gu, q->w.up_b, n, q->F, q->P);
        writer->fn(writer->user, FFN_HOOK_GU, gu, n, rows);
        ffn_ew_epilogue(q->cfg.act, q->gated, q->F, h, NULL, gu, n);
        writer->fn(writer->user, FFN_HOOK_H, h, n, rows);
    } else {
#pragma omp parallel for schedule(static) if (n * q->F >= 16384)
        for (int64_t i = 0; i < total; i++) {
            const int64_t r = i / nspan, c0 = (i % nspan) * QSPAN;
            epilogue_span(q, gu, h, r, c0, q->F - c0 < QSPAN ? q->F - c0 : QSPAN);
        }
    }
    return project_down(q, ctx, y, h, n);
}

/* ---- as a back-end of the layer (nn/ffn_backend.h): forward only ---------------- */

static ffn_status be_forward(void *impl, const ffn_ctx *ctx, float *y, float *gu, float *h,
                             const float *x, int64_t n, void *ws, size_t ws_bytes,
                             const ffn_neuron_hook *writer, const ffn_hook_rows *rows) {
    (void)ws, (void)ws_bytes; /* ffn_qgemm keeps its scratch per thread */
    return ffn_qlayer_forward(impl, ctx, y, gu, h, x, n, writer, rows);
}

const ffn_layer_backend ffn_layer_backend_ggml = {
    .name = "ggml", .weights = "low-precision", .forward = be_forward};
