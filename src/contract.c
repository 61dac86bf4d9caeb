/* The four shape checks of seed 000. Each primitive calls its check before it
 * reads any element: a claimed dimension is compared with the real length of
 * the buffer it describes, so a wrong claim is refused, never read past. */
#include "internal.h"

static int dim_ok(const char *fn, const char *what, int64_t v, int64_t min, int *status) {
    if (v < min) {
        *status = llmk_fail(LLMK_EMPTY_DIMENSION, "%s: %s = %lld, must be >= %lld", fn, what,
                            (long long)v, (long long)min);
        return 0;
    }
    if (v > LLMK_MAX_DIM) {
        *status = llmk_fail(LLMK_DIMENSION_TOO_LARGE, "%s: %s = %lld exceeds LLMK_MAX_DIM (%d)",
                            fn, what, (long long)v, LLMK_MAX_DIM);
        return 0;
    }
    return 1;
}

static int len_ok(const char *fn, const char *buf, int64_t real, int64_t claimed, int code,
                  int *status) {
    if (real != claimed) {
        *status = llmk_fail(code, "%s: %s holds %lld elements, the dimensions claim %lld", fn, buf,
                            (long long)real, (long long)claimed);
        return 0;
    }
    return 1;
}

int llmk_residual_dims_check(int64_t n, int64_t len_a, int64_t len_b) {
    llmk_error_clear();
    const char *fn = "residual_add_flat";
    int st = LLMK_OK;
    if (dim_ok(fn, "n", n, 1, &st) && len_ok(fn, "a", len_a, n, LLMK_A_LENGTH_MISMATCH, &st))
        len_ok(fn, "b", len_b, n, LLMK_B_LENGTH_MISMATCH, &st);
    return st;
}

int llmk_kv_append_dims_check(int64_t cache_len, int64_t n_new, int64_t len_cache,
                              int64_t len_new) {
    llmk_error_clear();
    const char *fn = "kv_cache_append_flat";
    int st = LLMK_OK;
    if (!dim_ok(fn, "cache_len", cache_len, 0, &st) || !dim_ok(fn, "n_new", n_new, 1, &st))
        return st;
    /* Both are <= 2^24 here, so the sum cannot overflow. */
    if (cache_len + n_new > LLMK_MAX_DIM)
        return llmk_fail(LLMK_DIMENSION_TOO_LARGE,
                         "%s: cache_len + n_new = %lld exceeds LLMK_MAX_DIM (%d)", fn,
                         (long long)(cache_len + n_new), LLMK_MAX_DIM);
    if (len_ok(fn, "cache", len_cache, cache_len, LLMK_CACHE_LENGTH_MISMATCH, &st))
        len_ok(fn, "new_vals", len_new, n_new, LLMK_NEW_LENGTH_MISMATCH, &st);
    return st;
}

int llmk_argmax_dims_check(int64_t n, int64_t len_logits) {
    llmk_error_clear();
    const char *fn = "greedy_argmax_flat";
    int st = LLMK_OK;
    if (dim_ok(fn, "n", n, 1, &st))
        len_ok(fn, "logits", len_logits, n, LLMK_LOGITS_LENGTH_MISMATCH, &st);
    return st;
}

int llmk_gemv_dims_check(int64_t m, int64_t n, int64_t len_a, int64_t len_x) {
    llmk_error_clear();
    const char *fn = "gemv_transposed_parallel_flat";
    int st = LLMK_OK;
    if (!dim_ok(fn, "m", m, 1, &st) || !dim_ok(fn, "n", n, 1, &st)) return st;
    /* m, n <= 2^24, so m * n <= 2^48 fits. */
    if (len_ok(fn, "a", len_a, m * n, LLMK_GEMV_A_LENGTH_MISMATCH, &st))
        len_ok(fn, "x", len_x, m, LLMK_GEMV_X_LENGTH_MISMATCH, &st);
    return st;
}
