/* inspect.c -- looking inside a model's FFNs (include/ffn/inspect.h):
 * a forward pass that captures every layer's FFN input and output, the
 * neurons m_i of one FFN, value vectors and their logit lens, the per-token
 * report (top neurons, explained fraction, MoE routing), and the search for
 * trigger examples of key-value memories (Geva et al., 2021).  The linear
 * probes of gate activations live in probe.c.
 *
 * Letters: T tokens, D hidden, F an FFN's width, E experts, K experts per
 * token, V vocab, L layers, P promoted tokens, C = H·Dh + 2·G·Dh (q, k, v).
 *
 * The forward here re-does the model's arithmetic from its tensor table
 * (embedding, RMSNorm, q/k/v, RoPE, causal attention, o_proj, residual),
 * because the model keeps its activations private.  Norm, RoPE and
 * attention are written out plainly here (double accumulation) rather than
 * borrowed from the model's internals, so that this file is a second,
 * independent implementation: the unit tests check that its logits equal
 * ffn_model_logits to float rounding.  The FFN output itself is
 * computed by ffn_layer_forward / ffn_moe_forward on the model's weights,
 * so that the neuron decomposition below is checked against independent
 * code.  Everything here allocates: it is analysis, not a hot path. */
#include "ffn/inspect.h"
#include "ffn/layer.h"
#include "ffn/model.h"
#include "ffn/moe.h"
#include "base/common.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- the model's tensors ------------------------------------------------------ */

static float *tensor(ffn_model *m, const char *name, int64_t rows, int64_t cols) {
    const ffn_model_tensor *t = ffn_model_find_tensor(m, name);
    if (!t || t->shape[0] != rows || t->shape[1] != cols) return NULL;
    return ffn_model_params(m, NULL) + t->offset;
}

static float *tensorf(ffn_model *m, int64_t rows, int64_t cols, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static float *tensorf(ffn_model *m, int64_t rows, int64_t cols, const char *fmt, ...) {
    char name[192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return tensor(m, name, rows, cols);
}

/* One FFN of a layer: the layer's own (expert -1), a routed expert (e >= 0)
 * or the shared expert (-2). */
typedef struct ffn_view {
    int gated, bias;
    ffn_act act;
    int64_t D, F;
    ffn_layer_params p; /* gate_w (F, D), up_w (F, D), down_w (D, F), biases */
} ffn_view;

static int64_t expert_width(const ffn_model_config *c) {
    return c->moe_intermediate_size > 0 ? c->moe_intermediate_size : c->intermediate_size;
}

static int layer_has_ffn(const ffn_model_config *c, int64_t l) {
    return ffn_model_config_layer_is_moe(c, l) || c->mlp_type != FFN_MODEL_MLP_NONE;
}

static ffn_status ffn_of(ffn_model *m, int64_t l, int64_t expert, ffn_view *v) {
    const ffn_model_config *c = ffn_model_get_config(m);
    if (l < 0 || l >= c->num_hidden_layers)
        return ffn_error(FFN_ERR_INVALID_ARG, "inspect: layer %lld is outside [0, %lld)",
                         (long long)l, (long long)c->num_hidden_layers);
    if (!layer_has_ffn(c, l))
        return ffn_error(FFN_ERR_INVALID_ARG, "inspect: layer %lld has no FFN (mlp_type none)",
                         (long long)l);
    int moe = ffn_model_config_layer_is_moe(c, l);
    char pre[160];
    memset(v, 0, sizeof *v);
    v->gated = c->mlp_type == FFN_MODEL_MLP_GATED;
    v->bias = c->mlp_bias;
    v->act = c->hidden_act;
    v->D = c->hidden_size;
    if (!moe) {
        if (expert != -1)
            return ffn_error(FFN_ERR_INVALID_ARG, "inspect: layer %lld is not a MoE layer: expert "
                             "must be -1, got %lld", (long long)l, (long long)expert);
        v->F = c->intermediate_size;
        snprintf(pre, sizeof pre, "model.layers.%lld.mlp", (long long)l);
    } else if (expert == FFN_INSPECT_SHARED_EXPERT) {
        if (c->shared_expert_intermediate_size <= 0)
            return ffn_error(FFN_ERR_INVALID_ARG, "inspect: layer %lld has no shared expert",
                             (long long)l);
        v->F = c->shared_expert_intermediate_size;
        snprintf(pre, sizeof pre, "model.layers.%lld.mlp.shared_expert", (long long)l);
    } else {
        if (expert < 0 || expert >= c->num_experts)
            return ffn_error(FFN_ERR_INVALID_ARG, "inspect: layer %lld: expert %lld is outside "
                             "[0, %lld) (or -2 for the shared expert)", (long long)l,
                             (long long)expert, (long long)c->num_experts);
        v->F = expert_width(c);
        snprintf(pre, sizeof pre, "model.layers.%lld.mlp.experts.%lld", (long long)l,
                 (long long)expert);
    }
    int64_t D = v->D, F = v->F;
    if (v->gated) v->p.gate_w = tensorf(m, F, D, "%s.gate_proj.weight", pre);
    v->p.up_w = tensorf(m, F, D, "%s.up_proj.weight", pre);
    v->p.down_w = tensorf(m, D, F, "%s.down_proj.weight", pre);
    if (v->bias) {
        if (v->gated) v->p.gate_b = tensorf(m, F, 1, "%s.gate_proj.bias", pre);
        v->p.up_b = tensorf(m, F, 1, "%s.up_proj.bias", pre);
        v->p.down_b = tensorf(m, D, 1, "%s.down_proj.bias", pre);
    }
    if ((v->gated && !v->p.gate_w) || !v->p.up_w || !v->p.down_w ||
        (v->bias && ((v->gated && !v->p.gate_b) || !v->p.up_b || !v->p.down_b)))
        return ffn_error(FFN_ERR_INTERNAL, "inspect: %s: a tensor is missing from the model's "
                         "table", pre);
    return FFN_OK;
}

int64_t ffn_inspect_layer_width(const ffn_model *m, int64_t l) {
    if (!m) return 0;
    const ffn_model_config *c = ffn_model_get_config(m);
    if (l < 0 || l >= c->num_hidden_layers || !layer_has_ffn(c, l)) return 0;
    if (ffn_model_config_layer_is_moe(c, l)) return c->num_experts * expert_width(c);
    return c->intermediate_size;
}

/* ---- neurons -------------------------------------------------------------------- */

/* gate_pre, up (N, F) = x·Wᵀ + b;  gate = act(gate_pre);  m = gate ⊙ up (gated)
 * or act(up) (dense). */
static ffn_status neurons(ffn_ctx *ctx, const ffn_view *v, const float *x, int64_t n,
                          float *gate_pre, float *gate, float *up, float *mo) {
    const int64_t D = v->D, F = v->F;
    ffn_status st;
    if ((st = ffn_gemm(ctx, 0, 1, n, F, D, 1.0f, x, D, v->p.up_w, D, 0.0f, up, F))) return st;
    if (v->p.up_b)
        for (int64_t r = 0; r < n; r++) ffn_add_bias(up + r * F, v->p.up_b, F);
    if (v->gated) {
        if ((st = ffn_gemm(ctx, 0, 1, n, F, D, 1.0f, x, D, v->p.gate_w, D, 0.0f, gate_pre, F)))
            return st;
        if (v->p.gate_b)
            for (int64_t r = 0; r < n; r++) ffn_add_bias(gate_pre + r * F, v->p.gate_b, F);
    } else {
        memcpy(gate_pre, up, (size_t)(n * F) * sizeof *up);
    }
    for (int64_t i = 0; i < n * F; i++) {
        gate[i] = ffn_act_forward(v->act, gate_pre[i]);
        mo[i] = v->gated ? gate[i] * up[i] : gate[i];
    }
    return FFN_OK;
}

ffn_status ffn_inspect_neurons(ffn_ctx *ctx, ffn_model *m, int64_t l, int64_t expert,
                               const float *x, int64_t n, float *gate_pre, float *gate, float *up,
                               float *mo) {
    if (!m || (!x && n > 0) || n < 0)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_inspect_neurons: model and x must not be "
                         "NULL, n >= 0 (n = %lld)", (long long)n);
    ffn_view v;
    ffn_status st = ffn_of(m, l, expert, &v);
    if (st || n == 0) return st;
    size_t cnt;
    if (ffn_mul_size((size_t)n, (size_t)v.F, &cnt) || cnt > SIZE_MAX / 16)
        return ffn_error(FFN_ERR_OVERFLOW, "ffn_inspect_neurons: n·F overflows");
    float *buf = malloc(cnt * 4 * sizeof(float));
    if (!buf) return ffn_error(FFN_ERR_NOMEM, "ffn_inspect_neurons: out of memory");
    st = neurons(ctx, &v, x, n, buf, buf + cnt, buf + 2 * cnt, buf + 3 * cnt);
    if (!st) {
        if (gate_pre) memcpy(gate_pre, buf, cnt * sizeof(float));
        if (gate) memcpy(gate, buf + cnt, cnt * sizeof(float));
        if (up) memcpy(up, buf + 2 * cnt, cnt * sizeof(float));
        if (mo) memcpy(mo, buf + 3 * cnt, cnt * sizeof(float));
    }
    free(buf);
    return st;
}

ffn_status ffn_inspect_value_vector(ffn_model *m, int64_t l, int64_t expert, int64_t i,
                                    float *out) {
    if (!m || !out)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_inspect_value_vector: NULL argument");
    ffn_view v;
    ffn_status st = ffn_of(m, l, expert, &v);
    if (st) return st;
    if (i < 0 || i >= v.F)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_inspect_value_vector: neuron %lld is outside "
                         "[0, %lld)", (long long)i, (long long)v.F);
    for (int64_t d = 0; d < v.D; d++) out[d] = v.p.down_w[d * v.F + i];
    return FFN_OK;
}

/* ---- the logit lens -------------------------------------------------------------- */

/* U (V, D): lm_head.weight, or the embedding when tied; g (D) model.norm.weight. */
static ffn_status lens_tensors(ffn_model *m, const float **U, const float **g) {
    const ffn_model_config *c = ffn_model_get_config(m);
    const int64_t V = c->vocab_size, D = c->hidden_size;
    *U = c->tie_word_embeddings ? tensor(m, "model.embed_tokens.weight", V, D)
                                : tensor(m, "lm_head.weight", V, D);
    *g = tensor(m, "model.norm.weight", D, 1);
    if (!*U || !*g)
        return ffn_error(FFN_ERR_INTERNAL, "inspect: the output embedding or model.norm.weight "
                         "is missing from the model's table");
    return FFN_OK;
}

/* lens (V) = U · (g ⊙ v), accumulated in double. */
static void lens_of(float *lens, const float *U, const float *g, const float *v, int64_t V,
                    int64_t D, double *gv) {
    for (int64_t d = 0; d < D; d++) gv[d] = (double)g[d] * (double)v[d];
    for (int64_t t = 0; t < V; t++) {
        const float *u = U + t * D;
        double acc = 0.0;
        for (int64_t d = 0; d < D; d++) acc += (double)u[d] * gv[d];
        lens[t] = (float)acc;
    }
}

/* The p largest entries of a (n) into ids/vals, largest first; equal values
 * go to the lower index; NaN never ranks. */
static void top_p(const float *a, int64_t n, int64_t p, int32_t *ids, float *vals) {
    int64_t k = 0;
    for (int64_t t = 0; t < n; t++) {
        float x = a[t];
        if (isnan(x)) continue;
        if (k == p && !(x > vals[k - 1])) continue;
        int64_t j = k < p ? k++ : p - 1;
        while (j > 0 && x > vals[j - 1]) {
            vals[j] = vals[j - 1];
            ids[j] = ids[j - 1];
            j--;
        }
        vals[j] = x;
        ids[j] = (int32_t)t;
    }
    for (; k < p; k++) {
        ids[k] = -1;
        vals[k] = 0.0f;
    }
}

ffn_status ffn_inspect_value_logits(ffn_model *m, int64_t l, int64_t expert, int64_t i,
                                    float *lens) {
    if (!m || !lens) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_inspect_value_logits: NULL argument");
    const ffn_model_config *c = ffn_model_get_config(m);
    const int64_t D = c->hidden_size;
    const float *U, *g;
    ffn_status st;
    float *v = malloc((size_t)D * sizeof *v);
    double *gv = malloc((size_t)D * sizeof *gv);
    if (!v || !gv) {
        st = ffn_error(FFN_ERR_NOMEM, "ffn_inspect_value_logits: out of memory");
    } else if (!(st = ffn_inspect_value_vector(m, l, expert, i, v)) &&
               !(st = lens_tensors(m, &U, &g))) {
        lens_of(lens, U, g, v, c->vocab_size, D, gv);
    }
    free(v);
    free(gv);
    return st;
}

ffn_status ffn_inspect_value_top(ffn_model *m, int64_t l, int64_t expert, int64_t i, int64_t p,
                                 int32_t *ids, float *lens_out) {
    if (!m || !ids || p < 1)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_inspect_value_top: model and ids must not be "
                         "NULL and p >= 1 (p = %lld)", (long long)p);
    const int64_t V = ffn_model_get_config(m)->vocab_size;
    float *lens = malloc((size_t)V * sizeof *lens), *vals = malloc((size_t)p * sizeof *vals);
    ffn_status st;
    if (!lens || !vals) st = ffn_error(FFN_ERR_NOMEM, "ffn_inspect_value_top: out of memory");
    else if (!(st = ffn_inspect_value_logits(m, l, expert, i, lens))) {
        top_p(lens, V, p, ids, vals);
        if (lens_out) memcpy(lens_out, vals, (size_t)p * sizeof *vals);
    }
    free(lens);
    free(vals);
    return st;
}

/* ---- capture: the forward pass ------------------------------------------------------ */

/* The per-layer FFN executors, built on the model's weights. */
typedef struct runner {
    int64_t L, D, V, T, K;
    ffn_layer **layer; /* (L) or NULL */
    ffn_moe **moe;     /* (L) or NULL */
    ffn_layer_params *experts; /* (L, E) */
    void *ws;
    size_t ws_bytes;
} runner;

static void runner_free(runner *r) {
    if (r->layer)
        for (int64_t l = 0; l < r->L; l++) ffn_layer_free(r->layer[l]);
    if (r->moe)
        for (int64_t l = 0; l < r->L; l++) ffn_moe_free(r->moe[l]);
    free(r->layer);
    free(r->moe);
    free(r->experts);
    ffn_free_aligned(r->ws);
}

static ffn_status runner_create(ffn_ctx *ctx, ffn_model *m, int64_t T, runner *r) {
    const ffn_model_config *c = ffn_model_get_config(m);
    memset(r, 0, sizeof *r);
    r->L = c->num_hidden_layers;
    r->D = c->hidden_size;
    r->V = c->vocab_size;
    r->T = T;
    r->K = c->num_experts > 0 ? c->num_experts_per_tok : 1;
    const int64_t E = c->num_experts;
    r->layer = calloc((size_t)r->L, sizeof *r->layer);
    r->moe = calloc((size_t)r->L, sizeof *r->moe);
    r->experts = calloc((size_t)(r->L * (E > 0 ? E : 1)), sizeof *r->experts);
    if (!r->layer || !r->moe || !r->experts)
        return ffn_error(FFN_ERR_NOMEM, "inspect: out of memory");
    const ffn_mlp_type type = c->mlp_type == FFN_MODEL_MLP_GATED ? FFN_MLP_GATED : FFN_MLP_DENSE;
    ffn_status st;
    for (int64_t l = 0; l < r->L; l++) {
        size_t ws = 0;
        if (ffn_model_config_layer_is_moe(c, l)) {
            ffn_moe_config mc;
            memset(&mc, 0, sizeof mc);
            mc.hidden_size = r->D;
            mc.num_experts = E;
            mc.num_experts_per_tok = c->num_experts_per_tok;
            mc.moe_intermediate_size = expert_width(c);
            mc.act = c->hidden_act;
            mc.expert_type = type;
            mc.bias = c->mlp_bias;
            mc.norm_topk_prob = c->norm_topk_prob;
            mc.scoring = FFN_MOE_SCORING_SOFTMAX;
            mc.routed_scaling_factor = 1.0;
            mc.shared_expert_intermediate_size = c->shared_expert_intermediate_size;
            if ((st = ffn_moe_create(ctx, &mc, &r->moe[l]))) return st;
            ffn_moe_params mp;
            memset(&mp, 0, sizeof mp);
            mp.router_w = tensorf(m, E, r->D, "model.layers.%lld.mlp.gate.weight", (long long)l);
            mp.experts = r->experts + l * E;
            for (int64_t e = 0; e < E; e++) {
                ffn_view v;
                if ((st = ffn_of(m, l, e, &v))) return st;
                mp.experts[e] = v.p;
            }
            if (c->shared_expert_intermediate_size > 0) {
                ffn_view v;
                if ((st = ffn_of(m, l, FFN_INSPECT_SHARED_EXPERT, &v))) return st;
                mp.shared = v.p;
                mp.shared_gate_w = tensorf(m, 1, r->D,
                                           "model.layers.%lld.mlp.shared_expert_gate.weight",
                                           (long long)l);
            }
            if (!mp.router_w)
                return ffn_error(FFN_ERR_INTERNAL, "inspect: layer %lld: the router is missing",
                                 (long long)l);
            if ((st = ffn_moe_set_weights(r->moe[l], &mp))) return st;
            ws = ffn_moe_workspace_size(r->moe[l], T);
        } else if (c->mlp_type != FFN_MODEL_MLP_NONE) {
            ffn_view v;
            if ((st = ffn_of(m, l, -1, &v))) return st;
            ffn_layer_config lc = {.hidden_size = r->D, .intermediate_size = v.F,
                                   .act = c->hidden_act, .type = type, .bias = c->mlp_bias,
                                   .save = FFN_SAVE_NONE};
            if ((st = ffn_layer_create(ctx, &lc, &r->layer[l])) ||
                (st = ffn_layer_set_weights(r->layer[l], &v.p)))
                return st;
            ws = ffn_layer_workspace_size(r->layer[l], T);
        }
        if (ws > r->ws_bytes) r->ws_bytes = ws;
    }
    if (r->ws_bytes && !(r->ws = ffn_malloc_aligned(r->ws_bytes)))
        return ffn_error(FFN_ERR_NOMEM, "inspect: out of memory (workspace %zu bytes)",
                         r->ws_bytes);
    return FFN_OK;
}

static ffn_status check_sequence(const ffn_model *m, const int32_t *tokens, int64_t T,
                                 const char *fn) {
    const ffn_model_config *c = ffn_model_get_config(m);
    if (!tokens || T < 1 || T > c->max_position_embeddings)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: expected 1 <= T <= max_position_embeddings "
                         "(%lld) tokens, got %lld", fn, (long long)c->max_position_embeddings,
                         (long long)T);
    for (int64_t t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= c->vocab_size)
            return ffn_error(FFN_ERR_INVALID_ARG, "%s: tokens[%lld] = %d is outside the "
                             "vocabulary [0, %lld)", fn, (long long)t, tokens[t],
                             (long long)c->vocab_size);
    return FFN_OK;
}

/* y = x · w / sqrt(mean(x²) + eps), per row of D. */
static void rmsnorm(float *y, const float *x, const float *w, int64_t n, int64_t D, float eps) {
    for (int64_t r = 0; r < n; r++) {
        const float *xr = x + r * D;
        double ss = 0.0;
        for (int64_t d = 0; d < D; d++) ss += (double)xr[d] * xr[d];
        float rstd = 1.0f / sqrtf((float)(ss / (double)D) + eps);
        for (int64_t d = 0; d < D; d++) y[r * D + d] = xr[d] * rstd * w[d];
    }
}

/* Rotate n_heads heads of Dh features of rows x (T, ld), row t at position
 * t: pair (a, b) -> (a c − b s, b c + a s), angle t·theta^(-2j/Dh); pairs
 * (j, j + Dh/2) (half) or (2j, 2j + 1) (interleaved). */
static void rope(float *x, int64_t ld, int64_t T, int64_t n_heads, int64_t Dh, int interleaved,
                 double theta) {
    const int64_t half = Dh / 2;
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < half; j++) {
            double ang = (double)t * pow(theta, -2.0 * (double)j / (double)Dh);
            float c = (float)cos(ang), s = (float)sin(ang);
            for (int64_t h = 0; h < n_heads; h++) {
                float *p = x + t * ld + h * Dh;
                int64_t ia = interleaved ? 2 * j : j, ib = interleaved ? 2 * j + 1 : j + half;
                float a = p[ia], b = p[ib];
                p[ia] = a * c - b * s;
                p[ib] = b * c + a * s;
            }
        }
}

/* Causal attention, one sequence: query head h reads kv head h / (H/G);
 * out (T, H·Dh).  p (T) is scratch. */
static void attention(float *out, const float *q, const float *k, const float *v, int64_t T,
                      int64_t H, int64_t G, int64_t Dh, double *p) {
    const int64_t HD = H * Dh, GD = G * Dh, R = H / G;
    const double scale = 1.0 / sqrt((double)Dh);
    for (int64_t h = 0; h < H; h++) {
        const int64_t g = h / R;
        for (int64_t t = 0; t < T; t++) {
            const float *qt = q + t * HD + h * Dh;
            double mx = -INFINITY, sum = 0.0;
            for (int64_t s = 0; s <= t; s++) {
                const float *ks = k + s * GD + g * Dh;
                double acc = 0.0;
                for (int64_t d = 0; d < Dh; d++) acc += (double)qt[d] * ks[d];
                p[s] = acc * scale;
                if (p[s] > mx) mx = p[s];
            }
            for (int64_t s = 0; s <= t; s++) sum += (p[s] = exp(p[s] - mx));
            float *o = out + t * HD + h * Dh;
            for (int64_t d = 0; d < Dh; d++) {
                double acc = 0.0;
                for (int64_t s = 0; s <= t; s++) acc += p[s] * v[s * GD + g * Dh + d];
                o[d] = (float)(acc / sum);
            }
        }
    }
}

/* The forward with a runner already built (T <= r->T). */
static ffn_status capture(ffn_ctx *ctx, ffn_model *m, runner *r, const int32_t *tokens,
                          int64_t T, float *ffn_in, float *ffn_out, float *logits,
                          int32_t *topk_ids, float *topk_weights) {
    const ffn_model_config *c = ffn_model_get_config(m);
    const int64_t D = c->hidden_size, V = c->vocab_size, H = c->num_attention_heads,
                  G = c->num_key_value_heads, Dh = D / H, HD = H * Dh, GD = G * Dh,
                  L = c->num_hidden_layers, K = r->K;
    const float eps = (float)c->rms_norm_eps;
    /* h, xn, mid, y, tmp (T, D); q, att (T, HD); k, v (T, GD) */
    size_t nf = (size_t)(T * (5 * D + 2 * HD + 2 * GD));
    float *buf = malloc(nf * sizeof(float));
    double *p = malloc((size_t)T * sizeof(double));
    int32_t *ids = malloc((size_t)(T * K) * sizeof(int32_t));
    float *wts = malloc((size_t)(T * K) * sizeof(float));
    if (!buf || !p || !ids || !wts) {
        free(buf), free(p), free(ids), free(wts);
        return ffn_error(FFN_ERR_NOMEM, "inspect: out of memory (forward buffers)");
    }
    float *h = buf, *xn = h + T * D, *mid = xn + T * D, *y = mid + T * D, *tmp = y + T * D;
    float *q = tmp + T * D, *att = q + T * HD, *k = att + T * HD, *v = k + T * GD;
    ffn_status st = FFN_OK;
    const float *embed = tensor(m, "model.embed_tokens.weight", V, D);
    const float *U, *gfin;
    if (!embed || (st = lens_tensors(m, &U, &gfin))) {
        if (!st) st = ffn_error(FFN_ERR_INTERNAL, "inspect: the embedding is missing");
        goto done;
    }
    ffn_ctx_enter(ctx);
    for (int64_t t = 0; t < T; t++) memcpy(h + t * D, embed + (int64_t)tokens[t] * D, D * sizeof *h);
    for (int64_t l = 0; l < L; l++) {
        const float *w_in = tensorf(m, D, 1, "model.layers.%lld.input_layernorm.weight", (long long)l);
        const float *wq = tensorf(m, HD, D, "model.layers.%lld.self_attn.q_proj.weight", (long long)l);
        const float *wk = tensorf(m, GD, D, "model.layers.%lld.self_attn.k_proj.weight", (long long)l);
        const float *wv = tensorf(m, GD, D, "model.layers.%lld.self_attn.v_proj.weight", (long long)l);
        const float *wo = tensorf(m, D, HD, "model.layers.%lld.self_attn.o_proj.weight", (long long)l);
        if (!w_in || !wq || !wk || !wv || !wo) {
            st = ffn_error(FFN_ERR_INTERNAL, "inspect: layer %lld: attention tensors missing",
                           (long long)l);
            goto done;
        }
        rmsnorm(xn, h, w_in, T, D, eps);
        if ((st = ffn_gemm(ctx, 0, 1, T, HD, D, 1.0f, xn, D, wq, D, 0.0f, q, HD)) ||
            (st = ffn_gemm(ctx, 0, 1, T, GD, D, 1.0f, xn, D, wk, D, 0.0f, k, GD)) ||
            (st = ffn_gemm(ctx, 0, 1, T, GD, D, 1.0f, xn, D, wv, D, 0.0f, v, GD)))
            goto done;
        if (c->attention_bias) {
            const float *bq = tensorf(m, HD, 1, "model.layers.%lld.self_attn.q_proj.bias", (long long)l);
            const float *bk = tensorf(m, GD, 1, "model.layers.%lld.self_attn.k_proj.bias", (long long)l);
            const float *bv = tensorf(m, GD, 1, "model.layers.%lld.self_attn.v_proj.bias", (long long)l);
            if (!bq || !bk || !bv) {
                st = ffn_error(FFN_ERR_INTERNAL, "inspect: layer %lld: q/k/v biases missing",
                               (long long)l);
                goto done;
            }
            for (int64_t t = 0; t < T; t++) {
                ffn_add_bias(q + t * HD, bq, HD);
                ffn_add_bias(k + t * GD, bk, GD);
                ffn_add_bias(v + t * GD, bv, GD);
            }
        }
        const int interleaved = c->rope_style == FFN_ROPE_INTERLEAVED;
        rope(q, HD, T, H, Dh, interleaved, c->rope_theta);
        rope(k, GD, T, G, Dh, interleaved, c->rope_theta);
        attention(att, q, k, v, T, H, G, Dh, p);
        if ((st = ffn_gemm(ctx, 0, 1, T, D, HD, 1.0f, att, HD, wo, HD, 0.0f, tmp, D))) goto done;
        for (int64_t i = 0; i < T * D; i++) mid[i] = h[i] + tmp[i];
        for (int64_t i = 0; i < T * K; i++) {
            ids[i] = -1;
            wts[i] = 0.0f;
        }
        if (r->layer[l] || r->moe[l]) {
            const float *w_post = tensorf(m, D, 1,
                                          "model.layers.%lld.post_attention_layernorm.weight",
                                          (long long)l);
            if (!w_post) {
                st = ffn_error(FFN_ERR_INTERNAL, "inspect: layer %lld: post_attention_layernorm "
                               "missing", (long long)l);
                goto done;
            }
            rmsnorm(xn, mid, w_post, T, D, eps);
            if (r->layer[l]) {
                st = ffn_layer_forward(r->layer[l], y, xn, T, NULL, r->ws, r->ws_bytes);
            } else {
                ffn_moe_outputs mo;
                memset(&mo, 0, sizeof mo);
                mo.y = y;
                mo.topk_ids = ids;
                mo.topk_weights = wts;
                st = ffn_moe_forward(r->moe[l], &mo, xn, T, NULL, r->ws, r->ws_bytes);
            }
            if (st) {
                ffn_error_prefix(st, "model.layers.%lld.mlp", (long long)l);
                goto done;
            }
            for (int64_t i = 0; i < T * D; i++) h[i] = mid[i] + y[i];
        } else {
            memset(xn, 0, (size_t)(T * D) * sizeof *xn);
            memset(y, 0, (size_t)(T * D) * sizeof *y);
            memcpy(h, mid, (size_t)(T * D) * sizeof *h);
        }
        if (ffn_in) memcpy(ffn_in + l * T * D, xn, (size_t)(T * D) * sizeof *xn);
        if (ffn_out) memcpy(ffn_out + l * T * D, y, (size_t)(T * D) * sizeof *y);
        if (topk_ids) memcpy(topk_ids + l * T * K, ids, (size_t)(T * K) * sizeof *ids);
        if (topk_weights) memcpy(topk_weights + l * T * K, wts, (size_t)(T * K) * sizeof *wts);
    }
    if (logits) {
        rmsnorm(xn, h, gfin, T, D, eps);
        st = ffn_gemm(ctx, 0, 1, T, V, D, 1.0f, xn, D, U, D, 0.0f, logits, V);
    }
done:
    free(buf);
    free(p);
    free(ids);
    free(wts);
    return st;
}

ffn_status ffn_inspect_capture(ffn_ctx *ctx, ffn_model *m, const int32_t *tokens, int64_t T,
                               float *ffn_in, float *ffn_out, float *logits, int32_t *topk_ids,
                               float *topk_weights) {
    if (!m) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_inspect_capture: model is NULL");
    ffn_status st = check_sequence(m, tokens, T, "ffn_inspect_capture");
    if (st) return st;
    runner r;
    if (!(st = runner_create(ctx, m, T, &r)))
        st = capture(ctx, m, &r, tokens, T, ffn_in, ffn_out, logits, topk_ids, topk_weights);
    runner_free(&r);
    return st;
}

/* ---- per-token neurons ---------------------------------------------------------------- */

void ffn_inspect_options_default(ffn_inspect_options *o) {
    if (!o) return;
    o->layer = -1;
    o->top_k = 10;
    o->n_promoted = 5;
}

typedef struct run_storage {
    int64_t *layers;
    int *is_moe;
    int32_t *token_ids;
    ffn_inspect_token *tokens;      /* (NL, T) */
    ffn_inspect_neuron *neurons;    /* (NL, T, top_k) */
    int32_t *experts;               /* (NL, T, K) */
    float *expert_w;                /* (NL, T, K) */
    int32_t *promoted;              /* (NL, T, top_k, P) */
    float *promoted_logit;          /* (NL, T, top_k, P) */
} run_storage;

void ffn_inspect_result_free(ffn_inspect_result *r) {
    if (!r) return;
    run_storage *s = r->storage_;
    if (s) {
        free(s->layers);
        free(s->is_moe);
        free(s->token_ids);
        free(s->tokens);
        free(s->neurons);
        free(s->experts);
        free(s->expert_w);
        free(s->promoted);
        free(s->promoted_logit);
        free(s);
    }
    free(r);
}

const ffn_inspect_token *ffn_inspect_token_at(const ffn_inspect_result *r, int64_t li, int64_t t) {
    if (!r || li < 0 || li >= r->n_layers || t < 0 || t >= r->n_tokens) return NULL;
    return &r->tokens[li * r->n_tokens + t];
}

/* One candidate neuron of a token. */
typedef struct cand {
    int64_t expert, index;
    float gate_pre, gate, up, product, weight, contribution;
} cand;

/* Keep the k candidates of largest |contribution| in best (k), descending;
 * equal magnitudes keep the earlier candidate first. */
static void keep_top(cand *best, int64_t *n_best, int64_t k, const cand *c) {
    float a = fabsf(c->contribution);
    if (isnan(a)) return;
    if (*n_best == k && !(a > fabsf(best[k - 1].contribution))) return;
    int64_t j = *n_best < k ? (*n_best)++ : k - 1;
    while (j > 0 && a > fabsf(best[j - 1].contribution)) {
        best[j] = best[j - 1];
        j--;
    }
    best[j] = *c;
}

/* The logit-lens cache of one layer: slot per (expert + 2, index). */
typedef struct lens_cache {
    int64_t width;      /* widest FFN of the layer */
    int64_t *slot;      /* ((E + 2), width): row into ids/vals, -1 when not computed */
    int32_t *ids;       /* (n, P) */
    float *vals;        /* (n, P) */
    int64_t n, cap, P;
    float *lens;        /* (V) */
    double *gv;         /* (D) */
    float *v;           /* (D) */
} lens_cache;

static void lens_cache_free(lens_cache *lc) {
    free(lc->slot);
    free(lc->ids);
    free(lc->vals);
    free(lc->lens);
    free(lc->gv);
    free(lc->v);
}

static ffn_status lens_lookup(ffn_model *m, int64_t l, lens_cache *lc, int64_t expert,
                              int64_t index, const int32_t **ids, const float **vals) {
    int64_t key = (expert + 2) * lc->width + index;
    if (lc->slot[key] < 0) {
        if (lc->n == lc->cap) {
            int64_t cap = lc->cap ? 2 * lc->cap : 64;
            int32_t *ni = realloc(lc->ids, (size_t)(cap * lc->P) * sizeof *ni);
            if (ni) lc->ids = ni;
            float *nv = realloc(lc->vals, (size_t)(cap * lc->P) * sizeof *nv);
            if (nv) lc->vals = nv;
            if (!ni || !nv) return ffn_error(FFN_ERR_NOMEM, "inspect: out of memory (lens cache)");
            lc->cap = cap;
        }
        const ffn_model_config *c = ffn_model_get_config(m);
        const float *U, *g;
        ffn_status st;
        if ((st = ffn_inspect_value_vector(m, l, expert, index, lc->v)) ||
            (st = lens_tensors(m, &U, &g)))
            return st;
        lens_of(lc->lens, U, g, lc->v, c->vocab_size, c->hidden_size, lc->gv);
        top_p(lc->lens, c->vocab_size, lc->P, lc->ids + lc->n * lc->P, lc->vals + lc->n * lc->P);
        lc->slot[key] = lc->n++;
    }
    *ids = lc->ids + lc->slot[key] * lc->P;
    *vals = lc->vals + lc->slot[key] * lc->P;
    return FFN_OK;
}

static double norm2(const double *a, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += a[i] * a[i];
    return sqrt(s);
}

/* Inspect one layer for every token. */
static ffn_status inspect_layer(ffn_ctx *ctx, ffn_model *m, int64_t l, int64_t li,
                                const float *X, const float *Y, const int32_t *ids,
                                const float *wts, int64_t T, int64_t K, int64_t top_k,
                                ffn_inspect_result *r, run_storage *s) {
    const ffn_model_config *c = ffn_model_get_config(m);
    const int64_t D = c->hidden_size, P = r->n_promoted;
    const int moe = ffn_model_config_layer_is_moe(c, l);
    const int64_t E = moe ? c->num_experts : 0;
    const int64_t Fs = moe ? c->shared_expert_intermediate_size : 0;
    const int64_t Fr = moe ? expert_width(c) : c->intermediate_size;
    const int64_t width = Fr > Fs ? Fr : Fs;
    ffn_status st = FFN_OK;
    lens_cache lc;
    memset(&lc, 0, sizeof lc);
    lc.width = width;
    lc.P = P;
    lc.slot = malloc((size_t)((E + 2) * width) * sizeof *lc.slot);
    lc.lens = malloc((size_t)c->vocab_size * sizeof *lc.lens);
    lc.gv = malloc((size_t)D * sizeof *lc.gv);
    lc.v = malloc((size_t)D * sizeof *lc.v);
    cand *best = malloc((size_t)top_k * sizeof *best);
    /* neuron arrays: all T rows (dense/gated) or one row at a time (MoE) */
    const int64_t rows = moe ? 1 : T;
    float *nb = malloc((size_t)(4 * rows * width) * sizeof *nb);
    double *outv = malloc((size_t)(2 * D) * sizeof *outv), *part = outv + D;
    if (!lc.slot || !lc.lens || !lc.gv || !lc.v || !best || !nb || !outv) {
        st = ffn_error(FFN_ERR_NOMEM, "inspect: out of memory");
        goto done;
    }
    for (int64_t i = 0; i < (E + 2) * width; i++) lc.slot[i] = -1;
    float *gp = nb, *ga = nb + rows * width, *up = ga + rows * width, *mm = up + rows * width;
    ffn_view own;
    if (!moe) {
        if ((st = ffn_of(m, l, -1, &own))) goto done;
        if ((st = neurons(ctx, &own, X, T, gp, ga, up, mm))) goto done;
    }
    for (int64_t t = 0; t < T; t++) {
        const float *x = X + t * D;
        int64_t n_best = 0;
        for (int64_t d = 0; d < D; d++) outv[d] = Y[t * D + d];
        if (!moe) {
            for (int64_t i = 0; i < Fr; i++) {
                int64_t o = t * Fr + i;
                cand cd = {-1, i, gp[o], ga[o], up[o], mm[o], 1.0f, mm[o]};
                keep_top(best, &n_best, top_k, &cd);
            }
            if (own.p.down_b)
                for (int64_t d = 0; d < D; d++) outv[d] -= own.p.down_b[d];
        } else {
            /* the routed experts, then the shared expert */
            for (int64_t j = 0; j <= K; j++) {
                int64_t e;
                float w;
                if (j < K) {
                    e = ids[t * K + j];
                    w = wts[t * K + j];
                    if (e < 0) continue;
                } else {
                    if (Fs <= 0) break;
                    e = FFN_INSPECT_SHARED_EXPERT;
                    const float *wsg = tensorf(m, 1, D,
                                               "model.layers.%lld.mlp.shared_expert_gate.weight",
                                               (long long)l);
                    if (!wsg) {
                        st = ffn_error(FFN_ERR_INTERNAL, "inspect: layer %lld: shared expert "
                                       "gate missing", (long long)l);
                        goto done;
                    }
                    double z = 0.0;
                    for (int64_t d = 0; d < D; d++) z += (double)wsg[d] * x[d];
                    w = (float)(1.0 / (1.0 + exp(-z)));
                }
                ffn_view ev;
                if ((st = ffn_of(m, l, e, &ev)) || (st = neurons(ctx, &ev, x, 1, gp, ga, up, mm)))
                    goto done;
                for (int64_t i = 0; i < ev.F; i++) {
                    cand cd = {e, i, gp[i], ga[i], up[i], mm[i], w, w * mm[i]};
                    keep_top(best, &n_best, top_k, &cd);
                }
                if (ev.p.down_b)
                    for (int64_t d = 0; d < D; d++) outv[d] -= (double)w * ev.p.down_b[d];
            }
        }
        /* the partial sum of the kept neurons and the explained fraction */
        for (int64_t d = 0; d < D; d++) part[d] = 0.0;
        ffn_inspect_neuron *nu = s->neurons + (li * T + t) * top_k;
        for (int64_t j = 0; j < n_best; j++) {
            ffn_view ev;
            if ((st = ffn_of(m, l, best[j].expert, &ev))) goto done;
            double vn = 0.0;
            for (int64_t d = 0; d < D; d++) {
                double vd = ev.p.down_w[d * ev.F + best[j].index];
                part[d] += (double)best[j].contribution * vd;
                vn += vd * vd;
            }
            const int32_t *pid = NULL;
            const float *pval = NULL;
            if ((st = lens_lookup(m, l, &lc, best[j].expert, best[j].index, &pid, &pval)))
                goto done;
            int64_t off = ((li * T + t) * top_k + j) * P;
            memcpy(s->promoted + off, pid, (size_t)P * sizeof *pid);
            memcpy(s->promoted_logit + off, pval, (size_t)P * sizeof *pval);
            nu[j] = (ffn_inspect_neuron){.expert = best[j].expert, .index = best[j].index,
                                         .gate_pre = best[j].gate_pre, .gate = best[j].gate,
                                         .up = best[j].up, .product = best[j].product,
                                         .weight = best[j].weight,
                                         .contribution = best[j].contribution,
                                         .value_norm = (float)sqrt(vn),
                                         .promoted = s->promoted + off,
                                         .promoted_logit = s->promoted_logit + off};
        }
        double on = norm2(outv, D), pn = norm2(part, D), dot = 0.0, res = 0.0;
        for (int64_t d = 0; d < D; d++) {
            dot += outv[d] * part[d];
            res += (outv[d] - part[d]) * (outv[d] - part[d]);
        }
        ffn_inspect_token *tk = s->tokens + li * T + t;
        tk->layer = l;
        tk->position = t;
        tk->token = r->token_ids[t];
        tk->n_top = n_best;
        tk->top = nu;
        tk->out_norm = (float)on;
        tk->partial_norm = (float)pn;
        tk->explained = on > 0.0 ? (float)(pn / on) : 0.0f;
        tk->cosine = on > 0.0 && pn > 0.0 ? (float)(dot / (on * pn)) : 0.0f;
        tk->residual = on > 0.0 ? (float)(sqrt(res) / on) : 0.0f;
        tk->n_experts = moe ? K : 0;
        int32_t *ex = s->experts + (li * T + t) * K;
        float *ew = s->expert_w + (li * T + t) * K;
        for (int64_t j = 0; j < K; j++) {
            ex[j] = moe ? ids[t * K + j] : -1;
            ew[j] = moe ? wts[t * K + j] : 0.0f;
        }
        tk->experts = ex;
        tk->expert_weights = ew;
    }
done:
    lens_cache_free(&lc);
    free(best);
    free(nb);
    free(outv);
    return st;
}

ffn_status ffn_inspect_run(ffn_ctx *ctx, ffn_model *m, const int32_t *tokens, int64_t T,
                           const ffn_inspect_options *opts, ffn_inspect_result **out) {
    static const char *fn = "ffn_inspect_run";
    if (!out) return ffn_error(FFN_ERR_INVALID_ARG, "%s: out is NULL", fn);
    *out = NULL;
    if (!m) return ffn_error(FFN_ERR_INVALID_ARG, "%s: model is NULL", fn);
    ffn_inspect_options o;
    ffn_inspect_options_default(&o);
    if (opts) o = *opts;
    const ffn_model_config *c = ffn_model_get_config(m);
    const int64_t L = c->num_hidden_layers, D = c->hidden_size;
    if (o.layer < -1 || o.layer >= L)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: layer %lld is outside [0, %lld) (or -1 for "
                         "all)", fn, (long long)o.layer, (long long)L);
    if (o.top_k < 1 || o.top_k > 1000000 || o.n_promoted < 1 || o.n_promoted > c->vocab_size)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: top_k %lld must be in [1, 1e6] and n_promoted "
                         "%lld in [1, V = %lld]", fn, (long long)o.top_k,
                         (long long)o.n_promoted, (long long)c->vocab_size);
    ffn_status st = check_sequence(m, tokens, T, fn);
    if (st) return st;
    if (o.layer >= 0 && !layer_has_ffn(c, o.layer))
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: layer %lld has no FFN", fn, (long long)o.layer);
    int64_t NL = 0;
    for (int64_t l = 0; l < L; l++) NL += (o.layer < 0 || o.layer == l) && layer_has_ffn(c, l);
    if (NL == 0) return ffn_error(FFN_ERR_INVALID_ARG, "%s: the model has no FFN layer", fn);
    runner rn;
    if ((st = runner_create(ctx, m, T, &rn))) {
        runner_free(&rn);
        return st;
    }
    /* no token has more candidates than its layer's widest FFN set */
    int64_t most = 0;
    for (int64_t l = 0; l < L; l++) {
        if (!((o.layer < 0 || o.layer == l) && layer_has_ffn(c, l))) continue;
        int64_t w = ffn_model_config_layer_is_moe(c, l)
                        ? rn.K * expert_width(c) + c->shared_expert_intermediate_size
                        : c->intermediate_size;
        if (w > most) most = w;
    }
    const int64_t K = rn.K, top_k = o.top_k < most ? o.top_k : most, P = o.n_promoted;
    ffn_inspect_result *r = calloc(1, sizeof *r);
    run_storage *s = calloc(1, sizeof *s);
    float *X = malloc((size_t)(L * T * D) * sizeof *X), *Y = malloc((size_t)(L * T * D) * sizeof *Y);
    int32_t *ids = malloc((size_t)(L * T * K) * sizeof *ids);
    float *wts = malloc((size_t)(L * T * K) * sizeof *wts);
    if (r) r->storage_ = s;
    if (!r || !s || !X || !Y || !ids || !wts ||
        !(s->layers = malloc((size_t)NL * sizeof *s->layers)) ||
        !(s->is_moe = malloc((size_t)NL * sizeof *s->is_moe)) ||
        !(s->token_ids = malloc((size_t)T * sizeof *s->token_ids)) ||
        !(s->tokens = calloc((size_t)(NL * T), sizeof *s->tokens)) ||
        !(s->neurons = calloc((size_t)(NL * T * top_k), sizeof *s->neurons)) ||
        !(s->experts = malloc((size_t)(NL * T * K) * sizeof *s->experts)) ||
        !(s->expert_w = malloc((size_t)(NL * T * K) * sizeof *s->expert_w)) ||
        !(s->promoted = malloc((size_t)(NL * T * top_k * P) * sizeof *s->promoted)) ||
        !(s->promoted_logit = malloc((size_t)(NL * T * top_k * P) * sizeof *s->promoted_logit))) {
        st = ffn_error(FFN_ERR_NOMEM, "%s: out of memory", fn);
        if (!r) free(s);
        goto fail;
    }
    memcpy(s->token_ids, tokens, (size_t)T * sizeof *tokens);
    r->n_tokens = T;
    r->n_layers = NL;
    r->layers = s->layers;
    r->token_ids = s->token_ids;
    r->top_k = top_k;
    r->n_promoted = P;
    r->vocab_size = c->vocab_size;
    r->layer_is_moe = s->is_moe;
    r->tokens = s->tokens;
    if ((st = capture(ctx, m, &rn, tokens, T, X, Y, NULL, ids, wts))) goto fail;
    int64_t li = 0;
    for (int64_t l = 0; l < L; l++) {
        if (!((o.layer < 0 || o.layer == l) && layer_has_ffn(c, l))) continue;
        s->layers[li] = l;
        s->is_moe[li] = ffn_model_config_layer_is_moe(c, l);
        if ((st = inspect_layer(ctx, m, l, li, X + l * T * D, Y + l * T * D, ids + l * T * K,
                                wts + l * T * K, T, K, top_k, r, s)))
            goto fail;
        li++;
    }
    *out = r;
    r = NULL;
fail:
    ffn_inspect_result_free(r);
    runner_free(&rn);
    free(X);
    free(Y);
    free(ids);
    free(wts);
    return st;
}

/* ---- key-value memories: trigger examples ---------------------------------------------- */

void ffn_keys_options_default(ffn_keys_options *o) {
    if (!o) return;
    o->top_examples = 25;
    o->n_promoted = 5;
    o->max_neurons = 0;
    o->window = 0;
}

void ffn_keys_result_free(ffn_keys_result *r) {
    if (!r) return;
    for (int64_t i = 0; r->layers && i < r->n_layers; i++) {
        free(r->layers[i].examples);
        free(r->layers[i].promoted);
        free(r->layers[i].promoted_logit);
        free(r->layers[i].next_token);
    }
    free(r->layers);
    free(r);
}

/* a ranks below b: smaller activation, or equal and later. */
static int worse(const ffn_key_example *a, const ffn_key_example *b) {
    return a->activation < b->activation ||
           (a->activation == b->activation && a->position > b->position);
}

/* A min-heap of the t best examples of one neuron: h[0] is the worst kept. */
static void heap_push(ffn_key_example *h, int64_t *n, int64_t t, ffn_key_example e) {
    if (isnan(e.activation)) return;
    int64_t i;
    if (*n < t) {
        i = (*n)++;
        while (i > 0 && worse(&e, &h[(i - 1) / 2])) {
            h[i] = h[(i - 1) / 2];
            i = (i - 1) / 2;
        }
        h[i] = e;
        return;
    }
    if (!worse(&h[0], &e)) return; /* not better than the worst kept */
    i = 0;
    for (;;) {
        int64_t a = 2 * i + 1, b = a + 1, w = i;
        const ffn_key_example *cur = w == i ? &e : &h[w];
        if (a < t && worse(&h[a], cur)) w = a, cur = &h[a];
        if (b < t && worse(&h[b], cur)) w = b;
        if (w == i) break;
        h[i] = h[w];
        i = w;
    }
    h[i] = e;
}

static int cmp_better(const void *pa, const void *pb) {
    const ffn_key_example *a = pa, *b = pb;
    return worse(b, a) ? -1 : worse(a, b) ? 1 : 0;
}

typedef struct keys_work {
    int64_t l, width, fe;
    int moe;
    ffn_key_example *heap; /* (width, t) */
    int64_t *count;        /* (width) */
} keys_work;

/* Push the activations of one window (rows s0.., Tw of them) of layer l.
 * MoE experts are evaluated on every row and read only where routed, so
 * that each activation is computed exactly as ffn_inspect_neurons on the
 * window computes it (a matrix product's rounding may depend on its row
 * count). */
static ffn_status keys_window(ffn_ctx *ctx, ffn_model *m, keys_work *kw, const float *X,
                              const int32_t *ids, const float *wts, int64_t s0, int64_t Tw,
                              int64_t K, int64_t t, float *nb) {
    const int64_t F = kw->fe;
    ffn_status st;
    float *gp = nb, *ga = nb + Tw * F, *up = ga + Tw * F, *mm = up + Tw * F;
    const int64_t n_exp = kw->moe ? kw->width / F : 1;
    for (int64_t e = 0; e < n_exp; e++) {
        ffn_view v;
        if ((st = ffn_of(m, kw->l, kw->moe ? e : -1, &v)) ||
            (st = neurons(ctx, &v, X, Tw, gp, ga, up, mm)))
            return st;
        for (int64_t r = 0; r < Tw; r++) {
            float w = 1.0f;
            if (kw->moe) {
                int routed = 0;
                for (int64_t j = 0; j < K; j++)
                    if (ids[r * K + j] == e) routed = 1, w = wts[r * K + j];
                if (!routed) continue;
            }
            for (int64_t i = 0; i < F; i++) {
                int64_t g = e * F + i;
                ffn_key_example ex = {s0 + r, w * mm[r * F + i]};
                heap_push(kw->heap + g * t, &kw->count[g], t, ex);
            }
        }
    }
    return FFN_OK;
}

/* Sort, look up promoted tokens and count agreement for one layer. */
static ffn_status keys_finish(ffn_model *m, keys_work *kw, const int32_t *tokens, int64_t n,
                              int64_t t, int64_t P, int64_t max_neurons,
                              const int64_t *next_count, ffn_keys_layer *out) {
    const ffn_model_config *c = ffn_model_get_config(m);
    const int64_t V = c->vocab_size, D = c->hidden_size, W = kw->width, F = kw->fe;
    const int64_t t_eff = t < n ? t : n;
    const int64_t nr = max_neurons > 0 && max_neurons < W ? max_neurons : W;
    out->layer = kw->l;
    out->n_neurons = W;
    out->n_reported = nr;
    out->n_examples = t_eff;
    out->fe = F;
    out->examples = malloc((size_t)(nr * t_eff + 1) * sizeof *out->examples);
    out->promoted = malloc((size_t)(nr * P) * sizeof *out->promoted);
    out->promoted_logit = malloc((size_t)(nr * P) * sizeof *out->promoted_logit);
    out->next_token = malloc((size_t)nr * sizeof *out->next_token);
    float *lens = malloc((size_t)V * sizeof *lens), *v = malloc((size_t)D * sizeof *v);
    double *gv = malloc((size_t)D * sizeof *gv);
    int32_t *pid = malloc((size_t)P * sizeof *pid);
    float *pval = malloc((size_t)P * sizeof *pval);
    ffn_status st = FFN_OK;
    const float *U, *g;
    if (!out->examples || !out->promoted || !out->promoted_logit || !out->next_token || !lens ||
        !v || !gv || !pid || !pval) {
        st = ffn_error(FFN_ERR_NOMEM, "ffn_inspect_keys: out of memory");
        goto done;
    }
    if ((st = lens_tensors(m, &U, &g))) goto done;
    out->n_agree = out->n_counted = 0;
    double chance = 0.0;
    for (int64_t i = 0; i < W; i++) {
        ffn_key_example *h = kw->heap + i * t;
        int64_t cnt = kw->count[i];
        qsort(h, (size_t)cnt, sizeof *h, cmp_better);
        int64_t e = kw->moe ? i / F : -1, idx = kw->moe ? i % F : i;
        if ((st = ffn_inspect_value_vector(m, kw->l, e, idx, v))) goto done;
        lens_of(lens, U, g, v, V, D, gv);
        top_p(lens, V, P, pid, pval);
        int32_t next = cnt > 0 && h[0].position + 1 < n ? tokens[h[0].position + 1] : -1;
        if (next >= 0) {
            out->n_counted++;
            out->n_agree += pid[0] == next;
            chance += pid[0] >= 0 ? (double)next_count[pid[0]] / (double)(n - 1) : 0.0;
        }
        if (i < nr) {
            for (int64_t j = 0; j < t_eff; j++)
                out->examples[i * t_eff + j] =
                    j < cnt ? h[j] : (ffn_key_example){.position = -1, .activation = 0.0f};
            memcpy(out->promoted + i * P, pid, (size_t)P * sizeof *pid);
            memcpy(out->promoted_logit + i * P, pval, (size_t)P * sizeof *pval);
            out->next_token[i] = next;
        }
    }
    out->agreement = out->n_counted ? (double)out->n_agree / (double)out->n_counted : 0.0;
    out->chance = out->n_counted ? chance / (double)out->n_counted : 0.0;
done:
    free(lens);
    free(v);
    free(gv);
    free(pid);
    free(pval);
    return st;
}

ffn_status ffn_inspect_keys(ffn_ctx *ctx, ffn_model *m, const int32_t *tokens, int64_t n,
                            int64_t layer, const ffn_keys_options *opts, ffn_keys_result **out) {
    static const char *fn = "ffn_inspect_keys";
    if (!out) return ffn_error(FFN_ERR_INVALID_ARG, "%s: out is NULL", fn);
    *out = NULL;
    if (!m || !tokens || n < 1)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: model and tokens must not be NULL and n >= 1 "
                         "(n = %lld)", fn, (long long)n);
    ffn_keys_options o;
    ffn_keys_options_default(&o);
    if (opts) o = *opts;
    const ffn_model_config *c = ffn_model_get_config(m);
    const int64_t L = c->num_hidden_layers, D = c->hidden_size, V = c->vocab_size;
    if (layer < -1 || layer >= L)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: layer %lld is outside [0, %lld) (or -1 for "
                         "all)", fn, (long long)layer, (long long)L);
    if (layer >= 0 && !layer_has_ffn(c, layer))
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: layer %lld has no FFN", fn, (long long)layer);
    if (o.top_examples < 1 || o.top_examples > 100000 || o.n_promoted < 1 || o.n_promoted > V ||
        o.max_neurons < 0 || o.window < 0)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: top_examples %lld must be in [1, 1e5], "
                         "n_promoted %lld in [1, V = %lld], max_neurons and window >= 0", fn,
                         (long long)o.top_examples, (long long)o.n_promoted, (long long)V);
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            return ffn_error(FFN_ERR_INVALID_ARG, "%s: tokens[%lld] = %d is outside the "
                             "vocabulary [0, %lld)", fn, (long long)i, tokens[i], (long long)V);
    int64_t W = o.window > 0 && o.window < c->max_position_embeddings
                    ? o.window : c->max_position_embeddings;
    if (W > n) W = n;
    const int64_t t = o.top_examples, P = o.n_promoted;
    int64_t NL = 0, maxw = 0, maxf = 0;
    for (int64_t l = 0; l < L; l++)
        if ((layer < 0 || layer == l) && layer_has_ffn(c, l)) NL++;
    if (NL == 0) return ffn_error(FFN_ERR_INVALID_ARG, "%s: the model has no FFN layer", fn);
    ffn_status st;
    runner rn;
    if ((st = runner_create(ctx, m, W, &rn))) {
        runner_free(&rn);
        return st;
    }
    const int64_t K = rn.K;
    int64_t *next_count = NULL;
    ffn_keys_result *r = calloc(1, sizeof *r);
    keys_work *kw = calloc((size_t)NL, sizeof *kw);
    if (r) r->layers = calloc((size_t)NL, sizeof *r->layers);
    if (!r || !kw || !r->layers) {
        st = ffn_error(FFN_ERR_NOMEM, "%s: out of memory", fn);
        goto fail;
    }
    r->n_layers = NL;
    r->n_tokens = n;
    r->window = W;
    r->top_examples = t;
    r->n_promoted = P;
    for (int64_t l = 0, li = 0; l < L; l++) {
        if (!((layer < 0 || layer == l) && layer_has_ffn(c, l))) continue;
        keys_work *k = &kw[li++];
        k->l = l;
        k->moe = ffn_model_config_layer_is_moe(c, l);
        k->width = ffn_inspect_layer_width(m, l);
        k->fe = k->moe ? expert_width(c) : k->width;
        size_t cells;
        if (ffn_mul_size((size_t)k->width, (size_t)t, &cells) || cells > SIZE_MAX / 64) {
            st = ffn_error(FFN_ERR_OVERFLOW, "%s: width·top_examples overflows", fn);
            goto fail;
        }
        k->heap = malloc(cells * sizeof *k->heap);
        k->count = calloc((size_t)k->width, sizeof *k->count);
        if (!k->heap || !k->count) {
            st = ffn_error(FFN_ERR_NOMEM, "%s: out of memory (%zu examples)", fn, cells);
            goto fail;
        }
        if (k->width > maxw) maxw = k->width;
        if (k->fe > maxf) maxf = k->fe;
    }
    {
        float *X = malloc((size_t)(L * W * D) * sizeof *X);
        int32_t *ids = malloc((size_t)(L * W * K) * sizeof *ids);
        float *wts = malloc((size_t)(L * W * K) * sizeof *wts);
        float *nb = malloc((size_t)(4 * W * maxf) * sizeof *nb);
        if (!X || !ids || !wts || !nb)
            st = ffn_error(FFN_ERR_NOMEM, "%s: out of memory", fn);
        for (int64_t s0 = 0; !st && s0 < n; s0 += W) {
            int64_t Tw = n - s0 < W ? n - s0 : W;
            if ((st = capture(ctx, m, &rn, tokens + s0, Tw, X, NULL, NULL, ids, wts))) break;
            for (int64_t li = 0; !st && li < NL; li++) {
                int64_t l = kw[li].l;
                st = keys_window(ctx, m, &kw[li], X + l * Tw * D, ids + l * Tw * K,
                                 wts + l * Tw * K, s0, Tw, K, t, nb);
            }
        }
        free(X), free(ids), free(wts), free(nb);
        if (st) goto fail;
    }
    /* how often each token is a next token, for the chance level */
    next_count = calloc((size_t)V, sizeof *next_count);
    if (!next_count) {
        st = ffn_error(FFN_ERR_NOMEM, "%s: out of memory", fn);
        goto fail;
    }
    for (int64_t i = 1; i < n; i++) next_count[tokens[i]]++;
    for (int64_t li = 0; li < NL; li++)
        if ((st = keys_finish(m, &kw[li], tokens, n, t, P, o.max_neurons, next_count,
                              &r->layers[li])))
            goto fail;
    *out = r;
    r = NULL;
fail:
    ffn_keys_result_free(r);
    free(next_count);
    for (int64_t li = 0; kw && li < NL; li++) {
        free(kw[li].heap);
        free(kw[li].count);
    }
    free(kw);
    runner_free(&rn);
    return st;
}
