/* test_moe.c -- Mixture of Experts against a naive per-token reference in
 * double precision written here: forward (y, routing, counts, losses) for
 * softmax/sigmoid scoring, renormalisation, scaling, capacity, shared
 * experts, dense and gated experts; backward against central differences
 * of the reference loss L = Σ y⊙dy + c_aux·aux + c_z·z; determinism; and
 * bad configs, each with its specific error.
 *
 * Letters: N tokens, D hidden, F expert width, E experts, K top-k. */
#include "check.h"
#include "ffn.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- deterministic random numbers ---------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double urand(void) { /* [0, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}
static void fill(float *a, int64_t n, double scale) {
    for (int64_t i = 0; i < n; i++) a[i] = (float)((2 * urand() - 1) * scale);
}

/* ---- one test problem: config, weights, gradients ------------------------- */

typedef struct problem {
    ffn_moe_config cfg;
    int64_t N;
    float *x, *dy;          /* (N, D) */
    float *wr;              /* (E, D) */
    float *wsg;             /* (D) */
    ffn_layer_params *ex;   /* E experts */
    ffn_layer_params sh, sx; /* shared_expert, shared_experts */
} problem;

static void alloc_layer(ffn_layer_params *p, const ffn_layer_config *lc, double scale) {
    int64_t D = lc->hidden_size, F = lc->intermediate_size;
    memset(p, 0, sizeof *p);
    if (lc->type == FFN_MLP_GATED) {
        p->gate_w = malloc(sizeof(float) * (size_t)(F * D));
        fill(p->gate_w, F * D, scale);
    }
    p->up_w = malloc(sizeof(float) * (size_t)(F * D));
    fill(p->up_w, F * D, scale);
    p->down_w = malloc(sizeof(float) * (size_t)(D * F));
    fill(p->down_w, D * F, scale);
    if (lc->bias) {
        if (p->gate_w) {
            p->gate_b = malloc(sizeof(float) * (size_t)F);
            fill(p->gate_b, F, 0.1);
        }
        p->up_b = malloc(sizeof(float) * (size_t)F);
        fill(p->up_b, F, 0.1);
        p->down_b = malloc(sizeof(float) * (size_t)D);
        fill(p->down_b, D, 0.1);
    }
}
static void zero_like(ffn_layer_params *g, const ffn_layer_params *p, const ffn_layer_config *lc) {
    int64_t D = lc->hidden_size, F = lc->intermediate_size;
    memset(g, 0, sizeof *g);
    if (p->gate_w) g->gate_w = calloc((size_t)(F * D), sizeof(float));
    if (p->gate_b) g->gate_b = calloc((size_t)F, sizeof(float));
    if (p->up_w) g->up_w = calloc((size_t)(F * D), sizeof(float));
    if (p->up_b) g->up_b = calloc((size_t)F, sizeof(float));
    if (p->down_w) g->down_w = calloc((size_t)(D * F), sizeof(float));
    if (p->down_b) g->down_b = calloc((size_t)D, sizeof(float));
}
static void free_layer(ffn_layer_params *p) {
    free(p->gate_w); free(p->gate_b); free(p->up_w); free(p->up_b); free(p->down_w); free(p->down_b);
}

static void make_problem(problem *P, const ffn_moe_config *cfg, int64_t N) {
    memset(P, 0, sizeof *P);
    P->cfg = *cfg;
    P->N = N;
    int64_t D = cfg->hidden_size, E = cfg->num_experts;
    P->x = malloc(sizeof(float) * (size_t)(N * D + 1));
    P->dy = malloc(sizeof(float) * (size_t)(N * D + 1));
    fill(P->x, N * D, 1.0);
    fill(P->dy, N * D, 1.0);
    P->wr = malloc(sizeof(float) * (size_t)(E * D));
    fill(P->wr, E * D, 0.5);
    P->wsg = malloc(sizeof(float) * (size_t)D);
    fill(P->wsg, D, 0.5);
    P->ex = calloc((size_t)E, sizeof *P->ex);
    ffn_layer_config lc = ffn_moe_expert_config(cfg, 0);
    for (int64_t e = 0; e < E; e++) alloc_layer(&P->ex[e], &lc, 0.4);
    if (cfg->shared_expert_intermediate_size > 0) {
        lc = ffn_moe_expert_config(cfg, 1);
        alloc_layer(&P->sh, &lc, 0.4);
    }
    if (cfg->n_shared_experts > 0) {
        lc = ffn_moe_expert_config(cfg, 2);
        alloc_layer(&P->sx, &lc, 0.4);
    }
}
static void free_problem(problem *P) {
    free(P->x); free(P->dy); free(P->wr); free(P->wsg);
    for (int64_t e = 0; e < P->cfg.num_experts; e++) free_layer(&P->ex[e]);
    free(P->ex);
    free_layer(&P->sh);
    free_layer(&P->sx);
}
static ffn_moe_params params_of(problem *P) {
    ffn_moe_params w = {.router_w = P->wr, .experts = P->ex, .shared = P->sh,
                        .shared_gate_w = P->cfg.shared_expert_intermediate_size > 0 ? P->wsg : NULL,
                        .shared_experts = P->sx};
    return w;
}

/* ---- the naive reference, in double ---------------------------------------- */

static double act_d(ffn_act a, double v) {
    switch (a) {
    case FFN_ACT_LINEAR: return v;
    case FFN_ACT_RELU: return v > 0 ? v : 0;
    case FFN_ACT_GELU: return 0.5 * v * (1 + erf(v / sqrt(2.0)));
    case FFN_ACT_GELU_TANH: return 0.5 * v * (1 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    case FFN_ACT_SILU: return v / (1 + exp(-v));
    case FFN_ACT_SIGMOID: return 1 / (1 + exp(-v));
    }
    return 0;
}

/* out (D) = expert(x (D)) */
static void ref_layer(double *out, const float *x, const ffn_layer_params *p, const ffn_layer_config *lc) {
    int64_t D = lc->hidden_size, F = lc->intermediate_size;
    double *h = malloc(sizeof(double) * (size_t)F);
    for (int64_t f = 0; f < F; f++) {
        double u = p->up_b ? p->up_b[f] : 0;
        for (int64_t d = 0; d < D; d++) u += (double)p->up_w[f * D + d] * x[d];
        if (lc->type == FFN_MLP_GATED) {
            double g = p->gate_b ? p->gate_b[f] : 0;
            for (int64_t d = 0; d < D; d++) g += (double)p->gate_w[f * D + d] * x[d];
            h[f] = act_d(lc->act, g) * u;
        } else {
            h[f] = act_d(lc->act, u);
        }
    }
    for (int64_t d = 0; d < D; d++) {
        double s = p->down_b ? p->down_b[d] : 0;
        for (int64_t f = 0; f < F; f++) s += (double)p->down_w[d * F + f] * h[f];
        out[d] = s;
    }
    free(h);
}

typedef struct ref_out {
    double *y;      /* (N, D) */
    int32_t *ids;   /* (N, K) */
    double *w;      /* (N, K) */
    int64_t *counts;
    int64_t dropped;
    double aux, z, L;
} ref_out;

static void ref_forward(ref_out *o, const problem *P) {
    const ffn_moe_config *c = &P->cfg;
    int64_t N = P->N, D = c->hidden_size, E = c->num_experts, K = c->num_experts_per_tok;
    o->y = calloc((size_t)(N * D + 1), sizeof(double));
    o->ids = calloc((size_t)(N * K + 1), sizeof(int32_t));
    o->w = calloc((size_t)(N * K + 1), sizeof(double));
    o->counts = calloc((size_t)E, sizeof(int64_t));
    double *l = malloc(sizeof(double) * (size_t)E), *p = malloc(sizeof(double) * (size_t)E);
    double *psum = calloc((size_t)E, sizeof(double)), *tmp = malloc(sizeof(double) * (size_t)D);
    int64_t cap = N * K;
    if (c->capacity_factor > 0) {
        cap = (int64_t)ceil(c->capacity_factor * (double)(N * K) / (double)E);
        if (cap > N * K) cap = N * K;
    }
    int64_t *fill_ = calloc((size_t)E, sizeof(int64_t));
    o->dropped = 0;
    o->z = 0;
    for (int64_t t = 0; t < N; t++) {
        const float *xt = P->x + t * D;
        double mx = -INFINITY, s = 0;
        for (int64_t e = 0; e < E; e++) {
            l[e] = 0;
            for (int64_t d = 0; d < D; d++) l[e] += (double)P->wr[e * D + d] * xt[d];
            if (l[e] > mx) mx = l[e];
        }
        for (int64_t e = 0; e < E; e++) s += exp(l[e] - mx);
        double lse = mx + log(s);
        o->z += lse * lse;
        double ps = 0;
        for (int64_t e = 0; e < E; e++) {
            p[e] = c->scoring == FFN_MOE_SCORING_SOFTMAX ? exp(l[e] - lse) : 1 / (1 + exp(-l[e]));
            ps += p[e];
        }
        for (int64_t e = 0; e < E; e++)
            psum[e] += c->scoring == FFN_MOE_SCORING_SOFTMAX ? p[e] : p[e] / (ps + 1e-20);
        int32_t *id = o->ids + t * K;
        for (int64_t j = 0; j < K; j++) { /* ties to the lower index */
            int64_t best = -1;
            for (int64_t e = 0; e < E; e++) {
                int taken = 0;
                for (int64_t i = 0; i < j; i++) taken |= id[i] == e;
                if (!taken && (best < 0 || p[e] > p[best])) best = e;
            }
            id[j] = (int32_t)best;
            o->counts[best]++;
        }
        double z = 1;
        if (c->norm_topk_prob) {
            z = 1e-20;
            for (int64_t j = 0; j < K; j++) z += p[id[j]];
        }
        for (int64_t j = 0; j < K; j++) {
            double w = c->routed_scaling_factor * p[id[j]] / z;
            o->w[t * K + j] = w;
            int64_t e = id[j];
            if (fill_[e]++ >= cap) {
                o->dropped++;
                continue;
            }
            ffn_layer_config lc = ffn_moe_expert_config(c, 0);
            ref_layer(tmp, xt, &P->ex[e], &lc);
            for (int64_t d = 0; d < D; d++) o->y[t * D + d] += w * tmp[d];
        }
        if (c->shared_expert_intermediate_size > 0) {
            ffn_layer_config lc = ffn_moe_expert_config(c, 1);
            ref_layer(tmp, xt, &P->sh, &lc);
            double g = 0;
            for (int64_t d = 0; d < D; d++) g += (double)P->wsg[d] * xt[d];
            g = 1 / (1 + exp(-g));
            for (int64_t d = 0; d < D; d++) o->y[t * D + d] += g * tmp[d];
        }
        if (c->n_shared_experts > 0) {
            ffn_layer_config lc = ffn_moe_expert_config(c, 2);
            ref_layer(tmp, xt, &P->sx, &lc);
            for (int64_t d = 0; d < D; d++) o->y[t * D + d] += tmp[d];
        }
    }
    o->aux = 0;
    if (N > 0) {
        for (int64_t e = 0; e < E; e++)
            o->aux += (double)o->counts[e] / (double)(N * K) * psum[e] / (double)N;
        o->aux *= (double)E;
        o->z /= (double)N;
    }
    o->L = c->router_aux_loss_coef * o->aux + c->router_z_loss_coef * o->z;
    for (int64_t i = 0; i < N * D; i++) o->L += o->y[i] * P->dy[i];
    free(l); free(p); free(psum); free(tmp); free(fill_);
}
static void ref_free(ref_out *o) { free(o->y); free(o->ids); free(o->w); free(o->counts); }
static double ref_loss(const problem *P) {
    ref_out o;
    ref_forward(&o, P);
    double L = o.L;
    ref_free(&o);
    return L;
}

/* ---- running the library -------------------------------------------------- */

typedef struct run {
    float *y, *logits, *tw;
    int32_t *ids;
    int64_t *counts;
    ffn_moe_outputs out;
    void *saved, *ws;
    size_t ws_bytes;
    ffn_moe *m;
} run;

static ffn_status lib_forward(run *r, ffn_ctx *ctx, problem *P) {
    const ffn_moe_config *c = &P->cfg;
    int64_t N = P->N, D = c->hidden_size, E = c->num_experts, K = c->num_experts_per_tok;
    memset(r, 0, sizeof *r);
    ffn_status st = ffn_moe_create(ctx, c, &r->m);
    if (st) return st;
    ffn_moe_params w = params_of(P);
    if ((st = ffn_moe_set_weights(r->m, &w))) return st;
    r->y = malloc(sizeof(float) * (size_t)(N * D + 1));
    r->logits = malloc(sizeof(float) * (size_t)(N * E + 1));
    r->tw = malloc(sizeof(float) * (size_t)(N * K + 1));
    r->ids = malloc(sizeof(int32_t) * (size_t)(N * K + 1));
    r->counts = malloc(sizeof(int64_t) * (size_t)E);
    r->out = (ffn_moe_outputs){.y = r->y, .router_logits = r->logits, .topk_ids = r->ids,
                               .topk_weights = r->tw, .tokens_per_expert = r->counts};
    r->saved = malloc(ffn_moe_saved_size(r->m, N) + 1);
    r->ws_bytes = ffn_moe_workspace_size(r->m, N);
    r->ws = malloc(r->ws_bytes);
    return ffn_moe_forward(r->m, &r->out, P->x, N, r->saved, r->ws, r->ws_bytes);
}
static void run_free(run *r) {
    free(r->y); free(r->logits); free(r->tw); free(r->ids); free(r->counts);
    free(r->saved); free(r->ws);
    ffn_moe_free(r->m);
}

/* ---- forward against the reference ------------------------------------------ */

static void check_forward(ffn_ctx *ctx, const char *name, const ffn_moe_config *cfg, int64_t N) {
    problem P;
    make_problem(&P, cfg, N);
    ref_out o;
    ref_forward(&o, &P);
    run r;
    ffn_status st = lib_forward(&r, ctx, &P);
    CHECK(st == FFN_OK, "%s: forward failed: %s", name, ffn_last_error());
    if (st == FFN_OK) {
        int64_t D = cfg->hidden_size, E = cfg->num_experts, K = cfg->num_experts_per_tok;
        double err = 0, scale = 1e-30;
        for (int64_t i = 0; i < N * D; i++) {
            err = fmax(err, fabs(r.y[i] - o.y[i]));
            scale = fmax(scale, fabs(o.y[i]));
        }
        int ids_ok = 1;
        double werr = 0;
        for (int64_t i = 0; i < N * K; i++) {
            ids_ok &= r.ids[i] == o.ids[i];
            werr = fmax(werr, fabs(r.tw[i] - o.w[i]));
        }
        int counts_ok = 1;
        for (int64_t e = 0; e < E; e++) counts_ok &= r.counts[e] == o.counts[e];
        printf("%-34s N=%-3lld y err %.2e (rel %.2e, tol 1e-4)  w err %.2e  aux %.6f/%.6f  z %.6f/%.6f  dropped %lld\n",
               name, (long long)N, err, err / scale, werr, r.out.aux_loss, o.aux, r.out.z_loss, o.z,
               (long long)r.out.dropped_slots);
        CHECK(err <= 1e-4 * fmax(scale, 1.0), "%s: y max error %g", name, err);
        CHECK(ids_ok, "%s: top-k ids differ from the reference", name);
        CHECK(werr <= 1e-5, "%s: topk weights max error %g", name, werr);
        CHECK(counts_ok, "%s: tokens per expert differ", name);
        CHECK(r.out.dropped_slots == o.dropped, "%s: dropped %lld, expected %lld", name,
              (long long)r.out.dropped_slots, (long long)o.dropped);
        CHECK(fabs(r.out.aux_loss - o.aux) <= 1e-5 * fmax(1, o.aux), "%s: aux %g vs %g", name, r.out.aux_loss, o.aux);
        CHECK(fabs(r.out.z_loss - o.z) <= 1e-4 * fmax(1, o.z), "%s: z %g vs %g", name, r.out.z_loss, o.z);

        /* a second run is bitwise equal */
        float *y2 = malloc(sizeof(float) * (size_t)(N * D + 1));
        ffn_moe_outputs o2 = {.y = y2};
        st = ffn_moe_forward(r.m, &o2, P.x, N, NULL, r.ws, r.ws_bytes);
        CHECK(st == FFN_OK && !memcmp(y2, r.y, sizeof(float) * (size_t)(N * D)),
              "%s: a second forward (inference, no saved) is not bitwise equal", name);
        free(y2);
    }
    run_free(&r);
    ref_free(&o);
    free_problem(&P);
}

/* ---- backward against central differences of the reference -------------------- */

typedef struct pick {
    const char *what;
    float *w, *g; /* a weight and its gradient */
    int64_t n;
} pick;

static void check_backward(ffn_ctx *ctx, const char *name, const ffn_moe_config *cfg, int64_t N) {
    problem P;
    make_problem(&P, cfg, N);
    const ffn_moe_config *c = &P.cfg;
    int64_t D = c->hidden_size, E = c->num_experts;
    run r;
    ffn_status st = lib_forward(&r, ctx, &P);
    CHECK(st == FFN_OK, "%s: forward failed: %s", name, ffn_last_error());
    if (st != FFN_OK) goto done;
    float *dx = calloc((size_t)(N * D + 1), sizeof(float));
    float *gwr = calloc((size_t)(E * D), sizeof(float)), *gsg = calloc((size_t)D, sizeof(float));
    ffn_layer_params *gex = calloc((size_t)E, sizeof *gex), gsh, gsx;
    ffn_layer_config lc = ffn_moe_expert_config(c, 0);
    for (int64_t e = 0; e < E; e++) zero_like(&gex[e], &P.ex[e], &lc);
    lc = ffn_moe_expert_config(c, 1);
    zero_like(&gsh, &P.sh, &lc);
    lc = ffn_moe_expert_config(c, 2);
    zero_like(&gsx, &P.sx, &lc);
    ffn_moe_params g = {.router_w = gwr, .experts = gex, .shared = gsh, .shared_gate_w = gsg, .shared_experts = gsx};
    st = ffn_moe_backward(r.m, dx, &g, P.dy, P.x, N, r.saved, r.ws, r.ws_bytes);
    CHECK(st == FFN_OK, "%s: backward failed: %s", name, ffn_last_error());
    if (st == FFN_OK) {
        pick picks[16];
        int np = 0;
        picks[np++] = (pick){"dx", P.x, dx, N * D};
        picks[np++] = (pick){"gate.weight", P.wr, gwr, E * D};
        int64_t F = c->moe_intermediate_size;
        for (int64_t e = 0; e < E && np < 10; e++) {
            picks[np++] = (pick){"experts.up_proj.weight", P.ex[e].up_w, gex[e].up_w, F * D};
            if (P.ex[e].gate_w) picks[np++] = (pick){"experts.gate_proj.weight", P.ex[e].gate_w, gex[e].gate_w, F * D};
        }
        picks[np++] = (pick){"experts.0.down_proj.weight", P.ex[0].down_w, gex[0].down_w, D * F};
        if (P.ex[0].up_b) picks[np++] = (pick){"experts.0.up_proj.bias", P.ex[0].up_b, gex[0].up_b, F};
        if (c->shared_expert_intermediate_size > 0) {
            picks[np++] = (pick){"shared_expert_gate.weight", P.wsg, gsg, D};
            picks[np++] = (pick){"shared_expert.up_proj.weight", P.sh.up_w, gsh.up_w,
                                 c->shared_expert_intermediate_size * D};
        }
        if (c->n_shared_experts > 0)
            picks[np++] = (pick){"shared_experts.down_proj.weight", P.sx.down_w, gsx.down_w,
                                 c->n_shared_experts * F * D};
        double worst = 0;
        for (int k = 0; k < np; k++) {
            double err = 0, mag = 1e-3;
            for (int s = 0; s < 6; s++) {
                int64_t i = (int64_t)(urand() * (double)picks[k].n);
                float w0 = picks[k].w[i];
                const double h = 1e-3;
                picks[k].w[i] = (float)(w0 + h);
                double hp = (double)picks[k].w[i] - w0;
                double lp = ref_loss(&P);
                picks[k].w[i] = (float)(w0 - h);
                double hm = w0 - (double)picks[k].w[i];
                double lm = ref_loss(&P);
                picks[k].w[i] = w0;
                double num = (lp - lm) / (hp + hm);
                err = fmax(err, fabs(num - picks[k].g[i]));
                mag = fmax(mag, fabs(num));
            }
            double rel = err / mag;
            worst = fmax(worst, rel);
            CHECK(rel <= 2e-3, "%s: d%s: max error %g (relative %g) against central differences",
                  name, picks[k].what, err, rel);
        }
        printf("%-34s N=%-3lld backward: worst relative error vs central differences %.2e (tol 2e-3)\n",
               name, (long long)N, worst);
    }
    free(dx); free(gwr); free(gsg);
    for (int64_t e = 0; e < E; e++) free_layer(&gex[e]);
    free(gex);
    free_layer(&gsh);
    free_layer(&gsx);
done:
    run_free(&r);
    free_problem(&P);
}

/* ---- ties: identical router rows give exact ties; the lower index wins ---------- */

static void check_ties(ffn_ctx *ctx) {
    ffn_moe_config c = {.hidden_size = 37, .num_experts = 6, .num_experts_per_tok = 3,
                        .moe_intermediate_size = 5, .act = FFN_ACT_SILU,
                        .expert_type = FFN_MLP_GATED, .norm_topk_prob = 1, .routed_scaling_factor = 1};
    problem P;
    make_problem(&P, &c, 9);
    /* experts 1, 3 and 4 share a router row: equal scores everywhere */
    memcpy(P.wr + 3 * 37, P.wr + 1 * 37, 37 * sizeof(float));
    memcpy(P.wr + 4 * 37, P.wr + 1 * 37, 37 * sizeof(float));
    memset(P.x, 0, 37 * sizeof(float)); /* token 0: all scores tie */
    run r;
    ffn_status st = lib_forward(&r, ctx, &P);
    CHECK(st == FFN_OK, "ties: forward failed: %s", ffn_last_error());
    if (st == FFN_OK) {
        CHECK(r.ids[0] == 0 && r.ids[1] == 1 && r.ids[2] == 2, "ties: all-equal token picked %d %d %d, expected 0 1 2",
              r.ids[0], r.ids[1], r.ids[2]);
        ref_out o;
        ref_forward(&o, &P);
        int ok = 1;
        for (int64_t i = 0; i < 9 * 3; i++) ok &= r.ids[i] == o.ids[i];
        CHECK(ok, "ties: ids differ from the reference");
        int tied = 0;
        for (int64_t t = 0; t < 9; t++) tied += r.logits[t * 6 + 1] == r.logits[t * 6 + 3] &&
                                                 r.logits[t * 6 + 3] == r.logits[t * 6 + 4];
        CHECK(tied == 9, "ties: identical router rows gave different logits (%d of 9 equal)", tied);
        ref_free(&o);
    }
    run_free(&r);
    free_problem(&P);
}

/* ---- capacity: which slots drop ------------------------------------------------ */

static void check_capacity(ffn_ctx *ctx) {
    /* E = 2, K = 1, c = 0.5, N = 8: C = ceil(0.5·8/2) = 2.  Route every token
     * to expert 0 with a positive router row on a positive x: tokens 0 and 1
     * run, 2..7 drop and output exactly 0. */
    ffn_moe_config c = {.hidden_size = 4, .num_experts = 2, .num_experts_per_tok = 1,
                        .moe_intermediate_size = 3, .act = FFN_ACT_RELU,
                        .expert_type = FFN_MLP_DENSE, .routed_scaling_factor = 1,
                        .capacity_factor = 0.5};
    problem P;
    make_problem(&P, &c, 8);
    for (int i = 0; i < 8 * 4; i++) P.x[i] = 0.5f + (float)(i % 5) * 0.1f;
    for (int i = 0; i < 4; i++) { P.wr[i] = 1; P.wr[4 + i] = -1; }
    run r;
    ffn_status st = lib_forward(&r, ctx, &P);
    CHECK(st == FFN_OK, "capacity: forward failed: %s", ffn_last_error());
    if (st == FFN_OK) {
        CHECK(r.out.capacity == 2, "capacity: C = %lld, expected 2", (long long)r.out.capacity);
        CHECK(r.out.dropped_slots == 6, "capacity: dropped %lld, expected 6", (long long)r.out.dropped_slots);
        CHECK(r.counts[0] == 8 && r.counts[1] == 0, "capacity: counts %lld %lld", (long long)r.counts[0], (long long)r.counts[1]);
        int zero_after = 1, nonzero_before = 0;
        for (int t = 0; t < 8; t++)
            for (int d = 0; d < 4; d++) {
                if (t >= 2) zero_after &= r.y[t * 4 + d] == 0.0f;
                else nonzero_before |= r.y[t * 4 + d] != 0.0f;
            }
        CHECK(zero_after, "capacity: dropped tokens 2..7 must output 0");
        CHECK(nonzero_before, "capacity: kept tokens 0, 1 must have output");
    }
    run_free(&r);
    free_problem(&P);
}

/* ---- bad configs -------------------------------------------------------------- */

static const char *write_tmp(const char *text) {
    static char path[64];
    snprintf(path, sizeof path, "/tmp/test_moe_XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) return NULL;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? path : NULL;
}

static void check_bad_config(const char *label, const char *json, ffn_status want, const char *needle) {
    const char *path = write_tmp(json);
    CHECK(path != NULL, "%s: cannot write a temp file", label);
    if (!path) return;
    ffn_moe_config c;
    ffn_status st = ffn_moe_config_load(path, &c);
    const char *msg = ffn_last_error();
    printf("bad config %-22s -> %s: %s\n", label, ffn_status_str(st), msg);
    CHECK(st == want, "%s: status %s, expected %s", label, ffn_status_str(st), ffn_status_str(want));
    CHECK(strstr(msg, needle) != NULL, "%s: message '%s' does not name '%s'", label, msg, needle);
    CHECK(strstr(msg, path) != NULL, "%s: message '%s' does not name the file", label, msg);
    unlink(path);
}

static void check_configs(void) {
    const char *ok = "{\"hidden_size\": 16, \"num_local_experts\": 4, \"num_experts_per_tok\": 2, "
                     "\"intermediate_size\": 24, \"model_type\": \"mixtral\", \"router_aux_loss_coef\": 0.02}";
    const char *path = write_tmp(ok);
    ffn_moe_config c;
    ffn_status st = ffn_moe_config_load(path, &c);
    CHECK(st == FFN_OK, "mixtral config: %s", ffn_last_error());
    CHECK(c.num_experts == 4 && c.num_experts_per_tok == 2 && c.moe_intermediate_size == 24 &&
              c.norm_topk_prob == 1 && c.act == FFN_ACT_SILU && c.scoring == FFN_MOE_SCORING_SOFTMAX &&
              c.routed_scaling_factor == 1 && c.router_aux_loss_coef == 0.02,
          "mixtral config: fields read wrong");
    unlink(path);
    const char *ds = "{\"hidden_size\": 16, \"n_routed_experts\": 8, \"num_experts_per_tok\": 2, "
                     "\"moe_intermediate_size\": 12, \"intermediate_size\": 99, \"scoring_func\": \"sigmoid\", "
                     "\"n_shared_experts\": 2, \"routed_scaling_factor\": 2.5, \"norm_topk_prob\": true, "
                     "\"topk_method\": \"greedy\", \"n_group\": 1, \"capacity_factor\": null}";
    path = write_tmp(ds);
    st = ffn_moe_config_load(path, &c);
    CHECK(st == FFN_OK, "deepseek config: %s", ffn_last_error());
    CHECK(c.num_experts == 8 && c.moe_intermediate_size == 12 && c.scoring == FFN_MOE_SCORING_SIGMOID &&
              c.n_shared_experts == 2 && c.routed_scaling_factor == 2.5 && c.norm_topk_prob == 1 &&
              c.capacity_factor == 0,
          "deepseek config: fields read wrong");
    unlink(path);

    check_bad_config("k = 0", "{\"hidden_size\": 8, \"num_experts\": 4, \"num_experts_per_tok\": 0, \"intermediate_size\": 8}",
                     FFN_ERR_CONFIG, "num_experts_per_tok");
    check_bad_config("k > E", "{\"hidden_size\": 8, \"num_experts\": 4, \"num_experts_per_tok\": 5, \"intermediate_size\": 8}",
                     FFN_ERR_CONFIG, "num_experts_per_tok: must be <= num_experts (4), got 5");
    check_bad_config("E = 0", "{\"hidden_size\": 8, \"num_experts\": 0, \"num_experts_per_tok\": 1, \"intermediate_size\": 8}",
                     FFN_ERR_CONFIG, "num_experts: must be >= 1, got 0");
    check_bad_config("unknown scoring_func", "{\"hidden_size\": 8, \"num_experts\": 4, \"num_experts_per_tok\": 1, \"intermediate_size\": 8, \"scoring_func\": \"softermax\"}",
                     FFN_ERR_CONFIG, "scoring_func: unknown value 'softermax'");
    check_bad_config("negative capacity", "{\"hidden_size\": 8, \"num_experts\": 4, \"num_experts_per_tok\": 1, \"intermediate_size\": 8, \"capacity_factor\": -1}",
                     FFN_ERR_CONFIG, "capacity_factor");
    check_bad_config("E aliases disagree", "{\"hidden_size\": 8, \"num_experts\": 4, \"n_routed_experts\": 6, \"num_experts_per_tok\": 1, \"intermediate_size\": 8}",
                     FFN_ERR_CONFIG, "n_routed_experts (6) disagrees with num_experts (4)");
    check_bad_config("missing k", "{\"hidden_size\": 8, \"num_experts\": 4, \"intermediate_size\": 8}",
                     FFN_ERR_MISSING, "num_experts_per_tok");
    check_bad_config("missing F", "{\"hidden_size\": 8, \"num_experts\": 4, \"num_experts_per_tok\": 1}",
                     FFN_ERR_MISSING, "moe_intermediate_size");
    check_bad_config("noaux_tc", "{\"hidden_size\": 8, \"num_experts\": 4, \"num_experts_per_tok\": 1, \"intermediate_size\": 8, \"topk_method\": \"noaux_tc\"}",
                     FFN_ERR_UNSUPPORTED, "topk_method");
    check_bad_config("bad hidden_act", "{\"hidden_size\": 8, \"num_experts\": 4, \"num_experts_per_tok\": 1, \"intermediate_size\": 8, \"hidden_act\": \"swoosh\"}",
                     FFN_ERR_CONFIG, "hidden_act");
    check_bad_config("zero scaling", "{\"hidden_size\": 8, \"num_experts\": 4, \"num_experts_per_tok\": 1, \"intermediate_size\": 8, \"routed_scaling_factor\": 0}",
                     FFN_ERR_CONFIG, "routed_scaling_factor");
}

/* ---- API misuse ------------------------------------------------------------------ */

static void check_misuse(ffn_ctx *ctx) {
    ffn_moe_config c = {.hidden_size = 8, .num_experts = 3, .num_experts_per_tok = 2,
                        .moe_intermediate_size = 4, .act = FFN_ACT_SILU,
                        .expert_type = FFN_MLP_AUTO, .routed_scaling_factor = 1};
    ffn_moe *m = NULL;
    CHECK(ffn_moe_create(ctx, &c, &m) == FFN_ERR_CONFIG && !m, "auto expert type must be refused");
    c.expert_type = FFN_MLP_GATED;
    CHECK(ffn_moe_create(ctx, &c, &m) == FFN_OK, "create: %s", ffn_last_error());
    float y[8], x[8] = {0};
    ffn_moe_outputs o = {.y = y};
    char ws[64];
    CHECK(ffn_moe_forward(m, &o, x, 1, NULL, ws, sizeof ws) == FFN_ERR_INVALID_ARG,
          "forward before set_weights must fail");
    problem P;
    make_problem(&P, &c, 1);
    ffn_moe_params w = params_of(&P);
    float *keep = P.ex[2].down_w;
    w.experts[2].down_w = NULL;
    ffn_status st = ffn_moe_set_weights(m, &w);
    CHECK(st == FFN_ERR_MISSING && strstr(ffn_last_error(), "experts.2.down_proj.weight"),
          "missing expert tensor: %s", ffn_last_error());
    P.ex[2].down_w = keep;
    w = params_of(&P);
    CHECK(ffn_moe_set_weights(m, &w) == FFN_OK, "set_weights: %s", ffn_last_error());
    CHECK(ffn_moe_forward(m, &o, P.x, 1, NULL, ws, sizeof ws) == FFN_ERR_WORKSPACE,
          "a small workspace must be refused");
    size_t wb = ffn_moe_workspace_size(m, 0);
    void *w0 = malloc(wb + 1);
    CHECK(ffn_moe_forward(m, &o, P.x, 0, NULL, w0, wb) == FFN_OK && o.aux_loss == 0 && o.z_loss == 0,
          "N = 0 is a no-op: %s", ffn_last_error());
    free(w0);
    ffn_moe_free(m);
    ffn_moe_free(NULL);
    free_problem(&P);
}

int main(void) {
    ffn_ctx *ctx = NULL;
    if (ffn_ctx_create(0, &ctx) != FFN_OK) {
        fprintf(stderr, "ctx: %s\n", ffn_last_error());
        return 1;
    }
    ffn_moe_config mixtral = {.hidden_size = 33, .num_experts = 5, .num_experts_per_tok = 2,
                              .moe_intermediate_size = 19, .act = FFN_ACT_SILU,
                              .expert_type = FFN_MLP_GATED, .norm_topk_prob = 1,
                              .routed_scaling_factor = 1, .router_aux_loss_coef = 0.3,
                              .router_z_loss_coef = 0.05};
    ffn_moe_config qwen = mixtral;
    qwen.norm_topk_prob = 0;
    qwen.num_experts = 7;
    qwen.num_experts_per_tok = 3;
    qwen.shared_expert_intermediate_size = 23;
    ffn_moe_config deepseek = mixtral;
    deepseek.scoring = FFN_MOE_SCORING_SIGMOID;
    deepseek.routed_scaling_factor = 2.5;
    deepseek.n_shared_experts = 2;
    deepseek.num_experts = 6;
    ffn_moe_config dense = mixtral;
    dense.expert_type = FFN_MLP_DENSE;
    dense.act = FFN_ACT_GELU;
    dense.bias = 1;
    ffn_moe_config e1 = mixtral;
    e1.num_experts = 1;
    e1.num_experts_per_tok = 1;
    ffn_moe_config kE = qwen;
    kE.num_experts_per_tok = kE.num_experts;
    ffn_moe_config cap = mixtral;
    cap.capacity_factor = 0.75;
    ffn_moe_config cap_sig = deepseek;
    cap_sig.capacity_factor = 1.0;
    cap_sig.save = FFN_SAVE_NONE;

    check_forward(ctx, "mixtral (softmax, top-2, renorm)", &mixtral, 17);
    check_forward(ctx, "qwen2-moe (no renorm, shared)", &qwen, 13);
    check_forward(ctx, "deepseek (sigmoid, scale, shared)", &deepseek, 11);
    check_forward(ctx, "dense gelu experts with bias", &dense, 9);
    check_forward(ctx, "E = 1", &e1, 5);
    check_forward(ctx, "k = E", &kE, 6);
    check_forward(ctx, "N = 1 < E", &qwen, 1);
    check_forward(ctx, "capacity 0.75", &cap, 21);
    check_forward(ctx, "capacity 1.0 sigmoid", &cap_sig, 15);
    check_forward(ctx, "N = 0", &mixtral, 0);

    check_backward(ctx, "mixtral", &mixtral, 7);
    check_backward(ctx, "qwen2-moe", &qwen, 6);
    check_backward(ctx, "deepseek", &deepseek, 5);
    check_backward(ctx, "dense gelu bias", &dense, 4);
    check_backward(ctx, "capacity 0.75", &cap, 9);
    check_backward(ctx, "capacity sigmoid, recompute", &cap_sig, 8);
    check_backward(ctx, "k = E", &kE, 3);

    /* Both expert schedules (side by side and one after another) under an
     * explicit 2-thread context, whatever FFN_NUM_THREADS says. */
    ffn_ctx *ctx2 = NULL;
    if (ffn_ctx_create(2, &ctx2) == FFN_OK) {
        check_forward(ctx2, "2 threads, mixtral", &mixtral, 40);
        check_backward(ctx2, "2 threads, mixtral", &mixtral, 40);
        check_backward(ctx2, "2 threads, qwen2-moe", &qwen, 3);
        ffn_ctx_free(ctx2);
    }

    check_ties(ctx);
    check_capacity(ctx);
    check_configs();
    check_misuse(ctx);
    ffn_ctx_free(ctx);
    return check_done("test_moe");
}
