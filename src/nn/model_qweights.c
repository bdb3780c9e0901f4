/* model_qweights.c -- low-precision weights inside the model
 * (include/ffn/quant.h): the per-tensor types and bytes, quantizing in
 * memory, attaching external bytes, the one product helper model.c calls
 * for every matrix, the embedding lookup, and handing the FFN / MoE layers
 * their weights.  The forward itself stays in model.c, ffn.c, moe.c and
 * ffn_prod.c.
 *
 * Letters: n rows, D hidden, E experts, V vocab.
 *
 * The state is one record per tensor of the table (same index): its type
 * and bytes.  fp32 tensors keep their floats in the flat block; a
 * low-precision tensor's floats there are zeroed and their pages given
 * back (madvise), so the block's resident part is only the fp32 tensors. */
#include "nn/model_internal.h"
#include "nn/ffn_quant.h"
#include "ffn/quant.h"
#include "kernels/kernels.h"
#include "kernels/qgemm.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <unistd.h>

typedef struct model_qtensor {
    ffn_qweight w; /* w.type F32 (and no data): the floats of the flat block */
    void *owned;   /* the bytes when copied or quantized here; NULL when borrowed */
} model_qtensor;

struct model_qstate {
    const ffn_model_tensor *table; /* (n) the model's table, in offset order */
    int64_t n;
    model_qtensor *t;              /* (n) */
    int64_t n_low;                 /* tensors in a type other than f32 */
    int dirty;                     /* attached since the last params_changed */
    void *keep;                    /* what borrowed bytes live in (a mapped file), or NULL */
    void (*keep_release)(void *);  /* releases `keep` when the state goes */
};

/* ---- the flat block ------------------------------------------------------ */

static size_t page_round(size_t bytes) {
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    return bytes ? (bytes + pg - 1) / pg * pg : pg;
}

float *model_params_alloc(size_t bytes) {
    void *p = mmap(NULL, page_round(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void model_params_free(float *params, size_t bytes) {
    if (params) munmap(params, page_round(bytes));
}


/* ---- the state ----------------------------------------------------------- */

void model_q_free(model_qstate *q) {
    if (!q) return;
    for (int64_t i = 0; i < q->n; i++) free(q->t[i].owned);
    free(q->t);
    if (q->keep && q->keep_release) q->keep_release(q->keep);
    free(q);
}

static ffn_status state_of(ffn_model *m, model_qstate **out) {
    model_qstate **slot = ffn_model_q_ref(m);
    if (!*slot) {
        model_qstate *q = calloc(1, sizeof *q);
        int64_t n = ffn_model_num_tensors(m);
        if (q) q->t = calloc((size_t)(n > 0 ? n : 1), sizeof *q->t);
        if (!q || !q->t) {
            free(q);
            return ffn_error(FFN_ERR_NOMEM, "low-precision weights: out of memory");
        }
        q->table = ffn_model_tensor_at(m, 0);
        q->n = n;
        for (int64_t i = 0; i < n; i++) q->t[i].w.type = FFN_GGML_TYPE_F32;
        *slot = q;
    }
    *out = *slot;
    return FFN_OK;
}

/* The index of the tensor whose floats start at offset `off`, or -1. */
static int64_t index_at(const model_qstate *q, int64_t off) {
    int64_t lo = 0, hi = q->n - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (q->table[mid].offset < off) lo = mid + 1;
        else if (q->table[mid].offset > off) hi = mid - 1;
        else return mid;
    }
    return -1;
}

static int is_low(const model_qstate *q, int64_t i) {
    return q && i >= 0 && q->t[i].w.type != FFN_GGML_TYPE_F32;
}

/* Drop tensor i's low-precision bytes (it becomes fp32 again: the caller
 * writes its floats). */
static void drop_bytes(model_qstate *q, int64_t i) {
    model_qtensor *t = &q->t[i];
    if (t->w.type != FFN_GGML_TYPE_F32) q->n_low--;
    free(t->owned);
    memset(t, 0, sizeof *t);
    t->w.type = FFN_GGML_TYPE_F32;
}

/* Tensor i holds `data` in `type` from now on (owned: free it with the
 * state); its floats are released. */
static void install(model_qstate *q, float *params, int64_t i, const ffn_qweight *w,
                    void *owned) {
    drop_bytes(q, i);
    q->t[i].w = *w;
    q->t[i].owned = owned;
    q->n_low++;
    ffn_release_floats(params + q->table[i].offset, q->table[i].numel);
    q->dirty = 1;
}

const char *model_q_first(const model_qstate *q) {
    if (!q || q->n_low == 0) return NULL;
    for (int64_t i = 0; i < q->n; i++)
        if (is_low(q, i)) return q->table[i].name;
    return NULL;
}

void model_q_synced(model_qstate *q) {
    if (q) q->dirty = 0;
}

ffn_status model_q_sync(ffn_model *m) {
    model_qstate *q = *ffn_model_q_ref(m);
    return q && q->dirty ? ffn_model_params_changed(m) : FFN_OK;
}

ffn_status model_q_keep(ffn_model *m, void *obj, void (*release)(void *)) {
    model_qstate *q;
    ffn_status st = state_of(m, &q);
    if (st) return st;
    if (q->keep && q->keep_release) q->keep_release(q->keep);
    q->keep = obj;
    q->keep_release = release;
    return FFN_OK;
}

const ffn_qweight *model_q_weight(const ffn_model *m, const ffn_model_tensor *t) {
    const model_qstate *q = m ? *ffn_model_q_ref((ffn_model *)m) : NULL;
    if (!q || !t) return NULL;
    const int64_t i = t - q->table;
    return i >= 0 && i < q->n && is_low(q, i) ? &q->t[i].w : NULL;
}

int model_q_borrowed(const ffn_model *m) {
    const model_qstate *q = m ? *ffn_model_q_ref((ffn_model *)m) : NULL;
    int n = 0;
    for (int64_t i = 0; q && i < q->n; i++) n += is_low(q, i) && !q->t[i].owned;
    return n;
}

/* ---- the product helper and the embedding -------------------------------- */

static ffn_status plain_gemm(const ffn_ctx *ctx, const float *w, int64_t rows, int64_t cols,
                             const float *x, int64_t ldx, int64_t n, float *y, int64_t ldy) {
    return ffn_gemm(ctx, 0, 1, n, rows, cols, 1.0f, x, ldx, w, cols, 0.0f, y, ldy);
}

ffn_status model_proj(const ffn_ctx *ctx, const model_qstate *q, const float *params,
                      const float *w, int64_t rows, int64_t cols, const float *x, int64_t ldx,
                      int64_t n, float *y, int64_t ldy) {
    if (!q || q->n_low == 0) return plain_gemm(ctx, w, rows, cols, x, ldx, n, y, ldy);
    const int64_t first = index_at(q, (int64_t)(w - params));
    if (first < 0)
        return ffn_error(FFN_ERR_INTERNAL, "model_proj: a weight that starts no tensor");
    int any = 0;
    for (int64_t i = first, r = 0; r < rows && i < q->n; r += q->table[i].shape[0], i++)
        any |= is_low(q, i);
    if (!any) return plain_gemm(ctx, w, rows, cols, x, ldx, n, y, ldy);
    ffn_ctx_enter(ctx);
    for (int64_t i = first, r = 0; r < rows; i++) {
        const ffn_model_tensor *t = &q->table[i];
        if (i >= q->n || t->shape[1] != cols || r + t->shape[0] > rows)
            return ffn_error(FFN_ERR_INTERNAL, "model_proj: rows %lld..%lld are no tensors of "
                             "%lld columns", (long long)r, (long long)rows, (long long)cols);
        ffn_status st = is_low(q, i)
            ? ffn_qgemm(ctx, &q->t[i].w, x, ldx, n, y + r, ldy, 0)
            : plain_gemm(ctx, params + t->offset, t->shape[0], cols, x, ldx, n, y + r, ldy);
        if (st) return ffn_error_prefix(st, "%s", t->name);
        r += t->shape[0];
    }
    return FFN_OK;
}

void model_embed_rows(const model_qstate *q, const float *params, const float *table,
                      const int32_t *tokens, int64_t n, int64_t D, float *x) {
    const int64_t i = q && q->n_low ? index_at(q, (int64_t)(table - params)) : -1;
    if (!is_low(q, i)) {
        for (int64_t r = 0; r < n; r++)
            memcpy(x + r * D, table + (int64_t)tokens[r] * D, (size_t)D * sizeof *x);
        return;
    }
    const ffn_qweight *w = &q->t[i].w;
    for (int64_t r = 0; r < n; r++) /* (types and sizes were checked when attached) */
        (void)ffn_ggml_dequantize_row(w->type, w->data + (size_t)tokens[r] * w->row_bytes,
                                      x + r * D, D);
}

/* ---- handing the layers their weights ------------------------------------ */

/* The qweight of the tensor at fp32 pointer p (NULL: none): its bytes when
 * low precision, else an f32 view of its floats. */
static ffn_status weight_at(const model_qstate *q, const float *params, const float *p,
                            ffn_qweight *out) {
    memset(out, 0, sizeof *out);
    if (!p) return FFN_OK;
    int64_t i = index_at(q, (int64_t)(p - params));
    if (i < 0) return ffn_error(FFN_ERR_INTERNAL, "low-precision weights: a weight that starts "
                                "no tensor");
    if (is_low(q, i)) {
        *out = q->t[i].w;
        return FFN_OK;
    }
    const ffn_model_tensor *t = &q->table[i];
    return ffn_qweight_init(out, FFN_GGML_TYPE_F32, t->shape[0], t->shape[1], p);
}

static int any_low(const model_qstate *q, const float *params, const float *const *ps, int n) {
    if (!q || q->n_low == 0) return 0;
    for (int k = 0; k < n; k++)
        if (ps[k] && is_low(q, index_at(q, (int64_t)(ps[k] - params)))) return 1;
    return 0;
}

static int ffn_is_low(const model_qstate *q, const float *params, const ffn_layer_params *p) {
    const float *ps[3] = {p->gate_w, p->up_w, p->down_w};
    return any_low(q, params, ps, 3);
}

static ffn_status ffn_qweights_of(const model_qstate *q, const float *params,
                                  const ffn_layer_params *p, ffn_layer_qweights *w) {
    ffn_status st;
    memset(w, 0, sizeof *w);
    if ((st = weight_at(q, params, p->gate_w, &w->gate)) ||
        (st = weight_at(q, params, p->up_w, &w->up)) ||
        (st = weight_at(q, params, p->down_w, &w->down)))
        return st;
    w->gate_b = p->gate_b;
    w->up_b = p->up_b;
    w->down_b = p->down_b;
    return FFN_OK;
}

ffn_status model_q_set_ffn(const model_qstate *q, ffn_layer *layer, const float *params,
                           const ffn_layer_params *p) {
    if (!ffn_is_low(q, params, p)) return ffn_layer_set_weights(layer, p);
    ffn_layer_qweights w;
    ffn_status st = ffn_qweights_of(q, params, p, &w);
    return st ? st : ffn_layer_set_qweights(layer, &w);
}

ffn_status model_q_set_moe(const model_qstate *q, ffn_moe *moe, const float *params,
                           const ffn_moe_params *p, int64_t E) {
    int low = 0;
    for (int64_t e = 0; e < E && !low; e++) low = ffn_is_low(q, params, &p->experts[e]);
    const float *ps[2] = {p->router_w, p->shared_gate_w};
    low = low || any_low(q, params, ps, 2) || ffn_is_low(q, params, &p->shared);
    if (!low) return ffn_moe_set_weights(moe, p);
    ffn_layer_qweights *ew = calloc((size_t)E + 1, sizeof *ew);
    const ffn_layer_qweights **ep = calloc((size_t)E + 1, sizeof *ep);
    ffn_status st = FFN_OK;
    if (!ew || !ep) st = ffn_error(FFN_ERR_NOMEM, "low-precision weights: out of memory");
    for (int64_t e = 0; e < E && !st; e++) {
        if (!ffn_is_low(q, params, &p->experts[e])) continue;
        st = ffn_qweights_of(q, params, &p->experts[e], &ew[e]);
        ep[e] = &ew[e];
    }
    ffn_layer_qweights shared;
    ffn_qweight router, shared_gate;
    ffn_moe_qweights mq = {.experts = ep};
    if (!st && p->shared.up_w && ffn_is_low(q, params, &p->shared)) {
        st = ffn_qweights_of(q, params, &p->shared, &shared);
        mq.shared = &shared;
    }
    if (!st && any_low(q, params, ps, 1)) {
        st = weight_at(q, params, p->router_w, &router);
        mq.router = &router;
    }
    if (!st && any_low(q, params, ps + 1, 1)) {
        st = weight_at(q, params, p->shared_gate_w, &shared_gate);
        mq.shared_gate = &shared_gate;
    }
    if (!st) st = ffn_moe_set_qweights(moe, p, &mq);
    free(ew);
    free(ep);
    return st;
}

/* ---- the public API: types -------------------------------------------------- */

/* The types ffn computes with (the type table's COMPUTES). */
static int computes_with(ffn_ggml_type t) { return (ffn_ggml_type_caps(t) & FFN_GGML_COMPUTES) != 0; }

/* "f32, f16, ..." of those types, for messages */
static const char *computed_list(char *buf, size_t cap) {
    return ffn_ggml_type_list(FFN_GGML_COMPUTES, ", ", buf, cap);
}

static int is_matrix(const ffn_model_tensor *t) {
    return t->kind != FFN_TENSOR_NORM && t->kind != FFN_TENSOR_ATTN_BIAS &&
           t->kind != FFN_TENSOR_MLP_BIAS;
}

int ffn_model_tensor_type(const ffn_model *m, const char *name) {
    const ffn_model_tensor *t = ffn_model_find_tensor(m, name);
    if (!t) return -1;
    const model_qstate *q = *ffn_model_q_ref((ffn_model *)m);
    return q ? (int)q->t[t - q->table].w.type : FFN_GGML_TYPE_F32;
}

size_t ffn_model_weight_bytes(const ffn_model *m) {
    if (!m) return 0;
    const model_qstate *q = *ffn_model_q_ref((ffn_model *)m);
    size_t total = 0;
    for (int64_t i = 0; i < ffn_model_num_tensors(m); i++) {
        const ffn_model_tensor *t = ffn_model_tensor_at(m, i);
        total += is_low(q, i) ? ffn_qweight_bytes(&q->t[i].w) : (size_t)t->numel * sizeof(float);
    }
    return total;
}

void ffn_quantize_options_default(ffn_quantize_options *o) {
    if (!o) return;
    o->embedding = o->head = o->attention = o->mlp = o->router = FFN_QUANT_SAME;
}

/* ---- quantizing in memory ------------------------------------------------------ */

/* The type tensor t gets under o: its kind's choice, then the fallback for
 * a row length the type's block does not divide. */
static ffn_ggml_type type_for(const ffn_model_tensor *t, ffn_ggml_type type,
                              const ffn_quantize_options *o) {
    int k = FFN_QUANT_SAME;
    switch (t->kind) {
    case FFN_TENSOR_EMBEDDING: k = o->embedding; break;
    case FFN_TENSOR_HEAD: k = o->head; break;
    case FFN_TENSOR_ATTN_WEIGHT: k = o->attention; break;
    case FFN_TENSOR_MLP_WEIGHT: k = o->mlp; break;
    case FFN_TENSOR_ROUTER: k = o->router; break;
    default: return FFN_GGML_TYPE_F32;
    }
    return ffn_ggml_type_for_cols(k == FFN_QUANT_SAME ? type : (ffn_ggml_type)k, t->shape[1]);
}

static ffn_status check_type(int k, const char *field) {
    if (k == FFN_QUANT_SAME) return FFN_OK;
    char list[256];
    if (k < 0 || k >= FFN_GGML_TYPE_COUNT || !computes_with((ffn_ggml_type)k))
        return ffn_error(FFN_ERR_UNSUPPORTED, "ffn_model_quantize: %s: type %d (%s) is not one "
                         "ffn computes with (%s)", field, k,
                         k >= 0 && k < FFN_GGML_TYPE_COUNT ? ffn_ggml_type_name((ffn_ggml_type)k)
                                                           : "?",
                         computed_list(list, sizeof list));
    return FFN_OK;
}

/* Quantize tensor i (fp32 floats at src) into new bytes of type tt. */
static ffn_status quantize_tensor(const ffn_model_tensor *t, const float *src, ffn_ggml_type tt,
                                  ffn_qweight *w, void **bytes) {
    size_t rb, total;
    ffn_status st = ffn_ggml_row_size(tt, t->shape[1], &rb);
    if (st) return ffn_error_prefix(st, "%s", t->name);
    if (ffn_mul_size(rb, (size_t)t->shape[0], &total))
        return ffn_error(FFN_ERR_OVERFLOW, "%s: quantized bytes overflow", t->name);
    uint8_t *dst = malloc(total ? total : 1);
    if (!dst)
        return ffn_error(FFN_ERR_NOMEM, "%s: out of memory (%zu bytes of %s)", t->name, total,
                         ffn_ggml_type_name(tt));
    const int64_t rows = t->shape[0], cols = t->shape[1];
    int64_t bad = -1;
#pragma omp parallel for schedule(dynamic, 16) if (rows * cols > 65536)
    for (int64_t r = 0; r < rows; r++) {
        if (ffn_ggml_quantize_row(tt, src + r * cols, dst + (size_t)r * rb, cols) != FFN_OK) {
#pragma omp critical(ffn_model_quantize_error)
            if (bad < 0 || r < bad) bad = r;
        }
    }
    if (bad >= 0) {
        free(dst);
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: row %lld cannot be quantized to %s (a value "
                         "that is not finite?)", t->name, (long long)bad, ffn_ggml_type_name(tt));
    }
    if ((st = ffn_qweight_init(w, tt, rows, cols, dst))) {
        free(dst);
        return ffn_error_prefix(st, "%s", t->name);
    }
    *bytes = dst;
    return FFN_OK;
}

ffn_status ffn_model_quantize(ffn_model *m, ffn_ggml_type type, const ffn_quantize_options *opt) {
    if (!m) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_model_quantize: model is NULL");
    ffn_quantize_options o;
    if (opt) o = *opt;
    else ffn_quantize_options_default(&o);
    if ((int)type == FFN_QUANT_SAME)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_model_quantize: type is not a ggml type");
    ffn_status st;
    if ((st = check_type((int)type, "type")) || (st = check_type(o.embedding, "embedding")) ||
        (st = check_type(o.head, "head")) || (st = check_type(o.attention, "attention")) ||
        (st = check_type(o.mlp, "mlp")) || (st = check_type(o.router, "router")))
        return st;
    model_qstate *q;
    if ((st = state_of(m, &q))) return st;
    float *params = ffn_model_params(m, NULL);
    for (int64_t i = 0; i < q->n && !st; i++) {
        const ffn_model_tensor *t = &q->table[i];
        if (!is_matrix(t) || is_low(q, i)) continue;
        ffn_ggml_type tt = type_for(t, type, &o);
        if (tt == FFN_GGML_TYPE_F32) continue;
        ffn_qweight w;
        void *bytes = NULL;
        if ((st = quantize_tensor(t, params + t->offset, tt, &w, &bytes))) break;
        install(q, params, i, &w, bytes);
    }
    /* the layers follow whatever was converted, also after a failure */
    char msg[512];
    if (st) snprintf(msg, sizeof msg, "%s", ffn_last_error());
    ffn_status st2 = q->dirty ? ffn_model_params_changed(m) : FFN_OK;
#ifdef __GLIBC__
    /* the layers' packed fp32 copies were freed inside the heap: give
     * their pages back, or the process keeps them resident */
    malloc_trim(0);
#endif
    if (st) return ffn_error(st, "ffn_model_quantize: %s", msg);
    return st2;
}

/* ---- attaching bytes ---------------------------------------------------------- */

ffn_status ffn_model_set_tensor_data(ffn_model *m, const char *name, ffn_ggml_type type,
                                     const void *bytes, size_t nbytes, int borrow) {
    static const char *fn = "ffn_model_set_tensor_data";
    if (!m || !name || (!bytes && nbytes))
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: model, name and bytes must not be NULL", fn);
    const ffn_model_tensor *t = ffn_model_find_tensor(m, name);
    if (!t) return ffn_error(FFN_ERR_MISSING, "%s: %s: no such tensor in the model", fn, name);
    if ((int)type < 0 || (int)type >= FFN_GGML_TYPE_COUNT || !ffn_ggml_block_size(type))
        return ffn_error(FFN_ERR_UNSUPPORTED, "%s: %s: unknown ggml type %d", fn, name, (int)type);
    model_qstate *q;
    ffn_status st = state_of(m, &q);
    if (st) return st;
    const int64_t i = t - q->table;
    float *params = ffn_model_params(m, NULL), *dst = params + t->offset;
    const int matrix = is_matrix(t) && t->ndim == 2;
    /* rows of `cols` elements (a vector is one row) */
    const int64_t rows = matrix ? t->shape[0] : 1, cols = matrix ? t->shape[1] : t->numel;
    size_t rb, expect;
    if ((st = ffn_ggml_row_size(type, cols, &rb)))
        return ffn_error_prefix(st, "%s: %s (%lld, %lld)", fn, name, (long long)t->shape[0],
                                (long long)t->shape[1]);
    if (ffn_mul_size(rb, (size_t)rows, &expect))
        return ffn_error(FFN_ERR_OVERFLOW, "%s: %s: byte size overflows", fn, name);
    if (nbytes != expect)
        return ffn_error(FFN_ERR_SHAPE, "%s: %s: %s (%lld, %lld) is %zu bytes, got %zu", fn, name,
                         ffn_ggml_type_name(type), (long long)t->shape[0], (long long)t->shape[1],
                         expect, nbytes);
    if (type == FFN_GGML_TYPE_F32 || !matrix) {
        /* into the flat block: fp32 as it is, a norm or bias decoded */
        if (type != FFN_GGML_TYPE_F32 && !ffn_ggml_can_dequantize(type))
            return ffn_error(FFN_ERR_UNSUPPORTED, "%s: %s: type %s cannot be decoded", fn, name,
                             ffn_ggml_type_name(type));
        drop_bytes(q, i);
        if (type == FFN_GGML_TYPE_F32) memcpy(dst, bytes, nbytes);
        else if ((st = ffn_ggml_dequantize_row(type, bytes, dst, cols)))
            return ffn_error_prefix(st, "%s: %s", fn, name);
        q->dirty = 1;
        return FFN_OK;
    }
    char list[256];
    if (!computes_with(type))
        return ffn_error(FFN_ERR_UNSUPPORTED, "%s: %s: type %s is not one ffn computes with "
                         "(%s)", fn, name, ffn_ggml_type_name(type), computed_list(list, sizeof list));
    void *owned = NULL;
    const void *data = bytes;
    if (!borrow) {
        owned = malloc(nbytes ? nbytes : 1);
        if (!owned)
            return ffn_error(FFN_ERR_NOMEM, "%s: %s: out of memory (%zu bytes)", fn, name, nbytes);
        memcpy(owned, bytes, nbytes);
        data = owned;
    }
    ffn_qweight w;
    if ((st = ffn_qweight_init(&w, type, rows, cols, data))) {
        free(owned);
        return ffn_error_prefix(st, "%s: %s", fn, name);
    }
    install(q, params, i, &w, owned);
    return FFN_OK;
}
