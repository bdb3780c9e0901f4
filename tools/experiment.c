/* experiment.c -- train FFN variants at equal parameters and compare them
 * (the engine of `ffn compare` and `ffn demo`; see experiment.h). */
#include "experiment.h"
#include "i18n.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- variants ---------------------------------------------------------- */

static int64_t dense_width(const exp_plan *p) {
    return p->dense_width > 0 ? p->dense_width : 4 * p->train.model.hidden_size;
}

static int64_t gated_width(const exp_plan *p) {
    int64_t f = (2 * dense_width(p) + 1) / 3;
    return f > 0 ? f : 1;
}

static int make_variant(const exp_plan *p, const char *name, exp_variant *v) {
    memset(v, 0, sizeof *v);
    snprintf(v->name, sizeof v->name, "%s", name);
    ffn_model_config m = p->train.model;
    m.num_experts = 0;
    if (!strcmp(name, "none")) {
        m.mlp_type = FFN_MODEL_MLP_NONE;
    } else if (!strcmp(name, "moe")) {
        m.mlp_type = FFN_MODEL_MLP_GATED;
        m.hidden_act = FFN_ACT_SILU;
        m.intermediate_size = gated_width(p);
        m.num_experts = p->experts;
        m.num_experts_per_tok = p->top_k;
        m.moe_intermediate_size = gated_width(p) / p->top_k > 0 ? gated_width(p) / p->top_k : 1;
        m.moe_layer_freq = 1;
        m.norm_topk_prob = 1;
    } else {
        ffn_act act;
        ffn_mlp_type implied = FFN_MLP_AUTO;
        if (ffn_act_parse(name, &act, &implied) != FFN_OK) {
            cli_error(p->cmd,
                      "--variants: unknown variant '%s' (expected none, linear, relu, gelu, "
                      "gelu_pytorch_tanh, silu/swish, sigmoid, glu, bilinear, reglu, geglu, "
                      "swiglu or moe)",
                      name);
            return 0;
        }
        m.hidden_act = act;
        if (implied == FFN_MLP_GATED) {
            m.mlp_type = FFN_MODEL_MLP_GATED;
            m.intermediate_size = gated_width(p);
        } else {
            m.mlp_type = FFN_MODEL_MLP_DENSE;
            m.intermediate_size = dense_width(p);
        }
    }
    v->model = m;
    v->best_val = INFINITY;
    return 1;
}

int exp_parse_variants(exp_plan *plan, const char *list) {
    char buf[1024];
    if (strlen(list) >= sizeof buf) {
        cli_error(plan->cmd, "--variants: the list is longer than %zu characters", sizeof buf - 1);
        return 0;
    }
    snprintf(buf, sizeof buf, "%s", list);
    plan->n_variants = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ') tok++;
        if (!*tok) continue;
        if (plan->n_variants == EXP_MAX_VARIANTS) {
            cli_error(plan->cmd, "--variants: at most %d variants", EXP_MAX_VARIANTS);
            return 0;
        }
        exp_variant *v = &plan->variants[plan->n_variants];
        if (!make_variant(plan, tok, v)) return 0;
        /* the same model under two names (silu and swish) is listed twice */
        for (int i = 0; i < plan->n_variants; i++) {
            const ffn_model_config *a = &plan->variants[i].model, *m = &v->model;
            if (a->mlp_type == m->mlp_type && a->num_experts == m->num_experts &&
                (m->mlp_type == FFN_MODEL_MLP_NONE ||
                 (a->hidden_act == m->hidden_act && a->intermediate_size == m->intermediate_size))) {
                cli_error(plan->cmd, "--variants: '%s' is the same model as '%s', listed twice", tok,
                          plan->variants[i].name);
                return 0;
            }
        }
        plan->n_variants++;
    }
    if (plan->n_variants == 0) {
        cli_error(plan->cmd, "--variants: the list is empty");
        return 0;
    }
    return 1;
}

/* ---- counting ---------------------------------------------------------- */

/* Parameters, active parameters and forward FLOPs per token of a variant.
 * FLOPs: 2 per multiply-add of every matrix a token passes through (the
 * tied embedding counts once, as the LM head; a lookup is free) plus the
 * attention scores and weighted sum, 2·2·D·(T+1)/2 per layer on average
 * over a causal window of T. */
static ffn_status count_variant(ffn_ctx *ctx, const exp_plan *p, exp_variant *v,
                                int64_t vocab) {
    ffn_model_config m = v->model;
    m.vocab_size = vocab;
    m.max_position_embeddings = p->train.seq_len;
    ffn_model_options o = {.max_batch = 1, .max_seq = 1, .training = 0};
    ffn_model *model = NULL;
    ffn_status st = ffn_model_create(ctx, &m, &o, &model);
    if (st != FFN_OK) return st;
    v->total_params = ffn_model_num_params(model);
    v->active_params = ffn_model_active_params(model);
    int64_t not_matmul = 0;
    for (int64_t i = 0; i < ffn_model_num_tensors(model); i++) {
        const ffn_model_tensor *t = ffn_model_tensor_at(model, i);
        if (t->kind == FFN_TENSOR_NORM || t->kind == FFN_TENSOR_ATTN_BIAS ||
            t->kind == FFN_TENSOR_MLP_BIAS || (t->kind == FFN_TENSOR_EMBEDDING && !m.tie_word_embeddings))
            not_matmul += t->numel;
    }
    int64_t T = p->train.seq_len;
    v->flops_per_token = 2 * (v->active_params - not_matmul) +
                         m.num_hidden_layers * 2 * m.hidden_size * (T + 1);
    ffn_model_free(model);
    return FFN_OK;
}

/* ---- running ----------------------------------------------------------- */

typedef struct progress {
    const exp_plan *plan;
    int variant, seed;
    int tty;
    double last_val;
} progress;

static void on_step(const ffn_train_point *pt, void *user) {
    progress *pr = user;
    if (!isnan(pt->val_loss)) pr->last_val = pt->val_loss;
    if (!pr->tty || pr->plan->quiet) return;
    char val[32] = "  -  ";
    if (!isnan(pr->last_val)) snprintf(val, sizeof val, "%.3f", pr->last_val);
    fprintf(stderr,
            "\r\033[K[%d/%d] %-8s seed %d/%d  step %5lld/%lld  loss %.3f  val %s  %6.0f tok/s  "
            "ETA %3.0fs",
            pr->variant + 1, pr->plan->n_variants, pr->plan->variants[pr->variant].name,
            pr->seed + 1, pr->plan->seeds, (long long)pt->step, (long long)pt->steps, pt->loss,
            val, pt->tokens_per_s, pt->eta_s);
    fflush(stderr);
}

/* ---- the results directory ------------------------------------------------ */

#define EXP_MAGIC "ffn-experiment 1"
#define RESULT_MAGIC "ffn-run-result 1"

/* Everything that decides an experiment's numbers, as one line. */
static void exp_key(const exp_plan *p, char *buf, size_t n) {
    const ffn_train_options *t = &p->train;
    const ffn_model_config *m = &t->model;
    int k = snprintf(buf, n,
                     "%s data=%s corpus=%s/%lld/%llu tokenizer=%s/%lld val=%g D=%lld L=%lld "
                     "H=%lld G=%lld F=%lld E=%lld K=%lld steps=%lld seeds=%d seed=%llu B=%lld "
                     "T=%lld A=%lld lr=%g/%g warmup=%lld wd=%g betas=%g/%g eps=%g clip=%g "
                     "eval=%lld/%lld variants=",
                     p->cmd, t->data_path ? t->data_path : "-", ffn_lang_name(t->corpus_lang),
                     (long long)t->corpus_sentences, (unsigned long long)t->corpus_seed,
                     ffn_tokenizer_mode_name(t->tokenizer), (long long)t->max_vocab,
                     t->val_fraction, (long long)m->hidden_size, (long long)m->num_hidden_layers,
                     (long long)m->num_attention_heads, (long long)m->num_key_value_heads,
                     (long long)p->dense_width, (long long)p->experts, (long long)p->top_k,
                     (long long)t->steps, p->seeds, (unsigned long long)t->seed,
                     (long long)t->batch_size, (long long)t->seq_len, (long long)t->grad_accum,
                     t->lr, t->min_lr, (long long)t->warmup, t->weight_decay, t->beta1,
                     t->beta2, t->eps, t->clip, (long long)t->eval_every,
                     (long long)t->eval_batches);
    for (int i = 0; i < p->n_variants && k > 0 && (size_t)k < n; i++)
        k += snprintf(buf + k, n - (size_t)k, "%s%s", i ? "," : "", p->variants[i].name);
}

static int path_in(char *buf, size_t n, const char *dir, const char *name) {
    return snprintf(buf, n, "%s/%s", dir, name) < (int)n;
}

/* The key stored in OUT/experiment.txt into buf ("" when there is none). */
static void read_key(const char *out, char *buf, size_t n) {
    char path[1100];
    buf[0] = '\0';
    if (!path_in(path, sizeof path, out, "experiment.txt")) return;
    FILE *f = fopen(path, "rb");
    if (!f) return;
    char magic[64] = "";
    if (fgets(magic, sizeof magic, f) && !strncmp(magic, EXP_MAGIC, strlen(EXP_MAGIC)) &&
        fgets(buf, (int)n, f)) {
        size_t len = strlen(buf);
        if (len && buf[len - 1] == '\n') buf[len - 1] = '\0';
    } else {
        buf[0] = '\0';
    }
    fclose(f);
}

/* The value of field `name` ("steps") in a key ("... steps=300 ..."), as a
 * pointer and length; NULL when absent.  The first field (the command) is
 * named "command". */
static const char *key_field(const char *key, const char *name, size_t *len) {
    if (!strcmp(name, "command")) {
        *len = strcspn(key, " ");
        return key;
    }
    size_t nl = strlen(name);
    for (const char *p = key; (p = strstr(p, name)) != NULL; p += nl) {
        if ((p == key || p[-1] == ' ') && p[nl] == '=') {
            *len = strcspn(p + nl + 1, " ");
            return p + nl + 1;
        }
    }
    return NULL;
}

/* "steps 300 there, 600 here; ..." for the fields of two keys that differ. */
static void key_diff(const char *old, const char *key, char *buf, size_t n) {
    buf[0] = '\0';
    size_t k = 0;
    const char *p = key;
    int first = 1;
    for (;;) {
        char name[64];
        size_t w = strcspn(p, " ");
        const char *eq = memchr(p, '=', w);
        size_t nl = first ? strlen("command") : eq ? (size_t)(eq - p) : 0;
        if (nl > 0 && nl < sizeof name) {
            memcpy(name, first ? "command" : p, nl);
            name[nl] = '\0';
            size_t la = 0, lb = 0;
            const char *a = key_field(old, name, &la), *b = key_field(key, name, &lb);
            if (b && (!a || la != lb || memcmp(a, b, la)) && k + 1 < n) {
                int m = snprintf(buf + k, n - k, "%s%s %.*s there, %.*s here", k ? "; " : "", name,
                                 a ? (int)la : 1, a ? a : "-", (int)lb, b);
                if (m > 0) k += (size_t)m < n - k ? (size_t)m : n - k - 1;
            }
        }
        first = 0;
        p += w;
        if (!*p) break;
        p++;
    }
    if (!buf[0]) snprintf(buf, n, "the settings are written in another form");
}

static int write_key(const exp_plan *p, const char *key) {
    char path[1100];
    path_in(path, sizeof path, p->out_dir, "experiment.txt");
    ffn_atomic_file af;
    ffn_status st = ffn_atomic_open(&af, path);
    if (st == FFN_OK) {
        fprintf(af.f, "%s\n%s\n", EXP_MAGIC, key);
        st = ffn_atomic_commit(&af);
    }
    if (st != FFN_OK) cli_fail(p->cmd, st);
    return st == FFN_OK;
}

/* NAME-seedK (a run) with an optional suffix; 1 when `name` is one. */
static int is_run_name(const char *name, const char *suffix) {
    const char *s = strstr(name, "-seed");
    if (!s || s == name) return 0;
    s += 5;
    if (*s < '1' || *s > '9') return 0;
    while (*s >= '0' && *s <= '9') s++;
    return !strcmp(s, suffix);
}

/* --force: remove what an experiment writes into OUT (its run directories,
 * their metrics and results, the table, the curves, the report), never a
 * file of another name, never through a link. */
static int clean_results(const exp_plan *p) {
    DIR *d = opendir(p->out_dir);
    if (!d) return 1;
    struct dirent *e;
    int ok = 1;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        char path[1100];
        if (!path_in(path, sizeof path, p->out_dir, n)) continue;
        struct stat sb;
        if (lstat(path, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode) && is_run_name(n, "")) {
            ffn_status st = ffn_run_dir_remove(path);
            if (st != FFN_OK) {
                cli_fail(p->cmd, st);
                ok = 0;
            }
        } else if (S_ISREG(sb.st_mode) &&
                   (is_run_name(n, ".metrics.jsonl") || is_run_name(n, ".result") ||
                    !strcmp(n, "compare.json") || !strcmp(n, "val_loss.svg") ||
                    !strcmp(n, "report.html") || !strcmp(n, "experiment.txt"))) {
            if (unlink(path) != 0 && errno != ENOENT) {
                cli_error(p->cmd, "%s: cannot remove: %s", path, strerror(errno));
                ok = 0;
            }
        }
    }
    closedir(d);
    return ok;
}

/* Make OUT ready: absent or empty (a fresh experiment), the same
 * experiment with --resume, or anything of ours with --force.  Prints the
 * error and returns 0 otherwise. */
static int prepare_results(exp_plan *p) {
    const char *out = p->out_dir;
    char key[4096], old[4096];
    exp_key(p, key, sizeof key);
    struct stat sb;
    if (stat(out, &sb) != 0) {
        if (errno != ENOENT || mkdir(out, 0777) != 0) {
            cli_error(p->cmd, "%s: cannot create the directory: %s", out, strerror(errno));
            return 0;
        }
        p->resume = 0;
        return write_key(p, key);
    }
    if (!S_ISDIR(sb.st_mode)) {
        cli_error(p->cmd, "%s: exists and is not a directory (choose another --out)", out);
        return 0;
    }
    if (ffn_dir_is_empty(out)) {
        p->resume = 0;
        return write_key(p, key);
    }
    read_key(out, old, sizeof old);
    int same = old[0] && !strcmp(old, key);
    if (same && p->resume) return 1;
    if (!p->force) {
        if (same)
            cli_error(p->cmd,
                      "%s already holds this experiment: continue it with --resume (finished runs "
                      "are kept), start it over with --force, or choose another --out",
                      out);
        else if (old[0]) {
            char diff[1024];
            key_diff(old, key, diff, sizeof diff);
            cli_error(p->cmd,
                      "%s holds another experiment (%s); replace its runs with --force, or "
                      "choose another --out",
                      out, diff);
        }
        else
            cli_error(p->cmd,
                      "%s exists and does not hold an experiment of this ffn (no experiment.txt); "
                      "replace what ffn wrote there with --force, or choose another --out",
                      out);
        return 0;
    }
    p->resume = 0;
    return clean_results(p) && write_key(p, key);
}

/* A finished run's numbers, so that --resume can rebuild the table
 * without training it again. */
static int write_result(const exp_plan *p, const char *path, const ffn_train_result *r) {
    ffn_atomic_file af;
    ffn_status st = ffn_atomic_open(&af, path);
    if (st == FFN_OK) {
        fprintf(af.f, "%s\n%.17g %.17g %.17g %.17g %lld\n", RESULT_MAGIC, r->final_val_loss,
                r->final_loss, r->tokens_per_s, r->seconds, (long long)r->n_evals);
        for (int64_t e = 0; e < r->n_evals; e++)
            fprintf(af.f, "%lld %.17g\n", (long long)r->eval_step[e], r->eval_loss[e]);
        st = ffn_atomic_commit(&af);
    }
    if (st != FFN_OK) cli_fail(p->cmd, st);
    return st == FFN_OK;
}

/* 1 and r filled (free with ffn_train_result_free) when `path` holds a
 * whole result. */
static int read_result(const char *path, ffn_train_result *r) {
    memset(r, 0, sizeof *r);
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char magic[64] = "";
    long long n = 0;
    int ok = fgets(magic, sizeof magic, f) && !strncmp(magic, RESULT_MAGIC, strlen(RESULT_MAGIC)) &&
             fscanf(f, "%lg %lg %lg %lg %lld", &r->final_val_loss, &r->final_loss,
                    &r->tokens_per_s, &r->seconds, &n) == 5 &&
             n >= 0 && n < (1 << 24);
    if (ok) {
        r->n_evals = n;
        r->eval_step = malloc((size_t)(n ? n : 1) * sizeof *r->eval_step);
        r->eval_loss = malloc((size_t)(n ? n : 1) * sizeof *r->eval_loss);
        ok = r->eval_step && r->eval_loss;
        for (int64_t e = 0; ok && e < n; e++) {
            long long s;
            ok = fscanf(f, "%lld %lg", &s, &r->eval_loss[e]) == 2;
            r->eval_step[e] = s;
        }
    }
    fclose(f);
    if (!ok) ffn_train_result_free(r);
    return ok;
}

/* The step a run directory's training state is at (-1 when unreadable). */
static int64_t saved_step(const char *dir) {
    char path[1100];
    if (!path_in(path, sizeof path, dir, FFN_TRAIN_STATE_FILENAME)) return -1;
    ffn_st_file *f = NULL;
    if (ffn_st_open(path, &f) != FFN_OK) return -1;
    const char *s = ffn_st_metadata(f, "step");
    int64_t step = s ? strtoll(s, NULL, 10) : -1;
    ffn_st_close(f);
    return step;
}

/* compare.json and val_loss.svg of the runs finished so far. */
static int write_tables(ffn_ctx *ctx, exp_plan *plan, int64_t vocab) {
    if (!plan->out_dir) return 1;
    for (int vi = 0; vi < plan->n_variants; vi++) {
        ffn_status st = count_variant(ctx, plan, &plan->variants[vi], vocab ? vocab : 256);
        if (st != FFN_OK) {
            cli_fail(plan->cmd, st);
            return 0;
        }
    }
    char path[1100];
    snprintf(path, sizeof path, "%s/val_loss.svg", plan->out_dir);
    if (!exp_write_svg(plan, path)) return 0;
    snprintf(path, sizeof path, "%s/compare.json", plan->out_dir);
    ffn_atomic_file af;
    ffn_status st = ffn_atomic_open(&af, path);
    if (st == FFN_OK) {
        exp_print_json(af.f, plan);
        st = ffn_atomic_commit(&af);
    }
    if (st != FFN_OK) cli_fail(plan->cmd, st);
    return st == FFN_OK;
}

static volatile sig_atomic_t stop_requested = 0;
static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

int exp_run(ffn_ctx *ctx, exp_plan *plan) {
    volatile sig_atomic_t *stop_flag = &stop_requested;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    /* a missing data file is reported before anything is created */
    if (plan->train.data_path && !plan->train.text) {
        /* O_NONBLOCK: a FIFO must not hang here (the reader refuses it) */
        int fd = open(plan->train.data_path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) {
            cli_error(plan->cmd, "%s: cannot open: %s", plan->train.data_path, strerror(errno));
            return CLI_EXIT_FAIL;
        }
        close(fd);
    }
    if (plan->out_dir && !prepare_results(plan)) return CLI_EXIT_FAIL;
    int tty = cli_progress_tty();
    /* The vocabulary is fixed by the text, the same for every variant: learn
     * its size once to count parameters. */
    int64_t vocab = 0;
    for (int vi = 0; vi < plan->n_variants; vi++) {
        exp_variant *v = &plan->variants[vi];
        for (int s = 0; s < plan->seeds; s++) {
            ffn_train_options o = plan->train;
            o.model = v->model;
            o.seed = plan->train.seed + (uint64_t)s;
            o.stop_flag = stop_flag;
            char dir[1024] = "", metrics[1100] = "", result[1100] = "";
            ffn_train_result r;
            memset(&r, 0, sizeof r);
            int finished = 0;
            if (plan->out_dir) {
                snprintf(dir, sizeof dir, "%s/%s-seed%d", plan->out_dir, v->name, s + 1);
                snprintf(metrics, sizeof metrics, "%s.metrics.jsonl", dir);
                snprintf(result, sizeof result, "%s.result", dir);
                o.out_dir = dir;
                o.metrics_path = metrics;
                if (plan->resume && read_result(result, &r)) {
                    finished = 1; /* kept: its numbers go into the table again */
                } else if (plan->resume && saved_step(dir) > 0 && saved_step(dir) < o.steps) {
                    o.resume_dir = dir; /* continued; its log goes on */
                } else {
                    remove(result);
                    remove(metrics); /* a fresh run, not a resume */
                }
            }
            progress pr = {.plan = plan, .variant = vi, .seed = s, .tty = tty, .last_val = NAN};
            ffn_train_callbacks cb = {.on_step = on_step, .user = &pr};
            ffn_status st = finished ? FFN_OK : ffn_train_run(ctx, &o, &cb, &r);
            if (st == FFN_OK && !finished && result[0] && !write_result(plan, result, &r)) {
                ffn_train_result_free(&r);
                return CLI_EXIT_FAIL;
            }
            if (tty && !plan->quiet) fprintf(stderr, "\r\033[K");
            if (st == FFN_ERR_INTERRUPTED) {
                cli_error(plan->cmd, "interrupted during %s seed %d; its checkpoint is in %s%s",
                          v->name, s + 1, dir[0] ? dir : "(no --out)",
                          dir[0] ? " (continue with --resume)" : "");
                ffn_train_result_free(&r);
                write_tables(ctx, plan, vocab); /* the table of what finished */
                return 130;
            }
            if (st != FFN_OK) {
                cli_fail(plan->cmd, st);
                ffn_train_result_free(&r);
                return CLI_EXIT_FAIL;
            }
            if (!plan->quiet)
                fprintf(stderr, "%-8s seed %d: val loss %.4f, train loss %.4f, %.0f tok/s, %.1f s%s\n",
                        v->name, s + 1, r.final_val_loss, r.final_loss, r.tokens_per_s, r.seconds,
                        finished ? " (finished before, kept)" : "");
            /* accumulate */
            v->n_runs++;
            double d = r.final_val_loss - v->val_mean;
            v->val_mean += d / v->n_runs;
            v->val_m2 += d * (r.final_val_loss - v->val_mean); /* Welford */
            v->val_std = v->n_runs > 1 ? sqrt(v->val_m2 / (v->n_runs - 1)) : 0.0;
            v->train_mean += (r.final_loss - v->train_mean) / v->n_runs;
            v->tokens_per_s += (r.tokens_per_s - v->tokens_per_s) / v->n_runs;
            v->seconds += r.seconds;
            if (!v->eval_step && r.n_evals > 0) {
                v->n_evals = r.n_evals;
                v->eval_step = calloc((size_t)r.n_evals, sizeof *v->eval_step);
                v->eval_loss = calloc((size_t)r.n_evals, sizeof *v->eval_loss);
                if (!v->eval_step || !v->eval_loss) {
                    cli_error(plan->cmd, "out of memory");
                    ffn_train_result_free(&r);
                    return CLI_EXIT_FAIL;
                }
                memcpy(v->eval_step, r.eval_step, (size_t)r.n_evals * sizeof *v->eval_step);
            }
            for (int64_t e = 0; e < v->n_evals && e < r.n_evals; e++)
                v->eval_loss[e] += (r.eval_loss[e] - v->eval_loss[e]) / v->n_runs;
            if (r.final_val_loss < v->best_val && dir[0]) {
                v->best_val = r.final_val_loss;
                snprintf(v->best_dir, sizeof v->best_dir, "%s", dir);
            }
            if (!vocab) {
                /* the trained model's vocabulary, from its checkpoint */
                ffn_model_config cfg;
                char path[1100];
                snprintf(path, sizeof path, "%s/%s", dir, FFN_CONFIG_FILENAME);
                if (dir[0] && ffn_model_config_load(path, &cfg) == FFN_OK) vocab = cfg.vocab_size;
            }
            ffn_train_result_free(&r);
            /* the table of what finished, after every run */
            if (!write_tables(ctx, plan, vocab)) return CLI_EXIT_FAIL;
        }
    }
    if (!vocab) vocab = 256; /* no checkpoints written: count with a byte-sized vocabulary */
    for (int vi = 0; vi < plan->n_variants; vi++) {
        ffn_status st = count_variant(ctx, plan, &plan->variants[vi], vocab);
        if (st != FFN_OK) return cli_fail(plan->cmd, st);
    }
    return 0;
}

/* ---- output -------------------------------------------------------------- */

static void fmt_count(char *buf, size_t n, int64_t v) {
    if (v >= 1000000000) snprintf(buf, n, "%.2fG", v / 1e9);
    else if (v >= 1000000) snprintf(buf, n, "%.2fM", v / 1e6);
    else if (v >= 10000) snprintf(buf, n, "%.1fk", v / 1e3);
    else snprintf(buf, n, "%lld", (long long)v);
}

/* s in a field of `width` columns (CJK characters take two), left- or
 * right-aligned, then a space unless last. */
static void put_field(FILE *f, const char *s, int width, int left, int last) {
    int cols = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if ((*p & 0xC0) != 0x80) cols += *p >= 0xE3 || (*p == 0xE2 && p[1] >= 0xBA) ? 2 : 1;
    if (!left)
        for (int i = cols; i < width; i++) fputc(' ', f);
    fputs(s, f);
    if (left && !last)
        for (int i = cols; i < width; i++) fputc(' ', f);
    fputc(last ? '\n' : ' ', f);
}

void exp_print_table(FILE *f, const exp_plan *plan) {
    /* the heads in the lesson's language (tools/i18n.c), in the columns of
     * the rows below */
    const ffn_lang lang = plan->train.corpus_lang;
    static const char *const heads[7] = {"demo.col.variant", "demo.col.params", "demo.col.active",
                                         "demo.col.flops", "demo.col.val", "demo.col.train",
                                         "demo.col.tok_s"};
    static const int widths[7] = {10, 9, 9, 10, 18, 8, 9};
    for (int c = 0; c < 7; c++) put_field(f, i18n(lang, heads[c]), widths[c], c == 0, c == 6);
    for (int i = 0; i < plan->n_variants; i++) {
        const exp_variant *v = &plan->variants[i];
        char p[32], a[32], fl[32];
        fmt_count(p, sizeof p, v->total_params);
        fmt_count(a, sizeof a, v->active_params);
        fmt_count(fl, sizeof fl, v->flops_per_token);
        char sd[16] = "     -"; /* one run: no spread to show */
        if (v->n_runs > 1) snprintf(sd, sizeof sd, "%.4f", v->val_std);
        fprintf(f, "%-10s %9s %9s %10s %10.4f ± %s %8.4f %9.0f\n", v->name, p, a, fl, v->val_mean,
                sd, v->train_mean, v->tokens_per_s);
    }
}

/* A JSON number, or null when not finite (a diverged run). */
static void json_num(FILE *f, double v, const char *fmt) { cli_json_number(f, v, fmt); }

void exp_print_json(FILE *f, const exp_plan *plan) {
    const ffn_train_options *t = &plan->train;
    fprintf(f,
            "{\"settings\": {\"hidden_size\": %lld, \"num_hidden_layers\": %lld, "
            "\"num_attention_heads\": %lld, \"dense_width\": %lld, \"gated_width\": %lld, "
            "\"experts\": %lld, \"top_k\": %lld, \"steps\": %lld, \"batch_size\": %lld, "
            "\"seq_len\": %lld, \"seeds\": %d, \"lr\": %s},\n \"variants\": [",
            (long long)t->model.hidden_size, (long long)t->model.num_hidden_layers,
            (long long)t->model.num_attention_heads, (long long)dense_width(plan),
            (long long)gated_width(plan), (long long)plan->experts, (long long)plan->top_k,
            (long long)t->steps, (long long)t->batch_size, (long long)t->seq_len, plan->seeds,
            cli_json_num(t->lr, "%g"));
    for (int i = 0; i < plan->n_variants; i++) {
        const exp_variant *v = &plan->variants[i];
        fprintf(f,
                "%s\n  {\"variant\": \"%s\", \"mlp_type\": \"%s\", \"hidden_act\": \"%s\", "
                "\"intermediate_size\": %lld, \"num_experts\": %lld, "
                "\"total_params\": %lld, \"active_params\": %lld, \"flops_per_token\": %lld, "
                "\"val_loss_mean\": ",
                i ? "," : "", v->name,
                v->model.mlp_type == FFN_MODEL_MLP_NONE
                    ? "none"
                    : (v->model.num_experts ? "moe"
                                            : (v->model.mlp_type == FFN_MODEL_MLP_GATED ? "gated"
                                                                                        : "dense")),
                ffn_act_name(v->model.hidden_act),
                (long long)(v->model.num_experts ? v->model.moe_intermediate_size
                                                 : v->model.mlp_type == FFN_MODEL_MLP_NONE
                                                       ? 0
                                                       : v->model.intermediate_size),
                (long long)v->model.num_experts, (long long)v->total_params,
                (long long)v->active_params, (long long)v->flops_per_token);
        /* a variant none of whose runs finished yet (an interrupted run): null */
        json_num(f, v->n_runs ? v->val_mean : NAN, "%.6f");
        fputs(", \"val_loss_std\": ", f);
        json_num(f, v->n_runs ? v->val_std : NAN, "%.6f");
        fputs(", \"train_loss_mean\": ", f);
        json_num(f, v->n_runs ? v->train_mean : NAN, "%.6f");
        fprintf(f, ", \"tokens_per_s\": %s, \"seconds\": %s, \"runs\": %d, \"best_checkpoint\": ",
                cli_json_num(v->tokens_per_s, "%.1f"), cli_json_num(v->seconds, "%.2f"), v->n_runs);
        if (v->best_dir[0]) cli_json_string(f, v->best_dir);
        else fputs("null", f);
        fputs(", \"eval_step\": [", f);
        for (int64_t e = 0; e < v->n_evals; e++)
            fprintf(f, "%s%lld", e ? ", " : "", (long long)v->eval_step[e]);
        fputs("], \"val_loss_curve\": [", f);
        for (int64_t e = 0; e < v->n_evals; e++) {
            if (e) fputs(", ", f);
            json_num(f, v->eval_loss[e], "%.6f");
        }
        fputs("]}", f);
    }
    fputs("\n]}\n", f);
}

void exp_free(exp_plan *plan) {
    for (int i = 0; i < plan->n_variants; i++) {
        free(plan->variants[i].eval_step);
        free(plan->variants[i].eval_loss);
        plan->variants[i].eval_step = NULL;
        plan->variants[i].eval_loss = NULL;
    }
}

/* ---- the SVG ------------------------------------------------------------- */

static const char *palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
                                "#393b79", "#637939"};

/* A round step for about 5 ticks over `span`: 1, 2 or 5 times a power of ten. */
static double svg_tick_step(double span) {
    double raw = span / 5, p = pow(10, floor(log10(raw))), m = raw / p;
    return p * (m >= 7.5 ? 10 : m >= 3.5 ? 5 : m >= 1.5 ? 2 : 1);
}

int exp_write_svg(const exp_plan *plan, const char *path) {
    double xmax = 1, ymin = INFINITY, ymax = -INFINITY;
    for (int i = 0; i < plan->n_variants; i++) {
        const exp_variant *v = &plan->variants[i];
        for (int64_t e = 0; e < v->n_evals; e++) {
            if (!isfinite(v->eval_loss[e])) continue;
            if (v->eval_step[e] > xmax) xmax = (double)v->eval_step[e];
            if (v->eval_loss[e] < ymin) ymin = v->eval_loss[e];
            if (v->eval_loss[e] > ymax) ymax = v->eval_loss[e];
        }
    }
    if (!isfinite(ymin)) ymin = 0, ymax = 1;
    if (ymax - ymin < 1e-6) ymax = ymin + 1;
    double pad = 0.05 * (ymax - ymin);
    ymin -= pad, ymax += pad;
    const int W = 760, H = 440, L = 60, R = 170, T = 40, B = 50;
    const int pw = W - L - R, ph = H - T - B;
    ffn_atomic_file af;
    ffn_status st = ffn_atomic_open(&af, path);
    if (st != FFN_OK) {
        cli_fail(plan->cmd, st);
        return 0;
    }
    FILE *f = af.f;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
            "<text x=\"%d\" y=\"22\" font-size=\"15\">Validation loss by FFN variant (mean over %d "
            "seed%s)</text>\n",
            W, H, W, H, L, plan->seeds, plan->seeds == 1 ? "" : "s");
    /* axes and ticks */
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#444\"/>\n",
            L, T, pw, ph);
    /* round ticks: steps of 1, 2 or 5 times a power of ten, about 5 of them */
    double ystep = svg_tick_step(ymax - ymin), xstep = svg_tick_step(xmax);
    if (xstep < 1) xstep = 1; /* steps are whole numbers */
    int ydigits = ystep >= 1 ? 0 : (int)ceil(-log10(ystep) - 1e-9);
    for (double k = ceil(ymin / ystep - 1e-9); k * ystep <= ymax + 1e-9 * ystep; k++) {
        double yv = k * ystep, y = T + ph - ph * (yv - ymin) / (ymax - ymin);
        fprintf(f,
                "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.*f</text>\n",
                L, L + pw, y, y, L - 6, y + 4, ydigits, yv);
    }
    for (double k = 0; k * xstep <= xmax + 1e-9 * xstep; k++) {
        double x = L + pw * k * xstep / xmax;
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.0f</text>\n", x, T + ph + 18,
                k * xstep);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">training step</text>\n", L + pw / 2,
            H - 10);
    fprintf(f,
            "<text x=\"16\" y=\"%d\" text-anchor=\"middle\" transform=\"rotate(-90 16 %d)\">"
            "validation loss (cross-entropy)</text>\n",
            T + ph / 2, T + ph / 2);
    for (int i = 0; i < plan->n_variants; i++) {
        const exp_variant *v = &plan->variants[i];
        const char *c = palette[i % (int)(sizeof palette / sizeof palette[0])];
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", c);
        for (int64_t e = 0; e < v->n_evals; e++)
            if (isfinite(v->eval_loss[e]))
                fprintf(f, "%.1f,%.1f ", L + pw * v->eval_step[e] / xmax,
                    T + ph - ph * (v->eval_loss[e] - ymin) / (ymax - ymin));
        fputs("\"/>\n", f);
        int ly = T + 10 + 20 * i;
        fprintf(f,
                "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"3\"/>"
                "<text x=\"%d\" y=\"%d\">%s %.3f</text>\n",
                L + pw + 12, L + pw + 32, ly, ly, c, L + pw + 38, ly + 4, v->name, v->val_mean);
    }
    fputs("</svg>\n", f);
    st = ffn_atomic_commit(&af);
    if (st != FFN_OK) {
        cli_fail(plan->cmd, st);
        return 0;
    }
    return 1;
}

/* ---- flags shared by compare and demo -------------------------------------- */

int exp_common_opts(exp_plan *plan, cli_opt *opts, int *lang_given) {
    ffn_train_options *t = &plan->train;
    ffn_model_config *m = &t->model;
    const cli_opt common[] = {
        CLI_OPT_LANG("--lang", &t->corpus_lang, "the built-in corpus's language"),
        {.name = "--sentences", .type = CLI_INT, .dst = &t->corpus_sentences, .metavar = "N",
         .imin = 1, .imax = 10000000, .help = "built-in corpus size"},
        CLI_OPT_TOKENIZER_MODE(&t->tokenizer),
        CLI_OPT_TRAIN_STEPS(&t->steps, "optimizer steps per run"),
        {.name = "--resume", .type = CLI_FLAG, .dst = &plan->resume, .group = "files",
         .help = "continue the experiment in --out: finished runs are kept, an interrupted one "
                 "continues, the table is rebuilt (the settings must be the same)"},
        CLI_OPT_FORCE(&plan->force, "replace the experiment in --out (removes only the files an "
                      "experiment writes there)"),
        CLI_OPT_SEED(&t->seed, "the first seed; run k of a variant uses S + k - 1"),
        CLI_OPT_JSON(&plan->json, "print the comparison as JSON on stdout: one object per "
                     "variant with variant, total_params, active_params, flops_per_token, "
                     "val_loss_mean, val_loss_std, tokens_per_s and the mean validation curve"),
        CLI_OPT_THREADS(&plan->threads),
        CLI_OPT_HIDDEN_SIZE(&m->hidden_size, "model (Hugging Face names)"),
        CLI_OPT_INTERMEDIATE_SIZE(&plan->dense_width, "the dense width F; gated variants use "
                                  "round(2F/3)"),
        CLI_OPT_LAYERS(&m->num_hidden_layers),
        CLI_OPT_HEADS(&m->num_attention_heads),
        CLI_OPT_KV_HEADS(&m->num_key_value_heads, "H"),
        CLI_OPT_EXPERTS(&plan->experts, "experts of the moe variant"),
        CLI_OPT_TOP_K(&plan->top_k),
        CLI_OPT_BATCH(&t->batch_size),
        CLI_OPT_SEQ_LEN(&t->seq_len),
        CLI_OPT_LR(&t->lr),
        CLI_OPT_MIN_LR(&t->min_lr),
        CLI_OPT_EVAL_EVERY(&t->eval_every, "steps/10"),
        CLI_OPT_EVAL_BATCHES(&t->eval_batches),
    };
    int n = (int)(sizeof common / sizeof common[0]);
    _Static_assert(sizeof common / sizeof common[0] <= EXP_N_COMMON_OPTS, "EXP_N_COMMON_OPTS");
    memcpy(opts, common, sizeof common);
    for (int k = 0; k < n; k++) {
        if (!strcmp(opts[k].name, "--lang")) {
            opts[k].alias = "--corpus";
            opts[k].seen = lang_given;
        }
        if (!strcmp(opts[k].name, "--batch-size")) opts[k].group = "training loop";
        if (!strcmp(opts[k].name, "--intermediate-size")) opts[k].def = "4*D";
    }
    return n;
}

int exp_parse(exp_plan *plan, const cli_opt *own, int n_own, const char *synopsis,
              const char *about, const char *epilog, int argc, char **argv, int *lang_given,
              int *rc) {
    cli_opt opts[EXP_MAX_OWN_OPTS + EXP_N_COMMON_OPTS + 1];
    if (n_own > EXP_MAX_OWN_OPTS) { /* a table this file was not told about */
        cli_error(plan->cmd, "internal error: %d flags of its own, at most %d", n_own,
                  EXP_MAX_OWN_OPTS);
        *rc = CLI_EXIT_FAIL;
        return 0;
    }
    memcpy(opts, own, (size_t)n_own * sizeof *opts);
    int n = n_own + exp_common_opts(plan, opts + n_own, lang_given);
    opts[n] = (cli_opt){0};
    const cli_spec spec = {.cmd = plan->cmd, .synopsis = synopsis, .about = about,
                           .epilog = epilog, .opts = opts};
    return !cli_parse(&spec, argc, argv, rc);
}

/* ---- what the numbers say --------------------------------------------------- */

/* The seed-to-seed spread (sample std of the final validation loss) assumed
 * when each variant ran once.  Measured on the demo's setup (D 64, 2 layers,
 * the English corpus) with `ffn compare --variants
 * none,linear,relu,gelu,swiglu,moe --steps 300 --seeds 3`: the six sample
 * stds were 0.005 to 0.079, median 0.019. */
#define EXP_ONE_SEED_SPREAD 0.02

static const exp_variant *find_variant(const exp_plan *p, const char *name) {
    for (int i = 0; i < p->n_variants; i++)
        if (!strcmp(p->variants[i].name, name)) return &p->variants[i];
    return NULL;
}

exp_diff exp_compare(const exp_variant *a, const exp_variant *b) {
    exp_diff d;
    d.delta = a->val_mean - b->val_mean;
    d.measured = a->n_runs > 1 && b->n_runs > 1;
    if (d.measured) /* two standard errors of the difference of the means */
        d.noise = 2.0 * sqrt(a->val_std * a->val_std / a->n_runs +
                             b->val_std * b->val_std / b->n_runs);
    else /* one run each: the difference of two runs has sqrt(2) x the spread */
        d.noise = 2.0 * sqrt(2.0) * EXP_ONE_SEED_SPREAD;
    if (!isfinite(d.delta)) d.verdict = EXP_WORSE;
    else if (d.delta < -d.noise) d.verdict = EXP_BETTER;
    else if (d.delta > d.noise) d.verdict = EXP_WORSE;
    else d.verdict = EXP_SAME;
    return d;
}

/* "(better, beyond the noise of ±0.012)" */
static void verdict_words(const exp_diff *d, ffn_lang lang, char *buf, size_t n) {
    const char *w = i18n(lang, d->verdict == EXP_BETTER ? "demo.better"
                               : d->verdict == EXP_WORSE ? "demo.worse" : "demo.same");
    snprintf(buf, n, i18n(lang, d->verdict == EXP_SAME ? "demo.within" : "demo.beyond"), w,
             d->noise);
}

/* Why a result can go against the expected direction. */
static void why_short(FILE *f, const exp_plan *p) {
    const ffn_lang lang = p->train.corpus_lang;
    if (p->train.steps < 1500) fprintf(f, i18n(lang, "demo.short"), (long long)p->train.steps);
    else fputs(i18n(lang, "demo.long"), f);
}

/* One row of the explanation: a against b (`vs AGAINST`), EXTRA, then what
 * the verdict means: the catalogue's KEY_better, KEY_same or KEY_worse (in
 * the corpus language, tools/i18n.c).  A reading that ends without a
 * newline is one the runs may be too short to trust: why_short follows it. */
static void explain_row(FILE *f, const exp_plan *p, const exp_variant *a, const exp_variant *b,
                        const char *against, const char *extra, const char *key) {
    const ffn_lang lang = p->train.corpus_lang;
    exp_diff d = exp_compare(a, b);
    char w[160], k[64];
    verdict_words(&d, lang, w, sizeof w);
    fprintf(f, "  %-7s %+.3f %s %s (%s): %s", a->name, d.delta, i18n(lang, "demo.vs"),
            i18n(lang, against), w, extra);
    snprintf(k, sizeof k, "%s_%s", key, d.verdict == EXP_BETTER ? "better"
                                        : d.verdict == EXP_SAME ? "same" : "worse");
    const char *text = i18n(lang, k);
    fputs(text, f);
    if (text[strlen(text) - 1] != '\n') {
        why_short(f, p);
        fputc('\n', f);
    }
}

static void explain_rows(FILE *f, const exp_plan *p) {
    const ffn_lang lang = p->train.corpus_lang;
    const exp_variant *none = find_variant(p, "none"), *lin = find_variant(p, "linear"),
                      *gelu = find_variant(p, "gelu"), *swi = find_variant(p, "swiglu"),
                      *moe = find_variant(p, "moe");
    fputs(i18n(lang, "demo.rows"), f);
    if (p->seeds > 1 || (none && none->n_runs > 1))
        fprintf(f, i18n(lang, "demo.noise_seeds"), p->seeds);
    else
        fprintf(f, i18n(lang, "demo.noise_one"), 2.0 * sqrt(2.0) * EXP_ONE_SEED_SPREAD,
                EXP_ONE_SEED_SPREAD);
    if (none) fprintf(f, i18n(lang, "demo.none"), none->val_mean);
    if (lin && none) explain_row(f, p, lin, none, "demo.vs_none", "", "demo.linear");
    if (gelu && lin) explain_row(f, p, gelu, lin, "demo.vs_linear", "", "demo.gelu");
    if (swi && gelu) explain_row(f, p, swi, gelu, "demo.vs_gelu", "", "demo.swiglu");
    if (moe && swi) {
        char used[160];
        snprintf(used, sizeof used, i18n(lang, "demo.moe_used"), (long long)moe->active_params,
                 (long long)moe->total_params);
        explain_row(f, p, moe, swi, "demo.vs_swiglu", used, "demo.moe");
    }
}

/* A wide character (CJK, fullwidth punctuation): 3-byte UTF-8 from U+2E80;
 * it takes two columns and a line may break before it. */
static int wide_at(const char *p) {
    const unsigned char c0 = (unsigned char)p[0], c1 = (unsigned char)p[1];
    return c0 >= 0xE3 || (c0 == 0xE2 && c1 >= 0xBA);
}

/* One line wrapped at 80 columns, continuation lines indented by `indent`;
 * runs of spaces inside the line are kept.  Words break at spaces, and
 * Chinese text (no spaces) between any two wide characters. */
static void put_wrapped(FILE *f, const char *line, int indent) {
    int col = 0;
    for (const char *p = line; *p;) {
        size_t gap = strspn(p, " ");
        const char *word = p + gap;
        size_t len = 0;
        int width = 0; /* columns: UTF-8 continuation bytes take none */
        if ((unsigned char)word[0] >= 0xE0 && wide_at(word) && word[1] && word[2]) {
            len = 3, width = 2; /* one wide character is a word of its own */
        } else {
            while (word[len] && word[len] != ' ' &&
                   !(len > 0 && (unsigned char)word[len] >= 0xE0 && wide_at(word + len))) {
                width += ((unsigned char)word[len] & 0xC0) != 0x80;
                len++;
            }
        }
        if (col > indent && col + (int)gap + width > 80) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
            gap = 0;
        }
        fprintf(f, "%*s", (int)gap, "");
        fwrite(word, 1, len, f);
        col += (int)gap + width;
        p = word + len;
    }
    fputc('\n', f);
}

/* The rows, each wrapped at 80 columns under its text (column 10). */
void exp_explain(FILE *f, const exp_plan *p) {
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) {
        explain_rows(f, p);
        return;
    }
    explain_rows(m, p);
    fclose(m);
    for (char *line = buf, *nl; line && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        put_wrapped(f, line, !strncmp(line, "  noise:", 8) ? 4 : 10);
    }
    free(buf);
}

int exp_explain_file(const char *cmd, const char *path, ffn_lang lang) {
    ffn_json *doc = NULL;
    ffn_status st = ffn_json_parse_file(path, &doc);
    if (st != FFN_OK) return cli_fail(cmd, st);
    exp_plan plan;
    exp_plan_defaults(&plan, cmd);
    const ffn_json_value *root = ffn_json_root(doc), *set = ffn_json_get(root, "settings"),
                         *vs = ffn_json_get(root, "variants");
    double steps = ffn_json_number(ffn_json_get(set, "steps"));
    double seeds = ffn_json_number(ffn_json_get(set, "seeds"));
    if (ffn_json_type_of(vs) != FFN_JSON_ARRAY || !(steps >= 1) || !(seeds >= 1)) {
        ffn_json_free(doc);
        cli_error(cmd, "%s: not the JSON that ffn compare writes (settings.steps, settings.seeds "
                  "and variants: [...])", path);
        return CLI_EXIT_FAIL;
    }
    plan.train.steps = (int64_t)steps;
    plan.seeds = (int)seeds;
    plan.train.corpus_lang = lang;
    for (size_t i = 0; i < ffn_json_length(vs) && plan.n_variants < EXP_MAX_VARIANTS; i++) {
        const ffn_json_value *v = ffn_json_at(vs, i);
        const char *name = ffn_json_string(ffn_json_get(v, "variant"));
        if (!name) continue;
        exp_variant *x = &plan.variants[plan.n_variants++];
        snprintf(x->name, sizeof x->name, "%s", name);
        x->val_mean = ffn_json_number(ffn_json_get(v, "val_loss_mean"));
        x->val_std = ffn_json_number(ffn_json_get(v, "val_loss_std"));
        double runs = ffn_json_number(ffn_json_get(v, "runs"));
        x->n_runs = runs >= 1 ? (int)runs : plan.seeds;
        if (!isfinite(x->val_std)) x->val_std = 0;
        x->total_params = (int64_t)ffn_json_number(ffn_json_get(v, "total_params"));
        x->active_params = (int64_t)ffn_json_number(ffn_json_get(v, "active_params"));
    }
    ffn_json_free(doc);
    exp_explain(stdout, &plan);
    return 0;
}
