/* moe.c -- Mixture of Experts: config (JSON, validation), the router
 * (logits, scores, top-k, weights, capacity), grouped dispatch to one
 * ffn_layer per expert, the weighted combine, shared experts, the aux and z
 * losses, and backward through all of it.  The formulas are in
 * include/ffn/moe.h; this file explains only the choices it makes.
 *
 * Letters: N tokens, D hidden, F expert width, E experts, K top-k,
 * S kept routed slots (<= N·K).
 *
 * Determinism: every reduction runs in a fixed order that does not depend
 * on the thread count (per-token loops are independent; sums over tokens
 * run sequentially), except inside the matrix products of the expert
 * layers and of the router's backward, which follow ffn_gemm's promise. */
#include "ffn/layer.h"
#include "ffn/moe.h"
#include "base/common.h"
#include "format/json.h"
#include "kernels/kernels.h"
#include "nn/ffn_hook.h"
#include "nn/ffn_quant.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- config ---------------------------------------------------------- */

const char *ffn_moe_scoring_name(ffn_moe_scoring s) {
    static const char *const names[] = {
        [FFN_MOE_SCORING_SOFTMAX] = "softmax", [FFN_MOE_SCORING_SIGMOID] = "sigmoid"};
    return FFN_ENUM_NAME(names, s, "unknown");
}

/* FFN_OK, or the config error naming `field` when v is below 1. */
static ffn_status at_least_one(const char *field, int64_t v) {
    return v >= 1 ? FFN_OK : ffn_error(FFN_ERR_CONFIG, "%s: must be >= 1, got %lld", field, (long long)v);
}

ffn_status ffn_moe_config_validate(const ffn_moe_config *c) {
    if (!c) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_moe_config_validate: cfg is NULL");
    ffn_status st;
    if ((st = at_least_one("hidden_size", c->hidden_size)) ||
        (st = at_least_one("num_experts", c->num_experts)) ||
        (st = at_least_one("num_experts_per_tok", c->num_experts_per_tok)))
        return st;
    if (c->num_experts_per_tok > c->num_experts)
        return ffn_error(FFN_ERR_CONFIG,
                         "num_experts_per_tok: must be <= num_experts (%lld), got %lld",
                         (long long)c->num_experts, (long long)c->num_experts_per_tok);
    if (c->num_experts > INT32_MAX)
        return ffn_error(FFN_ERR_CONFIG, "num_experts: must be <= %d, got %lld", INT32_MAX,
                         (long long)c->num_experts);
    if ((st = at_least_one("moe_intermediate_size", c->moe_intermediate_size))) return st;
    if ((unsigned)c->act > FFN_ACT_SIGMOID)
        return ffn_error(FFN_ERR_CONFIG, "hidden_act: invalid enum value %d", (int)c->act);
    if ((unsigned)c->expert_type > FFN_MLP_GATED)
        return ffn_error(FFN_ERR_CONFIG, "mlp_type: invalid enum value %d", (int)c->expert_type);
    if ((unsigned)c->scoring > FFN_MOE_SCORING_SIGMOID)
        return ffn_error(FFN_ERR_CONFIG, "scoring_func: invalid enum value %d", (int)c->scoring);
    if ((unsigned)c->save > FFN_SAVE_NONE)
        return ffn_error(FFN_ERR_CONFIG, "save mode: invalid enum value %d", (int)c->save);
    if (!isfinite(c->routed_scaling_factor) || c->routed_scaling_factor <= 0)
        return ffn_error(FFN_ERR_CONFIG, "routed_scaling_factor: must be a finite number > 0, got %g",
                         c->routed_scaling_factor);
    if (!isfinite(c->capacity_factor) || c->capacity_factor < 0)
        return ffn_error(FFN_ERR_CONFIG,
                         "capacity_factor: must be a finite number >= 0 (0 = dropless), got %g",
                         c->capacity_factor);
    if (!isfinite(c->router_aux_loss_coef))
        return ffn_error(FFN_ERR_CONFIG, "router_aux_loss_coef: must be finite, got %g",
                         c->router_aux_loss_coef);
    if (!isfinite(c->router_z_loss_coef))
        return ffn_error(FFN_ERR_CONFIG, "router_z_loss_coef: must be finite, got %g",
                         c->router_z_loss_coef);
    if (c->shared_expert_intermediate_size < 0)
        return ffn_error(FFN_ERR_CONFIG, "shared_expert_intermediate_size: must be >= 0, got %lld",
                         (long long)c->shared_expert_intermediate_size);
    if (c->n_shared_experts < 0)
        return ffn_error(FFN_ERR_CONFIG, "n_shared_experts: must be >= 0, got %lld",
                         (long long)c->n_shared_experts);
    /* Every size product we form later must fit: E·3·F·D and the shared
     * widths times D, in bytes. */
    int64_t t;
    if (ffn_mul_i64(c->num_experts, c->moe_intermediate_size, &t) || ffn_mul_i64(t, c->hidden_size, &t) ||
        ffn_mul_i64(t, 3 * 4, &t))
        return ffn_error(FFN_ERR_OVERFLOW,
                         "num_experts × moe_intermediate_size × hidden_size overflows (%lld × %lld × %lld)",
                         (long long)c->num_experts, (long long)c->moe_intermediate_size,
                         (long long)c->hidden_size);
    if (ffn_mul_i64(c->n_shared_experts, c->moe_intermediate_size, &t) ||
        ffn_mul_i64(t, c->hidden_size, &t) || ffn_mul_i64(t, 3 * 4, &t))
        return ffn_error(FFN_ERR_OVERFLOW, "n_shared_experts × moe_intermediate_size × hidden_size overflows");
    if (ffn_mul_i64(c->shared_expert_intermediate_size, c->hidden_size, &t) || ffn_mul_i64(t, 3 * 4, &t))
        return ffn_error(FFN_ERR_OVERFLOW, "shared_expert_intermediate_size × hidden_size overflows");
    return FFN_OK;
}

/* JSON null counts as absent. */
static const json_value *get_present(const json_value *root, const char *key) {
    const json_value *v = json_get(root, key);
    return (v && v->type != JSON_NULL) ? v : NULL;
}

static ffn_status opt_i64(const json_value *root, const char *key, const char *path, int64_t *out) {
    if (!get_present(root, key)) return FFN_OK;
    return json_get_i64(root, key, 0, path, out);
}

static ffn_status opt_f64(const json_value *root, const char *key, const char *path, double *out) {
    if (!get_present(root, key)) return FFN_OK;
    return json_get_f64(root, key, 0, path, out);
}

static ffn_status opt_bool(const json_value *root, const char *key, const char *path, int *out) {
    if (!get_present(root, key)) return FFN_OK;
    return json_get_bool(root, key, 0, path, out);
}

static ffn_status load_fields(const json_value *root, const char *path, ffn_moe_config *c) {
    ffn_status st;
    if (!root || root->type != JSON_OBJECT)
        return ffn_error(FFN_ERR_CONFIG, "%s: expected a JSON object at the top level", path);
    if (!get_present(root, "hidden_size"))
        return ffn_error(FFN_ERR_MISSING, "%s: hidden_size: required field is missing", path);
    if ((st = json_get_i64(root, "hidden_size", 1, path, &c->hidden_size))) return st;

    /* E under any of its three names; several must agree. */
    static const char *const e_names[] = {"num_experts", "num_local_experts", "n_routed_experts"};
    const char *e_from = NULL;
    int n_e_names = 0;
    for (int i = 0; i < 3; i++) {
        if (!get_present(root, e_names[i])) continue;
        n_e_names++;
        int64_t e = 0;
        if ((st = json_get_i64(root, e_names[i], 1, path, &e))) return st;
        if (e_from && e != c->num_experts)
            return ffn_error(FFN_ERR_CONFIG, "%s: %s (%lld) disagrees with %s (%lld)", path,
                             e_names[i], (long long)e, e_from, (long long)c->num_experts);
        c->num_experts = e;
        e_from = e_names[i];
    }
    if (!e_from)
        return ffn_error(FFN_ERR_MISSING,
                         "%s: num_experts: required field is missing (also accepted: "
                         "num_local_experts, n_routed_experts)",
                         path);
    if (!get_present(root, "num_experts_per_tok"))
        return ffn_error(FFN_ERR_MISSING, "%s: num_experts_per_tok: required field is missing", path);
    if ((st = json_get_i64(root, "num_experts_per_tok", 1, path, &c->num_experts_per_tok))) return st;

    if (get_present(root, "moe_intermediate_size")) {
        if ((st = json_get_i64(root, "moe_intermediate_size", 1, path, &c->moe_intermediate_size)))
            return st;
    } else if (get_present(root, "intermediate_size")) {
        if ((st = json_get_i64(root, "intermediate_size", 1, path, &c->moe_intermediate_size)))
            return st;
    } else {
        return ffn_error(FFN_ERR_MISSING,
                         "%s: moe_intermediate_size: required field is missing (nor is there an "
                         "intermediate_size to default to)",
                         path);
    }

    const char *s = NULL;
    c->act = FFN_ACT_SILU;
    ffn_mlp_type implied = FFN_MLP_AUTO;
    if (get_present(root, "hidden_act")) {
        if ((st = json_get_str(root, "hidden_act", 1, path, &s))) return st;
        if ((st = ffn_act_parse(s, &c->act, &implied)))
            return ffn_error_prefix(st, "%s", path);
    }
    c->expert_type = implied;
    if (get_present(root, "mlp_type")) {
        if ((st = json_get_str(root, "mlp_type", 1, path, &s))) return st;
        if (!strcmp(s, "dense")) c->expert_type = FFN_MLP_DENSE;
        else if (!strcmp(s, "gated")) c->expert_type = FFN_MLP_GATED;
        else if (strcmp(s, "auto"))
            return ffn_error(FFN_ERR_CONFIG,
                             "%s: mlp_type: unknown value '%s' (expected dense, gated or auto)", path, s);
        if (implied == FFN_MLP_GATED && c->expert_type == FFN_MLP_DENSE)
            return ffn_error(FFN_ERR_CONFIG, "%s: mlp_type: '%s' contradicts hidden_act (a gated family name)",
                             path, s);
    }
    if ((st = opt_bool(root, "mlp_bias", path, &c->bias))) return st;

    /* Renormalisation when norm_topk_prob is absent: model_type decides
     * when present (only Mixtral renormalises); without it, the expert-count
     * key names the family when it is the only one given: num_local_experts
     * is Mixtral's alone (MixtralSparseMoeBlock always renormalises), while
     * num_experts (Qwen2-MoE, OLMoE, ...) and n_routed_experts (DeepSeek)
     * default to no renormalisation in their families. */
    int is_mixtral = 0;
    if (get_present(root, "model_type")) {
        if ((st = json_get_str(root, "model_type", 1, path, &s))) return st;
        is_mixtral = !strcmp(s, "mixtral");
    } else {
        is_mixtral = n_e_names == 1 && !strcmp(e_from, "num_local_experts");
    }
    c->norm_topk_prob = is_mixtral;
    if ((st = opt_bool(root, "norm_topk_prob", path, &c->norm_topk_prob))) return st;

    c->scoring = FFN_MOE_SCORING_SOFTMAX;
    if (get_present(root, "scoring_func")) {
        if ((st = json_get_str(root, "scoring_func", 1, path, &s))) return st;
        if (!strcmp(s, "softmax")) c->scoring = FFN_MOE_SCORING_SOFTMAX;
        else if (!strcmp(s, "sigmoid")) c->scoring = FFN_MOE_SCORING_SIGMOID;
        else
            return ffn_error(FFN_ERR_CONFIG,
                             "%s: scoring_func: unknown value '%s' (expected softmax or sigmoid)", path, s);
    }
    if (get_present(root, "topk_method")) {
        if ((st = json_get_str(root, "topk_method", 1, path, &s))) return st;
        if (strcmp(s, "greedy"))
            return ffn_error(FFN_ERR_UNSUPPORTED,
                             "%s: topk_method: '%s' is not supported (only greedy top-k)", path, s);
    }
    static const char *const group_names[] = {"n_group", "topk_group"};
    for (int i = 0; i < 2; i++) {
        int64_t g = 1;
        if ((st = opt_i64(root, group_names[i], path, &g))) return st;
        if (g > 1)
            return ffn_error(FFN_ERR_UNSUPPORTED,
                             "%s: %s: group-limited routing (%lld groups) is not supported", path,
                             group_names[i], (long long)g);
    }
    c->routed_scaling_factor = 1.0;
    if ((st = opt_f64(root, "routed_scaling_factor", path, &c->routed_scaling_factor))) return st;
    if ((st = opt_i64(root, "shared_expert_intermediate_size", path,
                      &c->shared_expert_intermediate_size)))
        return st;
    if ((st = opt_i64(root, "n_shared_experts", path, &c->n_shared_experts))) return st;
    if ((st = opt_f64(root, "capacity_factor", path, &c->capacity_factor))) return st;
    if ((st = opt_f64(root, "router_aux_loss_coef", path, &c->router_aux_loss_coef))) return st;
    if ((st = opt_f64(root, "router_z_loss_coef", path, &c->router_z_loss_coef))) return st;
    return FFN_OK;
}

ffn_status ffn_moe_config_load(const char *path, ffn_moe_config *cfg) {
    if (!path || !cfg) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_moe_config_load: NULL argument");
    memset(cfg, 0, sizeof *cfg);
    json_doc *doc = NULL;
    ffn_status st = json_parse_file(path, &doc);
    if (st) return st;
    st = load_fields(json_root(doc), path, cfg);
    json_free(doc);
    if (st) return st;
    st = ffn_moe_config_validate(cfg);
    if (st) return ffn_error_prefix(st, "%s", path);
    return FFN_OK;
}

ffn_layer_config ffn_moe_expert_config(const ffn_moe_config *c, int which) {
    ffn_layer_config l = {.hidden_size = c->hidden_size,
                          .intermediate_size = c->moe_intermediate_size,
                          .act = c->act,
                          .type = c->expert_type,
                          .bias = c->bias,
                          .save = c->save,
                          .precision = c->precision};
    if (which == 1) l.intermediate_size = c->shared_expert_intermediate_size;
    if (which == 2) l.intermediate_size = c->n_shared_experts * c->moe_intermediate_size;
    return l;
}

int64_t ffn_moe_num_params(const ffn_moe_config *c) {
    int64_t n = c->num_experts * c->hidden_size;
    ffn_layer_config l = ffn_moe_expert_config(c, 0);
    n += c->num_experts * ffn_layer_num_params(&l);
    if (c->shared_expert_intermediate_size > 0) {
        l = ffn_moe_expert_config(c, 1);
        n += ffn_layer_num_params(&l) + c->hidden_size;
    }
    if (c->n_shared_experts > 0) {
        l = ffn_moe_expert_config(c, 2);
        n += ffn_layer_num_params(&l);
    }
    return n;
}

int64_t ffn_moe_active_params(const ffn_moe_config *c) {
    ffn_moe_config k = *c;
    k.num_experts = c->num_experts_per_tok;
    return ffn_moe_num_params(&k) - k.num_experts * c->hidden_size + c->num_experts * c->hidden_size;
}

/* ---- the layer object -------------------------------------------------- */

struct ffn_moe {
    ffn_ctx *ctx;
    ffn_moe_config cfg;
    ffn_layer **experts;       /* E routed experts, width F */
    ffn_layer *shared;         /* gated shared expert (Qwen2-MoE), width Fs, or NULL */
    ffn_layer *shared_experts; /* ungated shared experts (DeepSeek), or NULL */
    const float *router_w;     /* (E, D) */
    const float *shared_gate_w;/* (D) */
    int threads;               /* the context's thread count */
    int weights_set;
    ffn_moe_runner runner;     /* the routed experts run elsewhere when .forward is set */
    ffn_qweight router_q, shared_gate_q; /* low precision when .data (ffn_moe_set_qweights) */
};

ffn_status ffn_moe_create(ffn_ctx *ctx, const ffn_moe_config *cfg, ffn_moe **out) {
    if (!ctx || !cfg || !out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_moe_create: NULL argument");
    *out = NULL;
    ffn_status st = ffn_moe_config_validate(cfg);
    if (st) return st;
    /* An 'auto' expert type is refused by ffn_layer_create (experts.0). */
    ffn_moe *m = calloc(1, sizeof *m);
    if (!m) return ffn_error(FFN_ERR_NOMEM, "ffn_moe_create: out of memory");
    m->ctx = ctx;
    m->cfg = *cfg;
    m->threads = ffn_ctx_threads(ctx) > 0 ? ffn_ctx_threads(ctx) : 1;
    m->experts = calloc((size_t)cfg->num_experts, sizeof *m->experts);
    if (!m->experts) {
        free(m);
        return ffn_error(FFN_ERR_NOMEM, "ffn_moe_create: out of memory");
    }
    ffn_layer_config lc = ffn_moe_expert_config(cfg, 0);
    for (int64_t e = 0; e < cfg->num_experts && !st; e++) {
        st = ffn_layer_create(ctx, &lc, &m->experts[e]);
        if (st) st = ffn_error_prefix(st, "experts.%lld", (long long)e);
    }
    if (!st && cfg->shared_expert_intermediate_size > 0) {
        lc = ffn_moe_expert_config(cfg, 1);
        st = ffn_layer_create(ctx, &lc, &m->shared);
        if (st) st = ffn_error_prefix(st, "shared_expert");
    }
    if (!st && cfg->n_shared_experts > 0) {
        lc = ffn_moe_expert_config(cfg, 2);
        st = ffn_layer_create(ctx, &lc, &m->shared_experts);
        if (st) st = ffn_error_prefix(st, "shared_experts");
    }
    if (st) {
        ffn_moe_free(m);
        return st;
    }
    *out = m;
    return FFN_OK;
}

void ffn_moe_free(ffn_moe *m) {
    if (!m) return;
    if (m->experts)
        for (int64_t e = 0; e < m->cfg.num_experts; e++) ffn_layer_free(m->experts[e]);
    free(m->experts);
    ffn_layer_free(m->shared);
    ffn_layer_free(m->shared_experts);
    free(m);
}

const ffn_moe_config *ffn_moe_get_config(const ffn_moe *m) { return m ? &m->cfg : NULL; }

ffn_status ffn_moe_set_loss_coefs(ffn_moe *m, double aux, double z) {
    if (!m) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_moe_set_loss_coefs: moe is NULL");
    if (!isfinite(aux) || !isfinite(z))
        return ffn_error(FFN_ERR_INVALID_ARG,
                         "ffn_moe_set_loss_coefs: coefficients must be finite, got %g and %g", aux,
                         z);
    m->cfg.router_aux_loss_coef = aux;
    m->cfg.router_z_loss_coef = z;
    return FFN_OK;
}

/* Name the first tensor of an expert that the config needs and is NULL. */
static const char *missing_tensor(const ffn_layer_params *p, const ffn_moe_config *c) {
    if (c->expert_type == FFN_MLP_GATED && !p->gate_w) return "gate_proj.weight";
    if (!p->up_w) return "up_proj.weight";
    if (!p->down_w) return "down_proj.weight";
    if (c->bias) {
        if (c->expert_type == FFN_MLP_GATED && !p->gate_b) return "gate_proj.bias";
        if (!p->up_b) return "up_proj.bias";
        if (!p->down_b) return "down_proj.bias";
    }
    return NULL;
}

ffn_status ffn_moe_set_weights(ffn_moe *m, const ffn_moe_params *w) {
    return ffn_moe_set_qweights(m, w, NULL);
}

ffn_status ffn_moe_set_qweights(ffn_moe *m, const ffn_moe_params *w, const ffn_moe_qweights *q) {
    if (!m || !w) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_moe_set_weights: NULL argument");
    const ffn_moe_config *c = &m->cfg;
    const char *t;
    m->weights_set = 0;
    if (!w->router_w) return ffn_error(FFN_ERR_MISSING, "gate.weight: the router weight is missing");
    if (!w->experts && !m->runner.forward)
        return ffn_error(FFN_ERR_MISSING, "experts: the expert weights are missing");
    if (w->experts && m->runner.set_experts) { /* the runner's experts, not ours */
        ffn_status st = m->runner.set_experts(m->runner.user, w->experts);
        ffn_ctx_enter(m->ctx);
        if (st) return ffn_error_prefix(st, "experts (runner)");
    }
    for (int64_t e = 0; w->experts && !m->runner.set_experts && e < c->num_experts; e++) {
        if ((t = missing_tensor(&w->experts[e], c)))
            return ffn_error(FFN_ERR_MISSING, "experts.%lld.%s: missing", (long long)e, t);
        const ffn_layer_qweights *qe = q && q->experts ? q->experts[e] : NULL;
        ffn_status st = qe ? ffn_layer_set_qweights(m->experts[e], qe)
                           : ffn_layer_set_weights(m->experts[e], &w->experts[e]);
        if (st) return ffn_error_prefix(st, "experts.%lld", (long long)e);
    }
    if (m->shared) {
        if ((t = missing_tensor(&w->shared, c)))
            return ffn_error(FFN_ERR_MISSING, "shared_expert.%s: missing", t);
        if (!w->shared_gate_w)
            return ffn_error(FFN_ERR_MISSING, "shared_expert_gate.weight: missing");
        ffn_status st = q && q->shared ? ffn_layer_set_qweights(m->shared, q->shared)
                                       : ffn_layer_set_weights(m->shared, &w->shared);
        if (st) return ffn_error_prefix(st, "shared_expert");
    }
    if (m->shared_experts) {
        if ((t = missing_tensor(&w->shared_experts, c)))
            return ffn_error(FFN_ERR_MISSING, "shared_experts.%s: missing", t);
        ffn_status st = ffn_layer_set_weights(m->shared_experts, &w->shared_experts);
        if (st) return ffn_error_prefix(st, "shared_experts");
    }
    m->router_w = w->router_w;
    m->shared_gate_w = w->shared_gate_w;
    memset(&m->router_q, 0, sizeof m->router_q);
    memset(&m->shared_gate_q, 0, sizeof m->shared_gate_q);
    if (q && q->router) m->router_q = *q->router;
    if (q && q->shared_gate) m->shared_gate_q = *q->shared_gate;
    m->weights_set = 1;
    return FFN_OK;
}

/* ---- buffers: the saved block and the workspace -------------------------
 * Both are carved from tables of sizes, 64-byte aligned. */

typedef struct carver {
    size_t at;
    int overflow;
} carver;

static size_t carve(carver *c, size_t count, size_t elem) {
    size_t bytes, start = c->at;
    if (ffn_mul_size(count, elem, &bytes) || ffn_add_size(c->at, ffn_align64(bytes), &c->at) ||
        bytes > SIZE_MAX - 64)
        c->overflow = 1;
    return start;
}

/* The sizes every layout is made of, for n tokens: 1 when a product
 * overflows. */
typedef struct moe_dims {
    size_t N, E, K, D, NK, NKD, ND, NE; /* NK = N·K, NKD = N·K·D, ... */
} moe_dims;

static int dims_for(const ffn_moe *m, int64_t n, moe_dims *d) {
    const ffn_moe_config *c = &m->cfg;
    d->N = (size_t)n, d->E = (size_t)c->num_experts, d->K = (size_t)c->num_experts_per_tok;
    d->D = (size_t)c->hidden_size;
    return ffn_mul_size(d->N, d->K, &d->NK) || ffn_mul_size(d->NK, d->D, &d->NKD) ||
           ffn_mul_size(d->N, d->D, &d->ND) || ffn_mul_size(d->N, d->E, &d->NE);
}

/* The routing part (in `saved` for training, in the workspace otherwise)
 * and, in `saved` only, the layers' activations. */
typedef struct moe_layout {
    size_t logits;      /* float (N, E) */
    size_t ids;         /* int32 (N, K) */
    size_t weights;     /* float (N, K) */
    size_t slot_row;    /* int32 (N, K): row in the permuted blocks, -1 dropped */
    size_t row_slot;    /* int32 (N·K): slot n·K + j of each permuted row */
    size_t offsets;     /* int64 (E + 1): start row of each expert's block */
    size_t counts;      /* int64 (E): routed slots before capacity */
    size_t expert_out;  /* float (N·K, D): routed expert outputs, permuted */
    size_t shared_out;  /* float (N, D): shared expert output (before its gate) */
    size_t shared_gate; /* float (N): shared gate logits */
    size_t route_end;
    size_t expert_saved, expert_saved_bytes; /* the experts' saved activations */
    size_t shared_saved, shared_experts_saved;
    size_t total;
    int overflow;
} moe_layout;

static size_t expert_saved_bound(const ffn_moe *m, int64_t n) {
    /* Blocks are carved per expert at 64-byte alignment; a layer's saved
     * size is linear in its rows, so Σ_e align64(saved(c_e)) is at most
     * saved(N·K) + E·(saved(1) + 64). */
    const ffn_moe_config *c = &m->cfg;
    size_t nk, a, b, t;
    if (ffn_mul_size((size_t)n, (size_t)c->num_experts_per_tok, &nk)) return SIZE_MAX;
    a = ffn_layer_saved_size(m->experts[0], (int64_t)nk);
    b = ffn_layer_saved_size(m->experts[0], 1);
    if (ffn_add_size(b, 64, &b) || ffn_mul_size(b, (size_t)c->num_experts, &t) || ffn_add_size(a, t, &t))
        return SIZE_MAX;
    return t;
}

static moe_layout layout_for(const ffn_moe *m, int64_t n) {
    moe_layout L = {0};
    carver cv = {0, 0};
    moe_dims d;
    if (dims_for(m, n, &d)) {
        L.overflow = 1;
        return L;
    }
    L.logits = carve(&cv, d.NE, sizeof(float));
    L.ids = carve(&cv, d.NK, sizeof(int32_t));
    L.weights = carve(&cv, d.NK, sizeof(float));
    L.slot_row = carve(&cv, d.NK, sizeof(int32_t));
    L.row_slot = carve(&cv, d.NK, sizeof(int32_t));
    L.offsets = carve(&cv, d.E + 1, sizeof(int64_t));
    L.counts = carve(&cv, d.E, sizeof(int64_t));
    L.expert_out = carve(&cv, d.NKD, sizeof(float));
    L.shared_out = carve(&cv, m->shared ? d.ND : 0, sizeof(float));
    L.shared_gate = carve(&cv, m->shared ? d.N : 0, sizeof(float));
    L.route_end = cv.at;
    L.expert_saved_bytes = expert_saved_bound(m, n);
    L.expert_saved = carve(&cv, L.expert_saved_bytes, 1);
    L.shared_saved = carve(&cv, m->shared ? ffn_layer_saved_size(m->shared, n) : 0, 1);
    L.shared_experts_saved =
        carve(&cv, m->shared_experts ? ffn_layer_saved_size(m->shared_experts, n) : 0, 1);
    L.total = cv.at;
    L.overflow = cv.overflow;
    return L;
}

size_t ffn_moe_saved_size(const ffn_moe *m, int64_t n) {
    if (!m || n < 0) return 0;
    moe_layout L = layout_for(m, n);
    return L.overflow ? SIZE_MAX : L.total;
}

/* The transient workspace. */
typedef struct ws_layout {
    size_t route;      /* the routing part when forward has no `saved` */
    size_t xp;         /* float (N·K, D): permuted input rows */
    size_t dyp;        /* float (N·K, D): permuted, weighted dy */
    size_t dxp;        /* float (N·K, D): permuted dx of the experts */
    size_t probs;      /* float (N, E): scores */
    size_t grad;       /* float (N, E): d L / d logits */
    size_t lse;        /* float (N): logsumexp of the logits */
    size_t dweights;   /* float (N, K): d L / d w */
    size_t fill;       /* int64 (E): dispatch counters, then saved offsets */
    size_t psum;       /* double (E): Σ_n q_n,e */
    size_t order;      /* int32 (E): experts with rows, largest block first */
    size_t layer;      /* the expert layers' own workspace, one per thread */
    size_t layer_bytes;/* ... of one thread */
    size_t total;
    int overflow;
} ws_layout;

static ws_layout ws_layout_for(const ffn_moe *m, int64_t n) {
    ws_layout W = {0};
    carver cv = {0, 0};
    moe_layout L = layout_for(m, n);
    moe_dims d;
    if (L.overflow || dims_for(m, n, &d)) {
        W.overflow = 1;
        return W;
    }
    W.route = carve(&cv, L.route_end, 1);
    W.xp = carve(&cv, d.NKD, sizeof(float));
    W.dyp = carve(&cv, d.NKD, sizeof(float));
    W.dxp = carve(&cv, d.NKD, sizeof(float));
    W.probs = carve(&cv, d.NE, sizeof(float));
    W.grad = carve(&cv, d.NE, sizeof(float));
    W.lse = carve(&cv, d.N, sizeof(float));
    W.dweights = carve(&cv, d.NK, sizeof(float));
    W.fill = carve(&cv, d.E, sizeof(int64_t));
    W.psum = carve(&cv, d.E, sizeof(double));
    W.order = carve(&cv, d.E, sizeof(int32_t));
    /* The largest of the layers' own workspaces (a token picks an expert at
     * most once, so a block has at most N rows). */
    const ffn_layer *layers[3] = {m->experts[0], m->shared, m->shared_experts};
    size_t lb = 0;
    for (int i = 0; i < 3; i++) {
        size_t s = layers[i] ? ffn_layer_workspace_size(layers[i], n) : 0;
        if (s > lb) lb = s;
    }
    W.layer_bytes = ffn_align64(lb);
    /* Side by side needs one per thread, and only runs when threads <= E. */
    W.layer = carve(&cv, W.layer_bytes, (size_t)(m->threads <= m->cfg.num_experts ? m->threads : 1));
    W.total = cv.at;
    W.overflow = cv.overflow || lb > SIZE_MAX / 2;
    return W;
}

size_t ffn_moe_workspace_size(const ffn_moe *m, int64_t max_n) {
    if (!m || max_n < 0) return 0;
    ws_layout W = ws_layout_for(m, max_n);
    return W.overflow ? SIZE_MAX : W.total;
}

/* ---- router kernels ------------------------------------------------------ */

/* Tokens per router block: the router weight (E, D) is streamed once per
 * block, and blocks are the unit of work handed to threads. */
enum { ROUTER_BLOCK = 16 };

static float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }

/* p (E) = scores of logits l (E); returns logsumexp(l) for the z-loss. */
static float score_row(float *p, const float *l, int64_t E, ffn_moe_scoring scoring) {
    float mx = l[0];
    for (int64_t e = 1; e < E; e++)
        if (l[e] > mx) mx = l[e];
    double s = 0;
    for (int64_t e = 0; e < E; e++) s += exp((double)l[e] - mx);
    float lse = (float)(mx + log(s));
    if (scoring == FFN_MOE_SCORING_SOFTMAX)
        for (int64_t e = 0; e < E; e++) p[e] = (float)(exp((double)l[e] - mx) / s);
    else
        for (int64_t e = 0; e < E; e++) p[e] = sigmoidf_(l[e]);
    return lse;
}

/* The K largest of p (E) in descending order, ties to the lower index.
 * NaN scores are never preferred over a number, but a slot is always
 * filled, so ids are valid whatever the input. */
static void topk_row(int32_t *ids, const float *p, int64_t E, int64_t K) {
    for (int64_t j = 0; j < K; j++) {
        int64_t best = -1;
        for (int64_t e = 0; e < E; e++) {
            int taken = 0;
            for (int64_t i = 0; i < j; i++) taken |= ids[i] == e;
            if (taken) continue;
            if (best < 0 || p[e] > p[best] || (isnan(p[best]) && !isnan(p[e]))) best = e;
        }
        ids[j] = (int32_t)best;
    }
}

/* ---- running the experts ------------------------------------------------
 * Every expert with rows runs as one batched ffn_layer call on its block.
 * Two schedules:
 *   - side by side: one expert per thread at a time (largest block first,
 *     handed out dynamically), each call single-threaded -- when there are
 *     at least as many busy experts as threads and no block is much larger
 *     than a thread's share.  One synchronisation point for all experts
 *     instead of several per expert, and every block stays in one core's
 *     cache through its three products;
 *   - one after another, each call using every thread -- otherwise (skewed
 *     routing, few busy experts).
 * The choice depends only on the block sizes and the thread count, and
 * which thread runs an expert never changes its result, so runs are
 * bitwise reproducible at a fixed thread count. */

typedef struct expert_job {
    int backward;
    float *out;                   /* forward: expert outputs; backward: dx blocks (or NULL) */
    float *xb;                    /* x gathered into blocks */
    float *dyb;                   /* backward: w·dy gathered into blocks */
    const float *x, *dy;          /* (N, D) */
    const int32_t *row_slot;      /* (S) slot n·K + j of each row */
    const float *weights;         /* backward: (N, K) w */
    const float *expert_out;      /* backward: (S, D) saved expert outputs */
    float *dweights;              /* backward: (N, K) d L / d w, written for kept slots */
    const int64_t *offsets;       /* (E + 1) block starts */
    char *saved;                  /* the experts' saved area, or NULL */
    const int64_t *saved_off;     /* (E) byte offsets into it */
    const ffn_moe_params *grads;  /* backward, may be NULL */
    const ffn_neuron_hook *hook;  /* forward: the taps' hook, or NULL */
} expert_job;

ffn_status ffn_moe_set_runner(ffn_moe *m, const ffn_moe_runner *runner) {
    if (!m) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_moe_set_runner: moe is NULL");
    if (runner && (!runner->forward || !runner->backward))
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_moe_set_runner: forward and backward are both needed");
    m->runner = runner ? *runner : (ffn_moe_runner){0};
    m->weights_set = 0; /* set the weights again: the expert weights' need changed */
    if (!m->runner.set_experts) return FFN_OK;
    /* the runner holds the experts it runs: ours give back their packed
     * weights (fresh layers, no weights set) */
    ffn_layer_config lc = ffn_moe_expert_config(&m->cfg, 0);
    for (int64_t e = 0; e < m->cfg.num_experts; e++) {
        ffn_layer *fresh = NULL;
        ffn_status st = ffn_layer_create(m->ctx, &lc, &fresh);
        if (st) return ffn_error_prefix(st, "experts.%lld", (long long)e);
        ffn_layer_free(m->experts[e]);
        m->experts[e] = fresh;
    }
    return FFN_OK;
}

/* Gather rows [r0, r1) of the blocks: x (and, backward, w·dy and d L / d w). */
static void gather_rows(const ffn_moe *m, const expert_job *j, int64_t r0, int64_t r1) {
    const int64_t D = m->cfg.hidden_size, K = m->cfg.num_experts_per_tok;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t slot = j->row_slot[r];
        const float *xt = j->x + (slot / K) * D;
        memcpy(j->xb + r * D, xt, (size_t)D * sizeof(float));
        if (j->backward) {
            const float w = j->weights[slot], *dyt = j->dy + (slot / K) * D;
            const float *o = j->expert_out + r * D;
            float *d = j->dyb + r * D;
            double acc = 0;
            for (int64_t i = 0; i < D; i++) {
                d[i] = w * dyt[i];
                acc += (double)dyt[i] * o[i];
            }
            j->dweights[slot] = (float)acc;
        }
    }
}

static ffn_status expert_call(ffn_moe *m, const expert_job *j, int64_t e, void *lws, size_t lwb) {
    static const ffn_layer_params no_grads = {0};
    const int64_t D = m->cfg.hidden_size, K = m->cfg.num_experts_per_tok;
    const int64_t r0 = j->offsets[e], rows = j->offsets[e + 1] - r0;
    float *sv = j->saved ? (float *)(j->saved + j->saved_off[e]) : NULL;
    ffn_status st;
    /* Gather the block here, in the task that uses it (it stays in cache). */
    gather_rows(m, j, r0, r0 + rows);
    if (!j->backward) {
        ffn_hook_rows hr = {e, j->row_slot + r0, K};
        st = ffn_layer_forward_hooked(m->experts[e], j->out + r0 * D, j->xb + r0 * D, rows, sv,
                                      lws, lwb, j->hook, &hr);
    } else {
        const ffn_layer_params *g = j->grads && j->grads->experts ? &j->grads->experts[e] : &no_grads;
        st = ffn_layer_backward(m->experts[e], j->out ? j->out + r0 * D : NULL, g, j->dyb + r0 * D,
                                j->xb + r0 * D, rows, sv, lws, lwb);
    }
    return st ? ffn_error_prefix(st, "experts.%lld", (long long)e) : FFN_OK;
}

static ffn_status run_experts(ffn_moe *m, const expert_job *j, int32_t *order, char *lws,
                              size_t lwb) {
    const int64_t E = m->cfg.num_experts;
    if (m->runner.forward) { /* elsewhere: every block gathered, then handed over */
        gather_rows(m, j, 0, j->offsets[E]);
        ffn_status st = j->backward ? m->runner.backward(m->runner.user, j->out, j->dyb, j->offsets)
                                    : m->runner.forward(m->runner.user, j->out, j->xb, j->offsets);
        ffn_ctx_enter(m->ctx);
        return st ? ffn_error_prefix(st, "experts (runner)") : FFN_OK;
    }
    const int T = m->threads;
    int64_t n_active = 0, total = 0, max_rows = 0;
    for (int64_t e = 0; e < E; e++) {
        int64_t rows = j->offsets[e + 1] - j->offsets[e];
        if (rows == 0) continue;
        /* insertion by rows, descending; equal rows keep the lower index first */
        int64_t i = n_active++;
        while (i > 0 && j->offsets[order[i - 1] + 1] - j->offsets[order[i - 1]] < rows) {
            order[i] = order[i - 1];
            i--;
        }
        order[i] = (int32_t)e;
        total += rows;
        if (rows > max_rows) max_rows = rows;
    }
    int side_by_side = T > 1 && n_active >= T && (double)max_rows * T <= 1.25 * (double)total;
    if (!side_by_side) {
        for (int64_t i = 0; i < n_active; i++) {
            ffn_status st = expert_call(m, j, order[i], lws, lwb);
            ffn_ctx_enter(m->ctx);
            if (st) return st;
        }
        return FFN_OK;
    }
    ffn_status first = FFN_OK;
    int64_t first_i = n_active;
    char msg[1024] = "";
#pragma omp parallel for schedule(dynamic, 1) num_threads(T)
    for (int64_t i = 0; i < n_active; i++) {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        ffn_status st = expert_call(m, j, order[i], lws + (size_t)tid * lwb, lwb);
        if (st) {
#pragma omp critical(ffn_moe_expert_error)
            if (i < first_i) { /* report the same failure whichever thread saw it */
                first_i = i;
                first = st;
                snprintf(msg, sizeof msg, "%s", ffn_last_error());
            }
        }
    }
    ffn_ctx_enter(m->ctx);
    return first ? ffn_error(first, "%s", msg) : FFN_OK;
}

/* ---- forward ------------------------------------------------------------- */

#define AT(base, off, type) ((type *)((char *)(base) + (off)))

/* The routing arrays of a call in its routing block R, laid out by L
 * (forward writes them, backward reads them through const pointers). */
typedef struct moe_route {
    float *logits;     /* (N, E) */
    int32_t *ids;      /* (N, K) */
    float *weights;    /* (N, K) */
    int32_t *slot_row; /* (N, K) */
    int32_t *row_slot; /* (N·K) */
    int64_t *offsets;  /* (E + 1) */
    int64_t *counts;   /* (E) */
    float *expert_out; /* (N·K, D) */
} moe_route;

static moe_route route_in(const void *R, const moe_layout *L) {
    return (moe_route){AT(R, L->logits, float),   AT(R, L->ids, int32_t),
                       AT(R, L->weights, float),  AT(R, L->slot_row, int32_t),
                       AT(R, L->row_slot, int32_t), AT(R, L->offsets, int64_t),
                       AT(R, L->counts, int64_t), AT(R, L->expert_out, float)};
}

static ffn_status check_ready(const ffn_moe *m, const char *fn, int64_t n) {
    if (!m->weights_set)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: call ffn_moe_set_weights first", fn);
    if (n < 0) return ffn_error(FFN_ERR_INVALID_ARG, "%s: n must be >= 0, got %lld", fn, (long long)n);
    if (n > INT32_MAX / m->cfg.num_experts_per_tok)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: n·K must fit in 32 bits, got n = %lld", fn,
                         (long long)n);
    return FFN_OK;
}

/* Both directions: the layer is ready, the layouts for n tokens fit in
 * 64 bits and the workspace holds them. */
static ffn_status plan_call(const ffn_moe *m, const char *fn, int64_t n, const void *workspace,
                            size_t workspace_bytes, ws_layout *W, moe_layout *L) {
    ffn_status st = check_ready(m, fn, n);
    if (st) return st;
    *W = ws_layout_for(m, n);
    *L = layout_for(m, n);
    if (W->overflow || L->overflow)
        return ffn_error(FFN_ERR_OVERFLOW, "%s: sizes overflow for n = %lld", fn, (long long)n);
    if (!workspace || workspace_bytes < W->total)
        return ffn_error(FFN_ERR_WORKSPACE, "%s: workspace of %zu bytes, need %zu", fn,
                         workspace_bytes, W->total);
    return FFN_OK;
}

/* Byte offsets of each busy expert's saved block in the experts' saved
 * area, in expert order; returns the bytes they take. */
static size_t expert_saved_offsets(const ffn_moe *m, const int64_t *offsets, int64_t *saved_off) {
    size_t at = 0;
    for (int64_t e = 0; e < m->cfg.num_experts; e++) {
        int64_t rows = offsets[e + 1] - offsets[e];
        saved_off[e] = (int64_t)at;
        if (rows) at += ffn_align64(ffn_layer_saved_size(m->experts[e], rows));
    }
    return at;
}

/* yt (D) += Σ_j w_j · rows[slot_row_t[j]] over token t's kept slots (w_j = 1
 * when w_t is NULL), in slot order. */
static inline void add_slot_rows(float *yt, const float *rows, const int32_t *slot_row_t,
                                 const float *w_t, int64_t K, int64_t D) {
    for (int64_t j = 0; j < K; j++) {
        int32_t row = slot_row_t[j];
        if (row < 0) continue;
        const float *o = rows + (int64_t)row * D;
        if (w_t) {
            const float w = w_t[j];
            for (int64_t d = 0; d < D; d++) yt[d] += w * o[d];
        } else {
            for (int64_t d = 0; d < D; d++) yt[d] += o[d];
        }
    }
}

ffn_layer *ffn_moe_expert_layer(ffn_moe *m, int64_t e) {
    if (!m) return NULL;
    if (e == -2) return m->shared;
    return e >= 0 && e < m->cfg.num_experts ? m->experts[e] : NULL;
}

ffn_status ffn_moe_forward(ffn_moe *m, ffn_moe_outputs *out, const float *x, int64_t n,
                           void *saved, void *workspace, size_t workspace_bytes) {
    return ffn_moe_forward_hooked(m, out, x, n, saved, workspace, workspace_bytes, NULL);
}

ffn_status ffn_moe_forward_hooked(ffn_moe *m, ffn_moe_outputs *out, const float *x, int64_t n,
                                  void *saved, void *workspace, size_t workspace_bytes,
                                  const ffn_neuron_hook *hook) {
    if (!m || !out || !out->y || (n > 0 && !x))
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_moe_forward: NULL argument");
    ws_layout W;
    moe_layout L;
    ffn_status st = plan_call(m, "ffn_moe_forward", n, workspace, workspace_bytes, &W, &L);
    if (st) return st;
    const ffn_moe_config *c = &m->cfg;
    const int64_t E = c->num_experts, K = c->num_experts_per_tok, D = c->hidden_size;
    /* The routing part lives in `saved` when training, else in the workspace. */
    char *R = saved ? (char *)saved : (char *)workspace + W.route;
    const moe_route rt = route_in(R, &L);
    float *logits = rt.logits, *wts = rt.weights, *eo = rt.expert_out;
    int32_t *ids = rt.ids, *slot_row = rt.slot_row, *row_slot = rt.row_slot;
    int64_t *offsets = rt.offsets, *counts = rt.counts;
    float *probs = AT(workspace, W.probs, float);
    float *lse = AT(workspace, W.lse, float);
    float *xp = AT(workspace, W.xp, float);
    int64_t *fill = AT(workspace, W.fill, int64_t);
    double *psum = AT(workspace, W.psum, double);
    char *lws = (char *)workspace + W.layer;
    ffn_ctx_enter(m->ctx);

    /* 1. Router: logits, scores, top-k, weights, per block of tokens (the
     *    router weight is read once per block).  ffn_gemv sums every logit
     *    in one fixed order, whatever its row: two identical router rows give
     *    bit-identical logits, so exact ties stay exact. */
    const float r = (float)c->routed_scaling_factor;
    const int64_t n_blocks = (n + ROUTER_BLOCK - 1) / ROUTER_BLOCK;
#pragma omp parallel for schedule(dynamic, 1) if (n_blocks > 1)
    for (int64_t b = 0; b < n_blocks; b++) {
        const int64_t t0 = b * ROUTER_BLOCK, t1 = t0 + ROUTER_BLOCK < n ? t0 + ROUTER_BLOCK : n;
        if (m->router_q.data) /* (the arguments are checked: it cannot fail) */
            (void)ffn_qgemm(m->ctx, &m->router_q, x + t0 * D, D, t1 - t0, logits + t0 * E, E, 0);
        else
            ffn_gemv(logits + t0 * E, E, m->router_w, D, x + t0 * D, D, t1 - t0, E);
        for (int64_t t = t0; t < t1; t++) {
            float *l = logits + t * E, *p = probs + t * E;
            lse[t] = score_row(p, l, E, c->scoring);
            int32_t *id = ids + t * K;
            topk_row(id, p, E, K);
            float z = 1.0f;
            if (c->norm_topk_prob) {
                float s = 0;
                for (int64_t j = 0; j < K; j++) s += p[id[j]];
                z = s + 1e-20f;
            }
            for (int64_t j = 0; j < K; j++) wts[t * K + j] = r * p[id[j]] / z;
        }
    }

    /* 2. Dispatch: count, capacity, offsets, then rows in token order. */
    memset(counts, 0, (size_t)E * sizeof *counts);
    for (int64_t i = 0; i < n * K; i++) counts[ids[i]]++;
    int64_t cap = n * K;
    if (c->capacity_factor > 0) {
        double cd = ceil(c->capacity_factor * (double)n * (double)K / (double)E);
        cap = cd < (double)(n * K) ? (int64_t)cd : n * K;
    }
    offsets[0] = 0;
    for (int64_t e = 0; e < E; e++) {
        int64_t kept = counts[e] < cap ? counts[e] : cap;
        offsets[e + 1] = offsets[e] + kept;
        fill[e] = 0;
    }
    int64_t dropped = 0;
    for (int64_t i = 0; i < n * K; i++) {
        int64_t e = ids[i];
        if (fill[e] < cap) {
            int64_t row = offsets[e] + fill[e]++;
            slot_row[i] = (int32_t)row;
            row_slot[row] = (int32_t)i;
        } else {
            slot_row[i] = -1;
            dropped++;
        }
    }

    /* 3. Experts: one batched call per expert that has rows. */
    char *esaved = saved ? AT(saved, L.expert_saved, char) : NULL;
    if (esaved && expert_saved_offsets(m, offsets, fill) > L.expert_saved_bytes)
        return ffn_error(FFN_ERR_INTERNAL, "ffn_moe_forward: expert saved area overrun");
    expert_job job = {.backward = 0, .out = eo, .xb = xp, .x = x, .row_slot = row_slot,
                      .offsets = offsets, .saved = esaved, .saved_off = fill, .hook = hook};
    st = run_experts(m, &job, AT(workspace, W.order, int32_t), lws, W.layer_bytes);
    if (st) return st;

    /* 4. Shared experts.  The DeepSeek ones write y directly. */
    float *y = out->y;
    if (m->shared_experts) {
        st = ffn_layer_forward(m->shared_experts, y, x, n,
                               saved ? AT(saved, L.shared_experts_saved, float) : NULL, lws,
                               W.layer_bytes);
        if (st) return ffn_error_prefix(st, "shared_experts");
        ffn_ctx_enter(m->ctx);
    } else if (n > 0) {
        memset(y, 0, (size_t)n * (size_t)D * sizeof *y);
    }
    float *sh_out = m->shared ? AT(R, L.shared_out, float) : NULL;
    float *sh_gate = m->shared ? AT(R, L.shared_gate, float) : NULL;
    if (m->shared) {
        st = ffn_layer_forward(m->shared, sh_out, x, n,
                               saved ? AT(saved, L.shared_saved, float) : NULL, lws, W.layer_bytes);
        if (st) return ffn_error_prefix(st, "shared_expert");
        ffn_ctx_enter(m->ctx);
    }

    /* 5. Combine, per token in a fixed order: y += Σ_j w·eo + σ(g)·shared. */
#pragma omp parallel for schedule(dynamic, 16) if (n > 16)
    for (int64_t t = 0; t < n; t++) {
        float *yt = y + t * D;
        add_slot_rows(yt, eo, slot_row + t * K, wts + t * K, K, D);
        if (sh_out) {
            if (m->shared_gate_q.data)
                (void)ffn_qgemm(m->ctx, &m->shared_gate_q, x + t * D, D, 1, &sh_gate[t], 1, 0);
            else
                ffn_gemv(&sh_gate[t], 1, m->shared_gate_w, D, x + t * D, D, 1, 1);
            const float g = sigmoidf_(sh_gate[t]), *o = sh_out + t * D;
            for (int64_t d = 0; d < D; d++) yt[d] += g * o[d];
        }
    }

    /* 6. Losses, summed over tokens in order. */
    double aux = 0, zl = 0;
    if (n > 0) {
        for (int64_t e = 0; e < E; e++) psum[e] = 0;
        for (int64_t t = 0; t < n; t++) {
            const float *p = probs + t * E;
            double norm = 1.0;
            if (c->scoring == FFN_MOE_SCORING_SIGMOID) {
                double s = 0;
                for (int64_t e = 0; e < E; e++) s += p[e];
                norm = 1.0 / (s + 1e-20);
            }
            for (int64_t e = 0; e < E; e++) psum[e] += p[e] * norm;
            zl += (double)lse[t] * lse[t];
        }
        for (int64_t e = 0; e < E; e++)
            aux += ((double)counts[e] / (double)(n * K)) * (psum[e] / (double)n);
        aux *= (double)E;
        zl /= (double)n;
    }

    /* 7. Report. */
    if (out->router_logits && n > 0) memcpy(out->router_logits, logits, (size_t)(n * E) * sizeof(float));
    if (out->topk_ids && n > 0) memcpy(out->topk_ids, ids, (size_t)(n * K) * sizeof(int32_t));
    if (out->topk_weights && n > 0) memcpy(out->topk_weights, wts, (size_t)(n * K) * sizeof(float));
    if (out->tokens_per_expert) memcpy(out->tokens_per_expert, counts, (size_t)E * sizeof(int64_t));
    out->dropped_slots = dropped;
    out->capacity = cap;
    out->aux_loss = aux;
    out->z_loss = zl;
    return FFN_OK;
}

/* ---- backward ------------------------------------------------------------ */

/* Backward of a shared FFN over all n tokens (dy its output gradient):
 * gradients into g, then dx += its input gradient, plus dgl[t]·wsg for
 * the gated shared expert (dgl: d L / d gate logit, NULL otherwise). */
static ffn_status shared_backward(ffn_moe *m, ffn_layer *layer, const ffn_layer_params *g,
                                  const char *name, float *dx, float *dxp, const float *dy,
                                  const float *x, int64_t n, const float *saved, void *lws,
                                  size_t lwb, const float *dgl) {
    ffn_status st = ffn_layer_backward(layer, dx ? dxp : NULL, g, dy, x, n, saved, lws, lwb);
    if (st) return ffn_error_prefix(st, "%s", name);
    ffn_ctx_enter(m->ctx);
    if (!dx) return FFN_OK;
    const int64_t D = m->cfg.hidden_size;
    const float *wsg = m->shared_gate_w;
#pragma omp parallel for schedule(dynamic, 16) if (n > 16)
    for (int64_t t = 0; t < n; t++) {
        float *dxt = dx + t * D;
        const float *s = dxp + t * D;
        if (dgl)
            for (int64_t i = 0; i < D; i++) dxt[i] += s[i] + dgl[t] * wsg[i];
        else
            for (int64_t i = 0; i < D; i++) dxt[i] += s[i];
    }
    return FFN_OK;
}

ffn_status ffn_moe_backward(ffn_moe *m, float *dx, const ffn_moe_params *grads,
                            const float *dy, const float *x, int64_t n, const void *saved,
                            void *workspace, size_t workspace_bytes) {
    if (!m || (n > 0 && (!dy || !x || !saved)))
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_moe_backward: NULL argument (dy, x and saved are required)");
    if (n == 0) return check_ready(m, "ffn_moe_backward", 0);
    if (m->router_q.data || m->shared_gate_q.data)
        return ffn_error(FFN_ERR_UNSUPPORTED, "ffn_moe_backward: the router holds low-precision "
                         "weights (inference only)");
    ws_layout W;
    moe_layout L;
    ffn_status st = plan_call(m, "ffn_moe_backward", n, workspace, workspace_bytes, &W, &L);
    if (st) return st;
    const ffn_moe_config *c = &m->cfg;
    const int64_t E = c->num_experts, K = c->num_experts_per_tok, D = c->hidden_size;
    const char *R = (const char *)saved;
    const moe_route rt = route_in(R, &L);
    const float *logits = rt.logits, *wts = rt.weights, *eo = rt.expert_out;
    const int32_t *ids = rt.ids, *slot_row = rt.slot_row, *row_slot = rt.row_slot;
    const int64_t *offsets = rt.offsets, *counts = rt.counts;
    float *xp = AT(workspace, W.xp, float), *dyp = AT(workspace, W.dyp, float);
    float *dxp = AT(workspace, W.dxp, float);
    float *probs = AT(workspace, W.probs, float), *grad = AT(workspace, W.grad, float);
    float *lse = AT(workspace, W.lse, float), *dw = AT(workspace, W.dweights, float);
    char *lws = (char *)workspace + W.layer;
    static const ffn_layer_params no_grads = {0};
    ffn_ctx_enter(m->ctx);

    /* 1. Routed experts: each task gathers its block (x, w·dy, and d L / d w
     *    of its slots) and runs backward; dropped slots get d L / d w = 0. */
    memset(dw, 0, (size_t)(n * K) * sizeof *dw);
    int64_t *saved_off = AT(workspace, W.fill, int64_t);
    expert_saved_offsets(m, offsets, saved_off);
    expert_job job = {.backward = 1, .out = dx ? dxp : NULL, .dyb = dyp, .xb = xp, .x = x,
                      .dy = dy, .row_slot = row_slot, .weights = wts, .expert_out = eo,
                      .dweights = dw, .offsets = offsets,
                      .saved = (char *)AT(saved, L.expert_saved, const char),
                      .saved_off = saved_off, .grads = grads};
    st = run_experts(m, &job, AT(workspace, W.order, int32_t), lws, W.layer_bytes);
    if (st) return st;

    /* 2. Router: d L / d logits from the combine weights (indices fixed),
     *    the aux loss through P_e (f_e constant) and the z-loss. */
    const double r = c->routed_scaling_factor, caux = c->router_aux_loss_coef;
    const double cz = c->router_z_loss_coef;
#pragma omp parallel for schedule(dynamic, 16) if (n > 16)
    for (int64_t t = 0; t < n; t++) {
        const float *l = logits + t * E;
        float *p = probs + t * E, *g = grad + t * E;
        lse[t] = score_row(p, l, E, c->scoring);
        const int32_t *id = ids + t * K;
        const float *dwt = dw + t * K;
        for (int64_t e = 0; e < E; e++) g[e] = 0;
        /* weights w_j = r·p_j / Z  (Z = Σ p_j + 1e-20 when renormalising) */
        if (c->norm_topk_prob) {
            float zs = 0;
            for (int64_t j = 0; j < K; j++) zs += p[id[j]];
            double z = (double)(zs + 1e-20f), sdp = 0;
            for (int64_t j = 0; j < K; j++) sdp += (double)dwt[j] * p[id[j]];
            for (int64_t j = 0; j < K; j++)
                g[id[j]] += (float)(r * dwt[j] / z - r * sdp / (z * z));
        } else {
            for (int64_t j = 0; j < K; j++) g[id[j]] += (float)(r * dwt[j]);
        }
        double ga_base = caux * (double)E / (double)n; /* times f_e */
        double nk = (double)n * (double)K;
        if (c->scoring == FFN_MOE_SCORING_SOFTMAX) {
            if (caux != 0)
                for (int64_t e = 0; e < E; e++) g[e] += (float)(ga_base * counts[e] / nk);
            double sg = 0;
            for (int64_t e = 0; e < E; e++) sg += (double)p[e] * g[e];
            for (int64_t e = 0; e < E; e++) g[e] = (float)(p[e] * (g[e] - sg));
        } else {
            if (caux != 0) {
                /* q = p / (Σp + eps): d q_e / d p_i = (δ_ei − q_e) / (Σp + eps) */
                double sp = 0;
                for (int64_t e = 0; e < E; e++) sp += p[e];
                double den = sp + 1e-20, sgq = 0;
                for (int64_t e = 0; e < E; e++) sgq += ga_base * counts[e] / nk * (p[e] / den);
                for (int64_t e = 0; e < E; e++)
                    g[e] += (float)((ga_base * counts[e] / nk - sgq) / den);
            }
            for (int64_t e = 0; e < E; e++) g[e] = g[e] * p[e] * (1.0f - p[e]);
        }
        if (cz != 0) {
            double k2 = cz * 2.0 / (double)n * lse[t];
            for (int64_t e = 0; e < E; e++) g[e] += (float)(k2 * exp((double)l[e] - lse[t]));
        }
    }
    if (grads && grads->router_w) {
        st = ffn_gemm(m->ctx, 1, 0, E, D, n, 1.0f, grad, E, x, D, 1.0f, grads->router_w, D);
        if (st) return ffn_error_prefix(st, "gate.weight");
    }
    if (dx) {
        st = ffn_gemm(m->ctx, 0, 0, n, D, E, 1.0f, grad, E, m->router_w, D, 0.0f, dx, D);
        if (st) return ffn_error_prefix(st, "gate.weight");
        ffn_ctx_enter(m->ctx);
        /* scatter the experts' dx back, per token in slot order */
#pragma omp parallel for schedule(dynamic, 16) if (n > 16)
        for (int64_t t = 0; t < n; t++) add_slot_rows(dx + t * D, dxp, slot_row + t * K, NULL, K, D);
    }

    /* 3. Gated shared expert: y += σ(x·wsg)·shared(x). */
    if (m->shared) {
        const float *sh_out = AT(R, L.shared_out, const float);
        const float *sh_gate = AT(R, L.shared_gate, const float);
        float *dgl = lse; /* reuse: d L / d gate logit per token */
#pragma omp parallel for schedule(dynamic, 16) if (n > 16)
        for (int64_t t = 0; t < n; t++) {
            const float g = sigmoidf_(sh_gate[t]), *dyt = dy + t * D, *o = sh_out + t * D;
            float *d = dyp + t * D;
            double acc = 0;
            for (int64_t i = 0; i < D; i++) {
                d[i] = g * dyt[i];
                acc += (double)dyt[i] * o[i];
            }
            dgl[t] = (float)(acc * g * (1.0f - g));
        }
        if (grads && grads->shared_gate_w) {
            float *gw = grads->shared_gate_w;
#pragma omp parallel for schedule(dynamic, 16) if (n > 16)
            for (int64_t i = 0; i < D; i++) {
                double acc = 0;
                for (int64_t t = 0; t < n; t++) acc += (double)dgl[t] * x[t * D + i];
                gw[i] += (float)acc;
            }
        }
        st = shared_backward(m, m->shared, grads ? &grads->shared : &no_grads, "shared_expert",
                             dx, dxp, dyp, x, n, AT(saved, L.shared_saved, const float), lws,
                             W.layer_bytes, dgl);
        if (st) return st;
    }

    /* 4. DeepSeek shared experts: y += shared_experts(x). */
    if (m->shared_experts) {
        st = shared_backward(m, m->shared_experts, grads ? &grads->shared_experts : &no_grads,
                             "shared_experts", dx, dxp, dy, x, n,
                             AT(saved, L.shared_experts_saved, const float), lws, W.layer_bytes,
                             NULL);
        if (st) return st;
    }
    return FFN_OK;
}
