/* Helpers of the AVX2 activation quantizers (a16_avx2.c, a8_avx2.c),
 * compiled into each with that file's ISA flags. */
#ifndef LLMK_KERNELS_ACT_X86_H
#define LLMK_KERNELS_ACT_X86_H

#include <float.h>
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

static inline int32_t hsum_epi32(__m256i v) {
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
    return _mm_cvtsi128_si32(s4);
}

/* The 32 floats of a block into v[4], and the largest of their sign-cleared
 * bit patterns (the references' amax: max_epi32 of non-negative int32 is
 * exact in any order and keeps a NaN or infinity above every number). */
static inline uint32_t block_amax_bits(const float *xb, __m256 v[4]) {
    const __m256i mag = _mm256_set1_epi32(0x7fffffff);
    __m256i m = _mm256_setzero_si256();
    for (int j = 0; j < 4; j++) {
        v[j] = _mm256_loadu_ps(xb + 8 * j);
        m = _mm256_max_epi32(_mm256_and_si256(_mm256_castps_si256(v[j]), mag), m);
    }
    __m128i h = _mm_max_epi32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
    h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0x4e));
    h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0xb1));
    return (uint32_t)_mm_cvtsi128_si32(h);
}

/* A block's scale as the references choose it: d = amax / qmax, id = 1 / d
 * (0 for an all-zero block), *tiny when 1 / d overflows (d below 2^-128:
 * divide by d instead). Loads the block into v; returns the amax bits (a
 * non-finite block's exponent is all ones). */
static inline uint32_t block_scale(const float *xb, __m256 v[4], float qmax, float *d, float *id, int *tiny) {
    uint32_t mb = block_amax_bits(xb, v);
    float amax;
    memcpy(&amax, &mb, sizeof amax);
    *d = amax / qmax, *id = *d == 0 ? 0.0f : 1.0f / *d;
    *tiny = *id > FLT_MAX;
    return mb;
}

/* Each lane of t rounded to nearest even (the references' add-and-subtract
 * of 1.5 * 2^23 for |t| < 2^22; only a zero's sign differs, which converts
 * to the same integer), clamped to +-lim, NaN lanes to 0, as int32. */
static inline __m256i round_clamp(__m256 t, float lim) {
    t = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 ord = _mm256_cmp_ps(t, t, _CMP_ORD_Q); /* before the clamp, which turns NaN into -lim */
    t = _mm256_and_ps(_mm256_min_ps(_mm256_max_ps(t, _mm256_set1_ps(-lim)), _mm256_set1_ps(lim)), ord);
    return _mm256_cvtps_epi32(t);
}

#endif
