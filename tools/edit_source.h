/* edit_source.h -- what `ffn edit` and `ffn serve` read beside a model to
 * edit it: the text it was trained on (for the keys' second moment C and
 * the held-out loss) and, when it was trained on the built-in facts
 * corpus, that corpus's facts (paraphrases and neighbours to score an
 * edit with).  Both come from the source recorded in
 * MODEL/train_state.safetensors ("file:PATH" or "corpus:LANG:N:SEED"). */
#ifndef FFN_TOOLS_EDIT_SOURCE_H
#define FFN_TOOLS_EDIT_SOURCE_H

#include "ffn.h"
#include "ffn/checkpoint.h"

#include <stddef.h>

/* `data` when given (a text file), else the model's recorded training
 * text (malloc'd); what (cap bytes) names it.  When the model records
 * no source: FFN_OK with *text NULL (the caller asks for --data FILE). */
ffn_status edit_source_text(const char *model, const char *data, char **text, size_t *n,
                            char *what, size_t cap);

/* The facts of the built-in facts corpus when the model was trained on it
 * (ffn_facts_generate(FFN_FACTS_DEFAULT, its seed)); *out = NULL, FFN_OK
 * when it was trained on anything else. */
ffn_status edit_source_facts(const char *model, ffn_facts **out);

/* The fact of `facts` about `subject` that `prompt` asks for: the one
 * whose prompt or one of whose paraphrases is `prompt`; NULL when none. */
const ffn_fact *edit_source_find_fact(const ffn_facts *facts, const char *subject,
                                      const char *prompt);

/* A model with its vocabulary and the tokens of its text, the first 90%
 * for statistics and the rest held out (`ffn edit`, `ffn transcoder`). */
typedef struct edit_session {
    ffn_ctx *ctx;
    ffn_model *model;
    ffn_vocab *vocab;
    ffn_checkpoint_info info;
    int32_t *tokens;
    int64_t n_tokens, n_train;
    char text_what[4200]; /* names the text */
    float *original;      /* with keep_weights: the weights as loaded */
    int64_t n_params;
} edit_session;

/* Loads `model` (mo, `threads`), its vocabulary and the tokens of
 * edit_source_text(model, data); s is freed by edit_session_free whatever
 * this returns.  0, or the exit status after printing cmd's error:
 * `vocab_why` ends the one for a model without a vocabulary, `text_why`
 * the one for no text ("give --data FILE" then text_why). */
int edit_session_open(const char *cmd, const char *model, const char *data, int64_t threads,
                      const ffn_model_options *mo, int keep_weights, const char *vocab_why,
                      const char *text_why, edit_session *s);
void edit_session_free(edit_session *s);

#endif
