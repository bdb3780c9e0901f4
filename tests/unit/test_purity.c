/* test_purity.c -- ffn_purity and ffn_readout (src/analysis/purity.c) on
 * samples whose answer is known:
 *   - 4 classes of 10 samples each; unit 0 fires only on class 2 (purity
 *     1), unit 1 on every sample alike in turn (classes 0,1,2,3,0,...:
 *     its top 8 hold 2 of each class, purity 0.25), unit 2 never fires
 *     (not scored); the mean is (1 + 0.25) / 2 and chance (8 of 40 at
 *     random, 4 classes) lies in [0.3, 0.5] (its exact mean is about 0.40);
 *   - readout: units 3 and 4 carry the class together (unit 3 = class
 *     bit 0, unit 4 = bit 1, plus noise), the rest noise: one unit reads
 *     at most half the classes, the best two read all (accuracy 1 on
 *     the test samples), so units needed at 0.95 is 2;
 *   - bad arguments: a label out of range, a size above U. */
#include "check.h"
#include "ffn.h"
#include "ffn/rng.h"
#include "ffn/transcoder.h"

#include <math.h>

int main(void) {
    enum { S = 40, U = 12, C = 4 };
    float act[S * U];
    int32_t label[S];
    unsigned char is_test[S];
    ffn_rng r;
    ffn_rng_seed(&r, 9);
    for (int s = 0; s < S; s++) {
        label[s] = s % C;
        is_test[s] = s >= 32;
        for (int u = 0; u < U; u++) act[s * U + u] = 0.1f * (float)ffn_rng_normal(&r);
        act[s * U + 0] = label[s] == 2 ? 1.0f + 0.01f * (float)s : 0.0f;
        act[s * U + 1] = 1.0f; /* equal everywhere: the earliest 8 samples */
        act[s * U + 2] = 0.0f;
        act[s * U + 3] += (float)(label[s] & 1);
        act[s * U + 4] += (float)((label[s] >> 1) & 1);
    }
    /* purity over units 0..2 only: a copy of those columns */
    float a3[S * 3];
    for (int s = 0; s < S; s++)
        for (int u = 0; u < 3; u++) a3[s * 3 + u] = act[s * U + u];
    double mean = 0, chance = 0;
    int64_t scored = 0;
    CHECK(ffn_purity(a3, S, 3, label, C, 8, &mean, &scored, &chance) == FFN_OK, "%s",
          ffn_last_error());
    CHECK(scored == 2, "scored %lld", (long long)scored);
    CHECK(fabs(mean - 0.625) < 1e-12, "mean purity %.6f, expected 0.625", mean);
    CHECK(chance > 0.3 && chance < 0.5, "chance %.4f", chance);
    /* the readout: units 0..2 back to noise, so that 3 and 4 are the best two */
    for (int s = 0; s < S; s++)
        for (int u = 0; u < 3; u++) act[s * U + u] = 0.1f * (float)ffn_rng_normal(&r);
    const int64_t sizes[3] = {1, 2, 12};
    double acc[3];
    int64_t needed = 0;
    CHECK(ffn_readout(act, S, U, label, C, is_test, sizes, 3, 0.95, acc, &needed) == FFN_OK, "%s",
          ffn_last_error());
    CHECK(acc[0] <= 0.5 + 1e-12, "one unit reads %.3f", acc[0]);
    CHECK(acc[1] == 1.0, "two units read %.3f", acc[1]);
    CHECK(needed == 2, "units needed %lld", (long long)needed);
    label[3] = C;
    CHECK(ffn_purity(a3, S, 3, label, C, 8, &mean, &scored, &chance) == FFN_ERR_INVALID_ARG,
          "a label out of range");
    label[3] = 3;
    const int64_t big[1] = {U + 1};
    CHECK(ffn_readout(act, S, U, label, C, is_test, big, 1, 0.9, acc, &needed) ==
              FFN_ERR_INVALID_ARG, "a size above U");
    return check_done("test_purity");
}
