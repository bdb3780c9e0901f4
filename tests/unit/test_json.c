/* test_json.c -- the strict JSON reader: valid documents and their trees,
 * invalid documents each with its expected message and byte offset, the
 * depth limit, duplicate keys, escapes and UTF-8, numbers, typed getters,
 * json_parse_file and json_write_string. */
#include "check.h"
#include "format/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static json_doc *parse_ok(const char *text) {
    json_doc *doc = NULL;
    ffn_status s = json_parse(text, strlen(text), "t.json", &doc);
    CHECK(s == FFN_OK && doc, "parse of %s: %s", text, ffn_last_error());
    return doc;
}

/* Parsing `len` bytes of `text` fails with `status` and a message that
 * contains `fragment`. */
static void expect_fail_n(const char *text, size_t len, ffn_status status, const char *fragment) {
    json_doc *doc = (json_doc *)1;
    int shown = len > 80 ? 80 : (int)len; /* keep failure output readable */
    ffn_status s = json_parse(text, len, "t.json", &doc);
    CHECK(s == status, "status %d (expected %d) for %.*s: %s", s, status, shown, text,
          ffn_last_error());
    CHECK(doc == NULL, "doc NULL after failure");
    CHECK(strstr(ffn_last_error(), fragment) != NULL, "message for %.*s: '%s' lacks '%s'",
          shown, text, ffn_last_error(), fragment);
    CHECK(strncmp(ffn_last_error(), "t.json: ", 8) == 0, "message names the file: %s",
          ffn_last_error());
}
static void expect_fail(const char *text, const char *fragment) {
    expect_fail_n(text, strlen(text), FFN_ERR_FORMAT, fragment);
}

static void test_valid(void) {
    json_doc *doc = parse_ok(" {\"a\": [1, -2, 3.5, true, false, null, \"x\", {}, []], \"b\": {\"c\": \"d\"}} \n");
    const json_value *r = json_root(doc);
    CHECK(r && r->type == JSON_OBJECT && r->length == 2, "root object of 2");
    CHECK(!strcmp(r->keys[0], "a") && !strcmp(r->keys[1], "b"), "keys in file order");
    CHECK(r->offset == 1, "root offset %zu", r->offset);
    const json_value *a = json_get(r, "a");
    CHECK(a && a->type == JSON_ARRAY && a->length == 9, "array of 9");
    if (a && a->length == 9) {
        CHECK(a->items[0]->type == JSON_NUMBER && a->items[0]->is_integer && a->items[0]->integer == 1, "1");
        CHECK(a->items[1]->is_integer && a->items[1]->integer == -2 && a->items[1]->number == -2.0, "-2");
        CHECK(!a->items[2]->is_integer && a->items[2]->number == 3.5, "3.5");
        CHECK(a->items[3]->type == JSON_TRUE && a->items[4]->type == JSON_FALSE &&
              a->items[5]->type == JSON_NULL, "literals");
        CHECK(a->items[6]->type == JSON_STRING && !strcmp(a->items[6]->string, "x") &&
              a->items[6]->length == 1, "string");
        CHECK(a->items[7]->type == JSON_OBJECT && a->items[7]->length == 0, "empty object");
        CHECK(a->items[8]->type == JSON_ARRAY && a->items[8]->length == 0, "empty array");
        CHECK(a->items[0]->offset == 8, "offset of first item %zu", a->items[0]->offset);
    }
    const json_value *b = json_get(r, "b");
    CHECK(json_get(b, "c") && !strcmp(json_get(b, "c")->string, "d"), "nested lookup");
    CHECK(json_get(r, "zz") == NULL && json_get(a, "a") == NULL && json_get(NULL, "a") == NULL,
          "absent lookups");
    json_free(doc);

    /* scalars at the top level are valid JSON (RFC 8259) */
    doc = parse_ok("\"top\"");
    CHECK(json_root(doc)->type == JSON_STRING, "top-level string");
    json_free(doc);
    doc = parse_ok("  42 ");
    CHECK(json_root(doc)->integer == 42, "top-level number");
    json_free(doc);
    json_free(NULL);
}

static void test_invalid(void) {
    expect_fail("", "byte 0: expected a value, found end of input");
    expect_fail("   ", "byte 3: expected a value, found end of input");
    expect_fail("{", "byte 1: expected a string key or '}', found end of input");
    expect_fail("{\"a\" 1}", "byte 5: expected ':' after object key, found '1'");
    expect_fail("{\"a\":1,}", "byte 7: expected a string key, found '}'");
    expect_fail("{\"a\":1 \"b\":2}", "byte 7: expected ',' or '}' in object, found '\"'");
    expect_fail("{a:1}", "byte 1: expected a string key or '}', found 'a'");
    expect_fail("[1,]", "byte 3: expected a value (object, array, string, number, true, false or null), found ']'");
    expect_fail("[1 2]", "byte 3: expected ',' or ']' in array, found '2'");
    expect_fail("[1", "byte 2: expected ',' or ']' in array, found end of input");
    expect_fail("[1] x", "byte 4: expected end of input after the top-level value, found 'x'");
    expect_fail("{} {}", "byte 3: expected end of input after the top-level value, found '{'");
    expect_fail("tru", "byte 3: expected 'true', found end of input");
    expect_fail("nul1", "byte 3: expected 'null', found '1'");
    expect_fail("True", "byte 0: expected a value");
    expect_fail("'a'", "byte 0: expected a value");
    expect_fail("\xEF\xBB\xBF{}", "byte 0: expected a value (object, array, string, number, true, false or null), found byte 0xef");
    expect_fail("[\"abc", "byte 1: unterminated string");
    expect_fail("\"a\\\"", "byte 0: unterminated string");
    expect_fail("/* c */ {}", "byte 0: expected a value");
    expect_fail("{\"a\":1}\x01", "found byte 0x01");
}

static void test_numbers(void) {
    json_doc *doc = parse_ok("[0, -0, 9223372036854775807, -9223372036854775808, 9223372036854775808,"
                             " 1e3, 1.0, 2.5e-3, 1E+2, -1.5e308, 4.9e-324, 1e-400]");
    const json_value *a = json_root(doc);
    if (a && a->length == 12) {
        CHECK(a->items[0]->is_integer && a->items[0]->integer == 0, "0");
        CHECK(a->items[1]->is_integer && a->items[1]->integer == 0 && signbit(a->items[1]->number), "-0");
        CHECK(a->items[2]->is_integer && a->items[2]->integer == INT64_MAX, "INT64_MAX");
        CHECK(a->items[3]->is_integer && a->items[3]->integer == INT64_MIN, "INT64_MIN");
        CHECK(!a->items[4]->is_integer && a->items[4]->number == 9223372036854775808.0,
              "2^63 is not an int64 but keeps its double");
        /* integer typing is by the text: 1e3 and 1.0 are not integers */
        CHECK(!a->items[5]->is_integer && a->items[5]->number == 1000.0, "1e3 not integer-typed");
        CHECK(!a->items[6]->is_integer && a->items[6]->number == 1.0, "1.0 not integer-typed");
        CHECK(a->items[7]->number == 2.5e-3, "2.5e-3");
        CHECK(a->items[8]->number == 100.0, "1E+2");
        CHECK(a->items[9]->number == -1.5e308, "-1.5e308");
        CHECK(a->items[10]->number == 4.9e-324, "subnormal");
        CHECK(a->items[11]->number == 0.0, "underflow to 0");
    } else {
        CHECK(0, "12 numbers");
    }
    json_free(doc);
    expect_fail("01", "byte 0: leading zeros are not allowed");
    expect_fail("[-01]", "byte 1: leading zeros are not allowed");
    expect_fail("-", "byte 1: expected a digit, found end of input");
    expect_fail("-a", "byte 1: expected a digit, found 'a'");
    expect_fail("+1", "byte 0: expected a value");
    expect_fail(".5", "byte 0: expected a value");
    expect_fail("1.", "byte 2: expected a digit after '.', found end of input");
    expect_fail("1.e5", "byte 2: expected a digit after '.', found 'e'");
    expect_fail("1e", "byte 2: expected a digit in the exponent, found end of input");
    expect_fail("1e+", "byte 3: expected a digit in the exponent");
    expect_fail("[1e400]", "byte 1: number out of the range of a double");
    expect_fail("-1e309", "byte 0: number out of the range of a double");
    expect_fail("NaN", "byte 0: expected a value");
    expect_fail("[Infinity]", "byte 1: expected a value");
    expect_fail("0x10", "byte 1: expected end of input");
    /* a long number goes through the heap buffer */
    char big[301];
    memset(big, '1', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    doc = parse_ok(big);
    CHECK(!json_root(doc)->is_integer && json_root(doc)->number > 1e299, "300-digit number");
    json_free(doc);
}

static void test_strings(void) {
    json_doc *doc = parse_ok("[\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\", \"\\u00e9\\u4e2d\\ud83d\\ude00\","
                             " \"\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80\", \"\\u0041\\u00DF\", \"\"]");
    const json_value *a = json_root(doc);
    if (a && a->length == 5) {
        CHECK(!strcmp(a->items[0]->string, "a\"b\\c/d\b\f\n\r\t") && a->items[0]->length == 12,
              "simple escapes");
        CHECK(!strcmp(a->items[1]->string, "\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80") &&
              a->items[1]->length == 9, "\\u escapes and a surrogate pair to UTF-8");
        CHECK(!strcmp(a->items[2]->string, a->items[1]->string), "raw UTF-8 kept");
        CHECK(!strcmp(a->items[3]->string, "A\xc3\x9f"), "upper-case hex");
        CHECK(a->items[4]->length == 0 && a->items[4]->string[0] == '\0', "empty string");
    } else {
        CHECK(0, "5 strings");
    }
    json_free(doc);
    expect_fail("\"a\\x\"", "byte 3: expected an escape character (one of \" \\ / b f n r t u), found 'x'");
    expect_fail("\"\\u12\"", "byte 1: bad \\u escape (expected 4 hex digits)");
    expect_fail("\"\\u12g4\"", "byte 1: bad \\u escape");
    expect_fail("\"\\u0000\"", "byte 1: \\u0000 in string (embedded NUL");
    expect_fail("\"ab\\ud83d\"", "byte 3: unpaired high surrogate");
    expect_fail("\"\\ud83d\\u0041\"", "byte 1: unpaired high surrogate");
    expect_fail("\"\\ude00\"", "byte 1: unpaired low surrogate");
    expect_fail("\"a\tb\"", "byte 2: control character in string");
    expect_fail("\"a\nb\"", "byte 2: control character in string");
    expect_fail_n("\"a\0b\"", 5, FFN_ERR_FORMAT, "byte 2: control character in string");
    expect_fail("\"\xff\"", "byte 1: expected valid UTF-8 in string, found byte 0xff");
    expect_fail("\"\xc0\xaf\"", "byte 1: expected valid UTF-8");          /* overlong '/' */
    expect_fail("\"\xe0\x80\xaf\"", "byte 1: expected valid UTF-8");      /* overlong */
    expect_fail("\"\xed\xa0\x80\"", "byte 1: expected valid UTF-8");      /* encoded surrogate */
    expect_fail("\"\xf4\x90\x80\x80\"", "byte 1: expected valid UTF-8");  /* above U+10FFFF */
    expect_fail("\"x\xc3\"", "byte 2: expected valid UTF-8");             /* truncated */
    expect_fail("\"\x80\"", "byte 1: expected valid UTF-8");              /* lone continuation */
    expect_fail("{\"\xff\":1}", "byte 2: expected valid UTF-8");          /* in a key too */
}

static void test_depth_and_duplicates(void) {
    char buf[2 * 130 + 1];
    for (int depth = 127; depth <= 129; depth++) {
        int n = 0;
        for (int i = 0; i < depth; i++) buf[n++] = '[';
        for (int i = 0; i < depth; i++) buf[n++] = ']';
        json_doc *doc = NULL;
        ffn_status s = json_parse(buf, (size_t)n, "t.json", &doc);
        if (depth <= 128) {
            CHECK(s == FFN_OK, "depth %d accepted: %s", depth, ffn_last_error());
        } else {
            CHECK(s == FFN_ERR_FORMAT && strstr(ffn_last_error(), "byte 128: nesting too deep (expected at most 128"),
                  "depth %d rejected: %s", depth, ffn_last_error());
        }
        json_free(doc);
    }
    /* a deep hostile document does not recurse without bound */
    size_t deep = 1000000;
    char *hostile = malloc(deep);
    memset(hostile, '[', deep);
    expect_fail_n(hostile, deep, FFN_ERR_FORMAT, "nesting too deep");
    free(hostile);

    expect_fail("{\"a\":1,\"b\":2,\"a\":3}", "byte 13: duplicate object key \"a\" (first at byte 1)");
    expect_fail("{\"x\":{\"k\":1,\"k\":1}}", "byte 12: duplicate object key \"k\" (first at byte 6)");
    /* the table path (more than 8 keys), duplicates written differently */
    expect_fail("{\"k0\":0,\"k1\":1,\"k2\":2,\"k3\":3,\"k4\":4,\"k5\":5,\"k6\":6,\"k7\":7,\"k8\":8,\"k\\u0033\":9}",
                "duplicate object key \"k3\" (first at byte");
    /* two repeats: the first in file order is named (k9 repeats before k2) */
    expect_fail("{\"k0\":0,\"k1\":1,\"k2\":2,\"k3\":3,\"k4\":4,\"k5\":5,\"k6\":6,\"k7\":7,\"k8\":8,\"k9\":9,\"k9\":0,\"k2\":1}",
                "byte 71: duplicate object key \"k9\" (first at byte 64)");
    { /* 20000 keys: none repeated parses; one repeat at the end is found */
        size_t cap = 20001 * 16 + 16, at = 0;
        char *big = malloc(cap);
        CHECK(big != NULL, "alloc");
        big[at++] = '{';
        for (int i = 0; i < 20000; i++) at += (size_t)snprintf(big + at, cap - at, "%s\"t%d\":%d", i ? "," : "", i, i);
        big[at++] = '}';
        big[at] = '\0';
        json_doc *d = parse_ok(big);
        CHECK(json_get(json_root(d), "t19999") != NULL, "t19999 found");
        json_free(d);
        at--;
        at += (size_t)snprintf(big + at, cap - at, ",\"t123\":0}");
        expect_fail(big, "duplicate object key \"t123\" (first at byte");
        free(big);
    }
    /* same key in different objects is fine */
    json_doc *doc = parse_ok("[{\"a\":1},{\"a\":2}]");
    json_free(doc);
    /* many distinct keys: n log n duplicate check */
    size_t n = 50000, cap = n * 16 + 16, len = 0;
    char *many = malloc(cap);
    many[len++] = '{';
    for (size_t i = 0; i < n; i++) len += (size_t)snprintf(many + len, cap - len, "%s\"k%zu\":%zu", i ? "," : "", i, i);
    many[len++] = '}';
    doc = NULL;
    CHECK(json_parse(many, len, "t.json", &doc) == FFN_OK && json_root(doc)->length == n, "50000 keys: %s",
          ffn_last_error());
    CHECK(json_get(json_root(doc), "k49999") && json_get(json_root(doc), "k49999")->integer == 49999, "last key");
    json_free(doc);
    free(many);
}

static void test_budget_and_utf8(void) {
    size_t n = 10000, len = 0;
    char *text = malloc(2 * n + 2);
    text[len++] = '[';
    for (size_t i = 0; i < n; i++) {
        text[len++] = '0';
        text[len++] = i + 1 < n ? ',' : ']';
    }
    json_doc *doc = NULL;
    CHECK(json_parse_bounded(text, len, "t.json", 100000, &doc) == FFN_ERR_FORMAT && doc == NULL &&
          strstr(ffn_last_error(), "t.json: byte ") && strstr(ffn_last_error(), "too many values for a document of this size"),
          "tree budget: %s", ffn_last_error());
    CHECK(json_parse_bounded(text, len, "t.json", 36 * len + 64, &doc) == FFN_OK && json_root(doc)->length == n,
          "36 bytes per input byte suffice: %s", ffn_last_error());
    json_free(doc);
    free(text);
    CHECK(json_utf8_valid("a\xc3\xa9\xf0\x9f\x98\x80", 7), "valid UTF-8");
    CHECK(!json_utf8_valid("a\xc3", 2) && !json_utf8_valid("\xed\xa0\x80", 3) && !json_utf8_valid("a\0b", 3),
          "invalid UTF-8, NUL");
}

static void test_getters(void) {
    json_doc *doc = parse_ok("{\"hidden_size\": 1024, \"eps\": 1e-5, \"bias\": true, \"act\": \"silu\","
                             " \"rope_scaling\": null, \"ratio\": 2.5, \"big\": 4e3, \"s\": 1}");
    const json_value *r = json_root(doc);
    int64_t i = -1;
    double d = -1;
    int b = -1;
    const char *s = NULL;
    CHECK(json_get_i64(r, "hidden_size", 1, "c.json", &i) == FFN_OK && i == 1024, "i64");
    CHECK(json_get_f64(r, "eps", 1, "c.json", &d) == FFN_OK && d == 1e-5, "f64");
    CHECK(json_get_f64(r, "hidden_size", 1, "c.json", &d) == FFN_OK && d == 1024.0, "f64 from integer");
    CHECK(json_get_bool(r, "bias", 1, "c.json", &b) == FFN_OK && b == 1, "bool");
    CHECK(json_get_str(r, "act", 1, "c.json", &s) == FFN_OK && !strcmp(s, "silu"), "str");
    i = 7;
    CHECK(json_get_i64(r, "absent", 0, "c.json", &i) == FFN_OK && i == 7, "optional absent unchanged");
    CHECK(json_get_i64(r, "rope_scaling", 0, "c.json", &i) == FFN_OK && i == 7, "null counts as absent");
    CHECK(json_get_i64(r, "absent", 1, "c.json", &i) == FFN_ERR_MISSING &&
          strstr(ffn_last_error(), "c.json: absent: required field is missing"), "required absent: %s",
          ffn_last_error());
    CHECK(json_get_i64(r, "ratio", 1, "c.json", &i) == FFN_ERR_CONFIG &&
          strstr(ffn_last_error(), "c.json: ratio: expected an integer") && strstr(ffn_last_error(), "2.5"),
          "non-integer: %s", ffn_last_error());
    CHECK(json_get_i64(r, "big", 1, "c.json", &i) == FFN_ERR_CONFIG, "4e3 is not an integer");
    CHECK(json_get_i64(r, "act", 1, "c.json", &i) == FFN_ERR_CONFIG &&
          strstr(ffn_last_error(), "c.json: act: expected an integer, found a string"), "%s", ffn_last_error());
    CHECK(json_get_f64(r, "act", 1, "c.json", &d) == FFN_ERR_CONFIG &&
          strstr(ffn_last_error(), "expected a number, found a string"), "%s", ffn_last_error());
    CHECK(json_get_bool(r, "s", 1, "c.json", &b) == FFN_ERR_CONFIG &&
          strstr(ffn_last_error(), "c.json: s: expected true or false, found a number"), "%s", ffn_last_error());
    CHECK(json_get_str(r, "bias", 1, "c.json", &s) == FFN_ERR_CONFIG &&
          strstr(ffn_last_error(), "c.json: bias: expected a string, found true"), "%s", ffn_last_error());
    CHECK(json_get_i64(json_get(r, "act"), "x", 0, "c.json", &i) == FFN_ERR_CONFIG &&
          strstr(ffn_last_error(), "expected an object"), "not an object: %s", ffn_last_error());
    json_free(doc);
}

static void test_files_and_writer(void) {
    char dir[] = "/tmp/ffn_test_json_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[256];
    snprintf(path, sizeof path, "%s/w.json", dir);
    const char *nasty = "q\"b\\s/\n\r\t\b\f\x01\x1f\x7f \xc3\xa9 end";
    FILE *f = fopen(path, "w");
    fputs("{\"k\": ", f);
    json_write_string(f, nasty);
    fputs("}", f);
    fclose(f);
    json_doc *doc = NULL;
    CHECK(json_parse_file(path, &doc) == FFN_OK, "parse written file: %s", ffn_last_error());
    const char *s = NULL;
    CHECK(json_get_str(json_root(doc), "k", 1, path, &s) == FFN_OK && s && !strcmp(s, nasty),
          "json_write_string round trip");
    json_free(doc);

    f = fopen(path, "w");
    fputs("{\"a\": [1, 2,]}", f);
    fclose(f);
    CHECK(json_parse_file(path, &doc) == FFN_ERR_FORMAT && strstr(ffn_last_error(), path) &&
          strstr(ffn_last_error(), "byte 12"), "file error names path and offset: %s", ffn_last_error());

    char missing[300];
    snprintf(missing, sizeof missing, "%s/none.json", dir);
    CHECK(json_parse_file(missing, &doc) == FFN_ERR_IO && strstr(ffn_last_error(), "none.json") &&
          strstr(ffn_last_error(), "No such file"), "missing file: %s", ffn_last_error());
    CHECK(json_parse_file(dir, &doc) == FFN_ERR_IO, "a directory is not a JSON file");

    /* the 64 MiB cap: a sparse file of 64 MiB + 1 byte */
    f = fopen(path, "w");
    CHECK(f && ftruncate(fileno(f), ((off_t)64 << 20) + 1) == 0, "truncate");
    fclose(f);
    CHECK(json_parse_file(path, &doc) == FFN_ERR_FORMAT && strstr(ffn_last_error(), "too large"),
          "64 MiB cap: %s", ffn_last_error());
    unlink(path);
    rmdir(dir);
}

int main(void) {
    test_valid();
    test_invalid();
    test_numbers();
    test_strings();
    test_depth_and_duplicates();
    test_budget_and_utf8();
    test_getters();
    test_files_and_writer();
    return check_done("test_json");
}
