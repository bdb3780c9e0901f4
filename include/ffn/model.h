/* ffn/model.h -- the decoder-only Transformer (Llama architecture) around the
 * FFN: token embedding, N blocks of
 *       x = x + attn(rmsnorm(x))          causal MHA / GQA with RoPE
 *       x = x + mlp(rmsnorm(x))           none | dense | gated | MoE
 * then a final RMSNorm and the LM head (tied to the embedding or not), and
 * the cross-entropy loss.  Forward and backward for training on (B, T)
 * batches, logits for a sequence, and a KV-cached decoder for generation.
 *
 * Part of the public API; include <ffn.h>, not this file.
 *
 * Letters:  B batch, T sequence (positions), N = B·T tokens, D hidden_size,
 *           H attention heads, G key/value heads, Dh head dim (head_dim,
 *           by default D/H),
 *           F intermediate_size, E experts, K experts per token, V vocab,
 *           L layers.
 *
 * Memory: ONE contiguous block per family.
 *   params  every weight, fp32, laid out by the tensor table below;
 *   grads   the same layout (training models only);
 *   acts    the activations backward needs for up to max_batch·max_seq
 *           tokens, plus the workspace of every layer, plus the KV cache.
 * Everything is allocated by ffn_model_create; forward, backward and the
 * decode step never allocate.  The tensor table names every parameter with
 * its Hugging Face name and gives its shape and its offset (in floats) into
 * the flat params/grads blocks, so that an optimizer is one flat loop over
 * ffn_model_params()/ffn_model_grads(), zeroing gradients is one memset, and
 * a checkpoint is a walk over the table.
 *
 * Tensor names (W[out][in], y = x·Wᵀ + b, as in torch.nn.Linear):
 *   model.embed_tokens.weight                          (V, D)
 *   model.embed_positions.weight                       (max_position_embeddings, D)
 *                                                      (learned_positions only)
 *   model.layers.{i}.input_layernorm.weight            (D)        (+ .bias with norm LAYER,
 *                                                      as every norm below)
 *   model.layers.{i}.self_attn.q_proj.weight           (H·Dh, D)   (+ .bias (H·Dh) with attention_bias)
 *   model.layers.{i}.self_attn.k_proj.weight           (G·Dh, D)   (+ .bias)
 *   model.layers.{i}.self_attn.v_proj.weight           (G·Dh, D)   (+ .bias)
 *   model.layers.{i}.self_attn.q_norm.weight           (Dh) qk_norm HEAD, (H·Dh) FULL
 *   model.layers.{i}.self_attn.k_norm.weight           (Dh) qk_norm HEAD, (G·Dh) FULL
 *   model.layers.{i}.self_attn.o_proj.weight           (D, H·Dh)  (+ .bias (D) with
 *                                                      attention_out_bias)
 *   model.layers.{i}.post_attention_layernorm.weight   (D)        (absent with mlp_type NONE)
 *   with post_norms (Gemma 2/3) instead: post_attention_layernorm.weight (D) normalises the
 *   attention output, pre_feedforward_layernorm.weight (D) is the FFN's input norm and
 *   post_feedforward_layernorm.weight (D) normalises the FFN's output
 *   model.layers.{i}.mlp.gate_proj.weight              (F, D)     (gated only)   (+ .bias with mlp_bias)
 *   model.layers.{i}.mlp.up_proj.weight                (F, D)                    (+ .bias)
 *   model.layers.{i}.mlp.down_proj.weight              (D, F)                    (+ .bias)
 *   MoE layers instead of mlp.{gate,up,down}_proj (Qwen2-MoE names):
 *   model.layers.{i}.mlp.gate.weight                   (E, D)     the router
 *   model.layers.{i}.mlp.experts.{e}.gate_proj.weight  (Fe, D)    (gated experts only)
 *   model.layers.{i}.mlp.experts.{e}.up_proj.weight    (Fe, D)
 *   model.layers.{i}.mlp.experts.{e}.down_proj.weight  (D, Fe)
 *   with shared_expert_intermediate_size Fs > 0 (Qwen2-MoE), also
 *   model.layers.{i}.mlp.shared_expert.{gate,up,down}_proj.weight  (Fs, D) / (D, Fs)
 *   model.layers.{i}.mlp.shared_expert_gate.weight     (1, D)
 *   (with mlp_bias every MoE projection has a .bias as well)
 *   model.norm.weight                                  (D)
 *   lm_head.weight                                     (V, D)     (untied only)
 * The tensors of one kind inside a layer's MoE (all experts' gate_proj, all
 * up_proj, all down_proj) are adjacent in the flat block, so they also form
 * one (E, Fe, D) / (E, D, Fe) array.
 *
 * RoPE.  Two conventions rotate different pairs of a head's Dh features:
 *   FFN_ROPE_HALF         Hugging Face `rotate_half`: pairs (j, j + Dh/2);
 *                         the default, used by ffn's own checkpoints and by
 *                         every HF safetensors checkpoint;
 *   FFN_ROPE_INTERLEAVED  llama2.c / Meta originals: pairs (2j, 2j+1).
 * Both use frequency theta^(-2j/R) for pair j (R = Dh, or the rotary dim of
 * partial_rotary_factor: then only a head's first R features rotate, pairs
 * within them, the rest pass through), scaled as rope_scaling says, and
 * angle pos·freq.  A weight
 * file written for one convention runs under the other only after permuting
 * the rows of q_proj/k_proj (the loader's job, not the model's).
 *
 * Loss.  Cross-entropy averaged over the targets that are not
 * FFN_IGNORE_INDEX (-1); with MoE layers the differentiated objective is
 *     total = ce + router_aux_loss_coef·Σ aux_l + router_z_loss_coef·Σ z_l
 * (sums over the MoE layers of each layer's load-balancing and z losses).
 *
 * Reproducibility: every result is bitwise identical from run to run at a
 * fixed thread count and SIMD level (all reductions in a fixed order; the
 * attention kernels give the same bits at any thread count, the matrix
 * engine may not).  Different SIMD levels (FFN_SIMD) differ by rounding.
 *
 * Threads: every call uses the context's threads (matrix products, and
 * attention parallel over (sequence, head)).
 *
 * Taps (include/ffn/tap.h) read and patch named points of this forward
 * (residual stream, attention output, the FFN's input, gates, m and
 * output, routing, attention probabilities) in ffn_model_logits,
 * ffn_model_eval_loss and the KV-cache calls; with none selected the
 * forward is bitwise the untapped one.
 *
 * Example (training step, the optimizer is the caller's):
 *     ffn_model_config cfg;  ffn_model_config_default(&cfg);
 *     cfg.vocab_size = 256;  cfg.max_position_embeddings = 128;
 *     ffn_model_options opt = { .max_batch = 8, .max_seq = 128, .training = 1 };
 *     ffn_model *m;  ffn_model_create(ctx, &cfg, &opt, &m);
 *     ffn_model_init_weights(m, 1234);
 *     ffn_model_zero_grads(m);
 *     ffn_model_loss loss;
 *     ffn_model_forward_backward(m, tokens, targets, 8, 128, 1.0f, &loss);
 *     int64_t n; float *p = ffn_model_params(m, &n); float *g = ffn_model_grads(m, &n);
 *     ... AdamW over p[0..n), g[0..n) ...
 *     ffn_model_params_changed(m);      // layers repack their weights
 */
#ifndef FFN_MODEL_H
#define FFN_MODEL_H
#pragma GCC visibility push(default) /* what this header declares is the exported API */

#include "core.h"
#include "layer.h"
#include "profile.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FFN_IGNORE_INDEX (-1)

typedef enum ffn_rope_style {
    FFN_ROPE_HALF = 0,       /* Hugging Face rotate_half: pairs (j, j + Dh/2) */
    FFN_ROPE_INTERLEAVED = 1 /* llama2.c: pairs (2j, 2j + 1) */
} ffn_rope_style;

/* The FFN slot of a (non-MoE) block. */
typedef enum ffn_model_mlp {
    FFN_MODEL_MLP_NONE = 0, /* attention only: no post_attention_layernorm, no mlp */
    FFN_MODEL_MLP_DENSE,    /* y = down(act(up(x))) (act "linear" is the collapse case) */
    FFN_MODEL_MLP_GATED     /* y = down(act(gate(x)) ⊙ up(x)) (GLU family) */
} ffn_model_mlp;

/* RoPE frequency scaling (Hugging Face `rope_scaling` / `rope_parameters`,
 * formulas of transformers' modeling_rope_utils.py).  With rotary dim R
 * (see partial_rotary_factor), base inverse frequencies
 * f_j = theta^(-2j/R), j < R/2, and O = original_max_position_embeddings
 * (0: max_position_embeddings):
 *   LINEAR   f_j / factor
 *   DYNAMIC  NTK: theta' = theta·(factor·S/O − (factor − 1))^(R/(R−2)) with
 *            S = max(O, the sequence length of the call): a batched forward
 *            uses its T, a KV-cache step its position + 1 (keys already in
 *            the cache keep the rotation they were written with, as in HF)
 *   LLAMA3   wavelength w = 2π/f_j: w < O/high_freq_factor kept,
 *            w > O/low_freq_factor divided by factor, in between
 *            (1 − s)·f/factor + s·f with s = (O/w − low)/(high − low)
 *   YARN     ramp between f/factor (interpolation) and f (extrapolation)
 *            over the dims [floor(d(beta_fast)), ceil(d(beta_slow))],
 *            d(r) = R·ln(O/(2πr))/(2 ln theta); cos and sin are multiplied
 *            by attention_factor (0: mscale rule: 0.1·ln(factor) + 1, or
 *            get_mscale(factor, mscale)/get_mscale(factor, mscale_all_dim)
 *            when both are set)
 *   LONGROPE Phi-3's: f_j / long_factor[j] when the model's context (max_seq, as
 *            llama.cpp's n_ctx) exceeds O, else f_j / short_factor[j]; cos and
 *            sin times attention_factor (0: sqrt(1 + ln(factor)/ln O), 1 when
 *            factor <= 1; factor = max_position_embeddings / O). */
typedef enum ffn_rope_scaling_type {
    FFN_ROPE_SCALING_NONE = 0, /* "default" */
    FFN_ROPE_SCALING_LINEAR,
    FFN_ROPE_SCALING_DYNAMIC,
    FFN_ROPE_SCALING_LLAMA3,
    FFN_ROPE_SCALING_YARN,
    FFN_ROPE_SCALING_LONGROPE
} ffn_rope_scaling_type;

#define FFN_ROPE_MAX_FACTORS 256 /* longrope factors per list (rotary dims up to 512) */

typedef struct ffn_rope_scaling {
    ffn_rope_scaling_type type;
    double factor;                    /* >= 1 (all types) */
    double low_freq_factor;           /* llama3 */
    double high_freq_factor;          /* llama3 (> low_freq_factor) */
    int64_t original_max_position_embeddings; /* O; 0: max_position_embeddings */
    double beta_fast, beta_slow;      /* yarn; 0: 32 and 1 */
    double attention_factor;          /* yarn; 0: from factor (and mscale) */
    double mscale, mscale_all_dim;    /* yarn; 0: unset */
    int64_t n_factors;                /* longrope: R/2 factors in each list */
    float long_factor[FFN_ROPE_MAX_FACTORS], short_factor[FFN_ROPE_MAX_FACTORS]; /* longrope */
} ffn_rope_scaling;

/* Normalisation of q and k before RoPE (Qwen3, OLMoE / OLMo-2). */
typedef enum ffn_qk_norm {
    FFN_QK_NORM_NONE = 0,
    FFN_QK_NORM_HEAD,  /* RMSNorm over each head's Dh features, weights (Dh) (qwen3) */
    FFN_QK_NORM_FULL   /* RMSNorm over the whole projection, weights (H·Dh) / (G·Dh) (olmoe) */
} ffn_qk_norm;

/* The block and final norms. */
typedef enum ffn_norm_type {
    FFN_NORM_RMS = 0,  /* RMSNorm, weight only (Llama and most) */
    FFN_NORM_LAYER     /* LayerNorm with weight and bias (GPT-2) */
} ffn_norm_type;

/* Hugging Face Llama names where one exists.  Fill with
 * ffn_model_config_default() then change fields. */
typedef struct ffn_model_config {
    int64_t vocab_size;              /* V */
    int64_t hidden_size;             /* D */
    int64_t intermediate_size;       /* F (dense / gated blocks) */
    int64_t num_hidden_layers;       /* L */
    int64_t num_attention_heads;     /* H; D % H == 0, Dh even */
    int64_t num_key_value_heads;     /* G; H % G == 0 (G == H: plain MHA) */
    int64_t max_position_embeddings; /* the context length; T <= this */
    double rope_theta;               /* 10000 */
    double rms_norm_eps;             /* 1e-5 */
    int tie_word_embeddings;         /* 1: the LM head is embed_tokens */
    ffn_act hidden_act;              /* act of the dense/gated MLP and of the experts */
    ffn_model_mlp mlp_type;          /* the FFN slot of non-MoE blocks */
    int mlp_bias;                    /* biases on gate/up/down (dense/gated blocks) */
    int attention_bias;              /* biases on q/k/v (Qwen2); o_proj never has one */
    ffn_rope_style rope_style;       /* FFN_ROPE_HALF by default */
    /* Mixture of Experts (num_experts == 0: no MoE layer at all).  The MoE
     * layers (include/ffn/moe.h) use softmax scoring, dropless routing and
     * routed_scaling_factor 1; experts have the type and act above. */
    int64_t num_experts;             /* E */
    int64_t num_experts_per_tok;     /* K */
    int64_t moe_intermediate_size;   /* Fe; 0 means intermediate_size */
    int64_t moe_layer_freq;          /* decoder_sparse_step: layer i (0-based) is MoE
                                        iff num_experts > 0 and (i + 1) % freq == 0;
                                        1 = every layer, 2 = layers 1, 3, 5, ... */
    int norm_topk_prob;              /* renormalise the K selected router weights */
    double router_aux_loss_coef;     /* load-balancing loss weight (0.01) */
    double router_z_loss_coef;       /* router z-loss weight (0.001) */
    int64_t shared_expert_intermediate_size; /* 0: no shared expert (needs moe.h support) */
    /* Beyond Llama (all 0 = Llama). */
    int64_t head_dim;                /* Dh; 0: hidden_size / num_attention_heads */
    double partial_rotary_factor;    /* RoPE rotates the first R = int(Dh·this) features of a
                                        head (R even); 0 means 1 */
    ffn_rope_scaling rope_scaling;   /* type NONE: plain RoPE */
    ffn_qk_norm qk_norm;             /* RMSNorm on q and k after the projection, before RoPE */
    double norm_weight_offset;       /* RMSNorm weight is (offset + w): Gemma 1, else 0 */
    double embed_scale;              /* embeddings times this (Gemma: sqrt(D) rounded to
                                        float, as HF rounds it to the compute dtype); 0 = 1 */
    ffn_norm_type norm_type;         /* LAYER: every norm has a .bias (norm eps: rms_norm_eps) */
    int learned_positions;           /* 1: a learned position embedding (max_position_embeddings,
                                        D) is added to the token's, and there is no RoPE (GPT-2) */
    int attention_out_bias;          /* o_proj has a bias (GPT-2) */
    /* Gemma 2 / Gemma 3 (all 0: none; inference only: a training model is refused) */
    double attn_logit_softcapping;   /* > 0: attention scores cap·tanh(s/cap) before the softmax */
    double final_logit_softcapping;  /* > 0: logits cap·tanh(z/cap) */
    double query_pre_attn_scalar;    /* > 0: scores scaled by this^-1/2 instead of Dh^-1/2 */
    int64_t sliding_window;          /* > 0: a sliding layer's query sees its last this many keys */
    int64_t sliding_window_pattern;  /* layer l slides iff (l + 1) % pattern != 0 (Gemma 2: 2,
                                        Gemma 3: 6; 1: none slides); 0: every layer slides */
    double rope_local_base_freq;     /* > 0: sliding layers' RoPE base, unscaled (Gemma 3) */
    int post_norms;                  /* 1: RMSNorms on attention's and the FFN's outputs before
                                        each residual add (Gemma 2/3): the block's tensors are
                                        then named as Gemma2's (see below) */
} ffn_model_config;

/* Defaults: a small model that trains in minutes on a CPU.
 * V 256, D 128, F 344, L 4, H 4, G 4, T 128, theta 1e4, eps 1e-5, tied,
 * silu, gated (SwiGLU), no biases, FFN_ROPE_HALF, no MoE (E 0, K 2,
 * Fe 0, freq 1, norm_topk_prob 1, aux 0.01, z 0.001). */
void ffn_model_config_default(ffn_model_config *cfg);
/* Check every field; the error names the field, the value and what is
 * expected ("num_key_value_heads: 3 does not divide num_attention_heads 4"). */
ffn_status ffn_model_config_validate(const ffn_model_config *cfg);
/* Is layer i a MoE layer under this config? */
int ffn_model_config_layer_is_moe(const ffn_model_config *cfg, int64_t layer);
/* Parameter counts from a config alone (no allocation): exactly what
 * ffn_model_num_params / ffn_model_active_params report for a model made
 * from it.  Validates the config first.  Either pointer may be NULL. */
ffn_status ffn_model_config_count_params(const ffn_model_config *cfg, int64_t *total,
                                         int64_t *active);

/* config.json with Hugging Face names.
 * Load: vocab_size, hidden_size, num_hidden_layers, num_attention_heads are
 * required; absent fields take the Hugging Face defaults, not ffn's
 * (num_key_value_heads = num_attention_heads, max_position_embeddings 2048,
 * rope_theta 1e4, rms_norm_eps 1e-6, tie_word_embeddings false, hidden_act
 * silu, gated MLP, no MoE losses; attention_bias true for model_type qwen2*,
 * norm_topk_prob true for mixtral, where also moe_intermediate_size =
 * intermediate_size).  Aliases: num_local_experts, n_routed_experts ->
 * num_experts; decoder_sparse_step -> moe_layer_freq.  ffn's own keys:
 * "mlp_type": "none"|"dense"|"gated", "rope_style": "half"|"interleaved"
 * (absent: half), "ffn_qk_norm": "none"|"head"|"full".  A family name in
 * hidden_act ("swiglu") implies gated.  Also read: head_dim,
 * partial_rotary_factor, rope_scaling or rope_parameters (rope_type or
 * type: default, linear, dynamic, llama3, yarn; any other type is an error
 * naming the field); model_type qwen3 (and qwen3_moe) implies qk_norm HEAD and head_dim 128
 * when absent; gemma implies norm_weight_offset 1, embed_scale
 * (float)sqrt(D), gated with the act of hidden_activation (absent:
 * gelu_pytorch_tanh), head_dim 256 and a tied head when absent.  ffn's
 * keys "ffn_norm_weight_offset", "ffn_embed_scale" carry the same; olmoe
 * implies qk_norm FULL and experts of intermediate_size; gpt2 is read from
 * its own keys (n_embd, n_layer, n_head, n_positions, n_inner,
 * activation_function, layer_norm_epsilon) as norm LAYER, learned
 * positions, q/k/v and o biases, a dense MLP with biases and a tied head
 * ("ffn_norm_type", "ffn_learned_positions", "ffn_attention_out_bias" are
 * ffn's keys for these); starcoder2 as norm LAYER (eps norm_epsilon), a dense
 * MLP, q/k/v/o and MLP biases under use_bias (true), a tied head when absent.
 * Unknown keys are ignored; the result is validated and errors name the
 * file and the field.
 * Save: writes every field above (so a load gives the config back), with
 * "model_type": "llama" (or "qwen2_moe" with experts) and "architectures".
 * Note for exporters: Hugging Face's Qwen2-MoE always has q/k/v biases;
 * write zeros when attention_bias is 0. */
ffn_status ffn_model_config_load(const char *path, ffn_model_config *cfg);
ffn_status ffn_model_config_save(const ffn_model_config *cfg, const char *path);

/* What to allocate at create. */
typedef struct ffn_model_options {
    int64_t max_batch; /* largest B of any forward call (0 -> 1) */
    int64_t max_seq;   /* largest T of any forward call (0 -> max_position_embeddings) */
    int training;      /* 1: allocate gradients and the activations backward needs */
    int low_precision; /* 1: a loader may keep a file's f16/bf16/ggml-block matrices in their
                          type (include/ffn/quant.h: inference only; their fp32 values are
                          then not in ffn_model_params, so analysis and export need 0) */
    ffn_precision precision; /* of every projection: q|k|v, o, the FFN or MoE experts, the LM
                                head (include/ffn/layer.h; FFN_PRECISION_BF16 keeps a bf16
                                copy of the weights, refreshed by ffn_model_params_changed);
                                norms, attention scores, softmax, residuals, loss stay fp32 */
    int64_t layer_begin, layer_end; /* training: the model runs layers [layer_begin, layer_end)
                                       only (a pipeline stage, ffn_model_stage_*): the training
                                       activations and the layers' weight copies (packed,
                                       bf16) exist for those alone; a call over other layers
                                       is refused; 0, 0: every layer */
} ffn_model_options;

typedef struct ffn_model ffn_model;

/* Allocate a model (weights zero; call ffn_model_init_weights or fill
 * ffn_model_params() and call ffn_model_params_changed()).  opt may be NULL
 * (inference, B = 1, T = max_position_embeddings).  The context must
 * outlive the model. */
ffn_status ffn_model_create(ffn_ctx *ctx, const ffn_model_config *cfg,
                            const ffn_model_options *opt, ffn_model **out);
void ffn_model_free(ffn_model *model); /* NULL is a no-op */
/* Grow the activation block (and the KV cache) to hold max_batch·max_seq
 * tokens, keeping the weights, layers and taps; a no-op when it is that
 * large already (it never shrinks).  Reallocates (not a hot path); resets
 * the KV cache and drops captured tap rows.  On failure the model is
 * unchanged.  max_seq <= max_position_embeddings. */
ffn_status ffn_model_reserve(ffn_model *model, int64_t max_batch, int64_t max_seq);
const ffn_model_config *ffn_model_get_config(const ffn_model *model);

/* Parameter counts: every tensor once (a tied embedding counted once);
 * active = what one token uses (MoE: K of E experts, router included). */
int64_t ffn_model_num_params(const ffn_model *model);
int64_t ffn_model_active_params(const ffn_model *model);
/* Bytes allocated for activations + workspaces + KV cache. */
size_t ffn_model_activation_bytes(const ffn_model *model);

/* ---- the tensor table ---------------------------------------------------- */

typedef enum ffn_tensor_kind {
    FFN_TENSOR_EMBEDDING = 0, /* model.embed_tokens.weight */
    FFN_TENSOR_NORM,          /* *_layernorm.weight, model.norm.weight */
    FFN_TENSOR_ATTN_WEIGHT,   /* q/k/v/o_proj.weight */
    FFN_TENSOR_ATTN_BIAS,     /* q/k/v_proj.bias */
    FFN_TENSOR_MLP_WEIGHT,    /* mlp gate/up/down_proj.weight (incl. experts') */
    FFN_TENSOR_MLP_BIAS,      /* mlp gate/up/down_proj.bias */
    FFN_TENSOR_ROUTER,        /* mlp.gate.weight */
    FFN_TENSOR_HEAD           /* lm_head.weight (untied only) */
} ffn_tensor_kind;

typedef struct ffn_model_tensor {
    const char *name;    /* Hugging Face name, owned by the model */
    int ndim;            /* 1 or 2 */
    int64_t shape[2];    /* (out, in) for matrices; shape[1] = 1 for vectors */
    int64_t numel;
    int64_t offset;      /* in floats, into ffn_model_params()/ffn_model_grads() */
    ffn_tensor_kind kind;
    int64_t layer;       /* block index, -1 for embedding / final norm / head */
    int64_t expert;      /* expert index, -1 when not an expert tensor */
} ffn_model_tensor;

int64_t ffn_model_num_tensors(const ffn_model *model);
/* NULL when i is out of range.  Table order == offset order. */
const ffn_model_tensor *ffn_model_tensor_at(const ffn_model *model, int64_t i);
/* The tensor with this name, or NULL. */
const ffn_model_tensor *ffn_model_find_tensor(const ffn_model *model, const char *name);

/* The flat blocks (n_out receives their length in floats, may be NULL).
 * ffn_model_grads is NULL for a model created without training. */
float *ffn_model_params(ffn_model *model, int64_t *n_out);
float *ffn_model_grads(ffn_model *model, int64_t *n_out);
void ffn_model_zero_grads(ffn_model *model); /* one memset */

/* Deterministic initialisation from a seed (the same on every machine and
 * thread count): matrices and embeddings normal(0, 0.02), residual output
 * projections (o_proj, down_proj, experts' down_proj) normal(0,
 * 0.02/sqrt(2L)), router normal(0, 0.02), norms 1, biases 0.  Each tensor
 * draws from its own stream (seed, tensor index).  Calls
 * ffn_model_params_changed. */
ffn_status ffn_model_init_weights(ffn_model *model, uint64_t seed);
/* The same for the tensors i with which[i] != 0 only (NULL: all), the
 * others left as they are (a rank initialising the tensors it holds: each
 * gets the bits ffn_model_init_weights gives it). */
ffn_status ffn_model_init_tensors(ffn_model *model, uint64_t seed, const unsigned char *which);

/* Call after writing into ffn_model_params() (optimizer step, checkpoint
 * load): layers that prepack their weights repack them, and the KV cache is
 * reset.  Allocates inside the layers (not a hot path). */
ffn_status ffn_model_params_changed(ffn_model *model);

/* Tensor parallelism (libffn_dist, include/ffn/dist.h): a model that holds
 * a rank's share of the heads and FFN units calls `sum` to add up its
 * ranks' partial results in place: in forward the attention output (after
 * o_proj and its bias) and the FFN's output, each (N, D); in backward the
 * gradients of the two norms' outputs, each (N, D), before the norms'
 * backward.  NULL (the default): a whole model, nothing summed. */
typedef struct ffn_model_reducer {
    ffn_status (*sum)(void *user, float *buf, int64_t n);
    void *user;
} ffn_model_reducer;
ffn_status ffn_model_set_reducer(ffn_model *model, const ffn_model_reducer *reducer);
/* Training: the "gradients ready" points of the backward, for a caller
 * that sends gradients while the backward still runs (libffn_dist's
 * overlap).  fn(user, level) is called when the gradients of a part of
 * the model are complete: level L (the number of blocks) after the head
 * and the final norm, level l after block l (the backward goes from block
 * L-1 down to 0); the embedding's are complete when the backward returns.
 * A failure stops the backward.  fn NULL (the default): no calls. */
typedef ffn_status (*ffn_grad_ready_fn)(void *user, int64_t level);
ffn_status ffn_model_set_grad_ready(ffn_model *model, ffn_grad_ready_fn fn, void *user);
/* Expert parallelism (libffn_dist): run the routed experts of MoE layer
 * `layer` on `runner` (include/ffn/moe.h, ffn_moe_set_runner; NULL: here
 * again).  The weights are set again at the next ffn_model_params_changed,
 * which this calls. */
struct ffn_moe_runner;
ffn_status ffn_model_set_moe_runner(ffn_model *model, int64_t layer,
                                    const struct ffn_moe_runner *runner);

/* Profile the training forward and backward (ffn_model_forward_backward)
 * into `profile` (include/ffn/profile.h): the model charges each part of
 * the step from the profile's mark, and adds the step's product FLOPs.
 * NULL (the default) turns it off.  The caller owns the profile. */
ffn_status ffn_model_set_profile(ffn_model *model, ffn_profile *profile);

/* ---- training and evaluation --------------------------------------------- */

typedef struct ffn_model_loss {
    double total;      /* the differentiated objective (see Loss above) */
    double ce;         /* mean cross-entropy over the counted targets */
    double aux;        /* Σ over MoE layers of the load-balancing loss (unscaled) */
    double z;          /* Σ over MoE layers of the router z-loss (unscaled) */
    int64_t n_targets; /* targets that were not FFN_IGNORE_INDEX */
} ffn_model_loss;

/* tokens (B, T) and targets (B, T) int32, row-major; token ids in [0, V),
 * targets in [0, V) or FFN_IGNORE_INDEX; 1 <= T <= max_seq,
 * B·T <= max_batch·max_seq.  Forward, loss, then backward, ACCUMULATING
 * (+=) grad_scale · d(total)/d(param) into ffn_model_grads() (pass
 * grad_scale = 1/accum for gradient accumulation over `accum` micro-batches;
 * zero the gradients yourself with ffn_model_zero_grads).  Every sequence
 * starts at position 0.  loss may be NULL.  Needs a training model. */
ffn_status ffn_model_forward_backward(ffn_model *model, const int32_t *tokens,
                                      const int32_t *targets, int64_t B, int64_t T,
                                      float grad_scale, ffn_model_loss *loss);

/* ---- pipeline stages (ffn train --pp, libffn_dist) ----------------------------
 * The training forward and backward of layers [l0, l1) alone, for a
 * process that holds a contiguous range of the layers.  Stage forward:
 * with l0 == 0 the tokens are embedded, otherwise x_in (B·T, D) is the
 * residual stream entering layer l0; with l1 < L *x_out points at the
 * stream leaving layer l1 - 1 (the model's buffer: valid until the next
 * call) and loss holds this range's MoE aux and z only (ce 0); with l1 == L
 * the final norm, head and loss run as in ffn_model_forward_backward (with
 * train, the head's gradient and dlogits for the backward; without, an
 * evaluation).  Stage backward (after a training stage forward of the same
 * range and micro-batch): with l1 < L d_top is the gradient of the stream
 * leaving layer l1 - 1; gradients accumulate (+=) as in the whole model's
 * backward; with l0 > 0 *d_in points at the gradient of the stream entering
 * layer l0 (the model's buffer), with l0 == 0 the embedding's gradient is
 * accumulated instead.  Run over a split of the layers with the boundary
 * streams passed along, the pair gives the whole model's forward_backward
 * bit for bit.  ffn_model_stage_acts: the bytes [*start, *start + *bytes)
 * that hold layers [l0, l1)'s saved activations between the two calls (a
 * caller running several micro-batches at once keeps copies of them). */
ffn_status ffn_model_stage_forward(ffn_model *model, const int32_t *tokens, const int32_t *targets,
                                   int64_t B, int64_t T, int64_t l0, int64_t l1, int train,
                                   float grad_scale, const float *x_in, float **x_out,
                                   ffn_model_loss *loss);
ffn_status ffn_model_stage_backward(ffn_model *model, const int32_t *tokens, int64_t B, int64_t T,
                                    int64_t l0, int64_t l1, float grad_scale, const float *d_top,
                                    float **d_in);
ffn_status ffn_model_stage_acts(ffn_model *model, int64_t l0, int64_t l1, void **start,
                                size_t *bytes);

/* Forward only: the loss (for evaluation).  Works on any model. */
ffn_status ffn_model_eval_loss(ffn_model *model, const int32_t *tokens, const int32_t *targets,
                               int64_t B, int64_t T, ffn_model_loss *loss);

/* logits (B, T, V) for tokens (B, T).  Works on any model. */
ffn_status ffn_model_logits(ffn_model *model, float *logits, const int32_t *tokens, int64_t B,
                            int64_t T);

/* ---- generation with a KV cache (batch 1) -------------------------------- */

/* Forget the cached sequence: the next token goes to position 0. */
void ffn_model_reset(ffn_model *model);
/* Number of tokens in the cache (the position the next token takes). */
int64_t ffn_model_position(const ffn_model *model);
/* Append `token` at the next position and write logits (V) for the next
 * token.  Equal (to float rounding) to ffn_model_logits on the whole
 * sequence.  FFN_ERR_INVALID_ARG once the cache holds max_seq tokens. */
ffn_status ffn_model_step(ffn_model *model, int32_t token, float *logits);
/* Append n tokens (a prompt) and write the logits after the last one
 * (logits may be NULL). */
ffn_status ffn_model_prefill(ffn_model *model, const int32_t *tokens, int64_t n, float *logits);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif /* FFN_MODEL_H */
