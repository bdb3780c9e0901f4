/* json.c -- a strict RFC 8259 JSON reader into an arena tree, typed getters,
 * and a string writer.  See json.h for the contract.
 *
 * Strictness (input comes from strangers):
 *   - nesting deeper than JSON_MAX_DEPTH (128) containers is rejected;
 *   - duplicate keys in one object are rejected (checked by sorting, so a
 *     hostile object with a million keys costs n log n, not n^2);
 *   - strings must be valid UTF-8 (no overlongs, no UTF-8-encoded
 *     surrogates, nothing above U+10FFFF), control characters must be
 *     escaped, \u escapes are decoded (surrogate pairs joined), lone
 *     surrogates and \u0000 are rejected (strings are NUL-terminated);
 *   - numbers follow the RFC grammar exactly (no leading zeros, no '+', no
 *     bare '.', no NaN/Infinity) and must fit a finite double;
 *   - nothing but whitespace may follow the top-level value; no BOM.
 * Errors are FFN_ERR_FORMAT with "what: byte N: expected X, found Y".
 *
 * Memory: every string is decoded into the arena at most as long as its
 * source text, every value costs one json_value (64 bytes) plus one item
 * pointer, and a value with its separator takes at least 2 input bytes, so
 * the arena is bounded by about 36 bytes per input byte in the worst case
 * ("[0,0,0,...]") and 5-15x for typical documents.  json_parse_bounded
 * lets a caller with a known document shape (a safetensors header) cap it
 * lower.  Recursion depth is bounded by the nesting limit. */
#include "format/json.h"
#include "base/open.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#define JSON_MAX_DEPTH 128
#define JSON_MAX_FILE ((size_t)64 << 20)

/* ---- arena ------------------------------------------------------------ */

typedef struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    _Alignas(8) char data[];
} arena_block;

struct json_doc {
    arena_block *blocks;
    json_value *root;
    size_t used;        /* bytes handed out by the arena */
    size_t budget;      /* the most `used` may reach (SIZE_MAX: no limit) */
    int over_budget;    /* an allocation failed for the budget, not malloc */
};

static void *arena_alloc(json_doc *doc, size_t bytes) {
    bytes = (bytes + 7) & ~(size_t)7;
    if (bytes > doc->budget - doc->used) {
        doc->over_budget = 1;
        return NULL;
    }
    doc->used += bytes;
    arena_block *b = doc->blocks;
    if (!b || b->cap - b->used < bytes) {
        size_t cap = bytes > ((size_t)64 << 10) ? bytes : ((size_t)64 << 10);
        b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->cap = cap;
        b->used = 0;
        b->next = doc->blocks;
        doc->blocks = b;
    }
    void *p = b->data + b->used;
    b->used += bytes;
    return p;
}

void json_free(json_doc *doc) {
    if (!doc) return;
    arena_block *b = doc->blocks;
    while (b) {
        arena_block *next = b->next;
        free(b);
        b = next;
    }
    free(doc);
}

const json_value *json_root(const json_doc *doc) { return doc ? doc->root : NULL; }

/* ---- parser state ----------------------------------------------------- */

typedef struct key_entry {
    const char *key;
    size_t offset;
} key_entry;

typedef struct parser {
    const unsigned char *text;
    size_t len, pos;
    const char *what;
    json_doc *doc;
    ffn_status status; /* first error; FFN_OK while parsing goes well */
    /* Transient stacks: the items (and keys) of every open container, so a
     * container's children are copied into the arena once, when it closes. */
    json_value **items;
    size_t n_items, cap_items;
    key_entry *keys;
    size_t n_keys, cap_keys;
} parser;

/* Describe the byte at `pos` for "found ..." in messages. */
static void describe_at(const parser *ps, size_t pos, char *buf, size_t size) {
    if (pos >= ps->len) {
        snprintf(buf, size, "end of input");
        return;
    }
    unsigned c = ps->text[pos];
    if (c >= 0x21 && c < 0x7f)
        snprintf(buf, size, "'%c'", (char)c);
    else if (c == ' ')
        snprintf(buf, size, "a space");
    else
        snprintf(buf, size, "byte 0x%02x", c);
}

/* Record "what: byte N: expected X, found <byte at N>". */
static ffn_status fail_expected(parser *ps, size_t pos, const char *expected) {
    char found[32];
    describe_at(ps, pos, found, sizeof found);
    ps->status = ffn_error(FFN_ERR_FORMAT, "%s: byte %zu: expected %s, found %s", ps->what, pos,
                           expected, found);
    return ps->status;
}

/* Record "what: byte N: <message>". */
static ffn_status fail_msg(parser *ps, size_t pos, const char *msg) {
    ps->status = ffn_error(FFN_ERR_FORMAT, "%s: byte %zu: %s", ps->what, pos, msg);
    return ps->status;
}

static ffn_status fail_nomem(parser *ps) {
    if (ps->doc->over_budget)
        ps->status = ffn_error(FFN_ERR_FORMAT,
                               "%s: byte %zu: too many values for a document of this size (expected its parse "
                               "tree to fit in %zu bytes)",
                               ps->what, ps->pos, ps->doc->budget);
    else
        ps->status = ffn_error(FFN_ERR_NOMEM, "%s: out of memory while parsing JSON", ps->what);
    return ps->status;
}

static void skip_ws(parser *ps) {
    while (ps->pos < ps->len) {
        unsigned char c = ps->text[ps->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        ps->pos++;
    }
}

/* Whether the next byte is c; eat() also consumes it when it is. */
static int at(const parser *ps, unsigned char c) { return ps->pos < ps->len && ps->text[ps->pos] == c; }
static int eat(parser *ps, unsigned char c) {
    if (!at(ps, c)) return 0;
    ps->pos++;
    return 1;
}

static json_value *new_value(parser *ps, json_type type, size_t offset) {
    json_value *v = arena_alloc(ps->doc, sizeof *v);
    if (!v) {
        fail_nomem(ps);
        return NULL;
    }
    memset(v, 0, sizeof *v);
    v->type = type;
    v->offset = offset;
    return v;
}

static int push_item(parser *ps, json_value *v) {
    if (ps->n_items == ps->cap_items) {
        size_t cap = ps->cap_items ? 2 * ps->cap_items : 64;
        json_value **items = realloc(ps->items, cap * sizeof *items);
        if (!items) return fail_nomem(ps), 0;
        ps->items = items;
        ps->cap_items = cap;
    }
    ps->items[ps->n_items++] = v;
    return 1;
}

static int push_key(parser *ps, const char *key, size_t offset) {
    if (ps->n_keys == ps->cap_keys) {
        size_t cap = ps->cap_keys ? 2 * ps->cap_keys : 64;
        key_entry *keys = realloc(ps->keys, cap * sizeof *keys);
        if (!keys) return fail_nomem(ps), 0;
        ps->keys = keys;
        ps->cap_keys = cap;
    }
    ps->keys[ps->n_keys].key = key;
    ps->keys[ps->n_keys].offset = offset;
    ps->n_keys++;
    return 1;
}

static json_value *parse_value(parser *ps, int depth);

/* ---- strings ---------------------------------------------------------- */

static int hex4(const unsigned char *s, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = s[i], d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return 0;
        v = v * 16 + d;
    }
    *out = v;
    return 1;
}

static size_t put_utf8(char *dst, unsigned cp) {
    if (cp < 0x80) {
        dst[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        dst[0] = (char)(0xC0 | (cp >> 6));
        dst[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        dst[0] = (char)(0xE0 | (cp >> 12));
        dst[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        dst[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    dst[0] = (char)(0xF0 | (cp >> 18));
    dst[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    dst[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    dst[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the valid UTF-8 sequence starting at s[0] (a byte >= 0x80),
 * given `avail` bytes; 0 when invalid (RFC 3629 table). */
static size_t utf8_seq_len(const unsigned char *s, size_t avail) {
    unsigned c = s[0];
    size_t n;
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c == 0xE0) n = 3, lo = 0xA0;
    else if (c >= 0xE1 && c <= 0xEC) n = 3;
    else if (c == 0xED) n = 3, hi = 0x9F; /* excludes encoded surrogates */
    else if (c >= 0xEE && c <= 0xEF) n = 3;
    else if (c == 0xF0) n = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) n = 4;
    else if (c == 0xF4) n = 4, hi = 0x8F; /* nothing above U+10FFFF */
    else return 0;
    if (avail < n) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return n;
}

/* Parse a string starting at the opening quote; the decoded UTF-8 goes into
 * the arena (NUL-terminated).  Returns NULL on error. */
static const char *parse_string(parser *ps, size_t *out_len) {
    size_t start = ps->pos; /* the opening quote */
    size_t i = start + 1;
    /* Find the closing quote first: the decoded text is never longer than
     * the source, so one arena allocation of the source span suffices. */
    while (i < ps->len && ps->text[i] != '"') i += (ps->text[i] == '\\') ? 2 : 1;
    if (i >= ps->len) {
        fail_msg(ps, start, "unterminated string (expected a closing '\"' before end of input)");
        return NULL;
    }
    size_t end = i; /* the closing quote */
    char *dst = arena_alloc(ps->doc, end - start);
    if (!dst) {
        fail_nomem(ps);
        return NULL;
    }
    size_t n = 0;
    i = start + 1;
    while (i < end) {
        unsigned c = ps->text[i];
        if (c < 0x20) {
            fail_msg(ps, i, "control character in string (expected it escaped, e.g. \\n or \\u0001)");
            return NULL;
        }
        if (c >= 0x80) {
            size_t k = utf8_seq_len(ps->text + i, end - i);
            if (!k) {
                fail_expected(ps, i, "valid UTF-8 in string");
                return NULL;
            }
            memcpy(dst + n, ps->text + i, k);
            n += k;
            i += k;
            continue;
        }
        if (c != '\\') {
            dst[n++] = (char)c;
            i++;
            continue;
        }
        /* an escape: the scan above guarantees i + 1 < end + 1 */
        unsigned e = ps->text[i + 1];
        switch (e) {
        case '"': dst[n++] = '"'; i += 2; continue;
        case '\\': dst[n++] = '\\'; i += 2; continue;
        case '/': dst[n++] = '/'; i += 2; continue;
        case 'b': dst[n++] = '\b'; i += 2; continue;
        case 'f': dst[n++] = '\f'; i += 2; continue;
        case 'n': dst[n++] = '\n'; i += 2; continue;
        case 'r': dst[n++] = '\r'; i += 2; continue;
        case 't': dst[n++] = '\t'; i += 2; continue;
        case 'u': break;
        default:
            fail_expected(ps, i + 1, "an escape character (one of \" \\ / b f n r t u)");
            return NULL;
        }
        unsigned cp;
        if (end - i < 6 || !hex4(ps->text + i + 2, &cp)) {
            fail_msg(ps, i, "bad \\u escape (expected 4 hex digits)");
            return NULL;
        }
        if (cp == 0) {
            fail_msg(ps, i, "\\u0000 in string (embedded NUL characters are not supported)");
            return NULL;
        }
        if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail_msg(ps, i, "unpaired low surrogate \\u escape (expected a high surrogate first)");
            return NULL;
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            unsigned lo;
            if (end - i < 12 || ps->text[i + 6] != '\\' || ps->text[i + 7] != 'u' ||
                !hex4(ps->text + i + 8, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
                fail_msg(ps, i, "unpaired high surrogate \\u escape (expected \\uDC00-\\uDFFF next)");
                return NULL;
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            i += 6;
        }
        n += put_utf8(dst + n, cp);
        i += 6;
    }
    dst[n] = '\0';
    ps->pos = end + 1;
    *out_len = n;
    return dst;
}

/* ---- numbers ---------------------------------------------------------- */

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static void make_c_locale(void) { c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0); }

static int is_digit(unsigned c) { return c >= '0' && c <= '9'; }

static json_value *parse_number(parser *ps) {
    size_t start = ps->pos, i = start;
    const unsigned char *t = ps->text;
    int integral = 1;
    if (t[i] == '-') i++;
    if (i >= ps->len || !is_digit(t[i])) {
        fail_expected(ps, i, "a digit");
        return NULL;
    }
    if (t[i] == '0') {
        i++;
        if (i < ps->len && is_digit(t[i])) {
            fail_msg(ps, start, "leading zeros are not allowed in numbers");
            return NULL;
        }
    } else {
        while (i < ps->len && is_digit(t[i])) i++;
    }
    if (i < ps->len && t[i] == '.') {
        integral = 0;
        i++;
        if (i >= ps->len || !is_digit(t[i])) {
            fail_expected(ps, i, "a digit after '.'");
            return NULL;
        }
        while (i < ps->len && is_digit(t[i])) i++;
    }
    if (i < ps->len && (t[i] == 'e' || t[i] == 'E')) {
        integral = 0;
        i++;
        if (i < ps->len && (t[i] == '+' || t[i] == '-')) i++;
        if (i >= ps->len || !is_digit(t[i])) {
            fail_expected(ps, i, "a digit in the exponent");
            return NULL;
        }
        while (i < ps->len && is_digit(t[i])) i++;
    }
    json_value *v = new_value(ps, JSON_NUMBER, start);
    if (!v) return NULL;

    /* strtod wants a NUL-terminated string in the "C" locale (the caller's
     * locale might use ',' as the decimal point). */
    size_t n = i - start;
    char small[128], *buf = small;
    if (n + 1 > sizeof small) {
        buf = malloc(n + 1);
        if (!buf) return fail_nomem(ps), NULL;
    }
    memcpy(buf, t + start, n);
    buf[n] = '\0';
    pthread_once(&c_locale_once, make_c_locale);
    double d = c_locale ? strtod_l(buf, NULL, c_locale) : strtod(buf, NULL);
    if (buf != small) free(buf);
    if (!isfinite(d)) {
        fail_msg(ps, start, "number out of the range of a double");
        return NULL;
    }
    v->number = d;

    /* Integer typing is by the text, not the value: only a number written
     * without fraction and exponent is an integer.  So "1e3" and "1.0" are
     * numbers with is_integer == 0 even though their values are integral;
     * a getter wanting an integer rejects them.  Integers beyond int64 keep
     * only their (rounded) double. */
    if (integral) {
        size_t k = start;
        int neg = t[k] == '-';
        if (neg) k++;
        int64_t acc = 0; /* accumulated negatively so INT64_MIN fits */
        int overflow = 0;
        for (; k < i && !overflow; k++)
            overflow = ffn_mul_i64(acc, 10, &acc) || __builtin_sub_overflow(acc, (int64_t)(t[k] - '0'), &acc);
        if (!overflow && !neg) {
            overflow = acc == INT64_MIN;
            if (!overflow) acc = -acc;
        }
        if (!overflow) {
            v->integer = acc;
            v->is_integer = 1;
        }
    }
    ps->pos = i;
    return v;
}

/* ---- containers ------------------------------------------------------- */

static uint64_t hash_key(const char *k) { /* FNV-1a, mixed */
    uint64_t h = 1469598103934665603ull;
    for (; *k; k++) h = (h ^ (unsigned char)*k) * 1099511628211ull;
    return h ^ (h >> 31);
}

static int duplicate(parser *ps, const key_entry *later, const key_entry *first) {
    ps->status = ffn_error(FFN_ERR_FORMAT, "%s: byte %zu: duplicate object key \"%.200s\" (first at byte %zu)",
                           ps->what, later->offset, later->key, first->offset);
    return 0;
}

/* Reject duplicate keys among keys[0..n) (the first repeat in file order
 * is named).  Large objects (a tokenizer's vocabulary: 10^5 keys) go
 * through an open-addressing table of indices, in time linear in n. */
static int check_duplicates(parser *ps, const key_entry *keys, size_t n) {
    if (n < 2) return 1;
    if (n <= 8) { /* small objects (most of them): compare pairwise */
        for (size_t a = 1; a < n; a++)
            for (size_t b = 0; b < a; b++)
                if (!strcmp(keys[a].key, keys[b].key)) return duplicate(ps, &keys[a], &keys[b]);
        return 1;
    }
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    size_t *slot = malloc(cap * sizeof *slot);
    if (!slot) return fail_nomem(ps), 0;
    memset(slot, 0xff, cap * sizeof *slot); /* SIZE_MAX: empty */
    for (size_t a = 0; a < n; a++) {
        size_t h = (size_t)hash_key(keys[a].key) & (cap - 1);
        for (; slot[h] != SIZE_MAX; h = (h + 1) & (cap - 1))
            if (!strcmp(keys[slot[h]].key, keys[a].key)) {
                int r = duplicate(ps, &keys[a], &keys[slot[h]]);
                free(slot);
                return r;
            }
        slot[h] = a;
    }
    free(slot);
    return 1;
}

/* When container v closes: move the items pushed since `base` into the
 * arena as its children and pop them off the stack. */
static int take_items(parser *ps, json_value *v, size_t base) {
    size_t n = ps->n_items - base;
    v->items = arena_alloc(ps->doc, n * sizeof *v->items);
    if (!v->items) return fail_nomem(ps), 0;
    memcpy(v->items, ps->items + base, n * sizeof *v->items);
    v->length = n;
    ps->n_items = base;
    return 1;
}

/* One array item or member value, kept on the item stack; 0 on failure. */
static int parse_item(parser *ps, int depth) {
    json_value *item = parse_value(ps, depth);
    return item && push_item(ps, item);
}

/* After an item: 1 when a ',' announces another, 0 at the closing bracket,
 * -1 (the failure recorded, naming what was expected) otherwise. */
static int after_item(parser *ps, unsigned char close, const char *expected) {
    skip_ws(ps);
    if (eat(ps, ',')) return 1;
    if (eat(ps, close)) return 0;
    fail_expected(ps, ps->pos, expected);
    return -1;
}

static json_value *parse_array(parser *ps, int depth) {
    json_value *v = new_value(ps, JSON_ARRAY, ps->pos);
    if (!v) return NULL;
    ps->pos++; /* '[' */
    size_t base = ps->n_items;
    skip_ws(ps);
    if (eat(ps, ']')) return v;
    int more;
    do {
        if (!parse_item(ps, depth)) return NULL;
    } while ((more = after_item(ps, ']', "',' or ']' in array")) > 0);
    if (more < 0) return NULL;
    return take_items(ps, v, base) ? v : NULL;
}

static json_value *parse_object(parser *ps, int depth) {
    json_value *v = new_value(ps, JSON_OBJECT, ps->pos);
    if (!v) return NULL;
    ps->pos++; /* '{' */
    size_t base = ps->n_items, key_base = ps->n_keys;
    skip_ws(ps);
    if (eat(ps, '}')) return v;
    int more;
    do {
        skip_ws(ps);
        if (!at(ps, '"')) {
            fail_expected(ps, ps->pos, ps->n_keys == key_base ? "a string key or '}'" : "a string key");
            return NULL;
        }
        size_t key_offset = ps->pos, key_len;
        const char *key = parse_string(ps, &key_len);
        if (!key || !push_key(ps, key, key_offset)) return NULL;
        skip_ws(ps);
        if (!eat(ps, ':')) {
            fail_expected(ps, ps->pos, "':' after object key");
            return NULL;
        }
        if (!parse_item(ps, depth)) return NULL;
    } while ((more = after_item(ps, '}', "',' or '}' in object")) > 0);
    if (more < 0) return NULL;
    size_t n = ps->n_items - base;
    if (!check_duplicates(ps, ps->keys + key_base, n) || !take_items(ps, v, base)) return NULL;
    v->keys = arena_alloc(ps->doc, n * sizeof *v->keys);
    if (!v->keys) return fail_nomem(ps), NULL;
    for (size_t k = 0; k < n; k++) v->keys[k] = ps->keys[key_base + k].key;
    ps->n_keys = key_base;
    return v;
}

/* ---- values ----------------------------------------------------------- */

static json_value *parse_literal(parser *ps, const char *word, json_type type) {
    size_t n = strlen(word);
    if (ps->len - ps->pos < n || memcmp(ps->text + ps->pos, word, n) != 0) {
        char expected[32];
        snprintf(expected, sizeof expected, "'%s'", word);
        /* point at the first byte that differs */
        size_t k = 0;
        while (ps->pos + k < ps->len && k < n && ps->text[ps->pos + k] == (unsigned char)word[k]) k++;
        fail_expected(ps, ps->pos + k, expected);
        return NULL;
    }
    json_value *v = new_value(ps, type, ps->pos);
    if (v) ps->pos += n;
    return v;
}

/* `depth` counts the containers enclosing this value. */
static json_value *parse_value(parser *ps, int depth) {
    skip_ws(ps);
    if (ps->pos >= ps->len) {
        fail_expected(ps, ps->pos, "a value");
        return NULL;
    }
    unsigned c = ps->text[ps->pos];
    if (c == '{' || c == '[') {
        if (depth >= JSON_MAX_DEPTH) {
            ps->status = ffn_error(FFN_ERR_FORMAT,
                                   "%s: byte %zu: nesting too deep (expected at most %d nested "
                                   "arrays/objects)",
                                   ps->what, ps->pos, JSON_MAX_DEPTH);
            return NULL;
        }
        return c == '{' ? parse_object(ps, depth + 1) : parse_array(ps, depth + 1);
    }
    if (c == '"') {
        size_t offset = ps->pos, len;
        const char *s = parse_string(ps, &len);
        if (!s) return NULL;
        json_value *v = new_value(ps, JSON_STRING, offset);
        if (!v) return NULL;
        v->string = s;
        v->length = len;
        return v;
    }
    if (c == '-' || is_digit(c)) return parse_number(ps);
    if (c == 't') return parse_literal(ps, "true", JSON_TRUE);
    if (c == 'f') return parse_literal(ps, "false", JSON_FALSE);
    if (c == 'n') return parse_literal(ps, "null", JSON_NULL);
    fail_expected(ps, ps->pos, "a value (object, array, string, number, true, false or null)");
    return NULL;
}

ffn_status json_parse(const char *text, size_t len, const char *what, json_doc **out) {
    return json_parse_bounded(text, len, what, SIZE_MAX, out);
}

ffn_status json_parse_bounded(const char *text, size_t len, const char *what, size_t max_tree_bytes,
                              json_doc **out) {
    if (!out) return ffn_error(FFN_ERR_INVALID_ARG, "json_parse: out is NULL");
    *out = NULL;
    if (!what) what = "json";
    if (!text && len) return ffn_error(FFN_ERR_INVALID_ARG, "%s: json_parse: text is NULL", what);
    json_doc *doc = calloc(1, sizeof *doc);
    if (!doc) return ffn_error(FFN_ERR_NOMEM, "%s: out of memory", what);
    doc->budget = max_tree_bytes;
    parser ps = {.text = (const unsigned char *)(text ? text : ""), .len = len, .what = what,
                 .doc = doc, .status = FFN_OK};
    json_value *root = parse_value(&ps, 0);
    if (root) {
        skip_ws(&ps);
        if (ps.pos != ps.len) {
            fail_expected(&ps, ps.pos, "end of input after the top-level value");
            root = NULL;
        }
    }
    free(ps.items);
    free(ps.keys);
    if (!root) {
        json_free(doc);
        return ps.status != FFN_OK ? ps.status : ffn_error(FFN_ERR_INTERNAL, "%s: parse failed", what);
    }
    doc->root = root;
    *out = doc;
    return FFN_OK;
}

ffn_status json_parse_file(const char *path, json_doc **out) {
    if (!out) return ffn_error(FFN_ERR_INVALID_ARG, "json_parse_file: out is NULL");
    *out = NULL;
    if (!path) return ffn_error(FFN_ERR_INVALID_ARG, "json_parse_file: path is NULL");
    int fd;
    struct stat st;
    ffn_status os = ffn_open_regular(path, &fd, &st);
    if (os) return os;
    if ((uint64_t)st.st_size > JSON_MAX_FILE) {
        close(fd);
        return ffn_error(FFN_ERR_FORMAT, "%s: JSON file too large (expected at most %zu bytes, found %lld)",
                         path, JSON_MAX_FILE, (long long)st.st_size);
    }
    size_t size = (size_t)st.st_size;
    char *buf = malloc(size ? size : 1);
    if (!buf) {
        close(fd);
        return ffn_error(FFN_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, size);
    }
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            close(fd);
            return ffn_error(FFN_ERR_IO, "%s: read failed: %s", path, strerror(e));
        }
        if (r == 0) break; /* the file shrank under us: parse what is there */
        got += (size_t)r;
    }
    close(fd);
    ffn_sniff kind = ffn_sniff_bytes(buf, got);
    if (ffn_sniff_is_magic(kind) && kind != FFN_SNIFF_JSON) {
        free(buf);
        return ffn_error(FFN_ERR_FORMAT, "%s is %s, not a JSON file%s%s", path, ffn_sniff_name(kind),
                         kind == FFN_SNIFF_GGUF ? "; " : "",
                         kind == FFN_SNIFF_GGUF ? ffn_sniff_advice(kind) : "");
    }
    ffn_status s = json_parse(buf, got, path, out);
    free(buf);
    return s;
}

/* ---- lookups and typed getters --------------------------------------- */

const json_value *json_get(const json_value *obj, const char *key) {
    if (!obj || obj->type != JSON_OBJECT || !key) return NULL;
    for (size_t k = 0; k < obj->length; k++)
        if (!strcmp(obj->keys[k], key)) return obj->items[k];
    return NULL;
}

const char *json_type_name(json_type type) {
    static const char *const names[] = {[JSON_NULL] = "null", [JSON_FALSE] = "false",
        [JSON_TRUE] = "true", [JSON_NUMBER] = "a number", [JSON_STRING] = "a string",
        [JSON_ARRAY] = "an array", [JSON_OBJECT] = "an object"};
    return FFN_ENUM_NAME(names, type, "an unknown value");
}

/* Common head of the getters: FFN_OK with *v set to a value whose type is
 * in the set `types` (bits 1 << json_type), FFN_OK with *v NULL (absent and
 * optional), or an error saying "expected <expected>, found <type>". */
#define JSON_TYPES(t) (1u << (t))
static ffn_status lookup(const json_value *obj, const char *key, int required, const char *what,
                         unsigned types, const char *expected, const json_value **v) {
    *v = NULL;
    if (!what) what = "json";
    if (!obj || obj->type != JSON_OBJECT)
        return ffn_error(FFN_ERR_CONFIG, "%s: expected an object holding \"%s\", found %s", what,
                         key ? key : "", obj ? json_type_name(obj->type) : "nothing");
    const json_value *found = json_get(obj, key);
    if (!found || found->type == JSON_NULL) {
        if (required) return ffn_error(FFN_ERR_MISSING, "%s: %s: required field is missing", what, key);
        return FFN_OK;
    }
    if (!(types & JSON_TYPES(found->type)))
        return ffn_error(FFN_ERR_CONFIG, "%s: %s: expected %s, found %s", what, key, expected,
                         json_type_name(found->type));
    *v = found;
    return FFN_OK;
}

ffn_status json_get_i64(const json_value *obj, const char *key, int required, const char *what,
                        int64_t *out) {
    const json_value *v;
    ffn_status s = lookup(obj, key, required, what, JSON_TYPES(JSON_NUMBER), "an integer", &v);
    if (s != FFN_OK || !v) return s;
    if (!v->is_integer)
        return ffn_error(FFN_ERR_CONFIG, "%s: %s: expected an integer (digits only, within int64), found %.17g",
                         what ? what : "json", key, v->number);
    *out = v->integer;
    return FFN_OK;
}

ffn_status json_get_f64(const json_value *obj, const char *key, int required, const char *what,
                        double *out) {
    const json_value *v;
    ffn_status s = lookup(obj, key, required, what, JSON_TYPES(JSON_NUMBER), "a number", &v);
    if (s == FFN_OK && v) *out = v->number;
    return s;
}

ffn_status json_get_bool(const json_value *obj, const char *key, int required, const char *what,
                         int *out) {
    const json_value *v;
    ffn_status s = lookup(obj, key, required, what, JSON_TYPES(JSON_TRUE) | JSON_TYPES(JSON_FALSE),
                          "true or false", &v);
    if (s == FFN_OK && v) *out = v->type == JSON_TRUE;
    return s;
}

ffn_status json_get_str(const json_value *obj, const char *key, int required, const char *what,
                        const char **out) {
    const json_value *v;
    ffn_status s = lookup(obj, key, required, what, JSON_TYPES(JSON_STRING), "a string", &v);
    if (s == FFN_OK && v) *out = v->string;
    return s;
}

/* ---- writing ---------------------------------------------------------- */

int json_utf8_valid(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        if (u[i] == 0) return 0;
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = utf8_seq_len(u + i, n - i);
        if (!k) return 0;
        i += k;
    }
    return 1;
}

void json_write_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        unsigned c = *p;
        switch (c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        case '\b': fputs("\\b", f); break;
        case '\f': fputs("\\f", f); break;
        default:
            if (c < 0x20 || c == 0x7f) fprintf(f, "\\u%04x", c);
            else fputc((int)c, f);
        }
    }
    fputc('"', f);
}
