/* Phase timings of a context's profiling mode, summed by kind (the phase's
 * name without its "blk.N." layer prefix): llmk bench --phases, alone and
 * with -B. */
#ifndef LLMK_BENCH_PHASES_H
#define LLMK_BENCH_PHASES_H

#include "llmk.h"

#include <stdio.h>

enum { BENCH_PHASE_KINDS = 64 };

struct bench_phase_sums {
    const char *kind[BENCH_PHASE_KINDS]; /* valid while the context lives */
    double ns[BENCH_PHASE_KINDS];
    int n;
};

/* The context's timings since its last reset, by kind, in program order. */
void bench_phase_sums_read(const llmk_context *c, struct bench_phase_sums *s);
/* One line per kind that took time: microseconds per unit (n of them:
 * tokens, or batched steps; unit names the column) and share. */
void bench_phase_sums_print(FILE *o, const struct bench_phase_sums *s, long n, const char *unit);

#endif
