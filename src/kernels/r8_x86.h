/* Helpers of the r8 kernel files (r8_avx2.c, r8_avx512.c), compiled into
 * each with that file's ISA flags; r8_entry.h is their shared entry. */
#ifndef LLMK_KERNELS_R8_X86_H
#define LLMK_KERNELS_R8_X86_H

#include "kernels/r8.h"

#include <immintrin.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

/* Software prefetch PF_AHEAD bytes ahead of the record being read, every
 * cache line of that far record: from DRAM the hardware prefetcher alone
 * left a single thread at ~7 GB/s of the ~14 it can read. The stream is
 * sequential (records, then the next group), so running past a group's end
 * still fetches what comes next. Distance: medians of 8 alternating tg96
 * runs at 2 threads, 2 KB 134, 4 KB 137-146, 8 KB 140 t/s. */
enum { PF_AHEAD = 4096 };
INLINE void prefetch_rec(const unsigned char *rec, int bytes) {
    for (int o = 0; o < bytes; o += 64) _mm_prefetch((const char *)rec + PF_AHEAD + o, _MM_HINT_T0);
}

/* Bytes of one record of layout L (r8.h). */
#define R8_RECORD_BYTES(L) \
    ((L) == LLMK_R8_Q4_1 || (L) == LLMK_R8_MX4 ? 160                                      \
     : (L) == LLMK_R8_Q8S                     ? 352                                      \
     : (L) == LLMK_R8_Q8S2                    ? 384                                      \
     : (L) == LLMK_R8_Q4S                     ? 192                                      \
                                              : 272)

/* An a16 activation row's parts: int16 q[k], then the f32 scales. */
INLINE void split_act(const unsigned char *a, int64_t k, const int16_t **q, const float **d) {
    *q = (const int16_t *)a;
    *d = (const float *)(a + (size_t)k * 2);
}

/* Group g's 8 results into y (rows past r1 left out: a ragged last group). */
INLINE void store_group(float *y, int64_t g, int64_t r1, __m256 v) {
    int64_t r = g * 8, nr = r1 - r < 8 ? r1 - r : 8;
    if (nr == 8) {
        _mm256_storeu_ps(y + r, v);
    } else {
        float tmp[8];
        _mm256_storeu_ps(tmp, v);
        memcpy(y + r, tmp, (size_t)nr * sizeof(float));
    }
}

#endif
