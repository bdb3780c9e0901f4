/* ffn.c -- the dense and gated (GLU family) feed-forward layer: config
 * checks, weights and prepacking, forward and backward, in both save modes.
 *
 * Letters: N tokens, D hidden_size, F intermediate_size, P = 2F (gated) or
 * F (dense): the width of the input projection.
 *
 * Shape of the computation.  The input projections are one product: for a
 * gated layer gate_proj and up_proj are prepacked as one (2F, D) matrix
 * W_in = [W_gate; W_up], so x · W_inᵀ yields both pre-activations in one
 * (N, 2F) row [g | u]; that row is also what forward saves for backward.
 *   forward:   GU = x·W_inᵀ + b_in       (N, P)
 *              H  = act(G) ⊙ U  | act(U) (N, F)   fused epilogue
 *              y  = H·W_downᵀ + b_down   (N, D)
 *   backward:  dW_down += dyᵀ·H,  dH = dy·W_down
 *              dGU = epilogue'(dH, GU)   (N, P)   fused, in place
 *              dx = dGU·W_in,  dW_gate/up += dGᵀ·x / dUᵀ·x
 * Small N (decode, N <= FFN_DECODE_MAX_N) takes the streaming path in
 * gemv.c instead of the matrix engine: each weight is read once, the
 * epilogue is fused into the projection, and every output element is one
 * dot product computed by one thread in a fixed order.
 *
 * Determinism (measured by tests/unit/test_layer.c and test_kernels.c):
 *   - every path is bitwise reproducible run to run at a fixed thread count;
 *   - the decode path (forward with N <= FFN_DECODE_MAX_N), the activation
 *     epilogues and the bias gradients give bitwise identical results at
 *     every thread count (fixed per-element reduction order);
 *   - the matrix-engine path (oneDNN 2.6 sgemm) is NOT bitwise identical
 *     across thread counts: oneDNN splits the K dimension differently with
 *     the thread count for some shapes (e.g. the weight gradients, whose K
 *     is N).  Differences are at rounding level (~1e-7 relative).
 *
 * Memory: forward and backward never allocate.  The workspace holds, for
 * up to N tokens, GU or dGU (N, P) and H or dH (N, F): 3·N·F floats gated,
 * 2·N·F dense, the same for both save modes (recompute writes the
 * recomputed GU into the dGU buffer and turns it into dGU in place).
 * ffn_gemm (dnnl_sgemm) allocates its packing buffers inside oneDNN. */
#include "common.h"
#include "kernels/kernels.h"

#include <string.h>

struct ffn_layer {
    ffn_ctx *ctx;
    ffn_layer_config cfg;
    int gated;
    int64_t D, F, P;
    int have_weights;
    const float *w_in;    /* (P, D): [W_gate; W_up] (owned copy) or W_up (caller's) */
    const float *b_in;    /* (P) or NULL */
    const float *w_down;  /* (D, F), caller's */
    const float *b_down;  /* (D) or NULL, caller's */
    float *w_in_owned;    /* (2F, D) when gated */
    float *b_in_owned;    /* (2F) when gated with bias */
};

/* ---- config ------------------------------------------------------------- */

ffn_status ffn_layer_config_validate(const ffn_layer_config *cfg) {
    if (!cfg) return ffn_error(FFN_ERR_INVALID_ARG, "layer config: NULL");
    if (cfg->hidden_size <= 0)
        return ffn_error(FFN_ERR_CONFIG, "hidden_size: expected a positive integer, got %lld",
                         (long long)cfg->hidden_size);
    if (cfg->intermediate_size <= 0)
        return ffn_error(FFN_ERR_CONFIG,
                         "intermediate_size: expected a positive integer, got %lld",
                         (long long)cfg->intermediate_size);
    int64_t df, bytes;
    if (ffn_mul_i64(cfg->hidden_size, cfg->intermediate_size, &df) ||
        ffn_mul_i64(df, 3 * (int64_t)sizeof(float), &bytes))
        return ffn_error(FFN_ERR_OVERFLOW,
                         "hidden_size × intermediate_size: %lld × %lld overflows 64 bits "
                         "(3·D·F fp32 weights must fit)",
                         (long long)cfg->hidden_size, (long long)cfg->intermediate_size);
    if ((int)cfg->act < FFN_ACT_LINEAR || (int)cfg->act > FFN_ACT_SIGMOID)
        return ffn_error(FFN_ERR_CONFIG, "hidden_act: invalid enum value %d (expected 0..%d)",
                         (int)cfg->act, (int)FFN_ACT_SIGMOID);
    if ((int)cfg->type < FFN_MLP_AUTO || (int)cfg->type > FFN_MLP_GATED)
        return ffn_error(FFN_ERR_CONFIG, "mlp_type: invalid enum value %d (expected 0..%d)",
                         (int)cfg->type, (int)FFN_MLP_GATED);
    if ((int)cfg->save < FFN_SAVE_ACTIVATIONS || (int)cfg->save > FFN_SAVE_NONE)
        return ffn_error(FFN_ERR_CONFIG, "save mode: invalid enum value %d (expected 0..%d)",
                         (int)cfg->save, (int)FFN_SAVE_NONE);
    return FFN_OK;
}

int64_t ffn_layer_num_params(const ffn_layer_config *cfg) {
    if (ffn_layer_config_validate(cfg)) return -1;
    int64_t D = cfg->hidden_size, F = cfg->intermediate_size, n;
    int gated = cfg->type == FFN_MLP_GATED;
    n = (gated ? 3 : 2) * D * F; /* validate bounded 3·D·F·4 */
    if (cfg->bias) n += (gated ? 2 * F : F) + D;
    return n;
}

int64_t ffn_layer_flops_per_token(const ffn_layer_config *cfg) {
    if (ffn_layer_config_validate(cfg)) return -1;
    int64_t D = cfg->hidden_size, F = cfg->intermediate_size;
    return (cfg->type == FFN_MLP_GATED ? 6 : 4) * D * F;
}

/* ---- create / free / weights -------------------------------------------- */

ffn_status ffn_layer_create(ffn_ctx *ctx, const ffn_layer_config *cfg, ffn_layer **out) {
    if (!out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_layer_create: out is NULL");
    *out = NULL;
    if (!ctx) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_layer_create: ctx is NULL");
    ffn_status st = ffn_layer_config_validate(cfg);
    if (st) return st;
    if (cfg->type != FFN_MLP_DENSE && cfg->type != FFN_MLP_GATED)
        return ffn_error(FFN_ERR_CONFIG,
                         "mlp_type: 'auto' must be resolved to 'dense' or 'gated' before "
                         "creating a layer");
    ffn_layer *l = calloc(1, sizeof *l);
    if (!l) return ffn_error(FFN_ERR_NOMEM, "ffn_layer_create: out of memory");
    l->ctx = ctx;
    l->cfg = *cfg;
    l->gated = cfg->type == FFN_MLP_GATED;
    l->D = cfg->hidden_size;
    l->F = cfg->intermediate_size;
    l->P = l->gated ? 2 * l->F : l->F;
    *out = l;
    return FFN_OK;
}

void ffn_layer_free(ffn_layer *l) {
    if (!l) return;
    ffn_free_aligned(l->w_in_owned);
    ffn_free_aligned(l->b_in_owned);
    free(l);
}

const ffn_layer_config *ffn_layer_get_config(const ffn_layer *l) { return l ? &l->cfg : NULL; }

ffn_status ffn_layer_set_weights(ffn_layer *l, const ffn_layer_params *w) {
    if (!l || !w) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_layer_set_weights: NULL argument");
    ffn_ctx_enter(l->ctx);
    const char *missing = NULL;
    if (l->gated && !w->gate_w) missing = "gate_proj.weight";
    else if (!w->up_w) missing = "up_proj.weight";
    else if (!w->down_w) missing = "down_proj.weight";
    else if (l->cfg.bias && l->gated && !w->gate_b) missing = "gate_proj.bias";
    else if (l->cfg.bias && !w->up_b) missing = "up_proj.bias";
    else if (l->cfg.bias && !w->down_b) missing = "down_proj.bias";
    if (missing)
        return ffn_error(FFN_ERR_MISSING, "ffn_layer_set_weights: %s is NULL (%s layer%s)",
                         missing, l->gated ? "gated" : "dense", l->cfg.bias ? " with bias" : "");
    l->have_weights = 0;
    int64_t D = l->D, F = l->F;
    if (l->gated) {
        size_t half = (size_t)F * (size_t)D; /* validated: 3·D·F·4 fits */
        if (!l->w_in_owned) {
            l->w_in_owned = ffn_malloc_aligned(2 * half * sizeof(float));
            if (!l->w_in_owned)
                return ffn_error(FFN_ERR_NOMEM, "ffn_layer_set_weights: out of memory for "
                                                "the packed (2F, D) input projection");
        }
        memcpy(l->w_in_owned, w->gate_w, half * sizeof(float));
        memcpy(l->w_in_owned + half, w->up_w, half * sizeof(float));
        l->w_in = l->w_in_owned;
        if (l->cfg.bias) {
            if (!l->b_in_owned) {
                l->b_in_owned = ffn_malloc_aligned(2 * (size_t)F * sizeof(float));
                if (!l->b_in_owned)
                    return ffn_error(FFN_ERR_NOMEM, "ffn_layer_set_weights: out of memory");
            }
            memcpy(l->b_in_owned, w->gate_b, (size_t)F * sizeof(float));
            memcpy(l->b_in_owned + F, w->up_b, (size_t)F * sizeof(float));
            l->b_in = l->b_in_owned;
        } else {
            l->b_in = NULL;
        }
    } else {
        l->w_in = w->up_w;
        l->b_in = l->cfg.bias ? w->up_b : NULL;
    }
    l->w_down = w->down_w;
    l->b_down = l->cfg.bias ? w->down_b : NULL;
    l->have_weights = 1;
    return FFN_OK;
}

/* ---- sizes ---------------------------------------------------------------- */

/* Floats of workspace for n tokens: GU or dGU (n, P) and H or dH (n, F). */
static int workspace_floats(const ffn_layer *l, int64_t n, size_t *out) {
    size_t per_token = (size_t)(l->P + l->F);
    return ffn_mul_size((size_t)n, per_token, out);
}

size_t ffn_layer_workspace_size(const ffn_layer *l, int64_t max_n) {
    if (!l || max_n < 0) return 0;
    size_t floats, bytes;
    if (workspace_floats(l, max_n, &floats) || ffn_mul_size(floats, sizeof(float), &bytes) ||
        ffn_add_size(bytes, 2 * 64, &bytes))
        return SIZE_MAX;
    return bytes;
}

size_t ffn_layer_saved_size(const ffn_layer *l, int64_t n) {
    if (!l || n < 0 || l->cfg.save == FFN_SAVE_NONE) return 0;
    size_t floats, bytes;
    if (ffn_mul_size((size_t)n, (size_t)l->P, &floats) ||
        ffn_mul_size(floats, sizeof(float), &bytes))
        return SIZE_MAX;
    return bytes;
}

/* Carve the workspace: gu (n, P) then h (n, F), each 64-byte aligned. */
static ffn_status carve(const ffn_layer *l, const char *fn, int64_t n, void *ws,
                        size_t ws_bytes, float **gu, float **h) {
    size_t need = ffn_layer_workspace_size(l, n);
    if (!ws || ws_bytes < need)
        return ffn_error(FFN_ERR_WORKSPACE, "%s: workspace of %zu bytes%s, %lld tokens need %zu",
                         fn, ws_bytes, ws ? "" : " (NULL)", (long long)n, need);
    uintptr_t p = ((uintptr_t)ws + 63) & ~(uintptr_t)63;
    *gu = (float *)p;
    *h = (float *)(p + ffn_align64((size_t)n * (size_t)l->P * sizeof(float)));
    return FFN_OK;
}

/* ---- parallel elementwise helpers ----------------------------------------
 * Split (rows × cols) into blocks of at most EW_BLOCK columns so that even
 * one row spreads over the threads; elementwise, hence the same result for
 * any split. */
enum { EW_BLOCK = 2048 };
/* Below this many elements a parallel region costs more than it saves. */
#define PAR_MIN_ELEMS 16384

/* rows of gu (ld P): [g | u] or [u] -> h (ld F) */
static void epilogue_forward(const ffn_layer *l, float *h, const float *gu, int64_t n) {
    int64_t F = l->F, P = l->P, nb = (F + EW_BLOCK - 1) / EW_BLOCK, total = n * nb;
    ffn_act act = l->cfg.act;
    int gated = l->gated;
#pragma omp parallel for schedule(static) if (n * F >= PAR_MIN_ELEMS)
    for (int64_t b = 0; b < total; b++) {
        int64_t r = b / nb, c0 = (b % nb) * EW_BLOCK, len = F - c0 < EW_BLOCK ? F - c0 : EW_BLOCK;
        const float *row = gu + r * P;
        if (gated) ffn_glu_fwd(act, h + r * F + c0, row + c0, row + F + c0, len);
        else ffn_act_fwd(act, h + r * F + c0, row + c0, len);
    }
}

/* dgu (ld P) = epilogue'(dh (ld F), gu (ld P)); dgu may equal gu. */
static void epilogue_backward(const ffn_layer *l, float *dgu, const float *dh, const float *gu,
                              int64_t n) {
    int64_t F = l->F, P = l->P, nb = (F + EW_BLOCK - 1) / EW_BLOCK, total = n * nb;
    ffn_act act = l->cfg.act;
    int gated = l->gated;
#pragma omp parallel for schedule(static) if (n * F >= PAR_MIN_ELEMS)
    for (int64_t b = 0; b < total; b++) {
        int64_t r = b / nb, c0 = (b % nb) * EW_BLOCK, len = F - c0 < EW_BLOCK ? F - c0 : EW_BLOCK;
        const float *row = gu + r * P;
        float *drow = dgu + r * P;
        if (gated)
            ffn_glu_bwd(act, drow + c0, drow + F + c0, dh + r * F + c0, row + c0, row + F + c0,
                        len);
        else ffn_act_bwd(act, drow + c0, dh + r * F + c0, row + c0, len);
    }
}

/* y (n, ld) += b (cols) on every row */
static void add_bias_rows(float *y, const float *b, int64_t n, int64_t cols, int64_t ld) {
    int64_t nb = (cols + EW_BLOCK - 1) / EW_BLOCK, total = n * nb;
#pragma omp parallel for schedule(static) if (n * cols >= PAR_MIN_ELEMS)
    for (int64_t i = 0; i < total; i++) {
        int64_t r = i / nb, c0 = (i % nb) * EW_BLOCK;
        int64_t len = cols - c0 < EW_BLOCK ? cols - c0 : EW_BLOCK;
        ffn_add_bias(y + r * ld + c0, b + c0, len);
    }
}

/* db (cols) += Σ_rows dy (n, ld): each column summed in row order in double
 * by one thread, so the result does not depend on the thread count. */
static void bias_grad(float *db, const float *dy, int64_t n, int64_t cols, int64_t ld) {
    enum { CB = 256 };
    int64_t nb = (cols + CB - 1) / CB;
#pragma omp parallel for schedule(static) if (n * cols >= PAR_MIN_ELEMS)
    for (int64_t b = 0; b < nb; b++) {
        int64_t c0 = b * CB, len = cols - c0 < CB ? cols - c0 : CB;
        double acc[CB];
        for (int64_t j = 0; j < len; j++) acc[j] = 0.0;
        for (int64_t r = 0; r < n; r++) {
            const float *row = dy + r * ld + c0;
            for (int64_t j = 0; j < len; j++) acc[j] += row[j];
        }
        for (int64_t j = 0; j < len; j++) db[c0 + j] += (float)acc[j];
    }
}

/* gu (n, P) = x · W_inᵀ + b_in, by the same kernels as forward (so that
 * recompute reproduces the saved values bit for bit) */
static ffn_status project_in(const ffn_layer *l, float *gu, const float *x, int64_t n) {
    if (n <= FFN_DECODE_MAX_N) {
        ffn_gemv_mt(l->ctx, gu, l->P, l->w_in, l->D, x, l->D, n, l->P);
    } else {
        ffn_status st = ffn_gemm(l->ctx, 0, 1, n, l->P, l->D, 1.0f, x, l->D, l->w_in, l->D,
                                 0.0f, gu, l->P);
        if (st) return st;
    }
    if (l->b_in) add_bias_rows(gu, l->b_in, n, l->P, l->P);
    return FFN_OK;
}

static ffn_status check_call(const ffn_layer *l, const char *fn, int64_t n) {
    if (!l) return ffn_error(FFN_ERR_INVALID_ARG, "%s: layer is NULL", fn);
    if (n < 0)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: n = %lld tokens (expected >= 0)", fn,
                         (long long)n);
    if (!l->have_weights)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: no weights (call ffn_layer_set_weights)", fn);
    return FFN_OK;
}

/* ---- forward -------------------------------------------------------------- */

ffn_status ffn_layer_forward(ffn_layer *l, float *y, const float *x, int64_t n, float *saved,
                             void *workspace, size_t workspace_bytes) {
    ffn_status st = check_call(l, "ffn_layer_forward", n);
    if (st) return st;
    if (n == 0) return FFN_OK;
    ffn_ctx_enter(l->ctx);
    if (!y || !x) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_layer_forward: y or x is NULL");
    if (y == x) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_layer_forward: y must not alias x");
    float *gu, *h;
    st = carve(l, "ffn_layer_forward", n, workspace, workspace_bytes, &gu, &h);
    if (st) return st;
    if (l->cfg.save == FFN_SAVE_ACTIVATIONS && saved) gu = saved;

    int64_t D = l->D, F = l->F;
    if (n <= FFN_DECODE_MAX_N)
        return ffn_decode_forward(l->ctx, y, gu, h, x, n, D, F, l->gated, l->cfg.act, l->w_in,
                                  l->b_in, l->w_down, l->b_down);
    st = project_in(l, gu, x, n); /* (n, P) */
    if (st) return st;
    epilogue_forward(l, h, gu, n); /* (n, F) */
    st = ffn_gemm(l->ctx, 0, 1, n, D, F, 1.0f, h, F, l->w_down, F, 0.0f, y, D);
    if (st) return st;
    if (l->b_down) add_bias_rows(y, l->b_down, n, D, D);
    return FFN_OK;
}

/* ---- backward ------------------------------------------------------------- */

ffn_status ffn_layer_backward(ffn_layer *l, float *dx, const ffn_layer_params *grads,
                              const float *dy, const float *x, int64_t n, const float *saved,
                              void *workspace, size_t workspace_bytes) {
    ffn_status st = check_call(l, "ffn_layer_backward", n);
    if (st) return st;
    if (n == 0) return FFN_OK;
    ffn_ctx_enter(l->ctx);
    if (!dy || !x) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_layer_backward: dy or x is NULL");
    if (l->cfg.save == FFN_SAVE_ACTIVATIONS && !saved)
        return ffn_error(FFN_ERR_INVALID_ARG,
                         "ffn_layer_backward: saved is NULL but the layer's save mode is "
                         "'activations' (pass what forward wrote, or use FFN_SAVE_NONE)");
    static const ffn_layer_params none;
    const ffn_layer_params *g = grads ? grads : &none;
    float *dgu, *h;
    st = carve(l, "ffn_layer_backward", n, workspace, workspace_bytes, &dgu, &h);
    if (st) return st;
    int64_t D = l->D, F = l->F, P = l->P;

    /* GU (n, P): saved by forward, or recomputed into the dGU buffer */
    const float *gu = saved;
    if (l->cfg.save == FFN_SAVE_NONE) {
        st = project_in(l, dgu, x, n);
        if (st) return st;
        gu = dgu;
    }

    /* down_proj: dW_down (D, F) += dyᵀ · H, db_down += Σ dy */
    if (g->down_w) {
        epilogue_forward(l, h, gu, n);
        st = ffn_gemm(l->ctx, 1, 0, D, F, n, 1.0f, dy, D, h, F, 1.0f, g->down_w, F);
        if (st) return st;
    }
    if (g->down_b) bias_grad(g->down_b, dy, n, D, D);

    /* dH (n, F) = dy · W_down, then dGU (n, P) = epilogue'(dH, GU) */
    st = ffn_gemm(l->ctx, 0, 0, n, F, D, 1.0f, dy, D, l->w_down, F, 0.0f, h, F);
    if (st) return st;
    epilogue_backward(l, dgu, h, gu, n);

    /* dx (n, D) = dGU · W_in */
    if (dx) {
        st = ffn_gemm(l->ctx, 0, 0, n, D, P, 1.0f, dgu, P, l->w_in, D, 0.0f, dx, D);
        if (st) return st;
    }
    /* input projections: dW += dGᵀ · x, db += Σ dG (gate), likewise up */
    float *dw_first = l->gated ? g->gate_w : g->up_w, *db_first = l->gated ? g->gate_b : g->up_b;
    if (dw_first) {
        st = ffn_gemm(l->ctx, 1, 0, F, D, n, 1.0f, dgu, P, x, D, 1.0f, dw_first, D);
        if (st) return st;
    }
    if (db_first) bias_grad(db_first, dgu, n, F, P);
    if (l->gated) {
        if (g->up_w) {
            st = ffn_gemm(l->ctx, 1, 0, F, D, n, 1.0f, dgu + F, P, x, D, 1.0f, g->up_w, D);
            if (st) return st;
        }
        if (g->up_b) bias_grad(g->up_b, dgu + F, n, F, P);
    }
    return FFN_OK;
}
