/*
 * llmk_primitives.h — seed 000's decode primitives in double precision (src/ref/,
 * src/contract.c): the four shape checks, the transposed GEMV, KV-cache
 * growth, greedy argmax and residual add, with the seed's status codes. They
 * are what the reference decode path composes and what every faster path is
 * checked against; an application that runs models needs only llmk.h.
 */
#ifndef LLMK_PRIMITIVES_H
#define LLMK_PRIMITIVES_H

#include "llmk.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The four shape checks (src/contract.c). Every primitive below calls its
 * check before it reads a single element. Arguments are the dimensions the
 * caller claims and the real lengths of the buffers; the first failing rule,
 * in the order listed, decides the status.
 */
/* residual_add_flat: n < 1 -> 561; n > LLMK_MAX_DIM -> 564;
 * len_a != n -> 562; len_b != n -> 563; else 560. */
LLMK_API int llmk_residual_dims_check(int64_t n, int64_t len_a, int64_t len_b);
/* kv_cache_append_flat: cache_len < 0 or n_new < 1 -> 561 (an empty cache is
 * fine, an empty append is not: a decode step adds at least one token);
 * cache_len, n_new or cache_len + n_new > LLMK_MAX_DIM -> 564;
 * len_cache != cache_len -> 566; len_new != n_new -> 567; else 560. */
LLMK_API int llmk_kv_append_dims_check(int64_t cache_len, int64_t n_new, int64_t len_cache,
                              int64_t len_new);
/* greedy_argmax_flat: n < 1 -> 561; n > LLMK_MAX_DIM -> 564;
 * len_logits != n -> 568; else 560. */
LLMK_API int llmk_argmax_dims_check(int64_t n, int64_t len_logits);
/* gemv_transposed_parallel_flat (A is m x n): m < 1 or n < 1 -> 561;
 * m or n > LLMK_MAX_DIM -> 564; len_a != m*n -> 569; len_x != m -> 570; else 560. */
LLMK_API int llmk_gemv_dims_check(int64_t m, int64_t n, int64_t len_a, int64_t len_x);

/*
 * Seed-000 decode primitives in double precision (src/ref/primitives.c).
 * Each buffer travels with its real length (in elements). Output buffers are
 * the caller's and must hold at least the result (LLMK_BUFFER_TOO_SMALL
 * otherwise); a NULL buffer with a non-zero length is LLMK_INVALID_ARGUMENT.
 * Shape refusals come first and use the seed codes of the checks above.
 * Parallel paths run on one process-wide worker pool created on first use;
 * results never depend on whether, or on how many threads, it was used.
 */
/* Work (cells) below which a primitive runs serially: fanning out smaller
 * problems costs more than it saves. */
#define LLMK_GEMV_PARALLEL_MIN_CELLS (1 << 16)
#define LLMK_RESIDUAL_PARALLEL_MIN_CELLS (1 << 15)

/* y[j] = sum_i a[i*n + j] * x[i] for j in [0, n): y = A^T x with A m x n
 * row-major and m = len(x). Serial below LLMK_GEMV_PARALLEL_MIN_CELLS (m*n)
 * cells, i outer / j inner; above it, the same loop on disjoint column bands.
 * Each y[j] is summed over i = 0..m-1 in order either way, so the two paths
 * are bitwise identical. y must not overlap a or x; y_len >= n. */
LLMK_API int llmk_gemv_transposed_parallel_flat(const double *a, size_t a_len, const double *x,
                                       size_t x_len, int64_t m, int64_t n, double *y,
                                       size_t y_len);

/* out[i] = a[i] + b[i] for i in [0, n). out may be a or b (in-place add);
 * out_len >= n. Parallel above LLMK_RESIDUAL_PARALLEL_MIN_CELLS elements. */
LLMK_API int llmk_residual_add_flat(const double *a, size_t a_len, const double *b, size_t b_len,
                           int64_t n, double *out, size_t out_len);

/* out = cache ++ new_vals: a NEW buffer of cache_len + n_new elements,
 * allocated with malloc; the caller owns it and releases it with free().
 * cache_len may be 0 (cache may then be NULL); n_new must be >= 1. Costs
 * O(cache_len + n_new) per call, so a loop that grows one cache should use
 * the reserved-capacity pair below instead. On failure *out is NULL. */
LLMK_API int llmk_kv_cache_append_flat(const double *cache, size_t cache_buf_len,
                              const double *new_vals, size_t new_buf_len, int64_t cache_len,
                              int64_t n_new, double **out, int64_t *out_n);

/* A zero-filled buffer of max_elements (1..LLMK_MAX_DIM) doubles from calloc,
 * sized once for a cache's whole life; release it with free(). */
LLMK_API int llmk_kv_cache_reserve_flat(int64_t max_elements, double **out);

/* Write new_vals into cache[cache_len, cache_len + n_new) in place, where
 * `capacity` is the buffer's real length (from reserve). Allocates nothing
 * and copies nothing already cached. LLMK_CACHE_CAPACITY_EXCEEDED (571) when
 * cache_len + n_new > capacity; other refusals as llmk_kv_append_dims_check
 * with len_cache = cache_len (the buffer is longer than its content by design). */
LLMK_API int llmk_kv_cache_append_into_flat(double *cache, size_t capacity, const double *new_vals,
                                   size_t new_buf_len, int64_t cache_len, int64_t n_new);

/* The first index holding the row's maximum (ties go to the lowest id, as
 * numpy.argmax) and that maximum. Two passes: a scan for the maximum, then
 * llmk_greedy_token_id(logit, max) per candidate until the first one matches.
 * Any NaN in the row is refused with LLMK_NAN_INPUT (naming its index):
 * no token is "the maximum" of a row that has lost its numbers. +-inf are
 * ordinary values (a row of all -inf picks id 0). */
LLMK_API int llmk_greedy_argmax_flat(const double *logits, size_t logits_len, int64_t n,
                            int64_t *token_id, double *logit);

#ifdef __cplusplus
}
#endif
#endif /* LLMK_PRIMITIVES_H */
