/* gguf_model.h -- the GGUF model reader over a buffer in memory, for the
 * fuzz target (tests/fuzz/fuzz_gguf_model.c).  Not installed; the public
 * entry points are ffn_gguf_read_config / ffn_gguf_load_model in
 * include/ffn/checkpoint.h. */
#ifndef FFN_GGUF_MODEL_H
#define FFN_GGUF_MODEL_H

#include "ffn/checkpoint.h"

/* The configuration a GGUF file in memory describes, checked against its
 * tensors as ffn_gguf_read_config does (`name` is used in messages). */
ffn_status gguf_model_config_buffer(const void *data, size_t size, const char *name,
                                    ffn_model_config *cfg);
/* The model, as ffn_gguf_load_model makes it (the buffer may be released
 * afterwards). */
ffn_status gguf_model_load_buffer(ffn_ctx *ctx, const void *data, size_t size, const char *name,
                                  const ffn_model_options *opt, ffn_model **model);

#endif
