/* cmd_transcoder.c -- `ffn transcoder`: train a transcoder (or an SAE) of
 * one FFN layer on the model's own activations, evaluate transcoder files
 * side by side.  The work is in the library (include/ffn/transcoder.h);
 * this file loads the model and its text, runs the loop (windows of the
 * text, one forward each, one Adam step on its rows), checkpoints, draws
 * progress and prints tables or JSON. */
#include "cli.h"
#include "edit_source.h"
#include "ffn/checkpoint.h"
#include "ffn/rng.h"
#include "ffn/safetensors.h"
#include "ffn/tap.h"
#include "ffn/transcoder.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const CMD = "transcoder";

int cmd_transcoder_inspect(int argc, char **argv, const char *cmd); /* also ffn inspect's */

static const char about[] =
"Trains a transcoder of layer L's FFN: a wide sparse layer (Fp features, the\n"
"k largest pre-activations of each token kept, relu; decoder rows of norm 1)\n"
"that reproduces the FFN's output (layers.L.mlp_out) from its input\n"
"(layers.L.mlp_in), optionally with a linear skip connection.  --kind sae\n"
"trains a sparse autoencoder of the FFN's output instead, for comparison.\n"
"The rows come from the model's own forward (taps) on windows of its text or\n"
"--data, a batch at a time: nothing is stored beyond one batch.  The loss is\n"
"the fraction of variance unexplained (FVU) plus AuxK (features that have not\n"
"fired for --dead-tokens rows model the residual), Adam at --lr.\n"
"\n"
"Printed at the end, on held-out windows: FVU, MSE, L0 (mean active\n"
"features), dead features (never active there), and the model's loss with\n"
"layer L's mlp_out replaced by the transcoder's output, against the original\n"
"and the FFN zeroed (loss recovered = (zero - replaced) / (zero - original)).\n"
"The transcoder is written to --out (safetensors, its config in the metadata);\n"
"the training state to OUT.state every --save-every steps and at the end,\n"
"and --resume continues from it, bit for bit as if never stopped.  Ctrl-C\n"
"(SIGINT) or SIGTERM finishes the step in flight, saves OUT.state and exits\n"
"130 (--json: {\"interrupted\": true, \"steps\", \"rows\", \"state\"}); a second\n"
"one stops at once (OUT.state is then the last --save-every save, whole).\n"
"\n"
"ffn transcoder eval MODEL FILE... evaluates transcoder or SAE files of one\n"
"model side by side.";

static const char epilog[] =
"output: a table on stdout (--json: one JSON object); progress on stderr\n"
"only on a terminal; exit 1 on failure, 2 on bad usage, 130 when stopped by\n"
"Ctrl-C or SIGTERM (train: the state saved for --resume).\n"
"examples:\n"
"  ffn transcoder train facts1 --layer 1 --features 1024 --k 16 --out tc1.st\n"
"  ffn transcoder train facts1 --layer 1 --kind sae --out sae1.st --json\n"
"  ffn transcoder eval facts1 tc1.st sae1.st\n";

typedef struct targs {
    const char *model, *out, *data, *curve;
    int64_t layer, features, k, steps, batch, seq, threads, seed, save_every, log_every;
    int64_t k_aux, dead_tokens, eval_windows;
    double lr, aux_coef;
    int kind, skip, json, force, resume, k_aux_seen, profile;
} targs;

/* --profile: the dense products' figures (ffn_tc_products over the timed
 * steps: flops and seconds) against the step time and the FMA peak measured
 * now (as `ffn bench peak`, 0 when unknown). */
typedef struct tc_prof {
    double flops, seconds, step_seconds, peak;
} tc_prof;

static void prof_json(const tc_prof *p) {
    const double g = p->seconds > 0 ? p->flops / p->seconds * 1e-9 : NAN;
    printf(", \"profile\": {\"product_flops\": %s, \"product_seconds\": %s, "
           "\"product_gflops\": %s, \"product_share_of_step\": %s, \"step_gflops\": %s, "
           "\"fma_peak_gflops\": %s, \"product_pct_peak\": %s, \"step_pct_peak\": %s}",
           cli_json_num(p->flops, "%.0f"), cli_json_num(p->seconds, "%.6f"),
           cli_json_num(g, "%.2f"),
           cli_json_num(p->step_seconds > 0 ? p->seconds / p->step_seconds : NAN, "%.4f"),
           cli_json_num(p->step_seconds > 0 ? p->flops / p->step_seconds * 1e-9 : NAN, "%.2f"),
           cli_json_num(p->peak > 0 ? p->peak : NAN, "%.2f"),
           cli_json_num(p->peak > 0 ? 100.0 * g / p->peak : NAN, "%.1f"),
           cli_json_num(p->peak > 0 && p->step_seconds > 0
                            ? 100.0 * p->flops / p->step_seconds * 1e-9 / p->peak : NAN, "%.1f"));
}

static void prof_text(FILE *f, const tc_prof *p, int skip) {
    const double g = p->seconds > 0 ? p->flops / p->seconds * 1e-9 : 0;
    fprintf(f, "dense products (the encoder's x W_enc^T%s): %.4g GFLOP in %.4g s = %.1f GFLOP/s",
            skip ? ", the skip's x W_skip^T and its gradient" : "", p->flops * 1e-9, p->seconds,
            g);
    if (p->peak > 0) fprintf(f, " = %.1f%% of the %.1f GFLOP/s FMA peak", 100.0 * g / p->peak, p->peak);
    else fprintf(f, " (no FMA peak measured)");
    fprintf(f, "; %.1f%% of the step time (the rest is TopK and the sparse decoder and "
            "gradients)\n", p->step_seconds > 0 ? 100.0 * p->seconds / p->step_seconds : 0.0);
}

static const char *const kind_names[] = {"transcoder", "sae", NULL};

/* ---- the model and its text ---------------------------------------------------------- */

typedef edit_session session;

static int session_open(const char *model, const char *data, int64_t threads, int64_t B,
                        int64_t T, session *s) {
    ffn_model_options mo = {.max_batch = B, .max_seq = T};
    return edit_session_open(CMD, model, data, threads, &mo, 0,
                             "the activations come from its text", "", s);
}

/* ---- printing ------------------------------------------------------------------------- */

static const char *num(double v) { return cli_json_num(v, "%.9g"); }

static void json_eval(FILE *f, const ffn_tc_eval *e) {
    fprintf(f, "{\"fvu\": %s, \"mse\": %s, \"l0\": %s, \"dead\": %lld, \"rows\": %lld, "
            "\"loss_original\": %s, \"loss_replaced\": %s, \"loss_zero\": %s, "
            "\"loss_recovered\": %s}",
            num(e->fvu), num(e->mse), num(e->l0), (long long)e->dead, (long long)e->rows,
            num(e->loss_original), num(e->loss_replaced), num(e->loss_zero),
            num(e->loss_recovered));
}

static void table_header(void) {
    printf("%-24s %-10s %5s %6s %4s %8s %7s %6s %9s %9s %9s %9s\n", "file", "kind", "layer",
           "feats", "k", "FVU", "L0", "dead", "loss", "replaced", "zeroed", "recovered");
}

static void table_row(const char *name, const ffn_tc_config *c, const ffn_tc_eval *e) {
    printf("%-24s %-10s %5lld %6lld %4lld %8.4f %7.2f %6lld %9.4f %9.4f %9.4f %9.3f\n", name,
           ffn_tc_kind_name(c->kind), (long long)c->layer, (long long)c->features,
           (long long)c->k, e->fvu, e->l0, (long long)e->dead, e->loss_original,
           e->loss_replaced, e->loss_zero, e->loss_recovered);
}

/* ---- train ------------------------------------------------------------------------------- */

typedef struct curve_point {
    int64_t step;
    double loss, fvu, aux, l0;
    int64_t dead;
} curve_point;

static int file_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

static int check_resume(const ffn_tc_config *want, const ffn_tc_config *got, const char *path) {
    if (want->kind != got->kind || want->layer != got->layer || want->features != got->features ||
        want->k != got->k || want->skip != got->skip || want->d_model != got->d_model) {
        cli_error(CMD, "%s: the saved state is a %s of layer %lld, %lld features, k %lld%s; the "
                  "flags ask for a %s of layer %lld, %lld features, k %lld%s (give the same "
                  "flags, or drop --resume and give --force to start over)", path,
                  ffn_tc_kind_name(got->kind), (long long)got->layer, (long long)got->features,
                  (long long)got->k, got->skip ? ", skip" : "", ffn_tc_kind_name(want->kind),
                  (long long)want->layer, (long long)want->features, (long long)want->k,
                  want->skip ? ", skip" : "");
        return CLI_EXIT_USAGE;
    }
    return 0;
}

static int run_train(int argc, char **argv) {
    targs a = {.layer = -1, .features = 0, .k = 16, .steps = 1000, .batch = 8, .seq = 64,
               .seed = 1, .save_every = 200, .log_every = 20, .dead_tokens = 10000,
               .eval_windows = 20, .lr = 1e-3, .aux_coef = 1.0 / 32};
    const cli_opt opts[] = {
        {CLI_INT_FIELDS("--layer", &a.layer, "L", 0, 1 << 20, "the FFN's layer (" CLI_LAYER_HELP
                        "; required)"), .def = ""},
        {.name = "--kind", .type = CLI_ENUM, .dst = &a.kind, .names = kind_names,
         .help = "transcoder: mlp_in -> mlp_out; sae: mlp_out -> mlp_out"},
        {CLI_INT_FIELDS("--features", &a.features, "N", 0, 1 << 24,
                        "features (0: 4 x the FFN's intermediate size)")},
        {CLI_INT_FIELDS("--k", &a.k, "K", 1, 1 << 20, "active features per token (TopK)")},
        {.name = "--skip", .type = CLI_FLAG, .dst = &a.skip,
         .help = "a linear skip connection x W_skip^T beside the features (transcoder only)"},
        CLI_OPT_TRAIN_STEPS(&a.steps, "Adam steps (one batch of B x T rows each)"),
        {CLI_FLOAT_FIELDS("--lr", &a.lr, "X", 0, 10, "Adam's learning rate"), .fmin_open = 1},
        CLI_OPT_BATCH(&a.batch),
        CLI_OPT_SEQ_LEN(&a.seq),
        {CLI_INT_FIELDS("--k-aux", &a.k_aux, "K", 0, 1 << 20,
                        "AuxK: dead features used to model the residual (0: no AuxK; default "
                        "hidden_size / 2)"), .def = "D/2", .seen = &a.k_aux_seen},
        {CLI_FLOAT_FIELDS("--aux-coef", &a.aux_coef, "X", 0, 1000, "AuxK's weight in the loss")},
        {CLI_INT_FIELDS("--dead-tokens", &a.dead_tokens, "N", 1, INT64_MAX,
                        "a feature not active in the last N training rows is dead")},
        {CLI_INT_FIELDS("--eval-windows", &a.eval_windows, "N", 1, 100000,
                        "held-out windows (of --seq-len tokens) for the figures at the end")},
        {.name = "--data", .type = CLI_PATH, .dst = &a.data, .metavar = "FILE",
         .help = "text to run the model on (default: the model's recorded training text)"},
        CLI_OPT_OUT(&a.out, "FILE", "the transcoder file to write (required)"),
        CLI_OPT_FORCE(&a.force, "replace an existing --out (and its state)"),
        {.name = "--resume", .type = CLI_FLAG, .dst = &a.resume,
         .help = "continue from OUT.state (the same flags) up to --steps"},
        {CLI_INT_FIELDS("--save-every", &a.save_every, "N", 0, 100000000,
                        "write OUT.state every N steps (0: only at the end)")},
        {CLI_INT_FIELDS("--log-every", &a.log_every, "N", 1, 100000000,
                        "a point of the loss curve every N steps")},
        {.name = "--curve", .type = CLI_PATH, .dst = &a.curve, .metavar = "FILE",
         .help = "write the loss curve as TSV (step, loss, fvu, aux, l0, dead)"},
        CLI_OPT_SEED(&a.seed, "initialisation and the windows drawn"),
        CLI_OPT_THREADS(&a.threads),
        {.name = "--profile", .type = CLI_FLAG, .dst = &a.profile,
         .help = "the dense products' GFLOP/s and share of the FMA peak (measured after "
                 "training, as `ffn bench peak`) and of the step time"},
        CLI_OPT_JSON(&a.json, "one JSON object on stdout"),
        {0}};
    const cli_pos pos[] = {CLI_POS_MODEL(&a.model), {0}};
    const cli_spec spec = {"transcoder train", "MODEL --layer L --out FILE [options]", about,
                           epilog, opts, pos};
    int rc;
    if (cli_parse(&spec, argc, argv, &rc)) return rc;
    if (a.layer < 0) return cli_usage_error("transcoder train", "--layer L is required");
    if (!a.out) return cli_usage_error("transcoder train", "--out FILE is required");
    if (a.skip && a.kind == FFN_TC_KIND_SAE)
        return cli_usage_error("transcoder train", "--skip is for --kind transcoder (an sae "
                               "reconstructs its input; a skip would be the identity)");
    char state_path[4200];
    snprintf(state_path, sizeof state_path, "%s.state", a.out);
    if (!a.resume && !a.force && (file_exists(a.out) || file_exists(state_path))) {
        cli_error(CMD, "%s exists; give --force to replace it, or --resume to continue its "
                  "training", file_exists(a.out) ? a.out : state_path);
        return CLI_EXIT_FAIL;
    }
    if (a.resume && !file_exists(state_path)) {
        cli_error(CMD, "--resume: %s does not exist (no training state to continue)", state_path);
        return CLI_EXIT_FAIL;
    }
    session s;
    if ((rc = session_open(a.model, a.data, a.threads, a.batch, a.seq, &s))) {
        edit_session_free(&s);
        return rc;
    }
    const ffn_model_config *mc = ffn_model_get_config(s.model);
    if ((rc = cli_check_layer("transcoder train", a.layer, mc->num_hidden_layers))) {
        edit_session_free(&s);
        return rc;
    }
    const int64_t D = mc->hidden_size, B = a.batch, T = a.seq, n = B * T;
    if (s.n_train < T + 1) {
        cli_error(CMD, "the text has %lld training tokens; --seq-len %lld needs more",
                  (long long)s.n_train, (long long)T);
        edit_session_free(&s);
        return CLI_EXIT_FAIL;
    }
    ffn_tc_config cfg;
    const int64_t Fp = a.features ? a.features : 4 * mc->intermediate_size;
    ffn_tc_config_default(&cfg, (ffn_tc_kind)a.kind, a.layer, D, Fp, a.k);
    cfg.skip = a.skip;
    if (a.k_aux_seen) cfg.k_aux = a.k_aux;
    cfg.aux_coef = a.aux_coef;
    cfg.dead_tokens = a.dead_tokens;
    ffn_transcoder *tc = NULL;
    ffn_status st;
    if (a.resume) {
        if ((st = ffn_tc_load(state_path, &tc))) {
            edit_session_free(&s);
            return cli_fail(CMD, st);
        }
        if ((rc = check_resume(&cfg, ffn_tc_get_config(tc), state_path))) {
            ffn_tc_free(tc);
            edit_session_free(&s);
            return rc;
        }
    } else if ((st = ffn_tc_create(&cfg, (uint64_t)a.seed, &tc))) {
        edit_session_free(&s);
        return cli_fail(CMD, st);
    }
    float *x = malloc((size_t)(n * D) * sizeof *x), *y = malloc((size_t)(n * D) * sizeof *y);
    int32_t *win = malloc((size_t)n * sizeof *win);
    const int64_t max_points = a.steps / a.log_every + 2;
    curve_point *curve = calloc((size_t)max_points, sizeof *curve);
    int64_t n_curve = 0;
    if (!x || !y || !win || !curve) {
        cli_error(CMD, "out of memory (a batch of %lld rows)", (long long)n);
        rc = CLI_EXIT_FAIL;
        goto out;
    }
    int64_t step0 = 0;
    ffn_tc_progress(tc, &step0, NULL);
    const int tty = cli_progress_tty();
    const double t0 = cli_seconds();
    cli_stop_on_signals();
    int interrupted = 0;
    double t_tc = 0; /* seconds in the transcoder's own step (not the model's forward) */
    tc_prof prof = {0};
    ffn_tc_products(tc, &prof.flops, &prof.seconds);
    ffn_tc_stats acc = {0};
    int64_t acc_n = 0;
    for (int64_t step = step0; step < a.steps; step++) {
        /* the windows of this step: from (seed, step) alone, so a resumed run draws the
         * same windows as an uninterrupted one */
        ffn_rng r;
        ffn_rng_seed(&r, (uint64_t)a.seed * 0x9E3779B97F4A7C15ull + (uint64_t)step + 1);
        for (int64_t b = 0; b < B; b++) {
            const int64_t at = (int64_t)ffn_rng_below(&r, (uint64_t)(s.n_train - T));
            memcpy(win + b * T, s.tokens + at, (size_t)T * sizeof *win);
        }
        if ((st = ffn_tc_capture(s.model, (ffn_tc_kind)a.kind, a.layer, win, B, T, x, y, NULL)))
            break;
        const double t1 = cli_seconds();
        ffn_tc_stats bs;
        if ((st = ffn_tc_loss_grad(s.ctx, tc, x, y, n, NULL, &bs)) ||
            (st = ffn_tc_adam_step(s.ctx, tc, a.lr)))
            break;
        t_tc += cli_seconds() - t1;
        acc.loss += bs.loss;
        acc.fvu += bs.fvu;
        acc.aux += bs.aux;
        acc.l0 += bs.l0;
        acc.n_dead = bs.n_dead;
        acc_n++;
        if ((step + 1) % a.log_every == 0 || step + 1 == a.steps) {
            curve_point *p = &curve[n_curve < max_points ? n_curve++ : max_points - 1];
            p->step = step + 1;
            p->loss = acc.loss / (double)acc_n;
            p->fvu = acc.fvu / (double)acc_n;
            p->aux = acc.aux / (double)acc_n;
            p->l0 = acc.l0 / (double)acc_n;
            p->dead = acc.n_dead;
            memset(&acc, 0, sizeof acc);
            acc_n = 0;
            if (tty) {
                const double el = cli_seconds() - t0, done = (double)(step + 1 - step0);
                fprintf(stderr, "\rstep %lld/%lld  loss %.4f  fvu %.4f  L0 %.1f  dead %lld  "
                        "%.0f rows/s  ETA %.0fs   ", (long long)(step + 1), (long long)a.steps,
                        p->loss, p->fvu, p->l0, (long long)p->dead, done * (double)n / el,
                        el / done * (double)(a.steps - step - 1));
                fflush(stderr);
            }
        }
        if (a.save_every && (step + 1) % a.save_every == 0 && step + 1 < a.steps &&
            (st = ffn_tc_save(tc, state_path, 1)))
            break;
        if (cli_stop_requested && step + 1 < a.steps) {
            interrupted = 1;
            st = ffn_tc_save(tc, state_path, 1);
            break;
        }
    }
    if (tty) fputc('\n', stderr);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (st) {
        rc = cli_fail(CMD, st);
        goto out;
    }
    if (interrupted) {
        int64_t at = 0, rows_at = 0;
        ffn_tc_progress(tc, &at, &rows_at);
        cli_error(CMD, "interrupted at step %lld of %lld: the training state is in %s; the same "
                  "command with --resume continues it", (long long)at, (long long)a.steps,
                  state_path);
        if (a.json) {
            printf("{\"interrupted\": true, \"steps\": %lld, \"rows\": %lld, \"state\": ",
                   (long long)at, (long long)rows_at);
            cli_json_string(stdout, state_path);
            printf("}\n");
        }
        rc = 130;
        goto out;
    }
    const double train_s = cli_seconds() - t0;
    if ((st = ffn_tc_save(tc, state_path, 1)) || (st = ffn_tc_save(tc, a.out, 0))) {
        rc = cli_fail(CMD, st);
        goto out;
    }
    if (a.curve) {
        ffn_atomic_file af;
        if ((st = ffn_atomic_open(&af, a.curve))) {
            rc = cli_fail(CMD, st);
            goto out;
        }
        fprintf(af.f, "step\tloss\tfvu\taux\tl0\tdead\n");
        for (int64_t i = 0; i < n_curve; i++)
            fprintf(af.f, "%lld\t%.6g\t%.6g\t%.6g\t%.4g\t%lld\n", (long long)curve[i].step,
                    curve[i].loss, curve[i].fvu, curve[i].aux, curve[i].l0,
                    (long long)curve[i].dead);
        if ((st = ffn_atomic_commit(&af))) {
            rc = cli_fail(CMD, st);
            goto out;
        }
    }
    {
        double f1, s1;
        ffn_tc_products(tc, &f1, &s1);
        prof = (tc_prof){f1 - prof.flops, s1 - prof.seconds, t_tc,
                         a.profile ? cli_fma_peak_gflops(ffn_ctx_threads(s.ctx)) : 0};
    }
    ffn_tc_eval e;
    if ((st = ffn_tc_evaluate(s.ctx, s.model, tc, s.tokens + s.n_train, s.n_tokens - s.n_train,
                              a.eval_windows, &e))) {
        rc = cli_fail(CMD, st);
        goto out;
    }
    int64_t steps_done = 0, rows_done = 0;
    ffn_tc_progress(tc, &steps_done, &rows_done);
    const double rows_s = t_tc > 0 ? (double)((steps_done - step0) * n) / t_tc : NAN;
    if (a.json) {
        printf("{\"kind\": \"%s\", \"layer\": %lld, \"d_model\": %lld, \"features\": %lld, "
               "\"k\": %lld, \"skip\": %s, \"steps\": %lld, \"rows\": %lld, \"out\": ",
               ffn_tc_kind_name(cfg.kind), (long long)a.layer, (long long)D, (long long)Fp,
               (long long)a.k, a.skip ? "true" : "false", (long long)steps_done,
               (long long)rows_done);
        cli_json_string(stdout, a.out);
        printf(", \"train_seconds\": %s, \"transcoder_rows_per_s\": %s",
               num(train_s), num(rows_s));
        if (a.profile) prof_json(&prof);
        printf(", \"heldout\": ");
        json_eval(stdout, &e);
        printf(", \"curve\": [");
        for (int64_t i = 0; i < n_curve; i++)
            printf("%s{\"step\": %lld, \"loss\": %s, \"fvu\": %s, \"aux\": %s, \"l0\": %s, "
                   "\"dead\": %lld}", i ? ", " : "", (long long)curve[i].step,
                   num(curve[i].loss), num(curve[i].fvu), num(curve[i].aux), num(curve[i].l0),
                   (long long)curve[i].dead);
        printf("]}\n");
    } else {
        if (a.profile) prof_text(stderr, &prof, a.skip);
        printf("%s of layer %lld: %lld features, k %lld%s; %lld steps, %lld rows (%.1f s; the "
               "transcoder's own steps %.0f rows/s)\n", ffn_tc_kind_name(cfg.kind),
               (long long)a.layer, (long long)Fp, (long long)a.k, a.skip ? ", skip" : "",
               (long long)steps_done, (long long)rows_done, train_s, rows_s);
        printf("loss curve (training batches):\n  %8s %9s %9s %9s %7s %6s\n", "step", "loss",
               "fvu", "aux", "L0", "dead");
        const int64_t every = n_curve > 10 ? (n_curve + 9) / 10 : 1;
        for (int64_t i = 0; i < n_curve; i++)
            if (i % every == 0 || i + 1 == n_curve)
                printf("  %8lld %9.4f %9.4f %9.4f %7.2f %6lld\n", (long long)curve[i].step,
                       curve[i].loss, curve[i].fvu, curve[i].aux, curve[i].l0,
                       (long long)curve[i].dead);
        printf("held-out (%lld rows):\n", (long long)e.rows);
        table_header();
        table_row(a.out, &cfg, &e);
    }
out:
    free(x);
    free(y);
    free(win);
    free(curve);
    ffn_tc_free(tc);
    edit_session_free(&s);
    return rc;
}

/* ---- eval ---------------------------------------------------------------------------------- */

#define MAX_FILES 32

static int run_eval(int argc, char **argv) {
    const char *model = NULL, *data = NULL, *files[MAX_FILES];
    int n_files = 0, json = 0;
    int64_t threads = 0, windows = 20, seq = 64;
    const cli_opt opts[] = {
        {.name = "--data", .type = CLI_PATH, .dst = &data, .metavar = "FILE",
         .help = "text to evaluate on (default: the model's recorded training text; its "
                 "held-out last 10%)"},
        {CLI_INT_FIELDS("--eval-windows", &windows, "N", 1, 100000, "windows of --seq-len tokens")},
        CLI_OPT_SEQ_LEN(&seq),
        CLI_OPT_THREADS(&threads),
        CLI_OPT_JSON(&json, "one JSON object on stdout"),
        {.name = "--file", .type = CLI_PATH, .dst = files, .metavar = "FILE", .max_count = MAX_FILES,
         .count = &n_files, .help = "a transcoder or SAE file (repeat; also accepted as "
                                    "arguments after MODEL)", .hidden = 1},
        {0}};
    const char *f0 = NULL;
    const cli_pos pos[] = {CLI_POS_MODEL(&model),
                           {.name = "FILE", .dst = &f0, .help = "a transcoder or SAE file"},
                           {0}};
    const cli_spec spec = {"transcoder eval", "MODEL FILE... [options]",
                           "Evaluates transcoder and SAE files of one model on its held-out "
                           "text: FVU, L0,\ndead features, and the model's loss with the "
                           "layer's mlp_out replaced.", epilog, opts, pos};
    /* the files after MODEL: every positional argument past the first */
    char *rest[MAX_FILES + 2];
    int n_rest = 0, nargc = 0;
    char **nargv = malloc((size_t)(argc + 1) * sizeof *nargv);
    if (!nargv) return CLI_EXIT_FAIL;
    int seen_model = 0;
    static const char *const takes_value[] = {"--data", "--eval-windows", "--seq-len",
                                              "--threads", "--file", NULL};
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        int is_value = 0; /* the value of the flag before it */
        for (int q = 0; i > 1 && takes_value[q]; q++) is_value |= !strcmp(argv[i - 1], takes_value[q]);
        if (i > 0 && s[0] != '-' && !is_value) {
            if (!seen_model) seen_model = 1;
            else if (n_rest < MAX_FILES) {
                rest[n_rest++] = argv[i];
                continue;
            }
        }
        nargv[nargc++] = argv[i];
    }
    int rc;
    if (cli_parse(&spec, nargc, nargv, &rc)) {
        free(nargv);
        return rc;
    }
    free(nargv);
    for (int i = 0; i < n_rest && n_files < MAX_FILES; i++) files[n_files++] = rest[i];
    if (f0 && n_files < MAX_FILES) files[n_files++] = f0;
    if (n_files == 0) return cli_usage_error("transcoder eval", "FILE missing");
    session s;
    if ((rc = session_open(model, data, threads, 1, seq, &s))) {
        edit_session_free(&s);
        return rc;
    }
    if (json) printf("{\"model\": "), cli_json_string(stdout, model), printf(", \"files\": [");
    else table_header();
    for (int i = 0; i < n_files && !rc; i++) {
        ffn_transcoder *tc = NULL;
        ffn_tc_eval e;
        ffn_status st = ffn_tc_load(files[i], &tc);
        if (!st) st = ffn_tc_evaluate(s.ctx, s.model, tc, s.tokens + s.n_train,
                                      s.n_tokens - s.n_train, windows, &e);
        if (st) {
            rc = cli_fail(CMD, st);
        } else if (json) {
            const ffn_tc_config *c = ffn_tc_get_config(tc);
            printf("%s{\"file\": ", i ? ", " : "");
            cli_json_string(stdout, files[i]);
            printf(", \"kind\": \"%s\", \"layer\": %lld, \"features\": %lld, \"k\": %lld, "
                   "\"skip\": %s, \"heldout\": ", ffn_tc_kind_name(c->kind), (long long)c->layer,
                   (long long)c->features, (long long)c->k, c->skip ? "true" : "false");
            json_eval(stdout, &e);
            printf("}");
        } else {
            table_row(files[i], ffn_tc_get_config(tc), &e);
        }
        ffn_tc_free(tc);
    }
    if (json && !rc) printf("]}\n");
    edit_session_free(&s);
    return rc;
}

/* ---- step: one batch from a file (the parity test and the speed comparison) ---------------- */

static int run_step(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    int64_t steps = 1, threads = 0;
    double lr = 1e-3;
    int profile = 0;
    const cli_opt opts[] = {
        CLI_OPT_TRAIN_STEPS(&steps, "Adam steps on the same rows"),
        {.name = "--profile", .type = CLI_FLAG, .dst = &profile,
         .help = "add the dense products' GFLOP/s, share of the step time and of the FMA peak "
                 "(measured after the steps, as `ffn bench peak`) to the JSON"},
        {CLI_FLOAT_FIELDS("--lr", &lr, "X", 0, 10, "Adam's learning rate")},
        CLI_OPT_THREADS(&threads),
        {0}};
    const cli_pos pos[] = {
        {.name = "IN", .dst = &in, .required = 1,
         .help = "a transcoder file with tensors x, y (n, D) [and dead (Fp) U8]"},
        {.name = "OUT", .dst = &out, .required = 1,
         .help = "written: loss, fvu, aux, grad.* of the first step, the weights after"},
        {0}};
    const cli_spec spec = {"transcoder step", NULL,
                           "Runs --steps Adam steps of a transcoder file on the rows stored in "
                           "it (x, y)\nand writes the first step's loss and gradients and the "
                           "weights after the\nlast; the time per step goes to stdout as JSON.  "
                           "For tests and benchmarks.", NULL, opts, pos};
    int rc;
    if (cli_parse(&spec, argc, argv, &rc)) return rc;
    ffn_ctx *ctx = NULL;
    if (cli_make_ctx(CMD, threads, &ctx)) return CLI_EXIT_FAIL;
    ffn_transcoder *tc = NULL;
    ffn_st_file *f = NULL;
    float *x = NULL, *y = NULL;
    unsigned char *dead = NULL;
    ffn_st_writer *w = NULL;
    ffn_status st = ffn_tc_load(in, &tc);
    if (!st) st = ffn_st_open(in, &f);
    const int64_t D = st ? 0 : ffn_tc_get_config(tc)->d_model;
    const int64_t Fp = st ? 0 : ffn_tc_get_config(tc)->features;
    ffn_st_tensor t;
    int64_t n = 0;
    if (!st) st = ffn_st_find(f, "x", &t);
    if (!st) {
        n = t.shape[0];
        int64_t shape[2] = {n, D};
        st = ffn_st_load_f32(f, "x", 2, shape, &x);
        if (!st) st = ffn_st_load_f32(f, "y", 2, shape, &y);
    }
    if (!st && ffn_st_has(f, "dead")) {
        ffn_st_tensor td;
        int64_t sF[1] = {Fp};
        st = ffn_st_find(f, "dead", &td);
        if (!st) st = ffn_st_check_shape(f, &td, 1, sF);
        if (!st && td.dtype != FFN_DTYPE_U8)
            st = ffn_set_error(FFN_ERR_FORMAT, "%s: dead: expected dtype U8", in);
        if (!st && !(dead = malloc((size_t)Fp))) st = FFN_ERR_NOMEM;
        if (!st) memcpy(dead, td.data, (size_t)Fp);
    }
    ffn_tc_stats first = {0};
    double secs = 0;
    float *g0 = NULL;
    tc_prof prof = {0};
    if (!st) ffn_tc_products(tc, &prof.flops, &prof.seconds);
    const ffn_tc_weights gw = st ? (ffn_tc_weights){0} : ffn_tc_get_grads(tc);
    const int64_t gsz = 2 * Fp * D + Fp + D + (gw.W_skip ? D * D : 0);
    for (int64_t i = 0; i < steps && !st; i++) {
        ffn_tc_stats bs;
        const double t0 = cli_seconds();
        st = ffn_tc_loss_grad(ctx, tc, x, y, n, dead, &bs);
        if (!st && i == 0) { /* the first gradients, before Adam's projection changes them */
            first = bs;
            if (!(g0 = malloc((size_t)gsz * sizeof *g0))) st = FFN_ERR_NOMEM;
            else memcpy(g0, gw.W_enc, (size_t)gsz * sizeof *g0);
        }
        if (!st) st = ffn_tc_adam_step(ctx, tc, lr);
        secs += cli_seconds() - t0;
    }
    if (!st) {
        /* the gradient block is laid out as the parameters: W_enc, b_enc, W_dec, b_dec, W_skip */
        const ffn_tc_weights p = ffn_tc_get_weights(tc);
        int64_t sFD[2] = {Fp, D}, sF[1] = {Fp}, sD[1] = {D}, sDD[2] = {D, D}, s1[1] = {1};
        double l = first.loss, fv = first.fvu, ax = first.aux;
        st = ffn_st_writer_create(&w);
        if (!st) st = ffn_st_writer_add(w, "loss", FFN_DTYPE_F64, 1, s1, &l);
        if (!st) st = ffn_st_writer_add(w, "fvu", FFN_DTYPE_F64, 1, s1, &fv);
        if (!st) st = ffn_st_writer_add(w, "aux", FFN_DTYPE_F64, 1, s1, &ax);
        if (!st) st = ffn_st_writer_add(w, "grad.encoder.weight", FFN_DTYPE_F32, 2, sFD, g0);
        if (!st) st = ffn_st_writer_add(w, "grad.encoder.bias", FFN_DTYPE_F32, 1, sF, g0 + Fp * D);
        if (!st) st = ffn_st_writer_add(w, "grad.decoder.weight", FFN_DTYPE_F32, 2, sFD, g0 + Fp * D + Fp);
        if (!st) st = ffn_st_writer_add(w, "grad.decoder.bias", FFN_DTYPE_F32, 1, sD, g0 + 2 * Fp * D + Fp);
        if (!st && p.W_skip)
            st = ffn_st_writer_add(w, "grad.skip.weight", FFN_DTYPE_F32, 2, sDD, g0 + 2 * Fp * D + Fp + D);
        if (!st) st = ffn_st_writer_add(w, "encoder.weight", FFN_DTYPE_F32, 2, sFD, p.W_enc);
        if (!st) st = ffn_st_writer_add(w, "encoder.bias", FFN_DTYPE_F32, 1, sF, p.b_enc);
        if (!st) st = ffn_st_writer_add(w, "decoder.weight", FFN_DTYPE_F32, 2, sFD, p.W_dec);
        if (!st) st = ffn_st_writer_add(w, "decoder.bias", FFN_DTYPE_F32, 1, sD, p.b_dec);
        if (!st && p.W_skip) st = ffn_st_writer_add(w, "skip.weight", FFN_DTYPE_F32, 2, sDD, p.W_skip);
        if (!st) st = ffn_st_writer_save(w, out);
    }
    if (!st) {
        double f1, s1;
        ffn_tc_products(tc, &f1, &s1);
        prof = (tc_prof){f1 - prof.flops, s1 - prof.seconds, secs,
                         profile ? cli_fma_peak_gflops(ffn_ctx_threads(ctx)) : 0};
        printf("{\"steps\": %lld, \"rows\": %lld, \"seconds\": %s, \"rows_per_s\": %s, "
               "\"threads\": %d", (long long)steps, (long long)n, num(secs),
               num((double)(steps * n) / secs), ffn_ctx_threads(ctx));
        if (profile) prof_json(&prof);
        printf("}\n");
    } else rc = cli_fail(CMD, st);
    ffn_st_writer_free(w);
    free(g0);
    free(x);
    free(y);
    free(dead);
    ffn_st_close(f);
    ffn_tc_free(tc);
    ffn_ctx_free(ctx);
    return st ? CLI_EXIT_FAIL : 0;
}

/* ---- inspect: one feature ------------------------------------------------------------------- */

/* tokens [a, b) decoded (after token a-1), into a malloc'd string with newlines as ⏎ */
static char *decode_span(const ffn_vocab *v, const int32_t *tok, int64_t a, int64_t b) {
    char *text = NULL;
    size_t n = 0;
    if (b <= a) return strdup("");
    if (ffn_vocab_decode(v, a > 0 ? tok[a - 1] : -1, tok + a, b - a, &text, &n)) return strdup("?");
    for (size_t i = 0; i < n; i++)
        if (text[i] == '\n' || text[i] == '\r' || text[i] == '\t') text[i] = ' ';
    return text;
}

/* `ffn transcoder inspect MODEL FILE --feature I`, and `ffn inspect MODEL
 * --transcoder FILE --feature I` (cmd "inspect"): one code for both. */
int cmd_transcoder_inspect(int argc, char **argv, const char *cmd) {
    const char *model = NULL, *file = NULL, *file_flag = NULL, *data = NULL;
    int64_t feature = -1, top = 10, promoted = 10, context = 8, threads = 0, max_tokens = 20000;
    int json = 0;
    const cli_opt opts[] = {
        {CLI_INT_FIELDS("--feature", &feature, "I", 0, INT32_MAX, "the feature (required)"),
         .def = ""},
        {CLI_INT_FIELDS("--top", &top, "N", 1, 10000, "top-activating contexts")},
        {CLI_INT_FIELDS("--promoted", &promoted, "P", 1, 10000,
                        "tokens the feature's decoder row promotes (and suppresses) most")},
        {CLI_INT_FIELDS("--context", &context, "C", 0, 1000, "tokens shown before each one")},
        {CLI_INT_FIELDS("--max-tokens", &max_tokens, "N", 1, INT64_MAX,
                        "tokens of the held-out text read")},
        {.name = "--data", .type = CLI_PATH, .dst = &data, .metavar = "FILE",
         .help = "text to read (default: the model's recorded training text; its held-out "
                 "last 10%)"},
        {.name = "--transcoder", .type = CLI_PATH, .dst = &file_flag, .metavar = "FILE",
         .help = "the transcoder or SAE file (as the positional FILE; `ffn inspect MODEL "
                 "--transcoder FILE --feature I` is this command)"},
        CLI_OPT_THREADS(&threads),
        CLI_OPT_JSON(&json, "one JSON object on stdout"),
        {0}};
    const cli_pos pos[] = {CLI_POS_MODEL(&model),
                           {.name = "FILE", .dst = &file,
                            .help = "a transcoder or SAE file (or --transcoder FILE)"},
                           {0}};
    const cli_spec spec = {cmd, !strcmp(cmd, "inspect")
                                    ? "MODEL --transcoder FILE --feature I [options]"
                                    : "MODEL FILE --feature I [options]",
                           "Shows one feature of a transcoder or SAE as `ffn inspect keys` "
                           "shows a neuron:\nits top-activating contexts in the model's "
                           "held-out text and its logit effect\nU (g * d_I), the tokens its "
                           "decoder row d_I promotes and suppresses most.", epilog, opts, pos};
    int rc;
    if (cli_parse(&spec, argc, argv, &rc)) return rc;
    if (file && file_flag)
        return cli_usage_error(cmd, "the transcoder given twice (FILE and --transcoder); give "
                               "one");
    if (!file) file = file_flag;
    if (!file) return cli_usage_error(cmd, "a transcoder file is required (FILE or "
                                      "--transcoder FILE)");
    if (feature < 0) return cli_usage_error(cmd, "--feature I is required");
    session s;
    ffn_transcoder *tc = NULL;
    ffn_status st = ffn_tc_load(file, &tc);
    if (st) return cli_fail(CMD, st);
    if ((rc = session_open(model, data, threads, 1, 0, &s))) {
        ffn_tc_free(tc);
        edit_session_free(&s);
        return rc;
    }
    const ffn_tc_config *c = ffn_tc_get_config(tc);
    if (feature >= c->features) {
        const long long nf = (long long)c->features;
        ffn_tc_free(tc);
        edit_session_free(&s);
        return cli_usage_error(cmd, "--feature %lld: the file has %lld features "
                               "(0..%lld)", (long long)feature, nf, nf - 1);
    }
    const int64_t V = ffn_model_get_config(s.model)->vocab_size;
    const int32_t *tok = s.tokens + s.n_train;
    int64_t n_tok = s.n_tokens - s.n_train;
    if (n_tok > max_tokens) n_tok = max_tokens;
    int64_t *at = malloc((size_t)top * sizeof *at), found = 0;
    float *act = malloc((size_t)top * sizeof *act), *lens = malloc((size_t)V * sizeof *lens);
    int32_t *order = malloc((size_t)V * sizeof *order);
    if (!at || !act || !lens || !order) st = FFN_ERR_NOMEM;
    if (!st) st = ffn_tc_top_activations(s.ctx, s.model, tc, feature, tok, n_tok, top, at, act,
                                         &found);
    if (!st) st = ffn_tc_feature_logits(s.model, tc, feature, lens);
    if (st) {
        rc = cli_fail(CMD, st);
    } else {
        /* tokens by lens, descending (stable on id) */
        for (int64_t i = 0; i < V; i++) order[i] = (int32_t)i;
        for (int64_t i = 1; i < V; i++) { /* insertion sort is fine for a vocabulary */
            const int32_t o = order[i];
            int64_t j = i;
            while (j > 0 && lens[order[j - 1]] < lens[o]) {
                order[j] = order[j - 1];
                j--;
            }
            order[j] = o;
        }
        const int64_t P = promoted < V ? promoted : V;
        if (json) {
            printf("{\"file\": ");
            cli_json_string(stdout, file);
            printf(", \"kind\": \"%s\", \"layer\": %lld, \"feature\": %lld, \"tokens_read\": %lld, "
                   "\"contexts\": [", ffn_tc_kind_name(c->kind), (long long)c->layer,
                   (long long)feature, (long long)n_tok);
        } else {
            printf("%s feature %lld of layer %lld (%s): top contexts in %lld held-out tokens\n",
                   ffn_tc_kind_name(c->kind), (long long)feature, (long long)c->layer, file,
                   (long long)n_tok);
        }
        for (int64_t i = 0; i < found; i++) {
            const int64_t t = at[i], a0 = t - context > 0 ? t - context : 0;
            char *before = decode_span(s.vocab, tok, a0, t), *here = decode_span(s.vocab, tok, t, t + 1);
            char *next = decode_span(s.vocab, tok, t + 1, t + 2 < n_tok ? t + 2 : n_tok);
            if (json) {
                printf("%s{\"position\": %lld, \"activation\": %s, \"token\": %d, \"before\": ",
                       i ? ", " : "", (long long)t, num(act[i]), tok[t]);
                cli_json_string(stdout, before);
                printf(", \"text\": ");
                cli_json_string(stdout, here);
                printf(", \"next\": ");
                cli_json_string(stdout, next);
                printf("}");
            } else {
                printf("  %8.3f  ...%s[%s]%s\n", act[i], before, here, next);
            }
            free(before);
            free(here);
            free(next);
        }
        if (!json && found == 0) printf("  (never active in these tokens)\n");
        for (int side = 0; side < 2; side++) {
            if (json) printf("%s\"%s\": [", side ? ", " : "], ", side ? "suppressed" : "promoted");
            else printf("%s (U (g * d), %s):\n", side ? "suppresses" : "promotes",
                        side ? "most negative" : "largest");
            for (int64_t i = 0; i < P; i++) {
                const int32_t id = side ? order[V - 1 - i] : order[i];
                char *t1 = decode_span(s.vocab, &id, 0, 1);
                if (json) {
                    printf("%s{\"token\": %d, \"text\": ", i ? ", " : "", id);
                    cli_json_string(stdout, t1);
                    printf(", \"logit\": %s}", num(lens[id]));
                } else {
                    printf("  %9.4f  %s\n", lens[id], t1);
                }
                free(t1);
            }
            if (json) printf("]");
        }
        if (json) printf("}\n");
    }
    free(at);
    free(act);
    free(lens);
    free(order);
    ffn_tc_free(tc);
    edit_session_free(&s);
    return rc;
}

/* ---- purity: neurons against features on the facts ------------------------------------------ */

#define MAX_SIZES 16

typedef struct unit_set {
    const char *name;   /* "neurons", a file name */
    const char *kind;   /* "neuron", "transcoder", "sae" */
    int64_t U;
    float *act;         /* (S, U) */
    double purity[2], chance[2];
    int64_t scored[2], needed[2];
    double acc[2][MAX_SIZES];
    int64_t sizes[MAX_SIZES], n_sizes;
} unit_set;

static int run_purity(int argc, char **argv) {
    const char *model = NULL, *facts_path = NULL, *files[MAX_FILES];
    int n_files = 0, json = 0;
    int64_t layer = -1, top = 10, threads = 0;
    double target = 0.9;
    const cli_opt opts[] = {
        {CLI_INT_FIELDS("--layer", &layer, "L", 0, 1 << 20, "the layer (" CLI_LAYER_HELP
                        "; required; the files must be of this layer)"), .def = ""},
        {.name = "--file", .type = CLI_PATH, .dst = files, .metavar = "FILE",
         .max_count = MAX_FILES, .count = &n_files,
         .help = "a transcoder or SAE file of that layer (repeat for several)"},
        {.name = "--facts", .type = CLI_PATH, .dst = &facts_path, .metavar = "FILE",
         .help = "a facts file (JSON lines; default: the built-in facts corpus the model was "
                 "trained on)"},
        {CLI_INT_FIELDS("--top", &top, "N", 1, 100000, "a unit's top activations scored")},
        {CLI_FLOAT_FIELDS("--accuracy", &target, "A", 0, 1, "the readout accuracy asked for")},
        CLI_OPT_THREADS(&threads),
        CLI_OPT_JSON(&json, "one JSON object on stdout"),
        {0}};
    const cli_pos pos[] = {CLI_POS_MODEL(&model), {0}};
    const cli_spec spec = {
        "transcoder purity", "MODEL --layer L [--file FILE]... [options]",
        "Superposition measured on the facts: every prompt and paraphrase of every fact\n"
        "is run through the model, and at its last token (where the object is\n"
        "predicted) layer L's neurons (m, the input of down_proj) and the features of\n"
        "each --file are read.  For each kind of unit:\n"
        "  purity     the share of a unit's --top largest (positive) activations that\n"
        "             have one relation (or one object), averaged over the units active\n"
        "             on at least --top prompts; 'chance' is the same share for prompts\n"
        "             drawn at random;\n"
        "  readout    the fewest units (1, 2, 4, ..., the best by correlation ratio)\n"
        "             from which a ridge least-squares classifier, fitted on the prompt\n"
        "             and all but the last paraphrase, names the relation (or object)\n"
        "             of the last paraphrases with accuracy >= --accuracy.\n"
        "A feature basis that is less superposed than the neurons shows higher purity\n"
        "and needs fewer units.", epilog, opts, pos};
    int rc;
    if (cli_parse(&spec, argc, argv, &rc)) return rc;
    if (layer < 0) return cli_usage_error("transcoder purity", "--layer L is required");
    session s;
    if ((rc = session_open(model, NULL, threads, 1, 0, &s))) {
        edit_session_free(&s);
        return rc;
    }
    const ffn_model_config *mc = ffn_model_get_config(s.model);
    if ((rc = cli_check_layer("transcoder purity", layer, mc->num_hidden_layers))) {
        edit_session_free(&s);
        return rc;
    }
    ffn_facts *facts = NULL;
    ffn_status st = facts_path ? ffn_facts_load(facts_path, &facts) : edit_source_facts(model, &facts);
    if (!st && !facts) {
        cli_error(CMD, "%s was not trained on the built-in facts corpus; give --facts FILE", model);
        edit_session_free(&s);
        return CLI_EXIT_USAGE;
    }
    unit_set sets[MAX_FILES + 1];
    memset(sets, 0, sizeof sets);
    int n_sets = 0;
    int64_t S = 0, D = mc->hidden_size, V = mc->vocab_size;
    int64_t F = 0;
    float *X = NULL, *Y = NULL, *logits = NULL;
    int32_t *lab[2] = {NULL, NULL};
    unsigned char *is_test = NULL;
    int64_t n_cls[2] = {0, 0};
    char **names[2] = {NULL, NULL};
    if (st) goto fail;
    for (int64_t f = 0; f < facts->n_facts; f++) S += 1 + facts->facts[f].n_paraphrases;
    X = malloc((size_t)(S * D) * sizeof *X);
    Y = malloc((size_t)(S * D) * sizeof *Y);
    logits = malloc((size_t)(mc->max_position_embeddings * V) * sizeof *logits);
    is_test = calloc((size_t)S, 1);
    for (int a = 0; a < 2; a++) {
        lab[a] = malloc((size_t)S * sizeof *lab[a]);
        names[a] = calloc((size_t)S, sizeof *names[a]);
    }
    if (!X || !Y || !logits || !is_test || !lab[0] || !lab[1] || !names[0] || !names[1]) {
        st = FFN_ERR_NOMEM;
        goto fail;
    }
    char tm[64], tin[64], tout[64];
    ffn_tap_name(tm, sizeof tm, layer, FFN_TAP_M);
    ffn_tap_name(tin, sizeof tin, layer, FFN_TAP_MLP_IN);
    ffn_tap_name(tout, sizeof tout, layer, FFN_TAP_MLP_OUT);
    if ((st = ffn_model_tap_select(s.model, tm)) || (st = ffn_model_tap_select(s.model, tin)) ||
        (st = ffn_model_tap_select(s.model, tout)) ||
        (st = ffn_model_tap_lookup(s.model, tm, NULL, NULL, &F)))
        goto fail;
    sets[0].name = "neurons";
    sets[0].kind = "neuron";
    sets[0].U = F;
    if (!(sets[0].act = malloc((size_t)(S * F) * sizeof(float)))) {
        st = FFN_ERR_NOMEM;
        goto fail;
    }
    n_sets = 1;
    int64_t si = 0;
    for (int64_t f = 0; f < facts->n_facts && !st; f++) {
        const ffn_fact *fa = &facts->facts[f];
        const char *attr[2] = {fa->relation, fa->object};
        for (int64_t p = 0; p <= fa->n_paraphrases && !st; p++, si++) {
            const char *text = p == 0 ? fa->prompt : fa->paraphrases[p - 1];
            int32_t *ids = NULL;
            int64_t n = 0;
            if ((st = ffn_vocab_encode(s.vocab, text, strlen(text), 0, &ids, &n))) break;
            if (n < 1 || n > mc->max_position_embeddings) {
                free(ids);
                st = ffn_set_error(FFN_ERR_INVALID_ARG, "fact %lld: prompt '%s' is %lld tokens",
                                   (long long)fa->id, text, (long long)n);
                break;
            }
            st = ffn_model_logits(s.model, logits, ids, 1, n);
            free(ids);
            ffn_tap_view v;
            if (!st && !(st = ffn_model_tap_read(s.model, tm, &v)))
                memcpy(sets[0].act + si * F, (const float *)v.data + (n - 1) * F, (size_t)F * sizeof(float));
            if (!st && !(st = ffn_model_tap_read(s.model, tin, &v)))
                memcpy(X + si * D, (const float *)v.data + (n - 1) * D, (size_t)D * sizeof(float));
            if (!st && !(st = ffn_model_tap_read(s.model, tout, &v)))
                memcpy(Y + si * D, (const float *)v.data + (n - 1) * D, (size_t)D * sizeof(float));
            is_test[si] = p == fa->n_paraphrases && p > 0;
            for (int a = 0; a < 2; a++) { /* the attribute's class: its first sample's index */
                int64_t c = 0;
                while (c < n_cls[a] && strcmp(names[a][c], attr[a]) != 0) c++;
                if (c == n_cls[a]) names[a][n_cls[a]++] = (char *)attr[a];
                lab[a][si] = (int32_t)c;
            }
        }
    }
    ffn_model_taps_clear(s.model);
    if (st) goto fail;
    for (int i = 0; i < n_files && !st; i++) {
        ffn_transcoder *tc = NULL;
        if ((st = ffn_tc_load(files[i], &tc))) break;
        const ffn_tc_config *c = ffn_tc_get_config(tc);
        if (c->layer != layer || c->d_model != D) {
            st = ffn_set_error(FFN_ERR_INVALID_ARG, "%s: a %s of layer %lld (width %lld); --layer "
                               "is %lld (width %lld)", files[i], ffn_tc_kind_name(c->kind),
                               (long long)c->layer, (long long)c->d_model, (long long)layer,
                               (long long)D);
            ffn_tc_free(tc);
            break;
        }
        unit_set *u = &sets[n_sets++];
        u->name = files[i];
        u->kind = ffn_tc_kind_name(c->kind);
        u->U = c->features;
        const int64_t k = c->k;
        int32_t *idx = malloc((size_t)(S * k) * sizeof *idx);
        float *val = malloc((size_t)(S * k) * sizeof *val);
        u->act = calloc((size_t)(S * u->U), sizeof(float));
        if (!idx || !val || !u->act) st = FFN_ERR_NOMEM;
        if (!st) st = ffn_tc_forward(s.ctx, tc, c->kind == FFN_TC_KIND_SAE ? Y : X, S, NULL, idx, val);
        for (int64_t r = 0; r < S && !st; r++)
            for (int64_t q = 0; q < k; q++) u->act[r * u->U + idx[r * k + q]] = val[r * k + q];
        free(idx);
        free(val);
        ffn_tc_free(tc);
    }
    for (int i = 0; i < n_sets && !st; i++) {
        unit_set *u = &sets[i];
        for (int64_t m = 1; u->n_sizes < MAX_SIZES; m *= 2) {
            const int64_t mm = m < u->U ? m : u->U;
            if (mm > 1024) break;
            u->sizes[u->n_sizes++] = mm;
            if (mm == u->U) break;
        }
        for (int a = 0; a < 2 && !st; a++) {
            st = ffn_purity(u->act, S, u->U, lab[a], n_cls[a], top < S ? top : S, &u->purity[a],
                            &u->scored[a], &u->chance[a]);
            if (!st) st = ffn_readout(u->act, S, u->U, lab[a], n_cls[a], is_test, u->sizes,
                                      u->n_sizes, target, u->acc[a], &u->needed[a]);
        }
    }
    if (st) goto fail;
    static const char *const attr_names[2] = {"relation", "object"};
    if (json) {
        printf("{\"layer\": %lld, \"samples\": %lld, \"top\": %lld, \"accuracy\": %s, "
               "\"classes\": {\"relation\": %lld, \"object\": %lld}, \"units\": [",
               (long long)layer, (long long)S, (long long)top, num(target), (long long)n_cls[0],
               (long long)n_cls[1]);
        for (int i = 0; i < n_sets; i++) {
            const unit_set *u = &sets[i];
            printf("%s{\"name\": ", i ? ", " : "");
            cli_json_string(stdout, u->name);
            printf(", \"kind\": \"%s\", \"count\": %lld", u->kind, (long long)u->U);
            for (int a = 0; a < 2; a++) {
                printf(", \"%s\": {\"purity\": %s, \"scored\": %lld, \"chance\": %s, "
                       "\"units_needed\": %lld, \"readout\": [", attr_names[a], num(u->purity[a]),
                       (long long)u->scored[a], num(u->chance[a]), (long long)u->needed[a]);
                for (int64_t q = 0; q < u->n_sizes; q++)
                    printf("%s{\"units\": %lld, \"accuracy\": %s}", q ? ", " : "",
                           (long long)u->sizes[q], num(u->acc[a][q]));
                printf("]}");
            }
            printf("}");
        }
        printf("]}\n");
    } else {
        printf("neurons vs features, layer %lld: %lld prompts (%lld facts; %lld relations, "
               "%lld objects), the last token\n", (long long)layer, (long long)S,
               (long long)facts->n_facts, (long long)n_cls[0], (long long)n_cls[1]);
        printf("%-24s %-10s %6s %15s %15s %9s %12s\n", "units", "kind", "count",
               "purity(rel)", "purity(obj)", "rel@acc", "obj@acc");
        for (int i = 0; i < n_sets; i++) {
            const unit_set *u = &sets[i];
            char need[2][32], pur[2][48];
            for (int a = 0; a < 2; a++) {
                double best = 0;
                for (int64_t q = 0; q < u->n_sizes; q++) best = fmax(best, u->acc[a][q]);
                if (u->needed[a] < 0) snprintf(need[a], sizeof need[a], ">%lld (%.2f)",
                                               (long long)u->sizes[u->n_sizes - 1], best);
                else snprintf(need[a], sizeof need[a], "%lld", (long long)u->needed[a]);
                snprintf(pur[a], sizeof pur[a], "%.3f (%lld)", u->purity[a], (long long)u->scored[a]);
            }
            printf("%-24s %-10s %6lld %15s %15s %9s %12s\n", u->name, u->kind, (long long)u->U,
                   pur[0], pur[1], need[0], need[1]);
        }
        printf("chance purity (top %lld prompts at random): relation %.3f, object %.3f; "
               "readout accuracy asked: %.2f\n", (long long)(top < S ? top : S), sets[0].chance[0],
               sets[0].chance[1], target);
    }
    goto done;
fail:
    rc = cli_fail(CMD, st);
done:
    for (int i = 0; i < n_sets; i++) free(sets[i].act);
    free(X);
    free(Y);
    free(logits);
    free(is_test);
    for (int a = 0; a < 2; a++) {
        free(lab[a]);
        free(names[a]);
    }
    ffn_facts_free(facts);
    edit_session_free(&s);
    return rc;
}

int cmd_transcoder(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "purity")) return run_purity(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "inspect")) return cmd_transcoder_inspect(argc - 1, argv + 1, "transcoder inspect");
    if (argc >= 2 && !strcmp(argv[1], "train")) return run_train(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "eval")) return run_eval(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "step")) return run_step(argc - 1, argv + 1);
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: ffn transcoder train MODEL --layer L --out FILE [options]\n"
               "       ffn transcoder eval MODEL FILE... [options]\n"
               "       ffn transcoder inspect MODEL FILE --feature I [options]\n"
               "       ffn transcoder purity MODEL --layer L [--file FILE]... [options]\n"
               "       ffn transcoder step IN OUT [--steps N] (tests, benchmarks)\n\n%s\n\n"
               "see 'ffn transcoder train --help' for the flags.\n", about);
        return 0;
    }
    return cli_usage_error("transcoder", "expected a subcommand: train, eval, inspect, purity or step");
}
