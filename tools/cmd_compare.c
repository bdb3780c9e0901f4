/* cmd_compare.c -- `ffn compare`: train FFN variants at equal parameters on
 * the same data and compare their validation loss, cost and speed. */
#include "experiment.h"

#include <stdlib.h>
#include <string.h>

static const char about[] =
            "Trains one small decoder-only Transformer per FFN variant, on the same data\n"
            "and batches, and compares their held-out (validation) loss.  Variants are\n"
            "compared at equal parameter count (Shazeer 2020, \"GLU Variants Improve\n"
            "Transformer\"):\n"
            "  dense     linear relu gelu gelu_pytorch_tanh silu|swish sigmoid: width F (4·D)\n"
            "  gated     glu bilinear reglu geglu swiglu: width round(2F/3), so that\n"
            "            3·D·(2F/3) = 2·D·F weights\n"
            "  moe       top-K of E SwiGLU experts of width round(2F/3)/K: the same ACTIVE\n"
            "            parameters as swiglu per token; the total is reported\n"
            "  none      attention only (no FFN): the baseline, with fewer parameters\n"
            "'linear' is the collapse case: two linear maps make one (see ffn collapse).\n"
            "Differences smaller than the spread over --seeds are noise; at a few hundred\n"
            "steps the variants are still close (see ffn demo, 1500 steps by default).\n";

static const char synopsis[] =
    "[--data FILE | --corpus en|zh] [--variants LIST] [--steps S]\n"
    "                   [--seeds N] [--out DIR] [--json] [model and loop flags]";

static const char epilog[] =
            "Output: a table on stdout (parameters total and active, forward FLOPs per\n"
            "token, validation loss mean ± sample std over seeds, final training loss,\n"
            "training tokens/s); progress on stderr when it is a terminal.  Ctrl-C saves\n"
            "the running model's checkpoint and stops.\n";

/* The defaults of compare and demo: a model small enough to train many
 * variants on two cores in minutes. */
void exp_plan_defaults(exp_plan *plan, const char *cmd) {
    memset(plan, 0, sizeof *plan);
    plan->cmd = cmd;
    ffn_train_options_default(&plan->train);
    ffn_train_options *t = &plan->train;
    t->model.hidden_size = 64;
    t->model.num_hidden_layers = 2;
    t->model.num_attention_heads = 4;
    t->model.num_key_value_heads = 0; /* = heads unless given */
    t->batch_size = 16;
    t->seq_len = 64;
    t->steps = 300;
    t->lr = 3e-3;
    t->min_lr = 3e-4;
    t->eval_every = 0; /* steps / 10 */
    t->corpus_sentences = 20000;
    plan->experts = 4;
    plan->top_k = 2;
    plan->seeds = 3;
}

/* After flags: fill what depends on other fields. */
int exp_plan_finish(exp_plan *plan) {
    ffn_train_options *t = &plan->train;
    if (t->model.num_key_value_heads == 0) t->model.num_key_value_heads = t->model.num_attention_heads;
    if (t->eval_every == 0) t->eval_every = t->steps >= 10 ? t->steps / 10 : 1;
    if (plan->top_k > plan->experts) {
        cli_error(plan->cmd, "--num-experts-per-tok %lld exceeds --num-experts %lld",
                  (long long)plan->top_k, (long long)plan->experts);
        return 0;
    }
    return 1;
}

int cmd_compare(int argc, char **argv) {
    const char *cmd = "compare";
    exp_plan plan;
    exp_plan_defaults(&plan, cmd);
    const char *variants = "none,linear,relu,gelu,swish,glu,bilinear,reglu,geglu,swiglu,moe";
    const char *data = NULL;
    plan.out_dir = "ffn-compare";
    int64_t seeds = plan.seeds;
    int lang_given = 0;
    const cli_opt own[] = {
        {.name = "--data", .type = CLI_PATH, .dst = &data, .metavar = "FILE",
         .help = "UTF-8 text to train on (default: the built-in corpus; not with --lang)"},
        {.name = "--variants", .type = CLI_LIST, .dst = &variants, .metavar = "LIST",
         .def = "none, linear, relu, gelu, swish, glu, bilinear, reglu, geglu, swiglu, moe",
         .help = "comma-separated variant names (above)"},
        {.name = "--seeds", .type = CLI_INT, .dst = &seeds, .metavar = "N", .imin = 1, .imax = 100,
         .help = "runs per variant, seeds S, S+1, ...; the table gives mean ± sample std"},
        CLI_OPT_OUT(&plan.out_dir, "DIR", "checkpoints per run (DIR/<variant>-seed<k>/), their "
                    "metrics (.metrics.jsonl), DIR/val_loss.svg and DIR/compare.json; an existing DIR "
                    "is refused unless it is this experiment and --resume is given, or --force is"),
    };
    int rc;
    if (!exp_parse(&plan, own, (int)(sizeof own / sizeof own[0]), synopsis, about, epilog, argc,
                   argv, &lang_given, &rc))
        return rc;
    if (data && lang_given)
        return cli_usage_error(cmd, "--data %s and --lang/--corpus %s exclude each other: "
                               "--data trains on the file, --lang picks the built-in corpus",
                               data, ffn_lang_name(plan.train.corpus_lang));
    plan.seeds = (int)seeds;
    plan.train.data_path = data;
    if (!exp_plan_finish(&plan) || !exp_parse_variants(&plan, variants)) return CLI_EXIT_USAGE;

    ffn_ctx *ctx = NULL;
    if (cli_make_ctx(cmd, plan.threads, &ctx)) return CLI_EXIT_FAIL;
    rc = exp_run(ctx, &plan);
    if (rc == 0) {
        if (plan.json) exp_print_json(stdout, &plan);
        else {
            exp_print_table(stdout, &plan);
            printf("\nvalidation curves: %s/val_loss.svg   table: %s/compare.json\n", plan.out_dir,
                   plan.out_dir);
        }
    }
    exp_free(&plan);
    ffn_ctx_free(ctx);
    return rc;
}
