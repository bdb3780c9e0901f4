/* edit_source.c -- the text and facts a model was trained on, for `ffn
 * edit` and `ffn serve` (edit_source.h). */
#include "edit_source.h"
#include "ffn/safetensors.h"

#include <stdio.h>
#include <string.h>

/* The recorded source into buf ("" when there is none). */
static void recorded_source(const char *model, char *buf, size_t cap) {
    char path[4200];
    snprintf(path, sizeof path, "%s/train_state.safetensors", model);
    ffn_st_file *f = NULL;
    const char *src = NULL;
    buf[0] = 0;
    if (ffn_st_open(path, &f) == FFN_OK) src = ffn_st_metadata(f, "data_source");
    if (src) snprintf(buf, cap, "%s", src);
    ffn_st_close(f);
}

ffn_status edit_source_text(const char *model, const char *data, char **text, size_t *n,
                            char *what, size_t cap) {
    if (data) {
        snprintf(what, cap, "%s", data);
        return ffn_text_read(data, text, n);
    }
    char src[1100];
    recorded_source(model, src, sizeof src);
    char lang[8];
    long long sentences;
    unsigned long long seed;
    if (!strncmp(src, "file:", 5)) {
        snprintf(what, cap, "%s", src + 5);
        return ffn_text_read(src + 5, text, n);
    }
    if (sscanf(src, "corpus:%7[a-z]:%lld:%llu", lang, &sentences, &seed) == 3) {
        ffn_lang l;
        ffn_corpus *c = NULL;
        ffn_status st = ffn_lang_parse(lang, &l);
        if (!st) st = ffn_corpus_generate(l, seed, sentences, &c);
        if (st) return st;
        *text = c->text;
        *n = (size_t)c->n_bytes;
        c->text = NULL;
        ffn_corpus_free(c);
        snprintf(what, cap, "the built-in %s corpus (%lld sentences, seed %llu)", lang, sentences,
                 seed);
        return FFN_OK;
    }
    *text = NULL;
    *n = 0;
    return FFN_OK;
}

ffn_status edit_source_facts(const char *model, ffn_facts **out) {
    *out = NULL;
    char src[1100];
    recorded_source(model, src, sizeof src);
    long long sentences;
    unsigned long long seed;
    if (sscanf(src, "corpus:facts:%lld:%llu", &sentences, &seed) != 2) return FFN_OK;
    return ffn_facts_generate(FFN_FACTS_DEFAULT, seed, out);
}

const ffn_fact *edit_source_find_fact(const ffn_facts *facts, const char *subject,
                                      const char *prompt) {
    for (int64_t i = 0; facts && i < facts->n_facts; i++) {
        const ffn_fact *f = &facts->facts[i];
        if (strcmp(f->subject, subject)) continue;
        if (!strcmp(f->prompt, prompt)) return f;
        for (int64_t k = 0; k < f->n_paraphrases; k++)
            if (!strcmp(f->paraphrases[k], prompt)) return f;
    }
    return NULL;
}
