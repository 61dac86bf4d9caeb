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

void *llmk_pages_alloc(uint64_t bytes) {
    if (bytes == 0) bytes = 1;
    if (bytes > SIZE_MAX) return NULL;
    void *p = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void llmk_pages_free(void *p, uint64_t bytes) {
    if (p) munmap(p, (size_t)(bytes ? bytes : 1));
}
