/* act_avx512.c -- act_impl.h compiled for AVX-512. */
#define ACT_SFX avx512
#include "kernels/act_impl.h"
