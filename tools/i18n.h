/* i18n.h -- the message catalogue of the lesson's words: key -> English and
 * Chinese text, used by the live page (`ffn serve --lang`), the HTML report
 * (`ffn report --lang`) and the demo's explanation (`ffn demo --lang`, the
 * corpus language, which is also the language of the lesson).
 *
 * Keys are dotted: "page.*" are shared by both pages, "live.*" only the
 * live page, "report.*" only the report, "demo.*" the demo's explanation
 * (printf formats: the English and the Chinese text of a key take the same
 * conversions in the same order).  A page receives its language's "page.",
 * "live." or "report." entries as one JSON object and applies them with
 * applyMessages (tools/report/format.js) to its elements' data-i18n keys. */
#ifndef FFN_I18N_H
#define FFN_I18N_H

#include "ffn.h"

#include <stdio.h>

/* The text of key in lang (English when the key has no Chinese text); the
 * key itself when the catalogue does not have it, so a missing entry shows
 * instead of crashing. */
const char *i18n(ffn_lang lang, const char *key);

/* {"key": "text", ...} for every key starting with one of the prefixes
 * (NULL-terminated list), in lang. */
void i18n_json(FILE *f, ffn_lang lang, const char *const *prefixes);

/* Number of keys and how many have no Chinese text (tests). */
size_t i18n_count(size_t *missing_zh);

#endif
