/* fuzz_gguf.c -- libFuzzer target for the GGUF reader (src/format/gguf.c)
 * through ffn_gguf_open_buffer, and through the real mmap path (ffn_gguf_open
 * on a memfd) for inputs the reader accepts.
 *
 * For every accepted file it checks, and traps when one breaks:
 *   - version 2 or 3, alignment a power of two, the data section inside;
 *   - every key is found by ffn_gguf_find_key at its own index; every value,
 *     and every element of every (nested) array, is readable; strings are
 *     NUL-terminated at their length;
 *   - every tensor's bytes lie inside the input, at the data section plus
 *     an aligned offset, nbytes = rows x row size; find(name) agrees with
 *     get(i); tensors of a type ffn decodes dequantize (ASan watches reads);
 *   - the mmap path accepts the same file with the same counts.
 * Built by `make fuzz`; -DFFN_FUZZ_REPLAY adds a main() that replays files
 * (tests/cli/test_fuzz_regress.sh). */
#include "ffn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define REQUIRE(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "fuzz_gguf: invariant failed: %s (line %d)\n", #cond, __LINE__);   \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

static long visits; /* bounds the work per input */

static void check_value(const ffn_gguf_value *v, int depth) {
    REQUIRE(depth <= FFN_GGUF_MAX_NESTING + 1);
    if (++visits > 200000) return;
    if (v->type == FFN_GGUF_VTYPE_STRING) {
        REQUIRE(v->v.str.ptr && v->v.str.ptr[v->v.str.len] == '\0');
        REQUIRE(strlen(v->v.str.ptr) <= v->v.str.len);
    } else if (v->type == FFN_GGUF_VTYPE_ARRAY) {
        const ffn_gguf_array *a = &v->v.arr;
        REQUIRE((unsigned)a->type < FFN_GGUF_VTYPE_COUNT);
        REQUIRE((a->data != NULL) == (ffn_gguf_vtype_size(a->type) != 0));
        for (uint64_t i = 0; i < a->count && visits <= 200000; i++) {
            ffn_gguf_value e;
            REQUIRE(ffn_gguf_array_get(a, i, &e) == FFN_OK);
            REQUIRE(e.type == a->type);
            check_value(&e, depth + 1);
        }
        ffn_gguf_value e;
        REQUIRE(ffn_gguf_array_get(a, a->count, &e) == FFN_ERR_INVALID_ARG);
    } else if (v->type == FFN_GGUF_VTYPE_BOOL) {
        REQUIRE(v->v.boolean == 0 || v->v.boolean == 1);
    } else {
        REQUIRE((unsigned)v->type < FFN_GGUF_VTYPE_COUNT);
    }
}

static void check_file(const ffn_gguf_file *f, const uint8_t *base, size_t size) {
    REQUIRE(ffn_gguf_version(f) == 2 || ffn_gguf_version(f) == 3);
    size_t align = ffn_gguf_alignment(f);
    REQUIRE(align > 0 && (align & (align - 1)) == 0);
    visits = 0;
    for (size_t i = 0; i < ffn_gguf_kv_count(f); i++) {
        const char *key = ffn_gguf_kv_key(f, i);
        REQUIRE(key && *key);
        REQUIRE(ffn_gguf_find_key(f, key) == (int64_t)i);
        ffn_gguf_value v;
        REQUIRE(ffn_gguf_kv_value(f, i, &v) == FFN_OK);
        check_value(&v, 0);
    }
    REQUIRE(ffn_gguf_kv_key(f, ffn_gguf_kv_count(f)) == NULL);
    uint64_t data = ffn_gguf_data_offset(f), expect = 0;
    for (size_t i = 0; i < ffn_gguf_count(f); i++) {
        ffn_gguf_tensor t, u;
        REQUIRE(ffn_gguf_get_tensor(f, i, &t) == FFN_OK);
        REQUIRE(t.name && strlen(t.name) > 0 && strlen(t.name) < FFN_GGUF_MAX_NAME);
        REQUIRE(t.n_dims >= 0 && t.n_dims <= FFN_GGUF_MAX_DIMS);
        int64_t numel = 1;
        for (int d = 0; d < FFN_GGUF_MAX_DIMS; d++) {
            REQUIRE(t.ne[d] >= 0);
            if (d >= t.n_dims) REQUIRE(t.ne[d] == 1);
            numel *= t.ne[d]; /* validated: cannot overflow */
        }
        REQUIRE(numel == t.numel);
        size_t row;
        REQUIRE(ffn_ggml_row_size(t.type, t.ne[0], &row) == FFN_OK);
        REQUIRE(t.ne[0] == 0 ? t.nbytes == 0 : t.nbytes == row * (size_t)(t.numel / t.ne[0]));
        REQUIRE(t.offset == data + expect);
        REQUIRE(t.offset <= size && t.nbytes <= size - t.offset);
        if (base) REQUIRE((const uint8_t *)t.data == base + t.offset);
        expect += (t.nbytes + align - 1) / align * align;
        REQUIRE(ffn_gguf_find(f, t.name, &u) == FFN_OK);
        REQUIRE(u.offset == t.offset && u.nbytes == t.nbytes && !strcmp(u.name, t.name));
        if (ffn_ggml_can_dequantize(t.type) && t.numel <= (1 << 16)) {
            float *dst = malloc((size_t)t.numel * sizeof *dst + 4);
            REQUIRE(dst);
            REQUIRE(ffn_gguf_tensor_to_f32(f, &t, dst) == FFN_OK);
            free(dst);
        } else if (!ffn_ggml_can_dequantize(t.type)) {
            float one;
            REQUIRE(ffn_gguf_tensor_to_f32(f, &t, &one) == FFN_ERR_UNSUPPORTED);
        }
    }
    /* absent names (unless the input holds them) */
    ffn_gguf_tensor t;
    ffn_status s = ffn_gguf_find(f, "\x01no such tensor", &t);
    REQUIRE(s == FFN_ERR_MISSING || (s == FFN_OK && !strcmp(t.name, "\x01no such tensor")));
    ffn_gguf_value v;
    int64_t k = ffn_gguf_find_key(f, "\x01no such key");
    REQUIRE(ffn_gguf_get(f, "\x01no such key", &v) == (k < 0 ? FFN_ERR_MISSING : FFN_OK));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ffn_gguf_file *f = NULL;
    if (ffn_gguf_open_buffer(data, size, "fuzz", &f) != FFN_OK) {
        REQUIRE(f == NULL);
        REQUIRE(ffn_last_error()[0] != '\0');
        return 0;
    }
    check_file(f, data, size);
    size_t n_kv = ffn_gguf_kv_count(f), n_t = ffn_gguf_count(f);
    ffn_gguf_close(f);

    int fd = memfd_create("fuzz_gguf", MFD_CLOEXEC);
    if (fd < 0) return 0;
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, data + done, size - done);
        if (w <= 0) break;
        done += (size_t)w;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ffn_gguf_file *g = NULL;
    if (done == size) {
        ffn_status s = ffn_gguf_open(path, &g);
        if (s != FFN_OK) fprintf(stderr, "mmap path rejected what the buffer path accepted: %s\n", ffn_last_error());
        REQUIRE(s == FFN_OK);
        REQUIRE(ffn_gguf_kv_count(g) == n_kv && ffn_gguf_count(g) == n_t);
        check_file(g, NULL, size);
        ffn_gguf_close(g);
    }
    close(fd);
    return 0;
}

#include "replay.h"
FFN_FUZZ_REPLAY_MAIN("fuzz_gguf")
