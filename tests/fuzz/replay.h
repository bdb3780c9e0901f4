/* replay.h -- the one replay driver of the fuzz targets.  Built with
 * -DFFN_FUZZ_REPLAY (tests/cli/test_fuzz_regress.sh), a target is a plain
 * program: FFN_FUZZ_REPLAY_MAIN("fuzz_x") gives it a main that reads each
 * file named on the command line and runs LLVMFuzzerTestOneInput on it,
 * exiting 0 when none crashed.  Under libFuzzer it expands to nothing. */
#ifndef FFN_FUZZ_REPLAY_H
#define FFN_FUZZ_REPLAY_H
#ifdef FFN_FUZZ_REPLAY
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fuzz_replay_main(int argc, char **argv, const char *name) {
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) {
            perror(argv[i]);
            return 1;
        }
        size_t cap = 1 << 16, n = 0, r;
        unsigned char *buf = malloc(cap);
        while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
            n += r;
            if (n == cap) buf = realloc(buf, cap *= 2);
        }
        fclose(f);
        if (!buf) return 1;
        LLVMFuzzerTestOneInput(buf, n);
        free(buf);
    }
    printf("%s: replayed %d inputs\n", name, argc - 1);
    return 0;
}
#define FFN_FUZZ_REPLAY_MAIN(name) \
    int main(int argc, char **argv) { return fuzz_replay_main(argc, argv, name); }
#else
#define FFN_FUZZ_REPLAY_MAIN(name)
#endif
#endif
