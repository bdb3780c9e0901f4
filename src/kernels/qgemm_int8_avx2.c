/* qgemm_int8_avx2.c -- ffn_qgemm at prompt sizes on AVX2 machines with
 * int8 products (see qgemm_int8.h): the answer llama.cpp gives on the same
 * CPUs, register-blocked so that each weight byte meets several tokens and
 * each activation byte several rows.
 *
 * Layout.  Columns go in groups of 256 (8 blocks of 32, the last group
 * padded with zero codes and zero scales).  Within a group the 256 int8
 * values are stored as 8 steps of 32 bytes: step s holds elements
 * 4s..4s+3 of each of the 8 blocks, so that after vpmaddubsw + vpmaddwd
 * lane i of a step's int32 vector holds 4 products of block i only, and
 * the 8 steps of a group add up, lane by lane, to the 8 blocks' integer
 * dot products.  The per-block scales then go on as one vector per group:
 * lane i of the weight's w1 / w2 and of the token's t1 / t2.
 *   x   once per call, every token, to the row kernels' int8 blocks
 *       (qgemm_impl.h's rule: 32 values per scale for the 32-element
 *       formats, 256 for the super-block ones, so the product is the same
 *       real number the row kernels compute): q in the step order,
 *       t1[i] = d of the block of lane i, t2[i] = d · Σ q over lane i's 32.
 *   W   16 rows × 1024 columns at a time, per thread, unpacked to codes in
 *       the step order (4 rows interleaved per step) with w1, w2 per lane:
 *         unsigned codes c (q4_0, q4_1, q5_0, q5_1, q4_K, q5_K): the row's
 *         values are w1·c + w2 per block of 32 (q4_0: w1 = d, w2 = −8d;
 *         q4_K: w1 = d·sc, w2 = −dmin·m), and the product is
 *         Σ_lanes w1·(Σ c·q)·t1 + w2·t2.  Codes of at most 15 sum in int16
 *         for all 8 steps (8 · 2 · 15 · 127 < 2^15), those of at most 31
 *         for 4 (q5_*).
 *         signed codes v (q8_0, iq4_nl, iq4_xs): vpsignb moves v's sign
 *         onto q and vpmaddubsw multiplies |v| (at most 128 · 127 · 2, no
 *         saturation), sums in int32 per step; the product is
 *         Σ_lanes w1·(Σ v·q)·t1.
 *   y   micro-tiles of 4 rows × 3 tokens: 12 integer accumulators per
 *       step, 12 float accumulators per group.
 * Each output is a fixed sum: per chunk of 1024 columns, per group one
 * exact integer per lane, converted, then the FMAs above in lane order
 * from zero, the 8 lanes summed (vf_hsum) and the chunks added to y in
 * order (to y's value when accumulating, else from the first chunk's).  So
 * a token's result does not depend on n, the tile or the thread count (the
 * panels of 16 rows are split across threads).  It is W · q8(x) to fp32
 * rounding, as the row kernels' (to which it is not bitwise equal: they
 * sum in another order). */
#include "kernels/qgemm_int8.h"
#include "kernels/qgemm_avx2.h" /* qg_avx2_f16 */
#include "kernels/quant.h"
#include "kernels/types.h"

#include <immintrin.h>
#include <omp.h>
#include <string.h>

#define I8 static inline __attribute__((always_inline))

enum {
    I8_RM = 4,    /* rows per micro-tile (interleaved in the panel) */
    I8_RN = 3,    /* tokens per micro-tile */
    I8_RP = 16,   /* rows per panel (a thread's unit of work) */
    I8_KG = 4,    /* groups of 256 columns per panel chunk (measured: 1, 2 slower) */
    I8_LANES = 8  /* blocks of 32 per group */
};

/* the three ways of multiplying a format's codes */
enum { I8_U8 = 1, I8_U4 = 2, I8_S = 3 };

static int i8_kind(ffn_ggml_type t) {
    switch (t) {
    case FFN_GGML_TYPE_Q4_0: case FFN_GGML_TYPE_Q4_1: case FFN_GGML_TYPE_Q4_K: return I8_U8;
    case FFN_GGML_TYPE_Q5_0: case FFN_GGML_TYPE_Q5_1: case FFN_GGML_TYPE_Q5_K: return I8_U4;
    case FFN_GGML_TYPE_Q8_0: case FFN_GGML_TYPE_IQ4_NL: case FFN_GGML_TYPE_IQ4_XS: return I8_S;
    default: return 0;
    }
}

int ffn_qg_int8_has(ffn_ggml_type type) { return i8_kind(type) != 0; }

/* values per activation scale: the row kernels' (QG_ACT_Q32 or QG_ACT_Q256) */
static int i8_ablock(ffn_ggml_type t) { return ffn_type_info_of(t)->block == 256 ? 256 : 32; }

/* Bytes of an array of `bytes` per token: whole 64-byte lines, an odd count
 * (the tokens' strips fall into different L1 sets; qgemm.c does the same). */
static size_t i8_stride(size_t bytes) { return (((bytes + 63) / 64) | 1) * 64; }

static int64_t i8_groups(int64_t cols) { return (cols + 255) / 256; }

static size_t i8_thread_bytes(void) {
    return 2 * (size_t)I8_RP * I8_KG * 256 + (size_t)I8_RP * I8_KG * 16 * sizeof(float);
}

size_t ffn_qg_int8_ws_bytes(const ffn_qweight *w, int64_t n, int threads) {
    if (threads < 1) threads = 1;
    const int64_t G = i8_groups(w->cols);
    return 64 + (size_t)n * (i8_stride((size_t)G * 256) + i8_stride((size_t)G * 64)) +
           (size_t)threads * i8_thread_bytes();
}

/* lin: 8 blocks of 32 bytes -> dst in the step order (a transpose of 8 × 8
 * four-byte pieces). */
static void i8_interleave(const uint8_t *lin, uint8_t *dst) {
    uint32_t u[64], v[64];
    memcpy(u, lin, 256);
    for (int s = 0; s < 8; s++)
        for (int i = 0; i < 8; i++) v[8 * s + i] = u[8 * i + s];
    memcpy(dst, v, 256);
}

/* ---- activations ----------------------------------------------------------------- */

static void i8_prep(const float *x, int64_t cols, int ab, int8_t *q, float *f) {
    const int64_t G = i8_groups(cols);
    int8_t lin[256];
    for (int64_t g = 0; g < G; g++) {
        float d[8] = {0};
        memset(lin, 0, sizeof lin);
        const int64_t k0 = g * 256;
        if (ab == 256) {
            const float dd = ffn_qg_quant_block_avx2(x + k0, 256, lin);
            for (int i = 0; i < 8; i++) d[i] = dd;
        } else {
            for (int i = 0; i < 8 && k0 + 32 * i < cols; i++)
                d[i] = ffn_qg_quant_block_avx2(x + k0 + 32 * i, 32, lin + 32 * i);
        }
        for (int i = 0; i < 8; i++) {
            int s = 0;
            for (int j = 0; j < 32; j++) s += lin[32 * i + j];
            f[16 * g + i] = d[i];
            f[16 * g + 8 + i] = d[i] * (float)s;
        }
        i8_interleave((const uint8_t *)lin, (uint8_t *)q + 256 * g);
    }
}

/* ---- weights --------------------------------------------------------------------- */

/* The 32 five-bit codes of a Q5_0 or Q5_1 block: the high bits at qh (4
 * bytes, bit j for code j), the low nibbles at qs (16 bytes). */
static void q5_codes(const uint8_t *qh_at, const uint8_t *qs, uint8_t *o) {
    uint32_t qh;
    memcpy(&qh, qh_at, 4);
    for (int j = 0; j < 16; j++) {
        o[j] = (uint8_t)((qs[j] & 15) | (((qh >> j) & 1) << 4));
        o[16 + j] = (uint8_t)((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
    }
}

/* The eight scales and mins of a Q4_K or Q5_K super-block at p (d, dmin,
 * then the 12 packed bytes) as w1 = d * scale and w2 = -dmin * min. */
static void k4_scales(const uint8_t *p, float *w1, float *w2) {
    const float d = qg_avx2_f16(p), dmin = qg_avx2_f16(p + 2);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, mn;
        quant_scale_min_k4(j, p + 4, &sc, &mn);
        w1[j] = d * (float)sc, w2[j] = -(dmin * (float)mn);
    }
}

/* Group g of a row: 256 codes (lin, block order), w1 and w2 per block. */
static void i8_unpack(ffn_ggml_type type, const uint8_t *row, int64_t g, int64_t cols, uint8_t *lin,
                      float *w1, float *w2) {
    memset(lin, 0, 256);
    for (int i = 0; i < 8; i++) w1[i] = w2[i] = 0.0f;
    switch (type) {
    case FFN_GGML_TYPE_Q4_K: {
        const uint8_t *p = row + g * 144, *qs = p + 16;
        k4_scales(p, w1, w2);
        for (int i = 0; i < 4; i++)
            for (int l = 0; l < 32; l++) {
                lin[64 * i + l] = qs[32 * i + l] & 15;
                lin[64 * i + 32 + l] = qs[32 * i + l] >> 4;
            }
        return;
    }
    case FFN_GGML_TYPE_Q5_K: {
        const uint8_t *p = row + g * 176, *qh = p + 16, *qs = p + 48;
        k4_scales(p, w1, w2);
        for (int i = 0; i < 4; i++)
            for (int l = 0; l < 32; l++) {
                lin[64 * i + l] = (uint8_t)((qs[32 * i + l] & 15) | (((qh[l] >> (2 * i)) & 1) << 4));
                lin[64 * i + 32 + l] = (uint8_t)((qs[32 * i + l] >> 4) | (((qh[l] >> (2 * i + 1)) & 1) << 4));
            }
        return;
    }
    case FFN_GGML_TYPE_IQ4_XS: {
        const uint8_t *p = row + g * 136;
        const float d = qg_avx2_f16(p);
        const unsigned sh = (unsigned)p[2] | ((unsigned)p[3] << 8);
        for (int ib = 0; ib < 8; ib++) {
            const int ls = (((p[4 + ib / 2] >> 4 * (ib % 2)) & 0xF) | (((sh >> 2 * ib) & 3) << 4)) - 32;
            const uint8_t *qs = p + 8 + 16 * ib;
            w1[ib] = d * (float)ls;
            for (int j = 0; j < 16; j++) {
                lin[32 * ib + j] = (uint8_t)quant_iq4nl_values[qs[j] & 15];
                lin[32 * ib + 16 + j] = (uint8_t)quant_iq4nl_values[qs[j] >> 4];
            }
        }
        return;
    }
    default: break;
    }
    /* the 32-element formats */
    const int64_t nblk = cols / 32;
    const size_t bb = ffn_type_info_of(type)->bytes;
    for (int i = 0; i < 8 && 8 * g + i < nblk; i++) {
        const uint8_t *p = row + (size_t)(8 * g + i) * bb;
        uint8_t *o = lin + 32 * i;
        const float d = qg_avx2_f16(p);
        switch (type) {
        case FFN_GGML_TYPE_Q8_0:
            memcpy(o, p + 2, 32);
            w1[i] = d;
            break;
        case FFN_GGML_TYPE_Q4_0:
            for (int j = 0; j < 16; j++) o[j] = p[2 + j] & 15, o[16 + j] = p[2 + j] >> 4;
            w1[i] = d, w2[i] = -8.0f * d;
            break;
        case FFN_GGML_TYPE_Q4_1:
            for (int j = 0; j < 16; j++) o[j] = p[4 + j] & 15, o[16 + j] = p[4 + j] >> 4;
            w1[i] = d, w2[i] = qg_avx2_f16(p + 2);
            break;
        case FFN_GGML_TYPE_Q5_0:
            q5_codes(p + 2, p + 6, o);
            w1[i] = d, w2[i] = -16.0f * d;
            break;
        case FFN_GGML_TYPE_Q5_1:
            q5_codes(p + 4, p + 8, o);
            w1[i] = d, w2[i] = qg_avx2_f16(p + 2);
            break;
        default: /* iq4_nl */
            for (int j = 0; j < 16; j++) {
                o[j] = (uint8_t)quant_iq4nl_values[p[2 + j] & 15];
                o[16 + j] = (uint8_t)quant_iq4nl_values[p[2 + j] >> 4];
            }
            w1[i] = d;
            break;
        }
    }
}

/* Rows r0..r0+15 (zero past w->rows), groups g0..g0+kg-1 into the panel:
 * codes pc[((rq·kg + g)·8 + s)·4 + r] (32 bytes each; pa the same with
 * |v| for the signed kind), scales pf[(rq·kg + g)·4 + r] (w1[8], w2[8]). */
static void i8_fill(const ffn_qweight *w, int kind, int64_t r0, int64_t g0, int kg, uint8_t *pc,
                    uint8_t *pa, float *pf) {
    uint8_t lin[256], il[256];
    for (int rr = 0; rr < I8_RP; rr++) {
        const int rq = rr / I8_RM, r = rr % I8_RM;
        for (int g = 0; g < kg; g++) {
            float *f = pf + ((size_t)(rq * kg + g) * I8_RM + r) * 16;
            if (r0 + rr < w->rows) {
                i8_unpack(w->type, w->data + (size_t)(r0 + rr) * w->row_bytes, g0 + g, w->cols, lin, f, f + 8);
                i8_interleave(lin, il);
            } else {
                memset(il, 0, sizeof il);
                for (int i = 0; i < 16; i++) f[i] = 0.0f;
            }
            for (int s = 0; s < 8; s++) {
                const size_t o = (((size_t)(rq * kg + g) * 8 + s) * I8_RM + r) * 32;
                const __m256i v = _mm256_loadu_si256((const __m256i *)(il + 32 * s));
                _mm256_store_si256((__m256i *)(pc + o), v);
                if (kind == I8_S) _mm256_store_si256((__m256i *)(pa + o), _mm256_sign_epi8(v, v));
            }
        }
    }
}

/* ---- the micro-kernel --------------------------------------------------------------
 * 4 rows of the panel (pc/pa/pf at the row quad's first group) × T tokens
 * (xq, xf at the chunk's first group; strides qs bytes, fs floats) over kg
 * groups; out[r·I8_RN + t] the 8 lanes' sum. */
I8 void i8_mk(const int kind, const uint8_t *pc, const uint8_t *pa, const float *pf, const int8_t *xq,
              int64_t qs, const float *xf, int64_t fs, int kg, const int T, float *out) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 fa[I8_RM][I8_RN];
#pragma GCC unroll 4
    for (int r = 0; r < I8_RM; r++)
#pragma GCC unroll 3
        for (int t = 0; t < T; t++) fa[r][t] = _mm256_setzero_ps();
    for (int g = 0; g < kg; g++) {
        const uint8_t *wg = pc + (size_t)g * 8 * I8_RM * 32, *ag = pa + (size_t)g * 8 * I8_RM * 32;
        const int8_t *xg = xq + (size_t)g * 256;
        __m256i ia[I8_RM][I8_RN];
#pragma GCC unroll 4
        for (int r = 0; r < I8_RM; r++)
#pragma GCC unroll 3
            for (int t = 0; t < T; t++) ia[r][t] = _mm256_setzero_si256();
        if (kind == I8_S) {
#pragma GCC unroll 1
            for (int s = 0; s < 8; s++) {
#pragma GCC unroll 3
                for (int t = 0; t < T; t++) {
                    const __m256i xv = _mm256_load_si256((const __m256i *)(xg + t * qs + 32 * s));
#pragma GCC unroll 4
                    for (int r = 0; r < I8_RM; r++) {
                        const __m256i v = _mm256_load_si256((const __m256i *)(wg + (s * I8_RM + r) * 32));
                        const __m256i av = _mm256_load_si256((const __m256i *)(ag + (s * I8_RM + r) * 32));
                        const __m256i p = _mm256_maddubs_epi16(av, _mm256_sign_epi8(xv, v));
                        ia[r][t] = _mm256_add_epi32(ia[r][t], _mm256_madd_epi16(p, ones));
                    }
                }
            }
        } else {
            const int WS = kind == I8_U8 ? 8 : 4;
#pragma GCC unroll 1
            for (int s0 = 0; s0 < 8; s0 += WS) {
                __m256i h[I8_RM][I8_RN];
#pragma GCC unroll 4
                for (int r = 0; r < I8_RM; r++)
#pragma GCC unroll 3
                    for (int t = 0; t < T; t++) h[r][t] = _mm256_setzero_si256();
#pragma GCC unroll 1
                for (int s = s0; s < s0 + WS; s++) {
                    __m256i xv[I8_RN];
#pragma GCC unroll 3
                    for (int t = 0; t < T; t++) xv[t] = _mm256_load_si256((const __m256i *)(xg + t * qs + 32 * s));
#pragma GCC unroll 4
                    for (int r = 0; r < I8_RM; r++) {
                        const __m256i u = _mm256_load_si256((const __m256i *)(wg + (s * I8_RM + r) * 32));
#pragma GCC unroll 3
                        for (int t = 0; t < T; t++) h[r][t] = _mm256_add_epi16(h[r][t], _mm256_maddubs_epi16(u, xv[t]));
                    }
                }
#pragma GCC unroll 4
                for (int r = 0; r < I8_RM; r++)
#pragma GCC unroll 3
                    for (int t = 0; t < T; t++) {
                        const __m256i m = _mm256_madd_epi16(h[r][t], ones);
                        ia[r][t] = _mm256_add_epi32(ia[r][t], m);
                    }
            }
        }
        const float *fg = pf + (size_t)g * I8_RM * 16;
#pragma GCC unroll 4
        for (int r = 0; r < I8_RM; r++) {
            const __m256 w1 = _mm256_load_ps(fg + 16 * r), w2 = _mm256_load_ps(fg + 16 * r + 8);
#pragma GCC unroll 3
            for (int t = 0; t < T; t++) {
                const float *tf = xf + t * fs + 16 * g;
                const __m256 c = _mm256_mul_ps(_mm256_cvtepi32_ps(ia[r][t]), _mm256_loadu_ps(tf));
                fa[r][t] = _mm256_fmadd_ps(w1, c, fa[r][t]);
                if (kind != I8_S) fa[r][t] = _mm256_fmadd_ps(w2, _mm256_loadu_ps(tf + 8), fa[r][t]);
            }
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < I8_RM; r++)
#pragma GCC unroll 3
        for (int t = 0; t < T; t++) out[r * I8_RN + t] = vf_hsum(fa[r][t]);
}

#define I8_CASE(K, TT) \
    case TT: i8_mk(K, pc, pa, pf, xq, qs, xf, fs, kg, TT, out); break;
#define I8_KIND(K)                                                                                 \
    static void i8_mk_##K(int T, const uint8_t *pc, const uint8_t *pa, const float *pf,           \
                          const int8_t *xq, int64_t qs, const float *xf, int64_t fs, int kg,      \
                          float *out) {                                                            \
        switch (T) {                                                                               \
            I8_CASE(K, 1) I8_CASE(K, 2) default : I8_CASE(K, 3)                                    \
        }                                                                                          \
    }
I8_KIND(1)
I8_KIND(2)
I8_KIND(3)
#undef I8_KIND
#undef I8_CASE

/* ---- the call ---------------------------------------------------------------------- */

void ffn_qg_int8_run(const ffn_qweight *w, const float *x, int64_t ldx, int64_t n, float *y,
                     int64_t ldy, int accumulate, void *ws) {
    const int kind = i8_kind(w->type), ab = i8_ablock(w->type);
    const int64_t cols = w->cols, rows = w->rows, G = i8_groups(cols);
    const int64_t npanels = (rows + I8_RP - 1) / I8_RP;
    const int64_t qs = (int64_t)i8_stride((size_t)G * 256), fs = (int64_t)i8_stride((size_t)G * 64) / 4;
    uint8_t *base = (uint8_t *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);
    int8_t *aq = (int8_t *)base;
    float *af = (float *)(base + (size_t)n * qs);
    uint8_t *thr = (uint8_t *)(af + (size_t)n * fs);
    void (*mk)(int, const uint8_t *, const uint8_t *, const float *, const int8_t *, int64_t,
               const float *, int64_t, int, float *) =
        kind == I8_U8 ? i8_mk_1 : kind == I8_U4 ? i8_mk_2 : i8_mk_3;
    const int par = npanels > 1 && n * rows * cols >= (INT64_C(1) << 20);
#pragma omp parallel if (par)
    {
#pragma omp for schedule(static)
        for (int64_t t = 0; t < n; t++) i8_prep(x + t * ldx, cols, ab, aq + t * qs, af + t * fs);
        uint8_t *pc = thr + (size_t)omp_get_thread_num() * i8_thread_bytes();
        uint8_t *pa = pc + (size_t)I8_RP * I8_KG * 256;
        float *pf = (float *)(pa + (size_t)I8_RP * I8_KG * 256);
#pragma omp for schedule(static)
        for (int64_t p = 0; p < npanels; p++) {
            const int64_t r0 = p * I8_RP;
            const int nv = rows - r0 < I8_RP ? (int)(rows - r0) : I8_RP;
            for (int64_t g0 = 0; g0 < G; g0 += I8_KG) {
                const int kg = G - g0 < I8_KG ? (int)(G - g0) : I8_KG;
                i8_fill(w, kind, r0, g0, kg, pc, pa, pf);
                const int add = accumulate || g0 > 0;
                for (int64_t t0 = 0; t0 < n; t0 += I8_RN) {
                    const int T = n - t0 < I8_RN ? (int)(n - t0) : I8_RN;
                    const int8_t *xq = aq + t0 * qs + g0 * 256;
                    const float *xf = af + t0 * fs + g0 * 16;
                    for (int rq = 0; rq * I8_RM < nv; rq++) {
                        float out[I8_RM * I8_RN];
                        const size_t co = (size_t)rq * kg * 8 * I8_RM * 32;
                        mk(T, pc + co, pa + co, pf + (size_t)rq * kg * I8_RM * 16, xq, qs, xf, fs, kg, out);
                        const int nr = nv - rq * I8_RM < I8_RM ? nv - rq * I8_RM : I8_RM;
                        for (int t = 0; t < T; t++) {
                            float *o = y + (t0 + t) * ldy + r0 + rq * I8_RM;
                            for (int r = 0; r < nr; r++) o[r] = add ? o[r] + out[r * I8_RN + t] : out[r * I8_RN + t];
                        }
                    }
                }
            }
        }
    }
}
