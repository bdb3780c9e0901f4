/* ffn.c -- the `ffn` command: a thin dispatcher over the subcommands in
 * tools/cmd_*.c (listed in tools/commands.def).  Only the public API is
 * used below this line. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

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
            "usage: ffn <command> [options]     (ffn <command> --help for its options)\n\n"
            "commands:\n",
            ffn_version());
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nenvironment: FFN_NUM_THREADS (default threads), FFN_SIMD=scalar|avx2|avx512\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *name = argv[1];
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
    fprintf(stderr, "ffn: unknown command '%s' (see ffn --help)\n", name);
    return CLI_EXIT_USAGE;
}
