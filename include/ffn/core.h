/* ffn/core.h -- status codes, error messages, version, execution context.
 *
 * Part of the public API; include <ffn.h>, not this file.
 *
 * Errors are values: every fallible call returns an ffn_status.  On failure
 * the library also records a message with context (file, tensor or field,
 * expected against found) in a thread-local buffer, read with
 * ffn_last_error().  The library never exits and never aborts on bad input.
 */
#ifndef FFN_CORE_H
#define FFN_CORE_H
#pragma GCC visibility push(default) /* what this header declares is the exported API */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FFN_VERSION_MAJOR 0
#define FFN_VERSION_MINOR 1
#define FFN_VERSION_PATCH 0
#define FFN_VERSION_STRING "0.1.0"

/* The runtime version, "MAJOR.MINOR.PATCH". */
const char *ffn_version(void);

typedef enum ffn_status {
    FFN_OK = 0,
    FFN_ERR_INVALID_ARG,  /* a bad argument to an API call (NULL, n < 0, ...) */
    FFN_ERR_CONFIG,       /* a bad configuration value (field and value named) */
    FFN_ERR_IO,           /* open/read/write/rename failed (errno text given) */
    FFN_ERR_FORMAT,       /* a file is malformed (what and where named) */
    FFN_ERR_SHAPE,        /* a tensor's shape disagrees with what is expected */
    FFN_ERR_MISSING,      /* a required tensor or field is absent */
    FFN_ERR_NOMEM,        /* allocation failed */
    FFN_ERR_OVERFLOW,     /* a size computation overflows 64 bits */
    FFN_ERR_UNSUPPORTED,  /* a valid request this build cannot serve */
    FFN_ERR_WORKSPACE,    /* the caller's workspace is too small */
    FFN_ERR_INTERNAL,     /* a bug: please report */
    FFN_ERR_INTERRUPTED   /* a long run was stopped by a signal (state saved) */
} ffn_status;

/* A short constant name for a status ("ok", "config error", ...). */
const char *ffn_status_str(ffn_status status);

/* The message recorded by the last failing call in this thread ("" if none).
 * The pointer stays valid until the next failing call in the same thread. */
const char *ffn_last_error(void);

/* Record a message for ffn_last_error() and return `status`: for code built
 * on the library (libffn_dist, a program's own layers), so its failures
 * read like the library's.  The message is formatted as by printf. */
ffn_status ffn_set_error(ffn_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Copy the string src to dst (at most cap bytes, with the terminating NUL;
 * cut at a whole escape) with every control character written as \xNN:
 * C0 (newline and tab too), DEL, and C1 (U+0080..U+009F as its two UTF-8
 * bytes, \xc2\x9b).  Text a file chose (a tensor name, a key, a token, a
 * path) then cannot drive the terminal a message is printed on.  Every
 * message ffn_last_error() returns has been through it; programs print
 * their own messages with file-derived text through it too.  Returns dst. */
char *ffn_escape_controls(char *dst, size_t cap, const char *src);

/* ---- execution context ------------------------------------------------
 * Threads hang off an explicit context, never off hidden global state.
 * n_threads <= 0 means: the FFN_NUM_THREADS environment variable if set,
 * else the number of online cores.  Results are bitwise reproducible from
 * run to run at a given thread count; see docs/ARCHITECTURE.md for which
 * results also agree across thread counts. */
typedef struct ffn_ctx ffn_ctx;

ffn_status ffn_ctx_create(int n_threads, ffn_ctx **out);
void ffn_ctx_free(ffn_ctx *ctx); /* NULL is a no-op */
int ffn_ctx_threads(const ffn_ctx *ctx);

/* The SIMD level the kernels dispatch to on this CPU: "avx512", "avx2" or
 * "scalar".  FFN_SIMD=scalar|avx2|avx512 in the environment caps it (for
 * tests and comparisons). */
const char *ffn_simd_level(void);

/* ---- atomic file replacement -------------------------------------------
 * How ffn writes a file: into a new "<path>.tmp-XXXXXX" beside it (a random
 * suffix, created with O_EXCL|O_NOFOLLOW: never an existing file, never
 * through a symbolic link), then commit flushes,
 * fsyncs, closes and renames it over path and fsyncs the directory, so a
 * failure or a crash leaves the old file or the new one, whole -- never a
 * truncated one.
 *     ffn_atomic_file af;
 *     if (ffn_atomic_open(&af, "out.txt") != FFN_OK) ...;
 *     fprintf(af.f, ...);
 *     if (ffn_atomic_commit(&af) != FFN_OK) ...;   // or ffn_atomic_abort(&af)
 * Both commit and abort remove the temporary file on failure and release
 * everything; abort after commit (or twice) is a no-op. */
typedef struct ffn_atomic_file {
    FILE *f;    /* write here */
    char *tmp;  /* "<path>.tmp-XXXXXX" */
    char *path; /* the target */
} ffn_atomic_file;

ffn_status ffn_atomic_open(ffn_atomic_file *af, const char *path);
ffn_status ffn_atomic_commit(ffn_atomic_file *af);
void ffn_atomic_abort(ffn_atomic_file *af);

/* 1 when `dir` is a directory with no entry but "." and "..", else 0 (not
 * a directory, unreadable, or not empty).  Outputs use it to tell a fresh
 * directory from one holding a user's files. */
int ffn_dir_is_empty(const char *dir);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif /* FFN_CORE_H */
