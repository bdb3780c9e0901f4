/* edit_source.c -- the text and facts a model was trained on, for `ffn
 * edit` and `ffn serve` (edit_source.h). */
#include "edit_source.h"
#include "cli.h"
#include "ffn/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
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

int edit_session_open(const char *cmd, const char *model, const char *data, int64_t threads,
                      const ffn_model_options *mo, int keep_weights, const char *vocab_why,
                      const char *text_why, edit_session *s) {
    memset(s, 0, sizeof *s);
    if (cli_make_ctx(cmd, threads, &s->ctx)) return CLI_EXIT_FAIL;
    ffn_status st = ffn_checkpoint_load_any(s->ctx, model, mo, &s->model, &s->info);
    if (st) return cli_fail(cmd, st);
    if (!s->info.tokenizer_path[0]) {
        cli_error(cmd, "%s: no vocabulary beside the model (tokenizer.txt or tokenizer.bin); %s",
                  model, vocab_why);
        return CLI_EXIT_FAIL;
    }
    st = ffn_vocab_load(s->info.tokenizer_path, ffn_model_get_config(s->model)->vocab_size,
                        &s->vocab);
    if (st) return cli_fail(cmd, st);
    char *text = NULL;
    size_t n = 0;
    st = edit_source_text(model, data, &text, &n, s->text_what, sizeof s->text_what);
    if (st) return cli_fail(cmd, st);
    if (!text) {
        cli_error(cmd, "%s: the model's training text is not recorded there; give --data FILE%s",
                  model, text_why);
        return CLI_EXIT_USAGE;
    }
    st = ffn_vocab_encode(s->vocab, text, n, 0, &s->tokens, &s->n_tokens);
    free(text);
    int64_t n_val = 0;
    if (!st) st = ffn_tokens_split(s->n_tokens, 0.1, &s->n_train, &n_val);
    if (st) return cli_fail(cmd, st);
    if (!keep_weights) return 0;
    float *p = ffn_model_params(s->model, &s->n_params);
    s->original = malloc((size_t)s->n_params * sizeof *p);
    if (!s->original) {
        cli_error(cmd, "out of memory (a copy of the weights)");
        return CLI_EXIT_FAIL;
    }
    memcpy(s->original, p, (size_t)s->n_params * sizeof *p);
    return 0;
}

void edit_session_free(edit_session *s) {
    ffn_model_free(s->model);
    ffn_vocab_free(s->vocab);
    ffn_ctx_free(s->ctx);
    free(s->tokens);
    free(s->original);
}
