/* test_model.c -- the decoder through its public API (include/ffn/model.h):
 *   - config validation errors name the field; config.json round trip, its
 *     numbers written as the shortest decimal that reads back the same;
 *   - the tensor table: HF names, contiguous offsets, tied vs untied;
 *   - finite-difference gradient check of the whole loss (ce + MoE aux and z
 *     losses) on a tiny model, a few entries of every tensor;
 *   - determinism: two models from one seed give bitwise equal losses and
 *     gradients; repeated calls accumulate; grad_scale scales;
 *   - the KV-cache decoder against ffn_model_logits;
 *   - bad input (tokens out of range, T too long) is an error, not a crash. */
#include "check.h"

#include <ffn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void tiny_config(ffn_model_config *c) {
    ffn_model_config_default(c);
    c->vocab_size = 11;
    c->hidden_size = 8;
    c->intermediate_size = 12;
    c->num_hidden_layers = 2;
    c->num_attention_heads = 2;
    c->num_key_value_heads = 1;
    c->max_position_embeddings = 6;
    c->tie_word_embeddings = 0;
    c->attention_bias = 1;
    c->num_experts = 3;
    c->num_experts_per_tok = 2;
    c->moe_intermediate_size = 6;
    c->moe_layer_freq = 2; /* layer 0 SwiGLU, layer 1 MoE */
    c->router_aux_loss_coef = 0.1;
    c->router_z_loss_coef = 0.05;
}

enum { B = 2, T = 5 };
static const int32_t tokens[B * T] = {1, 4, 7, 2, 9, 10, 0, 3, 3, 5};
static const int32_t targets[B * T] = {4, 7, 2, -1, 1, 0, 3, 3, 5, 8};

static void test_config(void) {
    ffn_model_config c;
    tiny_config(&c);
    CHECK(ffn_model_config_validate(&c) == FFN_OK, "tiny config rejected: %s", ffn_last_error());
    c.num_key_value_heads = 3;
    c.num_attention_heads = 4;
    c.hidden_size = 16;
    CHECK(ffn_model_config_validate(&c) == FFN_ERR_CONFIG &&
              strstr(ffn_last_error(), "num_key_value_heads"),
          "bad GQA not named: %s", ffn_last_error());
    tiny_config(&c);
    c.num_experts_per_tok = 4;
    CHECK(ffn_model_config_validate(&c) == FFN_ERR_CONFIG &&
              strstr(ffn_last_error(), "num_experts_per_tok"),
          "K > E not named: %s", ffn_last_error());
    tiny_config(&c);
    c.hidden_size = 10; /* head dim 5: odd */
    CHECK(ffn_model_config_validate(&c) == FFN_ERR_CONFIG && strstr(ffn_last_error(), "even"),
          "odd head dim not rejected: %s", ffn_last_error());
    tiny_config(&c);
    c.vocab_size = (int64_t)1 << 40;
    CHECK(ffn_model_config_validate(&c) != FFN_OK && strstr(ffn_last_error(), "vocab_size"),
          "huge vocab not rejected: %s", ffn_last_error());

    /* config.json round trip */
    char dir[] = "/tmp/ffn_test_model_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[256];
    snprintf(path, sizeof path, "%s/config.json", dir);
    tiny_config(&c);
    c.rope_style = FFN_ROPE_INTERLEAVED;
    c.hidden_act = FFN_ACT_GELU;
    CHECK(ffn_model_config_save(&c, path) == FFN_OK, "save: %s", ffn_last_error());
    ffn_model_config d;
    CHECK(ffn_model_config_load(path, &d) == FFN_OK, "load: %s", ffn_last_error());
    CHECK(d.vocab_size == c.vocab_size && d.num_key_value_heads == c.num_key_value_heads &&
              d.rope_style == c.rope_style && d.hidden_act == c.hidden_act &&
              d.attention_bias == c.attention_bias && d.num_experts == c.num_experts &&
              d.moe_layer_freq == c.moe_layer_freq && d.moe_intermediate_size == 6 &&
              d.tie_word_embeddings == 0 && d.rms_norm_eps == c.rms_norm_eps &&
              d.router_z_loss_coef == c.router_z_loss_coef && d.mlp_type == c.mlp_type,
          "config round trip differs");
    /* numbers are written as the shortest decimal that reads back the same */
    char text[4096] = "";
    FILE *f = fopen(path, "r");
    size_t got = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[got] = 0;
    CHECK(strstr(text, "\"rms_norm_eps\": 1e-05,") && strstr(text, "\"rope_theta\": 10000,") &&
              strstr(text, "\"router_aux_loss_coef\": 0.1,") &&
              strstr(text, "\"router_z_loss_coef\": 0.05,"),
          "config.json numbers not shortest:\n%s", text);
    c.rms_norm_eps = 1.0 / 3.0; /* needs all 17 digits */
    CHECK(ffn_model_config_save(&c, path) == FFN_OK && ffn_model_config_load(path, &d) == FFN_OK &&
              d.rms_norm_eps == c.rms_norm_eps,
          "1/3 does not round-trip");
    f = fopen(path, "w");
    fputs("{\"vocab_size\": 10, \"hidden_size\": 8, \"num_hidden_layers\": 1, "
          "\"num_attention_heads\": 2, \"intermediate_size\": 4, \"rope_style\": \"sideways\"}",
          f);
    fclose(f);
    CHECK(ffn_model_config_load(path, &d) == FFN_ERR_CONFIG &&
              strstr(ffn_last_error(), "rope_style") && strstr(ffn_last_error(), path),
          "bad rope_style not named with the file: %s", ffn_last_error());
    unlink(path);
    rmdir(dir);
}

static void test_table(ffn_ctx *ctx) {
    ffn_model_config c;
    tiny_config(&c);
    ffn_model *m;
    CHECK(ffn_model_create(ctx, &c, NULL, &m) == FFN_OK, "create: %s", ffn_last_error());
    int64_t expect = 0;
    for (int64_t i = 0; i < ffn_model_num_tensors(m); i++) {
        const ffn_model_tensor *t = ffn_model_tensor_at(m, i);
        CHECK(t->offset == expect, "%s: offset %lld, expected %lld", t->name, (long long)t->offset,
              (long long)expect);
        CHECK(t->numel == t->shape[0] * t->shape[1], "%s: numel", t->name);
        expect += t->numel;
    }
    CHECK(expect == ffn_model_num_params(m), "table total %lld != num_params %lld",
          (long long)expect, (long long)ffn_model_num_params(m));
    const char *names[] = {"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
                           "model.layers.0.self_attn.k_proj.bias",
                           "model.layers.0.mlp.gate_proj.weight", "model.layers.1.mlp.gate.weight",
                           "model.layers.1.mlp.experts.2.down_proj.weight", "model.norm.weight",
                           "lm_head.weight", "model.layers.1.post_attention_layernorm.weight"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        CHECK(ffn_model_find_tensor(m, names[i]) != NULL, "missing %s", names[i]);
    const ffn_model_tensor *k = ffn_model_find_tensor(m, "model.layers.0.self_attn.k_proj.weight");
    CHECK(k && k->shape[0] == 4 && k->shape[1] == 8, "k_proj shape (G·Dh, D) = (4, 8)");
    CHECK(ffn_model_grads(m, NULL) == NULL, "inference model has gradients");
    int64_t total = 0, active = 0;
    CHECK(ffn_model_config_count_params(&c, &total, &active) == FFN_OK &&
              total == ffn_model_num_params(m) && active == ffn_model_active_params(m),
          "count_params %lld/%lld != model %lld/%lld", (long long)total, (long long)active,
          (long long)ffn_model_num_params(m), (long long)ffn_model_active_params(m));
    /* active params: 1 of 3 experts' (3·6·8) weights are idle per token */
    CHECK(ffn_model_active_params(m) == ffn_model_num_params(m) - 3 * 6 * 8,
          "active params %lld", (long long)ffn_model_active_params(m));
    ffn_model_free(m);
    c.tie_word_embeddings = 1;
    CHECK(ffn_model_create(ctx, &c, NULL, &m) == FFN_OK, "create tied: %s", ffn_last_error());
    CHECK(ffn_model_find_tensor(m, "lm_head.weight") == NULL, "tied model has lm_head.weight");
    ffn_model_free(m);
    ffn_model_free(NULL);
    /* count_params against the table, over the FFN slot variants */
    for (int v = 0; v < 4; v++) {
        tiny_config(&c);
        if (v == 0) c.shared_expert_intermediate_size = 5, c.mlp_bias = 1, c.moe_layer_freq = 1;
        if (v == 1) c.num_experts = 0, c.mlp_type = FFN_MODEL_MLP_NONE;
        if (v == 2) c.num_experts = 0, c.mlp_type = FFN_MODEL_MLP_DENSE, c.mlp_bias = 1;
        if (v == 3) c.mlp_type = FFN_MODEL_MLP_DENSE, c.tie_word_embeddings = 1, c.attention_bias = 0;
        if (ffn_model_create(ctx, &c, NULL, &m)) {
            CHECK(0, "variant %d: create: %s", v, ffn_last_error());
            continue;
        }
        int64_t sum = 0;
        for (int64_t i = 0; i < ffn_model_num_tensors(m); i++) sum += ffn_model_tensor_at(m, i)->numel;
        ffn_model_config_count_params(&c, &total, &active);
        CHECK(total == sum && total == ffn_model_num_params(m), "variant %d: count %lld, table %lld",
              v, (long long)total, (long long)sum);
        CHECK(v == 1 || v == 2 ? active == total : active < total, "variant %d: active %lld", v,
              (long long)active);
        ffn_model_free(m);
    }
}

static ffn_model *make(ffn_ctx *ctx, uint64_t seed) {
    ffn_model_config c;
    tiny_config(&c);
    ffn_model_options o = {.max_batch = B, .max_seq = T, .training = 1};
    ffn_model *m = NULL;
    if (ffn_model_create(ctx, &c, &o, &m) || ffn_model_init_weights(m, seed)) {
        fprintf(stderr, "create: %s\n", ffn_last_error());
        return NULL;
    }
    /* larger weights than the 0.02 init, so every path carries signal */
    int64_t n;
    float *p = ffn_model_params(m, &n);
    for (int64_t i = 0; i < n; i++) p[i] *= 10.0f;
    for (int64_t i = 0; i < ffn_model_num_tensors(m); i++) {
        const ffn_model_tensor *t = ffn_model_tensor_at(m, i);
        if (t->kind == FFN_TENSOR_NORM)
            for (int64_t j = 0; j < t->numel; j++) p[t->offset + j] = 1.0f + 0.1f * (float)((j * 7) % 5 - 2);
        if (t->kind == FFN_TENSOR_ATTN_BIAS)
            for (int64_t j = 0; j < t->numel; j++) p[t->offset + j] = 0.05f * (float)((j * 3) % 7 - 3);
    }
    ffn_model_params_changed(m);
    return m;
}

static double total_loss(ffn_model *m) {
    ffn_model_loss l;
    if (ffn_model_eval_loss(m, tokens, targets, B, T, &l)) return NAN;
    return l.total;
}

static void test_gradcheck(ffn_ctx *ctx) {
    ffn_model *m = make(ctx, 7);
    if (!m) return;
    ffn_model_loss loss;
    ffn_model_zero_grads(m);
    CHECK(ffn_model_forward_backward(m, tokens, targets, B, T, 1.0f, &loss) == FFN_OK, "fb: %s",
          ffn_last_error());
    CHECK(loss.n_targets == B * T - 1, "n_targets %lld", (long long)loss.n_targets);
    CHECK(loss.aux > 0.0 && loss.z > 0.0, "MoE losses not reported (aux %g z %g)", loss.aux, loss.z);
    CHECK(fabs(loss.total - total_loss(m)) < 1e-6, "eval_loss %.8f != forward_backward %.8f",
          total_loss(m), loss.total);
    int64_t n;
    float *p = ffn_model_params(m, &n);
    float *g = ffn_model_grads(m, NULL);
    const float eps = 1e-2f;
    int bad = 0, checked = 0;
    double worst = 0.0;
    for (int64_t ti = 0; ti < ffn_model_num_tensors(m); ti++) {
        const ffn_model_tensor *t = ffn_model_tensor_at(m, ti);
        /* three entries per tensor: the first, the middle, the largest gradient */
        int64_t idx[3] = {0, t->numel / 2, 0};
        for (int64_t j = 0; j < t->numel; j++)
            if (fabsf(g[t->offset + j]) > fabsf(g[t->offset + idx[2]])) idx[2] = j;
        for (int r = 0; r < 3; r++) {
            int64_t i = t->offset + idx[r];
            float keep = p[i];
            p[i] = keep + eps;
            ffn_model_params_changed(m);
            double lp = total_loss(m);
            p[i] = keep - eps;
            ffn_model_params_changed(m);
            double lm = total_loss(m);
            p[i] = keep;
            double fd = (lp - lm) / (2.0 * eps), e = fabs(fd - g[i]);
            double tol = 2e-3 + 2e-2 * fabs(fd);
            checked++;
            if (e / tol > worst) worst = e / tol;
            if (e > tol) {
                bad++;
                fprintf(stderr, "%s[%lld]: analytic %.6f finite difference %.6f\n", t->name,
                        (long long)idx[r], g[i], fd);
            }
        }
    }
    ffn_model_params_changed(m);
    printf("gradcheck: %d entries of %lld tensors, worst err/tol %.3f\n", checked,
           (long long)ffn_model_num_tensors(m), worst);
    CHECK(bad == 0, "%d gradient entries disagree with finite differences", bad);
    ffn_model_free(m);
}

static void test_determinism(ffn_ctx *ctx) {
    ffn_model *a = make(ctx, 99), *b = make(ctx, 99);
    if (!a || !b) return;
    /* n is set by the first call before anything reads it: the arguments of
     * one call are evaluated in no given order, so not inside the memcmp */
    int64_t n = 0, nb = 0;
    const float *pa = ffn_model_params(a, &n), *pb = ffn_model_params(b, &nb);
    CHECK(n > 0 && n == nb, "parameter counts %lld and %lld", (long long)n, (long long)nb);
    CHECK(!memcmp(pa, pb, (size_t)n * sizeof(float)), "init from one seed differs");
    ffn_model_loss la, lb;
    ffn_model_zero_grads(a);
    ffn_model_zero_grads(b);
    ffn_model_forward_backward(a, tokens, targets, B, T, 1.0f, &la);
    ffn_model_forward_backward(b, tokens, targets, B, T, 1.0f, &lb);
    float *ga = ffn_model_grads(a, NULL), *gb = ffn_model_grads(b, NULL);
    CHECK(la.total == lb.total, "losses differ: %.17g %.17g", la.total, lb.total);
    CHECK(!memcmp(ga, gb, (size_t)n * sizeof(float)), "gradients differ bitwise");
    /* a second call accumulates: grads ≈ 2 × one call */
    float *one = malloc((size_t)n * sizeof(float));
    memcpy(one, ga, (size_t)n * sizeof(float));
    ffn_model_forward_backward(a, tokens, targets, B, T, 1.0f, &la);
    double worst = 0.0, gmax = 0.0;
    for (int64_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs(ga[i] - 2.0 * one[i]));
        gmax = fmax(gmax, fabs(one[i]));
    }
    CHECK(worst <= 1e-5 * gmax, "two calls are not twice one call (%.3e)", worst);
    /* grad_scale 0.25 on zeroed grads = 0.25 × grads (MoE aux/z included) */
    ffn_model_zero_grads(b);
    ffn_model_forward_backward(b, tokens, targets, B, T, 0.25f, &lb);
    worst = 0.0;
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs(gb[i] - 0.25 * one[i]));
    CHECK(worst <= 1e-6 * gmax, "grad_scale 0.25 is off by %.3e", worst);
    CHECK(lb.total == la.total, "grad_scale changed the reported loss");
    free(one);
    /* a different seed gives different weights */
    ffn_model_init_weights(b, 100);
    CHECK(memcmp(ffn_model_params(a, NULL), ffn_model_params(b, NULL), (size_t)n * sizeof(float)),
          "seeds 99 and 100 give the same weights");
    ffn_model_free(a);
    ffn_model_free(b);
}

static void test_generation(ffn_ctx *ctx) {
    ffn_model *m = make(ctx, 5);
    if (!m) return;
    const int64_t V = 11;
    float full[B * T * 11], step[11];
    CHECK(ffn_model_logits(m, full, tokens, B, T) == FFN_OK, "logits: %s", ffn_last_error());
    double worst = 0.0;
    for (int b = 0; b < B; b++) {
        ffn_model_reset(m);
        for (int t = 0; t < T; t++) {
            CHECK(ffn_model_position(m) == t, "position %lld != %d", (long long)ffn_model_position(m), t);
            CHECK(ffn_model_step(m, tokens[b * T + t], step) == FFN_OK, "step: %s", ffn_last_error());
            for (int64_t v = 0; v < V; v++)
                worst = fmax(worst, fabs(step[v] - full[(b * T + t) * V + v]));
        }
    }
    printf("generation: max |step - full| = %.3e (tol 1e-5)\n", worst);
    CHECK(worst <= 1e-5, "KV-cache decoding differs from the full forward by %.3e", worst);
    CHECK(ffn_model_step(m, 1, step) == FFN_ERR_INVALID_ARG, "step past max_seq accepted");
    /* bad input */
    int32_t bad[B * T];
    memcpy(bad, tokens, sizeof bad);
    bad[3] = 11;
    CHECK(ffn_model_logits(m, full, bad, B, T) == FFN_ERR_INVALID_ARG &&
              strstr(ffn_last_error(), "tokens[3]"),
          "token out of range: %s", ffn_last_error());
    CHECK(ffn_model_forward_backward(m, tokens, targets, B, T + 1, 1.0f, NULL) ==
              FFN_ERR_INVALID_ARG,
          "T > max_seq accepted");
    int32_t badt[B * T];
    memcpy(badt, targets, sizeof badt);
    badt[0] = -2;
    CHECK(ffn_model_eval_loss(m, tokens, badt, B, T, NULL) == FFN_ERR_INVALID_ARG,
          "target -2 accepted");
    ffn_model_free(m);
}

int main(void) {
    ffn_ctx *ctx;
    if (ffn_ctx_create(2, &ctx)) return 1;
    test_config();
    test_table(ctx);
    test_gradcheck(ctx);
    test_determinism(ctx);
    test_generation(ctx);
    ffn_ctx_free(ctx);
    return check_done("test_model");
}
