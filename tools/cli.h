/* cli.h -- what the subcommands of the `ffn` command share: the option
 * table, error printing, the thread rule, small parsers.
 * Conventions: data on stdout, diagnostics on stderr, --help on every
 * subcommand (exit 0), exit 1 on a failure, exit 2 on bad usage.
 *
 * The option table.  Every command declares its flags once, as an array of
 * cli_opt (type, destination, bounds, metavar, help line, group), and its
 * positional arguments as cli_pos; cli_parse() reads argv into the
 * destinations and cli_help() prints --help from the same table (usage
 * line, the command's description, the flags by group with their default
 * and range, lines of at most 80 columns).  A bad value or an unknown flag
 * gets one message naming the flag, the value and what is accepted, and
 * exit status 2:
 *     ffn train: --steps: expected an integer in [1, 100000000], got 'x'
 *     ffn train: unknown option '--stepz' (did you mean --steps? see 'ffn train --help')
 * Flags used by several commands (--threads, --seed, --steps, the model
 * sizes, ...) are declared by the CLI_OPT_* macros below, so the same flag
 * has the same bounds and meaning everywhere.  Defaults are shown from the
 * destination's value when --help runs, so set the defaults before calling
 * cli_parse(). */
#ifndef FFN_CLI_H
#define FFN_CLI_H

#include "ffn.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

/* ---- the option table ------------------------------------------------------ */

typedef enum cli_type {
    CLI_FLAG,   /* no value; dst int*, set to 1 */
    CLI_INT,    /* dst int64_t* (a uint64_t seed may be passed: bounds are >= 0) */
    CLI_FLOAT,  /* dst double* */
    CLI_STR,    /* dst const char**; with max_count: const char*[max_count] + *count */
    CLI_PATH,   /* a file or directory name; as CLI_STR */
    CLI_ENUM,   /* one of names[]; dst int* receives values[k] (or k) */
    CLI_LIST,   /* a comma-separated list; dst const char** (checked by the command) */
    CLI_CUSTOM  /* parse(value, dst) != 0 on a bad value; expect says what is accepted */
} cli_type;

typedef struct cli_opt {
    const char *name;     /* "--steps"; NULL ends the table */
    cli_type type;
    void *dst;
    const char *metavar;  /* "N", "FILE"; for CLI_ENUM default: names joined by | */
    const char *help;     /* one paragraph, wrapped by cli_help */
    int64_t imin, imax;   /* CLI_INT bounds */
    double fmin, fmax;    /* CLI_FLOAT bounds */
    int fmin_open;        /* CLI_FLOAT: fmin itself excluded, (fmin, fmax] */
    const char *const *names; /* CLI_ENUM: NULL-terminated */
    const int *values;        /* CLI_ENUM: NULL = the index */
    int (*parse)(const char *value, void *dst); /* CLI_CUSTOM */
    const char *expect;   /* CLI_CUSTOM: "an activation (relu, gelu, ...)" */
    const char *def;      /* default shown in --help; NULL: from *dst; "": none */
    const char *group;    /* heading printed before this flag when it changes */
    const char *alias;    /* a second spelling of the same flag */
    int *seen;            /* set to 1 when the flag is given (optional) */
    int max_count;        /* CLI_STR/CLI_PATH: may repeat up to this many times */
    int *count;           /* ... how many were given */
    int optional_value;   /* CLI_ENUM: the value may be left out (next arg not a name) */
    int hidden;           /* accepted, not listed in --help */
    int required;         /* CLI_STR/CLI_PATH: after parsing, a NULL *dst is the usage
                             error "NAME METAVAR is required" */
    /* CLI_CUSTOM: the value at dst as text (for cli_agree_text) */
    void (*show)(const void *dst, char *buf, size_t n);
} cli_opt;

typedef struct cli_pos {
    const char *name;     /* "MODEL"; NULL ends the list */
    const char **dst;
    const char *help;
    int required;
    const char *missing;  /* the message when a required one is absent; NULL: "NAME missing" */
} cli_pos;

typedef struct cli_spec {
    const char *cmd;      /* "train", "inspect keys" (messages say "ffn <cmd>") */
    const char *synopsis; /* the usage line(s) after "usage: ffn <cmd> "; NULL: generated */
    const char *about;    /* the description, preformatted (lines <= 80 columns) */
    const char *epilog;   /* after the flags: output, exit status, examples */
    const cli_opt *opts;  /* terminated by {0} */
    const cli_pos *pos;   /* terminated by {0}; NULL: no positional arguments */
} cli_spec;

/* Parse argv[1..argc) (argv[0] is the subcommand's name).  Returns 0 when
 * the command should go on; otherwise the command returns *rc: 0 after
 * --help (printed on stdout), CLI_EXIT_USAGE after a usage error (printed
 * on stderr).  `--` ends the flags. */
int cli_parse(const cli_spec *spec, int argc, char **argv, int *rc);
/* --help from the table. */
void cli_help(const cli_spec *spec, FILE *f);
/* Only the flags of a table, under `heading` until the first group (for a
 * command whose --help also lists its subcommands' flags). */
void cli_help_options(FILE *f, const cli_opt *opts, const char *heading);
/* Usage errors that the table cannot see (two flags that exclude each
 * other, ...): print "ffn <cmd>: <message> (see 'ffn <cmd> --help')" and
 * return CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Levenshtein distance (strings up to 63 bytes; longer: 99), for "did you mean". */
int cli_edit_distance(const char *a, const char *b);

/* Shared declarations: the same flag, the same bounds and meaning.  An
 * integer or a float flag is the fields of CLI_INT_FIELDS / CLI_FLOAT_FIELDS
 * (name, destination, metavar, bounds, help), with more fields after them
 * where a flag needs them. */
#define CLI_INT_FIELDS(name_, p, mv, lo, hi, text) \
    .name = (name_), .type = CLI_INT, .dst = (p), .metavar = (mv), .imin = (lo), .imax = (hi), \
    .help = (text)
#define CLI_FLOAT_FIELDS(name_, p, mv, lo, hi, text) \
    .name = (name_), .type = CLI_FLOAT, .dst = (p), .metavar = (mv), .fmin = (lo), .fmax = (hi), \
    .help = (text)
#define CLI_THREADS_HELP \
    "threads: 0 = FFN_NUM_THREADS when set, else every core; more threads than " \
    "cores run slower and are warned about"
#define CLI_OPT_THREADS(p) {CLI_INT_FIELDS("--threads", p, "N", 0, 4096, CLI_THREADS_HELP)}
#define CLI_OPT_SEED(p, text) {CLI_INT_FIELDS("--seed", p, "S", 0, INT64_MAX, text)}
#define CLI_OPT_JSON(p, text) {.name = "--json", .type = CLI_FLAG, .dst = (p), .help = (text)}
#define CLI_OPT_FORCE(p, text) {.name = "--force", .type = CLI_FLAG, .dst = (p), .help = (text)}
/* the MODEL argument of the commands that read any model file
 * (ffn_checkpoint_load_any) */
#define CLI_POS_MODEL(p)                                    \
    {.name = "MODEL", .dst = (p), .required = 1,            \
     .help = "a llama2.c .bin, a Hugging Face or an ffn directory, a GGUF file"}
#define CLI_OPT_OUT(p, mv, text) \
    {.name = "--out", .type = CLI_PATH, .dst = (p), .metavar = (mv), .help = (text)}
#define CLI_OPT_OUT_REQUIRED(p, mv, text) \
    {.name = "--out", .type = CLI_PATH, .dst = (p), .metavar = (mv), .help = (text), .required = 1}
/* optimizer steps of a training run */
#define CLI_OPT_TRAIN_STEPS(p, text) {CLI_INT_FIELDS("--steps", p, "S", 1, 100000000, text)}
/* tokens to generate */
#define CLI_OPT_GEN_STEPS(p) {CLI_INT_FIELDS("--steps", p, "N", 0, 100000000, "tokens to generate")}
#define CLI_OPT_TEMPERATURE(p) \
    {CLI_FLOAT_FIELDS("--temperature", p, "T", 0, 100, "0 = greedy (the most likely token, " \
                      "lowest id on ties); otherwise sample from softmax(logits / T)")}
#define CLI_OPT_TOP_P(p) \
    {CLI_FLOAT_FIELDS("--top-p", p, "P", 0, 1, "nucleus sampling: only the most likely tokens " \
                      "whose probabilities add up to P (1 = all)"), .fmin_open = 1}
/* `ffn generate` and `ffn run` both take their sampling defaults from
 * ffn_generate_options_default (one set, shown in both --help). */
/* layers are 0-based everywhere */
#define CLI_LAYER_HELP "0-based: the first block is layer 0"

/* Model shape, Hugging Face config.json names. */
#define CLI_OPT_HIDDEN_SIZE(p, g) \
    {CLI_INT_FIELDS("--hidden-size", p, "D", 1, 1 << 20, "model width (hidden_size)"), .group = (g)}
#define CLI_OPT_INTERMEDIATE_SIZE(p, text) \
    {CLI_INT_FIELDS("--intermediate-size", p, "F", 1, 1 << 24, text)}
#define CLI_OPT_LAYERS(p) \
    {CLI_INT_FIELDS("--num-hidden-layers", p, "L", 1, 1024, "Transformer blocks")}
#define CLI_OPT_HEADS(p) \
    {CLI_INT_FIELDS("--num-attention-heads", p, "H", 1, 4096, "attention heads")}
#define CLI_OPT_KV_HEADS(p, d) \
    {CLI_INT_FIELDS("--num-key-value-heads", p, "G", 1, 4096, \
                    "key/value heads; G < H is grouped-query attention"), .def = (d)}
#define CLI_OPT_EXPERTS(p, text) {CLI_INT_FIELDS("--num-experts", p, "E", 0, 4096, text)}
#define CLI_OPT_TOP_K(p) \
    {CLI_INT_FIELDS("--num-experts-per-tok", p, "K", 1, 4096, "experts each token uses")}
#define CLI_OPT_BATCH(p) \
    {CLI_INT_FIELDS("--batch-size", p, "B", 1, 65536, "sequences per micro-batch")}
#define CLI_OPT_SEQ_LEN(p) \
    {CLI_INT_FIELDS("--seq-len", p, "T", 2, 1 << 20, "context length in tokens")}
/* The benchmarks' shapes and repeats (ffn bench layer, moe, their --tp
 * and --ep forms, qgemm): one flag, one range.  def_: the default shown
 * in --help (NULL: the destination's value). */
#define CLI_OPT_HIDDEN(p) {CLI_INT_FIELDS("--hidden", p, "D", 1, 1 << 20, "hidden_size")}
#define CLI_OPT_INTERMEDIATE(p, text) {CLI_INT_FIELDS("--intermediate", p, "F", 1, 1 << 22, text)}
#define CLI_OPT_REPEATS(p, def_, text) \
    {CLI_INT_FIELDS("--repeats", p, "R", 1, 100000, text), .def = (def_)}
/* The parallel layout (ffn plan, and the commands run under mpirun). */
#define CLI_OPT_TP(p) \
    {CLI_INT_FIELDS("--tp", p, "T", 1, 65536, \
                    "tensor-parallel ranks (divides the heads and the KV heads)"), .group = "layout"}
#define CLI_OPT_DP(p) \
    {CLI_INT_FIELDS("--dp", p, "D", 1, 65536, \
                    "data-parallel ranks; --batch-size is per rank, so a step trains on D x B " \
                    "sequences")}
#define CLI_OPT_EP(p) \
    {CLI_INT_FIELDS("--ep", p, "E", 1, 65536, \
                    "expert-parallel ranks, inside the data-parallel group (divides --dp)")}
#define CLI_OPT_LR(p) {CLI_FLOAT_FIELDS("--lr", p, "X", 0, 10, "peak learning rate")}
#define CLI_OPT_MIN_LR(p) \
    {CLI_FLOAT_FIELDS("--min-lr", p, "X", 0, 10, "learning rate at the end of the cosine")}
#define CLI_OPT_EVAL_EVERY(p, d) \
    {CLI_INT_FIELDS("--eval-every", p, "K", 0, 1000000000, "evaluate the held-out loss every K " \
                    "steps and at the end (0 = only at the end)"), .def = (d)}
#define CLI_OPT_EVAL_BATCHES(p) \
    {CLI_INT_FIELDS("--eval-batches", p, "N", 1, 100000, "fixed held-out batches per evaluation")}
#define CLI_OPT_TOKENIZER_MODE(p) \
    {.name = "--tokenizer", .type = CLI_ENUM, .dst = (p), .names = cli_tokenizer_names, \
     .values = cli_tokenizer_values, .help = "the vocabulary built from the text"}
#define CLI_OPT_LANG(name_, p, text) \
    {.name = (name_), .type = CLI_ENUM, .dst = (p), .names = cli_lang_names, \
     .values = cli_lang_values, .help = (text)}

/* The precision of the matrix products (ffn_precision, include/ffn/layer.h):
 * one meaning in every command that takes it. */
#define CLI_PRECISION_HELP \
    "matrix products: fp32, or bf16 (bf16 weights and activations into each product, " \
    "fp32 accumulation and results, fp32 master weights; as PyTorch's autocast with " \
    "bf16; needs AVX512_BF16)"
#define CLI_OPT_PRECISION(p) \
    {.name = "--precision", .type = CLI_ENUM, .dst = (p), .names = cli_precision_names, \
     .values = cli_precision_values, .help = CLI_PRECISION_HELP}
extern const char *const cli_precision_names[];

/* The ggml types with every bit of `caps` (FFN_GGML_DECODES, _ENCODES,
 * _COMPUTES of ffn/dtype.h; f32 left out when !with_f32), read from the
 * library's type table: the names and values of a CLI_ENUM (NULL-
 * terminated names, values as ffn_ggml_type), and the names joined for a
 * help line or a message ("f32, f16, ... or <the last>").  The storage is
 * static and shared by every call with the same arguments. */
typedef struct cli_types {
    const char *const *names;
    const int *values;
    const char *list; /* "a, b or c" */
} cli_types;
cli_types cli_ggml_types(unsigned caps, int with_f32);
/* The type names help texts show as examples, read from the type table
 * (so a new or reordered row changes them, never a string in a command):
 * `block`, the first block format (more than one element a block) in the
 * table's order that ffn encodes and computes with; `super`, the first of
 * those with the largest blocks (the super-block formats); `mix`,
 * llama.cpp's mix named after `super` (its general.file_type; `super`'s
 * name when it has none). */
typedef struct cli_type_examples {
    const char *block, *super, *mix;
} cli_type_examples;
cli_type_examples cli_ggml_examples(void);
/* text wrapped at the --help width (80 columns; '\n' breaks a line, runs of
 * spaces fold) into buf (cap bytes, NUL-terminated), for an `about` built
 * at run time.  Returns buf. */
char *cli_wrap_text(const char *text, char *buf, size_t cap);
extern const int cli_precision_values[];
extern const char *const cli_tokenizer_names[];
extern const int cli_tokenizer_values[];
extern const char *const cli_lang_names[];
extern const int cli_lang_values[];
/* The built-in corpora ffn train reads: the languages and the facts corpus. */
extern const char *const cli_corpus_names[];
extern const int cli_corpus_values[];
/* CLI_CUSTOM parser for an activation name (ffn_act_parse; dst ffn_act*),
 * and its show. */
int cli_parse_act(const char *value, void *dst);
void cli_show_act(const void *dst, char *buf, size_t n);

/* ---- several processes --------------------------------------------------------- */

/* The deadline of every wait between ranks (ffn_dist_layout.timeout_s). */
#define CLI_OPT_DIST_TIMEOUT(p) \
    {CLI_FLOAT_FIELDS("--dist-timeout", p, "S", 0, 1e9, \
                      "several processes: a rank that waits for the others longer than S seconds " \
                      "(at the start, in a gradient sum, an all-reduce, a checkpoint's " \
                      "agreement) stops with a message naming the wait, and mpirun ends the " \
                      "job; 0: no deadline.  Raise it when one rank's checkpoint save or " \
                      "evaluation takes longer")}
/* The options every rank of an mpirun job must share, for
 * ffn_dist_layout.options: one line "--flag=VALUE" per flag of `opts` (its
 * value after parsing: the default or the one given; exact numbers; a
 * CLI_PATH only as "given" or "none", as paths may differ between hosts
 * while the contents are compared later), except the flags named in
 * `skip` (NULL-ended: those that only shape output or this host, such as
 * --threads).  '\n' and '\\' in a value are escaped.  Returns the length
 * written (NUL-terminated), or -1 when it does not fit in n. */
int cli_agree_text(const cli_opt *opts, const char *const *skip, char *buf, size_t n);

/* ---- errors ------------------------------------------------------------------ */

/* Print "ffn <cmd>: <message>\n" on stderr. */
void cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print "ffn <cmd>: <ffn_last_error() or status string>\n" and return CLI_EXIT_FAIL. */
int cli_fail(const char *cmd, ffn_status st);
/* The message cli_fail prints for st (the library's last error, without
 * its "ffn_function: " prefix). */
const char *cli_fail_message(ffn_status st);
/* --type NAME of a layer (ffn_act_parse): its activation and whether it is
 * gated (*type FFN_MLP_GATED or _DENSE); 0, else the error is printed and
 * CLI_EXIT_USAGE returned. */
int cli_layer_type(const char *cmd, const char *name, ffn_act *act, ffn_mlp_type *type);
/* The same into cfg->act and cfg->type, then ffn_layer_config_validate of
 * the whole *cfg (its other fields set by the caller): 0, else the error
 * is printed and the exit status returned (CLI_EXIT_USAGE for the name,
 * CLI_EXIT_FAIL for the config). */
int cli_layer_config(const char *cmd, const char *name, ffn_layer_config *cfg);
/* A --layer beyond the model's layers (known only once it is loaded): one
 * message and exit 2 (CLI_EXIT_USAGE), as for every other bad flag value;
 * 0 when layer < n_layers. */
int cli_check_layer(const char *cmd, int64_t layer, int64_t n_layers);

/* Strict number parsing: the whole string must be a number in [lo, hi].
 * On failure print "ffn <cmd>: --flag: expected ..., got '...'" and return
 * 0; return 1 on success. */
int cli_parse_i64(const char *cmd, const char *flag, const char *s, int64_t lo, int64_t hi,
                  int64_t *out);
int cli_parse_f64(const char *cmd, const char *flag, const char *s, double lo, double hi,
                  double *out);

/* For hand-written `--flag value` loops (prefer the table): if argv[*i]
 * equals `flag`, set *value to the next argument (advancing *i) and return
 * 1; if the value is missing print an error and return -1; return 0 when
 * argv[*i] is another flag.  Also accepts --flag=value. */
int cli_flag(const char *cmd, int argc, char **argv, int *i, const char *flag,
             const char **value);

/* Token ids separated by spaces, commas, tabs or newlines, each in
 * [0, vocab) (vocab <= 0: any id >= 0).  On failure prints the error naming
 * `flag` and returns 0; on success *out is malloc'ed (free it). */
int cli_parse_ids(const char *cmd, const char *flag, const char *s, int64_t vocab, int32_t **out,
                  int64_t *n_out);

/* 1 when stderr is a terminal (progress lines are drawn only then). */
int cli_progress_tty(void);

/* Stopping a long run cleanly: cli_stop_on_signals() clears
 * cli_stop_requested and installs handlers for SIGINT and SIGTERM.  The
 * first signal sets cli_stop_requested (the run finishes its step, saves and
 * stops); a second one ends the process at once.  SA_RESTART: a save in
 * progress is not cut short by EINTR. */
extern volatile sig_atomic_t cli_stop_requested;
void cli_stop_on_signals(void);
/* Seconds of the monotonic clock (for timings; only differences mean anything). */
double cli_seconds(void);
/* The process's peak resident memory so far (VmHWM of /proc/self/status), in
 * bytes; -1 when it cannot be read. */
int64_t cli_peak_rss_bytes(void);

/* The thread rule of every command: --threads 0 = FFN_NUM_THREADS when
 * set, else every core; a count above the cores of this machine runs (the
 * user asked for it) after a warning naming both numbers.  Returns 0, or
 * CLI_EXIT_FAIL after printing the error. */
int cli_make_ctx(const char *cmd, int64_t threads, ffn_ctx **ctx);

/* Generated text printed as it comes: an ffn_generate callback (user: a
 * cli_text_out) that writes each piece to stdout at once and counts what it
 * wrote; with stop_at_newline the generation ends after the first newline. */
typedef struct cli_text_out {
    int stop_at_newline;
    int last_newline; /* the last byte written was '\n' */
    int64_t bytes, newlines;
} cli_text_out;
int cli_text_piece(const char *bytes, size_t len, void *user);

/* A whole file of at most 256 MiB, NUL-terminated (malloc'd; *len its
 * bytes); NULL with errno set on failure (EFBIG when it is larger, EIO on
 * a read error). */
char *cli_read_file(const char *path, size_t *len);

/* Write s as a JSON string literal (quotes, escapes) to f. */
void cli_json_string(FILE *f, const char *s);
/* One byte of a JSON string's body: '"', '\\', \n, \t, \r escaped, the other
 * bytes below 0x20 as \u00XX, the rest as they are. */
void cli_json_char(FILE *f, unsigned c);
/* v as a JSON number in the printf format fmt ("%.6g"), or null when v is
 * NaN or infinite (JSON has neither): every --json writer prints its
 * numbers through these.  cli_json_num returns the text for a "%s" of a
 * printf call, in one of 64 rotating buffers (so up to 64 of them may feed
 * one call); cli_nonfinite_name says which of nan, inf, -inf v is (NULL
 * when it is finite), for a reason beside a null. */
void cli_json_number(FILE *f, double v, const char *fmt);
const char *cli_json_num(double v, const char *fmt);
const char *cli_nonfinite_name(double v);

/* The indices of the k largest of V scores into ids (k), largest first,
 * equal ones by lower index, -1 where V < k: the scores are p, or pd when
 * p is NULL. */
void cli_top_ids(const float *p, const double *pd, int64_t V, int64_t k, int32_t *ids);

/* The fp32 FMA peak in GFLOP/s on `threads` threads, measured by the code
 * of `ffn bench peak` (tools/cmd_bench.c); 0 without AVX2 or AVX-512. */
double cli_fma_peak_gflops(int threads);

#endif
