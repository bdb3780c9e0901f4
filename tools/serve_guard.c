/* serve_guard.c -- who may drive `ffn serve`: every request's Host, and for
 * /api/ its token, its Origin / Sec-Fetch-Site and (for anything but GET
 * and HEAD) its Content-Type, checked from the headers alone before a body
 * is read (serve.h, serve_guard_check).
 *
 *   Host            the bound address as given or as numbers, localhost,
 *                   127.0.0.1 or [::1] (any IP literal when bound to a
 *                   wildcard address), with no port or the bound port;
 *                   anything else is 421 (a DNS-rebinding name), none 400
 *   token           /api/ needs the launch's token: the cookie the page
 *                   got at GET /?token=T (HttpOnly, SameSite=Strict), or
 *                   "Authorization: token T", or "X-FFN-Token: T"; compared
 *                   in constant time; 401 without it
 *   Sec-Fetch-Site  when sent, "same-origin" (403 otherwise)
 *   Origin          when sent, http://<Host> (403 otherwise); a POST needs
 *                   it or Sec-Fetch-Site: same-origin
 *   Content-Type    a POST's is application/json (415 otherwise): a
 *                   cross-site form or no-cors fetch cannot send it
 *                   without a CORS preflight, which is never granted
 * Only libc: tests/fuzz/fuzz_serve_guard.c links this file alone. */
#include "serve.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <string.h>
#include <strings.h>

static int refuse(char *err, size_t n, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int refuse(char *err, size_t n, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return status;
}

int serve_guard_token_eq(const serve_guard *g, const char *s, size_t n) {
    /* every byte of the token is compared whatever the input: the time
     * depends on nothing but the token's length, which is public */
    volatile unsigned char d = (unsigned char)(n != SERVE_TOKEN_HEX);
    for (size_t i = 0; i < SERVE_TOKEN_HEX; i++)
        d |= (unsigned char)((unsigned char)(i < n ? s[i] : 0) ^ (unsigned char)g->token[i]);
    return d == 0;
}

/* "name[:port]" or "[v6][:port]" of n bytes -> name (lowercase, brackets
 * kept) and port (0 when absent).  0 when malformed. */
static int split_host(const char *s, size_t n, char *name, size_t cap, unsigned *port) {
    size_t end;
    *port = 0;
    if (n && s[0] == '[') {
        const char *rb = memchr(s, ']', n);
        if (!rb) return 0;
        end = (size_t)(rb - s) + 1;
    } else {
        const char *colon = memchr(s, ':', n);
        end = colon ? (size_t)(colon - s) : n;
    }
    if (end == 0 || end >= cap) return 0;
    for (size_t i = 0; i < end; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch <= ' ' || ch >= 0x7f || ch == '/' || ch == '@' || ch == '\\') return 0;
        name[i] = (char)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
    }
    name[end] = 0;
    if (end == n) return 1;
    if (s[end] != ':' || end + 1 == n || n - end - 1 > 5 || s[end + 1] == '0') return 0;
    unsigned p = 0;
    for (size_t i = end + 1; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        p = p * 10 + (unsigned)(s[i] - '0');
    }
    if (p == 0 || p > 65535) return 0;
    *port = p;
    return 1;
}

static int ip_literal(const char *name) {
    unsigned char buf[16];
    size_t n = strlen(name);
    if (inet_pton(AF_INET, name, buf) == 1) return 1;
    if (n > 2 && name[0] == '[' && name[n - 1] == ']' && n - 2 < 64) {
        char v6[64];
        memcpy(v6, name + 1, n - 2);
        v6[n - 2] = 0;
        return inet_pton(AF_INET6, v6, buf) == 1;
    }
    return 0;
}

int serve_guard_host_ok(const serve_guard *g, const char *host, char *name, size_t cap,
                        unsigned *port) {
    if (!split_host(host, strlen(host), name, cap, port)) return 0;
    if (*port && *port != g->port) return 0;
    for (int i = 0; i < g->n_hosts; i++)
        if (!strcmp(name, g->hosts[i])) return 1;
    return g->any_ip && ip_literal(name);
}

/* The value of cookie `name` in a Cookie header ("a=1; b=2"), or NULL. */
static const char *cookie_value(const char *cookies, const char *name, size_t *len) {
    const size_t nl = strlen(name);
    const char *p = cookies;
    while (p && *p) {
        while (*p == ' ' || *p == ';') p++;
        const char *semi = strchr(p, ';');
        const size_t n = semi ? (size_t)(semi - p) : strlen(p);
        if (n > nl && !strncmp(p, name, nl) && p[nl] == '=') {
            *len = n - nl - 1;
            return p + nl + 1;
        }
        p = semi;
    }
    return NULL;
}

int serve_guard_has_token(const serve_guard *g, const serve_headers *h) {
    int ok = 0;
    size_t n = 0;
    const char *v;
    if (h->authorization) {
        v = h->authorization;
        if (!strncasecmp(v, "token ", 6)) v += 6;
        else if (!strncasecmp(v, "bearer ", 7)) v += 7;
        else v = NULL;
        if (v) ok |= serve_guard_token_eq(g, v, strlen(v));
    }
    if (h->x_token) ok |= serve_guard_token_eq(g, h->x_token, strlen(h->x_token));
    if (h->cookie && (v = cookie_value(h->cookie, g->cookie_name, &n)))
        ok |= serve_guard_token_eq(g, v, n);
    return ok;
}

static int is_json_type(const char *ct) {
    static const char want[] = "application/json";
    const size_t n = sizeof want - 1;
    while (*ct == ' ' || *ct == '\t') ct++;
    if (strncasecmp(ct, want, n)) return 0;
    ct += n;
    while (*ct == ' ' || *ct == '\t') ct++;
    return *ct == 0 || *ct == ';';
}

int serve_guard_check(const serve_guard *g, const char *method, const char *url,
                      const serve_headers *h, char *err, size_t n) {
    char name[300], oname[300];
    unsigned port = 0, oport = 0;
    if (!h->host || !h->host[0])
        return refuse(err, n, 400, "missing Host header");
    if (!serve_guard_host_ok(g, h->host, name, sizeof name, &port))
        return refuse(err, n, 421, "Host '%.100s' is not this server's address (%s:%u, localhost, "
                      "127.0.0.1 or [::1])", h->host, g->hosts[0], g->port);
    if (strncmp(url, "/api/", 5)) return 0; /* the page's files: the Host is enough */
    if (!serve_guard_has_token(g, h))
        return refuse(err, n, 401, "missing or wrong token: open the URL ffn serve printed (it "
                      "ends in ?token=...), or send the header \"Authorization: token T\"");
    if (h->sec_fetch_site && strcmp(h->sec_fetch_site, "same-origin"))
        return refuse(err, n, 403, "Sec-Fetch-Site: %.40s: only the page of this server may call "
                      "the API", h->sec_fetch_site);
    if (h->origin) {
        static const char scheme[] = "http://";
        const size_t sl = sizeof scheme - 1;
        const int same = !strncasecmp(h->origin, scheme, sl) &&
                         split_host(h->origin + sl, strlen(h->origin + sl), oname, sizeof oname,
                                    &oport) &&
                         !strcmp(oname, name) && (oport ? oport : 80) == (port ? port : 80);
        if (!same)
            return refuse(err, n, 403, "Origin '%.100s' is not this server (http://%.100s): only "
                          "the page of this server may call the API", h->origin, h->host);
    }
    if (!strcmp(method, "GET") || !strcmp(method, "HEAD")) return 0;
    if (!h->origin && !(h->sec_fetch_site && !strcmp(h->sec_fetch_site, "same-origin")))
        return refuse(err, n, 403, "%s %.100s needs an Origin header (http://%.100s) or "
                      "Sec-Fetch-Site: same-origin", method, url, h->host);
    if (!h->content_type || !is_json_type(h->content_type))
        return refuse(err, n, 415, "Content-Type '%.60s': %s %.100s takes application/json",
                      h->content_type ? h->content_type : "(none)", method, url);
    return 0;
}
