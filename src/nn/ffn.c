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
 * Engines (chosen by measurement, see gemv.c and bench/).  Forward with
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
 * WGRAD_MAX_N below).
 * Primitives are made per token count and cached (CACHE_SLOTS per layer).
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
#include "nn/ffn_backend.h"
#include "nn/ffn_ew.h"
#include "nn/ffn_hook.h"
#include "nn/ffn_quant.h"
#include "nn/bf16_layer.h"

#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Primitives for one token count. */
typedef struct mm_slot {
    int64_t n; /* 0: empty */
    uint64_t last_use;
    int backward_made; /* b1, b2 attempted */
    ffn_mm *f1, *f2, *b1, *b2;
} mm_slot;

enum { CACHE_SLOTS = 8 };

struct ffn_layer {
    ffn_ctx *ctx;
    ffn_layer_config cfg;
    int gated;
    int64_t D, F, P;
    int have_weights;
    /* the caller's weights (decode path and fallback) */
    const float *w_gate, *w_up; /* (F, D) each; w_gate NULL when dense */
    const float *w_down;        /* (D, F) */
    const float *b_in;          /* (P): [b_gate; b_up] (owned) or b_up, NULL without bias */
    const float *b_down;        /* (D) or NULL */
    float *b_in_owned;          /* (2F) gated with bias */
    /* the matrix engine */
    ffn_mm_engine *engine;
    ffn_mm_packed pk_in_t, pk_down_t; /* forward:  W_inᵀ (D, P), W_downᵀ (F, D) as B */
    ffn_mm_packed pk_in, pk_down;     /* backward: W_in (P, D), W_down (D, F) as B */
    int packed_fwd, packed_bwd;       /* which pairs exist (backward's made on first use) */
    ffn_packed_view view_in_t, view_down_t; /* the streaming path's view of the forward pair */
    int have_views;
    int bwd_pack_failed;              /* do not retry on every call */
    mm_slot slots[CACHE_SLOTS];
    uint64_t use_clock;
    size_t scratch_reserve; /* bytes of scratchpad workspace_size() adds */
    ffn_qlayer *q; /* low-precision weights (ffn_quant.c), or NULL */
    ffn_bf16layer *bf; /* FFN_PRECISION_BF16: the products (bf16_layer.c), or NULL */
};

/* The back-end of the layer's products (nn/ffn_backend.h): the ggml one for
 * low-precision weights, the bf16 one at FFN_PRECISION_BF16, NULL for
 * ffn.c's own fp32 engines. */
static const ffn_layer_backend *backend(const ffn_layer *l, void **impl) {
    if (l->q) return *impl = l->q, &ffn_layer_backend_ggml;
    if (l->bf) return *impl = l->bf, &ffn_layer_backend_bf16;
    *impl = NULL;
    return NULL;
}

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
    if ((int)cfg->act < FFN_ACT_LINEAR || (int)cfg->act > FFN_ACT_SIGMOID)
        return ffn_error(FFN_ERR_CONFIG, "hidden_act: invalid enum value %d (expected 0..%d)",
                         (int)cfg->act, (int)FFN_ACT_SIGMOID);
    if ((int)cfg->type < FFN_MLP_AUTO || (int)cfg->type > FFN_MLP_GATED)
        return ffn_error(FFN_ERR_CONFIG, "mlp_type: invalid enum value %d (expected 0..%d)",
                         (int)cfg->type, (int)FFN_MLP_GATED);
    if ((int)cfg->save < FFN_SAVE_ACTIVATIONS || (int)cfg->save > FFN_SAVE_NONE)
        return ffn_error(FFN_ERR_CONFIG, "save mode: invalid enum value %d (expected 0..%d)",
                         (int)cfg->save, (int)FFN_SAVE_NONE);
    if ((int)cfg->precision < FFN_PRECISION_FP32 || (int)cfg->precision > FFN_PRECISION_BF16)
        return ffn_error(FFN_ERR_CONFIG, "precision: invalid enum value %d (expected 0..%d)",
                         (int)cfg->precision, (int)FFN_PRECISION_BF16);
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

/* ---- the matrix engine: packing and the primitive cache ------------------ */

static void drop_slots(ffn_layer *l) {
    for (int i = 0; i < CACHE_SLOTS; i++) {
        mm_slot *s = &l->slots[i];
        ffn_mm_free(s->f1), ffn_mm_free(s->f2), ffn_mm_free(s->b1), ffn_mm_free(s->b2);
        memset(s, 0, sizeof *s);
    }
}

static void drop_engine(ffn_layer *l) {
    drop_slots(l);
    ffn_mm_packed_free(&l->pk_in_t), ffn_mm_packed_free(&l->pk_down_t);
    ffn_mm_packed_free(&l->pk_in), ffn_mm_packed_free(&l->pk_down);
    l->packed_fwd = l->packed_bwd = l->have_views = 0;
    ffn_mm_engine_free(l->engine);
    l->engine = NULL;
}

/* The shapes of the six products at n tokens (packed ones name their pack). */
static ffn_mm_desc desc_f1(const ffn_layer *l, int64_t n) {
    return (ffn_mm_desc){.M = n, .N = l->P, .K = l->D, .lda = l->D, .b_kind = FFN_MM_B_PACKED,
                         .ldc = l->P, .bias = l->b_in != NULL};
}
static ffn_mm_desc desc_f2(const ffn_layer *l, int64_t n) {
    return (ffn_mm_desc){.M = n, .N = l->D, .K = l->F, .lda = l->F, .b_kind = FFN_MM_B_PACKED,
                         .ldc = l->D, .bias = l->b_down != NULL};
}
static ffn_mm_desc desc_b1(const ffn_layer *l, int64_t n) {
    return (ffn_mm_desc){.M = n, .N = l->F, .K = l->D, .lda = l->D, .b_kind = FFN_MM_B_PACKED,
                         .ldc = l->F};
}
static ffn_mm_desc desc_b2(const ffn_layer *l, int64_t n) {
    return (ffn_mm_desc){.M = n, .N = l->D, .K = l->P, .lda = l->P, .b_kind = FFN_MM_B_PACKED,
                         .ldc = l->D};
}
/* Pack W_in and W_down as the forward products want them (transposed:
 * W_inᵀ (D, P), W_downᵀ (F, D)) or as backward's want them (W_in (P, D),
 * W_down (D, F)).  Failure to pack is not an error: the products then run
 * on ffn_gemm. */
static void pack_weights(ffn_layer *l, int backward) {
    ffn_mm_packed *a = backward ? &l->pk_in : &l->pk_in_t;
    ffn_mm_packed *b = backward ? &l->pk_down : &l->pk_down_t;
    if (backward) l->packed_bwd = 0;
    else l->packed_fwd = l->have_views = 0;
    if (!l->engine && ffn_mm_engine_create(&l->engine)) {
        ffn_mm_packed_free(a), ffn_mm_packed_free(b);
        return;
    }
    int64_t D = l->D, F = l->F;
    const float *w_in = l->w_up;
    float *concat = NULL;
    if (l->gated && l->w_up == l->w_gate + (size_t)F * (size_t)D) {
        w_in = l->w_gate; /* [W_gate; W_up] already one (2F, D) block (the model's layout) */
    } else if (l->gated) { /* [W_gate; W_up] (2F, D), only while packing */
        size_t half = (size_t)F * (size_t)D;
        concat = ffn_malloc_aligned(2 * half * sizeof(float));
        if (!concat) return;
        memcpy(concat, l->w_gate, half * sizeof(float));
        memcpy(concat + half, l->w_up, half * sizeof(float));
        w_in = concat;
    }
    const int64_t probe = 64; /* the packed layout does not depend on M (checked for 1..4096) */
    ffn_mm_desc in, down;
    if (!backward) {
        in = desc_f1(l, probe), down = desc_f2(l, probe);
        in.b_kind = FFN_MM_B_PLAIN_T, in.ldb = D;   /* W_in (P, D) is W_inᵀ stored transposed */
        down.b_kind = FFN_MM_B_PLAIN_T, down.ldb = F; /* W_down (D, F) likewise */
    } else {
        in = desc_b2(l, probe), down = desc_b1(l, probe);
        in.b_kind = FFN_MM_B_PLAIN, in.ldb = D;     /* W_in (P, D) as (K = P, N = D) */
        down.b_kind = FFN_MM_B_PLAIN, down.ldb = F; /* W_down (D, F) as (K = D, N = F) */
    }
    /* in place when the layout is unchanged: the refresh after every
     * optimizer step allocates nothing and the primitives stay valid */
    int ok = !ffn_mm_repack(l->engine, &in, w_in, a) &&
             !ffn_mm_repack(l->engine, &down, l->w_down, b);
    ffn_free_aligned(concat);
    if (!ok) {
        ffn_mm_packed_free(a), ffn_mm_packed_free(b);
        return;
    }
    if (backward) {
        l->packed_bwd = 1;
        return;
    }
    l->packed_fwd = 1;
    l->have_views = ffn_simd() == FFN_SIMD_AVX512 &&
                    ffn_mm_packed_view(&l->pk_in_t, D, l->P, &l->view_in_t) &&
                    ffn_mm_packed_view(&l->pk_down_t, F, D, &l->view_down_t);
}

/* The primitives for n tokens (with backward's when `backward`): cached,
 * else made in the least recently used slot.  A product whose primitive
 * cannot be made stays NULL (it then runs on ffn_gemm). */
static mm_slot *slot_for(ffn_layer *l, int64_t n, int backward) {
    if (!l->packed_fwd) return NULL;
    mm_slot *s = NULL, *victim = &l->slots[0];
    for (int i = 0; i < CACHE_SLOTS && !s; i++) {
        if (l->slots[i].n == n) s = &l->slots[i];
        else if (l->slots[i].last_use < victim->last_use) victim = &l->slots[i];
    }
    ffn_mm_desc d;
    if (!s) {
        s = victim;
        ffn_mm_free(s->f1), ffn_mm_free(s->f2), ffn_mm_free(s->b1), ffn_mm_free(s->b2);
        memset(s, 0, sizeof *s);
        s->n = n;
        d = desc_f1(l, n), ffn_mm_create(l->engine, &d, &l->pk_in_t, &s->f1);
        d = desc_f2(l, n), ffn_mm_create(l->engine, &d, &l->pk_down_t, &s->f2);
    }
    s->last_use = ++l->use_clock;
    if (backward && !s->backward_made) {
        s->backward_made = 1;
        if (l->packed_bwd) {
            d = desc_b1(l, n), ffn_mm_create(l->engine, &d, &l->pk_down, &s->b1);
            d = desc_b2(l, n), ffn_mm_create(l->engine, &d, &l->pk_in, &s->b2);
        }
    }
    return s;
}

static size_t slot_scratch(const mm_slot *s) {
    size_t m = 0;
    const ffn_mm *all[4] = {s->f1, s->f2, s->b1, s->b2};
    for (int i = 0; i < 4; i++)
        if (ffn_mm_scratch_bytes(all[i]) > m) m = ffn_mm_scratch_bytes(all[i]);
    return m;
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
    if (cfg->precision == FFN_PRECISION_BF16 && (st = ffn_bf16layer_create(ctx, cfg, &l->bf))) {
        free(l);
        return st;
    }
    *out = l;
    return FFN_OK;
}

void ffn_layer_free(ffn_layer *l) {
    if (!l) return;
    drop_engine(l);
    ffn_qlayer_free(l->q);
    ffn_bf16layer_free(l->bf);
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
    ffn_qlayer_free(l->q);
    l->q = NULL;
    int64_t F = l->F;
    l->w_gate = l->gated ? w->gate_w : NULL;
    l->w_up = w->up_w;
    l->w_down = w->down_w;
    l->b_down = l->cfg.bias ? w->down_b : NULL;
    l->b_in = NULL;
    if (l->cfg.bias && l->gated) {
        if (!l->b_in_owned) {
            l->b_in_owned = ffn_malloc_aligned(2 * (size_t)F * sizeof(float));
            if (!l->b_in_owned) return ffn_error(FFN_ERR_NOMEM, "ffn_layer_set_weights: out of memory");
        }
        memcpy(l->b_in_owned, w->gate_b, (size_t)F * sizeof(float));
        memcpy(l->b_in_owned + F, w->up_b, (size_t)F * sizeof(float));
        l->b_in = l->b_in_owned;
    } else if (l->cfg.bias) {
        l->b_in = w->up_b;
    }
    if (l->bf) { /* bf16: only the bf16 packs (the refresh after a step) */
        ffn_status st = ffn_bf16layer_set_weights(l->bf, l->w_gate, l->w_up, l->w_down, l->b_in,
                                                  l->b_down);
        l->have_weights = st == FFN_OK;
        return st;
    }
    /* repack; backward's pair only if backward has run (it is made then).
     * The primitives do not hold the packs' addresses (they are passed at
     * every run), only their layouts: kept when every pack was rewritten in
     * place, in the layout it had. */
    int had_backward = l->packed_bwd, had_fwd = l->packed_fwd;
    const void *was[4] = {l->pk_in_t.data, l->pk_down_t.data, l->pk_in.data, l->pk_down.data};
    pack_weights(l, 0);
    if (had_backward) pack_weights(l, 1);
    const void *now[4] = {l->pk_in_t.data, l->pk_down_t.data, l->pk_in.data, l->pk_down.data};
    if (!had_fwd || !l->packed_fwd || (had_backward && !l->packed_bwd) || memcmp(was, now, sizeof was))
        drop_slots(l);
    l->have_weights = 1;
    return FFN_OK;
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
    size_t scratch = SCRATCH_MIN;
    if (l->have_weights && max_n > 0) {
        /* make (and cache) the primitives for max_n now: the cache is not
         * part of the layer's observable state */
        ffn_layer *ml = (ffn_layer *)l;
        int threads = enter_threads(ml, max_n);
        mm_slot *s = slot_for(ml, max_n, ml->packed_bwd);
        leave_threads(threads);
        if (s && slot_scratch(s) > ml->scratch_reserve) ml->scratch_reserve = slot_scratch(s);
        if (ml->scratch_reserve > scratch) scratch = ml->scratch_reserve;
    }
    if (ffn_add_size(bytes, scratch, &bytes) || ffn_add_size(bytes, 64, &bytes)) return SIZE_MAX;
    void *impl;
    const ffn_layer_backend *be = backend(l, &impl);
    if (be && be->workspace_extra &&
        ffn_add_size(bytes, be->workspace_extra(impl, max_n), &bytes))
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

/* The workspace, carved: gu (n, P), h (n, F), then the engine's scratchpad
 * (whatever remains). */
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

/* ---- the elementwise parts (nn/ffn_ew.c, shared with the other back-ends) -- */

static void epilogue(const ffn_layer *l, float *out, const float *dh, const float *gu, int64_t n) {
    ffn_ew_epilogue(l->cfg.act, l->gated, l->F, out, dh, gu, n);
}
#define add_bias_rows ffn_ew_add_bias_rows
#define bias_grad ffn_ew_bias_grad

/* ---- the products: a cached primitive, else ffn_gemm on the plain weights -- */

static int try_mm(const ffn_layer *l, const ffn_mm *m, const carved *c, float *out,
                  const float *a, const void *b, const float *bias) {
    return m && !ffn_mm_run(l->engine, m, out, a, b, bias, c->scratch, c->scratch_bytes);
}

/* forward with n tokens takes the streaming path (gemv.c) */
static int streams(const ffn_layer *l, int64_t n) {
    return n <= ffn_stream_max_n(l->have_views);
}

static ffn_decode_weights decode_weights(const ffn_layer *l) {
    return (ffn_decode_weights){.w_gate = l->w_gate, .w_up = l->w_up, .w_down = l->w_down,
                                .in_t = l->have_views ? &l->view_in_t : NULL,
                                .down_t = l->have_views ? &l->view_down_t : NULL,
                                .b_in = l->b_in, .b_down = l->b_down};
}

/* gu (n, P) = x · W_inᵀ + b_in, by the same kernels as forward (so that
 * recompute reproduces the saved values bit for bit) */
static ffn_status project_in(const ffn_layer *l, const mm_slot *s, const carved *c, float *gu,
                             const float *x, int64_t n) {
    int64_t D = l->D, F = l->F, P = l->P;
    if (streams(l, n)) {
        ffn_decode_weights w = decode_weights(l);
        ffn_decode_project_in(l->ctx, gu, x, n, D, F, &w);
        return FFN_OK;
    } else if (!try_mm(l, s ? s->f1 : NULL, c, gu, x, l->pk_in_t.data, l->b_in)) {
        ffn_status st;
        if (l->gated && (st = ffn_gemm(l->ctx, 0, 1, n, F, D, 1.0f, x, D, l->w_gate, D, 0.0f,
                                       gu, P)))
            return st;
        if ((st = ffn_gemm(l->ctx, 0, 1, n, F, D, 1.0f, x, D, l->w_up, D, 0.0f,
                           l->gated ? gu + F : gu, P)))
            return st;
        if (l->b_in) add_bias_rows(gu, l->b_in, n, P, P);
    }
    return FFN_OK; /* (the primitive adds the bias itself) */
}

/* y (n, D) = h · W_downᵀ + b_down */
static ffn_status project_down(const ffn_layer *l, const mm_slot *s, const carved *c, float *y,
                               const float *h, int64_t n) {
    if (streams(l, n)) { /* as the fused forward does it (same bits) */
        ffn_decode_weights w = decode_weights(l);
        ffn_decode_project_down(l->ctx, y, h, n, l->D, l->F, &w);
        return FFN_OK;
    }
    if (try_mm(l, s ? s->f2 : NULL, c, y, h, l->pk_down_t.data, l->b_down)) return FFN_OK;
    ffn_status st = ffn_gemm(l->ctx, 0, 1, n, l->D, l->F, 1.0f, h, l->F, l->w_down, l->F, 0.0f,
                             y, l->D);
    if (!st && l->b_down) add_bias_rows(y, l->b_down, n, l->D, l->D);
    return st;
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

/* hook NULL: the usual path (the fused streaming kernel for n <=
 * ffn_stream_max_n).  A capture-only hook (src/nn/ffn_hook.h) sees the
 * buffers the usual path left behind (gu and h are intact after it); a
 * writing hook gets the unfused path so that its writes reach the down
 * projection. */
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
    void *impl;
    const ffn_layer_backend *be = backend(l, &impl);
    if (be) {
        st = be->forward(impl, l->ctx, y, gu, c.h, x, n, c.scratch, c.scratch_bytes, writer, rows);
    } else if (!writer && streams(l, n)) {
        ffn_decode_weights w = decode_weights(l);
        st = ffn_decode_forward(l->ctx, y, gu, c.h, x, n, l->D, l->F, l->cfg.act, &w);
    } else {
        mm_slot *s = streams(l, n) ? NULL : slot_for(l, n, 0);
        if ((st = project_in(l, s, &c, gu, x, n))) return st; /* (n, P) */
        if (writer) writer->fn(writer->user, FFN_HOOK_GU, gu, n, rows);
        epilogue(l, c.h, NULL, gu, n);                         /* (n, F) */
        if (writer) writer->fn(writer->user, FFN_HOOK_H, c.h, n, rows);
        st = project_down(l, s, &c, y, c.h, n);                /* (n, D) */
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

/* Backward steps with at most this many tokens run the weight gradients on
 * ffn_wgrad (register tiles over all of K = n; dW read and written once),
 * larger ones on ffn_gemm (dnnl_sgemm).  Measured per K on (M, N, K) =
 * (2816, 1024, K), one thread, process CPU time (bench/wgrad_kernel.c, a
 * loaded machine): ffn_wgrad / the faster of sgemm and the matmul
 * primitive = 0.6-0.7 at K = 16, 0.8 at 64, 0.88 at 96, 1.06-1.10 at 128,
 * 1.15-1.19 at 256 (ffn_wgrad runs at ~95 GFLOP/s of CPU time at every K,
 * sgemm gains with K).  bench/bench_backward.sh prints the same comparison
 * per shape. */
#define WGRAD_MAX_N 96

/* dW (M, N) += Aᵀ·B over the n tokens: A (n, lda), B (n, ldb) */
static ffn_status weight_grad(const ffn_layer *l, float *dw, int64_t M, int64_t N,
                              const float *a, int64_t lda, const float *b, int64_t ldb,
                              int64_t n) {
    if (n <= WGRAD_MAX_N && ffn_simd() != FFN_SIMD_SCALAR) {
        ffn_wgrad_mt(l->ctx, dw, N, a, lda, b, ldb, M, N, n);
        return FFN_OK;
    }
    return ffn_gemm(l->ctx, 1, 0, M, N, n, 1.0f, a, lda, b, ldb, 1.0f, dw, N);
}

static ffn_status backward(ffn_layer *l, float *dx, const ffn_layer_params *grads,
                           const float *dy, const float *x, int64_t n, const float *saved,
                           void *workspace, size_t workspace_bytes) {
    ffn_status st;
    if (!dy || !x) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_layer_backward: dy or x is NULL");
    void *impl;
    const ffn_layer_backend *be = backend(l, &impl);
    if (be && !be->backward)
        return ffn_error(FFN_ERR_UNSUPPORTED, "ffn_layer_backward: the layer holds %s "
                         "weights (inference only)", be->weights);
    if (l->cfg.save == FFN_SAVE_ACTIVATIONS && !saved)
        return ffn_error(FFN_ERR_INVALID_ARG,
                         "ffn_layer_backward: saved is NULL but the layer's save mode is "
                         "'activations' (pass what forward wrote, or use FFN_SAVE_NONE)");
    static const ffn_layer_params none;
    const ffn_layer_params *g = grads ? grads : &none;
    carved c;
    if ((st = carve(l, "ffn_layer_backward", n, workspace, workspace_bytes, &c))) return st;
    float *dgu = c.gu, *h = c.h;
    int64_t D = l->D, F = l->F, P = l->P;
    if (be)
        return be->backward(impl, dx, g, dy, x, n, l->cfg.save == FFN_SAVE_NONE ? NULL : saved,
                            dgu, h, c.scratch, c.scratch_bytes);
    if (l->packed_fwd && !l->packed_bwd && !l->bwd_pack_failed) { /* first backward: allocates */
        pack_weights(l, 1);
        l->bwd_pack_failed = !l->packed_bwd;
    }
    mm_slot *s = slot_for(l, n, 1);

    /* GU (n, P): saved by forward, or recomputed into the dGU buffer */
    const float *gu = saved;
    if (l->cfg.save == FFN_SAVE_NONE) {
        if ((st = project_in(l, s, &c, dgu, x, n))) return st;
        gu = dgu;
    }

    /* down_proj: dW_down (D, F) += dyᵀ · H, db_down += Σ dy */
    if (g->down_w) {
        epilogue(l, h, NULL, gu, n);
        if ((st = weight_grad(l, g->down_w, D, F, dy, D, h, F, n))) return st;
    }
    if (g->down_b) bias_grad(g->down_b, dy, n, D, D);

    /* dH (n, F) = dy · W_down, then dGU (n, P) = epilogue'(dH, GU) */
    if (!try_mm(l, s ? s->b1 : NULL, &c, h, dy, l->pk_down.data, NULL) &&
        (st = ffn_gemm(l->ctx, 0, 0, n, F, D, 1.0f, dy, D, l->w_down, F, 0.0f, h, F)))
        return st;
    epilogue(l, dgu, h, gu, n);

    /* dx (n, D) = dGU · W_in */
    if (dx && !try_mm(l, s ? s->b2 : NULL, &c, dx, dgu, l->pk_in.data, NULL)) {
        if (l->gated && (st = ffn_gemm(l->ctx, 0, 0, n, D, F, 1.0f, dgu, P, l->w_gate, D, 0.0f,
                                       dx, D)))
            return st;
        if ((st = ffn_gemm(l->ctx, 0, 0, n, D, F, 1.0f, l->gated ? dgu + F : dgu, P, l->w_up, D,
                           l->gated ? 1.0f : 0.0f, dx, D)))
            return st;
    }
    /* input projections: dW += dGᵀ · x, db += Σ dG (gate), likewise up */
    for (int part = l->gated ? 0 : 1; part < 2; part++) {
        float *dw = part ? g->up_w : g->gate_w, *db = part ? g->up_b : g->gate_b;
        const float *d_part = (part && l->gated) ? dgu + F : dgu;
        if (dw && (st = weight_grad(l, dw, F, D, d_part, P, x, D, n))) return st;
        if (db) bias_grad(db, d_part, n, F, P);
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

/* ---- low-precision weights (the forward is in ffn_quant.c) ---------------- */

ffn_status ffn_layer_set_qweights(ffn_layer *l, const ffn_layer_qweights *w) {
    if (!l || !w) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_layer_set_qweights: NULL argument");
    ffn_qlayer *q = NULL;
    ffn_status st = ffn_qlayer_create(&l->cfg, w, &q);
    if (st) return st;
    drop_engine(l); /* no fp32 copy stays behind */
    ffn_qlayer_free(l->q);
    l->q = q;
    l->w_gate = l->w_up = l->w_down = l->b_in = l->b_down = NULL;
    l->have_weights = 1;
    return FFN_OK;
}

int ffn_layer_is_quantized(const ffn_layer *l) { return l && l->q; }
