/* generate.c -- generation, in one place: the sampler (greedy or nucleus
 * over a seeded xoshiro256** stream) and the decode loop over the KV cache
 * (ffn_generate_tokens), with the text-prompt entry points on top.  Used by
 * `ffn generate`, `ffn run` and the demo.
 *
 * Letters: V vocab size, T the model's context (max_position_embeddings). */
#include "train/train_internal.h"
#include "data/vocab_internal.h"
#include "ffn/train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void ffn_generate_options_default(ffn_generate_options *o) {
    o->steps = 100;
    o->temperature = 0.8;
    o->top_p = 0.95;
    o->seed = 42;
    o->allow_unk = 0;
    o->add_bos = 0;
    o->whole_prompt = 0;
}

typedef struct prob_entry {
    double p;
    int32_t id;
} prob_entry;

struct ffn_sampler {
    int64_t V;
    double temperature, top_p;
    ffn_rng rng;
    prob_entry *work; /* (V) */
};

ffn_status ffn_sampler_create(int64_t vocab_size, double temperature, double top_p, uint64_t seed,
                              ffn_sampler **out) {
    if (!out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_sampler_create: out is NULL");
    *out = NULL;
    if (vocab_size < 1 || (uint64_t)vocab_size > SIZE_MAX / sizeof(prob_entry) ||
        !(temperature >= 0) || !isfinite(temperature) || !(top_p > 0 && top_p <= 1))
        return ffn_error(FFN_ERR_CONFIG,
                         "sampler: expected vocab_size >= 1, temperature >= 0 and top_p in (0, 1]; "
                         "got %lld, %g, %g",
                         (long long)vocab_size, temperature, top_p);
    ffn_sampler *s = calloc(1, sizeof *s);
    if (s) s->work = malloc((size_t)vocab_size * sizeof(prob_entry));
    if (!s || !s->work) {
        free(s);
        return ffn_error(FFN_ERR_NOMEM, "out of memory (sampler of %lld entries)",
                         (long long)vocab_size);
    }
    s->V = vocab_size;
    s->temperature = temperature;
    s->top_p = top_p;
    ffn_rng_seed(&s->rng, seed);
    *out = s;
    return FFN_OK;
}

void ffn_sampler_free(ffn_sampler *s) {
    if (!s) return;
    free(s->work);
    free(s);
}

static int by_prob_desc(const void *a, const void *b) {
    const prob_entry *x = a, *y = b;
    if (x->p != y->p) return x->p < y->p ? 1 : -1;
    return x->id - y->id; /* ties: lower id first (deterministic) */
}

int32_t ffn_sampler_sample(ffn_sampler *s, const float *logits) {
    const int64_t V = s->V;
    prob_entry *work = s->work;
    int64_t best = 0;
    for (int64_t i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    if (s->temperature <= 0) return (int32_t)best;
    double maxl = logits[best], sum = 0.0;
    for (int64_t i = 0; i < V; i++) {
        work[i].p = exp(((double)logits[i] - maxl) / s->temperature);
        work[i].id = (int32_t)i;
        sum += work[i].p;
    }
    int64_t n = V;
    if (s->top_p < 1.0) {
        qsort(work, (size_t)V, sizeof *work, by_prob_desc);
        double cum = 0.0;
        for (n = 0; n < V; n++) {
            cum += work[n].p / sum;
            if (cum >= s->top_p) {
                n++;
                break;
            }
        }
        if (n > V) n = V;
        sum = 0.0;
        for (int64_t i = 0; i < n; i++) sum += work[i].p;
    }
    double r = (double)(ffn_rng_next(&s->rng) >> 11) * 0x1p-53 * sum, acc = 0.0;
    for (int64_t i = 0; i < n; i++) {
        acc += work[i].p;
        if (r < acc) return work[i].id;
    }
    return work[n - 1].id;
}

/* ---- generating ------------------------------------------------------------------ */

ffn_status ffn_generate_tokens(ffn_model *model, const ffn_vocab *vocab, const int32_t *prompt,
                               int64_t n_prompt, const ffn_generate_options *opts,
                               const ffn_generate_callbacks *cb) {
    if (!model || !opts || (!prompt && n_prompt) || n_prompt < 1)
        return ffn_error(FFN_ERR_INVALID_ARG,
                         "ffn_generate_tokens: NULL argument or an empty prompt (%lld tokens)",
                         (long long)n_prompt);
    if (opts->steps < 0 || !(opts->temperature >= 0) || !(opts->top_p > 0 && opts->top_p <= 1))
        return ffn_error(FFN_ERR_CONFIG,
                         "generate: expected steps >= 0, temperature >= 0 and top_p in (0, 1]; got "
                         "%lld, %g, %g",
                         (long long)opts->steps, opts->temperature, opts->top_p);
    const ffn_model_config *cfg = ffn_model_get_config(model);
    const int64_t V = cfg->vocab_size, ctx_len = cfg->max_position_embeddings;
    /* a Hugging Face tokenizer may have fewer ids than the model's padded
     * embedding (a generated id past it has no text) */
    const ffn_vocab_kind vk = vocab ? ffn_vocab_get_kind(vocab) : FFN_VOCAB_BYTE;
    const int hf = vk == FFN_VOCAB_BPE_BYTE || vk == FFN_VOCAB_BPE_SP;
    if (vocab && (hf ? ffn_vocab_size(vocab) > V : ffn_vocab_size(vocab) != V))
        return ffn_error(FFN_ERR_CONFIG, "generate: the vocabulary has %lld tokens, the model %lld",
                         (long long)ffn_vocab_size(vocab), (long long)V);
    for (int64_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= V)
            return ffn_error(FFN_ERR_INVALID_ARG,
                             "generate: prompt token %lld: id %d outside the vocabulary [0, %lld)",
                             (long long)i, prompt[i], (long long)V);
    /* history: the last `window` tokens (re-fed when the cache fills); the
     * window, the history and the model's cache are sized by what the run
     * uses (the prompt and the steps), at most the context, never by a
     * context the file declares alone */
    /* the last sampled token is never fed: prompt + steps - 1 positions */
    const int64_t need = n_prompt + (opts->steps > 0 ? opts->steps - 1 : 0);
    const int64_t window = need < ctx_len ? need : ctx_len;
    ffn_status st = ffn_model_reserve(model, 1, window);
    if (st) return ffn_error_prefix(st, "generate: a cache of %lld positions", (long long)window);
    int32_t *hist = malloc((size_t)window * sizeof(int32_t));
    float *logits = malloc((size_t)V * sizeof(float));
    ffn_sampler *sampler = NULL;
    if (!hist || !logits) {
        st = ffn_error(FFN_ERR_NOMEM, "out of memory (generation buffers)");
        goto done;
    }
    st = ffn_sampler_create(V, opts->temperature, opts->top_p, opts->seed, &sampler);
    if (st != FFN_OK) goto done;
    const int64_t n = n_prompt;
    int64_t keep = n < ctx_len ? n : ctx_len / 2 > 0 ? ctx_len / 2 : 1;
    if (opts->whole_prompt && n <= ctx_len) keep = n;
    memcpy(hist, prompt + (n - keep), (size_t)keep * sizeof(int32_t));
    int64_t n_hist = keep;
    ffn_model_reset(model);
    st = ffn_model_prefill(model, hist, n_hist, logits);
    const int32_t unk = vocab && !opts->allow_unk ? ffn_vocab_specials(vocab).unk : -1;
    int32_t prev = prompt[n - 1];
    for (int64_t i = 0; st == FFN_OK && i < opts->steps; i++) {
        /* "<unk>" stands for text the vocabulary lacks: never generate it */
        if (V > 1 && unk >= 0 && unk < V) logits[unk] = -INFINITY;
        int32_t next = ffn_sampler_sample(sampler, logits);
        const char *bytes = NULL;
        size_t len = 0;
        char b1[1];
        if (vocab && ffn_vocab_piece(vocab, prev, next, b1, &bytes, &len) != FFN_OK) bytes = NULL;
        prev = next;
        if (cb && cb->on_token && cb->on_token(next, bytes, bytes ? len : 0, cb->user)) break;
        if (i + 1 == opts->steps) break;
        if (n_hist == ctx_len) { /* the cache is full: keep the last half and re-feed it */
            int64_t half = ctx_len / 2 > 0 ? ctx_len / 2 : 1;
            memmove(hist, hist + (ctx_len - half), (size_t)half * sizeof(int32_t));
            n_hist = half;
            ffn_model_reset(model);
            st = ffn_model_prefill(model, hist, n_hist, NULL);
            if (st != FFN_OK) break;
        }
        hist[n_hist++] = next;
        st = ffn_model_step(model, next, logits);
        if (st == FFN_OK && cb && cb->on_logits) cb->on_logits(next, logits, cb->user);
    }
done:
    free(hist);
    free(logits);
    ffn_sampler_free(sampler);
    return st;
}

/* The earlier entry point: a text prompt over ffn's tokenizer, the token's
 * bytes to the callback. */
typedef struct text_cb {
    int (*on_token)(const char *bytes, size_t len, void *user);
    void *user;
} text_cb;

static int text_token(int32_t id, const char *bytes, size_t len, void *user) {
    (void)id;
    text_cb *t = user;
    return t->on_token && bytes ? t->on_token(bytes, len, t->user) : 0;
}

ffn_status ffn_generate(ffn_model *model, const ffn_tokenizer *tok, const char *prompt,
                        const ffn_generate_options *opts,
                        int (*on_token)(const char *bytes, size_t len, void *user), void *user) {
    if (!model || !tok || !opts)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_generate: NULL argument");
    /* a vocab over the caller's tokenizer, not owning it */
    ffn_vocab *vocab = NULL;
    ffn_status st = vocab_borrow_tokenizer(tok, &vocab);
    if (st != FFN_OK) return st;
    st = ffn_generate_text(model, vocab, prompt, opts, &(ffn_generate_callbacks){
        .on_token = text_token, .user = &(text_cb){on_token, user}});
    ffn_vocab_free(vocab);
    return st;
}

ffn_status ffn_generate_text(ffn_model *model, const ffn_vocab *vocab, const char *prompt,
                             const ffn_generate_options *opts, const ffn_generate_callbacks *cb) {
    if (!model || !vocab || !opts)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_generate_text: NULL argument");
    if (opts->steps < 0 || !(opts->temperature >= 0) || !(opts->top_p > 0 && opts->top_p <= 1))
        return ffn_error(FFN_ERR_CONFIG,
                         "generate: expected steps >= 0, temperature >= 0 and top_p in (0, 1]; got "
                         "%lld, %g, %g",
                         (long long)opts->steps, opts->temperature, opts->top_p);
    int32_t *ids = NULL;
    int64_t n = 0;
    ffn_status st = FFN_OK;
    if (prompt && *prompt) {
        st = ffn_vocab_encode(vocab, prompt, strlen(prompt), opts->add_bos, &ids, &n);
        if (st != FFN_OK) return ffn_error_prefix(st, "prompt");
    }
    if (n == 0) { /* start from a newline when the vocabulary has one, else token 0 */
        free(ids);
        int64_t m = 0;
        int32_t *nl = NULL;
        ids = NULL;
        const int32_t unk = ffn_vocab_specials(vocab).unk;
        if (ffn_vocab_encode(vocab, "\n", 1, 0, &nl, &m) == FFN_OK && m == 1 && nl[0] != unk) {
            ids = nl;
        } else {
            free(nl);
            ids = malloc(sizeof(int32_t));
            if (ids) ids[0] = 0;
        }
        n = 1;
        if (!ids) return ffn_error(FFN_ERR_NOMEM, "out of memory");
    }
    st = ffn_generate_tokens(model, vocab, ids, n, opts, cb);
    free(ids);
    return st;
}
