/* common.h -- internal helpers shared by every part of the library:
 * error recording, overflow-checked size arithmetic, the context struct,
 * aligned allocation.  Not installed. */
#ifndef FFN_COMMON_H
#define FFN_COMMON_H

#include "ffn/core.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Record a formatted message for ffn_last_error() and return `status`, so
 * that a failure reads:  return ffn_error(FFN_ERR_CONFIG, "%s: ...", ...); */
ffn_status ffn_error(ffn_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prefix the current message with "prefix: " (to add a file name as an
 * error travels up).  Returns `status`. */
ffn_status ffn_error_prefix(ffn_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Overflow-checked 64-bit arithmetic: return 0 on success, 1 on overflow. */
static inline int ffn_mul_i64(int64_t a, int64_t b, int64_t *out) {
    return __builtin_mul_overflow(a, b, out);
}
static inline int ffn_add_i64(int64_t a, int64_t b, int64_t *out) {
    return __builtin_add_overflow(a, b, out);
}
static inline int ffn_mul_size(size_t a, size_t b, size_t *out) {
    return __builtin_mul_overflow(a, b, out);
}
static inline int ffn_add_size(size_t a, size_t b, size_t *out) {
    return __builtin_add_overflow(a, b, out);
}

/* Enum -> name through a table indexed by the enum's values (designated
 * initialisers, so the table reads as a list of pairs):
 *     static const char *const names[] = {[FFN_X_A] = "a", [FFN_X_B] = "b"};
 *     return FFN_ENUM_NAME(names, value, "?");
 * Values outside the table, or without an entry, give `fallback`. */
static inline const char *ffn_enum_name(const char *const *names, size_t n, int64_t value,
                                        const char *fallback) {
    return value >= 0 && (uint64_t)value < n && names[value] ? names[value] : fallback;
}
#define FFN_ENUM_NAME(names, value, fallback)                                                \
    ffn_enum_name((names), sizeof(names) / sizeof((names)[0]), (int64_t)(value), (fallback))

/* Room for item n of a growing array of `elem`-byte items with capacity
 * *cap: when n == *cap the array is reallocated to twice as many (`first`
 * when empty).  Returns the array, maybe moved, or NULL when out of memory
 * (p is then still valid and *cap unchanged). */
static inline void *ffn_grow(void *p, int64_t n, int64_t *cap, size_t elem, int64_t first) {
    if (n < *cap) return p;
    int64_t c;
    size_t bytes;
    if (ffn_mul_i64(*cap ? *cap : first, *cap ? 2 : 1, &c) || ffn_mul_size((size_t)c, elem, &bytes))
        return NULL;
    void *q = realloc(p, bytes);
    if (q) *cap = c;
    return q;
}

/* Byte strings in order: by their bytes, then the shorter first (memcmp's
 * sign convention). */
static inline int ffn_bytes_cmp(const char *a, size_t na, const char *b, size_t nb) {
    size_t n = na < nb ? na : nb;
    int c = n ? memcmp(a, b, n) : 0;
    if (c) return c;
    return na < nb ? -1 : na > nb ? 1 : 0;
}

/* n float64 values stored at src (little-endian, any alignment) as floats:
 * the F64 case of the file readers. */
static inline void ffn_f64_bytes_to_f32(float *dst, const void *src, size_t n) {
    const unsigned char *b = src;
    for (size_t i = 0; i < n; i++) {
        double x;
        memcpy(&x, b + 8 * i, 8);
        dst[i] = (float)x;
    }
}

/* free() every pointer of a list, in order: FFN_FREE_ALL(t->a, t->b, t).
 * NULL entries are fine (free(NULL) is a no-op). */
static inline void ffn_free_each(void *const *ptrs, size_t n) {
    for (size_t i = 0; i < n; i++) free(ptrs[i]);
}
#define FFN_FREE_ALL(...) \
    ffn_free_each((void *const[]){__VA_ARGS__}, sizeof((void *const[]){__VA_ARGS__}) / sizeof(void *))

/* 64-byte aligned allocation (a cache line, an AVX-512 vector).  Sizes are
 * rounded up internally; ffn_free_aligned(NULL) is a no-op. */
void *ffn_malloc_aligned(size_t bytes);
void ffn_free_aligned(void *p);

/* Round up to a multiple of 64 bytes (workspace carving). */
static inline size_t ffn_align64(size_t n) { return (n + 63) & ~(size_t)63; }

struct ffn_ctx {
    int n_threads;
};

/* Zero n floats at p and give their whole pages back to the system (for
 * private anonymous memory: those pages read 0 from then on and cost
 * nothing until written); the partial pages at the ends are zeroed. */
void ffn_release_floats(float *p, int64_t n);

/* Make OpenMP (ours and oneDNN's) use the context's thread count. */
void ffn_ctx_enter(const ffn_ctx *ctx);

#endif /* FFN_COMMON_H */
