/* test_unicode.c -- NFC (src/data/unicode.c) against the Unicode
 * conformance test, NormalizationTest.txt of the installed Unicode
 * Character Database (Debian's unicode-data, compressed; read through
 * bzcat): for every line c1;c2;c3;c4;c5, NFC(c1) = NFC(c2) = NFC(c3) = c2
 * and NFC(c4) = NFC(c5) = c4.  Also the GPT-2 byte map (a bijection of
 * 256 bytes onto printable code points) and UTF-8 stepping. */
#include "check.h"
#include "data/unicode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UCD_TEST "/usr/share/unicode/NormalizationTest.txt.bz2"

/* One column of code points ("0044 0307") into UTF-8. */
static size_t column_utf8(const char *col, char *out) {
    size_t n = 0;
    char *end;
    for (const char *p = col;;) {
        unsigned long cp = strtoul(p, &end, 16);
        if (end == p) break;
        n += (size_t)utf8_put((uint32_t)cp, out + n);
        p = end;
    }
    return n;
}

static int nfc_equals(const char *s, size_t n, const char *want, size_t nw) {
    char *out = NULL;
    size_t no = 0;
    if (unicode_nfc(s, n, &out, &no) != FFN_OK) return 0;
    int eq = out ? (no == nw && !memcmp(out, want, nw)) : (n == nw && !memcmp(s, want, nw));
    free(out);
    return eq;
}

static void conformance(void) {
    FILE *f = popen("bzcat " UCD_TEST " 2>/dev/null", "r");
    CHECK(f != NULL, "cannot run bzcat");
    if (!f) return;
    char line[4096];
    long lines = 0, bad = 0;
    /* also all at once: the c1 column joined by newlines (which compose
     * with nothing) must give the c2 column joined the same way */
    size_t cap_all = 1 << 22, n_c1 = 0, n_c2 = 0;
    char *all_c1 = malloc(cap_all), *all_c2 = malloc(cap_all);
    CHECK(all_c1 && all_c2, "out of memory");
    if (!all_c1 || !all_c2) return;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '@' || line[0] == '\n') continue;
        char *cols[5];
        char *p = line;
        int k = 0;
        for (; k < 5; k++) {
            cols[k] = p;
            char *semi = strchr(p, ';');
            if (!semi) break;
            *semi = '\0';
            p = semi + 1;
        }
        if (k < 5) continue;
        char c[5][512];
        size_t n[5];
        for (int i = 0; i < 5; i++) n[i] = column_utf8(cols[i], c[i]);
        int ok = nfc_equals(c[0], n[0], c[1], n[1]) && nfc_equals(c[1], n[1], c[1], n[1]) &&
                 nfc_equals(c[2], n[2], c[1], n[1]) && nfc_equals(c[3], n[3], c[3], n[3]) &&
                 nfc_equals(c[4], n[4], c[3], n[3]);
        if (!ok && bad++ < 10) CHECK(0, "NFC differs on the line with c1 = %s", cols[0]);
        lines++;
        if (n_c1 + n[0] + 1 < cap_all && n_c2 + n[1] + 1 < cap_all) {
            memcpy(all_c1 + n_c1, c[0], n[0]);
            memcpy(all_c2 + n_c2, c[1], n[1]);
            n_c1 += n[0];
            n_c2 += n[1];
            all_c1[n_c1++] = '\n';
            all_c2[n_c2++] = '\n';
        }
    }
    CHECK(nfc_equals(all_c1, n_c1, all_c2, n_c2), "NFC of the joined c1 column (%zu bytes) is not "
          "the joined c2 column", n_c1);
    free(all_c1);
    free(all_c2);
    int rc = pclose(f);
    CHECK(rc == 0 && lines > 10000, "%s: read %ld lines (rc %d): install unicode-data and bzip2 "
          "(scripts/setup.sh test)", UCD_TEST, lines, rc);
    CHECK(bad == 0, "%ld of %ld conformance lines differ", bad, lines);
    printf("NormalizationTest: %ld lines, %ld differ\n", lines, bad);
}

static void byte_map(void) {
    uint32_t b2c[256];
    int16_t c2b[0x144];
    unicode_byte_map(b2c, c2b);
    int seen[0x144] = {0};
    for (int b = 0; b < 256; b++) {
        CHECK(b2c[b] < 0x144 && !seen[b2c[b]], "byte %d maps to %u twice or out of range", b, b2c[b]);
        if (b2c[b] < 0x144) {
            seen[b2c[b]] = 1;
            CHECK(c2b[b2c[b]] == b, "inverse of byte %d", b);
        }
        CHECK(b2c[b] > 0x20 && !(b2c[b] >= 0x7F && b2c[b] <= 0xA0) && b2c[b] != 0xAD,
              "byte %d maps to a non-printable U+%04X", b, b2c[b]);
    }
    CHECK(b2c[' '] == 0x120 && b2c['\n'] == 0x10A && b2c['a'] == 'a', "GPT-2's Ġ and Ċ");
}

static void utf8(void) {
    uint32_t cp = 0;
    CHECK(utf8_next((const unsigned char *)"\xe4\xbd\xa0", 3, &cp) == 3 && cp == 0x4F60, "3 bytes");
    CHECK(utf8_next((const unsigned char *)"\xf0\x9f\x98\x80", 4, &cp) == 4 && cp == 0x1F600, "4");
    CHECK(utf8_next((const unsigned char *)"\xc0\xaf", 2, &cp) == 0, "overlong accepted");
    CHECK(utf8_next((const unsigned char *)"\xed\xa0\x80", 3, &cp) == 0, "surrogate accepted");
    CHECK(utf8_next((const unsigned char *)"\xe4\xbd", 2, &cp) == 0, "truncated accepted");
    CHECK(utf8_next((const unsigned char *)"\xf4\x90\x80\x80", 4, &cp) == 0, "> U+10FFFF accepted");
    /* bytes that are not UTF-8 pass NFC unchanged, and block composition */
    char *out = NULL;
    size_t n = 0;
    CHECK(unicode_nfc("e\xff\xcc\x81", 4, &out, &n) == FFN_OK, "nfc");
    CHECK(out && n == 4 && !memcmp(out, "e\xff\xcc\x81", 4), "an invalid byte between e and U+0301");
    free(out);
    CHECK(unicode_nfc("e\xcc\x81", 3, &out, &n) == FFN_OK && out && n == 2 && !memcmp(out, "\xc3\xa9", 2),
          "e + U+0301 -> U+00E9");
    free(out);
}

int main(void) {
    utf8();
    byte_map();
    conformance();
    return check_done("test_unicode");
}
