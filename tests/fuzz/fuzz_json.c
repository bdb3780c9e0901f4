/* fuzz_json.c -- libFuzzer target for the strict JSON reader (src/format/json.c).
 *
 * Beyond "does not crash", it checks invariants on every document the
 * parser accepts, and traps when one breaks:
 *   - strings are valid UTF-8, NUL-free, and `length` matches strlen;
 *   - offsets lie inside the input, containers hold non-NULL items and keys;
 *   - keys of an object are distinct;
 *   - an is_integer number's double equals its int64 (up to rounding);
 *   - writing the tree back as JSON (json_write_string for strings) and
 *     parsing that gives an equal tree (a round trip).
 * Built by `make fuzz` (clang, -fsanitize=fuzzer,address,undefined).  With
 * -DFFN_FUZZ_REPLAY it gets a main() that replays files given on the
 * command line (tests/cli/test_fuzz_regress.sh, no libFuzzer needed). */
#include "format/json.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "fuzz_json: invariant failed: %s (line %d)\n", #cond, __LINE__);   \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

static void check_value(const json_value *v, size_t size) {
    REQUIRE(v != NULL);
    REQUIRE(v->offset < size);
    switch (v->type) {
    case JSON_STRING:
        REQUIRE(v->string != NULL);
        REQUIRE(strlen(v->string) == v->length);
        REQUIRE(json_utf8_valid(v->string, v->length));
        break;
    case JSON_NUMBER:
        REQUIRE(isfinite(v->number));
        if (v->is_integer) REQUIRE(v->number == (double)v->integer);
        break;
    case JSON_ARRAY:
        for (size_t i = 0; i < v->length; i++) check_value(v->items[i], size);
        break;
    case JSON_OBJECT:
        for (size_t i = 0; i < v->length; i++) {
            REQUIRE(v->keys[i] != NULL);
            REQUIRE(json_utf8_valid(v->keys[i], strlen(v->keys[i])));
            REQUIRE(json_get(v, v->keys[i]) == v->items[i]); /* keys are distinct */
            check_value(v->items[i], size);
        }
        break;
    default:
        break;
    }
}

static void write_value(FILE *f, const json_value *v) {
    switch (v->type) {
    case JSON_NULL: fputs("null", f); break;
    case JSON_TRUE: fputs("true", f); break;
    case JSON_FALSE: fputs("false", f); break;
    case JSON_NUMBER:
        if (v->is_integer) fprintf(f, "%" PRId64, v->integer);
        else fprintf(f, "%.17g", v->number);
        break;
    case JSON_STRING: json_write_string(f, v->string); break;
    case JSON_ARRAY:
        fputc('[', f);
        for (size_t i = 0; i < v->length; i++) {
            if (i) fputc(',', f);
            write_value(f, v->items[i]);
        }
        fputc(']', f);
        break;
    case JSON_OBJECT:
        fputc('{', f);
        for (size_t i = 0; i < v->length; i++) {
            if (i) fputc(',', f);
            json_write_string(f, v->keys[i]);
            fputc(':', f);
            write_value(f, v->items[i]);
        }
        fputc('}', f);
        break;
    }
}

static void check_equal(const json_value *a, const json_value *b) {
    REQUIRE(a->type == b->type);
    switch (a->type) {
    case JSON_NUMBER:
        /* %.17g round-trips a double exactly; "-0" prints as an integer 0 */
        REQUIRE(a->number == b->number);
        if (a->is_integer) REQUIRE(b->is_integer && a->integer == b->integer);
        break;
    case JSON_STRING:
        REQUIRE(a->length == b->length && !memcmp(a->string, b->string, a->length));
        break;
    case JSON_ARRAY:
    case JSON_OBJECT:
        REQUIRE(a->length == b->length);
        for (size_t i = 0; i < a->length; i++) {
            if (a->type == JSON_OBJECT) REQUIRE(!strcmp(a->keys[i], b->keys[i]));
            check_equal(a->items[i], b->items[i]);
        }
        break;
    default:
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_doc *doc = NULL;
    if (json_parse((const char *)data, size, "fuzz", &doc) != FFN_OK) {
        REQUIRE(doc == NULL);
        REQUIRE(ffn_last_error()[0] != '\0');
        return 0;
    }
    const json_value *root = json_root(doc);
    check_value(root, size);

    /* the typed getters never crash on whatever the root is */
    int64_t i64;
    double f64;
    int b;
    const char *s;
    const char *key = root->type == JSON_OBJECT && root->length ? root->keys[0] : "k";
    (void)json_get_i64(root, key, 1, "fuzz", &i64);
    (void)json_get_f64(root, key, 0, "fuzz", &f64);
    (void)json_get_bool(root, key, 1, "fuzz", &b);
    (void)json_get_str(root, key, 0, "fuzz", &s);

    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    REQUIRE(m != NULL);
    write_value(m, root);
    fclose(m);
    json_doc *again = NULL;
    ffn_status st = json_parse(text, len, "fuzz round trip", &again);
    if (st != FFN_OK) fprintf(stderr, "round trip failed: %s\n", ffn_last_error());
    REQUIRE(st == FFN_OK);
    check_equal(root, json_root(again));
    json_free(again);
    free(text);
    json_free(doc);
    return 0;
}

#include "replay.h"
FFN_FUZZ_REPLAY_MAIN("fuzz_json")
