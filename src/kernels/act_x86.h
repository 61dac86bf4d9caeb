/* Helpers of the activation quantizers (a16_avx2.c, a8_avx2.c and, with
 * AVX-512, a16_avx512.c, a8_avx512.c), compiled into each with that file's
 * ISA flags. */
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

#if defined(__AVX512F__)
/* block_scale for AVX-512: the block in v[2], its scale as the references
 * choose it; returns the amax bits. */
static inline uint32_t block_scale16(const float *xb, __m512 v[2], float qmax, float *d, float *id, int *tiny) {
    const __m512i mag = _mm512_set1_epi32(0x7fffffff);
    v[0] = _mm512_loadu_ps(xb), v[1] = _mm512_loadu_ps(xb + 16);
    uint32_t mb = (uint32_t)_mm512_reduce_max_epi32(_mm512_max_epi32(_mm512_and_si512(_mm512_castps_si512(v[0]), mag),
                                                                      _mm512_and_si512(_mm512_castps_si512(v[1]), mag)));
    float amax;
    memcpy(&amax, &mb, sizeof amax);
    *d = amax / qmax, *id = *d == 0 ? 0.0f : 1.0f / *d;
    *tiny = *id > FLT_MAX;
    return mb;
}

/* round_clamp for AVX-512: t times the block's inverse scale (or divided by
 * d when tiny), rounded to nearest even, clamped to +-lim, NaN lanes 0. */
static inline __m512i scale_round16(__m512 t, float d, float id, int tiny, float lim) {
    t = tiny ? _mm512_div_ps(t, _mm512_set1_ps(d)) : _mm512_mul_ps(t, _mm512_set1_ps(id));
    t = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __mmask16 ord = _mm512_cmp_ps_mask(t, t, _CMP_ORD_Q); /* before the clamp, which turns NaN into -lim */
    t = _mm512_maskz_mov_ps(ord, _mm512_min_ps(_mm512_max_ps(t, _mm512_set1_ps(-lim)), _mm512_set1_ps(lim)));
    return _mm512_cvtps_epi32(t);
}

/* The sums of two registers' int32 lanes, [sum a, sum b, sum a, sum b],
 * without a trip through memory: two scalar stores read back as one 8-byte
 * load (what the compiler made of a half[2] array) miss store forwarding,
 * and that stall was 70% of the quantizers' time. */
static inline __m128i sums2_epi32(__m512i a, __m512i b) {
    __m256i a8 = _mm256_add_epi32(_mm512_castsi512_si256(a), _mm512_extracti64x4_epi64(a, 1));
    __m256i b8 = _mm256_add_epi32(_mm512_castsi512_si256(b), _mm512_extracti64x4_epi64(b, 1));
    __m256i ab = _mm256_hadd_epi32(a8, b8); /* per 128 bits: a0+a1, a2+a3, b0+b1, b2+b3 */
    __m128i x = _mm_add_epi32(_mm256_castsi256_si128(ab), _mm256_extracti128_si256(ab, 1));
    return _mm_hadd_epi32(x, x);
}
#endif

#endif
