/* cmd_run.c -- `ffn run`: load a real checkpoint (a llama2.c .bin file or a
 * Hugging Face / ffn directory), generate from token ids or a text prompt
 * with the KV cache, and optionally dump the logits of every position to a
 * safetensors file (for comparisons against reference implementations). */
#include "cli.h"
#include "ffn/dist.h"
#include "ffn/checkpoint.h"
#include "ffn/safetensors.h"

#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const CMD = "run";

static const char about[] =
"Loads MODEL and continues the given tokens, one token at a time with a KV\n"
"cache, greedily (--temperature 0) or by sampling (the defaults, the same as\n"
"`ffn generate`'s).  --steps is capped by the model's context (with a note).\n"
"\n"
"MODEL is one of:\n"
"  a llama2.c checkpoint FILE   seven int32 (dim, hidden_dim, n_layers, n_heads,\n"
"                               n_kv_heads, vocab_size, seq_len; vocab_size < 0:\n"
"                               untied classifier) then fp32 arrays; RoPE rotates\n"
"                               consecutive pairs (2i, 2i+1), RMSNorm eps 1e-5.\n"
"                               Small ones (stories260K.bin, stories15M.bin) are\n"
"                               published by the llama2.c project (its\n"
"                               tinyllamas releases), or write one with\n"
"                               `ffn export RUN --out m.bin --format llama2c`\n"
"  a Hugging Face DIRECTORY     config.json (model_type llama, mistral, qwen2,\n"
"                               qwen3, gemma, phi3, mixtral, qwen2_moe, olmoe or\n"
"                               gpt2; rope_scaling linear, dynamic, llama3 or\n"
"                               yarn) and model.safetensors or\n"
"                               the shards of model.safetensors.index.json; F32,\n"
"                               F16 or BF16; RoPE rotate_half (pairs (i, i+Dh/2))\n"
"  an ffn checkpoint DIRECTORY  written by `ffn train` (HF layout and\n"
"                               tokenizer.txt)\n"
"  a GGUF FILE                  architecture llama (Llama, Mistral, Mixtral),\n"
"                               qwen2 or qwen2moe; any type ffn computes with\n"
"                               (--quantize's); its matrices stay in their type,\n"
"                               read from the mapped file (f32 ones and llama's\n"
"                               q/k rows are copied); its tokenizer.ggml.*\n"
"                               vocabulary encodes --prompt\n"
"Weights are memory-mapped and converted straight into the model (no second\n"
"copy of the file in memory).  Every bad file gets an error naming it.\n";

static const char epilog[] =
"examples:\n"
"  ffn run stories260K.bin --ids \"1 403 407\" --steps 20 --temperature 0 \\\n"
"          --emit ids\n"
"  ffn run stories15M.bin --tokenizer tokenizer.bin --prompt 'Once upon a time'\n"
"  ffn run qwen2-dir --ids \"151643 40\" --steps 0 --dump-logits out.safetensors\n";

static const char *const emit_names[] = {"ids", "text", NULL};
/* --quantize / --quantize-embed after loading; with --info, what it gave. */
static ffn_status quantize_loaded(ffn_model *m, int type, int embed_type, int show_info) {
    if (type < 0 && embed_type < 0) return FFN_OK;
    size_t before = ffn_model_weight_bytes(m);
    ffn_quantize_options o;
    ffn_quantize_options_default(&o);
    if (embed_type >= 0) o.embedding = o.head = embed_type;
    ffn_status st = ffn_model_quantize(m, type >= 0 ? (ffn_ggml_type)type : FFN_GGML_TYPE_F32, &o);
    if (st || !show_info) return st;
    int count[FFN_GGML_TYPE_COUNT] = {0};
    for (int64_t i = 0; i < ffn_model_num_tensors(m); i++) {
        int t = ffn_model_tensor_type(m, ffn_model_tensor_at(m, i)->name);
        if (t >= 0 && t < FFN_GGML_TYPE_COUNT) count[t]++;
    }
    fprintf(stderr, "ffn run: quantized in memory: weights %zu bytes (were %zu); tensors", 
            ffn_model_weight_bytes(m), before);
    for (int t = 0; t < FFN_GGML_TYPE_COUNT; t++)
        if (count[t]) fprintf(stderr, " %s %d", ffn_ggml_type_name((ffn_ggml_type)t), count[t]);
    fprintf(stderr, "\n");
    return FFN_OK;
}

/* ---- the vocabulary -------------------------------------------------------------- */

/* The vocabulary file beside the model or given by --tokenizer (ffn_vocab
 * tells ffn's tokenizer.txt from a llama2.c tokenizer.bin); 0 on success,
 * else the error is printed. */
static int vocab_open(const char *path, int64_t V, ffn_vocab **v) {
    ffn_status st = ffn_vocab_load(path, V, v);
    return st ? cli_fail(CMD, st) : 0;
}

/* Generated tokens to stdout (text or ids) and, with --dump-logits, each
 * fed-back token's logits into the rows after the prompt's. */
typedef struct run_out {
    int text;
    int32_t *ids; /* (steps) --json: the generated ids, printed at the end; else NULL */
    int64_t n_emitted, V, row;
    float *rows; /* (fed, V) or NULL */
    int32_t *fed; /* (fed) the tokens the model read */
} run_out;

static int on_run_token(int32_t id, const char *bytes, size_t len, void *user) {
    run_out *o = user;
    if (o->ids) {
        o->ids[o->n_emitted++] = id;
        return 0;
    }
    if (o->text) {
        if (bytes) fwrite(bytes, 1, len, stdout);
        fflush(stdout);
    } else {
        printf(o->n_emitted ? " %d" : "%d", id);
    }
    o->n_emitted++;
    return 0;
}

static void on_run_logits(int32_t fed, const float *logits, void *user) {
    run_out *o = user;
    o->fed[o->row] = fed;
    if (o->rows) memcpy(o->rows + o->row * o->V, logits, (size_t)o->V * sizeof(float));
    o->row++;
}

/* ---- the command's steps --------------------------------------------------------
 * cmd_run parses the options, then runs the steps in order: the vocabulary,
 * the prompt, loading (MPI first under --tp), generating, dumping the
 * logits.  A step that fails prints why and returns the exit code (the
 * generate and dump steps return a status instead: under --tp every rank
 * agrees on it first); run_free is the one cleanup path. */

typedef struct run_args {
    const char *model_path, *ids_s, *prompt, *tok_path, *emit, *dump;
    int64_t steps, threads, seed, tp_ranks;
    double temperature, top_p, dist_timeout;
    int bos, show_info, json, quant, quant_embed, precision;
    const char *agree; /* the flags every rank must share (--tp: ffn_dist_layout.options) */
    int agree_len;     /* < 0: they did not fit */
} run_args;

typedef struct run_state {
    ffn_model_config cfg;
    ffn_checkpoint_info info;
    int64_t V, ctx_len;
    ffn_vocab *voc;
    int want_text;
    int32_t *ids; /* (n_prompt) the prompt */
    int64_t n_prompt, steps, fed; /* fed: the tokens the model reads */
    ffn_ctx *ctx;
    ffn_dist *dist;
    ffn_model *m;
    ffn_model_options opt;
    int64_t model_params; /* the whole model's (a --tp rank holds a share) */
    int write_dump; /* 0 on ranks other than 0 */
    float *all;     /* (fed, V) --dump-logits: every fed token's logits */
    int32_t *seq;   /* (fed + 1) the fed tokens */
    run_out out;
} run_state;

static void run_free(run_state *s) {
    free(s->all);
    free(s->seq);
    free(s->out.ids);
    free(s->ids);
    ffn_model_free(s->m);
    ffn_vocab_free(s->voc);
    ffn_ctx_free(s->ctx);
}

/* The options into *a; 1 when the command is done (--help, a usage error)
 * with its exit code in *rc. */
static int run_parse(int argc, char **argv, run_args *a, int *rc) {
    const char *model_path = NULL, *ids_s = NULL, *prompt = NULL, *tok_path = NULL;
    const char *dump = NULL;
    ffn_generate_options gd;
    ffn_generate_options_default(&gd); /* the sampling defaults of ffn generate */
    int64_t steps = gd.steps, threads = 0, seed = (int64_t)gd.seed;
    double temperature = gd.temperature, top_p = gd.top_p;
    int no_bos = 0, show_info = 0, json = 0, emit_choice = -1, quant = -1, quant_embed = -1;
    int precision = FFN_PRECISION_FP32;
    const cli_types qtypes = cli_ggml_types(FFN_GGML_COMPUTES, 1); /* the type table's */
    int64_t tp_ranks = 1;
    double dist_timeout = FFN_DIST_TIMEOUT_DEFAULT;
    const cli_opt opts[] = {
        {.name = "--ids", .type = CLI_STR, .dst = &ids_s, .metavar = "\"1 2 3\"",
         .group = "input (one of)",
         .help = "token ids, separated by spaces or commas (llama2.c: BOS is 1)"},
        {.name = "--prompt", .type = CLI_STR, .dst = &prompt, .metavar = "TEXT",
         .help = "text, encoded with the model's vocabulary: a llama2.c tokenizer.bin (BOS id "
                 "1 is prepended, then SentencePiece-style BPE merges by score with <0xXX> byte "
                 "fallback) or ffn's tokenizer.txt in an ffn checkpoint directory"},
        {.name = "--tokenizer", .type = CLI_PATH, .dst = &tok_path, .metavar = "FILE",
         .group = "options",
         .def = "ffn_tokenizer_file or tokenizer.txt in a checkpoint directory, tokenizer.bin "
                "beside the model",
         .help = "the vocabulary"},
        {.name = "--no-bos", .type = CLI_FLAG, .dst = &no_bos,
         .help = "do not prepend BOS to a --prompt (llama2.c tokenizer)"},
        CLI_OPT_GEN_STEPS(&steps),
        CLI_OPT_TEMPERATURE(&temperature),
        CLI_OPT_TOP_P(&top_p),
        CLI_OPT_SEED(&seed, "sampling seed; same seed, same tokens"),
        {.name = "--emit", .type = CLI_ENUM, .dst = &emit_choice, .names = emit_names,
         .def = "text when a vocabulary is found, else ids",
         .help = "what to print on stdout: the generated ids on one line, or their text.  Only "
                 "generated tokens are printed."},
        {.name = "--dump-logits", .type = CLI_PATH, .dst = &dump, .metavar = "FILE",
         .help = "write FILE (a safetensors file; name it *.safetensors) with `logits` F32 "
                 "[T, V] and `tokens` I32 [T]: row t holds the logits after token t, for every "
                 "token FED to the model: the prompt, then each generated token except the last "
                 "(T = prompt + steps - 1, or the prompt alone with --steps 0).  Prompt rows "
                 "come from one batched forward, generated rows from the KV-cached steps."},
        CLI_OPT_THREADS(&threads),
        CLI_OPT_PRECISION(&precision),
        {.name = "--info", .type = CLI_FLAG, .dst = &show_info,
         .help = "print what was loaded and the prompt's ids on stderr"},
        CLI_OPT_JSON(&json, "instead of the tokens as they come, print one JSON object at the "
                            "end: model, prompt_tokens, generated (the ids), weight_bytes (as "
                            "held), file_bytes, peak_rss_bytes (the process's peak resident "
                            "memory, VmHWM: a GGUF's matrices are read from the mapped file "
                            "and count once)"),
        {CLI_INT_FIELDS("--tp", &tp_ranks, "T", 1, 65536,
                        "tensor-parallel ranks: run under mpirun -np T; each rank holds 1/T of "
                        "the heads and FFN units (see include/ffn/dist.h); rank 0 prints; without "
                        "--threads each rank takes the host's cores divided by the ranks on it")},
        CLI_OPT_DIST_TIMEOUT(&dist_timeout),
        {.name = "--quantize", .type = CLI_ENUM, .dst = &quant, .names = qtypes.names,
         .values = qtypes.values, .group = "low-precision weights (inference in memory)",
         .def = "none, the weights as loaded",
         .help = "convert every matrix (embedding, attention, FFN, experts, router, head) to "
                 "this ggml type after loading, in memory; norms and biases stay fp32.  A "
                 "matrix whose rows are no whole blocks takes the nearest finer type whose "
                 "blocks fit (at last f16).  The fp32 copies are given back; --info prints the bytes and types"},
        {.name = "--quantize-embed", .type = CLI_ENUM, .dst = &quant_embed, .names = qtypes.names,
         .values = qtypes.values, .def = "the --quantize type",
         .help = "the type of the token embedding and the LM head (e.g. keep them at a finer "
                 "type than --quantize's)"},
        {0}};
    const cli_pos pos[] = {CLI_POS_MODEL(&model_path), {0}};
    const cli_spec spec = {.cmd = CMD, .synopsis = "MODEL (--ids \"1 2 3\" | --prompt TEXT) [options]",
                           .about = about, .epilog = epilog, .opts = opts, .pos = pos};
    if (cli_parse(&spec, argc, argv, rc)) return 1;
    if (!ids_s == !prompt) {
        cli_error(CMD, "give exactly one of --ids and --prompt");
        *rc = CLI_EXIT_USAGE;
        return 1;
    }
    /* every rank runs the same forwards: the same flags (but those of the
     * output and the host); run_load adds the model's shape and the prompt */
    static const char *const host_only[] = {"--threads", "--json", "--info", "--emit",
                                            "--dist-timeout", NULL};
    static char agree[32768];
    int agree_len = cli_agree_text(opts, host_only, agree, sizeof agree);
    *a = (run_args){.model_path = model_path, .ids_s = ids_s, .prompt = prompt,
                    .tok_path = tok_path, .emit = emit_choice >= 0 ? emit_names[emit_choice] : NULL,
                    .dump = dump, .steps = steps, .threads = threads, .seed = seed,
                    .tp_ranks = tp_ranks, .temperature = temperature, .top_p = top_p,
                    .bos = !no_bos, .show_info = show_info, .json = json, .quant = quant,
                    .quant_embed = quant_embed, .precision = precision,
                    .dist_timeout = dist_timeout, .agree = agree, .agree_len = agree_len};
    return 0;
}

/* The model's configuration, then the vocabulary when one is asked for or
 * needed: --tokenizer, a Hugging Face directory's tokenizer.json, the one
 * the checkpoint names or holds beside it, a GGUF file's own. */
static int run_vocabulary(const run_args *a, run_state *s) {
    ffn_status st = ffn_checkpoint_read_config_any(a->model_path, &s->cfg, &s->info);
    if (st) return cli_fail(CMD, st);
    s->V = s->cfg.vocab_size;
    s->ctx_len = s->cfg.max_position_embeddings;
    if (s->info.context_cap > 0 && s->info.context_cap < s->ctx_len) s->ctx_len = s->info.context_cap;

    /* a Hugging Face directory's tokenizer.json comes first */
    char *json_tok = NULL;
    if (!a->tok_path && ffn_vocab_find_in_dir(a->model_path, &json_tok) == FFN_OK &&
        !strstr(json_tok, "tokenizer.json")) {
        free(json_tok);
        json_tok = NULL;
    }
    /* a GGUF file carries its own vocabulary (tokenizer.ggml.*) */
    const char *gguf_tok = !a->tok_path && !json_tok && ffn_checkpoint_is_gguf(a->model_path)
                               ? a->model_path : NULL;
    const char *tp = a->tok_path ? a->tok_path : json_tok ? json_tok
                     : s->info.tokenizer_path[0] ? s->info.tokenizer_path : gguf_tok;
    s->want_text = a->emit ? !strcmp(a->emit, "text") : 0;
    int rc = 0;
    if (a->prompt || s->want_text || (!a->emit && tp)) {
        if (!tp) {
            /* A Hugging Face tokenizer.json is common and not read: say so. */
            char hf_tok[4096];
            struct stat sb;
            int has_json = snprintf(hf_tok, sizeof hf_tok, "%s/tokenizer.json", a->model_path) <
                               (int)sizeof hf_tok &&
                           stat(hf_tok, &sb) == 0;
            cli_error(CMD, "%s: no vocabulary found beside the model%s; give --tokenizer FILE%s",
                      a->model_path,
                      has_json ? " (its tokenizer.json is not read: ffn reads a llama2.c "
                                 "tokenizer.bin or ffn's tokenizer.txt)" : "",
                      a->prompt ? " or use --ids" : " or --emit ids");
            return CLI_EXIT_FAIL;
        }
        rc = vocab_open(tp, s->V, &s->voc) ? CLI_EXIT_FAIL : 0;
        if (!rc && !a->emit) s->want_text = 1;
    }
    free(json_tok);
    return rc;
}

/* The prompt's ids (--ids, or --prompt encoded), checked against the
 * context; --steps capped by it. */
static int run_prompt(const run_args *a, run_state *s) {
    ffn_status st = FFN_OK;
    if (a->ids_s) {
        if (!cli_parse_ids(CMD, "--ids", a->ids_s, s->V, &s->ids, &s->n_prompt)) return CLI_EXIT_USAGE;
    } else {
        st = ffn_vocab_encode(s->voc, a->prompt, strlen(a->prompt), a->bos, &s->ids, &s->n_prompt);
        int32_t unk = ffn_vocab_specials(s->voc).unk;
        int64_t n_unk = 0;
        for (int64_t i = 0; st == FFN_OK && unk >= 0 && i < s->n_prompt; i++) n_unk += s->ids[i] == unk;
        if (st == FFN_OK && n_unk > 0)
            fprintf(stderr, "ffn run: warning: %lld of the prompt's %lld tokens (%.0f%%) are not in "
                    "the vocabulary and read as <unk>\n", (long long)n_unk, (long long)s->n_prompt,
                    100.0 * (double)n_unk / (double)s->n_prompt);
    }
    if (st) return cli_fail(CMD, st);
    if (s->n_prompt == 0) {
        cli_error(CMD, "--prompt: the text encodes to no tokens");
        return CLI_EXIT_USAGE;
    }
    if (a->show_info) {
        fprintf(stderr, "ffn run: prompt ids (%lld):", (long long)s->n_prompt);
        for (int64_t i = 0; i < s->n_prompt; i++) fprintf(stderr, " %d", s->ids[i]);
        fprintf(stderr, "\n");
    }
    if (s->n_prompt > s->ctx_len) {
        cli_error(CMD, "the prompt has %lld tokens, more than the model's context of %lld%s",
                  (long long)s->n_prompt, (long long)s->ctx_len,
                  s->info.context_cap == s->ctx_len ? " (its sliding_window: ffn attends to the "
                  "whole context, which equals windowed attention only up to the window)" : "");
        return CLI_EXIT_USAGE;
    }
    s->steps = a->steps;
    if (s->n_prompt + s->steps - 1 > s->ctx_len) {
        int64_t fit = s->ctx_len - s->n_prompt + 1;
        fprintf(stderr, "ffn run: note: generating %lld tokens, not %lld: the context holds %lld\n",
                (long long)fit, (long long)s->steps, (long long)s->ctx_len);
        s->steps = fit;
    }
    s->fed = s->n_prompt + (s->steps > 0 ? s->steps - 1 : 0);
    return 0;
}

/* What was loaded, on stderr (--info). */
static void run_print_info(const run_args *a, const run_state *s) {
    char dtypes[96];
    const ffn_checkpoint_info *info = &s->info;
    if (info->format == FFN_CHECKPOINT_LLAMA2C) /* one fp32 block, no tensor table */
        snprintf(dtypes, sizeof dtypes, "weights fp32 (the llama2.c format)");
    else
        snprintf(dtypes, sizeof dtypes, "tensors F32 %d, F16 %d, BF16 %d%s", info->n_dtypes[0],
                 info->n_dtypes[1], info->n_dtypes[2],
                 info->n_dtypes[3] > 0 ? (s->opt.low_precision ? ", quantized (kept in their type)"
                                                               : ", quantized (dequantized to fp32)")
                                       : "");
    fprintf(stderr, "ffn run: %s (%s, model_type %s): %lld parameters, %lld file(s), %lld "
            "bytes; %s; RoPE %s\n", a->model_path,
            ffn_checkpoint_format_name(info->format), info->model_type,
            (long long)s->model_params, (long long)info->n_files,
            (long long)info->file_bytes, dtypes,
            ffn_model_get_config(s->m)->rope_style == FFN_ROPE_HALF ? "rotate_half" : "interleaved");
    if (s->dist)
        fprintf(stderr, "ffn run: rank %d of %d (--tp %lld) holds %lld of the parameters, %d "
                "thread(s)\n", ffn_dist_rank(s->dist, FFN_DIST_WORLD),
                ffn_dist_size(s->dist, FFN_DIST_WORLD), (long long)a->tp_ranks,
                (long long)ffn_model_num_params(s->m), ffn_ctx_threads(s->ctx));
}

/* The context, MPI under --tp (or mpirun), the model (each rank then keeps
 * its share), --quantize. */
static int run_load(const run_args *a, run_state *s) {
    int64_t threads = a->threads;
    int several = a->tp_ranks > 1 || ffn_dist_launched();
    /* several processes share the host's cores, as ffn train's ranks do */
    if (threads == 0 && several) threads = ffn_dist_local_threads();
    if (cli_make_ctx(CMD, (int)threads, &s->ctx)) return CLI_EXIT_FAIL;
    /* a GGUF's low-precision matrices stay as they are (not with --tp: the
     * shares are sliced from fp32 parameters) */
    s->opt = (ffn_model_options){.max_batch = 1,
                                 .max_seq = s->fed > s->n_prompt ? s->fed : s->n_prompt,
                                 .low_precision = !several,
                                 .precision = (ffn_precision)a->precision};
    s->write_dump = 1;
    ffn_status st = FFN_OK;
    if (several) { /* MPI first, then load */
        static char agree[32768 + 512];
        int w = a->agree_len;
        if (w < 0 || (size_t)w + 512 >= sizeof agree) {
            cli_error(CMD, "the options do not fit the %zu bytes the ranks compare", sizeof agree);
            return CLI_EXIT_FAIL;
        }
        uint64_t h = 1469598103934665603ull;
        for (int64_t i = 0; i < s->n_prompt; i++) h = (h ^ (uint32_t)s->ids[i]) * 1099511628211ull;
        const ffn_model_config *cfg = &s->cfg;
        snprintf(agree, sizeof agree,
                 "%s"
                 "model.vocab_size=%lld\nmodel.hidden_size=%lld\nmodel.intermediate_size=%lld\n"
                 "model.num_hidden_layers=%lld\nmodel.num_attention_heads=%lld\n"
                 "model.num_key_value_heads=%lld\nmodel.num_experts=%lld\n"
                 "prompt tokens=%lld (hash %016llx)\ntokens generated=%lld\n",
                 a->agree, (long long)cfg->vocab_size, (long long)cfg->hidden_size,
                 (long long)cfg->intermediate_size, (long long)cfg->num_hidden_layers,
                 (long long)cfg->num_attention_heads, (long long)cfg->num_key_value_heads,
                 (long long)cfg->num_experts, (long long)s->n_prompt, (unsigned long long)h,
                 (long long)s->steps);
        ffn_dist_layout lay = {.tp = a->tp_ranks, .options = agree,
                               .timeout_s = a->dist_timeout > 0 ? a->dist_timeout : -1};
        st = ffn_dist_init(NULL, NULL, &lay, &s->dist);
        int rank = st == FFN_OK ? ffn_dist_rank(s->dist, FFN_DIST_WORLD) : 0;
        if (st == FFN_OK && rank != 0)
            st = freopen("/dev/null", "w", stdout) ? FFN_OK
                 : ffn_set_error(FFN_ERR_IO, "cannot silence stdout on rank %d", rank);
        /* every rank runs the same forwards (they meet in the all-reduces); rank 0 writes */
        if (st == FFN_OK && rank != 0) s->write_dump = 0;
    }
    if (st == FFN_OK) st = ffn_checkpoint_load_any(s->ctx, a->model_path, &s->opt, &s->m, &s->info);
    s->model_params = st == FFN_OK && s->m ? ffn_model_num_params(s->m) : 0; /* before the shares */
    if (s->dist) { /* every rank loaded the model, or all stop; then each keeps its share */
        st = ffn_dist_agree(s->dist, st);
        ffn_model *share = NULL;
        if (st == FFN_OK)
            st = ffn_dist_agree(s->dist, ffn_dist_tp_model_create(s->dist, s->ctx, s->m, &s->opt, &share));
        ffn_model_free(s->m);
        s->m = share;
    }
    if (st) return cli_fail(CMD, st);
    if (a->show_info) run_print_info(a, s);
    if (s->info.n_ignored_tensors > 0)
        fprintf(stderr, "ffn run: note: %lld tensors of the vision tower and projector left unread "
                "(the text model runs)\n", (long long)s->info.n_ignored_tensors);
    st = quantize_loaded(s->m, a->quant, a->quant_embed, a->show_info);
    if (s->dist) st = ffn_dist_agree(s->dist, st);
    return st ? cli_fail(CMD, st) : 0;
}

/* The prompt's logits (--dump-logits), the generated tokens to stdout as
 * they come, or one JSON object at the end. */
static ffn_status run_generate(const run_args *a, run_state *s) {
    ffn_status st = FFN_OK;
    size_t rows_bytes = 0;
    s->seq = malloc((size_t)(s->fed + 1) * sizeof(int32_t));
    if (a->dump) {
        if (__builtin_mul_overflow((size_t)s->fed, (size_t)s->V * sizeof(float), &rows_bytes) ||
            !(s->all = malloc(rows_bytes ? rows_bytes : 1)))
            st = FFN_ERR_NOMEM;
    }
    if (!s->seq) st = FFN_ERR_NOMEM;
    if (st == FFN_OK) memcpy(s->seq, s->ids, (size_t)s->n_prompt * sizeof(int32_t));
    if (st == FFN_OK && a->dump) st = ffn_model_logits(s->m, s->all, s->ids, 1, s->n_prompt);
    int text = s->want_text && s->voc && !a->json;
    s->out = (run_out){.text = text, .V = s->V, .row = s->n_prompt, .rows = s->all, .fed = s->seq};
    if (a->json && !(s->out.ids = malloc((size_t)(s->steps > 0 ? s->steps : 1) * sizeof(int32_t))))
        st = FFN_ERR_NOMEM;
    if (st == FFN_OK) {
        ffn_generate_options g;
        ffn_generate_options_default(&g);
        g.steps = s->steps;
        g.temperature = a->temperature;
        g.top_p = a->top_p;
        g.seed = (uint64_t)a->seed;
        g.allow_unk = 1;    /* ffn run samples from every token */
        g.whole_prompt = 1; /* a prompt of exactly the context is fed whole */
        ffn_generate_callbacks cb = {on_run_token, on_run_logits, &s->out};
        st = ffn_generate_tokens(s->m, text ? s->voc : NULL, s->ids, s->n_prompt, &g, &cb);
    }
    if (st == FFN_OK && a->json) {
        printf("{\"model\": ");
        cli_json_string(stdout, a->model_path);
        printf(", \"prompt_tokens\": %lld, \"generated\": [", (long long)s->n_prompt);
        for (int64_t i = 0; i < s->out.n_emitted; i++) printf(i ? ", %d" : "%d", s->out.ids[i]);
        printf("], \"weight_bytes\": %zu, \"file_bytes\": %lld, \"peak_rss_bytes\": %lld}\n",
               ffn_model_weight_bytes(s->m), (long long)s->info.file_bytes,
               (long long)cli_peak_rss_bytes());
    } else if (st == FFN_OK && (s->steps > 0 || !text)) printf("\n");
    fflush(stdout);
    return st;
}

/* --dump-logits: logits F32 [fed, V] and tokens I32 [fed], written by rank 0. */
static ffn_status run_dump(const run_args *a, run_state *s) {
    ffn_st_writer *w = NULL;
    ffn_status st = ffn_st_writer_create(&w);
    int64_t shape[2] = {s->fed, s->V};
    char meta[64];
    if (st == FFN_OK) st = ffn_st_writer_add(w, "logits", FFN_DTYPE_F32, 2, shape, s->all);
    if (st == FFN_OK) st = ffn_st_writer_add(w, "tokens", FFN_DTYPE_I32, 1, shape, s->seq);
    snprintf(meta, sizeof meta, "%lld", (long long)s->n_prompt);
    if (st == FFN_OK) st = ffn_st_writer_set_metadata(w, "n_prompt", meta);
    if (st == FFN_OK)
        st = ffn_st_writer_set_metadata(w, "rows", "row t: logits after token t; the prompt, "
                                        "then the generated tokens fed back (not the last)");
    if (st == FFN_OK && s->write_dump) st = ffn_st_writer_save(w, a->dump);
    ffn_st_writer_free(w);
    return st;
}

int cmd_run(int argc, char **argv) {
    run_args a;
    int rc;
    if (run_parse(argc, argv, &a, &rc)) return rc;
    run_state s = {0};
    ffn_status st = FFN_OK;
    rc = run_vocabulary(&a, &s);
    if (!rc) rc = run_prompt(&a, &s);
    if (!rc) rc = run_load(&a, &s);
    if (!rc) {
        st = run_generate(&a, &s);
        if (st == FFN_OK && a.dump) st = run_dump(&a, &s);
    }
    run_free(&s);
    if (!rc && s.dist) st = ffn_dist_agree(s.dist, st); /* every rank's result */
    if (!rc && st) rc = cli_fail(CMD, st); /* said before the ranks end together */
    ffn_dist_free(s.dist);
    return rc;
}
