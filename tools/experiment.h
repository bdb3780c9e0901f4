/* experiment.h -- training several FFN variants at equal parameter count and
 * comparing them: the engine under `ffn compare` and `ffn demo`.
 *
 * Equal parameters (Shazeer 2020, "GLU Variants Improve Transformer"):
 *   dense variants (linear, relu, gelu, ...) use width F_dense (default 4·D),
 *     2·D·F_dense FFN weights per block;
 *   gated variants (glu, bilinear, reglu, geglu, swiglu) use
 *     F_gated = round(2·F_dense / 3), so 3·D·F_gated ≈ 2·D·F_dense;
 *   moe is top-K of E SwiGLU experts of width F_gated / K each, so the
 *     parameters one token uses (K experts + the router) match swiglu's,
 *     while the total grows with E;
 *   none is attention only (no FFN at all): fewer parameters, reported. */
#ifndef FFN_EXPERIMENT_H
#define FFN_EXPERIMENT_H

#include "cli.h"

#define EXP_MAX_VARIANTS 32

typedef struct exp_variant {
    char name[32];
    ffn_model_config model;  /* the FFN part filled in; shape from the base */
    /* results, over seeds */
    int n_runs;
    double val_mean, val_std;      /* final held-out loss */
    double val_m2;                 /* Welford's sum of squared deviations */
    double train_mean;             /* final training loss */
    double tokens_per_s;           /* mean over seeds */
    double seconds;                /* total wall time of its runs */
    int64_t total_params, active_params;
    int64_t flops_per_token;       /* forward, matrix products (2 per multiply-add) */
    /* the mean validation curve over seeds */
    int64_t n_evals;
    int64_t *eval_step;
    double *eval_loss;
    char best_dir[1024];           /* checkpoint of the run with the lowest val loss */
    double best_val;
} exp_variant;

typedef struct exp_plan {
    ffn_train_options train;       /* data, loop and base model; out_dir unused */
    int64_t dense_width;           /* F_dense (0: 4·D) */
    int64_t experts, top_k;        /* the moe variant (4, 2) */
    int seeds;                     /* runs per variant (seed, seed+1, ...) */
    const char *out_dir;           /* per-run checkpoints, curves, SVG, JSON */
    const char *cmd;               /* for messages: "compare" or "demo" */
    int json;                      /* --json: print the comparison as JSON */
    int64_t threads;               /* --threads (0: FFN_NUM_THREADS or all cores) */
    int quiet;                     /* no progress at all */
    int force;                     /* --force: replace another experiment's results */
    int resume;                    /* --resume: keep finished runs, continue the rest */
    int n_variants;
    exp_variant variants[EXP_MAX_VARIANTS];
} exp_plan;

/* Parse "none,linear,...,moe" into plan->variants (after plan->train.model
 * and dense_width/experts/top_k are set).  Prints the error and returns 0
 * on an unknown name. */
int exp_parse_variants(exp_plan *plan, const char *list);

/* Train every variant × seed, filling the results; writes
 * OUT/<variant>-seed<k>/ run directories, OUT/<variant>-seed<k>.metrics.jsonl,
 * OUT/<variant>-seed<k>.result (a finished run's numbers), OUT/val_loss.svg
 * and OUT/compare.json (rewritten after every finished run, so an
 * interrupted experiment leaves a table of what finished), and
 * OUT/experiment.txt (the settings that make the experiment).  An OUT
 * holding another experiment is refused without --force (which removes
 * only the files the experiment wrote); the same experiment is refused
 * without --resume (finished runs kept, unfinished ones continued, the
 * table rebuilt) or --force.  Returns 0, or an exit code after printing the
 * error.  SIGINT/SIGTERM save the running model's checkpoint and stop (130). */
int exp_run(ffn_ctx *ctx, exp_plan *plan);

/* The comparison table on f (human-readable), and as JSON. */
void exp_print_table(FILE *f, const exp_plan *plan);
void exp_print_json(FILE *f, const exp_plan *plan);

void exp_free(exp_plan *plan);

/* Validation-loss curves as a standalone SVG (no external resources). */
int exp_write_svg(const exp_plan *plan, const char *path);

/* Defaults shared by compare and demo (a small model: D 64, L 2, H 4,
 * B 16, T 64, 300 steps, lr 3e-3), and the fields that depend on others,
 * filled after the flags (0 on an inconsistent combination, printed). */
void exp_plan_defaults(exp_plan *plan, const char *cmd);
int exp_plan_finish(exp_plan *plan);

/* The flags shared by compare and demo (model shape, loop, --out is the
 * command's own): writes at most EXP_N_COMMON_OPTS entries to opts, pointing
 * into plan, and returns how many.  *lang_given is set when --lang (or its
 * other spelling --corpus) is given. */
#define EXP_N_COMMON_OPTS 26
int exp_common_opts(exp_plan *plan, cli_opt *opts, int *lang_given);
/* The parse of compare and demo: the command's own flags (n_own of them, at
 * most EXP_MAX_OWN_OPTS) then the common ones, under plan->cmd.  Returns 1
 * when the command goes on, else 0 with *rc its exit status. */
#define EXP_MAX_OWN_OPTS 8
int exp_parse(exp_plan *plan, const cli_opt *own, int n_own, const char *synopsis,
              const char *about, const char *epilog, int argc, char **argv, int *lang_given,
              int *rc);

/* A difference of validation losses, a - b, against the noise: two standard
 * errors of the difference over the seeds when both ran more than once,
 * else the assumed one-seed spread (EXP_ONE_SEED_SPREAD in experiment.c). */
typedef enum { EXP_BETTER, EXP_SAME, EXP_WORSE } exp_verdict;
typedef struct exp_diff {
    double delta, noise;
    int measured;          /* noise from the seeds, not assumed */
    exp_verdict verdict;   /* better: a lower beyond the noise */
} exp_diff;
exp_diff exp_compare(const exp_variant *a, const exp_variant *b);

/* The demo's explanation of the rows none, linear, gelu, swiglu, moe: every
 * sentence follows from the numbers and the noise. */
void exp_explain(FILE *f, const exp_plan *plan);
/* The same from a compare.json (settings.steps, settings.seeds, variants). */
int exp_explain_file(const char *cmd, const char *path, ffn_lang lang);

#endif
