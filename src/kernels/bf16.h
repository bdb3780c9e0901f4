/* bf16.h -- mixed-precision products: bf16 operands, fp32 accumulation and
 * fp32 results (the kernels of FFN_PRECISION_BF16, include/ffn/layer.h).
 * Internal; not installed.
 *
 *   ffn_bf16_hw          may this process run bf16 products?
 *   ffn_bf16_convert     fp32 rows -> bf16 rows, round to nearest even
 *   ffn_bf16_gemm_*      C (M, N) [+]= op(A) · op(B) over bf16 A and B with
 *                        cached oneDNN matmul primitives (any shape; the
 *                        model's projections and their gradients)
 * The layer's products with prepacked bf16 weights use ffn_mm (matmul.c)
 * with desc.bf16 set. */
#ifndef FFN_KERNELS_BF16_H
#define FFN_KERNELS_BF16_H

#include "kernels/kernels.h"

#include <stdint.h>

/* 1 when bf16 products run on this machine at the SIMD level in use: the
 * AVX-512 level (FFN_SIMD not capping it lower) and AVX512_BF16
 * (vdpbf16ps).  Without them bf16 is refused, never emulated. */
int ffn_bf16_hw(void);

/* dst (rows, ldd) = bf16(src (rows, lds)), cols per row; rounding to
 * nearest even as ffn_f32_to_bf16 (the AVX512_BF16 path also flushes
 * subnormal inputs to zero, as vcvtneps2bf16 does).  Threads over rows. */
void ffn_bf16_convert(uint16_t *dst, int64_t ldd, const float *src, int64_t lds, int64_t rows,
                      int64_t cols);

/* Products of any shape over bf16 operands, row-major with BLAS
 * conventions as ffn_gemm: C (M, N) = op(A)·op(B) (accumulate 0) or
 * C += op(A)·op(B) (accumulate 1), fp32 C.  A primitive per shape, made on
 * first use and kept (creating allocates; running does not, unless a new
 * primitive wants a larger scratchpad).  One object is used by one thread
 * at a time. */
typedef struct ffn_bf16_gemm ffn_bf16_gemm;
ffn_status ffn_bf16_gemm_create(ffn_bf16_gemm **out);
void ffn_bf16_gemm_free(ffn_bf16_gemm *g); /* NULL is a no-op */
ffn_status ffn_bf16_gemm_run(ffn_bf16_gemm *g, const ffn_ctx *ctx, int transa, int transb,
                             int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda,
                             const uint16_t *B, int64_t ldb, int accumulate, float *C,
                             int64_t ldc);

/* Reorders of a plain bf16 matrix B (K, N) (row stride ldb, or stored
 * transposed (N, K) when trans) into a packed layout made by
 * ffn_mm_pack_layout for a bf16 product: the refresh of a layer's packs
 * after every optimizer step, without JIT or allocation after the first. */
typedef struct ffn_bf16_packer ffn_bf16_packer;
ffn_status ffn_bf16_packer_create(int64_t K, int64_t N, int64_t ldb, int trans,
                                  const ffn_mm_packed *target, ffn_bf16_packer **out);
void ffn_bf16_packer_free(ffn_bf16_packer *p); /* NULL is a no-op */
ffn_status ffn_bf16_packer_run(ffn_bf16_packer *p, const ffn_ctx *ctx, const uint16_t *b,
                               ffn_mm_packed *target);

#endif
