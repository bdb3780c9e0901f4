/* ffn/json.h -- the library's strict JSON reader (RFC 8259), the one that
 * reads config.json files and safetensors headers, for tools and users.
 *
 * A document is parsed into a read-only tree owned by the ffn_json handle;
 * values are borrowed pointers into it, valid until ffn_json_free.  Strict:
 * no comments, no trailing commas, no NaN/Infinity literals, no duplicate
 * keys, valid UTF-8 only, nesting depth <= 128.  A parse error is
 * FFN_ERR_FORMAT with a message naming `what` (e.g. the file), the byte
 * offset and what was expected.
 *
 *     ffn_json *doc;
 *     if (ffn_json_parse_file("compare.json", &doc) != FFN_OK) fail(ffn_last_error());
 *     const ffn_json_value *vs = ffn_json_get(ffn_json_root(doc), "variants");
 *     for (size_t i = 0; i < ffn_json_length(vs); i++)
 *         printf("%s\n", ffn_json_string(ffn_json_get(ffn_json_at(vs, i), "variant")));
 *     ffn_json_free(doc);
 *
 * Every accessor accepts NULL and a value of the wrong type, and then
 * returns the "absent" answer (NULL, 0, NaN), so lookups chain safely. */
#ifndef FFN_PUBLIC_JSON_H
#define FFN_PUBLIC_JSON_H
#pragma GCC visibility push(default)

#include "ffn/core.h"

#include <stddef.h>
#include <stdint.h>

typedef struct ffn_json ffn_json;             /* a parsed document */
typedef struct ffn_json_value ffn_json_value; /* a value inside it */

typedef enum ffn_json_type {
    FFN_JSON_NULL = 0,
    FFN_JSON_FALSE,
    FFN_JSON_TRUE,
    FFN_JSON_NUMBER,
    FFN_JSON_STRING,
    FFN_JSON_ARRAY,
    FFN_JSON_OBJECT
} ffn_json_type;

/* Parse len bytes holding one value (surrounding whitespace allowed). */
ffn_status ffn_json_parse(const char *text, size_t len, const char *what, ffn_json **out);
/* Read and parse a whole file (at most 64 MiB); errors name the path. */
ffn_status ffn_json_parse_file(const char *path, ffn_json **out);
void ffn_json_free(ffn_json *doc); /* NULL is a no-op */

const ffn_json_value *ffn_json_root(const ffn_json *doc);
/* FFN_JSON_NULL for NULL */
ffn_json_type ffn_json_type_of(const ffn_json_value *v);
/* Object member by key, NULL when absent or v is not an object. */
const ffn_json_value *ffn_json_get(const ffn_json_value *obj, const char *key);
/* Items of an array or object, bytes of a string, else 0. */
size_t ffn_json_length(const ffn_json_value *v);
/* Element i of an array, or the value of member i of an object (file order). */
const ffn_json_value *ffn_json_at(const ffn_json_value *v, size_t i);
/* Key of member i of an object (file order), else NULL. */
const char *ffn_json_key_at(const ffn_json_value *obj, size_t i);
/* A number's value, NaN for anything else (null included). */
double ffn_json_number(const ffn_json_value *v);
/* 1 when v is a number written as an integer that fits int64 (then *out). */
int ffn_json_integer(const ffn_json_value *v, int64_t *out);
/* A string's UTF-8 text (NUL-terminated), else NULL. */
const char *ffn_json_string(const ffn_json_value *v);

#pragma GCC visibility pop
#endif /* FFN_PUBLIC_JSON_H */
