/* cmd_layer_moe.c -- the Mixture-of-Experts half of `ffn layer`
 * (layer_run_moe, reached from tools/cmd_layer.c when the config has
 * num_experts / num_local_experts / n_routed_experts) and `ffn bench moe`
 * (cmd_bench_moe, dispatched by tools/cmd_bench.c).
 *
 * Tensor names follow Qwen2-MoE (see include/ffn/moe.h):
 *   gate.weight (E, D); experts.{e}.{gate,up,down}_proj.weight (+ .bias);
 *   shared_expert.* and shared_expert_gate.weight (1, D);
 *   shared_experts.* (width n_shared_experts · moe_intermediate_size).
 * Mixtral's names are accepted too (experts.{e}.w1 / w3 / w2 for gate /
 * up / down, as `ffn export` writes them), and so is one common prefix
 * before them all (a block saved whole: "block_sparse_moe.",
 * "model.layers.3.mlp.", ...), found from the router's name.
 * Letters: N tokens, D hidden, F expert width, E experts, K top-k. */
#include "cli.h"
#include "layer_moe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the tensor table: every weight the config implies ------------------- */

typedef struct slot {
    char name[96];       /* the name in the table (Qwen2-MoE style) */
    char file_name[192]; /* the name in the weights file */
    int ndim;
    int64_t shape[2];
    float *w; /* loaded weight */
    float *g; /* gradient (backward) */
} slot;

typedef struct table {
    slot *s;
    size_t n, cap;
} table;

static float **table_add(table *t, const char *name, int ndim, int64_t d0, int64_t d1) {
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        slot *s = realloc(t->s, cap * sizeof *s);
        if (!s) return NULL;
        t->s = s;
        t->cap = cap;
    }
    slot *s = &t->s[t->n++];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->ndim = ndim;
    s->shape[0] = d0;
    s->shape[1] = d1;
    return &s->w;
}

static void table_free(table *t) {
    for (size_t i = 0; i < t->n; i++) {
        free(t->s[i].w);
        free(t->s[i].g);
    }
    free(t->s);
}

/* Record the tensors of one expert-like layer under `prefix`; the pointers
 * into the table are resolved after loading (the table may move). */
static void add_layer(table *t, const char *prefix, const ffn_layer_config *lc) {
    char name[96];
    int64_t D = lc->hidden_size, F = lc->intermediate_size;
    static const char *const proj[] = {"gate_proj", "up_proj", "down_proj"};
    for (int p = 0; p < 3; p++) {
        if (p == 0 && lc->type != FFN_MLP_GATED) continue;
        snprintf(name, sizeof name, "%s.%s.weight", prefix, proj[p]);
        table_add(t, name, 2, p == 2 ? D : F, p == 2 ? F : D);
        if (lc->bias) {
            snprintf(name, sizeof name, "%s.%s.bias", prefix, proj[p]);
            table_add(t, name, 1, p == 2 ? D : F, 0);
        }
    }
}

/* Fill p (weights when grad = 0, gradients when 1) from table entries
 * starting at *i, in add_layer's order. */
static void bind_layer(ffn_layer_params *p, table *t, size_t *i, const ffn_layer_config *lc,
                       int grad) {
    memset(p, 0, sizeof *p);
    float **dst[3][2] = {{&p->gate_w, &p->gate_b}, {&p->up_w, &p->up_b}, {&p->down_w, &p->down_b}};
    for (int q = 0; q < 3; q++) {
        if (q == 0 && lc->type != FFN_MLP_GATED) continue;
        *dst[q][0] = grad ? t->s[(*i)++].g : t->s[(*i)++].w;
        if (lc->bias) *dst[q][1] = grad ? t->s[(*i)++].g : t->s[(*i)++].w;
    }
}

static void build_table(table *t, const ffn_moe_config *c) {
    char prefix[64];
    table_add(t, "gate.weight", 2, c->num_experts, c->hidden_size);
    ffn_layer_config lc = ffn_moe_expert_config(c, 0);
    for (int64_t e = 0; e < c->num_experts; e++) {
        snprintf(prefix, sizeof prefix, "experts.%lld", (long long)e);
        add_layer(t, prefix, &lc);
    }
    if (c->shared_expert_intermediate_size > 0) {
        lc = ffn_moe_expert_config(c, 1);
        add_layer(t, "shared_expert", &lc);
        table_add(t, "shared_expert_gate.weight", 2, 1, c->hidden_size);
    }
    if (c->n_shared_experts > 0) {
        lc = ffn_moe_expert_config(c, 2);
        add_layer(t, "shared_experts", &lc);
    }
}

/* params (weights or gradients) over the table; experts[] must hold E. */
static void bind_params(ffn_moe_params *p, ffn_layer_params *experts, table *t,
                        const ffn_moe_config *c, int grad) {
    size_t i = 0;
    memset(p, 0, sizeof *p);
    p->router_w = grad ? t->s[i].g : t->s[i].w;
    i++;
    ffn_layer_config lc = ffn_moe_expert_config(c, 0);
    for (int64_t e = 0; e < c->num_experts; e++) bind_layer(&experts[e], t, &i, &lc, grad);
    p->experts = experts;
    if (c->shared_expert_intermediate_size > 0) {
        lc = ffn_moe_expert_config(c, 1);
        bind_layer(&p->shared, t, &i, &lc, grad);
        p->shared_gate_w = grad ? t->s[i].g : t->s[i].w;
        i++;
    }
    if (c->n_shared_experts > 0) {
        lc = ffn_moe_expert_config(c, 2);
        bind_layer(&p->shared_experts, t, &i, &lc, grad);
    }
}

static int by_cstr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The weights file's naming: a prefix before every name (found from the
 * router, "gate.weight") and Mixtral's w1 / w2 / w3 or not.  0, or 1 with
 * the error printed. */
static int find_naming(ffn_st_file *wf, const char *path, char *prefix, size_t cap,
                       int *mixtral) {
    prefix[0] = '\0';
    *mixtral = 0;
    const char *router = NULL;
    if (!ffn_st_has(wf, "gate.weight")) {
        const char *suffix = ".gate.weight", *shared = "shared_expert_gate.weight";
        const size_t ls = strlen(suffix), lsh = strlen(shared);
        for (size_t i = 0; i < ffn_st_count(wf); i++) {
            ffn_st_tensor info;
            if (ffn_st_get(wf, i, &info) != FFN_OK) continue;
            size_t n = strlen(info.name);
            if (n <= ls || strcmp(info.name + n - ls, suffix)) continue;
            if (n >= lsh && !strcmp(info.name + n - lsh, shared)) continue;
            if (router) {
                cli_error("layer", "%s: two routers, %s and %s: give the tensors of one MoE layer",
                          path, router, info.name);
                return 1;
            }
            router = info.name;
            if (n - ls + 1 >= cap) {
                cli_error("layer", "%s: %s: name too long", path, info.name);
                return 1;
            }
            memcpy(prefix, info.name, n - ls + 1);
            prefix[n - ls + 1] = '\0';
        }
    }
    static const char *const w[] = {"w1", "w2", "w3"};
    char name[256];
    for (int i = 0; i < 3 && !*mixtral; i++) {
        snprintf(name, sizeof name, "%sexperts.0.%s.weight", prefix, w[i]);
        *mixtral = ffn_st_has(wf, name);
    }
    return 0;
}

/* The file's name of table entry `name` under the naming found. */
static void file_name_for(char *out, size_t cap, const char *name, const char *prefix,
                          int mixtral) {
    long long e;
    char kind[16], rest[16];
    int used = 0;
    if (mixtral && sscanf(name, "experts.%lld.%15[a-z]_proj.%15[a-z]%n", &e, kind, rest, &used) == 3 &&
        (size_t)used == strlen(name)) {
        const char *w = !strcmp(kind, "gate") ? "w1" : !strcmp(kind, "down") ? "w2" : "w3";
        snprintf(out, cap, "%sexperts.%lld.%s.%s", prefix, e, w, rest);
        return;
    }
    snprintf(out, cap, "%s%s", prefix, name);
}

/* ---- ffn layer on an MoE config ----------------------------------------------- */

#define CMD "layer"

int layer_run_moe(const char *config_path, const char *weights_path, const char *input_path,
                  const char *output_path, int backward, int threads, int precision) {
    int rc = CLI_EXIT_FAIL;
    ffn_status st;
    ffn_moe_config cfg;
    ffn_st_file *wf = NULL, *inf = NULL;
    ffn_ctx *ctx = NULL;
    ffn_moe *moe = NULL;
    ffn_st_writer *wr = NULL;
    table t = {0};
    ffn_layer_params *ex_w = NULL, *ex_g = NULL;
    float *x = NULL, *dy = NULL, *y = NULL, *logits = NULL, *tw = NULL, *dx = NULL;
    int32_t *ids = NULL, *tpe32 = NULL;
    int64_t *tpe = NULL;
    void *ws = NULL, *saved = NULL;
    const char **sorted = NULL;

    if ((st = ffn_moe_config_load(config_path, &cfg))) return cli_fail(CMD, st);
    cfg.precision = (ffn_precision)precision; /* --precision: the experts' products */
    if ((st = ffn_st_open(weights_path, &wf))) return cli_fail(CMD, st);
    char prefix[160];
    int mixtral_names = 0;
    if (find_naming(wf, weights_path, prefix, sizeof prefix, &mixtral_names)) goto out;
    if (cfg.expert_type == FFN_MLP_AUTO) {
        char g[192];
        file_name_for(g, sizeof g, "experts.0.gate_proj.weight", prefix, mixtral_names);
        cfg.expert_type = ffn_st_has(wf, g) ? FFN_MLP_GATED : FFN_MLP_DENSE;
    }
    const int64_t D = cfg.hidden_size, E = cfg.num_experts, K = cfg.num_experts_per_tok;
    /* The routing in use, in one line: configs leave some of it implicit. */
    char cap_s[48], scale_s[48] = "";
    if (cfg.capacity_factor > 0) snprintf(cap_s, sizeof cap_s, "capacity factor %g", cfg.capacity_factor);
    else snprintf(cap_s, sizeof cap_s, "dropless");
    if (cfg.routed_scaling_factor != 1.0)
        snprintf(scale_s, sizeof scale_s, ", scaled by %g", cfg.routed_scaling_factor);
    fprintf(stderr, "ffn %s: routing: %s scoring, top-%lld of %lld experts, %s%s, %s\n", CMD,
            ffn_moe_scoring_name(cfg.scoring), (long long)K, (long long)E,
            cfg.norm_topk_prob ? "renormalised" : "not renormalised", scale_s, cap_s);

    /* Weights: every tensor the config implies, with its shape; nothing else. */
    build_table(&t, &cfg);
    for (size_t i = 0; i < t.n; i++) {
        slot *s = &t.s[i];
        file_name_for(s->file_name, sizeof s->file_name, s->name, prefix, mixtral_names);
        if (!ffn_st_has(wf, s->file_name)) {
            char shp[64];
            if (s->ndim == 2)
                snprintf(shp, sizeof shp, "[%lld, %lld]", (long long)s->shape[0], (long long)s->shape[1]);
            else
                snprintf(shp, sizeof shp, "[%lld]", (long long)s->shape[0]);
            cli_error(CMD, "%s: %s: missing (the config %s implies this tensor, shape %s)",
                      weights_path, s->file_name, config_path, shp);
            goto out;
        }
        if ((st = ffn_st_load_f32(wf, s->file_name, s->ndim, s->shape, &s->w))) {
            rc = cli_fail(CMD, st);
            goto out;
        }
    }
    /* Anything else in the file is an error (sorted names: E may be large). */
    sorted = malloc((t.n + 1) * sizeof *sorted);
    if (!sorted) goto nomem;
    for (size_t i = 0; i < t.n; i++) sorted[i] = t.s[i].file_name;
    qsort(sorted, t.n, sizeof *sorted, by_cstr);
    for (size_t i = 0; i < ffn_st_count(wf); i++) {
        ffn_st_tensor info;
        const char *key;
        if (ffn_st_get(wf, i, &info) == FFN_OK && (key = info.name) &&
            !bsearch(&key, sorted, t.n, sizeof *sorted, by_cstr)) {
            cli_error(CMD,
                      "%s: %s: unexpected tensor for this config (num_experts = %lld, "
                      "mlp_bias = %s, experts %s, shared_expert_intermediate_size = %lld, "
                      "n_shared_experts = %lld)",
                      weights_path, info.name, (long long)E, cfg.bias ? "true" : "false",
                      ffn_mlp_type_name(cfg.expert_type),
                      (long long)cfg.shared_expert_intermediate_size, (long long)cfg.n_shared_experts);
            goto out;
        }
    }

    /* Inputs: x (N, D), and dy (N, D) for backward. */
    if ((st = ffn_st_open(input_path, &inf))) {
        rc = cli_fail(CMD, st);
        goto out;
    }
    ffn_st_tensor xi;
    if ((st = ffn_st_find(inf, "x", &xi))) {
        rc = cli_fail(CMD, st);
        goto out;
    }
    if (xi.ndim != 2 || xi.shape[1] != D) {
        cli_error(CMD, "%s: x: expected shape [N, %lld] (hidden_size from %s), found %d dims [%lld%s%lld]",
                  input_path, (long long)D, config_path, xi.ndim, (long long)xi.shape[0],
                  xi.ndim > 1 ? ", " : "", (long long)(xi.ndim > 1 ? xi.shape[1] : 0));
        goto out;
    }
    const int64_t N = xi.shape[0];
    int64_t nd[2] = {N, D};
    if ((st = ffn_st_load_f32(inf, "x", 2, nd, &x))) {
        rc = cli_fail(CMD, st);
        goto out;
    }
    if (backward && (st = ffn_st_load_f32(inf, "dy", 2, nd, &dy))) {
        rc = cli_fail(CMD, st);
        goto out;
    }

    /* The layer. */
    if (cli_make_ctx(CMD, threads, &ctx)) goto out;
    if ((st = ffn_moe_create(ctx, &cfg, &moe))) {
        rc = cli_fail(CMD, st);
        goto out;
    }
    ex_w = calloc((size_t)E, sizeof *ex_w);
    ex_g = calloc((size_t)E, sizeof *ex_g);
    if (!ex_w || !ex_g) goto nomem;
    ffn_moe_params wp, gp;
    bind_params(&wp, ex_w, &t, &cfg, 0);
    if ((st = ffn_moe_set_weights(moe, &wp))) {
        rc = cli_fail(CMD, st);
        goto out;
    }
    size_t ws_bytes = ffn_moe_workspace_size(moe, N), saved_bytes = ffn_moe_saved_size(moe, N);
    if (ws_bytes == SIZE_MAX || saved_bytes == SIZE_MAX) {
        cli_error(CMD, "%s: x: N = %lld tokens make the workspace overflow", input_path, (long long)N);
        goto out;
    }
    size_t nd_n = (size_t)(N * D) + 1, ne_n = (size_t)(N * E) + 1, nk_n = (size_t)(N * K) + 1;
    y = malloc(nd_n * sizeof *y);
    logits = malloc(ne_n * sizeof *logits);
    tw = malloc(nk_n * sizeof *tw);
    ids = malloc(nk_n * sizeof *ids);
    tpe = malloc((size_t)E * sizeof *tpe);
    tpe32 = malloc((size_t)E * sizeof *tpe32);
    ws = malloc(ws_bytes + 1);
    if (backward) saved = malloc(saved_bytes + 1);
    if (!y || !logits || !tw || !ids || !tpe || !tpe32 || !ws || (backward && !saved)) goto nomem;

    ffn_moe_outputs o = {.y = y, .router_logits = logits, .topk_ids = ids, .topk_weights = tw,
                         .tokens_per_expert = tpe};
    if ((st = ffn_moe_forward(moe, &o, x, N, saved, ws, ws_bytes))) {
        rc = cli_fail(CMD, st);
        goto out;
    }
    for (int64_t e = 0; e < E; e++) tpe32[e] = tpe[e] > INT32_MAX ? INT32_MAX : (int32_t)tpe[e];
    float aux = (float)o.aux_loss, zl = (float)o.z_loss;

    if ((st = ffn_st_writer_create(&wr))) {
        rc = cli_fail(CMD, st);
        goto out;
    }
    int64_t ne[2] = {N, E}, nk[2] = {N, K}, e1[1] = {E}, one[1] = {1};
    if ((st = ffn_st_writer_add(wr, "y", FFN_DTYPE_F32, 2, nd, y)) ||
        (st = ffn_st_writer_add(wr, "router_logits", FFN_DTYPE_F32, 2, ne, logits)) ||
        (st = ffn_st_writer_add(wr, "topk_ids", FFN_DTYPE_I32, 2, nk, ids)) ||
        (st = ffn_st_writer_add(wr, "topk_weights", FFN_DTYPE_F32, 2, nk, tw)) ||
        (st = ffn_st_writer_add(wr, "tokens_per_expert", FFN_DTYPE_I32, 1, e1, tpe32)) ||
        (st = ffn_st_writer_add_copy(wr, "aux_loss", FFN_DTYPE_F32, 1, one, &aux)) ||
        (st = ffn_st_writer_add_copy(wr, "z_loss", FFN_DTYPE_F32, 1, one, &zl))) {
        rc = cli_fail(CMD, st);
        goto out;
    }

    if (backward) {
        for (size_t i = 0; i < t.n; i++) {
            int64_t cnt = t.s[i].shape[0] * (t.s[i].ndim == 2 ? t.s[i].shape[1] : 1);
            if (!(t.s[i].g = calloc((size_t)cnt + 1, sizeof(float)))) goto nomem;
        }
        if (!(dx = malloc(nd_n * sizeof *dx))) goto nomem;
        bind_params(&gp, ex_g, &t, &cfg, 1);
        if ((st = ffn_moe_backward(moe, dx, &gp, dy, x, N, saved, ws, ws_bytes))) {
            rc = cli_fail(CMD, st);
            goto out;
        }
        if ((st = ffn_st_writer_add(wr, "dx", FFN_DTYPE_F32, 2, nd, dx))) {
            rc = cli_fail(CMD, st);
            goto out;
        }
        char gname[224];
        for (size_t i = 0; i < t.n; i++) {
            snprintf(gname, sizeof gname, "grad.%s", t.s[i].file_name);
            if ((st = ffn_st_writer_add(wr, gname, FFN_DTYPE_F32, t.s[i].ndim, t.s[i].shape, t.s[i].g))) {
                rc = cli_fail(CMD, st);
                goto out;
            }
        }
    }
    if ((st = ffn_st_writer_save(wr, output_path))) {
        rc = cli_fail(CMD, st);
        goto out;
    }
    rc = 0;
    goto out;
nomem:
    cli_error(CMD, "out of memory");
    rc = CLI_EXIT_FAIL;
out:
    ffn_st_writer_free(wr);
    free(x); free(dy); free(y); free(logits); free(tw); free(dx); free(ids); free(tpe); free(tpe32);
    free(ws); free(saved); free(ex_w); free(ex_g);
    free(sorted);
    table_free(&t);
    ffn_moe_free(moe);
    ffn_ctx_free(ctx);
    ffn_st_close(inf);
    ffn_st_close(wf);
    return rc;
}
#undef CMD

/* ---- ffn bench moe ----------------------------------------------------------------- */

#define CMD "bench moe"

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void stats(double *t, int n, double *mn, double *med) {
    qsort(t, (size_t)n, sizeof *t, cmp_d);
    *mn = t[0];
    *med = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* uniform in [-scale, scale), from the library's generator */
static void bench_fill(ffn_rng *r, float *a, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) a[i] = scale * (2.0f * ffn_rng_float(r) - 1.0f);
}

static const char bench_about[] =
    "Times a Mixture-of-Experts layer with SwiGLU experts (softmax routing, top-k\n"
    "renormalised, dropless) on random weights: forward and forward+backward, min and\n"
    "median over R repeats (after one warm-up).  Each repeat uses a fresh random\n"
    "input, so the routing (and for small N, which experts' weights are read) varies\n"
    "as it would in decoding.  In the same process it times a dense SwiGLU layer of\n"
    "the same active width (intermediate K·F) and prints the ratio MoE/dense.\n"
    "It also prints the bytes the MoE forward must read: the router (E·D floats) plus\n"
    "the weights of the experts that received tokens (3·F·D floats each), averaged\n"
    "over the repeats, against the bytes of all E experts.\n";

typedef struct bench_result {
    double fwd_min, fwd_med, fb_min, fb_med;
} bench_result;

int cmd_bench_moe(int argc, char **argv) {
    int64_t E = 8, K = 2, D = 1024, F = 1408, N = 512, threads = 0, repeats = -1;
    int json = 0;
    const cli_opt opts[] = {
        {.name = "--experts", .type = CLI_INT, .dst = &E, .metavar = "E", .imin = 1,
         .imax = 1 << 16, .help = "experts"},
        {.name = "--top-k", .type = CLI_INT, .dst = &K, .metavar = "K", .imin = 1,
         .imax = 1 << 16, .help = "experts per token"},
        CLI_OPT_HIDDEN(&D),
        CLI_OPT_INTERMEDIATE(&F, "width of each expert"),
        {CLI_INT_FIELDS("--tokens", &N, "N", 1, 1 << 24, "rows per call")},
        CLI_OPT_THREADS(&threads),
        CLI_OPT_REPEATS(&repeats, "10; 50 when N <= 8", "timed runs"),
        CLI_OPT_JSON(&json, "one JSON object on stdout"),
        {0}};
    const cli_spec spec = {.cmd = "bench moe", .about = bench_about, .opts = opts};
    int prc;
    if (cli_parse(&spec, argc, argv, &prc)) return prc;
    if (K > E) {
        cli_error(CMD, "--top-k: must be <= --experts (%lld), got %lld", (long long)E, (long long)K);
        return CLI_EXIT_USAGE;
    }
    if (repeats < 0) repeats = N <= 8 ? 50 : 10;

    ffn_ctx *ctx = NULL;
    if (cli_make_ctx(CMD, (int)threads, &ctx)) return CLI_EXIT_FAIL;
    ffn_moe_config cfg = {.hidden_size = D, .num_experts = E, .num_experts_per_tok = K,
                          .moe_intermediate_size = F, .act = FFN_ACT_SILU,
                          .expert_type = FFN_MLP_GATED, .norm_topk_prob = 1,
                          .routed_scaling_factor = 1, .router_aux_loss_coef = 0.01,
                          .router_z_loss_coef = 0.001};
    ffn_layer_config dcfg = {.hidden_size = D, .intermediate_size = F * K, .act = FFN_ACT_SILU,
                             .type = FFN_MLP_GATED};
    int rc = CLI_EXIT_FAIL;
    ffn_status st;
    ffn_moe *moe = NULL;
    ffn_layer *dense = NULL;
    size_t DF = (size_t)(D * F), nd = (size_t)(N * D);
    int pool = (int)repeats + 1;
    float *wall = malloc(sizeof(float) * ((size_t)E * 3 * DF + (size_t)(E * D)));
    float *gall = calloc((size_t)E * 3 * DF + (size_t)(E * D), sizeof(float));
    float *dw = malloc(sizeof(float) * 3 * DF * (size_t)K);
    float *dg = calloc(3 * DF * (size_t)K, sizeof(float));
    float *xs = malloc(sizeof(float) * nd * (size_t)pool), *dy = malloc(sizeof(float) * nd);
    float *y = malloc(sizeof(float) * nd), *dx = malloc(sizeof(float) * nd);
    ffn_layer_params *ew = calloc((size_t)E, sizeof *ew), *eg = calloc((size_t)E, sizeof *eg);
    double *tf = malloc(sizeof(double) * (size_t)repeats), *tb = malloc(sizeof(double) * (size_t)repeats);
    void *ws = NULL, *saved = NULL, *dws = NULL, *dsaved = NULL;
    int64_t *tpe = malloc(sizeof(int64_t) * (size_t)E);
    if (!wall || !gall || !dw || !dg || !xs || !dy || !y || !dx || !ew || !eg || !tf || !tb || !tpe) {
        cli_error(CMD, "out of memory");
        goto out;
    }
    ffn_rng rng;
    ffn_rng_seed(&rng, 1);
    bench_fill(&rng, wall, (size_t)E * 3 * DF + (size_t)(E * D), 1.0f / sqrtf((float)D));
    bench_fill(&rng, dw, 3 * DF * (size_t)K, 1.0f / sqrtf((float)D));
    bench_fill(&rng, xs, nd * (size_t)pool, 1.0f);
    bench_fill(&rng, dy, nd, 1.0f);
    for (int64_t e = 0; e < E; e++) {
        ew[e] = (ffn_layer_params){.gate_w = wall + (size_t)e * 3 * DF, .up_w = wall + (size_t)e * 3 * DF + DF,
                                   .down_w = wall + (size_t)e * 3 * DF + 2 * DF};
        eg[e] = (ffn_layer_params){.gate_w = gall + (size_t)e * 3 * DF, .up_w = gall + (size_t)e * 3 * DF + DF,
                                   .down_w = gall + (size_t)e * 3 * DF + 2 * DF};
    }
    ffn_moe_params wp = {.router_w = wall + (size_t)E * 3 * DF, .experts = ew};
    ffn_moe_params gp = {.router_w = gall + (size_t)E * 3 * DF, .experts = eg};
    if ((st = ffn_moe_create(ctx, &cfg, &moe)) || (st = ffn_moe_set_weights(moe, &wp)) ||
        (st = ffn_layer_create(ctx, &dcfg, &dense))) {
        rc = cli_fail(CMD, st);
        goto out;
    }
    ffn_layer_params dwp = {.gate_w = dw, .up_w = dw + DF * (size_t)K, .down_w = dw + 2 * DF * (size_t)K};
    ffn_layer_params dgp = {.gate_w = dg, .up_w = dg + DF * (size_t)K, .down_w = dg + 2 * DF * (size_t)K};
    if ((st = ffn_layer_set_weights(dense, &dwp))) {
        rc = cli_fail(CMD, st);
        goto out;
    }
    size_t wsb = ffn_moe_workspace_size(moe, N), svb = ffn_moe_saved_size(moe, N);
    size_t dwsb = ffn_layer_workspace_size(dense, N), dsvb = ffn_layer_saved_size(dense, N);
    ws = malloc(wsb + 1);
    saved = malloc(svb + 1);
    dws = malloc(dwsb + 1);
    dsaved = malloc(dsvb + 1);
    if (!ws || !saved || !dws || !dsaved) {
        cli_error(CMD, "out of memory");
        goto out;
    }

    /* Forward (inference) and forward+backward of the MoE and of the dense
     * layer, interleaved within each repeat so that a busy machine slows
     * both alike; a fresh input each repeat. */
    bench_result mr, dr;
    double experts_run = 0;
    double *tdf = malloc(sizeof(double) * (size_t)repeats), *tdb = malloc(sizeof(double) * (size_t)repeats);
    if (!tdf || !tdb) {
        free(tdf); free(tdb);
        cli_error(CMD, "out of memory");
        goto out;
    }
    for (int64_t r = -1; r < repeats && !st; r++) {
        const float *x = xs + nd * (size_t)(r + 1);
        double t[5];
        ffn_moe_outputs o = {.y = y, .tokens_per_expert = tpe};
        t[0] = cli_seconds();
        st = ffn_moe_forward(moe, &o, x, N, NULL, ws, wsb);
        t[1] = cli_seconds();
        if (!st) st = ffn_layer_forward(dense, y, x, N, NULL, dws, dwsb);
        t[2] = cli_seconds();
        if (!st) st = ffn_moe_forward(moe, &o, x, N, saved, ws, wsb);
        if (!st) st = ffn_moe_backward(moe, dx, &gp, dy, x, N, saved, ws, wsb);
        t[3] = cli_seconds();
        if (!st) st = ffn_layer_forward(dense, y, x, N, dsaved, dws, dwsb);
        if (!st) st = ffn_layer_backward(dense, dx, &dgp, dy, x, N, dsaved, dws, dwsb);
        t[4] = cli_seconds();
        if (!st && r >= 0) {
            for (int64_t e = 0; e < E; e++) experts_run += tpe[e] > 0;
            tf[r] = t[1] - t[0];
            tdf[r] = t[2] - t[1];
            tb[r] = t[3] - t[2];
            tdb[r] = t[4] - t[3];
        }
    }
    if (st) {
        free(tdf); free(tdb);
        rc = cli_fail(CMD, st);
        goto out;
    }
    stats(tf, (int)repeats, &mr.fwd_min, &mr.fwd_med);
    stats(tb, (int)repeats, &mr.fb_min, &mr.fb_med);
    stats(tdf, (int)repeats, &dr.fwd_min, &dr.fwd_med);
    stats(tdb, (int)repeats, &dr.fb_min, &dr.fb_med);
    free(tdf);
    free(tdb);
    experts_run /= (double)repeats;
    double flops_fwd = (double)N * (2.0 * (double)(D * E) + 6.0 * (double)K * (double)DF);
    double bytes_router = 4.0 * (double)(E * D), bytes_expert = 4.0 * 3.0 * (double)DF;
    double bytes_read = bytes_router + experts_run * bytes_expert;
    double bytes_active = (double)(N * K < E ? N * K : E) * bytes_expert; /* at most min(N·K, E) run */
    double bytes_all = (double)E * bytes_expert;
    if (json) {
        printf(
            "{\"bench\": \"moe\", \"experts\": %lld, \"top_k\": %lld, \"hidden\": %lld, "
            "\"intermediate\": %lld, \"tokens\": %lld, \"threads\": %d, \"repeats\": %lld,\n"
            " \"moe\": {\"forward\": {\"min_s\": %s, \"median_s\": %s}, "
            "\"forward_backward\": {\"min_s\": %s, \"median_s\": %s}},\n"
            " \"dense\": {\"intermediate\": %lld, \"forward\": {\"min_s\": %s, \"median_s\": %s}, "
            "\"forward_backward\": {\"min_s\": %s, \"median_s\": %s}},\n"
            " \"ratio_moe_dense_forward\": %s, \"ratio_moe_dense_forward_backward\": %s,\n"
            " \"forward_gflops\": %s, \"experts_run_avg\": %s, \"bytes_router\": %s, "
            "\"bytes_per_expert\": %s, \"bytes_forward_weights\": %s, "
            "\"bytes_k_experts_bound\": %s, \"bytes_all_experts\": %s, "
            "\"forward_weight_GBps\": %s}\n",
            (long long)E, (long long)K, (long long)D, (long long)F, (long long)N,
            ffn_ctx_threads(ctx), (long long)repeats, cli_json_num(mr.fwd_min, "%.6e"),
            cli_json_num(mr.fwd_med, "%.6e"), cli_json_num(mr.fb_min, "%.6e"),
            cli_json_num(mr.fb_med, "%.6e"), (long long)(F * K), cli_json_num(dr.fwd_min, "%.6e"),
            cli_json_num(dr.fwd_med, "%.6e"), cli_json_num(dr.fb_min, "%.6e"),
            cli_json_num(dr.fb_med, "%.6e"), cli_json_num(mr.fwd_med / dr.fwd_med, "%.4f"),
            cli_json_num(mr.fb_med / dr.fb_med, "%.4f"),
            cli_json_num(flops_fwd / mr.fwd_med * 1e-9, "%.3f"), cli_json_num(experts_run, "%.3f"),
            cli_json_num(bytes_router, "%.0f"), cli_json_num(bytes_expert, "%.0f"),
            cli_json_num(bytes_read, "%.0f"), cli_json_num(bytes_active, "%.0f"),
            cli_json_num(bytes_all, "%.0f"), cli_json_num(bytes_read / mr.fwd_min * 1e-9, "%.3f"));
    } else {
        printf("moe: E=%lld K=%lld D=%lld F=%lld (SwiGLU experts) N=%lld threads=%d repeats=%lld\n",
               (long long)E, (long long)K, (long long)D, (long long)F, (long long)N, ffn_ctx_threads(ctx),
               (long long)repeats);
        printf("  %-22s %12s %12s\n", "", "min", "median");
        printf("  %-22s %9.3f ms %9.3f ms  (%.1f GFLOP/s active)\n", "moe forward", mr.fwd_min * 1e3,
               mr.fwd_med * 1e3, flops_fwd / mr.fwd_med * 1e-9);
        printf("  %-22s %9.3f ms %9.3f ms\n", "moe forward+backward", mr.fb_min * 1e3, mr.fb_med * 1e3);
        printf("  %-22s %9.3f ms %9.3f ms  (dense SwiGLU, F=%lld)\n", "dense forward", dr.fwd_min * 1e3,
               dr.fwd_med * 1e3, (long long)(F * K));
        printf("  %-22s %9.3f ms %9.3f ms\n", "dense forward+backward", dr.fb_min * 1e3, dr.fb_med * 1e3);
        printf("  ratio moe/dense (median): forward %.3f  forward+backward %.3f\n",
               mr.fwd_med / dr.fwd_med, mr.fb_med / dr.fb_med);
        printf("  experts run per forward: %.2f of %lld; weight bytes read %.1f MB (router %.2f MB + "
               "%.2f MB per expert), all experts %.1f MB; %.1f GB/s at the min time\n",
               experts_run, (long long)E, bytes_read / 1e6, bytes_router / 1e6, bytes_expert / 1e6,
               bytes_all / 1e6, bytes_read / mr.fwd_min * 1e-9);
    }
    rc = 0;
out:
    ffn_moe_free(moe);
    ffn_layer_free(dense);
    ffn_ctx_free(ctx);
    free(wall); free(gall); free(dw); free(dg); free(xs); free(dy); free(y); free(dx);
    free(ew); free(eg); free(tf); free(tb); free(ws); free(saved); free(dws); free(dsaved); free(tpe);
    return rc;
}
