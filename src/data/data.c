/* data.c -- tokenizers (byte, char, word) and token streams.
 *
 * Reads top to bottom: UTF-8 decoding and the word-piece splitter, a small
 * hash table of byte strings, building a vocabulary, encode/decode, the
 * tokenizer file (save, strict parse), then reading text and splitting
 * token streams.  The built-in corpus lives in corpus.c.
 *
 * Letters: N tokens, V vocabulary size. */
#include "ffn/data.h"
#include "base/common.h"
#include "base/open.h"
#include "data/unicode.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- UTF-8 and the piece splitter -------------------------------------- */

/* Decode the code point at s[i] (i < n).  Returns its length in bytes
 * (1..4), or 0 when the bytes there are not valid UTF-8 (overlong forms,
 * surrogates, values above U+10FFFF and truncated sequences included). */
static int utf8_decode(const unsigned char *s, size_t n, size_t i, uint32_t *cp) {
    return utf8_next(s + i, n - i, cp);
}

static int is_space(uint32_t c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static int is_punct(uint32_t c) {
    if (c < 0x80) return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) ||
                         (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
    return (c >= 0x2000 && c <= 0x206F) || (c >= 0x3000 && c <= 0x303F) ||
           (c >= 0xFF01 && c <= 0xFF0F) || (c >= 0xFF1A && c <= 0xFF20) ||
           (c >= 0xFF3B && c <= 0xFF40) || (c >= 0xFF5B && c <= 0xFF65);
}

static int is_cjk(uint32_t c) {
    return (c >= 0x3040 && c <= 0x30FF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0xF900 && c <= 0xFAFF) ||
           (c >= 0x20000 && c <= 0x2FFFF);
}

/* A code point that stands alone as a piece. */
static int is_single(uint32_t c) { return is_punct(c) || is_cjk(c); }

static ffn_status bad_utf8(const unsigned char *s, size_t i) {
    return ffn_error(FFN_ERR_FORMAT, "invalid UTF-8 at byte offset %zu (byte 0x%02x)", i,
                     (unsigned)s[i]);
}

/* The length of the next piece of `mode` starting at s[i] (i < n), see the
 * header for the rules.  Invalid UTF-8 (char, word) is an error naming the
 * offset. */
static ffn_status next_piece(ffn_tokenizer_mode mode, const unsigned char *s, size_t n,
                             size_t i, size_t *len) {
    uint32_t c;
    if (mode == FFN_TOK_BYTE) {
        *len = 1;
        return FFN_OK;
    }
    int k = utf8_decode(s, n, i, &c);
    if (!k) return bad_utf8(s, i);
    if (mode == FFN_TOK_CHAR) {
        *len = (size_t)k;
        return FFN_OK;
    }
    size_t start = i;
    if (is_space(c)) {
        size_t j = i;
        while (j < n && is_space(s[j])) j++; /* whitespace is ASCII: bytewise */
        int attach = j < n && s[j - 1] == ' ';
        if (!attach || j - 1 > i) { /* a whitespace piece (the last space left to attach) */
            size_t end = attach ? j - 1 : j;
            *len = end - i > FFN_TOKEN_MAX_BYTES ? FFN_TOKEN_MAX_BYTES : end - i;
            return FFN_OK;
        }
        i = j; /* a single ' ' attaches to what follows */
        k = utf8_decode(s, n, i, &c);
        if (!k) return bad_utf8(s, i);
    }
    if (is_single(c)) {
        *len = i + (size_t)k - start;
        return FFN_OK;
    }
    /* a run of word characters, cut at a code point boundary */
    size_t end = i + (size_t)k;
    while (end < n) {
        int k2 = utf8_decode(s, n, end, &c);
        if (!k2) {
            /* the error is reported when the splitter reaches it; stop here */
            break;
        }
        if (is_space(c) || is_single(c)) break;
        if (end + (size_t)k2 - start > FFN_TOKEN_MAX_BYTES) break;
        end += (size_t)k2;
    }
    *len = end - start;
    return FFN_OK;
}

/* ---- a hash table of byte strings -> ids ---------------------------------
 * Open addressing with linear probing over a power-of-two table of int32
 * slots (-1 empty); the strings themselves live with the caller, reached
 * through get_str(). */

typedef struct strtab {
    int32_t *slot;
    size_t mask;
} strtab;

static uint64_t hash_bytes(const char *p, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static ffn_status strtab_init(strtab *t, size_t capacity) {
    size_t size = 16;
    while (size < capacity * 2) {
        if (size > SIZE_MAX / 4) return ffn_error(FFN_ERR_OVERFLOW, "hash table size overflow");
        size *= 2;
    }
    t->slot = malloc(size * sizeof *t->slot);
    if (!t->slot) return ffn_error(FFN_ERR_NOMEM, "hash table of %zu slots", size);
    memset(t->slot, 0xFF, size * sizeof *t->slot);
    t->mask = size - 1;
    return FFN_OK;
}

/* Strings are addressed by id through these arrays. */
typedef struct strset {
    const char *const *ptr;
    const int64_t *len;
} strset;

/* Find `p[0..n)`: returns its slot index; *id = the id there or -1. */
static size_t strtab_find(const strtab *t, strset s, const char *p, size_t n, int32_t *id) {
    size_t h = (size_t)hash_bytes(p, n) & t->mask;
    for (;;) {
        int32_t v = t->slot[h];
        if (v < 0 || ((size_t)s.len[v] == n && !memcmp(s.ptr[v], p, n))) {
            *id = v;
            return h;
        }
        h = (h + 1) & t->mask;
    }
}

/* ---- the tokenizer ------------------------------------------------------ */

struct ffn_tokenizer {
    ffn_tokenizer_mode mode;
    int64_t vocab_size; /* V */
    char *blob;         /* all token bytes, back to back */
    char **tok;         /* (V) pointers into blob */
    int64_t *tok_len;   /* (V) */
    int32_t unk;
    strtab table; /* char and word: bytes -> id */
};

static const char UNK[] = "<unk>";

const char *ffn_tokenizer_mode_name(ffn_tokenizer_mode mode) {
    static const char *const names[] = {
        [FFN_TOK_BYTE] = "byte", [FFN_TOK_CHAR] = "char", [FFN_TOK_WORD] = "word"};
    return FFN_ENUM_NAME(names, mode, "?");
}

ffn_status ffn_tokenizer_mode_parse(const char *s, ffn_tokenizer_mode *out) {
    if (!s || !out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_tokenizer_mode_parse: NULL argument");
    for (int m = FFN_TOK_BYTE; m <= FFN_TOK_WORD; m++)
        if (!strcmp(s, ffn_tokenizer_mode_name((ffn_tokenizer_mode)m))) {
            *out = (ffn_tokenizer_mode)m;
            return FFN_OK;
        }
    return ffn_error(FFN_ERR_CONFIG, "tokenizer: unknown value '%s' (expected byte, char or word)", s);
}

void ffn_tokenizer_free(ffn_tokenizer *tok) {
    if (!tok) return;
    free(tok->blob);
    free(tok->tok);
    free(tok->tok_len);
    free(tok->table.slot);
    free(tok);
}

ffn_tokenizer_mode ffn_tokenizer_get_mode(const ffn_tokenizer *tok) { return tok->mode; }
int64_t ffn_tokenizer_vocab_size(const ffn_tokenizer *tok) { return tok->vocab_size; }
int32_t ffn_tokenizer_unk_id(const ffn_tokenizer *tok) { return tok->unk; }

const char *ffn_tokenizer_token(const ffn_tokenizer *tok, int32_t id, size_t *len) {
    if (!tok || id < 0 || id >= tok->vocab_size) return NULL;
    if (len) *len = (size_t)tok->tok_len[id];
    return tok->tok[id];
}

/* Make a tokenizer from V strings (copied).  For char and word, the hash
 * table is filled; a duplicate string is an error (*dup_id says which). */
static ffn_status tokenizer_from_list(ffn_tokenizer_mode mode, int64_t V,
                                      const char *const *ptr, const int64_t *len,
                                      ffn_tokenizer **out, int64_t *dup_id) {
    *out = NULL;
    if (dup_id) *dup_id = -1;
    ffn_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return ffn_error(FFN_ERR_NOMEM, "tokenizer");
    t->mode = mode;
    t->vocab_size = V;
    t->unk = mode == FFN_TOK_BYTE ? 256 : 0;
    size_t total = 0;
    for (int64_t i = 0; i < V; i++)
        if (ffn_add_size(total, (size_t)len[i], &total)) {
            ffn_tokenizer_free(t);
            return ffn_error(FFN_ERR_OVERFLOW, "tokenizer: total token bytes overflow");
        }
    t->blob = malloc(total + 1);
    t->tok = malloc((size_t)V * sizeof *t->tok);
    t->tok_len = malloc((size_t)V * sizeof *t->tok_len);
    if (!t->blob || !t->tok || !t->tok_len) {
        ffn_tokenizer_free(t);
        return ffn_error(FFN_ERR_NOMEM, "tokenizer of %lld tokens", (long long)V);
    }
    size_t at = 0;
    for (int64_t i = 0; i < V; i++) {
        if (len[i]) memcpy(t->blob + at, ptr[i], (size_t)len[i]);
        t->tok[i] = t->blob + at;
        t->tok_len[i] = len[i];
        at += (size_t)len[i];
    }
    if (mode != FFN_TOK_BYTE) {
        ffn_status st = strtab_init(&t->table, (size_t)V);
        if (st) {
            ffn_tokenizer_free(t);
            return st;
        }
        strset s = {(const char *const *)t->tok, t->tok_len};
        for (int64_t i = 0; i < V; i++) {
            int32_t id;
            size_t h = strtab_find(&t->table, s, t->tok[i], (size_t)t->tok_len[i], &id);
            if (id >= 0) {
                if (dup_id) *dup_id = i;
                ffn_tokenizer_free(t);
                return ffn_error(FFN_ERR_FORMAT, "token %lld duplicates token %d", (long long)i, id);
            }
            t->table.slot[h] = (int32_t)i;
        }
    }
    *out = t;
    return FFN_OK;
}

static ffn_status byte_tokenizer(ffn_tokenizer **out) {
    char bytes[256];
    const char *ptr[257];
    int64_t len[257];
    for (int i = 0; i < 256; i++) {
        bytes[i] = (char)i;
        ptr[i] = &bytes[i];
        len[i] = 1;
    }
    ptr[256] = UNK;
    len[256] = (int64_t)strlen(UNK);
    return tokenizer_from_list(FFN_TOK_BYTE, 257, ptr, len, out, NULL);
}

/* ---- building a vocabulary ------------------------------------------------
 * Count every piece of the text in a growing hash table, then sort by
 * count (descending) and bytes (ascending) and keep the first max_vocab-1. */

typedef struct piece_count {
    const char *ptr;
    int64_t len, count;
} piece_count;

static int cmp_piece(const void *a, const void *b) {
    const piece_count *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return ffn_bytes_cmp(x->ptr, (size_t)x->len, y->ptr, (size_t)y->len);
}

typedef struct counter {
    piece_count *items;
    const char **ptr; /* parallel views for strset */
    int64_t *len;
    int64_t n, cap;
    strtab table;
} counter;

static void counter_free(counter *c) { FFN_FREE_ALL(c->items, c->ptr, c->len, c->table.slot); }

static ffn_status counter_grow(counter *c) {
    int64_t cap = c->cap ? c->cap * 2 : 1024;
    if (cap > INT32_MAX / 2) return ffn_error(FFN_ERR_OVERFLOW, "tokenizer: too many distinct symbols");
    piece_count *it = realloc(c->items, (size_t)cap * sizeof *it);
    if (it) c->items = it;
    const char **p = realloc(c->ptr, (size_t)cap * sizeof *p);
    if (p) c->ptr = p;
    int64_t *l = realloc(c->len, (size_t)cap * sizeof *l);
    if (l) c->len = l;
    if (!it || !p || !l) return ffn_error(FFN_ERR_NOMEM, "tokenizer: counting symbols");
    free(c->table.slot);
    ffn_status st = strtab_init(&c->table, (size_t)cap);
    if (st) return st;
    c->cap = cap;
    strset s = {c->ptr, c->len};
    for (int64_t i = 0; i < c->n; i++) {
        int32_t id;
        size_t h = strtab_find(&c->table, s, c->ptr[i], (size_t)c->len[i], &id);
        c->table.slot[h] = (int32_t)i;
    }
    return FFN_OK;
}

static ffn_status counter_add(counter *c, const char *p, size_t n) {
    if (c->n == c->cap) {
        ffn_status st = counter_grow(c);
        if (st) return st;
    }
    int32_t id;
    strset s = {c->ptr, c->len};
    size_t h = strtab_find(&c->table, s, p, n, &id);
    if (id >= 0) {
        c->items[id].count++;
        return FFN_OK;
    }
    c->items[c->n] = (piece_count){p, (int64_t)n, 1};
    c->ptr[c->n] = p;
    c->len[c->n] = (int64_t)n;
    c->table.slot[h] = (int32_t)c->n;
    c->n++;
    return FFN_OK;
}

ffn_status ffn_tokenizer_build(ffn_tokenizer_mode mode, const char *text, size_t n_bytes,
                               int64_t max_vocab, ffn_tokenizer **out) {
    if (!out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_tokenizer_build: out is NULL");
    *out = NULL;
    if (mode != FFN_TOK_BYTE && mode != FFN_TOK_CHAR && mode != FFN_TOK_WORD)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_tokenizer_build: unknown mode %d", (int)mode);
    if (!text || n_bytes == 0)
        return ffn_error(FFN_ERR_INVALID_ARG, "tokenizer: the training text is empty");
    if (max_vocab < 0 || (mode != FFN_TOK_BYTE && max_vocab == 1))
        return ffn_error(FFN_ERR_CONFIG,
                         "tokenizer: max_vocab: expected 0 (no cap) or >= 2, got %lld",
                         (long long)max_vocab);
    if (mode == FFN_TOK_BYTE) return byte_tokenizer(out);

    counter c = {0};
    ffn_status st = FFN_OK;
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < n_bytes;) {
        size_t len;
        if ((st = next_piece(mode, s, n_bytes, i, &len))) goto done;
        if ((st = counter_add(&c, text + i, len))) goto done;
        i += len;
    }
    qsort(c.items, (size_t)c.n, sizeof *c.items, cmp_piece);
    int64_t keep = c.n;
    if (max_vocab > 0 && keep > max_vocab - 1) keep = max_vocab - 1;
    const char **ptr = malloc((size_t)(keep + 1) * sizeof *ptr);
    int64_t *len = malloc((size_t)(keep + 1) * sizeof *len);
    if (!ptr || !len) {
        free(ptr);
        free(len);
        st = ffn_error(FFN_ERR_NOMEM, "tokenizer: vocabulary of %lld", (long long)keep);
        goto done;
    }
    ptr[0] = UNK;
    len[0] = (int64_t)strlen(UNK);
    for (int64_t i = 0; i < keep; i++) {
        ptr[i + 1] = c.items[i].ptr;
        len[i + 1] = c.items[i].len;
    }
    st = tokenizer_from_list(mode, keep + 1, ptr, len, out, NULL);
    free(ptr);
    free(len);
done:
    counter_free(&c);
    return st;
}

/* ---- encode / decode ---------------------------------------------------- */

ffn_status ffn_tokenizer_encode(const ffn_tokenizer *tok, const char *text, size_t n_bytes,
                                int32_t **ids, int64_t **offsets, int64_t *n_tokens,
                                int64_t *n_unk) {
    if (!tok || !ids || !n_tokens || (!text && n_bytes))
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_tokenizer_encode: NULL argument");
    *ids = NULL;
    if (offsets) *offsets = NULL;
    *n_tokens = 0;
    if (n_unk) *n_unk = 0;
    if (n_bytes == 0) return FFN_OK;
    size_t bytes;
    if (ffn_mul_size(n_bytes, sizeof(int64_t), &bytes))
        return ffn_error(FFN_ERR_OVERFLOW, "tokenizer: %zu bytes of text", n_bytes);
    int32_t *id_out = malloc(n_bytes * sizeof *id_out);
    int64_t *off_out = offsets ? malloc(bytes) : NULL;
    if (!id_out || (offsets && !off_out)) {
        free(id_out);
        free(off_out);
        return ffn_error(FFN_ERR_NOMEM, "tokenizer: encoding %zu bytes", n_bytes);
    }
    const unsigned char *s = (const unsigned char *)text;
    strset set = {(const char *const *)tok->tok, tok->tok_len};
    int64_t n = 0, unk = 0;
    if (tok->mode == FFN_TOK_BYTE) { /* ids are the bytes */
        for (size_t i = 0; i < n_bytes; i++) {
            id_out[i] = s[i];
            if (off_out) off_out[i] = (int64_t)i;
        }
        n = (int64_t)n_bytes;
    }
    for (size_t i = tok->mode == FFN_TOK_BYTE ? n_bytes : 0; i < n_bytes;) {
        size_t len;
        ffn_status st = next_piece(tok->mode, s, n_bytes, i, &len);
        if (st) {
            free(id_out);
            free(off_out);
            return st;
        }
        int32_t id;
        if (tok->mode == FFN_TOK_BYTE) id = s[i];
        else strtab_find(&tok->table, set, text + i, len, &id);
        if (id < 0) id = tok->unk, unk++;
        if (off_out) off_out[n] = (int64_t)i;
        id_out[n++] = id;
        i += len;
    }
    /* give back what the pieces did not use (word mode: ~1 token in 4 bytes) */
    int32_t *id_fit = realloc(id_out, (size_t)n * sizeof *id_out);
    if (id_fit) id_out = id_fit;
    if (off_out) {
        int64_t *off_fit = realloc(off_out, (size_t)n * sizeof *off_out);
        if (off_fit) off_out = off_fit;
    }
    *ids = id_out;
    if (offsets) *offsets = off_out;
    *n_tokens = n;
    if (n_unk) *n_unk = unk;
    return FFN_OK;
}

ffn_status ffn_tokenizer_decode(const ffn_tokenizer *tok, const int32_t *ids, int64_t n_tokens,
                                char **text, size_t *n_bytes) {
    if (!tok || !text || (!ids && n_tokens) || n_tokens < 0)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_tokenizer_decode: bad argument");
    *text = NULL;
    if (n_bytes) *n_bytes = 0;
    size_t total = 0;
    for (int64_t i = 0; i < n_tokens; i++) {
        if (ids[i] < 0 || ids[i] >= tok->vocab_size)
            return ffn_error(FFN_ERR_INVALID_ARG,
                             "tokenizer: token %lld: id %d outside the vocabulary [0, %lld)",
                             (long long)i, ids[i], (long long)tok->vocab_size);
        if (ffn_add_size(total, (size_t)tok->tok_len[ids[i]], &total))
            return ffn_error(FFN_ERR_OVERFLOW, "tokenizer: decoded text too long");
    }
    char *out = malloc(total + 1);
    if (!out) return ffn_error(FFN_ERR_NOMEM, "tokenizer: decoding %zu bytes", total);
    size_t at = 0;
    for (int64_t i = 0; i < n_tokens; i++) {
        memcpy(out + at, tok->tok[ids[i]], (size_t)tok->tok_len[ids[i]]);
        at += (size_t)tok->tok_len[ids[i]];
    }
    out[at] = '\0';
    *text = out;
    if (n_bytes) *n_bytes = at;
    return FFN_OK;
}

/* ---- the tokenizer file ------------------------------------------------- */

static int valid_utf8(const char *p, size_t n) {
    const unsigned char *s = (const unsigned char *)p;
    uint32_t c;
    for (size_t i = 0; i < n;) {
        int k = utf8_decode(s, n, i, &c);
        if (!k) return 0;
        i += (size_t)k;
    }
    return 1;
}

static void write_escaped(FILE *f, const char *p, size_t n) {
    int raw_high = valid_utf8(p, n);
    for (size_t i = 0; i < n; i++) {
        unsigned char b = (unsigned char)p[i];
        if (b == '\\') fputs("\\\\", f);
        else if (b == '\n') fputs("\\n", f);
        else if (b == '\t') fputs("\\t", f);
        else if (b == '\r') fputs("\\r", f);
        else if (b < 0x20 || b == 0x7f || (b >= 0x80 && !raw_high)) fprintf(f, "\\x%02x", b);
        else fputc(b, f);
    }
    fputc('\n', f);
}

static void write_tokenizer(FILE *f, const ffn_tokenizer *tok) {
    fprintf(f, "ffn-tokenizer %d\nmode %s\nvocab_size %lld\n", FFN_TOKENIZER_VERSION,
            ffn_tokenizer_mode_name(tok->mode), (long long)tok->vocab_size);
    for (int64_t i = 0; i < tok->vocab_size; i++)
        write_escaped(f, tok->tok[i], (size_t)tok->tok_len[i]);
}

ffn_status tokenizer_serialize(const ffn_tokenizer *tok, char **text, size_t *n_bytes) {
    if (!tok || !text || !n_bytes)
        return ffn_error(FFN_ERR_INVALID_ARG, "tokenizer_serialize: NULL argument");
    *text = NULL;
    *n_bytes = 0;
    FILE *f = open_memstream(text, n_bytes);
    if (!f) return ffn_error(FFN_ERR_NOMEM, "tokenizer file: out of memory");
    write_tokenizer(f, tok);
    if (fclose(f) != 0 || !*text) {
        free(*text);
        *text = NULL;
        return ffn_error(FFN_ERR_NOMEM, "tokenizer file: out of memory");
    }
    return FFN_OK;
}

/* ---- a Hugging Face tokenizer.json of the same encoding -------------------
 * byte: BPE without merges over <0x00>..<0xFF> with byte_fallback (every
 * character becomes its UTF-8 bytes' tokens); char: a Split pre-tokenizer
 * that isolates each code point; word: a Split regex that cuts exactly the
 * pieces next_piece cuts.  char and word use the WordPiece model without
 * continuation tokens, so a pre-token is a token whole or "<unk>" whole, as
 * ffn encodes; the decoder fuses the pieces.  (One difference remains: a
 * word run longer than FFN_TOKEN_MAX_BYTES is cut by ffn and is one "<unk>"
 * in the regex.) */

static void json_str(FILE *f, const char *p, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char b = (unsigned char)p[i];
        if (b == '"' || b == '\\') fprintf(f, "\\%c", b);
        else if (b < 0x20 || b == 0x7f) fprintf(f, "\\u%04x", b);
        else fputc(b, f);
    }
    fputc('"', f);
}

/* The word splitter's classes as regex character-class contents (no
 * brackets), the non-ASCII ranges as literal code points (JSON-escaped as
 * \uXXXX, astral ones as surrogate pairs), which every regex engine reads
 * alike. */
#define HF_WS "\\\\t\\\\n\\\\x0B\\\\f\\\\r "
#define HF_PUNCT "!-/:-@\\\\[-`{-~\\u2000-\\u206f\\u3000-\\u303f\\uff01-\\uff0f\\uff1a-\\uff20" \
                 "\\uff3b-\\uff40\\uff5b-\\uff65"
#define HF_CJK "\\u3040-\\u30ff\\u3400-\\u4dbf\\u4e00-\\u9fff\\uf900-\\ufaff" \
               "\\ud840\\udc00-\\ud87f\\udfff"

ffn_status tokenizer_to_hf_json(const ffn_tokenizer *tok, char **json, size_t *n_bytes) {
    if (!tok || !json || !n_bytes) return ffn_error(FFN_ERR_INVALID_ARG, "tokenizer_to_hf_json: NULL argument");
    *json = NULL;
    *n_bytes = 0;
    FILE *f = open_memstream(json, n_bytes);
    if (!f) return ffn_error(FFN_ERR_NOMEM, "tokenizer.json: out of memory");
    const int byte = tok->mode == FFN_TOK_BYTE;
    fprintf(f, "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n"
               "  \"added_tokens\": [],\n  \"normalizer\": null,\n  \"pre_tokenizer\": ");
    if (byte)
        fprintf(f, "null");
    else if (tok->mode == FFN_TOK_CHAR)
        fprintf(f, "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"[\\\\s\\\\S]\"}, "
                   "\"behavior\": \"Isolated\", \"invert\": false}");
    else
        fprintf(f, "{\"type\": \"Split\", \"pattern\": {\"Regex\": \""
                   " ?[^" HF_WS HF_PUNCT HF_CJK "]+| ?[" HF_PUNCT "]| ?[" HF_CJK "]|"
                   "[" HF_WS "]+(?= [^" HF_WS "])|[" HF_WS "]+"
                   "\"}, \"behavior\": \"Isolated\", \"invert\": false}");
    fprintf(f, ",\n  \"post_processor\": null,\n  \"decoder\": ");
    if (byte) fprintf(f, "{\"type\": \"Sequence\", \"decoders\": [{\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}]}");
    else fprintf(f, "{\"type\": \"Fuse\"}");
    if (byte)
        fprintf(f, ",\n  \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": \"<unk>\", "
                   "\"continuing_subword_prefix\": null, \"end_of_word_suffix\": null, "
                   "\"fuse_unk\": false, \"byte_fallback\": true, \"ignore_merges\": false, "
                   "\"vocab\": {");
    else
        fprintf(f, ",\n  \"model\": {\"type\": \"WordPiece\", \"unk_token\": \"<unk>\", "
                   "\"continuing_subword_prefix\": \"##\", \"max_input_chars_per_word\": %d, "
                   "\"vocab\": {", FFN_TOKEN_MAX_BYTES + 1);
    for (int64_t i = 0; i < tok->vocab_size; i++) {
        fprintf(f, "%s\n    ", i ? "," : "");
        if (byte && i < 256) fprintf(f, "\"<0x%02X>\"", (unsigned)i);
        else json_str(f, tok->tok[i], (size_t)tok->tok_len[i]);
        fprintf(f, ": %lld", (long long)i);
    }
    fprintf(f, "}%s}\n}\n", byte ? ", \"merges\": []" : "");
    if (fclose(f) != 0 || !*json) {
        free(*json);
        *json = NULL;
        return ffn_error(FFN_ERR_NOMEM, "tokenizer.json: out of memory");
    }
    return FFN_OK;
}

ffn_status ffn_tokenizer_save(const ffn_tokenizer *tok, const char *path) {
    if (!tok || !path) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_tokenizer_save: NULL argument");
    ffn_atomic_file af;
    ffn_status st = ffn_atomic_open(&af, path);
    if (st) return st;
    write_tokenizer(af.f, tok);
    return ffn_atomic_commit(&af);
}

/* The parser walks the buffer a line at a time, keeping the line number
 * for every message. */
typedef struct line_reader {
    const char *buf, *name;
    size_t n, at;
    int64_t line; /* 1-based number of the line last returned */
} line_reader;

/* The next line without its '\n'.  An error when the buffer ends without a
 * line end, or a line holds a NUL byte. */
static ffn_status next_line(line_reader *r, const char **p, size_t *len) {
    r->line++;
    if (r->at >= r->n)
        return ffn_error(FFN_ERR_FORMAT, "%s: line %lld: unexpected end of file", r->name,
                         (long long)r->line);
    const char *s = r->buf + r->at;
    const char *nl = memchr(s, '\n', r->n - r->at);
    if (!nl)
        return ffn_error(FFN_ERR_FORMAT, "%s: line %lld: missing line end (the file is truncated?)",
                         r->name, (long long)r->line);
    if (memchr(s, '\0', (size_t)(nl - s)))
        return ffn_error(FFN_ERR_FORMAT, "%s: line %lld: NUL byte in the line", r->name,
                         (long long)r->line);
    *p = s;
    *len = (size_t)(nl - s);
    r->at += *len + 1;
    return FFN_OK;
}

static int line_is(const char *p, size_t n, const char *want) {
    return strlen(want) == n && !memcmp(p, want, n);
}

/* Strict decimal: digits only, no sign, no leading zero, <= max. */
static int parse_count(const char *p, size_t n, int64_t max, int64_t *out) {
    if (n == 0 || n > 12 || (p[0] == '0' && n > 1)) return 0;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return 0;
        v = v * 10 + (p[i] - '0');
    }
    if (v > max) return 0;
    *out = v;
    return 1;
}

static int hex_val(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Unescape one token line into out (capacity cap); returns the length, or
 * -1 with a message in *why. */
static int64_t unescape(const char *p, size_t n, char *out, size_t cap, const char **why) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char b = (unsigned char)p[i];
        if (b == '\r') {
            *why = "raw carriage return (CRLF line ends? the format uses \\n and escapes \\r)";
            return -1;
        }
        if (b < 0x20 || b == 0x7f) {
            *why = "raw control byte (it must be escaped as \\xHH)";
            return -1;
        }
        if (b == '\\') {
            if (++i >= n) {
                *why = "a lone '\\' at the end of the line";
                return -1;
            }
            switch (p[i]) {
            case '\\': b = '\\'; break;
            case 'n': b = '\n'; break;
            case 't': b = '\t'; break;
            case 'r': b = '\r'; break;
            case 'x': {
                int hi = i + 1 < n ? hex_val(p[i + 1]) : -1;
                int lo = i + 2 < n ? hex_val(p[i + 2]) : -1;
                if (hi < 0 || lo < 0) {
                    *why = "\\x must be followed by two hex digits";
                    return -1;
                }
                b = (unsigned char)(hi * 16 + lo);
                i += 2;
                break;
            }
            default: *why = "unknown escape (expected \\\\, \\n, \\t, \\r or \\xHH)"; return -1;
            }
        }
        if (k >= cap) {
            *why = "token longer than the longest allowed";
            return -1;
        }
        out[k++] = (char)b;
    }
    return (int64_t)k;
}

/* Check one token against the rules of its mode; NULL if fine, else why. */
static const char *check_token(ffn_tokenizer_mode mode, int64_t id, const char *p, size_t n) {
    if (mode == FFN_TOK_BYTE) {
        if (id == 256) return line_is(p, n, UNK) ? NULL : "expected <unk> as token 256";
        if (n != 1 || (unsigned char)p[0] != (unsigned)id)
            return "a byte tokenizer's token i must be the single byte i";
        return NULL;
    }
    if (id == 0) return line_is(p, n, UNK) ? NULL : "expected <unk> as token 0";
    if (n == 0) return "empty token";
    if (n > FFN_TOKEN_MAX_BYTES) return "token longer than the longest allowed";
    if (!valid_utf8(p, n)) return "token is not valid UTF-8";
    size_t len;
    if (next_piece(mode, (const unsigned char *)p, n, 0, &len) || len != n)
        return mode == FFN_TOK_CHAR ? "a char token must be exactly one code point"
                                    : "a word token must be exactly one word piece";
    return NULL;
}

ffn_status ffn_tokenizer_parse(const char *buf, size_t n_bytes, const char *name,
                               ffn_tokenizer **out) {
    if (!out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_tokenizer_parse: out is NULL");
    *out = NULL;
    if (!name) name = "tokenizer";
    if (!buf && n_bytes) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_tokenizer_parse: NULL buffer");
    if (n_bytes == 0) return ffn_error(FFN_ERR_FORMAT, "%s: empty file", name);
    ffn_sniff kind = ffn_sniff_bytes(buf, n_bytes);
    if (kind != FFN_SNIFF_UNKNOWN && kind != FFN_SNIFF_FFN_TOKENIZER)
        return ffn_error(FFN_ERR_FORMAT, "%s is %s, not an ffn tokenizer file (tokenizer.txt, "
                         "first line 'ffn-tokenizer 1')%s%s", name, ffn_sniff_name(kind),
                         kind == FFN_SNIFF_LLAMA2C_TOKENIZER ? "" : "; ",
                         kind == FFN_SNIFF_LLAMA2C_TOKENIZER ? "" : ffn_sniff_advice(kind));
    line_reader r = {buf, name, n_bytes, 0, 0};
    const char *p;
    size_t n;
    ffn_status st;
    if ((st = next_line(&r, &p, &n))) return st;
    if (!line_is(p, n, "ffn-tokenizer 1")) {
        if (n > 14 && !memcmp(p, "ffn-tokenizer ", 14))
            return ffn_error(FFN_ERR_FORMAT,
                             "%s: line 1: format version '%.*s' is not supported (this build "
                             "reads version %d); rebuild the tokenizer with this version",
                             name, (int)(n - 14 > 20 ? 20 : n - 14), p + 14, FFN_TOKENIZER_VERSION);
        return ffn_error(FFN_ERR_FORMAT, "%s: line 1: expected 'ffn-tokenizer 1' (not an ffn tokenizer file)",
                         name);
    }
    if ((st = next_line(&r, &p, &n))) return st;
    ffn_tokenizer_mode mode;
    if (line_is(p, n, "mode byte")) mode = FFN_TOK_BYTE;
    else if (line_is(p, n, "mode char")) mode = FFN_TOK_CHAR;
    else if (line_is(p, n, "mode word")) mode = FFN_TOK_WORD;
    else
        return ffn_error(FFN_ERR_FORMAT, "%s: line 2: expected 'mode byte', 'mode char' or 'mode word', got '%.*s'",
                         name, (int)(n > 40 ? 40 : n), p);
    if ((st = next_line(&r, &p, &n))) return st;
    int64_t V;
    if (n < 11 || memcmp(p, "vocab_size ", 11) ||
        !parse_count(p + 11, n - 11, FFN_TOKENIZER_MAX_VOCAB, &V) || V < 1)
        return ffn_error(FFN_ERR_FORMAT, "%s: line 3: expected 'vocab_size V' with 1 <= V <= %d, got '%.*s'",
                         name, FFN_TOKENIZER_MAX_VOCAB, (int)(n > 40 ? 40 : n), p);
    if (mode == FFN_TOK_BYTE && V != 257)
        return ffn_error(FFN_ERR_FORMAT, "%s: line 3: a byte tokenizer has vocab_size 257, got %lld",
                         name, (long long)V);
    /* Count the remaining lines before allocating anything sized by V. */
    int64_t lines = 0;
    for (size_t i = r.at; i < n_bytes; i++) lines += buf[i] == '\n';
    if (r.at < n_bytes && buf[n_bytes - 1] != '\n') lines++; /* a last line without '\n' */
    if (lines < V)
        return ffn_error(FFN_ERR_FORMAT, "%s: line %lld: unexpected end of file: vocab_size says %lld "
                         "tokens, the file has %lld",
                         name, (long long)(4 + lines), (long long)V, (long long)lines);
    if (lines > V)
        return ffn_error(FFN_ERR_FORMAT, "%s: line %lld: extra content after the %lld tokens",
                         name, (long long)(4 + V), (long long)V);

    /* An unescaped token is never longer than its line: the rest of the
     * buffer bounds the blob. */
    char *blob = malloc(n_bytes - r.at + FFN_TOKEN_MAX_BYTES);
    const char **ptr = malloc((size_t)V * sizeof *ptr);
    int64_t *len = malloc((size_t)V * sizeof *len);
    if (!blob || !ptr || !len) {
        st = ffn_error(FFN_ERR_NOMEM, "%s: %lld tokens", name, (long long)V);
        goto done;
    }
    size_t at = 0;
    for (int64_t i = 0; i < V; i++) {
        if ((st = next_line(&r, &p, &n))) goto done;
        const char *why = NULL;
        int64_t k = unescape(p, n, blob + at, FFN_TOKEN_MAX_BYTES, &why);
        if (k < 0 || (why = check_token(mode, i, blob + at, (size_t)k))) {
            st = ffn_error(FFN_ERR_FORMAT, "%s: line %lld (token %lld): %s", name,
                           (long long)r.line, (long long)i, why);
            goto done;
        }
        ptr[i] = blob + at;
        len[i] = k;
        at += (size_t)k;
    }
    int64_t dup = -1;
    st = tokenizer_from_list(mode, V, ptr, len, out, &dup);
    if (st && dup >= 0)
        ffn_error_prefix(st, "%s: line %lld", name, (long long)(4 + dup));
done:
    FFN_FREE_ALL(blob, ptr, len);
    return st;
}

ffn_status ffn_tokenizer_load(const char *path, ffn_tokenizer **out) {
    if (!out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_tokenizer_load: out is NULL");
    *out = NULL;
    char *buf;
    size_t n;
    ffn_status st = ffn_text_read(path, &buf, &n);
    if (st) return st;
    st = ffn_tokenizer_parse(buf, n, path, out);
    free(buf);
    return st;
}

/* ---- reading text, splitting streams ------------------------------------ */

ffn_status ffn_text_read(const char *path, char **text, size_t *n_bytes) {
    if (!path || !text) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_text_read: NULL argument");
    *text = NULL;
    if (n_bytes) *n_bytes = 0;
    int fd;
    struct stat sb;
    ffn_status os = ffn_open_regular(path, &fd, &sb);
    if (os) return os;
    const size_t max = FFN_TEXT_MAX_BYTES;
    if ((uint64_t)sb.st_size > max) {
        close(fd);
        return ffn_error(FFN_ERR_UNSUPPORTED, "%s: %lld bytes, more than the %zu bytes (%zu MiB) "
                         "ffn reads from one text file", path, (long long)sb.st_size, max, max >> 20);
    }
    /* Read to the end whatever the size says (/proc files say 0), but never
     * past the cap: a file that grows while read cannot exhaust memory. */
    size_t cap = sb.st_size > 0 ? (size_t)sb.st_size + 1 : 4096, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) {
        close(fd);
        return ffn_error(FFN_ERR_NOMEM, "%s: %zu bytes", path, cap);
    }
    for (;;) {
        if (n == cap) {
            if (n > max) {
                free(buf);
                close(fd);
                return ffn_error(FFN_ERR_UNSUPPORTED, "%s: more than the %zu bytes (%zu MiB) ffn "
                                 "reads from one text file", path, max, max >> 20);
            }
            size_t ncap;
            if (ffn_mul_size(cap, 2, &ncap)) {
                free(buf);
                close(fd);
                return ffn_error(FFN_ERR_OVERFLOW, "%s: too large", path);
            }
            if (ncap > max + 1) ncap = max + 1;
            char *nb = realloc(buf, ncap + 1);
            if (!nb) {
                free(buf);
                close(fd);
                return ffn_error(FFN_ERR_NOMEM, "%s: %zu bytes", path, ncap);
            }
            buf = nb, cap = ncap;
        }
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            free(buf);
            close(fd);
            return ffn_error(FFN_ERR_IO, "%s: read failed: %s", path, strerror(e));
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    close(fd);
    if (n == 0) {
        free(buf);
        return ffn_error(FFN_ERR_IO, "%s: the file is empty", path);
    }
    buf[n] = '\0';
    *text = buf;
    if (n_bytes) *n_bytes = n;
    return FFN_OK;
}

ffn_status ffn_tokens_split(int64_t n_tokens, double val_fraction, int64_t *n_train,
                            int64_t *n_val) {
    if (!n_train || !n_val) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_tokens_split: NULL argument");
    if (!(val_fraction >= 0.0 && val_fraction < 1.0))
        return ffn_error(FFN_ERR_CONFIG, "validation fraction: expected a value in [0, 1), got %g",
                         val_fraction);
    int64_t v = (int64_t)((double)n_tokens * val_fraction);
    if (val_fraction > 0 && v < 1) v = 1;
    if (n_tokens < 1 || n_tokens - v < 1)
        return ffn_error(FFN_ERR_CONFIG,
                         "%lld tokens are too few to split into training and validation parts "
                         "(validation fraction %g)",
                         (long long)n_tokens, val_fraction);
    *n_train = n_tokens - v;
    *n_val = v;
    return FFN_OK;
}
