/* cmd_serve.c -- `ffn serve MODEL`: explore a model live in the browser.
 * Loads the model and its vocabulary, labels its neurons with the gate
 * probes, starts libmicrohttpd on 127.0.0.1 (the HTTP side is
 * serve_http.c, the API serve_api.c), prints the URL and serves until
 * SIGINT or SIGTERM, then stops the daemon (finishing the requests in
 * flight) and frees everything. */
#include "serve.h"
#include "ffn/checkpoint.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>

enum MHD_Result serve_on_request(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls);
void serve_on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                        enum MHD_RequestTerminationCode toe);
void serve_on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                         enum MHD_ConnectionNotificationCode code);

static const char *const CMD = "serve";

#define STR_(x) #x
#define STR(x) STR_(x)

static const char about[] =
"Serves a page for exploring MODEL live: type a text and see its tokens, click\n"
"a token to see its strongest FFN neurons per layer (gate pre-activation, up,\n"
"product m_i, the tokens the neuron's value vector promotes, and a label: the\n"
"word class its gate is most selective for on the built-in corpus, from the\n"
"gate probes of `ffn inspect gates`), then switch neurons off or scale them and\n"
"watch the next-token prediction change (before/after bars and the KL).  Edits\n"
"are patches on the tap layers.L.m (the input of down_proj) for one forward;\n"
"the model on disk is never changed (an edit of a fact, below, changes the\n"
"served copy in memory).  With --transcoder FILE (a transcoder or SAE of one\n"
"layer, `ffn transcoder train`), that layer's features switch the same way:\n"
"feature j's activation a_j becomes scale * a_j, i.e. (scale - 1) a_j d_j is\n"
"added to layers.L.mlp_out (d_j its decoder row; the transcoder's error stays\n"
"in the output, so nothing else changes), through /api/predict.\n"
"\n"
"MODEL is what `ffn inspect` reads: a run directory of `ffn train`, a Hugging\n"
"Face directory, or a llama2.c .bin with its tokenizer.bin beside it (or\n"
"--tokenizer FILE).  Labels come from the built-in corpus of --lang, or of\n"
"the other language when the model's vocabulary does not cover it.\n"
"\n"
"Who may drive it.  The server binds 127.0.0.1 unless --host says otherwise\n"
"(then it warns: anyone who can reach the port may try).  Each launch draws a\n"
"random token (256 bits from getrandom) and prints the URL with it,\n"
"http://127.0.0.1:P/?token=T: opening it sets a cookie (HttpOnly,\n"
"SameSite=Strict, named for the port) and redirects to / (the token leaves the\n"
"address bar), and every /api/ request must carry the token, in that cookie or\n"
"as \"Authorization: token T\" or \"X-FFN-Token: T\" (401 without it; compared\n"
"in constant time).  Every request's Host must be the bound address, localhost,\n"
"127.0.0.1 or [::1], with no port or the bound one (421 otherwise: a\n"
"DNS-rebinding name never gets an answer).  A request to /api/ with a\n"
"Sec-Fetch-Site other than same-origin, or an Origin other than\n"
"http://<Host>, is refused (403); a POST must have a same-origin Origin (or\n"
"Sec-Fetch-Site: same-origin; 403) and Content-Type: application/json (415),\n"
"which another site's page cannot send without a preflight that is never\n"
"granted.  Replies show no absolute path (the model, --data and saved models by\n"
"their last component).  Slow clients: a connection whose request has not fully\n"
"arrived --request-timeout seconds after it opened (or after its previous\n"
"reply) is closed, one address holds at most --max-per-address connections and\n"
"the server at most 256.  Everything it serves is built into the binary;\n"
"it never opens a path a client sends.  One model, one lock: requests that run\n"
"the model are served one at a time, in the order they arrive.  Limits: a\n"
"request body of at most 1 MiB (413 above), a text of at most "
STR(SERVE_MAX_TEXT_BYTES) " bytes,\n"
"at most " STR(SERVE_MAX_TOKENIZE) " tokens for /api/tokenize and at most the model's context for\n"
"/api/predict and /api/neurons, at most " STR(SERVE_MAX_EDITS) " edits.  A bad request gets a 4xx\n"
"with {\"error\": message naming the field}; the server keeps serving.\n"
"\n"
"The JSON API (the page uses it; so can curl):\n"
"  GET  /api/info       config, layers and widths, vocabulary, labels, limits\n"
"  POST /api/tokenize   {\"text\"} -> tokens with their pieces\n"
"  POST /api/predict    {\"text\"|\"ids\", \"edits\": [{\"layer\",\"neuron\",\"scale\"}]}\n"
"                       -> next-token top-k before and after (scale 0 = off), KL;\n"
"                       {\"layer\",\"feature\",\"scale\"} switches a feature of that\n"
"                       layer's --transcoder instead of a neuron\n"
"  POST /api/neurons    {\"text\"|\"ids\", \"position\", \"layer\"?, \"k\"} -> a token's\n"
"                       strongest neurons per layer with promoted tokens, labels\n"
"  POST /api/trace      {\"text\", \"subject\", \"target\"?} -> causal tracing tables\n"
"  POST /api/edit       {\"prompt\", \"subject\", \"target\", \"layer\", \"method\"?,\n"
"                       \"object\"?, options} -> a fact edited in memory;\n"
"                       p(target), p(old), efficacy, generalisation, specificity,\n"
"                       held-out loss before and after\n"
"  POST /api/edit/reset {} -> every edit undone (the weights as loaded)\n"
"  POST /api/edit/save  {} -> the edited model saved into --save-dir\n"
"\n"
"Editing a fact: /api/edit runs `ffn edit` (ROME, or --method ft) on an\n"
"in-memory training copy of the model and gives the served model its weights,\n"
"so /api/predict, /api/neurons and /api/trace answer for the edited model until\n"
"/api/edit/reset; edits add up.  The options are those of ffn edit, named with\n"
"underscores (steps, lr, kl_weight, prefixes, prefix_len, lambda, delta_decay,\n"
"clamp_norm, ft_steps, ft_lr, seed; steps at most " STR(SERVE_MAX_EDIT_STEPS) "); C of a layer is\n"
"computed at its first ROME edit from --samples keys of the model's text and\n"
"kept.  The same arguments give the numbers `ffn edit --json` prints.  A\n"
"prompt of the facts file (or facts corpus) is scored on its paraphrases and\n"
"neighbours too.  The model on disk is never written; with --save-dir DIR the\n"
"page can save the edited model as a new directory DIR/<model>-edited-<n>:\n"
"at most --max-saves saves and --max-save-mb MB in all per launch (429 past\n"
"them), 409 when nothing changed since the last save, 507 when the file system\n"
"of DIR has less room than the model needs (statvfs, before writing).\n"
"An edit holds the model's lock: other requests wait until it is done.\n";

static const char epilog[] =
"Prints the URL on stdout once it serves; stops on Ctrl-C (SIGINT) or SIGTERM,\n"
"exit 0.  Exit status 1 when the model cannot be loaded or the port cannot be\n"
"bound, 2 on bad usage.\n"
"\n"
"example:\n"
"  ffn train --steps 300 --out m\n"
"  ffn serve m --port 8080          # then open the URL it prints\n"
"  curl -s localhost:8080/api/predict -H 'Authorization: token T' \\\n"
"      -H 'Origin: http://localhost:8080' -H 'Content-Type: application/json' \\\n"
"      -d '{\"text\":\"Mary gave\",\"edits\":[{\"layer\":1,\"neuron\":7,\"scale\":0}]}'\n";

/* The address to bind: host (numeric or a name) and port. */
static int resolve(const char *host, int port, struct sockaddr_storage *ss, socklen_t *len,
                   int *ipv6) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE}, *res = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int rc = getaddrinfo(host, ps, &hints, &res);
    if (rc) {
        cli_error(CMD, "--host %s: cannot resolve it (%s)", host, gai_strerror(rc));
        return 0;
    }
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    *ipv6 = res->ai_family == AF_INET6;
    freeaddrinfo(res);
    return 1;
}

static int is_loopback(const struct sockaddr_storage *ss) {
    if (ss->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
    if (ss->ss_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a);
    }
    return 0;
}

/* The launch's token: 32 bytes of getrandom in hex. */
static int token_make(char out[SERVE_TOKEN_HEX + 1]) {
    unsigned char raw[SERVE_TOKEN_HEX / 2];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return 0;
        got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof raw; i++) snprintf(out + 2 * i, 3, "%02x", raw[i]);
    return 1;
}

/* The Host names the guard accepts: the bound address as given and as
 * numbers, localhost, 127.0.0.1, [::1]; any IP literal for a wildcard. */
static void guard_init(serve_guard *g, const char *host, const struct sockaddr_storage *ss,
                       unsigned port) {
    char num[INET6_ADDRSTRLEN] = "";
    int wildcard = 0;
    if (ss->ss_family == AF_INET) {
        const struct in_addr *a = &((const struct sockaddr_in *)ss)->sin_addr;
        inet_ntop(AF_INET, a, num, sizeof num);
        wildcard = a->s_addr == htonl(INADDR_ANY);
    } else if (ss->ss_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
        inet_ntop(AF_INET6, a, num, sizeof num);
        wildcard = IN6_IS_ADDR_UNSPECIFIED(a);
    }
    const int v6 = ss->ss_family == AF_INET6;
    char given[300], numeric[300];
    snprintf(given, sizeof given, v6 && host[0] != '[' && strchr(host, ':') ? "[%s]" : "%s", host);
    snprintf(numeric, sizeof numeric, v6 ? "[%s]" : "%s", num);
    const char *names[] = {given, numeric, "localhost", "127.0.0.1", "[::1]"};
    g->n_hosts = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && g->n_hosts < SERVE_MAX_HOSTS; i++) {
        char low[300];
        size_t k = 0;
        for (; names[i][k] && k + 1 < sizeof low; k++)
            low[k] = (char)tolower((unsigned char)names[i][k]);
        low[k] = 0;
        int seen = !low[0] || !strcmp(low, "[]");
        for (int j = 0; j < g->n_hosts; j++) seen |= !strcmp(g->hosts[j], low);
        if (!seen) snprintf(g->hosts[g->n_hosts++], sizeof g->hosts[0], "%s", low);
    }
    g->any_ip = wildcard;
    g->port = port;
    snprintf(g->cookie_name, sizeof g->cookie_name, "ffn_token_%u", port);
}

static int load(serve_state *s, const char *path, const char *tokenizer) {
    ffn_checkpoint_info info;
    memset(&info, 0, sizeof info);
    ffn_status st = ffn_checkpoint_load_any(s->ctx, path, NULL, &s->model, &info);
    if (st) return cli_fail(CMD, st);
    snprintf(s->format, sizeof s->format, "%s", ffn_checkpoint_format_name(info.format));
    snprintf(s->editor.tokenizer_path, sizeof s->editor.tokenizer_path, "%s",
             tokenizer ? tokenizer : info.tokenizer_path);
    s->editor.tokenizer_is_llama2c = tokenizer ? strstr(tokenizer, ".bin") != NULL
                                               : info.tokenizer_is_llama2c;
    if (!tokenizer && !info.tokenizer_path[0]) {
        cli_error(CMD, "%s: no vocabulary beside the model (tokenizer.txt or tokenizer.bin); the "
                  "page needs one to turn text into tokens (--tokenizer FILE)", path);
        return CLI_EXIT_FAIL;
    }
    st = ffn_vocab_load(tokenizer ? tokenizer : info.tokenizer_path,
                        ffn_model_get_config(s->model)->vocab_size, &s->vocab);
    if (st) return cli_fail(CMD, st);
    return 0;
}

/* --transcoder FILE...: each of a layer of this model, no layer twice */
static int load_transcoders(serve_state *s, const char *const *files, int n) {
    const ffn_model_config *c = ffn_model_get_config(s->model);
    for (int i = 0; i < n; i++) {
        ffn_transcoder *tc = NULL;
        ffn_status st = ffn_tc_load(files[i], &tc);
        if (st) return cli_fail(CMD, st);
        const ffn_tc_config *tcc = ffn_tc_get_config(tc);
        const char *why = NULL;
        if (tcc->layer >= c->num_hidden_layers) why = "a layer the model does not have";
        else if (tcc->d_model != c->hidden_size) why = "another width than the model's";
        else if (serve_tc_of_layer(s, tcc->layer)) why = "a layer given twice";
        if (why) {
            cli_error(CMD, "--transcoder %s: layer %lld, width %lld: %s (the model has %lld "
                      "layers, hidden_size %lld; one transcoder per layer)", files[i],
                      (long long)tcc->layer, (long long)tcc->d_model, why,
                      (long long)c->num_hidden_layers, (long long)c->hidden_size);
            ffn_tc_free(tc);
            return CLI_EXIT_USAGE;
        }
        s->tcs[s->n_tcs].tc = tc;
        serve_base_name(files[i], s->tcs[s->n_tcs].name, sizeof s->tcs[s->n_tcs].name);
        s->n_tcs++;
    }
    return 0;
}

int cmd_serve(int argc, char **argv) {
    const char *model_path = NULL, *host = "127.0.0.1", *tokenizer = NULL;
    const char *data = NULL, *facts = NULL, *save_dir = NULL;
    int64_t port = 8080, threads = 0, pool = 4, samples = 2000;
    int64_t max_saves = 10, max_save_mb = 16384, per_address = 32, request_timeout = 10;
    int lang = FFN_LANG_EN, no_labels = 0, n_tc_files = 0;
    const char *tc_files[SERVE_MAX_TRANSCODERS];
    const cli_opt opts[] = {
        {CLI_INT_FIELDS("--port", &port, "P", 0, 65535, "the TCP port (0 = any free port; the "
                        "URL printed says which)")},
        {.name = "--host", .type = CLI_STR, .dst = &host, .metavar = "ADDR",
         .help = "the address to bind; anything but a loopback address exposes the model and "
                 "the page to the network, guarded by the token alone (a warning says so)"},
        {CLI_INT_FIELDS("--max-per-address", &per_address, "N", 1, 256, "connections one "
                        "client address may hold at once (more are closed as they come)")},
        {CLI_INT_FIELDS("--request-timeout", &request_timeout, "S", 1, 3600, "seconds a "
                        "connection has to send a whole request (headers and body), counted from "
                        "its opening or its previous reply; a slower one is closed")},
        CLI_OPT_LANG("--lang", &lang, "the language of the page and of the lesson's words (en, "
                     "zh); the gate probes run on the built-in corpus of this language first"),
        {.name = "--tokenizer", .type = CLI_PATH, .dst = &tokenizer, .metavar = "FILE",
         .def = "ffn_tokenizer_file or tokenizer.txt in a checkpoint directory, tokenizer.bin "
                "beside the model",
         .help = "the vocabulary (as in ffn run)"},
        {.name = "--transcoder", .type = CLI_PATH, .dst = (void *)tc_files, .metavar = "FILE",
         .max_count = SERVE_MAX_TRANSCODERS, .count = &n_tc_files, .def = "none",
         .help = "a transcoder or SAE of one layer (ffn transcoder train): its features can be "
                 "switched off or scaled as neurons are ({\"layer\", \"feature\", \"scale\"} "
                 "edits); repeat for other layers (one per layer)"},
        {.name = "--no-labels", .type = CLI_FLAG, .dst = &no_labels,
         .help = "skip the gate probes at the start (neurons are shown without labels)"},
        {CLI_INT_FIELDS("--workers", &pool, "N", 1, 64, "threads that accept and answer "
                        "connections (the model itself runs one request at a time)")},
        CLI_OPT_THREADS(&threads),
        {.name = "--data", .type = CLI_PATH, .dst = &data, .metavar = "FILE", .group = "editing",
         .def = "the model's training text",
         .help = "text for C (its first 90%) and the held-out loss (its last 10%), as in ffn edit"},
        {.name = "--facts", .type = CLI_PATH, .dst = &facts, .metavar = "FILE",
         .def = "the facts corpus when the model was trained on it",
         .help = "a facts file (JSON lines, as `ffn corpus --facts --json` prints): an edit of "
                 "one of its prompts is scored on its paraphrases and neighbours too"},
        {.name = "--samples", .type = CLI_INT, .dst = &samples, .metavar = "N", .imin = 1,
         .imax = 100000000, .help = "keys (token positions of the text) for C = E[k k^T], as in "
                                    "ffn edit; computed once per layer, kept in memory"},
        {.name = "--save-dir", .type = CLI_PATH, .dst = &save_dir, .metavar = "DIR",
         .def = "none: the page cannot save",
         .help = "where the page may save the edited model, as DIR/<model>-edited-<n> (a name "
                 "the server picks; an existing one is never replaced)"},
        {.name = "--max-saves", .type = CLI_INT, .dst = &max_saves, .metavar = "N", .imin = 0,
         .imax = 1000000, .group = "editing",
         .help = "saves /api/edit/save may make in one launch (429 after them)"},
        {.name = "--max-save-mb", .type = CLI_INT, .dst = &max_save_mb, .metavar = "MB",
         .imin = 1, .imax = 1 << 30, .group = "editing",
         .help = "megabytes (2^20 bytes) all saves of one launch may write; a save that would "
                 "pass it is refused before writing (429)"},
        {0}};
    const cli_pos pos[] = {{.name = "MODEL", .dst = &model_path, .required = 1,
                            .help = "a run directory, a Hugging Face directory or a llama2.c .bin",
                            .missing = "missing MODEL: the model to serve"},
                           {0}};
    const cli_spec spec = {.cmd = CMD, .synopsis = "MODEL [--port P] [--host 127.0.0.1] [--lang en|zh] "
                                                   "[--threads N]",
                           .about = about, .epilog = epilog, .opts = opts, .pos = pos};
    int rc;
    if (cli_parse(&spec, argc, argv, &rc)) return rc;

    struct sockaddr_storage addr;
    socklen_t addr_len = 0;
    int ipv6 = 0;
    if (!resolve(host, (int)port, &addr, &addr_len, &ipv6)) return CLI_EXIT_USAGE;
    struct stat sd;
    if (save_dir && (stat(save_dir, &sd) != 0 || !S_ISDIR(sd.st_mode))) {
        cli_error(CMD, "--save-dir %s: not a directory (create it first)", save_dir);
        return CLI_EXIT_USAGE;
    }

    serve_state s;
    memset(&s, 0, sizeof s);
    s.model_path = model_path;
    s.lang = (ffn_lang)lang;
    pthread_mutex_init(&s.lock, NULL);
    s.editor.samples = samples;
    s.editor.windows = 8;
    s.editor.save_dir = save_dir;
    s.editor.max_saves = max_saves;
    s.editor.max_save_bytes = max_save_mb << 20;
    serve_base_name(model_path, s.model_name, sizeof s.model_name);
    pthread_mutex_init(&s.conns.lock, NULL);
    pthread_cond_init(&s.conns.wake, NULL);
    if (!token_make(s.guard.token)) {
        cli_error(CMD, "cannot draw the launch's token from getrandom: %s", strerror(errno));
        return CLI_EXIT_FAIL;
    }
    rc = cli_make_ctx(CMD, threads, &s.ctx);
    if (!rc) rc = load(&s, model_path, tokenizer);
    if (!rc) rc = load_transcoders(&s, tc_files, n_tc_files);
    if (!rc) {
        serve_editor_init(&s, data, facts);
        if (!s.editor.available && (data || facts)) { /* asked for and not possible: fail */
            cli_error(CMD, "%s", s.editor.reason);
            rc = CLI_EXIT_FAIL;
        } else if (!s.editor.available) {
            fprintf(stderr, "ffn serve: editing is off: %s\n", s.editor.reason);
        }
    }
    if (!rc && !no_labels) {
        fprintf(stderr, "ffn serve: labelling neurons with the gate probes (--no-labels skips "
                        "this)...\n");
        serve_labels_compute(&s);
        if (s.labels.available)
            fprintf(stderr, "ffn serve: labels from the %s corpus in %.1f s\n",
                    ffn_lang_name(s.labels.lang), s.labels.seconds);
        else fprintf(stderr, "ffn serve: no labels: %s\n", s.labels.reason);
    } else if (!rc) {
        snprintf(s.labels.reason, sizeof s.labels.reason, "--no-labels was given");
    }
    struct MHD_Daemon *d = NULL;
    if (!rc) {
        /* the signals are taken by sigwait below; every thread the daemon
         * starts inherits the mask, so none of them is interrupted */
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        if (!serve_conns_start(&s, (double)request_timeout)) {
            cli_error(CMD, "cannot start the thread that closes slow connections");
            rc = CLI_EXIT_FAIL;
        }
    }
    if (!rc) {
        unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO |
                         (ipv6 ? MHD_USE_IPv6 : 0);
        /* the inactivity timeout as a backstop; the deadline is the reaper's */
        d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, serve_on_request, &s,
                             MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                             MHD_OPTION_THREAD_POOL_SIZE, (unsigned)pool,
                             MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)request_timeout,
                             MHD_OPTION_CONNECTION_LIMIT, 256u,
                             MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)per_address,
                             MHD_OPTION_NOTIFY_COMPLETED, serve_on_completed, &s,
                             MHD_OPTION_NOTIFY_CONNECTION, serve_on_connection, &s,
                             MHD_OPTION_END);
        if (!d) {
            cli_error(CMD, "cannot listen on %s port %lld (in use, or not an address of this "
                      "machine)", host, (long long)port);
            rc = CLI_EXIT_FAIL;
        }
    }
    if (!rc) {
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
        unsigned bound = info ? info->port : (unsigned)port;
        guard_init(&s.guard, host, &addr, bound);
        if (!is_loopback(&addr))
            fprintf(stderr, "ffn serve: WARNING: listening on %s, not a loopback address: anyone "
                            "who can reach this machine on port %u can try the page; only the "
                            "token in the URL below keeps them out\n", host, bound);
        printf(ipv6 ? "http://[%s]:%u/?token=%s\n" : "http://%s:%u/?token=%s\n", host, bound,
               s.guard.token);
        fflush(stdout);
        fprintf(stderr, "ffn serve: serving %s; Ctrl-C stops\n", model_path);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGTERM);
        int sig = 0;
        sigwait(&set, &sig);
        fprintf(stderr, "ffn serve: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
        serve_conns_stop(&s);
        MHD_stop_daemon(d);
        if (s.conns.reaped)
            fprintf(stderr, "ffn serve: %lld slow connections were closed (no whole request "
                    "within --request-timeout %lld s)\n", (long long)s.conns.reaped,
                    (long long)request_timeout);
    }
    serve_conns_stop(&s); /* when the daemon did not start */
    serve_labels_free(&s.labels);
    serve_editor_free(&s.editor);
    for (int i = 0; i < s.n_tcs; i++) ffn_tc_free(s.tcs[i].tc);
    ffn_vocab_free(s.vocab);
    ffn_model_free(s.model);
    ffn_ctx_free(s.ctx);
    pthread_mutex_destroy(&s.lock);
    pthread_mutex_destroy(&s.conns.lock);
    pthread_cond_destroy(&s.conns.wake);
    return rc;
}
