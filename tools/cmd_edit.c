/* cmd_edit.c -- `ffn edit`: change one fact a model knows (ROME, or the
 * fine-tuning baseline), score the edit, write the edited model; sweep the
 * layers; apply a list of edits one after another, or all at once over a
 * range of layers (MEMIT).  The work is in the
 * library (include/ffn/edit.h); this file loads the model, its vocabulary
 * and its text, parses flags and prints tables or JSON. */
#include "cli.h"
#include "edit_source.h"
#include "ffn/checkpoint.h"
#include "ffn/edit.h"
#include "ffn/safetensors.h"
#include "ffn/train.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const CMD = "edit";

static const char about[] =
"Edits one fact in a trained model and measures the edit.  ROME (Meng et al.,\n"
"2022) reads an FFN as a key-value memory: down_proj maps a key k (m, the\n"
"input of down_proj) to a value.  It takes k* = the mean key at the subject's\n"
"last token (over the prompt and the prompt after a few short texts the model\n"
"generates), finds a value v* that makes the target likely (Adam on a vector\n"
"added at that layer's FFN output, with a KL term on '{subject} is a' that\n"
"keeps the rest), and writes it with a rank-one update\n"
"  W += (v* - W k*) (C^-1 k*)^T / ((C^-1 k*)^T k*),  C = E[k k^T]\n"
"over the model's text (C + lambda I, by Cholesky), so that down_proj(k*) = v*\n"
"and other keys move little.  --method ft fine-tunes the same down_proj on\n"
"the fact with no constraint (the baseline).\n"
"\n"
"Scores (before and after): efficacy = p(new) > p(old) on the prompt;\n"
"generalisation = the same on paraphrases; specificity = neighbour prompts\n"
"still prefer their own object to the new one; and the held-out loss on\n"
"--data or the model's own training text.  With --facts F --fact ID the\n"
"prompt, subject, old object, paraphrases and neighbours come from a facts\n"
"file (JSON lines: id, subject, relation, prompt, object, paraphrases,\n"
"neighbours); with --prompt/--subject, efficacy against the model's own\n"
"prediction (plus --paraphrase / --neighbour when given).\n"
"\n"
"--sweep-layers edits at every layer with both methods and prints a table\n"
"(with --batch FILE: every edit of FILE alone, from the same weights, the\n"
"scores pooled over them; 'fit loss' is the mean target loss v* or FT\n"
"reached, so a low efficacy with a high fit loss is an edit the layer could\n"
"not make);\n"
"--batch FILE applies the edits of FILE (JSON lines: {\"fact\": ID, \"target\":\n"
"T} or {\"prompt\", \"subject\", \"target\", ...}) one after another and reports\n"
"the scores after 1, 2, 4, ... edits; with --method memit --layers A-B (MEMIT,\n"
"Meng et al. 2023) it writes them all at once: a value z = h + delta per edit\n"
"at the residual stream after layer B (delta fitted as ROME's v*, at the\n"
"subject's last token), then for each layer l = A..B in turn the keys K at l\n"
"and the residual still missing R / (B - l + 1), and\n"
"  dW_l = R K^T (W C_l + lambda I + K K^T)^-1   (W: --cov-weight)\n"
"on that layer's down_proj only; the scores are for the whole batch.\n"
"--method ft --layers A-B is the fine-tuning baseline of those papers (FT-L):\n"
"Adam (--ft-steps at --ft-lr) on the down_proj of layers A..B with the mean\n"
"target loss of the whole batch (each edit's bare prompt), every weight kept\n"
"within --ft-norm of its value before (the L-inf bound).  --compare --batch\n"
"FILE --layers A-B runs ROME (one edit after another at --layer L), FT-L and\n"
"MEMIT from the same loaded weights and prints their scores side by side.\n"
"MODEL is an ffn run directory or a\n"
"Hugging Face directory with its vocabulary; the edited model goes to --out\n"
"in the same layout (never MODEL itself).";

static const char epilog[] =
"output: a table on stdout (--json: one JSON object); exit 1 on failure, 2 on\n"
"bad usage.\n"
"examples:\n"
"  ffn edit m --facts facts.jsonl --fact 3 --target Osk --layer 1 --out m-edited\n"
"  ffn edit m --prompt 'Mira lives in' --subject Mira --target Osk --out m2\n"
"  ffn edit m --facts facts.jsonl --fact 3 --target Osk --sweep-layers --json\n"
"  ffn edit m --facts facts.jsonl --batch edits.jsonl --out m-many\n"
"  ffn edit m --facts facts.jsonl --batch edits.jsonl --method memit --layers 0-1\n"
"      --out m-memit\n"
"  ffn edit m --facts facts.jsonl --batch edits.jsonl --method ft --layers 0-1\n"
"  ffn edit m --facts facts.jsonl --batch edits.jsonl --compare --layers 0-1\n"
"      --layer 0\n";

static const char synopsis[] =
"MODEL (--prompt TEXT --subject S | --facts F --fact ID) --target T --out DIR\n"
"       ffn edit MODEL ... --sweep-layers\n"
"       ffn edit MODEL --batch FILE [--facts F] [--out DIR]\n"
"       ffn edit MODEL --batch FILE [--facts F] --sweep-layers\n"
"       ffn edit MODEL --batch FILE [--facts F] --method memit|ft --layers A-B\n"
"           [--out DIR]\n"
"       ffn edit MODEL --batch FILE [--facts F] --compare --layers A-B [--layer L]";

#define MAX_LIST 64

typedef struct args {
    const char *model, *prompt, *subject, *target, *old, *facts, *batch, *out, *data, *cache;
    const char *dump, *kl_prompt;
    const char *paraphrases[MAX_LIST], *neighbours[MAX_LIST];
    int n_paraphrases, n_neighbours;
    int64_t fact, layer, samples, windows, threads, seed, layer_first, layer_last;
    const char *layers;
    int fact_seen, json, force, sweep, method, method_seen, fit, compare;
    ffn_edit_options o;
} args;

static const char *const method_names[] = {"rome", "ft", "memit", NULL};
static const char *const fit_names[] = {"update", "subject", NULL};

/* ---- the model's text ------------------------------------------------------------ */

/* ---- printing ------------------------------------------------------------------------ */

/* nine digits: enough for a reader to recompute sums */
static void json_num(FILE *f, double v) { cli_json_number(f, v, "%.9g"); }

static const char *num(double v) { return cli_json_num(v, "%.9g"); }

static void json_scores(FILE *f, const ffn_edit_scores *s, double heldout) {
    fprintf(f, "{\"efficacy\": %s, \"generalisation\": %s, \"specificity\": %s, \"logp_new\": %s, "
            "\"logp_old\": %s, \"n_edits\": %lld, \"n_paraphrases\": %lld, \"n_neighbours\": %lld, "
            "\"heldout_loss\": %s}", num(s->efficacy), num(s->generalisation), num(s->specificity),
            num(s->logp_new), num(s->logp_old), (long long)s->n_edits, (long long)s->n_paraphrases,
            (long long)s->n_neighbours, num(heldout));
}

static void frac(char *buf, size_t cap, double v, int64_t n) {
    if (!isfinite(v)) snprintf(buf, cap, "-");
    else snprintf(buf, cap, "%.3f (%lld/%lld)", v, (long long)llround(v * (double)n),
                  (long long)n);
}

/* the end of an edit's JSON object: scores before and after, the output */
static void json_end(const ffn_edit_scores *b, double hb, const ffn_edit_scores *a, double ha,
                     const char *out) {
    printf(", \"before\": ");
    json_scores(stdout, b, hb);
    printf(", \"after\": ");
    json_scores(stdout, a, ha);
    printf(", \"out\": ");
    if (out) cli_json_string(stdout, out);
    else fputs("null", stdout);
    printf("}\n");
}

/* the before / after rows of efficacy, generalisation and specificity */
static void print_fractions(const ffn_edit_scores *b, const ffn_edit_scores *a) {
    char b1[48], b2[48];
    printf("  %-16s %-18s %s\n", "", "before", "after");
    frac(b1, sizeof b1, b->efficacy, b->n_edits);
    frac(b2, sizeof b2, a->efficacy, a->n_edits);
    printf("  %-16s %-18s %s\n", "efficacy", b1, b2);
    frac(b1, sizeof b1, b->generalisation, b->n_paraphrases);
    frac(b2, sizeof b2, a->generalisation, a->n_paraphrases);
    printf("  %-16s %-18s %s\n", "generalisation", b1, b2);
    frac(b1, sizeof b1, b->specificity, b->n_neighbours);
    frac(b2, sizeof b2, a->specificity, a->n_neighbours);
    printf("  %-16s %-18s %s\n", "specificity", b1, b2);
}

/* ---- the session: model, vocabulary, text ---------------------------------------- */

typedef edit_session session;

static int session_open(const args *a, session *s) {
    ffn_model_options mo = {.max_batch = 1, .training = 1};
    return edit_session_open(CMD, a->model, a->data, a->threads, &mo, 1,
                             "editing needs text prompts",
                             " (text for the keys' statistics and the held-out loss)", s);
}

static ffn_status session_restore(session *s) {
    memcpy(ffn_model_params(s->model, NULL), s->original, (size_t)s->n_params * sizeof(float));
    return ffn_model_params_changed(s->model);
}

static ffn_status heldout(session *s, const args *a, double *loss) {
    return ffn_edit_heldout_loss(s->model, s->tokens + s->n_train, s->n_tokens - s->n_train,
                                 a->windows, loss);
}

/* C for one layer of the unedited model (cached in $XDG_CACHE_HOME/ffn,
 * default ~/.cache/ffn, or in --cache); 0, or the exit status after
 * printing the error. */
static int covariance(session *s, const args *a, int64_t layer, double **C, int64_t *rows,
                      int *cached) {
    char name[96];
    snprintf(name, sizeof name, "model.layers.%lld.mlp.down_proj.weight", (long long)layer);
    const ffn_model_tensor *t = ffn_model_find_tensor(s->model, name);
    if (!t) {
        cli_error(CMD, "layer %lld has no dense or gated FFN (no %s); editing needs one",
                  (long long)layer, name);
        return CLI_EXIT_FAIL;
    }
    const int64_t F = t->shape[1];
    *C = malloc((size_t)(F * F) * sizeof **C);
    if (!*C) {
        cli_error(CMD, "out of memory (C: %lld x %lld)", (long long)F, (long long)F);
        return CLI_EXIT_FAIL;
    }
    char dir[4200];
    const char *cache = a->cache;
    if (!cache) { /* the user's cache directory: $XDG_CACHE_HOME/ffn, else ~/.cache/ffn */
        const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        if (xdg && xdg[0] == '/') snprintf(dir, sizeof dir, "%s/ffn", xdg);
        else if (home && home[0]) snprintf(dir, sizeof dir, "%s/.cache/ffn", home);
        else {
            cli_error(CMD, "no cache directory for C: neither XDG_CACHE_HOME nor HOME is set; "
                      "give --cache DIR");
            return CLI_EXIT_FAIL;
        }
        /* mkdir -p, private to the user */
        for (char *q = dir + 1; *q; q++) {
            if (*q != '/') continue;
            *q = 0;
            if (mkdir(dir, 0700) != 0 && errno != EEXIST) break;
            *q = '/';
        }
        if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
            cli_error(CMD, "%s: cannot create the cache directory: %s (give --cache DIR)", dir,
                      strerror(errno));
            return CLI_EXIT_FAIL;
        }
        cache = dir;
    }
    ffn_status st = ffn_edit_covariance_cached(s->model, layer, s->tokens, s->n_train, a->samples,
                                               cache, *C, rows, cached);
    return st ? cli_fail(CMD, st) : 0;
}

/* --out: the edited model in MODEL's layout; 0, or the exit status after
 * printing the error. */
static int save_out(const args *a, session *s) {
    if (!a->out) return 0;
    ffn_status st = ffn_edit_save(s->model, a->model, s->info.tokenizer_path,
                                  s->info.tokenizer_is_llama2c, a->out, a->force);
    return st ? cli_fail(CMD, st) : 0;
}

/* ---- a batch: the edits of --batch FILE ------------------------------------------------ */

typedef struct batch {
    ffn_edit_list *el;
    ffn_edit_request *reqs; /* (n) */
    const char **oldp;      /* (n) the objects the edits replaced, for scoring after */
    int64_t n;
} batch;

static void batch_free(batch *b) {
    free(b->reqs);
    free(b->oldp);
    ffn_edit_list_free(b->el);
}

/* The edits of --batch FILE into b (freed by batch_free whatever this
 * returns); 0, or the exit status after printing the error. */
static int batch_open(batch *b, const args *a, const ffn_facts *facts) {
    memset(b, 0, sizeof *b);
    ffn_status st = ffn_edit_list_load(a->batch, facts, &b->el);
    if (st) return cli_fail(CMD, st);
    b->n = ffn_edit_list_count(b->el);
    b->reqs = calloc((size_t)(b->n ? b->n : 1), sizeof *b->reqs);
    b->oldp = calloc((size_t)(b->n ? b->n : 1), sizeof *b->oldp);
    if (!b->reqs || !b->oldp) {
        cli_error(CMD, "out of memory");
        return CLI_EXIT_FAIL;
    }
    if (b->n < 1) {
        cli_error(CMD, "%s: no edits in the file", a->batch);
        return CLI_EXIT_FAIL;
    }
    for (int64_t i = 0; i < b->n; i++) b->reqs[i] = *ffn_edit_list_at(b->el, i);
    return 0;
}

/* The scores of the first n edits of b with the model as it is now (old:
 * the objects they replaced, NULL before any edit) and the held-out loss. */
static ffn_status batch_score(const batch *b, int64_t n, session *s, const args *a,
                              const char *const *old, ffn_edit_scores *sc, double *ho) {
    ffn_status st = ffn_edit_score(s->model, s->vocab, b->reqs, n, old, sc);
    return st ? st : heldout(s, a, ho);
}

/* The batch edited at once (FT-L, MEMIT): its old objects into b->oldp,
 * the scores after into *after and *ha; 0, or the exit status after
 * printing the error. */
static int batch_after(batch *b, session *s, const args *a, char (*old_objects)[64],
                       ffn_edit_scores *after, double *ha) {
    for (int64_t i = 0; i < b->n; i++) b->oldp[i] = old_objects[i];
    ffn_status st = batch_score(b, b->n, s, a, b->oldp, after, ha);
    return st ? cli_fail(CMD, st) : 0;
}

/* the text report's last rows for a batch edited at once */
static void print_batch_end(const args *a, const ffn_edit_scores *before, double hb,
                            const ffn_edit_scores *after, double ha) {
    print_fractions(before, after);
    printf("  %-16s %-18.4f %.4f (%+.4f)\n", "held-out loss", hb, ha, ha - hb);
    if (a->out) printf("wrote %s\n", a->out);
}

/* ---- one edit ----------------------------------------------------------------------- */

static int dump_edit(const char *path, const ffn_edit_result *r, const double *C,
                     const float *W_before, const float *W_after, const float *bias) {
    ffn_st_writer *w = NULL;
    ffn_status st = ffn_st_writer_create(&w);
    int64_t sF[1] = {r->F}, sD[1] = {r->D}, sFF[2] = {r->F, r->F}, sDF[2] = {r->D, r->F};
    int64_t s1[1] = {1};
    double lam = r->lambda;
    if (!st) st = ffn_st_writer_add(w, "k_star", FFN_DTYPE_F32, 1, sF, r->k_star);
    if (!st) st = ffn_st_writer_add(w, "v_star", FFN_DTYPE_F32, 1, sD, r->v_star);
    if (!st) st = ffn_st_writer_add(w, "v_old", FFN_DTYPE_F32, 1, sD, r->v_old);
    if (!st && C) st = ffn_st_writer_add(w, "C", FFN_DTYPE_F64, 2, sFF, C);
    if (!st) st = ffn_st_writer_add(w, "W_before", FFN_DTYPE_F32, 2, sDF, W_before);
    if (!st) st = ffn_st_writer_add(w, "W_after", FFN_DTYPE_F32, 2, sDF, W_after);
    if (!st && bias) st = ffn_st_writer_add(w, "bias", FFN_DTYPE_F32, 1, sD, bias);
    if (!st) st = ffn_st_writer_add(w, "lambda", FFN_DTYPE_F64, 1, s1, &lam);
    if (!st) st = ffn_st_writer_save(w, path);
    ffn_st_writer_free(w);
    return st ? cli_fail(CMD, st) : 0;
}

static int run_single(args *a, session *s, const ffn_edit_request *req) {
    ffn_status st;
    double *C = NULL;
    int64_t rows = 0;
    int cached = 0;
    if (a->o.method == FFN_EDIT_ROME && covariance(s, a, a->o.layer, &C, &rows, &cached)) {
        free(C);
        return CLI_EXIT_FAIL;
    }
    ffn_edit_scores before, after;
    double hb = NAN, ha = NAN;
    if ((st = ffn_edit_score(s->model, s->vocab, req, 1, NULL, &before)) ||
        (st = heldout(s, a, &hb))) {
        free(C);
        return cli_fail(CMD, st);
    }
    char name[96];
    snprintf(name, sizeof name, "model.layers.%lld.mlp.down_proj", (long long)a->o.layer);
    char wname[128], bname[128];
    snprintf(wname, sizeof wname, "%s.weight", name);
    snprintf(bname, sizeof bname, "%s.bias", name);
    ffn_edit_result r;
    if ((st = ffn_edit_apply(s->model, s->vocab, req, &a->o, C, &r))) {
        free(C);
        return cli_fail(CMD, st);
    }
    const char *olds[1] = {r.old_object};
    int rc = 0;
    if ((st = ffn_edit_score(s->model, s->vocab, req, 1, olds, &after)) ||
        (st = heldout(s, a, &ha)))
        rc = cli_fail(CMD, st);
    if (!rc && a->dump) {
        const ffn_model_tensor *t = ffn_model_find_tensor(s->model, wname);
        const ffn_model_tensor *tb = ffn_model_find_tensor(s->model, bname);
        const float *p = ffn_model_params(s->model, NULL);
        rc = dump_edit(a->dump, &r, C, s->original + t->offset, p + t->offset,
                       tb ? p + tb->offset : NULL);
    }
    if (!rc) rc = save_out(a, s);
    if (!rc) {
        /* down_proj(k*) after the edit, against v* */
        const ffn_model_tensor *t = ffn_model_find_tensor(s->model, wname);
        const ffn_model_tensor *tb = ffn_model_find_tensor(s->model, bname);
        const float *p = ffn_model_params(s->model, NULL);
        double err = 0, vn = 0;
        for (int64_t d = 0; d < r.D; d++) {
            double y = tb ? p[tb->offset + d] : 0;
            for (int64_t f = 0; f < r.F; f++)
                y += (double)p[t->offset + d * r.F + f] * r.k_star[f];
            err = fmax(err, fabs(y - r.v_star[d]));
            vn = fmax(vn, fabs(r.v_star[d]));
        }
        const char *method = ffn_edit_method_name(a->o.method);
        /* an edit that leaves the prompt preferring the old object, or that
         * hardly moves p(target), has not taken: say so rather than print a
         * table of unchanged scores */
        const double p_new0 = exp(before.logp_new), p_new1 = exp(after.logp_new);
        if (!(after.efficacy > 0.5) || (p_new1 - p_new0 < 0.01 && p_new1 < 2 * p_new0))
            fprintf(stderr, "ffn edit: warning: the edit did not take: p(target) %.4g -> %.4g, "
                    "p(old '%s') %.4g -> %.4g; try another --layer (--sweep-layers shows every "
                    "one) or a model that knows the fact (ffn train --corpus facts)\n",
                    p_new0, p_new1, r.old_object,
                    exp(before.logp_old), exp(after.logp_old));
        if (a->json) {
            printf("{\"method\": \"%s\", \"layer\": %lld, \"target\": ", method,
                   (long long)a->o.layer);
            cli_json_string(stdout, req->target);
            printf(", \"old\": ");
            cli_json_string(stdout, r.old_object);
            printf(", \"steps\": %lld, \"loss_first\": ", (long long)r.steps_run);
            json_num(stdout, r.loss_first);
            printf(", \"loss_last\": ");
            json_num(stdout, r.loss_last);
            printf(", \"kl_last\": ");
            json_num(stdout, r.kl_last);
            printf(", \"kl_subject_only\": %s", r.kl_subject_only ? "true" : "false");
            printf(", \"lambda\": ");
            json_num(stdout, r.lambda);
            printf(", \"cov_samples\": %lld, \"cov_cached\": %s", (long long)rows,
                   cached ? "true" : "false");
            printf(", \"max_abs_down_kstar_minus_vstar\": ");
            json_num(stdout, err);
            json_end(&before, hb, &after, ha, a->out);
        } else {
            printf("edit '%s' -> '%s' (old '%s') with %s at layer %lld\n", req->prompt,
                   req->target, r.old_object, method, (long long)a->o.layer);
            if (a->o.method == FFN_EDIT_ROME)
                printf("  C from %lld keys of %s%s, lambda %.3g; v*: %lld Adam steps, target "
                       "loss %.4f -> %.4f, KL %.4f%s\n",
                       (long long)rows, s->text_what, cached ? " (cached)" : "", r.lambda,
                       (long long)r.steps_run, r.loss_first, r.loss_last, r.kl_last,
                       r.kl_subject_only ? " (KL prompt: the subject alone)" : "");
            else
                printf("  fine-tuning down_proj: %lld Adam steps, target loss %.4f -> %.4f\n",
                       (long long)r.steps_run, r.loss_first, r.loss_last);
            printf("  max |down_proj(k*) - v*| = %.3g (|v*| up to %.3g)\n", err, vn);
            print_fractions(&before, &after);
            printf("  %-16s %-18.4f %.4f\n", "log p(new)", before.logp_new, after.logp_new);
            printf("  %-16s %-18.4f %.4f\n", "log p(old)", before.logp_old, after.logp_old);
            printf("  %-16s %-18.4f %.4f (%+.4f)\n", "held-out loss", hb, ha, ha - hb);
            if (a->out) printf("wrote %s\n", a->out);
        }
    }
    ffn_edit_result_free(&r);
    free(C);
    return rc;
}

/* ---- every layer, both methods ------------------------------------------------------ */

/* Scores of n edits made one at a time from the same weights, pooled:
 * efficacy over the edits, generalisation over all their paraphrases,
 * specificity over all their neighbours, log p and held-out loss means. */
typedef struct pooled {
    double eff, gen, spec, logp_new, logp_old, heldout, loss_last;
    int64_t n, n_par, n_nb;
} pooled;

static void pool_add(pooled *p, const ffn_edit_scores *sc, double heldout) {
    p->eff += sc->efficacy;
    if (sc->n_paraphrases) p->gen += sc->generalisation * (double)sc->n_paraphrases;
    if (sc->n_neighbours) p->spec += sc->specificity * (double)sc->n_neighbours;
    p->logp_new += sc->logp_new;
    p->logp_old += sc->logp_old;
    p->heldout += heldout;
    p->n++;
    p->n_par += sc->n_paraphrases;
    p->n_nb += sc->n_neighbours;
}

static ffn_edit_scores pool_scores(const pooled *p, double *heldout) {
    ffn_edit_scores sc;
    memset(&sc, 0, sizeof sc);
    const double n = (double)p->n;
    sc.efficacy = p->n ? p->eff / n : NAN;
    sc.generalisation = p->n_par ? p->gen / (double)p->n_par : NAN;
    sc.specificity = p->n_nb ? p->spec / (double)p->n_nb : NAN;
    sc.logp_new = p->logp_new / n;
    sc.logp_old = p->logp_old / n;
    sc.n_edits = p->n;
    sc.n_paraphrases = p->n_par;
    sc.n_neighbours = p->n_nb;
    *heldout = p->heldout / n;
    return sc;
}

/* Every layer, both methods, each of the n requests alone from the
 * weights as loaded. */
static int run_sweep(args *a, session *s, const ffn_edit_request *reqs, int64_t n) {
    const ffn_model_config *c = ffn_model_get_config(s->model);
    const int64_t L = c->num_hidden_layers;
    if (a->json) {
        printf("{\"target\": ");
        if (n == 1) cli_json_string(stdout, reqs[0].target);
        else fputs("null", stdout);
        printf(", \"n_edits\": %lld, \"rows\": [", (long long)n);
    } else {
        if (n > 1) printf("%lld edits, each alone from the same weights; scores pooled\n",
                          (long long)n);
        printf("%-6s %-6s %-14s %-15s %-15s %-10s %-9s %s\n", "layer", "method", "efficacy",
               "generalisation", "specificity", "log p(new)", "d loss", "fit loss");
    }
    double hb;
    ffn_status st = heldout(s, a, &hb);
    if (st) return cli_fail(CMD, st);
    int first = 1;
    for (int64_t l = 0; l < L; l++) {
        if (ffn_model_config_layer_is_moe(c, l) || c->mlp_type == FFN_MODEL_MLP_NONE) continue;
        double *C = NULL;
        if (covariance(s, a, l, &C, NULL, NULL)) {
            free(C);
            return CLI_EXIT_FAIL;
        }
        for (int m = 0; m < 2 && !st; m++) {
            if (a->method_seen && m != a->method) continue;
            ffn_edit_options o = a->o;
            o.layer = l;
            o.method = (ffn_edit_method)m;
            pooled pl;
            memset(&pl, 0, sizeof pl);
            for (int64_t i = 0; i < n && !st; i++) {
                ffn_edit_result r;
                ffn_edit_scores sc;
                double ha = NAN;
                if ((st = ffn_edit_apply(s->model, s->vocab, &reqs[i], &o, C, &r))) break;
                const char *olds[1] = {r.old_object};
                st = ffn_edit_score(s->model, s->vocab, &reqs[i], 1, olds, &sc);
                if (!st) st = heldout(s, a, &ha);
                const double loss_last = r.loss_last;
                ffn_edit_result_free(&r);
                if (!st) st = session_restore(s);
                if (!st) pool_add(&pl, &sc, ha);
                pl.loss_last += loss_last;
            }
            if (st) break;
            double ha;
            ffn_edit_scores sc = pool_scores(&pl, &ha);
            if (a->json) {
                printf("%s{\"layer\": %lld, \"method\": \"%s\", \"scores\": ", first ? "" : ", ",
                       (long long)l, ffn_edit_method_name(o.method));
                json_scores(stdout, &sc, ha);
                printf(", \"heldout_delta\": ");
                json_num(stdout, ha - hb);
                printf(", \"loss_last\": ");
                json_num(stdout, pl.loss_last / (double)n);
                printf("}");
            } else {
                char e[32], g[32], sp[32];
                frac(e, sizeof e, sc.efficacy, sc.n_edits);
                frac(g, sizeof g, sc.generalisation, sc.n_paraphrases);
                frac(sp, sizeof sp, sc.specificity, sc.n_neighbours);
                printf("%-6lld %-6s %-14s %-15s %-15s %-10.4f %+-9.4f %.4f\n", (long long)l,
                       ffn_edit_method_name(o.method), e, g, sp, sc.logp_new, ha - hb,
                       pl.loss_last / (double)n);
            }
            fflush(stdout);
            first = 0;
        }
        free(C);
        if (st) return cli_fail(CMD, st);
    }
    if (a->json)
        printf("], \"heldout_before\": %s}\n", cli_json_num(hb, "%.6g"));
    return 0;
}

/* ---- many edits one after another --------------------------------------------------- */

static int run_batch(args *a, session *s, const ffn_facts *facts) {
    batch b;
    double *C = NULL;
    int rc = batch_open(&b, a, facts);
    if (!rc && a->o.method == FFN_EDIT_ROME && covariance(s, a, a->o.layer, &C, NULL, NULL))
        rc = CLI_EXIT_FAIL;
    char(*olds)[64] = rc ? NULL : calloc((size_t)b.n, sizeof *olds);
    if (!rc && !olds) {
        cli_error(CMD, "out of memory");
        rc = CLI_EXIT_FAIL;
    }
    if (rc) {
        free(C);
        batch_free(&b);
        return rc;
    }
    double hb = NAN;
    ffn_status st = heldout(s, a, &hb);
    if (a->json)
        printf("{\"method\": \"%s\", \"layer\": %lld, \"heldout_before\": %s, \"rows\": [",
               ffn_edit_method_name(a->o.method), (long long)a->o.layer, cli_json_num(hb, "%.6g"));
    else if (!st)
        printf("%-6s %-10s %-15s %-12s %-10s\n", "edits", "efficacy", "generalisation",
               "specificity", "held-out");
    int64_t next = 1;
    const int64_t n = b.n;
    for (int64_t i = 0; i < n && !st; i++) {
        ffn_edit_result r;
        if ((st = ffn_edit_apply(s->model, s->vocab, &b.reqs[i], &a->o, C, &r))) break;
        snprintf(olds[i], sizeof olds[i], "%s", r.old_object);
        b.oldp[i] = olds[i];
        ffn_edit_result_free(&r);
        if (i + 1 == next || i + 1 == n) {
            ffn_edit_scores sc;
            double ha;
            if ((st = batch_score(&b, i + 1, s, a, b.oldp, &sc, &ha))) break;
            if (a->json) {
                printf("%s{\"edits\": %lld, \"scores\": ", i ? ", " : "", (long long)(i + 1));
                json_scores(stdout, &sc, ha);
                printf("}");
            } else {
                char g[32], sp[32];
                frac(g, sizeof g, sc.generalisation, sc.n_paraphrases);
                frac(sp, sizeof sp, sc.specificity, sc.n_neighbours);
                printf("%-6lld %-10.3f %-15s %-12s %.4f\n", (long long)(i + 1), sc.efficacy, g, sp,
                       ha);
            }
            while (next <= i + 1) next *= 2;
        }
    }
    if (a->json) printf("]}\n");
    if (st) rc = cli_fail(CMD, st);
    if (!rc) rc = save_out(a, s);
    if (!rc && a->out && !a->json) printf("wrote %s\n", a->out);
    free(olds);
    free(C);
    batch_free(&b);
    return rc;
}

/* --sweep-layers --batch FILE: the sweep over every edit of FILE, each alone. */
static int run_sweep_batch(args *a, session *s, const ffn_facts *facts) {
    batch b;
    int rc = batch_open(&b, a, facts);
    if (!rc) rc = run_sweep(a, s, b.reqs, b.n);
    batch_free(&b);
    return rc;
}
/* ---- MEMIT: the batch at once over --layers ------------------------------------------ */

static int dump_memit(const char *path, const ffn_memit_result *r, double *const *C,
                      const session *s) {
    ffn_st_writer *w = NULL;
    ffn_status st = ffn_st_writer_create(&w);
    const float *p = ffn_model_params(s->model, NULL);
    int64_t sK[2] = {r->n, r->F}, sR[2] = {r->n, r->D}, sFF[2] = {r->F, r->F};
    int64_t sDF[2] = {r->D, r->F}, s1[1] = {1};
    for (int64_t j = 0; !st && j < r->n_layers; j++) {
        const ffn_memit_layer *ly = &r->layers[j];
        char name[96], key[128];
        snprintf(name, sizeof name, "model.layers.%lld.mlp.down_proj.weight", (long long)ly->layer);
        const ffn_model_tensor *t = ffn_model_find_tensor(s->model, name);
#define MEMIT_ADD(field, dt, nd, shape, data)                                             \
    if (!st) {                                                                            \
        snprintf(key, sizeof key, "L%lld.%s", (long long)ly->layer, field);               \
        st = ffn_st_writer_add(w, key, dt, nd, shape, data);                              \
    }
        MEMIT_ADD("K", FFN_DTYPE_F64, 2, sK, ly->K)
        MEMIT_ADD("R", FFN_DTYPE_F64, 2, sR, ly->R)
        MEMIT_ADD("C", FFN_DTYPE_F64, 2, sFF, C[j])
        MEMIT_ADD("dW", FFN_DTYPE_F64, 2, sDF, ly->dW)
        MEMIT_ADD("lambda", FFN_DTYPE_F64, 1, s1, &ly->lambda)
        MEMIT_ADD("W_before", FFN_DTYPE_F32, 2, sDF, s->original + t->offset)
        MEMIT_ADD("W_after", FFN_DTYPE_F32, 2, sDF, p + t->offset)
#undef MEMIT_ADD
    }
    if (!st) st = ffn_st_writer_save(w, path);
    ffn_st_writer_free(w);
    return st ? cli_fail(CMD, st) : 0;
}

/* ---- FT-L: the batch at once by fine-tuning --layers, L-inf bounded --------------------- */

/* --dump of --method ft --layers: the down_projs before, the first step's
 * gradient, after; the step's settings (for checking one step) */
static int dump_ft(const char *path, const ffn_ft_result *r, const args *a, session *s) {
    ffn_st_writer *w = NULL;
    ffn_status st = ffn_st_writer_create(&w);
    const int64_t DF = r->D * r->F;
    float *Wa = malloc((size_t)(r->n_layers * DF) * sizeof *Wa);
    if (!Wa) st = FFN_ERR_NOMEM;
    float *params = ffn_model_params(s->model, NULL);
    for (int64_t j = 0; !st && j < r->n_layers; j++) {
        char name[96];
        snprintf(name, sizeof name, "model.layers.%lld.mlp.down_proj.weight",
                 (long long)(a->layer_first + j));
        const ffn_model_tensor *t = ffn_model_find_tensor(s->model, name);
        memcpy(Wa + j * DF, params + t->offset, (size_t)DF * sizeof *Wa);
    }
    const int64_t shape[3] = {r->n_layers, r->D, r->F};
    if (!st) st = ffn_st_writer_add(w, "W_before", FFN_DTYPE_F32, 3, shape, r->W_before);
    if (!st) st = ffn_st_writer_add(w, "grad_first", FFN_DTYPE_F32, 3, shape, r->grad_first);
    if (!st) st = ffn_st_writer_add(w, "W_after", FFN_DTYPE_F32, 3, shape, Wa);
    char meta[256];
    snprintf(meta, sizeof meta, "{\"lr\": %.17g, \"norm\": %.17g, \"steps\": %lld}", a->o.ft_lr,
             a->o.ft_norm, (long long)r->steps_run);
    if (!st) st = ffn_st_writer_set_metadata(w, "ffn_ft", meta);
    if (!st) st = ffn_st_writer_save(w, path);
    ffn_st_writer_free(w);
    free(Wa);
    return st ? cli_fail(CMD, st) : 0;
}

/* What --method ft --layers prints before the scores. */
static void print_ft(const args *a, const ffn_ft_result *r, int64_t n) {
    if (a->json) {
        printf("{\"method\": \"ft\", \"layers\": [%lld, %lld], \"n_edits\": %lld, \"ft_norm\": ",
               (long long)a->layer_first, (long long)a->layer_last, (long long)n);
        json_num(stdout, a->o.ft_norm);
        printf(", \"steps_run\": %lld, \"loss_first\": ", (long long)r->steps_run);
        json_num(stdout, r->loss_first);
        printf(", \"loss_last\": ");
        json_num(stdout, r->loss_last);
        printf(", \"max_change\": ");
        json_num(stdout, r->max_change);
    } else {
        printf("ft: %lld edits, down_proj of layers %lld-%lld fine-tuned (%lld Adam steps, lr %g, "
               "|dW| <= %g)\n", (long long)n, (long long)a->layer_first, (long long)a->layer_last,
               (long long)r->steps_run, a->o.ft_lr, a->o.ft_norm);
        printf("  target loss %.4f -> %.4f; max |dW| %.3g\n", r->loss_first, r->loss_last,
               r->max_change);
    }
}

/* ---- --compare: ROME one after another, FT-L and MEMIT on the same batch ---------------- */

static int run_compare(args *a, session *s, const ffn_facts *facts) {
    batch b;
    int rc = batch_open(&b, a, facts);
    const int64_t n = b.n, NL = a->layer_last - a->layer_first + 1;
    int64_t np = 0;
    float *params = ffn_model_params(s->model, &np);
    float *keep = rc ? NULL : malloc((size_t)np * sizeof *keep);
    char(*olds)[64] = rc ? NULL : calloc((size_t)n, sizeof *olds);
    double **C = rc ? NULL : calloc((size_t)NL, sizeof *C), *C_rome = NULL;
    if (!rc && (!keep || !olds || !C)) {
        cli_error(CMD, "out of memory");
        rc = CLI_EXIT_FAIL;
    }
    const int64_t rome_layer = a->o.layer;
    for (int64_t j = 0; !rc && j < NL; j++) rc = covariance(s, a, a->layer_first + j, &C[j], NULL, NULL);
    if (!rc) rc = covariance(s, a, rome_layer, &C_rome, NULL, NULL);
    if (!rc) memcpy(keep, params, (size_t)np * sizeof *keep);
    ffn_edit_scores before, sc[3];
    double hb = NAN, ha[3] = {NAN, NAN, NAN};
    ffn_status st = FFN_OK;
    if (!rc && (st = batch_score(&b, n, s, a, NULL, &before, &hb))) rc = cli_fail(CMD, st);
    static const char *const names[3] = {"rome", "ft", "memit"};
    for (int k = 0; k < 3 && !rc; k++) {
        ffn_edit_options o = a->o;
        if (k == 0) { /* ROME, one edit after another at --layer */
            o.method = FFN_EDIT_ROME;
            for (int64_t i = 0; i < n && !st; i++) {
                ffn_edit_result r;
                if ((st = ffn_edit_apply(s->model, s->vocab, &b.reqs[i], &o, C_rome, &r))) break;
                snprintf(olds[i], sizeof olds[i], "%s", r.old_object);
                ffn_edit_result_free(&r);
            }
        } else if (k == 1) {
            ffn_ft_result r;
            if (!(st = ffn_edit_ft_batch(s->model, s->vocab, b.reqs, n, a->layer_first,
                                         a->layer_last, &o, &r)))
                for (int64_t i = 0; i < n; i++) snprintf(olds[i], sizeof olds[i], "%s", r.old_objects[i]);
            ffn_ft_result_free(&r);
        } else {
            ffn_memit_result r;
            if (!(st = ffn_edit_memit(s->model, s->vocab, b.reqs, n, a->layer_first, a->layer_last,
                                      &o, (const double *const *)C, &r)))
                for (int64_t i = 0; i < n; i++) snprintf(olds[i], sizeof olds[i], "%s", r.old_objects[i]);
            ffn_memit_result_free(&r);
        }
        for (int64_t i = 0; i < n; i++) b.oldp[i] = olds[i];
        if (!st) st = batch_score(&b, n, s, a, b.oldp, &sc[k], &ha[k]);
        memcpy(params, keep, (size_t)np * sizeof *keep); /* the next method from the same weights */
        if (!st) st = ffn_model_params_changed(s->model);
        if (st) rc = cli_fail(CMD, st);
    }
    if (!rc && a->json) {
        printf("{\"n_edits\": %lld, \"rome_layer\": %lld, \"layers\": [%lld, %lld], \"before\": ",
               (long long)n, (long long)rome_layer, (long long)a->layer_first,
               (long long)a->layer_last);
        json_scores(stdout, &before, hb);
        printf(", \"methods\": [");
        for (int k = 0; k < 3; k++) {
            printf("%s{\"method\": \"%s\", \"scores\": ", k ? ", " : "", names[k]);
            json_scores(stdout, &sc[k], ha[k]);
            printf(", \"heldout_change\": ");
            json_num(stdout, ha[k] - hb);
            printf("}");
        }
        printf("]}\n");
    } else if (!rc) {
        printf("%lld edits; rome one after another at layer %lld, ft (|dW| <= %g) and memit over "
               "layers %lld-%lld, each from the same weights\n", (long long)n,
               (long long)rome_layer, a->o.ft_norm, (long long)a->layer_first,
               (long long)a->layer_last);
        printf("%-8s %-10s %-15s %-12s %s\n", "method", "efficacy", "generalisation",
               "specificity", "held-out change");
        for (int k = -1; k < 3; k++) {
            const ffn_edit_scores *e = k < 0 ? &before : &sc[k];
            char g[32], sp[32];
            frac(g, sizeof g, e->generalisation, e->n_paraphrases);
            frac(sp, sizeof sp, e->specificity, e->n_neighbours);
            printf("%-8s %-10.3f %-15s %-12s ", k < 0 ? "before" : names[k], e->efficacy, g, sp);
            if (k < 0) printf("(held-out loss %.4f)\n", hb);
            else printf("%+.4f\n", ha[k] - hb);
        }
    }
    for (int64_t j = 0; C && j < NL; j++) free(C[j]);
    free(C);
    free(C_rome);
    free(keep);
    free(olds);
    batch_free(&b);
    return rc;
}

/* What --method memit prints before the scores (C from `rows` keys). */
static void print_memit(const args *a, const session *s, const ffn_memit_result *r, int64_t n,
                        int64_t rows) {
    if (a->json) {
        printf("{\"method\": \"memit\", \"layers\": [%lld, %lld], \"n_edits\": %lld",
               (long long)a->layer_first, (long long)a->layer_last, (long long)n);
        printf(", \"cov_weight\": ");
        json_num(stdout, a->o.cov_weight);
        printf(", \"cov_samples\": %lld, \"loss_first\": ", (long long)rows);
        json_num(stdout, r->loss_first);
        printf(", \"loss_last\": ");
        json_num(stdout, r->loss_last);
        printf(", \"resid_first\": ");
        json_num(stdout, r->resid_first);
        printf(", \"resid_last\": ");
        json_num(stdout, r->resid_last);
    } else {
        printf("memit: %lld edits over layers %lld-%lld (C from %lld keys of %s, weight %g)\n",
               (long long)n, (long long)a->layer_first, (long long)a->layer_last,
               (long long)rows, s->text_what, a->o.cov_weight);
        printf("  v* fits: target loss %.4f -> %.4f; mean |z - h| %.4f -> %.4f\n", r->loss_first,
               r->loss_last, r->resid_first, r->resid_last);
    }
}

/* --method ft or memit over --layers: the batch at once, scored before and
 * after, --dump, --out, then the method's lines and the scores. */
static int run_layers_batch(args *a, session *s, const ffn_facts *facts) {
    const int memit = a->o.method == FFN_EDIT_MEMIT;
    batch b;
    int rc = batch_open(&b, a, facts);
    const int64_t n = b.n, NL = a->layer_last - a->layer_first + 1;
    double **C = rc || !memit ? NULL : calloc((size_t)NL, sizeof *C);
    if (!rc && memit && !C) {
        cli_error(CMD, "out of memory");
        rc = CLI_EXIT_FAIL;
    }
    int64_t rows = 0;
    for (int64_t j = 0; memit && !rc && j < NL; j++)
        rc = covariance(s, a, a->layer_first + j, &C[j], &rows, NULL);
    ffn_edit_scores before, after;
    double hb = NAN, ha = NAN;
    ffn_ft_result ft;
    ffn_memit_result mr;
    memset(&ft, 0, sizeof ft);
    memset(&mr, 0, sizeof mr);
    ffn_status st;
    if (!rc && ((st = batch_score(&b, n, s, a, NULL, &before, &hb)) ||
                (st = memit ? ffn_edit_memit(s->model, s->vocab, b.reqs, n, a->layer_first,
                                             a->layer_last, &a->o, (const double *const *)C, &mr)
                            : ffn_edit_ft_batch(s->model, s->vocab, b.reqs, n, a->layer_first,
                                                a->layer_last, &a->o, &ft))))
        rc = cli_fail(CMD, st);
    if (!rc) rc = batch_after(&b, s, a, memit ? mr.old_objects : ft.old_objects, &after, &ha);
    if (!rc && a->dump) rc = memit ? dump_memit(a->dump, &mr, C, s) : dump_ft(a->dump, &ft, a, s);
    if (!rc) rc = save_out(a, s);
    if (!rc) {
        if (memit) print_memit(a, s, &mr, n, rows);
        else print_ft(a, &ft, n);
        if (a->json) json_end(&before, hb, &after, ha, a->out);
        else print_batch_end(a, &before, hb, &after, ha);
    }
    ffn_ft_result_free(&ft);
    ffn_memit_result_free(&mr);
    for (int64_t j = 0; C && j < NL; j++) free(C[j]);
    free(C);
    batch_free(&b);
    return rc;
}
/* ---- the command ---------------------------------------------------------------------- */

int cmd_edit(int argc, char **argv) {
    args a;
    memset(&a, 0, sizeof a);
    ffn_edit_options_default(&a.o);
    a.layer = 0;
    a.samples = 2000;
    a.windows = 8;
    a.seed = (int64_t)a.o.seed;
    a.kl_prompt = a.o.kl_prompt;
    int layer_seen = 0;
    const cli_opt opts[] = {
        {.name = "--prompt", .type = CLI_STR, .dst = &a.prompt, .metavar = "TEXT",
         .help = "the prompt whose continuation changes ('Mira lives in')", .group = "the fact"},
        {.name = "--subject", .type = CLI_STR, .dst = &a.subject, .metavar = "S",
         .help = "the subject, a part of the prompt; the edit reads its last token"},
        {.name = "--target", .type = CLI_STR, .dst = &a.target, .metavar = "T",
         .help = "the new object (word-level vocabularies: a word they have)"},
        {.name = "--old", .type = CLI_STR, .dst = &a.old, .metavar = "O", .def = "the model's "
         "prediction", .help = "the old object that efficacy compares against"},
        {.name = "--paraphrase", .type = CLI_STR, .dst = a.paraphrases, .metavar = "TEXT",
         .max_count = MAX_LIST, .count = &a.n_paraphrases, .def = "",
         .help = "a held-out paraphrase of the prompt (repeatable)"},
        {.name = "--neighbour", .type = CLI_STR, .dst = a.neighbours, .metavar = "PROMPT|OBJECT",
         .max_count = MAX_LIST, .count = &a.n_neighbours, .def = "",
         .help = "a neighbour fact that must keep its object, prompt and object joined by '|' "
                 "(repeatable)"},
        {.name = "--facts", .type = CLI_PATH, .dst = &a.facts, .metavar = "FILE",
         .help = "a facts file (JSON lines, as `ffn corpus --facts --json` prints)"},
        {.name = "--fact", .type = CLI_INT, .dst = &a.fact, .metavar = "ID", .imin = 0,
         .imax = INT64_MAX, .seen = &a.fact_seen, .def = "",
         .help = "the fact of --facts to edit: its prompt, subject, object, paraphrases and "
                 "neighbours"},
        {.name = "--batch", .type = CLI_PATH, .dst = &a.batch, .metavar = "FILE",
         .help = "apply the edits of FILE one after another and report the scores after 1, 2, "
                 "4, ... edits"},
        {.name = "--layer", .type = CLI_INT, .dst = &a.layer, .metavar = "L", .imin = 0,
         .imax = 1 << 20, .seen = &layer_seen, .group = "the edit",
         .help = "the layer whose down_proj changes (" CLI_LAYER_HELP ")"},
        {.name = "--layers", .type = CLI_STR, .dst = &a.layers, .metavar = "A-B",
         .help = "--method memit or ft with --batch: the layers whose down_proj share the "
                 "edits (A..B, or one layer A; " CLI_LAYER_HELP ")"},
        {.name = "--method", .type = CLI_ENUM, .dst = &a.method, .names = method_names,
         .seen = &a.method_seen,
         .help = "rome: the rank-one update; ft: fine-tune down_proj (the baseline); memit: "
                 "the edits of --batch at once over --layers (MEMIT); with --sweep-layers: "
                 "that method only"},
        {CLI_FLOAT_FIELDS("--cov-weight", &a.o.cov_weight, "W", 0, 1e12,
                          "--method memit: the weight of C against the edits' keys, "
                          "dW = R K^T (W C + K K^T)^-1")},
        {.name = "--sweep-layers", .type = CLI_FLAG, .dst = &a.sweep,
         .help = "edit at every layer with both methods (from the same weights each time) and "
                 "print the scores per layer and method; with --batch, every edit of FILE alone, "
                 "the scores pooled"},
        {.name = "--prefixes", .type = CLI_INT, .dst = &a.o.n_prefixes, .metavar = "N", .imin = 1,
         .imax = 100, .help = "prompts for k* and v*: the prompt alone and after N-1 generated "
                              "prefixes"},
        {.name = "--prefix-len", .type = CLI_INT, .dst = &a.o.prefix_len, .metavar = "N",
         .imin = 0, .imax = 64, .help = "tokens of each generated prefix"},
        {.name = "--samples", .type = CLI_INT, .dst = &a.samples, .metavar = "N", .imin = 1,
         .imax = 100000000, .help = "keys (token positions of the text) for C = E[k k^T]"},
        {CLI_FLOAT_FIELDS("--lambda", &a.o.lambda, "X", 0, 1e6,
                          "C + lambda * tr(C)/F * I before solving (Cholesky)")},
        {.name = "--fit", .type = CLI_ENUM, .dst = &a.fit, .names = fit_names,
         .help = "how v* is fitted: update = through the rank-one update itself (delta * "
                 "u.k_t / u.k* added at every position t: the edited model's own loss); subject "
                 "= delta added at the subject's last token only (ROME's fit)"},
        {CLI_INT_FIELDS("--steps", &a.o.steps, "S", 0, 100000,
                        "Adam steps for v* (ROME) -- optimizer steps, as in training")},
        {CLI_FLOAT_FIELDS("--lr", &a.o.lr, "X", 0, 100, "learning rate of those steps")},
        {CLI_FLOAT_FIELDS("--kl-weight", &a.o.kl_weight, "X", 0, 1e6,
                          "weight of KL(before || after) on the KL prompt")},
        {.name = "--kl-prompt", .type = CLI_STR, .dst = &a.kl_prompt, .metavar = "TEXT",
         .help = "the KL prompt, {} for the subject (words the vocabulary lacks: the subject "
                 "alone)"},
        {CLI_FLOAT_FIELDS("--delta-decay", &a.o.weight_decay, "X", 0, 1e6,
                          "penalty on |delta| / |W k*|^2 while finding v*")},
        {CLI_FLOAT_FIELDS("--clamp-norm", &a.o.clamp_norm, "X", 0, 1e6,
                          "|delta| <= X * |W k*|")},
        {CLI_INT_FIELDS("--ft-steps", &a.o.ft_steps, "S", 0, 100000, "--method ft: Adam steps")},
        {CLI_FLOAT_FIELDS("--ft-lr", &a.o.ft_lr, "X", 0, 100, "--method ft: learning rate")},
        {CLI_FLOAT_FIELDS("--ft-norm", &a.o.ft_norm, "X", 0, 1e6,
                          "--method ft --layers A-B (FT-L): every down_proj weight stays within "
                          "X of its value before the edit (the L-inf bound; 0: none)")},
        {.name = "--compare", .type = CLI_FLAG, .dst = &a.compare,
         .help = "with --batch FILE --layers A-B: ROME one edit after another at --layer L, "
                 "FT-L and MEMIT over A-B, each from the loaded weights, scored side by side "
                 "(efficacy, generalisation, specificity, held-out loss change)"},
        CLI_OPT_SEED(&a.seed, "seed of the generated prefixes"),
        {.name = "--data", .type = CLI_PATH, .dst = &a.data, .metavar = "FILE", .group = "text",
         .def = "the model's training text",
         .help = "text for C (its first 90%) and the held-out loss (its last 10%)"},
        {.name = "--eval-windows", .type = CLI_INT, .dst = &a.windows, .metavar = "N", .imin = 1,
         .imax = 100000, .help = "context-length windows of the held-out loss"},
        {.name = "--cache", .type = CLI_PATH, .dst = &a.cache, .metavar = "DIR",
         .def = "$XDG_CACHE_HOME/ffn, else ~/.cache/ffn",
         .help = "where C is cached (named by layer, samples and the weights' hash); the "
                 "directory of MODEL to keep it beside the model"},
        CLI_OPT_OUT(&a.out, "DIR", "write the edited model here (the layout of MODEL)"),
        CLI_OPT_FORCE(&a.force, "replace an existing --out"),
        CLI_OPT_JSON(&a.json, "one JSON object on stdout"),
        {.name = "--dump", .type = CLI_PATH, .dst = &a.dump, .metavar = "FILE",
         .help = "write k*, v*, the old value, C, lambda and down_proj before and after as "
                 "safetensors (for checking the update)"},
        CLI_OPT_THREADS(&a.threads),
        {0}};
    const cli_pos pos[] = {{"MODEL", &a.model, "a run directory or Hugging Face directory", 1,
                            NULL},
                           {0}};
    const cli_spec spec = {.cmd = CMD, .synopsis = synopsis, .about = about, .epilog = epilog,
                           .opts = opts, .pos = pos};
    int prc;
    if (cli_parse(&spec, argc, argv, &prc)) return prc;
    a.o.layer = a.layer;
    a.o.method = (ffn_edit_method)a.method;
    a.o.seed = (uint64_t)a.seed;
    a.o.kl_prompt = a.kl_prompt;
    a.o.fit = (ffn_edit_fit)a.fit;
    if (a.fact_seen && !a.facts) return cli_usage_error(CMD, "--fact needs --facts FILE");
    if (a.compare) {
        if (!a.batch || !a.layers)
            return cli_usage_error(CMD, "--compare edits a --batch FILE over --layers A-B (ROME "
                                   "at --layer L)");
        if (a.method_seen || a.sweep || a.out || a.dump)
            return cli_usage_error(CMD, "--compare runs the three methods and writes no model; "
                                   "drop --method, --sweep-layers, --out and --dump");
    }
    if (a.layers && (a.o.method == FFN_EDIT_MEMIT || a.o.method == FFN_EDIT_FT || a.compare)) {
        if (!a.batch)
            return cli_usage_error(CMD, "--layers A-B edits a --batch FILE (--method memit or "
                                   "ft)");
        if (a.sweep || (layer_seen && !a.compare))
            return cli_usage_error(CMD, "--method %s takes --layers A-B; drop --sweep-layers and "
                                   "--layer", method_names[a.method]);
        char end = 0;
        long long x, y;
        int k = sscanf(a.layers, "%lld-%lld%c", &x, &y, &end);
        if (k == 1 && sscanf(a.layers, "%lld%c", &x, &end) == 1) y = x, k = 2;
        if (k != 2 || x < 0 || y < x)
            return cli_usage_error(CMD, "--layers '%s': expected A-B with 0 <= A <= B, or A",
                                   a.layers);
        a.layer_first = x;
        a.layer_last = y;
    } else if (a.o.method == FFN_EDIT_MEMIT) {
        return cli_usage_error(CMD, a.batch ? "--method memit needs --layers A-B"
                                            : "--method memit edits a --batch FILE");
    } else if (a.layers) {
        return cli_usage_error(CMD, "--layers is for --method memit or ft; --layer L for rome");
    }
    if (a.batch && (a.prompt || a.fact_seen))
        return cli_usage_error(CMD, "--batch takes its edits from FILE; drop --prompt and "
                               "--fact");
    if (!a.batch) {
        if (!a.fact_seen && !(a.prompt && a.subject))
            return cli_usage_error(CMD, "give --prompt and --subject, or --facts FILE --fact ID");
        if (a.fact_seen && (a.prompt || a.subject))
            return cli_usage_error(CMD, "--fact gives the prompt and subject; drop --prompt and "
                                   "--subject");
        if (!a.target) return cli_usage_error(CMD, "--target missing (the new object)");
        if (!a.sweep && !a.out)
            return cli_usage_error(CMD, "--out DIR missing (where the edited model goes)");
    }
    if (a.sweep && a.out)
        return cli_usage_error(CMD, "--sweep-layers writes no model; drop --out");
    if (a.sweep && layer_seen)
        return cli_usage_error(CMD, "--sweep-layers edits every layer; drop --layer");
    for (int i = 0; i < a.n_neighbours; i++)
        if (!strchr(a.neighbours[i], '|'))
            return cli_usage_error(CMD, "--neighbour '%s': expected PROMPT|OBJECT",
                                   a.neighbours[i]);

    ffn_facts *facts = NULL;
    ffn_status st;
    if (a.facts && (st = ffn_facts_load(a.facts, &facts))) return cli_fail(CMD, st);
    ffn_edit_request req;
    memset(&req, 0, sizeof req);
    char *nb_buf[MAX_LIST] = {0};
    ffn_fact_prompt nb[MAX_LIST];
    int rc = 0;
    if (!a.batch && a.fact_seen) {
        const ffn_fact *f = NULL;
        for (int64_t i = 0; facts && i < facts->n_facts && !f; i++)
            if (facts->facts[i].id == a.fact) f = &facts->facts[i];
        if (!f) {
            cli_error(CMD, "%s: no fact has id %lld (the file has %lld facts)", a.facts,
                      (long long)a.fact, (long long)(facts ? facts->n_facts : 0));
            ffn_facts_free(facts);
            return CLI_EXIT_FAIL;
        }
        req = ffn_edit_request_from_fact(f, a.target);
        if (a.old) req.old_object = a.old;
    } else if (!a.batch) {
        req = (ffn_edit_request){.prompt = a.prompt, .subject = a.subject, .target = a.target,
                                 .old_object = a.old, .paraphrases = a.paraphrases,
                                 .n_paraphrases = a.n_paraphrases};
        for (int i = 0; i < a.n_neighbours; i++) {
            nb_buf[i] = strdup(a.neighbours[i]);
            if (!nb_buf[i]) {
                cli_error(CMD, "out of memory");
                return CLI_EXIT_FAIL;
            }
            char *bar = strchr(nb_buf[i], '|');
            *bar = 0;
            nb[i].prompt = nb_buf[i];
            nb[i].object = bar + 1;
        }
        req.neighbours = nb;
        req.n_neighbours = a.n_neighbours;
        if (!strstr(a.prompt, a.subject)) {
            cli_error(CMD, "--subject '%s' is not in --prompt '%s'", a.subject, a.prompt);
            rc = CLI_EXIT_USAGE;
        }
    }
    session s;
    memset(&s, 0, sizeof s);
    if (!rc) rc = session_open(&a, &s);
    if (!rc) {
        const int64_t L = ffn_model_get_config(s.model)->num_hidden_layers;
        rc = cli_check_layer(CMD, a.layer, L);
        if (!rc && a.layers) rc = cli_check_layer(CMD, a.layer_last, L);
    }
    if (!rc) {
        if (a.compare) rc = run_compare(&a, &s, facts);
        else if (a.o.method == FFN_EDIT_MEMIT || (a.o.method == FFN_EDIT_FT && a.layers))
            rc = run_layers_batch(&a, &s, facts);
        else if (a.batch && a.sweep) rc = run_sweep_batch(&a, &s, facts);
        else if (a.batch) rc = run_batch(&a, &s, facts);
        else if (a.sweep) rc = run_sweep(&a, &s, &req, 1);
        else rc = run_single(&a, &s, &req);
    }
    edit_session_free(&s);
    for (int i = 0; i < MAX_LIST; i++) free(nb_buf[i]);
    ffn_facts_free(facts);
    return rc;
}
