/* trace_dist.c -- `ffn trace MODEL --distributed` (tools/trace_dist.h):
 * how distributed is a fact.  For each fact the model knows, the smallest
 * ablation set (include/ffn/trace.h, ffn_fact_min_ablation) over each
 * scope -- the neurons of one layer, of all layers, a transcoder's
 * features -- then the distribution of the sizes (median, quartiles,
 * histogram) and, with each set ablated, the share of the other known
 * facts that flip and the change of the held-out loss. */
#include "cli.h"
#include "edit_source.h"
#include "trace_dist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void trace_dist_args_default(trace_dist_args *a) {
    memset(a, 0, sizeof *a);
    a->layer = -1;
    a->windows = 4;
    a->side = 1;
}

/* ---- the size histogram ------------------------------------------------------------ */

#define N_BINS 9
static const int64_t bin_hi[N_BINS] = {1, 2, 4, 8, 16, 32, 64, 128, INT64_MAX};
static const char *const bin_name[N_BINS] = {"1", "2", "3-4", "5-8", "9-16", "17-32", "33-64", "65-128", ">128"};

static int bin_of(int64_t size) {
    int b = 0;
    while (b + 1 < N_BINS && size > bin_hi[b]) b++;
    return b;
}

static int cmp_i64(const void *x, const void *y) {
    const int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

/* The q-quantile of sorted v (n >= 1), linear between order statistics. */
static double quantile(const int64_t *v, int64_t n, double q) {
    const double at = q * (double)(n - 1);
    const int64_t i = (int64_t)floor(at);
    if (i + 1 >= n) return (double)v[n - 1];
    return (double)v[i] + (at - (double)i) * (double)(v[i + 1] - v[i]);
}

/* ---- one scope over every fact ------------------------------------------------------ */

typedef struct fact_row {
    ffn_fact_dist_result r;
    int64_t flips, others; /* other known facts that flip, of how many */
    double dloss;          /* held-out loss with the set ablated − without */
} fact_row;

typedef struct scope {
    char name[32];          /* "layer 1", "all layers", "features L1" */
    const char *kind;       /* "neurons", "transcoder", "sae" */
    int64_t layer;          /* -1: all layers */
    ffn_transcoder *tc;     /* features of it, or NULL */
    fact_row *rows;         /* (n facts) */
    /* the summary over the facts present */
    int64_t n_units, present, removed;
    double median, q1, q3, mean;
    int64_t min, max, hist[N_BINS];
    double flip_share, dloss; /* means over the removed facts */
} scope;

typedef struct fact_in {
    int32_t *ids, target;
    int64_t T;
    int present;
} fact_in;

static void summarize(scope *s, int64_t n) {
    int64_t *sz = malloc((size_t)(n ? n : 1) * sizeof *sz);
    int64_t k = 0, with_side = 0;
    double sum = 0, fl = 0, dl = 0;
    memset(s->hist, 0, sizeof s->hist);
    s->present = 0;
    for (int64_t i = 0; i < n; i++) {
        const fact_row *fr = &s->rows[i];
        if (!fr->r.present) continue;
        s->present++;
        if (fr->r.size < 1) continue;
        if (sz) sz[k++] = fr->r.size;
        sum += (double)fr->r.size;
        s->hist[bin_of(fr->r.size)]++;
        if (fr->others >= 0) {
            fl += fr->others ? (double)fr->flips / (double)fr->others : 0;
            dl += fr->dloss;
            with_side++;
        }
    }
    s->removed = k;
    s->median = s->q1 = s->q3 = s->mean = NAN;
    s->min = s->max = 0;
    if (k > 0 && sz) {
        qsort(sz, (size_t)k, sizeof *sz, cmp_i64);
        s->median = quantile(sz, k, 0.5);
        s->q1 = quantile(sz, k, 0.25);
        s->q3 = quantile(sz, k, 0.75);
        s->mean = sum / (double)k;
        s->min = sz[0];
        s->max = sz[k - 1];
    }
    s->flip_share = with_side ? fl / (double)with_side : NAN;
    s->dloss = with_side ? dl / (double)with_side : NAN;
    free(sz);
}

/* What failed, for the message (the library's own error follows it). */
static char where[200];

/* An out-of-memory error of the tools' own allocations. */
#define NOMEM ((ffn_status)FFN_ERR_NOMEM)

static int is_present(const trace_dist_args *a, double p, int32_t top, int32_t target) {
    return a->threshold > 0 ? p >= a->threshold : top == target;
}

static ffn_status run_scope(ffn_ctx *ctx, ffn_model *m, const fact_in *fi, int64_t n, const trace_dist_args *a,
                            const ffn_fact_dist_options *o, const int32_t *text, int64_t n_text, double base_loss,
                            scope *s, int64_t si, int64_t n_scopes) {
    ffn_status st = FFN_OK;
    for (int64_t i = 0; i < n && !st; i++) {
        fact_row *fr = &s->rows[i];
        fr->others = -1;
        fr->dloss = NAN;
        fr->r.size = -1;
        if (!fi[i].present) continue;
        if (cli_progress_tty())
            fprintf(stderr, "\rffn trace: %s: fact %lld of %lld (scope %lld of %lld) ", s->name, (long long)i + 1,
                    (long long)n, (long long)si + 1, (long long)n_scopes);
        st = ffn_fact_min_ablation(ctx, m, s->tc, fi[i].ids, fi[i].T, fi[i].target, s->layer, o, &fr->r);
        if (st) {
            snprintf(where, sizeof where, "fact %lld, %s: ", (long long)i, s->name);
            break;
        }
        if (!a->side || fr->r.size < 1) continue;
        fr->others = 0;
        fr->flips = 0;
        for (int64_t j = 0; j < n && !st; j++) {
            if (j == i || !fi[j].present) continue;
            double p;
            int32_t top;
            st = ffn_ablation_predict(ctx, m, s->tc, fr->r.units, fr->r.size, fi[j].ids, fi[j].T, fi[j].target, &p, &top);
            fr->others++;
            if (!st && !is_present(a, p, top, fi[j].target)) fr->flips++;
        }
        if (!st && text) {
            double l;
            st = ffn_ablation_loss(ctx, m, s->tc, fr->r.units, fr->r.size, text, n_text, a->windows, &l);
            if (!st) fr->dloss = l - base_loss;
        }
    }
    if (cli_progress_tty()) fputc('\n', stderr);
    summarize(s, n);
    return st;
}

/* ---- output ----------------------------------------------------------------------- */

static void json_scope(FILE *f, const scope *s, const ffn_facts *facts, int64_t n, int per_fact) {
    fprintf(f, "{\"scope\": ");
    cli_json_string(f, s->name);
    fprintf(f, ", \"kind\": \"%s\", \"layer\": %lld, \"units\": %lld, \"present\": %lld, \"removed\": %lld, "
            "\"not_removed\": %lld, \"median\": %s, \"q1\": %s, \"q3\": %s, \"mean\": %s, \"min\": %lld, "
            "\"max\": %lld, \"histogram\": {\"bins\": [",
            s->kind, (long long)s->layer, (long long)s->n_units, (long long)s->present, (long long)s->removed,
            (long long)(s->present - s->removed), cli_json_num(s->median, "%.6g"), cli_json_num(s->q1, "%.6g"),
            cli_json_num(s->q3, "%.6g"), cli_json_num(s->mean, "%.6g"), (long long)s->min, (long long)s->max);
    for (int b = 0; b < N_BINS; b++) fprintf(f, "%s\"%s\"", b ? ", " : "", bin_name[b]);
    fputs("], \"counts\": [", f);
    for (int b = 0; b < N_BINS; b++) fprintf(f, "%s%lld", b ? ", " : "", (long long)s->hist[b]);
    fprintf(f, "]}, \"flip_share\": %s, \"heldout_delta\": %s", cli_json_num(s->flip_share, "%.6g"),
            cli_json_num(s->dloss, "%.6g"));
    if (per_fact) {
        fputs(", \"facts\": [", f);
        int first = 1;
        for (int64_t i = 0; i < n; i++) {
            const fact_row *fr = &s->rows[i];
            if (!fr->r.present) continue;
            fprintf(f, "%s{\"fact\": %lld, \"size\": %lld, \"candidates\": %lld, \"greedy\": %lld, "
                    "\"p_clean\": %s, \"p_after\": %s, \"top_after\": %d, \"forwards\": %lld, \"units\": [",
                    first ? "" : ", ", (long long)facts->facts[i].id, (long long)fr->r.size,
                    (long long)fr->r.n_candidates, (long long)fr->r.n_greedy, cli_json_num(fr->r.p_clean, "%.6g"),
                    cli_json_num(fr->r.p_after, "%.6g"), fr->r.top_after, (long long)fr->r.forwards);
            for (int64_t u = 0; u < (fr->r.size > 0 ? fr->r.size : 0); u++)
                fprintf(f, "%s[%lld, %lld]", u ? ", " : "", (long long)fr->r.units[u].layer,
                        (long long)fr->r.units[u].index);
            fputs("], \"attribution\": [", f);
            for (int64_t u = 0; u < (fr->r.size > 0 ? fr->r.size : 0); u++)
                fprintf(f, "%s%s", u ? ", " : "", cli_json_num(fr->r.attribution[u], "%.6g"));
            fputs("]", f);
            if (fr->others >= 0)
                fprintf(f, ", \"flips\": %lld, \"others\": %lld, \"heldout_delta\": %s", (long long)fr->flips,
                        (long long)fr->others, cli_json_num(fr->dloss, "%.6g"));
            fputc('}', f);
            first = 0;
        }
        fputc(']', f);
    }
    fputc('}', f);
}

static void json_all(FILE *f, const scope *sc, int64_t n_sc, const ffn_facts *facts, int64_t n, int64_t present,
                     const trace_dist_args *a, double base_loss, int per_fact) {
    fprintf(f, "\"facts\": %lld, \"present\": %lld, \"criterion\": \"%s\", \"threshold\": %s, \"max_set\": %lld, "
            "\"heldout_before\": %s, \"scopes\": [",
            (long long)n, (long long)present, a->threshold > 0 ? "p_below_threshold" : "not_top1",
            cli_json_num(a->threshold, "%.6g"), (long long)a->max_set, cli_json_num(base_loss, "%.6g"));
    for (int64_t s = 0; s < n_sc; s++) {
        if (s) fputs(", ", f);
        json_scope(f, &sc[s], facts, n, per_fact);
    }
    fputc(']', f);
}

static void fmt(char *buf, size_t size, double v, const char *f) {
    if (isnan(v)) snprintf(buf, size, "-");
    else snprintf(buf, size, f, v);
}

static void print_tables(const scope *sc, int64_t n_sc, int64_t n, int64_t present, const trace_dist_args *a,
                         double base_loss) {
    if (a->threshold > 0)
        printf("the smallest ablation that removes each fact (p(object) < %g),\n%lld facts, %lld known\n", a->threshold,
               (long long)n, (long long)present);
    else
        printf("the smallest ablation that removes each fact (the object no longer top-1),\n%lld facts, %lld known\n",
               (long long)n, (long long)present);
    printf("greedy by attribution (activation x gradient of log p(object)), pruned,\n"
           "verified by ablation\n\n");
    printf("%-11s %5s %7s %4s %6s %5s %5s %6s %4s %6s %8s\n", "scope", "units", "removed", "not", "median", "q1",
           "q3", "mean", "max", "flips", "d loss");
    for (int64_t s = 0; s < n_sc; s++) {
        const scope *p = &sc[s];
        char med[16], q1[16], q3[16], mean[16], fl[16], dl[16];
        fmt(med, sizeof med, p->median, "%.1f");
        fmt(q1, sizeof q1, p->q1, "%.1f");
        fmt(q3, sizeof q3, p->q3, "%.1f");
        fmt(mean, sizeof mean, p->mean, "%.1f");
        fmt(fl, sizeof fl, p->flip_share, "%.3f");
        fmt(dl, sizeof dl, p->dloss, "%+.4f");
        printf("%-11s %5lld %7lld %4lld %6s %5s %5s %6s %4lld %6s %8s\n", p->name, (long long)p->n_units,
               (long long)p->removed, (long long)(p->present - p->removed), med, q1, q3, mean, (long long)p->max, fl,
               dl);
    }
    printf("\nset sizes (facts per bin; not: no set of positively attributed units removed\n"
           "the fact)\n");
    printf("%-11s", "scope");
    for (int b = 0; b < N_BINS; b++) printf(" %5s", bin_name[b]);
    printf(" %5s\n", "not");
    for (int64_t s = 0; s < n_sc; s++) {
        printf("%-11s", sc[s].name);
        for (int b = 0; b < N_BINS; b++) printf(" %5lld", (long long)sc[s].hist[b]);
        printf(" %5lld\n", (long long)(sc[s].present - sc[s].removed));
    }
    if (!a->side) {
        printf("\n(--no-side: what else each ablation breaks was not measured)\n");
        return;
    }
    printf("\nflips: the share of the other known facts each ablation also removes (mean\n"
           "over the facts); d loss: the held-out loss with the set ablated minus without\n");
    if (isnan(base_loss)) printf("(no held-out text: give --data FILE)\n");
    else printf("(%s nats before)\n", cli_json_num(base_loss, "%.4f"));
}

/* ---- the run ----------------------------------------------------------------------- */

static int run(const char *cmd, ffn_ctx *ctx, ffn_model *m, const ffn_vocab *vocab, const ffn_facts *facts,
               int64_t n, const trace_dist_args *a, FILE *out, int json, int per_fact, int report) {
    const ffn_model_config *c = ffn_model_get_config(m);
    const int64_t L = c->num_hidden_layers;
    ffn_transcoder *tc = NULL;
    ffn_status st = FFN_OK;
    if (a->layer >= L) {
        cli_error(cmd, "--layer %lld: out of range (the model has %lld layers: 0..%lld)", (long long)a->layer,
                  (long long)L, (long long)L - 1);
        return CLI_EXIT_USAGE;
    }
    if (a->transcoder) {
        if ((st = ffn_tc_load(a->transcoder, &tc))) return cli_fail(cmd, st);
        const ffn_tc_config *tcc = ffn_tc_get_config(tc);
        if (a->layer >= 0 && tcc->layer != a->layer) {
            cli_error(cmd, "--transcoder %s: a %s of layer %lld, but --layer is %lld", a->transcoder,
                      ffn_tc_kind_name(tcc->kind), (long long)tcc->layer, (long long)a->layer);
            ffn_tc_free(tc);
            return CLI_EXIT_FAIL;
        }
        if (tcc->layer >= L || tcc->d_model != c->hidden_size) {
            cli_error(cmd, "--transcoder %s: a %s of layer %lld of width %lld, but the model has %lld layers of "
                      "width %lld", a->transcoder, ffn_tc_kind_name(tcc->kind), (long long)tcc->layer,
                      (long long)tcc->d_model, (long long)L, (long long)c->hidden_size);
            ffn_tc_free(tc);
            return CLI_EXIT_FAIL;
        }
    }
    /* the scopes: neurons of each layer (or of --layer / the transcoder's
     * layer), of all layers together, and the features */
    scope sc[FFN_TRACE_SUMMARY_MAX_LAYERS + 2];
    int64_t n_sc = 0;
    memset(sc, 0, sizeof sc);
    const int64_t only = tc ? ffn_tc_get_config(tc)->layer : a->layer;
    for (int64_t l = 0; l < L && n_sc < FFN_TRACE_SUMMARY_MAX_LAYERS; l++) {
        if (only >= 0 && l != only) continue;
        if (c->mlp_type == FFN_MODEL_MLP_NONE || ffn_model_config_layer_is_moe(c, l)) continue;
        scope *s = &sc[n_sc++];
        snprintf(s->name, sizeof s->name, "layer %lld", (long long)l);
        s->kind = "neurons";
        s->layer = l;
        s->n_units = c->intermediate_size;
    }
    if (only < 0 && n_sc > 1) {
        scope *s = &sc[n_sc++];
        snprintf(s->name, sizeof s->name, "all layers");
        s->kind = "neurons";
        s->layer = -1;
        s->n_units = (n_sc - 1) * c->intermediate_size;
    }
    if (tc) {
        scope *s = &sc[n_sc++];
        const ffn_tc_config *tcc = ffn_tc_get_config(tc);
        snprintf(s->name, sizeof s->name, "%s %lld", tcc->kind == FFN_TC_KIND_SAE ? "sae" : "features",
                 (long long)tcc->layer);
        s->kind = ffn_tc_kind_name(tcc->kind);
        s->layer = tcc->layer;
        s->tc = tc;
        s->n_units = tcc->features;
    }
    if (n_sc == 0) {
        cli_error(cmd, "the model has no dense or gated FFN layer to ablate");
        ffn_tc_free(tc);
        return CLI_EXIT_FAIL;
    }
    /* the held-out text */
    char *text = NULL, what[4200];
    size_t n_bytes = 0;
    int32_t *tok = NULL;
    int64_t n_tok = 0, n_train = 0, n_val = 0;
    double base_loss = NAN;
    if (a->side && a->model_path) {
        st = edit_source_text(a->model_path, a->data, &text, &n_bytes, what, sizeof what);
        if (!st && text) st = ffn_vocab_encode(vocab, text, n_bytes, 0, &tok, &n_tok);
        free(text);
        if (!st && tok) st = ffn_tokens_split(n_tok, 0.1, &n_train, &n_val);
        if (!st && tok) st = ffn_ablation_loss(ctx, m, NULL, NULL, 0, tok + n_train, n_val, a->windows, &base_loss);
        if (st) {
            free(tok);
            ffn_tc_free(tc);
            return cli_fail(cmd, st);
        }
        if (!tok && !report)
            fprintf(stderr, "ffn %s: note: the model records no training text and --data is not given: no held-out "
                    "loss\n", cmd);
    }
    /* the facts' tokens, and which the model knows */
    fact_in *fi = calloc((size_t)n, sizeof *fi);
    int64_t present = 0;
    int rc = 0;
    where[0] = 0;
    if (!fi) st = NOMEM;
    for (int64_t i = 0; i < n && !st; i++) {
        const ffn_fact *f = &facts->facts[i];
        st = ffn_trace_prepare(vocab, f->prompt, f->subject, f->object, &fi[i].ids, &fi[i].T, NULL, NULL,
                               &fi[i].target);
        double p = 0;
        int32_t top = -1;
        if (!st) st = ffn_ablation_predict(ctx, m, NULL, NULL, 0, fi[i].ids, fi[i].T, fi[i].target, &p, &top);
        if (st) snprintf(where, sizeof where, "fact %lld (\"%.80s\"): ", (long long)f->id, f->prompt);
        else fi[i].present = is_present(a, p, top, fi[i].target);
        present += fi[i].present;
    }
    ffn_fact_dist_options o;
    ffn_fact_dist_options_default(&o);
    o.threshold = a->threshold;
    o.max_set = a->max_set;
    for (int64_t s = 0; s < n_sc && !st; s++) {
        sc[s].rows = calloc((size_t)n, sizeof *sc[s].rows);
        if (!sc[s].rows) st = NOMEM;
        else st = run_scope(ctx, m, fi, n, a, &o, tok ? tok + n_train : NULL, n_val, base_loss, &sc[s], s, n_sc);
    }
    if (st == NOMEM && !where[0]) {
        cli_error(cmd, "out of memory");
        rc = CLI_EXIT_FAIL;
    } else if (st) {
        cli_error(cmd, "%s%s", where, ffn_last_error());
        rc = CLI_EXIT_FAIL;
    } else if (!present && !report)
        fprintf(stderr, "ffn %s: warning: the model knows none of the %lld facts (%s): nothing to remove\n", cmd,
                (long long)n, a->threshold > 0 ? "p(object) >= the threshold" : "the object top-1");
    if (!rc && json) {
        if (report) fputs("\"fact_dist\":{", out);
        else fputc('{', out);
        json_all(out, sc, n_sc, facts, n, present, a, base_loss, per_fact);
        fputs(report ? "},\n" : "}\n", out);
    } else if (!rc) print_tables(sc, n_sc, n, present, a, base_loss);
    for (int64_t s = 0; s < n_sc; s++) {
        for (int64_t i = 0; sc[s].rows && i < n; i++) ffn_fact_dist_result_free(&sc[s].rows[i].r);
        free(sc[s].rows);
    }
    for (int64_t i = 0; fi && i < n; i++) free(fi[i].ids);
    free(fi);
    free(tok);
    ffn_tc_free(tc);
    return rc;
}

int trace_dist_run(const char *cmd, ffn_ctx *ctx, ffn_model *model, const ffn_vocab *vocab,
                   const ffn_facts *facts, int64_t n, const trace_dist_args *a, int json) {
    return run(cmd, ctx, model, vocab, facts, n, a, stdout, json, a->per_fact, 0);
}

int trace_dist_report_json(FILE *out, const char *cmd, ffn_ctx *ctx, const char *dir, int64_t n_facts) {
    ffn_model *model = NULL;
    ffn_vocab *vocab = NULL;
    ffn_facts *facts = NULL;
    ffn_checkpoint_info info;
    memset(&info, 0, sizeof info);
    ffn_model_options mo = {.max_batch = 1, .training = 1};
    ffn_status st = ffn_checkpoint_load_any(ctx, dir, &mo, &model, &info);
    if (!st && !info.tokenizer_path[0])
        st = FFN_ERR_MISSING;
    if (!st) st = ffn_vocab_load(info.tokenizer_path, ffn_model_get_config(model)->vocab_size, &vocab);
    if (!st) st = ffn_facts_generate(FFN_FACTS_DEFAULT, 1, &facts);
    int rc = 0;
    if (st) {
        cli_error(cmd, "fact ablation of %s: %s", dir,
                  st == FFN_ERR_MISSING && model && !info.tokenizer_path[0] ? "no vocabulary beside the weights"
                                                                            : ffn_last_error());
        rc = CLI_EXIT_FAIL;
    } else {
        trace_dist_args a;
        trace_dist_args_default(&a);
        a.model_path = dir;
        rc = run(cmd, ctx, model, vocab, facts, n_facts < facts->n_facts ? n_facts : facts->n_facts, &a, out, 1, 0,
                 1);
    }
    ffn_facts_free(facts);
    ffn_vocab_free(vocab);
    ffn_model_free(model);
    return rc;
}
