/* cli.h -- helpers shared by the subcommands of the `ffn` command.
 * Conventions: data on stdout, diagnostics on stderr, --help on every
 * subcommand (exit 0), exit 1 on a failure, exit 2 on bad usage. */
#ifndef FFN_CLI_H
#define FFN_CLI_H

#include "ffn.h"

#include <stdint.h>
#include <stdio.h>

#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

/* Print "ffn <cmd>: <message>\n" on stderr. */
void cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print "ffn <cmd>: <ffn_last_error() or status string>\n" and return CLI_EXIT_FAIL. */
int cli_fail(const char *cmd, ffn_status st);

/* Strict number parsing for flags: the whole string must be a number in
 * [lo, hi].  On failure print "ffn <cmd>: --flag: expected ..., got '...'"
 * and return 0; return 1 on success. */
int cli_parse_i64(const char *cmd, const char *flag, const char *s, int64_t lo, int64_t hi,
                  int64_t *out);
int cli_parse_f64(const char *cmd, const char *flag, const char *s, double lo, double hi,
                  double *out);

/* For `--flag value` loops: if argv[*i] equals `flag`, set *value to the
 * next argument (advancing *i) and return 1; if the value is missing print
 * an error and return -1; return 0 when argv[*i] is another flag.  Also
 * accepts --flag=value. */
int cli_flag(const char *cmd, int argc, char **argv, int *i, const char *flag,
             const char **value);

/* 1 when stderr is a terminal (progress lines are drawn only then). */
int cli_progress_tty(void);

/* Threads from --threads (0 = FFN_NUM_THREADS or all cores). */
int cli_make_ctx(const char *cmd, int threads, ffn_ctx **ctx);

/* Write s as a JSON string literal (quotes, escapes) to f. */
void cli_json_string(FILE *f, const char *s);

#endif
