/* qgemm.c -- matrix products with low-precision weights: the entry point,
 * the activation preparation every kernel shares, the scalar level, the
 * scalar oracle and the run-time choice of kernel (see qgemm.h).
 *
 * One call: the tokens go through in tiles (8 to 64 tokens, as many as
 * keep their prepared activations within half of L2); for each tile the
 * activations are prepared once (qgemm_impl.h: int8 blocks for
 * the integer formats, bf16 for bf16 weights), then the weight rows are
 * split across the context's threads in blocks of QG_ROW_BLOCK and every
 * row is streamed once for all the tile's tokens (the per-level kernels:
 * qgemm_avx512.c, qgemm_avx2.c, and ffn_qg_rows_scalar below).  At decode
 * sizes (n within one tile) every weight byte is read from memory once.
 * No output is split across threads, so results do not depend on the
 * thread count.
 *
 * Large n.  Three ways were measured on 2048×8192 weights up to n = 512
 * (the tables at qg_batch_table and qg_panel_table): (a) the weight
 * decoded to bf16 once and oneDNN's bf16 matmul (qgemm_batch.c; needs a
 * bf16 copy, made only by ffn_qweight_pack_batch), (b) the kernels here,
 * the weight re-streamed once per tile of 64 tokens, (c) the weight
 * decoded into bf16 panels inside each call (qgemm_panel_avx512.c).  (c)
 * matches or beats (a) without the copy, so ffn_qgemm takes (c) from the
 * panel crossover on, (b) below it, and (a) only for a packed weight. */
#include "kernels/qgemm_impl.h"
#include "kernels/types.h"
#include "kernels/qgemm_batch.h"
#include "kernels/qgemm_int8.h"
#include "kernels/kernels.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static int qgemm_type_ok(ffn_ggml_type t) { return ffn_type_computes(t); }

ffn_status ffn_qweight_init(ffn_qweight *w, ffn_ggml_type type, int64_t rows, int64_t cols,
                            const void *data) {
    if (!w || rows < 0 || cols < 0 || (!data && rows && cols))
        return ffn_error(FFN_ERR_INVALID_ARG, "qweight: bad arguments");
    if (!qgemm_type_ok(type))
        return ffn_error(FFN_ERR_UNSUPPORTED, "qweight: type %s is not one ffn computes with",
                             ffn_ggml_type_name(type));
    size_t rb;
    ffn_status st = ffn_ggml_row_size(type, cols, &rb);
    if (st) return st;
    *w = (ffn_qweight){.type = type, .rows = rows, .cols = cols, .row_bytes = rb,
                       .data = data, .packed = NULL};
    return FFN_OK;
}

void ffn_qweight_release(ffn_qweight *w) {
    if (!w) return;
    ffn_qgemm_bf16mm_free(w->packed);
    w->packed = NULL;
}

/* ---- large n: the crossover ---------------------------------------------------
 * From the table's batch_min_n rows of x on (src/kernels/types.c has the
 * measurements), ffn_qgemm hands a packed weight to the bf16 copy and
 * oneDNN's bf16 matmul (qgemm_batch.c) instead of the streaming kernels. */
int64_t ffn_qgemm_batch_min_n(ffn_ggml_type type) {
    const ffn_type_info *q = ffn_type_info_of(type);
    return q && q->batch_min_n ? q->batch_min_n : INT64_MAX;
}

ffn_status ffn_qweight_pack_batch(ffn_qweight *w) {
    if (!w || !qgemm_type_ok(w->type))
        return ffn_error(FFN_ERR_INVALID_ARG, "qweight pack: weight not set up by ffn_qweight_init");
    if (w->packed || ffn_qgemm_batch_min_n(w->type) == INT64_MAX || !w->rows || !w->cols ||
        ffn_simd() < FFN_SIMD_AVX512 || !ffn_qg_have_bf16())
        return FFN_OK;
    ffn_qgemm_bf16mm *m = NULL;
    ffn_status st = ffn_qgemm_bf16mm_create(w, &m);
    if (st) return st;
    w->packed = m;
    return FFN_OK;
}

size_t ffn_qweight_bytes(const ffn_qweight *w) { return (size_t)w->rows * w->row_bytes; }

/* ---- the scalar oracle ------------------------------------------------------ */

void ffn_qgemm_ref(const ffn_qweight *w, const float *x, int64_t ldx, int64_t n, float *y,
                   int64_t ldy, int accumulate) {
    float *row = malloc((size_t)(w->cols ? w->cols : 1) * sizeof *row);
    if (!row) abort(); /* the oracle of the tests; not on a hot path */
    for (int64_t r = 0; r < w->rows; r++) {
        (void)ffn_ggml_dequantize_row(w->type, w->data + (size_t)r * w->row_bytes, row, w->cols);
        for (int64_t i = 0; i < n; i++) {
            const float *xi = x + i * ldx;
            double s = 0;
            for (int64_t c = 0; c < w->cols; c++) s += (double)row[c] * xi[c];
            float *yo = y + i * ldy + r;
            *yo = accumulate ? *yo + (float)s : (float)s;
        }
    }
    free(row);
}

/* ---- CPU features beyond the level ------------------------------------------- */

/* (cpu.c detects them once) */
int ffn_qg_have_vnni(void) { return (ffn_cpu_features() & FFN_CPU_VNNI) != 0; }
int ffn_qg_have_bf16(void) { return (ffn_cpu_features() & FFN_CPU_BF16) != 0; }

/* The activation layout the kernel of `level` wants for `type`. */
static int qg_act_kind(ffn_ggml_type type, int level) {
    int act = QG_ACT_NONE;
    (void)ffn_type_rows(type, level, &act);
    return act;
}

/* ---- activation preparation --------------------------------------------------- */

/* Round to nearest, ties to even, for |v| <= 2^22 (the magic-number add). */
static inline int32_t qg_nearest(float v) {
    float s = v + 12582912.0f;
    int32_t bits;
    memcpy(&bits, &s, 4);
    return (bits & 0x007FFFFF) - 0x00400000;
}

/* One block of len values: q = round(x / d), d = amax / 127; returns d.
 * At the AVX2 and AVX-512 levels the vector versions (the same values). */
static float qg_quant_block(const float *x, int len, int8_t *q) {
    if (ffn_simd() >= FFN_SIMD_AVX512) return ffn_qg_quant_block_avx512(x, len, q);
    if (ffn_simd() >= FFN_SIMD_AVX2) return ffn_qg_quant_block_avx2(x, len, q);
    float amax = 0.0f;
    for (int j = 0; j < len; j++) {
        float a = x[j] < 0 ? -x[j] : x[j];
        amax = amax > a ? amax : a;
    }
    float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < len; j++) {
        int32_t v = qg_nearest(x[j] * id);
        q[j] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
    }
    return d;
}

/* Blocks per token of an int8 layout. */
static int64_t qg_blocks(int kind, int64_t cols) { return kind == QG_ACT_Q256 ? cols / 256 : cols / 32; }
/* Groups of four 32-blocks per token (QG_ACT_Q4X). */
static int64_t qg_groups(int64_t cols) { return (cols / 32 + 3) / 4; }

/* Bytes per token of an array of `bytes`: whole 64-byte lines, an odd count. */
static size_t qg_line_stride(size_t bytes) {
    size_t lines = (bytes + 63) / 64;
    return (lines | 1) * 64;
}

size_t ffn_qgemm_token_bytes(int kind, int64_t cols) {
    switch (kind) {
    case QG_ACT_Q32:
        return qg_line_stride((size_t)cols) + qg_line_stride((size_t)(cols / 32) * 4) +
               2 * qg_line_stride((size_t)(cols / 4) * 4);
    case QG_ACT_Q4X:
        return qg_line_stride((size_t)qg_groups(cols) * 128) + qg_line_stride((size_t)(cols / 32) * 4) +
               2 * qg_line_stride((size_t)qg_groups(cols) * 64);
    case QG_ACT_Q256:
        return qg_line_stride((size_t)cols) + qg_line_stride((size_t)(cols / 256) * 4) +
               qg_line_stride((size_t)(cols / 16) * 2);
    case QG_ACT_BF16: return qg_line_stride((size_t)cols * 2);
    default: return 0;
    }
}

/* Carve the arrays of a tile of n tokens out of ws (64-byte aligned). */
static void qg_carve(qg_acts *a, int kind, int64_t n, int64_t cols, void *ws) {
    uint8_t *p = (uint8_t *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);
#define QG_TAKE(ptr, stride, elem_bytes, len)                                                 \
    do {                                                                                       \
        size_t sb_ = qg_line_stride((size_t)(len) * (elem_bytes));                             \
        ptr = (void *)p;                                                                       \
        stride = (int64_t)(sb_ / (elem_bytes));                                                \
        p += sb_ * (size_t)n;                                                                  \
    } while (0)
    if (kind == QG_ACT_Q4X) {
        QG_TAKE(a->q, a->qs, 1, qg_groups(cols) * 128);
        QG_TAKE(a->d, a->ds, 4, cols / 32);
        QG_TAKE(a->c, a->cs, 4, qg_groups(cols) * 16);
        QG_TAKE(a->dl, a->cs, 4, qg_groups(cols) * 16);
    } else if (kind == QG_ACT_Q32 || kind == QG_ACT_Q256) {
        QG_TAKE(a->q, a->qs, 1, cols);
        QG_TAKE(a->d, a->ds, 4, qg_blocks(kind, cols));
        if (kind == QG_ACT_Q32) {
            QG_TAKE(a->c, a->cs, 4, cols / 4);
            QG_TAKE(a->dl, a->cs, 4, cols / 4);
        } else {
            QG_TAKE(a->bs, a->bss, 2, cols / 16);
        }
    } else if (kind == QG_ACT_BF16) {
        QG_TAKE(a->xb, a->xbs, 2, cols);
    }
#undef QG_TAKE
}

/* Prepare token t of the tile (x row xt). */
static void qg_prepare_token(const qg_acts *a, int kind, ffn_ggml_type type, int64_t t,
                             const float *xt) {
    int64_t cols = a->cols;
    if (kind == QG_ACT_BF16) {
        uint16_t *xb = a->xb + t * a->xbs;
        for (int64_t k = 0; k < cols; k++) xb[k] = ffn_f32_to_bf16(xt[k]);
        return;
    }
    if (kind == QG_ACT_NONE) return;
    if ((kind == QG_ACT_Q4X || (kind == QG_ACT_Q32 && ffn_type_info_of(type)->q32_offset == 128)) &&
        ffn_simd() >= FFN_SIMD_AVX512 && ffn_qg_have_vnni()) {
        ffn_qg_prepare_avx512(xt, cols, kind == QG_ACT_Q4X, a->q + t * a->qs, a->d + t * a->ds,
                              a->c + t * a->cs, a->dl + t * a->cs);
        return;
    }
    if (kind == QG_ACT_Q4X) { /* the reference of ffn_qg_prepare_avx512 */
        int8_t *q = a->q + t * a->qs, buf[32];
        float *d = a->d + t * a->ds, *dl = a->dl + t * a->cs;
        int32_t *c = a->c + t * a->cs;
        const int64_t nblk = cols / 32, ng = qg_groups(cols);
        memset(q + (nblk / 4) * 128, 0, (size_t)(ng - nblk / 4) * 128);
        memset(c + (nblk / 4) * 16, 0, (size_t)(ng - nblk / 4) * 16 * 4);
        memset(dl + (nblk / 4) * 16, 0, (size_t)(ng - nblk / 4) * 16 * 4);
        for (int64_t b = 0; b < nblk; b++) {
            d[b] = qg_quant_block(xt + b * 32, 32, buf);
            int8_t *g = q + (b / 4) * 128 + (b % 4) * 16;
            memcpy(g, buf, 16);
            memcpy(g + 64, buf + 16, 16);
            for (int i = 0; i < 4; i++) {
                int64_t l = (b / 4) * 16 + (b % 4) * 4 + i;
                c[l] = -8 * (buf[4 * i] + buf[4 * i + 1] + buf[4 * i + 2] + buf[4 * i + 3] +
                             buf[16 + 4 * i] + buf[17 + 4 * i] + buf[18 + 4 * i] + buf[19 + 4 * i]);
                dl[l] = d[b];
            }
        }
        return;
    }
    int bl = kind == QG_ACT_Q32 ? 32 : 256;
    int8_t *q = a->q + t * a->qs;
    float *d = a->d + t * a->ds;
    for (int64_t b = 0; b < cols / bl; b++) d[b] = qg_quant_block(xt + b * bl, bl, q + b * bl);
    if (kind == QG_ACT_Q32) {
        int32_t k = ffn_type_info_of(type)->q32_offset, *c = a->c + t * a->cs;
        float *dl = a->dl + t * a->cs;
        for (int64_t i = 0; i < cols / 4; i++) {
            c[i] = -k * (q[4 * i] + q[4 * i + 1] + q[4 * i + 2] + q[4 * i + 3]);
            dl[i] = d[i / 8];
        }
    } else {
        int16_t *bs = a->bs + t * a->bss;
        for (int64_t i = 0; i < cols / 16; i++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += q[16 * i + j];
            bs[i] = (int16_t)s;
        }
    }
}

/* ---- the scalar level ---------------------------------------------------------- */

/* Rows decoded 256 values at a time (a multiple of every block size) with
 * ggml's formulas, dot products in float, 16 tokens per pass over a row. */
void ffn_qg_rows_scalar(const ffn_qweight *w, const qg_acts *a, int64_t r0, int64_t r1, float *y,
                        int64_t ldy, int accumulate) {
    enum { CHUNK = 256, TOK = 16 };
    float buf[CHUNK];
    int64_t cols = w->cols;
    size_t bytes_per_chunk = 0;
    (void)ffn_ggml_row_size(w->type, CHUNK, &bytes_per_chunk);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w->data + (size_t)r * w->row_bytes;
        for (int64_t t0 = 0; t0 < a->n; t0 += TOK) {
            int T = a->n - t0 < TOK ? (int)(a->n - t0) : TOK;
            float acc[TOK] = {0};
            for (int64_t k = 0; k < cols; k += CHUNK) {
                int len = cols - k < CHUNK ? (int)(cols - k) : CHUNK;
                (void)ffn_ggml_dequantize_row(w->type, row + (size_t)(k / CHUNK) * bytes_per_chunk,
                                              buf, len);
                for (int t = 0; t < T; t++) {
                    const float *xt = a->x + (t0 + t) * a->ldx + k;
                    float s = 0;
                    for (int j = 0; j < len; j++) s += buf[j] * xt[j];
                    acc[t] += s;
                }
            }
            for (int t = 0; t < T; t++) {
                float *o = y + (t0 + t) * ldy + r;
                *o = accumulate ? *o + acc[t] : acc[t];
            }
        }
    }
}

/* ---- workspace ------------------------------------------------------------------ */

/* Tokens prepared at once: at most QG_TILE, and no more than keep their
 * prepared activations (about 3 bytes per value for q8_0/q4_0, 1.1 for the
 * K-quants, 2 for bf16) within QG_TILE_BYTES, half of a 1 MiB L2, while the
 * rows stream past: measured on a 512 × 4096 q4_0 weight, 1 thread, CPU
 * time, 8 / 16 / 32 / 64 tokens in one tile took 0.54 / 1.01 / 2.24 /
 * 5.66 ms, the step to 64 (786 KB of activations) 2.5× where the others
 * double.  Past one tile the weights are read once per tile. */
enum { QG_TILE = 64, QG_ROW_BLOCK = 16 };
#define QG_TILE_BYTES ((size_t)512 << 10)

static int64_t qg_tile(int kind, int64_t cols) {
    size_t tb = ffn_qgemm_token_bytes(kind, cols);
    if (!tb) return QG_TILE;
    int64_t t = (int64_t)(QG_TILE_BYTES / tb) & ~(int64_t)7;
    return t < 8 ? 8 : t > QG_TILE ? QG_TILE : t;
}

/* Below this many multiply-adds one thread beats a parallel region. */
#define QG_PAR_MIN_MACS (INT64_C(1) << 18)

static size_t qg_ws_bytes(const ffn_qweight *w, int level, int64_t n) {
    int kind = qg_act_kind(w->type, level);
    int64_t tile = qg_tile(kind, w->cols);
    if (n < tile) tile = n;
    return kind == QG_ACT_NONE || tile <= 0 ? 0 : (size_t)tile * ffn_qgemm_token_bytes(kind, w->cols) + 64;
}

size_t ffn_qgemm_workspace_size(const ffn_qweight *w, int64_t n) {
    return w ? qg_ws_bytes(w, ffn_simd(), n) : 0;
}

/* The calling thread's own workspace for ffn_qgemm: grown when a call needs
 * more, kept for the next call (so steady-state calls never allocate),
 * freed when the thread exits. */
enum { QG_WS_SLOTS = 2 }; /* 0: activations and panels; 1: ffn_qgemm_glu's g and u at prompt sizes */
static pthread_key_t qg_key[QG_WS_SLOTS];
static pthread_once_t qg_once = PTHREAD_ONCE_INIT;
typedef struct qg_tls {
    void *p;
    size_t cap;
} qg_tls;
static void qg_tls_free(void *v) {
    qg_tls *t = v;
    if (t) ffn_free_aligned(t->p);
    free(t);
}
static void qg_key_make(void) {
    for (int i = 0; i < QG_WS_SLOTS; i++) (void)pthread_key_create(&qg_key[i], qg_tls_free);
}

static void *qg_thread_ws_slot(int slot, size_t bytes) {
    if (pthread_once(&qg_once, qg_key_make)) return NULL;
    qg_tls *t = pthread_getspecific(qg_key[slot]);
    if (!t) {
        if (!(t = calloc(1, sizeof *t))) return NULL;
        if (pthread_setspecific(qg_key[slot], t)) {
            free(t);
            return NULL;
        }
    }
    if (t->cap < bytes) {
        void *p = ffn_malloc_aligned(bytes);
        if (!p) return NULL;
        ffn_free_aligned(t->p);
        t->p = p;
        t->cap = bytes;
    }
    return t->p;
}

static void *qg_thread_ws(size_t bytes) { return qg_thread_ws_slot(0, bytes); }

/* ---- the entry points -------------------------------------------------------------- */

/* Every fp16 value widened, for the AVX2 kernels' per-block scales (one
 * load where vcvtph2ps and its inserts took four operations of a q4_0
 * block's twelve); filled on the first product. */
float ffn_qg_f16_tab[65536];
static pthread_once_t qg_tab_once = PTHREAD_ONCE_INIT;
static void qg_tab_fill(void) {
    for (uint32_t h = 0; h < 65536; h++) ffn_qg_f16_tab[h] = ffn_f16_to_f32((uint16_t)h);
}

static qg_rows_fn qg_rows_for(ffn_ggml_type type, int level) {
    pthread_once(&qg_tab_once, qg_tab_fill);
    return ffn_type_rows(type, level, NULL);
}

static ffn_status qg_check(const ffn_qweight *w, const float *x, int64_t ldx, int64_t n,
                           const float *y, int64_t ldy) {
    if (!w || n < 0 || (n && (!x || !y)))
        return ffn_error(FFN_ERR_INVALID_ARG, "qgemm: NULL weight, x or y");
    if (n > 1 && ldx < w->cols)
        return ffn_error(FFN_ERR_INVALID_ARG, "qgemm: ldx %lld is below cols %lld",
                         (long long)ldx, (long long)w->cols);
    if (n > 1 && ldy < w->rows)
        return ffn_error(FFN_ERR_INVALID_ARG, "qgemm: ldy %lld is below rows %lld",
                         (long long)ldy, (long long)w->rows);
    if (!qgemm_type_ok(w->type) || (w->rows && w->cols && !w->data))
        return ffn_error(FFN_ERR_INVALID_ARG, "qgemm: weight not set up by ffn_qweight_init");
    return FFN_OK;
}

static ffn_status qg_run(const ffn_ctx *ctx, int level, const ffn_qweight *w, const float *x,
                         int64_t ldx, int64_t n, float *y, int64_t ldy, int accumulate, void *ws,
                         size_t ws_bytes) {
    ffn_status st = qg_check(w, x, ldx, n, y, ldy);
    if (st) return st;
    if (!n || !w->rows) return FFN_OK;
    if (!w->cols) { /* an empty sum */
        if (!accumulate)
            for (int64_t t = 0; t < n; t++) memset(y + t * ldy, 0, (size_t)w->rows * sizeof *y);
        return FFN_OK;
    }
    size_t need = qg_ws_bytes(w, level, n);
    if (!ws && need) {
        if (!(ws = qg_thread_ws(need)))
            return ffn_error(FFN_ERR_NOMEM, "qgemm: out of memory (%zu bytes of activations)", need);
        ws_bytes = need;
    }
    if (ws_bytes < need)
        return ffn_error(FFN_ERR_WORKSPACE, "qgemm: workspace of %zu bytes, %zu needed", ws_bytes,
                         need);
    int kind = qg_act_kind(w->type, level);
    qg_rows_fn rows_fn = qg_rows_for(w->type, level);
    ffn_ctx_enter(ctx);
    int64_t nb = (w->rows + QG_ROW_BLOCK - 1) / QG_ROW_BLOCK, tile = qg_tile(kind, w->cols);
    for (int64_t t0 = 0; t0 < n; t0 += tile) {
        int64_t T = n - t0 < tile ? n - t0 : tile;
        qg_acts a = {.n = T, .cols = w->cols, .x = x + t0 * ldx, .ldx = ldx};
        if (kind != QG_ACT_NONE) qg_carve(&a, kind, T, w->cols, ws);
        float *yt = y + t0 * ldy;
        int par = T * w->rows * w->cols >= QG_PAR_MIN_MACS && nb > 1;
#pragma omp parallel if (par)
        {
            if (kind != QG_ACT_NONE) {
#pragma omp for schedule(static)
                for (int64_t t = 0; t < T; t++) qg_prepare_token(&a, kind, w->type, t, a.x + t * ldx);
            }
#pragma omp for schedule(static)
            for (int64_t b = 0; b < nb; b++) {
                int64_t r0 = b * QG_ROW_BLOCK, r1 = r0 + QG_ROW_BLOCK < w->rows ? r0 + QG_ROW_BLOCK : w->rows;
                rows_fn(w, &a, r0, r1, yt, ldy, accumulate);
            }
        }
    }
    return FFN_OK;
}

/* ---- the prompt paths ----------------------------------------------------------------
 * Three ways to run a prompt's n rows of x at once, each with its own
 * workspace: the bf16 panels, the fp32 panels and the int8 products. */
enum { QG_PATH_BF16, QG_PATH_F32, QG_PATH_INT8 };

static int qg_bf16_panels(void) { return ffn_simd() >= FFN_SIMD_AVX512 && ffn_qg_have_bf16(); }

/* The three entry points: the shapes checked, the path refused where this
 * CPU or the type lacks it (the bf16 panels need AVX512_BF16 and take no
 * f32, the others AVX2, int8 a type it unpacks), nothing to do for an
 * empty product, the plain kernels for cols 0, else the path's workspace
 * (from the per-thread cache) and the path itself. */
static ffn_status qg_prompt_path(const ffn_ctx *ctx, int path, const ffn_qweight *w,
                                 const float *x, int64_t ldx, int64_t n, float *y, int64_t ldy,
                                 int accumulate) {
    static const char *const what[] = {"qgemm panels", "qgemm fp32 panels",
                                       "qgemm int8 products"};
    ffn_status st = qg_check(w, x, ldx, n, y, ldy);
    if (st) return st;
    const char *name = ffn_ggml_type_name(w->type);
    if (path == QG_PATH_BF16 && (!qg_bf16_panels() || w->type == FFN_GGML_TYPE_F32))
        return ffn_error(FFN_ERR_UNSUPPORTED, "%s: %s weights on a CPU %s AVX512_BF16", what[path], name,
                         qg_bf16_panels() ? "with" : "without");
    if (path != QG_PATH_BF16 &&
        (ffn_simd() < FFN_SIMD_AVX2 || (path == QG_PATH_INT8 && !ffn_qg_int8_has(w->type))))
        return ffn_error(FFN_ERR_UNSUPPORTED, "%s: %s weights at SIMD level %s%s", what[path], name,
                         ffn_simd_level(),
                         ffn_simd() < FFN_SIMD_AVX2 ? " (AVX2 needed)" : " (no int8 unpacking of the type)");
    if (!n || !w->rows) return FFN_OK;
    if (!w->cols) return qg_run(ctx, ffn_simd(), w, x, ldx, n, y, ldy, accumulate, NULL, 0);
    ffn_ctx_enter(ctx);
    const int threads = ffn_ctx_threads(ctx);
    const size_t need = path == QG_PATH_BF16  ? ffn_qg_panel_ws_bytes(w, n, threads)
                        : path == QG_PATH_F32 ? ffn_qg_panel_avx2_ws_bytes(threads)
                                              : ffn_qg_int8_ws_bytes(w, n, threads);
    void *ws = qg_thread_ws(need);
    if (!ws) return ffn_error(FFN_ERR_NOMEM, "%s: out of memory (%zu bytes)", what[path], need);
    if (path == QG_PATH_BF16) ffn_qg_panel_run(w, x, ldx, n, y, ldy, accumulate, ws);
    else if (path == QG_PATH_F32) ffn_qg_panel_avx2_run(w, x, ldx, n, y, ldy, accumulate, ws);
    else ffn_qg_int8_run(w, x, ldx, n, y, ldy, accumulate, ws);
    return FFN_OK;
}

/* ---- prompt sizes: the bf16 panels ------------------------------------------------
 * From the table's panel_min_n rows of x on (src/kernels/types.c has the
 * measurements and why f16 has none), ffn_qgemm decodes the weight into
 * bf16 panels inside the call (qgemm_panel_avx512.c) instead of running
 * the row kernels. */
int64_t ffn_qgemm_panel_min_n(ffn_ggml_type type) {
    if (ffn_simd() < FFN_SIMD_AVX512 || !ffn_qg_have_bf16()) return INT64_MAX;
    const ffn_type_info *q = ffn_type_info_of(type);
    return q && q->panel_min_n ? q->panel_min_n : INT64_MAX;
}

ffn_status ffn_qgemm_panel(const ffn_ctx *ctx, const ffn_qweight *w, const float *x, int64_t ldx,
                           int64_t n, float *y, int64_t ldy, int accumulate) {
    return qg_prompt_path(ctx, QG_PATH_BF16, w, x, ldx, n, y, ldy, accumulate);
}

/* ---- prompt sizes without AVX512_BF16: the fp32 panels -----------------------------
 * From the table's avx2_panel_min_n rows of x on (types.c has the
 * measurements), where the bf16 panels do not run, ffn_qgemm decodes the
 * weight into fp32 panels inside the call (qgemm_panel_avx2.c). */
int64_t ffn_qgemm_panel_f32_min_n(ffn_ggml_type type) {
    if (ffn_simd() < FFN_SIMD_AVX2 || qg_bf16_panels()) return INT64_MAX;
    const ffn_type_info *q = ffn_type_info_of(type);
    return q && q->avx2_panel_min_n && q->decode ? q->avx2_panel_min_n : INT64_MAX;
}

ffn_status ffn_qgemm_panel_f32(const ffn_ctx *ctx, const ffn_qweight *w, const float *x,
                               int64_t ldx, int64_t n, float *y, int64_t ldy, int accumulate) {
    return qg_prompt_path(ctx, QG_PATH_F32, w, x, ldx, n, y, ldy, accumulate);
}

/* ---- prompt sizes without AVX512_BF16: the int8 products --------------------------
 * From the table's avx2_int8_min_n rows of x on (types.c has the
 * measurements), where the bf16 panels do not run, ffn_qgemm quantizes the
 * activations once and multiplies them with the weight's blocks unpacked
 * to int8 inside the call (qgemm_int8_avx2.c); it comes before the fp32
 * panels where both are set. */
int64_t ffn_qgemm_int8_min_n(ffn_ggml_type type) {
    if (ffn_simd() < FFN_SIMD_AVX2 || qg_bf16_panels() || !ffn_qg_int8_has(type)) return INT64_MAX;
    const ffn_type_info *q = ffn_type_info_of(type);
    return q && q->avx2_int8_min_n ? q->avx2_int8_min_n : INT64_MAX;
}

ffn_status ffn_qgemm_int8(const ffn_ctx *ctx, const ffn_qweight *w, const float *x, int64_t ldx,
                          int64_t n, float *y, int64_t ldy, int accumulate) {
    return qg_prompt_path(ctx, QG_PATH_INT8, w, x, ldx, n, y, ldy, accumulate);
}

/* n from which ffn_qgemm leaves the row kernels for a prompt path. */
static int64_t qg_prompt_min_n(ffn_ggml_type type) {
    int64_t a = ffn_qgemm_panel_min_n(type), b = ffn_qgemm_panel_f32_min_n(type);
    int64_t c = ffn_qgemm_int8_min_n(type);
    a = a < b ? a : b;
    return a < c ? a : c;
}

ffn_status ffn_qgemm(const ffn_ctx *ctx, const ffn_qweight *w, const float *x, int64_t ldx,
                     int64_t n, float *y, int64_t ldy, int accumulate) {
    if (w && w->packed && n >= ffn_qgemm_batch_min_n(w->type)) {
        ffn_status st = qg_check(w, x, ldx, n, y, ldy);
        return st ? st : ffn_qgemm_bf16mm_run(w->packed, ctx, x, ldx, n, y, ldy, accumulate);
    }
    if (w && n >= ffn_qgemm_panel_min_n(w->type))
        return ffn_qgemm_panel(ctx, w, x, ldx, n, y, ldy, accumulate);
    if (w && n >= ffn_qgemm_int8_min_n(w->type))
        return ffn_qgemm_int8(ctx, w, x, ldx, n, y, ldy, accumulate);
    if (w && n >= ffn_qgemm_panel_f32_min_n(w->type))
        return ffn_qgemm_panel_f32(ctx, w, x, ldx, n, y, ldy, accumulate);
    return qg_run(ctx, ffn_simd(), w, x, ldx, n, y, ldy, accumulate, NULL, 0);
}

ffn_status ffn_qgemm_ws(const ffn_ctx *ctx, const ffn_qweight *w, const float *x, int64_t ldx,
                        int64_t n, float *y, int64_t ldy, int accumulate, void *ws,
                        size_t ws_bytes) {
    if (!ws && ffn_qgemm_workspace_size(w, n))
        return ffn_error(FFN_ERR_WORKSPACE, "qgemm: no workspace given");
    return qg_run(ctx, ffn_simd(), w, x, ldx, n, y, ldy, accumulate, ws, ws_bytes);
}

ffn_status ffn_qgemm_at_level(const ffn_ctx *ctx, int level, const ffn_qweight *w, const float *x,
                              int64_t ldx, int64_t n, float *y, int64_t ldy, int accumulate) {
    if (level < FFN_SIMD_SCALAR || level > ffn_simd())
        return ffn_error(FFN_ERR_UNSUPPORTED, "qgemm: SIMD level %d is above this CPU's %s",
                         level, ffn_simd_level());
    return qg_run(ctx, level, w, x, ldx, n, y, ldy, accumulate, NULL, 0);
}

ffn_status ffn_ggml_matmul(const ffn_ctx *ctx, ffn_ggml_type type, int64_t rows, int64_t cols,
                           const void *w, const float *x, int64_t n, float *y) {
    ffn_qweight q;
    ffn_status st = ffn_qweight_init(&q, type, rows, cols, w);
    if (st) return st;
    return ffn_qgemm(ctx, &q, x, cols, n, y, rows, 0);
}

/* ---- the fused gated projection ------------------------------------------------
 * Both weights' activations are prepared once per tile (one set when the
 * types agree), then each block of 16 rows computes its gate and up
 * outputs for the tile's tokens into a small stack buffer and applies the
 * GLU epilogue while they are in cache. */
enum { QG_GLU_MAX_TILE = 64 };

ffn_status ffn_qgemm_glu(const ffn_ctx *ctx, ffn_act act, const ffn_qweight *gate,
                         const ffn_qweight *up, const float *x, int64_t ldx, int64_t n, float *h,
                         int64_t ldh, float *g_out, float *u_out) {
    ffn_status st = qg_check(gate, x, ldx, n, h, ldh);
    if (!st) st = qg_check(up, x, ldx, n, h, ldh);
    if (st) return st;
    if (gate->rows != up->rows || gate->cols != up->cols)
        return ffn_error(FFN_ERR_SHAPE, "qgemm glu: gate (%lld, %lld) and up (%lld, %lld) differ",
                         (long long)gate->rows, (long long)gate->cols, (long long)up->rows,
                         (long long)up->cols);
    if (!n || !gate->rows) return FFN_OK;
    if (n >= qg_prompt_min_n(gate->type) || n >= qg_prompt_min_n(up->type)) {
        /* prompt sizes: each product as ffn_qgemm computes it (the panels for
         * a weight past its crossover), then the epilogue */
        int64_t ld = ldh;
        float *g = g_out, *u = u_out;
        if (!g || !u) {
            size_t need = (size_t)(2 * n * gate->rows) * sizeof(float);
            float *tmp = qg_thread_ws_slot(1, need);
            if (!tmp) return ffn_error(FFN_ERR_NOMEM, "qgemm glu: out of memory (%zu bytes)", need);
            g = tmp, u = tmp + n * gate->rows, ld = gate->rows;
        }
        if ((st = ffn_qgemm(ctx, gate, x, ldx, n, g, ld, 0)) || (st = ffn_qgemm(ctx, up, x, ldx, n, u, ld, 0)))
            return st;
        ffn_ctx_enter(ctx);
#pragma omp parallel for schedule(static) if (n * gate->rows >= 65536)
        for (int64_t t = 0; t < n; t++) ffn_glu_fwd(act, h + t * ldh, g + t * ld, u + t * ld, gate->rows);
        return FFN_OK;
    }
    const int level = ffn_simd();
    const int64_t rows = gate->rows, cols = gate->cols;
    const int same = gate->type == up->type;
    int kg = qg_act_kind(gate->type, level), ku = qg_act_kind(up->type, level);
    int64_t tile = qg_tile(kg, cols), tu = qg_tile(ku, cols);
    if (tu < tile) tile = tu;
    if (tile > QG_GLU_MAX_TILE) tile = QG_GLU_MAX_TILE;
    size_t need_g = kg == QG_ACT_NONE ? 0 : (size_t)tile * ffn_qgemm_token_bytes(kg, cols) + 64;
    size_t need_u = same || ku == QG_ACT_NONE ? 0 : (size_t)tile * ffn_qgemm_token_bytes(ku, cols) + 64;
    uint8_t *ws = NULL;
    if (need_g + need_u && !(ws = qg_thread_ws(need_g + need_u)))
        return ffn_error(FFN_ERR_NOMEM, "qgemm glu: out of memory (%zu bytes of activations)",
                         need_g + need_u);
    qg_rows_fn rows_g = qg_rows_for(gate->type, level), rows_u = qg_rows_for(up->type, level);
    ffn_ctx_enter(ctx);
    int64_t nb = (rows + QG_ROW_BLOCK - 1) / QG_ROW_BLOCK;
    for (int64_t t0 = 0; t0 < n; t0 += tile) {
        int64_t T = n - t0 < tile ? n - t0 : tile;
        qg_acts ag = {.n = T, .cols = cols, .x = x + t0 * ldx, .ldx = ldx}, au = ag;
        if (kg != QG_ACT_NONE) qg_carve(&ag, kg, T, cols, ws);
        if (same) au = ag;
        else if (ku != QG_ACT_NONE) qg_carve(&au, ku, T, cols, ws + need_g);
        int par = 2 * T * rows * cols >= QG_PAR_MIN_MACS && nb > 1;
#pragma omp parallel if (par)
        {
            if (kg != QG_ACT_NONE || (!same && ku != QG_ACT_NONE)) {
#pragma omp for schedule(static)
                for (int64_t t = 0; t < T; t++) {
                    if (kg != QG_ACT_NONE) qg_prepare_token(&ag, kg, gate->type, t, ag.x + t * ldx);
                    if (!same && ku != QG_ACT_NONE) qg_prepare_token(&au, ku, up->type, t, au.x + t * ldx);
                }
            }
#pragma omp for schedule(static)
            for (int64_t b = 0; b < nb; b++) {
                float g[QG_GLU_MAX_TILE * QG_ROW_BLOCK], u[QG_GLU_MAX_TILE * QG_ROW_BLOCK];
                int64_t r0 = b * QG_ROW_BLOCK, r1 = r0 + QG_ROW_BLOCK < rows ? r0 + QG_ROW_BLOCK : rows;
                /* rows r0..r1 as weights of their own: outputs at g[t·QG_ROW_BLOCK + r − r0] */
                ffn_qweight gb = *gate, ub = *up;
                gb.data += (size_t)r0 * gate->row_bytes, gb.rows = r1 - r0;
                ub.data += (size_t)r0 * up->row_bytes, ub.rows = r1 - r0;
                rows_g(&gb, &ag, 0, r1 - r0, g, QG_ROW_BLOCK, 0);
                rows_u(&ub, &au, 0, r1 - r0, u, QG_ROW_BLOCK, 0);
                for (int64_t t = 0; t < T; t++) {
                    const float *gt = g + t * QG_ROW_BLOCK, *ut = u + t * QG_ROW_BLOCK;
                    int64_t o = (t0 + t) * ldh + r0, len = r1 - r0;
                    if (g_out) memcpy(g_out + o, gt, (size_t)len * sizeof *gt);
                    if (u_out) memcpy(u_out + o, ut, (size_t)len * sizeof *ut);
                    ffn_glu_fwd(act, h + o, gt, ut, len);
                }
            }
        }
    }
    return FFN_OK;
}
