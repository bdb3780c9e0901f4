/* gemv.c -- the streaming small-N (decode) path: the scalar baseline of
 * the row-block dot-product kernel, its run-time dispatch, and the layer
 * forward built on it (ffn_decode_forward).
 *
 * Why: at N = 1..4 the products are memory-bound; here each weight is
 * streamed once for all n tokens, and the gate⊙up epilogue runs on a
 * column block while it is still in cache.  With AVX-512 the stream is the
 * matrix engine's own packed weights (gemv_packed_avx512.c: one sequential
 * stream per 64-column panel), else the caller's plain rows (the kernels
 * here and in gemv_avx2.c / gemv_avx512.c).  Threads take contiguous
 * column ranges (static schedule), and no output is ever split across
 * threads: results are bitwise identical at every thread count.
 *
 * The threshold (FFN_DECODE_MAX_N = 4) is measured, one thread, CPU time,
 * input projection of (D, F) = (4096, 11008): streaming 9.1 / 10.2 / 11.5 /
 * 12.1 ms at n = 1..4 against oneDNN brgemm on the same packed weights 9.0
 * / 9.8 / 10.5 / 10.8 ms -- both at the ~40 GB/s a core reads -- and 21.5
 * against 11.3 ms at n = 5 (the streaming kernel keeps 4 tokens in
 * registers and re-reads the weights for the next 4).  So the streaming
 * path is kept where it ties, for its fused epilogue and thread-count
 * invariance, and the engine takes over above. */
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
    int64_t ob = col_block(w->down_t), n_out = (D + ob - 1) / ob;
#pragma omp parallel for schedule(static) if (n * D * F >= PAR_MIN_MACS)
    for (int64_t b = 0; b < n_out; b++) {
        int64_t i0 = b * ob, i1 = i0 + ob < D ? i0 + ob : D;
        if (w->down_t) ffn_gemv_packed_avx512(y + i0, D, w->down_t, h, F, n, i0, i1);
        else ffn_gemv(y + i0, D, w->w_down + i0 * F, F, h, F, n, i1 - i0);
        if (w->b_down)
            for (int64_t t = 0; t < n; t++) ffn_add_bias(y + t * D + i0, w->b_down + i0, i1 - i0);
    }
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
    if (packed) return 64;                            /* AVX-512 over the packed panels */
    return ffn_simd() == FFN_SIMD_AVX2 ? 8 : FFN_DECODE_MAX_N; /* plain rows */
}
