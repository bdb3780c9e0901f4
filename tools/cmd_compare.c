/* cmd_compare.c -- `ffn compare`: train FFN variants at equal parameters on
 * the same data and compare their validation loss, cost and speed. */
#include "experiment.h"

#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: ffn compare [--data FILE | --corpus en|zh] [--variants LIST] [--steps S]\n"
            "                   [--seeds N] [--out DIR] [--resume | --force] [--json]\n"
            "                   [model and loop flags]\n"
            "\n"
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
            "\n"
            "options:\n"
            "  --data FILE            UTF-8 text to train on (default: the built-in corpus)\n"
            "  --corpus en|zh         the built-in corpus's language (default en)\n"
            "  --sentences N          built-in corpus size (default 20000)\n"
            "  --tokenizer byte|char|word   (default char)\n"
            "  --variants LIST        comma-separated (default\n"
            "                         none,linear,relu,gelu,swish,glu,bilinear,reglu,geglu,swiglu,moe)\n"
            "  --steps S              optimizer steps per run (default 300)\n"
            "  --seeds N              runs per variant, seeds S, S+1, ... (default 3)\n"
            "  --seed S               the first seed (default 1234)\n"
            "  --out DIR              checkpoints per run (DIR/<variant>-seed<k>/), their\n"
            "                         metrics (.metrics.jsonl), DIR/val_loss.svg and\n"
            "                         DIR/compare.json (default ffn-compare); an existing\n"
            "                         DIR is refused unless it is this experiment and\n"
            "                         --resume is given, or --force is\n"
            "  --resume               continue the experiment in DIR: finished runs are\n"
            "                         kept, an interrupted one continues, the table is\n"
            "                         rebuilt (the settings must be the same)\n"
            "  --force                replace the experiment in DIR (removes only the\n"
            "                         files an experiment writes there)\n"
            "  --json                 print the table as JSON on stdout: one object per\n"
            "                         variant with variant, total_params, active_params,\n"
            "                         flops_per_token, val_loss_mean, val_loss_std,\n"
            "                         tokens_per_s and the mean validation curve\n"
            "  --threads N            (default FFN_NUM_THREADS or all cores)\n"
            "model (Hugging Face names): --hidden-size D (64) --intermediate-size F (4·D,\n"
            "  the dense width) --num-hidden-layers L (2) --num-attention-heads H (4)\n"
            "  --num-key-value-heads G (H) --num-experts E (4) --num-experts-per-tok K (2)\n"
            "loop: --batch-size B (16) --seq-len T (64) --lr (3e-3) --min-lr (3e-4)\n"
            "  --eval-every K (steps/10) --eval-batches N (8)\n"
            "\n"
            "Output: a table on stdout (parameters total and active, forward FLOPs per\n"
            "token, validation loss mean ± sample std over seeds, final training loss,\n"
            "training tokens/s); progress on stderr when it is a terminal.  Ctrl-C saves\n"
            "the running model's checkpoint and stops.\n");
}

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
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if ((r = cli_flag(cmd, argc, argv, &i, "--variants", &v)) != 0) {
            if (r < 0) return CLI_EXIT_USAGE;
            variants = v;
            continue;
        }
        if ((r = cli_flag(cmd, argc, argv, &i, "--data", &v)) != 0) {
            if (r < 0) return CLI_EXIT_USAGE;
            data = v;
            continue;
        }
        if ((r = cli_flag(cmd, argc, argv, &i, "--seeds", &v)) != 0) {
            if (r < 0 || !cli_parse_i64(cmd, "--seeds", v, 1, 100, &seeds)) return CLI_EXIT_USAGE;
            continue;
        }
        r = exp_parse_common_flag(&plan, argc, argv, &i);
        if (r < 0) return CLI_EXIT_USAGE;
        if (r > 0) continue;
        cli_error(cmd, "unknown option '%s' (see ffn compare --help)", argv[i]);
        return CLI_EXIT_USAGE;
    }
    plan.seeds = (int)seeds;
    plan.train.data_path = data;
    if (!exp_plan_finish(&plan) || !exp_parse_variants(&plan, variants)) return CLI_EXIT_USAGE;

    ffn_ctx *ctx = NULL;
    if (cli_make_ctx(cmd, (int)plan.threads, &ctx)) return CLI_EXIT_FAIL;
    int rc = exp_run(ctx, &plan);
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
