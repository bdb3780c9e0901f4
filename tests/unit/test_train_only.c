/* test_train_only.c -- AdamW with train_only (ffn train --train-only):
 * which tensors each choice trains (by name, MoE and biases included),
 * and after a few steps the frozen tensors are bitwise unchanged with
 * AdamW moments of zero, the trained ones changed with non-zero moments;
 * the norm used for clipping is that of the trained gradients only. */
#include "check.h"
#include "ffn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void names(void) {
    CHECK(ffn_train_only_trains(FFN_TRAIN_FFN, "model.layers.3.mlp.gate_proj.weight"), "gate");
    CHECK(ffn_train_only_trains(FFN_TRAIN_FFN, "model.layers.0.mlp.experts.2.down_proj.bias"), "expert bias");
    CHECK(ffn_train_only_trains(FFN_TRAIN_FFN, "model.layers.0.mlp.gate.weight"), "router");
    CHECK(ffn_train_only_trains(FFN_TRAIN_FFN, "model.layers.12.post_attention_layernorm.weight"), "ffn norm");
    CHECK(!ffn_train_only_trains(FFN_TRAIN_FFN, "model.layers.1.input_layernorm.weight"), "attn norm");
    CHECK(!ffn_train_only_trains(FFN_TRAIN_FFN, "model.layers.1.self_attn.q_proj.weight"), "q");
    CHECK(!ffn_train_only_trains(FFN_TRAIN_FFN, "model.embed_tokens.weight"), "embedding");
    CHECK(ffn_train_only_trains(FFN_TRAIN_ATTENTION, "model.layers.1.self_attn.k_proj.bias"), "k bias");
    CHECK(ffn_train_only_trains(FFN_TRAIN_ATTENTION, "model.layers.1.input_layernorm.weight"), "attn norm");
    CHECK(!ffn_train_only_trains(FFN_TRAIN_ATTENTION, "model.layers.1.mlp.up_proj.weight"), "up");
    CHECK(!ffn_train_only_trains(FFN_TRAIN_ATTENTION, "model.norm.weight"), "final norm");
    CHECK(!ffn_train_only_trains(FFN_TRAIN_ATTENTION, "lm_head.weight"), "head");
    CHECK(ffn_train_only_trains(FFN_TRAIN_ALL, "lm_head.weight"), "all");
    CHECK(!strcmp(ffn_train_only_name(FFN_TRAIN_ATTENTION), "attention"), "name");
}

/* Three AdamW steps on an untied model with biases, a dense and a MoE layer. */
static void steps(ffn_ctx *ctx, ffn_train_only which) {
    ffn_model_config cfg;
    ffn_model_config_default(&cfg);
    cfg.vocab_size = 19;
    cfg.hidden_size = 16;
    cfg.intermediate_size = 24;
    cfg.num_hidden_layers = 2;
    cfg.num_attention_heads = 2;
    cfg.num_key_value_heads = 1;
    cfg.max_position_embeddings = 8;
    cfg.tie_word_embeddings = 0;
    cfg.attention_bias = 1;
    cfg.mlp_bias = 1;
    cfg.num_experts = 3;
    cfg.num_experts_per_tok = 2;
    cfg.moe_layer_freq = 2;
    ffn_model_options mo = {.max_batch = 2, .max_seq = 8, .training = 1};
    ffn_model *m = NULL;
    ffn_adamw *opt = NULL;
    CHECK(ffn_model_create(ctx, &cfg, &mo, &m) == FFN_OK, "%s", ffn_last_error());
    if (!m) return;
    ffn_model_init_weights(m, 7);
    int64_t P = 0;
    float *params = ffn_model_params(m, &P);
    float *before = malloc((size_t)P * sizeof *before);
    memcpy(before, params, (size_t)P * sizeof *before);
    ffn_train_options to;
    ffn_train_options_default(&to);
    to.steps = 3;
    to.warmup = 0;
    to.lr = 1e-2;
    to.train_only = which;
    CHECK(ffn_adamw_create(m, &to, &opt) == FFN_OK, "%s", ffn_last_error());
    int32_t tokens[16], targets[16];
    for (int i = 0; i < 16; i++) tokens[i] = (i * 7) % 19, targets[i] = (i * 5 + 3) % 19;
    double norm = 0;
    for (int64_t s = 1; opt && s <= 3; s++) {
        ffn_model_zero_grads(m);
        CHECK(ffn_model_forward_backward(m, tokens, targets, 2, 8, 1.0f, NULL) == FFN_OK, "%s",
              ffn_last_error());
        if (s == 1) { /* the norm over the trained gradients alone */
            const float *g = ffn_model_grads(m, NULL);
            for (int64_t i = 0; i < ffn_model_num_tensors(m); i++) {
                const ffn_model_tensor *t = ffn_model_tensor_at(m, i);
                if (!ffn_train_only_trains(which, t->name)) continue;
                for (int64_t j = 0; j < t->numel; j++) norm += (double)g[t->offset + j] * g[t->offset + j];
            }
            norm = sqrt(norm);
        }
        double got = 0;
        CHECK(ffn_adamw_step(opt, s, NULL, &got) == FFN_OK, "%s", ffn_last_error());
        if (s == 1) CHECK(fabs(got - norm) <= 1e-9 * norm, "norm %.17g, trained ones %.17g", got, norm);
    }
    const float *mom = ffn_adamw_moments(opt, NULL);
    int64_t n_trained = 0;
    for (int64_t i = 0; mom && i < ffn_model_num_tensors(m); i++) {
        const ffn_model_tensor *t = ffn_model_tensor_at(m, i);
        int trained = ffn_train_only_trains(which, t->name), same = 1, zero = 1;
        n_trained += trained;
        same = !memcmp(before + t->offset, params + t->offset, (size_t)t->numel * sizeof(float));
        for (int64_t j = 0; j < t->numel; j++)
            zero &= mom[t->offset + j] == 0.0f && mom[P + t->offset + j] == 0.0f;
        if (trained) CHECK(!same && !zero, "%s %s: trained but unchanged or moments 0",
                           ffn_train_only_name(which), t->name);
        else CHECK(same && zero, "%s %s: frozen but changed (%d) or moments non-zero (%d)",
                   ffn_train_only_name(which), t->name, !same, !zero);
    }
    CHECK(n_trained > 0, "%s: nothing trained", ffn_train_only_name(which));
    free(before);
    ffn_adamw_free(opt);
    ffn_model_free(m);
}

int main(void) {
    ffn_ctx *ctx = NULL;
    if (ffn_ctx_create(1, &ctx) != FFN_OK) return 1;
    names();
    steps(ctx, FFN_TRAIN_FFN);
    steps(ctx, FFN_TRAIN_ATTENTION);
    ffn_ctx_free(ctx);
    return check_done("test_train_only");
}
