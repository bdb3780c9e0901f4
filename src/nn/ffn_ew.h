/* ffn_ew.h -- the elementwise parts of the FFN layer, written once for
 * every number type of its products (ffn.c, nn/ffn_prod.c): the
 * activation epilogue, the bias rows, the bias gradient.
 * Internal; not installed.
 *
 * Letters: n rows, F intermediate_size, P = 2F gated ([g | u]) or F.
 * Each is elementwise or a fixed per-column order, split over the threads
 * in blocks of columns, so results do not depend on the thread count. */
#ifndef FFN_NN_FFN_EW_H
#define FFN_NN_FFN_EW_H

#include "base/common.h"
#include "ffn/layer.h"

/* The activation epilogue over n rows of gu (ld P) = [g | u] or [u].
 * Forward (dh NULL): out = h (ld F) = act(g) ⊙ u, or act(u).  Backward:
 * out = dgu (ld P) = epilogue'(dh (ld F), gu); out may equal gu. */
void ffn_ew_epilogue(ffn_act act, int gated, int64_t F, float *out, const float *dh,
                     const float *gu, int64_t n);
/* y (n, ld) += b (cols) on every row */
void ffn_ew_add_bias_rows(float *y, const float *b, int64_t n, int64_t cols, int64_t ld);
/* db (cols) += Σ_rows dy (n, ld): each column summed in row order in double
 * by one thread, so the result does not depend on the thread count. */
void ffn_ew_bias_grad(float *db, const float *dy, int64_t n, int64_t cols, int64_t ld);

#endif /* FFN_NN_FFN_EW_H */
