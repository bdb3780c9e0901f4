/* agree_text.c -- the agreement message's reader and comparison (see
 * agree_text.h).  No MPI here: dist.c exchanges the texts. */
#include "dist/agree_text.h"

#include <stdio.h>
#include <string.h>

/* The line starting at text[*pos]: 1 and the line (pos advanced past its
 * '\n'), 0 at the end of the text, -1 when it is malformed. */
static int next_line(const char *text, size_t n, size_t *pos, dist_agree_line *l) {
    l->key = l->val = NULL;
    l->key_len = l->val_len = 0;
    if (*pos >= n) return 0;
    const char *s = text + *pos;
    const char *nl = memchr(s, '\n', n - *pos);
    if (!nl) return -1; /* the last line has no '\n' */
    const size_t len = (size_t)(nl - s);
    if (memchr(s, '\0', len)) return -1;
    const char *eq = memchr(s, '=', len);
    if (!eq || eq == s) return -1; /* no '=' or an empty key */
    l->key = s;
    l->key_len = (size_t)(eq - s);
    l->val = eq + 1;
    l->val_len = len - l->key_len - 1;
    *pos += len + 1;
    return 1;
}

int dist_agree_check(const char *text, size_t n, int *line) {
    *line = 0;
    if (n > DIST_AGREE_MAX_BYTES || (n && !text)) return -1;
    size_t pos = 0;
    dist_agree_line l;
    for (int k = 1;; k++) {
        int r = next_line(text, n, &pos, &l);
        if (r == 0) return 0;
        if (r < 0) {
            *line = k;
            return -1;
        }
    }
}

static int same(const char *a, size_t na, const char *b, size_t nb) {
    return na == nb && (na == 0 || memcmp(a, b, na) == 0);
}

int dist_agree_compare(const char *a, size_t na, const char *b, size_t nb, dist_agree_diff *d) {
    memset(d, 0, sizeof *d);
    int line;
    if (dist_agree_check(a, na, &line)) {
        d->line = line;
        return -1;
    }
    if (dist_agree_check(b, nb, &line)) {
        d->line = line;
        return -2;
    }
    size_t pa = 0, pb = 0;
    for (int k = 1;; k++) {
        int ra = next_line(a, na, &pa, &d->a), rb = next_line(b, nb, &pb, &d->b);
        d->line = k;
        if (ra == 0 && rb == 0) {
            memset(d, 0, sizeof *d);
            return 0;
        }
        if (ra == 0 || rb == 0 || !same(d->a.key, d->a.key_len, d->b.key, d->b.key_len) ||
            !same(d->a.val, d->a.val_len, d->b.val, d->b.val_len))
            return 1;
    }
}

/* Append s[0..len) escaped, at most `cap` source bytes, to buf at *at. */
static void put_escaped(char *buf, size_t n, size_t *at, const char *s, size_t len, size_t cap) {
    for (size_t i = 0; i < len && i < cap && *at + 5 < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c >= 0x7f || c == '\\')
            *at += (size_t)snprintf(buf + *at, n - *at, c == '\\' ? "\\\\" : "\\x%02x", c);
        else
            buf[(*at)++] = (char)c;
    }
    if (len > cap && *at + 4 < n) {
        memcpy(buf + *at, "...", 3);
        *at += 3;
    }
    buf[*at < n ? *at : n - 1] = '\0';
}

static void put(char *buf, size_t n, size_t *at, const char *fmt, int v) {
    if (*at + 1 >= n) return;
    int w = snprintf(buf + *at, n - *at, fmt, v);
    if (w > 0) *at = *at + (size_t)w < n ? *at + (size_t)w : n - 1;
}

static void put_str(char *buf, size_t n, size_t *at, const char *s) {
    put_escaped(buf, n, at, s, strlen(s), (size_t)-1);
}

/* "rank R has VALUE" (or "no such line" when the text ended) */
static void put_side(char *buf, size_t n, size_t *at, int r, const dist_agree_line *l,
                     int with_key, size_t cap) {
    put(buf, n, at, "rank %d has ", r);
    if (!l->key) {
        put_str(buf, n, at, "no such line");
        return;
    }
    if (with_key) {
        put_escaped(buf, n, at, l->key, l->key_len, cap);
        put_str(buf, n, at, "=");
    }
    put_escaped(buf, n, at, l->val, l->val_len, cap);
}

void dist_agree_message(const dist_agree_diff *d, int ra, int rb, char *buf, size_t n) {
    if (!n) return;
    buf[0] = '\0';
    size_t at = 0;
    const size_t cap = 160;
    const dist_agree_line *a = &d->a, *b = &d->b;
    const int other_keys = a->key && b->key && !same(a->key, a->key_len, b->key, b->key_len);
    if (other_keys) {
        put(buf, n, &at, "line %d: ", d->line);
    } else {
        const dist_agree_line *k = a->key ? a : b;
        if (!k->key) return; /* not a difference */
        put_escaped(buf, n, &at, k->key, k->key_len, cap);
        put_str(buf, n, &at, ": ");
    }
    put_side(buf, n, &at, ra, a, other_keys, cap);
    put_str(buf, n, &at, ", ");
    put_side(buf, n, &at, rb, b, other_keys, cap);
}
