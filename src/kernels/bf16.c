/* bf16.c -- the kernels of the bf16 precision (see bf16.h): the hardware
 * check, fp32 -> bf16 rows, and products of any shape on oneDNN's bf16
 * matmul (bf16 A and B, fp32 accumulation and C).
 *
 * The products run as ffn_mm primitives (matmul.c, desc.bf16) over plain
 * operands.  A primitive is fixed to its shape and thread count, so the
 * object keeps a small cache of them keyed by both; the model meets a
 * handful of shapes (q|k|v, o, the head, their gradients) per token count. */
#include "kernels/bf16.h"
#include "base/dtype.h"

#include <dnnl.h>
#include <immintrin.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- the hardware -------------------------------------------------------- */

int ffn_bf16_hw(void) { return ffn_simd() == FFN_SIMD_AVX512 && (ffn_cpu_features() & FFN_CPU_BF16); }

/* ---- conversion ------------------------------------------------------------ */

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) static void
convert_row_avx512(uint16_t *dst, const float *src, int64_t n) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 a = _mm512_loadu_ps(src + i), b = _mm512_loadu_ps(src + i + 16);
        __m512bh p = _mm512_cvtne2ps_pbh(b, a); /* a in the low half */
        _mm512_storeu_si512((void *)(dst + i), (__m512i)p);
    }
    for (; i + 16 <= n; i += 16) {
        __m256bh p = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + i));
        _mm256_storeu_si256((__m256i *)(dst + i), (__m256i)p);
    }
    if (i < n) {
        __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
        __m256bh p = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(k, src + i));
        _mm256_mask_storeu_epi16(dst + i, k, (__m256i)p);
    }
}

static void convert_row_scalar(uint16_t *dst, const float *src, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = ffn_f32_to_bf16(src[i]);
}

void ffn_bf16_convert(uint16_t *dst, int64_t ldd, const float *src, int64_t lds, int64_t rows,
                      int64_t cols) {
    const int fast = ffn_bf16_hw();
    if (rows == 1 && cols >= 65536) { /* one long row (a weight block): split it */
        enum { CHUNK = 16384 };
        int64_t chunks = (cols + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static)
        for (int64_t c = 0; c < chunks; c++) {
            int64_t c0 = c * CHUNK, len = cols - c0 < CHUNK ? cols - c0 : CHUNK;
            if (fast) convert_row_avx512(dst + c0, src + c0, len);
            else convert_row_scalar(dst + c0, src + c0, len);
        }
        return;
    }
#pragma omp parallel for schedule(static) if (rows * cols >= 65536)
    for (int64_t r = 0; r < rows; r++) {
        if (fast) convert_row_avx512(dst + r * ldd, src + r * lds, cols);
        else convert_row_scalar(dst + r * ldd, src + r * lds, cols);
    }
}

/* ---- products of any shape -------------------------------------------------- */

enum { GEMM_SLOTS = 48 };

/* Below this many multiply-adds one thread is faster than waking the
 * others (ffn_gemm's rule). */
#define BF16_PAR_MIN_MACS ((int64_t)1 << 18)

typedef struct gemm_slot {
    ffn_mm_desc d;
    int threads;
    uint64_t last_use;
    ffn_mm *m; /* NULL: empty */
} gemm_slot;

struct ffn_bf16_gemm {
    ffn_mm_engine *engine;
    gemm_slot slots[GEMM_SLOTS];
    uint64_t clock;
    void *scratch;
    size_t scratch_bytes;
};

ffn_status ffn_bf16_gemm_create(ffn_bf16_gemm **out) {
    *out = NULL;
    if (!ffn_bf16_hw())
        return ffn_error(FFN_ERR_UNSUPPORTED, "precision bf16: this CPU (or FFN_SIMD) gives no "
                         "AVX-512 with AVX512_BF16 (vdpbf16ps); use precision fp32");
    ffn_bf16_gemm *g = calloc(1, sizeof *g);
    if (!g) return ffn_error(FFN_ERR_NOMEM, "bf16 products: out of memory");
    ffn_status st = ffn_mm_engine_create(&g->engine);
    if (st) {
        free(g);
        return st;
    }
    *out = g;
    return FFN_OK;
}

void ffn_bf16_gemm_free(ffn_bf16_gemm *g) {
    if (!g) return;
    for (int i = 0; i < GEMM_SLOTS; i++) ffn_mm_free(g->slots[i].m);
    ffn_free_aligned(g->scratch);
    ffn_mm_engine_free(g->engine);
    free(g);
}

static int same_desc(const ffn_mm_desc *a, const ffn_mm_desc *b) {
    return a->M == b->M && a->N == b->N && a->K == b->K && a->a_trans == b->a_trans &&
           a->lda == b->lda && a->b_kind == b->b_kind && a->ldb == b->ldb && a->ldc == b->ldc &&
           a->accumulate == b->accumulate;
}

/* The primitive for d at the current thread count: cached, or made now
 * (evicting the least recently used). */
static ffn_status find_mm(ffn_bf16_gemm *g, const ffn_mm_desc *d, int threads, ffn_mm **out) {
    gemm_slot *victim = &g->slots[0];
    for (int i = 0; i < GEMM_SLOTS; i++) {
        gemm_slot *s = &g->slots[i];
        if (s->m && s->threads == threads && same_desc(&s->d, d)) {
            s->last_use = ++g->clock;
            *out = s->m;
            return FFN_OK;
        }
        if (!s->m || (victim->m && s->last_use < victim->last_use)) victim = s;
    }
    ffn_mm *m = NULL;
    ffn_status st = ffn_mm_create(g->engine, d, NULL, &m);
    if (st) return ffn_error_prefix(st, "bf16 product (%lld × %lld × %lld)", (long long)d->M,
                                    (long long)d->N, (long long)d->K);
    size_t need = ffn_mm_scratch_bytes(m);
    if (need > g->scratch_bytes) {
        void *p = ffn_malloc_aligned(need);
        if (!p) {
            ffn_mm_free(m);
            return ffn_error(FFN_ERR_NOMEM, "bf16 product: out of memory (scratchpad of %zu "
                             "bytes)", need);
        }
        ffn_free_aligned(g->scratch);
        g->scratch = p, g->scratch_bytes = need;
    }
    ffn_mm_free(victim->m);
    *victim = (gemm_slot){.d = *d, .threads = threads, .last_use = ++g->clock, .m = m};
    *out = m;
    return FFN_OK;
}

ffn_status ffn_bf16_gemm_run(ffn_bf16_gemm *g, const ffn_ctx *ctx, int transa, int transb,
                             int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda,
                             const uint16_t *B, int64_t ldb, int accumulate, float *C,
                             int64_t ldc) {
    if (!g) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_bf16_gemm_run: NULL object");
    if (M < 0 || N < 0 || K < 0)
        return ffn_error(FFN_ERR_INVALID_ARG, "bf16 product: negative size (M=%lld, N=%lld, "
                         "K=%lld)", (long long)M, (long long)N, (long long)K);
    if (M == 0 || N == 0) return FFN_OK;
    if (K == 0) {
        if (!accumulate)
            for (int64_t i = 0; i < M; i++) memset(C + i * ldc, 0, (size_t)N * sizeof *C);
        return FFN_OK;
    }
    ffn_ctx_enter(ctx);
    int threads = 1;
#ifdef _OPENMP
    int saved = omp_get_max_threads();
    if (saved > 1 && M * N * K < BF16_PAR_MIN_MACS) omp_set_num_threads(1);
    else threads = saved;
#endif
    ffn_mm_desc d = {.M = M, .N = N, .K = K, .a_trans = transa, .lda = lda,
                     .b_kind = transb ? FFN_MM_B_PLAIN_T : FFN_MM_B_PLAIN, .ldb = ldb,
                     .ldc = ldc, .accumulate = accumulate, .bf16 = 1};
    ffn_mm *m = NULL;
    ffn_status st = find_mm(g, &d, threads, &m);
    if (!st) st = ffn_mm_run(g->engine, m, C, A, B, NULL, g->scratch, g->scratch_bytes);
#ifdef _OPENMP
    if (threads != saved) omp_set_num_threads(saved);
#endif
    return st;
}

/* ---- packing bf16 weights ------------------------------------------------------ */

struct ffn_bf16_packer {
    dnnl_stream_t stream;
    dnnl_primitive_t reorder;
    dnnl_memory_t src, dst;
};

#define PK_TRY(call, what) FFN_DNNL_TRY("oneDNN bf16 packing", call, what)

ffn_status ffn_bf16_packer_create(int64_t K, int64_t N, int64_t ldb, int trans,
                                  const ffn_mm_packed *target, ffn_bf16_packer **out) {
    ffn_status st = FFN_OK;
    dnnl_primitive_desc_t rpd = NULL;
    *out = NULL;
    dnnl_engine_t pk_engine;
    if ((st = ffn_dnnl_cpu_engine(&pk_engine))) return ffn_error_prefix(st, "bf16 packing");
    ffn_bf16_packer *p = calloc(1, sizeof *p);
    if (!p) return ffn_error(FFN_ERR_NOMEM, "bf16 packing: out of memory");
    dnnl_memory_desc_t src_md;
    dnnl_dims_t dims = {K, N}, strides = {trans ? 1 : ldb, trans ? ldb : 1};
    PK_TRY(dnnl_memory_desc_init_by_strides(&src_md, 2, dims, dnnl_bf16, strides), "descriptor");
    PK_TRY(dnnl_stream_create(&p->stream, pk_engine, dnnl_stream_default_flags), "stream create");
    PK_TRY(dnnl_memory_create(&p->src, &src_md, pk_engine, DNNL_MEMORY_NONE), "memory create");
    PK_TRY(dnnl_memory_create(&p->dst, &target->md, pk_engine, DNNL_MEMORY_NONE), "memory create");
    PK_TRY(dnnl_reorder_primitive_desc_create(&rpd, &src_md, pk_engine, &target->md, pk_engine,
                                              NULL),
           "reorder pd create");
    PK_TRY(dnnl_primitive_create(&p->reorder, rpd), "reorder create");
    dnnl_primitive_desc_destroy(rpd);
    *out = p;
    return FFN_OK;
fail:
    if (rpd) dnnl_primitive_desc_destroy(rpd);
    ffn_bf16_packer_free(p);
    return st;
}

void ffn_bf16_packer_free(ffn_bf16_packer *p) {
    if (!p) return;
    if (p->reorder) dnnl_primitive_destroy(p->reorder);
    if (p->src) dnnl_memory_destroy(p->src);
    if (p->dst) dnnl_memory_destroy(p->dst);
    if (p->stream) dnnl_stream_destroy(p->stream);
    free(p);
}

ffn_status ffn_bf16_packer_run(ffn_bf16_packer *p, const ffn_ctx *ctx, const uint16_t *b,
                               ffn_mm_packed *target) {
    ffn_status st = FFN_OK;
    ffn_ctx_enter(ctx);
    PK_TRY(dnnl_memory_set_data_handle(p->src, (void *)b), "set source");
    PK_TRY(dnnl_memory_set_data_handle(p->dst, target->data), "set target");
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, p->src}, {DNNL_ARG_TO, p->dst}};
    PK_TRY(dnnl_primitive_execute(p->reorder, p->stream, 2, args), "reorder");
    PK_TRY(dnnl_stream_wait(p->stream), "stream wait");
fail:
    return st;
}
