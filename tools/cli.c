/* cli.c -- shared flag parsing and error printing for the subcommands. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cli_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "ffn %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int cli_fail(const char *cmd, ffn_status st) {
    const char *msg = ffn_last_error();
    cli_error(cmd, "%s", (msg && *msg) ? msg : ffn_status_str(st));
    return CLI_EXIT_FAIL;
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

int cli_progress_tty(void) { return isatty(2); }

int cli_make_ctx(const char *cmd, int threads, ffn_ctx **ctx) {
    ffn_status st = ffn_ctx_create(threads, ctx);
    if (st != FFN_OK) return cli_fail(cmd, st);
    return 0;
}

void cli_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\t': fputs("\\t", f); break;
        case '\r': fputs("\\r", f); break;
        default:
            if (*p < 0x20) fprintf(f, "\\u%04x", *p);
            else fputc(*p, f);
        }
    }
    fputc('"', f);
}
