/* test_attention.c -- causal attention with grouped KV heads, RoPE and
 * RMSNorm (src/nn/attention.c, src/nn/norm.c):
 *   - the causal mask: perturbing a later position never changes an earlier
 *     output (bitwise), and does change the later ones;
 *   - KV-cache decoding (one query at pos0 = t against keys 0..t) equals the
 *     full causal computation;
 *   - RoPE: the inverse rotation undoes the forward one; position 0 is the
 *     identity; the two conventions rotate the pairs they claim;
 *   - finite-difference gradient checks of attention (q, k, v) and of RMSNorm
 *     (x, w), for L = Σ out ⊙ R with a random R;
 *   - one head's forward at every SIMD level, head dims 1..17, 32, 64, 70
 *     and 1..70 keys, decoding and prompt, against double (test_widths). */
#include "check.h"
#include "nn/model_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 12345;
static float frand(void) { /* uniform in [-1, 1) */
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) * (1.0 / (1 << 24))) * 2.0f - 1.0f;
}
static void fill(float *x, int64_t n, float scale) {
    for (int64_t i = 0; i < n; i++) x[i] = scale * frand();
}

enum { B = 2, T = 9, H = 4, G = 2, DH = 6, HD = H * DH, GD = G * DH };
enum { NT = 2 }; /* the team size; scratch is sized for T <= 16:
                    ffn_attention_scratch_floats(NT, 16, DH, 1) floats */

static double weighted_sum(const float *x, const float *r, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double)x[i] * r[i];
    return s;
}

static void attn(float *out, float *probs, const float *q, const float *k, const float *v) {
    static float scratch[NT * (DH + 2 * 16) * 16];
    ffn_attn_dims d = {B, T, 0, H, G, DH, NT, 0.0f, 0.0f, 0};
    ffn_attention_forward(out, HD, probs, scratch, q, HD, k, GD, v, GD, &d);
}

static void test_causal_mask(void) {
    static float q[B * T * HD], k[B * T * GD], v[B * T * GD], o1[B * T * HD], o2[B * T * HD];
    fill(q, B * T * HD, 1.0f);
    fill(k, B * T * GD, 1.0f);
    fill(v, B * T * GD, 1.0f);
    attn(o1, NULL, q, k, v);
    const int t0 = 5;
    for (int i = 0; i < GD; i++) { /* perturb position t0 of sequence 1 */
        k[(1 * T + t0) * GD + i] += 0.5f;
        v[(1 * T + t0) * GD + i] -= 0.7f;
    }
    for (int i = 0; i < HD; i++) q[(1 * T + t0) * HD + i] += 0.3f;
    attn(o2, NULL, q, k, v);
    int earlier_same = 1, later_differ = 1, other_seq_same = 1;
    for (int t = 0; t < T; t++) {
        int same = !memcmp(o1 + (1 * T + t) * HD, o2 + (1 * T + t) * HD, HD * sizeof(float));
        if (t < t0 && !same) earlier_same = 0;
        if (t >= t0 && same) later_differ = 0;
        if (memcmp(o1 + t * HD, o2 + t * HD, HD * sizeof(float))) other_seq_same = 0;
    }
    CHECK(earlier_same, "an earlier output changed when a later token was perturbed");
    CHECK(later_differ, "a later output did not change (the perturbation was ignored)");
    CHECK(other_seq_same, "another sequence of the batch changed");
}

static void test_kv_cache(void) {
    static float q[B * T * HD], k[B * T * GD], v[B * T * GD], full[B * T * HD], one[HD];
    static float scratch[NT * (DH + 2 * 16) * 16];
    fill(q, B * T * HD, 1.0f);
    fill(k, B * T * GD, 1.0f);
    fill(v, B * T * GD, 1.0f);
    attn(full, NULL, q, k, v);
    double worst = 0.0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            ffn_attn_dims d = {1, 1, t, H, G, DH, NT, 0.0f, 0.0f, 0}; /* one query at position t */
            ffn_attention_forward(one, HD, NULL, scratch, q + (b * T + t) * HD, HD, k + b * T * GD,
                                  GD, v + b * T * GD, GD, &d);
            for (int i = 0; i < HD; i++) {
                double e = fabs(one[i] - full[(b * T + t) * HD + i]);
                if (e > worst) worst = e;
            }
        }
    printf("kv cache: max |decode - full| = %.3e (tol 1e-6)\n", worst);
    CHECK(worst <= 1e-6, "decode differs from the full computation by %.3e", worst);
}

static void test_rope(void) {
    enum { P = 12, D = 8, NH = 3 };
    float c[P * D / 2], s[P * D / 2], x[P * NH * D], y[P * NH * D];
    ffn_rope_tables(c, s, P, D, 10000.0);
    for (int style = 0; style < 2; style++) {
        fill(x, P * NH * D, 1.0f);
        memcpy(y, x, sizeof x);
        ffn_rope_apply(y, NH * D, P, P, 0, NH, D, style, c, s, 0);
        CHECK(!memcmp(y, x, NH * D * sizeof(float)), "style %d: position 0 is not the identity",
              style);
        /* position 3, head 1, pair j = 1: the pair the convention names */
        int pos = 3, h = 1, j = 1;
        int i1 = style == 0 ? j : 2 * j, i2 = style == 0 ? j + D / 2 : 2 * j + 1;
        double ang = pos * pow(10000.0, -2.0 * j / D);
        const float *xr = x + pos * NH * D + h * D, *yr = y + pos * NH * D + h * D;
        double e1 = xr[i1] * cos(ang) - xr[i2] * sin(ang), e2 = xr[i2] * cos(ang) + xr[i1] * sin(ang);
        CHECK(fabs(yr[i1] - e1) < 1e-6 && fabs(yr[i2] - e2) < 1e-6,
              "style %d: pair (%d, %d) not rotated as expected", style, i1, i2);
        ffn_rope_apply(y, NH * D, P, P, 0, NH, D, style, c, s, 1);
        double worst = 0.0;
        for (int i = 0; i < P * NH * D; i++) worst = fmax(worst, fabs(y[i] - x[i]));
        CHECK(worst < 1e-6, "style %d: inverse rotation does not undo (%.3e)", style, worst);
    }
}

/* L(q, k, v) = Σ attention(q, k, v) ⊙ R */
static double attn_loss(const float *q, const float *k, const float *v, const float *r) {
    static float o[B * T * HD];
    attn(o, NULL, q, k, v);
    return weighted_sum(o, r, B * T * HD);
}

static void fd_check(const char *what, float *x, const float *grad, int64_t n, double (*loss)(void),
                     int stride) {
    const float eps = 1e-2f;
    double worst = 0.0;
    int bad = 0;
    for (int64_t i = 0; i < n; i += stride) {
        float keep = x[i];
        x[i] = keep + eps;
        double lp = loss();
        x[i] = keep - eps;
        double lm = loss();
        x[i] = keep;
        double fd = (lp - lm) / (2.0 * eps), e = fabs(fd - grad[i]);
        double tol = 1e-3 + 1e-2 * fabs(fd);
        if (e / tol > worst) worst = e / tol;
        if (e > tol && bad++ < 3)
            fprintf(stderr, "%s[%lld]: analytic %.6f, finite difference %.6f\n", what, (long long)i,
                    grad[i], fd);
    }
    printf("fd %-12s worst err/tol %.3f\n", what, worst);
    CHECK(bad == 0, "%s: %d gradient entries off", what, bad);
}

static float gq[B * T * HD], gk[B * T * GD], gv[B * T * GD], gr[B * T * HD];
static double attn_loss_global(void) { return attn_loss(gq, gk, gv, gr); }

static void test_attention_grad(void) {
    static float probs[B * H * T * T], o[B * T * HD], dq[B * T * HD], dk[B * T * GD],
        dv[B * T * GD], scratch[NT * (DH + 2 * 16) * 16];
    fill(gq, B * T * HD, 1.0f);
    fill(gk, B * T * GD, 1.0f);
    fill(gv, B * T * GD, 1.0f);
    fill(gr, B * T * HD, 1.0f);
    attn(o, probs, gq, gk, gv);
    ffn_attn_dims d = {B, T, 0, H, G, DH, NT, 0.0f, 0.0f, 0};
    ffn_attention_backward(dq, dk, dv, gr, HD, probs, gq, HD, gk, GD, gv, GD, scratch, &d);
    fd_check("attn dq", gq, dq, B * T * HD, attn_loss_global, 1);
    fd_check("attn dk", gk, dk, B * T * GD, attn_loss_global, 1);
    fd_check("attn dv", gv, dv, B * T * GD, attn_loss_global, 1);
}

enum { NN = 5, ND = 13 };
static float nx[NN * ND], nw[ND], nr[NN * ND];
static double norm_loss(void) {
    float y[NN * ND];
    ffn_rmsnorm_forward(y, NULL, nx, nw, NN, ND, 1e-5f);
    return weighted_sum(y, nr, NN * ND);
}

static void test_rmsnorm_grad(void) {
    float y[NN * ND], rstd[NN], dx[NN * ND], dw[ND];
    fill(nx, NN * ND, 2.0f);
    for (int i = 0; i < ND; i++) nw[i] = 1.0f + 0.3f * frand();
    fill(nr, NN * ND, 1.0f);
    ffn_rmsnorm_forward(y, rstd, nx, nw, NN, ND, 1e-5f);
    double worst = 0.0; /* against a direct double computation */
    for (int r = 0; r < NN; r++) {
        double ss = 0.0;
        for (int i = 0; i < ND; i++) ss += (double)nx[r * ND + i] * nx[r * ND + i];
        double s = 1.0 / sqrt(ss / ND + 1e-5);
        for (int i = 0; i < ND; i++) worst = fmax(worst, fabs(y[r * ND + i] - nx[r * ND + i] * s * nw[i]));
    }
    CHECK(worst < 1e-5, "rmsnorm forward off by %.3e", worst);
    for (int i = 0; i < NN * ND; i++) dx[i] = 0.25f; /* backward accumulates: start non-zero */
    for (int i = 0; i < ND; i++) dw[i] = 0.0f;
    ffn_rmsnorm_backward_accumulate(dx, dw, nr, nx, nw, rstd, NN, ND);
    for (int i = 0; i < NN * ND; i++) dx[i] -= 0.25f;
    fd_check("rmsnorm dx", nx, dx, NN * ND, norm_loss, 1);
    fd_check("rmsnorm dw", nw, dw, ND, norm_loss, 1);
}

/* ---- every width ------------------------------------------------------------
 * One head's forward task at every SIMD level the CPU has, against a double
 * reference: head dims Dh 1..17 (the 16-column blocks' tails), 32, 64, 70
 * (stories260K's heads are 8: the same at any --tp, which splits heads, not
 * their width), S = 1..70 keys decoding (one query at pos0 = S - 1, as
 * ffn run's KV-cache steps) and prompts of T = S rows (the 4-row blocks and
 * the staircase), |out - ref| <= 1e-5 · max|v|; each also with Gemma 2's
 * soft-capped scores (cap 1.5) and a sliding window of 5 keys. */
void ffn_attn_fwd_task_scalar(float *, int64_t, float *, float *, const float *, int64_t,
                              const float *, int64_t, const float *, int64_t, int64_t, int64_t,
                              int64_t, float, float, int64_t);
void ffn_attn_fwd_task_avx2(float *, int64_t, float *, float *, const float *, int64_t,
                            const float *, int64_t, const float *, int64_t, int64_t, int64_t,
                            int64_t, float, float, int64_t);
void ffn_attn_fwd_task_avx512(float *, int64_t, float *, float *, const float *, int64_t,
                              const float *, int64_t, const float *, int64_t, int64_t, int64_t,
                              int64_t, float, float, int64_t);
typedef void (*attn_task)(float *, int64_t, float *, float *, const float *, int64_t,
                          const float *, int64_t, const float *, int64_t, int64_t, int64_t,
                          int64_t, float, float, int64_t);

static void test_widths(void) {
    static const attn_task task[3] = {ffn_attn_fwd_task_scalar, ffn_attn_fwd_task_avx2,
                                      ffn_attn_fwd_task_avx512};
    static const char *name[3] = {"scalar", "avx2", "avx512"};
    int64_t dhs[20], nd = 0;
    for (int64_t d = 1; d <= 17; d++) dhs[nd++] = d;
    dhs[nd++] = 32, dhs[nd++] = 64, dhs[nd++] = 70;
    enum { SMAX = 70, DMAX = 70 };
    float *q = malloc(SMAX * DMAX * 4), *k = malloc(SMAX * DMAX * 4);
    /* values in rows of Dh + 5 (a cache row holds every kv head): a prompt
     * copies them side by side first */
    float *v = malloc(SMAX * (DMAX + 5) * 4);
    float *out = malloc(SMAX * DMAX * 4), *scratch = malloc(ffn_attention_scratch_floats(1, SMAX, DMAX, 0) * 4);
    float *ref = malloc(SMAX * DMAX * 4);
    int64_t differ = 0; /* outputs of a SIMD level not bitwise the scalar level's */
    fill(q, SMAX * DMAX, 2.0f);
    fill(k, SMAX * DMAX, 2.0f);
    fill(v, SMAX * (DMAX + 5), 1.0f);
    int levels = 0;
    for (int lv = 0; lv < 3; lv++) {
        if ((lv == 1 && !check_cpu_has("avx2")) || (lv == 2 && !check_cpu_has("avx512"))) continue;
        levels++;
        int bad = 0, cases = 0;
        double worst = 0;
        for (int64_t a = 0; a < nd; a++) {
            const int64_t Dh = dhs[a];
            const float scale = 1.0f / sqrtf((float)Dh);
            for (int64_t S = 1; S <= SMAX; S++)
                for (int prompt = 0; prompt < 4; prompt++) {
                    const int gemma = prompt >= 2; /* soft-capped, windowed */
                    const float cap = gemma ? 1.5f : 0.0f;
                    const int64_t win = gemma ? 5 : 0;
                    if ((prompt & 1) && S > 20 && S != 33 && S != 64 && S != 70) continue;
                    const int64_t T = (prompt & 1) ? S : 1, pos0 = S - T;
                    task[lv](out, Dh, NULL, scratch, q, Dh, k, Dh, v, Dh + 5, T, pos0, Dh, scale, cap, win);
                    cases++;
                    if (lv > 0) {
                        task[0](ref, Dh, NULL, scratch, q, Dh, k, Dh, v, Dh + 5, T, pos0, Dh, scale, cap, win);
                        for (int64_t i = 0; i < T * Dh; i++) differ += memcmp(&ref[i], &out[i], 4) != 0;
                    }
                    for (int64_t t = 0; t < T; t++) {
                        const int64_t n = pos0 + t + 1, lo = win > 0 && n > win ? n - win : 0;
                        double p[SMAX], mx = -1e300, sum = 0;
                        for (int64_t j = lo; j < n; j++) {
                            double s = 0;
                            for (int64_t i = 0; i < Dh; i++) s += (double)q[t * Dh + i] * k[j * Dh + i];
                            p[j] = s * scale;
                            if (cap > 0) p[j] = cap * tanh(p[j] / cap);
                            mx = fmax(mx, p[j]);
                        }
                        for (int64_t j = lo; j < n; j++) sum += p[j] = exp(p[j] - mx);
                        for (int64_t i = 0; i < Dh; i++) {
                            double r = 0;
                            for (int64_t j = lo; j < n; j++) r += p[j] / sum * v[j * (Dh + 5) + i];
                            double e = fabs(r - out[t * Dh + i]);
                            if (e > worst) worst = e;
                            if (!(e <= 1e-5) && bad++ < 3)
                                fprintf(stderr, "  attention %s Dh=%lld S=%lld T=%lld: %g, reference %g\n",
                                        name[lv], (long long)Dh, (long long)S, (long long)T,
                                        out[t * Dh + i], r);
                        }
                    }
                }
        }
        CHECK(!bad, "attention %s at the widths: %d outputs off", name[lv], bad);
        printf("widths %s: attention forward, %d cases (Dh 1..17, 32, 64, 70; S 1..70; plain and "
               "soft-capped with a window of 5), worst "
               "|error| %.3g (tolerance 1e-5 of max|v| = 1)\n", name[lv], cases, worst);
    }
    /* the SIMD levels run the scalar level's operations in its order (no
     * FMA contraction under -std=c11, fixed-lane sums): the same bits */
    CHECK(differ == 0, "attention: %lld outputs of a SIMD level differ in bits from scalar", (long long)differ);
    printf("widths: every SIMD level's outputs bitwise equal to the scalar level's (%d levels)\n", levels);
    if (levels < 3)
        check_note("attention widths at %s only (CPUID, FFN_SIMD=%s)",
                   levels == 2 ? "scalar and avx2" : "scalar",
                   getenv("FFN_SIMD") ? getenv("FFN_SIMD") : "unset");
    free(q); free(k); free(v); free(out); free(scratch); free(ref);
}

int main(void) {
    CHECK(ffn_attention_scratch_floats(NT, 16, DH, 1) <= (size_t)NT * (DH + 2 * 16) * 16 &&
              ffn_attention_scratch_floats(NT, 16, DH, 0) <= (size_t)NT * (DH + 2 * 16) * 16,
          "the tests' scratch arrays are too small");
    test_causal_mask();
    test_kv_cache();
    test_rope();
    test_attention_grad();
    test_rmsnorm_grad();
    test_widths();
    return check_done("test_attention");
}
