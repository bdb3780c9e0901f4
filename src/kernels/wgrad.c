/* wgrad.c -- the weight-gradient product for a small inner dimension:
 * C (M, N) += Aᵀ·B with A (K, M), B (K, N) and K the token count of a
 * backward step.  Here: the scalar baseline (same blocking and sum order
 * as the vector kernels in wgrad_impl.h, products rounded before the add),
 * the run-time dispatch, and the threaded entry point.
 *
 * Why a kernel of its own.  In the layer's backward dW_in += dGUᵀ·x and
 * dW_down += dyᵀ·H have K = N tokens (16..256 in training) and an output
 * of D·F floats that does not fit in any cache.  A general GEMM blocks K
 * as if it were large and streams C through memory for every block it
 * makes; here each tile of C is accumulated in registers over all of K
 * and C is read and written once.  Threads take contiguous row ranges of
 * C, no element is ever split across threads, and each element's sum
 * order depends on K alone: results are bitwise identical at every thread
 * count. */
#include "kernels/kernels.h"

#ifdef _OPENMP
#include <omp.h>
#endif

void ffn_wgrad_scalar(float *C, int64_t ldc, const float *A, int64_t lda, const float *B,
                      int64_t ldb, int64_t M, int64_t N, int64_t K) {
    enum { ROWS = 6, COLS = 16 };
    for (int64_t k0 = 0; k0 < K; k0 += FFN_WGRAD_KC) {
        int64_t kc = K - k0 < FFN_WGRAD_KC ? K - k0 : FFN_WGRAD_KC;
        for (int64_t i0 = 0; i0 < M; i0 += ROWS) {
            int64_t mr = M - i0 < ROWS ? M - i0 : ROWS;
            for (int64_t j0 = 0; j0 < N; j0 += COLS) {
                int64_t nr = N - j0 < COLS ? N - j0 : COLS;
                float acc[ROWS][COLS] = {{0}};
                for (int64_t k = k0; k < k0 + kc; k++) {
                    const float *a = A + k * lda + i0, *b = B + k * ldb + j0;
                    for (int64_t r = 0; r < mr; r++)
                        for (int64_t j = 0; j < nr; j++) acc[r][j] += a[r] * b[j];
                }
                for (int64_t r = 0; r < mr; r++)
                    for (int64_t j = 0; j < nr; j++) C[(i0 + r) * ldc + j0 + j] += acc[r][j];
            }
        }
    }
}

void ffn_wgrad(float *C, int64_t ldc, const float *A, int64_t lda, const float *B, int64_t ldb,
               int64_t M, int64_t N, int64_t K) {
    if (M <= 0 || N <= 0 || K <= 0) return;
    FFN_SIMD_DISPATCH(ffn_wgrad, C, ldc, A, lda, B, ldb, M, N, K);
}

/* Below this many multiply-adds one thread beats a parallel region. */
#define WGRAD_PAR_MIN_MACS ((int64_t)1 << 18)

void ffn_wgrad_mt(const ffn_ctx *ctx, float *C, int64_t ldc, const float *A, int64_t lda,
                  const float *B, int64_t ldb, int64_t M, int64_t N, int64_t K) {
    if (M <= 0 || N <= 0 || K <= 0) return;
    ffn_ctx_enter(ctx);
    /* row groups of 6 (the tile height), split evenly in contiguous ranges */
    int64_t groups = (M + 5) / 6;
#pragma omp parallel if (M * N * K >= WGRAD_PAR_MIN_MACS)
    {
        int64_t t = 0, nt = 1;
#ifdef _OPENMP
        t = omp_get_thread_num(), nt = omp_get_num_threads();
#endif
        int64_t g0 = groups * t / nt, g1 = groups * (t + 1) / nt;
        int64_t i0 = 6 * g0, i1 = 6 * g1 < M ? 6 * g1 : M;
        if (i1 > i0) ffn_wgrad(C + i0 * ldc, ldc, A + i0, lda, B, ldb, i1 - i0, N, K);
    }
}
