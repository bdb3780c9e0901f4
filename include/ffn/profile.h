/* ffn/profile.h -- where a training step's time goes: wall-clock seconds per
 * part of the step (FFN, attention projections, attention core, norms,
 * embedding + LM head + loss, optimizer, data, other, the layers' weight
 * repacking after the update) and the FLOPs of the
 * step's weight matrix products.
 *
 * Part of the public API; include <ffn.h>, not this file.
 *
 * How it is measured: a monotonic clock read at coarse boundaries only (each
 * layer call of each block, forward and backward; the head; the optimizer;
 * the batch sampler), never inside a kernel.  The time between two readings
 * goes to the part that ran between them, so the parts tile the profiled
 * interval: their sum is the steps' wall time.  Profiling is off unless a
 * profile is attached (ffn_model_set_profile, or ffn_train_options.profile
 * for the training loop); off, the model does one NULL test per layer.
 *
 *     ffn_profile prof;
 *     ffn_profile_reset(&prof);
 *     ffn_model_set_profile(model, &prof);
 *     ffn_profile_start(&prof);
 *     ffn_model_forward_backward(model, tok, tgt, B, T, 1.0f, &loss);
 *     ffn_model_set_profile(model, NULL);
 *     // prof.seconds[FFN_PROFILE_FFN_FORWARD], prof.product_flops, ...
 *
 * The matrix products: the attention projections (q|k|v and o), the FFN or
 * MoE layers (router, experts, shared expert) and the LM head, forward and
 * both backward products (3 × the forward FLOPs).  product_seconds is the
 * time of the parts that are those products: FFN forward and backward, the
 * attention projections and the head's products.  The FFN parts include
 * the layer's activation and (MoE) its routing, so product_flops /
 * product_seconds is a lower bound on the products' rate. */
#ifndef FFN_PROFILE_H
#define FFN_PROFILE_H
#pragma GCC visibility push(default) /* what this header declares is the exported API */

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ffn_profile_part {
    FFN_PROFILE_FFN_FORWARD,   /* the FFN / MoE layers' forward */
    FFN_PROFILE_FFN_BACKWARD,  /* ... and backward (weight and input gradients) */
    FFN_PROFILE_ATTN_PROJ,     /* q|k|v and o projections (+ biases), fwd and bwd */
    FFN_PROFILE_ATTN_CORE,     /* RoPE, softmax(q·kᵀ)·v, fwd and bwd */
    FFN_PROFILE_NORM,          /* RMSNorm / LayerNorm (and q/k norms), fwd and bwd */
    FFN_PROFILE_EMBED_HEAD,    /* embedding rows and their gradient, LM head
                                  products, softmax and cross-entropy */
    FFN_PROFILE_OPTIMIZER,     /* gradient norm, clipping, AdamW */
    FFN_PROFILE_DATA,          /* drawing the batch */
    FFN_PROFILE_OTHER,         /* residual adds, zeroing gradients, reductions,
                                  checks, everything else */
    FFN_PROFILE_WEIGHT_PACK,   /* after the update: the layers repack their
                                  weights (ffn_model_params_changed) */
    FFN_PROFILE_PARTS
} ffn_profile_part;

typedef struct ffn_profile {
    double seconds[FFN_PROFILE_PARTS]; /* summed over the profiled steps */
    double product_flops;    /* the weight matrix products' FLOPs */
    double product_seconds;  /* the time of the parts that run them (above) */
    double step_seconds;     /* the steps' wall time, measured around each step */
    int64_t steps;           /* profiled steps */
    double mark;             /* the last clock reading (monotonic seconds) */
} ffn_profile;

/* "ffn_forward", "ffn_backward", "attn_proj", "attn_core", "norm",
 * "embed_head", "optimizer", "data", "other", "weight_pack"; "?" out of
 * range. */
const char *ffn_profile_part_name(ffn_profile_part part);
/* Zero every field. */
void ffn_profile_reset(ffn_profile *p);
/* Seconds of the monotonic clock the profile uses. */
double ffn_profile_now(void);
/* Set the mark to now: the next part measured starts here. */
void ffn_profile_start(ffn_profile *p);
/* Charge the time since the mark to `part`, and move the mark to now.
 * Returns the seconds charged (0 when p is NULL). */
double ffn_profile_charge(ffn_profile *p, ffn_profile_part part);

#ifdef __cplusplus
}
#endif

#pragma GCC visibility pop
#endif /* FFN_PROFILE_H */
