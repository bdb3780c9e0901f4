/* cmd_export.c -- `ffn export`: write any model ffn loads (an ffn
 * checkpoint, a Hugging Face directory, a llama2.c .bin, a GGUF file) as a
 * Hugging Face directory in its family's layout, a llama2.c checkpoint or
 * a GGUF file (tools/cmd_quantize.c writes it). */
#include "cli.h"
#include "gguf_out.h"
#include "ffn/checkpoint.h"
#include "ffn/gguf.h"
#include "ffn/vocab.h"

#include <stdlib.h>

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const CMD = "export";

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

/* ---- the vocabulary beside a llama2.c export ----------------------------
 * llama2.c reads tokenizer.bin from beside the checkpoint; ffn reads that,
 * else tokenizer.txt.  A llama2.c vocabulary is copied as tokenizer.bin; ffn's
 * own (byte, char, word: an encoding llama2.c's run.c does not have) is
 * written as tokenizer.txt, which ffn reads beside PATH; a BPE vocabulary
 * (tokenizer.json, a GGUF's) has no llama2.c form and is not written (said
 * so).  An existing file of that name with other bytes is replaced only with
 * --force. */
typedef struct l2c_vocab {
    char path[4200];
    char *bytes;
    size_t n;
    const char *what;
} l2c_vocab;

/* What to write beside `out` (v->bytes NULL: nothing); 1 after printing an
 * error. */
static int l2c_vocab_plan(const char *out, const ffn_checkpoint_info *info, int64_t V, int force,
                          l2c_vocab *v) {
    memset(v, 0, sizeof *v);
    if (!info->tokenizer_path[0]) {
        fprintf(stderr, "ffn export: note: MODEL has no vocabulary beside it; none is written\n");
        return 0;
    }
    const char *name = NULL;
    if (info->tokenizer_is_llama2c) {
        name = "tokenizer.bin";
        v->what = "its llama2.c tokenizer.bin";
        if (!(v->bytes = cli_read_file(info->tokenizer_path, &v->n))) {
            cli_error(CMD, "%s: cannot read the vocabulary", info->tokenizer_path);
            return 1;
        }
    } else {
        ffn_vocab *voc = NULL;
        ffn_status st = ffn_vocab_load(info->tokenizer_path, V, &voc);
        if (st) {
            cli_fail(CMD, st);
            return 1;
        }
        const ffn_tokenizer *tok = ffn_vocab_tokenizer(voc);
        if (!tok) {
            fprintf(stderr, "ffn export: warning: the %s vocabulary of %s has no llama2.c form (a "
                    "tokenizer.bin holds no merges): none is written beside the .bin; export "
                    "--format gguf or hf to keep it\n", ffn_vocab_kind_name(ffn_vocab_get_kind(voc)),
                    info->tokenizer_path);
            ffn_vocab_free(voc);
            return 0;
        }
        /* ffn's own vocabulary as its tokenizer file: through a temporary file */
        char tmpl[] = "/tmp/ffn-export-vocab-XXXXXX";
        int fd = mkstemp(tmpl);
        if (fd < 0 || (close(fd), st = ffn_tokenizer_save(tok, tmpl)) || !(v->bytes = cli_read_file(tmpl, &v->n))) {
            if (fd >= 0) unlink(tmpl);
            ffn_vocab_free(voc);
            if (st) cli_fail(CMD, st);
            else cli_error(CMD, "cannot write the vocabulary");
            return 1;
        }
        unlink(tmpl);
        ffn_vocab_free(voc);
        name = FFN_TOKENIZER_FILENAME;
        v->what = "ffn's vocabulary (llama2.c's run.c cannot encode with it; ffn reads it beside the .bin)";
    }
    const char *slash = strrchr(out, '/');
    if (slash) snprintf(v->path, sizeof v->path, "%.*s/%s", (int)(slash - out), out, name);
    else snprintf(v->path, sizeof v->path, "%s", name);
    char *old = NULL;
    size_t on = 0;
    if ((old = cli_read_file(v->path, &on))) {
        int same = on == v->n && !memcmp(old, v->bytes, on);
        free(old);
        if (same) {
            free(v->bytes);
            v->bytes = NULL;
            fprintf(stderr, "ffn export: %s already holds the vocabulary\n", v->path);
        } else if (!force) {
            cli_error(CMD, "%s exists with another vocabulary: the export writes %s there; "
                      "replace it with --force, or write PATH in another directory", v->path, v->what);
            free(v->bytes);
            v->bytes = NULL;
            return 1;
        }
    }
    return 0;
}

static ffn_status l2c_vocab_write(const l2c_vocab *v) {
    if (!v->bytes) return FFN_OK;
    ffn_atomic_file af;
    ffn_status st = ffn_atomic_open(&af, v->path);
    if (st) return st;
    if (fwrite(v->bytes, 1, v->n, af.f) != v->n) {
        ffn_atomic_abort(&af);
        return ffn_set_error(FFN_ERR_IO, "%s: write error", v->path);
    }
    st = ffn_atomic_commit(&af);
    if (st == FFN_OK) fprintf(stderr, "ffn export: wrote %s: %s\n", v->path, v->what);
    return st;
}

static const char about[] =
"Loads MODEL (anything `ffn run` loads: a llama2.c .bin, a Hugging Face\n"
"directory, an ffn checkpoint directory, a GGUF file) and writes it in\n"
"another layout.\n";

static const char epilog[] =
"examples:\n"
"  ffn export stories260K.bin --out stories-hf\n"
"  ffn export my-ffn-run --out my-model.bin --format llama2c\n"
"  ffn export my-ffn-run --out my-model.gguf --format gguf --dtype F16\n";

static const char *const format_names[] = {"hf", "llama2c", "gguf", NULL};
static const char *const dtype_names[] = {"F32", "F16", "BF16", NULL};

int cmd_export(int argc, char **argv) {
    const char *model_path = NULL, *out = NULL;
    int64_t threads = 0;
    int format_k = 0, dtype_k = 0, force = 0;
    const cli_opt opts[] = {
        CLI_OPT_OUT_REQUIRED(&out, "PATH", "where to write (required): a directory for --format hf, a "
                    "file for --format llama2c"),
        {.name = "--format", .type = CLI_ENUM, .dst = &format_k, .names = format_names,
         .help = "hf: a Hugging Face directory PATH: config.json with HF names (model_type "
                 "llama; qwen2 when q/k/v have biases; mixtral or qwen2_moe with experts; "
                 "qwen3, gemma, gemma2, gemma3_text, olmoe and gpt2 when the model has their "
                 "architecture; phi3 when MODEL was a phi3 directory) and model.safetensors with the family's tensor "
                 "names and layout (phi3's fused qkv_proj/gate_up_proj, gpt2's transformer.* "
                 "with Conv1D [in, out] weights).  RoPE follows HF's rotate_half "
                 "convention: a model whose RoPE rotates consecutive pairs (llama2.c) gets its "
                 "q_proj/k_proj rows permuted per head (row 2j+h -> h*Dh/2 + j), so HF code "
                 "computes the same logits.  The vocabulary found beside MODEL (tokenizer.txt "
                 "or tokenizer.bin) is copied along, ffn's own also as a tokenizer.json "
                 "(and tokenizer_config.json) Hugging Face tokenizers read to the same ids.  The directory is written beside PATH and "
                 "swapped in atomically; an existing PATH must be an empty directory, or a model "
                 "directory and --force given (files in it that ffn does not write are kept).  A "
                 "source with a sliding window (mistral) is written with "
                 "max_position_embeddings = the window: ffn runs it with full attention up to "
                 "there.\n"
                 "llama2c: a llama2.c .bin file PATH (the legacy layout, freq_cis included; q/k "
                 "permuted back to consecutive pairs), its vocabulary beside it: a llama2.c "
                 "tokenizer.bin copied as tokenizer.bin, ffn's own as tokenizer.txt (ffn reads it; "
                 "llama2.c's run.c has no char/word encoding), a BPE one not at all (said so).  "
                 "Only gated-SiLU models without biases "
                 "or experts, with RMSNorm eps 1e-5 and RoPE theta 10000, fit the format.  "
                 "Written to a new PATH.tmp-XXXXXX, fsynced, renamed; an existing PATH is replaced "
                 "only with --force.\n"
                 "gguf: a GGUF file PATH llama.cpp runs (architecture llama, with rope_freqs.weight "
                 "for llama3 RoPE scaling; qwen2, qwen2moe, qwen3, qwen3moe, olmoe, gemma, gemma2, "
                 "gemma3, gpt2, starcoder2, or phi3 (with rope_factors_*.weight for LongRoPE) when "
                 "MODEL was a phi3 model, each as the model has its architecture; llama's q/k rows in llama.cpp's order; the vocabulary as `ffn quantize` writes "
                 "it), the matrices in --dtype, norms f32; for quantized types see `ffn "
                 "quantize`.  Written atomically; an existing PATH is replaced only with --force."},
        {.name = "--dtype", .type = CLI_ENUM, .dst = &dtype_k, .names = dtype_names,
         .help = "weight dtype for --format hf and gguf: F32 (exact), F16 or BF16 (rounded to "
                 "nearest even)"},
        CLI_OPT_FORCE(&force, "replace an existing PATH (never MODEL itself)"),
        CLI_OPT_THREADS(&threads),
        {0}};
    const cli_pos pos[] = {CLI_POS_MODEL(&model_path), {0}};
    const cli_spec spec = {.cmd = CMD,
                           .synopsis = "MODEL --out PATH [--format F] [--dtype T] [--force]",
                           .about = about, .epilog = epilog, .opts = opts, .pos = pos};
    int rc;
    if (cli_parse(&spec, argc, argv, &rc)) return rc;
    const char *dtype = dtype_names[dtype_k];
    int l2c = format_k == 1, gguf = format_k == 2;
    if (gguf ? gguf_out_refuse(CMD, model_path, out, force) : refuse_out(model_path, out, force))
        return CLI_EXIT_FAIL;
    if (l2c && strcmp(dtype, "F32")) {
        cli_error(CMD, "--dtype: the llama2.c format holds fp32 only");
        return CLI_EXIT_USAGE;
    }
    ffn_ctx *ctx = NULL;
    if (cli_make_ctx(CMD, (int)threads, &ctx)) return CLI_EXIT_FAIL;
    ffn_model *m = NULL;
    ffn_checkpoint_info info;
    ffn_model_options opt = {.max_batch = 1, .max_seq = 1}; /* weights only: the smallest activations */
    ffn_status st = ffn_checkpoint_load_any(ctx, model_path, &opt, &m, &info);
    if (st == FFN_OK && gguf) {
        ffn_ggml_type type = FFN_GGML_TYPE_F32; /* the table spells F16 as f16 */
        (void)ffn_ggml_type_parse(dtype, &type);
        int rc = gguf_out_write(CMD, m, model_path, &info, out, type);
        ffn_model_free(m);
        ffn_ctx_free(ctx);
        return rc;
    }
    if (st == FFN_OK) {
        if (l2c) {
            l2c_vocab v;
            if (l2c_vocab_plan(out, &info, ffn_model_get_config(m)->vocab_size, force, &v)) {
                ffn_model_free(m);
                ffn_ctx_free(ctx);
                return CLI_EXIT_FAIL;
            }
            st = ffn_checkpoint_save_llama2c(m, out);
            if (st == FFN_OK) st = l2c_vocab_write(&v);
            free(v.bytes);
        } else {
            /* a GGUF's own BPE/SentencePiece vocabulary is not converted to a
             * tokenizer.json: said, never dropped in silence */
            if (info.tokenizer_path[0] && ffn_checkpoint_is_gguf(info.tokenizer_path)) {
                ffn_vocab *gv = NULL;
                if (ffn_vocab_load(info.tokenizer_path, ffn_model_get_config(m)->vocab_size, &gv) == FFN_OK &&
                    !ffn_vocab_tokenizer(gv))
                    fprintf(stderr, "ffn export: warning: the %s vocabulary of %s is not converted to "
                            "a tokenizer.json: the Hugging Face directory has none; export --format "
                            "gguf to keep it\n", ffn_vocab_kind_name(ffn_vocab_get_kind(gv)),
                            info.tokenizer_path);
                ffn_vocab_free(gv);
            }
            ffn_hf_save_options o = {dtype, info.tokenizer_path[0] ? info.tokenizer_path : NULL,
                                     info.tokenizer_is_llama2c, info.context_cap,
                                     info.model_type};
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
