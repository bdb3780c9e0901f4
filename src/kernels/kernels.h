/* kernels.h -- the hot loops: matrix products, streaming small-N kernels,
 * activations, fused gate⊙up epilogues; and the run-time SIMD choice.
 * Internal; not installed.  (Owned by the kernels work; extend freely.) */
#ifndef FFN_KERNELS_H
#define FFN_KERNELS_H

#include "ffn/layer.h"
#include "base/common.h"

enum { FFN_SIMD_SCALAR = 0, FFN_SIMD_AVX2 = 1, FFN_SIMD_AVX512 = 2 };
int ffn_simd(void); /* the level in use (see cpu.c) */
/* Instructions beyond the level's base set that some kernels use (the
 * type table's needs, src/kernels/types.h), detected once from CPUID and
 * not capped by FFN_SIMD: callers check ffn_simd() too. */
enum { FFN_CPU_VNNI = 1u /* AVX512_VNNI */, FFN_CPU_BF16 = 2u /* AVX512_BF16 */,
       FFN_CPU_VBMI = 4u /* AVX512_VBMI */ };
unsigned ffn_cpu_features(void); /* FFN_CPU_* bits */

/* Call name##_avx512, name##_avx2 or name##_scalar with the arguments,
 * whichever the level in use says, and return (from a void function). */
#define FFN_SIMD_DISPATCH(name, ...)                                                          \
    do {                                                                                       \
        switch (ffn_simd()) {                                                                  \
        case FFN_SIMD_AVX512: name##_avx512(__VA_ARGS__); return;                              \
        case FFN_SIMD_AVX2: name##_avx2(__VA_ARGS__); return;                                  \
        default: name##_scalar(__VA_ARGS__); return;                                           \
        }                                                                                      \
    } while (0)

/* General matrix product, row-major, BLAS conventions:
 *   C (M, N) = alpha · op(A) · op(B) + beta · C
 * op(A) is A (M, K) with leading dimension lda, or Aᵀ when transa (A stored
 * (K, M)); likewise B.  beta = 0 ignores C's old contents (NaN included).
 * Uses the context's threads; bitwise reproducible at a fixed thread count.
 * M, N or K may be 0.  Never allocates on the caller's behalf beyond what
 * the matrix engine needs internally. */
ffn_status ffn_gemm(const ffn_ctx *ctx, int transa, int transb, int64_t M, int64_t N, int64_t K,
                    float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                    float beta, float *C, int64_t ldc);

/* The naive triple loop with the same contract (double accumulation): the
 * test oracle and the fallback. */
void ffn_gemm_ref(int transa, int transb, int64_t M, int64_t N, int64_t K, float alpha,
                  const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                  int64_t ldc);

/* ---- activations and fused epilogues (act.c, act_impl.h) ----------------
 * Elementwise over n contiguous floats, dispatched on ffn_simd(); outputs
 * may alias inputs at the same index.  The _scalar/_avx2/_avx512 variants
 * are exposed for tests (call a variant only if the CPU has that ISA). */
void ffn_act_fwd(ffn_act act, float *y, const float *x, int64_t n); /* y = act(x) */
void ffn_act_bwd(ffn_act act, float *dx, const float *dy, const float *x,
                 int64_t n); /* dx = dy ⊙ act'(x) */
void ffn_glu_fwd(ffn_act act, float *h, const float *g, const float *u,
                 int64_t n); /* h = act(g) ⊙ u */
void ffn_glu_bwd(ffn_act act, float *dg, float *du, const float *dh, const float *g,
                 const float *u, int64_t n); /* dg = dh⊙u⊙act'(g), du = dh⊙act(g) */
void ffn_add_bias(float *y, const float *b, int64_t n);    /* y += b */
void ffn_accumulate(float *acc, const float *x, int64_t n); /* acc += x */

#define FFN_ACT_DECLARE(sfx)                                                                  \
    void ffn_act_fwd_##sfx(ffn_act act, float *y, const float *x, int64_t n);                 \
    void ffn_act_bwd_##sfx(ffn_act act, float *dx, const float *dy, const float *x, int64_t n); \
    void ffn_glu_fwd_##sfx(ffn_act act, float *h, const float *g, const float *u, int64_t n); \
    void ffn_glu_bwd_##sfx(ffn_act act, float *dg, float *du, const float *dh, const float *g, \
                           const float *u, int64_t n);                                        \
    void ffn_add_bias_##sfx(float *y, const float *b, int64_t n);                             \
    void ffn_accumulate_##sfx(float *acc, const float *x, int64_t n);
FFN_ACT_DECLARE(scalar)
FFN_ACT_DECLARE(avx2)
FFN_ACT_DECLARE(avx512)

/* ---- streaming small-N kernels (gemv.c, gemv_avx2.c, gemv_avx512.c) -----
 * out[t·ldo + r] = Σ_k W[r·K + k] · x[t·ldx + k]  for t < n, r < rows.
 * Each weight row is read once for all n tokens; each output is one dot
 * product with a fixed summation order, so splitting rows across threads
 * never changes a result.  n is small (decode); any n works. */
void ffn_gemv(float *out, int64_t ldo, const float *W, int64_t K, const float *x, int64_t ldx,
              int64_t n, int64_t rows);
void ffn_gemv_scalar(float *out, int64_t ldo, const float *W, int64_t K, const float *x,
                     int64_t ldx, int64_t n, int64_t rows);
void ffn_gemv_avx2(float *out, int64_t ldo, const float *W, int64_t K, const float *x,
                   int64_t ldx, int64_t n, int64_t rows);
void ffn_gemv_avx512(float *out, int64_t ldo, const float *W, int64_t K, const float *x,
                     int64_t ldx, int64_t n, int64_t rows);

/* ffn_gemv with rows split across the context's threads (same results at
 * every thread count). */
void ffn_gemv_mt(const ffn_ctx *ctx, float *out, int64_t ldo, const float *W, int64_t K,
                 const float *x, int64_t ldx, int64_t n, int64_t rows);

/* Forward passes with at most this many tokens take the streaming path
 * (measured: see bench/ and the comment in gemv.c). */
#define FFN_DECODE_MAX_N 4
/* The dense and gated layer's split: forward (and recompute) with n <= this
 * many tokens run on the streaming kernels, larger n on the matrix engine.
 * From a measured table (gemv.c); `packed` says the AVX-512 packed-panel
 * kernel runs (else the plain-row kernels).  FFN_STREAM_MAX_N=<n> in the
 * environment overrides it (for measuring the crossover). */
int64_t ffn_stream_max_n(int packed);
/* For benchmarks: the split n >= 0 for every layer from now on, -1 back to
 * the table (and FFN_STREAM_MAX_N).  Not thread-safe against running layers. */
void ffn_stream_force_max_n(int64_t n);

/* ---- the streaming kernel over the engine's packed weights ---------------
 * A view of ffn_mm_packed B (K, N) when oneDNN chose panels of nb columns
 * (nb a multiple of 64) of kb-row tiles, nb floats per k inside a tile:
 *   B[k][c] = data[(c / nb)·stride_nblk + (k / kb)·stride_kblk + (k % kb)·nb + c % nb]
 * ffn_mm_packed_view fills it and returns 1 only for that layout. */
typedef struct ffn_packed_view {
    const float *data;
    int64_t K, N, kb, nb, stride_kblk, stride_nblk;
} ffn_packed_view;
/* out[t·ldo + (c - c0)] = Σ_k x[t·ldx + k] · B[k][c]  for t < n, c0 <= c < c1;
 * each output a k-ordered sum; AVX-512 only (check ffn_simd()). */
void ffn_gemv_packed_avx512(float *out, int64_t ldo, const ffn_packed_view *B, const float *x,
                            int64_t ldx, int64_t n, int64_t c0, int64_t c1);

/* The weights of the streaming path: the caller's plain ones (gated iff
 * w_gate), and the engine's packed W_inᵀ (D, P) and W_downᵀ (F, D) when
 * their layout has a view (then used with AVX-512). */
typedef struct ffn_decode_weights {
    const float *w_gate, *w_up; /* (F, D) */
    const float *w_down;        /* (D, F) */
    const ffn_packed_view *in_t, *down_t;
    const float *b_in;   /* (P) or NULL */
    const float *b_down; /* (D) or NULL */
} ffn_decode_weights;

/* gu (n, P) = x·W_inᵀ + b_in on the streaming kernels. */
void ffn_decode_project_in(const ffn_ctx *ctx, float *gu, const float *x, int64_t n, int64_t D,
                           int64_t F, const ffn_decode_weights *w);
/* y (n, D) = h·W_downᵀ + b_down on the streaming kernels. */
void ffn_decode_project_down(const ffn_ctx *ctx, float *y, const float *h, int64_t n, int64_t D,
                             int64_t F, const ffn_decode_weights *w);
/* The whole layer forward on the streaming path, threads over columns:
 *   gu (n, P) = x·W_inᵀ + b_in, h (n, F) = act(g)⊙u or act(u) (fused per
 *   column block), y (n, D) = h·W_downᵀ + b_down.  P = 2F gated (gu rows
 *   [g | u]), F dense. */
ffn_status ffn_decode_forward(const ffn_ctx *ctx, float *y, float *gu, float *h, const float *x,
                              int64_t n, int64_t D, int64_t F, ffn_act act,
                              const ffn_decode_weights *w);

/* ---- the weight-gradient product for small K (wgrad.c, wgrad_impl.h) ----
 *   C (M, N) += Aᵀ · B,  A stored (K, M) with row stride lda, B (K, N) with
 *   row stride ldb, C (M, N) with row stride ldc.
 * For K = a backward step's token count (the layer's dW += dGᵀ·x):
 * register tiles of C accumulate over up to FFN_WGRAD_KC steps of K, so C
 * is read and written once per FFN_WGRAD_KC.  Each element is a k-ordered
 * FMA chain from 0, added to C once per chunk: the same bits for any split
 * of the rows, hence at every thread count.  M, N or K <= 0: no-op.  The
 * _scalar/_avx2/_avx512 variants are exposed for tests. */
#ifndef FFN_WGRAD_KC
#define FFN_WGRAD_KC 256
#endif
/* Columns of B per chunk: kc × cols floats of B (at most
 * FFN_WGRAD_CHUNK_FLOATS, 64 KiB, packed on the stack) kept in L2 while
 * every row block of C passes over them; a multiple of 64.  (A's rows are
 * packed on the stack too: the vector kernels use ~134 KiB of stack.) */
#define FFN_WGRAD_CHUNK_FLOATS 16384
static inline int64_t ffn_wgrad_chunk_cols(int64_t kc) {
    int64_t c = ((int64_t)FFN_WGRAD_CHUNK_FLOATS / (kc > 0 ? kc : 1)) / 64 * 64;
    return c < 64 ? 64 : c;
}
void ffn_wgrad(float *C, int64_t ldc, const float *A, int64_t lda, const float *B, int64_t ldb,
               int64_t M, int64_t N, int64_t K);
void ffn_wgrad_scalar(float *C, int64_t ldc, const float *A, int64_t lda, const float *B,
                      int64_t ldb, int64_t M, int64_t N, int64_t K);
void ffn_wgrad_avx2(float *C, int64_t ldc, const float *A, int64_t lda, const float *B,
                    int64_t ldb, int64_t M, int64_t N, int64_t K);
void ffn_wgrad_avx512(float *C, int64_t ldc, const float *A, int64_t lda, const float *B,
                      int64_t ldb, int64_t M, int64_t N, int64_t K);
/* ffn_wgrad with C's rows split across the context's threads. */
void ffn_wgrad_mt(const ffn_ctx *ctx, float *C, int64_t ldc, const float *A, int64_t lda,
                  const float *B, int64_t ldb, int64_t M, int64_t N, int64_t K);

/* ---- oneDNN matmul primitives with prepacked weights (matmul.c) ---------
 *   C (M, N) = op(A) (M, K) · B (K, N) [+ bias (N)]   (C += ... if accumulate)
 * A is stored (M, lda) or, when a_trans, (K, lda); C is (M, ldc).  B is a
 * packed layout made by ffn_mm_pack, or plain: (K, N) with row stride ldb
 * (FFN_MM_B_PLAIN) or stored transposed as (N, K) (FFN_MM_B_PLAIN_T).
 * Creating allocates; running never does (scratchpad from the caller). */
#include <dnnl_types.h>

/* In a function with `ffn_status st` and a `fail:` label: a oneDNN call
 * that fails sets st to FFN_ERR_INTERNAL naming who, what and the status,
 * and goes to fail (matmul.c, bf16.c, qgemm_batch.c). */
#define FFN_DNNL_TRY(who, call, what)                                                          \
    do {                                                                                       \
        dnnl_status_t s_ = (call);                                                             \
        if (s_ != dnnl_success) {                                                              \
            st = ffn_error(FFN_ERR_INTERNAL, "%s: %s failed (status %d)", who, what, (int)s_);  \
            goto fail;                                                                         \
        }                                                                                      \
    } while (0)
/* The process's one CPU engine of the objects that keep no engine of their
 * own (bf16 packers, the bf16 copies of low-precision weights): made on
 * first use, never freed. */
ffn_status ffn_dnnl_cpu_engine(dnnl_engine_t *out);

typedef struct ffn_mm_engine ffn_mm_engine;
typedef struct ffn_mm ffn_mm;
enum { FFN_MM_B_PLAIN = 0, FFN_MM_B_PLAIN_T = 1, FFN_MM_B_PACKED = 2 };
typedef struct ffn_mm_desc {
    int64_t M, N, K;
    int a_trans;
    int64_t lda;
    int b_kind;
    int64_t ldb;
    int64_t ldc;
    int bias;       /* add bias (N) */
    int accumulate; /* C += product */
    int bf16;       /* A and B bf16 (packed B made from fp32 weights), C and bias fp32 */
} ffn_mm_desc;
typedef struct ffn_mm_packed {
    dnnl_memory_desc_t md;
    void *data;
    size_t bytes;
} ffn_mm_packed;

ffn_status ffn_mm_engine_create(ffn_mm_engine **out);
void ffn_mm_engine_free(ffn_mm_engine *e);
/* Pack plain weights w (laid out as d->b_kind/ldb say) into the layout the
 * primitive for d (with b_kind = FFN_MM_B_PACKED) wants. */
ffn_status ffn_mm_pack(const ffn_mm_engine *e, const ffn_mm_desc *d, const float *w,
                       ffn_mm_packed *out);
/* ffn_mm_pack into a pack made before (or zeroed): when the layout is the
 * same, its buffer is written over in place (the weights' refresh after an
 * optimizer step allocates nothing and keeps the buffer's address). */
ffn_status ffn_mm_repack(const ffn_mm_engine *e, const ffn_mm_desc *d, const float *w,
                         ffn_mm_packed *out);
void ffn_mm_packed_free(ffn_mm_packed *p);
/* The packed layout for d (allocated, contents undefined): filled by a
 * reorder of the caller's (the bf16 packer, kernels/bf16.h). */
ffn_status ffn_mm_pack_layout(const ffn_mm_engine *e, const ffn_mm_desc *d, ffn_mm_packed *out);
ffn_status ffn_mm_create(const ffn_mm_engine *e, const ffn_mm_desc *d,
                         const ffn_mm_packed *packed, ffn_mm **out);
void ffn_mm_free(ffn_mm *m);
size_t ffn_mm_scratch_bytes(const ffn_mm *m);
/* b is the packed data or the plain matrix; bias may be NULL without bias;
 * a is float, or uint16_t bf16 when the desc said bf16 */
ffn_status ffn_mm_run(const ffn_mm_engine *e, const ffn_mm *m, float *c, const void *a,
                      const void *b, const float *bias, void *scratch, size_t scratch_cap);
/* A streaming-kernel view of a packed B (K, N) (see ffn_packed_view);
 * 1 when the layout is the supported one. */
int ffn_mm_packed_view(const ffn_mm_packed *p, int64_t K, int64_t N, ffn_packed_view *v);



#endif
