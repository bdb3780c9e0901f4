/* test_generate.c -- generation in one place: ffn_generate (over an
 * ffn_tokenizer), ffn_generate_text (over an ffn_vocab) and
 * ffn_generate_tokens (ids) give the same tokens for the same seed and
 * settings; the context window is re-fed when it fills; "<unk>" is never
 * generated unless allowed; the logits callback sees every fed-back token;
 * bad arguments are errors. */
#include "check.h"

#include <ffn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OUT 4096

typedef struct collect {
    char text[MAX_OUT];
    size_t n;
    int32_t ids[MAX_OUT];
    int64_t n_ids, n_logits;
    int stop_after;
} collect;

static int on_bytes(const char *bytes, size_t len, void *user) {
    collect *c = user;
    if (c->n + len < MAX_OUT) memcpy(c->text + c->n, bytes, len), c->n += len;
    return 0;
}

static int on_token(int32_t id, const char *bytes, size_t len, void *user) {
    collect *c = user;
    if (c->n_ids < MAX_OUT) c->ids[c->n_ids] = id;
    c->n_ids++;
    if (bytes && c->n + len < MAX_OUT) memcpy(c->text + c->n, bytes, len), c->n += len;
    return c->stop_after > 0 && c->n_ids >= c->stop_after;
}

static void on_logits(int32_t fed, const float *logits, void *user) {
    collect *c = user;
    (void)fed;
    (void)logits;
    c->n_logits++;
}

int main(void) {
    const char *text = "Mary gave John the apple because he was hungry.\n"
                       "John gave Mary the book because she asked.\n";
    ffn_ctx *ctx = NULL;
    CHECK(ffn_ctx_create(1, &ctx) == FFN_OK, "ctx");
    ffn_tokenizer *tok = NULL;
    CHECK(ffn_tokenizer_build(FFN_TOK_CHAR, text, strlen(text), 0, &tok) == FFN_OK, "%s", ffn_last_error());
    ffn_model_config cfg;
    ffn_model_config_default(&cfg);
    cfg.vocab_size = ffn_tokenizer_vocab_size(tok);
    cfg.hidden_size = 16;
    cfg.intermediate_size = 24;
    cfg.num_hidden_layers = 1;
    cfg.num_attention_heads = 2;
    cfg.num_key_value_heads = 2;
    cfg.max_position_embeddings = 7; /* small: the window is re-fed often */
    ffn_model *m = NULL;
    CHECK(ffn_model_create(ctx, &cfg, NULL, &m) == FFN_OK, "%s", ffn_last_error());
    CHECK(m && ffn_model_init_weights(m, 7) == FFN_OK, "init");
    if (!m || !tok) return check_done("test_generate");

    /* a vocab over a copy of the tokenizer (the vocab owns its engine) */
    ffn_tokenizer *tok2 = NULL;
    CHECK(ffn_tokenizer_build(FFN_TOK_CHAR, text, strlen(text), 0, &tok2) == FFN_OK, "copy");
    ffn_vocab *v = NULL;
    CHECK(ffn_vocab_from_tokenizer(tok2, &v) == FFN_OK, "wrap");

    const double temps[3] = {0.0, 0.8, 1.5};
    for (int k = 0; k < 3; k++) {
        ffn_generate_options g;
        ffn_generate_options_default(&g);
        g.steps = 40;
        g.temperature = temps[k];
        g.top_p = k == 1 ? 0.9 : 1.0;
        g.seed = 11 + (uint64_t)k;
        collect a = {0}, b = {0}, c = {0};
        CHECK(ffn_generate(m, tok, "Mary gave", &g, on_bytes, &a) == FFN_OK, "%s", ffn_last_error());
        ffn_generate_callbacks cb = {on_token, on_logits, &b};
        CHECK(ffn_generate_text(m, v, "Mary gave", &g, &cb) == FFN_OK, "%s", ffn_last_error());
        int32_t *ids = NULL;
        int64_t n = 0;
        CHECK(ffn_vocab_encode(v, "Mary gave", 9, 0, &ids, &n) == FFN_OK && n == 9, "encode");
        ffn_generate_callbacks cc = {on_token, NULL, &c};
        CHECK(ffn_generate_tokens(m, v, ids, n, &g, &cc) == FFN_OK, "%s", ffn_last_error());
        free(ids);
        CHECK(a.n == b.n && !memcmp(a.text, b.text, a.n), "T=%g: ffn_generate and ffn_generate_text differ",
              temps[k]);
        CHECK(b.n_ids == 40 && c.n_ids == 40 && !memcmp(b.ids, c.ids, sizeof(int32_t) * 40),
              "T=%g: text and ids entry points differ", temps[k]);
        CHECK(b.n_logits == 39, "on_logits after every fed-back token: %lld", (long long)b.n_logits);
        int unk = 0;
        for (int i = 0; i < 40; i++) unk += b.ids[i] == ffn_vocab_specials(v).unk;
        CHECK(unk == 0, "<unk> generated %d times", unk);
        /* the same seed again: the same tokens */
        collect d = {0};
        ffn_generate_callbacks cd = {on_token, NULL, &d};
        CHECK(ffn_generate_text(m, v, "Mary gave", &g, &cd) == FFN_OK && d.n_ids == 40 &&
                  !memcmp(d.ids, b.ids, sizeof(int32_t) * 40), "T=%g: not reproducible", temps[k]);
    }
    /* allow_unk with a model that prefers <unk>: it is generated only when allowed */
    {
        float *p = ffn_model_params(m, NULL);
        const int64_t nt = ffn_model_num_tensors(m);
        for (int64_t i = 0; i < nt; i++) {
            const ffn_model_tensor *t = ffn_model_tensor_at(m, i);
            if (!strcmp(t->name, "lm_head.weight") || (cfg.tie_word_embeddings && !strcmp(t->name, "model.embed_tokens.weight"))) {
                /* row unk (0) large along every direction of the final norm's output */
                for (int64_t j = 0; j < t->shape[1]; j++) p[t->offset + j] = 50.0f;
            }
        }
        CHECK(ffn_model_params_changed(m) == FFN_OK, "params changed");
        ffn_generate_options g;
        ffn_generate_options_default(&g);
        g.steps = 5;
        g.temperature = 0;
        collect a = {0}, b = {0};
        ffn_generate_callbacks ca = {on_token, NULL, &a}, cb = {on_token, NULL, &b};
        CHECK(ffn_generate_text(m, v, "Mary", &g, &ca) == FFN_OK, "%s", ffn_last_error());
        g.allow_unk = 1;
        CHECK(ffn_generate_text(m, v, "Mary", &g, &cb) == FFN_OK, "%s", ffn_last_error());
        int unk_a = 0, unk_b = 0;
        for (int i = 0; i < 5; i++) unk_a += a.ids[i] == 0, unk_b += b.ids[i] == 0;
        CHECK(unk_a == 0, "<unk> generated although not allowed");
        CHECK(unk_b > 0, "a model that prefers <unk> never generated it with allow_unk (%d)", unk_b);
    }
    /* on_token stops early */
    {
        ffn_generate_options g;
        ffn_generate_options_default(&g);
        collect a = {.stop_after = 3};
        ffn_generate_callbacks ca = {on_token, NULL, &a};
        CHECK(ffn_generate_text(m, v, "J", &g, &ca) == FFN_OK && a.n_ids == 3, "stop after 3: %lld",
              (long long)a.n_ids);
    }
    /* errors */
    {
        ffn_generate_options g;
        ffn_generate_options_default(&g);
        int32_t bad = (int32_t)cfg.vocab_size;
        CHECK(ffn_generate_tokens(m, v, &bad, 1, &g, NULL) == FFN_ERR_INVALID_ARG &&
                  strstr(ffn_last_error(), "outside"), "a prompt id outside V: %s", ffn_last_error());
        CHECK(ffn_generate_tokens(m, v, NULL, 0, &g, NULL) == FFN_ERR_INVALID_ARG, "an empty prompt");
        g.top_p = 0;
        int32_t one = 1;
        CHECK(ffn_generate_tokens(m, v, &one, 1, &g, NULL) == FFN_ERR_CONFIG, "top_p 0");
        ffn_vocab *small = NULL;
        CHECK(ffn_vocab_from_tokenizer(NULL, &small) == FFN_ERR_INVALID_ARG, "NULL");
        ffn_tokenizer *bt = NULL;
        CHECK(ffn_tokenizer_build(FFN_TOK_BYTE, "x", 1, 0, &bt) == FFN_OK, "byte");
        CHECK(ffn_vocab_from_tokenizer(bt, &small) == FFN_OK, "wrap byte");
        ffn_generate_options_default(&g);
        CHECK(ffn_generate_tokens(m, small, &one, 1, &g, NULL) == FFN_ERR_CONFIG &&
                  strstr(ffn_last_error(), "257"), "a vocab of another size: %s", ffn_last_error());
        ffn_vocab_free(small);
    }
    ffn_vocab_free(v);
    ffn_tokenizer_free(tok);
    ffn_model_free(m);
    ffn_ctx_free(ctx);
    return check_done("test_generate");
}
