/* checkpoint.c -- crash-safe checkpoint directories.
 *
 * A checkpoint is a directory (config.json, model.safetensors, the
 * tokenizer, train_state.safetensors).  It is written whole under DIR.tmp,
 * every file and the directory are fsynced, and then it replaces DIR in one
 * atomic step (renameat2 RENAME_EXCHANGE), so that a crash at any moment
 * leaves a whole checkpoint: before the exchange DIR is the old one, after
 * it DIR is the new one.  File systems without the exchange get a two-rename
 * fallback through DIR.old, which ckpt_resolve() knows to look for.
 *
 * Here: the directory swap, config.json (with ffn's keys), the weights
 * (model.safetensors, by the model's tensor table), and loading a checkpoint
 * for inference.  The training state (train_state.safetensors) is written
 * and read by train.c, which owns the trainer. */
#include "train/train_internal.h"
#include "ffn/data.h"
#include "ffn/model.h"
#include "ffn/safetensors.h"
#include "ffn/train.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

char *ckpt_path_join(const char *a, const char *sep, const char *b) {
    size_t na = strlen(a), ns = strlen(sep), nb = strlen(b);
    char *p = malloc(na + ns + nb + 1);
    if (!p) return NULL;
    memcpy(p, a, na);
    memcpy(p + na, sep, ns);
    memcpy(p + na + ns, b, nb + 1);
    return p;
}

/* DIR without trailing slashes (so that "DIR/" + ".tmp" is a sibling). */
static char *strip_slashes(const char *dir) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    char *p = malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, dir, n);
    p[n] = '\0';
    return p;
}

/* The directory holding `path` (for fsync after a rename). */
static char *parent_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return ckpt_path_join(".", "", "");
    if (slash == path) return ckpt_path_join("/", "", "");
    size_t n = (size_t)(slash - path);
    char *p = malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, path, n);
    p[n] = '\0';
    return p;
}

static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

/* A directory that looks like one of our checkpoints. */
static int is_checkpoint(const char *dir) {
    char *cfg = ckpt_path_join(dir, "/", "config.json");
    char *st = ckpt_path_join(dir, "/", "model.safetensors");
    int ok = cfg && st && exists(cfg) && exists(st);
    free(cfg);
    free(st);
    return ok;
}

static int is_empty_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    int empty = 1;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            empty = 0;
            break;
        }
    }
    closedir(d);
    return empty;
}

ffn_status ckpt_fsync_path(const char *path, int dir) {
    int fd = open(path, (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
    if (fd < 0) return ffn_error(FFN_ERR_IO, "%s: cannot open to fsync: %s", path, strerror(errno));
    int rc = fsync(fd);
    int err = errno;
    close(fd);
    /* Some file systems refuse fsync on directories (EINVAL): not an error. */
    if (rc != 0 && !(dir && (err == EINVAL || err == EROFS)))
        return ffn_error(FFN_ERR_IO, "%s: fsync failed: %s", path, strerror(err));
    return FFN_OK;
}

ffn_status ckpt_remove_dir(const char *path) {
    DIR *d = opendir(path);
    if (!d) {
        if (errno == ENOENT) return FFN_OK;
        return ffn_error(FFN_ERR_IO, "%s: cannot open directory: %s", path, strerror(errno));
    }
    struct dirent *e;
    ffn_status st = FFN_OK;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *f = ckpt_path_join(path, "/", e->d_name);
        if (!f) {
            st = ffn_error(FFN_ERR_NOMEM, "out of memory");
            break;
        }
        struct stat sb;
        if (lstat(f, &sb) == 0 && !S_ISDIR(sb.st_mode) && unlink(f) != 0 && errno != ENOENT)
            st = ffn_error(FFN_ERR_IO, "%s: cannot remove: %s", f, strerror(errno));
        free(f);
    }
    closedir(d);
    if (st == FFN_OK && rmdir(path) != 0 && errno != ENOENT)
        st = ffn_error(FFN_ERR_IO, "%s: cannot remove directory: %s", path, strerror(errno));
    return st;
}

ffn_status ckpt_prepare_out(const char *dir_in) {
    char *dir = strip_slashes(dir_in);
    char *old = dir ? ckpt_path_join(dir, "", ".old") : NULL;
    char *parent = dir ? parent_of(dir) : NULL;
    ffn_status st = FFN_OK;
    if (!dir || !old || !parent) {
        st = ffn_error(FFN_ERR_NOMEM, "out of memory");
        goto done;
    }
    /* An interrupted fallback swap: DIR gone, DIR.old whole.  Put it back. */
    if (!exists(dir) && is_dir(old) && is_checkpoint(old)) {
        if (rename(old, dir) != 0) {
            st = ffn_error(FFN_ERR_IO, "%s: cannot restore the previous checkpoint from %s: %s", dir,
                           old, strerror(errno));
            goto done;
        }
        ckpt_fsync_path(parent, 1);
    }
    if (exists(dir)) {
        if (!is_dir(dir)) {
            st = ffn_error(FFN_ERR_IO, "%s: exists and is not a directory (choose another --out)",
                           dir);
            goto done;
        }
        if (!is_empty_dir(dir) && !is_checkpoint(dir)) {
            st = ffn_error(FFN_ERR_IO,
                           "%s: exists, is not empty and is not an ffn checkpoint (no config.json "
                           "and model.safetensors); refusing to replace it (choose another --out)",
                           dir);
            goto done;
        }
    }
    if (!is_dir(parent)) {
        st = ffn_error(FFN_ERR_IO, "%s: the parent directory %s %s", dir, parent,
                       exists(parent) ? "is not a directory" : "does not exist");
        goto done;
    }
    /* Probe that we can create the sibling we will write into. */
    char *tmp = NULL;
    st = ckpt_begin(dir, &tmp);
    if (st == FFN_OK) {
        ckpt_remove_dir(tmp);
        free(tmp);
    }
done:
    free(dir);
    free(old);
    free(parent);
    return st;
}

ffn_status ckpt_begin(const char *dir_in, char **tmp_path) {
    *tmp_path = NULL;
    char *dir = strip_slashes(dir_in);
    char *tmp = dir ? ckpt_path_join(dir, "", ".tmp") : NULL;
    free(dir);
    if (!tmp) return ffn_error(FFN_ERR_NOMEM, "out of memory");
    if (exists(tmp)) {
        ffn_status st = ckpt_remove_dir(tmp);
        if (st != FFN_OK) {
            free(tmp);
            return st;
        }
    }
    if (mkdir(tmp, 0755) != 0) {
        ffn_status st = ffn_error(FFN_ERR_IO, "%s: cannot create the checkpoint directory: %s", tmp,
                                  strerror(errno));
        free(tmp);
        return st;
    }
    *tmp_path = tmp;
    return FFN_OK;
}

static ffn_status fsync_tree(const char *tmp) {
    DIR *d = opendir(tmp);
    if (!d) return ffn_error(FFN_ERR_IO, "%s: cannot open directory: %s", tmp, strerror(errno));
    struct dirent *e;
    ffn_status st = FFN_OK;
    while (st == FFN_OK && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *f = ckpt_path_join(tmp, "/", e->d_name);
        if (!f) {
            st = ffn_error(FFN_ERR_NOMEM, "out of memory");
            break;
        }
        st = ckpt_fsync_path(f, 0);
        free(f);
    }
    closedir(d);
    if (st == FFN_OK) st = ckpt_fsync_path(tmp, 1);
    return st;
}

ffn_status ckpt_commit(const char *dir_in, const char *tmp) {
    char *dir = strip_slashes(dir_in);
    char *old = dir ? ckpt_path_join(dir, "", ".old") : NULL;
    char *parent = dir ? parent_of(dir) : NULL;
    ffn_status st = FFN_OK;
    if (!dir || !old || !parent) {
        st = ffn_error(FFN_ERR_NOMEM, "out of memory");
        goto done;
    }
    st = fsync_tree(tmp);
    if (st != FFN_OK) goto fail;
    if (!exists(dir)) {
        if (rename(tmp, dir) != 0) {
            st = ffn_error(FFN_ERR_IO, "%s: cannot rename %s into place: %s", dir, tmp,
                           strerror(errno));
            goto fail;
        }
        st = ckpt_fsync_path(parent, 1);
        goto done;
    }
    /* FFN_CHECKPOINT_NO_EXCHANGE=1 forces the fallback (for its crash test). */
    const char *no_exchange = getenv("FFN_CHECKPOINT_NO_EXCHANGE");
    if (no_exchange && *no_exchange && strcmp(no_exchange, "0")) errno = EINVAL;
    else if (renameat2(AT_FDCWD, tmp, AT_FDCWD, dir, RENAME_EXCHANGE) == 0) {
        /* DIR is the new checkpoint; tmp now holds the old one. */
        st = ckpt_fsync_path(parent, 1);
        ckpt_remove_dir(tmp);
        goto done;
    }
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) {
        st = ffn_error(FFN_ERR_IO, "%s: cannot swap in %s: %s", dir, tmp, strerror(errno));
        goto fail;
    }
    /* Fallback: DIR -> DIR.old, tmp -> DIR, remove DIR.old. */
    if (exists(old)) ckpt_remove_dir(old);
    if (rename(dir, old) != 0) {
        st = ffn_error(FFN_ERR_IO, "%s: cannot move the previous checkpoint aside: %s", dir,
                       strerror(errno));
        goto fail;
    }
    ckpt_fsync_path(parent, 1);
    if (rename(tmp, dir) != 0) {
        st = ffn_error(FFN_ERR_IO, "%s: cannot rename %s into place: %s", dir, tmp, strerror(errno));
        rename(old, dir); /* put the previous one back */
        goto fail;
    }
    st = ckpt_fsync_path(parent, 1);
    ckpt_remove_dir(old);
    goto done;
fail:
    ckpt_remove_dir(tmp);
done:
    free(dir);
    free(old);
    free(parent);
    return st;
}

ffn_status ckpt_resolve(const char *dir_in, char **out) {
    *out = NULL;
    char *dir = strip_slashes(dir_in);
    if (!dir) return ffn_error(FFN_ERR_NOMEM, "out of memory");
    if (is_checkpoint(dir)) {
        *out = dir;
        return FFN_OK;
    }
    char *old = ckpt_path_join(dir, "", ".old");
    if (old && !exists(dir) && is_checkpoint(old)) {
        free(dir);
        *out = old;
        return FFN_OK;
    }
    free(old);
    ffn_status st;
    if (!exists(dir))
        st = ffn_error(FFN_ERR_IO, "%s: no such checkpoint directory", dir);
    else
        st = ffn_error(FFN_ERR_MISSING,
                       "%s: not an ffn checkpoint (expected config.json and model.safetensors)",
                       dir);
    free(dir);
    return st;
}

/* ---- what goes into the directory ---------------------------------------------- */

/* Add ffn's own keys to the config.json that ffn_model_config_save wrote:
 * the file is one JSON object, so the new keys go before its last '}'. */
ffn_status ckpt_config_add_tokenizer(const char *path, ffn_tokenizer_mode mode) {
    FILE *f = fopen(path, "rb");
    if (!f) return ffn_error(FFN_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    int too_big = !feof(f);
    fclose(f);
    if (too_big) return ffn_error(FFN_ERR_INTERNAL, "%s: unexpectedly large", path);
    buf[n] = '\0';
    char *close = strrchr(buf, '}');
    if (!close) return ffn_error(FFN_ERR_INTERNAL, "%s: not a JSON object", path);
    char *open = strchr(buf, '{');
    int empty = 1;
    for (char *p = open + 1; p < close; p++)
        if (*p != ' ' && *p != '\n' && *p != '\t' && *p != '\r') empty = 0;
    f = fopen(path, "wb");
    if (!f) return ffn_error(FFN_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    /* Trim whitespace before the '}' to keep the layout tidy. */
    char *end = close;
    while (end > open + 1 && (end[-1] == ' ' || end[-1] == '\n' || end[-1] == '\r')) end--;
    fwrite(buf, 1, (size_t)(end - buf), f);
    fprintf(f, "%s\n  \"ffn_tokenizer\": \"%s\",\n  \"ffn_tokenizer_file\": \"%s\"\n}\n",
            empty ? "" : ",", ffn_tokenizer_mode_name(mode), FFN_TOKENIZER_FILENAME);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return ffn_error(FFN_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    return FFN_OK;
}

/* model.safetensors: every tensor of the table under its HF name. */
ffn_status ckpt_save_weights(ffn_model *model, const char *path) {
    ffn_st_writer *w = NULL;
    ffn_status st = ffn_st_writer_create(&w);
    if (st != FFN_OK) return st;
    const float *params = ffn_model_params(model, NULL);
    const int64_t n = ffn_model_num_tensors(model);
    for (int64_t i = 0; i < n && st == FFN_OK; i++) {
        const ffn_model_tensor *ten = ffn_model_tensor_at(model, i);
        st = ffn_st_writer_add(w, ten->name, FFN_DTYPE_F32, ten->ndim, ten->shape,
                               params + ten->offset);
    }
    if (st == FFN_OK) st = ffn_st_writer_set_metadata(w, "format", "pt");
    if (st == FFN_OK) st = ffn_st_writer_save(w, path);
    ffn_st_writer_free(w);
    return st;
}

/* Read every tensor of the table from model.safetensors (shapes checked). */
ffn_status ckpt_load_weights(ffn_model *model, const char *path) {
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

/* ---- loading a checkpoint for inference ------------------------------------------- */

ffn_status ffn_checkpoint_load(ffn_ctx *ctx, const char *dir, ffn_model **model,
                               ffn_tokenizer **tokenizer) {
    if (!ctx || !dir || !model || !tokenizer)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_checkpoint_load: NULL argument");
    *model = NULL;
    *tokenizer = NULL;
    char *rdir = NULL, *path = NULL;
    ffn_status st = ckpt_resolve(dir, &rdir);
    if (st != FFN_OK) return st;
    ffn_model_config cfg;
    ffn_model *m = NULL;
    ffn_tokenizer *tok = NULL;
    path = ckpt_path_join(rdir, "/", FFN_CONFIG_FILENAME);
    st = path ? ffn_model_config_load(path, &cfg) : ffn_error(FFN_ERR_NOMEM, "out of memory");
    free(path);
    if (st == FFN_OK) {
        path = ckpt_path_join(rdir, "/", FFN_TOKENIZER_FILENAME);
        st = path ? ffn_tokenizer_load(path, &tok) : ffn_error(FFN_ERR_NOMEM, "out of memory");
        free(path);
    }
    if (st == FFN_OK && ffn_tokenizer_vocab_size(tok) != cfg.vocab_size)
        st = ffn_error(FFN_ERR_CONFIG, "%s: vocab_size %lld in config.json but %lld tokens in %s",
                       rdir, (long long)cfg.vocab_size, (long long)ffn_tokenizer_vocab_size(tok),
                       FFN_TOKENIZER_FILENAME);
    if (st == FFN_OK) st = ffn_model_create(ctx, &cfg, NULL, &m);
    if (st == FFN_OK) {
        path = ckpt_path_join(rdir, "/", FFN_MODEL_FILENAME);
        st = path ? ckpt_load_weights(m, path) : ffn_error(FFN_ERR_NOMEM, "out of memory");
        free(path);
    }
    free(rdir);
    if (st != FFN_OK) {
        ffn_model_free(m);
        ffn_tokenizer_free(tok);
        return st;
    }
    *model = m;
    *tokenizer = tok;
    return FFN_OK;
}

