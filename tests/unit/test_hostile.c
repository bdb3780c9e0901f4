/* test_hostile.c -- the library's readers against hostile files: FIFOs and
 * devices where a file is expected (refused at once, by name), a checkpoint
 * whose shard is missing (an error, and no leak: this test also runs under
 * ASan/LSan), foreign formats named as such. */
#include "ffn.h"
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static const char *path_in(const char *name) {
    static char buf[4][256];
    static int k = 0;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(data, 1, n, f);
    fclose(f);
}

/* Every reader of a user's file refuses a FIFO without waiting for a writer
 * (a regression hangs this test; tests/run.sh has no timeout, the CLI test
 * does). */
static void test_fifo(ffn_ctx *ctx) {
    const char *fifo = path_in("fifo");
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
    char *text = NULL;
    size_t n = 0;
    CHECK(ffn_text_read(fifo, &text, &n) == FFN_ERR_IO &&
              strstr(ffn_last_error(), "is a FIFO, not a regular file"),
          "ffn_text_read on a FIFO: %s", ffn_last_error());
    ffn_st_file *sf = NULL;
    CHECK(ffn_st_open(fifo, &sf) == FFN_ERR_IO && strstr(ffn_last_error(), "is a FIFO"),
          "ffn_st_open on a FIFO: %s", ffn_last_error());
    ffn_model_config cfg;
    CHECK(ffn_model_config_load(fifo, &cfg) == FFN_ERR_IO && strstr(ffn_last_error(), "is a FIFO"),
          "ffn_model_config_load on a FIFO: %s", ffn_last_error());
    ffn_tokenizer *tok = NULL;
    CHECK(ffn_tokenizer_load(fifo, &tok) == FFN_ERR_IO && strstr(ffn_last_error(), "is a FIFO"),
          "ffn_tokenizer_load on a FIFO: %s", ffn_last_error());
    ffn_llama2c_tokenizer *lt = NULL;
    CHECK(ffn_llama2c_tokenizer_load(fifo, 32, &lt) == FFN_ERR_IO &&
              strstr(ffn_last_error(), "is a FIFO"),
          "ffn_llama2c_tokenizer_load on a FIFO: %s", ffn_last_error());
    ffn_model *m = NULL;
    CHECK(ffn_checkpoint_load_model(ctx, fifo, NULL, &m, NULL) == FFN_ERR_IO &&
              strstr(ffn_last_error(), "is a FIFO"),
          "ffn_checkpoint_load_model on a FIFO: %s", ffn_last_error());
    CHECK(ffn_text_read("/dev/zero", &text, &n) == FFN_ERR_IO &&
              strstr(ffn_last_error(), "/dev/zero is a character device, not a regular file"),
          "ffn_text_read on /dev/zero: %s", ffn_last_error());
    unlink(fifo);
}

/* A sharded directory whose index names a shard that is not there. */
static void test_missing_shard(ffn_ctx *ctx) {
    char sub[128];
    snprintf(sub, sizeof sub, "%s/hf", dir);
    CHECK(mkdir(sub, 0700) == 0, "mkdir");
    char p[256];
    snprintf(p, sizeof p, "%s/config.json", sub);
    write_text(p, "{\"model_type\": \"llama\", \"vocab_size\": 16, \"hidden_size\": 8, "
                  "\"intermediate_size\": 16, \"num_hidden_layers\": 1, "
                  "\"num_attention_heads\": 2, \"tie_word_embeddings\": true}");
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", sub);
    write_text(p, "{\"weight_map\": {\"model.embed_tokens.weight\": \"a.safetensors\", "
                  "\"model.norm.weight\": \"b.safetensors\"}}");
    snprintf(p, sizeof p, "%s/a.safetensors", sub);
    write_text(p, "not needed: the check fails on b first");
    ffn_model *m = NULL;
    CHECK(ffn_checkpoint_load_model(ctx, sub, NULL, &m, NULL) == FFN_ERR_MISSING &&
              strstr(ffn_last_error(), "b.safetensors") && strstr(ffn_last_error(), "missing"),
          "missing shard: %s", ffn_last_error());
    CHECK(m == NULL, "no model on failure");
    snprintf(p, sizeof p, "%s/a.safetensors", sub);
    unlink(p);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", sub);
    unlink(p);
    snprintf(p, sizeof p, "%s/config.json", sub);
    unlink(p);
    rmdir(sub);
}

/* Foreign formats given to the readers are named. */
static void test_foreign(void) {
    const unsigned char gguf[32] = {'G', 'G', 'U', 'F', 3};
    const char *gp = path_in("m.gguf");
    write_bytes(gp, gguf, sizeof gguf);
    ffn_tokenizer *tok = NULL;
    CHECK(ffn_tokenizer_load(gp, &tok) == FFN_ERR_FORMAT &&
              strstr(ffn_last_error(), "m.gguf is a GGUF file, not an ffn tokenizer file"),
          "GGUF as an ffn tokenizer: %s", ffn_last_error());
    ffn_st_file *sf = NULL;
    CHECK(ffn_st_open(gp, &sf) == FFN_ERR_FORMAT &&
              strstr(ffn_last_error(), "is a GGUF file, not a safetensors file"),
          "GGUF as safetensors: %s", ffn_last_error());
    ffn_model_config cfg;
    CHECK(ffn_model_config_load(gp, &cfg) == FFN_ERR_FORMAT &&
              strstr(ffn_last_error(), "is a GGUF file, not a JSON file"),
          "GGUF as config.json: %s", ffn_last_error());
    /* a llama2.c tokenizer.bin where ffn's tokenizer.txt is expected */
    unsigned char bin[4 + 3 * 10];
    size_t n = 0;
    int32_t max_len = 2;
    memcpy(bin, &max_len, 4);
    n = 4;
    for (int i = 0; i < 3; i++) {
        float score = -(float)i;
        int32_t len = 2;
        memcpy(bin + n, &score, 4);
        memcpy(bin + n + 4, &len, 4);
        bin[n + 8] = (unsigned char)('a' + i);
        bin[n + 9] = 'x';
        n += 10;
    }
    const char *bp = path_in("tokenizer.bin");
    write_bytes(bp, bin, n);
    CHECK(ffn_tokenizer_load(bp, &tok) == FFN_ERR_FORMAT &&
              strstr(ffn_last_error(), "is a llama2.c tokenizer.bin, not an ffn tokenizer file"),
          "tokenizer.bin as an ffn tokenizer: %s", ffn_last_error());
    ffn_llama2c_tokenizer *lt = NULL;
    CHECK(ffn_llama2c_tokenizer_load(bp, 3, &lt) == FFN_OK, "the same file loads as what it is: %s",
          ffn_last_error());
    ffn_llama2c_tokenizer_free(lt);
    unlink(gp);
    unlink(bp);
}

/* The writer's duplicate-name check: a hash lookup that survives a
 * rolled-back add (ASan would see a stale name), and stays fast for the
 * 450,000 tensors of a 50,000-layer model. */
static void test_writer_names(void) {
    ffn_st_writer *w = NULL;
    CHECK(ffn_st_writer_create(&w) == FFN_OK, "writer");
    float v[2] = {1, 2};
    int64_t shape[1] = {2};
    CHECK(ffn_st_writer_add(w, "a", FFN_DTYPE_F32, 1, shape, v) == FFN_OK, "add a");
    CHECK(ffn_st_writer_add(w, "b", FFN_DTYPE_F32, 1, shape, NULL) == FFN_ERR_INVALID_ARG,
          "NULL data refused");
    CHECK(ffn_st_writer_add(w, "b", FFN_DTYPE_F32, 1, shape, v) == FFN_OK, "b after the rollback: %s",
          ffn_last_error());
    CHECK(ffn_st_writer_add(w, "a", FFN_DTYPE_F32, 1, shape, v) == FFN_ERR_INVALID_ARG &&
              strstr(ffn_last_error(), "already added"),
          "duplicate a: %s", ffn_last_error());
    char name[64];
    int ok = 1;
    for (int i = 0; i < 450000 && ok; i++) {
        snprintf(name, sizeof name, "model.layers.%d.mlp.up_proj.weight", i);
        ok = ffn_st_writer_add(w, name, FFN_DTYPE_F32, 1, shape, v) == FFN_OK;
    }
    CHECK(ok, "450,000 distinct names: %s", ffn_last_error());
    CHECK(ffn_st_writer_add(w, "model.layers.123456.mlp.up_proj.weight", FFN_DTYPE_F32, 1, shape, v) ==
              FFN_ERR_INVALID_ARG,
          "a duplicate among many");
    ffn_st_writer_free(w);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/ffn_hostile_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    ffn_ctx *ctx = NULL;
    if (ffn_ctx_create(1, &ctx) != FFN_OK) return 1;
    test_fifo(ctx);
    test_missing_shard(ctx);
    test_foreign();
    test_writer_names();
    ffn_ctx_free(ctx);
    rmdir(dir);
    return check_done("test_hostile");
}
