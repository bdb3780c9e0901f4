/* cmd_export.c -- `ffn export`: write any model ffn loads (an ffn
 * checkpoint, a Hugging Face directory, a llama2.c .bin) as a Hugging Face
 * Llama-layout directory or as a llama2.c checkpoint. */
#include "cli.h"
#include "ffn/checkpoint.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const CMD = "export";

static void usage(FILE *f) {
    fprintf(f,
"usage: ffn export MODEL --out PATH [--format hf|llama2c] [--dtype F32|F16|BF16]\n"
"                  [--force]\n"
"\n"
"Loads MODEL (anything `ffn run` loads: a llama2.c .bin, a Hugging Face\n"
"directory, an ffn checkpoint directory) and writes it in another layout.\n"
"\n"
"  --format hf       (default) a Hugging Face directory PATH: config.json with\n"
"                    HF names (model_type llama; qwen2 when q/k/v have biases;\n"
"                    mixtral or qwen2_moe with experts) and model.safetensors\n"
"                    with HF tensor names.  RoPE follows HF's rotate_half\n"
"                    convention: a model whose RoPE rotates consecutive pairs\n"
"                    (llama2.c) gets its q_proj/k_proj rows permuted per head\n"
"                    (row 2j+h -> h*Dh/2 + j), so HF code computes the same\n"
"                    logits.  The vocabulary found beside MODEL (tokenizer.txt\n"
"                    or tokenizer.bin) is copied along.  The directory is\n"
"                    written beside PATH and swapped in atomically; an existing\n"
"                    PATH must be an empty directory, or a model directory and\n"
"                    --force given (files in it that ffn does not write are\n"
"                    kept).  A source with a sliding\n"
"                    window (mistral) is written with max_position_embeddings =\n"
"                    the window: ffn runs it with full attention up to there.\n"
"  --format llama2c  a llama2.c .bin file PATH (the legacy layout, freq_cis\n"
"                    included; q/k permuted back to consecutive pairs).  Only\n"
"                    gated-SiLU models without biases or experts, with RMSNorm\n"
"                    eps 1e-5 and RoPE theta 10000, fit the format.  Written to\n"
"                    a new PATH.tmp-XXXXXX, fsynced, renamed; an existing PATH\n"
"                    is replaced only with --force.\n"
"  --force           replace an existing PATH (never MODEL itself)\n"
"  --dtype T         weight dtype for --format hf: F32 (exact, default), F16\n"
"                    or BF16 (rounded to nearest even)\n"
"  --threads N       threads (default: FFN_NUM_THREADS or all cores)\n"
"\n"
"examples:\n"
"  ffn export stories260K.bin --out stories-hf\n"
"  ffn export my-ffn-run --out my-model.bin --format llama2c\n");
}

/* --out must never be MODEL itself (the same file or directory, by device
 * and inode, whatever the spelling), and an existing --out is replaced only
 * with --force.  An existing non-empty directory that is not a model
 * directory is refused by the library (never replaced, even with --force). */
static int refuse_out(const char *model, const char *out, int force) {
    struct stat sm, so;
    if (stat(out, &so) != 0) return 0;
    if (stat(model, &sm) == 0 && sm.st_dev == so.st_dev && sm.st_ino == so.st_ino) {
        cli_error(CMD, "--out %s is MODEL %s itself: write the export somewhere else", out, model);
        return 1;
    }
    if (force) return 0;
    if (S_ISDIR(so.st_mode)) {
        char cfg[4096];
        snprintf(cfg, sizeof cfg, "%s/config.json", out);
        if (access(cfg, F_OK) != 0) return 0; /* empty, or refused below as a user's directory */
    }
    cli_error(CMD, "%s already exists: replace it with --force, or choose another --out", out);
    return 1;
}

int cmd_export(int argc, char **argv) {
    const char *model_path = NULL, *out = NULL, *format = "hf", *dtype = "F32";
    int64_t threads = 0;
    int force = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if ((r = cli_flag(CMD, argc, argv, &i, "--out", &v)) < 0) return CLI_EXIT_USAGE;
        if (r > 0) { out = v; continue; }
        if ((r = cli_flag(CMD, argc, argv, &i, "--format", &v)) < 0) return CLI_EXIT_USAGE;
        if (r > 0) { format = v; continue; }
        if ((r = cli_flag(CMD, argc, argv, &i, "--dtype", &v)) < 0) return CLI_EXIT_USAGE;
        if (r > 0) { dtype = v; continue; }
        if ((r = cli_flag(CMD, argc, argv, &i, "--threads", &v)) < 0) return CLI_EXIT_USAGE;
        if (r > 0) {
            if (!cli_parse_i64(CMD, "--threads", v, 0, 4096, &threads)) return CLI_EXIT_USAGE;
            continue;
        }
        if (!strcmp(argv[i], "--force")) { force = 1; continue; }
        if (argv[i][0] == '-' && argv[i][1]) {
            cli_error(CMD, "unknown option '%s' (see ffn export --help)", argv[i]);
            return CLI_EXIT_USAGE;
        }
        if (model_path) {
            cli_error(CMD, "one MODEL expected, got '%s' and '%s'", model_path, argv[i]);
            return CLI_EXIT_USAGE;
        }
        model_path = argv[i];
    }
    if (!model_path || !out) {
        cli_error(CMD, "MODEL and --out PATH are required (see ffn export --help)");
        return CLI_EXIT_USAGE;
    }
    int l2c = !strcmp(format, "llama2c");
    if (!l2c && strcmp(format, "hf")) {
        cli_error(CMD, "--format: expected hf or llama2c, got '%s'", format);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(dtype, "F32") && strcmp(dtype, "F16") && strcmp(dtype, "BF16")) {
        cli_error(CMD, "--dtype: expected F32, F16 or BF16, got '%s'", dtype);
        return CLI_EXIT_USAGE;
    }
    if (l2c && strcmp(dtype, "F32")) {
        cli_error(CMD, "--dtype: the llama2.c format holds fp32 only");
        return CLI_EXIT_USAGE;
    }
    if (refuse_out(model_path, out, force)) return CLI_EXIT_FAIL;
    ffn_ctx *ctx = NULL;
    if (cli_make_ctx(CMD, (int)threads, &ctx)) return CLI_EXIT_FAIL;
    ffn_model *m = NULL;
    ffn_checkpoint_info info;
    ffn_model_options opt = {.max_batch = 1, .max_seq = 1}; /* weights only: the smallest activations */
    ffn_status st = ffn_checkpoint_load_model(ctx, model_path, &opt, &m, &info);
    if (st == FFN_OK) {
        if (l2c) {
            st = ffn_checkpoint_save_llama2c(m, out);
        } else {
            ffn_hf_save_options o = {dtype, info.tokenizer_path[0] ? info.tokenizer_path : NULL,
                                     info.tokenizer_is_llama2c, info.context_cap};
            st = ffn_checkpoint_save_hf(m, out, &o);
        }
    }
    if (st == FFN_OK)
        fprintf(stderr, "ffn export: %s (%s) -> %s (%s)\n", model_path,
                ffn_checkpoint_format_name(info.format), out, l2c ? "llama2.c" : "Hugging Face");
    ffn_model_free(m);
    ffn_ctx_free(ctx);
    return st ? cli_fail(CMD, st) : 0;
}
