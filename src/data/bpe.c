/* bpe.c -- the BPE engine of Hugging Face tokenizer.json files and GGUF
 * tokenizers (see bpe.h): the token and merge hash maps, added-token
 * splitting, pre-tokenization (PCRE2), the merge loop, decoding pieces.
 * The readers that fill the tables live in bpe_load.c.
 *
 * Merging one word of S symbols is O(S log S): the candidate pairs sit in a
 * binary heap ordered by (rank, position) -- the lowest rank first, the
 * leftmost among equals, as the reference implementations order them --
 * and a popped pair is used only when both symbols are still what they
 * were when it was pushed. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "data/bpe.h"
#include "data/unicode.h"
#include "data/vocab_internal.h"
#include "format/json.h"

#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

const char bpe_regex_gpt2[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

#define SPACE_MARK "\xE2\x96\x81" /* U+2581, SentencePiece's space */

/* ---- hash maps --------------------------------------------------------------------- */

typedef struct bpe_merge_slot {
    uint64_t key; /* left id << 32 | right id; UINT64_MAX: empty */
    int32_t rank, merged;
} bpe_merge_slot;

/* A slot of the token table: the token's hash (its upper half: the lower
 * bits pick the slot), length and bytes (at pool + off) beside its id, so
 * a probe compares in the slot and reads one string only on a match (a
 * merges' load looks up three tokens for each of 10^5 merges: pointer
 * chasing through tok[] and tok_len[] was most of the load). */
typedef struct bpe_tok_slot {
    uint32_t tag, len, off;
    int32_t id; /* -1: empty */
} bpe_tok_slot;

/* FNV-1a over the bytes, then a final mix: hash_bytes(a ++ b) is
 * hash_end(hash_run(hash_run(HASH_START, a), b)), so a merge hashes the
 * concatenation of its two sides without making it. */
#define HASH_START 1469598103934665603ull
static uint64_t hash_run(uint64_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}
static uint64_t hash_end(uint64_t h) { return h ^ (h >> 29); }
static uint64_t hash_bytes(const char *s, size_t n) { return hash_end(hash_run(HASH_START, s, n)); }

static uint64_t hash_u64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    return k ^ (k >> 33);
}

/* The slot holding the token a[0..na) ++ b[0..nb) (hash hv), else the
 * empty slot where it would go. */
static bpe_tok_slot *tok_slot2(const bpe_tokenizer *t, const char *a, size_t na, const char *b,
                               size_t nb, uint64_t hv) {
    uint32_t tag = (uint32_t)(hv >> 32);
    for (uint64_t h = hv & t->table_mask;; h = (h + 1) & t->table_mask) {
        bpe_tok_slot *e = &t->table[h];
        if (e->id < 0) return e;
        if (e->tag == tag && e->len == na + nb && !memcmp(t->pool + e->off, a, na) &&
            (!nb || !memcmp(t->pool + e->off + na, b, nb)))
            return e;
    }
}

static bpe_tok_slot *tok_slot(const bpe_tokenizer *t, const char *s, size_t n, uint64_t hv) {
    return tok_slot2(t, s, n, "", 0, hv);
}

int32_t bpe_lookup(const bpe_tokenizer *t, const char *s, size_t n) {
    if (!t->table || n > UINT32_MAX) return -1;
    return tok_slot(t, s, n, hash_bytes(s, n))->id;
}

static const bpe_merge_slot *merge_find(const bpe_tokenizer *t, int32_t a, int32_t b) {
    if (!t->merges) return NULL;
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (uint64_t h = hash_u64(key) & t->merge_mask;; h = (h + 1) & t->merge_mask) {
        const bpe_merge_slot *s = &t->merges[h];
        if (s->key == UINT64_MAX) return NULL;
        if (s->key == key) return s;
    }
}

static uint64_t pow2_above(uint64_t n) {
    uint64_t c = 16;
    while (c < 2 * n) c *= 2;
    return c;
}

/* ---- building ------------------------------------------------------------------------ */

ffn_status bpe_alloc(bpe_flavour flavour, int64_t V, bpe_tokenizer **out) {
    *out = NULL;
    if (V < 1 || V > INT32_MAX / 2)
        return ffn_error(FFN_ERR_CONFIG, "tokenizer: vocabulary size %lld outside [1, %d]",
                         (long long)V, INT32_MAX / 2);
    bpe_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return ffn_error(FFN_ERR_NOMEM, "tokenizer: out of memory");
    t->flavour = flavour;
    t->V = V;
    t->tok = calloc((size_t)V, sizeof *t->tok);
    t->tok_len = calloc((size_t)V, sizeof *t->tok_len);
    t->dec = calloc((size_t)V, sizeof *t->dec);
    t->dec_len = calloc((size_t)V, sizeof *t->dec_len);
    t->score = calloc((size_t)V, sizeof *t->score);
    t->special = calloc((size_t)V, sizeof *t->special);
    t->unk = t->bos = t->eos = t->pad = -1;
    unicode_byte_map(t->byte_cp, t->cp_byte);
    for (int b = 0; b < 256; b++) t->byte_tok[b] = -1;
    if (!t->tok || !t->tok_len || !t->dec || !t->dec_len || !t->score || !t->special) {
        bpe_free(t);
        return ffn_error(FFN_ERR_NOMEM, "tokenizer: out of memory (%lld tokens)", (long long)V);
    }
    *out = t;
    return FFN_OK;
}

void bpe_free(bpe_tokenizer *t) {
    if (!t) return;
    for (int64_t i = 0; i < t->V; i++) {
        if (t->dec && t->dec[i] != t->tok[i]) free(t->dec[i]);
        if (t->tok) free(t->tok[i]);
    }
    free(t->tok);
    free(t->tok_len);
    free(t->dec);
    free(t->dec_len);
    free(t->score);
    free(t->special);
    free(t->table);
    free(t->pool);
    free(t->merges);
    free(t->added);
    for (int k = 0; k < t->n_re; k++) pcre2_code_free(t->re[k]);
    free(t);
}

ffn_status bpe_set_token(bpe_tokenizer *t, int32_t id, const char *s, size_t n, const char *what) {
    if (id < 0 || id >= t->V)
        return ffn_error(FFN_ERR_FORMAT, "%s: id %d outside [0, %lld)", what, id, (long long)t->V);
    if (t->tok[id])
        return ffn_error(FFN_ERR_FORMAT, "%s: id %d given twice (\"%s\" and \"%.*s\")", what, id,
                         t->tok[id], (int)(n > 64 ? 64 : n), s);
    if (n > UINT32_MAX / 2) return ffn_error(FFN_ERR_FORMAT, "%s: token %d too long", what, id);
    if (!json_utf8_valid(s, n))
        return ffn_error(FFN_ERR_FORMAT, "%s: token %d is not valid UTF-8", what, id);
    char *c = malloc(n + 1);
    if (!c) return ffn_error(FFN_ERR_NOMEM, "tokenizer: out of memory");
    if (n) memcpy(c, s, n);
    c[n] = '\0';
    t->tok[id] = c;
    t->tok_len[id] = (uint32_t)n;
    return FFN_OK;
}

ffn_status bpe_add_added(bpe_tokenizer *t, int32_t id, const char *s, size_t n, int special,
                         int lstrip, int rstrip) {
    if (id < 0 || id >= t->V)
        return ffn_error(FFN_ERR_FORMAT, "added token \"%.*s\": id %d outside [0, %lld)",
                         (int)(n > 64 ? 64 : n), s, id, (long long)t->V);
    if (n == 0) return ffn_error(FFN_ERR_FORMAT, "added token %d: empty content", id);
    if (t->tok[id]) {
        if (t->tok_len[id] != n || memcmp(t->tok[id], s, n))
            return ffn_error(FFN_ERR_FORMAT,
                             "added token %d: content \"%.*s\" but the vocabulary has \"%s\"", id,
                             (int)(n > 64 ? 64 : n), s, t->tok[id]);
    } else {
        ffn_status st = bpe_set_token(t, id, s, n, "added token");
        if (st) return st;
    }
    bpe_added *a = ffn_grow(t->added, t->n_added, &t->cap_added, sizeof *a, 16);
    if (!a) return ffn_error(FFN_ERR_NOMEM, "tokenizer: out of memory");
    t->added = a;
    a[t->n_added++] = (bpe_added){t->tok[id], n, id, special, lstrip, rstrip};
    t->special[id] = special ? 2 : 1;
    return FFN_OK;
}

static int added_longer_first(const void *pa, const void *pb) {
    const bpe_added *a = pa, *b = pb;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}


/* What token id decodes to (owned by t->dec[id], or t->tok[id] itself). */
static ffn_status make_decoded(bpe_tokenizer *t, int32_t id) {
    const char *s = t->tok[id];
    size_t n = t->tok_len[id];
    if (t->special[id]) {
        t->dec[id] = t->tok[id];
        t->dec_len[id] = (uint32_t)n;
        return FFN_OK;
    }
    char *d = malloc(n + 1);
    if (!d) return ffn_error(FFN_ERR_NOMEM, "tokenizer: out of memory");
    size_t at = 0;
    if (t->flavour == BPE_SENTENCEPIECE) {
        int b = ffn_vocab_byte_token(s, n);
        if (b >= 0) {
            d[at++] = (char)b;
        } else {
            for (size_t i = 0; i < n;) {
                if (i + 3 <= n && !memcmp(s + i, SPACE_MARK, 3)) d[at++] = ' ', i += 3;
                else d[at++] = s[i++];
            }
        }
    } else {
        const unsigned char *u = (const unsigned char *)s;
        for (size_t i = 0; i < n;) {
            uint32_t cp;
            int len = utf8_next(u + i, n - i, &cp);
            if (len == 0) len = 1, cp = 0x110000;
            if (cp < 0x144 && t->cp_byte[cp] >= 0) d[at++] = (char)t->cp_byte[cp];
            else memcpy(d + at, s + i, (size_t)len), at += (size_t)len;
            i += (size_t)len;
        }
    }
    d[at] = '\0';
    t->dec[id] = d;
    t->dec_len[id] = (uint32_t)at;
    return FFN_OK;
}

ffn_status bpe_index(bpe_tokenizer *t, const char *name) {
    uint64_t cap = pow2_above((uint64_t)t->V), bytes = 0;
    for (int32_t id = 0; id < t->V; id++) bytes += t->tok[id] ? t->tok_len[id] : 0;
    if (bytes > UINT32_MAX)
        return ffn_error(FFN_ERR_UNSUPPORTED, "%s: the tokens hold %llu bytes, more than 4 GiB", name,
                         (unsigned long long)bytes);
    t->table = malloc(cap * sizeof *t->table);
    t->pool = malloc(bytes ? bytes : 1);
    if (!t->table || !t->pool) return ffn_error(FFN_ERR_NOMEM, "%s: out of memory", name);
    memset(t->table, 0xff, cap * sizeof *t->table);
    t->table_mask = cap - 1;
    uint32_t off = 0;
    for (int32_t id = 0; id < t->V; id++) {
        if (!t->tok[id]) continue;
        uint32_t n = t->tok_len[id];
        uint64_t hv = hash_bytes(t->tok[id], n);
        bpe_tok_slot *e = tok_slot(t, t->tok[id], n, hv);
        if (e->id >= 0) continue; /* the first id keeps it */
        memcpy(t->pool + off, t->tok[id], n);
        *e = (bpe_tok_slot){(uint32_t)(hv >> 32), n, off, id};
        off += n;
    }
    for (int32_t id = 0; id < t->V; id++) {
        if (!t->tok[id]) continue;
        ffn_status st = make_decoded(t, id);
        if (st) return st;
    }
    if (t->n_added) qsort(t->added, (size_t)t->n_added, sizeof *t->added, added_longer_first);
    for (int b = 0; b < 256; b++) {
        if (t->flavour == BPE_BYTE_LEVEL) {
            char u[4];
            int len = utf8_put(t->byte_cp[b], u);
            t->byte_tok[b] = bpe_lookup(t, u, (size_t)len);
        } else {
            char hex[7];
            snprintf(hex, sizeof hex, "<0x%02X>", b);
            t->byte_tok[b] = bpe_lookup(t, hex, 6);
        }
    }
    return FFN_OK;
}

/* Merges of ranks first_rank, first_rank + 1, ... as bpe_add_merge each, in
 * order, MERGE_BATCH at a time: the batch's token-table slots are hashed
 * and prefetched first, then looked up, then its merge-table slots
 * likewise, so the cache misses of a batch overlap (a tokenizer.json's
 * 10^5 merges are three token lookups and one insert each, all misses). */
#define MERGE_BATCH 32
ffn_status bpe_add_merges(bpe_tokenizer *t, const bpe_merge_in *in, size_t n, int64_t first_rank,
                          const char *what) {
    if (!t->merges) return ffn_error(FFN_ERR_INVALID_ARG, "tokenizer: merges table not sized");
    for (size_t at = 0; at < n; at += MERGE_BATCH) {
        size_t k = n - at < MERGE_BATCH ? n - at : MERGE_BATCH;
        uint64_t hv[MERGE_BATCH][3], key[MERGE_BATCH];
        int32_t merged[MERGE_BATCH];
        for (size_t j = 0; j < k; j++) {
            const bpe_merge_in *m = &in[at + j];
            uint64_t ha = hash_run(HASH_START, m->a, m->na);
            hv[j][0] = hash_end(ha);
            hv[j][1] = hash_bytes(m->b, m->nb);
            hv[j][2] = hash_end(hash_run(ha, m->b, m->nb));
            for (int c = 0; c < 3; c++) __builtin_prefetch(&t->table[hv[j][c] & t->table_mask]);
        }
        for (size_t j = 0; j < k; j++) {
            const bpe_merge_in *m = &in[at + j];
            int64_t rank = first_rank + (int64_t)j + (int64_t)at;
            size_t na = m->na, nb = m->nb;
            int32_t ia = na > UINT32_MAX ? -1 : tok_slot(t, m->a, na, hv[j][0])->id;
            int32_t ib = nb > UINT32_MAX ? -1 : tok_slot(t, m->b, nb, hv[j][1])->id;
            if (ia < 0 || ib < 0)
                return ffn_error(FFN_ERR_FORMAT,
                                 "%s: merge %lld names \"%.*s\", which is not in the vocabulary", what,
                                 (long long)rank, (int)((ia < 0 ? na : nb) > 64 ? 64 : (ia < 0 ? na : nb)),
                                 ia < 0 ? m->a : m->b);
            int32_t im = na + nb > UINT32_MAX ? -1 : tok_slot2(t, m->a, na, m->b, nb, hv[j][2])->id;
            if (im < 0)
                return ffn_error(FFN_ERR_FORMAT,
                                 "%s: merge %lld (\"%.*s\" \"%.*s\") makes a token that is not in the "
                                 "vocabulary", what, (long long)rank, (int)(na > 64 ? 64 : na), m->a,
                                 (int)(nb > 64 ? 64 : nb), m->b);
            key[j] = (uint64_t)(uint32_t)ia << 32 | (uint32_t)ib;
            merged[j] = im;
            __builtin_prefetch(&t->merges[hash_u64(key[j]) & t->merge_mask], 1);
        }
        for (size_t j = 0; j < k; j++) {
            uint64_t h = hash_u64(key[j]) & t->merge_mask;
            int repeated = 0; /* a repeated merge keeps its first rank */
            while (t->merges[h].key != UINT64_MAX && !repeated) {
                repeated = t->merges[h].key == key[j];
                h = (h + 1) & t->merge_mask;
            }
            if (repeated) continue;
            t->merges[h] = (bpe_merge_slot){key[j], (int32_t)(first_rank + (int64_t)(at + j)),
                                            merged[j]};
            t->n_merges++;
        }
    }
    return FFN_OK;
}

ffn_status bpe_add_merge(bpe_tokenizer *t, const char *a, size_t na, const char *b, size_t nb,
                         int32_t rank, const char *what) {
    const bpe_merge_in m = {a, na, b, nb};
    return bpe_add_merges(t, &m, 1, rank, what);
}

ffn_status bpe_reserve_merges(bpe_tokenizer *t, int64_t m) {
    uint64_t cap = pow2_above((uint64_t)(m > 0 ? m : 1));
    t->merges = malloc(cap * sizeof *t->merges);
    if (!t->merges) return ffn_error(FFN_ERR_NOMEM, "tokenizer: out of memory (%lld merges)", (long long)m);
    for (uint64_t i = 0; i < cap; i++) t->merges[i].key = UINT64_MAX;
    t->merge_mask = cap - 1;
    return FFN_OK;
}

ffn_status bpe_add_regex(bpe_tokenizer *t, const char *pattern, const char *what) {
    if (t->n_re >= BPE_MAX_SPLITS)
        return ffn_error(FFN_ERR_FORMAT, "%s: more than %d regex splits in the pre-tokenizer are "
                         "unsupported", what, BPE_MAX_SPLITS);
    int err = 0;
    PCRE2_SIZE off = 0;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return ffn_error(FFN_ERR_FORMAT, "%s: regex does not compile (PCRE2: %s at offset %zu): %s",
                         what, (const char *)msg, (size_t)off, pattern);
    }
    /* complete and partial (the bounded split's windows); without JIT it still matches, slower */
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE | PCRE2_JIT_PARTIAL_HARD);
    t->re[t->n_re++] = re;
    return FFN_OK;
}

/* ---- queries ----------------------------------------------------------------------------- */

bpe_flavour bpe_get_flavour(const bpe_tokenizer *t) { return t->flavour; }
int64_t bpe_vocab_size(const bpe_tokenizer *t) { return t->V; }
void bpe_specials(const bpe_tokenizer *t, int32_t sp[4]) {
    sp[0] = t->bos, sp[1] = t->eos, sp[2] = t->unk, sp[3] = t->pad;
}
int bpe_byte_fallback(const bpe_tokenizer *t) {
    for (int b = 0; b < 256; b++)
        if (t->byte_tok[b] < 0) return 0;
    return 1;
}
int bpe_is_special(const bpe_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->V && t->special[id] == 2;
}
const char *bpe_token(const bpe_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->V || !t->tok[id]) return NULL;
    if (len) *len = t->tok_len[id];
    return t->tok[id];
}

ffn_status bpe_piece(const bpe_tokenizer *t, int32_t prev, int32_t id, const char **bytes,
                     size_t *len) {
    if (id < 0 || id >= t->V)
        return ffn_error(FFN_ERR_INVALID_ARG, "vocab: token id %d outside the vocabulary [0, %lld)",
                         id, (long long)t->V);
    if (!t->tok[id])
        return ffn_error(FFN_ERR_INVALID_ARG, "vocab: token id %d has no text in the vocabulary", id);
    *bytes = t->dec[id];
    *len = t->dec_len[id];
    /* the decoder's Strip: the first space of the text goes -- only at its
     * very start, as in the reference ("<s>" then "\u2581Hi" is "<s> Hi") */
    if (t->sp_strip && prev < 0 && *len > 0 && (*bytes)[0] == ' ' && !t->special[id])
        (*bytes)++, (*len)--;
    return FFN_OK;
}

/* ---- encoding ------------------------------------------------------------------------------ */

typedef struct sym {
    int32_t id;           /* token (rank mode); -1 until resolved (score mode) */
    int32_t start, len;   /* bytes of the word */
    int32_t prev, next;   /* -1: none; len 0: merged away */
} sym;

typedef struct cand {
    double key;           /* rank, or -score */
    int32_t pos, a, b, merged; /* a, b: ids (rank mode) or lengths (score mode) */
} cand;

typedef struct scratch {
    int32_t *ids;
    int64_t n_ids, cap_ids;
    sym *syms;
    int64_t cap_syms;
    cand *heap;
    int64_t n_heap, cap_heap;
    char *buf;            /* a mapped / normalised word */
    int64_t cap_buf;
    pcre2_match_data *md;
    uint64_t re_budget;   /* retried window bytes left for this call (see encode_split) */
    /* words seen in this call -> their ids (long texts repeat their words) */
    struct cache_slot *cache; /* CACHE_SLOTS, or NULL: no cache */
    int64_t cache_used;
    char *cache_bytes;
    int64_t n_cache_bytes, cap_cache_bytes;
    int32_t *cache_ids;
    int64_t n_cache_ids, cap_cache_ids;
} scratch;

typedef struct cache_slot {
    uint32_t key_off, key_len, ids_off, n_ids; /* key_len 0: empty */
} cache_slot;

#define CACHE_SLOTS ((int64_t)1 << 16)
#define CACHE_MAX_WORD 64
#define CACHE_MIN_TEXT 4096 /* shorter texts do without */

static ffn_status oom(void) { return ffn_error(FFN_ERR_NOMEM, "tokenizer: out of memory while encoding"); }

static ffn_status emit(scratch *s, int32_t id) {
    int32_t *p = ffn_grow(s->ids, s->n_ids, &s->cap_ids, sizeof *p, 64);
    if (!p) return oom();
    s->ids = p;
    s->ids[s->n_ids++] = id;
    return FFN_OK;
}

static int cand_less(const cand *x, const cand *y) {
    return x->key < y->key || (x->key == y->key && x->pos < y->pos);
}

static ffn_status heap_push(scratch *s, cand c) {
    cand *h = ffn_grow(s->heap, s->n_heap, &s->cap_heap, sizeof *h, 64);
    if (!h) return oom();
    s->heap = h;
    int64_t i = s->n_heap++;
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (!cand_less(&c, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
    return FFN_OK;
}

static cand heap_pop(scratch *s) {
    cand *h = s->heap, top = h[0], last = h[--s->n_heap];
    int64_t i = 0, n = s->n_heap;
    for (;;) {
        int64_t l = 2 * i + 1, m = i;
        if (l < n && cand_less(&h[l], &last)) m = l;
        if (l + 1 < n && cand_less(&h[l + 1], m == i ? &last : &h[l])) m = l + 1;
        if (m == i) break;
        h[i] = h[m];
        i = m;
    }
    if (n > 0) h[i] = last;
    return top;
}

static ffn_status reserve_syms(scratch *s, int64_t n) {
    if (n <= s->cap_syms) return FFN_OK;
    int64_t c = s->cap_syms ? s->cap_syms : 64;
    while (c < n) c *= 2;
    sym *p = realloc(s->syms, (size_t)c * sizeof *p);
    if (!p) return oom();
    s->syms = p;
    s->cap_syms = c;
    return FFN_OK;
}

static ffn_status reserve_buf(scratch *s, int64_t n) {
    if (n <= s->cap_buf) return FFN_OK;
    int64_t c = s->cap_buf ? s->cap_buf : 256;
    while (c < n) c *= 2;
    char *p = realloc(s->buf, (size_t)c);
    if (!p) return oom();
    s->buf = p;
    s->cap_buf = c;
    return FFN_OK;
}

/* Rank mode: push the pair starting at symbol i when it merges. */
static ffn_status push_rank_pair(const bpe_tokenizer *t, scratch *s, int32_t i) {
    int32_t j = s->syms[i].next;
    if (j < 0) return FFN_OK;
    const bpe_merge_slot *m = merge_find(t, s->syms[i].id, s->syms[j].id);
    if (!m) return FFN_OK;
    return heap_push(s, (cand){(double)m->rank, i, s->syms[i].id, s->syms[j].id, m->merged});
}

/* Score mode: push the pair at i when the joined bytes are a token. */
static ffn_status push_score_pair(const bpe_tokenizer *t, scratch *s, const char *w, int32_t i) {
    int32_t j = s->syms[i].next;
    if (j < 0) return FFN_OK;
    int32_t id = bpe_lookup(t, w + s->syms[i].start, (size_t)(s->syms[i].len + s->syms[j].len));
    if (id < 0) return FFN_OK;
    return heap_push(s, (cand){-(double)t->score[id], i, s->syms[i].len, s->syms[j].len, id});
}

/* Append a symbol; an unk right after an unk joins it when fuse_unk. */
static void add_sym(const bpe_tokenizer *t, scratch *s, int32_t *S, int32_t id, int32_t start,
                    int32_t len) {
    if (id >= 0 && id == t->unk && t->fuse_unk && *S > 0 && s->syms[*S - 1].id == t->unk) {
        s->syms[*S - 1].len += len;
        return;
    }
    s->syms[*S] = (sym){id, start, len, *S - 1, -1};
    if (*S > 0) s->syms[*S - 1].next = *S;
    (*S)++;
}

static ffn_status no_token(const bpe_tokenizer *t, size_t at) {
    (void)t;
    return ffn_error(FFN_ERR_INVALID_ARG, "tokenizer: the text at byte %zu has no token, no byte "
                     "fallback and the vocabulary no unk token", at);
}

/* Merge the word w[0..n) and emit its ids. */
static ffn_status encode_word(const bpe_tokenizer *t, scratch *s, const char *w, size_t n) {
    if (n == 0) return FFN_OK;
    if (n > INT32_MAX / 8) return ffn_error(FFN_ERR_OVERFLOW, "tokenizer: word too long");
    ffn_status st;
    const unsigned char *u = (const unsigned char *)w;
    if (t->ignore_merges || n == 1) { /* the word as a whole may be a token */
        int32_t id;
        if (t->flavour == BPE_BYTE_LEVEL) {
            if ((st = reserve_buf(s, (int64_t)n * 2 + 1))) return st;
            size_t at = 0;
            for (size_t i = 0; i < n; i++) at += (size_t)utf8_put(t->byte_cp[u[i]], s->buf + at);
            id = bpe_lookup(t, s->buf, at);
        } else {
            id = bpe_lookup(t, w, n);
        }
        if (id >= 0) return emit(s, id);
    }
    /* the initial symbols: bytes (byte-level) or code points */
    if ((st = reserve_syms(s, (int64_t)n))) return st;
    int32_t S = 0;
    for (size_t i = 0; i < n;) {
        if (t->flavour == BPE_BYTE_LEVEL) {
            int32_t id = t->byte_tok[u[i]];
            if (id < 0 && (id = t->unk) < 0) return no_token(t, i);
            add_sym(t, s, &S, id, (int32_t)i, 1);
            i++;
            continue;
        }
        uint32_t cp;
        int32_t len = utf8_next(u + i, n - i, &cp);
        if (len == 0) len = 1;
        if (t->by_score) { /* resolved after merging */
            add_sym(t, s, &S, -1, (int32_t)i, len);
            i += (size_t)len;
            continue;
        }
        int32_t id = bpe_lookup(t, w + i, (size_t)len);
        if (id >= 0) {
            add_sym(t, s, &S, id, (int32_t)i, len);
        } else {
            int ok = t->byte_fallback;
            for (int32_t k = 0; ok && k < len; k++) ok = t->byte_tok[u[i + (size_t)k]] >= 0;
            if (ok) {
                for (int32_t k = 0; k < len; k++)
                    add_sym(t, s, &S, t->byte_tok[u[i + (size_t)k]], (int32_t)i + k, 1);
            } else {
                if (t->unk < 0) return no_token(t, i);
                add_sym(t, s, &S, t->unk, (int32_t)i, len);
            }
        }
        i += (size_t)len;
    }
    if (S == 0) return FFN_OK;
    /* merge */
    s->n_heap = 0;
    for (int32_t i = 0; i + 1 < S; i++) {
        st = t->by_score ? push_score_pair(t, s, w, i) : push_rank_pair(t, s, i);
        if (st) return st;
    }
    while (s->n_heap > 0) {
        cand c = heap_pop(s);
        sym *a = &s->syms[c.pos];
        if (a->len == 0 || a->next < 0) continue;
        sym *b = &s->syms[a->next];
        if (t->by_score ? (a->len != c.a || b->len != c.b) : (a->id != c.a || b->id != c.b)) continue;
        a->id = c.merged;
        a->len += b->len;
        a->next = b->next;
        if (b->next >= 0) s->syms[b->next].prev = c.pos;
        b->len = 0;
        if (a->prev >= 0) {
            st = t->by_score ? push_score_pair(t, s, w, a->prev) : push_rank_pair(t, s, a->prev);
            if (st) return st;
        }
        st = t->by_score ? push_score_pair(t, s, w, c.pos) : push_rank_pair(t, s, c.pos);
        if (st) return st;
    }
    int last_unk = 0;
    for (int32_t i = 0; i >= 0; i = s->syms[i].next) {
        const sym *y = &s->syms[i];
        int32_t id = y->id;
        if (t->by_score && id < 0) id = bpe_lookup(t, w + y->start, (size_t)y->len);
        if (id >= 0) {
            last_unk = 0;
            if ((st = emit(s, id))) return st;
            continue;
        }
        /* score mode: a code point that is no token falls back to bytes */
        int ok = t->byte_fallback;
        for (int32_t k = 0; ok && k < y->len; k++) ok = t->byte_tok[u[y->start + k]] >= 0;
        if (ok) {
            last_unk = 0;
            for (int32_t k = 0; k < y->len; k++)
                if ((st = emit(s, t->byte_tok[u[y->start + k]]))) return st;
        } else {
            if (t->unk < 0) return no_token(t, (size_t)y->start);
            if (!(t->fuse_unk && last_unk) && (st = emit(s, t->unk))) return st;
            last_unk = 1;
        }
    }
    return FFN_OK;
}

/* encode_word through the call's cache of words already merged. */
static ffn_status encode_word_cached(const bpe_tokenizer *t, scratch *s, const char *w, size_t n) {
    if (!s->cache || n == 0 || n > CACHE_MAX_WORD) return encode_word(t, s, w, n);
    uint64_t h = hash_bytes(w, n) & (uint64_t)(CACHE_SLOTS - 1);
    for (;; h = (h + 1) & (uint64_t)(CACHE_SLOTS - 1)) {
        const cache_slot *c = &s->cache[h];
        if (c->key_len == 0) break;
        if (c->key_len == n && !memcmp(s->cache_bytes + c->key_off, w, n)) {
            for (uint32_t k = 0; k < c->n_ids; k++) {
                ffn_status st = emit(s, s->cache_ids[c->ids_off + k]);
                if (st) return st;
            }
            return FFN_OK;
        }
    }
    int64_t before = s->n_ids;
    ffn_status st = encode_word(t, s, w, n);
    if (st || s->cache_used >= CACHE_SLOTS / 2) return st;
    int64_t m = s->n_ids - before;
    if (s->n_cache_bytes + (int64_t)n > UINT32_MAX / 2 || s->n_cache_ids + m > UINT32_MAX / 2) return FFN_OK;
    while (s->n_cache_bytes + (int64_t)n > s->cap_cache_bytes) {
        char *p = ffn_grow(s->cache_bytes, s->cap_cache_bytes, &s->cap_cache_bytes, 1, 1 << 16);
        if (!p) return FFN_OK; /* no room: the cache just stops growing */
        s->cache_bytes = p;
    }
    while (s->n_cache_ids + m > s->cap_cache_ids) {
        int32_t *p = ffn_grow(s->cache_ids, s->cap_cache_ids, &s->cap_cache_ids, sizeof *p, 1 << 14);
        if (!p) return FFN_OK;
        s->cache_ids = p;
    }
    memcpy(s->cache_bytes + s->n_cache_bytes, w, n);
    if (m) memcpy(s->cache_ids + s->n_cache_ids, s->ids + before, (size_t)m * sizeof *s->ids);
    s->cache[h] = (cache_slot){(uint32_t)s->n_cache_bytes, (uint32_t)n, (uint32_t)s->n_cache_ids,
                               (uint32_t)m};
    s->n_cache_bytes += (int64_t)n;
    s->n_cache_ids += m;
    s->cache_used++;
    return FFN_OK;
}

/* ---- pre-tokenization: the regex split, with its work bounded ----------------------
 *
 * A pattern's lookahead may read to the end of the text on every match
 * (`\S(?=[\s\S]*x)`), which makes splitting quadratic in the text: PCRE2's
 * match and depth limits bound one call, not the calls of one input.  So
 * every match runs over a window of the text (RE_WINDOW bytes from where it
 * starts) with PCRE2_PARTIAL_HARD: a match that needed to read past the
 * window's end comes back partial and is run again over a window twice as
 * long, up to the whole text.  The result is exactly that of matching over
 * the whole text (a complete match of PARTIAL_HARD never looked past its
 * window), and the patterns of real tokenizers, whose matches are words,
 * numbers, runs of punctuation or of spaces, retry only at the odd match
 * that straddles a window's end.  The retried windows are the work a
 * pattern costs beyond the linear; they are bounded per input
 * (RE_BUDGET_FACTOR times its length, plus RE_BUDGET_BASE bytes, for all
 * the splits of one call together).  A
 * pattern that exhausts the bound (the hostile kind) gets the rest of the
 * input in pieces of RE_PIECE bytes (at character boundaries), each split
 * as a text of its own -- as the reference libraries cut long inputs into
 * chunks -- so its cost stays linear in the input; its tokens then differ
 * from a whole-text split only near the cuts. */
enum { RE_WINDOW = 1024, RE_PIECE = 256, RE_BUDGET_FACTOR = 8, RE_BUDGET_BASE = 1 << 20 };

/* min(pos, n), moved back to the start of a UTF-8 character, never to `at` or before */
static size_t char_boundary(const char *x, size_t n, size_t at, size_t pos) {
    if (pos >= n) return n;
    while (pos > at + 1 && ((unsigned char)x[pos] & 0xC0) == 0x80) pos--;
    return pos;
}

static ffn_status encode_split(const bpe_tokenizer *t, scratch *s, const char *x, size_t n, int k);

/* pcre2_match, again through the interpreter (whose backtracking lives on
 * the heap) when the JIT's stack is too small for the match: nested
 * quantifiers over a long run (Exaone's letters and spaces) need more than
 * its default 32 KiB. */
static int re_match(const pcre2_code *re, const char *x, size_t n, size_t at, uint32_t opts,
                    pcre2_match_data *md) {
    int rc = pcre2_match(re, (PCRE2_SPTR)x, n, at, opts, md, NULL);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
        rc = pcre2_match(re, (PCRE2_SPTR)x, n, at, opts | PCRE2_NO_JIT, md, NULL);
    return rc;
}

/* A piece of split k: cut by the next split, or a word after the last. */
static ffn_status split_piece(const bpe_tokenizer *t, scratch *s, const char *x, size_t n, int k) {
    return k + 1 < t->n_re ? encode_split(t, s, x, n, k + 1) : encode_word_cached(t, s, x, n);
}

/* Byte-level: regex split k (matches and the gaps between them), each
 * piece cut by the splits after it, then a word. */
static ffn_status encode_split(const bpe_tokenizer *t, scratch *s, const char *x, size_t n, int k) {
    if (t->n_re == 0) return encode_word_cached(t, s, x, n);
    if (n == 0) return FFN_OK;
    const pcre2_code *re = t->re[k];
    size_t at = 0, last = 0;
    uint64_t *budget = &s->re_budget; /* shared by the nested splits of the call */
    int pieces = 0;             /* the bound is spent: split the rest in pieces */
    size_t seg0 = 0, seg1 = 0;  /* the current piece */
    ffn_status st;
    while (at <= n) {
        int rc = PCRE2_ERROR_PARTIAL;
        size_t base = 0, end = n;
        for (size_t w = RE_WINDOW; !pieces;) {
            end = char_boundary(x, n, at, at + w);
            rc = re_match(re, x, end, at, end < n ? PCRE2_PARTIAL_HARD : 0, s->md);
            if (rc != PCRE2_ERROR_PARTIAL) break;
            if (*budget < end - at) pieces = 1;
            else *budget -= end - at, w *= 2;
        }
        if (!pieces && rc == PCRE2_ERROR_NOMATCH && end < n) {
            /* no match starts in the window (none read past it): the next window */
            at = end;
            continue;
        }
        if (pieces) {
            if (at >= seg1 && (seg1 < n || seg1 == 0)) seg0 = at, seg1 = char_boundary(x, n, at, at + RE_PIECE);
            base = seg0;
            rc = re_match(re, x + seg0, seg1 - seg0, at - seg0, 0, s->md);
            if (rc == PCRE2_ERROR_NOMATCH && seg1 < n) { /* none in this piece: the next */
                at = seg1;
                continue;
            }
        }
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return ffn_error(FFN_ERR_INVALID_ARG, "tokenizer: regex match failed at byte %zu: %s",
                             at, (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
        size_t ms = base + ov[0], me = base + ov[1];
        const int drop = t->re_drop[k];
        if (ms > last && drop != BPE_DROP_GAPS && (st = split_piece(t, s, x + last, ms - last, k)))
            return st;
        if (me > ms && drop != BPE_DROP_MATCHES && (st = split_piece(t, s, x + ms, me - ms, k)))
            return st;
        last = me;
        if (me == ms) { /* an empty match: step one character */
            uint32_t cp;
            int len = me < n ? utf8_next((const unsigned char *)x + me, n - me, &cp) : 1;
            at = me + (size_t)(len ? len : 1);
            continue;
        }
        at = me;
    }
    if (last < n && t->re_drop[k] != BPE_DROP_GAPS) return split_piece(t, s, x + last, n - last, k);
    return FFN_OK;
}

/* One stretch of text between added tokens. */
static ffn_status encode_segment(const bpe_tokenizer *t, scratch *s, const char *x, size_t n,
                                 int first_segment) {
    if (n == 0) return FFN_OK;
    ffn_status st = FFN_OK;
    char *norm = NULL;
    size_t nn = 0;
    if (t->nfc) {
        if ((st = unicode_nfc(x, n, &norm, &nn))) return st;
        if (norm) x = norm, n = nn;
    }
    if (t->flavour == BPE_BYTE_LEVEL) {
        if (t->prefix_space && x[0] != ' ') {
            char *p = malloc(n + 2);
            if (!p) {
                free(norm);
                return oom();
            }
            p[0] = ' ';
            memcpy(p + 1, x, n);
            free(norm);
            norm = p;
            x = p;
            n++;
        }
        st = encode_split(t, s, x, n, 0);
        free(norm);
        return st;
    }
    /* SentencePiece: spaces become U+2581, one prepended */
    int prepend = t->sp_prepend && (!t->sp_prepend_first || first_segment);
    if (prepend && t->sp_prepend == 2 && n >= 3 && !memcmp(x, SPACE_MARK, 3)) prepend = 0;
    if (prepend && t->sp_prepend == 2 && x[0] == ' ') prepend = 0; /* the space becomes the mark */
    size_t cap = 3 * n + 4;
    char *w = malloc(cap);
    if (!w) {
        free(norm);
        return oom();
    }
    size_t at = 0;
    if (prepend) memcpy(w, SPACE_MARK, 3), at = 3;
    for (size_t i = 0; i < n; i++) {
        if (x[i] == ' ') memcpy(w + at, SPACE_MARK, 3), at += 3;
        else w[at++] = x[i];
    }
    if (t->sp_split) {
        size_t start = 0;
        for (size_t i = 3; i + 3 <= at && !st; i++)
            if (!memcmp(w + i, SPACE_MARK, 3)) {
                st = encode_word_cached(t, s, w + start, i - start);
                start = i;
            }
        if (!st) st = encode_word_cached(t, s, w + start, at - start);
    } else {
        st = encode_word(t, s, w, at);
    }
    free(w);
    free(norm);
    return st;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

ffn_status bpe_encode(const bpe_tokenizer *t, const char *text, size_t n, int specials,
                      int32_t **ids, int64_t *n_tokens) {
    *ids = NULL;
    *n_tokens = 0;
    scratch s = {0};
    ffn_status st = FFN_OK;
    /* one ovector pair is all a split reads (a pattern's groups need none) */
    if (t->n_re && !(s.md = pcre2_match_data_create(1, NULL))) return oom();
    s.re_budget = (uint64_t)RE_BUDGET_FACTOR * n + RE_BUDGET_BASE;
    if (n >= CACHE_MIN_TEXT) s.cache = calloc((size_t)CACHE_SLOTS, sizeof *s.cache); /* NULL: none */
    if (specials)
        for (int i = 0; i < t->n_pre && !st; i++) st = emit(&s, t->tmpl_pre[i]);
    /* which first bytes can start an added token */
    uint8_t first[256] = {0};
    for (int64_t k = 0; k < t->n_added; k++) first[(unsigned char)t->added[k].text[0]] = 1;
    size_t seg = 0;
    int n_seg = 0;
    for (size_t i = 0; i < n && !st;) {
        const bpe_added *hit = NULL;
        if (first[(unsigned char)text[i]])
            for (int64_t k = 0; k < t->n_added; k++) {
                const bpe_added *a = &t->added[k];
                if (a->len <= n - i && !memcmp(text + i, a->text, a->len)) {
                    hit = a;
                    break; /* longest first */
                }
            }
        if (!hit) {
            i++;
            continue;
        }
        size_t end = i;
        if (hit->lstrip)
            while (end > seg && is_space(text[end - 1])) end--;
        st = encode_segment(t, &s, text + seg, end - seg, n_seg++ == 0);
        if (!st) st = emit(&s, hit->id);
        i += hit->len;
        if (hit->rstrip)
            while (i < n && is_space(text[i])) i++;
        seg = i;
    }
    if (!st && seg < n) st = encode_segment(t, &s, text + seg, n - seg, n_seg == 0);
    if (specials)
        for (int i = 0; i < t->n_post && !st; i++) st = emit(&s, t->tmpl_post[i]);
    free(s.cache);
    free(s.cache_bytes);
    free(s.cache_ids);
    free(s.syms);
    free(s.heap);
    free(s.buf);
    if (s.md) pcre2_match_data_free(s.md);
    if (st) {
        free(s.ids);
        return st;
    }
    *ids = s.ids;
    *n_tokens = s.n_ids;
    return FFN_OK;
}
