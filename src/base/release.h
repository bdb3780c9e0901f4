/* release.h -- giving floats' pages back to the system, inline so that
 * libffn_dist (which links against libffn's public API only) shares
 * libffn's ffn_release_floats (base/common.h).  Not installed. */
#ifndef FFN_RELEASE_H
#define FFN_RELEASE_H

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Zero n floats at p and give their whole pages back to the system (for
 * private anonymous memory: those pages read 0 from then on and cost
 * nothing until written); the partial pages at the ends are zeroed. */
static inline void ffn_give_back_floats(float *p, int64_t n) {
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = (uintptr_t)p, b = (uintptr_t)(p + n);
    const uintptr_t a_up = (a + pg - 1) & ~(pg - 1), b_down = b & ~(pg - 1);
    if (a_up >= b_down) {
        memset(p, 0, (size_t)n * sizeof *p);
        return;
    }
    memset(p, 0, a_up - a);
    memset((void *)b_down, 0, b - b_down);
    if (madvise((void *)a_up, b_down - a_up, MADV_DONTNEED) != 0)
        memset((void *)a_up, 0, b_down - a_up); /* the same values, resident */
}

#endif /* FFN_RELEASE_H */
