/* trace.c -- causal tracing through the taps (include/ffn/trace.h): a
 * clean run captures every layer's resid_post, mlp_out and attn_out; a
 * corrupted run adds noise to the subject's embeddings (a patch on
 * layers.0.resid_pre); restored runs put one clean state back (a SET patch
 * after the noise).  Also the prompt's tokens and subject span, and the
 * average over facts by position class.
 *
 * Letters: T positions, L layers, D hidden, V vocab, S samples, K kinds. */
#include "ffn/trace.h"
#include "ffn/tap.h"
#include "base/common.h"
#include "nn/tap_internal.h"
#include "analysis/logits.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"

static const ffn_tap_point kind_point[FFN_TRACE_N_KINDS] = {FFN_TAP_RESID_POST, FFN_TAP_MLP_OUT,
                                                           FFN_TAP_ATTN_OUT};

const char *ffn_trace_kind_name(ffn_trace_kind kind) {
    return kind >= 0 && kind < FFN_TRACE_N_KINDS ? ffn_tap_point_name(kind_point[kind]) : NULL;
}

void ffn_trace_options_default(ffn_trace_options *o) {
    if (o) *o = (ffn_trace_options){.samples = 10, .noise = 3.0, .seed = 1};
}

void ffn_trace_result_free(ffn_trace_result *r) {
    if (!r) return;
    for (int k = 0; k < FFN_TRACE_N_KINDS; k++) free(r->effect[k]);
    free(r);
}

/* The noise of one draw on the subject's embeddings, as patches. */
static ffn_status add_noise(ffn_model *m, const float *noise, int64_t b, int64_t e, int64_t D) {
    for (int64_t t = b; t < e; t++) {
        ffn_status st = ffn_model_tap_patch_vector(m, "layers.0.resid_pre", t, FFN_TAP_OP_ADD,
                                                   noise + (t - b) * D, D);
        if (st) return st;
    }
    return FFN_OK;
}

/* The standard deviation of every entry of the embedding. */
static double embedding_std(ffn_model *m) {
    const ffn_model_tensor *t = ffn_model_find_tensor(m, "model.embed_tokens.weight");
    const float *p = ffn_model_params(m, NULL) + t->offset;
    double s = 0, ss = 0;
    for (int64_t i = 0; i < t->numel; i++) s += p[i];
    const double mean = s / (double)t->numel;
    for (int64_t i = 0; i < t->numel; i++) ss += ((double)p[i] - mean) * ((double)p[i] - mean);
    return sqrt(ss / (double)t->numel);
}

ffn_status ffn_trace_run(ffn_ctx *ctx, ffn_model *m, const int32_t *tokens, int64_t T,
                         int64_t sb, int64_t se, int32_t target, const ffn_trace_options *opts,
                         ffn_trace_result **out) {
    (void)ctx;
    if (!m || !tokens || !out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_trace_run: NULL argument");
    *out = NULL;
    ffn_trace_options o;
    ffn_trace_options_default(&o);
    if (opts) o = *opts;
    const ffn_model_config *c = ffn_model_get_config(m);
    const int64_t L = c->num_hidden_layers, D = c->hidden_size, V = c->vocab_size;
    if (T < 1 || T > c->max_position_embeddings)
        return ffn_error(FFN_ERR_INVALID_ARG, "trace: %lld tokens (expected 1 .. %lld, the context)",
                         (long long)T, (long long)c->max_position_embeddings);
    for (int64_t t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= V)
            return ffn_error(FFN_ERR_INVALID_ARG, "trace: token %lld is id %d (expected 0 .. %lld)",
                             (long long)t, tokens[t], (long long)(V - 1));
    if (sb < 0 || se <= sb || se > T)
        return ffn_error(FFN_ERR_INVALID_ARG, "trace: subject tokens [%lld, %lld) (expected a non-empty span of 0 .. %lld)",
                         (long long)sb, (long long)se, (long long)T);
    if (target < 0 || target >= V)
        return ffn_error(FFN_ERR_INVALID_ARG, "trace: target id %d (expected 0 .. %lld)", target,
                         (long long)(V - 1));
    if (o.samples < 1 || o.samples > 100000)
        return ffn_error(FFN_ERR_INVALID_ARG, "trace: samples %lld (expected 1 .. 100000)", (long long)o.samples);
    if (!(o.noise >= 0) || !isfinite(o.noise))
        return ffn_error(FFN_ERR_INVALID_ARG, "trace: noise %g (expected a finite number >= 0)", o.noise);

    ffn_trace_result *r = calloc(1, sizeof *r);
    const int64_t nS = se - sb;
    float *logits = malloc((size_t)(T * V) * sizeof *logits);
    float *clean = malloc((size_t)(FFN_TRACE_N_KINDS * L * T * D) * sizeof *clean);
    float *noise = malloc((size_t)(o.samples * nS * D) * sizeof *noise);
    int ok = r && logits && clean && noise;
    for (int k = 0; ok && k < FFN_TRACE_N_KINDS; k++) ok = (r->effect[k] = calloc((size_t)(L * T), sizeof(double))) != NULL;
    if (!ok) {
        ffn_trace_result_free(r);
        free(logits), free(clean), free(noise);
        return ffn_error(FFN_ERR_NOMEM, "trace: %lld layers x %lld tokens", (long long)L, (long long)T);
    }
    r->n_layers = L;
    r->n_tokens = T;
    r->subject_begin = sb;
    r->subject_end = se;
    r->target = target;
    r->samples = o.samples;
    r->noise_std = o.noise * embedding_std(m);
    ffn_rng rng;
    ffn_rng_seed(&rng, o.seed);
    for (int64_t i = 0; i < o.samples * nS * D; i++) noise[i] = (float)(r->noise_std * ffn_rng_normal(&rng));

    ffn_taps *stash = ffn_model_taps_stash(m);
    ffn_status st = ffn_model_reserve(m, 1, T);
    char name[64];
    /* clean: every state of every kind */
    for (int64_t l = 0; l < L && !st; l++)
        for (int k = 0; k < FFN_TRACE_N_KINDS && !st; k++) {
            ffn_tap_name(name, sizeof name, l, kind_point[k]);
            if (ffn_model_tap_lookup(m, name, NULL, NULL, NULL) == FFN_OK) st = ffn_model_tap_select(m, name);
        }
    if (!st) st = ffn_logits_last_prob(m, tokens, T, target, logits, &r->p_clean, NULL);
    if (!st) {
        const float *z = logits + (T - 1) * V;
        int32_t best = 0;
        for (int32_t v = 1; v < V; v++)
            if (z[v] > z[best]) best = v;
        r->clean_top = best;
    }
    for (int64_t l = 0; l < L && !st; l++)
        for (int k = 0; k < FFN_TRACE_N_KINDS; k++) {
            float *dst = clean + ((int64_t)k * L + l) * T * D;
            ffn_tap_view v;
            ffn_tap_name(name, sizeof name, l, kind_point[k]);
            if (ffn_model_tap_read(m, name, &v) == FFN_OK) memcpy(dst, v.data, (size_t)(T * D) * sizeof *dst);
            else memset(dst, 0, (size_t)(T * D) * sizeof *dst); /* a layer without an FFN adds 0 */
        }
    ffn_model_taps_clear(m);
    /* corrupted, and the input restored everywhere (the built-in check) */
    float *emb = NULL;
    if (!st) {
        st = ffn_model_tap_select(m, "layers.0.resid_pre");
        if (!st) st = ffn_logits_last_prob(m, tokens, T, target, logits, &(double){0}, NULL);
        ffn_tap_view v;
        if (!st && !(st = ffn_model_tap_read(m, "layers.0.resid_pre", &v))) {
            emb = malloc((size_t)(T * D) * sizeof *emb);
            if (!emb) st = ffn_error(FFN_ERR_NOMEM, "trace");
            else memcpy(emb, v.data, (size_t)(T * D) * sizeof *emb);
        }
        ffn_model_taps_clear(m);
    }
    double *p_corrupt = calloc((size_t)o.samples, sizeof *p_corrupt);
    if (!st && !p_corrupt) st = ffn_error(FFN_ERR_NOMEM, "trace");
    for (int64_t s = 0; s < o.samples && !st; s++) {
        const float *ns = noise + s * nS * D;
        if ((st = add_noise(m, ns, sb, se, D))) break;
        st = ffn_logits_last_prob(m, tokens, T, target, logits, &p_corrupt[s], NULL);
        r->p_corrupt += p_corrupt[s] / (double)o.samples;
        for (int64_t t = 0; t < T && !st; t++)
            st = ffn_model_tap_patch_vector(m, "layers.0.resid_pre", t, FFN_TAP_OP_SET, emb + t * D, D);
        double p = 0;
        if (!st) st = ffn_logits_last_prob(m, tokens, T, target, logits, &p, NULL);
        r->p_restore_input += p / (double)o.samples;
        ffn_model_taps_clear(m);
    }
    /* restored: one state at a time */
    for (int k = 0; k < FFN_TRACE_N_KINDS && !st; k++)
        for (int64_t l = 0; l < L && !st; l++) {
            ffn_tap_name(name, sizeof name, l, kind_point[k]);
            if (ffn_model_tap_lookup(m, name, NULL, NULL, NULL) != FFN_OK) continue; /* no FFN: effect 0 */
            const float *cl = clean + ((int64_t)k * L + l) * T * D;
            for (int64_t t = 0; t < T && !st; t++) {
                double sum = 0;
                for (int64_t s = 0; s < o.samples && !st; s++) {
                    if ((st = add_noise(m, noise + s * nS * D, sb, se, D))) break;
                    st = ffn_model_tap_patch_vector(m, name, t, FFN_TAP_OP_SET, cl + t * D, D);
                    double p = 0;
                    if (!st) st = ffn_logits_last_prob(m, tokens, T, target, logits, &p, NULL);
                    sum += p - p_corrupt[s];
                    ffn_model_taps_clear(m);
                }
                r->effect[k][l * T + t] = sum / (double)o.samples;
            }
        }
    ffn_model_taps_restore(m, stash);
    free(logits), free(clean), free(noise), free(emb), free(p_corrupt);
    if (st) {
        ffn_trace_result_free(r);
        return st;
    }
    *out = r;
    return FFN_OK;
}

/* ---- the prompt's tokens and the subject's span ------------------------------------ */

/* Tokens of the first n bytes of text; NULL-safe for n = 0. */
static ffn_status encode_n(const ffn_vocab *v, const char *text, size_t n, int32_t **ids, int64_t *k) {
    *ids = NULL;
    *k = 0;
    if (n == 0) return FFN_OK;
    return ffn_vocab_encode(v, text, n, 0, ids, k);
}

static int is_prefix(const int32_t *a, int64_t na, const int32_t *b, int64_t nb) {
    return na <= nb && (na == 0 || !memcmp(a, b, (size_t)na * sizeof *a));
}

/* 1 when token id's text is nothing but spaces. */
static int space_only(const ffn_vocab *v, int32_t prev, int32_t id) {
    char b1[1];
    const char *s;
    size_t n;
    if (ffn_vocab_piece(v, prev, id, b1, &s, &n) || n == 0) return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ') return 0;
    return 1;
}

ffn_status ffn_trace_prepare(const ffn_vocab *v, const char *prompt, const char *subject,
                             const char *target, int32_t **tokens, int64_t *n_tokens,
                             int64_t *sb, int64_t *se, int32_t *target_id) {
    if (!v || !prompt || !tokens || !n_tokens)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_trace_prepare: NULL argument");
    *tokens = NULL;
    *n_tokens = 0;
    if (!*prompt) return ffn_error(FFN_ERR_INVALID_ARG, "trace: the prompt is empty");
    const char *at = NULL;
    if (subject) {
        if (!*subject) return ffn_error(FFN_ERR_INVALID_ARG, "trace: the subject is empty");
        at = strstr(prompt, subject);
        if (!at)
            return ffn_error(FFN_ERR_INVALID_ARG, "trace: the subject '%.100s' does not occur in the prompt '%.200s'",
                             subject, prompt);
    }
    int32_t *ids = NULL, *a = NULL, *b = NULL, *tt = NULL;
    int64_t n = 0, na = 0, nb = 0, nt = 0;
    const size_t len = strlen(prompt);
    ffn_status st = encode_n(v, prompt, len, &ids, &n);
    if (!st && n == 0) st = ffn_error(FFN_ERR_INVALID_ARG, "trace: the prompt '%.200s' has no tokens", prompt);
    if (!st && subject) {
        const size_t off = (size_t)(at - prompt), end = off + strlen(subject);
        st = encode_n(v, prompt, off, &a, &na);
        /* a word vocabulary reads "knows, " as "knows" "," " " but "knows,
         * Mira" as "knows" "," " Mira": the space goes with the subject */
        size_t trimmed = off;
        while (!st && !is_prefix(a, na, ids, n) && trimmed > 0 && prompt[trimmed - 1] == ' ') {
            free(a);
            a = NULL;
            st = encode_n(v, prompt, --trimmed, &a, &na);
        }
        if (!st) st = encode_n(v, prompt, end, &b, &nb);
        if (!st && (!is_prefix(a, na, ids, n) || !is_prefix(b, nb, ids, n) || nb <= na))
            st = ffn_error(FFN_ERR_INVALID_ARG,
                           "trace: the subject '%.100s' does not fall on token boundaries of the prompt '%.200s' "
                           "(the tokens up to its start or end are not a prefix of the prompt's)", subject, prompt);
        if (!st) {
            if (sb) *sb = na;
            if (se) *se = nb;
        }
    }
    if (!st && target_id) *target_id = -1;
    if (!st && target) {
        if (!*target) st = ffn_error(FFN_ERR_INVALID_ARG, "trace: the target is empty");
        char *full = NULL;
        /* a space before the target unless the language writes none */
        const int sp = ffn_vocab_word_space(prompt, target);
        if (!st && !(full = malloc(len + strlen(target) + 2))) st = ffn_error(FFN_ERR_NOMEM, "trace");
        if (!st) {
            memcpy(full, prompt, len);
            if (sp) full[len] = ' ';
            strcpy(full + len + (size_t)sp, target);
            st = encode_n(v, full, strlen(full), &tt, &nt);
        }
        free(full);
        /* never trace <unk> in the target's place */
        if (!st && nt > n)
            st = ffn_vocab_check_known(v, tt + n, nt - n, "target", target, strlen(target));
        if (!st && (!is_prefix(ids, n, tt, nt) || nt <= n))
            st = ffn_error(FFN_ERR_INVALID_ARG,
                           "trace: the target '%.100s' does not start a new token after the prompt '%.200s'",
                           target, prompt);
        if (!st) {
            int64_t k = n;
            /* a char/byte vocabulary reads the space alone: the prompt takes it */
            if (space_only(v, ids[n - 1], tt[k]) && k + 1 < nt) {
                int32_t *grown = realloc(ids, (size_t)(n + 1) * sizeof *ids);
                if (!grown) st = ffn_error(FFN_ERR_NOMEM, "trace");
                else {
                    ids = grown;
                    ids[n++] = tt[k++];
                }
            }
            if (!st && target_id) *target_id = tt[k];
        }
    }
    free(a), free(b), free(tt);
    if (st) {
        free(ids);
        return st;
    }
    *tokens = ids;
    *n_tokens = n;
    return FFN_OK;
}

/* ---- averages over facts ----------------------------------------------------------- */

const char *ffn_trace_class_name(int cls) {
    static const char *const names[FFN_TRACE_N_CLASSES] = {
        "before", "first subject", "middle subject", "last subject", "first after", "further", "last"};
    return cls >= 0 && cls < FFN_TRACE_N_CLASSES ? names[cls] : NULL;
}

enum { C_BEFORE, C_FIRST_SUBJ, C_MID_SUBJ, C_LAST_SUBJ, C_FIRST_AFTER, C_FURTHER, C_LAST };

int ffn_trace_position_class(const ffn_trace_result *r, int64_t t) {
    if (t == r->n_tokens - 1) return C_LAST;
    if (t == r->subject_end - 1) return C_LAST_SUBJ;
    if (t == r->subject_begin) return C_FIRST_SUBJ;
    if (t > r->subject_begin && t < r->subject_end) return C_MID_SUBJ;
    if (t == r->subject_end) return C_FIRST_AFTER;
    if (t > r->subject_end) return C_FURTHER;
    return C_BEFORE;
}

ffn_status ffn_trace_summarize(const ffn_trace_result *const *rs, int64_t n, ffn_trace_summary *out) {
    if (!rs || !out || n < 1) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_trace_summarize: no results");
    memset(out, 0, sizeof *out);
    const int64_t L = rs[0]->n_layers;
    if (L > FFN_TRACE_SUMMARY_MAX_LAYERS)
        return ffn_error(FFN_ERR_INVALID_ARG, "trace summary: %lld layers (at most %d)", (long long)L,
                         FFN_TRACE_SUMMARY_MAX_LAYERS);
    out->n_results = n;
    out->n_layers = L;
    for (int64_t i = 0; i < n; i++) {
        const ffn_trace_result *r = rs[i];
        if (r->n_layers != L)
            return ffn_error(FFN_ERR_INVALID_ARG, "trace summary: result %lld has %lld layers, the first %lld",
                             (long long)i, (long long)r->n_layers, (long long)L);
        out->p_clean += r->p_clean / (double)n;
        out->p_corrupt += r->p_corrupt / (double)n;
        /* per result, the mean over its positions of each class, then the
         * mean over results that have the class */
        double acc[FFN_TRACE_N_KINDS][FFN_TRACE_SUMMARY_MAX_LAYERS * FFN_TRACE_N_CLASSES] = {{0}};
        int64_t cnt[FFN_TRACE_N_CLASSES] = {0};
        for (int64_t t = 0; t < r->n_tokens; t++) {
            const int c = ffn_trace_position_class(r, t);
            cnt[c]++;
            for (int k = 0; k < FFN_TRACE_N_KINDS; k++)
                for (int64_t l = 0; l < L; l++) acc[k][l * FFN_TRACE_N_CLASSES + c] += r->effect[k][l * r->n_tokens + t];
        }
        for (int c = 0; c < FFN_TRACE_N_CLASSES; c++) {
            if (!cnt[c]) continue;
            out->n_class[c]++;
            for (int k = 0; k < FFN_TRACE_N_KINDS; k++)
                for (int64_t l = 0; l < L; l++)
                    out->effect[k][l * FFN_TRACE_N_CLASSES + c] += acc[k][l * FFN_TRACE_N_CLASSES + c] / (double)cnt[c];
        }
    }
    for (int c = 0; c < FFN_TRACE_N_CLASSES; c++)
        for (int k = 0; k < FFN_TRACE_N_KINDS && out->n_class[c]; k++)
            for (int64_t l = 0; l < L; l++) out->effect[k][l * FFN_TRACE_N_CLASSES + c] /= (double)out->n_class[c];
    const double *mlp = out->effect[FFN_TRACE_MLP];
    out->mlp_peak = -INFINITY;
    out->mlp_peak_subject = out->mlp_peak_last = -INFINITY;
    double sum = 0, best = 0;
    for (int64_t l = 0; l < L; l++) {
        for (int c = 0; c < FFN_TRACE_N_CLASSES; c++)
            if (out->n_class[c] && mlp[l * FFN_TRACE_N_CLASSES + c] > out->mlp_peak) {
                out->mlp_peak = mlp[l * FFN_TRACE_N_CLASSES + c];
                out->mlp_peak_layer = l;
                out->mlp_peak_class = c;
            }
        const double es = mlp[l * FFN_TRACE_N_CLASSES + C_LAST_SUBJ], el = mlp[l * FFN_TRACE_N_CLASSES + C_LAST];
        if (es > out->mlp_peak_subject) out->mlp_peak_subject = es, out->mlp_peak_layer_subject = l;
        if (el > out->mlp_peak_last) out->mlp_peak_last = el, out->mlp_peak_layer_last = l;
        if (es > 0) sum += es;
        if (es > best) best = es;
    }
    out->mlp_layer_share = sum > 0 ? best / sum : 0;
    return FFN_OK;
}

ffn_status ffn_trace_facts(ffn_ctx *ctx, ffn_model *m, const ffn_vocab *vocab,
                           const ffn_facts *facts, int64_t n, const ffn_trace_options *opts,
                           ffn_trace_summary *out, int64_t *n_recalled) {
    if (!m || !vocab || !facts || !out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_trace_facts: NULL argument");
    if (n < 1 || n > facts->n_facts)
        return ffn_error(FFN_ERR_INVALID_ARG, "trace: %lld facts asked of a set of %lld", (long long)n,
                         (long long)facts->n_facts);
    ffn_trace_result **rs = calloc((size_t)n, sizeof *rs);
    const ffn_trace_result **use = calloc((size_t)n, sizeof *use);
    ffn_status st = rs && use ? FFN_OK : ffn_error(FFN_ERR_NOMEM, "trace: %lld facts", (long long)n);
    for (int64_t i = 0; i < n && !st; i++) {
        const ffn_fact *f = &facts->facts[i];
        int32_t *ids = NULL, target = -1;
        int64_t T = 0, b = 0, e = 0;
        st = ffn_trace_prepare(vocab, f->prompt, f->subject, f->object, &ids, &T, &b, &e, &target);
        if (!st) st = ffn_trace_run(ctx, m, ids, T, b, e, target, opts, &rs[i]);
        free(ids);
        if (st) st = ffn_error_prefix(st, "fact %lld (\"%.80s\"): ", (long long)f->id, f->prompt);
    }
    int64_t k = 0;
    for (int64_t i = 0; i < n && !st; i++)
        if (rs[i]->clean_top == rs[i]->target) use[k++] = rs[i];
    if (n_recalled) *n_recalled = k;
    if (!st && k == 0)
        for (int64_t i = 0; i < n; i++) use[k++] = rs[i];
    if (!st) st = ffn_trace_summarize(use, k, out);
    for (int64_t i = 0; rs && i < n; i++) ffn_trace_result_free(rs[i]);
    free(rs);
    free(use);
    return st;
}
