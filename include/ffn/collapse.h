/* ffn/collapse.h -- a dense FFN whose activation is the identity is two
 * linear maps in a row, so it is one:
 *     y = W_down (W_up x + b_up) + b_down = W x + b,
 *     W = W_down · W_up  (D, D),   b = W_down · b_up + b_down  (D).
 * ffn_collapse_merge builds W and b; ffn_collapse_check measures how far the
 * layer's own forward is from W x + b on seeded random inputs.  Used by
 * `ffn collapse` and by the report's linear-collapse section.
 *
 * Letters: D hidden_size, F intermediate_size, S inputs. */
#ifndef FFN_PUBLIC_COLLAPSE_H
#define FFN_PUBLIC_COLLAPSE_H
#pragma GCC visibility push(default)

#include "ffn/core.h"
#include "ffn/layer.h"

#include <stdint.h>

typedef struct ffn_collapse_result {
    double max_abs_diff;  /* max |two-layer − merged| over every input and output */
    double max_abs_y;     /* max |two-layer output| */
    double max_rel_diff;  /* max_abs_diff / max_abs_y (max_abs_diff when y is all 0) */
    double w_norm;        /* Frobenius norm of W */
    int64_t params_before, params_after; /* 2·D·F (+ F + D) -> D·D (+ D) */
} ffn_collapse_result;

/* W (D, D) and, with cfg->bias, b (D) from the layer's up and down
 * projections (double sums, rounded once).  A gated layer or an activation
 * other than linear is FFN_ERR_UNSUPPORTED, the message saying why no such
 * matrix exists.  b may be NULL without biases. */
ffn_status ffn_collapse_merge(const ffn_layer_config *cfg, const ffn_layer_params *p, float *w,
                              float *b);

/* The layer's forward (an ffn_layer on ctx) against W x + b (double
 * accumulation) on n_inputs rows x ~ N(0, 1) drawn with ffn_rng (ffn/rng.h)
 * seeded with `seed`, row by row.  Allocates its buffers (not a hot path). */
ffn_status ffn_collapse_check(ffn_ctx *ctx, const ffn_layer_config *cfg,
                              const ffn_layer_params *p, const float *w, const float *b,
                              int64_t n_inputs, uint64_t seed, ffn_collapse_result *out);

#pragma GCC visibility pop
#endif /* FFN_PUBLIC_COLLAPSE_H */
