/* cmd_quantize.c -- `ffn quantize`: write any model ffn loads as a GGUF
 * file of one weight type (any the type table encodes, f32 aside) that
 * llama.cpp runs; also the GGUF writing behind `ffn export --format gguf`. */
#include "cli.h"
#include "gguf_out.h"
#include "ffn/gguf.h"
#include "ffn/vocab.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const CMD = "quantize";

int gguf_out_refuse(const char *cmd, const char *model, const char *out, int force) {
    struct stat sm, so;
    if (stat(out, &so) != 0) return 0;
    if (stat(model, &sm) == 0 && sm.st_dev == so.st_dev && sm.st_ino == so.st_ino) {
        cli_error(cmd, "--out %s is MODEL %s itself: write it somewhere else", out, model);
        return 1;
    }
    if (S_ISDIR(so.st_mode)) {
        cli_error(cmd, "--out %s is a directory: a GGUF output is a file", out);
        return 1;
    }
    if (force) return 0;
    cli_error(cmd, "%s already exists: replace it with --force, or choose another --out", out);
    return 1;
}

typedef struct progress {
    int tty;
    const char *out;
} progress;

static void on_tensor(void *user, int64_t done, int64_t total) {
    const progress *p = user;
    if (!p->tty) return;
    fprintf(stderr, "\rffn: writing %s: tensor %lld of %lld", p->out, (long long)done,
            (long long)total);
    if (done == total) fprintf(stderr, "\n");
}

/* --dtype's values at and above this are llama.cpp's mixes: MIX_BASE + ftype */
enum { MIX_BASE = 1000 };

int gguf_out_write(const char *cmd, ffn_model *m, const char *model_path,
                   const ffn_checkpoint_info *info, const char *out, int type) {
    const uint32_t ftype = type >= MIX_BASE ? (uint32_t)(type - MIX_BASE) : 0;
    if (ftype) type = (int)ffn_ftype_base(ftype);
    ffn_vocab *voc = NULL;
    ffn_status st = FFN_OK;
    const int64_t V = ffn_model_get_config(m)->vocab_size;
    /* the vocabulary beside MODEL; a Hugging Face directory's tokenizer.json too */
    char *found = NULL;
    const char *vpath = info->tokenizer_path[0] ? info->tokenizer_path : NULL;
    struct stat sb;
    if (!vpath && stat(model_path, &sb) == 0 && S_ISDIR(sb.st_mode) &&
        ffn_vocab_find_in_dir(model_path, &found) == FFN_OK)
        vpath = found;
    if (vpath) st = ffn_vocab_load(vpath, V, &voc);
    if (st) free(found);
    if (st) return cli_fail(cmd, st);
    progress p = {cli_progress_tty(), out};
    ffn_gguf_save_options o;
    ffn_gguf_save_options_default(&o);
    o.type = type;
    o.ftype = ftype;
    o.vocab = voc;
    o.vocab_path = vpath;
    o.context_cap = info->context_cap;
    o.model_type = info->model_type;
    o.progress = on_tensor;
    o.progress_user = &p;
    ffn_gguf_save_report r;
    st = ffn_gguf_save_model(m, out, &o, &r);
    ffn_vocab_free(voc);
    if (st) {
        free(found);
        return cli_fail(cmd, st);
    }
    fprintf(stderr, "ffn %s: %s (%s, %s) -> %s (GGUF, %s): %lld tensors, %lld kept f32 (norms, "
            "biases, routers)", cmd, model_path, ffn_checkpoint_format_name(info->format),
            info->model_type, out, ftype ? ffn_ftype_name(ftype) : ffn_ggml_type_name((ffn_ggml_type)type),
            (long long)r.n_tensors, (long long)r.n_f32);
    if (ftype || r.n_fallback > 0) { /* the types written, and the fallbacks */
        for (int t = 0; t < FFN_GGML_TYPE_COUNT; t++)
            if (r.n_by_type[t] && t != FFN_GGML_TYPE_F32)
                fprintf(stderr, ", %lld %s", (long long)r.n_by_type[t], ffn_ggml_type_name((ffn_ggml_type)t));
        if (r.n_fallback > 0 && ftype)
            fprintf(stderr, " (%lld by llama.cpp's fallback for rows of no whole block)",
                    (long long)r.n_fallback);
        else if (r.n_fallback > 0)
            fprintf(stderr, " (%lld by llama.cpp's fallback for rows not a multiple of %s's block "
                    "of %lld)", (long long)r.n_fallback, ffn_ggml_type_name((ffn_ggml_type)type),
                    (long long)ffn_ggml_block_size((ffn_ggml_type)type));
    }
    fprintf(stderr, "; vocabulary: %s%s%s\n", vpath ? vpath : "", vpath ? ", " : "",
            r.vocab_kind ? r.vocab_kind : "");
    free(found);
    if (r.vocab_warning) fprintf(stderr, "ffn %s: warning: %s\n", cmd, r.vocab_warning);
    return 0;
}

static const char about[] =
"Loads MODEL (a llama2.c .bin, a Hugging Face directory, an ffn run directory\n"
"or a GGUF file) and writes it as a GGUF file llama.cpp runs, its matrices of\n"
"one type (--dtype: f16 and bf16 rounded to nearest even; the block formats\n"
"with ggml's reference rounding where ffn has it, else ffn's own scale search,\n"
"always ggml's decoding).  A matrix whose rows are not a multiple of the\n"
"type's block falls back as llama.cpp's quantizer does with that one type\n"
"(llama_model_quantize's pure mode; the fallbacks are the mixes', below: q4_K\n"
"on rows of 288 is q5_0, q8_0 on rows of 172 f16); the counts are reported.\n"
"Norms, biases and MoE routers stay f32.  The architecture is\n"
"llama (Mixtral-style experts too), qwen2 (q/k/v biases) or qwen2moe (experts\n"
"with a shared expert); llama's q/k rows are written in llama.cpp's order.\n"
"The vocabulary goes along: a GGUF MODEL's tokenizer keys are copied; ffn's\n"
"own (byte, char, word) is kept whole for ffn (ffn.tokenizer) beside a llama\n"
"vocabulary llama.cpp encodes the same way (byte; char for text in the\n"
"vocabulary; a word vocabulary is warned about: llama.cpp cannot encode it);\n"
"a llama2.c tokenizer.bin with its scores; without one, byte tokens.  The file\n"
"is written beside OUT and renamed into place; an existing OUT is replaced only\n"
"with --force.\n";
static const char measured[] =
"Measured effect on perplexity: docs/QUANTIZATION.md (ffn eval --reference).\n";

/* the paragraph on llama.cpp's mixes and the examples, their types read
 * from the type table and the mixes' rules (ffn_ftype_tensor_type) */
static void mix_help(char *about_mix, size_t cap, char *examples, size_t ecap) {
    const cli_type_examples e = cli_ggml_examples();
    uint32_t fex = 0;
    (void)ffn_ftype_parse(e.mix, &fex);
    const ffn_ftype_shape shape = {.n_layer = 8, .n_head = 8, .n_head_kv = 8};
    /* a matrix no rule gives more bits, in rows of 9 blocks of 32 */
    const char *plain = "blk.0.ffn_up.weight";
    const int64_t cols = 9 * 32;
    char falls[512] = "";
    size_t used = 0;
    int seen[FFN_GGML_TYPE_COUNT] = {0};
    for (int i = 0; i < ffn_ftype_count(); i++) {
        uint32_t f;
        (void)ffn_ftype_at(i, &f);
        const ffn_ggml_type base = ffn_ftype_base(f);
        int fell = 0;
        const ffn_ggml_type to = ffn_ftype_tensor_type(f, &shape, plain, cols, &fell);
        if (!fell || (unsigned)base >= FFN_GGML_TYPE_COUNT || seen[base]) continue;
        seen[base] = 1;
        int w = snprintf(falls + used, sizeof falls - used, "%s%s to %s", used ? ", " : "",
                         ffn_ggml_type_name(base), ffn_ggml_type_name(to));
        if (w > 0 && (size_t)w < sizeof falls - used) used += (size_t)w;
    }
    char text[2048];
    snprintf(text, sizeof text,
             "--dtype in capitals names one of llama.cpp's mixes (its file types, as "
             "llama-quantize spells them; listed under --dtype): each matrix gets the type "
             "llama.cpp's own quantizer gives it without an importance matrix -- the mix's base "
             "type (%s: %s); output.weight (or a tied token embedding) %s; attn_v and ffn_down "
             "more bits in some layers (%s: %s in the first and last eighth of the layers and "
             "every third between; each mix by its own rules); rows of no whole block fall back "
             "as llama.cpp does (%s; %s when no block divides them).  The rules in full: "
             "src/load/gguf_mix.c; docs/QUANTIZATION.md.  A lower-case type (%s) is that one "
             "type for every matrix, with the same fallbacks.",
             e.mix, ffn_ggml_type_name(ffn_ftype_base(fex)),
             ffn_ggml_type_name(ffn_ftype_tensor_type(fex, &shape, "output.weight", 4096, NULL)), e.mix,
             ffn_ggml_type_name(ffn_ftype_tensor_type(fex, &shape, "blk.0.attn_v.weight", 4096, NULL)),
             falls, ffn_ggml_type_name(ffn_ftype_tensor_type(fex, &shape, plain, 1, NULL)), e.block);
    cli_wrap_text(text, about_mix, cap);
    snprintf(examples, ecap,
             "examples:\n"
             "  ffn quantize my-ffn-run --dtype %s --out model-%s.gguf\n"
             "  ffn quantize stories260K.bin --dtype %s --out stories-%s.gguf\n"
             "  ffn quantize my-hf-dir --dtype %s --out model-%s.gguf\n"
             "  ffn eval model-%s.gguf --data text.txt --reference my-ffn-run\n",
             e.block, e.block, e.super, e.super, e.mix, e.mix, e.block);
}

int cmd_quantize(int argc, char **argv) {
    const char *model_path = NULL, *out = NULL;
    int64_t threads = 0;
    int type_k = -1, force = 0;
    const cli_types tt = cli_ggml_types(FFN_GGML_ENCODES, 0); /* f32 is no quantization */
    /* the types, then llama.cpp's mixes */
    const char *names[FFN_GGML_TYPE_COUNT + 64];
    int values[FFN_GGML_TYPE_COUNT + 64], k = 0;
    for (; tt.names[k] && k < FFN_GGML_TYPE_COUNT; k++) names[k] = tt.names[k], values[k] = tt.values[k];
    char mixlist[400] = "";
    size_t used = 0;
    for (int i = 0; i < ffn_ftype_count() && k < FFN_GGML_TYPE_COUNT + 63; i++) {
        uint32_t f;
        names[k] = ffn_ftype_at(i, &f);
        values[k++] = MIX_BASE + (int)f;
        int w = snprintf(mixlist + used, sizeof mixlist - used, "%s%s", i ? ", " : "", names[k - 1]);
        if (w > 0 && (size_t)w < sizeof mixlist - used) used += (size_t)w;
    }
    names[k] = NULL;
    const cli_types types = {names, values, tt.list};
    char help[1024];
    snprintf(help, sizeof help, "the matrices' type (required): %s; or llama.cpp's mix: %s", tt.list,
             mixlist);
    const cli_opt opts[] = {
        CLI_OPT_OUT_REQUIRED(&out, "FILE", "the GGUF file to write (required)"),
        {.name = "--dtype", .type = CLI_ENUM, .dst = &type_k, .metavar = "T", .names = types.names,
         .values = types.values, .def = "", .help = help},
        CLI_OPT_FORCE(&force, "replace an existing FILE (never MODEL itself)"),
        CLI_OPT_THREADS(&threads),
        {0}};
    const cli_pos pos[] = {CLI_POS_MODEL(&model_path), {0}};
    char about_mix[2048], epilog[512], full[sizeof about + sizeof about_mix + sizeof measured];
    mix_help(about_mix, sizeof about_mix, epilog, sizeof epilog);
    snprintf(full, sizeof full, "%s%s%s", about, about_mix, measured);
    const cli_spec spec = {.cmd = CMD, .synopsis = "MODEL --dtype T --out FILE [--force]",
                           .about = full, .epilog = epilog, .opts = opts, .pos = pos};
    int rc;
    if (cli_parse(&spec, argc, argv, &rc)) return rc;
    if (type_k < 0) return cli_usage_error(CMD, "--dtype T is required (%s)", types.list);
    if (gguf_out_refuse(CMD, model_path, out, force)) return CLI_EXIT_FAIL;
    ffn_ctx *ctx = NULL;
    if (cli_make_ctx(CMD, threads, &ctx)) return CLI_EXIT_FAIL;
    ffn_model *m = NULL;
    ffn_checkpoint_info info;
    ffn_model_options opt = {.max_batch = 1, .max_seq = 1}; /* weights only */
    ffn_status st = ffn_checkpoint_load_any(ctx, model_path, &opt, &m, &info);
    rc = st ? cli_fail(CMD, st) : gguf_out_write(CMD, m, model_path, &info, out, (ffn_ggml_type)type_k);
    ffn_model_free(m);
    ffn_ctx_free(ctx);
    return rc;
}
