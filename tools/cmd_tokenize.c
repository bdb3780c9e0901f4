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

/* The bytes of `file` (when given) into *buf, *n, then the vocabulary at
 * `path`; nonzero with the exit status in *rc (the error printed) on failure. */
static int read_input_open_vocab(const char *cmd, const char *file, const char *path, char **buf,
                                 size_t *n, ffn_vocab **v, int *rc) {
    ffn_status st = file ? ffn_text_read(file, buf, n) : FFN_OK;
    if (st == FFN_OK && (st = ffn_vocab_load(path, 0, v))) {
        free(*buf);
        *buf = NULL;
    }
    if (st) *rc = cli_fail(cmd, st);
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
    "Output: stdout, one line per token \"ID<TAB>TOKEN<TAB>\\\"BYTES\\\"\"; --ids-only:\n"
    "the ids on one line separated by spaces; --json: one object {\"tokenizer\",\n"
    "\"kind\", \"n_tokens\", \"ids\", \"tokens\", \"bytes\"}.  In JSON a byte that is\n"
    "not UTF-8 shows as U+FFFD.  --stats: the encoding rate on stderr.\n"
    "Exit status: 0 on success, 1 when the tokenizer or the text cannot be\n"
    "read, 2 on bad usage.\n"
    "Examples:\n"
    "  ffn tokenize --tokenizer Qwen3-0.6B --text 'Hello, world'\n"
    "  ffn tokenize --tokenizer tokenizer.json --file notes.txt --ids-only\n";

int cmd_tokenize(int argc, char **argv) {
    static const char CMD[] = "tokenize";
    const char *tok_path = NULL, *text = NULL, *file = NULL;
    int ids_only = 0, json = 0, no_specials = 0, stats = 0;
    const cli_opt opts[] = {
        TOKENIZER_OPT(&tok_path),
        {.name = "--text", .type = CLI_STR, .dst = &text, .metavar = "TEXT", .group = "input (one of)",
         .help = "the text"},
        {.name = "--file", .type = CLI_PATH, .dst = &file, .metavar = "FILE",
         .help = "a file whose bytes are the text"},
        {.name = "--no-specials", .type = CLI_FLAG, .dst = &no_specials, .group = "output",
         .help = "do not apply the post-processor template (no BOS; HF's "
                 "add_special_tokens=False)"},
        {.name = "--ids-only", .type = CLI_FLAG, .dst = &ids_only,
         .help = "print the ids alone, on one line"},
        CLI_OPT_JSON(&json, "print one JSON object (ids, tokens, bytes)"),
        {.name = "--stats", .type = CLI_FLAG, .dst = &stats,
         .help = "print the bytes, tokens and encoding rate (MB/s) on stderr"},
        {0}};
    const cli_spec spec = {.cmd = CMD,
                           .synopsis = "--tokenizer PATH (--text TEXT | --file FILE) [options]",
                           .about = tok_about, .epilog = tok_epilog, .opts = opts};
    int rc;
    if (cli_parse(&spec, argc, argv, &rc)) return rc;
    if (!text == !file) return cli_usage_error(CMD, "give exactly one of --text and --file");
    if (ids_only && json) return cli_usage_error(CMD, "--ids-only and --json exclude each other");

    char *buf = NULL;
    size_t n = 0;
    ffn_vocab *v = NULL;
    if (read_input_open_vocab(CMD, file, tok_path, &buf, &n, &v, &rc)) return rc;
    if (!file) n = strlen(text);
    const char *src = file ? buf : text;
    int32_t *ids = NULL;
    int64_t k = 0;
    double t0 = cli_seconds();
    ffn_status st = ffn_vocab_encode(v, src, n, !no_specials, &ids, &k);
    double dt = cli_seconds() - t0;
    if (st) {
        free(buf);
        ffn_vocab_free(v);
        return cli_fail(CMD, st);
    }
    if (stats)
        fprintf(stderr, "ffn tokenize: %zu bytes, %lld tokens, %.3f s, %.2f MB/s\n", n,
                (long long)k, dt, dt > 0 ? (double)n / dt / 1e6 : 0.0);
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
    free(ids);
    free(buf);
    ffn_vocab_free(v);
    return 0;
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
    "Output: stdout, the decoded bytes; --json: {\"text\": ...} (bytes that are not\n"
    "UTF-8 show as U+FFFD there).\n"
    "Exit status: 0 on success, 1 when the tokenizer cannot be read or an id is\n"
    "outside the vocabulary, 2 on bad usage.\n"
    "Example:\n"
    "  ffn detokenize --tokenizer tokenizer.json --ids \"9906 11 1917\"\n";

int cmd_detokenize(int argc, char **argv) {
    static const char CMD[] = "detokenize";
    const char *tok_path = NULL, *ids_s = NULL, *file = NULL;
    int json = 0, skip = 0;
    const cli_opt opts[] = {
        TOKENIZER_OPT(&tok_path),
        {.name = "--ids", .type = CLI_STR, .dst = &ids_s, .metavar = "\"1 2 3\"",
         .group = "input (one of)", .help = "token ids, separated by spaces or commas"},
        {.name = "--file", .type = CLI_PATH, .dst = &file, .metavar = "FILE",
         .help = "a file of token ids (spaces, commas or newlines between them)"},
        {.name = "--skip-specials", .type = CLI_FLAG, .dst = &skip, .group = "output",
         .help = "leave special tokens out"},
        CLI_OPT_JSON(&json, "print {\"text\": ...}"),
        {0}};
    const cli_spec spec = {.cmd = CMD,
                           .synopsis = "--tokenizer PATH (--ids \"1 2 3\" | --file FILE) [options]",
                           .about = detok_about, .epilog = detok_epilog, .opts = opts};
    int rc;
    if (cli_parse(&spec, argc, argv, &rc)) return rc;
    if (!ids_s == !file) return cli_usage_error(CMD, "give exactly one of --ids and --file");
    char *buf = NULL;
    size_t n = 0;
    ffn_vocab *v = NULL;
    if (read_input_open_vocab(CMD, file, tok_path, &buf, &n, &v, &rc)) return rc;
    if (file) ids_s = buf;
    int32_t *ids = NULL;
    int64_t k = 0;
    if (!cli_parse_ids(CMD, file ? "--file" : "--ids", ids_s, ffn_vocab_size(v), &ids, &k)) {
        free(buf);
        ffn_vocab_free(v);
        return CLI_EXIT_USAGE;
    }
    char *out = NULL;
    size_t nb = 0;
    ffn_status st = ffn_vocab_decode_ex(v, -1, ids, k, skip, &out, &nb);
    if (st == FFN_OK) {
        if (json) {
            printf("{\"text\": ");
            json_bytes(stdout, out, nb);
            printf("}\n");
        } else {
            fwrite(out, 1, nb, stdout);
        }
    }
    free(out);
    free(ids);
    free(buf);
    ffn_vocab_free(v);
    return st ? cli_fail(CMD, st) : 0;
}
