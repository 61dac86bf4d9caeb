/* The llmk command's option tables. Each subcommand describes its options as
 * rows; cli_opts_parse reads argv against them and -h prints help generated
 * from the same rows, so what is parsed and what is documented cannot drift
 * apart. The options several subcommands take (-m, -t, --ctx, --path,
 * --kv-type, --allow-long-ctx) are defined once below, with one limit each.
 *
 * Syntax, the same in every subcommand: `--opt value` and `--opt=value` for
 * a long option (or its alias: llama.cpp's spelling, --ctx-size for --ctx),
 * `-x value` for a short one, a flag never takes `=value`,
 * `--` ends the options, `-` alone is an argument (standard input). A value
 * is the next argument whatever it looks like (`--seed -1`). An option given
 * twice keeps the later value, as llama.cpp does; a repeatable one (--stop)
 * accumulates through its callback. Every command also takes -h/--help and
 * --version; an unknown option is refused naming the nearest known one. */
#ifndef LLMK_OPTS_H
#define LLMK_OPTS_H

#include "cli.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum cli_opt_kind {
    CLI_OPT_FLAG, /* no value: sets *dest.flag */
    CLI_OPT_LONG, /* an integer in [lo, hi] into *dest.l */
    CLI_OPT_I32,  /* the same into an int32_t (library structs) */
    CLI_OPT_I64,  /* the same into an int64_t */
    CLI_OPT_NUM,  /* a finite number in [dlo, dhi] into *dest.d */
    CLI_OPT_STR,  /* the value itself into *dest.s (argv outlives the command) */
    CLI_OPT_FN,   /* parse(cmd, flag, value, dest.ctx): enums, pairs, lists */
};

/* Parses value for flag (as the user spelt it, for messages); returns 1, or
 * 0 after printing a usage error with cli_usage_error. */
typedef int (*cli_opt_fn)(const char *cmd, const char *flag, const char *value, void *ctx);

struct cli_opt {
    const char *name; /* "--ctx", or NULL for a short-only option */
    const char *alias; /* a second name ("--ctx-size", "-cnv": llama.cpp's spelling), or NULL */
    char short_name;  /* 'c' for -c, or 0 */
    enum cli_opt_kind kind;
    union {
        bool *flag;
        long *l;
        int32_t *i32;
        int64_t *i64;
        double *d;
        const char **s;
        void *ctx;
    } dest;
    long lo, hi;      /* CLI_OPT_LONG / _I32 / _I64 */
    double dlo, dhi;  /* CLI_OPT_NUM */
    cli_opt_fn parse; /* CLI_OPT_FN */
    const char *metavar; /* the value in the help ("N", "FILE"); NULL for a flag */
    const char *help;    /* one line; the help printer wraps it */
    const char *dflt;    /* when set, the help adds "(default: dflt)" */
    bool repeat;         /* may be given more than once (the help says so) */
};

/* Rows. The dest union's members are typed, so a destination of the wrong
 * type is a compile error (-Werror), not a silent overwrite. */
#define CLI_FLAG(nm, sh, p, h) {.name = (nm), .short_name = (sh), .kind = CLI_OPT_FLAG, .dest.flag = (p), .help = (h)}
/* A flag with a second long name (--raw and --no-chat). */
#define CLI_FLAG2(nm, al, sh, p, h) \
    {.name = (nm), .alias = (al), .short_name = (sh), .kind = CLI_OPT_FLAG, .dest.flag = (p), .help = (h)}
#define CLI_LONG(nm, sh, p, lo_, hi_, mv, h) \
    {.name = (nm), .short_name = (sh), .kind = CLI_OPT_LONG, .dest.l = (p), .lo = (lo_), .hi = (hi_), \
     .metavar = (mv), .help = (h)}
#define CLI_I32(nm, sh, p, lo_, hi_, mv, h) \
    {.name = (nm), .short_name = (sh), .kind = CLI_OPT_I32, .dest.i32 = (p), .lo = (lo_), .hi = (hi_), \
     .metavar = (mv), .help = (h)}
#define CLI_I64(nm, sh, p, lo_, hi_, mv, h) \
    {.name = (nm), .short_name = (sh), .kind = CLI_OPT_I64, .dest.i64 = (p), .lo = (lo_), .hi = (hi_), \
     .metavar = (mv), .help = (h)}
#define CLI_NUM(nm, sh, p, lo_, hi_, mv, h) \
    {.name = (nm), .short_name = (sh), .kind = CLI_OPT_NUM, .dest.d = (p), .dlo = (lo_), .dhi = (hi_), \
     .metavar = (mv), .help = (h)}
#define CLI_STR(nm, sh, p, mv, h) \
    {.name = (nm), .short_name = (sh), .kind = CLI_OPT_STR, .dest.s = (p), .metavar = (mv), .help = (h)}
#define CLI_FN(nm, sh, fn, c, mv, h) \
    {.name = (nm), .short_name = (sh), .kind = CLI_OPT_FN, .dest.ctx = (c), .parse = (fn), .metavar = (mv), \
     .help = (h)}
#define CLI_REPEAT(nm, sh, fn, c, mv, h) \
    {.name = (nm), .short_name = (sh), .kind = CLI_OPT_FN, .dest.ctx = (c), .parse = (fn), .metavar = (mv), \
     .help = (h), .repeat = true}

/* ---- the shared rows ------------------------------------------------------
 * One definition and one limit per option. -t stops at the executor's worker
 * cap; --ctx at the library's context limit (llmk_session_init). A command
 * whose default differs says so in its own help text (--ctx) or passes it. */
enum { CLI_THREADS_MAX = 256, CLI_CTX_MAX = 1 << 22 };

#define CLI_OPT_MODEL(p) \
    {.name = "--model", .short_name = 'm', .kind = CLI_OPT_STR, .dest.s = (p), .metavar = "FILE", \
     .help = "GGUF model", .dflt = cli_default_model()}
#define CLI_OPT_THREADS(p) \
    CLI_LONG("--threads", 't', p, 1, CLI_THREADS_MAX, "N", "worker threads (default: one per core)")
#define CLI_OPT_CTX(p, h) \
    {.name = "--ctx", .alias = "--ctx-size", .short_name = 'c', .kind = CLI_OPT_LONG, .dest.l = (p), .lo = 1, \
     .hi = CLI_CTX_MAX, .metavar = "N", .help = (h)}
#define CLI_OPT_PATH(p) \
    CLI_FN("--path", 0, cli_opt_path, p, "P", "decode path: ref (f64 reference), f32 or fast (default fast)")
/* --kv-type into a uint32_t; the commands that run a model start it at
 * CLI_KV_DEFAULT and resolve it with cli_kv_type_or_default. */
#define CLI_OPT_KV_TYPE(p, h) CLI_FN("--kv-type", 0, cli_opt_kv_type, p, "T", h)
#define CLI_KV_TYPE_HELP "KV cache type: f16 (the fast path's default), f32 or q8_0 (not f32: fast path only)"
#define CLI_OPT_LONG_CTX(p) \
    CLI_FLAG("--allow-long-ctx", 0, p, "allow a context above the model's training context (warns)")

/* What a command says on stderr besides errors (llama.cpp's spellings):
 * --log-disable silences the informational lines (stats, notes, progress),
 * -v adds detail; each command's help says what its lines are. --progress /
 * --no-progress override the terminal check, into a struct
 * cli_progress_flags (app/progress.h); the macro is two rows. */
#define CLI_OPT_LOG_DISABLE(p, h) CLI_FLAG("--log-disable", 0, p, h)
#define CLI_OPT_VERBOSE(p, h) CLI_FLAG("--verbose", 'v', p, h)
#define CLI_OPT_PROGRESS(p) \
    CLI_FLAG("--progress", 0, &(p)->on, "draw the progress line on stderr even when it is not a terminal"), \
    CLI_FLAG("--no-progress", 0, &(p)->off, "no progress line (default: one when stderr is a terminal)")

/* --path ref|f32|fast into an int (enum llmk_path). */
int cli_opt_path(const char *cmd, const char *flag, const char *value, void *ctx);
/* --kv-type f32|f16|q8_0 into a uint32_t (LLMK_TYPE_*). */
int cli_opt_kv_type(const char *cmd, const char *flag, const char *value, void *ctx);


/* A titled group of rows; the help prints them under the title. */
struct cli_opt_section {
    const char *title; /* "sampling:"; NULL: "options:" */
    const struct cli_opt *rows;
    size_t n;
};

/* One subcommand's options and positional arguments. */
struct cli_cmd {
    const char *name;   /* "run": messages read "llmk run: ..." */
    const char *usage;  /* hand-written usage line(s) and intro, ending in a newline */
    const char *epilog; /* printed after the options, or NULL */
    const struct cli_opt_section *sections;
    size_t n_sections;
    /* Positional arguments, in order, into pos[0 .. max_pos); n_pos says how
     * many came. pos_name names them in errors ("TEXT"). */
    const char **pos;
    int max_pos, n_pos;
    const char *pos_name;
};

/* Parses argv[1 .. argc) (argv[0] is the subcommand's name). Returns
 * CLI_OPTS_GO when the command should run, otherwise the exit code to return
 * at once: CLI_EXIT_OK after -h/--help printed the help (or --version the
 * version) to stdout, CLI_EXIT_USAGE after a usage error on stderr. An
 * unknown option's error names the nearest known one when one is close. */
enum { CLI_OPTS_GO = -1 };
int cli_opts_parse(struct cli_cmd *c, int argc, char **argv);

/* Whether argument a, as cli_opts_parse read it, is an option whose value is
 * the next argument ("-p", not "--prompt=x" nor a flag): for a command that
 * hands its arguments on to another (run -cnv to chat). */
bool cli_opts_takes_value(const struct cli_cmd *c, const char *a);

/* The generated help: usage, every section's rows, -h, --version, the epilog. */
void cli_opts_help(const struct cli_cmd *c, FILE *to);

#endif
