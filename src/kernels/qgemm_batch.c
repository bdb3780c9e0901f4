/* qgemm_batch.c -- the other way to multiply by a low-precision weight at
 * large n: the weight decoded once to bf16 and oneDNN's bf16 matmul
 * (bf16 activations and weights, fp32 accumulation and output).  It is kept
 * as the measured alternative of the int8 kernels (bench/qgemm_batch.sh
 * times both; the table in qgemm.c records the result) and for callers that
 * can afford a bf16 copy of the weight.
 *
 * Creating decodes the weight (rows, cols) into bf16 stored as Wᵀ (cols,
 * rows) strides and builds the primitive for n rows of x; creating
 * allocates, running does not (x's bf16 copy lives in the object). */
#include "kernels/qgemm_batch.h"
#include "ffn/safetensors.h"

#include <dnnl.h>
#include <stdlib.h>
#include <string.h>

struct ffn_qgemm_bf16mm {
    int64_t rows, cols, n;
    uint16_t *wb; /* (rows, cols) bf16 */
    uint16_t *xb; /* (n, cols) bf16 */
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    dnnl_primitive_t prim;
    dnnl_memory_t src, wei, dst, scratch;
    void *scratch_buf;
};

#define BF_TRY(call, what)                                                                    \
    do {                                                                                       \
        dnnl_status_t s_ = (call);                                                             \
        if (s_ != dnnl_success) {                                                              \
            st = ffn_error(FFN_ERR_INTERNAL, "oneDNN bf16 matmul: %s failed (status %d)", what, \
                           (int)s_);                                                           \
            goto fail;                                                                         \
        }                                                                                      \
    } while (0)

ffn_status ffn_qgemm_bf16mm_create(const ffn_qweight *w, int64_t n, ffn_qgemm_bf16mm **out) {
    ffn_status st = FFN_OK;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_attr_t attr = NULL;
    float *row = NULL;
    *out = NULL;
    if (!w || n < 1 || w->rows < 1 || w->cols < 1)
        return ffn_error(FFN_ERR_INVALID_ARG, "bf16 matmul: empty weight or n < 1");
    ffn_qgemm_bf16mm *m = calloc(1, sizeof *m);
    if (!m) return ffn_error(FFN_ERR_NOMEM, "bf16 matmul: out of memory");
    m->rows = w->rows, m->cols = w->cols, m->n = n;
    m->wb = ffn_malloc_aligned((size_t)(w->rows * w->cols) * 2);
    m->xb = ffn_malloc_aligned((size_t)(n * w->cols) * 2);
    row = malloc((size_t)w->cols * sizeof *row);
    if (!m->wb || !m->xb || !row) {
        st = ffn_error(FFN_ERR_NOMEM, "bf16 matmul: out of memory for a %lld × %lld bf16 copy",
                       (long long)w->rows, (long long)w->cols);
        goto fail;
    }
    for (int64_t r = 0; r < w->rows; r++) {
        if ((st = ffn_ggml_dequantize_row(w->type, w->data + (size_t)r * w->row_bytes, row, w->cols)))
            goto fail;
        for (int64_t c = 0; c < w->cols; c++) m->wb[r * w->cols + c] = ffn_f32_to_bf16(row[c]);
    }
    BF_TRY(dnnl_engine_create(&m->engine, dnnl_cpu, 0), "engine create");
    BF_TRY(dnnl_stream_create(&m->stream, m->engine, dnnl_stream_default_flags), "stream create");
    dnnl_memory_desc_t src_md, wei_md, dst_md;
    dnnl_dims_t sd = {n, w->cols}, ss = {w->cols, 1};
    dnnl_dims_t wd = {w->cols, w->rows}, ws = {1, w->cols}; /* Wᵀ over W's own bytes */
    dnnl_dims_t dd = {n, w->rows}, ds = {w->rows, 1};
    BF_TRY(dnnl_memory_desc_init_by_strides(&src_md, 2, sd, dnnl_bf16, ss), "src descriptor");
    BF_TRY(dnnl_memory_desc_init_by_strides(&wei_md, 2, wd, dnnl_bf16, ws), "weights descriptor");
    BF_TRY(dnnl_memory_desc_init_by_strides(&dst_md, 2, dd, dnnl_f32, ds), "dst descriptor");
    dnnl_matmul_desc_t desc;
    BF_TRY(dnnl_matmul_desc_init(&desc, &src_md, &wei_md, NULL, &dst_md), "matmul descriptor");
    BF_TRY(dnnl_primitive_attr_create(&attr), "attr create");
    BF_TRY(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), "scratchpad");
    BF_TRY(dnnl_primitive_desc_create(&pd, &desc, attr, m->engine, NULL), "primitive desc");
    BF_TRY(dnnl_primitive_create(&m->prim, pd), "primitive create");
    BF_TRY(dnnl_memory_create(&m->src, &src_md, m->engine, m->xb), "src memory");
    BF_TRY(dnnl_memory_create(&m->wei, &wei_md, m->engine, m->wb), "weights memory");
    BF_TRY(dnnl_memory_create(&m->dst, &dst_md, m->engine, DNNL_MEMORY_NONE), "dst memory");
    const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t sb = sp ? dnnl_memory_desc_get_size(sp) : 0;
    if (sb) {
        if (!(m->scratch_buf = ffn_malloc_aligned(sb))) {
            st = ffn_error(FFN_ERR_NOMEM, "bf16 matmul: out of memory (scratchpad)");
            goto fail;
        }
        BF_TRY(dnnl_memory_create(&m->scratch, sp, m->engine, m->scratch_buf), "scratch memory");
    }
    dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_attr_destroy(attr);
    free(row);
    *out = m;
    return FFN_OK;
fail:
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    free(row);
    ffn_qgemm_bf16mm_free(m);
    return st;
}

ffn_status ffn_qgemm_bf16mm_run(ffn_qgemm_bf16mm *m, const ffn_ctx *ctx, const float *x, float *y) {
    ffn_status st = FFN_OK;
    ffn_ctx_enter(ctx);
    int64_t total = m->n * m->cols;
#pragma omp parallel for schedule(static) if (total >= 65536)
    for (int64_t i = 0; i < total; i++) m->xb[i] = ffn_f32_to_bf16(x[i]);
    BF_TRY(dnnl_memory_set_data_handle(m->dst, y), "set dst");
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, m->src}, {DNNL_ARG_WEIGHTS, m->wei}, {DNNL_ARG_DST, m->dst}};
    int nargs = 3;
    if (m->scratch) args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, m->scratch};
    BF_TRY(dnnl_primitive_execute(m->prim, m->stream, nargs, args), "execute");
    BF_TRY(dnnl_stream_wait(m->stream), "stream wait");
fail:
    return st;
}

void ffn_qgemm_bf16mm_free(ffn_qgemm_bf16mm *m) {
    if (!m) return;
    if (m->prim) dnnl_primitive_destroy(m->prim);
    const dnnl_memory_t mem[] = {m->src, m->wei, m->dst, m->scratch};
    for (size_t i = 0; i < sizeof mem / sizeof mem[0]; i++)
        if (mem[i]) dnnl_memory_destroy(mem[i]);
    if (m->stream) dnnl_stream_destroy(m->stream);
    if (m->engine) dnnl_engine_destroy(m->engine);
    ffn_free_aligned(m->wb);
    ffn_free_aligned(m->xb);
    ffn_free_aligned(m->scratch_buf);
    free(m);
}
