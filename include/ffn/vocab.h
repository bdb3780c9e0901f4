/* ffn/vocab.h -- one interface over every vocabulary ffn reads: text to
 * token ids and back, one token's text, the special tokens, and a loader
 * that tells the kinds of file apart.
 *
 * Part of the public API; include <ffn.h>, not this file.
 *
 * Engines behind ffn_vocab:
 *   byte, char, word  ffn's own tokenizers (data.h), file tokenizer.txt
 *                     (first line "ffn-tokenizer 1");
 *   llama2c           a llama2.c tokenizer.bin (format below), SentencePiece-
 *                     style BPE merges by score with <0xXX> byte fallback;
 *   bpe-byte-level    a Hugging Face tokenizer.json whose pre-tokenizer is
 *                     ByteLevel (GPT-2, Llama-3, Qwen), or a GGUF with
 *                     tokenizer.ggml.model "gpt2";
 *   bpe-sentencepiece a tokenizer.json with SentencePiece spaces (Metaspace,
 *                     or Prepend("▁") + Replace(" ", "▁"): Llama-2, Mistral,
 *                     TinyLlama), or a GGUF with tokenizer.ggml.model "llama".
 * Each engine is a small table of functions (encode, one token's piece,
 * size, free).
 *
 * ---- Hugging Face tokenizer.json and GGUF tokenizers ------------------------
 * Encoding follows the reference (tokenizers / transformers.js) step by
 * step: added tokens are found in the raw text first (longest first, also
 * special ones such as "<|im_start|>"); each stretch between them is
 * normalised (NFC when the normalizer says so), pre-tokenized (byte-level:
 * the Split regex of the file run by PCRE2 with Unicode properties, or
 * GPT-2's when a ByteLevel has use_regex; SentencePiece: spaces to U+2581,
 * one U+2581 prepended) and merged by rank (ignore_merges: a word that is
 * a token is taken whole); SentencePiece code points that are no token
 * become <0xNN> tokens (byte_fallback) or unk (fused with fuse_unk).  A
 * GGUF "llama" merges by the score of the merged piece, as llama.cpp; its
 * "gpt2" takes the regex named by tokenizer.ggml.pre ("llama-bpe"/"llama3":
 * Llama-3's, "qwen2": Qwen's one-digit one, "gpt-2"/absent: GPT-2's).  A
 * GGUF holds no normalizer: no NFC.
 * add_bos (ffn_vocab_encode) applies the post-processor's template, as
 * add_special_tokens=True: TemplateProcessing's specials around the text
 * (a tokenizer.json without one adds nothing), or bos when the GGUF's
 * tokenizer.ggml.add_bos_token (default: "llama" yes, "gpt2" no).
 * bos/eos/pad come from tokenizer_config.json beside the tokenizer.json
 * (else bos is the template's first special), or tokenizer.ggml.*_token_id.
 * Bytes that are not UTF-8 are encoded as they are (byte-level: each its
 * own piece; SentencePiece: <0xNN>), where the references can only see
 * U+FFFD.  Decoding: byte-level pieces are their bytes; SentencePiece
 * pieces turn U+2581 into " " and <0xNN> into the byte, and the text's
 * first space is dropped when the decoder strips it (at the very start
 * only: "<s>" then "▁Hi" is "<s> Hi", as the reference).
 *
 * Special tokens: bos, eos, unk, pad are ids, or -1 when the vocabulary
 * has none.  byte: unk 256; char and word: unk 0; llama2c: bos 1, eos 2,
 * unk 0 when piece 0 is "<unk>".  None of ffn's own has bos, eos or pad.
 *
 * Byte fallback: every byte string encodes without "<unk>" (byte: always;
 * llama2c: when all 256 "<0xXX>" pieces exist; char and word: never).
 *
 * Example:
 *     ffn_vocab *v;
 *     if (ffn_vocab_load("run/tokenizer.txt", 0, &v) != FFN_OK) ...;
 *     int32_t *ids; int64_t n;
 *     ffn_vocab_encode(v, "Mary gave John", 14, 1, &ids, &n);  // 1: add bos if any
 *     char *text; ffn_vocab_decode(v, -1, ids, n, &text, NULL);
 *     free(ids); free(text); ffn_vocab_free(v);
 *
 * ---- llama2.c tokenizer.bin --------------------------------------------------
 * int32 max_token_length, then per token: float32 score, int32 len, len
 * bytes.  The file does not store V: the tokens run to the end of the file
 * (or exactly V tokens when the caller knows V).  Encoding is llama2.c's:
 * optional BOS (id 1), a dummy-prefix " " token when the text is not empty,
 * one token per UTF-8 code point found in the vocabulary, else one
 * "<0xXX>" byte token per byte, then repeatedly merge the adjacent pair
 * whose concatenation is in the vocabulary with the highest score (the
 * leftmost among equal scores; BOS never merges) until no pair merges;
 * optional EOS (id 2).
 * Decoding: "<0xXX>" pieces are the byte XX; a piece following BOS loses
 * its leading space.
 */
#ifndef FFN_VOCAB_H
#define FFN_VOCAB_H
#pragma GCC visibility push(default)

#include "core.h"
#include "data.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the llama2.c tokenizer.bin engine ------------------------------------ */

#define FFN_LLAMA2C_BOS 1
#define FFN_LLAMA2C_EOS 2
#define FFN_LLAMA2C_MAX_TOKEN_LEN 65536 /* loader bound on max_token_length */

typedef struct ffn_llama2c_tokenizer ffn_llama2c_tokenizer;

/* expected_vocab > 0: read exactly that many tokens (the model's V) and
 * reject trailing bytes; 0: read tokens to the end of the file. */
ffn_status ffn_llama2c_tokenizer_load(const char *path, int64_t expected_vocab,
                                      ffn_llama2c_tokenizer **out);
ffn_status ffn_llama2c_tokenizer_parse(const void *buf, size_t n_bytes, const char *name,
                                       int64_t expected_vocab, ffn_llama2c_tokenizer **out);
void ffn_llama2c_tokenizer_free(ffn_llama2c_tokenizer *tok); /* NULL is a no-op */

int64_t ffn_llama2c_tokenizer_vocab_size(const ffn_llama2c_tokenizer *tok);
/* Token id's bytes as stored (not NUL-terminated), NULL when out of range. */
const char *ffn_llama2c_tokenizer_token(const ffn_llama2c_tokenizer *tok, int32_t id,
                                        size_t *len, float *score);

/* Encode into a malloc'd array (free() it); bos/eos add ids 1/2. */
ffn_status ffn_llama2c_tokenizer_encode(const ffn_llama2c_tokenizer *tok, const char *text,
                                        size_t n_bytes, int bos, int eos, int32_t **ids,
                                        int64_t *n_tokens);
/* The bytes token `id` stands for after token `prev` (see the overview);
 * *bytes points into the tokenizer or into `byte_buf` (1 byte). */
ffn_status ffn_llama2c_tokenizer_piece(const ffn_llama2c_tokenizer *tok, int32_t prev, int32_t id,
                                       char byte_buf[1], const char **bytes, size_t *len);
/* Decode ids (N) into a NUL-terminated malloc'd string (free() it); the
 * token before ids[0] is taken to be `prev` (-1: none). */
ffn_status ffn_llama2c_tokenizer_decode(const ffn_llama2c_tokenizer *tok, int32_t prev,
                                        const int32_t *ids, int64_t n_tokens, char **text,
                                        size_t *n_bytes);

/* ---- ffn_vocab ------------------------------------------------------------- */

typedef enum ffn_vocab_kind {
    FFN_VOCAB_BYTE = 0, /* ffn tokenizer.txt, mode byte */
    FFN_VOCAB_CHAR,     /* ffn tokenizer.txt, mode char */
    FFN_VOCAB_WORD,     /* ffn tokenizer.txt, mode word */
    FFN_VOCAB_LLAMA2C,  /* llama2.c tokenizer.bin */
    FFN_VOCAB_BPE_BYTE, /* tokenizer.json or GGUF "gpt2": byte-level BPE */
    FFN_VOCAB_BPE_SP    /* tokenizer.json or GGUF "llama": SentencePiece-style BPE */
} ffn_vocab_kind;

/* "byte", "char", "word", "llama2c", "bpe-byte-level", "bpe-sentencepiece". */
const char *ffn_vocab_kind_name(ffn_vocab_kind kind);

typedef struct ffn_vocab ffn_vocab;

/* Load a vocabulary file, telling the kinds apart by content: a file whose
 * first line is "ffn-tokenizer ..." is ffn's tokenizer file, one starting
 * with "{" a Hugging Face tokenizer.json (a tokenizer_config.json beside it
 * names bos/eos/pad), one starting with "GGUF" a GGUF file's tokenizer,
 * anything else is read as a llama2.c tokenizer.bin.  A directory is
 * searched as by ffn_vocab_find_in_dir.  expected_vocab > 0: the size the
 * model needs (an ffn file must have it; a tokenizer.bin is read to exactly
 * that many tokens; a tokenizer.json or GGUF may have fewer ids, not more);
 * 0: any.  Errors name the file and what is wrong. */
ffn_status ffn_vocab_load(const char *path, int64_t expected_vocab, ffn_vocab **out);
/* The vocabulary file of a model directory, in this order: tokenizer.json
 * (unless it is ffn's own export of the tokenizer.txt beside it, as `ffn
 * export --format hf` writes: then tokenizer.txt), tokenizer.txt,
 * tokenizer.bin.  *path is malloc'd (free() it);
 * FFN_ERR_IO (as for a missing file) when there is none. */
ffn_status ffn_vocab_find_in_dir(const char *dir, char **path);
/* The same from memory (`name` is used in messages). */
ffn_status ffn_vocab_parse(const void *buf, size_t n_bytes, const char *name,
                           int64_t expected_vocab, ffn_vocab **out);

/* The tokenizer of an open GGUF file (tokenizer.ggml.*; see the overview). */
struct ffn_gguf_file;
ffn_status ffn_vocab_from_gguf(const struct ffn_gguf_file *file, int64_t expected_vocab,
                               ffn_vocab **out);

/* Wrap an engine already in memory.  The vocab takes ownership of `tok`
 * (freed by ffn_vocab_free, also when wrapping fails). */
ffn_status ffn_vocab_from_tokenizer(ffn_tokenizer *tok, ffn_vocab **out);
ffn_status ffn_vocab_from_llama2c(ffn_llama2c_tokenizer *tok, ffn_vocab **out);
void ffn_vocab_free(ffn_vocab *vocab); /* NULL is a no-op */

ffn_vocab_kind ffn_vocab_get_kind(const ffn_vocab *vocab);
int64_t ffn_vocab_size(const ffn_vocab *vocab); /* V */

typedef struct ffn_vocab_special {
    int32_t bos, eos, unk, pad; /* -1: none */
} ffn_vocab_special;
ffn_vocab_special ffn_vocab_specials(const ffn_vocab *vocab);

/* 1 when every byte string encodes without "<unk>" (see above). */
int ffn_vocab_byte_fallback(const ffn_vocab *vocab);

/* Encode text into a malloc'd array (free() it; NULL when N = 0).  add_bos
 * prepends bos when the vocabulary has one (and is ignored otherwise; the
 * Hugging Face engines apply their template, see above).
 * Invalid UTF-8 (char, word) is an error naming the offset. */
ffn_status ffn_vocab_encode(const ffn_vocab *vocab, const char *text, size_t n_bytes, int add_bos,
                            int32_t **ids, int64_t *n_tokens);

/* The text of token `id` when it follows token `prev` (-1: none; llama2c
 * drops a leading space after bos and turns "<0xXX>" into the byte;
 * bpe-sentencepiece drops it when prev is -1).
 * *bytes points into the vocabulary or into byte_buf; not NUL-terminated.
 * An id outside [0, V) is an error. */
ffn_status ffn_vocab_piece(const ffn_vocab *vocab, int32_t prev, int32_t id, char byte_buf[1],
                           const char **bytes, size_t *len);

/* Decode ids (N) into a NUL-terminated malloc'd string (free() it); the
 * token before ids[0] is `prev` (-1: none).  An id outside [0, V) is an
 * error naming its position. */
ffn_status ffn_vocab_decode(const ffn_vocab *vocab, int32_t prev, const int32_t *ids,
                            int64_t n_tokens, char **text, size_t *n_bytes);

/* ffn_vocab_decode, leaving out special tokens when skip_special (HF's
 * skip_special_tokens): the first id kept follows `prev`. */
ffn_status ffn_vocab_decode_ex(const ffn_vocab *vocab, int32_t prev, const int32_t *ids,
                               int64_t n_tokens, int skip_special, char **text, size_t *n_bytes);

/* 1 when id is a special token (an added token marked special; for the
 * other engines bos, eos or pad). */
int ffn_vocab_is_special(const ffn_vocab *vocab, int32_t id);

/* Token id's text as the file stores it (a tokenizer.json's "Ġthe",
 * "▁the", "<0x0A>"), not NUL-terminated for every engine; NULL when out
 * of range or a hole in the ids. */
const char *ffn_vocab_token(const ffn_vocab *vocab, int32_t id, size_t *len);

/* *exact = 1 when decode(encode(text)) == text (without bos), else 0;
 * errors of encode (invalid UTF-8) are returned. */
ffn_status ffn_vocab_roundtrip(const ffn_vocab *vocab, const char *text, size_t n_bytes,
                               int *exact);

/* ---- words typed by a user (a target, an object, a subject) -------------- */

/* 1 when `word` follows `text` after a space in writing: not when the text
 * ends in white space or either side is a CJK character or CJK / fullwidth
 * punctuation (Chinese and Japanese write no spaces between words):
 * "小明把苹果递给了" + "王" is "小明把苹果递给了王", "Mary gave" + "John"
 * is "Mary gave John". */
int ffn_vocab_word_space(const char *text, const char *word);

/* The continuation `word` of `text` as the model reads it: `word` with a
 * space before it when ffn_vocab_word_space says so, encoded without bos,
 * into a malloc'd array (free() it).  Every token must be a known one: a
 * "<unk>" is refused with a message naming `what` ("target"), the word and
 * what is missing -- "a character" for a char vocabulary, "a word" for a
 * word vocabulary, "a token" otherwise.  *prefix_space (may be NULL) says
 * whether the space was put. */
ffn_status ffn_vocab_encode_word(const ffn_vocab *vocab, const char *text, const char *word,
                                 const char *what, int32_t **ids, int64_t *n_tokens,
                                 int *prefix_space);

/* Refuse ids[0..n) when one is "<unk>": the same message as above for the
 * text they came from. */
ffn_status ffn_vocab_check_known(const ffn_vocab *vocab, const int32_t *ids, int64_t n_tokens,
                                 const char *what, const char *text, size_t n_bytes);

/* The engine inside, for calls only it has (NULL when it is another). */
const ffn_tokenizer *ffn_vocab_tokenizer(const ffn_vocab *vocab);
const ffn_llama2c_tokenizer *ffn_vocab_llama2c(const ffn_vocab *vocab);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif /* FFN_VOCAB_H */
