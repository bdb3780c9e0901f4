/* gemv_packed_avx512.c -- the streaming small-N kernel over the matrix
 * engine's own packed weights (AVX-512).  oneDNN's brgemm packs B (K, N)
 * into panels of nb columns (64) made of kb-row tiles (16): within a panel
 * the weights for k = 0, 1, 2, ... follow each other, nb floats apiece, so
 * one panel is one sequential stream.
 *
 * Blocking, so that every weight comes from DRAM once for up to GP_CHUNK
 * tokens (and the product stays near the FMA peak where it turns
 * compute-bound):
 *   - a 64-column group of a panel at a time (the thread split is by
 *     panels, in the caller);
 *   - along k, blocks of up to GP_KROWS = 2048 rows: 64 columns × 2048 rows
 *     is 512 KiB, which stays in L2 while every token group walks over it
 *     (measured against 32..1024-row blocks sized for L1: those lost
 *     5-25% to the buffer round trips and a DRAM stream cut into pieces);
 *   - with two token groups or more, each group prefetches (into L2) its
 *     share of the next block's rows, so that DRAM keeps streaming while
 *     the later groups compute from cache (measured: 10-15% at n = 8..32);
 *   - tokens in groups of up to GP_T = 6: 6 tokens × 64 columns in 24 zmm
 *     accumulators, next to the 4 weight vectors and a broadcast of x[t][k]
 *     (29 of 32 registers); per k, 24 FMAs for 4 weight loads and 6
 *     broadcasts.
 * Between k blocks the accumulators go to a small buffer and come back
 * unchanged, so every output is still one FMA chain over k = 0, 1, 2, ...
 * from zero: the same bits as the unblocked kernel, for any n, any column
 * range and any thread split (and the same k-ordered sum brgemm forms).
 * Contract in kernels.h (ffn_gemv_packed). */
#include "kernels/kernels.h"

#include <immintrin.h>
#include <string.h>

#define GP_INLINE static inline __attribute__((always_inline))

enum {
    GP_T = 6,      /* tokens per register block */
    GP_CHUNK = 64, /* tokens per pass over the weights */
    GP_KROWS = 2048, /* rows of k per L2 block (rounded to whole kb tiles) */
    GP_PF_GROUPS = 2, /* prefetch the next block from this many token groups on */
};

/* buf[t·64 + c] (+)= Σ_{k0 <= k < k1} x[t·ldx + k] · B[k][col0 + c] for
 * t < T (compile-time after inlining), c < 64; `first` starts from zero.
 * `panel` is the group's first column in its panel; k0 is a multiple of kb. */
/* Prefetch into L2 of the weights one block ahead: row i of this block
 * fetches the row `off` floats on (0: none) when i % every == phase, so
 * that the token groups of a block share the next block's fetch and the
 * DRAM stream runs while the later groups compute from cache. */
typedef struct gp_prefetch {
    int64_t off;
    int phase, every;
} gp_prefetch;

GP_INLINE void block(float *buf, const float *panel, const ffn_packed_view *B, int64_t k0,
                     int64_t k1, const float *x, int64_t ldx, int T, int first, gp_prefetch pf) {
    __m512 acc[GP_T][4];
#pragma GCC unroll 6
    for (int t = 0; t < T; t++)
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++)
            acc[t][v] = first ? _mm512_setzero_ps() : _mm512_load_ps(buf + t * 64 + 16 * v);
    const float *xt[GP_T];
#pragma GCC unroll 6
    for (int t = 0; t < T; t++) xt[t] = x + t * ldx;
    int64_t kb = B->kb, nb = B->nb;
    const float *tile = panel + (k0 / kb) * B->stride_kblk;
    int countdown = pf.phase;
    for (int64_t kt = k0; kt < k1; kt += kb, tile += B->stride_kblk) {
        int64_t kend = k1 - kt < kb ? k1 - kt : kb;
        for (int64_t i = 0; i < kend; i++) {
            const float *w = tile + i * nb;
            if (pf.off) {
                if (countdown == 0) {
                    const char *q = (const char *)(w + pf.off);
                    _mm_prefetch(q, _MM_HINT_T1), _mm_prefetch(q + 64, _MM_HINT_T1);
                    _mm_prefetch(q + 128, _MM_HINT_T1), _mm_prefetch(q + 192, _MM_HINT_T1);
                    countdown = pf.every;
                }
                countdown--;
            }
            __m512 w0 = _mm512_loadu_ps(w), w1 = _mm512_loadu_ps(w + 16);
            __m512 w2 = _mm512_loadu_ps(w + 32), w3 = _mm512_loadu_ps(w + 48);
#pragma GCC unroll 6
            for (int t = 0; t < T; t++) {
                __m512 xb = _mm512_set1_ps(xt[t][kt + i]);
                acc[t][0] = _mm512_fmadd_ps(w0, xb, acc[t][0]);
                acc[t][1] = _mm512_fmadd_ps(w1, xb, acc[t][1]);
                acc[t][2] = _mm512_fmadd_ps(w2, xb, acc[t][2]);
                acc[t][3] = _mm512_fmadd_ps(w3, xb, acc[t][3]);
            }
        }
    }
#pragma GCC unroll 6
    for (int t = 0; t < T; t++)
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) _mm512_store_ps(buf + t * 64 + 16 * v, acc[t][v]);
}

/* One register block of T (1..GP_T) tokens, T made a constant per case. */
static void block_tokens(float *buf, const float *panel, const ffn_packed_view *B, int64_t k0,
                         int64_t k1, const float *x, int64_t ldx, int T, int first,
                         gp_prefetch pf) {
    switch (T) {
    case 1: block(buf, panel, B, k0, k1, x, ldx, 1, first, pf); break;
    case 2: block(buf, panel, B, k0, k1, x, ldx, 2, first, pf); break;
    case 3: block(buf, panel, B, k0, k1, x, ldx, 3, first, pf); break;
    case 4: block(buf, panel, B, k0, k1, x, ldx, 4, first, pf); break;
    case 5: block(buf, panel, B, k0, k1, x, ldx, 5, first, pf); break;
    default: block(buf, panel, B, k0, k1, x, ldx, GP_T, first, pf); break;
    }
}

void ffn_gemv_packed_avx512(float *out, int64_t ldo, const ffn_packed_view *B, const float *x,
                            int64_t ldx, int64_t n, int64_t c0, int64_t c1) {
    if (c1 <= c0 || n <= 0) return;
    _Alignas(64) float buf[GP_CHUNK * 64]; /* (tokens of the pass, 64 columns) */
    int64_t K = B->K, kb = B->kb, nb = B->nb;
    int64_t krows = kb >= GP_KROWS ? kb : (GP_KROWS / kb) * kb;
    for (int64_t p = c0 / nb; p * nb < c1; p++)
        for (int64_t off = 0; off < nb; off += 64) {
            int64_t col0 = p * nb + off; /* first column of this group */
            if (col0 >= c1 || col0 + 64 <= c0) continue;
            const float *panel = B->data + p * B->stride_nblk + off;
            int64_t lo = c0 > col0 ? c0 - col0 : 0, hi = c1 - col0 < 64 ? c1 - col0 : 64;
            for (int64_t t0 = 0; t0 < n; t0 += GP_CHUNK) {
                int64_t nt = n - t0 < GP_CHUNK ? n - t0 : GP_CHUNK;
                if (K <= 0) memset(buf, 0, sizeof buf);
                for (int64_t k0 = 0; k0 < K; k0 += krows) {
                    int64_t k1 = K - k0 < krows ? K - k0 : krows;
                    k1 += k0;
                    /* groups as even as possible (32 = 6+6+5+5+5+5, not
                     * 6·5+2): a small last group runs below the peak */
                    int64_t groups = (nt + GP_T - 1) / GP_T;
                    /* the next block: in this panel, else (64-column
                     * panels) the same rows of the next panel */
                    int64_t next = k1 < K ? (k1 - k0) / kb * B->stride_kblk
                                          : B->stride_nblk - (k0 / kb) * B->stride_kblk;
                    gp_prefetch pf = {.off = nb == 64 || k1 < K ? next : 0,
                                      .every = (int)groups};
                    if (groups < GP_PF_GROUPS) pf.off = 0; /* one group: the stream itself */
                    for (int64_t g = 0, t = 0; g < groups; g++) {
                        int T = (int)(nt / groups + (g < nt % groups));
                        pf.phase = (int)g;
                        block_tokens(buf + t * 64, panel, B, k0, k1, x + (t0 + t) * ldx, ldx, T,
                                     k0 == 0, pf);
                        t += T;
                    }
                }
                __mmask16 m[4]; /* the group's columns inside [c0, c1), 16 a vector */
                for (int v = 0; v < 4; v++) {
                    int64_t a = lo - 16 * v, b = hi - 16 * v;
                    a = a < 0 ? 0 : a > 16 ? 16 : a, b = b < 0 ? 0 : b > 16 ? 16 : b;
                    m[v] = (__mmask16)(((1u << b) - 1u) & ~((1u << a) - 1u));
                }
                for (int64_t t = 0; t < nt; t++) {
                    float *o = out + (t0 + t) * ldo + (col0 - c0);
                    for (int v = 0; v < 4; v++)
                        if (m[v])
                            _mm512_mask_storeu_ps(o + 16 * v, m[v],
                                                  _mm512_load_ps(buf + t * 64 + 16 * v));
                }
            }
        }
}
