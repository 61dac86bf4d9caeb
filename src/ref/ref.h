/* Internal entry points of the f64 reference primitives (src/ref/primitives.c)
 * for callers that own a worker pool, such as the reference decode loop: the
 * same checks, results and thresholds as the public llmk_*_flat functions,
 * but parallel work runs on `pool` (NULL: serial) instead of the lazily
 * created process-wide pool. */
#ifndef LLMK_REF_H
#define LLMK_REF_H

#include "llmk.h"
#include "pool.h"

int llmk_ref_gemv_transposed(llmk_pool *pool, const double *a, size_t a_len, const double *x,
                             size_t x_len, int64_t m, int64_t n, double *y, size_t y_len);
int llmk_ref_residual_add(llmk_pool *pool, const double *a, size_t a_len, const double *b,
                          size_t b_len, int64_t n, double *out, size_t out_len);
int llmk_ref_greedy_argmax(llmk_pool *pool, const double *logits, size_t logits_len, int64_t n,
                           int64_t *token_id, double *logit);

/* Rows at or above which argmax's maximum scan fans out over the pool. */
#define LLMK_ARGMAX_PARALLEL_MIN_CELLS (1 << 16)

/* The process-wide pool behind the public functions (one per online CPU,
 * created once via pthread_once; NULL if it could not be created, in which
 * case everything runs serially). */
llmk_pool *llmk_ref_default_pool(void);

#endif
