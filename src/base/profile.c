/* profile.c -- the step profile's clock and bookkeeping (include/ffn/profile.h).
 * The parts are charged by the model (src/nn/model.c) and the trainer
 * (src/train/train.c); this file only reads the clock and adds. */
#include "ffn/profile.h"

#include <string.h>
#include <time.h>

const char *ffn_profile_part_name(ffn_profile_part part) {
    switch (part) {
    case FFN_PROFILE_FFN_FORWARD: return "ffn_forward";
    case FFN_PROFILE_FFN_BACKWARD: return "ffn_backward";
    case FFN_PROFILE_ATTN_PROJ: return "attn_proj";
    case FFN_PROFILE_ATTN_CORE: return "attn_core";
    case FFN_PROFILE_NORM: return "norm";
    case FFN_PROFILE_EMBED_HEAD: return "embed_head";
    case FFN_PROFILE_OPTIMIZER: return "optimizer";
    case FFN_PROFILE_DATA: return "data";
    case FFN_PROFILE_OTHER: return "other";
    case FFN_PROFILE_WEIGHT_PACK: return "weight_pack";
    case FFN_PROFILE_PARTS: break;
    }
    return "?";
}

void ffn_profile_reset(ffn_profile *p) {
    if (p) memset(p, 0, sizeof *p);
}

double ffn_profile_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void ffn_profile_start(ffn_profile *p) {
    if (p) p->mark = ffn_profile_now();
}

double ffn_profile_charge(ffn_profile *p, ffn_profile_part part) {
    if (!p || (unsigned)part >= FFN_PROFILE_PARTS) return 0.0;
    const double now = ffn_profile_now(), dt = now - p->mark;
    p->seconds[part] += dt;
    p->mark = now;
    return dt;
}
