/* model_internal.h -- the pieces of the decoder that are not public: RMSNorm
 * (src/nn/norm.c), RoPE and causal attention with grouped KV heads
 * (src/nn/attention.c).  Used by src/nn/model.c and the unit tests.  Not installed.
 *
 * Letters: N tokens (rows), D width, B batch, T query positions per
 * sequence, S key positions per sequence, H query heads, G key/value heads,
 * Dh head dim.
 *
 * Conventions as everywhere: forward writes its outputs; backward writes dx
 * unless the name says it accumulates, and always accumulates (+=) into
 * parameter gradients. */
#ifndef FFN_MODEL_INTERNAL_H
#define FFN_MODEL_INTERNAL_H

#include "base/common.h"
#include "ffn/layer.h"
#include "ffn/model.h"
#include "ffn/moe.h"

#include <stdio.h>

/* ---- RMSNorm (src/nn/norm.c) ----------------------------------------------
 * y = x · rstd · w,  rstd = 1 / sqrt(mean(x²) + eps), per row of D.
 * Rows are independent; the loop over rows runs on the calling OpenMP
 * team size.  rstd (N) is saved for backward (may be NULL in inference). */
void ffn_rmsnorm_forward(float *y, float *rstd, const float *x, const float *w, int64_t n,
                         int64_t d, float eps);
/* dx (N, D) += ∂/∂x, dw (D) += ∂/∂w (dw may be NULL), for L = Σ y ⊙ dy:
 * accumulates into dx, as its name says (the model sums the residual
 * stream's gradient through it).  The dw reduction runs over rows in
 * order: bitwise reproducible at any thread count. */
void ffn_rmsnorm_backward_accumulate(float *dx, float *dw, const float *dy, const float *x,
                                     const float *w, const float *rstd, int64_t n, int64_t d);

/* The same with the weight (offset + w) (Gemma: offset 1). */
void ffn_rmsnorm_forward_offset(float *y, float *rstd, const float *x, const float *w,
                                float offset, int64_t n, int64_t d, float eps);
void ffn_rmsnorm_backward_offset(float *dx, float *dw, const float *dy, const float *x,
                                 const float *w, float offset, const float *rstd, int64_t n,
                                 int64_t d);

/* ---- LayerNorm with bias (src/nn/layernorm.c) -----------------------------
 * y = (x − mean)·rstd·w + b per row; rstd (N) saved (may be NULL in
 * inference).  Backward accumulates into dx, dw and db (dw, db may be
 * NULL), the mean recomputed from x. */
void ffn_layernorm_forward(float *y, float *rstd, const float *x, const float *w, const float *b,
                           int64_t n, int64_t d, float eps);
void ffn_layernorm_backward_accumulate(float *dx, float *dw, float *db, const float *dy,
                                       const float *x, const float *w, const float *rstd,
                                       int64_t n, int64_t d);

/* ---- RoPE (src/nn/attention.c) --------------------------------------------
 * Tables cos/sin (max_pos, Dh/2): angle(pos, j) = pos · theta^(-2j/Dh),
 * computed in double. */
void ffn_rope_tables(float *cos_t, float *sin_t, int64_t max_pos, int64_t head_dim, double theta);

/* Rotate, in place, n_heads heads of Dh features in each of the rows
 * x[r·ld .. ], r < n.  Row r has position pos0 + r % T (rows are (B, T)).
 * style: 0 = rotate_half (pairs j, j+Dh/2), 1 = interleaved (2j, 2j+1).
 * inverse = 1 rotates by the negative angle (the backward of forward). */
void ffn_rope_apply(float *x, int64_t ld, int64_t n, int64_t T, int64_t pos0, int64_t n_heads,
                    int64_t head_dim, int style, const float *cos_t, const float *sin_t,
                    int inverse);

/* The same with a rotary dim R <= head_dim (partial RoPE): the first R
 * features of each head rotate (pairs within them), the rest pass through;
 * tables are (max_pos, R/2). */
void ffn_rope_apply_dims(float *x, int64_t ld, int64_t n, int64_t T, int64_t pos0,
                         int64_t n_heads, int64_t head_dim, int64_t rot_dim, int style,
                         const float *cos_t, const float *sin_t, int inverse);

/* ---- RoPE of every family (src/nn/rope.c) ---------------------------------
 * The head dim (head_dim, or D/H) and rotary dim (int(Dh ·
 * partial_rotary_factor)) of a config; rope_scaling checked (the error
 * names the field); inverse frequency j of the config's scheme for a call
 * over seq_len positions (seq_len matters for DYNAMIC only); yarn's
 * attention factor (1 otherwise); and the tables rows [p0, p1) for
 * seq_len, cos and sin multiplied by the attention factor.  A DYNAMIC
 * model refills its rows every call (ffn_rope_is_dynamic). */
struct ffn_model_config;
int64_t ffn_cfg_head_dim(const struct ffn_model_config *c);
int64_t ffn_cfg_rotary_dim(const struct ffn_model_config *c);
ffn_status ffn_rope_scaling_validate(const struct ffn_model_config *c);
int ffn_rope_is_dynamic(const struct ffn_model_config *c);
double ffn_rope_attention_factor(const struct ffn_model_config *c);
double ffn_rope_inv_freq(const struct ffn_model_config *c, int64_t j, int64_t seq_len);
void ffn_rope_fill(const struct ffn_model_config *c, int64_t seq_len, int64_t p0, int64_t p1,
                   float *cos_t, float *sin_t);

/* ---- config.json beyond Llama (src/nn/config_hf.c) ------------------------
 * head_dim, partial_rotary_factor, rope_scaling / rope_parameters and the
 * family defaults of model_type, into c (called by ffn_model_config_load
 * before validation); and the same keys written back (lines ending in
 * ",\n"; ffn_keys: also ffn's own "ffn_qk_norm"). */
struct json_value;
ffn_status ffn_config_hf_extras(const struct json_value *root, const char *path,
                                const char *model_type, struct ffn_model_config *c);
void ffn_config_hf_write_extras(FILE *f, const struct ffn_model_config *c, int ffn_keys);
/* model_type gpt2: its own keys (n_embd, n_layer, ...) into c. */
ffn_status ffn_config_hf_gpt2(const struct json_value *root, const char *path,
                              struct ffn_model_config *c);

/* ---- RMSNorm of q / k groups inside strided rows (src/nn/qknorm.c) --------
 * Row r at x + r·ld holds `groups` groups of w features, each normalised
 * with weight (w); forward in place, copying the input rows to saved (row
 * stride ld_saved) and rstd (N, groups) when not NULL; backward turns dy
 * (in dx) into dx in place and accumulates dweight (may be NULL). */
void ffn_group_rmsnorm_forward(float *x, int64_t ld, float *saved, int64_t ld_saved, float *rstd,
                               int64_t n, int64_t groups, int64_t w, const float *weight,
                               float eps);
void ffn_group_rmsnorm_backward(float *dx, int64_t ld, const float *saved, int64_t ld_saved,
                                const float *rstd, int64_t n, int64_t groups, int64_t w,
                                const float *weight, float *dweight);

/* ---- causal attention with grouped KV heads ---------------------------- */
typedef struct ffn_attn_dims {
    int64_t B, T;   /* batch, query positions per sequence */
    int64_t pos0;   /* query t sits at position pos0 + t and sees keys 0..pos0+t */
    int64_t H, G;   /* query heads, key/value heads (H % G == 0) */
    int64_t Dh;     /* head dim */
    int n_threads;  /* the team size (scratch holds this many rows); 0: OpenMP's default */
    float scale;    /* the scores' scale; 0: 1/sqrt(Dh) */
    float softcap;  /* > 0: scores softcap·tanh(s/softcap) before the softmax (forward only) */
    int64_t window; /* > 0: query at position p sees only keys p - window + 1 .. p */
} ffn_attn_dims;
/* Layer l of c attends through a sliding window (Gemma 2/3's alternation). */
int ffn_cfg_layer_slides(const struct ffn_model_config *c, int64_t l);
/* S = pos0 + T keys per sequence.  Row layout: q row (b·T + t)·ldq, head h at
 * column h·Dh; k/v row (b·S + s)·ldk (ldv), kv head g at column g·Dh; query
 * head h reads kv head h / (H/G).  out row (b·T + t)·ldo, head h at h·Dh.
 * probs (B, H, T, S) receives the softmax rows for backward (positions past
 * the causal limit hold unspecified values); NULL in inference.  scratch
 * holds ffn_attention_scratch_floats(n_threads, S, Dh, 0) floats.  Scale
 * 1/sqrt(Dh).  Parallel over (b, h) with the calling OpenMP team. */
size_t ffn_attention_scratch_floats(int n_threads, int64_t S, int64_t Dh, int backward);
void ffn_attention_forward(float *out, int64_t ldo, float *probs, float *scratch, const float *q,
                           int64_t ldq, const float *k, int64_t ldk, const float *v, int64_t ldv,
                           const ffn_attn_dims *dims);
/* Backward of forward (pos0 must be 0 here; S = T): writes dq, dk, dv (same
 * layouts and leading dimensions as q, k, v), given dout and the saved
 * probs; scratch holds ffn_attention_scratch_floats(n_threads, T, Dh, 1).  Parallel over (b, g): each task owns one kv head of one sequence
 * and the H/G query heads that read it, so the reduction order is fixed. */
void ffn_attention_backward(float *dq, float *dk, float *dv, const float *dout, int64_t ldo,
                            const float *probs, const float *q, int64_t ldq, const float *k,
                            int64_t ldk, const float *v, int64_t ldv, float *scratch,
                            const ffn_attn_dims *dims);

/* ---- low-precision weights (src/nn/model_qweights.c) ---------------------
 * The model's side of include/ffn/quant.h: which tensors hold which type,
 * and the one helper every matrix product of model.c goes through.  NULL
 * state (a model never quantized) means every tensor is fp32, and then
 * each helper makes exactly the call model.c made before. */
typedef struct model_qstate model_qstate;

/* The flat parameter block: anonymous pages, zero and untouched until
 * written (so tensors that are only ever attached cost no resident memory). */
float *model_params_alloc(size_t bytes);
void model_params_free(float *params, size_t bytes);
void model_q_free(model_qstate *q);

/* y (n, rows) row stride ldy = x (n, cols) row stride ldx · Wᵀ, W (rows,
 * cols) the params at w: one tensor, or adjacent tensors of `cols` columns
 * (the fused q|k|v), each on ffn_qgemm when it is low precision and on
 * ffn_gemm otherwise (one ffn_gemm when all are fp32). */
ffn_status model_proj(const ffn_ctx *ctx, const model_qstate *q, const float *params,
                      const float *w, int64_t rows, int64_t cols, const float *x, int64_t ldx,
                      int64_t n, float *y, int64_t ldy);
/* x (n, D) = rows tokens[i] of the table at `table` (the embedding),
 * decoding only those rows when it is low precision. */
void model_embed_rows(const model_qstate *q, const float *params, const float *table,
                      const int32_t *tokens, int64_t n, int64_t D, float *x);
/* Point an FFN / MoE layer at its weights: the fp32 ones (ffn_layer_set_weights,
 * ffn_moe_set_weights) unless some of its tensors are low precision. */
ffn_status model_q_set_ffn(const model_qstate *q, ffn_layer *layer, const float *params,
                           const ffn_layer_params *p);
ffn_status model_q_set_moe(const model_qstate *q, ffn_moe *moe, const float *params,
                           const ffn_moe_params *p, int64_t E);
/* The name of the first tensor in a type other than f32, or NULL. */
const char *model_q_first(const model_qstate *q);
/* Before a forward: tensors attached since the last ffn_model_params_changed
 * make the layers pick them up now.  After params_changed: clean. */
ffn_status model_q_sync(ffn_model *m);
void model_q_synced(model_qstate *q);

/* Tie obj's life to the model's low-precision state: release(obj) runs when
 * the state goes (ffn_model_free, ffn_model_init_weights).  For borrowed
 * bytes (ffn_model_set_tensor_data borrow 1) that live in obj, e.g. a
 * GGUF file mapped by its loader.  A second call releases the first obj. */
struct ffn_qweight;
ffn_status model_q_keep(ffn_model *m, void *obj, void (*release)(void *));
/* Tensor t's low-precision weight (type, rows, bytes), or NULL when it is
 * fp32 (its floats are then in the flat block). */
const struct ffn_qweight *model_q_weight(const ffn_model *m, const ffn_model_tensor *t);
/* How many tensors hold bytes the model does not own (borrowed). */
int model_q_borrowed(const ffn_model *m);

/* Provided by model.c: the model's state slot (NULL until first needed). */
model_qstate **ffn_model_q_ref(ffn_model *m);

#endif /* FFN_MODEL_INTERNAL_H */
