/* The cost shape seed 000 describes: appending to a KV cache by copying it
 * (llmk_kv_cache_append_flat) costs more per appended element the longer the
 * cache is; appending into reserved capacity (llmk_kv_cache_append_into_flat)
 * does not. Prints nanoseconds per appended element at 2,048 and 133,120
 * cached elements and the ratios. A measurement, not a test: nothing here
 * asserts a figure. */
#include "../app/env_config.h"
#include "llmk.h"
#include "llmk_primitives.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { N_NEW = 128, SMALL = 2048, LARGE = 2048 + 131072, ROUNDS = 7 };

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Best of ROUNDS rounds of `calls` appends each, in ns per appended element. */
static double time_flat(const double *cache, int64_t cache_len, const double *vals, int calls) {
    double best = 1e300;
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now_ns();
        for (int c = 0; c < calls; c++) {
            double *out = NULL;
            int64_t n = 0;
            if (llmk_kv_cache_append_flat(cache, (size_t)cache_len, vals, N_NEW, cache_len, N_NEW,
                                          &out, &n) != LLMK_OK) {
                fprintf(stderr, "append_flat failed: %s\n", llmk_last_error());
                exit(1);
            }
            /* Touch the result so the copy cannot be elided. */
            if (out[n - 1] != vals[N_NEW - 1]) exit(1);
            free(out);
        }
        double per = (now_ns() - t0) / ((double)calls * N_NEW);
        if (per < best) best = per;
    }
    return best;
}

static double time_into(double *cache, size_t capacity, int64_t cache_len, const double *vals,
                        int calls) {
    double best = 1e300;
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now_ns();
        for (int c = 0; c < calls; c++) {
            /* The same slot each time: the cost of one decode step's append. */
            if (llmk_kv_cache_append_into_flat(cache, capacity, vals, N_NEW, cache_len, N_NEW) !=
                LLMK_OK) {
                fprintf(stderr, "append_into failed: %s\n", llmk_last_error());
                exit(1);
            }
        }
        double per = (now_ns() - t0) / ((double)calls * N_NEW);
        if (per < best) best = per;
        if (cache[cache_len + N_NEW - 1] != vals[N_NEW - 1]) exit(1);
    }
    return best;
}

int main(void) {
    if (!env_config_apply("bench_kv_append")) return 2;
    double vals[N_NEW];
    for (int i = 0; i < N_NEW; i++) vals[i] = 0.5 * i;
    double *cache = NULL;
    if (llmk_kv_cache_reserve_flat(LARGE + N_NEW, &cache) != LLMK_OK) {
        fprintf(stderr, "reserve failed: %s\n", llmk_last_error());
        return 1;
    }
    for (int64_t i = 0; i < LARGE; i++) cache[i] = (double)i;

    double flat_small = time_flat(cache, SMALL, vals, 2000);
    double flat_large = time_flat(cache, LARGE, vals, 60);
    double into_small = time_into(cache, LARGE + N_NEW, SMALL, vals, 200000);
    double into_large = time_into(cache, LARGE + N_NEW, LARGE, vals, 200000);

    printf("kv append, %d new elements per call (ns per appended element, best of %d)\n", N_NEW,
           ROUNDS);
    printf("  %-28s %10s %10s %8s\n", "", "2,048", "133,120", "ratio");
    printf("  %-28s %10.3f %10.3f %7.1fx\n", "append_flat (copy)", flat_small, flat_large,
           flat_large / flat_small);
    printf("  %-28s %10.3f %10.3f %7.1fx\n", "append_into (reserved)", into_small, into_large,
           into_large / into_small);
    printf("  append_flat / append_into at 133,120 cached: %.0fx\n", flat_large / into_large);
    free(cache);
    return 0;
}
