/* tap.c -- taps (include/ffn/tap.h): the names of the points, selection
 * and the capture buffers, patches, and the hook the FFN layers call
 * (src/nn/ffn_hook.h).  The forward in model.c calls in here only when
 * something is selected or patched; nothing here runs otherwise.
 *
 * Letters: B batch, T positions, N = B·T rows, D hidden, F width of a
 * layer's FFN, Fe of an expert, Fw the width of one FFN (F or Fe), W a
 * point's width, E experts, K top-k, H heads, S key positions, L layers. */
#include "nn/tap_internal.h"
#include "kernels/kernels.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const point_names[FFN_TAP_N_POINTS] = {
    "resid_pre", "attn_out",      "resid_mid",  "mlp_in",         "gate_pre",
    "up",        "m",             "mlp_out",    "resid_post",     "router_logits",
    "expert_ids", "expert_weights", "attn_probs"};

const char *ffn_tap_point_name(ffn_tap_point p) {
    return FFN_ENUM_NAME(point_names, p, NULL);
}

char *ffn_tap_name(char *buf, size_t size, int64_t layer, ffn_tap_point p) {
    if (!buf || !size) return buf;
    const char *pn = ffn_tap_point_name(p);
    snprintf(buf, size, "layers.%lld.%s", (long long)layer, pn ? pn : "?");
    return buf;
}

/* ---- the taps object ------------------------------------------------------------ */

typedef struct tap_slot {
    void *buf;      /* (max_n, W) floats or int32 */
    float *raw;     /* attn_probs: (max_n · H · max_seq) for the attention */
    int selected;
    int filled;     /* a forward ran since the selection */
    int patched;    /* some patch names this point */
} tap_slot;

typedef struct tap_patch {
    int64_t layer;
    int point;
    int64_t position; /* -1: every position */
    int64_t index;    /* -1: a whole row from vec */
    ffn_tap_op op;
    float value;
    float *vec;       /* (W) or NULL */
} tap_patch;

typedef struct layer_ref {
    ffn_taps *t;
    int64_t l;
    ffn_neuron_hook hook;
} layer_ref;

struct ffn_taps {
    int64_t L, D, H, E, K, F, Fe, V;
    int gated;
    int *kind;           /* (L): 0 no FFN, 1 dense/gated, 2 MoE */
    int64_t max_n, max_seq;
    tap_slot *slots;     /* (L, FFN_TAP_N_POINTS) */
    tap_patch *patches;
    int64_t n_patches, cap_patches;
    int64_t n_selected;
    layer_ref *refs;     /* (L) */
    /* the call under way */
    int64_t B, T, pos0, S;
    /* gradients (ffn_model_forward_backward_taps) */
    float **grad;        /* (L, FFN_TAP_N_POINTS): (max_n, D) each, or NULL */
    int *grad_filled;    /* (L, FFN_TAP_N_POINTS) */
    int train;           /* inside ffn_taps_train_begin/_end */
    int64_t gB, gT;      /* of the training call */
};

static tap_slot *slot(const ffn_taps *t, int64_t l, int p) {
    return &t->slots[l * FFN_TAP_N_POINTS + p];
}

static int64_t ffn_width(const ffn_taps *t, int64_t l) {
    return t->kind[l] == 2 ? t->E * t->Fe : t->kind[l] == 1 ? t->F : 0;
}

/* Columns of point p in layer l (attn_probs: H·max_seq); 0: not there. */
static int64_t point_width(const ffn_taps *t, int64_t l, int p) {
    switch (p) {
    case FFN_TAP_RESID_PRE: case FFN_TAP_ATTN_OUT: case FFN_TAP_RESID_MID:
    case FFN_TAP_RESID_POST: return t->D;
    case FFN_TAP_MLP_IN: case FFN_TAP_MLP_OUT: return t->kind[l] ? t->D : 0;
    case FFN_TAP_GATE_PRE: case FFN_TAP_UP: case FFN_TAP_M: return ffn_width(t, l);
    case FFN_TAP_ROUTER_LOGITS: return t->kind[l] == 2 ? t->E : 0;
    case FFN_TAP_EXPERT_IDS: case FFN_TAP_EXPERT_WEIGHTS: return t->kind[l] == 2 ? t->K : 0;
    case FFN_TAP_ATTN_PROBS: return t->H * t->max_seq;
    }
    return 0;
}

static int patchable(int p) {
    return p != FFN_TAP_ROUTER_LOGITS && p != FFN_TAP_EXPERT_IDS &&
           p != FFN_TAP_EXPERT_WEIGHTS && p != FFN_TAP_ATTN_PROBS;
}

static void slot_release(tap_slot *s) {
    ffn_free_aligned(s->buf);
    ffn_free_aligned(s->raw);
    s->buf = NULL;
    s->raw = NULL;
    s->selected = s->filled = 0;
}

void ffn_taps_free(ffn_taps *t) {
    if (!t) return;
    for (int64_t i = 0; t->slots && i < t->L * FFN_TAP_N_POINTS; i++) slot_release(&t->slots[i]);
    for (int64_t i = 0; i < t->n_patches; i++) free(t->patches[i].vec);
    free(t->patches);
    for (int64_t i = 0; t->grad && i < t->L * FFN_TAP_N_POINTS; i++) ffn_free_aligned(t->grad[i]);
    FFN_FREE_ALL(t->grad, t->grad_filled, t->slots, t->kind, t->refs, t);
}

static void neuron_hook(void *user, int stage, float *buf, int64_t n, const ffn_hook_rows *rows);

static ffn_status taps_create(ffn_model *m, ffn_taps **out) {
    const ffn_model_config *c = ffn_model_get_config(m);
    ffn_taps *t = calloc(1, sizeof *t);
    if (!t) return ffn_error(FFN_ERR_NOMEM, "taps: out of memory");
    t->L = c->num_hidden_layers;
    t->D = c->hidden_size;
    t->H = c->num_attention_heads;
    t->V = c->vocab_size;
    t->E = c->num_experts;
    t->K = c->num_experts > 0 ? c->num_experts_per_tok : 0;
    t->F = c->intermediate_size;
    t->Fe = c->moe_intermediate_size > 0 ? c->moe_intermediate_size : c->intermediate_size;
    t->gated = c->mlp_type == FFN_MODEL_MLP_GATED;
    ffn_model_rows(m, &t->max_n, &t->max_seq);
    t->kind = calloc((size_t)t->L, sizeof *t->kind);
    t->slots = calloc((size_t)(t->L * FFN_TAP_N_POINTS), sizeof *t->slots);
    t->refs = calloc((size_t)t->L, sizeof *t->refs);
    if (!t->kind || !t->slots || !t->refs) {
        ffn_taps_free(t);
        return ffn_error(FFN_ERR_NOMEM, "taps: out of memory");
    }
    for (int64_t l = 0; l < t->L; l++) {
        t->kind[l] = ffn_model_config_layer_is_moe(c, l) ? 2
                     : c->mlp_type != FFN_MODEL_MLP_NONE ? 1 : 0;
        t->refs[l] = (layer_ref){t, l, {neuron_hook, &t->refs[l], 0}};
    }
    *out = t;
    return FFN_OK;
}

static ffn_status get_taps(ffn_model *m, ffn_taps **out) {
    ffn_taps **ref = ffn_model_taps_ref(m);
    if (!*ref) {
        ffn_status st = taps_create(m, ref);
        if (st) return st;
    }
    *out = *ref;
    return FFN_OK;
}

static ffn_status slot_alloc(const ffn_taps *t, int64_t l, int p, tap_slot *s) {
    int64_t w = point_width(t, l, p), n;
    size_t bytes;
    if (ffn_mul_i64(t->max_n, w, &n) || ffn_mul_size((size_t)n, 4, &bytes))
        return ffn_error(FFN_ERR_OVERFLOW, "taps: buffer size overflows");
    void *buf = ffn_malloc_aligned(bytes ? bytes : 64), *raw = NULL;
    if (buf && p == FFN_TAP_ATTN_PROBS) raw = ffn_malloc_aligned(bytes ? bytes : 64);
    if (!buf || (p == FFN_TAP_ATTN_PROBS && !raw)) {
        ffn_free_aligned(buf);
        return ffn_error(FFN_ERR_NOMEM, "taps: out of memory (%zu bytes for layers.%lld.%s)",
                         bytes, (long long)l, point_names[p]);
    }
    s->buf = buf;
    s->raw = raw;
    return FFN_OK;
}

static float *grad_alloc(const ffn_taps *t) {
    int64_t n;
    size_t bytes;
    if (ffn_mul_i64(t->max_n, t->D, &n) || ffn_mul_size((size_t)n, 4, &bytes)) return NULL;
    return ffn_malloc_aligned(bytes ? bytes : 64);
}

/* The gradient buffers for t->max_n rows, all or nothing. */
static ffn_status grad_resize(ffn_taps *t) {
    if (!t->grad) return FFN_OK;
    const int64_t n = t->L * FFN_TAP_N_POINTS;
    float **fresh = calloc((size_t)n, sizeof *fresh);
    int ok = fresh != NULL;
    for (int64_t i = 0; ok && i < n; i++)
        if (t->grad[i] && !(fresh[i] = grad_alloc(t))) ok = 0;
    if (!ok) {
        for (int64_t i = 0; fresh && i < n; i++) ffn_free_aligned(fresh[i]);
        free(fresh);
        return ffn_error(FFN_ERR_NOMEM, "taps: out of memory (gradient buffers)");
    }
    for (int64_t i = 0; i < n; i++) {
        ffn_free_aligned(t->grad[i]);
        t->grad_filled[i] = 0;
    }
    free(t->grad);
    t->grad = fresh;
    return FFN_OK;
}

ffn_status ffn_taps_resize(ffn_taps *t, int64_t max_n, int64_t max_seq) {
    if (!t) return FFN_OK;
    tap_slot *fresh = calloc((size_t)(t->L * FFN_TAP_N_POINTS), sizeof *fresh);
    if (!fresh) return ffn_error(FFN_ERR_NOMEM, "taps: out of memory");
    int64_t old_n = t->max_n, old_seq = t->max_seq;
    t->max_n = max_n;
    t->max_seq = max_seq;
    ffn_status st = FFN_OK;
    for (int64_t i = 0; !st && i < t->L * FFN_TAP_N_POINTS; i++) {
        fresh[i].patched = t->slots[i].patched;
        fresh[i].selected = t->slots[i].selected;
        if (t->slots[i].selected)
            st = slot_alloc(t, i / FFN_TAP_N_POINTS, (int)(i % FFN_TAP_N_POINTS), &fresh[i]);
    }
    if (st) {
        for (int64_t i = 0; i < t->L * FFN_TAP_N_POINTS; i++) slot_release(&fresh[i]);
        free(fresh);
        t->max_n = old_n;
        t->max_seq = old_seq;
        return st;
    }
    if ((st = grad_resize(t))) {
        for (int64_t i = 0; i < t->L * FFN_TAP_N_POINTS; i++) slot_release(&fresh[i]);
        free(fresh);
        t->max_n = old_n;
        t->max_seq = old_seq;
        return st;
    }
    for (int64_t i = 0; i < t->L * FFN_TAP_N_POINTS; i++) slot_release(&t->slots[i]);
    free(t->slots);
    t->slots = fresh;
    return FFN_OK;
}

/* ---- names ------------------------------------------------------------------------------ */

static void list_points(char *buf, size_t size, int only_patchable) {
    size_t at = 0;
    buf[0] = 0;
    for (int p = 0; p < FFN_TAP_N_POINTS; p++) {
        if (only_patchable && !patchable(p)) continue;
        int k = snprintf(buf + at, size - at, "%s%s", at ? ", " : "", point_names[p]);
        if (k < 0 || (size_t)k >= size - at) break;
        at += (size_t)k;
    }
}

static ffn_status bad_form(const char *name) {
    char pts[256];
    list_points(pts, sizeof pts, 0);
    return ffn_error(FFN_ERR_INVALID_ARG, "tap '%s': expected 'layers.<layer>.<point>' with a "
                     "point among %s", name, pts);
}

static ffn_status lookup(const ffn_model *m, const char *name, int64_t *layer, int *point) {
    const ffn_model_config *c = ffn_model_get_config(m);
    const int64_t L = c->num_hidden_layers;
    if (!name) return ffn_error(FFN_ERR_INVALID_ARG, "tap: the name is NULL");
    if (strncmp(name, "layers.", 7) != 0 ||
        (!(name[7] >= '0' && name[7] <= '9') && name[7] != '-'))
        return bad_form(name);
    char *end = NULL;
    errno = 0;
    long long l = strtoll(name + 7, &end, 10);
    if (errno || end == name + 7 || *end != '.') return bad_form(name);
    if (l < 0 || l >= L)
        return ffn_error(FFN_ERR_INVALID_ARG, "tap '%s': layer %lld out of range (model has "
                         "%lld layers: 0..%lld)", name, l, (long long)L, (long long)(L - 1));
    const char *pn = end + 1;
    int p = -1;
    for (int i = 0; i < FFN_TAP_N_POINTS; i++)
        if (!strcmp(pn, point_names[i])) p = i;
    if (p < 0) {
        char pts[256];
        list_points(pts, sizeof pts, 0);
        return ffn_error(FFN_ERR_INVALID_ARG, "tap '%s': unknown point '%s' (expected one of %s)",
                         name, pn, pts);
    }
    int moe = ffn_model_config_layer_is_moe(c, l);
    int has_ffn = moe || c->mlp_type != FFN_MODEL_MLP_NONE;
    if ((p == FFN_TAP_ROUTER_LOGITS || p == FFN_TAP_EXPERT_IDS || p == FFN_TAP_EXPERT_WEIGHTS) &&
        !moe) {
        char ml[128] = "";
        size_t at = 0;
        for (int64_t i = 0; i < L && at < sizeof ml - 24; i++)
            if (ffn_model_config_layer_is_moe(c, i))
                at += (size_t)snprintf(ml + at, sizeof ml - at, "%s%lld", at ? ", " : "",
                                       (long long)i);
        return ffn_error(FFN_ERR_INVALID_ARG, "tap '%s': layer %lld is not a MoE layer (MoE "
                         "layers: %s)", name, l, at ? ml : "none");
    }
    if (!has_ffn && (p == FFN_TAP_MLP_IN || p == FFN_TAP_GATE_PRE || p == FFN_TAP_UP ||
                     p == FFN_TAP_M || p == FFN_TAP_MLP_OUT))
        return ffn_error(FFN_ERR_INVALID_ARG, "tap '%s': layer %lld has no FFN (mlp_type none; "
                         "its points are resid_pre, attn_out, resid_mid, resid_post, attn_probs)",
                         name, l);
    *layer = l;
    *point = p;
    return FFN_OK;
}

ffn_status ffn_model_tap_lookup(const ffn_model *m, const char *name, int64_t *layer,
                                ffn_tap_point *point, int64_t *width) {
    if (!m) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_model_tap_lookup: model is NULL");
    int64_t l;
    int p;
    ffn_status st = lookup(m, name, &l, &p);
    if (st) return st;
    if (layer) *layer = l;
    if (point) *point = (ffn_tap_point)p;
    if (width) {
        const ffn_model_config *c = ffn_model_get_config(m);
        int64_t max_n, max_seq;
        ffn_model_rows(m, &max_n, &max_seq);
        int moe = ffn_model_config_layer_is_moe(c, l);
        int64_t Fe = c->moe_intermediate_size > 0 ? c->moe_intermediate_size : c->intermediate_size;
        int64_t fw = moe ? c->num_experts * Fe : c->intermediate_size;
        switch (p) {
        case FFN_TAP_GATE_PRE: case FFN_TAP_UP: case FFN_TAP_M: *width = fw; break;
        case FFN_TAP_ROUTER_LOGITS: *width = c->num_experts; break;
        case FFN_TAP_EXPERT_IDS: case FFN_TAP_EXPERT_WEIGHTS: *width = c->num_experts_per_tok; break;
        case FFN_TAP_ATTN_PROBS: *width = c->num_attention_heads * max_seq; break;
        default: *width = c->hidden_size;
        }
    }
    return FFN_OK;
}

/* ---- selection, reading, patches -------------------------------------------------------- */

ffn_status ffn_model_tap_select(ffn_model *m, const char *name) {
    if (!m) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_model_tap_select: model is NULL");
    int64_t l;
    int p;
    ffn_status st = lookup(m, name, &l, &p);
    ffn_taps *t;
    if (st || (st = get_taps(m, &t))) return st;
    tap_slot *s = slot(t, l, p);
    if (s->selected) return FFN_OK;
    if ((st = slot_alloc(t, l, p, s))) return st;
    s->selected = 1;
    s->filled = 0;
    t->n_selected++;
    return FFN_OK;
}

/* *out: the (B·T, cols) rows at data, of layer l's point p */
static ffn_status view_of(ffn_tap_view *out, const void *data, int is_int32, int64_t B, int64_t T,
                          int64_t cols, int64_t pos0, int64_t l, int p) {
    memset(out, 0, sizeof *out);
    out->data = data;
    out->is_int32 = is_int32;
    out->rows = B * T;
    out->cols = cols;
    out->B = B;
    out->T = T;
    out->pos0 = pos0;
    out->layer = l;
    out->point = (ffn_tap_point)p;
    return FFN_OK;
}

ffn_status ffn_model_tap_read(const ffn_model *m, const char *name, ffn_tap_view *out) {
    if (!m || !out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_model_tap_read: NULL argument");
    int64_t l;
    int p;
    ffn_status st = lookup(m, name, &l, &p);
    if (st) return st;
    ffn_taps *t = *ffn_model_taps_ref((ffn_model *)m);
    const tap_slot *s = t ? slot(t, l, p) : NULL;
    if (!s || !s->selected)
        return ffn_error(FFN_ERR_INVALID_ARG, "tap '%s': not selected (call "
                         "ffn_model_tap_select before the forward)", name);
    if (!s->filled)
        return ffn_error(FFN_ERR_INVALID_ARG, "tap '%s': no forward has run since it was "
                         "selected", name);
    return view_of(out, s->buf, p == FFN_TAP_EXPERT_IDS, t->B, t->T,
                   p == FFN_TAP_ATTN_PROBS ? t->H * t->S : point_width(t, l, p), t->pos0, l, p);
}

static ffn_status check_patch(ffn_model *m, const char *name, int64_t position, ffn_tap_op op,
                              int64_t *l, int *p) {
    ffn_status st = lookup(m, name, l, p);
    if (st) return st;
    if (!patchable(*p)) {
        char pts[256];
        list_points(pts, sizeof pts, 1);
        return ffn_error(FFN_ERR_INVALID_ARG, "tap '%s': %s is read-only (patchable points: %s)",
                         name, point_names[*p], pts);
    }
    int64_t max_n, max_seq;
    ffn_model_rows(m, &max_n, &max_seq);
    const int64_t ctx_len = ffn_model_get_config(m)->max_position_embeddings;
    if (position < -1 || position >= ctx_len)
        return ffn_error(FFN_ERR_INVALID_ARG, "tap '%s': position %lld out of range (expected -1 "
                         "for every position, or 0..%lld)", name, (long long)position,
                         (long long)(ctx_len - 1));
    if ((unsigned)op > FFN_TAP_OP_ADD)
        return ffn_error(FFN_ERR_INVALID_ARG, "tap '%s': unknown op %d (expected FFN_TAP_OP_SET, "
                         "FFN_TAP_OP_SCALE or FFN_TAP_OP_ADD)", name, (int)op);
    return FFN_OK;
}

static ffn_status add_patch(ffn_model *m, const tap_patch *pa) {
    ffn_taps *t;
    ffn_status st = get_taps(m, &t);
    if (st) return st;
    tap_patch *np = ffn_grow(t->patches, t->n_patches, &t->cap_patches, sizeof *np, 16);
    if (!np) return ffn_error(FFN_ERR_NOMEM, "taps: out of memory (patches)");
    t->patches = np;
    t->patches[t->n_patches++] = *pa;
    slot(t, pa->layer, pa->point)->patched = 1;
    if (pa->point == FFN_TAP_GATE_PRE || pa->point == FFN_TAP_UP || pa->point == FFN_TAP_M)
        t->refs[pa->layer].hook.writes = 1;
    return FFN_OK;
}

ffn_status ffn_model_tap_patch(ffn_model *m, const char *name, int64_t position, int64_t index,
                               ffn_tap_op op, float value) {
    if (!m) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_model_tap_patch: model is NULL");
    int64_t l, w;
    int p;
    ffn_status st = check_patch(m, name, position, op, &l, &p);
    if (st || (st = ffn_model_tap_lookup(m, name, NULL, NULL, &w))) return st;
    if (index < 0 || index >= w)
        return ffn_error(FFN_ERR_INVALID_ARG, "tap '%s': index %lld out of range (width %lld: "
                         "0..%lld)", name, (long long)index, (long long)w, (long long)(w - 1));
    tap_patch pa = {l, p, position, index, op, value, NULL};
    return add_patch(m, &pa);
}

ffn_status ffn_model_tap_patch_vector(ffn_model *m, const char *name, int64_t position,
                                      ffn_tap_op op, const float *values, int64_t n) {
    if (!m) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_model_tap_patch_vector: model is NULL");
    int64_t l, w;
    int p;
    ffn_status st = check_patch(m, name, position, op, &l, &p);
    if (st || (st = ffn_model_tap_lookup(m, name, NULL, NULL, &w))) return st;
    if (!values || n != w)
        return ffn_error(FFN_ERR_INVALID_ARG, "tap '%s': vector of %lld floats%s, expected %lld "
                         "(the point's width)", name, (long long)n, values ? "" : " (NULL)",
                         (long long)w);
    float *vec = malloc((size_t)w * sizeof *vec);
    if (!vec) return ffn_error(FFN_ERR_NOMEM, "taps: out of memory (patch vector)");
    memcpy(vec, values, (size_t)w * sizeof *vec);
    tap_patch pa = {l, p, position, -1, op, 0.0f, vec};
    if ((st = add_patch(m, &pa))) free(vec);
    return st;
}

void ffn_model_taps_clear(ffn_model *m) {
    if (!m) return;
    ffn_taps **ref = ffn_model_taps_ref(m);
    ffn_taps_free(*ref);
    *ref = NULL;
}

void ffn_taps_gate(ffn_act act, float *gate, const float *gate_pre, int64_t n) {
    ffn_act_fwd(act, gate, gate_pre, n);
}

ffn_status ffn_model_shared_gate(ffn_model *m, int64_t l, const float *x, float *w) {
    const int64_t D = ffn_model_get_config(m)->hidden_size;
    char name[96];
    snprintf(name, sizeof name, "model.layers.%lld.mlp.shared_expert_gate.weight", (long long)l);
    const ffn_model_tensor *t = ffn_model_find_tensor(m, name);
    if (!t || t->shape[0] != 1 || t->shape[1] != D)
        return ffn_error(FFN_ERR_INTERNAL, "inspect: layer %lld: shared expert gate missing",
                         (long long)l);
    const float *wsg = ffn_model_params(m, NULL) + t->offset;
    double z = 0.0;
    for (int64_t d = 0; d < D; d++) z += (double)wsg[d] * x[d];
    *w = (float)(1.0 / (1.0 + exp(-z)));
    return FFN_OK;
}

ffn_taps *ffn_model_taps_stash(ffn_model *m) {
    ffn_taps **ref = ffn_model_taps_ref(m), *t = *ref;
    *ref = NULL;
    return t;
}

void ffn_model_taps_restore(ffn_model *m, ffn_taps *stash) {
    ffn_taps **ref = ffn_model_taps_ref(m);
    ffn_taps_free(*ref);
    *ref = stash;
}

/* ---- during the forward -------------------------------------------------------------- */

int ffn_taps_begin(ffn_taps *t, int64_t B, int64_t T, int64_t pos0, int training) {
    if (!t || (training && !t->train) || (t->n_selected == 0 && t->n_patches == 0)) return 0;
    t->B = B;
    t->T = T;
    t->pos0 = pos0;
    t->S = pos0 + T;
    const int64_t N = B * T;
    for (int64_t l = 0; l < t->L; l++)
        for (int p = 0; p < FFN_TAP_N_POINTS; p++) {
            tap_slot *s = slot(t, l, p);
            s->filled = 0;
            /* routed neurons: zero where a token's experts did not run */
            if (s->selected && t->kind[l] == 2 &&
                (p == FFN_TAP_GATE_PRE || p == FFN_TAP_UP || p == FFN_TAP_M))
                memset(s->buf, 0, (size_t)(N * point_width(t, l, p)) * sizeof(float));
        }
    return 1;
}

void ffn_taps_end(ffn_taps *t) {
    for (int64_t i = 0; i < t->L * FFN_TAP_N_POINTS; i++)
        if (t->slots[i].selected) t->slots[i].filled = 1;
}

/* Apply the patches of (l, p) at position pos to x, which holds columns
 * [c0, c0 + len) of the point. */
static void apply(const ffn_taps *t, int64_t l, int p, int64_t pos, float *x, int64_t c0,
                  int64_t len) {
    for (int64_t k = 0; k < t->n_patches; k++) {
        const tap_patch *pa = &t->patches[k];
        if (pa->layer != l || pa->point != p || (pa->position >= 0 && pa->position != pos))
            continue;
        if (pa->index >= 0) {
            if (pa->index < c0 || pa->index >= c0 + len) continue;
            float *v = x + (pa->index - c0);
            *v = pa->op == FFN_TAP_OP_SET ? pa->value
                 : pa->op == FFN_TAP_OP_SCALE ? *v * pa->value : *v + pa->value;
        } else {
            const float *u = pa->vec + c0;
            for (int64_t i = 0; i < len; i++)
                x[i] = pa->op == FFN_TAP_OP_SET ? u[i]
                       : pa->op == FFN_TAP_OP_SCALE ? x[i] * u[i] : x[i] + u[i];
        }
    }
}

void ffn_taps_point(ffn_taps *t, int64_t l, int p, float *x) {
    tap_slot *s = slot(t, l, p);
    if (!s->selected && !s->patched) return;
    const int64_t N = t->B * t->T, w = point_width(t, l, p);
    if (s->patched)
        for (int64_t r = 0; r < N; r++) apply(t, l, p, t->pos0 + r % t->T, x + r * w, 0, w);
    if (s->selected) memcpy(s->buf, x, (size_t)(N * w) * sizeof(float));
}

void *ffn_taps_out(ffn_taps *t, int64_t l, int p) {
    tap_slot *s = slot(t, l, p);
    return s->selected ? s->buf : NULL;
}

float *ffn_taps_probs(ffn_taps *t, int64_t l) {
    tap_slot *s = slot(t, l, FFN_TAP_ATTN_PROBS);
    return s->selected ? s->raw : NULL;
}

void ffn_taps_probs_done(ffn_taps *t, int64_t l) {
    tap_slot *s = slot(t, l, FFN_TAP_ATTN_PROBS);
    if (!s->selected) return;
    const int64_t B = t->B, T = t->T, H = t->H, S = t->S;
    float *out = s->buf;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < T; i++)
            for (int64_t h = 0; h < H; h++) {
                const float *src = s->raw + ((b * H + h) * T + i) * S;
                float *dst = out + (b * T + i) * H * S + h * S;
                const int64_t lim = t->pos0 + i;
                for (int64_t k = 0; k < S; k++) dst[k] = k <= lim ? src[k] : 0.0f;
            }
}

const ffn_neuron_hook *ffn_taps_hook(ffn_taps *t, int64_t l) {
    if (!t->kind[l]) return NULL;
    for (int p = FFN_TAP_GATE_PRE; p <= FFN_TAP_M; p++) {
        const tap_slot *s = slot(t, l, p);
        if (s->selected || s->patched) return &t->refs[l].hook;
    }
    return NULL;
}

/* The FFN layer's hook: patch, then capture, gate_pre and up (stage GU)
 * or m (stage H) of the call's rows. */
static void neuron_hook(void *user, int stage, float *buf, int64_t n, const ffn_hook_rows *rows) {
    const layer_ref *ref = user;
    const ffn_taps *t = ref->t;
    const int64_t l = ref->l;
    const int64_t Fw = t->kind[l] == 2 ? t->Fe : t->F, W = ffn_width(t, l);
    const int64_t P = t->gated ? 2 * Fw : Fw, c0 = rows ? rows->expert * Fw : 0;
    tap_slot *sg = slot(t, l, FFN_TAP_GATE_PRE), *su = slot(t, l, FFN_TAP_UP);
    tap_slot *sm = slot(t, l, FFN_TAP_M);
    for (int64_t r = 0; r < n; r++) {
        const int64_t tok = rows ? rows->row_slot[r] / rows->k : r;
        const int64_t pos = t->pos0 + tok % t->T;
        if (stage == FFN_HOOK_GU) {
            float *g = buf + r * P, *u = t->gated ? g + Fw : g;
            if (sg->patched) apply(t, l, FFN_TAP_GATE_PRE, pos, g, c0, Fw);
            if (su->patched) apply(t, l, FFN_TAP_UP, pos, u, c0, Fw);
            if (sg->selected)
                memcpy((float *)sg->buf + tok * W + c0, g, (size_t)Fw * sizeof(float));
            if (su->selected)
                memcpy((float *)su->buf + tok * W + c0, u, (size_t)Fw * sizeof(float));
        } else {
            float *h = buf + r * Fw;
            if (sm->patched) apply(t, l, FFN_TAP_M, pos, h, c0, Fw);
            if (sm->selected)
                memcpy((float *)sm->buf + tok * W + c0, h, (size_t)Fw * sizeof(float));
        }
    }
}

/* ---- gradients at a point (ffn_model_forward_backward_taps) ---------------------------- */

static int grad_point(int p) {
    return p == FFN_TAP_RESID_PRE || p == FFN_TAP_ATTN_OUT || p == FFN_TAP_RESID_MID ||
           p == FFN_TAP_MLP_IN || p == FFN_TAP_MLP_OUT || p == FFN_TAP_RESID_POST;
}

#define GRAD_POINTS "resid_pre, attn_out, resid_mid, mlp_in, mlp_out, resid_post"

ffn_status ffn_model_tap_select_grad(ffn_model *m, const char *name) {
    if (!m) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_model_tap_select_grad: model is NULL");
    int64_t l;
    int p;
    ffn_status st = lookup(m, name, &l, &p);
    if (st) return st;
    if (!grad_point(p))
        return ffn_error(FFN_ERR_INVALID_ARG, "tap '%s': no gradient is kept at %s (points with "
                         "a gradient: " GRAD_POINTS ")", name, point_names[p]);
    ffn_taps *t;
    if ((st = get_taps(m, &t))) return st;
    const int64_t n = t->L * FFN_TAP_N_POINTS, i = l * FFN_TAP_N_POINTS + p;
    if (!t->grad) {
        t->grad = calloc((size_t)n, sizeof *t->grad);
        t->grad_filled = calloc((size_t)n, sizeof *t->grad_filled);
        if (!t->grad || !t->grad_filled) {
            free(t->grad);
            free(t->grad_filled);
            t->grad = NULL;
            t->grad_filled = NULL;
            return ffn_error(FFN_ERR_NOMEM, "taps: out of memory (gradients)");
        }
    }
    if (t->grad[i]) return FFN_OK;
    if (!(t->grad[i] = grad_alloc(t)))
        return ffn_error(FFN_ERR_NOMEM, "taps: out of memory (the gradient of %s)", name);
    t->grad_filled[i] = 0;
    return FFN_OK;
}

ffn_status ffn_model_tap_read_grad(const ffn_model *m, const char *name, ffn_tap_view *out) {
    if (!m || !out)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_model_tap_read_grad: NULL argument");
    int64_t l;
    int p;
    ffn_status st = lookup(m, name, &l, &p);
    if (st) return st;
    const ffn_taps *t = *ffn_model_taps_ref((ffn_model *)m);
    const int64_t i = l * FFN_TAP_N_POINTS + p;
    if (!t || !t->grad || !t->grad[i])
        return ffn_error(FFN_ERR_INVALID_ARG, "tap '%s': its gradient is not selected (call "
                         "ffn_model_tap_select_grad before ffn_model_forward_backward_taps)", name);
    if (!t->grad_filled[i])
        return ffn_error(FFN_ERR_INVALID_ARG, "tap '%s': no ffn_model_forward_backward_taps has "
                         "run since its gradient was selected", name);
    return view_of(out, t->grad[i], 0, t->gB, t->gT, t->D, 0, l, p);
}

ffn_status ffn_taps_train_begin(ffn_taps *t, int64_t B, int64_t T, const char *fn) {
    char name[64];
    for (int64_t l = 0; l < t->L; l++)
        for (int p = 0; p < FFN_TAP_N_POINTS; p++)
            if (slot(t, l, p)->selected && !grad_point(p))
                return ffn_error(FFN_ERR_INVALID_ARG, "%s: tap '%s' is selected, but a training "
                                 "forward captures only " GRAD_POINTS, fn,
                                 ffn_tap_name(name, sizeof name, l, (ffn_tap_point)p));
    for (int64_t k = 0; k < t->n_patches; k++) {
        const tap_patch *pa = &t->patches[k];
        if (!grad_point(pa->point) || pa->op != FFN_TAP_OP_ADD)
            return ffn_error(FFN_ERR_INVALID_ARG, "%s: tap '%s' has a %s patch, but a training "
                             "forward runs only ADD patches of " GRAD_POINTS " (backward "
                             "would not see it)", fn,
                             ffn_tap_name(name, sizeof name, pa->layer, (ffn_tap_point)pa->point),
                             pa->op == FFN_TAP_OP_SET ? "SET" : pa->op == FFN_TAP_OP_SCALE
                             ? "SCALE" : "ADD");
    }
    t->train = 1;
    t->gB = B;
    t->gT = T;
    for (int64_t i = 0; t->grad && i < t->L * FFN_TAP_N_POINTS; i++) t->grad_filled[i] = 0;
    return FFN_OK;
}

void ffn_taps_train_end(ffn_taps *t, int ok) {
    t->train = 0;
    if (!ok && t->grad)
        for (int64_t i = 0; i < t->L * FFN_TAP_N_POINTS; i++) t->grad_filled[i] = 0;
}

static void grad_copy(ffn_taps *t, int64_t l, int p, const float *d) {
    const int64_t i = l * FFN_TAP_N_POINTS + p;
    if (!t->grad[i]) return;
    memcpy(t->grad[i], d, (size_t)(t->gB * t->gT * t->D) * sizeof(float));
    t->grad_filled[i] = 1;
}

void ffn_taps_grad(ffn_taps *t, int64_t l, int p, const float *d) {
    if (!t->train || !t->grad) return;
    grad_copy(t, l, p, d);
    if (p == FFN_TAP_RESID_POST && t->kind[l]) grad_copy(t, l, FFN_TAP_MLP_OUT, d);
    if (p == FFN_TAP_RESID_MID) grad_copy(t, l, FFN_TAP_ATTN_OUT, d);
}
