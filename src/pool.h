/* A pool of worker threads created once and reused for every parallel region:
 * no thread is created per call. The caller of llmk_pool_run takes part as
 * worker 0. Workers spin briefly for new work, then sleep on a condition
 * variable, so an idle pool costs nothing. */
#ifndef LLMK_POOL_H
#define LLMK_POOL_H

#include "llmk.h" /* the pool's public half: create, free, size, run, llmk_cpu_count */

/* Inside a region: wait until all nth workers reach this point (spinning,
 * then yielding). Every worker must call it the same number of times. */
void llmk_pool_barrier(llmk_pool *pool);

#endif
