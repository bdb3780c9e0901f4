/* serve_http.c -- the HTTP side of `ffn serve`, on libmicrohttpd (which
 * parses HTTP; nothing here does): a request is routed by exact method and
 * path to the endpoint table (serve_api.c) or to one of the embedded static
 * assets (a fixed list of names; no client path ever reaches the file
 * system).  A body is collected up to SERVE_MAX_BODY bytes: a larger
 * Content-Length is refused before the body is read (413), a larger
 * chunked body is discarded as it arrives and refused at its end.  Every
 * reply is JSON except the assets; every error is {"error", "status"}. */
#include "serve.h"

#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>

/* the page's assets, embedded by tools/report/embed.c */
typedef struct report_asset {
    const char *name, *text;
    size_t size;
} report_asset;
extern const report_asset report_assets[];
extern const size_t report_n_assets;

static const struct {
    const char *url, *asset, *type;
} static_files[] = {
    {"/", "live.html", "text/html; charset=utf-8"},
    {"/live.js", "live.js", "text/javascript; charset=utf-8"},
    {"/live.css", "live.css", "text/css; charset=utf-8"},
    {"/report.css", "report.css", "text/css; charset=utf-8"},
    {"/format.js", "format.js", "text/javascript; charset=utf-8"},
};

/* Nothing loads from elsewhere, and the page talks only to this server. */
#define SERVE_CSP "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " \
                  "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

typedef struct serve_conn {
    char *body;
    size_t len, cap;
    int too_large;
} serve_conn;

static enum MHD_Result send_bytes(struct MHD_Connection *c, unsigned status, const char *type,
                                  const char *data, size_t n, enum MHD_ResponseMemoryMode mode) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(n, (void *)data, mode);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", type);
    MHD_add_response_header(resp, "Content-Security-Policy", SERVE_CSP);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Cache-Control", "no-store");
    enum MHD_Result ret = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *msg) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) return MHD_NO;
    fputs("{\"error\":", f);
    serve_json_str(f, msg);
    fprintf(f, ",\"status\":%u}\n", status);
    fclose(f);
    return send_bytes(c, status, "application/json", buf, n, MHD_RESPMEM_MUST_FREE);
}

static const report_asset *asset_named(const char *name) {
    for (size_t i = 0; i < report_n_assets; i++)
        if (!strcmp(report_assets[i].name, name)) return &report_assets[i];
    return NULL;
}

static enum MHD_Result route(serve_state *s, struct MHD_Connection *c, const char *url,
                             const char *method, const serve_conn *sc) {
    for (size_t i = 0; i < sizeof static_files / sizeof static_files[0]; i++) {
        if (strcmp(url, static_files[i].url)) continue;
        if (strcmp(method, "GET") && strcmp(method, "HEAD"))
            return send_error(c, 405, "method not allowed: the page's files are read with GET");
        const report_asset *a = asset_named(static_files[i].asset);
        if (!a) return send_error(c, 500, "this build does not embed the page's files");
        return send_bytes(c, 200, static_files[i].type, a->text, a->size, MHD_RESPMEM_PERSISTENT);
    }
    const serve_endpoint *ep = NULL;
    for (size_t i = 0; i < serve_n_endpoints; i++)
        if (!strcmp(url, serve_endpoints[i].path)) ep = &serve_endpoints[i];
    if (!ep) {
        char msg[256];
        snprintf(msg, sizeof msg, "unknown endpoint %.100s (GET /api/info lists them)", url);
        return send_error(c, 404, msg);
    }
    if (strcmp(method, ep->method)) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s takes %s, not %.16s", ep->path, ep->method, method);
        return send_error(c, 405, msg);
    }
    if (sc->too_large) {
        char msg[160];
        snprintf(msg, sizeof msg, "request body larger than %d bytes", SERVE_MAX_BODY);
        return send_error(c, 413, msg);
    }
    serve_req req;
    serve_reply r = {0};
    if (!serve_req_parse(sc->body, sc->len, ep->fields, &req, r.err, sizeof r.err))
        return send_error(c, 400, r.err);
    char *buf = NULL;
    size_t n = 0;
    r.out = open_memstream(&buf, &n);
    if (!r.out) {
        serve_req_free(&req);
        return send_error(c, 500, "out of memory");
    }
    int status = ep->fn(s, &req, &r);
    fclose(r.out);
    serve_req_free(&req);
    if (status != 200) {
        free(buf);
        return send_error(c, (unsigned)status, r.err[0] ? r.err : "failed");
    }
    return send_bytes(c, 200, "application/json", buf, n, MHD_RESPMEM_MUST_FREE);
}

enum MHD_Result serve_on_request(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls);
enum MHD_Result serve_on_request(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls) {
    (void)version;
    serve_conn *sc = *con_cls;
    if (!sc) { /* the headers are in: refuse an announced oversized body before reading it */
        sc = calloc(1, sizeof *sc);
        if (!sc) return MHD_NO;
        *con_cls = sc;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl) {
            char *end;
            unsigned long long v = strtoull(cl, &end, 10);
            if (end != cl && v > SERVE_MAX_BODY) {
                sc->too_large = 1;
                char msg[160];
                snprintf(msg, sizeof msg, "request body of %llu bytes, at most %d", v,
                         SERVE_MAX_BODY);
                return send_error(c, 413, msg);
            }
        }
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (sc->too_large || sc->len + n > SERVE_MAX_BODY) {
            sc->too_large = 1; /* keep reading (and dropping) to the end, then refuse */
            free(sc->body);
            sc->body = NULL;
            sc->len = sc->cap = 0;
            return MHD_YES;
        }
        if (sc->len + n > sc->cap) {
            size_t cap = sc->cap ? sc->cap : 4096;
            while (cap < sc->len + n) cap *= 2;
            char *nb = realloc(sc->body, cap);
            if (!nb) return MHD_NO;
            sc->body = nb, sc->cap = cap;
        }
        memcpy(sc->body + sc->len, upload, n);
        sc->len += n;
        return MHD_YES;
    }
    return route(cls, c, url, method, sc);
}

void serve_on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                        enum MHD_RequestTerminationCode toe);
void serve_on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                        enum MHD_RequestTerminationCode toe) {
    (void)cls, (void)c, (void)toe;
    serve_conn *sc = *con_cls;
    if (sc) free(sc->body);
    free(sc);
    *con_cls = NULL;
}
