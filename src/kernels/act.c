/* act.c -- activations: names and parsing, the scalar reference (computed
 * in double: the test oracle), and the run-time dispatch of the array
 * kernels and fused epilogues (act_impl.h, instantiated here for the
 * baseline ISA and in act_avx2.c / act_avx512.c).
 *
 * Definitions follow PyTorch:
 *   relu        max(x, 0)                     relu'(0) = 0
 *   gelu        0.5·x·(1 + erf(x/√2))         computed as 0.5·x·erfc(-x/√2)
 *   gelu_tanh   0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
 *   silu        x·σ(x)
 *   sigmoid     σ(x) = 1 / (1 + e^-x)         via e^-|x|, never overflowing */
#define ACT_SFX scalar
#include "ffn/layer.h"
#include "kernels/act_impl.h"

#include <math.h>
#include <string.h>

/* ---- names -------------------------------------------------------------- */

static const struct {
    const char *name;
    ffn_act act;
    ffn_mlp_type type;
} act_names[] = {
    {"linear", FFN_ACT_LINEAR, FFN_MLP_AUTO},
    {"identity", FFN_ACT_LINEAR, FFN_MLP_AUTO},
    {"relu", FFN_ACT_RELU, FFN_MLP_AUTO},
    {"gelu", FFN_ACT_GELU, FFN_MLP_AUTO},
    {"gelu_pytorch_tanh", FFN_ACT_GELU_TANH, FFN_MLP_AUTO},
    {"gelu_new", FFN_ACT_GELU_TANH, FFN_MLP_AUTO},
    {"gelu_tanh", FFN_ACT_GELU_TANH, FFN_MLP_AUTO},
    {"silu", FFN_ACT_SILU, FFN_MLP_AUTO},
    {"swish", FFN_ACT_SILU, FFN_MLP_AUTO},
    {"sigmoid", FFN_ACT_SIGMOID, FFN_MLP_AUTO},
    {"glu", FFN_ACT_SIGMOID, FFN_MLP_GATED},
    {"bilinear", FFN_ACT_LINEAR, FFN_MLP_GATED},
    {"reglu", FFN_ACT_RELU, FFN_MLP_GATED},
    {"geglu", FFN_ACT_GELU, FFN_MLP_GATED},
    {"swiglu", FFN_ACT_SILU, FFN_MLP_GATED},
};

ffn_status ffn_act_parse(const char *name, ffn_act *act, ffn_mlp_type *implied_type) {
    if (!name || !act) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_act_parse: NULL argument");
    for (size_t i = 0; i < sizeof act_names / sizeof act_names[0]; i++)
        if (!strcmp(name, act_names[i].name)) {
            *act = act_names[i].act;
            if (implied_type) *implied_type = act_names[i].type;
            return FFN_OK;
        }
    return ffn_error(FFN_ERR_CONFIG,
                     "hidden_act: unknown value '%s' (expected one of linear, relu, gelu, "
                     "gelu_pytorch_tanh, gelu_new, silu, swish, sigmoid, or a gated family: "
                     "glu, bilinear, reglu, geglu, swiglu)",
                     name);
}

const char *ffn_act_name(ffn_act act) {
    static const char *const names[] = {[FFN_ACT_LINEAR] = "linear", [FFN_ACT_RELU] = "relu",
        [FFN_ACT_GELU] = "gelu", [FFN_ACT_GELU_TANH] = "gelu_pytorch_tanh",
        [FFN_ACT_SILU] = "silu", [FFN_ACT_SIGMOID] = "sigmoid"};
    return FFN_ENUM_NAME(names, act, "unknown");
}

const char *ffn_mlp_type_name(ffn_mlp_type type) {
    static const char *const names[] = {
        [FFN_MLP_AUTO] = "auto", [FFN_MLP_DENSE] = "dense", [FFN_MLP_GATED] = "gated"};
    return FFN_ENUM_NAME(names, type, "unknown");
}

/* ---- the scalar reference, in double ------------------------------------ */

static double ref_sigmoid(double x) {
    double e = exp(-fabs(x));
    return x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}

static double ref_two_phi(double x) { return erfc(-x * M_SQRT1_2); }

static double ref_tanh_inner(double x) {
    const double k = 0.79788456080286535588; /* √(2/π) */
    return k * (x + 0.044715 * x * x * x);
}

float ffn_act_forward(ffn_act act, float xf) {
    double x = xf;
    switch (act) {
    case FFN_ACT_LINEAR: return xf;
    case FFN_ACT_RELU: return xf > 0.0f ? xf : 0.0f;
    case FFN_ACT_GELU: return (float)(0.5 * x * ref_two_phi(x));
    case FFN_ACT_GELU_TANH: { /* 0.5·(1 + tanh(u)) = σ(2u), without cancellation */
        double xc = fmax(-20.0, fmin(20.0, x)); /* σ(2u) is 0 or 1 in float beyond */
        return (float)(x * ref_sigmoid(2.0 * ref_tanh_inner(xc)));
    }
    case FFN_ACT_SILU: return (float)(x * ref_sigmoid(x));
    case FFN_ACT_SIGMOID: return (float)ref_sigmoid(x);
    }
    return xf;
}

float ffn_act_grad(ffn_act act, float xf) {
    double x = xf;
    switch (act) {
    case FFN_ACT_LINEAR: return 1.0f;
    case FFN_ACT_RELU: return xf > 0.0f ? 1.0f : 0.0f;
    case FFN_ACT_GELU: {
        double xc = fmax(-40.0, fmin(40.0, x)); /* x·φ(x) is 0 in float beyond */
        return (float)(0.5 * ref_two_phi(x) + xc * exp(-0.5 * xc * xc) * 0.39894228040143267794);
    }
    case FFN_ACT_GELU_TANH: {
        const double k = 0.79788456080286535588;
        double xc = fmax(-20.0, fmin(20.0, x));
        double u2 = 2.0 * ref_tanh_inner(xc), s = ref_sigmoid(u2), q = ref_sigmoid(-u2);
        return (float)(s + 2.0 * xc * s * q * k * (1.0 + 3.0 * 0.044715 * xc * xc));
    }
    case FFN_ACT_SILU: {
        double s = ref_sigmoid(x), q = ref_sigmoid(-x);
        return (float)(s * (1.0 + fmax(-1e3, fmin(1e3, x)) * q));
    }
    case FFN_ACT_SIGMOID: return (float)(ref_sigmoid(x) * ref_sigmoid(-x));
    }
    return 1.0f;
}

/* ---- dispatch ------------------------------------------------------------ */

void ffn_act_fwd(ffn_act act, float *y, const float *x, int64_t n) {
    FFN_SIMD_DISPATCH(ffn_act_fwd, act, y, x, n);
}
void ffn_act_bwd(ffn_act act, float *dx, const float *dy, const float *x, int64_t n) {
    FFN_SIMD_DISPATCH(ffn_act_bwd, act, dx, dy, x, n);
}
void ffn_glu_fwd(ffn_act act, float *h, const float *g, const float *u, int64_t n) {
    FFN_SIMD_DISPATCH(ffn_glu_fwd, act, h, g, u, n);
}
void ffn_glu_bwd(ffn_act act, float *dg, float *du, const float *dh, const float *g,
                 const float *u, int64_t n) {
    FFN_SIMD_DISPATCH(ffn_glu_bwd, act, dg, du, dh, g, u, n);
}
void ffn_add_bias(float *y, const float *b, int64_t n) { FFN_SIMD_DISPATCH(ffn_add_bias, y, b, n); }
void ffn_accumulate(float *acc, const float *x, int64_t n) {
    FFN_SIMD_DISPATCH(ffn_accumulate, acc, x, n);
}
