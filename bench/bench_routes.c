/* llmk_quantized_matmul's routes against each other: for q4_1, q8_0, q4_k,
 * q6_k at two projection shapes and m = 1..128 activation rows, the fastest
 * of several calls (1 thread, activation quantization included) per route
 * (matvec, small, tiled) and the route the automatic choice takes. The
 * minimum, not the median: on a shared machine the minimum measures the
 * kernel, the median the scheduler. Prints; asserts nothing.
 * Shapes (n x k): 576x576 and 1536x576 (SmolLM2-135M's attention and MLP
 * projections); the K-quants need k in whole 256-element super-blocks, so
 * they run at k = 512.
 * Usage: bench_routes [codec ...]   (default: the four above)
 * Levers: LLMK_MATMUL_CHUNK_SMALL, LLMK_MATMUL_CHUNK_TILED, LLMK_MATMUL_TILE_M
 * (src/kernels/matmul.c) override the chunk sizes for a sweep. */
#include "../app/env_config.h"
#include "codec/codec.h"
#include "internal.h"
#include "kernels/matmul.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Fastest call per route, the routes timed in turns (round after round) so
 * that load from other processes hits them alike: at least 7 rounds and
 * ~40 ms of calls per route, at most 400 rounds. us[route] in microseconds. */
static void time_routes(struct llmk_qmm *q, double *us) {
    double spent = 0;
    for (int route = LLMK_QMM_MATVEC; route <= LLMK_QMM_TILED; route++) us[route] = 1e30;
    for (int round = 0; round < 7 || (spent < 0.12 && round < 400); round++)
        for (int route = LLMK_QMM_MATVEC; route <= LLMK_QMM_TILED; route++) {
            double t = now();
            llmk_qmm_run(&q[route], NULL, 0, 1);
            t = now() - t;
            spent += t;
            if (t * 1e6 < us[route]) us[route] = t * 1e6;
        }
}

int main(int argc, char **argv) {
    if (!env_config_apply("bench_routes")) return 2;
    static const char *const deflt[] = {"q4_1", "q8_0", "q4_k", "q6_k"};
    static const int64_t ms[] = {1, 2, 4, 8, 16, 32, 64, 128};
    static const int64_t ns[] = {576, 1536};
    static const char *const route_name[] = {"auto", "matvec", "small", "tiled"};
    const char *const *codecs = argc > 1 ? (const char *const *)argv + 1 : deflt;
    int ncodec = argc > 1 ? argc - 1 : (int)LLMK_ARRAY_LEN(deflt);
    const char *e1 = getenv("LLMK_MATMUL_CHUNK_SMALL"), *e2 = getenv("LLMK_MATMUL_CHUNK_TILED"),
               *e3 = getenv("LLMK_MATMUL_TILE_M");
    printf("chunk_small=%s chunk_tiled=%s tile_m=%s (unset: matmul.c defaults)\n", e1 ? e1 : "-", e2 ? e2 : "-",
           e3 ? e3 : "-");
    printf("%-6s %-10s %4s %11s %11s %11s  %-6s %-6s\n", "codec", "n x k", "m", "matvec us", "small us",
           "tiled us", "best", "auto");
    for (int ci = 0; ci < ncodec; ci++) {
        uint32_t t;
        if (llmk_type_from_name(codecs[ci], &t) != LLMK_OK || !llmk_codec_get(t)) {
            fprintf(stderr, "bench_routes: unknown codec %s\n", codecs[ci]);
            return 1;
        }
        int64_t k = llmk_type_block_elems(t) == 256 ? 512 : 576;
        for (size_t si = 0; si < LLMK_ARRAY_LEN(ns); si++) {
            int64_t n = ns[si], mmax = ms[LLMK_ARRAY_LEN(ms) - 1];
            uint64_t rb;
            llmk_row_bytes(t, (uint64_t)k, &rb);
            unsigned char *w = aligned_alloc(64, ((size_t)rb * (size_t)n + 63) / 64 * 64);
            float *x = malloc((size_t)(mmax * k) * 4), *y = malloc((size_t)(mmax * n) * 4);
            srand(1);
            for (int64_t r = 0; r < n; r++) {
                for (int64_t i = 0; i < k; i++) x[i] = (float)((rand() % 2001) - 1000) / 1000.0f;
                llmk_quantize_row(t, x, w + (size_t)r * rb, k);
            }
            for (int64_t i = 0; i < mmax * k; i++) x[i] = (float)((rand() % 2001) - 1000) / 1000.0f;
            size_t ab;
            llmk_qmm_act_bytes(t, mmax, k, &ab);
            void *scratch = malloc(ab ? ab : 1);
            for (size_t mi = 0; mi < LLMK_ARRAY_LEN(ms); mi++) {
                int64_t m = ms[mi];
                double us[4] = {0};
                struct llmk_qmm q[4];
                for (int route = LLMK_QMM_AUTO; route <= LLMK_QMM_TILED; route++)
                    if (llmk_qmm_init(&q[route], t, w, n, k, x, m, y, scratch, route) != LLMK_OK) return 1;
                time_routes(q, us);
                int best = LLMK_QMM_MATVEC;
                for (int route = LLMK_QMM_SMALL; route <= LLMK_QMM_TILED; route++)
                    if (us[route] < us[best]) best = route;
                char shape[32];
                snprintf(shape, sizeof shape, "%lldx%lld", (long long)n, (long long)k);
                printf("%-6s %-10s %4lld %11.1f %11.1f %11.1f  %-6s %-6s\n", codecs[ci], shape, (long long)m,
                       us[LLMK_QMM_MATVEC], us[LLMK_QMM_SMALL], us[LLMK_QMM_TILED], route_name[best],
                       route_name[q[LLMK_QMM_AUTO].route]);
                fflush(stdout);
            }
            free(w), free(x), free(y), free(scratch);
        }
    }
    return 0;
}
