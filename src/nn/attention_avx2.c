/* attention_avx2.c -- attention_impl.h compiled for AVX2 + FMA. */
#define ATTN_SFX avx2
#include "nn/attention_impl.h"
