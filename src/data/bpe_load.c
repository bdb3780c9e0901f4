/* bpe_load.c -- the readers of the BPE engine (bpe.h): a Hugging Face
 * tokenizer.json (with its tokenizer_config.json for the special tokens'
 * names, when there is one) and the tokenizer.ggml.* metadata of a GGUF
 * file.  What the engine cannot do faithfully is refused with a message
 * naming the file and the field ("unsupported model type Unigram in
 * FILE"), never approximated. */
#include "data/bpe.h"
#include "format/json.h"
#include "ffn/gguf.h"

#include <stdio.h>
#include <string.h>

#define SPACE_MARK "\xE2\x96\x81"

/* ---- tokenizer.json ------------------------------------------------------------------ */

/* Merges are added MERGES_AT_ONCE at a time (bpe_add_merges overlaps their
 * lookups): the ones collected in batch[0..*n), of ranks *first, ..., are
 * added, then *n = 0 and *first moves past them.  A reader flushes before
 * it reports a bad merge, so the first bad merge in rank order is the one
 * named, whatever the kind of fault. */
#define MERGES_AT_ONCE 256
static ffn_status merges_flush(bpe_tokenizer *t, const bpe_merge_in *batch, size_t *n,
                               int64_t *first, const char *what) {
    size_t k = *n;
    *n = 0;
    ffn_status st = k ? bpe_add_merges(t, batch, k, *first, what) : FFN_OK;
    *first += (int64_t)k;
    return st;
}

static int is_type(const json_value *v, const char *type) {
    const json_value *t = json_get(v, "type");
    return t && t->type == JSON_STRING && !strcmp(t->string, type);
}

static const char *type_of(const json_value *v) {
    const json_value *t = json_get(v, "type");
    return t && t->type == JSON_STRING ? t->string : "(no type)";
}

static int json_truthy(const json_value *obj, const char *key, int dflt) {
    const json_value *v = json_get(obj, key);
    if (!v || v->type == JSON_NULL) return dflt;
    return v->type == JSON_TRUE;
}

/* A Sequence's list under `key`, or the error "NAME: missing". */
static ffn_status sequence_list(const json_value *o, const char *key, const char *name,
                                const char *missing, const json_value **list) {
    *list = json_get(o, key);
    if (!*list || (*list)->type != JSON_ARRAY)
        return ffn_error(FFN_ERR_FORMAT, "%s: %s", name, missing);
    return FFN_OK;
}

/* Each item of a Sequence's list under `key` through parse, in order. */
typedef ffn_status (*item_parser)(bpe_tokenizer *t, const json_value *v, const char *name);
static ffn_status each_in_sequence(bpe_tokenizer *t, const json_value *o, const char *key,
                                   const char *name, const char *missing, item_parser parse) {
    const json_value *list = NULL;
    ffn_status st = sequence_list(o, key, name, missing, &list);
    for (size_t i = 0; !st && i < list->length; i++) st = parse(t, list->items[i], name);
    return st;
}

static ffn_status parse_normalizer(bpe_tokenizer *t, const json_value *n, const char *name) {
    if (!n || n->type == JSON_NULL) return FFN_OK;
    if (n->type != JSON_OBJECT)
        return ffn_error(FFN_ERR_FORMAT, "%s: normalizer is %s, expected an object or null", name,
                         json_type_name(n->type));
    if (is_type(n, "Sequence"))
        return each_in_sequence(t, n, "normalizers", name,
                                "normalizer Sequence without a \"normalizers\" array",
                                parse_normalizer);
    if (is_type(n, "NFC")) {
        t->nfc = 1;
        return FFN_OK;
    }
    if (is_type(n, "Prepend")) {
        const json_value *p = json_get(n, "prepend");
        if (p && p->type == JSON_STRING && !strcmp(p->string, SPACE_MARK)) {
            t->sp_prepend = 1;
            return FFN_OK;
        }
    }
    if (is_type(n, "Replace")) {
        const json_value *pat = json_get(n, "pattern"), *c = json_get(n, "content");
        const json_value *str = json_get(pat, "String");
        if (str && str->type == JSON_STRING && !strcmp(str->string, " ") && c &&
            c->type == JSON_STRING && !strcmp(c->string, SPACE_MARK))
            return FFN_OK; /* what the SentencePiece flavour does anyway */
    }
    return ffn_error(FFN_ERR_FORMAT,
                     "%s: unsupported normalizer %s (ffn reads NFC, Prepend(\"\xE2\x96\x81\") and "
                     "Replace(\" \", \"\xE2\x96\x81\"))", name, type_of(n));
}

/* A Split pattern: {"Regex": "..."} as is, {"String": "..."} quoted. */
static ffn_status split_regex(bpe_tokenizer *t, const json_value *p, const char *name) {
    const json_value *pat = json_get(p, "pattern");
    const json_value *re = json_get(pat, "Regex"), *str = json_get(pat, "String");
    const json_value *beh = json_get(p, "behavior");
    /* Isolated keeps every piece, inverted or not; Removed drops the matches, or
     * inverted the gaps */
    int invert = json_truthy(p, "invert", 0), drop = BPE_KEEP_ALL;
    if (beh && beh->type == JSON_STRING && !strcmp(beh->string, "Removed"))
        drop = invert ? BPE_DROP_GAPS : BPE_DROP_MATCHES;
    else if (beh && beh->type == JSON_STRING && strcmp(beh->string, "Isolated"))
        return ffn_error(FFN_ERR_FORMAT, "%s: pre_tokenizer Split behavior \"%s\" is unsupported "
                         "(ffn reads \"Isolated\" and \"Removed\")", name, beh->string);
    if (t->n_re < BPE_MAX_SPLITS) t->re_drop[t->n_re] = (uint8_t)drop;
    char what[512];
    snprintf(what, sizeof what, "%s: pre_tokenizer Split pattern", name);
    if (re && re->type == JSON_STRING) return bpe_add_regex(t, re->string, what);
    if (str && str->type == JSON_STRING) {
        size_t n = strlen(str->string);
        char *q = malloc(n + 5);
        if (!q) return ffn_error(FFN_ERR_NOMEM, "%s: out of memory", name);
        snprintf(q, n + 5, "\\Q%s\\E", str->string);
        ffn_status st = strstr(str->string, "\\E")
                            ? ffn_error(FFN_ERR_FORMAT, "%s: Split String pattern contains \\E", name)
                            : bpe_add_regex(t, q, what);
        free(q);
        return st;
    }
    return ffn_error(FFN_ERR_FORMAT, "%s: pre_tokenizer Split without a Regex or String pattern", name);
}

static ffn_status parse_pre(bpe_tokenizer *t, const json_value *p, const char *name, int *byte_level,
                            int *metaspace) {
    if (!p || p->type == JSON_NULL) return FFN_OK;
    if (is_type(p, "Sequence")) {
        const json_value *list = NULL;
        ffn_status st = sequence_list(p, "pretokenizers", name,
                                      "pre_tokenizer Sequence without a \"pretokenizers\" array", &list);
        for (size_t i = 0; !st && i < list->length; i++) st = parse_pre(t, list->items[i], name, byte_level, metaspace);
        return st;
    }
    if (is_type(p, "Split")) return split_regex(t, p, name);
    if (is_type(p, "Digits")) { /* Rust's char::is_numeric is \p{N}; contiguous runs, or each */
        char what[512];
        snprintf(what, sizeof what, "%s: pre_tokenizer Digits", name);
        return bpe_add_regex(t, json_truthy(p, "individual_digits", 0) ? "\\p{N}" : "\\p{N}+", what);
    }
    if (is_type(p, "ByteLevel")) {
        *byte_level = 1;
        t->prefix_space = json_truthy(p, "add_prefix_space", 0);
        if (json_truthy(p, "use_regex", 1)) { /* GPT-2's split, after those before it */
            char what[512];
            snprintf(what, sizeof what, "%s: GPT-2 pre-tokenizer regex", name);
            return bpe_add_regex(t, bpe_regex_gpt2, what);
        }
        return FFN_OK;
    }
    if (is_type(p, "Metaspace")) {
        *metaspace = 1;
        const json_value *r = json_get(p, "replacement");
        if (r && r->type == JSON_STRING && strcmp(r->string, SPACE_MARK))
            return ffn_error(FFN_ERR_FORMAT, "%s: pre_tokenizer Metaspace replacement \"%s\" is "
                             "unsupported (ffn reads \"\xE2\x96\x81\")", name, r->string);
        const json_value *scheme = json_get(p, "prepend_scheme");
        int prepend = json_truthy(p, "add_prefix_space", 1);
        if (scheme && scheme->type == JSON_STRING) {
            prepend = strcmp(scheme->string, "never") != 0;
            t->sp_prepend_first = !strcmp(scheme->string, "first");
        }
        t->sp_prepend = prepend ? 2 : 0;
        t->sp_split = json_truthy(p, "split", 1);
        return FFN_OK;
    }
    return ffn_error(FFN_ERR_FORMAT, "%s: unsupported pre_tokenizer %s (ffn reads ByteLevel, "
                     "Split, Digits, Metaspace and Sequences of them)", name, type_of(p));
}

static ffn_status parse_decoder(bpe_tokenizer *t, const json_value *d, const char *name) {
    if (!d || d->type == JSON_NULL) return FFN_OK;
    if (is_type(d, "Sequence"))
        return each_in_sequence(t, d, "decoders", name,
                                "decoder Sequence without a \"decoders\" array", parse_decoder);
    if (is_type(d, "Strip")) {
        const json_value *start = json_get(d, "start");
        if (start && start->type == JSON_NUMBER && start->number > 0) t->sp_strip = 1;
        return FFN_OK;
    }
    if (is_type(d, "Metaspace")) {
        const json_value *scheme = json_get(d, "prepend_scheme");
        t->sp_strip = scheme && scheme->type == JSON_STRING ? strcmp(scheme->string, "never") != 0
                                                            : json_truthy(d, "add_prefix_space", 1);
        return FFN_OK;
    }
    /* ByteLevel, Replace(U+2581 -> " "), ByteFallback, Fuse: what the engine's pieces do */
    if (is_type(d, "ByteLevel") || is_type(d, "Replace") || is_type(d, "ByteFallback") ||
        is_type(d, "Fuse"))
        return FFN_OK;
    return ffn_error(FFN_ERR_FORMAT, "%s: unsupported decoder %s", name, type_of(d));
}

/* TemplateProcessing "single": the special tokens before and after $A. */
static ffn_status parse_post(bpe_tokenizer *t, const json_value *p, const char *name) {
    if (!p || p->type == JSON_NULL) return FFN_OK;
    if (is_type(p, "Sequence"))
        return each_in_sequence(t, p, "processors", name,
                                "post_processor Sequence without \"processors\"", parse_post);
    if (is_type(p, "ByteLevel")) return FFN_OK;
    if (!is_type(p, "TemplateProcessing"))
        return ffn_error(FFN_ERR_FORMAT, "%s: unsupported post_processor %s", name, type_of(p));
    const json_value *single = json_get(p, "single"), *specials = json_get(p, "special_tokens");
    if (!single || single->type != JSON_ARRAY)
        return ffn_error(FFN_ERR_FORMAT, "%s: post_processor.single is not an array", name);
    int seen_a = 0;
    t->n_pre = t->n_post = 0;
    for (size_t i = 0; i < single->length; i++) {
        const json_value *item = single->items[i];
        const json_value *sp = json_get(item, "SpecialToken");
        if (!sp) {
            seen_a = 1;
            continue;
        }
        const json_value *nm = json_get(sp, "id");
        if (!nm || nm->type != JSON_STRING)
            return ffn_error(FFN_ERR_FORMAT, "%s: post_processor.single[%zu].SpecialToken.id is not a "
                             "string", name, i);
        const json_value *entry = json_get(specials, nm->string), *ids = json_get(entry, "ids");
        int32_t id = -1;
        if (ids && ids->type == JSON_ARRAY && ids->length == 1 && ids->items[0]->type == JSON_NUMBER &&
            ids->items[0]->is_integer)
            id = (int32_t)ids->items[0]->integer;
        else
            id = bpe_lookup(t, nm->string, strlen(nm->string));
        if (id < 0 || id >= t->V || !t->tok[id])
            return ffn_error(FFN_ERR_FORMAT, "%s: post_processor special token \"%s\" has no id in the "
                             "vocabulary", name, nm->string);
        int *n = seen_a ? &t->n_post : &t->n_pre;
        int32_t *dst = seen_a ? t->tmpl_post : t->tmpl_pre;
        if (*n >= 4)
            return ffn_error(FFN_ERR_FORMAT, "%s: post_processor template has more than 4 special "
                             "tokens on one side", name);
        dst[(*n)++] = id;
    }
    return FFN_OK;
}

/* A token named in tokenizer_config.json: "<s>" or {"content": "<s>", ...}. */
static int32_t config_token(const bpe_tokenizer *t, const json_value *cfg, const char *key) {
    const json_value *v = json_get(cfg, key);
    if (v && v->type == JSON_OBJECT) v = json_get(v, "content");
    if (!v || v->type != JSON_STRING) return -1;
    return bpe_lookup(t, v->string, v->length);
}

static ffn_status json_int_id(const json_value *v, const char *what, const char *key, int32_t *id) {
    if (!v || v->type != JSON_NUMBER || !v->is_integer || v->integer < 0 || v->integer > INT32_MAX / 2)
        return ffn_error(FFN_ERR_FORMAT, "%s: %s is %s, expected a token id (an integer >= 0)", what,
                         key, v ? json_type_name(v->type) : "missing");
    *id = (int32_t)v->integer;
    return FFN_OK;
}

static ffn_status load_json(bpe_tokenizer **out, const json_value *root, const char *name,
                            const json_value *cfg) {
    *out = NULL;
    if (!root || root->type != JSON_OBJECT)
        return ffn_error(FFN_ERR_FORMAT, "%s: the top level is not an object", name);
    const json_value *model = json_get(root, "model");
    if (!model || model->type != JSON_OBJECT)
        return ffn_error(FFN_ERR_FORMAT, "%s: no \"model\" object (not a tokenizer.json?)", name);
    const json_value *mtype = json_get(model, "type");
    if (mtype && mtype->type == JSON_STRING && strcmp(mtype->string, "BPE"))
        return ffn_error(FFN_ERR_FORMAT, "%s: unsupported model type %s in %s (ffn reads BPE "
                         "tokenizers)", name, mtype->string, name);
    const json_value *vocab = json_get(model, "vocab"), *merges = json_get(model, "merges");
    if (!vocab || vocab->type != JSON_OBJECT)
        return ffn_error(FFN_ERR_FORMAT, "%s: model.vocab is %s, expected an object", name,
                         vocab ? json_type_name(vocab->type) : "missing");
    if (!merges || merges->type != JSON_ARRAY)
        return ffn_error(FFN_ERR_FORMAT, "%s: model.merges is %s, expected an array", name,
                         merges ? json_type_name(merges->type) : "missing");
    const json_value *cwp = json_get(model, "continuing_subword_prefix");
    const json_value *eow = json_get(model, "end_of_word_suffix");
    if ((cwp && cwp->type == JSON_STRING && cwp->length) || (eow && eow->type == JSON_STRING && eow->length))
        return ffn_error(FFN_ERR_FORMAT, "%s: model.continuing_subword_prefix / end_of_word_suffix "
                         "are unsupported", name);
    const json_value *dropout = json_get(model, "dropout");
    if (dropout && dropout->type == JSON_NUMBER && dropout->number != 0)
        return ffn_error(FFN_ERR_FORMAT, "%s: model.dropout %g is unsupported (ffn encodes "
                         "deterministically)", name, dropout->number);
    const json_value *added = json_get(root, "added_tokens");
    if (added && added->type != JSON_ARRAY && added->type != JSON_NULL)
        return ffn_error(FFN_ERR_FORMAT, "%s: added_tokens is %s, expected an array", name,
                         json_type_name(added->type));
    /* V: the largest id + 1 */
    int64_t V = 0;
    char what[600];
    for (size_t i = 0; i < vocab->length; i++) {
        int32_t id;
        if (json_int_id(vocab->items[i], "", "the id", &id)) { /* the message again, naming the entry */
            snprintf(what, sizeof what, "%s: model.vocab[\"%.64s\"]", name, vocab->keys[i]);
            return json_int_id(vocab->items[i], what, "the id", &id);
        }
        if (id + 1 > V) V = id + 1;
    }
    size_t n_added = added && added->type == JSON_ARRAY ? added->length : 0;
    for (size_t i = 0; i < n_added; i++) {
        int32_t id;
        snprintf(what, sizeof what, "%s: added_tokens[%zu]", name, i);
        ffn_status st = json_int_id(json_get(added->items[i], "id"), what, "id", &id);
        if (st) return st;
        const json_value *c = json_get(added->items[i], "content");
        if (!c || c->type != JSON_STRING)
            return ffn_error(FFN_ERR_FORMAT, "%s: content is not a string", what);
        if (id + 1 > V) V = id + 1;
    }
    if (V == 0) return ffn_error(FFN_ERR_FORMAT, "%s: model.vocab is empty", name);
    /* ids may leave holes, but not so many that V says nothing of the file:
     * a hostile id must not size the tables */
    const int64_t n_entries = (int64_t)vocab->length + (int64_t)n_added;
    if (V > 2 * n_entries + 1024)
        return ffn_error(FFN_ERR_FORMAT, "%s: token id %lld in model.vocab or added_tokens, but only "
                         "%lld tokens: ids must be (nearly) dense", name, (long long)(V - 1),
                         (long long)n_entries);

    /* the flavour, from the pre-tokenizer (and the normalizer for SentencePiece) */
    bpe_tokenizer *t;
    ffn_status st = bpe_alloc(BPE_BYTE_LEVEL, V, &t);
    if (st) return ffn_error_prefix(st, "%s", name);
    int byte_level = 0, metaspace = 0;
    if ((st = parse_normalizer(t, json_get(root, "normalizer"), name))) goto fail;
    if ((st = parse_pre(t, json_get(root, "pre_tokenizer"), name, &byte_level, &metaspace))) goto fail;
    t->byte_fallback = json_truthy(model, "byte_fallback", 0);
    t->fuse_unk = json_truthy(model, "fuse_unk", 0);
    t->ignore_merges = json_truthy(model, "ignore_merges", 0);
    if (byte_level) {
        t->flavour = BPE_BYTE_LEVEL;
        if (t->sp_prepend) {
            st = ffn_error(FFN_ERR_FORMAT, "%s: a ByteLevel pre_tokenizer with a Prepend normalizer is "
                           "unsupported", name);
            goto fail;
        }
    } else if (t->sp_prepend || metaspace || t->byte_fallback) {
        t->flavour = BPE_SENTENCEPIECE;
        if (t->n_re) {
            st = ffn_error(FFN_ERR_FORMAT, "%s: a Split pre_tokenizer without ByteLevel is unsupported",
                           name);
            goto fail;
        }
    } else {
        st = ffn_error(FFN_ERR_FORMAT, "%s: neither a ByteLevel pre_tokenizer nor SentencePiece "
                       "spaces (Metaspace, Prepend(\"\xE2\x96\x81\")): unsupported BPE variant", name);
        goto fail;
    }
    snprintf(what, sizeof what, "%s: model.vocab", name);
    for (size_t i = 0; i < vocab->length; i++) {
        st = bpe_set_token(t, (int32_t)vocab->items[i]->integer, vocab->keys[i],
                           strlen(vocab->keys[i]), what);
        if (st) goto fail;
    }
    for (size_t i = 0; i < n_added; i++) {
        const json_value *a = added->items[i], *c = json_get(a, "content");
        st = bpe_add_added(t, (int32_t)json_get(a, "id")->integer, c->string, c->length,
                           json_truthy(a, "special", 0), json_truthy(a, "lstrip", 0),
                           json_truthy(a, "rstrip", 0));
        if (st) {
            ffn_error_prefix(st, "%s: added_tokens[%zu]", name, i);
            goto fail;
        }
    }
    if ((st = bpe_index(t, name))) goto fail;
    if ((st = bpe_reserve_merges(t, (int64_t)merges->length))) goto fail;
    snprintf(what, sizeof what, "%s: model.merges", name);
    bpe_merge_in batch[MERGES_AT_ONCE];
    size_t nbatch = 0;
    int64_t first = 0; /* the rank of batch[0] */
    for (size_t i = 0; i < merges->length; i++) {
        const json_value *m = merges->items[i];
        const char *a, *b;
        size_t na, nb;
        if (m->type == JSON_STRING) {
            const char *sp = strchr(m->string, ' ');
            if (!sp || strchr(sp + 1, ' ')) {
                if ((st = merges_flush(t, batch, &nbatch, &first, what))) goto fail;
                st = ffn_error(FFN_ERR_FORMAT, "%s: model.merges[%zu] \"%.64s\" is not two tokens "
                               "separated by one space", name, i, m->string);
                goto fail;
            }
            a = m->string, na = (size_t)(sp - m->string), b = sp + 1, nb = m->length - na - 1;
        } else if (m->type == JSON_ARRAY && m->length == 2 && m->items[0]->type == JSON_STRING &&
                   m->items[1]->type == JSON_STRING) {
            a = m->items[0]->string, na = m->items[0]->length;
            b = m->items[1]->string, nb = m->items[1]->length;
        } else {
            if ((st = merges_flush(t, batch, &nbatch, &first, what))) goto fail;
            st = ffn_error(FFN_ERR_FORMAT, "%s: model.merges[%zu] is %s, expected \"a b\" or [\"a\", "
                           "\"b\"]", name, i, json_type_name(m->type));
            goto fail;
        }
        if (i > INT32_MAX) break;
        batch[nbatch++] = (bpe_merge_in){a, na, b, nb};
        if (nbatch == MERGES_AT_ONCE && (st = merges_flush(t, batch, &nbatch, &first, what))) goto fail;
    }
    if ((st = merges_flush(t, batch, &nbatch, &first, what))) goto fail;
    const json_value *unk = json_get(model, "unk_token");
    if (unk && unk->type == JSON_STRING) {
        t->unk = bpe_lookup(t, unk->string, unk->length);
        if (t->unk < 0) {
            st = ffn_error(FFN_ERR_FORMAT, "%s: model.unk_token \"%.64s\" is not in the vocabulary",
                           name, unk->string);
            goto fail;
        }
    }
    if ((st = parse_post(t, json_get(root, "post_processor"), name))) goto fail;
    if ((st = parse_decoder(t, json_get(root, "decoder"), name))) goto fail;
    /* the special tokens: tokenizer_config.json names them; else the template's first */
    if (cfg) {
        t->bos = config_token(t, cfg, "bos_token");
        t->eos = config_token(t, cfg, "eos_token");
        t->pad = config_token(t, cfg, "pad_token");
        int32_t u = config_token(t, cfg, "unk_token");
        if (u >= 0) t->unk = u;
    }
    if (t->bos < 0 && t->n_pre > 0) t->bos = t->tmpl_pre[0];
    *out = t;
    return FFN_OK;
fail:
    bpe_free(t);
    return st;
}

ffn_status bpe_from_tokenizer_json(const char *text, size_t n, const char *name,
                                   const char *config_text, size_t config_n, bpe_tokenizer **out) {
    *out = NULL;
    json_doc *doc = NULL, *cdoc = NULL;
    ffn_status st = json_parse(text, n, name, &doc);
    if (st) return st;
    if (config_text) {
        /* a broken tokenizer_config.json only loses the special tokens' names */
        if (json_parse(config_text, config_n, "tokenizer_config.json", &cdoc) != FFN_OK) cdoc = NULL;
    }
    st = load_json(out, json_root(doc), name, cdoc ? json_root(cdoc) : NULL);
    json_free(doc);
    json_free(cdoc);
    return st;
}

/* ---- GGUF -------------------------------------------------------------------------------- */

static ffn_status gguf_array(const ffn_gguf_file *f, const char *name, const char *key,
                             ffn_gguf_vtype type, int required, ffn_gguf_array *arr) {
    if (ffn_gguf_find_key(f, key) < 0) {
        if (!required) {
            arr->count = 0;
            return FFN_OK;
        }
        return ffn_error(FFN_ERR_FORMAT, "%s: no %s in the metadata", name, key);
    }
    ffn_status st = ffn_gguf_get_array(f, key, arr);
    if (st) return ffn_error_prefix(st, "%s", name);
    if (arr->type != type)
        return ffn_error(FFN_ERR_FORMAT, "%s: %s is an array of %s, expected %s", name, key,
                         ffn_gguf_vtype_name(arr->type), ffn_gguf_vtype_name(type));
    return FFN_OK;
}

static int32_t gguf_id(const ffn_gguf_file *f, const char *key, int64_t V) {
    int64_t v;
    if (ffn_gguf_find_key(f, key) < 0 || ffn_gguf_get_int(f, key, &v) != FFN_OK) return -1;
    return v >= 0 && v < V ? (int32_t)v : -1;
}

ffn_status bpe_from_gguf(const ffn_gguf_file *f, const char *name, bpe_tokenizer **out) {
    *out = NULL;
    const char *model = NULL;
    size_t mlen = 0;
    if (ffn_gguf_find_key(f, "tokenizer.ggml.model") < 0)
        return ffn_error(FFN_ERR_FORMAT, "%s: no tokenizer.ggml.model in the metadata (no tokenizer "
                         "in this GGUF)", name);
    ffn_status st = ffn_gguf_get_str(f, "tokenizer.ggml.model", &model, &mlen);
    if (st) return ffn_error_prefix(st, "%s", name);
    int llama = !strcmp(model, "llama"), gpt2 = !strcmp(model, "gpt2");
    if (!llama && !gpt2)
        return ffn_error(FFN_ERR_FORMAT, "%s: unsupported tokenizer.ggml.model \"%s\"%s (ffn reads "
                         "\"llama\", SentencePiece-style BPE, and \"gpt2\", byte-level BPE)", name, model,
                         !strcmp(model, "bert") ? " (WordPiece)"
                         : !strcmp(model, "t5") ? " (Unigram)" : "");
    ffn_gguf_array toks, scores, types, merges;
    if ((st = gguf_array(f, name, "tokenizer.ggml.tokens", FFN_GGUF_VTYPE_STRING, 1, &toks))) return st;
    if ((st = gguf_array(f, name, "tokenizer.ggml.scores", FFN_GGUF_VTYPE_FLOAT32, llama, &scores)))
        return st;
    if ((st = gguf_array(f, name, "tokenizer.ggml.token_type", FFN_GGUF_VTYPE_INT32, 0, &types)))
        return st;
    if ((st = gguf_array(f, name, "tokenizer.ggml.merges", FFN_GGUF_VTYPE_STRING, gpt2, &merges)))
        return st;
    const int64_t V = (int64_t)toks.count;
    if ((scores.count && (int64_t)scores.count != V) || (types.count && (int64_t)types.count != V))
        return ffn_error(FFN_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %lld entries but scores %llu "
                         "and token_type %llu", name, (long long)V,
                         (unsigned long long)scores.count, (unsigned long long)types.count);
    bpe_tokenizer *t;
    if ((st = bpe_alloc(llama ? BPE_SENTENCEPIECE : BPE_BYTE_LEVEL, V, &t)))
        return ffn_error_prefix(st, "%s: tokenizer.ggml.tokens", name);
    char what[600];
    snprintf(what, sizeof what, "%s: tokenizer.ggml.tokens", name);
    for (int64_t i = 0; i < V; i++) {
        ffn_gguf_value v;
        if ((st = ffn_gguf_array_get(&toks, (uint64_t)i, &v))) goto fail;
        int32_t type = 1;
        if (types.count) {
            ffn_gguf_value tv;
            if ((st = ffn_gguf_array_get(&types, (uint64_t)i, &tv))) goto fail;
            type = tv.v.i32;
        }
        if (scores.count) {
            ffn_gguf_value sv;
            if ((st = ffn_gguf_array_get(&scores, (uint64_t)i, &sv))) goto fail;
            t->score[i] = sv.v.f32;
        }
        if (type == 3 || type == 4) { /* control, user-defined: matched in the text as they are */
            if (v.v.str.len == 0) {
                if ((st = bpe_set_token(t, (int32_t)i, v.v.str.ptr, 0, what))) goto fail;
                continue;
            }
            if (!json_utf8_valid(v.v.str.ptr, v.v.str.len)) {
                st = ffn_error(FFN_ERR_FORMAT, "%s[%lld] is not valid UTF-8", what, (long long)i);
                goto fail;
            }
            if ((st = bpe_add_added(t, (int32_t)i, v.v.str.ptr, v.v.str.len, type == 3, 0, 0))) {
                ffn_error_prefix(st, "%s", what);
                goto fail;
            }
        } else if ((st = bpe_set_token(t, (int32_t)i, v.v.str.ptr, v.v.str.len, what))) {
            goto fail;
        }
    }
    if ((st = bpe_index(t, name))) goto fail;
    if (llama) {
        t->by_score = 1;
        t->byte_fallback = 1;
        t->sp_prepend = 1;
        t->sp_strip = 1;
        int add_space = 1;
        if (ffn_gguf_find_key(f, "tokenizer.ggml.add_space_prefix") >= 0)
            ffn_gguf_get_bool(f, "tokenizer.ggml.add_space_prefix", &add_space);
        t->sp_prepend = add_space;
        t->sp_strip = add_space;
    } else {
        if ((st = bpe_reserve_merges(t, (int64_t)merges.count))) goto fail;
        snprintf(what, sizeof what, "%s: tokenizer.ggml.merges", name);
        bpe_merge_in batch[MERGES_AT_ONCE];
        size_t nbatch = 0;
        int64_t first = 0; /* the rank of batch[0] */
        for (uint64_t i = 0; i < merges.count && i <= INT32_MAX; i++) {
            ffn_gguf_value v;
            if ((st = ffn_gguf_array_get(&merges, i, &v))) {
                ffn_status st2 = merges_flush(t, batch, &nbatch, &first, what);
                if (st2) st = st2;
                goto fail;
            }
            const char *sp = memchr(v.v.str.ptr, ' ', v.v.str.len);
            if (!sp || memchr(sp + 1, ' ', v.v.str.len - (size_t)(sp - v.v.str.ptr) - 1)) {
                if ((st = merges_flush(t, batch, &nbatch, &first, what))) goto fail;
                st = ffn_error(FFN_ERR_FORMAT, "%s[%llu] is not two tokens separated by one space",
                               what, (unsigned long long)i);
                goto fail;
            }
            size_t na = (size_t)(sp - v.v.str.ptr);
            batch[nbatch++] = (bpe_merge_in){v.v.str.ptr, na, sp + 1, v.v.str.len - na - 1};
            if (nbatch == MERGES_AT_ONCE && (st = merges_flush(t, batch, &nbatch, &first, what)))
                goto fail;
        }
        if ((st = merges_flush(t, batch, &nbatch, &first, what))) goto fail;
        const char *pre = "default";
        size_t plen;
        if (ffn_gguf_find_key(f, "tokenizer.ggml.pre") >= 0 &&
            ffn_gguf_get_str(f, "tokenizer.ggml.pre", &pre, &plen) != FFN_OK)
            pre = "default";
        const bpe_pre_type *pt = bpe_pre_find(pre);
        if (!pt) {
            char known[4096];
            bpe_pre_known(known, sizeof known);
            st = ffn_error(FFN_ERR_FORMAT, "%s: unsupported tokenizer.ggml.pre \"%s\" (ffn knows %s)",
                           name, pre, known);
            goto fail;
        }
        snprintf(what, sizeof what, "%s: tokenizer.ggml.pre \"%s\"", name, pre);
        for (const char *const *re = pt->regex; *re; re++)
            if ((st = bpe_add_regex(t, *re, what))) goto fail;
        t->ignore_merges = pt->ignore_merges;
    }
    t->bos = gguf_id(f, "tokenizer.ggml.bos_token_id", V);
    t->eos = gguf_id(f, "tokenizer.ggml.eos_token_id", V);
    t->unk = gguf_id(f, "tokenizer.ggml.unknown_token_id", V);
    t->pad = gguf_id(f, "tokenizer.ggml.padding_token_id", V);
    int add_bos = llama;
    if (ffn_gguf_find_key(f, "tokenizer.ggml.add_bos_token") >= 0)
        ffn_gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &add_bos);
    if (add_bos && t->bos >= 0) t->tmpl_pre[t->n_pre++] = t->bos;
    *out = t;
    return FFN_OK;
fail:
    bpe_free(t);
    return st;
}
