/* cmd_demo.c -- `ffn demo`, the main job: the lesson about the FFN run as an
 * experiment on the built-in corpus, in a few minutes on two cores.
 *
 * It trains the same small Transformer five times, changing only what sits
 * after attention: nothing, a linear FFN (which collapses to one matrix), a
 * GELU FFN, SwiGLU at equal parameters, and a Mixture of Experts (top-2 of 4
 * SwiGLU experts) at equal active parameters.  Then it prints the table,
 * what each row shows, a few sentences from the best model, and where the
 * checkpoints and the curves are. */
#include "experiment.h"
#include "report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: ffn demo [--out DIR] [--resume | --force] [--steps S] [--lang en|zh]\n"
            "                [--threads N] [--json]\n"
            "\n"
            "The lesson as an experiment.  Attention moves information between tokens;\n"
            "the FFN transforms it inside each token.  On the built-in corpus (sentences\n"
            "like \"Mary gave John the apple because he was hungry\", where the pronoun\n"
            "needs attention to resolve), ffn trains the same small Transformer five\n"
            "times, changing only the block after attention:\n"
            "  none     attention only\n"
            "  linear   a dense FFN without nonlinearity (collapses to one matrix)\n"
            "  gelu     a dense GELU FFN, width 4·D\n"
            "  swiglu   a gated FFN at 2/3 the width: the same parameters as gelu\n"
            "  moe      top-2 of 4 SwiGLU experts: swiglu's active parameters, 2x total\n"
            "then prints the comparison, what each row means, and sentences generated\n"
            "by the best model.  About a minute on two idle cores (at most three).\n"
            "\n"
            "options:\n"
            "  --out DIR       where checkpoints, metrics, val_loss.svg and compare.json\n"
            "                  go (default ffn-demo); an existing DIR needs --resume\n"
            "                  (the same demo: finished runs kept) or --force\n"
            "  --resume        continue the demo in DIR\n"
            "  --force         replace the results in DIR (only files ffn wrote)\n"
            "  --steps S       optimizer steps per variant (default 1500)\n"
            "  --lang en|zh    the corpus language (default en)\n"
            "  --threads N     (default FFN_NUM_THREADS or all cores)\n"
            "  --json          print the comparison as JSON instead of the table\n"
            "  also the model and loop flags of ffn compare (--hidden-size, --seq-len, ...);\n"
            "  more variants and seeds: ffn compare --help.\n");
}

static const exp_variant *find(const exp_plan *p, const char *name) {
    for (int i = 0; i < p->n_variants; i++)
        if (!strcmp(p->variants[i].name, name)) return &p->variants[i];
    return NULL;
}

/* "better", "no different", "worse" by a margin that is small next to the
 * seed-to-seed spread of such runs (about 0.01 nats). */
static const char *verdict(double delta) {
    if (delta < -0.01) return "better";
    if (delta > 0.01) return "worse";
    return "no different";
}

static void explain(const exp_plan *p) {
    const exp_variant *none = find(p, "none"), *lin = find(p, "linear"), *gelu = find(p, "gelu"),
                      *swi = find(p, "swiglu"), *moe = find(p, "moe");
    printf("\nwhat the rows show (validation loss; lower is better):\n");
    if (none)
        printf("  none    %.3f: attention alone; context arrives, but nothing transforms each "
               "token after it.\n",
               none->val_mean);
    if (lin && none)
        printf("  linear  %+.3f vs none (%s): without a nonlinearity the FFN is one D x D matrix "
               "in disguise (ffn collapse).\n",
               lin->val_mean - none->val_mean, verdict(lin->val_mean - none->val_mean));
    if (gelu && lin) {
        double d = gelu->val_mean - lin->val_mean;
        printf("  gelu    %+.3f vs linear at the same size (%s): %s\n", d, verdict(d),
               d < -0.01 ? "the nonlinearity is what makes the FFN's parameters pay."
                         : "at this training length the nonlinearity has not paid off yet.");
    }
    if (swi && gelu) {
        double d = swi->val_mean - gelu->val_mean;
        printf("  swiglu  %+.3f vs gelu at equal parameters (%s): %s\n", d, verdict(d),
               d < -0.01 ? "the input-dependent gate helps, as in Shazeer (2020)."
                         : "the gate does not help at this scale and length.");
    }
    if (moe && swi) {
        double d = moe->val_mean - swi->val_mean;
        printf("  moe     %+.3f vs swiglu at equal active parameters (%s): %lld of %lld "
               "parameters used per token; capacity decoupled from per-token compute.\n",
               d, verdict(d), (long long)moe->active_params, (long long)moe->total_params);
    }
}

typedef struct sample_state {
    int newlines;
} sample_state;

static int on_token(const char *bytes, size_t len, void *user) {
    sample_state *s = user;
    fwrite(bytes, 1, len, stdout);
    fflush(stdout);
    for (size_t i = 0; i < len; i++)
        if (bytes[i] == '\n') s->newlines++;
    return s->newlines >= 1;
}

static void show_samples(ffn_ctx *ctx, const exp_plan *p, ffn_lang lang) {
    const exp_variant *best = NULL;
    for (int i = 0; i < p->n_variants; i++)
        if (p->variants[i].best_dir[0] && (!best || p->variants[i].val_mean < best->val_mean))
            best = &p->variants[i];
    if (!best) return;
    ffn_model *model = NULL;
    ffn_tokenizer *tok = NULL;
    ffn_status st = ffn_run_dir_load(ctx, best->best_dir, &model, &tok);
    if (st != FFN_OK) {
        cli_fail("demo", st);
        return;
    }
    static const char *en[] = {"Mary gave", "The old man handed", "Because she was hungry,"};
    static const char *zh[] = {"小明把", "王芳给了", "因为他饿了，"};
    const char **prompts = lang == FFN_LANG_ZH ? zh : en;
    printf("\nsentences from the best model (%s, %s), temperature 0.7:\n", best->name,
           best->best_dir);
    for (int i = 0; i < 3; i++) {
        ffn_generate_options g;
        ffn_generate_options_default(&g);
        g.steps = 120;
        g.temperature = 0.7;
        g.top_p = 0.95;
        g.seed = 7 + (uint64_t)i;
        sample_state s = {0};
        printf("  %s", prompts[i]);
        fflush(stdout);
        st = ffn_generate(model, tok, prompts[i], &g, on_token, &s);
        if (!s.newlines) putchar('\n');
        if (st != FFN_OK) {
            cli_fail("demo", st);
            break;
        }
    }
    ffn_model_free(model);
    ffn_tokenizer_free(tok);
}

int cmd_demo(int argc, char **argv) {
    const char *cmd = "demo";
    exp_plan plan;
    exp_plan_defaults(&plan, cmd);
    plan.out_dir = "ffn-demo";
    plan.seeds = 1;
    plan.train.steps = 1500;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        int r = exp_parse_common_flag(&plan, argc, argv, &i);
        if (r < 0) return CLI_EXIT_USAGE;
        if (r > 0) continue;
        cli_error(cmd, "unknown option '%s' (see ffn demo --help)", argv[i]);
        return CLI_EXIT_USAGE;
    }
    if (!exp_plan_finish(&plan) || !exp_parse_variants(&plan, "none,linear,gelu,swiglu,moe"))
        return CLI_EXIT_USAGE;

    ffn_ctx *ctx = NULL;
    if (cli_make_ctx(cmd, (int)plan.threads, &ctx)) return CLI_EXIT_FAIL;
    /* one corpus for every variant */
    ffn_corpus *corpus = NULL;
    ffn_status st = ffn_corpus_generate(plan.train.corpus_lang, plan.train.corpus_seed,
                                        plan.train.corpus_sentences, &corpus);
    if (st != FFN_OK) {
        ffn_ctx_free(ctx);
        return cli_fail(cmd, st);
    }
    plan.train.text = corpus->text;
    plan.train.text_len = (size_t)corpus->n_bytes;
    fprintf(stderr,
            "ffn demo: %lld %s sentences of the built-in corpus; 5 variants x %lld steps "
            "(D %lld, %lld layers, %d threads); results in %s/\n",
            (long long)corpus->n_sentences, ffn_lang_name(plan.train.corpus_lang),
            (long long)plan.train.steps, (long long)plan.train.model.hidden_size,
            (long long)plan.train.model.num_hidden_layers, ffn_ctx_threads(ctx), plan.out_dir);
    int rc = exp_run(ctx, &plan);
    if (rc == 0) {
        if (plan.json) {
            exp_print_json(stdout, &plan);
        } else {
            printf("\n");
            exp_print_table(stdout, &plan);
            explain(&plan);
            show_samples(ctx, &plan, plan.train.corpus_lang);
        }
        /* the interactive report: curves, parameters, neurons per token */
        report_options ro;
        report_options_default(&ro);
        ro.cmd = cmd;
        if (plan.train.corpus_lang == FFN_LANG_ZH) ro.prompt = "王芳把苹果递给了小明，因为他饿了。";
        rc = report_write(ctx, plan.out_dir, &ro, NULL);
        if (rc == 0 && !plan.json) {
            printf("\ncheckpoints: %s/<variant>-seed1/   curves: %s/val_loss.svg   table: "
                   "%s/compare.json\nreport (open in a browser): %s/report.html\n",
                   plan.out_dir, plan.out_dir, plan.out_dir, plan.out_dir);
        }
    }
    exp_free(&plan);
    ffn_corpus_free(corpus);
    ffn_ctx_free(ctx);
    return rc;
}
