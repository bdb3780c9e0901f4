/* test_core.c -- status strings, error messages, contexts. */
#include "check.h"
#include "ffn.h"
#include "base/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(void) {
    CHECK(!strcmp(ffn_status_str(FFN_OK), "ok"), "status string of FFN_OK");
    CHECK(strcmp(ffn_status_str(FFN_ERR_CONFIG), "unknown status"), "config has a name");
    /* enum names: every value has its own, anything else the fallback */
    for (int s = FFN_OK; s <= FFN_ERR_INTERRUPTED; s++) {
        CHECK(strcmp(ffn_status_str((ffn_status)s), "unknown status"), "status %d has a name", s);
        for (int o = FFN_OK; o < s; o++)
            CHECK(strcmp(ffn_status_str((ffn_status)s), ffn_status_str((ffn_status)o)),
                  "statuses %d and %d share a name", s, o);
    }
    CHECK(!strcmp(ffn_status_str((ffn_status)(FFN_ERR_INTERRUPTED + 1)), "unknown status") &&
              !strcmp(ffn_status_str((ffn_status)-1), "unknown status"),
          "out-of-range status");
    CHECK(!strcmp(ffn_act_name(FFN_ACT_GELU_TANH), "gelu_pytorch_tanh") &&
              !strcmp(ffn_act_name((ffn_act)-1), "unknown") &&
              !strcmp(ffn_act_name((ffn_act)1000), "unknown"),
          "activation names");
    CHECK(!strcmp(ffn_mlp_type_name(FFN_MLP_GATED), "gated") &&
              !strcmp(ffn_mlp_type_name((ffn_mlp_type)77), "unknown"),
          "mlp type names");
    CHECK(!strcmp(ffn_probe_split_name(FFN_PROBE_SPLIT_TOKENS), "tokens") &&
              !strcmp(ffn_probe_split_name((ffn_probe_split)-3), "?"),
          "probe split names");
    CHECK(!strcmp(ffn_tap_point_name(FFN_TAP_ATTN_PROBS), "attn_probs") &&
              ffn_tap_point_name((ffn_tap_point)FFN_TAP_N_POINTS) == NULL,
          "tap point names");
    /* ffn_grow: capacity doubles from `first`, the items survive the moves */
    {
        int64_t *items = NULL, cap = 0, caps[10];
        for (int64_t n = 0; n < 10; n++) {
            int64_t *g = ffn_grow(items, n, &cap, sizeof *items, 4);
            CHECK(g != NULL, "grow to %lld", (long long)n + 1);
            if (!g) break;
            items = g;
            items[n] = 100 + n;
            caps[n] = cap;
        }
        int ok = 1;
        for (int64_t n = 0; n < 10; n++) ok &= items && items[n] == 100 + n;
        CHECK(ok && caps[0] == 4 && caps[3] == 4 && caps[4] == 8 && caps[8] == 16,
              "grown items and capacities (cap %lld after 10)", (long long)cap);
        int64_t huge = INT64_MAX / 2 + 1;
        CHECK(ffn_grow(items, huge, &huge, 8, 4) == NULL && huge == INT64_MAX / 2 + 1,
              "an overflowing size is refused");
        free(items);
    }
    /* control characters of file-derived text reach a message only as \xNN */
    {
        char out[64];
        CHECK(!strcmp(ffn_escape_controls(out, sizeof out, "a\x1b[31mb\n\t\x7f\xc2\x9b\xc3\xa9z"),
                      "a\\x1b[31mb\\x0a\\x09\\x7f\\xc2\\x9b\xc3\xa9z"),
              "escaped: %s", out);
        CHECK(!strcmp(ffn_escape_controls(out, 6, "ab\x1b"), "ab"), "a cut never halves an escape: %s", out);
        CHECK(!strcmp(ffn_escape_controls(out, 7, "ab\x1b"), "ab\\x1b"), "fits: %s", out);
        ffn_set_error(FFN_ERR_FORMAT, "tensor %s", "x\x1b]0;pwned\x07");
        CHECK(!strcmp(ffn_last_error(), "tensor x\\x1b]0;pwned\\x07"), "stored escaped: %s",
              ffn_last_error());
    }
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
    /* atomic replacement: commit swaps in the new file, abort keeps the old */
    char dir[] = "/tmp/ffn_test_core_XXXXXX", path[64], tmp[80], buf[16] = {0};
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/out.txt", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    ffn_atomic_file af;
    CHECK(ffn_atomic_open(&af, path) == FFN_OK, "open: %s", ffn_last_error());
    fputs("old", af.f);
    CHECK(ffn_atomic_commit(&af) == FFN_OK, "commit: %s", ffn_last_error());
    CHECK(ffn_atomic_open(&af, path) == FFN_OK, "reopen");
    fputs("new, never committed", af.f);
    ffn_atomic_abort(&af);
    ffn_atomic_abort(&af); /* twice is a no-op */
    FILE *f = fopen(path, "rb");
    CHECK(f && fread(buf, 1, sizeof buf - 1, f) == 3 && !strcmp(buf, "old"), "abort kept the old file: '%s'", buf);
    if (f) fclose(f);
    CHECK(access(tmp, F_OK) != 0, "abort removed %s", tmp);
    char missing[96];
    snprintf(missing, sizeof missing, "%s/no/such/dir/x", dir);
    CHECK(ffn_atomic_open(&af, missing) == FFN_ERR_IO && strstr(ffn_last_error(), "cannot create"),
          "missing directory: %s", ffn_last_error());
    unlink(path);
    rmdir(dir);
    return check_done("test_core");
}
