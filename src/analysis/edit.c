/* edit.c -- editing a fact (include/ffn/edit.h): the facts and edit-list
 * readers, tokens of prompts and targets, the key k*, the second moment C
 * (and its cache file), the value v* by gradient descent on a vector added
 * at mlp_out (through ffn_model_forward_backward_taps), the rank-one
 * update, the fine-tuning baseline, the scores, and writing the edited
 * model directory.  Reads the model only through its taps and tensor
 * table; the trainer's run-directory writer saves the weights.
 *
 * Letters: D hidden, F width of m (down_proj's input), V vocabulary,
 * T positions of a sequence, P prompts (contexts) of an edit. */
#include "base/common.h"
#include "base/dirswap.h"
#include "ffn/checkpoint.h"
#include "ffn/edit.h"
#include "ffn/json.h"
#include "ffn/tap.h"
#include "ffn/train.h"
#include "nn/tap_internal.h"
#include "train/train_internal.h"
#include "analysis/logits.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- edit lists ---------------------------------------------------------------- */

/* The strings and arrays an edit list's requests point at. */
typedef struct edit_store {
    char **strings;
    int64_t n_strings, cap_strings;
    void **blocks;
    int64_t n_blocks, cap_blocks;
} edit_store;

static char *keep_string(edit_store *f, const char *s) {
    char **g = ffn_grow(f->strings, f->n_strings, &f->cap_strings, sizeof *g, 64);
    if (!g) return NULL;
    f->strings = g;
    char *c = strdup(s);
    if (c) f->strings[f->n_strings++] = c;
    return c;
}

static void *keep_block(edit_store *f, size_t bytes) {
    void **g = ffn_grow(f->blocks, f->n_blocks, &f->cap_blocks, sizeof *g, 64);
    if (!g) return NULL;
    f->blocks = g;
    void *a = calloc(1, bytes ? bytes : 1);
    if (a) f->blocks[f->n_blocks++] = a;
    return a;
}

static const ffn_fact *find_fact(const ffn_facts *f, int64_t id) {
    for (int64_t i = 0; f && i < f->n_facts; i++)
        if (f->facts[i].id == id) return &f->facts[i];
    return NULL;
}

/* A string member; `required` 0 lets it be absent (*out NULL). */
static ffn_status get_str(edit_store *f, const ffn_json_value *o, const char *key, int required,
                          const char *name, int64_t line, const char **out) {
    const ffn_json_value *v = ffn_json_get(o, key);
    *out = NULL;
    if (!v && !required) return FFN_OK;
    if (!v || ffn_json_type_of(v) != FFN_JSON_STRING)
        return ffn_error(FFN_ERR_FORMAT, "%s: line %lld: \"%s\": expected a string, %s", name,
                         (long long)line, key, v ? "found another type" : "it is missing");
    const char *s = ffn_json_string(v);
    if (strlen(s) != ffn_json_length(v) || !*s)
        return ffn_error(FFN_ERR_FORMAT, "%s: line %lld: \"%s\": expected a non-empty string "
                         "without NUL bytes", name, (long long)line, key);
    if (!(*out = keep_string(f, s))) return ffn_error(FFN_ERR_NOMEM, "%s: out of memory", name);
    return FFN_OK;
}

/* paraphrases and neighbours of one object into *r */
static ffn_status get_lists(edit_store *f, const ffn_json_value *o, const char *name,
                            int64_t line, ffn_edit_request *r) {
    const ffn_json_value *pa = ffn_json_get(o, "paraphrases"), *nb = ffn_json_get(o, "neighbours");
    if (pa && ffn_json_type_of(pa) != FFN_JSON_ARRAY)
        return ffn_error(FFN_ERR_FORMAT, "%s: line %lld: \"paraphrases\": expected an array of "
                         "strings", name, (long long)line);
    if (nb && ffn_json_type_of(nb) != FFN_JSON_ARRAY)
        return ffn_error(FFN_ERR_FORMAT, "%s: line %lld: \"neighbours\": expected an array of "
                         "{\"prompt\", \"object\"} objects", name, (long long)line);
    const int64_t np = (int64_t)ffn_json_length(pa), nn = (int64_t)ffn_json_length(nb);
    const char **ps = keep_block(f, (size_t)np * sizeof *ps);
    ffn_fact_prompt *ns = keep_block(f, (size_t)nn * sizeof *ns);
    if (!ps || !ns) return ffn_error(FFN_ERR_NOMEM, "%s: out of memory", name);
    for (int64_t i = 0; i < np; i++) {
        const ffn_json_value *s = ffn_json_at(pa, (size_t)i);
        if (ffn_json_type_of(s) != FFN_JSON_STRING || !ffn_json_length(s) ||
            strlen(ffn_json_string(s)) != ffn_json_length(s))
            return ffn_error(FFN_ERR_FORMAT, "%s: line %lld: \"paraphrases\"[%lld]: expected a "
                             "non-empty string", name, (long long)line, (long long)i);
        if (!(ps[i] = keep_string(f, ffn_json_string(s))))
            return ffn_error(FFN_ERR_NOMEM, "%s: out of memory", name);
    }
    for (int64_t i = 0; i < nn; i++) {
        const ffn_json_value *e = ffn_json_at(nb, (size_t)i);
        if (ffn_json_type_of(e) != FFN_JSON_OBJECT || ffn_json_length(e) != 2)
            return ffn_error(FFN_ERR_FORMAT, "%s: line %lld: \"neighbours\"[%lld]: expected an "
                             "object with exactly \"prompt\" and \"object\"", name,
                             (long long)line, (long long)i);
        char key[64];
        snprintf(key, sizeof key, "neighbours[%lld].prompt", (long long)i);
        const char *pr, *ob;
        ffn_status st = get_str(f, e, "prompt", 1, name, line, &pr);
        if (!st) st = get_str(f, e, "object", 1, name, line, &ob);
        if (st) return ffn_error_prefix(st, "%s", key);
        ns[i].prompt = (char *)pr, ns[i].object = (char *)ob; /* kept by the store */
    }
    r->paraphrases = ps;
    r->n_paraphrases = np;
    r->neighbours = ns;
    r->n_neighbours = nn;
    return FFN_OK;
}

static int known_key(const char *k, const char *const *keys) {
    for (; *keys; keys++)
        if (!strcmp(k, *keys)) return 1;
    return 0;
}

static ffn_status check_keys(const ffn_json_value *o, const char *const *keys, const char *name,
                             int64_t line) {
    for (size_t i = 0; i < ffn_json_length(o); i++)
        if (!known_key(ffn_json_key_at(o, i), keys))
            return ffn_error(FFN_ERR_FORMAT, "%s: line %lld: unknown key \"%s\"", name,
                             (long long)line, ffn_json_key_at(o, i));
    return FFN_OK;
}

/* One line per call of `each`; blank lines are skipped. */
typedef ffn_status (*line_fn)(void *user, const ffn_json_value *obj, const char *name,
                              int64_t line);

static ffn_status each_line(const char *text, size_t n, const char *name, line_fn each,
                            void *user) {
    int64_t line = 0;
    for (size_t at = 0; at < n;) {
        const char *nl = memchr(text + at, '\n', n - at);
        size_t end = nl ? (size_t)(nl - text) : n;
        line++;
        int blank = 1;
        for (size_t i = at; i < end; i++)
            if (text[i] != ' ' && text[i] != '\t' && text[i] != '\r') blank = 0;
        if (!blank) {
            char what[96];
            snprintf(what, sizeof what, "%.60s: line %lld", name, (long long)line);
            ffn_json *doc = NULL;
            ffn_status st = ffn_json_parse(text + at, end - at, what, &doc);
            if (st == FFN_OK && ffn_json_type_of(ffn_json_root(doc)) != FFN_JSON_OBJECT)
                st = ffn_error(FFN_ERR_FORMAT, "%s: line %lld: expected one JSON object", name,
                               (long long)line);
            if (st == FFN_OK) st = each(user, ffn_json_root(doc), name, line);
            ffn_json_free(doc);
            if (st) return st;
        }
        at = end + 1;
    }
    return FFN_OK;
}

ffn_edit_request ffn_edit_request_from_fact(const ffn_fact *f, const char *target) {
    ffn_edit_request r = {f->prompt, f->subject, target, f->object,
                          (const char *const *)f->paraphrases, f->n_paraphrases, f->neighbours,
                          f->n_neighbours};
    return r;
}

struct ffn_edit_list {
    edit_store store; /* the strings the requests hold */
    const ffn_facts *facts;
    ffn_edit_request *reqs;
    int64_t n, cap;
};

static ffn_status edit_line(void *user, const ffn_json_value *o, const char *name, int64_t line) {
    static const char *const keys[] = {"fact", "target", "prompt", "subject", "object",
                                       "paraphrases", "neighbours", NULL};
    ffn_edit_list *el = user;
    ffn_status st = check_keys(o, keys, name, line);
    if (st) return st;
    ffn_edit_request *g = ffn_grow(el->reqs, el->n, &el->cap, sizeof *g, 16);
    if (!g) return ffn_error(FFN_ERR_NOMEM, "%s: out of memory", name);
    el->reqs = g;
    ffn_edit_request *r = &el->reqs[el->n];
    memset(r, 0, sizeof *r);
    const char *target;
    if ((st = get_str(&el->store, o, "target", 1, name, line, &target))) return st;
    const ffn_json_value *fv = ffn_json_get(o, "fact");
    if (fv) {
        int64_t id;
        if (!ffn_json_integer(fv, &id))
            return ffn_error(FFN_ERR_FORMAT, "%s: line %lld: \"fact\": expected an integer id",
                             name, (long long)line);
        if (!el->facts)
            return ffn_error(FFN_ERR_INVALID_ARG, "%s: line %lld: \"fact\": %lld names a fact, "
                             "but no facts file was given", name, (long long)line, (long long)id);
        const ffn_fact *fact = find_fact(el->facts, id);
        if (!fact)
            return ffn_error(FFN_ERR_INVALID_ARG, "%s: line %lld: \"fact\": no fact has id %lld",
                             name, (long long)line, (long long)id);
        if (ffn_json_length(o) != 2)
            return ffn_error(FFN_ERR_FORMAT, "%s: line %lld: a line with \"fact\" has only "
                             "\"fact\" and \"target\"", name, (long long)line);
        *r = ffn_edit_request_from_fact(fact, target);
    } else {
        if ((st = get_str(&el->store, o, "prompt", 1, name, line, &r->prompt)) ||
            (st = get_str(&el->store, o, "subject", 1, name, line, &r->subject)) ||
            (st = get_str(&el->store, o, "object", 0, name, line, &r->old_object)) ||
            (st = get_lists(&el->store, o, name, line, r)))
            return st;
        r->target = target;
        if (!strstr(r->prompt, r->subject))
            return ffn_error(FFN_ERR_FORMAT, "%s: line %lld: the subject '%s' is not in the "
                             "prompt '%s'", name, (long long)line, r->subject, r->prompt);
    }
    r->target = target;
    el->n++;
    return FFN_OK;
}

void ffn_edit_list_free(ffn_edit_list *el) {
    if (!el) return;
    for (int64_t i = 0; i < el->store.n_strings; i++) free(el->store.strings[i]);
    for (int64_t i = 0; i < el->store.n_blocks; i++) free(el->store.blocks[i]);
    free(el->store.strings);
    free(el->store.blocks);
    free(el->reqs);
    free(el);
}

ffn_status ffn_edit_list_load(const char *path, const ffn_facts *facts, ffn_edit_list **out) {
    if (!path || !out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_edit_list_load: NULL argument");
    *out = NULL;
    char *text;
    size_t n;
    ffn_status st = ffn_text_read(path, &text, &n);
    if (st) return st;
    ffn_edit_list *el = calloc(1, sizeof *el);
    if (!el) st = ffn_error(FFN_ERR_NOMEM, "%s: out of memory", path);
    if (el) {
        el->facts = facts;
        st = each_line(text, n, path, edit_line, el);
        if (st == FFN_OK && el->n == 0)
            st = ffn_error(FFN_ERR_FORMAT, "%s: no edits (expected one JSON object per line)",
                           path);
    }
    free(text);
    if (st) {
        ffn_edit_list_free(el);
        return st;
    }
    *out = el;
    return FFN_OK;
}

int64_t ffn_edit_list_count(const ffn_edit_list *el) { return el ? el->n : 0; }

const ffn_edit_request *ffn_edit_list_at(const ffn_edit_list *el, int64_t i) {
    return el && i >= 0 && i < el->n ? &el->reqs[i] : NULL;
}

/* ---- options, results --------------------------------------------------------- */

const char *ffn_edit_method_name(ffn_edit_method m) {
    static const char *const names[] = {"rome", "ft", "memit"};
    return FFN_ENUM_NAME(names, m, NULL);
}

void ffn_edit_options_default(ffn_edit_options *o) {
    memset(o, 0, sizeof *o);
    o->method = FFN_EDIT_ROME;
    o->layer = 0;
    o->n_prefixes = 6;
    o->prefix_len = 5;
    o->steps = 20;
    o->lr = 0.5;
    o->kl_weight = 0.0625;
    o->weight_decay = 0.5;
    o->clamp_norm = 4.0;
    o->lambda = 1e-3;
    o->kl_prompt = "{} is a";
    o->ft_steps = 25;
    o->ft_lr = 1e-2;
    o->ft_norm = 5e-3;
    o->seed = 1;
    o->fit = FFN_EDIT_FIT_UPDATE;
    o->cov_weight = 100.0;
}

void ffn_edit_result_free(ffn_edit_result *r) {
    if (!r) return;
    FFN_FREE_ALL(r->k_star, r->v_star, r->v_old);
    memset(r, 0, sizeof *r);
}

/* ---- tokens ------------------------------------------------------------------- */

typedef struct ids {
    int32_t *v;
    int64_t n;
} ids;

static void ids_free(ids *a) {
    free(a->v);
    a->v = NULL;
    a->n = 0;
}

static ffn_status ids_append(ids *a, const int32_t *v, int64_t n) {
    if (n <= 0) return FFN_OK;
    int32_t *g = realloc(a->v, (size_t)(a->n + n) * sizeof *g);
    if (!g) return ffn_error(FFN_ERR_NOMEM, "edit: out of memory");
    a->v = g;
    memcpy(a->v + a->n, v, (size_t)n * sizeof *v);
    a->n += n;
    return FFN_OK;
}

/* Encode `text` (n bytes); a token the vocabulary maps to <unk> is an
 * error naming `what` and the text. */
static ffn_status encode(const ffn_vocab *vocab, const char *text, size_t n, const char *what,
                         ids *out) {
    out->v = NULL;
    out->n = 0;
    ffn_status st = ffn_vocab_encode(vocab, text, n, 0, &out->v, &out->n);
    if (st) return ffn_error_prefix(st, "%s '%.*s'", what, (int)n, text);
    if ((st = ffn_vocab_check_known(vocab, out->v, out->n, what, text, n))) ids_free(out);
    return st;
}

/* text after prompt as the vocabulary reads a continuation: with a space
 * between them unless the language writes none (ffn_vocab_encode_word) */
static ffn_status encode_continuation(const ffn_vocab *vocab, const char *prompt, const char *text,
                                      const char *what, ids *out) {
    out->v = NULL;
    out->n = 0;
    return ffn_vocab_encode_word(vocab, prompt, text, what, &out->v, &out->n, NULL);
}
/* A prompt's tokens (with the vocabulary's bos first when it has one) and
 * the index of the subject's last token in them. */
static ffn_status encode_prompt(const ffn_vocab *vocab, const char *prompt, const char *subject,
                                ids *out, int64_t *subject_last) {
    const char *at = subject ? strstr(prompt, subject) : NULL;
    if (subject && !at)
        return ffn_error(FFN_ERR_INVALID_ARG, "the subject '%s' is not in the prompt '%s'",
                         subject, prompt);
    out->v = NULL;
    out->n = 0;
    const int32_t bos = ffn_vocab_specials(vocab).bos;
    ids body, head;
    ffn_status st = encode(vocab, prompt, strlen(prompt), "prompt", &body);
    if (st) return st;
    if (body.n == 0) {
        ids_free(&body);
        return ffn_error(FFN_ERR_INVALID_ARG, "the prompt is empty");
    }
    if (bos >= 0 && (st = ids_append(out, &bos, 1))) return st;
    if ((st = ids_append(out, body.v, body.n))) {
        ids_free(&body);
        return st;
    }
    ids_free(&body);
    if (subject) {
        if ((st = encode(vocab, prompt, (size_t)(at - prompt) + strlen(subject), "prompt", &head)))
            return st;
        *subject_last = (bos >= 0) + head.n - 1;
        ids_free(&head);
    }
    return FFN_OK;
}

/* log p(cont | prompt), teacher-forced, summed over cont's tokens. */
static ffn_status logprob(ffn_model *m, const ids *prompt, const ids *cont, float *logits,
                          double *out) {
    const int64_t V = ffn_model_get_config(m)->vocab_size;
    ids seq = {NULL, 0};
    ffn_status st = ids_append(&seq, prompt->v, prompt->n);
    if (!st) st = ids_append(&seq, cont->v, cont->n - 1);
    int64_t max_n, max_seq;
    ffn_model_rows(m, &max_n, &max_seq);
    if (!st && seq.n > max_seq)
        st = ffn_error(FFN_ERR_INVALID_ARG, "a prompt and its continuation take %lld tokens, "
                       "more than the model's context (%lld)", (long long)seq.n,
                       (long long)max_seq);
    if (!st) st = ffn_model_logits(m, logits, seq.v, 1, seq.n);
    double s = 0;
    for (int64_t i = 0; !st && i < cont->n; i++) {
        const float *z = logits + (prompt->n - 1 + i) * V;
        double mx;
        const double e = ffn_logits_sum_exp(z, V, &mx);
        s += z[cont->v[i]] - mx - log(e);
    }
    ids_free(&seq);
    *out = s;
    return st;
}

/* ---- the layer ------------------------------------------------------------------ */

typedef struct layer_view {
    int64_t l, D, F, V, max_seq;
    float *W;       /* (D, F) down_proj in the params block */
    const float *b; /* (D) or NULL */
    char m_tap[48], out_tap[48];
} layer_view;

static ffn_status view_layer(ffn_model *m, int64_t l, layer_view *lv) {
    const ffn_model_config *c = ffn_model_get_config(m);
    if (l < 0 || l >= c->num_hidden_layers)
        return ffn_error(FFN_ERR_INVALID_ARG, "layer %lld out of range (the model has %lld "
                         "layers: 0..%lld)", (long long)l, (long long)c->num_hidden_layers,
                         (long long)c->num_hidden_layers - 1);
    if (ffn_model_config_layer_is_moe(c, l) || c->mlp_type == FFN_MODEL_MLP_NONE)
        return ffn_error(FFN_ERR_INVALID_ARG, "layer %lld has %s; editing needs a dense or "
                         "gated FFN", (long long)l,
                         c->mlp_type == FFN_MODEL_MLP_NONE ? "no FFN" : "a MoE FFN");
    char name[96];
    snprintf(name, sizeof name, "model.layers.%lld.mlp.down_proj.weight", (long long)l);
    const ffn_model_tensor *t = ffn_model_find_tensor(m, name);
    if (!t) return ffn_error(FFN_ERR_MISSING, "%s: no such tensor", name);
    snprintf(name, sizeof name, "model.layers.%lld.mlp.down_proj.bias", (long long)l);
    const ffn_model_tensor *tb = ffn_model_find_tensor(m, name);
    float *p = ffn_model_params(m, NULL);
    int64_t max_n;
    ffn_model_rows(m, &max_n, &lv->max_seq);
    lv->l = l;
    lv->D = t->shape[0];
    lv->F = t->shape[1];
    lv->V = c->vocab_size;
    lv->W = p + t->offset;
    lv->b = tb ? p + tb->offset : NULL;
    ffn_tap_name(lv->m_tap, sizeof lv->m_tap, l, FFN_TAP_M);
    ffn_tap_name(lv->out_tap, sizeof lv->out_tap, l, FFN_TAP_MLP_OUT);
    return FFN_OK;
}

/* y = W k + b in double */
static void down(const layer_view *lv, const float *k, double *y) {
    for (int64_t d = 0; d < lv->D; d++) {
        double s = lv->b ? lv->b[d] : 0.0;
        const float *w = lv->W + d * lv->F;
        for (int64_t f = 0; f < lv->F; f++) s += (double)w[f] * k[f];
        y[d] = s;
    }
}

/* ---- the second moment of the keys ---------------------------------------------- */

ffn_status ffn_edit_covariance(ffn_model *m, int64_t layer, const int32_t *tokens, int64_t n_tok,
                               int64_t samples, double *C, int64_t *rows_used) {
    layer_view lv;
    ffn_status st = view_layer(m, layer, &lv);
    if (st) return st;
    if (!C || (!tokens && n_tok) || samples < 1)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_edit_covariance: bad arguments");
    if (n_tok < 1)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_edit_covariance: no text to take keys from");
    const int64_t F = lv.F, T = n_tok < lv.max_seq ? n_tok : lv.max_seq;
    memset(C, 0, (size_t)(F * F) * sizeof *C);
    ffn_taps *stash = ffn_model_taps_stash(m);
    int64_t rows = 0;
    float *lg = malloc((size_t)(T * lv.V) * sizeof *lg);
    if (!lg) st = ffn_error(FFN_ERR_NOMEM, "ffn_edit_covariance: out of memory");
    if (!st) st = ffn_model_tap_select(m, lv.m_tap);
    for (int64_t at = 0; !st && rows < samples && at + T <= n_tok; at += T) {
        if ((st = ffn_model_logits(m, lg, tokens + at, 1, T))) break;
        ffn_tap_view v;
        if ((st = ffn_model_tap_read(m, lv.m_tap, &v))) break;
        const float *k = v.data;
        for (int64_t r = 0; r < v.rows && rows < samples; r++, rows++) {
            const float *kr = k + r * F;
            for (int64_t i = 0; i < F; i++) {
                const double ki = kr[i];
                double *ci = C + i * F;
                for (int64_t j = 0; j <= i; j++) ci[j] += ki * kr[j];
            }
        }
    }
    free(lg);
    ffn_model_taps_restore(m, stash);
    if (st) return st;
    for (int64_t i = 0; i < F; i++)
        for (int64_t j = 0; j <= i; j++) C[j * F + i] = C[i * F + j] /= (double)rows;
    if (rows_used) *rows_used = rows;
    return FFN_OK;
}

uint64_t ffn_edit_model_hash(ffn_model *m) {
    int64_t n;
    const unsigned char *p = (const unsigned char *)ffn_model_params(m, &n);
    uint64_t h = 1469598103934665603ull;
    for (int64_t i = 0; i < n * 4; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* The cache file: "ffn-cov 1\n" then F, samples, rows, hash (int64 each,
 * little-endian as the machine writes them) and C (F·F doubles). */
#define COV_MAGIC "ffn-cov 1\n"

static char *cov_path(const char *dir, int64_t l, int64_t samples, uint64_t hash) {
    char name[128];
    snprintf(name, sizeof name, "ffn-cov-L%lld-n%lld-%016llx.bin", (long long)l,
             (long long)samples, (unsigned long long)hash);
    return ffn_path_join(dir, "/", name);
}

static int cov_read(const char *path, int64_t F, int64_t samples, uint64_t hash, double *C,
                    int64_t *rows) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char magic[sizeof COV_MAGIC - 1];
    int64_t hdr[4];
    int ok = fread(magic, 1, sizeof magic, f) == sizeof magic &&
             !memcmp(magic, COV_MAGIC, sizeof magic) && fread(hdr, sizeof hdr, 1, f) == 1 &&
             hdr[0] == F && hdr[1] == samples && hdr[2] >= 1 && hdr[2] <= samples &&
             (uint64_t)hdr[3] == hash &&
             fread(C, sizeof *C, (size_t)(F * F), f) == (size_t)(F * F) && fgetc(f) == EOF;
    fclose(f);
    for (int64_t i = 0; ok && i < F * F; i++) ok = isfinite(C[i]);
    if (ok) *rows = hdr[2];
    return ok;
}

static ffn_status cov_write(const char *path, int64_t F, int64_t samples, int64_t rows,
                            uint64_t hash, const double *C) {
    ffn_atomic_file af;
    ffn_status st = ffn_atomic_open(&af, path);
    if (st) return st;
    int64_t hdr[4] = {F, samples, rows, (int64_t)hash};
    if (fwrite(COV_MAGIC, 1, sizeof COV_MAGIC - 1, af.f) != sizeof COV_MAGIC - 1 ||
        fwrite(hdr, sizeof hdr, 1, af.f) != 1 ||
        fwrite(C, sizeof *C, (size_t)(F * F), af.f) != (size_t)(F * F)) {
        ffn_atomic_abort(&af);
        return ffn_error(FFN_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    }
    return ffn_atomic_commit(&af);
}

ffn_status ffn_edit_covariance_cached(ffn_model *m, int64_t layer, const int32_t *tokens,
                                      int64_t n_tok, int64_t samples, const char *cache_dir,
                                      double *C, int64_t *rows_used, int *from_cache) {
    layer_view lv;
    ffn_status st = view_layer(m, layer, &lv);
    if (st) return st;
    if (from_cache) *from_cache = 0;
    char *path = NULL;
    uint64_t hash = 0;
    if (cache_dir) {
        hash = ffn_edit_model_hash(m);
        if (!(path = cov_path(cache_dir, layer, samples, hash)))
            return ffn_error(FFN_ERR_NOMEM, "out of memory");
        int64_t rows;
        if (cov_read(path, lv.F, samples, hash, C, &rows)) {
            free(path);
            if (rows_used) *rows_used = rows;
            if (from_cache) *from_cache = 1;
            return FFN_OK;
        }
    }
    int64_t rows = 0;
    st = ffn_edit_covariance(m, layer, tokens, n_tok, samples, C, &rows);
    if (st == FFN_OK && path) st = cov_write(path, lv.F, samples, rows, hash, C);
    free(path);
    if (st == FFN_OK && rows_used) *rows_used = rows;
    return st;
}

/* ---- solving (C + λI) u = k ------------------------------------------------------ */

/* Cholesky in place of the lower triangle of A (n, n); 0 when not positive definite. */
static int cholesky(double *A, int64_t n) {
    for (int64_t j = 0; j < n; j++) {
        double s = A[j * n + j];
        for (int64_t k = 0; k < j; k++) s -= A[j * n + k] * A[j * n + k];
        if (!(s > 0)) return 0;
        const double d = sqrt(s);
        A[j * n + j] = d;
        for (int64_t i = j + 1; i < n; i++) {
            double t = A[i * n + j];
            for (int64_t k = 0; k < j; k++) t -= A[i * n + k] * A[j * n + k];
            A[i * n + j] = t / d;
        }
    }
    return 1;
}

static void cholesky_solve(const double *Lf, int64_t n, double *x) {
    for (int64_t i = 0; i < n; i++) {
        double s = x[i];
        for (int64_t k = 0; k < i; k++) s -= Lf[i * n + k] * x[k];
        x[i] = s / Lf[i * n + i];
    }
    for (int64_t i = n - 1; i >= 0; i--) {
        double s = x[i];
        for (int64_t k = i + 1; k < n; k++) s -= Lf[k * n + i] * x[k];
        x[i] = s / Lf[i * n + i];
    }
}

/* ---- the prompts of an edit ------------------------------------------------------ */

typedef struct prompt_set {
    int64_t P;
    ids *seq;        /* (P) context + prompt + target[0..n-1) */
    int64_t *subj;   /* (P) the subject's last token */
    int64_t *first;  /* (P) the row that predicts target[0] */
    ids target;
    ids kl;          /* the KL prompt */
    int64_t kl_subj;
    int kl_subject_only;
} prompt_set;

static void prompt_set_free(prompt_set *ps) {
    for (int64_t i = 0; ps->seq && i < ps->P; i++) ids_free(&ps->seq[i]);
    free(ps->seq);
    free(ps->subj);
    free(ps->first);
    ids_free(&ps->target);
    ids_free(&ps->kl);
    memset(ps, 0, sizeof *ps);
}

/* n prompt sets of a batch and the array (NULL: nothing) */
static void prompt_sets_free(prompt_set *ps, int64_t n) {
    for (int64_t e = 0; ps && e < n; e++) prompt_set_free(&ps[e]);
    free(ps);
}

typedef struct gen_sink {
    ids *out;
    ffn_status st;
} gen_sink;

static int on_gen(int32_t id, const char *bytes, size_t len, void *user) {
    (void)bytes;
    (void)len;
    gen_sink *g = user;
    if ((g->st = ids_append(g->out, &id, 1))) return 1;
    return 0;
}

/* The KL prompt with the subject in place of "{}" (the subject alone when
 * the template has words the vocabulary lacks).  The subject keeps the
 * words before it in the request's prompt when "{}" opens the template
 * ("The wumack is" and "{} is a" give "The wumack is a"): a word-level
 * vocabulary may know a word only as it appears after others. */
static ffn_status kl_prompt(const ffn_vocab *vocab, const ffn_edit_request *req,
                            const char *tmpl, prompt_set *ps) {
    const char *hole = tmpl ? strstr(tmpl, "{}") : NULL;
    const char *at = strstr(req->prompt, req->subject);
    const size_t head = at ? (size_t)(at - req->prompt) : 0;
    if (hole) {
        const size_t lead = hole == tmpl ? head : 0;
        size_t n = strlen(tmpl) + lead + strlen(req->subject);
        char *s = malloc(n + 1);
        if (!s) return ffn_error(FFN_ERR_NOMEM, "edit: out of memory");
        snprintf(s, n + 1, "%.*s%.*s%s%s", (int)(hole - tmpl), tmpl, (int)lead, req->prompt,
                 req->subject, hole + 2);
        ffn_status st = encode_prompt(vocab, s, req->subject, &ps->kl, &ps->kl_subj);
        free(s);
        if (st == FFN_OK) return FFN_OK;
        if (st != FFN_ERR_INVALID_ARG) return st;
    }
    ps->kl_subject_only = 1;
    size_t n = head + strlen(req->subject);
    char *s = malloc(n + 1);
    if (!s) return ffn_error(FFN_ERR_NOMEM, "edit: out of memory");
    snprintf(s, n + 1, "%.*s%s", (int)head, req->prompt, req->subject);
    ffn_status st = encode_prompt(vocab, s, req->subject, &ps->kl, &ps->kl_subj);
    free(s);
    return st;
}

static ffn_status build_prompts(ffn_model *m, const ffn_vocab *vocab, const ffn_edit_request *req,
                                const ffn_edit_options *o, int64_t max_seq, prompt_set *ps) {
    memset(ps, 0, sizeof *ps);
    const int64_t P = o->method == FFN_EDIT_FT ? 1 : o->n_prefixes;
    ids prompt = {NULL, 0}, sep = {NULL, 0};
    int64_t subj;
    ffn_status st = encode_prompt(vocab, req->prompt, req->subject, &prompt, &subj);
    if (!st) st = encode_continuation(vocab, req->prompt, req->target, "target", &ps->target);
    if (!st) st = kl_prompt(vocab, req, o->kl_prompt, ps);
    if (st) goto done;
    /* a newline between a generated prefix and the prompt, when the vocabulary has one */
    if (encode(vocab, "\n", 1, "newline", &sep) != FFN_OK) sep.n = 0;
    ps->P = P;
    ps->seq = calloc((size_t)P, sizeof *ps->seq);
    ps->subj = calloc((size_t)P, sizeof *ps->subj);
    ps->first = calloc((size_t)P, sizeof *ps->first);
    if (!ps->seq || !ps->subj || !ps->first) {
        st = ffn_error(FFN_ERR_NOMEM, "edit: out of memory");
        goto done;
    }
    ffn_taps *stash = ffn_model_taps_stash(m);
    for (int64_t j = 0; j < P && !st; j++) {
        ids ctx = {NULL, 0};
        if (j > 0) {
            ffn_generate_options g;
            ffn_generate_options_default(&g);
            g.steps = o->prefix_len;
            g.seed = o->seed + (uint64_t)j;
            gen_sink sink = {&ctx, FFN_OK};
            ffn_generate_callbacks cb = {on_gen, NULL, &sink};
            st = ffn_generate_text(m, vocab, "", &g, &cb);
            if (!st) st = sink.st;
            if (!st) st = ids_append(&ctx, sep.v, sep.n);
        }
        /* the prompt's bos (if any) goes first, before the context */
        const int64_t nb = ffn_vocab_specials(vocab).bos >= 0;
        if (!st) st = ids_append(&ps->seq[j], prompt.v, nb);
        if (!st) st = ids_append(&ps->seq[j], ctx.v, ctx.n);
        if (!st) st = ids_append(&ps->seq[j], prompt.v + nb, prompt.n - nb);
        ps->subj[j] = ctx.n + subj;
        ps->first[j] = ps->seq[j].n - 1;
        if (!st) st = ids_append(&ps->seq[j], ps->target.v, ps->target.n - 1);
        if (!st && ps->seq[j].n > max_seq)
            st = ffn_error(FFN_ERR_INVALID_ARG, "the prompt, its prefix and the target take "
                           "%lld tokens, more than the model's context (%lld)",
                           (long long)ps->seq[j].n, (long long)max_seq);
        ids_free(&ctx);
    }
    ffn_model_taps_restore(m, stash);
done:
    ids_free(&prompt);
    ids_free(&sep);
    if (st) prompt_set_free(ps);
    return st;
}

/* ---- the value v*: Adam on δ added at mlp_out ------------------------------------- */

typedef struct target_loss {
    const prompt_set *ps;
    int64_t j;
    double scale; /* 1 / P */
} target_loss;

/* mean over the target's tokens of -log p, scaled; other rows get 0 */
static int target_fn(void *user, int64_t r0, int64_t rows, int64_t V, float *lg,
                            double *loss) {
    const target_loss *tl = user;
    const prompt_set *ps = tl->ps;
    const int64_t first = ps->first[tl->j], nt = ps->target.n;
    for (int64_t r = 0; r < rows; r++) {
        float *z = lg + r * V;
        const int64_t i = r0 + r - first;
        if (i < 0 || i >= nt) {
            memset(z, 0, (size_t)V * sizeof *z);
            continue;
        }
        *loss += ffn_logits_ce_grad(z, V, ps->target.v[i], tl->scale / (double)nt);
    }
    return FFN_OK;
}

typedef struct kl_loss {
    int64_t row;
    const double *p0; /* (V) */
    double weight;
} kl_loss;

/* weight · KL(p0 ‖ p) at one row */
static int kl_fn(void *user, int64_t r0, int64_t rows, int64_t V, float *lg, double *loss) {
    const kl_loss *kl = user;
    float *z = ffn_logits_grad_row(lg, r0, rows, V, kl->row);
    if (!z) return 0;
    double mx, l = 0;
    const double s = ffn_logits_sum_exp(z, V, &mx);
    for (int64_t k = 0; k < V; k++) {
        const double lp = z[k] - mx - log(s);
        if (kl->p0[k] > 0) l += kl->p0[k] * (log(kl->p0[k]) - lp);
        z[k] = (float)(kl->weight * (exp(lp) - kl->p0[k]));
    }
    *loss += kl->weight * l;
    return 0;
}

/* One forward and backward with δ added at out_tap: at position pos, or
 * (coef not NULL) δ·coef[t] at every position t of seq; the loss and
 * d loss / d δ added into g (D).  work: (D) floats. */
static ffn_status delta_pass(ffn_model *m, const layer_view *lv, const ids *seq, int64_t pos,
                             const double *coef, const float *delta, float *work,
                             ffn_logits_grad_fn fn, void *user, double *g, double *loss) {
    ffn_model_taps_clear(m);
    ffn_status st = FFN_OK;
    if (!coef) {
        st = ffn_model_tap_patch_vector(m, lv->out_tap, pos, FFN_TAP_OP_ADD, delta, lv->D);
    } else {
        for (int64_t t = 0; !st && t < seq->n; t++) {
            if (coef[t] == 0) continue;
            for (int64_t i = 0; i < lv->D; i++) work[i] = (float)(coef[t] * delta[i]);
            st = ffn_model_tap_patch_vector(m, lv->out_tap, t, FFN_TAP_OP_ADD, work, lv->D);
        }
    }
    if (!st) st = ffn_model_tap_select_grad(m, lv->out_tap);
    double l = 0;
    if (!st) st = ffn_model_forward_backward_taps(m, seq->v, 1, seq->n, fn, user, &l);
    ffn_tap_view v;
    if (!st) st = ffn_model_tap_read_grad(m, lv->out_tap, &v);
    if (!st) {
        for (int64_t t = coef ? 0 : pos; t < (coef ? seq->n : pos + 1); t++) {
            const double c = coef ? coef[t] : 1.0;
            const float *d = (const float *)v.data + t * lv->D;
            for (int64_t i = 0; c != 0 && i < lv->D; i++) g[i] += c * d[i];
        }
        *loss += l;
    }
    ffn_model_taps_clear(m);
    return st;
}

/* coef (seq->n): uᵀk_t / (uᵀk*) for the key k_t of every position of seq,
 * the share of δ the rank-one update gives that position. */
static ffn_status update_coefs(ffn_model *m, const layer_view *lv, const ids *seq,
                               const double *u, double uk, float *lg, double *coef) {
    ffn_model_taps_clear(m);
    ffn_status st = ffn_model_tap_select(m, lv->m_tap);
    ffn_tap_view v;
    if (!st) st = ffn_model_logits(m, lg, seq->v, 1, seq->n);
    if (!st) st = ffn_model_tap_read(m, lv->m_tap, &v);
    for (int64_t t = 0; !st && t < seq->n; t++) {
        const float *k = (const float *)v.data + t * lv->F;
        double x = 0;
        for (int64_t i = 0; i < lv->F; i++) x += u[i] * k[i];
        coef[t] = x / uk;
    }
    ffn_model_taps_clear(m);
    return st;
}

/* p0: the next-token distribution at the KL prompt's last row, unedited */
static ffn_status kl_reference(ffn_model *m, const prompt_set *ps, int64_t V, double *p0) {
    float *lg = malloc((size_t)(ps->kl.n * V) * sizeof *lg);
    if (!lg) return ffn_error(FFN_ERR_NOMEM, "edit: out of memory");
    ffn_status st = ffn_model_logits(m, lg, ps->kl.v, 1, ps->kl.n);
    if (!st) {
        const float *z = lg + (ps->kl.n - 1) * V;
        double mx;
        const double s = ffn_logits_sum_exp(z, V, &mx);
        for (int64_t k = 0; k < V; k++) p0[k] = exp(z[k] - mx) / s;
    }
    free(lg);
    return st;
}

/* δ by Adam.  ROME_FIT_SUBJECT: δ added at the subject's last token of
 * every prompt (ROME's fit); ROME_FIT_UPDATE: δ·uᵀk_t/(uᵀk*) added at
 * every position t, which is what the rank-one update will add there, so
 * the loss fitted is the edited model's own loss on these prompts. */
static ffn_status optimise_delta(ffn_model *m, const layer_view *lv, const prompt_set *ps,
                                 const ffn_edit_options *o, const double *v0, const double *u,
                                 double uk, float *delta, ffn_edit_result *res) {
    const int64_t D = lv->D, V = lv->V, P = ps->P;
    const int through = o->fit == FFN_EDIT_FIT_UPDATE;
    double *g = calloc((size_t)D, sizeof *g), *mom = calloc((size_t)(2 * D), sizeof *mom);
    double *p0 = malloc((size_t)V * sizeof *p0);
    float *work = malloc((size_t)D * sizeof *work);
    double **coef = calloc((size_t)(P + 1), sizeof *coef);
    int64_t maxlen = ps->kl.n;
    for (int64_t j = 0; j < P; j++) maxlen = ps->seq[j].n > maxlen ? ps->seq[j].n : maxlen;
    float *lg = through ? malloc((size_t)(maxlen * V) * sizeof *lg) : NULL;
    ffn_status st = g && mom && p0 && work && coef && (lg || !through)
                        ? FFN_OK : ffn_error(FFN_ERR_NOMEM, "edit: out of memory");
    for (int64_t j = 0; through && !st && j <= P; j++) {
        const ids *seq = j < P ? &ps->seq[j] : &ps->kl;
        if (!(coef[j] = malloc((size_t)seq->n * sizeof **coef)))
            st = ffn_error(FFN_ERR_NOMEM, "edit: out of memory");
        else st = update_coefs(m, lv, seq, u, uk, lg, coef[j]);
    }
    double v0n2 = 0;
    for (int64_t i = 0; i < D; i++) v0n2 += v0[i] * v0[i];
    if (v0n2 <= 0) v0n2 = 1;
    if (!st) st = kl_reference(m, ps, V, p0);
    memset(delta, 0, (size_t)D * sizeof *delta);
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8, maxn = o->clamp_norm * sqrt(v0n2);
    for (int64_t step = 1; !st && step <= o->steps + 1; step++) {
        memset(g, 0, (size_t)D * sizeof *g);
        double nll = 0, kl = 0;
        for (int64_t j = 0; j < P && !st; j++) {
            target_loss tl = {ps, j, 1.0 / (double)P};
            st = delta_pass(m, lv, &ps->seq[j], ps->subj[j], coef[j], delta, work, target_fn, &tl,
                            g, &nll);
        }
        kl_loss kd = {ps->kl.n - 1, p0, o->kl_weight};
        if (!st && o->kl_weight > 0)
            st = delta_pass(m, lv, &ps->kl, ps->kl_subj, coef[P], delta, work, kl_fn, &kd, g, &kl);
        if (st) break;
        if (step == 1) res->loss_first = nll;
        res->loss_last = nll;
        res->kl_last = kl;
        /* the last pass only measures the final δ */
        if (step > o->steps || nll < 0.05) break;
        res->steps_run = step;
        const double c1 = 1 - pow(b1, (double)step), c2 = 1 - pow(b2, (double)step);
        double norm = 0, dn = 0;
        for (int64_t i = 0; i < D; i++) dn += (double)delta[i] * delta[i];
        dn = sqrt(dn);
        for (int64_t i = 0; i < D; i++) {
            /* ROME's decay: weight_decay · |δ| / |W k* + b|² */
            const double gi = g[i] + (dn > 0 ? o->weight_decay * delta[i] / (dn * v0n2) : 0.0);
            mom[i] = b1 * mom[i] + (1 - b1) * gi;
            mom[D + i] = b2 * mom[D + i] + (1 - b2) * gi * gi;
            delta[i] -= (float)(o->lr * (mom[i] / c1) / (sqrt(mom[D + i] / c2) + eps));
            norm += (double)delta[i] * delta[i];
        }
        norm = sqrt(norm);
        if (norm > maxn)
            for (int64_t i = 0; i < D; i++) delta[i] = (float)(delta[i] * (maxn / norm));
    }
    ffn_model_zero_grads(m);
    for (int64_t j = 0; coef && j <= P; j++) free(coef[j]);
    free(coef);
    free(lg);
    free(work);
    free(g);
    free(mom);
    free(p0);
    return st;
}

/* ---- the key k* ------------------------------------------------------------------- */

/* acc (W) = the mean over the prompts of tap `tap` (W wide) at the
 * subject's last token */
static ffn_status tap_mean(ffn_model *m, const layer_view *lv, const char *tap, int64_t W,
                           const prompt_set *ps, double *acc) {
    memset(acc, 0, (size_t)W * sizeof *acc);
    int64_t maxlen = 0;
    for (int64_t j = 0; j < ps->P; j++) maxlen = ps->seq[j].n > maxlen ? ps->seq[j].n : maxlen;
    float *lg = malloc((size_t)(maxlen * lv->V) * sizeof *lg);
    ffn_status st = lg ? FFN_OK : ffn_error(FFN_ERR_NOMEM, "edit: out of memory");
    ffn_model_taps_clear(m);
    if (!st) st = ffn_model_tap_select(m, tap);
    for (int64_t j = 0; j < ps->P && !st; j++) {
        ffn_tap_view v;
        if ((st = ffn_model_logits(m, lg, ps->seq[j].v, 1, ps->seq[j].n)) ||
            (st = ffn_model_tap_read(m, tap, &v)))
            break;
        const float *row = (const float *)v.data + ps->subj[j] * W;
        for (int64_t i = 0; i < W; i++) acc[i] += row[i];
    }
    ffn_model_taps_clear(m);
    for (int64_t i = 0; !st && i < W; i++) acc[i] /= (double)ps->P;
    free(lg);
    return st;
}

static ffn_status key_star(ffn_model *m, const layer_view *lv, const prompt_set *ps, float *k) {
    double *acc = malloc((size_t)lv->F * sizeof *acc);
    ffn_status st = acc ? tap_mean(m, lv, lv->m_tap, lv->F, ps, acc)
                        : ffn_error(FFN_ERR_NOMEM, "edit: out of memory");
    for (int64_t i = 0; !st && i < lv->F; i++) k[i] = (float)acc[i];
    free(acc);
    return st;
}

/* ---- the fine-tuning baseline --------------------------------------------------- */

static ffn_status fine_tune(ffn_model *m, const layer_view *lv, const prompt_set *ps,
                            const ffn_edit_options *o, ffn_edit_result *res) {
    char name[96];
    snprintf(name, sizeof name, "model.layers.%lld.mlp.down_proj.weight", (long long)lv->l);
    const ffn_model_tensor *t = ffn_model_find_tensor(m, name);
    const int64_t n = t->numel;
    const ids *seq = &ps->seq[0];
    int32_t *targets = malloc((size_t)seq->n * sizeof *targets);
    double *mom = calloc((size_t)(2 * n), sizeof *mom);
    ffn_status st = targets && mom ? FFN_OK : ffn_error(FFN_ERR_NOMEM, "edit: out of memory");
    for (int64_t i = 0; !st && i < seq->n; i++) {
        const int64_t k = i - ps->first[0];
        targets[i] = k >= 0 && k < ps->target.n ? ps->target.v[k] : FFN_IGNORE_INDEX;
    }
    float *W = ffn_model_params(m, NULL) + t->offset;
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    for (int64_t step = 1; !st && step <= o->ft_steps + 1; step++) {
        ffn_model_zero_grads(m);
        ffn_model_loss loss;
        if ((st = ffn_model_forward_backward(m, seq->v, targets, 1, seq->n, 1.0f, &loss))) break;
        if (step == 1) res->loss_first = loss.ce;
        res->loss_last = loss.ce;
        if (step > o->ft_steps || loss.ce < 0.05) break;
        res->steps_run = step;
        const float *g = ffn_model_grads(m, NULL) + t->offset;
        const double c1 = 1 - pow(b1, (double)step), c2 = 1 - pow(b2, (double)step);
        for (int64_t i = 0; i < n; i++) {
            mom[i] = b1 * mom[i] + (1 - b1) * g[i];
            mom[n + i] = b2 * mom[n + i] + (1 - b2) * (double)g[i] * g[i];
            W[i] -= (float)(o->ft_lr * (mom[i] / c1) / (sqrt(mom[n + i] / c2) + eps));
        }
        if ((st = ffn_model_params_changed(m))) break;
    }
    ffn_model_zero_grads(m);
    free(targets);
    free(mom);
    return st;
}

/* ---- one edit ------------------------------------------------------------------- */

/* The model's next word after the prompt, greedily: tokens until a word
 * has begun and a piece starts with whitespace or is punctuation (a word
 * of a word-level vocabulary is one token; char and byte vocabularies take
 * several).  An empty word is an error asking for the old object. */
static ffn_status top_next(ffn_model *m, const ffn_vocab *vocab, const char *prompt, char *out,
                           size_t cap) {
    ids p;
    ffn_status st = encode_prompt(vocab, prompt, NULL, &p, NULL);
    if (st) return st;
    const int64_t V = ffn_vocab_size(vocab);
    int64_t max_n, max_seq;
    ffn_model_rows(m, &max_n, &max_seq);
    float *lg = malloc((size_t)(max_seq * V) * sizeof *lg);
    if (!lg) st = ffn_error(FFN_ERR_NOMEM, "edit: out of memory");
    size_t at = 0;
    out[0] = 0;
    for (int k = 0; !st && k < 24 && p.n < max_seq && at + 1 < cap; k++) {
        if ((st = ffn_model_logits(m, lg, p.v, 1, p.n))) break;
        const float *z = lg + (p.n - 1) * V;
        const int32_t unk = ffn_vocab_specials(vocab).unk;
        int32_t best = -1;
        for (int32_t t = 0; t < V; t++)
            if (t != unk && (best < 0 || z[t] > z[best])) best = t;
        const char *bytes;
        size_t len;
        char bb[1];
        if ((st = ffn_vocab_piece(vocab, p.v[p.n - 1], best, bb, &bytes, &len))) break;
        if (at == 0)
            while (len && (*bytes == ' ' || *bytes == '\n' || *bytes == '\t')) bytes++, len--;
        else if (len && (*bytes == ' ' || *bytes == '\n' || *bytes == '\t'))
            break;
        if (len && strchr(".,;:!?\"'()", *bytes)) {
            if (at > 0) break;
            len = 0;
        }
        if (at + len >= cap) break;
        memcpy(out + at, bytes, len);
        at += len;
        out[at] = 0;
        if ((st = ids_append(&p, &best, 1))) break;
        if (ffn_vocab_get_kind(vocab) == FFN_VOCAB_WORD && at > 0) break;
    }
    if (!st && at == 0)
        st = ffn_error(FFN_ERR_INVALID_ARG, "prompt '%s': the model predicts no word after it "
                       "to compare the target with; give the old object", prompt);
    free(lg);
    ids_free(&p);
    return st;
}

/* What every edit starts with: the object request q replaces (its own old
 * object, else the model's next word after the prompt) into old (cap
 * bytes), and its prompts into ps. */
static ffn_status request_prompts(ffn_model *m, const ffn_vocab *vocab, const ffn_edit_request *q,
                                  const ffn_edit_options *o, int64_t max_seq, char *old,
                                  size_t cap, prompt_set *ps) {
    ffn_status st = FFN_OK;
    if (q->old_object) snprintf(old, cap, "%s", q->old_object);
    else if ((st = top_next(m, vocab, q->prompt, old, cap))) return st;
    return build_prompts(m, vocab, q, o, max_seq, ps);
}

ffn_status ffn_edit_apply(ffn_model *m, const ffn_vocab *vocab, const ffn_edit_request *req,
                          const ffn_edit_options *o, const double *C, ffn_edit_result *res_out) {
    if (!m || !vocab || !req || !o || !req->prompt || !req->subject || !req->target)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_edit_apply: NULL argument");
    if (!ffn_model_grads(m, NULL))
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_edit_apply: the model must be a training model "
                         "(ffn_model_options.training = 1)");
    if (o->method == FFN_EDIT_MEMIT)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_edit_apply: MEMIT edits a batch over layers: "
                         "ffn_edit_memit");
    if (o->method == FFN_EDIT_ROME && !C)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_edit_apply: ROME needs the keys' second "
                         "moment C");
    if (o->n_prefixes < 1 || o->steps < 0 || o->ft_steps < 0 || !(o->lambda >= 0))
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_edit_apply: n_prefixes >= 1, steps >= 0 and "
                         "lambda >= 0 expected");
    layer_view lv;
    ffn_status st = view_layer(m, o->layer, &lv);
    if (st) return st;
    const int64_t D = lv.D, F = lv.F;
    ffn_edit_result res;
    memset(&res, 0, sizeof res);
    res.layer = o->layer;
    res.D = D;
    res.F = F;
    prompt_set ps;
    if ((st = request_prompts(m, vocab, req, o, lv.max_seq, res.old_object, sizeof res.old_object,
                              &ps)))
        return st;
    res.kl_subject_only = ps.kl_subject_only;
    res.k_star = malloc((size_t)F * sizeof(float));
    res.v_star = malloc((size_t)D * sizeof(float));
    res.v_old = malloc((size_t)D * sizeof(float));
    double *v0 = malloc((size_t)D * sizeof *v0), *A = NULL, *u = NULL;
    float *delta = malloc((size_t)D * sizeof *delta);
    if (!res.k_star || !res.v_star || !res.v_old || !v0 || !delta)
        st = ffn_error(FFN_ERR_NOMEM, "edit: out of memory");
    if (!st) st = key_star(m, &lv, &ps, res.k_star);
    if (!st) {
        down(&lv, res.k_star, v0);
        for (int64_t i = 0; i < D; i++) res.v_old[i] = (float)v0[i];
    }
    if (!st && o->method == FFN_EDIT_FT) {
        st = fine_tune(m, &lv, &ps, o, &res);
        double *after = v0; /* down_proj(k*) after fine-tuning */
        if (!st) {
            down(&lv, res.k_star, after);
            for (int64_t i = 0; i < D; i++) res.v_star[i] = (float)after[i];
        }
    } else if (!st) {
        /* u = (C + λI)⁻¹ k*, λ = lambda · tr(C) / F: known before δ, so that δ
         * can be fitted through the update itself */
        A = malloc((size_t)(F * F) * sizeof *A);
        u = malloc((size_t)F * sizeof *u);
        double uk = 0;
        if (!A || !u) st = ffn_error(FFN_ERR_NOMEM, "edit: out of memory");
        if (!st) {
            double tr = 0;
            for (int64_t i = 0; i < F; i++) tr += C[i * F + i];
            res.lambda = o->lambda * tr / (double)F;
            memcpy(A, C, (size_t)(F * F) * sizeof *A);
            for (int64_t i = 0; i < F; i++) A[i * F + i] += res.lambda;
            if (!cholesky(A, F))
                st = ffn_error(FFN_ERR_INVALID_ARG, "layer %lld: C + %g·I is not positive "
                               "definite (too few key samples? raise lambda)",
                               (long long)o->layer, res.lambda);
        }
        if (!st) {
            for (int64_t i = 0; i < F; i++) u[i] = res.k_star[i];
            cholesky_solve(A, F, u);
            for (int64_t i = 0; i < F; i++) uk += u[i] * res.k_star[i];
            if (!(fabs(uk) > 0))
                st = ffn_error(FFN_ERR_INVALID_ARG, "layer %lld: the key k* is zero; nothing to "
                               "edit at this layer", (long long)o->layer);
        }
        if (!st) st = optimise_delta(m, &lv, &ps, o, v0, u, uk, delta, &res);
        for (int64_t i = 0; !st && i < D; i++) res.v_star[i] = (float)(v0[i] + delta[i]);
        /* ΔW = (v* − W k* − b) uᵀ / (uᵀ k*), with v* − W k* − b = δ */
        for (int64_t d = 0; !st && d < D; d++) {
            float *w = lv.W + d * F;
            const double r = ((double)res.v_star[d] - v0[d]) / uk;
            for (int64_t i = 0; i < F; i++) w[i] = (float)((double)w[i] + r * u[i]);
        }
        if (!st) st = ffn_model_params_changed(m);
    }
    free(v0);
    free(A);
    free(u);
    free(delta);
    prompt_set_free(&ps);
    if (st || !res_out) ffn_edit_result_free(&res);
    else *res_out = res;
    return st;
}

/* ---- MEMIT: many edits over a range of layers ---------------------------------- */

ffn_status ffn_memit_solve(int64_t D, int64_t F, int64_t n, const double *K, const double *R,
                           const double *C, double w, double lambda, double *dW) {
    if (D < 1 || F < 1 || n < 1 || !K || !R || !C || !dW || !(w >= 0) || !(lambda >= 0))
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_memit_solve: bad arguments");
    double *A = malloc((size_t)(F * F) * sizeof *A), *x = malloc((size_t)F * sizeof *x);
    ffn_status st = A && x ? FFN_OK : ffn_error(FFN_ERR_NOMEM, "memit: out of memory");
    for (int64_t i = 0; !st && i < F; i++)
        for (int64_t j = 0; j < F; j++) {
            double s = w * C[i * F + j] + (i == j ? lambda : 0.0);
            for (int64_t e = 0; e < n; e++) s += K[e * F + i] * K[e * F + j];
            A[i * F + j] = s;
        }
    if (!st && !cholesky(A, F))
        st = ffn_error(FFN_ERR_INVALID_ARG, "memit: w·C + %g·I + KᵀK is not positive definite "
                       "(too few key samples? raise lambda)", lambda);
    if (!st) memset(dW, 0, (size_t)(D * F) * sizeof *dW);
    /* A symmetric: row d of Rᵀ K A⁻¹ is Σ_e R[e, d] (A⁻¹ k_e)ᵀ */
    for (int64_t e = 0; !st && e < n; e++) {
        memcpy(x, K + e * F, (size_t)F * sizeof *x);
        cholesky_solve(A, F, x);
        for (int64_t d = 0; d < D; d++) {
            const double r = R[e * D + d];
            double *row = dW + d * F;
            for (int64_t i = 0; i < F; i++) row[i] += r * x[i];
        }
    }
    free(A);
    free(x);
    return st;
}

void ffn_memit_result_free(ffn_memit_result *r) {
    if (!r) return;
    for (int64_t j = 0; r->layers && j < r->n_layers; j++)
        FFN_FREE_ALL(r->layers[j].K, r->layers[j].R, r->layers[j].dW);
    FFN_FREE_ALL(r->layers, r->old_objects);
    memset(r, 0, sizeof *r);
}

/* mean over the requests of |z_i − h_b,i|; R (n, D) = (z − h_b) · scale */
static ffn_status memit_residual(ffn_model *m, const layer_view *lb, const char *tap,
                                 const prompt_set *ps, int64_t n, const double *z, double scale,
                                 double *h, double *R, double *mean_norm) {
    const int64_t D = lb->D;
    ffn_status st = FFN_OK;
    *mean_norm = 0;
    for (int64_t e = 0; e < n && !st; e++) {
        if ((st = tap_mean(m, lb, tap, D, &ps[e], h))) break;
        double nn = 0;
        for (int64_t d = 0; d < D; d++) {
            const double r = z[e * D + d] - h[d];
            nn += r * r;
            if (R) R[e * D + d] = r * scale;
        }
        *mean_norm += sqrt(nn) / (double)n;
    }
    return st;
}

/* The checks MEMIT and FT-L share, in the order they are made: the
 * arguments (missing: one more of the caller's is NULL), a training model,
 * the order of the layers, the method's options (bad_options: what it
 * expects, or NULL when they are fine), every request's prompt, subject
 * and target, and every layer's down_proj; *last_view: layer last.  fn
 * names the entry point, tag the method. */
static ffn_status batch_check(ffn_model *m, const ffn_vocab *vocab, const ffn_edit_request *reqs,
                              int64_t n, int64_t first, int64_t last, const ffn_edit_options *o,
                              int missing, const char *bad_options, const char *fn,
                              const char *tag, layer_view *last_view) {
    if (!m || !vocab || !reqs || n < 1 || !o || missing)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: NULL argument or no requests", fn);
    if (!ffn_model_grads(m, NULL))
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: the model must be a training model "
                         "(ffn_model_options.training = 1)", fn);
    if (first > last)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: layers %lld-%lld: the first is after the "
                         "last", tag, (long long)first, (long long)last);
    if (bad_options) return ffn_error(FFN_ERR_INVALID_ARG, "%s: %s", fn, bad_options);
    for (int64_t i = 0; i < n; i++)
        if (!reqs[i].prompt || !reqs[i].subject || !reqs[i].target)
            return ffn_error(FFN_ERR_INVALID_ARG, "%s: request %lld: NULL prompt, subject or "
                             "target", tag, (long long)i);
    ffn_status st = FFN_OK;
    for (int64_t l = first; l <= last && !st; l++) st = view_layer(m, l, last_view);
    return st;
}

ffn_status ffn_edit_memit(ffn_model *m, const ffn_vocab *vocab, const ffn_edit_request *reqs,
                          int64_t n, int64_t first, int64_t last, const ffn_edit_options *o,
                          const double *const *C, ffn_memit_result *res_out) {
    const char *bad_options =
        o && (o->n_prefixes < 1 || o->steps < 0 || !(o->lambda >= 0) || !(o->cov_weight >= 0))
            ? "n_prefixes >= 1, steps >= 0, lambda >= 0 and cov_weight >= 0 expected"
            : NULL;
    layer_view lb; /* the last layer */
    ffn_status st = batch_check(m, vocab, reqs, n, first, last, o, !C, bad_options,
                                "ffn_edit_memit", "memit", &lb);
    if (st) return st;
    const int64_t NL = last - first + 1;
    const int64_t D = lb.D, F = lb.F;
    char h_tap[48];
    ffn_tap_name(h_tap, sizeof h_tap, last, FFN_TAP_RESID_POST);
    ffn_memit_result res;
    memset(&res, 0, sizeof res);
    res.n = n;
    res.n_layers = NL;
    res.D = D;
    res.F = F;
    res.layers = calloc((size_t)NL, sizeof *res.layers);
    res.old_objects = calloc((size_t)n, sizeof *res.old_objects);
    prompt_set *ps = calloc((size_t)n, sizeof *ps);
    double *z = malloc((size_t)(n * D) * sizeof *z), *v0 = malloc((size_t)D * sizeof *v0);
    double *h = malloc((size_t)D * sizeof *h);
    float *kf = malloc((size_t)F * sizeof *kf), *delta = malloc((size_t)D * sizeof *delta);
    if (!res.layers || !res.old_objects || !ps || !z || !v0 || !h || !kf || !delta)
        st = ffn_error(FFN_ERR_NOMEM, "memit: out of memory");
    ffn_edit_options od = *o;
    od.method = FFN_EDIT_MEMIT;
    od.fit = FFN_EDIT_FIT_SUBJECT;
    /* z_i = h_b + δ_i on the unedited model */
    for (int64_t e = 0; e < n && !st; e++) {
        if ((st = request_prompts(m, vocab, &reqs[e], &od, lb.max_seq, res.old_objects[e],
                                  sizeof res.old_objects[e], &ps[e])))
            break;
        if ((st = key_star(m, &lb, &ps[e], kf))) break;
        down(&lb, kf, v0);
        ffn_edit_result r1;
        memset(&r1, 0, sizeof r1);
        if ((st = optimise_delta(m, &lb, &ps[e], &od, v0, NULL, 0, delta, &r1))) break;
        res.loss_first += r1.loss_first / (double)n;
        res.loss_last += r1.loss_last / (double)n;
        if ((st = tap_mean(m, &lb, h_tap, D, &ps[e], h))) break;
        for (int64_t d = 0; d < D; d++) z[e * D + d] = h[d] + delta[d];
    }
    if (!st) st = memit_residual(m, &lb, h_tap, ps, n, z, 1.0, h, NULL, &res.resid_first);
    for (int64_t j = 0; j < NL && !st; j++) {
        const int64_t l = first + j;
        ffn_memit_layer *ly = &res.layers[j];
        ly->layer = l;
        layer_view lv;
        if ((st = view_layer(m, l, &lv))) break;
        ly->K = malloc((size_t)(n * F) * sizeof *ly->K);
        ly->R = malloc((size_t)(n * D) * sizeof *ly->R);
        ly->dW = malloc((size_t)(D * F) * sizeof *ly->dW);
        if (!ly->K || !ly->R || !ly->dW) {
            st = ffn_error(FFN_ERR_NOMEM, "memit: out of memory");
            break;
        }
        for (int64_t e = 0; e < n && !st; e++) st = tap_mean(m, &lv, lv.m_tap, F, &ps[e], ly->K + e * F);
        double rn;
        if (!st)
            st = memit_residual(m, &lb, h_tap, ps, n, z, 1.0 / (double)(NL - j), h, ly->R, &rn);
        double tr = 0;
        for (int64_t i = 0; i < F; i++) tr += C[j][i * F + i];
        ly->lambda = o->lambda * o->cov_weight * tr / (double)F;
        if (!st) st = ffn_memit_solve(D, F, n, ly->K, ly->R, C[j], o->cov_weight, ly->lambda, ly->dW);
        for (int64_t i = 0; !st && i < D * F; i++) lv.W[i] = (float)((double)lv.W[i] + ly->dW[i]);
        if (!st) st = ffn_model_params_changed(m);
    }
    if (!st) st = memit_residual(m, &lb, h_tap, ps, n, z, 1.0, h, NULL, &res.resid_last);
    prompt_sets_free(ps, n);
    FFN_FREE_ALL(z, v0, h, kf, delta);
    if (st || !res_out) ffn_memit_result_free(&res);
    else *res_out = res;
    return st;
}

/* ---- FT-L: fine-tuning over layers with an L∞ bound -------------------------------- */

void ffn_ft_result_free(ffn_ft_result *r) {
    if (!r) return;
    FFN_FREE_ALL(r->old_objects, r->W_before, r->grad_first);
    memset(r, 0, sizeof *r);
}

void ffn_edit_ft_step(float *W, const float *g, double *m, double *v, const float *W0,
                      int64_t numel, int64_t step, double lr, double norm) {
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    const double c1 = 1 - pow(b1, (double)step), c2 = 1 - pow(b2, (double)step);
    for (int64_t i = 0; i < numel; i++) {
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * (double)g[i] * g[i];
        double w = (double)W[i] - lr * (m[i] / c1) / (sqrt(v[i] / c2) + eps);
        if (norm > 0) {
            const double lo = (double)W0[i] - norm, hi = (double)W0[i] + norm;
            w = w < lo ? lo : w > hi ? hi : w;
        }
        W[i] = (float)w;
    }
}

ffn_status ffn_edit_ft_batch(ffn_model *m, const ffn_vocab *vocab, const ffn_edit_request *reqs,
                             int64_t n, int64_t first, int64_t last, const ffn_edit_options *o,
                             ffn_ft_result *res_out) {
    const char *bad_options = o && (o->ft_steps < 0 || !(o->ft_lr >= 0) || !(o->ft_norm >= 0))
                                  ? "ft_steps >= 0, ft_lr >= 0 and ft_norm >= 0 expected"
                                  : NULL;
    layer_view lv;
    ffn_status st = batch_check(m, vocab, reqs, n, first, last, o, 0, bad_options,
                                "ffn_edit_ft_batch", "ft", &lv);
    if (st) return st;
    const int64_t NL = last - first + 1;
    const int64_t DF = lv.D * lv.F;
    ffn_ft_result res;
    memset(&res, 0, sizeof res);
    res.n = n;
    res.n_layers = NL;
    res.D = lv.D;
    res.F = lv.F;
    res.old_objects = calloc((size_t)n, sizeof *res.old_objects);
    res.grad_first = calloc((size_t)(NL * DF), sizeof *res.grad_first);
    prompt_set *ps = calloc((size_t)n, sizeof *ps);
    int32_t **tg = calloc((size_t)n, sizeof *tg);
    float *W0 = res.W_before = malloc((size_t)(NL * DF) * sizeof *W0);
    double *mom = calloc((size_t)(2 * NL * DF), sizeof *mom);
    int64_t *off = malloc((size_t)NL * sizeof *off);
    if (!res.old_objects || !res.grad_first || !ps || !tg || !W0 || !mom || !off)
        st = ffn_error(FFN_ERR_NOMEM, "ft: out of memory");
    float *params = ffn_model_params(m, NULL);
    for (int64_t j = 0; j < NL && !st; j++) {
        char name[96];
        snprintf(name, sizeof name, "model.layers.%lld.mlp.down_proj.weight", (long long)(first + j));
        const ffn_model_tensor *t = ffn_model_find_tensor(m, name);
        if (!t || t->numel != DF) {
            st = ffn_error(FFN_ERR_UNSUPPORTED, "ft: layer %lld has no fp32 %s of %lld weights",
                           (long long)(first + j), name, (long long)DF);
            break;
        }
        off[j] = t->offset;
        memcpy(W0 + j * DF, params + t->offset, (size_t)DF * sizeof *W0);
    }
    ffn_edit_options od = *o;
    od.method = FFN_EDIT_FT; /* the bare prompt only */
    for (int64_t e = 0; e < n && !st; e++) {
        if ((st = request_prompts(m, vocab, &reqs[e], &od, lv.max_seq, res.old_objects[e],
                                  sizeof res.old_objects[e], &ps[e])))
            break;
        const ids *seq = &ps[e].seq[0];
        if (!(tg[e] = malloc((size_t)seq->n * sizeof *tg[e]))) {
            st = ffn_error(FFN_ERR_NOMEM, "ft: out of memory");
            break;
        }
        for (int64_t i = 0; i < seq->n; i++) {
            const int64_t k = i - ps[e].first[0];
            tg[e][i] = k >= 0 && k < ps[e].target.n ? ps[e].target.v[k] : FFN_IGNORE_INDEX;
        }
    }
    for (int64_t step = 1; !st && step <= o->ft_steps + 1; step++) {
        ffn_model_zero_grads(m);
        double loss = 0;
        for (int64_t e = 0; e < n && !st; e++) {
            ffn_model_loss l;
            st = ffn_model_forward_backward(m, ps[e].seq[0].v, tg[e], 1, ps[e].seq[0].n,
                                            (float)(1.0 / (double)n), &l);
            loss += l.ce / (double)n;
        }
        if (st) break;
        if (step == 1) res.loss_first = loss;
        res.loss_last = loss;
        if (step > o->ft_steps || loss < 0.05) break;
        res.steps_run = step;
        const float *g = ffn_model_grads(m, NULL);
        for (int64_t j = 0; step == 1 && j < NL; j++)
            memcpy(res.grad_first + j * DF, g + off[j], (size_t)DF * sizeof *g);
        for (int64_t j = 0; j < NL; j++)
            ffn_edit_ft_step(params + off[j], g + off[j], mom + 2 * j * DF, mom + (2 * j + 1) * DF,
                             W0 + j * DF, DF, step, o->ft_lr, o->ft_norm);
        st = ffn_model_params_changed(m);
    }
    ffn_model_zero_grads(m);
    for (int64_t j = 0; !st && j < NL; j++)
        for (int64_t i = 0; i < DF; i++) {
            const double d = fabs((double)params[off[j] + i] - W0[j * DF + i]);
            res.max_change = d > res.max_change ? d : res.max_change;
        }
    prompt_sets_free(ps, n);
    for (int64_t e = 0; tg && e < n; e++) free(tg[e]);
    free(tg);
    free(mom);
    free(off);
    if (st || !res_out) ffn_ft_result_free(&res);
    else *res_out = res;
    return st;
}

/* ---- scores -------------------------------------------------------------------------- */

/* 1 when p(a | prompt) > p(b | prompt) */
static ffn_status prefer(ffn_model *m, const ffn_vocab *vocab, const char *prompt, const char *a,
                         const char *b, float *lg, int *out, double *la, double *lb) {
    ids p, ca = {NULL, 0}, cb = {NULL, 0};
    ffn_status st = encode_prompt(vocab, prompt, NULL, &p, NULL);
    if (st) return st;
    double x = 0, y = 0;
    if (!(st = encode_continuation(vocab, prompt, a, "object", &ca)) &&
        !(st = encode_continuation(vocab, prompt, b, "object", &cb)) &&
        !(st = logprob(m, &p, &ca, lg, &x)))
        st = logprob(m, &p, &cb, lg, &y);
    ids_free(&p);
    ids_free(&ca);
    ids_free(&cb);
    *out = x > y;
    if (la) *la = x;
    if (lb) *lb = y;
    return st;
}

ffn_status ffn_edit_score(ffn_model *m, const ffn_vocab *vocab, const ffn_edit_request *reqs,
                          int64_t n, const char *const *old_objects, ffn_edit_scores *out) {
    if (!m || !vocab || (!reqs && n) || !out)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_edit_score: NULL argument");
    memset(out, 0, sizeof *out);
    int64_t max_n, max_seq;
    ffn_model_rows(m, &max_n, &max_seq);
    float *lg = malloc((size_t)(max_seq * ffn_vocab_size(vocab)) * sizeof *lg);
    if (!lg) return ffn_error(FFN_ERR_NOMEM, "edit: out of memory");
    ffn_taps *stash = ffn_model_taps_stash(m);
    int64_t eff = 0, gen = 0, spec = 0;
    ffn_status st = FFN_OK;
    for (int64_t e = 0; e < n && !st; e++) {
        const ffn_edit_request *r = &reqs[e];
        const char *old = r->old_object ? r->old_object : old_objects ? old_objects[e] : NULL;
        char top[64];
        if (!old && !(st = top_next(m, vocab, r->prompt, top, sizeof top))) old = top;
        int ok;
        double ln, lo;
        if (st || (st = prefer(m, vocab, r->prompt, r->target, old, lg, &ok, &ln, &lo))) break;
        eff += ok;
        out->logp_new += ln / (double)n;
        out->logp_old += lo / (double)n;
        for (int64_t i = 0; i < r->n_paraphrases && !st; i++) {
            st = prefer(m, vocab, r->paraphrases[i], r->target, old, lg, &ok, NULL, NULL);
            gen += ok;
            out->n_paraphrases++;
        }
        for (int64_t i = 0; i < r->n_neighbours && !st; i++) {
            /* a neighbour whose own object is the new target cannot tell */
            if (!strcmp(r->neighbours[i].object, r->target)) continue;
            st = prefer(m, vocab, r->neighbours[i].prompt, r->neighbours[i].object, r->target, lg,
                        &ok, NULL, NULL);
            spec += ok;
            out->n_neighbours++;
        }
    }
    ffn_model_taps_restore(m, stash);
    free(lg);
    if (st) return st;
    out->n_edits = n;
    out->efficacy = n ? (double)eff / (double)n : NAN;
    out->generalisation = out->n_paraphrases ? (double)gen / (double)out->n_paraphrases : NAN;
    out->specificity = out->n_neighbours ? (double)spec / (double)out->n_neighbours : NAN;
    return FFN_OK;
}

ffn_status ffn_edit_heldout_loss(ffn_model *m, const int32_t *tokens, int64_t n_tok,
                                 int64_t windows, double *loss) {
    if (!m || !tokens || !loss || windows < 1)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_edit_heldout_loss: bad arguments");
    int64_t max_n, max_seq;
    ffn_model_rows(m, &max_n, &max_seq);
    const int64_t T = n_tok - 1 < max_seq ? n_tok - 1 : max_seq;
    if (T < 1) return ffn_error(FFN_ERR_INVALID_ARG, "held-out text: fewer than 2 tokens");
    ffn_taps *stash = ffn_model_taps_stash(m);
    double sum = 0;
    int64_t count = 0;
    ffn_status st = FFN_OK;
    for (int64_t w = 0; w < windows && !st; w++) {
        const int64_t at = n_tok - 1 - (w + 1) * T;
        if (at < 0) break;
        ffn_model_loss l;
        if ((st = ffn_model_eval_loss(m, tokens + at, tokens + at + 1, 1, T, &l))) break;
        sum += l.ce * (double)l.n_targets;
        count += l.n_targets;
    }
    ffn_model_taps_restore(m, stash);
    if (st) return st;
    *loss = count ? sum / (double)count : NAN;
    return FFN_OK;
}

/* ---- the edited model's directory ------------------------------------------------- */

static ffn_status copy_into(const char *from_dir, const char *name, const char *to_dir) {
    char *from = ffn_path_join(from_dir, "/", name), *to = ffn_path_join(to_dir, "/", name);
    ffn_status st = from && to ? FFN_OK : ffn_error(FFN_ERR_NOMEM, "out of memory");
    FILE *in = st ? NULL : fopen(from, "rb");
    if (!st && !in) {
        st = errno == ENOENT ? FFN_OK
                             : ffn_error(FFN_ERR_IO, "%s: cannot read: %s", from, strerror(errno));
    } else if (!st) {
        FILE *out = fopen(to, "wb");
        if (!out) st = ffn_error(FFN_ERR_IO, "%s: cannot write: %s", to, strerror(errno));
        char buf[65536];
        size_t k;
        while (!st && (k = fread(buf, 1, sizeof buf, in)) > 0)
            if (fwrite(buf, 1, k, out) != k)
                st = ffn_error(FFN_ERR_IO, "%s: write failed: %s", to, strerror(errno));
        if (!st && ferror(in)) st = ffn_error(FFN_ERR_IO, "%s: read failed", from);
        if (out && fclose(out) != 0 && !st)
            st = ffn_error(FFN_ERR_IO, "%s: write failed: %s", to, strerror(errno));
        fclose(in);
    }
    free(from);
    free(to);
    return st;
}

ffn_status ffn_edit_save(ffn_model *m, const char *model_path, const char *tokenizer_path,
                         int tokenizer_is_llama2c, const char *out_dir, int force) {
    if (!m || !model_path || !out_dir)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_edit_save: NULL argument");
    char *a = realpath(model_path, NULL), *b = realpath(out_dir, NULL);
    int same = a && b && !strcmp(a, b);
    free(a);
    free(b);
    if (same)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: the output is the input model itself; write "
                         "the edited model to another directory", out_dir);
    struct stat sb;
    if (lstat(out_dir, &sb) == 0 && !force && !(S_ISDIR(sb.st_mode) && ffn_dir_is_empty(out_dir)))
        return ffn_error(FFN_ERR_INVALID_ARG, "%s exists; pass --force to replace it", out_dir);
    ffn_model_config cfg;
    ffn_checkpoint_info info;
    ffn_status st = ffn_checkpoint_read_config_any(model_path, &cfg, &info);
    if (st) return st;
    if (info.format != FFN_CHECKPOINT_FFN) {
        ffn_hf_save_options ho = {NULL, tokenizer_path, tokenizer_is_llama2c, info.context_cap,
                                  info.model_type};
        return ffn_checkpoint_save_hf(m, out_dir, &ho);
    }
    ffn_dirlock lock;
    if ((st = ffn_dirlock_take(out_dir, &lock))) return st;
    char *tmp = NULL;
    if ((st = ffn_dirswap_prepare(out_dir, NULL, NULL)) || (st = ffn_dirswap_begin(out_dir, &tmp))) {
        ffn_dirlock_release(&lock);
        return st;
    }
    static const char *const copied[] = {"config.json", FFN_TOKENIZER_FILENAME, "tokenizer.bin",
                                         NULL};
    for (int i = 0; copied[i] && !st; i++) st = copy_into(model_path, copied[i], tmp);
    char *w = st ? NULL : ffn_path_join(tmp, "/", "model.safetensors");
    if (!st && !w) st = ffn_error(FFN_ERR_NOMEM, "out of memory");
    if (!st) st = run_dir_save_weights(m, w);
    free(w);
    if (!st) st = ffn_dirswap_commit(out_dir, tmp);
    else ffn_dirswap_abort(tmp);
    free(tmp);
    ffn_dirlock_release(&lock);
    return st;
}
