/* llmk: the command-line entry point; dispatches to app/cmd_*.c. */
#include "cli.h"
#include "env_config.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct command {
    const char *name;
    const char *help;
    int (*fn)(int argc, char **argv);
};

#define CLI_ENTRY(name, help) {#name, help, cmd_##name},
static const struct command commands[] = {CLI_COMMANDS(CLI_ENTRY)};
#undef CLI_ENTRY

/* Command names are C identifiers in CLI_COMMANDS; on the command line a
 * '-' stands for each '_' (json-schema-to-grammar). */
static bool name_is(const char *arg, const char *name) {
    for (; *arg && *name; arg++, name++)
        if (*arg != *name && !(*arg == '-' && *name == '_')) return false;
    return !*arg && !*name;
}

static void usage(FILE *to) {
    fprintf(to, "usage: llmk <command> [options]   (llmk <command> -h for its options)\n"
                "       llmk --version\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (commands[i].fn) {
            char name[64];
            snprintf(name, sizeof name, "%s", commands[i].name);
            for (char *c = name; *c; c++) *c = *c == '_' ? '-' : *c;
            fprintf(to, "  %-11s %s\n", name, commands[i].help);
        }
}

/* Started with fd 0, 1 or 2 closed (`>&-`), the first file llmk opens would
 * take that number, and printf would write into it (a model, an output).
 * Park /dev/null there read-only: reads see end of file and writes fail with
 * EBADF, which cli_finish_stdout reports. */
static void guard_std_fds(void) {
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) != -1) continue;
        int n = open("/dev/null", O_RDONLY);
        if (n >= 0 && n != fd) {
            dup2(n, fd);
            close(n);
        }
    }
}

int main(int argc, char **argv) {
    guard_std_fds();
    if (!env_config_apply("llmk")) return CLI_EXIT_USAGE; /* the LLMK_* levers, before any kernel is chosen */
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return cli_finish_stdout("help", CLI_EXIT_OK);
    }
    if (!strcmp(argv[1], "--version")) {
        printf("llmk %s\n", LLMK_VERSION);
        return cli_finish_stdout("version", CLI_EXIT_OK);
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (!name_is(argv[1], commands[i].name)) continue;
        if (!commands[i].fn) {
            fprintf(stderr, "llmk: command '%s' is not built into this binary\n", argv[1]);
            return CLI_EXIT_FAIL;
        }
        return cli_finish_stdout(argv[1], commands[i].fn(argc - 1, argv + 1));
    }
    fprintf(stderr, "llmk: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return CLI_EXIT_USAGE;
}
