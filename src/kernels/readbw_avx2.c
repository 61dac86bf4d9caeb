/* AVX2 read probe (readbw.h): four independent 256-bit XOR streams. */
#include "kernels/readbw.h"

#include <immintrin.h>

uint64_t llmk_read_xor_avx2(const void *p, size_t bytes) {
    const unsigned char *b = p;
    size_t i = 0;
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (; i + 128 <= bytes; i += 128) {
        a0 = _mm256_xor_si256(a0, _mm256_loadu_si256((const __m256i *)(b + i)));
        a1 = _mm256_xor_si256(a1, _mm256_loadu_si256((const __m256i *)(b + i + 32)));
        a2 = _mm256_xor_si256(a2, _mm256_loadu_si256((const __m256i *)(b + i + 64)));
        a3 = _mm256_xor_si256(a3, _mm256_loadu_si256((const __m256i *)(b + i + 96)));
    }
    __m256i a = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    uint64_t r = (uint64_t)_mm256_extract_epi64(a, 0) ^ (uint64_t)_mm256_extract_epi64(a, 1) ^
                 (uint64_t)_mm256_extract_epi64(a, 2) ^ (uint64_t)_mm256_extract_epi64(a, 3);
    for (; i + 8 <= bytes; i += 8) r ^= *(const uint64_t *)(b + i);
    return r;
}
