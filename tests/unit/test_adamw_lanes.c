/* test_adamw_lanes.c -- the AdamW update over a flat block (src/train/train.c,
 * adamw_update: four lanes at a time with SSE2, threads over blocks) gives
 * bitwise the results of the plain scalar loop, written here in the order
 * torch.optim.AdamW uses, with and without weight decay, for an odd length
 * (a scalar tail), over three steps; and the gradient's sum of squares is
 * the same at 1 and 2 threads and matches a long-double sum closely. */
#include "check.h"
#include "train/train_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static void scalar_adamw(float *param, float *m, float *v, const float *grad, int64_t n,
                         const adamw_step *s) {
    for (int64_t i = 0; i < n; i++) {
        float g = grad[i] * s->grad_scale;
        float p = param[i];
        if (s->decay != 0.0f) p = p * (1.0f - s->decay);
        float mi = m[i] * s->beta1 + (1.0f - s->beta1) * g;
        float vi = v[i] * s->beta2 + (1.0f - s->beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float denom = sqrtf(vi) / s->bc2_sqrt + s->eps;
        param[i] = p - s->step_size * (mi / denom);
    }
}

int main(void) {
    const int64_t n = 100003; /* 24 blocks of 4096 and a ragged end */
    float *p = malloc(4 * n), *m = malloc(4 * n), *v = malloc(4 * n), *g = malloc(4 * n);
    float *p2 = malloc(4 * n), *m2 = malloc(4 * n), *v2 = malloc(4 * n);
    uint64_t x = 88172645463325252ull;
    for (int64_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        p[i] = (float)((int64_t)(x % 2000001) - 1000000) * 1e-6f;
        m[i] = p[i] * 0.01f;
        v[i] = fabsf(p[i]) * 1e-4f;
        g[i] = (float)((int64_t)((x >> 20) % 2001) - 1000) * 1e-5f;
    }
    memcpy(p2, p, 4 * n), memcpy(m2, m, 4 * n), memcpy(v2, v, 4 * n);
    for (int decay = 0; decay < 2; decay++)
        for (int step = 1; step <= 3; step++) {
            adamw_step s = {.lr = 1e-3f, .decay = decay ? 1e-4f : 0.0f, .beta1 = 0.9f,
                            .beta2 = 0.95f, .eps = 1e-8f, .step_size = 1.3e-3f / (float)step,
                            .bc2_sqrt = 0.31f * (float)step, .grad_scale = 0.77f};
            adamw_update(p, m, v, g, n, &s);
            scalar_adamw(p2, m2, v2, g, n, &s);
            CHECK(!memcmp(p, p2, 4 * n), "params differ from the scalar loop (decay %d, step %d)", decay, step);
            CHECK(!memcmp(m, m2, 4 * n), "m differs (decay %d, step %d)", decay, step);
            CHECK(!memcmp(v, v2, 4 * n), "v differs (decay %d, step %d)", decay, step);
        }

    double *partials = malloc(sizeof(double) * (size_t)train_norm_chunks(n));
    long double ref = 0;
    for (int64_t i = 0; i < n; i++) ref += (long double)g[i] * g[i];
#ifdef _OPENMP
    omp_set_num_threads(1);
#endif
    double one = train_sum_squares(g, n, partials);
#ifdef _OPENMP
    omp_set_num_threads(2);
#endif
    double two = train_sum_squares(g, n, partials);
    CHECK(one == two, "sum of squares %.17g at 1 thread, %.17g at 2", one, two);
    CHECK(fabs(one - (double)ref) <= 1e-12 * (double)ref, "sum of squares %.17g, long double %.17Lg", one, ref);
    free(p), free(m), free(v), free(g), free(p2), free(m2), free(v2), free(partials);
    return check_done("test_adamw_lanes");
}
