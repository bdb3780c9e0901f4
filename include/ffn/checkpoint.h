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
#include "dtype.h" /* ffn_ggml_type (the GGUF writer's types and mixes) */
#include "vocab.h" /* ffn_llama2c_tokenizer, declared there since it moved to the data floor */

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ffn_checkpoint_format {
    FFN_CHECKPOINT_LLAMA2C = 0, /* a llama2.c .bin file */
    FFN_CHECKPOINT_HF,          /* a Hugging Face safetensors directory */
    FFN_CHECKPOINT_FFN,         /* an ffn checkpoint directory (HF layout + ffn keys) */
    FFN_CHECKPOINT_GGUF         /* a GGUF file (llama, qwen2, qwen2moe, qwen3, qwen3moe, olmoe,
                                   gemma, phi3, gpt2, starcoder2) */
} ffn_checkpoint_format;

/* "llama2c", "hf", "ffn", "gguf". */
const char *ffn_checkpoint_format_name(ffn_checkpoint_format format);

#define FFN_CHECKPOINT_PATH_MAX 4096

/* The files of an ffn run directory (written by ffn_train_run, read by
 * ffn_run_dir_load and the checkpoint loaders); the tokenizer's own name,
 * FFN_TOKENIZER_FILENAME, is in data.h. */
#define FFN_MODEL_FILENAME "model.safetensors"
#define FFN_CONFIG_FILENAME "config.json"
#define FFN_TRAIN_STATE_FILENAME "train_state.safetensors" /* the optimizer's state, for --resume */
#define FFN_METRICS_FILENAME "metrics.jsonl"               /* the training log */
#define FFN_LLAMA2C_TOKENIZER_FILENAME "tokenizer.bin"     /* a llama2.c vocabulary */

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
    /* Tensors of the file that are not the model's and were left unread:
     * a Gemma3ForConditionalGeneration's vision tower and projector. */
    int64_t n_ignored_tensors;
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


/* ---- GGUF files (src/load/gguf_model.c) ------------------------------------
 * Architectures (general.architecture): llama (Llama, Mistral; Mixtral is
 * llama with llama.expert_count > 0), qwen2 (q/k/v biases), qwen2moe
 * (experts and a shared expert gated by sigmoid(ffn_gate_inp_shexp · x)).
 * Metadata read: {arch}.embedding_length D, .block_count L,
 * .feed_forward_length F (Mixtral: the experts' size), .context_length,
 * .attention.head_count H, .attention.head_count_kv G (default H),
 * .attention.layer_norm_rms_epsilon, .rope.freq_base (default 1e4),
 * .rope.dimension_count (must be D/H), .expert_count E, .expert_used_count
 * K, .expert_feed_forward_length Fe, .expert_shared_feed_forward_length Fs
 * (or the shape of ffn_up_shexp); V is the length of tokenizer.ggml.tokens
 * (else token_embd's).  Tensors (ne fastest first, W[out][in] is {in, out}):
 * token_embd {D, V}; blk.N.attn_norm, attn_q/k/v/output (+ attn_q/k/v.bias),
 * ffn_norm, ffn_gate/up/down, or ffn_gate_inp {D, E} and ffn_{gate,up}_exps
 * {D, Fe, E} / ffn_down_exps {Fe, D, E}, ffn_{gate,up,down}_shexp and
 * ffn_gate_inp_shexp {D}; output_norm; output {D, V} (absent: tied).
 * Routing follows llama.cpp: softmax, top K, renormalised for llama
 * (norm_topk_prob 1), not for qwen2moe (0).  Any type ffn decodes
 * (ffn/dtype.h: FFN_GGML_DECODES) is dequantized to fp32 at load.
 * RoPE: a llama file's q/k rows are in the order llama.cpp's converter
 * gives them (consecutive pairs rotate); they are permuted back to
 * rotate_half on load, so every loaded model is FFN_ROPE_HALF; qwen2* rows
 * are used as stored.  The file is checked against its metadata before
 * the model is allocated: every failure names the file, the key or tensor,
 * the expected and the found (unknown architecture, a missing key or
 * tensor, a shape the metadata disagrees with, a type ffn cannot decode, a
 * tensor the model has no place for).  info->format is FFN_CHECKPOINT_GGUF,
 * model_type the architecture, n_dtypes[3] counts quantized tensors;
 * tokenizer_path is the file itself when it holds a vocabulary
 * (tokenizer.ggml.*, or the ffn.tokenizer* keys ffn writes; ffn_vocab_load
 * reads it), else "". */
ffn_status ffn_gguf_read_config(const char *path, ffn_model_config *cfg, ffn_checkpoint_info *info);
ffn_status ffn_gguf_load_model(ffn_ctx *ctx, const char *path, const ffn_model_options *opt,
                               ffn_model **model, ffn_checkpoint_info *info);

/* 1 when path is a regular file starting with the GGUF magic. */
int ffn_checkpoint_is_gguf(const char *path);
/* Any MODEL path: a GGUF file (above) or whatever ffn_checkpoint_read_config
 * / ffn_checkpoint_load_model read. */
ffn_status ffn_checkpoint_read_config_any(const char *path, ffn_model_config *cfg,
                                          ffn_checkpoint_info *info);
ffn_status ffn_checkpoint_load_any(ffn_ctx *ctx, const char *path, const ffn_model_options *opt,
                                   ffn_model **model, ffn_checkpoint_info *info);

/* Writing a GGUF file llama.cpp loads.  The architecture: llama for a
 * dense model without attention biases or a Mixtral-style MoE (no shared
 * expert, renormalised top-k), qwen2 with q/k/v biases, qwen2moe for
 * experts with a shared expert and top-k weights not renormalised (q/k/v
 * biases written as zeros when the model has none); the FFN must be gated
 * SiLU without biases.  Weight types: matrices get `type`; a matrix whose
 * rows (ne[0]) are not a multiple of the type's block stays f16 (as
 * llama.cpp's quantizer does; counted in report->n_fallback); norms,
 * biases, the shared-expert gate and the routers (ffn_gate_inp, as
 * llama.cpp keeps them) stay f32.  Metadata: general.architecture, .name,
 * .file_type, .quantization_version, every {arch}.* key the reader above
 * reads, and the vocabulary: a GGUF vocab_path's tokenizer.* keys copied
 * verbatim; else a llama (SPM) vocabulary in tokenizer.ggml.* of the given
 * vocab's tokens -- ffn's own byte/char/word with spaces as U+2581 and
 * add_space_prefix false (byte tokens as <0xXX>, the space as U+2581) and
 * the tokenizer file itself in "ffn.tokenizer"; a llama2.c vocabulary
 * with its scores; a tokenizer.json's pieces and the file itself (read from
 * vocab_path) in "ffn.tokenizer_json" -- or without one <0x00>..<0xFF>
 * byte tokens and <unusedN> fillers up to V.  ffn_vocab_load reads the
 * ffn.* keys first, so ffn encodes as the source did; report->vocab_warning
 * says when llama.cpp will not (word pieces, a tokenizer.json).  The file is written atomically
 * (ffn_atomic_*): an existing path is replaced whole (callers refuse it
 * without --force). */
typedef struct ffn_gguf_save_options {
    int type;                 /* ffn_ggml_type of the matrices (dtype.h): any type ffn
                                 encodes (FFN_GGML_ENCODES) */
    const ffn_vocab *vocab;   /* may be NULL: byte tokens */
    const char *vocab_path;   /* the file `vocab` was read from, or NULL: a GGUF's
                                 tokenizer.* keys are copied from it verbatim, a
                                 tokenizer.json is kept whole (below) */
    int64_t context_cap;      /* > 0: context_length = min(the model's, this) */
    const char *name;         /* general.name (NULL: "ffn") */
    void (*progress)(void *user, int64_t done, int64_t total); /* per tensor; may be NULL */
    void *progress_user;
    const char *model_type;   /* the source's family (ffn_checkpoint_info.model_type) or NULL:
                                 "phi3" writes a llama-shaped model as phi3 (fused attn_qkv and
                                 gate | up), as it came; every other architecture follows from
                                 the config */
    uint32_t ftype;           /* > 0: llama.cpp's mix of that number (ffn_ftype_parse),
                                 each matrix the type ffn_ftype_tensor_type gives it; `type`
                                 is then ignored (without, ffn_type_fallback's of `type`) */
} ffn_gguf_save_options;

typedef struct ffn_gguf_save_report {
    int64_t n_tensors;  /* written */
    int64_t n_f32;      /* of them kept f32 (vectors, routers) */
    int64_t n_fallback; /* matrices of a fallback type: rows not a multiple of the block */
    const char *vocab_warning; /* NULL, or why llama.cpp will not encode every text to the
                                  ids ffn does (a static string) */
    const char *vocab_kind;    /* how the vocabulary was written (a static string) */
    int64_t n_by_type[FFN_GGML_TYPE_COUNT]; /* tensors written per type */
} ffn_gguf_save_report;

/* llama.cpp's file types, the mixes llama-quantize names (in capitals;
 * src/load/gguf_mix.c has the per-tensor rules, after llama.cpp's
 * llama_tensor_get_type without an importance matrix).  The names: i in
 * 0..ffn_ftype_count()-1 gives the name and *ftype (llama_ftype's number). */
int ffn_ftype_count(void);
const char *ffn_ftype_at(int i, uint32_t *ftype);
int ffn_ftype_parse(const char *name, uint32_t *ftype); /* 1 when known (case-insensitive) */
const char *ffn_ftype_name(uint32_t ftype);              /* NULL when unknown */
ffn_ggml_type ffn_ftype_base(uint32_t ftype);            /* the type it is named after */
typedef struct ffn_ftype_shape {
    int64_t n_layer, n_head, n_head_kv, n_expert;
    int tied; /* 1: token_embd.weight is also the output (no output.weight) */
} ffn_ftype_shape;
/* The type the mix gives matrix `name` (its GGUF name) of rows of `cols`;
 * *fell_back (may be NULL) 1 when the rows forced a fallback type. */
ffn_ggml_type ffn_ftype_tensor_type(uint32_t ftype, const ffn_ftype_shape *shape, const char *name,
                                    int64_t cols, int *fell_back);
/* One block type for every matrix (--dtype q4_K): the type a matrix of
 * rows of `cols` gets, as llama.cpp's llama_model_quantize gives it with
 * that one type (its `pure` mode): `type` when its block divides the rows,
 * else llama.cpp's tensor_type_fallback (q4_K -> q5_0, q5_K -> q5_1, q6_K
 * -> q8_0, q2_K / q3_K -> q4_0, iq4_xs -> iq4_nl), f16 when that block does
 * not divide them either or `type` has no fallback; *fell_back as above. */
ffn_ggml_type ffn_type_fallback(ffn_ggml_type type, int64_t cols, int *fell_back);

void ffn_gguf_save_options_default(ffn_gguf_save_options *opts); /* f32, no vocab */
/* opts may be NULL (defaults), report may be NULL. */
ffn_status ffn_gguf_save_model(ffn_model *model, const char *path, const ffn_gguf_save_options *opts,
                               ffn_gguf_save_report *report);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif /* FFN_CHECKPOINT_H */
