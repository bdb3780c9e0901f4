/* vocab.c -- ffn_vocab: one interface over the vocabulary engines (see
 * include/ffn/vocab.h).  Each engine is a table of four functions; what
 * is common (decode, the round-trip check, detection of the file kind)
 * is written once here over those tables.
 *
 * Engines: ffn's tokenizers (data.c: byte, char, word) and the llama2.c
 * tokenizer.bin (llama2c_vocab.c).  Letters: V vocab size, N tokens. */
#include "data/bpe.h"
#include "data/vocab_internal.h"
#include "data/unicode.h"
#include "ffn/gguf.h"

#include <stdio.h>
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

/* ---- engine: BPE (tokenizer.json, GGUF) ----------------------------------------------- */

static ffn_status bpe_v_encode(const void *impl, const char *text, size_t n, int add_bos,
                               int32_t **ids, int64_t *n_tokens) {
    ffn_status st = bpe_encode(impl, text, n, add_bos, ids, n_tokens);
    if (st == FFN_OK && *n_tokens == 0) {
        free(*ids);
        *ids = NULL;
    }
    return st;
}

static ffn_status bpe_v_piece(const void *impl, int32_t prev, int32_t id, char byte_buf[1],
                              const char **bytes, size_t *len) {
    (void)byte_buf;
    return bpe_piece(impl, prev, id, bytes, len);
}

static int64_t bpe_v_size(const void *impl) { return bpe_vocab_size(impl); }
static void bpe_v_free(void *impl) { bpe_free(impl); }

static const vocab_engine bpe_engine = {bpe_v_encode, bpe_v_piece, bpe_v_size, bpe_v_free};

static ffn_status vocab_from_bpe(bpe_tokenizer *t, ffn_vocab **out);

/* ---- wrapping ------------------------------------------------------------------------ */

const char *ffn_vocab_kind_name(ffn_vocab_kind kind) {
    switch (kind) {
    case FFN_VOCAB_BYTE: return "byte";
    case FFN_VOCAB_CHAR: return "char";
    case FFN_VOCAB_WORD: return "word";
    case FFN_VOCAB_LLAMA2C: return "llama2c";
    case FFN_VOCAB_BPE_BYTE: return "bpe-byte-level";
    case FFN_VOCAB_BPE_SP: return "bpe-sentencepiece";
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

static ffn_status vocab_from_bpe(bpe_tokenizer *t, ffn_vocab **out) {
    ffn_status st = vocab_adopt("vocab_from_bpe", &bpe_engine, t, out);
    if (st) return st;
    ffn_vocab *v = *out;
    v->kind = bpe_get_flavour(t) == BPE_BYTE_LEVEL ? FFN_VOCAB_BPE_BYTE : FFN_VOCAB_BPE_SP;
    int32_t sp[4];
    bpe_specials(t, sp);
    v->special = (ffn_vocab_special){sp[0], sp[1], sp[2], sp[3]};
    v->byte_fallback = bpe_byte_fallback(t);
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

/* A JSON object: "{", then '"' or "}" (spaces between).  A llama2.c
 * tokenizer.bin whose max_token_length is 123 also starts with "{", then a
 * zero byte. */
static int looks_like_json(const void *buf, size_t n) {
    const char *c = buf;
    size_t i = 0;
    int seen_brace = 0;
    for (; i < n; i++) {
        char x = c[i];
        if (x == ' ' || x == '\t' || x == '\n' || x == '\r') continue;
        if (!seen_brace) {
            if (x != '{') return 0;
            seen_brace = 1;
            continue;
        }
        return x == '"' || x == '}';
    }
    return 0;
}

/* A Hugging Face tokenizer may hold fewer ids than the model's embedding
 * (Qwen pads V to a multiple of 128): it must not hold more. */
static ffn_status check_bpe_size(ffn_vocab **out, const char *name, int64_t expected_vocab) {
    if (expected_vocab > 0 && ffn_vocab_size(*out) > expected_vocab) {
        ffn_status st = ffn_error(FFN_ERR_CONFIG, "%s: %lld token ids, but the model's vocabulary has "
                                  "%lld", name, (long long)ffn_vocab_size(*out),
                                  (long long)expected_vocab);
        ffn_vocab_free(*out);
        *out = NULL;
        return st;
    }
    return FFN_OK;
}

static ffn_status vocab_parse_json(const char *buf, size_t n, const char *name, const char *cfg,
                                   size_t cfg_n, int64_t expected_vocab, ffn_vocab **out) {
    bpe_tokenizer *t = NULL;
    ffn_status st = bpe_from_tokenizer_json(buf, n, name, cfg, cfg_n, &t);
    if (st != FFN_OK) return st;
    if ((st = vocab_from_bpe(t, out))) return st;
    return check_bpe_size(out, name, expected_vocab);
}

/* The vocabulary ffn keeps exactly inside a GGUF it wrote (see
 * vocab_internal.h), when there is one: *found = 1. */
static ffn_status vocab_from_gguf_ffn_keys(const ffn_gguf_file *g, const char *name,
                                           int64_t expected_vocab, ffn_vocab **out, int *found) {
    const char *s = NULL, *cfg = NULL;
    size_t n = 0, cfg_n = 0;
    char what[512];
    *found = 0;
    if (ffn_gguf_find_key(g, FFN_GGUF_KEY_TOKENIZER) >= 0) {
        *found = 1;
        ffn_status st = ffn_gguf_get_str(g, FFN_GGUF_KEY_TOKENIZER, &s, &n);
        if (st != FFN_OK) return st;
        snprintf(what, sizeof what, "%s: %s", name, FFN_GGUF_KEY_TOKENIZER);
        return ffn_vocab_parse(s, n, what, expected_vocab, out);
    }
    if (ffn_gguf_find_key(g, FFN_GGUF_KEY_TOKENIZER_JSON) >= 0) {
        *found = 1;
        ffn_status st = ffn_gguf_get_str(g, FFN_GGUF_KEY_TOKENIZER_JSON, &s, &n);
        if (st == FFN_OK && ffn_gguf_find_key(g, FFN_GGUF_KEY_TOKENIZER_CONFIG) >= 0)
            st = ffn_gguf_get_str(g, FFN_GGUF_KEY_TOKENIZER_CONFIG, &cfg, &cfg_n);
        if (st != FFN_OK) return st;
        snprintf(what, sizeof what, "%s: %s", name, FFN_GGUF_KEY_TOKENIZER_JSON);
        return vocab_parse_json(s, n, what, cfg, cfg_n, expected_vocab, out);
    }
    return FFN_OK;
}

static ffn_status vocab_from_gguf_file(const ffn_gguf_file *g, const char *name,
                                       int64_t expected_vocab, ffn_vocab **out) {
    int found = 0;
    ffn_status st = vocab_from_gguf_ffn_keys(g, name, expected_vocab, out, &found);
    if (found || st != FFN_OK) return st;
    bpe_tokenizer *t = NULL;
    st = bpe_from_gguf(g, name, &t);
    if (st != FFN_OK) return st;
    if ((st = vocab_from_bpe(t, out))) return st;
    return check_bpe_size(out, name, expected_vocab);
}

ffn_status ffn_vocab_from_gguf(const ffn_gguf_file *file, int64_t expected_vocab, ffn_vocab **out) {
    if (!file || !out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_vocab_from_gguf: NULL argument");
    *out = NULL;
    return vocab_from_gguf_file(file, ffn_gguf_path(file), expected_vocab, out);
}

ffn_status ffn_vocab_parse(const void *buf, size_t n, const char *name, int64_t expected_vocab,
                           ffn_vocab **out) {
    if (!out || (!buf && n)) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_vocab_parse: NULL argument");
    *out = NULL;
    if (!name) name = "vocabulary";
    if (expected_vocab < 0)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: expected_vocab %lld < 0", name,
                         (long long)expected_vocab);
    const size_t nm = strlen(FFN_MAGIC);
    if (looks_like_json(buf, n)) return vocab_parse_json(buf, n, name, NULL, 0, expected_vocab, out);
    if (n >= 4 && !memcmp(buf, "GGUF", 4)) {
        ffn_gguf_file *g = NULL;
        ffn_status st = ffn_gguf_open_buffer(buf, n, name, &g);
        if (st != FFN_OK) return st;
        st = vocab_from_gguf_file(g, name, expected_vocab, out);
        ffn_gguf_close(g);
        return st;
    }
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

/* "dir/name" into a malloc'd string. */
static char *join_path(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static int is_regular(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

int vocab_dir_json_is_export(const char *dir) {
    char *jp = join_path(dir, "tokenizer.json"), *tp = join_path(dir, FFN_TOKENIZER_FILENAME);
    int yes = 0;
    if (jp && tp && is_regular(jp) && is_regular(tp)) {
        ffn_tokenizer *tok = NULL;
        char *want = NULL, *have = NULL;
        size_t nw = 0, nh = 0;
        if (ffn_tokenizer_load(tp, &tok) == FFN_OK && tokenizer_to_hf_json(tok, &want, &nw) == FFN_OK &&
            ffn_text_read(jp, &have, &nh) == FFN_OK)
            yes = nw == nh && !memcmp(want, have, nw);
        ffn_tokenizer_free(tok);
        free(want);
        free(have);
    }
    free(jp);
    free(tp);
    return yes;
}

ffn_status ffn_vocab_find_in_dir(const char *dir, char **path) {
    if (!dir || !path) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_vocab_find_in_dir: NULL argument");
    *path = NULL;
    /* tokenizer.json first, unless it is ffn's own export of the
     * tokenizer.txt beside it (export --format hf): then tokenizer.txt */
    static const char *const names[] = {"tokenizer.json", FFN_TOKENIZER_FILENAME, "tokenizer.bin"};
    const int skip_json = vocab_dir_json_is_export(dir);
    for (size_t i = skip_json; i < sizeof names / sizeof names[0]; i++) {
        char *p = join_path(dir, names[i]);
        if (!p) return ffn_error(FFN_ERR_NOMEM, "vocab: out of memory");
        if (is_regular(p)) {
            *path = p;
            return FFN_OK;
        }
        free(p);
    }
    return ffn_error(FFN_ERR_IO, "%s: no tokenizer.json, %s or tokenizer.bin in the directory",
                     dir, FFN_TOKENIZER_FILENAME);
}

ffn_status ffn_vocab_load(const char *path, int64_t expected_vocab, ffn_vocab **out) {
    if (!path || !out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_vocab_load: NULL argument");
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        char *p = NULL;
        ffn_status st = ffn_vocab_find_in_dir(path, &p);
        if (st != FFN_OK) return st;
        st = ffn_vocab_load(p, expected_vocab, out);
        free(p);
        return st;
    }
    char *buf = NULL;
    size_t n = 0;
    /* ffn_text_read refuses a FIFO or a device by name without blocking */
    ffn_status st = ffn_text_read(path, &buf, &n);
    if (st != FFN_OK) return st;
    if (looks_like_json(buf, n)) {
        /* tokenizer_config.json beside it names the special tokens */
        char *cfg = NULL, *cfg_path = NULL;
        size_t cfg_n = 0;
        const char *slash = strrchr(path, '/');
        if (slash) {
            size_t dl = (size_t)(slash - path);
            char *dir = malloc(dl + 1);
            if (dir) {
                memcpy(dir, path, dl);
                dir[dl] = '\0';
                cfg_path = join_path(dir, "tokenizer_config.json");
                free(dir);
            }
        } else {
            cfg_path = join_path(".", "tokenizer_config.json");
        }
        if (cfg_path && is_regular(cfg_path) && ffn_text_read(cfg_path, &cfg, &cfg_n) != FFN_OK)
            cfg = NULL;
        free(cfg_path);
        st = vocab_parse_json(buf, n, path, cfg, cfg_n, expected_vocab, out);
        free(cfg);
    } else {
        st = ffn_vocab_parse(buf, n, path, expected_vocab, out);
    }
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

int ffn_vocab_is_special(const ffn_vocab *v, int32_t id) {
    if (!v) return 0;
    if (v->engine == &bpe_engine) return bpe_is_special(v->impl, id);
    const ffn_vocab_special s = v->special;
    return id >= 0 && (id == s.bos || id == s.eos || id == s.pad);
}

const char *ffn_vocab_token(const ffn_vocab *v, int32_t id, size_t *len) {
    if (!v) return NULL;
    if (v->engine == &bpe_engine) return bpe_token(v->impl, id, len);
    if (v->engine == &llama2c_engine) return ffn_llama2c_tokenizer_token(v->impl, id, len, NULL);
    return ffn_tokenizer_token(v->impl, id, len);
}

ffn_status ffn_vocab_encode(const ffn_vocab *v, const char *text, size_t n, int add_bos,
                            int32_t **ids, int64_t *n_tokens) {
    if (!v || (!text && n) || !ids || !n_tokens)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_vocab_encode: NULL argument");
    *ids = NULL;
    *n_tokens = 0;
    /* the Hugging Face engines' template may hold other specials than bos */
    int specials = v->engine == &bpe_engine ? add_bos != 0 : add_bos && v->special.bos >= 0;
    return v->engine->encode(v->impl, text ? text : "", n, specials, ids,
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
    return ffn_vocab_decode_ex(v, prev, ids, n, 0, text, n_bytes);
}

ffn_status ffn_vocab_decode_ex(const ffn_vocab *v, int32_t prev, const int32_t *ids, int64_t n,
                               int skip_special, char **text, size_t *n_bytes) {
    if (!v || !text || (!ids && n) || n < 0)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_vocab_decode: bad argument");
    if (skip_special) {
        /* the same decode over the ids that are not special; the first one
         * kept follows `prev` as if the skipped ones were not there */
        int32_t *kept = n ? malloc((size_t)n * sizeof *kept) : NULL;
        if (n && !kept) return ffn_error(FFN_ERR_NOMEM, "decode: out of memory");
        int64_t k = 0;
        for (int64_t i = 0; i < n; i++)
            if (!ffn_vocab_is_special(v, ids[i])) kept[k++] = ids[i];
        ffn_status st = ffn_vocab_decode_ex(v, prev, kept, k, 0, text, n_bytes);
        free(kept);
        return st;
    }
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

/* ---- words typed by a user ------------------------------------------------------ */

/* CJK characters and CJK / fullwidth punctuation: no spaces around them. */
static int unspaced(uint32_t c) {
    return (c >= 0x3000 && c <= 0x30FF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0xF900 && c <= 0xFAFF) ||
           (c >= 0xFF00 && c <= 0xFF65) || (c >= 0x20000 && c <= 0x2FFFF);
}

static int is_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* The last code point of s[0..n) (0 when none or not UTF-8). */
static uint32_t last_cp(const char *s, size_t n) {
    size_t i = n;
    while (i > 0 && ((unsigned char)s[i - 1] & 0xC0) == 0x80 && n - i < 3) i--;
    if (i == 0) return 0;
    uint32_t cp = 0;
    return utf8_next((const unsigned char *)s + i - 1, n - i + 1, &cp) > 0 ? cp : 0;
}

int ffn_vocab_word_space(const char *text, const char *word) {
    if (!text || !word) return 0;
    size_t n = strlen(text);
    if (n == 0 || is_ws((unsigned char)text[n - 1]) || !*word || is_ws((unsigned char)word[0])) return 0;
    uint32_t first = 0;
    if (utf8_next((const unsigned char *)word, strlen(word), &first) <= 0) first = 0;
    return !unspaced(last_cp(text, n)) && !unspaced(first);
}

ffn_status ffn_vocab_check_known(const ffn_vocab *v, const int32_t *ids, int64_t n_ids, const char *what,
                                 const char *text, size_t n) {
    const int32_t unk = v ? ffn_vocab_specials(v).unk : -1;
    if (unk < 0) return FFN_OK;
    for (int64_t i = 0; i < n_ids; i++) {
        if (ids[i] != unk) continue;
        const ffn_vocab_kind k = ffn_vocab_get_kind(v);
        return ffn_error(FFN_ERR_INVALID_ARG, "%s '%.*s': %s is not in the model's vocabulary (%s, "
                         "%lld tokens)%s", what ? what : "text", (int)n, text,
                         k == FFN_VOCAB_CHAR ? "a character" : k == FFN_VOCAB_WORD ? "a word" : "a token",
                         ffn_vocab_kind_name(k), (long long)ffn_vocab_size(v),
                         k == FFN_VOCAB_CHAR || k == FFN_VOCAB_WORD
                             ? "; use words of the text the model was trained on" : "");
    }
    return FFN_OK;
}

ffn_status ffn_vocab_encode_word(const ffn_vocab *v, const char *text, const char *word, const char *what,
                                 int32_t **ids, int64_t *n_ids, int *prefix_space) {
    if (!v || !text || !word || !ids || !n_ids)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_vocab_encode_word: NULL argument");
    *ids = NULL;
    *n_ids = 0;
    if (!what) what = "word";
    if (!*word) return ffn_error(FFN_ERR_INVALID_ARG, "%s: empty", what);
    const int sp = ffn_vocab_word_space(text, word);
    if (prefix_space) *prefix_space = sp;
    size_t n = strlen(word);
    char *s = malloc(n + 2);
    if (!s) return ffn_error(FFN_ERR_NOMEM, "%s: out of memory", what);
    if (sp) s[0] = ' ';
    memcpy(s + sp, word, n + 1);
    ffn_status st = ffn_vocab_encode(v, s, n + (size_t)sp, 0, ids, n_ids);
    if (st) st = ffn_error_prefix(st, "%s '%s'", what, word);
    if (!st && *n_ids == 0) st = ffn_error(FFN_ERR_INVALID_ARG, "%s '%s': encodes to no tokens", what, word);
    if (!st) st = ffn_vocab_check_known(v, *ids, *n_ids, what, word, n);
    free(s);
    if (st) {
        free(*ids);
        *ids = NULL;
        *n_ids = 0;
    }
    return st;
}
