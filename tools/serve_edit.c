/* serve_edit.c -- editing a fact on the served model: POST /api/edit (ROME
 * or the fine-tuning baseline, include/ffn/edit.h, as `ffn edit` runs it),
 * POST /api/edit/reset (the weights as loaded) and POST /api/edit/save (a
 * complete model directory in --save-dir, under a name the server picks).
 *
 * The edit runs on a training copy of the model (ffn_edit_apply needs
 * gradients), loaded from MODEL at the first edit; its weights are then
 * copied into the served model, so every later /api/predict, /api/neurons
 * and /api/trace runs on the edited model until a reset.  Edits add up:
 * the second starts from the first's weights.  C = E[k kᵀ] of a layer is
 * computed at its first ROME edit from the weights as loaded, from the
 * first 90% of the model's text (--samples keys, as `ffn edit`), and kept
 * in memory.  The file on disk is never written: saving goes to
 * --save-dir/<name>, refused when that exists.  Every handler holds
 * s->lock from start to end, so an edit never races a prediction.
 * Letters: D hidden, F down_proj's input width, L layers. */
#include "serve.h"
#include "edit_source.h"
#include "ffn/checkpoint.h"
#include "ffn/edit.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>

/* ---- the start ------------------------------------------------------------------------ */

void serve_editor_init(serve_state *s, const char *data, const char *facts_path) {
    serve_editor *e = &s->editor;
    char *text = NULL;
    size_t n = 0;
    ffn_status st = edit_source_text(s->model_path, data, &text, &n, e->text_what,
                                     sizeof e->text_what);
    if (st) {
        snprintf(e->reason, sizeof e->reason, "%s", ffn_last_error());
        return;
    }
    if (!text) {
        snprintf(e->reason, sizeof e->reason, "%s does not record the text it was trained on; "
                 "start ffn serve with --data FILE (text for C and the held-out loss)",
                 s->model_name);
        return;
    }
    if (strncmp(e->text_what, "the built-in ", 13)) { /* a file: its name, not where it is */
        char name[sizeof e->text_what];
        serve_base_name(e->text_what, name, sizeof name);
        snprintf(e->text_what, sizeof e->text_what, "%s", name);
    }
    st = ffn_vocab_encode(s->vocab, text, n, 0, &e->tokens, &e->n_tokens);
    free(text);
    int64_t n_val = 0;
    if (!st) st = ffn_tokens_split(e->n_tokens, 0.1, &e->n_train, &n_val);
    if (!st && facts_path) st = ffn_facts_load(facts_path, &e->facts);
    else if (!st) st = edit_source_facts(s->model_path, &e->facts);
    if (st) {
        snprintf(e->reason, sizeof e->reason, "%s", ffn_last_error());
        return;
    }
    e->available = 1;
}

void serve_editor_free(serve_editor *e) {
    const int64_t L = e->train ? ffn_model_get_config(e->train)->num_hidden_layers : 0;
    for (int64_t l = 0; e->C && l < L; l++) free(e->C[l]);
    free(e->C);
    free(e->C_rows);
    free(e->original);
    free(e->tokens);
    ffn_facts_free(e->facts);
    ffn_model_free(e->train);
    memset(e, 0, sizeof *e);
}

void serve_editor_info(serve_state *s, FILE *f) {
    const serve_editor *e = &s->editor;
    fprintf(f, "{\"available\":%s", e->available ? "true" : "false");
    if (!e->available) {
        fputs(",\"reason\":", f);
        serve_json_str_scrubbed(f, e->reason);
    } else {
        fputs(",\"text\":", f);
        serve_json_str_scrubbed(f, e->text_what);
    }
    fprintf(f, ",\"edited\":%s,\"n_edits\":%lld,\"save\":%s,\"samples\":%lld,\"facts\":%lld,"
               "\"methods\":[\"rome\",\"ft\"],\"max_steps\":%d,\"saves\":%lld,"
               "\"max_saves\":%lld,\"saved_bytes\":%lld,\"max_save_bytes\":%lld}",
            e->n_edits ? "true" : "false", (long long)e->n_edits, e->save_dir ? "true" : "false",
            (long long)e->samples, (long long)(e->facts ? e->facts->n_facts : 0),
            SERVE_MAX_EDIT_STEPS, (long long)e->n_saved, (long long)e->max_saves,
            (long long)e->saved_bytes, (long long)e->max_save_bytes);
}

/* The training copy and the weights as loaded, at the first edit.  Caller
 * holds s->lock. */
static int editor_ready(serve_state *s, serve_reply *r) {
    serve_editor *e = &s->editor;
    if (!e->available) return serve_err(r, 409, "editing is off: %s", e->reason);
    if (e->train) return 0;
    ffn_model_options mo = {.max_batch = 1, .training = 1}; /* the whole context, fp32 */
    ffn_checkpoint_info info;
    ffn_status st = ffn_checkpoint_load_any(s->ctx, s->model_path, &mo, &e->train, &info);
    if (st) return serve_err(r, 500, "loading the training copy of the model: %s", ffn_last_error());
    int64_t n_train = 0, n_served = 0;
    float *p = ffn_model_params(e->train, &n_train);
    const float *q = ffn_model_params(s->model, &n_served);
    const int64_t L = ffn_model_get_config(e->train)->num_hidden_layers;
    if (n_train != n_served || !q) {
        ffn_model_free(e->train);
        e->train = NULL;
        return serve_err(r, 500, "the served model's weights (%lld floats) are not those of its "
                         "training copy (%lld)", (long long)n_served, (long long)n_train);
    }
    e->original = malloc((size_t)n_train * sizeof *p);
    e->C = calloc((size_t)L, sizeof *e->C);
    e->C_rows = calloc((size_t)L, sizeof *e->C_rows);
    if (!e->original || !e->C || !e->C_rows) {
        free(e->original), free(e->C), free(e->C_rows);
        e->original = NULL, e->C = NULL, e->C_rows = NULL;
        ffn_model_free(e->train);
        e->train = NULL;
        return serve_err(r, 500, "out of memory (a copy of the weights)");
    }
    memcpy(e->original, p, (size_t)n_train * sizeof *p);
    e->n_params = n_train;
    return 0;
}

/* The served model takes the training copy's weights (or the reverse). */
static ffn_status copy_weights(ffn_model *to, ffn_model *from, int64_t n) {
    memcpy(ffn_model_params(to, NULL), ffn_model_params(from, NULL), (size_t)n * sizeof(float));
    return ffn_model_params_changed(to);
}

/* C of layer l (F, F) from the weights as loaded. */
static int layer_c(serve_state *s, int64_t l, serve_reply *r) {
    serve_editor *e = &s->editor;
    if (e->C[l]) return 0;
    char name[96];
    snprintf(name, sizeof name, "model.layers.%lld.mlp.down_proj.weight", (long long)l);
    const ffn_model_tensor *t = ffn_model_find_tensor(e->train, name);
    if (!t) return serve_err(r, 400, "\"layer\": layer %lld has no dense or gated FFN (no %s)",
                             (long long)l, name);
    const int64_t F = t->shape[1];
    double *C = malloc((size_t)(F * F) * sizeof *C);
    if (!C) return serve_err(r, 500, "out of memory (C: %lld x %lld)", (long long)F, (long long)F);
    /* from the weights as loaded, like `ffn edit` on the model on disk */
    ffn_status st = FFN_OK;
    const int edited = e->n_edits > 0;
    if (edited) {
        memcpy(ffn_model_params(e->train, NULL), e->original, (size_t)e->n_params * sizeof(float));
        st = ffn_model_params_changed(e->train);
    }
    int64_t rows = 0;
    if (!st) st = ffn_edit_covariance(e->train, l, e->tokens, e->n_train, e->samples, C, &rows);
    ffn_status st2 = edited ? copy_weights(e->train, s->model, e->n_params) : FFN_OK;
    if (st || st2) {
        free(C);
        return serve_err(r, 500, "C of layer %lld: %s", (long long)l, ffn_last_error());
    }
    e->C[l] = C;
    e->C_rows[l] = rows;
    return 0;
}

/* ---- POST /api/edit ------------------------------------------------------------------- */

static void scores_json(FILE *f, const ffn_edit_scores *sc, double heldout) {
    fprintf(f, "{\"p_new\":%s,\"p_old\":%s,\"logp_new\":%s,\"logp_old\":%s,\"efficacy\":%s,"
            "\"generalisation\":%s,\"specificity\":%s,\"n_paraphrases\":%lld,"
            "\"n_neighbours\":%lld,\"heldout_loss\":%s}",
            serve_num(exp(sc->logp_new)), serve_num(exp(sc->logp_old)), serve_num(sc->logp_new),
            serve_num(sc->logp_old), serve_num(sc->efficacy), serve_num(sc->generalisation),
            serve_num(sc->specificity), (long long)sc->n_paraphrases, (long long)sc->n_neighbours,
            serve_num(heldout));
}

static void options_from(const serve_req *req, ffn_edit_options *o) {
    ffn_edit_options_default(o);
    o->layer = req->layer;
    o->method = req->method == 1 ? FFN_EDIT_FT : FFN_EDIT_ROME;
    const double *v = req->opt;
    const unsigned g = req->opt_given;
#define TAKE(i, field, type) if (g & (1u << (i))) o->field = (type)v[i]
    TAKE(SERVE_O_STEPS, steps, int64_t);
    TAKE(SERVE_O_LR, lr, double);
    TAKE(SERVE_O_KL_WEIGHT, kl_weight, double);
    TAKE(SERVE_O_PREFIXES, n_prefixes, int64_t);
    TAKE(SERVE_O_PREFIX_LEN, prefix_len, int64_t);
    TAKE(SERVE_O_LAMBDA, lambda, double);
    TAKE(SERVE_O_DELTA_DECAY, weight_decay, double);
    TAKE(SERVE_O_CLAMP_NORM, clamp_norm, double);
    TAKE(SERVE_O_FT_STEPS, ft_steps, int64_t);
    TAKE(SERVE_O_FT_LR, ft_lr, double);
    TAKE(SERVE_O_SEED, seed, uint64_t);
#undef TAKE
}

static int edit_locked(serve_state *s, const serve_req *req, serve_reply *r) {
    serve_editor *e = &s->editor;
    const ffn_model_config *c = ffn_model_get_config(s->model);
    if (req->layer < 0 || req->layer >= c->num_hidden_layers)
        return serve_err(r, 400, "\"layer\": %lld out of range (the model has %lld layers: 0..%lld)",
                         (long long)req->layer, (long long)c->num_hidden_layers,
                         (long long)(c->num_hidden_layers - 1));
    if (ffn_inspect_layer_width(s->model, req->layer) <= 0 ||
        ffn_model_config_layer_is_moe(c, req->layer))
        return serve_err(r, 400, "\"layer\": layer %lld has no dense or gated FFN to edit",
                         (long long)req->layer);
    if (!strstr(req->prompt, req->subject))
        return serve_err(r, 400, "\"subject\": '%s' is not in the prompt '%s'", req->subject,
                         req->prompt);
    int rc = editor_ready(s, r);
    if (rc) return rc;
    ffn_edit_options o;
    options_from(req, &o);
    if (o.method == FFN_EDIT_ROME && (rc = layer_c(s, req->layer, r))) return rc;
    const ffn_fact *fact = edit_source_find_fact(e->facts, req->subject, req->prompt);
    ffn_edit_request er;
    memset(&er, 0, sizeof er);
    if (fact) {
        er = ffn_edit_request_from_fact(fact, req->target);
        er.prompt = req->prompt; /* the prompt asked (the fact's, or one of its paraphrases) */
    } else {
        er.prompt = req->prompt;
        er.subject = req->subject;
        er.target = req->target;
    }
    if (req->object) er.old_object = req->object;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ffn_edit_scores before, after;
    double hb = NAN, ha = NAN;
    const int64_t n_val = e->n_tokens - e->n_train;
    ffn_status st = ffn_edit_score(e->train, s->vocab, &er, 1, NULL, &before);
    if (!st) st = ffn_edit_heldout_loss(e->train, e->tokens + e->n_train, n_val, e->windows, &hb);
    if (st) return serve_err(r, st == FFN_ERR_INVALID_ARG ? 400 : 500, "%s", ffn_last_error());
    ffn_edit_result res;
    memset(&res, 0, sizeof res);
    st = ffn_edit_apply(e->train, s->vocab, &er, &o, o.method == FFN_EDIT_ROME ? e->C[o.layer] : NULL,
                        &res);
    if (st) {
        int code = st == FFN_ERR_INVALID_ARG ? 400 : 500;
        serve_err(r, code, "%s", ffn_last_error());
        /* back to the weights the served model still has */
        if (copy_weights(e->train, s->model, e->n_params)) return 500;
        return code;
    }
    const char *olds[1] = {res.old_object};
    st = ffn_edit_score(e->train, s->vocab, &er, 1, olds, &after);
    if (!st) st = ffn_edit_heldout_loss(e->train, e->tokens + e->n_train, n_val, e->windows, &ha);
    if (!st) st = copy_weights(s->model, e->train, e->n_params);
    if (st) {
        ffn_edit_result_free(&res);
        serve_err(r, 500, "%s", ffn_last_error());
        copy_weights(e->train, s->model, e->n_params);
        return 500;
    }
    e->n_edits++;
    e->dirty = 1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    FILE *f = r->out;
    fprintf(f, "{\"method\":\"%s\",\"layer\":%lld,\"prompt\":", ffn_edit_method_name(o.method),
            (long long)o.layer);
    serve_json_str(f, er.prompt);
    fputs(",\"subject\":", f);
    serve_json_str(f, er.subject);
    fputs(",\"target\":", f);
    serve_json_str(f, er.target);
    fputs(",\"old\":", f);
    serve_json_str(f, res.old_object);
    fputs(",\"fact\":", f);
    if (fact) fprintf(f, "%lld", (long long)fact->id);
    else fputs("null", f);
    fprintf(f, ",\"steps\":%lld,\"loss_first\":%s,\"loss_last\":%s,\"kl_last\":%s,\"lambda\":%s,"
            "\"cov_samples\":%lld,\"before\":", (long long)res.steps_run, serve_num(res.loss_first),
            serve_num(res.loss_last), serve_num(res.kl_last), serve_num(res.lambda),
            (long long)(o.method == FFN_EDIT_ROME ? e->C_rows[o.layer] : 0));
    scores_json(f, &before, hb);
    fputs(",\"after\":", f);
    scores_json(f, &after, ha);
    fprintf(f, ",\"edited\":true,\"n_edits\":%lld,\"seconds\":", (long long)e->n_edits);
    serve_json_num(f, (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    fputs("}\n", f);
    ffn_edit_result_free(&res);
    return 200;
}

int serve_api_edit(serve_state *s, const serve_req *req, serve_reply *r) {
    pthread_mutex_lock(&s->lock);
    int rc = edit_locked(s, req, r);
    pthread_mutex_unlock(&s->lock);
    return rc ? rc : 200;
}

/* ---- POST /api/edit/reset ----------------------------------------------------------------- */

int serve_api_edit_reset(serve_state *s, const serve_req *req, serve_reply *r) {
    (void)req;
    serve_editor *e = &s->editor;
    pthread_mutex_lock(&s->lock);
    ffn_status st = FFN_OK;
    const int64_t undone = e->n_edits;
    if (e->train && e->n_edits) {
        memcpy(ffn_model_params(e->train, NULL), e->original, (size_t)e->n_params * sizeof(float));
        st = ffn_model_params_changed(e->train);
        if (!st) st = copy_weights(s->model, e->train, e->n_params);
    }
    if (!st) e->n_edits = 0, e->dirty = 0;
    pthread_mutex_unlock(&s->lock);
    if (st) return serve_err(r, 500, "%s", ffn_last_error());
    fprintf(r->out, "{\"edited\":false,\"n_edits\":0,\"undone\":%lld}\n", (long long)undone);
    return 200;
}

/* ---- POST /api/edit/save ------------------------------------------------------------------ */

/* The model's name: the last part of its path, without an extension. */
static void base_name(const char *path, char *out, size_t cap) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    size_t n = strlen(buf);
    while (n > 1 && buf[n - 1] == '/') buf[--n] = 0;
    const char *b = strrchr(buf, '/');
    b = b ? b + 1 : buf;
    snprintf(out, cap, "%s", *b ? b : "model");
    char *dot = strrchr(out, '.');
    if (dot && dot != out) *dot = 0;
    for (char *p = out; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '_'))
            *p = '_';
}

/* Bytes of the regular files under dir (what a save wrote). */
static int64_t tree_bytes(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int64_t total = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char path[4600];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (lstat(path, &sb)) continue;
        if (S_ISDIR(sb.st_mode)) total += tree_bytes(path);
        else if (S_ISREG(sb.st_mode)) total += (int64_t)sb.st_size;
    }
    closedir(d);
    return total;
}

/* The bytes of a save beyond the weights: the last save's, or the
 * vocabulary file and a MiB for the config and metadata before the first. */
static int64_t dir_bytes_estimate(const serve_state *s) {
    const serve_editor *e = &s->editor;
    if (e->n_saved > 0) {
        const int64_t per = e->saved_bytes / e->n_saved - e->n_params * (int64_t)sizeof(float);
        return per > 0 ? per : 0;
    }
    struct stat sb;
    int64_t extra = 1 << 20;
    if (e->tokenizer_path[0] && stat(e->tokenizer_path, &sb) == 0) extra += (int64_t)sb.st_size;
    return extra;
}

static int save_locked(serve_state *s, serve_reply *r, char *name, size_t cap, char **out) {
    serve_editor *e = &s->editor;
    if (!e->save_dir)
        return serve_err(r, 403, "saving is off: start ffn serve with --save-dir DIR to save "
                         "edited models there");
    if (!e->train || !e->n_edits)
        return serve_err(r, 409, "nothing to save: the model has no edit since the start or the "
                         "last reset");
    if (!e->dirty)
        return serve_err(r, 409, "nothing changed since the last save (%s-edited-%lld)",
                         s->model_name, (long long)e->n_saved);
    if (e->n_saved >= e->max_saves)
        return serve_err(r, 429, "this launch has saved %lld models, the most --max-saves "
                         "allows", (long long)e->n_saved);
    /* what a save writes: the weights (f32) and the files copied beside them */
    const int64_t need = e->n_params * (int64_t)sizeof(float) + dir_bytes_estimate(s);
    if (e->saved_bytes + need > e->max_save_bytes)
        return serve_err(r, 429, "a save writes about %.1f MB and this launch's saves wrote "
                         "%.1f MB of the %.1f MB --max-save-mb allows", need / 1048576.0,
                         e->saved_bytes / 1048576.0, e->max_save_bytes / 1048576.0);
    struct statvfs vfs;
    if (statvfs(e->save_dir, &vfs) == 0) {
        const double avail = (double)vfs.f_bavail * (double)vfs.f_frsize;
        const double margin = 64.0 * 1048576.0; /* leave the file system some room */
        if (avail < (double)need + margin)
            return serve_err(r, 507, "--save-dir has %.1f MB free, a save needs about %.1f MB "
                             "(and 64 MB to spare)", avail / 1048576.0, need / 1048576.0);
    }
    char base[200];
    base_name(s->model_path, base, sizeof base);
    /* DIR/<model>-edited-<n>: the first n that is not there; ffn_edit_save
     * refuses an existing directory itself (force 0) */
    struct stat sb;
    for (int64_t k = e->n_saved + 1;; k++) {
        snprintf(name, cap, "%s-edited-%lld", base, (long long)k);
        free(*out);
        size_t n = strlen(e->save_dir) + strlen(name) + 2;
        if (!(*out = malloc(n))) return serve_err(r, 500, "out of memory");
        snprintf(*out, n, "%s/%s", e->save_dir, name);
        if (lstat(*out, &sb) != 0 && errno == ENOENT) break;
        if (k > e->n_saved + 10000) return serve_err(r, 409, "%s: no free name", e->save_dir);
    }
    ffn_status st = ffn_edit_save(e->train, s->model_path,
                                  e->tokenizer_path[0] ? e->tokenizer_path : NULL,
                                  e->tokenizer_is_llama2c, *out, 0);
    if (st) return serve_err(r, st == FFN_ERR_INVALID_ARG ? 409 : 500, "%s", ffn_last_error());
    e->n_saved++;
    e->dirty = 0;
    e->saved_bytes += tree_bytes(*out);
    return 0;
}

int serve_api_edit_save(serve_state *s, const serve_req *req, serve_reply *r) {
    (void)req;
    char name[256] = "";
    char *path = NULL;
    pthread_mutex_lock(&s->lock);
    int rc = save_locked(s, r, name, sizeof name, &path);
    const int64_t n_edits = s->editor.n_edits;
    pthread_mutex_unlock(&s->lock);
    if (!rc) {
        fputs("{\"name\":", r->out);
        serve_json_str(r->out, name);
        char dir[256]; /* where, by the directory's name: no absolute path in a reply */
        serve_base_name(s->editor.save_dir, dir, sizeof dir);
        char shown[520];
        snprintf(shown, sizeof shown, "%s/%s", dir, name);
        fputs(",\"path\":", r->out);
        serve_json_str(r->out, shown);
        fprintf(r->out, ",\"n_edits\":%lld}\n", (long long)n_edits);
    }
    free(path);
    return rc ? rc : 200;
}
