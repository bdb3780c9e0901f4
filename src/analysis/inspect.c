/* inspect.c -- looking inside a model's FFNs (include/ffn/inspect.h):
 * capturing every layer's FFN input and output, the neurons m_i of one
 * FFN, value vectors and their logit lens, the per-token report (top
 * neurons, explained fraction, MoE routing), and the search for trigger
 * examples of key-value memories (Geva et al., 2021).  The linear probes
 * of gate activations live in probe.c.
 *
 * Letters: T tokens, D hidden, F an FFN's width, W a layer's neuron width
 * (F, or E·Fe in a MoE layer), E experts, K experts per token, V vocab,
 * L layers, P promoted tokens.
 *
 * There is no forward here: every value comes from the model's own
 * forward through taps (include/ffn/tap.h) -- mlp_in, mlp_out, gate_pre,
 * up, m and the routing -- or, for neurons the forward did not compute
 * (an expert on tokens not routed to it, the shared expert), from the
 * model's own layer objects run on tapped FFN inputs
 * (ffn_model_ffn_neurons).  The decomposition Σ w·m_i·v_i + b = y is still
 * a real check: y is the layer's output from its down projection, the sum
 * is formed here from the tapped m and the value vectors.  The caller's
 * taps are set aside while analysis runs and put back after.  Everything
 * here allocates: it is analysis, not a hot path. */
#include "ffn/inspect.h"
#include "ffn/layer.h"
#include "ffn/model.h"
#include "ffn/moe.h"
#include "base/common.h"
#include "nn/tap_internal.h"
#include "analysis/topk.h"

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

ffn_status ffn_inspect_neurons(ffn_ctx *ctx, ffn_model *m, int64_t l, int64_t expert,
                               const float *x, int64_t n, float *gate_pre, float *gate, float *up,
                               float *mo) {
    (void)ctx; /* the model's own layer objects run on the model's context */
    if (!m || (!x && n > 0) || n < 0)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_inspect_neurons: model and x must not be "
                         "NULL, n >= 0 (n = %lld)", (long long)n);
    ffn_view v;
    ffn_status st = ffn_of(m, l, expert, &v);
    if (st || n == 0) return st;
    const int64_t F = v.F, P = v.gated ? 2 * F : F;
    size_t cnt;
    if (ffn_mul_size((size_t)n, (size_t)P, &cnt) || cnt > SIZE_MAX / 16)
        return ffn_error(FFN_ERR_OVERFLOW, "ffn_inspect_neurons: n·F overflows");
    float *gu = malloc(cnt * sizeof *gu), *h = malloc((size_t)(n * F) * sizeof *h);
    if (!gu || !h) {
        free(gu), free(h);
        return ffn_error(FFN_ERR_NOMEM, "ffn_inspect_neurons: out of memory");
    }
    /* the model's layer (dense/gated, routed or shared expert), tapped */
    if (!(st = ffn_model_ffn_neurons(m, l, expert, x, n, gu, h))) {
        for (int64_t r = 0; r < n; r++) {
            const float *g = gu + r * P, *u = v.gated ? g + F : g;
            if (gate_pre) memcpy(gate_pre + r * F, g, (size_t)F * sizeof *g);
            if (up) memcpy(up + r * F, u, (size_t)F * sizeof *u);
            if (gate) {
                if (v.gated) ffn_taps_gate(v.act, gate + r * F, g, F);
                else memcpy(gate + r * F, h + r * F, (size_t)F * sizeof *h); /* act(up) = m */
            }
        }
        if (mo) memcpy(mo, h, (size_t)(n * F) * sizeof *h);
    }
    free(gu), free(h);
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

/* Layer l's post-FFN norm weight (D), or NULL when the model has none. */
static const float *post_ffn_norm(ffn_model *m, int64_t l) {
    const ffn_model_config *c = ffn_model_get_config(m);
    if (!c->post_norms) return NULL;
    return tensorf(m, c->hidden_size, 1, "model.layers.%lld.post_feedforward_layernorm.weight",
                   (long long)l);
}

/* lens (V) = U · (g ⊙ v), accumulated in double; with a post-FFN norm
 * weight `post` (or NULL) v is first scaled by it: its direction in the
 * residual stream (the norm's 1/rms is a positive scalar per token). */
static void lens_of(float *lens, const float *U, const float *g, const float *post,
                    const float *v, int64_t V, int64_t D, double *gv,
                    double g_offset) { /* Gemma's norms scale by offset + w */
    for (int64_t d = 0; d < D; d++)
        gv[d] = ((double)g[d] + g_offset) * (post ? (double)post[d] + g_offset : 1.0) *
                (double)v[d];
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
        if (!isnan(x)) ffn_topk_push_i32(vals, ids, &k, p, x, (int32_t)t);
    }
    for (; k < p; k++) {
        ids[k] = -1;
        vals[k] = 0.0f;
    }
}

/* Scratch of the logit lens, one value vector at a time. */
typedef struct lens_work {
    const float *U, *g; /* lens_tensors */
    float *lens;        /* (V) */
    double *gv;         /* (D) */
    float *v;           /* (D) */
} lens_work;

static void lens_work_free(lens_work *w) {
    free(w->lens);
    free(w->gv);
    free(w->v);
}

static ffn_status lens_work_init(ffn_model *m, lens_work *w) {
    const ffn_model_config *c = ffn_model_get_config(m);
    memset(w, 0, sizeof *w);
    w->lens = malloc((size_t)c->vocab_size * sizeof *w->lens);
    w->gv = malloc((size_t)c->hidden_size * sizeof *w->gv);
    w->v = malloc((size_t)c->hidden_size * sizeof *w->v);
    if (!w->lens || !w->gv || !w->v)
        return ffn_error(FFN_ERR_NOMEM, "inspect: out of memory (logit lens)");
    return lens_tensors(m, &w->U, &w->g);
}

/* The p tokens neuron (expert, index) of layer l promotes most, through
 * the lens: ids/vals (p). */
static ffn_status lens_top(ffn_model *m, lens_work *w, int64_t l, int64_t expert, int64_t index,
                           int64_t p, int32_t *ids, float *vals) {
    const ffn_model_config *c = ffn_model_get_config(m);
    ffn_status st = ffn_inspect_value_vector(m, l, expert, index, w->v);
    if (st) return st;
    const float *post = post_ffn_norm(m, l);
    if (c->post_norms && !post)
        return ffn_error(FFN_ERR_INTERNAL, "inspect: layer %lld: "
                         "post_feedforward_layernorm.weight is missing", (long long)l);
    lens_of(w->lens, w->U, w->g, post, w->v, c->vocab_size, c->hidden_size, w->gv,
            (double)(float)c->norm_weight_offset);
    top_p(w->lens, c->vocab_size, p, ids, vals);
    return FFN_OK;
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
        const float *post = post_ffn_norm(m, l);
        if (c->post_norms && !post)
            st = ffn_error(FFN_ERR_INTERNAL, "inspect: layer %lld: "
                           "post_feedforward_layernorm.weight is missing", (long long)l);
        else
            lens_of(lens, U, g, post, v, c->vocab_size, D, gv,
                    (double)(float)c->norm_weight_offset);
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

/* ---- capture: the model's forward, through taps ------------------------------------ */

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

/* Select point p in every layer that has it (only layers with want[l] when
 * want is given). */
static ffn_status select_all(ffn_model *m, ffn_tap_point p, const int *want) {
    const int64_t L = ffn_model_get_config(m)->num_hidden_layers;
    for (int64_t l = 0; l < L; l++) {
        if (want && !want[l]) continue;
        char name[64];
        ffn_tap_name(name, sizeof name, l, p);
        if (ffn_model_tap_lookup(m, name, NULL, NULL, NULL)) continue; /* not in this layer */
        ffn_status st = ffn_model_tap_select(m, name);
        if (st) return st;
    }
    return FFN_OK;
}

/* The rows of a selected point of the last forward (NULL when absent). */
static const void *tap_rows(const ffn_model *m, int64_t l, ffn_tap_point p) {
    char name[64];
    ffn_tap_view v;
    ffn_tap_name(name, sizeof name, l, p);
    return ffn_model_tap_read(m, name, &v) ? NULL : v.data;
}

/* One forward of tokens (B, T) with whatever is selected: the logits go to
 * `logits` (B·T, V) when given, else the model evaluates a loss with every
 * target ignored (no logits buffer). */
static ffn_status forward(ffn_model *m, const int32_t *tokens, int64_t B, int64_t T,
                          float *logits) {
    ffn_status st = ffn_model_reserve(m, B, T);
    if (st) return st;
    if (logits) return ffn_model_logits(m, logits, tokens, B, T);
    int32_t *ignore = malloc((size_t)(B * T) * sizeof *ignore);
    if (!ignore) return ffn_error(FFN_ERR_NOMEM, "inspect: out of memory");
    for (int64_t i = 0; i < B * T; i++) ignore[i] = FFN_IGNORE_INDEX;
    ffn_model_loss loss;
    st = ffn_model_eval_loss(m, tokens, ignore, B, T, &loss);
    free(ignore);
    return st;
}

ffn_status ffn_inspect_capture(ffn_ctx *ctx, ffn_model *m, const int32_t *tokens, int64_t T,
                               float *ffn_in, float *ffn_out, float *logits, int32_t *topk_ids,
                               float *topk_weights) {
    (void)ctx;
    if (!m) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_inspect_capture: model is NULL");
    ffn_status st = check_sequence(m, tokens, T, "ffn_inspect_capture");
    if (st) return st;
    const ffn_model_config *c = ffn_model_get_config(m);
    const int64_t L = c->num_hidden_layers, D = c->hidden_size;
    const int64_t K = c->num_experts > 0 ? c->num_experts_per_tok : 1;
    ffn_taps *stash = ffn_model_taps_stash(m);
    if ((ffn_in && (st = select_all(m, FFN_TAP_MLP_IN, NULL))) ||
        (ffn_out && (st = select_all(m, FFN_TAP_MLP_OUT, NULL))) ||
        (topk_ids && (st = select_all(m, FFN_TAP_EXPERT_IDS, NULL))) ||
        (topk_weights && (st = select_all(m, FFN_TAP_EXPERT_WEIGHTS, NULL))) ||
        (st = forward(m, tokens, 1, T, logits)))
        goto done;
    for (int64_t l = 0; l < L; l++) {
        const size_t nd = (size_t)(T * D) * sizeof(float), nk = (size_t)(T * K);
        const float *x = tap_rows(m, l, FFN_TAP_MLP_IN), *y = tap_rows(m, l, FFN_TAP_MLP_OUT);
        const int32_t *ids = tap_rows(m, l, FFN_TAP_EXPERT_IDS);
        const float *wts = tap_rows(m, l, FFN_TAP_EXPERT_WEIGHTS);
        if (ffn_in && x) memcpy(ffn_in + l * T * D, x, nd);
        else if (ffn_in) memset(ffn_in + l * T * D, 0, nd);
        if (ffn_out && y) memcpy(ffn_out + l * T * D, y, nd);
        else if (ffn_out) memset(ffn_out + l * T * D, 0, nd);
        for (size_t i = 0; i < nk; i++) {
            if (topk_ids) topk_ids[l * T * K + (int64_t)i] = ids ? ids[i] : -1;
            if (topk_weights) topk_weights[l * T * K + (int64_t)i] = wts ? wts[i] : 0.0f;
        }
    }
done:
    ffn_model_taps_restore(m, stash);
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
    char *block;                    /* all of the above, zeroed */
} run_storage;

/* The result's arrays, carved from one zeroed block. */
static int storage_alloc(run_storage *s, int64_t NL, int64_t T, int64_t top_k, int64_t K,
                         int64_t P) {
    const size_t nl = (size_t)NL, nt = nl * (size_t)T, nk = nt * (size_t)K;
    const size_t np = nt * (size_t)top_k * (size_t)P;
    const size_t bytes[9] = {nl * sizeof *s->layers, nl * sizeof *s->is_moe,
                             (size_t)T * sizeof *s->token_ids, nt * sizeof *s->tokens,
                             nt * (size_t)top_k * sizeof *s->neurons, nk * sizeof *s->experts,
                             nk * sizeof *s->expert_w, np * sizeof *s->promoted,
                             np * sizeof *s->promoted_logit};
    size_t at[10] = {0};
    for (int i = 0; i < 9; i++) at[i + 1] = at[i] + ffn_align64(bytes[i]);
    char *b = s->block = calloc(1, at[9]);
    if (!b) return 1;
    s->layers = (int64_t *)(b + at[0]);
    s->is_moe = (int *)(b + at[1]);
    s->token_ids = (int32_t *)(b + at[2]);
    s->tokens = (ffn_inspect_token *)(b + at[3]);
    s->neurons = (ffn_inspect_neuron *)(b + at[4]);
    s->experts = (int32_t *)(b + at[5]);
    s->expert_w = (float *)(b + at[6]);
    s->promoted = (int32_t *)(b + at[7]);
    s->promoted_logit = (float *)(b + at[8]);
    return 0;
}

void ffn_inspect_result_free(ffn_inspect_result *r) {
    if (!r) return;
    run_storage *s = r->storage_;
    if (s) free(s->block);
    free(s);
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
    lens_work w;
} lens_cache;

static void lens_cache_free(lens_cache *lc) {
    FFN_FREE_ALL(lc->slot, lc->ids, lc->vals);
    lens_work_free(&lc->w);
}

static ffn_status lens_lookup(ffn_model *m, int64_t l, lens_cache *lc, int64_t expert,
                              int64_t index, const int32_t **ids, const float **vals) {
    int64_t key = (expert + 2) * lc->width + index;
    if (lc->slot[key] < 0) {
        int64_t cap = lc->cap; /* ids and vals grow together */
        int32_t *ni = ffn_grow(lc->ids, lc->n, &cap, (size_t)lc->P * sizeof *ni, 64);
        if (ni) lc->ids = ni;
        cap = lc->cap;
        float *nv = ffn_grow(lc->vals, lc->n, &cap, (size_t)lc->P * sizeof *nv, 64);
        if (nv) lc->vals = nv;
        if (!ni || !nv) return ffn_error(FFN_ERR_NOMEM, "inspect: out of memory (lens cache)");
        lc->cap = cap;
        ffn_status st = lens_top(m, &lc->w, l, expert, index, lc->P, lc->ids + lc->n * lc->P,
                                 lc->vals + lc->n * lc->P);
        if (st) return st;
        lc->slot[key] = lc->n++;
    }
    *ids = lc->ids + lc->slot[key] * lc->P;
    *vals = lc->vals + lc->slot[key] * lc->P;
    return FFN_OK;
}

/* z += c · v_i, v_i the value vector of neuron i of the FFN v. */
static void add_value(double *z, const ffn_view *v, int64_t i, float c) {
    for (int64_t d = 0; d < v->D; d++) z[d] += (double)c * v->p.down_w[d * v->F + i];
}

static double norm2(const double *a, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += a[i] * a[i];
    return sqrt(s);
}

/* Inspect one layer for every token, from the forward's taps: X, Y (T, D)
 * its FFN's input and output, GP, UP, MM (T, W) gate_pre, up and m (MoE:
 * the routed experts, W = E·Fe), ids / wts (T, K) the routing. */
static ffn_status inspect_layer(ffn_ctx *ctx, ffn_model *m, int64_t l, int64_t li,
                                const float *X, const float *Y, const float *GP, const float *UP,
                                const float *MM, const int32_t *ids, const float *wts, int64_t T,
                                int64_t K, int64_t top_k, ffn_inspect_result *r, run_storage *s) {
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
    cand *best = malloc((size_t)top_k * sizeof *best);
    /* gate = act(gate_pre) for the tapped rows (dense: act(up) = m); the
     * shared expert's neurons, one token at a time, through its layer */
    const int64_t W = moe ? E * Fr : Fr, rows = Fs > 0 ? 1 : 0;
    float *GA = malloc((size_t)(T * W) * sizeof *GA);
    float *nb = malloc((size_t)(4 * (rows * Fs) + 1) * sizeof *nb);
    /* outv: y less the bias, part: the biases' sum, then the kept neurons'; with a post-FFN norm
     * (Gemma 2/3) z: the down projection's output, g: the norm's gain on it */
    double *outv = malloc((size_t)(4 * D) * sizeof *outv), *part = outv + D, *z = part + D,
           *g = z + D;
    const float *post_w = NULL;
    if (c->post_norms) {
        post_w = post_ffn_norm(m, l);
        if (!post_w) {
            st = ffn_error(FFN_ERR_INTERNAL, "inspect: layer %lld: "
                           "post_feedforward_layernorm.weight is missing", (long long)l);
            goto done;
        }
        if (c->norm_type != FFN_NORM_RMS) {
            st = ffn_error(FFN_ERR_UNSUPPORTED, "inspect: layer %lld: a post-FFN LayerNorm "
                           "(only RMSNorm is decomposed)", (long long)l);
            goto done;
        }
    }
    if (!lc.slot || !best || !nb || !outv || !GA) {
        st = ffn_error(FFN_ERR_NOMEM, "inspect: out of memory");
        goto done;
    }
    if ((st = lens_work_init(m, &lc.w))) goto done;
    for (int64_t i = 0; i < (E + 2) * width; i++) lc.slot[i] = -1;
    if (c->mlp_type == FFN_MODEL_MLP_GATED) ffn_taps_gate(c->hidden_act, GA, GP, T * W);
    else memcpy(GA, MM, (size_t)(T * W) * sizeof *GA);
    float *gp = nb, *ga = nb + rows * Fs, *up = ga + rows * Fs, *mm = up + rows * Fs;
    ffn_view own;
    if (!moe && (st = ffn_of(m, l, -1, &own))) goto done;
    for (int64_t t = 0; t < T; t++) {
        const float *x = X + t * D;
        int64_t n_best = 0;
        /* part: the biases' sum (z's part that no neuron explains), kept
         * beside z for the subtraction below */
        for (int64_t d = 0; d < D; d++) outv[d] = Y[t * D + d], z[d] = 0.0, part[d] = 0.0;
        if (!moe) {
            for (int64_t i = 0; i < Fr; i++) {
                int64_t o = t * W + i;
                cand cd = {-1, i, GP[o], GA[o], UP[o], MM[o], 1.0f, MM[o]};
                keep_top(best, &n_best, top_k, &cd);
                if (post_w) add_value(z, &own, i, MM[o]);
            }
            if (own.p.down_b)
                for (int64_t d = 0; d < D; d++) z[d] += own.p.down_b[d], part[d] = own.p.down_b[d];
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
                    if ((st = ffn_model_shared_gate(m, l, x, &w))) goto done;
                }
                ffn_view ev;
                if ((st = ffn_of(m, l, e, &ev))) goto done;
                if (e >= 0) { /* a routed expert: the forward's own values */
                    const int64_t o = t * W + e * Fr;
                    for (int64_t i = 0; i < ev.F; i++) {
                        cand cd = {e, i, GP[o + i], GA[o + i], UP[o + i], MM[o + i], w,
                                   w * MM[o + i]};
                        keep_top(best, &n_best, top_k, &cd);
                        if (post_w) add_value(z, &ev, i, w * MM[o + i]);
                    }
                } else {
                    if ((st = ffn_inspect_neurons(ctx, m, l, e, x, 1, gp, ga, up, mm))) goto done;
                    for (int64_t i = 0; i < ev.F; i++) {
                        cand cd = {e, i, gp[i], ga[i], up[i], mm[i], w, w * mm[i]};
                        keep_top(best, &n_best, top_k, &cd);
                        if (post_w) add_value(z, &ev, i, w * mm[i]);
                    }
                }
                if (ev.p.down_b)
                    for (int64_t d = 0; d < D; d++) {
                        const double b = (double)w * ev.p.down_b[d];
                        z[d] += b;
                        part[d] += b;
                    }
            }
        }
        /* what is added to the residual is y = g ⊙ z, z = Σ w·m_i·v_i + b:
         * g = 1 without a post-FFN norm; with one (RMSNorm, the model's own
         * eps and weight offset) g = (offset + w) / rms(z), the same for
         * every term of this token, so each neuron's contribution to y is
         * w·m_i·(g ⊙ v_i) and the bias's g ⊙ b */
        if (post_w) {
            double ms = 0.0;
            for (int64_t d = 0; d < D; d++) ms += z[d] * z[d];
            const double rstd = 1.0 / sqrt(ms / (double)D + (double)(float)c->rms_norm_eps);
            for (int64_t d = 0; d < D; d++) g[d] = (c->norm_weight_offset + post_w[d]) * rstd;
        } else {
            for (int64_t d = 0; d < D; d++) g[d] = 1.0;
        }
        /* the bias: z's part that no neuron explains, zero without biases */
        if (moe || own.p.down_b)
            for (int64_t d = 0; d < D; d++) outv[d] -= g[d] * part[d];
        /* the partial sum of the kept neurons and the explained fraction */
        for (int64_t d = 0; d < D; d++) part[d] = 0.0;
        ffn_inspect_neuron *nu = s->neurons + (li * T + t) * top_k;
        for (int64_t j = 0; j < n_best; j++) {
            ffn_view ev;
            if ((st = ffn_of(m, l, best[j].expert, &ev))) goto done;
            double vn = 0.0;
            for (int64_t d = 0; d < D; d++) {
                double vd = ev.p.down_w[d * ev.F + best[j].index];
                part[d] += (double)best[j].contribution * g[d] * vd;
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
    free(GA);
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
    const int64_t L = c->num_hidden_layers;
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
    const int64_t K = c->num_experts > 0 ? c->num_experts_per_tok : 1;
    /* no token has more candidates than its layer's widest FFN set */
    int64_t most = 0;
    int *want = calloc((size_t)L, sizeof *want);
    if (!want) return ffn_error(FFN_ERR_NOMEM, "%s: out of memory", fn);
    for (int64_t l = 0; l < L; l++) {
        if (!((o.layer < 0 || o.layer == l) && layer_has_ffn(c, l))) continue;
        want[l] = 1;
        int64_t w = ffn_model_config_layer_is_moe(c, l)
                        ? K * expert_width(c) + c->shared_expert_intermediate_size
                        : c->intermediate_size;
        if (w > most) most = w;
    }
    const int64_t top_k = o.top_k < most ? o.top_k : most, P = o.n_promoted;
    ffn_inspect_result *r = calloc(1, sizeof *r);
    run_storage *s = calloc(1, sizeof *s);
    /* routing of the layers that have none: ids -1, weights 0 */
    int32_t *no_ids = malloc((size_t)(T * K) * sizeof *no_ids);
    float *no_wts = calloc((size_t)(T * K), sizeof *no_wts);
    ffn_taps *stash = ffn_model_taps_stash(m);
    if (r) r->storage_ = s;
    if (!r || !s || !no_ids || !no_wts || storage_alloc(s, NL, T, top_k, K, P)) {
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
    for (int64_t i = 0; i < T * K; i++) no_ids[i] = -1;
    /* one forward with the inspected layers' FFN points tapped */
    static const ffn_tap_point pts[] = {FFN_TAP_MLP_IN, FFN_TAP_MLP_OUT, FFN_TAP_GATE_PRE,
                                        FFN_TAP_UP, FFN_TAP_M, FFN_TAP_EXPERT_IDS,
                                        FFN_TAP_EXPERT_WEIGHTS};
    for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++)
        if ((st = select_all(m, pts[i], want))) goto fail;
    if ((st = forward(m, tokens, 1, T, NULL))) goto fail;
    int64_t li = 0;
    for (int64_t l = 0; l < L; l++) {
        if (!want[l]) continue;
        s->layers[li] = l;
        s->is_moe[li] = ffn_model_config_layer_is_moe(c, l);
        const int32_t *ids = tap_rows(m, l, FFN_TAP_EXPERT_IDS);
        const float *wts = tap_rows(m, l, FFN_TAP_EXPERT_WEIGHTS);
        const float *X = tap_rows(m, l, FFN_TAP_MLP_IN), *Y = tap_rows(m, l, FFN_TAP_MLP_OUT);
        const float *GP = tap_rows(m, l, FFN_TAP_GATE_PRE), *UP = tap_rows(m, l, FFN_TAP_UP);
        const float *MM = tap_rows(m, l, FFN_TAP_M);
        if (!X || !Y || !GP || !UP || !MM) {
            st = ffn_error(FFN_ERR_INTERNAL, "%s: layer %lld: a tap is missing", fn, (long long)l);
            goto fail;
        }
        if ((st = inspect_layer(ctx, m, l, li, X, Y, GP, UP, MM, ids ? ids : no_ids,
                                wts ? wts : no_wts, T, K, top_k, r, s)))
            goto fail;
        li++;
    }
    *out = r;
    r = NULL;
fail:
    ffn_model_taps_restore(m, stash);
    ffn_inspect_result_free(r);
    free(want);
    free(no_ids);
    free(no_wts);
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

/* Push the activations of one window (rows s0.., Tw of them) of layer l:
 * a dense/gated layer's m as the forward tapped it (MM, (Tw, F)); a MoE
 * layer's experts evaluated by their own layer objects on every row of the
 * tapped FFN input X and read only where routed, so that each activation
 * is computed exactly as ffn_inspect_neurons on the window computes it (a
 * matrix product's rounding may depend on its row count). */
static ffn_status keys_window(ffn_ctx *ctx, ffn_model *m, keys_work *kw, const float *X,
                              const float *MM, const int32_t *ids, const float *wts, int64_t s0,
                              int64_t Tw, int64_t K, int64_t t, float *nb) {
    const int64_t F = kw->fe;
    ffn_status st;
    const int64_t n_exp = kw->moe ? kw->width / F : 1;
    for (int64_t e = 0; e < n_exp; e++) {
        const float *mm = MM;
        if (kw->moe) {
            if ((st = ffn_inspect_neurons(ctx, m, kw->l, e, X, Tw, NULL, NULL, NULL, nb)))
                return st;
            mm = nb;
        }
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
    const int64_t W = kw->width, F = kw->fe;
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
    int32_t *pid = malloc((size_t)P * sizeof *pid);
    float *pval = malloc((size_t)P * sizeof *pval);
    lens_work lw;
    ffn_status st = lens_work_init(m, &lw);
    if (st) goto done;
    if (!out->examples || !out->promoted || !out->promoted_logit || !out->next_token || !pid ||
        !pval) {
        st = ffn_error(FFN_ERR_NOMEM, "ffn_inspect_keys: out of memory");
        goto done;
    }
    out->n_agree = out->n_counted = 0;
    double chance = 0.0;
    for (int64_t i = 0; i < W; i++) {
        ffn_key_example *h = kw->heap + i * t;
        int64_t cnt = kw->count[i];
        qsort(h, (size_t)cnt, sizeof *h, cmp_better);
        int64_t e = kw->moe ? i / F : -1, idx = kw->moe ? i % F : i;
        if ((st = lens_top(m, &lw, kw->l, e, idx, P, pid, pval))) goto done;
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
    lens_work_free(&lw);
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
    const int64_t L = c->num_hidden_layers, V = c->vocab_size;
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
    ffn_status st = FFN_OK;
    const int64_t K = c->num_experts > 0 ? c->num_experts_per_tok : 1;
    int64_t *next_count = NULL;
    int *want = calloc((size_t)L, sizeof *want);
    ffn_taps *stash = ffn_model_taps_stash(m);
    ffn_keys_result *r = calloc(1, sizeof *r);
    keys_work *kw = calloc((size_t)NL, sizeof *kw);
    if (r) r->layers = calloc((size_t)NL, sizeof *r->layers);
    if (!r || !kw || !r->layers || !want) {
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
        want[l] = 1;
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
        /* one forward per window, the FFN points tapped */
        float *nb = malloc((size_t)(W * maxf) * sizeof *nb);
        if (!nb) st = ffn_error(FFN_ERR_NOMEM, "%s: out of memory", fn);
        static const ffn_tap_point pts[] = {FFN_TAP_MLP_IN, FFN_TAP_M, FFN_TAP_EXPERT_IDS,
                                            FFN_TAP_EXPERT_WEIGHTS};
        for (size_t i = 0; !st && i < sizeof pts / sizeof pts[0]; i++)
            st = select_all(m, pts[i], want);
        for (int64_t s0 = 0; !st && s0 < n; s0 += W) {
            int64_t Tw = n - s0 < W ? n - s0 : W;
            if ((st = forward(m, tokens + s0, 1, Tw, NULL))) break;
            for (int64_t li = 0; !st && li < NL; li++) {
                int64_t l = kw[li].l;
                st = keys_window(ctx, m, &kw[li], tap_rows(m, l, FFN_TAP_MLP_IN),
                                 tap_rows(m, l, FFN_TAP_M), tap_rows(m, l, FFN_TAP_EXPERT_IDS),
                                 tap_rows(m, l, FFN_TAP_EXPERT_WEIGHTS), s0, Tw, K, t, nb);
            }
        }
        free(nb);
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
    free(want);
    ffn_model_taps_restore(m, stash);
    return st;
}
