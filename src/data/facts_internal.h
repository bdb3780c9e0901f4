/* facts_internal.h -- what corpus.c uses of the facts corpus (facts.c):
 * rendering one trained statement of a fact set word by word, with each
 * word's class, so the `facts` corpus labels its words like the others. */
#ifndef FFN_DATA_FACTS_INTERNAL_H
#define FFN_DATA_FACTS_INTERNAL_H

#include "ffn/data.h"
#include "ffn/rng.h"

#define FACTS_N_RELATIONS 4
#define FACTS_N_FRAMES 5
#define FACTS_N_NEIGHBOURS 3
#define FACTS_MAX_LIST 64 /* paraphrases / neighbours a file's fact may list */

/* The ffn_word_class a markup letter names (word/n name, /p pronoun, /o
 * object, /v verb, /m modifier, /. punctuation; anything else a function
 * word), for the corpus's templates and the facts' frames alike. */
static inline int facts_class_of(char c) {
    switch (c) {
    case 'n': return FFN_WORD_NAME;
    case 'p': return FFN_WORD_PRONOUN;
    case 'o': return FFN_WORD_OBJECT;
    case 'v': return FFN_WORD_VERB;
    case 'm': return FFN_WORD_MODIFIER;
    case '.': return FFN_WORD_PUNCT;
    default: return FFN_WORD_FUNCTION;
    }
}

/* Receives one word (NUL-terminated) and its ffn_word_class. */
typedef void (*facts_word_sink)(const char *word, int cls, void *user);

/* One trained statement of a fact drawn from fs (the fact, its (frame,
 * form) pair and tail are draws from r), ending in ".". */
void facts_render_statement(const ffn_facts *fs, ffn_rng *r, facts_word_sink sink, void *user);

/* Index of a relation name, -1 when unknown. */
int facts_relation_index(const char *name);
/* Render fact f of relation relation_index in (frame, form); with
 * stop_at_object, stop before the object (returns 1 then). */
int facts_render(const ffn_fact *f, int relation_index, int frame, int form, const char *tail,
                 int stop_at_object, facts_word_sink sink, void *user);

#endif /* FFN_DATA_FACTS_INTERNAL_H */
