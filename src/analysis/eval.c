/* eval.c -- perplexity over a token stream in strided windows, and the
 * divergence of a model's next-token distributions from a reference's
 * (include/ffn/eval.h states the windows and the measures).
 *
 * Letters: N tokens, W window, S stride, V vocab. */
#include "ffn/eval.h"
#include "ffn/model.h"
#include "base/common.h"
#include "analysis/logits.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void ffn_eval_options_default(ffn_eval_options *o) {
    memset(o, 0, sizeof *o);
}

static int64_t row_argmax(const float *z, int64_t V) {
    int64_t best = 0;
    for (int64_t v = 1; v < V; v++)
        if (z[v] > z[best]) best = v;
    return best;
}

static int by_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

ffn_status ffn_eval_run(ffn_model *model, ffn_model *ref, const int32_t *tokens, int64_t n,
                        const ffn_eval_options *opts, ffn_eval_result *res) {
    if (!model || !tokens || !res) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_eval_run: NULL argument");
    memset(res, 0, sizeof *res);
    ffn_eval_options o;
    if (opts) o = *opts;
    else ffn_eval_options_default(&o);
    const ffn_model_config *c = ffn_model_get_config(model);
    const int64_t V = c->vocab_size;
    if (n < 2) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_eval_run: %lld tokens, at least 2 are needed", (long long)n);
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            return ffn_error(FFN_ERR_INVALID_ARG, "ffn_eval_run: token %lld is id %d, outside the "
                             "vocabulary [0, %lld)", (long long)i, tokens[i], (long long)V);
    int64_t ctx = c->max_position_embeddings;
    if (ref) {
        const ffn_model_config *rc = ffn_model_get_config(ref);
        if (rc->vocab_size != V)
            return ffn_error(FFN_ERR_INVALID_ARG, "ffn_eval_run: the reference has a vocabulary of "
                             "%lld tokens, the model %lld", (long long)rc->vocab_size, (long long)V);
        if (rc->max_position_embeddings < ctx) ctx = rc->max_position_embeddings;
    }
    int64_t W = o.window > 0 ? o.window : ctx;
    if (W > n) W = n;
    if (W < 2 || W > ctx)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_eval_run: window %lld: expected 2 .. %lld (the "
                         "context%s)", (long long)W, (long long)ctx, ref ? " of both models" : "");
    int64_t S = o.stride > 0 ? o.stride : W / 2;
    if (S < 1) S = 1;
    if (S > W)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_eval_run: stride %lld is larger than the window "
                         "%lld (tokens would be skipped)", (long long)S, (long long)W);
    ffn_status st = ffn_model_reserve(model, 1, W);
    if (st == FFN_OK && ref) st = ffn_model_reserve(ref, 1, W);
    if (st) return st;
    /* windows: starts 0, S, 2S, ... while the previous one ends before n;
     * the last start is clamped so that its window ends at n */
    int64_t n_windows = 1;
    for (int64_t end = W; end < n; end += S) n_windows++;
    size_t zbytes = 0;
    if (ffn_mul_size((size_t)W, (size_t)V * sizeof(float), &zbytes))
        return ffn_error(FFN_ERR_OVERFLOW, "ffn_eval_run: window %lld x vocab %lld", (long long)W, (long long)V);
    float *zm = malloc(zbytes), *zr = ref ? malloc(zbytes) : NULL;
    double *kl = ref ? malloc((size_t)(n - 1) * sizeof *kl) : NULL;
    if (!zm || (ref && (!zr || !kl))) {
        free(zm);
        free(zr);
        free(kl);
        return ffn_error(FFN_ERR_NOMEM, "ffn_eval_run: out of memory for %lld x %lld logits",
                         (long long)W, (long long)V);
    }
    double nll = 0, ref_nll = 0;
    int64_t scored = 0, agree = 0, next = 0; /* next: the first position not yet scored */
    for (int64_t w = 0; w < n_windows && st == FFN_OK; w++) {
        int64_t start = w * S;
        if (start + W > n) start = n - W;
        if ((st = ffn_model_logits(model, zm, tokens + start, 1, W))) break;
        if (ref && (st = ffn_model_logits(ref, zr, tokens + start, 1, W))) break;
        /* position p (absolute) predicts token p + 1 */
        int64_t from = next > start ? next : start;
        for (int64_t p = from; p < start + W - 1; p++) {
            const float *a = zm + (p - start) * V;
            const int32_t y = tokens[p + 1];
            const double lse = ffn_logits_lse(a, V);
            nll += lse - (double)a[y];
            if (ref) {
                const float *b = zr + (p - start) * V;
                const double lse_r = ffn_logits_lse(b, V);
                ref_nll += lse_r - (double)b[y];
                double k = 0;
                for (int64_t v = 0; v < V; v++) {
                    const double lr = (double)b[v] - lse_r, lm = (double)a[v] - lse;
                    k += exp(lr) * (lr - lm);
                }
                kl[scored] = k > 0 ? k : 0; /* rounding can make a ~0 sum negative */
                agree += row_argmax(a, V) == row_argmax(b, V);
            }
            scored++;
        }
        next = start + W - 1;
        if (o.progress) o.progress(o.progress_user, w + 1, n_windows);
    }
    if (st == FFN_OK) {
        res->n_tokens = n;
        res->n_scored = scored;
        res->n_windows = n_windows;
        res->window = W;
        res->stride = S;
        res->nll = nll / (double)scored;
        res->ppl = exp(res->nll);
        if (ref) {
            res->has_reference = 1;
            res->ref_nll = ref_nll / (double)scored;
            res->ref_ppl = exp(res->ref_nll);
            double sum = 0;
            for (int64_t i = 0; i < scored; i++) sum += kl[i];
            res->kl_mean = sum / (double)scored;
            qsort(kl, (size_t)scored, sizeof *kl, by_double);
            /* nearest rank: the smallest value with at least 99% at or below it */
            int64_t rank = (int64_t)ceil(0.99 * (double)scored);
            res->kl_p99 = kl[(rank < 1 ? 1 : rank) - 1];
            res->kl_max = kl[scored - 1];
            res->top1_agree = (double)agree / (double)scored;
        }
    }
    free(zm);
    free(zr);
    free(kl);
    return st;
}
