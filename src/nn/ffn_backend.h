/* ffn_backend.h -- the back-ends of the FFN layer's products.  Internal;
 * not installed.
 *
 * The layer's algorithm is written once, in ffn.c: the config and call
 * checks, the workspace (gu (n, P), h (n, F), the rest for the back-end),
 * the thread team, the taps' hook, the save modes, the elementwise parts
 * (nn/ffn_ew.c).  What depends on the number type of the weights is the
 * products, and a back-end computes them:
 *   fp32   ffn.c's own engines (streaming kernels for small n, oneDNN
 *          matmul over prepacked weights, ffn_wgrad / sgemm for dW);
 *   bf16   bf16_layer.c (FFN_PRECISION_BF16: bf16 packs of the fp32
 *          masters, oneDNN bf16 matmul; needs AVX512_BF16);
 *   ggml   ffn_quant.c (each projection in any type ffn computes with,
 *          through ffn_qgemm, whose kernels the type table picks by type,
 *          n and CPU; forward only).
 * ffn.c picks the back-end from the weights it was given (set_weights:
 * fp32 masters, bf16 at that precision; set_qweights: ggml) and hands the
 * call's buffers over; a back-end never sees the layer. */
#ifndef FFN_NN_FFN_BACKEND_H
#define FFN_NN_FFN_BACKEND_H

#include "base/common.h"
#include "ffn/layer.h"
#include "nn/ffn_hook.h"

typedef struct ffn_layer_backend {
    const char *name;
    const char *weights; /* what the layer holds, for messages ("low-precision") */
    /* gu (n, P) = x·W_inᵀ + b_in, h (n, F) = epilogue(gu), y (n, D) = h·W_downᵀ +
     * b_down; ws: the workspace beyond gu and h; writer: a hook that writes gu
     * and h (the unfused path), or NULL.  Runs on the calling thread team. */
    ffn_status (*forward)(void *impl, const ffn_ctx *ctx, float *y, float *gu, float *h,
                          const float *x, int64_t n, void *ws, size_t ws_bytes,
                          const ffn_neuron_hook *writer, const ffn_hook_rows *rows);
    /* as ffn_layer_backward (gradients +=, NULL ones skipped); saved is
     * forward's gu, or NULL to recompute it into dgu (n, P); h (n, F) a
     * buffer.  NULL: the back-end computes no gradients (inference only). */
    ffn_status (*backward)(void *impl, float *dx, const ffn_layer_params *g, const float *dy,
                           const float *x, int64_t n, const float *saved, float *dgu, float *h,
                           void *ws, size_t ws_bytes);
    /* workspace bytes beyond ffn.c's own for up to max_n tokens (NULL: 0) */
    size_t (*workspace_extra)(void *impl, int64_t max_n);
} ffn_layer_backend;

extern const ffn_layer_backend ffn_layer_backend_bf16; /* bf16_layer.c */
extern const ffn_layer_backend ffn_layer_backend_ggml; /* ffn_quant.c */

#endif /* FFN_NN_FFN_BACKEND_H */
