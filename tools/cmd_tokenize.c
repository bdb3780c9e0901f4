/* cmd_tokenize.c -- `ffn tokenize` (text to token ids) and `ffn
 * detokenize` (ids to text) with any vocabulary ffn reads: a Hugging Face
 * tokenizer.json (or a model directory holding one), the tokenizer of a
 * GGUF file, a llama2.c tokenizer.bin, ffn's tokenizer.txt. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A JSON string of n bytes: escapes, and U+FFFD for a byte that is not
 * UTF-8 (JSON holds text only; --ids-only and the plain output keep the
 * bytes as they are). */
static void json_bytes(FILE *f, const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        int len = c < 0x80 ? 1 : (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3
                  : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
        int ok = len > 0 && i + (size_t)len <= n;
        for (int k = 1; ok && k < len; k++) ok = (u[i + (size_t)k] & 0xC0) == 0x80;
        if (ok && len == 3) {
            unsigned v = (c & 0x0F) << 12 | (u[i + 1] & 0x3F) << 6 | (u[i + 2] & 0x3F);
            ok = v >= 0x800 && (v < 0xD800 || v > 0xDFFF);
        } else if (ok && len == 4) {
            unsigned v = (c & 0x07) << 18 | (u[i + 1] & 0x3F) << 12 | (u[i + 2] & 0x3F) << 6 |
                         (u[i + 3] & 0x3F);
            ok = v >= 0x10000 && v <= 0x10FFFF;
        }
        if (!ok) {
            fputs("\\ufffd", f);
            i++;
            continue;
        }
        if (len > 1) {
            fwrite(u + i, 1, (size_t)len, f);
            i += (size_t)len;
            continue;
        }
        if (c == 0x7F) fputs("\\u007f", f);
        else cli_json_char(f, c);
        i++;
    }
    fputc('"', f);
}

/* The --tokenizer option of both commands. */
#define TOKENIZER_OPT(dest)                                                                     \
    {.name = "--tokenizer", .type = CLI_PATH, .dst = (dest), .metavar = "PATH", .def = "",     \
     .help = "the vocabulary: tokenizer.json, a model directory, a .gguf, a tokenizer.bin or " \
             "tokenizer.txt (required)", .required = 1}

/* The inputs of either command: each value of the inline flag (--text,
 * --ids) or each --file is one input; either flag may repeat, the two are
 * not mixed (their order would be lost).  Files are read before the
 * vocabulary is loaded and before anything is printed, so a bad input
 * stops the command with no output. */
#define MAX_INPUTS 4096

typedef struct inputs {
    const char *inl[MAX_INPUTS], *file[MAX_INPUTS];
    int n_inl, n_file;
    char *buf[MAX_INPUTS]; /* the bytes of each file (NUL-terminated) */
    size_t len[MAX_INPUTS];
} inputs;

/* The two input options of a command, filling `in` (an inputs). */
#define INPUT_OPTS(in, inl_name, inl_metavar, inl_help, file_help)                              \
    {.name = (inl_name), .type = CLI_STR, .dst = (in).inl, .max_count = MAX_INPUTS,              \
     .count = &(in).n_inl, .def = "", .metavar = (inl_metavar),                                 \
     .group = "input (one of; each may repeat)", .help = (inl_help)},                           \
    {.name = "--file", .type = CLI_PATH, .dst = (in).file, .max_count = MAX_INPUTS,              \
     .count = &(in).n_file, .def = "", .metavar = "FILE", .help = (file_help)}

static int inputs_n(const inputs *in) { return in->n_file ? in->n_file : in->n_inl; }

static void inputs_free(inputs *in) {
    for (int i = 0; i < in->n_file; i++) free(in->buf[i]);
}

/* Input i's bytes (a file's or the flag's value). */
static const char *input_bytes(const inputs *in, int i, size_t *n) {
    if (in->n_file) {
        *n = in->len[i];
        return in->buf[i];
    }
    *n = strlen(in->inl[i]);
    return in->inl[i];
}

/* Input i as the user wrote it, for messages: "--file notes.txt", "--text #2"
 * (one of several), "--ids". */
static void input_name(const inputs *in, const char *inl_flag, int i, char *out, size_t cap) {
    if (in->n_file) snprintf(out, cap, "--file %s", in->file[i]);
    else if (in->n_inl > 1) snprintf(out, cap, "%s #%d", inl_flag, i + 1);
    else snprintf(out, cap, "%s", inl_flag);
}

/* An error of input `name` (as cli_fail, the input named first). */
static int fail_input(const char *cmd, const char *name, ffn_status st) {
    fflush(stdout); /* the inputs before it, then the message */
    cli_error(cmd, "%s: %s", name, cli_fail_message(st));
    return CLI_EXIT_FAIL;
}

/* Nonzero (the usage error printed) unless exactly one of the input flags
 * was given (once or more). */
static int inputs_bad(const char *cmd, const char *inl_flag, const inputs *in) {
    if (!in->n_inl != !in->n_file) return 0;
    cli_usage_error(cmd, in->n_inl ? "give %s or --file, not both (each may repeat)"
                                   : "give %s or --file (each may repeat)", inl_flag);
    return 1;
}

/* Reads every file, then loads the vocabulary at
 * `path`; nonzero with the exit status in *rc (the error printed) on
 * failure, everything freed. */
static int read_inputs_open_vocab(const char *cmd, inputs *in, const char *path, ffn_vocab **v,
                                  int *rc) {
    ffn_status st = FFN_OK;
    for (int i = 0; i < in->n_file && st == FFN_OK; i++) {
        st = ffn_text_read(in->file[i], &in->buf[i], &in->len[i]);
        if (st) in->n_file = i; /* the ones read, to free */
    }
    if (st == FFN_OK) st = ffn_vocab_load(path, 0, v);
    if (st) {
        inputs_free(in);
        *rc = cli_fail(cmd, st);
    }
    return st != FFN_OK;
}

/* ---- ffn tokenize ---------------------------------------------------------------------- */

static const char tok_about[] =
    "Encodes text into token ids with a model's tokenizer and prints the ids,\n"
    "one token a line: the id, the token as the vocabulary writes it, and the\n"
    "bytes it stands for (a JSON string).  PATH is a Hugging Face tokenizer.json\n"
    "(byte-level BPE: GPT-2, Llama-3, Qwen; SentencePiece-style BPE: Llama-2,\n"
    "Mistral, TinyLlama), a model directory holding one (else its tokenizer.txt\n"
    "or tokenizer.bin), a .gguf file (tokenizer.ggml.*), a llama2.c\n"
    "tokenizer.bin or ffn's tokenizer.txt.\n"
    "\n"
    "Specials: as Hugging Face's add_special_tokens=True, the post-processor's\n"
    "template is applied (tokenizer.json: TemplateProcessing, e.g. <s> or\n"
    "<|begin_of_text|> first; GGUF: bos when tokenizer.ggml.add_bos_token; a\n"
    "llama2.c vocabulary: BOS 1); --no-specials leaves it out.  Added tokens\n"
    "written in the text (\"<|im_start|>\", \"<s>\") are always matched as\n"
    "themselves, longest first, as the reference does.\n"
    "\n"
    "Bytes that are not UTF-8: byte-level BPE encodes them as they are (each\n"
    "such byte is a piece of its own, its byte token), so decoding gives the\n"
    "same bytes back; SentencePiece-style BPE turns each into its <0xNN> token.\n"
    "The Python and JavaScript references cannot take such bytes at all: they\n"
    "get text, where a decoder has already made each bad byte U+FFFD.\n";

static const char tok_epilog[] =
    "Several inputs: --text or --file may repeat (not both); each is encoded on\n"
    "its own, with the vocabulary loaded once, and the output has one line per\n"
    "input, in the order given: --ids-only or --json is then required (with\n"
    "--json one object a line, JSON lines).  Every file is read before anything\n"
    "is printed: a file that cannot be read is named and nothing is written.\n"
    "Output: stdout, one line per token \"ID<TAB>TOKEN<TAB>\\\"BYTES\\\"\"; --ids-only:\n"
    "the ids on one line separated by spaces; --json: one object {\"tokenizer\",\n"
    "\"kind\", \"n_tokens\", \"ids\", \"tokens\", \"bytes\"}.  In JSON a byte that is\n"
    "not UTF-8 shows as U+FFFD.  --stats: the encoding rate on stderr.\n"
    "Exit status: 0 on success, 1 when the tokenizer or the text cannot be\n"
    "read, 2 on bad usage.\n"
    "Examples:\n"
    "  ffn tokenize --tokenizer Qwen3-0.6B --text 'Hello, world'\n"
    "  ffn tokenize --tokenizer tokenizer.json --file notes.txt --ids-only\n"
    "  ffn tokenize --tokenizer tokenizer.json --file a.txt --file b.txt --ids-only\n";

/* One input's ids as the chosen output form. */
static void print_encoding(const ffn_vocab *v, const char *tok_path, const int32_t *ids, int64_t k,
                           int ids_only, int json) {
    if (ids_only) {
        for (int64_t i = 0; i < k; i++) printf(i ? " %d" : "%d", ids[i]);
        printf("\n");
    } else if (json) {
        printf("{\"tokenizer\": ");
        cli_json_string(stdout, tok_path);
        printf(", \"kind\": \"%s\", \"n_tokens\": %lld, \"ids\": [",
               ffn_vocab_kind_name(ffn_vocab_get_kind(v)), (long long)k);
        for (int64_t i = 0; i < k; i++) printf(i ? ", %d" : "%d", ids[i]);
        printf("], \"tokens\": [");
        for (int64_t i = 0; i < k; i++) {
            size_t len = 0;
            const char *s = ffn_vocab_token(v, ids[i], &len);
            if (i) printf(", ");
            json_bytes(stdout, s ? s : "", s ? len : 0);
        }
        printf("], \"bytes\": [");
        for (int64_t i = 0; i < k; i++) {
            const char *s = NULL;
            size_t len = 0;
            char b1[1];
            if (i) printf(", ");
            if (ffn_vocab_piece(v, i ? ids[i - 1] : -1, ids[i], b1, &s, &len)) s = "", len = 0;
            json_bytes(stdout, s, len);
        }
        printf("]}\n");
    } else {
        for (int64_t i = 0; i < k; i++) {
            size_t tl = 0, len = 0;
            const char *tok = ffn_vocab_token(v, ids[i], &tl), *s = NULL;
            char b1[1];
            if (ffn_vocab_piece(v, i ? ids[i - 1] : -1, ids[i], b1, &s, &len)) s = "", len = 0;
            printf("%d\t", ids[i]);
            if (tok) fwrite(tok, 1, tl, stdout);
            printf("\t");
            json_bytes(stdout, s, len);
            printf("\n");
        }
    }
}

int cmd_tokenize(int argc, char **argv) {
    static const char CMD[] = "tokenize";
    static inputs in; /* 128 KiB: not on the stack */
    memset(&in, 0, sizeof in);
    const char *tok_path = NULL;
    int ids_only = 0, json = 0, no_specials = 0, stats = 0;
    const cli_opt opts[] = {
        TOKENIZER_OPT(&tok_path),
        INPUT_OPTS(in, "--text", "TEXT", "the text", "a file whose bytes are the text"),
        {.name = "--no-specials", .type = CLI_FLAG, .dst = &no_specials, .group = "output",
         .help = "do not apply the post-processor template (no BOS; HF's "
                 "add_special_tokens=False)"},
        {.name = "--ids-only", .type = CLI_FLAG, .dst = &ids_only,
         .help = "print the ids alone, on one line (one line per input)"},
        CLI_OPT_JSON(&json, "print one JSON object (ids, tokens, bytes; one a line per input)"),
        {.name = "--stats", .type = CLI_FLAG, .dst = &stats,
         .help = "print the bytes, tokens and encoding rate (MB/s) on stderr"},
        {0}};
    const cli_spec spec = {.cmd = CMD,
                           .synopsis = "--tokenizer PATH (--text TEXT... | --file FILE...) [options]",
                           .about = tok_about, .epilog = tok_epilog, .opts = opts};
    int rc;
    if (cli_parse(&spec, argc, argv, &rc)) return rc;
    if (inputs_bad(CMD, "--text", &in)) return CLI_EXIT_USAGE;
    if (ids_only && json) return cli_usage_error(CMD, "--ids-only and --json exclude each other");
    if (inputs_n(&in) > 1 && !ids_only && !json)
        return cli_usage_error(CMD, "%d inputs: give --ids-only or --json (one line per input)",
                               inputs_n(&in));

    ffn_vocab *v = NULL;
    if (read_inputs_open_vocab(CMD, &in, tok_path, &v, &rc)) return rc;
    ffn_status st = FFN_OK;
    int i = 0;
    for (; i < inputs_n(&in) && st == FFN_OK; i++) {
        size_t n = 0;
        const char *src = input_bytes(&in, i, &n);
        int32_t *ids = NULL;
        int64_t k = 0;
        double t0 = cli_seconds();
        st = ffn_vocab_encode(v, src, n, !no_specials, &ids, &k);
        double dt = cli_seconds() - t0;
        if (st) break;
        if (stats) {
            char name[64 + 4096] = "";
            if (inputs_n(&in) > 1) {
                input_name(&in, "--text", i, name, sizeof name - 2);
                strcat(name, ": ");
            }
            fprintf(stderr, "ffn tokenize: %s%zu bytes, %lld tokens, %.3f s, %.2f MB/s\n", name, n,
                    (long long)k, dt, dt > 0 ? (double)n / dt / 1e6 : 0.0);
        }
        print_encoding(v, tok_path, ids, k, ids_only, json);
        free(ids);
    }
    if (st) {
        char name[64 + 4096];
        input_name(&in, "--text", i, name, sizeof name);
        rc = fail_input(CMD, name, st);
    } else {
        rc = 0;
    }
    inputs_free(&in);
    ffn_vocab_free(v);
    return rc;
}

/* ---- ffn detokenize -------------------------------------------------------------------- */

static const char detok_about[] =
    "Decodes token ids back into text with a model's tokenizer (PATH as for\n"
    "`ffn tokenize`) and writes the bytes to stdout, without a newline of its\n"
    "own.  Byte-level BPE gives back exactly the bytes that were encoded\n"
    "(also bytes that are not UTF-8); SentencePiece-style BPE turns U+2581\n"
    "into spaces and <0xNN> tokens into their bytes, and drops the one space\n"
    "the encoder put before the text (at the very start only, as the reference).\n"
    "Special tokens (bos, <|im_start|>, ...) are written as their text unless\n"
    "--skip-specials (Hugging Face's skip_special_tokens=True).\n";

static const char detok_epilog[] =
    "Several inputs: --ids or --file may repeat (not both); each is decoded on\n"
    "its own, with the vocabulary loaded once, in the order given.  As a decoded\n"
    "text may hold newlines, several inputs need --json (one object a line, JSON\n"
    "lines) or --null (each text followed by a NUL byte, as xargs -0 reads).\n"
    "Every input is read and checked before anything is printed: a file that\n"
    "cannot be read, or a bad id, is named and nothing is written.\n"
    "Output: stdout, the decoded bytes; --json: {\"text\": ...} (bytes that are not\n"
    "UTF-8 show as U+FFFD there).\n"
    "Exit status: 0 on success, 1 when the tokenizer cannot be read or an id is\n"
    "outside the vocabulary, 2 on bad usage.\n"
    "Examples:\n"
    "  ffn detokenize --tokenizer tokenizer.json --ids \"9906 11 1917\"\n"
    "  ffn detokenize --tokenizer tokenizer.json --file a.ids --file b.ids --json\n";

int cmd_detokenize(int argc, char **argv) {
    static const char CMD[] = "detokenize";
    static inputs in;
    static int32_t *ids[MAX_INPUTS];
    static int64_t n_ids[MAX_INPUTS];
    memset(&in, 0, sizeof in);
    const char *tok_path = NULL;
    int json = 0, skip = 0, nul = 0;
    const cli_opt opts[] = {
        TOKENIZER_OPT(&tok_path),
        INPUT_OPTS(in, "--ids", "\"1 2 3\"", "token ids, separated by spaces or commas",
                   "a file of token ids (spaces, commas or newlines between them)"),
        {.name = "--skip-specials", .type = CLI_FLAG, .dst = &skip, .group = "output",
         .help = "leave special tokens out"},
        CLI_OPT_JSON(&json, "print {\"text\": ...} (one a line per input)"),
        {.name = "--null", .type = CLI_FLAG, .dst = &nul,
         .help = "write a NUL byte after each text (to split several inputs' texts)"},
        {0}};
    const cli_spec spec = {.cmd = CMD,
                           .synopsis = "--tokenizer PATH (--ids \"1 2 3\"... | --file FILE...) "
                                       "[options]",
                           .about = detok_about, .epilog = detok_epilog, .opts = opts};
    int rc;
    if (cli_parse(&spec, argc, argv, &rc)) return rc;
    if (inputs_bad(CMD, "--ids", &in)) return CLI_EXIT_USAGE;
    if (json && nul) return cli_usage_error(CMD, "--json and --null exclude each other");
    if (inputs_n(&in) > 1 && !json && !nul)
        return cli_usage_error(CMD, "%d inputs: give --json (one line per input) or --null (a NUL "
                               "after each text)", inputs_n(&in));
    ffn_vocab *v = NULL;
    if (read_inputs_open_vocab(CMD, &in, tok_path, &v, &rc)) return rc;
    int n = inputs_n(&in), parsed = 0;
    char name[64 + 4096];
    rc = 0;
    for (; parsed < n; parsed++) {
        size_t len = 0;
        const char *s = input_bytes(&in, parsed, &len);
        input_name(&in, "--ids", parsed, name, sizeof name);
        /* no ids (an empty text's line of --ids-only) decode to no bytes */
        if (!s[strspn(s, " ,\t\r\n")]) {
            ids[parsed] = NULL;
            n_ids[parsed] = 0;
            continue;
        }
        if (!cli_parse_ids(CMD, name, s, ffn_vocab_size(v), &ids[parsed], &n_ids[parsed])) {
            rc = CLI_EXIT_USAGE;
            break;
        }
    }
    for (int i = 0; i < n && rc == 0; i++) {
        char *out = NULL;
        size_t nb = 0;
        ffn_status st = ffn_vocab_decode_ex(v, -1, ids[i], n_ids[i], skip, &out, &nb);
        if (st) {
            input_name(&in, "--ids", i, name, sizeof name);
            rc = fail_input(CMD, name, st);
        } else if (json) {
            printf("{\"text\": ");
            json_bytes(stdout, out, nb);
            printf("}\n");
        } else {
            fwrite(out, 1, nb, stdout);
            if (nul) putchar('\0');
        }
        free(out);
    }
    for (int i = 0; i < parsed; i++) free(ids[i]);
    inputs_free(&in);
    ffn_vocab_free(v);
    return rc;
}
