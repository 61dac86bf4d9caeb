#include "cli.h"


#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static bool stdout_reported; /* a subcommand already said so; cli_finish_stdout stays quiet */

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

static char cli_detail[512]; /* cli_fail's message, until cli_report prints it */

int cli_fail(int status, const char *fmt, ...) {
    char msg[sizeof cli_detail]; /* the arguments may include llmk_last_error() */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(cli_detail, msg, sizeof msg);
    return status;
}

int cli_report(const char *cmd, int status) {
    const char *detail = *cli_detail ? cli_detail : llmk_last_error();
    fprintf(stderr, "llmk %s: error: %s%s%s\n", cmd, llmk_status_name(status), *detail ? ": " : "", detail);
    cli_detail[0] = 0;
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

int cli_read_file(const char *path, char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    /* "-" is standard input; a path must name a regular file, so that a FIFO
     * or device cannot block the read or feed it without end. */
    struct stat sb;
    bool is_stdin = strcmp(path, "-") == 0;
    if (!is_stdin && stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return cli_fail(LLMK_IO_ERROR, "%s is not a regular file (use - to read standard input)", path);
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) return cli_fail(LLMK_IO_ERROR, "cannot open %s: %s", path, strerror(errno));
    size_t cap = 1 << 12, n = 0;
    char *buf = malloc(cap);
    int st = buf ? LLMK_OK : cli_fail(LLMK_OUT_OF_MEMORY, "reading %s", path);
    while (st == LLMK_OK) {
        if (n + 1 >= cap) {
            char *nb = cap >= ((size_t)1 << 30) ? NULL : realloc(buf, cap * 2);
            if (!nb) {
                st = cap >= ((size_t)1 << 30)
                         ? cli_fail(LLMK_INVALID_ARGUMENT, "%s is larger than 1 GiB", path)
                         : cli_fail(LLMK_OUT_OF_MEMORY, "reading %s: %zu bytes", path, cap * 2);
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) st = cli_fail(LLMK_IO_ERROR, "reading %s: %s", path, strerror(errno));
            break;
        }
    }
    if (f != stdin) fclose(f);
    if (st != LLMK_OK) {
        free(buf);
        return st;
    }
    buf[n] = 0;
    *out = buf;
    *len = n;
    return LLMK_OK;
}

size_t cli_json_nul_escape(const char *json, size_t len) {
    for (size_t i = 0; i + 1 < len; i++) {
        if (json[i] != '\\') continue;
        if (json[i + 1] == 'u' && i + 6 <= len && !memcmp(json + i + 2, "0000", 4)) return i;
        i++; /* the escaped character */
    }
    return len;
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

int cli_parse_ids(const char *cmd, const char *flag, const char *s, int32_t **ids, size_t *n) {
    size_t cap = 16, k = 0;
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) return cli_usage_error(cmd, "%s: out of memory", flag);
    const char *p = s;
    while (is_space(*p)) p++;
    bool bracket = *p == '[';
    if (bracket) p++;
    for (;;) {
        while (is_space(*p) || *p == ',') p++;
        if (!*p || (bracket && *p == ']')) break;
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 0 || x > INT32_MAX) {
            free(v);
            return cli_usage_error(cmd, "%s: '%.20s' is not a token id", flag, p);
        }
        if (k == cap) {
            int32_t *nv = realloc(v, 2 * cap * sizeof *v);
            if (!nv) {
                free(v);
                return cli_usage_error(cmd, "%s: out of memory", flag);
            }
            v = nv;
            cap *= 2;
        }
        v[k++] = (int32_t)x;
        p = end;
        if (*p && *p != ',' && !is_space(*p) && !(bracket && *p == ']')) {
            free(v);
            return cli_usage_error(cmd, "%s: unexpected '%c' after %ld", flag, *p, x);
        }
    }
    if (bracket) {
        if (*p != ']') {
            free(v);
            return cli_usage_error(cmd, "%s: the JSON array is not closed", flag);
        }
        for (p++; is_space(*p); p++) {
        }
        if (*p) {
            free(v);
            return cli_usage_error(cmd, "%s: text after the JSON array", flag);
        }
    }
    *ids = v;
    *n = k;
    return CLI_EXIT_OK;
}

uint32_t cli_kv_type_or_default(uint32_t kv_type, int path) {
    if (kv_type != (uint32_t)CLI_KV_DEFAULT) return kv_type;
    return path == LLMK_PATH_FAST && !getenv("LLMK_KV_TYPE") ? LLMK_TYPE_F16 : LLMK_TYPE_F32;
}

/* The temporary file of the outfile now open, for the signal handler. A copy
 * in static storage: the handler may only call async-signal-safe unlink(). */
static char pending_tmp[4096];
static volatile sig_atomic_t pending_set;
static const int cleanup_signals[] = {SIGINT, SIGTERM, SIGHUP};

static void remove_pending(int sig) {
    if (pending_set) unlink(pending_tmp);
    signal(sig, SIG_DFL);
    raise(sig);
}

int cli_outfile_open(const char *path, const char *const *inputs, size_t n, llmk_outfile **out) {
    int st = llmk_outfile_open(path, inputs, n, out);
    const char *tmp = st == LLMK_OK ? llmk_outfile_temp_path(*out) : NULL;
    if (!tmp || strlen(tmp) >= sizeof pending_tmp) return st;
    memcpy(pending_tmp, tmp, strlen(tmp) + 1);
    pending_set = 1;
    for (size_t i = 0; i < CLI_LEN(cleanup_signals); i++) {
        struct sigaction old;
        if (sigaction(cleanup_signals[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL)
            signal(cleanup_signals[i], remove_pending);
    }
    return st;
}

int cli_outfile_commit(llmk_outfile *o) {
    int st = llmk_outfile_commit(o);
    pending_set = 0;
    return st;
}

void cli_outfile_discard(llmk_outfile *o) {
    llmk_outfile_discard(o);
    pending_set = 0;
}

int cli_finish_stdout(const char *cmd, int rc) {
    /* fclose, not fflush alone: a closed descriptor (>&-) only shows there.
     * ferror() sets no errno: an earlier failed write reports as "write error". */
    errno = 0;
    int bad = ferror(stdout) || fflush(stdout) != 0;
    int e = errno;
    if (fclose(stdout) != 0 && !bad) bad = 1, e = errno;
    if (!bad) return rc;
    if (stdout_reported && rc != CLI_EXIT_OK) return rc;
    fprintf(stderr, "llmk %s: error: %s: writing standard output: %s\n", cmd, llmk_status_name(LLMK_IO_ERROR),
            e ? strerror(e) : "write error");
    return rc == CLI_EXIT_OK ? CLI_EXIT_FAIL : rc;
}

int cli_stdout_status(void) {
    if (!ferror(stdout)) return LLMK_OK;
    stdout_reported = true;
    return cli_fail(LLMK_IO_ERROR, "writing standard output failed (disk full, or closed); stopping");
}

void cli_warn_long_ctx(const char *cmd, const llmk_model *m, int64_t n_ctx) {
    int32_t train = llmk_model_hparams(m)->n_ctx_train;
    if (n_ctx > train)
        fprintf(stderr, "llmk %s: warning: a context of %lld tokens exceeds the %d the model was trained for; "
                "output past that may degrade\n", cmd, (long long)n_ctx, train);
}

void cli_log_load(const char *cmd, double load_s, double init_s, const char *kernels, int threads, uint32_t kv_type) {
    const char *kv = llmk_type_name(kv_type);
    fprintf(stderr, "llmk %s: model loaded in %.2f s, weights ready in %.2f s (kernels %s, %d threads, KV cache %s)\n",
            cmd, load_s, init_s, kernels ? kernels : "?", threads, kv ? kv : "?");
}

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
