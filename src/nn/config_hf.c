/* config_hf.c -- the parts of a Hugging Face config.json that go beyond
 * Llama's fields, for ffn_model_config_load (model.c): head_dim,
 * partial_rotary_factor, rope_scaling / rope_parameters, and what each
 * model_type implies (qwen3: q/k RMSNorm per head, head_dim 128 when
 * absent; gemma: (1 + w) norms, scaled embeddings, GeGLU; olmoe: q/k
 * RMSNorm over the whole projection, experts of intermediate_size;
 * qwen3_moe: qwen3's norms with qwen2_moe's expert keys, no shared expert;
 * starcoder2: LayerNorm, biases (use_bias), a dense MLP).  One function per concern; every error names the file and the
 * field, what was expected and what was found. */
#include "nn/config_hf.h"
#include "nn/model_internal.h"
#include "ffn/model.h"
#include "format/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    ffn_rope_scaling_type type;
} rope_types[] = {
    {"default", FFN_ROPE_SCALING_NONE}, {"linear", FFN_ROPE_SCALING_LINEAR},
    {"dynamic", FFN_ROPE_SCALING_DYNAMIC}, {"llama3", FFN_ROPE_SCALING_LLAMA3},
    {"yarn", FFN_ROPE_SCALING_YARN}, {"longrope", FFN_ROPE_SCALING_LONGROPE},
    {"su", FFN_ROPE_SCALING_LONGROPE} /* the older name: read, never written */};

/* longrope's short_factor / long_factor lists into out (at most
 * FFN_ROPE_MAX_FACTORS); their count in *n (-1 when absent). */
static ffn_status factor_list(const json_value *o, const char *key, const char *what, float *out,
                              int64_t *n) {
    const json_value *v = json_get(o, key);
    if (!v || v->type != JSON_ARRAY)
        return ffn_error(FFN_ERR_MISSING, "%s.%s: expected a list of numbers (longrope), found %s",
                         what, key, v ? json_type_name(v->type) : "nothing");
    if (v->length > FFN_ROPE_MAX_FACTORS)
        return ffn_error(FFN_ERR_UNSUPPORTED, "%s.%s: %zu factors, ffn holds at most %d", what, key,
                         v->length, FFN_ROPE_MAX_FACTORS);
    for (size_t i = 0; i < v->length; i++) {
        if (v->items[i]->type != JSON_NUMBER)
            return ffn_error(FFN_ERR_CONFIG, "%s.%s[%zu]: expected a number, found %s", what, key,
                             i, json_type_name(v->items[i]->type));
        out[i] = (float)v->items[i]->number;
    }
    *n = (int64_t)v->length;
    return FFN_OK;
}

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
                         "default, linear, dynamic, llama3, yarn or longrope)", what, type);
    ffn_rope_scaling r;
    memset(&r, 0, sizeof r);
    r.type = rope_types[k].type;
    if ((st = json_get_f64(o, "rope_theta", 0, what, &c->rope_theta)) ||
        (st = json_get_f64(o, "partial_rotary_factor", 0, what, &c->partial_rotary_factor)))
        return st;
    const int longrope = r.type == FFN_ROPE_SCALING_LONGROPE; /* factor: from the contexts */
    if (r.type != FFN_ROPE_SCALING_NONE &&
        (st = json_get_f64(o, "factor", !longrope, what, &r.factor)))
        return st;
    if (longrope) {
        int64_t ns = -1, nl = -1;
        if ((st = factor_list(o, "short_factor", what, r.short_factor, &ns)) ||
            (st = factor_list(o, "long_factor", what, r.long_factor, &nl)))
            return st;
        if (ns != nl)
            return ffn_error(FFN_ERR_CONFIG, "%s: short_factor has %lld factors, long_factor %lld: "
                             "expected the same count (half the rotary dim)", what, (long long)ns,
                             (long long)nl);
        r.n_factors = nl;
    }
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

/* A number key that may be null (null: 0, none); absent leaves *v. */
static ffn_status number_or_null(const json_value *root, const char *key, const char *path,
                                 double *v) {
    const json_value *x = json_get(root, key);
    if (x && x->type == JSON_NULL) {
        *v = 0.0;
        return FFN_OK;
    }
    ffn_status st = json_get_f64(root, key, 0, path, v);
    if (st == FFN_OK && x && !(*v > 0.0))
        return ffn_error(FFN_ERR_CONFIG, "%s: %s: expected a positive number or null, found %g",
                         path, key, *v);
    return st;
}

/* Gemma2Config / Gemma3TextConfig beyond Gemma's: soft-capping (Gemma 2:
 * 50 and 30 when absent), query_pre_attn_scalar (256), a sliding window
 * (4096) on all layers but every pattern-th (2; Gemma 3: sliding_window_pattern
 * or layer_types, 6), Gemma 3's local RoPE base (10000) and q/k norms, and
 * the output norms; ffn's own keys for the same on any model_type. */
static ffn_status gemma2_extras(const json_value *root, const char *path, const char *model_type,
                                ffn_model_config *c) {
    const int g2 = !strcmp(model_type, "gemma2"), g3 = !strcmp(model_type, "gemma3_text");
    ffn_status st;
    if (g2 || g3) {
        c->post_norms = 1;
        c->query_pre_attn_scalar = 256;
        c->sliding_window = 4096;
        c->sliding_window_pattern = g2 ? 2 : 6;
        if (g2) c->attn_logit_softcapping = 50, c->final_logit_softcapping = 30;
        if (g3) c->qk_norm = FFN_QK_NORM_HEAD, c->rope_local_base_freq = 10000;
    }
    if ((st = number_or_null(root, "attn_logit_softcapping", path, &c->attn_logit_softcapping)) ||
        (st = number_or_null(root, "final_logit_softcapping", path, &c->final_logit_softcapping)) ||
        (st = json_get_f64(root, "query_pre_attn_scalar", 0, path, &c->query_pre_attn_scalar)) ||
        (st = json_get_f64(root, "rope_local_base_freq", 0, path, &c->rope_local_base_freq)) ||
        (st = json_get_i64(root, "ffn_sliding_window", 0, path, &c->sliding_window)) ||
        (st = json_get_i64(root, "ffn_sliding_window_pattern", 0, path, &c->sliding_window_pattern)) ||
        (st = json_get_bool(root, "ffn_post_norms", 0, path, &c->post_norms)))
        return st;
    if (!g2 && !g3) return FFN_OK;
    const json_value *w = json_get(root, "sliding_window");
    if (w && w->type == JSON_NULL) c->sliding_window = 0;
    else if ((st = json_get_i64(root, "sliding_window", 0, path, &c->sliding_window))) return st;
    if (g3 && (st = json_get_i64(root, "sliding_window_pattern", 0, path, &c->sliding_window_pattern)))
        return st;
    const json_value *lt = json_get(root, "layer_types");
    if (lt && lt->type != JSON_NULL) {
        /* a list of "sliding_attention" / "full_attention": a period ffn holds */
        if (lt->type != JSON_ARRAY || lt->length != (size_t)c->num_hidden_layers)
            return ffn_error(FFN_ERR_CONFIG, "%s: layer_types: expected a list of %lld layer "
                             "types", path, (long long)c->num_hidden_layers);
        int64_t first_full = -1;
        for (size_t i = 0; i < lt->length; i++) {
            const json_value *e = lt->items[i];
            const int full = e->type == JSON_STRING && !strcmp(e->string, "full_attention");
            const int sl = e->type == JSON_STRING && !strcmp(e->string, "sliding_attention");
            if (!full && !sl)
                return ffn_error(FFN_ERR_UNSUPPORTED, "%s: layer_types[%zu]: expected "
                                 "\"sliding_attention\" or \"full_attention\"", path, i);
            if (full && first_full < 0) first_full = (int64_t)i;
        }
        c->sliding_window_pattern = first_full < 0 ? 0 : first_full + 1;
        for (size_t i = 0; i < lt->length; i++) {
            const int full = !strcmp(lt->items[i]->string, "full_attention");
            if (c->sliding_window > 0 && full == ffn_cfg_layer_slides(c, (int64_t)i))
                return ffn_error(FFN_ERR_UNSUPPORTED, "%s: layer_types[%zu] is %s: ffn's layers "
                                 "slide in a period (every %lld-th full), which this list does not "
                                 "follow", path, i, lt->items[i]->string,
                                 (long long)c->sliding_window_pattern);
        }
    }
    return FFN_OK;
}

ffn_status ffn_config_hf_extras(const json_value *root, const char *path, const char *model_type,
                                ffn_model_config *c) {
    ffn_status st;
    const int qwen3 = !strcmp(model_type, "qwen3") || !strcmp(model_type, "qwen3_moe");
    const int gemma = !strcmp(model_type, "gemma") || !strcmp(model_type, "gemma2") ||
                      !strcmp(model_type, "gemma3_text");
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
    if ((st = gemma2_extras(root, path, model_type, c))) return st;
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
    ffn_rope_scaling *lr = &c->rope_scaling;
    if (lr->type == FFN_ROPE_SCALING_LONGROPE) {
        /* Phi-3 keeps the original context beside max_position_embeddings; the factor is
         * their ratio then (transformers' _compute_longrope_parameters), 1 at least */
        int64_t O = 0;
        if ((st = json_get_i64(root, "original_max_position_embeddings", 0, path, &O))) return st;
        if (O > 0) {
            lr->original_max_position_embeddings = O;
            lr->factor = (double)c->max_position_embeddings / (double)O;
        }
        if (!(lr->factor >= 1.0)) lr->factor = 1.0;
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
        for (int l = 0; r->type == FFN_ROPE_SCALING_LONGROPE && l < 2; l++) {
            const float *fv = l ? r->long_factor : r->short_factor;
            fprintf(f, ", \"%s\": [", l ? "long_factor" : "short_factor");
            for (int64_t j = 0; j < r->n_factors; j++)
                fprintf(f, "%s%.9g", j ? ", " : "", (double)fv[j]);
            fprintf(f, "]");
        }
        fprintf(f, "},\n");
    }
    if (ffn_keys && c->norm_weight_offset != 0.0)
        fprintf(f, "  \"ffn_norm_weight_offset\": %.17g,\n", c->norm_weight_offset);
    if (ffn_keys && c->embed_scale != 0.0)
        fprintf(f, "  \"ffn_embed_scale\": %.17g,\n", c->embed_scale);
    if (ffn_keys && c->norm_type == FFN_NORM_LAYER) fprintf(f, "  \"ffn_norm_type\": \"layer\",\n");
    if (ffn_keys && c->learned_positions) fprintf(f, "  \"ffn_learned_positions\": true,\n");
    if (ffn_keys && c->attention_out_bias) fprintf(f, "  \"ffn_attention_out_bias\": true,\n");
    /* Gemma 2/3's: Hugging Face's names, and ffn's for what a model_type implies there */
    if (c->attn_logit_softcapping > 0)
        fprintf(f, "  \"attn_logit_softcapping\": %.17g,\n", c->attn_logit_softcapping);
    else if (c->post_norms) fprintf(f, "  \"attn_logit_softcapping\": null,\n");
    if (c->final_logit_softcapping > 0)
        fprintf(f, "  \"final_logit_softcapping\": %.17g,\n", c->final_logit_softcapping);
    else if (c->post_norms) fprintf(f, "  \"final_logit_softcapping\": null,\n");
    /* a model_type with defaults of its own (gemma2: 256, gemma3: 10000) gets every value */
    if (c->query_pre_attn_scalar > 0 || c->post_norms)
        fprintf(f, "  \"query_pre_attn_scalar\": %.17g,\n", c->query_pre_attn_scalar > 0
                ? c->query_pre_attn_scalar : (double)ffn_cfg_head_dim(c));
    if (c->rope_local_base_freq > 0 || (c->post_norms && c->qk_norm == FFN_QK_NORM_HEAD))
        fprintf(f, "  \"rope_local_base_freq\": %.17g,\n", c->rope_local_base_freq > 0
                ? c->rope_local_base_freq : c->rope_theta);
    if (c->post_norms) {
        if (c->sliding_window > 0) fprintf(f, "  \"sliding_window\": %lld,\n", (long long)c->sliding_window);
        else fprintf(f, "  \"sliding_window\": null,\n");
        if (c->sliding_window_pattern > 0)
            fprintf(f, "  \"sliding_window_pattern\": %lld,\n", (long long)c->sliding_window_pattern);
    }
    if (ffn_keys && c->sliding_window > 0)
        fprintf(f, "  \"ffn_sliding_window\": %lld,\n  \"ffn_sliding_window_pattern\": %lld,\n",
                (long long)c->sliding_window, (long long)c->sliding_window_pattern);
    if (ffn_keys && c->post_norms) fprintf(f, "  \"ffn_post_norms\": true,\n");
    if (ffn_keys && c->qk_norm != FFN_QK_NORM_NONE)
        fprintf(f, "  \"ffn_qk_norm\": \"%s\",\n", c->qk_norm == FFN_QK_NORM_HEAD ? "head" : "full");
}

/* ==== every family's architecture, for counting (config_hf.h) ==================== */

/* ---- reading fields ------------------------------------------------------ */

/* An integer field in [lo, hi]; absent (or null) gives `dflt` unless
 * required.  Messages name the file and the field. */
static ffn_status get_int(const json_value *root, const char *what, const char *key, int required,
                          int64_t dflt, int64_t lo, int64_t hi, int64_t *out) {
    int64_t v = dflt;
    ffn_status st = json_get_i64(root, key, required, what, &v);
    if (st != FFN_OK) return st;
    const json_value *present = json_get(root, key);
    if (!present || present->type == JSON_NULL) { /* the default, unchecked: 0 may mean "none" */
        *out = dflt;
        return FFN_OK;
    }
    if (v < lo || v > hi)
        return ffn_error(FFN_ERR_CONFIG, "%s: %s: expected an integer in [%lld, %lld], found %lld",
                         what, key, (long long)lo, (long long)hi, (long long)v);
    *out = v;
    return FFN_OK;
}

static ffn_status get_bool(const json_value *root, const char *what, const char *key, int dflt,
                           int *out) {
    int v = dflt;
    ffn_status st = json_get_bool(root, key, 0, what, &v);
    if (st != FFN_OK) return st;
    *out = v;
    return FFN_OK;
}

#define TRY(expr)                          \
    do {                                   \
        ffn_status st_ = (expr);           \
        if (st_ != FFN_OK) return st_;     \
    } while (0)

/* The fields that llama, bert and deepseek configs name alike:
 * hidden_act (default `act`), hidden_size, num_hidden_layers, vocab_size. */
static ffn_status read_hf_common(const json_value *r, const char *what, ffn_hf_arch *a,
                                 const char *act) {
    const int d = a->text_defaults;
    a->act = act;
    TRY(json_get_str(r, "hidden_act", 0, what, &a->act));
    TRY(get_int(r, what, "hidden_size", !d, d ? 2304 : 0, 1, FFN_HF_MAX_SIZE, &a->D));
    TRY(get_int(r, what, "num_hidden_layers", !d, d ? 26 : 0, 1, FFN_HF_MAX_LAYERS, &a->L));
    TRY(get_int(r, what, "vocab_size", !d, d ? 262208 : 0, 1, FFN_HF_MAX_SIZE, &a->V));
    return FFN_OK;
}

/* Attention heads: head_dim given, or D / H exactly. */
static ffn_status read_heads(const json_value *r, const char *what, ffn_hf_arch *a,
                             const char *h_key, const char *kv_key) {
    const int d = a->text_defaults; /* Gemma3TextConfig: 8 heads, 4 kv heads */
    TRY(get_int(r, what, h_key, !d, d ? 8 : 0, 1, FFN_HF_MAX_SIZE, &a->H));
    a->Hkv = a->H;
    if (kv_key) TRY(get_int(r, what, kv_key, 0, d ? 4 : a->H, 1, FFN_HF_MAX_SIZE, &a->Hkv));
    if (a->H % a->Hkv)
        return ffn_error(FFN_ERR_CONFIG, "%s: %s (%lld) must be a multiple of %s (%lld)", what,
                         h_key, (long long)a->H, kv_key, (long long)a->Hkv);
    /* head_dim absent: Qwen3Config and GemmaConfig default to 128 and 256 */
    const char *t = a->model_type;
    int64_t hd = !strcmp(t, "qwen3") ? 128
                 : !strcmp(t, "gemma") || !strcmp(t, "gemma2") || !strcmp(t, "gemma3_text") ? 256
                                                                                           : 0;
    if (a->fam == FFN_HF_LLAMA) TRY(get_int(r, what, "head_dim", 0, hd, 1, FFN_HF_MAX_SIZE, &hd));
    if (!hd) {
        if (a->D % a->H)
            return ffn_error(FFN_ERR_CONFIG,
                             "%s: hidden size %lld is not a multiple of %s %lld (and no head_dim)",
                             what, (long long)a->D, h_key, (long long)a->H);
        hd = a->D / a->H;
    }
    a->d_qk = a->d_v = hd;
    return FFN_OK;
}

/* llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, gemma, gemma2,
 * gemma3_text, phi3, olmoe: RMSNorm, gated FFN, RoPE. */
static ffn_status read_llama_family(const json_value *r, const char *what, ffn_hf_arch *a) {
    const char *t = a->model_type;
    const int g2 = !strcmp(t, "gemma2"), g3 = !strcmp(t, "gemma3_text");
    const int gemma = !strcmp(t, "gemma") || g2 || g3;
    a->fam = FFN_HF_LLAMA;
    a->gated = 1;
    TRY(read_hf_common(r, what, a, "silu"));
    if (gemma) { /* its MLP uses hidden_activation (gelu_pytorch_tanh when absent) */
        a->act = "gelu_pytorch_tanh";
        TRY(json_get_str(r, "hidden_activation", 0, what, &a->act));
    }
    TRY(read_heads(r, what, a, "num_attention_heads", "num_key_value_heads"));
    TRY(get_bool(r, what, "tie_word_embeddings", gemma, &a->tied));
    if (!strcmp(t, "qwen3") || g3) a->qk_norm = 2 * a->d_qk;           /* per head, shared */
    if (g2 || g3) a->post_norms = 2 * a->D; /* post_attention, post_feedforward */
    if (!strcmp(t, "olmoe")) a->qk_norm = (a->H + a->Hkv) * a->d_qk;  /* whole projections */
    if (!strcmp(t, "llama") || !strcmp(t, "qwen3")) {
        int ab = 0, mb = 0;
        TRY(get_bool(r, what, "attention_bias", 0, &ab));
        TRY(get_bool(r, what, "mlp_bias", 0, &mb));
        a->qkv_bias = a->o_bias = ab;
        a->ffn_bias = mb;
    } else if (!strcmp(t, "qwen2") || !strcmp(t, "qwen2_moe")) {
        a->qkv_bias = 1; /* q/k/v carry biases, o does not */
    }
    if (!strcmp(t, "mixtral")) {
        /* every layer is a block_sparse_moe of E experts of width intermediate_size */
        TRY(get_int(r, what, "num_local_experts", 1, 0, 1, FFN_HF_MAX_SIZE, &a->E));
        TRY(get_int(r, what, "num_experts_per_tok", 1, 0, 1, FFN_HF_MAX_SIZE, &a->K));
        TRY(get_int(r, what, "intermediate_size", 1, 0, 1, FFN_HF_MAX_SIZE, &a->Fm));
        a->sparse_step = 1;
    } else if (!strcmp(t, "olmoe")) {
        /* every layer is MoE; the experts are intermediate_size wide */
        TRY(get_int(r, what, "num_experts", 1, 0, 1, FFN_HF_MAX_SIZE, &a->E));
        TRY(get_int(r, what, "num_experts_per_tok", 1, 0, 1, FFN_HF_MAX_SIZE, &a->K));
        TRY(get_int(r, what, "intermediate_size", 1, 0, 1, FFN_HF_MAX_SIZE, &a->Fm));
        a->sparse_step = 1;
    } else if (!strcmp(t, "qwen2_moe")) {
        TRY(get_int(r, what, "num_experts", 1, 0, 0, FFN_HF_MAX_SIZE, &a->E));
        TRY(get_int(r, what, "num_experts_per_tok", 1, 0, 1, FFN_HF_MAX_SIZE, &a->K));
        TRY(get_int(r, what, "moe_intermediate_size", 1, 0, 1, FFN_HF_MAX_SIZE, &a->Fm));
        TRY(get_int(r, what, "shared_expert_intermediate_size", 1, 0, 0, FFN_HF_MAX_SIZE, &a->Fs));
        TRY(get_int(r, what, "decoder_sparse_step", 0, 1, 1, FFN_HF_MAX_LAYERS, &a->sparse_step));
        TRY(get_int(r, what, "intermediate_size", 0, 0, 1, FFN_HF_MAX_SIZE, &a->F));
    } else {
        TRY(get_int(r, what, "intermediate_size", !a->text_defaults, a->text_defaults ? 9216 : 0, 1,
                    FFN_HF_MAX_SIZE, &a->F));
    }
    return FFN_OK;
}

static ffn_status read_gpt2(const json_value *r, const char *what, ffn_hf_arch *a) {
    a->fam = FFN_HF_GPT2;
    a->act = "gelu_new";
    TRY(json_get_str(r, "activation_function", 0, what, &a->act));
    TRY(get_int(r, what, "n_embd", 1, 0, 1, FFN_HF_MAX_SIZE, &a->D));
    TRY(get_int(r, what, "n_layer", 1, 0, 1, FFN_HF_MAX_LAYERS, &a->L));
    TRY(get_int(r, what, "vocab_size", 1, 0, 1, FFN_HF_MAX_SIZE, &a->V));
    TRY(get_int(r, what, "n_positions", 1, 0, 1, FFN_HF_MAX_SIZE, &a->P));
    TRY(read_heads(r, what, a, "n_head", NULL));
    int64_t four_d = 0;
    if (__builtin_mul_overflow(a->D, 4, &four_d)) four_d = FFN_HF_MAX_SIZE + 1;
    TRY(get_int(r, what, "n_inner", 0, four_d, 1, FFN_HF_MAX_SIZE, &a->F)); /* null: 4·n_embd */
    a->ffn_bias = a->qkv_bias = a->o_bias = a->norm_bias = 1;
    TRY(get_bool(r, what, "tie_word_embeddings", 1, &a->tied)); /* lm_head is wte */
    return FFN_OK;
}

/* starcoder2: LayerNorm with biases, GQA with RoPE, q/k/v/o and MLP biases
 * when use_bias (true), a dense MLP (c_fc, c_proj), a tied head by default. */
static ffn_status read_starcoder2(const json_value *r, const char *what, ffn_hf_arch *a) {
    a->fam = FFN_HF_LLAMA; /* RoPE attention; head_dim read as for llama */
    TRY(read_hf_common(r, what, a, "gelu_pytorch_tanh"));
    TRY(read_heads(r, what, a, "num_attention_heads", "num_key_value_heads"));
    TRY(get_int(r, what, "intermediate_size", 1, 0, 1, FFN_HF_MAX_SIZE, &a->F));
    int use_bias = 1;
    TRY(get_bool(r, what, "use_bias", 1, &use_bias));
    a->ffn_bias = a->qkv_bias = a->o_bias = use_bias;
    a->norm_bias = 1; /* nn.LayerNorm, whatever use_bias says */
    TRY(get_bool(r, what, "tie_word_embeddings", 1, &a->tied));
    return FFN_OK;
}

static ffn_status read_bert(const json_value *r, const char *what, ffn_hf_arch *a) {
    a->fam = FFN_HF_BERT;
    TRY(read_hf_common(r, what, a, "gelu"));
    TRY(get_int(r, what, "intermediate_size", 1, 0, 1, FFN_HF_MAX_SIZE, &a->F));
    TRY(get_int(r, what, "max_position_embeddings", 1, 0, 1, FFN_HF_MAX_SIZE, &a->P));
    TRY(get_int(r, what, "type_vocab_size", 0, 2, 0, FFN_HF_MAX_SIZE, &a->type_vocab));
    TRY(read_heads(r, what, a, "num_attention_heads", NULL));
    const char *pos = "absolute";
    TRY(json_get_str(r, "position_embedding_type", 0, what, &pos));
    if (!strcmp(pos, "relative_key") || !strcmp(pos, "relative_key_query"))
        a->rel_pos = 1;
    else if (strcmp(pos, "absolute"))
        return ffn_error(FFN_ERR_CONFIG,
                         "%s: position_embedding_type: unknown value '%s' (expected absolute, "
                         "relative_key or relative_key_query)", what, pos);
    a->ffn_bias = a->qkv_bias = a->o_bias = a->norm_bias = 1;
    a->tied = 0; /* BertModel has no LM head; its head is the pooler */
    return FFN_OK;
}

/* deepseek_v2 / deepseek_v3: MLA attention, DeepSeekMoE with shared experts. */
static ffn_status read_deepseek(const json_value *r, const char *what, ffn_hf_arch *a) {
    int v3 = !strcmp(a->model_type, "deepseek_v3");
    a->fam = FFN_HF_DEEPSEEK;
    a->gated = 1;
    a->mla = 1;
    TRY(read_hf_common(r, what, a, "silu"));
    TRY(get_int(r, what, "intermediate_size", 1, 0, 1, FFN_HF_MAX_SIZE, &a->F));
    TRY(get_int(r, what, "num_attention_heads", 1, 0, 1, FFN_HF_MAX_SIZE, &a->H));
    a->Hkv = a->H; /* MLA: every head has its own keys, decompressed from the latent */
    /* q_lora_rank null: no q compression */
    TRY(get_int(r, what, "q_lora_rank", 0, 0, 1, FFN_HF_MAX_SIZE, &a->q_lora));
    TRY(get_int(r, what, "kv_lora_rank", 1, 0, 1, FFN_HF_MAX_SIZE, &a->kv_lora));
    TRY(get_int(r, what, "qk_nope_head_dim", 1, 0, 0, FFN_HF_MAX_SIZE, &a->nope));
    TRY(get_int(r, what, "qk_rope_head_dim", 1, 0, 0, FFN_HF_MAX_SIZE, &a->rope));
    TRY(get_int(r, what, "v_head_dim", 1, 0, 1, FFN_HF_MAX_SIZE, &a->d_v));
    a->d_qk = a->nope + a->rope;
    if (a->d_qk <= 0)
        return ffn_error(FFN_ERR_CONFIG, "%s: qk_nope_head_dim + qk_rope_head_dim must be > 0",
                         what);
    int ab = 0;
    TRY(get_bool(r, what, "attention_bias", 0, &ab));
    a->qkv_bias = a->o_bias = ab;
    TRY(get_bool(r, what, "tie_word_embeddings", 0, &a->tied));
    /* n_routed_experts null: a dense model */
    TRY(get_int(r, what, "n_routed_experts", 0, 0, 1, FFN_HF_MAX_SIZE, &a->E));
    if (a->E) {
        TRY(get_int(r, what, "num_experts_per_tok", 1, 0, 1, FFN_HF_MAX_SIZE, &a->K));
        TRY(get_int(r, what, "moe_intermediate_size", 1, 0, 1, FFN_HF_MAX_SIZE, &a->Fm));
        TRY(get_int(r, what, "n_shared_experts", 0, 0, 0, FFN_HF_MAX_SIZE, &a->n_shared));
        TRY(get_int(r, what, "first_k_dense_replace", 0, 0, 0, FFN_HF_MAX_LAYERS,
                    &a->first_k_dense));
        TRY(get_int(r, what, "moe_layer_freq", 0, 1, 1, FFN_HF_MAX_LAYERS, &a->moe_freq));
        /* the bias that corrects expert scores for selection (aux-loss-free balancing)
         * exists with topk_method "noaux_tc", V3's method */
        const char *topk = v3 ? "noaux_tc" : "greedy";
        TRY(json_get_str(r, "topk_method", 0, what, &topk));
        a->e_bias = !strcmp(topk, "noaux_tc");
    }
    if (v3) TRY(get_int(r, what, "num_nextn_predict_layers", 0, 0, 0, 64, &a->mtp_layers));
    return FFN_OK;
}

/* qwen2_moe's mlp_only_layers: an array of layer indices in [0, L), into
 * the mask a->mlp_only (a long, even repetitive, list costs O(L + length)). */
static ffn_status read_mlp_only(const json_value *r, const char *what, ffn_hf_arch *a) {
    const json_value *m = json_get(r, "mlp_only_layers");
    if (!m || m->type == JSON_NULL) return FFN_OK;
    if (m->type != JSON_ARRAY)
        return ffn_error(FFN_ERR_CONFIG, "%s: mlp_only_layers: expected an array of layer indices",
                         what);
    for (size_t i = 0; i < m->length; i++) {
        const json_value *x = m->items[i];
        if (x->type != JSON_NUMBER || !x->is_integer || x->integer < 0 || x->integer >= a->L)
            return ffn_error(FFN_ERR_CONFIG,
                             "%s: mlp_only_layers[%zu]: expected a layer index in [0, %lld)", what,
                             i, (long long)a->L);
    }
    if (!m->length) return FFN_OK;
    if (!(a->mlp_only = calloc((size_t)a->L, 1)))
        return ffn_error(FFN_ERR_NOMEM, "%s: out of memory", what);
    for (size_t j = 0; j < m->length; j++) a->mlp_only[m->items[j]->integer] = 1;
    return FFN_OK;
}

static ffn_status read_arch(const json_value *r, const char *what, ffn_hf_arch *a) {
    if (!r || r->type != JSON_OBJECT)
        return ffn_error(FFN_ERR_CONFIG, "%s: expected a JSON object at the top level", what);
    memset(a, 0, sizeof *a);
    TRY(json_get_str(r, "model_type", 1, what, &a->model_type));
    char text_what[600];
    if (!strcmp(a->model_type, "gemma3")) { /* Gemma3ForConditionalGeneration: its text model */
        snprintf(text_what, sizeof text_what, "%s: text_config", what);
        what = text_what;
        r = json_get(r, "text_config");
        if (!r || r->type != JSON_OBJECT)
            return ffn_error(FFN_ERR_CONFIG, "%s: expected an object (model_type gemma3 is "
                             "Gemma3ForConditionalGeneration: its text model's config)", what);
        a->model_type = "gemma3_text";
        TRY(json_get_str(r, "model_type", 0, what, &a->model_type));
        if (strcmp(a->model_type, "gemma3_text"))
            return ffn_error(FFN_ERR_CONFIG, "%s: model_type '%.40s', expected gemma3_text", what,
                             a->model_type);
        a->text_defaults = 1;
    }
    const char *t = a->model_type;
    if (!strcmp(t, "llama") || !strcmp(t, "mistral") || !strcmp(t, "mixtral") ||
        !strcmp(t, "qwen2") || !strcmp(t, "qwen2_moe") || !strcmp(t, "qwen3") ||
        !strcmp(t, "gemma") || !strcmp(t, "gemma2") || !strcmp(t, "gemma3_text") ||
        !strcmp(t, "phi3") || !strcmp(t, "olmoe"))
        TRY(read_llama_family(r, what, a));
    else if (!strcmp(t, "gpt2"))
        TRY(read_gpt2(r, what, a));
    else if (!strcmp(t, "starcoder2"))
        TRY(read_starcoder2(r, what, a));
    else if (!strcmp(t, "bert"))
        TRY(read_bert(r, what, a));
    else if (!strcmp(t, "deepseek_v2") || !strcmp(t, "deepseek_v3"))
        TRY(read_deepseek(r, what, a));
    else
        return ffn_error(FFN_ERR_CONFIG,
                         "%s: model_type: unknown value '%s' (expected one of llama, mistral, "
                         "mixtral, qwen2, qwen2_moe, qwen3, gemma, gemma2, gemma3_text, phi3, olmoe, "
                         "gpt2, starcoder2, bert, "
                         "deepseek_v2, deepseek_v3)",
                         what, t);
    if (a->E && a->K > a->E)
        return ffn_error(FFN_ERR_CONFIG,
                         "%s: num_experts_per_tok (%lld) exceeds the number of experts (%lld)",
                         what, (long long)a->K, (long long)a->E);
    if (!strcmp(t, "qwen2_moe")) TRY(read_mlp_only(r, what, a));
    return FFN_OK;
}

ffn_status ffn_config_hf_read_arch(const char *path, const char *text, size_t len,
                                   const char *what, json_doc **doc, ffn_hf_arch *a) {
    *doc = NULL;
    memset(a, 0, sizeof *a);
    TRY(path ? json_parse_file(path, doc) : json_parse(text, len, what, doc));
    return read_arch(json_root(*doc), what, a);
}
