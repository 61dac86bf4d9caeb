/* Internal helpers shared by every source file: error reporting, always-on
 * invariant checks and overflow-safe size arithmetic. Not installed. */
#ifndef LLMK_INTERNAL_H
#define LLMK_INTERNAL_H

#include "llmk.h"
#include "llmk_formulas.h"
#include "llmk_primitives.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Record a failure's detail (printf-style) for llmk_last_error() and return
 * `status`, so a failing path reads `return llmk_fail(LLMK_X, "...", ...);`. */
int llmk_fail(int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Every public function that returns a status clears the detail on entry
 * (llmk_last_error() is "" after a call that succeeded). */
void llmk_error_clear(void);

/* A broken internal invariant (a programmer error, never bad input): print
 * where and abort. Always on, unlike assert(). */
#define LLMK_CHECK(cond)                                                              \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "llmk: internal check failed at %s:%d: %s\n", __FILE__,   \
                    __LINE__, #cond);                                                 \
            abort();                                                                  \
        }                                                                             \
    } while (0)

/* Overflow-safe unsigned arithmetic: return false when the result would wrap. */
static inline int llmk_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline int llmk_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

/* The half-open range [lo, hi) of n items that worker ith of nth owns. Depends
 * only on (n, ith, nth): the partition is a function of the shape. */
static inline void llmk_split_range(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    int64_t per = n / nth, rem = n % nth;
    *lo = ith * per + (ith < rem ? ith : rem);
    *hi = *lo + per + (ith < rem ? 1 : 0);
}

/* Memory budget (src/membudget.c). The machine's memory: physical pages, or
 * a smaller cgroup limit. */
uint64_t llmk_machine_memory(void);
struct llmk_model;
/* LLMK_CONTEXT_OVER_TRAIN when n_ctx exceeds the model's training context
 * and the caller did not allow it. */
int llmk_check_context(const struct llmk_model *m, int64_t n_ctx, bool allow_long);
/* LLMK_OUT_OF_MEMORY, with the figures, when KV + scratch exceed limit (0:
 * the machine's memory). Called before anything is allocated. */
int llmk_check_memory(double kv_bytes, double scratch_bytes, uint64_t limit, int64_t n_ctx, int32_t n_seq,
                      int64_t n_positions);
/* Zeroed, page-aligned memory straight from the OS: pages never written are
 * never committed (a KV cache sized for a long context costs what it holds). */
void *llmk_pages_alloc(uint64_t bytes);
void llmk_pages_free(void *p, uint64_t bytes);

/* The process-wide configuration (src/config.c). Kernel choosers call
 * llmk_config_kernels() instead: it also fixes cpu_mask and ref_kernels. */
const llmk_config *llmk_cfg(void);
const llmk_config *llmk_config_kernels(void);

/* llmk_spec_feedback for a step shared with other sequences (the engine):
 * step_drafts is every sequence's drafted rows in it (src/spec.c). */
void llmk_spec_feedback_step(llmk_spec *sp, int32_t n_draft, int32_t n_accepted, double draft_s, double verify_s,
                             int32_t step_drafts);

/* One drafter's part of a draft-model call: up to max tokens following
 * hist[0..n), into draft (n_draft of them); user is the caller's. */
struct llmk_spec_job {
    llmk_spec *sp;
    const int32_t *hist;
    size_t n;
    int32_t max;
    int32_t *draft;
    int32_t n_draft;
    void *user;
};
bool llmk_spec_pooled(const llmk_spec *sp); /* a draft model's drafter on a draft pool */
/* The engine's step: the jobs whose drafters share one draft pool (the
 * first such pool) draft in one batched generation; the others, and any
 * without a free sequence, draft nothing. Reorders jobs (those that drafted
 * first): find a job's owner by user. */
int llmk_spec_draft_pooled(struct llmk_spec_job *jobs, int count);

/* The date the harmony chat template writes ("YYYY-MM-DD"), instead of
 * today's: for tests (src/chat.c; not public API yet). */
int llmk_chat_template_set_date(llmk_chat_template *t, const char *date);

#define LLMK_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define LLMK_UNUSED(x) ((void)(x))

#endif
