/* act_math.h -- branch-free single-precision activation math, written so
 * that `#pragma omp simd` loops vectorise it for whatever ISA the including
 * file is compiled for (act_impl.h instantiates it once per SIMD level).
 * Internal.
 *
 * Accuracy (measured by tests/unit/test_kernels.c against the double
 * reference in act.c): a few ulp, relative, wherever the result is a
 * normal float; results that would be subnormal are flushed to zero.
 * Every function is finite for every finite input (|x| up to FLT_MAX):
 * exponentials only ever see arguments <= 0, and polynomials in x are
 * evaluated on x clamped to a range outside which the result is already
 * exact in float. */
#ifndef FFN_ACT_MATH_H
#define FFN_ACT_MATH_H

#include <stdint.h>
#include <string.h>

#define AM_INLINE static inline __attribute__((always_inline))

AM_INLINE float am_clamp(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }
AM_INLINE float am_abs(float x) { return x < 0.0f ? -x : x; }

/* exp(x) for x <= 0 (any magnitude, -inf included).  x = n·ln2 + r with
 * |r| <= ln2/2, e^r by its Taylor series to r^7 (error < 1e-8 relative),
 * 2^n built in the exponent bits.  Below -87.3 (2^-126) the result is 0. */
AM_INLINE float am_exp_neg(float x) {
    const float log2e = 1.44269504f, ln2_hi = 0.693145752f, ln2_lo = 1.42860677e-6f;
    const float round_magic = 12582912.0f; /* 1.5·2^23: adding it rounds to an integer */
    /* written so that NaN lands inside the range (the conversion to int
     * below must never see NaN); the NaN itself is passed on at the end */
    float xc = x >= -87.3f ? (x <= 0.0f ? x : 0.0f) : -87.3f;
    float nf = (xc * log2e + round_magic) - round_magic;
    float r = (xc - nf * ln2_hi) - nf * ln2_lo;
    float p = 1.0f / 5040.0f + r * (1.0f / 40320.0f);
    p = 1.0f / 720.0f + r * p;
    p = 1.0f / 120.0f + r * p;
    p = 1.0f / 24.0f + r * p;
    p = 1.0f / 6.0f + r * p;
    p = 0.5f + r * p;
    p = 1.0f + r * p;
    p = 1.0f + r * p;
    uint32_t bits = (uint32_t)((int32_t)nf + 127) << 23;
    bits = x < -87.3f ? 0u : bits; /* an integer select: if-converts without FP traps */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    float result = p * scale;
    return x != x ? x : result;
}

/* erfc(z) for z >= 0: t·exp(-z² + P(t)), t = 1/(1 + z/2), P a degree-9
 * polynomial least-squares fitted (for this project, against mpmath) to
 * log(erfc(z)/t) + z² over all z >= 0; 1.2e-7 relative in exact
 * arithmetic.  z is clamped at 10 (erfc(10) = 2e-45 is 0 in float). */
AM_INLINE float am_erfc_pos(float z) {
    float zc = am_clamp(z, 0.0f, 10.0f);
    float t = 1.0f / (1.0f + 0.5f * zc);
    float p = 1.720445039e-01f;
    p = -8.277257126e-01f + t * p;
    p = 1.499681429e+00f + t * p;
    p = -1.147441278e+00f + t * p;
    p = 2.868429634e-01f + t * p;
    p = -1.894318514e-01f + t * p;
    p = 9.751320990e-02f + t * p;
    p = 3.740001489e-01f + t * p;
    p = 1.000028966e+00f + t * p;
    p = -1.265512316e+00f + t * p;
    float r = t * am_exp_neg(-zc * zc + p);
    return z >= 10.0f ? 0.0f : r;
}

/* σ(|x|) and σ(-|x|) = 1 - σ(|x|), both without cancellation. */
AM_INLINE void am_sigmoid_pair(float x, float *s, float *one_minus_s) {
    float e = am_exp_neg(-am_abs(x));
    float d = 1.0f / (1.0f + e);
    float big = d, small = e * d;
    *s = x >= 0.0f ? big : small;
    *one_minus_s = x >= 0.0f ? small : big;
}

#define AM_SQRT1_2 0.70710678118654752f
#define AM_INV_SQRT_2PI 0.39894228040143268f
#define AM_TANH_K 0.79788456080286536f /* √(2/π) */
#define AM_TANH_C 0.044715f

/* 2·Φ(x) = 1 + erf(x/√2) = erfc(-x/√2). */
AM_INLINE float am_two_phi(float x) {
    float c = am_erfc_pos(am_abs(x) * AM_SQRT1_2);
    return x >= 0.0f ? 2.0f - c : c;
}

AM_INLINE float am_gelu_tanh_inner(float xc) {
    return AM_TANH_K * (xc + AM_TANH_C * xc * xc * xc);
}

/* ---- activations and their derivatives, one pair per ffn_act ---------- */
AM_INLINE float am_relu(float x) { return x > 0.0f ? x : 0.0f; }
AM_INLINE float am_relu_grad(float x) { return x > 0.0f ? 1.0f : 0.0f; }

AM_INLINE float am_gelu(float x) { return 0.5f * x * am_two_phi(x); }
AM_INLINE float am_gelu_grad(float x) {
    float xc = am_clamp(x, -40.0f, 40.0f); /* φ(40) = 0 in float */
    float phi = AM_INV_SQRT_2PI * am_exp_neg(-0.5f * xc * xc);
    return 0.5f * am_two_phi(x) + xc * phi;
}

/* gelu_tanh(x) = 0.5·x·(1 + tanh(u)) = x·σ(2u): the σ form keeps its
 * relative accuracy where 1 + tanh(u) would cancel (x < -5).  The
 * derivative is σ(2u) + 2·x·σ(2u)·σ(-2u)·u'.  x is clamped at ±20 inside u,
 * where σ(2u) is already 0 or 1 in float. */
AM_INLINE float am_gelu_tanh(float x) {
    float s, q;
    am_sigmoid_pair(2.0f * am_gelu_tanh_inner(am_clamp(x, -20.0f, 20.0f)), &s, &q);
    return x * s;
}
AM_INLINE float am_gelu_tanh_grad(float x) {
    float xc = am_clamp(x, -20.0f, 20.0f), s, q;
    am_sigmoid_pair(2.0f * am_gelu_tanh_inner(xc), &s, &q);
    float du = AM_TANH_K * (1.0f + 3.0f * AM_TANH_C * xc * xc);
    return s + 2.0f * xc * s * q * du;
}

AM_INLINE float am_sigmoid(float x) {
    float s, q;
    am_sigmoid_pair(x, &s, &q);
    return s;
}
AM_INLINE float am_sigmoid_grad(float x) {
    float s, q;
    am_sigmoid_pair(x, &s, &q);
    return s * q;
}

AM_INLINE float am_silu(float x) { return x * am_sigmoid(x); }
AM_INLINE float am_silu_grad(float x) {
    float s, q;
    am_sigmoid_pair(x, &s, &q);
    return s * (1.0f + am_clamp(x, -100.0f, 100.0f) * q);
}

#endif
