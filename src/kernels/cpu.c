/* cpu.c -- run-time choice of the SIMD level.  Kernels exist for AVX-512,
 * AVX2+FMA and a scalar baseline; the highest level the CPU supports is
 * used, capped by FFN_SIMD=scalar|avx2|avx512 in the environment. */
#include "kernels/kernels.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static int detect(void) {
    __builtin_cpu_init();
    int level = FFN_SIMD_SCALAR;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) level = FFN_SIMD_AVX2;
    if (level == FFN_SIMD_AVX2 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq"))
        level = FFN_SIMD_AVX512;
    const char *cap = getenv("FFN_SIMD");
    if (cap) {
        int want = level;
        if (!strcmp(cap, "scalar")) want = FFN_SIMD_SCALAR;
        else if (!strcmp(cap, "avx2")) want = FFN_SIMD_AVX2;
        else if (!strcmp(cap, "avx512")) want = FFN_SIMD_AVX512;
        if (want < level) level = want;
    }
    return level;
}

/* The level is detected once and cached.  Threads may race to detect it
 * first; each computes the same value, and the atomic makes the race
 * defined.  Relaxed order suffices: the int is all that is published, and a
 * relaxed load is a plain load on x86, so dispatching costs nothing. */
int ffn_simd(void) {
    static _Atomic int cached = -1;
    int level = atomic_load_explicit(&cached, memory_order_relaxed);
    if (level < 0) {
        level = detect();
        atomic_store_explicit(&cached, level, memory_order_relaxed);
    }
    return level;
}

const char *ffn_simd_level(void) {
    switch (ffn_simd()) {
    case FFN_SIMD_AVX512: return "avx512";
    case FFN_SIMD_AVX2: return "avx2";
    default: return "scalar";
    }
}
