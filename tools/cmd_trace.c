/* cmd_trace.c -- `ffn trace`: causal tracing of a prompt (or of the facts
 * corpus's facts, averaged), with layer x position tables, SVG heat maps
 * and JSON; and `ffn trace --recall`, how many facts a model recalls on
 * the trained prompts, the held-out paraphrases and the neighbours.  The
 * experiment is in the library (include/ffn/trace.h); this file loads the
 * model and its vocabulary, parses flags and prints. */
#include "cli.h"
#include "trace_report.h"
#include "trace_dist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const CMD = "trace";

static const char about[] =
"Causal tracing (Meng et al. 2022, ROME): where does the model compute the\n"
"answer to a prompt?  Three runs of the same forward, through the taps:\n"
"  clean      the prompt: p_clean = P(target | prompt)\n"
"  corrupted  Gaussian noise (--noise times the standard deviation of the\n"
"             embedding matrix) added to the embeddings of the subject's\n"
"             tokens: p_corrupt, averaged over --samples draws\n"
"  restored   the corrupted run with ONE state put back to its clean value:\n"
"             the hidden state after block l at position t (resid_post), the\n"
"             FFN's output there (mlp_out) or the attention's (attn_out)\n"
"The indirect effect of a state is p_restored - p_corrupt.  Three layer x\n"
"position tables are printed; a large mlp_out effect at the last subject\n"
"token says the FFN of that layer, reading the subject, recalls the fact.\n"
"Restoring the embedding at every position undoes the noise: 'restore input'\n"
"must equal p_clean (a built-in check).  Layers count from 0.\n"
"\n"
"--facts averages over the facts of the facts corpus (`ffn corpus --facts`:\n"
"the model should be trained with `ffn train --corpus facts`) or of\n"
"--facts-file F.jsonl: each fact's prompt, subject and object, positions\n"
"grouped as before / first subject / middle subject / last subject / first\n"
"after / further / last.  Facts the model does not recall (its top token is\n"
"not the object's) are left out, as ROME does; all are used when none is\n"
"recalled.  The summary says where the MLP effect peaks (layer, last subject\n"
"token vs last token) and the share of the MLP effect at the last subject\n"
"token its strongest layer holds.\n"
"\n"
"--recall measures instead how many facts the model knows: top-1 of the\n"
"object's first token after the trained prompt, after each held-out\n"
"paraphrase (never trained on) and after each neighbour's prompt.  The\n"
"training text states each fact on a line of its own; --line-start reads\n"
"the prompts so (after a newline) instead of as the first tokens of the\n"
"context.\n"
"\n"
"--distributed asks how distributed each fact is: for each fact the model\n"
"knows (its top token after the prompt is the object's), the smallest set of\n"
"FFN neurons whose ablation (m_i = 0 at every position) removes it -- the\n"
"object no longer top-1, or with --threshold P its probability below P --\n"
"over the neurons of each layer and of all layers together (--layer L: that\n"
"layer only), and over a transcoder's or SAE's features (--transcoder F,\n"
"`ffn transcoder train`: a feature is ablated by subtracting its part\n"
"a_j(t) d_j from that layer's FFN output).  Greedy by attribution (activation\n"
"x the gradient of log p(object), one backward), one more unit at a time\n"
"until the fact is gone, then each unit dropped again when the fact stays\n"
"gone without it, and the final set verified by ablating it.  Printed: the\n"
"distribution of the set sizes (median, quartiles, histogram) and what else\n"
"each ablation breaks: the share of the other known facts that flip, and the\n"
"change of the loss on held-out text (the last 10% of the model's training\n"
"text, or of --data).\n";

static const char epilog[] =
"output: the tables (or --json: one object) on stdout; --svg FILE writes the\n"
"three heat maps as one SVG (atomically; an existing FILE needs --force).\n"
"\n"
"examples:\n"
"  ffn train --corpus facts --tokenizer word --steps 2000 --out facts1\n"
"  ffn trace facts1 --recall\n"
"  ffn trace facts1 --prompt 'Sevelle lives in' --subject Sevelle \\\n"
"      --target Thardun\n"
"  ffn trace facts1 --facts --n-facts 20 --svg trace.svg\n"
"  ffn trace facts1 --distributed --n-facts 20\n"
"  ffn trace facts1 --distributed --transcoder facts1-tc1.st --json\n";

static const char synopsis[] =
"MODEL --prompt TEXT --subject S [--target T] [options]\n"
"       ffn trace MODEL --facts [--n-facts N | --facts-file F.jsonl] [options]\n"
"       ffn trace MODEL --recall [--n-facts N | --facts-file F.jsonl] [--line-start] [--json]\n"
"       ffn trace MODEL --distributed [--layer L] [--transcoder F] [--n-facts N] [options]";

/* ---- the model and its vocabulary ------------------------------------------------ */

typedef struct loaded {
    ffn_ctx *ctx;
    ffn_model *model;
    ffn_vocab *vocab;
} loaded;

static void loaded_free(loaded *ld) {
    ffn_model_free(ld->model);
    ffn_vocab_free(ld->vocab);
    ffn_ctx_free(ld->ctx);
}

static int load(const char *path, int64_t threads, int training, loaded *ld) {
    memset(ld, 0, sizeof *ld);
    if (cli_make_ctx(CMD, threads, &ld->ctx)) return CLI_EXIT_FAIL;
    ffn_checkpoint_info info;
    memset(&info, 0, sizeof info);
    /* --distributed's attribution runs a backward: a training model */
    const ffn_model_options mo = {.max_batch = 1, .training = 1};
    ffn_status st = ffn_checkpoint_load_any(ld->ctx, path, training ? &mo : NULL, &ld->model, &info);
    if (!st && !info.tokenizer_path[0]) {
        cli_error(CMD, "%s: no vocabulary beside the weights (tokenizer.txt or tokenizer.bin): "
                  "tracing needs text", path);
        return CLI_EXIT_FAIL;
    }
    if (!st) st = ffn_vocab_load(info.tokenizer_path, ffn_model_get_config(ld->model)->vocab_size, &ld->vocab);
    return st ? cli_fail(CMD, st) : 0;
}

static void json_piece(const loaded *ld, int32_t prev, int32_t id) {
    char b1[1];
    const char *s = NULL;
    size_t n = 0;
    char buf[160];
    if (ffn_vocab_piece(ld->vocab, prev, id, b1, &s, &n)) n = 0;
    if (!s) n = 0;
    if (n >= sizeof buf) n = sizeof buf - 1;
    if (n) memcpy(buf, s, n);
    buf[n] = 0;
    /* a piece may be part of a UTF-8 character: keep the JSON valid */
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)buf[i] >= 0x80 || (unsigned char)buf[i] < 0x20) buf[i] = '?';
    cli_json_string(stdout, buf);
}

/* A token as a short readable label (spaces shown as they are). */
static void label(const loaded *ld, int32_t prev, int32_t id, char *out, size_t size) {
    char b1[1];
    const char *s = NULL;
    size_t n = 0;
    if (ffn_vocab_piece(ld->vocab, prev, id, b1, &s, &n) || !s) n = 0;
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < size; i++) {
        unsigned char c = (unsigned char)s[i];
        out[k++] = c == '\n' ? '|' : c < 0x20 ? '?' : (char)c;
    }
    out[k] = 0;
}

/* ---- tables ------------------------------------------------------------------------ */

/* A column head of at most 9 characters on two lines: a class name's
 * words ("first" / "subject"), a position label's first 9 bytes. */
static void head_lines(const char *name, char top[16], char bottom[16]) {
    const char *sp = strchr(name, ' ');
    if (sp && sp - name <= 9 && strlen(sp + 1) <= 9) {
        snprintf(top, 16, "%.*s", (int)(sp - name), name);
        snprintf(bottom, 16, "%s", sp + 1);
    } else {
        top[0] = 0;
        snprintf(bottom, 16, "%.9s", name);
    }
}

/* A layer x position-class table (7 columns: 76 characters wide).
 * n_class (may be NULL): classes with no position print as "-". */
static void print_table(const char *title, const double *e, int64_t L, const int64_t *n_class) {
    const int64_t C = FFN_TRACE_N_CLASSES;
    printf("\n%s: p_restored - p_corrupt (rows: layers, columns: position classes)\n", title);
    char top[16], bottom[16];
    printf("%-6s", "");
    for (int64_t c = 0; c < C; c++) {
        head_lines(ffn_trace_class_name((int)c), top, bottom);
        printf(" %9s", top);
    }
    printf("\n%-6s", "layer");
    for (int64_t c = 0; c < C; c++) {
        head_lines(ffn_trace_class_name((int)c), top, bottom);
        printf(" %9s", bottom);
    }
    putchar('\n');
    for (int64_t l = 0; l < L; l++) {
        printf("%-6lld", (long long)l);
        for (int64_t c = 0; c < C; c++) {
            if (n_class && !n_class[c]) printf(" %9s", "-");
            else printf(" %9.4f", e[l * C + c]);
        }
        putchar('\n');
    }
}

/* ---- SVG ---------------------------------------------------------------------------- */

static void svg_text(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

/* Before any work: --svg must name a file that can be written (not a
 * directory, in a directory that exists), and an existing one needs
 * --force -- a trace takes minutes, its end is no time to refuse. */
static int check_svg_path(const char *path, int force) {
    struct stat sb;
    if (stat(path, &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) {
            cli_error(CMD, "--svg %s is a directory: give a file name (e.g. %s/trace.svg)", path, path);
            return CLI_EXIT_FAIL;
        }
        if (!force) {
            cli_error(CMD, "%s exists: give --force to replace it", path);
            return CLI_EXIT_FAIL;
        }
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        cli_error(CMD, "--svg %s: the directory %s does not exist", path, dir);
        return CLI_EXIT_FAIL;
    }
    if (access(dir, W_OK) != 0) {
        cli_error(CMD, "--svg %s: the directory %s is not writable", path, dir);
        return CLI_EXIT_FAIL;
    }
    return 0;
}

/* Three heat maps side by side: kinds x (layers rows, cols columns). */
static int write_svg(const char *path, int force, const char *title, const double *const e[3],
                     int64_t L, int64_t cols, char labels[][24]) {
    static const char *const colour[3] = {"128,0,128", "0,128,0", "200,0,0"};
    if (!force) {
        FILE *probe = fopen(path, "r");
        if (probe) {
            fclose(probe);
            cli_error(CMD, "%s exists: give --force to replace it", path);
            return CLI_EXIT_FAIL;
        }
    }
    const int cw = 44, ch = 18, left = 40, top = 44, gap = 30, lab = 70;
    const int pw = left + (int)cols * cw, W = 3 * pw + 2 * gap, H = top + (int)L * ch + lab;
    ffn_atomic_file af;
    ffn_status st = ffn_atomic_open(&af, path);
    if (st) return cli_fail(CMD, st);
    FILE *f = af.f;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "font-family=\"sans-serif\" font-size=\"10\">\n", W, H);
    fprintf(f, "<text x=\"4\" y=\"14\" font-size=\"12\">");
    svg_text(f, title);
    fprintf(f, "</text>\n");
    for (int k = 0; k < 3; k++) {
        double mx = 0;
        for (int64_t i = 0; i < L * cols; i++) mx = fmax(mx, fabs(e[k][i]));
        const int x0 = k * (pw + gap);
        fprintf(f, "<text x=\"%d\" y=\"34\">%s (max |effect| %.4f)</text>\n", x0 + left,
                ffn_trace_kind_name((ffn_trace_kind)k), mx);
        for (int64_t l = 0; l < L; l++) {
            /* layer 0 at the bottom, as the residual stream rises */
            const int y = top + (int)(L - 1 - l) * ch;
            fprintf(f, "<text x=\"%d\" y=\"%d\">%lld</text>\n", x0 + 4, y + 13, (long long)l);
            for (int64_t t = 0; t < cols; t++) {
                const double v = e[k][l * cols + t];
                const double a = mx > 0 ? fmax(v, 0) / mx : 0;
                fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"rgb(%s)\" "
                        "fill-opacity=\"%.3f\" stroke=\"#ddd\"><title>layer %lld, %s: %.5f</title></rect>\n",
                        x0 + left + (int)t * cw, y, cw, ch, colour[k], a, (long long)l,
                        labels ? labels[t] : ffn_trace_class_name((int)t), v);
            }
        }
        for (int64_t t = 0; t < cols; t++) {
            const int x = x0 + left + (int)t * cw + cw / 2, y = top + (int)L * ch + 8;
            fprintf(f, "<text x=\"%d\" y=\"%d\" transform=\"rotate(60 %d %d)\">", x, y, x, y);
            svg_text(f, labels ? labels[t] : ffn_trace_class_name((int)t));
            fprintf(f, "</text>\n");
        }
    }
    fprintf(f, "</svg>\n");
    st = ffn_atomic_commit(&af);
    return st ? cli_fail(CMD, st) : 0;
}

/* ---- the facts --------------------------------------------------------------------- */

/* The facts: a file's, or the facts corpus's (the default set, seed 1, as
 * `ffn train --corpus facts` trains on); *count = the first n (0: all). */
static int get_facts(const char *file, int64_t n, ffn_facts **out, int64_t *count) {
    ffn_status st = file ? ffn_facts_load(file, out) : ffn_facts_generate(FFN_FACTS_DEFAULT, 1, out);
    if (st) return cli_fail(CMD, st);
    *count = n > 0 && n < (*out)->n_facts ? n : (*out)->n_facts;
    return 0;
}

static int out_of_memory(void) {
    cli_error(CMD, "out of memory");
    return CLI_EXIT_FAIL;
}

static int top1(loaded *ld, const int32_t *ids, int64_t T, int32_t *out) {
    const int64_t V = ffn_model_get_config(ld->model)->vocab_size;
    float *p = malloc((size_t)V * sizeof *p);
    if (!p) return out_of_memory();
    ffn_status st = ffn_predict_with_edits(ld->ctx, ld->model, ids, T, NULL, 0, p, NULL, NULL);
    if (!st) {
        int32_t best = 0;
        for (int32_t v = 1; v < V; v++)
            if (p[v] > p[best]) best = v;
        *out = best;
    }
    free(p);
    return st ? cli_fail(CMD, st) : 0;
}

/* Read prompts as the start of a line (--line-start). */
static int line_start = 0;

/* Is the model's top-1 token after prompt the object's first token? */
static int recall_one(loaded *ld, const char *prompt, const char *object, int *hit) {
    int32_t *ids = NULL, target = -1, best = -1;
    int64_t T = 0;
    char *lined = NULL;
    if (line_start) {
        size_t n = strlen(prompt);
        if (!(lined = malloc(n + 2))) return out_of_memory();
        lined[0] = '\n';
        memcpy(lined + 1, prompt, n + 1);
        prompt = lined;
    }
    ffn_status st = ffn_trace_prepare(ld->vocab, prompt, NULL, object, &ids, &T, NULL, NULL, &target);
    free(lined);
    if (st) return cli_fail(CMD, st);
    int rc = top1(ld, ids, T, &best);
    *hit = best == target;
    free(ids);
    return rc;
}

typedef struct recall_counts {
    int64_t hits, total;
} recall_counts;

static double share(recall_counts c) { return c.total ? (double)c.hits / (double)c.total : 0; }

static int run_recall(loaded *ld, const ffn_facts *fs, int64_t n, int json) {
    recall_counts trained = {0}, para = {0}, neigh = {0}, any_para = {0};
    recall_counts by_rel[8] = {{0}};
    const char *rel_names[8] = {0};
    int n_rel = 0;
    for (int64_t i = 0; i < n; i++) {
        const ffn_fact *f = &fs->facts[i];
        int hit = 0, r = 0;
        int rc = recall_one(ld, f->prompt, f->object, &hit);
        if (rc) return rc;
        trained.hits += hit;
        trained.total++;
        for (r = 0; r < n_rel && strcmp(rel_names[r], f->relation); r++) {}
        if (r == n_rel && n_rel < 8) rel_names[n_rel++] = f->relation;
        if (r < 8) by_rel[r].total++, by_rel[r].hits += hit;
        int all = 1;
        for (int64_t k = 0; k < f->n_paraphrases; k++) {
            if ((rc = recall_one(ld, f->paraphrases[k], f->object, &hit))) return rc;
            para.hits += hit;
            para.total++;
            all &= hit;
        }
        if (f->n_paraphrases) any_para.hits += all, any_para.total++;
        for (int64_t k = 0; k < f->n_neighbours; k++) {
            if ((rc = recall_one(ld, f->neighbours[k].prompt, f->neighbours[k].object, &hit))) return rc;
            neigh.hits += hit;
            neigh.total++;
        }
    }
    if (json) {
        printf(
            "{\"facts\": %lld, \"trained\": {\"recalled\": %lld, \"of\": %lld, \"share\": %s}, "
            "\"paraphrases\": {\"recalled\": %lld, \"of\": %lld, \"share\": %s}, "
            "\"all_paraphrases\": {\"recalled\": %lld, \"of\": %lld, \"share\": %s}, "
            "\"neighbours\": {\"recalled\": %lld, \"of\": %lld, \"share\": %s}, \"relations\": {",
            (long long)n, (long long)trained.hits, (long long)trained.total,
            cli_json_num(share(trained), "%.4f"), (long long)para.hits, (long long)para.total,
            cli_json_num(share(para), "%.4f"), (long long)any_para.hits, (long long)any_para.total,
            cli_json_num(share(any_para), "%.4f"), (long long)neigh.hits, (long long)neigh.total,
            cli_json_num(share(neigh), "%.4f"));
        for (int r = 0; r < n_rel; r++) {
            printf("%s", r ? ", " : "");
            cli_json_string(stdout, rel_names[r]);
            printf(": {\"recalled\": %lld, \"of\": %lld}", (long long)by_rel[r].hits, (long long)by_rel[r].total);
        }
        printf("}}\n");
        return 0;
    }
    printf("recall of %lld facts (top-1 of the object's first token)\n", (long long)n);
    printf("  trained prompts       %4lld / %-4lld  %5.1f%%\n", (long long)trained.hits,
           (long long)trained.total, 100 * share(trained));
    printf("  held-out paraphrases  %4lld / %-4lld  %5.1f%%\n", (long long)para.hits,
           (long long)para.total, 100 * share(para));
    printf("  facts with every paraphrase recalled  %lld / %lld  %.1f%%\n", (long long)any_para.hits,
           (long long)any_para.total, 100 * share(any_para));
    printf("  neighbour prompts     %4lld / %-4lld  %5.1f%%\n", (long long)neigh.hits,
           (long long)neigh.total, 100 * share(neigh));
    for (int r = 0; r < n_rel; r++)
        printf("  trained, %-12s %4lld / %-4lld\n", rel_names[r], (long long)by_rel[r].hits,
               (long long)by_rel[r].total);
    return 0;
}

/* ---- one prompt ---------------------------------------------------------------------- */

static void json_matrix(const double *e, int64_t rows, int64_t cols) {
    putchar('[');
    for (int64_t l = 0; l < rows; l++) {
        printf("%s[", l ? ", " : "");
        for (int64_t t = 0; t < cols; t++) printf("%s%s", t ? ", " : "", cli_json_num(e[l * cols + t], "%.6g"));
        putchar(']');
    }
    putchar(']');
}

/* What a token is when its text does not show it: "a space", "a newline". */
static const char *token_kind(const char *text) {
    if (!text[0]) return "an empty token";
    int spaces = 1, newlines = 1;
    for (const char *c = text; *c; c++) {
        spaces &= *c == ' ';
        newlines &= *c == '|'; /* label() shows a newline as '|' */
    }
    return spaces ? "a space" : newlines ? "a newline" : NULL;
}

/* |p_clean - p_corrupt| below this: the noise did not move the answer, so
 * no restored state can bring anything back. */
#define TRACE_NIL_EFFECT 0.01

static int trace_prompt(loaded *ld, const char *prompt, const char *subject, const char *target,
                        const ffn_trace_options *o, int json, const char *svg, int force) {
    int32_t *ids = NULL, tid = -1;
    int64_t T = 0, b = 0, e = 0;
    ffn_status st = ffn_trace_prepare(ld->vocab, prompt, subject, target, &ids, &T, &b, &e, &tid);
    if (st) return cli_fail(CMD, st);
    int rc = 0;
    if (tid < 0 && (rc = top1(ld, ids, T, &tid))) {
        free(ids);
        return rc;
    }
    const int64_t L = ffn_model_get_config(ld->model)->num_hidden_layers;
    if (cli_progress_tty())
        fprintf(stderr, "ffn trace: %lld forwards of %lld tokens ...",
                (long long)(1 + o->samples * (1 + FFN_TRACE_N_KINDS * L * T)), (long long)T);
    ffn_trace_result *r = NULL;
    st = ffn_trace_run(ld->ctx, ld->model, ids, T, b, e, tid, o, &r);
    if (cli_progress_tty()) fputc('\n', stderr);
    if (st) {
        free(ids);
        return cli_fail(CMD, st);
    }
    ffn_trace_summary *sm = calloc(1, sizeof *sm);
    char (*labels)[24] = calloc((size_t)T, sizeof *labels);
    if (!sm || !labels) {
        free(sm);
        free(labels);
        ffn_trace_result_free(r);
        free(ids);
        return out_of_memory();
    }
    const ffn_trace_result *one[1] = {r};
    if ((st = ffn_trace_summarize(one, 1, sm))) rc = cli_fail(CMD, st);
    char tlabel[24];
    for (int64_t t = 0; t < T; t++) label(ld, t ? ids[t - 1] : -1, ids[t], labels[t], sizeof labels[t]);
    label(ld, ids[T - 1], tid, tlabel, sizeof tlabel);
    const char *tkind = token_kind(tlabel);
    if (!rc && fabs(r->p_clean - r->p_corrupt) < TRACE_NIL_EFFECT)
        fprintf(stderr, "ffn trace: warning: the corruption does not change p(answer) ('%s'%s%s: "
                "%.4f clean, %.4f corrupted): nothing to trace;\n  trace an answer that depends on "
                "the subject (--target), or a fact of a model trained with --corpus facts\n",
                tlabel, tkind ? ", " : "", tkind ? tkind : "", r->p_clean, r->p_corrupt);
    if (!rc && json) {
        printf("{\"prompt\": ");
        cli_json_string(stdout, prompt);
        printf(", \"subject\": ");
        cli_json_string(stdout, subject);
        printf(", \"target_id\": %d, \"target\": ", tid);
        json_piece(ld, ids[T - 1], tid);
        printf(", \"tokens\": [");
        for (int64_t t = 0; t < T; t++) {
            printf("%s", t ? ", " : "");
            json_piece(ld, t ? ids[t - 1] : -1, ids[t]);
        }
        printf("], \"token_ids\": [");
        for (int64_t t = 0; t < T; t++) printf("%s%d", t ? ", " : "", ids[t]);
        printf("], \"position_class\": [");
        for (int64_t t = 0; t < T; t++) {
            printf("%s", t ? ", " : "");
            cli_json_string(stdout, ffn_trace_class_name(ffn_trace_position_class(r, t)));
        }
        printf("], \"subject_begin\": %lld, \"subject_end\": %lld, \"samples\": %lld, "
               "\"noise_std\": %s, \"p_clean\": %s, \"p_corrupt\": %s, \"p_restore_input\": %s",
               (long long)b, (long long)e, (long long)r->samples,
               cli_json_num(r->noise_std, "%.6g"), cli_json_num(r->p_clean, "%.6g"),
               cli_json_num(r->p_corrupt, "%.6g"), cli_json_num(r->p_restore_input, "%.6g"));
        for (int k = 0; k < FFN_TRACE_N_KINDS; k++) {
            printf(", \"%s\": ", ffn_trace_kind_name((ffn_trace_kind)k));
            json_matrix(r->effect[k], L, T);
        }
        printf("}\n");
    } else if (!rc) {
        printf("trace of p('%s' | '%s')\n", tlabel, prompt);
        printf("  token %d%s%s; subject '%s' = tokens %lld..%lld\n", tid, tkind ? ", " : "",
               tkind ? tkind : "", subject, (long long)b, (long long)(e - 1));
        printf("p_clean %.4f  p_corrupt %.4f  restore input %.4f  (noise %.3g x %lld)\n",
               r->p_clean, r->p_corrupt, r->p_restore_input, r->noise_std, (long long)r->samples);
        /* the positions of each class, as the facts mode groups them */
        printf("positions:\n");
        for (int c = 0; c < FFN_TRACE_N_CLASSES; c++) {
            char line[81];
            int n = snprintf(line, sizeof line, "  %-14s", ffn_trace_class_name(c));
            int any = 0;
            for (int64_t t = 0; t < T && n < (int)sizeof line; t++) {
                if (ffn_trace_position_class(r, t) != c) continue;
                n += snprintf(line + n, sizeof line - (size_t)n, "%s%lld '%s'", any ? ", " : " ",
                              (long long)t, labels[t]);
                any = 1;
            }
            if (!any) continue;
            if (n >= (int)sizeof line - 1) memcpy(line + sizeof line - 4, "...", 4);
            printf("%s\n", line);
        }
        for (int k = 0; k < FFN_TRACE_N_KINDS; k++)
            print_table(ffn_trace_kind_name((ffn_trace_kind)k), sm->effect[k], L, sm->n_class);
        printf("(--json and --svg give every position)\n");
    }
    if (!rc && svg) {
        for (int64_t t = b; t < e; t++) {
            size_t k = strlen(labels[t]);
            if (k + 2 < sizeof labels[t]) labels[t][k] = '*', labels[t][k + 1] = 0;
        }
        char title[512];
        snprintf(title, sizeof title, "causal trace: '%s' -> '%s' (p_clean %.3f, p_corrupt %.3f)",
                 prompt, tlabel, r->p_clean, r->p_corrupt);
        const double *const eff[3] = {r->effect[0], r->effect[1], r->effect[2]};
        rc = write_svg(svg, force, title, eff, L, T, labels);
    }
    free(sm);
    free(labels);
    ffn_trace_result_free(r);
    free(ids);
    return rc;
}

/* ---- many facts -------------------------------------------------------------------------- */

static int trace_facts(loaded *ld, const ffn_facts *fs, int64_t n, const ffn_trace_options *o,
                       int json, const char *svg, int force) {
    ffn_trace_summary *sm = calloc(1, sizeof *sm);
    if (!sm) return out_of_memory();
    int64_t n_recalled = 0;
    if (cli_progress_tty()) fprintf(stderr, "ffn trace: tracing %lld facts ...", (long long)n);
    ffn_status st = ffn_trace_facts(ld->ctx, ld->model, ld->vocab, fs, n, o, sm, &n_recalled);
    if (cli_progress_tty()) fputc('\n', stderr);
    if (st) {
        free(sm);
        return cli_fail(CMD, st);
    }
    const int64_t L = sm->n_layers, C = FFN_TRACE_N_CLASSES;
    if (n_recalled == 0)
        fprintf(stderr, "ffn trace: warning: the model recalls none of the %lld facts; averaging "
                "over all of them\n", (long long)n);
    if (json) {
        putchar('{');
        trace_summary_json(stdout, sm, n, n_recalled, o);
        printf("}\n");
    } else {
        printf("causal trace averaged over %lld of %lld facts (%s), %lld samples, noise %.3g x sd\n",
               (long long)sm->n_results, (long long)n, n_recalled ? "those recalled" : "none recalled: all",
               (long long)o->samples, o->noise);
        printf("mean p_clean %.4f, p_corrupt %.4f; facts per position class:", sm->p_clean, sm->p_corrupt);
        for (int c = 0; c < C; c++) printf(" %s %lld%s", ffn_trace_class_name(c), (long long)sm->n_class[c], c + 1 < C ? "," : "\n");
        for (int k = 0; k < FFN_TRACE_N_KINDS; k++)
            print_table(ffn_trace_kind_name((ffn_trace_kind)k), sm->effect[k], L, sm->n_class);
        printf("\nMLP effect: peak %.4f at layer %lld, %s\n", sm->mlp_peak, (long long)sm->mlp_peak_layer,
               ffn_trace_class_name(sm->mlp_peak_class));
        printf("  at the last subject token: peak %.4f at layer %lld; at the last token: peak %.4f at "
               "layer %lld\n", sm->mlp_peak_subject, (long long)sm->mlp_peak_layer_subject,
               sm->mlp_peak_last, (long long)sm->mlp_peak_layer_last);
        printf("  layer %lld holds %.0f%% of the (positive) MLP effect at the last subject token\n",
               (long long)sm->mlp_peak_layer_subject, 100 * sm->mlp_layer_share);
    }
    int rc = 0;
    if (svg) {
        char title[256];
        snprintf(title, sizeof title, "causal trace over %lld facts (mean p_clean %.3f, p_corrupt %.3f)",
                 (long long)sm->n_results, sm->p_clean, sm->p_corrupt);
        const double *const eff[3] = {sm->effect[0], sm->effect[1], sm->effect[2]};
        rc = write_svg(svg, force, title, eff, L, C, NULL);
    }
    free(sm);
    return rc;
}

/* ---- the command ------------------------------------------------------------------------------ */

int cmd_trace(int argc, char **argv) {
    const char *model_path = NULL, *prompt = NULL, *subject = NULL, *target = NULL;
    const char *facts_file = NULL, *svg = NULL;
    ffn_trace_options o;
    ffn_trace_options_default(&o);
    int64_t threads = 0, n_facts = 0, seed = (int64_t)o.seed;
    int json = 0, force = 0, facts = 0, recall = 0, n_facts_given = 0, distributed = 0, no_side = 0;
    int layer_given = 0, windows_given = 0, threshold_given = 0, max_set_given = 0;
    trace_dist_args da;
    trace_dist_args_default(&da);
    const cli_opt opts[] = {
        {.name = "--prompt", .type = CLI_STR, .dst = &prompt, .metavar = "TEXT", .group = "one prompt",
         .help = "the prompt (its answer is the next token)"},
        {.name = "--subject", .type = CLI_STR, .dst = &subject, .metavar = "S",
         .help = "the words of the prompt whose embeddings are corrupted (their first occurrence)"},
        {.name = "--target", .type = CLI_STR, .dst = &target, .metavar = "T", .def = "the model's top token",
         .help = "the answer whose probability is traced (its first token after the prompt)"},
        {.name = "--facts", .type = CLI_FLAG, .dst = &facts, .group = "facts",
         .help = "trace the facts of the facts corpus (or of --facts-file) and average"},
        {.name = "--n-facts", .type = CLI_INT, .dst = &n_facts, .metavar = "N", .imin = 1,
         .imax = FFN_FACTS_FILE_MAX, .seen = &n_facts_given, .def = "all",
         .help = "the first N facts (the facts corpus has 100)"},
        {.name = "--facts-file", .type = CLI_PATH, .dst = &facts_file, .metavar = "F.jsonl",
         .help = "facts in the JSONL of `ffn corpus --facts --json`"},
        {.name = "--recall", .type = CLI_FLAG, .dst = &recall,
         .help = "measure recall instead: top-1 of the object on trained prompts, held-out "
                 "paraphrases and neighbours"},
        {.name = "--line-start", .type = CLI_FLAG, .dst = &line_start,
         .help = "with --recall: read each prompt after a newline, as the training text states "
                 "its facts (a prompt alone starts the model's context without one)"},
        {.name = "--distributed", .type = CLI_FLAG, .dst = &distributed, .group = "how distributed",
         .help = "the smallest set of neurons (or features) whose ablation removes each fact"},
        {.name = "--layer", .type = CLI_INT, .dst = &da.layer, .metavar = "L", .imin = 0, .imax = 1 << 20,
         .seen = &layer_given, .def = "every layer, and all together",
         .help = "with --distributed: the neurons of layer L only"},
        {.name = "--transcoder", .type = CLI_PATH, .dst = &da.transcoder, .metavar = "F",
         .help = "with --distributed: also the features of this transcoder or SAE (`ffn transcoder "
                 "train`), beside its layer's neurons"},
        {.name = "--threshold", .type = CLI_FLOAT, .dst = &da.threshold, .metavar = "P", .fmin = 0,
         .fmax = 0.999999, .seen = &threshold_given, .def = "0: the object no longer top-1",
         .help = "with --distributed: a fact is removed when p(object) < P"},
        {.name = "--max-set", .type = CLI_INT, .dst = &da.max_set, .metavar = "N", .imin = 0,
         .imax = 1 << 30, .seen = &max_set_given, .def = "0: no cap",
         .help = "with --distributed: stop the greedy after N units (the fact counts as not removed)"},
        {.name = "--no-side", .type = CLI_FLAG, .dst = &no_side,
         .help = "with --distributed: skip what else each ablation breaks (faster)"},
        {.name = "--data", .type = CLI_PATH, .dst = &da.data, .metavar = "FILE",
         .def = "the model's training text",
         .help = "with --distributed: the held-out text (its last 10%)"},
        {.name = "--eval-windows", .type = CLI_INT, .dst = &da.windows, .metavar = "N", .imin = 1,
         .imax = 100000, .seen = &windows_given,
         .help = "with --distributed: context-length windows of held-out loss"},
        {.name = "--samples", .type = CLI_INT, .dst = &o.samples, .metavar = "S", .imin = 1, .imax = 100000,
         .group = "noise", .help = "noise draws averaged"},
        {.name = "--noise", .type = CLI_FLOAT, .dst = &o.noise, .metavar = "X", .fmin = 0, .fmax = 1000,
         .help = "noise sd as a multiple of the embedding's sd (ROME: 3)"},
        CLI_OPT_SEED(&seed, "the noise seed"),
        {.name = "--svg", .type = CLI_PATH, .dst = &svg, .metavar = "FILE", .group = "output",
         .help = "write the three heat maps (resid_post, mlp_out, attn_out) as SVG"},
        CLI_OPT_FORCE(&force, "replace an existing --svg FILE"),
        CLI_OPT_JSON(&json, "one JSON object on stdout instead of tables"),
        CLI_OPT_THREADS(&threads),
        {0}};
    const cli_pos pos[] = {
        {.name = "MODEL", .dst = &model_path, .required = 1,
         .help = "a run directory of `ffn train`, a Hugging Face directory or a llama2.c .bin with "
                 "its tokenizer beside it"},
        {0}};
    const cli_spec spec = {.cmd = CMD, .synopsis = synopsis, .about = about, .epilog = epilog,
                           .opts = opts, .pos = pos};
    int rc;
    if (cli_parse(&spec, argc, argv, &rc)) return rc;
    o.seed = (uint64_t)seed;
    if (facts + recall + distributed > 1)
        return cli_usage_error(CMD, "--facts traces, --recall measures recall, --distributed ablates: give one");
    if (!distributed && (layer_given || da.transcoder || threshold_given || max_set_given || no_side ||
                         da.data || windows_given))
        return cli_usage_error(CMD, "--layer, --transcoder, --threshold, --max-set, --no-side, --data and "
                               "--eval-windows need --distributed");
    if (distributed && svg) return cli_usage_error(CMD, "--svg draws a trace; --distributed has none");
    const int many = facts || recall || distributed;
    if (many && (prompt || subject || target))
        return cli_usage_error(CMD, "--%s takes its prompts from the facts: drop --prompt, --subject and --target",
                               facts ? "facts" : recall ? "recall" : "distributed");
    if (!many && (facts_file || n_facts_given))
        return cli_usage_error(CMD, "--facts-file and --n-facts need --facts, --recall or --distributed");
    if (!many && (!prompt || !subject))
        return cli_usage_error(CMD, "give --prompt TEXT and --subject S (or --facts, --recall or --distributed)");
    if (recall && svg) return cli_usage_error(CMD, "--svg draws a trace; --recall has none");
    if (line_start && !recall) return cli_usage_error(CMD, "--line-start needs --recall");
    if (svg && (rc = check_svg_path(svg, force))) return rc;
    loaded ld;
    if ((rc = load(model_path, threads, distributed, &ld))) {
        loaded_free(&ld);
        return rc;
    }
    if (many) {
        ffn_facts *fs = NULL;
        int64_t n = 0;
        rc = get_facts(facts_file, n_facts, &fs, &n);
        da.model_path = model_path;
        da.side = !no_side;
        da.per_fact = 1;
        if (!rc && distributed) rc = trace_dist_run(CMD, ld.ctx, ld.model, ld.vocab, fs, n, &da, json);
        else if (!rc) rc = recall ? run_recall(&ld, fs, n, json) : trace_facts(&ld, fs, n, &o, json, svg, force);
        ffn_facts_free(fs);
    } else {
        rc = trace_prompt(&ld, prompt, subject, target, &o, json, svg, force);
    }
    loaded_free(&ld);
    if (!rc && (fflush(stdout) != 0 || ferror(stdout))) {
        cli_error(CMD, "writing to stdout failed");
        rc = CLI_EXIT_FAIL;
    }
    return rc;
}
