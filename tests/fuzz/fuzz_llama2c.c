/* fuzz_llama2c.c -- libFuzzer target for the llama2.c checkpoint reader
 * (src/load/llama2c.c: header validation, size arithmetic, the copy into the
 * model).  The input is the whole .bin file.  Invariants (trap on breach):
 *   - a rejected file leaves no model and a non-empty message;
 *   - an accepted file is exactly as long as its header promises, its
 *     model has finite weights, and one decode step runs (the model never
 *     reads past what the header described).
 * Mutations rarely keep a file's size equal to its header's promise, so a
 * second part builds a well-formed file from the input: small dimensions
 * taken from its first bytes (heads, grouped KV heads, head size, layers,
 * tied or untied), weights from the following bytes.  It must load; saved
 * again with ffn_checkpoint_save_llama2c (to /dev/shm) and reloaded through
 * ffn_checkpoint_load_model, every weight must come back bit for bit.
 * Built by `make fuzz`; with -DFFN_FUZZ_REPLAY a main() replays files
 * (tests/cli/test_fuzz_regress.sh). */
#include "load/checkpoint_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REQUIRE(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "fuzz_llama2c: invariant failed: %s (line %d)\n", #cond, __LINE__); \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

static ffn_ctx *ctx;

static char tmpdir[64];

static void remove_tmpdir(void) {
    if (!tmpdir[0]) return;
    char path[96];
    snprintf(path, sizeof path, "%s/m.bin", tmpdir);
    remove(path);
    rmdir(tmpdir);
    tmpdir[0] = '\0';
}

/* Part 2 (see the top). */
static void well_formed(const uint8_t *data, size_t size) {
    if (size < 8) return;
    const int32_t H = 1 + data[0] % 4;
    int32_t G = 1 + data[1] % H;
    while (H % G) G--;
    const int32_t Dh = 2 * (1 + data[2] % 3), D = H * Dh, F = 1 + data[3] % 9;
    const int32_t L = 1 + data[4] % 3, V = 2 + data[5] % 15, T = 1 + data[6] % 5;
    const int tied = data[7] & 1;
    const int64_t n = (int64_t)V * D * (tied ? 1 : 2) + (int64_t)L * (2 * D + 2 * D * D + 2 * G * Dh * D + 3 * F * D) + D +
                      (int64_t)T * Dh;
    const size_t bytes = 28 + (size_t)n * 4;
    unsigned char *buf = malloc(bytes);
    REQUIRE(buf != NULL);
    int32_t hdr[7] = {D, F, L, H, G, tied ? V : -V, T};
    memcpy(buf, hdr, sizeof hdr);
    for (int64_t i = 0; i < n; i++) {
        float x = size > 8 ? (float)(int8_t)data[8 + (size_t)i % (size - 8)] / 64.0f : 0.5f;
        memcpy(buf + 28 + 4 * i, &x, 4);
    }
    ffn_model_options opt = {.max_batch = 1, .max_seq = T};
    ffn_model *m = NULL;
    ffn_status st = l2c_load_buffer(ctx, buf, bytes, "well_formed.bin", &opt, 0, &m);
    if (st != FFN_OK) fprintf(stderr, "well-formed file rejected: %s\n", ffn_last_error());
    REQUIRE(st == FFN_OK);
    float *logits = malloc((size_t)V * sizeof(float));
    REQUIRE(logits != NULL);
    REQUIRE(ffn_model_step(m, V - 1, logits) == FFN_OK);
    free(logits);
    if (!tmpdir[0]) {
        snprintf(tmpdir, sizeof tmpdir, "/dev/shm/fuzz_llama2c_XXXXXX");
        REQUIRE(mkdtemp(tmpdir) != NULL);
        atexit(remove_tmpdir);
    }
    char path[96];
    snprintf(path, sizeof path, "%s/m.bin", tmpdir);
    REQUIRE(ffn_checkpoint_save_llama2c(m, path) == FFN_OK);
    ffn_model *back = NULL;
    ffn_checkpoint_info info;
    REQUIRE(ffn_checkpoint_load_model(ctx, path, &opt, &back, &info) == FFN_OK);
    int64_t n1 = 0, n2 = 0;
    const float *p1 = ffn_model_params(m, &n1), *p2 = ffn_model_params(back, &n2);
    REQUIRE(n1 == n2 && !memcmp(p1, p2, (size_t)n1 * sizeof(float)));
    REQUIRE(ffn_model_get_config(back)->rope_style == FFN_ROPE_INTERLEAVED);
    ffn_model_free(back);
    ffn_model_free(m);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!ctx) REQUIRE(ffn_ctx_create(1, &ctx) == FFN_OK);
    well_formed(data, size);
    ffn_model_config cfg;
    ffn_status hs = l2c_parse_header(data, size, "fuzz.bin", &cfg);
    ffn_model_options opt = {.max_batch = 1, .max_seq = 4};
    ffn_model *m = (ffn_model *)1;
    ffn_status st = l2c_load_buffer(ctx, data, size, "fuzz.bin", &opt, 0, &m);
    if (st != FFN_OK) {
        REQUIRE(m == NULL);
        REQUIRE(ffn_last_error()[0] != '\0');
        return 0;
    }
    REQUIRE(hs == FFN_OK);
    REQUIRE(m != NULL);
    int64_t n = 0;
    const float *w = ffn_model_params(m, &n);
    REQUIRE((uint64_t)n * 4 <= size);
    for (int64_t i = 0; i < n; i++) REQUIRE(isfinite(w[i]));
    const ffn_model_config *c = ffn_model_get_config(m);
    REQUIRE(c->vocab_size == cfg.vocab_size && c->hidden_size == cfg.hidden_size);
    float *logits = malloc((size_t)c->vocab_size * sizeof(float));
    REQUIRE(logits != NULL);
    REQUIRE(ffn_model_step(m, (int32_t)(c->vocab_size - 1), logits) == FFN_OK);
    free(logits);
    ffn_model_free(m);
    return 0;
}

#include "replay.h"
FFN_FUZZ_REPLAY_MAIN("fuzz_llama2c")
