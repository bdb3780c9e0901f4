/* qgemm_int8.h -- ffn_qgemm at prompt sizes on AVX2 machines with int8
 * products (qgemm_int8_avx2.c): the activations quantized once per call to
 * int8 blocks (the row kernels' rule and block sizes: 32 for the 32-element
 * formats, 256 for the super-block ones), the weight's blocks unpacked to
 * int8 codes with their scales inside the call, and a register-blocked
 * vpmaddubsw product of 4 weight rows × a few tokens.  Internal to
 * src/kernels/qgemm*.c. */
#ifndef FFN_KERNELS_QGEMM_INT8_H
#define FFN_KERNELS_QGEMM_INT8_H

#include "kernels/qgemm_impl.h"

/* 1 when the int8 prompt kernel has an unpacker for the type. */
int ffn_qg_int8_has(ffn_ggml_type type);
/* Workspace of ffn_qg_int8_run for n tokens and `threads` threads. */
size_t ffn_qg_int8_ws_bytes(const ffn_qweight *w, int64_t n, int threads);
/* y[t·ldy + r] (+)= W[r] · q8(x[t]) for every row and token; needs AVX2,
 * a type ffn_qg_int8_has, w->rows, w->cols, n > 0, ws of
 * ffn_qg_int8_ws_bytes bytes for the enclosing OpenMP thread count. */
void ffn_qg_int8_run(const ffn_qweight *w, const float *x, int64_t ldx, int64_t n, float *y,
                     int64_t ldy, int accumulate, void *ws);

#endif /* FFN_KERNELS_QGEMM_INT8_H */
