/* A pool of worker threads created once and reused for every parallel region:
 * no thread is created per call. The caller of llmk_pool_run takes part as
 * worker 0. Workers spin briefly for new work, then sleep on a condition
 * variable, so an idle pool costs nothing. */
#ifndef LLMK_POOL_H
#define LLMK_POOL_H

typedef struct llmk_pool llmk_pool;

/* fn is called once on every worker, ith in [0, nth). */
typedef void (*llmk_pool_fn)(void *ctx, int ith, int nth);

/* n_threads < 1 means "one per online CPU". */
int llmk_pool_create(int n_threads, llmk_pool **out);
void llmk_pool_free(llmk_pool *pool);
int llmk_pool_size(const llmk_pool *pool);

/* Run fn on all workers and return when every one has returned. Not
 * re-entrant: one region at a time per pool. A NULL pool runs fn(ctx, 0, 1). */
void llmk_pool_run(llmk_pool *pool, llmk_pool_fn fn, void *ctx);

/* Inside a region: wait until all nth workers reach this point (spinning,
 * then yielding). Every worker must call it the same number of times. */
void llmk_pool_barrier(llmk_pool *pool);

/* Number of online CPUs (at least 1). */
int llmk_cpu_count(void);

#endif
