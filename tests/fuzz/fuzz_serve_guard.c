/* fuzz_serve_guard.c -- libFuzzer target for the request gate of `ffn
 * serve` (tools/serve_guard.c): the Host, token, Origin, Sec-Fetch-Site and
 * Content-Type checks every request passes before its body is read.
 *
 * Input: byte 0 says which headers are present (bit i: header i of
 * host, origin, sec-fetch-site, content-type, authorization, x-ffn-token,
 * cookie) and bit 7 whether the server is bound to a wildcard address;
 * then newline-separated fields: method, url, and the seven header values.
 * The guard is that of a server on 127.0.0.1:8080 with a fixed token.
 * Beyond "does not crash" it traps when
 *   - the status is not one of 0, 400, 401, 403, 415, 421, or a refusal
 *     has no message;
 *   - an accepted request has a Host other than an accepted name (with no
 *     port or :8080), checked here independently;
 *   - an accepted /api/ request lacks the token in one of its three
 *     places, has a Sec-Fetch-Site other than same-origin, an Origin
 *     other than http://<an accepted name>[:8080]; or, for a method other
 *     than GET/HEAD, neither Origin nor Sec-Fetch-Site, or a Content-Type
 *     that is not application/json;
 *   - the token comparison disagrees with memcmp on any input.
 * Built by `make fuzz`; with -DFFN_FUZZ_REPLAY it gets a main() that
 * replays files (tests/cli/test_fuzz_regress.sh). */
#include "../../tools/serve_guard.c"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

#define REQUIRE(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "fuzz_serve_guard: invariant failed: %s (line %d)\n", #cond,       \
                    __LINE__);                                                                 \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

static const char TOKEN[] = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

/* lowercase copy of s */
static void lower(const char *s, char *out, size_t cap) {
    size_t i = 0;
    for (; s[i] && i + 1 < cap; i++) out[i] = (char)tolower((unsigned char)s[i]);
    out[i] = 0;
}

/* s is NAME, NAME:8080 for an accepted name (any IP literal with wildcard) */
static int host_like(const char *s, int any_ip) {
    static const char *const names[] = {"127.0.0.1", "localhost", "[::1]"};
    char l[400];
    lower(s, l, sizeof l);
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(names[i]);
        if (!strncmp(l, names[i], n) && (!l[n] || !strcmp(l + n, ":8080"))) return 1;
    }
    if (!any_ip) return 0;
    char name[400];
    snprintf(name, sizeof name, "%s", l);
    char *colon = name[0] == '[' ? strchr(name, ']') : strchr(name, ':');
    if (colon && name[0] == '[') colon = colon[1] == ':' ? colon + 1 : NULL;
    if (colon) {
        if (strcmp(colon, ":8080")) return 0;
        *colon = 0;
    }
    return ip_literal(name);
}

static int contains_token(const char *s, size_t n) { /* s is exactly TOKEN */
    return n == SERVE_TOKEN_HEX && !memcmp(s, TOKEN, SERVE_TOKEN_HEX);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    serve_guard g;
    memset(&g, 0, sizeof g);
    memcpy(g.token, TOKEN, sizeof TOKEN);
    snprintf(g.cookie_name, sizeof g.cookie_name, "ffn_token_8080");
    snprintf(g.hosts[0], sizeof g.hosts[0], "127.0.0.1");
    snprintf(g.hosts[1], sizeof g.hosts[1], "localhost");
    snprintf(g.hosts[2], sizeof g.hosts[2], "[::1]");
    g.n_hosts = 3;
    g.port = 8080;
    g.any_ip = data[0] >> 7;
    const unsigned present = data[0];

    /* the fields, NUL-terminated copies */
    char *copy = malloc(size);
    REQUIRE(copy != NULL);
    memcpy(copy, data + 1, size - 1);
    copy[size - 1] = 0;
    const char *field[9] = {"GET", "/api/info", 0, 0, 0, 0, 0, 0, 0};
    char *p = copy;
    for (int i = 0; i < 9 && p; i++) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = 0;
        field[i] = p;
        p = nl ? nl + 1 : NULL;
    }
    const char *method = field[0], *url = field[1];
    const char *hv[7];
    for (int i = 0; i < 7; i++) hv[i] = (present >> i) & 1 ? (field[2 + i] ? field[2 + i] : "") : NULL;
    serve_headers h = {.host = hv[0], .origin = hv[1], .sec_fetch_site = hv[2],
                       .content_type = hv[3], .authorization = hv[4], .x_token = hv[5],
                       .cookie = hv[6]};
    char err[512] = "";
    const int st = serve_guard_check(&g, method, url, &h, err, sizeof err);
    REQUIRE(st == 0 || st == 400 || st == 401 || st == 403 || st == 415 || st == 421);
    if (st) REQUIRE(err[0] != 0);
    if (st == 0) {
        REQUIRE(h.host && host_like(h.host, g.any_ip));
        if (!strncmp(url, "/api/", 5)) {
            int tok = 0;
            if (h.x_token) tok |= contains_token(h.x_token, strlen(h.x_token));
            if (h.authorization && strlen(h.authorization) > 6 &&
                !strncasecmp(h.authorization, "token ", 6))
                tok |= contains_token(h.authorization + 6, strlen(h.authorization + 6));
            if (h.authorization && strlen(h.authorization) > 7 &&
                !strncasecmp(h.authorization, "bearer ", 7))
                tok |= contains_token(h.authorization + 7, strlen(h.authorization + 7));
            if (h.cookie) {
                const char *c = strstr(h.cookie, "ffn_token_8080=");
                while (c && !tok) {
                    const char *v = c + strlen("ffn_token_8080=");
                    const char *semi = strchr(v, ';');
                    tok |= contains_token(v, semi ? (size_t)(semi - v) : strlen(v));
                    c = strstr(c + 1, "ffn_token_8080=");
                }
            }
            REQUIRE(tok);
            REQUIRE(!h.sec_fetch_site || !strcmp(h.sec_fetch_site, "same-origin"));
            if (h.origin) {
                REQUIRE(!strncasecmp(h.origin, "http://", 7));
                REQUIRE(host_like(h.origin + 7, g.any_ip));
            }
            if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
                REQUIRE(h.origin || (h.sec_fetch_site && !strcmp(h.sec_fetch_site, "same-origin")));
                char ct[400];
                REQUIRE(h.content_type);
                lower(h.content_type, ct, sizeof ct);
                REQUIRE(strstr(ct, "application/json") != NULL);
            }
        }
    }
    /* the comparison: equal to memcmp on the whole input */
    const size_t n = size - 1;
    REQUIRE(serve_guard_token_eq(&g, (const char *)data + 1, n) ==
            (n == SERVE_TOKEN_HEX && !memcmp(data + 1, TOKEN, SERVE_TOKEN_HEX)));
    free(copy);
    return 0;
}

#include "replay.h"
FFN_FUZZ_REPLAY_MAIN("fuzz_serve_guard")
