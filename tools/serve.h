/* serve.h -- what the files of `ffn serve` share: the loaded model and its
 * lock, a parsed API request, the endpoint table and the JSON writer.
 *
 *   cmd_serve.c      flags, loading, the daemon's start and clean stop
 *   serve_http.c     libmicrohttpd glue: routing, body limits, the
 *                    embedded static assets, JSON error replies
 *   serve_request.c  a request body (JSON) -> serve_req, every field checked
 *   serve_guard.c    who may drive the server: Host, the launch's token,
 *                    Origin / Sec-Fetch-Site, Content-Type (libc only: the
 *                    fuzz target tests/fuzz/fuzz_serve_guard.c links it alone)
 *   serve_json.c     the JSON text and number writers, a handler's error
 *                    (these two use libc and the JSON reader only: the fuzz
 *                    target tests/fuzz/fuzz_serve_request.c links them alone)
 *   serve_model.c    what is computed on the model: tokens, the prediction
 *                    with edits (the one intervention function), a token's
 *                    neurons, the gate-probe labels
 *   serve_api.c      one handler per endpoint and the table of them
 *   serve_edit.c     editing a fact on the served model (ROME or FT on an
 *                    in-memory training copy), reset, save to --save-dir
 *
 * Concurrency: one model, serialised by serve_state.lock (every handler
 * that runs the model holds it, an edit included, so no request ever sees
 * a half-written weight); the vocabulary is read-only and shared.
 * Letters: T tokens, V vocab, W a layer's neuron width, C word classes. */
#ifndef FFN_SERVE_H
#define FFN_SERVE_H

#include "cli.h"
#include "i18n.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

/* ---- limits (stated in --help and in GET /api/info) ---------------------------- */

#define SERVE_MAX_BODY (1 << 20)      /* bytes of a request body: 1 MiB */
#define SERVE_MAX_TEXT_BYTES 8192     /* bytes of "text" (checked before tokenizing) */
#define SERVE_MAX_TOKENIZE 4096       /* tokens /api/tokenize returns */
#define SERVE_MAX_EDITS 64            /* edits of one request */
#define SERVE_MAX_K 50                /* top-k of a prediction / neurons per layer */
#define SERVE_PROMOTED 5              /* promoted tokens per neuron */
#define SERVE_MAX_EDIT_STEPS 500      /* "steps" and "ft_steps" of one /api/edit */

/* ---- who may drive the server (serve_guard.c) ------------------------------------ */

#define SERVE_TOKEN_HEX 64            /* the launch's token: 32 bytes of getrandom, in hex */
#define SERVE_MAX_HOSTS 5

typedef struct serve_guard {
    char token[SERVE_TOKEN_HEX + 1];
    char cookie_name[32];             /* ffn_token_<port>: one per server of the machine */
    char hosts[SERVE_MAX_HOSTS][300]; /* Host names accepted (lowercase, [v6] bracketed);
                                       * hosts[0] is the bound address */
    int n_hosts;
    int any_ip;                       /* bound to a wildcard: any IP literal too */
    unsigned port;                    /* the bound port */
} serve_guard;

/* The headers the guard reads (NULL when absent). */
typedef struct serve_headers {
    const char *host, *origin, *sec_fetch_site, *content_type, *authorization, *x_token, *cookie;
} serve_headers;

/* 0 when the request may go on, else the HTTP status (400, 401, 403, 415,
 * 421) with one sentence for the client in err. */
int serve_guard_check(const serve_guard *g, const char *method, const char *url,
                      const serve_headers *h, char *err, size_t n);
/* The token in one of the places the guard accepts (cookie, Authorization,
 * X-FFN-Token). */
int serve_guard_has_token(const serve_guard *g, const serve_headers *h);
/* s (n bytes) is the token: constant time in s's content. */
int serve_guard_token_eq(const serve_guard *g, const char *s, size_t n);
/* host is an accepted Host value; its name and port (0: none) on success. */
int serve_guard_host_ok(const serve_guard *g, const char *host, char *name, size_t cap,
                        unsigned *port);

/* ---- the loaded model ----------------------------------------------------------- */

/* A transcoder (or SAE) of one layer, from --transcoder: its features can be
 * switched as neurons are (ffn_tc_patch_features). */
#define SERVE_MAX_TRANSCODERS 64
typedef struct serve_tc {
    ffn_transcoder *tc;
    char name[256];       /* the file's last component: what replies show */
} serve_tc;

typedef struct serve_labels {
    int available;
    char reason[512];     /* why not, when not */
    ffn_lang lang;        /* the corpus the probe ran on */
    int64_t n_layers;
    /* per layer (L), per neuron (W): the class with the largest selectivity
     * d, and d; -1 / 0 when the layer has no FFN */
    int8_t **cls;
    float **d;
    double seconds;       /* time the probe took */
} serve_labels;

/* Editing a fact (serve_edit.c).  The text, facts and flags are set at the
 * start; the training copy of the model (it has gradients), the weights
 * as loaded and each layer's C are made at the first edit that needs them. */
typedef struct serve_editor {
    int available;             /* 0: why in reason */
    char reason[512];
    const char *save_dir;      /* --save-dir, or NULL: saving is off */
    int64_t samples;           /* --samples: keys for C = E[k kᵀ] */
    int64_t windows;           /* windows of the held-out loss (8, as ffn edit) */
    char tokenizer_path[4096]; /* the vocabulary, copied into a saved model */
    int tokenizer_is_llama2c;
    int32_t *tokens;           /* the model's text: C from the first n_train, loss the rest */
    int64_t n_tokens, n_train;
    char text_what[1100];
    ffn_facts *facts;          /* paraphrases and neighbours (NULL: prompt only) */
    ffn_model *train;          /* the training copy the edits run on */
    float *original;           /* (n_params) the weights as loaded */
    int64_t n_params;
    double **C;                /* (L) each (F, F), or NULL until needed */
    int64_t *C_rows;           /* (L) keys C was estimated from */
    int64_t n_edits;           /* since the start or the last reset */
    int64_t n_saved;
    int dirty;                 /* an edit since the last save */
    int64_t max_saves;         /* --max-saves: saves of one launch */
    int64_t max_save_bytes;    /* --max-save-mb, in bytes: what all saves may write */
    int64_t saved_bytes;       /* what the saves of this launch wrote */
} serve_editor;

/* Connections being read (serve_http.c): one entry per open connection,
 * from libmicrohttpd's connection notifications; a reaper thread shuts
 * down a connection whose request has not fully arrived `deadline`
 * seconds after it opened or after its previous reply. */
typedef struct serve_conn_entry {
    struct serve_conn_entry *prev, *next;
    int fd;
    int busy;             /* a whole request is in: its handler runs or its reply goes out */
    double since;         /* CLOCK_MONOTONIC seconds: opened, or the previous reply done */
} serve_conn_entry;

typedef struct serve_conns {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    serve_conn_entry *head;
    double deadline;      /* --request-timeout */
    int stop, started;
    pthread_t thread;
    int64_t reaped;       /* connections shut down for being slow */
} serve_conns;

typedef struct serve_state {
    ffn_ctx *ctx;
    ffn_model *model;
    ffn_vocab *vocab;
    const char *model_path;
    char model_name[256]; /* its last component: what replies show */
    serve_guard guard;
    char format[16];      /* ffn_checkpoint_format_name */
    ffn_lang lang;        /* the page's language (--lang) */
    pthread_mutex_t lock; /* serialises every use of model */
    serve_labels labels;
    serve_editor editor;
    serve_tc tcs[SERVE_MAX_TRANSCODERS]; /* --transcoder files, one per layer at most */
    int n_tcs;
    serve_conns conns;
} serve_state;

/* ---- a request ------------------------------------------------------------------ */

typedef struct serve_edit {
    int64_t layer, neuron;
    int64_t feature;      /* >= 0: a feature of layer's --transcoder instead of a neuron
                           * (neuron is then -1), a_j := scale · a_j */
    double scale;         /* m_i := scale · m_i; 0 switches the neuron off */
    int64_t position;     /* -1: every position */
} serve_edit;

#define SERVE_MAX_WORD_BYTES 256 /* "subject", "target" */

/* Fields each endpoint accepts (a bit set; anything else is refused). */
enum {
    SERVE_F_TEXT = 1 << 0,
    SERVE_F_IDS = 1 << 1,
    SERVE_F_EDITS = 1 << 2,
    SERVE_F_POSITION = 1 << 3,
    SERVE_F_LAYER = 1 << 4,
    SERVE_F_K = 1 << 5,
    SERVE_F_SUBJECT = 1 << 6,
    SERVE_F_TARGET = 1 << 7,
    SERVE_F_PROMPT = 1 << 8,
    SERVE_F_METHOD = 1 << 9,
    SERVE_F_OBJECT = 1 << 10,
    SERVE_F_EDIT_OPTS = 1 << 11 /* every field of serve_edit_opt_names */
};

/* The options of /api/edit, named and bounded as `ffn edit`'s flags (with
 * dashes as underscores; steps capped for a server). */
enum {
    SERVE_O_STEPS, SERVE_O_LR, SERVE_O_KL_WEIGHT, SERVE_O_PREFIXES, SERVE_O_PREFIX_LEN,
    SERVE_O_LAMBDA, SERVE_O_DELTA_DECAY, SERVE_O_CLAMP_NORM, SERVE_O_FT_STEPS, SERVE_O_FT_LR,
    SERVE_O_SEED, SERVE_N_EDIT_OPTS
};
extern const char *const serve_edit_opt_names[SERVE_N_EDIT_OPTS];

typedef struct serve_req {
    unsigned given;       /* SERVE_F_* present in the body */
    char *text;           /* "text" (malloc'd, NUL-terminated; UTF-8) */
    size_t text_len;
    int32_t *ids;         /* "ids" (malloc'd) */
    int64_t n_ids;
    serve_edit edits[SERVE_MAX_EDITS];
    int64_t n_edits;
    int64_t position;     /* -1 when absent: the last token */
    int64_t layer;        /* -1 when absent: every layer */
    int64_t k;            /* 0 when absent: the endpoint's default */
    char *subject;        /* "subject" (malloc'd; at most SERVE_MAX_WORD_BYTES), or NULL */
    char *target;         /* "target", or NULL */
    char *prompt;         /* "prompt" (at most SERVE_MAX_TEXT_BYTES), or NULL */
    char *object;         /* "object": the old object, or NULL */
    int method;           /* "method": -1 absent, else an ffn_edit_method */
    double opt[SERVE_N_EDIT_OPTS]; /* the options given (bit i of opt_given) */
    unsigned opt_given;
} serve_req;

/* Parse body (n bytes, may be NULL/0 for an empty object) accepting the
 * fields in `allowed`.  Bounds that need the model (ids < V, layer < L,
 * neuron < W) are checked later by the handler.  On failure returns 0 and
 * writes a message for the client (one sentence naming the field, what was
 * expected and what was found) into err. */
int serve_req_parse(const char *body, size_t n, unsigned allowed, serve_req *req, char *err,
                    size_t err_size);
void serve_req_free(serve_req *req);

/* ---- replies ---------------------------------------------------------------------- */

/* A handler writes its JSON reply to out and returns the HTTP status; on
 * an error it returns 4xx/5xx after serve_err() (the reply is then
 * {"error": message, "status": code}). */
typedef struct serve_reply {
    FILE *out;
    char err[1024];
} serve_reply;

int serve_err(serve_reply *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

typedef int (*serve_handler)(serve_state *s, const serve_req *req, serve_reply *r);

typedef struct serve_endpoint {
    const char *method;   /* "GET" or "POST" */
    const char *path;     /* "/api/predict" */
    unsigned fields;      /* SERVE_F_* the body may hold */
    serve_handler fn;
    const char *summary;  /* one line for GET /api/info and --help */
} serve_endpoint;

extern const serve_endpoint serve_endpoints[];
extern const size_t serve_n_endpoints;

/* JSON text of n bytes: valid UTF-8 is copied (escaped as JSON needs), a
 * byte that is not part of valid UTF-8, and NUL, is written as "<0xXX>". */
void serve_json_bytes(FILE *f, const char *s, size_t n);
void serve_json_str(FILE *f, const char *s);
/* A float as JSON (null when not finite), with 9 significant digits. */
void serve_json_num(FILE *f, double v);
/* the same as text, for a format's %s (cli_json_num's ring of 64) */
const char *serve_num(double v);
/* msg with every absolute path (a word starting with '/', but /api/...)
 * cut to its last component, in place: replies never show where the
 * server's files are. */
void serve_scrub_paths(char *msg);
/* serve_json_str of s scrubbed (s cut at 2047 bytes). */
void serve_json_str_scrubbed(FILE *f, const char *s);
/* The last component of path (its directories cut), in out. */
void serve_base_name(const char *path, char *out, size_t cap);

/* ---- the HTTP side (serve_http.c) ------------------------------------------------------- */

/* The reaper of slow connections: started before the daemon, stopped
 * (joined) before it stops. */
int serve_conns_start(serve_state *s, double deadline);
void serve_conns_stop(serve_state *s);

/* ---- the model's side (serve_model.c) ---------------------------------------------- */

/* Token ids of the request: its "ids" (checked against V), or its "text"
 * encoded (with bos when the vocabulary has one).  max_tokens bounds T. */
int serve_req_tokens(serve_state *s, const serve_req *req, int64_t max_tokens, int32_t **ids,
                     int64_t *n, serve_reply *r);
/* The --transcoder of layer `layer`, or NULL. */
const serve_tc *serve_tc_of_layer(const serve_state *s, int64_t layer);
/* The text of token id after prev, as JSON. */
void serve_json_piece(FILE *f, const serve_state *s, int32_t prev, int32_t id);

/* The one intervention: run ids (T) with every edit applied as a SCALE
 * patch on layers.L.m (a feature edit: ffn_tc_patch_features of its
 * layer's transcoder, layers in order, after the neuron patches), and write the last position's next-token
 * probabilities (V, double) into probs.  The patches are cleared
 * afterwards: the model is left as it was (nothing is written to disk).
 * Caller holds s->lock. */
ffn_status serve_predict_probs(serve_state *s, const int32_t *ids, int64_t T,
                               const serve_edit *edits, int64_t n_edits, double *probs);

/* The gate-probe labels, computed once at the start: ffn_inspect_gates_corpus
 * for ffn's own vocabularies, ffn_inspect_probe on the corpus encoded here
 * for the others (llama2.c); labels->available = 0 with a reason when the
 * probe fails. */
void serve_labels_compute(serve_state *s);
void serve_labels_free(serve_labels *labels);

/* ---- editing (serve_edit.c) ---------------------------------------------------------- */

/* At the start: the model's text (data, or the one it records) and facts
 * (facts_path, or the facts corpus it was trained on); editor->available
 * = 0 with a reason when there is no text. */
void serve_editor_init(serve_state *s, const char *data, const char *facts_path);
void serve_editor_free(serve_editor *e);
/* The "edit" object of GET /api/info. */
void serve_editor_info(serve_state *s, FILE *f);

int serve_api_edit(serve_state *s, const serve_req *req, serve_reply *r);
int serve_api_edit_reset(serve_state *s, const serve_req *req, serve_reply *r);
int serve_api_edit_save(serve_state *s, const serve_req *req, serve_reply *r);

#endif
