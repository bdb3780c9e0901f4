/* rope.c -- RoPE frequencies of every family: the head and rotary dims a
 * config implies, the validation of rope_scaling, and the cos/sin tables
 * of the plain, linear, dynamic (NTK), llama3 and yarn schemes (formulas in
 * include/ffn/model.h, after transformers' modeling_rope_utils.py).  The
 * rotation itself is ffn_rope_apply_dims in attention.c.
 *
 * Letters: Dh head dim, R rotary dim (R <= Dh, even), O the original
 * context of the scaling, S the sequence length a dynamic table is for. */
#include "nn/model_internal.h"
#include "ffn/model.h"

#include <math.h>

int64_t ffn_cfg_head_dim(const ffn_model_config *c) {
    if (c->head_dim > 0) return c->head_dim;
    return c->num_attention_heads > 0 ? c->hidden_size / c->num_attention_heads : 0;
}

int64_t ffn_cfg_rotary_dim(const ffn_model_config *c) {
    const int64_t dh = ffn_cfg_head_dim(c);
    const double f = c->partial_rotary_factor > 0.0 ? c->partial_rotary_factor : 1.0;
    return (int64_t)((double)dh * f); /* int() truncation, as Hugging Face */
}

static int64_t original_ctx(const ffn_model_config *c) {
    const int64_t o = c->rope_scaling.original_max_position_embeddings;
    return o > 0 ? o : c->max_position_embeddings;
}

#define RS_ERR(...) ffn_error(FFN_ERR_CONFIG, "model config: rope_scaling." __VA_ARGS__)

ffn_status ffn_rope_scaling_validate(const ffn_model_config *c) {
    const ffn_rope_scaling *r = &c->rope_scaling;
    if ((int)r->type < FFN_ROPE_SCALING_NONE || (int)r->type > FFN_ROPE_SCALING_LONGROPE)
        return RS_ERR("rope_type: unknown value %d", (int)r->type);
    if (r->type == FFN_ROPE_SCALING_NONE) return FFN_OK;
    if (!(r->factor >= 1.0) || !isfinite(r->factor) || r->factor > 1e6)
        return RS_ERR("factor: expected 1 <= factor <= 1e6, got %g", r->factor);
    if (r->original_max_position_embeddings < 0 || r->original_max_position_embeddings > ((int64_t)1 << 31))
        return RS_ERR("original_max_position_embeddings: expected 0..2^31, got %lld",
                      (long long)r->original_max_position_embeddings);
    if (ffn_cfg_rotary_dim(c) < 4 && r->type == FFN_ROPE_SCALING_DYNAMIC)
        return RS_ERR("rope_type dynamic: the rotary dim %lld must be at least 4",
                      (long long)ffn_cfg_rotary_dim(c));
    if (r->type == FFN_ROPE_SCALING_LLAMA3) {
        if (r->original_max_position_embeddings < 1)
            return RS_ERR("original_max_position_embeddings: llama3 needs it (>= 1), got %lld",
                          (long long)r->original_max_position_embeddings);
        if (!(r->low_freq_factor > 0.0) || !(r->high_freq_factor > r->low_freq_factor) ||
            !isfinite(r->high_freq_factor))
            return RS_ERR("high_freq_factor: llama3 needs 0 < low_freq_factor < high_freq_factor, "
                          "got low %g, high %g", r->low_freq_factor, r->high_freq_factor);
    }
    if (r->type == FFN_ROPE_SCALING_LONGROPE) {
        const int64_t half = ffn_cfg_rotary_dim(c) / 2;
        if (r->original_max_position_embeddings < 1)
            return RS_ERR("original_max_position_embeddings: longrope needs it (>= 1), got %lld",
                          (long long)r->original_max_position_embeddings);
        if (r->n_factors != half)
            return RS_ERR("long_factor: %lld factors in each of long_factor and short_factor, "
                          "expected %lld (half the rotary dim %lld)", (long long)r->n_factors,
                          (long long)half, (long long)ffn_cfg_rotary_dim(c));
        for (int64_t j = 0; j < half; j++)
            if (!(r->long_factor[j] > 0.0f) || !isfinite(r->long_factor[j]) ||
                !(r->short_factor[j] > 0.0f) || !isfinite(r->short_factor[j]))
                return RS_ERR("long_factor: element %lld is %g (short_factor %g): expected positive "
                              "numbers", (long long)j, (double)r->long_factor[j],
                              (double)r->short_factor[j]);
        if (!(r->attention_factor >= 0.0) || !isfinite(r->attention_factor) || r->attention_factor > 1e3)
            return RS_ERR("attention_factor: expected 0 (derived) or a positive number, got %g",
                          r->attention_factor);
    }
    if (r->type == FFN_ROPE_SCALING_YARN) {
        const double bf = r->beta_fast > 0 ? r->beta_fast : 32, bs = r->beta_slow > 0 ? r->beta_slow : 1;
        if (!isfinite(bf) || !isfinite(bs) || bf < bs || bf > 1e6)
            return RS_ERR("beta_fast: yarn needs beta_fast >= beta_slow > 0, got %g and %g", bf, bs);
        if (!(r->attention_factor >= 0.0) || !isfinite(r->attention_factor) || r->attention_factor > 1e3)
            return RS_ERR("attention_factor: expected 0 (derived) or a positive number, got %g",
                          r->attention_factor);
        if (!(r->mscale >= 0.0) || !(r->mscale_all_dim >= 0.0) || !isfinite(r->mscale) ||
            !isfinite(r->mscale_all_dim))
            return RS_ERR("mscale: expected numbers >= 0, got %g and %g", r->mscale, r->mscale_all_dim);
    }
    return FFN_OK;
}

int ffn_rope_is_dynamic(const ffn_model_config *c) {
    return c->rope_scaling.type == FFN_ROPE_SCALING_DYNAMIC;
}

static double yarn_mscale(double scale, double m) {
    return scale <= 1.0 ? 1.0 : 0.1 * m * log(scale) + 1.0;
}

double ffn_rope_attention_factor(const ffn_model_config *c) {
    const ffn_rope_scaling *r = &c->rope_scaling;
    if (r->type == FFN_ROPE_SCALING_LONGROPE) {
        if (r->attention_factor > 0.0) return r->attention_factor;
        const double O = (double)original_ctx(c);
        return r->factor <= 1.0 || O <= 1.0 ? 1.0 : sqrt(1.0 + log(r->factor) / log(O));
    }
    if (r->type != FFN_ROPE_SCALING_YARN) return 1.0;
    if (r->attention_factor > 0.0) return r->attention_factor;
    if (r->mscale > 0.0 && r->mscale_all_dim > 0.0)
        return yarn_mscale(r->factor, r->mscale) / yarn_mscale(r->factor, r->mscale_all_dim);
    return yarn_mscale(r->factor, 1.0);
}

/* yarn's dimension of `rotations` full turns over the original context. */
static double yarn_dim(double rotations, double R, double theta, double O) {
    return R * log(O / (rotations * 2.0 * M_PI)) / (2.0 * log(theta));
}

double ffn_rope_inv_freq(const ffn_model_config *c, int64_t j, int64_t seq_len) {
    const ffn_rope_scaling *r = &c->rope_scaling;
    const double R = (double)ffn_cfg_rotary_dim(c), O = (double)original_ctx(c);
    double theta = c->rope_theta;
    if (r->type == FFN_ROPE_SCALING_DYNAMIC) {
        const double S = seq_len > (int64_t)O ? (double)seq_len : O;
        theta *= pow(r->factor * S / O - (r->factor - 1.0), R / (R - 2.0));
    }
    const double f = pow(theta, -2.0 * (double)j / R);
    switch (r->type) {
    case FFN_ROPE_SCALING_LINEAR: return f / r->factor;
    case FFN_ROPE_SCALING_LONGROPE: /* the context decides, as llama.cpp's n_ctx */
        return f / (double)(seq_len > (int64_t)O ? r->long_factor[j] : r->short_factor[j]);
    case FFN_ROPE_SCALING_LLAMA3: {
        const double lo = r->low_freq_factor, hi = r->high_freq_factor, w = 2.0 * M_PI / f;
        if (w < O / hi) return f;
        if (w > O / lo) return f / r->factor;
        const double s = (O / w - lo) / (hi - lo);
        return (1.0 - s) * f / r->factor + s * f;
    }
    case FFN_ROPE_SCALING_YARN: {
        const double bf = r->beta_fast > 0 ? r->beta_fast : 32, bs = r->beta_slow > 0 ? r->beta_slow : 1;
        double lo = floor(yarn_dim(bf, R, c->rope_theta, O));
        double hi = ceil(yarn_dim(bs, R, c->rope_theta, O));
        if (lo < 0) lo = 0;
        if (hi > R - 1) hi = R - 1;
        if (lo == hi) hi += 0.001;
        double ramp = ((double)j - lo) / (hi - lo);
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        const double extrapolate = 1.0 - ramp;
        return f / r->factor * (1.0 - extrapolate) + f * extrapolate;
    }
    default: return f;
    }
}

void ffn_rope_fill(const ffn_model_config *c, int64_t seq_len, int64_t p0, int64_t p1,
                   float *cos_t, float *sin_t) {
    const int64_t half = ffn_cfg_rotary_dim(c) / 2;
    const double af = ffn_rope_attention_factor(c);
    for (int64_t j = 0; j < half; j++) {
        const double f = ffn_rope_inv_freq(c, j, seq_len);
        for (int64_t p = p0; p < p1; p++) {
            const double a = (double)p * f;
            cos_t[p * half + j] = (float)(cos(a) * af);
            sin_t[p * half + j] = (float)(sin(a) * af);
        }
    }
}
