/* agree_text.h -- the agreement message of libffn_dist: the text every
 * rank sends at the start of a job (ffn_dist_init) so that ranks started
 * with different options stop together, the option and both values named.
 * Internal; pure C (no MPI), so the fuzz target links it alone.
 *
 * The text is lines "KEY=VALUE\n": KEY non-empty, without '=', '\n' or NUL;
 * VALUE anything but '\n' and NUL (writers escape those); every line ends
 * with '\n'; at most DIST_AGREE_MAX_BYTES bytes.  Two texts are compared
 * line by line, in order (every rank runs the same ffn, so the same keys
 * come in the same order; the version is the first line). */
#ifndef FFN_DIST_AGREE_TEXT_H
#define FFN_DIST_AGREE_TEXT_H

#include <stddef.h>

#define DIST_AGREE_MAX_BYTES 65536

typedef struct dist_agree_line {
    const char *key, *val; /* NULL when the text has no line here */
    size_t key_len, val_len;
} dist_agree_line;

typedef struct dist_agree_diff {
    int line;              /* 1-based: the first line that differs (or is malformed) */
    dist_agree_line a, b;  /* that line of each text */
} dist_agree_diff;

/* 0 when the text is well formed; otherwise -1 and *line the 1-based line
 * at fault (line 0: too long). */
int dist_agree_check(const char *text, size_t n, int *line);

/* 0: the texts are the same; 1: they differ (d says where); -1: a is
 * malformed, -2: b is malformed (d->line says where). */
int dist_agree_compare(const char *a, size_t na, const char *b, size_t nb, dist_agree_diff *d);

/* One line for a difference found by dist_agree_compare (result 1):
 *   "KEY: rank RA has VA, rank RB has VB"
 *   "KEY: rank RA has VA, rank RB has no such line" (and the other way)
 *   "line L: rank RA has KEY_A=VA, rank RB has KEY_B=VB" (other keys)
 * Control bytes and bytes >= 0x7f are written as \xNN; a value is cut at
 * 160 bytes ("..." after).  Always NUL-terminated (n > 0). */
void dist_agree_message(const dist_agree_diff *d, int ra, int rb, char *buf, size_t n);

#endif /* FFN_DIST_AGREE_TEXT_H */
