/* test_params.c -- parameter and FLOP accounting (src/analysis/params.c)
 * against published totals, against independent closed forms, for internal
 * consistency, and for each kind of bad config.
 *
 * Published figures reproduced exactly (configs in tests/data/configs):
 *   gpt2                    124,439,808   (GPT-2 small, tied head)
 *   bert-base-uncased       109,482,240   (BertModel with pooler)
 *   Llama-2-7b            6,738,415,616
 *   Llama-2-13b          13,015,864,320
 *   Llama-2-70b          68,976,648,192
 *   Meta-Llama-3-8B       8,030,261,248
 *   Mistral-7B-v0.1       7,241,732,096
 *   Mixtral-8x7B         46,702,792,704 total, 12,879,925,248 active
 *   Qwen2-7B              7,615,616,512   (the safetensors count; the same
 *                                          architecture as Qwen2.5-7B)
 *   Qwen2-0.5B              494,032,768   (tied)
 *   Qwen1.5-MoE-A2.7B    14,315,784,192   ("14.3B total, 2.7B activated")
 *   DeepSeek-V2-Lite     15,706,484,224   ("15.7B total, 2.4B activated")
 *   DeepSeek-V3         671,026,419,200   (MTP module excluded,
 *                                          e_score_correction_bias included)
 * Active counts of the MoE models beyond Mixtral are checked against
 * hand-derived values and the published rounded figures. */
#include "check.h"
#include "ffn.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char path_buf[1024];

static const char *config_path(const char *name) {
    const char *root = getenv("FFN_ROOT");
    snprintf(path_buf, sizeof path_buf, "%s/tests/data/configs/%s.json", root ? root : ".", name);
    return path_buf;
}

static ffn_params_report *load(const char *name, int64_t seq_len) {
    ffn_params_options opt = {.seq_len = seq_len};
    ffn_params_report *r = NULL;
    ffn_status st = ffn_params_from_config(config_path(name), &opt, &r);
    CHECK(st == FFN_OK, "%s: %s", name, ffn_last_error());
    return st == FFN_OK ? r : NULL;
}

static int64_t sum_counts(const ffn_param_counts *p) {
    return p->attention + p->ffn_dense + p->ffn_routed + p->ffn_shared + p->router + p->norms +
           p->embed_token + p->embed_position + p->embed_token_type + p->head;
}

static int64_t sum_flops(const ffn_flop_counts *f) {
    return f->attention_proj + f->attention_qk + f->attention_av + f->ffn_dense + f->ffn_routed +
           f->ffn_shared + f->router + f->head;
}

/* Components add up; layers add up to the model's in-layer components;
 * active <= total; dense models have active == total. */
static void check_consistency(const char *name, const ffn_params_report *r) {
    CHECK(sum_counts(&r->params) == r->params.total, "%s: components of total", name);
    CHECK(sum_counts(&r->active) == r->active.total, "%s: components of active", name);
    CHECK(sum_flops(&r->forward) == r->forward.total, "%s: components of forward FLOPs", name);
    CHECK(r->active.total <= r->params.total, "%s: active %lld > total %lld", name,
          (long long)r->active.total, (long long)r->params.total);
    CHECK(r->active.ffn_routed <= r->params.ffn_routed, "%s: active routed", name);
    if (!r->n_moe_layers)
        CHECK(r->active.total == r->params.total, "%s: dense model: active != total", name);
    ffn_param_counts sum = {0};
    ffn_flop_counts fsum = {0};
    int64_t moe = 0;
    CHECK(r->n_layer_entries == r->n_layers, "%s: layer entries", name);
    for (int64_t i = 0; i < r->n_layers; i++) {
        const ffn_params_layer *l = &r->layers[i];
        CHECK(sum_counts(&l->params) == l->params.total, "%s: layer %lld components", name,
              (long long)i);
        CHECK(sum_flops(&l->flops) == l->flops.total, "%s: layer %lld flops", name, (long long)i);
        CHECK(l->active.total <= l->params.total, "%s: layer %lld active", name, (long long)i);
        sum.attention += l->params.attention;
        sum.ffn_dense += l->params.ffn_dense;
        sum.ffn_routed += l->params.ffn_routed;
        sum.ffn_shared += l->params.ffn_shared;
        sum.router += l->params.router;
        sum.norms += l->params.norms;
        sum.total += l->params.total;
        fsum.total += l->flops.total;
        moe += l->is_moe;
    }
    CHECK(sum.attention == r->params.attention, "%s: layer attention sum", name);
    CHECK(sum.ffn_dense == r->params.ffn_dense, "%s: layer ffn_dense sum", name);
    CHECK(sum.ffn_routed == r->params.ffn_routed, "%s: layer ffn_routed sum", name);
    CHECK(sum.ffn_shared == r->params.ffn_shared, "%s: layer ffn_shared sum", name);
    CHECK(sum.router == r->params.router, "%s: layer router sum", name);
    CHECK(moe == r->n_moe_layers, "%s: moe layer count", name);
    int64_t outside = r->params.embed_token + r->params.embed_position +
                      r->params.embed_token_type + r->params.head +
                      (r->params.norms - sum.norms);
    CHECK(sum.total + outside == r->params.total, "%s: layers + outside != total", name);
    CHECK(fsum.total + r->forward.head == r->forward.total, "%s: layer FLOPs + head", name);
    int64_t ffn = r->params.ffn_dense + r->params.ffn_routed + r->params.ffn_shared + r->params.router;
    CHECK(fabs(r->ffn_share - (double)ffn / (double)r->params.total) < 1e-12, "%s: ffn share", name);
    CHECK(r->training_flops ==
              6 * r->active.total + 3 * (r->forward.attention_qk + r->forward.attention_av),
          "%s: training FLOPs", name);
    CHECK(r->training_flops_matmul == 3 * r->forward.total, "%s: training matmul", name);
}

static void check_published(const char *name, int64_t total, int64_t active) {
    ffn_params_report *r = load(name, 0);
    if (!r) return;
    printf("%-20s total %15lld active %15lld\n", name, (long long)r->params.total,
           (long long)r->active.total);
    CHECK(r->params.total == total, "%s: total %lld, published %lld", name,
          (long long)r->params.total, (long long)total);
    if (active) CHECK(r->active.total == active, "%s: active %lld, expected %lld", name,
                      (long long)r->active.total, (long long)active);
    check_consistency(name, r);
    ffn_params_report_free(r);
}

/* ---- closed forms, derived by hand from the architectures ------------------ */

static void test_gpt2_components(void) {
    ffn_params_report *r = load("gpt2", 1024);
    if (!r) return;
    const int64_t D = 768, L = 12, V = 50257, P = 1024, F = 3072;
    CHECK(r->params.embed_token == V * D, "wte");
    CHECK(r->params.embed_position == P * D, "wpe");
    CHECK(r->params.head == 0, "gpt2 head is tied: counted once, in wte");
    CHECK(r->tied_embeddings == 1, "tied");
    CHECK(r->params.attention == L * (D * 3 * D + 3 * D + D * D + D), "c_attn + c_proj");
    CHECK(r->params.ffn_dense == L * (D * F + F + F * D + D), "c_fc + c_proj");
    CHECK(r->params.norms == L * 4 * D + 2 * D, "ln_1, ln_2 (weights and biases), ln_f");
    CHECK(r->intermediate_size == 4 * D, "n_inner null means 4·n_embd");
    CHECK(fabs(r->expansion_ratio - 4.0) < 1e-12, "expansion 4");
    /* forward: 2 per MAC over the matrices (attention, MLP, tied head) + 4·L·D·T */
    int64_t mats = L * (4 * D * D + 2 * D * F) + V * D;
    CHECK(r->forward.total == 2 * mats + 4 * L * D * 1024, "gpt2 forward %lld",
          (long long)r->forward.total);
    ffn_params_report_free(r);
}

static void test_bert_components(void) {
    ffn_params_report *r = load("bert-base-uncased", 512);
    if (!r) return;
    const int64_t D = 768;
    CHECK(r->params.embed_token_type == 2 * D, "token type");
    CHECK(r->params.embed_position == 512 * D, "positions");
    CHECK(r->params.head == D * D + D, "pooler");
    CHECK(r->forward.head == 0, "pooler runs once per sequence, not per token");
    CHECK(r->params.norms == 12 * 4 * D + 2 * D, "LayerNorms with biases + embeddings LN");
    ffn_params_report_free(r);
    /* relative_key: a distance embedding (2P-1, head_dim) in every layer's attention */
    const char *cfg =
        "{\"model_type\": \"bert\", \"hidden_size\": 64, \"num_hidden_layers\": 3,"
        " \"num_attention_heads\": 4, \"vocab_size\": 100, \"intermediate_size\": 96,"
        " \"max_position_embeddings\": 32, \"position_embedding_type\": \"relative_key\"}";
    r = NULL;
    CHECK(ffn_params_from_json(cfg, strlen(cfg), "inline", NULL, &r) == FFN_OK, "%s", ffn_last_error());
    if (r) {
        CHECK(r->params.attention == 3 * (4 * (64 * 64 + 64) + 63 * 16), "relative_key attention");
        CHECK(r->params.embed_token_type == 2 * 64, "type_vocab_size defaults to 2");
        check_consistency("bert relative_key", r);
        ffn_params_report_free(r);
    }
}

static void test_moe_flops(void) {
    const int64_t T = 1000, L = 32, D = 4096, F = 14336, E = 8, K = 2, V = 32000, kv = 1024;
    ffn_params_report *r = load("Mixtral-8x7B-v0.1", T);
    if (!r) return;
    int64_t attn = D * D + 2 * D * kv + D * D;
    CHECK(r->forward.attention_proj == 2 * L * attn, "mixtral attention projections");
    CHECK(r->forward.ffn_routed == 2 * L * K * 3 * D * F, "K experts per token");
    CHECK(r->forward.router == 2 * L * E * D, "router");
    CHECK(r->forward.total == 2 * L * (attn + K * 3 * D * F + E * D) + 2 * V * D + 4 * L * D * T,
          "mixtral forward %lld", (long long)r->forward.total);
    /* matmul FLOPs are 2 x the active matrix weights: active minus embedding and norms */
    CHECK(r->forward.total - r->forward.attention_qk - r->forward.attention_av ==
              2 * (r->active.total - r->active.embed_token - r->active.norms),
          "2 x active matrices");
    CHECK(r->moe_expansion_ratio == 3.5 && r->intermediate_size == 0, "expert expansion 3.5");
    ffn_params_report_free(r);
}

static void test_llama_flops(void) {
    const int64_t T = 4096, L = 32, D = 4096, V = 32000;
    ffn_params_report *r = load("Llama-2-7b-hf", T);
    if (!r) return;
    /* no biases: every non-norm, non-embedding parameter is a matrix weight;
     * the head is untied, so the matrices are total - embedding - norms */
    int64_t mats = r->params.total - r->params.embed_token - r->params.norms;
    CHECK(r->forward.total == 2 * mats + 4 * L * D * T, "llama forward %lld",
          (long long)r->forward.total);
    CHECK(r->forward.attention_qk == 2 * L * D * T, "QK^T");
    CHECK(r->forward.attention_av == 2 * L * D * T, "AV");
    CHECK(r->forward.head == 2 * V * D, "head");
    CHECK(r->params.ffn_dense == L * 3 * D * 11008, "SwiGLU FFN");
    CHECK(fabs(r->expansion_ratio - 11008.0 / 4096.0) < 1e-12, "expansion");
    CHECK(r->training_flops == 6 * r->params.total + 3 * 4 * L * D * T, "training");
    ffn_params_report_free(r);
    /* attention-score FLOPs are linear in T */
    ffn_params_report *a = load("Llama-2-7b-hf", 1000), *b = load("Llama-2-7b-hf", 2000);
    if (a && b) {
        CHECK(b->forward.attention_qk == 2 * a->forward.attention_qk, "QK linear in T");
        CHECK(b->forward.attention_proj == a->forward.attention_proj, "projections independent of T");
    }
    ffn_params_report_free(a);
    ffn_params_report_free(b);
}

static void test_gqa_and_tied(void) {
    ffn_params_report *r = load("Qwen2-0.5B", 0);
    if (!r) return;
    const int64_t D = 896, H = 14, Hkv = 2, hd = 64, L = 24, V = 151936;
    CHECK(r->seq_len == 2048, "default seq_len");
    CHECK(r->params.head == 0 && r->tied_embeddings, "tied: head counted once");
    CHECK(r->forward.head == 2 * V * D, "tied head still computes the logits");
    /* q, k, v biases, no o bias */
    CHECK(r->params.attention == L * (D * H * hd + H * hd + 2 * (D * Hkv * hd + Hkv * hd) + H * hd * D),
          "qwen2 attention with q/k/v biases");
    CHECK(!strcmp(r->attention_kind, "GQA"), "GQA");
    ffn_params_report_free(r);
}

static void test_moe_details(void) {
    ffn_params_report *r = load("Qwen1.5-MoE-A2.7B", 0);
    if (r) {
        const int64_t D = 2048, E = 60, K = 4, Fm = 1408, Fs = 5632, L = 24;
        CHECK(r->params.ffn_routed == L * E * 3 * D * Fm, "routed");
        CHECK(r->active.ffn_routed == L * K * 3 * D * Fm, "active routed");
        CHECK(r->params.ffn_shared == L * (3 * D * Fs + D), "shared expert + shared_expert_gate (1, D)");
        CHECK(r->params.router == L * E * D, "router");
        CHECK(r->active.total == 2689173504LL, "Qwen1.5-MoE active %lld", (long long)r->active.total);
        /* published: 2.7B activated */
        CHECK(llround(r->active.total / 1e8) == 27, "rounds to 2.7B");
        ffn_params_report_free(r);
    }
    r = load("DeepSeek-V2-Lite", 0);
    if (r) {
        CHECK(r->n_moe_layers == 26, "first_k_dense_replace 1 of 27");
        CHECK(r->layers[0].is_moe == 0 && r->layers[1].is_moe == 1, "layer 0 dense");
        CHECK(!strcmp(r->attention_kind, "MLA"), "MLA");
        /* q_lora_rank null: q_proj (D, H·192); kv_a (D, 576) + norm 512;
         * kv_b (512, H·256); o (H·128, D) */
        const int64_t D = 2048, H = 16;
        CHECK(r->layers[0].params.attention == D * H * 192 + D * 576 + 512 * H * 256 + H * 128 * D,
              "MLA attention without q compression");
        CHECK(r->layers[0].params.norms == 2 * D + 512, "two RMSNorms + kv_a_layernorm");
        CHECK(r->params.router == 26 * 64 * D, "no e_score_correction_bias in V2");
        CHECK(r->active.total == 2661150208LL, "V2-Lite active %lld", (long long)r->active.total);
        /* published "2.4B activated": DeepSeek leaves out the token embedding */
        CHECK(r->active_excl_embeddings == 2451435008LL, "V2-Lite activated %lld",
              (long long)r->active_excl_embeddings);
        CHECK((r->active_excl_embeddings / 100000000) == 24, "2.4B");
        ffn_params_report_free(r);
    }
    r = load("DeepSeek-V3", 0);
    if (r) {
        CHECK(r->n_moe_layers == 58, "first_k_dense_replace 3 of 61");
        CHECK(r->params.router == 58 * (256 * 7168 + 256), "router + e_score_correction_bias");
        CHECK(r->params.total - 58 * 256 == 671026404352LL, "without the bias");
        CHECK(r->active.total == 37552297472LL, "V3 active %lld", (long long)r->active.total);
        CHECK(llround(r->active_excl_embeddings / 1e9) == 37, "published 37B activated");
        /* MTP: one MoE layer + eh_proj (D, 2D) + enorm, hnorm, shared_head.norm */
        CHECK(r->mtp_params == 11507286272LL + 2 * 7168LL * 7168 + 3 * 7168, "MTP %lld",
              (long long)r->mtp_params);
        ffn_params_report_free(r);
    }
}

/* qwen2_moe layer selection: decoder_sparse_step and mlp_only_layers */
static void test_sparse_step(void) {
    const char *cfg =
        "{\"model_type\": \"qwen2_moe\", \"hidden_size\": 64, \"num_hidden_layers\": 6,"
        " \"num_attention_heads\": 4, \"vocab_size\": 100, \"intermediate_size\": 96,"
        " \"num_experts\": 8, \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 32,"
        " \"shared_expert_intermediate_size\": 0, \"decoder_sparse_step\": 2,"
        " \"mlp_only_layers\": [3]}";
    ffn_params_report *r = NULL;
    ffn_status st = ffn_params_from_json(cfg, strlen(cfg), "inline", NULL, &r);
    CHECK(st == FFN_OK, "%s", ffn_last_error());
    if (!r) return;
    /* (i+1) % 2 == 0 -> layers 1, 3, 5; 3 is mlp-only */
    CHECK(r->n_moe_layers == 2 && r->layers[1].is_moe && r->layers[5].is_moe &&
              !r->layers[3].is_moe && !r->layers[0].is_moe,
          "sparse layers 1 and 5");
    CHECK(r->params.ffn_dense == 4 * 3 * 64 * 96, "four dense layers");
    CHECK(r->params.ffn_routed == 2 * 8 * 3 * 64 * 32, "two MoE layers");
    CHECK(r->params.ffn_shared == 0, "no shared expert");
    check_consistency("inline qwen2_moe", r);
    ffn_params_report_free(r);
}

/* ---- bad configs: each with its specific error ------------------------------ */

static void expect_error(const char *cfg, ffn_status want, const char *needle1, const char *needle2) {
    ffn_params_report *r = (ffn_params_report *)1;
    ffn_status st = ffn_params_from_json(cfg, strlen(cfg), "bad.json", NULL, &r);
    const char *msg = ffn_last_error();
    printf("  expected error: %s\n", msg);
    CHECK(st == want, "status %s, want %s for %s (%s)", ffn_status_str(st), ffn_status_str(want),
          cfg, msg);
    CHECK(r == NULL, "out set to NULL on failure");
    CHECK(strstr(msg, "bad.json") != NULL, "message names the file: %s", msg);
    if (needle1) CHECK(strstr(msg, needle1) != NULL, "message '%s' lacks '%s'", msg, needle1);
    if (needle2) CHECK(strstr(msg, needle2) != NULL, "message '%s' lacks '%s'", msg, needle2);
    if (st == FFN_OK) ffn_params_report_free(r);
}

#define LLAMA_REST "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 10, \"intermediate_size\": 16"

static void test_errors(void) {
    expect_error("{\"model_type\": \"gptj\", \"hidden_size\": 8}", FFN_ERR_CONFIG, "model_type", "gptj");
    expect_error("{\"hidden_size\": 8}", FFN_ERR_MISSING, "model_type", NULL);
    expect_error("{\"model_type\": \"llama\", " LLAMA_REST "}", FFN_ERR_MISSING, "hidden_size", NULL);
    expect_error("{\"model_type\": \"llama\", \"hidden_size\": -64, " LLAMA_REST "}", FFN_ERR_CONFIG,
                 "hidden_size", "-64");
    expect_error("{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": -2,"
                 " \"num_attention_heads\": 4, \"vocab_size\": 10, \"intermediate_size\": 16}",
                 FFN_ERR_CONFIG, "num_hidden_layers", "-2");
    expect_error("{\"model_type\": \"llama\", \"hidden_size\": 0, " LLAMA_REST "}", FFN_ERR_CONFIG,
                 "hidden_size", NULL);
    expect_error("{\"model_type\": \"llama\", \"hidden_size\": 64.5, " LLAMA_REST "}", FFN_ERR_CONFIG,
                 "hidden_size", NULL);
    expect_error("{\"model_type\": \"llama\", \"hidden_size\": \"64\", " LLAMA_REST "}",
                 FFN_ERR_CONFIG, "hidden_size", NULL);
    expect_error("{\"model_type\": \"llama\", \"hidden_size\": 99999999999999999999999, " LLAMA_REST "}",
                 FFN_ERR_CONFIG, "hidden_size", NULL);
    /* each size is in range, the products are not */
    expect_error("{\"model_type\": \"llama\", \"hidden_size\": 1099511627776,"
                 " \"num_hidden_layers\": 2, \"num_attention_heads\": 1,"
                 " \"vocab_size\": 1099511627776, \"intermediate_size\": 16}",
                 FFN_ERR_OVERFLOW, "overflow", NULL);
    expect_error("{\"model_type\": \"llama\", \"hidden_size\": 1073741824,"
                 " \"num_hidden_layers\": 100000, \"num_attention_heads\": 1,"
                 " \"vocab_size\": 10, \"intermediate_size\": 1073741824}",
                 FFN_ERR_OVERFLOW, "overflow", NULL);
    /* a layer count that would make us allocate without bound */
    expect_error("{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 1000000000000,"
                 " \"num_attention_heads\": 4, \"vocab_size\": 10, \"intermediate_size\": 16}",
                 FFN_ERR_CONFIG, "num_hidden_layers", NULL);
    expect_error("{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_key_value_heads\": 3, " LLAMA_REST "}",
                 FFN_ERR_CONFIG, "num_key_value_heads", NULL);
    expect_error("{\"model_type\": \"llama\", \"hidden_size\": 66, " LLAMA_REST "}", FFN_ERR_CONFIG,
                 "num_attention_heads", NULL);
    expect_error("{\"model_type\": \"mixtral\", \"hidden_size\": 64, " LLAMA_REST
                 ", \"num_experts_per_tok\": 2}", FFN_ERR_MISSING, "num_local_experts", NULL);
    expect_error("{\"model_type\": \"mixtral\", \"hidden_size\": 64, " LLAMA_REST
                 ", \"num_local_experts\": 2, \"num_experts_per_tok\": 3}", FFN_ERR_CONFIG,
                 "num_experts_per_tok", NULL);
    expect_error("{\"model_type\": \"qwen2_moe\", \"hidden_size\": 64, \"num_hidden_layers\": 2,"
                 " \"num_attention_heads\": 4, \"vocab_size\": 10, \"num_experts\": 4,"
                 " \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 8,"
                 " \"shared_expert_intermediate_size\": 8, \"mlp_only_layers\": [7]}",
                 FFN_ERR_CONFIG, "mlp_only_layers", NULL);
    expect_error("{\"model_type\": \"qwen2_moe\", \"hidden_size\": 64, \"num_hidden_layers\": 2,"
                 " \"num_attention_heads\": 4, \"vocab_size\": 10, \"num_experts\": 4,"
                 " \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 8,"
                 " \"shared_expert_intermediate_size\": 8, \"mlp_only_layers\": [0]}",
                 FFN_ERR_MISSING, "intermediate_size", NULL);
    expect_error("{\"model_type\": \"gpt2\", \"n_embd\": 64, \"n_layer\": 2, \"n_head\": 4,"
                 " \"vocab_size\": 10}", FFN_ERR_MISSING, "n_positions", NULL);
    expect_error("{\"model_type\": \"deepseek_v3\", \"hidden_size\": 64, \"num_hidden_layers\": 2,"
                 " \"num_attention_heads\": 4, \"vocab_size\": 10, \"intermediate_size\": 16,"
                 " \"qk_nope_head_dim\": 8, \"qk_rope_head_dim\": 8, \"v_head_dim\": 8}",
                 FFN_ERR_MISSING, "kv_lora_rank", NULL);
    expect_error("{\"model_type\": \"bert\", \"hidden_size\": 64, \"num_hidden_layers\": 2,"
                 " \"num_attention_heads\": 4, \"vocab_size\": 10, \"intermediate_size\": 16,"
                 " \"max_position_embeddings\": 8, \"position_embedding_type\": \"rotary\"}",
                 FFN_ERR_CONFIG, "position_embedding_type", "rotary");
    expect_error("{\"model_type\": 7}", FFN_ERR_CONFIG, "model_type", NULL);
    expect_error("[1, 2]", FFN_ERR_CONFIG, "object", NULL);
    expect_error("{\"model_type\": \"llama\",", FFN_ERR_FORMAT, NULL, NULL);
    expect_error("", FFN_ERR_FORMAT, NULL, NULL);

    ffn_params_report *r = NULL;
    ffn_status st = ffn_params_from_config("/nonexistent/config.json", NULL, &r);
    CHECK(st == FFN_ERR_IO && r == NULL, "missing file: %s", ffn_status_str(st));
    CHECK(strstr(ffn_last_error(), "/nonexistent/config.json") != NULL, "names the file: %s",
          ffn_last_error());
    ffn_params_options opt = {.seq_len = -5};
    st = ffn_params_from_config(config_path("gpt2"), &opt, &r);
    CHECK(st == FFN_ERR_INVALID_ARG && r == NULL, "negative seq_len");
    CHECK(ffn_params_from_json("{}", 2, "x", NULL, NULL) == FFN_ERR_INVALID_ARG, "NULL out");
    ffn_params_report_free(NULL);
}

/* ---- hostile variations of real configs: no crash, an error or a consistent report */

static char *read_text(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = malloc(1 << 16);
    *len = buf ? fread(buf, 1, (1 << 16) - 1, f) : 0;
    fclose(f);
    if (buf) buf[*len] = '\0';
    return buf;
}

static void test_mutations(void) {
    static const char *names[] = {"gpt2", "bert-base-uncased", "Llama-2-7b-hf", "Mixtral-8x7B-v0.1",
                                  "Qwen1.5-MoE-A2.7B", "DeepSeek-V2-Lite", "DeepSeek-V3"};
    static const char *values[] = {"-1", "0", "1", "2", "3", "2147483648", "1099511627776",
                                   "4611686018427387904", "9223372036854775807", "1e30", "null",
                                   "\"x\"", "3.5", "[]", "{}", "true", "-9223372036854775808"};
    uint64_t rng = 0x9E3779B97F4A7C15ULL;
    int ok = 0, failed = 0;
    for (size_t m = 0; m < sizeof names / sizeof names[0]; m++) {
        size_t len = 0;
        char *text = read_text(config_path(names[m]), &len);
        CHECK(text != NULL, "read %s", names[m]);
        if (!text) continue;
        char *buf = malloc(len + 64);
        for (int trial = 0; trial < 300; trial++) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            /* replace the value after the k-th ':' with a hostile one */
            size_t colons = 0;
            for (size_t i = 0; i < len; i++) colons += text[i] == ':';
            size_t k = (size_t)(rng % colons), at = 0, seen = 0;
            for (size_t i = 0; i < len; i++)
                if (text[i] == ':' && seen++ == k) { at = i + 1; break; }
            size_t end = at;
            int depth = 0;
            while (end < len && (depth || (text[end] != ',' && text[end] != '}'))) {
                if (text[end] == '[') depth++;
                if (text[end] == ']') depth--;
                end++;
            }
            const char *v = values[(rng >> 20) % (sizeof values / sizeof values[0])];
            size_t vl = strlen(v);
            if (len - (end - at) + vl + 1 > len + 64) continue;
            memcpy(buf, text, at);
            buf[at] = ' ';
            memcpy(buf + at + 1, v, vl);
            memcpy(buf + at + 1 + vl, text + end, len - end);
            size_t n = at + 1 + vl + (len - end);
            ffn_params_options opt = {.seq_len = (int64_t)(rng % 100000) + 1};
            ffn_params_report *r = NULL;
            ffn_status st = ffn_params_from_json(buf, n, "mutated", &opt, &r);
            if (st == FFN_OK) {
                ok++;
                check_consistency("mutated", r);
                ffn_params_report_free(r);
            } else {
                failed++;
                CHECK(r == NULL && strstr(ffn_last_error(), "mutated") != NULL, "error names the input: %s",
                      ffn_last_error());
            }
        }
        free(buf);
        free(text);
    }
    printf("mutations: %d accepted (consistent), %d rejected with a message\n", ok, failed);
    CHECK(ok > 0 && failed > 0, "both outcomes exercised");
}

/* ---- the LLaMA sizing rule --------------------------------------------------- */

static void test_llama_rule(void) {
    int64_t f = 0;
    CHECK(ffn_params_llama_intermediate(4096, 256, 0, &f) == FFN_OK && f == 11008, "7B: %lld", (long long)f);
    CHECK(ffn_params_llama_intermediate(4096, 1024, 1.3, &f) == FFN_OK && f == 14336, "Llama-3-8B: %lld",
          (long long)f);
    CHECK(ffn_params_llama_intermediate(5120, 256, 0, &f) == FFN_OK && f == 13824, "13B: %lld", (long long)f);
    CHECK(ffn_params_llama_intermediate(8192, 4096, 1.3, &f) == FFN_OK && f == 28672, "70B: %lld",
          (long long)f);
    CHECK(ffn_params_llama_intermediate(288, 32, 0, &f) == FFN_OK && f == 768, "stories15M: %lld",
          (long long)f);
    CHECK(ffn_params_llama_intermediate(0, 256, 0, &f) == FFN_ERR_INVALID_ARG, "hidden 0");
    CHECK(ffn_params_llama_intermediate(4096, 0, 0, &f) == FFN_ERR_INVALID_ARG, "multiple_of 0");
    CHECK(ffn_params_llama_intermediate(4096, 256, NAN, &f) == FFN_ERR_INVALID_ARG, "NaN");
    /* every rule result is a multiple, and at least the 2/3 width */
    for (int64_t d = 64; d <= 8192; d += 64) {
        CHECK(ffn_params_llama_intermediate(d, 256, 0, &f) == FFN_OK, "d %lld", (long long)d);
        CHECK(f % 256 == 0 && f >= 8 * d / 3 && f - 8 * d / 3 < 256, "d %lld -> %lld", (long long)d,
              (long long)f);
    }
}

int main(void) {
    check_published("gpt2", 124439808LL, 124439808LL);
    check_published("bert-base-uncased", 109482240LL, 109482240LL);
    check_published("Llama-2-7b-hf", 6738415616LL, 6738415616LL);
    check_published("Llama-2-13b-hf", 13015864320LL, 0);
    check_published("Llama-2-70b-hf", 68976648192LL, 0);
    check_published("Meta-Llama-3-8B", 8030261248LL, 0);
    check_published("Mistral-7B-v0.1", 7241732096LL, 0);
    check_published("Mixtral-8x7B-v0.1", 46702792704LL, 12879925248LL);
    check_published("Qwen2-7B", 7615616512LL, 0);
    check_published("Qwen2-0.5B", 494032768LL, 0);
    check_published("Qwen1.5-MoE-A2.7B", 14315784192LL, 0);
    check_published("DeepSeek-V2-Lite", 15706484224LL, 0);
    check_published("DeepSeek-V3", 671026419200LL, 0);
    test_gpt2_components();
    test_bert_components();
    test_llama_flops();
    test_gqa_and_tied();
    test_moe_flops();
    test_moe_details();
    test_sparse_step();
    test_errors();
    test_mutations();
    test_llama_rule();
    return check_done("test_params");
}
