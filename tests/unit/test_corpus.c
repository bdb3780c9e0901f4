/* test_corpus.c -- the built-in corpus: determinism, variety, labels that
 * cover every word, pronouns that agree with the person they refer to
 * (checked against name and pronoun genders known to this test, not taken
 * from the generator), and the role a cause predicate implies. */
#include "check.h"

#include <ffn.h>
#include <stdlib.h>
#include <string.h>

/* FNV-1a of the text of 500 sentences, seed 1 (see test_determinism). */
#define GOLDEN_EN 0xacce9a47c728cfa2ull
#define GOLDEN_ZH 0xb1f58a9070bde5f9ull

/* ---- small helpers ------------------------------------------------------ */

static uint64_t fnv1a(const char *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    return h;
}

static int word_is(const ffn_corpus *c, int64_t i, const char *s) {
    const ffn_word *w = &c->words[i];
    return (size_t)w->length == strlen(s) && !memcmp(c->text + w->offset, s, (size_t)w->length);
}

static int utf8_ok(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!len || i + (size_t)len > n) return 0;
        for (int k = 1; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80) return 0;
        i += (size_t)len;
    }
    return 1;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Count distinct strings (sorts the array). */
static int64_t count_distinct(char **v, int64_t n) {
    qsort(v, (size_t)n, sizeof *v, cmp_str);
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++) d += i == 0 || strcmp(v[i], v[i - 1]);
    return d;
}

static char *dup_span(const char *p, int64_t n) {
    char *s = malloc((size_t)n + 1);
    memcpy(s, p, (size_t)n);
    s[n] = '\0';
    return s;
}

/* Genders known to this test, independently of the generator's tables. */
static const char *const known_female[] = {"Mary", "Anna", "Emma", "Sarah", "Linda", "Susan",
                                           "Helen", "Alice", "Rose", "Grace", "Julia", "Lucy"};
static const char *const known_male[] = {"John", "Peter", "James", "Robert", "Michael", "William",
                                         "David", "Thomas", "George", "Henry", "Paul", "Mark"};
static const char *const known_zh_female[] = {"芳", "娜", "秀英", "丽娟", "美玲", "婷婷"};
static const char *const known_zh_male[] = {"伟", "强", "建国", "志强", "浩然", "俊杰"};

/* The gender this test knows for a name word: 1 female, 2 male, 0 unknown. */
static int known_gender(const ffn_corpus *c, int64_t i) {
    const ffn_word *w = &c->words[i];
    const char *p = c->text + w->offset;
    size_t n = (size_t)w->length;
    if (c->lang == FFN_LANG_EN) {
        for (size_t k = 0; k < sizeof known_female / sizeof *known_female; k++)
            if (strlen(known_female[k]) == n && !memcmp(p, known_female[k], n)) return 1;
        for (size_t k = 0; k < sizeof known_male / sizeof *known_male; k++)
            if (strlen(known_male[k]) == n && !memcmp(p, known_male[k], n)) return 2;
        return 0;
    }
    if (n <= 3) return 0; /* skip the one-character surname */
    p += 3, n -= 3;
    for (size_t k = 0; k < sizeof known_zh_female / sizeof *known_zh_female; k++)
        if (strlen(known_zh_female[k]) == n && !memcmp(p, known_zh_female[k], n)) return 1;
    for (size_t k = 0; k < sizeof known_zh_male / sizeof *known_zh_male; k++)
        if (strlen(known_zh_male[k]) == n && !memcmp(p, known_zh_male[k], n)) return 2;
    return 0;
}

/* The gender a pronoun's text carries: 1 female, 2 male, 0 none (it, who). */
static int pronoun_gender(const ffn_corpus *c, int64_t i) {
    static const char *const f[] = {"she", "her", "hers", "She", "Her", "她", "她的"};
    static const char *const m[] = {"he", "him", "his", "He", "His", "他", "他的"};
    for (size_t k = 0; k < sizeof f / sizeof *f; k++)
        if (word_is(c, i, f[k])) return 1;
    for (size_t k = 0; k < sizeof m / sizeof *m; k++)
        if (word_is(c, i, m[k])) return 2;
    return 0;
}

/* ---- determinism -------------------------------------------------------- */

static void test_determinism(void) {
    for (int lang = FFN_LANG_EN; lang <= FFN_LANG_ZH; lang++) {
        ffn_corpus *a = NULL, *b = NULL, *c = NULL;
        CHECK(ffn_corpus_generate((ffn_lang)lang, 7, 3000, &a) == FFN_OK, "%s", ffn_last_error());
        CHECK(ffn_corpus_generate((ffn_lang)lang, 7, 3000, &b) == FFN_OK, "%s", ffn_last_error());
        CHECK(ffn_corpus_generate((ffn_lang)lang, 8, 3000, &c) == FFN_OK, "%s", ffn_last_error());
        if (!a || !b || !c) return;
        CHECK(a->n_bytes == b->n_bytes && !memcmp(a->text, b->text, (size_t)a->n_bytes),
              "lang %d: the same seed gave different text", lang);
        CHECK(a->n_words == b->n_words &&
                  !memcmp(a->words, b->words, (size_t)a->n_words * sizeof *a->words),
              "lang %d: the same seed gave different labels", lang);
        CHECK(a->n_bytes != c->n_bytes || memcmp(a->text, c->text, (size_t)a->n_bytes),
              "lang %d: seeds 7 and 8 gave the same text", lang);
        CHECK(a->n_sentences == 3000, "n_sentences %lld", (long long)a->n_sentences);
        int64_t lines = 0;
        for (int64_t i = 0; i < a->n_bytes; i++) lines += a->text[i] == '\n';
        CHECK(lines == 3000, "lang %d: %lld lines for 3000 sentences", lang, (long long)lines);
        CHECK((int64_t)strlen(a->text) == a->n_bytes, "n_bytes is not strlen(text)");
        /* A prefix is stable: the first 100 sentences of a longer run. */
        ffn_corpus *d = NULL;
        CHECK(ffn_corpus_generate((ffn_lang)lang, 7, 100, &d) == FFN_OK, "%s", ffn_last_error());
        if (d) CHECK(!memcmp(a->text, d->text, (size_t)d->n_bytes), "lang %d: prefix differs", lang);
        ffn_corpus_free(a);
        ffn_corpus_free(b);
        ffn_corpus_free(c);
        ffn_corpus_free(d);
    }
    /* Cross-machine: the generator uses integer arithmetic only, so the
     * bytes are fixed.  These hashes change only when the generator is
     * changed on purpose (then update them). */
    ffn_corpus *e = NULL, *z = NULL;
    ffn_corpus_generate(FFN_LANG_EN, 1, 500, &e);
    ffn_corpus_generate(FFN_LANG_ZH, 1, 500, &z);
    if (e && z) {
        uint64_t he = fnv1a(e->text, (size_t)e->n_bytes), hz = fnv1a(z->text, (size_t)z->n_bytes);
        printf("golden hashes: en %016llx zh %016llx\n", (unsigned long long)he, (unsigned long long)hz);
        CHECK(he == GOLDEN_EN, "en seed 1 x 500 hash %016llx, expected %016llx", (unsigned long long)he,
              (unsigned long long)GOLDEN_EN);
        CHECK(hz == GOLDEN_ZH, "zh seed 1 x 500 hash %016llx, expected %016llx", (unsigned long long)hz,
              (unsigned long long)GOLDEN_ZH);
    }
    ffn_corpus_free(e);
    ffn_corpus_free(z);
}

/* ---- labels cover every word ------------------------------------------ */

static void check_coverage(const ffn_corpus *c) {
    int64_t at = 0, sentence = 0, bad = 0;
    for (int64_t i = 0; i < c->n_words; i++) {
        const ffn_word *w = &c->words[i];
        /* only spaces (en) or nothing (zh) between words, '\n' ends a sentence */
        for (; at < w->offset; at++) {
            char ch = c->text[at];
            if (ch == '\n') sentence++;
            else if (!(ch == ' ' && c->lang == FFN_LANG_EN)) bad++;
        }
        if (at != w->offset || w->length < 1 || w->cls < 0 || w->cls >= FFN_WORD_N_CLASSES ||
            w->sentence != sentence)
            bad++;
        for (int64_t k = 0; k < w->length; k++)
            if (c->text[w->offset + k] == ' ' || c->text[w->offset + k] == '\n') bad++;
        at = w->offset + w->length;
    }
    for (; at < c->n_bytes; at++)
        if (c->text[at] != '\n') bad++;
    CHECK(bad == 0, "lang %d: %lld bytes or words outside the labelling rules", c->lang, (long long)bad);
    CHECK(c->text[c->n_bytes - 1] == '\n', "the text does not end with a newline");

    /* word_at: every word finds itself; a space finds nothing; a span
     * covering a space and a word finds the word */
    int64_t wrong = 0;
    for (int64_t i = 0; i < c->n_words; i++) {
        const ffn_word *w = &c->words[i];
        if (ffn_corpus_word_at(c, w->offset, w->length) != i) wrong++;
        if (ffn_corpus_word_at(c, w->offset + w->length - 1, 1) != i) wrong++;
        if (w->offset > 0 && c->text[w->offset - 1] == ' ') {
            if (ffn_corpus_word_at(c, w->offset - 1, 1) != -1) wrong++;
            if (ffn_corpus_word_at(c, w->offset - 1, 2) != i) wrong++;
        }
    }
    CHECK(wrong == 0, "word_at wrong %lld times", (long long)wrong);
    CHECK(ffn_corpus_word_at(c, c->n_bytes - 1, 1) == -1, "the final newline is not a word");
    CHECK(ffn_corpus_word_at(c, c->n_bytes + 10, 3) == -1, "past the end");
}

/* Classes of words whose class this test knows. */
static void check_known_classes(const ffn_corpus *c) {
    static const struct {
        const char *w;
        int cls;
    } en[] = {{"because", FFN_WORD_FUNCTION}, {"the", FFN_WORD_FUNCTION}, {"a", FFN_WORD_FUNCTION},
              {"hungry", FFN_WORD_MODIFIER},  {"gave", FFN_WORD_VERB},     {"handed", FFN_WORD_VERB},
              {"apple", FFN_WORD_OBJECT},     {"book", FFN_WORD_OBJECT},   {".", FFN_WORD_PUNCT},
              {",", FFN_WORD_PUNCT},          {"she", FFN_WORD_PRONOUN},   {"him", FFN_WORD_PRONOUN},
              {"Mary", FFN_WORD_NAME},        {"John", FFN_WORD_NAME},     {"to", FFN_WORD_FUNCTION}},
      zh[] = {{"因为", FFN_WORD_FUNCTION}, {"所以", FFN_WORD_FUNCTION}, {"把", FFN_WORD_FUNCTION},
              {"苹果", FFN_WORD_OBJECT},   {"书", FFN_WORD_OBJECT},     {"递给", FFN_WORD_VERB},
              {"饿", FFN_WORD_MODIFIER},   {"她", FFN_WORD_PRONOUN},    {"他的", FFN_WORD_PRONOUN},
              {"。", FFN_WORD_PUNCT},      {"，", FFN_WORD_PUNCT},      {"了", FFN_WORD_FUNCTION}};
    int64_t seen = 0, wrong = 0;
    for (int64_t i = 0; i < c->n_words; i++) {
        size_t n = c->lang == FFN_LANG_EN ? sizeof en / sizeof *en : sizeof zh / sizeof *zh;
        for (size_t k = 0; k < n; k++) {
            const char *w = c->lang == FFN_LANG_EN ? en[k].w : zh[k].w;
            int cls = c->lang == FFN_LANG_EN ? en[k].cls : zh[k].cls;
            if (word_is(c, i, w)) {
                seen++;
                if (c->words[i].cls != cls) {
                    if (wrong < 5)
                        fprintf(stderr, "word '%s' labelled %s, expected %s\n", w,
                                ffn_word_class_name((ffn_word_class)c->words[i].cls),
                                ffn_word_class_name((ffn_word_class)cls));
                    wrong++;
                }
            }
        }
    }
    CHECK(seen > 1000 && wrong == 0, "lang %d: %lld known words, %lld with a wrong class", c->lang,
          (long long)seen, (long long)wrong);
    int64_t per_class[FFN_WORD_N_CLASSES] = {0};
    for (int64_t i = 0; i < c->n_words; i++) per_class[c->words[i].cls]++;
    for (int k = 0; k < FFN_WORD_N_CLASSES; k++)
        CHECK(per_class[k] > c->n_words / 100, "lang %d: class %s is rare (%lld of %lld)", c->lang,
              ffn_word_class_name((ffn_word_class)k), (long long)per_class[k], (long long)c->n_words);
}

/* A hand-checked sentence: the first line of English seed 1, word by word. */
static void test_hand_checked(void) {
    ffn_corpus *c = NULL;
    CHECK(ffn_corpus_generate(FFN_LANG_EN, 1, 1, &c) == FFN_OK, "%s", ffn_last_error());
    if (!c) return;
    const char *want_text = "The wrench was handed to Kirk by Courtney because he had always wanted it.\n";
    static const int want[] = {FFN_WORD_FUNCTION, FFN_WORD_OBJECT, FFN_WORD_FUNCTION, FFN_WORD_VERB,
                               FFN_WORD_FUNCTION, FFN_WORD_NAME,   FFN_WORD_FUNCTION, FFN_WORD_NAME,
                               FFN_WORD_FUNCTION, FFN_WORD_PRONOUN, FFN_WORD_FUNCTION,
                               FFN_WORD_MODIFIER, FFN_WORD_VERB,   FFN_WORD_PRONOUN, FFN_WORD_PUNCT};
    CHECK(!strcmp(c->text, want_text), "got '%s'", c->text);
    CHECK(c->n_words == 15, "%lld words", (long long)c->n_words);
    for (int i = 0; i < 15 && i < c->n_words; i++)
        CHECK(c->words[i].cls == want[i], "word %d class %s", i,
              ffn_word_class_name((ffn_word_class)c->words[i].cls));
    if (c->n_words == 15) {
        /* "he" is Kirk (the receiver), "it" is the wrench */
        CHECK(c->words[9].ref == 5 && c->words[9].role == FFN_ROLE_RECEIVER, "he -> %lld",
              (long long)c->words[9].ref);
        CHECK(c->words[13].ref == 1, "it -> %lld", (long long)c->words[13].ref);
        CHECK(c->words[5].role == FFN_ROLE_RECEIVER && c->words[7].role == FFN_ROLE_GIVER,
              "roles %d %d", c->words[5].role, c->words[7].role);
    }
    ffn_corpus_free(c);
}

/* ---- pronouns ---------------------------------------------------------- */

static void check_pronouns(const ffn_corpus *c) {
    int64_t gendered = 0, bad_ref = 0, bad_text = 0, known = 0, bad_known = 0, to_receiver = 0;
    for (int64_t i = 0; i < c->n_words; i++) {
        const ffn_word *w = &c->words[i];
        if (w->cls != FFN_WORD_PRONOUN) continue;
        int pg = pronoun_gender(c, i);
        if (!pg) continue;
        gendered++;
        if (pg != w->gender) bad_text++;
        if (w->ref < 0 || w->ref >= i || c->words[w->ref].cls != FFN_WORD_NAME ||
            c->words[w->ref].sentence != w->sentence || c->words[w->ref].gender != w->gender ||
            c->words[w->ref].role != w->role) {
            if (bad_ref < 5)
                fprintf(stderr, "sentence %lld: pronoun %lld has ref %lld\n", (long long)w->sentence,
                        (long long)i, (long long)w->ref);
            bad_ref++;
            continue;
        }
        to_receiver += w->role == FFN_ROLE_RECEIVER;
        int kg = known_gender(c, w->ref);
        if (kg) {
            known++;
            if (kg != pg) bad_known++;
        }
    }
    printf("lang %d: %lld gendered pronouns, %lld to a name this test knows, %.0f%% to the receiver\n",
           c->lang, (long long)gendered, (long long)known, 100.0 * (double)to_receiver / (double)(gendered ? gendered : 1));
    CHECK(gendered > c->n_sentences / 2, "too few pronouns: %lld", (long long)gendered);
    CHECK(bad_text == 0, "%lld pronouns whose text disagrees with their gender label", (long long)bad_text);
    CHECK(bad_ref == 0, "%lld pronouns without a valid earlier referent of the same gender", (long long)bad_ref);
    CHECK(known > 100 && bad_known == 0, "%lld of %lld pronouns disagree with their referent's known gender",
          (long long)bad_known, (long long)known);
    CHECK(to_receiver > gendered / 4 && to_receiver < gendered * 3 / 4,
          "referents are lopsided: %lld of %lld to the receiver", (long long)to_receiver, (long long)gendered);

    /* Every name keeps one gender across the corpus. */
    int64_t n_names = 0;
    char **names = malloc((size_t)c->n_words * sizeof *names);
    for (int64_t i = 0; i < c->n_words; i++)
        if (c->words[i].cls == FFN_WORD_NAME) {
            const ffn_word *w = &c->words[i];
            char *s = malloc((size_t)w->length + 3);
            s[0] = (char)('0' + w->gender);
            s[1] = ':';
            memcpy(s + 2, c->text + w->offset, (size_t)w->length);
            s[w->length + 2] = '\0';
            names[n_names++] = s;
        }
    qsort(names, (size_t)n_names, sizeof *names, cmp_str);
    int64_t flips = 0;
    /* compare every distinct name against the set of the other gender */
    for (int64_t i = 0; i < n_names; i++) {
        if (names[i][0] != '1') continue;
        char *probe = dup_span(names[i], (int64_t)strlen(names[i]));
        probe[0] = '2';
        if (bsearch(&probe, names, (size_t)n_names, sizeof *names, cmp_str)) {
            if (flips < 5) fprintf(stderr, "name %s has both genders\n", probe + 2);
            flips++;
        }
        free(probe);
    }
    CHECK(flips == 0, "%lld names appear with both genders", (long long)flips);
    for (int64_t i = 0; i < n_names; i++) free(names[i]);
    free(names);
}

/* The role a predicate implies, parsed from the simplest templates with
 * this test's own reading: "X V Y ... because PRON was hungry." -> Y, and
 * "X V Y ... because PRON had too many." -> X.  Chinese: "X V了Y一M O，
 * 因为PRON饿了。" -> Y, "因为PRON有两M" -> X. */
static void check_roles(const ffn_corpus *c) {
    int64_t checked = 0, wrong = 0, differ = 0, same = 0;
    int64_t s_start = 0;
    while (s_start < c->n_words) {
        int64_t s_end = s_start;
        while (s_end < c->n_words && c->words[s_end].sentence == c->words[s_start].sentence) s_end++;
        /* the first two names, the pronoun after "because"/"因为" */
        int64_t x = -1, y = -1, bec = -1, names_before = 0;
        for (int64_t i = s_start; i < s_end; i++) {
            if (c->words[i].cls == FFN_WORD_NAME) {
                if (x < 0) x = i;
                else if (y < 0) y = i;
                if (bec < 0) names_before++;
            }
            if (bec < 0 && (word_is(c, i, "because") || word_is(c, i, "因为"))) bec = i;
        }
        if (x >= 0 && y >= 0) {
            if (c->words[x].gender == c->words[y].gender) same++;
            else differ++;
        }
        /* only "X V Y ..." (en: X at 0, verb at 1, Y at 2; zh: X V 了 Y) with
         * both names before the cause and nothing else fancy */
        int simple = x == s_start && bec > y && y >= 0 && names_before == 2 &&
                     (c->lang == FFN_LANG_EN ? (y == s_start + 2 && c->words[s_start + 1].cls == FFN_WORD_VERB)
                                             : (y == s_start + 3 && word_is(c, s_start + 2, "了")));
        if (simple && bec + 3 < s_end && pronoun_gender(c, bec + 1)) {
            int pg = pronoun_gender(c, bec + 1);
            int64_t p = bec + 2;
            int target = 0; /* 1: receiver (y), 2: giver (x) */
            if (c->lang == FFN_LANG_EN) {
                if (word_is(c, p, "was") && word_is(c, p + 1, "hungry") && word_is(c, p + 2, ".")) target = 1;
                if (word_is(c, p, "had") && word_is(c, p + 1, "too") && word_is(c, p + 2, "many")) target = 2;
            } else {
                if (word_is(c, p, "饿") && word_is(c, p + 1, "了")) target = 1;
                if (word_is(c, p, "有") && word_is(c, p + 1, "两")) target = 2;
            }
            if (target) {
                int64_t who = target == 1 ? y : x;
                checked++;
                if (c->words[who].gender != pg) wrong++;
            }
        }
        s_start = s_end;
    }
    printf("lang %d: %lld sentences parsed for roles, %lld wrong; giver/receiver genders differ in %lld, "
           "agree in %lld\n",
           c->lang, (long long)checked, (long long)wrong, (long long)differ, (long long)same);
    CHECK(checked > 50 && wrong == 0, "lang %d: %lld of %lld role checks wrong", c->lang, (long long)wrong,
          (long long)checked);
    CHECK(differ > (differ + same) / 3 && same > (differ + same) / 3,
          "gender pairs lopsided: %lld differ, %lld agree", (long long)differ, (long long)same);
}

/* ---- variety ------------------------------------------------------------- */

static void check_variety(const ffn_corpus *c) {
    ffn_corpus_inventory inv;
    CHECK(ffn_corpus_get_inventory(c->lang, &inv) == FFN_OK, "inventory");
    /* distinct sentences */
    char **lines = malloc((size_t)c->n_sentences * sizeof *lines);
    int64_t n = 0, start = 0;
    for (int64_t i = 0; i < c->n_bytes; i++)
        if (c->text[i] == '\n') {
            lines[n++] = dup_span(c->text + start, i - start);
            start = i + 1;
        }
    int64_t distinct = count_distinct(lines, n);
    for (int64_t i = 0; i < n; i++) free(lines[i]);
    free(lines);
    /* distinct words per class, and distinct class patterns (sentence shapes) */
    char **objs = malloc((size_t)c->n_words * sizeof *objs), **people = malloc((size_t)c->n_words * sizeof *people);
    char **shapes = malloc((size_t)c->n_sentences * sizeof *shapes);
    int64_t n_objs = 0, n_people = 0, n_shapes = 0;
    char shape[512];
    size_t sl = 0;
    for (int64_t i = 0; i < c->n_words; i++) {
        const ffn_word *w = &c->words[i];
        if (w->cls == FFN_WORD_OBJECT) objs[n_objs++] = dup_span(c->text + w->offset, w->length);
        if (w->cls == FFN_WORD_NAME) {
            /* zh: count given names (after the one-character surname) */
            int64_t skip = c->lang == FFN_LANG_ZH ? 3 : 0;
            people[n_people++] = dup_span(c->text + w->offset + skip, w->length - skip);
        }
        if (sl < sizeof shape - 1) shape[sl++] = (char)('A' + w->cls);
        if (i + 1 == c->n_words || c->words[i + 1].sentence != w->sentence) {
            shapes[n_shapes++] = dup_span(shape, (int64_t)sl);
            sl = 0;
        }
    }
    int64_t d_objs = count_distinct(objs, n_objs), d_people = count_distinct(people, n_people);
    int64_t d_shapes = count_distinct(shapes, n_shapes);
    for (int64_t i = 0; i < n_objs; i++) free(objs[i]);
    for (int64_t i = 0; i < n_people; i++) free(people[i]);
    for (int64_t i = 0; i < n_shapes; i++) free(shapes[i]);
    free(objs);
    free(people);
    free(shapes);
    printf("lang %d: %lld sentences, %lld distinct; %lld distinct (given) names of %lld; %lld distinct "
           "object words; %lld sentence shapes; inventory: %lld+%lld names, %lld surnames, %lld objects, "
           "%lld verbs, %lld templates, %lld+%lld causes\n",
           c->lang, (long long)c->n_sentences, (long long)distinct, (long long)d_people,
           (long long)(inv.female_names + inv.male_names), (long long)d_objs, (long long)d_shapes,
           (long long)inv.female_names, (long long)inv.male_names, (long long)inv.surnames,
           (long long)inv.objects, (long long)inv.verbs, (long long)inv.templates,
           (long long)inv.giver_causes, (long long)inv.receiver_causes);
    CHECK(distinct > 5000, "only %lld distinct sentences of %lld", (long long)distinct, (long long)c->n_sentences);
    /* every name and object of the inventory shows up in 20,000 sentences */
    CHECK(d_people >= (inv.female_names + inv.male_names) * 95 / 100, "names used %lld of %lld",
          (long long)d_people, (long long)(inv.female_names + inv.male_names));
    CHECK(d_objs >= inv.objects, "object words used %lld, inventory %lld", (long long)d_objs,
          (long long)inv.objects);
    CHECK(d_shapes >= inv.templates * 3, "only %lld sentence shapes for %lld templates", (long long)d_shapes,
          (long long)inv.templates);
    if (c->lang == FFN_LANG_EN) {
        CHECK(inv.female_names >= 200 && inv.male_names >= 200, "en names %lld+%lld",
              (long long)inv.female_names, (long long)inv.male_names);
        CHECK(inv.objects >= 300 && inv.templates >= 20 && inv.verbs >= 25, "en inventory");
    } else {
        CHECK(inv.female_names >= 50 && inv.male_names >= 50 && inv.surnames >= 40, "zh names");
        CHECK(inv.objects >= 200 && inv.templates >= 15 && inv.verbs >= 15, "zh inventory");
    }
}

static void test_language(ffn_lang lang) {
    ffn_corpus *c = NULL;
    CHECK(ffn_corpus_generate(lang, 1, 20000, &c) == FFN_OK, "%s", ffn_last_error());
    if (!c) return;
    CHECK(utf8_ok((const unsigned char *)c->text, (size_t)c->n_bytes), "lang %d: invalid UTF-8", lang);
    if (lang == FFN_LANG_ZH) {
        int64_t ascii = 0;
        for (int64_t i = 0; i < c->n_bytes; i++) ascii += c->text[i] != '\n' && (unsigned char)c->text[i] < 0x80;
        CHECK(ascii == 0, "zh text holds %lld ASCII bytes", (long long)ascii);
    }
    check_coverage(c);
    check_known_classes(c);
    check_pronouns(c);
    check_roles(c);
    check_variety(c);
    ffn_corpus_free(c);
}

static void test_errors(void) {
    ffn_corpus *c = (ffn_corpus *)1;
    CHECK(ffn_corpus_generate(FFN_LANG_EN, 1, 0, &c) == FFN_ERR_CONFIG && c == NULL, "0 sentences");
    CHECK(strstr(ffn_last_error(), "sentences"), "message: %s", ffn_last_error());
    CHECK(ffn_corpus_generate(FFN_LANG_EN, 1, 10000001, &c) == FFN_ERR_CONFIG, "too many sentences");
    CHECK(ffn_corpus_generate((ffn_lang)7, 1, 10, &c) == FFN_ERR_INVALID_ARG, "bad language");
    CHECK(ffn_corpus_generate(FFN_LANG_EN, 1, 10, NULL) == FFN_ERR_INVALID_ARG, "NULL out");
    ffn_lang l;
    CHECK(ffn_lang_parse("zh", &l) == FFN_OK && l == FFN_LANG_ZH, "parse zh");
    CHECK(ffn_lang_parse("fr", &l) == FFN_ERR_CONFIG && strstr(ffn_last_error(), "'fr'"), "parse fr");
    CHECK(!strcmp(ffn_word_class_name(FFN_WORD_PUNCT), "punct"), "class name");
    CHECK(!strcmp(ffn_word_class_name(FFN_WORD_SPACE), "space"), "class name");
    ffn_corpus_free(NULL);
}

int main(void) {
    test_determinism();
    test_hand_checked();
    test_language(FFN_LANG_EN);
    test_language(FFN_LANG_ZH);
    test_errors();
    return check_done("test_corpus");
}
