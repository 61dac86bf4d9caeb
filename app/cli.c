#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

const char *cli_default_model(void) {
    static char path[4096];
    const char *dir = getenv("LLMK_MODELS");
    if (dir && *dir) {
        snprintf(path, sizeof path, "%s/SmolLM2-135M-Instruct.Q4_1.gguf", dir);
    } else {
        const char *home = getenv("HOME");
        snprintf(path, sizeof path, "%s/.cache/llmk/SmolLM2-135M-Instruct.Q4_1.gguf",
                 home && *home ? home : ".");
    }
    return path;
}

int cli_report(const char *cmd, int status) {
    const char *detail = llmk_last_error();
    fprintf(stderr, "llmk %s: error: %s%s%s\n", cmd, llmk_status_name(status),
            *detail ? ": " : "", detail);
    return CLI_EXIT_FAIL;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "llmk %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see 'llmk %s -h')\n", cmd);
    return CLI_EXIT_USAGE;
}

int cli_parse_long(const char *cmd, const char *flag, const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || v < lo || v > hi) {
        cli_usage_error(cmd, "%s expects an integer in [%ld, %ld], got '%s'", flag, lo, hi,
                        s ? s : "");
        return 0;
    }
    *out = v;
    return 1;
}

int cli_parse_double(const char *cmd, const char *flag, const char *s, double lo, double hi,
                     double *out) {
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || !*s || *end || errno || !isfinite(v) || v < lo || v > hi) {
        cli_usage_error(cmd, "%s expects a number in [%g, %g], got '%s'", flag, lo, hi,
                        s ? s : "");
        return 0;
    }
    *out = v;
    return 1;
}
