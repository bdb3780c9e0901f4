/* cmd_train.c -- `ffn train`: train a small decoder-only Transformer on text
 * (a file or the built-in corpus), with checkpoints, resume, Ctrl-C saving,
 * progress and a metrics log.  The loop itself is ffn_train_run (train.h);
 * this file parses flags, installs the signal handlers and draws progress. */
#include "cli.h"
#include "train_profile.h"
#include "ffn/dist.h"
#include "ffn/train.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static const char *const CMD = "train";

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
    if (o->precision != FFN_PRECISION_FP32)
        fprintf(stderr, "ffn train: %s products, fp32 master weights and optimizer state\n",
                ffn_precision_name(o->precision));
    if (o->init_path || o->train_only != FFN_TRAIN_ALL)
        fprintf(stderr, "ffn train: %s%s, training %s tensors\n", o->init_path ? "from " : "",
                o->init_path ? o->init_path : "resumed", ffn_train_only_name(o->train_only));
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

static void on_note(const char *message, void *user) {
    (void)user; /* said even with --quiet: it is about the user's files */
    fprintf(stderr, "ffn %s: %s\n", CMD, message);
}

/* ---- flags ---- */

static const char about[] =
"Trains a small decoder-only Transformer (Llama architecture: RMSNorm, causal\n"
"attention with RoPE and grouped KV heads, and an FFN -- dense, gated (GLU\n"
"family) or Mixture of Experts -- in every block) on text, with AdamW, a\n"
"warmup + cosine learning-rate schedule, gradient clipping and accumulation.\n"
"It evaluates on held-out text, writes checkpoints, and on Ctrl-C (SIGINT) or\n"
"SIGTERM saves a checkpoint and exits.  The same --seed gives the same run bit\n"
"for bit (at the same --threads).\n";

static const char epilog[] =
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
"  ffn train --init stories260K.bin --init-tokenizer tok512.bin --data my.txt \\\n"
"            --train-only ffn --seq-len 256 --steps 200 --out tuned\n"
"  ffn generate run1 --prompt 'Mary gave'\n"
"\n"
"several processes (mpirun -np T*D; include/ffn/dist.h, README):\n"
"  World rank r is tensor-parallel rank r % T of TP group r / T and\n"
"  data-parallel rank q = r / T.  With --ep E (E divides D; --ep alone means\n"
"  --dp E) q is expert rank q % E of EP group q / E: each rank runs its share\n"
"  of every MoE layer's experts on the rows of its EP group, and the ranks\n"
"  of the same expert rank (and tp rank) form the replica group that sums\n"
"  those experts' gradients; everything else is summed over the DP group.\n"
"  (--tp 1) a rank keeps parameters, gradients and AdamW moments of its own\n"
"  experts and the replicated tensors only; a save gathers the rest to rank 0.\n"
"  The groups are MPI_Comm_split's of the world by those colours.  --tp T\n"
"  splits every expert's units over the TP group (Megatron style); --tp T\n"
"  --ep T keeps each expert whole on one rank of the TP group instead (EP\n"
"  group = TP group, the experts' replica group = the DP group; no\n"
"  all-to-all: the TP ranks see the same tokens); other --ep with --tp > 1\n"
"  are refused.  Checkpoints are whole: resume under any layout.\n"
"  Every rank must be given the same options (all but --threads, --quiet,\n"
"  --json, --profile, --out, --log, --force, --dist-timeout; paths only as\n"
"  given or not, their contents are compared when training starts): they\n"
"  are compared before anything else, and a difference stops every rank\n"
"  with one message naming the option and both values.  A rank that waits\n"
"  for the others longer than --dist-timeout gives up and mpirun ends the\n"
"  job.\n"
"  --pp P puts stage r / (T*D) of P on world rank r (the groups above then\n"
"  live inside each stage): stage s holds layers [s*L/P ..) only (their\n"
"  parameters, gradients, moments and activations), a step's --grad-accum A\n"
"  micro-batches run 1F1B (A >= P keeps every stage busy), equal to one\n"
"  process with the same --grad-accum.  A save streams each tensor from its\n"
"  holder to rank 0, one at a time.\n"
"  mpirun -np 2 ffn train --mlp-type moe --ep 2 --batch-size 4 --out moe2\n"
"  mpirun -np 4 ffn train --pp 2 --dp 2 --grad-accum 4 --out pp4\n"
"  mpirun -np 4 ffn train --mlp-type moe --tp 2 --ep 2 --dp 2 --out moe4\n";

enum { MLP_NONE, MLP_DENSE, MLP_GATED, MLP_MOE };
static const char *const mlp_names[] = {"none", "dense", "gated", "moe", NULL};
static const char *const bool_names[] = {"0", "1", "false", "true", NULL};
static const char *const train_only_names[] = {"all", "ffn", "attention", NULL};
static const int train_only_values[] = {FFN_TRAIN_ALL, FFN_TRAIN_FFN, FFN_TRAIN_ATTENTION};
/* Flags that size or shape the model (or build its vocabulary): --init's
 * model decides them. */
static const char *const model_flags[] = {
    "--hidden-size", "--intermediate-size", "--num-hidden-layers", "--num-attention-heads",
    "--num-key-value-heads", "--hidden-act", "--mlp-type", "--num-experts",
    "--num-experts-per-tok", "--moe-intermediate-size", "--moe-layer-freq",
    "--tie-word-embeddings", "--rope-theta", "--tokenizer", "--max-vocab", NULL};
#define N_MODEL_FLAGS (sizeof model_flags / sizeof model_flags[0] - 1)
static const int bool_values[] = {0, 1, 0, 1};

typedef struct cli_state {
    const char *out, *resume, *log, *init, *init_tokenizer;
    int model_flag_given[N_MODEL_FLAGS];
    int64_t threads;
    int64_t tp, dp, ep, pp;
    double bucket_mb;
    int64_t zero;
    int64_t overlap;
    double dist_timeout;
    char agree[32768]; /* the options every rank must share (ffn_dist_layout.options) */
    int batch_given, dp_given;
    int force, json, quiet, profile;
    int mlp, mlp_given, experts_given, data_given, corpus_given;
} cli_state;

static int parse_options(int argc, char **argv, ffn_train_options *o, cli_state *c, int *rc) {
    ffn_model_config *m = &o->model;
    c->mlp = m->mlp_type == FFN_MODEL_MLP_NONE ? MLP_NONE
             : m->mlp_type == FFN_MODEL_MLP_DENSE ? MLP_DENSE
             : m->num_experts > 0 ? MLP_MOE : MLP_GATED;
    const cli_opt opts[] = {
        {.name = "--data", .type = CLI_PATH, .dst = &o->data_path, .metavar = "FILE",
         .seen = &c->data_given, .group = "data",
         .help = "train on this UTF-8 text file (a regular file of at most 1 GiB; FIFOs and "
                 "devices are refused); without --data, on the built-in corpus (see "
                 "`ffn corpus --help`)"},
        {.name = "--corpus", .type = CLI_ENUM, .dst = &o->corpus_lang, .names = cli_corpus_names,
         .values = cli_corpus_values,
         .help = "the built-in corpus (not with --data): en, zh, or facts (English with "
                 "fictional facts, see `ffn corpus --help`)"},
        {.name = "--corpus-sentences", .type = CLI_INT, .dst = &o->corpus_sentences,
         .metavar = "N", .imin = 1, .imax = 10000000, .help = "sentences of built-in corpus"},
        CLI_OPT_TOKENIZER_MODE(&o->tokenizer),
        {.name = "--max-vocab", .type = CLI_INT, .dst = &o->max_vocab, .metavar = "N", .imin = 0,
         .imax = 1 << 22, .help = "keep the N-1 most frequent symbols + <unk> (0 = all)"},
        {.name = "--val-fraction", .type = CLI_FLOAT, .dst = &o->val_fraction, .metavar = "F",
         .fmin = 1e-6, .fmax = 0.9, .help = "the last F of the tokens are held out"},
        CLI_OPT_HIDDEN_SIZE(&m->hidden_size, "the model (Hugging Face config.json names)"),
        CLI_OPT_INTERMEDIATE_SIZE(&m->intermediate_size, "FFN width (intermediate_size)"),
        CLI_OPT_LAYERS(&m->num_hidden_layers),
        CLI_OPT_HEADS(&m->num_attention_heads),
        CLI_OPT_KV_HEADS(&m->num_key_value_heads, NULL),
        {.name = "--hidden-act", .type = CLI_CUSTOM, .dst = &m->hidden_act, .metavar = "ACT",
         .parse = cli_parse_act, .show = cli_show_act, .def = "silu",
         .expect = "an activation: linear, relu, gelu, gelu_pytorch_tanh, silu or sigmoid",
         .help = "linear|relu|gelu|gelu_pytorch_tanh|silu|sigmoid"},
        {.name = "--mlp-type", .type = CLI_ENUM, .dst = &c->mlp, .names = mlp_names,
         .metavar = "TYPE", .seen = &c->mlp_given, .def = "gated: with silu that is SwiGLU",
         .help = "none (attention only) | dense | gated (GLU family) | moe (gated experts, "
                 "--num-experts 4 unless given)"},
        CLI_OPT_EXPERTS(&m->num_experts, "experts per MoE layer (0 = no MoE)"),
        CLI_OPT_TOP_K(&m->num_experts_per_tok),
        {.name = "--moe-intermediate-size", .type = CLI_INT, .dst = &m->moe_intermediate_size,
         .metavar = "F", .imin = 0, .imax = 1 << 24,
         .help = "width of each expert (0 = --intermediate-size)"},
        {.name = "--moe-layer-freq", .type = CLI_INT, .dst = &m->moe_layer_freq, .metavar = "k",
         .imin = 1, .imax = 1024, .help = "every k-th layer is MoE (1: all)"},
        {.name = "--tie-word-embeddings", .type = CLI_ENUM, .dst = &m->tie_word_embeddings,
         .names = bool_names, .values = bool_values, .metavar = "0|1",
         .help = "the LM head shares the embedding"},
        {.name = "--rope-theta", .type = CLI_FLOAT, .dst = &m->rope_theta, .metavar = "X",
         .fmin = 1, .fmax = 1e12, .help = "RoPE base"},
        {.name = "--init", .type = CLI_PATH, .dst = &c->init, .metavar = "MODEL",
         .group = "fine-tuning",
         .help = "start from a pretrained model instead of random weights: any model `ffn run` "
                 "loads (a llama2.c .bin, a Hugging Face directory, an ffn run directory).  Its "
                 "config and weights are used (the model-size flags, --tokenizer and --max-vocab "
                 "are refused) and its vocabulary encodes the data: the tokenizer.txt of a run "
                 "directory, or a llama2.c tokenizer.bin beside the model or given by "
                 "--init-tokenizer; it is copied into --out.  --seq-len must fit in the "
                 "model's context.  --resume remembers it"},
        {.name = "--init-tokenizer", .type = CLI_PATH, .dst = &c->init_tokenizer,
         .metavar = "FILE", .def = "the one beside the model",
         .help = "the --init model's vocabulary: a llama2.c tokenizer.bin or ffn's "
                 "tokenizer.txt"},
        {.name = "--train-only", .type = CLI_ENUM, .dst = &o->train_only, .names = train_only_names,
         .values = train_only_values, .metavar = "ffn|attention|all",
         .help = "which tensors are updated; the others stay bit for bit as they were (no "
                 "update, no weight decay, AdamW moments 0, gradient norm over the trained "
                 "ones).  ffn: each block's FFN sublayer -- post_attention_layernorm and every "
                 "mlp.* tensor (gate/up/down, biases, router, experts, shared expert); "
                 "attention: input_layernorm and q/k/v/o_proj (and biases); all: everything, "
                 "embeddings, final norm and LM head included"},
        CLI_OPT_PRECISION(&o->precision),
        CLI_OPT_TRAIN_STEPS(&o->steps, "optimizer steps; the schedule spans them"),
        {.name = "--stop-at", .type = CLI_INT, .dst = &o->stop_at, .metavar = "N", .imin = 0,
         .imax = 100000000, .def = "0: run the whole schedule",
         .help = "stop after step N (checkpoint saved); resume later with --resume to finish "
                 "the same schedule"},
        CLI_OPT_SEED(&o->seed, "weights and batch order"),
        CLI_OPT_BATCH(&o->batch_size),
        CLI_OPT_SEQ_LEN(&o->seq_len),
        {.name = "--grad-accum", .type = CLI_INT, .dst = &o->grad_accum, .metavar = "A", .imin = 1,
         .imax = 65536, .help = "micro-batches per step"},
        CLI_OPT_LR(&o->lr),
        CLI_OPT_MIN_LR(&o->min_lr),
        {.name = "--warmup", .type = CLI_INT, .dst = &o->warmup, .metavar = "N", .imin = 0,
         .imax = 1000000000, .def = "min(100, steps/10)", .help = "linear warmup steps"},
        {.name = "--weight-decay", .type = CLI_FLOAT, .dst = &o->weight_decay, .metavar = "X",
         .fmin = 0, .fmax = 10,
         .help = "AdamW decoupled decay on matrices; never on norms or biases"},
        {.name = "--beta1", .type = CLI_FLOAT, .dst = &o->beta1, .metavar = "X", .fmin = 0,
         .fmax = 0.999999, .help = "AdamW first-moment decay"},
        {.name = "--beta2", .type = CLI_FLOAT, .dst = &o->beta2, .metavar = "X", .fmin = 0,
         .fmax = 0.999999999, .help = "AdamW second-moment decay"},
        {.name = "--eps", .type = CLI_FLOAT, .dst = &o->eps, .metavar = "X", .fmin = 1e-30,
         .fmax = 1, .help = "AdamW epsilon"},
        {.name = "--clip", .type = CLI_FLOAT, .dst = &o->clip, .metavar = "X", .fmin = 0,
         .fmax = 1e9, .help = "clip the gradient's global L2 norm (0 = off)"},
        CLI_OPT_EVAL_EVERY(&o->eval_every, NULL),
        CLI_OPT_EVAL_BATCHES(&o->eval_batches),
        CLI_OPT_THREADS(&c->threads),
        CLI_OPT_OUT(&c->out, "DIR",
                    "run directory (default ffn-model); holds config.json, model.safetensors, "
                    "tokenizer.txt, train_state.safetensors and metrics.jsonl.  Replaced "
                    "atomically: a crash never leaves it half written; other files in it are "
                    "kept.  An existing run is replaced only with --resume or --force.  One "
                    "writer at a time: a second run on DIR fails at once.  DIR.tmp-XXXXXX "
                    "directories a killed save left beside DIR are removed when they hold only "
                    "ffn's files (each named on stderr)."),
        {.name = "--save-every", .type = CLI_INT, .dst = &o->save_every, .metavar = "K", .imin = 0,
         .imax = 1000000000, .def = "0: only at the end and on Ctrl-C",
         .help = "also checkpoint every K steps"},
        {.name = "--resume", .type = CLI_PATH, .dst = &c->resume, .metavar = "DIR",
         .help = "continue the run saved in DIR (bit-identical to an uninterrupted run).  "
                 "Options default to the checkpoint's; one that differs is an error naming it, "
                 "except --steps (a longer schedule), --eval-every, --save-every, --threads.  "
                 "--out defaults to DIR."},
        CLI_OPT_FORCE(&c->force, "replace an existing checkpoint in --out"),
        {.name = "--log", .type = CLI_PATH, .dst = &c->log, .metavar = "FILE",
         .help = "where the metrics go (default DIR/metrics.jsonl, saved with each checkpoint "
                 "and carried on by --resume): one JSON object per line: step, loss, lr, "
                 "tokens_per_s, grad_norm, and val_loss when evaluated.  A FILE elsewhere is "
                 "written live (when resuming: lines after the checkpoint's step are dropped, "
                 "then new ones appended)"},
        CLI_OPT_JSON(&c->json, "print the final summary as JSON on stdout"),
        {.name = "--quiet", .type = CLI_FLAG, .dst = &c->quiet, .help = "no progress on stderr"},
        {.name = "--profile", .type = CLI_FLAG, .dst = &c->profile,
         .help = "time each part of the step (FFN forward and backward, attention projections "
                 "and core, norms, embedding + head + loss, optimizer, data, other) and print "
                 "the table on stderr at the end (with --json also as \"profile\" in the "
                 "summary), with the matrix products' GFLOP/s and share of the FMA peak "
                 "(measured after training, as `ffn bench peak`)"},
        CLI_OPT_TP(&c->tp),
        CLI_OPT_DP(&c->dp),
        CLI_OPT_EP(&c->ep),
        {CLI_INT_FIELDS("--pp", &c->pp, "P", 1, 65536,
                        "pipeline stages: the layers split over P ranks (contiguous ranges, "
                        "the first L % P stages one more; the embedding on the first, the "
                        "final norm and head on the last), a step's --grad-accum micro-batches "
                        "in a 1F1B schedule; with --dp D the job is P x D ranks (with --zero "
                        "1, not with --tp, --ep or --zero 2)")},
        {CLI_FLOAT_FIELDS("--bucket-mb", &c->bucket_mb, "X", 0, 1 << 20,
                          "several processes: the gradients are summed in buckets of X MiB, in "
                          "the tensor table's order (0: one bucket per run of tensors), so the "
                          "result does not depend on timing")},
        {CLI_INT_FIELDS("--overlap", &c->overlap, "0|1", 0, 1,
                        "several processes: 1 (the default) starts each gradient bucket's sum "
                        "during the backward, once the layers it holds are done (nonblocking "
                        "MPI, tested at each layer's end), and waits for all before the "
                        "optimizer; 0 sums them after the backward.  The same buckets and "
                        "sums, so the same bits.  For --dp, --tp, --ep and --zero 2 with --dp "
                        "alone (whose finished buckets give back the gradient pages not this "
                        "rank's at once); no effect with --zero 1 or ZeRO with --tp or --ep.  "
                        "--profile shows compute, waiting and communication per step")},
        {CLI_INT_FIELDS("--zero", &c->zero, "S", 0, 2,
                        "ZeRO stage over the --dp ranks.  0: every rank keeps the whole "
                        "gradient and AdamW's m and v.  1: m and v sharded (gradients "
                        "reduce-scattered in one ring, each rank updates its share, parameters "
                        "all-gathered).  2: also the gradients: reduce-scattered bucket by "
                        "bucket (--bucket-mb), each rank keeps only its share between steps "
                        "(the backward still writes the whole block).  Checkpoints hold "
                        "everything whole (resume under any stage and layout); with --tp the "
                        "rank's share is sharded; with --ep alone the replicated tensors' "
                        "state is split over --dp and each expert's over the ranks holding it "
                        "(2: each tensor's gradient reduce-scattered); with --pp 1 only, a "
                        "stage's state over its --dp ranks; 2 needs --dp 2 or more")},
        CLI_OPT_DIST_TIMEOUT(&c->dist_timeout),
        {0}};
    /* groups after the first flag of each */
    cli_opt table[sizeof opts / sizeof opts[0]];
    memcpy(table, opts, sizeof opts);
    for (size_t k = 0; table[k].name; k++) {
        if (!strcmp(table[k].name, "--steps")) table[k].group = "training";
        if (!strcmp(table[k].name, "--out")) table[k].group = "files";
        if (!strcmp(table[k].name, "--num-experts")) table[k].seen = &c->experts_given;
        if (!strcmp(table[k].name, "--corpus")) table[k].seen = &c->corpus_given;
        if (!strcmp(table[k].name, "--batch-size")) table[k].seen = &c->batch_given;
        if (!strcmp(table[k].name, "--dp")) table[k].seen = &c->dp_given;
        for (size_t j = 0; j < N_MODEL_FLAGS; j++)
            if (!strcmp(table[k].name, model_flags[j]) && !table[k].seen)
                table[k].seen = &c->model_flag_given[j];
    }
    const cli_spec spec = {.cmd = CMD, .synopsis = "[--data FILE | --corpus en|zh|facts] [options]",
                           .about = about, .epilog = epilog, .opts = table};
    if (cli_parse(&spec, argc, argv, rc)) return 1;
    if (c->data_given && c->corpus_given) {
        *rc = cli_usage_error(CMD, "--corpus %s and --data %s exclude each other: --data trains "
                              "on the file, --corpus picks the built-in corpus",
                              ffn_lang_name(o->corpus_lang), o->data_path);
        return 1;
    }
    if (c->init) {
        char given[256] = "";
        size_t n = 0, count = 0;
        for (size_t j = 0; j < N_MODEL_FLAGS; j++) {
            int seen = c->model_flag_given[j] || (!strcmp(model_flags[j], "--mlp-type") && c->mlp_given) ||
                       (!strcmp(model_flags[j], "--num-experts") && c->experts_given);
            count += seen != 0;
            if (seen && n < sizeof given)
                n += (size_t)snprintf(given + n, sizeof given - n, "%s%s", n ? ", " : "", model_flags[j]);
        }
        if (n) {
            *rc = cli_usage_error(CMD, "--init %s: %s given, but the model's config and vocabulary "
                                  "come from the model (drop %s, or train from scratch without "
                                  "--init)", c->init, given, count > 1 ? "them" : "it");
            return 1;
        }
        if (c->resume) {
            *rc = cli_usage_error(CMD, "--init %s and --resume %s exclude each other: the run "
                                  "directory already holds the fine-tuned weights and remembers "
                                  "its --init settings", c->init, c->resume);
            return 1;
        }
    } else if (c->init_tokenizer) {
        *rc = cli_usage_error(CMD, "--init-tokenizer %s needs --init MODEL", c->init_tokenizer);
        return 1;
    }
    if (c->mlp_given) {
        m->mlp_type = c->mlp == MLP_NONE ? FFN_MODEL_MLP_NONE
                      : c->mlp == MLP_DENSE ? FFN_MODEL_MLP_DENSE : FFN_MODEL_MLP_GATED;
        if (c->mlp == MLP_MOE && !c->experts_given && m->num_experts == 0) m->num_experts = 4;
    }
    /* What every rank of an mpirun job must share: every flag but those of
     * this host or of the output (paths only as given or not: their
     * contents -- the data's fingerprint, the starting weights -- are
     * compared when training starts), then every field a resume records
     * (with those only a checkpoint or --init sets). */
    static const char *const host_only[] = {"--threads", "--quiet", "--json", "--profile", "--out",
                                            "--log", "--force", "--dist-timeout", NULL};
    int w = cli_agree_text(table, host_only, c->agree, sizeof c->agree);
    if (w >= 0) {
        size_t need = ffn_train_options_text(o, c->agree + w, sizeof c->agree - (size_t)w);
        if (need >= sizeof c->agree - (size_t)w) w = -1;
    }
    if (w < 0) {
        cli_error(CMD, "the options do not fit the %zu bytes the ranks compare", sizeof c->agree);
        *rc = CLI_EXIT_FAIL;
        return 1;
    }
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

/* AdamW's m and v on the busiest rank: all of them, or with ZeRO-1 the
 * largest share of the data-parallel split (rank 0's). */
static int64_t optimizer_bytes(const ffn_dist *d, int64_t n_params, int64_t zero) {
    const int64_t P = zero ? ffn_dist_size(d, FFN_DIST_DP) : 1;
    return 8 * ((n_params + P - 1) / P);
}

int cmd_train(int argc, char **argv) {
    /* --resume first: the checkpoint's options are the base for the flags
     * (not for --help, which shows the defaults). */
    static cli_state c; /* large (the options text); one per process */
    c = (cli_state){.tp = 1, .dp = 1, .ep = 1, .pp = 1, .bucket_mb = 4, .overlap = 1, .dist_timeout = FFN_DIST_TIMEOUT_DEFAULT};
    ffn_train_options o;
    ffn_train_options_default(&o);
    int help = 0;
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) help = 1;
        else if (!strcmp(argv[i], "--resume") && i + 1 < argc) c.resume = argv[++i];
        else if (!strncmp(argv[i], "--resume=", 9)) c.resume = argv[i] + 9;
    }
    if (c.resume && !help) {
        ffn_status st = ffn_train_options_from_checkpoint(c.resume, &o);
        if (st != FFN_OK) return cli_fail(CMD, st);
    }
    int rc = 0;
    if (parse_options(argc, argv, &o, &c, &rc)) return rc;
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
    o.init_path = c.init;
    o.init_tokenizer = c.init_tokenizer;
    o.out_dir = c.out;
    o.resume_dir = c.resume;
    o.metrics_path = c.log;
    o.stop_flag = &cli_stop_requested;

    /* Several processes (mpirun): the data-parallel hooks of libffn_dist.
     * A checkpoint records the whole batch of a step; resumed with another
     * --dp, each rank takes its share of it. */
    ffn_dist *dist = NULL;
    ffn_train_dist hooks;
    /* --ep alone: experts spread inside the data-parallel group; with --tp T
     * (--ep T) inside the tensor-parallel group */
    if (c.ep > 1 && !c.dp_given && c.tp == 1) c.dp = c.ep;
    if (c.dp > 1 || c.ep > 1 || c.pp > 1 || ffn_dist_launched()) {
        ffn_dist_layout lay = {.tp = c.tp, .dp = c.dp, .ep = c.ep, .options = c.agree,
                               .timeout_s = c.dist_timeout > 0 ? c.dist_timeout : -1,
                               .pp = c.pp};
        ffn_status st = ffn_dist_init(&argc, &argv, &lay, &dist);
        if (st != FFN_OK) { /* said on every rank before any ends */
            rc = cli_fail(CMD, st);
            ffn_dist_free(dist);
            return rc;
        }
        /* The layout against the model, before anything is allocated or
         * written (every rank has the same options, so the same message;
         * an --init model's config is checked once it is read) */
        if (!c.init) {
            ffn_model_config rank_cfg;
            ffn_status ls = ffn_dist_ep_model_check(dist, &o.model);
            if (ls == FFN_OK && c.tp > 1) ls = ffn_dist_tp_model_config(dist, &o.model, &rank_cfg);
            if (ls == FFN_OK) ls = ffn_dist_pp_model_check(dist, &o.model);
            if (ls != FFN_OK) {
                rc = cli_fail(CMD, ls);
                ffn_dist_free(dist);
                return rc;
            }
        }
        if (c.resume && !c.batch_given) {
            if (o.batch_size % c.dp) {
                cli_error(CMD, "--resume %s: the checkpoint's batch of %lld sequences does not "
                          "split over --dp %lld (give --batch-size)", c.resume,
                          (long long)o.batch_size, (long long)c.dp);
                ffn_dist_free(dist);
                return CLI_EXIT_USAGE;
            }
            o.batch_size /= c.dp;
        }
        o.dist = &hooks; /* filled once the context exists */
        if (ffn_dist_rank(dist, FFN_DIST_WORLD) != 0) c.quiet = 1, c.json = -1;
        if (c.threads == 0) c.threads = ffn_dist_local_threads(); /* the host's cores, shared */
    }

    ffn_ctx *ctx = NULL;
    if (cli_make_ctx(CMD, c.threads, &ctx)) {
        ffn_dist_free(dist);
        return CLI_EXIT_FAIL;
    }
    if (dist) {
        ffn_dist_set_overlap(dist, (int)c.overlap);
        ffn_dist_train_hooks(dist, ctx, &hooks);
        ffn_dist_set_bucket(dist, (int64_t)(c.bucket_mb * (1 << 20) / sizeof(float)));
        ffn_status zs = c.zero == 2 ? ffn_dist_train_hooks_zero2(dist, &hooks)
                        : c.zero    ? ffn_dist_train_hooks_zero1(dist, &hooks)
                                    : FFN_OK;
        if (zs != FFN_OK) {
            rc = cli_fail(CMD, zs);
            ffn_dist_free(dist);
            ffn_ctx_free(ctx);
            return rc;
        }
    } else if (c.zero) {
        cli_error(CMD, "--zero %lld shards the optimizer%s over --dp ranks: start them with mpirun "
                  "-np D ... --dp D (D >= 2; this is one process: --dp %lld)", (long long)c.zero,
                  c.zero == 2 ? " and the gradients" : "", (long long)c.dp);
        ffn_ctx_free(ctx);
        return CLI_EXIT_USAGE;
    }
    progress p = {.tty = cli_progress_tty(), .quiet = c.quiet, .last_val = NAN};
    int64_t end = o.stop_at > 0 && o.stop_at < o.steps ? o.stop_at : o.steps;
    p.every = end >= 20 ? end / 10 : 1;
    if (o.eval_every > 0 && o.eval_every < p.every) p.every = o.eval_every;
    ffn_train_callbacks cb = {.on_start = on_start, .on_step = on_step,
                              .on_checkpoint = on_checkpoint, .user = &p, .on_note = on_note};
    cli_stop_on_signals();
    ffn_profile prof;
    ffn_profile_reset(&prof);
    if (c.profile) o.profile = &prof;
    ffn_train_result res;
    ffn_status st = ffn_train_run(ctx, &o, &cb, &res);
    const int nt = ffn_ctx_threads(ctx);
    const int show = c.profile && c.json >= 0 && (st == FFN_OK || st == FFN_ERR_INTERRUPTED);
    const double peak = show ? cli_fma_peak_gflops(nt) : 0.0;
    ffn_dist_grad_stats gsum;
    ffn_dist_get_grad_stats(dist, &gsum);
    if (show) train_profile_table(stderr, &prof, peak, nt);
    if (show && dist && gsum.calls) train_profile_comm_table(stderr, &prof, &gsum, (int)c.overlap);
    if (p.drew_live) fputc('\n', stderr);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if ((st == FFN_OK || st == FFN_ERR_INTERRUPTED) && c.json < 0) {
        /* another rank: rank 0 prints the summary */
        if (st == FFN_ERR_INTERRUPTED) rc = 130;
    } else if (st == FFN_OK || st == FFN_ERR_INTERRUPTED) {
        /* the last evaluation may be older than the last step (a stop
         * between evaluations): say from which step it is */
        int64_t val_step = res.n_evals > 0 ? res.eval_step[res.n_evals - 1] : -1;
        if (c.json) {
            printf("{\"steps_done\": %lld, \"loss\": %s, \"val_loss\": ", (long long)res.steps_done,
                   cli_json_num(res.final_loss, "%.9g"));
            cli_json_number(stdout, res.final_val_loss, "%.9g");
            if (val_step >= 0) printf(", \"val_loss_step\": %lld", (long long)val_step);
            else printf(", \"val_loss_step\": null");
            printf(", \"tokens_per_s\": %s, \"seconds\": %s, \"params\": %lld, "
                   "\"active_params\": %lld, \"checkpoint\": ",
                   cli_json_num(res.tokens_per_s, "%.1f"), cli_json_num(res.seconds, "%.3f"),
                   (long long)res.n_params, (long long)res.active_params);
            if (res.checkpoint_dir) {
                putchar('"');
                for (const char *s = res.checkpoint_dir; *s; s++) {
                    if (*s == '"' || *s == '\\') putchar('\\');
                    putchar(*s);
                }
                putchar('"');
            } else printf("null");
            printf(", \"state_bytes\": %lld, \"optimizer_bytes\": %lld, \"activation_bytes\": %lld",
                   (long long)res.state_bytes, (long long)res.optimizer_bytes,
                   (long long)res.activation_bytes);
            if (dist) { /* this rank's gradient sums: their share of the training time */
                ffn_dist_grad_stats gs;
                ffn_dist_get_grad_stats(dist, &gs);
                printf(
                    ", \"grad_sum_s\": %s, \"grad_buckets_per_step\": %s",
                    cli_json_num(gs.seconds, "%.6f"),
                    cli_json_num(gs.calls ? (double)gs.buckets / (double)gs.calls : 0.0, "%.1f"));
                printf(", \"grad_bytes\": %lld", (long long)res.grad_bytes);
                if (c.tp == 1) printf(", \"optimizer_bytes_per_rank\": %lld",
                                      (long long)(c.ep > 1 ? res.optimizer_bytes
                                                  : optimizer_bytes(dist, res.n_params, c.zero)));
            }
            if (c.profile) {
                printf(", ");
                train_profile_json(stdout, &prof, peak, nt);
                if (dist && gsum.calls) {
                    printf(", ");
                    train_profile_comm_json(stdout, &prof, &gsum, (int)c.overlap);
                }
            }
            printf(", \"interrupted\": %s}\n", st == FFN_ERR_INTERRUPTED ? "true" : "false");
        } else {
            printf("step %lld: loss %.4f", (long long)res.steps_done, res.final_loss);
            if (!isnan(res.final_val_loss)) {
                printf(", val_loss %.4f", res.final_val_loss);
                if (val_step >= 0 && val_step != res.steps_done)
                    printf(" (evaluated at step %lld)", (long long)val_step);
            }
            printf(", %.0f tokens/s, %.1f s", res.tokens_per_s, res.seconds);
            if (res.checkpoint_dir) printf("; checkpoint in %s", res.checkpoint_dir);
            printf("\n");
            ffn_dist_grad_stats gs;
            ffn_dist_get_grad_stats(dist, &gs);
            if (dist && !c.quiet && gs.calls)
                fprintf(stderr, "ffn %s: rank 0: gradient sums %.3f s of %.3f s (%.1f%%), %.1f buckets "
                        "a step\n", CMD, gs.seconds, res.seconds, 100.0 * gs.seconds / res.seconds,
                        (double)gs.buckets / (double)gs.calls);
            if (dist && !c.quiet && c.tp == 1)
                fprintf(stderr, "ffn %s: optimizer state %lld bytes a rank (AdamW m and v, fp32%s)\n",
                        CMD, (long long)(c.ep > 1 ? res.optimizer_bytes
                                         : optimizer_bytes(dist, res.n_params, c.zero)),
                        c.zero ? "; ZeRO: the largest share over the --dp ranks" : "");
            if (dist && !c.quiet)
                fprintf(stderr, "ffn %s: rank 0 keeps %lld bytes of training state (%lld of them "
                        "gradients%s)\n", CMD, (long long)res.state_bytes, (long long)res.grad_bytes,
                        c.zero == 2 ? ", its ZeRO-2 share; the backward writes the whole block "
                        "before the reduce-scatter" : "");
        }
        if (st == FFN_ERR_INTERRUPTED) {
            cli_error(CMD, "%s", ffn_last_error());
            rc = 130;
        }
    } else {
        rc = cli_fail(CMD, st);
    }
    ffn_train_result_free(&res);
    ffn_dist_free(dist); /* first: the expert-parallel runners live in ctx */
    ffn_ctx_free(ctx);
    return rc;
}
