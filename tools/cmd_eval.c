/* cmd_eval.c -- `ffn eval`: perplexity of MODEL over a text file, and with
 * --reference the KL divergence and top-1 agreement of its next-token
 * distributions against another model's (include/ffn/eval.h). */
#include "cli.h"
#include "ffn/checkpoint.h"
#include "ffn/eval.h"
#include "ffn/vocab.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const CMD = "eval";

static const char about[] =
"Reads FILE (UTF-8 text), encodes it with the vocabulary (--tokenizer, else\n"
"the one beside MODEL, else the one beside --reference: a GGUF's own\n"
"vocabulary is not read yet) and reports MODEL's perplexity over it.\n"
"\n"
"Windows: W tokens (--window, default the context) starting every S tokens\n"
"(--stride, default W/2); each window is one forward from position 0, and\n"
"scores only the predictions no earlier window scored, so every token but\n"
"the first is scored once, after at least W - S tokens of context (S = W:\n"
"independent chunks, whose first tokens are not scored).  No BOS is added.\n"
"\n"
"With --reference MODEL2 (e.g. the fp32 model a quantized MODEL came from),\n"
"also, over the same positions: KL(reference || model) of the next-token\n"
"distributions (mean, 99th percentile, maximum; nats), the fraction of\n"
"positions where both models' most likely token agree, and the reference's\n"
"perplexity; the measures llama.cpp's `perplexity --kl-divergence` reports.\n";

/* the examples, their type read from the type table */
static const char epilog_fmt[] =
"examples:\n"
"  ffn eval my-run --data valid.txt\n"
"  ffn quantize my-run --dtype %s --out m-%s.gguf\n"
"  ffn eval m-%s.gguf --data valid.txt --reference my-run --json\n";

typedef struct progress {
    int tty;
} progress;

static void on_window(void *user, int64_t w, int64_t n) {
    const progress *p = user;
    if (!p->tty || (w != n && w % 16 != 0)) return;
    fprintf(stderr, "\rffn eval: window %lld of %lld", (long long)w, (long long)n);
    if (w == n) fprintf(stderr, "\n");
}

/* A whole regular text file. */
static int read_text(const char *path, char **out, size_t *len) {
    struct stat sb;
    if (stat(path, &sb) != 0) {
        cli_error(CMD, "--data %s: %s", path, strerror(errno));
        return 1;
    }
    if (!S_ISREG(sb.st_mode)) {
        cli_error(CMD, "--data %s: not a regular file", path);
        return 1;
    }
    FILE *f = fopen(path, "rb");
    char *buf = f ? malloc((size_t)sb.st_size + 1) : NULL;
    size_t got = buf ? fread(buf, 1, (size_t)sb.st_size, f) : 0;
    if (f) fclose(f);
    if (!buf || got != (size_t)sb.st_size) {
        cli_error(CMD, "--data %s: cannot read it", path);
        free(buf);
        return 1;
    }
    buf[got] = '\0';
    *out = buf;
    *len = got;
    return 0;
}

/* `"key": v`, or `"key": null, "key_reason": "..."` when v is not finite
 * (an overflow in the model's activations gives a NaN or infinite loss). */
static void json_num(const char *key, double v, int last) {
    printf("  \"%s\": %s", key, cli_json_num(v, "%.17g"));
    if (!isfinite(v))
        printf(",\n  \"%s_reason\": \"not finite (%s): the model's log-probabilities overflowed "
               "or are NaN\"", key, cli_nonfinite_name(v));
    printf("%s\n", last ? "" : ",");
}

int cmd_eval(int argc, char **argv) {
    const char *model_path = NULL, *data = NULL, *ref_path = NULL, *tok_path = NULL;
    int64_t window = 0, stride = 0, max_tokens = 0, threads = 0;
    int json = 0;
    const cli_opt opts[] = {
        {.name = "--data", .type = CLI_PATH, .dst = &data, .metavar = "FILE",
         .help = "the UTF-8 text to evaluate on (required)", .required = 1},
        {.name = "--reference", .type = CLI_PATH, .dst = &ref_path, .metavar = "MODEL2",
         .help = "a model to compare next-token distributions with (same vocabulary)"},
        {.name = "--tokenizer", .type = CLI_PATH, .dst = &tok_path, .metavar = "FILE",
         .def = "the vocabulary beside MODEL, else beside MODEL2", .help = "the vocabulary"},
        {.name = "--window", .type = CLI_INT, .dst = &window, .metavar = "T", .imin = 2,
         .imax = 1 << 24, .def = "the context length", .help = "positions per window"},
        {.name = "--stride", .type = CLI_INT, .dst = &stride, .metavar = "S", .imin = 1,
         .imax = 1 << 24, .def = "half the window", .help = "tokens between window starts (<= T)"},
        {.name = "--max-tokens", .type = CLI_INT, .dst = &max_tokens, .metavar = "N", .imin = 2,
         .imax = INT64_MAX, .help = "read at most N tokens of FILE"},
        CLI_OPT_JSON(&json, "one JSON object on stdout: tokens, scored, window, stride, windows, "
                     "nll, ppl, and with --reference ref_nll, ref_ppl, kl_mean, kl_p99, kl_max, "
                     "top1_agree"),
        CLI_OPT_THREADS(&threads),
        {0}};
    const cli_pos pos[] = {CLI_POS_MODEL(&model_path), {0}};
    const char *ex = cli_ggml_examples().super;
    char epilog[sizeof epilog_fmt + 64];
    snprintf(epilog, sizeof epilog, epilog_fmt, ex, ex, ex);
    const cli_spec spec = {.cmd = CMD,
                           .synopsis = "MODEL --data FILE [--reference MODEL2] [--json] [options]",
                           .about = about, .epilog = epilog, .opts = opts, .pos = pos};
    int rc;
    if (cli_parse(&spec, argc, argv, &rc)) return rc;
    if (window > 0 && stride > window) return cli_usage_error(CMD, "--stride %lld is larger than --window %lld",
                                                              (long long)stride, (long long)window);
    ffn_model_config cfg, rcfg;
    ffn_checkpoint_info info, rinfo;
    ffn_status st = ffn_checkpoint_read_config_any(model_path, &cfg, &info);
    if (st) return cli_fail(CMD, st);
    if (ref_path && (st = ffn_checkpoint_read_config_any(ref_path, &rcfg, &rinfo))) return cli_fail(CMD, st);
    if (ref_path && rcfg.vocab_size != cfg.vocab_size) {
        cli_error(CMD, "MODEL has a vocabulary of %lld tokens, --reference %s %lld: they cannot be "
                  "compared", (long long)cfg.vocab_size, ref_path, (long long)rcfg.vocab_size);
        return CLI_EXIT_FAIL;
    }
    const char *tp = tok_path ? tok_path : info.tokenizer_path[0] ? info.tokenizer_path
                   : ref_path && rinfo.tokenizer_path[0] ? rinfo.tokenizer_path : NULL;
    if (!tp) {
        cli_error(CMD, "%s: no vocabulary found beside the model%s; give --tokenizer FILE", model_path,
                  ref_path ? " or the reference" : "");
        return CLI_EXIT_FAIL;
    }
    ffn_vocab *voc = NULL;
    if ((st = ffn_vocab_load(tp, cfg.vocab_size, &voc))) return cli_fail(CMD, st);
    char *text = NULL;
    size_t len = 0;
    int32_t *ids = NULL;
    int64_t n = 0;
    if (read_text(data, &text, &len)) {
        ffn_vocab_free(voc);
        return CLI_EXIT_FAIL;
    }
    st = ffn_vocab_encode(voc, text, len, 0, &ids, &n);
    free(text);
    ffn_vocab_free(voc);
    if (st) return cli_fail(CMD, st);
    if (max_tokens > 0 && n > max_tokens) n = max_tokens;
    if (n < 2) {
        free(ids);
        cli_error(CMD, "--data %s: %lld tokens, at least 2 are needed", data, (long long)n);
        return CLI_EXIT_FAIL;
    }
    int64_t ctx_len = cfg.max_position_embeddings;
    if (info.context_cap > 0 && info.context_cap < ctx_len) ctx_len = info.context_cap;
    if (ref_path && rcfg.max_position_embeddings < ctx_len) ctx_len = rcfg.max_position_embeddings;
    if (window > ctx_len) {
        free(ids);
        cli_error(CMD, "--window %lld is longer than the context of %lld", (long long)window, (long long)ctx_len);
        return CLI_EXIT_USAGE;
    }
    int64_t W = window > 0 ? window : ctx_len;
    if (W > n) W = n;
    ffn_ctx *ctx = NULL;
    if (cli_make_ctx(CMD, threads, &ctx)) {
        free(ids);
        return CLI_EXIT_FAIL;
    }
    ffn_model_options mo = {.max_batch = 1, .max_seq = W, .low_precision = 1}; /* as ffn run computes */
    ffn_model *m = NULL, *r = NULL;
    st = ffn_checkpoint_load_any(ctx, model_path, &mo, &m, &info);
    if (st == FFN_OK && ref_path) st = ffn_checkpoint_load_any(ctx, ref_path, &mo, &r, &rinfo);
    ffn_eval_result res;
    progress pr = {cli_progress_tty()};
    if (st == FFN_OK) {
        ffn_eval_options eo;
        ffn_eval_options_default(&eo);
        eo.window = W;
        eo.stride = stride;
        eo.progress = on_window;
        eo.progress_user = &pr;
        st = ffn_eval_run(m, r, ids, n, &eo, &res);
    }
    free(ids);
    ffn_model_free(m);
    ffn_model_free(r);
    ffn_ctx_free(ctx);
    if (st) return cli_fail(CMD, st);
    if (json) {
        printf("{\n  \"model\": ");
        cli_json_string(stdout, model_path);
        printf(",\n  \"data\": ");
        cli_json_string(stdout, data);
        if (ref_path) {
            printf(",\n  \"reference\": ");
            cli_json_string(stdout, ref_path);
        }
        printf(",\n  \"tokens\": %lld,\n  \"scored\": %lld,\n  \"window\": %lld,\n  \"stride\": %lld,\n"
               "  \"windows\": %lld,\n", (long long)res.n_tokens, (long long)res.n_scored,
               (long long)res.window, (long long)res.stride, (long long)res.n_windows);
        json_num("nll", res.nll, 0);
        json_num("ppl", res.ppl, !ref_path);
        if (ref_path) {
            json_num("ref_nll", res.ref_nll, 0);
            json_num("ref_ppl", res.ref_ppl, 0);
            json_num("kl_mean", res.kl_mean, 0);
            json_num("kl_p99", res.kl_p99, 0);
            json_num("kl_max", res.kl_max, 0);
            json_num("top1_agree", res.top1_agree, 1);
        }
        printf("}\n");
        return 0;
    }
    printf("ffn eval: %s on %s\n", model_path, data);
    printf("  %lld tokens, windows of %lld every %lld (%lld windows), %lld predictions scored\n",
           (long long)res.n_tokens, (long long)res.window, (long long)res.stride,
           (long long)res.n_windows, (long long)res.n_scored);
    printf("  perplexity %.4f (mean negative log-likelihood %.5f nats)\n", res.ppl, res.nll);
    if (ref_path) {
        printf("  reference %s: perplexity %.4f (%.5f nats)\n", ref_path, res.ref_ppl, res.ref_nll);
        printf("  KL(reference || model): mean %.6f, 99th percentile %.6f, max %.6f nats\n",
               res.kl_mean, res.kl_p99, res.kl_max);
        printf("  top-1 agreement %.2f%%\n", 100.0 * res.top1_agree);
    }
    return 0;
}
