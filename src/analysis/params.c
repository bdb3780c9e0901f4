/* params.c -- parameter and FLOP accounting from a Hugging Face config.json
 * (include/ffn/params.h states the conventions), and the LLaMA FFN sizing
 * rule.  Reads the config into one `arch` description, then counts every
 * tensor of every layer from it: one counting routine for all model types,
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

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define MAX_LAYERS 100000          /* bounds the per-layer table we allocate */
#define MAX_SIZE ((int64_t)1 << 40) /* any single dimension */
#define DEFAULT_SEQ_LEN 2048
#define DEFAULT_BANDWIDTH_GBS 20.0 /* a dual-channel DDR4 desktop: 20-40 GB/s */

/* ---- the architecture, as read from config.json ------------------------ */

typedef enum family { FAM_LLAMA, FAM_GPT2, FAM_BERT, FAM_DEEPSEEK } family;

typedef struct arch {
    family fam;
    const char *model_type;
    const char *act;
    int64_t D, L, V, H, Hkv, d_qk, d_v;
    int64_t F;                 /* dense intermediate (0: absent) */
    int gated, ffn_bias;       /* FFN shape */
    int qkv_bias, o_bias;      /* attention biases */
    int norm_bias;             /* LayerNorm (weight + bias) rather than RMSNorm */
    int tied;
    int64_t qk_norm;           /* q_norm + k_norm weights per layer (qwen3 2·d, olmoe (H + Hkv)·d) */
    int64_t P, type_vocab;     /* gpt2 / bert embeddings */
    int64_t rel_pos;           /* bert relative_key(_query): distance embedding (2P-1, d) per layer */
    /* MoE */
    int64_t E, K, Fm;
    int64_t Fs;                /* qwen2_moe shared expert width (0: none) */
    int64_t n_shared;          /* deepseek shared experts (width n_shared·Fm) */
    int e_bias;                /* deepseek_v3 e_score_correction_bias */
    int64_t first_k_dense, moe_freq, sparse_step;
    const json_value *mlp_only_layers;
    unsigned char *mlp_only;   /* [L] 1 = dense by mlp_only_layers (built from the array) */
    /* MLA */
    int mla;
    int64_t q_lora, kv_lora, nope, rope;
    int64_t mtp_layers;
} arch;

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

/* ---- reading fields ------------------------------------------------------ */

/* An integer field in [lo, hi]; absent (or null) gives `dflt` unless
 * required.  Messages name the file and the field. */
static ffn_status get_int(const json_value *root, const char *what, const char *key, int required,
                          int64_t dflt, int64_t lo, int64_t hi, int64_t *out) {
    int64_t v = dflt;
    ffn_status st = json_get_i64(root, key, required, what, &v);
    if (st != FFN_OK) return st;
    const json_value *present = json_get(root, key);
    if (!present || present->type == JSON_NULL) { /* the default, unchecked: 0 may mean "none" */
        *out = dflt;
        return FFN_OK;
    }
    if (v < lo || v > hi)
        return ffn_error(FFN_ERR_CONFIG, "%s: %s: expected an integer in [%lld, %lld], found %lld",
                         what, key, (long long)lo, (long long)hi, (long long)v);
    *out = v;
    return FFN_OK;
}

static ffn_status get_bool(const json_value *root, const char *what, const char *key, int dflt,
                           int *out) {
    int v = dflt;
    ffn_status st = json_get_bool(root, key, 0, what, &v);
    if (st != FFN_OK) return st;
    *out = v;
    return FFN_OK;
}

#define TRY(expr)                          \
    do {                                   \
        ffn_status st_ = (expr);           \
        if (st_ != FFN_OK) return st_;     \
    } while (0)

/* The fields that llama, bert and deepseek configs name alike:
 * hidden_act (default `act`), hidden_size, num_hidden_layers, vocab_size. */
static ffn_status read_hf_common(const json_value *r, const char *what, arch *a, const char *act) {
    a->act = act;
    TRY(json_get_str(r, "hidden_act", 0, what, &a->act));
    TRY(get_int(r, what, "hidden_size", 1, 0, 1, MAX_SIZE, &a->D));
    TRY(get_int(r, what, "num_hidden_layers", 1, 0, 1, MAX_LAYERS, &a->L));
    TRY(get_int(r, what, "vocab_size", 1, 0, 1, MAX_SIZE, &a->V));
    return FFN_OK;
}

/* Attention heads: head_dim given, or D / H exactly. */
static ffn_status read_heads(const json_value *r, const char *what, arch *a, const char *h_key,
                             const char *kv_key) {
    TRY(get_int(r, what, h_key, 1, 0, 1, MAX_SIZE, &a->H));
    a->Hkv = a->H;
    if (kv_key) TRY(get_int(r, what, kv_key, 0, a->H, 1, MAX_SIZE, &a->Hkv));
    if (a->H % a->Hkv)
        return ffn_error(FFN_ERR_CONFIG, "%s: %s (%lld) must be a multiple of %s (%lld)", what,
                         h_key, (long long)a->H, kv_key, (long long)a->Hkv);
    /* head_dim absent: Qwen3Config and GemmaConfig default to 128 and 256 */
    const char *t = a->model_type;
    int64_t hd = !strcmp(t, "qwen3") ? 128 : !strcmp(t, "gemma") ? 256 : 0;
    if (a->fam == FAM_LLAMA) TRY(get_int(r, what, "head_dim", 0, hd, 1, MAX_SIZE, &hd));
    if (!hd) {
        if (a->D % a->H)
            return ffn_error(FFN_ERR_CONFIG,
                             "%s: hidden size %lld is not a multiple of %s %lld (and no head_dim)",
                             what, (long long)a->D, h_key, (long long)a->H);
        hd = a->D / a->H;
    }
    a->d_qk = a->d_v = hd;
    return FFN_OK;
}

/* llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, gemma, phi3, olmoe:
 * RMSNorm, gated FFN, RoPE. */
static ffn_status read_llama_family(const json_value *r, const char *what, arch *a) {
    const char *t = a->model_type;
    const int gemma = !strcmp(t, "gemma");
    a->fam = FAM_LLAMA;
    a->gated = 1;
    TRY(read_hf_common(r, what, a, "silu"));
    if (gemma) { /* its MLP uses hidden_activation (gelu_pytorch_tanh when absent) */
        a->act = "gelu_pytorch_tanh";
        TRY(json_get_str(r, "hidden_activation", 0, what, &a->act));
    }
    TRY(read_heads(r, what, a, "num_attention_heads", "num_key_value_heads"));
    TRY(get_bool(r, what, "tie_word_embeddings", gemma, &a->tied));
    if (!strcmp(t, "qwen3")) a->qk_norm = 2 * a->d_qk;                 /* per head, shared */
    if (!strcmp(t, "olmoe")) a->qk_norm = (a->H + a->Hkv) * a->d_qk;  /* whole projections */
    if (!strcmp(t, "llama") || !strcmp(t, "qwen3")) {
        int ab = 0, mb = 0;
        TRY(get_bool(r, what, "attention_bias", 0, &ab));
        TRY(get_bool(r, what, "mlp_bias", 0, &mb));
        a->qkv_bias = a->o_bias = ab;
        a->ffn_bias = mb;
    } else if (!strcmp(t, "qwen2") || !strcmp(t, "qwen2_moe")) {
        a->qkv_bias = 1; /* q/k/v carry biases, o does not */
    }
    if (!strcmp(t, "mixtral")) {
        /* every layer is a block_sparse_moe of E experts of width intermediate_size */
        TRY(get_int(r, what, "num_local_experts", 1, 0, 1, MAX_SIZE, &a->E));
        TRY(get_int(r, what, "num_experts_per_tok", 1, 0, 1, MAX_SIZE, &a->K));
        TRY(get_int(r, what, "intermediate_size", 1, 0, 1, MAX_SIZE, &a->Fm));
        a->sparse_step = 1;
    } else if (!strcmp(t, "olmoe")) {
        /* every layer is MoE; the experts are intermediate_size wide */
        TRY(get_int(r, what, "num_experts", 1, 0, 1, MAX_SIZE, &a->E));
        TRY(get_int(r, what, "num_experts_per_tok", 1, 0, 1, MAX_SIZE, &a->K));
        TRY(get_int(r, what, "intermediate_size", 1, 0, 1, MAX_SIZE, &a->Fm));
        a->sparse_step = 1;
    } else if (!strcmp(t, "qwen2_moe")) {
        TRY(get_int(r, what, "num_experts", 1, 0, 0, MAX_SIZE, &a->E));
        TRY(get_int(r, what, "num_experts_per_tok", 1, 0, 1, MAX_SIZE, &a->K));
        TRY(get_int(r, what, "moe_intermediate_size", 1, 0, 1, MAX_SIZE, &a->Fm));
        TRY(get_int(r, what, "shared_expert_intermediate_size", 1, 0, 0, MAX_SIZE, &a->Fs));
        TRY(get_int(r, what, "decoder_sparse_step", 0, 1, 1, MAX_LAYERS, &a->sparse_step));
        TRY(get_int(r, what, "intermediate_size", 0, 0, 1, MAX_SIZE, &a->F));
        a->mlp_only_layers = json_get(r, "mlp_only_layers");
        if (a->mlp_only_layers && a->mlp_only_layers->type == JSON_NULL) a->mlp_only_layers = NULL;
    } else {
        TRY(get_int(r, what, "intermediate_size", 1, 0, 1, MAX_SIZE, &a->F));
    }
    return FFN_OK;
}

static ffn_status read_gpt2(const json_value *r, const char *what, arch *a) {
    a->fam = FAM_GPT2;
    a->act = "gelu_new";
    TRY(json_get_str(r, "activation_function", 0, what, &a->act));
    TRY(get_int(r, what, "n_embd", 1, 0, 1, MAX_SIZE, &a->D));
    TRY(get_int(r, what, "n_layer", 1, 0, 1, MAX_LAYERS, &a->L));
    TRY(get_int(r, what, "vocab_size", 1, 0, 1, MAX_SIZE, &a->V));
    TRY(get_int(r, what, "n_positions", 1, 0, 1, MAX_SIZE, &a->P));
    TRY(read_heads(r, what, a, "n_head", NULL));
    int64_t four_d = 0;
    if (__builtin_mul_overflow(a->D, 4, &four_d)) four_d = MAX_SIZE + 1;
    TRY(get_int(r, what, "n_inner", 0, four_d, 1, MAX_SIZE, &a->F)); /* null: 4·n_embd */
    a->ffn_bias = a->qkv_bias = a->o_bias = a->norm_bias = 1;
    TRY(get_bool(r, what, "tie_word_embeddings", 1, &a->tied)); /* lm_head is wte */
    return FFN_OK;
}

static ffn_status read_bert(const json_value *r, const char *what, arch *a) {
    a->fam = FAM_BERT;
    TRY(read_hf_common(r, what, a, "gelu"));
    TRY(get_int(r, what, "intermediate_size", 1, 0, 1, MAX_SIZE, &a->F));
    TRY(get_int(r, what, "max_position_embeddings", 1, 0, 1, MAX_SIZE, &a->P));
    TRY(get_int(r, what, "type_vocab_size", 0, 2, 0, MAX_SIZE, &a->type_vocab));
    TRY(read_heads(r, what, a, "num_attention_heads", NULL));
    const char *pos = "absolute";
    TRY(json_get_str(r, "position_embedding_type", 0, what, &pos));
    if (!strcmp(pos, "relative_key") || !strcmp(pos, "relative_key_query"))
        a->rel_pos = 1;
    else if (strcmp(pos, "absolute"))
        return ffn_error(FFN_ERR_CONFIG,
                         "%s: position_embedding_type: unknown value '%s' (expected absolute, "
                         "relative_key or relative_key_query)", what, pos);
    a->ffn_bias = a->qkv_bias = a->o_bias = a->norm_bias = 1;
    a->tied = 0; /* BertModel has no LM head; its head is the pooler */
    return FFN_OK;
}

/* deepseek_v2 / deepseek_v3: MLA attention, DeepSeekMoE with shared experts. */
static ffn_status read_deepseek(const json_value *r, const char *what, arch *a) {
    int v3 = !strcmp(a->model_type, "deepseek_v3");
    a->fam = FAM_DEEPSEEK;
    a->gated = 1;
    a->mla = 1;
    TRY(read_hf_common(r, what, a, "silu"));
    TRY(get_int(r, what, "intermediate_size", 1, 0, 1, MAX_SIZE, &a->F));
    TRY(get_int(r, what, "num_attention_heads", 1, 0, 1, MAX_SIZE, &a->H));
    a->Hkv = a->H; /* MLA: every head has its own keys, decompressed from the latent */
    TRY(get_int(r, what, "q_lora_rank", 0, 0, 1, MAX_SIZE, &a->q_lora)); /* null: no q compression */
    TRY(get_int(r, what, "kv_lora_rank", 1, 0, 1, MAX_SIZE, &a->kv_lora));
    TRY(get_int(r, what, "qk_nope_head_dim", 1, 0, 0, MAX_SIZE, &a->nope));
    TRY(get_int(r, what, "qk_rope_head_dim", 1, 0, 0, MAX_SIZE, &a->rope));
    TRY(get_int(r, what, "v_head_dim", 1, 0, 1, MAX_SIZE, &a->d_v));
    a->d_qk = a->nope + a->rope;
    if (a->d_qk <= 0)
        return ffn_error(FFN_ERR_CONFIG, "%s: qk_nope_head_dim + qk_rope_head_dim must be > 0",
                         what);
    int ab = 0;
    TRY(get_bool(r, what, "attention_bias", 0, &ab));
    a->qkv_bias = a->o_bias = ab;
    TRY(get_bool(r, what, "tie_word_embeddings", 0, &a->tied));
    /* n_routed_experts null: a dense model */
    TRY(get_int(r, what, "n_routed_experts", 0, 0, 1, MAX_SIZE, &a->E));
    if (a->E) {
        TRY(get_int(r, what, "num_experts_per_tok", 1, 0, 1, MAX_SIZE, &a->K));
        TRY(get_int(r, what, "moe_intermediate_size", 1, 0, 1, MAX_SIZE, &a->Fm));
        TRY(get_int(r, what, "n_shared_experts", 0, 0, 0, MAX_SIZE, &a->n_shared));
        TRY(get_int(r, what, "first_k_dense_replace", 0, 0, 0, MAX_LAYERS, &a->first_k_dense));
        TRY(get_int(r, what, "moe_layer_freq", 0, 1, 1, MAX_LAYERS, &a->moe_freq));
        /* the bias that corrects expert scores for selection (aux-loss-free balancing)
         * exists with topk_method "noaux_tc", V3's method */
        const char *topk = v3 ? "noaux_tc" : "greedy";
        TRY(json_get_str(r, "topk_method", 0, what, &topk));
        a->e_bias = !strcmp(topk, "noaux_tc");
    }
    if (v3) TRY(get_int(r, what, "num_nextn_predict_layers", 0, 0, 0, 64, &a->mtp_layers));
    return FFN_OK;
}

static ffn_status read_arch(const json_value *r, const char *what, arch *a) {
    if (!r || r->type != JSON_OBJECT)
        return ffn_error(FFN_ERR_CONFIG, "%s: expected a JSON object at the top level", what);
    memset(a, 0, sizeof *a);
    TRY(json_get_str(r, "model_type", 1, what, &a->model_type));
    const char *t = a->model_type;
    if (!strcmp(t, "llama") || !strcmp(t, "mistral") || !strcmp(t, "mixtral") ||
        !strcmp(t, "qwen2") || !strcmp(t, "qwen2_moe") || !strcmp(t, "qwen3") ||
        !strcmp(t, "gemma") || !strcmp(t, "phi3") || !strcmp(t, "olmoe"))
        TRY(read_llama_family(r, what, a));
    else if (!strcmp(t, "gpt2"))
        TRY(read_gpt2(r, what, a));
    else if (!strcmp(t, "bert"))
        TRY(read_bert(r, what, a));
    else if (!strcmp(t, "deepseek_v2") || !strcmp(t, "deepseek_v3"))
        TRY(read_deepseek(r, what, a));
    else
        return ffn_error(FFN_ERR_CONFIG,
                         "%s: model_type: unknown value '%s' (expected one of llama, mistral, "
                         "mixtral, qwen2, qwen2_moe, qwen3, gemma, phi3, olmoe, gpt2, bert, "
                         "deepseek_v2, deepseek_v3)",
                         what, t);
    if (a->E && a->K > a->E)
        return ffn_error(FFN_ERR_CONFIG,
                         "%s: num_experts_per_tok (%lld) exceeds the number of experts (%lld)",
                         what, (long long)a->K, (long long)a->E);
    if (a->mlp_only_layers) {
        const json_value *m = a->mlp_only_layers;
        if (m->type != JSON_ARRAY)
            return ffn_error(FFN_ERR_CONFIG, "%s: mlp_only_layers: expected an array of layer indices",
                             what);
        for (size_t i = 0; i < m->length; i++) {
            const json_value *x = m->items[i];
            if (x->type != JSON_NUMBER || !x->is_integer || x->integer < 0 || x->integer >= a->L)
                return ffn_error(FFN_ERR_CONFIG,
                                 "%s: mlp_only_layers[%zu]: expected a layer index in [0, %lld)",
                                 what, i, (long long)a->L);
        }
    }
    return FFN_OK;
}

/* ---- which layers are MoE ------------------------------------------------ */

static int layer_is_moe(const arch *a, int64_t i) {
    if (!a->E) return 0;
    switch (a->fam) {
    case FAM_DEEPSEEK: return i >= a->first_k_dense && i % a->moe_freq == 0;
    case FAM_LLAMA:
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
    if (a->fam == FAM_BERT) r->kv_elements_per_token = 0; /* an encoder keeps no cache */
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
    if (a->fam == FAM_BERT) {
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

static ffn_status from_root(const json_value *root, const char *what,
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
    TRY(read_arch(root, what, &a));
    ffn_status st = FFN_OK;
    if (a.mlp_only_layers && a.mlp_only_layers->length) {
        /* a mask, so that a long (even repetitive) list costs O(L + length) */
        a.mlp_only = calloc((size_t)a.L, 1);
        if (!a.mlp_only) return ffn_error(FFN_ERR_NOMEM, "%s: out of memory", what);
        for (size_t j = 0; j < a.mlp_only_layers->length; j++)
            a.mlp_only[a.mlp_only_layers->items[j]->integer] = 1;
    }
    st = account(&a, what, T, bw, out);
    free(a.mlp_only);
    return st;
}

ffn_status ffn_params_from_json(const char *text, size_t len, const char *what,
                                const ffn_params_options *opt, ffn_params_report **out) {
    if (!out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_params_from_json: out is NULL");
    *out = NULL;
    if (!what) what = "config";
    json_doc *doc = NULL;
    TRY(json_parse(text, len, what, &doc));
    ffn_status st = from_root(json_root(doc), what, opt, out);
    json_free(doc);
    return st;
}

ffn_status ffn_params_from_config(const char *path, const ffn_params_options *opt,
                                  ffn_params_report **out) {
    if (!out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_params_from_config: out is NULL");
    *out = NULL;
    if (!path) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_params_from_config: path is NULL");
    json_doc *doc = NULL;
    TRY(json_parse_file(path, &doc));
    ffn_status st = from_root(json_root(doc), path, opt, out);
    json_free(doc);
    return st;
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
