/* test_core.c -- status strings, error messages, contexts. */
#include "check.h"
#include "ffn.h"

#include <stdlib.h>
#include <string.h>

int main(void) {
    CHECK(!strcmp(ffn_status_str(FFN_OK), "ok"), "status string of FFN_OK");
    CHECK(strcmp(ffn_status_str(FFN_ERR_CONFIG), "unknown status"), "config has a name");
    ffn_ctx *ctx = NULL;
    CHECK(ffn_ctx_create(3, &ctx) == FFN_OK && ffn_ctx_threads(ctx) == 3, "explicit threads");
    ffn_ctx_free(ctx);
    ffn_ctx_free(NULL);
    setenv("FFN_NUM_THREADS", "2", 1);
    CHECK(ffn_ctx_create(0, &ctx) == FFN_OK && ffn_ctx_threads(ctx) == 2, "env threads");
    ffn_ctx_free(ctx);
    setenv("FFN_NUM_THREADS", "two", 1);
    ctx = NULL;
    CHECK(ffn_ctx_create(0, &ctx) == FFN_ERR_CONFIG && ctx == NULL, "bad env rejected");
    CHECK(strstr(ffn_last_error(), "FFN_NUM_THREADS") != NULL, "message names the variable: %s",
          ffn_last_error());
    const char *simd = ffn_simd_level();
    CHECK(!strcmp(simd, "avx512") || !strcmp(simd, "avx2") || !strcmp(simd, "scalar"), "simd %s",
          simd);
    return check_done("test_core");
}
