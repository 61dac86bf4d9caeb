/* The vector form of llmk_dsa_exp (dsa.h) for the x86 files that need the
 * scalar reference's bits (dsa_avx2.c, glu_avx2.c); include it only where
 * AVX2 is enabled. */
#ifndef LLMK_KERNELS_EXP_X86_H
#define LLMK_KERNELS_EXP_X86_H

#include <immintrin.h>

/* llmk_dsa_exp per lane (max/min operand order keeps a NaN a NaN there, as
 * the scalar compares do). */
static inline __m256 llmk_vexp_dsa(__m256 x) {
    x = _mm256_max_ps(_mm256_set1_ps(-87.0f), x);
    x = _mm256_min_ps(_mm256_set1_ps(88.0f), x);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_sub_ps(x, _mm256_mul_ps(n, _mm256_set1_ps(0.693359375f)));
    r = _mm256_sub_ps(r, _mm256_mul_ps(n, _mm256_set1_ps(-2.12194440e-4f)));
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(5.0000001201e-1f));
    __m256 y = _mm256_add_ps(_mm256_mul_ps(p, _mm256_mul_ps(r, r)), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

#endif
