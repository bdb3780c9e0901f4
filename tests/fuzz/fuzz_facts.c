/* fuzz_facts.c -- libFuzzer target for the facts JSONL reader
 * (ffn_facts_parse, src/data/facts.c).
 *
 * Beyond "does not crash", on every input it accepts it checks:
 *   - every fact has its id >= 0 and non-empty NUL-free subject, relation,
 *     prompt and object, the prompt containing the subject;
 *   - paraphrases and neighbours are within their bounds, non-empty;
 *   - writing the set back (ffn_facts_to_jsonl) and reading that gives the
 *     same set, field for field (a round trip).
 * Built by `make fuzz`; -DFFN_FUZZ_REPLAY adds a replaying main(). */
#include "ffn/data.h"

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

static void check_fact(const ffn_fact *f) {
    REQUIRE(f->id >= 0);
    REQUIRE(f->subject && *f->subject && f->relation && *f->relation);
    REQUIRE(f->prompt && *f->prompt && f->object && *f->object);
    REQUIRE(strstr(f->prompt, f->subject) != NULL);
    REQUIRE(f->n_paraphrases >= 0 && f->n_paraphrases <= 64);
    REQUIRE(f->n_neighbours >= 0 && f->n_neighbours <= 64);
    for (int64_t k = 0; k < f->n_paraphrases; k++) REQUIRE(f->paraphrases[k] && *f->paraphrases[k]);
    for (int64_t k = 0; k < f->n_neighbours; k++)
        REQUIRE(f->neighbours[k].prompt && *f->neighbours[k].prompt && f->neighbours[k].object &&
                *f->neighbours[k].object);
}

static void same_fact(const ffn_fact *a, const ffn_fact *b) {
    REQUIRE(a->id == b->id);
    REQUIRE(!strcmp(a->subject, b->subject) && !strcmp(a->relation, b->relation));
    REQUIRE(!strcmp(a->prompt, b->prompt) && !strcmp(a->object, b->object));
    REQUIRE(a->n_paraphrases == b->n_paraphrases && a->n_neighbours == b->n_neighbours);
    for (int64_t k = 0; k < a->n_paraphrases; k++) REQUIRE(!strcmp(a->paraphrases[k], b->paraphrases[k]));
    for (int64_t k = 0; k < a->n_neighbours; k++)
        REQUIRE(!strcmp(a->neighbours[k].prompt, b->neighbours[k].prompt) &&
                !strcmp(a->neighbours[k].object, b->neighbours[k].object));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ffn_facts *fs = NULL;
    if (ffn_facts_parse((const char *)data, size, "fuzz.jsonl", &fs) != FFN_OK) {
        REQUIRE(fs == NULL);
        return 0;
    }
    REQUIRE(fs->n_facts >= 1 && fs->n_facts <= FFN_FACTS_FILE_MAX);
    for (int64_t i = 0; i < fs->n_facts; i++) check_fact(&fs->facts[i]);
    char *text = NULL;
    size_t n = 0;
    REQUIRE(ffn_facts_to_jsonl(fs, &text, &n) == FFN_OK);
    ffn_facts *back = NULL;
    REQUIRE(ffn_facts_parse(text, n, "round trip", &back) == FFN_OK);
    REQUIRE(back->n_facts == fs->n_facts);
    for (int64_t i = 0; i < fs->n_facts; i++) same_fact(&fs->facts[i], &back->facts[i]);
    ffn_facts_free(back);
    free(text);
    ffn_facts_free(fs);
    return 0;
}

#include "replay.h"
FFN_FUZZ_REPLAY_MAIN("fuzz_facts")
