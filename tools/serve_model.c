/* serve_model.c -- what `ffn serve` computes on the model: the request's
 * tokens, the next-token prediction with edits (the one intervention
 * function, on the public tap API), and the gate-probe labels of neurons
 * (the library's ffn_inspect_gates_corpus, computed once at the start).
 * Also the small JSON writers the handlers share.
 * Letters: T tokens, V vocab, W a layer's neuron width, C word classes. */
#include "serve.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void serve_json_piece(FILE *f, const serve_state *s, int32_t prev, int32_t id) {
    char byte_buf[1];
    const char *bytes = NULL;
    size_t len = 0;
    if (ffn_vocab_piece(s->vocab, prev, id, byte_buf, &bytes, &len) != FFN_OK) {
        fputs("\"?\"", f);
        return;
    }
    serve_json_bytes(f, bytes, len);
}

/* ---- the request's tokens ---------------------------------------------------------------- */

int serve_req_tokens(serve_state *s, const serve_req *req, int64_t max_tokens, int32_t **ids,
                     int64_t *n, serve_reply *r) {
    const int64_t V = ffn_vocab_size(s->vocab);
    *ids = NULL;
    *n = 0;
    if (req->given & SERVE_F_IDS) {
        for (int64_t i = 0; i < req->n_ids; i++)
            if (req->ids[i] >= V)
                return serve_err(r, 400, "\"ids\"[%lld]: token id %d is out of range (the "
                                 "vocabulary has %lld tokens: 0..%lld)", (long long)i,
                                 req->ids[i], (long long)V, (long long)(V - 1));
        if (req->n_ids > max_tokens)
            return serve_err(r, 400, "\"ids\": %lld tokens, at most %lld (the model's context)",
                             (long long)req->n_ids, (long long)max_tokens);
        if (req->n_ids < 1) return serve_err(r, 400, "\"ids\": empty, expected at least 1 token");
        *ids = malloc((size_t)req->n_ids * sizeof **ids);
        if (!*ids) return serve_err(r, 500, "out of memory");
        memcpy(*ids, req->ids, (size_t)req->n_ids * sizeof **ids);
        *n = req->n_ids;
        return 0;
    }
    ffn_status st = ffn_vocab_encode(s->vocab, req->text, req->text_len, 1, ids, n);
    if (st != FFN_OK) return serve_err(r, 400, "\"text\": %s", ffn_last_error());
    if (*n > max_tokens) {
        free(*ids);
        *ids = NULL;
        return serve_err(r, 400, "\"text\": %lld tokens, at most %lld%s", (long long)*n,
                         (long long)max_tokens,
                         max_tokens == SERVE_MAX_TOKENIZE ? "" : " (the model's context)");
    }
    if (*n < 1) return serve_err(r, 400, "\"text\": empty, expected at least 1 token");
    return 0;
}

/* ---- the one intervention ---------------------------------------------------------------- */

const serve_tc *serve_tc_of_layer(const serve_state *s, int64_t layer) {
    for (int i = 0; i < s->n_tcs; i++)
        if (ffn_tc_get_config(s->tcs[i].tc)->layer == layer) return &s->tcs[i];
    return NULL;
}

/* the feature edits, layer by layer from the first (each layer's features
 * read with the edits of the layers before it in place) */
static ffn_status patch_features(serve_state *s, const int32_t *ids, int64_t T,
                                 const serve_edit *edits, int64_t n_edits) {
    ffn_tc_feature_edit fe[SERVE_MAX_EDITS];
    const int64_t L = ffn_model_get_config(s->model)->num_hidden_layers;
    ffn_status st = FFN_OK;
    for (int64_t l = 0; l < L && !st; l++) {
        int64_t n = 0;
        for (int64_t e = 0; e < n_edits && n < SERVE_MAX_EDITS; e++)
            if (edits[e].feature >= 0 && edits[e].layer == l)
                fe[n++] = (ffn_tc_feature_edit){edits[e].feature, edits[e].scale,
                                                edits[e].position};
        const serve_tc *t = n ? serve_tc_of_layer(s, l) : NULL;
        if (t) st = ffn_tc_patch_features(s->ctx, s->model, t->tc, ids, T, fe, n);
    }
    return st;
}

ffn_status serve_predict_probs(serve_state *s, const int32_t *ids, int64_t T,
                               const serve_edit *edits, int64_t n_edits, double *probs) {
    const int64_t V = ffn_vocab_size(s->vocab);
    float *logits = malloc((size_t)(T * V) * sizeof *logits);
    if (!logits) return FFN_ERR_NOMEM; /* the caller says "out of memory" */
    ffn_model_taps_clear(s->model);
    ffn_status st = FFN_OK;
    for (int64_t e = 0; e < n_edits && !st; e++) {
        if (edits[e].feature >= 0) continue;
        char name[64];
        ffn_tap_name(name, sizeof name, edits[e].layer, FFN_TAP_M);
        st = ffn_model_tap_patch(s->model, name, edits[e].position, edits[e].neuron,
                                 FFN_TAP_OP_SCALE, (float)edits[e].scale);
    }
    if (!st) st = patch_features(s, ids, T, edits, n_edits);
    if (!st) st = ffn_model_logits(s->model, logits, ids, 1, T);
    ffn_model_taps_clear(s->model);
    if (!st) { /* softmax of the last row, in double */
        const float *z = logits + (T - 1) * V;
        double mx = -INFINITY, sum = 0.0;
        for (int64_t v = 0; v < V; v++) mx = z[v] > mx ? z[v] : mx;
        for (int64_t v = 0; v < V; v++) sum += probs[v] = exp((double)z[v] - mx);
        for (int64_t v = 0; v < V; v++) probs[v] /= sum;
    }
    free(logits);
    return st;
}

/* ---- labels from the gate probes ---------------------------------------------------------- */

void serve_labels_free(serve_labels *lb) {
    for (int64_t l = 0; l < lb->n_layers; l++) {
        if (lb->cls) free(lb->cls[l]);
        if (lb->d) free(lb->d[l]);
    }
    free(lb->cls);
    free(lb->d);
    lb->cls = NULL;
    lb->d = NULL;
    lb->n_layers = 0;
    lb->available = 0;
}

/* Every neuron's most selective class: with top_selective = the widest
 * layer, the probe lists every neuron under every class with its d, and
 * a neuron's label is the class where its d is largest. */
static ffn_status labels_from_probe(serve_labels *lb, const ffn_model *model,
                                    const ffn_probe_result *pr) {
    const int64_t L = ffn_model_get_config(model)->num_hidden_layers, k = pr->top_selective;
    lb->cls = calloc((size_t)L, sizeof *lb->cls);
    lb->d = calloc((size_t)L, sizeof *lb->d);
    if (!lb->cls || !lb->d) return FFN_ERR_NOMEM;
    lb->n_layers = L;
    for (int64_t i = 0; i < pr->n_layers; i++) {
        const ffn_probe_layer *pl = &pr->layers[i];
        const int64_t l = pl->layer, W = ffn_inspect_layer_width(model, l);
        if (l < 0 || l >= L || W <= 0) continue;
        lb->cls[l] = malloc((size_t)W);
        lb->d[l] = malloc((size_t)W * sizeof *lb->d[l]);
        if (!lb->cls[l] || !lb->d[l]) return FFN_ERR_NOMEM;
        for (int64_t j = 0; j < W; j++) lb->cls[l][j] = -1, lb->d[l][j] = -INFINITY;
        for (int c = 0; c < FFN_WORD_N_CLASSES; c++)
            for (int64_t j = 0; j < k; j++) {
                int64_t neuron = pl->selective[c * k + j];
                float d = pl->selective_d[c * k + j];
                if (neuron < 0 || neuron >= W) continue;
                if (d > lb->d[l][neuron]) lb->d[l][neuron] = d, lb->cls[l][neuron] = (int8_t)c;
            }
    }
    return FFN_OK;
}

/* The probe for a vocabulary ffn_inspect_gates_corpus does not take (a
 * llama2.c tokenizer.bin), on the public API: the built-in corpus encoded
 * one sentence at a time with the model's vocabulary (bos first when it has
 * one), each token located in its sentence by its piece (the pieces after
 * bos concatenate to the text), labelled with the class of the word it
 * overlaps (ffn_corpus_word_at), the later sentences held out, each
 * sentence a window start; then ffn_inspect_probe. */
static ffn_status probe_any_vocab(serve_state *s, const ffn_probe_options *o,
                                  ffn_probe_result **out) {
    ffn_corpus *cp = NULL;
    ffn_status st = ffn_corpus_generate(o->lang, o->corpus_seed, o->sentences, &cp);
    if (st) return st;
    const int32_t bos = ffn_vocab_specials(s->vocab).bos;
    const int64_t first_test = (int64_t)ceil((1.0 - o->heldout_fraction) * (double)cp->n_sentences);
    int64_t n = 0, cap = 0, sentence = 0;
    int32_t *ids = NULL;
    int8_t *labels = NULL, *split = NULL;
    uint8_t *bound = NULL;
    for (int64_t a = 0; !st && a < cp->n_bytes; sentence++) {
        int64_t b = a;
        while (b < cp->n_bytes && cp->text[b] != '\n') b++;
        int32_t *sid = NULL;
        int64_t sn = 0;
        st = ffn_vocab_encode(s->vocab, cp->text + a, (size_t)(b - a), 1, &sid, &sn);
        if (!st && n + sn > cap) {
            cap = 2 * (n + sn) + 1024;
            int32_t *ni = realloc(ids, (size_t)cap * sizeof *ids);
            if (ni) ids = ni;
            int8_t *nl = realloc(labels, (size_t)cap), *ns = realloc(split, (size_t)cap);
            if (nl) labels = nl;
            if (ns) split = ns;
            uint8_t *nb = realloc(bound, (size_t)cap);
            if (nb) bound = nb;
            if (!ni || !nl || !ns || !nb) st = FFN_ERR_NOMEM;
        }
        int64_t pos = a;
        for (int64_t k = 0; !st && k < sn; k++, n++) {
            char byte_buf[1];
            const char *piece = NULL;
            size_t len = 0;
            ids[n] = sid[k];
            bound[n] = k == 0;
            split[n] = sentence >= first_test;
            labels[n] = -1;
            if (sid[k] == bos) continue;
            if ((st = ffn_vocab_piece(s->vocab, k ? sid[k - 1] : -1, sid[k], byte_buf, &piece, &len)))
                break;
            if (len == 0 || pos + (int64_t)len > b || memcmp(cp->text + pos, piece, len)) continue;
            int64_t w = ffn_corpus_word_at(cp, pos, (int64_t)len);
            if (w >= 0) labels[n] = cp->words[w].cls;
            pos += (int64_t)len;
        }
        free(sid);
        a = b + 1;
    }
    if (!st) st = ffn_inspect_probe(s->ctx, s->model, ids, labels, split, bound, n, o, out);
    free(ids), free(labels), free(split), free(bound);
    ffn_corpus_free(cp);
    return st;
}

void serve_labels_compute(serve_state *s) {
    serve_labels *lb = &s->labels;
    memset(lb, 0, sizeof *lb);
    const ffn_tokenizer *tok = ffn_vocab_tokenizer(s->vocab); /* NULL: llama2.c */
    const ffn_model_config *c = ffn_model_get_config(s->model);
    int64_t widest = 0;
    for (int64_t l = 0; l < c->num_hidden_layers; l++) {
        int64_t w = ffn_inspect_layer_width(s->model, l);
        widest = w > widest ? w : widest;
    }
    if (widest == 0) {
        snprintf(lb->reason, sizeof lb->reason, "the model has no FFN layer");
        return;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* the page's language first, then the other one (a model trained on the
     * other corpus fails the probe's vocabulary-coverage check) */
    ffn_lang langs[2] = {s->lang, s->lang == FFN_LANG_ZH ? FFN_LANG_EN : FFN_LANG_ZH};
    ffn_status st = FFN_OK;
    char first_err[400] = "";
    for (int a = 0; a < 2; a++) {
        ffn_probe_options o;
        ffn_probe_options_default(&o);
        o.lang = langs[a];
        o.top_selective = widest;
        o.epochs = 0; /* the labels need the selectivity only, not the fitted probe */
        if (!tok) o.sentences = 200; /* other vocabularies: longer encodings, slower forwards */
        ffn_probe_result *pr = NULL;
        st = tok ? ffn_inspect_gates_corpus(s->ctx, s->model, tok, &o, &pr)
                 : probe_any_vocab(s, &o, &pr);
        if (st == FFN_OK) st = labels_from_probe(lb, s->model, pr);
        ffn_probe_result_free(pr);
        if (st == FFN_OK) {
            lb->available = 1;
            lb->lang = langs[a];
            break;
        }
        serve_labels_free(lb);
        if (!first_err[0])
            snprintf(first_err, sizeof first_err, "%s",
                     st == FFN_ERR_NOMEM ? "out of memory" : ffn_last_error());
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    lb->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (!lb->available) snprintf(lb->reason, sizeof lb->reason, "%s", first_err);
}
