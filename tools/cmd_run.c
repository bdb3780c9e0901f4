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
"                               qwen2 or qwen2moe; f32, f16, bf16, q8_0, q4_0,\n"
"                               q4_K, q6_K; its matrices stay in their type,\n"
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
static const char *const quant_names[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_K", "q6_K",
                                          NULL};
static const int quant_values[] = {FFN_GGML_TYPE_F32,  FFN_GGML_TYPE_F16,  FFN_GGML_TYPE_BF16,
                                   FFN_GGML_TYPE_Q8_0, FFN_GGML_TYPE_Q4_0, FFN_GGML_TYPE_Q4_K,
                                   FFN_GGML_TYPE_Q6_K};

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

/* ---- the command --------------------------------------------------------------- */

int cmd_run(int argc, char **argv) {
    const char *model_path = NULL, *ids_s = NULL, *prompt = NULL, *tok_path = NULL;
    const char *emit = NULL, *dump = NULL;
    ffn_generate_options gd;
    ffn_generate_options_default(&gd); /* the sampling defaults of ffn generate */
    int64_t steps = gd.steps, threads = 0, seed = (int64_t)gd.seed;
    double temperature = gd.temperature, top_p = gd.top_p;
    int no_bos = 0, show_info = 0, json = 0, emit_choice = -1, quant = -1, quant_embed = -1;
    int precision = FFN_PRECISION_FP32;
    int64_t tp_ranks = 1;
    int write_dump = 1;
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
        {.name = "--quantize", .type = CLI_ENUM, .dst = &quant, .names = quant_names,
         .values = quant_values, .group = "low-precision weights (inference in memory)",
         .def = "none, the weights as loaded",
         .help = "convert every matrix (embedding, attention, FFN, experts, router, head) to "
                 "this ggml type after loading, in memory; norms and biases stay fp32.  A "
                 "matrix whose rows are no whole blocks takes q8_0 (for q4_K, q6_K) or f16 "
                 "instead.  The fp32 copies are given back; --info prints the bytes and types"},
        {.name = "--quantize-embed", .type = CLI_ENUM, .dst = &quant_embed, .names = quant_names,
         .values = quant_values, .def = "the --quantize type",
         .help = "the type of the token embedding and the LM head (e.g. keep them at q8_0 "
                 "under --quantize q4_0)"},
        {0}};
    const cli_pos pos[] = {{.name = "MODEL", .dst = &model_path, .required = 1,
                            .help = "a llama2.c .bin, a Hugging Face or an ffn directory, a GGUF file"},
                           {0}};
    const cli_spec spec = {.cmd = CMD, .synopsis = "MODEL (--ids \"1 2 3\" | --prompt TEXT) [options]",
                           .about = about, .epilog = epilog, .opts = opts, .pos = pos};
    int rc;
    if (cli_parse(&spec, argc, argv, &rc)) return rc;
    int bos = !no_bos;
    if (emit_choice >= 0) emit = emit_names[emit_choice];
    if (!ids_s == !prompt) {
        cli_error(CMD, "give exactly one of --ids and --prompt");
        return CLI_EXIT_USAGE;
    }

    ffn_model_config cfg;
    ffn_checkpoint_info info;
    ffn_status st = ffn_checkpoint_read_config_any(model_path, &cfg, &info);
    if (st) return cli_fail(CMD, st);
    const int64_t V = cfg.vocab_size;
    int64_t ctx_len = cfg.max_position_embeddings;
    if (info.context_cap > 0 && info.context_cap < ctx_len) ctx_len = info.context_cap;

    /* The vocabulary, when one is asked for or needed. */
    ffn_vocab *voc = NULL;
    /* a Hugging Face directory's tokenizer.json comes first */
    char *json_tok = NULL;
    if (!tok_path && ffn_vocab_find_in_dir(model_path, &json_tok) == FFN_OK &&
        !strstr(json_tok, "tokenizer.json")) {
        free(json_tok);
        json_tok = NULL;
    }
    /* a GGUF file carries its own vocabulary (tokenizer.ggml.*) */
    const char *gguf_tok = !tok_path && !json_tok && ffn_checkpoint_is_gguf(model_path) ? model_path : NULL;
    const char *tp = tok_path ? tok_path : json_tok ? json_tok : info.tokenizer_path[0] ? info.tokenizer_path : gguf_tok;
    int want_text = emit ? !strcmp(emit, "text") : 0;
    if (prompt || want_text || (!emit && tp)) {
        if (!tp) {
            /* A Hugging Face tokenizer.json is common and not read: say so. */
            char hf_tok[4096];
            struct stat sb;
            int has_json = snprintf(hf_tok, sizeof hf_tok, "%s/tokenizer.json", model_path) <
                               (int)sizeof hf_tok &&
                           stat(hf_tok, &sb) == 0;
            cli_error(CMD, "%s: no vocabulary found beside the model%s; give --tokenizer FILE%s",
                      model_path,
                      has_json ? " (its tokenizer.json is not read: ffn reads a llama2.c "
                                 "tokenizer.bin or ffn's tokenizer.txt)" : "",
                      prompt ? " or use --ids" : " or --emit ids");
            return CLI_EXIT_FAIL;
        }
        int bad = vocab_open(tp, V, &voc);
        free(json_tok);
        json_tok = NULL;
        if (bad) return CLI_EXIT_FAIL;
        if (!emit) want_text = 1;
    }
    free(json_tok);

    int32_t *ids = NULL;
    int64_t n_prompt = 0;
    if (ids_s) {
        if (!cli_parse_ids(CMD, "--ids", ids_s, V, &ids, &n_prompt)) {
            ffn_vocab_free(voc);
            return CLI_EXIT_USAGE;
        }
    } else {
        st = ffn_vocab_encode(voc, prompt, strlen(prompt), bos, &ids, &n_prompt);
        int32_t unk = ffn_vocab_specials(voc).unk;
        int64_t n_unk = 0;
        for (int64_t i = 0; st == FFN_OK && unk >= 0 && i < n_prompt; i++) n_unk += ids[i] == unk;
        if (st == FFN_OK && n_unk > 0)
            fprintf(stderr, "ffn run: warning: %lld of the prompt's %lld tokens (%.0f%%) are not in "
                    "the vocabulary and read as <unk>\n", (long long)n_unk, (long long)n_prompt,
                    100.0 * (double)n_unk / (double)n_prompt);
    }
    if (st == FFN_OK && n_prompt == 0) {
        cli_error(CMD, "--prompt: the text encodes to no tokens");
        free(ids);
        ffn_vocab_free(voc);
        return CLI_EXIT_USAGE;
    }
    if (st) {
        free(ids);
        ffn_vocab_free(voc);
        return cli_fail(CMD, st);
    }
    if (show_info) {
        fprintf(stderr, "ffn run: prompt ids (%lld):", (long long)n_prompt);
        for (int64_t i = 0; i < n_prompt; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n");
    }
    if (n_prompt > ctx_len) {
        cli_error(CMD, "the prompt has %lld tokens, more than the model's context of %lld%s",
                  (long long)n_prompt, (long long)ctx_len,
                  info.context_cap == ctx_len ? " (its sliding_window: ffn attends to the whole "
                  "context, which equals windowed attention only up to the window)" : "");
        free(ids);
        ffn_vocab_free(voc);
        return CLI_EXIT_USAGE;
    }
    if (n_prompt + steps - 1 > ctx_len) {
        int64_t fit = ctx_len - n_prompt + 1;
        fprintf(stderr, "ffn run: note: generating %lld tokens, not %lld: the context holds %lld\n",
                (long long)fit, (long long)steps, (long long)ctx_len);
        steps = fit;
    }

    /* several processes share the host's cores, as ffn train's ranks do */
    if (threads == 0 && (tp_ranks > 1 || ffn_dist_launched())) threads = ffn_dist_local_threads();
    ffn_ctx *ctx = NULL;
    if (cli_make_ctx(CMD, (int)threads, &ctx)) {
        free(ids);
        ffn_vocab_free(voc);
        return CLI_EXIT_FAIL;
    }
    int64_t fed = n_prompt + (steps > 0 ? steps - 1 : 0); /* tokens the model reads */
    /* a GGUF's low-precision matrices stay as they are (not with --tp: the
     * shares are sliced from fp32 parameters) */
    ffn_model_options opt = {.max_batch = 1, .max_seq = fed > n_prompt ? fed : n_prompt,
                             .low_precision = tp_ranks == 1 && !ffn_dist_launched(),
                             .precision = (ffn_precision)precision};
    ffn_model *m = NULL;
    ffn_dist *dist = NULL;
    if (tp_ranks > 1 || ffn_dist_launched()) { /* several processes: MPI first, then load */
        ffn_dist_layout lay = {.tp = tp_ranks};
        st = ffn_dist_init(NULL, NULL, &lay, &dist);
        if (st == FFN_OK && ffn_dist_rank(dist, FFN_DIST_WORLD) != 0)
            st = freopen("/dev/null", "w", stdout) ? FFN_OK
                 : ffn_set_error(FFN_ERR_IO, "cannot silence stdout on rank %d",
                                 ffn_dist_rank(dist, FFN_DIST_WORLD));
        /* every rank runs the same forwards (they meet in the all-reduces); rank 0 writes */
        if (st == FFN_OK && ffn_dist_rank(dist, FFN_DIST_WORLD) != 0) write_dump = 0;
    }
    if (st == FFN_OK) st = ffn_checkpoint_load_any(ctx, model_path, &opt, &m, &info);
    const int64_t model_params = st == FFN_OK && m ? ffn_model_num_params(m) : 0;
    if (dist) { /* every rank loaded the model, or all stop; then each keeps its share */
        st = ffn_dist_agree(dist, st);
        ffn_model *share = NULL;
        if (st == FFN_OK) st = ffn_dist_agree(dist, ffn_dist_tp_model_create(dist, ctx, m, &opt, &share));
        ffn_model_free(m);
        m = share;
    }
    if (st) {
        free(ids);
        ffn_vocab_free(voc);
        ffn_ctx_free(ctx);
        ffn_dist_free(dist);
        return cli_fail(CMD, st);
    }
    if (show_info) {
        char dtypes[96];
        if (info.format == FFN_CHECKPOINT_LLAMA2C) /* one fp32 block, no tensor table */
            snprintf(dtypes, sizeof dtypes, "weights fp32 (the llama2.c format)");
        else
            snprintf(dtypes, sizeof dtypes, "tensors F32 %d, F16 %d, BF16 %d%s", info.n_dtypes[0],
                     info.n_dtypes[1], info.n_dtypes[2],
                     info.n_dtypes[3] > 0 ? (opt.low_precision ? ", quantized (kept in their type)"
                                                             : ", quantized (dequantized to fp32)")
                                       : "");
        fprintf(stderr, "ffn run: %s (%s, model_type %s): %lld parameters, %lld file(s), %lld "
                "bytes; %s; RoPE %s\n", model_path,
                ffn_checkpoint_format_name(info.format), info.model_type,
                (long long)model_params, (long long)info.n_files,
                (long long)info.file_bytes, dtypes,
                ffn_model_get_config(m)->rope_style == FFN_ROPE_HALF ? "rotate_half" : "interleaved");
        if (dist)
            fprintf(stderr, "ffn run: rank %d of %d (--tp %lld) holds %lld of the parameters, %d "
                    "thread(s)\n", ffn_dist_rank(dist, FFN_DIST_WORLD),
                    ffn_dist_size(dist, FFN_DIST_WORLD), (long long)tp_ranks,
                    (long long)ffn_model_num_params(m), ffn_ctx_threads(ctx));
    }
    if ((st = quantize_loaded(m, quant, quant_embed, show_info))) {
        free(ids);
        ffn_vocab_free(voc);
        ffn_model_free(m);
        ffn_ctx_free(ctx);
        return cli_fail(CMD, st);
    }

    size_t rows_bytes = 0;
    float *all = NULL;
    int32_t *seq = malloc((size_t)(fed + 1) * sizeof(int32_t));
    if (dump) {
        if (__builtin_mul_overflow((size_t)fed, (size_t)V * sizeof(float), &rows_bytes) ||
            !(all = malloc(rows_bytes ? rows_bytes : 1)))
            st = FFN_ERR_NOMEM;
    }
    if (!seq) st = FFN_ERR_NOMEM;
    if (st == FFN_OK) memcpy(seq, ids, (size_t)n_prompt * sizeof(int32_t));
    if (st == FFN_OK && dump) st = ffn_model_logits(m, all, ids, 1, n_prompt);
    int text = want_text && voc && !json;
    run_out out = {.text = text, .V = V, .row = n_prompt, .rows = all, .fed = seq};
    if (json && !(out.ids = malloc((size_t)(steps > 0 ? steps : 1) * sizeof(int32_t))))
        st = FFN_ERR_NOMEM;
    if (st == FFN_OK) {
        ffn_generate_options g;
        ffn_generate_options_default(&g);
        g.steps = steps;
        g.temperature = temperature;
        g.top_p = top_p;
        g.seed = (uint64_t)seed;
        g.allow_unk = 1;    /* ffn run samples from every token */
        g.whole_prompt = 1; /* a prompt of exactly the context is fed whole */
        ffn_generate_callbacks cb = {on_run_token, on_run_logits, &out};
        st = ffn_generate_tokens(m, text ? voc : NULL, ids, n_prompt, &g, &cb);
    }
    if (st == FFN_OK && json) {
        printf("{\"model\": ");
        cli_json_string(stdout, model_path);
        printf(", \"prompt_tokens\": %lld, \"generated\": [", (long long)n_prompt);
        for (int64_t i = 0; i < out.n_emitted; i++) printf(i ? ", %d" : "%d", out.ids[i]);
        printf("], \"weight_bytes\": %zu, \"file_bytes\": %lld, \"peak_rss_bytes\": %lld}\n",
               ffn_model_weight_bytes(m), (long long)info.file_bytes,
               (long long)cli_peak_rss_bytes());
    } else if (st == FFN_OK && (steps > 0 || !text)) printf("\n");
    fflush(stdout);
    if (st == FFN_OK && dump) {
        ffn_st_writer *w = NULL;
        st = ffn_st_writer_create(&w);
        int64_t shape[2] = {fed, V};
        char meta[64];
        if (st == FFN_OK) st = ffn_st_writer_add(w, "logits", FFN_DTYPE_F32, 2, shape, all);
        if (st == FFN_OK) st = ffn_st_writer_add(w, "tokens", FFN_DTYPE_I32, 1, shape, seq);
        snprintf(meta, sizeof meta, "%lld", (long long)n_prompt);
        if (st == FFN_OK) st = ffn_st_writer_set_metadata(w, "n_prompt", meta);
        if (st == FFN_OK)
            st = ffn_st_writer_set_metadata(w, "rows", "row t: logits after token t; the prompt, "
                                            "then the generated tokens fed back (not the last)");
        if (st == FFN_OK && write_dump) st = ffn_st_writer_save(w, dump);
        ffn_st_writer_free(w);
    }
    free(all);
    free(seq);
    free(out.ids);
    free(ids);
    ffn_model_free(m);
    ffn_vocab_free(voc);
    ffn_ctx_free(ctx);
    if (dist) st = ffn_dist_agree(dist, st);
    ffn_dist_free(dist);
    if (st) return cli_fail(CMD, st);
    return 0;
}
