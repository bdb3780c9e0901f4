/* train_profile.h -- `ffn train --profile`: the step profile
 * (include/ffn/profile.h) as a table on stderr and as a JSON object. */
#ifndef FFN_TOOLS_TRAIN_PROFILE_H
#define FFN_TOOLS_TRAIN_PROFILE_H

#include "ffn.h"
#include "ffn/dist.h"

#include <stdio.h>

/* The table: seconds per step and share of the step time per part, their
 * sum against the measured step time, and the products' GFLOP/s against
 * peak_gflops (the FMA peak, 0 when unknown). */
void train_profile_table(FILE *f, const ffn_profile *p, double peak_gflops, int threads);
/* `"profile": {...}` (no leading comma) for the --json summary. */
void train_profile_json(FILE *f, const ffn_profile *p, double peak_gflops, int threads);

/* Several processes: the gradient sums of this rank per step -- compute
 * (the step but the time blocked in the sums), communication (the first
 * bucket's start to the last's end), waiting (blocked after the backward)
 * and the share of the communication hidden, 1 - waiting / communication
 * (0 without the overlap, where the sums wait for all of it). */
void train_profile_comm_table(FILE *f, const ffn_profile *p, const ffn_dist_grad_stats *g,
                              int overlap);
/* `"comm": {...}` (no leading comma), the same numbers. */
void train_profile_comm_json(FILE *f, const ffn_profile *p, const ffn_dist_grad_stats *g,
                             int overlap);

#endif
