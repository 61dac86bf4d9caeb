/* Seed-000 decode primitives in double precision: transposed GEMV, residual
 * add, KV-cache growth (copying and reserved-capacity) and greedy argmax.
 * Every function runs its shape check before touching an element. */
#include "ref.h"

#include "internal.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* A buffer length as the checks see it (a size_t beyond int64 saturates; it
 * can never equal a checked dimension anyway). */
static int64_t len64(size_t n) { return n > (size_t)INT64_MAX ? INT64_MAX : (int64_t)n; }

static int need_buffer(const char *fn, const char *name, const void *p, size_t len) {
    if (!p && len > 0)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: %s is NULL but its length is %zu", fn, name,
                         len);
    return LLMK_OK;
}

static int need_output(const char *fn, const char *name, const void *p, size_t have,
                       int64_t need) {
    if (!p) return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: output %s is NULL", fn, name);
    if ((uint64_t)need > have)
        return llmk_fail(LLMK_BUFFER_TOO_SMALL, "%s: output %s holds %zu elements, needs %lld",
                         fn, name, have, (long long)need);
    return LLMK_OK;
}

/* ---- the process-wide pool -------------------------------------------- */

static pthread_once_t default_pool_once = PTHREAD_ONCE_INIT;
static llmk_pool *default_pool;
/* llmk_pool_run is one region at a time; callers on several threads take turns. */
static pthread_mutex_t default_pool_mu = PTHREAD_MUTEX_INITIALIZER;

static void default_pool_create(void) {
    if (llmk_pool_create(0, &default_pool) != LLMK_OK) default_pool = NULL;
}

llmk_pool *llmk_ref_default_pool(void) {
    pthread_once(&default_pool_once, default_pool_create);
    return default_pool;
}

/* Run fn on `pool`; the default pool is shared, so it is locked around the region. */
static void run_on(llmk_pool *pool, llmk_pool_fn fn, void *ctx) {
    if (pool && pool == default_pool) {
        pthread_mutex_lock(&default_pool_mu);
        llmk_pool_run(pool, fn, ctx);
        pthread_mutex_unlock(&default_pool_mu);
    } else {
        llmk_pool_run(pool, fn, ctx);
    }
}

/* ---- y = A^T x -------------------------------------------------------- */

/* Columns [j0, j1) of y = A^T x: i outer, j inner, so each row of A is read
 * contiguously and every y[j] accumulates over i = 0..m-1 in that order,
 * whatever band it belongs to. */
static void gemv_t_band(const double *a, const double *x, int64_t m, int64_t n, int64_t j0,
                        int64_t j1, double *y) {
    for (int64_t j = j0; j < j1; j++) y[j] = 0.0;
    for (int64_t i = 0; i < m; i++) {
        const double xi = x[i];
        const double *row = a + i * n;
        for (int64_t j = j0; j < j1; j++) y[j] += row[j] * xi;
    }
}

struct gemv_job {
    const double *a, *x;
    int64_t m, n;
    double *y;
};

static void gemv_worker(void *p, int ith, int nth) {
    const struct gemv_job *job = p;
    int64_t j0, j1;
    llmk_split_range(job->n, ith, nth, &j0, &j1);
    if (j0 < j1) gemv_t_band(job->a, job->x, job->m, job->n, j0, j1, job->y);
}

int llmk_ref_gemv_transposed(llmk_pool *pool, const double *a, size_t a_len, const double *x,
                             size_t x_len, int64_t m, int64_t n, double *y, size_t y_len) {
    const char *fn = "gemv_transposed_parallel_flat";
    int st = llmk_gemv_dims_check(m, n, len64(a_len), len64(x_len));
    if (st != LLMK_OK) return st;
    if ((st = need_buffer(fn, "a", a, a_len)) != LLMK_OK ||
        (st = need_buffer(fn, "x", x, x_len)) != LLMK_OK ||
        (st = need_output(fn, "y", y, y_len, n)) != LLMK_OK)
        return st;
    if (m * n < LLMK_GEMV_PARALLEL_MIN_CELLS || llmk_pool_size(pool) == 1) {
        gemv_t_band(a, x, m, n, 0, n, y);
    } else {
        struct gemv_job job = {a, x, m, n, y};
        run_on(pool, gemv_worker, &job);
    }
    return LLMK_OK;
}

int llmk_gemv_transposed_parallel_flat(const double *a, size_t a_len, const double *x,
                                       size_t x_len, int64_t m, int64_t n, double *y,
                                       size_t y_len) {
    llmk_error_clear();
    /* Only reach for the pool when the work is big enough to use it. */
    llmk_pool *pool = NULL;
    if (m > 0 && n > 0 && m <= LLMK_MAX_DIM && n <= LLMK_MAX_DIM &&
        m * n >= LLMK_GEMV_PARALLEL_MIN_CELLS)
        pool = llmk_ref_default_pool();
    return llmk_ref_gemv_transposed(pool, a, a_len, x, x_len, m, n, y, y_len);
}

/* ---- residual add ----------------------------------------------------- */

struct add_job {
    const double *a, *b;
    int64_t n;
    double *out;
};

static void add_range(const double *a, const double *b, int64_t lo, int64_t hi, double *out) {
    for (int64_t i = lo; i < hi; i++) out[i] = a[i] + b[i];
}

static void add_worker(void *p, int ith, int nth) {
    const struct add_job *job = p;
    int64_t lo, hi;
    llmk_split_range(job->n, ith, nth, &lo, &hi);
    add_range(job->a, job->b, lo, hi, job->out);
}

int llmk_ref_residual_add(llmk_pool *pool, const double *a, size_t a_len, const double *b,
                          size_t b_len, int64_t n, double *out, size_t out_len) {
    const char *fn = "residual_add_flat";
    int st = llmk_residual_dims_check(n, len64(a_len), len64(b_len));
    if (st != LLMK_OK) return st;
    if ((st = need_buffer(fn, "a", a, a_len)) != LLMK_OK ||
        (st = need_buffer(fn, "b", b, b_len)) != LLMK_OK ||
        (st = need_output(fn, "out", out, out_len, n)) != LLMK_OK)
        return st;
    if (n < LLMK_RESIDUAL_PARALLEL_MIN_CELLS || llmk_pool_size(pool) == 1) {
        add_range(a, b, 0, n, out);
    } else {
        struct add_job job = {a, b, n, out};
        run_on(pool, add_worker, &job);
    }
    return LLMK_OK;
}

int llmk_residual_add_flat(const double *a, size_t a_len, const double *b, size_t b_len,
                           int64_t n, double *out, size_t out_len) {
    llmk_error_clear();
    llmk_pool *pool = NULL;
    if (n >= LLMK_RESIDUAL_PARALLEL_MIN_CELLS && n <= LLMK_MAX_DIM) pool = llmk_ref_default_pool();
    return llmk_ref_residual_add(pool, a, a_len, b, b_len, n, out, out_len);
}

/* ---- KV-cache growth -------------------------------------------------- */

int llmk_kv_cache_append_flat(const double *cache, size_t cache_buf_len,
                              const double *new_vals, size_t new_buf_len, int64_t cache_len,
                              int64_t n_new, double **out, int64_t *out_n) {
    llmk_error_clear();
    const char *fn = "kv_cache_append_flat";
    if (!out || !out_n) return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: NULL output pointer", fn);
    *out = NULL;
    *out_n = 0;
    int st = llmk_kv_append_dims_check(cache_len, n_new, len64(cache_buf_len), len64(new_buf_len));
    if (st != LLMK_OK) return st;
    if ((st = need_buffer(fn, "cache", cache, cache_buf_len)) != LLMK_OK ||
        (st = need_buffer(fn, "new_vals", new_vals, new_buf_len)) != LLMK_OK)
        return st;
    int64_t total = cache_len + n_new; /* <= LLMK_MAX_DIM, checked */
    double *buf = malloc((size_t)total * sizeof *buf);
    if (!buf)
        return llmk_fail(LLMK_OUT_OF_MEMORY, "%s: cannot allocate %lld doubles", fn,
                         (long long)total);
    if (cache_len > 0) memcpy(buf, cache, (size_t)cache_len * sizeof *buf);
    memcpy(buf + cache_len, new_vals, (size_t)n_new * sizeof *buf);
    *out = buf;
    *out_n = total;
    return LLMK_OK;
}

int llmk_kv_cache_reserve_flat(int64_t max_elements, double **out) {
    llmk_error_clear();
    const char *fn = "kv_cache_reserve_flat";
    if (!out) return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: NULL output pointer", fn);
    *out = NULL;
    if (max_elements < 1)
        return llmk_fail(LLMK_EMPTY_DIMENSION, "%s: max_elements = %lld, must be >= 1", fn,
                         (long long)max_elements);
    if (max_elements > LLMK_MAX_DIM)
        return llmk_fail(LLMK_DIMENSION_TOO_LARGE,
                         "%s: max_elements = %lld exceeds LLMK_MAX_DIM (%d)", fn,
                         (long long)max_elements, LLMK_MAX_DIM);
    double *buf = calloc((size_t)max_elements, sizeof *buf);
    if (!buf)
        return llmk_fail(LLMK_OUT_OF_MEMORY, "%s: cannot allocate %lld doubles", fn,
                         (long long)max_elements);
    *out = buf;
    return LLMK_OK;
}

int llmk_kv_cache_append_into_flat(double *cache, size_t capacity, const double *new_vals,
                                   size_t new_buf_len, int64_t cache_len, int64_t n_new) {
    llmk_error_clear();
    const char *fn = "kv_cache_append_into_flat";
    /* The buffer is longer than its content by design, so the content length
     * is checked against the capacity below, not for equality. */
    int st = llmk_kv_append_dims_check(cache_len, n_new, cache_len, len64(new_buf_len));
    if (st != LLMK_OK) return st;
    if ((uint64_t)(cache_len + n_new) > capacity)
        return llmk_fail(LLMK_CACHE_CAPACITY_EXCEEDED,
                         "%s: %lld cached + %lld new elements exceed the capacity of %zu", fn,
                         (long long)cache_len, (long long)n_new, capacity);
    if ((st = need_buffer(fn, "cache", cache, capacity)) != LLMK_OK ||
        (st = need_buffer(fn, "new_vals", new_vals, new_buf_len)) != LLMK_OK)
        return st;
    memcpy(cache + cache_len, new_vals, (size_t)n_new * sizeof *cache);
    return LLMK_OK;
}

/* ---- greedy argmax ---------------------------------------------------- */

struct max_job {
    const double *v;
    int64_t n;
    double band_max[64];
    int64_t band_nan[64]; /* first NaN index in the band, or -1 */
};

/* Maximum of v[lo, hi) (-inf when empty) and the first NaN index (-1 if none).
 * max is exact, so the bands' order does not matter for the result. */
static void max_range(const double *v, int64_t lo, int64_t hi, double *mx, int64_t *nan_at) {
    double m = -INFINITY;
    *nan_at = -1;
    for (int64_t i = lo; i < hi; i++) {
        if (isnan(v[i])) {
            *nan_at = i;
            break;
        }
        if (v[i] > m) m = v[i];
    }
    *mx = m;
}

static void max_worker(void *p, int ith, int nth) {
    struct max_job *job = p;
    int64_t lo, hi;
    llmk_split_range(job->n, ith, nth, &lo, &hi);
    max_range(job->v, lo, hi, &job->band_max[ith], &job->band_nan[ith]);
}

int llmk_ref_greedy_argmax(llmk_pool *pool, const double *logits, size_t logits_len, int64_t n,
                           int64_t *token_id, double *logit) {
    const char *fn = "greedy_argmax_flat";
    if (!token_id || !logit) return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: NULL output pointer", fn);
    int st = llmk_argmax_dims_check(n, len64(logits_len));
    if (st != LLMK_OK) return st;
    if ((st = need_buffer(fn, "logits", logits, logits_len)) != LLMK_OK) return st;

    /* Pass 1: the row's maximum (and any NaN, which refuses the row). */
    double mx;
    int64_t nan_at = -1;
    if (n < LLMK_ARGMAX_PARALLEL_MIN_CELLS || llmk_pool_size(pool) == 1 ||
        llmk_pool_size(pool) > 64) {
        max_range(logits, 0, n, &mx, &nan_at);
    } else {
        struct max_job job;
        job.v = logits;
        job.n = n;
        run_on(pool, max_worker, &job);
        mx = -INFINITY;
        for (int t = 0; t < llmk_pool_size(pool); t++) {
            if (job.band_nan[t] >= 0 && nan_at < 0) nan_at = job.band_nan[t];
            if (job.band_max[t] > mx) mx = job.band_max[t];
        }
    }
    if (nan_at >= 0)
        return llmk_fail(LLMK_NAN_INPUT, "%s: logits[%lld] is NaN (row of %lld)", fn,
                         (long long)nan_at, (long long)n);

    /* Pass 2: the per-candidate formula, first match wins (numpy's tie rule). */
    for (int64_t i = 0; i < n; i++) {
        if (llmk_greedy_token_id(logits[i], mx) == 1.0) {
            *token_id = i;
            *logit = logits[i];
            return LLMK_OK;
        }
    }
    LLMK_CHECK(!"the maximum of a NaN-free row is one of its elements");
    return LLMK_OK;
}

int llmk_greedy_argmax_flat(const double *logits, size_t logits_len, int64_t n,
                            int64_t *token_id, double *logit) {
    llmk_error_clear();
    llmk_pool *pool = NULL;
    if (n >= LLMK_ARGMAX_PARALLEL_MIN_CELLS && n <= LLMK_MAX_DIM) pool = llmk_ref_default_pool();
    return llmk_ref_greedy_argmax(pool, logits, logits_len, n, token_id, logit);
}
