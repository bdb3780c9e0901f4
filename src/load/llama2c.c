/* llama2c.c -- llama2.c checkpoints (.bin, the "legacy" layout) read and
 * written, and the llama2.c tokenizer.bin vocabulary: load, encode (BPE
 * merges by score), decode.  The formats are described in
 * include/ffn/checkpoint.h.  Hugging Face directories live in
 * hf_checkpoint.c.
 *
 * Letters: V vocab, D dim, F hidden_dim, L layers, H heads, G kv heads,
 * Dh = D/H head dim, T seq_len.  Files are little-endian (as is every CPU
 * this builds for). */
#include "load/checkpoint_internal.h"
#include "ffn/checkpoint.h"
#include "ffn/layer.h"
#include "ffn/model.h"
#include "base/open.h"
#include "ffn/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- mapping files ---------------------------------------------------------- */

ffn_status ckpt_map_file(const char *path, const void **data, size_t *size) {
    *data = NULL;
    *size = 0;
    ffn_mapped m;
    ffn_status st = ffn_map_regular(path, &m);
    if (st) return st;
    if (m.size == 0) return ffn_error(FFN_ERR_FORMAT, "%s: the file is empty", path);
    *data = m.map;
    *size = m.size;
    return FFN_OK;
}

void ckpt_unmap_file(const void *data, size_t size) {
    if (data) munmap((void *)data, size);
}

void ckpt_drop_pages(const void *p, size_t n) {
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || n == 0) return;
    uintptr_t a = (uintptr_t)p, b = a + n;
    a = (a + (uintptr_t)page - 1) & ~((uintptr_t)page - 1); /* whole pages inside only */
    b &= ~((uintptr_t)page - 1);
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

void ckpt_permute_rope_rows(float *dst, const float *src, int64_t n_heads, int64_t Dh,
                            int64_t cols, int to_half) {
    const int64_t half = Dh / 2;
    for (int64_t h = 0; h < n_heads; h++)
        for (int64_t j = 0; j < half; j++)
            for (int64_t k = 0; k < 2; k++) {
                int64_t inter = h * Dh + 2 * j + k, halfrow = h * Dh + k * half + j;
                int64_t from = to_half ? inter : halfrow, to = to_half ? halfrow : inter;
                memcpy(dst + to * cols, src + from * cols, (size_t)cols * sizeof(float));
            }
}

/* ---- the checkpoint header -------------------------------------------------- */

enum { L2C_HEADER_BYTES = 28 };

typedef struct l2c_header {
    int64_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
    int shared; /* vocab_size was positive: the classifier is the embedding */
} l2c_header;

/* The arrays of the file in order, in floats (per layer where `per_layer`). */
typedef struct l2c_layout {
    int64_t embed, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, freq, wcls;
    int64_t total; /* floats after the header */
} l2c_layout;

static ffn_status l2c_read_header(const void *buf, size_t size, const char *name, l2c_header *h) {
    if (size < L2C_HEADER_BYTES)
        return ffn_error(FFN_ERR_FORMAT,
                         "%s: %zu bytes: too short for a llama2.c checkpoint header (7 int32 = 28 "
                         "bytes)", name, size);
    int32_t v[7];
    memcpy(v, buf, sizeof v);
    if ((uint32_t)v[0] == 0x616b3432u) /* llama2.c export.py version 1/2: magic "ak42" */
        return ffn_error(FFN_ERR_UNSUPPORTED,
                         "%s: a llama2.c 'version %d' export (magic 0x616b3432); only the legacy "
                         "layout (seven int32 then fp32 arrays, no magic) is supported: re-export "
                         "it with llama2.c's legacy_export", name, v[1]);
    static const char *names[7] = {"dim", "hidden_dim", "n_layers", "n_heads",
                                   "n_kv_heads", "vocab_size", "seq_len"};
    for (int i = 0; i < 7; i++) {
        int64_t x = v[i];
        if (i == 5 && x < 0 && x != INT32_MIN) x = -x;
        if (x <= 0 || x == INT32_MIN)
            return ffn_error(FFN_ERR_FORMAT,
                             "%s: llama2.c header: %s is %d, expected a positive value (header: "
                             "%d %d %d %d %d %d %d)", name, names[i], v[i], v[0], v[1], v[2],
                             v[3], v[4], v[5], v[6]);
    }
    h->dim = v[0];
    h->hidden_dim = v[1];
    h->n_layers = v[2];
    h->n_heads = v[3];
    h->n_kv_heads = v[4];
    h->shared = v[5] > 0;
    h->vocab_size = v[5] > 0 ? v[5] : -(int64_t)v[5];
    h->seq_len = v[6];
    if (h->dim % h->n_heads)
        return ffn_error(FFN_ERR_FORMAT, "%s: llama2.c header: n_heads %lld does not divide dim %lld",
                         name, (long long)h->n_heads, (long long)h->dim);
    if ((h->dim / h->n_heads) % 2)
        return ffn_error(FFN_ERR_FORMAT,
                         "%s: llama2.c header: head size dim/n_heads = %lld is odd (RoPE needs "
                         "pairs)", name, (long long)(h->dim / h->n_heads));
    if (h->n_kv_heads > h->n_heads || h->n_heads % h->n_kv_heads)
        return ffn_error(FFN_ERR_FORMAT,
                         "%s: llama2.c header: n_kv_heads %lld does not divide n_heads %lld", name,
                         (long long)h->n_kv_heads, (long long)h->n_heads);
    return FFN_OK;
}

/* Sizes of every array, overflow-checked; the total must fit the file. */
static ffn_status l2c_compute_layout(const l2c_header *h, const char *name, l2c_layout *lay) {
    const int64_t D = h->dim, F = h->hidden_dim, L = h->n_layers, V = h->vocab_size;
    const int64_t Dh = D / h->n_heads, HD = h->n_heads * Dh, GD = h->n_kv_heads * Dh;
    int ovf = 0;
    int64_t t;
    ovf |= ffn_mul_i64(V, D, &lay->embed);
    ovf |= ffn_mul_i64(L, D, &lay->rms_att);
    ovf |= ffn_mul_i64(L, HD, &t) || ffn_mul_i64(t, D, &lay->wq);
    ovf |= ffn_mul_i64(L, GD, &t) || ffn_mul_i64(t, D, &lay->wk);
    lay->wv = lay->wk;
    lay->wo = lay->wq;
    lay->rms_ffn = lay->rms_att;
    ovf |= ffn_mul_i64(L, F, &t) || ffn_mul_i64(t, D, &lay->w1);
    lay->w2 = lay->w1;
    lay->w3 = lay->w1;
    lay->rms_final = D;
    ovf |= ffn_mul_i64(h->seq_len, Dh, &lay->freq); /* real and imag: T·Dh/2 each */
    lay->wcls = h->shared ? 0 : lay->embed;
    const int64_t parts[] = {lay->embed, lay->rms_att, lay->wq, lay->wk, lay->wv, lay->wo,
                             lay->rms_ffn, lay->w1, lay->w2, lay->w3, lay->rms_final,
                             lay->freq, lay->wcls};
    int64_t total = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) ovf |= ffn_add_i64(total, parts[i], &total);
    int64_t bytes;
    ovf |= ffn_mul_i64(total, 4, &bytes) || ffn_add_i64(bytes, L2C_HEADER_BYTES, &bytes);
    if (ovf)
        return ffn_error(FFN_ERR_FORMAT,
                         "%s: llama2.c header: the sizes overflow 64 bits (dim %lld, hidden_dim "
                         "%lld, n_layers %lld, vocab_size %lld, seq_len %lld)", name, (long long)D,
                         (long long)F, (long long)L, (long long)V, (long long)h->seq_len);
    lay->total = total;
    return FFN_OK;
}

ffn_status l2c_parse_header(const void *buf, size_t size, const char *name,
                            ffn_model_config *cfg) {
    l2c_header h;
    l2c_layout lay;
    /* Another format's magic first: its bytes read as a header give
     * nonsense fields ("n_heads is 0"). */
    ffn_sniff kind = ffn_sniff_bytes(buf, size);
    if (ffn_sniff_is_magic(kind) && kind != FFN_SNIFF_LLAMA2C_CHECKPOINT)
        return ffn_error(FFN_ERR_FORMAT, "%s is %s, not a llama2.c checkpoint; %s", name,
                         ffn_sniff_name(kind), ffn_sniff_advice(kind));
    if (kind == FFN_SNIFF_UNKNOWN && ffn_bytes_look_like_text(buf, size))
        return ffn_error(FFN_ERR_FORMAT, "%s is a text file, not a model (a model is a GGUF file, a "
                         "llama2.c .bin, a Hugging Face or ffn directory); text to train on goes to "
                         "ffn train --data, text to score to ffn eval --data", name);
    ffn_status st = l2c_read_header(buf, size, name, &h);
    if (st == FFN_OK) st = l2c_compute_layout(&h, name, &lay);
    if (st && kind == FFN_SNIFF_LLAMA2C_TOKENIZER)
        return ffn_error_prefix(st, "%s looks like a llama2.c tokenizer.bin (a vocabulary goes to "
                                "--tokenizer), not a checkpoint", name);
    if (st) return st;
    int64_t promised = L2C_HEADER_BYTES + 4 * lay.total;
    if ((uint64_t)promised != (uint64_t)size) {
        if (kind == FFN_SNIFF_LLAMA2C_TOKENIZER)
            return ffn_error(FFN_ERR_FORMAT, "%s looks like a llama2.c tokenizer.bin (a vocabulary "
                             "goes to --tokenizer), not a checkpoint: the file has %zu bytes but "
                             "read as a llama2.c header its first bytes promise %lld bytes", name,
                             size, (long long)promised);
        return ffn_error(FFN_ERR_FORMAT,
                         "%s: the file has %zu bytes but its llama2.c header (dim %lld, hidden_dim "
                         "%lld, n_layers %lld, n_heads %lld, n_kv_heads %lld, vocab_size %lld%s, "
                         "seq_len %lld) promises %lld bytes (28 header + fp32 weights + freq_cis); "
                         "%s", name, size, (long long)h.dim, (long long)h.hidden_dim,
                         (long long)h.n_layers, (long long)h.n_heads, (long long)h.n_kv_heads,
                         (long long)h.vocab_size, h.shared ? "" : " untied", (long long)h.seq_len,
                         (long long)promised,
                         (uint64_t)promised > (uint64_t)size ? "the file is truncated or the header is wrong"
                                                             : "trailing bytes or a wrong header");
    }
    ffn_model_config c;
    ffn_model_config_default(&c);
    c.vocab_size = h.vocab_size;
    c.hidden_size = h.dim;
    c.intermediate_size = h.hidden_dim;
    c.num_hidden_layers = h.n_layers;
    c.num_attention_heads = h.n_heads;
    c.num_key_value_heads = h.n_kv_heads;
    c.max_position_embeddings = h.seq_len;
    c.rope_theta = 10000.0;
    c.rms_norm_eps = 1e-5;
    c.tie_word_embeddings = h.shared;
    c.hidden_act = FFN_ACT_SILU;
    c.mlp_type = FFN_MODEL_MLP_GATED;
    c.mlp_bias = 0;
    c.attention_bias = 0;
    c.rope_style = FFN_ROPE_INTERLEAVED;
    c.num_experts = 0;
    if ((st = ffn_model_config_validate(&c))) return ffn_error_prefix(st, "%s", name);
    *cfg = c;
    return FFN_OK;
}

/* ---- reading ---------------------------------------------------------------- */

/* Copy `numel` floats of one array into tensor `tname`, in chunks whose
 * mapped pages are released as soon as they are copied (drop_pages), so a
 * large embedding never sits in memory twice. */
static ffn_status copy_into(ffn_model *m, const char *name, const char *tname, const float *src,
                            int64_t numel, int drop_pages) {
    const ffn_model_tensor *t = ffn_model_find_tensor(m, tname);
    if (!t || t->numel != numel)
        return ffn_error(FFN_ERR_INTERNAL, "%s: the model has no tensor %s of %lld floats", name,
                         tname, (long long)numel);
    float *p = ffn_model_params(m, NULL) + t->offset;
    const int64_t chunk = CKPT_CHUNK_FLOATS;
    for (int64_t i = 0; i < numel; i += chunk) {
        int64_t n = numel - i < chunk ? numel - i : chunk;
        memcpy(p + i, src + i, (size_t)n * sizeof(float));
        if (drop_pages) ckpt_drop_pages(src + i, (size_t)n * sizeof(float));
    }
    return FFN_OK;
}

ffn_status l2c_load_buffer(ffn_ctx *ctx, const void *buf, size_t size, const char *name,
                           const ffn_model_options *opt, int drop_pages, ffn_model **out) {
    *out = NULL;
    ffn_model_config cfg;
    ffn_status st = l2c_parse_header(buf, size, name, &cfg);
    if (st) return st;
    l2c_header h;
    l2c_layout lay;
    l2c_read_header(buf, size, name, &h);
    l2c_compute_layout(&h, name, &lay);
    ffn_model_options o = {.max_batch = 1, .max_seq = cfg.max_position_embeddings};
    if (opt) o = *opt;
    if (o.max_batch <= 0) o.max_batch = 1;
    if (o.max_seq <= 0) o.max_seq = cfg.max_position_embeddings < CKPT_DEFAULT_MAX_SEQ
                                        ? cfg.max_position_embeddings : CKPT_DEFAULT_MAX_SEQ;
    if (o.max_seq > cfg.max_position_embeddings) o.max_seq = cfg.max_position_embeddings;
    ffn_model *m = NULL;
    if ((st = ffn_model_create(ctx, &cfg, &o, &m))) return ffn_error_prefix(st, "%s", name);

    const int64_t D = h.dim, F = h.hidden_dim, L = h.n_layers;
    const int64_t Dh = D / h.n_heads, HD = h.n_heads * Dh, GD = h.n_kv_heads * Dh;
    const float *p = (const float *)((const char *)buf + L2C_HEADER_BYTES);
    char tn[160];
    /* Arrays in file order; each layer's slice goes to its named tensor. */
    /* per_layer 0: one array for the whole model */
    struct { const char *hf; int64_t numel; int per_layer; } arrays[] = {
        {"model.embed_tokens.weight", lay.embed, 0},
        {"input_layernorm.weight", D, 1},
        {"self_attn.q_proj.weight", HD * D, 1},
        {"self_attn.k_proj.weight", GD * D, 1},
        {"self_attn.v_proj.weight", GD * D, 1},
        {"self_attn.o_proj.weight", D * HD, 1},
        {"post_attention_layernorm.weight", D, 1},
        {"mlp.gate_proj.weight", F * D, 1},
        {"mlp.down_proj.weight", D * F, 1},
        {"mlp.up_proj.weight", F * D, 1},
        {"model.norm.weight", D, 0},
    };
    for (size_t a = 0; a < sizeof arrays / sizeof arrays[0] && st == FFN_OK; a++) {
        const int64_t count = arrays[a].per_layer ? L : 1;
        for (int64_t l = 0; l < count && st == FFN_OK; l++) {
            if (arrays[a].per_layer)
                snprintf(tn, sizeof tn, "model.layers.%lld.%s", (long long)l, arrays[a].hf);
            else
                snprintf(tn, sizeof tn, "%s", arrays[a].hf);
            st = copy_into(m, name, tn, p, arrays[a].numel, drop_pages);
            p += arrays[a].numel;
        }
    }
    p += lay.freq; /* freq_cis_real, freq_cis_imag: recomputed by the model */
    if (st == FFN_OK && !h.shared) st = copy_into(m, name, "lm_head.weight", p, lay.wcls, drop_pages);
    /* A NaN or infinity in the weights is a broken file, not a model. */
    if (st == FFN_OK) {
        int64_t n = 0;
        const float *w = ffn_model_params(m, &n);
        for (int64_t i = 0; i < n; i++)
            if (!isfinite(w[i])) {
                st = ffn_error(FFN_ERR_FORMAT, "%s: weight %lld of the model is %g (not finite)",
                               name, (long long)i, (double)w[i]);
                break;
            }
    }
    if (st == FFN_OK) st = ffn_model_params_changed(m);
    if (st) {
        ffn_model_free(m);
        return st;
    }
    *out = m;
    return FFN_OK;
}

/* ---- writing ---------------------------------------------------------------- */

static ffn_status write_all(FILE *f, const void *p, size_t n, const char *path) {
    if (n && fwrite(p, 1, n, f) != n)
        return ffn_error(FFN_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    return FFN_OK;
}

ffn_status ffn_checkpoint_save_llama2c(ffn_model *model, const char *path) {
    if (!model || !path) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_checkpoint_save_llama2c: NULL argument");
    const ffn_model_config *c = ffn_model_get_config(model);
    const char *why = NULL;
    if (c->num_experts > 0) why = "Mixture-of-Experts layers";
    else if (c->mlp_type != FFN_MODEL_MLP_GATED || c->hidden_act != FFN_ACT_SILU)
        why = "an FFN other than gated SiLU (SwiGLU)";
    else if (c->mlp_bias || c->attention_bias) why = "biases";
    else if (fabs(c->rms_norm_eps - 1e-5) > 1e-12) why = "rms_norm_eps other than 1e-5";
    else if (c->rope_theta != 10000.0) why = "rope_theta other than 10000";
    else if (c->rope_scaling.type != FFN_ROPE_SCALING_NONE || c->learned_positions)
        why = "scaled RoPE or learned positions";
    else if (c->head_dim > 0 || (c->partial_rotary_factor > 0 && c->partial_rotary_factor != 1.0))
        why = "a head_dim other than D/H or partial RoPE";
    else if (c->qk_norm != FFN_QK_NORM_NONE || c->norm_type != FFN_NORM_RMS ||
             c->norm_weight_offset != 0.0 || c->embed_scale != 0.0 || c->attention_out_bias)
        why = "q/k norms, LayerNorm, Gemma's norms or embedding scale, or an o_proj bias";
    else if (c->vocab_size > INT32_MAX || c->hidden_size > INT32_MAX ||
             c->intermediate_size > INT32_MAX || c->num_hidden_layers > INT32_MAX ||
             c->max_position_embeddings > INT32_MAX)
        why = "sizes beyond int32";
    if (why)
        return ffn_error(FFN_ERR_UNSUPPORTED,
                         "%s: the llama2.c format cannot express this model: %s (it holds gated "
                         "SiLU blocks without biases, RMSNorm eps 1e-5, RoPE theta 10000); export "
                         "it as a Hugging Face directory instead", path, why);
    const int64_t D = c->hidden_size, F = c->intermediate_size, L = c->num_hidden_layers;
    const int64_t H = c->num_attention_heads, G = c->num_key_value_heads, Dh = D / H;
    const int64_t V = c->vocab_size, T = c->max_position_embeddings;
    const float *params = ffn_model_params(model, NULL);
    float *perm = malloc((size_t)H * (size_t)Dh * (size_t)D * sizeof(float));
    float *freq = malloc((size_t)(Dh / 2) * sizeof(float));
    ffn_atomic_file af = {0};
    ffn_status st = FFN_OK;
    if (!perm || !freq) st = ffn_error(FFN_ERR_NOMEM, "out of memory");
    else st = ffn_atomic_open(&af, path);
    FILE *f = af.f;
    const char *tmp = af.tmp;
    if (st == FFN_OK) {
        int32_t hdr[7] = {(int32_t)D, (int32_t)F, (int32_t)L, (int32_t)H, (int32_t)G,
                          (int32_t)(c->tie_word_embeddings ? V : -V), (int32_t)T};
        st = write_all(f, hdr, sizeof hdr, tmp);
    }
    const ffn_model_tensor *t;
#define TENSOR(nm) (t = ffn_model_find_tensor(model, nm), t ? params + t->offset : NULL)
    char tn[160];
    const char *kinds[] = {"input_layernorm", "self_attn.q_proj", "self_attn.k_proj",
                           "self_attn.v_proj", "self_attn.o_proj", "post_attention_layernorm",
                           "mlp.gate_proj", "mlp.down_proj", "mlp.up_proj"};
    if (st == FFN_OK) {
        const float *e = TENSOR("model.embed_tokens.weight");
        st = e ? write_all(f, e, (size_t)(V * D) * 4, tmp) : ffn_error(FFN_ERR_INTERNAL, "no embedding");
    }
    for (int k = 0; k < 9 && st == FFN_OK; k++)
        for (int64_t l = 0; l < L && st == FFN_OK; l++) {
            snprintf(tn, sizeof tn, "model.layers.%lld.%s.weight", (long long)l, kinds[k]);
            const float *w = TENSOR(tn);
            if (!w) {
                st = ffn_error(FFN_ERR_INTERNAL, "%s: the model has no tensor %s", path, tn);
                break;
            }
            size_t n = (size_t)t->numel;
            /* llama2.c rotates consecutive pairs: permute a half-style q/k back. */
            if ((k == 1 || k == 2) && c->rope_style == FFN_ROPE_HALF) {
                ckpt_permute_rope_rows(perm, w, k == 1 ? H : G, Dh, D, 0);
                w = perm;
            }
            st = write_all(f, w, n * 4, tmp);
        }
    if (st == FFN_OK) {
        const float *w = TENSOR("model.norm.weight");
        st = w ? write_all(f, w, (size_t)D * 4, tmp) : ffn_error(FFN_ERR_INTERNAL, "no final norm");
    }
    /* freq_cis_real then freq_cis_imag (T, Dh/2), as llama2.c's export writes them */
    for (int part = 0; part < 2 && st == FFN_OK; part++)
        for (int64_t pos = 0; pos < T && st == FFN_OK; pos++) {
            for (int64_t j = 0; j < Dh / 2; j++) {
                double inv = 1.0 / pow(10000.0, (double)(2 * j) / (double)Dh);
                float fr = (float)inv, ang = (float)pos * fr;
                freq[j] = part == 0 ? cosf(ang) : sinf(ang);
            }
            st = write_all(f, freq, (size_t)(Dh / 2) * 4, tmp);
        }
    if (st == FFN_OK && !c->tie_word_embeddings) {
        const float *w = TENSOR("lm_head.weight");
        st = w ? write_all(f, w, (size_t)(V * D) * 4, tmp) : ffn_error(FFN_ERR_INTERNAL, "no lm_head");
    }
#undef TENSOR
    if (st == FFN_OK) st = ffn_atomic_commit(&af);
    else ffn_atomic_abort(&af);
    free(perm);
    free(freq);
    return st;
}
