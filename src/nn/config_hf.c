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
    a->act = act;
    TRY(json_get_str(r, "hidden_act", 0, what, &a->act));
    TRY(get_int(r, what, "hidden_size", 1, 0, 1, FFN_HF_MAX_SIZE, &a->D));
    TRY(get_int(r, what, "num_hidden_layers", 1, 0, 1, FFN_HF_MAX_LAYERS, &a->L));
    TRY(get_int(r, what, "vocab_size", 1, 0, 1, FFN_HF_MAX_SIZE, &a->V));
    return FFN_OK;
}

/* Attention heads: head_dim given, or D / H exactly. */
static ffn_status read_heads(const json_value *r, const char *what, ffn_hf_arch *a,
                             const char *h_key, const char *kv_key) {
    TRY(get_int(r, what, h_key, 1, 0, 1, FFN_HF_MAX_SIZE, &a->H));
    a->Hkv = a->H;
    if (kv_key) TRY(get_int(r, what, kv_key, 0, a->H, 1, FFN_HF_MAX_SIZE, &a->Hkv));
    if (a->H % a->Hkv)
        return ffn_error(FFN_ERR_CONFIG, "%s: %s (%lld) must be a multiple of %s (%lld)", what,
                         h_key, (long long)a->H, kv_key, (long long)a->Hkv);
    /* head_dim absent: Qwen3Config and GemmaConfig default to 128 and 256 */
    const char *t = a->model_type;
    int64_t hd = !strcmp(t, "qwen3") ? 128 : !strcmp(t, "gemma") ? 256 : 0;
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

/* llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, gemma, phi3, olmoe:
 * RMSNorm, gated FFN, RoPE. */
static ffn_status read_llama_family(const json_value *r, const char *what, ffn_hf_arch *a) {
    const char *t = a->model_type;
    const int gemma = !strcmp(t, "gemma");
    a->fam = FFN_HF_LLAMA;
    a->gated = 1;
    TRY(read_hf_common(r, what, a, "silu"));
    if (gemma) { /* its MLP uses hidden_activation (gelu_pytorch_tanh when absent) */
        a->act = "gelu_pytorch_tanh";
        TRY(json_get_str(r, "hidden_activation", 0, what, &a->act));
    }
    TRY(read_heads(r, what, a, "num_attention_heads", "num_key_value_heads"));
    TRY(get_bool(r, what, "tie_word_embeddings", gemma, &a->tied));
    if (!strcmp(t, "qwen3")) a->qk_norm = 2 * a->d_qk;                 /* per head, shared */
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
        TRY(get_int(r, what, "intermediate_size", 1, 0, 1, FFN_HF_MAX_SIZE, &a->F));
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
    const char *t = a->model_type;
    if (!strcmp(t, "llama") || !strcmp(t, "mistral") || !strcmp(t, "mixtral") ||
        !strcmp(t, "qwen2") || !strcmp(t, "qwen2_moe") || !strcmp(t, "qwen3") ||
        !strcmp(t, "gemma") || !strcmp(t, "phi3") || !strcmp(t, "olmoe"))
        TRY(read_llama_family(r, what, a));
    else if (!strcmp(t, "gpt2"))
        TRY(read_gpt2(r, what, a));
    else if (!strcmp(t, "bert"))
        TRY(read_bert(r, what, a));
    else if (!strcmp(t, "deepseek_v2") || !strcmp(t, "deepseek_v3"))
        TRY(read_deepseek(r, what, a));
    else
        return ffn_error(FFN_ERR_CONFIG,
                         "%s: model_type: unknown value '%s' (expected one of llama, mistral, "
                         "mixtral, qwen2, qwen2_moe, qwen3, gemma, phi3, olmoe, gpt2, bert, "
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
