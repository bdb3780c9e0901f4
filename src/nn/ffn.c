/* ffn.c -- the dense and gated (GLU family) feed-forward layer: config
 * checks, weights and prepacking, forward and backward, in both save modes.
 *
 * Letters: N tokens, D hidden_size, F intermediate_size, P = 2F (gated) or
 * F (dense): the width of the input projection W_in = [W_gate; W_up] or W_up.
 *
 * Shape of the computation.  The input projections are one product: for a
 * gated layer gate_proj and up_proj are packed as one (2F, D) matrix, so
 * x · W_inᵀ yields both pre-activations in one (N, 2F) row [g | u]; that
 * row is also what forward saves for backward.
 *   forward:   GU = x·W_inᵀ + b_in       (N, P)   product F1
 *              H  = act(G) ⊙ U  | act(U) (N, F)   fused epilogue
 *              y  = H·W_downᵀ + b_down   (N, D)   product F2
 *   backward:  dW_down += dyᵀ·H          (D, F)   weight_grad
 *              dH = dy·W_down            (N, F)   product B1
 *              dGU = epilogue'(dH, GU)   (N, P)   fused, in place
 *              dx = dGU·W_in             (N, D)   product B2
 *              dW_gate += dGᵀ·x, dW_up += dUᵀ·x   weight_grad (twice)
 *
 * Products.  The layer holds two projections (nn/ffn_prod.h): W_in (P, D)
 * in one or two parts and W_down (D, F).  The number type of each picks
 * its back-end -- fp32 masters, fp32 masters computed in bf16
 * (FFN_PRECISION_BF16), or any type the type table computes with
 * (ffn_layer_set_qweights, forward only) -- and this file runs the one
 * algorithm above over them for every type: the epilogue, the biases'
 * gradients, the taps' hook and the save modes are written once, here.
 * One fused forward path takes small n where both projections allow:
 * gemv.c's streaming kernel over both fp32 projections.  The ggml kind
 * runs each projection as one ffn_qgemm call at every n (its activations
 * quantized once per call; decode once took blocks of 64 neurons, 256
 * calls per layer that quantized x again each time, 6% of a q4_0 decode).
 *
 * Engines of the fp32 kind (chosen by measurement, see gemv.c and bench/;
 * they live in ffn_prod.c).  Forward with
 * N <= ffn_stream_max_n (decode and small batches: 64 with AVX-512 or
 * AVX2, table in gemv.c) takes the streaming path in gemv.c: each weight read once,
 * the epilogue fused per column block; with AVX-512 it streams the
 * engine's packed weights, else the caller's plain rows.
 * Larger N runs F1, F2, B1, B2 on oneDNN matmul primitives (matmul.c,
 * brgemm) over prepacked weights: ffn_layer_set_weights packs W_in and
 * W_down as the forward products want them (1x the weight bytes extra), and
 * the first backward packs them again as backward wants them (another 1x;
 * set_weights then repacks both).  The weight gradients (K = N, small)
 * run on ffn_wgrad (kernels/wgrad.c: register tiles over all of K, dW read
 * and written once) up to WGRAD_MAX_N tokens, else on ffn_gemm
 * (dnnl_sgemm), measured faster there than the matmul primitive (see
 * WGRAD_MAX_N in ffn_prod.c).
 * Primitives are made per token count and cached (PROD_SLOTS per
 * projection).
 * A product whose primitive cannot be made, or whose scratchpad does not
 * fit the workspace, runs on ffn_gemm over the caller's plain weights
 * instead -- the same numbers within rounding.
 *
 * Taps.  ffn_layer_forward_hooked (src/nn/ffn_hook.h) shows the model's
 * taps gu and h between the epilogue and the down projection: after the
 * usual path when the hook only reads, on the unfused path (streaming
 * sizes: the streaming input and down projections, the same bits as the
 * fused kernel) when it writes.
 *
 * Determinism (measured by tests/unit/test_layer.c and test_kernels.c):
 *   - every path is bitwise reproducible run to run at a fixed thread count;
 *   - both save modes give bitwise identical results (recompute runs the
 *     same primitive or kernel as forward);
 *   - the streaming path (forward with N <= ffn_stream_max_n), the activation
 *     epilogues, the bias gradients and ffn_wgrad (each dW element one
 *     k-ordered sum) give bitwise identical results at every thread count
 *     (fixed per-element reduction order; for dW that holds for its inputs
 *     given: dH comes from a oneDNN product), and so does
 *     the packed streaming kernel against brgemm (both k-ordered sums);
 *   - the oneDNN products (brgemm matmul, sgemm) agreed bitwise between 1
 *     and 2 threads in every shape the tests and the PyTorch parity test
 *     tried (test_layer prints it), but oneDNN does not promise it (sgemm
 *     may split K by thread count), so the library promises it only for
 *     the streaming path.
 *
 * Memory and allocation.  The workspace holds, for N tokens, GU or dGU
 * (N, P) and H or dH (N, F) -- 3·N·F floats gated, 2·N·F dense, the same
 * for both save modes (recompute writes the recomputed GU into the dGU
 * buffer and turns it into dGU in place) -- plus 2 MiB or more for
 * oneDNN's scratchpad (user mode: it comes from the workspace).  This file
 * never allocates in forward or backward, except when it first meets a
 * token count (primitives; ffn_layer_workspace_size(max_n) makes those for
 * max_n ahead) and at the first backward (the backward packs).  oneDNN
 * itself does allocate inside calls, measured with an allocation counter
 * at (1024, 2816): decode forward 0 allocations; engine forward 12 small
 * bookkeeping objects per call (primitive execution); backward 27-33, the
 * largest dnnl_sgemm's packing buffers (up to ~3 MB at N = 512; ffn_wgrad,
 * which takes the weight gradients up to WGRAD_MAX_N tokens, packs on the
 * stack and allocates nothing).  The
 * public oneDNN 2.6 API offers no way to hand those to the caller. */
#include "ffn/layer.h"
#include "base/common.h"
#include "kernels/kernels.h"
#include "kernels/bf16.h"
#include "nn/ffn_ew.h"
#include "nn/ffn_hook.h"
#include "nn/ffn_prod.h"
#include "nn/ffn_quant.h"

#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

struct ffn_layer {
    ffn_ctx *ctx;
    ffn_layer_config cfg;
    int gated;
    int64_t D, F, P;
    int have_weights;
    const float *b_in;   /* (P): [b_gate; b_up] (owned) or b_up, NULL without bias */
    const float *b_down; /* (D) or NULL */
    float *b_in_owned;   /* (2F) gated with bias */
    ffn_mm_engine *engine; /* oneDNN's, for the fp32 and bf16 kinds (NULL: ffn_gemm) */
    ffn_prod *in, *down;   /* W_in (P, D) = [W_gate; W_up] or W_up, W_down (D, F) */
    size_t scratch_reserve; /* bytes of scratchpad workspace_size() adds */
};

/* Calls below this many multiply-adds run on one thread: waking the others
 * costs more than it saves (and far more on an oversubscribed machine).
 * The choice depends on n alone, so a token count always runs (and its
 * primitives are made) at the same thread count. */
#define LAYER_PAR_MIN_MACS ((int64_t)1 << 20)

static int enter_threads(const ffn_layer *l, int64_t n) {
    ffn_ctx_enter(l->ctx);
#ifdef _OPENMP
    int threads = omp_get_max_threads();
    if (threads > 1 && n * l->P * l->D < LAYER_PAR_MIN_MACS) {
        omp_set_num_threads(1);
        return threads;
    }
#endif
    (void)n;
    return 0;
}
static void leave_threads(int saved) {
#ifdef _OPENMP
    if (saved) omp_set_num_threads(saved);
#else
    (void)saved;
#endif
}

/* leave_threads, then the call's status: the end of every entry point. */
static ffn_status end_call(int saved, ffn_status st) {
    leave_threads(saved);
    return st;
}

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
    /* the enums, each 0..its last value */
    const struct { const char *name; int v, last; } enums[] = {
        {"hidden_act", (int)cfg->act, FFN_ACT_SIGMOID},
        {"mlp_type", (int)cfg->type, FFN_MLP_GATED},
        {"save mode", (int)cfg->save, FFN_SAVE_NONE},
        {"precision", (int)cfg->precision, FFN_PRECISION_BF16}};
    _Static_assert(FFN_ACT_LINEAR == 0 && FFN_MLP_AUTO == 0 && FFN_SAVE_ACTIVATIONS == 0 &&
                       FFN_PRECISION_FP32 == 0,
                   "the enums checked here begin at 0");
    for (size_t i = 0; i < sizeof enums / sizeof enums[0]; i++)
        if (enums[i].v < 0 || enums[i].v > enums[i].last)
            return ffn_error(FFN_ERR_CONFIG, "%s: invalid enum value %d (expected 0..%d)",
                             enums[i].name, enums[i].v, enums[i].last);
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


/* ---- the precision names (public, include/ffn/layer.h) -------------------- */

ffn_status ffn_precision_parse(const char *name, ffn_precision *out) {
    if (name && !strcmp(name, "fp32")) *out = FFN_PRECISION_FP32;
    else if (name && !strcmp(name, "bf16")) *out = FFN_PRECISION_BF16;
    else
        return ffn_error(FFN_ERR_INVALID_ARG, "precision: expected fp32 or bf16, got '%s'",
                         name ? name : "(null)");
    return FFN_OK;
}

const char *ffn_precision_name(ffn_precision p) {
    switch (p) {
    case FFN_PRECISION_FP32: return "fp32";
    case FFN_PRECISION_BF16: return "bf16";
    }
    return "?";
}

int ffn_precision_supported(ffn_precision p) {
    return p == FFN_PRECISION_FP32 || (p == FFN_PRECISION_BF16 && ffn_bf16_hw());
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
    if (cfg->precision == FFN_PRECISION_BF16 && !ffn_bf16_hw())
        return ffn_error(FFN_ERR_UNSUPPORTED,
                         "precision bf16: this CPU (or FFN_SIMD=%s) gives no AVX-512 with "
                         "AVX512_BF16 (vdpbf16ps), which bf16 products need; use precision fp32",
                         getenv("FFN_SIMD") ? getenv("FFN_SIMD") : "unset");
    ffn_layer *l = calloc(1, sizeof *l);
    if (!l) return ffn_error(FFN_ERR_NOMEM, "ffn_layer_create: out of memory");
    l->ctx = ctx;
    l->cfg = *cfg;
    l->gated = cfg->type == FFN_MLP_GATED;
    l->D = cfg->hidden_size;
    l->F = cfg->intermediate_size;
    l->P = l->gated ? 2 * l->F : l->F;
    const ffn_prod_kind kind = cfg->precision == FFN_PRECISION_BF16 ? FFN_PROD_BF16
                                                                     : FFN_PROD_FP32;
    if ((st = ffn_prod_create(ctx, FFN_PROD_IN, kind, l->gated ? 2 : 1, l->P, l->D, &l->in)) ||
        (st = ffn_prod_create(ctx, FFN_PROD_DOWN, kind, 1, l->D, l->F, &l->down)) ||
        (cfg->precision == FFN_PRECISION_BF16 && (st = ffn_mm_engine_create(&l->engine)))) {
        ffn_layer_free(l);
        return st;
    }
    *out = l;
    return FFN_OK;
}

void ffn_layer_free(ffn_layer *l) {
    if (!l) return;
    ffn_prod_free(l->in);
    ffn_prod_free(l->down);
    ffn_mm_engine_free(l->engine);
    ffn_free_aligned(l->b_in_owned);
    free(l);
}

const ffn_layer_config *ffn_layer_get_config(const ffn_layer *l) { return l ? &l->cfg : NULL; }

/* The biases as the products add them: b_in (P) = [b_gate; b_up] (copied
 * into one block) or b_up, b_down; NULL without bias. */
static ffn_status set_biases(ffn_layer *l, const float *gate_b, const float *up_b,
                             const float *down_b, const char *fn) {
    int64_t F = l->F;
    l->b_down = l->cfg.bias ? down_b : NULL;
    l->b_in = NULL;
    if (l->cfg.bias && l->gated) {
        if (!l->b_in_owned && !(l->b_in_owned = ffn_malloc_aligned(2 * (size_t)F * sizeof(float))))
            return ffn_error(FFN_ERR_NOMEM, "%s: out of memory", fn);
        memcpy(l->b_in_owned, gate_b, (size_t)F * sizeof(float));
        memcpy(l->b_in_owned + F, up_b, (size_t)F * sizeof(float));
        l->b_in = l->b_in_owned;
    } else if (l->cfg.bias) {
        l->b_in = up_b;
    }
    return FFN_OK;
}

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
    ffn_status st = set_biases(l, w->gate_b, w->up_b, w->down_b, "ffn_layer_set_weights");
    if (st) return st;
    /* no engine: the fp32 products run on ffn_gemm (not an error) */
    if (!l->engine && ffn_mm_engine_create(&l->engine)) l->engine = NULL;
    int bf16 = l->cfg.precision == FFN_PRECISION_BF16;
    const float *in[2] = {l->gated ? w->gate_w : w->up_w, w->up_w}, *down[1] = {w->down_w};
    if ((st = ffn_prod_set_f32(l->in, l->engine, in, l->b_in, bf16)) ||
        (st = ffn_prod_set_f32(l->down, l->engine, down, l->b_down, bf16)))
        return st;
    /* the streaming kernels read both packs or neither */
    int views = ffn_prod_has_view(l->in) && ffn_prod_has_view(l->down);
    ffn_prod_use_view(l->in, views), ffn_prod_use_view(l->down, views);
    l->have_weights = 1;
    return FFN_OK;
}

static ffn_status check_qweight(const ffn_qweight *w, const char *name, int64_t rows,
                                int64_t cols) {
    if (!w->data && rows && cols)
        return ffn_error(FFN_ERR_MISSING, "ffn_layer_set_qweights: %s has no data", name);
    if (w->rows != rows || w->cols != cols)
        return ffn_error(FFN_ERR_SHAPE, "ffn_layer_set_qweights: %s: expected (%lld, %lld), "
                         "got (%lld, %lld)", name, (long long)rows, (long long)cols,
                         (long long)w->rows, (long long)w->cols);
    return FFN_OK;
}

ffn_status ffn_layer_set_qweights(ffn_layer *l, const ffn_layer_qweights *w) {
    if (!l || !w) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_layer_set_qweights: NULL argument");
    const int64_t D = l->D, F = l->F;
    ffn_status st;
    if ((l->gated && (st = check_qweight(&w->gate, "gate_proj.weight", F, D))) ||
        (st = check_qweight(&w->up, "up_proj.weight", F, D)) ||
        (st = check_qweight(&w->down, "down_proj.weight", D, F)))
        return st;
    const char *missing = NULL;
    if (l->cfg.bias && l->gated && !w->gate_b) missing = "gate_proj.bias";
    else if (l->cfg.bias && !w->up_b) missing = "up_proj.bias";
    else if (l->cfg.bias && !w->down_b) missing = "down_proj.bias";
    if (missing) return ffn_error(FFN_ERR_MISSING, "ffn_layer_set_qweights: %s is NULL", missing);
    l->have_weights = 0;
    if ((st = set_biases(l, w->gate_b, w->up_b, w->down_b, "ffn_layer_set_qweights"))) return st;
    const ffn_qweight in[2] = {l->gated ? w->gate : w->up, w->up};
    /* (no fp32 copy stays behind: the projections drop their packs) */
    if ((st = ffn_prod_set_ggml(l->in, in, l->b_in)) ||
        (st = ffn_prod_set_ggml(l->down, &w->down, l->b_down)))
        return st;
    l->have_weights = 1;
    return FFN_OK;
}

int ffn_layer_is_quantized(const ffn_layer *l) {
    return l && l->have_weights && ffn_prod_kind_of(l->in) == FFN_PROD_GGML;
}

/* ---- sizes ---------------------------------------------------------------- */

/* Bytes of GU/dGU (n, P) and H/dH (n, F), each rounded to 64. */
static int buffer_bytes(const ffn_layer *l, int64_t n, size_t *gu, size_t *h) {
    size_t a, b;
    if (ffn_mul_size((size_t)n, (size_t)l->P * sizeof(float), &a) ||
        ffn_mul_size((size_t)n, (size_t)l->F * sizeof(float), &b) || a > SIZE_MAX - 64 ||
        b > SIZE_MAX - 64)
        return 1;
    *gu = ffn_align64(a), *h = ffn_align64(b);
    return 0;
}

/* oneDNN's scratchpads seen so far are at most ~1.5 MB at these shapes; the
 * reserve is the largest the primitives for max_n ask for, at least this. */
#define SCRATCH_MIN ((size_t)2 << 20)

size_t ffn_layer_workspace_size(const ffn_layer *l, int64_t max_n) {
    if (!l || max_n < 0) return 0;
    size_t gu, h, bytes;
    if (buffer_bytes(l, max_n, &gu, &h) || ffn_add_size(gu, h, &bytes)) return SIZE_MAX;
    size_t scratch = SCRATCH_MIN, extra = 0;
    if (max_n > 0) {
        /* make (and cache) the primitives for max_n now: the cache is not
         * part of the layer's observable state */
        ffn_layer *ml = (ffn_layer *)l;
        int threads = enter_threads(ml, max_n);
        size_t a = ffn_prod_workspace(ml->in, max_n), b = ffn_prod_workspace(ml->down, max_n);
        leave_threads(threads);
        if (b > a) a = b;
        if (ffn_prod_kind_of(l->in) == FFN_PROD_BF16) extra = a; /* its operands + its reserve */
        else if (a > ml->scratch_reserve) ml->scratch_reserve = a;
        if (ml->scratch_reserve > scratch) scratch = ml->scratch_reserve;
    }
    if (ffn_add_size(bytes, scratch, &bytes) || ffn_add_size(bytes, 64, &bytes) ||
        ffn_add_size(bytes, extra, &bytes))
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

/* The workspace, carved: gu (n, P), h (n, F), then the products' scratch
 * (whatever remains: oneDNN's scratchpad, bf16's operands). */
typedef struct carved {
    float *gu, *h;
    void *scratch;
    size_t scratch_bytes;
} carved;

static ffn_status carve(const ffn_layer *l, const char *fn, int64_t n, void *ws,
                        size_t ws_bytes, carved *c) {
    size_t gu, h, need = 0;
    if (buffer_bytes(l, n, &gu, &h) || ffn_add_size(gu, h, &need) ||
        ffn_add_size(need, 64 + SCRATCH_MIN, &need) || !ws || ws_bytes < need)
        return ffn_error(FFN_ERR_WORKSPACE,
                         "%s: workspace of %zu bytes%s, %lld tokens need at least %zu "
                         "(see ffn_layer_workspace_size)",
                         fn, ws_bytes, ws ? "" : " (NULL)", (long long)n, need);
    uintptr_t base = (uintptr_t)ws, p = (base + 63) & ~(uintptr_t)63;
    c->gu = (float *)p;
    c->h = (float *)(p + gu);
    c->scratch = (void *)(p + gu + h);
    c->scratch_bytes = ws_bytes - (size_t)(p - base) - gu - h;
    return FFN_OK;
}

/* ---- the elementwise parts (nn/ffn_ew.c) ------------------------------------ */

static void epilogue(const ffn_layer *l, float *out, const float *dh, const float *gu, int64_t n) {
    ffn_ew_epilogue(l->cfg.act, l->gated, l->F, out, dh, gu, n);
}

/* ---- calls ---------------------------------------------------------------- */

static ffn_status check_call(const ffn_layer *l, const char *fn, int64_t n) {
    if (!l) return ffn_error(FFN_ERR_INVALID_ARG, "%s: layer is NULL", fn);
    if (n < 0)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: n = %lld tokens (expected >= 0)", fn,
                         (long long)n);
    if (!l->have_weights)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: no weights (call ffn_layer_set_weights)", fn);
    return FFN_OK;
}

/* The start of every entry point: check the call, then (when there is work)
 * set the thread team.  Returns 1 to go on, with *threads for
 * leave_threads; 0 when the call is done, *st saying how (an error, or
 * FFN_OK for n = 0). */
static int begin_call(ffn_layer *l, const char *fn, int64_t n, ffn_status *st, int *threads) {
    *st = check_call(l, fn, n);
    if (*st || n == 0) return 0;
    *threads = enter_threads(l, n);
    return 1;
}

/* ---- forward -------------------------------------------------------------- */

/* The fused fp32 streaming path: both projections fp32 and n small. */
static int fused_stream(const ffn_layer *l, int64_t n) {
    return ffn_prod_kind_of(l->in) == FFN_PROD_FP32 &&
           ffn_prod_kind_of(l->down) == FFN_PROD_FP32 &&
           n <= ffn_stream_max_n(ffn_prod_view(l->in) != NULL);
}

/* hook NULL: the usual path (a fused one for small n where the types allow).
 * A capture-only hook (src/nn/ffn_hook.h) sees the buffers the usual path
 * left behind (gu and h are intact after it); a writing hook gets the
 * unfused path so that its writes reach the down projection. */
static ffn_status forward(ffn_layer *l, float *y, const float *x, int64_t n, float *saved,
                          void *workspace, size_t workspace_bytes, const ffn_neuron_hook *hook,
                          const ffn_hook_rows *rows) {
    ffn_status st;
    if (!y || !x) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_layer_forward: y or x is NULL");
    if (y == x) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_layer_forward: y must not alias x");
    carved c;
    if ((st = carve(l, "ffn_layer_forward", n, workspace, workspace_bytes, &c))) return st;
    float *gu = (l->cfg.save == FFN_SAVE_ACTIVATIONS && saved) ? saved : c.gu;
    const ffn_neuron_hook *writer = hook && hook->writes ? hook : NULL;
    if (!writer && fused_stream(l, n)) {
        const float *const wg = ffn_prod_f32_part(l->in, 0);
        ffn_decode_weights w = {.w_gate = l->gated ? wg : NULL,
                                .w_up = ffn_prod_f32_part(l->in, l->gated),
                                .w_down = ffn_prod_f32_part(l->down, 0),
                                .in_t = ffn_prod_view(l->in), .down_t = ffn_prod_view(l->down),
                                .b_in = l->b_in, .b_down = l->b_down};
        st = ffn_decode_forward(l->ctx, y, gu, c.h, x, n, l->D, l->F, l->cfg.act, &w);
    } else {
        if ((st = ffn_prod_forward(l->in, gu, l->P, x, n, c.scratch, c.scratch_bytes)))
            return st;                                         /* (n, P) */
        if (writer) writer->fn(writer->user, FFN_HOOK_GU, gu, n, rows);
        epilogue(l, c.h, NULL, gu, n);                         /* (n, F) */
        if (writer) writer->fn(writer->user, FFN_HOOK_H, c.h, n, rows);
        st = ffn_prod_forward(l->down, y, l->D, c.h, n, c.scratch, c.scratch_bytes); /* (n, D) */
    }
    if (st || !hook || writer) return st;
    hook->fn(hook->user, FFN_HOOK_GU, gu, n, rows);
    hook->fn(hook->user, FFN_HOOK_H, c.h, n, rows);
    return FFN_OK;
}

ffn_status ffn_layer_forward(ffn_layer *l, float *y, const float *x, int64_t n, float *saved,
                             void *workspace, size_t workspace_bytes) {
    return ffn_layer_forward_hooked(l, y, x, n, saved, workspace, workspace_bytes, NULL, NULL);
}

ffn_status ffn_layer_forward_hooked(ffn_layer *l, float *y, const float *x, int64_t n,
                                    float *saved, void *workspace, size_t workspace_bytes,
                                    const ffn_neuron_hook *hook, const ffn_hook_rows *rows) {
    ffn_status st;
    int threads;
    if (!begin_call(l, "ffn_layer_forward", n, &st, &threads)) return st;
    return end_call(threads, forward(l, y, x, n, saved, workspace, workspace_bytes, hook, rows));
}

/* ---- backward ------------------------------------------------------------- */

static ffn_status backward(ffn_layer *l, float *dx, const ffn_layer_params *grads,
                           const float *dy, const float *x, int64_t n, const float *saved,
                           void *workspace, size_t workspace_bytes) {
    ffn_status st;
    if (!dy || !x) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_layer_backward: dy or x is NULL");
    if (!ffn_prod_trains(l->in) || !ffn_prod_trains(l->down))
        return ffn_error(FFN_ERR_UNSUPPORTED, "ffn_layer_backward: the layer holds low-precision "
                         "weights (W_in %s, W_down %s; inference only)",
                         ffn_prod_type_name(l->in), ffn_prod_type_name(l->down));
    if (l->cfg.save == FFN_SAVE_ACTIVATIONS && !saved)
        return ffn_error(FFN_ERR_INVALID_ARG,
                         "ffn_layer_backward: saved is NULL but the layer's save mode is "
                         "'activations' (pass what forward wrote, or use FFN_SAVE_NONE)");
    static const ffn_layer_params none;
    const ffn_layer_params *g = grads ? grads : &none;
    carved c;
    if ((st = carve(l, "ffn_layer_backward", n, workspace, workspace_bytes, &c))) return st;
    float *dgu = c.gu, *h = c.h, *ws = c.scratch;
    const size_t wsb = c.scratch_bytes;
    int64_t D = l->D, F = l->F, P = l->P;

    /* GU (n, P): saved by forward, or recomputed into the dGU buffer by the
     * same products (the same bits) */
    const float *gu = saved;
    if (l->cfg.save == FFN_SAVE_NONE) {
        if ((st = ffn_prod_forward(l->in, dgu, P, x, n, ws, wsb))) return st;
        gu = dgu;
    }

    /* down_proj: dW_down (D, F) += dyᵀ · H, db_down += Σ dy */
    if (g->down_w) {
        epilogue(l, h, NULL, gu, n);
        if ((st = ffn_prod_wgrad(l->down, g->down_w, dy, D, h, n, ws, wsb))) return st;
    }
    if (g->down_b) ffn_ew_bias_grad(g->down_b, dy, n, D, D);

    /* dH (n, F) = dy · W_down, then dGU (n, P) = epilogue'(dH, GU) */
    if ((st = ffn_prod_backward(l->down, h, dy, D, n, ws, wsb))) return st;
    epilogue(l, dgu, h, gu, n);

    /* dx (n, D) = dGU · W_in */
    if (dx && (st = ffn_prod_backward(l->in, dx, dgu, P, n, ws, wsb))) return st;
    /* input projections: dW += dGᵀ · x, db += Σ dG (gate), likewise up */
    for (int part = l->gated ? 0 : 1; part < 2; part++) {
        float *dw = part ? g->up_w : g->gate_w, *db = part ? g->up_b : g->gate_b;
        const float *d_part = (part && l->gated) ? dgu + F : dgu;
        if (dw && (st = ffn_prod_wgrad(l->in, dw, d_part, P, x, n, ws, wsb))) return st;
        if (db) ffn_ew_bias_grad(db, d_part, n, F, P);
    }
    return FFN_OK;
}

ffn_status ffn_layer_backward(ffn_layer *l, float *dx, const ffn_layer_params *grads,
                              const float *dy, const float *x, int64_t n, const float *saved,
                              void *workspace, size_t workspace_bytes) {
    ffn_status st;
    int threads;
    if (!begin_call(l, "ffn_layer_backward", n, &st, &threads)) return st;
    return end_call(threads, backward(l, dx, grads, dy, x, n, saved, workspace, workspace_bytes));
}
