/* gemv.c -- the streaming small-N path: the scalar baseline of the
 * row-block dot-product kernel, its run-time dispatch, the layer forward
 * built on it (ffn_decode_forward), and the split between it and the
 * matrix engine (ffn_stream_max_n).
 *
 * Why: at small n the products are memory-bound; here each weight comes
 * from DRAM once for all n tokens, and the gate⊙up epilogue runs on a
 * column block while it is still in cache.  With AVX-512 the stream is the
 * matrix engine's own packed weights (gemv_packed_avx512.c: one sequential
 * stream per 64-column panel, 6-token register blocks, the panel reused
 * from L2 by every token group), else the caller's plain rows (the kernels
 * here and in gemv_avx2.c / gemv_avx512.c: 4-row blocks reused from L1/L2
 * by every token group).  Threads take contiguous column ranges (static
 * schedule), and no output is ever split across threads: results are
 * bitwise identical at every thread count, and a token's result does not
 * depend on the others in the batch.
 *
 * The split (forward and recompute with n <= ffn_stream_max_n stream; a
 * table, not a start-up measurement, so that a token count always takes
 * the same path and gives the same bits).  Measured with
 * bench/smallbatch.c (SMALLBATCH_CPU_TIME=1: process CPU time, one thread,
 * on a loaded 2-core Zen 4), the whole layer forward, streaming / engine
 * on the same packed weights, n = 1 2 4 8 16 24 32 48 64:
 *   SwiGLU (1024, 2816)   0.90 0.78 0.81 0.99 0.84 0.88 0.92 0.94 0.96
 *   GELU   (1024, 4096)   0.86 0.71 0.76 0.83 0.85 0.88 0.92 0.95 0.98
 *   SwiGLU (4096, 11008)  0.80 0.65 0.80 0.88 0.90 0.94 0.89 0.96 0.98
 * and for the products alone (gemv_packed vs brgemm, n = 1..64) 0.62-0.96
 * at (K, N) = (1024, 5632), 0.85-1.00 at (2816, 1024) (1.16 at n = 1, a
 * 0.4 ms product), 0.65-0.98 at (11008, 4096).  The streaming kernel's
 * lead shrinks as n grows and the layer turns compute-bound (at about
 * n = 6 on one core, 14 on two), where both run at the FMA rate.  So: packed panels (AVX-512) stream up to n = 64, the largest pass
 * the kernel keeps in one read of the weights (GP_CHUNK).  The plain-row
 * AVX2 kernel against oneDNN held to AVX2 (ONEDNN_MAX_CPU_ISA=AVX2, as on
 * a machine without AVX-512), the products alone at (1024, 5632) and
 * (2816, 1024): 0.63-1.07 at n = 4, 0.81-0.92 at 8, 1.14 at 12, 0.77-0.95
 * at 16, 1.06 at 24, 0.64-0.84 at 32..64 (the engine's AVX2 kernels are
 * weak at small M): AVX2 streams up to 64 too.  The scalar level, and
 * AVX-512 when the engine's layout has no view (the plain-row AVX-512
 * kernel lost 1.36-1.56x to brgemm from n = 4 on), stream up to
 * FFN_DECODE_MAX_N = 4 as before.
 * bench/bench_smallbatch.sh prints the same ratios on a quiet machine
 * ("tbl/engine"). */
#include "ffn/layer.h"
#include "kernels/kernels.h"

#include <stdlib.h>

void ffn_gemv_scalar(float *out, int64_t ldo, const float *W, int64_t K, const float *x,
                     int64_t ldx, int64_t n, int64_t rows) {
    for (int64_t r = 0; r < rows; r++) {
        const float *w = W + r * K;
        for (int64_t t = 0; t < n; t++) {
            const float *xv = x + t * ldx;
            float acc[8] = {0};
            int64_t k = 0;
            for (; k + 8 <= K; k += 8)
                for (int j = 0; j < 8; j++) acc[j] += w[k + j] * xv[k + j];
            for (int j = 0; k < K; k++, j++) acc[j] += w[k] * xv[k];
            out[t * ldo + r] =
                ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
        }
    }
}

void ffn_gemv(float *out, int64_t ldo, const float *W, int64_t K, const float *x, int64_t ldx,
              int64_t n, int64_t rows) {
    FFN_SIMD_DISPATCH(ffn_gemv, out, ldo, W, K, x, ldx, n, rows);
}

/* Rows per work item: small enough to balance two threads on any F, large
 * enough to amortise the loop and keep the hardware prefetchers streaming. */
enum { ROW_BLOCK = 16 };
/* Below this many multiply-adds one thread beats a parallel region. */
#define PAR_MIN_MACS 65536

void ffn_gemv_mt(const ffn_ctx *ctx, float *out, int64_t ldo, const float *W, int64_t K,
                 const float *x, int64_t ldx, int64_t n, int64_t rows) {
    ffn_ctx_enter(ctx);
    int64_t nb = (rows + ROW_BLOCK - 1) / ROW_BLOCK;
#pragma omp parallel for schedule(static) if (n * rows * K >= PAR_MIN_MACS)
    for (int64_t b = 0; b < nb; b++) {
        int64_t r0 = b * ROW_BLOCK, len = rows - r0 < ROW_BLOCK ? rows - r0 : ROW_BLOCK;
        ffn_gemv(out + r0, ldo, W + r0 * K, K, x, ldx, n, len);
    }
}

/* Columns per work item on the packed path: one panel. */
static int64_t col_block(const ffn_packed_view *v) { return v ? v->nb : ROW_BLOCK; }

/* gu columns [j0, j1) of the gate half (and the same of the up half) for
 * all n tokens: packed panels when there is a view, else plain rows. */
static void in_block(float *gu, const float *x, int64_t n, int64_t D, int64_t F, int64_t P,
                     const ffn_decode_weights *w, int64_t j0, int64_t j1) {
    int gated = w->w_gate != NULL;
    if (w->in_t) {
        ffn_gemv_packed_avx512(gu + j0, P, w->in_t, x, D, n, j0, j1);
        if (gated) ffn_gemv_packed_avx512(gu + F + j0, P, w->in_t, x, D, n, F + j0, F + j1);
    } else {
        const float *first = gated ? w->w_gate : w->w_up;
        ffn_gemv(gu + j0, P, first + j0 * D, D, x, D, n, j1 - j0);
        if (gated) ffn_gemv(gu + F + j0, P, w->w_up + j0 * D, D, x, D, n, j1 - j0);
    }
    if (w->b_in)
        for (int64_t t = 0; t < n; t++) {
            ffn_add_bias(gu + t * P + j0, w->b_in + j0, j1 - j0);
            if (gated) ffn_add_bias(gu + t * P + F + j0, w->b_in + F + j0, j1 - j0);
        }
}

void ffn_decode_project_in(const ffn_ctx *ctx, float *gu, const float *x, int64_t n, int64_t D,
                           int64_t F, const ffn_decode_weights *w) {
    ffn_ctx_enter(ctx);
    int64_t P = w->w_gate ? 2 * F : F, cb = col_block(w->in_t), nb = (F + cb - 1) / cb;
#pragma omp parallel for schedule(static) if (n * P * D >= PAR_MIN_MACS)
    for (int64_t b = 0; b < nb; b++) {
        int64_t j0 = b * cb, j1 = j0 + cb < F ? j0 + cb : F;
        in_block(gu, x, n, D, F, P, w, j0, j1);
    }
}

void ffn_decode_project_down(const ffn_ctx *ctx, float *y, const float *h, int64_t n, int64_t D,
                             int64_t F, const ffn_decode_weights *w) {
    ffn_ctx_enter(ctx);
    int64_t ob = col_block(w->down_t), n_out = (D + ob - 1) / ob;
#pragma omp parallel for schedule(static) if (n * D * F >= PAR_MIN_MACS)
    for (int64_t b = 0; b < n_out; b++) {
        int64_t i0 = b * ob, i1 = i0 + ob < D ? i0 + ob : D;
        if (w->down_t) ffn_gemv_packed_avx512(y + i0, D, w->down_t, h, F, n, i0, i1);
        else ffn_gemv(y + i0, D, w->w_down + i0 * F, F, h, F, n, i1 - i0);
        if (w->b_down)
            for (int64_t t = 0; t < n; t++) ffn_add_bias(y + t * D + i0, w->b_down + i0, i1 - i0);
    }
}

ffn_status ffn_decode_forward(const ffn_ctx *ctx, float *y, float *gu, float *h, const float *x,
                              int64_t n, int64_t D, int64_t F, ffn_act act,
                              const ffn_decode_weights *w) {
    ffn_ctx_enter(ctx);
    int gated = w->w_gate != NULL;
    int64_t P = gated ? 2 * F : F;
    int64_t cb = col_block(w->in_t), n_in = (F + cb - 1) / cb;
#pragma omp parallel for schedule(static) if (n * P * D >= PAR_MIN_MACS)
    for (int64_t b = 0; b < n_in; b++) {
        int64_t j0 = b * cb, j1 = j0 + cb < F ? j0 + cb : F;
        in_block(gu, x, n, D, F, P, w, j0, j1);
        for (int64_t t = 0; t < n; t++) { /* the fused epilogue, on this block */
            const float *g = gu + t * P + j0;
            if (gated) ffn_glu_fwd(act, h + t * F + j0, g, g + F, j1 - j0);
            else ffn_act_fwd(act, h + t * F + j0, g, j1 - j0);
        }
    }
    ffn_decode_project_down(ctx, y, h, n, D, F, w);
    return FFN_OK;
}

/* ---- the split between the streaming kernels and the engine ------------- */

static int64_t env_max_n(void) {
    static int64_t cached = -2; /* -2 unread, -1 unset */
    int64_t v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v == -2) {
        const char *s = getenv("FFN_STREAM_MAX_N");
        char *end = NULL;
        long long parsed = s ? strtoll(s, &end, 10) : -1;
        v = (s && end != s && *end == '\0' && parsed >= 0) ? (int64_t)parsed : -1;
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return v;
}

static int64_t forced_max_n = -1;

void ffn_stream_force_max_n(int64_t n) { __atomic_store_n(&forced_max_n, n, __ATOMIC_RELAXED); }

int64_t ffn_stream_max_n(int packed) {
    int64_t forced = __atomic_load_n(&forced_max_n, __ATOMIC_RELAXED);
    if (forced < 0) forced = env_max_n();
    if (forced >= 0) return forced;
    if (packed) return 64; /* AVX-512 over the packed panels: one pass (GP_CHUNK) */
    return ffn_simd() == FFN_SIMD_AVX2 ? 64 : FFN_DECODE_MAX_N; /* plain rows */
}
