#include "pool.h"

#include "internal.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

/* Spin this many pause iterations before sleeping (workers) or yielding
 * (barrier): about a millisecond, long enough to bridge phase gaps in a
 * decode step, short enough that an idle pool goes quiet at once. */
enum { SPIN_LIMIT = 1 << 15 };

struct worker_arg {
    llmk_pool *pool;
    int ith;
};

struct llmk_pool {
    int n;
    pthread_t *threads;
    struct worker_arg *args;
    llmk_pool_fn fn;
    void *ctx;
    atomic_uint_fast64_t generation; /* bumped once per region */
    atomic_int pending;              /* helper workers still inside the region */
    atomic_int stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int bar_count;
    atomic_uint bar_phase;
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

int llmk_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}

static void *worker_main(void *p) {
    struct worker_arg *arg = p;
    llmk_pool *pool = arg->pool;
    uint_fast64_t seen = 0;
    for (;;) {
        int spins = 0;
        while (atomic_load(&pool->generation) == seen && !atomic_load(&pool->stop)) {
            if (++spins < SPIN_LIMIT) {
                cpu_relax();
                continue;
            }
            pthread_mutex_lock(&pool->mu);
            while (atomic_load(&pool->generation) == seen && !atomic_load(&pool->stop))
                pthread_cond_wait(&pool->cv, &pool->mu);
            pthread_mutex_unlock(&pool->mu);
        }
        if (atomic_load(&pool->stop)) return NULL;
        seen = atomic_load(&pool->generation);
        pool->fn(pool->ctx, arg->ith, pool->n);
        atomic_fetch_sub(&pool->pending, 1);
    }
}

int llmk_pool_create(int n_threads, llmk_pool **out) {
    if (!out) return llmk_fail(LLMK_INVALID_ARGUMENT, "pool: NULL output");
    *out = NULL;
    if (n_threads < 1) n_threads = llmk_cpu_count();
    if (n_threads > 1024) return llmk_fail(LLMK_INVALID_ARGUMENT, "pool: %d threads is too many", n_threads);
    llmk_pool *pool = calloc(1, sizeof *pool);
    if (!pool) return llmk_fail(LLMK_OUT_OF_MEMORY, "pool: out of memory");
    pool->n = n_threads;
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->cv, NULL);
    if (n_threads > 1) {
        pool->threads = calloc((size_t)n_threads, sizeof *pool->threads);
        pool->args = calloc((size_t)n_threads, sizeof *pool->args);
        if (!pool->threads || !pool->args) {
            llmk_pool_free(pool);
            return llmk_fail(LLMK_OUT_OF_MEMORY, "pool: out of memory");
        }
        for (int i = 1; i < n_threads; i++) {
            pool->args[i] = (struct worker_arg){pool, i};
            if (pthread_create(&pool->threads[i], NULL, worker_main, &pool->args[i]) != 0) {
                pool->n = i; /* join only the ones that started */
                llmk_pool_free(pool);
                return llmk_fail(LLMK_OUT_OF_MEMORY, "pool: could not start thread %d", i);
            }
        }
    }
    *out = pool;
    return LLMK_OK;
}

void llmk_pool_free(llmk_pool *pool) {
    if (!pool) return;
    pthread_mutex_lock(&pool->mu);
    atomic_store(&pool->stop, 1);
    pthread_cond_broadcast(&pool->cv);
    pthread_mutex_unlock(&pool->mu);
    for (int i = 1; i < pool->n && pool->threads; i++) pthread_join(pool->threads[i], NULL);
    pthread_mutex_destroy(&pool->mu);
    pthread_cond_destroy(&pool->cv);
    free(pool->threads);
    free(pool->args);
    free(pool);
}

int llmk_pool_size(const llmk_pool *pool) { return pool ? pool->n : 1; }

void llmk_pool_run(llmk_pool *pool, llmk_pool_fn fn, void *ctx) {
    if (!pool || pool->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    pool->fn = fn;
    pool->ctx = ctx;
    atomic_store(&pool->pending, pool->n - 1);
    pthread_mutex_lock(&pool->mu);
    atomic_fetch_add(&pool->generation, 1);
    pthread_cond_broadcast(&pool->cv);
    pthread_mutex_unlock(&pool->mu);
    fn(ctx, 0, pool->n);
    int spins = 0;
    while (atomic_load(&pool->pending) != 0) {
        if (++spins < SPIN_LIMIT)
            cpu_relax();
        else
            sched_yield();
    }
}

void llmk_pool_barrier(llmk_pool *pool) {
    if (!pool || pool->n == 1) return;
    unsigned phase = atomic_load(&pool->bar_phase);
    if (atomic_fetch_add(&pool->bar_count, 1) == pool->n - 1) {
        atomic_store(&pool->bar_count, 0);
        atomic_fetch_add(&pool->bar_phase, 1);
        return;
    }
    int spins = 0;
    while (atomic_load(&pool->bar_phase) == phase) {
        if (++spins < SPIN_LIMIT)
            cpu_relax();
        else
            sched_yield();
    }
}
