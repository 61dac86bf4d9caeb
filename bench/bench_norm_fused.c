/* The fused norm kernels of seed 002 against the unfused kernels they
 * replace, per row at the widths of the models llmk loads: add_rmsnorm
 * (x += rms_norm(h) * w: gemma3's post-norms, which the program folds into
 * the next norm phase) against rmsnorm into a scratch row then add;
 * rmsnorm2_add against two rmsnorms and an add; rmsnorm_multi3 against three
 * rmsnorms of one input. Median and minimum ns per row over many rows that
 * stay in L1/L2, as in a decode step. Prints; asserts nothing.
 * Levers: LLMK_KERNELS=ref, LLMK_CPU_MASK=none|avx2. */
#include "../app/env_config.h"
#include "bench_util.h"
#include "internal.h"
#include "kernels/kernels.h"
#include "kernels/norm_fused.h"

#include <stdio.h>
#include <stdlib.h>

enum { REPS = 2001, ROWS = 16 };

struct bufs {
    float *x, *h, *w[3], *t[3];
    int64_t n;
};

typedef void (*variant_fn)(const struct bufs *b, int64_t r);

static const struct llmk_kernels *K;

static void add_fused(const struct bufs *b, int64_t r) {
    K->norm->add_rmsnorm(b->x + r * b->n, b->x + r * b->n, b->h + r * b->n, b->w[0], b->n, 1e-6f, 1.0f);
}
static void add_split(const struct bufs *b, int64_t r) {
    K->rmsnorm(b->t[0], b->h + r * b->n, b->w[0], b->n, 1e-6f);
    K->add(b->x + r * b->n, b->t[0], b->n);
}
static void two_fused(const struct bufs *b, int64_t r) {
    K->norm->rmsnorm2_add(b->t[2], b->x + r * b->n, b->w[0], b->h + r * b->n, b->w[1], b->n, 1e-6f);
}
static void two_split(const struct bufs *b, int64_t r) {
    K->rmsnorm(b->t[0], b->x + r * b->n, b->w[0], b->n, 1e-6f);
    K->rmsnorm(b->t[2], b->h + r * b->n, b->w[1], b->n, 1e-6f);
    K->add(b->t[2], b->t[0], b->n);
}
static void three_fused(const struct bufs *b, int64_t r) {
    float *const out[3] = {b->t[0], b->t[1], b->t[2]};
    const float *const w[3] = {b->w[0], b->w[1], b->w[2]};
    K->norm->rmsnorm_multi3(out, b->x + r * b->n, w, b->n, 1e-6f);
}
static void three_split(const struct bufs *b, int64_t r) {
    for (int k = 0; k < 3; k++) K->rmsnorm(b->t[k], b->x + r * b->n, b->w[k], b->n, 1e-6f);
}

/* ns per row: median and minimum over REPS passes of ROWS rows */
static void time_variant(const struct bufs *b, variant_fn f, double *med, double *min) {
    static double t[REPS];
    for (int i = 0; i < REPS; i++) {
        double t0 = bench_now();
        for (int64_t r = 0; r < ROWS; r++) f(b, r);
        t[i] = (bench_now() - t0) * 1e9 / ROWS;
        for (int64_t j = 0; j < ROWS * b->n; j++) b->x[j] = b->h[j]; /* keep x from growing */
    }
    qsort(t, REPS, sizeof *t, bench_cmp_double);
    *med = t[REPS / 2], *min = t[0];
}

int main(void) {
    if (!env_config_apply("bench_norm_fused")) return 2;
    K = llmk_kernels();
    static const int64_t widths[] = {576, 640, 1152, 2048, 2880, 4096};
    static const struct {
        const char *name;
        variant_fn fused, split;
    } pairs[] = {{"add_rmsnorm", add_fused, add_split},
                 {"rmsnorm2_add", two_fused, two_split},
                 {"rmsnorm_multi3", three_fused, three_split}};
    printf("kernels: %s\n%-15s %6s %12s %12s %12s %12s %8s\n", K->name, "kernel", "n", "fused ns", "(min)",
           "unfused ns", "(min)", "saves");
    for (size_t pi = 0; pi < LLMK_ARRAY_LEN(pairs); pi++)
        for (size_t wi = 0; wi < LLMK_ARRAY_LEN(widths); wi++) {
            struct bufs b = {.n = widths[wi]};
            b.x = malloc((size_t)(ROWS * b.n) * sizeof(float)), b.h = malloc((size_t)(ROWS * b.n) * sizeof(float));
            for (int k = 0; k < 3; k++) b.w[k] = malloc((size_t)b.n * sizeof(float)), b.t[k] = malloc((size_t)b.n * sizeof(float));
            if (!b.x || !b.h || !b.w[0] || !b.w[1] || !b.w[2] || !b.t[0] || !b.t[1] || !b.t[2]) return 1;
            srand(7);
            for (int64_t j = 0; j < ROWS * b.n; j++) b.h[j] = b.x[j] = (float)rand() / RAND_MAX - 0.5f;
            for (int k = 0; k < 3; k++)
                for (int64_t j = 0; j < b.n; j++) b.w[k][j] = 1.0f + 0.1f * ((float)rand() / RAND_MAX - 0.5f);
            double fm, fmin, sm, smin;
            time_variant(&b, pairs[pi].fused, &fm, &fmin);
            time_variant(&b, pairs[pi].split, &sm, &smin);
            printf("%-15s %6lld %12.1f %12.1f %12.1f %12.1f %7.0f%%\n", pairs[pi].name, (long long)b.n, fm, fmin, sm,
                   smin, 100.0 * (1.0 - fmin / smin));
            free(b.x), free(b.h);
            for (int k = 0; k < 3; k++) free(b.w[k]), free(b.t[k]);
        }
    return 0;
}
