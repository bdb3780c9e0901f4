/* bf16_model.c -- the Transformer's projections at FFN_PRECISION_BF16 (see
 * bf16_model.h).  model.c sends each projection product (q|k|v, o, the LM
 * head; forward, input gradient and weight gradient) here instead of to
 * ffn_gemm; norms, RoPE, attention scores and softmax, residuals and the
 * loss stay fp32, as under torch.autocast("cpu", dtype=torch.bfloat16)
 * with fp32 master weights.
 *
 * Weights are read from one bf16 copy of the parameter block, refreshed
 * whole after every change (its cost is part of each training step: one
 * read of the fp32 block, one write of half its bytes).  Activations are
 * rounded per product into two buffers that grow to the largest operand
 * met and then stay: after the first step nothing here allocates. */
#include "nn/bf16_model.h"
#include "kernels/bf16.h"

#include <string.h>

struct model_bf16 {
    ffn_bf16_gemm *gemm;
    const float *params;
    int64_t n_params;
    uint16_t *wcopy;       /* (n_params) bf16 */
    uint16_t *buf[2];      /* rounded activation operands A, B */
    size_t cap[2];         /* elements */
};

ffn_status model_bf16_create(model_bf16 **out) {
    *out = NULL;
    model_bf16 *s = calloc(1, sizeof *s);
    if (!s) return ffn_error(FFN_ERR_NOMEM, "bf16 model: out of memory");
    ffn_status st = ffn_bf16_gemm_create(&s->gemm);
    if (st) {
        free(s);
        return st;
    }
    *out = s;
    return FFN_OK;
}

void model_bf16_free(model_bf16 *s) {
    if (!s) return;
    ffn_bf16_gemm_free(s->gemm);
    ffn_free_aligned(s->wcopy);
    ffn_free_aligned(s->buf[0]);
    ffn_free_aligned(s->buf[1]);
    free(s);
}

ffn_status model_bf16_refresh(model_bf16 *s, const ffn_ctx *ctx, const float *params, int64_t n) {
    if (s->n_params != n || !s->wcopy) {
        ffn_free_aligned(s->wcopy);
        s->n_params = 0;
        if (!(s->wcopy = ffn_malloc_aligned((size_t)n * sizeof *s->wcopy)))
            return ffn_error(FFN_ERR_NOMEM, "bf16 model: out of memory for the bf16 copy of %lld "
                             "parameters", (long long)n);
        s->n_params = n;
    }
    s->params = params;
    ffn_ctx_enter(ctx);
    ffn_bf16_convert(s->wcopy, n, params, n, 1, n);
    return FFN_OK;
}

/* The bf16 form of operand X (rows, cols) with leading dimension ld: its
 * place in the weights' copy, or a rounded copy in buf[which] (ld = cols). */
static ffn_status operand(model_bf16 *s, int which, const float *x, int64_t rows, int64_t cols,
                          int64_t ld, const uint16_t **out, int64_t *out_ld) {
    const uintptr_t at = (uintptr_t)x, p0 = (uintptr_t)s->params;
    if (s->wcopy && at >= p0 && at < p0 + (uintptr_t)s->n_params * sizeof(float)) {
        *out = s->wcopy + (at - p0) / sizeof(float);
        *out_ld = ld;
        return FFN_OK;
    }
    size_t need = (size_t)rows * (size_t)cols;
    if (need > s->cap[which]) {
        uint16_t *p = ffn_malloc_aligned(need * sizeof *p);
        if (!p) return ffn_error(FFN_ERR_NOMEM, "bf16 model: out of memory (%zu bf16 values)", need);
        ffn_free_aligned(s->buf[which]);
        s->buf[which] = p, s->cap[which] = need;
    }
    ffn_bf16_convert(s->buf[which], cols, x, ld, rows, cols);
    *out = s->buf[which];
    *out_ld = cols;
    return FFN_OK;
}

ffn_status model_bf16_gemm(model_bf16 *s, const ffn_ctx *ctx, int transa, int transb, int64_t M,
                           int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                           int64_t ldb, float beta, float *C, int64_t ldc) {
    if (beta != 0.0f && beta != 1.0f)
        return ffn_error(FFN_ERR_INTERNAL, "bf16 model: beta %g (expected 0 or 1)", (double)beta);
    if (M == 0 || N == 0) return FFN_OK;
    const uint16_t *a, *b;
    int64_t la, lb;
    ffn_status st;
    ffn_ctx_enter(ctx);
    if ((st = operand(s, 0, A, transa ? K : M, transa ? M : K, lda, &a, &la)) ||
        (st = operand(s, 1, B, transb ? N : K, transb ? K : N, ldb, &b, &lb)))
        return st;
    return ffn_bf16_gemm_run(s->gemm, ctx, transa, transb, M, N, K, a, la, b, lb, beta != 0.0f, C,
                             ldc);
}
