/* bf16_layer.c -- the dense and gated FFN layer at FFN_PRECISION_BF16:
 * every matrix product takes bf16 operands and accumulates and writes fp32
 * (oneDNN's bf16 matmul, brgemm with vdpbf16ps), as PyTorch's autocast with
 * bf16 computes a Linear; everything between the products stays fp32.
 * ffn.c owns the layer and hands the products here (see bf16_layer.h).
 *
 * Letters: N tokens, D hidden_size, F intermediate_size, P = 2F gated
 * ([g | u]) or F dense.  r(·) is rounding to bf16.
 *   forward:   GU = r(x)·r(W_in)ᵀ + b_in        (N, P)   F1 (packed W)
 *              H  = act(G) ⊙ U | act(U)         (N, F)   fp32 epilogue
 *              y  = r(H)·r(W_down)ᵀ + b_down    (N, D)   F2 (packed W)
 *   backward:  dW_down += r(dy)ᵀ·r(H)           (D, F)   WD (plain operands)
 *              dH = r(dy)·r(W_down)             (N, F)   B1 (packed W)
 *              dGU = epilogue'(dH, GU)          (N, P)   fp32
 *              dx = r(dGU)·r(W_in)              (N, D)   B2 (packed W)
 *              dW_gate += r(dG)ᵀ·r(x), dW_up += r(dU)ᵀ·r(x)   WI (plain)
 * Biases and their gradients are fp32.  set_weights (the refresh after an
 * optimizer step) rounds the fp32 master weights to plain bf16 copies
 * (ffn_bf16_convert: [W_gate; W_up] written in place, no concatenation)
 * and reorders them into the packed layouts with reorders made once:
 * forward's pair at once, backward's at the first backward and again at
 * every set_weights after it.  Memory: the plain copies and the packs are
 * 1.5x the fp32 weight bytes once backward has run (0.5x each).
 *
 * Determinism: the primitives are fixed per token count and thread count
 * (ffn.c sets the team from n), the conversions and epilogues are
 * elementwise and the bias gradients summed in row order, so results are
 * bitwise reproducible run to run at a fixed thread count.
 *
 * Memory: the workspace gives, beyond ffn.c's gu and h, the bf16 copies
 * x (N, D), dy (N, D), H (N, F), dGU (N, P) and oneDNN's scratchpad.
 * Nothing is allocated in forward or backward except when a token count is
 * first met (its primitives) and at the first backward (backward's packs). */
#include "nn/bf16_layer.h"
#include "nn/ffn_ew.h"
#include "nn/ffn_backend.h"
#include "kernels/bf16.h"
#include "kernels/kernels.h"

#include <string.h>

typedef struct bf_slot {
    int64_t n; /* 0: empty */
    uint64_t last_use;
    int backward_made;
    ffn_mm *f1, *f2, *b1, *b2, *wd, *wi;
} bf_slot;

enum { BF_SLOTS = 8 };

struct ffn_bf16layer {
    ffn_ctx *ctx;
    ffn_act act;
    int gated;
    int64_t D, F, P;
    const float *w_gate, *w_up, *w_down, *b_in, *b_down;
    ffn_mm_engine *engine;
    ffn_mm_packed in_t, down_t; /* forward: W_inᵀ (D, P), W_downᵀ (F, D) as B, bf16 */
    ffn_mm_packed in, down;     /* backward: W_in (P, D), W_down (D, F) as B, bf16 */
    int packed_fwd, packed_bwd;
    uint16_t *w_in_b, *w_down_b; /* the plain bf16 copies (P, D), (D, F) the packs come from */
    ffn_bf16_packer *packer[4];  /* in_t, down_t, in, down (made with their layouts) */
    bf_slot slots[BF_SLOTS];
    uint64_t clock;
};

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

/* ---- create, packs, primitives ---------------------------------------------- */

ffn_status ffn_bf16layer_create(ffn_ctx *ctx, const ffn_layer_config *cfg, ffn_bf16layer **out) {
    *out = NULL;
    if (!ffn_bf16_hw())
        return ffn_error(FFN_ERR_UNSUPPORTED,
                         "precision bf16: this CPU (or FFN_SIMD=%s) gives no AVX-512 with "
                         "AVX512_BF16 (vdpbf16ps), which bf16 products need; use precision fp32",
                         getenv("FFN_SIMD") ? getenv("FFN_SIMD") : "unset");
    ffn_bf16layer *b = calloc(1, sizeof *b);
    if (!b) return ffn_error(FFN_ERR_NOMEM, "bf16 layer: out of memory");
    b->ctx = ctx;
    b->act = cfg->act;
    b->gated = cfg->type == FFN_MLP_GATED;
    b->D = cfg->hidden_size, b->F = cfg->intermediate_size;
    b->P = b->gated ? 2 * b->F : b->F;
    ffn_status st = ffn_mm_engine_create(&b->engine);
    if (st) {
        free(b);
        return st;
    }
    *out = b;
    return FFN_OK;
}

static void drop_slots(ffn_bf16layer *b) {
    for (int i = 0; i < BF_SLOTS; i++) {
        bf_slot *s = &b->slots[i];
        ffn_mm *all[6] = {s->f1, s->f2, s->b1, s->b2, s->wd, s->wi};
        for (int j = 0; j < 6; j++) ffn_mm_free(all[j]);
        memset(s, 0, sizeof *s);
    }
}

void ffn_bf16layer_free(ffn_bf16layer *b) {
    if (!b) return;
    drop_slots(b);
    for (int i = 0; i < 4; i++) ffn_bf16_packer_free(b->packer[i]);
    ffn_free_aligned(b->w_in_b);
    ffn_free_aligned(b->w_down_b);
    ffn_mm_packed_free(&b->in_t), ffn_mm_packed_free(&b->down_t);
    ffn_mm_packed_free(&b->in), ffn_mm_packed_free(&b->down);
    ffn_mm_engine_free(b->engine);
    free(b);
}

/* The row stride of dy's second bf16 copy, the one dyᵀ·H reads: D plus a
 * pad, so that oneDNN takes its gemm kernel (measured 2.0-2.7 ms against
 * brgemm's 3.0-3.9 over a transposed A, which it picks when lda = M, at
 * (1024, 2816), n = 64, one thread); dy·W_down keeps ld D (brgemm, faster
 * there) */
#define DY_LD(b) ((b)->D + 32)

/* The six products at n tokens; F1, F2, B1, B2 over packed weights. */
static ffn_mm_desc desc_f1(const ffn_bf16layer *b, int64_t n) {
    return (ffn_mm_desc){.M = n, .N = b->P, .K = b->D, .lda = b->D, .b_kind = FFN_MM_B_PACKED,
                         .ldc = b->P, .bias = b->b_in != NULL, .bf16 = 1};
}
static ffn_mm_desc desc_f2(const ffn_bf16layer *b, int64_t n) {
    return (ffn_mm_desc){.M = n, .N = b->D, .K = b->F, .lda = b->F, .b_kind = FFN_MM_B_PACKED,
                         .ldc = b->D, .bias = b->b_down != NULL, .bf16 = 1};
}
static ffn_mm_desc desc_b1(const ffn_bf16layer *b, int64_t n) {
    return (ffn_mm_desc){.M = n, .N = b->F, .K = b->D, .lda = b->D, .b_kind = FFN_MM_B_PACKED,
                         .ldc = b->F, .bf16 = 1};
}
static ffn_mm_desc desc_b2(const ffn_bf16layer *b, int64_t n) {
    return (ffn_mm_desc){.M = n, .N = b->D, .K = b->P, .lda = b->P, .b_kind = FFN_MM_B_PACKED,
                         .ldc = b->D, .bf16 = 1};
}
/* dW_down (D, F) += dyᵀ (D, n) · H (n, F) */
static ffn_mm_desc desc_wd(const ffn_bf16layer *b, int64_t n) {
    return (ffn_mm_desc){.M = b->D, .N = b->F, .K = n, .a_trans = 1, .lda = DY_LD(b),
                         .b_kind = FFN_MM_B_PLAIN, .ldb = b->F, .ldc = b->F, .accumulate = 1,
                         .bf16 = 1};
}
/* dW_part (F, D) += dPartᵀ (F, n) · x (n, D), dPart a column range of dGU */
static ffn_mm_desc desc_wi(const ffn_bf16layer *b, int64_t n) {
    return (ffn_mm_desc){.M = b->F, .N = b->D, .K = n, .a_trans = 1, .lda = b->P,
                         .b_kind = FFN_MM_B_PLAIN, .ldb = b->D, .ldc = b->D, .accumulate = 1,
                         .bf16 = 1};
}

/* Pack forward's pair (W_inᵀ, W_downᵀ) or backward's (W_in, W_down) from
 * the plain bf16 copies: the layout and its reorder are made the first
 * time, later packs only run the reorder into the same buffers. */
static ffn_status pack(ffn_bf16layer *b, int backward) {
    const int64_t D = b->D, F = b->F, P = b->P, probe = 64; /* layouts do not depend on M */
    ffn_mm_packed *pk[2] = {backward ? &b->in : &b->in_t, backward ? &b->down : &b->down_t};
    const ffn_mm_desc d[2] = {backward ? desc_b2(b, probe) : desc_f1(b, probe),
                              backward ? desc_b1(b, probe) : desc_f2(b, probe)};
    const uint16_t *src[2] = {b->w_in_b, b->w_down_b};
    /* B (K, N) from the plain copies: forward reads W_in (P, D) as W_inᵀ and
     * W_down (D, F) as W_downᵀ (transposed, ld D and F); backward as they are */
    const int64_t ld[2] = {D, F};
    ffn_status st = FFN_OK;
    for (int i = 0; i < 2 && !st; i++) {
        ffn_bf16_packer **pp = &b->packer[2 * backward + i];
        if (!*pp) {
            ffn_mm_packed_free(pk[i]);
            st = ffn_mm_pack_layout(b->engine, &d[i], pk[i]);
            if (!st) st = ffn_bf16_packer_create(d[i].K, d[i].N, ld[i], !backward, pk[i], pp);
        }
        if (!st) st = ffn_bf16_packer_run(*pp, b->ctx, src[i], pk[i]);
    }
    (void)P;
    if (st) return ffn_error_prefix(st, "bf16 layer: packing the %s weights",
                                    backward ? "backward" : "forward");
    if (backward) b->packed_bwd = 1;
    else b->packed_fwd = 1;
    return FFN_OK;
}

ffn_status ffn_bf16layer_set_weights(ffn_bf16layer *b, const float *w_gate, const float *w_up,
                                     const float *w_down, const float *b_in,
                                     const float *b_down) {
    int bias_changed = (b->b_in != NULL) != (b_in != NULL) || (b->b_down != NULL) != (b_down != NULL);
    b->w_gate = w_gate, b->w_up = w_up, b->w_down = w_down, b->b_in = b_in, b->b_down = b_down;
    if (bias_changed || !b->packed_fwd) drop_slots(b); /* primitives keep the weights' packs */
    const int64_t D = b->D, F = b->F, P = b->P;
    if (!b->w_in_b) {
        b->w_in_b = ffn_malloc_aligned((size_t)P * (size_t)D * sizeof(uint16_t));
        b->w_down_b = ffn_malloc_aligned((size_t)D * (size_t)F * sizeof(uint16_t));
        if (!b->w_in_b || !b->w_down_b)
            return ffn_error(FFN_ERR_NOMEM, "bf16 layer: out of memory for the bf16 weights");
    }
    /* [W_gate; W_up] (P, D) and W_down (D, F), rounded from the fp32 masters */
    if (b->gated) ffn_bf16_convert(b->w_in_b, D, w_gate, D, F, D);
    ffn_bf16_convert(b->w_in_b + (b->gated ? (size_t)F * (size_t)D : 0), D, w_up, D, F, D);
    ffn_bf16_convert(b->w_down_b, F, w_down, F, D, F);
    int had_backward = b->packed_bwd;
    ffn_status st = pack(b, 0);
    if (!st && had_backward) st = pack(b, 1);
    return st;
}

static size_t slot_scratch(const bf_slot *s) {
    size_t m = 0;
    const ffn_mm *all[6] = {s->f1, s->f2, s->b1, s->b2, s->wd, s->wi};
    for (int i = 0; i < 6; i++)
        if (ffn_mm_scratch_bytes(all[i]) > m) m = ffn_mm_scratch_bytes(all[i]);
    return m;
}

static ffn_status make(ffn_bf16layer *b, ffn_mm_desc d, const ffn_mm_packed *pk, ffn_mm **m,
                       const char *what) {
    ffn_status st = ffn_mm_create(b->engine, &d, pk, m);
    return st ? ffn_error_prefix(st, "bf16 layer: product %s at %lld tokens", what,
                                 (long long)(d.a_trans ? d.K : d.M))
              : FFN_OK;
}

/* The primitives for n tokens (backward's too when asked): cached, or
 * made in the least recently used slot. */
static ffn_status slot_for(ffn_bf16layer *b, int64_t n, int backward, bf_slot **out) {
    bf_slot *s = NULL, *victim = &b->slots[0];
    ffn_status st = FFN_OK;
    for (int i = 0; i < BF_SLOTS && !s; i++) {
        if (b->slots[i].n == n) s = &b->slots[i];
        else if (b->slots[i].last_use < victim->last_use) victim = &b->slots[i];
    }
    if (!s) {
        s = victim;
        ffn_mm *all[6] = {s->f1, s->f2, s->b1, s->b2, s->wd, s->wi};
        for (int j = 0; j < 6; j++) ffn_mm_free(all[j]);
        memset(s, 0, sizeof *s);
        if ((st = make(b, desc_f1(b, n), &b->in_t, &s->f1, "x·W_inᵀ")) ||
            (st = make(b, desc_f2(b, n), &b->down_t, &s->f2, "h·W_downᵀ"))) {
            ffn_mm_free(s->f1), ffn_mm_free(s->f2);
            memset(s, 0, sizeof *s);
            return st;
        }
        s->n = n;
    }
    s->last_use = ++b->clock;
    if (backward && !s->backward_made) {
        if ((st = make(b, desc_b1(b, n), &b->down, &s->b1, "dy·W_down")) ||
            (st = make(b, desc_b2(b, n), &b->in, &s->b2, "dGU·W_in")) ||
            (st = make(b, desc_wd(b, n), NULL, &s->wd, "dyᵀ·H")) ||
            (st = make(b, desc_wi(b, n), NULL, &s->wi, "dGUᵀ·x")))
            return st;
        s->backward_made = 1;
    }
    *out = s;
    return FFN_OK;
}

/* ---- the workspace ------------------------------------------------------------ */

typedef struct bf_bufs {
    uint16_t *x, *dy, *h, *dgu; /* (n, D) (n, D) (n, F) (n, P) bf16 */
    uint16_t *dy_pad;           /* dy again, (n, DY_LD) */
    void *scratch;
    size_t scratch_bytes;
} bf_bufs;

static size_t bufs_bytes(const ffn_bf16layer *b, int64_t n) {
    size_t per = (size_t)n * 2;
    return ffn_align64(per * (size_t)b->D) * 2 + ffn_align64(per * (size_t)DY_LD(b)) +
           ffn_align64(per * (size_t)b->F) +
           ffn_align64(per * (size_t)b->P) + 64;
}

/* The size must not depend on whether weights are set yet (a model and a
 * MoE layer size their workspace before), so the scratchpad share is a
 * fixed reserve: oneDNN's bf16 scratchpads at the shapes measured are far
 * below it (and ffn.c's own minimum comes on top). */
#define BF_SCRATCH_RESERVE ((size_t)2 << 20)

size_t ffn_bf16layer_workspace_extra(ffn_bf16layer *b, int64_t max_n) {
    if (max_n <= 0) return 0;
    bf_slot *s = NULL;
    if (b->packed_fwd) (void)slot_for(b, max_n, b->packed_bwd, &s); /* made ahead */
    return bufs_bytes(b, max_n) + BF_SCRATCH_RESERVE;
}

static ffn_status carve(const ffn_bf16layer *b, const bf_slot *s, int64_t n, void *ws,
                        size_t ws_bytes, bf_bufs *c) {
    size_t need = bufs_bytes(b, n) + slot_scratch(s);
    if (!ws || ws_bytes < need)
        return ffn_error(FFN_ERR_WORKSPACE, "bf16 layer: %zu bytes left in the workspace, %lld "
                         "tokens need %zu more for the bf16 operands and the scratchpad (see "
                         "ffn_layer_workspace_size)", ws_bytes, (long long)n, need);
    uintptr_t p = ((uintptr_t)ws + 63) & ~(uintptr_t)63, end = (uintptr_t)ws + ws_bytes;
    size_t per = (size_t)n * 2;
    c->x = (uint16_t *)p, p += ffn_align64(per * (size_t)b->D);
    c->dy = (uint16_t *)p, p += ffn_align64(per * (size_t)b->D);
    c->dy_pad = (uint16_t *)p, p += ffn_align64(per * (size_t)DY_LD(b));
    c->h = (uint16_t *)p, p += ffn_align64(per * (size_t)b->F);
    c->dgu = (uint16_t *)p, p += ffn_align64(per * (size_t)b->P);
    c->scratch = (void *)p;
    c->scratch_bytes = (size_t)(end - p);
    return FFN_OK;
}

static ffn_status run(const ffn_bf16layer *b, const ffn_mm *m, const bf_bufs *c, float *out,
                      const uint16_t *a, const void *w, const float *bias) {
    return ffn_mm_run(b->engine, m, out, a, w, bias, c->scratch, c->scratch_bytes);
}

/* ---- fp32 elementwise parts (nn/ffn_ew.c, as every back-end) ------------------ */

static void epilogue(const ffn_bf16layer *b, float *out, const float *dh, const float *gu,
                     int64_t n) {
    ffn_ew_epilogue(b->act, b->gated, b->F, out, dh, gu, n);
}
#define bias_grad ffn_ew_bias_grad

/* ---- forward and backward -------------------------------------------------- */

ffn_status ffn_bf16layer_forward(ffn_bf16layer *b, float *y, float *gu, float *h, const float *x,
                                 int64_t n, void *ws, size_t ws_bytes,
                                 const ffn_neuron_hook *writer, const ffn_hook_rows *rows) {
    bf_slot *s;
    bf_bufs c;
    ffn_status st;
    if (!b->packed_fwd) return ffn_error(FFN_ERR_INVALID_ARG, "bf16 layer: no weights packed");
    if ((st = slot_for(b, n, 0, &s)) || (st = carve(b, s, n, ws, ws_bytes, &c))) return st;
    int64_t D = b->D, F = b->F;
    ffn_bf16_convert(c.x, D, x, D, n, D);
    if ((st = run(b, s->f1, &c, gu, c.x, b->in_t.data, b->b_in))) return st; /* (n, P) */
    if (writer) writer->fn(writer->user, FFN_HOOK_GU, gu, n, rows);
    epilogue(b, h, NULL, gu, n); /* (n, F) */
    if (writer) writer->fn(writer->user, FFN_HOOK_H, h, n, rows);
    ffn_bf16_convert(c.h, F, h, F, n, F);
    return run(b, s->f2, &c, y, c.h, b->down_t.data, b->b_down); /* (n, D) */
}

ffn_status ffn_bf16layer_backward(ffn_bf16layer *b, float *dx, const ffn_layer_params *g,
                                  const float *dy, const float *x, int64_t n, const float *saved,
                                  float *dgu, float *h, void *ws, size_t ws_bytes) {
    bf_slot *s;
    bf_bufs c;
    ffn_status st;
    if (!b->packed_fwd) return ffn_error(FFN_ERR_INVALID_ARG, "bf16 layer: no weights packed");
    if (!b->packed_bwd && (st = pack(b, 1))) return st; /* first backward: allocates */
    if ((st = slot_for(b, n, 1, &s)) || (st = carve(b, s, n, ws, ws_bytes, &c))) return st;
    int64_t D = b->D, F = b->F, P = b->P;
    int need_x = g->gate_w || g->up_w || !saved;
    if (need_x) ffn_bf16_convert(c.x, D, x, D, n, D);
    ffn_bf16_convert(c.dy, D, dy, D, n, D);

    /* GU (n, P): saved by forward, or recomputed into the dGU buffer */
    const float *gu = saved;
    if (!saved) {
        if ((st = run(b, s->f1, &c, dgu, c.x, b->in_t.data, b->b_in))) return st;
        gu = dgu;
    }
    /* down_proj: dW_down += r(dy)ᵀ·r(H), db_down += Σ dy */
    if (g->down_w) {
        epilogue(b, h, NULL, gu, n);
        ffn_bf16_convert(c.h, F, h, F, n, F);
        ffn_bf16_convert(c.dy_pad, DY_LD(b), dy, D, n, D);
        if ((st = run(b, s->wd, &c, g->down_w, c.dy_pad, c.h, NULL))) return st;
    }
    if (g->down_b) bias_grad(g->down_b, dy, n, D, D);
    /* dH = r(dy)·r(W_down), dGU = epilogue'(dH, GU) */
    if ((st = run(b, s->b1, &c, h, c.dy, b->down.data, NULL))) return st;
    epilogue(b, dgu, h, gu, n);
    ffn_bf16_convert(c.dgu, P, dgu, P, n, P);
    /* dx = r(dGU)·r(W_in) */
    if (dx && (st = run(b, s->b2, &c, dx, c.dgu, b->in.data, NULL))) return st;
    /* dW_gate += r(dG)ᵀ·r(x), dW_up += r(dU)ᵀ·r(x); biases from dGU */
    for (int part = b->gated ? 0 : 1; part < 2; part++) {
        float *dw = part ? g->up_w : g->gate_w, *db = part ? g->up_b : g->gate_b;
        int64_t off = (part && b->gated) ? F : 0;
        if (dw && (st = run(b, s->wi, &c, dw, c.dgu + off, c.x, NULL))) return st;
        if (db) bias_grad(db, dgu + off, n, F, P);
    }
    return FFN_OK;
}

/* ---- as a back-end of the layer (nn/ffn_backend.h) ---------------------------- */

static ffn_status be_forward(void *impl, const ffn_ctx *ctx, float *y, float *gu, float *h,
                             const float *x, int64_t n, void *ws, size_t ws_bytes,
                             const ffn_neuron_hook *writer, const ffn_hook_rows *rows) {
    (void)ctx; /* the layer's (set at create) */
    return ffn_bf16layer_forward(impl, y, gu, h, x, n, ws, ws_bytes, writer, rows);
}
static ffn_status be_backward(void *impl, float *dx, const ffn_layer_params *g, const float *dy,
                              const float *x, int64_t n, const float *saved, float *dgu, float *h,
                              void *ws, size_t ws_bytes) {
    return ffn_bf16layer_backward(impl, dx, g, dy, x, n, saved, dgu, h, ws, ws_bytes);
}
static size_t be_extra(void *impl, int64_t max_n) { return ffn_bf16layer_workspace_extra(impl, max_n); }

const ffn_layer_backend ffn_layer_backend_bf16 = {
    .name = "bf16", .weights = "bf16", .forward = be_forward, .backward = be_backward,
    .workspace_extra = be_extra};
