/* gguf_random.c -- a GGUF model of random weights for the llama.cpp
 * benchmark (bench/bench_llamacpp.sh), written by ffn through its public
 * API: the model is built from a configuration, every matrix drawn from
 * N(0, 0.02²) row by row (seeded per tensor and row) and encoded straight
 * into the weight type, so that no fp32 copy of a low-precision model is
 * ever made; norms are 1.  ffn_gguf_save_model then writes those bytes as
 * they are (llama architecture; Mixtral-style experts when E > 0).
 *
 *   gguf_random OUT TYPE D F L H G V E K TIED [SEED]
 *
 * TYPE f32|f16|bf16|q8_0|q4_0|q4_K|q6_K; E 0 for a dense model; TIED 1
 * ties the head to the embedding.  A matrix whose rows are not a multiple
 * of the type's block is stored f16, as the writer does. */
#include "ffn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_type(const char *s, ffn_ggml_type *t) {
    for (int k = 0; k < FFN_GGML_TYPE_COUNT; k++) {
        const char *n = ffn_ggml_type_name((ffn_ggml_type)k);
        if (n && !strcmp(n, s) && ffn_ggml_can_quantize((ffn_ggml_type)k)) {
            *t = (ffn_ggml_type)k;
            return 1;
        }
    }
    return 0;
}

static int fail(const char *what) {
    fprintf(stderr, "gguf_random: %s: %s\n", what, ffn_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 12) {
        fprintf(stderr, "usage: gguf_random OUT TYPE D F L H G V E K TIED [SEED]\n");
        return 2;
    }
    const char *out = argv[1];
    ffn_ggml_type type;
    if (!parse_type(argv[2], &type)) {
        fprintf(stderr, "gguf_random: unknown type %s\n", argv[2]);
        return 2;
    }
    ffn_model_config c;
    ffn_model_config_default(&c);
    c.hidden_size = atoll(argv[3]);
    c.intermediate_size = atoll(argv[4]);
    c.num_hidden_layers = atoll(argv[5]);
    c.num_attention_heads = atoll(argv[6]);
    c.num_key_value_heads = atoll(argv[7]);
    c.vocab_size = atoll(argv[8]);
    c.num_experts = atoll(argv[9]);
    c.num_experts_per_tok = atoll(argv[10]);
    c.tie_word_embeddings = atoi(argv[11]) != 0;
    const uint64_t seed = argc > 12 ? strtoull(argv[12], NULL, 10) : 1;
    c.max_position_embeddings = 2048;
    c.rms_norm_eps = 1e-5;
    c.rope_theta = 10000.0;
    c.hidden_act = FFN_ACT_SILU;
    c.mlp_type = FFN_MODEL_MLP_GATED;
    c.rope_style = FFN_ROPE_HALF;
    if (c.num_experts > 0) {
        c.moe_intermediate_size = c.intermediate_size;
        c.moe_layer_freq = 1;
        c.norm_topk_prob = 1;
    }
    ffn_ctx *ctx = NULL;
    ffn_model *m = NULL;
    if (ffn_ctx_create(0, &ctx)) return fail("context");
    ffn_model_options mo = {.max_batch = 1, .max_seq = 8, .low_precision = 1};
    if (ffn_model_create(ctx, &c, &mo, &m)) return fail("model");
    float *params = ffn_model_params(m, NULL);
    const int64_t nt = ffn_model_num_tensors(m);
    void **bytes = calloc((size_t)nt, sizeof *bytes);
    if (!bytes) return fail("out of memory");
    for (int64_t i = 0; i < nt; i++) {
        const ffn_model_tensor *t = ffn_model_tensor_at(m, i);
        float *w = params + t->offset;
        if (t->kind == FFN_TENSOR_NORM) {
            for (int64_t j = 0; j < t->numel; j++) w[j] = 1.0f;
            continue;
        }
        if (t->kind == FFN_TENSOR_ATTN_BIAS || t->kind == FFN_TENSOR_MLP_BIAS) continue;
        const int64_t rows = t->shape[0], cols = t->shape[1];
        ffn_ggml_type tt = cols % ffn_ggml_block_size(type) ? FFN_GGML_TYPE_F16 : type;
        size_t rb = 0;
        if (ffn_ggml_row_size(tt, cols, &rb)) return fail(t->name);
        uint8_t *dst = NULL;
        if (tt != FFN_GGML_TYPE_F32 && !(dst = malloc(rb * (size_t)rows)))
            return fail("out of memory");
        int bad = 0;
#pragma omp parallel
        {
            float *row = malloc((size_t)cols * sizeof *row);
#pragma omp for schedule(static)
            for (int64_t r = 0; r < rows; r++) {
                ffn_rng rng;
                ffn_rng_seed(&rng, seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(i + 1)) ^
                                       ((uint64_t)r << 20));
                float *v = dst ? row : w + r * cols;
                if (!v) {
                    bad = 1;
                    continue;
                }
                for (int64_t j = 0; j < cols; j++) v[j] = (float)(0.02 * ffn_rng_normal(&rng));
                if (dst && ffn_ggml_quantize_row(tt, v, dst + (size_t)r * rb, cols)) bad = 1;
            }
            free(row);
        }
        if (bad) return fail(t->name);
        if (dst) {
            if (ffn_model_set_tensor_data(m, t->name, tt, dst, rb * (size_t)rows, 1))
                return fail(t->name);
            bytes[i] = dst;
        }
    }
    if (ffn_model_params_changed(m)) return fail("params");
    ffn_gguf_save_options o;
    ffn_gguf_save_options_default(&o);
    o.type = type;
    o.name = "ffn-bench-random";
    if (ffn_gguf_save_model(m, out, &o, NULL)) return fail(out);
    ffn_model_free(m);
    for (int64_t i = 0; i < nt; i++) free(bytes[i]);
    free(bytes);
    ffn_ctx_free(ctx);
    return 0;
}
