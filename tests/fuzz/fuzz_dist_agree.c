/* fuzz_dist_agree.c -- libFuzzer target for the agreement message of
 * libffn_dist (src/dist/agree_text.c: the option texts ranks compare at
 * the start of a job, and the one-line message naming a difference).
 *
 * The input is two texts separated by the first NUL byte (none: the
 * second text is the first with its last byte changed).  Beyond "does not
 * crash" it traps when:
 *   - the comparison is not symmetric (equal one way, different the other;
 *     malformed a / b swapped), or a text differs from itself;
 *   - a well-formed text does not compare equal to a copy of itself;
 *   - a difference's lines do not lie inside their texts, a key is empty
 *     or holds '=', '\n' or NUL, a value holds '\n' or NUL, or both lines
 *     are equal;
 *   - the message is empty, not NUL-terminated within its buffer, or holds
 *     a control byte (values are escaped as \xNN), in a full buffer and in
 *     buffers of 1 to 40 bytes.
 * Built by `make fuzz`; with -DFFN_FUZZ_REPLAY it gets a main() that
 * replays files (tests/cli/test_fuzz_regress.sh). */
#include "../../src/dist/agree_text.c"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define REQUIRE(cond)                                                                        \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "fuzz_dist_agree: invariant failed: %s (line %d)\n", #cond,      \
                    __LINE__);                                                               \
            abort();                                                                         \
        }                                                                                    \
    } while (0)

static void check_line(const dist_agree_line *l, const char *t, size_t n) {
    if (!l->key) {
        REQUIRE(!l->val && l->key_len == 0 && l->val_len == 0);
        return;
    }
    REQUIRE(l->key >= t && l->key + l->key_len <= t + n && l->key_len > 0);
    REQUIRE(l->val == l->key + l->key_len + 1 && l->val + l->val_len < t + n);
    REQUIRE(l->key[l->key_len] == '=' && l->val[l->val_len] == '\n');
    REQUIRE(!memchr(l->key, '=', l->key_len) && !memchr(l->key, '\n', l->key_len) &&
            !memchr(l->key, '\0', l->key_len));
    REQUIRE(!memchr(l->val, '\n', l->val_len) && !memchr(l->val, '\0', l->val_len));
}

static void check_message(const dist_agree_diff *d) {
    char big[1024];
    memset(big, 'X', sizeof big);
    dist_agree_message(d, 0, 7, big, sizeof big);
    size_t len = strnlen(big, sizeof big);
    REQUIRE(len > 0 && len < sizeof big);
    for (size_t i = 0; i < len; i++) REQUIRE((unsigned char)big[i] >= 0x20 && (unsigned char)big[i] < 0x7f);
    for (size_t n = 1; n <= 40; n++) {
        char small[41];
        memset(small, 'X', sizeof small);
        dist_agree_message(d, 3, 12, small, n);
        REQUIRE(strnlen(small, n) < n);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 2 * DIST_AGREE_MAX_BYTES + 8) return 0;
    const char *a = (const char *)data;
    const char *nul = memchr(data, '\0', size);
    char *owned = NULL;
    size_t na, nb;
    const char *b;
    if (nul) {
        na = (size_t)(nul - a);
        b = nul + 1;
        nb = size - na - 1;
    } else {
        na = nb = size;
        owned = malloc(size ? size : 1);
        if (!owned) return 0;
        memcpy(owned, a, size);
        if (size) owned[size - 1] ^= 0x01;
        b = owned;
    }
    int line;
    const int ok_a = dist_agree_check(a, na, &line) == 0, ok_b = dist_agree_check(b, nb, &line) == 0;
    dist_agree_diff d, e;
    int ab = dist_agree_compare(a, na, b, nb, &d), ba = dist_agree_compare(b, nb, a, na, &e);
    if (!ok_a && !ok_b) REQUIRE(ab == -1 && ba == -1);
    else if (!ok_a) REQUIRE(ab == -1 && ba == -2);
    else if (!ok_b) REQUIRE(ab == -2 && ba == -1);
    else {
        REQUIRE((ab == 0) == (ba == 0) && ab >= 0 && ba >= 0);
        REQUIRE(d.line == e.line);
        if (ab == 1) {
            check_line(&d.a, a, na);
            check_line(&d.b, b, nb);
            REQUIRE(d.a.key || d.b.key);
            REQUIRE(!(d.a.key && d.b.key && d.a.key_len == d.b.key_len && d.a.val_len == d.b.val_len &&
                      !memcmp(d.a.key, d.b.key, d.a.key_len) && !memcmp(d.a.val, d.b.val, d.a.val_len)));
            check_message(&d);
            check_message(&e);
        }
        if (na == nb && !memcmp(a, b, na)) REQUIRE(ab == 0);
        /* a copy of a well-formed text is equal */
        char *copy = malloc(na ? na : 1);
        if (copy) {
            memcpy(copy, a, na);
            dist_agree_diff c;
            REQUIRE(dist_agree_compare(a, na, copy, na, &c) == 0);
            free(copy);
        }
    }
    free(owned);
    return 0;
}

#include "replay.h"
FFN_FUZZ_REPLAY_MAIN("fuzz_dist_agree")
