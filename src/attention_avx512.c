/* attention_avx512.c -- attention_impl.h compiled for AVX-512. */
#define ATTN_SFX avx512
#include "attention_impl.h"
