/* ffn/dtype.h -- the number types of tensors: ggml's types (ffn_ggml_type,
 * the numbers a GGUF file's type field holds) with their block sizes,
 * bytes, decoders and encoders, and the fp16 / bf16 conversions.
 *
 * Part of the public API; include <ffn.h>, not this file.
 *
 * One table in the library (src/kernels/types.c) describes every type: its
 * name, block size and bytes per block, whether ffn decodes it, encodes
 * it, computes with it, and the kernels it has per CPU level.  Every list
 * of types a user sees (the command line's --dtype / --quantize / --type
 * choices, the "it reads f32, f16, ..." of an error) is read from that
 * table through ffn_ggml_types / ffn_ggml_type_list below.
 *
 * Block layouts are ggml's, byte for byte; src/kernels/quant.h describes
 * them, beside the decoders. */
#ifndef FFN_DTYPE_H
#define FFN_DTYPE_H
#pragma GCC visibility push(default)

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ggml tensor types ------------------------------------------------ */

typedef enum ffn_ggml_type {
    FFN_GGML_TYPE_F32 = 0,
    FFN_GGML_TYPE_F16 = 1,
    FFN_GGML_TYPE_Q4_0 = 2,
    FFN_GGML_TYPE_Q4_1 = 3,
    FFN_GGML_TYPE_Q5_0 = 6,
    FFN_GGML_TYPE_Q5_1 = 7,
    FFN_GGML_TYPE_Q8_0 = 8,
    FFN_GGML_TYPE_Q8_1 = 9,
    FFN_GGML_TYPE_Q2_K = 10,
    FFN_GGML_TYPE_Q3_K = 11,
    FFN_GGML_TYPE_Q4_K = 12,
    FFN_GGML_TYPE_Q5_K = 13,
    FFN_GGML_TYPE_Q6_K = 14,
    FFN_GGML_TYPE_Q8_K = 15,
    FFN_GGML_TYPE_IQ2_XXS = 16,
    FFN_GGML_TYPE_IQ2_XS = 17,
    FFN_GGML_TYPE_IQ3_XXS = 18,
    FFN_GGML_TYPE_IQ1_S = 19,
    FFN_GGML_TYPE_IQ4_NL = 20,
    FFN_GGML_TYPE_IQ3_S = 21,
    FFN_GGML_TYPE_IQ2_S = 22,
    FFN_GGML_TYPE_IQ4_XS = 23,
    FFN_GGML_TYPE_I8 = 24,
    FFN_GGML_TYPE_I16 = 25,
    FFN_GGML_TYPE_I32 = 26,
    FFN_GGML_TYPE_I64 = 27,
    FFN_GGML_TYPE_F64 = 28,
    FFN_GGML_TYPE_IQ1_M = 29,
    FFN_GGML_TYPE_BF16 = 30,
    FFN_GGML_TYPE_TQ1_0 = 34,
    FFN_GGML_TYPE_TQ2_0 = 35,
    FFN_GGML_TYPE_MXFP4 = 39
} ffn_ggml_type;

#define FFN_GGML_TYPE_COUNT 40 /* one past the largest number known */
/* The block format a command takes when it is given no type (`ffn bench
 * qgemm --type`): ggml's plainest 4-bit format. */
#define FFN_GGML_TYPE_DEFAULT FFN_GGML_TYPE_Q4_0

/* ggml's name ("q4_K", "f16", ...); "?" for a number that is no known type. */
const char *ffn_ggml_type_name(ffn_ggml_type type);
/* Parse a name as ffn_ggml_type_name spells it (case-insensitive).
 * Returns 1 and sets *out when known, 0 otherwise. */
int ffn_ggml_type_parse(const char *name, ffn_ggml_type *out);
/* Elements per block (1 for f32, f16, ...) and bytes per block; 0 for an
 * unknown type.  Every type ggml files may hold is known here, also those
 * ffn cannot convert. */
int64_t ffn_ggml_block_size(ffn_ggml_type type);
size_t ffn_ggml_type_size(ffn_ggml_type type);
/* 1 when ffn converts the type to fp32 / from fp32 (the DECODES and
 * ENCODES capabilities below), 0 otherwise. */
int ffn_ggml_can_dequantize(ffn_ggml_type type);
int ffn_ggml_can_quantize(ffn_ggml_type type);

/* Bytes of a row of n elements.  FFN_ERR_INVALID_ARG (naming the type, n
 * and the block size) when n < 0 or n is not a multiple of the block size;
 * FFN_ERR_UNSUPPORTED for an unknown type; FFN_ERR_OVERFLOW. */
ffn_status ffn_ggml_row_size(ffn_ggml_type type, int64_t n, size_t *bytes);
/* Decode n elements (a multiple of the block size) at src (any alignment)
 * into dst.  FFN_ERR_UNSUPPORTED for a type ffn cannot decode. */
ffn_status ffn_ggml_dequantize_row(ffn_ggml_type type, const void *src, float *dst, int64_t n);
/* Encode n fp32 values into ffn_ggml_row_size bytes at dst (any
 * alignment).  Block types need finite inputs (FFN_ERR_INVALID_ARG naming
 * the first element that is not).  q4_K and q6_K saturate values beyond
 * their range; q8_0 and q4_0 follow ggml there too (a block whose scale
 * exceeds fp16's range gets an infinite scale), and f16 rounds overflow
 * to infinity. */
ffn_status ffn_ggml_quantize_row(ffn_ggml_type type, const float *src, void *dst, int64_t n);

/* ---- what ffn does with a type ------------------------------------------ */

/* Capabilities (bits): DECODES to fp32 (ffn_ggml_dequantize_row), ENCODES
 * from fp32 (ffn_ggml_quantize_row), COMPUTES: a model's matrix of this
 * type is multiplied as it is (ffn_ggml_matmul, the layers' products). */
enum { FFN_GGML_DECODES = 1u, FFN_GGML_ENCODES = 2u, FFN_GGML_COMPUTES = 4u };
/* The capability bits of a type (0 for an unknown one). */
unsigned ffn_ggml_type_caps(ffn_ggml_type type);
/* The types that have every bit of `caps`, in the table's order (f32, f16,
 * bf16, then the block formats, f64 last), into out[0..max); returns how
 * many there are (also when more than max). */
int ffn_ggml_types(unsigned caps, ffn_ggml_type *out, int max);
/* Those types' names joined for a message: "f32, f16, bf16, q8_0" with
 * `last` (e.g. " or ", ", ") before the last one, into buf (cap bytes,
 * always NUL-terminated).  Returns buf. */
char *ffn_ggml_type_list(unsigned caps, const char *last, char *buf, size_t cap);
/* The type a matrix of `cols` columns is stored in when `type` is asked
 * for: `type` itself when cols is a multiple of its block size, else
 * llama.cpp's tensor_type_fallback when cols is a multiple of 32 (q4_K ->
 * q5_0, q5_K -> q5_1, q6_K -> q8_0, q2_K / q3_K -> q4_0, iq4_xs -> iq4_nl),
 * every block type to f16 at last.  The one rule of ffn_model_quantize and
 * of the GGUF files ffn writes (ffn_type_fallback). */
ffn_ggml_type ffn_ggml_type_for_cols(ffn_ggml_type type, int64_t cols);
/* The instruction class that bounds the type's products on this library's
 * kernels: "int8" (the integer block formats: activations are rounded to
 * int8 blocks), "bf16" (vdpbf16ps where the CPU has it) or "fp32" (FMA). */
const char *ffn_ggml_type_dot(ffn_ggml_type type);

/* llama.cpp's general.file_type (enum llama_ftype) of a file whose
 * matrices are `type` (0, "all f32", for a type without one). */
uint32_t ffn_ggml_file_type(ffn_ggml_type type);
/* y (n, rows) = x (n, cols) · Wᵀ for W (rows, cols) stored as rows of
 * `type` (ffn_ggml_row_size(type, cols) bytes each, back to back, any
 * alignment: a GGUF tensor's bytes as they are), on the context's threads
 * with the fastest kernels the CPU has (FFN_SIMD caps them).  Types f32,
 * f16, bf16, q8_0, q4_0, q4_K, q6_K (else FFN_ERR_UNSUPPORTED).  The
 * integer formats round x to int8 blocks (32 values; 256 for the K-quants)
 * and bf16 weights may round x to bf16, as ggml does.  A thread's first
 * call at a size allocates the scratch for x, later ones do not. */
ffn_status ffn_ggml_matmul(const ffn_ctx *ctx, ffn_ggml_type type, int64_t rows, int64_t cols,
                           const void *w, const float *x, int64_t n, float *y);

/* ---- fp16 / bf16 ------------------------------------------------------- */
/* Exact widening (subnormals, infinities, NaN payloads kept) and
 * round-to-nearest-even narrowing (overflow gives infinity, NaN stays NaN
 * with its sign, quieted). */
float ffn_f16_to_f32(uint16_t h);
float ffn_bf16_to_f32(uint16_t b);
uint16_t ffn_f32_to_f16(float f);
uint16_t ffn_f32_to_bf16(float f);


#ifdef __cplusplus
}
#endif

#pragma GCC visibility pop
#endif /* FFN_DTYPE_H */
