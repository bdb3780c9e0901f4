/* qgemm_batch.c -- the other way to multiply by a low-precision weight at
 * large n: the weight decoded once to bf16 and oneDNN's bf16 matmul
 * (bf16 activations and weights, fp32 accumulation and output).  It is kept
 * as the measured alternative of the int8 kernels (bench/qgemm_batch.sh
 * times both; the table in qgemm.c records the result) and for callers that
 * can afford a bf16 copy of the weight.
 *
 * Creating decodes the weight (rows, cols) into bf16, read as Wᵀ (cols,
 * rows) through strides, and builds the primitives (below).  Creating
 * allocates; running does not: x's bf16 copy and the fp32 result live in
 * the object, and a mutex makes concurrent runs on one object take turns.
 * One oneDNN engine serves every object. */
#include "kernels/qgemm_batch.h"
#include "kernels/kernels.h"
#include "base/dtype.h"

#include <dnnl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Two primitives of fixed row counts: runs of BF_M_BIG rows, and the rest
 * in runs of BF_M_SMALL (the last one padded with zero rows).  Fixed shapes
 * let oneDNN pick its blocking once (a run-time row count measured 5×
 * slower at n = 4) and keep every object made at creation. */
enum { BF_M_BIG = 64, BF_M_SMALL = 8 };

struct ffn_qgemm_bf16mm {
    int64_t rows, cols;
    uint16_t *wb; /* (rows, cols) bf16 */
    uint16_t *xb; /* (BF_M_BIG, cols) bf16 */
    float *yb;    /* (BF_M_BIG, rows) */
    dnnl_stream_t stream;
    dnnl_primitive_t prim[2];
    dnnl_memory_t src[2], dst[2], wei, scratch;
    void *scratch_buf;
    pthread_mutex_t lock;
    int lock_ok;
};

#define BF_TRY(call, what) FFN_DNNL_TRY("oneDNN bf16 matmul", call, what)

ffn_status ffn_qgemm_bf16mm_create(const ffn_qweight *w, ffn_qgemm_bf16mm **out) {
    ffn_status st = FFN_OK;
    dnnl_primitive_desc_t pd[2] = {NULL, NULL};
    dnnl_primitive_attr_t attr = NULL;
    float *row = NULL;
    *out = NULL;
    if (!w || w->rows < 1 || w->cols < 1)
        return ffn_error(FFN_ERR_INVALID_ARG, "bf16 matmul: empty weight");
    dnnl_engine_t bf_engine;
    if ((st = ffn_dnnl_cpu_engine(&bf_engine))) return ffn_error_prefix(st, "bf16 matmul");
    ffn_qgemm_bf16mm *m = calloc(1, sizeof *m);
    if (!m) return ffn_error(FFN_ERR_NOMEM, "bf16 matmul: out of memory");
    m->rows = w->rows, m->cols = w->cols;
    m->lock_ok = pthread_mutex_init(&m->lock, NULL) == 0;
    m->wb = ffn_malloc_aligned((size_t)(w->rows * w->cols) * 2);
    m->xb = ffn_malloc_aligned((size_t)(BF_M_BIG * w->cols) * 2);
    m->yb = ffn_malloc_aligned((size_t)(BF_M_BIG * w->rows) * 4);
    row = malloc((size_t)w->cols * sizeof *row);
    if (!m->lock_ok || !m->wb || !m->xb || !m->yb || !row) {
        st = ffn_error(FFN_ERR_NOMEM, "bf16 matmul: out of memory for a %lld × %lld bf16 copy",
                       (long long)w->rows, (long long)w->cols);
        goto fail;
    }
    for (int64_t r = 0; r < w->rows; r++) {
        if ((st = ffn_ggml_dequantize_row(w->type, w->data + (size_t)r * w->row_bytes, row, w->cols)))
            goto fail;
        for (int64_t c = 0; c < w->cols; c++) m->wb[r * w->cols + c] = ffn_f32_to_bf16(row[c]);
    }
    BF_TRY(dnnl_stream_create(&m->stream, bf_engine, dnnl_stream_default_flags), "stream create");
    BF_TRY(dnnl_primitive_attr_create(&attr), "attr create");
    BF_TRY(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), "scratchpad");
    dnnl_memory_desc_t wei_md;
    dnnl_dims_t wd = {w->cols, w->rows}, ws = {1, w->cols}; /* Wᵀ over W's own bytes */
    BF_TRY(dnnl_memory_desc_init_by_strides(&wei_md, 2, wd, dnnl_bf16, ws), "weights descriptor");
    BF_TRY(dnnl_memory_create(&m->wei, &wei_md, bf_engine, m->wb), "weights memory");
    size_t sb = 0;
    for (int i = 0; i < 2; i++) {
        int64_t M = i ? BF_M_SMALL : BF_M_BIG;
        dnnl_memory_desc_t src_md, dst_md;
        dnnl_dims_t sd = {M, w->cols}, ss = {w->cols, 1}, dd = {M, w->rows}, ds = {w->rows, 1};
        BF_TRY(dnnl_memory_desc_init_by_strides(&src_md, 2, sd, dnnl_bf16, ss), "src descriptor");
        BF_TRY(dnnl_memory_desc_init_by_strides(&dst_md, 2, dd, dnnl_f32, ds), "dst descriptor");
        dnnl_matmul_desc_t desc;
        BF_TRY(dnnl_matmul_desc_init(&desc, &src_md, &wei_md, NULL, &dst_md), "matmul descriptor");
        BF_TRY(dnnl_primitive_desc_create(&pd[i], &desc, attr, bf_engine, NULL), "primitive desc");
        BF_TRY(dnnl_primitive_create(&m->prim[i], pd[i]), "primitive create");
        BF_TRY(dnnl_memory_create(&m->src[i], &src_md, bf_engine, m->xb), "src memory");
        BF_TRY(dnnl_memory_create(&m->dst[i], &dst_md, bf_engine, m->yb), "dst memory");
        const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(pd[i], dnnl_query_scratchpad_md, 0);
        size_t b = sp ? dnnl_memory_desc_get_size(sp) : 0;
        if (b > sb) sb = b;
    }
    if (sb) {
        if (!(m->scratch_buf = ffn_malloc_aligned(sb))) {
            st = ffn_error(FFN_ERR_NOMEM, "bf16 matmul: out of memory (scratchpad)");
            goto fail;
        }
        dnnl_memory_desc_t smd;
        dnnl_dims_t d1 = {(dnnl_dim_t)sb};
        BF_TRY(dnnl_memory_desc_init_by_tag(&smd, 1, d1, dnnl_u8, dnnl_a), "scratch descriptor");
        BF_TRY(dnnl_memory_create(&m->scratch, &smd, bf_engine, m->scratch_buf), "scratch memory");
    }
    for (int i = 0; i < 2; i++) dnnl_primitive_desc_destroy(pd[i]);
    dnnl_primitive_attr_destroy(attr);
    free(row);
    *out = m;
    return FFN_OK;
fail:
    for (int i = 0; i < 2; i++)
        if (pd[i]) dnnl_primitive_desc_destroy(pd[i]);
    if (attr) dnnl_primitive_attr_destroy(attr);
    free(row);
    ffn_qgemm_bf16mm_free(m);
    return st;
}

/* One run of len <= M rows on primitive i (M rows; rows past len are zero). */
static ffn_status bf_run(ffn_qgemm_bf16mm *m, int i, const float *x, int64_t ldx, int64_t len,
                         float *y, int64_t ldy, int accumulate) {
    ffn_status st = FFN_OK;
    int64_t cols = m->cols, rows = m->rows, M = i ? BF_M_SMALL : BF_M_BIG;
#pragma omp parallel for schedule(static) if (M * cols >= 65536)
    for (int64_t t = 0; t < M; t++)
        for (int64_t k = 0; k < cols; k++)
            m->xb[t * cols + k] = t < len ? ffn_f32_to_bf16(x[t * ldx + k]) : 0;
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, m->src[i]}, {DNNL_ARG_WEIGHTS, m->wei},
                               {DNNL_ARG_DST, m->dst[i]}};
    int nargs = 3;
    if (m->scratch) args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, m->scratch};
    BF_TRY(dnnl_primitive_execute(m->prim[i], m->stream, nargs, args), "execute");
    BF_TRY(dnnl_stream_wait(m->stream), "stream wait");
#pragma omp parallel for schedule(static) if (len * rows >= 65536)
    for (int64_t t = 0; t < len; t++)
        for (int64_t r = 0; r < rows; r++)
            y[t * ldy + r] = accumulate ? y[t * ldy + r] + m->yb[t * rows + r] : m->yb[t * rows + r];
fail:
    return st;
}

ffn_status ffn_qgemm_bf16mm_run(ffn_qgemm_bf16mm *m, const ffn_ctx *ctx, const float *x,
                                int64_t ldx, int64_t n, float *y, int64_t ldy, int accumulate) {
    ffn_status st = FFN_OK;
    ffn_ctx_enter(ctx);
    pthread_mutex_lock(&m->lock);
    for (int64_t t0 = 0; t0 < n && !st;) {
        int i = n - t0 >= BF_M_BIG ? 0 : 1;
        int64_t M = i ? BF_M_SMALL : BF_M_BIG, len = n - t0 < M ? n - t0 : M;
        st = bf_run(m, i, x + t0 * ldx, ldx, len, y + t0 * ldy, ldy, accumulate);
        t0 += len;
    }
    pthread_mutex_unlock(&m->lock);
    return st;
}

void ffn_qgemm_bf16mm_free(ffn_qgemm_bf16mm *m) {
    if (!m) return;
    for (int i = 0; i < 2; i++) {
        if (m->prim[i]) dnnl_primitive_destroy(m->prim[i]);
        if (m->src[i]) dnnl_memory_destroy(m->src[i]);
        if (m->dst[i]) dnnl_memory_destroy(m->dst[i]);
    }
    if (m->wei) dnnl_memory_destroy(m->wei);
    if (m->scratch) dnnl_memory_destroy(m->scratch);
    if (m->stream) dnnl_stream_destroy(m->stream);
    if (m->lock_ok) pthread_mutex_destroy(&m->lock);
    ffn_free_aligned(m->wb);
    ffn_free_aligned(m->xb);
    ffn_free_aligned(m->yb);
    ffn_free_aligned(m->scratch_buf);
    free(m);
}
