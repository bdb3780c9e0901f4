/* float_buf.h -- the buffer of a reader's *_load_f32 (gguf.c, safetensors.c):
 * numel floats, 64-byte aligned (free with ffn_free_aligned), the byte size
 * checked; errors name the file and the tensor.  Internal. */
#ifndef FFN_FORMAT_FLOAT_BUF_H
#define FFN_FORMAT_FLOAT_BUF_H

#include "base/common.h"

#include <inttypes.h>

static inline ffn_status float_buf_alloc(int64_t numel, const char *path, const char *name,
                                         float **buf) {
    size_t bytes;
    *buf = NULL;
    if (ffn_mul_size((size_t)numel, sizeof(float), &bytes))
        return ffn_error(FFN_ERR_OVERFLOW, "%s: %s: %" PRId64 " floats overflow size_t", path, name,
                         numel);
    if (!(*buf = ffn_malloc_aligned(bytes)))
        return ffn_error(FFN_ERR_NOMEM, "%s: %s: out of memory for %zu bytes", path, name, bytes);
    return FFN_OK;
}

/* The end of a *_load_f32: s, the status of filling buf, and buf handed
 * to *out, or freed when s is an error. */
static inline ffn_status float_buf_done(ffn_status s, float *buf, float **out) {
    if (s) ffn_free_aligned(buf);
    else *out = buf;
    return s;
}

#endif
