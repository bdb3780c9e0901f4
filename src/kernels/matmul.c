/* matmul.c -- oneDNN matmul primitives with prepacked weights: the matrix
 * engine of the layer at batch sizes above the decode threshold.
 *
 * Why not dnnl_sgemm: measured on Zen 4/5 at 2 threads, the matmul
 * primitive ("brg:avx512_core") with weights reordered once into its
 * blocked layout runs the (N=64, 2F=5632, D=1024) input projection about
 * 4x faster than sgemm (which repacks the weights on every call and picks
 * poor blockings at small M), and stays ahead at N = 512.
 *
 * With desc.bf16 the same primitives take bf16 A and B (the packed B made
 * from the fp32 weights by the reorder) and accumulate and write fp32: the
 * mixed-precision products of the bf16 kind of src/nn/ffn_prod.c.
 *
 * A primitive is fixed to its shapes, so the layer keeps one per product
 * and token count (see ffn.c).  Creating one allocates (oneDNN objects and
 * JIT code); running one does not: operands are attached with
 * dnnl_memory_set_data_handle and the scratchpad comes from the caller
 * (user scratchpad mode). */
#include "kernels/kernels.h"

#include <dnnl.h>
#include <pthread.h>
#include <string.h>

struct ffn_mm_engine {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
};

struct ffn_mm {
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, c, bias, scratch;
    size_t scratch_bytes;
    int has_bias;
};

#define DNNL_TRY(call, what) FFN_DNNL_TRY("oneDNN", call, what)

static dnnl_engine_t shared_engine;
static dnnl_status_t shared_engine_status = dnnl_success;
static pthread_once_t shared_engine_once = PTHREAD_ONCE_INIT;
static void shared_engine_make(void) { shared_engine_status = dnnl_engine_create(&shared_engine, dnnl_cpu, 0); }

ffn_status ffn_dnnl_cpu_engine(dnnl_engine_t *out) {
    if (pthread_once(&shared_engine_once, shared_engine_make) || shared_engine_status != dnnl_success)
        return ffn_error(FFN_ERR_INTERNAL, "oneDNN: CPU engine create failed (status %d)",
                         (int)shared_engine_status);
    *out = shared_engine;
    return FFN_OK;
}

ffn_status ffn_mm_engine_create(ffn_mm_engine **out) {
    ffn_status st = FFN_OK;
    ffn_mm_engine *e = calloc(1, sizeof *e);
    *out = NULL;
    if (!e) return ffn_error(FFN_ERR_NOMEM, "oneDNN engine: out of memory");
    DNNL_TRY(dnnl_engine_create(&e->engine, dnnl_cpu, 0), "engine create");
    DNNL_TRY(dnnl_stream_create(&e->stream, e->engine, dnnl_stream_default_flags), "stream create");
    *out = e;
    return FFN_OK;
fail:
    ffn_mm_engine_free(e);
    return st;
}

void ffn_mm_engine_free(ffn_mm_engine *e) {
    if (!e) return;
    if (e->stream) dnnl_stream_destroy(e->stream);
    if (e->engine) dnnl_engine_destroy(e->engine);
    free(e);
}

/* (rows, cols) of type dt (fp32 unless said) with the given strides */
static dnnl_status_t md_strided_t(dnnl_memory_desc_t *md, int64_t rows, int64_t cols,
                                  int64_t s_row, int64_t s_col, dnnl_data_type_t dt) {
    dnnl_dims_t dims = {rows, cols}, strides = {s_row, s_col};
    return dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides);
}
static dnnl_status_t md_strided(dnnl_memory_desc_t *md, int64_t rows, int64_t cols,
                                int64_t s_row, int64_t s_col) {
    return md_strided_t(md, rows, cols, s_row, s_col, dnnl_f32);
}

/* (rows, cols) with leading dimension ld, stored transposed (cols, rows)
 * when `trans`: how A, B and the plain weights are all described. */
static dnnl_status_t md_ld_t(dnnl_memory_desc_t *md, int64_t rows, int64_t cols, int64_t ld,
                             int trans, dnnl_data_type_t dt) {
    return trans ? md_strided_t(md, rows, cols, 1, ld, dt) : md_strided_t(md, rows, cols, ld, 1, dt);
}
static dnnl_status_t md_ld(dnnl_memory_desc_t *md, int64_t rows, int64_t cols, int64_t ld,
                           int trans) {
    return md_ld_t(md, rows, cols, ld, trans, dnnl_f32);
}

/* A memory object for the primitive's operand `what` (index idx) with no
 * data yet: ffn_mm_run attaches the caller's buffer on every call. */
static dnnl_status_t operand(dnnl_memory_t *mem, const_dnnl_primitive_desc_t pd,
                             dnnl_query_t what, int idx, dnnl_engine_t engine) {
    return dnnl_memory_create(mem, dnnl_primitive_desc_query_md(pd, what, idx), engine,
                              DNNL_MEMORY_NONE);
}

/* The descriptors of one matmul; B is `any` when b_packed is set and no
 * packed layout is given yet (that is how the packed layout is found). */
static ffn_status make_pd(const ffn_mm_engine *e, const ffn_mm_desc *d,
                          const ffn_mm_packed *packed, int probe, dnnl_primitive_desc_t *pd) {
    ffn_status st = FFN_OK;
    dnnl_memory_desc_t a_md, b_md, c_md, bias_md;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    *pd = NULL;
    const dnnl_data_type_t in_dt = d->bf16 ? dnnl_bf16 : dnnl_f32; /* A and B */
    DNNL_TRY(md_ld_t(&a_md, d->M, d->K, d->lda, d->a_trans, in_dt), "A descriptor");
    if (d->b_kind == FFN_MM_B_PACKED) {
        if (probe) {
            dnnl_dims_t dims = {d->K, d->N};
            DNNL_TRY(dnnl_memory_desc_init_by_tag(&b_md, 2, dims, in_dt, dnnl_format_tag_any),
                     "B descriptor");
        } else {
            b_md = packed->md;
        }
    } else {
        DNNL_TRY(md_ld_t(&b_md, d->K, d->N, d->ldb, d->b_kind == FFN_MM_B_PLAIN_T, in_dt),
                 "B descriptor");
    }
    DNNL_TRY(md_strided(&c_md, d->M, d->N, d->ldc, 1), "C descriptor");
    if (d->bias) DNNL_TRY(md_strided(&bias_md, 1, d->N, d->N, 1), "bias descriptor");
    dnnl_matmul_desc_t desc;
    DNNL_TRY(dnnl_matmul_desc_init(&desc, &a_md, &b_md, d->bias ? &bias_md : NULL, &c_md),
             "matmul descriptor");
    DNNL_TRY(dnnl_primitive_attr_create(&attr), "attr create");
    DNNL_TRY(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user),
             "scratchpad mode");
    if (d->accumulate) {
        DNNL_TRY(dnnl_post_ops_create(&po), "post-ops create");
        DNNL_TRY(dnnl_post_ops_append_sum(po, 1.0f), "sum post-op");
        DNNL_TRY(dnnl_primitive_attr_set_post_ops(attr, po), "set post-ops");
    }
    DNNL_TRY(dnnl_primitive_desc_create(pd, &desc, attr, e->engine, NULL), "matmul pd create");
fail:
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return st;
}

/* The pack of ffn_mm_pack and ffn_mm_repack: with `reuse`, a buffer out
 * already holds in the same layout is written over (no allocation, no
 * fresh pages); otherwise out is (re)made. */
static ffn_status pack_into(const ffn_mm_engine *e, const ffn_mm_desc *d, const float *w,
                            ffn_mm_packed *out, int reuse) {
    ffn_status st = FFN_OK;
    dnnl_primitive_desc_t pd = NULL, rpd = NULL;
    dnnl_primitive_t reorder = NULL;
    dnnl_memory_t src = NULL, dst = NULL;
    if (!reuse) memset(out, 0, sizeof *out);
    ffn_mm_desc probe = *d;
    probe.b_kind = FFN_MM_B_PACKED;
    if ((st = make_pd(e, &probe, NULL, 1, &pd))) goto fail;
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    if (!(reuse && out->data && dnnl_memory_desc_equal(&out->md, md))) {
        ffn_mm_packed_free(out);
        out->md = *md;
        out->bytes = dnnl_memory_desc_get_size(md);
        out->data = ffn_malloc_aligned(out->bytes);
    }
    if (!out->data) {
        st = ffn_error(FFN_ERR_NOMEM, "packing weights: out of memory (%zu bytes)", out->bytes);
        goto fail;
    }
    /* w is B plain: (K, N) row-major, or Bᵀ stored (N, K) when b_kind says so */
    dnnl_memory_desc_t src_md;
    DNNL_TRY(md_ld(&src_md, d->K, d->N, d->ldb, d->b_kind == FFN_MM_B_PLAIN_T),
             "plain weights descriptor");
    DNNL_TRY(dnnl_memory_create(&src, &src_md, e->engine, (void *)w), "memory create");
    DNNL_TRY(dnnl_memory_create(&dst, &out->md, e->engine, out->data), "memory create");
    DNNL_TRY(dnnl_reorder_primitive_desc_create(&rpd, &src_md, e->engine, &out->md, e->engine,
                                                NULL),
             "reorder pd create");
    DNNL_TRY(dnnl_primitive_create(&reorder, rpd), "reorder create");
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}};
    DNNL_TRY(dnnl_primitive_execute(reorder, e->stream, 2, args), "reorder");
    DNNL_TRY(dnnl_stream_wait(e->stream), "stream wait");
fail:
    if (reorder) dnnl_primitive_destroy(reorder);
    if (rpd) dnnl_primitive_desc_destroy(rpd);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (src) dnnl_memory_destroy(src);
    if (dst) dnnl_memory_destroy(dst);
    if (st) ffn_mm_packed_free(out);
    return st;
}

ffn_status ffn_mm_pack(const ffn_mm_engine *e, const ffn_mm_desc *d, const float *w,
                       ffn_mm_packed *out) {
    return pack_into(e, d, w, out, 0);
}

ffn_status ffn_mm_repack(const ffn_mm_engine *e, const ffn_mm_desc *d, const float *w,
                         ffn_mm_packed *out) {
    return pack_into(e, d, w, out, 1);
}

ffn_status ffn_mm_pack_layout(const ffn_mm_engine *e, const ffn_mm_desc *d, ffn_mm_packed *out) {
    ffn_status st = FFN_OK;
    dnnl_primitive_desc_t pd = NULL;
    memset(out, 0, sizeof *out);
    ffn_mm_desc probe = *d;
    probe.b_kind = FFN_MM_B_PACKED;
    if ((st = make_pd(e, &probe, NULL, 1, &pd))) return st;
    out->md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    out->bytes = dnnl_memory_desc_get_size(&out->md);
    dnnl_primitive_desc_destroy(pd);
    if (!(out->data = ffn_malloc_aligned(out->bytes))) {
        memset(out, 0, sizeof *out);
        return ffn_error(FFN_ERR_NOMEM, "packing weights: out of memory");
    }
    return FFN_OK;
}

void ffn_mm_packed_free(ffn_mm_packed *p) {
    if (!p) return;
    ffn_free_aligned(p->data);
    memset(p, 0, sizeof *p);
}

ffn_status ffn_mm_create(const ffn_mm_engine *e, const ffn_mm_desc *d,
                         const ffn_mm_packed *packed, ffn_mm **out) {
    ffn_status st = FFN_OK;
    dnnl_primitive_desc_t pd = NULL;
    ffn_mm *m = calloc(1, sizeof *m);
    *out = NULL;
    if (!m) return ffn_error(FFN_ERR_NOMEM, "matmul: out of memory");
    if ((st = make_pd(e, d, packed, 0, &pd))) goto fail;
    DNNL_TRY(dnnl_primitive_create(&m->prim, pd), "matmul create");
    DNNL_TRY(operand(&m->a, pd, dnnl_query_src_md, 0, e->engine), "memory create");
    DNNL_TRY(operand(&m->b, pd, dnnl_query_weights_md, 0, e->engine), "memory create");
    DNNL_TRY(operand(&m->c, pd, dnnl_query_dst_md, 0, e->engine), "memory create");
    if (d->bias) {
        DNNL_TRY(operand(&m->bias, pd, dnnl_query_weights_md, 1, e->engine), "memory create");
        m->has_bias = 1;
    }
    const dnnl_memory_desc_t *q = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    m->scratch_bytes = q ? dnnl_memory_desc_get_size(q) : 0;
    if (m->scratch_bytes)
        DNNL_TRY(operand(&m->scratch, pd, dnnl_query_scratchpad_md, 0, e->engine), "memory create");
    dnnl_primitive_desc_destroy(pd);
    *out = m;
    return FFN_OK;
fail:
    if (pd) dnnl_primitive_desc_destroy(pd);
    ffn_mm_free(m);
    return st;
}

void ffn_mm_free(ffn_mm *m) {
    if (!m) return;
    if (m->prim) dnnl_primitive_destroy(m->prim);
    const dnnl_memory_t mem[] = {m->a, m->b, m->c, m->bias, m->scratch};
    for (size_t i = 0; i < sizeof mem / sizeof mem[0]; i++)
        if (mem[i]) dnnl_memory_destroy(mem[i]);
    free(m);
}

size_t ffn_mm_scratch_bytes(const ffn_mm *m) { return m ? m->scratch_bytes : 0; }

ffn_status ffn_mm_run(const ffn_mm_engine *e, const ffn_mm *m, float *c, const void *a,
                      const void *b, const float *bias, void *scratch, size_t scratch_cap) {
    ffn_status st = FFN_OK;
    if (m->scratch_bytes > scratch_cap)
        return ffn_error(FFN_ERR_WORKSPACE, "matmul: scratchpad needs %zu bytes, %zu available",
                         m->scratch_bytes, scratch_cap);
    DNNL_TRY(dnnl_memory_set_data_handle(m->a, (void *)a), "set A");
    DNNL_TRY(dnnl_memory_set_data_handle(m->b, (void *)b), "set B");
    DNNL_TRY(dnnl_memory_set_data_handle(m->c, c), "set C");
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, m->a}, {DNNL_ARG_WEIGHTS, m->b}, {DNNL_ARG_DST, m->c}};
    int nargs = 3;
    if (m->has_bias) {
        DNNL_TRY(dnnl_memory_set_data_handle(m->bias, (void *)bias), "set bias");
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, m->bias};
    }
    if (m->scratch_bytes) {
        DNNL_TRY(dnnl_memory_set_data_handle(m->scratch, scratch), "set scratchpad");
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, m->scratch};
    }
    DNNL_TRY(dnnl_primitive_execute(m->prim, e->stream, nargs, args), "matmul execute");
    DNNL_TRY(dnnl_stream_wait(e->stream), "stream wait");
fail:
    return st;
}

int ffn_mm_packed_view(const ffn_mm_packed *p, int64_t K, int64_t N, ffn_packed_view *v) {
    const dnnl_memory_desc_t *md = &p->md;
    if (!p->data || md->ndims != 2 || md->data_type != dnnl_f32 ||
        md->format_kind != dnnl_blocked || md->dims[0] != K || md->dims[1] != N ||
        md->offset0 != 0)
        return 0;
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
    if (b->inner_nblks != 2 || b->inner_idxs[0] != 0 || b->inner_idxs[1] != 1) return 0;
    int64_t kb = b->inner_blks[0], nb = b->inner_blks[1];
    if (kb <= 0 || nb <= 0 || nb % 64 || b->strides[0] != kb * nb) return 0;
    if (b->strides[1] < ((md->padded_dims[0] + kb - 1) / kb) * kb * nb) return 0;
    *v = (ffn_packed_view){.data = p->data, .K = K, .N = N, .kb = kb, .nb = nb,
                           .stride_kblk = b->strides[0], .stride_nblk = b->strides[1]};
    return 1;
}
