/* The multi-query attention chunk kernel (the kernel table's f16 one) at a
 * chosen head size, with the cache in L1/L2: a prefill pass (ROWS
 * consecutive positions x HEADS query heads of one KV head, as the
 * executor's prefill attention items are) or a decode step's (ROWS 1) over
 * full 128-key chunks. Prints nanoseconds per query and key (best of 40
 * passes over 32 chunks) and a hash of every partial the last pass wrote:
 * a change meant to keep the bits must keep the hash (docs/executor.md's
 * head-128 and head-256 figures come from this). A measurement, not a test.
 *
 *   bench_attn_multi [head size 64|128|256 (128)] [rows (4)] [heads (4)] */
#include "bench_util.h"
#include "codec/half.h"
#include "kernels/attn.h"
#include "kernels/kernels.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CHUNKS = 32, PASSES = 40, CALLS = 8 };

int main(int argc, char **argv) {
    int hd = argc > 1 ? atoi(argv[1]) : 128, rows = argc > 2 ? atoi(argv[2]) : 4, heads = argc > 3 ? atoi(argv[3]) : 4;
    int nq = rows * heads;
    if ((hd != 64 && hd != 128 && hd != 256) || rows < 1 || heads < 1 || nq > LLMK_ATTN_MULTI) {
        fprintf(stderr, "usage: bench_attn_multi [64|128|256] [rows] [heads] (rows x heads <= %d)\n", LLMK_ATTN_MULTI);
        return 2;
    }
    size_t run = (size_t)LLMK_ATTN_CHUNK * (size_t)hd;
    uint16_t *k = malloc(CHUNKS * run * 2), *v = malloc(CHUNKS * run * 2);
    float *qb = malloc((size_t)nq * (size_t)hd * sizeof(float));
    float *pb = malloc((size_t)nq * (size_t)(hd + 2) * sizeof(float));
    float *sb = malloc((size_t)nq * LLMK_ATTN_CHUNK * sizeof(float));
    if (!k || !v || !qb || !pb || !sb) return 1;
    uint64_t s = 12345;
    for (size_t i = 0; i < CHUNKS * run; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        k[i] = llmk_fp32_to_fp16((float)(s >> 40) / (float)(1 << 24) - 0.5f);
        v[i] = llmk_fp32_to_fp16((float)((s >> 16) & 0xffffff) / (float)(1 << 24) - 0.5f);
    }
    for (int i = 0; i < nq * hd; i++) qb[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    const float *q[LLMK_ATTN_MULTI];
    float *part[LLMK_ATTN_MULTI], *scores[LLMK_ATTN_MULTI];
    int64_t n[LLMK_ATTN_MULTI];
    for (int i = 0; i < nq; i++) {
        q[i] = qb + (size_t)i * (size_t)hd, part[i] = pb + (size_t)i * (size_t)(hd + 2);
        scores[i] = sb + (size_t)i * LLMK_ATTN_CHUNK, n[i] = LLMK_ATTN_CHUNK;
    }
    const struct llmk_kernels *K = llmk_kernels();
    double best = 1e300;
    for (int p = 0; p < PASSES; p++) {
        double t0 = bench_now();
        for (int c = 0; c < CALLS; c++)
            for (int j = 0; j < CHUNKS; j++)
                K->attn_multi_f16(nq, q, n, k + (size_t)j * run, v + (size_t)j * run, hd, hd, 0.088f, part, scores);
        double t = bench_now() - t0;
        best = t < best ? t : best;
    }
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the last call's partials */
    const unsigned char *bytes = (const unsigned char *)pb;
    for (size_t i = 0; i < (size_t)nq * (size_t)(hd + 2) * sizeof(float); i++) h = (h ^ bytes[i]) * 1099511628211ull;
    printf("%s attention, head %d, %d queries (%d rows x %d heads), 128-key chunks: %.3f ns a query and key, "
           "partials hash %016" PRIx64 "\n",
           K->name, hd, nq, rows, heads, best * 1e9 / ((double)CALLS * CHUNKS * nq * LLMK_ATTN_CHUNK), h);
    free(k), free(v), free(qb), free(pb), free(sb);
    return 0;
}
