/* qgemm_driver.c -- the C side of tests/parity/test_quant_formats.py,
 * compiled by the test against build/libffn.a.
 *   qgemm_driver TYPE ROWS COLS N THREADS W.bin X.f32 Y.f32
 * y (N, ROWS) = x (N, COLS) · Wᵀ by ffn_ggml_matmul, W the ggml rows of
 * TYPE in W.bin, x and y raw little-endian float32.  Exit 0 on success, 1
 * with a message on stderr. */
#include <ffn.h>

#include <stdio.h>
#include <stdlib.h>

static void *slurp(const char *path, size_t want) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    void *p = malloc(want ? want : 1);
    size_t got = p ? fread(p, 1, want, f) : 0;
    fclose(f);
    if (got != want) {
        free(p);
        return NULL;
    }
    return p;
}

int main(int argc, char **argv) {
    if (argc != 9) {
        fprintf(stderr, "usage: qgemm_driver TYPE ROWS COLS N THREADS W.bin X.f32 Y.f32\n");
        return 1;
    }
    ffn_ggml_type type;
    if (!ffn_ggml_type_parse(argv[1], &type)) {
        fprintf(stderr, "qgemm_driver: unknown type %s\n", argv[1]);
        return 1;
    }
    int64_t rows = atoll(argv[2]), cols = atoll(argv[3]), n = atoll(argv[4]);
    size_t rb;
    ffn_ctx *ctx = NULL;
    if (ffn_ggml_row_size(type, cols, &rb) || ffn_ctx_create(atoi(argv[5]), &ctx)) {
        fprintf(stderr, "qgemm_driver: %s\n", ffn_last_error());
        return 1;
    }
    void *w = slurp(argv[6], (size_t)rows * rb);
    float *x = slurp(argv[7], (size_t)(n * cols) * sizeof(float));
    float *y = malloc((size_t)(n * rows) * sizeof *y + 1);
    if (!w || !x || !y) {
        fprintf(stderr, "qgemm_driver: cannot read %s or %s (size)\n", argv[6], argv[7]);
        return 1;
    }
    if (ffn_ggml_matmul(ctx, type, rows, cols, w, x, n, y)) {
        fprintf(stderr, "qgemm_driver: %s\n", ffn_last_error());
        return 1;
    }
    FILE *f = fopen(argv[8], "wb");
    if (!f || fwrite(y, sizeof *y, (size_t)(n * rows), f) != (size_t)(n * rows) || fclose(f)) {
        fprintf(stderr, "qgemm_driver: cannot write %s\n", argv[8]);
        return 1;
    }
    free(w); free(x); free(y);
    ffn_ctx_free(ctx);
    return 0;
}
