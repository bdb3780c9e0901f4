/* gguf_mix.c -- llama.cpp's file types ("ftypes", the mixes llama-quantize
 * names Q4_K_M, Q3_K_S, ...): which block type each tensor of a GGUF file
 * gets.  The choice follows llama.cpp's llama_tensor_get_type (src/
 * llama-quant.cpp) without an importance matrix, for the architectures
 * ffn writes (llama, qwen2, qwen2moe):
 *
 *   every matrix      the mix's base type (Q4_K_M: q4_K, Q3_K_*: q3_K, ...);
 *   output.weight     q6_K (q8_0 when its rows are no multiple of the base
 *                     type's block; the Q8_0 mix keeps q8_0), and so the token
 *                     embedding when it is also the output (tied);
 *   attn_v            Q2_K: q4_K if heads / kv-heads >= 4, else q3_K;
 *                     Q3_K_M: q5_K in layers 0, 1, else q4_K; Q3_K_L: q5_K;
 *                     IQ4_NL, IQ4_XS: q5_K if heads / kv-heads >= 4;
 *                     Q4_K_M, Q5_K_M: q6_K in the "more bits" layers (the
 *                     first and last eighth, and every third between);
 *                     Q4_K_S: q5_K in layers 0..3; 8 experts: q8_0;
 *   attn_k            8 experts: q8_0;
 *   ffn_down (also    Q2_K: q3_K; Q3_K_M: q5_K in the first sixteenth of the
 *    _exps, _shexp)   layers, else q4_K; Q3_K_L: q5_K; Q4_K_M, Q5_K_M: q6_K
 *                     in the "more bits" layers; IQ4_NL, IQ4_XS, Q4_K_S: q5_K
 *                     in the first eighth;
 *   attn_output       Q2_K: q3_K; Q3_K_M: q4_K; Q3_K_L: q5_K; 8 experts: q5_K
 *                     for the K mixes below Q5 and IQ4_*;
 *   then rows that are no multiple of the chosen type's block fall back as
 *   llama.cpp's tensor_type_fallback: q4_K -> q5_0, q5_K -> q5_1, q6_K ->
 *   q8_0, q2_K / q3_K -> q4_0, iq4_xs -> iq4_nl, and to f16 when even that
 *   block does not divide them (a 32-block type goes to f16 directly).
 * One type for every matrix (--dtype q4_K, ffn_type_fallback) is
 * llama.cpp's `pure` quantization: no per-tensor rules, the same fallback.
 * Norms, biases and MoE routers stay f32 (ffn's writer; llama.cpp also
 * keeps the routers, ffn_gate_inp, unquantized).  Left out: llama.cpp's
 * falcon and 70B special cases and its importance-matrix mixes.
 * A mix whose chosen type the type table cannot encode is refused by the
 * writer, naming the tensor and the type. */
#include "ffn/checkpoint.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef struct mix {
    const char *name;
    uint32_t ftype;       /* llama.cpp's llama_ftype (general.file_type) */
    ffn_ggml_type base;
} mix;

/* llama.cpp's names and numbers (include/llama.h, LLAMA_FTYPE_MOSTLY_*) */
static const mix mixes[] = {
    {"Q4_0", 2, FFN_GGML_TYPE_Q4_0},     {"Q4_1", 3, FFN_GGML_TYPE_Q4_1},
    {"Q5_0", 8, FFN_GGML_TYPE_Q5_0},     {"Q5_1", 9, FFN_GGML_TYPE_Q5_1},
    {"Q8_0", 7, FFN_GGML_TYPE_Q8_0},     {"Q2_K", 10, FFN_GGML_TYPE_Q2_K},
    {"Q3_K_S", 11, FFN_GGML_TYPE_Q3_K},  {"Q3_K_M", 12, FFN_GGML_TYPE_Q3_K},
    {"Q3_K_L", 13, FFN_GGML_TYPE_Q3_K},  {"Q4_K_S", 14, FFN_GGML_TYPE_Q4_K},
    {"Q4_K_M", 15, FFN_GGML_TYPE_Q4_K},  {"Q5_K_S", 16, FFN_GGML_TYPE_Q5_K},
    {"Q5_K_M", 17, FFN_GGML_TYPE_Q5_K},  {"Q6_K", 18, FFN_GGML_TYPE_Q6_K},
    {"IQ4_NL", 25, FFN_GGML_TYPE_IQ4_NL}, {"IQ4_XS", 30, FFN_GGML_TYPE_IQ4_XS},
};
enum { N_MIXES = (int)(sizeof mixes / sizeof mixes[0]) };
enum {
    F_Q2_K = 10, F_Q3_K_S = 11, F_Q3_K_M = 12, F_Q3_K_L = 13, F_Q4_K_S = 14, F_Q4_K_M = 15,
    F_Q5_K_M = 17, F_IQ4_NL = 25, F_IQ4_XS = 30
};

static const mix *mix_of(uint32_t ftype) {
    for (int i = 0; i < N_MIXES; i++)
        if (mixes[i].ftype == ftype) return &mixes[i];
    return NULL;
}

int ffn_ftype_count(void) { return N_MIXES; }

const char *ffn_ftype_at(int i, uint32_t *ftype) {
    if (i < 0 || i >= N_MIXES) return NULL;
    if (ftype) *ftype = mixes[i].ftype;
    return mixes[i].name;
}

int ffn_ftype_parse(const char *name, uint32_t *ftype) {
    for (int i = 0; name && i < N_MIXES; i++)
        if (!strcasecmp(name, mixes[i].name)) {
            if (ftype) *ftype = mixes[i].ftype;
            return 1;
        }
    return 0;
}

const char *ffn_ftype_name(uint32_t ftype) {
    const mix *m = mix_of(ftype);
    return m ? m->name : NULL;
}

ffn_ggml_type ffn_ftype_base(uint32_t ftype) {
    const mix *m = mix_of(ftype);
    return m ? m->base : FFN_GGML_TYPE_F32;
}

static int more_bits(int64_t i, int64_t n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* llama.cpp's tensor_type_fallback: the type table's (ffn_ggml_type_for_cols),
 * the one rule for the files ffn writes and the models it quantizes in memory */
static ffn_ggml_type fallback(ffn_ggml_type t, int64_t cols, int *fell) {
    const ffn_ggml_type r = ffn_ggml_type_for_cols(t, cols);
    if (r != t) *fell = 1;
    return r;
}

ffn_ggml_type ffn_type_fallback(ffn_ggml_type type, int64_t cols, int *fell_back) {
    int fell = 0;
    const ffn_ggml_type t = fallback(type, cols, &fell);
    if (fell_back) *fell_back = fell;
    return t;
}

ffn_ggml_type ffn_ftype_tensor_type(uint32_t ftype, const ffn_ftype_shape *s, const char *name,
                                    int64_t cols, int *fell_back) {
    int fell = 0;
    const mix *m = mix_of(ftype);
    if (fell_back) *fell_back = 0;
    if (!m || !s || !name) return FFN_GGML_TYPE_F32;
    ffn_ggml_type t = m->base;
    const uint32_t f = ftype;
    const int64_t n = s->n_layer, gqa = s->n_head_kv > 0 ? s->n_head / s->n_head_kv : 1;
    long long li = -1;
    (void)sscanf(name, "blk.%lld.", &li);
    const int64_t i = li;
    const int output = !strcmp(name, "output.weight"), embd = !strcmp(name, "token_embd.weight");
    if (output || (embd && s->tied)) {
        if (cols % ffn_ggml_block_size(t) != 0) t = FFN_GGML_TYPE_Q8_0;
        else if (t != FFN_GGML_TYPE_Q8_0) t = FFN_GGML_TYPE_Q6_K;
    } else if (embd) {
        /* the base type */
    } else if (strstr(name, "attn_v.weight") || strstr(name, "attn_qkv.weight")) {
        if (f == F_Q2_K) t = gqa >= 4 ? FFN_GGML_TYPE_Q4_K : FFN_GGML_TYPE_Q3_K;
        else if (f == F_Q3_K_M) t = i < 2 ? FFN_GGML_TYPE_Q5_K : FFN_GGML_TYPE_Q4_K;
        else if (f == F_Q3_K_L) t = FFN_GGML_TYPE_Q5_K;
        else if ((f == F_IQ4_NL || f == F_IQ4_XS) && gqa >= 4) t = FFN_GGML_TYPE_Q5_K;
        else if ((f == F_Q4_K_M || f == F_Q5_K_M) && more_bits(i, n)) t = FFN_GGML_TYPE_Q6_K;
        else if (f == F_Q4_K_S && i < 4) t = FFN_GGML_TYPE_Q5_K;
        if (s->n_expert == 8) t = FFN_GGML_TYPE_Q8_0;
    } else if (strstr(name, "attn_k.weight")) {
        if (s->n_expert == 8) t = FFN_GGML_TYPE_Q8_0;
    } else if (strstr(name, "attn_output.weight")) {
        if (s->n_expert == 8) {
            if (f == F_Q2_K || f == F_Q3_K_S || f == F_Q3_K_M || f == F_IQ4_NL || f == F_Q4_K_S ||
                f == F_Q4_K_M || f == F_IQ4_XS)
                t = FFN_GGML_TYPE_Q5_K;
        } else if (f == F_Q2_K) t = FFN_GGML_TYPE_Q3_K;
        else if (f == F_Q3_K_M) t = FFN_GGML_TYPE_Q4_K;
        else if (f == F_Q3_K_L) t = FFN_GGML_TYPE_Q5_K;
    } else if (!strstr(name, "ffn_up") && !strstr(name, "ffn_gate") && strstr(name, "ffn_down")) {
        if (f == F_Q2_K) t = FFN_GGML_TYPE_Q3_K;
        else if (f == F_Q3_K_M) t = i < n / 16 ? FFN_GGML_TYPE_Q5_K : FFN_GGML_TYPE_Q4_K;
        else if (f == F_Q3_K_L) t = FFN_GGML_TYPE_Q5_K;
        else if (f == F_Q4_K_M) {
            if (more_bits(i, n)) t = FFN_GGML_TYPE_Q6_K;
        } else if (i < n / 8 && (f == F_IQ4_NL || f == F_IQ4_XS)) t = FFN_GGML_TYPE_Q5_K;
        else if (f == F_Q5_K_M && more_bits(i, n)) t = FFN_GGML_TYPE_Q6_K;
        else if (f == F_Q4_K_S && i < n / 8) t = FFN_GGML_TYPE_Q5_K;
    }
    t = fallback(t, cols, &fell);
    if (fell_back) *fell_back = fell;
    return t;
}
