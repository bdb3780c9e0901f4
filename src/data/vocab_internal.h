/* vocab_internal.h -- what the library's own callers of ffn_vocab need
 * beyond the public interface.  Not installed. */
#ifndef FFN_VOCAB_INTERNAL_H
#define FFN_VOCAB_INTERNAL_H

#include "base/common.h"
#include "ffn/data.h"
#include "ffn/vocab.h"

/* A vocab over `tok` that does not own it: ffn_vocab_free leaves `tok`
 * alone (for entry points that take an ffn_tokenizer). */
ffn_status vocab_borrow_tokenizer(const ffn_tokenizer *tok, ffn_vocab **out);

/* The tokenizer file (data.h's format, as ffn_tokenizer_save writes it)
 * into a malloc'd buffer (free() it): what a GGUF export embeds as
 * "ffn.tokenizer". */
ffn_status tokenizer_serialize(const ffn_tokenizer *tok, char **text, size_t *n_bytes);

/* A Hugging Face tokenizer.json (malloc'd, free() it) that encodes every
 * text to the ids `tok` does (data.c has the construction), for the
 * tokenizer.json an export writes beside tokenizer.txt; and the
 * tokenizer_config.json that goes with it. */
ffn_status tokenizer_to_hf_json(const ffn_tokenizer *tok, char **json, size_t *n_bytes);
#define FFN_HF_TOKENIZER_CONFIG \
    "{\n  \"tokenizer_class\": \"PreTrainedTokenizerFast\",\n  \"unk_token\": \"<unk>\",\n" \
    "  \"clean_up_tokenization_spaces\": false,\n  \"model_max_length\": 1000000000\n}\n"

/* 1 when dir's tokenizer.json is exactly what tokenizer_to_hf_json makes
 * of the tokenizer.txt beside it (ffn's Hugging Face export): readers then
 * take tokenizer.txt, which is the same vocabulary in ffn's own engine; a
 * tokenizer.json put there by hand is still read first. */
int vocab_dir_json_is_export(const char *dir);

/* GGUF keys under which ffn keeps a vocabulary exactly, beside the
 * tokenizer.ggml.* that llama.cpp reads: its own tokenizer file, or a
 * tokenizer.json (and the tokenizer_config.json that was beside it). */
#define FFN_GGUF_KEY_TOKENIZER "ffn.tokenizer"
#define FFN_GGUF_KEY_TOKENIZER_JSON "ffn.tokenizer_json"
#define FFN_GGUF_KEY_TOKENIZER_CONFIG "ffn.tokenizer_config_json"

/* A byte token "<0xNN>" (hex digits either case) -> NN, anything else -1:
 * SentencePiece's byte fallback, in llama2.c and tokenizer.json vocabularies. */
static inline int ffn_vocab_byte_token(const char *s, size_t n) {
    if (n != 6 || s[0] != '<' || s[1] != '0' || s[2] != 'x' || s[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
                : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

#endif /* FFN_VOCAB_INTERNAL_H */
