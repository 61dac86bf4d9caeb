/* What the C benchmarks share: a monotonic clock and a qsort order for
 * timings (medians and minimums). */
#ifndef LLMK_BENCH_UTIL_H
#define LLMK_BENCH_UTIL_H

#include <time.h>

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#endif
