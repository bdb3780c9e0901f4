/* unicode.h -- the bits of Unicode the tokenizers need: UTF-8 stepping,
 * NFC normalisation (tables in unicode_tables.c, generated from the UCD by
 * scripts/gen_unicode_tables.py) and the GPT-2 byte <-> code point map of
 * byte-level BPE.  Internal; not installed. */
#ifndef FFN_UNICODE_H
#define FFN_UNICODE_H

#include "base/common.h"

#include <stddef.h>
#include <stdint.h>

typedef struct ucd_ccc_range { uint32_t first, last; uint8_t ccc; } ucd_ccc_range;
typedef struct ucd_decomp { uint32_t cp, a, b; } ucd_decomp; /* b = 0: singleton */
typedef struct ucd_comp { uint32_t a, b, composite; } ucd_comp;
typedef struct ucd_range { uint32_t first, last; } ucd_range;

extern const ucd_ccc_range ucd_ccc[];
extern const size_t ucd_ccc_count;
extern const ucd_decomp ucd_decomps[];
extern const size_t ucd_decomp_count;
extern const ucd_comp ucd_comps[];
extern const size_t ucd_comp_count;
extern const ucd_range ucd_care[];
extern const size_t ucd_care_count;

/* The length (1..4) of the valid UTF-8 sequence at s[0..n), or 0 when the
 * bytes there are not one (then the first byte stands alone); *cp gets the
 * code point when valid. */
int utf8_next(const unsigned char *s, size_t n, uint32_t *cp);
/* Encode cp (<= 0x10FFFF) into out (4 bytes); returns the length. */
int utf8_put(uint32_t cp, char out[4]);

/* NFC of s[0..n) into a malloc'd buffer (*out, *n_out; NUL-terminated).
 * Bytes that are not UTF-8 pass through unchanged and block composition.
 * *out is NULL (and FFN_OK returned) when s is already NFC by the quick
 * check: the caller then uses s itself. */
ffn_status unicode_nfc(const char *s, size_t n, char **out, size_t *n_out);

/* The canonical combining class of cp (0 for starters). */
int unicode_ccc(uint32_t cp);

/* GPT-2's byte-level map: byte b is shown as code point byte_to_cp[b]
 * (printable bytes map to themselves, the others to U+0100 upwards);
 * cp_to_byte inverts it for cp < 0x144 (-1: no byte). */
void unicode_byte_map(uint32_t byte_to_cp[256], int16_t cp_to_byte[0x144]);

#endif /* FFN_UNICODE_H */
