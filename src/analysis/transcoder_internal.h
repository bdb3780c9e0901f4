/* transcoder_internal.h -- the layout of ffn_transcoder, shared by
 * transcoder.c (the layer) and transcoder_model.c (the model's side).
 * Not installed.  Letters as in transcoder.c. */
#ifndef FFN_ANALYSIS_TRANSCODER_INTERNAL_H
#define FFN_ANALYSIS_TRANSCODER_INTERNAL_H

#include "ffn/transcoder.h"

struct ffn_transcoder {
    ffn_tc_config cfg;
    /* one block each: W_enc (Fp, D), b_enc (Fp), W_dec (Fp, D), b_dec (D),
     * W_skip (D, D) at these offsets (-1: none) */
    int64_t n_params, off_W_enc, off_b_enc, off_W_dec, off_b_dec, off_W_skip;
    float *p, *g, *m, *v;
    int64_t step, tokens;  /* Adam steps, training rows seen */
    int64_t *last_fired;   /* (Fp) `tokens` after the batch a feature last fired in */
    int b_dec_unset;       /* a new layer: b_dec from the first batch */
    int scale_unset;       /* a new layer: the encoder's scale from the first batch */
    int has_state;         /* loaded with a training state */
    int have_grads;
    /* the dense products so far (ffn_tc_products): FLOPs (2 a multiply-add), seconds */
    double prod_flops, prod_seconds;
    /* the last batch (for the step and the counters) */
    int64_t last_n, last_ka;
    /* row scratch, cap_n rows */
    int64_t cap_n;
    float *pre;            /* (n, Fp) */
    float *yhat, *dy;      /* (n, D) */
    float *ehat, *de;      /* (n, D) AuxK */
    int32_t *idx;          /* (n, k) */
    float *val, *dval;     /* (n, k) activations and d loss / d pre there */
    int32_t *aidx;         /* (n, ka) */
    float *aval, *daval;   /* (n, ka) */
    int64_t *fstart;       /* (Fp + 1) the entries of feature j: fstart[j]..fstart[j+1] */
    int32_t *entries;      /* (n (k + ka)) e < n k: main entry e; else AuxK entry e − n k */
    unsigned char *dead;   /* (Fp) */
};

ffn_status tc_alloc(const ffn_tc_config *cfg, ffn_transcoder **out);

#endif
