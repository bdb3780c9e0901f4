/* ffn_prod.c -- the products of one projection, the back-end picked by the
 * number type of its weight (see ffn_prod.h).
 *
 * The oneDNN kinds (fp32, bf16) share one engine: packs of W made once and
 * refreshed in place (forward's Wᵀ at set, backward's W at the first
 * backward), primitives per row count n cached in PROD_SLOTS slots (least
 * recently used replaced).  bf16 differs only in the operands: W is rounded
 * to a plain bf16 copy and reordered by ffn_bf16_packer, the activations
 * are rounded into the workspace before each product, and the weight
 * gradient is a bf16 primitive too (fp32 runs it on ffn_wgrad / sgemm).
 *
 * An fp32 product whose primitive cannot be made, or whose scratchpad does
 * not fit, runs on ffn_gemm over the plain weights (the same numbers within
 * rounding); a bf16 one fails (bf16 has no other engine).
 *
 * Determinism: every product is a fixed primitive or kernel for (n, thread
 * count), so results are bitwise reproducible run to run at a fixed thread
 * count (ffn.c fixes the team from n).  The streaming kernels and ffn_wgrad
 * are bitwise equal at every thread count. */
#include "nn/ffn_prod.h"
#include "nn/ffn_ew.h"
#include "kernels/bf16.h"

#include <stdlib.h>
#include <string.h>

enum { PROD_SLOTS = 8 };

typedef struct prod_slot {
    int64_t n; /* 0: empty */
    uint64_t last_use;
    int backward_made;
    ffn_mm *fwd, *bwd, *wg; /* wg: bf16's weight gradient */
} prod_slot;

struct ffn_prod {
    ffn_ctx *ctx;
    ffn_prod_role role;
    ffn_prod_kind kind;
    int parts, have;
    int64_t rows, cols, part_rows;
    const float *w[2];     /* fp32 masters */
    const float *bias;     /* (rows) or NULL */
    ffn_qweight q[2];      /* GGML kind */
    ffn_mm_engine *engine; /* borrowed */
    ffn_mm_packed fwd, bwd; /* Wᵀ (cols, rows) and W (rows, cols) as B */
    int packed_fwd, packed_bwd, bwd_failed;
    ffn_packed_view view;
    int have_view, use_view;
    uint16_t *wb;                /* bf16: the plain copy (rows, cols) the packs come from */
    ffn_bf16_packer *packer[2];  /* bf16: fwd, bwd */
    prod_slot slots[PROD_SLOTS];
    uint64_t clock;
};

/* Backward steps with at most this many rows run fp32's weight gradients
 * on ffn_wgrad (register tiles over all of K = n; dW read and written
 * once), larger ones on ffn_gemm (dnnl_sgemm).  Measured per K on (M, N,
 * K) = (2816, 1024, K), one thread, process CPU time (bench/wgrad_kernel.c,
 * a loaded machine): ffn_wgrad / the faster of sgemm and the matmul
 * primitive = 0.6-0.7 at K = 16, 0.8 at 64, 0.88 at 96, 1.06-1.10 at 128,
 * 1.15-1.19 at 256.  bench/bench_backward.sh prints the same per shape. */
#define WGRAD_MAX_N 96

/* bf16's dy copy for the weight gradient has row stride rows + this pad,
 * so that oneDNN takes its gemm kernel (measured 2.0-2.7 ms against
 * brgemm's 3.0-3.9 over a transposed A, which it picks when lda = M, at
 * (1024, 2816), n = 64, one thread). */
#define BF_PAD 32

/* oneDNN's bf16 scratchpads at the shapes measured are far below this;
 * the size must not depend on whether weights are set yet (a model sizes
 * its workspace before). */
#define BF_SCRATCH_RESERVE ((size_t)2 << 20)

ffn_status ffn_prod_create(ffn_ctx *ctx, ffn_prod_role role, ffn_prod_kind kind, int parts,
                           int64_t rows, int64_t cols, ffn_prod **out) {
    *out = NULL;
    if (parts < 1 || parts > 2 || rows % parts)
        return ffn_error(FFN_ERR_INVALID_ARG, "projection: %d parts of %lld rows", parts,
                         (long long)rows);
    ffn_prod *p = calloc(1, sizeof *p);
    if (!p) return ffn_error(FFN_ERR_NOMEM, "projection: out of memory");
    p->ctx = ctx, p->role = role, p->kind = kind, p->parts = parts;
    p->rows = rows, p->cols = cols, p->part_rows = rows / parts;
    *out = p;
    return FFN_OK;
}

static void drop_slots(ffn_prod *p) {
    for (int i = 0; i < PROD_SLOTS; i++) {
        prod_slot *s = &p->slots[i];
        ffn_mm_free(s->fwd), ffn_mm_free(s->bwd), ffn_mm_free(s->wg);
        memset(s, 0, sizeof *s);
    }
}

/* Everything the kind held (packs, copies, primitives). */
static void drop_kind(ffn_prod *p) {
    drop_slots(p);
    ffn_mm_packed_free(&p->fwd), ffn_mm_packed_free(&p->bwd);
    for (int i = 0; i < 2; i++) ffn_bf16_packer_free(p->packer[i]), p->packer[i] = NULL;
    ffn_free_aligned(p->wb);
    p->wb = NULL;
    p->packed_fwd = p->packed_bwd = p->bwd_failed = p->have_view = 0;
    memset(p->q, 0, sizeof p->q);
    p->have = 0;
}

void ffn_prod_free(ffn_prod *p) {
    if (!p) return;
    drop_kind(p);
    free(p);
}

ffn_prod_kind ffn_prod_kind_of(const ffn_prod *p) { return p->kind; }
int ffn_prod_trains(const ffn_prod *p) { return p->kind != FFN_PROD_GGML; }
const char *ffn_prod_type_name(const ffn_prod *p) {
    switch (p->kind) {
    case FFN_PROD_FP32: return "fp32";
    case FFN_PROD_BF16: return "bf16";
    case FFN_PROD_GGML: break;
    }
    return ffn_ggml_type_name(p->q[0].type);
}
const float *ffn_prod_f32_part(const ffn_prod *p, int part) {
    return p->kind == FFN_PROD_FP32 && part < p->parts ? p->w[part] : NULL;
}
const ffn_packed_view *ffn_prod_view(const ffn_prod *p) {
    return p->use_view ? &p->view : NULL;
}
void ffn_prod_use_view(ffn_prod *p, int on) { p->use_view = on && p->have_view; }
int ffn_prod_has_view(const ffn_prod *p) { return p->have_view; }

/* ---- the oneDNN kinds: shapes, packs, primitives --------------------------- */

/* forward y (n, rows) = x (n, cols) · B, B = Wᵀ (cols, rows) packed */
static ffn_mm_desc desc_fwd(const ffn_prod *p, int64_t n) {
    return (ffn_mm_desc){.M = n, .N = p->rows, .K = p->cols, .lda = p->cols,
                         .b_kind = FFN_MM_B_PACKED, .ldc = p->rows, .bias = p->bias != NULL,
                         .bf16 = p->kind == FFN_PROD_BF16};
}
/* backward dx (n, cols) = dy (n, rows) · B, B = W (rows, cols) packed */
static ffn_mm_desc desc_bwd(const ffn_prod *p, int64_t n) {
    return (ffn_mm_desc){.M = n, .N = p->cols, .K = p->rows, .lda = p->rows,
                         .b_kind = FFN_MM_B_PACKED, .ldc = p->cols,
                         .bf16 = p->kind == FFN_PROD_BF16};
}
/* bf16 wgrad dW (part_rows, cols) += dyᵀ (part_rows, n) · x (n, cols) */
static ffn_mm_desc desc_wg(const ffn_prod *p, int64_t n) {
    return (ffn_mm_desc){.M = p->part_rows, .N = p->cols, .K = n, .a_trans = 1,
                         .lda = p->part_rows + BF_PAD, .b_kind = FFN_MM_B_PLAIN, .ldb = p->cols,
                         .ldc = p->cols, .accumulate = 1, .bf16 = 1};
}

/* fp32: pack forward's Wᵀ or backward's W from the masters (the two parts
 * concatenated while packing unless they already are one block).  Failure
 * is not an error: the products then run on ffn_gemm. */
static void pack_f32(ffn_prod *p, int backward) {
    ffn_mm_packed *pk = backward ? &p->bwd : &p->fwd;
    if (backward) p->packed_bwd = 0;
    else p->packed_fwd = p->have_view = 0;
    if (!p->engine) {
        ffn_mm_packed_free(pk);
        return;
    }
    const int64_t R = p->part_rows, C = p->cols;
    const float *w = p->w[0];
    float *concat = NULL;
    if (p->parts == 2 && p->w[1] != p->w[0] + (size_t)R * (size_t)C) {
        size_t half = (size_t)R * (size_t)C;
        concat = ffn_malloc_aligned(2 * half * sizeof(float));
        if (!concat) return;
        memcpy(concat, p->w[0], half * sizeof(float));
        memcpy(concat + half, p->w[1], half * sizeof(float));
        w = concat;
    }
    const int64_t probe = 64; /* the packed layout does not depend on M (checked for 1..4096) */
    ffn_mm_desc d = backward ? desc_bwd(p, probe) : desc_fwd(p, probe);
    d.b_kind = backward ? FFN_MM_B_PLAIN : FFN_MM_B_PLAIN_T; /* W (rows, cols) as it is stored */
    d.ldb = C;
    /* in place when the layout is unchanged: the refresh after every
     * optimizer step allocates nothing and the primitives stay valid */
    int ok = !ffn_mm_repack(p->engine, &d, w, pk);
    ffn_free_aligned(concat);
    if (!ok) {
        ffn_mm_packed_free(pk);
        return;
    }
    if (backward) {
        p->packed_bwd = 1;
        return;
    }
    p->packed_fwd = 1;
    p->have_view = ffn_simd() == FFN_SIMD_AVX512 && ffn_mm_packed_view(&p->fwd, C, p->rows, &p->view);
}

/* bf16: pack from the plain copy; the layout and its reorder are made the
 * first time, later packs only run the reorder into the same buffer. */
static ffn_status pack_bf16(ffn_prod *p, int backward) {
    ffn_mm_packed *pk = backward ? &p->bwd : &p->fwd;
    ffn_bf16_packer **pp = &p->packer[backward];
    ffn_mm_desc d = backward ? desc_bwd(p, 64) : desc_fwd(p, 64); /* layouts do not depend on M */
    ffn_status st = FFN_OK;
    if (!*pp) {
        ffn_mm_packed_free(pk);
        st = ffn_mm_pack_layout(p->engine, &d, pk);
        /* B (K, N) from the plain copy W (rows, cols): forward reads it as
         * Wᵀ (transposed), backward as it is; ld cols both */
        if (!st) st = ffn_bf16_packer_create(d.K, d.N, p->cols, !backward, pk, pp);
    }
    if (!st) st = ffn_bf16_packer_run(*pp, p->ctx, p->wb, pk);
    if (st) return ffn_error_prefix(st, "bf16 products: packing the %s weights",
                                    backward ? "backward" : "forward");
    if (backward) p->packed_bwd = 1;
    else p->packed_fwd = 1;
    return FFN_OK;
}

ffn_status ffn_prod_set_f32(ffn_prod *p, ffn_mm_engine *engine, const float *const *w,
                            const float *bias, int bf16) {
    ffn_prod_kind kind = bf16 ? FFN_PROD_BF16 : FFN_PROD_FP32;
    if (bf16 && !ffn_bf16_hw())
        return ffn_error(FFN_ERR_UNSUPPORTED,
                         "precision bf16: this CPU (or FFN_SIMD=%s) gives no AVX-512 with "
                         "AVX512_BF16 (vdpbf16ps), which bf16 products need; use precision fp32",
                         getenv("FFN_SIMD") ? getenv("FFN_SIMD") : "unset");
    if (bf16 && !engine)
        return ffn_error(FFN_ERR_INTERNAL, "bf16 products: no oneDNN engine");
    if (p->kind != kind || p->engine != engine) drop_kind(p);
    int bias_changed = (p->bias != NULL) != (bias != NULL);
    p->kind = kind, p->engine = engine;
    for (int i = 0; i < p->parts; i++) p->w[i] = w[i];
    p->bias = bias;
    p->have = 0;
    if (kind == FFN_PROD_BF16) {
        if (bias_changed || !p->packed_fwd) drop_slots(p); /* primitives keep the packs' layouts */
        const int64_t R = p->part_rows, C = p->cols;
        if (!p->wb && !(p->wb = ffn_malloc_aligned((size_t)p->rows * (size_t)C * sizeof(uint16_t))))
            return ffn_error(FFN_ERR_NOMEM, "bf16 products: out of memory for the bf16 weights");
        for (int i = 0; i < p->parts; i++) /* rounded from the masters, parts stacked in place */
            ffn_bf16_convert(p->wb + (size_t)i * (size_t)R * (size_t)C, C, w[i], C, R, C);
        int had_backward = p->packed_bwd;
        ffn_status st = pack_bf16(p, 0);
        if (!st && had_backward) st = pack_bf16(p, 1);
        p->have = st == FFN_OK;
        return st;
    }
    /* fp32: repack; backward's only if backward has run (it is made then).
     * The primitives do not hold the packs' addresses (passed at every run),
     * only their layouts: kept when every pack was rewritten in place. */
    int had_backward = p->packed_bwd, had_fwd = p->packed_fwd;
    const void *was[2] = {p->fwd.data, p->bwd.data};
    pack_f32(p, 0);
    if (had_backward) pack_f32(p, 1);
    const void *now[2] = {p->fwd.data, p->bwd.data};
    if (bias_changed || !had_fwd || !p->packed_fwd || (had_backward && !p->packed_bwd) ||
        memcmp(was, now, sizeof was))
        drop_slots(p);
    p->have = 1;
    return FFN_OK;
}

ffn_status ffn_prod_set_ggml(ffn_prod *p, const ffn_qweight *q, const float *bias) {
    drop_kind(p);
    p->kind = FFN_PROD_GGML;
    p->engine = NULL;
    p->w[0] = p->w[1] = NULL;
    for (int i = 0; i < p->parts; i++) {
        p->q[i] = q[i];
        p->q[i].packed = NULL; /* the caller's; this copy packs nothing */
    }
    p->bias = bias;
    p->have = 1;
    return FFN_OK;
}

static ffn_status make(ffn_prod *p, ffn_mm_desc d, const ffn_mm_packed *pk, ffn_mm **m,
                       const char *what) {
    ffn_status st = ffn_mm_create(p->engine, &d, pk, m);
    return st ? ffn_error_prefix(st, "bf16 products: %s at %lld rows", what,
                                 (long long)(d.a_trans ? d.K : d.M))
              : FFN_OK;
}

/* The primitives for n rows (backward's too when asked): cached, else made
 * in the least recently used slot.  fp32: a primitive that cannot be made
 * stays NULL (ffn_gemm then); bf16: an error. */
static ffn_status slot_for(ffn_prod *p, int64_t n, int backward, prod_slot **out) {
    *out = NULL;
    if (!p->packed_fwd) return FFN_OK;
    const int bf = p->kind == FFN_PROD_BF16;
    prod_slot *s = NULL, *victim = &p->slots[0];
    ffn_status st = FFN_OK;
    for (int i = 0; i < PROD_SLOTS && !s; i++) {
        if (p->slots[i].n == n) s = &p->slots[i];
        else if (p->slots[i].last_use < victim->last_use) victim = &p->slots[i];
    }
    if (!s) {
        s = victim;
        ffn_mm_free(s->fwd), ffn_mm_free(s->bwd), ffn_mm_free(s->wg);
        memset(s, 0, sizeof *s);
        st = make(p, desc_fwd(p, n), &p->fwd, &s->fwd, "x·Wᵀ");
        if (st && bf) {
            memset(s, 0, sizeof *s);
            return st;
        }
        s->n = n;
    }
    s->last_use = ++p->clock;
    if (backward && !s->backward_made) {
        if (!bf) {
            s->backward_made = 1;
            if (p->packed_bwd) (void)make(p, desc_bwd(p, n), &p->bwd, &s->bwd, "dy·W");
        } else {
            if ((st = make(p, desc_bwd(p, n), &p->bwd, &s->bwd, "dy·W")) ||
                (st = make(p, desc_wg(p, n), NULL, &s->wg, "dyᵀ·x")))
                return st;
            s->backward_made = 1;
        }
    }
    *out = s;
    return FFN_OK;
}

static size_t slot_scratch(const prod_slot *s) {
    size_t m = 0;
    if (!s) return 0;
    const ffn_mm *all[3] = {s->fwd, s->bwd, s->wg};
    for (int i = 0; i < 3; i++)
        if (ffn_mm_scratch_bytes(all[i]) > m) m = ffn_mm_scratch_bytes(all[i]);
    return m;
}

/* bf16 operand bytes for n rows: x (n, cols), dy (n, rows + pad) */
static size_t bf_bytes(const ffn_prod *p, int64_t n) {
    size_t per = (size_t)n * sizeof(uint16_t);
    return ffn_align64(per * (size_t)p->cols) + ffn_align64(per * (size_t)(p->rows + BF_PAD)) + 64;
}

size_t ffn_prod_workspace(ffn_prod *p, int64_t max_n) {
    if (!p || max_n <= 0 || p->kind == FFN_PROD_GGML) return 0;
    prod_slot *s = NULL;
    if (p->have) (void)slot_for(p, max_n, p->packed_bwd, &s); /* made ahead */
    if (p->kind == FFN_PROD_FP32) return slot_scratch(s);
    return bf_bytes(p, max_n) + BF_SCRATCH_RESERVE;
}

/* ---- bf16 operands in the workspace ----------------------------------------- */

typedef struct bf_ws {
    uint16_t *x, *dy; /* (n, cols), (n, rows + pad) */
    void *scratch;
    size_t scratch_bytes;
} bf_ws;

static ffn_status bf_carve(const ffn_prod *p, const prod_slot *s, int64_t n, void *ws,
                           size_t ws_bytes, bf_ws *c) {
    size_t need = bf_bytes(p, n) + slot_scratch(s);
    if (!ws || ws_bytes < need)
        return ffn_error(FFN_ERR_WORKSPACE, "bf16 products: %zu bytes left in the workspace, "
                         "%lld rows need %zu for the bf16 operands and the scratchpad (see "
                         "ffn_layer_workspace_size)", ws_bytes, (long long)n, need);
    uintptr_t a = ((uintptr_t)ws + 63) & ~(uintptr_t)63, end = (uintptr_t)ws + ws_bytes;
    size_t per = (size_t)n * sizeof(uint16_t);
    c->x = (uint16_t *)a, a += ffn_align64(per * (size_t)p->cols);
    c->dy = (uint16_t *)a, a += ffn_align64(per * (size_t)(p->rows + BF_PAD));
    c->scratch = (void *)a;
    c->scratch_bytes = (size_t)(end - a);
    return FFN_OK;
}

/* ---- the products ------------------------------------------------------------ */

static ffn_status refuse(const ffn_prod *p, const char *what) {
    return ffn_error(FFN_ERR_UNSUPPORTED, "%s: the projection holds low-precision weights "
                     "(%s; inference only)", what, ffn_ggml_type_name(p->q[0].type));
}

static ffn_status check(const ffn_prod *p, const char *what) {
    return p->have ? FFN_OK
                   : ffn_error(FFN_ERR_INVALID_ARG, "%s: the projection has no weights", what);
}

/* fp32, small n: gemv.c's streaming kernels, as the layer's fused kernel
 * runs them (same bits) */
static void stream_forward(const ffn_prod *p, float *y, const float *x, int64_t n) {
    const ffn_packed_view *v = ffn_prod_view(p);
    if (p->role == FFN_PROD_IN) {
        ffn_decode_weights w = {.w_gate = p->parts == 2 ? p->w[0] : NULL,
                                .w_up = p->w[p->parts - 1], .in_t = v, .b_in = p->bias};
        ffn_decode_project_in(p->ctx, y, x, n, p->cols, p->part_rows, &w);
    } else {
        ffn_decode_weights w = {.w_down = p->w[0], .down_t = v, .b_down = p->bias};
        ffn_decode_project_down(p->ctx, y, x, n, p->rows, p->cols, &w);
    }
}

static int stream_n(const ffn_prod *p, int64_t n) { return n <= ffn_stream_max_n(p->use_view); }

ffn_status ffn_prod_forward(ffn_prod *p, float *y, int64_t ldy, const float *x, int64_t n,
                            void *ws, size_t ws_bytes) {
    ffn_status st;
    if ((st = check(p, "forward"))) return st;
    const int64_t R = p->part_rows, C = p->cols;
    if (p->kind == FFN_PROD_GGML) {
        for (int i = 0; i < p->parts; i++)
            if ((st = ffn_qgemm(p->ctx, &p->q[i], x, C, n, y + i * R, ldy, 0))) return st;
        if (p->bias) ffn_ew_add_bias_rows(y, p->bias, n, p->rows, ldy);
        return FFN_OK;
    }
    prod_slot *s = NULL;
    if (p->kind == FFN_PROD_BF16) {
        bf_ws c;
        if ((st = slot_for(p, n, 0, &s)) || (st = bf_carve(p, s, n, ws, ws_bytes, &c))) return st;
        ffn_bf16_convert(c.x, C, x, C, n, C);
        return ffn_mm_run(p->engine, s->fwd, y, c.x, p->fwd.data, p->bias, c.scratch,
                          c.scratch_bytes);
    }
    if (ldy == p->rows && stream_n(p, n)) {
        stream_forward(p, y, x, n);
        return FFN_OK;
    }
    (void)slot_for(p, n, 0, &s);
    if (s && s->fwd && ldy == p->rows &&
        !ffn_mm_run(p->engine, s->fwd, y, x, p->fwd.data, p->bias, ws, ws_bytes))
        return FFN_OK; /* (the primitive adds the bias itself) */
    for (int i = 0; i < p->parts; i++)
        if ((st = ffn_gemm(p->ctx, 0, 1, n, R, C, 1.0f, x, C, p->w[i], C, 0.0f, y + i * R, ldy)))
            return st;
    if (p->bias) ffn_ew_add_bias_rows(y, p->bias, n, p->rows, ldy);
    return FFN_OK;
}

ffn_status ffn_prod_backward(ffn_prod *p, float *dx, const float *dy, int64_t ldy, int64_t n,
                             void *ws, size_t ws_bytes) {
    ffn_status st;
    if ((st = check(p, "backward"))) return st;
    if (p->kind == FFN_PROD_GGML) return refuse(p, "backward");
    const int64_t R = p->part_rows, C = p->cols;
    if (p->kind == FFN_PROD_FP32 && p->packed_fwd && !p->packed_bwd && !p->bwd_failed) {
        pack_f32(p, 1); /* the first backward: allocates */
        p->bwd_failed = !p->packed_bwd;
    } else if (p->kind == FFN_PROD_BF16 && !p->packed_bwd && (st = pack_bf16(p, 1))) {
        return st;
    }
    prod_slot *s = NULL;
    if (p->kind == FFN_PROD_BF16) {
        bf_ws c;
        if ((st = slot_for(p, n, 1, &s)) || (st = bf_carve(p, s, n, ws, ws_bytes, &c))) return st;
        ffn_bf16_convert(c.dy, p->rows, dy, ldy, n, p->rows);
        return ffn_mm_run(p->engine, s->bwd, dx, c.dy, p->bwd.data, NULL, c.scratch,
                          c.scratch_bytes);
    }
    (void)slot_for(p, n, 1, &s);
    if (s && s->bwd && ldy == p->rows &&
        !ffn_mm_run(p->engine, s->bwd, dx, dy, p->bwd.data, NULL, ws, ws_bytes))
        return FFN_OK;
    for (int i = 0; i < p->parts; i++)
        if ((st = ffn_gemm(p->ctx, 0, 0, n, C, R, 1.0f, dy + i * R, ldy, p->w[i], C,
                           i ? 1.0f : 0.0f, dx, C)))
            return st;
    return FFN_OK;
}

ffn_status ffn_prod_wgrad(ffn_prod *p, float *dw, const float *dy, int64_t ldy, const float *x,
                          int64_t n, void *ws, size_t ws_bytes) {
    ffn_status st;
    if ((st = check(p, "weight gradient"))) return st;
    if (p->kind == FFN_PROD_GGML) return refuse(p, "weight gradient");
    const int64_t R = p->part_rows, C = p->cols;
    if (p->kind == FFN_PROD_FP32) {
        if (n <= WGRAD_MAX_N && ffn_simd() != FFN_SIMD_SCALAR) {
            ffn_wgrad_mt(p->ctx, dw, C, dy, ldy, x, C, R, C, n);
            return FFN_OK;
        }
        return ffn_gemm(p->ctx, 1, 0, R, C, n, 1.0f, dy, ldy, x, C, 1.0f, dw, C);
    }
    prod_slot *s = NULL;
    bf_ws c;
    if (!p->packed_bwd && (st = pack_bf16(p, 1))) return st;
    if ((st = slot_for(p, n, 1, &s)) || (st = bf_carve(p, s, n, ws, ws_bytes, &c))) return st;
    ffn_bf16_convert(c.x, C, x, C, n, C);
    ffn_bf16_convert(c.dy, R + BF_PAD, dy, ldy, n, R);
    return ffn_mm_run(p->engine, s->wg, dw, c.dy, c.x, NULL, c.scratch, c.scratch_bytes);
}
