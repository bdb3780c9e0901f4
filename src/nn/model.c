/* model.c -- the decoder-only Transformer (Llama architecture): config,
 * the tensor table and the flat parameter / gradient blocks, activations,
 * forward, cross-entropy, backward, and the KV-cached decoder.
 * RMSNorm lives in norm.c, RoPE and attention in attention.c, the FFN in
 * ffn.c and the MoE in moe.c; this file wires them into blocks.
 *
 * Letters: B batch, T positions, N = B·T tokens, D hidden, H heads, G kv
 * heads, Dh head dim, C = (H + 2G)·Dh (the fused q|k|v width), F
 * intermediate, E experts, V vocab, L layers.
 *
 * Block l, on the residual stream x (N, D):
 *   xn1 = rmsnorm(x) · w_in;  qkv = xn1 · Wqkvᵀ (+ b);  rope(q), rope(k)
 *   att = causal_attention(q, k, v);  mid = x + att · Woᵀ
 *   xn2 = rmsnorm(mid) · w_post;  x' = mid + mlp(xn2)      (mlp none: x' = mid)
 * The q, k and v weights are adjacent in the flat block, so they form one
 * (C, D) matrix and one matrix product serves all three. */
#include "ffn/layer.h"
#include "ffn/model.h"
#include "ffn/moe.h"
#include "ffn/quant.h"
#include "nn/model_internal.h"
#include "nn/ffn_hook.h"
#include "nn/tap_internal.h"
#include "nn/bf16_model.h"
#include "format/json.h"
#include "kernels/kernels.h"
#include "base/rng.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- config --------------------------------------------------------------- */

void ffn_model_config_default(ffn_model_config *cfg) {
    /* A small Llama-style model; every field not named here is 0 (MoE off). */
    static const ffn_model_config defaults = {
        .vocab_size = 256, .hidden_size = 128, .intermediate_size = 344,
        .num_hidden_layers = 4, .num_attention_heads = 4, .num_key_value_heads = 4,
        .max_position_embeddings = 128, .rope_theta = 10000.0, .rope_style = FFN_ROPE_HALF,
        .rms_norm_eps = 1e-5, .tie_word_embeddings = 1,
        .hidden_act = FFN_ACT_SILU, .mlp_type = FFN_MODEL_MLP_GATED,
        /* used once num_experts > 0 */
        .num_experts_per_tok = 2, .moe_layer_freq = 1, .norm_topk_prob = 1,
        .router_aux_loss_coef = 0.01, .router_z_loss_coef = 0.001};
    *cfg = defaults;
}

int ffn_model_config_layer_is_moe(const ffn_model_config *cfg, int64_t layer) {
    return cfg->num_experts > 0 && cfg->moe_layer_freq > 0 && (layer + 1) % cfg->moe_layer_freq == 0;
}

int ffn_cfg_layer_slides(const ffn_model_config *c, int64_t l) {
    if (c->sliding_window <= 0) return 0;
    return c->sliding_window_pattern <= 0 || (l + 1) % c->sliding_window_pattern != 0;
}

/* Whether c has any of Gemma 2/3's forward-only features. */
static int gemma2_features(const ffn_model_config *c) {
    return c->attn_logit_softcapping > 0 || c->final_logit_softcapping > 0 || c->post_norms ||
           c->sliding_window > 0 || c->rope_local_base_freq > 0 || c->query_pre_attn_scalar > 0 ||
           (c->qk_norm != FFN_QK_NORM_NONE && c->norm_weight_offset != 0.0);
}

static int64_t moe_width(const ffn_model_config *cfg) {
    return cfg->moe_intermediate_size > 0 ? cfg->moe_intermediate_size : cfg->intermediate_size;
}

/* One FFN's parameters: gated 3·F·D, dense 2·F·D, plus biases. */
static int64_t ffn_params(int gated, int bias, int64_t F, int64_t D) {
    return (gated ? 3 : 2) * F * D + (bias ? (gated ? 2 : 1) * F + D : 0);
}

#define CFG_ERR(...) ffn_error(FFN_ERR_CONFIG, "model config: " __VA_ARGS__)

ffn_status ffn_model_config_validate(const ffn_model_config *c) {
    if (!c) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_model_config_validate: cfg is NULL");
    const int64_t lim = (int64_t)1 << 31;
    struct { const char *name; int64_t v; } pos[] = {
        {"vocab_size", c->vocab_size},
        {"hidden_size", c->hidden_size},
        {"num_hidden_layers", c->num_hidden_layers},
        {"num_attention_heads", c->num_attention_heads},
        {"num_key_value_heads", c->num_key_value_heads},
        {"max_position_embeddings", c->max_position_embeddings},
    };
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++)
        if (pos[i].v < 1 || pos[i].v > lim)
            return CFG_ERR("%s: expected 1..%lld, got %lld", pos[i].name, (long long)lim,
                           (long long)pos[i].v);
    if (c->head_dim < 0 || c->head_dim > 65536)
        return CFG_ERR("head_dim: expected 0 (hidden_size / num_attention_heads) or 1..65536, "
                       "got %lld", (long long)c->head_dim);
    if (c->head_dim == 0 && c->hidden_size % c->num_attention_heads)
        return CFG_ERR("num_attention_heads: %lld does not divide hidden_size %lld",
                       (long long)c->num_attention_heads, (long long)c->hidden_size);
    if (ffn_cfg_head_dim(c) % 2)
        return CFG_ERR("head_dim: head dim %lld must be even (RoPE pairs)",
                       (long long)ffn_cfg_head_dim(c));
    if (!(c->partial_rotary_factor >= 0.0) || !(c->partial_rotary_factor <= 1.0))
        return CFG_ERR("partial_rotary_factor: expected 0 < factor <= 1, got %g",
                       c->partial_rotary_factor);
    if (!c->learned_positions && (ffn_cfg_rotary_dim(c) < 2 || ffn_cfg_rotary_dim(c) % 2))
        return CFG_ERR("partial_rotary_factor: %g of head dim %lld gives rotary dim %lld, "
                       "expected an even number >= 2", c->partial_rotary_factor,
                       (long long)ffn_cfg_head_dim(c), (long long)ffn_cfg_rotary_dim(c));
    if ((int)c->qk_norm < FFN_QK_NORM_NONE || (int)c->qk_norm > FFN_QK_NORM_FULL)
        return CFG_ERR("qk_norm: unknown value %d", (int)c->qk_norm);
    ffn_status rs = ffn_rope_scaling_validate(c);
    if (rs) return rs;
    if (!(c->norm_weight_offset >= -4.0 && c->norm_weight_offset <= 4.0))
        return CFG_ERR("norm_weight_offset: expected -4..4 (Gemma: 1), got %g", c->norm_weight_offset);
    if (!(c->embed_scale >= 0.0 && c->embed_scale <= 1e6))
        return CFG_ERR("embed_scale: expected 0 (none) or a positive number, got %g", c->embed_scale);
    if ((int)c->norm_type < FFN_NORM_RMS || (int)c->norm_type > FFN_NORM_LAYER)
        return CFG_ERR("norm_type: unknown value %d (expected rms or layer)", (int)c->norm_type);
    if (c->norm_type == FFN_NORM_LAYER && c->norm_weight_offset != 0.0)
        return CFG_ERR("norm_weight_offset: %g is for RMSNorm; LayerNorm has none", c->norm_weight_offset);
    if (c->learned_positions && c->rope_scaling.type != FFN_ROPE_SCALING_NONE)
        return CFG_ERR("rope_scaling: learned position embeddings have no RoPE to scale");
    {
        const struct { const char *name; double v; } caps[] = {
            {"attn_logit_softcapping", c->attn_logit_softcapping},
            {"final_logit_softcapping", c->final_logit_softcapping},
            {"query_pre_attn_scalar", c->query_pre_attn_scalar},
            {"rope_local_base_freq", c->rope_local_base_freq}};
        for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++)
            if (!(caps[i].v >= 0.0 && caps[i].v <= 1e12))
                return CFG_ERR("%s: expected 0 (none) or a positive number, got %g", caps[i].name,
                               caps[i].v);
    }
    if (c->sliding_window < 0 || c->sliding_window > lim)
        return CFG_ERR("sliding_window: expected 0 (none) or 1..%lld, got %lld", (long long)lim,
                       (long long)c->sliding_window);
    if (c->sliding_window_pattern < 0 || c->sliding_window_pattern > lim)
        return CFG_ERR("sliding_window_pattern: expected 0..%lld, got %lld", (long long)lim,
                       (long long)c->sliding_window_pattern);
    if (c->post_norms && (c->norm_type != FFN_NORM_RMS || c->mlp_type == FFN_MODEL_MLP_NONE ||
                          c->num_experts > 0))
        return CFG_ERR("post_norms: Gemma 2/3's output norms need RMSNorm and a dense or gated "
                       "FFN in every layer (no experts)");
    if (c->rope_local_base_freq > 0 && (c->learned_positions || ffn_rope_is_dynamic(c)))
        return CFG_ERR("rope_local_base_freq: a second RoPE base needs RoPE that is not dynamic");
    if (c->num_key_value_heads > c->num_attention_heads ||
        c->num_attention_heads % c->num_key_value_heads)
        return CFG_ERR("num_key_value_heads: %lld does not divide num_attention_heads %lld",
                       (long long)c->num_key_value_heads, (long long)c->num_attention_heads);
    if (!(c->rope_theta > 0.0) || !isfinite(c->rope_theta))
        return CFG_ERR("rope_theta: expected a positive number, got %g", c->rope_theta);
    if (!(c->rms_norm_eps > 0.0) || !(c->rms_norm_eps < 1.0))
        return CFG_ERR("rms_norm_eps: expected 0 < eps < 1, got %g", c->rms_norm_eps);
    if ((int)c->hidden_act < FFN_ACT_LINEAR || (int)c->hidden_act > FFN_ACT_SIGMOID)
        return CFG_ERR("hidden_act: unknown value %d", (int)c->hidden_act);
    if ((int)c->mlp_type < FFN_MODEL_MLP_NONE || (int)c->mlp_type > FFN_MODEL_MLP_GATED)
        return CFG_ERR("mlp_type: unknown value %d (expected none, dense or gated)",
                       (int)c->mlp_type);
    if (c->rope_style != FFN_ROPE_HALF && c->rope_style != FFN_ROPE_INTERLEAVED)
        return CFG_ERR("rope_style: unknown value %d (expected half or interleaved)",
                       (int)c->rope_style);
    /* a dense layer exists unless every layer is MoE (layer 0 is dense when
     * moe_layer_freq > 1): no loop over a hostile count of layers */
    const int any_dense = !(c->num_experts > 0 && c->moe_layer_freq == 1);
    if (c->mlp_type != FFN_MODEL_MLP_NONE && any_dense &&
        (c->intermediate_size < 1 || c->intermediate_size > lim))
        return CFG_ERR("intermediate_size: expected 1..%lld, got %lld", (long long)lim,
                       (long long)c->intermediate_size);
    if (c->num_experts < 0 || c->num_experts > 65536)
        return CFG_ERR("num_experts: expected 0..65536, got %lld", (long long)c->num_experts);
    if (c->num_experts > 0) {
        if (c->mlp_type == FFN_MODEL_MLP_NONE)
            return CFG_ERR("mlp_type: none leaves the experts without a type (use dense or gated)");
        if (c->num_experts_per_tok < 1 || c->num_experts_per_tok > c->num_experts)
            return CFG_ERR("num_experts_per_tok: expected 1..num_experts (%lld), got %lld",
                           (long long)c->num_experts, (long long)c->num_experts_per_tok);
        if (c->moe_layer_freq < 1)
            return CFG_ERR("moe_layer_freq: expected >= 1, got %lld", (long long)c->moe_layer_freq);
        int64_t fe = moe_width(c);
        if (fe < 1 || fe > lim)
            return CFG_ERR("moe_intermediate_size: expected 1..%lld, got %lld", (long long)lim,
                           (long long)fe);
        if (c->shared_expert_intermediate_size < 0 || c->shared_expert_intermediate_size > lim)
            return CFG_ERR("shared_expert_intermediate_size: expected 0..%lld, got %lld",
                           (long long)lim, (long long)c->shared_expert_intermediate_size);
        if (!(c->router_aux_loss_coef >= 0.0) || !isfinite(c->router_aux_loss_coef))
            return CFG_ERR("router_aux_loss_coef: expected >= 0, got %g", c->router_aux_loss_coef);
        if (!(c->router_z_loss_coef >= 0.0) || !isfinite(c->router_z_loss_coef))
            return CFG_ERR("router_z_loss_coef: expected >= 0, got %g", c->router_z_loss_coef);
    }
    /* Every tensor must be addressable: V·D, F·D, E·Fe·D, (H+2G)·Dh·D. */
    int64_t t;
    /* the layers together: at least their attention matrices and norms each */
    const int64_t per_layer = (2 * c->num_attention_heads + 2 * c->num_key_value_heads) *
                              ffn_cfg_head_dim(c) * c->hidden_size + 2 * c->hidden_size;
    if (ffn_mul_i64(per_layer, c->num_hidden_layers, &t) || t > ((int64_t)1 << 40))
        return CFG_ERR("num_hidden_layers: %lld layers of at least %lld parameters each are more "
                       "than 2^40 parameters", (long long)c->num_hidden_layers,
                       (long long)per_layer);
    if (ffn_mul_i64(c->num_attention_heads + 2 * c->num_key_value_heads, ffn_cfg_head_dim(c), &t) ||
        ffn_mul_i64(t, c->hidden_size, &t) || t > ((int64_t)1 << 40) ||
        ffn_mul_i64(c->vocab_size, c->hidden_size, &t) ||
        ffn_mul_i64(c->intermediate_size > 0 ? c->intermediate_size : 1, c->hidden_size * 3, &t) ||
        ffn_mul_i64(c->num_experts > 0 ? c->num_experts : 1, c->hidden_size, &t) ||
        ffn_mul_i64(t, moe_width(c) > 0 ? moe_width(c) * 3 : 1, &t) ||
        ffn_mul_i64(t, c->num_hidden_layers, &t) || t > ((int64_t)1 << 40))
        return ffn_error(FFN_ERR_OVERFLOW, "model config: the parameter count overflows (sizes "
                         "too large: vocab_size %lld, hidden_size %lld, intermediate_size %lld)",
                         (long long)c->vocab_size, (long long)c->hidden_size,
                         (long long)c->intermediate_size);
    return FFN_OK;
}

ffn_status ffn_model_config_count_params(const ffn_model_config *c, int64_t *total,
                                         int64_t *active) {
    ffn_status st = ffn_model_config_validate(c);
    if (st) return st;
    const int64_t D = c->hidden_size, V = c->vocab_size, Dh = ffn_cfg_head_dim(c);
    const int64_t C = (c->num_attention_heads + 2 * c->num_key_value_heads) * Dh;
    const int64_t qkn = c->qk_norm == FFN_QK_NORM_HEAD ? 2 * Dh
                        : c->qk_norm == FFN_QK_NORM_FULL ? C - c->num_key_value_heads * Dh : 0;
    const int gated = c->mlp_type == FFN_MODEL_MLP_GATED;
    const int ln = c->norm_type == FFN_NORM_LAYER;
    int64_t n = V * D + D * (ln ? 2 : 1) + (c->tie_word_embeddings ? 0 : V * D), idle = 0;
    if (c->learned_positions) n += c->max_position_embeddings * D;
    for (int64_t l = 0; l < c->num_hidden_layers; l++) {
        n += D * (ln ? 2 : 1) + C * D + (c->attention_bias ? C : 0) + D * c->num_attention_heads * Dh +
             qkn + (c->attention_out_bias ? D : 0);
        if (ffn_model_config_layer_is_moe(c, l)) {
            const int64_t E = c->num_experts, Fs = c->shared_expert_intermediate_size;
            const int64_t per = ffn_params(gated, c->mlp_bias, moe_width(c), D);
            n += D * (ln ? 2 : 1) + E * D + E * per + (Fs > 0 ? ffn_params(gated, c->mlp_bias, Fs, D) + D : 0);
            idle += (E - c->num_experts_per_tok) * per;
        } else if (c->mlp_type != FFN_MODEL_MLP_NONE) {
            n += D * (ln ? 2 : 1) + ffn_params(gated, c->mlp_bias, c->intermediate_size, D);
            if (c->post_norms) n += 2 * D;
        }
    }
    if (total) *total = n;
    if (active) *active = n - idle;
    return FFN_OK;
}

/* ---- config.json ---------------------------------------------------------- */

ffn_status ffn_model_config_load(const char *path, ffn_model_config *cfg) {
    json_doc *doc = NULL;
    ffn_status st = json_parse_file(path, &doc);
    if (st) return st;
    const json_value *root = json_root(doc);
    const char *what = path; /* errors name the file (and text_config) */
    ffn_model_config c;
    ffn_model_config_default(&c);
    if (!root || root->type != JSON_OBJECT) {
        json_free(doc);
        return ffn_error(FFN_ERR_FORMAT, "%s: expected a JSON object at the top level", path);
    }
    const char *model_type = "llama";
    if ((st = json_get_str(root, "model_type", 0, what, &model_type))) goto done;
    /* Gemma3ForConditionalGeneration (gemma-3-4b and larger): the text
     * model is text_config, whose absent fields take Gemma3TextConfig's
     * defaults; the vision tower's config is not read */
    char wrapped_what[4200];
    const int wrapped = !strcmp(model_type, "gemma3");
    if (wrapped) {
        snprintf(wrapped_what, sizeof wrapped_what, "%s: text_config", path);
        what = wrapped_what;
        root = json_get(root, "text_config");
        if (!root || root->type != JSON_OBJECT) {
            st = ffn_error(FFN_ERR_MISSING, "%s: expected an object (model_type gemma3 is "
                           "Gemma3ForConditionalGeneration: its text model's config)", what);
            goto done;
        }
        model_type = "gemma3_text";
        if ((st = json_get_str(root, "model_type", 0, what, &model_type))) goto done;
        if (strcmp(model_type, "gemma3_text")) {
            st = ffn_error(FFN_ERR_UNSUPPORTED, "%s: model_type '%.40s', expected gemma3_text",
                           what, model_type);
            goto done;
        }
    }
    int qwen = strncmp(model_type, "qwen2", 5) == 0, mixtral = strcmp(model_type, "mixtral") == 0;
    if (!strcmp(model_type, "gpt2")) { /* keys of its own (n_embd, ...) */
        c.router_aux_loss_coef = c.router_z_loss_coef = 0.0;
        if ((st = ffn_config_hf_gpt2(root, what, &c))) goto done;
        goto extras;
    }
    /* Absent fields take the Hugging Face LlamaConfig defaults. */
    c.tie_word_embeddings = 0;
    c.rms_norm_eps = 1e-6;
    c.max_position_embeddings = 2048;
    c.attention_bias = qwen;
    c.norm_topk_prob = mixtral;
    c.router_aux_loss_coef = 0.0;
    c.router_z_loss_coef = 0.0;
    c.num_key_value_heads = 0;
    c.intermediate_size = 0;
    if (wrapped) { /* Gemma3TextConfig's defaults for what text_config leaves out */
        c.vocab_size = 262208, c.hidden_size = 2304, c.intermediate_size = 9216;
        c.num_hidden_layers = 26, c.num_attention_heads = 8, c.num_key_value_heads = 4;
        c.max_position_embeddings = 131072, c.rope_theta = 1e6;
    }
    if ((st = json_get_i64(root, "vocab_size", !wrapped, what, &c.vocab_size)) ||
        (st = json_get_i64(root, "hidden_size", !wrapped, what, &c.hidden_size)) ||
        (st = json_get_i64(root, "num_hidden_layers", !wrapped, what, &c.num_hidden_layers)) ||
        (st = json_get_i64(root, "num_attention_heads", !wrapped, what, &c.num_attention_heads)))
        goto done;
    if (!wrapped) c.num_key_value_heads = c.num_attention_heads;
    if ((st = json_get_i64(root, "intermediate_size", 0, what, &c.intermediate_size)) ||
        (st = json_get_i64(root, "num_key_value_heads", 0, what, &c.num_key_value_heads)) ||
        (st = json_get_i64(root, "max_position_embeddings", 0, what,
                           &c.max_position_embeddings)) ||
        (st = json_get_f64(root, "rope_theta", 0, what, &c.rope_theta)) ||
        (st = json_get_f64(root, "rms_norm_eps", 0, what, &c.rms_norm_eps)) ||
        (st = json_get_bool(root, "tie_word_embeddings", 0, what, &c.tie_word_embeddings)) ||
        (st = json_get_bool(root, "mlp_bias", 0, what, &c.mlp_bias)) ||
        (st = json_get_bool(root, "attention_bias", 0, what, &c.attention_bias)) ||
        (st = json_get_bool(root, "norm_topk_prob", 0, what, &c.norm_topk_prob)) ||
        (st = json_get_f64(root, "router_aux_loss_coef", 0, what, &c.router_aux_loss_coef)) ||
        (st = json_get_f64(root, "router_z_loss_coef", 0, what, &c.router_z_loss_coef)) ||
        (st = json_get_i64(root, "moe_intermediate_size", 0, what, &c.moe_intermediate_size)) ||
        (st = json_get_i64(root, "shared_expert_intermediate_size", 0, what,
                           &c.shared_expert_intermediate_size)) ||
        (st = json_get_i64(root, "num_experts_per_tok", 0, what, &c.num_experts_per_tok)))
        goto done;
    const char *expert_keys[] = {"num_experts", "num_local_experts", "n_routed_experts"};
    for (int i = 0; i < 3; i++) {
        const json_value *v = json_get(root, expert_keys[i]);
        if (!v || v->type == JSON_NULL) continue;
        if ((st = json_get_i64(root, expert_keys[i], 0, what, &c.num_experts))) goto done;
    }
    const json_value *dense_layers = json_get(root, "mlp_only_layers");
    if (dense_layers && dense_layers->type == JSON_ARRAY && dense_layers->length > 0) {
        st = ffn_error(FFN_ERR_UNSUPPORTED, "%s: mlp_only_layers: a list of dense layers inside "
                       "a MoE model is not supported (expected [] or absent)", what);
        goto done;
    }
    const char *freq_keys[] = {"moe_layer_freq", "decoder_sparse_step"};
    for (int i = 0; i < 2; i++)
        if ((st = json_get_i64(root, freq_keys[i], 0, what, &c.moe_layer_freq))) goto done;
    const char *s = NULL;
    ffn_mlp_type implied = FFN_MLP_AUTO;
    if ((st = json_get_str(root, "hidden_act", 0, what, &s))) goto done;
    if (s && (st = ffn_act_parse(s, &c.hidden_act, &implied))) {
        st = ffn_error_prefix(st, "%s: hidden_act", what);
        goto done;
    }
    if (implied == FFN_MLP_GATED) c.mlp_type = FFN_MODEL_MLP_GATED;
    s = NULL;
    if ((st = json_get_str(root, "mlp_type", 0, what, &s))) goto done;
    if (s) {
        if (!strcmp(s, "none")) c.mlp_type = FFN_MODEL_MLP_NONE;
        else if (!strcmp(s, "dense")) c.mlp_type = FFN_MODEL_MLP_DENSE;
        else if (!strcmp(s, "gated")) c.mlp_type = FFN_MODEL_MLP_GATED;
        else {
            st = ffn_error(FFN_ERR_CONFIG, "%s: mlp_type: unknown value '%s' (expected none, "
                           "dense or gated)", what, s);
            goto done;
        }
    }
    s = NULL;
    if ((st = json_get_str(root, "rope_style", 0, what, &s))) goto done;
    if (s) {
        if (!strcmp(s, "half")) c.rope_style = FFN_ROPE_HALF;
        else if (!strcmp(s, "interleaved")) c.rope_style = FFN_ROPE_INTERLEAVED;
        else {
            st = ffn_error(FFN_ERR_CONFIG, "%s: rope_style: unknown value '%s' (expected half "
                           "or interleaved)", what, s);
            goto done;
        }
    }
    if (c.num_experts > 0 && c.moe_intermediate_size == 0 && mixtral)
        c.moe_intermediate_size = c.intermediate_size;
extras:
    if ((st = ffn_config_hf_extras(root, what, model_type, &c))) goto done;
    if ((st = ffn_model_config_validate(&c))) {
        st = ffn_error_prefix(st, "%s", what);
        goto done;
    }
    *cfg = c;
done:
    json_free(doc);
    return st;
}

/* The shortest of %.15g, %.16g, %.17g that reads back as the same double
 * (1e-05 rather than 1.0000000000000001e-05). */
static const char *shortest(char buf[32], double v) {
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, 32, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    return buf;
}

ffn_status ffn_model_config_save(const ffn_model_config *c, const char *path) {
    ffn_status st = ffn_model_config_validate(c);
    if (st) return st;
    FILE *f = fopen(path, "w");
    if (!f) return ffn_error(FFN_ERR_IO, "%s: cannot open for writing", path);
    int moe = c->num_experts > 0;
    fprintf(f, "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\",\n",
            moe ? "Qwen2MoeForCausalLM" : "LlamaForCausalLM", moe ? "qwen2_moe" : "llama");
    fprintf(f, "  \"vocab_size\": %lld,\n  \"hidden_size\": %lld,\n  \"intermediate_size\": %lld,\n",
            (long long)c->vocab_size, (long long)c->hidden_size, (long long)c->intermediate_size);
    fprintf(f, "  \"num_hidden_layers\": %lld,\n  \"num_attention_heads\": %lld,\n"
            "  \"num_key_value_heads\": %lld,\n  \"max_position_embeddings\": %lld,\n",
            (long long)c->num_hidden_layers, (long long)c->num_attention_heads,
            (long long)c->num_key_value_heads, (long long)c->max_position_embeddings);
    char b1[32], b2[32];
    fprintf(f, "  \"rope_theta\": %s,\n  \"rms_norm_eps\": %s,\n", shortest(b1, c->rope_theta),
            shortest(b2, c->rms_norm_eps));
    fprintf(f, "  \"tie_word_embeddings\": %s,\n  \"hidden_act\": ",
            c->tie_word_embeddings ? "true" : "false");
    json_write_string(f, ffn_act_name(c->hidden_act));
    static const char *mlp_names[] = {"none", "dense", "gated"};
    fprintf(f, ",\n  \"mlp_type\": \"%s\",\n  \"mlp_bias\": %s,\n  \"attention_bias\": %s,\n",
            mlp_names[c->mlp_type], c->mlp_bias ? "true" : "false",
            c->attention_bias ? "true" : "false");
    fprintf(f, "  \"rope_style\": \"%s\",\n",
            c->rope_style == FFN_ROPE_HALF ? "half" : "interleaved");
    fprintf(f, "  \"num_experts\": %lld,\n  \"num_experts_per_tok\": %lld,\n"
            "  \"moe_intermediate_size\": %lld,\n  \"decoder_sparse_step\": %lld,\n"
            "  \"norm_topk_prob\": %s,\n  \"router_aux_loss_coef\": %s,\n"
            "  \"router_z_loss_coef\": %s,\n  \"shared_expert_intermediate_size\": %lld,\n",
            (long long)c->num_experts, (long long)c->num_experts_per_tok,
            (long long)moe_width(c), (long long)c->moe_layer_freq,
            c->norm_topk_prob ? "true" : "false", shortest(b1, c->router_aux_loss_coef),
            shortest(b2, c->router_z_loss_coef), (long long)c->shared_expert_intermediate_size);
    ffn_config_hf_write_extras(f, c, 1);
    fprintf(f, "  \"torch_dtype\": \"float32\"\n}\n");
    if (ferror(f) | fclose(f)) return ffn_error(FFN_ERR_IO, "%s: write failed", path);
    return FFN_OK;
}

/* ---- the model ------------------------------------------------------------ */

/* Pointers of one block's tensors into one flat block (params or grads). */
typedef struct block_tensors {
    float *attn_norm;          /* (D) */
    float *attn_norm_b, *mlp_norm_b; /* (D) each with norm LAYER, else NULL */
    float *bo;                 /* (D) with attention_out_bias, else NULL */
    float *wqkv;               /* (C, D): q rows, then k rows, then v rows */
    float *bqkv;               /* (C) or NULL */
    float *q_norm, *k_norm;    /* (Dh) each with qk_norm HEAD, (H·Dh) / (G·Dh) FULL, else NULL */
    float *wo;                 /* (D, H·Dh) */
    float *mlp_norm;           /* (D) or NULL (mlp none) */
    float *attn_post_norm, *mlp_post_norm; /* (D) each with post_norms, else NULL */
    ffn_layer_params mlp;      /* dense / gated block */
    ffn_moe_params moe;        /* MoE block (experts points into model->experts_*) */
} block_tensors;

/* Where one block's activations live (rows 0..N-1 used of max N). */
typedef struct block_acts {
    float *res;    /* (N, D) the block's input */
    float *rstd1;  /* (N) */
    float *xn1;    /* (N, D) */
    float *qkv;    /* (N, C) after RoPE */
    float *qk_pre; /* (N, H·Dh + G·Dh) q|k before their norm, training with qk_norm only */
    float *qk_rstd; /* (N, H + G) training with qk_norm only */
    float *probs;  /* (B, H, T, T) training only */
    float *att;    /* (N, H·Dh) */
    float *mid;    /* (N, D) x + attention */
    float *rstd2;  /* (N) */
    float *xn2;    /* (N, D) */
    void *saved;   /* what the FFN / MoE layer saves, training only */
} block_acts;

struct ffn_model {
    ffn_ctx *ctx;
    ffn_model_config cfg;
    ffn_model_reducer reducer;      /* tensor parallel: sums partial results (or .sum NULL) */
    ffn_grad_ready_fn grad_ready;   /* the backward's ready points (or NULL) */
    void *grad_ready_user;
    int64_t D, H, G, Dh, C, V, L, F;
    int64_t R;                      /* rotary dim (<= Dh) */
    int64_t max_batch, max_seq, max_n;
    int training;
    ffn_save_mode save; /* of the FFN / MoE layers */
    /* the tensor table and the flat blocks */
    ffn_model_tensor *tensors;
    const ffn_model_tensor **by_name; /* (n_tensors) sorted by name: ffn_model_find_tensor */
    int64_t n_tensors, cap_tensors;
    float *params, *grads; /* (n_params) each */
    int64_t n_params;
    block_tensors *bp, *bg; /* (L) params, grads */
    ffn_layer_params *experts_p, *experts_g; /* (L, E) */
    float *embed, *final_norm, *head; /* params */
    float *g_embed, *g_final_norm, *g_head;
    float *embed_pos, *g_embed_pos;   /* (max_position_embeddings, D) learned positions, or NULL */
    float *final_norm_b, *g_final_norm_b; /* (D) norm LAYER, or NULL */
    ffn_layer **mlp; /* (L), NULL where none or MoE */
    ffn_moe **moe;   /* (L), NULL where not MoE */
    int64_t s0, s1;                 /* training: the layers carved and packed ([0, L): all) */
    /* activations, one block */
    void *acts;
    size_t acts_bytes;
    block_acts *ba;                 /* (L) training; else every entry the same */
    float *res_final, *rstdf, *xnf; /* (N, D), (N), (N, D) */
    float *logits;                  /* (head_rows, V) */
    int64_t head_rows;
    double *row_loss;               /* (N) */
    float *d_res, *d_xn, *d_qkv, *d_att, *tmp; /* (N, D) (N, D) (N, C) (N, H·Dh) (N, D) */
    float *scratch;                 /* attention, per thread (see attention.c) */
    void *ws;                       /* the FFN / MoE layers' workspace */
    size_t ws_bytes;
    float *rope_cos, *rope_sin;     /* (max_seq, R/2) */
    float *rope_cos_l, *rope_sin_l; /* (max_seq, R/2) sliding layers' (rope_local_base_freq), or NULL */
    float *qk_w;                    /* (H·Dh + G·Dh) q/k norm weights plus norm_weight_offset */
    float *kcache, *vcache;         /* (L, max_seq, G·Dh) */
    int64_t pos;                    /* tokens in the KV cache */
    ffn_taps *taps;                 /* selections and patches (tap.c), or NULL */
    ffn_profile *prof;              /* the training step's profile, or NULL */
    model_qstate *q;                /* low-precision weights (model_qweights.c), or NULL */
    ffn_precision precision;        /* of every projection (FFN and MoE experts included) */
    model_bf16 *b16;                /* FFN_PRECISION_BF16: the projections (bf16_model.c) */
};

/* The projections' products: ffn_gemm / model_proj at fp32, bf16 products
 * (bf16_model.c) at FFN_PRECISION_BF16 (alpha is always 1 here). */
static ffn_status mgemm(const ffn_model *m, const ffn_ctx *ctx, int transa, int transb, int64_t M,
                        int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                        const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (m->b16)
        return model_bf16_gemm(m->b16, ctx, transa, transb, M, N, K, A, lda, B, ldb, beta, C, ldc);
    return ffn_gemm(ctx, transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
static ffn_status mproj(const ffn_model *m, const ffn_ctx *ctx, const float *w, int64_t rows,
                        int64_t cols, const float *x, int64_t ldx, int64_t n, float *y,
                        int64_t ldy) {
    if (m->b16 && !model_q_first(m->q))
        return model_bf16_gemm(m->b16, ctx, 0, 1, n, rows, cols, x, ldx, w, cols, 0.0f, y, ldy);
    return model_proj(ctx, m->q, m->params, w, rows, cols, x, ldx, n, y, ldy);
}
/* mproj, then the bias b (rows) added to each of the n rows of y, when b. */
static ffn_status mproj_bias(const ffn_model *m, const ffn_ctx *ctx, const float *w,
                             const float *b, int64_t rows, int64_t cols, const float *x,
                             int64_t ldx, int64_t n, float *y, int64_t ldy) {
    ffn_status st = mproj(m, ctx, w, rows, cols, x, ldx, n, y, ldy);
    if (st || !b) return st;
    for (int64_t t = 0; t < n; t++)
        for (int64_t j = 0; j < rows; j++) y[t * ldy + j] += b[j];
    return FFN_OK;
}

/* ---- the tensor table ------------------------------------------------------ */

/* Appends one tensor; on the counting pass (m->params == NULL) only the
 * offset advances.  Returns pointers into params and grads via pp / pg. */
static ffn_status add_tensor(ffn_model *m, int64_t *off, float **pp, float **pg,
                             ffn_tensor_kind kind, int64_t layer, int64_t expert, int64_t rows,
                             int64_t cols, const char *fmt, ...)
    __attribute__((format(printf, 10, 11)));

static ffn_status add_tensor(ffn_model *m, int64_t *off, float **pp, float **pg,
                             ffn_tensor_kind kind, int64_t layer, int64_t expert, int64_t rows,
                             int64_t cols, const char *fmt, ...) {
    int64_t numel = rows * cols;
    if (m->params) {
        ffn_model_tensor *grown =
            ffn_grow(m->tensors, m->n_tensors, &m->cap_tensors, sizeof *grown, 64);
        if (!grown) return ffn_error(FFN_ERR_NOMEM, "ffn_model_create: out of memory (table)");
        m->tensors = grown;
        char buf[160];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
        char *name = strdup(buf);
        if (!name) return ffn_error(FFN_ERR_NOMEM, "ffn_model_create: out of memory (names)");
        ffn_model_tensor *t = &m->tensors[m->n_tensors++];
        t->name = name;
        t->ndim = cols == 1 ? 1 : 2;
        t->shape[0] = rows;
        t->shape[1] = cols;
        t->numel = numel;
        t->offset = *off;
        t->kind = kind;
        t->layer = layer;
        t->expert = expert;
        if (pp) *pp = m->params + *off;
        if (pg) *pg = m->grads ? m->grads + *off : NULL;
    }
    *off += numel;
    return FFN_OK;
}

#define ADD(pp, pg, kind, layer, expert, rows, cols, ...)                                     \
    do {                                                                                    \
        ffn_status st_ = add_tensor(m, &off, pp, pg, kind, layer, expert, rows, cols,       \
                                    __VA_ARGS__);                                           \
        if (st_) return st_;                                                                \
    } while (0)

/* One FFN's tensors (gate/up/down, weights then biases) under `prefix`. */
static ffn_status add_ffn(ffn_model *m, int64_t *offp, ffn_layer_params *p, ffn_layer_params *g,
                          int gated, int bias, int64_t F, int64_t layer, int64_t expert,
                          const char *prefix) {
    int64_t off = *offp, D = m->D;
    ffn_layer_params dummy_p, dummy_g;
    if (!p) p = &dummy_p;
    if (!g) g = &dummy_g;
    if (gated) ADD(&p->gate_w, &g->gate_w, FFN_TENSOR_MLP_WEIGHT, layer, expert, F, D,
                   "%s.gate_proj.weight", prefix);
    ADD(&p->up_w, &g->up_w, FFN_TENSOR_MLP_WEIGHT, layer, expert, F, D, "%s.up_proj.weight",
        prefix);
    ADD(&p->down_w, &g->down_w, FFN_TENSOR_MLP_WEIGHT, layer, expert, D, F,
        "%s.down_proj.weight", prefix);
    if (bias) {
        if (gated) ADD(&p->gate_b, &g->gate_b, FFN_TENSOR_MLP_BIAS, layer, expert, F, 1,
                       "%s.gate_proj.bias", prefix);
        ADD(&p->up_b, &g->up_b, FFN_TENSOR_MLP_BIAS, layer, expert, F, 1, "%s.up_proj.bias",
            prefix);
        ADD(&p->down_b, &g->down_b, FFN_TENSOR_MLP_BIAS, layer, expert, D, 1,
            "%s.down_proj.bias", prefix);
    }
    *offp = off;
    return FFN_OK;
}

/* The routed experts of layer l: their weights (bias 0) or biases (bias 1),
 * one kind at a time over all experts, so that each kind is one (E, Fe, D)
 * array.  ep/eg are the experts' parameter and gradient pointers (NULL
 * while counting). */
static ffn_status add_experts(ffn_model *m, int64_t *offp, ffn_layer_params *ep,
                              ffn_layer_params *eg, int gated, int bias, int64_t layer,
                              const char *prefix) {
    static const char *const kind_name[3] = {"gate_proj", "up_proj", "down_proj"};
    static const size_t field[2][3] = {
        {offsetof(ffn_layer_params, gate_w), offsetof(ffn_layer_params, up_w),
         offsetof(ffn_layer_params, down_w)},
        {offsetof(ffn_layer_params, gate_b), offsetof(ffn_layer_params, up_b),
         offsetof(ffn_layer_params, down_b)}};
    const int64_t D = m->D, E = m->cfg.num_experts, Fe = moe_width(&m->cfg);
    int64_t off = *offp;
    for (int kind = gated ? 0 : 1; kind < 3; kind++) {
        const int64_t rows = kind == 2 ? D : Fe, cols = bias ? 1 : kind == 2 ? Fe : D;
        for (int64_t e = 0; e < E; e++) {
            float **pp = ep ? (float **)((char *)&ep[e] + field[bias][kind]) : NULL;
            float **pg = eg ? (float **)((char *)&eg[e] + field[bias][kind]) : NULL;
            ADD(pp, pg, bias ? FFN_TENSOR_MLP_BIAS : FFN_TENSOR_MLP_WEIGHT, layer, e, rows, cols,
                "%s.mlp.experts.%lld.%s.%s", prefix, (long long)e, kind_name[kind],
                bias ? "bias" : "weight");
        }
    }
    *offp = off;
    return FFN_OK;
}

/* Build the table (or, with m->params NULL, just count the floats). */
static ffn_status build_table(ffn_model *m, int64_t *total) {
    const ffn_model_config *c = &m->cfg;
    const int64_t D = m->D, V = m->V, HD = m->H * m->Dh, GD = m->G * m->Dh;
    const int gated = c->mlp_type == FFN_MODEL_MLP_GATED;
    int64_t off = 0;
    m->n_tensors = 0;
    ADD(&m->embed, &m->g_embed, FFN_TENSOR_EMBEDDING, -1, -1, V, D, "model.embed_tokens.weight");
    const int layer_norm = c->norm_type == FFN_NORM_LAYER;
    if (c->learned_positions)
        ADD(&m->embed_pos, &m->g_embed_pos, FFN_TENSOR_EMBEDDING, -1, -1, c->max_position_embeddings,
            D, "model.embed_positions.weight");
    for (int64_t l = 0; l < m->L; l++) {
        block_tensors *p = &m->bp[l], *g = &m->bg[l];
        memset(p, 0, sizeof *p);
        memset(g, 0, sizeof *g);
        char pre[96];
        snprintf(pre, sizeof pre, "model.layers.%lld", (long long)l);
        ADD(&p->attn_norm, &g->attn_norm, FFN_TENSOR_NORM, l, -1, D, 1,
            "%s.input_layernorm.weight", pre);
        if (layer_norm)
            ADD(&p->attn_norm_b, &g->attn_norm_b, FFN_TENSOR_NORM, l, -1, D, 1,
                "%s.input_layernorm.bias", pre);
        /* q, k, v adjacent: one (C, D) matrix */
        ADD(&p->wqkv, &g->wqkv, FFN_TENSOR_ATTN_WEIGHT, l, -1, HD, D,
            "%s.self_attn.q_proj.weight", pre);
        ADD(NULL, NULL, FFN_TENSOR_ATTN_WEIGHT, l, -1, GD, D, "%s.self_attn.k_proj.weight", pre);
        ADD(NULL, NULL, FFN_TENSOR_ATTN_WEIGHT, l, -1, GD, D, "%s.self_attn.v_proj.weight", pre);
        if (c->attention_bias) {
            ADD(&p->bqkv, &g->bqkv, FFN_TENSOR_ATTN_BIAS, l, -1, HD, 1, "%s.self_attn.q_proj.bias",
                pre);
            ADD(NULL, NULL, FFN_TENSOR_ATTN_BIAS, l, -1, GD, 1, "%s.self_attn.k_proj.bias", pre);
            ADD(NULL, NULL, FFN_TENSOR_ATTN_BIAS, l, -1, GD, 1, "%s.self_attn.v_proj.bias", pre);
        }
        if (c->qk_norm != FFN_QK_NORM_NONE) {
            const int head = c->qk_norm == FFN_QK_NORM_HEAD;
            ADD(&p->q_norm, &g->q_norm, FFN_TENSOR_NORM, l, -1, head ? m->Dh : HD, 1,
                "%s.self_attn.q_norm.weight", pre);
            ADD(&p->k_norm, &g->k_norm, FFN_TENSOR_NORM, l, -1, head ? m->Dh : GD, 1,
                "%s.self_attn.k_norm.weight", pre);
        }
        ADD(&p->wo, &g->wo, FFN_TENSOR_ATTN_WEIGHT, l, -1, D, HD, "%s.self_attn.o_proj.weight",
            pre);
        if (c->attention_out_bias)
            ADD(&p->bo, &g->bo, FFN_TENSOR_ATTN_BIAS, l, -1, D, 1, "%s.self_attn.o_proj.bias", pre);
        const int moe = ffn_model_config_layer_is_moe(c, l);
        if (!moe && c->mlp_type == FFN_MODEL_MLP_NONE) continue;
        if (c->post_norms) { /* Gemma 2/3: the attention output's norm, then the FFN's input's */
            ADD(&p->attn_post_norm, &g->attn_post_norm, FFN_TENSOR_NORM, l, -1, D, 1,
                "%s.post_attention_layernorm.weight", pre);
            ADD(&p->mlp_norm, &g->mlp_norm, FFN_TENSOR_NORM, l, -1, D, 1,
                "%s.pre_feedforward_layernorm.weight", pre);
            ADD(&p->mlp_post_norm, &g->mlp_post_norm, FFN_TENSOR_NORM, l, -1, D, 1,
                "%s.post_feedforward_layernorm.weight", pre);
        } else
        ADD(&p->mlp_norm, &g->mlp_norm, FFN_TENSOR_NORM, l, -1, D, 1,
            "%s.post_attention_layernorm.weight", pre);
        if (layer_norm)
            ADD(&p->mlp_norm_b, &g->mlp_norm_b, FFN_TENSOR_NORM, l, -1, D, 1,
                "%s.post_attention_layernorm.bias", pre);
        char sp[128];
        ffn_status st;
        if (!moe) {
            snprintf(sp, sizeof sp, "%s.mlp", pre);
            if ((st = add_ffn(m, &off, &p->mlp, &g->mlp, gated, c->mlp_bias, m->F, l, -1, sp)))
                return st;
            continue;
        }
        int64_t E = c->num_experts, Fs = c->shared_expert_intermediate_size;
        ADD(&p->moe.router_w, &g->moe.router_w, FFN_TENSOR_ROUTER, l, -1, E, D,
            "%s.mlp.gate.weight", pre);
        ffn_layer_params *ep = m->experts_p ? m->experts_p + l * E : NULL;
        ffn_layer_params *eg = m->experts_g ? m->experts_g + l * E : NULL;
        p->moe.experts = ep;
        g->moe.experts = m->grads ? eg : NULL;
        if ((st = add_experts(m, &off, ep, eg, gated, 0, l, pre)) ||
            (c->mlp_bias && (st = add_experts(m, &off, ep, eg, gated, 1, l, pre))))
            return st;
        if (Fs > 0) {
            snprintf(sp, sizeof sp, "%s.mlp.shared_expert", pre);
            if ((st = add_ffn(m, &off, &p->moe.shared, &g->moe.shared, gated, c->mlp_bias, Fs, l,
                              -1, sp)))
                return st;
            ADD(&p->moe.shared_gate_w, &g->moe.shared_gate_w, FFN_TENSOR_ROUTER, l, -1, 1, D,
                "%s.mlp.shared_expert_gate.weight", pre);
        }
    }
    ADD(&m->final_norm, &m->g_final_norm, FFN_TENSOR_NORM, -1, -1, D, 1, "model.norm.weight");
    if (layer_norm)
        ADD(&m->final_norm_b, &m->g_final_norm_b, FFN_TENSOR_NORM, -1, -1, D, 1, "model.norm.bias");
    if (c->tie_word_embeddings) {
        m->head = m->embed;
        m->g_head = m->g_embed;
    } else {
        ADD(&m->head, &m->g_head, FFN_TENSOR_HEAD, -1, -1, V, D, "lm_head.weight");
    }
    *total = off;
    return FFN_OK;
}
#undef ADD

/* The table sorted by name, so that a lookup is a binary search: a model
 * of 50,000 layers has 450,000 tensors, and loaders look every one up. */
static int by_tensor_name(const void *a, const void *b) {
    return strcmp((*(const ffn_model_tensor *const *)a)->name,
                  (*(const ffn_model_tensor *const *)b)->name);
}

static ffn_status index_names(ffn_model *m) {
    m->by_name = malloc((size_t)(m->n_tensors > 0 ? m->n_tensors : 1) * sizeof *m->by_name);
    if (!m->by_name) return ffn_error(FFN_ERR_NOMEM, "ffn_model_create: out of memory (names)");
    for (int64_t i = 0; i < m->n_tensors; i++) m->by_name[i] = &m->tensors[i];
    qsort(m->by_name, (size_t)m->n_tensors, sizeof *m->by_name, by_tensor_name);
    return FFN_OK;
}

/* ---- create / free ---------------------------------------------------------- */

void ffn_model_free(ffn_model *m) {
    if (!m) return;
    for (int64_t i = 0; i < m->n_tensors; i++) free((char *)m->tensors[i].name);
    free(m->tensors);
    free(m->by_name);
    if (m->mlp)
        for (int64_t l = 0; l < m->L; l++) ffn_layer_free(m->mlp[l]);
    if (m->moe)
        for (int64_t l = 0; l < m->L; l++) ffn_moe_free(m->moe[l]);
    FFN_FREE_ALL(m->mlp, m->moe, m->bp, m->bg, m->experts_p, m->experts_g, m->ba);
    model_params_free(m->params, (size_t)m->n_params * sizeof(float));
    model_q_free(m->q);
    model_bf16_free(m->b16);
    model_params_free(m->grads, (size_t)m->n_params * sizeof(float));
    ffn_free_aligned(m->acts);
    ffn_taps_free(m->taps);
    free(m);
}

/* A carving plan: regions of the activation block, each 64-byte aligned. */
typedef struct carve {
    char *base; /* the block, or NULL while only sizing it */
    size_t total;
    int overflow;
} carve;

/* The next `bytes` (64-byte aligned) of the block: a pointer into it, or
 * NULL while sizing. */
static void *carve_take(carve *cv, size_t bytes) {
    size_t at = cv->total;
    if (ffn_add_size(cv->total, ffn_align64(bytes), &cv->total)) cv->overflow = 1;
    return cv->base ? cv->base + at : NULL;
}

/* floats * count, overflow-checked into cv */
static size_t fl(carve *cv, int64_t a, int64_t b) {
    int64_t n;
    if (ffn_mul_i64(a, b, &n) || n < 0 || ffn_mul_i64(n, 4, &n)) {
        cv->overflow = 1;
        return 0;
    }
    return (size_t)n;
}


static ffn_status create_layers(ffn_model *m) {
    const ffn_model_config *c = &m->cfg;
    m->mlp = calloc((size_t)m->L, sizeof *m->mlp);
    m->moe = calloc((size_t)m->L, sizeof *m->moe);
    if (!m->mlp || !m->moe) return ffn_error(FFN_ERR_NOMEM, "ffn_model_create: out of memory");
    ffn_mlp_type type = c->mlp_type == FFN_MODEL_MLP_GATED ? FFN_MLP_GATED : FFN_MLP_DENSE;
    for (int64_t l = 0; l < m->L; l++) {
        ffn_status st;
        if (ffn_model_config_layer_is_moe(c, l)) {
            ffn_moe_config mc;
            memset(&mc, 0, sizeof mc);
            mc.hidden_size = m->D;
            mc.num_experts = c->num_experts;
            mc.num_experts_per_tok = c->num_experts_per_tok;
            mc.moe_intermediate_size = moe_width(c);
            mc.act = c->hidden_act;
            mc.expert_type = type;
            mc.bias = c->mlp_bias;
            mc.norm_topk_prob = c->norm_topk_prob;
            mc.scoring = FFN_MOE_SCORING_SOFTMAX;
            mc.routed_scaling_factor = 1.0;
            mc.shared_expert_intermediate_size = c->shared_expert_intermediate_size;
            mc.router_aux_loss_coef = c->router_aux_loss_coef;
            mc.router_z_loss_coef = c->router_z_loss_coef;
            mc.save = m->save;
            mc.precision = m->precision;
            st = ffn_moe_create(m->ctx, &mc, &m->moe[l]);
        } else if (c->mlp_type != FFN_MODEL_MLP_NONE) {
            ffn_layer_config lc = {.hidden_size = m->D, .intermediate_size = m->F,
                                   .act = c->hidden_act, .type = type, .bias = c->mlp_bias,
                                   .save = m->save, .precision = m->precision};
            st = ffn_layer_create(m->ctx, &lc, &m->mlp[l]);
        } else {
            continue;
        }
        if (st) return ffn_error_prefix(st, "model.layers.%lld.mlp", (long long)l);
    }
    return FFN_OK;
}

/* The activation block's layout, stated once: run with cv->base NULL to
 * size the block, then with the block to point every buffer into it.
 * Training gives every layer its own activations; inference shares the
 * first layer's. */
static void carve_acts(ffn_model *m, carve *cv, size_t saved_max) {
    const int64_t N = m->max_n, D = m->D, C = m->C, HD = m->H * m->Dh, GD = m->G * m->Dh;
    const int64_t L = m->L, l0 = m->training ? m->s0 : 0, l1 = m->training ? m->s1 : 1;
    for (int64_t l = l0; l < l1; l++) {
        block_acts *a = &m->ba[l];
        a->res = carve_take(cv, fl(cv, N, D));
        a->rstd1 = carve_take(cv, fl(cv, N, 1));
        a->xn1 = carve_take(cv, fl(cv, N, D));
        a->qkv = carve_take(cv, fl(cv, N, C));
        const int qkn = m->training && m->cfg.qk_norm != FFN_QK_NORM_NONE;
        a->qk_pre = qkn ? carve_take(cv, fl(cv, N, HD + GD)) : NULL;
        a->qk_rstd = qkn ? carve_take(cv, fl(cv, N, m->H + m->G)) : NULL;
        a->probs = m->training ? carve_take(cv, fl(cv, N * m->H, m->max_seq)) : NULL;
        a->att = carve_take(cv, fl(cv, N, HD));
        a->mid = carve_take(cv, fl(cv, N, D));
        a->rstd2 = carve_take(cv, fl(cv, N, 1));
        a->xn2 = carve_take(cv, fl(cv, N, D));
        a->saved = m->training ? carve_take(cv, saved_max) : NULL;
    }
    /* inference shares the first layer's; a stage's other layers are
     * never run in training (forward_range refuses them) */
    for (int64_t l = 0; l < L; l++)
        if (l < l0 || l >= l1) m->ba[l] = m->ba[l0];
    m->res_final = carve_take(cv, fl(cv, N, D));
    m->rstdf = carve_take(cv, fl(cv, N, 1));
    m->xnf = carve_take(cv, fl(cv, N, D));
    m->logits = carve_take(cv, fl(cv, m->head_rows, m->V));
    m->row_loss = carve_take(cv, fl(cv, N, 2));
    m->d_res = carve_take(cv, fl(cv, N, D));
    m->d_xn = carve_take(cv, fl(cv, N, D));
    m->d_qkv = m->training ? carve_take(cv, fl(cv, N, C)) : NULL;
    m->d_att = m->training ? carve_take(cv, fl(cv, N, HD)) : NULL;
    m->tmp = carve_take(cv, fl(cv, N, D));
    int threads = ffn_ctx_threads(m->ctx);
    size_t att_scratch = ffn_attention_scratch_floats(threads, m->max_seq, m->Dh, 0);
    if (m->training) { /* training runs both directions in it */
        const size_t bwd = ffn_attention_scratch_floats(threads, m->max_seq, m->Dh, 1);
        att_scratch = bwd > att_scratch ? bwd : att_scratch;
    }
    m->scratch = carve_take(cv, fl(cv, (int64_t)att_scratch, 1));
    m->ws = carve_take(cv, m->ws_bytes);
    int64_t half = m->R / 2;
    m->rope_cos = carve_take(cv, fl(cv, m->max_seq, half));
    m->rope_sin = carve_take(cv, fl(cv, m->max_seq, half));
    const int local = m->cfg.rope_local_base_freq > 0 && m->R > 0;
    m->rope_cos_l = local ? carve_take(cv, fl(cv, m->max_seq, half)) : NULL;
    m->rope_sin_l = local ? carve_take(cv, fl(cv, m->max_seq, half)) : NULL;
    m->qk_w = m->cfg.qk_norm != FFN_QK_NORM_NONE && m->cfg.norm_weight_offset != 0.0
                  ? carve_take(cv, fl(cv, HD + GD, 1)) : NULL;
    m->kcache = carve_take(cv, fl(cv, L * m->max_seq, GD));
    m->vcache = carve_take(cv, fl(cv, L * m->max_seq, GD));
}

static ffn_status alloc_acts(ffn_model *m) {
    const int64_t N = m->max_n, L = m->L;
    m->head_rows = N;
    int64_t cap = ((int64_t)1 << 20) / m->V; /* logits chunk: about 4 MiB */
    if (cap < 64) cap = 64;
    if (m->head_rows > cap) m->head_rows = cap;
    size_t ws = 0, saved_max = 0;
    for (int64_t l = 0; l < L; l++) {
        size_t w = 0, s = 0;
        if (m->mlp[l]) {
            w = ffn_layer_workspace_size(m->mlp[l], N);
            s = ffn_layer_saved_size(m->mlp[l], N);
        } else if (m->moe[l]) {
            w = ffn_moe_workspace_size(m->moe[l], N);
            s = ffn_moe_saved_size(m->moe[l], N);
        }
        if (w > ws) ws = w;
        if (s > saved_max) saved_max = s;
    }
    m->ws_bytes = ws;
    m->ba = calloc((size_t)L, sizeof *m->ba);
    if (!m->ba) return ffn_error(FFN_ERR_NOMEM, "ffn_model_create: out of memory");
    carve cv = {NULL, 0, 0};
    carve_acts(m, &cv, saved_max);
    if (cv.overflow)
        return ffn_error(FFN_ERR_OVERFLOW, "ffn_model_create: activation sizes overflow "
                         "(max_batch %lld, max_seq %lld)", (long long)m->max_batch,
                         (long long)m->max_seq);
    m->acts_bytes = cv.total;
    m->acts = ffn_malloc_aligned(cv.total ? cv.total : 64);
    if (!m->acts)
        return ffn_error(FFN_ERR_NOMEM, "ffn_model_create: out of memory (%zu bytes of "
                         "activations for max_batch %lld, max_seq %lld)", cv.total,
                         (long long)m->max_batch, (long long)m->max_seq);
    memset(m->acts, 0, cv.total);
    cv = (carve){m->acts, 0, 0};
    carve_acts(m, &cv, saved_max);
    if (m->R > 0) ffn_rope_fill(&m->cfg, m->max_seq, 0, m->max_seq, m->rope_cos, m->rope_sin);
    if (m->rope_cos_l) { /* Gemma 3's sliding layers: their own base, no scaling */
        ffn_model_config lc = m->cfg;
        lc.rope_theta = m->cfg.rope_local_base_freq;
        memset(&lc.rope_scaling, 0, sizeof lc.rope_scaling);
        ffn_rope_fill(&lc, m->max_seq, 0, m->max_seq, m->rope_cos_l, m->rope_sin_l);
    }
    return FFN_OK;
}

ffn_status ffn_model_create(ffn_ctx *ctx, const ffn_model_config *cfg,
                            const ffn_model_options *opt, ffn_model **out) {
    if (!ctx || !cfg || !out)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_model_create: ctx, cfg and out must not be NULL");
    *out = NULL;
    ffn_status st = ffn_model_config_validate(cfg);
    if (st) return st;
    ffn_model_options o = {.max_batch = 1, .max_seq = cfg->max_position_embeddings};
    if (opt) {
        o = *opt;
        if (o.max_batch == 0) o.max_batch = 1;
        if (o.max_seq == 0) o.max_seq = cfg->max_position_embeddings;
    }
    if (o.max_batch < 1 || o.max_batch > ((int64_t)1 << 24))
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_model_create: max_batch: expected 1..%lld, "
                         "got %lld", (long long)1 << 24, (long long)o.max_batch);
    if (o.max_seq < 1 || o.max_seq > cfg->max_position_embeddings)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_model_create: max_seq: expected "
                         "1..max_position_embeddings (%lld), got %lld",
                         (long long)cfg->max_position_embeddings, (long long)o.max_seq);
    if (o.training && gemma2_features(cfg))
        return ffn_error(FFN_ERR_UNSUPPORTED, "ffn_model_create: training a model with Gemma 2/3's "
                         "soft-capping, sliding window, query scalar, local RoPE base, offset q/k "
                         "norms or output norms is not supported (they run for inference only)");
    ffn_model *m = calloc(1, sizeof *m);
    if (!m) return ffn_error(FFN_ERR_NOMEM, "ffn_model_create: out of memory");
    m->ctx = ctx;
    m->cfg = *cfg;
    m->D = cfg->hidden_size;
    m->H = cfg->num_attention_heads;
    m->G = cfg->num_key_value_heads;
    m->Dh = ffn_cfg_head_dim(cfg);
    m->R = cfg->learned_positions ? 0 : ffn_cfg_rotary_dim(cfg);
    m->C = (m->H + 2 * m->G) * m->Dh;
    m->V = cfg->vocab_size;
    m->L = cfg->num_hidden_layers;
    m->F = cfg->intermediate_size;
    m->max_batch = o.max_batch;
    m->max_seq = o.max_seq;
    m->training = o.training != 0;
    m->save = FFN_SAVE_ACTIVATIONS;
    m->precision = o.precision;
    m->s0 = 0, m->s1 = m->L;
    if (o.layer_begin != 0 || o.layer_end != 0) {
        if (!o.training || o.layer_begin < 0 || o.layer_end <= o.layer_begin ||
            o.layer_end > m->L) {
            free(m);
            return ffn_error(FFN_ERR_INVALID_ARG, "ffn_model_create: layers [%lld, %lld): expected "
                             "a range of the %lld layers, for training", (long long)o.layer_begin,
                             (long long)o.layer_end, (long long)cfg->num_hidden_layers);
        }
        m->s0 = o.layer_begin, m->s1 = o.layer_end;
    }
    if (ffn_mul_i64(o.max_batch, o.max_seq, &m->max_n)) {
        free(m);
        return ffn_error(FFN_ERR_OVERFLOW, "ffn_model_create: max_batch · max_seq overflows");
    }
    m->bp = calloc((size_t)m->L, sizeof *m->bp);
    m->bg = calloc((size_t)m->L, sizeof *m->bg);
    if (!m->bp || !m->bg) {
        ffn_model_free(m);
        return ffn_error(FFN_ERR_NOMEM, "ffn_model_create: out of memory");
    }
    if (cfg->num_experts > 0) {
        m->experts_p = calloc((size_t)(m->L * cfg->num_experts), sizeof *m->experts_p);
        m->experts_g = calloc((size_t)(m->L * cfg->num_experts), sizeof *m->experts_g);
        if (!m->experts_p || !m->experts_g) {
            ffn_model_free(m);
            return ffn_error(FFN_ERR_NOMEM, "ffn_model_create: out of memory");
        }
    }
    int64_t total = 0;
    if ((int)o.precision < FFN_PRECISION_FP32 || (int)o.precision > FFN_PRECISION_BF16) {
        st = ffn_error(FFN_ERR_INVALID_ARG, "ffn_model_create: precision: invalid enum value %d",
                       (int)o.precision);
        goto fail;
    }
    if (o.precision == FFN_PRECISION_BF16 && (st = model_bf16_create(&m->b16))) goto fail;
    if ((st = build_table(m, &total))) goto fail; /* counting pass */
    size_t bytes;
    if (ffn_mul_size((size_t)total, sizeof(float), &bytes)) {
        st = ffn_error(FFN_ERR_OVERFLOW, "ffn_model_create: parameter bytes overflow");
        goto fail;
    }
    m->n_params = total;
    m->params = model_params_alloc(bytes); /* zero, untouched */
    if (m->training) m->grads = model_params_alloc(bytes); /* zero, untouched */
    if (!m->params || (m->training && !m->grads)) {
        st = ffn_error(FFN_ERR_NOMEM, "ffn_model_create: out of memory (%zu bytes of parameters)",
                       bytes);
        goto fail;
    }
    if ((st = build_table(m, &total))) goto fail;
    if ((st = index_names(m))) goto fail;
    if ((st = create_layers(m))) goto fail;
    if ((st = alloc_acts(m))) goto fail;
    *out = m;
    return FFN_OK;
fail:
    ffn_model_free(m);
    return st;
}

const ffn_model_config *ffn_model_get_config(const ffn_model *m) { return m ? &m->cfg : NULL; }

int64_t ffn_model_num_params(const ffn_model *m) { return m ? m->n_params : 0; }

int64_t ffn_model_active_params(const ffn_model *m) {
    int64_t active = 0;
    if (!m || ffn_model_config_count_params(&m->cfg, NULL, &active)) return 0;
    return active;
}

size_t ffn_model_activation_bytes(const ffn_model *m) { return m ? m->acts_bytes : 0; }

int64_t ffn_model_num_tensors(const ffn_model *m) { return m ? m->n_tensors : 0; }

const ffn_model_tensor *ffn_model_tensor_at(const ffn_model *m, int64_t i) {
    if (!m || i < 0 || i >= m->n_tensors) return NULL;
    return &m->tensors[i];
}

const ffn_model_tensor *ffn_model_find_tensor(const ffn_model *m, const char *name) {
    if (!m || !name || !m->by_name) return NULL;
    const ffn_model_tensor key = {.name = name}, *kp = &key;
    const ffn_model_tensor *const *hit =
        bsearch(&kp, m->by_name, (size_t)m->n_tensors, sizeof *m->by_name, by_tensor_name);
    return hit ? *hit : NULL;
}

float *ffn_model_params(ffn_model *m, int64_t *n) {
    if (n) *n = m ? m->n_params : 0;
    return m ? m->params : NULL;
}

float *ffn_model_grads(ffn_model *m, int64_t *n) {
    if (n) *n = m && m->grads ? m->n_params : 0;
    return m ? m->grads : NULL;
}

void ffn_model_zero_grads(ffn_model *m) {
    if (m && m->grads) memset(m->grads, 0, (size_t)m->n_params * sizeof(float));
}

/* ---- weights ------------------------------------------------------------------ */

ffn_status ffn_model_set_reducer(ffn_model *m, const ffn_model_reducer *r) {
    if (!m) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_model_set_reducer: model is NULL");
    m->reducer = r ? *r : (ffn_model_reducer){0};
    return FFN_OK;
}

ffn_status ffn_model_set_grad_ready(ffn_model *m, ffn_grad_ready_fn fn, void *user) {
    if (!m) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_model_set_grad_ready: model is NULL");
    m->grad_ready = fn;
    m->grad_ready_user = fn ? user : NULL;
    return FFN_OK;
}

ffn_status ffn_model_set_moe_runner(ffn_model *m, int64_t layer, const ffn_moe_runner *r) {
    if (!m || layer < 0 || layer >= m->L || !m->moe[layer])
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_model_set_moe_runner: layer %lld is not a MoE "
                         "layer of this model", (long long)layer);
    ffn_status st = ffn_moe_set_runner(m->moe[layer], r);
    return st ? st : ffn_model_params_changed(m);
}

ffn_status ffn_model_set_profile(ffn_model *m, ffn_profile *profile) {
    if (!m) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_model_set_profile: NULL model");
    m->prof = profile;
    return FFN_OK;
}

/* The weights of the matrix products one row (token) goes through in
 * forward: projections, FFN or the routed experts' share, head. */
static double product_weights_per_row(const ffn_model *m) {
    const ffn_model_config *c = &m->cfg;
    const int gated = c->mlp_type == FFN_MODEL_MLP_GATED;
    double w = (double)m->V * (double)m->D;
    for (int64_t l = 0; l < m->L; l++) {
        w += (double)m->C * (double)m->D + (double)m->D * (double)(m->H * m->Dh);
        if (m->moe[l]) {
            const double Fe = (double)moe_width(c), Fs = (double)c->shared_expert_intermediate_size;
            w += (double)c->num_experts * (double)m->D +
                 (double)c->num_experts_per_tok * (gated ? 3 : 2) * Fe * (double)m->D;
            if (Fs > 0) w += (gated ? 3 : 2) * Fs * (double)m->D + (double)m->D;
        } else if (m->mlp[l]) {
            w += (gated ? 3 : 2) * (double)m->F * (double)m->D;
        }
    }
    return w;
}

ffn_status ffn_model_params_changed(ffn_model *m) {
    if (!m) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_model_params_changed: model is NULL");
    for (int64_t l = m->s0; l < m->s1; l++) { /* a stage's layers only */
        ffn_status st = FFN_OK;
        if (m->mlp[l]) st = model_q_set_ffn(m->q, m->mlp[l], m->params, &m->bp[l].mlp);
        else if (m->moe[l])
            st = model_q_set_moe(m->q, m->moe[l], m->params, &m->bp[l].moe, m->cfg.num_experts);
        if (st) return ffn_error_prefix(st, "model.layers.%lld.mlp", (long long)l);
    }
    if (m->b16) { /* the bf16 copies of the projections model.c multiplies by */
        ffn_status st = model_bf16_begin(m->b16, m->params, m->n_params);
        for (int64_t l = m->s0; l < m->s1 && !st; l++)
            if (!(st = model_bf16_refresh(m->b16, m->ctx, m->bp[l].wqkv, m->C * m->D)))
                st = model_bf16_refresh(m->b16, m->ctx, m->bp[l].wo, m->D * m->H * m->Dh);
        if (!st) st = model_bf16_refresh(m->b16, m->ctx, m->head, m->V * m->D);
        if (st) return st;
    }
    model_q_synced(m->q);
    m->pos = 0;
    return FFN_OK;
}


static double uniform01(uint64_t *s) { /* (0, 1] */
    return ((double)(ffn_splitmix64(s) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}

static int is_residual_out(const ffn_model_tensor *t) {
    size_t n = strlen(t->name);
    const char *a = "o_proj.weight", *b = "down_proj.weight";
    return (n >= strlen(a) && !strcmp(t->name + n - strlen(a), a)) ||
           (n >= strlen(b) && !strcmp(t->name + n - strlen(b), b));
}

ffn_status ffn_model_init_weights(ffn_model *m, uint64_t seed) {
    if (!m) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_model_init_weights: model is NULL");
    return ffn_model_init_tensors(m, seed, NULL);
}

ffn_status ffn_model_init_tensors(ffn_model *m, uint64_t seed, const unsigned char *which) {
    if (!m) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_model_init_tensors: model is NULL");
    model_q_free(m->q); /* every tensor fp32 again */
    m->q = NULL;
    const double std = 0.02, std_res = 0.02 / sqrt(2.0 * (double)m->L);
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const ffn_model_tensor *t = &m->tensors[i];
        if (which && !which[i]) continue;
        float *w = m->params + t->offset;
        if (t->kind == FFN_TENSOR_NORM) { /* effective weight 1, LayerNorm biases 0 */
            const int blk = !strstr(t->name, "q_norm") && !strstr(t->name, "k_norm");
            const size_t nl = strlen(t->name);
            const int bias = nl > 5 && !strcmp(t->name + nl - 5, ".bias");
            const float one = bias ? 0.0f : 1.0f - (blk ? (float)m->cfg.norm_weight_offset : 0.0f);
            for (int64_t j = 0; j < t->numel; j++) w[j] = one;
            continue;
        }
        if (t->kind == FFN_TENSOR_ATTN_BIAS || t->kind == FFN_TENSOR_MLP_BIAS) {
            memset(w, 0, (size_t)t->numel * sizeof *w);
            continue;
        }
        double sd = is_residual_out(t) ? std_res : std;
        uint64_t s = seed ^ (0xD1B54A32D192ED03ull * (uint64_t)(i + 1));
        ffn_splitmix64(&s);
        for (int64_t j = 0; j < t->numel; j += 2) { /* Box-Muller, two at a time */
            double r = sqrt(-2.0 * log(uniform01(&s))), a = 6.283185307179586 * uniform01(&s);
            w[j] = (float)(sd * r * cos(a));
            if (j + 1 < t->numel) w[j + 1] = (float)(sd * r * sin(a));
        }
    }
    return ffn_model_params_changed(m);
}

/* ---- forward ------------------------------------------------------------------- */

/* The step profile (include/ffn/profile.h): charge the time since the last
 * mark to a part (PROF_PRODUCT: a part that is a matrix product).  `pf` is
 * the function's profile, NULL when off. */
#define PROF(part) \
    do { if (pf) ffn_profile_charge(pf, part); } while (0)
#define PROF_PRODUCT(part) \
    do { if (pf) pf->product_seconds += ffn_profile_charge(pf, part); } while (0)

enum { MODE_TRAIN, MODE_EVAL, MODE_CACHE };

static ffn_status check_tokens(const ffn_model *m, const int32_t *tokens, const int32_t *targets,
                               int64_t n, const char *fn) {
    for (int64_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= m->V)
            return ffn_error(FFN_ERR_INVALID_ARG, "%s: tokens[%lld] = %d is outside the vocabulary "
                             "[0, %lld)", fn, (long long)i, tokens[i], (long long)m->V);
        if (targets && targets[i] != FFN_IGNORE_INDEX && (targets[i] < 0 || targets[i] >= m->V))
            return ffn_error(FFN_ERR_INVALID_ARG, "%s: targets[%lld] = %d is outside the "
                             "vocabulary [0, %lld) and not the ignore index -1", fn, (long long)i,
                             targets[i], (long long)m->V);
    }
    return FFN_OK;
}

static ffn_status check_shape(const ffn_model *m, int64_t B, int64_t T, const char *fn) {
    if (B < 1 || T < 1 || T > m->max_seq || B * T > m->max_n)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: B = %lld, T = %lld: expected 1 <= T <= max_seq "
                         "(%lld) and B·T <= max_batch·max_seq (%lld)", fn, (long long)B,
                         (long long)T, (long long)m->max_seq, (long long)m->max_n);
    return FFN_OK;
}

static void add_rows(float *y, const float *a, const float *b, int64_t n) {
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

/* The model's norm: RMSNorm (weight offset + w) or LayerNorm with bias b. */
static void norm_forward(const ffn_model *m, float *y, float *rstd, const float *x, const float *w,
                         const float *b, int64_t N) {
    const float eps = (float)m->cfg.rms_norm_eps;
    if (m->cfg.norm_type == FFN_NORM_LAYER)
        ffn_layernorm_forward(y, rstd, x, w, b, N, m->D, eps);
    else
        ffn_rmsnorm_forward_offset(y, rstd, x, w, (float)m->cfg.norm_weight_offset, N, m->D, eps);
}

static void norm_backward(const ffn_model *m, float *dx, float *dw, float *db, const float *dy,
                          const float *x, const float *w, const float *rstd, int64_t N) {
    if (m->cfg.norm_type == FFN_NORM_LAYER)
        ffn_layernorm_backward_accumulate(dx, dw, db, dy, x, w, rstd, N, m->D);
    else
        ffn_rmsnorm_backward_offset(dx, dw, dy, x, w, (float)m->cfg.norm_weight_offset, rstd, N,
                                    m->D);
}

/* The blocks: tokens (B, T) at positions pos0.. -> the residual stream after
 * the last block, returned in *x_out.  Sums the MoE losses into aux, z. */
static ffn_status forward_range(ffn_model *m, const int32_t *tokens, int64_t B, int64_t T,
                                int mode, int64_t l0, int64_t l1, const float *x_in,
                                float **x_out, double *aux, double *z);
static ffn_status forward_blocks(ffn_model *m, const int32_t *tokens, int64_t B, int64_t T,
                                 int mode, float **x_out, double *aux, double *z) {
    return forward_range(m, tokens, B, T, mode, 0, m->L, NULL, x_out, aux, z);
}

/* Layers [l0, l1) only (a pipeline stage): with l0 > 0 the residual stream
 * entering layer l0 is x_in (N, D) instead of the embedding; *x_out is the
 * stream leaving layer l1 - 1 (in training: layer l1's input buffer, or
 * the final one). */
static ffn_status forward_range(ffn_model *m, const int32_t *tokens, int64_t B, int64_t T,
                                int mode, int64_t l0, int64_t l1, const float *x_in,
                                float **x_out, double *aux, double *z) {
    if (l0 < m->s0 || l1 > m->s1) /* a stage's model: its layers only */
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_model: layers [%lld, %lld): the model runs "
                         "layers [%lld, %lld) only (a pipeline stage)", (long long)l0,
                         (long long)l1, (long long)m->s0, (long long)m->s1);
    const ffn_ctx *ctx = m->ctx;
    const int64_t N = B * T, D = m->D, C = m->C, H = m->H, G = m->G, Dh = m->Dh;
    const int64_t HD = H * Dh, GD = G * Dh, pos0 = mode == MODE_CACHE ? m->pos : 0;
    const float eps = (float)m->cfg.rms_norm_eps;
    const int save = mode == MODE_TRAIN;
    ffn_status st;
    ffn_profile *pf = save ? m->prof : NULL;
    float *x = m->ba[save ? l0 : 0].res;
    if (l0 > 0) memcpy(x, x_in, (size_t)(N * D) * sizeof *x);
    else model_embed_rows(m->q, m->params, m->embed, tokens, N, D, x);
    if (l0 == 0 && m->cfg.embed_scale > 0.0) { /* Gemma: sqrt(D) in float, as in its float32 forward */
        const float es = (float)m->cfg.embed_scale;
        for (int64_t i = 0; i < N * D; i++) x[i] *= es;
    }
    if (l0 == 0 && m->embed_pos) /* GPT-2: row (b, t) at position pos0 + t */
        for (int64_t n = 0; n < N; n++) {
            const float *pe = m->embed_pos + (pos0 + n % T) * D;
            for (int64_t i = 0; i < D; i++) x[n * D + i] += pe[i];
        }
    *aux = *z = 0.0;
    if (m->R > 0 && ffn_rope_is_dynamic(&m->cfg)) /* NTK frequencies for this call's length */
        ffn_rope_fill(&m->cfg, pos0 + T, pos0, pos0 + T, m->rope_cos, m->rope_sin);
    /* taps (tap.c): only when something is selected or patched */
    ffn_taps *tp = m->taps && l0 == 0 && l1 == m->L && ffn_taps_begin(m->taps, B, T, pos0, save)
                       ? m->taps : NULL;
    PROF(FFN_PROFILE_EMBED_HEAD);
    for (int64_t l = l0; l < l1; l++) {
        const block_tensors *p = &m->bp[l];
        const block_acts *a = &m->ba[save ? l : 0];
        float *x_next = save ? (l + 1 < m->s1 ? m->ba[l + 1].res : m->res_final) : x;
        if (tp) ffn_taps_point(tp, l, FFN_TAP_RESID_PRE, x);
        /* attention */
        norm_forward(m, a->xn1, a->rstd1, x, p->attn_norm, p->attn_norm_b, N);
        PROF(FFN_PROFILE_NORM);
        if ((st = mproj_bias(m, ctx, p->wqkv, p->bqkv, C, D, a->xn1, D, N, a->qkv, C)))
            return st;
        PROF_PRODUCT(FFN_PROFILE_ATTN_PROJ);
        if (p->q_norm) { /* qwen3 per head, olmoe over the whole projection */
            const int head = m->cfg.qk_norm == FFN_QK_NORM_HEAD;
            float *sv = save ? a->qk_pre : NULL, *rs = save ? a->qk_rstd : NULL;
            const float *qw = p->q_norm, *kw = p->k_norm;
            if (m->qk_w) { /* Gemma 3: weights offset + w, as its other norms */
                const int64_t nq = head ? Dh : HD, nk = head ? Dh : GD;
                const float off = (float)m->cfg.norm_weight_offset;
                for (int64_t i = 0; i < nq; i++) m->qk_w[i] = off + p->q_norm[i];
                for (int64_t i = 0; i < nk; i++) m->qk_w[HD + i] = off + p->k_norm[i];
                qw = m->qk_w, kw = m->qk_w + HD;
            }
            ffn_group_rmsnorm_forward(a->qkv, C, sv, HD + GD, rs, N, head ? H : 1, head ? Dh : HD,
                                      qw, eps);
            ffn_group_rmsnorm_forward(a->qkv + HD, C, sv ? sv + HD : NULL, HD + GD,
                                      rs ? rs + N * H : NULL, N, head ? G : 1, head ? Dh : GD,
                                      kw, eps);
            PROF(FFN_PROFILE_NORM);
        }
        const int slides = ffn_cfg_layer_slides(&m->cfg, l);
        if (m->R > 0) {
            const int lt = slides && m->rope_cos_l; /* Gemma 3: the local base */
            const float *rc = lt ? m->rope_cos_l : m->rope_cos, *rsn = lt ? m->rope_sin_l : m->rope_sin;
            ffn_rope_apply_dims(a->qkv, C, N, T, pos0, H, Dh, m->R, m->cfg.rope_style, rc, rsn, 0);
            ffn_rope_apply_dims(a->qkv + HD, C, N, T, pos0, G, Dh, m->R, m->cfg.rope_style, rc,
                                rsn, 0);
        }
        const float *k = a->qkv + HD, *v = a->qkv + HD + GD;
        int64_t ldk = C;
        if (mode == MODE_CACHE) {
            float *kc = m->kcache + l * m->max_seq * GD, *vc = m->vcache + l * m->max_seq * GD;
            for (int64_t t = 0; t < T; t++) {
                memcpy(kc + (pos0 + t) * GD, a->qkv + t * C + HD, (size_t)GD * sizeof(float));
                memcpy(vc + (pos0 + t) * GD, a->qkv + t * C + HD + GD, (size_t)GD * sizeof(float));
            }
            k = kc;
            v = vc;
            ldk = GD;
        }
        ffn_attn_dims dims = {B, T, pos0, H, G, Dh, ffn_ctx_threads(m->ctx), 0.0f, 0.0f, 0};
        if (m->cfg.query_pre_attn_scalar > 0)
            dims.scale = (float)(1.0 / sqrt(m->cfg.query_pre_attn_scalar));
        dims.softcap = (float)m->cfg.attn_logit_softcapping;
        dims.window = slides ? m->cfg.sliding_window : 0;
        float *probs = save ? a->probs : tp ? ffn_taps_probs(tp, l) : NULL;
        ffn_attention_forward(a->att, HD, probs, m->scratch, a->qkv, C, k, ldk, v, ldk, &dims);
        if (tp && probs) ffn_taps_probs_done(tp, l);
        PROF(FFN_PROFILE_ATTN_CORE);
        if ((st = mproj_bias(m, ctx, p->wo, p->bo, D, HD, a->att, HD, N, m->tmp, D)))
            return st;
        PROF_PRODUCT(FFN_PROFILE_ATTN_PROJ);
        if (m->reducer.sum && (st = m->reducer.sum(m->reducer.user, m->tmp, N * D))) return st;
        if (p->attn_post_norm) { /* Gemma 2/3: what is added is the normalised output */
            norm_forward(m, m->d_xn, m->rstdf, m->tmp, p->attn_post_norm, NULL, N);
            memcpy(m->tmp, m->d_xn, (size_t)(N * D) * sizeof(float));
        }
        if (tp) ffn_taps_point(tp, l, FFN_TAP_ATTN_OUT, m->tmp);
        add_rows(a->mid, x, m->tmp, N * D);
        if (tp) ffn_taps_point(tp, l, FFN_TAP_RESID_MID, a->mid);
        /* feed-forward */
        if (!m->mlp[l] && !m->moe[l]) {
            memcpy(x_next, a->mid, (size_t)(N * D) * sizeof(float));
        } else {
            PROF(FFN_PROFILE_OTHER);
            norm_forward(m, a->xn2, a->rstd2, a->mid, p->mlp_norm, p->mlp_norm_b, N);
            PROF(FFN_PROFILE_NORM);
            if (tp) ffn_taps_point(tp, l, FFN_TAP_MLP_IN, a->xn2);
            const ffn_neuron_hook *hook = tp ? ffn_taps_hook(tp, l) : NULL;
            if (m->mlp[l]) {
                st = ffn_layer_forward_hooked(m->mlp[l], m->tmp, a->xn2, N,
                                              save ? a->saved : NULL, m->ws, m->ws_bytes, hook,
                                              NULL);
            } else {
                ffn_moe_outputs mo;
                memset(&mo, 0, sizeof mo);
                mo.y = m->tmp;
                if (tp) {
                    mo.router_logits = ffn_taps_out(tp, l, FFN_TAP_ROUTER_LOGITS);
                    mo.topk_ids = ffn_taps_out(tp, l, FFN_TAP_EXPERT_IDS);
                    mo.topk_weights = ffn_taps_out(tp, l, FFN_TAP_EXPERT_WEIGHTS);
                }
                st = ffn_moe_forward_hooked(m->moe[l], &mo, a->xn2, N, save ? a->saved : NULL,
                                            m->ws, m->ws_bytes, hook);
                *aux += mo.aux_loss;
                *z += mo.z_loss;
            }
            if (st) return ffn_error_prefix(st, "model.layers.%lld.mlp", (long long)l);
            PROF_PRODUCT(FFN_PROFILE_FFN_FORWARD);
            if (m->reducer.sum && (st = m->reducer.sum(m->reducer.user, m->tmp, N * D))) return st;
            if (p->mlp_post_norm) {
                norm_forward(m, m->d_xn, m->rstdf, m->tmp, p->mlp_post_norm, NULL, N);
                memcpy(m->tmp, m->d_xn, (size_t)(N * D) * sizeof(float));
            }
            if (tp) ffn_taps_point(tp, l, FFN_TAP_MLP_OUT, m->tmp);
            add_rows(x_next, a->mid, m->tmp, N * D);
        }
        PROF(FFN_PROFILE_OTHER);
        if (tp) ffn_taps_point(tp, l, FFN_TAP_RESID_POST, x_next);
        x = x_next;
    }
    if (tp) ffn_taps_end(tp);
    *x_out = x;
    return FFN_OK;
}

/* Head and loss over rows [0, N) in chunks of head_rows: final norm,
 * logits, log-softmax; in MODE_TRAIN also dlogits (scaled by
 * grad_scale / n_targets), the head's weight gradient and dxnf into
 * m->d_xn.  Writes logits to `logits_out` (N, V) when given instead. */
static ffn_status head_loss(ffn_model *m, const float *x, const int32_t *targets, int64_t N,
                            int train, float grad_scale, float *logits_out, double *ce,
                            int64_t *n_targets) {
    const int64_t D = m->D, V = m->V;
    ffn_status st;
    ffn_profile *pf = train ? m->prof : NULL;
    norm_forward(m, m->xnf, m->rstdf, x, m->final_norm, m->final_norm_b, N);
    PROF(FFN_PROFILE_NORM);
    int64_t count = 0;
    if (targets)
        for (int64_t n = 0; n < N; n++) count += targets[n] != FFN_IGNORE_INDEX;
    const float scale = count ? grad_scale / (float)count : 0.0f;
    for (int64_t r0 = 0; r0 < N; r0 += m->head_rows) {
        int64_t rows = N - r0 < m->head_rows ? N - r0 : m->head_rows;
        float *lg = logits_out ? logits_out + r0 * V : m->logits;
        if ((st = mproj(m, m->ctx, m->head, V, D, m->xnf + r0 * D, D, rows,
                             lg, V)))
            return st;
        PROF_PRODUCT(FFN_PROFILE_EMBED_HEAD);
        if (m->cfg.final_logit_softcapping > 0) { /* Gemma 2: cap·tanh(z/cap) */
            const float cap = (float)m->cfg.final_logit_softcapping;
#pragma omp parallel for schedule(static) if (rows * V > 65536)
            for (int64_t i = 0; i < rows * V; i++) lg[i] = cap * tanhf(lg[i] / cap);
        }
        if (!targets) continue;
#pragma omp parallel for schedule(static) if (rows * V > 65536)
        for (int64_t r = 0; r < rows; r++) {
            float *l = lg + r * V;
            int32_t y = targets[r0 + r];
            if (y == FFN_IGNORE_INDEX) {
                m->row_loss[r0 + r] = 0.0;
                if (train) memset(l, 0, (size_t)V * sizeof *l);
                continue;
            }
            float mx = l[0];
            for (int64_t j = 1; j < V; j++) mx = l[j] > mx ? l[j] : mx;
            const float ly = l[y];
            double sum = 0.0;
            for (int64_t j = 0; j < V; j++) {
                const float e = expf(l[j] - mx);
                if (train) l[j] = e;
                sum += e;
            }
            m->row_loss[r0 + r] = log(sum) + (double)mx - (double)ly;
            if (train) {
                const float f = (float)(1.0 / sum) * scale;
                for (int64_t j = 0; j < V; j++) l[j] *= f;
                l[y] -= scale;
            }
        }
        PROF(FFN_PROFILE_EMBED_HEAD);
        if (train) {
            if ((st = mgemm(m, m->ctx, 1, 0, V, D, rows, 1.0f, lg, V, m->xnf + r0 * D, D, 1.0f,
                               m->g_head, D)) ||
                (st = mgemm(m, m->ctx, 0, 0, rows, D, V, 1.0f, lg, V, m->head, D, 0.0f,
                               m->d_xn + r0 * D, D)))
                return st;
            PROF_PRODUCT(FFN_PROFILE_EMBED_HEAD);
        }
    }
    double s = 0.0;
    if (targets)
        for (int64_t n = 0; n < N; n++) s += m->row_loss[n];
    *ce = count ? s / (double)count : 0.0;
    *n_targets = count;
    return FFN_OK;
}

static void fill_loss(const ffn_model *m, ffn_model_loss *loss, double ce, double aux, double z,
                      int64_t count) {
    if (!loss) return;
    loss->ce = ce;
    loss->aux = aux;
    loss->z = z;
    loss->n_targets = count;
    loss->total = ce + m->cfg.router_aux_loss_coef * aux + m->cfg.router_z_loss_coef * z;
    if (m->cfg.num_experts == 0) loss->total = ce;
}

/* ---- backward ------------------------------------------------------------------- */

static ffn_status backward_range(ffn_model *m, const int32_t *tokens, int64_t B, int64_t T,
                                 int64_t l0, int64_t l1, const float *d_top);
static ffn_status backward_blocks(ffn_model *m, const int32_t *tokens, int64_t B, int64_t T) {
    return backward_range(m, tokens, B, T, 0, m->L, NULL);
}

/* Layers [l1 - 1 .. l0] only (a pipeline stage): with l1 < L the gradient
 * of the stream leaving layer l1 - 1 is d_top (N, D) instead of the final
 * norm's; with l0 > 0 the embedding is left alone and m->d_res holds the
 * gradient of the stream entering layer l0. */
static ffn_status backward_range(ffn_model *m, const int32_t *tokens, int64_t B, int64_t T,
                                 int64_t l0, int64_t l1, const float *d_top) {
    if (l0 < m->s0 || l1 > m->s1)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_model: layers [%lld, %lld): the model runs "
                         "layers [%lld, %lld) only (a pipeline stage)", (long long)l0,
                         (long long)l1, (long long)m->s0, (long long)m->s1);
    const ffn_ctx *ctx = m->ctx;
    const int64_t N = B * T, D = m->D, C = m->C, H = m->H, G = m->G, Dh = m->Dh;
    const int64_t HD = H * Dh, GD = G * Dh;
    ffn_status st;
    ffn_profile *pf = m->prof;
    float *d_res = m->d_res;
    PROF(FFN_PROFILE_EMBED_HEAD);
    if (l1 < m->L) {
        memcpy(d_res, d_top, (size_t)(N * D) * sizeof *d_res);
    } else {
        memset(d_res, 0, (size_t)(N * D) * sizeof *d_res);
        norm_backward(m, d_res, m->g_final_norm, m->g_final_norm_b, m->d_xn, m->res_final,
                      m->final_norm, m->rstdf, N);
    }
    PROF(FFN_PROFILE_NORM);
    if (m->grad_ready && (st = m->grad_ready(m->grad_ready_user, m->L))) return st;
    PROF(FFN_PROFILE_OTHER);
    for (int64_t l = l1 - 1; l >= l0; l--) {
        const block_tensors *p = &m->bp[l], *g = &m->bg[l];
        const block_acts *a = &m->ba[l];
        if (m->taps) ffn_taps_grad(m->taps, l, FFN_TAP_RESID_POST, d_res);
        /* feed-forward: d_res is d(x_next) = d(mid) + through the mlp */
        if (m->mlp[l] || m->moe[l]) {
            if (m->mlp[l])
                st = ffn_layer_backward(m->mlp[l], m->d_xn, &g->mlp, d_res, a->xn2, N, a->saved,
                                        m->ws, m->ws_bytes);
            else
                st = ffn_moe_backward(m->moe[l], m->d_xn, &g->moe, d_res, a->xn2, N, a->saved,
                                      m->ws, m->ws_bytes);
            if (st) return ffn_error_prefix(st, "model.layers.%lld.mlp", (long long)l);
            PROF_PRODUCT(FFN_PROFILE_FFN_BACKWARD);
            if (m->reducer.sum && (st = m->reducer.sum(m->reducer.user, m->d_xn, N * D))) return st;
            if (m->taps) ffn_taps_grad(m->taps, l, FFN_TAP_MLP_IN, m->d_xn);
            PROF(FFN_PROFILE_OTHER);
            norm_backward(m, d_res, g->mlp_norm, g->mlp_norm_b, m->d_xn, a->mid, p->mlp_norm, a->rstd2, N);
            PROF(FFN_PROFILE_NORM);
        }
        if (m->taps) ffn_taps_grad(m->taps, l, FFN_TAP_RESID_MID, d_res);
        /* attention output projection: mid = x + att · Woᵀ (+ bo) */
        if (g->bo)
            for (int64_t n = 0; n < N; n++)
                for (int64_t j = 0; j < D; j++) g->bo[j] += d_res[n * D + j];
        if ((st = mgemm(m, ctx, 0, 0, N, HD, D, 1.0f, d_res, D, p->wo, HD, 0.0f, m->d_att, HD)) ||
            (st = mgemm(m, ctx, 1, 0, D, HD, N, 1.0f, d_res, D, a->att, HD, 1.0f, g->wo, HD)))
            return st;
        PROF_PRODUCT(FFN_PROFILE_ATTN_PROJ);
        ffn_attn_dims dims = {B, T, 0, H, G, Dh, ffn_ctx_threads(m->ctx), 0.0f, 0.0f, 0};
        ffn_attention_backward(m->d_qkv, m->d_qkv + HD, m->d_qkv + HD + G * Dh, m->d_att, HD,
                               a->probs, a->qkv, C, a->qkv + HD, C, a->qkv + HD + G * Dh, C,
                               m->scratch, &dims);
        if (m->R > 0) {
            ffn_rope_apply_dims(m->d_qkv, C, N, T, 0, H, Dh, m->R, m->cfg.rope_style, m->rope_cos,
                                m->rope_sin, 1);
            ffn_rope_apply_dims(m->d_qkv + HD, C, N, T, 0, G, Dh, m->R, m->cfg.rope_style,
                                m->rope_cos, m->rope_sin, 1);
        }
        PROF(FFN_PROFILE_ATTN_CORE);
        if (p->q_norm) {
            const int head = m->cfg.qk_norm == FFN_QK_NORM_HEAD;
            ffn_group_rmsnorm_backward(m->d_qkv, C, a->qk_pre, HD + GD, a->qk_rstd, N,
                                       head ? H : 1, head ? Dh : HD, p->q_norm, g->q_norm);
            ffn_group_rmsnorm_backward(m->d_qkv + HD, C, a->qk_pre + HD, HD + GD,
                                       a->qk_rstd + N * H, N, head ? G : 1, head ? Dh : GD,
                                       p->k_norm, g->k_norm);
            PROF(FFN_PROFILE_NORM);
        }
        if (g->bqkv)
            for (int64_t n = 0; n < N; n++)
                for (int64_t j = 0; j < C; j++) g->bqkv[j] += m->d_qkv[n * C + j];
        if ((st = mgemm(m, ctx, 1, 0, C, D, N, 1.0f, m->d_qkv, C, a->xn1, D, 1.0f, g->wqkv, D)) ||
            (st = mgemm(m, ctx, 0, 0, N, D, C, 1.0f, m->d_qkv, C, p->wqkv, D, 0.0f, m->d_xn, D)))
            return st;
        PROF_PRODUCT(FFN_PROFILE_ATTN_PROJ);
        if (m->reducer.sum && (st = m->reducer.sum(m->reducer.user, m->d_xn, N * D))) return st;
        PROF(FFN_PROFILE_OTHER);
        norm_backward(m, d_res, g->attn_norm, g->attn_norm_b, m->d_xn, a->res, p->attn_norm, a->rstd1, N);
        PROF(FFN_PROFILE_NORM);
        if (m->taps) ffn_taps_grad(m->taps, l, FFN_TAP_RESID_PRE, d_res);
        if (m->grad_ready && (st = m->grad_ready(m->grad_ready_user, l))) return st;
        PROF(FFN_PROFILE_OTHER);
    }
    if (l0 > 0) return FFN_OK;
    /* embedding: rows in token order (a repeated token sums in that order) */
    const float es = m->cfg.embed_scale > 0.0 ? (float)m->cfg.embed_scale : 1.0f;
    for (int64_t n = 0; n < N; n++) {
        float *ge = m->g_embed + (int64_t)tokens[n] * D;
        const float *dr = d_res + n * D;
        for (int64_t i = 0; i < D; i++) ge[i] += dr[i] * es;
    }
    if (m->g_embed_pos) /* positions in row order: position t sums over the batch in order */
        for (int64_t n = 0; n < N; n++) {
            float *gp = m->g_embed_pos + (n % T) * D;
            for (int64_t i = 0; i < D; i++) gp[i] += d_res[n * D + i];
        }
    PROF(FFN_PROFILE_EMBED_HEAD);
    return FFN_OK;
}

/* The MoE layer weighs its aux and z gradients by its loss coefficients,
 * read at backward time; the model's objective scales them by grad_scale
 * too (grad_scale is checked finite by the caller). */
static void moe_scale_coefs(ffn_model *m, float grad_scale) {
    for (int64_t l = 0; l < m->L; l++) {
        if (!m->moe[l]) continue;
        ffn_moe_set_loss_coefs(m->moe[l], m->cfg.router_aux_loss_coef * grad_scale,
                               m->cfg.router_z_loss_coef * grad_scale);
    }
}

/* ---- the public entry points ----------------------------------------------------- */

/* The common body of the batched entry points: check B, T and the tokens
 * (and grad_scale in MODE_TRAIN), run the blocks and the head.  The head
 * writes logits when given, the loss parts into *loss otherwise; in
 * MODE_TRAIN it leaves the head's gradients for backward_blocks. */
static ffn_status batch_forward(ffn_model *m, const int32_t *tokens, const int32_t *targets,
                                int64_t B, int64_t T, int mode, float grad_scale, float *logits,
                                const char *fn, ffn_model_loss *loss) {
    ffn_status st;
    if ((st = check_shape(m, B, T, fn)) || (st = check_tokens(m, tokens, targets, B * T, fn)) ||
        (st = model_q_sync(m)))
        return st;
    if (mode == MODE_TRAIN && !isfinite(grad_scale))
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: grad_scale %g is not finite", fn,
                         (double)grad_scale);
    ffn_ctx_enter(m->ctx);
    float *x;
    double aux, z, ce;
    int64_t count;
    if ((st = forward_blocks(m, tokens, B, T, mode, &x, &aux, &z)) ||
        (st = head_loss(m, x, targets, B * T, mode == MODE_TRAIN, grad_scale, logits, &ce,
                        &count)))
        return st;
    fill_loss(m, loss, ce, aux, z, count);
    return FFN_OK;
}

ffn_status ffn_model_forward_backward(ffn_model *m, const int32_t *tokens, const int32_t *targets,
                                      int64_t B, int64_t T, float grad_scale,
                                      ffn_model_loss *loss) {
    static const char *fn = "ffn_model_forward_backward";
    if (!m || !tokens || !targets)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: model, tokens and targets must not be NULL", fn);
    if (!m->training)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: the model was created without training "
                         "(ffn_model_options.training = 0)", fn);
    if (model_q_first(m->q))
        return ffn_error(FFN_ERR_UNSUPPORTED, "%s: %s holds low-precision weights (%s): "
                         "training needs fp32 weights (this model runs inference only)", fn,
                         model_q_first(m->q),
                         ffn_ggml_type_name((ffn_ggml_type)ffn_model_tensor_type(
                             m, model_q_first(m->q))));
    ffn_model_loss parts;
    if (m->prof) m->prof->product_flops += 6.0 * (double)(B * T) * product_weights_per_row(m);
    ffn_status st = batch_forward(m, tokens, targets, B, T, MODE_TRAIN, grad_scale, NULL, fn,
                                  &parts);
    if (st) return st;
    moe_scale_coefs(m, grad_scale);
    st = backward_blocks(m, tokens, B, T);
    moe_scale_coefs(m, 1.0f);
    if (st) return st;
    if (loss) *loss = parts;
    return FFN_OK;
}

/* ---- pipeline stages (include/ffn/model.h) ---------------------------------------- */

static ffn_status stage_check(const ffn_model *m, int64_t l0, int64_t l1, int train,
                              const char *fn) {
    if (l0 < 0 || l1 <= l0 || l1 > m->L)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: layers [%lld, %lld) of a model of %lld", fn,
                         (long long)l0, (long long)l1, (long long)m->L);
    if (train && !m->training)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: the model was created without training", fn);
    if (l0 < m->s0 || l1 > m->s1)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: layers [%lld, %lld): the model runs layers "
                         "[%lld, %lld) only (ffn_model_options.layer_begin, layer_end)", fn,
                         (long long)l0, (long long)l1, (long long)m->s0, (long long)m->s1);
    if (train && model_q_first(m->q))
        return ffn_error(FFN_ERR_UNSUPPORTED, "%s: %s holds low-precision weights: training needs "
                         "fp32 weights", fn, model_q_first(m->q));
    return FFN_OK;
}

ffn_status ffn_model_stage_forward(ffn_model *m, const int32_t *tokens, const int32_t *targets,
                                   int64_t B, int64_t T, int64_t l0, int64_t l1, int train,
                                   float grad_scale, const float *x_in, float **x_out,
                                   ffn_model_loss *loss) {
    static const char *fn = "ffn_model_stage_forward";
    if (!m || !tokens || (l0 > 0 && !x_in) || (l1 == m->L && !targets) ||
        (l1 < m->L && !x_out) || !loss)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: NULL argument", fn);
    ffn_status st;
    if ((st = stage_check(m, l0, l1, train, fn)) || (st = check_shape(m, B, T, fn)) ||
        (st = check_tokens(m, tokens, l1 == m->L ? targets : NULL, B * T, fn)) ||
        (st = model_q_sync(m)))
        return st;
    if (train && !isfinite(grad_scale))
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: grad_scale %g is not finite", fn,
                         (double)grad_scale);
    ffn_ctx_enter(m->ctx);
    float *x;
    double aux, z, ce = 0.0;
    int64_t count = 0;
    if ((st = forward_range(m, tokens, B, T, train ? MODE_TRAIN : MODE_EVAL, l0, l1, x_in, &x,
                            &aux, &z)))
        return st;
    if (l1 == m->L &&
        (st = head_loss(m, x, targets, B * T, train, grad_scale, NULL, &ce, &count)))
        return st;
    if (x_out) *x_out = l1 == m->L ? NULL : x;
    fill_loss(m, loss, ce, aux, z, count);
    return FFN_OK;
}

ffn_status ffn_model_stage_backward(ffn_model *m, const int32_t *tokens, int64_t B, int64_t T,
                                    int64_t l0, int64_t l1, float grad_scale, const float *d_top,
                                    float **d_in) {
    static const char *fn = "ffn_model_stage_backward";
    if (!m || !tokens || (l1 < m->L && !d_top) || (l0 > 0 && !d_in))
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: NULL argument", fn);
    ffn_status st;
    if ((st = stage_check(m, l0, l1, 1, fn)) || (st = check_shape(m, B, T, fn))) return st;
    ffn_ctx_enter(m->ctx);
    moe_scale_coefs(m, grad_scale);
    st = backward_range(m, tokens, B, T, l0, l1, d_top);
    moe_scale_coefs(m, 1.0f);
    if (d_in) *d_in = l0 > 0 ? m->d_res : NULL;
    return st;
}

ffn_status ffn_model_stage_acts(ffn_model *m, int64_t l0, int64_t l1, void **start,
                                size_t *bytes) {
    if (!m || !start || !bytes)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_model_stage_acts: NULL argument");
    ffn_status st = stage_check(m, l0, l1, 1, "ffn_model_stage_acts");
    if (st) return st;
    char *a = (char *)m->ba[l0].res, *b = (char *)(l1 < m->s1 ? m->ba[l1].res : m->res_final);
    *start = a;
    *bytes = (size_t)(b - a);
    return FFN_OK;
}

ffn_status ffn_model_eval_loss(ffn_model *m, const int32_t *tokens, const int32_t *targets,
                               int64_t B, int64_t T, ffn_model_loss *loss) {
    static const char *fn = "ffn_model_eval_loss";
    if (!m || !tokens || !targets)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: model, tokens and targets must not be NULL", fn);
    return batch_forward(m, tokens, targets, B, T, MODE_EVAL, 0.0f, NULL, fn, loss);
}

ffn_status ffn_model_logits(ffn_model *m, float *logits, const int32_t *tokens, int64_t B,
                            int64_t T) {
    static const char *fn = "ffn_model_logits";
    if (!m || !tokens || !logits)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: model, logits and tokens must not be NULL", fn);
    return batch_forward(m, tokens, NULL, B, T, MODE_EVAL, 0.0f, logits, fn, NULL);
}

/* ---- generation ------------------------------------------------------------------- */

void ffn_model_reset(ffn_model *m) {
    if (m) m->pos = 0;
}

int64_t ffn_model_position(const ffn_model *m) { return m ? m->pos : 0; }

ffn_status ffn_model_prefill(ffn_model *m, const int32_t *tokens, int64_t n, float *logits) {
    static const char *fn = "ffn_model_prefill";
    if (!m || (!tokens && n > 0))
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: model and tokens must not be NULL", fn);
    ffn_status st = model_q_sync(m);
    if (st) return st;
    if (n < 0 || m->pos + n > m->max_seq)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: %lld tokens after %lld cached exceed max_seq "
                         "(%lld)", fn, (long long)n, (long long)m->pos, (long long)m->max_seq);
    if (n == 0) return FFN_OK;
    if ((st = check_tokens(m, tokens, NULL, n, fn))) return st;
    ffn_ctx_enter(m->ctx);
    /* The prompt goes through in chunks that fit the activation rows. */
    for (int64_t i = 0; i < n; i += m->max_n) {
        int64_t c = n - i < m->max_n ? n - i : m->max_n;
        float *x;
        double aux, z;
        if ((st = forward_blocks(m, tokens + i, 1, c, MODE_CACHE, &x, &aux, &z))) {
            m->pos = 0;
            return st;
        }
        m->pos += c;
        if (i + c == n && logits) {
            double ce;
            int64_t count;
            /* head on the last row only */
            if ((st = head_loss(m, x + (c - 1) * m->D, NULL, 1, 0, 0.0f, logits, &ce, &count)))
                return st;
        }
    }
    return FFN_OK;
}

ffn_status ffn_model_step(ffn_model *m, int32_t token, float *logits) {
    if (!logits) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_model_step: logits is NULL");
    return ffn_model_prefill(m, &token, 1, logits);
}

/* ---- growing the activation block ------------------------------------------------- */

ffn_status ffn_model_reserve(ffn_model *m, int64_t max_batch, int64_t max_seq) {
    static const char *fn = "ffn_model_reserve";
    if (!m) return ffn_error(FFN_ERR_INVALID_ARG, "%s: model is NULL", fn);
    if (max_batch < 1 || max_batch > ((int64_t)1 << 24))
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: max_batch: expected 1..%lld, got %lld", fn,
                         (long long)1 << 24, (long long)max_batch);
    if (max_seq < 1 || max_seq > m->cfg.max_position_embeddings)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: max_seq: expected 1..max_position_embeddings "
                         "(%lld), got %lld", fn, (long long)m->cfg.max_position_embeddings,
                         (long long)max_seq);
    int64_t nb = max_batch > m->max_batch ? max_batch : m->max_batch;
    int64_t ns = max_seq > m->max_seq ? max_seq : m->max_seq, nn;
    if (nb == m->max_batch && ns == m->max_seq) return FFN_OK;
    if (ffn_mul_i64(nb, ns, &nn))
        return ffn_error(FFN_ERR_OVERFLOW, "%s: max_batch · max_seq overflows", fn);
    ffn_model old = *m;
    m->max_batch = nb;
    m->max_seq = ns;
    m->max_n = nn;
    m->acts = NULL;
    m->ba = NULL;
    ffn_status st = alloc_acts(m);
    if (st) {
        ffn_free_aligned(m->acts);
        free(m->ba);
        *m = old;
        return st;
    }
    if ((st = ffn_taps_resize(m->taps, nn, ns))) {
        ffn_free_aligned(m->acts);
        free(m->ba);
        *m = old;
        return st;
    }
    ffn_free_aligned(old.acts);
    free(old.ba);
    m->pos = 0;
    return FFN_OK;
}

/* ---- for the taps and the analysis floor (src/nn/tap_internal.h) ----------------- */

ffn_taps **ffn_model_taps_ref(ffn_model *m) { return &m->taps; }

model_qstate **ffn_model_q_ref(ffn_model *m) { return &m->q; }

void ffn_model_rows(const ffn_model *m, int64_t *max_n, int64_t *max_seq) {
    *max_n = m->max_n;
    *max_seq = m->max_seq;
}

typedef struct copy_hook {
    float *gu, *h;
    int64_t r0, P, F;
} copy_hook;

static void copy_rows(void *user, int stage, float *buf, int64_t n, const ffn_hook_rows *rows) {
    const copy_hook *c = user;
    (void)rows;
    if (stage == FFN_HOOK_GU && c->gu)
        memcpy(c->gu + c->r0 * c->P, buf, (size_t)(n * c->P) * sizeof(float));
    if (stage == FFN_HOOK_H && c->h)
        memcpy(c->h + c->r0 * c->F, buf, (size_t)(n * c->F) * sizeof(float));
}

ffn_status ffn_model_ffn_neurons(ffn_model *m, int64_t l, int64_t expert, const float *x,
                                 int64_t n, float *gu, float *h) {
    static const char *fn = "ffn_model_ffn_neurons";
    if (!m || l < 0 || l >= m->L || (!x && n > 0) || n < 0)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: bad arguments (layer %lld, n %lld)", fn,
                         (long long)l, (long long)n);
    ffn_layer *ly = NULL;
    if (expert == -1) ly = m->mlp[l];
    else if (m->moe[l]) ly = ffn_moe_expert_layer(m->moe[l], expert);
    if (!ly)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: layer %lld has no FFN %lld", fn, (long long)l,
                         (long long)expert);
    const ffn_layer_config *lc = ffn_layer_get_config(ly);
    const int64_t F = lc->intermediate_size, D = m->D;
    copy_hook ch = {gu, h, 0, lc->type == FFN_MLP_GATED ? 2 * F : F, F};
    ffn_neuron_hook hook = {copy_rows, &ch, 0};
    int64_t chunk = m->max_n;
    while (chunk > 1 && ffn_layer_workspace_size(ly, chunk) > m->ws_bytes) chunk /= 2;
    float *xin = m->ba[0].xn2; /* the forward's FFN input rows */
    for (int64_t r0 = 0; r0 < n; r0 += chunk) {
        int64_t c = n - r0 < chunk ? n - r0 : chunk;
        memcpy(xin, x + r0 * D, (size_t)(c * D) * sizeof *xin);
        ch.r0 = r0;
        ffn_status st = ffn_layer_forward_hooked(ly, m->tmp, xin, c, NULL, m->ws, m->ws_bytes,
                                                 &hook, NULL);
        if (st) return ffn_error_prefix(st, "model.layers.%lld.mlp", (long long)l);
    }
    return FFN_OK;
}

/* ---- a loss of the caller's (src/nn/tap_internal.h; model_grad.c checks the taps) ---- */

ffn_status ffn_model_backward_from_logits(ffn_model *m, const int32_t *tokens, int64_t B,
                                          int64_t T, ffn_logits_grad_fn fn, void *user,
                                          double *loss) {
    static const char *name = "ffn_model_forward_backward_taps";
    ffn_status st;
    if ((st = check_shape(m, B, T, name)) || (st = check_tokens(m, tokens, NULL, B * T, name)))
        return st;
    ffn_ctx_enter(m->ctx);
    const int64_t N = B * T, D = m->D, V = m->V;
    float *x;
    double aux, z, sum = 0.0;
    if ((st = forward_blocks(m, tokens, B, T, MODE_TRAIN, &x, &aux, &z))) return st;
    ffn_rmsnorm_forward(m->xnf, m->rstdf, x, m->final_norm, N, D, (float)m->cfg.rms_norm_eps);
    for (int64_t r0 = 0; r0 < N; r0 += m->head_rows) {
        const int64_t rows = N - r0 < m->head_rows ? N - r0 : m->head_rows;
        if ((st = mgemm(m, m->ctx, 0, 1, rows, V, D, 1.0f, m->xnf + r0 * D, D, m->head, D, 0.0f,
                           m->logits, V)) ||
            (fn(user, r0, rows, V, m->logits, &sum) &&
             (st = ffn_error(FFN_ERR_INVALID_ARG, "%s: the loss callback failed on rows "
                             "%lld..%lld", name, (long long)r0, (long long)(r0 + rows - 1)))) ||
            (st = mgemm(m, m->ctx, 1, 0, V, D, rows, 1.0f, m->logits, V, m->xnf + r0 * D, D,
                           1.0f, m->g_head, D)) ||
            (st = mgemm(m, m->ctx, 0, 0, rows, D, V, 1.0f, m->logits, V, m->head, D, 0.0f,
                           m->d_xn + r0 * D, D)))
            return st;
    }
    moe_scale_coefs(m, 0.0f);
    st = backward_blocks(m, tokens, B, T);
    moe_scale_coefs(m, 1.0f);
    if (st == FFN_OK && loss) *loss = sum;
    return st;
}
