/* check.h -- the smallest test harness that can fail: CHECK records a
 * failure with file:line and a message, and check_done() returns the exit
 * code (non-zero when anything failed) after printing the counts. */
#ifndef FFN_CHECK_H
#define FFN_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* A line that tests/run.sh prints beside the test's PASS/FAIL: what the
 * test checked where the machine decides (an instruction set it lacks, so
 * the refusal was tested instead).  Nothing is skipped silently. */
#define check_note(...)                                                              \
    do {                                                                             \
        printf("note: ");                                                            \
        printf(__VA_ARGS__);                                                         \
        putchar('\n');                                                              \
    } while (0)

/* The instruction sets a test may need, read from CPUID here (not from the
 * library under test) and capped by FFN_SIMD=scalar|avx2|avx512 the way
 * src/kernels/cpu.c caps the library: "avx2" (with FMA), "avx512" (F, BW,
 * VL, DQ), "avx512bf16" and "avx512vnni" (each also needing "avx512"). */
static inline int check_cpu_has(const char *isa) {
    __builtin_cpu_init();
    const int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const int avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                       __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                       __builtin_cpu_supports("avx512dq");
    const char *cap = getenv("FFN_SIMD");
    const int level_cap = !cap ? 2 : !strcmp(cap, "scalar") ? 0 : !strcmp(cap, "avx2") ? 1 : 2;
    if (!strcmp(isa, "avx2")) return avx2 && level_cap >= 1;
    if (!avx512 || level_cap < 2) return 0;
    if (!strcmp(isa, "avx512")) return 1;
    unsigned a = 0, b = 0, c = 0, d = 0, max = 0;
    __asm__ volatile("cpuid" : "=a"(max), "=b"(b), "=c"(c), "=d"(d) : "a"(0), "c"(0));
    if (max < 7) return 0;
    if (!strcmp(isa, "avx512vnni")) {
        __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
        return (int)((c >> 11) & 1); /* leaf 7.0 ECX bit 11 */
    }
    if (!strcmp(isa, "avx512bf16")) {
        __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(1));
        return (int)((a >> 5) & 1); /* leaf 7.1 EAX bit 5 */
    }
    return 0;
}

static inline int check_done(const char *name) {
    printf("%s: %d checks, %d failed\n", name, check_count_, check_failures_);
    return check_failures_ ? 1 : 0;
}

#endif
