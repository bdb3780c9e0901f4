/* cmd_version.c -- `ffn version`: what this build is and what it will use. */
#include "cli.h"

#include <string.h>

int cmd_version(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: ffn version\n\nPrints the library version, the SIMD level the kernels\n"
                   "dispatch to on this CPU and the default thread count.\n");
            return 0;
        }
        cli_error("version", "unknown option '%s'", argv[i]);
        return CLI_EXIT_USAGE;
    }
    ffn_ctx *ctx = NULL;
    if (cli_make_ctx("version", 0, &ctx)) return CLI_EXIT_FAIL;
    printf("ffn %s\nsimd %s\nthreads %d\n", ffn_version(), ffn_simd_level(), ffn_ctx_threads(ctx));
    ffn_ctx_free(ctx);
    return 0;
}
