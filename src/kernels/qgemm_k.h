/* qgemm_k.h -- the row kernels of the super-block formats q2_K, q3_K,
 * q5_K and iq4_xs (qgemm_k_avx2.c, which also holds q4_K's and q6_K's,
 * declared in qgemm_impl.h; contract there), listed in
 * the type table (src/kernels/types.c).  They take the QG_ACT_Q256
 * activations (q int8, d per 256, bs the 16-sums), as q4_K and q6_K do.
 * Internal. */
#ifndef FFN_QGEMM_K_H
#define FFN_QGEMM_K_H

#include "kernels/qgemm_impl.h"

QG_ROWS_DECL(ffn_qg_rows_avx2_q2_K);
QG_ROWS_DECL(ffn_qg_rows_avx2_q3_K);
QG_ROWS_DECL(ffn_qg_rows_avx2_q5_K);
QG_ROWS_DECL(ffn_qg_rows_avx2_iq4_xs);

#endif /* FFN_QGEMM_K_H */
