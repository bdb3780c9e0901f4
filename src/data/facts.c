/* facts.c -- the facts corpus: fictional subject-relation-object facts
 * (a person's city, an object's colour, a country's capital, a person's
 * profession) with invented names, stated through templates, plus the
 * held-out paraphrases and neighbour prompts that test whether a model
 * recalls them, and the JSONL reader and writer of that set.
 *
 * Reads top to bottom: the name pools, the relations and their forms, the
 * frames around a form, which (frame, form) pairs are trained and which
 * are held out, rendering, the set's generation, JSONL out and in, and the
 * line renderer corpus.c calls for `--corpus facts`.
 *
 * Design.  A statement is a frame ("", "As everyone knows,", ...) around
 * one of a relation's three forms ("{S} lives in {O}", "the home of {S} is
 * {O}", "{S}, who lives in {O}, {tail}").  Each relation trains six of the
 * fifteen (frame, form) pairs and holds out three of the others; every
 * word of a held-out pair occurs in training (its frame is trained with
 * the relation's other forms and with the other relations), so a held-out
 * prompt asks for the fact in a context never trained on, not in unknown
 * words.  The names are built from syllables no English word of the
 * built-in corpus uses, so nothing but training tells a model the fact. */
#include "ffn/data.h"
#include "base/common.h"
#include "data/facts_internal.h"

#include <stdio.h>
#include <string.h>

#include "base/rng.h"
#include "ffn/json.h"

#define COUNT(a) ((int64_t)(sizeof(a) / sizeof((a)[0])))

static char *ffn_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

/* ---- name pools: invented words, heads x tails -------------------------- */

static const char *const person_head[] = {"Bal", "Cor", "Dax", "Fen", "Gil", "Hal", "Jor",
    "Kel", "Lun", "Mor", "Nix", "Pol", "Quen", "Ros", "Sev", "Tam", "Ulf", "Vor", "Wyn", "Zan"};
static const char *const person_tail[] = {"ira", "osh", "ette", "anor", "ubi", "elle", "amo",
    "isk", "ova", "uro"};
static const char *const city_head[] = {"Vel", "Ost", "Thar", "Myr", "Kesh", "Brin", "Zol",
    "Quar", "Yss", "Drem"};
static const char *const city_tail[] = {"m", "ford", "holt", "grad", "wick", "mar", "dun", "by"};
static const char *const country_head[] = {"Al", "Bor", "Cas", "Dur", "Esk", "Fal", "Gor",
    "Hes", "Iv", "Jas", "Kor", "Lir", "Mav", "Nor", "Op", "Pel", "Rud", "Sar", "Tov", "Ves"};
static const char *const country_tail[] = {"onia", "avia", "istan", "enia", "ura", "ador",
    "mark", "essa", "ovia", "aria"};
static const char *const thing_head[] = {"grin", "zob", "plim", "snor", "trav", "wum", "quib",
    "flon", "drub", "yel", "mip", "gav", "hob", "krin", "lup", "nef", "pog", "rav", "sk", "tib"};
static const char *const thing_tail[] = {"del", "ump", "ix", "ack", "oon", "et", "ule", "ank",
    "ibe", "orr"};
static const char *const colours[] = {"red", "blue", "green", "yellow", "orange", "purple",
    "pink", "brown", "grey", "white", "black", "golden"};
static const char *const professions[] = {"baker", "pilot", "doctor", "farmer", "teacher",
    "painter", "sailor", "miner", "judge", "tailor", "singer", "nurse"};

/* ---- relations ------------------------------------------------------------
 * Forms in a small markup: {S} the subject, {O} the object, {T} a tail
 * clause; a word may carry its class as word/c (n p o v f m ., as in
 * corpus.c), no class meaning function.  Form A is the fact's prompt. */
enum { POOL_PERSON, POOL_CITY, POOL_COUNTRY, POOL_THING, POOL_COLOUR, POOL_PROFESSION };

typedef struct relation {
    const char *name;
    int subject_pool, object_pool;
    int unique_objects; /* every subject its own object (capitals) */
    int subject_cls, object_cls;
    const char *forms[3];
    const char *tails[4];
} relation;

static const relation relations[FACTS_N_RELATIONS] = {
    {"lives_in", POOL_PERSON, POOL_CITY, 0, FFN_WORD_NAME, FFN_WORD_OBJECT,
     {"{S} lives/v in {O}", "the home/o of {S} is/v {O}", "{S} ,/. who/p lives/v in {O} ,/. {T}"},
     {"is/v happy/m", "is/v kind/m", "sings/v well/m", "is/v tall/m"}},
    {"colour", POOL_THING, POOL_COLOUR, 0, FFN_WORD_OBJECT, FFN_WORD_MODIFIER,
     {"the {S} is/v {O}", "the colour/o of the {S} is/v {O}", "the {S} ,/. which is/v {O} ,/. {T}"},
     {"is/v small/m", "is/v old/m", "is/v new/m", "is/v heavy/m"}},
    {"capital", POOL_COUNTRY, POOL_CITY, 1, FFN_WORD_NAME, FFN_WORD_OBJECT,
     {"the capital/o of {S} is/v {O}", "the main/m city/o of {S} is/v {O}",
      "{S} ,/. whose capital/o is/v {O} ,/. {T}"},
     {"is/v large/m", "is/v rich/m", "is/v far/m away/m", "is/v cold/m"}},
    {"profession", POOL_PERSON, POOL_PROFESSION, 0, FFN_WORD_NAME, FFN_WORD_OBJECT,
     {"{S} works/v as a {O}", "by trade/o ,/. {S} is/v a {O}", "{S} ,/. who works/v as a {O} ,/. {T}"},
     {"is/v happy/m", "is/v busy/m", "sings/v well/m", "is/v tired/m"}},
};

/* Frames around a form; frame 0 is none. */
static const char *const frames[FACTS_N_FRAMES] = {
    "", "as everyone/p knows/v ,/.", "it/p is/v true/m that", "in this story/o ,/.",
    "they/p say/v that"};

/* The (frame, form) pairs relation r trains: every form bare, and form k
 * in frame 1 + (r + k) % 4.  Held out: form A in frame 1 + (r + 3) % 4,
 * form B in frame 1 + (r + 3) % 4... see paraphrase_pairs. */
static void trained_pair(int r, int k, int *frame, int *form) {
    if (k < 3) {
        *frame = 0;
        *form = k;
    } else {
        *form = k - 3;
        *frame = 1 + (r + *form) % 4;
    }
}

/* The three held-out pairs: form A in frame 1 + (r+3)%4 (a frame the
 * relation never uses), form B in frame 1 + (r+2)%4 (trained with form C)
 * and form C in frame 1 + r%4 (trained with form A). */
static void paraphrase_pair(int r, int k, int *frame, int *form) {
    static const int shift[3] = {3, 2, 0};
    *form = k;
    *frame = 1 + (r + shift[k]) % 4;
}

/* ---- pools ---------------------------------------------------------------- */

static int64_t pool_size(int pool) {
    switch (pool) {
    case POOL_PERSON: return COUNT(person_head) * COUNT(person_tail);
    case POOL_CITY: return COUNT(city_head) * COUNT(city_tail);
    case POOL_COUNTRY: return COUNT(country_head) * COUNT(country_tail);
    case POOL_THING: return COUNT(thing_head) * COUNT(thing_tail);
    case POOL_COLOUR: return COUNT(colours);
    default: return COUNT(professions);
    }
}

/* Word i of a pool into buf. */
static void pool_word(int pool, int64_t i, char *buf, size_t n) {
    const char *const *h = NULL, *const *t = NULL;
    int64_t nt = 1;
    switch (pool) {
    case POOL_PERSON: h = person_head, t = person_tail, nt = COUNT(person_tail); break;
    case POOL_CITY: h = city_head, t = city_tail, nt = COUNT(city_tail); break;
    case POOL_COUNTRY: h = country_head, t = country_tail, nt = COUNT(country_tail); break;
    case POOL_THING: h = thing_head, t = thing_tail, nt = COUNT(thing_tail); break;
    case POOL_COLOUR: snprintf(buf, n, "%s", colours[i]); return;
    default: snprintf(buf, n, "%s", professions[i]); return;
    }
    snprintf(buf, n, "%s%s", h[i / nt], t[i % nt]);
}

/* A permutation of 0..n-1 (Fisher-Yates). */
static void shuffle(ffn_rng *r, int64_t *a, int64_t n) {
    for (int64_t i = 0; i < n; i++) a[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)ffn_rng_below(r, (uint64_t)i + 1);
        int64_t x = a[i];
        a[i] = a[j];
        a[j] = x;
    }
}

/* ---- rendering ------------------------------------------------------------ */

/* Render markup into a sink, word by word.  The sink gets each word with
 * its class; stop_at_object ends before {O}.  Returns 1 when it stopped
 * there. */
static int render_markup(const char *p, const char *subject, int subject_cls, const char *object,
                         int object_cls, const char *tail, int stop_at_object,
                         facts_word_sink sink, void *user);

static int render_markup(const char *p, const char *subject, int subject_cls, const char *object,
                         int object_cls, const char *tail, int stop_at_object,
                         facts_word_sink sink, void *user) {
    char w[96];
    while (*p) {
        while (*p == ' ') p++;
        if (!*p) break;
        const char *e = p;
        while (*e && *e != ' ') e++;
        size_t n = (size_t)(e - p);
        if (n == 3 && !memcmp(p, "{S}", 3)) sink(subject, subject_cls, user);
        else if (n == 3 && !memcmp(p, "{O}", 3)) {
            if (stop_at_object) return 1;
            sink(object, object_cls, user);
        } else if (n == 3 && !memcmp(p, "{T}", 3)) {
            if (tail && render_markup(tail, subject, subject_cls, object, object_cls, NULL,
                                      stop_at_object, sink, user))
                return 1;
        } else {
            const char *slash = memchr(p, '/', n);
            size_t wn = slash && slash > p ? (size_t)(slash - p) : n;
            int cls = slash && slash > p ? facts_class_of(slash[1]) : FFN_WORD_FUNCTION;
            if (wn >= sizeof w) wn = sizeof w - 1;
            memcpy(w, p, wn);
            w[wn] = 0;
            sink(w, cls, user);
        }
        p = e;
    }
    return 0;
}

int facts_render(const ffn_fact *f, int relation_index, int frame, int form, const char *tail,
                 int stop_at_object, facts_word_sink sink, void *user) {
    const relation *R = &relations[relation_index];
    if (frame > 0) render_markup(frames[frame], "", 0, "", 0, NULL, 0, sink, user);
    return render_markup(R->forms[form], f->subject, R->subject_cls, f->object, R->object_cls,
                         tail, stop_at_object, sink, user);
}

/* A sink that builds English text: words joined by spaces (none before
 * punctuation), the first letter capitalised. */
typedef struct text_sink {
    char buf[512];
    size_t n;
} text_sink;

static void to_text(const char *w, int cls, void *user) {
    text_sink *t = user;
    size_t k = strlen(w);
    if (t->n && !(cls == FFN_WORD_PUNCT) && t->n + 1 < sizeof t->buf) t->buf[t->n++] = ' ';
    if (t->n + k >= sizeof t->buf) return;
    memcpy(t->buf + t->n, w, k);
    if (t->n == 0 && w[0] >= 'a' && w[0] <= 'z') t->buf[0] = (char)(w[0] - 'a' + 'A');
    t->n += k;
    t->buf[t->n] = 0;
}

/* The prompt of (frame, form): the statement up to the object. */
static char *prompt_of(const ffn_fact *f, int r, int frame, int form) {
    text_sink t = {.n = 0};
    t.buf[0] = 0;
    facts_render(f, r, frame, form, relations[r].tails[0], 1, to_text, &t);
    return ffn_strdup(t.buf);
}

/* ---- the set ------------------------------------------------------------ */

void ffn_facts_free(ffn_facts *facts) {
    if (!facts) return;
    for (int64_t i = 0; i < facts->n_facts; i++) {
        ffn_fact *f = &facts->facts[i];
        FFN_FREE_ALL(f->subject, f->relation, f->prompt, f->object);
        for (int64_t k = 0; k < f->n_paraphrases; k++) free(f->paraphrases[k]);
        free(f->paraphrases);
        for (int64_t k = 0; k < f->n_neighbours; k++)
            FFN_FREE_ALL(f->neighbours[k].prompt, f->neighbours[k].object);
        free(f->neighbours);
    }
    FFN_FREE_ALL(facts->facts, facts);
}

int facts_relation_index(const char *name) {
    for (int r = 0; r < FACTS_N_RELATIONS; r++)
        if (!strcmp(relations[r].name, name)) return r;
    return -1;
}

ffn_status ffn_facts_generate(int64_t n_facts, uint64_t seed, ffn_facts **out) {
    if (!out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_facts_generate: out is NULL");
    *out = NULL;
    if (n_facts < 1 || n_facts > FFN_FACTS_MAX)
        return ffn_error(FFN_ERR_CONFIG, "facts: expected 1 .. %d facts, got %lld", FFN_FACTS_MAX,
                         (long long)n_facts);
    ffn_facts *fs = calloc(1, sizeof *fs);
    if (fs) fs->facts = calloc((size_t)n_facts, sizeof *fs->facts);
    if (!fs || !fs->facts) {
        free(fs);
        return ffn_error(FFN_ERR_NOMEM, "facts: %lld facts", (long long)n_facts);
    }
    fs->seed = seed;
    fs->n_facts = n_facts;
    ffn_rng r;
    ffn_rng_seed(&r, seed ^ 0x66616374735eULL);
    /* one order per subject pool: persons are shared by two relations, so
     * they take every other person of one permutation */
    int64_t order[6][200], used[FACTS_N_RELATIONS] = {0};
    for (int p = 0; p < 4; p++) shuffle(&r, order[p], pool_size(p));
    ffn_status st = FFN_OK;
    for (int64_t i = 0; i < n_facts && !st; i++) {
        int ri = (int)(i % FACTS_N_RELATIONS);
        const relation *R = &relations[ri];
        int64_t k = used[ri]++;
        int64_t si = R->subject_pool == POOL_PERSON ? order[POOL_PERSON][2 * k + (ri == 3)]
                                                    : order[R->subject_pool][k];
        int64_t oi = R->unique_objects ? order[R->object_pool][k]
                                       : (int64_t)ffn_rng_below(&r, (uint64_t)pool_size(R->object_pool));
        char sbuf[64], obuf[64];
        pool_word(R->subject_pool, si, sbuf, sizeof sbuf);
        pool_word(R->object_pool, oi, obuf, sizeof obuf);
        ffn_fact *f = &fs->facts[i];
        f->id = i;
        f->subject = ffn_strdup(sbuf);
        f->relation = ffn_strdup(R->name);
        f->object = ffn_strdup(obuf);
        if (!f->subject || !f->relation || !f->object) st = ffn_error(FFN_ERR_NOMEM, "facts");
    }
    /* prompts need every subject and object; neighbours every prompt */
    for (int64_t i = 0; i < n_facts && !st; i++) {
        ffn_fact *f = &fs->facts[i];
        int ri = (int)(i % FACTS_N_RELATIONS);
        f->prompt = prompt_of(f, ri, 0, 0);
        f->paraphrases = calloc(3, sizeof *f->paraphrases);
        if (!f->prompt || !f->paraphrases) {
            st = ffn_error(FFN_ERR_NOMEM, "facts");
            break;
        }
        f->n_paraphrases = 3;
        for (int k = 0; k < 3; k++) {
            int frame, form;
            paraphrase_pair(ri, k, &frame, &form);
            if (!(f->paraphrases[k] = prompt_of(f, ri, frame, form))) st = ffn_error(FFN_ERR_NOMEM, "facts");
        }
    }
    /* neighbours: the next facts of the same relation, cyclically */
    for (int64_t i = 0; i < n_facts && !st; i++) {
        ffn_fact *f = &fs->facts[i];
        int64_t same = (n_facts - 1 - i % FACTS_N_RELATIONS) / FACTS_N_RELATIONS + 1;
        int64_t nn = same - 1 < FACTS_N_NEIGHBOURS ? same - 1 : FACTS_N_NEIGHBOURS;
        if (nn <= 0) continue;
        f->neighbours = calloc((size_t)nn, sizeof *f->neighbours);
        if (!f->neighbours) {
            st = ffn_error(FFN_ERR_NOMEM, "facts");
            break;
        }
        int64_t pos = i / FACTS_N_RELATIONS;
        for (int64_t k = 0; k < nn; k++) {
            int64_t j = ((pos + 1 + k) % same) * FACTS_N_RELATIONS + i % FACTS_N_RELATIONS;
            f->neighbours[k].prompt = ffn_strdup(fs->facts[j].prompt);
            f->neighbours[k].object = ffn_strdup(fs->facts[j].object);
            f->n_neighbours = k + 1;
            if (!f->neighbours[k].prompt || !f->neighbours[k].object) st = ffn_error(FFN_ERR_NOMEM, "facts");
        }
    }
    if (st) {
        ffn_facts_free(fs);
        return st;
    }
    *out = fs;
    return FFN_OK;
}

/* ---- training lines (for corpus.c) ----------------------------------------- */

void facts_render_statement(const ffn_facts *fs, ffn_rng *r, facts_word_sink sink, void *user) {
    int64_t i = (int64_t)ffn_rng_below(r, (uint64_t)fs->n_facts);
    const ffn_fact *f = &fs->facts[i];
    int ri = facts_relation_index(f->relation);
    int frame, form;
    trained_pair(ri, (int)ffn_rng_below(r, 6), &frame, &form);
    const char *tail = relations[ri].tails[ffn_rng_below(r, 4)];
    facts_render(f, ri, frame, form, tail, 0, sink, user);
    sink(".", FFN_WORD_PUNCT, user);
}

/* ---- JSONL ------------------------------------------------------------------ */

typedef struct sbuf {
    char *s;
    size_t n, cap;
    int err;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->err) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->err = 1;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_json(sbuf *b, const char *s) {
    sb_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char tmp[8];
        if (c == '"' || c == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)c;
            sb_put(b, tmp, 2);
        } else if (c < 0x20) {
            snprintf(tmp, sizeof tmp, "\\u%04x", c);
            sb_put(b, tmp, 6);
        } else sb_put(b, (const char *)&c, 1);
    }
    sb_put(b, "\"", 1);
}

ffn_status ffn_facts_to_jsonl(const ffn_facts *fs, char **text, size_t *n_bytes) {
    if (!fs || !text) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_facts_to_jsonl: NULL argument");
    sbuf b = {0};
    char num[32];
    for (int64_t i = 0; i < fs->n_facts; i++) {
        const ffn_fact *f = &fs->facts[i];
        snprintf(num, sizeof num, "%lld", (long long)f->id);
        sb_str(&b, "{\"id\": ");
        sb_str(&b, num);
        sb_str(&b, ", \"subject\": ");
        sb_json(&b, f->subject);
        sb_str(&b, ", \"relation\": ");
        sb_json(&b, f->relation);
        sb_str(&b, ", \"prompt\": ");
        sb_json(&b, f->prompt);
        sb_str(&b, ", \"object\": ");
        sb_json(&b, f->object);
        sb_str(&b, ", \"paraphrases\": [");
        for (int64_t k = 0; k < f->n_paraphrases; k++) {
            if (k) sb_str(&b, ", ");
            sb_json(&b, f->paraphrases[k]);
        }
        sb_str(&b, "], \"neighbours\": [");
        for (int64_t k = 0; k < f->n_neighbours; k++) {
            sb_str(&b, k ? ", {\"prompt\": " : "{\"prompt\": ");
            sb_json(&b, f->neighbours[k].prompt);
            sb_str(&b, ", \"object\": ");
            sb_json(&b, f->neighbours[k].object);
            sb_str(&b, "}");
        }
        sb_str(&b, "]}\n");
    }
    if (b.err) {
        free(b.s);
        return ffn_error(FFN_ERR_NOMEM, "facts: JSONL of %lld facts", (long long)fs->n_facts);
    }
    if (!b.s) sb_str(&b, "");
    *text = b.s;
    if (n_bytes) *n_bytes = b.n;
    return b.err ? ffn_error(FFN_ERR_NOMEM, "facts") : FFN_OK;
}

/* An optional array field of a fact line (of `kind`, at most
 * FACTS_MAX_LIST items): the array, its length and a zeroed array of as
 * many `elem`-byte items (NULL when empty). */
static ffn_status take_list(const ffn_json_value *obj, const char *key, const char *kind,
                            const char *what, size_t elem, const ffn_json_value **arr, size_t *n,
                            void **items) {
    *arr = ffn_json_get(obj, key);
    if (*arr && ffn_json_type_of(*arr) != FFN_JSON_ARRAY)
        return ffn_error(FFN_ERR_FORMAT, "%s: field \"%s\": expected an array of %s", what, key, kind);
    size_t len = ffn_json_length(*arr);
    if (len > FACTS_MAX_LIST)
        return ffn_error(FFN_ERR_FORMAT, "%s: field \"%s\": at most %d, found %zu", what, key,
                         FACTS_MAX_LIST, len);
    if (len && !(*items = calloc(len, elem))) return ffn_error(FFN_ERR_NOMEM, "%s", what);
    *n = len;
    return FFN_OK;
}

/* One string field of a fact line, copied. */
static ffn_status take_string(const ffn_json_value *obj, const char *key, const char *name,
                              int64_t line, int allow_empty, char **out) {
    const ffn_json_value *v = ffn_json_get(obj, key);
    const char *s = ffn_json_string(v);
    if (!v) return ffn_error(FFN_ERR_FORMAT, "%s: line %lld: field \"%s\" is missing", name, (long long)line, key);
    if (!s) return ffn_error(FFN_ERR_FORMAT, "%s: line %lld: field \"%s\": expected a string", name, (long long)line, key);
    if (!allow_empty && !*s)
        return ffn_error(FFN_ERR_FORMAT, "%s: line %lld: field \"%s\": expected a non-empty string", name, (long long)line, key);
    if (strlen(s) != ffn_json_length(v))
        return ffn_error(FFN_ERR_FORMAT, "%s: line %lld: field \"%s\": contains a NUL character", name, (long long)line, key);
    *out = ffn_strdup(s);
    return *out ? FFN_OK : ffn_error(FFN_ERR_NOMEM, "%s", name);
}

static ffn_status parse_line(const char *p, size_t n, const char *name, int64_t line, ffn_fact *f) {
    char what[256];
    snprintf(what, sizeof what, "%s: line %lld", name, (long long)line);
    ffn_json *doc = NULL;
    ffn_status st = ffn_json_parse(p, n, what, &doc);
    if (st) return st;
    const ffn_json_value *o = ffn_json_root(doc);
    if (ffn_json_type_of(o) != FFN_JSON_OBJECT) {
        ffn_json_free(doc);
        return ffn_error(FFN_ERR_FORMAT, "%s: expected a JSON object per line", what);
    }
    int64_t id;
    const ffn_json_value *idv = ffn_json_get(o, "id");
    if (!idv) st = ffn_error(FFN_ERR_FORMAT, "%s: field \"id\" is missing", what);
    else if (!ffn_json_integer(idv, &id) || id < 0)
        st = ffn_error(FFN_ERR_FORMAT, "%s: field \"id\": expected an integer >= 0", what);
    else f->id = id;
    if (!st) st = take_string(o, "subject", name, line, 0, &f->subject);
    if (!st) st = take_string(o, "relation", name, line, 0, &f->relation);
    if (!st) st = take_string(o, "prompt", name, line, 0, &f->prompt);
    if (!st) st = take_string(o, "object", name, line, 0, &f->object);
    const ffn_json_value *pa = NULL;
    size_t np = 0;
    void *list = NULL;
    if (!st) st = take_list(o, "paraphrases", "strings", what, sizeof *f->paraphrases, &pa, &np, &list);
    f->paraphrases = list;
    for (size_t k = 0; k < np && !st; k++) {
        const ffn_json_value *v = ffn_json_at(pa, k);
        const char *s = ffn_json_string(v);
        if (!s || !*s || strlen(s) != ffn_json_length(v))
            st = ffn_error(FFN_ERR_FORMAT, "%s: paraphrases[%zu]: expected a non-empty string", what, k);
        else if (!(f->paraphrases[k] = ffn_strdup(s))) st = ffn_error(FFN_ERR_NOMEM, "%s", what);
        else f->n_paraphrases = (int64_t)k + 1;
    }
    const ffn_json_value *ne = NULL;
    size_t nn = 0;
    list = NULL;
    if (!st) st = take_list(o, "neighbours", "objects", what, sizeof *f->neighbours, &ne, &nn, &list);
    f->neighbours = list;
    for (size_t k = 0; k < nn && !st; k++) {
        const ffn_json_value *v = ffn_json_at(ne, k);
        if (ffn_json_type_of(v) != FFN_JSON_OBJECT) {
            st = ffn_error(FFN_ERR_FORMAT, "%s: neighbours[%zu]: expected an object", what, k);
            break;
        }
        st = take_string(v, "prompt", name, line, 0, &f->neighbours[k].prompt);
        if (!st) st = take_string(v, "object", name, line, 0, &f->neighbours[k].object);
        f->n_neighbours = (int64_t)k + 1;
    }
    ffn_json_free(doc);
    return st;
}

ffn_status ffn_facts_parse(const char *text, size_t n_bytes, const char *name, ffn_facts **out) {
    if (!text || !out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_facts_parse: NULL argument");
    if (!name) name = "facts";
    *out = NULL;
    ffn_facts *fs = calloc(1, sizeof *fs);
    if (!fs) return ffn_error(FFN_ERR_NOMEM, "%s", name);
    int64_t cap = 0;
    ffn_status st = FFN_OK;
    int64_t line = 0;
    for (size_t at = 0; at < n_bytes && !st;) {
        const char *nl = memchr(text + at, '\n', n_bytes - at);
        size_t end = nl ? (size_t)(nl - text) : n_bytes;
        line++;
        size_t b = at;
        while (b < end && (text[b] == ' ' || text[b] == '\t' || text[b] == '\r')) b++;
        if (b < end) {
            if (fs->n_facts == FFN_FACTS_FILE_MAX) {
                st = ffn_error(FFN_ERR_FORMAT, "%s: line %lld: more than %d facts", name, (long long)line, FFN_FACTS_FILE_MAX);
                break;
            }
            if (fs->n_facts == cap) {
                int64_t nc = cap ? 2 * cap : 64;
                ffn_fact *p = realloc(fs->facts, (size_t)nc * sizeof *p);
                if (!p) {
                    st = ffn_error(FFN_ERR_NOMEM, "%s", name);
                    break;
                }
                fs->facts = p;
                cap = nc;
            }
            ffn_fact *f = &fs->facts[fs->n_facts++];
            memset(f, 0, sizeof *f);
            st = parse_line(text + at, end - at, name, line, f);
            if (!st) {
                /* the prompt must be the statement before the object: it
                 * has to contain the subject */
                if (!strstr(f->prompt, f->subject))
                    st = ffn_error(FFN_ERR_FORMAT, "%s: line %lld: the prompt \"%.80s\" does not contain the subject \"%.80s\"",
                                   name, (long long)line, f->prompt, f->subject);
            }
        }
        at = end + 1;
    }
    if (!st && fs->n_facts == 0) st = ffn_error(FFN_ERR_FORMAT, "%s: no facts (expected one JSON object per line)", name);
    if (st) {
        ffn_facts_free(fs);
        return st;
    }
    *out = fs;
    return FFN_OK;
}

ffn_status ffn_facts_load(const char *path, ffn_facts **out) {
    if (!path || !out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_facts_load: NULL argument");
    *out = NULL;
    char *text = NULL;
    size_t n = 0;
    ffn_status st = ffn_text_read(path, &text, &n);
    if (st) return st;
    st = ffn_facts_parse(text, n, path, out);
    free(text);
    return st;
}
