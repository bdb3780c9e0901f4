/* llama2c_vocab.c -- the llama2.c tokenizer.bin vocabulary: parse (every
 * count and length checked against what is left of the file), encode (BPE
 * merges by score, <0xXX> byte fallback), decode.  The format is described
 * in include/ffn/vocab.h.  It is one engine behind ffn_vocab (vocab.c).
 *
 * Letters: V vocab size. */
#include "base/common.h"
#include "ffn/vocab.h"
#include "base/open.h"
#include "data/vocab_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* ---- tokenizer.bin -------------------------------------------------------------- */

struct ffn_llama2c_tokenizer {
    int64_t V;
    int32_t max_len;      /* max_token_length from the file */
    char *bytes;          /* every piece, back to back, each followed by a NUL */
    int64_t *start;       /* (V) piece i is bytes[start[i] .. start[i] + len[i]) */
    int32_t *len;         /* (V) */
    float *score;         /* (V) */
    int32_t *sorted;      /* (V) ids ordered by piece bytes (for lookup) */
    int32_t byte_id[256]; /* the "<0xXX>" piece of each byte, or -1 */
};

void ffn_llama2c_tokenizer_free(ffn_llama2c_tokenizer *t) {
    if (!t) return;
    FFN_FREE_ALL(t->bytes, t->start, t->len, t->score, t->sorted, t);
}

typedef struct piece_ref {
    const char *s;
    int32_t len, id;
} piece_ref;

static int by_piece(const void *x, const void *y) {
    const piece_ref *a = x, *b = y;
    int c = ffn_bytes_cmp(a->s, (size_t)a->len, b->s, (size_t)b->len);
    return c ? c : (a->id < b->id ? -1 : a->id > b->id);
}

/* The id of the piece s[0..n), the lowest id among equal pieces; -1 if none. */
static int32_t lookup(const ffn_llama2c_tokenizer *t, const char *s, size_t n) {
    int64_t lo = 0, hi = t->V;
    while (lo < hi) { /* first index whose piece is >= s */
        int64_t mid = lo + (hi - lo) / 2;
        int32_t id = t->sorted[mid];
        if (ffn_bytes_cmp(t->bytes + t->start[id], (size_t)t->len[id], s, n) < 0) lo = mid + 1;
        else hi = mid;
    }
    if (lo < t->V) {
        int32_t id = t->sorted[lo];
        if (!ffn_bytes_cmp(t->bytes + t->start[id], (size_t)t->len[id], s, n)) return id;
    }
    return -1;
}


ffn_status ffn_llama2c_tokenizer_parse(const void *buf, size_t n_bytes, const char *name,
                                       int64_t expected_vocab, ffn_llama2c_tokenizer **out) {
    if (!out || (!buf && n_bytes)) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_llama2c_tokenizer_parse: NULL argument");
    *out = NULL;
    if (!name) name = "tokenizer.bin";
    const unsigned char *b = buf;
    if (n_bytes < 4)
        return ffn_error(FFN_ERR_FORMAT, "%s: %zu bytes: too short for a llama2.c tokenizer "
                         "(int32 max_token_length first)", name, n_bytes);
    ffn_sniff kind = ffn_sniff_bytes(buf, n_bytes);
    if (ffn_sniff_is_magic(kind) && kind != FFN_SNIFF_LLAMA2C_CHECKPOINT) /* that one: below */
        return ffn_error(FFN_ERR_FORMAT, "%s is %s, not a llama2.c tokenizer.bin%s%s", name,
                         ffn_sniff_name(kind), kind == FFN_SNIFF_FFN_TOKENIZER ? "" : "; ",
                         kind == FFN_SNIFF_FFN_TOKENIZER ? "" : ffn_sniff_advice(kind));
    if (kind == FFN_SNIFF_LLAMA2C_CHECKPOINT) { /* the header: dim, hidden_dim, n_layers, ... */
        int32_t dim, n_layers;
        memcpy(&dim, b, 4);
        memcpy(&n_layers, b + 8, 4);
        return ffn_error(FFN_ERR_FORMAT, "%s is a llama2.c checkpoint (dim %d, %d layers), not a "
                         "tokenizer.bin; the model goes first, its vocabulary to --tokenizer",
                         name, (int)dim, (int)n_layers);
    }
    int32_t max_len;
    memcpy(&max_len, b, 4);
    if (max_len < 1 || max_len > FFN_LLAMA2C_MAX_TOKEN_LEN)
        return ffn_error(FFN_ERR_FORMAT, "%s: max_token_length is %d, expected 1..%d", name,
                         max_len, FFN_LLAMA2C_MAX_TOKEN_LEN);
    if (expected_vocab < 0 || expected_vocab > INT32_MAX)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: expected vocabulary %lld out of range", name,
                         (long long)expected_vocab);
    /* Pass 1: validate and count (no allocation depends on the file's claims). */
    size_t off = 4, piece_bytes = 0;
    int64_t V = 0;
    while (off < n_bytes && (expected_vocab == 0 || V < expected_vocab)) {
        if (n_bytes - off < 8)
            return ffn_error(FFN_ERR_FORMAT, "%s: token %lld at byte %zu: the file ends inside its "
                             "score and length (8 bytes needed, %zu left)", name, (long long)V, off,
                             n_bytes - off);
        float score;
        int32_t len;
        memcpy(&score, b + off, 4);
        memcpy(&len, b + off + 4, 4);
        if (!isfinite(score))
            return ffn_error(FFN_ERR_FORMAT, "%s: token %lld at byte %zu: score is not finite", name,
                             (long long)V, off);
        if (len < 0 || len > max_len)
            return ffn_error(FFN_ERR_FORMAT, "%s: token %lld at byte %zu: length %d, expected "
                             "0..max_token_length %d", name, (long long)V, off, len, max_len);
        off += 8;
        if ((size_t)len > n_bytes - off)
            return ffn_error(FFN_ERR_FORMAT, "%s: token %lld: length %d but only %zu bytes are left",
                             name, (long long)V, len, n_bytes - off);
        off += (size_t)len;
        piece_bytes += (size_t)len + 1;
        V++;
        if (V > INT32_MAX)
            return ffn_error(FFN_ERR_FORMAT, "%s: more than 2^31 - 1 tokens", name);
    }
    if (expected_vocab > 0 && V < expected_vocab)
        return ffn_error(FFN_ERR_FORMAT, "%s: %lld tokens, but the model's vocabulary has %lld",
                         name, (long long)V, (long long)expected_vocab);
    if (off != n_bytes)
        return ffn_error(FFN_ERR_FORMAT, "%s: %zu trailing bytes after the %lld tokens of the "
                         "vocabulary", name, n_bytes - off, (long long)V);
    if (V == 0) return ffn_error(FFN_ERR_FORMAT, "%s: no tokens", name);
    ffn_llama2c_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return ffn_error(FFN_ERR_NOMEM, "out of memory");
    t->V = V;
    t->max_len = max_len;
    t->bytes = malloc(piece_bytes);
    t->start = malloc((size_t)V * sizeof *t->start);
    t->len = malloc((size_t)V * sizeof *t->len);
    t->score = malloc((size_t)V * sizeof *t->score);
    t->sorted = malloc((size_t)V * sizeof *t->sorted);
    if (!t->bytes || !t->start || !t->len || !t->score || !t->sorted) {
        ffn_llama2c_tokenizer_free(t);
        return ffn_error(FFN_ERR_NOMEM, "%s: out of memory (%lld tokens)", name, (long long)V);
    }
    /* Pass 2: fill. */
    off = 4;
    size_t at = 0;
    for (int64_t i = 0; i < V; i++) {
        int32_t len;
        memcpy(&t->score[i], b + off, 4);
        memcpy(&len, b + off + 4, 4);
        off += 8;
        memcpy(t->bytes + at, b + off, (size_t)len);
        t->bytes[at + (size_t)len] = '\0';
        t->start[i] = (int64_t)at;
        t->len[i] = len;
        t->sorted[i] = (int32_t)i;
        off += (size_t)len;
        at += (size_t)len + 1;
    }
    piece_ref *refs = malloc((size_t)V * sizeof *refs);
    if (!refs) {
        ffn_llama2c_tokenizer_free(t);
        return ffn_error(FFN_ERR_NOMEM, "%s: out of memory (%lld tokens)", name, (long long)V);
    }
    for (int64_t i = 0; i < V; i++)
        refs[i] = (piece_ref){t->bytes + t->start[i], t->len[i], (int32_t)i};
    qsort(refs, (size_t)V, sizeof *refs, by_piece);
    for (int64_t i = 0; i < V; i++) t->sorted[i] = refs[i].id;
    free(refs);
    for (int i = 0; i < 256; i++) t->byte_id[i] = -1;
    for (int64_t i = V - 1; i >= 0; i--) {
        int byte = ffn_vocab_byte_token(t->bytes + t->start[i], (size_t)t->len[i]);
        if (byte >= 0) t->byte_id[byte] = (int32_t)i;
    }
    *out = t;
    return FFN_OK;
}

ffn_status ffn_llama2c_tokenizer_load(const char *path, int64_t expected_vocab,
                                      ffn_llama2c_tokenizer **out) {
    if (!path || !out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_llama2c_tokenizer_load: NULL argument");
    *out = NULL;
    char *data;
    size_t size;
    /* ffn_text_read refuses a FIFO or a device by name without blocking */
    ffn_status st = ffn_text_read(path, &data, &size);
    if (st) return st;
    st = ffn_llama2c_tokenizer_parse(data, size, path, expected_vocab, out);
    free(data);
    return st;
}

int64_t ffn_llama2c_tokenizer_vocab_size(const ffn_llama2c_tokenizer *t) { return t ? t->V : 0; }

const char *ffn_llama2c_tokenizer_token(const ffn_llama2c_tokenizer *t, int32_t id, size_t *len,
                                        float *score) {
    if (!t || id < 0 || id >= t->V) return NULL;
    if (len) *len = (size_t)t->len[id];
    if (score) *score = t->score[id];
    return t->bytes + t->start[id];
}

ffn_status ffn_llama2c_tokenizer_encode(const ffn_llama2c_tokenizer *t, const char *text,
                                        size_t n_bytes, int bos, int eos, int32_t **ids_out,
                                        int64_t *n_out) {
    if (!t || (!text && n_bytes) || !ids_out || !n_out)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_llama2c_tokenizer_encode: NULL argument");
    *ids_out = NULL;
    *n_out = 0;
    if ((bos && t->V <= FFN_LLAMA2C_BOS) || (eos && t->V <= FFN_LLAMA2C_EOS))
        return ffn_error(FFN_ERR_INVALID_ARG, "encode: the vocabulary (%lld tokens) has no BOS/EOS id",
                         (long long)t->V);
    size_t cap;
    if (ffn_add_size(n_bytes, 3, &cap) || cap > ((size_t)1 << 40) / sizeof(int32_t))
        return ffn_error(FFN_ERR_OVERFLOW, "encode: text of %zu bytes is too long", n_bytes);
    int32_t *ids = malloc(cap * sizeof *ids);
    char *merged = malloc(2 * (size_t)t->max_len + 1);
    if (!ids || !merged) {
        free(ids);
        free(merged);
        return ffn_error(FFN_ERR_NOMEM, "encode: out of memory");
    }
    int64_t n = 0;
    if (bos) ids[n++] = FFN_LLAMA2C_BOS;
    if (n_bytes > 0) { /* SentencePiece's dummy prefix: a leading space */
        int32_t sp = lookup(t, " ", 1);
        if (sp >= 0) ids[n++] = sp;
    }
    /* One token per UTF-8 code point in the vocabulary, else its bytes. */
    char cp[4];
    size_t cp_len = 0;
    for (size_t i = 0; i < n_bytes; i++) {
        unsigned char c = (unsigned char)text[i];
        if ((c & 0xC0) != 0x80) cp_len = 0; /* a new code point starts */
        cp[cp_len++] = (char)c;
        if (i + 1 < n_bytes && (((unsigned char)text[i + 1]) & 0xC0) == 0x80 && cp_len < 4)
            continue;
        int32_t id = lookup(t, cp, cp_len);
        if (id >= 0) {
            ids[n++] = id;
        } else {
            for (size_t k = 0; k < cp_len; k++) {
                int32_t bid = t->byte_id[(unsigned char)cp[k]];
                ids[n++] = bid >= 0 ? bid : 0; /* no byte piece: <unk> (id 0) */
            }
        }
        cp_len = 0;
    }
    /* Merge the best-scoring adjacent pair until none merges.  BOS takes
     * no part in merges (llama2.c's BOS piece never concatenates into a
     * piece, but a stranger's vocabulary could make it). */
    const int64_t first = bos ? 1 : 0;
    for (;;) {
        float best = -1e10f;
        int64_t best_i = -1;
        int32_t best_id = -1;
        for (int64_t i = first; i + 1 < n; i++) {
            size_t la = (size_t)t->len[ids[i]], lb = (size_t)t->len[ids[i + 1]];
            memcpy(merged, t->bytes + t->start[ids[i]], la);
            memcpy(merged + la, t->bytes + t->start[ids[i + 1]], lb);
            int32_t id = lookup(t, merged, la + lb);
            if (id >= 0 && t->score[id] > best) {
                best = t->score[id];
                best_i = i;
                best_id = id;
            }
        }
        if (best_i < 0) break;
        ids[best_i] = best_id;
        memmove(ids + best_i + 1, ids + best_i + 2, (size_t)(n - best_i - 2) * sizeof *ids);
        n--;
    }
    if (eos) ids[n++] = FFN_LLAMA2C_EOS;
    free(merged);
    *ids_out = ids;
    *n_out = n;
    return FFN_OK;
}

ffn_status ffn_llama2c_tokenizer_piece(const ffn_llama2c_tokenizer *t, int32_t prev, int32_t id,
                                       char byte_buf[1], const char **bytes, size_t *len) {
    if (!t || !bytes || !len || !byte_buf)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_llama2c_tokenizer_piece: NULL argument");
    if (id < 0 || id >= t->V)
        return ffn_error(FFN_ERR_INVALID_ARG, "decode: token id %d outside the vocabulary [0, %lld)",
                         id, (long long)t->V);
    const char *s = t->bytes + t->start[id];
    size_t n = (size_t)t->len[id];
    if (prev == FFN_LLAMA2C_BOS && n > 0 && s[0] == ' ') { /* after BOS: no leading space */
        s++;
        n--;
    }
    int byte = ffn_vocab_byte_token(s, n);
    if (byte >= 0) {
        byte_buf[0] = (char)byte;
        s = byte_buf;
        n = 1;
    }
    *bytes = s;
    *len = n;
    return FFN_OK;
}

ffn_status ffn_llama2c_tokenizer_decode(const ffn_llama2c_tokenizer *t, int32_t prev,
                                        const int32_t *ids, int64_t n, char **text,
                                        size_t *n_bytes) {
    if (!t || (!ids && n) || n < 0 || !text)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_llama2c_tokenizer_decode: bad argument");
    *text = NULL;
    size_t cap = 1;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->V)
            return ffn_error(FFN_ERR_INVALID_ARG, "decode: token %lld: id %d outside the "
                             "vocabulary [0, %lld)", (long long)i, ids[i], (long long)t->V);
        cap += (size_t)t->len[ids[i]];
    }
    char *out = malloc(cap), b1[1];
    if (!out) return ffn_error(FFN_ERR_NOMEM, "decode: out of memory");
    size_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        ffn_llama2c_tokenizer_piece(t, prev, ids[i], b1, &s, &len);
        memcpy(out + at, s, len);
        at += len;
        prev = ids[i];
    }
    out[at] = '\0';
    *text = out;
    if (n_bytes) *n_bytes = at;
    return FFN_OK;
}
