/* What a session may ask of the machine: a context within the model's
 * training unless the caller allows more, KV and scratch bytes that fit in
 * memory (checked before anything is allocated), and KV pages that come
 * zeroed from the OS and are only committed when written. */
#include "internal.h"
#include "model.h"

#include <inttypes.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

/* A cgroup v2 limit below the physical memory (a container) is the real
 * ceiling; "max" or no file means none. */
static uint64_t cgroup_limit(void) {
    FILE *f = fopen("/sys/fs/cgroup/memory.max", "r");
    if (!f) return UINT64_MAX;
    uint64_t v = UINT64_MAX;
    if (fscanf(f, "%" SCNu64, &v) != 1) v = UINT64_MAX;
    fclose(f);
    return v;
}

uint64_t llmk_machine_memory(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    uint64_t phys = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : UINT64_MAX;
    uint64_t cg = cgroup_limit();
    return cg < phys ? cg : phys;
}

int llmk_check_context(const struct llmk_model *m, int64_t n_ctx, bool allow_long) {
    int32_t train = m->hp.n_ctx_train;
    if (n_ctx > train && !allow_long)
        return llmk_fail(LLMK_CONTEXT_OVER_TRAIN,
                         "a context of %lld tokens is longer than the %d the model was trained for; "
                         "quality past it is not guaranteed (allow it explicitly: llmk --allow-long-ctx)",
                         (long long)n_ctx, train);
    return LLMK_OK;
}

static double gib(double b) { return b / (1024.0 * 1024.0 * 1024.0); }

int llmk_check_memory(double kv_bytes, double scratch_bytes, uint64_t limit, int64_t n_ctx, int32_t n_seq,
                      int64_t n_positions) {
    uint64_t have = limit ? limit : llmk_machine_memory();
    double need = kv_bytes + scratch_bytes;
    if (need <= (double)have) return LLMK_OK;
    double per_token = n_positions > 0 ? kv_bytes / (double)n_positions : 0;
    char what[96] = "";
    if (n_seq > 1)
        snprintf(what, sizeof what, " for %d sequences (a KV pool of %lld positions)", n_seq, (long long)n_positions);
    return llmk_fail(LLMK_OUT_OF_MEMORY,
                     "a context of %lld tokens%s needs %.2f GiB (KV cache %.2f GiB, %.1f KiB per token; scratch "
                     "%.2f GiB) and %s has %.2f GiB; use a smaller context%s",
                     (long long)n_ctx, what, gib(need), gib(kv_bytes), per_token / 1024.0, gib(scratch_bytes),
                     limit ? "the memory limit" : "this machine", gib((double)have),
                     *what ? " or fewer sequences or blocks" : "");
}

/* KV caches of 2 MB and more start on a 2 MB boundary and ask for
 * transparent huge pages (a hint; Linux only). Batched decode streams every
 * sequence's K/V runs (16 KB a layer and head) from DRAM each step; on 4 KB
 * pages each run spans 4 TLB entries and 4 restarts of the hardware
 * prefetcher (B=16 S_TG ~3% higher on 2 MB pages, docs/batching.md). A
 * touched huge page commits 2 MB at once: a KV block (every layer's rows of
 * 128 positions) is about that already. */
void *llmk_pages_alloc(uint64_t bytes) {
    enum { HUGE = 2 << 20 };
    if (bytes == 0) bytes = 1;
    if (bytes > SIZE_MAX - HUGE) return NULL;
    size_t n = (size_t)bytes;
    if (n < HUGE) {
        void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    unsigned char *m = mmap(NULL, n + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    /* keep [p, p + n), p 2 MB aligned: llmk_pages_free unmaps exactly that */
    unsigned char *p = (unsigned char *)(((uintptr_t)m + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
    if (p > m) munmap(m, (size_t)(p - m));
    munmap(p + n, (size_t)(m + HUGE - p)); /* the tail: p - m < HUGE, so never empty */
#if defined(MADV_HUGEPAGE)
    madvise(p, n, MADV_HUGEPAGE);
#endif
    return p;
}

void llmk_pages_free(void *p, uint64_t bytes) {
    if (p) munmap(p, (size_t)(bytes ? bytes : 1));
}
