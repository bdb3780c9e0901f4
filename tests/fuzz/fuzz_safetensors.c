/* fuzz_safetensors.c -- libFuzzer target for the safetensors reader
 * (src/format/safetensors.c) through ffn_st_open_buffer, and through the real
 * mmap path (ffn_st_open on a memfd) for inputs the reader accepts.  Each
 * input is tried as a file and, when it starts with '{', as header NUL data
 * (see LLVMFuzzerTestOneInput).
 *
 * For every accepted file it checks, and traps when one breaks:
 *   - every tensor's bytes lie inside the input, nbytes = numel x dtype size,
 *     the tensors tile the data buffer in order;
 *   - find(name) returns the same tensor as get(i);
 *   - fp32 conversion of float tensors reads only those bytes (ASan checks);
 *   - metadata pairs are readable;
 *   - the mmap path accepts the same file with the same tensors.
 * Built by `make fuzz`; -DFFN_FUZZ_REPLAY adds a main() that replays files
 * (tests/cli/test_fuzz_regress.sh). */
#include "ffn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_safetensors: invariant failed: %s (line %d)\n", #cond, __LINE__); \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static void check_file(const ffn_st_file *f, const uint8_t *base, size_t size) {
    size_t n = ffn_st_count(f);
    size_t prev_end = 0;
    for (size_t i = 0; i < n; i++) {
        ffn_st_tensor t, u;
        REQUIRE(ffn_st_get(f, i, &t) == FFN_OK);
        REQUIRE(t.ndim >= 0 && t.ndim <= FFN_ST_MAX_DIMS);
        int64_t numel = 1;
        for (int d = 0; d < t.ndim; d++) {
            REQUIRE(t.shape[d] >= 0);
            numel *= t.shape[d]; /* cannot overflow: validated */
        }
        REQUIRE(numel == t.numel);
        REQUIRE((size_t)t.numel * ffn_dtype_size(t.dtype) == t.nbytes);
        REQUIRE(t.offset <= size && t.nbytes <= size - t.offset);
        if (base) REQUIRE((const uint8_t *)t.data == base + t.offset);
        if (i == 0) prev_end = t.offset;
        REQUIRE(t.offset == prev_end); /* tiles the data buffer */
        prev_end = t.offset + t.nbytes;
        REQUIRE(ffn_st_find(f, t.name, &u) == FFN_OK);
        REQUIRE(u.offset == t.offset && u.nbytes == t.nbytes && !strcmp(u.name, t.name));
        if (t.dtype == FFN_DTYPE_F32 || t.dtype == FFN_DTYPE_F16 || t.dtype == FFN_DTYPE_BF16 ||
            t.dtype == FFN_DTYPE_F64) {
            float *dst = NULL;
            REQUIRE(ffn_st_load_f32(f, t.name, t.ndim, t.shape, &dst) == FFN_OK);
            free(dst);
        } else {
            float one;
            REQUIRE(ffn_st_read_f32(f, t.name, t.ndim, t.shape, &one) == FFN_ERR_FORMAT);
        }
    }
    if (n) REQUIRE(prev_end == size);
    for (size_t i = 0; i < ffn_st_metadata_count(f); i++) {
        const char *k, *v;
        REQUIRE(ffn_st_metadata_at(f, i, &k, &v) == FFN_OK);
        REQUIRE(ffn_st_metadata(f, k) == v);
    }
    ffn_st_tensor t;
    REQUIRE(ffn_st_find(f, "\x01no such tensor", &t) == FFN_ERR_MISSING);
}

static void run_one(const uint8_t *data, size_t size) {
    ffn_st_file *f = NULL;
    if (ffn_st_open_buffer(data, size, "fuzz", &f) != FFN_OK) {
        REQUIRE(f == NULL);
        REQUIRE(ffn_last_error()[0] != '\0');
        return;
    }
    check_file(f, data, size);
    size_t count = ffn_st_count(f);
    ffn_st_close(f);

    /* the same bytes through the file + mmap path */
    int fd = memfd_create("fuzz_safetensors", MFD_CLOEXEC);
    if (fd < 0) return;
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, data + done, size - done);
        if (w <= 0) break;
        done += (size_t)w;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ffn_st_file *g = NULL;
    if (done == size) {
        ffn_status s = ffn_st_open(path, &g);
        if (s != FFN_OK) fprintf(stderr, "mmap path rejected what the buffer path accepted: %s\n", ffn_last_error());
        REQUIRE(s == FFN_OK);
        REQUIRE(ffn_st_count(g) == count);
        check_file(g, NULL, size);
        ffn_st_close(g);
    }
    close(fd);
}

/* Two views of each input:
 *   1. the bytes as a file;
 *   2. when the input starts with '{': "header JSON" NUL "data", turned
 *      into a file with the right 8-byte length in front, so that the
 *      mutator works on headers and offsets instead of mostly breaking the
 *      length field. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    run_one(data, size);
    if (size > 0 && data[0] == '{') {
        const uint8_t *nul = memchr(data, 0, size);
        size_t header_len = nul ? (size_t)(nul - data) : size;
        size_t rest = nul ? size - header_len - 1 : 0;
        uint8_t *file = malloc(8 + header_len + rest);
        if (!file) return 0;
        uint64_t n = header_len;
        memcpy(file, &n, 8);
        memcpy(file + 8, data, header_len);
        if (rest) memcpy(file + 8 + header_len, nul + 1, rest);
        run_one(file, 8 + header_len + rest);
        free(file);
    }
    return 0;
}

#include "replay.h"
FFN_FUZZ_REPLAY_MAIN("fuzz_safetensors")
