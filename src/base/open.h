/* open.h -- opening a user's file for reading.  Not installed.
 *
 * open(2) on a FIFO blocks until a writer appears, and a character device
 * such as /dev/zero never ends, so every reader of a user's file opens it
 * through ffn_open_regular: the open itself cannot block (O_NONBLOCK,
 * cleared again once the file is known to be regular), and anything but
 * a regular file is refused with a message naming what it is. */
#ifndef FFN_OPEN_H
#define FFN_OPEN_H

#include "base/common.h"

#include <sys/stat.h>

/* What a st_mode is, in words: "a FIFO", "a directory", "a character
 * device", "a block device", "a socket", "a regular file". */
const char *ffn_file_kind(mode_t mode);

/* Open `path` read-only (close-on-exec) if it is a regular file; *fd gets
 * the descriptor, *sb (may be NULL) its fstat.  Errors (FFN_ERR_IO) read
 * "PATH: cannot open: REASON" or "PATH is a FIFO, not a regular file". */
ffn_status ffn_open_regular(const char *path, int *fd, struct stat *sb);

/* A user's regular file mapped read-only and private (nothing done to the
 * mapping can reach the file).  data points at the bytes (a static empty
 * string for an empty file, then map is NULL); size is the file's size.
 * Errors are ffn_open_regular's, or "PATH: cannot map N bytes: REASON". */
typedef struct ffn_mapped {
    void *map;                 /* what ffn_unmap releases; NULL when empty */
    const unsigned char *data; /* the file's bytes */
    size_t size;
} ffn_mapped;
ffn_status ffn_map_regular(const char *path, ffn_mapped *m);
void ffn_unmap(ffn_mapped *m); /* zeroes *m; an empty or zeroed one is a no-op */

/* A file format read in place (GGUF, safetensors): its object begins
 * with FFN_VIEW_HEAD, the bytes it views, by name (f->base) and as an
 * ffn_view.  The checks of the arguments, the order of the steps and the
 * cleanup on failure of its two opens are here once; the format's close
 * unmaps map and frees path. */
#define FFN_VIEW_FIELDS                                            \
    char *path;                /* or the buffer's name */          \
    const unsigned char *base; /* the bytes */                     \
    size_t size;                                                   \
    void *map;                 /* the mapping (NULL for a buffer) */ \
    size_t map_size;
typedef struct ffn_view {
    FFN_VIEW_FIELDS
} ffn_view;
#define FFN_VIEW_HEAD         \
    union {                   \
        ffn_view view;        \
        struct {              \
            FFN_VIEW_FIELDS   \
        };                    \
    };
typedef struct ffn_view_ops {
    const char *fn;    /* the format's open in messages ("ffn_gguf_open"; fn + "_buffer") */
    size_t obj_size;   /* sizeof the object, zeroed before its view is filled */
    ffn_status (*validate)(void *obj);
    void (*close)(void *obj);
} ffn_view_ops;
/* *out gets the checked object viewing a caller's buffer (name may be
 * NULL: "<buffer>"), or NULL on failure. */
ffn_status ffn_view_open_buffer(const ffn_view_ops *ops, const void *data, size_t size, const char *name,
                                void **out);
/* The same over the file at path mapped (a FIFO or a device is refused by
 * name, without blocking); the object owns the mapping. */
ffn_status ffn_view_open_file(const ffn_view_ops *ops, const char *path, void **out);
/* A format's two public opens, PREFIX_open_buffer and PREFIX_open (PREFIX
 * ffn_gguf, ffn_st), over an object of type T checked by validate(T *)
 * and released by close(T *), defined once here for every format. */
#define FFN_VIEW_OPENS(PREFIX, T, validate, close)                                           \
    static ffn_status PREFIX##_view_validate(void *f) { return validate(f); }                \
    static void PREFIX##_view_close(void *f) { close(f); }                                   \
    static const ffn_view_ops PREFIX##_view_ops = {#PREFIX "_open", sizeof(T),               \
                                                   PREFIX##_view_validate, PREFIX##_view_close}; \
    ffn_status PREFIX##_open_buffer(const void *data, size_t size, const char *name,         \
                                    T **out) {                                               \
        void *f = NULL;                                                                      \
        ffn_status s = ffn_view_open_buffer(&PREFIX##_view_ops, data, size, name,            \
                                            out ? &f : NULL);                                \
        if (out) *out = f;                                                                   \
        return s;                                                                            \
    }                                                                                        \
    ffn_status PREFIX##_open(const char *path, T **out) {                                    \
        void *f = NULL;                                                                      \
        ffn_status s = ffn_view_open_file(&PREFIX##_view_ops, path, out ? &f : NULL);        \
        if (out) *out = f;                                                                   \
        return s;                                                                            \
    }

/* What the first bytes of a file say it is, by magic number or structure:
 * FFN_SNIFF_UNKNOWN when nothing matches.  Parsers call it to name a file
 * of the wrong format instead of reporting a nonsense field. */
typedef enum ffn_sniff {
    FFN_SNIFF_UNKNOWN = 0,
    FFN_SNIFF_GGUF,            /* "GGUF" magic */
    FFN_SNIFF_SAFETENSORS,     /* u64 header length, then '{' */
    FFN_SNIFF_ZIP,             /* "PK\3\4": a PyTorch checkpoint (.pt, pytorch_model.bin) */
    FFN_SNIFF_PICKLE,          /* 0x80 protocol byte: a legacy PyTorch pickle */
    FFN_SNIFF_JSON,            /* '{' or '[' after white space */
    FFN_SNIFF_FFN_TOKENIZER,   /* "ffn-tokenizer " */
    FFN_SNIFF_LLAMA2C_TOKENIZER, /* int32 max_token_length, then tokens to the end */
    FFN_SNIFF_LLAMA2C_CHECKPOINT /* seven int32 whose sizes add up to the file's exactly */
} ffn_sniff;

ffn_sniff ffn_sniff_bytes(const void *buf, size_t n);
/* 1 for the kinds told by a magic number or unmistakable structure (all
 * but FFN_SNIFF_UNKNOWN and the llama2.c tokenizer, whose first bytes a
 * llama2.c checkpoint header can resemble): safe to refuse a file on. */
int ffn_sniff_is_magic(ffn_sniff s);
/* "a GGUF file", "a safetensors file", ..., NULL for FFN_SNIFF_UNKNOWN. */
const char *ffn_sniff_name(ffn_sniff s);
/* What to do instead, for a file of kind s given where something else was
 * expected, e.g. for GGUF given as layer weights "a GGUF model (its
 * vocabulary with it) goes where a MODEL is asked for: ...". */
const char *ffn_sniff_advice(ffn_sniff s);

/* 1 when the first bytes (up to 4096) are UTF-8 text: no NUL, no control
 * character but white space.  For naming a text file given as a model. */
int ffn_bytes_look_like_text(const void *buf, size_t n);

#endif /* FFN_OPEN_H */
