/* DSA sparse attention's cost against the cache length, and against the
 * executor's dense GQA decode attention (seed 002, issue 24): one decode
 * query (qL = 1), 16 query heads over one KV head of 128 (MQA, as DeepSeek's
 * MLA caches), f32 cache, one thread, best of several rounds.
 *  - dsa_sparse_attention with a 128-row local window plus top-k 512 rows
 *    gathered from caches of 4k .. 64k rows (random distinct rows);
 *  - dense decode attention at 64k rows: the executor's kernels (the chunk
 *    kernels of attn.h over LLMK_ATTN_CHUNK keys, all 16 heads per K/V pass,
 *    merged by llmk_attn_merge), as src/exec_cpu.c runs them;
 *  - for the whole DSA step, the indexer (8 heads of 128) and the top-k at
 *    the same lengths: those stay linear in the cache by design.
 * A measurement, not a test: nothing here asserts a figure. */
#include "internal.h"
#include "kernels/attn.h"
#include "kernels/dsa.h"
#include "kernels/kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { H = 16, HD = 128, WINDOW = 128, TOPK = 512, IDX_H = 8, ROUNDS = 5 };

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}
static float *rand_vec(int64_t n) {
    float *x = malloc(sizeof(float) * (size_t)n);
    if (!x) exit(1);
    for (int64_t i = 0; i < n; i++) x[i] = (float)((next() >> 40) & 0xffff) / 32768.0f - 1.0f;
    return x;
}

static double sparse_us(const float *kv_k, const float *kv_v, int64_t n, const float *q, float *out) {
    int32_t *idx = malloc(sizeof(int32_t) * TOPK);
    char *used = calloc((size_t)n, 1);
    for (int t = 0; t < TOPK;) { /* distinct rows, as a top-k gives */
        int64_t r = (int64_t)(next() % (uint64_t)n);
        if (!used[r]) used[r] = 1, idx[t++] = (int32_t)r;
    }
    struct llmk_dsa_attn a = {.n_q = 1, .pos0 = n - 1, .n_heads = H, .n_kv = 1, .dk = HD, .dv = HD, .q = q,
                              .k = kv_k, .v = kv_v, .n_local = n, .window = WINDOW, .pk = kv_k, .pv = kv_v,
                              .n_pool = n, .idx = idx, .topk = TOPK, .scale = 0.088f};
    double best = 1e300;
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now_us();
        if (llmk_dsa_sparse_attention(NULL, &a, out) != LLMK_OK) exit(1);
        double t = now_us() - t0;
        best = t < best ? t : best;
    }
    free(idx), free(used);
    return best;
}

static double dense_us(const float *kv_k, const float *kv_v, int64_t n, const float *q, float *out) {
    const struct llmk_kernels *k = llmk_kernels();
    int64_t nc = (n + LLMK_ATTN_CHUNK - 1) / LLMK_ATTN_CHUNK;
    float *parts = malloc(sizeof(float) * (size_t)(H * nc * (HD + 2))), *sc = malloc(sizeof(float) * H * LLMK_ATTN_CHUNK);
    double best = 1e300;
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now_us();
        for (int64_t c = 0; c < nc; c++) {
            int64_t k0 = c * LLMK_ATTN_CHUNK, nk = n - k0 < LLMK_ATTN_CHUNK ? n - k0 : LLMK_ATTN_CHUNK;
            const float *qs[H];
            int64_t ns[H];
            float *pp[H], *ss[H];
            for (int h = 0; h < H; h++)
                qs[h] = q + h * HD, ns[h] = nk, pp[h] = parts + ((int64_t)h * nc + c) * (HD + 2),
                ss[h] = sc + h * LLMK_ATTN_CHUNK;
            if (k->attn_multi_f32) k->attn_multi_f32(H, qs, ns, kv_k + k0 * HD, kv_v + k0 * HD, HD, HD, 0.088f, pp, ss);
            else
                for (int h = 0; h < H; h++) k->attn_f32(qs[h], kv_k + k0 * HD, kv_v + k0 * HD, nk, HD, HD, 0.088f, pp[h], ss[h]);
        }
        for (int h = 0; h < H; h++) llmk_attn_merge(parts + (int64_t)h * nc * (HD + 2), (int)nc, HD, out + h * HD);
        double t = now_us() - t0;
        best = t < best ? t : best;
    }
    free(parts), free(sc);
    return best;
}

static void indexer_us(const float *kv_k, int64_t n, double *score_us, double *topk_us) {
    float *q = rand_vec(IDX_H * HD), *w = rand_vec(IDX_H), *s = malloc(sizeof(float) * (size_t)n);
    int32_t idx[TOPK];
    *score_us = *topk_us = 1e300;
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now_us();
        if (llmk_dsa_indexer_score_decode(NULL, q, kv_k, w, 1, IDX_H, HD, n, s) != LLMK_OK) exit(1);
        double t1 = now_us();
        if (llmk_dsa_topk_indices(NULL, s, 1, n, n, NULL, TOPK, idx) != LLMK_OK) exit(1);
        double t2 = now_us();
        *score_us = t1 - t0 < *score_us ? t1 - t0 : *score_us;
        *topk_us = t2 - t1 < *topk_us ? t2 - t1 : *topk_us;
    }
    free(q), free(w), free(s);
}

int main(void) {
    const int64_t max_n = 65536;
    float *kv_k = rand_vec(max_n * HD), *kv_v = rand_vec(max_n * HD), *q = rand_vec(H * HD);
    float *out = malloc(sizeof(float) * H * HD);
    printf("bench_dsa: kernels %s (%s), one thread; decode qL 1, %d heads over 1 KV head of %d, f32 cache\n",
           llmk_kernels()->name, llmk_kernels()->dsa->name, H, HD);
    printf("%-8s %14s %14s %16s %12s\n", "cache", "sparse_us", "vs_4k", "indexer_us", "topk_us");
    double base = 0;
    for (int64_t n = 4096; n <= max_n; n *= 2) {
        double t = sparse_us(kv_k, kv_v, n, q, out), si, tk;
        indexer_us(kv_k, n, &si, &tk);
        if (n == 4096) base = t;
        printf("%-8lld %14.1f %13.2fx %16.1f %12.1f\n", (long long)n, t, t / base, si, tk);
    }
    double sp = sparse_us(kv_k, kv_v, max_n, q, out), de = dense_us(kv_k, kv_v, max_n, q, out);
    printf("dense GQA decode attention at %lld: %.1f us; sparse (window %d + top-k %d): %.1f us; %.1fx\n",
           (long long)max_n, de, WINDOW, TOPK, sp, de / sp);
    free(kv_k), free(kv_v), free(q), free(out);
    return 0;
}
