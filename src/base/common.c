/* common.c -- status strings, the thread-local error message, the context,
 * aligned allocation. */
#include "base/common.h"
#include "base/release.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static _Thread_local char last_error[2048];

const char *ffn_version(void) { return FFN_VERSION_STRING; }

const char *ffn_status_str(ffn_status status) {
    static const char *const names[] = {[FFN_OK] = "ok",
        [FFN_ERR_INVALID_ARG] = "invalid argument", [FFN_ERR_CONFIG] = "config error",
        [FFN_ERR_IO] = "i/o error", [FFN_ERR_FORMAT] = "format error",
        [FFN_ERR_SHAPE] = "shape mismatch", [FFN_ERR_MISSING] = "missing",
        [FFN_ERR_NOMEM] = "out of memory", [FFN_ERR_OVERFLOW] = "size overflow",
        [FFN_ERR_UNSUPPORTED] = "unsupported", [FFN_ERR_WORKSPACE] = "workspace too small",
        [FFN_ERR_INTERNAL] = "internal error", [FFN_ERR_INTERRUPTED] = "interrupted"};
    return FFN_ENUM_NAME(names, status, "unknown status");
}

const char *ffn_last_error(void) { return last_error; }

char *ffn_escape_controls(char *dst, size_t cap, const char *src) {
    static const char hex[] = "0123456789abcdef";
    if (!dst || cap == 0) return dst;
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)(src ? src : ""); *p; p++) {
        const int c1 = p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f;
        if (*p >= 0x20 && *p != 0x7f && !c1) {
            if (o + 1 >= cap) break;
            dst[o++] = (char)*p;
            continue;
        }
        const int n = c1 ? 2 : 1;
        if (o + 4 * (size_t)n >= cap) break;
        for (int k = 0; k < n; k++) {
            dst[o++] = '\\', dst[o++] = 'x';
            dst[o++] = hex[p[k] >> 4], dst[o++] = hex[p[k] & 15];
        }
        p += n - 1;
    }
    dst[o] = '\0';
    return dst;
}

/* Every message is stored escaped: the file-derived text in it (names,
 * keys, paths, tokens) reaches a terminal only as \xNN. */
static void set_last_error(const char *fmt, va_list ap) {
    char raw[sizeof last_error];
    vsnprintf(raw, sizeof raw, fmt, ap);
    ffn_escape_controls(last_error, sizeof last_error, raw);
}

ffn_status ffn_set_error(ffn_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_last_error(fmt, ap);
    va_end(ap);
    return status;
}

/* the library's own name for it (base/common.h), hidden */
ffn_status ffn_error(ffn_status status, const char *fmt, ...) __attribute__((alias("ffn_set_error")));

ffn_status ffn_error_prefix(ffn_status status, const char *fmt, ...) {
    char raw[1024], prefix[1024], old[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    ffn_escape_controls(prefix, sizeof prefix, raw); /* the old message already is */
    memcpy(old, last_error, sizeof old);
    size_t n = strlen(prefix);
    if (n > sizeof last_error - 3) n = sizeof last_error - 3;
    memcpy(last_error, prefix, n);
    memcpy(last_error + n, ": ", 2);
    size_t room = sizeof last_error - n - 3, m = strlen(old);
    if (m > room) m = room;
    memcpy(last_error + n + 2, old, m);
    last_error[n + 2 + m] = '\0';
    return status;
}

void *ffn_malloc_aligned(size_t bytes) {
    void *p = NULL;
    if (bytes == 0) bytes = 64;
    bytes = ffn_align64(bytes);
    if (posix_memalign(&p, 64, bytes) != 0) return NULL;
    return p;
}

void ffn_free_aligned(void *p) { free(p); }

ffn_status ffn_ctx_create(int n_threads, ffn_ctx **out) {
    if (!out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_ctx_create: out is NULL");
    *out = NULL;
    if (n_threads <= 0) {
        const char *env = getenv("FFN_NUM_THREADS");
        if (env && *env) {
            char *end = NULL;
            errno = 0;
            long v = strtol(env, &end, 10);
            if (errno || *end || v <= 0 || v > 4096)
                return ffn_error(FFN_ERR_CONFIG,
                                 "FFN_NUM_THREADS: expected a positive integer, got '%s'", env);
            n_threads = (int)v;
        } else {
            long v = sysconf(_SC_NPROCESSORS_ONLN);
            n_threads = v > 0 ? (int)v : 1;
        }
    }
    if (n_threads > 4096)
        return ffn_error(FFN_ERR_CONFIG, "threads: expected 1..4096, got %d", n_threads);
    ffn_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return ffn_error(FFN_ERR_NOMEM, "ffn_ctx_create: out of memory");
    ctx->n_threads = n_threads;
    *out = ctx;
    return FFN_OK;
}

void ffn_ctx_free(ffn_ctx *ctx) { free(ctx); }

int ffn_ctx_threads(const ffn_ctx *ctx) { return ctx ? ctx->n_threads : 1; }

void ffn_ctx_enter(const ffn_ctx *ctx) {
#ifdef _OPENMP
    int n = ffn_ctx_threads(ctx);
    if (omp_get_max_threads() != n) omp_set_num_threads(n);
#else
    (void)ctx;
#endif
}

/* ---- atomic file replacement ------------------------------------------------ */

static char *dup_suffix(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    char *r = malloc(a + b + 1);
    if (!r) return NULL;
    memcpy(r, s, a);
    memcpy(r + a, suffix, b + 1);
    return r;
}

/* Create "<path>.tmp-XXXXXX" with a random suffix, O_CREAT|O_EXCL|O_NOFOLLOW:
 * never an existing file, never through a symbolic link, a name nobody can
 * guess in advance.  Mode 0666 less the umask, like fopen's. */
static int create_unique(const char *path, char **tmp_out) {
    static const char digits[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    char *tmp = dup_suffix(path, ".tmp-XXXXXX");
    if (!tmp) {
        errno = ENOMEM;
        return -1;
    }
    char *x = tmp + strlen(tmp) - 6;
    for (int attempt = 0; attempt < 100; attempt++) {
        unsigned char r[6];
        if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
            /* no entropy source: the clock and a counter still make EXCL retries work */
            static _Thread_local uint64_t counter;
            uint64_t v = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid() << 20 ^ ++counter;
            for (int i = 0; i < 6; i++) r[i] = (unsigned char)(v >> (8 * i));
        }
        for (int i = 0; i < 6; i++) x[i] = digits[r[i] % (sizeof digits - 1)];
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0) {
            *tmp_out = tmp;
            return fd;
        }
        if (errno != EEXIST) break;
    }
    int err = errno;
    free(tmp);
    errno = err;
    return -1;
}

ffn_status ffn_atomic_open(ffn_atomic_file *af, const char *path) {
    if (!af || !path) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_atomic_open: NULL argument");
    af->f = NULL;
    af->tmp = NULL;
    af->path = dup_suffix(path, "");
    if (!af->path) return ffn_error(FFN_ERR_NOMEM, "%s: out of memory", path);
    int fd = create_unique(path, &af->tmp);
    if (fd < 0) {
        ffn_status st = ffn_error(FFN_ERR_IO, "%s: cannot create a temporary file beside it (%s.tmp-XXXXXX): %s",
                                  path, path, strerror(errno));
        ffn_atomic_abort(af);
        return st;
    }
    af->f = fdopen(fd, "wb");
    if (!af->f) {
        ffn_status st = ffn_error(FFN_ERR_IO, "%s: cannot open: %s", af->tmp, strerror(errno));
        close(fd);
        unlink(af->tmp);
        ffn_atomic_abort(af);
        return st;
    }
    return FFN_OK;
}

/* fsync the directory holding path, so that the rename itself is durable. */
static void sync_parent_dir(const char *path) {
    char *copy = dup_suffix(path, "");
    if (!copy) return;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(copy);
}

ffn_status ffn_atomic_commit(ffn_atomic_file *af) {
    if (!af || !af->f) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_atomic_commit: not open");
    ffn_status st = FFN_OK;
    int bad = ferror(af->f) != 0, err = EIO;
    if (fflush(af->f) != 0) bad = 1, err = errno;
    if (!bad && fsync(fileno(af->f)) != 0) bad = 1, err = errno;
    if (fclose(af->f) != 0 && !bad) bad = 1, err = errno;
    af->f = NULL;
    if (bad)
        st = ffn_error(FFN_ERR_IO, "%s: write failed: %s", af->tmp, strerror(err));
    else if (rename(af->tmp, af->path) != 0)
        st = ffn_error(FFN_ERR_IO, "%s: cannot rename %s into place: %s", af->path, af->tmp,
                       strerror(errno));
    else
        sync_parent_dir(af->path);
    if (st != FFN_OK) unlink(af->tmp);
    free(af->tmp);
    free(af->path);
    af->tmp = af->path = NULL;
    return st;
}

void ffn_atomic_abort(ffn_atomic_file *af) {
    if (!af) return;
    if (af->f) fclose(af->f);
    if (af->tmp && af->f) unlink(af->tmp);
    free(af->tmp);
    free(af->path);
    af->f = NULL;
    af->tmp = af->path = NULL;
}

void ffn_release_floats(float *p, int64_t n) { ffn_give_back_floats(p, n); }
