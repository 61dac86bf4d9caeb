/* llmk bench --spec: plain against speculative decoding on real prompts. */
#ifndef LLMK_BENCH_SPEC_H
#define LLMK_BENCH_SPEC_H

#include "llmk.h"
#include "spec_opts.h"

#include <stdbool.h>

enum { BENCH_SPEC_MAX_FILES = 16 };

struct bench_spec_opts {
    const char *files[BENCH_SPEC_MAX_FILES]; /* -f: one prompt per file */
    int n_files;
    long n_gen, threads, reps;
    uint32_t kv_type; /* the session's KV cache type (--kv-type; f16 on the fast path, as llmk run) */
    bool raw, json;
    struct spec_opts *so;
};

/* The -f option's parser (a cli_opt_fn) into a struct bench_spec_opts. */
int bench_spec_add_file(const char *cmd, const char *flag, const char *value, void *ctx);
/* For each prompt: greedy decoding of up to n_gen tokens (or the end of the
 * turn), plain and speculative, alternated over reps; one table row each
 * (JSON lines with --json). The token streams must be identical: a
 * difference is reported and fails the run. */
int bench_spec(const llmk_model *m, const char *model_path, const struct bench_spec_opts *o);

#endif
