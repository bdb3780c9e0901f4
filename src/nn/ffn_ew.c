/* ffn_ew.c -- the FFN layer's elementwise parts (see ffn_ew.h), shared by
 * every back-end of its products. */
#include "nn/ffn_ew.h"
#include "kernels/kernels.h"

/* Split (rows × cols) into blocks of at most EW_BLOCK columns so that even
 * one row spreads over the threads; elementwise, hence the same result for
 * any split. */
enum { EW_BLOCK = 2048 };
/* Below this many elements a parallel region costs more than it saves. */
#define PAR_MIN_ELEMS 16384

/* Block b of that split, nb blocks per row: row *r, columns [*c0, *c0 +
 * the returned length). */
static inline int64_t ew_span(int64_t b, int64_t nb, int64_t cols, int64_t *r, int64_t *c0) {
    *r = b / nb;
    *c0 = (b % nb) * EW_BLOCK;
    return cols - *c0 < EW_BLOCK ? cols - *c0 : EW_BLOCK;
}

void ffn_ew_epilogue(ffn_act act, int gated, int64_t F, float *out, const float *dh,
                     const float *gu, int64_t n) {
    int64_t P = gated ? 2 * F : F, nb = (F + EW_BLOCK - 1) / EW_BLOCK, total = n * nb;
#pragma omp parallel for schedule(static) if (n * F >= PAR_MIN_ELEMS)
    for (int64_t b = 0; b < total; b++) {
        int64_t r, c0, len = ew_span(b, nb, F, &r, &c0);
        const float *g = gu + r * P + c0, *u = gated ? g + F : g;
        if (!dh) {
            float *h = out + r * F + c0;
            if (gated) ffn_glu_fwd(act, h, g, u, len);
            else ffn_act_fwd(act, h, u, len);
        } else {
            float *dg = out + r * P + c0;
            if (gated) ffn_glu_bwd(act, dg, dg + F, dh + r * F + c0, g, u, len);
            else ffn_act_bwd(act, dg, dh + r * F + c0, u, len);
        }
    }
}

void ffn_ew_add_bias_rows(float *y, const float *b, int64_t n, int64_t cols, int64_t ld) {
    int64_t nb = (cols + EW_BLOCK - 1) / EW_BLOCK, total = n * nb;
#pragma omp parallel for schedule(static) if (n * cols >= PAR_MIN_ELEMS)
    for (int64_t i = 0; i < total; i++) {
        int64_t r, c0, len = ew_span(i, nb, cols, &r, &c0);
        ffn_add_bias(y + r * ld + c0, b + c0, len);
    }
}

void ffn_ew_bias_grad(float *db, const float *dy, int64_t n, int64_t cols, int64_t ld) {
    enum { CB = 256 };
    int64_t nb = (cols + CB - 1) / CB;
#pragma omp parallel for schedule(static) if (n * cols >= PAR_MIN_ELEMS)
    for (int64_t b = 0; b < nb; b++) {
        int64_t c0 = b * CB, len = cols - c0 < CB ? cols - c0 : CB;
        double acc[CB];
        for (int64_t j = 0; j < len; j++) acc[j] = 0.0;
        for (int64_t r = 0; r < n; r++) {
            const float *row = dy + r * ld + c0;
            for (int64_t j = 0; j < len; j++) acc[j] += row[j];
        }
        for (int64_t j = 0; j < len; j++) db[c0 + j] += (float)acc[j];
    }
}
