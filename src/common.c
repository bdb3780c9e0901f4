/* common.c -- status strings, the thread-local error message, the context,
 * aligned allocation. */
#include "common.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static _Thread_local char last_error[2048];

const char *ffn_version(void) { return FFN_VERSION_STRING; }

const char *ffn_status_str(ffn_status status) {
    switch (status) {
    case FFN_OK: return "ok";
    case FFN_ERR_INVALID_ARG: return "invalid argument";
    case FFN_ERR_CONFIG: return "config error";
    case FFN_ERR_IO: return "i/o error";
    case FFN_ERR_FORMAT: return "format error";
    case FFN_ERR_SHAPE: return "shape mismatch";
    case FFN_ERR_MISSING: return "missing";
    case FFN_ERR_NOMEM: return "out of memory";
    case FFN_ERR_OVERFLOW: return "size overflow";
    case FFN_ERR_UNSUPPORTED: return "unsupported";
    case FFN_ERR_WORKSPACE: return "workspace too small";
    case FFN_ERR_INTERNAL: return "internal error";
    case FFN_ERR_INTERRUPTED: return "interrupted";
    }
    return "unknown status";
}

const char *ffn_last_error(void) { return last_error; }

ffn_status ffn_error(ffn_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

ffn_status ffn_error_prefix(ffn_status status, const char *fmt, ...) {
    char prefix[1024], old[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
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
