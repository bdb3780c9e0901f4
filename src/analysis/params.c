/* params.c -- parameter and FLOP accounting from a Hugging Face config.json
 * (include/ffn/params.h states the conventions), and the LLaMA FFN sizing
 * rule.  The config is read by the model's config.json reader into one
 * `arch` description (nn/config_hf.h), then every tensor of every layer is
 * counted from it: one counting routine for all model types,
 * so that per-layer sums and the model total cannot drift apart.
 *
 * Letters:  D hidden, F dense intermediate, Fm routed expert width, Fs
 * shared width, E experts, K top-k, V vocab, L layers, H heads, Hkv kv
 * heads, P positions, T sequence length.
 *
 * Every product goes through the checked arithmetic of a `calc`; the first
 * overflow turns the whole result into FFN_ERR_OVERFLOW. */
#include "ffn/gguf.h"
#include "ffn/layer.h"
#include "ffn/params.h"
#include "base/common.h"
#include "format/json.h"
#include "nn/config_hf.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define MAX_SIZE FFN_HF_MAX_SIZE /* any single dimension */
#define DEFAULT_SEQ_LEN 2048
#define DEFAULT_BANDWIDTH_GBS 20.0 /* a dual-channel DDR4 desktop: 20-40 GB/s */

/* The architecture, as the model's config.json reader gives it (nn/config_hf.h). */
typedef ffn_hf_arch arch;

/* ---- checked arithmetic ---------------------------------------------- */

typedef struct calc {
    int overflow;
} calc;

/* The result *r of a checked operation, or 0 with the overflow noted. */
static int64_t checked(calc *c, int overflowed, const int64_t *r) {
    if (overflowed) c->overflow = 1;
    return overflowed ? 0 : *r;
}
static int64_t mul(calc *c, int64_t a, int64_t b) {
    int64_t r;
    return checked(c, ffn_mul_i64(a, b, &r), &r);
}
static int64_t mul3(calc *c, int64_t a, int64_t b, int64_t d) { return mul(c, mul(c, a, b), d); }
static int64_t add(calc *c, int64_t a, int64_t b) {
    int64_t r;
    return checked(c, ffn_add_i64(a, b, &r), &r);
}

static int64_t sub1(calc *c, int64_t a) { return add(c, a, -1); }

/* The components of each count, in the order they are summed into total.
 * The first *_LAYER ones are per layer and add up over layers; the rest
 * (embeddings, the head) belong to the model once. */
#define PARAM_FIELD(f) offsetof(ffn_param_counts, f)
static const size_t PARAM_FIELDS[] = {
    PARAM_FIELD(attention),   PARAM_FIELD(ffn_dense),      PARAM_FIELD(ffn_routed),
    PARAM_FIELD(ffn_shared),  PARAM_FIELD(router),         PARAM_FIELD(norms),
    PARAM_FIELD(embed_token), PARAM_FIELD(embed_position), PARAM_FIELD(embed_token_type),
    PARAM_FIELD(head)};
enum { PARAM_LAYER = 6 };
#define FLOP_FIELD(f) offsetof(ffn_flop_counts, f)
static const size_t FLOP_FIELDS[] = {
    FLOP_FIELD(attention_proj), FLOP_FIELD(attention_qk), FLOP_FIELD(attention_av),
    FLOP_FIELD(ffn_dense),      FLOP_FIELD(ffn_routed),   FLOP_FIELD(ffn_shared),
    FLOP_FIELD(router),         FLOP_FIELD(head)};
enum { FLOP_LAYER = 7 };
#define N_FIELDS(a) (sizeof(a) / sizeof *(a))
/* every field but total is a component: a new field must join its table */
_Static_assert(N_FIELDS(PARAM_FIELDS) == offsetof(ffn_param_counts, total) / sizeof(int64_t),
               "PARAM_FIELDS lists every component of ffn_param_counts");
_Static_assert(N_FIELDS(FLOP_FIELDS) == offsetof(ffn_flop_counts, total) / sizeof(int64_t),
               "FLOP_FIELDS lists every component of ffn_flop_counts");

static int64_t get_field(const void *counts, size_t offset) {
    return *(const int64_t *)((const char *)counts + offset);
}

static int64_t sum_fields(calc *c, const void *counts, const size_t *offsets, size_t n) {
    int64_t t = 0;
    for (size_t i = 0; i < n; i++) t = add(c, t, get_field(counts, offsets[i]));
    return t;
}

static void acc_fields(calc *c, void *to, const void *from, const size_t *offsets, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int64_t *dst = (int64_t *)((char *)to + offsets[i]);
        *dst = add(c, *dst, get_field(from, offsets[i]));
    }
}

static void sum_params(calc *c, ffn_param_counts *p) {
    p->total = sum_fields(c, p, PARAM_FIELDS, N_FIELDS(PARAM_FIELDS));
}
static void sum_flops(calc *c, ffn_flop_counts *f) {
    f->total = sum_fields(c, f, FLOP_FIELDS, N_FIELDS(FLOP_FIELDS));
}
static void acc_params(calc *c, ffn_param_counts *to, const ffn_param_counts *p) {
    acc_fields(c, to, p, PARAM_FIELDS, PARAM_LAYER);
}
static void acc_flops(calc *c, ffn_flop_counts *to, const ffn_flop_counts *f) {
    acc_fields(c, to, f, FLOP_FIELDS, FLOP_LAYER);
}

/* ---- which layers are MoE ------------------------------------------------ */

static int layer_is_moe(const arch *a, int64_t i) {
    if (!a->E) return 0;
    switch (a->fam) {
    case FFN_HF_DEEPSEEK: return i >= a->first_k_dense && i % a->moe_freq == 0;
    case FFN_HF_LLAMA:
        if (a->mlp_only && i < a->L && a->mlp_only[i]) return 0;
        return (i + 1) % a->sparse_step == 0;
    default: return 0;
    }
}

/* ---- counting one layer -------------------------------------------------- */

/* Weights (no biases) and biases of one FFN of width f. */
static int64_t ffn_weights(calc *c, const arch *a, int64_t f) {
    return mul3(c, a->gated ? 3 : 2, a->D, f);
}
static int64_t ffn_biases(calc *c, const arch *a, int64_t f) {
    if (!a->ffn_bias) return 0;
    return add(c, mul(c, a->gated ? 2 : 1, f), a->D);
}

/* Layer i: parameters (all, active) and forward FLOPs per token at T. */
static void count_layer(calc *c, const arch *a, int64_t i, int64_t T, ffn_params_layer *out) {
    const int64_t D = a->D, H = a->H;
    memset(out, 0, sizeof *out);
    ffn_param_counts *p = &out->params;
    ffn_flop_counts *f = &out->flops;

    /* attention: weights (for FLOPs) and biases */
    int64_t attn_w, attn_b = 0, attn_norms = 0;
    if (a->mla) {
        int64_t q_w = a->q_lora ? add(c, mul(c, D, a->q_lora), mul3(c, a->q_lora, H, a->d_qk))
                                : mul3(c, D, H, a->d_qk);
        int64_t kv_a = add(c, a->kv_lora, a->rope);      /* latent + shared rope key */
        int64_t kv_w = add(c, mul(c, D, kv_a), mul3(c, a->kv_lora, H, add(c, a->nope, a->d_v)));
        int64_t o_w = mul3(c, H, a->d_v, D);
        attn_w = add(c, add(c, q_w, kv_w), o_w);
        if (a->qkv_bias) attn_b = add(c, add(c, attn_b, a->q_lora), kv_a); /* q_a and kv_a biases */
        if (a->o_bias) attn_b = add(c, attn_b, D);
        attn_norms = add(c, a->q_lora, a->kv_lora);       /* q_a_layernorm, kv_a_layernorm */
    } else {
        int64_t q = mul(c, H, a->d_qk), kv = mul(c, a->Hkv, a->d_qk);
        attn_w = add(c, mul(c, D, add(c, q, mul(c, 2, kv))), mul(c, q, D));
        if (a->qkv_bias) attn_b = add(c, q, mul(c, 2, kv));
        if (a->o_bias) attn_b = add(c, attn_b, D);
        if (a->rel_pos) /* bert distance_embedding: a lookup, no FLOPs counted */
            attn_b = add(c, attn_b, mul(c, sub1(c, mul(c, 2, a->P)), a->d_qk));
    }
    p->attention = add(c, attn_w, attn_b);
    f->attention_proj = mul(c, 2, attn_w);
    f->attention_qk = mul(c, mul3(c, 2, H, a->d_qk), T);
    f->attention_av = mul(c, mul3(c, 2, H, a->d_v), T);

    /* two norms per layer (before/after attention), plus MLA's inner norms */
    p->norms = add(c, add(c, mul(c, a->norm_bias ? 4 : 2, D), attn_norms), a->qk_norm);
    p->norms = add(c, p->norms, a->post_norms); /* gemma2/3's norms on the sublayer outputs */

    /* the FFN */
    out->active = *p;
    ffn_param_counts *act = &out->active;
    if (layer_is_moe(a, i)) {
        out->is_moe = 1;
        int64_t expert = add(c, ffn_weights(c, a, a->Fm), ffn_biases(c, a, a->Fm));
        p->ffn_routed = mul(c, a->E, expert);
        act->ffn_routed = mul(c, a->K, expert);
        f->ffn_routed = mul3(c, 2, a->K, ffn_weights(c, a, a->Fm));
        int64_t fs = a->Fs ? a->Fs : mul(c, a->n_shared, a->Fm);
        if (fs) {
            int64_t sw = ffn_weights(c, a, fs);
            if (a->Fs) sw = add(c, sw, D); /* qwen2_moe: shared_expert_gate (1, D) */
            p->ffn_shared = act->ffn_shared = add(c, sw, ffn_biases(c, a, fs));
            f->ffn_shared = mul(c, 2, sw);
        }
        p->router = act->router = add(c, mul(c, a->E, D), a->e_bias ? a->E : 0);
        f->router = mul3(c, 2, a->E, D);
    } else {
        p->ffn_dense = act->ffn_dense =
            add(c, ffn_weights(c, a, a->F), ffn_biases(c, a, a->F));
        f->ffn_dense = mul(c, 2, ffn_weights(c, a, a->F));
    }
    sum_params(c, p);
    sum_params(c, act);
    sum_flops(c, f);
}

/* ---- the whole model ----------------------------------------------------- */

static const char *glu_name(const char *act) {
    if (!strcmp(act, "silu") || !strcmp(act, "swish")) return "SwiGLU";
    if (!strncmp(act, "gelu", 4)) return "GEGLU";
    if (!strcmp(act, "relu")) return "ReGLU";
    if (!strcmp(act, "sigmoid")) return "GLU";
    if (!strcmp(act, "linear")) return "Bilinear";
    return "gated";
}

/* Memory estimates (params.h, Memory): weights per format, the KV cache,
 * the bandwidth bound on decoding. */
static void estimate_memory(calc *c, const arch *a, double bw_gbs, ffn_params_report *r) {
    if (a->fam == FFN_HF_BERT) r->kv_elements_per_token = 0; /* an encoder keeps no cache */
    else if (a->mla) r->kv_elements_per_token = mul(c, a->L, add(c, a->kv_lora, a->rope));
    else r->kv_elements_per_token = mul3(c, a->L, a->Hkv, add(c, a->d_qk, a->d_v));
    r->kv_bytes_per_token_f16 = mul(c, r->kv_elements_per_token, 2);
    r->kv_bytes_per_token_f32 = mul(c, r->kv_elements_per_token, 4);
    r->kv_bytes_f16 = mul(c, r->kv_bytes_per_token_f16, r->seq_len);
    r->bandwidth_gbs = bw_gbs;
    /* a token looks up one row of each embedding table; a tied head reads the token table */
    const ffn_param_counts *p = &r->params, *act = &r->active;
    int64_t read = act->total - act->embed_token - act->embed_position - act->embed_token_type;
    if (a->tied) read = add(c, read, act->embed_token);
    ffn_ggml_type fmts[FFN_PARAMS_N_FORMATS];
    int nf = ffn_ggml_types(FFN_GGML_COMPUTES, fmts, FFN_PARAMS_N_FORMATS);
    r->n_formats = nf < FFN_PARAMS_N_FORMATS ? nf : FFN_PARAMS_N_FORMATS;
    for (int i = 0; i < r->n_formats; i++) {
        ffn_params_memory *m = &r->memory[i];
        const double block = (double)ffn_ggml_block_size(fmts[i]);
        const double bytes = (double)ffn_ggml_type_size(fmts[i]) / block;
        const int quant = block > 1; /* norm weights stay f32 */
        const double norm_bytes = quant ? 4.0 : bytes;
        snprintf(m->format, sizeof m->format, "%s", ffn_ggml_type_name(fmts[i]));
        m->bits_per_weight = 8.0 * bytes;
        m->weight_bytes = (int64_t)ceil((double)(p->total - p->norms) * bytes +
                                        (double)p->norms * norm_bytes);
        m->read_bytes_per_token =
            (int64_t)ceil((double)(read - act->norms) * bytes + (double)act->norms * norm_bytes) +
            r->kv_bytes_f16;
        m->decode_tokens_per_s = m->read_bytes_per_token > 0
                                     ? bw_gbs * 1e9 / (double)m->read_bytes_per_token : 0.0;
    }
}

static ffn_status account(const arch *a, const char *what, int64_t T, double bw_gbs,
                          ffn_params_report **out) {
    calc c = {0};
    for (int64_t i = 0; i < a->L && !a->F; i++) /* qwen2_moe: F is needed only by dense layers */
        if (!layer_is_moe(a, i))
            return ffn_error(FFN_ERR_MISSING,
                             "%s: intermediate_size: required field is missing (layer %lld has a "
                             "dense FFN)", what, (long long)i);
    ffn_params_report *r = calloc(1, sizeof *r);
    if (!r) return ffn_error(FFN_ERR_NOMEM, "%s: out of memory", what);
    r->layers = calloc((size_t)a->L, sizeof *r->layers);
    if (!r->layers) {
        free(r);
        return ffn_error(FFN_ERR_NOMEM, "%s: out of memory for %lld layers", what, (long long)a->L);
    }
    r->n_layer_entries = r->n_layers = a->L;
    snprintf(r->model_type, sizeof r->model_type, "%s", a->model_type);
    if (a->gated)
        snprintf(r->ffn_kind, sizeof r->ffn_kind, "gated (%.20s: %s)", a->act, glu_name(a->act));
    else
        snprintf(r->ffn_kind, sizeof r->ffn_kind, "dense (%.30s)", a->act);
    snprintf(r->attention_kind, sizeof r->attention_kind, "%s",
             a->mla ? "MLA" : a->Hkv == a->H ? "MHA" : a->Hkv == 1 ? "MQA" : "GQA");
    r->hidden_size = a->D;
    r->vocab_size = a->V;
    r->n_heads = a->H;
    r->n_kv_heads = a->Hkv;
    r->head_dim_qk = a->d_qk;
    r->head_dim_v = a->d_v;
    r->tied_embeddings = a->tied;
    r->seq_len = T;

    for (int64_t i = 0; i < a->L; i++) {
        ffn_params_layer *l = &r->layers[i];
        count_layer(&c, a, i, T, l);
        acc_params(&c, &r->params, &l->params);
        acc_params(&c, &r->active, &l->active);
        acc_flops(&c, &r->forward, &l->flops);
        if (l->is_moe) r->n_moe_layers++;
    }
    if (r->n_moe_layers < a->L) r->intermediate_size = a->F;
    if (r->n_moe_layers) {
        r->moe_intermediate_size = a->Fm;
        r->shared_intermediate_size = a->Fs ? a->Fs : mul(&c, a->n_shared, a->Fm);
        r->n_experts = a->E;
        r->top_k = a->K;
    }

    /* embeddings, head, the norms outside the layers */
    ffn_param_counts m = {0};
    m.embed_token = mul(&c, a->V, a->D);
    m.embed_position = mul(&c, a->P, a->D);
    m.embed_token_type = mul(&c, a->type_vocab, a->D);
    if (a->fam == FFN_HF_BERT) {
        m.head = add(&c, mul(&c, a->D, a->D), a->D); /* pooler dense with bias */
        m.norms = mul(&c, 2, a->D);                  /* embeddings LayerNorm (post-LN: no final) */
    } else {
        m.head = a->tied ? 0 : mul(&c, a->V, a->D);
        m.norms = mul(&c, a->norm_bias ? 2 : 1, a->D); /* final norm */
        r->forward.head = mul3(&c, 2, a->V, a->D);     /* the logits, tied or not */
    }
    acc_params(&c, &r->params, &m);
    acc_params(&c, &r->active, &m);
    r->params.embed_token = r->active.embed_token = m.embed_token;
    r->params.embed_position = r->active.embed_position = m.embed_position;
    r->params.embed_token_type = r->active.embed_token_type = m.embed_token_type;
    r->params.head = r->active.head = m.head;
    sum_params(&c, &r->params);
    sum_params(&c, &r->active);
    sum_flops(&c, &r->forward);

    /* DeepSeek's "activated" leaves out tables used only as lookups */
    r->active_excl_embeddings = r->active.total - m.embed_position - m.embed_token_type -
                                (a->tied ? 0 : m.embed_token);

    /* deepseek_v3 MTP: enorm, hnorm (D each), eh_proj (D, 2D), one more
     * decoder layer, shared_head.norm (D); embedding and head shared. */
    for (int64_t j = 0; j < a->mtp_layers; j++) {
        ffn_params_layer extra;
        count_layer(&c, a, a->L + j, T, &extra);
        r->mtp_params = add(&c, r->mtp_params,
                            add(&c, extra.params.total,
                                add(&c, mul3(&c, 2, a->D, a->D), mul(&c, 3, a->D))));
    }

    int64_t ffn_all = r->params.ffn_dense + r->params.ffn_routed + r->params.ffn_shared +
                      r->params.router;
    int64_t ffn_act = r->active.ffn_dense + r->active.ffn_routed + r->active.ffn_shared +
                      r->active.router;
    r->ffn_share = (double)ffn_all / (double)r->params.total;
    r->ffn_share_active = (double)ffn_act / (double)r->active.total;
    r->expansion_ratio = r->intermediate_size ? (double)r->intermediate_size / (double)a->D : 0;
    r->moe_expansion_ratio =
        r->moe_intermediate_size ? (double)r->moe_intermediate_size / (double)a->D : 0;

    int64_t attn_scores = add(&c, r->forward.attention_qk, r->forward.attention_av);
    r->training_flops = add(&c, mul(&c, 6, r->active.total), mul(&c, 3, attn_scores));
    r->training_flops_matmul = mul(&c, 3, r->forward.total);
    estimate_memory(&c, a, bw_gbs, r);

    if (c.overflow) {
        ffn_params_report_free(r);
        return ffn_error(FFN_ERR_OVERFLOW,
                         "%s: the parameter or FLOP count overflows 64 bits (hidden size %lld, "
                         "%lld layers, vocab %lld, seq_len %lld)",
                         what, (long long)a->D, (long long)a->L, (long long)a->V, (long long)T);
    }
    *out = r;
    return FFN_OK;
}

/* ---- public entry points ------------------------------------------------- */

/* the file at path, or (path NULL) text of len bytes */
static ffn_status from_config(const char *path, const char *text, size_t len, const char *what,
                              const ffn_params_options *opt, ffn_params_report **out) {
    int64_t T = opt && opt->seq_len ? opt->seq_len : DEFAULT_SEQ_LEN;
    if (T < 1 || T > MAX_SIZE)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: seq_len: expected 1..%lld, found %lld", what,
                         (long long)MAX_SIZE, (long long)T);
    const double bw = opt && opt->bandwidth_gbs != 0.0 ? opt->bandwidth_gbs : DEFAULT_BANDWIDTH_GBS;
    if (!(bw > 0.0) || !(bw <= 1e6))
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: bandwidth_gbs: expected 0 < GB/s <= 1e6, found %g",
                         what, bw);
    arch a;
    json_doc *doc = NULL;
    ffn_status st = ffn_config_hf_read_arch(path, text, len, what, &doc, &a);
    if (st == FFN_OK) st = account(&a, what, T, bw, out);
    free(a.mlp_only);
    json_free(doc);
    return st;
}

ffn_status ffn_params_from_json(const char *text, size_t len, const char *what,
                                const ffn_params_options *opt, ffn_params_report **out) {
    if (!out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_params_from_json: out is NULL");
    *out = NULL;
    return from_config(NULL, text, len, what ? what : "config", opt, out);
}

ffn_status ffn_params_from_config(const char *path, const ffn_params_options *opt,
                                  ffn_params_report **out) {
    if (!out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_params_from_config: out is NULL");
    *out = NULL;
    if (!path) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_params_from_config: path is NULL");
    return from_config(path, NULL, 0, path, opt, out);
}

void ffn_params_report_free(ffn_params_report *r) {
    if (!r) return;
    free(r->layers);
    free(r);
}

/* ---- the LLaMA sizing rule ------------------------------------------------ */

ffn_status ffn_params_llama_intermediate(int64_t hidden, int64_t multiple_of,
                                         double ffn_dim_multiplier, int64_t *out) {
    if (!out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_params_llama_intermediate: out is NULL");
    if (hidden < 1 || hidden > MAX_SIZE)
        return ffn_error(FFN_ERR_INVALID_ARG, "hidden: expected 1..%lld, found %lld",
                         (long long)MAX_SIZE, (long long)hidden);
    if (multiple_of < 1 || multiple_of > MAX_SIZE)
        return ffn_error(FFN_ERR_INVALID_ARG, "multiple_of: expected 1..%lld, found %lld",
                         (long long)MAX_SIZE, (long long)multiple_of);
    if (isnan(ffn_dim_multiplier) || ffn_dim_multiplier > 1e6)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_dim_multiplier: expected a number in (0, 1e6], found %g",
                         ffn_dim_multiplier);
    int64_t f = 8 * hidden / 3; /* int(2 · (4·D) / 3); exact in integers for D < 2^40 */
    if (ffn_dim_multiplier > 0) f = (int64_t)floor(ffn_dim_multiplier * (double)f);
    if (f < 1) f = 1;
    int64_t rounded = (f + multiple_of - 1) / multiple_of * multiple_of;
    *out = rounded;
    return FFN_OK;
}
