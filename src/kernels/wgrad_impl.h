/* wgrad_impl.h -- the weight-gradient kernel C (M, N) += Aᵀ·B for a small
 * inner dimension K (the token count), written once and instantiated per
 * SIMD level: wgrad_avx2.c and wgrad_avx512.c define the vector operations
 * below and include this file.  Contract in kernels.h (ffn_wgrad).
 * Internal.
 *
 * Blocking.  A tile of WG_MR rows × WG_NV vectors of C lives in registers
 * for a whole chunk of K (at most WG_KC steps): per step, WG_NV vectors of
 * one row of B are loaded and each of the WG_MR values of A is broadcast
 * against them.  The tile is then added to C once, so with K <= WG_KC every
 * element of C is read and written exactly once per call -- the point of
 * the kernel: at K = 64 the gradient matrix (megabytes) is the largest
 * operand and streams from memory, while B's chunk (kc × cols floats, at
 * most FFN_WGRAD_CHUNK_FLOATS, packed into contiguous panels on the stack)
 * stays in L2 across all row blocks, and A's rows are packed a group at a
 * time into blocks [k][WG_MR] (as many floats, also on the stack: 128 KiB
 * of stack in all).
 * Both packs matter: the rows of A and B are a large stride apart (often
 * a power of two: 4 KiB at D = 1024), and read in place they fall into a
 * few cache sets and are evicted before their reuse.  The tile's rows of
 * C are prefetched when the tile starts, so their loads do not stall the
 * final add.
 *
 * Sum order.  Each element is acc = 0; acc = fma(a_k, b_k, acc) for k in
 * order within a chunk, then C += acc, chunk by chunk; the chunks depend on
 * K alone.  So a result never depends on the tile an element falls in
 * (tails included: masked lanes and partial row blocks run the same
 * sequence), on the rows a caller hands to the kernel, or on threads.
 *
 * The including file includes the vector operations of its instruction set
 * (vec_avx2.h, vec_avx512.h: vf_vec, vf_load, vf_fma, ..., VF_LANES floats
 * a vector) and defines, before including this one:
 *   WG_NAME                     the function (ffn_wgrad_avx2, ...)
 *   WG_NV, WG_MR                vectors and rows per tile */
#ifndef WG_NAME
#error "include vec_<isa>.h and define WG_NAME before including wgrad_impl.h"
#endif

#include "kernels/kernels.h"

#include <string.h>

#if WG_MR != 6
#error "wgrad_impl.h: the row dispatch below is written for WG_MR = 6"
#endif

#define WG_KC FFN_WGRAD_KC
#define WG_NR (VF_LANES * WG_NV)

/* One tile: C (mr, nv vectors) += Σ_k ap[k][r] · bp[k][·] (a packed panel,
 * WG_NR floats per k, zero-padded); when `tail`, the last vector of C
 * covers only the lanes in m. */
VF_INLINE void wg_tile(const int mr, const int nv, const int tail, vf_mask m, float *C,
                       int64_t ldc, const float *ap, const float *bp, int64_t kc) {
    vf_vec acc[WG_MR][WG_NV];
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++) {
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) {
            __builtin_prefetch(C + r * ldc + v * VF_LANES, 1, 3);
            acc[r][v] = vf_zero();
        }
    }
    for (int64_t k = 0; k < kc; k++) {
        const float *b = bp + k * WG_NR, *a = ap + k * WG_MR;
        vf_vec bv[WG_NV];
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) bv[v] = vf_load(b + v * VF_LANES);
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            vf_vec av = vf_bcast(a[r]);
#pragma GCC unroll 8
            for (int v = 0; v < nv; v++) acc[r][v] = vf_fma(av, bv[v], acc[r][v]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++) {
        float *c = C + r * ldc;
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) {
            if (tail && v == nv - 1)
                vf_store_masked(c + v * VF_LANES, m,
                                vf_add(vf_load_masked(c + v * VF_LANES, m), acc[r][v]));
            else
                vf_store(c + v * VF_LANES, vf_add(vf_load(c + v * VF_LANES), acc[r][v]));
        }
    }
}

/* wg_tile with mr (1..WG_MR) made a compile-time constant */
VF_INLINE void wg_rows(int mr, const int nv, const int tail, vf_mask m, float *C, int64_t ldc,
                       const float *ap, const float *bp, int64_t kc) {
    switch (mr) {
    case 6: wg_tile(6, nv, tail, m, C, ldc, ap, bp, kc); break;
    case 5: wg_tile(5, nv, tail, m, C, ldc, ap, bp, kc); break;
    case 4: wg_tile(4, nv, tail, m, C, ldc, ap, bp, kc); break;
    case 3: wg_tile(3, nv, tail, m, C, ldc, ap, bp, kc); break;
    case 2: wg_tile(2, nv, tail, m, C, ldc, ap, bp, kc); break;
    default: wg_tile(1, nv, tail, m, C, ldc, ap, bp, kc); break;
    }
}

/* A tile of width w (1..WG_NR) columns. */
static void wg_any(int mr, int64_t w, float *C, int64_t ldc, const float *ap, const float *bp,
                   int64_t kc) {
    if (w == WG_NR) {
        wg_rows(mr, WG_NV, 0, vf_tail_mask(VF_LANES), C, ldc, ap, bp, kc);
        return;
    }
    int nv = (int)((w + VF_LANES - 1) / VF_LANES);
    vf_mask m = vf_tail_mask((int)(w - (int64_t)(nv - 1) * VF_LANES));
    switch (nv) {
#if WG_NV >= 4
    case 4: wg_rows(mr, 4, 1, m, C, ldc, ap, bp, kc); break;
#endif
#if WG_NV >= 3
    case 3: wg_rows(mr, 3, 1, m, C, ldc, ap, bp, kc); break;
#endif
    case 2: wg_rows(mr, 2, 1, m, C, ldc, ap, bp, kc); break;
    default: wg_rows(mr, 1, 1, m, C, ldc, ap, bp, kc); break;
    }
}

void WG_NAME(float *C, int64_t ldc, const float *A, int64_t lda, const float *B, int64_t ldb,
             int64_t M, int64_t N, int64_t K) {
    float ap[FFN_WGRAD_CHUNK_FLOATS + WG_KC * WG_MR] __attribute__((aligned(64)));
    float bp[FFN_WGRAD_CHUNK_FLOATS] __attribute__((aligned(64)));
    for (int64_t k0 = 0; k0 < K; k0 += WG_KC) {
        int64_t kc = K - k0 < WG_KC ? K - k0 : WG_KC, nc_max = ffn_wgrad_chunk_cols(kc);
        /* rows of A packed at a time: a multiple of WG_MR that fits ap */
        int64_t group = (FFN_WGRAD_CHUNK_FLOATS / kc) / WG_MR * WG_MR;
        if (group < WG_MR) group = WG_MR;
        const float *Ak = A + k0 * lda, *Bk = B + k0 * ldb;
        const vf_mask m6 = vf_tail_mask(WG_MR);
        for (int64_t g0 = 0; g0 < M; g0 += group) {
            int64_t g1 = g0 + group < M ? g0 + group : M, rows = g1 - g0;
            /* A's rows [g0, g1) as blocks [block][k][WG_MR], the last
             * zero-padded: A is read once per K chunk */
            int64_t full = rows / WG_MR, rest = rows % WG_MR;
            for (int64_t k = 0; k < kc; k++) { /* one row of A, in order */
                const float *a = Ak + k * lda + g0;
                float *dst = ap + k * WG_MR;
                for (int64_t b = 0; b < full; b++, a += WG_MR, dst += kc * WG_MR)
                    vf_store_masked(dst, m6, vf_load_masked(a, m6)); /* (not memcpy: rep movs) */
                for (int r = 0; r < WG_MR && rest; r++) dst[r] = r < rest ? a[r] : 0.0f;
            }
            for (int64_t j0 = 0; j0 < N; j0 += nc_max) {
                int64_t nc = N - j0 < nc_max ? N - j0 : nc_max;
                /* B's chunk as panels [panel][k][WG_NR], the last
                 * zero-padded (whole rows copied: cheap next to the
                 * group's FMAs, and B stays in L2 between groups) */
                for (int64_t j = 0; j < nc; j += WG_NR) {
                    int64_t w = nc - j < WG_NR ? nc - j : WG_NR;
                    float *panel = bp + j * kc;
                    for (int64_t k = 0; k < kc; k++) {
                        const float *src = Bk + k * ldb + j0 + j;
                        float *dst = panel + k * WG_NR;
                        if (w == WG_NR) {
#pragma GCC unroll 8
                            for (int v = 0; v < WG_NV; v++)
                                vf_store(dst + v * VF_LANES, vf_load(src + v * VF_LANES));
                        } else {
                            memcpy(dst, src, (size_t)w * sizeof(float));
                            memset(dst + w, 0, (size_t)(WG_NR - w) * sizeof(float));
                        }
                    }
                }
                for (int64_t i0 = 0; i0 < rows; i0 += WG_MR) {
                    int mr = rows - i0 < WG_MR ? (int)(rows - i0) : WG_MR;
                    const float *ab = ap + (i0 / WG_MR) * kc * WG_MR;
                    float *c = C + (g0 + i0) * ldc + j0;
                    for (int64_t j = 0; j < nc; j += WG_NR) {
                        int64_t w = nc - j < WG_NR ? nc - j : WG_NR;
                        wg_any(mr, w, c + j, ldc, ab, bp + j * kc, kc);
                    }
                }
            }
        }
    }
}
