/* types.c -- the one table of number types (see types.h) and the public
 * ffn_ggml_* functions over it (ffn/dtype.h).
 *
 * Product kernels per level: the scalar level decodes with the row's
 * decoder (ffn_qg_rows_scalar, qgemm.c); AVX2 (qgemm_avx2.c) and AVX-512
 * (qgemm_avx512.c) have one kernel per type.  The AVX-512 integer kernels
 * need VNNI (vpdpbusd) and the bf16 one AVX512_BF16 (vdpbf16ps); without
 * them the AVX2 kernel runs.
 *
 * Crossovers (panel_min_n: from this many rows of x on, ffn_qgemm decodes
 * the weight into bf16 panels inside the call, qgemm_panel_avx512.c, on a
 * CPU with AVX512_BF16).  Measured with bench/qgemm_batch.sh (W 2048 ×
 * 8192, 1 thread, n = 8, 16, 32, 64; a 2-core machine shared with other
 * jobs, so rough), GFLOP/s of row kernels / panels:
 *
 *   n      q8_0        q4_0        q4_K        q6_K        bf16        f16 (not taken)
 *   8    14.7/28.7   71.8/20.3   33.8/29.5   14.5/18.3   19.9/19.3    7.3/14.8
 *   16   15.8/15.5   27.4/18.4   37.8/22.4   22.5/17.3   21.6/28.2    6.8/18.5
 *   32   11.9/34.7   22.6/23.1   29.5/ 7.5   49.0/23.1   20.1/49.1    9.0/44.3
 *   64   12.1/47.5   15.0/32.9   18.2/42.1   26.3/40.6   16.8/42.3    9.5/43.5
 *
 * (at n = 512 the panels run 3-5× the row kernels: docs/QUANTIZATION.md).
 * The row kernels keep a token's tile of activations next to each weight
 * row, the panels decode the whole weight once per call: the panels win
 * once enough tokens share that decode, soonest for f16 (whose row kernel
 * converts per token) and latest for q4_0 and the K-quants (whose row
 * kernels are the cheapest per weight byte).  No type goes below 32: a
 * shorter prompt stays on the kernels decode uses, so its logits equal
 * the KV-cached steps' to float rounding (the panels round x and W to
 * bf16 instead; tests/cli/test_quant_run.sh holds a prompt of 18 tokens
 * to 1e-4 against its cached steps).  f16 takes no panels: they would
 * round its 11-bit weights to bf16's 8, where its row kernel computes them
 * exactly in fp32 (llama.cpp agrees with that to KL 3e-5 in
 * tests/cli/test_llamacpp.sh; through the panels it measured 4e-4).
 * ffn_qgemm_panel still takes f16 weights.
 *
 * avx2_panel_min_n: from this many rows of x on, where the bf16 panels
 * do not run (AVX2, or AVX-512 without AVX512_BF16), ffn_qgemm decodes
 * the weight into fp32 panels inside the call (qgemm_panel_avx2.c, the
 * row's own decoder; 0: never).  Measured with bench/qgemm_batch.sh on the
 * AVX2-only Zen 3 (W 2048 × 2816, 1 thread, best of >= 3; the machine
 * shared with 7 other jobs, load average 4, so rough), GFLOP/s of row
 * kernels / fp32 panels (panels still on the table decoders):
 *
 *   n      q4_0         q4_K
 *   32    28.3/14.6    19.8/18.7
 *   64    14.5/23.3    13.6/15.3
 *   256   18.6/53.4    17.7/38.0
 *
 * q4_0 and the K-quants (the cheapest row kernels per weight byte) cross
 * at 64; q8_0, f16 and bf16 (dearer row kernels: q8_0 reads twice the
 * bytes, f16/bf16 convert per token) are put at 32, the lowest n any type
 * takes a panel at (a shorter prompt stays on the decode kernels, as
 * above).  f32 takes none (the layer has its own fp32 engine).
 *
 * avx2_int8_min_n: from this many rows of x on, where the bf16 panels do
 * not run, ffn_qgemm takes the int8 products (qgemm_int8_avx2.c: tokens
 * quantized once per call, blocks unpacked to int8 codes, vpmaddubsw;
 * before the fp32 panels; 0: never).  Measured with
 * bench/bench_qgemm_int8.sh on the AVX2-only Zen 3 (W 2048 × 8192,
 * 1 thread, the thread's CPU time, the three paths taken in turn, best of
 * 3; the machine shared with other jobs at load average 3-6, so ±5-10%),
 * GFLOP/s of row kernels / fp32 panels / int8 (FMA peak 100-106):
 *
 *   n     q8_0            q4_0            q4_K            q6_K
 *   16   47.4/43.9/39.2  43.8/43.3/49.4  65.1/33.6/56.1  65.8/35.6/46.1
 *   32   47.8/55.7/53.8  44.6/57.0/72.2  61.7/46.5/75.9  67.4/50.5/64.0
 *   48   47.8/68.5/60.2  43.7/63.4/82.2  62.8/52.6/87.2  66.4/61.0/71.3
 *   64   47.4/67.4/63.9  43.9/65.0/89.2  62.6/60.0/94.5  65.5/69.5/78.5
 *   128  47.0/69.5/69.8
 *   512  47.1/61.2/69.7
 *
 *   n     q2_K            q3_K            q5_K            iq4_xs          iq4_nl
 *   32   64.2/32.5/65.3  54.1/28.0/60.1  48.9/27.5/67.3  65.7/30.9/53.4  47.1/33.6/54.7
 *   48   64.7/41.9/73.8  53.6/37.7/68.8  51.5/37.6/78.9  62.1/41.6/60.2  42.2/38.1/55.8
 *   64   64.2/48.7/77.7  52.5/42.7/74.0  52.8/44.0/84.5  68.7/44.9/65.1  46.1/54.4/62.1
 *
 *   n     q4_1            q5_0 (q5 unpack vectorized after: 53 at 32)  q5_1
 *   32   36.6/29.5/67.8  43.5/27.6/38.8                              34.2/28.3/37.7
 *   64   37.2/41.5/88.3  45.0/41.2/56.1                              33.2/42.4/57.2
 *
 * Every type that has it takes it from 32 (no type goes lower, as above)
 * but q6_K (48: its row kernel stays ahead at 32) and q8_0 (128: the fp32
 * panels are 3-12% ahead up to 64, int8 ties at 128 and wins by 14% at
 * 512); iq4_xs not at all (its row kernel, one 256-block scale per
 * lookup, stays ahead to 64).  Where a type takes int8 from its fp32 panel
 * crossover on, the fp32 panels no longer run for it in ffn_qgemm.
 *
 * batch_min_n: from this many rows of x on, ffn_qgemm hands a weight
 * packed by ffn_qweight_pack_batch to its bf16 copy and oneDNN's bf16
 * matmul (qgemm_batch.c).  Measured with bench/qgemm_batch.sh (W 2048 ×
 * 8192, 1 thread, best of >= 3 runs, load average 12-20, so rough):
 *
 *   n        q4_0 kernels / bf16 matmul (ms)    q8_0 kernels / bf16 matmul (ms)
 *   1          0.69 /   2.39                      1.75 /   2.38
 *   4          2.51 /   2.72  (2.99 / 3.33)       3.59 /   2.82
 *   8         13.5  /   3.38  (6.77 / 3.58)      17.9  /   3.36
 *   64       176    /  44.8                     180    /  46.0
 *   512     1434    / 412   (12 vs 42 GFLOP/s)  1398    / 381   (12 vs 45 GFLOP/s)
 *
 * The bf16 matmul wins from n = 8 for both (q8_0 ties at 4), at n = 512 by
 * 3.5×: its register-blocked brgemm reuses each decoded weight across many
 * tokens, where the row kernels redo the weight decode per 8 tokens.  The
 * other types are put at the same n (f16 and bf16 convert no cheaper);
 * f32 weights stay on the kernels (the layer has its own fp32 engine). */
#include "kernels/types.h"
#include "kernels/quant.h"
#include "kernels/kernels.h"
#include "kernels/qgemm_k.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "types.c assumes a little-endian host (the block formats are little-endian)"
#endif

#define S ffn_qg_rows_scalar
/* the product kernels of a type: scalar, AVX2 (act), AVX-512 (act, needs) */
#define KERNELS(a2, act2, a5, act5, needs5)                                                     \
    .k = {{S, QG_ACT_NONE, 0}, {a2, act2, 0}, {a5, act5, needs5}}

/* a super-block format of qgemm_k_avx2.c (the AVX-512 level runs it too) */
#define K_KERNELS(t) KERNELS(ffn_qg_rows_avx2_##t, QG_ACT_Q256, NULL, QG_ACT_NONE, 0)

static const ffn_type_info types[FFN_GGML_TYPE_COUNT] = {
    [FFN_GGML_TYPE_F32] = {"f32", 1, 1, 4, quant_dequantize_f32, quant_quantize_f32,
                           KERNELS(ffn_qg_rows_avx2_f32, QG_ACT_NONE, ffn_qg_rows_avx512_f32,
                                   QG_ACT_NONE, 0),
                           .fallback = FFN_GGML_TYPE_F32, .file_type = 0, .dot = "fp32"},
    [FFN_GGML_TYPE_F16] = {"f16", 2, 1, 2, quant_dequantize_f16, quant_quantize_f16,
                           KERNELS(ffn_qg_rows_avx2_f16, QG_ACT_NONE, ffn_qg_rows_avx512_f16,
                                   QG_ACT_NONE, 0),
                           .batch_min_n = 8, .avx2_panel_min_n = 32, .fallback = FFN_GGML_TYPE_F32, .file_type = 1,
                           .dot = "fp32"},
    [FFN_GGML_TYPE_BF16] = {"bf16", 3, 1, 2, quant_dequantize_bf16, quant_quantize_bf16,
                            KERNELS(ffn_qg_rows_avx2_bf16, QG_ACT_NONE, ffn_qg_rows_avx512_bf16,
                                    QG_ACT_BF16, FFN_CPU_BF16),
                            .panel_min_n = 32, .batch_min_n = 8, .avx2_panel_min_n = 32, .fallback = FFN_GGML_TYPE_F32,
                            .file_type = 32, .dot = "bf16"},
    [FFN_GGML_TYPE_Q8_0] = {"q8_0", 4, 32, 34, quant_dequantize_q8_0, quant_quantize_q8_0,
                            KERNELS(ffn_qg_rows_avx2_q8_0, QG_ACT_Q32, ffn_qg_rows_avx512_q8_0,
                                    QG_ACT_Q32, FFN_CPU_VNNI),
                            .q32_offset = 128, .panel_min_n = 32, .batch_min_n = 8, .avx2_panel_min_n = 32,
                            .fallback = FFN_GGML_TYPE_F16, .file_type = 7, .avx2_int8_min_n = 128, .dot = "int8",
                            .f16_scales = 1 /* d, int8 qs[32] */},
    [FFN_GGML_TYPE_Q4_0] = {"q4_0", 5, 32, 18, quant_dequantize_q4_0, quant_quantize_q4_0,
                            KERNELS(ffn_qg_rows_avx2_q4_0, QG_ACT_Q32, ffn_qg_rows_avx512_q4_0,
                                    QG_ACT_Q4X, FFN_CPU_VNNI),
                            .q32_offset = 8, .panel_min_n = 32, .batch_min_n = 8, .avx2_panel_min_n = 64,
                            .fallback = FFN_GGML_TYPE_F16, .file_type = 2, .avx2_int8_min_n = 32, .dot = "int8",
                            .f16_scales = 1 /* d, qs[16] */},
    [FFN_GGML_TYPE_Q4_K] = {"q4_K", 6, 256, 144, quant_dequantize_q4_K, quant_quantize_q4_K,
                            KERNELS(ffn_qg_rows_avx2_q4_K, QG_ACT_Q256, ffn_qg_rows_avx512_q4_K,
                                    QG_ACT_Q256, FFN_CPU_VNNI),
                            .panel_min_n = 64, .batch_min_n = 8, .avx2_panel_min_n = 64,
                            .fallback = FFN_GGML_TYPE_Q5_0,
                            .file_type = 15 /* Q4_K_M, the usual name */, .avx2_int8_min_n = 32, .dot = "int8",
                            .f16_scales = 2 /* d, dmin, 6-bit scales, qs */},
    [FFN_GGML_TYPE_Q6_K] = {"q6_K", 7, 256, 210, quant_dequantize_q6_K, quant_quantize_q6_K,
                            KERNELS(ffn_qg_rows_avx2_q6_K, QG_ACT_Q256, ffn_qg_rows_avx512_q6_K,
                                    QG_ACT_Q256, FFN_CPU_VNNI),
                            .panel_min_n = 64, .batch_min_n = 8, .avx2_panel_min_n = 64,
                            .fallback = FFN_GGML_TYPE_Q8_0,
                            .file_type = 18, .avx2_int8_min_n = 48, .dot = "int8",
                            .f16_scale_off = 208, .f16_scales = 1 /* ql, qh, int8 scales, d */},
    [FFN_GGML_TYPE_F64] = {"f64", 8, 1, 8, quant_dequantize_f64, NULL, .dot = "fp32"},
    /* the super-block formats of quant_k.c and qgemm_k*.c.  Every .fallback
     * (widths that are no multiple of the block) is llama.cpp's
     * tensor_type_fallback (llama-quant.cpp), the one rule of
     * ffn_ggml_type_for_cols: q5_0 for q4_K, q8_0 for q6_K, q4_0 for q2_K
     * and q3_K, q5_1 for q5_K, iq4_nl for iq4_xs; the 32-blocks to f16 */
    [FFN_GGML_TYPE_Q2_K] = {"q2_K", 12, 256, 84, quant_dequantize_q2_K, quant_quantize_q2_K,
                            K_KERNELS(q2_K), .panel_min_n = 64, .batch_min_n = 8,
                            .fallback = FFN_GGML_TYPE_Q4_0, .file_type = 10, .avx2_int8_min_n = 32, .dot = "int8",
                            .f16_scale_off = 80, .f16_scales = 2},
    [FFN_GGML_TYPE_Q3_K] = {"q3_K", 13, 256, 110, quant_dequantize_q3_K, quant_quantize_q3_K,
                            K_KERNELS(q3_K), .panel_min_n = 64, .batch_min_n = 8,
                            .fallback = FFN_GGML_TYPE_Q4_0, .file_type = 12 /* Q3_K_M */, .avx2_int8_min_n = 32,
                            .dot = "int8",
                            .f16_scale_off = 108, .f16_scales = 1},
    [FFN_GGML_TYPE_Q5_K] = {"q5_K", 14, 256, 176, quant_dequantize_q5_K, quant_quantize_q5_K,
                            K_KERNELS(q5_K), .panel_min_n = 64, .batch_min_n = 8,
                            .fallback = FFN_GGML_TYPE_Q5_1, .file_type = 17 /* Q5_K_M */, .avx2_int8_min_n = 32, .dot = "int8",
                            .f16_scales = 2},
    [FFN_GGML_TYPE_IQ4_XS] = {"iq4_xs", 16, 256, 136, quant_dequantize_iq4_xs, quant_quantize_iq4_xs,
                              K_KERNELS(iq4_xs), .panel_min_n = 64, .batch_min_n = 8,
                              .fallback = FFN_GGML_TYPE_IQ4_NL, .file_type = 30, .dot = "int8",
                            .f16_scales = 1},
    /* known (a file holding them opens and lists them), not converted */
    /* the other 32-element formats (quant_legacy.c, qgemm_legacy_avx2.c; at
     * the AVX-512 VNNI level qgemm_avx512.c's kernels on q4_0's grouped
     * activations; no panels or packed copies).  Decode (n = 1, W 2048 ×
     * 8192, 1 thread, ffn bench qgemm, FFN_SIMD=avx2 and avx512 alternated,
     * best of 5, Zen 5 shared with other jobs at load average 8-9, read
     * bandwidth 37-39 GB/s), weight GB/s AVX2 / AVX-512: q4_1 13.9/20.5,
     * q5_0 14.9/23.5, q5_1 12.9/25.7, iq4_nl 14.8/20.2. */
    [FFN_GGML_TYPE_Q4_1] = {"q4_1", 9, 32, 20, quant_dequantize_q4_1, quant_quantize_q4_1,
                            KERNELS(ffn_qg_rows_avx2_q4_1, QG_ACT_Q32, ffn_qg_rows_avx512_q4_1, QG_ACT_Q4X, FFN_CPU_VNNI),
                            .q32_offset = 1, .fallback = FFN_GGML_TYPE_F16, .file_type = 3,
                            .avx2_int8_min_n = 32, .dot = "int8",
                            .f16_scales = 2},
    [FFN_GGML_TYPE_Q5_0] = {"q5_0", 10, 32, 22, quant_dequantize_q5_0, quant_quantize_q5_0,
                            KERNELS(ffn_qg_rows_avx2_q5_0, QG_ACT_Q32, ffn_qg_rows_avx512_q5_0, QG_ACT_Q4X, FFN_CPU_VNNI),
                            .q32_offset = 16, .fallback = FFN_GGML_TYPE_F16, .file_type = 8,
                            .avx2_int8_min_n = 32, .dot = "int8",
                            .f16_scales = 1},
    [FFN_GGML_TYPE_Q5_1] = {"q5_1", 11, 32, 24, quant_dequantize_q5_1, quant_quantize_q5_1,
                            KERNELS(ffn_qg_rows_avx2_q5_1, QG_ACT_Q32, ffn_qg_rows_avx512_q5_1, QG_ACT_Q4X, FFN_CPU_VNNI),
                            .q32_offset = 1, .fallback = FFN_GGML_TYPE_F16, .file_type = 9,
                            .avx2_int8_min_n = 32, .dot = "int8",
                            .f16_scales = 2},
    [FFN_GGML_TYPE_Q8_1] = {"q8_1", 0, 32, 36},
    [FFN_GGML_TYPE_Q8_K] = {"q8_K", 0, 256, 292},
    [FFN_GGML_TYPE_IQ2_XXS] = {"iq2_xxs", 0, 256, 66},
    [FFN_GGML_TYPE_IQ2_XS] = {"iq2_xs", 0, 256, 74},
    [FFN_GGML_TYPE_IQ3_XXS] = {"iq3_xxs", 0, 256, 98},
    [FFN_GGML_TYPE_IQ1_S] = {"iq1_s", 0, 256, 50},
    [FFN_GGML_TYPE_IQ4_NL] = {"iq4_nl", 15, 32, 18, quant_dequantize_iq4_nl, quant_quantize_iq4_nl,
                              KERNELS(ffn_qg_rows_avx2_iq4_nl, QG_ACT_Q32, ffn_qg_rows_avx512_iq4_nl, QG_ACT_Q4X, FFN_CPU_VNNI),
                              .q32_offset = 128, .fallback = FFN_GGML_TYPE_F16, .file_type = 25,
                              .avx2_int8_min_n = 32, .dot = "int8",
                            .f16_scales = 1},
    [FFN_GGML_TYPE_IQ3_S] = {"iq3_s", 0, 256, 110},
    [FFN_GGML_TYPE_IQ2_S] = {"iq2_s", 0, 256, 82},
    [FFN_GGML_TYPE_I8] = {"i8", 0, 1, 1},
    [FFN_GGML_TYPE_I16] = {"i16", 0, 1, 2},
    [FFN_GGML_TYPE_I32] = {"i32", 0, 1, 4},
    [FFN_GGML_TYPE_I64] = {"i64", 0, 1, 8},
    [FFN_GGML_TYPE_IQ1_M] = {"iq1_m", 0, 256, 56},
    [FFN_GGML_TYPE_TQ1_0] = {"tq1_0", 0, 256, 54},
    [FFN_GGML_TYPE_TQ2_0] = {"tq2_0", 0, 256, 66},
    [FFN_GGML_TYPE_MXFP4] = {"mxfp4", 0, 32, 17},
};
#undef S
#undef KERNELS
#undef K_KERNELS

const ffn_type_info *ffn_type_info_of(ffn_ggml_type t) {
    if ((unsigned)t >= FFN_GGML_TYPE_COUNT || !types[t].name) return NULL;
    return &types[t];
}

int ffn_type_computes(ffn_ggml_type t) {
    const ffn_type_info *q = ffn_type_info_of(t);
    return q && q->k[0].rows;
}

static int have(unsigned needs) {
    return (!(needs & FFN_CPU_VNNI) || ffn_qg_have_vnni()) &&
           (!(needs & FFN_CPU_BF16) || ffn_qg_have_bf16());
}

qg_rows_fn ffn_type_rows(ffn_ggml_type type, int level, int *act) {
    const ffn_type_info *q = ffn_type_info_of(type);
    if (!q || !q->k[0].rows) return NULL;
    if (level >= FFN_TYPE_LEVELS) level = FFN_TYPE_LEVELS - 1;
    for (; level > 0; level--)
        if (q->k[level].rows && have(q->k[level].needs)) break;
    if (act) *act = q->k[level].act;
    return q->k[level].rows;
}

/* ---- the public face (ffn/dtype.h) ----------------------------------------------- */

/* The table's row of a type, or an all-zero row for an unknown one (block 0,
 * size 0, neither decoded nor encoded). */
static const ffn_type_info *info_or_none(ffn_ggml_type t) {
    static const ffn_type_info none;
    const ffn_type_info *q = ffn_type_info_of(t);
    return q ? q : &none;
}

const char *ffn_ggml_type_name(ffn_ggml_type type) {
    const ffn_type_info *q = ffn_type_info_of(type);
    return q ? q->name : "?";
}

int ffn_ggml_type_parse(const char *name, ffn_ggml_type *out) {
    if (!name) return 0;
    for (int t = 0; t < FFN_GGML_TYPE_COUNT; t++) {
        if (types[t].name && !strcasecmp(name, types[t].name)) {
            if (out) *out = (ffn_ggml_type)t;
            return 1;
        }
    }
    return 0;
}

int64_t ffn_ggml_block_size(ffn_ggml_type type) { return info_or_none(type)->block; }
size_t ffn_ggml_type_size(ffn_ggml_type type) { return info_or_none(type)->bytes; }
int ffn_ggml_can_dequantize(ffn_ggml_type type) { return info_or_none(type)->decode != NULL; }
int ffn_ggml_can_quantize(ffn_ggml_type type) { return info_or_none(type)->encode != NULL; }

unsigned ffn_ggml_type_caps(ffn_ggml_type type) {
    const ffn_type_info *q = info_or_none(type);
    return (q->decode ? FFN_GGML_DECODES : 0u) | (q->encode ? FFN_GGML_ENCODES : 0u) |
           (q->k[0].rows ? FFN_GGML_COMPUTES : 0u);
}

int ffn_ggml_types(unsigned caps, ffn_ggml_type *out, int max) {
    int n = 0;
    for (int order = 1; order < FFN_GGML_TYPE_COUNT; order++)
        for (int t = 0; t < FFN_GGML_TYPE_COUNT; t++)
            if (types[t].name && types[t].order == order &&
                (ffn_ggml_type_caps((ffn_ggml_type)t) & caps) == caps) {
                if (out && n < max) out[n] = (ffn_ggml_type)t;
                n++;
            }
    return n;
}

char *ffn_ggml_type_list(unsigned caps, const char *last, char *buf, size_t cap) {
    ffn_ggml_type t[FFN_GGML_TYPE_COUNT];
    int n = ffn_ggml_types(caps, t, FFN_GGML_TYPE_COUNT);
    size_t used = 0;
    if (!buf || !cap) return buf;
    buf[0] = 0;
    for (int i = 0; i < n && used < cap; i++) {
        const char *sep = i == 0 ? "" : i == n - 1 ? (last ? last : ", ") : ", ";
        int w = snprintf(buf + used, cap - used, "%s%s", sep, types[t[i]].name);
        if (w < 0) break;
        used += (size_t)w;
    }
    return buf;
}

ffn_ggml_type ffn_ggml_type_for_cols(ffn_ggml_type type, int64_t cols) {
    const ffn_type_info *q = ffn_type_info_of(type);
    while (q && q->block > 1 && cols % q->block != 0 && q->fallback != type) {
        type = q->fallback;
        q = ffn_type_info_of(type);
    }
    return type;
}

const char *ffn_ggml_type_dot(ffn_ggml_type type) {
    const char *d = info_or_none(type)->dot;
    return d ? d : "?";
}

uint32_t ffn_ggml_file_type(ffn_ggml_type type) { return info_or_none(type)->file_type; }

ffn_status ffn_ggml_row_size(ffn_ggml_type type, int64_t n, size_t *bytes) {
    const ffn_type_info *q = ffn_type_info_of(type);
    if (!q) return ffn_error(FFN_ERR_UNSUPPORTED, "ggml type %d: not a known type", (int)type);
    if (n < 0 || n % q->block != 0)
        return ffn_error(FFN_ERR_INVALID_ARG,
                         "%s: a row of %lld elements: expected a multiple of the block size %lld", q->name,
                         (long long)n, (long long)q->block);
    size_t r;
    if (ffn_mul_size((size_t)(n / q->block), q->bytes, &r))
        return ffn_error(FFN_ERR_OVERFLOW, "%s: a row of %lld elements overflows size_t", q->name, (long long)n);
    if (bytes) *bytes = r;
    return FFN_OK;
}

/* The checks both row conversions start with: a whole row of a known type,
 * buffers present, a converter in the table (`decodes` picks which). */
static ffn_status row_check(ffn_ggml_type type, int64_t n, const void *src, const void *dst,
                            int decodes, const ffn_type_info **out) {
    ffn_status s = ffn_ggml_row_size(type, n, NULL);
    if (s != FFN_OK) return s;
    const char *fn = decodes ? "ffn_ggml_dequantize_row" : "ffn_ggml_quantize_row";
    if (n > 0 && (!src || !dst)) return ffn_error(FFN_ERR_INVALID_ARG, "%s: NULL buffer", fn);
    const ffn_type_info *q = &types[type];
    if (decodes ? !q->decode : !q->encode) {
        char list[256];
        const char *verb = decodes ? "decode" : "encode";
        return ffn_error(FFN_ERR_UNSUPPORTED, "%s: ffn cannot %s this type (it %ss %s)", q->name, verb,
                         verb, ffn_ggml_type_list(decodes ? FFN_GGML_DECODES : FFN_GGML_ENCODES, ", ",
                                                  list, sizeof list));
    }
    *out = q;
    return FFN_OK;
}

ffn_status ffn_ggml_dequantize_row(ffn_ggml_type type, const void *src, float *dst, int64_t n) {
    const ffn_type_info *q;
    ffn_status s = row_check(type, n, src, dst, 1, &q);
    if (s != FFN_OK) return s;
    q->decode(src, dst, n / q->block);
    return FFN_OK;
}

ffn_status ffn_ggml_quantize_row(ffn_ggml_type type, const float *src, void *dst, int64_t n) {
    const ffn_type_info *q;
    ffn_status s = row_check(type, n, src, dst, 0, &q);
    if (s != FFN_OK) return s;
    if (q->block > 1)
        for (int64_t i = 0; i < n; i++)
            if (!isfinite(src[i]))
                return ffn_error(FFN_ERR_INVALID_ARG, "%s: element %lld is %g: expected a finite value",
                                 q->name, (long long)i, (double)src[i]);
    q->encode(src, dst, n / q->block);
    return FFN_OK;
}
