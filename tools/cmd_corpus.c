/* cmd_corpus.c -- `ffn corpus`: print the built-in corpus (English or
 * Chinese) as text, as word/class TSV, or as JSON with every label. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

/* The description, with the inventory's counts. */
static void make_about(char *buf, size_t n) {
    ffn_corpus_inventory en, zh;
    ffn_corpus_get_inventory(FFN_LANG_EN, &en);
    ffn_corpus_get_inventory(FFN_LANG_ZH, &zh);
    snprintf(buf, n,
                        "Prints the built-in corpus: the default training data of `ffn train` and\n"
            "`ffn demo`, a generated language about one person giving an object to\n"
            "another, modelled on \"she gave him the apple because he was hungry\".\n"
            "The same language, seed and count give the same bytes on every machine.\n"
            "\n"
            "The pronoun-resolution design.  Every sentence has a giver and a receiver,\n"
            "and a cause clause whose pronoun refers back to one of them.  A receiver's\n"
            "cause fits the receiver (\"because he was hungry\", with food) and a giver's\n"
            "cause fits the giver (\"because she had too many\").  Genders are drawn\n"
            "independently, so in about half of the sentences the pronoun's gender\n"
            "(he/she, 他/她) names the referent and in the other half only the meaning\n"
            "of the predicate does.  Templates move the people around (receiver first,\n"
            "passive, questions with answers, \"when ...\", relative clauses, reported\n"
            "speech, two causes, \"and then\"), so a role is never just a position and\n"
            "predicting the text needs attention back to the right name.\n"
            "\n"
            "What it draws from:\n"
            "  en  %lld female and %lld male names, %lld objects in 7 categories, %lld giving\n"
            "      verbs, %lld sentence templates, %lld giver and %lld receiver causes,\n"
            "      %lld adjectives, optional times and places\n"
            "  zh  %lld surnames x (%lld female + %lld male given names), %lld objects with\n"
            "      their measure words (个 本 杯 件 ...), %lld verbs (递给, 送给, 给...买),\n"
            "      %lld templates (把, 被, 因为…所以…, 为什么, 谁), %lld giver and %lld\n"
            "      receiver causes\n"
            "\n"
            "Word classes (every word is labelled; bytes between words are 'space'):\n"
            "  name      a person's name (Mary, 王芳)\n"
            "  pronoun   he, she, him, her, his, hers, who (relative), it; 他 她 他的 她的 它\n"
            "  object    a common noun: the things given, places, times (apple, 苹果)\n"
            "  verb      gave, handed, was, needed; 给 递给 有 ...\n"
            "  function  determiners, numerals, measure words, prepositions,\n"
            "            conjunctions, auxiliaries, particles (the, because, 了, 把, 个)\n"
            "  modifier  adjectives and adverbs (hungry, red, already, 很, 饿)\n"
            "  punct     . , ; ? 。 ， ？\n"
            "\n"
            "Output (stdout):\n"
            "  default   the text, one sentence (or question and answer) a line\n"
            "  --labels  word<TAB>class, one word a line, a blank line after each sentence\n"
            "  --json    {\"lang\", \"seed\", \"n_sentences\", \"classes\", \"sentences\": [{\"text\",\n"
            "            \"words\": [{\"word\", \"class\", \"offset\" (bytes, in the sentence),\n"
            "            \"gender\", \"role\", \"ref\"}]}]}; gender and role are \"\" for\n"
            "            non-persons; ref is the index, in the same sentence's words, of the\n"
            "            name a pronoun refers to (or the noun 'it' stands for), else -1\n"
            "  --stats   words per class and the majority-class share (the baseline a\n"
            "            probe of word classes must beat), and how many pronouns their\n"
            "            gender alone resolves; with --json, one JSON object\n"
            "\n"
            "The facts corpus.  --facts prints a set of fictional facts instead: a\n"
            "person's city (lives_in), an object's colour (colour), a country's capital\n"
            "(capital), a person's profession (profession), with invented names so no\n"
            "prior knowledge helps.  Each is trained through six templates (\"Balira\n"
            "lives in Velm.\", \"The home of Balira is Velm.\", \"Balira, who lives in\n"
            "Velm, is kind.\", and inside frames like \"As everyone knows,\"); three\n"
            "other templates are held out as paraphrases.  `--facts --text` prints the\n"
            "training text of `ffn train --corpus facts` (--sentences lines): English\n"
            "corpus sentences, about half the lines replaced by trained statements of\n"
            "the default %d facts drawn with the same --seed.\n"
            "  --facts          id, relation, subject, object, prompt and paraphrases\n"
            "  --facts --json   one JSON object per fact and line: {\"id\", \"subject\",\n"
            "                   \"relation\", \"prompt\" (the trained statement up to the\n"
            "                   object), \"object\", \"paraphrases\": [held-out prompts],\n"
            "                   \"neighbours\": [{\"prompt\", \"object\"}] (other subjects'\n"
            "                   facts of the same relation)}; what `ffn trace --facts-file`\n"
            "                   reads\n",
            (long long)en.female_names, (long long)en.male_names, (long long)en.objects,
            (long long)en.verbs, (long long)en.templates, (long long)en.giver_causes,
            (long long)en.receiver_causes, (long long)en.modifiers, (long long)zh.surnames,
            (long long)zh.female_names, (long long)zh.male_names, (long long)zh.objects,
            (long long)zh.verbs, (long long)zh.templates, (long long)zh.giver_causes,
            (long long)zh.receiver_causes, FFN_FACTS_DEFAULT);
}

static void json_str(FILE *f, const char *s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n') fputs("\\n", f);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static const char *gender_name(int g) {
    return g == FFN_GENDER_FEMALE ? "female" : g == FFN_GENDER_MALE ? "male" : "";
}

static const char *role_name(int r) {
    return r == FFN_ROLE_GIVER ? "giver" : r == FFN_ROLE_RECEIVER ? "receiver" : r == FFN_ROLE_OTHER ? "other" : "";
}

static void print_labels(const ffn_corpus *c) {
    for (int64_t i = 0; i < c->n_words; i++) {
        const ffn_word *w = &c->words[i];
        printf("%.*s\t%s\n", (int)w->length, c->text + w->offset,
               ffn_word_class_name((ffn_word_class)w->cls));
        if (i + 1 == c->n_words || c->words[i + 1].sentence != w->sentence) putchar('\n');
    }
}

/* Counts a reader of the corpus wants first: the class shares (the
 * majority class is the baseline a probe must beat) and how pronouns
 * resolve -- by gender alone, or only by the predicate's meaning. */
static void print_stats(const ffn_corpus *c, int json) {
    int64_t per_class[FFN_WORD_N_CLASSES] = {0}, pronouns = 0, by_role[4] = {0}, by_gender = 0;
    for (int64_t i = 0; i < c->n_words; i++) {
        const ffn_word *w = &c->words[i];
        per_class[w->cls]++;
        if (w->cls != FFN_WORD_PRONOUN || w->ref < 0 || w->gender == FFN_GENDER_NONE) continue;
        pronouns++;
        by_role[w->role]++;
        /* the only person of this gender named so far in the sentence? */
        int others = 0;
        for (int64_t k = i - 1; k >= 0 && c->words[k].sentence == w->sentence; k--) {
            const ffn_word *x = &c->words[k];
            if (x->cls == FFN_WORD_NAME && x->gender == w->gender &&
                (x->length != c->words[w->ref].length ||
                 memcmp(c->text + x->offset, c->text + c->words[w->ref].offset, (size_t)x->length)))
                others++;
        }
        by_gender += others == 0;
    }
    int best = 0;
    for (int k = 1; k < FFN_WORD_N_CLASSES; k++)
        if (per_class[k] > per_class[best]) best = k;
    double nw = c->n_words ? (double)c->n_words : 1, np = pronouns ? (double)pronouns : 1;
    if (json) {
        printf("{\"lang\": \"%s\", \"seed\": %llu, \"n_sentences\": %lld, \"n_bytes\": %lld, "
               "\"n_words\": %lld, \"classes\": {",
               ffn_lang_name(c->lang), (unsigned long long)c->seed, (long long)c->n_sentences,
               (long long)c->n_bytes, (long long)c->n_words);
        for (int k = 0; k < FFN_WORD_N_CLASSES; k++)
            printf("%s\"%s\": %lld", k ? ", " : "", ffn_word_class_name((ffn_word_class)k),
                   (long long)per_class[k]);
        printf(
            "}, \"majority_class\": \"%s\", \"majority_share\": %s, \"gendered_pronouns\": %lld, "
            "\"to_giver\": %lld, \"to_receiver\": %lld, \"to_other\": %lld, "
            "\"resolved_by_gender\": %lld}\n",
            ffn_word_class_name((ffn_word_class)best),
            cli_json_num((double)per_class[best] / nw, "%.4f"), (long long)pronouns,
            (long long)by_role[FFN_ROLE_GIVER], (long long)by_role[FFN_ROLE_RECEIVER],
            (long long)by_role[FFN_ROLE_OTHER], (long long)by_gender);
        return;
    }
    printf("corpus %s, seed %llu: %lld sentences, %lld bytes, %lld words\n", ffn_lang_name(c->lang),
           (unsigned long long)c->seed, (long long)c->n_sentences, (long long)c->n_bytes,
           (long long)c->n_words);
    printf("\nclass       words   share\n");
    for (int k = 0; k < FFN_WORD_N_CLASSES; k++)
        printf("%-9s %8lld  %5.1f%%\n", ffn_word_class_name((ffn_word_class)k), (long long)per_class[k],
               100.0 * (double)per_class[k] / nw);
    printf("majority class '%s' = %.1f%% of words: the accuracy a probe gets by always guessing it\n",
           ffn_word_class_name((ffn_word_class)best), 100.0 * (double)per_class[best] / nw);
    printf("\n%lld gendered pronouns: %.1f%% refer to the giver, %.1f%% to the receiver, %.1f%% to a "
           "third person\n",
           (long long)pronouns, 100.0 * (double)by_role[FFN_ROLE_GIVER] / np,
           100.0 * (double)by_role[FFN_ROLE_RECEIVER] / np, 100.0 * (double)by_role[FFN_ROLE_OTHER] / np);
    printf("%.1f%% are resolved by gender alone (no other person of that gender named before them);\n"
           "the other %.1f%% only by what the predicate means\n",
           100.0 * (double)by_gender / np, 100.0 * (double)(pronouns - by_gender) / np);
}

static void print_json(const ffn_corpus *c) {
    printf("{\"lang\": \"%s\", \"seed\": %llu, \"n_sentences\": %lld, \"classes\": [",
           ffn_lang_name(c->lang), (unsigned long long)c->seed, (long long)c->n_sentences);
    for (int k = 0; k <= FFN_WORD_SPACE; k++)
        printf("%s\"%s\"", k ? ", " : "", ffn_word_class_name((ffn_word_class)k));
    printf("],\n \"sentences\": [");
    int64_t w = 0, line_start = 0;
    for (int64_t s = 0; s < c->n_sentences; s++) {
        const char *nl = memchr(c->text + line_start, '\n', (size_t)(c->n_bytes - line_start));
        int64_t line_end = nl ? nl - c->text : c->n_bytes;
        printf("%s\n  {\"text\": ", s ? "," : "");
        json_str(stdout, c->text + line_start, (size_t)(line_end - line_start));
        printf(", \"words\": [");
        int64_t first = w;
        for (; w < c->n_words && c->words[w].sentence == s; w++) {
            const ffn_word *x = &c->words[w];
            printf("%s{\"word\": ", w > first ? ", " : "");
            json_str(stdout, c->text + x->offset, (size_t)x->length);
            printf(", \"class\": \"%s\", \"offset\": %lld, \"gender\": \"%s\", \"role\": \"%s\", "
                   "\"ref\": %lld}",
                   ffn_word_class_name((ffn_word_class)x->cls), (long long)(x->offset - line_start),
                   gender_name(x->gender), role_name(x->role),
                   (long long)(x->ref >= 0 ? x->ref - first : -1));
        }
        printf("]}");
        line_start = line_end + 1;
    }
    printf("\n]}\n");
}

/* The fact set: JSONL as the library writes it, or a readable table. */
static int print_facts(const char *cmd, int64_t n, uint64_t seed, int json) {
    ffn_facts *fs = NULL;
    ffn_status st = ffn_facts_generate(n, seed, &fs);
    if (st) return cli_fail(cmd, st);
    if (json) {
        char *text = NULL;
        size_t len = 0;
        st = ffn_facts_to_jsonl(fs, &text, &len);
        if (st) {
            ffn_facts_free(fs);
            return cli_fail(cmd, st);
        }
        fwrite(text, 1, len, stdout);
        free(text);
    } else {
        printf("# %lld facts, seed %llu: id, relation, subject -> object; prompt | held-out "
               "paraphrases\n", (long long)fs->n_facts, (unsigned long long)seed);
        for (int64_t i = 0; i < fs->n_facts; i++) {
            const ffn_fact *f = &fs->facts[i];
            printf("%lld\t%s\t%s -> %s\t%s", (long long)f->id, f->relation, f->subject, f->object,
                   f->prompt);
            for (int64_t k = 0; k < f->n_paraphrases; k++) printf(" | %s", f->paraphrases[k]);
            putchar('\n');
        }
    }
    ffn_facts_free(fs);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error(cmd, "writing to stdout failed");
        return CLI_EXIT_FAIL;
    }
    return 0;
}

int cmd_corpus(int argc, char **argv) {
    const char *cmd = "corpus";
    int lang = FFN_LANG_EN;
    int64_t n = 20, seed = 1;
    int labels = 0, json = 0, stats = 0, facts = 0, n_facts_given = 0, facts_text = 0;
    int64_t n_facts = FFN_FACTS_DEFAULT;
    const cli_opt opts[] = {
        CLI_OPT_LANG("--lang", &lang, "language"),
        {.name = "--sentences", .type = CLI_INT, .dst = &n, .metavar = "N", .imin = 1,
         .imax = 10000000, .help = "how many sentences (ffn corpus --sentences 20000 > "
                                   "corpus.txt writes a training file)"},
        CLI_OPT_SEED(&seed, "generator seed"),
        {.name = "--labels", .type = CLI_FLAG, .dst = &labels,
         .help = "word<TAB>class lines instead of the text"},
        {.name = "--stats", .type = CLI_FLAG, .dst = &stats,
         .help = "counts per class, the majority baseline, pronoun resolution"},
        CLI_OPT_JSON(&json, "JSON instead of text (with --stats: one JSON object; with --facts: "
                            "one object per fact and line)"),
        {.name = "--facts", .type = CLI_FLAG, .dst = &facts,
         .help = "print the facts corpus's fact set (the first --n-facts facts for --seed) "
                 "instead of sentences"},
        {.name = "--text", .type = CLI_FLAG, .dst = &facts_text,
         .help = "with --facts: the training text of `ffn train --corpus facts` (--sentences "
                 "lines, --seed) instead of the fact set"},
        {.name = "--n-facts", .type = CLI_INT, .dst = &n_facts, .metavar = "N", .imin = 1,
         .imax = FFN_FACTS_MAX, .seen = &n_facts_given, .help = "how many facts (with --facts)"},
        {0}};
    static char about[6000];
    make_about(about, sizeof about);
    const cli_spec spec = {.cmd = cmd,
                           .synopsis = "[--lang en|zh] [--sentences N] [--seed S]\n"
                                       "                  [--labels | --stats] [--json]\n"
                                       "       ffn corpus --facts [--n-facts N] [--seed S] [--json]\n"
                                       "       ffn corpus --facts --text [--sentences N] [--seed S]",
                           .about = about, .opts = opts};
    int rc;
    if (cli_parse(&spec, argc, argv, &rc)) return rc;
    if (labels && (json || stats)) {
        cli_error(cmd, "--labels is an alternative to --json and --stats; give one");
        return CLI_EXIT_USAGE;
    }
    if ((n_facts_given || facts_text) && !facts) {
        cli_error(cmd, "%s needs --facts", facts_text ? "--text" : "--n-facts");
        return CLI_EXIT_USAGE;
    }
    if (facts && facts_text) {
        if (n_facts_given) {
            cli_error(cmd, "--text trains on the default %d facts; --n-facts does not apply",
                      FFN_FACTS_DEFAULT);
            return CLI_EXIT_USAGE;
        }
        lang = FFN_LANG_FACTS;
    } else if (facts) {
        if (labels || stats) {
            cli_error(cmd, "--facts prints the fact set; --labels and --stats are about sentences");
            return CLI_EXIT_USAGE;
        }
        return print_facts(cmd, n_facts, (uint64_t)seed, json);
    }
    ffn_corpus *c = NULL;
    ffn_status st = ffn_corpus_generate((ffn_lang)lang, (uint64_t)seed, n, &c);
    if (st) return cli_fail(cmd, st);
    if (stats) print_stats(c, json);
    else if (labels) print_labels(c);
    else if (json) print_json(c);
    else fwrite(c->text, 1, (size_t)c->n_bytes, stdout);
    ffn_corpus_free(c);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error(cmd, "writing to stdout failed");
        return CLI_EXIT_FAIL;
    }
    return 0;
}
