/* fuzz_tokenizer_json.c -- libFuzzer target for the tokenizer.json reader
 * (src/data/bpe_load.c) and the BPE engine behind it.  The input is the
 * file.  Invariants (abort on breach):
 *   - a rejected file gives no vocabulary and a non-empty message;
 *   - an accepted one has V >= 1; encoding text (the input's first bytes,
 *     a fixed sentence with an added-token look-alike, the empty text)
 *     gives ids in [0, V) and decoding them succeeds (NUL-terminated);
 *   - every token's stored text and piece can be read.
 * Built by `make fuzz`; -DFFN_FUZZ_REPLAY adds a replaying main(). */
#include "ffn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "fuzz_tokenizer_json: invariant failed: %s (line %d)\n", #cond,     \
                    __LINE__);                                                                 \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

static void check_encode(const ffn_vocab *v, const char *text, size_t n, int specials) {
    const int64_t V = ffn_vocab_size(v);
    int32_t *ids = NULL;
    int64_t k = 0;
    if (ffn_vocab_encode(v, text, n, specials, &ids, &k) != FFN_OK) {
        /* allowed only for a vocabulary that cannot spell everything */
        REQUIRE(ids == NULL && ffn_last_error()[0] != '\0');
        return;
    }
    for (int64_t i = 0; i < k; i++) REQUIRE(ids[i] >= 0 && ids[i] < V);
    char *out = NULL;
    size_t len = 0;
    REQUIRE(ffn_vocab_decode_ex(v, -1, ids, k, 0, &out, &len) == FFN_OK);
    REQUIRE(out != NULL && out[len] == '\0');
    free(out);
    REQUIRE(ffn_vocab_decode_ex(v, -1, ids, k, 1, &out, &len) == FFN_OK);
    free(out);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0 || data[0] != '{') return 0; /* other readers own the rest */
    ffn_vocab *v = (ffn_vocab *)1;
    if (ffn_vocab_parse(data, size, "fuzz.json", 0, &v) != FFN_OK) {
        REQUIRE(v == NULL);
        REQUIRE(ffn_last_error()[0] != '\0');
        return 0;
    }
    REQUIRE(v != NULL);
    const int64_t V = ffn_vocab_size(v);
    REQUIRE(V >= 1);
    for (int32_t i = 0; i < V && i < 4096; i++) {
        size_t len = 0;
        const char *s = ffn_vocab_token(v, i, &len);
        if (!s) continue;
        const char *p;
        char b1[1];
        REQUIRE(ffn_vocab_piece(v, -1, i, b1, &p, &len) == FFN_OK);
    }
    check_encode(v, (const char *)data, size < 256 ? size : 256, 1);
    static const char sentence[] = "Hello  world<|im_start|> caf\x65\xcc\x81 123456 \xe4\xbd\xa0\xff!\n";
    check_encode(v, sentence, sizeof sentence - 1, 0);
    check_encode(v, "", 0, 1);
    ffn_vocab_free(v);
    return 0;
}

#include "replay.h"
FFN_FUZZ_REPLAY_MAIN("fuzz_tokenizer_json")
