/* bf16_model.c -- the Transformer's projections at FFN_PRECISION_BF16 (see
 * bf16_model.h).  model.c sends each projection product (q|k|v, o, the LM
 * head; forward, input gradient and weight gradient) here instead of to
 * ffn_gemm; norms, RoPE, attention scores and softmax, residuals and the
 * loss stay fp32, as under torch.autocast("cpu", dtype=torch.bfloat16)
 * with fp32 master weights.
 *
 * Weights are read from a bf16 copy of the projection weights (q|k|v, o,
 * the head), refreshed after every change: its cost is part of each
 * training step (one read of those fp32 weights, one write of half their
 * bytes); the FFN and MoE layers keep their own bf16 copies.  Activations are
 * rounded per product into two buffers that grow to the largest operand
 * met and then stay: after the first step nothing here allocates. */
#include "nn/bf16_model.h"
#include "kernels/bf16.h"

#include <string.h>

struct model_bf16 {
    ffn_bf16_gemm *gemm;
    const float *params;
    int64_t n_params;
    uint16_t *wcopy;       /* (n_params) bf16; only the refreshed ranges are written */
    int64_t (*ranges)[2];  /* refreshed [begin, end) offsets into params */
    int64_t n_ranges, cap_ranges;
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
    free(s->ranges);
    ffn_free_aligned(s->buf[0]);
    ffn_free_aligned(s->buf[1]);
    free(s);
}

ffn_status model_bf16_begin(model_bf16 *s, const float *params, int64_t n) {
    if (s->n_params != n || !s->wcopy) {
        ffn_free_aligned(s->wcopy);
        s->n_params = 0;
        /* anonymous pages: the parts no projection reads (the FFN weights)
         * are never written and never become resident */
        if (!(s->wcopy = ffn_malloc_aligned((size_t)n * sizeof *s->wcopy)))
            return ffn_error(FFN_ERR_NOMEM, "bf16 model: out of memory for the bf16 copy of %lld "
                             "parameters", (long long)n);
        s->n_params = n;
    }
    s->params = params;
    s->n_ranges = 0;
    return FFN_OK;
}

ffn_status model_bf16_refresh(model_bf16 *s, const ffn_ctx *ctx, const float *w, int64_t count) {
    const int64_t off = (int64_t)(((uintptr_t)w - (uintptr_t)s->params) / sizeof(float));
    if (!w || (uintptr_t)w < (uintptr_t)s->params || off + count > s->n_params)
        return ffn_error(FFN_ERR_INTERNAL, "bf16 model: a weight outside the parameter block");
    for (int64_t i = 0; i < s->n_ranges; i++) /* (a tied head is the embedding: once) */
        if (s->ranges[i][0] == off && s->ranges[i][1] == off + count) return FFN_OK;
    if (s->n_ranges == s->cap_ranges) {
        int64_t cap = s->cap_ranges ? 2 * s->cap_ranges : 16;
        void *p = realloc(s->ranges, (size_t)cap * sizeof *s->ranges);
        if (!p) return ffn_error(FFN_ERR_NOMEM, "bf16 model: out of memory");
        s->ranges = p, s->cap_ranges = cap;
    }
    s->ranges[s->n_ranges][0] = off, s->ranges[s->n_ranges][1] = off + count;
    s->n_ranges++;
    ffn_ctx_enter(ctx);
    ffn_bf16_convert(s->wcopy + off, count, w, count, 1, count);
    return FFN_OK;
}

/* The bf16 form of operand X (rows, cols) with leading dimension ld: its
 * place in the weights' copy, or a rounded copy in buf[which] (ld = cols). */
static ffn_status operand(model_bf16 *s, int which, const float *x, int64_t rows, int64_t cols,
                          int64_t ld, const uint16_t **out, int64_t *out_ld) {
    const uintptr_t at = (uintptr_t)x, p0 = (uintptr_t)s->params;
    if (s->wcopy && at >= p0 && at < p0 + (uintptr_t)s->n_params * sizeof(float)) {
        const int64_t off = (int64_t)((at - p0) / sizeof(float)), last = off + (rows - 1) * ld + cols;
        for (int64_t i = 0; i < s->n_ranges; i++)
            if (off >= s->ranges[i][0] && last <= s->ranges[i][1]) {
                *out = s->wcopy + off;
                *out_ld = ld;
                return FFN_OK;
            }
    } /* (a weight no refresh covered is rounded here, as an activation) */
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
