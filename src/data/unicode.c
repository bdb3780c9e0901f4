/* unicode.c -- UTF-8 stepping, NFC normalisation and the GPT-2 byte map
 * (see unicode.h).  NFC is the textbook algorithm (UAX #15): canonical
 * decomposition (Hangul arithmetically), canonical ordering of runs of
 * non-starters by combining class (stable), then canonical composition of
 * each unblocked character with the last starter.  The quick check skips
 * all of it for text with no code point in the "care" set. */
#include "data/unicode.h"

#include <stdlib.h>
#include <string.h>

int utf8_next(const unsigned char *s, size_t n, uint32_t *cp) {
    if (n == 0) return 0;
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    int len;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) len = 2, v = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, v = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, v = c & 0x07, min = 0x10000;
    else return 0;
    if ((size_t)len > n) return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = v << 6 | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return len;
}

int utf8_put(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- table look-ups (binary search) --------------------------------------- */

int unicode_ccc(uint32_t cp) {
    size_t lo = 0, hi = ucd_ccc_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < ucd_ccc[mid].first) hi = mid;
        else if (cp > ucd_ccc[mid].last) lo = mid + 1;
        else return ucd_ccc[mid].ccc;
    }
    return 0;
}

static int in_care(uint32_t cp) {
    if (cp >= 0x1100 && cp <= 0x11FF) return 1; /* Hangul jamo */
    if (cp >= 0xAC00 && cp <= 0xD7A3) return 1; /* Hangul syllables */
    size_t lo = 0, hi = ucd_care_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < ucd_care[mid].first) hi = mid;
        else if (cp > ucd_care[mid].last) lo = mid + 1;
        else return 1;
    }
    return 0;
}

static const ucd_decomp *find_decomp(uint32_t cp) {
    size_t lo = 0, hi = ucd_decomp_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < ucd_decomps[mid].cp) hi = mid;
        else if (cp > ucd_decomps[mid].cp) lo = mid + 1;
        else return &ucd_decomps[mid];
    }
    return NULL;
}

static uint32_t find_comp(uint32_t a, uint32_t b) {
    size_t lo = 0, hi = ucd_comp_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const ucd_comp *c = &ucd_comps[mid];
        if (a < c->a || (a == c->a && b < c->b)) hi = mid;
        else if (a > c->a || b > c->b) lo = mid + 1;
        else return c->composite;
    }
    return 0;
}

/* ---- NFC ------------------------------------------------------------------------ */

/* Code points above this are bytes that were not UTF-8 (0x110000 + byte). */
#define RAW_BYTE 0x110000u

enum { SBASE = 0xAC00, LBASE = 0x1100, VBASE = 0x1161, TBASE = 0x11A7, LCOUNT = 19, VCOUNT = 21,
       TCOUNT = 28, NCOUNT = VCOUNT * TCOUNT, SCOUNT = LCOUNT * NCOUNT };

typedef struct cp_buf {
    uint32_t *cp;
    int64_t n, cap;
} cp_buf;

static int push(cp_buf *b, uint32_t cp) {
    uint32_t *p = ffn_grow(b->cp, b->n, &b->cap, sizeof *p, 64);
    if (!p) return -1;
    b->cp = p;
    b->cp[b->n++] = cp;
    return 0;
}

static int decompose(cp_buf *b, uint32_t cp, int depth) {
    if (cp >= SBASE && cp < SBASE + SCOUNT) {
        uint32_t s = cp - SBASE;
        if (push(b, LBASE + s / NCOUNT) || push(b, VBASE + s % NCOUNT / TCOUNT)) return -1;
        return s % TCOUNT ? push(b, TBASE + s % TCOUNT) : 0;
    }
    const ucd_decomp *d = depth < 8 && cp < RAW_BYTE ? find_decomp(cp) : NULL;
    if (!d) return push(b, cp);
    if (decompose(b, d->a, depth + 1)) return -1;
    return d->b ? decompose(b, d->b, depth + 1) : 0;
}

static int ccc_of(uint32_t cp) { return cp >= RAW_BYTE ? 0 : unicode_ccc(cp); }

/* NFC of one span s[0..n) appended to *o (capacity grown as needed). */
static int nfc_span(const unsigned char *u, size_t n, char **o, size_t *at, size_t *cap);

/* src[0..len) appended to *o at *at, with room for a terminator: the
 * capacity doubles (exact: grows to just what the tail needs). */
static int copy_bytes(char **o, size_t *at, size_t *cap, const char *src, size_t len, int exact) {
    if (*at + len + 1 > *cap) {
        size_t c = exact ? *at + len + 1 : 2 * (*at + len) + 16;
        char *p = realloc(*o, c);
        if (!p) return -1;
        *o = p;
        *cap = c;
    }
    memcpy(*o + *at, src, len);
    *at += len;
    return 0;
}

ffn_status unicode_nfc(const char *s, size_t n, char **out, size_t *n_out) {
    *out = NULL;
    *n_out = 0;
    const unsigned char *u = (const unsigned char *)s;
    /* Only the spans around code points of the care set change: a span
     * starts at the code point before the first such one (a starter it may
     * compose with) and ends before the next code point outside the set
     * (a starter that composes with nothing before it).  The rest is
     * copied. */
    char *o = NULL;
    size_t at = 0, cap = 0, copied = 0, prev = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp = u[i];
        int len = u[i] < 0x80 ? 1 : utf8_next(u + i, n - i, &cp);
        if (len == 0 || !in_care(cp)) {
            prev = i;
            i += (size_t)(len ? len : 1);
            continue;
        }
        size_t start = prev >= copied ? prev : copied, end = i;
        while (end < n) { /* extend over the care set */
            uint32_t c2 = u[end];
            int l2 = u[end] < 0x80 ? 1 : utf8_next(u + end, n - end, &c2);
            if (l2 == 0 || !in_care(c2)) break;
            end += (size_t)l2;
        }
        if (!o) {
            cap = n + n / 2 + 16;
            if (!(o = malloc(cap))) return ffn_error(FFN_ERR_NOMEM, "NFC: out of memory");
        }
        if ((start > copied && copy_bytes(&o, &at, &cap, s + copied, start - copied, 0)) ||
            nfc_span(u + start, end - start, &o, &at, &cap)) {
            free(o);
            return ffn_error(FFN_ERR_NOMEM, "NFC: out of memory");
        }
        copied = prev = end;
        i = end;
    }
    if (!o) return FFN_OK; /* nothing to change */
    if (copy_bytes(&o, &at, &cap, s + copied, n - copied, 1)) {
        free(o);
        return ffn_error(FFN_ERR_NOMEM, "NFC: out of memory");
    }
    o[at] = '\0';
    *out = o;
    *n_out = at;
    return FFN_OK;
}

static int nfc_span(const unsigned char *u, size_t n, char **obuf, size_t *oat, size_t *ocap) {
    size_t i;
    cp_buf b = {0};
    for (i = 0; i < n;) {
        uint32_t cp;
        int len = utf8_next(u + i, n - i, &cp);
        if (len == 0) cp = RAW_BYTE + u[i], len = 1;
        if (decompose(&b, cp, 0)) goto oom;
        i += (size_t)len;
    }
    /* canonical ordering: insertion sort inside each run of non-starters */
    for (int64_t k = 1; k < b.n; k++) {
        int c = ccc_of(b.cp[k]);
        if (c == 0) continue;
        for (int64_t j = k; j > 0; j--) {
            int cj = ccc_of(b.cp[j - 1]);
            if (cj <= c) break;
            uint32_t t = b.cp[j];
            b.cp[j] = b.cp[j - 1];
            b.cp[j - 1] = t;
        }
    }
    /* canonical composition */
    int64_t starter = -1, w = 0;
    int last_ccc = 0;
    for (int64_t k = 0; k < b.n; k++) {
        uint32_t cp = b.cp[k];
        int c = ccc_of(cp);
        if (starter >= 0 && cp < RAW_BYTE && (last_ccc < c || (last_ccc == 0 && w == starter + 1))) {
            uint32_t st = b.cp[starter], comp = 0;
            if (st >= LBASE && st < LBASE + LCOUNT && cp >= VBASE && cp < VBASE + VCOUNT)
                comp = SBASE + ((st - LBASE) * VCOUNT + (cp - VBASE)) * TCOUNT;
            else if (st >= SBASE && st < SBASE + SCOUNT && (st - SBASE) % TCOUNT == 0 &&
                     cp > TBASE && cp < TBASE + TCOUNT)
                comp = st + (cp - TBASE);
            else if (st < RAW_BYTE)
                comp = find_comp(st, cp);
            if (comp) {
                b.cp[starter] = comp;
                continue;
            }
        }
        if (c == 0) {
            starter = w;
            last_ccc = 0;
        } else {
            last_ccc = c;
        }
        b.cp[w++] = cp;
    }
    if (*oat + (size_t)w * 4 + 1 > *ocap) {
        size_t c = 2 * (*oat + (size_t)w * 4) + 16;
        char *p = realloc(*obuf, c);
        if (!p) goto oom;
        *obuf = p;
        *ocap = c;
    }
    for (int64_t k = 0; k < w; k++) {
        if (b.cp[k] >= RAW_BYTE) (*obuf)[(*oat)++] = (char)(b.cp[k] - RAW_BYTE);
        else *oat += (size_t)utf8_put(b.cp[k], *obuf + *oat);
    }
    free(b.cp);
    return 0;
oom:
    free(b.cp);
    return -1;
}

/* ---- GPT-2 byte map --------------------------------------------------------------- */

void unicode_byte_map(uint32_t byte_to_cp[256], int16_t cp_to_byte[0x144]) {
    /* printable Latin-1 bytes stand for themselves; the rest, in order, get
     * U+0100, U+0101, ... */
    uint32_t next = 0x100;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        byte_to_cp[b] = printable ? (uint32_t)b : next++;
    }
    for (int c = 0; c < 0x144; c++) cp_to_byte[c] = -1;
    for (int b = 0; b < 256; b++) cp_to_byte[byte_to_cp[b]] = (int16_t)b;
}
