/* tc_report.c -- the report's feature section: for each transcoder or SAE
 * file given to `ffn report --transcoder FILE`, the features most active
 * at each token of the report's prompt (ffn_tc_codes) and the tokens each
 * one's decoder row promotes (ffn_tc_feature_logits), as section 3 shows a
 * token's neurons.  The page draws it with tools/report/features.js.
 * Letters: T prompt tokens, V vocab, k active features per token. */
#include "tc_report.h"
#include "edit_source.h"

#include <stdlib.h>
#include <string.h>

static void json_piece(FILE *f, const ffn_vocab *v, int32_t prev, int32_t id) {
    char *text = NULL;
    size_t n = 0;
    if (ffn_vocab_decode(v, prev, &id, 1, &text, &n) != FFN_OK || !text) {
        cli_json_string(f, "?");
        return;
    }
    cli_json_string(f, text);
    free(text);
}

/* the n most promoted tokens of feature j (largest first, ties: lower id) */
static ffn_status promoted(ffn_model *m, const ffn_transcoder *tc, int64_t j, int64_t V,
                           float *lens, int32_t *best, int64_t n) {
    ffn_status st = ffn_tc_feature_logits(m, tc, j, lens);
    if (!st) cli_top_ids(lens, NULL, V, n, best);
    return st;
}

static int one_file(FILE *f, const char *cmd, ffn_ctx *ctx, ffn_model *m, const ffn_vocab *vocab,
                    const char *path, const int32_t *ids, int64_t T, int64_t top,
                    int64_t n_promoted, int first, const int32_t *held, int64_t n_held) {
    ffn_transcoder *tc = NULL;
    ffn_status st = ffn_tc_load(path, &tc);
    if (st) {
        cli_error(cmd, "--transcoder %s: %s", path, ffn_last_error());
        return CLI_EXIT_FAIL;
    }
    const ffn_tc_config *c = ffn_tc_get_config(tc);
    const int64_t k = c->k, V = ffn_model_get_config(m)->vocab_size;
    const int64_t P = n_promoted < V ? n_promoted : V, K = top < k ? top : k;
    int32_t *idx = malloc((size_t)(T * k) * sizeof *idx), *best = malloc((size_t)P * sizeof *best);
    float *val = malloc((size_t)(T * k) * sizeof *val), *lens = malloc((size_t)V * sizeof *lens);
    if (!idx || !best || !val || !lens) st = FFN_ERR_NOMEM;
    if (!st) st = ffn_tc_codes(ctx, m, tc, ids, T, idx, val);
    int rc = 0;
    if (st) {
        cli_error(cmd, "--transcoder %s: %s", path,
                  st == FFN_ERR_NOMEM ? "out of memory" : ffn_last_error());
        rc = CLI_EXIT_FAIL;
        goto done;
    }
    const char *name = strrchr(path, '/');
    fprintf(f, "%s{\"file\":", first ? "" : ",");
    cli_json_string(f, name ? name + 1 : path);
    fprintf(f, ",\"kind\":\"%s\",\"layer\":%lld,\"features\":%lld,\"k\":%lld,\"skip\":%s,"
               "",
            ffn_tc_kind_name(c->kind), (long long)c->layer, (long long)c->features, (long long)k,
            c->skip ? "true" : "false");
    /* the figures of `ffn transcoder eval` (its default 20 windows of the held-out text) */
    fputs("\"eval\":", f);
    if (held && n_held > 1) {
        ffn_tc_eval e;
        if ((st = ffn_tc_evaluate(ctx, m, tc, held, n_held, 20, &e))) {
            cli_error(cmd, "--transcoder %s: %s", path, ffn_last_error());
            rc = CLI_EXIT_FAIL;
            goto done;
        }
        fprintf(f, "{\"fvu\":%s,", cli_json_num(e.fvu, "%.9g"));
        fprintf(f, "\"mse\":%s,", cli_json_num(e.mse, "%.9g"));
        fprintf(f, "\"l0\":%s,\"dead\":%lld,\"rows\":%lld,", cli_json_num(e.l0, "%.9g"),
                (long long)e.dead, (long long)e.rows);
        fprintf(f, "\"loss_original\":%s,", cli_json_num(e.loss_original, "%.9g"));
        fprintf(f, "\"loss_replaced\":%s,", cli_json_num(e.loss_replaced, "%.9g"));
        fprintf(f, "\"loss_zero\":%s,", cli_json_num(e.loss_zero, "%.9g"));
        fprintf(f, "\"loss_recovered\":%s},", cli_json_num(e.loss_recovered, "%.9g"));
    } else fputs("null,", f);
    fputs("\"tokens\":[", f);
    for (int64_t t = 0; t < T && !rc; t++) {
        /* this token's features by activation, largest first (ties: lower index) */
        int64_t order[1024];
        const int64_t nk = k < 1024 ? k : 1024;
        for (int64_t s = 0; s < nk; s++) order[s] = s;
        const int32_t *ix = idx + t * k;
        const float *vv = val + t * k;
        for (int64_t a = 1; a < nk; a++)
            for (int64_t b = a; b > 0; b--) {
                const int64_t p = order[b - 1], q = order[b];
                if (vv[q] > vv[p] || (vv[q] == vv[p] && ix[q] < ix[p]))
                    order[b - 1] = q, order[b] = p;
                else break;
            }
        fprintf(f, "%s{\"position\":%lld,\"id\":%d,\"piece\":", t ? "," : "", (long long)t, ids[t]);
        json_piece(f, vocab, t ? ids[t - 1] : -1, ids[t]);
        fputs(",\"features\":[", f);
        int64_t shown = 0;
        for (int64_t s = 0; s < nk && shown < K; s++) {
            const int64_t j = ix[order[s]];
            const float a = vv[order[s]];
            if (!(a > 0)) break;
            if ((st = promoted(m, tc, j, V, lens, best, P))) {
                cli_error(cmd, "--transcoder %s: %s", path, ffn_last_error());
                rc = CLI_EXIT_FAIL;
                break;
            }
            fprintf(f, "%s{\"feature\":%lld,\"activation\":%s,\"promoted\":[", shown ? "," : "",
                    (long long)j, cli_json_num(a, "%.4g"));
            for (int64_t i = 0; i < P; i++) {
                fprintf(f, "%s{\"id\":%d,\"piece\":", i ? "," : "", best[i]);
                json_piece(f, vocab, -1, best[i]);
                fprintf(f, ",\"logit\":%s}", cli_json_num(lens[best[i]], "%.4g"));
            }
            fputs("]}", f);
            shown++;
        }
        fputs("]}", f);
    }
    fputs("]}", f);
done:
    free(idx), free(best), free(val), free(lens);
    ffn_tc_free(tc);
    return rc;
}

int tc_report_json(FILE *f, const char *cmd, ffn_ctx *ctx, const char *model_dir,
                   const char *const *files, int n_files, const char *prompt, int64_t top,
                   int64_t n_promoted) {
    ffn_model *model = NULL;
    ffn_vocab *vocab = NULL;
    int32_t *ids = NULL;
    int64_t T = 0;
    ffn_status st = ffn_run_dir_load_vocab(ctx, model_dir, &model, &vocab);
    if (!st) st = ffn_vocab_encode(vocab, prompt, strlen(prompt), 1, &ids, &T);
    /* the held-out text of `ffn transcoder eval`: the last 10% of the model's training
     * text (none recorded: no evaluation) */
    char *text = NULL, what[4200];
    size_t n_text = 0;
    int32_t *all = NULL;
    int64_t n_all = 0, n_train = 0, n_val = 0;
    if (!st) st = edit_source_text(model_dir, NULL, &text, &n_text, what, sizeof what);
    if (!st && text) st = ffn_vocab_encode(vocab, text, n_text, 0, &all, &n_all);
    free(text);
    if (!st && all) st = ffn_tokens_split(n_all, 0.1, &n_train, &n_val);
    int rc = 0;
    if (st) {
        cli_error(cmd, "features of %s: %s", model_dir, ffn_last_error());
        rc = CLI_EXIT_FAIL;
    } else if (T < 1) {
        cli_error(cmd, "features of %s: the prompt has no tokens", model_dir);
        rc = CLI_EXIT_FAIL;
    } else {
        fputs("\"features\":{\"model\":", f);
        cli_json_string(f, model_dir);
        fputs(",\"files\":[", f);
        for (int i = 0; i < n_files && !rc; i++)
            rc = one_file(f, cmd, ctx, model, vocab, files[i], ids, T, top, n_promoted, i == 0,
                          all ? all + n_train : NULL, all ? n_all - n_train : 0);
        fputs("]},\n", f);
    }
    free(ids);
    free(all);
    ffn_vocab_free(vocab);
    ffn_model_free(model);
    return rc;
}
