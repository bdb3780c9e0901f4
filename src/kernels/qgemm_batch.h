/* qgemm_batch.h -- y (n, rows) = x (n, cols) · Wᵀ by a bf16 copy of a
 * low-precision weight and oneDNN's bf16 matmul (fp32 accumulation); the
 * measured alternative of ffn_qgemm at large n (qgemm_batch.c).  Internal. */
#ifndef FFN_QGEMM_BATCH_H
#define FFN_QGEMM_BATCH_H

#include "kernels/qgemm.h"

typedef struct ffn_qgemm_bf16mm ffn_qgemm_bf16mm;
/* Decode w to bf16 (rows · cols · 2 bytes) and build the product.
 * Allocates. */
ffn_status ffn_qgemm_bf16mm_create(const ffn_qweight *w, ffn_qgemm_bf16mm **out);
/* y (n, rows), stride ldy, [+]= x (n, cols), stride ldx, · Wᵀ; x rounded
 * to bf16 first; any n.  Does not allocate. */
ffn_status ffn_qgemm_bf16mm_run(ffn_qgemm_bf16mm *m, const ffn_ctx *ctx, const float *x,
                                int64_t ldx, int64_t n, float *y, int64_t ldy, int accumulate);
void ffn_qgemm_bf16mm_free(ffn_qgemm_bf16mm *m); /* NULL is a no-op */

#endif /* FFN_QGEMM_BATCH_H */
