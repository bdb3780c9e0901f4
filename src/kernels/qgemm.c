/* qgemm.c -- matrix products with low-precision weights: the entry point
 * and the scalar oracle (see qgemm.h). */
#include "kernels/qgemm.h"

#include <stdlib.h>

static int qgemm_type_ok(ffn_ggml_type t) {
    switch (t) {
    case FFN_GGML_TYPE_F32: case FFN_GGML_TYPE_F16: case FFN_GGML_TYPE_BF16:
    case FFN_GGML_TYPE_Q8_0: case FFN_GGML_TYPE_Q4_0: case FFN_GGML_TYPE_Q4_K:
    case FFN_GGML_TYPE_Q6_K:
        return 1;
    default:
        return 0;
    }
}

ffn_status ffn_qweight_init(ffn_qweight *w, ffn_ggml_type type, int64_t rows, int64_t cols,
                            const void *data) {
    if (!w || rows < 0 || cols < 0 || (!data && rows && cols))
        return ffn_error(FFN_ERR_INVALID_ARG, "qweight: bad arguments");
    if (!qgemm_type_ok(type))
        return ffn_error(FFN_ERR_UNSUPPORTED, "qweight: type %s is not one ffn computes with",
                             ffn_ggml_type_name(type));
    size_t rb;
    ffn_status st = ffn_ggml_row_size(type, cols, &rb);
    if (st) return st;
    *w = (ffn_qweight){.type = type, .rows = rows, .cols = cols, .row_bytes = rb,
                       .data = data, .packed = NULL};
    return FFN_OK;
}

void ffn_qweight_release(ffn_qweight *w) {
    if (!w) return;
    free(w->packed);
    w->packed = NULL;
}

size_t ffn_qweight_bytes(const ffn_qweight *w) { return (size_t)w->rows * w->row_bytes; }

void ffn_qgemm_ref(const ffn_qweight *w, const float *x, int64_t ldx, int64_t n, float *y,
                   int64_t ldy, int accumulate) {
    float *row = malloc((size_t)(w->cols ? w->cols : 1) * sizeof *row);
    if (!row) abort(); /* the oracle of the tests; not on a hot path */
    for (int64_t r = 0; r < w->rows; r++) {
        (void)ffn_ggml_dequantize_row(w->type, w->data + (size_t)r * w->row_bytes, row, w->cols);
        for (int64_t i = 0; i < n; i++) {
            const float *xi = x + i * ldx;
            double s = 0;
            for (int64_t c = 0; c < w->cols; c++) s += (double)row[c] * xi[c];
            float *yo = y + i * ldy + r;
            *yo = accumulate ? *yo + (float)s : (float)s;
        }
    }
    free(row);
}

ffn_status ffn_qgemm(const ffn_ctx *ctx, const ffn_qweight *w, const float *x, int64_t ldx,
                     int64_t n, float *y, int64_t ldy, int accumulate) {
    (void)ctx;
    if (!w || !x || !y || n < 0 || ldx < w->cols || ldy < w->rows)
        return ffn_error(FFN_ERR_INVALID_ARG, "qgemm: bad arguments");
    ffn_qgemm_ref(w, x, ldx, n, y, ldy, accumulate);
    return FFN_OK;
}
