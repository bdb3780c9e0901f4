/* fuzz_bpe_encode.c -- libFuzzer target for BPE encoding of arbitrary
 * bytes (src/data/bpe.c) with small fixed tokenizers built in memory
 * as tokenizer.json text: byte-level with Llama-3's regex, the same with
 * an NFC normalizer, SentencePiece-style with <0xNN> byte fallback, and
 * byte-level with the splits of each GGUF pre-tokenizer of ffn's table
 * (src/data/bpe_pre.c; the input's first byte picks the entry) as a
 * Sequence of Split pre-tokenizers, with a Digits and a ByteLevel
 * use_regex after them for one in two.
 * Invariants (abort on breach), for every input:
 *   - encoding succeeds and gives ids in [0, V);
 *   - byte-level: decode(encode(x)) == x, byte for byte (also bytes that
 *     are not UTF-8);
 *   - byte-level + NFC: encode(decode(encode(x))) == encode(x);
 *   - SentencePiece, when x holds no added token: decode(encode(x)) is x
 *     with U+2581 turned into spaces.
 * Built by `make fuzz`; -DFFN_FUZZ_REPLAY adds a replaying main(). */
#include "data/bpe.h"
#include "data/unicode.h"
#include "ffn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "fuzz_bpe_encode: invariant failed: %s (line %d)\n", #cond,         \
                    __LINE__);                                                                 \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static void put(sbuf *b, const char *s) {
    size_t k = strlen(s);
    if (b->n + k + 1 > b->cap) {
        b->cap = (b->n + k + 1) * 2;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    memcpy(b->p + b->n, s, k + 1);
    b->n += k;
}

/* The byte-level text of a byte string, as \u escapes for JSON. */
static void put_mapped(sbuf *b, const char *s, const uint32_t map[256]) {
    char e[8];
    for (; *s; s++) {
        snprintf(e, sizeof e, "\\u%04x", (unsigned)map[(unsigned char)*s]);
        put(b, e);
    }
}

static const char *const merges[][2] = {
    {" ", "t"}, {"h", "e"}, {" t", "he"}, {"i", "n"}, {"in", "g"}, {" ", "a"}, {"e", "r"},
    {" ", "w"}, {"o", "r"}, {" w", "or"}, {"l", "d"}, {" wor", "ld"}, {"1", "2"}, {"12", "3"},
    {"\xc3", "\xa9"}, {"e", "\xcc"}, {"\xcc", "\x81"}};
static const char *const added[] = {"<|im_start|>", "<|im_end|>", "<s>"};
#define N_MERGES (sizeof merges / sizeof merges[0])
#define N_ADDED (sizeof added / sizeof added[0])

/* pre: the pre_tokenizer's JSON; NULL: Llama-3's split */
static ffn_vocab *byte_level(int nfc, const char *pre) {
    uint32_t map[256];
    int16_t inv[0x144];
    unicode_byte_map(map, inv);
    sbuf b = {0};
    put(&b, nfc ? "{\"normalizer\": {\"type\": \"NFC\"}," : "{\"normalizer\": null,");
    if (pre) {
        put(&b, "\"pre_tokenizer\": ");
        put(&b, pre);
        put(&b, ", ");
    } else {
        put(&b, "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", "
                "\"pattern\": {\"Regex\": \"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?"
                "\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|"
                "\\\\s+(?!\\\\S)|\\\\s+\"}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": "
                "\"ByteLevel\", \"use_regex\": false}]}, ");
    }
    put(&b, "\"decoder\": {\"type\": \"ByteLevel\"}, \"added_tokens\": [");
    char num[32];
    int id = 256 + (int)N_MERGES;
    for (size_t i = 0; i < N_ADDED; i++) {
        snprintf(num, sizeof num, "%s{\"id\": %d, ", i ? ", " : "", id++);
        put(&b, num);
        put(&b, "\"content\": \"");
        put(&b, added[i]);
        put(&b, "\", \"special\": true}");
    }
    put(&b, "], \"model\": {\"type\": \"BPE\", \"vocab\": {");
    for (int c = 0; c < 256; c++) {
        char s[2] = {(char)c, 0};
        snprintf(num, sizeof num, "%s\"", c ? ", " : "");
        put(&b, num);
        if (c == 0) put(&b, "\\u0100");
        else put_mapped(&b, s, map);
        snprintf(num, sizeof num, "\": %d", c);
        put(&b, num);
    }
    for (size_t i = 0; i < N_MERGES; i++) {
        put(&b, ", \"");
        put_mapped(&b, merges[i][0], map);
        put_mapped(&b, merges[i][1], map);
        snprintf(num, sizeof num, "\": %d", 256 + (int)i);
        put(&b, num);
    }
    put(&b, "}, \"merges\": [");
    for (size_t i = 0; i < N_MERGES; i++) {
        put(&b, i ? ", [\"" : "[\"");
        put_mapped(&b, merges[i][0], map);
        put(&b, "\", \"");
        put_mapped(&b, merges[i][1], map);
        put(&b, "\"]");
    }
    put(&b, "]}}");
    ffn_vocab *v = NULL;
    if (ffn_vocab_parse(b.p, b.n, "fuzz-byte-level.json", 0, &v) != FFN_OK) {
        fprintf(stderr, "%s\n", ffn_last_error());
        abort();
    }
    free(b.p);
    return v;
}

static ffn_vocab *sentencepiece(void) {
    sbuf b = {0};
    put(&b, "{\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", "
            "\"prepend\": \"\\u2581\"}, {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, "
            "\"content\": \"\\u2581\"}]}, \"pre_tokenizer\": null, \"decoder\": {\"type\": "
            "\"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"String\": "
            "\"\\u2581\"}, \"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}, "
            "{\"type\": \"Strip\", \"content\": \" \", \"start\": 1, \"stop\": 0}]},"
            "\"added_tokens\": [{\"id\": 0, \"content\": \"<unk>\", \"special\": true}, {\"id\": 1, "
            "\"content\": \"<s>\", \"special\": true}], \"model\": {\"type\": \"BPE\", \"byte_fallback\": "
            "true, \"fuse_unk\": true, \"unk_token\": \"<unk>\", \"vocab\": {\"<unk>\": 0, \"<s>\": 1");
    char num[64];
    for (int c = 0; c < 256; c++) {
        snprintf(num, sizeof num, ", \"<0x%02X>\": %d", c, 2 + c);
        put(&b, num);
    }
    put(&b, ", \"\\u2581\": 258, \"a\": 259, \"b\": 260, \"\\u2581a\": 261, \"ab\": 262, "
            "\"\\u2581ab\": 263, \"\\u00e9\": 264, \"\\u4f60\": 265}, \"merges\": [\"\\u2581 a\", "
            "\"a b\", \"\\u2581a b\"]}, \"post_processor\": {\"type\": \"TemplateProcessing\", "
            "\"single\": [{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}}, {\"Sequence\": "
            "{\"id\": \"A\", \"type_id\": 0}}], \"special_tokens\": {\"<s>\": {\"id\": \"<s>\", "
            "\"ids\": [1], \"tokens\": [\"<s>\"]}}}}");
    ffn_vocab *v = NULL;
    if (ffn_vocab_parse(b.p, b.n, "fuzz-sentencepiece.json", 0, &v) != FFN_OK) {
        fprintf(stderr, "%s\n", ffn_last_error());
        abort();
    }
    free(b.p);
    return v;
}

/* The splits of a GGUF pre-tokenizer as a tokenizer.json Sequence of Splits
 * (then Digits and ByteLevel's own regex when `more`), malloc'd. */
static char *pre_json(const bpe_pre_type *pt, int more) {
    sbuf b = {0};
    put(&b, "{\"type\": \"Sequence\", \"pretokenizers\": [");
    for (const char *const *re = pt->regex; *re; re++) {
        put(&b, "{\"type\": \"Split\", \"behavior\": \"Isolated\", \"pattern\": {\"Regex\": \"");
        for (const char *c = *re; *c; c++) {
            char e[3] = {'\\', *c, 0};
            put(&b, *c == '\\' || *c == '"' ? e : e + 1);
        }
        put(&b, "\"}}, ");
    }
    put(&b, more ? "{\"type\": \"Digits\", \"individual_digits\": true}, {\"type\": \"ByteLevel\", "
                   "\"use_regex\": true}]}"
                 : "{\"type\": \"ByteLevel\", \"use_regex\": false}]}");
    return b.p;
}

/* The GGUF pre-tokenizers the fuzzer runs (each the first name of an entry or one of its names). */
static const char *const pre_names[] = {"default", "gpt-2", "llama3", "deepseek-llm", "deepseek-coder",
                                        "deepseek-v3", "falcon", "starcoder", "qwen2", "qwen35",
                                        "bloom", "viking", "tekken", "chameleon", "gpt-4o",
                                        "granite-embed-multi-97m", "tiny_aya", "superbpe",
                                        "bailingmoe", "seed-coder", "grok-2", "laguna",
                                        "exaone-moe", "minicpm5", "jais-2", "youtu"};
#define N_PRE (sizeof pre_names / sizeof pre_names[0])
static ffn_vocab *pre_vocab[2 * N_PRE];

static ffn_vocab *bl, *bl_nfc, *sp;

static void encode_ok(const ffn_vocab *v, const char *x, size_t n, int32_t **ids, int64_t *k) {
    ffn_status st = ffn_vocab_encode(v, x, n, 0, ids, k);
    if (st != FFN_OK) fprintf(stderr, "fuzz_bpe_encode: %s\n", ffn_last_error());
    REQUIRE(st == FFN_OK);
    for (int64_t i = 0; i < *k; i++) REQUIRE((*ids)[i] >= 0 && (*ids)[i] < ffn_vocab_size(v));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!bl) {
        bl = byte_level(0, NULL);
        bl_nfc = byte_level(1, NULL);
        sp = sentencepiece();
    }
    if (size > 0) { /* a GGUF pre-tokenizer's splits: decode(encode(x)) == x */
        size_t which = data[0] % (2 * N_PRE);
        if (!pre_vocab[which]) {
            const bpe_pre_type *pt = bpe_pre_find(pre_names[which / 2]);
            REQUIRE(pt != NULL);
            char *pre = pre_json(pt, (int)(which & 1));
            pre_vocab[which] = byte_level(0, pre);
            free(pre);
        }
        int32_t *pids = NULL;
        int64_t pk = 0;
        char *pout = NULL;
        size_t pn = 0;
        if (size <= 4096) {
            encode_ok(pre_vocab[which], (const char *)data, size, &pids, &pk);
            REQUIRE(ffn_vocab_decode(pre_vocab[which], -1, pids, pk, &pout, &pn) == FFN_OK);
            REQUIRE(pn == size && !memcmp(pout, data, size));
        }
        free(pids);
        free(pout);
    }
    if (size > 4096) return 0;
    const char *x = (const char *)data;
    int32_t *ids = NULL, *again = NULL;
    int64_t k = 0, k2 = 0;
    char *out = NULL;
    size_t n = 0;

    encode_ok(bl, x, size, &ids, &k);
    REQUIRE(ffn_vocab_decode(bl, -1, ids, k, &out, &n) == FFN_OK);
    REQUIRE(n == size && (size == 0 || !memcmp(out, x, size)));
    free(out);
    free(ids);

    encode_ok(bl_nfc, x, size, &ids, &k);
    REQUIRE(ffn_vocab_decode(bl_nfc, -1, ids, k, &out, &n) == FFN_OK);
    encode_ok(bl_nfc, out, n, &again, &k2);
    REQUIRE(k2 == k && (k == 0 || !memcmp(ids, again, (size_t)k * sizeof *ids)));
    free(out);
    free(ids);
    free(again);

    encode_ok(sp, x, size, &ids, &k);
    REQUIRE(ffn_vocab_decode(sp, -1, ids, k, &out, &n) == FFN_OK);
    int has_added = memmem(x, size, "<s>", 3) || memmem(x, size, "<unk>", 5);
    if (!has_added) {
        /* x with U+2581 as a space */
        char *want = malloc(size + 1);
        REQUIRE(want != NULL);
        size_t w = 0;
        for (size_t i = 0; i < size;) {
            if (i + 3 <= size && !memcmp(x + i, "\xe2\x96\x81", 3)) want[w++] = ' ', i += 3;
            else want[w++] = x[i++];
        }
        REQUIRE(n == w && (w == 0 || !memcmp(out, want, w)));
        free(want);
    }
    free(out);
    free(ids);
    return 0;
}

#include "replay.h"
FFN_FUZZ_REPLAY_MAIN("fuzz_bpe_encode")
