/* ffn/layer.h -- the feed-forward layer: dense FFN and the GLU family.
 *
 * Part of the public API; include <ffn.h>, not this file.
 *
 * Letters:  N tokens, D hidden_size (d_model), F intermediate_size (d_ff).
 *
 * Layout, stated once: weights are W[out][in], as in torch.nn.Linear and
 * safetensors checkpoints, and a projection is y = x · Wᵀ + b.
 *   gate_proj.weight (F, D)   up_proj.weight (F, D)   down_proj.weight (D, F)
 *   gate_proj.bias   (F)      up_proj.bias   (F)      down_proj.bias   (D)
 *
 *   dense:  y = down( act( up(x) ) )
 *   gated:  y = down( act(gate(x)) ⊙ up(x) )     (GLU family)
 *
 *   family    type   act                  family    type   act
 *   ------    -----  ---------            ------    -----  ---------
 *   GLU       gated  sigmoid              ReGLU     gated  relu
 *   Bilinear  gated  linear               GEGLU     gated  gelu
 *                                         SwiGLU    gated  silu
 *
 * The layer is position-wise: X (N, D) row-major, each row computed alone
 * with the same weights.  N = 0 is a valid no-op.
 *
 * Memory.  The layer keeps pointers to the caller's fp32 weights (they must
 * outlive it, and ffn_layer_set_weights must be called again after they
 * change) plus prepacked copies for the matrix engine: 1x the weight bytes
 * extra after set_weights (the forward layout), 2x after the first backward
 * (the backward layout too).  Our code never allocates in forward or
 * backward; the caller passes a workspace of ffn_layer_workspace_size()
 * bytes (which also makes the engine's primitives for up to max_n tokens
 * ahead).  oneDNN itself allocates small bookkeeping objects per call (see
 * the top of src/nn/ffn.c for the measured counts); the decode path allocates
 * nothing.
 *
 * What backward needs (per token, fp32):
 *   FFN_SAVE_ACTIVATIONS (default): forward writes the pre-activations to
 *     `saved`: gated 2·F floats (gate and up), dense F floats (up).  Backward
 *     reads them and x.
 *   FFN_SAVE_NONE (recompute): `saved` is unused (0 bytes); backward
 *     recomputes the two input projections from x, costing 2·N·D·F (dense)
 *     or 4·N·D·F (gated) extra FLOPs, about a third more than backward alone.
 *   Either way the transient workspace is the same, so recompute pays off in
 *   a model, where saved activations of every layer live at once while one
 *   workspace is shared.
 *
 * Example:
 *     ffn_ctx *ctx;  ffn_ctx_create(2, &ctx);
 *     ffn_layer_config cfg = { .hidden_size = 1024, .intermediate_size = 2816,
 *                              .type = FFN_MLP_GATED, .act = FFN_ACT_SILU };
 *     ffn_layer *l;  ffn_layer_create(ctx, &cfg, &l);
 *     ffn_layer_params w = { .gate_w = Wg, .up_w = Wu, .down_w = Wd };
 *     ffn_layer_set_weights(l, &w);
 *     size_t ws_bytes = ffn_layer_workspace_size(l, n);
 *     void *ws = malloc(ws_bytes);
 *     ffn_layer_forward(l, y, x, n, NULL, ws, ws_bytes);
 */
#ifndef FFN_LAYER_H
#define FFN_LAYER_H
#pragma GCC visibility push(default) /* what this header declares is the exported API */

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Activations, with the Hugging Face `hidden_act` names. */
typedef enum ffn_act {
    FFN_ACT_LINEAR = 0, /* "linear": identity (dense: the collapse case; gated: Bilinear) */
    FFN_ACT_RELU,       /* "relu" */
    FFN_ACT_GELU,       /* "gelu": exact, 0.5·x·(1 + erf(x/√2)) */
    FFN_ACT_GELU_TANH,  /* "gelu_pytorch_tanh", "gelu_new": tanh approximation */
    FFN_ACT_SILU,       /* "silu", "swish": x·σ(x) */
    FFN_ACT_SIGMOID     /* "sigmoid": σ(x) (gated: GLU) */
} ffn_act;

typedef enum ffn_mlp_type {
    FFN_MLP_AUTO = 0, /* decide from the weights: gated if gate_proj.weight exists */
    FFN_MLP_DENSE,
    FFN_MLP_GATED
} ffn_mlp_type;

typedef enum ffn_save_mode {
    FFN_SAVE_ACTIVATIONS = 0, /* forward saves pre-activations for backward */
    FFN_SAVE_NONE             /* backward recomputes them from x */
} ffn_save_mode;

/* Precision of the matrix products (mixed precision, as PyTorch's
 * torch.autocast("cpu", dtype=torch.bfloat16)):
 *   FFN_PRECISION_FP32  fp32 everywhere (the default: zero-initialised
 *                       configs keep it).
 *   FFN_PRECISION_BF16  every matrix product takes bf16 weights and bf16
 *                       activations (each rounded to nearest even from
 *                       fp32), accumulates and writes fp32.  Weights,
 *                       gradients, biases, activations' epilogues and
 *                       everything between products stay fp32: the bf16
 *                       copy of the weights is made by set_weights (call it
 *                       after every optimizer step, as for fp32).
 *                       Needs AVX-512 with AVX512_BF16 (vdpbf16ps) at the
 *                       SIMD level in use (FFN_SIMD may cap it); without
 *                       them creating a bf16 layer fails with
 *                       FFN_ERR_UNSUPPORTED (there is no emulated path). */
typedef enum ffn_precision {
    FFN_PRECISION_FP32 = 0,
    FFN_PRECISION_BF16
} ffn_precision;
/* "fp32" or "bf16" (exact).  Anything else is an error naming the value
 * and the accepted names. */
ffn_status ffn_precision_parse(const char *name, ffn_precision *out);
const char *ffn_precision_name(ffn_precision p); /* "fp32", "bf16", "?" */
/* 1 when products at precision p can run here (fp32 always). */
int ffn_precision_supported(ffn_precision p);

/* Parse an activation name.  Accepts the Hugging Face names above and, for
 * the CLI, the family names "glu", "bilinear", "reglu", "geglu", "swiglu";
 * *implied_type is set to FFN_MLP_GATED for a family name and FFN_MLP_AUTO
 * otherwise (implied_type may be NULL). */
ffn_status ffn_act_parse(const char *name, ffn_act *act, ffn_mlp_type *implied_type);
const char *ffn_act_name(ffn_act act); /* the canonical Hugging Face name */
const char *ffn_mlp_type_name(ffn_mlp_type type); /* "auto", "dense", "gated" */

/* Scalar reference activations and derivatives (also the test oracle).
 * Finite and correct for |x| up to 1e4 and beyond. */
float ffn_act_forward(ffn_act act, float x);
float ffn_act_grad(ffn_act act, float x); /* d act(x) / dx */

typedef struct ffn_layer_config {
    int64_t hidden_size;       /* D */
    int64_t intermediate_size; /* F */
    ffn_act act;               /* hidden_act */
    ffn_mlp_type type;         /* must be DENSE or GATED when creating a layer */
    int bias;                  /* mlp_bias: every projection has a bias */
    ffn_save_mode save;        /* what forward keeps for backward */
    ffn_precision precision;   /* of the matrix products (default fp32) */
} ffn_layer_config;

/* Read a layer config from a JSON file with Hugging Face names:
 * hidden_size, intermediate_size, hidden_act (default "silu"), mlp_bias
 * (default false), mlp_type ("dense"|"gated", default auto).  Unknown keys
 * are ignored.  Errors name the file, the field and the value. */
ffn_status ffn_layer_config_load(const char *path, ffn_layer_config *cfg);
/* Check sizes (> 0, no overflow of D·F·3 elements in bytes) and enum values. */
ffn_status ffn_layer_config_validate(const ffn_layer_config *cfg);

/* Pointers to the six tensors of a layer, fp32.  Used for the weights
 * (read-only) and for the gradients (accumulated with +=).  Biases are NULL
 * when the config has no bias; gate_w/gate_b are NULL for a dense layer.
 * In a gradient struct any NULL pointer means "do not compute this one". */
typedef struct ffn_layer_params {
    float *gate_w; /* (F, D) */
    float *gate_b; /* (F) */
    float *up_w;   /* (F, D) */
    float *up_b;   /* (F) */
    float *down_w; /* (D, F) */
    float *down_b; /* (D) */
} ffn_layer_params;

typedef struct ffn_layer ffn_layer;

ffn_status ffn_layer_create(ffn_ctx *ctx, const ffn_layer_config *cfg, ffn_layer **out);
void ffn_layer_free(ffn_layer *layer); /* NULL is a no-op */
const ffn_layer_config *ffn_layer_get_config(const ffn_layer *layer);

/* Point the layer at weights and prepack them (allocates; not a hot path).
 * Call again whenever the weight values change (e.g. after an optimizer
 * step). */
ffn_status ffn_layer_set_weights(ffn_layer *layer, const ffn_layer_params *weights);

/* Parameter count: gated 3·D·F, dense 2·D·F, plus 2·F + D with biases. */
int64_t ffn_layer_num_params(const ffn_layer_config *cfg);
/* Forward FLOPs per token (2 per multiply-add, matrix products only). */
int64_t ffn_layer_flops_per_token(const ffn_layer_config *cfg);

/* Bytes of workspace forward and backward need for up to max_n tokens. */
size_t ffn_layer_workspace_size(const ffn_layer *layer, int64_t max_n);
/* Bytes forward writes to `saved` for n tokens (0 under FFN_SAVE_NONE). */
size_t ffn_layer_saved_size(const ffn_layer *layer, int64_t n);

/* y (N, D) = layer(x (N, D)).  `saved` (may be NULL for inference) receives
 * what backward needs.  y must not alias x. */
ffn_status ffn_layer_forward(ffn_layer *layer, float *y, const float *x, int64_t n,
                             float *saved, void *workspace, size_t workspace_bytes);

/* Given dy (N, D), write dx (N, D) (dx may be NULL: not needed) and
 * accumulate into the gradient pointers of `grads` (+=; NULL ones skipped).
 * x and `saved` are what forward was given and wrote.  Gradients are of
 * L = Σ y ⊙ dy. */
ffn_status ffn_layer_backward(ffn_layer *layer, float *dx, const ffn_layer_params *grads,
                              const float *dy, const float *x, int64_t n,
                              const float *saved, void *workspace, size_t workspace_bytes);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif /* FFN_LAYER_H */
