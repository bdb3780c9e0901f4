/* cmd_train.c -- `ffn train`: train a small decoder-only Transformer on text
 * (a file or the built-in corpus), with checkpoints, resume, Ctrl-C saving,
 * progress and a metrics log.  The loop itself is ffn_train_run (train.h);
 * this file parses flags, installs the signal handlers and draws progress. */
#include "cli.h"
#include "ffn/train.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static const char *const CMD = "train";

static void usage(FILE *f) {
    ffn_train_options d;
    ffn_train_options_default(&d);
    fprintf(f,
"usage: ffn train [--data FILE | --corpus en|zh] [options]\n"
"\n"
"Trains a small decoder-only Transformer (Llama architecture: RMSNorm, causal\n"
"attention with RoPE and grouped KV heads, and an FFN -- dense, gated (GLU\n"
"family) or Mixture of Experts -- in every block) on text, with AdamW, a\n"
"warmup + cosine learning-rate schedule, gradient clipping and accumulation.\n"
"It evaluates on held-out text, writes checkpoints, and on Ctrl-C (SIGINT) or\n"
"SIGTERM saves a checkpoint and exits.  The same --seed gives the same run bit\n"
"for bit (at the same --threads).\n"
"\n"
"data:\n"
"  --data FILE              train on this UTF-8 text file; without --data, on\n"
"                           the built-in corpus (see `ffn corpus --help`)\n"
"  --corpus en|zh           the built-in corpus's language (default en)\n"
"  --corpus-sentences N     sentences of built-in corpus (default %lld)\n"
"  --tokenizer byte|char|word  vocabulary built from the text (default char)\n"
"  --max-vocab N            keep the N-1 most frequent symbols + <unk> (0 = all)\n"
"  --val-fraction F         the last F of the tokens are held out (default %g)\n"
"\n"
"the model (Hugging Face config.json names):\n"
"  --hidden-size D          (default %lld)\n"
"  --intermediate-size F    (default %lld)\n"
"  --num-hidden-layers L    (default %lld)\n"
"  --num-attention-heads H  (default %lld)\n"
"  --num-key-value-heads G  (default %lld; G < H is grouped-query attention)\n"
"  --hidden-act ACT         linear|relu|gelu|gelu_pytorch_tanh|silu|sigmoid (default silu)\n"
"  --mlp-type TYPE          none (attention only) | dense | gated (GLU family) |\n"
"                           moe (gated experts, --num-experts 4 unless given)\n"
"                           (default gated: with silu that is SwiGLU)\n"
"  --num-experts E          experts per MoE layer (0 = no MoE)\n"
"  --num-experts-per-tok K  experts each token uses (default %lld)\n"
"  --moe-intermediate-size F  width of each expert (0 = --intermediate-size)\n"
"  --moe-layer-freq k       every k-th layer is MoE (default 1: all)\n"
"  --tie-word-embeddings 0|1  LM head shares the embedding (default 1)\n"
"  --rope-theta X           (default %g)\n"
"\n"
"training:\n"
"  --steps S                optimizer steps; the schedule spans them (default %lld)\n"
"  --stop-at N              stop after step N (checkpoint saved); resume later\n"
"                           with --resume to finish the same schedule\n"
"  --seed N                 weights and batch order (default %llu)\n"
"  --batch-size B           sequences per micro-batch (default %lld)\n"
"  --seq-len T              context length (default %lld)\n"
"  --grad-accum A           micro-batches per step (default 1)\n"
"  --lr X                   peak learning rate (default %g)\n"
"  --min-lr X               learning rate at the end of the cosine (default %g)\n"
"  --warmup N               linear warmup steps (default min(100, steps/10))\n"
"  --weight-decay X         AdamW decoupled decay on matrices; never on norms\n"
"                           or biases (default %g)\n"
"  --beta1 X, --beta2 X, --eps X   AdamW (defaults %g, %g, %g)\n"
"  --clip X                 clip the gradient's global L2 norm (0 = off; default %g)\n"
"  --eval-every K           evaluate held-out loss every K steps and at the end\n"
"                           (default %lld; 0 = only at the end)\n"
"  --eval-batches N         fixed held-out batches per evaluation (default %lld)\n"
"  --threads N              threads (default: FFN_NUM_THREADS or all cores)\n"
"\n"
"files:\n"
"  --out DIR                run directory (default ffn-model); holds\n"
"                           config.json, model.safetensors, tokenizer.txt,\n"
"                           train_state.safetensors and metrics.jsonl.  Replaced\n"
"                           atomically: a crash never leaves it half written;\n"
"                           other files in it are kept.  An existing run is\n"
"                           replaced only with --resume or --force.  One writer\n"
"                           at a time: a second run on DIR fails at once.\n"
"  --save-every K           also checkpoint every K steps (default: only at the\n"
"                           end and on Ctrl-C)\n"
"  --resume DIR             continue the run saved in DIR (bit-identical to an\n"
"                           uninterrupted run).  Options default to the\n"
"                           checkpoint's; one that differs is an error naming\n"
"                           it, except --steps (a longer schedule), --eval-every,\n"
"                           --save-every, --threads.  --out defaults to DIR.\n"
"  --force                  replace an existing checkpoint in --out\n"
"  --log FILE               where the metrics go (default DIR/metrics.jsonl, saved\n"
"                           with each checkpoint and carried on by --resume): one\n"
"                           JSON object per line: step, loss, lr, tokens_per_s,\n"
"                           grad_norm, and val_loss when evaluated.  A FILE\n"
"                           elsewhere is written live (when resuming: lines after\n"
"                           the checkpoint's step are dropped, then new ones\n"
"                           appended)\n"
"  --json                   print the final summary as JSON on stdout\n"
"  --quiet                  no progress on stderr\n"
"\n"
"Progress goes to stderr: one live line on a terminal, plain lines otherwise;\n"
"the final summary goes to stdout.  Exit status: 0 done, 1 error (nothing\n"
"damaged: the previous checkpoint stays whole), 2 bad usage, 130 stopped by\n"
"Ctrl-C / SIGTERM after saving (a second Ctrl-C quits at once; the last\n"
"checkpoint is still whole).\n"
"\n"
"examples:\n"
"  ffn train --data input.txt --steps 500 --out run1\n"
"  ffn train --corpus en --tokenizer word --mlp-type moe --out moe1\n"
"  ffn train --steps 2000 --stop-at 1000 --out run2 && ffn train --resume run2\n"
"  ffn generate --model run1 --prompt 'Mary gave'\n",
            (long long)d.corpus_sentences, d.val_fraction, (long long)d.model.hidden_size,
            (long long)d.model.intermediate_size, (long long)d.model.num_hidden_layers,
            (long long)d.model.num_attention_heads, (long long)d.model.num_key_value_heads,
            (long long)d.model.num_experts_per_tok, d.model.rope_theta, (long long)d.steps,
            (unsigned long long)d.seed, (long long)d.batch_size, (long long)d.seq_len, d.lr,
            d.min_lr, d.weight_decay, d.beta1, d.beta2, d.eps, d.clip, (long long)d.eval_every,
            (long long)d.eval_batches);
}

/* ---- signals: the first request stops after the current step (saving);
 *      a second one ends the process at once ---- */

static volatile sig_atomic_t stop_requested = 0;

static void on_signal(int sig) {
    if (stop_requested) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    stop_requested = 1;
}

static void install_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART; /* a save in progress is not cut short by EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* ---- progress ---- */

typedef struct progress {
    int tty, quiet;
    int64_t every;          /* plain lines: every this many steps */
    double last_draw;
    double last_val;
    int drew_live;
} progress;

static double mono_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void format_duration(double s, char *buf, size_t n) {
    if (!isfinite(s) || s < 0) s = 0;
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%ldh%02ldm", t / 3600, (t / 60) % 60);
    else if (t >= 60) snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, n, "%lds", t);
}

static void on_start(const ffn_train_options *o, int64_t start, int64_t n_params, int64_t n_train,
                     int64_t n_val, void *user) {
    progress *p = user;
    if (p->quiet) return;
    fprintf(stderr,
            "ffn train: %lld parameters, %lld training + %lld held-out tokens, B=%lld T=%lld "
            "A=%lld, steps %lld..%lld of %lld\n",
            (long long)n_params, (long long)n_train, (long long)n_val, (long long)o->batch_size,
            (long long)o->seq_len, (long long)o->grad_accum, (long long)start + 1,
            (long long)(o->stop_at > 0 && o->stop_at < o->steps ? o->stop_at : o->steps),
            (long long)o->steps);
}

static void on_step(const ffn_train_point *pt, void *user) {
    progress *p = user;
    if (!isnan(pt->val_loss)) p->last_val = pt->val_loss;
    if (p->quiet) return;
    char eta[32], val[32] = "";
    format_duration(pt->eta_s, eta, sizeof eta);
    if (!isnan(p->last_val)) snprintf(val, sizeof val, "  val %.4f", p->last_val);
    if (p->tty) {
        double now = mono_seconds();
        if (now - p->last_draw < 0.1 && isnan(pt->val_loss) && pt->eta_s > 0) return;
        p->last_draw = now;
        fprintf(stderr, "\r\033[Kstep %lld/%lld  loss %.4f%s  %.0f tok/s  ETA %s",
                (long long)pt->step, (long long)pt->steps, pt->loss, val, pt->tokens_per_s, eta);
        fflush(stderr);
        p->drew_live = 1;
    } else if (pt->step % p->every == 0 || !isnan(pt->val_loss)) {
        fprintf(stderr, "step %lld/%lld  loss %.4f%s  lr %.3g  %.0f tok/s  ETA %s\n",
                (long long)pt->step, (long long)pt->steps, pt->loss, val, pt->lr, pt->tokens_per_s,
                eta);
    }
}

static void on_checkpoint(const char *dir, int64_t step, void *user) {
    progress *p = user;
    if (p->quiet || p->tty) return; /* the live line is not interrupted for it */
    fprintf(stderr, "checkpoint: step %lld saved in %s\n", (long long)step, dir);
}

/* ---- flags ---- */

static int parse_bool(const char *flag, const char *v, int *out) {
    if (!strcmp(v, "1") || !strcmp(v, "true")) *out = 1;
    else if (!strcmp(v, "0") || !strcmp(v, "false")) *out = 0;
    else {
        cli_error(CMD, "%s: expected 0|1|true|false, got '%s'", flag, v);
        return 0;
    }
    return 1;
}

typedef struct cli_state {
    const char *out, *resume, *log;
    int threads, force, json, quiet;
    int mlp_moe, experts_given;
} cli_state;

/* Apply one flag (argv[*i]) to opts.  Returns 1 when handled, 0 when not a
 * flag we know, -1 on a bad value (message printed). */
static int apply_flag(int argc, char **argv, int *i, ffn_train_options *o, cli_state *c) {
    const char *v = NULL;
    int64_t n;
    double x;
    int r;
#define STR(flag) ((r = cli_flag(CMD, argc, argv, i, flag, &v)) != 0)
#define I64(flag, lo, hi, dst) \
    if (STR(flag)) { if (r < 0 || !cli_parse_i64(CMD, flag, v, lo, hi, &n)) return -1; dst = n; return 1; }
#define F64(flag, lo, hi, dst) \
    if (STR(flag)) { if (r < 0 || !cli_parse_f64(CMD, flag, v, lo, hi, &x)) return -1; dst = x; return 1; }
    if (STR("--data")) { if (r < 0) return -1; o->data_path = v; return 1; }
    if (STR("--corpus")) {
        if (r < 0) return -1;
        if (ffn_lang_parse(v, &o->corpus_lang) != FFN_OK) { cli_error(CMD, "--corpus: %s", ffn_last_error()); return -1; }
        return 1;
    }
    I64("--corpus-sentences", 1, 10000000, o->corpus_sentences)
    if (STR("--tokenizer")) {
        if (r < 0) return -1;
        if (ffn_tokenizer_mode_parse(v, &o->tokenizer) != FFN_OK) { cli_error(CMD, "--tokenizer: %s", ffn_last_error()); return -1; }
        return 1;
    }
    I64("--max-vocab", 0, 1 << 22, o->max_vocab)
    F64("--val-fraction", 1e-6, 0.9, o->val_fraction)
    I64("--hidden-size", 1, 1 << 20, o->model.hidden_size)
    I64("--intermediate-size", 1, 1 << 24, o->model.intermediate_size)
    I64("--num-hidden-layers", 1, 1024, o->model.num_hidden_layers)
    I64("--num-attention-heads", 1, 4096, o->model.num_attention_heads)
    I64("--num-key-value-heads", 1, 4096, o->model.num_key_value_heads)
    if (STR("--hidden-act")) {
        if (r < 0) return -1;
        ffn_mlp_type implied;
        if (ffn_act_parse(v, &o->model.hidden_act, &implied) != FFN_OK) { cli_error(CMD, "--hidden-act: %s", ffn_last_error()); return -1; }
        return 1;
    }
    if (STR("--mlp-type")) {
        if (r < 0) return -1;
        if (!strcmp(v, "none")) o->model.mlp_type = FFN_MODEL_MLP_NONE, c->mlp_moe = 0;
        else if (!strcmp(v, "dense")) o->model.mlp_type = FFN_MODEL_MLP_DENSE, c->mlp_moe = 0;
        else if (!strcmp(v, "gated")) o->model.mlp_type = FFN_MODEL_MLP_GATED, c->mlp_moe = 0;
        else if (!strcmp(v, "moe")) o->model.mlp_type = FFN_MODEL_MLP_GATED, c->mlp_moe = 1;
        else { cli_error(CMD, "--mlp-type: expected none|dense|gated|moe, got '%s'", v); return -1; }
        return 1;
    }
    if (STR("--num-experts")) {
        if (r < 0 || !cli_parse_i64(CMD, "--num-experts", v, 0, 4096, &n)) return -1;
        o->model.num_experts = n;
        c->experts_given = 1;
        return 1;
    }
    I64("--num-experts-per-tok", 1, 4096, o->model.num_experts_per_tok)
    I64("--moe-intermediate-size", 0, 1 << 24, o->model.moe_intermediate_size)
    I64("--moe-layer-freq", 1, 1024, o->model.moe_layer_freq)
    if (STR("--tie-word-embeddings")) {
        if (r < 0 || !parse_bool("--tie-word-embeddings", v, &o->model.tie_word_embeddings)) return -1;
        return 1;
    }
    F64("--rope-theta", 1.0, 1e12, o->model.rope_theta)
    I64("--steps", 1, 1000000000, o->steps)
    I64("--stop-at", 0, 1000000000, o->stop_at)
    if (STR("--seed")) {
        if (r < 0 || !cli_parse_i64(CMD, "--seed", v, 0, INT64_MAX, &n)) return -1;
        o->seed = (uint64_t)n;
        return 1;
    }
    I64("--batch-size", 1, 65536, o->batch_size)
    I64("--seq-len", 1, 1 << 20, o->seq_len)
    I64("--grad-accum", 1, 65536, o->grad_accum)
    F64("--lr", 0, 10, o->lr)
    F64("--min-lr", 0, 10, o->min_lr)
    I64("--warmup", 0, 1000000000, o->warmup)
    F64("--weight-decay", 0, 10, o->weight_decay)
    F64("--beta1", 0, 0.999999, o->beta1)
    F64("--beta2", 0, 0.999999999, o->beta2)
    F64("--eps", 1e-30, 1, o->eps)
    F64("--clip", 0, 1e9, o->clip)
    I64("--eval-every", 0, 1000000000, o->eval_every)
    I64("--eval-batches", 1, 100000, o->eval_batches)
    I64("--save-every", 0, 1000000000, o->save_every)
    if (STR("--threads")) {
        if (r < 0 || !cli_parse_i64(CMD, "--threads", v, 0, 4096, &n)) return -1;
        c->threads = (int)n;
        return 1;
    }
    if (STR("--out")) { if (r < 0) return -1; c->out = v; return 1; }
    if (STR("--resume")) { if (r < 0) return -1; c->resume = v; return 1; }
    if (STR("--log")) { if (r < 0) return -1; c->log = v; return 1; }
    if (!strcmp(argv[*i], "--force")) { c->force = 1; return 1; }
    if (!strcmp(argv[*i], "--json")) { c->json = 1; return 1; }
    if (!strcmp(argv[*i], "--quiet")) { c->quiet = 1; return 1; }
#undef STR
#undef I64
#undef F64
    return 0;
}

static int is_checkpoint_dir(const char *dir) {
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (stat(path, &st) == 0) return 1;
    snprintf(path, sizeof path, "%s.old/config.json", dir);
    return stat(path, &st) == 0;
}

int cmd_train(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    /* Pass 1: find --resume, whose options are the base for the flags. */
    cli_state c = {0};
    ffn_train_options o;
    ffn_train_options_default(&o);
    for (int i = 1; i < argc; i++) {
        const char *v;
        int r = cli_flag(CMD, argc, argv, &i, "--resume", &v);
        if (r < 0) return CLI_EXIT_USAGE;
        if (r > 0) c.resume = v;
    }
    if (c.resume) {
        ffn_status st = ffn_train_options_from_checkpoint(c.resume, &o);
        if (st != FFN_OK) return cli_fail(CMD, st);
    }
    /* Pass 2: every flag. */
    for (int i = 1; i < argc; i++) {
        int r = apply_flag(argc, argv, &i, &o, &c);
        if (r < 0) return CLI_EXIT_USAGE;
        if (r == 0) {
            cli_error(CMD, "unknown option '%s' (see ffn train --help)", argv[i]);
            return CLI_EXIT_USAGE;
        }
    }
    if (c.mlp_moe && !c.experts_given && o.model.num_experts == 0) o.model.num_experts = 4;
    if (o.model.num_experts > 0 && o.model.mlp_type == FFN_MODEL_MLP_NONE) {
        cli_error(CMD, "--num-experts %lld needs an FFN: --mlp-type none has none",
                  (long long)o.model.num_experts);
        return CLI_EXIT_USAGE;
    }
    if (!c.out) c.out = c.resume ? c.resume : "ffn-model";
    if (!c.resume && !c.force && is_checkpoint_dir(c.out)) {
        cli_error(CMD,
                  "%s already holds a checkpoint: continue it with --resume %s, replace it with "
                  "--force, or choose another --out",
                  c.out, c.out);
        return CLI_EXIT_FAIL;
    }
    o.out_dir = c.out;
    o.resume_dir = c.resume;
    o.metrics_path = c.log;
    o.stop_flag = &stop_requested;

    ffn_ctx *ctx = NULL;
    if (cli_make_ctx(CMD, c.threads, &ctx)) return CLI_EXIT_FAIL;
    progress p = {.tty = cli_progress_tty(), .quiet = c.quiet, .last_val = NAN};
    int64_t end = o.stop_at > 0 && o.stop_at < o.steps ? o.stop_at : o.steps;
    p.every = end >= 20 ? end / 10 : 1;
    if (o.eval_every > 0 && o.eval_every < p.every) p.every = o.eval_every;
    ffn_train_callbacks cb = {.on_start = on_start, .on_step = on_step,
                              .on_checkpoint = on_checkpoint, .user = &p};
    install_signals();
    ffn_train_result res;
    ffn_status st = ffn_train_run(ctx, &o, &cb, &res);
    if (p.drew_live) fputc('\n', stderr);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    int rc = 0;
    if (st == FFN_OK || st == FFN_ERR_INTERRUPTED) {
        if (c.json) {
            printf("{\"steps_done\": %lld, \"loss\": %.9g, \"val_loss\": ", (long long)res.steps_done,
                   res.final_loss);
            if (isnan(res.final_val_loss)) printf("null");
            else printf("%.9g", res.final_val_loss);
            printf(", \"tokens_per_s\": %.1f, \"seconds\": %.3f, \"params\": %lld, "
                   "\"active_params\": %lld, \"checkpoint\": ",
                   res.tokens_per_s, res.seconds, (long long)res.n_params, (long long)res.active_params);
            if (res.checkpoint_dir) {
                putchar('"');
                for (const char *s = res.checkpoint_dir; *s; s++) {
                    if (*s == '"' || *s == '\\') putchar('\\');
                    putchar(*s);
                }
                putchar('"');
            } else printf("null");
            printf(", \"interrupted\": %s}\n", st == FFN_ERR_INTERRUPTED ? "true" : "false");
        } else {
            printf("step %lld: loss %.4f", (long long)res.steps_done, res.final_loss);
            if (!isnan(res.final_val_loss)) printf(", val_loss %.4f", res.final_val_loss);
            printf(", %.0f tokens/s, %.1f s", res.tokens_per_s, res.seconds);
            if (res.checkpoint_dir) printf("; checkpoint in %s", res.checkpoint_dir);
            printf("\n");
        }
        if (st == FFN_ERR_INTERRUPTED) {
            cli_error(CMD, "%s", ffn_last_error());
            rc = 130;
        }
    } else {
        rc = cli_fail(CMD, st);
    }
    ffn_train_result_free(&res);
    ffn_ctx_free(ctx);
    return rc;
}
