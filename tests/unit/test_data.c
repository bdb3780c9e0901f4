/* test_data.c -- tokenizers (byte, char, word): pieces, vocabulary order and
 * caps, <unk>, round trips (also on tinyshakespeare when ../shared is
 * there), invalid UTF-8, the tokenizer file and each way it can be bad,
 * reading text and splitting token streams; ffn_vocab over every engine
 * (byte, char, word, llama2.c tokenizer.bin): detection of the file kind,
 * round trips, special ids, byte fallback, pieces, errors. */
#include "check.h"

#include <ffn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[256];

static const char *tmp_path(const char *name) {
    static char buf[512];
    snprintf(buf, sizeof buf, "%s/%s", tmpdir, name);
    return buf;
}

static void write_file(const char *path, const char *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(data, 1, n, f);
    fclose(f);
}

static ffn_tokenizer *build(ffn_tokenizer_mode mode, const char *text, int64_t max_vocab) {
    ffn_tokenizer *t = NULL;
    ffn_status st = ffn_tokenizer_build(mode, text, strlen(text), max_vocab, &t);
    CHECK(st == FFN_OK, "build %s: %s", ffn_tokenizer_mode_name(mode), ffn_last_error());
    return t;
}

static int token_is(const ffn_tokenizer *t, int32_t id, const char *s) {
    size_t n;
    const char *p = ffn_tokenizer_token(t, id, &n);
    return p && n == strlen(s) && !memcmp(p, s, n);
}

/* decode(encode(text)) == text, with no <unk>. */
static int round_trip(const ffn_tokenizer *t, const char *text, size_t n, int64_t *n_tokens) {
    int32_t *ids = NULL;
    int64_t *off = NULL, nt = 0, unk = -1;
    if (ffn_tokenizer_encode(t, text, n, &ids, &off, &nt, &unk)) return 0;
    char *back = NULL;
    size_t nb = 0;
    int ok = ffn_tokenizer_decode(t, ids, nt, &back, &nb) == FFN_OK && nb == n && !memcmp(back, text, n) &&
             unk == 0;
    /* offsets: strictly increasing, each token's bytes are its text */
    for (int64_t i = 0; ok && i < nt; i++) {
        size_t len;
        const char *p = ffn_tokenizer_token(t, ids[i], &len);
        int64_t end = i + 1 < nt ? off[i + 1] : (int64_t)n;
        ok = p && (int64_t)len == end - off[i] && !memcmp(p, text + off[i], len);
    }
    if (n_tokens) *n_tokens = nt;
    free(ids);
    free(off);
    free(back);
    return ok;
}

/* ---- byte ---------------------------------------------------------------- */

static void test_byte(void) {
    ffn_tokenizer *t = build(FFN_TOK_BYTE, "anything", 0);
    if (!t) return;
    CHECK(ffn_tokenizer_vocab_size(t) == 257 && ffn_tokenizer_unk_id(t) == 256, "byte V and unk");
    CHECK(token_is(t, 256, "<unk>") && token_is(t, 'A', "A"), "byte tokens");
    const char data[] = "a\0\xff\xc0 \xe4\xbd\n";
    size_t n = sizeof data - 1;
    int32_t *ids;
    int64_t nt, unk;
    CHECK(ffn_tokenizer_encode(t, data, n, &ids, NULL, &nt, &unk) == FFN_OK && nt == (int64_t)n && unk == 0,
          "byte encode of invalid UTF-8 and NUL");
    for (int64_t i = 0; i < nt; i++) CHECK(ids[i] == (unsigned char)data[i], "byte id %lld", (long long)i);
    free(ids);
    CHECK(round_trip(t, data, n, NULL), "byte round trip");
    ffn_tokenizer_free(t);
}

/* ---- char ---------------------------------------------------------------- */

static void test_char(void) {
    const char *text = "héllo wörld, 你好！\n";
    ffn_tokenizer *t = build(FFN_TOK_CHAR, text, 0);
    if (!t) return;
    /* distinct code points: h é l o ' ' w ö r d , 你 好 ！ \n = 14, plus <unk> */
    CHECK(ffn_tokenizer_vocab_size(t) == 15, "char V %lld", (long long)ffn_tokenizer_vocab_size(t));
    CHECK(ffn_tokenizer_unk_id(t) == 0 && token_is(t, 0, "<unk>"), "char unk");
    CHECK(token_is(t, 1, "l"), "most frequent first (l x3)");
    CHECK(token_is(t, 2, " "), "then ' ' (x2)");
    CHECK(token_is(t, 3, "\n") && token_is(t, 4, ","), "ties by bytes: '\\n' < ',' < ... (all x1)");
    CHECK(round_trip(t, text, strlen(text), NULL), "char round trip");
    int32_t *ids;
    int64_t nt, unk;
    CHECK(ffn_tokenizer_encode(t, "hzé", 4, &ids, NULL, &nt, &unk) == FFN_OK && nt == 3 && unk == 1 &&
              ids[1] == 0,
          "unknown char -> <unk>");
    char *back;
    size_t nb;
    CHECK(ffn_tokenizer_decode(t, ids, nt, &back, &nb) == FFN_OK && !strcmp(back, "h<unk>é"), "decode unk: %s",
          back);
    free(back);
    free(ids);
    /* invalid UTF-8, each with its byte offset */
    static const struct {
        const char *s;
        const char *where;
    } bad[] = {{"ab\xff" "cd", "byte offset 2"},    {"a\xc0\xaf", "byte offset 1"},
               {"xy\xed\xa0\x80", "byte offset 2"}, {"abc\xe4\xbd", "byte offset 3"},
               {"\x80", "byte offset 0"},           {"ok\xf5\x80\x80\x80", "byte offset 2"}};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        ffn_status st = ffn_tokenizer_encode(t, bad[k].s, strlen(bad[k].s), &ids, NULL, &nt, NULL);
        CHECK(st == FFN_ERR_FORMAT && strstr(ffn_last_error(), bad[k].where), "encode bad %zu: %s", k,
              ffn_last_error());
        ffn_tokenizer *t2 = NULL;
        st = ffn_tokenizer_build(FFN_TOK_CHAR, bad[k].s, strlen(bad[k].s), 0, &t2);
        CHECK(st == FFN_ERR_FORMAT && t2 == NULL && strstr(ffn_last_error(), bad[k].where), "build bad %zu: %s",
              k, ffn_last_error());
    }
    ffn_tokenizer_free(t);
}

/* ---- word ---------------------------------------------------------------- */

static void expect_pieces(const ffn_tokenizer *t, const char *text, const char *const *want, int n_want) {
    int32_t *ids = NULL;
    int64_t *off = NULL, nt = 0;
    CHECK(ffn_tokenizer_encode(t, text, strlen(text), &ids, &off, &nt, NULL) == FFN_OK, "%s", ffn_last_error());
    CHECK(nt == n_want, "'%s': %lld pieces, expected %d", text, (long long)nt, n_want);
    for (int i = 0; i < n_want && i < nt; i++) {
        int64_t end = i + 1 < nt ? off[i + 1] : (int64_t)strlen(text);
        CHECK((size_t)(end - off[i]) == strlen(want[i]) && !memcmp(text + off[i], want[i], strlen(want[i])),
              "'%s': piece %d is '%.*s', expected '%s'", text, i, (int)(end - off[i]), text + off[i], want[i]);
    }
    free(ids);
    free(off);
}

static void test_word(void) {
    const char *s1 = "Mary gave John the apple.\n";
    ffn_tokenizer *t = build(FFN_TOK_WORD, s1, 0);
    if (!t) return;
    static const char *const w1[] = {"Mary", " gave", " John", " the", " apple", ".", "\n"};
    expect_pieces(t, s1, w1, 7);
    ffn_tokenizer_free(t);

    const char *s2 = "a  b\n\nc ,d\t 王芳给了李伟！ x";
    t = build(FFN_TOK_WORD, s2, 0);
    static const char *const w2[] = {"a", " ", " b", "\n\n", "c", " ,", "d", "\t", " 王", "芳", "给",
                                     "了", "李", "伟", "！", " x"};
    expect_pieces(t, s2, w2, 16);
    CHECK(round_trip(t, s2, strlen(s2), NULL), "word round trip with whitespace");
    ffn_tokenizer_free(t);

    /* a long word is cut at FFN_TOKEN_MAX_BYTES on a code point boundary */
    char longw[256];
    memset(longw, 'x', 100);
    strcpy(longw + 100, " é");
    for (int i = 0; i < 30; i++) memcpy(longw + 103 + 2 * i, "é", 2); /* "é" x31 after the space */
    longw[163] = '\0';
    t = build(FFN_TOK_WORD, longw, 0);
    int64_t nt;
    CHECK(round_trip(t, longw, strlen(longw), &nt), "long word round trip");
    for (int32_t id = 0; id < ffn_tokenizer_vocab_size(t); id++) {
        size_t len;
        ffn_tokenizer_token(t, id, &len);
        CHECK(len <= FFN_TOKEN_MAX_BYTES, "token %d is %zu bytes", id, len);
    }
    CHECK(nt == 3, "100 x's and ' é'x31 (63 bytes): pieces of 64, 36 and 63 bytes, got %lld", (long long)nt);
    ffn_tokenizer_free(t);

    /* vocabulary order: count descending, then bytes */
    t = build(FFN_TOK_WORD, "b a b c c c", 0);
    CHECK(ffn_tokenizer_vocab_size(t) == 5, "V %lld", (long long)ffn_tokenizer_vocab_size(t));
    CHECK(token_is(t, 0, "<unk>") && token_is(t, 1, " c") && token_is(t, 2, " a") && token_is(t, 3, " b") &&
              token_is(t, 4, "b"),
          "order <unk>, ' c', ' a', ' b', 'b'");
    ffn_tokenizer_free(t);
    /* the cap keeps the most frequent */
    t = build(FFN_TOK_WORD, "b a b c c c", 3);
    CHECK(ffn_tokenizer_vocab_size(t) == 3 && token_is(t, 1, " c") && token_is(t, 2, " a"), "max_vocab 3");
    int32_t *ids;
    int64_t unk;
    CHECK(ffn_tokenizer_encode(t, "b c b", 5, &ids, NULL, &nt, &unk) == FFN_OK && nt == 3 && unk == 2 &&
              ids[0] == 0 && ids[1] == 1 && ids[2] == 0,
          "capped-out words -> <unk>");
    free(ids);
    ffn_tokenizer_free(t);

    /* invalid UTF-8 in word mode */
    ffn_tokenizer *t2 = NULL;
    CHECK(ffn_tokenizer_build(FFN_TOK_WORD, "hello w\xffrld", 11, 0, &t2) == FFN_ERR_FORMAT &&
              strstr(ffn_last_error(), "byte offset 7"),
          "word invalid UTF-8: %s", ffn_last_error());
}

/* ---- empty and bad arguments ---------------------------------------------- */

static void test_empty(void) {
    ffn_tokenizer *t = NULL;
    for (int m = FFN_TOK_BYTE; m <= FFN_TOK_WORD; m++) {
        CHECK(ffn_tokenizer_build((ffn_tokenizer_mode)m, "", 0, 0, &t) == FFN_ERR_INVALID_ARG && !t &&
                  strstr(ffn_last_error(), "empty"),
              "empty text, mode %d: %s", m, ffn_last_error());
    }
    CHECK(ffn_tokenizer_build(FFN_TOK_WORD, "a", 1, 1, &t) == FFN_ERR_CONFIG, "max_vocab 1");
    CHECK(ffn_tokenizer_build(FFN_TOK_WORD, "a", 1, -5, &t) == FFN_ERR_CONFIG, "max_vocab < 0");
    t = build(FFN_TOK_CHAR, "abc", 0);
    int32_t *ids = (int32_t *)1;
    int64_t nt = 5;
    CHECK(ffn_tokenizer_encode(t, "", 0, &ids, NULL, &nt, NULL) == FFN_OK && nt == 0 && !ids, "encode empty");
    int32_t bad_ids[] = {1, 99};
    char *out;
    CHECK(ffn_tokenizer_decode(t, bad_ids, 2, &out, NULL) == FFN_ERR_INVALID_ARG &&
              strstr(ffn_last_error(), "token 1"),
          "decode out of range: %s", ffn_last_error());
    CHECK(ffn_tokenizer_token(t, -1, NULL) == NULL && ffn_tokenizer_token(t, 4, NULL) == NULL, "token range");
    ffn_tokenizer_free(t);
    ffn_tokenizer_free(NULL);
    ffn_tokenizer_mode m;
    CHECK(ffn_tokenizer_mode_parse("word", &m) == FFN_OK && m == FFN_TOK_WORD, "mode parse");
    CHECK(ffn_tokenizer_mode_parse("bpe", &m) == FFN_ERR_CONFIG && strstr(ffn_last_error(), "'bpe'"),
          "mode parse bad: %s", ffn_last_error());
}

/* ---- save / load ----------------------------------------------------------- */

static void test_save_load(void) {
    const char *text = "tab\there, back\\slash, cr\r, bell\x07, del\x7f, café, 王芳。\n\nend";
    for (int m = FFN_TOK_BYTE; m <= FFN_TOK_WORD; m++) {
        ffn_tokenizer *t = build((ffn_tokenizer_mode)m, text, 0), *u = NULL;
        if (!t) continue;
        char path[512];
        snprintf(path, sizeof path, "%s", tmp_path("tok.txt"));
        CHECK(ffn_tokenizer_save(t, path) == FFN_OK, "save: %s", ffn_last_error());
        CHECK(access(tmp_path("tok.txt.tmp"), F_OK) != 0, "the temporary file is gone");
        CHECK(ffn_tokenizer_load(path, &u) == FFN_OK, "load mode %d: %s", m, ffn_last_error());
        if (!u) {
            ffn_tokenizer_free(t);
            continue;
        }
        CHECK((int)ffn_tokenizer_get_mode(u) == m && ffn_tokenizer_vocab_size(u) == ffn_tokenizer_vocab_size(t) &&
                  ffn_tokenizer_unk_id(u) == ffn_tokenizer_unk_id(t),
              "loaded header, mode %d", m);
        int same = 1;
        for (int32_t id = 0; id < ffn_tokenizer_vocab_size(t); id++) {
            size_t a, b;
            const char *pa = ffn_tokenizer_token(t, id, &a), *pb = ffn_tokenizer_token(u, id, &b);
            same &= a == b && !memcmp(pa, pb, a);
        }
        CHECK(same, "loaded tokens equal, mode %d", m);
        CHECK(round_trip(u, text, strlen(text), NULL), "loaded tokenizer round trip, mode %d", m);
        char *buf = NULL;
        size_t n = 0;
        CHECK(ffn_text_read(path, &buf, &n) == FFN_OK && !strncmp(buf, "ffn-tokenizer 1\nmode ", 21),
              "file starts with the magic line");
        free(buf);
        ffn_tokenizer_free(t);
        ffn_tokenizer_free(u);
    }
    ffn_tokenizer *t = build(FFN_TOK_CHAR, "ab", 0);
    CHECK(ffn_tokenizer_save(t, "/nonexistent-dir/x/tok.txt") == FFN_ERR_IO &&
              strstr(ffn_last_error(), "/nonexistent-dir/x/tok.txt"),
          "unwritable: %s", ffn_last_error());
    ffn_tokenizer_free(t);
}

/* Each malformed file gets its own error, naming the file and line. */
static void test_bad_files(void) {
    static const struct {
        const char *content;
        size_t len; /* 0: strlen */
        const char *want;
    } cases[] = {
        {"", 0, "empty"},
        {"hello\n", 0, "line 1: expected 'ffn-tokenizer 1'"},
        {"ffn-tokenizer 2\nmode char\nvocab_size 1\n<unk>\n", 0, "line 1: format version '2' is not supported"},
        {"ffn-tokenizer 1\nmode bpe\nvocab_size 1\n<unk>\n", 0, "line 2: expected 'mode byte'"},
        {"ffn-tokenizer 1\nmode char\nvocab_size abc\n<unk>\n", 0, "line 3: expected 'vocab_size V'"},
        {"ffn-tokenizer 1\nmode char\nvocab_size 0\n", 0, "line 3"},
        {"ffn-tokenizer 1\nmode char\nvocab_size 01\n<unk>\n", 0, "line 3"},
        {"ffn-tokenizer 1\nmode char\nvocab_size -1\n", 0, "line 3"},
        {"ffn-tokenizer 1\nmode char\nvocab_size 99999999999\n", 0, "line 3"},
        {"ffn-tokenizer 1\nmode byte\nvocab_size 3\na\nb\nc\n", 0, "line 3: a byte tokenizer has vocab_size 257"},
        {"ffn-tokenizer 1\nmode char\nvocab_size 3\n<unk>\na\n", 0, "line 6: unexpected end of file"},
        {"ffn-tokenizer 1\nmode char\nvocab_size 2\n<unk>\na\nb\n", 0, "line 6: extra content"},
        {"ffn-tokenizer 1\nmode char\nvocab_size 2\nunk\na\n", 0, "line 4 (token 0): expected <unk>"},
        {"ffn-tokenizer 1\nmode char\nvocab_size 3\n<unk>\na\na\n", 0, "line 6"},
        {"ffn-tokenizer 1\nmode char\nvocab_size 2\n<unk>\n\\q\n", 0, "line 5 (token 1): unknown escape"},
        {"ffn-tokenizer 1\nmode char\nvocab_size 2\n<unk>\n\\x4\n", 0, "two hex digits"},
        {"ffn-tokenizer 1\nmode char\nvocab_size 2\n<unk>\n\\\n", 0, "lone"},
        {"ffn-tokenizer 1\nmode char\nvocab_size 2\n<unk>\na\r\n", 0, "carriage return"},
        {"ffn-tokenizer 1\nmode char\nvocab_size 2\n<unk>\nab\n", 0, "line 5 (token 1): a char token must be exactly one code point"},
        {"ffn-tokenizer 1\nmode word\nvocab_size 2\n<unk>\na b\n", 0, "line 5 (token 1): a word token must be exactly one word piece"},
        {"ffn-tokenizer 1\nmode word\nvocab_size 2\n<unk>\n\xff\n", 0, "not valid UTF-8"},
        {"ffn-tokenizer 1\nmode word\nvocab_size 2\n<unk>\n"
         "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n", 0, "longer than the longest"},
        {"ffn-tokenizer 1\nmode word\nvocab_size 2\n<unk>\nab", 0, "line 5: missing line end"},
        {"ffn-tokenizer 1\nmode word\nvocab_size 2\n<unk>\na\0b\n", 49, "line 5: NUL byte"},
        {"ffn-tokenizer 1\nmode word\nvocab_size 2\n<unk>\n\n", 0, "line 5 (token 1): empty token"},
        {"ffn-tokenizer 1\nmode char\nvocab_size 2\n<unk>\n\x01\n", 0, "raw control byte"},
        {"ffn-tokenizer 1\nmode word\nvocab_size 3\n<unk>\n\\x41\nA\n", 0, "line 6: token 2 duplicates token 1"},
        {"ffn-tokenizer 1\r\nmode char\n", 0, "line 1"},
        {"ffn-tokenizer 1", 0, "line 1: missing line end"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        size_t len = cases[k].len ? cases[k].len : strlen(cases[k].content);
        char name[64];
        snprintf(name, sizeof name, "bad%zu.txt", k);
        const char *path = tmp_path(name);
        write_file(path, cases[k].content, len);
        ffn_tokenizer *t = (ffn_tokenizer *)1;
        ffn_status st = ffn_tokenizer_load(path, &t);
        const char *msg = ffn_last_error();
        CHECK(st != FFN_OK && t == NULL && strstr(msg, cases[k].want) && strstr(msg, path),
              "case %zu: want '%s', got status %d '%s'", k, cases[k].want, st, msg);
    }
    /* a byte tokenizer whose token 65 is not 'A' */
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    n += (size_t)snprintf(buf, cap, "ffn-tokenizer 1\nmode byte\nvocab_size 257\n");
    for (int b = 0; b < 256; b++) {
        int c = b == 65 ? 66 : b;
        if (c == '\\') n += (size_t)snprintf(buf + n, cap - n, "\\\\\n");
        else if (c < 0x20 || c >= 0x7f) n += (size_t)snprintf(buf + n, cap - n, "\\x%02x\n", c);
        else n += (size_t)snprintf(buf + n, cap - n, "%c\n", c);
    }
    n += (size_t)snprintf(buf + n, cap - n, "<unk>\n");
    ffn_tokenizer *t = NULL;
    CHECK(ffn_tokenizer_parse(buf, n, "mem", &t) == FFN_ERR_FORMAT &&
              strstr(ffn_last_error(), "mem: line 69 (token 65): a byte tokenizer's token i must be the single byte i"),
          "byte token mismatch: %s", ffn_last_error());
    /* ...and with 'A' in place it loads */
    size_t at = 0;
    for (int line = 0; line < 3 + 65; line++) at = (size_t)(strchr(buf + at, '\n') - buf) + 1;
    buf[at] = 'A';
    CHECK(ffn_tokenizer_parse(buf, n, "mem", &t) == FFN_OK && ffn_tokenizer_vocab_size(t) == 257,
          "a valid byte file: %s", ffn_last_error());
    ffn_tokenizer_free(t);
    free(buf);
    CHECK(ffn_tokenizer_load(tmp_path("missing.txt"), &t) == FFN_ERR_IO && strstr(ffn_last_error(), "missing.txt"),
          "missing file: %s", ffn_last_error());
}

/* A seeded mutation run over a valid file: every variant either loads or
 * fails with a format error that names the buffer; none crashes (run this
 * binary under ASan for the memory side). */
static void test_mutations(void) {
    ffn_corpus *c = NULL;
    ffn_tokenizer *t = NULL;
    if (ffn_corpus_generate(FFN_LANG_EN, 2, 30, &c) || ffn_tokenizer_build(FFN_TOK_WORD, c->text, (size_t)c->n_bytes, 0, &t)) {
        CHECK(0, "setup: %s", ffn_last_error());
        ffn_corpus_free(c);
        return;
    }
    char path[512];
    snprintf(path, sizeof path, "%s", tmp_path("valid.txt"));
    CHECK(ffn_tokenizer_save(t, path) == FFN_OK, "%s", ffn_last_error());
    char *orig;
    size_t n;
    if (ffn_text_read(path, &orig, &n)) return;
    char *buf = malloc(n + 64);
    uint64_t x = 12345;
    int64_t ok = 0, failed = 0, odd = 0;
    for (int iter = 0; iter < 4000; iter++) {
        memcpy(buf, orig, n);
        size_t len = n;
        int edits = 1 + iter % 3;
        for (int e = 0; e < edits && len > 0; e++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            size_t at = (size_t)(x >> 33) % len;
            switch ((x >> 20) % 5) {
            case 0: buf[at] = (char)(x >> 8); break;                        /* change a byte */
            case 1: memmove(buf + at, buf + at + 1, len - at - 1), len--; break; /* delete one */
            case 2:                                                            /* insert one */
                if (len < n + 60) memmove(buf + at + 1, buf + at, len - at), buf[at] = (char)(x >> 40), len++;
                break;
            case 3: len = at; break;                                           /* truncate */
            default: buf[at] = "\\\n\x00\rA "[(x >> 50) % 7]; break;          /* a special byte */
            }
        }
        ffn_tokenizer *u = (ffn_tokenizer *)1;
        ffn_status st = ffn_tokenizer_parse(buf, len, "mem", &u);
        if (st == FFN_OK) {
            ok++;
            ffn_tokenizer_free(u);
        } else {
            failed++;
            if (st != FFN_ERR_FORMAT || u != NULL || strncmp(ffn_last_error(), "mem", 3)) {
                if (odd < 5) fprintf(stderr, "mutation %d: status %d '%s'\n", iter, st, ffn_last_error());
                odd++;
            }
        }
    }
    printf("mutations: %lld loaded, %lld rejected\n", (long long)ok, (long long)failed);
    CHECK(odd == 0 && failed > 1000, "%lld rejections without a format error naming the buffer", (long long)odd);
    free(buf);
    free(orig);
    ffn_tokenizer_free(t);
    ffn_corpus_free(c);
}

/* ---- reading text, splitting -------------------------------------------- */

static void test_text_and_split(void) {
    char *text;
    size_t n;
    write_file(tmp_path("empty.txt"), "", 0);
    CHECK(ffn_text_read(tmp_path("empty.txt"), &text, &n) == FFN_ERR_IO && strstr(ffn_last_error(), "empty"),
          "empty file: %s", ffn_last_error());
    CHECK(ffn_text_read(tmp_path("nope.txt"), &text, &n) == FFN_ERR_IO && strstr(ffn_last_error(), "nope.txt"),
          "missing: %s", ffn_last_error());
    CHECK(ffn_text_read(tmpdir, &text, &n) == FFN_ERR_IO && strstr(ffn_last_error(), "directory"),
          "directory: %s", ffn_last_error());
    write_file(tmp_path("t.txt"), "hi\n", 3);
    CHECK(ffn_text_read(tmp_path("t.txt"), &text, &n) == FFN_OK && n == 3 && !strcmp(text, "hi\n"), "read");
    free(text);

    int64_t a, b;
    CHECK(ffn_tokens_split(100, 0.1, &a, &b) == FFN_OK && a == 90 && b == 10, "100 x 0.1");
    CHECK(ffn_tokens_split(5, 0.1, &a, &b) == FFN_OK && a == 4 && b == 1, "5 x 0.1 keeps one for validation");
    CHECK(ffn_tokens_split(10, 0.0, &a, &b) == FFN_OK && a == 10 && b == 0, "no validation");
    CHECK(ffn_tokens_split(1, 0.1, &a, &b) == FFN_ERR_CONFIG && strstr(ffn_last_error(), "too few"), "1 token");
    CHECK(ffn_tokens_split(0, 0.0, &a, &b) == FFN_ERR_CONFIG, "0 tokens");
    CHECK(ffn_tokens_split(10, 1.0, &a, &b) == FFN_ERR_CONFIG, "fraction 1");
    CHECK(ffn_tokens_split(10, -0.1, &a, &b) == FFN_ERR_CONFIG, "fraction < 0");
}

/* ---- real text: the corpus and, when present, tinyshakespeare ---------- */

static void test_real_text(void) {
    ffn_corpus *c = NULL;
    for (int lang = FFN_LANG_EN; lang <= FFN_LANG_ZH; lang++) {
        CHECK(ffn_corpus_generate((ffn_lang)lang, 3, 2000, &c) == FFN_OK, "%s", ffn_last_error());
        if (!c) continue;
        for (int m = FFN_TOK_BYTE; m <= FFN_TOK_WORD; m++) {
            ffn_tokenizer *t = NULL;
            int64_t nt = 0;
            CHECK(ffn_tokenizer_build((ffn_tokenizer_mode)m, c->text, (size_t)c->n_bytes, 0, &t) == FFN_OK,
                  "%s", ffn_last_error());
            CHECK(t && round_trip(t, c->text, (size_t)c->n_bytes, &nt), "corpus %d round trip mode %d", lang, m);
            if (t) printf("corpus %s, %s: V = %lld, %lld tokens for %lld bytes\n", ffn_lang_name((ffn_lang)lang),
                          ffn_tokenizer_mode_name((ffn_tokenizer_mode)m), (long long)ffn_tokenizer_vocab_size(t),
                          (long long)nt, (long long)c->n_bytes);
            ffn_tokenizer_free(t);
        }
        ffn_corpus_free(c);
        c = NULL;
    }
    const char *shared = getenv("FFN_SHARED");
    char path[1024];
    snprintf(path, sizeof path, "%s/data/tinyshakespeare.txt", shared ? shared : "../shared");
    char *text;
    size_t n;
    if (ffn_text_read(path, &text, &n) != FFN_OK) {
        printf("skip tinyshakespeare: %s\n", ffn_last_error());
        return;
    }
    for (int m = FFN_TOK_CHAR; m <= FFN_TOK_WORD; m++) {
        ffn_tokenizer *t = NULL;
        int64_t nt = 0;
        CHECK(ffn_tokenizer_build((ffn_tokenizer_mode)m, text, n, 0, &t) == FFN_OK, "%s", ffn_last_error());
        CHECK(t && round_trip(t, text, n, &nt), "tinyshakespeare round trip, mode %d", m);
        if (t) printf("tinyshakespeare %s: V = %lld, %lld tokens\n", ffn_tokenizer_mode_name((ffn_tokenizer_mode)m),
                      (long long)ffn_tokenizer_vocab_size(t), (long long)nt);
        if (m == FFN_TOK_CHAR) CHECK(t && ffn_tokenizer_vocab_size(t) == 66, "65 characters + <unk>");
        ffn_tokenizer_free(t);
    }
    ffn_tokenizer *t = NULL;
    CHECK(ffn_tokenizer_build(FFN_TOK_WORD, text, n, 1000, &t) == FFN_OK && ffn_tokenizer_vocab_size(t) == 1000,
          "capped word vocabulary");
    int32_t *ids;
    int64_t nt, unk;
    CHECK(t && ffn_tokenizer_encode(t, text, n, &ids, NULL, &nt, &unk) == FFN_OK && unk > 0 && unk < nt / 2,
          "some <unk> with a cap of 1000");
    if (t) free(ids);
    ffn_tokenizer_free(t);
    free(text);
}

/* ---- ffn_vocab ------------------------------------------------------------------ */

/* A small llama2.c tokenizer.bin: <unk> <s> </s>, the 256 byte pieces,
 * then " ", "a", "b", "ab", " a", " ab" (higher scores for longer pieces). */
static void put(char *buf, size_t cap, size_t *at, const void *p, size_t n) {
    if (*at <= cap && n <= cap - *at) memcpy(buf + *at, p, n);
    *at += n;
}

static size_t make_tokenizer_bin(char *buf, size_t cap, int with_bytes) {
    size_t at = 0;
#define PUT(p, n) put(buf, cap, &at, (p), (size_t)(n))
    int32_t max_len = 8;
    PUT(&max_len, 4);
    const char *fixed[] = {"<unk>", "<s>", "</s>"};
    for (int i = 0; i < 3; i++) {
        float sc = 0;
        int32_t n = (int32_t)strlen(fixed[i]);
        PUT(&sc, 4); PUT(&n, 4); PUT(fixed[i], (size_t)n);
    }
    for (int b = 0; with_bytes && b < 256; b++) {
        char piece[8];
        snprintf(piece, sizeof piece, "<0x%02X>", b);
        float sc = 0;
        int32_t n = 6;
        PUT(&sc, 4); PUT(&n, 4); PUT(piece, 6);
    }
    const char *words[] = {" ", "a", "b", "ab", " a", " ab"};
    const float scores[] = {-5, -4, -4, -1, -2, 0};
    for (int i = 0; i < 6; i++) {
        int32_t n = (int32_t)strlen(words[i]);
        PUT(&scores[i], 4); PUT(&n, 4); PUT(words[i], (size_t)n);
    }
#undef PUT
    return at;
}

static void test_vocab(void) {
    /* ffn's engines: the file is told apart by its first line */
    const char *text = "Mary gave John the apple.\nJohn was hungry.\n";
    for (int m = 0; m < 3; m++) {
        ffn_tokenizer *t = build((ffn_tokenizer_mode)m, text, 0);
        char name[32];
        snprintf(name, sizeof name, "v%d.txt", m);
        CHECK(t && ffn_tokenizer_save(t, tmp_path(name)) == FFN_OK, "%s", ffn_last_error());
        const int64_t V = t ? ffn_tokenizer_vocab_size(t) : 0;
        ffn_tokenizer_free(t);
        ffn_vocab *v = NULL;
        CHECK(ffn_vocab_load(tmp_path(name), 0, &v) == FFN_OK && v, "load %s: %s", name, ffn_last_error());
        if (!v) continue;
        CHECK((int)ffn_vocab_get_kind(v) == m && ffn_vocab_size(v) == V, "kind %s, V %lld",
              ffn_vocab_kind_name(ffn_vocab_get_kind(v)), (long long)ffn_vocab_size(v));
        ffn_vocab_special sp = ffn_vocab_specials(v);
        CHECK(sp.bos == -1 && sp.eos == -1 && sp.pad == -1 && sp.unk == (m == 0 ? 256 : 0),
              "specials %d %d %d %d", sp.bos, sp.eos, sp.unk, sp.pad);
        CHECK(ffn_vocab_byte_fallback(v) == (m == 0), "byte fallback of mode %d", m);
        CHECK(ffn_vocab_tokenizer(v) && !ffn_vocab_llama2c(v), "engine accessors");
        int exact = -1;
        CHECK(ffn_vocab_roundtrip(v, text, strlen(text), &exact) == FFN_OK && exact == 1,
              "mode %d: decode(encode(x)) == x", m);
        const char *unseen = "Zebra quux\n";
        CHECK(ffn_vocab_roundtrip(v, unseen, strlen(unseen), &exact) == FFN_OK && exact == (m == 0),
              "mode %d: text outside the vocabulary round-trips only with byte fallback (%d)", m, exact);
        int32_t *ids = NULL;
        int64_t n = 0;
        CHECK(ffn_vocab_encode(v, text, strlen(text), 1, &ids, &n) == FFN_OK && n > 0,
              "encode with add_bos (no bos: ignored)");
        char *back = NULL;
        size_t nb = 0;
        CHECK(ids && ffn_vocab_decode(v, -1, ids, n, &back, &nb) == FFN_OK && nb == strlen(text) &&
                  !memcmp(back, text, nb), "decode");
        free(back);
        const char *bytes;
        size_t len;
        char b1[1];
        CHECK(ids && ffn_vocab_piece(v, -1, ids[0], b1, &bytes, &len) == FFN_OK && len >= 1 &&
                  !memcmp(bytes, text, len), "piece of the first token");
        CHECK(ffn_vocab_piece(v, -1, (int32_t)V, b1, &bytes, &len) == FFN_ERR_INVALID_ARG,
              "piece of id V is an error");
        int32_t bad[2] = {0, -1};
        CHECK(ffn_vocab_decode(v, -1, bad, 2, &back, &nb) == FFN_ERR_INVALID_ARG &&
                  strstr(ffn_last_error(), "token 1"), "decode names the bad position: %s", ffn_last_error());
        free(ids);
        CHECK(ffn_vocab_encode(v, "", 0, 0, &ids, &n) == FFN_OK && n == 0 && !ids, "empty text");
        free(ids);
        ffn_vocab_free(v);
        /* expected_vocab */
        CHECK(ffn_vocab_load(tmp_path(name), V + 1, &v) == FFN_ERR_CONFIG && !v &&
                  strstr(ffn_last_error(), name), "a size the model does not have: %s", ffn_last_error());
    }
    /* invalid UTF-8 through the interface (char) */
    {
        ffn_vocab *v = NULL;
        CHECK(ffn_vocab_from_tokenizer(build(FFN_TOK_CHAR, "abc", 0), &v) == FFN_OK, "wrap");
        int32_t *ids = NULL;
        int64_t n = 0;
        CHECK(v && ffn_vocab_encode(v, "a\xff", 2, 0, &ids, &n) != FFN_OK && strstr(ffn_last_error(), "1"),
              "invalid UTF-8 names its offset: %s", ffn_last_error());
        ffn_vocab_free(v);
    }
    /* the llama2.c engine */
    static char bin[8192];
    size_t nbin = make_tokenizer_bin(bin, sizeof bin, 1);
    write_file(tmp_path("tok.bin"), bin, nbin);
    ffn_vocab *v = NULL;
    CHECK(ffn_vocab_load(tmp_path("tok.bin"), 0, &v) == FFN_OK && v, "load tok.bin: %s", ffn_last_error());
    if (v) {
        CHECK(ffn_vocab_get_kind(v) == FFN_VOCAB_LLAMA2C && ffn_vocab_size(v) == 3 + 256 + 6 &&
                  ffn_vocab_llama2c(v) && !ffn_vocab_tokenizer(v), "llama2c kind and size");
        ffn_vocab_special sp = ffn_vocab_specials(v);
        CHECK(sp.bos == 1 && sp.eos == 2 && sp.unk == 0 && sp.pad == -1, "llama2c specials");
        CHECK(ffn_vocab_byte_fallback(v) == 1, "all 256 byte pieces: byte fallback");
        int32_t *ids = NULL;
        int64_t n = 0;
        CHECK(ffn_vocab_encode(v, "ab", 2, 1, &ids, &n) == FFN_OK && n == 2 && ids[0] == 1 &&
                  ids[1] == 3 + 256 + 5, "bos then the merged ' ab' (got %lld ids)", (long long)n);
        char *back = NULL;
        CHECK(ids && ffn_vocab_decode(v, ids[0], ids + 1, n - 1, &back, NULL) == FFN_OK && !strcmp(back, "ab"),
              "after bos the leading space goes: '%s'", back ? back : "");
        free(back);
        free(ids);
        int exact = 0;
        const char *odd = "ab\xc3\xa9z";
        CHECK(ffn_vocab_roundtrip(v, odd, strlen(odd), &exact) == FFN_OK && exact == 1,
              "bytes outside the pieces round-trip through <0xXX>");
        const char *bytes;
        size_t len;
        char b1[1];
        CHECK(ffn_vocab_piece(v, -1, 3 + 0x41, b1, &bytes, &len) == FFN_OK && len == 1 && bytes[0] == 'A',
              "the piece of <0x41> is 'A'");
        ffn_vocab_free(v);
    }
    nbin = make_tokenizer_bin(bin, sizeof bin, 0);
    CHECK(ffn_vocab_parse(bin, nbin, "nobytes.bin", 0, &v) == FFN_OK && v && !ffn_vocab_byte_fallback(v),
          "without byte pieces: no byte fallback");
    ffn_vocab_free(v);
    v = NULL;
    CHECK(ffn_vocab_parse(bin, nbin, "nobytes.bin", 100, &v) != FFN_OK && !v &&
              strstr(ffn_last_error(), "nobytes.bin"), "a tokenizer.bin shorter than the model's V: %s",
          ffn_last_error());
    /* neither kind */
    write_file(tmp_path("junk.txt"), "hello world\n", 12);
    CHECK(ffn_vocab_load(tmp_path("junk.txt"), 0, &v) != FFN_OK && !v && strstr(ffn_last_error(), "junk.txt") &&
              strstr(ffn_last_error(), "not an ffn tokenizer"), "junk: %s", ffn_last_error());
    CHECK(ffn_vocab_load(tmp_path("none.txt"), 0, &v) == FFN_ERR_IO && strstr(ffn_last_error(), "none.txt"),
          "a missing file");
    CHECK(ffn_vocab_from_tokenizer(NULL, &v) == FFN_ERR_INVALID_ARG, "NULL engine");
    /* not a regular file: refused at once (a FIFO would block) */
    CHECK(mkfifo(tmp_path("fifo"), 0600) == 0, "mkfifo");
    CHECK(ffn_vocab_load(tmp_path("fifo"), 0, &v) == FFN_ERR_IO && strstr(ffn_last_error(), "regular"),
          "a FIFO: %s", ffn_last_error());
    ffn_llama2c_tokenizer *l2 = NULL;
    CHECK(ffn_llama2c_tokenizer_load(tmp_path("fifo"), 0, &l2) == FFN_ERR_IO && !l2, "a FIFO as tokenizer.bin");
    CHECK(ffn_vocab_load(tmpdir, 0, &v) == FFN_ERR_IO, "a directory");
    ffn_vocab_free(NULL);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ffn_test_data_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_byte();
    test_char();
    test_word();
    test_empty();
    test_save_load();
    test_bad_files();
    test_mutations();
    test_text_and_split();
    test_real_text();
    test_vocab();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return check_done("test_data");
}
