/* attention.c -- rotary position embeddings (RoPE) and causal multi-head
 * attention with grouped key/value heads (GQA), forward and backward.
 * The projections around attention (q/k/v/o_proj) are matrix products done
 * by the model (src/model.c); this file holds what lies between them.
 *
 * Letters: B batch, T query positions, S key positions (S = pos0 + T),
 * H query heads, G kv heads, Dh head dim, R = H/G query heads per kv head.
 *
 * Forward per (b, h) and query t:  s_j = q_t·k_j / sqrt(Dh) for j <= pos0+t,
 * p = softmax(s), out_t = Σ_j p_j v_j.  Backward per (b, g) so that the kv
 * gradients of one group have one owner:
 *   dp_j = dout_t·v_j,  dv_j += p_j dout_t,  ds_j = p_j (dp_j − Σ_i p_i dp_i),
 *   dq_t = Σ_j ds_j k_j / sqrt(Dh),  dk_j += ds_j q_t / sqrt(Dh). */
#include "model_internal.h"

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

/* (x1, x2) -> (x1 c − x2 s, x2 c + x1 s); the inverse uses −s. */
void ffn_rope_apply(float *x, int64_t ld, int64_t n, int64_t T, int64_t pos0, int64_t n_heads,
                    int64_t head_dim, int style, const float *cos_t, const float *sin_t,
                    int inverse) {
    int64_t half = head_dim / 2;
    float sign = inverse ? -1.0f : 1.0f;
#pragma omp parallel for schedule(static) if (n * n_heads * head_dim > 32768)
    for (int64_t r = 0; r < n; r++) {
        int64_t pos = pos0 + r % T;
        const float *c = cos_t + pos * half, *s = sin_t + pos * half;
        for (int64_t h = 0; h < n_heads; h++) {
            float *xh = x + r * ld + h * head_dim;
            if (style == 0) {
                float *x1 = xh, *x2 = xh + half;
                for (int64_t j = 0; j < half; j++) {
                    float a = x1[j], b = x2[j], sj = sign * s[j];
                    x1[j] = a * c[j] - b * sj;
                    x2[j] = b * c[j] + a * sj;
                }
            } else {
                for (int64_t j = 0; j < half; j++) {
                    float a = xh[2 * j], b = xh[2 * j + 1], sj = sign * s[j];
                    xh[2 * j] = a * c[j] - b * sj;
                    xh[2 * j + 1] = b * c[j] + a * sj;
                }
            }
        }
    }
}

/* ---- forward ------------------------------------------------------------- *
 * Every inner loop is an axpy over contiguous floats (vectorised with
 * `omp simd`, no reassociation of a reduction): the scores of a query row
 * are accumulated feature by feature against Kᵀ, transposed once per task
 * into the thread's scratch; the outputs are Σ_j p_j v_j row by row. */

/* kt (Dh, S) = the n_keys rows of one head of k (row stride ldk). */
static void transpose_head(float *kt, int64_t S, const float *k, int64_t ldk, int64_t n_keys,
                           int64_t Dh) {
    for (int64_t j = 0; j < n_keys; j++)
        for (int64_t i = 0; i < Dh; i++) kt[i * S + j] = k[j * ldk + i];
}

/* One query row against keys 0..n_keys-1: p (n_keys) = softmax, o = Σ p v. */
static void attend_row(float *o, float *p, const float *q, const float *kt, int64_t S,
                       const float *v, int64_t ldv, int64_t n_keys, int64_t Dh, float scale) {
    for (int64_t j = 0; j < n_keys; j++) p[j] = 0.0f;
    for (int64_t i = 0; i < Dh; i++) {
        const float qi = q[i] * scale, *kti = kt + i * S;
#pragma omp simd
        for (int64_t j = 0; j < n_keys; j++) p[j] += qi * kti[j];
    }
    float mx = -INFINITY;
    for (int64_t j = 0; j < n_keys; j++) mx = p[j] > mx ? p[j] : mx;
    float sum = 0.0f;
    for (int64_t j = 0; j < n_keys; j++) {
        p[j] = expf(p[j] - mx);
        sum += p[j];
    }
    const float inv = 1.0f / sum;
    for (int64_t i = 0; i < Dh; i++) o[i] = 0.0f;
    for (int64_t j = 0; j < n_keys; j++) {
        const float pj = (p[j] *= inv), *vj = v + j * ldv;
#pragma omp simd
        for (int64_t i = 0; i < Dh; i++) o[i] += pj * vj[i];
    }
}

size_t ffn_attention_scratch_floats(int n_threads, int64_t S, int64_t Dh) {
    return (size_t)n_threads * (size_t)((Dh + 1) * S);
}

void ffn_attention_forward(float *out, int64_t ldo, float *probs, float *scratch, const float *q,
                           int64_t ldq, const float *k, int64_t ldk, const float *v, int64_t ldv,
                           const ffn_attn_dims *dims) {
    const int64_t B = dims->B, T = dims->T, H = dims->H, G = dims->G, Dh = dims->Dh;
    const int64_t pos0 = dims->pos0, S = pos0 + T, R = H / G;
    const float scale = (float)(1.0 / sqrt((double)Dh));
#pragma omp parallel for collapse(2) schedule(static) if (B * H * T * S * Dh > 65536)
    for (int64_t b = 0; b < B; b++) {
        for (int64_t h = 0; h < H; h++) {
            const int64_t g = h / R;
            float *kt = scratch + (int64_t)thread_id() * (Dh + 1) * S, *row = kt + Dh * S;
            const float *vb = v + b * S * ldv + g * Dh;
            transpose_head(kt, S, k + b * S * ldk + g * Dh, ldk, S, Dh);
            for (int64_t t = 0; t < T; t++) {
                float *p = probs ? probs + ((b * H + h) * T + t) * S : row;
                attend_row(out + (b * T + t) * ldo + h * Dh, p, q + (b * T + t) * ldq + h * Dh, kt,
                           S, vb, ldv, pos0 + t + 1, Dh, scale);
            }
        }
    }
}

/* ---- backward ------------------------------------------------------------ */

void ffn_attention_backward(float *dq, float *dk, float *dv, const float *dout, int64_t ldo,
                            const float *probs, const float *q, int64_t ldq, const float *k,
                            int64_t ldk, const float *v, int64_t ldv, float *scratch,
                            const ffn_attn_dims *dims) {
    const int64_t B = dims->B, T = dims->T, H = dims->H, G = dims->G, Dh = dims->Dh;
    const int64_t S = T, R = H / G;
    const float scale = (float)(1.0 / sqrt((double)Dh));
#pragma omp parallel for collapse(2) schedule(static) if (B * H * T * S * Dh > 65536)
    for (int64_t b = 0; b < B; b++) {
        for (int64_t g = 0; g < G; g++) {
            float *vt = scratch + (int64_t)thread_id() * (Dh + 1) * S, *dp = vt + Dh * S;
            const float *kb = k + b * S * ldk + g * Dh;
            float *dkb = dk + b * S * ldk + g * Dh, *dvb = dv + b * S * ldv + g * Dh;
            transpose_head(vt, S, v + b * S * ldv + g * Dh, ldv, S, Dh);
            for (int64_t s = 0; s < S; s++) {
                memset(dkb + s * ldk, 0, (size_t)Dh * sizeof(float));
                memset(dvb + s * ldv, 0, (size_t)Dh * sizeof(float));
            }
            for (int64_t h = g * R; h < (g + 1) * R; h++) {
                for (int64_t t = 0; t < T; t++) {
                    const float *p = probs + ((b * H + h) * T + t) * S;
                    const float *go = dout + (b * T + t) * ldo + h * Dh;
                    const float *qt = q + (b * T + t) * ldq + h * Dh;
                    float *dqt = dq + (b * T + t) * ldq + h * Dh;
                    const int64_t n_keys = t + 1;
                    for (int64_t j = 0; j < n_keys; j++) dp[j] = 0.0f;
                    for (int64_t i = 0; i < Dh; i++) { /* dp_j = dout_t · v_j */
                        const float gi = go[i], *vti = vt + i * S;
#pragma omp simd
                        for (int64_t j = 0; j < n_keys; j++) dp[j] += gi * vti[j];
                    }
                    float pdp = 0.0f;
                    for (int64_t j = 0; j < n_keys; j++) pdp += p[j] * dp[j];
                    for (int64_t i = 0; i < Dh; i++) dqt[i] = 0.0f;
                    for (int64_t j = 0; j < n_keys; j++) {
                        const float pj = p[j], ds = pj * (dp[j] - pdp) * scale;
                        const float *kj = kb + j * ldk;
                        float *dkj = dkb + j * ldk, *dvj = dvb + j * ldv;
#pragma omp simd
                        for (int64_t i = 0; i < Dh; i++) {
                            dvj[i] += pj * go[i];
                            dqt[i] += ds * kj[i];
                            dkj[i] += ds * qt[i];
                        }
                    }
                }
            }
        }
    }
}
