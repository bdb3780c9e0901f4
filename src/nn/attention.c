/* attention.c -- rotary position embeddings (RoPE) and causal multi-head
 * attention with grouped key/value heads (GQA), forward and backward.
 * The projections around attention (q/k/v/o_proj) are matrix products done
 * by the model (src/nn/model.c); this file holds what lies between them.
 *
 * Letters: B batch, T query positions, S key positions (S = pos0 + T),
 * H query heads, G kv heads, Dh head dim, R = H/G query heads per kv head.
 *
 * Forward per (b, h) and query t:  s_j = q_t·k_j / sqrt(Dh) for j <= pos0+t,
 * p = softmax(s), out_t = Σ_j p_j v_j.  Gemma 2/3 (forward only): another
 * scale, s_j soft-capped as cap·tanh(s_j/cap), and a sliding window (keys
 * j > pos0+t − window).  Backward per (b, g) so that the kv
 * gradients of one group have one owner:
 *   dp_j = dout_t·v_j,  dv_j += p_j dout_t,  ds_j = p_j (dp_j − Σ_i p_i dp_i),
 *   dq_t = Σ_j ds_j k_j / sqrt(Dh),  dk_j += ds_j q_t / sqrt(Dh). */
#include "nn/model_internal.h"
#include "kernels/kernels.h"

#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static int thread_id(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* The team size: the caller's, so that scratch rows are never overrun. */
static int team_size(const ffn_attn_dims *d) {
#ifdef _OPENMP
    return d->n_threads > 0 ? d->n_threads : omp_get_max_threads();
#else
    (void)d;
    return 1;
#endif
}

/* ---- RoPE ---------------------------------------------------------------- */

void ffn_rope_tables(float *cos_t, float *sin_t, int64_t max_pos, int64_t head_dim,
                     double theta) {
    int64_t half = head_dim / 2;
    for (int64_t j = 0; j < half; j++) {
        double freq = pow(theta, -2.0 * (double)j / (double)head_dim);
        for (int64_t p = 0; p < max_pos; p++) {
            double a = (double)p * freq;
            cos_t[p * half + j] = (float)cos(a);
            sin_t[p * half + j] = (float)sin(a);
        }
    }
}

void ffn_rope_apply(float *x, int64_t ld, int64_t n, int64_t T, int64_t pos0, int64_t n_heads,
                    int64_t head_dim, int style, const float *cos_t, const float *sin_t,
                    int inverse) {
    ffn_rope_apply_dims(x, ld, n, T, pos0, n_heads, head_dim, head_dim, style, cos_t, sin_t,
                        inverse);
}

/* (x1, x2) -> (x1 c − x2 s, x2 c + x1 s); the inverse uses −s.  Only the
 * first rot_dim features of a head take part. */
void ffn_rope_apply_dims(float *x, int64_t ld, int64_t n, int64_t T, int64_t pos0,
                         int64_t n_heads, int64_t head_dim, int64_t rot_dim, int style,
                         const float *cos_t, const float *sin_t, int inverse) {
    int64_t half = rot_dim / 2;
    float sign = inverse ? -1.0f : 1.0f;
#pragma omp parallel for schedule(static) if (n * n_heads * head_dim > 32768)
    for (int64_t r = 0; r < n; r++) {
        const int64_t pos = pos0 + r % T;
        const float *c = cos_t + pos * half, *s0 = sin_t + pos * half;
        for (int64_t h = 0; h < n_heads; h++) {
            float *xh = x + r * ld + h * head_dim;
            if (style == 0) {
                float *x1 = xh, *x2 = xh + half;
#pragma omp simd
                for (int64_t j = 0; j < half; j++) {
                    const float a = x1[j], b = x2[j], sj = sign * s0[j];
                    x1[j] = a * c[j] - b * sj;
                    x2[j] = b * c[j] + a * sj;
                }
            } else {
                for (int64_t j = 0; j < half; j++) {
                    const float a = xh[2 * j], b = xh[2 * j + 1], sj = sign * s0[j];
                    xh[2 * j] = a * c[j] - b * sj;
                    xh[2 * j + 1] = b * c[j] + a * sj;
                }
            }
        }
    }
}

/* ---- attention: the parallel loops; the per-task kernels are in
 * attention_impl.h, one copy per SIMD level, chosen at run time. */

#define ATTN_SFX scalar
#include "nn/attention_impl.h"

typedef void (*fwd_task_fn)(float *, int64_t, float *, float *, const float *, int64_t,
                            const float *, int64_t, const float *, int64_t, int64_t, int64_t,
                            int64_t, float, float, int64_t);
typedef void (*bwd_task_fn)(float *, float *, float *, const float *, int64_t, const float *,
                            const float *, int64_t, const float *, int64_t, const float *, int64_t,
                            float *, int64_t, int64_t, int64_t, float);

void ffn_attn_fwd_task_avx2(float *, int64_t, float *, float *, const float *, int64_t,
                            const float *, int64_t, const float *, int64_t, int64_t, int64_t,
                            int64_t, float, float, int64_t);
void ffn_attn_fwd_task_avx512(float *, int64_t, float *, float *, const float *, int64_t,
                              const float *, int64_t, const float *, int64_t, int64_t, int64_t,
                              int64_t, float, float, int64_t);
void ffn_attn_bwd_task_avx2(float *, float *, float *, const float *, int64_t, const float *,
                            const float *, int64_t, const float *, int64_t, const float *, int64_t,
                            float *, int64_t, int64_t, int64_t, float);
void ffn_attn_bwd_task_avx512(float *, float *, float *, const float *, int64_t, const float *,
                              const float *, int64_t, const float *, int64_t, const float *,
                              int64_t, float *, int64_t, int64_t, int64_t, float);

static fwd_task_fn fwd_task(void) {
    switch (ffn_simd()) {
    case FFN_SIMD_AVX512: return ffn_attn_fwd_task_avx512;
    case FFN_SIMD_AVX2: return ffn_attn_fwd_task_avx2;
    default: return ffn_attn_fwd_task_scalar;
    }
}

static bwd_task_fn bwd_task(void) {
    switch (ffn_simd()) {
    case FFN_SIMD_AVX512: return ffn_attn_bwd_task_avx512;
    case FFN_SIMD_AVX2: return ffn_attn_bwd_task_avx2;
    default: return ffn_attn_bwd_task_scalar;
    }
}

size_t ffn_attention_scratch_floats(int n_threads, int64_t S, int64_t Dh, int backward) {
    const int64_t Sp = (S + 15) & ~(int64_t)15;
    /* forward: Kᵀ (Dh, Sp), four score rows (4, Sp), the values (Sp, Dh) */
    const int64_t per = backward ? (Dh + 2 * S) * Sp : (2 * Dh + 4) * Sp;
    return (size_t)n_threads * (size_t)per;
}

/* What a call of either direction shares: the softmax scale 1/sqrt(Dh),
 * the team size and the scratch floats of each thread. */
typedef struct attn_team {
    float scale;
    int nt;
    int64_t per;
} attn_team;

static attn_team team_for(const ffn_attn_dims *dims, int64_t S, int backward) {
    return (attn_team){dims->scale > 0.0f ? dims->scale : (float)(1.0 / sqrt((double)dims->Dh)),
                       team_size(dims),
                       (int64_t)ffn_attention_scratch_floats(1, S, dims->Dh, backward)};
}

void ffn_attention_forward(float *out, int64_t ldo, float *probs, float *scratch, const float *q,
                           int64_t ldq, const float *k, int64_t ldk, const float *v, int64_t ldv,
                           const ffn_attn_dims *dims) {
    const int64_t B = dims->B, T = dims->T, H = dims->H, G = dims->G, Dh = dims->Dh;
    const int64_t pos0 = dims->pos0, S = pos0 + T, R = H / G;
    const fwd_task_fn task = fwd_task();
    const attn_team tm = team_for(dims, S, 0);
#pragma omp parallel for collapse(2) schedule(static) num_threads(tm.nt) if (B * H * T * S * Dh > 65536)
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t g = h / R;
            task(out + b * T * ldo + h * Dh, ldo, probs ? probs + (b * H + h) * T * S : NULL,
                 scratch + (int64_t)thread_id() * tm.per, q + b * T * ldq + h * Dh, ldq,
                 k + b * S * ldk + g * Dh, ldk, v + b * S * ldv + g * Dh, ldv, T, pos0, Dh,
                 tm.scale, dims->softcap, dims->window);
        }
}

void ffn_attention_backward(float *dq, float *dk, float *dv, const float *dout, int64_t ldo,
                            const float *probs, const float *q, int64_t ldq, const float *k,
                            int64_t ldk, const float *v, int64_t ldv, float *scratch,
                            const ffn_attn_dims *dims) {
    const int64_t B = dims->B, T = dims->T, H = dims->H, G = dims->G, Dh = dims->Dh;
    const int64_t S = T, R = H / G;
    const bwd_task_fn task = bwd_task();
    const attn_team tm = team_for(dims, S, 1);
#pragma omp parallel for collapse(2) schedule(static) num_threads(tm.nt) if (B * H * T * S * Dh > 65536)
    for (int64_t b = 0; b < B; b++)
        for (int64_t g = 0; g < G; g++) {
            const int64_t h0 = g * R;
            task(dq + b * T * ldq + h0 * Dh, dk + b * S * ldk + g * Dh, dv + b * S * ldv + g * Dh,
                 dout + b * T * ldo + h0 * Dh, ldo, probs + (b * H + h0) * T * S,
                 q + b * T * ldq + h0 * Dh, ldq, k + b * S * ldk + g * Dh, ldk,
                 v + b * S * ldv + g * Dh, ldv, scratch + (int64_t)thread_id() * tm.per, T,
                 R, Dh, tm.scale);
        }
}
