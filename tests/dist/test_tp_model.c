/* test_tp_model.c -- the tensor-parallel model against the single-process
 * model (mpirun -np 2 and -np 4, run by tests/cli/test_dist.sh).
 *
 * Every rank builds the same full model (one seed) and its tensor-parallel
 * share; on the same tokens the logits, the loss and every gradient (the
 * ranks' slices put back together) must equal the full model's to 1e-5
 * relative (logits: max |a-b| over max |b|; a gradient tensor: its max
 * |a-b| over the model's largest gradient entry), and so must the KV-cache
 * path (prefill then steps).  Configs: GQA with an intermediate size that
 * does not divide by the ranks and biases on q/k/v and the MLP (Qwen2-like);
 * per-head q/k norm (Qwen3-like); GPT-2-like (LayerNorm, learned positions,
 * o_proj and MLP biases, dense GELU); MoE layers split Megatron style
 * (every expert's and the shared expert's units over the ranks, odd
 * widths, biases, the aux and z losses on; and dense experts of
 * intermediate_size in every other layer). */
#include "ffn.h"
#include "ffn/dist.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, failures;

#define CHECK(cond, ...)                                \
    do {                                                \
        if (!(cond)) {                                  \
            fprintf(stderr, "FAIL rank %d: ", rank);    \
            fprintf(stderr, __VA_ARGS__);               \
            fprintf(stderr, "\n");                      \
            failures++;                                 \
        }                                               \
    } while (0)

static double rel(const float *a, const float *b, int64_t n) {
    double m = 0, d = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (e > d) d = e;
        if (fabs(b[i]) > m) m = fabs(b[i]);
    }
    return m > 0 ? d / m : d;
}

static void one(ffn_dist *d, ffn_ctx *ctx, const char *what, ffn_model_config cfg) {
    const int64_t B = 2, T = 7, N = B * T, V = cfg.vocab_size;
    ffn_model_options opt = {.max_batch = B, .max_seq = T, .training = 1};
    ffn_model *full = NULL, *back = NULL, *tp = NULL;
    ffn_status st = ffn_model_create(ctx, &cfg, &opt, &full);
    if (st == FFN_OK) st = ffn_model_create(ctx, &cfg, &opt, &back);
    if (st == FFN_OK) st = ffn_model_init_weights(full, 11);
    if (st == FFN_OK) { /* biases are zero after init: give them values */
        int64_t n;
        float *p = ffn_model_params(full, &n);
        for (int64_t i = 0; i < ffn_model_num_tensors(full); i++) {
            const ffn_model_tensor *t = ffn_model_tensor_at(full, i);
            if (strstr(t->name, ".bias"))
                for (int64_t j = 0; j < t->numel; j++) p[t->offset + j] = 0.05f * (float)((j * 7 + i) % 11 - 5);
        }
        st = ffn_model_params_changed(full);
    }
    if (st == FFN_OK) st = ffn_dist_tp_model_create(d, ctx, full, &opt, &tp);
    CHECK(st == FFN_OK, "%s: create: %s", what, ffn_last_error());
    if (st != FFN_OK) goto out;
    int32_t tok[14], tgt[14];
    for (int64_t i = 0; i < N; i++) tok[i] = (int32_t)((i * 13 + 5) % V), tgt[i] = (int32_t)((i * 7 + 3) % V);
    float *lf = malloc((size_t)(N * V) * sizeof(float)), *lt = malloc((size_t)(N * V) * sizeof(float));
    st = ffn_model_logits(full, lf, tok, B, T);
    if (st == FFN_OK) st = ffn_model_logits(tp, lt, tok, B, T);
    CHECK(st == FFN_OK, "%s: logits: %s", what, ffn_last_error());
    double el = rel(lt, lf, N * V);
    CHECK(el <= 1e-5, "%s: logits differ by %.3g", what, el);
    ffn_model_loss a, b;
    ffn_model_zero_grads(full);
    ffn_model_zero_grads(tp);
    st = ffn_model_forward_backward(full, tok, tgt, B, T, 1.0f, &a);
    if (st == FFN_OK) st = ffn_model_forward_backward(tp, tok, tgt, B, T, 1.0f, &b);
    CHECK(st == FFN_OK, "%s: forward_backward: %s", what, ffn_last_error());
    /* the MoE aux and z losses count on tp rank 0 only (the others: ce) */
    double want = ffn_dist_rank(d, FFN_DIST_TP) == 0 || cfg.num_experts == 0 ? a.total : a.ce;
    CHECK(fabs(want - b.total) <= 1e-5 * fabs(want), "%s: loss %.9g vs %.9g", what, b.total, want);
    CHECK(fabs(a.ce - b.ce) <= 1e-5 * fabs(a.ce), "%s: ce %.9g vs %.9g", what, b.ce, a.ce);
    st = ffn_dist_tp_model_sync_grads(d, tp);
    if (st == FFN_OK) st = ffn_dist_tp_model_gather(d, tp, back, 1);
    CHECK(st == FFN_OK, "%s: gather: %s", what, ffn_last_error());
    /* each tensor's largest difference against the model's largest gradient
     * (a tensor whose exact gradient is 0, such as k_proj.bias under
     * softmax's shift invariance, has no scale of its own) */
    double eg = 0, gmax = 0;
    int64_t ng;
    const float *gf = ffn_model_grads(full, &ng), *gb = ffn_model_grads(back, NULL);
    for (int64_t i = 0; i < ng; i++) gmax = fabs(gf[i]) > gmax ? fabs(gf[i]) : gmax;
    for (int64_t i = 0; i < ffn_model_num_tensors(full); i++) {
        const ffn_model_tensor *t = ffn_model_tensor_at(full, i);
        double e = 0;
        for (int64_t j = 0; j < t->numel; j++) {
            double x = fabs((double)gb[t->offset + j] - gf[t->offset + j]);
            e = x > e ? x : e;
        }
        e /= gmax;
        if (e > eg) eg = e;
        CHECK(e <= 1e-5, "%s: gradient of %s differs by %.3g of the largest", what, t->name, e);
    }
    /* the KV cache: prefill 4 tokens, then 3 steps */
    float *sf = malloc((size_t)V * sizeof(float)), *stp = malloc((size_t)V * sizeof(float));
    double ec = 0;
    ffn_model_reset(full);
    ffn_model_reset(tp);
    st = ffn_model_prefill(full, tok, 4, sf);
    if (st == FFN_OK) st = ffn_model_prefill(tp, tok, 4, stp);
    for (int s = 0; s < 3 && st == FFN_OK; s++) {
        double e = rel(stp, sf, V);
        if (e > ec) ec = e;
        st = ffn_model_step(full, tok[4 + s], sf);
        if (st == FFN_OK) st = ffn_model_step(tp, tok[4 + s], stp);
    }
    CHECK(st == FFN_OK && ec <= 1e-5, "%s: KV cache: %.3g %s", what, ec, st ? ffn_last_error() : "");
    /* the parameters put back together are the full model's, bitwise */
    st = ffn_dist_tp_model_gather(d, tp, back, 0);
    CHECK(st == FFN_OK && !memcmp(ffn_model_params(back, NULL), ffn_model_params(full, NULL),
                                  (size_t)ffn_model_num_params(full) * sizeof(float)),
          "%s: gathered parameters differ", what);
    if (rank == 0)
        printf("ok   tp %d %s: logits %.2g, loss %.9g, gradients %.2g, KV cache %.2g\n",
               ffn_dist_size(d, FFN_DIST_TP), what, el, b.total, eg, ec);
    free(lf), free(lt), free(sf), free(stp);
out:
    ffn_model_free(full);
    ffn_model_free(back);
    ffn_model_free(tp);
}

int main(int argc, char **argv) {
    int64_t P = argc > 1 ? atoll(argv[1]) : 1;
    ffn_dist_layout lay = {.tp = P};
    ffn_dist *d = NULL;
    if (ffn_dist_init(&argc, &argv, &lay, &d) != FFN_OK) {
        fprintf(stderr, "init: %s\n", ffn_last_error());
        return 1;
    }
    rank = ffn_dist_rank(d, FFN_DIST_WORLD);
    ffn_ctx *ctx = NULL;
    ffn_ctx_create(1, &ctx);
    ffn_model_config c;
    ffn_model_config_default(&c);
    c.vocab_size = 37, c.hidden_size = 32, c.num_hidden_layers = 2, c.num_attention_heads = 8,
    c.num_key_value_heads = 4, c.intermediate_size = 45, c.max_position_embeddings = 16;
    c.attention_bias = 1, c.mlp_bias = 1, c.tie_word_embeddings = 0;
    one(d, ctx, "qwen2-like (GQA 8/4, F 45, biases)", c);
    ffn_model_config q = c;
    q.attention_bias = 0, q.mlp_bias = 0, q.qk_norm = FFN_QK_NORM_HEAD, q.head_dim = 12,
    q.num_key_value_heads = 4, q.tie_word_embeddings = 1;
    one(d, ctx, "qwen3-like (q/k norm per head, head_dim 12)", q);
    ffn_model_config g = c;
    g.norm_type = FFN_NORM_LAYER, g.learned_positions = 1, g.attention_out_bias = 1,
    g.mlp_type = FFN_MODEL_MLP_DENSE, g.hidden_act = FFN_ACT_GELU_TANH, g.intermediate_size = 61;
    one(d, ctx, "gpt2-like (LayerNorm, positions, o/MLP biases, dense)", g);
    ffn_model_config m = c;
    m.num_experts = 5, m.num_experts_per_tok = 2, m.moe_intermediate_size = 21,
    m.shared_expert_intermediate_size = 19;
    one(d, ctx, "qwen2-moe-like (E 5 top-2, Fe 21, shared Fs 19, biases, aux + z)", m);
    ffn_model_config m2 = c;
    m2.num_experts = 4, m2.num_experts_per_tok = 1, m2.moe_layer_freq = 2, m2.mlp_bias = 0,
    m2.mlp_type = FFN_MODEL_MLP_DENSE, m2.hidden_act = FFN_ACT_GELU_TANH;
    one(d, ctx, "moe every 2nd layer (E 4 top-1, dense experts of F 45)", m2);
    double f = failures;
    ffn_dist_allreduce_f64(d, FFN_DIST_WORLD, &f, 1);
    ffn_ctx_free(ctx);
    ffn_dist_free(d);
    if (rank == 0) printf("%s: %d failure(s) over all ranks\n", f ? "FAIL" : "PASS", (int)f);
    return f ? 1 : 0;
}
