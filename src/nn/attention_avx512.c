/* attention_avx512.c -- attention_impl.h compiled for AVX-512. */
#define ATTN_SFX avx512
#include "nn/attention_impl.h"
