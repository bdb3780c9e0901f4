/* rope_driver.c -- the C side of the inverse-frequency check in
 * tests/parity/test_families.py: reads a config.json the way the loader
 * does (ffn_model_config_load) and prints, for a sequence length S, the
 * attention factor then every inverse frequency of the rotary dims:
 *   rope_driver CONFIG.json S   ->  "R af\n" then "f_0\n" ... "f_{R/2-1}\n"
 * Compiled by the test against build/libffn_internal.a with -Isrc (the
 * RoPE functions are internal: build/libffn.a keeps only the public names).  Exit 1 with the error on stderr. */
#include <ffn.h>
#include "nn/model_internal.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    ffn_model_config cfg;
    if (argc != 3) {
        fprintf(stderr, "usage: rope_driver CONFIG.json SEQ_LEN\n");
        return 1;
    }
    if (ffn_model_config_load(argv[1], &cfg)) {
        fprintf(stderr, "rope_driver: %s\n", ffn_last_error());
        return 1;
    }
    const int64_t R = ffn_cfg_rotary_dim(&cfg), S = atoll(argv[2]);
    printf("%lld %.17g\n", (long long)R, ffn_rope_attention_factor(&cfg));
    for (int64_t j = 0; j < R / 2; j++) printf("%.17g\n", ffn_rope_inv_freq(&cfg, j, S));
    return 0;
}
