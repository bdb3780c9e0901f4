/* run_dir.c -- loading an ffn run directory for inference (the public
 * ffn_run_dir_load), and its weights for the trainer's resume.  Which
 * directory to read (DIR, or DIR.old after an interrupted swap) is the
 * directory swap's answer (src/base/dirswap.c). */
#include "load/run_dir.h"
#include "base/dirswap.h"
#include "data/vocab_internal.h"
#include "ffn/safetensors.h"
#include "ffn/checkpoint.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

ffn_status run_dir_load_weights(ffn_model *model, const char *path) {
    ffn_st_file *f = NULL;
    ffn_status st = ffn_st_open(path, &f);
    if (st != FFN_OK) return st;
    float *params = ffn_model_params(model, NULL);
    const int64_t n = ffn_model_num_tensors(model);
    for (int64_t i = 0; i < n && st == FFN_OK; i++) {
        const ffn_model_tensor *ten = ffn_model_tensor_at(model, i);
        st = ffn_st_read_f32(f, ten->name, ten->ndim, ten->shape, params + ten->offset);
    }
    ffn_st_close(f);
    if (st == FFN_OK) st = ffn_model_params_changed(model);
    return st;
}

/* RDIR/name joined, or NULL (out of memory: the error is set). */
static char *in_dir(const char *rdir, const char *name) {
    char *p = ffn_path_join(rdir, "/", name);
    if (!p) ffn_error(FFN_ERR_NOMEM, "out of memory");
    return p;
}

/* The run directory's vocabulary when it is not tokenizer.txt: a Hugging
 * Face tokenizer.json (looked for first), or the llama2.c tokenizer.bin of
 * a model fine-tuned from one (ffn train --init); NULL when neither. */
static const char *foreign_vocab(const char *rdir) {
    /* a tokenizer.json that is ffn's own export of the tokenizer.txt beside
     * it (ffn export --format hf) is not a foreign vocabulary */
    if (vocab_dir_json_is_export(rdir)) return NULL;
    static const char *const names[] = {"tokenizer.json", FFN_LLAMA2C_TOKENIZER_FILENAME};
    for (int i = 0; i < 2; i++) {
        char *path = ffn_path_join(rdir, "/", names[i]);
        struct stat sb;
        int yes = path && lstat(path, &sb) == 0 && S_ISREG(sb.st_mode);
        free(path);
        if (yes) return names[i];
    }
    return NULL;
}

static ffn_status read_config(const char *rdir, ffn_model_config *cfg) {
    char *path = in_dir(rdir, FFN_CONFIG_FILENAME);
    ffn_status st = path ? ffn_model_config_load(path, cfg) : FFN_ERR_NOMEM;
    free(path);
    return st;
}

/* The model of config cfg with the weights of RDIR/model.safetensors. */
static ffn_status model_with_weights(ffn_ctx *ctx, const char *rdir, const ffn_model_config *cfg,
                                     ffn_model **out) {
    *out = NULL;
    ffn_model *m = NULL;
    ffn_status st = ffn_model_create(ctx, cfg, NULL, &m);
    char *path = st == FFN_OK ? in_dir(rdir, FFN_MODEL_FILENAME) : NULL;
    if (st == FFN_OK) st = path ? run_dir_load_weights(m, path) : FFN_ERR_NOMEM;
    free(path);
    if (st != FFN_OK) ffn_model_free(m);
    else *out = m;
    return st;
}

/* The start of both loaders: the arguments checked, *model cleared and
 * DIR resolved (a symbolic link to a run directory is followed). */
static ffn_status begin_load(ffn_ctx *ctx, const char *dir, ffn_model **model, const char *fn,
                             char **rdir) {
    if (!ctx || !dir || !model) return ffn_error(FFN_ERR_INVALID_ARG, "%s: NULL argument", fn);
    *model = NULL;
    return ffn_dirswap_resolve(dir, rdir);
}

/* The vocabulary of a run directory: tokenizer.json, tokenizer.txt, or the
 * llama2.c tokenizer.bin of a model fine-tuned from one (ffn train --init). */
ffn_status ffn_run_dir_load_vocab(ffn_ctx *ctx, const char *dir, ffn_model **model,
                                  ffn_vocab **vocab) {
    if (!vocab) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_run_dir_load_vocab: NULL argument");
    *vocab = NULL;
    char *rdir = NULL;
    ffn_status st = begin_load(ctx, dir, model, "ffn_run_dir_load_vocab", &rdir);
    if (st != FFN_OK) return st;
    const char *vocab_name = foreign_vocab(rdir);
    if (!vocab_name) { /* the usual run directory */
        free(rdir);
        ffn_tokenizer *tok = NULL;
        st = ffn_run_dir_load(ctx, dir, model, &tok);
        if (st == FFN_OK) st = ffn_vocab_from_tokenizer(tok, vocab);
        if (st != FFN_OK) {
            ffn_model_free(*model);
            *model = NULL;
        }
        return st;
    }
    ffn_model_config cfg;
    ffn_vocab *v = NULL;
    char *path = NULL;
    st = read_config(rdir, &cfg);
    if (st == FFN_OK && !(path = in_dir(rdir, vocab_name))) st = FFN_ERR_NOMEM;
    if (st == FFN_OK) st = ffn_vocab_load(path, cfg.vocab_size, &v);
    if (st == FFN_OK) st = model_with_weights(ctx, rdir, &cfg, model);
    free(path);
    free(rdir);
    if (st != FFN_OK) ffn_vocab_free(v);
    else *vocab = v;
    return st;
}

ffn_status ffn_run_dir_load(ffn_ctx *ctx, const char *dir, ffn_model **model,
                            ffn_tokenizer **tokenizer) {
    if (!tokenizer) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_run_dir_load: NULL argument");
    *tokenizer = NULL;
    char *rdir = NULL, *path = NULL;
    ffn_status st = begin_load(ctx, dir, model, "ffn_run_dir_load", &rdir);
    if (st != FFN_OK) return st;
    ffn_model_config cfg;
    ffn_tokenizer *tok = NULL;
    st = read_config(rdir, &cfg);
    const char *foreign = st == FFN_OK ? foreign_vocab(rdir) : NULL;
    if (foreign)
        st = ffn_error(FFN_ERR_UNSUPPORTED, "%s: holds a %s vocabulary (%s), which an "
                       "ffn_tokenizer cannot hold: load it with ffn_run_dir_load_vocab", rdir,
                       foreign[0] == 't' && strstr(foreign, ".json") ? "Hugging Face" : "llama2.c",
                       foreign);
    if (st == FFN_OK && !(path = in_dir(rdir, FFN_TOKENIZER_FILENAME))) st = FFN_ERR_NOMEM;
    if (st == FFN_OK) st = ffn_tokenizer_load(path, &tok);
    free(path);
    if (st == FFN_OK && ffn_tokenizer_vocab_size(tok) != cfg.vocab_size)
        st = ffn_error(FFN_ERR_CONFIG, "%s: vocab_size %lld in config.json but %lld tokens in %s",
                       rdir, (long long)cfg.vocab_size, (long long)ffn_tokenizer_vocab_size(tok),
                       FFN_TOKENIZER_FILENAME);
    if (st == FFN_OK) st = model_with_weights(ctx, rdir, &cfg, model);
    free(rdir);
    if (st != FFN_OK) ffn_tokenizer_free(tok);
    else *tokenizer = tok;
    return st;
}

ffn_status ffn_run_dir_remove(const char *dir) {
    if (!dir) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_run_dir_remove: NULL argument");
    return ffn_dirswap_remove(dir);
}
