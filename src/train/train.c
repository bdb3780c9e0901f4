/* train.c -- training a model: AdamW with decoupled weight decay, linear
 * warmup then cosine decay, global-norm gradient clipping, gradient
 * accumulation, the seeded batch sampler, evaluation, the training loop, the
 * training state in checkpoints and resuming from it; then sampling text
 * with the KV cache.  The crash-safe directory swap, config.json, the
 * weights file and loading a checkpoint for inference live in checkpoint.c.
 *
 * Letters: P parameters (the model's flat block), B batch, T sequence,
 * A micro-batches accumulated per step, C chunks of the gradient norm. */
#include "train/train_internal.h"

#include "base/open.h"
#include "ffn/checkpoint.h"
#include "ffn/data.h"
#include "ffn/layer.h"
#include "ffn/model.h"
#include "ffn/safetensors.h"
#include "ffn/train.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* ---- schedule ----------------------------------------------------------------- */

double train_lr_at(int64_t step, int64_t warmup, int64_t total, double lr, double min_lr) {
    if (warmup > 0 && step <= warmup) return lr * (double)step / (double)warmup;
    if (step >= total || total <= warmup) return step >= total ? min_lr : lr;
    double progress = (double)(step - warmup) / (double)(total - warmup);
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + cos(M_PI * progress));
}

/* ---- AdamW and the gradient norm ---------------------------------------------- */

/* One run of the update.  The order of operations follows torch.optim.AdamW
 * (single-tensor path) so that the parity test can hold a tight tolerance.
 * A tensor without decay multiplies by 1 - 0 = 1, which leaves p as it is.
 * With SSE2 four lanes at a time: the compiler keeps sqrtf scalar (its
 * errno path), and sqrtps / divps round exactly as sqrtss / divss, so the
 * lanes give the scalar loop's bits (no FMA: mul and add round apart). */
static void adamw_run(float *restrict param, float *restrict m, float *restrict v,
                      const float *restrict grad, int64_t n, const adamw_step *s) {
    const float b1 = s->beta1, b2 = s->beta2, eps = s->eps, scale = s->grad_scale;
    const float keep = 1.0f - s->decay, step_size = s->step_size, bc2_sqrt = s->bc2_sqrt;
    int64_t i = 0;
#ifdef __SSE2__
    const __m128 vb1 = _mm_set1_ps(b1), vb2 = _mm_set1_ps(b2), ve = _mm_set1_ps(eps);
    const __m128 vs = _mm_set1_ps(scale), vk = _mm_set1_ps(keep), vst = _mm_set1_ps(step_size);
    const __m128 vbc = _mm_set1_ps(bc2_sqrt), v1b1 = _mm_set1_ps(1.0f - b1);
    const __m128 v1b2 = _mm_set1_ps(1.0f - b2);
    for (; i + 4 <= n; i += 4) {
        __m128 g = _mm_mul_ps(_mm_loadu_ps(grad + i), vs);
        __m128 p = _mm_mul_ps(_mm_loadu_ps(param + i), vk);
        __m128 mi = _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(m + i), vb1), _mm_mul_ps(v1b1, g));
        __m128 vi = _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(v + i), vb2),
                               _mm_mul_ps(_mm_mul_ps(v1b2, g), g));
        _mm_storeu_ps(m + i, mi);
        _mm_storeu_ps(v + i, vi);
        __m128 denom = _mm_add_ps(_mm_div_ps(_mm_sqrt_ps(vi), vbc), ve);
        _mm_storeu_ps(param + i, _mm_sub_ps(p, _mm_mul_ps(vst, _mm_div_ps(mi, denom))));
    }
#endif
    for (; i < n; i++) {
        float g = grad[i] * scale;
        float p = param[i] * keep;
        float mi = m[i] * b1 + (1.0f - b1) * g;
        float vi = v[i] * b2 + (1.0f - b2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float denom = sqrtf(vi) / bc2_sqrt + eps;
        param[i] = p - step_size * (mi / denom);
    }
}

enum { ADAMW_BLOCK = 4096 };

void adamw_update(float *param, float *m, float *v, const float *grad, int64_t n,
                  const adamw_step *s) {
    const int64_t blocks = (n + ADAMW_BLOCK - 1) / ADAMW_BLOCK;
#pragma omp parallel for schedule(static) if (blocks > 1)
    for (int64_t b = 0; b < blocks; b++) {
        const int64_t lo = b * ADAMW_BLOCK, len = n - lo < ADAMW_BLOCK ? n - lo : ADAMW_BLOCK;
        adamw_run(param + lo, m + lo, v + lo, grad + lo, len, s);
    }
}

int64_t train_norm_chunks(int64_t n) { return (n + TRAIN_NORM_CHUNK - 1) / TRAIN_NORM_CHUNK; }

double train_sum_squares(const float *x, int64_t n, double *partials) {
    int64_t chunks = train_norm_chunks(n);
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; c++) {
        int64_t lo = c * TRAIN_NORM_CHUNK, hi = lo + TRAIN_NORM_CHUNK < n ? lo + TRAIN_NORM_CHUNK : n;
        /* eight running sums (element i into sum i % 8), added in order at
         * the end: independent chains instead of one add latency each */
        double acc[8] = {0};
        int64_t i = lo;
        for (; i + 8 <= hi; i += 8)
            for (int k = 0; k < 8; k++) acc[k] += (double)x[i + k] * (double)x[i + k];
        for (int k = 0; i < hi; i++, k++) acc[k] += (double)x[i] * (double)x[i];
        partials[c] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
    double total = 0.0;
    for (int64_t c = 0; c < chunks; c++) total += partials[c];
    return total;
}

/* ---- options: defaults, and one table for saving and comparing them ---------- */

void ffn_train_options_default(ffn_train_options *o) {
    memset(o, 0, sizeof *o);
    o->corpus_lang = FFN_LANG_EN;
    o->corpus_sentences = 20000;
    o->corpus_seed = 1;
    o->tokenizer = FFN_TOK_CHAR;
    o->val_fraction = 0.1;
    ffn_model_config_default(&o->model);
    o->steps = 600;
    o->seed = 1234;
    o->batch_size = 8;
    o->seq_len = 128;
    o->grad_accum = 1;
    o->lr = 1e-3;
    o->min_lr = 1e-4;
    o->warmup = -1;
    o->weight_decay = 0.1;
    o->beta1 = 0.9;
    o->beta2 = 0.95;
    o->eps = 1e-8;
    o->clip = 1.0;
    o->eval_every = 100;
    o->eval_batches = 8;
}

/* ---- which tensors are trained ------------------------------------------------ */

const char *ffn_train_only_name(ffn_train_only which) {
    switch (which) {
    case FFN_TRAIN_ALL: return "all";
    case FFN_TRAIN_FFN: return "ffn";
    case FFN_TRAIN_ATTENTION: return "attention";
    }
    return "?";
}

/* By name: "model.layers.{i}." then the sublayer's part. */
int ffn_train_only_trains(ffn_train_only which, const char *name) {
    if (which == FFN_TRAIN_ALL) return 1;
    if (!name || strncmp(name, "model.layers.", 13)) return 0;
    const char *p = name + 13;
    while (*p >= '0' && *p <= '9') p++;
    if (*p++ != '.') return 0;
    if (which == FFN_TRAIN_FFN)
        return !strncmp(p, "mlp.", 4) || !strcmp(p, "post_attention_layernorm.weight");
    if (which == FFN_TRAIN_ATTENTION)
        return !strncmp(p, "self_attn.", 10) || !strcmp(p, "input_layernorm.weight");
    return 0;
}

/* The warmup actually used (-1 resolves to min(100, steps / 10)). */
static int64_t resolved_warmup(const ffn_train_options *o) {
    if (o->warmup >= 0) return o->warmup;
    int64_t w = o->steps / 10;
    return w < 100 ? w : 100;
}

typedef enum { F_I64, F_U64, F_F64, F_INT } field_type;

/* A field of ffn_train_options (or of its model config) that the
 * trajectory depends on: saved in train_state's metadata and, when
 * `must_match`, required to agree on resume.  `flag` is the `ffn train`
 * flag that sets it, shown in errors; NULL for a field only the library
 * API sets (no flag to drop). */
typedef struct opt_field {
    const char *key;
    const char *flag;
    field_type type;
    size_t offset;
    int must_match;
    int optional;   /* absent from older checkpoints: keeps its default */
} opt_field;

#define OPT(key, flag, type, member, match) \
    { key, flag, type, offsetof(ffn_train_options, member), match, 0 }
#define OPT_NEWER(key, flag, type, member, match) \
    { key, flag, type, offsetof(ffn_train_options, member), match, 1 }
static const opt_field opt_fields[] = {
    OPT("tokenizer", "--tokenizer", F_INT, tokenizer, 1),
    OPT("max_vocab", "--max-vocab", F_I64, max_vocab, 1),
    OPT("val_fraction", "--val-fraction", F_F64, val_fraction, 1),
    OPT("corpus_lang", "--corpus", F_INT, corpus_lang, 0),
    OPT("corpus_sentences", "--corpus-sentences", F_I64, corpus_sentences, 0),
    OPT("corpus_seed", NULL, F_U64, corpus_seed, 0),
    OPT("steps", "--steps", F_I64, steps, 0),
    OPT("seed", "--seed", F_U64, seed, 1),
    OPT("batch_size", "--batch-size", F_I64, batch_size, 1),
    OPT("seq_len", "--seq-len", F_I64, seq_len, 1),
    OPT("grad_accum", "--grad-accum", F_I64, grad_accum, 1),
    OPT("lr", "--lr", F_F64, lr, 1),
    OPT("min_lr", "--min-lr", F_F64, min_lr, 1),
    OPT("warmup", "--warmup", F_I64, warmup, 1),
    OPT("weight_decay", "--weight-decay", F_F64, weight_decay, 1),
    OPT("beta1", "--beta1", F_F64, beta1, 1),
    OPT("beta2", "--beta2", F_F64, beta2, 1),
    OPT("eps", "--eps", F_F64, eps, 1),
    OPT("clip", "--clip", F_F64, clip, 1),
    OPT("eval_every", "--eval-every", F_I64, eval_every, 0),
    OPT("eval_batches", "--eval-batches", F_I64, eval_batches, 1),
    OPT("save_every", "--save-every", F_I64, save_every, 0),
    OPT_NEWER("train_only", "--train-only", F_INT, train_only, 1),
    OPT_NEWER("precision", "--precision", F_INT, precision, 1),
    /* The model: every field but vocab_size and max_position_embeddings,
     * which follow from the tokenizer and seq_len. */
    OPT("hidden_size", "--hidden-size", F_I64, model.hidden_size, 1),
    OPT("intermediate_size", "--intermediate-size", F_I64, model.intermediate_size, 1),
    OPT("num_hidden_layers", "--num-hidden-layers", F_I64, model.num_hidden_layers, 1),
    OPT("num_attention_heads", "--num-attention-heads", F_I64, model.num_attention_heads, 1),
    OPT("num_key_value_heads", "--num-key-value-heads", F_I64, model.num_key_value_heads, 1),
    OPT("rope_theta", "--rope-theta", F_F64, model.rope_theta, 1),
    OPT("rms_norm_eps", NULL, F_F64, model.rms_norm_eps, 1),
    OPT("tie_word_embeddings", "--tie-word-embeddings", F_INT, model.tie_word_embeddings, 1),
    OPT("hidden_act", "--hidden-act", F_INT, model.hidden_act, 1),
    OPT("mlp_type", "--mlp-type", F_INT, model.mlp_type, 1),
    OPT("mlp_bias", NULL, F_INT, model.mlp_bias, 1),
    OPT("attention_bias", NULL, F_INT, model.attention_bias, 1),
    OPT("rope_style", NULL, F_INT, model.rope_style, 1),
    OPT("num_experts", "--num-experts", F_I64, model.num_experts, 1),
    OPT("num_experts_per_tok", "--num-experts-per-tok", F_I64, model.num_experts_per_tok, 1),
    OPT("moe_intermediate_size", "--moe-intermediate-size", F_I64, model.moe_intermediate_size, 1),
    OPT("moe_layer_freq", "--moe-layer-freq", F_I64, model.moe_layer_freq, 1),
    OPT("norm_topk_prob", NULL, F_INT, model.norm_topk_prob, 1),
    OPT("router_aux_loss_coef", NULL, F_F64, model.router_aux_loss_coef, 1),
    OPT("router_z_loss_coef", NULL, F_F64, model.router_z_loss_coef, 1),
    OPT("shared_expert_intermediate_size", NULL, F_I64,
        model.shared_expert_intermediate_size, 1),
};
#undef OPT
#undef OPT_NEWER
#define N_OPT_FIELDS (sizeof opt_fields / sizeof opt_fields[0])

/* Enums are stored as int (gcc and clang use int for these enums). */
_Static_assert(sizeof(ffn_act) == sizeof(int) && sizeof(ffn_model_mlp) == sizeof(int) &&
                   sizeof(ffn_tokenizer_mode) == sizeof(int) && sizeof(ffn_lang) == sizeof(int) &&
                   sizeof(ffn_rope_style) == sizeof(int) && sizeof(ffn_train_only) == sizeof(int) &&
                   sizeof(ffn_precision) == sizeof(int),
               "enum fields are read as int");

static void field_format(const opt_field *f, const ffn_train_options *o, char *buf, size_t n) {
    const char *p = (const char *)o + f->offset;
    switch (f->type) {
    case F_I64: { int64_t v; memcpy(&v, p, sizeof v); snprintf(buf, n, "%lld", (long long)v); break; }
    case F_U64: { uint64_t v; memcpy(&v, p, sizeof v); snprintf(buf, n, "%llu", (unsigned long long)v); break; }
    case F_F64: { double v; memcpy(&v, p, sizeof v); snprintf(buf, n, "%.17g", v); break; }
    case F_INT: { int v; memcpy(&v, p, sizeof v); snprintf(buf, n, "%d", v); break; }
    }
}

/* Human-readable value for error messages (enum names where known). */
static void field_describe(const opt_field *f, const ffn_train_options *o, char *buf, size_t n) {
    const char *p = (const char *)o + f->offset;
    int v = 0;
    if (f->type == F_INT) memcpy(&v, p, sizeof v);
    if (!strcmp(f->key, "tokenizer")) snprintf(buf, n, "%s", ffn_tokenizer_mode_name((ffn_tokenizer_mode)v));
    else if (!strcmp(f->key, "train_only")) snprintf(buf, n, "%s", ffn_train_only_name((ffn_train_only)v));
    else if (!strcmp(f->key, "precision")) snprintf(buf, n, "%s", ffn_precision_name((ffn_precision)v));
    else if (!strcmp(f->key, "hidden_act")) snprintf(buf, n, "%s", ffn_act_name((ffn_act)v));
    else if (!strcmp(f->key, "mlp_type"))
        snprintf(buf, n, "%s", v == FFN_MODEL_MLP_NONE ? "none" : v == FFN_MODEL_MLP_DENSE ? "dense" : "gated");
    else if (f->type == F_F64) {
        double d;
        memcpy(&d, p, sizeof d);
        snprintf(buf, n, "%g", d);
    } else field_format(f, o, buf, n);
}

static int field_parse(const opt_field *f, ffn_train_options *o, const char *s) {
    char *p = (char *)o + f->offset, *end = NULL;
    errno = 0;
    switch (f->type) {
    case F_I64: { long long v = strtoll(s, &end, 10); int64_t x = v; memcpy(p, &x, sizeof x); break; }
    case F_U64: { unsigned long long v = strtoull(s, &end, 10); uint64_t x = v; memcpy(p, &x, sizeof x); break; }
    case F_F64: { double v = strtod(s, &end); memcpy(p, &v, sizeof v); break; }
    case F_INT: { long v = strtol(s, &end, 10); int x = (int)v; memcpy(p, &x, sizeof x); break; }
    }
    return !errno && end && end != s && *end == '\0';
}

static int field_equal(const opt_field *f, const ffn_train_options *a, const ffn_train_options *b) {
    size_t n = f->type == F_INT ? sizeof(int) : 8;
    return memcmp((const char *)a + f->offset, (const char *)b + f->offset, n) == 0;
}

size_t ffn_train_options_text(const ffn_train_options *o, char *buf, size_t n) {
    size_t at = 0;
    if (n) buf[0] = '\0';
    for (size_t i = 0; o && i < N_OPT_FIELDS; i++) {
        char v[64];
        field_format(&opt_fields[i], o, v, sizeof v);
        int w = snprintf(at < n ? buf + at : NULL, at < n ? n - at : 0, "%s=%s\n", opt_fields[i].key, v);
        if (w > 0) at += (size_t)w;
    }
    return at;
}

/* ---- the trainer's state ------------------------------------------------------ */

typedef struct trainer {
    ffn_ctx *ctx;
    ffn_train_options o;      /* a copy; strings borrowed from the caller */
    int64_t warmup;           /* resolved */
    const ffn_train_callbacks *cb;

    /* data */
    char *text_owned;         /* when we read or generated the text */
    const char *text;
    size_t text_len;
    char data_source[1024];   /* "file:PATH", "text", "corpus:en:20000:1" */
    char resume_path[1024];   /* the checkpoint's data file when resuming without one */
    uint64_t fingerprint;     /* FNV-1a 64 of the text */
    ffn_vocab *vocab;         /* built from the text, or the model's (init, resume) */
    char *vocab_file;         /* a llama2.c tokenizer.bin's bytes, copied into the run */
    size_t vocab_file_len;
    char init_source[1024];   /* the --init model (absolute path), "" for none */
    int32_t *ids;             /* (n_tokens): train [0, n_train), val after */
    int64_t n_tokens, n_train, n_val;

    /* model and optimizer (tensor parallel: the rank's share; the whole
     * model, its optimizer and moments kept in full* for the checkpoints) */
    ffn_model *model;
    ffn_model *full;
    unsigned char *held;      /* (tensors) sharded state in place: 1 = this rank holds it */
    ffn_adamw *full_opt;
    float *full_moments;
    int64_t full_np;
    float *zero_all;          /* ZeRO-1, during a save: the rank's whole m and v, gathered */
    int64_t *zfull_moff;      /* ZeRO-1 over held tensors: the whole held layout (moff, */
    int64_t zfull_k;          /* n_held) a save gathers the moments into */
    /* sharded state, a streamed save (gather_tensor; the tensors tile the
     * block in table order): piece p of 3 · tensors is tensor p % nt's m,
     * v, then parameters, each from its holder as the writer writes it */
    int streamed;
    int st_parts;             /* ZeRO over held tensors, no held_gatherv: each tensor's m or v
                               * all-gathered over its group as its piece comes */
    const float *st_mom;      /* the held layout's m (v at + st_k) */
    const int64_t *st_moff;
    int64_t st_k, st_next;    /* the next piece */
    float *st_buf, *zwhole;   /* one tensor received; ZeRO: the held moments put together */
    int64_t st_cap;
    ffn_adamw *opt;
    float *moments;           /* (2, P): the optimizer's block */
    int64_t n_params;
    int32_t *batch_tokens;    /* (B, T) */
    int32_t *batch_targets;   /* (B, T) */
    ffn_rng rng;

    /* progress */
    int64_t step;             /* steps done */
    int64_t tokens_seen;
    double *loss_hist;        /* (step) */
    int64_t hist_cap;
    int64_t *eval_step;
    double *eval_loss;
    int64_t n_evals, eval_cap;
    double train_seconds;     /* time inside training steps in this run */
    FILE *metrics;            /* a --log outside the run directory, written live */
    const char *out_dir;      /* the caller's out_dir (on every rank; t->o.out_dir: writer only) */
    int log_in_dir;           /* the log is DIR/metrics.jsonl, written with each save */
    char *log;                /* its lines so far (log_len bytes) */
    size_t log_len, log_cap;
} trainer;

/* Data parallelism (ffn_train_dist): this rank and the number of ranks. */
static int64_t dp_size(const trainer *t) { return t->o.dist ? t->o.dist->size : 1; }
static int64_t dp_rank(const trainer *t) { return t->o.dist ? t->o.dist->rank : 0; }

static ffn_status dp_agree(const trainer *t, ffn_status st) {
    return t->o.dist && t->o.dist->agree ? t->o.dist->agree(t->o.dist->user, st) : st;
}

static ffn_status dp_sum_f64(const trainer *t, double *v, int64_t n) {
    return t->o.dist ? t->o.dist->allreduce_f64(t->o.dist->user, v, n) : FFN_OK;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t fnv1a64(const char *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
    return h;
}

static void moments_free(float *m);

static void trainer_free(trainer *t) {
    if (t->metrics) fclose(t->metrics);
    free(t->log);
    free(t->text_owned);
    ffn_vocab_free(t->vocab);
    free(t->vocab_file);
    free(t->ids);
    ffn_model_free(t->model);
    ffn_adamw_free(t->opt);
    ffn_model_free(t->full);
    ffn_adamw_free(t->full_opt);
    FFN_FREE_ALL(t->held, t->zfull_moff, t->st_buf, t->batch_tokens, t->batch_targets, t->loss_hist,
                 t->eval_step, t->eval_loss);
    moments_free(t->zwhole);
    memset(t, 0, sizeof *t);
}

static ffn_status validate_options(const ffn_train_options *o) {
#define NEED(cond, ...) \
    do { if (!(cond)) return ffn_error(FFN_ERR_CONFIG, __VA_ARGS__); } while (0)
    NEED(o->steps >= 1 && o->steps <= 1000000000, "steps: expected 1 .. 1e9, got %lld", (long long)o->steps);
    NEED(o->stop_at >= 0, "stop_at: expected >= 0, got %lld", (long long)o->stop_at);
    NEED(o->batch_size >= 1 && o->batch_size <= 65536, "batch_size: expected 1 .. 65536, got %lld", (long long)o->batch_size);
    NEED(o->seq_len >= 1 && o->seq_len <= 1048576, "seq_len: expected 1 .. 1048576, got %lld", (long long)o->seq_len);
    NEED(o->grad_accum >= 1 && o->grad_accum <= 65536, "grad_accum: expected 1 .. 65536, got %lld", (long long)o->grad_accum);
    NEED(isfinite(o->lr) && o->lr >= 0, "lr: expected a finite number >= 0, got %g", o->lr);
    NEED(isfinite(o->min_lr) && o->min_lr >= 0 && o->min_lr <= o->lr,
         "min_lr: expected 0 .. lr (%g), got %g", o->lr, o->min_lr);
    NEED(o->warmup >= -1, "warmup: expected >= 0 (or -1 for the default), got %lld", (long long)o->warmup);
    NEED(isfinite(o->weight_decay) && o->weight_decay >= 0, "weight_decay: expected >= 0, got %g", o->weight_decay);
    NEED(o->beta1 >= 0 && o->beta1 < 1, "beta1: expected [0, 1), got %g", o->beta1);
    NEED(o->beta2 >= 0 && o->beta2 < 1, "beta2: expected [0, 1), got %g", o->beta2);
    NEED(o->eps > 0 && isfinite(o->eps), "eps: expected > 0, got %g", o->eps);
    NEED(isfinite(o->clip) && o->clip >= 0, "clip: expected >= 0 (0 = off), got %g", o->clip);
    NEED(o->eval_every >= 0, "eval_every: expected >= 0, got %lld", (long long)o->eval_every);
    NEED(o->eval_batches >= 1 && o->eval_batches <= 100000, "eval_batches: expected 1 .. 100000, got %lld", (long long)o->eval_batches);
    NEED(o->save_every >= 0, "save_every: expected >= 0, got %lld", (long long)o->save_every);
    NEED(o->val_fraction > 0 && o->val_fraction < 1, "val_fraction: expected (0, 1), got %g", o->val_fraction);
    NEED(o->max_vocab >= 0, "max_vocab: expected >= 0, got %lld", (long long)o->max_vocab);
    NEED(o->precision >= FFN_PRECISION_FP32 && o->precision <= FFN_PRECISION_BF16,
         "precision: expected fp32 or bf16, got %d", (int)o->precision);
    NEED(o->train_only >= FFN_TRAIN_ALL && o->train_only <= FFN_TRAIN_ATTENTION,
         "train_only: expected all, ffn or attention, got %d", (int)o->train_only);
    NEED(o->corpus_sentences >= 1 && o->corpus_sentences <= 10000000,
         "corpus_sentences: expected 1 .. 10000000, got %lld", (long long)o->corpus_sentences);
#undef NEED
    return FFN_OK;
}

/* ---- data ---------------------------------------------------------------------- */

static ffn_status load_text(trainer *t) {
    const ffn_train_options *o = &t->o;
    ffn_status st;
    if (o->text) {
        if (o->text_len == 0) return ffn_error(FFN_ERR_INVALID_ARG, "training text: empty");
        t->text = o->text;
        t->text_len = o->text_len;
        snprintf(t->data_source, sizeof t->data_source, "text");
    } else if (o->data_path) {
        st = ffn_text_read(o->data_path, &t->text_owned, &t->text_len);
        /* a model or a vocabulary given as text: name it, not its first bad byte */
        ffn_sniff kind = st == FFN_OK ? ffn_sniff_bytes(t->text_owned, t->text_len) : FFN_SNIFF_UNKNOWN;
        if (st == FFN_OK && ffn_sniff_is_magic(kind) && kind != FFN_SNIFF_JSON &&
            kind != FFN_SNIFF_PICKLE)
            st = ffn_error(FFN_ERR_FORMAT, "--data %s is %s, not text to train on; %s", o->data_path,
                           ffn_sniff_name(kind), ffn_sniff_advice(kind));
        if (st != FFN_OK) return st;
        t->text = t->text_owned;
        /* The absolute path, so that a resume from another directory finds it. */
        char *abs = realpath(o->data_path, NULL);
        snprintf(t->data_source, sizeof t->data_source, "file:%s", abs ? abs : o->data_path);
        free(abs);
    } else {
        ffn_corpus *c = NULL;
        st = ffn_corpus_generate(o->corpus_lang, o->corpus_seed, o->corpus_sentences, &c);
        if (st != FFN_OK) return st;
        t->text_owned = c->text; /* take the text, free the rest */
        t->text_len = (size_t)c->n_bytes;
        c->text = NULL;
        ffn_corpus_free(c);
        t->text = t->text_owned;
        snprintf(t->data_source, sizeof t->data_source, "corpus:%s:%lld:%llu",
                 ffn_lang_name(o->corpus_lang), (long long)o->corpus_sentences,
                 (unsigned long long)o->corpus_seed);
    }
    t->fingerprint = fnv1a64(t->text, t->text_len);
    return FFN_OK;
}

static const char *data_name(const trainer *t) {
    return t->o.text ? "training text" : t->o.data_path ? t->o.data_path : "built-in corpus";
}

/* The text's ids.  A llama2.c vocabulary encodes line by line (its BPE
 * merges cost the square of what one call encodes; each line gets
 * llama2.c's dummy-prefix space, as a prompt does); ffn's in one call. */
static ffn_status encode_text(trainer *t) {
    if (ffn_vocab_get_kind(t->vocab) != FFN_VOCAB_LLAMA2C)
        return ffn_vocab_encode(t->vocab, t->text, t->text_len, 0, &t->ids, &t->n_tokens);
    int64_t n = 0, cap = 0;
    int32_t *all = NULL;
    ffn_status st = FFN_OK;
    for (size_t at = 0; at < t->text_len && st == FFN_OK;) {
        const char *nl = memchr(t->text + at, '\n', t->text_len - at);
        size_t len = nl ? (size_t)(nl - (t->text + at)) + 1 : t->text_len - at;
        int32_t *ids = NULL;
        int64_t m = 0;
        st = ffn_vocab_encode(t->vocab, t->text + at, len, 0, &ids, &m);
        if (st == FFN_OK && n + m > cap) {
            int64_t c = cap ? cap : 4096;
            while (c < n + m) c *= 2;
            int32_t *p = realloc(all, (size_t)c * sizeof *p);
            if (p) all = p, cap = c;
            else st = ffn_error(FFN_ERR_NOMEM, "out of memory (token ids)");
        }
        if (st == FFN_OK && m > 0) memcpy(all + n, ids, (size_t)m * sizeof *ids), n += m;
        free(ids);
        at += len;
    }
    if (st != FFN_OK) {
        free(all);
        return st;
    }
    t->ids = all;
    t->n_tokens = n;
    return FFN_OK;
}

/* Tokenize (building the vocabulary unless a checkpoint gave one) and split. */
static ffn_status tokenize(trainer *t) {
    ffn_status st;
    if (!t->vocab) {
        ffn_tokenizer *tok = NULL;
        st = ffn_tokenizer_build(t->o.tokenizer, t->text, t->text_len, t->o.max_vocab, &tok);
        if (st == FFN_OK) st = ffn_vocab_from_tokenizer(tok, &t->vocab);
        if (st != FFN_OK) return ffn_error_prefix(st, "%s", data_name(t));
    }
    st = encode_text(t);
    if (st != FFN_OK) return ffn_error_prefix(st, "%s", data_name(t));
    int64_t need = t->o.seq_len + 1;
    st = ffn_tokens_split(t->n_tokens, t->o.val_fraction, &t->n_train, &t->n_val);
    if (st != FFN_OK || t->n_train < need || t->n_val < need)
        return ffn_error(FFN_ERR_CONFIG,
                         "%s: text too short: %zu bytes give %lld %s tokens, split into %lld for "
                         "training and %lld held out, and each part needs at least one context of "
                         "seq_len + 1 = %lld tokens (use a longer text or a smaller --seq-len)",
                         data_name(t), t->text_len, (long long)t->n_tokens,
                         ffn_vocab_kind_name(ffn_vocab_get_kind(t->vocab)),
                         (long long)t->n_train, (long long)t->n_val, (long long)need);
    return FFN_OK;
}

/* B windows of T+1 training tokens at random offsets.  Data parallel:
 * every rank draws the P·B offsets one process with batch P·B draws and
 * keeps rows [rank·B, (rank+1)·B). */
/* Pipeline stages: the step's micro-batches drawn first, micro-batch a at
 * a · B · T of the batch buffers (which then hold grad_accum of them). */
static int pipelined(const trainer *t) { return t->o.dist && t->o.dist->pipeline; }

static void sample_batch_at(trainer *t, int64_t at);
static void sample_batch(trainer *t) { sample_batch_at(t, 0); }
static void sample_batch_at(trainer *t, int64_t at) {
    const int64_t B = t->o.batch_size, T = t->o.seq_len, P = dp_size(t), r = dp_rank(t);
    int32_t *tokens = t->batch_tokens + at, *targets = t->batch_targets + at;
    const uint64_t span = (uint64_t)(t->n_train - T); /* offsets 0 .. n_train - T - 1 */
    for (int64_t g = 0; g < P * B; g++) {
        int64_t off = (int64_t)ffn_rng_below(&t->rng, span);
        if (g / B != r) continue;
        int64_t b = g % B;
        memcpy(tokens + b * T, t->ids + off, (size_t)T * sizeof(int32_t));
        memcpy(targets + b * T, t->ids + off + 1, (size_t)T * sizeof(int32_t));
    }
}

/* Held-out cross-entropy over eval_batches fixed batches: windows evenly
 * spaced over the held-out part, the same every time. */
static ffn_status evaluate(trainer *t, double *val_loss) {
    /* Data parallel: batch k is the P·B windows one process with batch P·B
     * evaluates, and each rank takes its B of them. */
    const int64_t B = t->o.batch_size, T = t->o.seq_len, P = dp_size(t), r = dp_rank(t);
    const int32_t *val = t->ids + t->n_train;
    const int64_t windows = t->o.eval_batches * B * P, last = t->n_val - T - 1;
    double sum = 0.0;
    for (int64_t k = 0; k < t->o.eval_batches; k++) {
        for (int64_t b = 0; b < B; b++) {
            int64_t w = (k * P + r) * B + b;
            int64_t off = windows > 1 ? (int64_t)((double)w * (double)last / (double)(windows - 1)) : 0;
            memcpy(t->batch_tokens + b * T, val + off, (size_t)T * sizeof(int32_t));
            memcpy(t->batch_targets + b * T, val + off + 1, (size_t)T * sizeof(int32_t));
        }
        ffn_model_loss loss;
        ffn_status st = pipelined(t)
                            ? t->o.dist->pipeline_eval(t->o.dist->user, t->model, t->batch_tokens,
                                                       t->batch_targets, B, T, &loss.ce)
                            : ffn_model_eval_loss(t->model, t->batch_tokens, t->batch_targets, B,
                                                  T, &loss);
        if (st != FFN_OK) return st;
        sum += loss.ce;
    }
    ffn_status st = dp_sum_f64(t, &sum, 1);
    if (st != FFN_OK) return st;
    *val_loss = sum / (double)(t->o.eval_batches * P);
    return FFN_OK;
}

/* ---- the vocabulary of a model (--init, resume) ---------------------------------- */

/* Read the vocabulary file at `path` (ffn's tokenizer.txt or a llama2.c
 * tokenizer.bin, told apart by ffn_vocab_parse) for a model of V tokens; a
 * tokenizer.bin's bytes are kept, to be copied into the run directory as
 * they are. */
static ffn_status load_vocab_file(trainer *t, const char *path, int64_t V) {
    int fd = -1;
    struct stat sb;
    ffn_status st = ffn_open_regular(path, &fd, &sb);
    if (st != FFN_OK) return st;
    if (sb.st_size <= 0 || (uint64_t)sb.st_size > FFN_TEXT_MAX_BYTES) {
        close(fd);
        return ffn_error(FFN_ERR_FORMAT, "%s: a vocabulary file of %lld bytes (expected 1 .. %llu)",
                         path, (long long)sb.st_size, (unsigned long long)FFN_TEXT_MAX_BYTES);
    }
    size_t n = (size_t)sb.st_size, got = 0;
    char *buf = malloc(n);
    if (!buf) {
        close(fd);
        return ffn_error(FFN_ERR_NOMEM, "out of memory (%s)", path);
    }
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (got != n) {
        free(buf);
        return ffn_error(FFN_ERR_IO, "%s: cannot read (%zu of %zu bytes)", path, got, n);
    }
    st = ffn_vocab_parse(buf, n, path, V, &t->vocab);
    if (st == FFN_OK && ffn_vocab_get_kind(t->vocab) == FFN_VOCAB_LLAMA2C) {
        t->vocab_file = buf;
        t->vocab_file_len = n;
    } else free(buf);
    return st;
}

/* --init: the model (config and weights) and its vocabulary. */
static ffn_status load_init(trainer *t) {
    const ffn_train_options *o = &t->o;
    ffn_model_options mopt = {.max_batch = o->batch_size, .max_seq = o->seq_len, .training = 1,
                              .precision = o->precision};
    ffn_checkpoint_info info;
    ffn_status st = ffn_checkpoint_load_any(t->ctx, o->init_path, &mopt, &t->model, &info);
    if (st != FFN_OK) return ffn_error_prefix(st, "--init %s", o->init_path);
    const ffn_model_config *cfg = ffn_model_get_config(t->model);
    if (o->seq_len > cfg->max_position_embeddings)
        return ffn_error(FFN_ERR_CONFIG, "--init %s: seq_len %lld is longer than the model's context "
                         "(max_position_embeddings %lld); pass --seq-len %lld or less",
                         o->init_path, (long long)o->seq_len,
                         (long long)cfg->max_position_embeddings,
                         (long long)cfg->max_position_embeddings);
    const char *vp = o->init_tokenizer ? o->init_tokenizer
                     : info.tokenizer_path[0] ? info.tokenizer_path : NULL;
    if (!vp)
        return ffn_error(FFN_ERR_MISSING, "--init %s: no vocabulary found beside the model (a "
                         "llama2.c tokenizer.bin, or ffn's tokenizer.txt in a run directory): "
                         "give its file with --init-tokenizer FILE", o->init_path);
    st = load_vocab_file(t, vp, cfg->vocab_size);
    if (st != FFN_OK) return ffn_error_prefix(st, "--init %s: its vocabulary", o->init_path);
    t->o.model = *cfg; /* recorded in train_state, compared on resume */
    char *abs = realpath(o->init_path, NULL);
    snprintf(t->init_source, sizeof t->init_source, "%s", abs ? abs : o->init_path);
    free(abs);
    return FFN_OK;
}

/* ---- the optimizer object ------------------------------------------------------ */

struct ffn_adamw {
    ffn_model *model;
    float *params, *grads;  /* (P) the model's blocks */
    int64_t n_params;
    float *moments;         /* (2, P): m then v, one block */
    double *norm_partials;  /* (C) */
    double lr, min_lr, weight_decay, beta1, beta2, eps, clip;
    int64_t warmup, steps;
    unsigned char *frozen;  /* (tensors): 1 = never updated; NULL when all are trained */
    const ffn_train_dist *tp; /* tensor parallel: the whole model's norm (grad_sq) */
    const ffn_model *tp_full;
    int64_t lo, hi;           /* the moments cover params [lo, hi) (ZeRO-1: this rank's share) */
    const ffn_train_dist *zero; /* ZeRO-1: the norm's sum and the parameters' all-gather */
    int64_t *moff;            /* (tensors) sharded state: tensor i's moments at m + moff[i], or
                               * -1 when another rank holds it; NULL: the layout of the params */
    int64_t n_held;           /* with moff: the floats held (m, then v at m + n_held) */
    /* ZeRO-1 over the held tensors (zh set; with moff): this rank updates
     * [zlo[i], zlo[i] + zlen[i]) of held tensor i (its moments at moff[i]);
     * zgrp, zvoff: the tensor's group and place in that group's block of
     * zsize[g] floats over zP[g] ranks */
    const ffn_train_dist *zh;
    int64_t *zlo, *zlen, *zgrp, *zvoff;
    int64_t zsize[2], zP[2];
};

/* The moments' blocks: private anonymous pages, zero and untouched until
 * written (a rank's share costs only what it writes), page-aligned; the
 * size sits in the first 64 bytes. */
static float *moments_alloc(int64_t floats) {
    size_t bytes;
    if (floats < 0 || ffn_mul_size((size_t)floats, sizeof(float), &bytes) || bytes > SIZE_MAX - 64)
        return NULL;
    bytes += 64;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    *(size_t *)p = bytes;
    return (float *)((char *)p + 64);
}
static void moments_free(float *m) {
    if (!m) return;
    void *p = (char *)m - 64;
    munmap(p, *(size_t *)p);
}


static int decays(ffn_tensor_kind kind) {
    return kind != FFN_TENSOR_NORM && kind != FFN_TENSOR_ATTN_BIAS && kind != FFN_TENSOR_MLP_BIAS;
}

ffn_status ffn_adamw_create(ffn_model *model, const ffn_train_options *o, ffn_adamw **out) {
    if (!model || !o || !out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_adamw_create: NULL argument");
    *out = NULL;
    ffn_status st = validate_options(o);
    if (st != FFN_OK) return st;
    ffn_adamw *a = calloc(1, sizeof *a);
    if (!a) return ffn_error(FFN_ERR_NOMEM, "out of memory");
    a->model = model;
    a->params = ffn_model_params(model, &a->n_params);
    a->hi = a->n_params;
    a->grads = ffn_model_grads(model, NULL);
    if (!a->grads) {
        free(a);
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_adamw_create: the model has no gradients (create it with training = 1)");
    }
    size_t bytes;
    if (ffn_mul_size((size_t)a->n_params, 2 * sizeof(float), &bytes)) {
        int64_t n = a->n_params;
        free(a);
        return ffn_error(FFN_ERR_OVERFLOW, "moments: 2 x %lld floats overflow", (long long)n);
    }
    a->moments = moments_alloc(2 * a->n_params);
    a->norm_partials = malloc((size_t)train_norm_chunks(a->n_params) * sizeof(double) + 8);
    if (!a->moments || !a->norm_partials) {
        ffn_adamw_free(a);
        return ffn_error(FFN_ERR_NOMEM, "out of memory (optimizer moments, %zu bytes)", bytes);
    }
    if (o->train_only != FFN_TRAIN_ALL) {
        const int64_t nt = ffn_model_num_tensors(model);
        int64_t trained = 0;
        a->frozen = calloc((size_t)nt + 1, 1);
        if (!a->frozen) {
            ffn_adamw_free(a);
            return ffn_error(FFN_ERR_NOMEM, "out of memory");
        }
        for (int64_t i = 0; i < nt; i++) {
            a->frozen[i] = !ffn_train_only_trains(o->train_only, ffn_model_tensor_at(model, i)->name);
            trained += !a->frozen[i];
        }
        if (trained == 0) {
            ffn_adamw_free(a);
            return ffn_error(FFN_ERR_CONFIG, "train_only %s: the model has no such tensor to train "
                             "(mlp_type none has no FFN)", ffn_train_only_name(o->train_only));
        }
    }
    a->lr = o->lr;
    a->min_lr = o->min_lr;
    a->weight_decay = o->weight_decay;
    a->beta1 = o->beta1;
    a->beta2 = o->beta2;
    a->eps = o->eps;
    a->clip = o->clip;
    a->warmup = resolved_warmup(o);
    a->steps = o->steps;
    *out = a;
    return FFN_OK;
}

void ffn_adamw_free(ffn_adamw *a) {
    if (!a) return;
    moments_free(a->moments);
    FFN_FREE_ALL(a->norm_partials, a->frozen, a->moff, a->zlo, a->zlen, a->zgrp, a->zvoff, a);
}

float *ffn_adamw_moments(ffn_adamw *a, int64_t *n_params) {
    if (n_params) *n_params = a ? a->n_params : 0;
    return a ? a->moments : NULL;
}

/* ZeRO over the held tensors: each rank's part of held tensor i (counts,
 * then displacements from the tensor's start, Pg each). */
static void held_zero_parts(const ffn_adamw *a, int64_t i, int *cd) {
    const int64_t g = a->zgrp[i], Pg = a->zP[g], v0 = a->zvoff[i];
    const int64_t v1 = v0 + ffn_model_tensor_at(a->model, i)->numel;
    for (int64_t r = 0; r < Pg; r++) {
        int64_t base = a->zsize[g] / Pg, extra = a->zsize[g] % Pg;
        int64_t f = r * base + (r < extra ? r : extra), e = f + base + (r < extra);
        int64_t lo = f > v0 ? f : v0, hi = e < v1 ? e : v1;
        cd[r] = hi > lo ? (int)(hi - lo) : 0;
        cd[Pg + r] = hi > lo ? (int)(lo - v0) : 0;
    }
}

/* ZeRO-1 over the held tensors: every rank's part of each held tensor to
 * every rank of its group, in place at where[i] (collective). */
static ffn_status held_zero_allgather(const ffn_adamw *a, float *const *where) {
    const int64_t nt = ffn_model_num_tensors(a->model);
    const int64_t P = a->zP[0] > a->zP[1] ? a->zP[0] : a->zP[1];
    int *cd = malloc((size_t)(2 * P + 1) * sizeof *cd);
    if (!cd) return ffn_error(FFN_ERR_NOMEM, "out of memory");
    ffn_status st = FFN_OK;
    for (int64_t i = 0; i < nt && st == FFN_OK; i++) {
        if (!where[i] || a->zgrp[i] < 0 || a->zP[a->zgrp[i]] < 2) continue;
        held_zero_parts(a, i, cd);
        st = a->zh->held_allgatherv(a->zh->user, (int)a->zgrp[i], where[i], cd, cd + a->zP[a->zgrp[i]]);
    }
    free(cd);
    return st;
}

/* ZeRO-2 over the held tensors: the outside of this rank's part of each
 * held tensor's gradient given back (zero, pages returned). */
static void held_zero_release(const ffn_adamw *a, float *g) {
    for (int64_t i = 0; i < ffn_model_num_tensors(a->model); i++) {
        if (a->zgrp[i] < 0) continue;
        const ffn_model_tensor *ten = ffn_model_tensor_at(a->model, i);
        ffn_release_floats(g + ten->offset, a->zlo[i]);
        ffn_release_floats(g + ten->offset + a->zlo[i] + a->zlen[i], ten->numel - a->zlo[i] - a->zlen[i]);
    }
}

/* ZeRO-2 over the held tensors: each held tensor's gradient
 * reduce-scattered over its group (collective), the rest given back. */
static ffn_status held_zero_reduce_scatter(const ffn_adamw *a, float *g) {
    const int64_t nt = ffn_model_num_tensors(a->model);
    const int64_t P = a->zP[0] > a->zP[1] ? a->zP[0] : a->zP[1];
    int *cd = malloc((size_t)(2 * P + 1) * sizeof *cd);
    if (!cd) return ffn_error(FFN_ERR_NOMEM, "out of memory");
    ffn_status st = FFN_OK;
    for (int64_t i = 0; i < nt && st == FFN_OK; i++) {
        if (a->zgrp[i] < 0 || a->zP[a->zgrp[i]] < 2) continue; /* an expert held alone: complete */
        held_zero_parts(a, i, cd);
        st = a->zh->held_reduce_scatter(a->zh->user, (int)a->zgrp[i],
                                        g + ffn_model_tensor_at(a->model, i)->offset, cd);
    }
    free(cd);
    if (st == FFN_OK) held_zero_release(a, g);
    return st;
}

/* The update of ffn_adamw_step, without telling the model (the trainer
 * times the two apart). */
static ffn_status adamw_apply(ffn_adamw *a, int64_t step, double *lr_out, double *norm_out) {
    const int64_t n_tensors = ffn_model_num_tensors(a->model);
    /* Frozen tensors: their gradients are dropped before the norm, so
     * clipping measures what is trained (clip_grad_norm_ over the trained
     * parameters), and they are skipped below (no update, no decay). */
    for (int64_t i = 0; a->frozen && i < n_tensors; i++) {
        const ffn_model_tensor *ten = ffn_model_tensor_at(a->model, i);
        if (!a->frozen[i] || (a->moff && a->moff[i] < 0)) continue;
        if (a->zh && a->zh->held_reduce_scatter) continue; /* left out of the norm instead */
        /* ZeRO: the range's part (ZeRO-2 keeps no other) */
        int64_t off = ten->offset > a->lo ? ten->offset : a->lo;
        int64_t end = ten->offset + ten->numel < a->hi ? ten->offset + ten->numel : a->hi;
        if (end > off) memset(a->grads + off, 0, (size_t)(end - off) * sizeof(float));
    }
    /* clip_grad_norm_: scale by clip / (norm + 1e-6) when that is below 1. */
    double sq;
    if (a->zh && a->zh->held_reduce_scatter) { /* ZeRO-2, held: the parts' squares, summed */
        sq = 0;
        for (int64_t i = 0; i < n_tensors; i++)
            if (a->zgrp[i] >= 0 && a->zlen[i] > 0 && (!a->frozen || !a->frozen[i]))
                sq += train_sum_squares(a->grads + ffn_model_tensor_at(a->model, i)->offset + a->zlo[i],
                                        a->zlen[i], a->norm_partials);
        ffn_status st = a->zh->allreduce_f64(a->zh->user, &sq, 1);
        if (st != FFN_OK) return st;
    } else if (a->tp && a->tp->grad_sq) {
        ffn_status st = a->zero ? a->tp->grad_sq_range(a->tp->user, a->model, a->tp_full, a->grads,
                                                       a->lo, a->hi, &sq)
                                : a->tp->grad_sq(a->tp->user, a->model, a->tp_full, a->grads, &sq);
        if (st != FFN_OK) return st;
    } else {
        sq = train_sum_squares(a->grads + a->lo, a->hi - a->lo, a->norm_partials);
        if (a->zero) { /* the ranks' ranges together */
            ffn_status st = a->zero->allreduce_f64(a->zero->user, &sq, 1);
            if (st != FFN_OK) return st;
        }
    }
    double norm = sqrt(sq);
    float scale = 1.0f;
    if (a->clip > 0) {
        double coef = a->clip / (norm + 1e-6);
        if (coef < 1.0) scale = (float)coef;
    }
    double lr = train_lr_at(step, a->warmup, a->steps, a->lr, a->min_lr);
    adamw_step s = {
        .lr = (float)lr,
        .beta1 = (float)a->beta1,
        .beta2 = (float)a->beta2,
        .eps = (float)a->eps,
        .step_size = (float)(lr / (1.0 - pow(a->beta1, (double)step))),
        .bc2_sqrt = (float)sqrt(1.0 - pow(a->beta2, (double)step)),
        .grad_scale = scale,
    };
    float *m = a->moments, *v = a->moments + (a->hi - a->lo); /* from parameter lo on */
    for (int64_t i = 0; i < n_tensors; i++) {
        if (a->frozen && a->frozen[i]) continue;
        const ffn_model_tensor *ten = ffn_model_tensor_at(a->model, i);
        s.decay = decays(ten->kind) ? (float)(lr * a->weight_decay) : 0.0f;
        if (a->moff) { /* sharded state: the tensors held here, whole */
            const int64_t zl = a->zlo ? a->zlo[i] : 0, zn = a->zlen ? a->zlen[i] : ten->numel;
            if (a->moff[i] >= 0 && zn > 0)
                adamw_update(a->params + ten->offset + zl, a->moments + a->moff[i],
                             a->moments + a->n_held + a->moff[i], a->grads + ten->offset + zl,
                             zn, &s);
            continue;
        }
        int64_t off = ten->offset > a->lo ? ten->offset : a->lo;
        int64_t end = ten->offset + ten->numel < a->hi ? ten->offset + ten->numel : a->hi;
        if (end > off)
            adamw_update(a->params + off, m + (off - a->lo), v + (off - a->lo), a->grads + off,
                         end - off, &s);
    }
    if (a->zero) { /* every rank's updated range to every rank */
        ffn_status st = a->zero->all_gather(a->zero->user, a->params, a->n_params);
        if (st != FFN_OK) return st;
    }
    if (a->zh) { /* every rank's updated parts of the held tensors to their group */
        float **where = calloc((size_t)n_tensors + 1, sizeof *where);
        if (!where) return ffn_error(FFN_ERR_NOMEM, "out of memory");
        for (int64_t i = 0; i < n_tensors; i++)
            if (a->moff[i] >= 0) where[i] = a->params + ffn_model_tensor_at(a->model, i)->offset;
        ffn_status st = held_zero_allgather(a, where);
        free(where);
        if (st != FFN_OK) return st;
    }
    if (lr_out) *lr_out = lr;
    if (norm_out) *norm_out = norm;
    return FFN_OK;
}

ffn_status ffn_adamw_step(ffn_adamw *a, int64_t step, double *lr_out, double *norm_out) {
    if (!a || step < 1) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_adamw_step: bad argument (step %lld)", (long long)step);
    ffn_status st = adamw_apply(a, step, lr_out, norm_out);
    return st ? st : ffn_model_params_changed(a->model);
}

/* ---- one optimizer step ------------------------------------------------------- */

static ffn_status grow_history(trainer *t, int64_t need) {
    if (need <= t->hist_cap) return FFN_OK;
    int64_t cap = t->hist_cap ? t->hist_cap : 256;
    while (cap < need) cap *= 2;
    double *p = realloc(t->loss_hist, (size_t)cap * sizeof *p);
    if (!p) return ffn_error(FFN_ERR_NOMEM, "out of memory (loss history)");
    t->loss_hist = p;
    t->hist_cap = cap;
    return FFN_OK;
}

static ffn_status push_eval(trainer *t, int64_t step, double loss) {
    if (t->n_evals == t->eval_cap) {
        int64_t cap = t->eval_cap ? 2 * t->eval_cap : 64;
        int64_t *s = realloc(t->eval_step, (size_t)cap * sizeof *s);
        if (s) t->eval_step = s;
        double *l = realloc(t->eval_loss, (size_t)cap * sizeof *l);
        if (l) t->eval_loss = l;
        if (!s || !l) return ffn_error(FFN_ERR_NOMEM, "out of memory (eval history)");
        t->eval_cap = cap;
    }
    t->eval_step[t->n_evals] = step;
    t->eval_loss[t->n_evals] = loss;
    t->n_evals++;
    return FFN_OK;
}

/* ZeRO-2: this rank keeps the gradients of its range [lo, hi) only. */
static int zero_grads(const trainer *t) { return t->o.dist && t->o.dist->zero_grads && t->opt->zero; }

/* The overlap (ffn_train_dist.grads_begin): the sums started during the
 * backward replace the plain sum (reduce_grads) or ZeRO-2's reduce-scatter
 * (the hooks set them only where they apply). */
static int overlapped(const trainer *t) {
    const ffn_train_dist *d = t->o.dist;
    return d && d->grads_begin && (!d->zero_range || zero_grads(t)) &&
           !(t->opt->zh && d->held_reduce_scatter);
}
static ffn_status grads_ready(void *u, int64_t level) {
    const trainer *t = u;
    return t->o.dist->grads_ready(t->o.dist->user, level);
}

/* Gradients of A micro-batches, clipping, the schedule and AdamW. */
static ffn_status train_step(trainer *t, ffn_train_point *pt) {
    const int64_t A = t->o.grad_accum, B = t->o.batch_size, T = t->o.seq_len;
    const int64_t step = t->step + 1;
    ffn_profile *pf = t->o.profile;
    ffn_model_set_profile(t->model, pf);
    ffn_profile_start(pf);
    if (zero_grads(t)) /* ZeRO-2: the rest was given back (zero) after the last reduce-scatter */
        memset(ffn_model_grads(t->model, NULL) + t->opt->lo, 0,
               (size_t)(t->opt->hi - t->opt->lo) * sizeof(float));
    else if (!t->held) ffn_model_zero_grads(t->model);
    else { /* sharded state: the gradients held here (the others stay untouched) */
        float *g = ffn_model_grads(t->model, NULL);
        const ffn_adamw *a = t->opt;
        const int part = a->zh && a->zh->held_reduce_scatter; /* ZeRO-2: the rest is zero */
        for (int64_t i = 0; i < ffn_model_num_tensors(t->model); i++) {
            const ffn_model_tensor *ten = ffn_model_tensor_at(t->model, i);
            if (t->held[i])
                memset(g + ten->offset + (part ? a->zlo[i] : 0), 0,
                       (size_t)(part ? a->zlen[i] : ten->numel) * sizeof *g);
        }
    }
    double ce = 0.0, total = 0.0;
    const int64_t P = dp_size(t);
    if (pipelined(t)) { /* every micro-batch drawn as one process would, then the stages */
        for (int64_t a = 0; a < A; a++) sample_batch_at(t, a * B * T);
        ffn_profile_charge(pf, FFN_PROFILE_DATA);
        ffn_status st = t->o.dist->pipeline(t->o.dist->user, t->model, t->batch_tokens,
                                            t->batch_targets, A, B, T, 1.0f / (float)(A * P), &ce,
                                            &total);
        if (st != FFN_OK) return st;
    }
    for (int64_t a = 0; a < A && !pipelined(t); a++) {
        ffn_profile_charge(pf, FFN_PROFILE_OTHER);
        sample_batch(t);
        ffn_profile_charge(pf, FFN_PROFILE_DATA);
        ffn_model_loss loss;
        ffn_status st = FFN_OK;
        /* the overlap: the last micro-batch's backward starts the sums */
        const int ov = overlapped(t) && a == A - 1;
        if (ov) {
            int64_t n;
            float *g = ffn_model_grads(t->model, &n);
            st = t->o.dist->grads_begin(t->o.dist->user, t->model, g, n);
            if (st == FFN_OK) st = ffn_model_set_grad_ready(t->model, grads_ready, t);
        }
        if (st == FFN_OK)
            st = ffn_model_forward_backward(t->model, t->batch_tokens, t->batch_targets, B, T,
                                            1.0f / (float)(A * P), &loss);
        if (ov) ffn_model_set_grad_ready(t->model, NULL, NULL);
        if (st != FFN_OK) return st;
        ce += loss.ce;
        total += loss.total;
    }
    if (t->o.dist) { /* the gradients and the losses of all ranks, summed in a fixed order */
        int64_t n;
        float *g = ffn_model_grads(t->model, &n);
        double l[2] = {ce, total};
        const ffn_train_dist *d = t->o.dist;
        /* ZeRO-1: the tensor-parallel sums first (after the reduce-scatter
         * only this rank's range would be whole) */
        ffn_status st = d->zero_range && d->sync_grads ? d->sync_grads(d->user, t->model) : FFN_OK;
        if (st == FFN_OK)
            st = overlapped(t)     ? d->grads_finish(d->user)
                 : d->zero_range     ? d->reduce_scatter(d->user, g, n)
                 : t->opt->zh && d->held_reduce_scatter ? held_zero_reduce_scatter(t->opt, g)
                 : d->reduce_grads ? d->reduce_grads(d->user, t->model, g, n)
                                   : d->allreduce_f32(d->user, g, n);
        if (st == FFN_OK && zero_grads(t)) { /* ZeRO-2: keep the range's sums only */
            ffn_release_floats(g, t->opt->lo);
            ffn_release_floats(g + t->opt->hi, n - t->opt->hi);
        }
        if (st == FFN_OK && !d->zero_range && d->sync_grads) st = d->sync_grads(d->user, t->model);
        if (st == FFN_OK) st = dp_sum_f64(t, l, 2);
        if (st != FFN_OK) return st;
        ce = l[0] / (double)P;
        total = l[1] / (double)P;
    }
    ce /= (double)A;
    total /= (double)A;
    if (!isfinite(total))
        return ffn_error(FFN_ERR_CONFIG,
                         "the training loss became %g at step %lld (try a smaller --lr or --clip 1)",
                         total, (long long)step);

    double lr, norm;
    ffn_profile_charge(pf, FFN_PROFILE_OTHER);
    /* ffn_adamw_step, its two halves timed apart */
    ffn_status st = adamw_apply(t->opt, step, &lr, &norm);
    ffn_profile_charge(pf, FFN_PROFILE_OPTIMIZER);
    if (st == FFN_OK) st = ffn_model_params_changed(t->model);
    ffn_profile_charge(pf, FFN_PROFILE_WEIGHT_PACK);
    ffn_model_set_profile(t->model, NULL);
    if (st != FFN_OK) return st;

    st = grow_history(t, step);
    if (st != FFN_OK) return st;
    t->loss_hist[step - 1] = ce;
    t->step = step;
    t->tokens_seen += A * B * T * P;
    pt->step = step;
    pt->steps = t->o.steps;
    pt->loss = ce;
    pt->loss_total = total;
    pt->lr = lr;
    pt->grad_norm = norm;
    pt->val_loss = NAN;
    pt->tokens = t->tokens_seen;
    return FFN_OK;
}

/* ---- checkpoints: the training state (the other files: checkpoint.c) -------------- */

/* The streamed save (t->streamed): every rank takes the pieces in the same
 * order; the writer gets each (its own floats, or received into one
 * tensor's buffer, zero first), a holder sends its own, the others pass. */
enum { ZERO_CHUNK = 1 << 20 }; /* floats of m or v a ZeRO save moves at a time */
static int64_t stream_pieces(const trainer *t) {
    return t->streamed == 2 ? 2 * ((t->n_params + ZERO_CHUNK - 1) / ZERO_CHUNK)
                            : 3 * ffn_model_num_tensors(t->model);
}
static ffn_status stream_buf(trainer *t, int64_t numel) {
    if (numel <= t->st_cap) return FFN_OK;
    free(t->st_buf);
    t->st_buf = malloc((size_t)numel * sizeof *t->st_buf);
    t->st_cap = t->st_buf ? numel : 0;
    return t->st_buf ? FFN_OK : ffn_error(FFN_ERR_NOMEM, "out of memory (a piece of the checkpoint)");
}
/* ZeRO without TP (t->streamed 2): piece p is chunk p % C of m (p < C),
 * then of v; every rank's part of it (its range's share) gathered to the
 * writer (gather_range over the chunk, collective). */
static ffn_status zero_next(trainer *t, int64_t p, const float **out, int64_t *numel) {
    const ffn_train_dist *d = t->o.dist;
    const int64_t n = t->n_params, C = (n + ZERO_CHUNK - 1) / ZERO_CHUNK, pass = p / C;
    const int64_t c0 = (p % C) * ZERO_CHUNK, c1 = c0 + ZERO_CHUNK < n ? c0 + ZERO_CHUNK : n;
    const int64_t lo = t->opt->lo, hi = t->opt->hi, k = hi - lo;
    const int64_t a = lo > c0 ? lo : c0, b = hi < c1 ? hi : c1, cnt = b > a ? b - a : 0;
    ffn_status st = d->writer ? stream_buf(t, c1 - c0) : FFN_OK;
    *numel = c1 - c0;
    *out = d->writer ? t->st_buf : NULL;
    const float *mine = t->moments + pass * k + (cnt ? a - lo : 0);
    /* every rank takes part, even after a failure on the writer */
    ffn_status s2 = d->gather_range(d->user, mine, cnt ? a - c0 : 0, cnt,
                                    st == FFN_OK ? t->st_buf : NULL, c1 - c0);
    return st != FFN_OK ? st : s2;
}
static ffn_status stream_next(trainer *t, const float **out, int64_t *numel) {
    const int64_t nt = ffn_model_num_tensors(t->model), p = t->st_next++;
    if (t->streamed == 2 && p < stream_pieces(t)) return zero_next(t, p, out, numel);
    if (p >= stream_pieces(t))
        return ffn_error(FFN_ERR_INVALID_ARG, "the streamed save: piece %lld of %lld", (long long)p,
                         (long long)stream_pieces(t));
    const int64_t pass = p / nt, i = p % nt;
    const ffn_model_tensor *ten = ffn_model_tensor_at(t->model, i);
    if (t->st_parts && pass < 2 && t->held[i]) { /* the parts put together, one tensor */
        const ffn_adamw *a = t->opt;
        ffn_status st = stream_buf(t, ten->numel);
        int *cd = st == FFN_OK ? malloc((size_t)(2 * a->zP[0] + 1) * sizeof *cd) : NULL;
        if (st == FFN_OK && !cd) st = ffn_error(FFN_ERR_NOMEM, "out of memory");
        if (st == FFN_OK) {
            memcpy(t->st_buf + a->zlo[i], t->moments + pass * a->n_held + a->moff[i],
                   (size_t)a->zlen[i] * sizeof *t->st_buf);
            if (a->zP[a->zgrp[i]] > 1) {
                held_zero_parts(a, i, cd);
                st = a->zh->held_allgatherv(a->zh->user, (int)a->zgrp[i], t->st_buf, cd,
                                            cd + a->zP[a->zgrp[i]]);
            }
        }
        free(cd);
        *numel = ten->numel;
        *out = t->st_buf;
        const ffn_train_dist *d = t->o.dist;
        if (st == FFN_OK && !d->writer) st = d->gather_tensor(d->user, t->model, i, t->st_buf);
        return st;
    }
    const float *own = pass < 2 ? (t->st_moff[i] >= 0 ? t->st_mom + pass * t->st_k + t->st_moff[i]
                                                      : NULL)
                       : t->held[i] ? ffn_model_params(t->model, NULL) + ten->offset : NULL;
    *numel = ten->numel;
    const ffn_train_dist *d = t->o.dist;
    if (!d->writer || own) {
        *out = own;
        return d->writer ? FFN_OK : d->gather_tensor(d->user, t->model, i, (float *)own);
    }
    ffn_status st = stream_buf(t, ten->numel);
    if (st != FFN_OK) return st;
    memset(t->st_buf, 0, (size_t)ten->numel * sizeof *t->st_buf);
    *out = t->st_buf;
    return d->gather_tensor(d->user, t->model, i, t->st_buf);
}
static ffn_status stream_source(void *u, const void **data, size_t *n) {
    const float *p = NULL;
    int64_t numel = 0;
    ffn_status st = stream_next(u, &p, &numel);
    *data = p;
    *n = (size_t)numel * sizeof(float);
    return st;
}
/* The pieces not taken yet: sent (a holder), or received and dropped (the
 * writer, after a save that stopped early). */
static ffn_status stream_rest(trainer *t) {
    ffn_status st = FFN_OK;
    while (t->st_next < stream_pieces(t)) {
        const float *p;
        int64_t numel;
        ffn_status s = stream_next(t, &p, &numel);
        if (st == FFN_OK) st = s;
    }
    return st;
}
static ffn_status save_weights_streamed(trainer *t, const char *path) {
    ffn_st_writer *w = NULL;
    ffn_status st = ffn_st_writer_create(&w);
    for (int64_t i = 0; st == FFN_OK && i < ffn_model_num_tensors(t->model); i++) {
        const ffn_model_tensor *ten = ffn_model_tensor_at(t->model, i);
        st = ffn_st_writer_add_source(w, ten->name, FFN_DTYPE_F32, ten->ndim, ten->shape,
                                      stream_source, t);
    }
    if (st == FFN_OK) st = ffn_st_writer_set_metadata(w, "format", "pt");
    if (st == FFN_OK) st = ffn_st_writer_save(w, path);
    ffn_st_writer_free(w);
    return st;
}

static ffn_status save_train_state(trainer *t, const char *path) {
    ffn_st_writer *w = NULL;
    ffn_status st = ffn_st_writer_create(&w);
    if (st != FFN_OK) return st;
    char key[128], val[1100];
    /* tensor parallel: the whole model's moments, put together before the save */
    const float *mom = t->full_moments ? t->full_moments : t->moments;
    const int64_t np = t->full_moments ? t->full_np : t->n_params;
    const int64_t nm = t->streamed ? t->n_params : np; /* streamed: the whole model's */
    int64_t shape[1] = {nm};
    st = t->streamed ? ffn_st_writer_add_source(w, "adamw.m", FFN_DTYPE_F32, 1, shape, stream_source, t)
                     : ffn_st_writer_add(w, "adamw.m", FFN_DTYPE_F32, 1, shape, mom);
    if (st == FFN_OK)
        st = t->streamed
                 ? ffn_st_writer_add_source(w, "adamw.v", FFN_DTYPE_F32, 1, shape, stream_source, t)
                 : ffn_st_writer_add(w, "adamw.v", FFN_DTYPE_F32, 1, shape, mom + np);
    shape[0] = t->step;
    if (st == FFN_OK && t->step > 0)
        st = ffn_st_writer_add(w, "loss_history", FFN_DTYPE_F64, 1, shape, t->loss_hist);
    shape[0] = t->n_evals;
    if (st == FFN_OK && t->n_evals > 0)
        st = ffn_st_writer_add(w, "eval_step", FFN_DTYPE_I64, 1, shape, t->eval_step);
    if (st == FFN_OK && t->n_evals > 0)
        st = ffn_st_writer_add(w, "eval_loss", FFN_DTYPE_F64, 1, shape, t->eval_loss);
#define META(k, ...) \
    do { if (st == FFN_OK) { snprintf(val, sizeof val, __VA_ARGS__); st = ffn_st_writer_set_metadata(w, k, val); } } while (0)
    META("format", "ffn-train-state");
    META("version", "1");
    META("step", "%lld", (long long)t->step);
    META("tokens_seen", "%lld", (long long)t->tokens_seen);
    META("rng", "%016llx%016llx%016llx%016llx", (unsigned long long)t->rng.s[0],
         (unsigned long long)t->rng.s[1], (unsigned long long)t->rng.s[2],
         (unsigned long long)t->rng.s[3]);
    META("data_source", "%s", t->data_source);
    META("data_bytes", "%zu", t->text_len);
    META("data_fingerprint", "%016llx", (unsigned long long)t->fingerprint);
    META("n_params", "%lld", (long long)nm);
    if (t->init_source[0]) META("init", "%s", t->init_source);
    if (t->vocab_file) META("vocab_file", "%s", FFN_LLAMA2C_TOKENIZER_FILENAME);
#undef META
    ffn_train_options global = t->o; /* a data-parallel run records its whole batch */
    global.batch_size *= dp_size(t);
    for (size_t i = 0; i < N_OPT_FIELDS && st == FFN_OK; i++) {
        snprintf(key, sizeof key, "opt.%s", opt_fields[i].key);
        field_format(&opt_fields[i], &global, val, sizeof val);
        st = ffn_st_writer_set_metadata(w, key, val);
    }
    if (st == FFN_OK) st = ffn_st_writer_save(w, path);
    ffn_st_writer_free(w);
    return st;
}

static ffn_status save_checkpoint(trainer *t, const char *out_dir) {
    char *tmp = NULL, *path = NULL;
    ffn_status st = ffn_dirswap_begin(out_dir, &tmp);
    if (st != FFN_OK) return st;
#define FILE_IN(name) (free(path), path = ffn_path_join(tmp, "/", name))
    if (!FILE_IN(FFN_CONFIG_FILENAME)) st = ffn_error(FFN_ERR_NOMEM, "out of memory");
    ffn_model *whole = t->full ? t->full : t->model; /* tensor parallel: put together before */
    if (st == FFN_OK) st = ffn_model_config_save(ffn_model_get_config(whole), path);
    const char *vocab_name = t->vocab_file ? FFN_LLAMA2C_TOKENIZER_FILENAME : FFN_TOKENIZER_FILENAME;
    if (st == FFN_OK)
        st = run_dir_config_add_tokenizer(path, ffn_vocab_kind_name(ffn_vocab_get_kind(t->vocab)),
                                          vocab_name);
    if (st == FFN_OK && !FILE_IN(vocab_name)) st = ffn_error(FFN_ERR_NOMEM, "out of memory");
    if (st == FFN_OK && !t->vocab_file) st = ffn_tokenizer_save(ffn_vocab_tokenizer(t->vocab), path);
    if (st == FFN_OK && t->vocab_file) {
        FILE *f = fopen(path, "wb");
        if (!f) st = ffn_error(FFN_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
        else {
            fwrite(t->vocab_file, 1, t->vocab_file_len, f);
            int bad = ferror(f);
            if (fclose(f) != 0 || bad) st = ffn_error(FFN_ERR_IO, "%s: write failed", path);
        }
    }
    if (st == FFN_OK && !FILE_IN(FFN_TRAIN_STATE_FILENAME)) st = ffn_error(FFN_ERR_NOMEM, "out of memory");
    if (st == FFN_OK) st = save_train_state(t, path);
    if (st == FFN_OK && t->log_in_dir) {
        if (!FILE_IN(FFN_METRICS_FILENAME)) st = ffn_error(FFN_ERR_NOMEM, "out of memory");
        FILE *f = st == FFN_OK ? fopen(path, "wb") : NULL;
        if (st == FFN_OK && !f) st = ffn_error(FFN_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
        if (f) {
            if (t->log_len) fwrite(t->log, 1, t->log_len, f);
            int bad = ferror(f);
            if (fclose(f) != 0 || bad) st = ffn_error(FFN_ERR_IO, "%s: write failed", path);
        }
    }
    /* model.safetensors last: its presence marks a finished directory. */
    if (st == FFN_OK && !FILE_IN(FFN_MODEL_FILENAME)) st = ffn_error(FFN_ERR_NOMEM, "out of memory");
    if (st == FFN_OK)
        st = t->streamed == 1 ? save_weights_streamed(t, path) : run_dir_save_weights(whole, path);
#undef FILE_IN
    free(path);
    if (st == FFN_OK) st = ffn_dirswap_commit(out_dir, tmp);
    else {
        ffn_dirswap_abort(tmp);
        st = ffn_error_prefix(st, "%s: checkpoint not saved (the previous one, if any, is intact)", out_dir);
    }
    free(tmp);
    return st;
}

/* ---- resuming --------------------------------------------------------------------- */

static ffn_status open_train_state(const char *dir, ffn_st_file **f) {
    char *path = ffn_path_join(dir, "/", FFN_TRAIN_STATE_FILENAME);
    if (!path) return ffn_error(FFN_ERR_NOMEM, "out of memory");
    ffn_status st = ffn_st_open(path, f);
    if (st == FFN_OK) {
        const char *fmt = ffn_st_metadata(*f, "format"), *ver = ffn_st_metadata(*f, "version");
        if (!fmt || strcmp(fmt, "ffn-train-state") || !ver || strcmp(ver, "1")) {
            st = ffn_error(FFN_ERR_FORMAT,
                           "%s: not an ffn training state of version 1 (format '%s', version "
                           "'%s'); it cannot be resumed",
                           path, fmt ? fmt : "", ver ? ver : "");
            ffn_st_close(*f);
            *f = NULL;
        }
    }
    free(path);
    return st;
}

static ffn_status meta_i64(const ffn_st_file *f, const char *key, int64_t *out) {
    const char *s = ffn_st_metadata(f, key);
    char *end = NULL;
    if (!s) return ffn_error(FFN_ERR_MISSING, "%s: metadata '%s' missing", ffn_st_path(f), key);
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end)
        return ffn_error(FFN_ERR_FORMAT, "%s: metadata '%s': expected an integer, found '%s'",
                         ffn_st_path(f), key, s);
    *out = v;
    return FFN_OK;
}

static ffn_status meta_hex(const ffn_st_file *f, const char *key, uint64_t *out, int n) {
    const char *s = ffn_st_metadata(f, key);
    if (!s || strlen(s) != (size_t)n * 16)
        return ffn_error(FFN_ERR_FORMAT, "%s: metadata '%s': expected %d hex digits", ffn_st_path(f),
                         key, n * 16);
    for (int i = 0; i < n; i++) {
        uint64_t v = 0;
        for (int j = 0; j < 16; j++) {
            char c = s[i * 16 + j];
            int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            if (d < 0)
                return ffn_error(FFN_ERR_FORMAT, "%s: metadata '%s': bad hex digit", ffn_st_path(f), key);
            v = (v << 4) | (uint64_t)d;
        }
        out[i] = v;
    }
    return FFN_OK;
}

ffn_status ffn_train_options_from_checkpoint(const char *dir, ffn_train_options *opts) {
    if (!dir || !opts) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_train_options_from_checkpoint: NULL argument");
    char *rdir = NULL;
    ffn_status st = ffn_dirswap_resolve(dir, &rdir);
    if (st != FFN_OK) return st;
    ffn_st_file *f = NULL;
    st = open_train_state(rdir, &f);
    ffn_train_options o = *opts;
    for (size_t i = 0; i < N_OPT_FIELDS && st == FFN_OK; i++) {
        char key[128];
        snprintf(key, sizeof key, "opt.%s", opt_fields[i].key);
        const char *v = ffn_st_metadata(f, key);
        if (!v && opt_fields[i].optional) continue;
        if (!v) st = ffn_error(FFN_ERR_MISSING, "%s: metadata '%s' missing", ffn_st_path(f), key);
        else if (!field_parse(&opt_fields[i], &o, v))
            st = ffn_error(FFN_ERR_FORMAT, "%s: metadata '%s': bad value '%s'", ffn_st_path(f), key, v);
    }
    if (st == FFN_OK) *opts = o;
    ffn_st_close(f);
    free(rdir);
    return st;
}

/* Restore everything from the checkpoint in rdir: options must agree
 * (the field named), the tokenizer, the text (its fingerprint must agree),
 * then -- after the model exists -- weights, moments, RNG, step, history. */
static ffn_status resume_check(trainer *t, const char *rdir, ffn_st_file *f) {
    ffn_train_options ck = t->o, mine = t->o;
    ffn_status st = ffn_train_options_from_checkpoint(rdir, &ck);
    if (st != FFN_OK) return st;
    mine.batch_size *= dp_size(t); /* checkpoints record the whole batch of a step */
    for (size_t i = 0; i < N_OPT_FIELDS; i++) {
        const opt_field *fl = &opt_fields[i];
        if (!fl->must_match || field_equal(fl, &ck, &mine)) continue;
        char a[64], b[64];
        field_describe(fl, &ck, a, sizeof a);
        field_describe(fl, &mine, b, sizeof b);
        if (!fl->flag)
            return ffn_error(FFN_ERR_CONFIG,
                             "%s: cannot resume: %s differs: the checkpoint has %s, these "
                             "options ask for %s (set it to the checkpoint's value, or train "
                             "into a new directory without resuming)",
                             rdir, fl->key, a, b);
        return ffn_error(FFN_ERR_CONFIG,
                         "%s: cannot resume: %s (%s) differs: the checkpoint has %s, this run asks "
                         "for %s (drop the flag to keep the checkpoint's value, or train into a "
                         "new --out without --resume)",
                         rdir, fl->key, fl->flag, a, b);
    }
    /* Data: by default the checkpoint's own source. */
    if (!t->o.text && !t->o.data_path) {
        const char *src = ffn_st_metadata(f, "data_source");
        if (src && !strncmp(src, "file:", 5)) {
            snprintf(t->resume_path, sizeof t->resume_path, "%s", src + 5);
            t->o.data_path = t->resume_path;
        } else if (src && !strcmp(src, "text")) {
            return ffn_error(FFN_ERR_CONFIG,
                             "%s: cannot resume: the checkpoint was trained on text given by a "
                             "program; give the same text (or --data FILE) again",
                             rdir);
        }
    }
    return FFN_OK;
}

static ffn_status resume_state(trainer *t, const char *rdir, ffn_st_file *f) {
    ffn_status st;
    char *path = ffn_path_join(rdir, "/", FFN_MODEL_FILENAME);
    if (!path) return ffn_error(FFN_ERR_NOMEM, "out of memory");
    st = run_dir_load_weights(t->model, path);
    free(path);
    if (st != FFN_OK) return st;
    int64_t shape[1] = {t->n_params};
    st = ffn_st_read_f32(f, "adamw.m", 1, shape, t->moments);
    if (st == FFN_OK) st = ffn_st_read_f32(f, "adamw.v", 1, shape, t->moments + t->n_params);
    int64_t step = 0, tokens = 0;
    if (st == FFN_OK) st = meta_i64(f, "step", &step);
    if (st == FFN_OK) st = meta_i64(f, "tokens_seen", &tokens);
    if (st == FFN_OK) st = meta_hex(f, "rng", t->rng.s, 4);
    if (st != FFN_OK) return st;
    if (step < 0 || step > 1000000000)
        return ffn_error(FFN_ERR_FORMAT, "%s: step %lld out of range", ffn_st_path(f), (long long)step);
    t->step = step;
    t->tokens_seen = tokens;
    st = grow_history(t, step > 0 ? step : 1);
    if (st != FFN_OK) return st;
    ffn_st_tensor ten;
    if (step > 0) {
        st = ffn_st_find(f, "loss_history", &ten);
        if (st == FFN_OK && (ten.dtype != FFN_DTYPE_F64 || ten.ndim != 1 || ten.numel != step))
            st = ffn_error(FFN_ERR_SHAPE, "%s: loss_history: expected F64 [%lld]", ffn_st_path(f), (long long)step);
        if (st != FFN_OK) return st;
        memcpy(t->loss_hist, ten.data, (size_t)step * sizeof(double));
    }
    if (ffn_st_has(f, "eval_step")) {
        ffn_st_tensor ls;
        st = ffn_st_find(f, "eval_step", &ten);
        if (st == FFN_OK) st = ffn_st_find(f, "eval_loss", &ls);
        if (st == FFN_OK && (ten.dtype != FFN_DTYPE_I64 || ls.dtype != FFN_DTYPE_F64 ||
                             ten.ndim != 1 || ls.ndim != 1 || ten.numel != ls.numel))
            st = ffn_error(FFN_ERR_SHAPE, "%s: eval_step/eval_loss: expected I64 [n] and F64 [n]", ffn_st_path(f));
        for (int64_t i = 0; st == FFN_OK && i < ten.numel; i++) {
            int64_t s;
            double l;
            memcpy(&s, (const char *)ten.data + 8 * i, 8);
            memcpy(&l, (const char *)ls.data + 8 * i, 8);
            st = push_eval(t, s, l);
        }
    }
    return st;
}

/* ---- the loop --------------------------------------------------------------------- */

static ffn_status log_append(trainer *t, const char *line, size_t n) {
    if (t->log_len + n + 1 > t->log_cap) {
        size_t cap = t->log_cap ? t->log_cap : 4096;
        while (cap < t->log_len + n + 1) cap *= 2;
        char *p = realloc(t->log, cap);
        if (!p) return ffn_error(FFN_ERR_NOMEM, "out of memory (metrics log)");
        t->log = p;
        t->log_cap = cap;
    }
    memcpy(t->log + t->log_len, line, n);
    t->log_len += n;
    t->log[t->log_len] = '\0';
    return FFN_OK;
}

static ffn_status write_metrics(trainer *t, const ffn_train_point *p) {
    if (!t->metrics && !t->log_in_dir) return FFN_OK;
    char line[512];
    int n = snprintf(line, sizeof line, "{\"step\": %lld, \"loss\": ", (long long)p->step);
    if (isfinite(p->loss)) n += snprintf(line + n, sizeof line - (size_t)n, "%.17g", p->loss);
    else n += snprintf(line + n, sizeof line - (size_t)n, "null");
    n += snprintf(line + n, sizeof line - (size_t)n,
                  ", \"lr\": %.9g, \"tokens_per_s\": %.1f, \"grad_norm\": %.6g", p->lr,
                  p->tokens_per_s, p->grad_norm);
    if (p->loss_total != p->loss)
        n += snprintf(line + n, sizeof line - (size_t)n, ", \"loss_total\": %.17g", p->loss_total);
    if (!isnan(p->val_loss))
        n += snprintf(line + n, sizeof line - (size_t)n, ", \"val_loss\": %.17g", p->val_loss);
    n += snprintf(line + n, sizeof line - (size_t)n, "}\n");
    if (t->metrics) {
        fwrite(line, 1, (size_t)n, t->metrics);
        fflush(t->metrics);
    }
    return t->log_in_dir ? log_append(t, line, (size_t)n) : FFN_OK;
}

/* The lines of the log at `path` for steps up to keep_steps, appended to
 * the in-memory log (a missing file is an empty log). */
static ffn_status log_read(trainer *t, const char *path, int64_t keep_steps) {
    FILE *in = fopen(path, "rb");
    if (!in) return FFN_OK;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    ffn_status st = FFN_OK;
    while (st == FFN_OK && (n = getline(&line, &cap, in)) > 0) {
        const char *k = strstr(line, "\"step\": ");
        if (k && strtoll(k + 8, NULL, 10) > keep_steps) continue;
        st = log_append(t, line, (size_t)n);
    }
    free(line);
    if (st == FFN_OK && ferror(in)) st = ffn_error(FFN_ERR_IO, "%s: cannot read the metrics log", path);
    fclose(in);
    return st;
}

/* Is `log` DIR/metrics.jsonl (the run directory's own log)? */
static int log_is_in_dir(const char *log, const char *dir) {
    const char *slash = strrchr(log, '/');
    if (strcmp(slash ? slash + 1 : log, FFN_METRICS_FILENAME)) return 0;
    char *parent = slash ? strndup(log, (size_t)(slash - log)) : strdup(".");
    char *target = NULL;
    int same = 0;
    if (parent && ffn_dirswap_target(dir, &target) == FFN_OK) {
        char *a = realpath(parent, NULL), *b = realpath(target, NULL);
        if (a && b) same = !strcmp(a, b);
        else { /* DIR does not exist yet: compare the spellings */
            const char *x = parent, *y = target;
            while (x[0] == '.' && x[1] == '/') x += 2;
            while (y[0] == '.' && y[1] == '/') y += 2;
            size_t nx = strlen(x), ny = strlen(y);
            while (nx > 1 && x[nx - 1] == '/') nx--;
            same = nx == ny && !strncmp(x, y, nx);
        }
        free(a);
        free(b);
    }
    free(parent);
    free(target);
    return same;
}

/* On resume: drop the log lines of steps after the checkpoint (a run that
 * crashed or was killed after its last save logged steps that will now be
 * taken again), so the log reads as one uninterrupted run.  Rewritten
 * through a temporary file and a rename. */
static ffn_status trim_metrics(const char *path, int64_t keep_steps) {
    FILE *in = fopen(path, "rb");
    if (!in) return FFN_OK; /* nothing yet */
    ffn_atomic_file af;
    ffn_status st = ffn_atomic_open(&af, path);
    if (st != FFN_OK) {
        fclose(in);
        return st;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int64_t dropped = 0;
    while ((n = getline(&line, &cap, in)) > 0) {
        const char *k = strstr(line, "\"step\": ");
        if (k && strtoll(k + 8, NULL, 10) > keep_steps) {
            dropped++;
            continue;
        }
        fwrite(line, 1, (size_t)n, af.f);
    }
    free(line);
    int bad = ferror(in);
    fclose(in);
    if (bad) {
        ffn_atomic_abort(&af);
        return ffn_error(FFN_ERR_IO, "%s: cannot read the metrics log", path);
    }
    if (dropped == 0) {
        ffn_atomic_abort(&af);
        return FFN_OK;
    }
    st = ffn_atomic_commit(&af);
    if (st != FFN_OK) return ffn_error_prefix(st, "%s: cannot rewrite the metrics log", path);
    return FFN_OK;
}

static ffn_status fill_result(const trainer *t, ffn_train_result *r, double seconds,
                              const char *ckpt) {
    r->steps_done = t->step;
    r->final_loss = t->step > 0 ? t->loss_hist[t->step - 1] : NAN;
    r->final_val_loss = t->n_evals > 0 ? t->eval_loss[t->n_evals - 1] : NAN;
    r->tokens_per_s = t->train_seconds > 0 ? (double)(t->tokens_seen) / t->train_seconds : 0.0;
    r->seconds = seconds;
    r->n_params = ffn_model_num_params(t->full ? t->full : t->model);
    r->active_params = ffn_model_active_params(t->full ? t->full : t->model);
    r->loss = malloc((size_t)(t->step > 0 ? t->step : 1) * sizeof(double));
    r->eval_step = malloc((size_t)(t->n_evals > 0 ? t->n_evals : 1) * sizeof(int64_t));
    r->eval_loss = malloc((size_t)(t->n_evals > 0 ? t->n_evals : 1) * sizeof(double));
    r->checkpoint_dir = ckpt ? strdup(ckpt) : NULL;
    { /* the state this rank keeps */
        int64_t held = 0, nt = ffn_model_num_tensors(t->model);
        for (int64_t i = 0; i < nt; i++)
            if (!t->held || t->held[i]) held += ffn_model_tensor_at(t->model, i)->numel;
        const int64_t mom = t->opt->moff ? t->opt->n_held : t->opt->hi - t->opt->lo;
        r->optimizer_bytes = 8 * mom;
        /* ZeRO-2: the gradients of the range only (between steps) */
        r->grad_bytes = 4 * (zero_grads(t) ? t->opt->hi - t->opt->lo
                             : t->opt->zh && t->o.dist->held_reduce_scatter ? t->opt->n_held
                                                                             : held);
        r->state_bytes = 4 * held + r->grad_bytes + r->optimizer_bytes +
                         (t->full ? 16 * t->full_np : 0);
        r->activation_bytes = (int64_t)ffn_model_activation_bytes(t->model);
    }
    if (!r->loss || !r->eval_step || !r->eval_loss || (ckpt && !r->checkpoint_dir)) {
        ffn_train_result_free(r);
        return ffn_error(FFN_ERR_NOMEM, "out of memory (training result)");
    }
    if (t->step > 0) memcpy(r->loss, t->loss_hist, (size_t)t->step * sizeof(double));
    r->n_evals = t->n_evals;
    if (t->n_evals > 0) {
        memcpy(r->eval_step, t->eval_step, (size_t)t->n_evals * sizeof(int64_t));
        memcpy(r->eval_loss, t->eval_loss, (size_t)t->n_evals * sizeof(double));
    }
    return FFN_OK;
}

void ffn_train_result_free(ffn_train_result *r) {
    if (!r) return;
    FFN_FREE_ALL(r->loss, r->eval_step, r->eval_loss, r->checkpoint_dir);
    memset(r, 0, sizeof *r);
}

static ffn_status held_shard(trainer *t);

/* Tensor parallel: keep the whole model (and its optimizer) for the
 * checkpoints and train the rank's share, moments sliced alike. */
static ffn_status tp_shard(trainer *t) {
    const ffn_train_dist *d = t->o.dist;
    if (!d->slice_flat || !d->gather_flat)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_train_run: dist: shard without slice_flat/gather_flat");
    ffn_model_options mopt = {.max_batch = t->o.batch_size, .max_seq = t->o.seq_len, .training = 1,
                              .precision = t->o.precision};
    ffn_model *rank = NULL;
    ffn_adamw *ra = NULL;
    ffn_status st = d->shard(d->user, t->model, &mopt, &rank);
    if (st == FFN_OK && rank == t->model) return d->holds ? held_shard(t) : FFN_OK; /* in place */
    if (st == FFN_OK) st = ffn_adamw_create(rank, &t->o, &ra);
    int64_t rnp = 0;
    float *rm = st == FFN_OK ? ffn_adamw_moments(ra, &rnp) : NULL;
    if (st == FFN_OK) st = d->slice_flat(d->user, t->model, t->moments, rank, rm);
    if (st == FFN_OK) st = d->slice_flat(d->user, t->model, t->moments + t->n_params, rank, rm + rnp);
    if (st != FFN_OK) {
        ffn_adamw_free(ra);
        ffn_model_free(rank);
        return st;
    }
    ra->tp = d;
    ra->tp_full = t->model;
    t->full = t->model, t->full_opt = t->opt, t->full_moments = t->moments, t->full_np = t->n_params;
    t->model = rank, t->opt = ra, t->moments = rm, t->n_params = rnp;
    return FFN_OK;
}

/* ZeRO-1: keep this rank's range of the moments only. */
static ffn_status zero_shard(trainer *t) {
    const ffn_train_dist *d = t->o.dist;
    if (!d->reduce_scatter || !d->all_gather || t->held || (t->full && !d->grad_sq_range))
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_train_run: dist: zero_range needs reduce_scatter "
                         "and all_gather (and with shard grad_sq_range), and no holds");
    int64_t lo, hi, n = t->n_params;
    d->zero_range(d->user, n, &lo, &hi);
    if (lo < 0 || hi < lo || hi > n)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_train_run: dist: zero range [%lld, %lld) of %lld",
                         (long long)lo, (long long)hi, (long long)n);
    float *m = moments_alloc((hi - lo ? hi - lo : 1) * 2);
    if (!m) return ffn_error(FFN_ERR_NOMEM, "out of memory (optimizer moments)");
    memcpy(m, t->moments + lo, (size_t)(hi - lo) * sizeof(float));
    memcpy(m + (hi - lo), t->moments + n + lo, (size_t)(hi - lo) * sizeof(float));
    moments_free(t->opt->moments);
    t->opt->moments = t->moments = m;
    t->opt->lo = lo, t->opt->hi = hi, t->opt->zero = d;
    if (!t->full && d->gather_range) t->streamed = 2; /* a save gathers a chunk at a time */
    if (d->zero_grads) { /* ZeRO-2: the gradients outside the range are not kept */
        float *g = ffn_model_grads(t->model, NULL);
        ffn_release_floats(g, lo);
        ffn_release_floats(g + hi, n - hi);
    }
    return FFN_OK;
}

/* ZeRO-1, before a save (every rank): the whole moments, for the writer
 * (freed after the save: zero_release). */
static ffn_status zero_gather(trainer *t) {
    const ffn_train_dist *d = t->o.dist;
    const int64_t n = t->n_params, lo = t->opt->lo, k = t->opt->hi - lo;
    if (!t->full && d->gather_range) { /* to the writer alone */
        float *w = d->writer ? moments_alloc(n * 2) : NULL;
        ffn_status st = w || !d->writer ? FFN_OK
                        : ffn_error(FFN_ERR_NOMEM, "out of memory (gathering the optimizer moments)");
        /* every rank takes part in both, even after a failure on the writer */
        ffn_status s1 = d->gather_range(d->user, t->moments, lo, k, w, n);
        ffn_status s2 = d->gather_range(d->user, t->moments + k, lo, k, w ? w + n : NULL, n);
        st = st != FFN_OK ? st : s1 != FFN_OK ? s1 : s2;
        t->zero_all = w;
        t->full_moments = w, t->full_np = n;
        return st;
    }
    float *all = moments_alloc(n * 2);
    if (!all) return ffn_error(FFN_ERR_NOMEM, "out of memory (gathering the optimizer moments)");
    memcpy(all + lo, t->moments, (size_t)k * sizeof(float));
    memcpy(all + n + lo, t->moments + k, (size_t)k * sizeof(float));
    ffn_status st = d->all_gather(d->user, all, n);
    if (st == FFN_OK) st = d->all_gather(d->user, all + n, n);
    t->zero_all = all;
    if (!t->full) t->full_moments = all, t->full_np = n; /* else tp_gather's source */
    return st;
}
static void zero_release(trainer *t) {
    moments_free(t->zero_all);
    if (!t->full) t->full_moments = NULL;
    t->zero_all = NULL;
}

/* A run from the seed with sharded state (after held_shard): the held
 * tensors only, with the bits one process gives them
 * (ffn_model_init_tensors); the rest never written. */
static ffn_status init_held(trainer *t) {
    if (!t->held) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_train_run: dist: holds, and the "
                                   "model was not sharded in place");
    return ffn_model_init_tensors(t->model, t->o.seed, t->held);
}

/* Sharded state (in place): give back the pages of the parameters and
 * gradients of the tensors other ranks hold (after the start's checks,
 * and after each save, whose gather wrote them on the writer). */
static void release_unheld(trainer *t) {
    float *w = ffn_model_params(t->model, NULL), *g = ffn_model_grads(t->model, NULL);
    for (int64_t i = 0; i < ffn_model_num_tensors(t->model); i++) {
        if (t->held[i]) continue;
        const ffn_model_tensor *ten = ffn_model_tensor_at(t->model, i);
        ffn_release_floats(w + ten->offset, ten->numel);
        ffn_release_floats(g + ten->offset, ten->numel);
    }
}

/* Sharded state (in place): the rank trains the whole model's tensors it
 * holds; the moments shrink to those tensors (m, then v). */
static ffn_status held_shard(trainer *t) {
    const ffn_train_dist *d = t->o.dist;
    ffn_adamw *a = t->opt;
    const int64_t nt = ffn_model_num_tensors(t->model);
    if (!d->gather_tensors)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_train_run: dist: holds without gather_tensors");
    t->held = calloc((size_t)nt + 1, 1);
    a->moff = malloc(((size_t)nt + 1) * sizeof *a->moff);
    if (!t->held || !a->moff) return ffn_error(FFN_ERR_NOMEM, "out of memory");
    int64_t k = 0;
    for (int64_t i = 0; i < nt; i++) {
        t->held[i] = d->holds(d->user, t->model, i) != 0;
        a->moff[i] = t->held[i] ? k : -1;
        if (t->held[i]) k += ffn_model_tensor_at(t->model, i)->numel;
    }
    float *m = moments_alloc(2 * (k ? k : 1));
    if (!m) return ffn_error(FFN_ERR_NOMEM, "out of memory (optimizer moments)");
    for (int64_t i = 0; i < nt; i++) {
        const ffn_model_tensor *ten = ffn_model_tensor_at(t->model, i);
        if (a->moff[i] < 0) continue;
        memcpy(m + a->moff[i], t->moments + ten->offset, (size_t)ten->numel * sizeof *m);
        memcpy(m + k + a->moff[i], t->moments + t->n_params + ten->offset,
               (size_t)ten->numel * sizeof *m);
    }
    moments_free(a->moments);
    a->moments = t->moments = m;
    a->n_held = k;
    a->tp = d;
    a->tp_full = t->model;
    /* a save streams when the tensors tile the block in table order */
    int64_t at = 0;
    for (int64_t i = 0; i < nt && at >= 0; i++) {
        const ffn_model_tensor *ten = ffn_model_tensor_at(t->model, i);
        at = ten->offset == at ? at + ten->numel : -1;
    }
    t->streamed = d->gather_tensor && at == t->n_params;
    return FFN_OK;
}

/* ZeRO-1 over the held tensors (after held_shard): each group's block of
 * held tensors split over the group; the moments shrink to this rank's
 * part of each tensor (the whole held layout kept for the saves). */
static ffn_status held_zero(trainer *t) {
    const ffn_train_dist *d = t->o.dist;
    ffn_adamw *a = t->opt;
    const int64_t nt = ffn_model_num_tensors(t->model);
    if (!d->held_allgatherv)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_train_run: dist: held_group without held_allgatherv");
    a->zlo = calloc((size_t)nt + 1, sizeof *a->zlo);
    a->zlen = calloc((size_t)nt + 1, sizeof *a->zlen);
    a->zgrp = malloc(((size_t)nt + 1) * sizeof *a->zgrp);
    a->zvoff = calloc((size_t)nt + 1, sizeof *a->zvoff);
    int64_t *moff = malloc(((size_t)nt + 1) * sizeof *moff);
    if (!a->zlo || !a->zlen || !a->zgrp || !a->zvoff || !moff) {
        free(moff);
        return ffn_error(FFN_ERR_NOMEM, "out of memory");
    }
    int64_t rank[2] = {0, 0}, glo[2], gcnt[2];
    a->zsize[0] = a->zsize[1] = 0, a->zP[0] = a->zP[1] = 1;
    for (int64_t i = 0; i < nt; i++) {
        a->zgrp[i] = -1;
        if (!t->held[i]) continue;
        int64_t r, P;
        int g = d->held_group(d->user, t->model, i, &r, &P);
        if (g < 0 || g > 1 || P < 1 || r < 0 || r >= P) {
            free(moff);
            return ffn_error(FFN_ERR_INVALID_ARG, "ffn_train_run: dist: held_group %d, rank %lld of %lld",
                             g, (long long)r, (long long)P);
        }
        a->zgrp[i] = g, rank[g] = r, a->zP[g] = P;
        a->zvoff[i] = a->zsize[g];
        a->zsize[g] += ffn_model_tensor_at(t->model, i)->numel;
    }
    for (int g = 0; g < 2; g++) {
        int64_t base = a->zsize[g] / a->zP[g], extra = a->zsize[g] % a->zP[g];
        glo[g] = rank[g] * base + (rank[g] < extra ? rank[g] : extra);
        gcnt[g] = base + (rank[g] < extra);
    }
    int64_t k = 0;
    for (int64_t i = 0; i < nt; i++) {
        moff[i] = -1;
        if (a->zgrp[i] < 0) continue;
        const int g = (int)a->zgrp[i];
        const int64_t v0 = a->zvoff[i], v1 = v0 + ffn_model_tensor_at(t->model, i)->numel;
        const int64_t lo = glo[g] > v0 ? glo[g] : v0, hi = glo[g] + gcnt[g] < v1 ? glo[g] + gcnt[g] : v1;
        a->zlo[i] = hi > lo ? lo - v0 : 0;
        a->zlen[i] = hi > lo ? hi - lo : 0;
        moff[i] = k;
        k += a->zlen[i];
    }
    float *m = moments_alloc(2 * (k ? k : 1));
    if (!m) {
        free(moff);
        return ffn_error(FFN_ERR_NOMEM, "out of memory (optimizer moments)");
    }
    for (int64_t i = 0; i < nt; i++) {
        if (moff[i] < 0 || !a->zlen[i]) continue;
        const size_t b = (size_t)a->zlen[i] * sizeof *m;
        memcpy(m + moff[i], t->moments + a->moff[i] + a->zlo[i], b);
        memcpy(m + k + moff[i], t->moments + a->n_held + a->moff[i] + a->zlo[i], b);
    }
    moments_free(a->moments);
    t->zfull_moff = a->moff, t->zfull_k = a->n_held;
    a->moff = moff, a->n_held = k;
    a->moments = t->moments = m;
    a->zh = d;
    if (d->held_reduce_scatter) held_zero_release(a, ffn_model_grads(t->model, NULL));
    return FFN_OK;
}

static ffn_status held_gather_whole(trainer *t);
/* Sharded state, before a save (every rank): under ZeRO-1 the held
 * tensors' moments put together whole first (into the layout held_shard
 * made), then held_gather_whole. */
static ffn_status held_gather(trainer *t) {
    ffn_adamw *a = t->opt;
    t->st_next = 0;
    if (!a->zh && t->streamed) { /* the held layout as it is */
        t->st_mom = t->moments, t->st_moff = a->moff, t->st_k = a->n_held;
        return FFN_OK;
    }
    if (!a->zh) return held_gather_whole(t);
    if (t->streamed && !t->o.dist->held_gatherv) { /* each tensor's parts as it comes */
        t->st_parts = 1;
        t->st_moff = t->zfull_moff; /* -1: not held here, from the holder */
        return FFN_OK;
    }
    const int64_t nt = ffn_model_num_tensors(t->model), K = t->zfull_k, k = a->n_held;
    float *whole = moments_alloc(2 * (K ? K : 1));
    float **where = calloc((size_t)nt + 1, sizeof *where);
    ffn_status st = whole && where ? FFN_OK
                    : ffn_error(FFN_ERR_NOMEM, "out of memory (gathering the optimizer moments)");
    /* the replicated tensors' moments to the writer alone (held_gatherv):
     * the other ranks leave their pages of `whole` untouched (it costs
     * them only their experts' moments) */
    const ffn_train_dist *d = t->o.dist;
    const int to_writer = d->held_gatherv && a->zP[0] > 1;
    int *cd = malloc((size_t)(2 * a->zP[0] + 1) * sizeof *cd);
    if (!cd && st == FFN_OK) st = ffn_error(FFN_ERR_NOMEM, "out of memory");
    for (int pass = 0; pass < 2 && st == FFN_OK; pass++) { /* m, then v */
        for (int64_t i = 0; i < nt; i++) {
            where[i] = NULL;
            if (t->zfull_moff[i] < 0) continue;
            float *dst = whole + pass * K + t->zfull_moff[i];
            const float *mine = t->moments + pass * k + a->moff[i];
            if (to_writer && a->zgrp[i] == 0) {
                if (d->writer) memcpy(dst + a->zlo[i], mine, (size_t)a->zlen[i] * sizeof *whole);
                held_zero_parts(a, i, cd);
                st = d->held_gatherv(d->user, dst, mine, cd, cd + a->zP[0]);
                if (st != FFN_OK) break;
                continue;
            }
            where[i] = dst;
            memcpy(where[i] + a->zlo[i], mine, (size_t)a->zlen[i] * sizeof *whole);
        }
        if (st == FFN_OK) st = held_zero_allgather(a, where);
    }
    free(cd);
    free(where);
    if (st == FFN_OK && t->streamed) { /* streamed from the whole held layout */
        t->zwhole = whole;
        t->st_mom = whole, t->st_moff = t->zfull_moff, t->st_k = K;
        return FFN_OK;
    }
    if (st == FFN_OK) { /* the whole held layout for the gather, then back */
        int64_t *moff = a->moff;
        float *mine = t->moments;
        a->moff = t->zfull_moff, a->n_held = K, t->moments = whole;
        st = held_gather_whole(t);
        a->moff = moff, a->n_held = k, t->moments = mine;
    }
    moments_free(whole);
    return st;
}

/* Sharded state, before a save (every rank): the writer gets every
 * tensor's parameters (into the model's own block) and moments (into a
 * whole block, freed with held_release) from the ranks holding them. */
static ffn_status held_gather_whole(trainer *t) {
    const ffn_train_dist *d = t->o.dist;
    const ffn_adamw *a = t->opt;
    const int64_t nt = ffn_model_num_tensors(t->model), n = t->n_params, k = a->n_held;
    float **where = calloc((size_t)nt + 1, sizeof *where);
    float *w = ffn_model_params(t->model, NULL), *all = d->writer ? moments_alloc(2 * n) : NULL;
    ffn_status st = where && (all || !d->writer) ? FFN_OK
                    : ffn_error(FFN_ERR_NOMEM, "out of memory (gathering the checkpoint)");
    for (int64_t i = 0; st == FFN_OK && i < nt; i++) where[i] = w + ffn_model_tensor_at(t->model, i)->offset;
    if (st == FFN_OK) st = d->gather_tensors(d->user, t->model, where);
    for (int pass = 0; pass < 2 && st == FFN_OK; pass++) { /* m, then v */
        for (int64_t i = 0; i < nt; i++) {
            const ffn_model_tensor *ten = ffn_model_tensor_at(t->model, i);
            float *mine = a->moff[i] >= 0 ? t->moments + pass * k + a->moff[i] : NULL;
            where[i] = all ? all + pass * n + ten->offset : mine;
            if (all && mine) memcpy(where[i], mine, (size_t)ten->numel * sizeof *mine);
        }
        st = d->gather_tensors(d->user, t->model, where);
    }
    free(where);
    t->full_moments = all, t->full_np = n;
    return st;
}
static void held_release(trainer *t) {
    moments_free(t->full_moments);
    moments_free(t->zwhole);
    free(t->st_buf);
    t->full_moments = t->zwhole = t->st_buf = NULL;
    t->st_cap = 0;
    if (t->o.dist->writer && !t->streamed) release_unheld(t);
}

/* Tensor parallel, before a save (every rank): the whole model's parameters
 * and moments from the ranks' shares. */
static ffn_status tp_gather(trainer *t) {
    const ffn_train_dist *d = t->o.dist;
    ffn_status st = d->gather_flat(d->user, t->model, ffn_model_params(t->model, NULL), t->full,
                                   ffn_model_params(t->full, NULL));
    const float *mom = t->zero_all ? t->zero_all : t->moments; /* ZeRO-1: gathered first */
    if (st == FFN_OK) st = d->gather_flat(d->user, t->model, mom, t->full, t->full_moments);
    if (st == FFN_OK)
        st = d->gather_flat(d->user, t->model, mom + t->n_params, t->full,
                            t->full_moments + t->full_np);
    return st;
}

static void train_note(const char *message, void *user) {
    const trainer *t = user;
    if (t->cb && t->cb->on_note) t->cb->on_note(message, t->cb->user);
}

static ffn_status run(trainer *t, ffn_train_result *result) {
    const ffn_train_options *o = &t->o;
    const ffn_train_callbacks *cb = t->cb;
    ffn_status st;
    char *rdir = NULL;
    ffn_st_file *state = NULL;
    const double t0 = now_seconds();
    /* One writer per output directory for the whole run. */
    ffn_dirlock lock = {.fd = -1};
    int setup_agreed = 0;
    if (o->out_dir && (st = ffn_dirlock_take(o->out_dir, &lock)) != FFN_OK) goto done;

    /* A fine-tuned run resumed: the model's config is the run's own
     * config.json (its context is the pretrained model's, not seq_len). */
    int resume_init = 0, seed_held = 0;
    ffn_model_config cfg = o->model;
    if (o->resume_dir) {
        st = ffn_dirswap_resolve(o->resume_dir, &rdir);
        if (st == FFN_OK) st = open_train_state(rdir, &state);
        if (st == FFN_OK) st = resume_check(t, rdir, state);
        if (st == FFN_OK) {
            const char *init = ffn_st_metadata(state, "init");
            const char *vf = ffn_st_metadata(state, "vocab_file");
            resume_init = init != NULL;
            if (init) snprintf(t->init_source, sizeof t->init_source, "%s", init);
            char *cp = ffn_path_join(rdir, "/", FFN_CONFIG_FILENAME);
            st = !cp ? ffn_error(FFN_ERR_NOMEM, "out of memory")
                 : resume_init ? ffn_model_config_load(cp, &cfg) : FFN_OK;
            free(cp);
            char *tp = ffn_path_join(rdir, "/", vf ? FFN_LLAMA2C_TOKENIZER_FILENAME : FFN_TOKENIZER_FILENAME);
            if (st == FFN_OK)
                st = tp ? load_vocab_file(t, tp, resume_init ? cfg.vocab_size : 0)
                        : ffn_error(FFN_ERR_NOMEM, "out of memory");
            free(tp);
        }
        if (st != FFN_OK) goto done;
    } else if (o->init_path) {
        st = load_init(t);
        if (st != FFN_OK) goto done;
    }
    st = load_text(t);
    if (st == FFN_OK && state) {
        const char *fp = ffn_st_metadata(state, "data_fingerprint");
        char mine[17];
        snprintf(mine, sizeof mine, "%016llx", (unsigned long long)t->fingerprint);
        if (!fp || strcmp(fp, mine)) {
            const char *src = ffn_st_metadata(state, "data_source"), *bytes = ffn_st_metadata(state, "data_bytes");
            st = ffn_error(FFN_ERR_CONFIG,
                           "%s: cannot resume: data (--data) differs: the checkpoint was trained on "
                           "%s (%s bytes, fingerprint %s), this run reads %s (%zu bytes, fingerprint %s)",
                           rdir, src ? src : "?", bytes ? bytes : "?", fp ? fp : "?",
                           t->data_source, t->text_len, mine);
        }
    }
    if (st == FFN_OK) st = tokenize(t);
    if (st != FFN_OK) goto done;

    /* The model: vocabulary from the tokenizer, context from seq_len
     * (a fine-tuned model keeps both from the pretrained one). */
    if (!t->model) {
        if (!resume_init) {
            cfg.vocab_size = ffn_vocab_size(t->vocab);
            cfg.max_position_embeddings = o->seq_len;
        }
        ffn_model_options mopt = {.max_batch = o->batch_size, .max_seq = o->seq_len, .training = 1,
                              .precision = o->precision};
        if (o->dist && o->dist->stage_layers) /* a pipeline stage: its layers only */
            st = o->dist->stage_layers(o->dist->user, &cfg, &mopt.layer_begin, &mopt.layer_end);
        if (st == FFN_OK) st = ffn_model_create(t->ctx, &cfg, &mopt, &t->model);
        if (st != FFN_OK) goto done;
    }
    st = ffn_adamw_create(t->model, o, &t->opt);
    if (st != FFN_OK) goto done;
    t->moments = ffn_adamw_moments(t->opt, &t->n_params);
    const int64_t nbatch = (pipelined(t) ? o->grad_accum : 1) * o->batch_size * o->seq_len;
    t->batch_tokens = malloc((size_t)nbatch * sizeof(int32_t));
    t->batch_targets = malloc((size_t)nbatch * sizeof(int32_t));
    if (!t->batch_tokens || !t->batch_targets) {
        st = ffn_error(FFN_ERR_NOMEM, "out of memory (batch buffers)");
        goto done;
    }
    if (state) {
        st = resume_state(t, rdir, state);
        if (st == FFN_OK && t->step >= o->steps)
            st = ffn_error(FFN_ERR_CONFIG,
                           "%s: the checkpoint is at step %lld and --steps is %lld: nothing to "
                           "train (pass a larger --steps to continue)",
                           rdir, (long long)t->step, (long long)o->steps);
    } else {
        /* sharded state (a pipeline stage, expert parallel) from the seed:
         * its own tensors only, made below once the rank's model is in place */
        seed_held = !t->init_source[0] && o->dist && o->dist->holds;
        if (!seed_held && !t->init_source[0]) st = ffn_model_init_weights(t->model, o->seed);
        ffn_rng_seed(&t->rng, o->seed ^ 0x6261746368657321ull); /* a stream apart from init */
        if (st == FFN_OK) st = grow_history(t, 1);
    }
    ffn_st_close(state);
    state = NULL;
    if (st == FFN_OK && o->dist && o->dist->shard) st = tp_shard(t);
    if (st == FFN_OK && o->dist && o->dist->zero_range) st = zero_shard(t);
    if (st == FFN_OK && t->held && o->dist->held_group) st = held_zero(t);
    /* after the shard: under --ep the runners hold this rank's experts, so
     * the packing that follows the initialisation packs those alone */
    if (st == FFN_OK && seed_held) st = init_held(t);
    if (st != FFN_OK) goto done;

    /* Outputs: check the checkpoint directory and open the log first, so a
     * bad path fails before any training. */
    if (o->out_dir) {
        st = ffn_dirswap_prepare(o->out_dir, train_note, t);
        if (st != FFN_OK) goto done;
        /* An interrupted fallback swap (DIR gone, DIR.old whole) was read
         * from DIR.old and has just been put back as DIR: read the rest
         * (the metrics history) from where it is now. */
        if (rdir && o->resume_dir && !ffn_dirswap_is_model_dir(rdir)) {
            free(rdir);
            rdir = NULL;
            st = ffn_dirswap_resolve(o->resume_dir, &rdir);
            if (st != FFN_OK) goto done;
        }
    }
    /* The log: DIR/metrics.jsonl by default, written whole with each save
     * (so it always matches the saved step, and a resume carries it on);
     * a --log elsewhere is written live, line by line. */
    t->log_in_dir = o->out_dir && (!o->metrics_path || log_is_in_dir(o->metrics_path, o->out_dir));
    if (t->log_in_dir) {
        if (rdir) {
            char *lp = ffn_path_join(rdir, "/", FFN_METRICS_FILENAME);
            st = lp ? log_read(t, lp, t->step) : ffn_error(FFN_ERR_NOMEM, "out of memory");
            free(lp);
            if (st != FFN_OK) goto done;
        }
    } else if (o->metrics_path && o->resume_dir) {
        st = trim_metrics(o->metrics_path, t->step);
        if (st != FFN_OK) goto done;
    }
    if (o->metrics_path && !t->log_in_dir) {
        t->metrics = fopen(o->metrics_path, o->resume_dir ? "a" : "w");
        if (!t->metrics) {
            st = ffn_error(FFN_ERR_IO, "%s: cannot open the metrics log: %s", o->metrics_path,
                           strerror(errno));
            goto done;
        }
    }

    const int64_t end = o->stop_at > 0 && o->stop_at < o->steps ? o->stop_at : o->steps;
    const int64_t start = t->step;
    if (end <= start) {
        st = ffn_error(FFN_ERR_CONFIG, "stop_at: %lld is not after the checkpoint's step %lld",
                       (long long)o->stop_at, (long long)start);
        goto done;
    }
    /* Data parallel: every rank is ready, or every rank stops with the
     * first failing rank's message. */
    setup_agreed = 1;
    st = dp_agree(t, FFN_OK);
    if (st == FFN_OK && o->dist && o->dist->check_same) {
        int64_t np;
        const float *w = ffn_model_params(t->full ? t->full : t->model, &np);
        st = o->dist->check_same(o->dist->user, "the training data (its fingerprint)",
                                 &t->fingerprint, sizeof t->fingerprint);
        if (st == FFN_OK && !seed_held) /* seed_held: each rank made its own tensors */
            st = o->dist->check_same(o->dist->user, "the starting weights (the checkpoint, --init or "
                                     "the seed)", w, (size_t)np * sizeof *w);
        if (st == FFN_OK)
            st = o->dist->check_same(o->dist->user, "the checkpoint's step", &t->step, sizeof t->step);
    }
    if (st != FFN_OK) goto done;
    if (t->held) release_unheld(t);
    if (cb && cb->on_start)
        /* the model's parameters, not a tensor-parallel rank's share */
        cb->on_start(o, start, t->full ? t->full_np : t->n_params, t->n_train, t->n_val, cb->user);
    const char *saved = NULL;
    int interrupted = 0;
    while (t->step < end) {
        ffn_train_point pt;
        double s0 = now_seconds();
        st = train_step(t, &pt);
        if (st != FFN_OK) goto done;
        const double step_s = now_seconds() - s0;
        t->train_seconds += step_s;
        if (o->profile) {
            ffn_profile_charge(o->profile, FFN_PROFILE_OTHER); /* the step's last lines */
            o->profile->step_seconds += step_s;
            o->profile->steps++;
        }
        if ((o->eval_every > 0 && t->step % o->eval_every == 0) || t->step == end) {
            st = evaluate(t, &pt.val_loss);
            if (st == FFN_OK) st = push_eval(t, t->step, pt.val_loss);
            if (st != FFN_OK) goto done;
        }
        double elapsed = now_seconds() - t0;
        pt.tokens_per_s = (double)((t->step - start) * o->grad_accum * o->batch_size * o->seq_len) /
                          (t->train_seconds > 0 ? t->train_seconds : 1e-9);
        pt.elapsed_s = elapsed;
        pt.eta_s = elapsed / (double)(t->step - start) * (double)(end - t->step);
        if (o->dist) pt.tokens_per_s *= (double)dp_size(t);
        st = write_metrics(t, &pt);
        if (st == FFN_OK && cb && cb->on_step) cb->on_step(&pt, cb->user);
        interrupted = o->stop_flag && *o->stop_flag;
        if (o->dist && st == FFN_OK) { /* a stop request on any rank stops them all */
            double any = interrupted;
            st = dp_sum_f64(t, &any, 1);
            interrupted = any > 0;
        }
        int want_save = t->out_dir && (interrupted || t->step == end ||
                                       (o->save_every > 0 && t->step % o->save_every == 0));
        t->st_next = 0;
        if (st == FFN_OK && want_save && t->opt->zero && !t->streamed) st = zero_gather(t); /* every rank */
        if (st == FFN_OK && want_save && t->full) st = tp_gather(t); /* every rank */
        if (st == FFN_OK && want_save && t->held) st = held_gather(t); /* every rank */
        if (st == FFN_OK && want_save && o->out_dir) { /* the writer's */
            st = save_checkpoint(t, o->out_dir);
            if (st == FFN_OK && cb && cb->on_checkpoint) cb->on_checkpoint(o->out_dir, t->step, cb->user);
        } else if (st == FFN_OK && want_save && t->streamed) {
            st = stream_rest(t); /* the others: their parts, as the writer writes them */
        }
        if (want_save && t->streamed && o->out_dir) { /* whatever the save left */
            ffn_status rs = stream_rest(t);
            if (st == FFN_OK) st = rs;
        }
        if (want_save && t->streamed == 2) {
            free(t->st_buf);
            t->st_buf = NULL, t->st_cap = 0;
        }
        if (t->opt->zero) zero_release(t);
        if (t->held && want_save) held_release(t);
        if (o->dist) st = dp_agree(t, st); /* the writer's save, the log: all or none */
        if (st != FFN_OK) goto done;
        if (want_save) saved = t->out_dir;
        if (interrupted) break;
    }
    /* tokens_per_s of the result counts this run only. */
    int64_t seen = t->tokens_seen;
    t->tokens_seen = (t->step - start) * o->grad_accum * o->batch_size * o->seq_len * dp_size(t);
    if (result) st = fill_result(t, result, now_seconds() - t0, saved);
    t->tokens_seen = seen;
    if (st == FFN_OK && interrupted) {
        if (saved)
            st = ffn_error(FFN_ERR_INTERRUPTED,
                           "interrupted at step %lld of %lld; checkpoint saved in %s (continue "
                           "with --resume %s)",
                           (long long)t->step, (long long)o->steps, saved, saved);
        else
            st = ffn_error(FFN_ERR_INTERRUPTED, "interrupted at step %lld of %lld (no --out: nothing saved)",
                           (long long)t->step, (long long)o->steps);
    }
done:
    if (!setup_agreed) st = dp_agree(t, st); /* a set-up failure on one rank stops all */
    ffn_st_close(state);
    free(rdir);
    ffn_dirlock_release(&lock);
    return st;
}

ffn_status ffn_train_run(ffn_ctx *ctx, const ffn_train_options *opts,
                         const ffn_train_callbacks *callbacks, ffn_train_result *result) {
    if (result) memset(result, 0, sizeof *result);
    if (!ctx || !opts) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_train_run: NULL argument");
    ffn_status st = validate_options(opts);
    if (st != FFN_OK) return st;
    if (opts->init_path && opts->resume_dir)
        return ffn_error(FFN_ERR_CONFIG, "init_path %s and resume_dir %s: a resumed run continues "
                         "its own weights (the run directory remembers its init model); give one",
                         opts->init_path, opts->resume_dir);
    ffn_ctx_enter(ctx);
    trainer t;
    memset(&t, 0, sizeof t);
    t.ctx = ctx;
    t.o = *opts;
    t.warmup = resolved_warmup(opts);
    t.o.warmup = t.warmup;
    t.cb = callbacks;
    t.out_dir = opts->out_dir;
    if (opts->dist) {
        if (opts->dist->size < 1 || opts->dist->rank < 0 || opts->dist->rank >= opts->dist->size ||
            !opts->dist->allreduce_f32 || !opts->dist->allreduce_f64)
            return ffn_error(FFN_ERR_INVALID_ARG, "ffn_train_run: dist: rank %lld of %lld, or a "
                             "missing reduction", (long long)opts->dist->rank,
                             (long long)opts->dist->size);
        if (!opts->dist->writer) { /* only the writer touches the run directory and the log */
            t.o.out_dir = NULL;
            t.o.metrics_path = NULL;
        }
    }
    st = run(&t, result);
    trainer_free(&t);
    return st;
}
