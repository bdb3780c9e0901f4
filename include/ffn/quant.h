/* ffn/quant.h -- low-precision weights inside a model, for inference.
 *
 * Part of the public API; include <ffn.h>, not this file.
 *
 * Every matrix of a model (include/ffn/model.h's tensor table) can hold one
 * of the ggml types ffn computes with (FFN_GGML_COMPUTES in
 * include/ffn/dtype.h; include/ffn/gguf.h gives the layouts): the token embedding, the LM
 * head, attention q/k/v/o, the FFN's gate/up/down, the MoE experts, the
 * shared expert and the router.  Norms and biases stay fp32.  The master
 * precision stays fp32: a model with any low-precision tensor runs
 * inference only.
 *
 * Layout, stated once: a tensor W[out][in] (shape (rows, cols) in the
 * table) is `rows` rows of `cols` elements, each row ffn_ggml_row_size(type,
 * cols) bytes, one after the other with no padding -- ggml's own layout, so
 * the data of a GGUF tensor (ne[0] = cols, ne[1] = rows) is attached as it
 * lies in the file.
 *
 * What runs on them: ffn_model_logits, ffn_model_eval_loss, ffn_model_prefill
 * / ffn_model_step and the taps (include/ffn/tap.h, the same points and
 * rules).  Products go through the quantized matrix kernels; an embedding
 * lookup decodes only the rows it reads; a MoE layer runs only the routed
 * experts, so one decoded token reads K of E experts' bytes.
 * ffn_model_forward_backward on a model with any tensor in a type other
 * than f32 fails with FFN_ERR_UNSUPPORTED naming the first such tensor: the
 * gradient is not taken through low-precision weights, not even as dX
 * through a frozen layer.
 *
 * Memory: a low-precision tensor keeps only its bytes.  Its floats in the
 * flat block of ffn_model_params() read 0 from then on (their pages are
 * given back to the system), so the resident memory of a quantized model is
 * its quantized bytes, its fp32 norms and biases, and its activations.  (The
 * flat block is allocated untouched: a model whose matrices are all attached
 * with ffn_model_set_tensor_data never makes their fp32 pages resident.)
 * Whoever reads a tensor's floats (an exporter, an analysis) asks
 * ffn_model_tensor_type first.  ffn_model_init_weights makes every tensor
 * fp32 again.
 *
 * Example (a model in the type a user named, embeddings and head kept in
 * another; the names as ffn_ggml_type_name spells them):
 *     ffn_ggml_type type, keep;
 *     if (!ffn_ggml_type_parse(name, &type) || !ffn_ggml_type_parse(keep_name, &keep)) ...
 *     ffn_quantize_options o;
 *     ffn_quantize_options_default(&o);
 *     o.embedding = o.head = keep;
 *     ffn_model_quantize(model, type, &o);
 *     ffn_model_logits(model, logits, tokens, 1, T);
 */
#ifndef FFN_QUANT_H
#define FFN_QUANT_H
#pragma GCC visibility push(default) /* what this header declares is the exported API */

#include "core.h"
#include "gguf.h"
#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A field of ffn_quantize_options left at this value takes the `type`
 * passed to ffn_model_quantize. */
#define FFN_QUANT_SAME (-1)

/* Per kind of tensor (ffn_tensor_kind), a ggml type number or FFN_QUANT_SAME.
 * Fill with ffn_quantize_options_default (every field FFN_QUANT_SAME), then
 * change fields.  FFN_GGML_TYPE_F32 keeps a kind in fp32. */
typedef struct ffn_quantize_options {
    int embedding; /* model.embed_tokens.weight (also the head when tied) */
    int head;      /* lm_head.weight (untied only) */
    int attention; /* q/k/v/o_proj.weight */
    int mlp;       /* gate/up/down_proj.weight of the FFN, the experts, the shared expert */
    int router;    /* mlp.gate.weight and mlp.shared_expert_gate.weight */
} ffn_quantize_options;

void ffn_quantize_options_default(ffn_quantize_options *opt);

/* Convert the model's matrices, in memory, from their fp32 values to
 * `type` (any type ffn computes with), per kind as opt says
 * (opt NULL: every matrix in `type`).  A tensor whose row length (cols) is
 * not a multiple of its type's block size takes the nearest type that fits,
 * as llama.cpp's quantizer does (ffn_ggml_type_for_cols: the K-quants fall
 * back to the 32-blocks when cols is a multiple of 32, q4_K to q5_0 as
 * `ffn quantize --dtype q4_K` writes it; any block type to f16 otherwise)
 * (stories260K's down_proj, rows of 172, is stored f16 under any block
 * format).  A
 * tensor already in a low-precision type (quantized before, or attached) is
 * left as it is.  Norms and biases stay fp32.  Calls
 * ffn_model_params_changed (the KV cache is reset).  Not a hot path: it
 * allocates the new bytes, one tensor at a time; a failure leaves every
 * tensor either converted or as it was, the model usable. */
ffn_status ffn_model_quantize(ffn_model *model, ffn_ggml_type type,
                              const ffn_quantize_options *opt);

/* Give tensor `name` (its Hugging Face name in the table) the nbytes bytes
 * at `bytes`, in ggml type `type` and the layout above (nbytes must be
 * rows · ffn_ggml_row_size(type, cols)).  borrow 1: the bytes stay the
 * caller's and must outlive the model (or the next call for this tensor),
 * e.g. a memory-mapped GGUF file; borrow 0: they are copied.  A matrix
 * keeps any type ffn computes with (f32 bytes are copied into the flat
 * block); a norm or bias is decoded into its fp32 floats (f32, f16, bf16,
 * or any type ffn decodes whose block divides its length).  Errors name
 * the tensor, the type and the sizes expected and found.  The layers pick
 * the new data up at the next forward (or call ffn_model_params_changed);
 * the KV cache is reset then. */
ffn_status ffn_model_set_tensor_data(ffn_model *model, const char *name, ffn_ggml_type type,
                                     const void *bytes, size_t nbytes, int borrow);

/* The type tensor `name` is held in: FFN_GGML_TYPE_F32 for fp32 tensors
 * (every tensor of a model never quantized), the low-precision type
 * otherwise.  Returns -1 for a name that is not in the table. */
int ffn_model_tensor_type(const ffn_model *model, const char *name);

/* Bytes the model's weights occupy as held: fp32 tensors 4 per value,
 * low-precision ones their row bytes (a tied head counted once). */
size_t ffn_model_weight_bytes(const ffn_model *model);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif /* FFN_QUANT_H */
