/* cmd_generate.c -- `ffn generate`: load a checkpoint written by `ffn train`
 * and stream text from it (KV cache; greedy or temperature + top-p). */
#include "cli.h"
#include "ffn/train.h"

#include <string.h>

static const char *const CMD = "generate";

static void usage(FILE *f) {
    ffn_generate_options d;
    ffn_generate_options_default(&d);
    fprintf(f,
"usage: ffn generate --model DIR [--prompt TEXT] [options]\n"
"\n"
"Loads a checkpoint directory written by `ffn train` (config.json,\n"
"model.safetensors, tokenizer.txt) and continues the prompt, printing the\n"
"prompt and then each new token on stdout as soon as it is sampled.  The model\n"
"runs one token at a time with a KV cache; when the context (the model's\n"
"max_position_embeddings) fills, the last half is re-read and generation\n"
"goes on.\n"
"\n"
"options:\n"
"  --model DIR        the checkpoint directory (required)\n"
"  --prompt TEXT      text to continue (default: start from a newline)\n"
"  --steps N          tokens to generate (default %lld)\n"
"  --temperature T    0 = greedy (always the most likely token); otherwise\n"
"                     sample from softmax(logits / T) (default %g)\n"
"  --top-p P          sample only from the most likely tokens whose\n"
"                     probabilities add up to P (nucleus; 1 = all; default %g)\n"
"  --seed S           the sampling seed (default %llu); same seed, same text\n"
"  --no-prompt        print only the generated text\n"
"  --threads N        threads (default: FFN_NUM_THREADS or all cores)\n"
"\n"
"example:\n"
"  ffn generate --model ffn-model --prompt 'Mary gave John' --steps 60 --temperature 0\n",
            (long long)d.steps, d.temperature, d.top_p, (unsigned long long)d.seed);
}

typedef struct stream {
    int last_newline;
    int64_t bytes;
} stream;

static int emit(const char *bytes, size_t len, void *user) {
    stream *s = user;
    fwrite(bytes, 1, len, stdout);
    fflush(stdout);
    if (len) s->last_newline = bytes[len - 1] == '\n';
    s->bytes += (int64_t)len;
    return 0;
}

int cmd_generate(int argc, char **argv) {
    ffn_generate_options g;
    ffn_generate_options_default(&g);
    const char *model_dir = NULL, *prompt = "";
    int threads = 0, print_prompt = 1;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int64_t n;
        double x;
        int r;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--no-prompt")) {
            print_prompt = 0;
            continue;
        }
        if ((r = cli_flag(CMD, argc, argv, &i, "--model", &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            model_dir = v;
        } else if ((r = cli_flag(CMD, argc, argv, &i, "--prompt", &v))) {
            if (r < 0) return CLI_EXIT_USAGE;
            prompt = v;
        } else if ((r = cli_flag(CMD, argc, argv, &i, "--steps", &v))) {
            if (r < 0 || !cli_parse_i64(CMD, "--steps", v, 0, 100000000, &n)) return CLI_EXIT_USAGE;
            g.steps = n;
        } else if ((r = cli_flag(CMD, argc, argv, &i, "--temperature", &v))) {
            if (r < 0 || !cli_parse_f64(CMD, "--temperature", v, 0, 100, &x)) return CLI_EXIT_USAGE;
            g.temperature = x;
        } else if ((r = cli_flag(CMD, argc, argv, &i, "--top-p", &v))) {
            if (r < 0 || !cli_parse_f64(CMD, "--top-p", v, 1e-9, 1, &x)) return CLI_EXIT_USAGE;
            g.top_p = x;
        } else if ((r = cli_flag(CMD, argc, argv, &i, "--seed", &v))) {
            if (r < 0 || !cli_parse_i64(CMD, "--seed", v, 0, INT64_MAX, &n)) return CLI_EXIT_USAGE;
            g.seed = (uint64_t)n;
        } else if ((r = cli_flag(CMD, argc, argv, &i, "--threads", &v))) {
            if (r < 0 || !cli_parse_i64(CMD, "--threads", v, 0, 4096, &n)) return CLI_EXIT_USAGE;
            threads = (int)n;
        } else {
            cli_error(CMD, "unknown option '%s' (see ffn generate --help)", argv[i]);
            return CLI_EXIT_USAGE;
        }
    }
    if (!model_dir) {
        cli_error(CMD, "--model DIR is required (a directory written by ffn train)");
        return CLI_EXIT_USAGE;
    }
    ffn_ctx *ctx = NULL;
    if (cli_make_ctx(CMD, threads, &ctx)) return CLI_EXIT_FAIL;
    ffn_model *model = NULL;
    ffn_tokenizer *tok = NULL;
    ffn_status st = ffn_run_dir_load(ctx, model_dir, &model, &tok);
    stream s = {1, 0};
    if (st == FFN_OK) {
        if (print_prompt && *prompt) emit(prompt, strlen(prompt), &s);
        st = ffn_generate(model, tok, prompt, &g, emit, &s);
        if (s.bytes > 0 && !s.last_newline) emit("\n", 1, &s);
    }
    int rc = st == FFN_OK ? 0 : cli_fail(CMD, st);
    ffn_model_free(model);
    ffn_tokenizer_free(tok);
    ffn_ctx_free(ctx);
    return rc;
}
