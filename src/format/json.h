/* json.h -- a small, strict JSON reader (RFC 8259) for config.json files,
 * safetensors headers and index files, and a tiny writer helper.
 * Internal; not installed.
 *
 * Parsing builds a read-only tree in one arena owned by the json_doc.
 * Limits guard against hostile input: nesting depth <= 128, input size is
 * the caller's (no copies beyond the arena, whose size is bounded by a
 * small multiple of the input length).  Numbers keep both a double and,
 * when the text is an integer that fits, an exact int64. */
#ifndef FFN_JSON_H
#define FFN_JSON_H

#include "base/common.h"

#include <stdio.h>

typedef enum json_type {
    JSON_NULL, JSON_FALSE, JSON_TRUE, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT
} json_type;

typedef struct json_value json_value;
struct json_value {
    json_type type;
    int is_integer;      /* the number was written as an integer that fits int64 */
    double number;       /* JSON_NUMBER */
    int64_t integer;     /* JSON_NUMBER: exact value when is_integer */
    const char *string;  /* JSON_STRING: NUL-terminated UTF-8 (embedded NULs rejected) */
    size_t length;       /* JSON_STRING: bytes; ARRAY/OBJECT: number of items */
    json_value **items;  /* ARRAY: the elements; OBJECT: the values */
    const char **keys;   /* OBJECT: the keys, in file order */
    size_t offset;       /* byte offset in the input where this value starts */
};

typedef struct json_doc json_doc;

/* Parse `len` bytes.  On failure returns FFN_ERR_FORMAT with a message
 * naming the byte offset and what was expected; `what` (e.g. a file name)
 * prefixes the message. */
ffn_status json_parse(const char *text, size_t len, const char *what, json_doc **out);
ffn_status json_parse_file(const char *path, json_doc **out); /* reads the whole file, <= 64 MiB */
/* json_parse with the parse tree capped at max_tree_bytes (json_parse: no
 * cap beyond the structural bound of ~36 bytes per input byte).  Exceeding
 * it is FFN_ERR_FORMAT ("too many values for a document of this size"). */
ffn_status json_parse_bounded(const char *text, size_t len, const char *what, size_t max_tree_bytes,
                              json_doc **out);
const json_value *json_root(const json_doc *doc);
void json_free(json_doc *doc);

/* Object lookup (duplicate keys are rejected at parse time, so a key names
 * at most one value).  Linear in the number of keys.  NULL when absent or
 * when obj is not an object. */
const json_value *json_get(const json_value *obj, const char *key);

/* Typed getters with errors that name `what` (a file) and the key:
 * absent keys leave *out unchanged and return FFN_OK when `required` is 0,
 * FFN_ERR_MISSING otherwise; a wrong type is FFN_ERR_CONFIG.  A JSON null
 * counts as absent (Hugging Face configs write "rope_scaling": null).
 * json_get_i64 wants an integer as written: "4096" yes, "4096.0" and "4e3"
 * no (see is_integer).  obj not an object is FFN_ERR_CONFIG. */
ffn_status json_get_i64(const json_value *obj, const char *key, int required,
                        const char *what, int64_t *out);
ffn_status json_get_f64(const json_value *obj, const char *key, int required,
                        const char *what, double *out);
ffn_status json_get_bool(const json_value *obj, const char *key, int required,
                         const char *what, int *out);
ffn_status json_get_str(const json_value *obj, const char *key, int required,
                        const char *what, const char **out);

/* "a number", "an object", ... for messages. */
const char *json_type_name(json_type type);

/* 1 when s[0..n) is valid UTF-8 (RFC 3629: no overlongs, no surrogates,
 * nothing above U+10FFFF) without NUL bytes, else 0. */
int json_utf8_valid(const char *s, size_t n);

/* Write `s` as a JSON string literal (quotes and escapes) to f. */
void json_write_string(FILE *f, const char *s);

#endif /* FFN_JSON_H */
