/* Seed 000's f64 decode primitives: every worked example with its exact
 * values, the parallel paths against an independent serial computation
 * (bitwise), every refusal code, and a deterministic check that the
 * reserved-capacity append allocates nothing. */
#include "check.h"
#include "llmk.h"
#include "llmk_primitives.h"
#include "pool.h"
#include "ref/ref.h"

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- allocation counter ------------------------------------------------
 * This program's malloc/calloc/realloc count calls while `counting` is set
 * and forward to the next definition (libc's, or the sanitizer's). Defining
 * them here interposes them for the statically linked library too. */
static volatile int counting;
static volatile long n_allocs;
static void *(*next_malloc)(size_t);
static void *(*next_calloc)(size_t, size_t);
static void *(*next_realloc)(void *, size_t);

static void resolve_allocators(void) {
    next_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    next_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
    next_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
}

/* dlsym may ask for memory before the pointers are known: serve it from a
 * small static arena (never freed; free() is not interposed, so these few
 * bytes must never reach it -- dlsym keeps them). */
static unsigned char boot_arena[4096];
static size_t boot_used;
static void *boot_alloc(size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (boot_used + n > sizeof boot_arena) return NULL;
    void *p = boot_arena + boot_used;
    boot_used += n;
    return p;
}
static int resolving;

void *malloc(size_t n) {
    if (!next_malloc) {
        if (resolving) return boot_alloc(n);
        resolving = 1;
        resolve_allocators();
        resolving = 0;
    }
    if (counting) n_allocs++;
    return next_malloc(n);
}
void *calloc(size_t k, size_t n) {
    if (!next_calloc) {
        if (resolving) return boot_alloc(k * n); /* static arena is zeroed */
        resolving = 1;
        resolve_allocators();
        resolving = 0;
    }
    if (counting) n_allocs++;
    return next_calloc(k, n);
}
void *realloc(void *p, size_t n) {
    if (!next_realloc) {
        resolving = 1;
        resolve_allocators();
        resolving = 0;
    }
    if (counting) n_allocs++;
    return next_realloc(p, n);
}

/* ---- helpers ---------------------------------------------------------- */

/* Deterministic values of mixed sign and magnitude, so that a change in
 * summation order would change the rounding. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double rnd(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    double u = (double)(rng_state >> 11) / 9007199254740992.0; /* [0, 1) */
    double mag = pow(10.0, (double)((rng_state >> 3) % 7) - 3.0);
    return (u - 0.5) * mag;
}

/* y[j] = sum_i a[i,j] x[i], j outer: independent of the library's loop, but
 * the same per-column order of additions, so results must match bit for bit. */
static void gemv_t_naive(const double *a, const double *x, int64_t m, int64_t n, double *y) {
    for (int64_t j = 0; j < n; j++) {
        double s = 0.0;
        for (int64_t i = 0; i < m; i++) s += a[i * n + j] * x[i];
        y[j] = s;
    }
}

/* ---- gemv ------------------------------------------------------------- */

static void test_gemv_example(void) {
    const double a[] = {1, 2, 3, 4, 5, 6}, x[] = {1, 1};
    double y[3] = {-1, -1, -1};
    CHECK_STATUS(llmk_gemv_transposed_parallel_flat(a, 6, x, 2, 2, 3, y, 3), 560);
    CHECK_EQ_DBL(y[0], 5.0);
    CHECK_EQ_DBL(y[1], 7.0);
    CHECK_EQ_DBL(y[2], 9.0);

    /* Non-uniform, negative weights: y = [1*2 + 4*-0.5, 2*2 + 5*-0.5, 3*2 + 6*-0.5]. */
    const double w[] = {2.0, -0.5};
    CHECK_STATUS(llmk_gemv_transposed_parallel_flat(a, 6, w, 2, 2, 3, y, 3), 560);
    CHECK_EQ_DBL(y[0], 0.0);
    CHECK_EQ_DBL(y[1], 1.5);
    CHECK_EQ_DBL(y[2], 3.0);

    /* m = 1 and n = 1 edges. */
    const double r[] = {7, -8, 9}, s[] = {3};
    CHECK_STATUS(llmk_gemv_transposed_parallel_flat(r, 3, s, 1, 1, 3, y, 3), 560);
    CHECK_EQ_DBL(y[0], 21.0);
    CHECK_EQ_DBL(y[1], -24.0);
    CHECK_EQ_DBL(y[2], 27.0);
    const double c[] = {1, 2, 3};
    CHECK_STATUS(llmk_gemv_transposed_parallel_flat(c, 3, r, 3, 3, 1, y, 1), 560);
    CHECK_EQ_DBL(y[0], 7.0 - 16.0 + 27.0);
}

static void check_gemv_shape(int64_t m, int64_t n) {
    size_t cells = (size_t)(m * n);
    double *a = malloc(cells * sizeof *a), *x = malloc((size_t)m * sizeof *x);
    double *want = malloc((size_t)n * sizeof *want), *got = malloc((size_t)n * sizeof *got);
    CHECK(a && x && want && got);
    for (size_t k = 0; k < cells; k++) a[k] = rnd();
    for (int64_t i = 0; i < m; i++) x[i] = rnd();
    gemv_t_naive(a, x, m, n, want);

    CHECK(m * n >= LLMK_GEMV_PARALLEL_MIN_CELLS); /* these shapes take the parallel path */
    CHECK_STATUS(llmk_gemv_transposed_parallel_flat(a, cells, x, (size_t)m, m, n, got, (size_t)n), 560);
    CHECK(memcmp(want, got, (size_t)n * sizeof *got) == 0);

    /* Explicit pools of several sizes, and no pool: identical bits. */
    for (int t = 0; t <= 5; t++) {
        llmk_pool *pool = NULL;
        if (t > 0) CHECK_STATUS(llmk_pool_create(t, &pool), 560);
        memset(got, 0xff, (size_t)n * sizeof *got);
        CHECK_STATUS(llmk_ref_gemv_transposed(pool, a, cells, x, (size_t)m, m, n, got, (size_t)n), 560);
        CHECK(memcmp(want, got, (size_t)n * sizeof *got) == 0);
        llmk_pool_free(pool);
    }
    /* Sanity of the oracle: the j-outer order differs from a reversed-i sum
     * somewhere, so a reordering bug could not hide behind equal rounding. */
    int differs = 0;
    for (int64_t j = 0; j < n && !differs; j++) {
        double s = 0.0;
        for (int64_t i = m - 1; i >= 0; i--) s += a[i * n + j] * x[i];
        differs = s != want[j];
    }
    CHECK(differs);
    free(a);
    free(x);
    free(want);
    free(got);
}

static void test_gemv_parallel(void) {
    check_gemv_shape(300, 300);  /* 90,000 cells */
    check_gemv_shape(128, 1536); /* a projection-like rectangle */
    check_gemv_shape(1536, 128);
    check_gemv_shape(257, 263);  /* bands that do not divide evenly */
}

static void test_gemv_refusals(void) {
    const double a[6] = {1, 2, 3, 4, 5, 6}, x[2] = {1, 1};
    double y[4] = {42, 42, 42, 42};
    CHECK_STATUS(llmk_gemv_transposed_parallel_flat(a, 5, x, 2, 2, 3, y, 3), 569);
    CHECK_STATUS(llmk_gemv_transposed_parallel_flat(a, 6, x, 1, 2, 3, y, 3), 570);
    CHECK_STATUS(llmk_gemv_transposed_parallel_flat(a, 6, x, 2, 0, 3, y, 3), 561);
    CHECK_STATUS(llmk_gemv_transposed_parallel_flat(a, 6, x, 2, 2, -3, y, 3), 561);
    CHECK_STATUS(llmk_gemv_transposed_parallel_flat(a, 6, x, 2, 2, LLMK_MAX_DIM + 1LL, y, 3), 564);
    CHECK_STATUS(llmk_gemv_transposed_parallel_flat(a, 6, x, 2, 2, 3, y, 2), LLMK_BUFFER_TOO_SMALL);
    CHECK_STATUS(llmk_gemv_transposed_parallel_flat(a, 6, x, 2, 2, 3, NULL, 3), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_gemv_transposed_parallel_flat(NULL, 6, x, 2, 2, 3, y, 3), LLMK_INVALID_ARGUMENT);
    /* A refused call leaves the output alone. */
    for (int k = 0; k < 4; k++) CHECK_EQ_DBL(y[k], 42.0);
}

/* ---- residual --------------------------------------------------------- */

static void test_residual(void) {
    const double a[] = {0, 1, 2, 3, 4, 5}, b[] = {10, 9, 8, 7, 6, 5};
    double out[6];
    CHECK_STATUS(llmk_residual_add_flat(a, 6, b, 6, 6, out, 6), 560);
    for (int i = 0; i < 6; i++) CHECK_EQ_DBL(out[i], 10.0);

    /* A d_model-scale buffer (serial) and one above the fan-out threshold. */
    const int64_t sizes[] = {4096, 100003};
    for (int s = 0; s < 2; s++) {
        int64_t n = sizes[s];
        double *p = malloc((size_t)n * sizeof *p), *q = malloc((size_t)n * sizeof *q);
        double *o = malloc((size_t)n * sizeof *o);
        for (int64_t i = 0; i < n; i++) {
            p[i] = rnd();
            q[i] = rnd();
        }
        CHECK_STATUS(llmk_residual_add_flat(p, (size_t)n, q, (size_t)n, n, o, (size_t)n), 560);
        double worst = 0.0;
        for (int64_t i = 0; i < n; i++) {
            double d = fabs(o[i] - (p[i] + q[i]));
            if (d > worst || d != d) worst = d;
        }
        CHECK_EQ_DBL(worst, 0.0);
        /* In place, on an explicit 3-thread pool: x += y. */
        llmk_pool *pool = NULL;
        CHECK_STATUS(llmk_pool_create(3, &pool), 560);
        CHECK_STATUS(llmk_ref_residual_add(pool, p, (size_t)n, q, (size_t)n, n, p, (size_t)n), 560);
        CHECK(memcmp(p, o, (size_t)n * sizeof *o) == 0);
        llmk_pool_free(pool);
        free(p);
        free(q);
        free(o);
    }

    CHECK_STATUS(llmk_residual_add_flat(a, 2, b, 6, 6, out, 6), 562);
    CHECK_STATUS(llmk_residual_add_flat(a, 6, b, 5, 6, out, 6), 563);
    CHECK_STATUS(llmk_residual_add_flat(a, 0, b, 0, 0, out, 6), 561);
    CHECK_STATUS(llmk_residual_add_flat(a, 6, b, 6, LLMK_MAX_DIM + 1LL, out, 6), 564);
    CHECK_STATUS(llmk_residual_add_flat(a, 6, b, 6, 6, out, 5), LLMK_BUFFER_TOO_SMALL);
    CHECK_STATUS(llmk_residual_add_flat(a, 6, NULL, 6, 6, out, 6), LLMK_INVALID_ARGUMENT);
}

/* ---- KV cache --------------------------------------------------------- */

static void test_kv_append_flat(void) {
    const double cache[] = {0, 1, 2, 3, 4, 5}, nv[] = {100, 101, 102};
    double *out = NULL;
    int64_t n = -1;
    CHECK_STATUS(llmk_kv_cache_append_flat(cache, 6, nv, 3, 6, 3, &out, &n), 560);
    CHECK_EQ_INT(n, 9);
    const double want[] = {0, 1, 2, 3, 4, 5, 100, 101, 102};
    CHECK(out && memcmp(out, want, sizeof want) == 0);
    CHECK(out != cache); /* a new buffer */

    /* Growth from an empty (prefill's own) cache, then in order. */
    double *grown = NULL, *next = NULL;
    int64_t gn = 0;
    CHECK_STATUS(llmk_kv_cache_append_flat(NULL, 0, nv, 3, 0, 3, &grown, &gn), 560);
    CHECK_EQ_INT(gn, 3);
    CHECK(grown && memcmp(grown, nv, sizeof nv) == 0);
    CHECK_STATUS(llmk_kv_cache_append_flat(grown, 3, cache, 6, 3, 6, &next, &gn), 560);
    CHECK_EQ_INT(gn, 9);
    CHECK(next && next[2] == 102.0 && next[3] == 0.0 && next[8] == 5.0);
    free(out);
    free(grown);
    free(next);

    CHECK_STATUS(llmk_kv_cache_append_flat(cache, 5, nv, 3, 6, 3, &out, &n), 566);
    CHECK(out == NULL && n == 0);
    CHECK_STATUS(llmk_kv_cache_append_flat(cache, 6, nv, 2, 6, 3, &out, &n), 567);
    CHECK_STATUS(llmk_kv_cache_append_flat(cache, 6, nv, 0, 6, 0, &out, &n), 561);
    CHECK_STATUS(llmk_kv_cache_append_flat(cache, 6, nv, 3, -6, 3, &out, &n), 561);
    CHECK_STATUS(llmk_kv_cache_append_flat(cache, 6, nv, 3, LLMK_MAX_DIM, 3, &out, &n), 564);
    CHECK_STATUS(llmk_kv_cache_append_flat(cache, 6, nv, 3, 6, 3, NULL, &n), LLMK_INVALID_ARGUMENT);
    CHECK(out == NULL);
}

static void test_kv_reserved(void) {
    double *cache = NULL;
    CHECK_STATUS(llmk_kv_cache_reserve_flat(16, &cache), 560);
    CHECK(cache != NULL);
    for (int i = 0; i < 16; i++) CHECK_EQ_DBL(cache[i], 0.0);

    /* The same sequence of appends as the copying path gives the same bits. */
    const double chunk1[] = {0, 1, 2, 3, 4, 5}, chunk2[] = {100, 101, 102}, chunk3[] = {-7.25};
    CHECK_STATUS(llmk_kv_cache_append_into_flat(cache, 16, chunk1, 6, 0, 6), 560);
    CHECK_STATUS(llmk_kv_cache_append_into_flat(cache, 16, chunk2, 3, 6, 3), 560);
    CHECK_STATUS(llmk_kv_cache_append_into_flat(cache, 16, chunk3, 1, 9, 1), 560);
    double *c1 = NULL, *c2 = NULL, *c3 = NULL;
    int64_t n = 0;
    CHECK_STATUS(llmk_kv_cache_append_flat(NULL, 0, chunk1, 6, 0, 6, &c1, &n), 560);
    CHECK_STATUS(llmk_kv_cache_append_flat(c1, 6, chunk2, 3, 6, 3, &c2, &n), 560);
    CHECK_STATUS(llmk_kv_cache_append_flat(c2, 9, chunk3, 1, 9, 1, &c3, &n), 560);
    CHECK_EQ_INT(n, 10);
    CHECK(c3 && memcmp(cache, c3, 10 * sizeof *cache) == 0);
    for (int i = 10; i < 16; i++) CHECK_EQ_DBL(cache[i], 0.0); /* nothing past the content */
    free(c1);
    free(c2);
    free(c3);

    /* Overrun: refused with 571 and the buffer untouched. */
    double before[16];
    memcpy(before, cache, sizeof before);
    const double seven[7] = {1, 1, 1, 1, 1, 1, 1};
    CHECK_STATUS(llmk_kv_cache_append_into_flat(cache, 16, seven, 7, 10, 7), 571);
    CHECK(memcmp(before, cache, sizeof before) == 0);
    CHECK_STATUS(llmk_kv_cache_append_into_flat(cache, 16, seven, 6, 10, 6), 560); /* exactly full */
    CHECK_STATUS(llmk_kv_cache_append_into_flat(cache, 16, seven, 1, 16, 1), 571);
    CHECK_STATUS(llmk_kv_cache_append_into_flat(cache, 16, seven, 7, 20, 1), 567);
    CHECK_STATUS(llmk_kv_cache_append_into_flat(cache, 16, seven, 0, 0, 0), 561);
    CHECK_STATUS(llmk_kv_cache_append_into_flat(cache, 16, seven, 1, -1, 1), 561);
    CHECK_STATUS(llmk_kv_cache_append_into_flat(NULL, 0, seven, 1, 0, 1), 571);
    free(cache);

    CHECK_STATUS(llmk_kv_cache_reserve_flat(0, &cache), 561);
    CHECK(cache == NULL);
    CHECK_STATUS(llmk_kv_cache_reserve_flat(LLMK_MAX_DIM + 1LL, &cache), 564);
    CHECK_STATUS(llmk_kv_cache_reserve_flat(4, NULL), LLMK_INVALID_ARGUMENT);
}

static void test_append_into_allocates_nothing(void) {
    enum { CAP = 133120 + 128 * 64, STEP = 128 };
    double *cache = NULL, vals[STEP];
    for (int i = 0; i < STEP; i++) vals[i] = i;
    CHECK_STATUS(llmk_kv_cache_reserve_flat(CAP, &cache), 560);

    /* The counter sees allocations: the copying append must register. */
    double *copy = NULL;
    int64_t n = 0;
    n_allocs = 0;
    counting = 1;
    int st = llmk_kv_cache_append_flat(vals, STEP, vals, STEP, STEP, STEP, &copy, &n);
    counting = 0;
    CHECK_STATUS(st, 560);
    CHECK(n_allocs >= 1);
    free(copy);

    /* The reserved-capacity append: many calls, no allocation at all. */
    double *before = cache;
    int64_t len = 0;
    n_allocs = 0;
    counting = 1;
    int fails = 0;
    while (len + STEP <= CAP) {
        if (llmk_kv_cache_append_into_flat(cache, CAP, vals, STEP, len, STEP) != LLMK_OK) fails++;
        len += STEP;
    }
    st = llmk_kv_cache_append_into_flat(cache, CAP, vals, STEP, len, STEP); /* the 571 path too */
    counting = 0;
    CHECK_EQ_INT(fails, 0);
    CHECK_STATUS(st, 571);
    CHECK_EQ_INT(n_allocs, 0);
    CHECK(cache == before);
    CHECK_EQ_DBL(cache[len - 1], (double)(STEP - 1));
    free(cache);
}

/* ---- argmax ----------------------------------------------------------- */

static void test_argmax(void) {
    int64_t id = -1;
    double v = 0;
    const double mid[] = {1.0, 9.0, 3.0};
    CHECK_STATUS(llmk_greedy_argmax_flat(mid, 3, 3, &id, &v), 560);
    CHECK_EQ_INT(id, 1);
    CHECK_EQ_DBL(v, 9.0);
    const double tied[] = {2.0, 7.0, 7.0, 1.0};
    CHECK_STATUS(llmk_greedy_argmax_flat(tied, 4, 4, &id, &v), 560);
    CHECK_EQ_INT(id, 1); /* the first of the two 7.0s */

    /* The maximum at every position of a small row, and a tie at every pair. */
    double row[9];
    for (int p = 0; p < 9; p++) {
        for (int k = 0; k < 9; k++) row[k] = -(double)k;
        row[p] = 5.0;
        CHECK_STATUS(llmk_greedy_argmax_flat(row, 9, 9, &id, &v), 560);
        CHECK_EQ_INT(id, p);
        for (int q = p + 1; q < 9; q++) {
            row[q] = 5.0;
            CHECK_STATUS(llmk_greedy_argmax_flat(row, 9, 9, &id, &v), 560);
            CHECK_EQ_INT(id, p);
            row[q] = -(double)q;
        }
    }

    /* A full Qwen3 vocabulary row with the maximum planted at id 12095, and
     * a later tie that must lose. Above the fan-out threshold. */
    enum { VOCAB = 151936 };
    double *logits = malloc(VOCAB * sizeof *logits);
    for (int k = 0; k < VOCAB; k++) logits[k] = rnd() * 10.0;
    logits[12095] = 1e4;
    logits[150000] = 1e4;
    CHECK_STATUS(llmk_greedy_argmax_flat(logits, VOCAB, VOCAB, &id, &v), 560);
    CHECK_EQ_INT(id, 12095);
    CHECK_EQ_DBL(v, 1e4);
    for (int t = 1; t <= 4; t++) {
        llmk_pool *pool = NULL;
        CHECK_STATUS(llmk_pool_create(t, &pool), 560);
        id = -1;
        CHECK_STATUS(llmk_ref_greedy_argmax(pool, logits, VOCAB, VOCAB, &id, &v), 560);
        CHECK_EQ_INT(id, 12095);
        /* NaN: refused whatever the pool, naming the first NaN. */
        logits[140000] = NAN;
        logits[90000] = NAN;
        CHECK_STATUS(llmk_ref_greedy_argmax(pool, logits, VOCAB, VOCAB, &id, &v), LLMK_NAN_INPUT);
        CHECK(strstr(llmk_last_error(), "90000") != NULL);
        logits[140000] = 0.0;
        logits[90000] = 0.0;
        llmk_pool_free(pool);
    }
    free(logits);

    /* NaN in a small row, infinities as ordinary values. */
    const double withnan[] = {1.0, NAN, 3.0};
    CHECK_STATUS(llmk_greedy_argmax_flat(withnan, 3, 3, &id, &v), LLMK_NAN_INPUT);
    const double ninf[] = {-INFINITY, -INFINITY};
    CHECK_STATUS(llmk_greedy_argmax_flat(ninf, 2, 2, &id, &v), 560);
    CHECK_EQ_INT(id, 0);
    const double pinf[] = {1.0, INFINITY, INFINITY};
    CHECK_STATUS(llmk_greedy_argmax_flat(pinf, 3, 3, &id, &v), 560);
    CHECK_EQ_INT(id, 1);
    const double one[] = {-2.5};
    CHECK_STATUS(llmk_greedy_argmax_flat(one, 1, 1, &id, &v), 560);
    CHECK_EQ_INT(id, 0);

    CHECK_STATUS(llmk_greedy_argmax_flat(mid, 2, 3, &id, &v), 568);
    CHECK_STATUS(llmk_greedy_argmax_flat(mid, 0, 0, &id, &v), 561);
    CHECK_STATUS(llmk_greedy_argmax_flat(mid, 3, LLMK_MAX_DIM + 1LL, &id, &v), 564);
    CHECK_STATUS(llmk_greedy_argmax_flat(NULL, 3, 3, &id, &v), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_greedy_argmax_flat(mid, 3, 3, NULL, &v), LLMK_INVALID_ARGUMENT);
}

int main(void) {
    test_gemv_example();
    test_gemv_parallel();
    test_gemv_refusals();
    test_residual();
    test_kv_append_flat();
    test_kv_reserved();
    test_append_into_allocates_nothing();
    test_argmax();
    return check_summary("test_primitives");
}
