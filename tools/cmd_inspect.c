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
#include <stdlib.h>
#include <string.h>

static const char *const CMD = "inspect";

/* ---- usage ------------------------------------------------------------------------ */

static void usage(FILE *f) {
    fprintf(f,
"usage: ffn inspect MODEL (--prompt TEXT | --ids \"ID ...\") [options]\n"
"       ffn inspect keys MODEL --data FILE [--layer L] [options]\n"
"       ffn inspect gates MODEL --corpus [en|zh] [options]\n"
"\n"
"Looks inside the feed-forward layers of a trained model.  An FFN is a sum\n"
"of neurons, FFN(x) = sum_i m_i v_i (+ bias): m_i is neuron i's activation,\n"
"act(gate_i.x) * (up_i.x) in a gated layer (SwiGLU, GEGLU, ...) or act(up_i.x)\n"
"in a dense one, and v_i is column i of down_proj, its 'value'.\n"
"\n"
"MODEL is a checkpoint directory written by `ffn train` (or, where supported,\n"
"a Hugging Face directory or llama2.c .bin with its tokenizer beside it).\n"
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
"  --prompt TEXT       text, encoded with the model's tokenizer\n"
"  --ids \"ID ...\"      token ids instead (spaces or commas)\n"
"  --layer L           one layer (default: every layer)\n"
"  --top K             neurons per token (default 5)\n"
"  --promoted P        promoted tokens per neuron (default 5)\n"
"\n"
"ffn inspect keys MODEL --data FILE   after Geva et al. (2021), 'Transformer\n"
"  feed-forward layers are key-value memories': runs the model over FILE in\n"
"  consecutive windows of the context length and, for every neuron, keeps the\n"
"  positions where m_i is largest (its trigger examples, with their prefix\n"
"  text) and the tokens its value vector promotes.  The layer's agreement rate\n"
"  is the share of neurons whose top promoted token is the token that follows\n"
"  their top trigger example.  The paper found it near zero in low layers and\n"
"  rising in upper ones.\n"
"  --data FILE         UTF-8 text (required)\n"
"  --layer L           one layer (default: every layer, one rate per layer)\n"
"  --top T             trigger examples per neuron (default 25)\n"
"  --neurons N         neurons listed per layer (default 8 in the table, all\n"
"                      with --json; the rate always counts every neuron)\n"
"  --show S            trigger examples printed per neuron (default 3)\n"
"  --promoted P        promoted tokens per neuron (default 5)\n"
"  --window T          positions per window (default: the context length)\n"
"  --max-tokens N      read at most N tokens of FILE (default 100000)\n"
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
"  --corpus [en|zh]    the corpus language (default en)\n"
"  --sentences N       sentences generated (default 500; a different seed\n"
"                      from training's)\n"
"  --split words|tokens|sentences   what is held out from the probe's training:\n"
"                      words: every token of unseen word types (default with a\n"
"                      word tokenizer); tokens: every occurrence of unseen token\n"
"                      ids (default with char and byte tokenizers); sentences:\n"
"                      the last sentences.  With words or tokens the probe must\n"
"                      generalise to tokens it never saw, so it cannot succeed by\n"
"                      memorising token identity, and a random model fails (with\n"
"                      sentences even a random model's probe beats the baseline)\n"
"  --heldout F         share held out (default 0.3)\n"
"  --epochs N          SGD passes (default 20)\n"
"  --top-neurons K     selective neurons per class (default 3)\n"
"  With an English char or byte tokenizer, the characters around a token carry\n"
"  some class cues even in an untrained model (a capital letter, a period), so\n"
"  the fair control there is the same probe on a randomly initialised model.\n"
"\n"
"common options:\n"
"  --json              the full data as one JSON object on stdout\n"
"  --threads N         threads (default: FFN_NUM_THREADS or all cores)\n"
"\n"
"examples:\n"
"  ffn train --steps 300 --out m\n"
"  ffn inspect m --prompt 'Mary gave John the apple' --layer 1 --top 5\n"
"  ffn corpus --sentences 2000 --seed 99 > text.txt   (text the model did not see)\n"
"  ffn inspect keys m --data text.txt\n"
"  ffn inspect gates m --corpus en\n");
}

/* ---- the model and its vocabulary --------------------------------------------------- */

typedef struct loaded {
    ffn_ctx *ctx;
    ffn_model *model;
    ffn_tokenizer *tok;
#ifdef HAVE_CHECKPOINT_H
    ffn_llama2c_tokenizer *l2tok;
#endif
} loaded;

static void loaded_free(loaded *ld) {
    ffn_model_free(ld->model);
    ffn_tokenizer_free(ld->tok);
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
    st = ffn_checkpoint_load_model(ld->ctx, path, NULL, &ld->model, &info);
    if (!st && info.tokenizer_path[0]) {
        int64_t V = ffn_model_get_config(ld->model)->vocab_size;
        st = info.tokenizer_is_llama2c ? ffn_llama2c_tokenizer_load(info.tokenizer_path, V, &ld->l2tok)
                                       : ffn_tokenizer_load(info.tokenizer_path, &ld->tok);
    }
#else
    st = ffn_run_dir_load(ld->ctx, path, &ld->model, &ld->tok);
#endif
    if (st) return cli_fail(CMD, st);
    return 0;
}

static int has_vocab(const loaded *ld) {
#ifdef HAVE_CHECKPOINT_H
    if (ld->l2tok) return 1;
#endif
    return ld->tok != NULL;
}

static ffn_status encode(const loaded *ld, const char *text, int32_t **ids, int64_t *n) {
#ifdef HAVE_CHECKPOINT_H
    if (ld->l2tok) return ffn_llama2c_tokenizer_encode(ld->l2tok, text, strlen(text), 1, 0, ids, n);
#endif
    return ffn_tokenizer_encode(ld->tok, text, strlen(text), ids, NULL, n, NULL);
}

/* The bytes of token id (after prev for llama2.c vocabularies), or "". */
static const char *piece(const loaded *ld, int32_t prev, int32_t id, size_t *len, char *b1) {
    *len = 0;
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

static void json_num(FILE *f, double x) {
    if (isfinite(x)) fprintf(f, "%.6g", x);
    else fputs("null", f);
}

/* ---- ffn inspect MODEL ----------------------------------------------------------------- */

static int parse_ids(const char *s, int32_t **ids, int64_t *n) {
    size_t len = strlen(s);
    *ids = malloc((len / 2 + 2) * sizeof **ids);
    *n = 0;
    if (!*ids) return 0;
    const char *p = s;
    while (*p) {
        while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n') p++;
        if (!*p) break;
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0 || v > INT32_MAX) {
            cli_error(CMD, "--ids: expected non-negative integers separated by spaces or "
                      "commas, got '%s'", s);
            return 0;
        }
        (*ids)[(*n)++] = (int32_t)v;
        p = end;
    }
    if (*n == 0) {
        cli_error(CMD, "--ids: no token ids in '%s'", s);
        return 0;
    }
    return 1;
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
               "cosine %.3f\n\n", (long long)l, (long long)r->top_k,
               se / (double)r->n_tokens, sc / (double)r->n_tokens);
    }
    free(a.s);
    free(b.s);
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
            printf(", \"partial_norm\": ");
            json_num(stdout, tk->partial_norm);
            printf(", \"explained\": ");
            json_num(stdout, tk->explained);
            printf(", \"cosine\": ");
            json_num(stdout, tk->cosine);
            printf(", \"residual\": ");
            json_num(stdout, tk->residual);
            printf(", \"experts\": [");
            for (int64_t j = 0; j < tk->n_experts; j++) {
                printf("%s{\"expert\": %d, \"weight\": ", j ? ", " : "", tk->experts[j]);
                json_num(stdout, tk->expert_weights[j]);
                printf("}");
            }
            printf("], \"neurons\": [");
            for (int64_t j = 0; j < tk->n_top; j++) {
                const ffn_inspect_neuron *nu = &tk->top[j];
                printf("%s\n    {\"expert\": %lld, \"index\": %lld, \"gate_pre\": ", j ? "," : "",
                       (long long)nu->expert, (long long)nu->index);
                json_num(stdout, nu->gate_pre);
                printf(", \"gate\": ");
                json_num(stdout, nu->gate);
                printf(", \"up\": ");
                json_num(stdout, nu->up);
                printf(", \"product\": ");
                json_num(stdout, nu->product);
                printf(", \"weight\": ");
                json_num(stdout, nu->weight);
                printf(", \"contribution\": ");
                json_num(stdout, nu->contribution);
                printf(", \"value_norm\": ");
                json_num(stdout, nu->value_norm);
                printf(", \"promoted\": [");
                for (int64_t p = 0; p < r->n_promoted; p++) {
                    if (nu->promoted[p] < 0) continue;
                    printf("%s{\"id\": %d, \"text\": ", p ? ", " : "", nu->promoted[p]);
                    cli_json_string(stdout, tok_text(ld, -1, nu->promoted[p], &a));
                    printf(", \"logit\": ");
                    json_num(stdout, nu->promoted_logit[p]);
                    printf("}");
                }
                printf("]}");
            }
            printf("]}");
        }
        printf("]}");
    }
    printf("]}\n");
    free(a.s);
}

static int run_tokens(int argc, char **argv) {
    const char *model_path = NULL, *prompt = NULL, *ids_s = NULL;
    ffn_inspect_options o;
    ffn_inspect_options_default(&o);
    o.top_k = 5;
    int json = 0, threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int64_t n;
        int r;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if ((r = cli_flag(CMD, argc, argv, &i, "--prompt", &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            prompt = v;
        } else if ((r = cli_flag(CMD, argc, argv, &i, "--ids", &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            ids_s = v;
        } else if ((r = cli_flag(CMD, argc, argv, &i, "--layer", &v))) {
            if (r < 0 || !cli_parse_i64(CMD, "--layer", v, 0, 1 << 20, &n)) return CLI_EXIT_USAGE;
            o.layer = n;
        } else if ((r = cli_flag(CMD, argc, argv, &i, "--top", &v))) {
            if (r < 0 || !cli_parse_i64(CMD, "--top", v, 1, 100000, &n)) return CLI_EXIT_USAGE;
            o.top_k = n;
        } else if ((r = cli_flag(CMD, argc, argv, &i, "--promoted", &v))) {
            if (r < 0 || !cli_parse_i64(CMD, "--promoted", v, 1, 1000, &n)) return CLI_EXIT_USAGE;
            o.n_promoted = n;
        } else if ((r = cli_flag(CMD, argc, argv, &i, "--threads", &v))) {
            if (r < 0 || !cli_parse_i64(CMD, "--threads", v, 0, 4096, &n)) return CLI_EXIT_USAGE;
            threads = (int)n;
        } else if (argv[i][0] == '-' || model_path) {
            cli_error(CMD, "unknown option or extra argument '%s' (see ffn inspect --help)", argv[i]);
            return CLI_EXIT_USAGE;
        } else {
            model_path = argv[i];
        }
    }
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
    if (ids_s && !parse_ids(ids_s, &ids, &n)) {
        free(ids);
        return CLI_EXIT_USAGE;
    }
    loaded ld;
    int rc = load(model_path, threads, &ld);
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

static int run_keys(int argc, char **argv) {
    const char *model_path = NULL, *data = NULL;
    ffn_keys_options o;
    ffn_keys_options_default(&o);
    int64_t layer = -1, neurons = -1, show = 3, max_tokens = 100000;
    int json = 0, threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int64_t n;
        int r;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if ((r = cli_flag(CMD, argc, argv, &i, "--data", &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            data = v;
        } else if ((r = cli_flag(CMD, argc, argv, &i, "--layer", &v))) {
            if (r < 0 || !cli_parse_i64(CMD, "--layer", v, 0, 1 << 20, &n)) return CLI_EXIT_USAGE;
            layer = n;
        } else if ((r = cli_flag(CMD, argc, argv, &i, "--top", &v))) {
            if (r < 0 || !cli_parse_i64(CMD, "--top", v, 1, 10000, &n)) return CLI_EXIT_USAGE;
            o.top_examples = n;
        } else if ((r = cli_flag(CMD, argc, argv, &i, "--neurons", &v))) {
            if (r < 0 || !cli_parse_i64(CMD, "--neurons", v, 0, INT64_MAX, &n)) return CLI_EXIT_USAGE;
            neurons = n;
        } else if ((r = cli_flag(CMD, argc, argv, &i, "--show", &v))) {
            if (r < 0 || !cli_parse_i64(CMD, "--show", v, 0, 10000, &n)) return CLI_EXIT_USAGE;
            show = n;
        } else if ((r = cli_flag(CMD, argc, argv, &i, "--promoted", &v))) {
            if (r < 0 || !cli_parse_i64(CMD, "--promoted", v, 1, 1000, &n)) return CLI_EXIT_USAGE;
            o.n_promoted = n;
        } else if ((r = cli_flag(CMD, argc, argv, &i, "--window", &v))) {
            if (r < 0 || !cli_parse_i64(CMD, "--window", v, 1, 1 << 24, &n)) return CLI_EXIT_USAGE;
            o.window = n;
        } else if ((r = cli_flag(CMD, argc, argv, &i, "--max-tokens", &v))) {
            if (r < 0 || !cli_parse_i64(CMD, "--max-tokens", v, 1, INT64_MAX, &n)) return CLI_EXIT_USAGE;
            max_tokens = n;
        } else if ((r = cli_flag(CMD, argc, argv, &i, "--threads", &v))) {
            if (r < 0 || !cli_parse_i64(CMD, "--threads", v, 0, 4096, &n)) return CLI_EXIT_USAGE;
            threads = (int)n;
        } else if (argv[i][0] == '-' || model_path) {
            cli_error(CMD, "unknown option or extra argument '%s' (see ffn inspect --help)", argv[i]);
            return CLI_EXIT_USAGE;
        } else {
            model_path = argv[i];
        }
    }
    if (!model_path || !data) {
        cli_error(CMD, "usage: ffn inspect keys MODEL --data FILE (see ffn inspect --help)");
        return CLI_EXIT_USAGE;
    }
    if (neurons < 0) neurons = json ? 0 : 8;
    o.max_neurons = neurons;
    loaded ld;
    int rc = load(model_path, threads, &ld);
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
                printf(", \"chance\": ");
                json_num(stdout, kl->chance);
                printf(", \"reported\": [");
            } else {
                printf("\n== layer %lld: %lld neurons ==\n", (long long)kl->layer,
                       (long long)kl->n_neurons);
            }
            for (int64_t i = 0; i < kl->n_reported; i++) {
                const ffn_key_example *ex = kl->examples + i * kl->n_examples;
                const int32_t *pr = kl->promoted + i * P;
                if (json) {
                    printf("%s\n  {\"neuron\": %lld, \"expert\": %lld, \"index\": %lld, "
                           "\"next_token\": %d, \"promoted\": [", i ? "," : "", (long long)i,
                           kl->fe == kl->n_neurons ? -1LL : (long long)(i / kl->fe),
                           (long long)(i % kl->fe), kl->next_token[i]);
                    for (int64_t p = 0; p < P; p++) {
                        printf("%s{\"id\": %d, \"text\": ", p ? ", " : "", pr[p]);
                        cli_json_string(stdout, tok_text(&ld, -1, pr[p], &a));
                        printf(", \"logit\": ");
                        json_num(stdout, kl->promoted_logit[i * P + p]);
                        printf("}");
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

static int run_gates(int argc, char **argv) {
    const char *model_path = NULL;
    ffn_probe_options o;
    ffn_probe_options_default(&o);
    o.top_selective = 3;
    int json = 0, threads = 0, corpus = 0, split_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int64_t n;
        double x;
        int r;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--corpus")) {
            corpus = 1;
            if (i + 1 < argc && argv[i + 1][0] != '-' && model_path) {
                if (ffn_lang_parse(argv[i + 1], &o.lang)) {
                    cli_error(CMD, "--corpus: %s", ffn_last_error());
                    return CLI_EXIT_USAGE;
                }
                i++;
            } else if (i + 2 < argc && argv[i + 1][0] != '-' && !model_path &&
                       !ffn_lang_parse(argv[i + 1], &o.lang)) {
                i++; /* `--corpus en MODEL` */
            }
        } else if (!strncmp(argv[i], "--corpus=", 9)) {
            corpus = 1;
            if (ffn_lang_parse(argv[i] + 9, &o.lang)) {
                cli_error(CMD, "--corpus: %s", ffn_last_error());
                return CLI_EXIT_USAGE;
            }
        } else if ((r = cli_flag(CMD, argc, argv, &i, "--sentences", &v))) {
            if (r < 0 || !cli_parse_i64(CMD, "--sentences", v, 2, 10000000, &n)) return CLI_EXIT_USAGE;
            o.sentences = n;
        } else if ((r = cli_flag(CMD, argc, argv, &i, "--split", &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            split_given = 1;
            if (!strcmp(v, "words")) o.split = FFN_PROBE_SPLIT_WORDS;
            else if (!strcmp(v, "sentences")) o.split = FFN_PROBE_SPLIT_SENTENCES;
            else if (!strcmp(v, "tokens")) o.split = FFN_PROBE_SPLIT_TOKENS;
            else {
                cli_error(CMD, "--split: expected words, tokens or sentences, got '%s'", v);
                return CLI_EXIT_USAGE;
            }
        } else if ((r = cli_flag(CMD, argc, argv, &i, "--heldout", &v))) {
            if (r < 0 || !cli_parse_f64(CMD, "--heldout", v, 0.01, 0.99, &x)) return CLI_EXIT_USAGE;
            o.heldout_fraction = x;
        } else if ((r = cli_flag(CMD, argc, argv, &i, "--epochs", &v))) {
            if (r < 0 || !cli_parse_i64(CMD, "--epochs", v, 0, 100000, &n)) return CLI_EXIT_USAGE;
            o.epochs = n;
        } else if ((r = cli_flag(CMD, argc, argv, &i, "--top-neurons", &v))) {
            if (r < 0 || !cli_parse_i64(CMD, "--top-neurons", v, 1, 1000, &n)) return CLI_EXIT_USAGE;
            o.top_selective = n;
        } else if ((r = cli_flag(CMD, argc, argv, &i, "--threads", &v))) {
            if (r < 0 || !cli_parse_i64(CMD, "--threads", v, 0, 4096, &n)) return CLI_EXIT_USAGE;
            threads = (int)n;
        } else if (argv[i][0] == '-' || model_path) {
            cli_error(CMD, "unknown option or extra argument '%s' (see ffn inspect --help)", argv[i]);
            return CLI_EXIT_USAGE;
        } else {
            model_path = argv[i];
        }
    }
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
            printf(", \"corpus\": \"%s\", \"sentences\": %lld, \"split\": \"%s\", \"heldout\": %g, "
                   "\"train_tokens\": %lld, \"heldout_tokens\": %lld, \"majority_class\": \"%s\", "
                   "\"baseline\": ", ffn_lang_name(o.lang), (long long)o.sentences,
                   ffn_probe_split_name(o.split), o.heldout_fraction, (long long)res->n_train,
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
                printf(", \"acc_input\": ");
                json_num(stdout, pl->acc_input);
                printf(", \"train_acc_gate\": ");
                json_num(stdout, pl->train_acc_gate);
                printf(", \"train_acc_input\": ");
                json_num(stdout, pl->train_acc_input);
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

int cmd_inspect(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "keys")) return run_keys(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "gates")) return run_gates(argc - 1, argv + 1);
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    return run_tokens(argc, argv);
}
