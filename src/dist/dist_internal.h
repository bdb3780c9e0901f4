/* dist_internal.h -- what the files of libffn_dist share.  Internal; not
 * installed.  (libffn_dist uses libffn's public API only, so this header
 * stays within src/dist.) */
#ifndef FFN_DIST_INTERNAL_H
#define FFN_DIST_INTERNAL_H

#include "ffn/dist.h"

#include <mpi.h>
#include <stdint.h>

/* The one uneven split of n units over P ranks: n / P each, the first
 * n % P ranks one more; rank k holds [*first, *first + *count). */
static inline void dist_split(int64_t n, int64_t P, int64_t k, int64_t *first, int64_t *count) {
    int64_t base = n / P, extra = n % P;
    *first = k * base + (k < extra ? k : extra);
    *count = base + (k < extra);
}

/* The communicator of group g (owned by d; never freed by the caller). */
MPI_Comm dist_comm(const ffn_dist *d, ffn_dist_group g);

/* An MPI return code as an ffn_status with MPI's message after `what`. */
ffn_status dist_mpi_error(int rc, const char *what);

#endif /* FFN_DIST_INTERNAL_H */
