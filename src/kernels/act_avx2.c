/* act_avx2.c -- act_impl.h compiled for AVX2 + FMA. */
#define ACT_SFX avx2
#include "kernels/act_impl.h"
