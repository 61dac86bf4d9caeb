/* The machine's memory read bandwidth (llmk_memory_read_bandwidth): what a
 * memory-bound decode could reach at best, measured with the read probe of
 * src/kernels/readbw.h on the worker pool, so a tool can print a kernel's
 * effective bandwidth next to it. */
#include "internal.h"
#include "kernels/readbw.h"
#include "pool.h"

#include <stdlib.h>
#include <time.h>

enum { PROBE_LINE = 128, PROBE_PASSES = 5 };

struct probe {
    const unsigned char *buf;
    size_t lines; /* PROBE_LINE-byte lines in buf */
    uint64_t *sink; /* [nth * 8]: one result per worker, a cache line apart, so the reads are not dead code */
};

static void probe_worker(void *arg, int ith, int nth) {
    struct probe *p = arg;
    int64_t lo, hi;
    llmk_split_range((int64_t)p->lines, ith, nth, &lo, &hi);
    p->sink[(size_t)ith * 8] = llmk_read_xor(p->buf + (size_t)lo * PROBE_LINE, (size_t)(hi - lo) * PROBE_LINE);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int llmk_memory_read_bandwidth(int n_threads, size_t bytes, double *gbs_out) {
    llmk_error_clear();
    if (!gbs_out) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_memory_read_bandwidth: NULL output");
    *gbs_out = 0;
    if (bytes == 0) bytes = (size_t)256 << 20; /* well past any last-level cache */
    if (bytes % PROBE_LINE)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_memory_read_bandwidth: %zu bytes is not a multiple of %d",
                         bytes, PROBE_LINE);
    llmk_pool *pool = NULL;
    int st = llmk_pool_create(n_threads, &pool);
    if (st != LLMK_OK) return st;
    int nth = llmk_pool_size(pool);
    uint64_t *buf = malloc(bytes), *sink = calloc((size_t)nth * 8, sizeof *sink);
    if (!buf || !sink) {
        free(buf), free(sink);
        llmk_pool_free(pool);
        return llmk_fail(LLMK_OUT_OF_MEMORY, "llmk_memory_read_bandwidth: a %zu-byte buffer", bytes);
    }
    /* written (so every page is committed) before any pass is timed */
    for (size_t i = 0; i < bytes / 8; i++) buf[i] = i * 0x9e3779b97f4a7c15ULL;
    struct probe p = {.buf = (const unsigned char *)buf, .lines = bytes / PROBE_LINE, .sink = sink};
    double best = 0;
    for (int r = 0; r < PROBE_PASSES; r++) {
        double t = now_s();
        llmk_pool_run(pool, probe_worker, &p);
        double gbs = (double)bytes / (now_s() - t) / 1e9;
        if (gbs > best) best = gbs;
    }
    llmk_pool_free(pool);
    free(sink), free(buf);
    *gbs_out = best;
    return LLMK_OK;
}
