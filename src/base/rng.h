/* rng.h -- the library's one pseudo-random generator (splitmix64,
 * xoshiro256**).  It is public, in include/ffn/rng.h, so that the tools draw
 * from the same generator; this header stays for the library's includes. */
#ifndef FFN_RNG_H
#define FFN_RNG_H

#include "ffn/rng.h"

#endif /* FFN_RNG_H */
