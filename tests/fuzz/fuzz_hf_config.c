/* fuzz_hf_config.c -- libFuzzer target for the Hugging Face directory
 * metadata readers: config.json as the loader reads it (hf_config_parse in
 * src/load/hf_checkpoint.c, then ffn_model_config_load, given the same bytes
 * through a memory file) and model.safetensors.index.json (hf_index_parse).
 * Invariants (trap on breach):
 *   - a rejected input gives a non-empty message and nothing allocated;
 *   - an accepted config has a known model_type and a config that
 *     ffn_model_config_validate accepts;
 *   - an accepted index maps every tensor to a shard in range, shard names
 *     are distinct plain file names (no '/', not "." or "..").
 * Built by `make fuzz`; -DFFN_FUZZ_REPLAY adds a replaying main(). */
#include "load/checkpoint_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define REQUIRE(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "fuzz_hf_config: invariant failed: %s (line %d)\n", #cond,          \
                    __LINE__);                                                                 \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

static int memfd = -1;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    hf_config_extra extra;
    if (hf_config_parse((const char *)data, size, "config.json", &extra) == FFN_OK) {
        static const char *types[] = {"llama", "mistral", "qwen2", "mixtral", "qwen2_moe",
                                      "qwen3", "gemma", "phi3", "olmoe", "gpt2"};
        int known = 0;
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
            known |= !strcmp(extra.model_type, types[i]);
        REQUIRE(known);
        REQUIRE(extra.sliding_window >= 0);
        REQUIRE(!strchr(extra.tokenizer_file, '/'));
        /* the model's own reader on the same bytes */
        if (memfd < 0) memfd = memfd_create("fuzz_config", 0);
        REQUIRE(memfd >= 0);
        REQUIRE(ftruncate(memfd, 0) == 0);
        REQUIRE(pwrite(memfd, data, size, 0) == (ssize_t)size);
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", memfd);
        ffn_model_config cfg;
        if (ffn_model_config_load(path, &cfg) == FFN_OK)
            REQUIRE(ffn_model_config_validate(&cfg) == FFN_OK);
        else
            REQUIRE(ffn_last_error()[0] != '\0');
    } else {
        REQUIRE(ffn_last_error()[0] != '\0');
    }
    hf_index ix;
    if (hf_index_parse((const char *)data, size, "model.safetensors.index.json", &ix) == FFN_OK) {
        REQUIRE(ix.n_tensors > 0 && ix.n_files > 0 && ix.n_files <= ix.n_tensors);
        for (int64_t i = 0; i < ix.n_tensors; i++) {
            REQUIRE(ix.names[i] != NULL);
            REQUIRE(ix.file_of[i] >= 0 && ix.file_of[i] < ix.n_files);
        }
        for (int64_t f = 0; f < ix.n_files; f++) {
            REQUIRE(ix.files[f][0] && !strchr(ix.files[f], '/'));
            REQUIRE(strcmp(ix.files[f], ".") && strcmp(ix.files[f], ".."));
            for (int64_t g = 0; g < f; g++) REQUIRE(strcmp(ix.files[f], ix.files[g]));
        }
        hf_index_free(&ix);
    } else {
        REQUIRE(ix.names == NULL && ix.files == NULL && ix.n_tensors == 0);
        REQUIRE(ffn_last_error()[0] != '\0');
    }
    return 0;
}

#include "replay.h"
FFN_FUZZ_REPLAY_MAIN("fuzz_hf_config")
