/* cmd_inspect.c -- `ffn inspect`: look inside a model's FFNs.
 *   ffn inspect MODEL --prompt TEXT      per-token neurons, logit lens, MoE routing
 *   ffn inspect keys MODEL --data FILE   trigger examples and agreement (Geva et al.)
 *   ffn inspect gates MODEL --corpus     linear probes of gate activations
 * The analysis is in the library (include/ffn/inspect.h); this file loads
 * the model and its vocabulary, parses flags and prints tables or JSON. */
#include "cli.h"
#include "ffn/train.h"
#if __has_include("ffn/checkpoint.h")
#include "ffn/checkpoint.h"
#define HAVE_CHECKPOINT_H 1
#endif

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *const CMD = "inspect";

/* ---- usage ------------------------------------------------------------------------ */

static const char about[] =
"Looks inside the feed-forward layers of a trained model.  An FFN is a sum\n"
"of neurons, FFN(x) = sum_i m_i v_i (+ bias): m_i is neuron i's activation,\n"
"act(gate_i.x) * (up_i.x) in a gated layer (SwiGLU, GEGLU, ...) or act(up_i.x)\n"
"in a dense one, and v_i is column i of down_proj, its 'value'.  Layers count\n"
"from 0 (--layer 0 is the first block).\n"
"\n"
"MODEL is a checkpoint directory written by `ffn train` (or, where supported,\n"
"a Hugging Face directory or llama2.c .bin with its tokenizer beside it, or a\n"
"GGUF file, given --ids: GGUF vocabularies are not read yet).\n"
"\n"
"ffn inspect MODEL --prompt TEXT   for every token and layer, the top-K neurons\n"
"  by |m_i| with their gate act(gate_i.x), up value up_i.x and product m_i, and\n"
"  the tokens each neuron's value vector promotes: v_i read through the output\n"
"  embedding after the final norm's scale (the logit lens, E.(g*v_i)).  Also how\n"
"  much of the FFN output the top-K explain: the norm ratio\n"
"  |sum_topK m_i v_i| / |y - bias| (headline) and the cosine between the two;\n"
"  and for Mixture-of-Experts layers which experts each token went to, with\n"
"  their router weights (a neuron is then expert/index and its contribution is\n"
"  weight * m_i).\n"
"\n"
"ffn inspect keys MODEL --data FILE   after Geva et al. (2021), 'Transformer\n"
"  feed-forward layers are key-value memories': runs the model over FILE in\n"
"  consecutive windows of the context length and, for every neuron, keeps the\n"
"  positions where m_i is largest (its trigger examples, with their prefix\n"
"  text) and the tokens its value vector promotes.  The layer's agreement rate\n"
"  is the share of neurons whose top promoted token is the token that follows\n"
"  their top trigger example.  The paper found it near zero in low layers and\n"
"  rising in upper ones.  Flags: ffn inspect keys --help.\n"
"\n"
"ffn inspect gates MODEL --corpus [en|zh]   do gates differ by token?  On\n"
"  the built-in corpus (every word labelled name, pronoun, object, verb,\n"
"  function, modifier or punct), a linear probe (multinomial logistic\n"
"  regression, standardised features, deterministic SGD) predicts each\n"
"  token's word class from a layer's gate activations act(gate.x) (dense\n"
"  layers: act(up.x)); its held-out accuracy is printed beside the majority-\n"
"  class baseline and a probe on the FFN's input (the normed residual).  Per\n"
"  class, the neurons most selective for it: the largest difference of mean\n"
"  activation in-class vs out-of-class, in pooled standard deviations.\n"
"  With an English char or byte tokenizer, the characters around a token carry\n"
"  some class cues even in an untrained model (a capital letter, a period), so\n"
"  the fair control there is the same probe on a randomly initialised model.\n"
"  Flags: ffn inspect gates --help.\n"
"\n"
"ffn inspect MODEL --transcoder FILE --feature I   a feature of a transcoder\n"
"  or SAE (`ffn transcoder train`) shown as a neuron is: its top-activating\n"
"  contexts in the model's held-out text and its logit effect U (g * d_I), the\n"
"  tokens its decoder row d_I promotes and suppresses most.  The same command\n"
"  as `ffn transcoder inspect MODEL FILE --feature I`; flags there.\n";

static const char epilog[] =
"examples:\n"
"  ffn train --steps 300 --out m\n"
"  ffn inspect m --prompt 'Mary gave John the apple' --layer 1 --top 5\n"
"  ffn corpus --sentences 2000 --seed 99 > text.txt   # text it did not see\n"
"  ffn inspect keys m --data text.txt\n"
"  ffn inspect gates m --corpus en\n";

static const char synopsis[] =
"MODEL (--prompt TEXT | --ids \"ID ...\") [options]\n"
"       ffn inspect keys MODEL --data FILE [--layer L] [options]\n"
"       ffn inspect gates MODEL --corpus [en|zh] [options]\n"
"       ffn inspect MODEL --transcoder FILE --feature I [options]";

#define LAYER_OPT(p, what) \
    {.name = "--layer", .type = CLI_INT, .dst = (p), .metavar = "L", .imin = 0, .imax = 1 << 20, \
     .def = "every layer" what, .help = "one layer (" CLI_LAYER_HELP ")"}

static const cli_pos model_pos[] = {
    {.name = "MODEL", .help = "a checkpoint directory", .required = 1}, {0}};

/* ---- the model and its vocabulary --------------------------------------------------- */

typedef struct loaded {
    ffn_ctx *ctx;
    ffn_model *model;
    ffn_tokenizer *tok;
    ffn_vocab *hf; /* a Hugging Face tokenizer.json beside the weights */
#ifdef HAVE_CHECKPOINT_H
    ffn_llama2c_tokenizer *l2tok;
#endif
} loaded;

static void loaded_free(loaded *ld) {
    ffn_model_free(ld->model);
    ffn_tokenizer_free(ld->tok);
    ffn_vocab_free(ld->hf);
#ifdef HAVE_CHECKPOINT_H
    ffn_llama2c_tokenizer_free(ld->l2tok);
#endif
    ffn_ctx_free(ld->ctx);
}

static int load(const char *path, int threads, loaded *ld) {
    memset(ld, 0, sizeof *ld);
    if (cli_make_ctx(CMD, threads, &ld->ctx)) return CLI_EXIT_FAIL;
    ffn_status st;
#ifdef HAVE_CHECKPOINT_H
    ffn_checkpoint_info info;
    memset(&info, 0, sizeof info);
    st = ffn_checkpoint_load_any(ld->ctx, path, NULL, &ld->model, &info);
    char *json = NULL; /* a directory's tokenizer.json comes first */
    if (!st && ffn_vocab_find_in_dir(path, &json) == FFN_OK && strstr(json, "tokenizer.json")) {
        st = ffn_vocab_load(json, ffn_model_get_config(ld->model)->vocab_size, &ld->hf);
    } else if (!st && info.format == FFN_CHECKPOINT_GGUF && info.tokenizer_path[0]) {
        /* a GGUF's own vocabulary (tokenizer.ggml.*, or ffn's exact copy) */
        st = ffn_vocab_load(info.tokenizer_path, ffn_model_get_config(ld->model)->vocab_size, &ld->hf);
    } else if (!st && info.tokenizer_path[0]) {
        int64_t V = ffn_model_get_config(ld->model)->vocab_size;
        st = info.tokenizer_is_llama2c ? ffn_llama2c_tokenizer_load(info.tokenizer_path, V, &ld->l2tok)
                                       : ffn_tokenizer_load(info.tokenizer_path, &ld->tok);
    }
    free(json);
#else
    st = ffn_run_dir_load(ld->ctx, path, &ld->model, &ld->tok);
#endif
    if (st) return cli_fail(CMD, st);
    return 0;
}

static int has_vocab(const loaded *ld) {
    if (ld->hf) return 1;
#ifdef HAVE_CHECKPOINT_H
    if (ld->l2tok) return 1;
#endif
    return ld->tok != NULL;
}

static ffn_status encode(const loaded *ld, const char *text, int32_t **ids, int64_t *n) {
    if (ld->hf) return ffn_vocab_encode(ld->hf, text, strlen(text), 1, ids, n);
#ifdef HAVE_CHECKPOINT_H
    if (ld->l2tok) return ffn_llama2c_tokenizer_encode(ld->l2tok, text, strlen(text), 1, 0, ids, n);
#endif
    int64_t n_unk = 0;
    ffn_status st = ffn_tokenizer_encode(ld->tok, text, strlen(text), ids, NULL, n, &n_unk);
    if (st == FFN_OK && n_unk > 0) /* the text is not what the model reads */
        fprintf(stderr, "ffn %s: warning: %lld of %lld tokens (%.1f%%) are not in the model's "
                "vocabulary and read as <unk>\n", CMD, (long long)n_unk, (long long)*n,
                100.0 * (double)n_unk / (double)*n);
    return st;
}

/* The bytes of token id (after prev for llama2.c vocabularies), or "". */
static const char *piece(const loaded *ld, int32_t prev, int32_t id, size_t *len, char *b1) {
    *len = 0;
    if (ld->hf) {
        const char *s = NULL;
        return ffn_vocab_piece(ld->hf, prev, id, b1, &s, len) ? "" : s;
    }
#ifdef HAVE_CHECKPOINT_H
    if (ld->l2tok) {
        const char *s = NULL;
        if (ffn_llama2c_tokenizer_piece(ld->l2tok, prev, id, b1, &s, len)) return "";
        return s;
    }
#else
    (void)b1;
#endif
    (void)prev;
    if (!ld->tok) return "";
    const char *s = ffn_tokenizer_token(ld->tok, id, len);
    return s ? s : "";
}

/* Append bytes to a growing string as readable, valid UTF-8: control
 * characters as \n \t \xHH, invalid UTF-8 bytes as \xHH. */
typedef struct sbuf {
    char *s;
    size_t n, cap;
} sbuf;

static void sb_putn(sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *p = realloc(b->s, cap);
        if (!p) return;
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

static int utf8_len(const unsigned char *p, size_t n) {
    if (p[0] < 0x80) return 1;
    int k = p[0] >= 0xf0 && p[0] < 0xf5 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 && p[0] < 0xe0 ? 2 : 0;
    if (k == 0 || (size_t)k > n) return 0;
    for (int i = 1; i < k; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    return k;
}

static void sb_readable(sbuf *b, const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    char tmp[8];
    for (size_t i = 0; i < n;) {
        int k = utf8_len(p + i, n - i);
        if (k == 1 && p[i] == '\n') sb_putn(b, "\\n", 2);
        else if (k == 1 && p[i] == '\t') sb_putn(b, "\\t", 2);
        else if (k == 1 && (p[i] < 0x20 || p[i] == 0x7f)) {
            snprintf(tmp, sizeof tmp, "\\x%02x", p[i]);
            sb_putn(b, tmp, 4);
        } else if (k == 0) {
            snprintf(tmp, sizeof tmp, "\\x%02x", p[i]);
            sb_putn(b, tmp, 4);
            k = 1;
        } else {
            sb_putn(b, s + i, (size_t)k);
        }
        i += (size_t)k;
    }
    if (!b->s) sb_putn(b, "", 0);
}

/* Token id as readable text in buf (static storage per call site is the caller's). */
static const char *tok_text(const loaded *ld, int32_t prev, int32_t id, sbuf *b) {
    b->n = 0;
    if (b->s) b->s[0] = 0;
    char b1[1];
    size_t len;
    const char *s = id >= 0 ? piece(ld, prev, id, &len, b1) : "";
    if (id < 0) len = 0;
    if (!has_vocab(ld) && id >= 0) {
        char tmp[32];
        snprintf(tmp, sizeof tmp, "#%d", id);
        sb_putn(b, tmp, strlen(tmp));
        return b->s;
    }
    sb_readable(b, s, len);
    return b->s;
}

static void json_num(FILE *f, double x) { cli_json_number(f, x, "%.6g"); }

/* `, "key": x` on stdout: a number field after the first of an object. */
static void json_field(const char *key, double x) {
    printf(", \"%s\": ", key);
    json_num(stdout, x);
}

/* json_field for each (key, double) pair of the list, which NULL ends. */
static void json_fields(const char *key, ...) {
    va_list ap;
    va_start(ap, key);
    for (; key; key = va_arg(ap, const char *)) json_field(key, va_arg(ap, double));
    va_end(ap);
}

/* `SEP{"id": ID, "text": "...", "logit": X}`: a token a value vector promotes. */
static void json_promoted(const loaded *ld, const char *sep, int32_t id, double logit, sbuf *b) {
    printf("%s{\"id\": %d, \"text\": ", sep, id);
    cli_json_string(stdout, tok_text(ld, -1, id, b));
    json_field("logit", logit);
    printf("}");
}

/* ---- ffn inspect MODEL ----------------------------------------------------------------- */


/* A MoE layer's expert load over the prompt: tokens routed to each expert
 * (of the K slots a token has) and their summed router weight. */
static void print_expert_load(const loaded *ld, const ffn_inspect_result *r, int64_t li) {
    const int64_t E = ffn_model_get_config(ld->model)->num_experts;
    if (E <= 0) return;
    int64_t *count = calloc((size_t)E, sizeof *count);
    double *weight = calloc((size_t)E, sizeof *weight);
    if (!count || !weight) {
        free(count);
        free(weight);
        return;
    }
    int64_t slots = 0;
    for (int64_t t = 0; t < r->n_tokens; t++) {
        const ffn_inspect_token *tk = ffn_inspect_token_at(r, li, t);
        for (int64_t j = 0; j < tk->n_experts; j++) {
            const int32_t e = tk->experts[j];
            if (e < 0 || e >= E) continue;
            count[e]++;
            weight[e] += tk->expert_weights[j];
            slots++;
        }
    }
    int64_t busiest = 0, idle = 0;
    for (int64_t e = 0; e < E; e++) {
        if (count[e] > count[busiest]) busiest = e;
        idle += count[e] == 0;
    }
    printf("layer %lld expert load (%lld tokens x %lld experts each = %lld slots):",
           (long long)r->layers[li], (long long)r->n_tokens,
           (long long)(r->n_tokens > 0 ? slots / r->n_tokens : 0), (long long)slots);
    for (int64_t e = 0; e < E; e++)
        printf("%s e%lld %lld (w %.2f)", e % 6 == 0 ? "\n " : "", (long long)e, (long long)count[e],
               weight[e]);
    printf("\n  busiest e%lld takes %.1f%% of the slots (even: %.1f%%); %lld of %lld experts unused\n",
           (long long)busiest, slots ? 100.0 * (double)count[busiest] / (double)slots : 0.0,
           100.0 / (double)E, (long long)idle, (long long)E);
    free(count);
    free(weight);
}

static void print_tokens_table(const loaded *ld, const ffn_inspect_result *r) {
    sbuf a = {0}, b = {0};
    for (int64_t li = 0; li < r->n_layers; li++) {
        int64_t l = r->layers[li];
        printf("== layer %lld%s ==\n", (long long)l, r->layer_is_moe[li] ? " (MoE)" : "");
        for (int64_t t = 0; t < r->n_tokens; t++) {
            const ffn_inspect_token *tk = ffn_inspect_token_at(r, li, t);
            int32_t prev = t > 0 ? r->token_ids[t - 1] : -1;
            printf("token %lld '%s' (id %d): top %lld explain %.3f of |y| (cosine %.3f)\n",
                   (long long)t, tok_text(ld, prev, tk->token, &a), tk->token,
                   (long long)tk->n_top, tk->explained, tk->cosine);
            if (tk->n_experts) {
                printf("  experts:");
                for (int64_t j = 0; j < tk->n_experts; j++)
                    printf(" %d (w %.3f)", tk->experts[j], tk->expert_weights[j]);
                printf("\n");
            }
            printf("  %-10s %9s %9s %9s  %s\n", "neuron", "gate", "up", "product",
                   "value vector promotes (- : pushed down here, w*m < 0)");
            for (int64_t j = 0; j < tk->n_top; j++) {
                const ffn_inspect_neuron *nu = &tk->top[j];
                char name[48];
                if (nu->expert == -1) snprintf(name, sizeof name, "%lld", (long long)nu->index);
                else if (nu->expert == FFN_INSPECT_SHARED_EXPERT)
                    snprintf(name, sizeof name, "s/%lld", (long long)nu->index);
                else
                    snprintf(name, sizeof name, "e%lld/%lld", (long long)nu->expert,
                             (long long)nu->index);
                printf("  %-10s %9.4f %9.4f %9.4f %s", name, nu->gate, nu->up, nu->product,
                       nu->contribution < 0 ? "-" : " ");
                for (int64_t p = 0; p < r->n_promoted; p++)
                    if (nu->promoted[p] >= 0)
                        printf(" '%s'", tok_text(ld, -1, nu->promoted[p], &b));
                printf("\n");
            }
        }
        double se = 0.0, sc = 0.0;
        for (int64_t t = 0; t < r->n_tokens; t++) {
            se += ffn_inspect_token_at(r, li, t)->explained;
            sc += ffn_inspect_token_at(r, li, t)->cosine;
        }
        printf("layer %lld: the top %lld neurons explain on average %.3f of |y| (norm ratio), "
               "cosine %.3f\n", (long long)l, (long long)r->top_k,
               se / (double)r->n_tokens, sc / (double)r->n_tokens);
        if (r->layer_is_moe[li]) print_expert_load(ld, r, li);
        printf("\n");
    }
    free(a.s);
    free(b.s);
}

/* `SEP\n    {"expert": E, "index": I, "gate_pre": X, ..., "promoted": [...]}`: one of a
 * token's top neurons. */
static void json_neuron(const loaded *ld, const ffn_inspect_result *r, const ffn_inspect_neuron *nu,
                        const char *sep, sbuf *a) {
    printf("%s\n    {\"expert\": %lld, \"index\": %lld, \"gate_pre\": ", sep,
           (long long)nu->expert, (long long)nu->index);
    json_num(stdout, nu->gate_pre);
    json_fields("gate", nu->gate, "up", nu->up, "product", nu->product, "weight", nu->weight,
                "contribution", nu->contribution, "value_norm", nu->value_norm, (const char *)NULL);
    printf(", \"promoted\": [");
    for (int64_t p = 0; p < r->n_promoted; p++) {
        if (nu->promoted[p] < 0) continue;
        json_promoted(ld, p ? ", " : "", nu->promoted[p], nu->promoted_logit[p], a);
    }
    printf("]}");
}

static void print_tokens_json(const loaded *ld, const char *path, const ffn_inspect_result *r) {
    sbuf a = {0};
    printf("{\"model\": ");
    cli_json_string(stdout, path);
    printf(", \"top_k\": %lld, \"n_promoted\": %lld, \"explained\": \"norm ratio "
           "|sum_topk w*m_i*v_i| / |y - bias|\",\n \"tokens\": [",
           (long long)r->top_k, (long long)r->n_promoted);
    for (int64_t t = 0; t < r->n_tokens; t++) {
        printf("%s{\"position\": %lld, \"id\": %d, \"text\": ", t ? ", " : "", (long long)t,
               r->token_ids[t]);
        cli_json_string(stdout, tok_text(ld, t ? r->token_ids[t - 1] : -1, r->token_ids[t], &a));
        printf("}");
    }
    printf("],\n \"layers\": [");
    for (int64_t li = 0; li < r->n_layers; li++) {
        printf("%s\n  {\"layer\": %lld, \"moe\": %s, \"tokens\": [", li ? "," : "",
               (long long)r->layers[li], r->layer_is_moe[li] ? "true" : "false");
        for (int64_t t = 0; t < r->n_tokens; t++) {
            const ffn_inspect_token *tk = ffn_inspect_token_at(r, li, t);
            printf("%s\n   {\"position\": %lld, \"out_norm\": ", t ? "," : "", (long long)t);
            json_num(stdout, tk->out_norm);
            json_fields("partial_norm", tk->partial_norm, "explained", tk->explained, "cosine",
                        tk->cosine, "residual", tk->residual, (const char *)NULL);
            printf(", \"experts\": [");
            for (int64_t j = 0; j < tk->n_experts; j++) {
                printf("%s{\"expert\": %d, \"weight\": ", j ? ", " : "", tk->experts[j]);
                json_num(stdout, tk->expert_weights[j]);
                printf("}");
            }
            printf("], \"neurons\": [");
            for (int64_t j = 0; j < tk->n_top; j++) json_neuron(ld, r, &tk->top[j], j ? "," : "", &a);
            printf("]}");
        }
        printf("]}");
    }
    printf("]}\n");
    free(a.s);
}

/* ---- ffn inspect MODEL --ablate / --scale: the next token before and after ---- */

#define EDIT_TOP_TOKENS 10

static int run_edits(const loaded *ld, const int32_t *ids, int64_t n, const char *ablate,
                     const char *scale, int json) {
    ffn_neuron_edit *edits = NULL;
    int64_t n_edits = 0;
    ffn_status st = FFN_OK;
    if (ablate) st = ffn_neuron_edits_parse(ld->model, ablate, 0, "--ablate", &edits, &n_edits);
    if (!st && scale) st = ffn_neuron_edits_parse(ld->model, scale, 1, "--scale", &edits, &n_edits);
    if (st) {
        free(edits);
        cli_error(CMD, "%s", ffn_last_error());
        return CLI_EXIT_USAGE;
    }
    const int64_t V = ffn_model_get_config(ld->model)->vocab_size;
    float *before = malloc((size_t)V * sizeof *before), *after = malloc((size_t)V * sizeof *after);
    double kl = 0;
    if (!before || !after) {
        free(edits), free(before), free(after);
        cli_error(CMD, "out of memory");
        return CLI_EXIT_FAIL;
    }
    st = ffn_predict_with_edits(ld->ctx, ld->model, ids, n, edits, n_edits, before, after, &kl);
    if (st) {
        free(edits), free(before), free(after);
        return cli_fail(CMD, st);
    }
    int32_t tb[EDIT_TOP_TOKENS], ta[EDIT_TOP_TOKENS];
    const int k = V < EDIT_TOP_TOKENS ? (int)V : EDIT_TOP_TOKENS;
    cli_top_ids(before, NULL, V, k, tb);
    cli_top_ids(after, NULL, V, k, ta);
    sbuf a = {0};
    const int32_t last = ids[n - 1];
    if (json) {
        printf("{\"edits\": [");
        for (int64_t e = 0; e < n_edits; e++)
            printf("%s{\"layer\": %lld, \"neuron\": %lld, \"factor\": %s}", e ? ", " : "",
                   (long long)edits[e].layer, (long long)edits[e].neuron,
                   cli_json_num(edits[e].factor, "%.9g"));
        printf("], \"kl\": %s", cli_json_num(kl, "%.9g"));
        for (int side = 0; side < 2; side++) {
            const int32_t *t = side ? ta : tb;
            const float *p = side ? after : before;
            printf(", \"%s\": [", side ? "after" : "before");
            for (int j = 0; j < k; j++) {
                printf("%s{\"id\": %d, \"text\": ", j ? ", " : "", t[j]);
                cli_json_string(stdout, tok_text(ld, last, t[j], &a));
                printf(", \"p\": %s, \"p_%s\": %s}", cli_json_num(p[t[j]], "%.6g"),
                       side ? "before" : "after",
                       cli_json_num(side ? before[t[j]] : after[t[j]], "%.6g"));
            }
            printf("]");
        }
        printf("}\n");
    } else {
        printf("next token after %lld tokens, %lld edit%s:", (long long)n, (long long)n_edits,
               n_edits == 1 ? "" : "s");
        for (int64_t e = 0; e < n_edits; e++) {
            if (edits[e].factor == 0.0f) printf(" ablate %lld:%lld", (long long)edits[e].layer, (long long)edits[e].neuron);
            else printf(" scale %lld:%lld=%g", (long long)edits[e].layer, (long long)edits[e].neuron, edits[e].factor);
        }
        printf("\n  %-24s %8s %8s    %-24s %8s %8s\n", "before", "p", "after", "after", "p", "before");
        for (int j = 0; j < k; j++) {
            char lb[64], la[64];
            snprintf(lb, sizeof lb, "'%s'", tok_text(ld, last, tb[j], &a));
            snprintf(la, sizeof la, "'%s'", tok_text(ld, last, ta[j], &a));
            printf("  %-24s %8.4f %8.4f    %-24s %8.4f %8.4f\n", lb, before[tb[j]], after[tb[j]], la,
                   after[ta[j]], before[ta[j]]);
        }
        printf("KL(before || after) = %.6g nats\n", kl);
    }
    free(a.s);
    free(edits), free(before), free(after);
    return 0;
}

static int run_tokens(int argc, char **argv) {
    const char *model_path = NULL, *prompt = NULL, *ids_s = NULL, *ablate = NULL, *scale = NULL;
    ffn_inspect_options o;
    ffn_inspect_options_default(&o);
    o.top_k = 5;
    int json = 0;
    int64_t threads = 0;
    const cli_opt opts[] = {
        {.name = "--prompt", .type = CLI_STR, .dst = &prompt, .metavar = "TEXT", .alias = "--text",
         .help = "text, encoded with the model's tokenizer"},
        {.name = "--ids", .type = CLI_STR, .dst = &ids_s, .metavar = "\"ID ...\"",
         .help = "token ids instead (spaces or commas)"},
        LAYER_OPT(&o.layer, ""),
        {.name = "--top", .type = CLI_INT, .dst = &o.top_k, .metavar = "K", .imin = 1,
         .imax = 100000, .help = "neurons per token"},
        {.name = "--promoted", .type = CLI_INT, .dst = &o.n_promoted, .metavar = "P", .imin = 1,
         .imax = 1000, .help = "promoted tokens per neuron"},
        {.name = "--ablate", .type = CLI_LIST, .dst = &ablate, .metavar = "L:i[,L:j...]",
         .help = "switch neurons off (m_i = 0 at every position) and show the next-token "
                 "distribution before and after, with KL(before || after), instead of the neurons"},
        {.name = "--scale", .type = CLI_LIST, .dst = &scale, .metavar = "L:i=x[,...]",
         .help = "multiply neurons by x (m_i -> x*m_i); with or without --ablate"},
        CLI_OPT_JSON(&json, "the full data as one JSON object on stdout"),
        CLI_OPT_THREADS(&threads),
        {0}};
    cli_pos pos[2];
    memcpy(pos, model_pos, sizeof pos);
    pos[0].dst = &model_path;
    const cli_spec spec = {.cmd = CMD, .synopsis = synopsis, .about = about, .epilog = epilog,
                           .opts = opts, .pos = pos};
    int prc;
    if (cli_parse(&spec, argc, argv, &prc)) return prc;
    if (!model_path) {
        cli_error(CMD, "MODEL is required (a checkpoint directory; see ffn inspect --help)");
        return CLI_EXIT_USAGE;
    }
    if (!prompt == !ids_s) {
        cli_error(CMD, "give exactly one of --prompt TEXT and --ids \"ID ...\"");
        return CLI_EXIT_USAGE;
    }
    int32_t *ids = NULL;
    int64_t n = 0;
    if (ids_s && !cli_parse_ids(CMD, "--ids", ids_s, 0, &ids, &n)) {
        free(ids);
        return CLI_EXIT_USAGE;
    }
    loaded ld;
    int rc = load(model_path, threads, &ld);
    if (!rc) rc = cli_check_layer(CMD, o.layer, ffn_model_get_config(ld.model)->num_hidden_layers);
    ffn_inspect_result *res = NULL;
    if (!rc && prompt) {
        ffn_status st = FFN_OK;
        if (!has_vocab(&ld)) {
            cli_error(CMD, "%s: no tokenizer beside the model; use --ids", model_path);
            rc = CLI_EXIT_FAIL;
        } else if ((st = encode(&ld, prompt, &ids, &n))) {
            rc = cli_fail(CMD, st);
        } else if (n == 0) {
            cli_error(CMD, "--prompt: the text encodes to no tokens");
            rc = CLI_EXIT_USAGE;
        }
    }
    if (!rc && (ablate || scale)) {
        int64_t ctxlen = ffn_model_get_config(ld.model)->max_position_embeddings;
        if (n > ctxlen) {
            cli_error(CMD, "%lld tokens exceed the context (%lld)", (long long)n, (long long)ctxlen);
            rc = CLI_EXIT_FAIL;
        } else {
            rc = run_edits(&ld, ids, n, ablate, scale, json);
        }
        free(ids);
        loaded_free(&ld);
        return rc;
    }
    if (!rc) {
        int64_t ctxlen = ffn_model_get_config(ld.model)->max_position_embeddings;
        if (n > ctxlen) {
            fprintf(stderr, "ffn inspect: %lld tokens exceed the context (%lld); inspecting "
                    "the first %lld\n", (long long)n, (long long)ctxlen, (long long)ctxlen);
            n = ctxlen;
        }
        ffn_status st = ffn_inspect_run(ld.ctx, ld.model, ids, n, &o, &res);
        if (st) rc = cli_fail(CMD, st);
    }
    if (!rc) {
        if (json) print_tokens_json(&ld, model_path, res);
        else print_tokens_table(&ld, res);
    }
    ffn_inspect_result_free(res);
    free(ids);
    loaded_free(&ld);
    return rc;
}

/* ---- ffn inspect keys ------------------------------------------------------------------ */

/* The text of tokens [from, to] (inclusive), readable, in b. */
static const char *span_text(const loaded *ld, const int32_t *ids, int64_t from, int64_t to,
                             sbuf *b) {
    b->n = 0;
    sb_putn(b, "", 0);
    for (int64_t i = from; i <= to; i++) {
        char b1[1];
        size_t len;
        const char *s = piece(ld, i > 0 ? ids[i - 1] : -1, ids[i], &len, b1);
        sb_readable(b, s, len);
    }
    return b->s;
}

/* The parse of `ffn inspect SUB USAGE [options]`: MODEL into *model_path.
 * With opts_only, only the flags are printed to it (for ffn inspect --help).
 * Returns 1 when the subcommand goes on, else 0 with *rc its exit status. */
static int parse_sub(const char *sub, const char *usage, const cli_opt *opts, int argc,
                     char **argv, FILE *opts_only, const char **model_path, int *rc) {
    char cmd[32], line[96];
    cli_pos pos[2];
    memcpy(pos, model_pos, sizeof pos);
    pos[0].dst = model_path;
    *rc = 0;
    if (opts_only) {
        snprintf(line, sizeof line, "ffn inspect %s %s", sub, usage);
        cli_help_options(opts_only, opts, line);
        return 0;
    }
    snprintf(cmd, sizeof cmd, "inspect %s", sub);
    snprintf(line, sizeof line, "%s [options]", usage);
    const cli_spec spec = {.cmd = cmd, .synopsis = line, .about = about, .epilog = epilog,
                           .opts = opts, .pos = pos};
    return !cli_parse(&spec, argc, argv, rc);
}

/* `ffn inspect keys --effect`: a layer's neurons ranked by what their
 * ablation does on the data (mean KL of the next-token distribution, or
 * the change of the loss), beside the tokens their value vectors promote. */
static int run_effect(const loaded *ld, const char *model_path, const char *data,
                      const int32_t *ids, int64_t n, int64_t layer, int64_t window, int64_t show,
                      int64_t n_promoted, int by_loss, int json) {
    const int64_t W = ffn_inspect_layer_width(ld->model, layer);
    const int64_t L = ffn_model_get_config(ld->model)->num_hidden_layers;
    if (layer >= L || W == 0) {
        cli_error(CMD, "--layer %lld: %s", (long long)layer,
                  layer >= L ? "out of range for this model" : "the layer has no FFN");
        return CLI_EXIT_USAGE;
    }
    double *kl = malloc((size_t)W * sizeof *kl), *dl = malloc((size_t)W * sizeof *dl), base = 0;
    int64_t *order = malloc((size_t)W * sizeof *order);
    int32_t *pr = malloc((size_t)n_promoted * sizeof *pr);
    if (!kl || !dl || !order || !pr) {
        free(kl), free(dl), free(order), free(pr);
        cli_error(CMD, "out of memory");
        return CLI_EXIT_FAIL;
    }
    ffn_status st = ffn_neuron_effects(ld->ctx, ld->model, ids, n, layer, window, 0, kl, dl, &base);
    if (st) {
        free(kl), free(dl), free(order), free(pr);
        return cli_fail(CMD, st);
    }
    const double *key = by_loss ? dl : kl;
    for (int64_t i = 0; i < W; i++) order[i] = i;
    for (int64_t i = 1; i < W; i++) { /* insertion sort: largest first, lower index on ties */
        int64_t x = order[i], j = i;
        while (j > 0 && key[order[j - 1]] < key[x]) order[j] = order[j - 1], j--;
        order[j] = x;
    }
    const int moe = ffn_model_config_layer_is_moe(ffn_model_get_config(ld->model), layer);
    const int64_t fe = moe ? W / ffn_model_get_config(ld->model)->num_experts : W;
    if (show <= 0 || show > W) show = W;
    sbuf a = {0};
    if (json) {
        printf("{\"model\": ");
        cli_json_string(stdout, model_path);
        printf(", \"data\": ");
        cli_json_string(stdout, data);
        printf(", \"layer\": %lld, \"tokens\": %lld, \"base_loss\": %s, \"rank_by\": \"%s\", "
               "\"neurons\": [",
               (long long)layer, (long long)n, cli_json_num(base, "%.9g"), by_loss ? "loss" : "kl");
    } else {
        printf("layer %lld: %lld neurons ablated one at a time on %lld tokens of %s (loss %.4f)\n",
               (long long)layer, (long long)W, (long long)n, data, base);
        printf("ranked by %s\n%-10s %12s %12s  %s\n", by_loss ? "the loss change" : "mean KL",
               "neuron", "mean KL", "delta loss", "value vector promotes");
    }
    for (int64_t r = 0; r < show && !st; r++) {
        const int64_t i = order[r];
        st = ffn_inspect_value_top(ld->model, layer, moe ? i / fe : -1, i % fe, n_promoted, pr, NULL);
        if (st) break;
        if (json) {
            printf("%s\n {\"neuron\": %lld, \"mean_kl\": %s, \"delta_loss\": %s, \"promoted\": [",
                   r ? "," : "", (long long)i, cli_json_num(kl[i], "%.9g"),
                   cli_json_num(dl[i], "%.9g"));
            for (int64_t p = 0; p < n_promoted; p++) {
                printf("%s{\"id\": %d, \"text\": ", p ? ", " : "", pr[p]);
                cli_json_string(stdout, tok_text(ld, -1, pr[p], &a));
                printf("}");
            }
            printf("]}");
        } else {
            char name[48];
            if (moe) snprintf(name, sizeof name, "e%lld/%lld", (long long)(i / fe), (long long)(i % fe));
            else snprintf(name, sizeof name, "%lld", (long long)i);
            printf("%-10s %12.6f %12.6f ", name, kl[i], dl[i]);
            for (int64_t p = 0; p < n_promoted; p++) printf(" '%s'", tok_text(ld, -1, pr[p], &a));
            printf("\n");
        }
    }
    if (json && !st) printf("]}\n");
    free(a.s);
    free(kl), free(dl), free(order), free(pr);
    return st ? cli_fail(CMD, st) : 0;
}

/* qsort's comparison for the keys table: a neuron's top example activation,
 * largest first (no example: last), then the lower index. */
static const ffn_keys_layer *keys_rank_layer;
static float top_activation(int64_t i) {
    const ffn_key_example *ex = keys_rank_layer->examples + i * keys_rank_layer->n_examples;
    return keys_rank_layer->n_examples > 0 && ex[0].position >= 0 ? ex[0].activation : -INFINITY;
}
static int cmp_top_activation(const void *a, const void *b) {
    const int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    const float x = top_activation(i), y = top_activation(j);
    if (x != y) return x > y ? -1 : 1;
    return i < j ? -1 : i > j;
}

/* opts_only: print the flags to it and return (for ffn inspect --help). */
static int run_keys(int argc, char **argv, FILE *opts_only) {
    const char *model_path = NULL, *data = NULL;
    ffn_keys_options o;
    ffn_keys_options_default(&o);
    int64_t layer = -1, neurons = -1, show = 3, max_tokens = 100000;
    int json = 0, effect = 0, rank_by = 0, max_tokens_given = 0, top_given = 0, show_given = 0;
    static const char *const rank_names[] = {"kl", "loss", NULL};
    int64_t threads = 0;
    const cli_opt opts[] = {
        {.name = "--data", .type = CLI_PATH, .dst = &data, .metavar = "FILE",
         .help = "UTF-8 text (required)"},
        LAYER_OPT(&layer, ", one rate per layer"),
        {.name = "--top", .type = CLI_INT, .dst = &o.top_examples, .metavar = "T", .imin = 1,
         .imax = 10000, .seen = &top_given,
         .help = "trigger examples kept per neuron (and printed, unless --show)"},
        {.name = "--neurons", .type = CLI_INT, .dst = &neurons, .metavar = "N", .imin = 0,
         .imax = INT64_MAX, .def = "8 in the table, all with --json",
         .help = "neurons listed per layer (the rate always counts every neuron)"},
        {.name = "--show", .type = CLI_INT, .dst = &show, .metavar = "S", .imin = 0,
         .imax = 10000, .seen = &show_given, .def = "3, or --top when given",
         .help = "trigger examples printed per neuron"},
        {.name = "--promoted", .type = CLI_INT, .dst = &o.n_promoted, .metavar = "P", .imin = 1,
         .imax = 1000, .help = "promoted tokens per neuron"},
        {.name = "--window", .type = CLI_INT, .dst = &o.window, .metavar = "T", .imin = 1,
         .imax = 1 << 24, .def = "the context length", .help = "positions per window"},
        {.name = "--max-tokens", .type = CLI_INT, .dst = &max_tokens, .metavar = "N", .imin = 1,
         .imax = INT64_MAX, .seen = &max_tokens_given,
         .help = "read at most N tokens of FILE (--effect: 2048 unless given)"},
        {.name = "--effect", .type = CLI_FLAG, .dst = &effect,
         .help = "rank the --layer's neurons by what ablating each one (m_i = 0) does on FILE: "
                 "the mean KL of the next-token distribution and the change of the loss, beside "
                 "the tokens its value vector promotes (one forward of FILE per neuron)"},
        {.name = "--rank-by", .type = CLI_ENUM, .dst = &rank_by, .names = rank_names,
         .metavar = "kl|loss", .help = "the --effect ranking"},
        CLI_OPT_JSON(&json, "the full data as one JSON object on stdout"),
        CLI_OPT_THREADS(&threads),
        {0}};
    int prc;
    if (!parse_sub("keys", "MODEL --data FILE", opts, argc, argv, opts_only, &model_path, &prc))
        return prc;
    if (!model_path || !data) {
        cli_error(CMD, "usage: ffn inspect keys MODEL --data FILE (see ffn inspect --help)");
        return CLI_EXIT_USAGE;
    }
    if (effect && layer < 0) {
        cli_error(CMD, "--effect needs --layer L (one forward of the data per neuron of that layer)");
        return CLI_EXIT_USAGE;
    }
    if (effect && !max_tokens_given) max_tokens = 2048;
    if (neurons < 0) neurons = json ? 0 : 8;
    /* the table lists the most selective neurons (the largest top
     * activation), so every neuron is gathered and ranked here; --json
     * keeps the first N by index, as documented */
    o.max_neurons = json || effect ? neurons : 0;
    /* --top T alone prints its T examples (--show says otherwise) */
    if (top_given && !show_given) show = o.top_examples;
    loaded ld;
    int rc = load(model_path, threads, &ld);
    if (!rc) rc = cli_check_layer(CMD, layer, ffn_model_get_config(ld.model)->num_hidden_layers);
    char *text = NULL;
    size_t n_bytes = 0;
    int32_t *ids = NULL;
    int64_t n = 0;
    ffn_keys_result *res = NULL;
    ffn_status st = FFN_OK;
    if (!rc && !has_vocab(&ld)) {
        cli_error(CMD, "%s: no tokenizer beside the model", model_path);
        rc = CLI_EXIT_FAIL;
    }
    if (!rc && ((st = ffn_text_read(data, &text, &n_bytes)) || (st = encode(&ld, text, &ids, &n))))
        rc = cli_fail(CMD, st);
    if (!rc && n == 0) {
        cli_error(CMD, "%s: the text encodes to no tokens", data);
        rc = CLI_EXIT_FAIL;
    }
    if (!rc && effect) {
        if (n > max_tokens) n = max_tokens;
        rc = run_effect(&ld, model_path, data, ids, n, layer, o.window, neurons, o.n_promoted,
                        rank_by == 1, json);
        free(ids);
        free(text);
        loaded_free(&ld);
        return rc;
    }
    if (!rc) {
        if (n > max_tokens) n = max_tokens;
        if ((st = ffn_inspect_keys(ld.ctx, ld.model, ids, n, layer, &o, &res))) rc = cli_fail(CMD, st);
    }
    if (!rc) {
        sbuf a = {0}, b = {0};
        const int64_t P = res->n_promoted, W = res->window;
        if (json) {
            printf("{\"model\": ");
            cli_json_string(stdout, model_path);
            printf(", \"data\": ");
            cli_json_string(stdout, data);
            printf(", \"tokens\": %lld, \"window\": %lld, \"top_examples\": %lld, \"layers\": [",
                   (long long)res->n_tokens, (long long)W, (long long)res->top_examples);
        } else {
            printf("%lld tokens of %s in windows of %lld; top %lld trigger examples per neuron\n",
                   (long long)res->n_tokens, data, (long long)W, (long long)res->top_examples);
        }
        for (int64_t li = 0; li < res->n_layers; li++) {
            const ffn_keys_layer *kl = &res->layers[li];
            if (json) {
                printf("%s\n {\"layer\": %lld, \"neurons\": %lld, \"agree\": %lld, \"counted\": "
                       "%lld, \"agreement\": ", li ? "," : "", (long long)kl->layer,
                       (long long)kl->n_neurons, (long long)kl->n_agree, (long long)kl->n_counted);
                json_num(stdout, kl->agreement);
                json_field("chance", kl->chance);
                printf(", \"reported\": [");
            } else {
                printf("\n== layer %lld: %lld neurons, the %lld most selective (largest top "
                       "activation) ==\n", (long long)kl->layer, (long long)kl->n_neurons,
                       (long long)(neurons > 0 && neurons < kl->n_reported ? neurons : kl->n_reported));
            }
            /* the table: neurons by their top example's activation, largest first */
            int64_t *order = malloc((size_t)(kl->n_reported > 0 ? kl->n_reported : 1) * sizeof *order);
            if (!order) {
                cli_error(CMD, "out of memory");
                rc = CLI_EXIT_FAIL;
                break;
            }
            for (int64_t i = 0; i < kl->n_reported; i++) order[i] = i;
            if (!json) {
                keys_rank_layer = kl;
                qsort(order, (size_t)kl->n_reported, sizeof *order, cmp_top_activation);
            }
            const int64_t n_list = !json && neurons > 0 && neurons < kl->n_reported ? neurons : kl->n_reported;
            for (int64_t oi = 0; oi < n_list; oi++) {
                const int64_t i = order[oi];
                const ffn_key_example *ex = kl->examples + i * kl->n_examples;
                const int32_t *pr = kl->promoted + i * P;
                if (json) {
                    printf("%s\n  {\"neuron\": %lld, \"expert\": %lld, \"index\": %lld, "
                           "\"next_token\": %d, \"promoted\": [", i ? "," : "", (long long)i,
                           kl->fe == kl->n_neurons ? -1LL : (long long)(i / kl->fe),
                           (long long)(i % kl->fe), kl->next_token[i]);
                    for (int64_t p = 0; p < P; p++) {
                        json_promoted(&ld, p ? ", " : "", pr[p], kl->promoted_logit[i * P + p],
                                      &a);
                    }
                    printf("], \"examples\": [");
                    int first = 1;
                    for (int64_t j = 0; j < kl->n_examples; j++) {
                        if (ex[j].position < 0) continue;
                        int64_t p0 = ex[j].position / W * W;
                        printf("%s{\"position\": %lld, \"activation\": ", first ? "" : ", ",
                               (long long)ex[j].position);
                        first = 0;
                        json_num(stdout, ex[j].activation);
                        printf(", \"prefix\": ");
                        cli_json_string(stdout, span_text(&ld, ids, p0, ex[j].position, &a));
                        printf(", \"next\": ");
                        if (ex[j].position + 1 < n)
                            cli_json_string(stdout, tok_text(&ld, ids[ex[j].position],
                                                             ids[ex[j].position + 1], &b));
                        else
                            printf("null");
                        printf("}");
                    }
                    printf("]}");
                } else {
                    char name[48];
                    if (kl->fe == kl->n_neurons) snprintf(name, sizeof name, "%lld", (long long)i);
                    else snprintf(name, sizeof name, "e%lld/%lld", (long long)(i / kl->fe),
                                  (long long)(i % kl->fe));
                    printf("neuron %s promotes", name);
                    for (int64_t p = 0; p < P; p++) printf(" '%s'", tok_text(&ld, -1, pr[p], &a));
                    printf("\n");
                    for (int64_t j = 0; j < kl->n_examples && j < show; j++) {
                        if (ex[j].position < 0) continue;
                        int64_t p0 = ex[j].position / W * W;
                        if (ex[j].position - p0 > 40) p0 = ex[j].position - 40;
                        const char *pre = span_text(&ld, ids, p0, ex[j].position, &a);
                        printf("  %8.3f  ...%s", ex[j].activation, pre);
                        if (ex[j].position + 1 < n)
                            printf("  -> '%s'", tok_text(&ld, ids[ex[j].position],
                                                        ids[ex[j].position + 1], &b));
                        printf("\n");
                    }
                }
            }
            free(order);
            if (json) printf("]}");
        }
        if (json) {
            printf("]}\n");
        } else {
            printf("\nagreement rate (top promoted token == token after the top trigger example):\n");
            printf("%-6s %9s %9s %9s %9s\n", "layer", "agree", "neurons", "rate", "chance");
            for (int64_t li = 0; li < res->n_layers; li++) {
                const ffn_keys_layer *kl = &res->layers[li];
                printf("%-6lld %9lld %9lld %9.4f %9.4f\n", (long long)kl->layer,
                       (long long)kl->n_agree, (long long)kl->n_counted, kl->agreement, kl->chance);
            }
            printf("(chance: the rate expected if each neuron's top promoted token were unrelated\n"
                   " to its trigger examples: the mean frequency of that token as a next token)\n");
        }
        free(a.s);
        free(b.s);
    }
    ffn_keys_result_free(res);
    free(ids);
    free(text);
    loaded_free(&ld);
    return rc;
}

/* ---- ffn inspect gates ------------------------------------------------------------------ */

static int run_gates(int argc, char **argv, FILE *opts_only) {
    const char *model_path = NULL;
    ffn_probe_options o;
    ffn_probe_options_default(&o);
    o.top_selective = 3;
    int json = 0, corpus = 0, split_given = 0, split = -1;
    int64_t threads = 0;
    static const char *const split_names[] = {"words", "tokens", "sentences", NULL};
    static const int split_values[] = {FFN_PROBE_SPLIT_WORDS, FFN_PROBE_SPLIT_TOKENS,
                                       FFN_PROBE_SPLIT_SENTENCES};
    const cli_opt opts[] = {
        {.name = "--corpus", .type = CLI_ENUM, .dst = &o.lang, .names = cli_lang_names,
         .values = cli_lang_values, .metavar = "[en|zh]", .optional_value = 1, .seen = &corpus,
         .help = "the corpus language (required; the built-in corpus is the only labelled "
                 "data)"},
        {.name = "--sentences", .type = CLI_INT, .dst = &o.sentences, .metavar = "N", .imin = 2,
         .imax = 10000000, .help = "sentences generated (a different seed from training's)"},
        {.name = "--split", .type = CLI_ENUM, .dst = &split, .names = split_names,
         .values = split_values, .seen = &split_given,
         .def = "words with a word tokenizer, tokens with char and byte",
         .help = "what is held out from the probe's training: words: every token of unseen "
                 "word types; tokens: every occurrence of unseen token ids; sentences: the last "
                 "sentences.  With words or tokens the probe must generalise to tokens it never "
                 "saw, so it cannot succeed by memorising token identity, and a random model "
                 "fails (with sentences even a random model's probe beats the baseline)"},
        {.name = "--heldout", .type = CLI_FLOAT, .dst = &o.heldout_fraction, .metavar = "F",
         .fmin = 0.01, .fmax = 0.99, .help = "share held out"},
        {.name = "--epochs", .type = CLI_INT, .dst = &o.epochs, .metavar = "N", .imin = 0,
         .imax = 100000, .help = "SGD passes"},
        {.name = "--top-neurons", .type = CLI_INT, .dst = &o.top_selective, .metavar = "K",
         .imin = 1, .imax = 1000, .help = "selective neurons per class"},
        CLI_OPT_JSON(&json, "the full data as one JSON object on stdout"),
        CLI_OPT_THREADS(&threads),
        {0}};
    int prc;
    if (!parse_sub("gates", "MODEL --corpus [en|zh]", opts, argc, argv, opts_only, &model_path,
                   &prc))
        return prc;
    if (split_given) o.split = (ffn_probe_split)split;
    if (!model_path) {
        cli_error(CMD, "usage: ffn inspect gates MODEL --corpus [en|zh] (see ffn inspect --help)");
        return CLI_EXIT_USAGE;
    }
    if (!corpus) {
        cli_error(CMD, "gates: --corpus [en|zh] is required (the built-in corpus is the only "
                  "labelled data)");
        return CLI_EXIT_USAGE;
    }
    loaded ld;
    int rc = load(model_path, threads, &ld);
    ffn_probe_result *res = NULL;
    if (!rc && !ld.tok) {
        cli_error(CMD, "%s: gates needs an ffn tokenizer (tokenizer.txt) beside the model",
                  model_path);
        rc = CLI_EXIT_FAIL;
    }
    if (!rc) {
        if (!split_given)
            o.split = ffn_tokenizer_get_mode(ld.tok) == FFN_TOK_WORD ? FFN_PROBE_SPLIT_WORDS
                                                                     : FFN_PROBE_SPLIT_TOKENS;
        ffn_status st = ffn_inspect_gates_corpus(ld.ctx, ld.model, ld.tok, &o, &res);
        if (st) rc = cli_fail(CMD, st);
    }
    if (!rc) {
        const int64_t k = res->top_selective;
        if (json) {
            printf("{\"model\": ");
            cli_json_string(stdout, model_path);
            printf(", \"corpus\": \"%s\", \"sentences\": %lld, \"split\": \"%s\", \"heldout\": %s, "
                   "\"train_tokens\": %lld, \"heldout_tokens\": %lld, \"majority_class\": \"%s\", "
                   "\"baseline\": ",
                   ffn_lang_name(o.lang), (long long)o.sentences, ffn_probe_split_name(o.split),
                   cli_json_num(o.heldout_fraction, "%g"), (long long)res->n_train,
                   (long long)res->n_test, ffn_word_class_name(res->majority_class));
            json_num(stdout, res->baseline);
            printf(", \"class_counts\": {");
            for (int c = 0; c < FFN_WORD_N_CLASSES; c++)
                printf("%s\"%s\": [%lld, %lld]", c ? ", " : "", ffn_word_class_name(c),
                       (long long)res->class_count_train[c], (long long)res->class_count_test[c]);
            printf("}, \"layers\": [");
            for (int64_t li = 0; li < res->n_layers; li++) {
                const ffn_probe_layer *pl = &res->layers[li];
                printf("%s\n {\"layer\": %lld, \"features\": %lld, \"acc_gate\": ", li ? "," : "",
                       (long long)pl->layer, (long long)pl->n_features_gate);
                json_num(stdout, pl->acc_gate);
                json_fields("acc_input", pl->acc_input, "train_acc_gate", pl->train_acc_gate,
                            "train_acc_input", pl->train_acc_input, (const char *)NULL);
                printf(", \"selective\": {");
                for (int c = 0; c < FFN_WORD_N_CLASSES; c++) {
                    printf("%s\"%s\": [", c ? ", " : "", ffn_word_class_name(c));
                    for (int64_t j = 0, first = 1; j < k; j++) {
                        if (pl->selective[c * k + j] < 0) continue;
                        printf("%s{\"neuron\": %lld, \"d\": ", first ? "" : ", ",
                               (long long)pl->selective[c * k + j]);
                        json_num(stdout, pl->selective_d[c * k + j]);
                        printf("}");
                        first = 0;
                    }
                    printf("]");
                }
                printf("}}");
            }
            printf("]}\n");
        } else {
            printf("linear probe: word class from gate activations, built-in corpus (%s, %lld "
                   "sentences)\n", ffn_lang_name(o.lang), (long long)o.sentences);
            printf("held out: %s (%.0f%%); %lld training tokens, %lld held-out tokens\n",
                   o.split == FFN_PROBE_SPLIT_WORDS    ? "the tokens of unseen word types"
                   : o.split == FFN_PROBE_SPLIT_TOKENS ? "every occurrence of unseen token ids"
                                                       : "the last sentences",
                   100.0 * o.heldout_fraction, (long long)res->n_train, (long long)res->n_test);
            printf("baseline: always '%s' (the training majority) = %.3f held-out accuracy\n\n",
                   ffn_word_class_name(res->majority_class), res->baseline);
            printf("%-6s %9s %10s %10s %10s %12s\n", "layer", "features", "gate acc", "input acc",
                   "baseline", "gate - base");
            for (int64_t li = 0; li < res->n_layers; li++) {
                const ffn_probe_layer *pl = &res->layers[li];
                printf("%-6lld %9lld %10.3f %10.3f %10.3f %+12.3f\n", (long long)pl->layer,
                       (long long)pl->n_features_gate, pl->acc_gate, pl->acc_input, res->baseline,
                       pl->acc_gate - res->baseline);
            }
            printf("\nmost selective neurons per class (d = mean in-class minus mean out-of-class "
                   "gate activation, in pooled sd; training tokens):\n");
            for (int64_t li = 0; li < res->n_layers; li++) {
                const ffn_probe_layer *pl = &res->layers[li];
                printf("layer %lld\n", (long long)pl->layer);
                for (int c = 0; c < FFN_WORD_N_CLASSES; c++) {
                    printf("  %-9s", ffn_word_class_name(c));
                    for (int64_t j = 0; j < k; j++)
                        if (pl->selective[c * k + j] >= 0)
                            printf("  %6lld (d %+.2f)", (long long)pl->selective[c * k + j],
                                   pl->selective_d[c * k + j]);
                    printf("\n");
                }
            }
        }
    }
    ffn_probe_result_free(res);
    loaded_free(&ld);
    return rc;
}

/* ffn inspect MODEL --transcoder FILE --feature I: tools/cmd_transcoder.c */
int cmd_transcoder_inspect(int argc, char **argv, const char *cmd);

int cmd_inspect(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "keys")) return run_keys(argc - 1, argv + 1, NULL);
    if (argc >= 2 && !strcmp(argv[1], "gates")) return run_gates(argc - 1, argv + 1, NULL);
    int help = 0;
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--transcoder") || !strncmp(argv[i], "--transcoder=", 13))
            return cmd_transcoder_inspect(argc, argv, "inspect");
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        help |= !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h");
    int rc = run_tokens(argc, argv); /* no arguments: "MODEL missing" */
    if (help && rc == 0) { /* the subcommands' flags too: one page for the command */
        run_keys(0, NULL, stdout);
        run_gates(0, NULL, stdout);
    }
    return rc;
}
