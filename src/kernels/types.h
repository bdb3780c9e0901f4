/* types.h -- the one table of number types (src/kernels/types.c).
 * Internal; the public face is ffn/dtype.h.
 *
 * A row per ggml type (ffn_ggml_type's numbers) says everything ffn knows
 * of it: name, block size and bytes per block, the reference decoder and
 * encoder (src/kernels/quant.c, NULL where ffn has none), and the kernels
 * of its products per CPU level (the row kernels of qgemm_impl.h with the
 * activation layout each wants and the CPU features it needs beyond the
 * level), the prompt-size crossovers, the type that replaces it for rows
 * that are no whole blocks, llama.cpp's file type.  Nothing else in the
 * library names a type's properties: the layers, loaders and tools ask
 * this table (through ffn/dtype.h or the functions below).
 *
 * Adding a block format: its row here, its reference decode and encode
 * (quant.c, layout in quant.h), its kernels (qgemm_avx2.c, qgemm_avx512.c,
 * the panel decode in qgemm_panel_avx512.c) and their tests. */
#ifndef FFN_KERNELS_TYPES_H
#define FFN_KERNELS_TYPES_H

#include "kernels/kernels.h"
#include "kernels/qgemm_impl.h"

/* nb whole blocks (nb elements for the 1-element types), any alignment */
typedef void (*ffn_type_decode_fn)(const uint8_t *src, float *dst, int64_t nb);
typedef void (*ffn_type_encode_fn)(const float *src, uint8_t *dst, int64_t nb);

/* CPU features a kernel needs beyond its SIMD level: FFN_CPU_* of
 * kernels.h */

/* One level's product kernel: rows NULL means the level below's. */
typedef struct ffn_type_kernel {
    qg_rows_fn rows;
    int act;        /* the activation layout it wants (QG_ACT_*) */
    unsigned needs; /* FFN_CPU_* it needs, else the level below's kernel runs */
} ffn_type_kernel;

enum { FFN_TYPE_LEVELS = 3 }; /* FFN_SIMD_SCALAR, _AVX2, _AVX512 */

typedef struct ffn_type_info {
    const char *name;
    int order;                /* position in the lists users see (1, 2, ...); 0: listed last */
    int64_t block;            /* elements per block */
    size_t bytes;             /* bytes per block */
    ffn_type_decode_fn decode;
    ffn_type_encode_fn encode;
    ffn_type_kernel k[FFN_TYPE_LEVELS]; /* k[0].rows NULL: ffn does not compute with it */
    int32_t q32_offset;       /* QG_ACT_Q32 layouts: the weights' offset to unsigned (q8_0 128, q4_0 8) */
    int64_t panel_min_n;      /* n from which the bf16 panels take the product (0: never) */
    int64_t batch_min_n;      /* n from which a packed bf16 copy takes it (0: never) */
    int64_t avx2_panel_min_n; /* n from which the fp32 panels take it where the bf16 ones
                                 do not run (AVX2; qgemm_panel_avx2.c; 0: never) */
    ffn_ggml_type fallback;   /* for rows that are no whole blocks (F32: none) */
    uint32_t file_type;       /* llama.cpp's general.file_type */
    const char *dot;          /* "int8", "bf16", "fp32": what bounds its products */
    /* The fp16 scales of a block (for the loaders' check of a file's blocks
     * without decoding them): f16_scales of them, back to back from byte
     * f16_scale_off of the block; 0: none (the check decodes instead). */
    uint16_t f16_scale_off;
    uint8_t f16_scales;
    int64_t avx2_int8_min_n;  /* n from which the AVX2 int8 prompt kernel takes it where the
                                 bf16 panels do not run (qgemm_int8_avx2.c; 0: never) */
} ffn_type_info;

/* The row of a type, NULL for a number that is no known type. */
const ffn_type_info *ffn_type_info_of(ffn_ggml_type type);
/* 1 when ffn computes with the type (ffn_qgemm takes it). */
int ffn_type_computes(ffn_ggml_type type);
/* The kernel that runs the type at SIMD level `level` on this CPU, and the
 * activation layout it wants (*act): the level's own when the CPU has what
 * it needs, else the next lower level's. */
qg_rows_fn ffn_type_rows(ffn_ggml_type type, int level, int *act);

#endif /* FFN_KERNELS_TYPES_H */
