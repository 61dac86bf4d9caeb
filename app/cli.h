/* Shared pieces of the llmk command: subcommand entry points, value parsing
 * helpers and error reporting. Each subcommand lives in app/cmd_*.c; its
 * options are a table (app/opts.h). */
#ifndef LLMK_CLI_H
#define LLMK_CLI_H

#include "llmk.h"

#include <stdbool.h>
#include <stdint.h>

/* The one version string: `llmk --version` and every subcommand's --version
 * print "llmk VERSION". Raise it when a release changes what users see. */
#define LLMK_VERSION "0.1.0"

/* Exit codes: 0 success, 1 a runtime failure (status printed), 2 bad usage. */
enum { CLI_EXIT_OK = 0, CLI_EXIT_FAIL = 1, CLI_EXIT_USAGE = 2 };

/* Default model file: $LLMK_MODELS (or ~/.cache/llmk) / SmolLM2-135M-Instruct.Q4_1.gguf. */
const char *cli_default_model(void);

/* Print "llmk <cmd>: error: <status name>: <detail>" to stderr; returns
 * CLI_EXIT_FAIL. The detail is the command's own (cli_fail) when it set one
 * since the last report, else the library's llmk_last_error(). */
int cli_report(const char *cmd, int status);

/* A failure the command itself finds, in the library's status vocabulary:
 * records the detail (printf-style) for cli_report and returns status. The
 * current llmk_last_error() may be passed as an argument. */
int cli_fail(int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#define CLI_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Overflow-safe unsigned arithmetic: false when the result would wrap. */
static inline bool cli_mul_u64(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_mul_overflow(a, b, out); }
static inline bool cli_add_u64(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_add_overflow(a, b, out); }

/* The rows [lo, hi) of n that worker ith of nth takes: a function of the
 * shape only, as the library splits its work. */
static inline void cli_split_range(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    int64_t per = n / nth, rem = n % nth;
    *lo = ith * per + (ith < rem ? ith : rem);
    *hi = *lo + per + (ith < rem ? 1 : 0);
}

/* Byte offset of the first \u0000 escape in JSON text, or len when none
 * ("\\u0000", an escaped backslash, is not one): cJSON's strings end at the
 * NUL it decodes, so a request carrying one would be cut short silently. */
size_t cli_json_nul_escape(const char *json, size_t len);

/* Print "llmk <cmd>: <message>" and a hint to use -h; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Strict number parsing for flag values: the whole string must be a number in
 * [lo, hi]. On failure prints an error naming the flag and returns 0. */
int cli_parse_long(const char *cmd, const char *flag, const char *s, long lo, long hi, long *out);
int cli_parse_double(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out);

/* Read a whole file ("-" is stdin) into a NUL-terminated malloc'd buffer of
 * at most 1 GiB. Returns a status (LLMK_IO_ERROR naming the file, ...). */
int cli_read_file(const char *path, char **out, size_t *len);

/* Parse token ids written "1,2,3", "1 2 3" or as a JSON array "[1, 2, 3]"
 * into a malloc'd array (possibly empty; each id in [0, INT32_MAX]). On bad
 * input prints a usage error naming `flag` and returns CLI_EXIT_USAGE. */
int cli_parse_ids(const char *cmd, const char *flag, const char *s, int32_t **ids, size_t *n);

/* Outputs go through llmk_outfile (temporary file renamed when complete).
 * These wrappers also remove the temporary file if SIGINT/SIGTERM/SIGHUP ends
 * the process while it is open (signals left at their default action only).
 * cli_outfile_open refuses an output that is one of inputs[0..n). */
int cli_outfile_open(const char *path, const char *const *inputs, size_t n, llmk_outfile **out);
int cli_outfile_commit(llmk_outfile *o);
void cli_outfile_discard(llmk_outfile *o);

/* Streaming output: LLMK_IO_ERROR with a message once stdout has failed (disk
 * full, closed), so generation stops instead of running on unseen. */
int cli_stdout_status(void);

/* --allow-long-ctx lets a context exceed the model's training length (the
 * library refuses it otherwise); this prints the warning llama.cpp users
 * know when it does. */
void cli_warn_long_ctx(const char *cmd, const llmk_model *m, int64_t n_ctx);

/* -v's line about the load: "llmk CMD: model loaded in 0.02 s, weights
 * ready in 0.31 s (kernels avx2, 2 threads, KV cache f16)"; the second time
 * is the session's or context's init, where the fast path repacks. */
void cli_log_load(const char *cmd, double load_s, double init_s, const char *kernels, int threads, uint32_t kv_type);

/* Seconds on a monotonic clock, for the stats lines. */
double cli_now(void);

/* After a subcommand: flush stdout and turn a write error (disk full, closed
 * or broken pipe) into a failure with a message; returns the exit code. */
int cli_finish_stdout(const char *cmd, int rc);

/* --kv-type not given (kv_type == CLI_KV_DEFAULT): f16 on the fast path, as
 * llama.cpp's default cache, unless LLMK_KV_TYPE is set (the executor then
 * follows it); f32 on the others, which keep f32 caches. */
enum { CLI_KV_DEFAULT = -1 };
uint32_t cli_kv_type_or_default(uint32_t kv_type, int path);

/* Subcommands. Declared weak so the dispatcher links while a subcommand is
 * being built; main() reports one that is absent instead of crashing. */
#define CLI_COMMANDS(X)                                                                   \
    X(run, "generate text from a prompt")                                                 \
    X(chat, "interactive chat using the model's template")                                \
    X(batch, "offline generation for many prompts (JSON lines in, JSON lines out)")        \
    X(serve, "OpenAI-compatible HTTP server on the batching engine")                      \
    X(info, "describe a model file (or --system: CPU features and codecs)")               \
    X(logits, "write teacher-forced logits as f32 rows")                                  \
    X(embed, "embeddings of prompts: pooled final hidden states")                         \
    X(tokenize, "text to token ids")                                                      \
    X(detokenize, "token ids to text")                                                    \
    X(template, "render a chat template for a messages file")                             \
    X(plan, "memory and speed planning from a model's metadata")                          \
    X(quantize, "re-quantize a GGUF file")                                                \
    X(perplexity, "perplexity / KL-divergence over a text")                               \
    X(bench, "prompt and generation throughput")                                         \
    X(json_schema_to_grammar, "print the GBNF grammar a JSON Schema converts to")

#define CLI_DECLARE(name, help) int cmd_##name(int argc, char **argv) __attribute__((weak));
CLI_COMMANDS(CLI_DECLARE)
#undef CLI_DECLARE

#endif
