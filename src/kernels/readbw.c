/* The read probe's scalar version, and the probe through the kernel table (readbw.h). */
#include "kernels/readbw.h"

#include "kernels/kernels.h"

#include <string.h>

uint64_t llmk_read_xor_ref(const void *p, size_t bytes) {
    const uint64_t *w = p;
    size_t n = bytes / 8, i = 0;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (; i + 4 <= n; i += 4) a0 ^= w[i], a1 ^= w[i + 1], a2 ^= w[i + 2], a3 ^= w[i + 3];
    for (; i < n; i++) a0 ^= w[i];
    return a0 ^ a1 ^ a2 ^ a3;
}

uint64_t llmk_read_xor(const void *p, size_t bytes) { return llmk_kernels()->read_xor(p, bytes); }
