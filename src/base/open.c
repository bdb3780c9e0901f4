/* open.c -- opening a user's file without blocking on FIFOs or devices
 * (see open.h). */
#include "base/open.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

const char *ffn_file_kind(mode_t mode) {
    if (S_ISREG(mode)) return "a regular file";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a file";
}

ffn_status ffn_open_regular(const char *path, int *fd, struct stat *sb) {
    *fd = -1;
    if (!path) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_open_regular: path is NULL");
    /* O_NONBLOCK: opening a FIFO without a writer returns at once instead
     * of waiting; O_NOCTTY: a terminal never becomes ours. */
    int f = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (f < 0) return ffn_error(FFN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat s;
    if (fstat(f, &s) != 0) {
        int e = errno;
        close(f);
        return ffn_error(FFN_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(s.st_mode)) {
        close(f);
        return ffn_error(FFN_ERR_IO, "%s is %s, not a regular file", path, ffn_file_kind(s.st_mode));
    }
    int flags = fcntl(f, F_GETFL);
    if (flags < 0 || fcntl(f, F_SETFL, flags & ~O_NONBLOCK) < 0) {
        int e = errno;
        close(f);
        return ffn_error(FFN_ERR_IO, "%s: cannot clear O_NONBLOCK: %s", path, strerror(e));
    }
    *fd = f;
    if (sb) *sb = s;
    return FFN_OK;
}

/* ---- what a file is, from its first bytes ------------------------------------ */

/* A llama2.c checkpoint header (dim, hidden_dim, n_layers, n_heads,
 * n_kv_heads, vocab_size, seq_len) whose arrays fill the file exactly. */
static int llama2c_checkpoint(const unsigned char *b, size_t n) {
    if (n < 28) return 0;
    int32_t v[7];
    memcpy(v, b, sizeof v);
    const int64_t D = v[0], F = v[1], L = v[2], H = v[3], G = v[4], S = v[6];
    const int64_t V = v[5] < 0 ? -(int64_t)v[5] : v[5];
    if (D <= 0 || F <= 0 || L <= 0 || H <= 0 || G <= 0 || V <= 0 || S <= 0 || D % H || G > H ||
        H % G)
        return 0;
    const int64_t Dh = D / H;
    int64_t t = 0, total = 0;
    int ovf = ffn_mul_i64(V, D, &total);                               /* embedding */
    ovf |= ffn_mul_i64(D, 2 * D + 2 + 2 * G * Dh + 3 * F, &t) ||       /* per layer */
           ffn_mul_i64(t, L, &t) || ffn_add_i64(total, t, &total);
    ovf |= ffn_mul_i64(S, Dh, &t) || ffn_add_i64(total, t + D, &total); /* freq_cis, final norm */
    if (v[5] < 0) ovf |= ffn_mul_i64(V, D, &t) || ffn_add_i64(total, t, &total);
    ovf |= ffn_mul_i64(total, 4, &total) || ffn_add_i64(total, 28, &total);
    return !ovf && (uint64_t)total == (uint64_t)n;
}

ffn_sniff ffn_sniff_bytes(const void *buf, size_t n) {
    const unsigned char *b = buf;
    if (!b || n == 0) return FFN_SNIFF_UNKNOWN;
    if (n >= 9) { /* first: a real safetensors header decides, whatever its length's bytes */
        uint64_t len;
        memcpy(&len, b, 8);
        if (len >= 2 && len <= n - 8 && b[8] == '{') return FFN_SNIFF_SAFETENSORS;
    }
    if (n >= 4 && !memcmp(b, "GGUF", 4)) return FFN_SNIFF_GGUF;
    if (n >= 4 && !memcmp(b, "PK\3\4", 4)) return FFN_SNIFF_ZIP;
    if (n >= 14 && !memcmp(b, "ffn-tokenizer ", 14)) return FFN_SNIFF_FFN_TOKENIZER;
    size_t i = 0;
    if (n >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF) i = 3; /* a UTF-8 BOM */
    while (i < n && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r')) i++;
    if (i < n && (b[i] == '{' || b[i] == '[')) {
        /* the next token must start a key or a value (a binary int32 such
         * as 123 = '{' is followed by zero bytes) */
        const unsigned char open = b[i++];
        while (i < n && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r')) i++;
        if (i < n && (open == '{' ? (b[i] == '"' || b[i] == '}')
                                  : (strchr("\"{[]-tfn", b[i]) || (b[i] >= '0' && b[i] <= '9'))) &&
            b[i] != 0)
            return FFN_SNIFF_JSON;
    }
    if (n >= 2 && b[0] == 0x80 && b[1] >= 2 && b[1] <= 5) return FFN_SNIFF_PICKLE;
    if (llama2c_checkpoint(b, n)) return FFN_SNIFF_LLAMA2C_CHECKPOINT;
    if (n >= 12) {
        /* max_token_length, then (score, length, bytes) per token to the
         * very end of the file, nearly all of them non-empty: the zeros and
         * floats after a llama2.c checkpoint header do not walk like that. */
        int32_t max_len;
        memcpy(&max_len, b, 4);
        size_t off = 4, tokens = 0, empty = 0;
        int ok = max_len >= 1 && max_len <= 65536;
        while (ok && off < n) {
            float score;
            int32_t len;
            if (n - off < 8) { ok = 0; break; }
            memcpy(&score, b + off, 4);
            memcpy(&len, b + off + 4, 4);
            if (!(score == score && score > -1e30f && score < 1e30f) || len < 0 || len > max_len ||
                (size_t)len > n - off - 8) { ok = 0; break; }
            off += 8 + (size_t)len;
            tokens++;
            empty += len == 0;
        }
        if (ok && tokens >= 1 && empty * 10 <= tokens) return FFN_SNIFF_LLAMA2C_TOKENIZER;
    }
    return FFN_SNIFF_UNKNOWN;
}

int ffn_sniff_is_magic(ffn_sniff s) {
    return s != FFN_SNIFF_UNKNOWN && s != FFN_SNIFF_LLAMA2C_TOKENIZER;
}

const char *ffn_sniff_name(ffn_sniff s) {
    switch (s) {
    case FFN_SNIFF_GGUF: return "a GGUF file";
    case FFN_SNIFF_SAFETENSORS: return "a safetensors file";
    case FFN_SNIFF_ZIP: return "a zip archive (a PyTorch checkpoint?)";
    case FFN_SNIFF_PICKLE: return "a Python pickle (a PyTorch checkpoint?)";
    case FFN_SNIFF_JSON: return "a JSON file";
    case FFN_SNIFF_FFN_TOKENIZER: return "an ffn tokenizer file";
    case FFN_SNIFF_LLAMA2C_TOKENIZER: return "a llama2.c tokenizer.bin";
    case FFN_SNIFF_LLAMA2C_CHECKPOINT: return "a llama2.c checkpoint";
    case FFN_SNIFF_UNKNOWN: break;
    }
    return NULL;
}

const char *ffn_sniff_advice(ffn_sniff s) {
    switch (s) {
    case FFN_SNIFF_GGUF:
        return "a GGUF model (its vocabulary with it) goes where a MODEL is asked for (ffn run, "
               "inspect, eval, trace, edit, serve, quantize, export), or to ffn train --init";
    case FFN_SNIFF_SAFETENSORS:
        return "for a model, pass the Hugging Face directory that holds it and its config.json";
    case FFN_SNIFF_ZIP:
    case FFN_SNIFF_PICKLE:
        return "ffn reads safetensors, not PyTorch pickles: convert it to model.safetensors";
    case FFN_SNIFF_JSON:
        return "a Hugging Face tokenizer.json goes to --tokenizer; a config.json is read from its "
               "model's directory, given as the MODEL";
    case FFN_SNIFF_FFN_TOKENIZER:
    case FFN_SNIFF_LLAMA2C_TOKENIZER:
        return "a vocabulary goes to --tokenizer";
    case FFN_SNIFF_LLAMA2C_CHECKPOINT:
        return "a model goes where a MODEL is asked for (ffn run, ffn export, ffn inspect)";
    case FFN_SNIFF_UNKNOWN: break;
    }
    return "";
}

ffn_status ffn_map_regular(const char *path, ffn_mapped *m) {
    memset(m, 0, sizeof *m);
    m->data = (const unsigned char *)"";
    int fd;
    struct stat sb;
    ffn_status st = ffn_open_regular(path, &fd, &sb);
    if (st) return st;
    m->size = (size_t)sb.st_size;
    if (m->size > 0) {
        void *map = mmap(NULL, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            m->size = 0;
            return ffn_error(FFN_ERR_IO, "%s: cannot map %zu bytes: %s", path, (size_t)sb.st_size,
                             strerror(e));
        }
        m->map = map;
        m->data = map;
    }
    close(fd);
    return FFN_OK;
}

void ffn_unmap(ffn_mapped *m) {
    if (m->map) munmap(m->map, m->size);
    memset(m, 0, sizeof *m);
}

ffn_status ffn_view_open_buffer(const ffn_view_ops *ops, const void *data, size_t size, const char *name,
                                void **out) {
    if (!out) return ffn_error(FFN_ERR_INVALID_ARG, "%s_buffer: out is NULL", ops->fn);
    *out = NULL;
    if (!name) name = "<buffer>";
    if (!data && size) return ffn_error(FFN_ERR_INVALID_ARG, "%s: %s_buffer: data is NULL", name, ops->fn);
    ffn_view *obj = calloc(1, ops->obj_size);
    if (obj && !(obj->path = strdup(name))) {
        free(obj);
        obj = NULL;
    }
    if (!obj) return ffn_error(FFN_ERR_NOMEM, "%s: out of memory", name);
    obj->base = data;
    obj->size = size;
    ffn_status s = ops->validate(obj);
    if (s != FFN_OK) {
        ops->close(obj);
        return s;
    }
    *out = obj;
    return FFN_OK;
}

ffn_status ffn_view_open_file(const ffn_view_ops *ops, const char *path, void **out) {
    if (!out) return ffn_error(FFN_ERR_INVALID_ARG, "%s: out is NULL", ops->fn);
    *out = NULL;
    if (!path) return ffn_error(FFN_ERR_INVALID_ARG, "%s: path is NULL", ops->fn);
    ffn_mapped mp;
    ffn_status s = ffn_map_regular(path, &mp);
    if (s) return s;
    if ((s = ffn_view_open_buffer(ops, mp.data, mp.size, path, out))) {
        ffn_unmap(&mp);
        return s;
    }
    ffn_view *v = *out;
    v->map = mp.map;
    v->map_size = mp.size;
    return FFN_OK;
}

int ffn_bytes_look_like_text(const void *buf, size_t n) {
    const unsigned char *s = buf;
    if (n > 4096) n = 4096;
    if (n == 0) return 0;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c == 0 || (c < 0x20 && c != '\n' && c != '\r' && c != '\t' && c != '\f' && c != '\v') ||
            c == 0x7f)
            return 0;
        if (c < 0x80) {
            i++;
            continue;
        }
        int len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!len) return 0;
        if (i + (size_t)len > n) break; /* a sequence cut by the 4096-byte window */
        for (int k = 1; k < len; k++)
            if ((s[i + (size_t)k] & 0xC0) != 0x80) return 0;
        i += (size_t)len;
    }
    return 1;
}
