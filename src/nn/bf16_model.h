/* bf16_model.h -- the model's projections at FFN_PRECISION_BF16: q|k|v, o,
 * the LM head and their gradients (the FFN and MoE layers do their own,
 * the bf16 kind of src/nn/ffn_prod.c).  Internal; not installed. */
#ifndef FFN_NN_BF16_MODEL_H
#define FFN_NN_BF16_MODEL_H

#include "base/common.h"

typedef struct model_bf16 model_bf16;

/* Fails with FFN_ERR_UNSUPPORTED when the machine has no bf16 products. */
ffn_status model_bf16_create(model_bf16 **out);
void model_bf16_free(model_bf16 *s); /* NULL is a no-op */

/* The bf16 copy of the projection weights: model_bf16_begin(params, n)
 * for the parameter block of n floats, then model_bf16_refresh for each
 * weight the products read (q|k|v, o, the head); made again after every
 * change of the weights (ffn_model_params_changed, which the trainer calls
 * after each optimizer step).  The FFN and MoE layers refresh their own. */
ffn_status model_bf16_begin(model_bf16 *s, const float *params, int64_t n);
ffn_status model_bf16_refresh(model_bf16 *s, const ffn_ctx *ctx, const float *w, int64_t count);

/* ffn_gemm's contract with alpha 1 and beta 0 or 1, every product over bf16
 * operands with fp32 accumulation: an operand inside the parameter block
 * is read from its bf16 copy, any other is rounded to bf16 first (into a
 * buffer of the object, grown on first need). */
ffn_status model_bf16_gemm(model_bf16 *s, const ffn_ctx *ctx, int transa, int transb, int64_t M,
                           int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                           int64_t ldb, float beta, float *C, int64_t ldc);

#endif
