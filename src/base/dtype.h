/* base/dtype.h -- the number types below every floor: the public part
 * (ffn/dtype.h: ffn_ggml_type, the fp16 / bf16 conversions, implemented in
 * base/dtype.c) and the bulk conversions the readers and kernels share.
 * Internal; not installed.  The type table itself (which types ffn
 * decodes, encodes, computes with, and their kernels) is
 * src/kernels/types.h. */
#ifndef FFN_BASE_DTYPE_H
#define FFN_BASE_DTYPE_H

#include "base/common.h"
#include "ffn/dtype.h"

/* n fp16 (is_bf16 0) or bf16 values at src (any alignment) widened to
 * fp32, exactly (ffn_f16_to_f32 / ffn_bf16_to_f32 per element). */
void ffn_halves_to_f32(float *dst, const void *src, size_t n, int is_bf16);

#endif /* FFN_BASE_DTYPE_H */
