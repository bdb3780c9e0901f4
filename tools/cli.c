/* cli.c -- the option table (parsing, --help, uniform usage errors), error
 * printing and the thread rule shared by the subcommands (see cli.h). */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HELP_WIDTH 80 /* no --help line is wider */
#define HELP_COL 26   /* where a flag's help starts */

const char *const cli_tokenizer_names[] = {"byte", "char", "word", NULL};
const int cli_tokenizer_values[] = {FFN_TOK_BYTE, FFN_TOK_CHAR, FFN_TOK_WORD};
const char *const cli_lang_names[] = {"en", "zh", NULL};
const int cli_lang_values[] = {FFN_LANG_EN, FFN_LANG_ZH};
const char *const cli_corpus_names[] = {"en", "zh", "facts", NULL};
const int cli_corpus_values[] = {FFN_LANG_EN, FFN_LANG_ZH, FFN_LANG_FACTS};
const char *const cli_precision_names[] = {"fp32", "bf16", NULL};

cli_types cli_ggml_types(unsigned caps, int with_f32) {
    enum { SETS = 8 };
    static struct {
        int used, with_f32;
        unsigned caps;
        const char *names[FFN_GGML_TYPE_COUNT + 1];
        int values[FFN_GGML_TYPE_COUNT];
        char list[512];
    } sets[SETS];
    int i = 0;
    while (i < SETS - 1 && sets[i].used && (sets[i].caps != caps || sets[i].with_f32 != with_f32)) i++;
    if (!sets[i].used || sets[i].caps != caps || sets[i].with_f32 != with_f32) {
        ffn_ggml_type t[FFN_GGML_TYPE_COUNT];
        int n = ffn_ggml_types(caps, t, FFN_GGML_TYPE_COUNT), k = 0;
        size_t used = 0;
        sets[i].list[0] = 0;
        for (int j = 0; j < n && j < FFN_GGML_TYPE_COUNT; j++) {
            if (!with_f32 && t[j] == FFN_GGML_TYPE_F32) continue;
            sets[i].names[k] = ffn_ggml_type_name(t[j]);
            sets[i].values[k++] = (int)t[j];
        }
        sets[i].names[k] = NULL;
        for (int j = 0; j < k && used < sizeof sets[i].list; j++) {
            int w = snprintf(sets[i].list + used, sizeof sets[i].list - used, "%s%s",
                             j == 0 ? "" : j == k - 1 ? " or " : ", ", sets[i].names[j]);
            if (w < 0) break;
            used += (size_t)w;
        }
        sets[i].used = 1, sets[i].caps = caps, sets[i].with_f32 = with_f32;
    }
    return (cli_types){sets[i].names, sets[i].values, sets[i].list};
}
const int cli_precision_values[] = {FFN_PRECISION_FP32, FFN_PRECISION_BF16};

cli_type_examples cli_ggml_examples(void) {
    ffn_ggml_type t[FFN_GGML_TYPE_COUNT];
    const int n = ffn_ggml_types(FFN_GGML_ENCODES | FFN_GGML_COMPUTES, t, FFN_GGML_TYPE_COUNT);
    int block = -1, super = -1;
    for (int j = 0; j < n && j < FFN_GGML_TYPE_COUNT; j++) {
        const int64_t bs = ffn_ggml_block_size(t[j]);
        if (bs <= 1) continue;
        if (block < 0) block = j;
        if (super < 0 || bs > ffn_ggml_block_size(t[super])) super = j;
    }
    cli_type_examples e = {"?", "?", "?"};
    if (block < 0) return e;
    e.block = ffn_ggml_type_name(t[block]);
    e.super = ffn_ggml_type_name(t[super]);
    const char *mix = ffn_ftype_name(ffn_ggml_file_type(t[super]));
    e.mix = mix ? mix : e.super;
    return e;
}

int cli_parse_act(const char *value, void *dst) {
    ffn_act act;
    ffn_mlp_type implied;
    if (ffn_act_parse(value, &act, &implied) != FFN_OK) return 1;
    *(ffn_act *)dst = act;
    return 0;
}

void cli_show_act(const void *dst, char *buf, size_t n) {
    snprintf(buf, n, "%s", ffn_act_name(*(const ffn_act *)dst));
}

/* ---- the options every rank shares -------------------------------------------- */

/* The shortest %g that reads back as the same double. */
static void exact_double(double v, char *buf, size_t n) {
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) return;
    }
}

static int put_value(char *buf, size_t n, size_t *at, const char *v) {
    for (; *v; v++) {
        const char *e = *v == '\n' ? "\\n" : *v == '\\' ? "\\\\" : NULL;
        size_t k = e ? 2 : 1;
        if (*at + k + 2 > n) return -1;
        if (e) memcpy(buf + *at, e, 2);
        else buf[*at] = *v;
        *at += k;
    }
    return 0;
}

int cli_agree_text(const cli_opt *opts, const char *const *skip, char *buf, size_t n) {
    size_t at = 0;
    if (!n) return -1;
    buf[0] = '\0';
    for (const cli_opt *o = opts; o && o->name; o++) {
        int skipped = 0;
        for (int k = 0; skip && skip[k] && !skipped; k++) skipped = !strcmp(skip[k], o->name);
        if (skipped || !o->dst) continue;
        char v[512] = "";
        switch (o->type) {
        case CLI_FLAG: snprintf(v, sizeof v, "%d", *(const int *)o->dst); break;
        case CLI_INT: snprintf(v, sizeof v, "%lld", (long long)*(const int64_t *)o->dst); break;
        case CLI_FLOAT: exact_double(*(const double *)o->dst, v, sizeof v); break;
        case CLI_PATH:
            if (o->max_count > 0) snprintf(v, sizeof v, "%d given", o->count ? *o->count : 0);
            else snprintf(v, sizeof v, "%s", *(const char *const *)o->dst ? "given" : "none");
            break;
        case CLI_STR:
        case CLI_LIST:
            if (o->max_count > 0) {
                const char *const *list = o->dst;
                int c = o->count ? *o->count : 0;
                size_t w = (size_t)snprintf(v, sizeof v, "%d:", c);
                for (int k = 0; k < c && w < sizeof v; k++)
                    w += (size_t)snprintf(v + w, sizeof v - w, " %s", list[k]);
            } else {
                const char *x = *(const char *const *)o->dst;
                snprintf(v, sizeof v, "%s", x ? x : "(none)");
            }
            break;
        case CLI_ENUM: {
            int x = *(const int *)o->dst, named = 0;
            for (int k = 0; o->names && o->names[k] && !named; k++)
                if ((o->values ? o->values[k] : k) == x) {
                    snprintf(v, sizeof v, "%s", o->names[k]);
                    named = 1;
                }
            if (!named) snprintf(v, sizeof v, "%d", x);
            break;
        }
        case CLI_CUSTOM:
            if (o->show) o->show(o->dst, v, sizeof v);
            else snprintf(v, sizeof v, "?");
            break;
        }
        size_t k = strlen(o->name);
        if (at + k + 3 > n) return -1;
        memcpy(buf + at, o->name, k);
        at += k;
        buf[at++] = '=';
        if (put_value(buf, n, &at, v)) return -1;
        buf[at++] = '\n';
        buf[at] = '\0';
    }
    return (int)at;
}

/* ---- errors ------------------------------------------------------------------ */

/* "ffn <cmd>: <message>" on stderr, without the end of the line. */
/* The text goes through ffn_escape_controls (as the library's messages
 * do): a control character from a file's names reaches the terminal as
 * \xNN. */
/* The whole line goes out in one write: under mpirun every rank's stderr
 * meets in one stream, and a line written in pieces can be cut by another
 * rank's. */
static void vmessage(const char *cmd, const char *tail, const char *fmt, va_list ap) {
    char raw[4096], text[4096], line[4096 + 256];
    vsnprintf(raw, sizeof raw, fmt, ap);
    snprintf(line, sizeof line, "ffn %s: %s%s\n", cmd, ffn_escape_controls(text, sizeof text, raw),
             tail);
    fputs(line, stderr);
    fflush(stderr);
}

void cli_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vmessage(cmd, "", fmt, ap);
    va_end(ap);
}

int cli_layer_type(const char *cmd, const char *name, ffn_act *act, ffn_mlp_type *type) {
    ffn_mlp_type implied;
    if (ffn_act_parse(name, act, &implied)) {
        cli_error(cmd, "--type: %s", ffn_last_error());
        return CLI_EXIT_USAGE;
    }
    *type = implied == FFN_MLP_GATED ? FFN_MLP_GATED : FFN_MLP_DENSE;
    return 0;
}

int cli_layer_config(const char *cmd, const char *name, ffn_layer_config *cfg) {
    if (cli_layer_type(cmd, name, &cfg->act, &cfg->type)) return CLI_EXIT_USAGE;
    ffn_status st = ffn_layer_config_validate(cfg);
    return st ? cli_fail(cmd, st) : 0;
}

const char *cli_fail_message(ffn_status st) {
    const char *msg = ffn_last_error();
    if (!msg || !*msg) msg = ffn_status_str(st);
    /* the library's own function name ("ffn_inspect_run: ") is not for the
     * user: the message after it names what is wrong */
    if (!strncmp(msg, "ffn_", 4)) {
        size_t k = 4;
        while ((msg[k] >= 'a' && msg[k] <= 'z') || (msg[k] >= '0' && msg[k] <= '9') || msg[k] == '_') k++;
        if (msg[k] == ':' && msg[k + 1] == ' ' && msg[k + 2]) msg += k + 2;
    }
    return msg;
}

int cli_fail(const char *cmd, ffn_status st) {
    cli_error(cmd, "%s", cli_fail_message(st));
    return CLI_EXIT_FAIL;
}

int cli_check_layer(const char *cmd, int64_t layer, int64_t n_layers) {
    if (layer < n_layers) return 0;
    cli_error(cmd, "--layer %lld out of range: the model has %lld layer%s (0..%lld)", (long long)layer,
              (long long)n_layers, n_layers == 1 ? "" : "s", (long long)n_layers - 1);
    return CLI_EXIT_USAGE;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char tail[128];
    snprintf(tail, sizeof tail, " (see 'ffn %s --help')", cmd);
    vmessage(cmd, tail, fmt, ap);
    va_end(ap);
    return CLI_EXIT_USAGE;
}

int cli_parse_i64(const char *cmd, const char *flag, const char *s, int64_t lo, int64_t hi,
                  int64_t *out) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || errno || *end || v < lo || v > hi) {
        cli_error(cmd, "%s: expected an integer in [%lld, %lld], got '%s'", flag, (long long)lo,
                  (long long)hi, s);
        return 0;
    }
    *out = (int64_t)v;
    return 1;
}

int cli_parse_f64(const char *cmd, const char *flag, const char *s, double lo, double hi,
                  double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || errno || *end || !isfinite(v) || v < lo || v > hi) {
        cli_error(cmd, "%s: expected a number in [%g, %g], got '%s'", flag, lo, hi, s);
        return 0;
    }
    *out = v;
    return 1;
}

int cli_flag(const char *cmd, int argc, char **argv, int *i, const char *flag,
             const char **value) {
    const char *a = argv[*i];
    size_t n = strlen(flag);
    if (strncmp(a, flag, n) != 0) return 0;
    if (a[n] == '=') {
        *value = a + n + 1;
        return 1;
    }
    if (a[n] != '\0') return 0;
    if (*i + 1 >= argc) {
        cli_error(cmd, "%s needs a value", flag);
        return -1;
    }
    *value = argv[++*i];
    return 1;
}

int cli_parse_ids(const char *cmd, const char *flag, const char *s, int64_t vocab, int32_t **out,
                  int64_t *n_out) {
    size_t cap = strlen(s) / 2 + 1;
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids) {
        cli_error(cmd, "%s: out of memory", flag);
        return 0;
    }
    int64_t n = 0;
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long long x = strtoll(p, &end, 10);
        if (end == p || errno || (*end && *end != ' ' && *end != ',' && *end != '\t' && *end != '\n')) {
            cli_error(cmd, "%s: expected non-negative token ids separated by spaces or commas, "
                      "got '%s'", flag, s);
            free(ids);
            return 0;
        }
        if (x < 0 || x > INT32_MAX || (vocab > 0 && x >= vocab)) {
            if (vocab > 0)
                cli_error(cmd, "%s: token %lld is outside the vocabulary [0, %lld)", flag, x,
                          (long long)vocab);
            else
                cli_error(cmd, "%s: token %lld is not a valid id (expected 0 .. %d)", flag, x,
                          INT32_MAX);
            free(ids);
            return 0;
        }
        ids[n++] = (int32_t)x;
        p = end;
    }
    if (n == 0) {
        cli_error(cmd, "%s: no token ids in '%s'", flag, s);
        free(ids);
        return 0;
    }
    *out = ids;
    *n_out = n;
    return 1;
}

int cli_progress_tty(void) { return isatty(2); }

volatile sig_atomic_t cli_stop_requested;

static void on_stop_signal(int sig) {
    if (cli_stop_requested) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    cli_stop_requested = 1;
}

void cli_stop_on_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    cli_stop_requested = 0;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int cli_make_ctx(const char *cmd, int64_t threads, ffn_ctx **ctx) {
    if (threads < 0 || threads > 4096) {
        cli_error(cmd, "--threads: expected an integer in [0, 4096], got %lld", (long long)threads);
        return CLI_EXIT_FAIL;
    }
    ffn_status st = ffn_ctx_create((int)threads, ctx);
    if (st != FFN_OK) return cli_fail(cmd, st);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int n = ffn_ctx_threads(*ctx);
    if (cores > 0 && n > cores) {
        char source[64];
        if (threads > 0) snprintf(source, sizeof source, "--threads %d", n);
        else snprintf(source, sizeof source, "FFN_NUM_THREADS=%d", n);
        cli_error(cmd,
                  "warning: %s is more than the %ld cores of this machine: the extra threads "
                  "wait for each other and every step runs slower (--threads 0 uses every core)",
                  source, cores);
    }
    return 0;
}

int cli_text_piece(const char *bytes, size_t len, void *user) {
    cli_text_out *o = user;
    fwrite(bytes, 1, len, stdout);
    fflush(stdout);
    for (size_t i = 0; i < len; i++)
        if (bytes[i] == '\n') o->newlines++;
    if (len) o->last_newline = bytes[len - 1] == '\n';
    o->bytes += (int64_t)len;
    return o->stop_at_newline && o->newlines > 0;
}

void cli_json_char(FILE *f, unsigned c) {
    switch (c) {
    case '"': fputs("\\\"", f); break;
    case '\\': fputs("\\\\", f); break;
    case '\n': fputs("\\n", f); break;
    case '\t': fputs("\\t", f); break;
    case '\r': fputs("\\r", f); break;
    default:
        if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc((int)c, f);
    }
}

void cli_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) cli_json_char(f, *p);
    fputc('"', f);
}

const char *cli_nonfinite_name(double v) {
    return isnan(v) ? "nan" : isinf(v) ? (v > 0 ? "inf" : "-inf") : NULL;
}

const char *cli_json_num(double v, const char *fmt) {
    static _Thread_local char ring[64][40];
    static _Thread_local unsigned next;
    char *b = ring[next++ % 64];
    if (!isfinite(v)) return "null";
    /* a number too long for the buffer in fmt (%.0f of 1e300) is written in %.17g */
    if (snprintf(b, sizeof ring[0], fmt, v) >= (int)sizeof ring[0]) snprintf(b, sizeof ring[0], "%.17g", v);
    return b;
}

void cli_json_number(FILE *f, double v, const char *fmt) { fputs(cli_json_num(v, fmt), f); }

void cli_top_ids(const float *p, const double *pd, int64_t V, int64_t k, int32_t *ids) {
#define SCORE(i) (p ? (double)p[i] : pd[i])
    for (int64_t j = 0; j < k; j++) ids[j] = -1;
    for (int64_t v = 0; v < V; v++) {
        int64_t j = k;
        while (j > 0 && (ids[j - 1] < 0 || SCORE(v) > SCORE(ids[j - 1]))) j--;
        if (j >= k) continue;
        memmove(ids + j + 1, ids + j, (size_t)(k - 1 - j) * sizeof *ids);
        ids[j] = (int32_t)v;
    }
#undef SCORE
}

/* ---- the option table: what a flag accepts, in words ---------------------------- */

static void join_names(const cli_opt *o, const char *sep, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = '\0';
    for (int k = 0; o->names && o->names[k] && len < n; k++)
        len += (size_t)snprintf(buf + len, n - len, "%s%s", k ? sep : "", o->names[k]);
}

/* sp: the space inside the range (NBSP in --help, so a range is never split) */
static void range_text_sp(const cli_opt *o, char *buf, size_t n, const char *sp) {
    buf[0] = '\0';
    if (o->type == CLI_INT) {
        if (o->imax == INT64_MAX) snprintf(buf, n, ">=%s%lld", sp, (long long)o->imin);
        else snprintf(buf, n, "[%lld,%s%lld]", (long long)o->imin, sp, (long long)o->imax);
    } else if (o->type == CLI_FLOAT) {
        snprintf(buf, n, "%c%.12g,%s%.12g]", o->fmin_open ? '(' : '[', o->fmin, sp, o->fmax);
    }
}
#define NBSP "\x01" /* printed as a space by wrap(), never broken */
static void range_text(const cli_opt *o, char *buf, size_t n) { range_text_sp(o, buf, n, " "); }

static void expected_text(const cli_opt *o, char *buf, size_t n) {
    char r[96], names[512];
    switch (o->type) {
    case CLI_INT:
        range_text(o, r, sizeof r);
        if (o->imax == INT64_MAX) snprintf(buf, n, "an integer %s", r);
        else snprintf(buf, n, "an integer in %s", r);
        break;
    case CLI_FLOAT:
        range_text(o, r, sizeof r);
        snprintf(buf, n, "a number in %s", r);
        break;
    case CLI_ENUM: { /* "a, b or c" */
        size_t len = 0;
        int count = 0;
        while (o->names && o->names[count]) count++;
        names[0] = '\0';
        for (int k = 0; k < count && len < sizeof names; k++)
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%s",
                                    k == 0 ? "" : k == count - 1 ? " or " : ", ", o->names[k]);
        snprintf(buf, n, "%s", names);
        break;
    }
    case CLI_CUSTOM: snprintf(buf, n, "%s", o->expect ? o->expect : "a valid value"); break;
    case CLI_LIST: snprintf(buf, n, "a comma-separated list"); break;
    case CLI_PATH: snprintf(buf, n, "a path"); break;
    default: snprintf(buf, n, "a value"); break;
    }
}

static void metavar_text(const cli_opt *o, char *buf, size_t n) {
    if (o->type == CLI_FLAG) {
        buf[0] = '\0';
    } else if (o->metavar) {
        snprintf(buf, n, "%s", o->metavar);
    } else if (o->type == CLI_ENUM) {
        join_names(o, "|", buf, n);
    } else {
        snprintf(buf, n, "%s", o->type == CLI_PATH ? "PATH" : o->type == CLI_INT ? "N"
                               : o->type == CLI_FLOAT ? "X" : "VALUE");
    }
}

/* ---- parsing -------------------------------------------------------------------- */

static int matches(const cli_opt *o, const char *arg, size_t len) {
    return (strlen(o->name) == len && !strncmp(o->name, arg, len)) ||
           (o->alias && strlen(o->alias) == len && !strncmp(o->alias, arg, len));
}

static int enum_index(const cli_opt *o, const char *v) {
    for (int k = 0; o->names && o->names[k]; k++)
        if (!strcmp(o->names[k], v)) return k;
    return -1;
}

static int bad_value(const cli_spec *s, const char *flag, const cli_opt *o, const char *v) {
    char want[600];
    expected_text(o, want, sizeof want);
    cli_error(s->cmd, "%s: expected %s, got '%s'", flag, want, v);
    return CLI_EXIT_USAGE;
}

/* Store value v of flag o; 0 or an exit code after the message. */
static int store(const cli_spec *s, const char *flag, const cli_opt *o, const char *v) {
    char *end = NULL;
    switch (o->type) {
    case CLI_FLAG: *(int *)o->dst = 1; break;
    case CLI_INT: {
        errno = 0;
        long long x = strtoll(v, &end, 10);
        if (!*v || errno || *end || x < o->imin || x > o->imax) return bad_value(s, flag, o, v);
        *(int64_t *)o->dst = (int64_t)x;
        break;
    }
    case CLI_FLOAT: {
        errno = 0;
        double x = strtod(v, &end);
        if (!*v || errno || *end || !isfinite(x) || x < o->fmin || x > o->fmax ||
            (o->fmin_open && x == o->fmin))
            return bad_value(s, flag, o, v);
        *(double *)o->dst = x;
        break;
    }
    case CLI_STR:
    case CLI_PATH:
    case CLI_LIST:
        if (o->type == CLI_PATH && !*v) {
            cli_error(s->cmd, "%s: expected a path, got an empty string", flag);
            return CLI_EXIT_USAGE;
        }
        if (o->max_count > 0) {
            if (*o->count >= o->max_count) {
                cli_error(s->cmd, "%s: at most %d may be given", flag, o->max_count);
                return CLI_EXIT_USAGE;
            }
            ((const char **)o->dst)[(*o->count)++] = v;
        } else {
            *(const char **)o->dst = v;
        }
        break;
    case CLI_ENUM: {
        int k = enum_index(o, v);
        if (k < 0) return bad_value(s, flag, o, v);
        *(int *)o->dst = o->values ? o->values[k] : k;
        break;
    }
    case CLI_CUSTOM:
        if (o->parse(v, o->dst) != 0) return bad_value(s, flag, o, v);
        break;
    }
    if (o->seen) *o->seen = 1;
    return 0;
}

/* Edit distance for "did you mean" (short strings only). */
int cli_edit_distance(const char *a, const char *b) {
    size_t n = strlen(a), m = strlen(b);
    if (n > 63 || m > 63) return 99;
    int d[64][64];
    for (size_t i = 0; i <= n; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int sub = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            int del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            d[i][j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
    return d[n][m];
}

static int unknown_option(const cli_spec *s, const char *arg, size_t len) {
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)(len < 127 ? len : 127), arg);
    const char *best = NULL;
    int best_d = 3;
    for (const cli_opt *o = s->opts; o && o->name; o++) {
        if (o->hidden) continue;
        int d = cli_edit_distance(name, o->name);
        if (d < best_d || (!best && strlen(name) >= 4 && !strncmp(o->name, name, strlen(name)))) {
            best = o->name;
            best_d = d < best_d ? d : best_d;
        }
    }
    if (best)
        cli_error(s->cmd, "unknown option '%s' (did you mean %s? see 'ffn %s --help')", name, best,
                  s->cmd);
    else
        cli_error(s->cmd, "unknown option '%s' (see 'ffn %s --help')", name, s->cmd);
    return CLI_EXIT_USAGE;
}

int cli_parse(const cli_spec *s, int argc, char **argv, int *rc) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--")) break;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            cli_help(s, stdout);
            *rc = 0;
            return 1;
        }
    }
    int n_pos = 0, only_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_pos && !strcmp(a, "--")) {
            only_pos = 1;
            continue;
        }
        if (!only_pos && a[0] == '-' && a[1] != '\0') {
            const char *eq = strchr(a, '=');
            size_t len = eq ? (size_t)(eq - a) : strlen(a);
            const cli_opt *o = s->opts;
            while (o && o->name && !matches(o, a, len)) o++;
            if (!o || !o->name) {
                *rc = unknown_option(s, a, len);
                return 1;
            }
            char flag[128];
            snprintf(flag, sizeof flag, "%.*s", (int)(len < 127 ? len : 127), a);
            const char *v = NULL;
            if (o->type == CLI_FLAG) {
                if (eq) {
                    cli_error(s->cmd, "%s takes no value, got '%s'", flag, eq + 1);
                    *rc = CLI_EXIT_USAGE;
                    return 1;
                }
            } else if (eq) {
                v = eq + 1;
            } else if (o->optional_value) {
                if (i + 1 < argc && enum_index(o, argv[i + 1]) >= 0) v = argv[++i];
                else {
                    if (o->seen) *o->seen = 1;
                    continue; /* the flag alone: the destination keeps its default */
                }
            } else if (i + 1 < argc) {
                v = argv[++i];
            } else {
                char want[600];
                expected_text(o, want, sizeof want);
                cli_error(s->cmd, "%s needs a value (%s)", flag, want);
                *rc = CLI_EXIT_USAGE;
                return 1;
            }
            if ((*rc = store(s, flag, o, v)) != 0) return 1;
            continue;
        }
        const cli_pos *p = s->pos;
        int k = 0;
        while (p && p[k].name && k < n_pos) k++;
        if (!p || !p[k].name) {
            char names[256] = "";
            size_t len = 0;
            for (int j = 0; p && p[j].name && len < sizeof names; j++)
                len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", j ? " " : "",
                                        p[j].name);
            if (names[0] && n_pos > 0)
                cli_error(s->cmd, "unexpected argument '%s' (one %s expected, got '%s' and '%s'; "
                          "see 'ffn %s --help')", a, names, *p[n_pos - 1].dst, a, s->cmd);
            else
                cli_error(s->cmd, "unexpected argument '%s' (%s%s; see 'ffn %s --help')", a,
                          names[0] ? "it takes " : "every input is given by a flag",
                          names, s->cmd);
            *rc = CLI_EXIT_USAGE;
            return 1;
        }
        *p[k].dst = a;
        n_pos++;
    }
    for (int k = 0; s->pos && s->pos[k].name; k++)
        if (s->pos[k].required && !*s->pos[k].dst) {
            if (s->pos[k].missing)
                cli_error(s->cmd, "%s (see 'ffn %s --help')", s->pos[k].missing, s->cmd);
            else
                cli_error(s->cmd, "%s missing (see 'ffn %s --help')", s->pos[k].name, s->cmd);
            *rc = CLI_EXIT_USAGE;
            return 1;
        }
    for (const cli_opt *o = s->opts; o && o->name; o++)
        if (o->required && (o->type == CLI_STR || o->type == CLI_PATH) &&
            !*(const char *const *)o->dst) {
            *rc = cli_usage_error(s->cmd, "%s %s is required", o->name, o->metavar);
            return 1;
        }
    *rc = 0;
    return 0;
}

/* ---- --help ----------------------------------------------------------------------- */

/* Print text wrapped at HELP_WIDTH, every line after the first indented to
 * `indent`; the first line continues at column `col`. */
static void wrap(FILE *f, const char *text, int col, int indent) {
    const char *p = text;
    int at_start = 1;
    while (*p) {
        if (*p == '\n') { /* an explicit break */
            fputc('\n', f);
            col = fprintf(f, "%*s", indent, "");
            p++;
            at_start = 1;
            continue;
        }
        size_t word = strcspn(p, " \n");
        int wlen = 0; /* columns, counting UTF-8 characters once */
        for (size_t k = 0; k < word; k++) wlen += ((unsigned char)p[k] & 0xC0) != 0x80;
        if (!at_start && col + 1 + wlen > HELP_WIDTH) {
            fputc('\n', f);
            col = fprintf(f, "%*s", indent, "");
            at_start = 1;
        }
        if (!at_start) col += fprintf(f, " ");
        for (size_t k = 0; k < word; k++) fputc(p[k] == '\x01' ? ' ' : p[k], f);
        col += wlen;
        at_start = 0;
        p += word;
        while (*p == ' ') p++;
    }
    fputc('\n', f);
}

char *cli_wrap_text(const char *text, char *buf, size_t cap) {
    if (!cap) return buf;
    buf[0] = '\0';
    FILE *f = fmemopen(buf, cap, "w");
    if (!f) return buf;
    wrap(f, text, 0, 0);
    fclose(f);
    buf[cap - 1] = '\0';
    return buf;
}

static void default_text(const cli_opt *o, char *buf, size_t n) {
    buf[0] = '\0';
    if (o->def) {
        snprintf(buf, n, "%s", o->def);
        return;
    }
    if (!o->dst || o->max_count > 0) return;
    switch (o->type) {
    case CLI_INT: snprintf(buf, n, "%lld", (long long)*(const int64_t *)o->dst); break;
    case CLI_FLOAT: snprintf(buf, n, "%g", *(const double *)o->dst); break;
    case CLI_STR:
    case CLI_PATH:
    case CLI_LIST: {
        const char *v = *(const char *const *)o->dst;
        if (v) snprintf(buf, n, "%s", *v ? v : "\"\"");
        break;
    }
    case CLI_ENUM: {
        int v = *(const int *)o->dst;
        for (int k = 0; o->names && o->names[k]; k++)
            if ((o->values ? o->values[k] : k) == v) {
                snprintf(buf, n, "%s", o->names[k]);
                break;
            }
        break;
    }
    default: break;
    }
}

void cli_help_options(FILE *f, const cli_opt *opts, const char *heading) {
    const char *group = NULL;
    int first = 1;
    for (const cli_opt *o = opts; o && o->name; o++) {
        if (o->group && (!group || strcmp(o->group, group))) {
            group = o->group;
            fprintf(f, "\n%s:\n", group);
            first = 0;
        } else if (first) {
            fprintf(f, "\n%s:\n", heading);
            first = 0;
        }
        if (o->hidden) continue;
        char mv[256], def[256], range[96], text[2048];
        metavar_text(o, mv, sizeof mv);
        default_text(o, def, sizeof def);
        range_text_sp(o, range, sizeof range, NBSP);
        /* an enum whose values do not fit the line beside the flag (the type
         * lists) takes the metavar T and names its values in the text */
        char values[512] = "";
        if (o->type == CLI_ENUM && !o->metavar && 3 + strlen(o->name) + strlen(mv) > 78) {
            join_names(o, ", ", values, sizeof values);
            snprintf(mv, sizeof mv, "T");
        }
        int col = fprintf(f, "  %s%s%s", o->name, mv[0] ? " " : "", mv);
        if (o->alias) col += fprintf(f, ", %s", o->alias);
        if (col + 1 > HELP_COL) {
            fputc('\n', f);
            col = 0;
        }
        fprintf(f, "%*s", HELP_COL - col, "");
        size_t len = values[0] ? (size_t)snprintf(text, sizeof text, "T: %s; %s", values,
                                                  o->help ? o->help : "")
                               : (size_t)snprintf(text, sizeof text, "%s", o->help ? o->help : "");
        if (def[0] && range[0] && len < sizeof text)
            snprintf(text + len, sizeof text - len, " (default %s; range %s)", def, range);
        else if (def[0] && len < sizeof text)
            snprintf(text + len, sizeof text - len, " (default %s)", def);
        else if (range[0] && len < sizeof text)
            snprintf(text + len, sizeof text - len, " (range %s)", range);
        wrap(f, text, HELP_COL, HELP_COL);
    }
}

void cli_help(const cli_spec *s, FILE *f) {
    if (s->synopsis) {
        /* each line of the synopsis within 80 columns: a long one wraps at
         * a space, its continuation indented under the first argument */
        const int indent = (int)strlen("usage: ffn  ") + (int)strlen(s->cmd);
        int col = fprintf(f, "usage: ffn %s", s->cmd), space = 1;
        for (const char *p = s->synopsis; *p;) {
            if (*p == '\n') { /* the synopsis's own next line, as written */
                fputc('\n', f);
                p++;
                col = 0;
                while (*p == ' ') fputc(*p++, f), col++;
                space = 0;
                continue;
            }
            if (*p == ' ') {
                p++;
                space = 1;
                continue;
            }
            /* a flag keeps its metavar ("--target T", "[--threads N]"):
             * the unit runs to the next space before a flag or bracket */
            size_t w = strcspn(p, " \n");
            while (p[w] == ' ' && p[w + 1] >= 'A' && p[w + 1] <= 'Z')
                w += 1 + strcspn(p + w + 1, " \n");
            if (col > indent && col + space + (int)w > 80) {
                fprintf(f, "\n%*s", indent + 2, "");
                col = indent + 2;
                space = 0;
            }
            col += fprintf(f, "%s%.*s", space ? " " : "", (int)w, p);
            p += w;
            space = 0;
        }
        fputc('\n', f);
    } else {
        int col = fprintf(f, "usage: ffn %s", s->cmd);
        for (int k = 0; s->pos && s->pos[k].name; k++)
            col += fprintf(f, s->pos[k].required ? " %s" : " [%s]", s->pos[k].name);
        fprintf(f, "%s\n", s->opts && s->opts->name ? " [options]" : "");
        (void)col;
    }
    if (s->about) fprintf(f, "\n%s", s->about);
    if (s->pos && s->pos[0].name) {
        int any = 0;
        for (int k = 0; s->pos[k].name; k++) any |= s->pos[k].help != NULL;
        if (any) fprintf(f, "\narguments:\n");
        for (int k = 0; any && s->pos[k].name; k++) {
            int col = fprintf(f, "  %s", s->pos[k].name);
            if (col >= HELP_COL) {
                fputc('\n', f);
                col = 0;
            }
            fprintf(f, "%*s", HELP_COL - col, "");
            wrap(f, s->pos[k].help ? s->pos[k].help : "", HELP_COL, HELP_COL);
        }
    }
    cli_help_options(f, s->opts, "options");
    fprintf(f, "  -h, --help%*s", HELP_COL - 12, "");
    wrap(f, "print this help and exit", HELP_COL, HELP_COL);
    if (s->epilog) fprintf(f, "\n%s", s->epilog);
}

double cli_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int64_t cli_peak_rss_bytes(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %lld kB", &kb) == 1) break;
    fclose(f);
    return kb < 0 ? -1 : (int64_t)kb * 1024;
}

char *cli_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        if (cap >= ((size_t)256 << 20)) {
            free(buf);
            buf = NULL;
            errno = EFBIG;
            break;
        }
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf) return NULL;
    if (bad) {
        free(buf);
        errno = EIO;
        return NULL;
    }
    buf[n < cap ? n : cap - 1] = '\0';
    *len = n;
    return buf;
}
