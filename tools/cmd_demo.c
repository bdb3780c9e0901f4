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
#include "i18n.h"
#include "report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char about[] =
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
            "by the best model.  It took 2 min 36 s on a 2-core machine shared with\n"
            "other jobs (less on idle cores).\n"
            "\n"
            "Each sentence of the explanation follows from the numbers: a difference\n"
            "within the noise (two standard errors over --seeds, or the seed-to-seed\n"
            "spread of such runs when --seeds is 1) is called noise, and a result against\n"
            "the expected direction is said to be so, with why it can happen.\n";

static const char synopsis[] =
    "[--out DIR] [--steps S] [--lang en|zh] [--seeds N]\n"
    "                [--threads N] [--json] [model and loop flags]";

static const char epilog[] = "More variants and seeds: ffn compare --help.\n";

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
    printf(i18n(lang, "demo.sentences"), best->name, best->best_dir);
    for (int i = 0; i < 3; i++) {
        ffn_generate_options g;
        ffn_generate_options_default(&g);
        g.steps = 120;
        g.temperature = 0.7;
        g.top_p = 0.95;
        g.seed = 7 + (uint64_t)i;
        cli_text_out s = {.stop_at_newline = 1}; /* one line per prompt */
        printf("  %s", prompts[i]);
        fflush(stdout);
        st = ffn_generate(model, tok, prompts[i], &g, cli_text_piece, &s);
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
    int64_t seeds = plan.seeds;
    int lang_given = 0;
    const char *explain_from = NULL;
    const cli_opt own[] = {
        CLI_OPT_OUT(&plan.out_dir, "DIR",
                    "where checkpoints, metrics, val_loss.svg and compare.json go; an existing DIR "
                    "needs --resume (the same demo: finished runs kept) or --force"),
        {.name = "--seeds", .type = CLI_INT, .dst = &seeds, .metavar = "N", .imin = 1, .imax = 100,
         .help = "runs per variant (N times the time); the explanation then uses their spread"},
        /* the explanation alone, from a compare.json (the tests feed it numbers) */
        {.name = "--explain-from", .type = CLI_PATH, .dst = &explain_from, .hidden = 1},
    };
    int rc;
    if (!exp_parse(&plan, own, (int)(sizeof own / sizeof own[0]), synopsis, about, epilog, argc,
                   argv, &lang_given, &rc))
        return rc;
    plan.seeds = (int)seeds;
    if (explain_from) return exp_explain_file(cmd, explain_from, plan.train.corpus_lang);
    if (!exp_plan_finish(&plan) || !exp_parse_variants(&plan, "none,linear,gelu,swiglu,moe"))
        return CLI_EXIT_USAGE;

    ffn_ctx *ctx = NULL;
    if (cli_make_ctx(cmd, plan.threads, &ctx)) return CLI_EXIT_FAIL;
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
            "ffn demo: %lld %s sentences of the built-in corpus; 5 variants x %lld steps x %d "
            "seed(s) (D %lld, %lld layers, %d threads); results in %s/\n",
            (long long)corpus->n_sentences, ffn_lang_name(plan.train.corpus_lang),
            (long long)plan.train.steps, plan.seeds, (long long)plan.train.model.hidden_size,
            (long long)plan.train.model.num_hidden_layers, ffn_ctx_threads(ctx), plan.out_dir);
    rc = exp_run(ctx, &plan);
    if (rc == 0) {
        if (plan.json) {
            exp_print_json(stdout, &plan);
        } else {
            printf("\n");
            exp_print_table(stdout, &plan);
            exp_explain(stdout, &plan);
            show_samples(ctx, &plan, plan.train.corpus_lang);
        }
        /* the interactive report: curves, parameters, neurons per token */
        report_options ro;
        report_options_default(&ro);
        ro.cmd = cmd;
        ro.lang = plan.train.corpus_lang; /* the lesson's language */
        if (plan.train.corpus_lang == FFN_LANG_ZH) ro.prompt = "王芳把苹果递给了小明，因为他饿了。";
        rc = report_write(ctx, plan.out_dir, &ro, NULL);
        if (rc == 0 && !plan.json) {
            printf(i18n(plan.train.corpus_lang, "demo.files"), plan.out_dir, plan.out_dir,
                   plan.out_dir, plan.out_dir);
        }
    }
    exp_free(&plan);
    ffn_corpus_free(corpus);
    ffn_ctx_free(ctx);
    return rc;
}
