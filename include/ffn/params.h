/* ffn/params.h -- parameter and FLOP accounting from a Hugging Face
 * config.json, and the FFN sizing rules (LLaMA's intermediate size, the
 * Shazeer 2/3 rule).
 *
 * Part of the public API; include <ffn.h>, not this file.
 *
 * Letters:  D hidden_size, F intermediate_size, Fm moe_intermediate_size,
 * Fs shared expert width, E routed experts, K experts per token, V vocab,
 * L layers, H query heads, Hkv key/value heads, T sequence length.
 *
 * Supported model_type values: llama, mistral, mixtral, qwen2 (q/k/v
 * biases), qwen2_moe, qwen3 (q/k norms per head), gemma, phi3, olmoe (q/k
 * norms over the projections, 64 experts), gpt2, bert, deepseek_v2,
 * deepseek_v3 (MLA attention).  Published totals these counts reproduce
 * (tests/cli/test_params_families.sh): GPT-2 124,439,808; Gemma-2B
 * 2,506,172,416 (technical report arXiv:2403.08295 Table 2: 1,981,884,416
 * non-embedding, plus 256,000 x 2048 embedding from its config.json);
 * Phi-3-mini 3,821,079,552 ("3.8B", arXiv:2404.14219); Qwen3-0.6B
 * 596,049,920 (model card: 0.6B, 0.44B non-embedding); OLMoE-1B-7B
 * 6,919,161,856 total, 1,282,017,280 active (arXiv:2409.02060: 6.9B total,
 * 1.3B active).
 *
 * Memory (estimates, printed by `ffn params` too): weight bytes per format
 * (every type ffn computes with, in the type table's order, with their
 * bytes per block from ffn/dtype.h; norm weights stay f32 in the block
 * formats, as llama.cpp keeps them); the KV cache per token (K and V of
 * every layer: L·Hkv·(d_qk + d_v) elements, GQA/MQA through Hkv; MLA: the
 * latent kv_lora_rank + qk_rope_head_dim per layer; bert none) in f16 and
 * in f32 (ffn's own cache); and the decode speed memory bandwidth allows:
 * tokens/s <= bandwidth / (bytes read per token), where a token reads the
 * active weights except the embedding tables it only looks up (a tied head
 * reads the token table whole) plus the f16 KV cache at seq_len.
 *
 * Conventions (also printed by `ffn params`):
 *   - Every tensor is counted once: norms (weights and biases) and biases
 *     are counted; a tied input/output embedding is counted once, as the
 *     token embedding (head = 0).  Buffers that are not parameters (causal
 *     masks, RoPE tables) are not counted.
 *   - Embeddings are counted in the totals (token, and for gpt2/bert the
 *     position embedding, and for bert the token-type embedding).
 *   - bert is BertModel with its pooler (the head), without a pretraining
 *     or task head.
 *   - deepseek_v3: the multi-token-prediction module (num_nextn_predict_layers)
 *     is reported apart in mtp_params and is not in the totals;
 *     e_score_correction_bias (E per MoE layer) is a parameter (in router).
 *     With these conventions DeepSeek-V3 totals 671,026,419,200, the
 *     published figure.
 *   - Active parameters per token: everything that is not a routed expert,
 *     plus K of the E routed experts per MoE layer: embeddings, head,
 *     norms, attention, router, shared experts.  Dense models: active ==
 *     total.  (Mixtral-8x7B: 12,879,925,248; Qwen1.5-MoE-A2.7B: 2.69B, its
 *     "2.7B activated".)  Publishers differ: DeepSeek's "activated" figures
 *     leave out the token embedding (V2-Lite 2.45B, "2.4B"; V3 36.6B,
 *     "37B"), and so does the Qwen2 report's "7.07B" for Qwen2-7B: that
 *     convention is active_excl_embeddings.
 *   - FLOPs are per token, 2 per multiply-add of a matrix product.
 *     Embedding lookups, norms, biases, activations, softmax and the
 *     routing top-k are not counted.  The LM head is counted (tied or
 *     not); bert's pooler runs once per sequence and is not counted.
 *     Attention scores at context T: each token's query meets T keys:
 *       attention_qk = 2·H·d_qk·T per layer,  attention_av = 2·H·d_v·T
 *     (the last token of a T-token window, or a bidirectional encoder; a
 *     causal average over a window is about half).
 *   - Training FLOPs per token: training_flops = 6·N_active + 3·(qk + av),
 *     the 6N rule (forward 2N, backward 4N) plus the attention-score terms
 *     tripled likewise.  training_flops_matmul = 3·forward.total counts
 *     matrix products only (no embedding lookups, norms or biases).
 *
 * Example:
 *     ffn_params_options opt = { .seq_len = 4096 };
 *     ffn_params_report *r;
 *     if (ffn_params_from_config("config.json", &opt, &r) == FFN_OK) {
 *         printf("%lld\n", (long long)r->params.total);
 *         ffn_params_report_free(r);
 *     }
 */
#ifndef FFN_PARAMS_H
#define FFN_PARAMS_H
#pragma GCC visibility push(default) /* what this header declares is the exported API */

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parameter counts by component.  total is the sum of the other fields. */
typedef struct ffn_param_counts {
    int64_t attention;        /* q/k/v/o projections and their biases; MLA: q (or q_a, q_b),
                                 kv_a_proj_with_mqa, kv_b_proj, o */
    int64_t ffn_dense;        /* the FFN of non-MoE layers (dense or gated, with biases) */
    int64_t ffn_routed;       /* routed experts (in an `active` view: K of E) */
    int64_t ffn_shared;       /* shared experts, and qwen2_moe's shared_expert_gate (1, D) */
    int64_t router;           /* router gate (E, D), and deepseek_v3 e_score_correction_bias (E) */
    int64_t norms;            /* every norm: weights and biases (MLA's q_a/kv_a norms too) */
    int64_t embed_token;      /* (V, D); the tied head is counted here, once */
    int64_t embed_position;   /* gpt2 wpe, bert position_embeddings (P, D) */
    int64_t embed_token_type; /* bert token_type_embeddings */
    int64_t head;             /* untied lm_head (V, D); bert pooler (D, D) + D */
    int64_t total;
} ffn_param_counts;

/* Forward FLOPs per token by component (2 per multiply-add).  total is the
 * sum of the other fields. */
typedef struct ffn_flop_counts {
    int64_t attention_proj;   /* q/k/v/o (MLA: all its projections) */
    int64_t attention_qk;     /* Q·Kᵀ against T keys */
    int64_t attention_av;     /* softmax(·)·V over T values */
    int64_t ffn_dense;
    int64_t ffn_routed;       /* K experts per token */
    int64_t ffn_shared;
    int64_t router;
    int64_t head;             /* LM head V·D */
    int64_t total;
} ffn_flop_counts;

typedef struct ffn_params_layer {
    int is_moe;               /* 1 when this layer's FFN is routed experts */
    ffn_param_counts params;  /* all parameters of the layer */
    ffn_param_counts active;  /* active per token */
    ffn_flop_counts flops;    /* forward per token */
} ffn_params_layer;

typedef struct ffn_params_options {
    int64_t seq_len;          /* T for the attention-score FLOPs and the KV cache; 0 = 2048 */
    double bandwidth_gbs;     /* memory bandwidth for the decode estimate, GB/s; 0 = 20 */
} ffn_params_options;

/* Bytes of the weights in one format, and the decode bound (see Memory). */
typedef struct ffn_params_memory {
    char format[8];               /* a type's name (ffn_ggml_type_name) */
    double bits_per_weight;       /* 8 · bytes per block / elements per block */
    int64_t weight_bytes;         /* every parameter */
    int64_t read_bytes_per_token; /* weights one decoded token reads + the f16 KV cache at T */
    double decode_tokens_per_s;   /* bandwidth / read_bytes_per_token: an upper bound */
} ffn_params_memory;

/* Room for the formats: every type ffn computes with (ffn_ggml_types with
 * FFN_GGML_COMPUTES, in that order), n_formats of them. */
#define FFN_PARAMS_N_FORMATS 24

typedef struct ffn_params_report {
    char model_type[32];      /* as in config.json */
    char ffn_kind[48];        /* e.g. "gated (silu: SwiGLU)", "dense (gelu_new)" */
    char attention_kind[48];  /* "MHA", "GQA", "MLA" */
    int64_t hidden_size;      /* D */
    int64_t n_layers;         /* L */
    int64_t n_moe_layers;
    int64_t vocab_size;       /* V */
    int64_t n_heads, n_kv_heads;
    int64_t head_dim_qk, head_dim_v;
    int64_t intermediate_size;        /* F of dense layers (0 when none is dense) */
    int64_t moe_intermediate_size;    /* Fm (0 when not MoE) */
    int64_t shared_intermediate_size; /* total shared-expert width per MoE layer (0 if none) */
    int64_t n_experts, top_k;         /* E, K (0 when not MoE) */
    int tied_embeddings;
    int64_t seq_len;                  /* T used for the FLOPs */

    ffn_param_counts params;  /* whole model */
    ffn_param_counts active;  /* active per token (== params for dense models) */
    int64_t active_excl_embeddings; /* active minus the embedding lookups (token, position,
                                       type): DeepSeek's "activated" convention */
    int64_t mtp_params;       /* deepseek_v3 MTP module (not in totals); else 0 */

    double ffn_share;         /* (ffn_dense + ffn_routed + ffn_shared + router) / total */
    double ffn_share_active;  /* the same over active */
    double expansion_ratio;   /* intermediate_size / hidden_size (0 when no dense layer) */
    double moe_expansion_ratio; /* moe_intermediate_size / hidden_size (0 when not MoE) */

    ffn_flop_counts forward;  /* per token, whole model */
    int64_t training_flops;        /* 6·active.total + 3·(attention_qk + attention_av) */
    int64_t training_flops_matmul; /* 3·forward.total */

    int64_t n_layer_entries;  /* == n_layers */
    ffn_params_layer *layers; /* [n_layers] */

    /* memory estimates (see Memory above) */
    int64_t kv_elements_per_token;  /* K and V of one token, all layers */
    int64_t kv_bytes_per_token_f16, kv_bytes_per_token_f32;
    int64_t kv_bytes_f16;           /* at seq_len tokens */
    double bandwidth_gbs;           /* the bandwidth assumed */
    int n_formats;                  /* entries of memory[] filled */
    ffn_params_memory memory[FFN_PARAMS_N_FORMATS];
} ffn_params_report;

/* Read and account a config.json.  opt may be NULL (T = 2048).  Errors:
 * FFN_ERR_IO (file), FFN_ERR_FORMAT (not JSON), FFN_ERR_MISSING (a required
 * field, named), FFN_ERR_CONFIG (unknown model_type, a non-positive or
 * inconsistent size, named), FFN_ERR_OVERFLOW (a count beyond 64 bits). */
ffn_status ffn_params_from_config(const char *path, const ffn_params_options *opt,
                                  ffn_params_report **out);
/* The same from JSON text in memory; `what` names it in messages. */
ffn_status ffn_params_from_json(const char *text, size_t len, const char *what,
                                const ffn_params_options *opt, ffn_params_report **out);
void ffn_params_report_free(ffn_params_report *r); /* NULL is a no-op */

/* The LLaMA FFN sizing rule (Meta's reference model.py):
 *   F = floor(2 · 4·D / 3);  F = floor(ffn_dim_multiplier · F) when the
 *   multiplier is > 0;  F rounded up to a multiple of multiple_of.
 * D 4096, multiple_of 256 -> 11008 (Llama-2-7B); D 4096, multiple_of 1024,
 * multiplier 1.3 -> 14336 (Llama-3-8B); D 8192, 4096, 1.3 -> 28672
 * (Llama-2-70B).  Pass ffn_dim_multiplier <= 0 for none. */
ffn_status ffn_params_llama_intermediate(int64_t hidden, int64_t multiple_of,
                                         double ffn_dim_multiplier, int64_t *out);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif /* FFN_PARAMS_H */
