/* Decode attention as the executor meets it: per layer, the f16 K/V chunk
 * passes of one sequence (5 chunks of 128 keys x 3 KV heads, 3 queries
 * each: SmolLM2 at depth ~600), laid out as the paged pool lays them out
 * ([block][layer][head][slot]), first with nothing between layers (the
 * cache stays in L2/L3) and then with each layer's weights (3 MB) streamed
 * through the caches before its attention, as a decode step does. Prints
 * nanoseconds per query and key, and the weights' read rate; one thread,
 * the kernel table's multi-query f16 kernel. The gap between the two
 * figures is the cost of attention reading a KV cache the weights evicted
 * (docs/executor.md, "decode at depth"). A measurement, not a test.
 *
 * With rows > 1, that many consecutive positions of the sequence (a
 * verify step's drafts, a small prefill), their query heads in one pass.
 *
 *   bench_attn [chunks (5)] [MB of weights a layer (3)] [rows (1)] */
#include "bench_util.h"
#include "codec/half.h"
#include "kernels/attn.h"
#include "kernels/kernels.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { LAYERS = 30, HEADS = 3, HD = 64, GQA = 3, ROWS_MAX = 5, TOKENS = 20, REPS = 3 };
static int QUERIES = GQA; /* rows x GQA */

/* Every layer's attention of one token (and, with w, its weights read first);
 * returns the seconds spent in attention alone. */
static double token(const unsigned char *k, const unsigned char *v, int nchunk, const float *w, size_t wfloats,
                    const float *const *q, float *const *part, float *const *scores, float *sink) {
    const struct llmk_kernels *K = llmk_kernels();
    const size_t run = (size_t)LLMK_ATTN_CHUNK * HD * 2;
    int64_t n[GQA * ROWS_MAX]; /* a row's heads see the same keys; each row one more than the last */
    for (int i = 0; i < QUERIES; i++) n[i] = LLMK_ATTN_CHUNK - (QUERIES / GQA - 1) + i / GQA;
    double t = 0;
    for (int l = 0; l < LAYERS; l++) {
        if (w) {
            float s = 0;
            const float *wl = w + (size_t)l * wfloats;
            for (size_t i = 0; i < wfloats; i += 16) s += wl[i];
            *sink += s;
        }
        double t0 = bench_now();
        for (int c = 0; c < nchunk; c++)
            for (int g = 0; g < HEADS; g++) {
                size_t off = (((size_t)c * LAYERS + (size_t)l) * HEADS + (size_t)g) * run;
                K->attn_multi_f16(QUERIES, q, n, k + off, v + off, HD, HD, 0.125f, part, scores);
            }
        t += bench_now() - t0;
    }
    return t;
}

int main(int argc, char **argv) {
    int nchunk = argc > 1 ? atoi(argv[1]) : 5;
    long wmb = argc > 2 ? atol(argv[2]) : 3;
    int rows = argc > 3 ? atoi(argv[3]) : 1;
    if (nchunk < 1 || nchunk > 64 || wmb < 1 || wmb > 64 || rows < 1 || rows > ROWS_MAX) {
        fprintf(stderr, "usage: bench_attn [chunks 1..64] [MB of weights a layer 1..64] [rows 1..%d]\n", ROWS_MAX);
        return 2;
    }
    QUERIES = rows * GQA;
    size_t run = (size_t)LLMK_ATTN_CHUNK * HD * 2, kv = (size_t)nchunk * LAYERS * HEADS * run;
    size_t wfloats = (size_t)wmb << 18;
    unsigned char *k = malloc(kv), *v = malloc(kv);
    float *w = malloc(wfloats * LAYERS * sizeof *w);
    if (!k || !v || !w) return 1;
    for (size_t i = 0; i < kv / 2; i++) {
        uint16_t a = llmk_fp32_to_fp16((float)(i * 7 % 13) / 13.0f - 0.5f);
        uint16_t b = llmk_fp32_to_fp16((float)(i * 5 % 11) / 11.0f - 0.5f);
        memcpy(k + 2 * i, &a, 2), memcpy(v + 2 * i, &b, 2);
    }
    for (size_t i = 0; i < wfloats * LAYERS; i++) w[i] = (float)(i % 3);
    static float qs[GQA * ROWS_MAX][HD], parts[GQA * ROWS_MAX][HD + 2], sc[GQA * ROWS_MAX][LLMK_ATTN_CHUNK];
    float sink = 0;
    const float *q[GQA * ROWS_MAX];
    float *part[GQA * ROWS_MAX], *scores[GQA * ROWS_MAX];
    for (int i = 0; i < QUERIES; i++) {
        for (int d = 0; d < HD; d++) qs[i][d] = (float)((i + d) % 7) / 7.0f - 0.4f;
        q[i] = qs[i], part[i] = parts[i], scores[i] = sc[i];
    }
    double qk = (double)TOKENS * LAYERS * nchunk * HEADS * QUERIES * LLMK_ATTN_CHUNK;
    printf("decode attention, %d chunks x %d heads x %d layers (%.1f MB of f16 K/V), %d queries a pass, 1 thread\n",
           nchunk, HEADS, LAYERS, 2.0 * (double)kv / 1e6, QUERIES);
    for (int mode = 0; mode < 2; mode++) {
        double best = 1e300, wall = 0;
        for (int r = 0; r < REPS; r++) {
            double a = 0, t0 = bench_now();
            for (int t = 0; t < TOKENS; t++) a += token(k, v, nchunk, mode ? w : NULL, wfloats, q, part, scores, &sink);
            wall = bench_now() - t0 - a;
            best = a < best ? a : best;
        }
        if (mode == 0) printf("  cache kept between layers:   %6.2f ns a query and key\n", best * 1e9 / qk);
        else
            printf("  %ld MB of weights a layer:   %6.2f ns a query and key (weights read at %.1f GB/s)\n", wmb,
                   best * 1e9 / qk, (double)wfloats * 4 * LAYERS * TOKENS / wall / 1e9);
    }
    free(k), free(v), free(w);
    return sink == -1.0f; /* keeps the weight reads */
}
