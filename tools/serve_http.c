/* serve_http.c -- the HTTP side of `ffn serve`, on libmicrohttpd (which
 * parses HTTP; nothing here does): a request is routed by exact method and
 * path to the endpoint table (serve_api.c) or to one of the embedded static
 * assets (a fixed list of names; no client path ever reaches the file
 * system).  A body is collected up to SERVE_MAX_BODY bytes: a larger
 * Content-Length is refused before the body is read (413), a larger
 * chunked body is discarded as it arrives and refused at its end.  Before
 * that, when the headers are in, serve_guard_check (serve_guard.c) decides
 * whether the request may be served at all (Host, token, Origin, Content-
 * Type); GET /?token=T with the launch's token sets the page's cookie and
 * redirects to / (the token leaves the address bar and history).  Every
 * reply is JSON except the assets and that redirect; every error is
 * {"error", "status"}, its paths cut to their last component. */
#include "serve.h"
#include "report_assets.h"

#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>


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
    int refused;  /* a reply was queued when the headers came in: the body is dropped */
} serve_conn;

/* ---- slow connections ------------------------------------------------------------------ */

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static serve_conn_entry *entry_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? (serve_conn_entry *)i->socket_context : NULL;
}

static void mark(serve_state *s, struct MHD_Connection *c, int busy) {
    serve_conn_entry *e = entry_of(c);
    if (!e) return;
    pthread_mutex_lock(&s->conns.lock);
    e->busy = busy;
    if (!busy) e->since = now_s();
    pthread_mutex_unlock(&s->conns.lock);
}

void serve_on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                         enum MHD_ConnectionNotificationCode code);
void serve_on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                         enum MHD_ConnectionNotificationCode code) {
    serve_state *s = cls;
    serve_conns *cs = &s->conns;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *i =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        serve_conn_entry *e = i ? calloc(1, sizeof *e) : NULL;
        *socket_context = e;
        if (!e) return; /* not watched: the inactivity timeout still holds */
        e->fd = i->connect_fd;
        e->since = now_s();
        pthread_mutex_lock(&cs->lock);
        e->next = cs->head;
        if (cs->head) cs->head->prev = e;
        cs->head = e;
        pthread_mutex_unlock(&cs->lock);
        return;
    }
    /* closed: libmicrohttpd calls this before it closes the socket, so the
     * reaper (which holds the lock while it shuts sockets down) never
     * touches a descriptor that was closed or reused */
    serve_conn_entry *e = *socket_context;
    if (!e) return;
    pthread_mutex_lock(&cs->lock);
    if (e->prev) e->prev->next = e->next;
    else cs->head = e->next;
    if (e->next) e->next->prev = e->prev;
    pthread_mutex_unlock(&cs->lock);
    free(e);
    *socket_context = NULL;
}

static void *reaper(void *arg) {
    serve_state *s = arg;
    serve_conns *cs = &s->conns;
    pthread_mutex_lock(&cs->lock);
    while (!cs->stop) {
        const double t = now_s();
        for (serve_conn_entry *e = cs->head; e; e = e->next)
            if (!e->busy && e->fd >= 0 && t - e->since > cs->deadline) {
                shutdown(e->fd, SHUT_RDWR); /* the daemon sees the end and closes it */
                e->fd = -1;
                cs->reaped++;
            }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 250000000L; /* four looks a second */
        if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&cs->wake, &cs->lock, &until);
    }
    pthread_mutex_unlock(&cs->lock);
    return NULL;
}

int serve_conns_start(serve_state *s, double deadline) {
    serve_conns *cs = &s->conns;
    cs->deadline = deadline;
    if (pthread_create(&cs->thread, NULL, reaper, s)) return 0;
    cs->started = 1;
    return 1;
}

void serve_conns_stop(serve_state *s) {
    serve_conns *cs = &s->conns;
    if (!cs->started) return;
    pthread_mutex_lock(&cs->lock);
    cs->stop = 1;
    pthread_cond_signal(&cs->wake);
    pthread_mutex_unlock(&cs->lock);
    pthread_join(cs->thread, NULL);
    cs->started = 0;
}

/* ---- replies ------------------------------------------------------------------------------ */

static enum MHD_Result send_bytes(struct MHD_Connection *c, unsigned status, const char *type,
                                  const char *data, size_t n, enum MHD_ResponseMemoryMode mode) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(n, (void *)data, mode);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", type);
    MHD_add_response_header(resp, "Content-Security-Policy", SERVE_CSP);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Cache-Control", "no-store");
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    enum MHD_Result ret = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *msg) {
    char *buf = NULL, text[1024];
    size_t n = 0;
    snprintf(text, sizeof text, "%s", msg);
    serve_scrub_paths(text);
    FILE *f = open_memstream(&buf, &n);
    if (!f) return MHD_NO;
    fputs("{\"error\":", f);
    serve_json_str(f, text);
    fprintf(f, ",\"status\":%u}\n", status);
    fclose(f);
    return send_bytes(c, status, "application/json", buf, n, MHD_RESPMEM_MUST_FREE);
}

static const char *header(struct MHD_Connection *c, const char *name) {
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

/* GET /?token=T: the cookie that carries T on the page's requests, and a
 * redirect to / without it. */
static enum MHD_Result landing(serve_state *s, struct MHD_Connection *c, const char *token) {
    if (!serve_guard_token_eq(&s->guard, token, strlen(token)))
        return send_error(c, 401, "wrong token: open the URL ffn serve printed");
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"",
                                                                MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    char cookie[160];
    snprintf(cookie, sizeof cookie, "%s=%s; Path=/; HttpOnly; SameSite=Strict",
             s->guard.cookie_name, s->guard.token);
    MHD_add_response_header(resp, "Set-Cookie", cookie);
    MHD_add_response_header(resp, "Location", "/");
    MHD_add_response_header(resp, "Cache-Control", "no-store");
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    enum MHD_Result ret = MHD_queue_response(c, 303, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result route(serve_state *s, struct MHD_Connection *c, const char *url,
                             const char *method, const serve_conn *sc) {
    for (size_t i = 0; i < sizeof static_files / sizeof static_files[0]; i++) {
        if (strcmp(url, static_files[i].url)) continue;
        if (strcmp(method, "GET") && strcmp(method, "HEAD"))
            return send_error(c, 405, "method not allowed: the page's files are read with GET");
        const report_asset *a = report_asset_named(static_files[i].asset, strlen(static_files[i].asset));
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
        serve_state *s = cls;
        const serve_headers h = {
            .host = header(c, "Host"), .origin = header(c, "Origin"),
            .sec_fetch_site = header(c, "Sec-Fetch-Site"), .content_type = header(c, "Content-Type"),
            .authorization = header(c, "Authorization"), .x_token = header(c, "X-FFN-Token"),
            .cookie = header(c, "Cookie")};
        char err[512];
        const int refused = serve_guard_check(&s->guard, method, url, &h, err, sizeof err);
        if (refused) {
            sc->refused = 1;
            mark(s, c, 1);
            return send_error(c, (unsigned)refused, err);
        }
        const char *token = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "token");
        if (token && !strcmp(url, "/") && (!strcmp(method, "GET") || !strcmp(method, "HEAD"))) {
            sc->refused = 1;
            mark(s, c, 1);
            return landing(s, c, token);
        }
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl) {
            char *end;
            unsigned long long v = strtoull(cl, &end, 10);
            if (end != cl && v > SERVE_MAX_BODY) {
                sc->too_large = sc->refused = 1;
                char msg[160];
                snprintf(msg, sizeof msg, "request body of %llu bytes, at most %d", v,
                         SERVE_MAX_BODY);
                return send_error(c, 413, msg);
            }
        }
        return MHD_YES;
    }
    if (sc->refused) { /* answered already: drop whatever body comes */
        *upload_size = 0;
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
    mark(cls, c, 1); /* the whole request is in: no deadline while it is answered */
    return route(cls, c, url, method, sc);
}

void serve_on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                        enum MHD_RequestTerminationCode toe);
void serve_on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                        enum MHD_RequestTerminationCode toe) {
    (void)toe;
    mark(cls, c, 0); /* waiting for the next request: its deadline starts */
    serve_conn *sc = *con_cls;
    if (sc) free(sc->body);
    free(sc);
    *con_cls = NULL;
}
