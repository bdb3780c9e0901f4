/* dirswap.c -- the directory swap and the directory lock (see dirswap.h
 * for the protocol and what it promises).
 *
 * Every deletion here goes through retire(): the directory is opened with
 * O_NOFOLLOW|O_DIRECTORY, its entries are examined with fstatat(...,
 * AT_SYMLINK_NOFOLLOW) and removed with unlinkat relative to that
 * descriptor, so a symbolic link planted anywhere on the way is never
 * followed. */
#include "base/dirswap.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif
#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

#define OLD_SUFFIX ".old"
#define TMP_SUFFIX ".tmp-"
#define TMP_RANDOM 6 /* the XXXXXX of mkdtemp */

const char *const ffn_dirswap_owned[] = {
    "config.json",        "tokenizer.txt",
    "tokenizer.bin",      "train_state.safetensors",
    "model.safetensors.index.json", "metrics.jsonl",
    "tokenizer.json",     "tokenizer_config.json",
    "model.safetensors", /* with config.json, last: the two mark a model directory */
    NULL,
};

char *ffn_path_join(const char *a, const char *sep, const char *b) {
    size_t na = strlen(a), ns = strlen(sep), nb = strlen(b);
    char *p = malloc(na + ns + nb + 1);
    if (!p) return NULL;
    memcpy(p, a, na);
    memcpy(p + na, sep, ns);
    memcpy(p + na + ns, b, nb + 1);
    return p;
}

ffn_status ffn_fsync_path(const char *path, int dir) {
    int fd = open(path, (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return ffn_error(FFN_ERR_IO, "%s: cannot open to fsync: %s", path, strerror(errno));
    int rc = fsync(fd);
    int err = errno;
    close(fd);
    /* Some file systems refuse fsync on directories (EINVAL): not an error. */
    if (rc != 0 && !(dir && (err == EINVAL || err == EROFS)))
        return ffn_error(FFN_ERR_IO, "%s: fsync failed: %s", path, strerror(err));
    return FFN_OK;
}

/* ---- small path helpers ------------------------------------------------------ */

static char *strip_slashes(const char *dir) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    char *p = malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, dir, n);
    p[n] = '\0';
    return p;
}

/* The directory holding `path`. */
static char *parent_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return ffn_path_join(".", "", "");
    if (slash == path) return ffn_path_join("/", "", "");
    size_t n = (size_t)(slash - path);
    char *p = malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, path, n);
    p[n] = '\0';
    return p;
}

static const char *base_of(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static int exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

/* A real directory (not a symbolic link to one). */
static int is_real_dir(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_owned(const char *name) {
    for (int i = 0; ffn_dirswap_owned[i]; i++)
        if (!strcmp(name, ffn_dirswap_owned[i])) return 1;
    return 0;
}

/* mkdtemp's and mkostemp's six characters: [A-Za-z0-9] */
static int is_temp_random(const char *p) {
    for (int i = 0; i < TMP_RANDOM; i++) {
        char c = p[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return 0;
    }
    return p[TMP_RANDOM] == '\0';
}

/* An owned name, or the temporary file an atomic write of one leaves when
 * it is killed: NAME.tmp-XXXXXX (ffn_atomic_open) or NAME.tmp.XXXXXX (the
 * safetensors writer's mkostemp). */
static int is_owned_or_temp(const char *name) {
    if (is_owned(name)) return 1;
    for (int i = 0; ffn_dirswap_owned[i]; i++) {
        size_t n = strlen(ffn_dirswap_owned[i]);
        if (!strncmp(name, ffn_dirswap_owned[i], n) &&
            (!strncmp(name + n, ".tmp-", 5) || !strncmp(name + n, ".tmp.", 5)) &&
            is_temp_random(name + n + 5))
            return 1;
    }
    return 0;
}

int ffn_dirswap_is_model_dir(const char *dir) {
    char *cfg = ffn_path_join(dir, "/", "config.json");
    char *st = ffn_path_join(dir, "/", "model.safetensors");
    int ok = cfg && st && exists(cfg) && exists(st);
    free(cfg);
    free(st);
    return ok;
}

int ffn_dir_is_empty(const char *dir) {
    DIR *d = dir ? opendir(dir) : NULL;
    if (!d) return 0;
    struct dirent *e;
    int empty = 1;
    while (empty && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) empty = 0;
    closedir(d);
    return empty;
}

/* A directory one of our swaps left behind: a real directory that is a
 * model directory, or holds nothing but regular files of owned names
 * (a retirement cut short leaves those). */
static int is_swap_leftover(const char *path) {
    if (!is_real_dir(path)) return 0;
    if (ffn_dirswap_is_model_dir(path)) return 1;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return 0;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return 0;
    }
    int ours = 1;
    struct dirent *e;
    while (ours && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        struct stat sb;
        ours = is_owned_or_temp(e->d_name) &&
               fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode);
    }
    closedir(d);
    return ours;
}

/* When *dir is a symbolic link, replace it by the real path of its target.
 * Returns 0, or -1 when the target is missing (errno set, *dir kept). */
static int follow_link(char **dir) {
    struct stat sb;
    if (lstat(*dir, &sb) != 0 || !S_ISLNK(sb.st_mode)) return 0;
    char *real = realpath(*dir, NULL);
    if (!real) return -1;
    free(*dir);
    *dir = real;
    return 0;
}

ffn_status ffn_dirswap_target(const char *dir_in, char **out) {
    *out = NULL;
    char *dir = strip_slashes(dir_in);
    if (!dir) return ffn_error(FFN_ERR_NOMEM, "out of memory");
    if (follow_link(&dir) != 0) {
        ffn_status s = ffn_error(FFN_ERR_IO, "%s: a symbolic link to a missing target (%s)", dir,
                                 strerror(errno));
        free(dir);
        return s;
    }
    *out = dir;
    return FFN_OK;
}

/* ---- retiring a directory ---------------------------------------------------- */

/* Empty and remove the real directory `path`: regular files of owned names
 * (or of any name when all_ours) are deleted, other entries are moved into
 * `keep_in` when given (never replacing an entry there) and otherwise left,
 * in which case the directory stays.  model.safetensors and config.json
 * go last, so a retirement cut short is still recognised as ours. */
static ffn_status retire(const char *path, const char *keep_in, int all_ours) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return FFN_OK;
        return ffn_error(FFN_ERR_IO, "%s: not removed (cannot open it as a directory: %s)", path,
                         strerror(errno));
    }
    int kfd = keep_in ? open(keep_in, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        if (kfd >= 0) close(kfd);
        return ffn_error(FFN_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    }
    ffn_status st = FFN_OK;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        if (!strcmp(n, ".") || !strcmp(n, "..")) continue;
        struct stat sb;
        if (fstatat(fd, n, &sb, AT_SYMLINK_NOFOLLOW) != 0) continue;
        int mine = S_ISREG(sb.st_mode) && (all_ours || is_owned_or_temp(n));
        if (mine) {
            if (!strcmp(n, "model.safetensors") || !strcmp(n, "config.json")) continue;
            if (unlinkat(fd, n, 0) != 0 && errno != ENOENT)
                st = ffn_error(FFN_ERR_IO, "%s/%s: cannot remove: %s", path, n, strerror(errno));
        } else if (kfd >= 0) {
            int rc = renameat2(fd, n, kfd, n, RENAME_NOREPLACE);
            if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) {
                struct stat there;
                if (fstatat(kfd, n, &there, AT_SYMLINK_NOFOLLOW) != 0) rc = renameat(fd, n, kfd, n);
            }
            (void)rc; /* a name already taken in keep_in: left here */
        }
    }
    closedir(d); /* closes fd */
    if (kfd >= 0) close(kfd);
    /* the two markers last */
    const char *last[2] = {"model.safetensors", "config.json"};
    fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    for (int i = 0; fd >= 0 && i < 2; i++) {
        struct stat sb;
        if (fstatat(fd, last[i], &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode) &&
            unlinkat(fd, last[i], 0) != 0 && errno != ENOENT)
            st = ffn_error(FFN_ERR_IO, "%s/%s: cannot remove: %s", path, last[i], strerror(errno));
    }
    if (fd >= 0) close(fd);
    /* rmdir never follows a link; a directory still holding a file that is
     * not ours simply stays. */
    if (st == FFN_OK && rmdir(path) != 0 && errno != ENOENT && errno != ENOTEMPTY &&
        errno != EEXIST)
        st = ffn_error(FFN_ERR_IO, "%s: cannot remove directory: %s", path, strerror(errno));
    return st;
}

void ffn_dirswap_abort(const char *tmp) {
    if (tmp) (void)retire(tmp, NULL, 1);
}

/* Retire the DIR.tmp-XXXXXX directories crashed swaps left beside `dir`.
 * The caller holds ffn_dirlock_take(dir), so the writer that made one is
 * gone (every writer of DIR holds that lock while its temporary exists).
 * A name of the pattern that is a real directory (never a link) holding
 * only regular files of ffn's names (or their atomic-write temporaries),
 * or a whole model directory (a previous DIR whose retirement was cut
 * short: its other files go into DIR), is removed; anything else of the
 * pattern is left and named.  `note`
 * (optional) hears of each. */
static void retire_stale_temps(const char *dir, const char *parent,
                               void (*note)(const char *message, void *user), void *user) {
    const char *base = base_of(dir);
    size_t nb = strlen(base), ns = strlen(TMP_SUFFIX);
    DIR *d = opendir(parent);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        if (strlen(n) != nb + ns + TMP_RANDOM || strncmp(n, base, nb) ||
            strncmp(n + nb, TMP_SUFFIX, ns) || !is_temp_random(n + nb + ns))
            continue;
        char *p = ffn_path_join(parent, "/", n);
        if (!p) break;
        char msg[4200];
        if (is_swap_leftover(p)) {
            /* a whole model directory of the pattern is a previous DIR whose
             * retirement was cut short: a user's file in it goes into DIR */
            ffn_status st = retire(p, is_real_dir(dir) ? dir : NULL, 0);
            if (st == FFN_OK && !exists(p))
                snprintf(msg, sizeof msg, "removed %s, left by an interrupted save (its writer "
                         "is gone: this process holds the lock on %s)", p, dir);
            else
                snprintf(msg, sizeof msg, "%s, left by an interrupted save, could not be removed: "
                         "%s", p, st != FFN_OK ? ffn_last_error() : "it is not empty");
        } else {
            snprintf(msg, sizeof msg, "%s is not removed: it is a link, not a directory, or "
                     "holds files that are not ffn's (look inside, then remove it yourself)", p);
        }
        if (note) note(msg, user);
        free(p);
    }
    closedir(d);
}

/* ---- the swap ------------------------------------------------------------------ */

static int is_dir_follow(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

ffn_status ffn_dirswap_prepare(const char *dir_in, void (*note)(const char *message, void *user),
                               void *user) {
    char *dir = NULL;
    ffn_status st = ffn_dirswap_target(dir_in, &dir);
    if (st != FFN_OK) return st;
    char *old = ffn_path_join(dir, "", OLD_SUFFIX);
    char *parent = parent_of(dir);
    if (!old || !parent) {
        st = ffn_error(FFN_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (!is_dir_follow(parent)) {
        st = ffn_error(FFN_ERR_IO, "%s: the parent directory %s %s", dir, parent,
                       exists(parent) ? "is not a directory" : "does not exist");
        goto done;
    }
    /* An interrupted fallback swap: DIR gone, DIR.old whole.  Put it back. */
    if (!exists(dir) && is_real_dir(old) && ffn_dirswap_is_model_dir(old)) {
        if (rename(old, dir) != 0) {
            st = ffn_error(FFN_ERR_IO, "%s: cannot restore the previous directory from %s: %s",
                           dir, old, strerror(errno));
            goto done;
        }
        (void)ffn_fsync_path(parent, 1);
    }
    if (exists(dir)) {
        if (!is_real_dir(dir)) {
            st = ffn_error(FFN_ERR_IO, "%s: exists and is not a directory (choose another --out)",
                           dir);
            goto done;
        }
        if (!ffn_dir_is_empty(dir) && !ffn_dirswap_is_model_dir(dir)) {
            st = ffn_error(FFN_ERR_IO,
                           "%s: exists, is not empty and is not an ffn checkpoint or model directory (no "
                           "config.json and model.safetensors); refusing to replace it (choose "
                           "another --out)",
                           dir);
            goto done;
        }
    }
    retire_stale_temps(dir, parent, note, user);
    /* Probe that we can create the sibling we will write into. */
    char *tmp = NULL;
    st = ffn_dirswap_begin(dir, &tmp);
    if (st == FFN_OK) ffn_dirswap_abort(tmp);
    free(tmp);
done:
    FFN_FREE_ALL(dir, old, parent);
    return st;
}

ffn_status ffn_dirswap_begin(const char *dir_in, char **tmp_path) {
    *tmp_path = NULL;
    char *dir = NULL;
    ffn_status st = ffn_dirswap_target(dir_in, &dir);
    if (st != FFN_OK) return st;
    char *tmp = ffn_path_join(dir, TMP_SUFFIX, "XXXXXX");
    if (!tmp) {
        free(dir);
        return ffn_error(FFN_ERR_NOMEM, "out of memory");
    }
    if (!mkdtemp(tmp)) {
        st = ffn_error(FFN_ERR_IO, "%s: cannot create a directory beside it (%s): %s", dir, tmp,
                       strerror(errno));
        free(tmp);
        free(dir);
        return st;
    }
    free(dir);
    /* mkdtemp makes it 0700; the finished directory gets the usual mode. */
    mode_t mask = umask(0);
    umask(mask);
    int fd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
        (void)fchmod(fd, 0777 & ~mask);
        close(fd);
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
        char *f = ffn_path_join(tmp, "/", e->d_name);
        if (!f) {
            st = ffn_error(FFN_ERR_NOMEM, "out of memory");
            break;
        }
        st = ffn_fsync_path(f, 0);
        free(f);
    }
    closedir(d);
    if (st == FFN_OK) st = ffn_fsync_path(tmp, 1);
    return st;
}

ffn_status ffn_dirswap_commit(const char *dir_in, const char *tmp) {
    char *dir = NULL;
    ffn_status st = ffn_dirswap_target(dir_in, &dir);
    if (st != FFN_OK) {
        ffn_dirswap_abort(tmp);
        return st;
    }
    char *old = ffn_path_join(dir, "", OLD_SUFFIX);
    char *parent = parent_of(dir);
    if (!old || !parent) {
        st = ffn_error(FFN_ERR_NOMEM, "out of memory");
        goto fail;
    }
    st = fsync_tree(tmp);
    if (st != FFN_OK) goto fail;
    if (!exists(dir)) {
        if (rename(tmp, dir) != 0) {
            st = ffn_error(FFN_ERR_IO, "%s: cannot rename %s into place: %s", dir, tmp,
                           strerror(errno));
            goto fail;
        }
        st = ffn_fsync_path(parent, 1);
        goto done;
    }
    if (!is_real_dir(dir)) {
        st = ffn_error(FFN_ERR_IO, "%s: exists and is not a directory; not replaced", dir);
        goto fail;
    }
    /* FFN_CHECKPOINT_NO_EXCHANGE=1 forces the fallback (for its crash test). */
    const char *no_exchange = getenv("FFN_CHECKPOINT_NO_EXCHANGE");
    if (no_exchange && *no_exchange && strcmp(no_exchange, "0")) errno = EINVAL;
    else if (renameat2(AT_FDCWD, tmp, AT_FDCWD, dir, RENAME_EXCHANGE) == 0) {
        /* DIR is the new directory; tmp now holds the previous one. */
        st = ffn_fsync_path(parent, 1);
        (void)retire(tmp, dir, 0);
        goto done;
    }
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) {
        st = ffn_error(FFN_ERR_IO, "%s: cannot swap in %s: %s", dir, tmp, strerror(errno));
        goto fail;
    }
    /* Fallback: DIR -> DIR.old, tmp -> DIR, retire DIR.old. */
    if (exists(old)) {
        if (!is_swap_leftover(old)) {
            st = ffn_error(FFN_ERR_IO,
                           "%s: exists and is not a directory left by ffn's swap; ffn needs that "
                           "name to replace %s: move it away",
                           old, dir);
            goto fail;
        }
        if ((st = retire(old, dir, 0)) != FFN_OK) goto fail;
        if (exists(old)) {
            st = ffn_error(FFN_ERR_IO, "%s: still holds files that are not ffn's; move it away",
                           old);
            goto fail;
        }
    }
    if (rename(dir, old) != 0) {
        st = ffn_error(FFN_ERR_IO, "%s: cannot move the previous directory aside: %s", dir,
                       strerror(errno));
        goto fail;
    }
    (void)ffn_fsync_path(parent, 1);
    if (rename(tmp, dir) != 0) {
        st = ffn_error(FFN_ERR_IO, "%s: cannot rename %s into place: %s", dir, tmp, strerror(errno));
        (void)rename(old, dir); /* put the previous one back */
        goto fail;
    }
    st = ffn_fsync_path(parent, 1);
    (void)retire(old, dir, 0);
    goto done;
fail:
    ffn_dirswap_abort(tmp);
done:
    FFN_FREE_ALL(dir, old, parent);
    return st;
}

ffn_status ffn_dirswap_remove(const char *dir_in) {
    char *dir = strip_slashes(dir_in);
    if (!dir) return ffn_error(FFN_ERR_NOMEM, "out of memory");
    ffn_status st = FFN_OK;
    if (!exists(dir)) goto done;
    if (!is_swap_leftover(dir)) {
        st = ffn_error(FFN_ERR_IO, "%s: not removed: not an ffn run or model directory", dir);
        goto done;
    }
    st = retire(dir, NULL, 0);
done:
    free(dir);
    return st;
}

ffn_status ffn_dirswap_resolve(const char *dir_in, char **out) {
    *out = NULL;
    char *dir = strip_slashes(dir_in);
    if (!dir) return ffn_error(FFN_ERR_NOMEM, "out of memory");
    /* A link is followed for reading; when its target is gone, look for
     * the target's DIR.old. */
    (void)follow_link(&dir);
    if (ffn_dirswap_is_model_dir(dir)) {
        *out = dir;
        return FFN_OK;
    }
    char *old = ffn_path_join(dir, "", OLD_SUFFIX);
    if (old && !exists(dir) && is_real_dir(old) && ffn_dirswap_is_model_dir(old)) {
        free(dir);
        *out = old;
        return FFN_OK;
    }
    free(old);
    ffn_status st;
    if (!exists(dir))
        st = ffn_error(FFN_ERR_IO, "%s: no such directory", dir);
    else
        st = ffn_error(FFN_ERR_MISSING,
                       "%s: not an ffn run or model directory (expected config.json and "
                       "model.safetensors)",
                       dir);
    free(dir);
    return st;
}

/* ---- the lock ------------------------------------------------------------------ */

ffn_status ffn_dirlock_take(const char *dir_in, ffn_dirlock *lock) {
    lock->fd = -1;
    lock->path = NULL;
    char *dir = NULL;
    ffn_status st = ffn_dirswap_target(dir_in, &dir);
    if (st != FFN_OK) return st;
    char *parent = parent_of(dir);
    char *name = parent ? ffn_path_join(".", base_of(dir), ".lock") : NULL;
    char *path = name ? ffn_path_join(parent, "/", name) : NULL;
    free(name);
    free(parent);
    if (!path) {
        free(dir);
        return ffn_error(FFN_ERR_NOMEM, "out of memory");
    }
    /* Retry when the file was removed between our open and our flock (its
     * holder released it): the lock must be on the file the path names. */
    for (int attempt = 0; attempt < 8; attempt++) {
        int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0) {
            char *parent_dir = parent_of(dir);
            if (errno == ENOENT && parent_dir && !exists(parent_dir))
                st = ffn_error(FFN_ERR_IO, "%s: the parent directory %s does not exist", dir,
                               parent_dir);
            else
                st = ffn_error(FFN_ERR_IO, "%s: cannot create the lock file %s: %s", dir, path,
                               strerror(errno));
            free(parent_dir);
            break;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int err = errno;
            char buf[32] = {0};
            ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
            close(fd);
            long pid = n > 0 ? strtol(buf, NULL, 10) : 0;
            if (err == EWOULDBLOCK) {
                if (pid > 0)
                    st = ffn_error(FFN_ERR_IO,
                                   "%s: another ffn process (pid %ld) is writing it (lock %s)",
                                   dir, pid, path);
                else
                    st = ffn_error(FFN_ERR_IO, "%s: another ffn process is writing it (lock %s)",
                                   dir, path);
            } else {
                st = ffn_error(FFN_ERR_IO, "%s: cannot lock %s: %s", dir, path, strerror(err));
            }
            break;
        }
        struct stat a, b;
        if (fstat(fd, &a) != 0 || lstat(path, &b) != 0 || a.st_ino != b.st_ino ||
            a.st_dev != b.st_dev) {
            close(fd);
            continue;
        }
        char buf[32];
        int n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
        if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)n, 0) != n) {
            /* the pid is only for the message of a second process */
        }
        lock->fd = fd;
        lock->path = path;
        path = NULL;
        st = FFN_OK;
        break;
    }
    if (st == FFN_OK && lock->fd < 0)
        st = ffn_error(FFN_ERR_IO, "%s: the lock file keeps changing; try again", dir);
    free(path);
    free(dir);
    return st;
}

void ffn_dirlock_release(ffn_dirlock *lock) {
    if (!lock || lock->fd < 0) return;
    if (lock->path) (void)unlink(lock->path);
    close(lock->fd);
    free(lock->path);
    lock->fd = -1;
    lock->path = NULL;
}
