/* test_layer_prod.c -- the FFN layer over projections of different number
 * types (src/nn/ffn_prod.c through ffn_layer_set_qweights): each of gate,
 * up and down in its own type, against the fp32 layer over the same
 * weights decoded to fp32 (an oracle the layer does not share: the fp32
 * engines), at the decode sizes (the blocked path) and batch sizes, dense
 * and gated, with and without bias; the blocked decode path against the
 * batch path row by row; backward refused naming the types; set_weights
 * turning the layer back into a trainable fp32 one.
 *
 * Tolerance: the integer formats round x to int8 blocks (ggml's q8_0 /
 * q8_K activations), a relative error of about 1/127 per element of x; the
 * bound is 4e-2 of max |y| (measured up to 2.1e-2, two int8-rounded
 * products chained: q6_K gate, q4_K down, D 256, F 512).  Decode vs batch
 * path: the same kernels per row at n <= 4 and at n = 5, bound 1e-5. */
#include "check.h"

#include "ffn/dtype.h"
#include "ffn/layer.h"
#include "kernels/qgemm.h"
#include "nn/ffn_quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 88172645463325252ull;
static float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

typedef struct qmat {
    ffn_ggml_type type;
    int64_t rows, cols;
    uint8_t *bytes;
    float *dec; /* decoded to fp32 */
    ffn_qweight w;
} qmat;

static int qmat_make(qmat *m, ffn_ggml_type type, int64_t rows, int64_t cols, float scale) {
    size_t rb;
    if (ffn_ggml_row_size(type, cols, &rb)) return 1;
    m->type = type, m->rows = rows, m->cols = cols;
    m->bytes = malloc(rb * (size_t)rows);
    m->dec = malloc(sizeof(float) * (size_t)(rows * cols));
    float *row = malloc(sizeof(float) * (size_t)cols);
    int bad = !m->bytes || !m->dec || !row;
    for (int64_t r = 0; !bad && r < rows; r++) {
        for (int64_t c = 0; c < cols; c++) row[c] = scale * frand();
        bad |= ffn_ggml_quantize_row(type, row, m->bytes + (size_t)r * rb, cols) != FFN_OK;
        bad |= ffn_ggml_dequantize_row(type, m->bytes + (size_t)r * rb, m->dec + r * cols,
                                       cols) != FFN_OK;
    }
    free(row);
    return bad || ffn_qweight_init(&m->w, type, rows, cols, m->bytes) != FFN_OK;
}

static void qmat_free(qmat *m) {
    free(m->bytes), free(m->dec);
    ffn_qweight_release(&m->w);
}

static double max_abs(const float *a, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(a[i]));
    return m;
}
static double max_diff(const float *a, const float *b, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

static void run_case(ffn_ctx *ctx, int64_t D, int64_t F, int gated, int bias, ffn_act act,
                     ffn_ggml_type tg, ffn_ggml_type tu, ffn_ggml_type td) {
    const int64_t NMAX = 37;
    ffn_layer_config cfg = {.hidden_size = D, .intermediate_size = F, .act = act,
                            .type = gated ? FFN_MLP_GATED : FFN_MLP_DENSE, .bias = bias,
                            .save = FFN_SAVE_NONE};
    char name[128];
    snprintf(name, sizeof name, "D%lld F%lld %s %s%s gate %s up %s down %s", (long long)D,
             (long long)F, gated ? "gated" : "dense",
             ffn_act_name(act), bias ? " +bias" : "", gated ? ffn_ggml_type_name(tg) : "-",
             ffn_ggml_type_name(tu), ffn_ggml_type_name(td));
    qmat g = {0}, u = {0}, d = {0};
    int bad = (gated && qmat_make(&g, tg, F, D, 0.2f)) || qmat_make(&u, tu, F, D, 0.2f) ||
              qmat_make(&d, td, D, F, 0.2f);
    CHECK(!bad, "%s: making the weights: %s", name, ffn_last_error());
    if (bad) goto out;
    float *bg = malloc(sizeof(float) * (size_t)F), *bu = malloc(sizeof(float) * (size_t)F);
    float *bd = malloc(sizeof(float) * (size_t)D);
    for (int64_t i = 0; i < F; i++) bg[i] = 0.1f * frand(), bu[i] = 0.1f * frand();
    for (int64_t i = 0; i < D; i++) bd[i] = 0.1f * frand();
    ffn_layer *lq = NULL, *lf = NULL;
    CHECK(ffn_layer_create(ctx, &cfg, &lq) == FFN_OK && ffn_layer_create(ctx, &cfg, &lf) == FFN_OK,
          "%s: create: %s", name, ffn_last_error());
    ffn_layer_params pf = {.gate_w = gated ? g.dec : NULL, .up_w = u.dec, .down_w = d.dec,
                           .gate_b = bias && gated ? bg : NULL, .up_b = bias ? bu : NULL,
                           .down_b = bias ? bd : NULL};
    ffn_layer_qweights pq = {.up = u.w, .down = d.w, .gate_b = pf.gate_b, .up_b = pf.up_b,
                             .down_b = pf.down_b};
    if (gated) pq.gate = g.w;
    CHECK(ffn_layer_set_weights(lf, &pf) == FFN_OK, "%s: set_weights: %s", name, ffn_last_error());
    CHECK(ffn_layer_set_qweights(lq, &pq) == FFN_OK, "%s: set_qweights: %s", name,
          ffn_last_error());
    CHECK(ffn_layer_is_quantized(lq) && !ffn_layer_is_quantized(lf), "%s: is_quantized", name);
    size_t wsb = ffn_layer_workspace_size(lq, NMAX), wsf = ffn_layer_workspace_size(lf, NMAX);
    void *ws = malloc(wsb > wsf ? wsb : wsf);
    float *x = malloc(sizeof(float) * NMAX * D), *yq = malloc(sizeof(float) * NMAX * D);
    float *yf = malloc(sizeof(float) * NMAX * D), *y1 = malloc(sizeof(float) * NMAX * D);
    for (int64_t i = 0; i < NMAX * D; i++) x[i] = frand();
    const int64_t ns[] = {1, 3, 4, 5, 37};
    double worst = 0;
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        int64_t n = ns[k];
        CHECK(ffn_layer_forward(lq, yq, x, n, NULL, ws, wsb) == FFN_OK, "%s n=%lld: %s", name,
              (long long)n, ffn_last_error());
        CHECK(ffn_layer_forward(lf, yf, x, n, NULL, ws, wsf) == FFN_OK, "%s n=%lld: fp32: %s",
              name, (long long)n, ffn_last_error());
        double e = max_diff(yq, yf, n * D) / fmax(max_abs(yf, n * D), 1e-30);
        worst = fmax(worst, e);
        CHECK(e <= 4e-2, "%s n=%lld: vs the fp32 layer on the decoded weights %.3g (tol 4e-2)",
              name, (long long)n, e);
    }
    /* the blocked decode path (n = 1 per row) against the batch path (n = 5) */
    CHECK(ffn_layer_forward(lq, yq, x, 5, NULL, ws, wsb) == FFN_OK, "%s: n=5", name);
    for (int64_t r = 0; r < 5; r++)
        CHECK(ffn_layer_forward(lq, y1 + r * D, x + r * D, 1, NULL, ws, wsb) == FFN_OK,
              "%s: row %lld", name, (long long)r);
    double e1 = max_diff(yq, y1, 5 * D) / fmax(max_abs(yq, 5 * D), 1e-30);
    CHECK(e1 <= 1e-5, "%s: decode path vs batch path %.3g (tol 1e-5)", name, e1);
    printf("%-62s vs fp32 %.2e, decode vs batch %.2e\n", name, worst, e1);
    /* backward: refused, naming the types; the inputs are not touched */
    ffn_layer_params grads = {0};
    float *dx = malloc(sizeof(float) * 3 * D);
    grads.up_w = calloc((size_t)(F * D), sizeof(float));
    ffn_status st = ffn_layer_backward(lq, dx, &grads, x, x, 3, NULL, ws, wsb);
    const char *msg = ffn_last_error();
    CHECK(st == FFN_ERR_UNSUPPORTED && strstr(msg, "low-precision") && strstr(msg, "inference only") &&
              strstr(msg, ffn_ggml_type_name(gated ? tg : tu)) &&
              strstr(msg, ffn_ggml_type_name(td)),
          "%s: backward: %d %s", name, (int)st, msg);
    int untouched = 1;
    for (int64_t i = 0; i < F * D; i++) untouched &= grads.up_w[i] == 0.0f;
    CHECK(untouched, "%s: a refused backward wrote a gradient", name);
    /* set_weights: fp32 again, trainable, and the same as the fp32 layer */
    CHECK(ffn_layer_set_weights(lq, &pf) == FFN_OK && !ffn_layer_is_quantized(lq),
          "%s: back to fp32: %s", name, ffn_last_error());
    size_t wsq = ffn_layer_workspace_size(lq, NMAX);
    void *ws2 = malloc(wsq);
    CHECK(ffn_layer_forward(lq, yq, x, 37, NULL, ws2, wsq) == FFN_OK &&
              ffn_layer_forward(lf, yf, x, 37, NULL, ws, wsf) == FFN_OK &&
              !memcmp(yq, yf, sizeof(float) * 37 * D),
          "%s: fp32 again: not bitwise the fp32 layer", name);
    CHECK(ffn_layer_backward(lq, dx, &grads, x, x, 3, NULL, ws2, wsq) == FFN_OK,
          "%s: backward after set_weights: %s", name, ffn_last_error());
    free(ws2), free(dx), free(grads.up_w);
    free(ws), free(x), free(yq), free(yf), free(y1);
    ffn_layer_free(lq), ffn_layer_free(lf);
    free(bg), free(bu), free(bd);
out:
    qmat_free(&g), qmat_free(&u), qmat_free(&d);
}

int main(void) {
    ffn_ctx *ctx = NULL;
    if (ffn_ctx_create(0, &ctx) != FFN_OK) {
        fprintf(stderr, "ctx: %s\n", ffn_last_error());
        return 1;
    }
    /* every type the table computes with (f32 left out: that is the oracle's)
     * as down, with two other computing types as gate and up */
    ffn_ggml_type types[64];
    int nt = ffn_ggml_types(FFN_GGML_COMPUTES | FFN_GGML_ENCODES, types, 64);
    CHECK(nt >= 2 && nt <= 64, "the table lists %d computing types", nt);
    int cases = 0;
    for (int i = 0; i < nt && i < 64; i++) {
        ffn_ggml_type t = types[i];
        /* D and F whole blocks of every type of the case: (64, 96) for
         * blocks up to 32, else (256, 512) */
        ffn_ggml_type t2 = types[(i + 1) % nt], t3 = types[(i + 2) % nt];
        int64_t bs = ffn_ggml_block_size(t);
        if (ffn_ggml_block_size(t2) > bs) bs = ffn_ggml_block_size(t2);
        if (ffn_ggml_block_size(t3) > bs) bs = ffn_ggml_block_size(t3);
        int64_t D = bs <= 32 ? 64 : 256, F = bs <= 32 ? 96 : 512;
        CHECK(D % bs == 0 && F % bs == 0, "block %lld divides neither", (long long)bs);
        run_case(ctx, D, F, 1, 1, FFN_ACT_SILU, t2, t3, t);
        run_case(ctx, D, F, 0, i % 2, FFN_ACT_GELU, t, t2, t3);
        cases += 2;
    }
    CHECK(cases >= 4, "only %d cases", cases);
    ffn_ctx_free(ctx);
    return check_done("test_layer_prod");
}
