/* report.c -- `ffn report`: one self-contained HTML page about a run
 * directory (see report.h for what it shows).  The page is data + a small
 * hand-written viewer: this file gathers the data (curves from the metrics
 * files, parameter counts from tensor tables and config.json files, the
 * per-token neurons from ffn_inspect_run, the linear-collapse check) into one
 * JSON object, and writes it into the page of tools/report/ (embedded).
 *
 * Reading order: JSON reading (the library's reader) and writing helpers, finding the runs, each section's data, then
 * report_write.
 *
 * Letters: T prompt tokens, D hidden, F intermediate, L layers, V vocab,
 *          K top neurons per token, P promoted tokens per neuron. */
#include "report.h"
#include "trace_report.h"
#include "trace_dist.h"
#include "tc_report.h"
#include "i18n.h"

#include "report_assets.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- reading JSON: the library's strict reader (ffn/json.h) ---------------
 * compare.json and the metrics lines; both are written with null for a
 * number that is not finite (a diverged run). */

typedef ffn_json_value jval;

static const jval *jget(const jval *obj, const char *key) { return ffn_json_get(obj, key); }

static double jnum(const jval *obj, const char *key, double dflt) {
    const jval *v = ffn_json_get(obj, key);
    return ffn_json_type_of(v) == FFN_JSON_NUMBER ? ffn_json_number(v) : dflt;
}

static const char *jstr(const jval *obj, const char *key) {
    return ffn_json_string(ffn_json_get(obj, key));
}

/* ---- small helpers ------------------------------------------------------------ */

typedef struct rctx {
    const char *cmd;
    const report_options *opt;
    ffn_ctx *ctx;
    FILE *out;           /* the data JSON being written (memory stream) */
    int failed;          /* an exit code once something failed */
} rctx;

static int rfail(rctx *r, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int rfail(rctx *r, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cli_error(r->cmd, "%s", msg);
    r->failed = code;
    return code;
}

/* The type bits of what path names, links followed (S_IFDIR, S_IFREG, ...);
 * 0 when there is nothing there. */
static mode_t path_type(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? st.st_mode & S_IFMT : 0;
}

static int is_dir(const char *path) { return path_type(path) == S_IFDIR; }
static int is_file(const char *path) { return path_type(path) == S_IFREG; }

/* JSON writing.  Strings: valid UTF-8 passes through; '<', '>' and '&' are
 * escaped so the data can sit inside a <script> element; a byte that is not
 * valid UTF-8 is written as the four visible characters \xNN. */
static void jw_str_n(FILE *f, const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    fputc('"', f);
    while (p < end) {
        unsigned char c = *p;
        if (c == '"') fputs("\\\"", f);
        else if (c == '\\') fputs("\\\\", f);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c < 0x20 || c == 0x7F || c == '<' || c == '>' || c == '&') fprintf(f, "\\u%04x", c);
        else if (c < 0x80) fputc(c, f);
        else {
            int len = c >= 0xF0 && c < 0xF5 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
            if (c >= 0xF5) len = 0;
            int ok = len > 0 && end - p >= len;
            for (int i = 1; ok && i < len; i++) ok = (p[i] & 0xC0) == 0x80;
            if (ok && len == 3) {
                uint32_t cp = ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(p[1] & 0x3F) << 6);
                ok = cp >= 0x800 && !(cp >= 0xD800 && cp < 0xE000);
            }
            if (ok && len == 4) {
                uint32_t cp = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(p[1] & 0x3F) << 12);
                ok = cp >= 0x10000 && cp <= 0x10FFFF;
            }
            if (ok) {
                fwrite(p, 1, (size_t)len, f);
                p += len;
                continue;
            }
            fprintf(f, "\\\\x%02X", c);
        }
        p++;
    }
    fputc('"', f);
}

static void jw_str(FILE *f, const char *s) {
    if (!s) fputs("null", f);
    else jw_str_n(f, s, strlen(s));
}

/* A float with 4 significant digits (null when not finite). */
static void jw_num(FILE *f, double v) { cli_json_number(f, v, "%.4g"); }
static const char *jw_numstr(double v) { return cli_json_num(v, "%.4g"); }

static void jw_num_full(FILE *f, double v) { cli_json_number(f, v, "%.9g"); }

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    while (s && s[1] == '\0' && s > path) { /* trailing slash */
        const char *t = s - 1;
        while (t > path && *t != '/') t--;
        return *t == '/' ? t + 1 : t;
    }
    return s ? s + 1 : path;
}

/* snprintf into a path buffer; 0 when it does not fit (report_write
 * rejects such long paths up front, so this is a guard) */
static int set_path(char *dst, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int set_path(char *dst, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(dst, n, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= n) {
        dst[0] = '\0';
        return 0;
    }
    return 1;
}

/* ---- finding the runs --------------------------------------------------------- */

#define REPORT_MAX_RUNS 256

typedef struct run_info {
    char name[256];      /* "swiglu-seed1" */
    char variant[256];   /* "swiglu" */
    char ckpt[4096];     /* checkpoint directory, "" when none */
    char metrics[4096];  /* metrics file, "" when none */
} run_info;

typedef struct run_set {
    int single;          /* run_dir is itself a checkpoint */
    int n;
    run_info runs[REPORT_MAX_RUNS];
    ffn_json *compare_doc; /* compare.json, or NULL */
    const jval *compare;   /* its root */
} run_set;

static void variant_of(const char *name, char *out, size_t n) {
    snprintf(out, n, "%s", name);
    char *s = strstr(out, "-seed");
    if (s) *s = '\0';
}

static run_info *run_find_or_add(run_set *rs, const char *name) {
    for (int i = 0; i < rs->n; i++)
        if (!strcmp(rs->runs[i].name, name)) return &rs->runs[i];
    if (rs->n >= REPORT_MAX_RUNS) return NULL;
    run_info *ri = &rs->runs[rs->n++];
    memset(ri, 0, sizeof *ri);
    snprintf(ri->name, sizeof ri->name, "%s", name);
    variant_of(name, ri->variant, sizeof ri->variant);
    return ri;
}

static int cmp_runs(const void *a, const void *b) {
    return strcmp(((const run_info *)a)->name, ((const run_info *)b)->name);
}

static int find_runs(rctx *r, const char *dir, run_set *rs) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, FFN_CONFIG_FILENAME);
    if (is_file(path)) { /* one checkpoint of `ffn train --out DIR` */
        rs->single = 1;
        run_info *ri = run_find_or_add(rs, base_name(dir));
        snprintf(ri->ckpt, sizeof ri->ckpt, "%s", dir);
        snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
        if (is_file(path)) set_path(ri->metrics, sizeof ri->metrics, "%s", path);
        else {
            char trimmed[4096];
            snprintf(trimmed, sizeof trimmed, "%s", dir);
            size_t n = strlen(trimmed);
            while (n > 1 && trimmed[n - 1] == '/') trimmed[--n] = '\0';
            set_path(path, sizeof path, "%s.metrics.jsonl", trimmed);
            if (is_file(path)) set_path(ri->metrics, sizeof ri->metrics, "%s", path);
        }
        return 0;
    }
    DIR *d = opendir(dir);
    if (!d) return rfail(r, CLI_EXIT_FAIL, "%s: cannot open the run directory: %s", dir, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *nm = e->d_name;
        if (nm[0] == '.') continue;
        size_t n = strlen(nm);
        /* DIR.tmp-XXXXXX / DIR.old are a directory swap in progress (see train.h) */
        if ((n > 4 && (!strcmp(nm + n - 4, ".tmp") || !strcmp(nm + n - 4, ".old"))) ||
            (n > 11 && !strncmp(nm + n - 11, ".tmp-", 5)))
            continue;
        const char *suffix = ".metrics.jsonl";
        size_t ns = strlen(suffix);
        if (n > ns && !strcmp(nm + n - ns, suffix)) {
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)(n - ns), nm);
            run_info *ri = run_find_or_add(rs, name);
            if (ri) snprintf(ri->metrics, sizeof ri->metrics, "%s/%s", dir, nm);
            continue;
        }
        snprintf(path, sizeof path, "%s/%s/%s", dir, nm, FFN_CONFIG_FILENAME);
        if (is_file(path)) {
            run_info *ri = run_find_or_add(rs, nm);
            if (ri) snprintf(ri->ckpt, sizeof ri->ckpt, "%s/%s", dir, nm);
        }
    }
    closedir(d);
    qsort(rs->runs, (size_t)rs->n, sizeof rs->runs[0], cmp_runs);
    snprintf(path, sizeof path, "%s/compare.json", dir);
    if (is_file(path)) {
        size_t len;
        char *text = cli_read_file(path, &len);
        if (!text) return rfail(r, CLI_EXIT_FAIL, "%s: %s", path, strerror(errno));
        ffn_status jst = ffn_json_parse(text, len, path, &rs->compare_doc);
        free(text);
        if (jst != FFN_OK) return rfail(r, CLI_EXIT_FAIL, "%s", ffn_last_error());
        rs->compare = ffn_json_root(rs->compare_doc);
        const jval *vs = jget(rs->compare, "variants");
        if (ffn_json_type_of(vs) != FFN_JSON_ARRAY)
            return rfail(r, CLI_EXIT_FAIL,
                         "%s: not the JSON that ffn compare writes (an object with \"variants\": [...])",
                         path);
    }
    if (rs->n == 0 && !rs->compare)
        return rfail(r, CLI_EXIT_FAIL,
                     "%s: no runs found (expected the output of ffn compare or ffn demo -- compare.json, "
                     "<variant>-seed<k>/ checkpoints and .metrics.jsonl files -- or a checkpoint "
                     "directory of ffn train with a config.json)",
                     dir);
    return 0;
}

/* The variant's order in compare.json (its position), else after them. */
static int variant_rank(const run_set *rs, const char *variant) {
    const jval *vs = jget(rs->compare, "variants");
    for (size_t i = 0; i < ffn_json_length(vs); i++) {
            const char *nm = jstr(ffn_json_at(vs, i), "variant");
            if (nm && !strcmp(nm, variant)) return (int)i;
        }
    return 1000;
}

/* ---- section 1: curves ---------------------------------------------------------- */

/* One run's metrics: val_loss points, and training loss (at most ~300 points
 * by keeping every k-th step and the last). */
static int write_curve(rctx *r, const run_info *ri) {
    size_t len;
    char *text = cli_read_file(ri->metrics, &len);
    if (!text) return rfail(r, CLI_EXIT_FAIL, "%s: %s", ri->metrics, strerror(errno));
    int64_t n_lines = 0;
    for (size_t i = 0; i < len; i++) n_lines += text[i] == '\n';
    int64_t every = n_lines / 300 + 1;
    char *vs = NULL, *ts = NULL;
    size_t vn = 0, tn = 0;
    FILE *vf = open_memstream(&vs, &vn), *tf = open_memstream(&ts, &tn);
    if (!vf || !tf) {
        if (vf) fclose(vf);
        if (tf) fclose(tf);
        free(vs);
        free(ts);
        free(text);
        return rfail(r, CLI_EXIT_FAIL, "out of memory");
    }
    int64_t line_no = 0, n_val = 0, n_train = 0;
    int bad_line = 0;
    char *p = text;
    while (p < text + len) {
        char *nl = memchr(p, '\n', (size_t)(text + len - p));
        char *end = nl ? nl : text + len;
        line_no++;
        char *q = p;
        while (q < end && (*q == ' ' || *q == '\t' || *q == '\r')) q++;
        if (q < end) {
            ffn_json *line = NULL;
            if (ffn_json_parse(p, (size_t)(end - p), ri->metrics, &line) != FFN_OK) line = NULL;
            const jval *o = ffn_json_root(line);
            double step = jnum(o, "step", NAN);
            if (ffn_json_type_of(o) != FFN_JSON_OBJECT || !isfinite(step)) {
                ffn_json_free(line);
                bad_line = (int)line_no;
                break;
            }
            double loss = jnum(o, "loss", NAN), val = jnum(o, "val_loss", NAN);
            if (isfinite(val)) {
                fprintf(vf, "%s[%.0f,", n_val++ ? "," : "", step);
                jw_num_full(vf, val);
                fputc(']', vf);
            }
            if (isfinite(loss) && ((int64_t)step % every == 0 || (int64_t)step == 1 || !nl ||
                                   nl + 1 >= text + len)) {
                fprintf(tf, "%s[%.0f,", n_train++ ? "," : "", step);
                jw_num(tf, loss);
                fputc(']', tf);
            }
            ffn_json_free(line);
        }
        p = end + 1;
    }
    fclose(vf);
    fclose(tf);
    free(text);
    if (bad_line) {
        free(vs);
        free(ts);
        return rfail(r, CLI_EXIT_FAIL, "%s: line %d: not a metrics record (a JSON object with \"step\")",
                     ri->metrics, bad_line);
    }
    FILE *f = r->out;
    fputs("{\"run\":", f);
    jw_str(f, ri->name);
    fputs(",\"variant\":", f);
    jw_str(f, ri->variant);
    fprintf(f, ",\"val\":[%s],\"train\":[%s]}", vs ? vs : "", ts ? ts : "");
    free(vs);
    free(ts);
    return 0;
}

static int write_curves(rctx *r, const run_set *rs) {
    FILE *f = r->out;
    fputs("\"curves\":[", f);
    int k = 0;
    for (int i = 0; i < rs->n; i++) {
        if (!rs->runs[i].metrics[0]) continue;
        if (k++) fputc(',', f);
        if (write_curve(r, &rs->runs[i])) return r->failed;
    }
    fputs("],\n", f);
    /* compare.json's table, when there is one: settings and per-variant rows */
    fputs("\"settings\":", f);
    const jval *set = jget(rs->compare, "settings");
    if (ffn_json_type_of(set) == FFN_JSON_OBJECT) {
        fputc('{', f);
        for (size_t i = 0; i < ffn_json_length(set); i++) {
            const jval *item = ffn_json_at(set, i);
            if (i) fputc(',', f);
            jw_str(f, ffn_json_key_at(set, i));
            fputc(':', f);
            if (ffn_json_type_of(item) == FFN_JSON_NUMBER) jw_num_full(f, ffn_json_number(item));
            else if (ffn_json_type_of(item) == FFN_JSON_STRING) jw_str(f, ffn_json_string(item));
            else fputs("null", f);
        }
        fputc('}', f);
    } else fputs("null", f);
    fputs(",\n\"variants\":[", f);
    const jval *vs = jget(rs->compare, "variants");
    static const char *const str_keys[] = {"variant", "mlp_type", "hidden_act"};
    static const char *const num_keys[] = {"intermediate_size", "num_experts", "total_params",
                                           "active_params", "flops_per_token", "val_loss_mean",
                                           "val_loss_std", "train_loss_mean", "tokens_per_s",
                                           "seconds", "runs"};
    for (size_t i = 0; i < ffn_json_length(vs); i++) {
        const jval *v = ffn_json_at(vs, i);
        fputs(i ? ",\n{" : "{", f);
        int k2 = 0;
        for (size_t j = 0; j < sizeof str_keys / sizeof *str_keys; j++) {
            fprintf(f, "%s\"%s\":", k2++ ? "," : "", str_keys[j]);
            jw_str(f, jstr(v, str_keys[j]));
        }
        for (size_t j = 0; j < sizeof num_keys / sizeof *num_keys; j++) {
            fprintf(f, ",\"%s\":", num_keys[j]);
            jw_num_full(f, jnum(v, num_keys[j], NAN));
        }
        fputc('}', f);
    }
    fputs("],\n", f);
    return 0;
}

/* ---- section 2: where the parameters go ----------------------------------------- */

enum { PART_EMBED, PART_ATTN, PART_FFN, PART_ROUTER, PART_NORM, PART_HEAD, N_PARTS };
static const char *const part_names[N_PARTS] = {"embeddings", "attention", "ffn",
                                                "router",     "norms",     "head"};

static void write_parts(FILE *f, const char *key, const double *parts) {
    fprintf(f, ",\"%s\":{", key);
    for (int p = 0; p < N_PARTS; p++)
        fprintf(f, "%s\"%s\":%s", p ? "," : "", part_names[p], cli_json_num(parts[p], "%.0f"));
    fputc('}', f);
}

/* Counts from a model's tensor table: routed experts count K/E in the
 * active view. */
static void count_model_parts(const ffn_model *m, double *parts, double *active) {
    const ffn_model_config *c = ffn_model_get_config(m);
    for (int p = 0; p < N_PARTS; p++) parts[p] = active[p] = 0;
    for (int64_t i = 0; i < ffn_model_num_tensors(m); i++) {
        const ffn_model_tensor *t = ffn_model_tensor_at(m, i);
        int p;
        switch (t->kind) {
        case FFN_TENSOR_EMBEDDING: p = PART_EMBED; break;
        case FFN_TENSOR_NORM: p = PART_NORM; break;
        case FFN_TENSOR_ATTN_WEIGHT:
        case FFN_TENSOR_ATTN_BIAS: p = PART_ATTN; break;
        case FFN_TENSOR_ROUTER: p = PART_ROUTER; break;
        case FFN_TENSOR_HEAD: p = PART_HEAD; break;
        default: p = PART_FFN; break;
        }
        parts[p] += (double)t->numel;
        double share = 1.0;
        if (t->expert >= 0 && c->num_experts > 0)
            share = (double)c->num_experts_per_tok / (double)c->num_experts;
        active[p] += (double)t->numel * share;
    }
}

/* The model's FFN in a few words of the report's language (tools/i18n.c). */
static const char *mlp_desc(const ffn_model_config *c, ffn_lang lang, char *buf, size_t n) {
    const char *act = ffn_act_name(c->hidden_act);
    if (c->mlp_type == FFN_MODEL_MLP_NONE && c->num_experts == 0) snprintf(buf, n, "%s", i18n(lang, "report.ffn_none"));
    else if (c->num_experts > 0)
        snprintf(buf, n, i18n(lang, "report.ffn_moe"), (long long)c->num_experts_per_tok,
                 (long long)c->num_experts, act);
    else if (c->mlp_type == FFN_MODEL_MLP_GATED) snprintf(buf, n, i18n(lang, "report.ffn_gated"), act);
    else snprintf(buf, n, i18n(lang, "report.ffn_dense"), act);
    return buf;
}

/* The Llama-2-7B config.json as published (the default comparison). */
static const char llama2_7b_config[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_act\": \"silu\", \"hidden_size\": 4096,"
    " \"intermediate_size\": 11008, \"max_position_embeddings\": 4096, \"model_type\": \"llama\","
    " \"num_attention_heads\": 32, \"num_hidden_layers\": 32, \"num_key_value_heads\": 32,"
    " \"rms_norm_eps\": 1e-05, \"tie_word_embeddings\": false, \"vocab_size\": 32000}";

static void write_published(FILE *f, ffn_lang lang, const char *name, const char *source,
                            const ffn_params_report *p) {
    double parts[N_PARTS], active[N_PARTS];
    const ffn_param_counts *c[2] = {&p->params, &p->active};
    double *dst[2] = {parts, active};
    for (int k = 0; k < 2; k++) {
        dst[k][PART_EMBED] = (double)(c[k]->embed_token + c[k]->embed_position + c[k]->embed_token_type);
        dst[k][PART_ATTN] = (double)c[k]->attention;
        dst[k][PART_FFN] = (double)(c[k]->ffn_dense + c[k]->ffn_routed + c[k]->ffn_shared);
        dst[k][PART_ROUTER] = (double)c[k]->router;
        dst[k][PART_NORM] = (double)c[k]->norms;
        dst[k][PART_HEAD] = (double)c[k]->head;
    }
    fputs("{\"name\":", f);
    jw_str(f, name);
    fputs(",\"source\":", f);
    jw_str(f, source);
    fputs(",\"kind\":\"published\",\"ffn\":", f);
    char desc[160];
    if (p->n_experts > 0)
        snprintf(desc, sizeof desc, i18n(lang, "report.published_moe"), p->ffn_kind,
                 (long long)p->top_k, (long long)p->n_experts);
    else snprintf(desc, sizeof desc, "%s", p->ffn_kind);
    jw_str(f, desc);
    fprintf(f, ",\"D\":%lld,\"F\":%lld,\"L\":%lld,\"V\":%lld,\"total\":%lld,\"active_total\":%lld",
            (long long)p->hidden_size,
            (long long)(p->intermediate_size ? p->intermediate_size : p->moe_intermediate_size),
            (long long)p->n_layers, (long long)p->vocab_size, (long long)p->params.total,
            (long long)p->active.total);
    write_parts(f, "parts", parts);
    write_parts(f, "active", active);
    fputc('}', f);
}

static int write_params(rctx *r, const run_set *rs) {
    FILE *f = r->out;
    fputs("\"params\":[", f);
    int k = 0;
    /* one bar per variant of the run directory (its first checkpoint) */
    char seen[REPORT_MAX_RUNS][256];
    int n_seen = 0;
    int order[REPORT_MAX_RUNS];
    for (int i = 0; i < rs->n; i++) order[i] = i;
    for (int a = 1; a < rs->n; a++) /* insertion sort by compare.json order */
        for (int b = a; b > 0 && variant_rank(rs, rs->runs[order[b]].variant) <
                                     variant_rank(rs, rs->runs[order[b - 1]].variant);
             b--) {
            int t = order[b];
            order[b] = order[b - 1];
            order[b - 1] = t;
        }
    for (int oi = 0; oi < rs->n; oi++) {
        const run_info *ri = &rs->runs[order[oi]];
        if (!ri->ckpt[0]) continue;
        int dup = 0;
        for (int s = 0; s < n_seen; s++) dup |= !strcmp(seen[s], ri->variant);
        if (dup) continue;
        snprintf(seen[n_seen++], sizeof seen[0], "%s", ri->variant);
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", ri->ckpt, FFN_CONFIG_FILENAME);
        ffn_model_config cfg;
        ffn_status st = ffn_model_config_load(path, &cfg);
        if (st != FFN_OK) return rfail(r, CLI_EXIT_FAIL, "%s", ffn_last_error());
        ffn_model_options mo = {.max_batch = 1, .max_seq = 1, .training = 0};
        ffn_model *m = NULL;
        st = ffn_model_create(r->ctx, &cfg, &mo, &m);
        if (st != FFN_OK) return rfail(r, CLI_EXIT_FAIL, "%s: %s", path, ffn_last_error());
        double parts[N_PARTS], active[N_PARTS];
        count_model_parts(m, parts, active);
        char desc[128];
        if (k++) fputc(',', f);
        fputs("\n{\"name\":", f);
        jw_str(f, rs->single ? ri->name : ri->variant);
        fputs(",\"source\":", f);
        jw_str(f, path);
        fputs(",\"kind\":\"run\",\"ffn\":", f);
        jw_str(f, mlp_desc(&cfg, r->opt->lang, desc, sizeof desc));
        fprintf(f, ",\"D\":%lld,\"F\":%lld,\"L\":%lld,\"V\":%lld,\"total\":%lld,\"active_total\":%lld",
                (long long)cfg.hidden_size,
                (long long)(cfg.num_experts ? cfg.moe_intermediate_size : cfg.intermediate_size),
                (long long)cfg.num_hidden_layers, (long long)cfg.vocab_size,
                (long long)ffn_model_num_params(m), (long long)ffn_model_active_params(m));
        write_parts(f, "parts", parts);
        write_parts(f, "active", active);
        fputc('}', f);
        ffn_model_free(m);
    }
    /* published configs */
    ffn_params_options po = {.seq_len = 0};
    if (r->opt->n_configs == 0) {
        ffn_params_report *p = NULL;
        ffn_status st = ffn_params_from_json(llama2_7b_config, strlen(llama2_7b_config),
                                             "built-in Llama-2-7B config", &po, &p);
        if (st != FFN_OK) return rfail(r, CLI_EXIT_FAIL, "%s", ffn_last_error());
        if (k++) fputc(',', f);
        fputc('\n', f);
        write_published(f, r->opt->lang, "Llama-2-7B", "built-in copy of Llama-2-7b-hf config.json", p);
        ffn_params_report_free(p);
    }
    for (int i = 0; i < r->opt->n_configs; i++) {
        const char *path = r->opt->configs[i];
        ffn_params_report *p = NULL;
        ffn_status st = ffn_params_from_config(path, &po, &p);
        if (st != FFN_OK) return rfail(r, CLI_EXIT_FAIL, "--config %s: %s", path, ffn_last_error());
        /* name: the file's directory or its base name without .json */
        char name[256];
        const char *b = base_name(path);
        if (!strcmp(b, "config.json") && b > path) {
            char dirpart[4096];
            snprintf(dirpart, sizeof dirpart, "%.*s", (int)(b - path - 1), path);
            snprintf(name, sizeof name, "%s", base_name(dirpart));
        } else {
            snprintf(name, sizeof name, "%s", b);
            size_t n = strlen(name);
            if (n > 5 && !strcmp(name + n - 5, ".json")) name[n - 5] = '\0';
        }
        if (k++) fputc(',', f);
        fputc('\n', f);
        write_published(f, r->opt->lang, name, path, p);
        ffn_params_report_free(p);
    }
    fputs("],\n", f);
    return 0;
}

/* ---- section 3: the neurons of the prompt's tokens ------------------------------- */

/* Resolve a --model argument: a checkpoint directory, or a variant / run
 * name of the run directory (the best checkpoint of compare.json, else the
 * first seed). */
static int resolve_model(rctx *r, const run_set *rs, const char *spec, char *dir, size_t n,
                         char *name, size_t nn) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", spec, FFN_CONFIG_FILENAME);
    if (is_file(path)) {
        snprintf(dir, n, "%s", spec);
        snprintf(name, nn, "%s", base_name(spec));
        return 0;
    }
    const jval *vs = jget(rs->compare, "variants");
    for (size_t i = 0; i < ffn_json_length(vs); i++) {
        const char *v = jstr(ffn_json_at(vs, i), "variant"),
                   *best = jstr(ffn_json_at(vs, i), "best_checkpoint");
        snprintf(path, sizeof path, "%s/%s", best ? best : "", FFN_CONFIG_FILENAME);
        if (v && best && !strcmp(v, spec) && is_file(path)) {
            snprintf(dir, n, "%s", best);
            snprintf(name, nn, "%s", v);
            return 0;
        }
    }
    for (int i = 0; i < rs->n; i++)
        if (rs->runs[i].ckpt[0] &&
            (!strcmp(rs->runs[i].name, spec) || !strcmp(rs->runs[i].variant, spec))) {
            snprintf(dir, n, "%s", rs->runs[i].ckpt);
            snprintf(name, nn, "%s", rs->single ? rs->runs[i].name : rs->runs[i].variant);
            return 0;
        }
    char avail[2048] = "";
    size_t used = 0;
    for (int i = 0; i < rs->n && used + 300 < sizeof avail; i++)
        if (rs->runs[i].ckpt[0] && (i == 0 || strcmp(rs->runs[i].variant, rs->runs[i - 1].variant)))
            used += (size_t)snprintf(avail + used, sizeof avail - used, "%s%s", used ? ", " : "",
                                     rs->runs[i].variant);
    return rfail(r, CLI_EXIT_USAGE,
                 "--model %s: neither a checkpoint directory (with a %s) nor a variant of the run "
                 "directory (have: %s)",
                 spec, FFN_CONFIG_FILENAME, used ? avail : "none");
}

/* The default models: the best gated run (swiglu, else geglu, reglu, ...,
 * else any run with an FFN), and the moe run when there is one. */
static int default_models(const run_set *rs, const char **out, int max) {
    static const char *const prefer[] = {"swiglu", "geglu", "reglu", "glu", "bilinear",
                                         "gelu",   "relu",  "silu",  "swish"};
    int n = 0;
    const char *first = NULL;
    for (size_t p = 0; p < sizeof prefer / sizeof *prefer && !first; p++)
        for (int i = 0; i < rs->n && !first; i++)
            if (rs->runs[i].ckpt[0] && !strcmp(rs->runs[i].variant, prefer[p]))
                first = rs->runs[i].variant;
    for (int i = 0; i < rs->n && !first; i++)
        if (rs->runs[i].ckpt[0] && strcmp(rs->runs[i].variant, "none") &&
            strcmp(rs->runs[i].variant, "linear"))
            first = rs->runs[i].variant;
    for (int i = 0; i < rs->n && !first; i++)
        if (rs->runs[i].ckpt[0]) first = rs->runs[i].variant;
    if (first && n < max) out[n++] = first;
    for (int i = 0; i < rs->n; i++)
        if (rs->runs[i].ckpt[0] && !strcmp(rs->runs[i].variant, "moe") && n < max &&
            (!first || strcmp(first, "moe"))) {
            out[n++] = rs->runs[i].variant;
            break;
        }
    return n;
}

static void mark_token(uint8_t *seen, int64_t V, int32_t id) {
    if (id >= 0 && id < V) seen[id] = 1;
}

/* Token text for the page; the tokenizer's bytes (invalid UTF-8 shown as \xNN). */
static void jw_token(FILE *f, const ffn_tokenizer *tok, int32_t id) {
    size_t len = 0;
    const char *s = ffn_tokenizer_token(tok, id, &len);
    if (!s) fputs("\"?\"", f);
    else jw_str_n(f, s, len);
}

#define REPORT_MAX_PROMPT_TOKENS 4096

/* Writes the model's object (after a ',' when *n_written > 0).  A model
 * without any FFN layer is an error when the user named it, and skipped
 * (nothing written) when it was picked by default. */
static int write_model(rctx *r, const char *name, const char *dir, int named, int *n_written) {
    const report_options *o = r->opt;
    FILE *f = r->out;
    ffn_model *m = NULL;
    ffn_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    int64_t *offsets = NULL;
    uint8_t *seen = NULL;
    ffn_inspect_result *res = NULL;
    ffn_status st = ffn_run_dir_load(r->ctx, dir, &m, &tok);
    if (st != FFN_OK) {
        rfail(r, CLI_EXIT_FAIL, "%s: %s", dir, ffn_last_error());
        goto done;
    }
    const ffn_model_config *c = ffn_model_get_config(m);
    int64_t n_ffn_layers = 0;
    for (int64_t l = 0; l < c->num_hidden_layers; l++) n_ffn_layers += ffn_inspect_layer_width(m, l) > 0;
    if (n_ffn_layers == 0) {
        if (named)
            rfail(r, CLI_EXIT_USAGE, "--model %s: %s has no FFN layer (attention only): no neurons to show",
                  name, dir);
        goto done;
    }
    if (o->layer >= 0 && o->layer < c->num_hidden_layers && ffn_inspect_layer_width(m, o->layer) == 0) {
        rfail(r, CLI_EXIT_USAGE, "--layer %lld: layer %lld of %s has no FFN", (long long)o->layer,
              (long long)o->layer, name);
        goto done;
    }
    const char *prompt = o->prompt ? o->prompt : REPORT_DEFAULT_PROMPT;
    int64_t T = 0, n_unk = 0;
    st = ffn_tokenizer_encode(tok, prompt, strlen(prompt), &ids, &offsets, &T, &n_unk);
    if (st != FFN_OK) {
        rfail(r, CLI_EXIT_FAIL, "--prompt: %s", ffn_last_error());
        goto done;
    }
    if (T == 0) {
        rfail(r, CLI_EXIT_USAGE, "--prompt: empty");
        goto done;
    }
    if (T > REPORT_MAX_PROMPT_TOKENS) {
        rfail(r, CLI_EXIT_USAGE, "--prompt: %lld tokens under %s's tokenizer; at most %d",
              (long long)T, name, REPORT_MAX_PROMPT_TOKENS);
        goto done;
    }
    int64_t L = c->num_hidden_layers, V = ffn_tokenizer_vocab_size(tok);
    if (o->layer >= L) {
        rfail(r, CLI_EXIT_USAGE, "--layer %lld: %s has %lld layers (0..%lld)", (long long)o->layer,
              name, (long long)L, (long long)L - 1);
        goto done;
    }
    seen = calloc((size_t)V, 1);
    if (!seen) {
        rfail(r, CLI_EXIT_FAIL, "out of memory");
        goto done;
    }
    /* the model's context bounds one forward: longer prompts run in windows,
     * each from position 0 */
    int64_t W = c->max_position_embeddings, n_windows = (T + W - 1) / W;
    char desc[128];
    fputs(*n_written ? ",\n{\"name\":" : "\n{\"name\":", f);
    ++*n_written;
    jw_str(f, name);
    fputs(",\"dir\":", f);
    jw_str(f, dir);
    fputs(",\"ffn\":", f);
    jw_str(f, mlp_desc(c, r->opt->lang, desc, sizeof desc));
    fprintf(f, ",\"D\":%lld,\"L\":%lld,\"V\":%lld,\"context\":%lld,\"windows\":%lld,\"unk\":%lld,"
               "\"top_k\":%lld,\"n_promoted\":%lld,\"tokenizer\":",
            (long long)c->hidden_size, (long long)L, (long long)V, (long long)W,
            (long long)n_windows, (long long)n_unk, (long long)o->top_k, (long long)o->n_promoted);
    jw_str(f, ffn_tokenizer_mode_name(ffn_tokenizer_get_mode(tok)));
    fprintf(f, ",\"experts\":%lld,\"experts_per_tok\":%lld", (long long)c->num_experts,
            (long long)c->num_experts_per_tok);
    fputs(",\"prompt\":", f);
    jw_str(f, prompt);
    fputs(",\"ids\":[", f);
    for (int64_t t = 0; t < T; t++) {
        fprintf(f, "%s%d", t ? "," : "", ids[t]);
        mark_token(seen, V, ids[t]);
    }
    fputs("],\"tok\":[", f);
    for (int64_t w = 0; w < n_windows; w++) {
        int64_t t0 = w * W, Tw = T - t0 < W ? T - t0 : W;
        ffn_inspect_options io;
        ffn_inspect_options_default(&io);
        io.layer = o->layer;
        io.top_k = o->top_k;
        io.n_promoted = o->n_promoted;
        st = ffn_inspect_run(r->ctx, m, ids + t0, Tw, &io, &res);
        if (st != FFN_OK) {
            rfail(r, CLI_EXIT_FAIL, "%s: inspecting the prompt: %s", dir, ffn_last_error());
            goto done;
        }
        for (int64_t t = 0; t < Tw; t++) {
            fputs(t0 + t ? ",\n[" : "\n[", f);
            for (int64_t li = 0; li < res->n_layers; li++) {
                const ffn_inspect_token *tk = ffn_inspect_token_at(res, li, t);
                if (li) fputc(',', f);
                fprintf(f, "{\"x\":%s,\"c\":%s,\"o\":%s,\"e\":[", jw_numstr(tk->explained),
                        jw_numstr(tk->cosine), jw_numstr(tk->out_norm));
                for (int64_t e = 0; e < tk->n_experts; e++) {
                    fprintf(f, "%s[%d,", e ? "," : "", tk->experts[e]);
                    jw_num(f, tk->expert_weights[e]);
                    fputc(']', f);
                }
                fputs("],\"n\":[", f);
                for (int64_t j = 0; j < tk->n_top; j++) {
                    const ffn_inspect_neuron *nu = &tk->top[j];
                    fprintf(f, "%s[%lld,%lld,", j ? "," : "", (long long)nu->expert,
                            (long long)nu->index);
                    const float vals[] = {nu->gate_pre, nu->gate,   nu->up,
                                          nu->product,  nu->weight, nu->contribution};
                    for (size_t q = 0; q < sizeof vals / sizeof *vals; q++) {
                        jw_num(f, vals[q]);
                        fputc(',', f);
                    }
                    fputc('[', f);
                    for (int64_t p = 0; p < res->n_promoted; p++) {
                        fprintf(f, "%s%d", p ? "," : "", nu->promoted[p]);
                        mark_token(seen, V, nu->promoted[p]);
                    }
                    fputs("],[", f);
                    for (int64_t p = 0; p < res->n_promoted; p++) {
                        if (p) fputc(',', f);
                        jw_num(f, nu->promoted_logit[p]);
                    }
                    fputs("]]", f);
                }
                fputs("]}", f);
            }
            fputc(']', f);
        }
        if (w + 1 < n_windows) {
            ffn_inspect_result_free(res);
            res = NULL;
        }
    }
    fputs("],\n\"layers\":[", f);
    for (int64_t li = 0; res && li < res->n_layers; li++)
        fprintf(f, "%s%lld", li ? "," : "", (long long)res->layers[li]);
    fputs("],\"layer_moe\":[", f);
    for (int64_t li = 0; res && li < res->n_layers; li++)
        fprintf(f, "%s%d", li ? "," : "", res->layer_is_moe[li]);
    fputs("],\"vocab\":{", f);
    int k = 0;
    for (int64_t id = 0; id < V; id++) {
        if (!seen[id]) continue;
        fprintf(f, "%s\"%lld\":", k++ ? "," : "", (long long)id);
        jw_token(f, tok, (int32_t)id);
    }
    fputs("}}", f);
done:
    ffn_inspect_result_free(res);
    free(seen);
    free(ids);
    free(offsets);
    ffn_tokenizer_free(tok);
    ffn_model_free(m);
    return r->failed;
}

static int write_models(rctx *r, const run_set *rs) {
    const char *specs[REPORT_MAX_MODELS];
    int n = r->opt->n_models;
    for (int i = 0; i < n; i++) specs[i] = r->opt->models[i];
    if (n == 0) n = default_models(rs, specs, REPORT_MAX_MODELS);
    fputs("\"models\":[", r->out);
    int n_written = 0;
    for (int i = 0; i < n; i++) {
        char dir[4096], name[256];
        if (resolve_model(r, rs, specs[i], dir, sizeof dir, name, sizeof name)) return r->failed;
        if (write_model(r, name, dir, r->opt->n_models > 0, &n_written)) return r->failed;
    }
    fputs("],\n", r->out);
    return 0;
}

/* ---- section 4: the linear-collapse check ---------------------------------------- */

/* For each layer of a dense linear-activation model: the layer's forward
 * against W·x + b with W = W_down·W_up (D, D) and b = W_down·b_up + b_down, on
 * N random inputs x ~ N(0, I) (ffn_collapse_merge and ffn_collapse_check). */
#define COLLAPSE_INPUTS 64

static int write_collapse(rctx *r, const run_set *rs) {
    FILE *f = r->out;
    const char *ckpt = NULL, *name = NULL;
    char path[4200];
    /* the `linear` variant, else any dense run with hidden_act linear */
    for (int pass = 0; pass < 2 && !ckpt; pass++)
        for (int i = 0; i < rs->n && !ckpt; i++) {
            const run_info *ri = &rs->runs[i];
            if (!ri->ckpt[0]) continue;
            if (pass == 0 && strcmp(ri->variant, "linear")) continue;
            snprintf(path, sizeof path, "%s/%s", ri->ckpt, FFN_CONFIG_FILENAME);
            ffn_model_config cfg;
            if (ffn_model_config_load(path, &cfg) != FFN_OK) continue;
            if (cfg.mlp_type == FFN_MODEL_MLP_DENSE && cfg.num_experts == 0 &&
                cfg.hidden_act == FFN_ACT_LINEAR) {
                ckpt = ri->ckpt;
                name = ri->name;
            }
        }
    fputs("\"collapse\":", f);
    if (!ckpt) {
        fputs("null,\n", f);
        return 0;
    }
    ffn_model *m = NULL;
    ffn_tokenizer *tok = NULL;
    float *wm = NULL, *bm = NULL;
    ffn_status st = ffn_run_dir_load(r->ctx, ckpt, &m, &tok);
    if (st != FFN_OK) return rfail(r, CLI_EXIT_FAIL, "%s: %s", ckpt, ffn_last_error());
    const ffn_model_config *c = ffn_model_get_config(m);
    const int64_t D = c->hidden_size, F = c->intermediate_size, L = c->num_hidden_layers;
    const int64_t N = COLLAPSE_INPUTS;
    const float *params = ffn_model_params(m, NULL);
    wm = malloc((size_t)(D * D) * sizeof *wm);
    bm = malloc((size_t)D * sizeof *bm);
    if (!wm || !bm) {
        rfail(r, CLI_EXIT_FAIL, "out of memory");
        goto done;
    }
    uint64_t seed = r->opt->seed ? r->opt->seed : 1;
    fputs("{\"run\":", f);
    jw_str(f, name);
    fputs(",\"dir\":", f);
    jw_str(f, ckpt);
    int64_t before = 2 * D * F + (c->mlp_bias ? F + D : 0), after = D * D + (c->mlp_bias ? D : 0);
    fprintf(f, ",\"D\":%lld,\"F\":%lld,\"bias\":%d,\"inputs\":%lld,\"params_before\":%lld,"
               "\"params_after\":%lld,\"flops_before\":%lld,\"flops_after\":%lld,\"layers\":[",
            (long long)D, (long long)F, c->mlp_bias, (long long)N, (long long)before,
            (long long)after, (long long)(4 * D * F), (long long)(2 * D * D));
    for (int64_t l = 0; l < L; l++) {
        char tn[160];
        const ffn_model_tensor *tu, *td, *tbu = NULL, *tbd = NULL;
        snprintf(tn, sizeof tn, "model.layers.%lld.mlp.up_proj.weight", (long long)l);
        tu = ffn_model_find_tensor(m, tn);
        snprintf(tn, sizeof tn, "model.layers.%lld.mlp.down_proj.weight", (long long)l);
        td = ffn_model_find_tensor(m, tn);
        if (c->mlp_bias) {
            snprintf(tn, sizeof tn, "model.layers.%lld.mlp.up_proj.bias", (long long)l);
            tbu = ffn_model_find_tensor(m, tn);
            snprintf(tn, sizeof tn, "model.layers.%lld.mlp.down_proj.bias", (long long)l);
            tbd = ffn_model_find_tensor(m, tn);
        }
        if (!tu || !td || tu->shape[0] != F || tu->shape[1] != D || td->shape[0] != D ||
            td->shape[1] != F || (c->mlp_bias && (!tbu || !tbd))) {
            rfail(r, CLI_EXIT_FAIL, "%s: layer %lld: up_proj (F, D) / down_proj (D, F) not found",
                  ckpt, (long long)l);
            goto done;
        }
        const float *wu = params + tu->offset;  /* (F, D) */
        const float *wd = params + td->offset;  /* (D, F) */
        const float *bu = tbu ? params + tbu->offset : NULL; /* (F) */
        const float *bd = tbd ? params + tbd->offset : NULL; /* (D) */
        ffn_layer_config lc = {.hidden_size = D, .intermediate_size = F, .type = FFN_MLP_DENSE,
                               .act = FFN_ACT_LINEAR, .bias = c->mlp_bias};
        ffn_layer_params lp = {.up_w = (float *)wu, .up_b = (float *)bu, .down_w = (float *)wd,
                               .down_b = (float *)bd};
        ffn_collapse_result cr;
        if ((st = ffn_collapse_merge(&lc, &lp, wm, bm)) != FFN_OK ||
            (st = ffn_collapse_check(r->ctx, &lc, &lp, wm, bm, N, seed, &cr)) != FFN_OK) {
            rfail(r, CLI_EXIT_FAIL, "%s: layer %lld: %s", ckpt, (long long)l, ffn_last_error());
            goto done;
        }
        double max_diff = cr.max_abs_diff, max_out = cr.max_abs_y;
        fprintf(f, "%s{\"layer\":%lld,\"max_diff\":", l ? "," : "", (long long)l);
        jw_num(f, max_diff);
        fputs(",\"max_abs_out\":", f);
        jw_num(f, max_out);
        fputs(",\"rel\":", f);
        jw_num(f, max_out > 0 ? max_diff / max_out : 0);
        fputs(",\"w_norm\":", f);
        jw_num(f, cr.w_norm);
        fputc('}', f);
    }
    fputs("]},\n", f);
done:
    free(wm);
    free(bm);
    ffn_tokenizer_free(tok);
    ffn_model_free(m);
    return r->failed;
}

/* ---- the page ---------------------------------------------------------------------- */

void report_options_default(report_options *o) {
    memset(o, 0, sizeof *o);
    o->cmd = "report";
    o->prompt = NULL;
    o->layer = -1;
    o->top_k = 8;
    o->n_promoted = 6;
    o->seed = 1;
}

/* The directory of the first model shown (a --model, else the run set's
 * first) into dir; 0, or non-zero after the error, which names `flag`. */
static int first_model(rctx *r, const run_set *rs, const char *flag, char *dir, size_t cap) {
    const char *spec = r->opt->n_models ? r->opt->models[0] : NULL;
    const char *dflt[REPORT_MAX_MODELS];
    if (!spec && default_models(rs, dflt, REPORT_MAX_MODELS) > 0) spec = dflt[0];
    if (!spec) return rfail(r, CLI_EXIT_FAIL, "%s: the run directory holds no model", flag);
    char name[256];
    return resolve_model(r, rs, spec, dir, cap, name, sizeof name) ? r->failed : 0;
}

/* a section writer's exit status, kept in r->failed when it failed */
static int section_status(rctx *r, int rc) {
    if (rc) r->failed = rc;
    return rc;
}

/* ---- section 5: causal tracing of the facts corpus (tools/trace_report.c) ------------- */

static int write_trace(rctx *r, const run_set *rs) {
    char dir[4200];
    if (first_model(r, rs, "--trace-facts", dir, sizeof dir)) return r->failed;
    return section_status(r, trace_report_json(r->out, r->cmd, r->ctx, dir, r->opt->trace_facts));
}

/* ---- section 6: how distributed is a fact (tools/trace_dist.c) --------------------- */

static int write_fact_dist(rctx *r, const run_set *rs) {
    char dir[4200];
    if (first_model(r, rs, "--fact-dist", dir, sizeof dir)) return r->failed;
    return section_status(r, trace_dist_report_json(r->out, r->cmd, r->ctx, dir,
                                                    r->opt->fact_dist));
}

/* the feature section: --transcoder files on the first model shown */
static int write_features(rctx *r, const run_set *rs) {
    char dir[4200];
    if (first_model(r, rs, "--transcoder", dir, sizeof dir)) return r->failed;
    return section_status(r, tc_report_json(r->out, r->cmd, r->ctx, dir, r->opt->transcoders,
                                            r->opt->n_transcoders,
                                            r->opt->prompt ? r->opt->prompt : REPORT_DEFAULT_PROMPT,
                                            5, r->opt->n_promoted));
}

/* ---- measured tables of other tools (--purity, --edit-compare) ---------------------- */

/* a number member of obj, or null (absent, null, or not a number) */
static void jw_member_num(FILE *f, const jval *obj, const char *key) {
    const jval *v = jget(obj, key);
    if (ffn_json_type_of(v) == FFN_JSON_NUMBER) jw_num_full(f, ffn_json_number(v));
    else fputs("null", f);
}

static int need_type(rctx *r, const char *path, const jval *v, ffn_json_type t, const char *what,
                     const char *tool) {
    if (ffn_json_type_of(v) == t) return 0;
    return rfail(r, CLI_EXIT_FAIL, "%s: not the JSON that %s writes (%s missing or of the wrong "
                 "type)", path, tool, what);
}

/* the JSON of `ffn transcoder purity --json`: the figures the page shows */
static int write_purity_one(rctx *r, const char *path, const jval *root) {
    static const char tool[] = "ffn transcoder purity --json";
    const jval *units = jget(root, "units");
    if (need_type(r, path, root, FFN_JSON_OBJECT, "the object", tool) ||
        need_type(r, path, jget(root, "layer"), FFN_JSON_NUMBER, "\"layer\"", tool) ||
        need_type(r, path, units, FFN_JSON_ARRAY, "\"units\"", tool))
        return r->failed;
    fputs("{\"file\":", r->out);
    jw_str(r->out, path);
    static const char *const top[] = {"layer", "samples", "top", "accuracy"};
    for (size_t i = 0; i < sizeof top / sizeof *top; i++) {
        fprintf(r->out, ",\"%s\":", top[i]);
        jw_member_num(r->out, root, top[i]);
    }
    fputs(",\"units\":[", r->out);
    for (size_t i = 0; i < ffn_json_length(units); i++) {
        const jval *u = ffn_json_at(units, i);
        if (need_type(r, path, u, FFN_JSON_OBJECT, "a unit", tool) ||
            need_type(r, path, jget(u, "name"), FFN_JSON_STRING, "a unit's \"name\"", tool) ||
            need_type(r, path, jget(u, "kind"), FFN_JSON_STRING, "a unit's \"kind\"", tool))
            return r->failed;
        fprintf(r->out, "%s{\"name\":", i ? "," : "");
        jw_str(r->out, ffn_json_string(jget(u, "name")));
        fputs(",\"kind\":", r->out);
        jw_str(r->out, ffn_json_string(jget(u, "kind")));
        fputs(",\"count\":", r->out);
        jw_member_num(r->out, u, "count");
        static const char *const attrs[] = {"relation", "object"};
        for (int a = 0; a < 2; a++) {
            const jval *at = jget(u, attrs[a]);
            if (need_type(r, path, at, FFN_JSON_OBJECT, attrs[a], tool)) return r->failed;
            fprintf(r->out, ",\"%s\":{", attrs[a]);
            static const char *const k[] = {"purity", "chance", "scored", "units_needed"};
            for (size_t q = 0; q < sizeof k / sizeof *k; q++) {
                fprintf(r->out, "%s\"%s\":", q ? "," : "", k[q]);
                jw_member_num(r->out, at, k[q]);
            }
            fputs(",\"best\":", r->out); /* the best readout accuracy over the sizes tried */
            const jval *ro = jget(at, "readout");
            double best = -1, largest = -1;
            for (size_t q = 0; q < ffn_json_length(ro); q++) {
                const jval *pt = ffn_json_at(ro, q);
                const double acc = ffn_json_number(jget(pt, "accuracy"));
                const double n = ffn_json_number(jget(pt, "units"));
                if (acc == acc && acc > best) best = acc;
                if (n == n && n > largest) largest = n;
            }
            if (best >= 0) jw_num_full(r->out, best);
            else fputs("null", r->out);
            fputs(",\"largest\":", r->out);
            if (largest >= 0) jw_num_full(r->out, largest);
            else fputs("null", r->out);
            fputc('}', r->out);
        }
        fputc('}', r->out);
    }
    fputs("]}", r->out);
    return 0;
}

static void jw_scores(FILE *f, const jval *s) {
    fputs("{", f);
    static const char *const k[] = {"efficacy", "generalisation", "specificity", "heldout_loss",
                                    "n_edits", "n_paraphrases", "n_neighbours"};
    for (size_t q = 0; q < sizeof k / sizeof *k; q++) {
        fprintf(f, "%s\"%s\":", q ? "," : "", k[q]);
        jw_member_num(f, s, k[q]);
    }
    fputc('}', f);
}

/* the JSON of `ffn edit --compare --json` */
static int write_edit_compare_one(rctx *r, const char *path, const jval *root) {
    static const char tool[] = "ffn edit --compare --json";
    const jval *methods = jget(root, "methods"), *layers = jget(root, "layers");
    if (need_type(r, path, root, FFN_JSON_OBJECT, "the object", tool) ||
        need_type(r, path, jget(root, "n_edits"), FFN_JSON_NUMBER, "\"n_edits\"", tool) ||
        need_type(r, path, jget(root, "before"), FFN_JSON_OBJECT, "\"before\"", tool) ||
        need_type(r, path, methods, FFN_JSON_ARRAY, "\"methods\"", tool))
        return r->failed;
    fputs("{\"file\":", r->out);
    jw_str(r->out, path);
    fputs(",\"n_edits\":", r->out);
    jw_member_num(r->out, root, "n_edits");
    fputs(",\"rome_layer\":", r->out);
    jw_member_num(r->out, root, "rome_layer");
    fputs(",\"layers\":[", r->out);
    for (size_t i = 0; i < 2; i++) {
        const jval *l = ffn_json_at(layers, i);
        if (i) fputc(',', r->out);
        if (ffn_json_type_of(layers) == FFN_JSON_ARRAY && i < ffn_json_length(layers) &&
            ffn_json_type_of(l) == FFN_JSON_NUMBER)
            jw_num_full(r->out, ffn_json_number(l));
        else fputs("null", r->out);
    }
    fputs("],\"before\":", r->out);
    jw_scores(r->out, jget(root, "before"));
    fputs(",\"methods\":[", r->out);
    for (size_t i = 0; i < ffn_json_length(methods); i++) {
        const jval *m = ffn_json_at(methods, i);
        if (need_type(r, path, m, FFN_JSON_OBJECT, "a method", tool) ||
            need_type(r, path, jget(m, "method"), FFN_JSON_STRING, "a method's \"method\"", tool) ||
            need_type(r, path, jget(m, "scores"), FFN_JSON_OBJECT, "a method's \"scores\"", tool))
            return r->failed;
        fprintf(r->out, "%s{\"method\":", i ? "," : "");
        jw_str(r->out, ffn_json_string(jget(m, "method")));
        fputs(",\"scores\":", r->out);
        jw_scores(r->out, jget(m, "scores"));
        fputs(",\"heldout_change\":", r->out);
        jw_member_num(r->out, m, "heldout_change");
        fputc('}', r->out);
    }
    fputs("]}", r->out);
    return 0;
}

/* "name":[ one entry per file ], for --purity and --edit-compare */
static int write_measured(rctx *r, const char *name, const char *const *files, int n,
                          int (*one)(rctx *, const char *, const jval *)) {
    fprintf(r->out, "\"%s\":[", name);
    for (int i = 0; i < n; i++) {
        ffn_json *doc = NULL;
        if (ffn_json_parse_file(files[i], &doc) != FFN_OK)
            return rfail(r, CLI_EXIT_FAIL, "%s", ffn_last_error());
        if (i) fputc(',', r->out);
        const int rc = one(r, files[i], ffn_json_root(doc));
        ffn_json_free(doc);
        if (rc) return rc;
    }
    fputs("],\n", r->out);
    return 0;
}

const report_asset *report_asset_named(const char *name, size_t n) {
    for (size_t i = 0; i < report_n_assets; i++)
        if (strlen(report_assets[i].name) == n && !memcmp(report_assets[i].name, name, n))
            return &report_assets[i];
    return NULL;
}

/* report.html with each {{name}} replaced: {{title}} (escaped), {{data}},
 * or the embedded file of that name. */
static int write_html(rctx *r, const char *path, const char *data, size_t n_data,
                      const char *title) {
    const report_asset *page = report_asset_named("report.html", strlen("report.html"));
    if (!page) return rfail(r, CLI_EXIT_FAIL, "report: report.html is not embedded in this build");
    ffn_atomic_file af;
    if (ffn_atomic_open(&af, path) != FFN_OK) return rfail(r, CLI_EXIT_FAIL, "%s", ffn_last_error());
    FILE *f = af.f;
    const char *p = page->text;
    for (const char *open; (open = strstr(p, "{{")) != NULL;) {
        const char *close = strstr(open + 2, "}}");
        if (!close) break;
        fwrite(p, 1, (size_t)(open - p), f);
        const char *key = open + 2;
        size_t n = (size_t)(close - key);
        const report_asset *a = report_asset_named(key, n);
        if (n == 4 && !memcmp(key, "data", 4)) fwrite(data, 1, n_data, f);
        else if (n == 5 && !memcmp(key, "title", 5)) {
            for (const char *s = title; *s; s++) { /* HTML-escape the title */
                if (*s == '<') fputs("&lt;", f);
                else if (*s == '>') fputs("&gt;", f);
                else if (*s == '&') fputs("&amp;", f);
                else fputc(*s, f);
            }
        } else if (a) fwrite(a->text, 1, a->size, f);
        else {
            ffn_atomic_abort(&af);
            return rfail(r, CLI_EXIT_FAIL, "report: report.html names {{%.*s}}, which is not embedded",
                         (int)n, key);
        }
        p = close + 2;
    }
    fputs(p, f);
    if (ffn_atomic_commit(&af) != FFN_OK) return rfail(r, CLI_EXIT_FAIL, "%s", ffn_last_error());
    return 0;
}

int report_write(ffn_ctx *ctx, const char *run_dir, const report_options *opts,
                 const char *out_path) {
    report_options dflt;
    if (!opts) {
        report_options_default(&dflt);
        opts = &dflt;
    }
    rctx r = {.cmd = opts->cmd ? opts->cmd : "report", .opt = opts, .ctx = ctx};
    if (opts->top_k < 1 || opts->n_promoted < 1)
        return rfail(&r, CLI_EXIT_USAGE, "--top: expected at least 1");
    if (strlen(run_dir) > 3000 || (out_path && strlen(out_path) > 3000))
        return rfail(&r, CLI_EXIT_USAGE, "%s: path too long (at most 3000 bytes)",
                     strlen(run_dir) > 3000 ? run_dir : out_path);
    char default_out[4200];
    if (!out_path) {
        snprintf(default_out, sizeof default_out, "%s/report.html", run_dir);
        out_path = default_out;
    }
    if (!is_dir(run_dir))
        return rfail(&r, CLI_EXIT_FAIL, "%s: not a directory (expected a run directory of ffn "
                                        "compare, ffn demo or ffn train --out)",
                     run_dir);
    run_set *rs = calloc(1, sizeof *rs);
    if (!rs) return rfail(&r, CLI_EXIT_FAIL, "out of memory");
    char *data = NULL;
    size_t n_data = 0;
    if (find_runs(&r, run_dir, rs)) goto done;
    r.out = open_memstream(&data, &n_data);
    if (!r.out) {
        rfail(&r, CLI_EXIT_FAIL, "out of memory");
        goto done;
    }
    fputs("{\"version\":", r.out);
    jw_str(r.out, ffn_version());
    fputs(",\"run_dir\":", r.out);
    jw_str(r.out, run_dir);
    fputs(",\"title\":", r.out);
    char title[512], *abs_dir = realpath(run_dir, NULL); /* "." and "runs/" get a real name */
    snprintf(title, sizeof title, i18n(opts->lang, "report.title_fmt"), base_name(abs_dir ? abs_dir : run_dir));
    free(abs_dir);
    jw_str(r.out, title);
    /* the page's words, in every language from the catalogue (the HTML's
     * own text is only what shows before the script runs) */
    static const char *const msg_prefixes[] = {"page.", "report.", NULL};
    fprintf(r.out, ",\"lang\":\"%s\",\"messages\":", ffn_lang_name(opts->lang));
    i18n_json(r.out, opts->lang, msg_prefixes);
    fputs(",\n", r.out);
    if (write_curves(&r, rs) || write_params(&r, rs) || write_models(&r, rs) ||
        write_collapse(&r, rs) || (opts->trace_facts > 0 && write_trace(&r, rs)) ||
        (opts->fact_dist > 0 && write_fact_dist(&r, rs)) ||
        (opts->n_transcoders > 0 && write_features(&r, rs)) ||
        (opts->n_purity > 0 &&
         write_measured(&r, "purity", opts->purity, opts->n_purity, write_purity_one)) ||
        (opts->n_edit_compare > 0 &&
         write_measured(&r, "edit_compare", opts->edit_compare, opts->n_edit_compare,
                        write_edit_compare_one)))
        goto done;
    fprintf(r.out, "\"initial_layer\":%lld}", (long long)opts->layer);
    if (fclose(r.out) != 0) {
        r.out = NULL;
        rfail(&r, CLI_EXIT_FAIL, "out of memory");
        goto done;
    }
    r.out = NULL;
    write_html(&r, out_path, data, n_data, title);
done:
    if (r.out) fclose(r.out);
    free(data);
    ffn_json_free(rs->compare_doc);
    free(rs);
    return r.failed;
}
