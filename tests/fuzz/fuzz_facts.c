/* fuzz_facts.c -- libFuzzer target for the facts-file reader of `ffn edit`
 * (ffn_facts_parse, src/analysis/edit.c: JSON lines of facts).
 *
 * Beyond "does not crash", on every input the reader accepts it checks:
 *   - at least one fact; ids are unique and ffn_facts_find finds each;
 *   - every string is non-empty and NUL-free, and the subject occurs in
 *     the prompt;
 *   - paraphrase and neighbour counts are >= 0 with non-NULL entries.
 * Built by `make fuzz`; with -DFFN_FUZZ_REPLAY it gets a main() that
 * replays files (tests/cli/test_fuzz_regress.sh). */
#include "ffn/edit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "fuzz_facts: invariant failed: %s (line %d)\n", #cond, __LINE__);  \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

static void check_str(const char *s) { REQUIRE(s && *s); }

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    ffn_facts *f = NULL;
    if (ffn_facts_parse((const char *)data, size, "fuzz", &f) != FFN_OK) {
        REQUIRE(f == NULL);
        return 0;
    }
    const int64_t n = ffn_facts_count(f);
    REQUIRE(n >= 1);
    for (int64_t i = 0; i < n; i++) {
        const ffn_fact *x = ffn_facts_at(f, i);
        REQUIRE(x && ffn_facts_find(f, x->id) == x);
        check_str(x->subject);
        check_str(x->relation);
        check_str(x->prompt);
        check_str(x->object);
        REQUIRE(strstr(x->prompt, x->subject));
        REQUIRE(x->n_paraphrases >= 0 && x->n_neighbours >= 0);
        for (int64_t k = 0; k < x->n_paraphrases; k++) check_str(x->paraphrases[k]);
        for (int64_t k = 0; k < x->n_neighbours; k++) {
            check_str(x->neighbour_prompts[k]);
            check_str(x->neighbour_objects[k]);
        }
    }
    REQUIRE(ffn_facts_at(f, n) == NULL && ffn_facts_at(f, -1) == NULL);
    ffn_facts_free(f);
    return 0;
}

#ifdef FFN_FUZZ_REPLAY
int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        FILE *fp = fopen(argv[i], "rb");
        if (!fp) {
            perror(argv[i]);
            return 1;
        }
        size_t cap = 1 << 16, n = 0, r;
        unsigned char *buf = malloc(cap);
        while (buf && (r = fread(buf + n, 1, cap - n, fp)) > 0) {
            n += r;
            if (n == cap) buf = realloc(buf, cap *= 2);
        }
        fclose(fp);
        if (!buf) return 1;
        LLVMFuzzerTestOneInput(buf, n);
        free(buf);
    }
    printf("fuzz_facts: replayed %d inputs\n", argc - 1);
    return 0;
}
#endif
