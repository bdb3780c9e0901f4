/* gguf_model.c -- GGUF files as ffn models, both ways: the architectures
 * llama (Llama, Mistral; Mixtral is llama with {arch}.expert_count; Llama
 * 3.1/3.2's rope_freqs.weight as llama3 RoPE scaling), qwen2, qwen2moe,
 * qwen3, qwen3moe, olmoe, gemma, phi3, gpt2 and starcoder2 (gg_archs: what
 * each one's files hold, as llama.cpp's src/models/<arch>.cpp reads them),
 * read into an ffn_model and written from one; and the dispatch that lets
 * a MODEL path be a GGUF file beside everything ffn_checkpoint_load_model
 * reads.
 *
 * One table of names (gg_plan) serves both directions: built from a
 * configuration, it lists every GGUF tensor the model has, its dims
 * (fastest first: a W[out][in] is ne = {in, out}; stacked experts are
 * {in, out, E}) and the model tensor(s) it holds.  Reading checks the
 * file against the plan before the model is allocated (so metadata
 * cannot ask for more than the file holds), then places each tensor with
 * place_tensor; writing walks the same plan over the model.
 *
 * RoPE: llama.cpp's converter permutes llama's q/k rows (and biases) so
 * that its RoPE may rotate consecutive pairs; every other architecture keeps
 * the Hugging Face (rotate_half) order.  Fused file tensors (attn_qkv:
 * q | k | v rows, phi3's ffn_up: gate | up) fill the model's adjacent
 * tensors.  Loaded models are always
 * FFN_ROPE_HALF: llama's rows are permuted back on load and forth again
 * on write (row 2j+h of a head <-> row h·Dh/2 + j).
 *
 * Letters: V vocab, D hidden, F ffn, Fe expert ffn, Fs shared-expert ffn,
 * H heads, G kv heads, Dh head dim, E experts, L layers. */
#include "ffn/checkpoint.h"
#include "ffn/gguf.h"
#include "ffn/quant.h"
#include "ffn/safetensors.h"
#include "ffn/model.h"
#include "ffn/vocab.h"
#include "base/common.h"
#include "base/open.h"
#include "load/checkpoint_internal.h"
#include "data/vocab_internal.h"
#include "load/gguf_model.h"
#include "nn/model_internal.h"
#include "kernels/qgemm.h"
#include "kernels/types.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the architectures --------------------------------------------------- */

/* What each architecture's files hold, as llama.cpp reads them
 * (src/models/<arch>.cpp there).  All but llama rotate_half (NEOX) pairs. */
typedef struct gg_arch {
    const char *name;
    int permute;      /* q/k rows interleaved in the file (llama) */
    int qkv_bias;     /* 1: q/k/v biases always written (qwen2*; zeros without) */
    int moe;          /* 0: dense only, 1: MoE only, 2: either (llama: Mixtral) */
    int shared;       /* a shared expert (qwen2moe) */
    ffn_qk_norm qk_norm;
    int norm_topk;    /* the top-k router weights renormalised */
    int gemma;        /* norms (1 + w) in the file, embeddings times sqrt(D), GeGLU (tanh), tied */
    int experts_ff;   /* experts sized by feed_forward_length (llama, olmoe) */
    int layer_norm;   /* LayerNorm with biases, eps attention.layer_norm_epsilon (gpt2, starcoder2) */
    int dense;        /* ffn_up / ffn_down with biases, GELU (tanh) (gpt2, starcoder2) */
    int fused;        /* 1: attn_qkv (gpt2, phi3); 2: also ffn_up = gate | up (phi3) */
    int positions;    /* learned position_embd, no RoPE (gpt2) */
    int post;         /* 1: post_attention_norm and post_ffw_norm (gemma2, gemma3), soft-capping,
                         sliding-window layers */
} gg_arch;

static const gg_arch gg_archs[] = {
    {"llama", 1, 0, 2, 0, FFN_QK_NORM_NONE, 1, 0, 1, 0, 0, 0, 0, 0},
    {"qwen2", 0, 1, 0, 0, FFN_QK_NORM_NONE, 0, 0, 0, 0, 0, 0, 0, 0},
    {"qwen2moe", 0, 1, 1, 1, FFN_QK_NORM_NONE, 0, 0, 0, 0, 0, 0, 0, 0},
    {"qwen3", 0, 0, 0, 0, FFN_QK_NORM_HEAD, 0, 0, 0, 0, 0, 0, 0, 0},
    {"qwen3moe", 0, 0, 1, 0, FFN_QK_NORM_HEAD, 1, 0, 0, 0, 0, 0, 0, 0},
    {"olmoe", 0, 0, 1, 0, FFN_QK_NORM_FULL, 0, 0, 1, 0, 0, 0, 0, 0},
    {"gemma", 0, 0, 0, 0, FFN_QK_NORM_NONE, 0, 1, 0, 0, 0, 0, 0, 0},
    {"gemma2", 0, 0, 0, 0, FFN_QK_NORM_NONE, 0, 1, 0, 0, 0, 0, 0, 1},
    {"gemma3", 0, 0, 0, 0, FFN_QK_NORM_HEAD, 0, 1, 0, 0, 0, 0, 0, 1},
    {"phi3", 0, 0, 0, 0, FFN_QK_NORM_NONE, 0, 0, 0, 0, 0, 2, 0, 0},
    {"gpt2", 0, 1, 0, 0, FFN_QK_NORM_NONE, 0, 0, 0, 1, 1, 1, 1, 0},
    {"starcoder2", 0, 1, 0, 0, FFN_QK_NORM_NONE, 0, 0, 0, 1, 1, 0, 0, 0},
};
#define GG_N_ARCHS (sizeof gg_archs / sizeof gg_archs[0])
#define GG_ARCH_LIST "llama, qwen2, qwen2moe, qwen3, qwen3moe, olmoe, gemma, gemma2, gemma3, phi3, gpt2 or starcoder2"

static const gg_arch *arch_find(const char *name) {
    for (size_t i = 0; i < GG_N_ARCHS; i++)
        if (!strcmp(name, gg_archs[i].name)) return &gg_archs[i];
    return NULL;
}

/* ---- the plan: GGUF tensors <-> model tensors ---------------------------- */

typedef struct gg_entry {
    char gguf[FFN_GGUF_MAX_NAME]; /* the name in the file */
    char hf[96];       /* the model tensor; for stacked experts a pattern with one %lld */
    int n_dims;        /* in the file */
    int64_t ne[3];     /* fastest first */
    int64_t experts;   /* > 0: a stack of this many experts (ne[2]) */
    int64_t rope_heads; /* > 0: q/k rows (of this many heads) that RoPE rotates */
    int kind;          /* GG_MATRIX, GG_VECTOR, GG_ROUTER, GG_ROPE_FREQS */
    int required;      /* absent from a file is an error */
    int used;          /* reading: found in the file */
    double offset;     /* the file holds offset + w (gemma's norms) */
    int n_fused;       /* > 0: the rows of these model tensors one after another (q|k|v, gate|up) */
    char part[3][72];
} gg_entry;

enum { GG_MATRIX = 0, GG_VECTOR, GG_ROUTER, GG_ROPE_FREQS /* no model tensor: from the config */ };

typedef struct gg_plan {
    gg_entry *e;
    int64_t n, cap;
} gg_plan;

static void plan_free(gg_plan *p) {
    free(p->e);
    memset(p, 0, sizeof *p);
}

/* The model tensors an entry holds: experts, fused parts, or one. */
static int64_t entry_parts(const gg_entry *e) {
    return e->experts > 0 ? e->experts : e->n_fused > 0 ? e->n_fused : 1;
}

static void entry_part(const gg_entry *e, int64_t x, char *out, size_t cap) {
    if (e->n_fused > 0) snprintf(out, cap, "%s", e->part[x]);
    else if (e->experts > 0) snprintf(out, cap, e->hf, (long long)x);
    else snprintf(out, cap, "%s", e->hf);
}

static ffn_status plan_add(gg_plan *p, int kind, const char *hf, int64_t experts, int64_t rope,
                           int n_dims, int64_t ne0, int64_t ne1, int64_t ne2, const char *gfmt,
                           int64_t layer) {
    gg_entry *e = ffn_grow(p->e, p->n, &p->cap, sizeof *p->e, 64);
    if (!e) return ffn_error(FFN_ERR_NOMEM, "out of memory");
    p->e = e;
    gg_entry *x = &p->e[p->n++];
    memset(x, 0, sizeof *x);
    snprintf(x->gguf, sizeof x->gguf, gfmt, (long long)layer);
    snprintf(x->hf, sizeof x->hf, "%s", hf);
    x->kind = kind;
    x->experts = experts;
    x->rope_heads = rope;
    x->n_dims = n_dims;
    x->ne[0] = ne0;
    x->ne[1] = ne1;
    x->ne[2] = ne2;
    x->required = 1;
    return FFN_OK;
}

/* The tensors of a model of config c written as architecture a.  qwen2*
 * files always have q/k/v biases (older llama.cpp required them). */
static ffn_status plan_build(const ffn_model_config *c, const gg_arch *a, gg_plan *p) {
    memset(p, 0, sizeof *p);
    const int64_t D = c->hidden_size, V = c->vocab_size, H = c->num_attention_heads;
    const int64_t G = c->num_key_value_heads, Dh = ffn_cfg_head_dim(c), F = c->intermediate_size;
    const int64_t E = c->num_experts;
    const int64_t Fe = c->moe_intermediate_size > 0 ? c->moe_intermediate_size : F;
    const int64_t Fs = c->shared_expert_intermediate_size;
    const int bias = c->attention_bias || a->qkv_bias;
    const double noff = a->gemma ? c->norm_weight_offset : 0.0;
    ffn_status st = FFN_OK;
    char hf[96];
    const char *qkv[3] = {"q_proj", "k_proj", "v_proj"}, *gu[2] = {"gate_proj", "up_proj"};
#define ADD(kind, experts, rope, nd, a, b, cc, gname, layer)                                     \
    do {                                                                                      \
        if ((st = plan_add(p, kind, hf, experts, rope, nd, a, b, cc, gname, layer))) goto fail; \
    } while (0)
#define HF(...) snprintf(hf, sizeof hf, __VA_ARGS__)
/* the last entry holds these n model tensors model.layers.L.<grp>.<names[i]>.<what> */
#define FUSE(cnt, grp, names, what)                                                          \
    do {                                                                                  \
        gg_entry *fe = &p->e[p->n - 1];                                                    \
        fe->n_fused = cnt;                                                                  \
        for (int k_ = 0; k_ < cnt; k_++)                                                     \
            snprintf(fe->part[k_], sizeof fe->part[k_], "model.layers.%lld.%s.%s.%s", L, grp, \
                     names[k_], what);                                                    \
    } while (0)
/* the gate, up and down matrices of a GLU of width FX: model.layers.L.mlp<HFG>.{gate,up,down}_proj.weight
 * as blk.L.ffn_{gate,up,down}<GGS>.weight */
#define GLU_PROJS(HFG, GGS, FX)                                                             \
    do {                                                                                  \
        HF("model.layers.%lld.mlp" HFG ".gate_proj.weight", L);                           \
        ADD(GG_MATRIX, 0, 0, 2, D, FX, 1, "blk.%lld.ffn_gate" GGS ".weight", l);           \
        HF("model.layers.%lld.mlp" HFG ".up_proj.weight", L);                             \
        ADD(GG_MATRIX, 0, 0, 2, D, FX, 1, "blk.%lld.ffn_up" GGS ".weight", l);             \
        HF("model.layers.%lld.mlp" HFG ".down_proj.weight", L);                           \
        ADD(GG_MATRIX, 0, 0, 2, FX, D, 1, "blk.%lld.ffn_down" GGS ".weight", l);           \
    } while (0)
#define LN_BIAS(name, gname, layer)                                                        \
    do {                                                                                  \
        if (a->layer_norm) {                                                              \
            HF(name, (long long)(layer));                                                  \
            ADD(GG_VECTOR, 0, 0, 1, D, 1, 1, gname, layer);                                \
        }                                                                                 \
    } while (0)
    HF("model.embed_tokens.weight");
    ADD(GG_MATRIX, 0, 0, 2, D, V, 1, "token_embd.weight", 0);
    if (c->learned_positions) {
        HF("model.embed_positions.weight");
        ADD(GG_MATRIX, 0, 0, 2, D, c->max_position_embeddings, 1, "position_embd.weight", 0);
    }
    if (c->rope_scaling.type == FFN_ROPE_SCALING_LLAMA3) {
        HF("%s", "");
        ADD(GG_ROPE_FREQS, 0, 0, 1, ffn_cfg_rotary_dim(c) / 2, 1, 1, "rope_freqs.weight", 0);
    }
    if (c->rope_scaling.type == FFN_ROPE_SCALING_LONGROPE) { /* phi3 */
        HF("%s", "");
        ADD(GG_ROPE_FREQS, 0, 0, 1, ffn_cfg_rotary_dim(c) / 2, 1, 1, "rope_factors_long.weight", 0);
        ADD(GG_ROPE_FREQS, 0, 0, 1, ffn_cfg_rotary_dim(c) / 2, 1, 1, "rope_factors_short.weight", 0);
    }
    for (int64_t l = 0; l < c->num_hidden_layers; l++) {
        const long long L = (long long)l;
        HF("model.layers.%lld.input_layernorm.weight", L);
        ADD(GG_VECTOR, 0, 0, 1, D, 1, 1, "blk.%lld.attn_norm.weight", l);
        p->e[p->n - 1].offset = noff;
        LN_BIAS("model.layers.%lld.input_layernorm.bias", "blk.%lld.attn_norm.bias", l);
        if (a->fused) { /* q | k | v rows in one tensor; no permutation (NEOX or no RoPE) */
            HF("%s", "");
            ADD(GG_MATRIX, 0, 0, 2, D, (H + 2 * G) * Dh, 1, "blk.%lld.attn_qkv.weight", l);
            FUSE(3, "self_attn", qkv, "weight");
            if (bias) {
                ADD(GG_VECTOR, 0, 0, 1, (H + 2 * G) * Dh, 1, 1, "blk.%lld.attn_qkv.bias", l);
                FUSE(3, "self_attn", qkv, "bias");
            }
        } else {
            HF("model.layers.%lld.self_attn.q_proj.weight", L);
            ADD(GG_MATRIX, 0, H, 2, D, H * Dh, 1, "blk.%lld.attn_q.weight", l);
            HF("model.layers.%lld.self_attn.k_proj.weight", L);
            ADD(GG_MATRIX, 0, G, 2, D, G * Dh, 1, "blk.%lld.attn_k.weight", l);
            HF("model.layers.%lld.self_attn.v_proj.weight", L);
            ADD(GG_MATRIX, 0, 0, 2, D, G * Dh, 1, "blk.%lld.attn_v.weight", l);
        }
        HF("model.layers.%lld.self_attn.o_proj.weight", L);
        ADD(GG_MATRIX, 0, 0, 2, H * Dh, D, 1, "blk.%lld.attn_output.weight", l);
        if (c->attention_out_bias) {
            HF("model.layers.%lld.self_attn.o_proj.bias", L);
            ADD(GG_VECTOR, 0, 0, 1, D, 1, 1, "blk.%lld.attn_output.bias", l);
        }
        if (bias && !a->fused) {
            HF("model.layers.%lld.self_attn.q_proj.bias", L);
            ADD(GG_VECTOR, 0, H, 1, H * Dh, 1, 1, "blk.%lld.attn_q.bias", l);
            HF("model.layers.%lld.self_attn.k_proj.bias", L);
            ADD(GG_VECTOR, 0, G, 1, G * Dh, 1, 1, "blk.%lld.attn_k.bias", l);
            HF("model.layers.%lld.self_attn.v_proj.bias", L);
            ADD(GG_VECTOR, 0, 0, 1, G * Dh, 1, 1, "blk.%lld.attn_v.bias", l);
        }
        if (c->qk_norm != FFN_QK_NORM_NONE) {
            const int head = c->qk_norm == FFN_QK_NORM_HEAD;
            HF("model.layers.%lld.self_attn.q_norm.weight", L);
            ADD(GG_VECTOR, 0, 0, 1, head ? Dh : H * Dh, 1, 1, "blk.%lld.attn_q_norm.weight", l);
            p->e[p->n - 1].offset = noff; /* gemma3: 1 + w as its other norms */
            HF("model.layers.%lld.self_attn.k_norm.weight", L);
            ADD(GG_VECTOR, 0, 0, 1, head ? Dh : G * Dh, 1, 1, "blk.%lld.attn_k_norm.weight", l);
            p->e[p->n - 1].offset = noff;
        }
        if (a->post) { /* gemma2/3: the attention output's norm; the FFN's is pre_feedforward */
            HF("model.layers.%lld.post_attention_layernorm.weight", L);
            ADD(GG_VECTOR, 0, 0, 1, D, 1, 1, "blk.%lld.post_attention_norm.weight", l);
            p->e[p->n - 1].offset = noff;
            HF("model.layers.%lld.pre_feedforward_layernorm.weight", L);
        } else {
            HF("model.layers.%lld.post_attention_layernorm.weight", L);
        }
        ADD(GG_VECTOR, 0, 0, 1, D, 1, 1, "blk.%lld.ffn_norm.weight", l);
        p->e[p->n - 1].offset = noff;
        LN_BIAS("model.layers.%lld.post_attention_layernorm.bias", "blk.%lld.ffn_norm.bias", l);
        if (a->dense) { /* up, act, down, with biases */
            HF("model.layers.%lld.mlp.up_proj.weight", L);
            ADD(GG_MATRIX, 0, 0, 2, D, F, 1, "blk.%lld.ffn_up.weight", l);
            HF("model.layers.%lld.mlp.up_proj.bias", L);
            ADD(GG_VECTOR, 0, 0, 1, F, 1, 1, "blk.%lld.ffn_up.bias", l);
            HF("model.layers.%lld.mlp.down_proj.weight", L);
            ADD(GG_MATRIX, 0, 0, 2, F, D, 1, "blk.%lld.ffn_down.weight", l);
            HF("model.layers.%lld.mlp.down_proj.bias", L);
            ADD(GG_VECTOR, 0, 0, 1, D, 1, 1, "blk.%lld.ffn_down.bias", l);
        } else if (a->fused == 2) { /* gate | up rows in ffn_up */
            HF("%s", "");
            ADD(GG_MATRIX, 0, 0, 2, D, 2 * F, 1, "blk.%lld.ffn_up.weight", l);
            FUSE(2, "mlp", gu, "weight");
            HF("model.layers.%lld.mlp.down_proj.weight", L);
            ADD(GG_MATRIX, 0, 0, 2, F, D, 1, "blk.%lld.ffn_down.weight", l);
        } else if (ffn_model_config_layer_is_moe(c, l)) {
            HF("model.layers.%lld.mlp.gate.weight", L);
            ADD(GG_ROUTER, 0, 0, 2, D, E, 1, "blk.%lld.ffn_gate_inp.weight", l);
            HF("model.layers.%lld.mlp.experts.%%lld.gate_proj.weight", L);
            ADD(GG_MATRIX, E, 0, 3, D, Fe, E, "blk.%lld.ffn_gate_exps.weight", l);
            HF("model.layers.%lld.mlp.experts.%%lld.up_proj.weight", L);
            ADD(GG_MATRIX, E, 0, 3, D, Fe, E, "blk.%lld.ffn_up_exps.weight", l);
            HF("model.layers.%lld.mlp.experts.%%lld.down_proj.weight", L);
            ADD(GG_MATRIX, E, 0, 3, Fe, D, E, "blk.%lld.ffn_down_exps.weight", l);
            if (Fs > 0) {
                HF("model.layers.%lld.mlp.shared_expert_gate.weight", L);
                ADD(GG_VECTOR, 0, 0, 1, D, 1, 1, "blk.%lld.ffn_gate_inp_shexp.weight", l);
                GLU_PROJS(".shared_expert", "_shexp", Fs);
            }
        } else {
            GLU_PROJS("", "", F);
        }
        if (a->post) {
            HF("model.layers.%lld.post_feedforward_layernorm.weight", L);
            ADD(GG_VECTOR, 0, 0, 1, D, 1, 1, "blk.%lld.post_ffw_norm.weight", l);
            p->e[p->n - 1].offset = noff;
        }
    }
    HF("model.norm.weight");
    ADD(GG_VECTOR, 0, 0, 1, D, 1, 1, "output_norm.weight", 0);
    p->e[p->n - 1].offset = noff;
    if (a->layer_norm) {
        HF("model.norm.bias");
        ADD(GG_VECTOR, 0, 0, 1, D, 1, 1, "output_norm.bias", 0);
    }
    if (!c->tie_word_embeddings) {
        HF("lm_head.weight");
        ADD(GG_MATRIX, 0, 0, 2, D, V, 1, "output.weight", 0);
    }
#undef ADD
#undef HF
#undef FUSE
#undef GLU_PROJS
#undef LN_BIAS
    return FFN_OK;
fail:
    plan_free(p);
    return st;
}

static void ne_str(char *out, size_t cap, int n_dims, const int64_t *ne) {
    size_t k = 0;
    out[0] = '\0';
    for (int i = 0; i < n_dims && k < cap; i++)
        k += (size_t)snprintf(out + k, cap - k, "%s%lld", i ? ", " : "", (long long)ne[i]);
}

/* ---- reading: metadata -> config ----------------------------------------- */

typedef struct gg_source {
    ffn_gguf_file *f;
    const char *path;
    char arch[32];
    const gg_arch *a;
    ffn_model_config cfg;
    gg_plan plan;
    int low_precision; /* keep low-precision matrices in their type (ffn_model_options) */
    int mapped;        /* s->f maps the file (not a caller's buffer): matrices may borrow */
    int64_t context_cap; /* {arch}.attention.sliding_window when shorter than the context */
} gg_source;

/* The metadata key "{arch}.suffix" read into *i (an int in 0 .. 2^31) or,
 * with i NULL, into *d (a positive finite number); left as it is when the
 * file lacks an optional key; a required one missing is an error. */
static ffn_status key_value(const gg_source *s, const char *suffix, int required, int64_t *i, double *d) {
    char key[96];
    snprintf(key, sizeof key, "%s.%s", s->arch, suffix);
    if (ffn_gguf_find_key(s->f, key) < 0) {
        if (!required) return FFN_OK;
        return ffn_error(FFN_ERR_MISSING, "%s: metadata key %s is missing (required for "
                         "architecture %s)", s->path, key, s->arch);
    }
    ffn_status st = i ? ffn_gguf_get_int(s->f, key, i) : ffn_gguf_get_float(s->f, key, d);
    if (st) return st;
    if (i && (*i < 0 || *i > ((int64_t)1 << 31)))
        return ffn_error(FFN_ERR_FORMAT, "%s: metadata key %s is %lld, expected 0 .. 2^31", s->path,
                         key, (long long)*i);
    if (!i && (!isfinite(*d) || *d <= 0))
        return ffn_error(FFN_ERR_FORMAT, "%s: metadata key %s is %g, expected a positive number",
                         s->path, key, *d);
    return FFN_OK;
}

static ffn_status key_int(const gg_source *s, const char *suffix, int required, int64_t dflt,
                          int64_t *out) {
    *out = dflt;
    return key_value(s, suffix, required, out, NULL);
}

static ffn_status key_float(const gg_source *s, const char *suffix, int required, double dflt,
                            double *out) {
    *out = dflt;
    return key_value(s, suffix, required, NULL, out);
}

static int has_tensor(const gg_source *s, const char *name) {
    ffn_gguf_tensor t;
    return ffn_gguf_find(s->f, name, &t) == FFN_OK;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* llama3 RoPE scaling as the llama.cpp converter writes it: rope_freqs.weight,
 * one factor ff_j per rotary pair that divides the pair's frequency
 * f_j = theta^(-2j/R).  ffn holds llama3 scaling by its parameters, so they
 * are recovered from the factors: factor = the largest ff_j; on the pairs
 * strictly between 1 and factor (the ramp) 1/ff is linear in 1/wavelength,
 * (1/ff - 1/factor) / (1 - 1/factor) = a/w - b with a = O/(hi - lo),
 * b = lo/(hi - lo), which fixes the ramp but not O: O = a/b (lo = 1) rounded
 * to a whole context, lo and hi from it (Llama 3.1: O 8192, lo 1, hi 4).  The
 * factors recomputed from the parameters must give the tensor back (relative
 * 2e-5: the converter computes f_j in float32), else the file is refused. */
static ffn_status read_rope_freqs(const gg_source *s, ffn_model_config *c) {
    ffn_gguf_tensor t;
    if (ffn_gguf_find(s->f, "rope_freqs.weight", &t) != FFN_OK) return FFN_OK;
    const int64_t R = ffn_cfg_rotary_dim(c), n = R / 2;
    if (!s->a->permute)
        return ffn_error(FFN_ERR_UNSUPPORTED, "%s: tensor rope_freqs.weight: RoPE frequency factors "
                         "are read for architecture llama, not %s", s->path, s->arch);
    if (t.n_dims != 1 || t.ne[0] != n) {
        char got[96];
        ne_str(got, sizeof got, t.n_dims, t.ne);
        return ffn_error(FFN_ERR_SHAPE, "%s: tensor rope_freqs.weight has ne {%s}, expected {%lld}: "
                         "one llama3 factor per rotary pair (half the rotary dim %lld)", s->path, got,
                         (long long)n, (long long)R);
    }
    if (!ffn_ggml_can_dequantize(t.type) || ffn_ggml_block_size(t.type) != 1)
        return ffn_error(FFN_ERR_UNSUPPORTED, "%s: tensor rope_freqs.weight has type %s (expected "
                         "f32, f16 or bf16)", s->path, ffn_ggml_type_name(t.type));
    float *ff = malloc((size_t)n * sizeof *ff);
    if (!ff) return ffn_error(FFN_ERR_NOMEM, "out of memory");
    ffn_status st = ffn_ggml_dequantize_row(t.type, t.data, ff, n);
    double fmax = 0;
    for (int64_t j = 0; st == FFN_OK && j < n; j++) {
        if (!isfinite(ff[j]) || ff[j] < 1.0f - 1e-6f)
            st = ffn_error(FFN_ERR_FORMAT, "%s: tensor rope_freqs.weight: element %lld is %g, "
                           "expected a factor >= 1", s->path, (long long)j, (double)ff[j]);
        else if (ff[j] > fmax) fmax = ff[j];
    }
    /* least squares of y = a·u - b over the ramp, u = 1/w = f/(2π) */
    double su = 0, sy = 0, suu = 0, suy = 0;
    int64_t m = 0;
    for (int64_t j = 0; st == FFN_OK && j < n; j++) {
        if (!(ff[j] > 1.0 + 1e-5 && ff[j] < fmax * (1.0 - 1e-5))) continue;
        const double u = pow(c->rope_theta, -2.0 * (double)j / (double)R) / (2.0 * M_PI);
        const double y = (1.0 / ff[j] - 1.0 / fmax) / (1.0 - 1.0 / fmax);
        su += u, sy += y, suu += u * u, suy += u * y, m++;
    }
    if (st == FFN_OK && fmax <= 1.0 + 1e-6) {
        free(ff); /* every factor 1: plain RoPE */
        return FFN_OK;
    }
    const double det = (double)m * suu - su * su;
    const double a = m >= 2 && det > 0 ? ((double)m * suy - su * sy) / det : 0;
    const double b = m >= 2 && det > 0 ? -(sy - a * su) / (double)m : 0;
    if (st == FFN_OK && (m < 2 || !(a > 0) || !(b > 0) || !(a / b < 1e9)))
        st = ffn_error(FFN_ERR_UNSUPPORTED, "%s: tensor rope_freqs.weight: the factors (largest "
                       "%g, %lld between 1 and it) are not llama3 RoPE scaling ffn can recover "
                       "(expected 1 on the high frequencies, the largest on the low ones and at "
                       "least 2 pairs on a ramp 1/factor = a/wavelength - b with a, b > 0 between; "
                       "fit a %g, b %g)", s->path, fmax, (long long)m, a, b);
    if (st == FFN_OK) {
        ffn_rope_scaling *r = &c->rope_scaling;
        memset(r, 0, sizeof *r);
        r->type = FFN_ROPE_SCALING_LLAMA3;
        r->factor = fmax;
        r->original_max_position_embeddings = llround(a / b);
        const double O = (double)r->original_max_position_embeddings;
        r->low_freq_factor = b * O / a;
        r->high_freq_factor = (1.0 + b) * O / a;
        for (int64_t j = 0; j < n; j++) {
            const double f = pow(c->rope_theta, -2.0 * (double)j / (double)R);
            const double g = f / ffn_rope_inv_freq(c, j, 0);
            if (fabs(g - ff[j]) > 2e-5 * ff[j]) {
                st = ffn_error(FFN_ERR_UNSUPPORTED, "%s: tensor rope_freqs.weight: element %lld "
                               "is %.9g, llama3 scaling (factor %g, original context %lld, low %g, "
                               "high %g) fitted to the factors gives %.9g: not llama3 scaling",
                               s->path, (long long)j, (double)ff[j], r->factor,
                               (long long)r->original_max_position_embeddings, r->low_freq_factor,
                               r->high_freq_factor, g);
                break;
            }
        }
    }
    free(ff);
    return st;
}

/* phi3's LongRoPE as llama.cpp's converter writes it: rope_factors_long.weight
 * and rope_factors_short.weight (R/2 factors each, dividing the pairs'
 * frequencies), {arch}.rope.scaling.original_context_length (O: the long
 * factors apply when the context exceeds it) and rope.scaling.attn_factor
 * (cos and sin times it; 1 when absent, as llama.cpp). */
static ffn_status read_rope_factors(const gg_source *s, ffn_model_config *c) {
    const int has_l = has_tensor(s, "rope_factors_long.weight");
    const int has_s = has_tensor(s, "rope_factors_short.weight");
    if (!has_l && !has_s) return FFN_OK;
    if (strcmp(s->arch, "phi3"))
        return ffn_error(FFN_ERR_UNSUPPORTED, "%s: tensor rope_factors_%s.weight: LongRoPE factors "
                         "are read for architecture phi3, not %s", s->path, has_l ? "long" : "short",
                         s->arch);
    if (!has_l || !has_s)
        return ffn_error(FFN_ERR_MISSING, "%s: tensor rope_factors_%s.weight is missing (LongRoPE "
                         "needs both the long and the short factors)", s->path,
                         has_l ? "short" : "long");
    const int64_t R = ffn_cfg_rotary_dim(c), n = R / 2;
    if (n > FFN_ROPE_MAX_FACTORS)
        return ffn_error(FFN_ERR_UNSUPPORTED, "%s: LongRoPE over %lld pairs: ffn holds at most %d",
                         s->path, (long long)n, FFN_ROPE_MAX_FACTORS);
    ffn_rope_scaling *r = &c->rope_scaling;
    memset(r, 0, sizeof *r);
    r->type = FFN_ROPE_SCALING_LONGROPE;
    r->n_factors = n;
    for (int l = 0; l < 2; l++) {
        const char *name = l ? "rope_factors_long.weight" : "rope_factors_short.weight";
        float *out = l ? r->long_factor : r->short_factor;
        ffn_gguf_tensor t;
        ffn_status st = ffn_gguf_find(s->f, name, &t);
        if (st) return st;
        if (t.n_dims != 1 || t.ne[0] != n) {
            char got[96];
            ne_str(got, sizeof got, t.n_dims, t.ne);
            return ffn_error(FFN_ERR_SHAPE, "%s: tensor %s has ne {%s}, expected {%lld}: one "
                             "LongRoPE factor per rotary pair (half the rotary dim %lld)", s->path, name,
                             got, (long long)n, (long long)R);
        }
        if (!ffn_ggml_can_dequantize(t.type) || ffn_ggml_block_size(t.type) != 1)
            return ffn_error(FFN_ERR_UNSUPPORTED, "%s: tensor %s has type %s (expected f32, f16 or "
                             "bf16)", s->path, name, ffn_ggml_type_name(t.type));
        if ((st = ffn_ggml_dequantize_row(t.type, t.data, out, n))) return st;
        for (int64_t j = 0; j < n; j++)
            if (!isfinite(out[j]) || !(out[j] > 0.0f))
                return ffn_error(FFN_ERR_FORMAT, "%s: tensor %s: element %lld is %g, expected a "
                                 "positive factor", s->path, name, (long long)j, (double)out[j]);
    }
    int64_t O = 0;
    double af = 1.0;
    ffn_status st;
    if ((st = key_int(s, "rope.scaling.original_context_length", 1, 0, &O)) ||
        (st = key_float(s, "rope.scaling.attn_factor", 0, 1.0, &af)))
        return st;
    if (O < 1)
        return ffn_error(FFN_ERR_FORMAT, "%s: metadata key %s.rope.scaling.original_context_length "
                         "is 0, expected >= 1 (LongRoPE)", s->path, s->arch);
    r->original_max_position_embeddings = O;
    r->factor = (double)c->max_position_embeddings / (double)O;
    if (!(r->factor >= 1.0)) r->factor = 1.0;
    r->attention_factor = af;
    if (has_tensor(s, "rope_freqs.weight"))
        return ffn_error(FFN_ERR_UNSUPPORTED, "%s: tensor rope_freqs.weight together with "
                         "LongRoPE factors is not supported", s->path);
    return FFN_OK;
}

/* {arch}.rope.scaling.*: none and linear (factor) as keys; llama3 as
 * rope_freqs.weight; LongRoPE as rope_factors_*.weight (phi3); others
 * refused by name. */
static ffn_status read_rope_scaling(const gg_source *s, ffn_model_config *c) {
    char key[96];
    ffn_status st;
    snprintf(key, sizeof key, "%s.rope.scaling.type", s->arch);
    const char *v = "none";
    if (ffn_gguf_find_key(s->f, key) >= 0 && (st = ffn_gguf_get_str(s->f, key, &v, NULL))) return st;
    if (!strcmp(v, "linear")) {
        double factor;
        if ((st = key_float(s, "rope.scaling.factor", 1, 1.0, &factor))) return st;
        memset(&c->rope_scaling, 0, sizeof c->rope_scaling);
        c->rope_scaling.type = FFN_ROPE_SCALING_LINEAR;
        c->rope_scaling.factor = factor;
        if (has_tensor(s, "rope_freqs.weight"))
            return ffn_error(FFN_ERR_UNSUPPORTED, "%s: %s linear together with tensor "
                             "rope_freqs.weight is not supported", s->path, key);
        return FFN_OK;
    }
    if (strcmp(v, "none"))
        return ffn_error(FFN_ERR_UNSUPPORTED, "%s: %s is '%.20s'; ffn reads none and linear (and "
                         "llama3 as rope_freqs.weight)", s->path, key, v);
    if ((st = read_rope_factors(s, c))) return st;
    return read_rope_freqs(s, c);
}

/* gemma2 / gemma3's keys, with llama.cpp's defaults (src/models/gemma2.cpp,
 * gemma3.cpp there): soft-capping (gemma2: attention 50 and final 30 when
 * absent, always applied; gemma3: final only, none when absent); the
 * window (gemma2: 4096 when absent; gemma3: none when absent) on every
 * layer but each sliding_window_pattern-th (2; 6), whose RoPE base is
 * rope.freq_base_swa (gemma2: freq_base; gemma3: 10000), unscaled; and
 * the query scale llama.cpp derives (D/H for the 27B models, by layer
 * count 46 / 62, else the head size). */
static ffn_status read_gemma2(const gg_source *s, ffn_model_config *c, int64_t swa, int64_t L,
                              int64_t D, int64_t H, int64_t Dh, double theta) {
    const int g2 = !strcmp(s->arch, "gemma2");
    ffn_status st;
    c->post_norms = 1;
    double acap = 0, fcap = 0, base_swa = g2 ? theta : 10000.0;
    int64_t pattern = g2 ? 2 : 6;
    if (g2 && (st = key_float(s, "attn_logit_softcapping", 0, 50.0, &acap))) return st;
    if ((st = key_float(s, "final_logit_softcapping", 0, g2 ? 30.0 : 0.0, &fcap)) ||
        (st = key_int(s, "attention.sliding_window_pattern", 0, pattern, &pattern)) ||
        (st = key_float(s, "rope.freq_base_swa", 0, base_swa, &base_swa)))
        return st;
    char key[96];
    snprintf(key, sizeof key, "%s.attention.sliding_window", s->arch);
    if (g2 && ffn_gguf_find_key(s->f, key) < 0) swa = 4096;
    if (g2 && swa == 0)
        return ffn_error(FFN_ERR_FORMAT, "%s: metadata key %s is 0: expected a window of at least "
                         "one position (llama.cpp's gemma2 always slides)", s->path, key);
    if (swa > c->max_position_embeddings)
        return ffn_error(FFN_ERR_FORMAT, "%s: metadata key %s is %lld, larger than the context "
                         "(%s.context_length %lld)", s->path, key, (long long)swa, s->arch,
                         (long long)c->max_position_embeddings);
    if (swa > 0 && pattern == 0)
        return ffn_error(FFN_ERR_FORMAT, "%s: metadata key %s.attention.sliding_window_pattern is "
                         "0, expected >= 1", s->path, s->arch);
    c->attn_logit_softcapping = acap;
    c->final_logit_softcapping = fcap;
    c->sliding_window = swa;
    c->sliding_window_pattern = swa > 0 ? pattern : 0;
    c->rope_local_base_freq = swa > 0 && (!g2 || base_swa != theta) ? base_swa : 0.0;
    const int big = L == (g2 ? 46 : 62);
    c->query_pre_attn_scalar = big ? (double)(D / H) : (double)Dh;
    return FFN_OK;
}

/* general.architecture and the {arch}.* keys -> s->cfg, then the plan. */
static ffn_status read_config(gg_source *s) {
    const char *arch = NULL;
    size_t alen = 0;
    if (ffn_gguf_find_key(s->f, "general.architecture") < 0)
        return ffn_error(FFN_ERR_MISSING, "%s: metadata key general.architecture is missing "
                         "(expected " GG_ARCH_LIST ")", s->path);
    ffn_status st = ffn_gguf_get_str(s->f, "general.architecture", &arch, &alen);
    if (st) return st;
    if (!(s->a = arch_find(arch)) || alen != strlen(arch))
        return ffn_error(FFN_ERR_UNSUPPORTED, "%s: general.architecture '%.40s' is not supported "
                         "(expected " GG_ARCH_LIST ")", s->path, arch);
    snprintf(s->arch, sizeof s->arch, "%s", arch);
    const gg_arch *a = s->a;
    ffn_model_config *c = &s->cfg;
    ffn_model_config_default(c);
    int64_t D, L, F, T, H, G, E, K, Fe, Fs, rope_dims;
    double eps, theta;
    if ((st = key_int(s, "embedding_length", 1, 0, &D)) || (st = key_int(s, "block_count", 1, 0, &L)) ||
        (st = key_int(s, "feed_forward_length", 1, 0, &F)) ||
        (st = key_int(s, "context_length", 1, 0, &T)) ||
        (st = key_int(s, "attention.head_count", 1, 0, &H)) ||
        (st = key_int(s, "attention.head_count_kv", 0, H, &G)) ||
        (st = key_float(s, a->layer_norm ? "attention.layer_norm_epsilon"
                                         : "attention.layer_norm_rms_epsilon", 1, 0, &eps)) ||
        (st = key_float(s, "rope.freq_base", 0, 10000.0, &theta)) ||
        (st = key_int(s, "expert_count", 0, 0, &E)) ||
        (st = key_int(s, "expert_used_count", E > 0, 0, &K)) ||
        (st = key_int(s, "expert_feed_forward_length", 0, F, &Fe)) ||
        (st = key_int(s, "expert_shared_feed_forward_length", 0, 0, &Fs)))
        return st;
    /* Every layer has at least 6 tensors (2 norms, q/k/v or qkv, o, and
     * gate|up and down or router and experts, phi3 having the fewest): a
     * block_count the file cannot hold is named before anything is sized by it. */
    if ((uint64_t)L > ffn_gguf_count(s->f) / 6)
        return ffn_error(FFN_ERR_FORMAT, "%s: %s.block_count %lld, but the file holds only %zu "
                         "tensors (at least 6 a layer)", s->path, s->arch, (long long)L,
                         ffn_gguf_count(s->f));
    if (a->moe == 1 && E == 0)
        return ffn_error(FFN_ERR_MISSING, "%s: metadata key %s.expert_count is missing "
                         "(required for architecture %s)", s->path, s->arch, s->arch);
    if (a->moe == 0 && E > 0)
        return ffn_error(FFN_ERR_UNSUPPORTED, "%s: metadata key %s.expert_count is %lld: "
                         "architecture %s has no experts in llama.cpp", s->path, s->arch,
                         (long long)E, s->arch);
    /* the head size: attention.key_length, else embedding_length / head_count */
    int64_t Dh = 0, vl = 0;
    if (H <= 0)
        return ffn_error(FFN_ERR_FORMAT, "%s: %s.attention.head_count is 0, expected >= 1",
                         s->path, s->arch);
    if (G <= 0 || H % G != 0)
        return ffn_error(FFN_ERR_FORMAT, "%s: %s.attention.head_count_kv %lld does not divide "
                         "%s.attention.head_count %lld", s->path, s->arch, (long long)G, s->arch,
                         (long long)H);
    if ((st = key_int(s, "attention.key_length", 0, D % H == 0 ? D / H : 0, &Dh)) ||
        (st = key_int(s, "attention.value_length", 0, Dh, &vl)))
        return st;
    if (Dh <= 0 || Dh % 2 != 0)
        return ffn_error(FFN_ERR_FORMAT, "%s: %s.attention.head_count %lld must divide %s."
                         "embedding_length %lld into heads of even size (or give %s.attention."
                         "key_length)", s->path, s->arch, (long long)H, s->arch, (long long)D,
                         s->arch);
    if (vl != Dh)
        return ffn_error(FFN_ERR_UNSUPPORTED, "%s: %s.attention.value_length %lld differs from "
                         "key_length %lld (ffn's heads have one size)", s->path, s->arch,
                         (long long)vl, (long long)Dh);
    if ((st = key_int(s, "rope.dimension_count", 0, Dh, &rope_dims))) return st;
    if (rope_dims != Dh)
        return ffn_error(FFN_ERR_UNSUPPORTED, "%s: %s.rope.dimension_count %lld differs from the "
                         "head size %lld (partial rotary embeddings are not supported for %s)",
                         s->path, s->arch, (long long)rope_dims, (long long)Dh, s->arch);
    /* V: the token list, or token_embd */
    ffn_gguf_tensor te;
    if ((st = ffn_gguf_find(s->f, "token_embd.weight", &te))) return st;
    int64_t V = te.n_dims == 2 ? te.ne[1] : 0;
    if (ffn_gguf_find_key(s->f, "tokenizer.ggml.tokens") >= 0) {
        ffn_gguf_array toks;
        if ((st = ffn_gguf_get_array(s->f, "tokenizer.ggml.tokens", &toks))) return st;
        V = (int64_t)toks.count;
    }
    c->vocab_size = V;
    c->hidden_size = D;
    c->num_hidden_layers = L;
    c->num_attention_heads = H;
    c->num_key_value_heads = G;
    c->head_dim = Dh * H == D ? 0 : Dh;
    c->max_position_embeddings = T;
    c->rms_norm_eps = eps;
    c->rope_theta = theta;
    c->rope_style = FFN_ROPE_HALF; /* llama's rows are permuted back on load */
    if ((st = read_rope_scaling(s, c))) return st;
    c->hidden_act = FFN_ACT_SILU;
    c->mlp_type = FFN_MODEL_MLP_GATED;
    c->mlp_bias = 0;
    c->intermediate_size = F;
    c->tie_word_embeddings = !has_tensor(s, "output.weight");
    c->attention_bias = has_tensor(s, "blk.0.attn_q.bias") || a->qkv_bias;
    c->qk_norm = a->qk_norm;
    if (a->layer_norm) c->norm_type = FFN_NORM_LAYER;
    if (a->dense) {
        c->mlp_type = FFN_MODEL_MLP_DENSE;
        c->mlp_bias = 1;
        c->hidden_act = FFN_ACT_GELU_TANH; /* ggml_gelu: the tanh form */
    }
    c->learned_positions = a->positions;
    c->attention_out_bias = has_tensor(s, "blk.0.attn_output.bias");
    /* a sliding window shorter than the context caps it, as for a Hugging Face
     * directory (the window is exact up to its length) */
    int64_t swa = 0;
    if ((st = key_int(s, "attention.sliding_window", 0, 0, &swa))) return st;
    s->context_cap = swa > 0 && swa < T && !a->post ? swa : 0;
    if (a->gemma) {
        /* llama.cpp's converter writes gemma's norms as 1 + w: read back as w */
        c->norm_weight_offset = 1.0;
        c->embed_scale = (double)sqrtf((float)D);
        c->hidden_act = FFN_ACT_GELU_TANH;
        if (!a->post || !strcmp(s->arch, "gemma2")) c->tie_word_embeddings = 1;
    }
    if (a->post && (st = read_gemma2(s, c, swa, L, D, H, Dh, theta))) return st;
    c->num_experts = E;
    if (E > 0) {
        c->num_experts_per_tok = K;
        c->moe_intermediate_size = Fe;
        c->moe_layer_freq = 1;
        /* llama.cpp renormalises the top-k weights for llama (Mixtral), not for qwen2moe */
        c->norm_topk_prob = a->norm_topk;
        if (a->shared && Fs == 0) {
            ffn_gguf_tensor t;
            if (ffn_gguf_find(s->f, "blk.0.ffn_up_shexp.weight", &t) == FFN_OK && t.n_dims == 2)
                Fs = t.ne[1];
        }
        c->shared_expert_intermediate_size = Fs;
    } else {
        c->shared_expert_intermediate_size = 0;
    }
    if ((st = ffn_model_config_validate(c))) return ffn_error_prefix(st, "%s", s->path);
    /* The plan, checked against the file before anything is allocated. */
    if ((st = plan_build(c, a, &s->plan))) return st;
    for (int64_t i = 0; i < s->plan.n; i++) {
        gg_entry *e = &s->plan.e[i];
        ffn_gguf_tensor t;
        if (ffn_gguf_find(s->f, e->gguf, &t) != FFN_OK)
            return ffn_error(FFN_ERR_MISSING, "%s: tensor %s is missing (the metadata describes "
                             "a %s model of %lld layers that needs it)", s->path, e->gguf, s->arch,
                             (long long)L);
        int dims_ok = t.n_dims == e->n_dims;
        if (e->kind == GG_VECTOR && t.n_dims == 2 && t.ne[1] == 1) dims_ok = 1; /* {n, 1} */
        int same = dims_ok;
        for (int d = 0; d < e->n_dims && same; d++) same = t.ne[d] == e->ne[d];
        if (!same) {
            char got[96], want[96];
            ne_str(got, sizeof got, t.n_dims, t.ne);
            ne_str(want, sizeof want, e->n_dims, e->ne);
            return ffn_error(FFN_ERR_SHAPE, "%s: tensor %s has ne {%s}, expected {%s} from the "
                             "metadata (%s: embedding_length %lld, feed_forward_length %lld, "
                             "head_count %lld, head_count_kv %lld, vocab %lld, expert_count %lld)",
                             s->path, e->gguf, got, want, s->arch, (long long)D, (long long)F,
                             (long long)H, (long long)G, (long long)V, (long long)E);
        }
        if (!ffn_ggml_can_dequantize(t.type)) {
            char list[256];
            return ffn_error(FFN_ERR_UNSUPPORTED, "%s: tensor %s has type %s, which ffn cannot "
                             "read (it reads %s)", s->path, e->gguf, ffn_ggml_type_name(t.type),
                             ffn_ggml_type_list(FFN_GGML_DECODES, " and ", list, sizeof list));
        }
        e->used = 1;
    }
    /* Every tensor of the file must be one the plan explains (names in the
     * file are unique and every planned one was found: counts decide). */
    const size_t nt = ffn_gguf_count(s->f);
    if ((int64_t)nt == s->plan.n) return FFN_OK;
    const char **names = malloc((size_t)s->plan.n * sizeof *names);
    if (!names) return ffn_error(FFN_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < s->plan.n; i++) names[i] = s->plan.e[i].gguf;
    qsort(names, (size_t)s->plan.n, sizeof *names, by_name);
    for (size_t i = 0; i < nt && st == FFN_OK; i++) {
        ffn_gguf_tensor t;
        if ((st = ffn_gguf_get_tensor(s->f, i, &t))) break;
        if (!bsearch(&t.name, names, (size_t)s->plan.n, sizeof *names, by_name))
            st = ffn_error(FFN_ERR_FORMAT, "%s: tensor %.64s is not part of the model the metadata "
                           "describes (%s, %lld layers, expert_count %lld)", s->path, t.name,
                           s->arch, (long long)L, (long long)E);
    }
    free(names);
    return st;
}

static void gguf_release(void *f) { ffn_gguf_close(f); }

static void source_close(gg_source *s) {
    plan_free(&s->plan);
    ffn_gguf_close(s->f);
    s->f = NULL;
}

/* data == NULL: map the file `path`; else read size bytes at data (named
 * `path` in messages). */
static ffn_status source_open(const char *path, const void *data, size_t size, gg_source *s) {
    memset(s, 0, sizeof *s);
    s->path = path;
    ffn_status st = data ? ffn_gguf_open_buffer(data, size, path, &s->f) : ffn_gguf_open(path, &s->f);
    s->mapped = !data;
    if (st == FFN_OK) st = read_config(s);
    if (st) source_close(s);
    return st;
}

static void fill_info(const gg_source *s, ffn_checkpoint_info *info) {
    memset(info, 0, sizeof *info);
    info->format = FFN_CHECKPOINT_GGUF;
    snprintf(info->model_type, sizeof info->model_type, "%s", s->arch);
    info->n_files = 1;
    info->context_cap = s->context_cap;
    struct stat sb;
    if (stat(s->path, &sb) == 0) info->file_bytes = (int64_t)sb.st_size;
    for (int64_t i = 0; i < s->plan.n; i++) {
        ffn_gguf_tensor t;
        if (ffn_gguf_find(s->f, s->plan.e[i].gguf, &t) != FFN_OK) continue;
        info->n_dtypes[t.type == FFN_GGML_TYPE_F32 ? 0 : t.type == FFN_GGML_TYPE_F16 ? 1
                       : t.type == FFN_GGML_TYPE_BF16 ? 2 : 3]++;
    }
    /* the vocabulary is in the file itself (ffn_vocab_load reads a GGUF's) */
    if ((ffn_gguf_find_key(s->f, "tokenizer.ggml.tokens") >= 0 ||
         ffn_gguf_find_key(s->f, FFN_GGUF_KEY_TOKENIZER) >= 0 ||
         ffn_gguf_find_key(s->f, FFN_GGUF_KEY_TOKENIZER_JSON) >= 0) &&
        strlen(s->path) < sizeof info->tokenizer_path)
        snprintf(info->tokenizer_path, sizeof info->tokenizer_path, "%s", s->path);
}

/* ---- reading: tensors -> the model ---------------------------------------- */

/* Give back the pages of the mapping that [p, p + n) covers whole: bytes
 * that were copied or decoded out of a mapped file are not read from it
 * again, so they need not stay resident beside their copy.  (The mapping
 * is private and read-only: a page dropped here would be read again from
 * the file if anything touched it.) */
static void drop_mapped(const void *p, size_t n) {
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = ((uintptr_t)p + pg - 1) & ~(pg - 1), b = ((uintptr_t)p + n) & ~(pg - 1);
    if (b > a) (void)madvise((void *)a, b - a, MADV_DONTNEED);
}

/* The types a matrix keeps in the model as they lie in the file. */
static int kept_type(ffn_ggml_type t) {
    return t != FFN_GGML_TYPE_F32 && (ffn_ggml_type_caps(t) & FFN_GGML_COMPUTES);
}

/* The one rule for the values of every tensor, whatever its type and
 * whichever command loads it: each element decodes to a finite number.
 * The check reads bits, not decoded values, where it can, so that it runs
 * at memory speed: fp16 and bf16 elements by their exponent field (all
 * ones is Inf or NaN); the block types by their fp16 scales, as their elements are small
 * integers times these (|d| <= 65504 times at most 63·15 or 128·32 stays
 * finite, while a NaN or infinite scale makes its block non-finite even
 * beside a zero quant).  Any other type (f32, f64, a type added later) is
 * scanned as decoded: `dec` (rows of `cols` fp32) when the caller has
 * decoded it, else a row at a time here.  Kept or decoded, a tensor gets
 * the same message.  The first bad element is named by its index in the
 * file's tensor (row0 is the first row's). */
/* The exponent field of a 2-byte float element type (all ones: Inf or
 * NaN), 0 for any other type. */
static uint16_t half_exponent(ffn_ggml_type t) {
    return t == FFN_GGML_TYPE_F16 ? 0x7c00u : t == FFN_GGML_TYPE_BF16 ? 0x7f80u : 0;
}

/* Whether any of n 2-byte elements at p has all the bits of `mask` set:
 * eight lanes at a time (GCC's vector extension; SSE2 on x86-64, plain
 * code elsewhere), as the scan runs at memory speed over the file. */
typedef uint16_t u16x8 __attribute__((vector_size(16)));
static int any_all_ones(const unsigned char *p, int64_t n, uint16_t mask) {
    u16x8 acc = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        u16x8 x;
        memcpy(&x, p + 2 * i, sizeof x);
        acc |= (x & mask) == mask;
    }
    int bad = 0;
    for (int k = 0; k < 8; k++) bad |= acc[k] != 0;
    for (; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        bad |= (h & mask) == mask;
    }
    return bad;
}

/* The fp16 scales of a block type: n of them from byte `off` of a block
 * (the type table's f16_scale_off / f16_scales). */
static int f16_scales(ffn_ggml_type t, size_t *off, int *n) {
    const ffn_type_info *ti = ffn_type_info_of(t);
    if (!ti || !ti->f16_scales) return 0;
    *off = ti->f16_scale_off, *n = ti->f16_scales;
    return 1;
}

static ffn_status bad_value(const char *path, const ffn_gguf_tensor *t, int64_t e, int64_t cols,
                            double v) {
    return ffn_error(FFN_ERR_FORMAT, "%s: tensor %s (%s): element %lld (row %lld, column %lld) is "
                     "%g: expected a finite value", path, t->name, ffn_ggml_type_name(t->type),
                     (long long)e, (long long)(e / cols), (long long)(e % cols), v);
}

static ffn_status check_values(const char *path, const ffn_gguf_tensor *t, const float *dec,
                               const unsigned char *src, size_t row_bytes, int64_t row0,
                               int64_t rows, int64_t cols) {
    const int64_t n = rows * cols, e0 = row0 * cols;
    const uint16_t mask = half_exponent(t->type);
    size_t off;
    int ns;
    if (mask) {
        if (!any_all_ones(src, n, mask)) return FFN_OK;
        for (int64_t i = 0;; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            if ((h & mask) == mask)
                return bad_value(path, t, e0 + i, cols, t->type == FFN_GGML_TYPE_F16 ? ffn_f16_to_f32(h)
                                                                                    : ffn_bf16_to_f32(h));
        }
    }
    if (f16_scales(t->type, &off, &ns)) {
        const int64_t bs = ffn_ggml_block_size(t->type), nb = n / bs;
        const size_t size = ffn_ggml_type_size(t->type);
        const unsigned char *p = src + off;
        unsigned bad = 0;
        for (int64_t b = 0; b < nb; b++, p += size)
            for (int k = 0; k < ns; k++) {
                uint16_t h;
                memcpy(&h, p + 2 * k, 2);
                bad |= (h & 0x7c00u) == 0x7c00u;
            }
        p = src + off;
        for (int64_t b = 0; bad && b < nb; b++, p += size)
            for (int k = 0; k < ns; k++) {
                uint16_t h;
                memcpy(&h, p + 2 * k, 2);
                if ((h & 0x7c00u) != 0x7c00u) continue;
                const int64_t e = e0 + b * bs;
                return ffn_error(FFN_ERR_FORMAT, "%s: tensor %s (%s): the %sscale of block %lld "
                                 "(elements %lld..%lld, row %lld) is %g: expected a finite value",
                                 path, t->name, ffn_ggml_type_name(t->type), k ? "second " : "",
                                 (long long)(e / bs), (long long)e, (long long)(e + bs - 1),
                                 (long long)(e / cols), (double)ffn_f16_to_f32(h));
            }
        return FFN_OK;
    }
    if (dec) {
        int bad = 0; /* branch-free; the search only on a hit */
        for (int64_t i = 0; i < n; i++) bad |= !isfinite(dec[i]);
        for (int64_t i = 0; bad && i < n; i++)
            if (!isfinite(dec[i])) return bad_value(path, t, e0 + i, cols, dec[i]);
        return FFN_OK;
    }
    float *buf = malloc((size_t)(cols > 0 ? cols : 1) * sizeof(float));
    if (!buf) return ffn_error(FFN_ERR_NOMEM, "%s: tensor %s: out of memory", path, t->name);
    ffn_status st = FFN_OK;
    for (int64_t r = 0; r < rows && st == FFN_OK; r++) {
        if ((st = ffn_ggml_dequantize_row(t->type, src + (size_t)r * row_bytes, buf, cols))) break;
        for (int64_t i = 0; i < cols; i++)
            if (!isfinite(buf[i])) {
                st = bad_value(path, t, e0 + r * cols + i, cols, buf[i]);
                break;
            }
    }
    free(buf);
    return st;
}

/* Place rows [row0, row0 + rows) of GGUF tensor t (rows of `cols`
 * elements) into model tensor `hf`, permuting q/k rows from the
 * interleaved order when rope_heads > 0.  This is the one place a tensor
 * of the file becomes model weights.  With low_precision, a matrix in a
 * type the kernels read stays in it: borrowed from the mapping when
 * `mapped` (the model then keeps the file open), copied otherwise; q/k
 * rows are moved whole (a row of a block type is self-contained), so they
 * are copied.  Everything else is decoded to fp32; with `mapped`, the
 * pages of what was copied or decoded are given back. */
static ffn_status place_tensor(ffn_model *m, const char *path, const char *hf,
                               const ffn_gguf_tensor *t, int64_t row0, int64_t rope_heads,
                               int low_precision, int mapped, int64_t *borrowed) {
    const ffn_model_tensor *mt = ffn_model_find_tensor(m, hf);
    if (!mt) return ffn_error(FFN_ERR_INTERNAL, "%s: the model has no tensor %s", path, hf);
    const int64_t cols = t->ne[0], rows = mt->numel / cols;
    size_t row_bytes = 0;
    ffn_status st = ffn_ggml_row_size(t->type, cols, &row_bytes);
    if (st) return ffn_error_prefix(st, "%s: tensor %s", path, t->name);
    const unsigned char *src = (const unsigned char *)t->data + (size_t)row0 * row_bytes;
    const size_t nbytes = (size_t)rows * row_bytes;
    if (low_precision && mt->ndim == 2 && t->n_dims >= 2 && kept_type(t->type)) {
        if ((st = check_values(path, t, NULL, src, row_bytes, row0, rows, cols))) return st;
        if (rope_heads == 0) {
            st = ffn_model_set_tensor_data(m, hf, t->type, src, nbytes, mapped);
            if (st == FFN_OK && mapped) (*borrowed)++;
            return st ? ffn_error_prefix(st, "%s: tensor %s", path, t->name) : FFN_OK;
        }
        /* file row h·Dh + 2j + p holds model row h·Dh + p·Dh/2 + j */
        unsigned char *tmp = malloc(nbytes ? nbytes : 1);
        if (!tmp) return ffn_error(FFN_ERR_NOMEM, "%s: tensor %s: out of memory", path, t->name);
        const int64_t Dh = rows / rope_heads;
        for (int64_t h = 0; h < rope_heads; h++)
            for (int64_t j = 0; j < Dh / 2; j++)
                for (int64_t p = 0; p < 2; p++)
                    memcpy(tmp + (size_t)(h * Dh + p * (Dh / 2) + j) * row_bytes,
                           src + (size_t)(h * Dh + 2 * j + p) * row_bytes, row_bytes);
        st = ffn_model_set_tensor_data(m, hf, t->type, tmp, nbytes, 0);
        free(tmp);
        if (st == FFN_OK && mapped) drop_mapped(src, nbytes);
        return st ? ffn_error_prefix(st, "%s: tensor %s", path, t->name) : FFN_OK;
    }
    float *dst = ffn_model_params(m, NULL) + mt->offset;
    float *tmp = NULL;
    float *out = dst;
    if (rope_heads > 0) {
        if (!(tmp = malloc((size_t)mt->numel * sizeof(float))))
            return ffn_error(FFN_ERR_NOMEM, "%s: out of memory", path);
        out = tmp;
    }
    if (t->n_dims == 1 || (mt->ndim == 1)) { /* a vector: one row, any block size */
        st = ffn_ggml_dequantize_row(t->type, src, out, mt->numel);
    } else {
        for (int64_t r = 0; r < rows && st == FFN_OK; r++)
            st = ffn_ggml_dequantize_row(t->type, src + (size_t)r * row_bytes, out + r * cols, cols);
    }
    if (st) st = ffn_error_prefix(st, "%s: tensor %s", path, t->name);
    else st = check_values(path, t, out, src, row_bytes, row0, rows, cols); /* the file's order */
    if (st == FFN_OK && rope_heads > 0) {
        const int64_t Dh = mt->shape[0] / rope_heads;
        ckpt_permute_rope_rows(dst, tmp, rope_heads, Dh, mt->ndim == 2 ? mt->shape[1] : 1, 1);
    }
    free(tmp);
    if (st) return st;
    if (mapped) drop_mapped(src, t->n_dims == 1 || mt->ndim == 1 ? t->nbytes : nbytes);
    return FFN_OK;
}

static ffn_status load_weights(ffn_model *m, const gg_source *s, int64_t *borrowed) {
    const int llama = s->a->permute; /* q/k rows interleaved in the file */
    int64_t placed = 0;
    float *params = ffn_model_params(m, NULL);
    for (int64_t i = 0; i < s->plan.n; i++) {
        const gg_entry *e = &s->plan.e[i];
        ffn_gguf_tensor t;
        ffn_status st = ffn_gguf_find(s->f, e->gguf, &t);
        if (st) return st;
        if (e->kind == GG_ROPE_FREQS) continue; /* read into the config */
        if (e->n_fused > 0 && e->kind == GG_VECTOR) { /* q|k|v biases: decoded whole, then split */
            const int64_t n = t.ne[0];
            float *tmp = malloc((size_t)n * sizeof *tmp);
            if (!tmp) return ffn_error(FFN_ERR_NOMEM, "out of memory");
            st = ffn_ggml_dequantize_row(t.type, t.data, tmp, n);
            if (st) st = ffn_error_prefix(st, "%s: tensor %s", s->path, t.name);
            else st = check_values(s->path, &t, tmp, t.data, 0, 0, 1, n);
            int64_t at = 0;
            for (int x = 0; st == FFN_OK && x < e->n_fused; x++) {
                const ffn_model_tensor *mt = ffn_model_find_tensor(m, e->part[x]);
                if (!mt || at + mt->numel > n)
                    st = ffn_error(FFN_ERR_INTERNAL, "%s: tensor %s: no room for %s", s->path,
                                   t.name, e->part[x]);
                else memcpy(params + mt->offset, tmp + at, (size_t)mt->numel * sizeof *tmp);
                if (mt) at += mt->numel;
                placed++;
            }
            free(tmp);
            if (st) return st;
            continue;
        }
        if (e->n_fused > 0) { /* q|k|v or gate|up rows: each part from its rows */
            int64_t row0 = 0;
            for (int x = 0; x < e->n_fused; x++) {
                const ffn_model_tensor *mt = ffn_model_find_tensor(m, e->part[x]);
                if (!mt) return ffn_error(FFN_ERR_INTERNAL, "%s: no model tensor %s", s->path, e->part[x]);
                if ((st = place_tensor(m, s->path, e->part[x], &t, row0, 0, s->low_precision,
                                       s->mapped, borrowed))) return st;
                row0 += mt->numel / t.ne[0];
                placed++;
            }
            continue;
        }
        if (e->experts == 0) {
            if ((st = place_tensor(m, s->path, e->hf, &t, 0, llama ? e->rope_heads : 0, s->low_precision,
                                   s->mapped, borrowed))) return st;
            if (e->offset != 0.0) { /* a norm: vectors are always fp32 in the model */
                const ffn_model_tensor *mt = ffn_model_find_tensor(m, e->hf);
                for (int64_t k = 0; k < mt->numel; k++)
                    params[mt->offset + k] = (float)(params[mt->offset + k] - e->offset);
            }
            placed++;
            continue;
        }
        for (int64_t x = 0; x < e->experts; x++) {
            char hf[128];
            snprintf(hf, sizeof hf, e->hf, (long long)x);
            if ((st = place_tensor(m, s->path, hf, &t, x * e->ne[1], 0, s->low_precision, s->mapped,
                                   borrowed))) return st;
            placed++;
        }
    }
    if (placed != ffn_model_num_tensors(m))
        return ffn_error(FFN_ERR_INTERNAL, "%s: %lld tensors placed, the model has %lld", s->path,
                         (long long)placed, (long long)ffn_model_num_tensors(m));
    return FFN_OK;
}

ffn_status ffn_gguf_read_config(const char *path, ffn_model_config *cfg, ffn_checkpoint_info *info) {
    if (!path || !cfg) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_gguf_read_config: NULL argument");
    gg_source s;
    ffn_status st = source_open(path, NULL, 0, &s);
    if (st) return st;
    *cfg = s.cfg;
    if (info) fill_info(&s, info);
    source_close(&s);
    return FFN_OK;
}

static ffn_status load_model(ffn_ctx *ctx, const char *path, const void *data, size_t size,
                             const ffn_model_options *opt, ffn_model **model,
                             ffn_checkpoint_info *info) {
    *model = NULL;
    gg_source s;
    ffn_status st = source_open(path, data, size, &s);
    if (st) return st;
    ffn_model_options o = {.max_batch = 1};
    if (opt) o = *opt;
    if (o.max_batch <= 0) o.max_batch = 1;
    s.low_precision = o.low_precision && !o.training;
    const int64_t ctx_len = s.cfg.max_position_embeddings;
    if (o.max_seq <= 0) o.max_seq = ctx_len < CKPT_DEFAULT_MAX_SEQ ? ctx_len : CKPT_DEFAULT_MAX_SEQ;
    if (o.max_seq > ctx_len) o.max_seq = ctx_len;
    ffn_model *m = NULL;
    if ((st = ffn_model_create(ctx, &s.cfg, &o, &m))) st = ffn_error_prefix(st, "%s", path);
    int64_t borrowed = 0;
    if (st == FFN_OK) st = load_weights(m, &s, &borrowed);
    if (st == FFN_OK) st = ffn_model_params_changed(m);
    if (st == FFN_OK && info) fill_info(&s, info);
    if (st == FFN_OK && borrowed > 0) {
        /* the model reads its matrices from the mapping: it keeps the file */
        if ((st = model_q_keep(m, s.f, gguf_release)) == FFN_OK) s.f = NULL;
    }
    source_close(&s);
    if (st) {
        ffn_model_free(m);
        return st;
    }
    *model = m;
    return FFN_OK;
}

ffn_status ffn_gguf_load_model(ffn_ctx *ctx, const char *path, const ffn_model_options *opt,
                               ffn_model **model, ffn_checkpoint_info *info) {
    if (!ctx || !path || !model)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_gguf_load_model: NULL argument");
    return load_model(ctx, path, NULL, 0, opt, model, info);
}

ffn_status gguf_model_config_buffer(const void *data, size_t size, const char *name,
                                    ffn_model_config *cfg) {
    gg_source s;
    ffn_status st = source_open(name, data, size, &s);
    if (st) return st;
    *cfg = s.cfg;
    source_close(&s);
    return FFN_OK;
}

ffn_status gguf_model_load_buffer(ffn_ctx *ctx, const void *data, size_t size, const char *name,
                                  const ffn_model_options *opt, ffn_model **model) {
    return load_model(ctx, name, data, size, opt, model, NULL);
}

/* ---- any MODEL path -------------------------------------------------------- */

int ffn_checkpoint_is_gguf(const char *path) {
    if (!path) return 0;
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return 0;
    int fd;
    if (ffn_open_regular(path, &fd, NULL) != FFN_OK) return 0;
    char magic[4];
    ssize_t n = read(fd, magic, 4);
    close(fd);
    return n == 4 && !memcmp(magic, "GGUF", 4);
}

ffn_status ffn_checkpoint_read_config_any(const char *path, ffn_model_config *cfg,
                                          ffn_checkpoint_info *info) {
    if (ffn_checkpoint_is_gguf(path)) return ffn_gguf_read_config(path, cfg, info);
    return ffn_checkpoint_read_config(path, cfg, info);
}

ffn_status ffn_checkpoint_load_any(ffn_ctx *ctx, const char *path, const ffn_model_options *opt,
                                   ffn_model **model, ffn_checkpoint_info *info) {
    if (ffn_checkpoint_is_gguf(path)) return ffn_gguf_load_model(ctx, path, opt, model, info);
    return ffn_checkpoint_load_model(ctx, path, opt, model, info);
}

/* ---- writing ------------------------------------------------------------------ */

/* The architecture a model is written as, or NULL with *why set; hint: the
 * source's model_type (phi3 is llama's model in other tensors). */
static const gg_arch *gguf_arch_for(const ffn_model_config *c, const char *hint, const char **why) {
    *why = NULL;
    const int64_t D = c->hidden_size, Dh = ffn_cfg_head_dim(c);
    const int gemma = c->norm_weight_offset == 1.0 && c->embed_scale == (double)sqrtf((float)D);
    if (c->norm_type == FFN_NORM_LAYER) {
        /* gpt2 and starcoder2: LayerNorm, q/k/v and o biases, a dense GELU (tanh) MLP with biases */
        const int plain = c->attention_bias && c->attention_out_bias && c->mlp_type == FFN_MODEL_MLP_DENSE &&
                          c->mlp_bias && c->hidden_act == FFN_ACT_GELU_TANH && c->num_experts == 0 &&
                          c->qk_norm == FFN_QK_NORM_NONE && c->norm_weight_offset == 0.0 &&
                          (c->embed_scale == 0.0 || c->embed_scale == 1.0);
        if (!plain)
            *why = "LayerNorm outside gpt2's and starcoder2's form (q/k/v and o biases, a dense "
                   "gelu_pytorch_tanh MLP with biases, no experts or q/k norms)";
        else if (c->learned_positions)
            return Dh * c->num_attention_heads == D && c->num_key_value_heads == c->num_attention_heads
                       ? arch_find("gpt2") : (*why = "gpt2 with grouped or wider heads", NULL);
        else if (ffn_cfg_rotary_dim(c) != Dh || c->rope_scaling.type != FFN_ROPE_SCALING_NONE)
            *why = "starcoder2 with partial or scaled RoPE";
        else if (Dh * c->num_attention_heads != D)
            *why = "starcoder2 with heads wider than D / H";
        else return arch_find("starcoder2");
        return NULL;
    }
    if (c->learned_positions) *why = "learned position embeddings without LayerNorm";
    else if (c->attention_out_bias) *why = "a bias on the attention output";
    else if (c->mlp_type != FFN_MODEL_MLP_GATED) *why = "an FFN that is not gated";
    else if (c->hidden_act != (gemma ? FFN_ACT_GELU_TANH : FFN_ACT_SILU))
        *why = gemma ? "a Gemma model whose GeGLU is not gelu_pytorch_tanh"
                     : "an activation other than silu";
    else if (c->mlp_bias) *why = "biases in the FFN";
    else if (!gemma && (c->norm_weight_offset != 0.0 || (c->embed_scale != 0.0 && c->embed_scale != 1.0)))
        *why = "a norm weight offset or embedding scale other than Gemma's (1 and sqrt(D))";
    else if (ffn_cfg_rotary_dim(c) != Dh) *why = "partial rotary embeddings";
    else if (c->rope_scaling.type == FFN_ROPE_SCALING_DYNAMIC ||
             c->rope_scaling.type == FFN_ROPE_SCALING_YARN)
        *why = "dynamic or yarn RoPE scaling (ffn writes linear and llama3)";
    if (*why) return NULL;
    if (hint && !strcmp(hint, "phi3") && !gemma && c->num_experts == 0 && !c->attention_bias &&
        c->qk_norm == FFN_QK_NORM_NONE && Dh * c->num_attention_heads == D && !c->post_norms &&
        (c->rope_scaling.type == FFN_ROPE_SCALING_NONE ||
         c->rope_scaling.type == FFN_ROPE_SCALING_LONGROPE))
        return arch_find("phi3");
    if (c->rope_scaling.type == FFN_ROPE_SCALING_LONGROPE) {
        *why = "LongRoPE outside phi3 (llama.cpp reads rope_factors_*.weight for phi3 here)";
        return NULL;
    }
    const char *name = NULL;
    const int g3 = c->qk_norm == FFN_QK_NORM_HEAD;
    const int64_t L = c->num_hidden_layers, H = c->num_attention_heads;
    const double qscale = c->query_pre_attn_scalar > 0 ? c->query_pre_attn_scalar : (double)Dh;
    if (c->post_norms) { /* what llama.cpp's gemma2 / gemma3 run */
        if (!gemma || c->num_experts > 0 || c->attention_bias || c->qk_norm == FFN_QK_NORM_FULL)
            *why = "output norms (Gemma 2/3) without Gemma's norms, embeddings and GeGLU, or with "
                   "experts, attention biases or whole-projection q/k norms";
        else if (qscale != (double)(L == (g3 ? 62 : 46) ? D / H : Dh))
            *why = "a query_pre_attn_scalar other than the one llama.cpp derives (the head size; "
                   "D/H for 46-layer gemma2 and 62-layer gemma3)";
        else if (!g3 && (!(c->attn_logit_softcapping > 0) || !(c->final_logit_softcapping > 0)))
            *why = "gemma2 without attention and final soft-capping (llama.cpp's gemma2 always caps)";
        else if (!g3 && (c->sliding_window <= 0 || !c->tie_word_embeddings))
            *why = "gemma2 without a sliding window or with an untied head";
        else if (g3 && c->attn_logit_softcapping > 0)
            *why = "gemma3 with attention soft-capping (llama.cpp's gemma3 has none)";
        else if (c->sliding_window > 0 && c->sliding_window_pattern <= 0)
            *why = "a sliding window on every layer (gemma2/3 keep every pattern-th layer global)";
        else if (!g3 && c->rope_local_base_freq > 0 && c->rope_local_base_freq != c->rope_theta)
            *why = "gemma2 with a local RoPE base";
        else if (c->rope_scaling.type != FFN_ROPE_SCALING_NONE &&
                 c->rope_scaling.type != FFN_ROPE_SCALING_LINEAR)
            *why = "gemma2/3 with RoPE scaling other than linear";
        else return arch_find(g3 ? "gemma3" : "gemma2");
        return NULL;
    }
    if (c->attn_logit_softcapping > 0 || c->final_logit_softcapping > 0 || c->sliding_window > 0 ||
        c->rope_local_base_freq > 0 || c->query_pre_attn_scalar > 0) {
        *why = "soft-capping, a sliding window, a query scalar or a local RoPE base without "
               "Gemma 2/3's output norms";
        return NULL;
    }
    if (gemma) {
        if (c->num_experts > 0 || c->qk_norm != FFN_QK_NORM_NONE || c->attention_bias ||
            !c->tie_word_embeddings)
            *why = "Gemma norms and embeddings with experts, q/k norms, attention biases or an "
                   "untied head (llama.cpp's gemma has none)";
        else name = "gemma";
    } else if (c->qk_norm == FFN_QK_NORM_HEAD) {
        if (c->num_experts == 0) name = "qwen3";
        else if (c->moe_layer_freq == 1 && c->shared_expert_intermediate_size == 0 && c->norm_topk_prob)
            name = "qwen3moe";
        else *why = "q/k norms per head with experts other than qwen3moe's (every layer, no shared "
                    "expert, renormalised top-k)";
    } else if (c->qk_norm == FFN_QK_NORM_FULL) {
        if (c->num_experts > 0 && c->moe_layer_freq == 1 && c->shared_expert_intermediate_size == 0 &&
            !c->norm_topk_prob && !c->attention_bias && c->num_key_value_heads == c->num_attention_heads &&
            !c->tie_word_embeddings)
            name = "olmoe";
        else *why = "q/k norms over the whole projection outside OLMoE's form (experts in every "
                    "layer without renormalised top-k, G = H, no biases, an untied head)";
    } else if (c->num_experts > 0) {
        if (c->moe_layer_freq != 1) *why = "dense layers between MoE layers (decoder_sparse_step > 1)";
        else if (c->shared_expert_intermediate_size == 0 && c->norm_topk_prob && !c->attention_bias)
            name = "llama"; /* Mixtral */
        else if (c->shared_expert_intermediate_size > 0 && !c->norm_topk_prob)
            name = "qwen2moe";
        else if (c->shared_expert_intermediate_size > 0)
            *why = "a shared expert with renormalised top-k weights (llama.cpp's qwen2moe does "
                   "not renormalise)";
        else if (!c->norm_topk_prob)
            *why = "experts without renormalised top-k weights and no shared expert";
        else
            *why = "experts together with attention biases";
    } else {
        name = c->attention_bias ? "qwen2" : "llama";
    }
    if (name && c->rope_scaling.type == FFN_ROPE_SCALING_LLAMA3 && strcmp(name, "llama")) {
        *why = "llama3 RoPE scaling on a model that is not written as llama (rope_freqs.weight)";
        name = NULL;
    }
    return name ? arch_find(name) : NULL;
}

#define GG_TOKEN_NORMAL 1
#define GG_TOKEN_UNKNOWN 2
#define GG_TOKEN_CONTROL 3
#define GG_TOKEN_UNUSED 5
#define GG_TOKEN_BYTE 6

/* ---- the vocabulary of a GGUF written ----------------------------------------
 * Every export carries the model's vocabulary so that ffn and llama.cpp
 * encode a text to the ids the source model did:
 *   - a GGUF source: its tokenizer.* keys (and ffn.tokenizer*) copied
 *     verbatim;
 *   - ffn's own byte / char / word vocabulary: the tokenizer file itself
 *     in "ffn.tokenizer" (what ffn reads back), and for llama.cpp a llama
 *     (SPM) vocabulary without the dummy prefix (add_space_prefix false),
 *     spaces written as U+2581 as llama.cpp's SPM encoder sees them.  byte
 *     and char are exact in llama.cpp for text whose characters the
 *     vocabulary has; word pieces are not an encoding llama.cpp runs
 *     (report->vocab_warning says so);
 *   - a tokenizer.json: kept whole in "ffn.tokenizer_json" (+ its
 *     tokenizer_config.json), its pieces for llama.cpp (warned: llama.cpp
 *     gets no merges);
 *   - a llama2.c tokenizer.bin: its pieces and scores (SPM with the dummy
 *     prefix, llama2.c's own encoding);
 *   - none: byte tokens <0x00>..<0xFF> and unused fillers. */

#define GG_TOKEN_NORMAL 1
#define GG_TOKEN_UNKNOWN 2
#define GG_TOKEN_CONTROL 3
#define GG_TOKEN_UNUSED 5
#define GG_TOKEN_BYTE 6

/* Copy one metadata value of `src` into the writer under the same key. */
static ffn_status copy_kv(ffn_gguf_writer *w, const ffn_gguf_file *src, size_t i) {
    const char *key = ffn_gguf_kv_key(src, i);
    ffn_gguf_value v;
    ffn_status st = ffn_gguf_kv_value(src, i, &v);
    if (st) return st;
    switch (v.type) {
    case FFN_GGUF_VTYPE_UINT8: return ffn_gguf_writer_set_u8(w, key, v.v.u8);
    case FFN_GGUF_VTYPE_INT8: return ffn_gguf_writer_set_i8(w, key, v.v.i8);
    case FFN_GGUF_VTYPE_UINT16: return ffn_gguf_writer_set_u16(w, key, v.v.u16);
    case FFN_GGUF_VTYPE_INT16: return ffn_gguf_writer_set_i16(w, key, v.v.i16);
    case FFN_GGUF_VTYPE_UINT32: return ffn_gguf_writer_set_u32(w, key, v.v.u32);
    case FFN_GGUF_VTYPE_INT32: return ffn_gguf_writer_set_i32(w, key, v.v.i32);
    case FFN_GGUF_VTYPE_FLOAT32: return ffn_gguf_writer_set_f32(w, key, v.v.f32);
    case FFN_GGUF_VTYPE_BOOL: return ffn_gguf_writer_set_bool(w, key, v.v.boolean);
    case FFN_GGUF_VTYPE_UINT64: return ffn_gguf_writer_set_u64(w, key, v.v.u64);
    case FFN_GGUF_VTYPE_INT64: return ffn_gguf_writer_set_i64(w, key, v.v.i64);
    case FFN_GGUF_VTYPE_FLOAT64: return ffn_gguf_writer_set_f64(w, key, v.v.f64);
    case FFN_GGUF_VTYPE_STRING:
        if (strlen(v.v.str.ptr) != v.v.str.len)
            return ffn_error(FFN_ERR_UNSUPPORTED, "%s: key %s: a string with a NUL byte is not copied",
                             ffn_gguf_path(src), key);
        return ffn_gguf_writer_set_str(w, key, v.v.str.ptr);
    case FFN_GGUF_VTYPE_ARRAY: break;
    default: return ffn_error(FFN_ERR_FORMAT, "%s: key %s: value type %d", ffn_gguf_path(src), key, (int)v.type);
    }
    const ffn_gguf_array *a = &v.v.arr;
    if (a->type != FFN_GGUF_VTYPE_STRING && a->type != FFN_GGUF_VTYPE_ARRAY)
        return ffn_gguf_writer_set_array(w, key, a->type, a->data, a->count);
    if (a->type == FFN_GGUF_VTYPE_ARRAY)
        return ffn_error(FFN_ERR_UNSUPPORTED, "%s: key %s: an array of arrays is not copied",
                         ffn_gguf_path(src), key);
    const char **strs = a->count ? calloc((size_t)a->count, sizeof *strs) : NULL;
    if (a->count && !strs) return ffn_error(FFN_ERR_NOMEM, "out of memory");
    for (uint64_t k = 0; k < a->count && st == FFN_OK; k++) {
        ffn_gguf_value e;
        if ((st = ffn_gguf_array_get(a, k, &e))) break;
        if (strlen(e.v.str.ptr) != e.v.str.len)
            st = ffn_error(FFN_ERR_UNSUPPORTED, "%s: key %s[%llu]: a string with a NUL byte is not "
                           "copied", ffn_gguf_path(src), key, (unsigned long long)k);
        strs[k] = e.v.str.ptr;
    }
    if (st == FFN_OK) st = ffn_gguf_writer_set_str_array(w, key, strs, a->count);
    free(strs);
    return st;
}

static int is_vocab_key(const char *key) {
    return !strncmp(key, "tokenizer.", 10) || !strncmp(key, "ffn.tokenizer", 13);
}

/* The vocabulary keys of the GGUF at `path`, copied verbatim. */
static ffn_status copy_gguf_vocab(ffn_gguf_writer *w, const char *path, int64_t V) {
    ffn_gguf_file *src = NULL;
    ffn_status st = ffn_gguf_open(path, &src);
    if (st) return st;
    if (ffn_gguf_find_key(src, "tokenizer.ggml.tokens") < 0)
        st = ffn_error(FFN_ERR_MISSING, "%s: no tokenizer.ggml.tokens to copy", path);
    ffn_gguf_array a;
    if (st == FFN_OK && (st = ffn_gguf_get_array(src, "tokenizer.ggml.tokens", &a)) == FFN_OK &&
        (int64_t)a.count != V)
        st = ffn_error(FFN_ERR_CONFIG, "%s: tokenizer.ggml.tokens holds %llu tokens, the model %lld",
                       path, (unsigned long long)a.count, (long long)V);
    for (size_t i = 0; st == FFN_OK && i < ffn_gguf_kv_count(src); i++)
        if (is_vocab_key(ffn_gguf_kv_key(src, i))) st = copy_kv(w, src, i);
    ffn_gguf_close(src);
    return st;
}

/* s with every ' ' as U+2581 (malloc'd, NUL-terminated). */
static char *spaces_as_sp(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += s[i] == ' ' ? 3 : 1;
    char *o = malloc(k + 1);
    if (!o) return NULL;
    for (size_t i = 0, j = 0; i < n; i++) {
        if (s[i] == ' ') o[j++] = (char)0xE2, o[j++] = (char)0x96, o[j++] = (char)0x81;
        else o[j++] = s[i];
    }
    o[k] = '\0';
    return o;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* 1 when two of the V tokens are the same string (llama.cpp would map
 * both to one id). */
static int has_duplicates(char **tokens, int64_t V) {
    char **c = malloc((size_t)V * sizeof *c);
    if (!c) return 0;
    memcpy(c, tokens, (size_t)V * sizeof *c);
    qsort(c, (size_t)V, sizeof *c, cmp_str);
    int dup = 0;
    for (int64_t i = 1; i < V && !dup; i++) dup = !strcmp(c[i - 1], c[i]);
    free(c);
    return dup;
}

/* A tokenizer.json (and the tokenizer_config.json beside it) kept whole. */
static ffn_status embed_tokenizer_json(ffn_gguf_writer *w, const char *path) {
    char *json = NULL, *cfg = NULL;
    size_t n = 0, cn = 0;
    ffn_status st = ffn_text_read(path, &json, &n);
    if (st) return st;
    if (strlen(json) != n) st = ffn_error(FFN_ERR_FORMAT, "%s: a NUL byte in the file", path);
    if (st == FFN_OK) st = ffn_gguf_writer_set_str(w, FFN_GGUF_KEY_TOKENIZER_JSON, json);
    free(json);
    const char *slash = strrchr(path, '/');
    char cp[FFN_CHECKPOINT_PATH_MAX];
    int k = slash ? snprintf(cp, sizeof cp, "%.*s/tokenizer_config.json", (int)(slash - path), path)
                  : snprintf(cp, sizeof cp, "tokenizer_config.json");
    struct stat sb;
    if (st == FFN_OK && k > 0 && (size_t)k < sizeof cp && stat(cp, &sb) == 0 && S_ISREG(sb.st_mode) &&
        ffn_text_read(cp, &cfg, &cn) == FFN_OK && strlen(cfg) == cn)
        st = ffn_gguf_writer_set_str(w, FFN_GGUF_KEY_TOKENIZER_CONFIG, cfg);
    free(cfg);
    return st;
}

static int file_starts_with(const char *path, const char *magic) {
    int fd = -1;
    if (!path || ffn_open_regular(path, &fd, NULL) != FFN_OK) return 0;
    char b[8] = {0};
    size_t n = strlen(magic);
    ssize_t got = read(fd, b, n);
    close(fd);
    return got == (ssize_t)n && !memcmp(b, magic, n);
}

static ffn_status write_vocab(ffn_gguf_writer *w, const ffn_gguf_save_options *o, int64_t V,
                              ffn_gguf_save_report *report) {
    const ffn_vocab *voc = o->vocab;
    const char *warning = NULL, *kind = NULL;
    if (o->vocab_path && file_starts_with(o->vocab_path, "GGUF")) {
        ffn_status st = copy_gguf_vocab(w, o->vocab_path, V);
        if (st == FFN_OK && report) report->vocab_kind = "the source GGUF's tokenizer, copied";
        return st;
    }
    char **tokens = calloc((size_t)V, sizeof *tokens);
    float *scores = calloc((size_t)V, sizeof *scores);
    int32_t *types = calloc((size_t)V, sizeof *types);
    ffn_status st = FFN_OK;
    if (!tokens || !scores || !types) {
        st = ffn_error(FFN_ERR_NOMEM, "out of memory");
        goto done;
    }
    ffn_vocab_special sp = {-1, -1, -1, -1};
    const ffn_llama2c_tokenizer *l2c = voc ? ffn_vocab_llama2c(voc) : NULL;
    const ffn_tokenizer *own = voc ? ffn_vocab_tokenizer(voc) : NULL;
    const ffn_vocab_kind vk = voc ? ffn_vocab_get_kind(voc) : FFN_VOCAB_BYTE;
    const int bytes = own && vk == FFN_VOCAB_BYTE;
    if (voc) sp = ffn_vocab_specials(voc);
    if (!voc) kind = "byte tokens <0x00>..<0xFF> (MODEL has no vocabulary)";
    else if (l2c) kind = "llama2.c tokenizer.bin (SentencePiece-style, llama2.c's encoding)";
    else if (own) kind = vk == FFN_VOCAB_WORD ? "ffn word vocabulary" : vk == FFN_VOCAB_CHAR
                         ? "ffn char vocabulary" : "ffn byte vocabulary";
    else kind = "tokenizer.json, kept whole for ffn";
    if (own && vk == FFN_VOCAB_WORD)
        warning = "a word vocabulary is not an encoding llama.cpp runs: ffn reads this file's "
                  "vocabulary exactly (ffn.tokenizer), llama.cpp will not encode text to the same "
                  "ids (give it token ids, or export --format hf: its tokenizer.json is exact)";
    else if (own && vk == FFN_VOCAB_CHAR)
        warning = "llama.cpp encodes a text whose characters are all in the char vocabulary to "
                  "ffn's ids, but a character outside it (ffn: <unk>) has no byte token to fall "
                  "back on, which llama.cpp treats as a fatal error";
    else if (voc && !own && !l2c)
        warning = "the tokenizer.json is kept whole for ffn (ffn.tokenizer_json), but llama.cpp "
                  "gets its pieces without merges: llama.cpp will not encode text to the same ids";
    for (int64_t i = 0; i < V && st == FFN_OK; i++) {
        char buf[64];
        const char *txt = NULL;
        size_t len = 0;
        int sp_spaces = 0;
        types[i] = GG_TOKEN_NORMAL;
        if (l2c) {
            txt = ffn_llama2c_tokenizer_token(l2c, (int32_t)i, &len, &scores[i]);
            unsigned hx;
            if (txt && len == 6 && sscanf(txt, "<0x%2X>", &hx) == 1) types[i] = GG_TOKEN_BYTE;
        } else if (voc && i < ffn_vocab_size(voc)) {
            char b1[1];
            (void)b1;
            /* ffn's own: the piece; a tokenizer.json's: the token as the file writes it
             * ("Ġthe", "▁the", "<0x0A>"; holes become unused fillers) */
            if (own) txt = ffn_tokenizer_token(own, (int32_t)i, &len);
            else txt = ffn_vocab_token(voc, (int32_t)i, &len);
            sp_spaces = own != NULL; /* llama.cpp's SPM encoder sees spaces as U+2581 */
            if (bytes && len == 1 && txt[0] != ' ' && (int32_t)i != sp.unk) {
                snprintf(buf, sizeof buf, "<0x%02X>", (unsigned char)txt[0]);
                txt = buf;
                len = strlen(buf);
                types[i] = GG_TOKEN_BYTE;
            }
        } else if (!voc && i < 256) {
            snprintf(buf, sizeof buf, "<0x%02X>", (unsigned)i);
            txt = buf;
            len = strlen(buf);
            types[i] = GG_TOKEN_BYTE;
        }
        if (!txt || len == 0) {
            snprintf(buf, sizeof buf, "<unused%lld>", (long long)i);
            txt = buf;
            len = strlen(buf);
            types[i] = GG_TOKEN_UNUSED;
            sp_spaces = 0;
        }
        if ((int32_t)i == sp.unk) types[i] = GG_TOKEN_UNKNOWN;
        else if ((int32_t)i == sp.bos || (int32_t)i == sp.eos || (int32_t)i == sp.pad)
            types[i] = GG_TOKEN_CONTROL;
        if (memchr(txt, '\0', len)) {
            st = ffn_error(FFN_ERR_UNSUPPORTED, "token %lld holds a NUL byte, which a GGUF token "
                           "cannot", (long long)i);
            break;
        }
        tokens[i] = sp_spaces ? spaces_as_sp(txt, len) : strndup(txt, len);
        if (!tokens[i]) st = ffn_error(FFN_ERR_NOMEM, "out of memory");
    }
    if (st == FFN_OK && own && !warning && has_duplicates(tokens, V))
        warning = "the vocabulary holds U+2581 as well as a space, which llama.cpp's SentencePiece "
                  "encoder reads as one: llama.cpp will encode U+2581 as a space";
    if (st == FFN_OK) st = ffn_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    if (st == FFN_OK)
        st = ffn_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", (const char *const *)tokens,
                                           (uint64_t)V);
    if (st == FFN_OK)
        st = ffn_gguf_writer_set_array(w, "tokenizer.ggml.scores", FFN_GGUF_VTYPE_FLOAT32, scores,
                                       (uint64_t)V);
    if (st == FFN_OK)
        st = ffn_gguf_writer_set_array(w, "tokenizer.ggml.token_type", FFN_GGUF_VTYPE_INT32, types,
                                       (uint64_t)V);
    if (st == FFN_OK && sp.bos >= 0) st = ffn_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)sp.bos);
    if (st == FFN_OK && sp.eos >= 0) st = ffn_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)sp.eos);
    if (st == FFN_OK && sp.unk >= 0) st = ffn_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)sp.unk);
    if (st == FFN_OK && sp.pad >= 0) st = ffn_gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)sp.pad);
    if (st == FFN_OK) st = ffn_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", sp.bos >= 0);
    if (st == FFN_OK) st = ffn_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", 0);
    /* ffn's own vocabularies have no dummy prefix: neither may llama.cpp */
    if (st == FFN_OK && own) st = ffn_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", 0);
    if (st == FFN_OK && own) {
        char *text = NULL;
        size_t n = 0;
        if ((st = tokenizer_serialize(own, &text, &n)) == FFN_OK)
            st = ffn_gguf_writer_set_str(w, FFN_GGUF_KEY_TOKENIZER, text);
        free(text);
    }
    if (st == FFN_OK && voc && !own && !l2c) {
        if (!o->vocab_path || !file_starts_with(o->vocab_path, "{"))
            st = ffn_error(FFN_ERR_UNSUPPORTED, "a %s vocabulary is written to a GGUF from the "
                           "tokenizer.json it was read from: give its path (vocab_path)",
                           ffn_vocab_kind_name(vk));
        else
            st = embed_tokenizer_json(w, o->vocab_path);
    }
    if (st == FFN_OK && report) {
        report->vocab_warning = warning;
        report->vocab_kind = kind;
    }
done:
    if (tokens)
        for (int64_t i = 0; i < V; i++) free(tokens[i]);
    free(tokens);
    free(scores);
    free(types);
    return st;
}

static ffn_status write_metadata(ffn_gguf_writer *w, const ffn_model_config *c, const gg_arch *a,
                                 const ffn_gguf_save_options *o) {
    const char *arch = a->name;
    char key[96];
    ffn_status st = FFN_OK;
    int64_t ctx_len = c->max_position_embeddings;
    /* gpt2's position_embd has context_length rows: never capped */
    if (o->context_cap > 0 && o->context_cap < ctx_len && !a->positions) ctx_len = o->context_cap;
    const int64_t Fe = c->moe_intermediate_size > 0 ? c->moe_intermediate_size : c->intermediate_size;
#define U32(suffix, v)                                                                 \
    do {                                                                               \
        snprintf(key, sizeof key, "%s.%s", arch, suffix);                              \
        if (st == FFN_OK) st = ffn_gguf_writer_set_u32(w, key, (uint32_t)(v));         \
    } while (0)
#define F32(suffix, v)                                                                 \
    do {                                                                               \
        snprintf(key, sizeof key, "%s.%s", arch, suffix);                              \
        if (st == FFN_OK) st = ffn_gguf_writer_set_f32(w, key, (float)(v));            \
    } while (0)
    st = ffn_gguf_writer_set_str(w, "general.architecture", arch);
    if (st == FFN_OK) st = ffn_gguf_writer_set_str(w, "general.name", o->name ? o->name : "ffn");
    if (st == FFN_OK)
        st = ffn_gguf_writer_set_u32(w, "general.file_type", o->ftype ? o->ftype : ffn_ggml_file_type(o->type));
    if (st == FFN_OK && ffn_ggml_block_size(o->type) > 1)
        st = ffn_gguf_writer_set_u32(w, "general.quantization_version", 2);
    U32("context_length", ctx_len);
    U32("embedding_length", c->hidden_size);
    U32("block_count", c->num_hidden_layers);
    /* llama (Mixtral) and olmoe size their experts by feed_forward_length */
    U32("feed_forward_length", c->num_experts > 0 && a->experts_ff ? Fe : c->intermediate_size);
    U32("attention.head_count", c->num_attention_heads);
    U32("attention.head_count_kv", c->num_key_value_heads);
    if (a->layer_norm) F32("attention.layer_norm_epsilon", c->rms_norm_eps);
    else F32("attention.layer_norm_rms_epsilon", c->rms_norm_eps);
    F32("rope.freq_base", c->rope_theta);
    U32("rope.dimension_count", ffn_cfg_rotary_dim(c));
    U32("attention.key_length", ffn_cfg_head_dim(c));
    U32("attention.value_length", ffn_cfg_head_dim(c));
    if (c->rope_scaling.type == FFN_ROPE_SCALING_LONGROPE) { /* the factors: rope_factors_*.weight */
        U32("rope.scaling.original_context_length", c->rope_scaling.original_max_position_embeddings);
        F32("rope.scaling.attn_factor", ffn_rope_attention_factor(c));
    }
    if (c->rope_scaling.type == FFN_ROPE_SCALING_LINEAR) { /* llama3: rope_freqs.weight */
        snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
        if (st == FFN_OK) st = ffn_gguf_writer_set_str(w, key, "linear");
        F32("rope.scaling.factor", c->rope_scaling.factor);
    }
    if (a->post) { /* gemma2/3 (gguf_arch_for checked what llama.cpp can take) */
        if (c->attn_logit_softcapping > 0) F32("attn_logit_softcapping", c->attn_logit_softcapping);
        if (c->final_logit_softcapping > 0) F32("final_logit_softcapping", c->final_logit_softcapping);
        if (c->sliding_window > 0) { /* a window past the context slides nothing */
            U32("attention.sliding_window", c->sliding_window < ctx_len ? c->sliding_window : ctx_len);
            U32("attention.sliding_window_pattern", c->sliding_window_pattern);
            F32("rope.freq_base_swa", c->rope_local_base_freq > 0 ? c->rope_local_base_freq
                                                                  : c->rope_theta);
        }
    }
    U32("vocab_size", c->vocab_size);
    if (c->num_experts > 0) {
        U32("expert_count", c->num_experts);
        U32("expert_used_count", c->num_experts_per_tok);
        U32("expert_feed_forward_length", Fe);
        if (c->shared_expert_intermediate_size > 0)
            U32("expert_shared_feed_forward_length", c->shared_expert_intermediate_size);
    }
#undef U32
#undef F32
    return st;
}

void ffn_gguf_save_options_default(ffn_gguf_save_options *o) {
    memset(o, 0, sizeof *o);
    o->type = FFN_GGML_TYPE_F32;
}

/* *buf holds at least n floats (its old contents dropped); *cap its size. */
static ffn_status grow_floats(float **buf, int64_t *cap, int64_t n) {
    if (n <= *cap) return FFN_OK;
    free(*buf);
    *cap = n;
    if (!(*buf = malloc((size_t)n * sizeof(float)))) return ffn_error(FFN_ERR_NOMEM, "out of memory");
    return FFN_OK;
}

ffn_status ffn_gguf_save_model(ffn_model *model, const char *path, const ffn_gguf_save_options *opts,
                               ffn_gguf_save_report *report) {
    if (!model || !path) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_gguf_save_model: NULL argument");
    ffn_gguf_save_options o;
    if (opts) o = *opts;
    else ffn_gguf_save_options_default(&o);
    if (report) memset(report, 0, sizeof *report);
    const ffn_model_config *c = ffn_model_get_config(model);
    const char *why = NULL;
    const gg_arch *arch = gguf_arch_for(c, o.model_type, &why);
    if (!arch)
        return ffn_error(FFN_ERR_UNSUPPORTED, "%s: no GGUF architecture llama.cpp runs can express "
                         "this model: %s", path, why);
    if (o.ftype) {
        if (!ffn_ftype_name(o.ftype))
            return ffn_error(FFN_ERR_INVALID_ARG, "%s: file type %u is none of llama.cpp's mixes ffn "
                             "writes", path, (unsigned)o.ftype);
        o.type = ffn_ftype_base(o.ftype);
    } else if (!ffn_ggml_can_quantize(o.type) || o.type == FFN_GGML_TYPE_F64) {
        char list[256];
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: weight type %s: expected %s", path,
                         ffn_ggml_type_name(o.type),
                         ffn_ggml_type_list(FFN_GGML_ENCODES, " or ", list, sizeof list));
    }
    /* a tokenizer.json may hold fewer ids than the embedding (Qwen pads V): the
     * rest are written as unused tokens */
    if (o.vocab && (ffn_vocab_size(o.vocab) > c->vocab_size ||
                    (ffn_vocab_size(o.vocab) != c->vocab_size &&
                     (ffn_vocab_tokenizer(o.vocab) || ffn_vocab_llama2c(o.vocab)))))
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: the vocabulary has %lld tokens, the model %lld",
                         path, (long long)ffn_vocab_size(o.vocab), (long long)c->vocab_size);
    const int llama = arch->permute;
    /* the file's q/k order: interleaved for llama, rotate_half for qwen2* */
    const int permute = llama ? c->rope_style == FFN_ROPE_HALF : c->rope_style == FFN_ROPE_INTERLEAVED;
    gg_plan plan;
    ffn_status st = plan_build(c, arch, &plan);
    if (st) return st;
    ffn_gguf_writer *w = NULL;
    if ((st = ffn_gguf_writer_create(&w))) {
        plan_free(&plan);
        return st;
    }
    st = write_metadata(w, c, arch, &o);
    if (st == FFN_OK) st = write_vocab(w, &o, c->vocab_size, report);
    const float *params = ffn_model_params(model, NULL);
    float *buf = NULL;
    int64_t buf_cap = 0;
    ffn_ftype_shape mshape = {.n_layer = c->num_hidden_layers, .n_head = c->num_attention_heads,
                              .n_head_kv = c->num_key_value_heads, .n_expert = c->num_experts, .tied = 1};
    for (int64_t i = 0; i < plan.n; i++)
        if (!strcmp(plan.e[i].gguf, "output.weight")) mshape.tied = 0;
    for (int64_t i = 0; i < plan.n && st == FFN_OK; i++) {
        const gg_entry *e = &plan.e[i];
        int64_t numel = e->ne[0] * e->ne[1] * e->ne[2];
        int fell = 0; /* a matrix's type: the mix's choice, or o.type (llama.cpp's fallback for
                       * rows of no whole block) */
        const ffn_ggml_type etype = e->kind != GG_MATRIX ? FFN_GGML_TYPE_F32
                                    : o.ftype ? ffn_ftype_tensor_type(o.ftype, &mshape, e->gguf, e->ne[0], &fell)
                                    : ffn_type_fallback((ffn_ggml_type)o.type, e->ne[0], &fell);
        if (!ffn_ggml_can_quantize(etype)) {
            char list[256];
            st = ffn_error(FFN_ERR_UNSUPPORTED, "%s: tensor %s: %s gives it type %s, which ffn cannot "
                           "encode yet (it encodes %s)", path, e->gguf,
                           o.ftype ? ffn_ftype_name(o.ftype) : ffn_ggml_type_name((ffn_ggml_type)o.type),
                           ffn_ggml_type_name(etype),
                           ffn_ggml_type_list(FFN_GGML_ENCODES, " and ", list, sizeof list));
            break;
        }
        const float *src = NULL;
        const int64_t nparts = entry_parts(e);
        if (e->experts > 0 || e->n_fused > 0) {
            /* the experts of one kind (q, k, v; gate, up) are adjacent in the flat block */
            char hf[128];
            entry_part(e, 0, hf, sizeof hf);
            const ffn_model_tensor *t0 = ffn_model_find_tensor(model, hf);
            int64_t at = t0 ? t0->offset : 0;
            for (int64_t x = 0; t0 && x < nparts; x++) {
                entry_part(e, x, hf, sizeof hf);
                const ffn_model_tensor *tx = ffn_model_find_tensor(model, hf);
                if (!tx || tx->offset != at) t0 = NULL;
                else at += tx->numel;
            }
            if (!t0 || at - t0->offset != numel) {
                st = ffn_error(FFN_ERR_INTERNAL, "%s: the parts of %s are not adjacent", path, e->gguf);
                break;
            }
            src = params + t0->offset;
        } else {
            const ffn_model_tensor *t = ffn_model_find_tensor(model, e->hf);
            if (t) src = params + t->offset;
        }
        /* Low-precision tensors of the model (a GGUF loaded as it lies, a
         * model quantized in memory) are written as their bytes when the
         * type written is theirs (q/k rows moved whole), else decoded. */
        float *decoded = NULL;
        if (e->kind == GG_ROPE_FREQS) { /* f_j / the scaled frequency, as llama.cpp's converter */
            if (!(decoded = malloc((size_t)numel * sizeof(float)))) {
                st = ffn_error(FFN_ERR_NOMEM, "out of memory");
                break;
            }
            const int64_t R = ffn_cfg_rotary_dim(c);
            const ffn_rope_scaling *rs = &c->rope_scaling;
            if (rs->type == FFN_ROPE_SCALING_LONGROPE) /* phi3: the lists themselves */
                memcpy(decoded, strstr(e->gguf, "long") ? rs->long_factor : rs->short_factor,
                       (size_t)numel * sizeof(float));
            for (int64_t j = 0; rs->type == FFN_ROPE_SCALING_LLAMA3 && j < numel; j++)
                decoded[j] = (float)(pow(c->rope_theta, -2.0 * (double)j / (double)R) /
                                     ffn_rope_inv_freq(c, j, 0));
            src = decoded;
        }
        if (src && (e->kind == GG_MATRIX || e->kind == GG_ROUTER)) {
            const int64_t parts = nparts, cols = e->ne[0];
            const int64_t rows = e->ne[1] * e->ne[2] / parts; /* experts: each alike */
            const ffn_ggml_type want = e->kind == GG_ROUTER ? FFN_GGML_TYPE_F32 : etype;
            int n_low = 0, same = 1;
            const ffn_qweight *qw0 = NULL;
            for (int64_t x = 0; x < parts; x++) {
                char hf[128];
                entry_part(e, x, hf, sizeof hf);
                const ffn_qweight *qw = model_q_weight(model, ffn_model_find_tensor(model, hf));
                if (!qw) continue;
                if (!qw0) qw0 = qw;
                same &= qw->type == qw0->type;
                n_low++;
            }
            if (n_low == parts && same && qw0->type == want && e->n_fused == 0) {
                const size_t rb = qw0->row_bytes;
                unsigned char *raw = malloc((size_t)(rows * parts) * rb + 1);
                if (!raw) {
                    st = ffn_error(FFN_ERR_NOMEM, "out of memory");
                    break;
                }
                for (int64_t x = 0; x < parts; x++) {
                    char hf[128];
                    snprintf(hf, sizeof hf, e->hf, (long long)x);
                    const ffn_qweight *qw = model_q_weight(model, ffn_model_find_tensor(model, hf));
                    unsigned char *dst = raw + (size_t)(x * rows) * rb;
                    if (e->rope_heads > 0 && permute) {
                        /* model row h·Dh + p·Dh/2 + j -> file row h·Dh + 2j + p (llama), or back */
                        const int64_t Dh = rows / e->rope_heads;
                        for (int64_t h = 0; h < e->rope_heads; h++)
                            for (int64_t j = 0; j < Dh / 2; j++)
                                for (int64_t pp = 0; pp < 2; pp++) {
                                    int64_t half = h * Dh + pp * (Dh / 2) + j, inter = h * Dh + 2 * j + pp;
                                    memcpy(dst + (size_t)(llama ? inter : half) * rb,
                                           qw->data + (size_t)(llama ? half : inter) * rb, rb);
                                }
                    } else {
                        memcpy(dst, qw->data, (size_t)rows * rb);
                    }
                }
                st = ffn_gguf_writer_add_raw(w, e->gguf, want, e->n_dims, e->ne, raw,
                                             (size_t)(rows * parts) * rb);
                free(raw);
                if (st) st = ffn_error_prefix(st, "%s: tensor %s", path, e->gguf);
                if (report) {
                    report->n_tensors++;
                    report->n_fallback += fell;
                    report->n_by_type[want]++;
                }
                if (st == FFN_OK && o.progress) o.progress(o.progress_user, i + 1, plan.n);
                continue;
            }
            if (n_low > 0) { /* decoded to fp32, then written as every fp32 tensor is */
                if (!(decoded = malloc((size_t)numel * sizeof(float)))) {
                    st = ffn_error(FFN_ERR_NOMEM, "out of memory");
                    break;
                }
                float *dst = decoded;
                for (int64_t x = 0; x < parts && st == FFN_OK; x++) {
                    char hf[128];
                    entry_part(e, x, hf, sizeof hf);
                    const ffn_model_tensor *tx = ffn_model_find_tensor(model, hf);
                    const ffn_qweight *qw = model_q_weight(model, tx);
                    const int64_t prow = tx->numel / cols; /* fused parts differ */
                    if (!qw) memcpy(dst, params + tx->offset, (size_t)(prow * cols) * sizeof(float));
                    for (int64_t r = 0; qw && r < prow && st == FFN_OK; r++)
                        st = ffn_ggml_dequantize_row(qw->type, qw->data + (size_t)r * qw->row_bytes,
                                                     dst + r * cols, cols);
                    dst += prow * cols;
                }
                if (st) {
                    free(decoded);
                    st = ffn_error_prefix(st, "%s: tensor %s", path, e->gguf);
                    break;
                }
                src = decoded;
            }
        }
        if (!src || (e->rope_heads > 0 && permute)) {
            if ((st = grow_floats(&buf, &buf_cap, numel))) break;
            if (!src) /* qwen2* biases a model without attention biases does not have */
                memset(buf, 0, (size_t)numel * sizeof(float));
            else /* rotate_half -> interleaved for llama, the inverse for qwen2* */
                ckpt_permute_rope_rows(buf, src, e->rope_heads, e->ne[1 - (e->n_dims == 1)] /
                                       e->rope_heads, e->n_dims == 2 ? e->ne[0] : 1, !llama);
            src = buf;
        }
        if (e->offset != 0.0 && src) { /* gemma's norms: the file holds offset + w */
            if ((st = grow_floats(&buf, &buf_cap, numel))) break;
            for (int64_t k = 0; k < numel; k++) buf[k] = (float)(src[k] + e->offset);
            src = buf;
        }
        const ffn_ggml_type ty = etype;
        if (report) {
            report->n_tensors++;
            report->n_fallback += fell;
            report->n_by_type[ty]++;
            if (e->kind != GG_MATRIX) report->n_f32++;
        }
        st = ffn_gguf_writer_add_f32(w, e->gguf, ty, e->n_dims, e->ne, src);
        free(decoded);
        if (st) st = ffn_error_prefix(st, "%s: tensor %s", path, e->gguf);
        if (st == FFN_OK && o.progress) o.progress(o.progress_user, i + 1, plan.n);
    }
    free(buf);
    if (st == FFN_OK) st = ffn_gguf_writer_save(w, path);
    ffn_gguf_writer_free(w);
    plan_free(&plan);
    return st;
}
