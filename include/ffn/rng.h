/* ffn/rng.h -- the library's one pseudo-random generator, public so that
 * tools and users draw the same numbers the library draws: splitmix64 (a
 * tiny well-mixed stream, also used to seed) and xoshiro256** over four
 * words.  Integer arithmetic only, so a seed gives the same numbers on every
 * machine: the built-in corpus, weight initialisation, batch order and the
 * probes' shuffles all depend on that.
 *
 *     ffn_rng r;  ffn_rng_seed(&r, 42);
 *     uint64_t k = ffn_rng_below(&r, 10);     // uniform in [0, 10)
 *     double z = ffn_rng_normal(&r);           // N(0, 1)
 */
#ifndef FFN_PUBLIC_RNG_H
#define FFN_PUBLIC_RNG_H
#pragma GCC visibility push(default)

#include <math.h>
#include <stdint.h>

static inline uint64_t ffn_splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* xoshiro256**: the whole state is four words (a checkpoint saves them). */
typedef struct ffn_rng {
    uint64_t s[4];
} ffn_rng;

static inline void ffn_rng_seed(ffn_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = ffn_splitmix64(&seed);
}

static inline uint64_t ffn_rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t ffn_rng_next(ffn_rng *r) {
    uint64_t *s = r->s;
    uint64_t out = ffn_rotl64(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = ffn_rotl64(s[3], 45);
    return out;
}

/* Uniform in [0, n), n >= 1 (rejection sampling: no modulo bias). */
static inline uint64_t ffn_rng_below(ffn_rng *r, uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n; /* values >= limit would bias */
    for (;;) {
        uint64_t x = ffn_rng_next(r);
        if (x < limit) return x % n;
    }
}

/* Uniform in [0, 1) with 24 random bits (exactly representable in float). */
static inline float ffn_rng_float(ffn_rng *r) {
    return (float)(ffn_rng_next(r) >> 40) * 0x1p-24f;
}

/* Standard normal (Box-Muller on two draws of 53 bits; the second value of
 * the pair is not kept, so every call costs two draws). */
static inline double ffn_rng_normal(ffn_rng *r) {
    double u1 = ((double)(ffn_rng_next(r) >> 11) + 1.0) * 0x1.0p-53; /* (0, 1] */
    double u2 = (double)(ffn_rng_next(r) >> 11) * 0x1.0p-53;         /* [0, 1) */
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#pragma GCC visibility pop
#endif /* FFN_PUBLIC_RNG_H */
