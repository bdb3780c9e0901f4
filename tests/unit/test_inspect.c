/* test_inspect.c -- the FFN inspection API (include/ffn/inspect.h):
 *   - the capture forward equals ffn_model_logits (so the captured FFN
 *     inputs/outputs are the model's);
 *   - the neuron contributions sum back to the FFN output:
 *     Σ_i w·m_i·v_i + bias == y within fp32 tolerance, for gated, dense and
 *     MoE (with a shared expert and biases) models, random and trained;
 *   - ffn_inspect_run with every neuron kept explains all of y (ratio and
 *     cosine 1), its top neurons are the largest, gate·up == product;
 *   - the logit lens equals U·(g ⊙ v_i) computed here from the tensors;
 *   - the trigger-example search equals brute force (every activation
 *     sorted), ties included (ReLU gives exact zeros), and the agreement
 *     rate is recounted;
 *   - the probe learns a label that is a function of the token, and does
 *     not beat chance on random labels (it can fail);
 *   - bad arguments are errors, not crashes. */
#include "check.h"
#include "ffn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 12345;
static uint32_t rnd(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

static const float *T_(ffn_model *m, const char *fmt, long long a, long long b) {
    char name[160];
    snprintf(name, sizeof name, fmt, a, b);
    const ffn_model_tensor *t = ffn_model_find_tensor(m, name);
    return t ? ffn_model_params(m, NULL) + t->offset : NULL;
}

static ffn_model *make_model(ffn_ctx *ctx, ffn_model_mlp type, ffn_act act, int bias, int64_t E,
                             int64_t Fs, int interleaved, uint64_t seed) {
    ffn_model_config c;
    ffn_model_config_default(&c);
    c.vocab_size = 37;
    c.hidden_size = 24;
    c.intermediate_size = 40;
    c.num_hidden_layers = 3;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.max_position_embeddings = 32;
    c.mlp_type = type;
    c.hidden_act = act;
    c.mlp_bias = bias;
    c.attention_bias = bias;
    c.tie_word_embeddings = !bias;
    c.num_experts = E;
    c.num_experts_per_tok = 2;
    c.moe_intermediate_size = 12;
    c.moe_layer_freq = 2; /* layer 1 is MoE, 0 and 2 are not */
    c.shared_expert_intermediate_size = Fs;
    c.rope_style = interleaved ? FFN_ROPE_INTERLEAVED : FFN_ROPE_HALF;
    ffn_model *m = NULL;
    ffn_status st = ffn_model_create(ctx, &c, NULL, &m);
    CHECK(st == FFN_OK, "create: %s", ffn_last_error());
    if (st) return NULL;
    ffn_model_init_weights(m, seed);
    /* larger-than-init values so that the FFN terms are not tiny, and
     * non-trivial norms and biases */
    int64_t n;
    float *p = ffn_model_params(m, &n);
    for (int64_t i = 0; i < ffn_model_num_tensors(m); i++) {
        const ffn_model_tensor *t = ffn_model_tensor_at(m, i);
        for (int64_t j = 0; j < t->numel; j++) {
            float u = (float)rnd() / 4294967296.0f - 0.5f;
            if (t->kind == FFN_TENSOR_NORM) p[t->offset + j] = 1.0f + u;
            else if (t->kind == FFN_TENSOR_MLP_BIAS || t->kind == FFN_TENSOR_ATTN_BIAS)
                p[t->offset + j] = 0.2f * u;
            else p[t->offset + j] *= 10.0f;
        }
    }
    ffn_model_params_changed(m);
    return m;
}

/* ---- capture == the model's logits ------------------------------------------------- */

static void test_capture_logits(ffn_ctx *ctx, ffn_model *m, const char *name, int64_t T) {
    const ffn_model_config *c = ffn_model_get_config(m);
    const int64_t V = c->vocab_size;
    int32_t *tok = malloc((size_t)T * sizeof *tok);
    float *a = malloc((size_t)(T * V) * sizeof *a), *b = malloc((size_t)(T * V) * sizeof *b);
    for (int64_t t = 0; t < T; t++) tok[t] = (int32_t)(rnd() % (uint32_t)V);
    ffn_status st = ffn_inspect_capture(ctx, m, tok, T, NULL, NULL, a, NULL, NULL);
    CHECK(st == FFN_OK, "%s: capture: %s", name, ffn_last_error());
    st = ffn_model_logits(m, b, tok, 1, T);
    CHECK(st == FFN_OK, "%s: logits: %s", name, ffn_last_error());
    double err = 0.0, mx = 0.0;
    for (int64_t i = 0; i < T * V; i++) {
        err = fmax(err, fabs((double)a[i] - b[i]));
        mx = fmax(mx, fabs((double)b[i]));
    }
    double tol = 1e-4 * (1.0 + mx);
    printf("%-28s capture logits vs ffn_model_logits: max err %.3g (tol %.3g, max |logit| %.3g)\n",
           name, err, tol, mx);
    CHECK(err <= tol, "%s: capture logits differ from the model's by %g", name, err);
    free(tok), free(a), free(b);
}

/* ---- Σ w·m_i·v_i + bias == y ------------------------------------------------------------ */

/* acc (D) += w · (Σ_i m_i v_i + b) and bound (D) += |w| (Σ |m_i v_i| + |b|) for
 * one FFN whose down_proj is (D, F). */
static void add_terms(double *acc, double *bound, const float *m, const float *down,
                      const float *bias, int64_t D, int64_t F, double w) {
    for (int64_t d = 0; d < D; d++) {
        double s = bias ? bias[d] : 0.0, sb = bias ? fabs(bias[d]) : 0.0;
        for (int64_t i = 0; i < F; i++) {
            s += (double)m[i] * down[d * F + i];
            sb += fabs((double)m[i] * down[d * F + i]);
        }
        acc[d] += w * s;
        bound[d] += fabs(w) * sb;
    }
}

static void test_sum_back(ffn_ctx *ctx, ffn_model *m, const char *name, int64_t T) {
    const ffn_model_config *c = ffn_model_get_config(m);
    const int64_t L = c->num_hidden_layers, D = c->hidden_size, V = c->vocab_size;
    const int64_t K = c->num_experts > 0 ? c->num_experts_per_tok : 1;
    int32_t *tok = malloc((size_t)T * sizeof *tok);
    for (int64_t t = 0; t < T; t++) tok[t] = (int32_t)(rnd() % (uint32_t)V);
    float *X = malloc((size_t)(L * T * D) * sizeof *X), *Y = malloc((size_t)(L * T * D) * sizeof *Y);
    int32_t *ids = malloc((size_t)(L * T * K) * sizeof *ids);
    float *wts = malloc((size_t)(L * T * K) * sizeof *wts);
    ffn_status st = ffn_inspect_capture(ctx, m, tok, T, X, Y, NULL, ids, wts);
    CHECK(st == FFN_OK, "%s: capture: %s", name, ffn_last_error());
    double *acc = malloc((size_t)D * sizeof *acc), *bound = malloc((size_t)D * sizeof *bound);
    float *mm = malloc((size_t)(T * 64) * sizeof *mm), *g = malloc((size_t)(T * 64) * sizeof *g),
          *u = malloc((size_t)(T * 64) * sizeof *u);
    for (int64_t l = 0; l < L; l++) {
        int moe = ffn_model_config_layer_is_moe(c, l);
        double err = 0.0, worst_ratio = 0.0, tol_at = 0.0;
        int64_t width = ffn_inspect_layer_width(m, l);
        CHECK(width == (moe ? c->num_experts * c->moe_intermediate_size : c->intermediate_size),
              "%s: layer %lld width %lld", name, (long long)l, (long long)width);
        for (int64_t t = 0; t < T; t++) {
            const float *x = X + (l * T + t) * D, *y = Y + (l * T + t) * D;
            memset(acc, 0, (size_t)D * sizeof *acc);
            memset(bound, 0, (size_t)D * sizeof *bound);
            if (!moe) {
                int64_t F = c->intermediate_size;
                st = ffn_inspect_neurons(ctx, m, l, -1, x, 1, NULL, g, u, mm);
                CHECK(st == FFN_OK, "neurons: %s", ffn_last_error());
                for (int64_t i = 0; i < F; i++) {
                    float want = c->mlp_type == FFN_MODEL_MLP_GATED ? g[i] * u[i] : g[i];
                    CHECK(mm[i] == want, "%s: product %g != gate·up %g", name, mm[i], want);
                }
                add_terms(acc, bound, mm, T_(m, "model.layers.%lld.mlp.down_proj.weight%.0lld", l, 0),
                          c->mlp_bias ? T_(m, "model.layers.%lld.mlp.down_proj.bias%.0lld", l, 0) : NULL,
                          D, F, 1.0);
            } else {
                int64_t Fe = c->moe_intermediate_size;
                for (int64_t j = 0; j < K; j++) {
                    int64_t e = ids[(l * T + t) * K + j];
                    double w = wts[(l * T + t) * K + j];
                    CHECK(e >= 0 && e < c->num_experts, "%s: routed expert %lld", name, (long long)e);
                    st = ffn_inspect_neurons(ctx, m, l, e, x, 1, NULL, NULL, NULL, mm);
                    CHECK(st == FFN_OK, "neurons: %s", ffn_last_error());
                    add_terms(acc, bound, mm,
                              T_(m, "model.layers.%lld.mlp.experts.%lld.down_proj.weight", l, e),
                              c->mlp_bias ? T_(m, "model.layers.%lld.mlp.experts.%lld.down_proj.bias", l, e)
                                          : NULL, D, Fe, w);
                }
                if (c->shared_expert_intermediate_size > 0) {
                    const float *sg = T_(m, "model.layers.%lld.mlp.shared_expert_gate.weight%.0lld", l, 0);
                    double z = 0.0;
                    for (int64_t d = 0; d < D; d++) z += (double)sg[d] * x[d];
                    st = ffn_inspect_neurons(ctx, m, l, FFN_INSPECT_SHARED_EXPERT, x, 1, NULL, NULL,
                                             NULL, mm);
                    CHECK(st == FFN_OK, "neurons: %s", ffn_last_error());
                    add_terms(acc, bound, mm,
                              T_(m, "model.layers.%lld.mlp.shared_expert.down_proj.weight%.0lld", l, 0),
                              c->mlp_bias ? T_(m, "model.layers.%lld.mlp.shared_expert.down_proj.bias%.0lld", l, 0)
                                          : NULL, D, c->shared_expert_intermediate_size,
                              1.0 / (1.0 + exp(-z)));
                }
            }
            for (int64_t d = 0; d < D; d++) {
                /* fp32 sums of F products: relative to the sum of magnitudes */
                double e = fabs(acc[d] - y[d]), tol = 2e-6 * bound[d] + 1e-6;
                err = fmax(err, e);
                if (e / tol > worst_ratio) worst_ratio = e / tol, tol_at = tol;
            }
        }
        printf("%-28s layer %lld%s: max |sum w*m_i*v_i + b - y| %.3g (worst err/tol %.3f, tol "
               "there %.3g)\n", name, (long long)l, moe ? " (MoE)" : "", err, worst_ratio, tol_at);
        CHECK(worst_ratio <= 1.0, "%s: layer %lld: neuron sum misses y by %g", name, (long long)l,
              err);
    }
    free(tok), free(X), free(Y), free(ids), free(wts), free(acc), free(bound), free(mm), free(g),
        free(u);
}

/* ---- ffn_inspect_run ------------------------------------------------------------------------ */

static void test_run(ffn_ctx *ctx, ffn_model *m, const char *name, int64_t T) {
    const ffn_model_config *c = ffn_model_get_config(m);
    const int64_t V = c->vocab_size, D = c->hidden_size;
    int32_t *tok = malloc((size_t)T * sizeof *tok);
    for (int64_t t = 0; t < T; t++) tok[t] = (int32_t)(rnd() % (uint32_t)V);
    /* every neuron kept: the partial sum is y - bias */
    ffn_inspect_options o;
    ffn_inspect_options_default(&o);
    o.top_k = 1000;
    o.n_promoted = 3;
    ffn_inspect_result *r = NULL;
    ffn_status st = ffn_inspect_run(ctx, m, tok, T, &o, &r);
    CHECK(st == FFN_OK && r, "%s: run: %s", name, ffn_last_error());
    if (!r) return;
    double worst = 0.0;
    for (int64_t li = 0; li < r->n_layers; li++)
        for (int64_t t = 0; t < T; t++) {
            const ffn_inspect_token *tk = ffn_inspect_token_at(r, li, t);
            worst = fmax(worst, fabs(tk->explained - 1.0));
            worst = fmax(worst, fabs(tk->cosine - 1.0));
            worst = fmax(worst, tk->residual);
            for (int64_t j = 1; j < tk->n_top; j++)
                CHECK(fabsf(tk->top[j - 1].contribution) >= fabsf(tk->top[j].contribution),
                      "%s: neurons not sorted by |w·m|", name);
        }
    printf("%-28s all neurons kept: max |explained-1|, |cos-1|, residual = %.3g (tol 1e-4)\n",
           name, worst);
    CHECK(worst < 1e-4, "%s: keeping every neuron explains y only to %g", name, worst);
    ffn_inspect_result_free(r);
    /* top 3 of one dense/gated layer: the largest |m_i| and the right fields */
    o.top_k = 3;
    o.layer = 0;
    st = ffn_inspect_run(ctx, m, tok, T, &o, &r);
    CHECK(st == FFN_OK && r && r->n_layers == 1, "%s: run layer 0: %s", name, ffn_last_error());
    if (!r) return;
    const int64_t F = c->intermediate_size;
    float *X = malloc((size_t)(c->num_hidden_layers * T * D) * sizeof *X);
    float *mm = malloc((size_t)(T * F) * sizeof *mm), *lens = malloc((size_t)V * sizeof *lens);
    ffn_inspect_capture(ctx, m, tok, T, X, NULL, NULL, NULL, NULL);
    ffn_inspect_neurons(ctx, m, 0, -1, X, T, NULL, NULL, NULL, mm);
    for (int64_t t = 0; t < T; t++) {
        const ffn_inspect_token *tk = ffn_inspect_token_at(r, 0, t);
        float best = 0.0f;
        for (int64_t i = 0; i < F; i++) best = fmaxf(best, fabsf(mm[t * F + i]));
        CHECK(tk->n_top == 3 && fabsf(tk->top[0].product) == best && tk->token == tok[t],
              "%s: token %lld: top |m| %g, expected %g", name, (long long)t,
              fabsf(tk->top[0].product), best);
        CHECK(tk->top[0].product == mm[t * F + tk->top[0].index], "%s: product of neuron", name);
        CHECK(tk->explained > 0.0f && tk->explained < 10.0f, "%s: explained %g", name, tk->explained);
        /* promoted tokens: the top of the lens, in order */
        ffn_inspect_value_logits(m, 0, -1, tk->top[0].index, lens);
        for (int64_t p = 0; p < r->n_promoted; p++) {
            int32_t id = tk->top[0].promoted[p];
            CHECK(id >= 0 && id < V && lens[id] == tk->top[0].promoted_logit[p], "%s: promoted", name);
            int64_t above = 0;
            for (int64_t v = 0; v < V; v++) above += lens[v] > lens[id];
            CHECK(above == p, "%s: promoted token %lld has %lld above it", name, (long long)p,
                  (long long)above);
        }
    }
    free(X), free(mm), free(lens), free(tok);
    ffn_inspect_result_free(r);
}

/* ---- the logit lens -------------------------------------------------------------------- */

static void test_lens(ffn_model *m, const char *name) {
    const ffn_model_config *c = ffn_model_get_config(m);
    const int64_t V = c->vocab_size, D = c->hidden_size, F = c->intermediate_size;
    const float *U = c->tie_word_embeddings ? T_(m, "model.embed_tokens.weight%.0lld%.0lld", 0, 0)
                                            : T_(m, "lm_head.weight%.0lld%.0lld", 0, 0);
    const float *g = T_(m, "model.norm.weight%.0lld%.0lld", 0, 0);
    const float *down = T_(m, "model.layers.%lld.mlp.down_proj.weight%.0lld", 2, 0);
    float *lens = malloc((size_t)V * sizeof *lens);
    double err = 0.0, mx = 0.0;
    for (int64_t i = 0; i < F; i += 7) {
        ffn_status st = ffn_inspect_value_logits(m, 2, -1, i, lens);
        CHECK(st == FFN_OK, "%s: lens: %s", name, ffn_last_error());
        for (int64_t v = 0; v < V; v++) {
            double want = 0.0;
            for (int64_t d = 0; d < D; d++) want += (double)U[v * D + d] * g[d] * down[d * F + i];
            err = fmax(err, fabs(want - lens[v]));
            mx = fmax(mx, fabs(want));
        }
    }
    printf("%-28s logit lens vs U·(g⊙v): max err %.3g (tol %.3g)\n", name, err, 1e-5 * (1 + mx));
    CHECK(err <= 1e-5 * (1 + mx), "%s: lens error %g", name, err);
    free(lens);
}

/* ---- trigger examples == brute force ------------------------------------------------------ */

typedef struct act_pos {
    float a;
    int64_t p;
} act_pos;

static int cmp_act(const void *pa, const void *pb) {
    const act_pos *a = pa, *b = pb;
    if (a->a != b->a) return a->a > b->a ? -1 : 1;
    return a->p < b->p ? -1 : a->p > b->p;
}

static void test_keys(ffn_ctx *ctx, ffn_model *m, const char *name, int64_t n, int64_t W,
                      int64_t t) {
    const ffn_model_config *c = ffn_model_get_config(m);
    const int64_t D = c->hidden_size, L = c->num_hidden_layers;
    const int64_t K = c->num_experts > 0 ? c->num_experts_per_tok : 1;
    int32_t *tok = malloc((size_t)n * sizeof *tok);
    for (int64_t i = 0; i < n; i++) tok[i] = (int32_t)(rnd() % 9); /* repeats: many ties */
    ffn_keys_options o;
    ffn_keys_options_default(&o);
    o.top_examples = t;
    o.window = W;
    o.n_promoted = 2;
    ffn_keys_result *r = NULL;
    ffn_status st = ffn_inspect_keys(ctx, m, tok, n, -1, &o, &r);
    CHECK(st == FFN_OK && r, "%s: keys: %s", name, ffn_last_error());
    if (!r) return;
    int64_t mismatches = 0, compared = 0, ties = 0;
    for (int64_t li = 0; li < r->n_layers; li++) {
        const ffn_keys_layer *kl = &r->layers[li];
        const int64_t l = kl->layer, Wd = kl->n_neurons, Fe = kl->fe;
        int moe = ffn_model_config_layer_is_moe(c, l);
        /* every activation of every neuron */
        act_pos *all = malloc((size_t)(Wd * n) * sizeof *all);
        int64_t *cnt = calloc((size_t)Wd, sizeof *cnt);
        float *X = malloc((size_t)(L * W * D) * sizeof *X), *mm = malloc((size_t)(W * Fe) * sizeof *mm);
        int32_t *ids = malloc((size_t)(L * W * K) * sizeof *ids);
        float *wts = malloc((size_t)(L * W * K) * sizeof *wts);
        for (int64_t s0 = 0; s0 < n; s0 += W) {
            int64_t Tw = n - s0 < W ? n - s0 : W;
            ffn_inspect_capture(ctx, m, tok + s0, Tw, X, NULL, NULL, ids, wts);
            const float *Xl = X + l * Tw * D;
            for (int64_t e = 0; e < (moe ? c->num_experts : 1); e++) {
                ffn_inspect_neurons(ctx, m, l, moe ? e : -1, Xl, Tw, NULL, NULL, NULL, mm);
                for (int64_t r0 = 0; r0 < Tw; r0++) {
                    float w = moe ? 0.0f : 1.0f;
                    int routed = !moe;
                    for (int64_t j = 0; moe && j < K; j++)
                        if (ids[(l * Tw + r0) * K + j] == e) routed = 1, w = wts[(l * Tw + r0) * K + j];
                    if (!routed) continue;
                    for (int64_t i = 0; i < Fe; i++) {
                        int64_t gi = e * Fe + i;
                        all[gi * n + cnt[gi]++] = (act_pos){w * mm[r0 * Fe + i], s0 + r0};
                    }
                }
            }
        }
        int64_t agree = 0, counted = 0, next_count[64] = {0};
        double chance = 0.0;
        for (int64_t i = 1; i < n; i++) next_count[tok[i]]++;
        int32_t top1[2];
        for (int64_t i = 0; i < Wd; i++) {
            qsort(all + i * n, (size_t)cnt[i], sizeof *all, cmp_act);
            for (int64_t j = 0; j < kl->n_examples; j++) {
                const ffn_key_example *ex = &kl->examples[i * kl->n_examples + j];
                int64_t wp = j < cnt[i] ? all[i * n + j].p : -1;
                compared++;
                if (ex->position != wp || (wp >= 0 && ex->activation != all[i * n + j].a))
                    mismatches++;
                if (j > 0 && j < cnt[i] && all[i * n + j].a == all[i * n + j - 1].a) ties++;
            }
            ffn_inspect_value_top(m, l, moe ? i / Fe : -1, moe ? i % Fe : i, 2, top1, NULL);
            CHECK(top1[0] == kl->promoted[i * 2] && top1[1] == kl->promoted[i * 2 + 1],
                  "%s: promoted tokens of neuron %lld", name, (long long)i);
            if (cnt[i] > 0 && all[i * n].p + 1 < n) {
                counted++;
                agree += top1[0] == tok[all[i * n].p + 1];
                chance += top1[0] < 64 ? (double)next_count[top1[0]] / (double)(n - 1) : 0.0;
            }
        }
        CHECK(agree == kl->n_agree && counted == kl->n_counted,
              "%s: layer %lld agreement %lld/%lld, brute force %lld/%lld", name, (long long)l,
              (long long)kl->n_agree, (long long)kl->n_counted, (long long)agree,
              (long long)counted);
        chance = counted ? chance / (double)counted : 0.0;
        CHECK(fabs(chance - kl->chance) < 1e-12, "%s: layer %lld chance %g, brute force %g", name,
              (long long)l, kl->chance, chance);
        free(all), free(cnt), free(X), free(mm), free(ids), free(wts);
    }
    printf("%-28s trigger examples vs brute force: %lld of %lld differ (%lld tied ranks)\n", name,
           (long long)mismatches, (long long)compared, (long long)ties);
    CHECK(mismatches == 0, "%s: %lld trigger examples differ from brute force", name,
          (long long)mismatches);
    ffn_keys_result_free(r);
    free(tok);
}

/* ---- the probe ---------------------------------------------------------------------------- */

static void test_probe(ffn_ctx *ctx, ffn_model *m) {
    const int64_t n = 600, V = ffn_model_get_config(m)->vocab_size;
    int32_t *tok = malloc(n * sizeof *tok);
    int8_t *lab = malloc(n), *split = malloc(n);
    ffn_probe_options o;
    ffn_probe_options_default(&o);
    o.epochs = 30;
    /* the label is a function of the token: random features identify the
     * token, so the probe learns it (sentence-style split: same tokens on
     * both sides) */
    for (int64_t i = 0; i < n; i++) {
        tok[i] = (int32_t)(rnd() % (uint32_t)V);
        lab[i] = (int8_t)(tok[i] % 3 == 0 ? 0 : tok[i] % 3 == 1 ? 3 : 6);
        split[i] = i >= 450;
    }
    ffn_probe_result *r = NULL;
    ffn_status st = ffn_inspect_probe(ctx, m, tok, lab, split, NULL, n, &o, &r);
    CHECK(st == FFN_OK && r, "probe: %s", ffn_last_error());
    if (r) {
        printf("probe, label = f(token):    baseline %.3f, layer 0 gate %.3f input %.3f\n",
               r->baseline, r->layers[0].acc_gate, r->layers[0].acc_input);
        CHECK(r->layers[0].acc_input > r->baseline + 0.3, "probe fails to learn f(token)");
        CHECK(r->n_train == 450 && r->n_test == 150, "split counts %lld %lld",
              (long long)r->n_train, (long long)r->n_test);
        ffn_probe_result_free(r);
    }
    /* random labels: nothing to learn, held-out accuracy near chance */
    for (int64_t i = 0; i < n; i++) lab[i] = (int8_t)(rnd() % 2 ? 4 : 1);
    st = ffn_inspect_probe(ctx, m, tok, lab, split, NULL, n, &o, &r);
    CHECK(st == FFN_OK && r, "probe: %s", ffn_last_error());
    if (r) {
        printf("probe, random labels:       baseline %.3f, layer 0 gate %.3f input %.3f\n",
               r->baseline, r->layers[0].acc_gate, r->layers[0].acc_input);
        CHECK(r->layers[0].acc_gate < r->baseline + 0.1 && r->layers[0].acc_input < r->baseline + 0.1,
              "probe beats the baseline on random labels");
        /* selective neurons are real features with finite d */
        for (int64_t j = 0; j < FFN_WORD_N_CLASSES * r->top_selective; j++)
            CHECK(r->layers[0].selective[j] < ffn_inspect_layer_width(m, 0) &&
                  isfinite(r->layers[0].selective_d[j]), "selective neuron");
        ffn_probe_result_free(r);
    }
    free(tok), free(lab), free(split);
}

/* ---- a trained model --------------------------------------------------------------------- */

static ffn_model *train_tiny(ffn_ctx *ctx) {
    ffn_model_config c;
    ffn_model_config_default(&c);
    c.vocab_size = 40;
    c.hidden_size = 32;
    c.intermediate_size = 48;
    c.num_hidden_layers = 3;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 4;
    c.max_position_embeddings = 32;
    ffn_model_options mo = {.max_batch = 8, .max_seq = 32, .training = 1};
    ffn_model *m = NULL;
    if (ffn_model_create(ctx, &c, &mo, &m)) return NULL;
    ffn_model_init_weights(m, 3);
    ffn_train_options to;
    ffn_train_options_default(&to);
    to.lr = 3e-3;
    to.steps = 60;
    to.warmup = 5;
    ffn_adamw *opt = NULL;
    if (ffn_adamw_create(m, &to, &opt)) {
        ffn_model_free(m);
        return NULL;
    }
    /* a learnable stream: token i+1 = (token i · 7 + 3) mod 40, with noise */
    int32_t tok[8 * 33];
    double first = 0, last = 0;
    for (int64_t s = 1; s <= to.steps; s++) {
        for (int b = 0; b < 8; b++) {
            int32_t x = (int32_t)(rnd() % 40);
            for (int t = 0; t < 33; t++) {
                tok[b * 33 + t] = x;
                x = rnd() % 8 == 0 ? (int32_t)(rnd() % 40) : (x * 7 + 3) % 40;
            }
        }
        int32_t in[8 * 32], tg[8 * 32];
        for (int b = 0; b < 8; b++)
            for (int t = 0; t < 32; t++) in[b * 32 + t] = tok[b * 33 + t], tg[b * 32 + t] = tok[b * 33 + t + 1];
        ffn_model_zero_grads(m);
        ffn_model_loss loss;
        ffn_model_forward_backward(m, in, tg, 8, 32, 1.0f, &loss);
        ffn_adamw_step(opt, s, NULL, NULL);
        if (s == 1) first = loss.ce;
        last = loss.ce;
    }
    printf("trained tiny model: loss %.3f -> %.3f in %lld steps\n", first, last, (long long)to.steps);
    CHECK(last < first - 0.5, "the tiny model did not train (%g -> %g)", first, last);
    ffn_adamw_free(opt);
    return m;
}

/* ---- errors --------------------------------------------------------------------------------- */

static void test_errors(ffn_ctx *ctx, ffn_model *m) {
    int32_t tok[4] = {1, 2, 3, 1000};
    ffn_inspect_result *r = (ffn_inspect_result *)1;
    CHECK(ffn_inspect_run(ctx, m, tok, 4, NULL, &r) == FFN_ERR_INVALID_ARG && r == NULL,
          "token out of vocab accepted");
    CHECK(strstr(ffn_last_error(), "tokens[3]") != NULL, "message: %s", ffn_last_error());
    ffn_inspect_options o;
    ffn_inspect_options_default(&o);
    o.layer = 99;
    CHECK(ffn_inspect_run(ctx, m, tok, 3, &o, &r) == FFN_ERR_INVALID_ARG, "layer 99 accepted");
    CHECK(ffn_inspect_run(ctx, m, tok, 0, NULL, &r) == FFN_ERR_INVALID_ARG, "T = 0 accepted");
    int32_t *lng = calloc(100, sizeof *lng);
    CHECK(ffn_inspect_run(ctx, m, lng, 100, NULL, &r) == FFN_ERR_INVALID_ARG, "T > context accepted");
    free(lng);
    CHECK(ffn_inspect_neurons(ctx, m, 1, -1, NULL, 1, NULL, NULL, NULL, NULL) != FFN_OK, "NULL x");
    float v[64];
    CHECK(ffn_inspect_value_vector(m, 0, -1, 100000, v) == FFN_ERR_INVALID_ARG, "neuron range");
    CHECK(ffn_inspect_value_vector(m, 0, 3, 0, v) == FFN_ERR_INVALID_ARG, "expert in dense layer");
    ffn_keys_result *kr = NULL;
    CHECK(ffn_inspect_keys(ctx, m, tok, 4, -1, NULL, &kr) == FFN_ERR_INVALID_ARG && !kr, "keys vocab");
    ffn_inspect_result_free(NULL);
    ffn_keys_result_free(NULL);
    ffn_probe_result_free(NULL);
}

int main(void) {
    ffn_ctx *ctx = NULL;
    ffn_ctx_create(0, &ctx);
    struct {
        const char *name;
        ffn_model_mlp type;
        ffn_act act;
        int bias;
        int64_t E, Fs;
        int interleaved;
    } cases[] = {
        {"gated silu", FFN_MODEL_MLP_GATED, FFN_ACT_SILU, 0, 0, 0, 0},
        {"gated gelu + biases", FFN_MODEL_MLP_GATED, FFN_ACT_GELU, 1, 0, 0, 0},
        {"gated sigmoid, rope interl.", FFN_MODEL_MLP_GATED, FFN_ACT_SIGMOID, 0, 0, 0, 1},
        {"dense relu", FFN_MODEL_MLP_DENSE, FFN_ACT_RELU, 0, 0, 0, 0},
        {"dense gelu_tanh + biases", FFN_MODEL_MLP_DENSE, FFN_ACT_GELU_TANH, 1, 0, 0, 0},
        {"MoE gated E4 K2 + shared", FFN_MODEL_MLP_GATED, FFN_ACT_SILU, 0, 4, 8, 0},
        {"MoE dense relu + biases", FFN_MODEL_MLP_DENSE, FFN_ACT_RELU, 1, 5, 0, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ffn_model *m = make_model(ctx, cases[k].type, cases[k].act, cases[k].bias, cases[k].E,
                                  cases[k].Fs, cases[k].interleaved, 100 + k);
        if (!m) continue;
        test_capture_logits(ctx, m, cases[k].name, 13);
        test_sum_back(ctx, m, cases[k].name, 11);
        test_run(ctx, m, cases[k].name, 9);
        test_lens(m, cases[k].name);
        test_keys(ctx, m, cases[k].name, 53, 16, 6);
        if (k == 0) {
            test_probe(ctx, m);
            test_errors(ctx, m);
        }
        ffn_model_free(m);
    }
    ffn_model *tm = train_tiny(ctx);
    CHECK(tm != NULL, "training the tiny model failed: %s", ffn_last_error());
    if (tm) {
        test_capture_logits(ctx, tm, "trained gated silu", 32);
        test_sum_back(ctx, tm, "trained gated silu", 32);
        test_run(ctx, tm, "trained gated silu", 20);
        test_lens(tm, "trained gated silu");
        test_keys(ctx, tm, "trained gated silu", 70, 32, 5);
        ffn_model_free(tm);
    }
    ffn_ctx_free(ctx);
    return check_done("test_inspect");
}
