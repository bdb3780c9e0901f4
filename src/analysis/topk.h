/* analysis/topk.h -- a running top-k list for the analysis tools: k values,
 * largest first, with the id of each; a value joins only when it beats the
 * smallest kept one, and among equal values the earlier one stays ahead.
 * Defined once for each id type the tools store. */
#ifndef FFN_ANALYSIS_TOPK_H
#define FFN_ANALYSIS_TOPK_H

#include <stdint.h>

/* name(vals, ids, &kept, k, x, id): offer x (with its id) to the list of
 * `kept` entries (at most k). */
#define FFN_TOPK_DEFINE_PUSH(name, id_type)                                                   \
    static inline void name(float *vals, id_type *ids, int64_t *kept, int64_t k, float x,      \
                            id_type id) {                                                      \
        if (k <= 0 || (*kept == k && !(x > vals[k - 1]))) return;                             \
        int64_t j = *kept < k ? (*kept)++ : k - 1;                                             \
        while (j > 0 && x > vals[j - 1]) {                                                     \
            vals[j] = vals[j - 1];                                                             \
            ids[j] = ids[j - 1];                                                               \
            j--;                                                                               \
        }                                                                                      \
        vals[j] = x;                                                                           \
        ids[j] = id;                                                                           \
    }

FFN_TOPK_DEFINE_PUSH(ffn_topk_push_i32, int32_t)
FFN_TOPK_DEFINE_PUSH(ffn_topk_push_i64, int64_t)

#endif /* FFN_ANALYSIS_TOPK_H */
