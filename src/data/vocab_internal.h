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

#endif /* FFN_VOCAB_INTERNAL_H */
