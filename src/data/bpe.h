/* bpe.h -- the BPE engine behind Hugging Face tokenizer.json files and
 * GGUF tokenizer metadata (bpe.c: the engine; bpe_load.c: the readers).
 * Internal; not installed.
 *
 * Two flavours share one engine:
 *   byte-level  (GPT-2, Llama-3, Qwen): NFC when the normalizer asks, the
 *               pre-tokenizer regex (PCRE2), bytes shown through GPT-2's
 *               byte map, merges by rank;
 *   sentencepiece (Llama-2, Mistral, TinyLlama): spaces become U+2581
 *               with one prepended, code points with <0xNN> byte fallback,
 *               merges by rank (tokenizer.json) or by the score of the
 *               merged piece (GGUF "llama").
 * Added tokens are matched in the raw text first (longest first) and
 * never pass through normalisation or merges.
 * Letters: V vocabulary size (largest id + 1), M merges, N tokens. */
#ifndef FFN_BPE_H
#define FFN_BPE_H

#include "base/common.h"

#include <stddef.h>
#include <stdint.h>

typedef struct bpe_tokenizer bpe_tokenizer;

typedef enum bpe_flavour { BPE_BYTE_LEVEL = 0, BPE_SENTENCEPIECE = 1 } bpe_flavour;

/* The regex a bare ByteLevel pre-tokenizer means (GPT-2's). */
extern const char bpe_regex_gpt2[];

/* The pre-tokenizers a GGUF's "tokenizer.ggml.pre" names (bpe_pre.c): each
 * a list of regexes applied in turn (every piece the first cuts is cut by
 * the second, and so on; gaps between matches are pieces too), as Hugging
 * Face applies a Sequence of Split pre-tokenizers. */
#define BPE_MAX_SPLITS 8
typedef struct bpe_pre_type {
    const char *const *names;  /* NULL-terminated: the tokenizer.ggml.pre values */
    const char *const *regex;  /* NULL-terminated, at most BPE_MAX_SPLITS */
    int ignore_merges;         /* a word that is a token is that token */
} bpe_pre_type;
/* The entry naming `name`, or NULL. */
const bpe_pre_type *bpe_pre_find(const char *name);
/* Every known name, quoted and comma-separated, into buf (truncated to
 * cap with "..."). */
void bpe_pre_known(char *buf, size_t cap);

/* What a split keeps: matches and the gaps between them (Hugging Face's
 * Split "Isolated"), only the matches ("Removed" inverted), only the gaps
 * ("Removed"). */
enum { BPE_KEEP_ALL = 0, BPE_DROP_GAPS = 1, BPE_DROP_MATCHES = 2 };

typedef struct bpe_added {
    const char *text; /* into the tokenizer's arena */
    size_t len;
    int32_t id;
    int special, lstrip, rstrip;
} bpe_added;

/* The layout, for the readers (bpe_load.c). */
struct bpe_tokenizer {
    bpe_flavour flavour;
    int by_score;          /* merges by the score of the merged piece (GGUF llama) */
    int64_t V;             /* largest id + 1 */
    char **tok;            /* (V) the token as the file writes it, NUL-terminated; NULL: hole */
    uint32_t *tok_len;     /* (V) */
    char **dec;            /* (V) the bytes it decodes to */
    uint32_t *dec_len;     /* (V) */
    float *score;          /* (V) GGUF scores, else 0 */
    uint8_t *special;      /* (V) 1: a special added token */
    struct bpe_tok_slot *table; /* open-addressing hash of tokens -> id (id -1: empty) */
    uint64_t table_mask;
    char *pool;            /* every token's bytes, one after another (the table's strings) */
    struct bpe_merge_slot *merges; /* hash of (left id, right id) -> rank, merged id */
    uint64_t merge_mask;
    int64_t n_merges;
    bpe_added *added;      /* longest first */
    int64_t n_added, cap_added;
    void *re[BPE_MAX_SPLITS]; /* pcre2_code_8 *: the pre-tokenizer's splits, in order */
    uint8_t re_drop[BPE_MAX_SPLITS]; /* BPE_KEEP_ALL, BPE_DROP_GAPS, BPE_DROP_MATCHES */
    int n_re;
    int nfc;               /* normalizer NFC */
    int sp_prepend;        /* prepend U+2581 to each text segment */
    int sp_prepend_first;  /* ... only to the first segment (Metaspace "first") */
    int sp_split;          /* Metaspace split: a word starts at each U+2581 */
    int prefix_space;      /* ByteLevel add_prefix_space */
    int sp_strip;          /* decoder strips one leading space (Strip / Metaspace) */
    int byte_fallback, fuse_unk, ignore_merges;
    int32_t unk, bos, eos, pad;
    int32_t tmpl_pre[4], tmpl_post[4]; /* post-processor template: specials around A */
    int n_pre, n_post;
    int32_t byte_tok[256]; /* id of each byte's token (-1: none) */
    uint32_t byte_cp[256];
    int16_t cp_byte[0x144];
};

/* ---- building (for the readers) ---- */
ffn_status bpe_alloc(bpe_flavour flavour, int64_t V, bpe_tokenizer **out);
/* Set token id (< V) to s[0..n); a repeated id or a repeated text is an error. */
ffn_status bpe_set_token(bpe_tokenizer *t, int32_t id, const char *s, size_t n, const char *what);
ffn_status bpe_add_added(bpe_tokenizer *t, int32_t id, const char *s, size_t n, int special,
                         int lstrip, int rstrip);
/* After every token is set: the hash, decoded pieces, byte tokens. */
ffn_status bpe_index(bpe_tokenizer *t, const char *name);
/* Merge of rank `rank`: both sides and their concatenation must be tokens. */
/* Size the merge table for m merges (before bpe_add_merge). */
ffn_status bpe_reserve_merges(bpe_tokenizer *t, int64_t m);
ffn_status bpe_add_merge(bpe_tokenizer *t, const char *a, size_t na, const char *b, size_t nb,
                         int32_t rank, const char *what);
/* The same for merges in[0..n) of ranks first_rank, first_rank + 1, ...
 * (faster: the lookups of several merges overlap). */
typedef struct bpe_merge_in {
    const char *a;
    size_t na;
    const char *b;
    size_t nb;
} bpe_merge_in;
ffn_status bpe_add_merges(bpe_tokenizer *t, const bpe_merge_in *in, size_t n, int64_t first_rank,
                          const char *what);
int32_t bpe_lookup(const bpe_tokenizer *t, const char *s, size_t n);
/* Compile a pre-tokenizer regex (PCRE2, UTF + UCP) and append it to the
 * splits; errors give PCRE2's message and offset, or say there are more
 * than BPE_MAX_SPLITS. */
ffn_status bpe_add_regex(bpe_tokenizer *t, const char *pattern, const char *what);

/* Readers (bpe_load.c).  `name` is used in messages.  A GGUF is read
 * from the open file's metadata. */
ffn_status bpe_from_tokenizer_json(const char *text, size_t n, const char *name,
                                   const char *config_text, size_t config_n, bpe_tokenizer **out);
struct ffn_gguf_file;
ffn_status bpe_from_gguf(const struct ffn_gguf_file *f, const char *name, bpe_tokenizer **out);
void bpe_free(bpe_tokenizer *t); /* NULL is a no-op */

bpe_flavour bpe_get_flavour(const bpe_tokenizer *t);
int64_t bpe_vocab_size(const bpe_tokenizer *t);
/* bos, eos, unk, pad (-1: none). */
void bpe_specials(const bpe_tokenizer *t, int32_t sp[4]);
int bpe_byte_fallback(const bpe_tokenizer *t);
/* 1 when id is an added token marked special. */
int bpe_is_special(const bpe_tokenizer *t, int32_t id);
/* The token's text as the file writes it (NULL: no token with that id). */
const char *bpe_token(const bpe_tokenizer *t, int32_t id, size_t *len);

/* Encode text into a malloc'd array (free() it); specials: apply the
 * post-processor's template (bos ...). */
ffn_status bpe_encode(const bpe_tokenizer *t, const char *text, size_t n, int specials,
                      int32_t **ids, int64_t *n_tokens);
/* The bytes token id stands for after prev (see vocab.h). */
ffn_status bpe_piece(const bpe_tokenizer *t, int32_t prev, int32_t id, const char **bytes,
                     size_t *len);

#endif /* FFN_BPE_H */
