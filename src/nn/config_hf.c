/* config_hf.c -- the parts of a Hugging Face config.json that go beyond
 * Llama's fields, for ffn_model_config_load (model.c): head_dim,
 * partial_rotary_factor, rope_scaling / rope_parameters, and what each
 * model_type implies (qwen3: q/k RMSNorm per head, head_dim 128 when
 * absent; gemma: (1 + w) norms, scaled embeddings, GeGLU; olmoe: q/k
 * RMSNorm over the whole projection, experts of intermediate_size;
 * qwen3_moe: qwen3's norms with qwen2_moe's expert keys, no shared expert;
 * starcoder2: LayerNorm, biases (use_bias), a dense MLP).  One function per concern; every error names the file and the
 * field, what was expected and what was found. */
#include "nn/model_internal.h"
#include "ffn/model.h"
#include "format/json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    ffn_rope_scaling_type type;
} rope_types[] = {
    {"default", FFN_ROPE_SCALING_NONE}, {"linear", FFN_ROPE_SCALING_LINEAR},
    {"dynamic", FFN_ROPE_SCALING_DYNAMIC}, {"llama3", FFN_ROPE_SCALING_LLAMA3},
    {"yarn", FFN_ROPE_SCALING_YARN}};

/* One rope_scaling (or rope_parameters) object into c. */
static ffn_status parse_rope_object(const json_value *o, const char *path, const char *key,
                                    ffn_model_config *c) {
    char what[512];
    snprintf(what, sizeof what, "%s: %s", path, key);
    if (o->type != JSON_OBJECT)
        return ffn_error(FFN_ERR_CONFIG, "%s: expected an object or null, found %s", what,
                         json_type_name(o->type));
    const char *type = NULL;
    ffn_status st;
    if ((st = json_get_str(o, "rope_type", 0, what, &type))) return st;
    if (!type && (st = json_get_str(o, "type", 0, what, &type))) return st;
    if (!type) {
        /* rope_parameters keyed by layer type (sliding / full attention) */
        if (o->length > 0 && o->items[0]->type == JSON_OBJECT)
            return ffn_error(FFN_ERR_UNSUPPORTED, "%s: one RoPE per layer type ('%.40s', ...) is "
                             "not supported (expected one object with rope_type)", what,
                             o->keys[0]);
        return ffn_error(FFN_ERR_MISSING, "%s: rope_type (or type) missing", what);
    }
    size_t k = 0, n = sizeof rope_types / sizeof rope_types[0];
    while (k < n && strcmp(type, rope_types[k].name)) k++;
    if (k == n)
        return ffn_error(FFN_ERR_UNSUPPORTED, "%s.rope_type: '%.40s' is not supported (expected "
                         "default, linear, dynamic, llama3 or yarn)", what, type);
    ffn_rope_scaling r;
    memset(&r, 0, sizeof r);
    r.type = rope_types[k].type;
    if ((st = json_get_f64(o, "rope_theta", 0, what, &c->rope_theta)) ||
        (st = json_get_f64(o, "partial_rotary_factor", 0, what, &c->partial_rotary_factor)))
        return st;
    if (r.type != FFN_ROPE_SCALING_NONE &&
        (st = json_get_f64(o, "factor", 1, what, &r.factor)))
        return st;
    int llama3 = r.type == FFN_ROPE_SCALING_LLAMA3;
    if ((st = json_get_i64(o, "original_max_position_embeddings", llama3, what,
                           &r.original_max_position_embeddings)) ||
        (st = json_get_f64(o, "low_freq_factor", llama3, what, &r.low_freq_factor)) ||
        (st = json_get_f64(o, "high_freq_factor", llama3, what, &r.high_freq_factor)) ||
        (st = json_get_f64(o, "beta_fast", 0, what, &r.beta_fast)) ||
        (st = json_get_f64(o, "beta_slow", 0, what, &r.beta_slow)) ||
        (st = json_get_f64(o, "attention_factor", 0, what, &r.attention_factor)) ||
        (st = json_get_f64(o, "mscale", 0, what, &r.mscale)) ||
        (st = json_get_f64(o, "mscale_all_dim", 0, what, &r.mscale_all_dim)))
        return st;
    int truncate = 1;
    if ((st = json_get_bool(o, "truncate", 0, what, &truncate))) return st;
    if (!truncate)
        return ffn_error(FFN_ERR_UNSUPPORTED, "%s.truncate: false is not supported (yarn's "
                         "correction range is rounded to whole dims)", what);
    c->rope_scaling = r;
    return FFN_OK;
}

/* GPT-2's config.json (n_embd, n_layer, n_head, n_positions, n_inner,
 * activation_function, layer_norm_epsilon): LayerNorm with biases, learned
 * positions, q/k/v and o biases, a dense MLP with biases, a tied head. */
ffn_status ffn_config_hf_gpt2(const json_value *root, const char *path, ffn_model_config *c) {
    ffn_status st;
    int64_t inner = 0;
    if ((st = json_get_i64(root, "vocab_size", 1, path, &c->vocab_size)) ||
        (st = json_get_i64(root, "n_embd", 1, path, &c->hidden_size)) ||
        (st = json_get_i64(root, "n_layer", 1, path, &c->num_hidden_layers)) ||
        (st = json_get_i64(root, "n_head", 1, path, &c->num_attention_heads)))
        return st;
    c->max_position_embeddings = 1024;
    c->rms_norm_eps = 1e-5;
    c->tie_word_embeddings = 1;
    if ((st = json_get_i64(root, "n_positions", 0, path, &c->max_position_embeddings)) ||
        (st = json_get_i64(root, "n_inner", 0, path, &inner)) ||
        (st = json_get_f64(root, "layer_norm_epsilon", 0, path, &c->rms_norm_eps)) ||
        (st = json_get_bool(root, "tie_word_embeddings", 0, path, &c->tie_word_embeddings)))
        return st;
    c->num_key_value_heads = c->num_attention_heads;
    c->intermediate_size = inner > 0 ? inner : 4 * c->hidden_size;
    const char *act = "gelu_new";
    if ((st = json_get_str(root, "activation_function", 0, path, &act))) return st;
    ffn_mlp_type implied;
    if ((st = ffn_act_parse(act, &c->hidden_act, &implied)))
        return ffn_error_prefix(st, "%s: activation_function", path);
    static const char *const refused[3][2] = {
        {"scale_attn_by_inverse_layer_idx", "true"}, {"add_cross_attention", "true"},
        {"scale_attn_weights", "false"}};
    for (int i = 0; i < 3; i++) {
        const json_value *v = json_get(root, refused[i][0]);
        if (v && v->type == (refused[i][1][0] == 't' ? JSON_TRUE : JSON_FALSE))
            return ffn_error(FFN_ERR_UNSUPPORTED, "%s: %s: %s is not supported", path,
                             refused[i][0], refused[i][1]);
    }
    c->mlp_type = FFN_MODEL_MLP_DENSE;
    c->mlp_bias = 1;
    c->attention_bias = 1;
    c->attention_out_bias = 1;
    c->norm_type = FFN_NORM_LAYER;
    c->learned_positions = 1;
    return FFN_OK;
}

ffn_status ffn_config_hf_extras(const json_value *root, const char *path, const char *model_type,
                                ffn_model_config *c) {
    ffn_status st;
    const int qwen3 = !strcmp(model_type, "qwen3") || !strcmp(model_type, "qwen3_moe");
    const int gemma = !strcmp(model_type, "gemma");
    if (!strcmp(model_type, "olmoe")) {
        /* OlmoeAttention: q_norm over all H·Dh features of q, k_norm over
         * G·Dh; every layer is MoE with experts of intermediate_size;
         * norm_topk_prob false unless given (read by the caller). */
        c->qk_norm = FFN_QK_NORM_FULL;
        if (c->moe_intermediate_size == 0) c->moe_intermediate_size = c->intermediate_size;
        const json_value *clip = json_get(root, "clip_qkv");
        if (clip && clip->type != JSON_NULL)
            return ffn_error(FFN_ERR_UNSUPPORTED, "%s: clip_qkv: clamping q, k, v is not "
                             "supported (expected null)", path);
    }
    if (!strcmp(model_type, "starcoder2")) {
        /* Starcoder2Config: LayerNorm (norm_epsilon) with biases, q/k/v/o and MLP
         * biases when use_bias (true), a dense MLP c_fc -> act -> c_proj, a tied
         * head unless said otherwise */
        int use_bias = 1;
        if ((st = json_get_bool(root, "use_bias", 0, path, &use_bias)) ||
            (st = json_get_f64(root, "norm_epsilon", 0, path, &c->rms_norm_eps)))
            return st;
        if (!json_get(root, "norm_epsilon") && !json_get(root, "rms_norm_eps")) c->rms_norm_eps = 1e-5;
        if (!json_get(root, "tie_word_embeddings")) c->tie_word_embeddings = 1;
        if (!json_get(root, "hidden_act")) c->hidden_act = FFN_ACT_GELU_TANH;
        c->norm_type = FFN_NORM_LAYER;
        c->mlp_type = FFN_MODEL_MLP_DENSE;
        c->mlp_bias = c->attention_bias = c->attention_out_bias = use_bias;
    }
    if (qwen3) {
        c->qk_norm = FFN_QK_NORM_HEAD;
        c->head_dim = 128; /* Qwen3Config's default */
    }
    if (gemma) {
        /* GemmaConfig: head_dim 256, tied head, GeGLU with the activation of
         * hidden_activation (gelu_pytorch_tanh when absent; its hidden_act
         * is not what the MLP uses), RMSNorm weight 1 + w, embeddings times
         * sqrt(hidden_size) rounded to the compute dtype (float here). */
        c->head_dim = 256;
        if (!json_get(root, "tie_word_embeddings")) c->tie_word_embeddings = 1;
        c->mlp_type = FFN_MODEL_MLP_GATED;
        c->hidden_act = FFN_ACT_GELU_TANH;
        const char *act = NULL;
        if ((st = json_get_str(root, "hidden_activation", 0, path, &act))) return st;
        ffn_mlp_type implied;
        if (act && (st = ffn_act_parse(act, &c->hidden_act, &implied)))
            return ffn_error_prefix(st, "%s: hidden_activation", path);
        c->norm_weight_offset = 1.0;
        c->embed_scale = (double)(float)sqrt((double)c->hidden_size);
    }
    if ((st = json_get_i64(root, "head_dim", 0, path, &c->head_dim)) ||
        (st = json_get_f64(root, "partial_rotary_factor", 0, path, &c->partial_rotary_factor)))
        return st;
    if (c->head_dim > 0 && c->num_attention_heads > 0 &&
        c->head_dim * c->num_attention_heads == c->hidden_size)
        c->head_dim = 0; /* the default: written as 0 so that configs compare equal */
    const char *keys[2] = {"rope_scaling", "rope_parameters"};
    for (int i = 0; i < 2; i++) {
        const json_value *v = json_get(root, keys[i]);
        if (v && v->type != JSON_NULL && (st = parse_rope_object(v, path, keys[i], c))) return st;
    }
    /* ffn's own keys, so that a saved config gives its model back */
    if ((st = json_get_f64(root, "ffn_norm_weight_offset", 0, path, &c->norm_weight_offset)) ||
        (st = json_get_f64(root, "ffn_embed_scale", 0, path, &c->embed_scale)) ||
        (st = json_get_bool(root, "ffn_learned_positions", 0, path, &c->learned_positions)) ||
        (st = json_get_bool(root, "ffn_attention_out_bias", 0, path, &c->attention_out_bias)))
        return st;
    const char *nt = NULL;
    if ((st = json_get_str(root, "ffn_norm_type", 0, path, &nt))) return st;
    if (nt) {
        if (!strcmp(nt, "rms")) c->norm_type = FFN_NORM_RMS;
        else if (!strcmp(nt, "layer")) c->norm_type = FFN_NORM_LAYER;
        else
            return ffn_error(FFN_ERR_CONFIG, "%s: ffn_norm_type: unknown value '%.40s' (expected "
                             "rms or layer)", path, nt);
    }
    const char *s = NULL;
    if ((st = json_get_str(root, "ffn_qk_norm", 0, path, &s))) return st;
    if (s) {
        if (!strcmp(s, "none")) c->qk_norm = FFN_QK_NORM_NONE;
        else if (!strcmp(s, "head")) c->qk_norm = FFN_QK_NORM_HEAD;
        else if (!strcmp(s, "full")) c->qk_norm = FFN_QK_NORM_FULL;
        else
            return ffn_error(FFN_ERR_CONFIG, "%s: ffn_qk_norm: unknown value '%.40s' (expected "
                             "none, head or full)", path, s);
    }
    return FFN_OK;
}

/* The keys above as ffn_model_config_save / the HF writer print them
 * (each line ends with ",\n"); nothing for a plain Llama. */
void ffn_config_hf_write_extras(FILE *f, const ffn_model_config *c, int ffn_keys) {
    if (c->head_dim > 0) fprintf(f, "  \"head_dim\": %lld,\n", (long long)c->head_dim);
    if (c->partial_rotary_factor > 0 && c->partial_rotary_factor != 1.0)
        fprintf(f, "  \"partial_rotary_factor\": %.17g,\n", c->partial_rotary_factor);
    const ffn_rope_scaling *r = &c->rope_scaling;
    if (r->type != FFN_ROPE_SCALING_NONE) {
        fprintf(f, "  \"rope_scaling\": {\"rope_type\": \"%s\", \"factor\": %.17g",
                rope_types[r->type].name, r->factor);
        if (r->original_max_position_embeddings > 0)
            fprintf(f, ", \"original_max_position_embeddings\": %lld",
                    (long long)r->original_max_position_embeddings);
        if (r->type == FFN_ROPE_SCALING_LLAMA3)
            fprintf(f, ", \"low_freq_factor\": %.17g, \"high_freq_factor\": %.17g",
                    r->low_freq_factor, r->high_freq_factor);
        const double *yv[5] = {&r->beta_fast, &r->beta_slow, &r->attention_factor, &r->mscale,
                               &r->mscale_all_dim};
        const char *yk[5] = {"beta_fast", "beta_slow", "attention_factor", "mscale",
                             "mscale_all_dim"};
        for (int i = 0; i < 5; i++)
            if (*yv[i] > 0) fprintf(f, ", \"%s\": %.17g", yk[i], *yv[i]);
        fprintf(f, "},\n");
    }
    if (ffn_keys && c->norm_weight_offset != 0.0)
        fprintf(f, "  \"ffn_norm_weight_offset\": %.17g,\n", c->norm_weight_offset);
    if (ffn_keys && c->embed_scale != 0.0)
        fprintf(f, "  \"ffn_embed_scale\": %.17g,\n", c->embed_scale);
    if (ffn_keys && c->norm_type == FFN_NORM_LAYER) fprintf(f, "  \"ffn_norm_type\": \"layer\",\n");
    if (ffn_keys && c->learned_positions) fprintf(f, "  \"ffn_learned_positions\": true,\n");
    if (ffn_keys && c->attention_out_bias) fprintf(f, "  \"ffn_attention_out_bias\": true,\n");
    if (ffn_keys && c->qk_norm != FFN_QK_NORM_NONE)
        fprintf(f, "  \"ffn_qk_norm\": \"%s\",\n", c->qk_norm == FFN_QK_NORM_HEAD ? "head" : "full");
}
