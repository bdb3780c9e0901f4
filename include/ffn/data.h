/* ffn/data.h -- text in, token ids out: tokenizers (byte, char, word), token
 * streams, and the built-in corpus (a generated language with word classes).
 *
 * Part of the public API; include <ffn.h>, not this file.
 *
 * Letters:  N tokens, V vocabulary size.
 *
 * ---- Tokenizers ------------------------------------------------------------
 * Three modes, each with its vocabulary built from training text:
 *   byte  ids 0..255 are the bytes themselves; id 256 is "<unk>" (never
 *         produced by encode, kept so every tokenizer has one).  V = 257.
 *         Any bytes are accepted.
 *   char  one token per UTF-8 code point.  Id 0 is "<unk>", then the code
 *         points of the training text, most frequent first.  Invalid UTF-8
 *         is an error that names the byte offset.
 *   word  the text split into pieces (below).  Id 0 is "<unk>", then the
 *         pieces of the training text, most frequent first.  Invalid UTF-8
 *         is an error that names the byte offset.
 * Ties in frequency are broken by the piece's bytes (memcmp order), so a
 * vocabulary depends on the text alone.  `max_vocab` (> 0) keeps the
 * max_vocab - 1 most frequent symbols plus "<unk>" (char and word; 0 means
 * no cap; ignored for byte).  Symbols not in the vocabulary encode to
 * "<unk>", which decodes to the five characters "<unk>".  For text whose
 * symbols are all in the vocabulary, decode(encode(text)) == text.
 *
 * Word pieces.  Whitespace is ' ', '\t', '\n', '\r', '\v', '\f'.  A piece
 * is one of:
 *   - a run of word characters (anything but whitespace, punctuation and
 *     CJK), optionally with ONE leading ' ' attached ("Mary", " gave");
 *   - one punctuation character (ASCII punctuation, U+2000-U+206F,
 *     U+3000-U+303F, U+FF01-U+FF0F, U+FF1A-U+FF20, U+FF3B-U+FF40,
 *     U+FF5B-U+FF65), with one leading ' ' if there is one;
 *   - one CJK character (U+3040-U+30FF, U+3400-U+4DBF, U+4E00-U+9FFF,
 *     U+F900-U+FAFF, U+20000-U+2FFFF), with one leading ' ' if any;
 *   - a run of whitespace not attached to the next piece ("\n", "  ").
 * Pieces longer than FFN_TOKEN_MAX_BYTES are cut at code point boundaries,
 * so a vocabulary entry is always short.  "Mary gave John the apple.\n" is
 * "Mary", " gave", " John", " the", " apple", ".", "\n".
 *
 * Tokenizer file (ffn_tokenizer_save / _load), UTF-8 text, '\n' line ends:
 *   line 1   ffn-tokenizer 1            (magic and format version)
 *   line 2   mode byte|char|word
 *   line 3   vocab_size V               (1 <= V <= FFN_TOKENIZER_MAX_VOCAB)
 *   then V lines, line 4 + i holding token i escaped: '\\' -> "\\\\",
 *   '\n' -> "\\n", '\t' -> "\\t", '\r' -> "\\r", other bytes < 0x20 and 0x7f
 *   -> "\\xHH"; other bytes as they are.  Then nothing else.
 * Loading checks everything: the magic and version, the mode, V, every
 * escape, "<unk>" at its id, byte tokens equal to their id, char tokens one
 * code point each, word tokens exactly one piece each, no duplicates, no
 * empty token, no extra or missing lines.  An error names the file and the
 * line.  The file is written to a new "<path>.tmp-XXXXXX", fsynced and
 * renamed (ffn_atomic_open).
 *
 * A tokenizer is read-only after build or load: encode, decode and token
 * may be called from several threads at once.
 *
 * Example (a trainer):
 *     char *text; size_t n_bytes;
 *     ffn_text_read("data.txt", &text, &n_bytes);          // errors on empty
 *     ffn_tokenizer *tok;
 *     ffn_tokenizer_build(FFN_TOK_WORD, text, n_bytes, 0, &tok);
 *     int32_t *ids; int64_t n;
 *     ffn_tokenizer_encode(tok, text, n_bytes, &ids, NULL, &n);
 *     int64_t n_train, n_val;
 *     ffn_tokens_split(n, 0.1, &n_train, &n_val);  // train ids[0..n_train), val after
 *     ffn_tokenizer_save(tok, "run/" FFN_TOKENIZER_FILENAME);
 *     ...  later: ffn_tokenizer_load("run/tokenizer.txt", &tok);
 *          ffn_tokenizer_decode(tok, ids, n, &out, &out_len);
 *     free(ids); free(text); ffn_tokenizer_free(tok);
 *
 * ---- The built-in corpus -----------------------------------------------------
 * A deterministic generator (its own PRNG: the same bytes on every machine
 * for a given language, seed and count) of a small language modelled on
 * "she gave him the apple because she was hungry": a person gives an
 * object to another person, and a cause clause's pronoun refers back to one
 * of them.  The pronoun's gender (he/she, 他/她) picks the referent when the
 * two differ, and the predicate fits the referent's role (the receiver "was
 * hungry", the giver "had too many"), so predicting what follows needs
 * attention back to the right name.  Templates add relative clauses,
 * "and then", "when ...", questions, reported speech and possessives.
 * English and Chinese; one sentence per line, each ending in '\n'.
 * Every word is labelled: its byte span, class, and for names and pronouns
 * the gender and role; a pronoun also carries the index of its referent.
 */
#ifndef FFN_DATA_H
#define FFN_DATA_H
#pragma GCC visibility push(default) /* what this header declares is the exported API */

#include "core.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- reading text and splitting token streams ------------------------- */

/* The most ffn_text_read reads from one file: 1 GiB. */
#define FFN_TEXT_MAX_BYTES ((size_t)1 << 30)

/* Read a whole file into a NUL-terminated malloc'd buffer (free() it).
 * A missing, unreadable or empty file is an error naming the path, and so
 * is anything but a regular file (a FIFO, a device such as /dev/zero, a
 * directory: refused without reading) and a file of more than
 * FFN_TEXT_MAX_BYTES. */
ffn_status ffn_text_read(const char *path, char **text, size_t *n_bytes);

/* Split N tokens into a training part ids[0, n_train) and a held-out part
 * ids[n_train, N): n_val = floor(N · val_fraction), at least 1 when
 * val_fraction > 0.  val_fraction in [0, 1); an error when N < 2 (or N < 1
 * with val_fraction == 0) or when either part would be empty. */
ffn_status ffn_tokens_split(int64_t n_tokens, double val_fraction, int64_t *n_train,
                            int64_t *n_val);

/* ---- tokenizers --------------------------------------------------------- */

#define FFN_TOKENIZER_FILENAME "tokenizer.txt" /* its name in a checkpoint dir */
#define FFN_TOKENIZER_VERSION 1
#define FFN_TOKENIZER_MAX_VOCAB (1 << 22) /* loader bound on V */
#define FFN_TOKEN_MAX_BYTES 64            /* longest word piece */

typedef enum ffn_tokenizer_mode {
    FFN_TOK_BYTE = 0,
    FFN_TOK_CHAR,
    FFN_TOK_WORD
} ffn_tokenizer_mode;

/* "byte", "char", "word" and back (parse: an error listing the choices). */
const char *ffn_tokenizer_mode_name(ffn_tokenizer_mode mode);
ffn_status ffn_tokenizer_mode_parse(const char *s, ffn_tokenizer_mode *out);

typedef struct ffn_tokenizer ffn_tokenizer;

/* Build a vocabulary from `text` (n_bytes > 0; empty text is an error).
 * max_vocab: see above (0 = no cap; otherwise >= 2 for char and word). */
ffn_status ffn_tokenizer_build(ffn_tokenizer_mode mode, const char *text, size_t n_bytes,
                               int64_t max_vocab, ffn_tokenizer **out);
void ffn_tokenizer_free(ffn_tokenizer *tok); /* NULL is a no-op */

ffn_tokenizer_mode ffn_tokenizer_get_mode(const ffn_tokenizer *tok);
int64_t ffn_tokenizer_vocab_size(const ffn_tokenizer *tok); /* V */
int32_t ffn_tokenizer_unk_id(const ffn_tokenizer *tok);     /* 256 for byte, else 0 */

/* The bytes of token `id` (not NUL-terminated; *len set), NULL when id is
 * out of [0, V).  For streaming generated text one token at a time. */
const char *ffn_tokenizer_token(const ffn_tokenizer *tok, int32_t id, size_t *len);

/* Encode text into malloc'd arrays (free() them): ids (N) and, when
 * `offsets` is not NULL, the byte offset in `text` where each token starts
 * (N) -- a token covers [offsets[i], offsets[i+1]).  Empty text gives N = 0
 * and NULL arrays.  Invalid UTF-8 (char, word) is an error naming the
 * offset.  *n_unk (may be NULL) counts tokens mapped to "<unk>". */
ffn_status ffn_tokenizer_encode(const ffn_tokenizer *tok, const char *text, size_t n_bytes,
                                int32_t **ids, int64_t **offsets, int64_t *n_tokens,
                                int64_t *n_unk);

/* Decode ids (N) into a NUL-terminated malloc'd string (free() it).  An id
 * outside [0, V) is an error naming its position. */
ffn_status ffn_tokenizer_decode(const ffn_tokenizer *tok, const int32_t *ids, int64_t n_tokens,
                                char **text, size_t *n_bytes);

/* Save / load the file format above.  ffn_tokenizer_parse reads the same
 * format from memory; `name` is used in error messages. */
ffn_status ffn_tokenizer_save(const ffn_tokenizer *tok, const char *path);
ffn_status ffn_tokenizer_load(const char *path, ffn_tokenizer **out);
ffn_status ffn_tokenizer_parse(const char *buf, size_t n_bytes, const char *name,
                               ffn_tokenizer **out);

/* ---- the built-in corpus ------------------------------------------------ */

/* FFN_LANG_FACTS is the facts corpus (below): English sentences of the
 * built-in corpus, every other line (by draw) a trained statement of the
 * default fact set ffn_facts_generate(FFN_FACTS_DEFAULT, seed). */
typedef enum ffn_lang { FFN_LANG_EN = 0, FFN_LANG_ZH, FFN_LANG_FACTS } ffn_lang;
const char *ffn_lang_name(ffn_lang lang); /* "en", "zh", "facts" */
ffn_status ffn_lang_parse(const char *s, ffn_lang *out);

/* Word classes.  The first FFN_WORD_N_CLASSES are real words (targets for
 * probes); FFN_WORD_SPACE labels bytes outside every word. */
typedef enum ffn_word_class {
    FFN_WORD_NAME = 0,  /* "name":     a person's name (Mary, 王芳) */
    FFN_WORD_PRONOUN,   /* "pronoun":  he, her, his, 他, 她, 他的 ... */
    FFN_WORD_OBJECT,    /* "object":   a common noun: the things given, places */
    FFN_WORD_VERB,      /* "verb":     gave, handed, was, 给, 递给, 有 ... */
    FFN_WORD_FUNCTION,  /* "function": determiners, numerals, measure words,
                           prepositions, conjunctions, auxiliaries, particles */
    FFN_WORD_MODIFIER,  /* "modifier": adjectives and adverbs (hungry, red, 很) */
    FFN_WORD_PUNCT,     /* "punct":    . , ? 。 ， ？ */
    FFN_WORD_SPACE      /* "space":    not a word (spaces, newlines) */
} ffn_word_class;
#define FFN_WORD_N_CLASSES 7

const char *ffn_word_class_name(ffn_word_class cls); /* the quoted names above */

typedef enum ffn_gender {
    FFN_GENDER_NONE = 0,
    FFN_GENDER_FEMALE,
    FFN_GENDER_MALE
} ffn_gender;

/* A person's part in the sentence's giving event. */
typedef enum ffn_role {
    FFN_ROLE_NONE = 0, /* not a person */
    FFN_ROLE_GIVER,
    FFN_ROLE_RECEIVER,
    FFN_ROLE_OTHER /* a third person (a teller, a buyer, a neighbour) */
} ffn_role;

typedef struct ffn_word {
    int64_t offset;   /* first byte in ffn_corpus.text */
    int64_t length;   /* bytes */
    int64_t sentence; /* 0-based sentence (line) index */
    int64_t ref;      /* pronouns: index in words[] of the referent -- the latest
                         mention of the person's name (he, her, who, 他的 ...) or
                         the object noun (it, 它); -1 otherwise (expletive "it") */
    int8_t cls;       /* ffn_word_class (never FFN_WORD_SPACE) */
    int8_t gender;    /* names and pronouns: ffn_gender; else FFN_GENDER_NONE */
    int8_t role;      /* names and pronouns: ffn_role of the person; else NONE */
} ffn_word;

/* The text and words arrays are malloc'd: a caller may take one over (set
 * the field to NULL before ffn_corpus_free) and free() it later. */
typedef struct ffn_corpus {
    ffn_lang lang;
    uint64_t seed;
    int64_t n_sentences;
    char *text;       /* UTF-8, NUL-terminated, one sentence a line */
    int64_t n_bytes;  /* strlen(text) */
    ffn_word *words;  /* in text order, non-overlapping */
    int64_t n_words;
} ffn_corpus;

/* Generate n_sentences (1 .. 10,000,000) sentences.  Deterministic: the
 * first k sentences of a longer run equal a run of k.  Memory: about 75
 * bytes of English text and 15 words (sizeof(ffn_word) = 40 bytes each)
 * a sentence -- 20,000 sentences take ~14 MB, 10 million ~7 GB.  Takes
 * about 0.1 s per 20,000 sentences. */
ffn_status ffn_corpus_generate(ffn_lang lang, uint64_t seed, int64_t n_sentences,
                               ffn_corpus **out);
void ffn_corpus_free(ffn_corpus *corpus); /* NULL is a no-op */

/* The index of the first word overlapping bytes [offset, offset + length)
 * (length >= 1), or -1 when they hold no word (a space or newline token).
 * Label a token of any tokenizer:  w = ffn_corpus_word_at(c, off, len);
 * cls = w < 0 ? FFN_WORD_SPACE : c->words[w].cls.  O(log words). */
int64_t ffn_corpus_word_at(const ffn_corpus *corpus, int64_t offset, int64_t length);

/* What the generator draws from, per language (the claims in `ffn corpus
 * --help`, checked by the tests). */
typedef struct ffn_corpus_inventory {
    int64_t female_names, male_names; /* zh: given names; full names = surnames x given */
    int64_t surnames;                 /* zh only (0 for en) */
    int64_t objects;                  /* nouns that can be given */
    int64_t verbs;                    /* giving verbs */
    int64_t templates;                /* sentence templates */
    int64_t giver_causes, receiver_causes; /* cause predicates by role */
    int64_t modifiers;                /* adjectives for objects */
} ffn_corpus_inventory;
ffn_status ffn_corpus_get_inventory(ffn_lang lang, ffn_corpus_inventory *out);

/* ---- the facts corpus ---------------------------------------------------------
 * Fictional subject-relation-object facts with invented names, so that no
 * prior knowledge helps: a person lives in a city (relation "lives_in"),
 * an object has a colour ("colour"), a country has a capital ("capital"),
 * a person has a profession ("profession").  Fact i has relation i % 4;
 * subjects are distinct; capitals are distinct.  Each fact is stated in
 * training through six (frame, form) templates: three forms per relation
 * ("Mira lives in Velm.", "The home of Mira is Velm.", "Mira, who lives
 * in Velm, is kind.") bare and inside frames ("As everyone knows,", "It is
 * true that", "In this story,", "They say that").  Three other (frame,
 * form) pairs are held out: their prompts are the fact's paraphrases,
 * never trained on, in words that all occur in training.  Neighbours are
 * the prompts and objects of up to 3 other facts of the same relation.
 * Deterministic: the same count and seed give the same set everywhere;
 * a larger count keeps the subjects and objects of the first facts.
 *
 * JSONL (ffn_facts_to_jsonl, ffn_facts_parse/_load), one object a line:
 *   {"id": int, "subject": str, "relation": str, "prompt": str (the
 *    trained statement up to the object, e.g. "Mira lives in"), "object":
 *    str, "paraphrases": [str, ...] (held-out prompts ending before the
 *    object), "neighbours": [{"prompt": str, "object": str}, ...]}
 * The reader requires id (integer >= 0), subject, relation, prompt and
 * object (non-empty strings; the prompt must contain the subject) and
 * accepts absent paraphrases/neighbours (at most 64 each); other fields
 * are ignored; blank lines are skipped; errors name the file, the line and
 * the field. */

#define FFN_FACTS_DEFAULT 100    /* the set of the `facts` corpus */
#define FFN_FACTS_MAX 320        /* what ffn_facts_generate can make */
#define FFN_FACTS_FILE_MAX 100000 /* facts a file may hold */

typedef struct ffn_fact_prompt {
    char *prompt; /* ends before the object */
    char *object;
} ffn_fact_prompt;

typedef struct ffn_fact {
    int64_t id;
    char *subject, *relation, *prompt, *object;
    int64_t n_paraphrases;
    char **paraphrases;          /* (n_paraphrases) held-out prompts */
    int64_t n_neighbours;
    ffn_fact_prompt *neighbours; /* (n_neighbours) */
} ffn_fact;

typedef struct ffn_facts {
    int64_t n_facts;
    ffn_fact *facts; /* (n_facts) */
    uint64_t seed;   /* of ffn_facts_generate; 0 for a parsed file */
} ffn_facts;

/* n_facts in 1 .. FFN_FACTS_MAX. */
ffn_status ffn_facts_generate(int64_t n_facts, uint64_t seed, ffn_facts **out);
void ffn_facts_free(ffn_facts *facts); /* NULL is a no-op */
/* The set as JSONL, a malloc'd NUL-terminated string (free() it). */
ffn_status ffn_facts_to_jsonl(const ffn_facts *facts, char **text, size_t *n_bytes);
/* Read JSONL (above); `name` is used in messages. */
ffn_status ffn_facts_parse(const char *text, size_t n_bytes, const char *name, ffn_facts **out);
ffn_status ffn_facts_load(const char *path, ffn_facts **out);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif /* FFN_DATA_H */
