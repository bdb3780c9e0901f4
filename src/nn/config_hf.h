/* config_hf.h -- a Hugging Face config.json read as the architecture it
 * describes (src/nn/config_hf.c), for every family ffn knows, including
 * the ones the model cannot run (bert, deepseek_v2/v3 with MLA): the
 * fields that size each tensor, for counting (src/analysis/params.c).
 * ffn_model_config_load (model.c) builds a model's ffn_model_config from
 * the same file and refuses what the model cannot run.  Internal; not
 * installed.
 *
 * Letters: D hidden, F dense intermediate, Fm routed expert width, Fs
 * shared width, E experts, K top-k, V vocab, L layers, H heads, Hkv kv
 * heads, P positions. */
#ifndef FFN_CONFIG_HF_H
#define FFN_CONFIG_HF_H

#include "base/common.h"
#include "format/json.h"

#define FFN_HF_MAX_LAYERS 100000          /* num_hidden_layers at the most */
#define FFN_HF_MAX_SIZE ((int64_t)1 << 40) /* any single dimension */

typedef enum ffn_hf_family {
    FFN_HF_LLAMA,   /* llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, gemma, phi3, olmoe, starcoder2 */
    FFN_HF_GPT2,    /* gpt2 */
    FFN_HF_BERT,    /* bert (an encoder) */
    FFN_HF_DEEPSEEK /* deepseek_v2, deepseek_v3 (MLA, DeepSeekMoE) */
} ffn_hf_family;

typedef struct ffn_hf_arch {
    ffn_hf_family fam;
    const char *model_type;    /* strings point into the parsed document */
    const char *act;
    int64_t D, L, V, H, Hkv, d_qk, d_v;
    int64_t F;                 /* dense intermediate (0: absent) */
    int gated, ffn_bias;       /* FFN shape */
    int qkv_bias, o_bias;      /* attention biases */
    int norm_bias;             /* LayerNorm (weight + bias) rather than RMSNorm */
    int tied;
    int64_t qk_norm;           /* q_norm + k_norm weights per layer (qwen3 2·d, olmoe (H + Hkv)·d) */
    int64_t post_norms;        /* gemma2/3: post_attention + post_feedforward norm weights per layer (2·D) */
    int64_t P, type_vocab;     /* gpt2 / bert embeddings */
    int64_t rel_pos;           /* bert relative_key(_query): distance embedding (2P-1, d) per layer */
    /* MoE */
    int64_t E, K, Fm;
    int64_t Fs;                /* qwen2_moe shared expert width (0: none) */
    int64_t n_shared;          /* deepseek shared experts (width n_shared·Fm) */
    int e_bias;                /* deepseek_v3 e_score_correction_bias */
    int64_t first_k_dense, moe_freq, sparse_step;
    unsigned char *mlp_only;   /* (L) 1 = dense by mlp_only_layers, or NULL (malloc'd) */
    /* MLA */
    int mla;
    int64_t q_lora, kv_lora, nope, rope;
    int64_t mtp_layers;
    int text_defaults;         /* Gemma3ForConditionalGeneration's text_config: absent sizes
                                  take Gemma3TextConfig's defaults */
} ffn_hf_arch;

/* The config.json file at path (or, path NULL, the `len` bytes at text)
 * into *a; *doc holds the strings a points to (json_free it after, also
 * on failure), a->mlp_only is allocated (free it, also on failure).  Every error names `what` and the field: a value out
 * of its range (FFN_ERR_CONFIG), a required field missing
 * (FFN_ERR_MISSING), an unknown model_type (FFN_ERR_CONFIG, naming the
 * ones read). */
ffn_status ffn_config_hf_read_arch(const char *path, const char *text, size_t len,
                                   const char *what, json_doc **doc, ffn_hf_arch *a);

#endif
