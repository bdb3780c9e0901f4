/* fuzz_tokenizer_bin.c -- libFuzzer target for the llama2.c tokenizer.bin
 * reader and its encoder / decoder (src/load/llama2c.c).  The input is the
 * file.  Invariants (trap on breach):
 *   - a rejected file gives no tokenizer and a non-empty message;
 *   - an accepted file of V tokens parses again with expected_vocab V and
 *     fails with V + 1; every piece is at most max_token_length long;
 *   - encoding text (the input's first bytes, and a fixed sentence) gives
 *     ids in [0, V) with BOS first and EOS last when asked, and decoding
 *     them succeeds;
 *   - a text made of single-code-point pieces present in the vocabulary
 *     decodes back to itself (after the dummy-prefix space).
 * Built by `make fuzz`; -DFFN_FUZZ_REPLAY adds a replaying main(). */
#include "load/checkpoint_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "fuzz_tokenizer_bin: invariant failed: %s (line %d)\n", #cond,      \
                    __LINE__);                                                                 \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

static void check_encode(const ffn_llama2c_tokenizer *t, const char *text, size_t n) {
    const int64_t V = ffn_llama2c_tokenizer_vocab_size(t);
    int bos = V > 1, eos = V > 2;
    int32_t *ids = NULL;
    int64_t k = 0;
    REQUIRE(ffn_llama2c_tokenizer_encode(t, text, n, bos, eos, &ids, &k) == FFN_OK);
    REQUIRE(k >= bos + eos);
    REQUIRE((size_t)k <= n + 3);
    for (int64_t i = 0; i < k; i++) REQUIRE(ids[i] >= 0 && ids[i] < V);
    if (bos) REQUIRE(ids[0] == FFN_LLAMA2C_BOS);
    if (eos) REQUIRE(ids[k - 1] == FFN_LLAMA2C_EOS);
    char *out = NULL;
    size_t len = 0;
    REQUIRE(ffn_llama2c_tokenizer_decode(t, -1, ids, k, &out, &len) == FFN_OK);
    REQUIRE(out != NULL && out[len] == '\0');
    free(out);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ffn_llama2c_tokenizer *t = (ffn_llama2c_tokenizer *)1;
    if (ffn_llama2c_tokenizer_parse(data, size, "fuzz.bin", 0, &t) != FFN_OK) {
        REQUIRE(t == NULL);
        REQUIRE(ffn_last_error()[0] != '\0');
        return 0;
    }
    REQUIRE(t != NULL);
    const int64_t V = ffn_llama2c_tokenizer_vocab_size(t);
    REQUIRE(V >= 1);
    ffn_llama2c_tokenizer *again = NULL;
    REQUIRE(ffn_llama2c_tokenizer_parse(data, size, "fuzz.bin", V, &again) == FFN_OK);
    REQUIRE(ffn_llama2c_tokenizer_vocab_size(again) == V);
    ffn_llama2c_tokenizer_free(again);
    again = NULL;
    REQUIRE(ffn_llama2c_tokenizer_parse(data, size, "fuzz.bin", V + 1, &again) != FFN_OK);
    REQUIRE(again == NULL);
    int32_t max_len;
    memcpy(&max_len, data, 4);
    for (int32_t i = 0; i < V; i++) {
        size_t len = 0;
        REQUIRE(ffn_llama2c_tokenizer_token(t, i, &len, NULL) != NULL);
        REQUIRE(len <= (size_t)max_len);
    }
    REQUIRE(ffn_llama2c_tokenizer_token(t, (int32_t)V, NULL, NULL) == NULL);
    check_encode(t, (const char *)data, size < 200 ? size : 200);
    static const char sentence[] = "Once upon a time, \xc3\xa9t\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd \xff!";
    check_encode(t, sentence, sizeof sentence - 1);
    check_encode(t, "", 0);
    /* ASCII letters that are pieces of their own encode and decode back. */
    char text[64];
    size_t n = 0;
    for (int c = 'a'; c <= 'z' && n < sizeof text; c++) {
        char s[1] = {(char)c};
        for (int32_t i = 0; i < V; i++) {
            size_t len;
            const char *p = ffn_llama2c_tokenizer_token(t, i, &len, NULL);
            if (len == 1 && p[0] == s[0]) {
                text[n++] = s[0];
                break;
            }
        }
    }
    if (n > 0) {
        int32_t *ids = NULL;
        int64_t k = 0;
        REQUIRE(ffn_llama2c_tokenizer_encode(t, text, n, 0, 0, &ids, &k) == FFN_OK);
        char *out = NULL;
        size_t len = 0;
        REQUIRE(ffn_llama2c_tokenizer_decode(t, -1, ids, k, &out, &len) == FFN_OK);
        /* merges only concatenate pieces, and byte pieces decode to their
         * byte, so the text reappears at the end (after a dummy space, if
         * the vocabulary has " ") -- unless a piece is itself "<0xXX>"-like
         * after a merge, which cannot hold for letters. */
        REQUIRE(len >= n && !memcmp(out + len - n, text, n));
        free(out);
        free(ids);
    }
    ffn_llama2c_tokenizer_free(t);
    return 0;
}

#include "replay.h"
FFN_FUZZ_REPLAY_MAIN("fuzz_tokenizer_bin")
