/* check.h -- the smallest test harness that can fail: CHECK records a
 * failure with file:line and a message, and check_done() returns the exit
 * code (non-zero when anything failed) after printing the counts. */
#ifndef FFN_CHECK_H
#define FFN_CHECK_H

#include <stdio.h>

static int check_failures_ = 0, check_count_ = 0;

#define CHECK(cond, ...)                                                             \
    do {                                                                             \
        check_count_++;                                                              \
        if (!(cond)) {                                                               \
            check_failures_++;                                                       \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);          \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
        }                                                                            \
    } while (0)

static inline int check_done(const char *name) {
    printf("%s: %d checks, %d failed\n", name, check_count_, check_failures_);
    return check_failures_ ? 1 : 0;
}

#endif
