/* cmd_version.c -- `ffn version`: what this build is and what it will use. */
#include "cli.h"

int cmd_version(int argc, char **argv) {
    const cli_opt opts[] = {{0}};
    const cli_spec spec = {.cmd = "version",
                           .about = "Prints the library version, the SIMD level the kernels\n"
                                    "dispatch to on this CPU and the default thread count.\n",
                           .opts = opts};
    int rc;
    if (cli_parse(&spec, argc, argv, &rc)) return rc;
    ffn_ctx *ctx = NULL;
    if (cli_make_ctx("version", 0, &ctx)) return CLI_EXIT_FAIL;
    printf("ffn %s\nsimd %s\nthreads %d\n", ffn_version(), ffn_simd_level(), ffn_ctx_threads(ctx));
    ffn_ctx_free(ctx);
    return 0;
}
