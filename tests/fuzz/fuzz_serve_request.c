/* fuzz_serve_request.c -- libFuzzer target for the request bodies of `ffn
 * serve` (tools/serve_request.c: JSON -> serve_req, every field checked)
 * and for its JSON text writer (tools/serve_json.c: serve_json_bytes).
 *
 * The first input byte picks the endpoint (which fields are accepted), the
 * rest is the body.  Beyond "does not crash" it traps when an accepted
 * request breaks what the handlers rely on:
 *   - "text" present iff given, NUL-free, its length recorded and within
 *     SERVE_MAX_TEXT_BYTES; "ids" within SERVE_MAX_TOKENIZE, each >= 0;
 *   - at most SERVE_MAX_EDITS edits, layer >= 0 and exactly one of neuron and
 *     feature >= 0 (the other -1), scale finite in
 *     [-100, 100], position >= -1; position and layer >= -1; k 0 or in
 *     [1, SERVE_MAX_K]; where text and ids are both accepted exactly one;
 *   - /api/edit: prompt, subject and target present, NUL-free and within
 *     their limits, the layer given, method -1/0/1, every option given
 *     finite and within [0, its bound];
 *   - a refused body leaves a non-empty message and nothing allocated;
 *   - serve_json_bytes of the body's bytes is one JSON string that the
 *     project's reader parses, into valid UTF-8;
 *   - serve_scrub_paths of the body (as a NUL-terminated message) never
 *     grows it, leaves no word starting with '/' that holds another '/'
 *     (an absolute path; /api/ and // words excepted), and is idempotent.
 * Built by `make fuzz`; with -DFFN_FUZZ_REPLAY it gets a main() that
 * replays files (tests/cli/test_fuzz_regress.sh). */
#include "../../tools/serve_request.c"
#include <math.h>
/* serve_json.c's serve_num writes through tools/cli.c's cli_json_num; the
 * harness links no part of cli.c, so it has this stand-in (same output for
 * the numbers a reply holds) */
const char *cli_json_num(double v, const char *fmt);
const char *cli_json_num(double v, const char *fmt) {
    static char b[40];
    if (!isfinite(v)) return "null";
    snprintf(b, sizeof b, fmt, v);
    return b;
}
#include "../../tools/serve_json.c"

#include <stdio.h>
#include <stdlib.h>

#define REQUIRE(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "fuzz_serve_request: invariant failed: %s (line %d)\n", #cond,     \
                    __LINE__);                                                                 \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

static const unsigned endpoint_fields[5] = {
    SERVE_F_TEXT,                                                             /* tokenize */
    SERVE_F_TEXT | SERVE_F_IDS | SERVE_F_EDITS | SERVE_F_K,                   /* predict */
    SERVE_F_TEXT | SERVE_F_IDS | SERVE_F_POSITION | SERVE_F_LAYER | SERVE_F_K, /* neurons */
    0,                                                                        /* info */
    SERVE_F_PROMPT | SERVE_F_SUBJECT | SERVE_F_TARGET | SERVE_F_LAYER | SERVE_F_METHOD |
        SERVE_F_OBJECT | SERVE_F_EDIT_OPTS};                                  /* edit */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const unsigned allowed = endpoint_fields[data[0] % 5];
    const char *body = (const char *)data + 1;
    const size_t n = size - 1;
    serve_req req;
    char err[1024] = "";
    if (serve_req_parse(body, n, allowed, &req, err, sizeof err)) {
        REQUIRE((req.given & ~allowed) == 0);
        REQUIRE(!!req.text == !!(req.given & SERVE_F_TEXT));
        if (req.text) {
            REQUIRE(strlen(req.text) == req.text_len);
            REQUIRE(req.text_len <= SERVE_MAX_TEXT_BYTES);
        }
        REQUIRE(req.n_ids >= 0 && req.n_ids <= SERVE_MAX_TOKENIZE);
        REQUIRE(req.n_ids == 0 || req.ids);
        for (int64_t i = 0; i < req.n_ids; i++) REQUIRE(req.ids[i] >= 0);
        REQUIRE(req.n_edits >= 0 && req.n_edits <= SERVE_MAX_EDITS);
        for (int64_t e = 0; e < req.n_edits; e++) {
            /* a neuron or a feature of the layer: exactly one given, the other -1 */
            REQUIRE(req.edits[e].layer >= 0);
            REQUIRE((req.edits[e].neuron >= 0) != (req.edits[e].feature >= 0));
            REQUIRE(req.edits[e].neuron >= -1 && req.edits[e].feature >= -1);
            REQUIRE(isfinite(req.edits[e].scale));
            REQUIRE(req.edits[e].scale >= -100.0 && req.edits[e].scale <= 100.0);
            REQUIRE(req.edits[e].position >= -1);
        }
        REQUIRE(req.position >= -1 && req.layer >= -1);
        REQUIRE(req.k == 0 || (req.k >= 1 && req.k <= SERVE_MAX_K));
        if ((allowed & SERVE_F_TEXT) && (allowed & SERVE_F_IDS))
            REQUIRE(!!(req.given & SERVE_F_TEXT) + !!(req.given & SERVE_F_IDS) == 1);
        else if (allowed & SERVE_F_TEXT)
            REQUIRE(req.given & SERVE_F_TEXT);
        if (allowed & SERVE_F_PROMPT) {
            REQUIRE(req.prompt && req.subject && req.target && (req.given & SERVE_F_LAYER));
            REQUIRE(strlen(req.prompt) >= 1 && strlen(req.prompt) <= SERVE_MAX_TEXT_BYTES);
            REQUIRE(strlen(req.subject) <= SERVE_MAX_WORD_BYTES);
            REQUIRE(strlen(req.target) <= SERVE_MAX_WORD_BYTES);
            REQUIRE(!req.object || (strlen(req.object) >= 1 && strlen(req.object) <= SERVE_MAX_WORD_BYTES));
        }
        REQUIRE(req.method >= -1 && req.method <= 1);
        REQUIRE((req.opt_given >> SERVE_N_EDIT_OPTS) == 0);
        for (int o = 0; o < SERVE_N_EDIT_OPTS; o++)
            if (req.opt_given & (1u << o)) REQUIRE(isfinite(req.opt[o]) && req.opt[o] >= 0);
        serve_req_free(&req);
    } else {
        REQUIRE(err[0] != '\0');
        REQUIRE(req.text == NULL && req.ids == NULL && req.prompt == NULL && req.subject == NULL);
    }
    /* the writer: any bytes become one JSON string of valid UTF-8 */
    char *out = NULL;
    size_t out_len = 0;
    FILE *f = open_memstream(&out, &out_len);
    REQUIRE(f != NULL);
    serve_json_bytes(f, body, n);
    fclose(f);
    ffn_json *doc = NULL;
    REQUIRE(ffn_json_parse(out, out_len, "fuzz", &doc) == FFN_OK);
    REQUIRE(ffn_json_type_of(ffn_json_root(doc)) == FFN_JSON_STRING);
    ffn_json_free(doc);
    free(out);
    /* the path scrubber of error replies */
    char *msg = malloc(n + 1), *again = malloc(n + 1);
    REQUIRE(msg && again);
    memcpy(msg, body, n);
    msg[n] = 0;
    const size_t before = strlen(msg);
    serve_scrub_paths(msg);
    REQUIRE(strlen(msg) <= before);
    for (const char *p = msg; *p; p++) {
        const int word = *p == '/' && (p == msg || strchr(" \t\n'\"(=:", p[-1])) && p[1] != '/' &&
                         strncmp(p, "/api/", 5);
        if (!word) continue;
        const char *e = p + 1;
        while (*e && !strchr(" \t\n'\"),;:", *e)) e++;
        const char *slash = memchr(p + 1, '/', (size_t)(e - p - 1));
        REQUIRE(!slash || slash == e - 1 || e == p + 1); /* at most a trailing slash */
    }
    memcpy(again, msg, strlen(msg) + 1);
    serve_scrub_paths(again);
    REQUIRE(!strcmp(again, msg));
    free(msg);
    free(again);
    return 0;
}

#include "replay.h"
FFN_FUZZ_REPLAY_MAIN("fuzz_serve_request")
