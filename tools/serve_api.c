/* serve_api.c -- the JSON API of `ffn serve`: one handler per endpoint and
 * the table that routes to them (serve_http.c reads it).  Adding an
 * endpoint is one handler here and one line in serve_endpoints[] (and a
 * panel in tools/report/live.js that calls it); the table is also listed
 * by GET /api/info.  Handlers write their reply to r->out; on bad input
 * they return serve_err(r, 4xx, ...) naming the field, and the server
 * keeps serving.
 * Letters: T tokens, V vocab, W a layer's neuron width, K top-k. */
#include "serve.h"
#include "ffn/trace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *mlp_name(const ffn_model_config *c, int64_t layer) {
    if (ffn_model_config_layer_is_moe(c, layer)) return "moe";
    return c->mlp_type == FFN_MODEL_MLP_GATED ? "gated"
           : c->mlp_type == FFN_MODEL_MLP_DENSE ? "dense" : "none";
}

/* layer, neuron and position of every edit against the model and T. */
static int check_edits(serve_state *s, const serve_req *req, int64_t T, serve_reply *r) {
    const int64_t L = ffn_model_get_config(s->model)->num_hidden_layers;
    for (int64_t e = 0; e < req->n_edits; e++) {
        const serve_edit *ed = &req->edits[e];
        if (ed->layer >= L)
            return serve_err(r, 400, "\"edits\"[%lld]: layer %lld out of range (the model has %lld "
                             "layers: 0..%lld)", (long long)e, (long long)ed->layer, (long long)L,
                             (long long)(L - 1));
        int64_t W = ffn_inspect_layer_width(s->model, ed->layer);
        if (W <= 0)
            return serve_err(r, 400, "\"edits\"[%lld]: layer %lld has no FFN", (long long)e,
                             (long long)ed->layer);
        if (ed->feature >= 0) {
            const serve_tc *t = serve_tc_of_layer(s, ed->layer);
            if (!t)
                return serve_err(r, 400, "\"edits\"[%lld]: a feature of layer %lld, and no "
                                 "--transcoder of that layer was given to the server%s",
                                 (long long)e, (long long)ed->layer,
                                 s->n_tcs ? " (GET /api/info lists the transcoders)" : "");
            const int64_t Fp = ffn_tc_get_config(t->tc)->features;
            if (ed->feature >= Fp)
                return serve_err(r, 400, "\"edits\"[%lld]: feature %lld out of range (the "
                                 "transcoder of layer %lld has %lld features: 0..%lld)",
                                 (long long)e, (long long)ed->feature, (long long)ed->layer,
                                 (long long)Fp, (long long)(Fp - 1));
        } else if (ed->neuron >= W)
            return serve_err(r, 400, "\"edits\"[%lld]: neuron %lld out of range (layer %lld has "
                             "%lld neurons: 0..%lld)", (long long)e, (long long)ed->neuron,
                             (long long)ed->layer, (long long)W, (long long)(W - 1));
        if (ed->position >= T)
            return serve_err(r, 400, "\"edits\"[%lld]: position %lld out of range (the input has "
                             "%lld tokens: 0..%lld, or -1 for every position)", (long long)e,
                             (long long)ed->position, (long long)T, (long long)(T - 1));
    }
    return 0;
}

/* ---- GET /api/info ---------------------------------------------------------------------- */

static int api_info(serve_state *s, const serve_req *req, serve_reply *r) {
    (void)req;
    FILE *f = r->out;
    const ffn_model_config *c = ffn_model_get_config(s->model);
    fputs("{\"version\":", f);
    serve_json_str(f, ffn_version());
    fputs(",\"model\":", f); /* its name only: replies show no path of this machine */
    serve_json_str(f, s->model_name);
    fputs(",\"format\":", f);
    serve_json_str(f, s->format);
    fprintf(f, ",\"config\":{\"vocab_size\":%lld,\"hidden_size\":%lld,\"intermediate_size\":%lld,"
               "\"num_hidden_layers\":%lld,\"num_attention_heads\":%lld,"
               "\"num_key_value_heads\":%lld,\"max_position_embeddings\":%lld,"
               "\"num_experts\":%lld,\"num_experts_per_tok\":%lld,\"hidden_act\":",
            (long long)c->vocab_size, (long long)c->hidden_size, (long long)c->intermediate_size,
            (long long)c->num_hidden_layers, (long long)c->num_attention_heads,
            (long long)c->num_key_value_heads, (long long)c->max_position_embeddings,
            (long long)c->num_experts, (long long)c->num_experts_per_tok);
    serve_json_str(f, ffn_act_name(c->hidden_act));
    fprintf(f, ",\"tie_word_embeddings\":%s},\"layers\":[", c->tie_word_embeddings ? "true" : "false");
    for (int64_t l = 0; l < c->num_hidden_layers; l++) {
        fprintf(f, "%s{\"layer\":%lld,\"mlp\":\"%s\",\"d_ff\":%lld}", l ? "," : "", (long long)l,
                mlp_name(c, l), (long long)ffn_inspect_layer_width(s->model, l));
    }
    ffn_vocab_special sp = ffn_vocab_specials(s->vocab);
    fprintf(f, "],\"vocab\":{\"kind\":\"%s\",\"size\":%lld,\"bos\":%d,\"eos\":%d},",
            ffn_vocab_kind_name(ffn_vocab_get_kind(s->vocab)), (long long)ffn_vocab_size(s->vocab),
            sp.bos, sp.eos);
    fputs("\"labels\":{\"available\":", f);
    fputs(s->labels.available ? "true" : "false", f);
    if (s->labels.available) {
        fprintf(f, ",\"corpus\":\"%s\",\"seconds\":", ffn_lang_name(s->labels.lang));
        serve_json_num(f, s->labels.seconds);
    } else {
        fputs(",\"reason\":", f);
        serve_json_str_scrubbed(f, s->labels.reason);
    }
    fputs(",\"classes\":[", f);
    for (int k = 0; k < FFN_WORD_N_CLASSES; k++)
        fprintf(f, "%s\"%s\"", k ? "," : "", ffn_word_class_name((ffn_word_class)k));
    fprintf(f, "]},\"limits\":{\"body_bytes\":%d,\"text_bytes\":%d,\"tokenize_tokens\":%d,"
               "\"run_tokens\":%lld,\"edits\":%d,\"k\":%d},",
            SERVE_MAX_BODY, SERVE_MAX_TEXT_BYTES, SERVE_MAX_TOKENIZE,
            (long long)c->max_position_embeddings, SERVE_MAX_EDITS, SERVE_MAX_K);
    fputs("\"transcoders\":[", f);
    for (int i = 0; i < s->n_tcs; i++) {
        const ffn_tc_config *tc = ffn_tc_get_config(s->tcs[i].tc);
        fprintf(f, "%s{\"layer\":%lld,\"kind\":\"%s\",\"features\":%lld,\"k\":%lld,"
                   "\"file\":", i ? "," : "", (long long)tc->layer, ffn_tc_kind_name(tc->kind),
                (long long)tc->features, (long long)tc->k);
        serve_json_str(f, s->tcs[i].name);
        fputc('}', f);
    }
    fputs("],\"edit\":", f);
    pthread_mutex_lock(&s->lock); /* n_edits changes under the lock */
    serve_editor_info(s, f);
    pthread_mutex_unlock(&s->lock);
    fprintf(f, ",\"lang\":\"%s\",\"messages\":", ffn_lang_name(s->lang));
    static const char *const prefixes[] = {"page.", "live.", NULL};
    i18n_json(f, s->lang, prefixes);
    fputs(",\"endpoints\":[", f);
    for (size_t i = 0; i < serve_n_endpoints; i++) {
        fprintf(f, "%s{\"method\":\"%s\",\"path\":\"%s\",\"summary\":", i ? "," : "",
                serve_endpoints[i].method, serve_endpoints[i].path);
        serve_json_str(f, serve_endpoints[i].summary);
        fputc('}', f);
    }
    fputs("]}\n", f);
    return 200;
}

/* ---- POST /api/tokenize ------------------------------------------------------------------- */

static void write_tokens(FILE *f, const serve_state *s, const int32_t *ids, int64_t n) {
    fputs("[", f);
    for (int64_t i = 0; i < n; i++) {
        fprintf(f, "%s{\"id\":%d,\"piece\":", i ? "," : "", ids[i]);
        serve_json_piece(f, s, i ? ids[i - 1] : -1, ids[i]);
        fputc('}', f);
    }
    fputs("]", f);
}

static int api_tokenize(serve_state *s, const serve_req *req, serve_reply *r) {
    int32_t *ids = NULL;
    int64_t n = 0;
    int rc = serve_req_tokens(s, req, SERVE_MAX_TOKENIZE, &ids, &n, r);
    if (rc) return rc;
    fprintf(r->out, "{\"n_tokens\":%lld,\"tokens\":", (long long)n);
    write_tokens(r->out, s, ids, n);
    fputs("}\n", r->out);
    free(ids);
    return 200;
}

/* ---- POST /api/predict ---------------------------------------------------------------------- */

static void write_ranked(FILE *f, const serve_state *s, const int32_t *top, int64_t K,
                         const double *before, const double *after, int32_t prev) {
    fputc('[', f);
    for (int64_t j = 0; j < K; j++) {
        fprintf(f, "%s{\"id\":%d,\"piece\":", j ? "," : "", top[j]);
        serve_json_piece(f, s, prev, top[j]);
        fprintf(f, ",\"p_before\":%s,\"p_after\":%s}", serve_num(before[top[j]]),
                serve_num(after[top[j]]));
    }
    fputc(']', f);
}

static int api_predict(serve_state *s, const serve_req *req, serve_reply *r) {
    const int64_t ctx_len = ffn_model_get_config(s->model)->max_position_embeddings;
    const int64_t V = ffn_vocab_size(s->vocab);
    int32_t *ids = NULL;
    int64_t T = 0;
    int rc = serve_req_tokens(s, req, ctx_len, &ids, &T, r);
    if (rc) return rc;
    if ((rc = check_edits(s, req, T, r))) {
        free(ids);
        return rc;
    }
    const int64_t K = req->k ? (req->k < V ? req->k : V) : (V < 10 ? V : 10);
    double *before = malloc((size_t)V * sizeof *before), *after = malloc((size_t)V * sizeof *after);
    int32_t *top_b = malloc((size_t)K * sizeof *top_b), *top_a = malloc((size_t)K * sizeof *top_a);
    if (!before || !after || !top_b || !top_a) {
        rc = serve_err(r, 500, "out of memory");
        goto done;
    }
    pthread_mutex_lock(&s->lock);
    ffn_status st = serve_predict_probs(s, ids, T, NULL, 0, before);
    if (!st && req->n_edits) st = serve_predict_probs(s, ids, T, req->edits, req->n_edits, after);
    const int64_t model_edits = s->editor.n_edits; /* facts edited into the weights (/api/edit) */
    pthread_mutex_unlock(&s->lock);
    if (st) {
        rc = serve_err(r, 500, "%s", st == FFN_ERR_NOMEM ? "out of memory" : ffn_last_error());
        goto done;
    }
    if (!req->n_edits) memcpy(after, before, (size_t)V * sizeof *after);
    double kl = 0.0; /* KL(before || after), natural log */
    for (int64_t v = 0; v < V; v++)
        if (before[v] > 0) kl += before[v] * (log(before[v]) - log(after[v] > 1e-300 ? after[v] : 1e-300));
    cli_top_ids(NULL, before, V, K, top_b);
    cli_top_ids(NULL, after, V, K, top_a);
    FILE *f = r->out;
    fprintf(f, "{\"n_tokens\":%lld,\"tokens\":", (long long)T);
    write_tokens(f, s, ids, T);
    fprintf(f, ",\"position\":%lld,\"edits\":[", (long long)(T - 1));
    for (int64_t e = 0; e < req->n_edits; e++) {
        const serve_edit *ed = &req->edits[e];
        fprintf(f, "%s{\"layer\":%lld,\"%s\":%lld,\"scale\":", e ? "," : "",
                (long long)ed->layer, ed->feature >= 0 ? "feature" : "neuron",
                (long long)(ed->feature >= 0 ? ed->feature : ed->neuron));
        serve_json_num(f, req->edits[e].scale);
        fprintf(f, ",\"position\":%lld}", (long long)req->edits[e].position);
    }
    fputs("],\"before\":", f);
    write_ranked(f, s, top_b, K, before, after, ids[T - 1]);
    fputs(",\"after\":", f);
    write_ranked(f, s, top_a, K, before, after, ids[T - 1]);
    fputs(",\"kl\":", f);
    serve_json_num(f, kl);
    fprintf(f, ",\"model_edits\":%lld}\n", (long long)model_edits);
    rc = 200;
done:
    free(ids), free(before), free(after), free(top_b), free(top_a);
    return rc;
}

/* ---- POST /api/neurons ------------------------------------------------------------------------ */

static void write_label(FILE *f, const serve_state *s, int64_t layer, int64_t flat) {
    const serve_labels *lb = &s->labels;
    if (!lb->available || layer >= lb->n_layers || !lb->cls[layer] || lb->cls[layer][flat] < 0) {
        fputs("null", f);
        return;
    }
    fprintf(f, "{\"class\":\"%s\",\"d\":", ffn_word_class_name((ffn_word_class)lb->cls[layer][flat]));
    serve_json_num(f, lb->d[layer][flat]);
    fputc('}', f);
}

/* ,"features":[...] of layer l's --transcoder at position t (nothing
 * without one): its active features there, largest first, each with the
 * tokens its decoder row promotes (ffn_tc_feature_logits); runs the
 * model, so under s->lock. */
static ffn_status write_tc_features(FILE *f, serve_state *s, const int32_t *ids, int64_t T,
                                    int64_t t, int64_t l) {
    const serve_tc *st_tc = serve_tc_of_layer(s, l);
    if (!st_tc) return FFN_OK;
    const ffn_tc_config *cfg = ffn_tc_get_config(st_tc->tc);
    const int64_t k = cfg->k, V = ffn_model_get_config(s->model)->vocab_size;
    int32_t *idx = malloc((size_t)(T * k) * sizeof *idx);
    float *val = malloc((size_t)(T * k) * sizeof *val), *lens = malloc((size_t)V * sizeof *lens);
    ffn_status st = idx && val && lens ? FFN_OK : ffn_set_error(FFN_ERR_NOMEM, "out of memory");
    if (!st) st = ffn_tc_codes(s->ctx, s->model, st_tc->tc, ids, T, idx, val);
    if (!st) {
        int32_t *ix = idx + t * k;
        float *vx = val + t * k;
        /* largest first (equal: lower feature first) */
        for (int64_t a = 1; a < k; a++)
            for (int64_t b = a; b > 0 && (vx[b] > vx[b - 1] || (vx[b] == vx[b - 1] &&
                                                                 ix[b] < ix[b - 1])); b--) {
                const float tv = vx[b];
                const int32_t ti = ix[b];
                vx[b] = vx[b - 1], ix[b] = ix[b - 1];
                vx[b - 1] = tv, ix[b - 1] = ti;
            }
        fprintf(f, ",\"transcoder\":{\"kind\":\"%s\",\"features\":%lld,\"file\":",
                ffn_tc_kind_name(cfg->kind), (long long)cfg->features);
        serve_json_str(f, st_tc->name);
        fputs("},\"features\":[", f);
        int first = 1;
        for (int64_t j = 0; j < k && !st; j++) {
            if (!(vx[j] > 0)) continue;
            if ((st = ffn_tc_feature_logits(s->model, st_tc->tc, ix[j], lens))) break;
            fprintf(f, "%s{\"feature\":%d,\"activation\":", first ? "" : ",", ix[j]);
            first = 0;
            serve_json_num(f, vx[j]);
            fputs(",\"promoted\":[", f);
            for (int64_t p = 0; p < SERVE_PROMOTED && p < V; p++) {
                int64_t best = -1; /* the p-th largest: the largest below the ones taken */
                for (int64_t v = 0; v < V; v++)
                    if (lens[v] == lens[v] && (best < 0 || lens[v] > lens[best])) best = v;
                if (best < 0) break;
                fprintf(f, "%s{\"id\":%lld,\"piece\":", p ? "," : "", (long long)best);
                serve_json_piece(f, s, -1, (int32_t)best);
                fputs(",\"logit\":", f);
                serve_json_num(f, lens[best]);
                fputc('}', f);
                lens[best] = NAN; /* taken */
            }
            fputs("]}", f);
        }
        fputc(']', f);
    }
    free(idx);
    free(val);
    free(lens);
    return st;
}

static int api_neurons(serve_state *s, const serve_req *req, serve_reply *r) {
    const ffn_model_config *c = ffn_model_get_config(s->model);
    int32_t *ids = NULL;
    int64_t T = 0;
    int rc = serve_req_tokens(s, req, c->max_position_embeddings, &ids, &T, r);
    if (rc) return rc;
    int64_t t = req->position < 0 ? T - 1 : req->position;
    if (t >= T) {
        free(ids);
        return serve_err(r, 400, "\"position\": %lld out of range (the input has %lld tokens: "
                         "0..%lld, or -1 for the last)", (long long)req->position, (long long)T,
                         (long long)(T - 1));
    }
    if (req->layer >= c->num_hidden_layers || (req->layer >= 0 && ffn_inspect_layer_width(s->model, req->layer) <= 0)) {
        free(ids);
        if (req->layer >= c->num_hidden_layers)
            return serve_err(r, 400, "\"layer\": %lld out of range (the model has %lld layers: "
                             "0..%lld, or -1 for every layer)", (long long)req->layer,
                             (long long)c->num_hidden_layers, (long long)(c->num_hidden_layers - 1));
        return serve_err(r, 400, "\"layer\": layer %lld has no FFN", (long long)req->layer);
    }
    ffn_inspect_options o;
    ffn_inspect_options_default(&o);
    o.layer = req->layer;
    o.top_k = req->k ? req->k : 8;
    o.n_promoted = SERVE_PROMOTED;
    ffn_inspect_result *res = NULL;
    pthread_mutex_lock(&s->lock);
    ffn_status st = ffn_inspect_run(s->ctx, s->model, ids, T, &o, &res);
    pthread_mutex_unlock(&s->lock);
    if (st) {
        free(ids);
        return serve_err(r, 500, "%s", ffn_last_error());
    }
    FILE *f = r->out;
    fprintf(f, "{\"position\":%lld,\"token\":{\"id\":%d,\"piece\":", (long long)t, ids[t]);
    serve_json_piece(f, s, t ? ids[t - 1] : -1, ids[t]);
    fputs("},\"layers\":[", f);
    for (int64_t li = 0; li < res->n_layers; li++) {
        const ffn_inspect_token *tk = ffn_inspect_token_at(res, li, t);
        const int64_t l = res->layers[li];
        const int64_t W = ffn_inspect_layer_width(s->model, l);
        const int64_t E = res->layer_is_moe[li] ? c->num_experts : 1;
        const int64_t fe = E > 0 ? W / E : W;
        fprintf(f, "%s{\"layer\":%lld,\"mlp\":\"%s\",\"d_ff\":%lld,\"explained\":%s,\"cosine\":%s,"
                "\"neurons\":[", li ? "," : "", (long long)l, mlp_name(c, l), (long long)W,
                serve_num(tk->explained), serve_num(tk->cosine));
        for (int64_t j = 0; j < tk->n_top; j++) {
            const ffn_inspect_neuron *nu = &tk->top[j];
            /* the tap's numbering: expert e's neuron i is e·Fe + i; the shared
             * expert is not tapped and cannot be edited */
            const int64_t flat = nu->expert >= 0 ? nu->expert * fe + nu->index
                                 : nu->expert == -1 ? nu->index : -1;
            fprintf(f, "%s{\"neuron\":%lld,\"expert\":%lld,\"index\":%lld,\"gate_pre\":%s,"
                    "\"gate\":%s,\"up\":%s,\"product\":%s,\"contribution\":%s,\"promoted\":[",
                    j ? "," : "",
                    (long long)flat, (long long)nu->expert, (long long)nu->index,
                    serve_num(nu->gate_pre), serve_num(nu->gate), serve_num(nu->up),
                    serve_num(nu->product), serve_num(nu->contribution));
            for (int64_t p = 0; p < res->n_promoted; p++) {
                fprintf(f, "%s{\"id\":%d,\"piece\":", p ? "," : "", nu->promoted[p]);
                serve_json_piece(f, s, -1, nu->promoted[p]);
                fputs(",\"logit\":", f);
                serve_json_num(f, nu->promoted_logit[p]);
                fputc('}', f);
            }
            fputs("],\"label\":", f);
            if (flat >= 0) write_label(f, s, l, flat);
            else fputs("null", f);
            fputc('}', f);
        }
        fputc(']', f);
        pthread_mutex_lock(&s->lock);
        st = write_tc_features(f, s, ids, T, t, l);
        pthread_mutex_unlock(&s->lock);
        if (st) {
            ffn_inspect_result_free(res);
            free(ids);
            return serve_err(r, 500, "%s", ffn_last_error());
        }
        fputc('}', f);
    }
    fputs("]}\n", f);
    ffn_inspect_result_free(res);
    free(ids);
    return 200;
}

/* ---- the table ---------------------------------------------------------------------------------- */

/* Causal tracing (include/ffn/trace.h) of one prompt: the subject's
 * embeddings corrupted, each (layer, position) of the hidden state, the
 * MLP output and the attention output restored in turn; the page draws
 * the three tables. */
static int api_trace(serve_state *s, const serve_req *req, serve_reply *r) {
    int32_t *ids = NULL, target = -1;
    int64_t T = 0, sb = 0, se = 0;
    const int64_t ctx_len = ffn_model_get_config(s->model)->max_position_embeddings;
    ffn_status st = ffn_trace_prepare(s->vocab, req->text, req->subject, req->target, &ids, &T, &sb,
                                      &se, &target);
    if (st) return serve_err(r, 400, "%s", ffn_last_error());
    if (T > ctx_len) {
        free(ids);
        return serve_err(r, 400, "\"text\": %lld tokens, the model's context is %lld",
                         (long long)T, (long long)ctx_len);
    }
    ffn_trace_options o;
    ffn_trace_options_default(&o);
    ffn_trace_result *res = NULL;
    pthread_mutex_lock(&s->lock);
    if (target < 0) { /* no target: the clean run's most probable token (lowest id on ties) */
        const int64_t V = ffn_vocab_size(s->vocab);
        double *p = malloc((size_t)V * sizeof *p);
        st = p ? serve_predict_probs(s, ids, T, NULL, 0, p) : FFN_ERR_NOMEM;
        for (int64_t v = 0; st == FFN_OK && v < V; v++)
            if (target < 0 || p[v] > p[target]) target = (int32_t)v;
        free(p);
    }
    if (st == FFN_OK) st = ffn_trace_run(s->ctx, s->model, ids, T, sb, se, target, &o, &res);
    pthread_mutex_unlock(&s->lock);
    if (st) {
        free(ids);
        return serve_err(r, st == FFN_ERR_NOMEM ? 500 : 400, "%s", ffn_last_error());
    }
    FILE *f = r->out;
    fprintf(f, "{\"n_tokens\":%lld,\"tokens\":", (long long)T);
    write_tokens(f, s, ids, T);
    fprintf(f, ",\"subject\":[%lld,%lld],\"target\":%d,\"samples\":%lld,\"p_clean\":",
            (long long)res->subject_begin, (long long)res->subject_end, (int)res->target,
            (long long)res->samples);
    serve_json_num(f, res->p_clean);
    fprintf(f, ",\"p_corrupt\":");
    serve_json_num(f, res->p_corrupt);
    fprintf(f, ",\"p_restore_input\":");
    serve_json_num(f, res->p_restore_input);
    fprintf(f, ",\"effects\":{");
    for (int k = 0; k < FFN_TRACE_N_KINDS; k++) {
        fprintf(f, "%s\"%s\":[", k ? "," : "", ffn_trace_kind_name((ffn_trace_kind)k));
        for (int64_t l = 0; l < res->n_layers; l++) {
            fprintf(f, "%s[", l ? "," : "");
            for (int64_t t = 0; t < res->n_tokens; t++) {
                if (t) fputc(',', f);
                serve_json_num(f, res->effect[k][l * res->n_tokens + t]);
            }
            fputc(']', f);
        }
        fputc(']', f);
    }
    fprintf(f, "}}");
    ffn_trace_result_free(res);
    free(ids);
    return 200;
}

const serve_endpoint serve_endpoints[] = {
    {"GET", "/api/info", 0, api_info,
     "the model's config, layers and widths, vocabulary, labels, limits, page messages"},
    {"POST", "/api/tokenize", SERVE_F_TEXT, api_tokenize,
     "{\"text\"} -> its tokens with their pieces"},
    {"POST", "/api/predict", SERVE_F_TEXT | SERVE_F_IDS | SERVE_F_EDITS | SERVE_F_K, api_predict,
     "{\"text\"|\"ids\", \"edits\": [{\"layer\",\"neuron\"|\"feature\",\"scale\"}], \"k\"} -> "
     "next-token top-k before and after the edits, and KL(before || after)"},
    {"POST", "/api/neurons",
     SERVE_F_TEXT | SERVE_F_IDS | SERVE_F_POSITION | SERVE_F_LAYER | SERVE_F_K, api_neurons,
     "{\"text\"|\"ids\", \"position\", \"layer\", \"k\"} -> a token's strongest FFN neurons per "
     "layer: gate, up, product, promoted tokens, gate-probe label"},
    {"POST", "/api/trace", SERVE_F_TEXT | SERVE_F_SUBJECT | SERVE_F_TARGET, api_trace,
     "{\"text\", \"subject\", \"target\"} -> causal tracing: p(target) clean, with the "
     "subject corrupted, and restored per (layer, position) for resid_post, mlp_out, attn_out"},
    {"POST", "/api/edit",
     SERVE_F_PROMPT | SERVE_F_SUBJECT | SERVE_F_TARGET | SERVE_F_LAYER | SERVE_F_METHOD |
         SERVE_F_OBJECT | SERVE_F_EDIT_OPTS,
     serve_api_edit,
     "{\"prompt\", \"subject\", \"target\", \"layer\", \"method\": rome|ft, options of ffn "
     "edit} -> edits the served model in memory; scores before and after"},
    {"POST", "/api/edit/reset", 0, serve_api_edit_reset,
     "{} -> the weights as loaded again (every edit undone)"},
    {"POST", "/api/edit/save", 0, serve_api_edit_save,
     "{} -> the edited model written to --save-dir/<name> (the server picks the name)"},
};
const size_t serve_n_endpoints = sizeof serve_endpoints / sizeof serve_endpoints[0];
