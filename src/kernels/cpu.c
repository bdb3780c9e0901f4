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

static int detect_features(void) {
    __builtin_cpu_init();
    unsigned f = 0;
    if (__builtin_cpu_supports("avx512vnni")) f |= FFN_CPU_VNNI;
    if (__builtin_cpu_supports("avx512vbmi")) f |= FFN_CPU_VBMI;
    /* __builtin_cpu_supports("avx512bf16") is missing from older
     * compilers: CPUID leaf 7 subleaf 1, EAX bit 5 (the OS saving the zmm
     * state is implied by the AVX-512 level, which callers check) */
    unsigned a = 0, b = 0, c = 0, d = 0, max = 0;
    __asm__ volatile("cpuid" : "=a"(max), "=b"(b), "=c"(c), "=d"(d) : "a"(0), "c"(0));
    if (max >= 7) {
        __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(1));
        if ((a >> 5) & 1) f |= FFN_CPU_BF16;
    }
    return (int)f;
}

/* Each is detected once and cached.  Threads may race to detect it first;
 * each computes the same value, and the atomic makes the race defined.
 * Relaxed order suffices: the int is all that is published, and a relaxed
 * load is a plain load on x86, so dispatching costs nothing. */
static int cached(_Atomic int *slot, int (*detect_fn)(void)) {
    int v = atomic_load_explicit(slot, memory_order_relaxed);
    if (v < 0) {
        v = detect_fn();
        atomic_store_explicit(slot, v, memory_order_relaxed);
    }
    return v;
}

int ffn_simd(void) {
    static _Atomic int level = -1;
    return cached(&level, detect);
}

unsigned ffn_cpu_features(void) {
    static _Atomic int features = -1;
    return (unsigned)cached(&features, detect_features);
}

const char *ffn_simd_level(void) {
    switch (ffn_simd()) {
    case FFN_SIMD_AVX512: return "avx512";
    case FFN_SIMD_AVX2: return "avx2";
    default: return "scalar";
    }
}
