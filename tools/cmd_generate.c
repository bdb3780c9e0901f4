/* cmd_generate.c -- `ffn generate`: load a checkpoint written by `ffn train`
 * and stream text from it (KV cache; greedy or temperature + top-p). */
#include "cli.h"
#include "ffn/train.h"

#include <stdlib.h>
#include <string.h>

static const char *const CMD = "generate";

static const char about[] =
"Loads a checkpoint directory written by `ffn train` (config.json,\n"
"model.safetensors, tokenizer.txt -- or the llama2.c tokenizer.bin of a model\n"
"fine-tuned with `ffn train --init`) and continues the prompt, printing the\n"
"prompt and then each new token on stdout as soon as it is sampled.  The model\n"
"runs one token at a time with a KV cache; when the context (the model's\n"
"max_position_embeddings) fills, the last half is re-read and generation\n"
"goes on.  The sampling defaults are those of `ffn run`.\n"
"MODEL may also be a GGUF file: its matrices stay in their type, read from the\n"
"mapped file (as `ffn run` loads it), and its tokenizer.ggml.* vocabulary encodes\n"
"the prompt.\n";

static const char epilog[] =
"example:\n"
"  ffn generate ffn-model --prompt 'Mary gave John' --steps 60 --temperature 0\n";

/* ffn_generate_text's token callback over the CLI's text stream */
static int emit_token(int32_t id, const char *bytes, size_t len, void *user) {
    (void)id;
    return cli_text_piece(bytes, len, user);
}

int cmd_generate(int argc, char **argv) {
    ffn_generate_options g;
    ffn_generate_options_default(&g);
    const char *model_dir = NULL, *model_flag = NULL, *prompt = "";
    int64_t threads = 0, steps = g.steps, seed = (int64_t)g.seed;
    int no_prompt = 0;
    const cli_opt opts[] = {
        {.name = "--model", .type = CLI_PATH, .dst = &model_flag, .metavar = "DIR",
         .help = "the checkpoint directory (the same as MODEL)"},
        {.name = "--prompt", .type = CLI_STR, .dst = &prompt, .metavar = "TEXT",
         .def = "none: start from a newline",
         .help = "text to continue; symbols outside the vocabulary read as <unk>: a warning "
                 "on stderr says how many and shows the prompt as the model reads it"},
        CLI_OPT_GEN_STEPS(&steps),
        CLI_OPT_TEMPERATURE(&g.temperature),
        CLI_OPT_TOP_P(&g.top_p),
        CLI_OPT_SEED(&seed, "the sampling seed; same seed, same text"),
        {.name = "--no-prompt", .type = CLI_FLAG, .dst = &no_prompt,
         .help = "print only the generated text"},
        CLI_OPT_THREADS(&threads),
        {0}};
    const cli_pos pos[] = {
        {.name = "MODEL", .dst = &model_dir,
         .help = "a checkpoint directory written by `ffn train` (or give --model DIR), or a "
                 "GGUF file"},
        {0}};
    const cli_spec spec = {.cmd = CMD, .synopsis = "MODEL [--prompt TEXT] [options]\n"
                           "       ffn generate --model DIR [--prompt TEXT] [options]",
                           .about = about, .epilog = epilog, .opts = opts, .pos = pos};
    int rc;
    if (cli_parse(&spec, argc, argv, &rc)) return rc;
    if (model_dir && model_flag && strcmp(model_dir, model_flag))
        return cli_usage_error(CMD, "two models given: MODEL '%s' and --model '%s'", model_dir,
                               model_flag);
    if (!model_dir) model_dir = model_flag;
    if (!model_dir) {
        cli_error(CMD, "a checkpoint directory (written by ffn train) is needed: MODEL or "
                  "--model DIR is required");
        return CLI_EXIT_USAGE;
    }
    g.steps = steps;
    g.seed = (uint64_t)seed;
    int print_prompt = !no_prompt;
    ffn_ctx *ctx = NULL;
    if (cli_make_ctx(CMD, threads, &ctx)) return CLI_EXIT_FAIL;
    ffn_model *model = NULL;
    ffn_vocab *voc = NULL;
    ffn_status st;
    if (ffn_checkpoint_is_gguf(model_dir)) { /* its vocabulary, its matrices as they lie */
        /* the cache grows to what the run uses (ffn_generate_tokens), not to a context
         * the file declares */
        ffn_model_options mo = {.max_batch = 1, .max_seq = 1, .low_precision = 1};
        ffn_model_config cfg;
        st = ffn_checkpoint_read_config_any(model_dir, &cfg, NULL);
        if (st == FFN_OK) st = ffn_vocab_load(model_dir, cfg.vocab_size, &voc);
        if (st == FFN_OK) st = ffn_checkpoint_load_any(ctx, model_dir, &mo, &model, NULL);
    } else {
        st = ffn_run_dir_load_vocab(ctx, model_dir, &model, &voc);
    }
    cli_text_out s = {.last_newline = 1};
    if (st == FFN_OK) {
        /* The model reads symbols its vocabulary lacks as <unk>: say so on
         * stderr, with the prompt as the model reads it (stdout keeps the
         * prompt as given). */
        char *seen = NULL;
        int32_t *pids = NULL;
        int64_t pn = 0, punk = 0;
        const int32_t unk = ffn_vocab_specials(voc).unk;
        if (*prompt && ffn_vocab_encode(voc, prompt, strlen(prompt), 0, &pids, &pn) == FFN_OK)
            for (int64_t i = 0; i < pn; i++) punk += pids[i] == unk;
        if (punk > 0) {
            if (ffn_vocab_decode(voc, -1, pids, pn, &seen, NULL) != FFN_OK) seen = NULL;
            fprintf(stderr, "ffn %s: warning: %lld of the prompt's %lld tokens (%.0f%%) are not in "
                    "the model's vocabulary and read as <unk>; the model reads: %.200s\n", CMD,
                    (long long)punk, (long long)pn, 100.0 * (double)punk / (double)pn,
                    seen ? seen : "?");
        }
        free(pids);
        free(seen);
        if (print_prompt && *prompt) cli_text_piece(prompt, strlen(prompt), &s);
        const ffn_generate_callbacks cb = {.on_token = emit_token, .user = &s};
        st = ffn_generate_text(model, voc, prompt, &g, &cb);
        if (s.bytes > 0 && !s.last_newline) cli_text_piece("\n", 1, &s);
    }
    rc = st == FFN_OK ? 0 : cli_fail(CMD, st);
    ffn_model_free(model);
    ffn_vocab_free(voc);
    ffn_ctx_free(ctx);
    return rc;
}
