#include "pool.h"

#include "internal.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

/* Idle workers spin this many pause iterations (about a millisecond) before
 * sleeping on the condition variable: long enough to bridge the gap between
 * decode steps, short enough that an idle pool goes quiet at once. */
enum { SPIN_LIMIT = 1 << 15 };
/* A thread waiting at a barrier (or for the end of a region) spins about
 * 0.5 ms, then sleeps on a futex until the last arrival wakes it. Phases of
 * a decode step last tens of microseconds, so on a quiet machine nobody
 * sleeps; when other processes hold the cores, a waiter that kept spinning
 * would burn the time slice its descheduled peer needs (the step then took
 * one scheduler slice per barrier: tg fell from ~100 to ~2 t/s at load 6). */
enum { SPIN_WAIT = 1 << 14 };
/* With more threads than online CPUs some thread is always descheduled, so
 * a waiter sleeps almost at once (test_exec, which decodes on 3 threads on
 * this 2-core machine: 29 s spinning the full budget, 11 s with this) */
enum { SPIN_OVERSUBSCRIBED = 1 << 6 };

struct worker_arg {
    llmk_pool *pool;
    int ith;
};

/* The pool that started a region last, process-wide. An idle worker spins
 * only while its own pool is that one: when another pool starts (a draft
 * model's context between the target's verify steps), this pool's idle
 * workers sleep at once rather than spin out their millisecond on the cores
 * the other pool's region needs. (Speculation with a draft model ran its
 * steps 1.5x slower than their parts: each switch between the two pools
 * left a spinning worker competing with the active pool's barrier.) */
static _Atomic(const void *) g_active_pool;

struct llmk_pool {
    int n;
    int spin_wait; /* SPIN_WAIT, or SPIN_OVERSUBSCRIBED */
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
    atomic_int bar_sleepers;  /* threads asleep (or about to be) on bar_phase */
    atomic_int pend_sleeping; /* the caller asleep (or about to be) on pending */
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Sleep while *word == val (a futex wait; spurious returns are fine, callers
 * re-check), and wake every sleeper on word. Without futexes: yield. */
static void wait_on(void *word, unsigned val) {
#if defined(__linux__)
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
#else
    (void)word, (void)val;
    sched_yield();
#endif
}
static void wake_all(void *word) {
#if defined(__linux__)
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
#else
    (void)word;
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
            if (++spins < SPIN_LIMIT && atomic_load_explicit(&g_active_pool, memory_order_relaxed) == pool) {
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
        if (atomic_fetch_sub(&pool->pending, 1) == 1 && atomic_load(&pool->pend_sleeping)) wake_all(&pool->pending);
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
    pool->spin_wait = n_threads > llmk_cpu_count() ? SPIN_OVERSUBSCRIBED : SPIN_WAIT;
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
    atomic_store_explicit(&g_active_pool, pool, memory_order_relaxed);
    pool->fn = fn;
    pool->ctx = ctx;
    atomic_store(&pool->pending, pool->n - 1);
    pthread_mutex_lock(&pool->mu);
    atomic_fetch_add(&pool->generation, 1);
    pthread_cond_broadcast(&pool->cv);
    pthread_mutex_unlock(&pool->mu);
    fn(ctx, 0, pool->n);
    for (int spins = 0; atomic_load(&pool->pending) != 0;) {
        if (++spins < pool->spin_wait) {
            cpu_relax();
            continue;
        }
        /* announce, then re-check inside the futex: the last worker
         * decrements before it looks for a sleeper, so no wake is lost */
        atomic_store(&pool->pend_sleeping, 1);
        int left;
        while ((left = atomic_load(&pool->pending)) != 0) wait_on(&pool->pending, (unsigned)left);
        atomic_store(&pool->pend_sleeping, 0);
    }
}

void llmk_pool_barrier(llmk_pool *pool) {
    if (!pool || pool->n == 1) return;
    unsigned phase = atomic_load(&pool->bar_phase);
    if (atomic_fetch_add(&pool->bar_count, 1) == pool->n - 1) {
        atomic_store(&pool->bar_count, 0);
        atomic_fetch_add(&pool->bar_phase, 1);
        if (atomic_load(&pool->bar_sleepers)) wake_all(&pool->bar_phase);
        return;
    }
    for (int spins = 0; atomic_load(&pool->bar_phase) == phase;) {
        if (++spins < pool->spin_wait) {
            cpu_relax();
            continue;
        }
        /* counted as a sleeper before the futex re-checks the phase: the
         * last arrival bumps the phase before it reads the count */
        atomic_fetch_add(&pool->bar_sleepers, 1);
        while (atomic_load(&pool->bar_phase) == phase) wait_on(&pool->bar_phase, phase);
        atomic_fetch_sub(&pool->bar_sleepers, 1);
    }
}
