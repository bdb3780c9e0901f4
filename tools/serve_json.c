/* serve_json.c -- the small JSON writers of `ffn serve` (text that may hold
 * any bytes, numbers) and the error reply of a handler.  Only libc: the
 * fuzz target tests/fuzz/fuzz_serve_request.c links this file alone. */
#include "serve.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

int serve_err(serve_reply *r, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    return status;
}

/* ---- JSON text ----------------------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 when invalid. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3
                 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (!len || len > n) return 0;
    for (size_t k = 1; k < len; k++)
        if ((s[k] & 0xC0) != 0x80) return 0;
    if (len == 2 && c < 0xC2) return 0; /* overlong */
    if (len == 3) {
        unsigned cp = ((c & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu);
        if (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    }
    if (len == 4) {
        unsigned cp = ((c & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) |
                      (s[3] & 0x3Fu);
        if (cp < 0x10000 || cp > 0x10FFFF) return 0;
    }
    return len;
}

void serve_json_bytes(FILE *f, const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        size_t len = utf8_len(s + i, n - i);
        if (!len || s[i] == 0) { /* NUL too: JSON readers (ours included) refuse \u0000 */
            fprintf(f, "<0x%02X>", s[i]);
            i++;
            continue;
        }
        unsigned c = s[i];
        if (len > 1) fwrite(s + i, 1, len, f);
        else if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c < 0x20 || c == 0x7F) fprintf(f, "\\u%04x", c);
        else fputc((int)c, f);
        i += len;
    }
    fputc('"', f);
}

void serve_json_str(FILE *f, const char *s) { serve_json_bytes(f, s, strlen(s)); }

void serve_json_num(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, "%.9g", v);
    else fputs("null", f);
}

const char *serve_num(double v) { return cli_json_num(v, "%.9g"); }


/* ---- no paths in replies ------------------------------------------------------------------- */

static int path_end(char c) {
    return c == 0 || c == ' ' || c == '\t' || c == '\n' || c == '\'' || c == '"' || c == ')' ||
           c == ',' || c == ';' || c == ':';
}

void serve_scrub_paths(char *msg) {
    char *w = msg;
    for (const char *r = msg; *r;) {
        const int starts = *r == '/' && (r == msg || strchr(" \t\n'\"(=:", r[-1])) &&
                           r[1] != '/' && strncmp(r, "/api/", 5) && !path_end(r[1]);
        if (!starts) {
            *w++ = *r++;
            continue;
        }
        const char *e = r;
        while (!path_end(*e)) e++;
        const char *base = r; /* the last component that is not empty */
        for (const char *p = r; p + 1 < e; p++)
            if (*p == '/' && p[1] != '/') base = p + 1;
        while (base < e) *w++ = *base++;
        r = e;
    }
    *w = 0;
}

void serve_base_name(const char *path, char *out, size_t cap) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && path[b - 1] != '/') b--;
    snprintf(out, cap, "%.*s", (int)(n - b), path + b);
    if (!out[0]) snprintf(out, cap, "%s", n ? "/" : "");
}

void serve_json_str_scrubbed(FILE *f, const char *s) {
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", s);
    serve_scrub_paths(buf);
    serve_json_str(f, buf);
}
