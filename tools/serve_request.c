/* serve_request.c -- an API request body (JSON, read by the project's
 * strict reader) into a serve_req, every field checked for type and range:
 *   "text"     a string of at most SERVE_MAX_TEXT_BYTES bytes
 *   "ids"      an array of integers in [0, 2^31) (at most SERVE_MAX_TOKENIZE)
 *   "edits"    an array of at most SERVE_MAX_EDITS objects
 *              {"layer": L, "neuron": i, "scale": s, "position"?: p}
 *              (s a finite number in [-100, 100]; p >= -1, -1 = every position)
 *   "position" an integer >= -1 (-1 = the last token)
 *   "layer"    an integer >= -1 (-1 = every layer)
 *   "k"        an integer in [1, SERVE_MAX_K]
 *   "subject", "target"  non-empty strings of at most SERVE_MAX_WORD_BYTES bytes
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
              {"subject", SERVE_F_SUBJECT},   {"target", SERVE_F_TARGET}};
#define N_FIELDS (sizeof fields / sizeof fields[0])

static void allowed_names(unsigned allowed, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < N_FIELDS && len < n; i++)
        if (allowed & fields[i].bit)
            len += (size_t)snprintf(buf + len, n - len, "%s\"%s\"", len ? ", " : "", fields[i].name);
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
        if (strcmp(key, "layer") && strcmp(key, "neuron") && strcmp(key, "scale") &&
            strcmp(key, "position"))
            return bad(err, n, "\"edits\"[%zu]: unknown field \"%.64s\" (accepted: \"layer\", "
                       "\"neuron\", \"scale\", \"position\")", i, key);
    }
    out->position = -1;
    snprintf(what, sizeof what, "edits[%zu].layer", i);
    if (!get_int(ffn_json_get(e, "layer"), what, 0, INT32_MAX, &out->layer, err, n)) return 0;
    snprintf(what, sizeof what, "edits[%zu].neuron", i);
    if (!get_int(ffn_json_get(e, "neuron"), what, 0, INT32_MAX, &out->neuron, err, n)) return 0;
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
        for (size_t f = 0; f < N_FIELDS; f++)
            if (!strcmp(key, fields[f].name)) bit = fields[f].bit;
        if (!(bit & allowed)) {
            char names[128];
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
        } else if (bit == SERVE_F_SUBJECT || bit == SERVE_F_TARGET) {
            char **dst = bit == SERVE_F_SUBJECT ? &req->subject : &req->target;
            const char *s = ffn_json_string(v);
            if (!s)
                ok = bad(err, n, "\"%s\": expected a string, got %s", key, type_word(v));
            else if (!ffn_json_length(v) || ffn_json_length(v) > SERVE_MAX_WORD_BYTES)
                ok = bad(err, n, "\"%s\": %zu bytes, expected 1 to %d", key, ffn_json_length(v),
                         SERVE_MAX_WORD_BYTES);
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
    if (ok && (allowed & SERVE_F_SUBJECT) && !req->subject)
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
    req->text = NULL;
    req->ids = NULL;
    req->subject = req->target = NULL;
}
