/* checkpoint_internal.h -- the pieces of the checkpoint readers that the
 * fuzz targets and the two reader files share.  Not installed.
 *
 * llama2c.c       the llama2.c .bin checkpoint (read from memory or a
 *                 mapped file, write) and tokenizer.bin
 * hf_checkpoint.c Hugging Face directories (config.json, index json,
 *                 shards), format detection, the public load / save */
#ifndef FFN_CHECKPOINT_INTERNAL_H
#define FFN_CHECKPOINT_INTERNAL_H

#include "ffn/model.h"

#include <stdio.h>
#include "base/common.h"
#include "base/dirswap.h"
#include "ffn/checkpoint.h"

/* The readers' name for ffn_path_join (base/dirswap.h). */
static inline char *ckpt_path_join(const char *a, const char *sep, const char *b) {
    return ffn_path_join(a, sep, b);
}

/* The largest context a model gets when the caller gives no max_seq: the
 * KV cache of a hostile header's seq_len must stay bounded. */
#define CKPT_DEFAULT_MAX_SEQ 4096

/* Weights are copied / converted in chunks of this many floats (4 MiB),
 * each chunk's mapped pages released right after. */
#define CKPT_CHUNK_FLOATS ((int64_t)1 << 20)

/* Validate a llama2.c header against the buffer size and fill cfg
 * (rope interleaved, eps 1e-5, theta 1e4, gated SiLU, tie from the sign of
 * vocab_size).  The size must be exactly what the header promises. */
ffn_status l2c_parse_header(const void *buf, size_t size, const char *name,
                            ffn_model_config *cfg);

/* Create a model from a llama2.c checkpoint in memory (size bytes) and fill
 * its weights.  drop_pages: the buffer is a read-only file mapping whose
 * pages may be released (MADV_DONTNEED) once copied. */
ffn_status l2c_load_buffer(ffn_ctx *ctx, const void *buf, size_t size, const char *name,
                           const ffn_model_options *opt, int drop_pages, ffn_model **out);

/* Map `path` read-only; *size gets its size.  Empty files are an error. */
ffn_status ckpt_map_file(const char *path, const void **data, size_t *size);
void ckpt_unmap_file(const void *data, size_t size);
/* Release the pages of [p, p+n) of a read-only file mapping (a hint). */
void ckpt_drop_pages(const void *p, size_t n);

/* The model's q/k rows, head by head, between the two RoPE conventions:
 * to_half: row 2j+h -> h·Dh/2 + j; else the inverse.  rows = n_heads·Dh,
 * cols = D (1 for a bias).  dst and src must not overlap. */
void ckpt_permute_rope_rows(float *dst, const float *src, int64_t n_heads, int64_t Dh,
                            int64_t cols, int to_half);

/* Hugging Face config.json interpretation beyond ffn_model_config_load:
 * model_type known, unsupported features rejected, the sliding window. */
typedef struct hf_config_extra {
    char model_type[32];
    int is_ffn;               /* has ffn's own keys (ffn_tokenizer, rope_style) */
    int64_t sliding_window;   /* 0: none in effect */
    char tokenizer_file[256]; /* ffn_tokenizer_file, "" when absent */
    char experts_key[24];     /* the key that set the expert count, "" when none */
    int multimodal;           /* Gemma3ForConditionalGeneration: model_type gemma3 whose text
                               * model (text_config) is read; its tensors are
                               * language_model.model.* (or model.language_model.*) */
} hf_config_extra;

ffn_status hf_config_parse(const char *text, size_t len, const char *name,
                           hf_config_extra *extra);

/* model.safetensors.index.json: the weight_map.  names[i] -> files[file_of[i]]. */
typedef struct hf_index {
    int64_t n_tensors, n_files;
    char **names;   /* (n_tensors) */
    int64_t *file_of; /* (n_tensors) */
    char **files;   /* (n_files), distinct, plain file names */
    void *mem;      /* one allocation behind the arrays above */
} hf_index;

ffn_status hf_index_parse(const char *text, size_t len, const char *name, hf_index *out);
void hf_index_free(hf_index *index);

/* Families whose files do not hold the model's table names one to one
 * (src/load/hf_families.c).  hf_family_tensor gives the file's name of
 * table tensor t in *out: HF_MAP_SAME (the table's name, Mixtral's renames
 * aside), HF_MAP_RENAMED, HF_MAP_FUSED (one file tensor of *rows rows also
 * fills the adjacent tensors that follow t in the flat block: phi3
 * qkv_proj / gate_up_proj, gpt2 c_attn) or HF_MAP_COVERED (no tensor of
 * its own: a fused one holds it).  *transpose: the file stores the matrix
 * [in, out] (GPT-2 Conv1D).  hf_family_ignorable: buffers such files carry
 * that are no parameters.  hf_family_is_gpt2: the config is GPT-2's
 * architecture.  hf_write_gpt2_config: its config.json keys. */
enum { HF_MAP_SAME, HF_MAP_RENAMED, HF_MAP_FUSED, HF_MAP_COVERED };
int hf_family_tensor(const ffn_model_tensor *t, const char *model_type, const ffn_model_config *c,
                     char *out, size_t cap, int64_t *rows, int *transpose);
int hf_family_ignorable(const char *name, const char *model_type);
int hf_family_is_gpt2(const ffn_model_config *c);
ffn_status hf_write_gpt2_config(const ffn_model_config *c, const char *dtype, int64_t ctx_len,
                                FILE *f);

#endif /* FFN_CHECKPOINT_INTERNAL_H */
