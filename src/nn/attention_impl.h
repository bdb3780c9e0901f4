/* attention_impl.h -- the inner loops of causal attention, written once and
 * instantiated per SIMD level: attention.c (baseline), attention_avx2.c and
 * attention_avx512.c define ATTN_SFX and include this file; the compiler
 * vectorises each `omp simd` loop for that file's ISA.  Internal.
 *
 * Shapes and formulas are in attention.c.  The loops are register-blocked
 * like a small matrix product: QB = 4 rows at a time against JB = 16
 * columns, accumulators kept in registers across the reduction, so each
 * loaded vector feeds four multiply-adds.  Every reduction runs in one fixed
 * order (no reassociation), so a given ISA gives one result at any thread
 * count.  Keys are transposed once per task into a zero-padded Kᵀ (Dh, Sp),
 * Sp = S rounded up to 16, so that whole 16-wide blocks can be read. */
#include "nn/model_internal.h"

#include <math.h>
#include <string.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif

#define ATTN_CAT2(a, b) a##_##b
#define ATTN_CAT(a, b) ATTN_CAT2(a, b)
#define ATTN_FN(name) ATTN_CAT(name, ATTN_SFX)

#ifndef ATTN_BLOCKS
#define ATTN_BLOCKS
enum { QB = 4, JB = 16 };
static inline int64_t attn_pad16(int64_t n) { return (n + 15) & ~(int64_t)15; }
#endif

/* xt (Dh, Sp) = the n rows of one head of x (row stride ldx), zero padded.
 * With AVX2 in tiles of 8 × 8 through registers (a decode step transposes
 * every cached key of every head: element by element it took 6% of a
 * 0.6 B model's step at 128 tokens of context). */
static void ATTN_FN(transpose_head)(float *xt, int64_t Sp, const float *x, int64_t ldx, int64_t n,
                                    int64_t Dh) {
    int64_t j0 = 0;
#ifdef __AVX2__
    for (; j0 + 8 <= n; j0 += 8) {
        int64_t i0 = 0;
        for (; i0 + 8 <= Dh; i0 += 8) {
            __m256 r[8], t[8];
            for (int k = 0; k < 8; k++) r[k] = _mm256_loadu_ps(x + (j0 + k) * ldx + i0);
            for (int k = 0; k < 8; k += 2) {
                t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
                t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
            }
            for (int k = 0; k < 8; k += 4) {
                r[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);
                r[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xEE);
                r[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44);
                r[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xEE);
            }
            for (int k = 0; k < 4; k++) { /* r[k]: column k (low half) and k + 4 (high half) */
                _mm256_storeu_ps(xt + (i0 + k) * Sp + j0, _mm256_permute2f128_ps(r[k], r[k + 4], 0x20));
                _mm256_storeu_ps(xt + (i0 + k + 4) * Sp + j0, _mm256_permute2f128_ps(r[k], r[k + 4], 0x31));
            }
        }
        for (int64_t j = j0; j < j0 + 8; j++)
            for (int64_t i = i0; i < Dh; i++) xt[i * Sp + j] = x[j * ldx + i];
    }
#endif
    for (int64_t j = j0; j < n; j++)
        for (int64_t i = 0; i < Dh; i++) xt[i * Sp + j] = x[j * ldx + i];
    for (int64_t i = 0; i < Dh; i++) memset(xt + i * Sp + n, 0, (size_t)(Sp - n) * sizeof(float));
}

/* The register block: c_r[0..width) += y_r · xr[0..width) for the four
 * accumulator rows. */
static inline __attribute__((always_inline)) void ATTN_FN(fma4)(
    float *c0, float *c1, float *c2, float *c3, float y0, float y1, float y2, float y3,
    const float *xr, const int width) {
#pragma omp simd
    for (int ii = 0; ii < width; ii++) {
        c0[ii] += y0 * xr[ii];
        c1[ii] += y1 * xr[ii];
        c2[ii] += y2 * xr[ii];
        c3[ii] += y3 * xr[ii];
    }
}

#ifdef __AVX2__
/* fma4 for width JB with the accumulators in registers (as arrays on the
 * stack the compiler loads and stores them every step: the products ran at
 * a quarter of the FPU).  The same multiplies and adds in the same order
 * (no FMA: -std=c11 does not contract), so the same bits.  n_x steps: row
 * x_i = x + i·ldx, weights y_r[i·ldy]. */
static inline __attribute__((always_inline)) void ATTN_FN(fma4_reg)(
    float *c0, float *c1, float *c2, float *c3, const float *y0, const float *y1,
    const float *y2, const float *y3, int64_t ldy, const float *x, int64_t ldx, int64_t n_x) {
    __m256 a0 = _mm256_loadu_ps(c0), a1 = _mm256_loadu_ps(c0 + 8);
    __m256 b0 = _mm256_loadu_ps(c1), b1 = _mm256_loadu_ps(c1 + 8);
    __m256 d0 = _mm256_loadu_ps(c2), d1 = _mm256_loadu_ps(c2 + 8);
    __m256 e0 = _mm256_loadu_ps(c3), e1 = _mm256_loadu_ps(c3 + 8);
    for (int64_t i = 0; i < n_x; i++) {
        const __m256 x0 = _mm256_loadu_ps(x + i * ldx), x1 = _mm256_loadu_ps(x + i * ldx + 8);
        __m256 w = _mm256_broadcast_ss(y0 + i * ldy);
        a0 = _mm256_add_ps(a0, _mm256_mul_ps(w, x0));
        a1 = _mm256_add_ps(a1, _mm256_mul_ps(w, x1));
        w = _mm256_broadcast_ss(y1 + i * ldy);
        b0 = _mm256_add_ps(b0, _mm256_mul_ps(w, x0));
        b1 = _mm256_add_ps(b1, _mm256_mul_ps(w, x1));
        w = _mm256_broadcast_ss(y2 + i * ldy);
        d0 = _mm256_add_ps(d0, _mm256_mul_ps(w, x0));
        d1 = _mm256_add_ps(d1, _mm256_mul_ps(w, x1));
        w = _mm256_broadcast_ss(y3 + i * ldy);
        e0 = _mm256_add_ps(e0, _mm256_mul_ps(w, x0));
        e1 = _mm256_add_ps(e1, _mm256_mul_ps(w, x1));
    }
    _mm256_storeu_ps(c0, a0), _mm256_storeu_ps(c0 + 8, a1);
    _mm256_storeu_ps(c1, b0), _mm256_storeu_ps(c1 + 8, b1);
    _mm256_storeu_ps(c2, d0), _mm256_storeu_ps(c2 + 8, d1);
    _mm256_storeu_ps(c3, e0), _mm256_storeu_ps(c3 + 8, e1);
}

/* The one-row case of fma4_reg. */
static inline __attribute__((always_inline)) void ATTN_FN(fma1_reg)(
    float *c0, const float *y0, int64_t ldy, const float *x, int64_t ldx, int64_t n_x) {
    __m256 a0 = _mm256_loadu_ps(c0), a1 = _mm256_loadu_ps(c0 + 8);
    for (int64_t i = 0; i < n_x; i++) {
        const __m256 w = _mm256_broadcast_ss(y0 + i * ldy);
        a0 = _mm256_add_ps(a0, _mm256_mul_ps(w, _mm256_loadu_ps(x + i * ldx)));
        a1 = _mm256_add_ps(a1, _mm256_mul_ps(w, _mm256_loadu_ps(x + i * ldx + 8)));
    }
    _mm256_storeu_ps(c0, a0), _mm256_storeu_ps(c0 + 8, a1);
}
#endif

/* Rows r < nr of dst (stride ld), columns [0, w): scale · c_r. */
static inline __attribute__((always_inline)) void ATTN_FN(store4)(
    float *dst, int64_t ld, int nr, int64_t w, const float *c0, const float *c1, const float *c2,
    const float *c3, float scale) {
    const float *c[QB] = {c0, c1, c2, c3};
    for (int r = 0; r < nr; r++)
        for (int64_t jj = 0; jj < w; jj++) dst[r * ld + jj] = c[r][jj] * scale;
}

/* s_r[j] = scale · (a_r · xt[:, j]) for rows r < nr of a (stride lda) and
 * j < n; s rows have stride lds.  Four accumulator rows (rows past nr
 * compute on row 0 and are not stored); one row alone (decode) has its own
 * loop. */
static void ATTN_FN(dots)(float *s, int64_t lds, const float *a, int64_t lda, int nr,
                          const float *xt, int64_t Sp, int64_t n, int64_t Dh, float scale) {
    if (nr == 1) {
        for (int64_t j0 = 0; j0 < n; j0 += JB) {
            float c0[JB] = {0};
#ifdef __AVX2__
            ATTN_FN(fma1_reg)(c0, a, 1, xt + j0, Sp, Dh);
#else
            for (int64_t i = 0; i < Dh; i++) {
                const float *xr = xt + i * Sp + j0, x0 = a[i];
#pragma omp simd
                for (int jj = 0; jj < JB; jj++) c0[jj] += x0 * xr[jj];
            }
#endif
            const int64_t w = n - j0 < JB ? n - j0 : JB;
            for (int64_t jj = 0; jj < w; jj++) s[j0 + jj] = c0[jj] * scale;
        }
        return;
    }
    const float *a0 = a, *a1 = nr > 1 ? a + lda : a, *a2 = nr > 2 ? a + 2 * lda : a;
    const float *a3 = nr > 3 ? a + 3 * lda : a;
    for (int64_t j0 = 0; j0 < n; j0 += JB) {
        float c0[JB] = {0}, c1[JB] = {0}, c2[JB] = {0}, c3[JB] = {0};
#ifdef __AVX2__
        ATTN_FN(fma4_reg)(c0, c1, c2, c3, a0, a1, a2, a3, 1, xt + j0, Sp, Dh);
#else
        for (int64_t i = 0; i < Dh; i++)
            ATTN_FN(fma4)(c0, c1, c2, c3, a0[i], a1[i], a2[i], a3[i], xt + i * Sp + j0, JB);
#endif
        const int64_t w = n - j0 < JB ? n - j0 : JB;
        ATTN_FN(store4)(s + j0, lds, nr, w, c0, c1, c2, c3, scale);
    }
}

/* Columns i0..i0+width of o_r = Σ_{j < nbase + r} w_r[j] · x_j, rows r < nr
 * (row r sees one key more than row r − 1: the causal staircase). */
static inline __attribute__((always_inline)) void ATTN_FN(wsum_cols)(
    float *o, int64_t ldo, const float *w, int64_t ldw, int nr, const float *x, int64_t ldx,
    int64_t nbase, int64_t i0, const int width) {
    if (nr == 1) {
        float c0[JB] = {0};
#ifdef __AVX2__
        if (width == JB) {
            ATTN_FN(fma1_reg)(c0, w, 1, x + i0, ldx, nbase);
            for (int ii = 0; ii < width; ii++) o[i0 + ii] = c0[ii];
            return;
        }
#endif
        for (int64_t j = 0; j < nbase; j++) {
            const float *xr = x + j * ldx + i0, y0 = w[j];
#pragma omp simd
            for (int ii = 0; ii < width; ii++) c0[ii] += y0 * xr[ii];
        }
        for (int ii = 0; ii < width; ii++) o[i0 + ii] = c0[ii];
        return;
    }
    const float *w0 = w, *w1 = nr > 1 ? w + ldw : w, *w2 = nr > 2 ? w + 2 * ldw : w;
    const float *w3 = nr > 3 ? w + 3 * ldw : w;
    float c0[JB] = {0}, c1[JB] = {0}, c2[JB] = {0}, c3[JB] = {0};
#ifdef __AVX2__
    if (width == JB)
        ATTN_FN(fma4_reg)(c0, c1, c2, c3, w0, w1, w2, w3, 1, x + i0, ldx, nbase);
    else
#endif
    for (int64_t j = 0; j < nbase; j++)
        ATTN_FN(fma4)(c0, c1, c2, c3, w0[j], w1[j], w2[j], w3[j], x + j * ldx + i0, width);
    /* the staircase: row r's last r keys */
    for (int64_t j = nbase; j < nbase + nr - 1; j++) {
        const float *xr = x + j * ldx + i0;
        for (int ii = 0; ii < width; ii++) {
            if (nr > 1 && j < nbase + 1) c1[ii] += w1[j] * xr[ii];
            if (nr > 2 && j < nbase + 2) c2[ii] += w2[j] * xr[ii];
            if (nr > 3) c3[ii] += w3[j] * xr[ii];
        }
    }
    ATTN_FN(store4)(o + i0, ldo, nr, width, c0, c1, c2, c3, 1.0f);
}

static void ATTN_FN(wsum)(float *o, int64_t ldo, const float *w, int64_t ldw, int nr,
                          const float *x, int64_t ldx, int64_t nbase, int64_t Dh) {
    int64_t i0 = 0;
    for (; i0 + JB <= Dh; i0 += JB) ATTN_FN(wsum_cols)(o, ldo, w, ldw, nr, x, ldx, nbase, i0, JB);
    if (i0 < Dh) ATTN_FN(wsum_cols)(o, ldo, w, ldw, nr, x, ldx, nbase, i0, (int)(Dh - i0));
}

/* y_j += Σ_{t=j0}^{T-1} c[t][j] · x_t for the keys j = j0..j0+nj-1, columns
 * i0..i0+width (c rows of stride ldc, zero where j > t). */
static inline __attribute__((always_inline)) void ATTN_FN(outer_cols)(
    float *y, int64_t ldy, const float *c, int64_t ldc, const float *x, int64_t ldx, int64_t j0,
    int nj, int64_t T, int64_t i0, const int width) {
    float a0[JB] = {0}, a1[JB] = {0}, a2[JB] = {0}, a3[JB] = {0};
    for (int64_t t = j0; t < T; t++) {
        const float *cr = c + t * ldc + j0;
        ATTN_FN(fma4)(a0, a1, a2, a3, cr[0], cr[1], cr[2], cr[3], x + t * ldx + i0, width);
    }
    float *a[QB] = {a0, a1, a2, a3};
    for (int r = 0; r < nj; r++)
        for (int ii = 0; ii < width; ii++) y[(j0 + r) * ldy + i0 + ii] += a[r][ii];
}

static void ATTN_FN(outer)(float *y, int64_t ldy, const float *c, int64_t ldc, const float *x,
                           int64_t ldx, int64_t j0, int nj, int64_t T, int64_t Dh) {
    int64_t i0 = 0;
    for (; i0 + JB <= Dh; i0 += JB) ATTN_FN(outer_cols)(y, ldy, c, ldc, x, ldx, j0, nj, T, i0, JB);
    if (i0 < Dh) ATTN_FN(outer_cols)(y, ldy, c, ldc, x, ldx, j0, nj, T, i0, (int)(Dh - i0));
}

#ifndef ATTN_EXP
#define ATTN_EXP
/* e^x for x <= 0 (a softmax after its max is subtracted), in operations the
 * compiler vectorises: x = r·ln2 + y with r = round(x / ln2) (the 1.5·2^23
 * trick rounds to nearest), ln2 in two parts (Cody–Waite), e^y by its
 * Taylor series to y^7 (|y| <= ln2/2: truncation below 6e-9 relative),
 * times 2^r built in the exponent bits.  Inputs below -87 give e^-87
 * (~1.6e-38) instead of a denormal or 0: against a softmax sum >= 1 that
 * is no difference.  Error a few ulp; one fixed sequence of operations, so
 * one result per SIMD level. */
static inline __attribute__((always_inline)) float attn_exp_neg(float x) {
    x = x < -87.0f ? -87.0f : x;
    const float r = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    const float y = (x - r * 0.693145751953125f) - r * 1.42860682030941723e-6f;
    float e = 1.0f / 5040.0f;
    e = e * y + 1.0f / 720.0f;
    e = e * y + 1.0f / 120.0f;
    e = e * y + 1.0f / 24.0f;
    e = e * y + 1.0f / 6.0f;
    e = e * y + 0.5f;
    e = e * y + 1.0f;
    e = e * y + 1.0f;
    /* unsigned: a NaN score (r's conversion gives INT_MIN) shifts without
     * overflow and the NaN carries through e */
    const uint32_t bits = ((uint32_t)(int32_t)r + 127u) << 23;
    float two_r;
    memcpy(&two_r, &bits, sizeof two_r);
    return e * two_r;
}
#endif

/* Σ a[j]·b[j] (b NULL: Σ a[j]) over j < n in sixteen running sums (element
 * j into sum j % 16) added pairwise at the end: the vector lanes' order,
 * fixed for every n and thread count. */
static inline float ATTN_FN(sum16)(const float *a, const float *b, int64_t n) {
    float acc[JB] = {0};
    int64_t j = 0;
    for (; j + JB <= n; j += JB)
#pragma omp simd
        for (int k = 0; k < JB; k++) acc[k] += b ? a[j + k] * b[j + k] : a[j + k];
    for (int k = 0; j < n; j++, k++) acc[k] += b ? a[j] * b[j] : a[j];
    for (int w = JB / 2; w > 0; w /= 2)
        for (int k = 0; k < w; k++) acc[k] += acc[k + w];
    return acc[0];
}

/* Softmax of p[0..n) in place (max-subtracted; the sum in sixteen lanes). */
static void ATTN_FN(softmax)(float *p, int64_t n) {
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < n; j++) mx = p[j] > mx ? p[j] : mx;
    int64_t j0 = 0;
#ifdef __AVX2__
    /* attn_exp_neg eight at a time (the compiler left it scalar: a third of
     * a 512-token prompt's attention), the same operations in the same
     * order; max(-87, x) keeps a NaN x as the scalar test does */
    const __m256 vmx = _mm256_set1_ps(mx);
    for (; j0 + 8 <= n; j0 += 8) {
        __m256 x = _mm256_max_ps(_mm256_set1_ps(-87.0f), _mm256_sub_ps(_mm256_loadu_ps(p + j0), vmx));
        const __m256 big = _mm256_set1_ps(12582912.0f);
        const __m256 r = _mm256_sub_ps(
            _mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), big), big);
        const __m256 y = _mm256_sub_ps(_mm256_sub_ps(x, _mm256_mul_ps(r, _mm256_set1_ps(0.693145751953125f))),
                                       _mm256_mul_ps(r, _mm256_set1_ps(1.42860682030941723e-6f)));
        __m256 e = _mm256_set1_ps(1.0f / 5040.0f);
        e = _mm256_add_ps(_mm256_mul_ps(e, y), _mm256_set1_ps(1.0f / 720.0f));
        e = _mm256_add_ps(_mm256_mul_ps(e, y), _mm256_set1_ps(1.0f / 120.0f));
        e = _mm256_add_ps(_mm256_mul_ps(e, y), _mm256_set1_ps(1.0f / 24.0f));
        e = _mm256_add_ps(_mm256_mul_ps(e, y), _mm256_set1_ps(1.0f / 6.0f));
        e = _mm256_add_ps(_mm256_mul_ps(e, y), _mm256_set1_ps(0.5f));
        e = _mm256_add_ps(_mm256_mul_ps(e, y), _mm256_set1_ps(1.0f));
        e = _mm256_add_ps(_mm256_mul_ps(e, y), _mm256_set1_ps(1.0f));
        const __m256i bits = _mm256_slli_epi32(
            _mm256_add_epi32(_mm256_cvttps_epi32(r), _mm256_set1_epi32(127)), 23);
        _mm256_storeu_ps(p + j0, _mm256_mul_ps(e, _mm256_castsi256_ps(bits)));
    }
#endif
    for (int64_t j = j0; j < n; j++) p[j] = attn_exp_neg(p[j] - mx);
    const float inv = 1.0f / ATTN_FN(sum16)(p, NULL, n);
#pragma omp simd
    for (int64_t j = 0; j < n; j++) p[j] *= inv;
}

/* One (b, h) task of the forward: T query rows at positions pos0.. against
 * the S = pos0 + T keys kb/vb of one kv head (scores soft-capped when
 * softcap > 0; with window > 0 a row sees its last `window` keys, the
 * weights of the others 0).  Softmax rows go to probs
 * (stride S) or, when probs is NULL, to scratch. */
void ATTN_FN(ffn_attn_fwd_task)(float *out, int64_t ldo, float *probs, float *scratch,
                                const float *q, int64_t ldq, const float *kb, int64_t ldk,
                                const float *vb, int64_t ldv, int64_t T, int64_t pos0, int64_t Dh,
                                float scale, float softcap, int64_t window) {
    const int64_t S = pos0 + T, Sp = attn_pad16(S);
    float *kt = scratch, *rows = scratch + Dh * Sp; /* (Dh, Sp), (QB, Sp) */
    ATTN_FN(transpose_head)(kt, Sp, kb, ldk, S, Dh);
    if (T >= 16 && ldv != Dh) {
        /* a prompt reads every value row T/4 times per 16 columns: first
         * into (S, Dh) rows side by side (in the cache's rows of all kv
         * heads, ldv apart, one walk touched a page per two rows and missed
         * the TLB; a 512-token prompt's attention spent half its time in the
         * weighted sums) */
        float *vp = rows + QB * Sp;
        for (int64_t j = 0; j < S; j++) memcpy(vp + j * Dh, vb + j * ldv, (size_t)Dh * sizeof(float));
        vb = vp, ldv = Dh;
    }
    for (int64_t t0 = 0; t0 < T; t0 += QB) {
        const int nr = T - t0 < QB ? (int)(T - t0) : QB;
        const int64_t nbase = pos0 + t0 + 1; /* keys of row t0 */
        float *p = probs ? probs + t0 * S : rows;
        const int64_t ldp = probs ? S : Sp;
        ATTN_FN(dots)(p, ldp, q + t0 * ldq, ldq, nr, kt, Sp, nbase + nr - 1, Dh, scale);
        for (int r = 0; r < nr; r++) {
            float *pr = p + r * ldp;
            const int64_t n = nbase + r, lo = window > 0 && n > window ? n - window : 0;
            if (softcap > 0.0f) /* Gemma 2: cap·tanh(s/cap) */
                for (int64_t j = lo; j < n; j++) pr[j] = softcap * tanhf(pr[j] / softcap);
            ATTN_FN(softmax)(pr + lo, n - lo);
            if (lo > 0) memset(pr, 0, (size_t)lo * sizeof *pr); /* outside the window */
        }
        ATTN_FN(wsum)(out + t0 * ldo, ldo, p, ldp, nr, vb, ldv, nbase, Dh);
    }
}

/* One (b, g) task of the backward: the R query heads h0..h0+R-1 that read
 * kv head g, S = T.  Pointers are offset to the task's first row and head;
 * probs to (b, h0, 0, 0) with rows of S; dout/q/dq heads are Dh apart.
 * Per head: pass 1 runs over query rows (dp, ds, dq); pass 2 over keys
 * (dk, dv accumulate over queries in registers). */
void ATTN_FN(ffn_attn_bwd_task)(float *dq, float *dkb, float *dvb, const float *dout,
                                int64_t ldo, const float *probs, const float *q, int64_t ldq,
                                const float *kb, int64_t ldk, const float *vb, int64_t ldv,
                                float *scratch, int64_t T, int64_t R, int64_t Dh, float scale) {
    const int64_t S = T, Sp = attn_pad16(S);
    float *vt = scratch, *ds = vt + Dh * Sp, *pz = ds + T * Sp; /* (Dh,Sp) (T,Sp) (T,Sp) */
    ATTN_FN(transpose_head)(vt, Sp, vb, ldv, S, Dh);
    for (int64_t s = 0; s < S; s++) {
        memset(dkb + s * ldk, 0, (size_t)Dh * sizeof(float));
        memset(dvb + s * ldv, 0, (size_t)Dh * sizeof(float));
    }
    for (int64_t r = 0; r < R; r++) {
        const float *ph = probs + r * T * S, *go = dout + r * Dh, *qh = q + r * Dh;
        float *dqh = dq + r * Dh;
        for (int64_t t0 = 0; t0 < T; t0 += QB) { /* pass 1 */
            const int nr = T - t0 < QB ? (int)(T - t0) : QB;
            ATTN_FN(dots)(ds + t0 * Sp, Sp, go + t0 * ldo, ldo, nr, vt, Sp, t0 + nr, Dh, 1.0f);
            for (int i = 0; i < nr; i++) {
                const int64_t t = t0 + i, n = t + 1;
                const float *p = ph + t * S;
                float *dsr = ds + t * Sp, *pzr = pz + t * Sp;
                const float pdp = ATTN_FN(sum16)(p, dsr, n);
#pragma omp simd
                for (int64_t j = 0; j < n; j++) {
                    dsr[j] = p[j] * (dsr[j] - pdp) * scale;
                    pzr[j] = p[j];
                }
                memset(dsr + n, 0, (size_t)(Sp - n) * sizeof(float));
                memset(pzr + n, 0, (size_t)(Sp - n) * sizeof(float));
            }
            ATTN_FN(wsum)(dqh + t0 * ldq, ldq, ds + t0 * Sp, Sp, nr, kb, ldk, t0 + 1, Dh);
        }
        for (int64_t j0 = 0; j0 < T; j0 += QB) { /* pass 2 */
            const int nj = T - j0 < QB ? (int)(T - j0) : QB;
            ATTN_FN(outer)(dkb, ldk, ds, Sp, qh, ldq, j0, nj, T, Dh);
            ATTN_FN(outer)(dvb, ldv, pz, Sp, go, ldo, j0, nj, T, Dh);
        }
    }
}
