/* act_impl.h -- the array activations and fused epilogues, written once
 * and instantiated per SIMD level: act.c (baseline), act_avx2.c and
 * act_avx512.c define ACT_SFX and include this file, and the compiler
 * vectorises each `omp simd` loop for that file's ISA.  Internal.
 *
 * Every kernel is elementwise over n contiguous floats; callers split rows
 * across threads.  Outputs may alias inputs at the same index (each
 * element is read before it is written), which backward uses to turn
 * pre-activations into their gradients in place. */
/* The selects in act_math.h (clamps, sign choices) if-convert into vector
 * blends only when floating-point comparisons are not treated as possibly
 * trapping; the library never enables FP exceptions, so this is safe, and
 * it is scoped to the files that include this one. */
#pragma GCC optimize("no-trapping-math")

#include "ffn/layer.h"
#include "kernels/act_math.h"
#include "kernels/kernels.h"

#define ACT_CAT2(a, b) a##_##b
#define ACT_CAT(a, b) ACT_CAT2(a, b)
#define ACT_FN(name) ACT_CAT(name, ACT_SFX)

#define ACT_LOOP(body)                                                                        \
    do {                                                                                       \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) { body; }                          \
    } while (0)

/* One loop per activation: `F(x)` names the scalar function, spliced in. */
#define ACT_SWITCH(act, STMT)                                                                 \
    switch (act) {                                                                             \
    case FFN_ACT_LINEAR: ACT_LOOP(STMT(am_linear, am_linear_grad)); break;                     \
    case FFN_ACT_RELU: ACT_LOOP(STMT(am_relu, am_relu_grad)); break;                           \
    case FFN_ACT_GELU: ACT_LOOP(STMT(am_gelu, am_gelu_grad)); break;                           \
    case FFN_ACT_GELU_TANH: ACT_LOOP(STMT(am_gelu_tanh, am_gelu_tanh_grad)); break;            \
    case FFN_ACT_SILU: ACT_LOOP(STMT(am_silu, am_silu_grad)); break;                           \
    case FFN_ACT_SIGMOID: ACT_LOOP(STMT(am_sigmoid, am_sigmoid_grad)); break;                  \
    }

#ifndef ACT_LINEAR_DEFINED
#define ACT_LINEAR_DEFINED
AM_INLINE float am_linear(float x) { return x; }
AM_INLINE float am_linear_grad(float x) { (void)x; return 1.0f; }
#endif

/* y = act(x) */
void ACT_FN(ffn_act_fwd)(ffn_act act, float *y, const float *x, int64_t n) {
#define STMT_FWD(F, G) y[i] = F(x[i])
    ACT_SWITCH(act, STMT_FWD)
#undef STMT_FWD
}

/* dx = dy ⊙ act'(x) */
void ACT_FN(ffn_act_bwd)(ffn_act act, float *dx, const float *dy, const float *x, int64_t n) {
#define STMT_BWD(F, G) dx[i] = dy[i] * G(x[i])
    ACT_SWITCH(act, STMT_BWD)
#undef STMT_BWD
}

/* h = act(g) ⊙ u */
void ACT_FN(ffn_glu_fwd)(ffn_act act, float *h, const float *g, const float *u, int64_t n) {
#define STMT_GFWD(F, G) h[i] = F(g[i]) * u[i]
    ACT_SWITCH(act, STMT_GFWD)
#undef STMT_GFWD
}

/* dg = dh ⊙ u ⊙ act'(g),  du = dh ⊙ act(g)   (dg may be g, du may be u) */
void ACT_FN(ffn_glu_bwd)(ffn_act act, float *dg, float *du, const float *dh, const float *g,
                         const float *u, int64_t n) {
#define STMT_GBWD(F, G)                                                                       \
    float gi = g[i], ui = u[i], dhi = dh[i];                                                   \
    dg[i] = dhi * ui * G(gi);                                                                  \
    du[i] = dhi * F(gi)
    ACT_SWITCH(act, STMT_GBWD)
#undef STMT_GBWD
}

/* y += b */
void ACT_FN(ffn_add_bias)(float *y, const float *b, int64_t n) {
    ACT_LOOP(y[i] += b[i]);
}

/* acc += x */
void ACT_FN(ffn_accumulate)(float *acc, const float *x, int64_t n) {
    ACT_LOOP(acc[i] += x[i]);
}
