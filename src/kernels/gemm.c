/* gemm.c -- the general matrix product: ffn_gemm over oneDNN's row-major
 * dnnl_sgemm, and ffn_gemm_ref, the naive triple loop (double accumulation)
 * that is the test oracle.  Degenerate shapes (M, N or K = 0) are handled
 * here so that the engine only ever sees well-formed calls.
 *
 * dnnl_sgemm uses the OpenMP thread count of the calling thread, which
 * ffn_gemm sets from the context (one thread below GEMM_PAR_MIN_MACS).  It may allocate packing buffers
 * internally (oneDNN's own scratch); that is the engine's business, not a
 * workspace the caller has to provide. */
#include "kernels/kernels.h"

#include <dnnl.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Below this many multiply-adds one thread is faster than waking the
 * others (and far faster when the machine is oversubscribed). */
#define GEMM_PAR_MIN_MACS ((int64_t)1 << 18)

/* C (M, N) *= beta, with beta = 0 writing zeros (NaN in C is ignored). */
static void scale_c(int64_t M, int64_t N, float beta, float *C, int64_t ldc) {
    for (int64_t i = 0; i < M; i++) {
        float *c = C + i * ldc;
        if (beta == 0.0f) memset(c, 0, (size_t)N * sizeof *c);
        else if (beta != 1.0f)
            for (int64_t j = 0; j < N; j++) c[j] *= beta;
    }
}

static ffn_status check_args(const char *fn, int transa, int transb, int64_t M, int64_t N,
                             int64_t K, int64_t lda, int64_t ldb, int64_t ldc) {
    if (M < 0 || N < 0 || K < 0)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: negative size (M=%lld, N=%lld, K=%lld)", fn,
                         (long long)M, (long long)N, (long long)K);
    int64_t a_cols = transa ? M : K, b_cols = transb ? K : N;
    if (lda < (a_cols > 1 ? a_cols : 1) || ldb < (b_cols > 1 ? b_cols : 1) ||
        ldc < (N > 1 ? N : 1))
        return ffn_error(FFN_ERR_INVALID_ARG,
                         "%s: leading dimension too small (lda=%lld needs >= %lld, ldb=%lld "
                         "needs >= %lld, ldc=%lld needs >= %lld)",
                         fn, (long long)lda, (long long)a_cols, (long long)ldb,
                         (long long)b_cols, (long long)ldc, (long long)N);
    return FFN_OK;
}

ffn_status ffn_gemm(const ffn_ctx *ctx, int transa, int transb, int64_t M, int64_t N, int64_t K,
                    float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                    float beta, float *C, int64_t ldc) {
    ffn_status st = check_args("ffn_gemm", transa, transb, M, N, K, lda, ldb, ldc);
    if (st) return st;
    if (M == 0 || N == 0) return FFN_OK;
    if (K == 0 || alpha == 0.0f) {
        scale_c(M, N, beta, C, ldc);
        return FFN_OK;
    }
    ffn_ctx_enter(ctx);
#ifdef _OPENMP
    int threads = omp_get_max_threads();
    int small = M * N < GEMM_PAR_MIN_MACS && M * N * K < GEMM_PAR_MIN_MACS; /* no overflow */
    if (small && threads > 1) omp_set_num_threads(1);
#endif
    dnnl_status_t s = dnnl_sgemm(transa ? 'T' : 'N', transb ? 'T' : 'N', M, N, K, alpha, A, lda,
                                 B, ldb, beta, C, ldc);
#ifdef _OPENMP
    if (small && threads > 1) omp_set_num_threads(threads);
#endif
    if (s != dnnl_success)
        return ffn_error(FFN_ERR_INTERNAL, "ffn_gemm: dnnl_sgemm failed (status %d, M=%lld N=%lld K=%lld)",
                         (int)s, (long long)M, (long long)N, (long long)K);
    return FFN_OK;
}

void ffn_gemm_ref(int transa, int transb, int64_t M, int64_t N, int64_t K, float alpha,
                  const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                  int64_t ldc) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0.0;
            for (int64_t k = 0; k < K; k++) {
                double a = transa ? A[k * lda + i] : A[i * lda + k];
                double b = transb ? B[j * ldb + k] : B[k * ldb + j];
                acc += a * b;
            }
            float *c = &C[i * ldc + j];
            double old = beta == 0.0f ? 0.0 : (double)beta * *c;
            *c = (float)((double)alpha * acc + old);
        }
}
