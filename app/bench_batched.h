/* llmk bench -B: the batched measurement (llama-batched-bench's figures). */
#ifndef LLMK_BENCH_BATCHED_H
#define LLMK_BENCH_BATCHED_H

#include "cli.h"
#include "progress.h"

#include <stdbool.h>
#include <stdint.h>

enum { BENCH_MAX_B = 1024, BENCH_MAX_LIST = 32 }; /* BENCH_MAX_B: llmk_context's n_seq_max limit */

struct bench_batch_list {
    int32_t b[BENCH_MAX_LIST];
    int n;
};

struct bench_batched_opts {
    struct bench_batch_list list;
    long n_prompt, n_gen, threads, reps, n_batch;
    uint32_t kv_type;
    bool json, long_ctx;
    bool phases;                /* --phases: per-phase decode timings after the table */
    bool verbose;               /* -v: the load line */
    double load_s;              /* llmk_model_load's time, for it */
    struct cli_progress *load;  /* drawn during the context's init */
};

/* The -B option's parser (a cli_opt_fn): counts in 1..BENCH_MAX_B, no
 * repeats, into a struct bench_batch_list. */
int bench_parse_batch_list(const char *cmd, const char *flag, const char *value, void *ctx);
/* Prints one row per count (a table, or JSON lines with --json); a status. */
int bench_batched(const llmk_model *m, const struct bench_batched_opts *o);

#endif
