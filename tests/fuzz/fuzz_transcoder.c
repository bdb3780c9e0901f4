/* fuzz_transcoder.c -- libFuzzer target for the transcoder file reader
 * (ffn_tc_load_buffer, src/analysis/transcoder.c: a safetensors file whose
 * metadata "ffn_transcoder" is a JSON config).
 *
 * Beyond "does not crash", on every input it accepts it checks:
 *   - the config is one the library would create: 1 <= k <= features,
 *     d_model >= 1, a skip only for a transcoder, k_aux >= 0,
 *     aux_coef >= 0, dead_tokens >= 1;
 *   - the tensors are there with those shapes: a forward of two rows
 *     (zeros, then ones) runs, its codes are features in range with
 *     activations >= 0, and the call succeeds.
 * Built by `make fuzz`; -DFFN_FUZZ_REPLAY adds a replaying main(). */
#include "ffn/transcoder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "fuzz_transcoder: invariant failed: %s (line %d)\n", #cond,        \
                    __LINE__);                                                                 \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

static ffn_ctx *ctx;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!ctx && ffn_ctx_create(1, &ctx) != FFN_OK) return 0;
    ffn_transcoder *tc = NULL;
    if (ffn_tc_load_buffer(data, size, "fuzz.st", &tc) != FFN_OK) {
        REQUIRE(tc == NULL);
        return 0;
    }
    const ffn_tc_config *c = ffn_tc_get_config(tc);
    REQUIRE(c->d_model >= 1 && c->features >= 1 && c->k >= 1 && c->k <= c->features);
    REQUIRE(!(c->skip && c->kind == FFN_TC_KIND_SAE));
    REQUIRE(c->k_aux >= 0 && c->aux_coef >= 0 && c->dead_tokens >= 1 && c->layer >= 0);
    const int64_t D = c->d_model, k = c->k;
    float *x = calloc((size_t)(2 * D), sizeof *x), *y = malloc((size_t)(2 * D) * sizeof *y);
    int32_t *idx = malloc((size_t)(2 * k) * sizeof *idx);
    float *val = malloc((size_t)(2 * k) * sizeof *val);
    if (x && y && idx && val) {
        for (int64_t d = 0; d < D; d++) x[D + d] = 1.0f;
        REQUIRE(ffn_tc_forward(ctx, tc, x, 2, y, idx, val) == FFN_OK);
        for (int64_t i = 0; i < 2 * k; i++) {
            REQUIRE(idx[i] >= 0 && idx[i] < c->features);
            REQUIRE(!(val[i] < 0));
        }
    }
    free(x);
    free(y);
    free(idx);
    free(val);
    ffn_tc_free(tc);
    return 0;
}

#include "replay.h"
FFN_FUZZ_REPLAY_MAIN("fuzz_transcoder")
