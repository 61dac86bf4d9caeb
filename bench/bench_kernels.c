/* Matvec (m = 1) per codec at the default model's projection shapes and two
 * larger ones: median microseconds per call and effective weight bandwidth
 * (weight bytes / time), on 1 and 2 threads, next to a read bandwidth measured
 * by the same run (a streaming sum over 512 MiB), and the fastest call of
 * each (min1/min2: on a loaded machine the median mostly measures the
 * scheduler, the minimum the kernel). Prints; asserts nothing.
 * Usage: bench_kernels [codec ...]   (default: every codec)
 * Levers: LLMK_KERNELS=ref, LLMK_CPU_MASK=avx2|none. */
#include "../app/env_config.h"
#include "bench_util.h"
#include "codec/codec.h"
#include "internal.h"
#include "kernels/kernels.h"
#include "pool.h"
#include "kernels/readbw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* the library's read probe on 1 or 2 workers, 512 MiB, best of 5 passes */
static double read_bw(int n_threads) {
    double gbs = 0;
    if (llmk_memory_read_bandwidth(n_threads, (size_t)512 << 20, &gbs) != LLMK_OK) return 0;
    return gbs;
}

int main(int argc, char **argv) {
    if (!env_config_apply("bench_kernels")) return 2;
    static const int64_t shapes[][2] = {{576, 576}, {192, 576}, {1536, 576}, {576, 1536},
                                        {49152, 576}, {2048, 2048}, {8192, 2048}};
    llmk_pool *pools[2] = {NULL, NULL};
    llmk_pool_create(2, &pools[1]);
    printf("%s", llmk_cpu_features());
    printf("read bandwidth (streaming AVX2 read, 512 MiB): 1 thread %.1f GB/s, 2 threads %.1f GB/s\n",
           read_bw(1), read_bw(2));
    printf("%-8s %-12s %12s %9s %12s %9s %9s %9s  kernel\n", "codec", "n x k", "us (1 thr)", "GB/s",
           "us (2 thr)", "GB/s", "min1 us", "min2 us");
    size_t ncodec;
    const char *const *names = llmk_codecs(&ncodec);
    for (size_t ci = 0; ci < ncodec; ci++) {
        if (argc > 1) {
            int want = 0;
            for (int a = 1; a < argc; a++) want |= strcasecmp(argv[a], names[ci]) == 0;
            if (!want) continue;
        }
        uint32_t t;
        llmk_type_from_name(names[ci], &t);
        if (t == LLMK_TYPE_Q8_K || t == LLMK_TYPE_Q8_1) continue; /* activation forms */
        const char *kname = llmk_kernels()->type[t].vec_dot_name;
        for (size_t si = 0; si < LLMK_ARRAY_LEN(shapes); si++) {
            int64_t n = shapes[si][0], k = shapes[si][1];
            if (k % llmk_type_block_elems(t)) continue;
            uint64_t rb;
            llmk_row_bytes(t, (uint64_t)k, &rb);
            size_t wbytes = (size_t)rb * (size_t)n;
            unsigned char *w = aligned_alloc(64, (wbytes + 63) / 64 * 64);
            /* quantize 64 random rows once and tile them: real blocks, cheap set-up */
            int64_t proto = n < 64 ? n : 64;
            float *row = malloc((size_t)k * 4);
            for (int64_t r = 0; r < proto; r++) {
                for (int64_t i = 0; i < k; i++) row[i] = (float)((rand() % 2001) - 1000) / 1000.0f;
                llmk_quantize_row(t, row, w + (size_t)r * rb, k);
            }
            for (int64_t r = proto; r < n; r++) memcpy(w + (size_t)r * rb, w + (size_t)(r % proto) * rb, rb);
            float *x = malloc((size_t)k * 4), *y = malloc((size_t)n * 4);
            for (int64_t i = 0; i < k; i++) x[i] = (float)((rand() % 2001) - 1000) / 1000.0f;
            double med[2], mins[2];
            for (int p = 0; p < 2; p++) {
                /* enough reps for ~0.15 s of timing, at least 5 */
                double t0 = bench_now();
                llmk_quantized_matmul(pools[p], t, w, n, k, x, 1, y);
                double one = bench_now() - t0;
                int reps = (int)(0.15 / (one > 1e-7 ? one : 1e-7));
                reps = reps < 5 ? 5 : reps > 2001 ? 2001 : reps;
                double *ts = malloc((size_t)reps * sizeof *ts);
                for (int r = 0; r < reps; r++) {
                    double a = bench_now();
                    llmk_quantized_matmul(pools[p], t, w, n, k, x, 1, y);
                    ts[r] = bench_now() - a;
                }
                qsort(ts, (size_t)reps, sizeof *ts, bench_cmp_double);
                med[p] = ts[reps / 2];
                mins[p] = ts[0];
                free(ts);
            }
            char shape[32];
            snprintf(shape, sizeof shape, "%lldx%lld", (long long)n, (long long)k);
            printf("%-8s %-12s %12.1f %9.2f %12.1f %9.2f %9.1f %9.1f  %s\n", names[ci], shape, med[0] * 1e6,
                   (double)wbytes / med[0] / 1e9, med[1] * 1e6, (double)wbytes / med[1] / 1e9, mins[0] * 1e6,
                   mins[1] * 1e6, kname);
            fflush(stdout);
            free(w), free(row), free(x), free(y);
        }
    }
    llmk_pool_free(pools[1]);
    return 0;
}
