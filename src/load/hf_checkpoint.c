/* hf_checkpoint.c -- Hugging Face safetensors directories in and out, and
 * the entry points of include/ffn/checkpoint.h: format detection, reading
 * a configuration, loading a model (llama2.c files go to llama2c.c), and
 * writing a model as a Hugging Face directory.
 *
 * Reading a directory, top to bottom:
 *   config.json       ffn_model_config_load for the model's fields, plus
 *                     hf_config_parse for what the model cannot express
 *                     (model_type known, rope_scaling, head_dim, ...);
 *   the weight files  model.safetensors, or the shards of
 *                     model.safetensors.index.json (hf_index_parse);
 *   the name map      every tensor of the model's table gets its name in
 *                     the file (the table uses Llama / Qwen2-MoE names;
 *                     Mixtral's block_sparse_moe.* is translated; phi3's
 *                     fused and gpt2's transposed tensors: hf_families.c);
 *   conversion        shard by shard, each tensor converted from its
 *                     mapping straight into the model's flat block, then
 *                     its pages released.
 *
 * Letters: V vocab, D hidden, H heads, G kv heads, Dh head dim, E experts. */
#include "ffn/checkpoint.h"
#include "ffn/data.h"
#include "ffn/layer.h"
#include "ffn/model.h"
#include "load/checkpoint_internal.h"
#include "base/open.h"
#include "format/json.h"
#include "ffn/safetensors.h"
#include "base/dirswap.h"
#include "base/dtype.h"
#include "nn/model_internal.h"
#include "data/vocab_internal.h"
#include "ffn/vocab.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CONFIG_NAME "config.json"
#define WEIGHTS_NAME "model.safetensors"
#define INDEX_NAME "model.safetensors.index.json"
#define CONFIG_MAX_BYTES ((size_t)16 << 20)
#define INDEX_MAX_BYTES ((size_t)64 << 20)

const char *ffn_checkpoint_format_name(ffn_checkpoint_format f) {
    static const char *const names[] = {
        [FFN_CHECKPOINT_LLAMA2C] = "llama2c", [FFN_CHECKPOINT_HF] = "hf", [FFN_CHECKPOINT_FFN] = "ffn",
        [FFN_CHECKPOINT_GGUF] = "gguf"};
    return FFN_ENUM_NAME(names, f, "?");
}

static int path_is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int path_is_file(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* Read a whole (small) file into a malloc'd NUL-terminated buffer. */
static ffn_status read_small_file(const char *path, size_t max_bytes, char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    int fd;
    struct stat sb;
    ffn_status os = ffn_open_regular(path, &fd, &sb);
    if (os) return os;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return ffn_error(FFN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    if ((uint64_t)sb.st_size > max_bytes) {
        fclose(f);
        return ffn_error(FFN_ERR_FORMAT, "%s: %lld bytes, more than the %zu allowed for this file",
                         path, (long long)sb.st_size, max_bytes);
    }
    size_t n = (size_t)sb.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        fclose(f);
        return ffn_error(FFN_ERR_NOMEM, "%s: out of memory", path);
    }
    size_t got = fread(buf, 1, n, f);
    fclose(f);
    if (got != n) {
        free(buf);
        return ffn_error(FFN_ERR_IO, "%s: short read (%zu of %zu bytes)", path, got, n);
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return FFN_OK;
}

/* read_small_file for a JSON file: another format's magic is named. */
static ffn_status read_json_file(const char *path, size_t max_bytes, char **out, size_t *len) {
    ffn_status st = read_small_file(path, max_bytes, out, len);
    if (st) return st;
    ffn_sniff kind = ffn_sniff_bytes(*out, *len);
    if (ffn_sniff_is_magic(kind) && kind != FFN_SNIFF_JSON) {
        free(*out);
        *out = NULL;
        *len = 0;
        return ffn_error(FFN_ERR_FORMAT, "%s is %s, not a JSON file", path, ffn_sniff_name(kind));
    }
    return FFN_OK;
}

/* A shard or tokenizer name must be a plain file name inside the directory. */
static int plain_file_name(const char *s, size_t n) {
    if (n == 0 || n >= 256 || strchr(s, '/') || !strcmp(s, ".") || !strcmp(s, "..")) return 0;
    return strlen(s) == n;
}

/* ---- config.json beyond the model's fields --------------------------------------- */

static const char *known_types[] = {"llama", "mistral", "qwen2", "mixtral", "qwen2_moe", "qwen3",
                                     "qwen3_moe", "gemma", "gemma2", "gemma3_text", "phi3", "olmoe",
                                     "gpt2", "starcoder2"};

ffn_status hf_config_parse(const char *text, size_t len, const char *name,
                           hf_config_extra *extra) {
    memset(extra, 0, sizeof *extra);
    json_doc *doc = NULL;
    ffn_status st = json_parse(text, len, name, &doc);
    if (st) return st;
    const json_value *root = json_root(doc);
    const char *type = NULL;
    if (!root || root->type != JSON_OBJECT) {
        st = ffn_error(FFN_ERR_FORMAT, "%s: expected a JSON object at the top level", name);
        goto done;
    }
    if ((st = json_get_str(root, "model_type", 1, name, &type))) goto done;
    if (!strcmp(type, "gemma3")) { /* ffn_model_config_load reads (and checks) text_config */
        const json_value *tc = json_get(root, "text_config");
        if (tc && tc->type == JSON_OBJECT) root = tc;
        type = "gemma3_text";
        extra->multimodal = 1;
    }
    size_t k = 0;
    while (k < sizeof known_types / sizeof known_types[0] && strcmp(type, known_types[k])) k++;
    if (k == sizeof known_types / sizeof known_types[0]) {
        st = ffn_error(FFN_ERR_UNSUPPORTED, "%s: model_type '%.40s' is not supported (expected "
                       "llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3_text, gemma3, phi3, mixtral, qwen2_moe, qwen3_moe, olmoe, gpt2 or starcoder2)", name, type);
        goto done;
    }
    snprintf(extra->model_type, sizeof extra->model_type, "%s", type);
    static const char *const expert_keys[] = {"num_experts", "num_local_experts",
                                              "n_routed_experts"};
    for (int i = 0; i < 3; i++) { /* the last one set wins, as in ffn_model_config_load */
        const json_value *e = json_get(root, expert_keys[i]);
        if (e && e->type != JSON_NULL)
            snprintf(extra->experts_key, sizeof extra->experts_key, "%s", expert_keys[i]);
    }
    extra->is_ffn = json_get(root, "ffn_tokenizer") != NULL || json_get(root, "rope_style") != NULL;
    /* rope_scaling, rope_parameters and head_dim: ffn_model_config_load */
    const json_value *v = json_get(root, "mlp_only_layers");
    if (v && v->type != JSON_NULL && !(v->type == JSON_ARRAY && v->length == 0)) {
        st = ffn_error(FFN_ERR_UNSUPPORTED, "%s: mlp_only_layers: only an empty list is "
                       "supported (use decoder_sparse_step for regular patterns)", name);
        goto done;
    }
    int attention_bias = 0;
    if ((st = json_get_bool(root, "attention_bias", 0, name, &attention_bias))) goto done;
    if (attention_bias && !extra->is_ffn && (!strcmp(type, "llama") || !strcmp(type, "qwen3"))) {
        st = ffn_error(FFN_ERR_UNSUPPORTED, "%s: attention_bias true for model_type %s also "
                       "puts a bias on o_proj, which ffn's attention does not have", name, type);
        goto done;
    }
    int use_window = strcmp(type, "mistral") == 0 || strcmp(type, "mixtral") == 0 ||
                     strcmp(type, "phi3") == 0;
    if ((st = json_get_bool(root, "use_sliding_window", 0, name, &use_window))) goto done;
    if (use_window) {
        int64_t w = 0;
        if ((st = json_get_i64(root, "sliding_window", 0, name, &w))) goto done;
        if (w < 0) {
            st = ffn_error(FFN_ERR_CONFIG, "%s: sliding_window: %lld, expected >= 1 or null", name,
                           (long long)w);
            goto done;
        }
        extra->sliding_window = w;
    }
    const char *tf = NULL;
    if ((st = json_get_str(root, "ffn_tokenizer_file", 0, name, &tf))) goto done;
    if (tf) {
        if (!plain_file_name(tf, strlen(tf))) {
            st = ffn_error(FFN_ERR_CONFIG, "%s: ffn_tokenizer_file '%.60s': expected a plain file "
                           "name in the checkpoint directory", name, tf);
            goto done;
        }
        snprintf(extra->tokenizer_file, sizeof extra->tokenizer_file, "%s", tf);
    }
done:
    json_free(doc);
    return st;
}

/* ---- model.safetensors.index.json ------------------------------------------------- */

void hf_index_free(hf_index *ix) {
    if (!ix) return;
    for (int64_t i = 0; i < ix->n_tensors; i++) free(ix->names ? ix->names[i] : NULL);
    for (int64_t i = 0; i < ix->n_files; i++) free(ix->files ? ix->files[i] : NULL);
    free(ix->names);
    free(ix->files);
    free(ix->file_of);
    memset(ix, 0, sizeof *ix);
}

/* FNV-1a: the shard names of an index go through a small hash table, so
 * that an index naming a new shard for every tensor is not quadratic. */
static uint64_t fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

ffn_status hf_index_parse(const char *text, size_t len, const char *name, hf_index *ix) {
    memset(ix, 0, sizeof *ix);
    int64_t *slots = NULL; /* file id + 1, 0 empty; a power of two >= 2n */
    size_t n_slots = 0;
    json_doc *doc = NULL;
    ffn_status st = json_parse(text, len, name, &doc);
    if (st) return st;
    const json_value *root = json_root(doc), *map = NULL;
    if (!root || root->type != JSON_OBJECT) {
        st = ffn_error(FFN_ERR_FORMAT, "%s: expected a JSON object at the top level", name);
        goto done;
    }
    map = json_get(root, "weight_map");
    if (!map) {
        st = ffn_error(FFN_ERR_MISSING, "%s: weight_map missing", name);
        goto done;
    }
    if (map->type != JSON_OBJECT) {
        st = ffn_error(FFN_ERR_FORMAT, "%s: weight_map: expected an object, found %s", name,
                       json_type_name(map->type));
        goto done;
    }
    if (map->length == 0) {
        st = ffn_error(FFN_ERR_FORMAT, "%s: weight_map is empty", name);
        goto done;
    }
    const size_t n = map->length;
    for (n_slots = 16; n_slots < 2 * n; n_slots *= 2) {}
    slots = calloc(n_slots, sizeof *slots);
    ix->names = calloc(n, sizeof *ix->names);
    ix->file_of = calloc(n, sizeof *ix->file_of);
    ix->files = calloc(n, sizeof *ix->files);
    if (!slots || !ix->names || !ix->file_of || !ix->files) {
        st = ffn_error(FFN_ERR_NOMEM, "%s: out of memory", name);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const json_value *f = map->items[i];
        if (f->type != JSON_STRING) {
            st = ffn_error(FFN_ERR_FORMAT, "%s: weight_map: '%.80s': expected a file name string, "
                           "found %s", name, map->keys[i], json_type_name(f->type));
            goto done;
        }
        if (!plain_file_name(f->string, f->length)) {
            st = ffn_error(FFN_ERR_FORMAT, "%s: weight_map: '%.80s': shard '%.80s' is not a plain "
                           "file name in the checkpoint directory", name, map->keys[i], f->string);
            goto done;
        }
        size_t h = (size_t)fnv1a(f->string) & (n_slots - 1);
        while (slots[h] && strcmp(ix->files[slots[h] - 1], f->string)) h = (h + 1) & (n_slots - 1);
        int64_t fi = slots[h] ? slots[h] - 1 : ix->n_files;
        if (fi == ix->n_files) {
            slots[h] = fi + 1;
            if (!(ix->files[fi] = strdup(f->string))) {
                st = ffn_error(FFN_ERR_NOMEM, "%s: out of memory", name);
                goto done;
            }
            ix->n_files++;
        }
        if (!(ix->names[i] = strdup(map->keys[i]))) {
            st = ffn_error(FFN_ERR_NOMEM, "%s: out of memory", name);
            goto done;
        }
        ix->file_of[i] = fi;
        ix->n_tensors++;
    }
done:
    free(slots);
    if (st) hf_index_free(ix);
    json_free(doc);
    return st;
}

/* ---- format detection and configuration --------------------------------------------- */

/* Everything about a checkpoint except its weights. */
typedef struct ckpt_source {
    ffn_checkpoint_format format;
    char *dir;              /* the directory (HF) or the file's directory (llama2.c) */
    ffn_model_config cfg;
    hf_config_extra extra;
} ckpt_source;

static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

static void find_tokenizer(const ckpt_source *s, ffn_checkpoint_info *info) {
    info->tokenizer_path[0] = '\0';
    info->tokenizer_is_llama2c = 0;
    /* a llama2.c .bin: its tokenizer.bin, else the tokenizer.txt that ffn
     * export --format llama2c writes beside it for ffn's own vocabularies */
    const int l2c = s->format == FFN_CHECKPOINT_LLAMA2C;
    const char *cands[4] = {s->extra.tokenizer_file[0] ? s->extra.tokenizer_file : NULL,
                            l2c ? NULL : FFN_TOKENIZER_FILENAME, "tokenizer.bin",
                            l2c ? FFN_TOKENIZER_FILENAME : NULL};
    for (int i = 0; i < 4; i++) {
        if (!cands[i]) continue;
        char p[FFN_CHECKPOINT_PATH_MAX];
        int n = snprintf(p, sizeof p, "%s/%s", s->dir, cands[i]);
        if (n < 0 || (size_t)n >= sizeof p || !path_is_file(p)) continue;
        memcpy(info->tokenizer_path, p, (size_t)n + 1);
        size_t L = strlen(cands[i]);
        info->tokenizer_is_llama2c = L >= 4 && !strcmp(cands[i] + L - 4, ".bin");
        return;
    }
}

static ffn_status open_source(const char *path, ckpt_source *s, ffn_checkpoint_info *info) {
    memset(s, 0, sizeof *s);
    memset(info, 0, sizeof *info);
    ffn_status st = FFN_OK;
    if (!path_is_dir(path)) {
        struct stat sb;
        if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
            return ffn_error(FFN_ERR_IO, "%s is %s, not a regular file (expected a llama2.c .bin "
                             "file or a Hugging Face directory)", path, ffn_file_kind(sb.st_mode));
        if (!path_is_file(path))
            return ffn_error(FFN_ERR_IO, "%s: no such file or directory (expected a llama2.c .bin "
                             "file or a Hugging Face directory)", path);
        const void *data;
        size_t size;
        if ((st = ckpt_map_file(path, &data, &size))) return st;
        st = l2c_parse_header(data, size, path, &s->cfg);
        ckpt_unmap_file(data, size);
        if (st) return st;
        s->format = FFN_CHECKPOINT_LLAMA2C;
        snprintf(s->extra.model_type, sizeof s->extra.model_type, "llama2c");
        if (!(s->dir = dir_of(path))) return ffn_error(FFN_ERR_NOMEM, "out of memory");
        info->file_bytes = (int64_t)size;
        info->n_files = 1;
    } else {
        if (!(s->dir = strdup(path))) return ffn_error(FFN_ERR_NOMEM, "out of memory");
        char *cp = ckpt_path_join(path, "/", CONFIG_NAME);
        if (!cp) return ffn_error(FFN_ERR_NOMEM, "out of memory");
        if (!path_is_file(cp)) {
            st = ffn_error(FFN_ERR_MISSING, "%s: not a checkpoint directory: %s is missing", path,
                           CONFIG_NAME);
        } else {
            char *text = NULL;
            size_t len = 0;
            st = read_json_file(cp, CONFIG_MAX_BYTES, &text, &len);
            if (st == FFN_OK) st = hf_config_parse(text, len, cp, &s->extra);
            free(text);
            if (st == FFN_OK) st = ffn_model_config_load(cp, &s->cfg);
        }
        free(cp);
        if (st) {
            free(s->dir);
            s->dir = NULL;
            return st;
        }
        s->format = s->extra.is_ffn ? FFN_CHECKPOINT_FFN : FFN_CHECKPOINT_HF;
        if (s->extra.sliding_window > 0 && s->extra.sliding_window < s->cfg.max_position_embeddings)
            info->context_cap = s->extra.sliding_window;
    }
    info->format = s->format;
    snprintf(info->model_type, sizeof info->model_type, "%s", s->extra.model_type);
    find_tokenizer(s, info);
    return FFN_OK;
}

ffn_status ffn_checkpoint_read_config(const char *path, ffn_model_config *cfg,
                                      ffn_checkpoint_info *info) {
    if (!path || !cfg) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_checkpoint_read_config: NULL argument");
    ckpt_source s;
    ffn_checkpoint_info tmp;
    ffn_status st = open_source(path, &s, info ? info : &tmp);
    if (st) return st;
    *cfg = s.cfg;
    free(s.dir);
    return FFN_OK;
}

/* ---- names: the model's table <-> the file ----------------------------------------- */

/* The file's name for a model tensor (Mixtral renames the MoE block). */
static void file_name_of(const char *model_name, const char *model_type, char *out, size_t cap) {
    snprintf(out, cap, "%s", model_name);
    if (strcmp(model_type, "mixtral")) return;
    long long l, e;
    char kind[16];
    int used = 0;
    if (sscanf(model_name, "model.layers.%lld.mlp.experts.%lld.%15[a-z]_proj.weight%n", &l, &e,
               kind, &used) == 3 && (size_t)used == strlen(model_name)) {
        const char *w = !strcmp(kind, "gate") ? "w1" : !strcmp(kind, "down") ? "w2" : "w3";
        snprintf(out, cap, "model.layers.%lld.block_sparse_moe.experts.%lld.%s.weight", l, e, w);
    } else if (sscanf(model_name, "model.layers.%lld.mlp.gate.weight%n", &l, &used) == 1 &&
               (size_t)used == strlen(model_name)) {
        snprintf(out, cap, "model.layers.%lld.block_sparse_moe.gate.weight", l);
    }
}

/* Gemma3ForConditionalGeneration's text model, under transformers' two
 * layouts: language_model.model.* and language_model.lm_head.weight (the
 * files Google published), model.language_model.* and lm_head.weight
 * (save_pretrained since transformers 4.52).  name: the model's. */
static ffn_status multimodal_name(const char *name, int newer, char *out, size_t cap) {
    int n = !strncmp(name, "model.", 6)
                ? snprintf(out, cap, "%s%s", newer ? "model.language_model." : "language_model.model.",
                           name + 6)
                : snprintf(out, cap, "%s%s", newer ? "" : "language_model.", name);
    return n < 0 || (size_t)n >= cap ? ffn_error(FFN_ERR_FORMAT, "tensor name %.60s...: too long", name)
                                     : FFN_OK;
}

/* The vision tower and projector of a multimodal file: not read. */
static int multimodal_other(const char *name) {
    static const char *const parts[] = {"vision_tower.", "multi_modal_projector.",
                                        "model.vision_tower.", "model.multi_modal_projector."};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (!strncmp(name, parts[i], strlen(parts[i]))) return 1;
    return 0;
}

/* Tensors a file may hold that the model does not use. */
static int ignorable(const char *name, const ffn_model_config *cfg, const hf_config_extra *x) {
    if (x->multimodal) {
        if (multimodal_other(name)) return 1;
        if (!strcmp(name, "language_model.lm_head.weight")) name = "lm_head.weight";
    }
    if (cfg->learned_positions && hf_family_ignorable(name, "gpt2")) return 1;
    size_t n = strlen(name);
    const char *inv = "rotary_emb.inv_freq";
    size_t ni = strlen(inv);
    if (n >= ni && !strcmp(name + n - ni, inv)) return 1;
    return cfg->tie_word_embeddings && !strcmp(name, "lm_head.weight");
}

typedef struct wanted {
    char *file_name;   /* the name in the file */
    int64_t tensor;    /* index in the model's table */
    int64_t rows;      /* > 0: a fused tensor of this many rows (see hf_family_tensor) */
    int transpose;     /* stored [in, out] (GPT-2 Conv1D) */
    int64_t shard;     /* which weight file */
    int done;
} wanted;

static int by_file_name(const void *a, const void *b) {
    return strcmp(((const wanted *)a)->file_name, ((const wanted *)b)->file_name);
}

static wanted *find_wanted(wanted *w, int64_t n, const char *name) {
    wanted key = {(char *)name, 0, 0, 0, 0, 0};
    return bsearch(&key, w, (size_t)n, sizeof *w, by_file_name);
}

static int by_cstr(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ---- loading a directory ------------------------------------------------------------ */

/* A multimodal file in the newer layout (a name model.language_model.*):
 * the wanted names, made in the older one, renamed to it and sorted again. */
static ffn_status multimodal_relayout(wanted *w, int64_t nw, char *const *names, int64_t n) {
    static const char newer[] = "model.language_model.";
    int64_t k = 0;
    while (k < n && strncmp(names[k], newer, sizeof newer - 1)) k++;
    if (k == n) return FFN_OK;
    for (int64_t i = 0; i < nw; i++) {
        const char *f = w[i].file_name, *own = f;
        char model_name[256], fn[256];
        if (!strncmp(f, "language_model.model.", 21)) {
            snprintf(model_name, sizeof model_name, "model.%s", f + 21);
            own = model_name;
        } else if (!strncmp(f, "language_model.", 15)) {
            own = f + 15;
        }
        ffn_status st = multimodal_name(own, 1, fn, sizeof fn);
        if (st) return st;
        char *dup = strdup(fn);
        if (!dup) return ffn_error(FFN_ERR_NOMEM, "out of memory");
        free(w[i].file_name);
        w[i].file_name = dup;
    }
    qsort(w, (size_t)nw, sizeof *w, by_file_name);
    return FFN_OK;
}

/* Convert an F32/F16/BF16 tensor from its mapping into dst (numel floats),
 * chunk by chunk, releasing each chunk's pages once converted: a large
 * tensor is never resident twice.  Data may be unaligned (memcpy). */
static void convert_chunked(float *dst, const ffn_st_tensor *t) {
    const unsigned char *src = t->data;
    const size_t esize = ffn_dtype_size(t->dtype);
    for (int64_t i = 0; i < t->numel; i += CKPT_CHUNK_FLOATS) {
        int64_t n = t->numel - i < CKPT_CHUNK_FLOATS ? t->numel - i : CKPT_CHUNK_FLOATS;
        const unsigned char *s = src + (size_t)i * esize;
        if (t->dtype == FFN_DTYPE_F32) memcpy(dst + i, s, (size_t)n * 4);
        else ffn_halves_to_f32(dst + i, s, (size_t)n, t->dtype == FFN_DTYPE_BF16);
        ckpt_drop_pages(s, (size_t)n * esize);
    }
}

/* The same for a matrix stored [in, out] (t->shape): dst gets it (out, in). */
static void convert_transposed(float *dst, const ffn_st_tensor *t) {
    const unsigned char *src = t->data;
    const size_t esize = ffn_dtype_size(t->dtype);
    const int64_t in = t->shape[0], out = t->shape[1];
    for (int64_t i = 0; i < in; i++) {
        const unsigned char *row = src + (size_t)(i * out) * esize;
        for (int64_t o = 0; o < out; o++) {
            float v;
            if (t->dtype == FFN_DTYPE_F32) {
                memcpy(&v, row + 4 * o, 4);
            } else {
                uint16_t h;
                memcpy(&h, row + 2 * o, 2);
                v = t->dtype == FFN_DTYPE_F16 ? ffn_f16_to_f32(h) : ffn_bf16_to_f32(h);
            }
            dst[o * in + i] = v;
        }
        ckpt_drop_pages(row, (size_t)out * esize);
    }
}

static ffn_status load_hf_weights(ffn_model *m, const ckpt_source *s, ffn_checkpoint_info *info) {
    const int64_t nt = ffn_model_num_tensors(m);
    float *params = ffn_model_params(m, NULL);
    wanted *w = calloc((size_t)nt, sizeof *w);
    hf_index ix;
    memset(&ix, 0, sizeof ix);
    char **sorted_ix = NULL;
    int64_t *sorted_ix_id = NULL;
    char **files = NULL;
    int64_t n_files = 1;
    ffn_status st = FFN_OK;
    char *single = ckpt_path_join(s->dir, "/", WEIGHTS_NAME);
    char *index_path = ckpt_path_join(s->dir, "/", INDEX_NAME);
    if (!w || !single || !index_path) {
        st = ffn_error(FFN_ERR_NOMEM, "out of memory");
        goto done;
    }
    int64_t nw = 0; /* the tensors the files hold: nt less those a fused one covers */
    for (int64_t i = 0; i < nt; i++) {
        char fn[256];
        int64_t rows = 0;
        int transpose = 0;
        const ffn_model_tensor *mt = ffn_model_tensor_at(m, i);
        int map = hf_family_tensor(mt, s->extra.model_type, &s->cfg, fn, sizeof fn, &rows, &transpose);
        if (map == HF_MAP_COVERED) continue;
        if (map == HF_MAP_SAME) file_name_of(mt->name, s->extra.model_type, fn, sizeof fn);
        if (s->extra.multimodal) {
            char own[sizeof fn];
            memcpy(own, fn, sizeof fn);
            if ((st = multimodal_name(own, 0, fn, sizeof fn))) goto done;
        }
        if (!(w[nw].file_name = strdup(fn))) {
            st = ffn_error(FFN_ERR_NOMEM, "out of memory");
            goto done;
        }
        w[nw].tensor = i;
        w[nw].transpose = transpose;
        w[nw++].rows = rows;
    }
    qsort(w, (size_t)nw, sizeof *w, by_file_name);
    int sharded = !path_is_file(single);
    if (sharded) {
        if (!path_is_file(index_path)) {
            st = ffn_error(FFN_ERR_MISSING, "%s: no weights: neither %s nor %s", s->dir, WEIGHTS_NAME,
                           INDEX_NAME);
            goto done;
        }
        char *text = NULL;
        size_t len = 0;
        st = read_json_file(index_path, INDEX_MAX_BYTES, &text, &len);
        if (st == FFN_OK) st = hf_index_parse(text, len, index_path, &ix);
        free(text);
        if (st == FFN_OK && s->extra.multimodal)
            st = multimodal_relayout(w, nw, ix.names, ix.n_tensors);
        if (st) goto done;
        /* Sort the index's names (by pointer) to look tensors up. */
        sorted_ix = malloc((size_t)ix.n_tensors * sizeof *sorted_ix);
        sorted_ix_id = malloc((size_t)ix.n_tensors * sizeof *sorted_ix_id);
        if (!sorted_ix || !sorted_ix_id) {
            st = ffn_error(FFN_ERR_NOMEM, "out of memory");
            goto done;
        }
        /* names are distinct (the JSON reader rejects duplicate keys): sort
         * them, then recover each one's position by binary search once */
        memcpy(sorted_ix, ix.names, (size_t)ix.n_tensors * sizeof *sorted_ix);
        qsort(sorted_ix, (size_t)ix.n_tensors, sizeof *sorted_ix, by_cstr);
        for (int64_t k = 0; k < ix.n_tensors; k++) {
            char **at = bsearch(&ix.names[k], sorted_ix, (size_t)ix.n_tensors, sizeof *sorted_ix, by_cstr);
            sorted_ix_id[at - sorted_ix] = k;
        }
        for (int64_t i = 0; i < nw; i++) {
            char **hit = bsearch(&w[i].file_name, sorted_ix, (size_t)ix.n_tensors, sizeof *sorted_ix,
                                 by_cstr);
            if (!hit) {
                st = ffn_error(FFN_ERR_MISSING, "%s: tensor %s is not in the weight_map (the "
                               "config.json describes a model that needs it)", index_path,
                               w[i].file_name);
                goto done;
            }
            w[i].shard = ix.file_of[sorted_ix_id[hit - sorted_ix]];
        }
        for (int64_t i = 0; i < ix.n_tensors; i++)
            if (!find_wanted(w, nw, ix.names[i]) && !ignorable(ix.names[i], &s->cfg, &s->extra)) {
                st = ffn_error(FFN_ERR_FORMAT, "%s: tensor %.200s is not part of the model that "
                               "config.json describes (%lld layers, model_type %s)", index_path,
                               ix.names[i], (long long)s->cfg.num_hidden_layers, s->extra.model_type);
                goto done;
            }
        n_files = ix.n_files;
        files = ix.files;
    } else {
        files = &single;
    }
    for (int64_t f = 0; f < n_files && st == FFN_OK; f++) {
        char *path = sharded ? ckpt_path_join(s->dir, "/", files[f]) : strdup(single);
        if (!path) {
            st = ffn_error(FFN_ERR_NOMEM, "out of memory");
            break;
        }
        if (sharded && !path_is_file(path)) {
            st = ffn_error(FFN_ERR_MISSING, "%s: shard %s named in %s is missing", path, files[f],
                           INDEX_NAME);
            free(path);
            break;
        }
        ffn_st_file *sf = NULL;
        st = ffn_st_open(path, &sf);
        struct stat sb;
        if (st == FFN_OK && stat(path, &sb) == 0) info->file_bytes += (int64_t)sb.st_size;
        /* Every tensor in the file must be one we want from this file. */
        size_t cnt = st == FFN_OK ? ffn_st_count(sf) : 0;
        if (st == FFN_OK && !sharded && s->extra.multimodal) {
            char **names = calloc(cnt ? cnt : 1, sizeof *names);
            if (!names) st = ffn_error(FFN_ERR_NOMEM, "out of memory");
            for (size_t k = 0; k < cnt && st == FFN_OK; k++) {
                ffn_st_tensor t;
                if ((st = ffn_st_get(sf, k, &t)) == FFN_OK) names[k] = (char *)t.name;
            }
            if (st == FFN_OK) st = multimodal_relayout(w, nw, names, (int64_t)cnt);
            free(names);
        }
        for (size_t k = 0; k < cnt && st == FFN_OK; k++) {
            ffn_st_tensor t;
            if ((st = ffn_st_get(sf, k, &t))) break;
            wanted *hit = find_wanted(w, nw, t.name);
            if (!hit && s->extra.multimodal && multimodal_other(t.name)) info->n_ignored_tensors++;
            if ((!hit || hit->shard != f) && !ignorable(t.name, &s->cfg, &s->extra))
                st = ffn_error(FFN_ERR_FORMAT, "%s: tensor %.200s is %s (config.json: %lld layers, "
                               "model_type %s)", path, t.name,
                               hit ? "listed under another shard in the index"
                                   : "not part of the model that config.json describes",
                               (long long)s->cfg.num_hidden_layers, s->extra.model_type);
        }
        for (int64_t i = 0; i < nw && st == FFN_OK; i++) {
            if (w[i].shard != f) continue;
            const ffn_model_tensor *mt = ffn_model_tensor_at(m, w[i].tensor);
            ffn_st_tensor t;
            if ((st = ffn_st_find(sf, w[i].file_name, &t))) break;
            if (w[i].rows > 0 || w[i].transpose) { /* the family's own layout */
                const int64_t rows = w[i].rows > 0 ? w[i].rows : mt->shape[0];
                const int nd = mt->ndim;
                const int64_t want[2] = {w[i].transpose ? mt->shape[1] : rows,
                                         w[i].transpose ? rows : mt->shape[1]};
                if (t.ndim != nd || t.shape[0] != want[0] || (nd == 2 && t.shape[1] != want[1])) {
                    const ffn_model_config *c = &s->cfg;
                    const int qkv = strstr(w[i].file_name, "qkv_proj") != NULL ||
                                    strstr(w[i].file_name, "c_attn") != NULL;
                    const int64_t Dh = ffn_cfg_head_dim(c);
                    char found[64] = "";
                    for (int d = 0; d < t.ndim && d < 4; d++)
                        snprintf(found + strlen(found), sizeof found - strlen(found), "%s%lld",
                                 d ? ", " : "", (long long)t.shape[d]);
                    if (w[i].rows == 0)
                        st = ffn_error(FFN_ERR_FORMAT, "%s: tensor %s: shape [%s], expected [%lld, "
                                       "%lld] (Conv1D weights are stored [in, out]) for config.json",
                                       path, t.name, found, (long long)want[0], (long long)want[1]);
                    else if (qkv)
                        st = ffn_error(FFN_ERR_FORMAT, "%s: tensor %s: shape [%s] does not split into "
                                       "q, k, v as config.json says: expected [%lld, %lld] = q %lld "
                                       "(num_attention_heads %lld x head_dim %lld) + k %lld + v %lld "
                                       "(num_key_value_heads %lld) rows of hidden_size %lld", path,
                                       t.name, found, (long long)want[0], (long long)want[1],
                                       (long long)(c->num_attention_heads * Dh),
                                       (long long)c->num_attention_heads, (long long)Dh,
                                       (long long)(c->num_key_value_heads * Dh),
                                       (long long)(c->num_key_value_heads * Dh),
                                       (long long)c->num_key_value_heads, (long long)want[1]);
                    else
                        st = ffn_error(FFN_ERR_FORMAT, "%s: tensor %s: shape [%s] does not split into "
                                       "gate and up as config.json says: expected [%lld, %lld] = 2 x "
                                       "intermediate_size %lld rows of hidden_size %lld", path, t.name,
                                       found, (long long)want[0], (long long)want[1],
                                       (long long)c->intermediate_size, (long long)want[1]);
                    break;
                }
            } else if ((st = ffn_st_check_shape(sf, &t, mt->ndim, mt->shape))) {
                break;
            }
            if (t.dtype != FFN_DTYPE_F32 && t.dtype != FFN_DTYPE_F16 && t.dtype != FFN_DTYPE_BF16) {
                st = ffn_error(FFN_ERR_FORMAT, "%s: tensor %s: dtype %s, expected F32, F16 or BF16",
                               path, t.name, ffn_dtype_name(t.dtype));
                break;
            }
            float *dst = params + mt->offset;
            if (w[i].transpose) convert_transposed(dst, &t);
            else convert_chunked(dst, &t);
            for (int64_t e = 0; e < t.numel; e++)
                if (!isfinite(dst[e])) {
                    st = ffn_error(FFN_ERR_FORMAT, "%s: tensor %s: element %lld is %g (not finite)",
                                   path, t.name, (long long)e, (double)dst[e]);
                    break;
                }
            info->n_dtypes[t.dtype == FFN_DTYPE_F32 ? 0 : t.dtype == FFN_DTYPE_F16 ? 1 : 2]++;
            w[i].done = 1;
        }
        ffn_st_close(sf);
        free(path);
        info->n_files++;
    }
done:
    if (w)
        for (int64_t i = 0; i < nt; i++) free(w[i].file_name); /* calloc'd: past nw are NULL */
    free(w);
    free(sorted_ix);
    free(sorted_ix_id);
    hf_index_free(&ix);
    free(single);
    free(index_path);
    return st;
}

/* The parameters a config describes, part by part, each named by the
 * config.json field that scales it.  Every tensor the model will allocate
 * is counted (all experts of every MoE layer, not only the top-k), so the
 * sum is what ffn_model_create would allocate.  Saturates at INT64_MAX. */
typedef struct config_part {
    const char *field; /* the config.json key that sets this part's size */
    int64_t value;     /* that key's value */
    int64_t params;
    int64_t tensors;   /* how many tensors of the table */
} config_part;

static int64_t ffn_params_of(int gated, int bias, int64_t F, int64_t D) {
    int64_t n = 0, t = 0;
    if (ffn_mul_i64(F, D, &n) || ffn_mul_i64(n, gated ? 3 : 2, &n)) return INT64_MAX;
    if (bias && (ffn_mul_i64(F, gated ? 2 : 1, &t) || ffn_add_i64(n, t, &n) ||
                 ffn_add_i64(n, D, &n)))
        return INT64_MAX;
    return n;
}

static int64_t sat_mul(int64_t a, int64_t b) {
    int64_t r;
    return a < 0 || b < 0 || ffn_mul_i64(a, b, &r) ? INT64_MAX : r;
}

static int64_t sat_add(int64_t a, int64_t b) {
    int64_t r;
    return ffn_add_i64(a, b, &r) ? INT64_MAX : r;
}

/* Fills parts[0..4] and returns the total parameters; *n_tensors gets the
 * total number of tensors. */
static int64_t config_params(const ffn_model_config *c, const char *experts_key,
                             config_part parts[5], int64_t *n_tensors) {
    const int64_t D = c->hidden_size, V = c->vocab_size, L = c->num_hidden_layers;
    const int64_t Dh = c->head_dim > 0 ? c->head_dim
                       : D / (c->num_attention_heads > 0 ? c->num_attention_heads : 1);
    const int64_t HD = sat_mul(c->num_attention_heads, Dh);
    const int64_t C = sat_add(HD, sat_mul(2 * Dh, c->num_key_value_heads));
    const int gated = c->mlp_type == FFN_MODEL_MLP_GATED;
    int64_t n_moe = 0;
    if (c->num_experts > 0 && c->moe_layer_freq > 0) n_moe = L / c->moe_layer_freq;
    const int64_t n_dense = c->mlp_type == FFN_MODEL_MLP_NONE ? 0 : L - n_moe;
    const int64_t Fe = c->moe_intermediate_size > 0 ? c->moe_intermediate_size
                                                    : c->intermediate_size;
    const int64_t Fs = c->shared_expert_intermediate_size;
    /* embeddings, the head and the final norm */
    /* tensors of one FFN: its projections, and as many biases */
    const int64_t ffn_tensors = (gated ? 3 : 2) * (c->mlp_bias ? 2 : 1);
    parts[0] = (config_part){"vocab_size", V,
                             sat_add(sat_mul(sat_mul(V, D), c->tie_word_embeddings ? 1 : 2), D),
                             c->tie_word_embeddings ? 2 : 3};
    /* per layer: two norms, q k v (+ biases), o */
    int64_t attn = sat_add(sat_add(sat_mul(C, D), sat_mul(HD, D)), 2 * D);
    if (c->attention_bias) attn = sat_add(attn, C);
    const int64_t attn_tensors = (c->attention_bias ? 8 : 5) + (c->mlp_type != FFN_MODEL_MLP_NONE);
    parts[1] = (config_part){"num_hidden_layers", L, sat_mul(attn, L), sat_mul(attn_tensors, L)};
    parts[2] = (config_part){"intermediate_size", c->intermediate_size,
                             sat_mul(ffn_params_of(gated, c->mlp_bias, c->intermediate_size, D),
                                     n_dense),
                             sat_mul(ffn_tensors, n_dense)};
    int64_t experts = 0, shared = 0, experts_t = 0, shared_t = 0;
    if (n_moe > 0) {
        /* the router (E, D) and E experts per MoE layer */
        int64_t per = sat_add(sat_mul(c->num_experts, D),
                              sat_mul(c->num_experts, ffn_params_of(gated, c->mlp_bias, Fe, D)));
        experts = sat_mul(per, n_moe);
        experts_t = sat_mul(sat_add(1, sat_mul(c->num_experts, ffn_tensors)), n_moe);
        if (Fs > 0) {
            shared = sat_mul(sat_add(ffn_params_of(gated, c->mlp_bias, Fs, D), D), n_moe);
            shared_t = sat_mul(ffn_tensors + 1, n_moe);
        }
    }
    parts[3] = (config_part){experts_key[0] ? experts_key : "num_experts", c->num_experts, experts,
                             experts_t};
    parts[4] = (config_part){"shared_expert_intermediate_size", Fs, shared, shared_t};
    int64_t total = 0;
    *n_tensors = 0;
    for (int i = 0; i < 5; i++) {
        total = sat_add(total, parts[i].params);
        *n_tensors = sat_add(*n_tensors, parts[i].tensors);
    }
    return total;
}

/* The total size of the weight files of a directory (the index's shards,
 * each of which must exist) and the number of tensors they hold (the
 * single file's header, or the index's weight_map; -1 when the header is
 * unreadable). */
static ffn_status weight_files_bytes(const char *dir, int64_t *bytes, int64_t *n_tensors) {
    *bytes = 0;
    *n_tensors = 0;
    char *single = ckpt_path_join(dir, "/", WEIGHTS_NAME);
    char *index_path = ckpt_path_join(dir, "/", INDEX_NAME);
    ffn_status st = FFN_OK;
    struct stat sb;
    if (!single || !index_path) st = ffn_error(FFN_ERR_NOMEM, "out of memory");
    else if (path_is_file(single)) {
        if (stat(single, &sb) == 0) *bytes = (int64_t)sb.st_size;
        /* a bad header is reported by the loader, after the size checks */
        ffn_st_file *sf = NULL;
        *n_tensors = ffn_st_open(single, &sf) == FFN_OK ? (int64_t)ffn_st_count(sf) : -1;
        ffn_st_close(sf);
    } else if (!path_is_file(index_path)) {
        st = ffn_error(FFN_ERR_MISSING, "%s: no weights: neither %s nor %s", dir, WEIGHTS_NAME,
                       INDEX_NAME);
    } else {
        char *text = NULL;
        size_t len = 0;
        hf_index ix;
        memset(&ix, 0, sizeof ix);
        st = read_json_file(index_path, INDEX_MAX_BYTES, &text, &len);
        if (st == FFN_OK) st = hf_index_parse(text, len, index_path, &ix);
        free(text);
        *n_tensors = ix.n_tensors;
        for (int64_t f = 0; st == FFN_OK && f < ix.n_files; f++) {
            char *p = ckpt_path_join(dir, "/", ix.files[f]);
            if (!p) st = ffn_error(FFN_ERR_NOMEM, "out of memory");
            else if (stat(p, &sb) != 0 || !S_ISREG(sb.st_mode))
                st = ffn_error(FFN_ERR_MISSING, "%s: shard %s named in %s is missing", p, ix.files[f],
                               INDEX_NAME);
            else
                *bytes += (int64_t)sb.st_size;
            free(p);
        }
        hf_index_free(&ix); /* also when a shard is missing */
    }
    free(single);
    free(index_path);
    return st;
}

ffn_status ffn_checkpoint_load_model(ffn_ctx *ctx, const char *path,
                                     const ffn_model_options *opt, ffn_model **model,
                                     ffn_checkpoint_info *info_out) {
    if (!ctx || !path || !model)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_checkpoint_load_model: NULL argument");
    *model = NULL;
    ffn_checkpoint_info info;
    ckpt_source s;
    ffn_status st = open_source(path, &s, &info);
    if (st) return st;
    ffn_model_options o = {.max_batch = 1};
    if (opt) o = *opt;
    if (o.max_batch <= 0) o.max_batch = 1;
    int64_t ctx_len = s.cfg.max_position_embeddings;
    if (info.context_cap > 0 && info.context_cap < ctx_len) ctx_len = info.context_cap;
    if (o.max_seq <= 0) o.max_seq = ctx_len < CKPT_DEFAULT_MAX_SEQ ? ctx_len : CKPT_DEFAULT_MAX_SEQ;
    if (o.max_seq > ctx_len) o.max_seq = ctx_len;
    ffn_model *m = NULL;
    if (s.format == FFN_CHECKPOINT_LLAMA2C) {
        const void *data;
        size_t size;
        st = ckpt_map_file(path, &data, &size);
        if (st == FFN_OK) {
            st = l2c_load_buffer(ctx, data, size, path, &o, 1, &m);
            ckpt_unmap_file(data, size);
        }
    } else {
        /* Before anything is allocated: the weight files must hold at least
         * 2 bytes (16-bit) for every parameter the config describes. */
        config_part parts[5];
        int64_t bytes = 0, have_tensors = 0, need_tensors = 0;
        int64_t need = config_params(&s.cfg, s.extra.experts_key, parts, &need_tensors);
        st = weight_files_bytes(s.dir, &bytes, &have_tensors);
        int64_t need_bytes = sat_mul(need, 2);
        if (st == FFN_OK && need_bytes > bytes) {
            int big = 0;
            for (int i = 1; i < 5; i++)
                if (parts[i].params > parts[big].params) big = i;
            st = ffn_error(FFN_ERR_FORMAT, "%s: config.json describes a model of at least %lld "
                           "parameters (%s %lld accounts for %lld of them), %lld bytes even in "
                           "16-bit, but the weight files hold %lld bytes", path, (long long)need,
                           parts[big].field, (long long)parts[big].value,
                           (long long)parts[big].params, (long long)need_bytes, (long long)bytes);
        }
        /* Per-tensor objects (an expert's layer) cost memory of their own, so
         * the files must hold at least half the model's tensors: a few
         * missing ones are named by the loader, tensor by tensor; a config
         * asking for far more tensors than exist stops here. */
        if (st == FFN_OK && have_tensors >= 0 && need_tensors / 2 > have_tensors + 512) {
            int big = 0;
            for (int i = 1; i < 5; i++)
                if (parts[i].tensors > parts[big].tensors) big = i;
            st = ffn_error(FFN_ERR_FORMAT, "%s: config.json describes a model of %lld tensors (%s "
                           "%lld accounts for %lld of them), but the weight files hold %lld",
                           path, (long long)need_tensors, parts[big].field,
                           (long long)parts[big].value, (long long)parts[big].tensors,
                           (long long)have_tensors);
        }
        if (st == FFN_OK && (st = ffn_model_create(ctx, &s.cfg, &o, &m)))
            st = ffn_error_prefix(st, "%s", path);
        if (st == FFN_OK) st = load_hf_weights(m, &s, &info);
        if (st == FFN_OK) st = ffn_model_params_changed(m);
    }
    free(s.dir);
    if (st) {
        ffn_model_free(m);
        return st;
    }
    *model = m;
    if (info_out) *info_out = info;
    return FFN_OK;
}

/* ---- writing a Hugging Face directory ----------------------------------------------- */

static ffn_status write_text(const char *path, const char *text, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return ffn_error(FFN_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    int bad = fwrite(text, 1, n, f) != n;
    bad |= fclose(f) != 0;
    return bad ? ffn_error(FFN_ERR_IO, "%s: write error", path) : FFN_OK;
}

/* tokenizer.json + tokenizer_config.json of ffn's tokenizer file `from`
 * into directory `dir`. */
static ffn_status write_hf_tokenizer(const char *from, const char *dir) {
    ffn_tokenizer *tok = NULL;
    ffn_status st = ffn_tokenizer_load(from, &tok);
    char *json = NULL, *p = NULL;
    size_t n = 0;
    if (st == FFN_OK) st = tokenizer_to_hf_json(tok, &json, &n);
    ffn_tokenizer_free(tok);
    if (st == FFN_OK && !(p = ckpt_path_join(dir, "/", "tokenizer.json"))) st = ffn_error(FFN_ERR_NOMEM, "out of memory");
    if (st == FFN_OK) st = write_text(p, json, n);
    free(p);
    free(json);
    p = NULL;
    if (st == FFN_OK && !(p = ckpt_path_join(dir, "/", "tokenizer_config.json"))) st = ffn_error(FFN_ERR_NOMEM, "out of memory");
    if (st == FFN_OK) st = write_text(p, FFN_HF_TOKENIZER_CONFIG, strlen(FFN_HF_TOKENIZER_CONFIG));
    free(p);
    return st;
}

static ffn_status copy_file(const char *from, const char *to) {
    char *buf = NULL;
    size_t n = 0;
    ffn_status st = read_small_file(from, (size_t)1 << 30, &buf, &n);
    if (st) return st;
    FILE *f = fopen(to, "wb");
    if (!f) {
        free(buf);
        return ffn_error(FFN_ERR_IO, "%s: cannot create: %s", to, strerror(errno));
    }
    size_t wrote = fwrite(buf, 1, n, f);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || wrote != n)
        st = ffn_error(FFN_ERR_IO, "%s: write failed: %s", to, strerror(errno));
    free(buf);
    return st;
}

/* The model_type a model is written as, or NULL with *why set. */
static const char *hf_type_for(const ffn_model_config *c, const char **why) {
    *why = NULL;
    if (hf_family_is_gpt2(c)) return "gpt2";
    if (c->norm_type == FFN_NORM_LAYER && !c->learned_positions && c->attention_bias &&
        c->attention_out_bias && c->mlp_type == FFN_MODEL_MLP_DENSE && c->mlp_bias &&
        c->num_experts == 0 && c->qk_norm == FFN_QK_NORM_NONE && c->norm_weight_offset == 0.0 &&
        c->embed_scale == 0.0)
        return "starcoder2";
    if (c->mlp_type == FFN_MODEL_MLP_NONE) *why = "blocks without an FFN";
    else if (c->mlp_type == FFN_MODEL_MLP_DENSE) *why = "a dense (ungated) FFN";
    if (*why) return NULL;
    if (c->num_experts > 0) {
        if (c->qk_norm == FFN_QK_NORM_FULL && c->shared_expert_intermediate_size == 0 &&
            c->moe_layer_freq == 1 && !c->attention_bias && !c->mlp_bias &&
            c->norm_weight_offset == 0.0 && c->embed_scale == 0.0)
            return "olmoe";
        if (c->qk_norm == FFN_QK_NORM_HEAD && c->shared_expert_intermediate_size == 0 &&
            !c->attention_bias && !c->mlp_bias && c->norm_weight_offset == 0.0 &&
            c->embed_scale == 0.0)
            return "qwen3_moe";
        if (c->qk_norm != FFN_QK_NORM_NONE) {
            *why = "q/k norms in a MoE model other than OLMoE's (whole-projection norms, "
                   "no shared expert, every layer MoE, no biases) or Qwen3-MoE's (per-head "
                   "norms, no shared expert, no biases)";
            return NULL;
        }
        if (c->mlp_bias) {
            *why = "biases in MoE experts";
            return NULL;
        }
        if (c->shared_expert_intermediate_size == 0 && c->norm_topk_prob && c->moe_layer_freq == 1 &&
            !c->attention_bias && c->hidden_act == FFN_ACT_SILU)
            return "mixtral";
        return "qwen2_moe";
    }
    if (hf_family_is_gpt2(c)) return "gpt2";
    if (c->norm_type != FFN_NORM_RMS || c->learned_positions || c->attention_out_bias) {
        *why = "LayerNorm, learned positions or an o_proj bias outside GPT-2's architecture";
        return NULL;
    }
    if (c->rope_style == FFN_ROPE_INTERLEAVED && ffn_cfg_rotary_dim(c) != ffn_cfg_head_dim(c)) {
        *why = "interleaved RoPE on part of each head";
        return NULL;
    }
    if (c->qk_norm == FFN_QK_NORM_FULL) {
        *why = "a q/k norm over the whole projection in a dense model";
        return NULL;
    }
    if (c->post_norms) { /* Gemma 2 (no q/k norms) or Gemma 3 (per head) */
        if (c->norm_weight_offset != 1.0 || c->embed_scale != (double)(float)sqrt((double)c->hidden_size) ||
            c->qk_norm == FFN_QK_NORM_FULL || c->attention_bias || c->mlp_bias) {
            *why = "output norms (Gemma 2/3) without Gemma's norms and embeddings, or with biases";
            return NULL;
        }
        if (c->qk_norm == FFN_QK_NORM_HEAD) return "gemma3_text";
        if (c->rope_local_base_freq > 0) {
            *why = "a local RoPE base without q/k norms (Gemma 2 has one base)";
            return NULL;
        }
        return "gemma2";
    }
    if (c->attn_logit_softcapping > 0 || c->final_logit_softcapping > 0 || c->sliding_window > 0 ||
        c->rope_local_base_freq > 0 || c->query_pre_attn_scalar > 0) {
        *why = "Gemma 2/3's soft-capping, sliding window, query scalar or local RoPE base without "
               "their output norms";
        return NULL;
    }
    if (c->norm_weight_offset != 0.0 || c->embed_scale != 0.0) {
        if (c->norm_weight_offset != 1.0 || c->embed_scale != (double)(float)sqrt((double)c->hidden_size) ||
            c->qk_norm != FFN_QK_NORM_NONE || c->attention_bias || c->mlp_bias) {
            *why = "norm weight offset / embedding scale other than Gemma's (1 and sqrt(hidden_size))";
            return NULL;
        }
        return "gemma";
    }
    if (c->qk_norm == FFN_QK_NORM_HEAD) {
        if (c->attention_bias || c->mlp_bias) {
            *why = "biases together with per-head q/k norms (qwen3 has none)";
            return NULL;
        }
        return "qwen3";
    }
    if (c->attention_bias) {
        if (c->mlp_bias) {
            *why = "q/k/v biases together with MLP biases";
            return NULL;
        }
        return "qwen2";
    }
    return "llama";
}

static ffn_status write_hf_config(const ffn_model_config *c, const char *type, const char *dtype,
                                  const char *tokenizer_file, int64_t context_cap, const char *path) {
    int64_t ctx_len = c->max_position_embeddings;
    if (context_cap > 0 && context_cap < ctx_len) ctx_len = context_cap;
    FILE *f = fopen(path, "w");
    if (!f) return ffn_error(FFN_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    if (!strcmp(type, "gpt2")) {
        /* n_positions is wpe's row count: never capped */
        ffn_status gs = hf_write_gpt2_config(c, dtype, c->max_position_embeddings, f);
        if (fclose(f) != 0 && gs == FFN_OK)
            gs = ffn_error(FFN_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        return gs ? ffn_error_prefix(gs, "%s", path) : FFN_OK;
    }
    const int mixtral = !strcmp(type, "mixtral"), q3moe = !strcmp(type, "qwen3_moe");
    const int qmoe = !strcmp(type, "qwen2_moe") || q3moe;
    const char *arch = mixtral ? "MixtralForCausalLM" : q3moe ? "Qwen3MoeForCausalLM"
                       : qmoe ? "Qwen2MoeForCausalLM"
                       : !strcmp(type, "qwen2") ? "Qwen2ForCausalLM"
                       : !strcmp(type, "qwen3") ? "Qwen3ForCausalLM"
                       : !strcmp(type, "gemma") ? "GemmaForCausalLM"
                       : !strcmp(type, "gemma2") ? "Gemma2ForCausalLM"
                       : !strcmp(type, "gemma3_text") ? "Gemma3ForCausalLM"
                       : !strcmp(type, "phi3") ? "Phi3ForCausalLM"
                       : !strcmp(type, "olmoe") ? "OlmoeForCausalLM"
                       : !strcmp(type, "starcoder2") ? "Starcoder2ForCausalLM" : "LlamaForCausalLM";
    const int64_t Fe = c->moe_intermediate_size > 0 ? c->moe_intermediate_size : c->intermediate_size;
    fprintf(f, "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\",\n", arch, type);
    fprintf(f, "  \"vocab_size\": %lld,\n  \"hidden_size\": %lld,\n  \"intermediate_size\": %lld,\n",
            (long long)c->vocab_size, (long long)c->hidden_size,
            (long long)(mixtral || !strcmp(type, "olmoe") ? Fe : c->intermediate_size));
    fprintf(f, "  \"num_hidden_layers\": %lld,\n  \"num_attention_heads\": %lld,\n"
            "  \"num_key_value_heads\": %lld,\n  \"max_position_embeddings\": %lld,\n",
            (long long)c->num_hidden_layers, (long long)c->num_attention_heads,
            (long long)c->num_key_value_heads, (long long)ctx_len);
    fprintf(f, "  \"rope_theta\": %.17g,\n  \"rms_norm_eps\": %.17g,\n", c->rope_theta,
            c->rms_norm_eps);
    if (c->rope_scaling.type == FFN_ROPE_SCALING_NONE) fprintf(f, "  \"rope_scaling\": null,\n");
    ffn_config_hf_write_extras(f, c, 0);
    if (!strncmp(type, "gemma", 5)) { /* the MLP reads hidden_activation; head_dim absent is 256 */
        if (c->head_dim == 0) fprintf(f, "  \"head_dim\": %lld,\n", (long long)ffn_cfg_head_dim(c));
        fprintf(f, "  \"hidden_activation\": ");
        json_write_string(f, ffn_act_name(c->hidden_act));
        fprintf(f, ",\n  \"attention_bias\": false,\n");
    }
    if (!strcmp(type, "qwen3") || q3moe) { /* head_dim absent means 128 there: always written */
        if (c->head_dim == 0) fprintf(f, "  \"head_dim\": %lld,\n", (long long)ffn_cfg_head_dim(c));
        fprintf(f, "  \"attention_bias\": false,\n  \"use_sliding_window\": false,\n"
                "  \"sliding_window\": null,\n");
    }
    fprintf(f, "  \"tie_word_embeddings\": %s,\n  \"hidden_act\": ",
            c->tie_word_embeddings ? "true" : "false");
    json_write_string(f, ffn_act_name(c->hidden_act));
    fprintf(f, ",\n");
    if (!strcmp(type, "phi3"))
        fprintf(f, "  \"sliding_window\": null,\n");
    if (!strcmp(type, "starcoder2"))
        fprintf(f, "  \"norm_epsilon\": %.17g,\n  \"use_bias\": true,\n  \"sliding_window\": null,\n",
                c->rms_norm_eps);
    if (!strcmp(type, "olmoe")) /* experts are intermediate_size wide there */
        fprintf(f, "  \"num_experts\": %lld,\n  \"num_experts_per_tok\": %lld,\n"
                "  \"norm_topk_prob\": %s,\n  \"router_aux_loss_coef\": %.17g,\n"
                "  \"attention_bias\": false,\n  \"clip_qkv\": null,\n",
                (long long)c->num_experts, (long long)c->num_experts_per_tok,
                c->norm_topk_prob ? "true" : "false", c->router_aux_loss_coef);
    if (!strcmp(type, "llama"))
        fprintf(f, "  \"attention_bias\": false,\n  \"mlp_bias\": %s,\n", c->mlp_bias ? "true" : "false");
    if (!strcmp(type, "qwen2") || (qmoe && !q3moe)) /* qwen3_moe: above */
        fprintf(f, "  \"use_sliding_window\": false,\n  \"sliding_window\": null,\n");
    if (mixtral)
        fprintf(f, "  \"num_local_experts\": %lld,\n  \"num_experts_per_tok\": %lld,\n"
                "  \"sliding_window\": null,\n  \"router_aux_loss_coef\": %.17g,\n",
                (long long)c->num_experts, (long long)c->num_experts_per_tok,
                c->router_aux_loss_coef);
    if (qmoe)
        fprintf(f, "  \"num_experts\": %lld,\n  \"num_experts_per_tok\": %lld,\n"
                "  \"moe_intermediate_size\": %lld,\n  \"shared_expert_intermediate_size\": %lld,\n"
                "  \"decoder_sparse_step\": %lld,\n  \"mlp_only_layers\": [],\n"
                "  \"norm_topk_prob\": %s,\n  \"router_aux_loss_coef\": %.17g,\n",
                (long long)c->num_experts, (long long)c->num_experts_per_tok, (long long)Fe,
                (long long)c->shared_expert_intermediate_size, (long long)c->moe_layer_freq,
                c->norm_topk_prob ? "true" : "false", c->router_aux_loss_coef);
    if (tokenizer_file) {
        fprintf(f, "  \"ffn_tokenizer_file\": ");
        json_write_string(f, tokenizer_file);
        fprintf(f, ",\n");
    }
    fprintf(f, "  \"torch_dtype\": \"%s\"\n}\n",
            !strcmp(dtype, "F16") ? "float16" : !strcmp(dtype, "BF16") ? "bfloat16" : "float32");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) return ffn_error(FFN_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    return FFN_OK;
}

/* Is tensor i of the table a q or k projection (weight or bias)?  Returns
 * the number of heads it holds, 0 otherwise. */
static int64_t rope_heads_of(const ffn_model_tensor *t, const ffn_model_config *c) {
    const char *n = t->name;
    size_t L = strlen(n);
    const char *suffixes[4] = {"self_attn.q_proj.weight", "self_attn.q_proj.bias",
                               "self_attn.k_proj.weight", "self_attn.k_proj.bias"};
    for (int i = 0; i < 4; i++) {
        size_t ls = strlen(suffixes[i]);
        if (L >= ls && !strcmp(n + L - ls, suffixes[i]))
            return i < 2 ? c->num_attention_heads : c->num_key_value_heads;
    }
    return 0;
}

ffn_status ffn_checkpoint_save_hf(ffn_model *model, const char *dir,
                                  const ffn_hf_save_options *opts) {
    if (!model || !dir) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_checkpoint_save_hf: NULL argument");
    const ffn_model_config *c = ffn_model_get_config(model);
    const char *why, *type = hf_type_for(c, &why);
    /* a llama-shaped model from a phi3 checkpoint goes back to phi3's fused layout */
    if (type && !strcmp(type, "llama") && opts && opts->model_type &&
        !strcmp(opts->model_type, "phi3") && c->rope_style == FFN_ROPE_HALF && !c->mlp_bias)
        type = "phi3";
    if (!type)
        return ffn_error(FFN_ERR_UNSUPPORTED, "%s: a Hugging Face Llama-family layout cannot "
                         "express this model: %s", dir, why);
    const char *dname = opts && opts->dtype ? opts->dtype : "F32";
    ffn_dtype dtype;
    if (!ffn_dtype_parse(dname, &dtype) ||
        (dtype != FFN_DTYPE_F32 && dtype != FFN_DTYPE_F16 && dtype != FFN_DTYPE_BF16))
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: dtype '%s': expected F32, F16 or BF16", dir, dname);
    ffn_dirlock lock;
    ffn_status st = ffn_dirlock_take(dir, &lock);
    if (st) return st;
    if ((st = ffn_dirswap_prepare(dir, NULL, NULL))) {
        ffn_dirlock_release(&lock);
        return st;
    }
    char *tmp = NULL;
    if ((st = ffn_dirswap_begin(dir, &tmp))) {
        ffn_dirlock_release(&lock);
        return st;
    }
    const int perm = c->rope_style == FFN_ROPE_INTERLEAVED;
    const int64_t Dh = ffn_cfg_head_dim(c);
    const float *params = ffn_model_params(model, NULL);
    const char *tok_name = NULL;
    /* a GGUF source's vocabulary: ffn's own (ffn.tokenizer) is written out
     * as tokenizer.txt (+ tokenizer.json); another is not converted */
    ffn_tokenizer *gguf_tok = NULL;
    if (opts && opts->tokenizer_path && ffn_checkpoint_is_gguf(opts->tokenizer_path)) {
        ffn_vocab *gv = NULL;
        if (ffn_vocab_load(opts->tokenizer_path, c->vocab_size, &gv) == FFN_OK && ffn_vocab_tokenizer(gv)) {
            char *text = NULL;
            size_t tn = 0;
            if (tokenizer_serialize(ffn_vocab_tokenizer(gv), &text, &tn) == FFN_OK &&
                ffn_tokenizer_parse(text, tn, opts->tokenizer_path, &gguf_tok) != FFN_OK)
                gguf_tok = NULL;
            free(text);
        }
        ffn_vocab_free(gv);
        if (gguf_tok) tok_name = FFN_TOKENIZER_FILENAME;
    } else if (opts && opts->tokenizer_path) {
        tok_name = opts->tokenizer_is_llama2c ? "tokenizer.bin" : FFN_TOKENIZER_FILENAME;
    }
    char *p = ckpt_path_join(tmp, "/", CONFIG_NAME);
    st = p ? write_hf_config(c, type, dname, tok_name, opts ? opts->context_cap : 0, p) : ffn_error(FFN_ERR_NOMEM, "out of memory");
    free(p);
    if (st == FFN_OK && tok_name) {
        p = ckpt_path_join(tmp, "/", tok_name);
        st = !p ? ffn_error(FFN_ERR_NOMEM, "out of memory")
             : gguf_tok ? ffn_tokenizer_save(gguf_tok, p) : copy_file(opts->tokenizer_path, p);
        free(p);
    }
    ffn_tokenizer_free(gguf_tok);
    /* ffn's own vocabulary also as a tokenizer.json Hugging Face reads to
     * the same ids (ffn itself reads tokenizer.txt first) */
    if (st == FFN_OK && tok_name && !opts->tokenizer_is_llama2c) {
        p = ckpt_path_join(tmp, "/", tok_name);
        st = p ? write_hf_tokenizer(p, tmp) : ffn_error(FFN_ERR_NOMEM, "out of memory");
        free(p);
    }
    ffn_st_writer *w = NULL;
    if (st == FFN_OK) st = ffn_st_writer_create(&w);
    float *buf = NULL;
    const int64_t nt = ffn_model_num_tensors(model);
    for (int64_t i = 0; i < nt && st == FFN_OK; i++) {
        const ffn_model_tensor *t = ffn_model_tensor_at(model, i);
        char fn[256];
        int64_t fused_rows = 0;
        int transpose = 0;
        const int map = hf_family_tensor(t, type, c, fn, sizeof fn, &fused_rows, &transpose);
        if (map == HF_MAP_COVERED) continue;
        if (map == HF_MAP_FUSED || map == HF_MAP_RENAMED) { /* fused: adjacent in the flat block */
            const int64_t rows = fused_rows > 0 ? fused_rows : t->shape[0], cols = t->shape[1];
            const float *data = params + t->offset;
            if (transpose) { /* (rows, cols) -> [cols, rows] */
                free(buf);
                buf = malloc((size_t)(rows * cols) * sizeof(float));
                if (!buf) {
                    st = ffn_error(FFN_ERR_NOMEM, "out of memory");
                    break;
                }
                for (int64_t r = 0; r < rows; r++)
                    for (int64_t k = 0; k < cols; k++) buf[k * rows + r] = data[r * cols + k];
                data = buf;
            }
            const int64_t shape[2] = {transpose ? cols : rows, transpose ? rows : cols};
            st = ffn_st_writer_add_f32(w, fn, dtype, t->ndim, shape, data);
            continue;
        }
        file_name_of(t->name, type, fn, sizeof fn);
        const float *src = params + t->offset;
        int64_t heads = perm ? rope_heads_of(t, c) : 0;
        if (heads > 0) { /* interleaved pairs -> rotate_half order, head by head */
            free(buf);
            buf = malloc((size_t)t->numel * sizeof(float));
            if (!buf) {
                st = ffn_error(FFN_ERR_NOMEM, "out of memory");
                break;
            }
            ckpt_permute_rope_rows(buf, src, heads, Dh, t->ndim == 2 ? t->shape[1] : 1, 1);
            src = buf;
        }
        if (dtype == FFN_DTYPE_F32 && heads == 0)
            st = ffn_st_writer_add(w, fn, dtype, t->ndim, t->shape, src);
        else
            st = ffn_st_writer_add_f32(w, fn, dtype, t->ndim, t->shape, src);
    }
    free(buf);
    if (st == FFN_OK) st = ffn_st_writer_set_metadata(w, "format", "pt");
    if (st == FFN_OK) {
        p = ckpt_path_join(tmp, "/", WEIGHTS_NAME);
        st = p ? ffn_st_writer_save(w, p) : ffn_error(FFN_ERR_NOMEM, "out of memory");
        free(p);
    }
    ffn_st_writer_free(w);
    if (st == FFN_OK) st = ffn_dirswap_commit(dir, tmp);
    else ffn_dirswap_abort(tmp);
    free(tmp);
    ffn_dirlock_release(&lock);
    return st;
}
