/* serve_request.c -- an API request body (JSON, read by the project's
 * strict reader) into a serve_req, every field checked for type and range:
 *   "text"     a string of at most SERVE_MAX_TEXT_BYTES bytes
 *   "ids"      an array of integers in [0, 2^31) (at most SERVE_MAX_TOKENIZE)
 *   "edits"    an array of at most SERVE_MAX_EDITS objects
 *              {"layer": L, "neuron": i, "scale": s, "position"?: p}, or
 *              "feature": j (of layer L's --transcoder) in place of "neuron"
 *              (s a finite number in [-100, 100]; p >= -1, -1 = every position)
 *   "position" an integer >= -1 (-1 = the last token)
 *   "layer"    an integer >= -1 (-1 = every layer)
 *   "k"        an integer in [1, SERVE_MAX_K]
 *   "subject", "target", "object"  non-empty strings of at most
 *              SERVE_MAX_WORD_BYTES bytes
 *   "prompt"   a non-empty string of at most SERVE_MAX_TEXT_BYTES bytes
 *   "method"   "rome" or "ft"
 *   the options of /api/edit (serve_edit_opt_names): numbers within the
 *              bounds of the flags of `ffn edit` of the same names
 * An unknown field, a field the endpoint does not take, a wrong type or a
 * value out of range is refused with one sentence naming the field.  Only
 * libc and the public JSON reader: tests/fuzz/fuzz_serve_request.c links
 * this file alone. */
#include "serve.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static int bad(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *err, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return 0;
}

static const struct {
    const char *name;
    unsigned bit;
} fields[] = {{"text", SERVE_F_TEXT},         {"ids", SERVE_F_IDS},
              {"edits", SERVE_F_EDITS},       {"position", SERVE_F_POSITION},
              {"layer", SERVE_F_LAYER},       {"k", SERVE_F_K},
              {"subject", SERVE_F_SUBJECT},   {"target", SERVE_F_TARGET},
              {"prompt", SERVE_F_PROMPT},     {"method", SERVE_F_METHOD},
              {"object", SERVE_F_OBJECT}};
#define N_FIELDS (sizeof fields / sizeof fields[0])

const char *const serve_edit_opt_names[SERVE_N_EDIT_OPTS] = {
    "steps", "lr", "kl_weight", "prefixes", "prefix_len", "lambda", "delta_decay",
    "clamp_norm", "ft_steps", "ft_lr", "seed"};

/* bounds of each option (integers where is_int); those of `ffn edit`,
 * the step counts capped at SERVE_MAX_EDIT_STEPS */
static const struct {
    int is_int;
    double lo, hi;
} opt_bounds[SERVE_N_EDIT_OPTS] = {
    {1, 0, SERVE_MAX_EDIT_STEPS}, {0, 0, 100}, {0, 0, 1e6}, {1, 1, 100}, {1, 0, 64},
    {0, 0, 1e6}, {0, 0, 1e6}, {0, 0, 1e6}, {1, 0, SERVE_MAX_EDIT_STEPS}, {0, 0, 100},
    {1, 0, 4294967295.0}};

static void allowed_names(unsigned allowed, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < N_FIELDS && len < n; i++)
        if (allowed & fields[i].bit)
            len += (size_t)snprintf(buf + len, n - len, "%s\"%s\"", len ? ", " : "", fields[i].name);
    for (size_t i = 0; (allowed & SERVE_F_EDIT_OPTS) && i < SERVE_N_EDIT_OPTS && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s\"%s\"", len ? ", " : "",
                                serve_edit_opt_names[i]);
    if (!len) snprintf(buf, n, "none");
}

static const char *type_word(const ffn_json_value *v) {
    switch (ffn_json_type_of(v)) {
    case FFN_JSON_NULL: return "null";
    case FFN_JSON_FALSE:
    case FFN_JSON_TRUE: return "a boolean";
    case FFN_JSON_NUMBER: return "a number";
    case FFN_JSON_STRING: return "a string";
    case FFN_JSON_ARRAY: return "an array";
    case FFN_JSON_OBJECT: return "an object";
    }
    return "?";
}

/* An integer in [lo, hi] or a message naming `what`. */
static int get_int(const ffn_json_value *v, const char *what, int64_t lo, int64_t hi, int64_t *out,
                   char *err, size_t n) {
    int64_t x;
    if (ffn_json_type_of(v) == FFN_JSON_NUMBER && !ffn_json_integer(v, &x))
        return bad(err, n, "\"%s\": expected an integer in [%lld, %lld], got %.17g", what,
                   (long long)lo, (long long)hi, ffn_json_number(v));
    if (!ffn_json_integer(v, &x))
        return bad(err, n, "\"%s\": expected an integer in [%lld, %lld], got %s", what,
                   (long long)lo, (long long)hi, v ? type_word(v) : "nothing");
    if (x < lo || x > hi)
        return bad(err, n, "\"%s\": expected an integer in [%lld, %lld], got %lld", what,
                   (long long)lo, (long long)hi, (long long)x);
    *out = x;
    return 1;
}

static int parse_edit(const ffn_json_value *e, size_t i, serve_edit *out, char *err, size_t n) {
    char what[64];
    if (ffn_json_type_of(e) != FFN_JSON_OBJECT)
        return bad(err, n, "\"edits\"[%zu]: expected an object {\"layer\", \"neuron\", \"scale\"}, "
                   "got %s", i, type_word(e));
    for (size_t j = 0; j < ffn_json_length(e); j++) {
        const char *key = ffn_json_key_at(e, j);
        if (strcmp(key, "layer") && strcmp(key, "neuron") && strcmp(key, "feature") &&
            strcmp(key, "scale") && strcmp(key, "position"))
            return bad(err, n, "\"edits\"[%zu]: unknown field \"%.64s\" (accepted: \"layer\", "
                       "\"neuron\" or \"feature\", \"scale\", \"position\")", i, key);
    }
    out->position = -1;
    out->neuron = out->feature = -1;
    snprintf(what, sizeof what, "edits[%zu].layer", i);
    if (!get_int(ffn_json_get(e, "layer"), what, 0, INT32_MAX, &out->layer, err, n)) return 0;
    const ffn_json_value *fv = ffn_json_get(e, "feature");
    if (fv && ffn_json_get(e, "neuron"))
        return bad(err, n, "\"edits\"[%zu]: a \"neuron\" and a \"feature\"; an edit switches "
                   "one of them", i);
    if (fv) {
        snprintf(what, sizeof what, "edits[%zu].feature", i);
        if (!get_int(fv, what, 0, INT32_MAX, &out->feature, err, n)) return 0;
    } else {
        snprintf(what, sizeof what, "edits[%zu].neuron", i);
        if (!get_int(ffn_json_get(e, "neuron"), what, 0, INT32_MAX, &out->neuron, err, n))
            return 0;
    }
    const ffn_json_value *s = ffn_json_get(e, "scale");
    double scale = ffn_json_number(s);
    if (ffn_json_type_of(s) != FFN_JSON_NUMBER)
        return bad(err, n, "\"edits[%zu].scale\": expected a number in [-100, 100] (0 switches the "
                   "neuron off), got %s", i, s ? type_word(s) : "nothing");
    if (!(scale >= -100.0 && scale <= 100.0))
        return bad(err, n, "\"edits[%zu].scale\": expected a number in [-100, 100] (0 switches the "
                   "neuron off), got %g", i, scale);
    out->scale = scale;
    const ffn_json_value *p = ffn_json_get(e, "position");
    snprintf(what, sizeof what, "edits[%zu].position", i);
    if (p && !get_int(p, what, -1, INT32_MAX, &out->position, err, n)) return 0;
    return 1;
}

int serve_req_parse(const char *body, size_t len, unsigned allowed, serve_req *req, char *err,
                    size_t n) {
    memset(req, 0, sizeof *req);
    req->position = -1;
    req->layer = -1;
    req->method = -1;
    ffn_json *doc = NULL;
    /* no body: every field absent (then the required ones are missing) */
    if (body && len > 0 && ffn_json_parse(body, len, "request body", &doc) != FFN_OK)
        return bad(err, n, "%s", ffn_last_error());
    const ffn_json_value *root = ffn_json_root(doc);
    int ok = 1;
    if (doc && ffn_json_type_of(root) != FFN_JSON_OBJECT) {
        ok = bad(err, n, "request body: expected a JSON object, got %s", type_word(root));
        goto done;
    }
    for (size_t i = 0; ok && i < ffn_json_length(root); i++) {
        const char *key = ffn_json_key_at(root, i);
        const ffn_json_value *v = ffn_json_at(root, i);
        unsigned bit = 0;
        int opt = -1;
        for (size_t f = 0; f < N_FIELDS; f++)
            if (!strcmp(key, fields[f].name)) bit = fields[f].bit;
        for (int o = 0; o < SERVE_N_EDIT_OPTS; o++)
            if (!strcmp(key, serve_edit_opt_names[o])) bit = SERVE_F_EDIT_OPTS, opt = o;
        if (!(bit & allowed)) {
            char names[384];
            allowed_names(allowed, names, sizeof names);
            ok = bad(err, n, "unknown field \"%.64s\" for this endpoint (accepted: %s)", key, names);
            break;
        }
        req->given |= bit;
        if (bit == SERVE_F_TEXT) {
            const char *s = ffn_json_string(v);
            if (!s) {
                ok = bad(err, n, "\"text\": expected a string, got %s", type_word(v));
            } else if (ffn_json_length(v) > SERVE_MAX_TEXT_BYTES) {
                ok = bad(err, n, "\"text\": %zu bytes, at most %d", ffn_json_length(v),
                         SERVE_MAX_TEXT_BYTES);
            } else if (strlen(s) != ffn_json_length(v)) {
                ok = bad(err, n, "\"text\": contains a NUL character");
            } else {
                req->text_len = ffn_json_length(v);
                req->text = malloc(req->text_len + 1);
                if (!req->text) ok = bad(err, n, "out of memory");
                else memcpy(req->text, s, req->text_len + 1);
            }
        } else if (bit == SERVE_F_IDS) {
            size_t m = ffn_json_length(v);
            if (ffn_json_type_of(v) != FFN_JSON_ARRAY) {
                ok = bad(err, n, "\"ids\": expected an array of token ids, got %s", type_word(v));
            } else if (m > SERVE_MAX_TOKENIZE) {
                ok = bad(err, n, "\"ids\": %zu tokens, at most %d", m, SERVE_MAX_TOKENIZE);
            } else {
                req->ids = malloc((m ? m : 1) * sizeof *req->ids);
                if (!req->ids) ok = bad(err, n, "out of memory");
                for (size_t j = 0; ok && j < m; j++) {
                    int64_t id;
                    char what[32];
                    snprintf(what, sizeof what, "ids[%zu]", j);
                    ok = get_int(ffn_json_at(v, j), what, 0, INT32_MAX, &id, err, n);
                    if (ok) req->ids[j] = (int32_t)id;
                }
                req->n_ids = (int64_t)m;
            }
        } else if (bit == SERVE_F_EDITS) {
            size_t m = ffn_json_length(v);
            if (ffn_json_type_of(v) != FFN_JSON_ARRAY)
                ok = bad(err, n, "\"edits\": expected an array of {\"layer\", \"neuron\", "
                         "\"scale\"}, got %s", type_word(v));
            else if (m > SERVE_MAX_EDITS)
                ok = bad(err, n, "\"edits\": %zu edits, at most %d", m, SERVE_MAX_EDITS);
            for (size_t j = 0; ok && j < m; j++)
                ok = parse_edit(ffn_json_at(v, j), j, &req->edits[j], err, n);
            if (ok) req->n_edits = (int64_t)m;
        } else if (bit == SERVE_F_POSITION) {
            ok = get_int(v, "position", -1, INT32_MAX, &req->position, err, n);
        } else if (bit == SERVE_F_LAYER) {
            ok = get_int(v, "layer", -1, INT32_MAX, &req->layer, err, n);
        } else if (bit == SERVE_F_K) {
            ok = get_int(v, "k", 1, SERVE_MAX_K, &req->k, err, n);
        } else if (bit == SERVE_F_METHOD) {
            const char *s = ffn_json_string(v);
            if (s && !strcmp(s, "rome")) req->method = 0;
            else if (s && !strcmp(s, "ft")) req->method = 1;
            else if (s)
                ok = bad(err, n, "\"method\": unknown method \"%.32s\" (expected \"rome\" or "
                         "\"ft\")", s);
            else ok = bad(err, n, "\"method\": expected \"rome\" or \"ft\", got %s", type_word(v));
        } else if (bit == SERVE_F_EDIT_OPTS) {
            const double x = ffn_json_number(v), lo = opt_bounds[opt].lo, hi = opt_bounds[opt].hi;
            if (req->opt_given & (1u << opt)) {
                ok = bad(err, n, "\"%s\": given twice", key);
            } else if (opt_bounds[opt].is_int) {
                int64_t k;
                ok = get_int(v, key, (int64_t)lo, (int64_t)hi, &k, err, n);
                if (ok) req->opt[opt] = (double)k;
            } else if (ffn_json_type_of(v) != FFN_JSON_NUMBER || !(x >= lo && x <= hi)) {
                ok = ffn_json_type_of(v) != FFN_JSON_NUMBER
                         ? bad(err, n, "\"%s\": expected a number in [%g, %g], got %s", key, lo,
                               hi, type_word(v))
                         : bad(err, n, "\"%s\": expected a number in [%g, %g], got %g", key, lo,
                               hi, x);
            } else {
                req->opt[opt] = x;
            }
            if (ok) req->opt_given |= 1u << opt;
        } else if (bit == SERVE_F_SUBJECT || bit == SERVE_F_TARGET || bit == SERVE_F_OBJECT ||
                   bit == SERVE_F_PROMPT) {
            char **dst = bit == SERVE_F_SUBJECT ? &req->subject
                         : bit == SERVE_F_TARGET ? &req->target
                         : bit == SERVE_F_OBJECT ? &req->object : &req->prompt;
            const size_t cap = bit == SERVE_F_PROMPT ? SERVE_MAX_TEXT_BYTES : SERVE_MAX_WORD_BYTES;
            const char *s = ffn_json_string(v);
            if (!s)
                ok = bad(err, n, "\"%s\": expected a string, got %s", key, type_word(v));
            else if (*dst)
                ok = bad(err, n, "\"%s\": given twice", key);
            else if (!ffn_json_length(v) || ffn_json_length(v) > cap)
                ok = bad(err, n, "\"%s\": %zu bytes, expected 1 to %zu", key, ffn_json_length(v),
                         cap);
            else if (strlen(s) != ffn_json_length(v))
                ok = bad(err, n, "\"%s\": contains a NUL character", key);
            else if (!(*dst = strdup(s)))
                ok = bad(err, n, "out of memory");
        }
    }
    if (ok && (allowed & SERVE_F_TEXT) && (allowed & SERVE_F_IDS)) {
        int t = !!(req->given & SERVE_F_TEXT), d = !!(req->given & SERVE_F_IDS);
        if (t == d)
            ok = bad(err, n, t ? "give \"text\" or \"ids\", not both"
                               : "missing \"text\" (or \"ids\"): the input to run");
    } else if (ok && (allowed & SERVE_F_TEXT) && !(req->given & SERVE_F_TEXT)) {
        ok = bad(err, n, "missing \"text\"");
    }
    if (ok && (allowed & SERVE_F_PROMPT) && !req->prompt)
        ok = bad(err, n, "missing \"prompt\": the text whose continuation the edit changes "
                 "(\"Mira lives in\")");
    else if (ok && (allowed & SERVE_F_PROMPT) && !req->subject)
        ok = bad(err, n, "missing \"subject\": the words of the prompt the edit reads its key at");
    else if (ok && (allowed & SERVE_F_PROMPT) && !req->target)
        ok = bad(err, n, "missing \"target\": the new object");
    else if (ok && (allowed & SERVE_F_PROMPT) && !(req->given & SERVE_F_LAYER))
        ok = bad(err, n, "missing \"layer\": the layer whose down_proj changes");
    else if (ok && (allowed & SERVE_F_SUBJECT) && !req->subject)
        ok = bad(err, n, "missing \"subject\": the words of the text to corrupt");
done:
    ffn_json_free(doc);
    if (!ok) serve_req_free(req);
    return ok;
}

void serve_req_free(serve_req *req) {
    if (!req) return;
    free(req->text);
    free(req->ids);
    free(req->subject);
    free(req->target);
    free(req->prompt);
    free(req->object);
    req->text = NULL;
    req->ids = NULL;
    req->subject = req->target = req->prompt = req->object = NULL;
}
