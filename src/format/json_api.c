/* json_api.c -- the public face (include/ffn/json.h) of the strict JSON
 * reader in json.c: the handles are the internal types, renamed. */
#include "format/json.h"
#include "ffn/json.h"

#include <math.h>

static const json_value *in(const ffn_json_value *v) { return (const json_value *)v; }
static const ffn_json_value *out(const json_value *v) { return (const ffn_json_value *)v; }

ffn_status ffn_json_parse(const char *text, size_t len, const char *what, ffn_json **doc) {
    if (!doc) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_json_parse: out is NULL");
    return json_parse(text, len, what, (json_doc **)doc);
}

ffn_status ffn_json_parse_file(const char *path, ffn_json **doc) {
    if (!doc) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_json_parse_file: out is NULL");
    if (!path) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_json_parse_file: path is NULL");
    return json_parse_file(path, (json_doc **)doc);
}

void ffn_json_free(ffn_json *doc) { json_free((json_doc *)doc); }

const ffn_json_value *ffn_json_root(const ffn_json *doc) {
    return doc ? out(json_root((const json_doc *)doc)) : NULL;
}

ffn_json_type ffn_json_type_of(const ffn_json_value *v) {
    if (!v) return FFN_JSON_NULL;
    switch (in(v)->type) {
    case JSON_NULL: return FFN_JSON_NULL;
    case JSON_FALSE: return FFN_JSON_FALSE;
    case JSON_TRUE: return FFN_JSON_TRUE;
    case JSON_NUMBER: return FFN_JSON_NUMBER;
    case JSON_STRING: return FFN_JSON_STRING;
    case JSON_ARRAY: return FFN_JSON_ARRAY;
    case JSON_OBJECT: return FFN_JSON_OBJECT;
    }
    return FFN_JSON_NULL;
}

const ffn_json_value *ffn_json_get(const ffn_json_value *obj, const char *key) {
    if (!obj || !key) return NULL;
    return out(json_get(in(obj), key));
}

size_t ffn_json_length(const ffn_json_value *v) {
    if (!v) return 0;
    json_type t = in(v)->type;
    return t == JSON_ARRAY || t == JSON_OBJECT || t == JSON_STRING ? in(v)->length : 0;
}

const ffn_json_value *ffn_json_at(const ffn_json_value *v, size_t i) {
    if (!v || (in(v)->type != JSON_ARRAY && in(v)->type != JSON_OBJECT) || i >= in(v)->length)
        return NULL;
    return out(in(v)->items[i]);
}

const char *ffn_json_key_at(const ffn_json_value *obj, size_t i) {
    if (!obj || in(obj)->type != JSON_OBJECT || i >= in(obj)->length) return NULL;
    return in(obj)->keys[i];
}

double ffn_json_number(const ffn_json_value *v) {
    return v && in(v)->type == JSON_NUMBER ? in(v)->number : NAN;
}

int ffn_json_integer(const ffn_json_value *v, int64_t *value) {
    if (!v || in(v)->type != JSON_NUMBER || !in(v)->is_integer) return 0;
    if (value) *value = in(v)->integer;
    return 1;
}

const char *ffn_json_string(const ffn_json_value *v) {
    return v && in(v)->type == JSON_STRING ? in(v)->string : NULL;
}
