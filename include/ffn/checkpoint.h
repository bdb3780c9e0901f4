/* ffn/checkpoint.h -- model files and model directories in and out:
 * llama2.c .bin files and Hugging Face safetensors directories (llama,
 * mistral, qwen2, mixtral, qwen2_moe), and ffn's own run directories
 * (written by the trainer, train.h) for inference.  (The function names
 * keep "checkpoint" for a model file or directory.)
 *
 * Part of the public API; include <ffn.h>, not this file.
 *
 * Letters:  V vocab, D hidden_size, F intermediate_size, L layers,
 *           H heads, G key/value heads, Dh = D/H head dim, T positions.
 *
 * ---- Formats read by ffn_checkpoint_load_model ---------------------------
 * A regular FILE is a llama2.c checkpoint ("legacy" layout): seven
 * little-endian int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads,
 * vocab_size, seq_len; a negative vocab_size means an untied classifier at
 * the end), then fp32 arrays: token_embedding (V, D), rms_att (L, D),
 * wq (L, H·Dh, D), wk (L, G·Dh, D), wv (L, G·Dh, D), wo (L, D, H·Dh),
 * rms_ffn (L, D), w1 = gate (L, F, D), w2 = down (L, D, F), w3 = up (L, F, D),
 * rms_final (D), freq_cis_real and _imag (T, Dh/2) each (skipped: RoPE is
 * recomputed), wcls (V, D) when untied.  Dh = D/H, RMSNorm eps 1e-5, RoPE
 * theta 1e4 rotating CONSECUTIVE pairs (2j, 2j+1): the model is created
 * with rope_style FFN_ROPE_INTERLEAVED and the weights are used as stored.
 * Every header value is checked (positive, H | D, G | H, Dh even, sizes
 * below 2^31 per dimension) and the file size must equal what the header
 * promises, freq_cis arrays included (so seq_len is bounded by the file
 * too); all arithmetic is 64-bit and overflow-checked.  llama2.c's
 * versioned exports (magic "ak42") are recognised and refused by name.
 *
 * A DIRECTORY holds config.json and either model.safetensors or the shards
 * named in model.safetensors.index.json ("weight_map": tensor -> file; a
 * shard name must be a plain file name in the directory).  model_type is
 * one of llama, mistral, qwen2 (q/k/v biases), mixtral (experts
 * block_sparse_moe.experts.{e}.w1/w2/w3 = gate/down/up, router
 * block_sparse_moe.gate), qwen2_moe (mlp.experts.{e}.*, router mlp.gate,
 * mlp.shared_expert.*, mlp.shared_expert_gate), qwen3 (q_norm / k_norm
 * per head), gemma, phi3 (fused self_attn.qkv_proj and mlp.gate_up_proj,
 * split into the model's adjacent q|k|v and gate|up rows), olmoe (q_norm /
 * k_norm over the whole projections, mlp.experts.{e}.*), gpt2
 * (transformer.*, Conv1D weights stored [in, out], fused c_attn); see
 * ffn_model_config_load for what each implies; ffn's own checkpoints
 * (src/train/train.c) are llama/qwen2_moe directories with extra ffn keys.
 * Weights may be F32, F16 or BF16 (converted to fp32 exactly).  The head
 * is tied when tie_word_embeddings is true (a stored lm_head.weight is then
 * ignored, as Hugging Face does).  These checkpoints rotate HALVES
 * (rotate_half: pairs (j, j + Dh/2)): rope_style FFN_ROPE_HALF unless the
 * config says "rope_style": "interleaved" (an ffn key).  rope_scaling
 * types default, linear, dynamic, llama3 and yarn are read; others (e.g.
 * longrope) are not supported (FFN_ERR_UNSUPPORTED, naming the field), nor
 * qwen2_moe mlp_only_layers.  A sliding window (mistral's and phi3's
 * "sliding_window", qwen2's with "use_sliding_window") is honoured by
 * capping the context at the window, where full attention is exact:
 * longer contexts are refused, not attended through a window.
 * Every tensor the model needs must be present with the right shape, and
 * a tensor the config does not explain is an error (a config/weights
 * mismatch), except rotary_emb.inv_freq buffers.
 *
 * Memory: files are memory-mapped and converted straight into the model's
 * flat parameter block; mapped pages are released as soon as a tensor is
 * converted, so loading costs about the parameter block and no second copy.
 *
 * Errors name the file and what is wrong ("stories.bin: header says
 * n_layers 5 ... the file has 1000 bytes but the header promises 1030740").
 *
 * ---- Writing ---------------------------------------------------------------
 * ffn_checkpoint_save_hf writes a Hugging Face directory: config.json with
 * HF names (model_type llama; qwen2 with attention biases; mixtral or
 * qwen2_moe with experts), model.safetensors with HF names, RoPE in the HF
 * rotate_half convention: q_proj/k_proj rows (and q/k biases) of a model
 * whose rope_style is interleaved are permuted per head, row 2j+h -> row
 * h·Dh/2 + j (h in {0,1}).  The directory is written whole beside the
 * target and swapped in atomically (the directory swap described in
 * train.h: files of other names in it are kept, links never followed),
 * holding the same lock as a training run.  ffn_checkpoint_save_llama2c writes
 * the legacy .bin (with freq_cis arrays, as llama2.c's export does) and
 * permutes the other way for a half-style model; it needs what the format
 * can express: gated SiLU, no biases, no MoE, eps 1e-5, theta 1e4.
 * The file goes to a new PATH.tmp-XXXXXX (ffn_atomic_open), is fsynced and
 * renamed.
 *
 * The llama2.c tokenizer.bin vocabulary is in vocab.h (ffn_vocab).
 */
#ifndef FFN_CHECKPOINT_H
#define FFN_CHECKPOINT_H
#pragma GCC visibility push(default) /* what this header declares is the exported API */

#include "core.h"
#include "model.h"
#include "vocab.h" /* ffn_llama2c_tokenizer, declared there since it moved to the data floor */

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ffn_checkpoint_format {
    FFN_CHECKPOINT_LLAMA2C = 0, /* a llama2.c .bin file */
    FFN_CHECKPOINT_HF,          /* a Hugging Face safetensors directory */
    FFN_CHECKPOINT_FFN          /* an ffn checkpoint directory (HF layout + ffn keys) */
} ffn_checkpoint_format;

/* "llama2c", "hf", "ffn". */
const char *ffn_checkpoint_format_name(ffn_checkpoint_format format);

#define FFN_CHECKPOINT_PATH_MAX 4096

typedef struct ffn_checkpoint_info {
    ffn_checkpoint_format format;
    char model_type[32];       /* "llama2c", "llama", "mistral", "qwen2", "mixtral", "qwen2_moe" */
    int n_dtypes[4];           /* tensors read per file dtype: [0] F32 [1] F16 [2] BF16 [3] other */
    int64_t n_files;           /* weight files read (shards) */
    int64_t file_bytes;        /* their total size */
    int64_t context_cap;       /* > 0: context capped at a sliding window of this length */
    /* A vocabulary found beside the weights ("" when none):
     * ffn's tokenizer.txt (ffn_tokenizer_load) or a llama2.c tokenizer.bin. */
    char tokenizer_path[FFN_CHECKPOINT_PATH_MAX];
    int tokenizer_is_llama2c;
} ffn_checkpoint_info;

/* Read a checkpoint's configuration only (no weights). */
ffn_status ffn_checkpoint_read_config(const char *path, ffn_model_config *cfg,
                                      ffn_checkpoint_info *info);

/* Detect the format of `path`, create a model for it and fill its weights.
 * opt may be NULL (inference, B = 1, T = the context); opt->max_seq larger
 * than the context is capped to it.  info may be NULL.  On failure *model
 * is NULL and the error names the file and what is wrong. */
ffn_status ffn_checkpoint_load_model(ffn_ctx *ctx, const char *path,
                                     const ffn_model_options *opt, ffn_model **model,
                                     ffn_checkpoint_info *info);

/* Load an ffn run directory (written by ffn_train_run: config.json,
 * model.safetensors, tokenizer.txt) for inference, with its tokenizer; an
 * interrupted swap's DIR.old is found too, and a symbolic link to a run
 * directory is followed.  The model is an inference model for B = 1 and
 * T = max_position_embeddings. */
ffn_status ffn_run_dir_load(ffn_ctx *ctx, const char *dir, ffn_model **model,
                            ffn_tokenizer **tokenizer);

/* The same with the vocabulary as an ffn_vocab: the run's tokenizer.txt,
 * or the llama2.c tokenizer.bin a run fine-tuned from a llama2.c model
 * holds instead (ffn train --init; read to exactly vocab_size tokens). */
ffn_status ffn_run_dir_load_vocab(ffn_ctx *ctx, const char *dir, ffn_model **model,
                                  ffn_vocab **vocab);

/* Remove an ffn run (or model) directory: only the files ffn writes there,
 * never through a symbolic link; a directory still holding other files is
 * kept with them.  An absent dir is not an error; a directory that is not
 * an ffn one (no config.json and model.safetensors, or files ffn does not
 * write) is refused. */
ffn_status ffn_run_dir_remove(const char *dir);

typedef struct ffn_hf_save_options {
    const char *dtype;          /* "F32" (NULL: exact), "F16" or "BF16" (rounded to nearest even) */
    const char *tokenizer_path; /* copied into the directory when not NULL */
    int tokenizer_is_llama2c;   /* it is a tokenizer.bin (else ffn's tokenizer.txt) */
    int64_t context_cap;        /* > 0: write max_position_embeddings = min(the model's, this)
                                   (a source's sliding window: full attention is exact up to it) */
    const char *model_type;     /* the source's model_type (ffn_checkpoint_info), or NULL: a
                                   layout the config cannot tell apart ("phi3": fused qkv_proj
                                   and gate_up_proj) is written back as its source had it */
} ffn_hf_save_options;

/* Write `model` as a Hugging Face directory `dir` (see the overview);
 * opts may be NULL (F32, no tokenizer). */
ffn_status ffn_checkpoint_save_hf(ffn_model *model, const char *dir,
                                  const ffn_hf_save_options *opts);
/* Write `model` as a llama2.c .bin at `path`. */
ffn_status ffn_checkpoint_save_llama2c(ffn_model *model, const char *path);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif /* FFN_CHECKPOINT_H */
