/* vocab.c -- ffn_vocab: one interface over the vocabulary engines (see
 * include/ffn/vocab.h).  Each engine is a table of four functions; what
 * is common (decode, the round-trip check, detection of the file kind)
 * is written once here over those tables.
 *
 * Engines: ffn's tokenizers (data.c: byte, char, word) and the llama2.c
 * tokenizer.bin (llama2c_vocab.c).  Letters: V vocab size, N tokens. */
#include "data/vocab_internal.h"

#include <string.h>
#include <sys/stat.h>

typedef struct vocab_engine {
    ffn_status (*encode)(const void *impl, const char *text, size_t n, int add_bos,
                         int32_t **ids, int64_t *n_tokens);
    ffn_status (*piece)(const void *impl, int32_t prev, int32_t id, char byte_buf[1],
                        const char **bytes, size_t *len);
    int64_t (*size)(const void *impl);
    void (*free)(void *impl);
} vocab_engine;

struct ffn_vocab {
    const vocab_engine *engine;
    void *impl;
    ffn_vocab_kind kind;
    ffn_vocab_special special;
    int byte_fallback;
    int borrowed; /* the engine belongs to the caller */
};

/* ---- engine: ffn's tokenizers -------------------------------------------------- */

static ffn_status ffn_tok_encode(const void *impl, const char *text, size_t n, int add_bos,
                                 int32_t **ids, int64_t *n_tokens) {
    (void)add_bos; /* no bos */
    return ffn_tokenizer_encode(impl, text, n, ids, NULL, n_tokens, NULL);
}

static ffn_status ffn_tok_piece(const void *impl, int32_t prev, int32_t id, char byte_buf[1],
                                const char **bytes, size_t *len) {
    (void)prev;
    (void)byte_buf;
    const ffn_tokenizer *t = impl;
    const char *s = ffn_tokenizer_token(t, id, len);
    if (!s)
        return ffn_error(FFN_ERR_INVALID_ARG, "vocab: token id %d outside the vocabulary [0, %lld)",
                         id, (long long)ffn_tokenizer_vocab_size(t));
    *bytes = s;
    return FFN_OK;
}

static int64_t ffn_tok_size(const void *impl) { return ffn_tokenizer_vocab_size(impl); }
static void ffn_tok_free(void *impl) { ffn_tokenizer_free(impl); }

static const vocab_engine ffn_tokenizer_engine = {ffn_tok_encode, ffn_tok_piece, ffn_tok_size,
                                                  ffn_tok_free};

/* ---- engine: llama2.c tokenizer.bin ---------------------------------------------- */

static ffn_status l2c_encode(const void *impl, const char *text, size_t n, int add_bos,
                             int32_t **ids, int64_t *n_tokens) {
    ffn_status st = ffn_llama2c_tokenizer_encode(impl, text, n, add_bos, 0, ids, n_tokens);
    if (st == FFN_OK && *n_tokens == 0) { /* the common contract: no tokens, no array */
        free(*ids);
        *ids = NULL;
    }
    return st;
}

static ffn_status l2c_piece(const void *impl, int32_t prev, int32_t id, char byte_buf[1],
                            const char **bytes, size_t *len) {
    return ffn_llama2c_tokenizer_piece(impl, prev, id, byte_buf, bytes, len);
}

static int64_t l2c_size(const void *impl) { return ffn_llama2c_tokenizer_vocab_size(impl); }
static void l2c_free(void *impl) { ffn_llama2c_tokenizer_free(impl); }

static const vocab_engine llama2c_engine = {l2c_encode, l2c_piece, l2c_size, l2c_free};

/* ---- wrapping ------------------------------------------------------------------------ */

const char *ffn_vocab_kind_name(ffn_vocab_kind kind) {
    switch (kind) {
    case FFN_VOCAB_BYTE: return "byte";
    case FFN_VOCAB_CHAR: return "char";
    case FFN_VOCAB_WORD: return "word";
    case FFN_VOCAB_LLAMA2C: return "llama2c";
    }
    return "unknown";
}

static void fill_from_tokenizer(ffn_vocab *v, const ffn_tokenizer *tok) {
    v->engine = &ffn_tokenizer_engine;
    v->impl = (void *)tok;
    ffn_tokenizer_mode m = ffn_tokenizer_get_mode(tok);
    v->kind = m == FFN_TOK_BYTE ? FFN_VOCAB_BYTE : m == FFN_TOK_CHAR ? FFN_VOCAB_CHAR : FFN_VOCAB_WORD;
    v->special = (ffn_vocab_special){-1, -1, ffn_tokenizer_unk_id(tok), -1};
    v->byte_fallback = m == FFN_TOK_BYTE;
}

/* A new vocabulary that owns tok (run by engine e); tok is freed when this
 * fails.  fn names the caller in the error. */
static ffn_status vocab_adopt(const char *fn, const vocab_engine *e, void *tok, ffn_vocab **out) {
    if (!out || !tok) {
        if (tok) e->free(tok);
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: NULL argument", fn);
    }
    *out = NULL;
    ffn_vocab *v = calloc(1, sizeof *v);
    if (!v) {
        e->free(tok);
        return ffn_error(FFN_ERR_NOMEM, "vocab: out of memory");
    }
    v->engine = e;
    v->impl = tok;
    *out = v;
    return FFN_OK;
}

ffn_status ffn_vocab_from_tokenizer(ffn_tokenizer *tok, ffn_vocab **out) {
    ffn_status st = vocab_adopt("ffn_vocab_from_tokenizer", &ffn_tokenizer_engine, tok, out);
    if (st == FFN_OK) fill_from_tokenizer(*out, tok);
    return st;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

ffn_status ffn_vocab_from_llama2c(ffn_llama2c_tokenizer *tok, ffn_vocab **out) {
    ffn_status st = vocab_adopt("ffn_vocab_from_llama2c", &llama2c_engine, tok, out);
    if (st) return st;
    ffn_vocab *v = *out;
    v->kind = FFN_VOCAB_LLAMA2C;
    const int64_t V = ffn_llama2c_tokenizer_vocab_size(tok);
    size_t len = 0;
    const char *p0 = ffn_llama2c_tokenizer_token(tok, 0, &len, NULL);
    v->special.unk = p0 && len == 5 && !memcmp(p0, "<unk>", 5) ? 0 : -1;
    v->special.bos = V > FFN_LLAMA2C_BOS ? FFN_LLAMA2C_BOS : -1;
    v->special.eos = V > FFN_LLAMA2C_EOS ? FFN_LLAMA2C_EOS : -1;
    v->special.pad = -1;
    /* byte fallback: every "<0xXX>" piece is there */
    int found[256] = {0}, n_found = 0;
    for (int64_t i = 0; i < V; i++) {
        const char *s = ffn_llama2c_tokenizer_token(tok, (int32_t)i, &len, NULL);
        if (len == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' && s[5] == '>') {
            int hi = hex_digit(s[3]), lo = hex_digit(s[4]);
            if (hi >= 0 && lo >= 0 && !found[hi * 16 + lo]) found[hi * 16 + lo] = 1, n_found++;
        }
    }
    v->byte_fallback = n_found == 256;
    return FFN_OK;
}

ffn_status vocab_borrow_tokenizer(const ffn_tokenizer *tok, ffn_vocab **out) {
    if (!tok || !out) return ffn_error(FFN_ERR_INVALID_ARG, "vocab_borrow_tokenizer: NULL argument");
    *out = NULL;
    ffn_vocab *v = calloc(1, sizeof *v);
    if (!v) return ffn_error(FFN_ERR_NOMEM, "vocab: out of memory");
    fill_from_tokenizer(v, tok);
    v->borrowed = 1;
    *out = v;
    return FFN_OK;
}

void ffn_vocab_free(ffn_vocab *v) {
    if (!v) return;
    if (!v->borrowed) v->engine->free(v->impl);
    free(v);
}

/* ---- loading ---------------------------------------------------------------------- */

#define FFN_MAGIC "ffn-tokenizer "

ffn_status ffn_vocab_parse(const void *buf, size_t n, const char *name, int64_t expected_vocab,
                           ffn_vocab **out) {
    if (!out || (!buf && n)) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_vocab_parse: NULL argument");
    *out = NULL;
    if (!name) name = "vocabulary";
    if (expected_vocab < 0)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: expected_vocab %lld < 0", name,
                         (long long)expected_vocab);
    const size_t nm = strlen(FFN_MAGIC);
    if (n >= nm && !memcmp(buf, FFN_MAGIC, nm)) {
        ffn_tokenizer *t = NULL;
        ffn_status st = ffn_tokenizer_parse(buf, n, name, &t);
        if (st != FFN_OK) return st;
        if (expected_vocab > 0 && ffn_tokenizer_vocab_size(t) != expected_vocab) {
            st = ffn_error(FFN_ERR_CONFIG, "%s: %lld tokens, but the model's vocabulary has %lld",
                           name, (long long)ffn_tokenizer_vocab_size(t), (long long)expected_vocab);
            ffn_tokenizer_free(t);
            return st;
        }
        return ffn_vocab_from_tokenizer(t, out);
    }
    ffn_llama2c_tokenizer *t = NULL;
    ffn_status st = ffn_llama2c_tokenizer_parse(buf, n, name, expected_vocab, &t);
    if (st != FFN_OK)
        return ffn_error_prefix(st, "%s: read as a llama2.c tokenizer.bin (it is not an ffn "
                                "tokenizer file)", name);
    return ffn_vocab_from_llama2c(t, out);
}

ffn_status ffn_vocab_load(const char *path, int64_t expected_vocab, ffn_vocab **out) {
    if (!path || !out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_vocab_load: NULL argument");
    *out = NULL;
    char *buf = NULL;
    size_t n = 0;
    /* ffn_text_read refuses a FIFO or a device by name without blocking */
    ffn_status st = ffn_text_read(path, &buf, &n);
    if (st != FFN_OK) return st;
    st = ffn_vocab_parse(buf, n, path, expected_vocab, out);
    free(buf);
    return st;
}

/* ---- the common calls ------------------------------------------------------------- */

ffn_vocab_kind ffn_vocab_get_kind(const ffn_vocab *v) { return v->kind; }
int64_t ffn_vocab_size(const ffn_vocab *v) { return v ? v->engine->size(v->impl) : 0; }
ffn_vocab_special ffn_vocab_specials(const ffn_vocab *v) { return v->special; }
int ffn_vocab_byte_fallback(const ffn_vocab *v) { return v->byte_fallback; }

const ffn_tokenizer *ffn_vocab_tokenizer(const ffn_vocab *v) {
    return v && v->engine == &ffn_tokenizer_engine ? v->impl : NULL;
}
const ffn_llama2c_tokenizer *ffn_vocab_llama2c(const ffn_vocab *v) {
    return v && v->engine == &llama2c_engine ? v->impl : NULL;
}

ffn_status ffn_vocab_encode(const ffn_vocab *v, const char *text, size_t n, int add_bos,
                            int32_t **ids, int64_t *n_tokens) {
    if (!v || (!text && n) || !ids || !n_tokens)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_vocab_encode: NULL argument");
    *ids = NULL;
    *n_tokens = 0;
    return v->engine->encode(v->impl, text ? text : "", n, add_bos && v->special.bos >= 0, ids,
                             n_tokens);
}

ffn_status ffn_vocab_piece(const ffn_vocab *v, int32_t prev, int32_t id, char byte_buf[1],
                           const char **bytes, size_t *len) {
    if (!v || !byte_buf || !bytes || !len)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_vocab_piece: NULL argument");
    return v->engine->piece(v->impl, prev, id, byte_buf, bytes, len);
}

ffn_status ffn_vocab_decode(const ffn_vocab *v, int32_t prev, const int32_t *ids, int64_t n,
                            char **text, size_t *n_bytes) {
    if (!v || !text || (!ids && n) || n < 0)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_vocab_decode: bad argument");
    *text = NULL;
    if (n_bytes) *n_bytes = 0;
    /* two passes: the size, then the bytes (pieces point into the vocab) */
    size_t total = 0;
    char b1[1];
    for (int64_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        ffn_status st = v->engine->piece(v->impl, i ? ids[i - 1] : prev, ids[i], b1, &s, &len);
        if (st != FFN_OK) return ffn_error_prefix(st, "decode: token %lld", (long long)i);
        if (ffn_add_size(total, len, &total))
            return ffn_error(FFN_ERR_OVERFLOW, "decode: text too long");
    }
    char *out = malloc(total + 1);
    if (!out) return ffn_error(FFN_ERR_NOMEM, "decode: out of memory (%zu bytes)", total);
    size_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        v->engine->piece(v->impl, i ? ids[i - 1] : prev, ids[i], b1, &s, &len);
        memcpy(out + at, s, len);
        at += len;
    }
    out[at] = '\0';
    *text = out;
    if (n_bytes) *n_bytes = at;
    return FFN_OK;
}

ffn_status ffn_vocab_roundtrip(const ffn_vocab *v, const char *text, size_t n, int *exact) {
    if (!v || (!text && n) || !exact)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_vocab_roundtrip: NULL argument");
    *exact = 0;
    int32_t *ids = NULL;
    int64_t m = 0;
    ffn_status st = ffn_vocab_encode(v, text, n, 0, &ids, &m);
    if (st != FFN_OK) return st;
    char *back = NULL;
    size_t nb = 0;
    st = ffn_vocab_decode(v, -1, ids, m, &back, &nb);
    if (st == FFN_OK) {
        /* llama2.c's dummy prefix: the text comes back after a " " */
        const char *b = back;
        if (v->kind == FFN_VOCAB_LLAMA2C && n > 0 && nb == n + 1 && b[0] == ' ') b++, nb--;
        *exact = nb == n && (n == 0 || !memcmp(b, text, n));
    }
    free(ids);
    free(back);
    return st;
}
