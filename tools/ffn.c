/* ffn.c -- the `ffn` command: a thin dispatcher over the subcommands in
 * tools/cmd_*.c (listed in tools/commands.def).  Only the public API is
 * used below this line. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CMD(name, fn, summary) int fn(int argc, char **argv);
#include "commands.def"
#undef CMD

typedef struct command {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} command;

static const command commands[] = {
#define CMD(name, fn, summary) {#name, fn, summary},
#include "commands.def"
#undef CMD
};

static void usage(FILE *f) {
    fprintf(f,
            "ffn %s -- the feed-forward half of a Transformer block: dense FFN, the GLU\n"
            "family and Mixture of Experts, forward and backward, and tools to train,\n"
            "compare, size and look inside them.\n\n"
            "usage: ffn <command> [options]     (ffn <command> --help or ffn help <command>\n"
            "                                    for its options)\n\n"
            "commands:\n",
            ffn_version());
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nThe same flag means the same everywhere: --threads 0 (the default) uses\n"
               "FFN_NUM_THREADS or every core; layers count from 0; --json prints JSON on\n"
               "stdout; diagnostics go to stderr; bad usage exits 2, a failure 1.\n");
    fprintf(f, "\nenvironment:\n"
               "  FFN_NUM_THREADS    default thread count (else all cores)\n"
               "  FFN_SIMD           cap the kernels' SIMD level: scalar, avx2 or avx512\n"
               "  OMP_WAIT_POLICY    passive unless set: idle threads sleep instead of\n"
               "                     spinning (set active on a dedicated machine)\n");
}

/* OpenMP threads that spin while waiting steal the cores from each other
 * and from every other process on a busy two-core machine: measured here,
 * training ran 5x slower with spinning waits under load and no slower
 * without them when idle.  libgomp reads OMP_WAIT_POLICY when it loads,
 * before main, so when the user has not chosen, set "passive" and start
 * again (once: the new process sees the variable). */
static void prefer_passive_waits(char **argv) {
    if (getenv("OMP_WAIT_POLICY")) return;
    if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
    execv("/proc/self/exe", argv); /* returns only on failure: go on as we are */
}

int main(int argc, char **argv) {
    prefer_passive_waits(argv);
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (!strcmp(name, "help") && argc >= 3) { /* ffn help CMD [SUB] = ffn CMD [SUB] --help */
        char *args[4] = {argv[2], argc >= 4 ? argv[3] : NULL, "--help", NULL};
        if (!args[1] || args[1][0] == '-') args[1] = "--help", args[2] = NULL;
        int n = args[2] ? 3 : 2;
        for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
            if (!strcmp(commands[i].name, argv[2])) return commands[i].fn(n, args);
        fprintf(stderr, "ffn help: unknown command '%s' (see ffn --help)\n", argv[2]);
        return CLI_EXIT_USAGE;
    }
    if (!strcmp(name, "--help") || !strcmp(name, "-h") || !strcmp(name, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(name, "--version")) {
        printf("ffn %s\n", ffn_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(commands[i].name, name)) return commands[i].fn(argc - 1, argv + 1);
    const char *near = NULL;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (cli_edit_distance(name, commands[i].name) <= 2) near = commands[i].name;
    }
    if (near)
        fprintf(stderr, "ffn: unknown command '%s' (did you mean %s? see ffn --help)\n", name,
                near);
    else
        fprintf(stderr, "ffn: unknown command '%s' (see ffn --help)\n", name);
    return CLI_EXIT_USAGE;
}
