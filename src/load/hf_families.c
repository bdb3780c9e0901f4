/* hf_families.c -- the tensor layouts of Hugging Face families whose files
 * do not use the model's own (Llama) names one to one, for the loader and
 * the writer in hf_checkpoint.c (starcoder2: mlp.c_fc / mlp.c_proj for the
 * dense MLP's up / down):
 *   phi3  self_attn.qkv_proj (q | k | v rows) and mlp.gate_up_proj (gate
 *         rows, then up): one file tensor fills the model's adjacent q, k, v
 *         (gate, up) tensors;
 *   gpt2  transformer.* names, c_attn fused like qkv_proj, and Conv1D
 *         weights stored [in, out] (the transpose of the model's (out, in)).
 * Also the config.json of gpt2 (its keys are not Llama's). */
#include "load/checkpoint_internal.h"
#include "nn/model_internal.h"
#include "format/json.h"

#include <stdio.h>
#include <string.h>

/* The layer-local part of a table name ("self_attn.q_proj.weight") or NULL. */
static const char *layer_suffix(const ffn_model_tensor *t) {
    if (t->layer < 0) return NULL;
    char pre[48];
    int n = snprintf(pre, sizeof pre, "model.layers.%lld.", (long long)t->layer);
    return strncmp(t->name, pre, (size_t)n) ? NULL : t->name + n;
}

static int phi3_tensor(const ffn_model_tensor *t, const ffn_model_config *c, char *out, size_t cap,
                       int64_t *rows) {
    const char *sfx = t->expert >= 0 ? NULL : layer_suffix(t);
    if (!sfx) return HF_MAP_SAME;
    if (!strcmp(sfx, "self_attn.k_proj.weight") || !strcmp(sfx, "self_attn.v_proj.weight") ||
        !strcmp(sfx, "mlp.up_proj.weight"))
        return HF_MAP_COVERED;
    const int qkv = !strcmp(sfx, "self_attn.q_proj.weight");
    if (!qkv && strcmp(sfx, "mlp.gate_proj.weight")) return HF_MAP_SAME;
    *rows = qkv ? (c->num_attention_heads + 2 * c->num_key_value_heads) * ffn_cfg_head_dim(c)
                : 2 * c->intermediate_size;
    snprintf(out, cap, "model.layers.%lld.%s", (long long)t->layer,
             qkv ? "self_attn.qkv_proj.weight" : "mlp.gate_up_proj.weight");
    return HF_MAP_FUSED;
}

static int gpt2_tensor(const ffn_model_tensor *t, const ffn_model_config *c, char *out, size_t cap,
                       int64_t *rows, int *transpose) {
    static const struct {
        const char *model, *file;
        int transpose, fused, covered;
    } map[] = {
        {"input_layernorm.weight", "ln_1.weight", 0, 0, 0},
        {"input_layernorm.bias", "ln_1.bias", 0, 0, 0},
        {"post_attention_layernorm.weight", "ln_2.weight", 0, 0, 0},
        {"post_attention_layernorm.bias", "ln_2.bias", 0, 0, 0},
        {"self_attn.q_proj.weight", "attn.c_attn.weight", 1, 1, 0},
        {"self_attn.q_proj.bias", "attn.c_attn.bias", 0, 1, 0},
        {"self_attn.k_proj.weight", NULL, 0, 0, 1},
        {"self_attn.v_proj.weight", NULL, 0, 0, 1},
        {"self_attn.k_proj.bias", NULL, 0, 0, 1},
        {"self_attn.v_proj.bias", NULL, 0, 0, 1},
        {"self_attn.o_proj.weight", "attn.c_proj.weight", 1, 0, 0},
        {"self_attn.o_proj.bias", "attn.c_proj.bias", 0, 0, 0},
        {"mlp.up_proj.weight", "mlp.c_fc.weight", 1, 0, 0},
        {"mlp.up_proj.bias", "mlp.c_fc.bias", 0, 0, 0},
        {"mlp.down_proj.weight", "mlp.c_proj.weight", 1, 0, 0},
        {"mlp.down_proj.bias", "mlp.c_proj.bias", 0, 0, 0},
    };
    if (!strcmp(t->name, "model.embed_tokens.weight")) snprintf(out, cap, "transformer.wte.weight");
    else if (!strcmp(t->name, "model.embed_positions.weight")) snprintf(out, cap, "transformer.wpe.weight");
    else if (!strcmp(t->name, "model.norm.weight")) snprintf(out, cap, "transformer.ln_f.weight");
    else if (!strcmp(t->name, "model.norm.bias")) snprintf(out, cap, "transformer.ln_f.bias");
    else if (!strcmp(t->name, "lm_head.weight")) snprintf(out, cap, "lm_head.weight");
    else {
        const char *sfx = t->expert >= 0 ? NULL : layer_suffix(t);
        for (size_t i = 0; sfx && i < sizeof map / sizeof map[0]; i++) {
            if (strcmp(sfx, map[i].model)) continue;
            if (map[i].covered) return HF_MAP_COVERED;
            snprintf(out, cap, "transformer.h.%lld.%s", (long long)t->layer, map[i].file);
            *transpose = map[i].transpose;
            if (!map[i].fused) return HF_MAP_RENAMED;
            *rows = (c->num_attention_heads + 2 * c->num_key_value_heads) * ffn_cfg_head_dim(c);
            return HF_MAP_FUSED;
        }
        snprintf(out, cap, "%s", t->name); /* not a GPT-2 tensor: the loader names it missing */
    }
    return HF_MAP_RENAMED;
}

/* starcoder2: nn.Linear [out, in] as the model's, the MLP named c_fc / c_proj */
static int starcoder2_tensor(const ffn_model_tensor *t, char *out, size_t cap) {
    const char *sfx = t->expert >= 0 ? NULL : layer_suffix(t);
    if (!sfx || strncmp(sfx, "mlp.", 4)) return HF_MAP_SAME;
    const char *rest = !strncmp(sfx, "mlp.up_proj.", 12) ? sfx + 12
                       : !strncmp(sfx, "mlp.down_proj.", 14) ? sfx + 14 : NULL;
    if (!rest) return HF_MAP_SAME;
    snprintf(out, cap, "model.layers.%lld.mlp.%s.%s", (long long)t->layer,
             sfx[4] == 'u' ? "c_fc" : "c_proj", rest);
    return HF_MAP_RENAMED;
}

int hf_family_tensor(const ffn_model_tensor *t, const char *model_type, const ffn_model_config *c,
                     char *out, size_t cap, int64_t *rows, int *transpose) {
    *rows = 0;
    *transpose = 0;
    if (!strcmp(model_type, "starcoder2")) return starcoder2_tensor(t, out, cap);
    if (!strcmp(model_type, "phi3")) return phi3_tensor(t, c, out, cap, rows);
    if (!strcmp(model_type, "gpt2")) return gpt2_tensor(t, c, out, cap, rows, transpose);
    return HF_MAP_SAME;
}

int hf_family_ignorable(const char *name, const char *model_type) {
    if (strcmp(model_type, "gpt2")) return 0;
    /* the causal-mask buffers older GPT-2 files carry */
    size_t n = strlen(name);
    const char *a = ".attn.bias", *b = ".attn.masked_bias";
    return !strncmp(name, "transformer.h.", 14) &&
           ((n > strlen(a) && !strcmp(name + n - strlen(a), a)) ||
            (n > strlen(b) && !strcmp(name + n - strlen(b), b)));
}

int hf_family_is_gpt2(const ffn_model_config *c) {
    return c->norm_type == FFN_NORM_LAYER && c->learned_positions && c->attention_bias &&
           c->attention_out_bias && c->mlp_type == FFN_MODEL_MLP_DENSE && c->mlp_bias &&
           c->num_key_value_heads == c->num_attention_heads && c->num_experts == 0 &&
           ffn_cfg_head_dim(c) * c->num_attention_heads == c->hidden_size &&
           c->qk_norm == FFN_QK_NORM_NONE && c->embed_scale == 0.0;
}

ffn_status hf_write_gpt2_config(const ffn_model_config *c, const char *dtype, int64_t ctx_len,
                                FILE *f) {
    fprintf(f, "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n");
    fprintf(f, "  \"vocab_size\": %lld,\n  \"n_embd\": %lld,\n  \"n_layer\": %lld,\n"
            "  \"n_head\": %lld,\n  \"n_positions\": %lld,\n  \"n_inner\": %lld,\n",
            (long long)c->vocab_size, (long long)c->hidden_size, (long long)c->num_hidden_layers,
            (long long)c->num_attention_heads, (long long)ctx_len, (long long)c->intermediate_size);
    fprintf(f, "  \"activation_function\": ");
    json_write_string(f, c->hidden_act == FFN_ACT_GELU_TANH ? "gelu_new" : ffn_act_name(c->hidden_act));
    fprintf(f, ",\n  \"layer_norm_epsilon\": %.17g,\n  \"tie_word_embeddings\": %s,\n"
            "  \"scale_attn_weights\": true,\n  \"torch_dtype\": \"%s\"\n}\n",
            c->rms_norm_eps, c->tie_word_embeddings ? "true" : "false",
            !strcmp(dtype, "F16") ? "float16" : !strcmp(dtype, "BF16") ? "bfloat16" : "float32");
    return ferror(f) ? ffn_error(FFN_ERR_IO, "config.json: write failed") : FFN_OK;
}
