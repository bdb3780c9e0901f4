/* purity.c -- superposition measured: how much of a unit's top activations
 * share one attribute (purity), and how many units a linear readout of an
 * attribute needs.  The same functions score neurons and transcoder / SAE
 * features, so the two are compared on one scale.  What they compute is
 * in include/ffn/transcoder.h.
 * Letters: S samples, U units, C classes, m units used by a readout. */
#include "ffn/transcoder.h"

#include "base/common.h"
#include "ffn/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the most common label's count among ids (n) */
static int64_t mode_count(const int64_t *ids, int64_t n, const int32_t *label, int64_t *count,
                          int64_t C) {
    int64_t best = 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t c = ++count[label[ids[i]]];
        if (c > best) best = c;
    }
    for (int64_t i = 0; i < n; i++) count[label[ids[i]]] = 0;
    (void)C;
    return best;
}

ffn_status ffn_purity(const float *act, int64_t S, int64_t U, const int32_t *label,
                      int64_t C, int64_t n_top, double *mean, int64_t *n_scored, double *chance) {
    if (!act || !label || S < 1 || U < 1 || C < 1 || n_top < 1 || n_top > S)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_purity: bad arguments (S %lld, U %lld, C %lld, "
                         "n_top %lld)", (long long)S, (long long)U, (long long)C, (long long)n_top);
    for (int64_t s = 0; s < S; s++)
        if (label[s] < 0 || label[s] >= C)
            return ffn_error(FFN_ERR_INVALID_ARG, "ffn_purity: label[%lld] = %d outside [0, %lld)",
                             (long long)s, label[s], (long long)C);
    int64_t *top = malloc((size_t)n_top * sizeof *top), *count = calloc((size_t)C, sizeof *count);
    float *vals = malloc((size_t)n_top * sizeof *vals);
    if (!top || !count || !vals) {
        free(top);
        free(count);
        free(vals);
        return ffn_error(FFN_ERR_NOMEM, "ffn_purity: out of memory");
    }
    double sum = 0;
    int64_t scored = 0;
    for (int64_t u = 0; u < U; u++) {
        int64_t kept = 0;
        for (int64_t s = 0; s < S; s++) { /* the n_top largest > 0, earlier first on ties */
            const float x = act[s * U + u];
            if (!(x > 0) || (kept == n_top && !(x > vals[n_top - 1]))) continue;
            int64_t j = kept < n_top ? kept++ : n_top - 1;
            while (j > 0 && x > vals[j - 1]) {
                vals[j] = vals[j - 1];
                top[j] = top[j - 1];
                j--;
            }
            vals[j] = x;
            top[j] = s;
        }
        if (kept < n_top) continue;
        sum += (double)mode_count(top, n_top, label, count, C) / (double)n_top;
        scored++;
    }
    /* the floor: n_top samples at random (without replacement) */
    ffn_rng r;
    ffn_rng_seed(&r, 12345);
    const int64_t draws = 2000;
    int64_t *perm = malloc((size_t)S * sizeof *perm);
    double ch = 0;
    if (perm) {
        for (int64_t s = 0; s < S; s++) perm[s] = s;
        for (int64_t d = 0; d < draws; d++) {
            for (int64_t i = 0; i < n_top; i++) {
                const int64_t j = i + (int64_t)ffn_rng_below(&r, (uint64_t)(S - i));
                const int64_t t = perm[i];
                perm[i] = perm[j];
                perm[j] = t;
            }
            ch += (double)mode_count(perm, n_top, label, count, C) / (double)n_top;
        }
    }
    free(perm);
    free(top);
    free(count);
    free(vals);
    if (!perm) return ffn_error(FFN_ERR_NOMEM, "ffn_purity: out of memory");
    if (mean) *mean = scored ? sum / (double)scored : NAN;
    if (n_scored) *n_scored = scored;
    if (chance) *chance = ch / (double)draws;
    return FFN_OK;
}

/* A x = b for symmetric positive definite A (n, n), in place (A its Cholesky
 * factor, B (n, C) the solutions); 0, or -1 when A is not positive definite. */
static int cholesky_solve(double *A, int64_t n, double *B, int64_t C) {
    for (int64_t j = 0; j < n; j++) {
        double d = A[j * n + j];
        for (int64_t k = 0; k < j; k++) d -= A[j * n + k] * A[j * n + k];
        if (!(d > 0)) return -1;
        d = sqrt(d);
        A[j * n + j] = d;
        for (int64_t i = j + 1; i < n; i++) {
            double s = A[i * n + j];
            for (int64_t k = 0; k < j; k++) s -= A[i * n + k] * A[j * n + k];
            A[i * n + j] = s / d;
        }
    }
    for (int64_t c = 0; c < C; c++) {
        for (int64_t i = 0; i < n; i++) { /* L y = b */
            double s = B[i * C + c];
            for (int64_t k = 0; k < i; k++) s -= A[i * n + k] * B[k * C + c];
            B[i * C + c] = s / A[i * n + i];
        }
        for (int64_t i = n - 1; i >= 0; i--) { /* Lᵀ x = y */
            double s = B[i * C + c];
            for (int64_t k = i + 1; k < n; k++) s -= A[k * n + i] * B[k * C + c];
            B[i * C + c] = s / A[i * n + i];
        }
    }
    return 0;
}

typedef struct ranked {
    double score;
    int64_t unit;
} ranked;

static int by_score(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? 1 : -1;
    return x->unit < y->unit ? -1 : x->unit > y->unit;
}

ffn_status ffn_readout(const float *act, int64_t S, int64_t U, const int32_t *label, int64_t C,
                       const unsigned char *is_test, const int64_t *sizes, int64_t n_sizes,
                       double target, double *acc, int64_t *needed) {
    if (!act || !label || !is_test || !sizes || !acc || S < 2 || U < 1 || C < 2 || n_sizes < 1)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_readout: bad arguments");
    int64_t n_train = 0, n_test = 0, max_m = 0;
    for (int64_t s = 0; s < S; s++) {
        if (label[s] < 0 || label[s] >= C)
            return ffn_error(FFN_ERR_INVALID_ARG, "ffn_readout: label[%lld] = %d outside [0, %lld)",
                             (long long)s, label[s], (long long)C);
        n_train += !is_test[s];
        n_test += is_test[s] != 0;
    }
    for (int64_t i = 0; i < n_sizes; i++) {
        if (sizes[i] < 1 || sizes[i] > U)
            return ffn_error(FFN_ERR_INVALID_ARG, "ffn_readout: size %lld outside [1, %lld]",
                             (long long)sizes[i], (long long)U);
        if (sizes[i] > max_m) max_m = sizes[i];
    }
    if (n_train < 2 || n_test < 1)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_readout: %lld training and %lld test samples",
                         (long long)n_train, (long long)n_test);
    ranked *rank = malloc((size_t)U * sizeof *rank);
    double *mu = malloc((size_t)U * sizeof *mu), *sd = malloc((size_t)U * sizeof *sd);
    double *cm = calloc((size_t)C, sizeof *cm);
    int64_t *cn = calloc((size_t)C, sizeof *cn);
    const int64_t n = max_m + 1;
    double *A = malloc((size_t)(n * n) * sizeof *A), *B = malloc((size_t)(n * C) * sizeof *B);
    double *z = malloc((size_t)n * sizeof *z);
    ffn_status st = FFN_OK;
    if (!rank || !mu || !sd || !cm || !cn || !A || !B || !z) {
        st = ffn_error(FFN_ERR_NOMEM, "ffn_readout: out of memory");
        goto done;
    }
    for (int64_t s = 0; s < S; s++)
        if (!is_test[s]) cn[label[s]]++;
    /* the correlation ratio of each unit on the training samples */
    for (int64_t u = 0; u < U; u++) {
        double m = 0, v = 0, between = 0;
        for (int64_t s = 0; s < S; s++)
            if (!is_test[s]) m += act[s * U + u];
        m /= (double)n_train;
        memset(cm, 0, (size_t)C * sizeof *cm);
        for (int64_t s = 0; s < S; s++)
            if (!is_test[s]) {
                const double d = act[s * U + u] - m;
                v += d * d;
                cm[label[s]] += act[s * U + u];
            }
        for (int64_t c = 0; c < C; c++)
            if (cn[c]) {
                const double d = cm[c] / (double)cn[c] - m;
                between += (double)cn[c] * d * d;
            }
        mu[u] = m;
        sd[u] = v > 0 ? sqrt(v / (double)n_train) : 1;
        rank[u].score = v > 0 ? between / v : 0;
        rank[u].unit = u;
    }
    qsort(rank, (size_t)U, sizeof *rank, by_score);
    if (needed) *needed = -1;
    for (int64_t si = 0; si < n_sizes; si++) {
        const int64_t m = sizes[si], nm = m + 1;
        memset(A, 0, (size_t)(nm * nm) * sizeof *A);
        memset(B, 0, (size_t)(nm * C) * sizeof *B);
        for (int64_t s = 0; s < S; s++) {
            if (is_test[s]) continue;
            for (int64_t i = 0; i < m; i++) {
                const int64_t u = rank[i].unit;
                z[i] = (act[s * U + u] - mu[u]) / sd[u];
            }
            z[m] = 1;
            for (int64_t i = 0; i < nm; i++) {
                for (int64_t j = 0; j <= i; j++) A[i * nm + j] += z[i] * z[j];
                B[i * C + label[s]] += z[i];
            }
        }
        double tr = 0;
        for (int64_t i = 0; i < nm; i++) {
            for (int64_t j = 0; j < i; j++) A[j * nm + i] = A[i * nm + j];
            tr += A[i * nm + i];
        }
        const double lam = 1e-3 * tr / (double)nm + 1e-9;
        for (int64_t i = 0; i < nm; i++) A[i * nm + i] += lam;
        if (cholesky_solve(A, nm, B, C)) {
            st = ffn_error(FFN_ERR_INTERNAL, "ffn_readout: the ridge system is not positive "
                           "definite");
            goto done;
        }
        int64_t right = 0;
        for (int64_t s = 0; s < S; s++) {
            if (!is_test[s]) continue;
            for (int64_t i = 0; i < m; i++) {
                const int64_t u = rank[i].unit;
                z[i] = (act[s * U + u] - mu[u]) / sd[u];
            }
            z[m] = 1;
            int64_t best = 0;
            double bv = -INFINITY;
            for (int64_t c = 0; c < C; c++) {
                double o = 0;
                for (int64_t i = 0; i < nm; i++) o += z[i] * B[i * C + c];
                if (o > bv) {
                    bv = o;
                    best = c;
                }
            }
            right += best == label[s];
        }
        acc[si] = (double)right / (double)n_test;
        if (needed && *needed < 0 && acc[si] >= target) *needed = m;
    }
done:
    free(rank);
    free(mu);
    free(sd);
    free(cm);
    free(cn);
    free(A);
    free(B);
    free(z);
    return st;
}
