/* AVX2 quantization of a16 activation rows: the same bytes as
 * llmk_a16_quantize_row_ref (a16.c), eight elements at a time.
 * - amax: the reference's integer maximum of the sign-cleared bit patterns
 *   (max_epi32: they are all non-negative as int32), exact in any order and
 *   keeping a NaN or infinity, which the block's one compare then reports.
 * - rounding: round_ps to nearest even equals the reference's add-and-
 *   subtract of 1.5 * 2^23 for |v| < 2^22 (only the sign of a zero differs,
 *   and it converts to the same integer).
 * - clamp to +-32767 and NaN lanes (a non-finite block's) to 0, as the reference. */
#include "kernels/a16.h"

#include "codec/blocks.h"

#include <float.h>
#include <immintrin.h>

static inline int32_t hsum_epi32(__m256i v) {
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
    return _mm_cvtsi128_si32(s4);
}

int llmk_a16_quantize_row_avx2(const float *x, int64_t k, int64_t e0, int64_t e1, void *dst) {
    int64_t nb = k / LLMK_QK;
    unsigned char *row = dst;
    int16_t *q = (int16_t *)row;
    float *dd = (float *)(row + (size_t)k * 2), *ss = dd + nb, *s16 = ss + nb;
    const __m256 hi = _mm256_set1_ps(32767.0f), lo = _mm256_set1_ps(-32767.0f);
    const __m256i mag = _mm256_set1_epi32(0x7fffffff);
    int bad = 0;
    for (int64_t b = e0 / LLMK_QK; b < e1 / LLMK_QK; b++) {
        const float *xb = x + b * LLMK_QK;
        __m256 v[4];
        __m256i m = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            v[j] = _mm256_loadu_ps(xb + 8 * j);
            m = _mm256_max_epi32(_mm256_and_si256(_mm256_castps_si256(v[j]), mag), m);
        }
        __m128i h = _mm_max_epi32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
        h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0x4e));
        h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0xb1));
        bad |= _mm_cvtsi128_si32(h) >= 0x7f800000; /* exponent all ones: infinity or NaN */
        float amax = _mm_cvtss_f32(_mm_castsi128_ps(h));
        float d = amax / 32767.0f, id = d == 0 ? 0.0f : 1.0f / d;
        int tiny = id > FLT_MAX; /* d below 2^-128: 1 / d overflows, divide instead */
        __m256 vid = _mm256_set1_ps(id), vd = _mm256_set1_ps(d);
        __m256i qi[4];
        for (int j = 0; j < 4; j++) {
            __m256 t = tiny ? _mm256_div_ps(v[j], vd) : _mm256_mul_ps(v[j], vid);
            t = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            __m256 ord = _mm256_cmp_ps(t, t, _CMP_ORD_Q); /* before the clamp, which turns NaN into -32767 */
            t = _mm256_and_ps(_mm256_min_ps(_mm256_max_ps(t, lo), hi), ord);
            qi[j] = _mm256_cvtps_epi32(t);
        }
        /* packs works per 128-bit lane: (0 1 | 2 3) lanes -> permute back to element order */
        __m256i p01 = _mm256_permute4x64_epi64(_mm256_packs_epi32(qi[0], qi[1]), 0xd8);
        __m256i p23 = _mm256_permute4x64_epi64(_mm256_packs_epi32(qi[2], qi[3]), 0xd8);
        _mm256_storeu_si256((__m256i *)(q + b * LLMK_QK), p01);
        _mm256_storeu_si256((__m256i *)(q + b * LLMK_QK + 16), p23);
        int32_t h0 = hsum_epi32(_mm256_add_epi32(qi[0], qi[1])), h1 = hsum_epi32(_mm256_add_epi32(qi[2], qi[3]));
        dd[b] = d;
        ss[b] = d * (float)(h0 + h1); /* |sum| <= 32 * 32767 < 2^24: exact */
        s16[2 * b] = d * (float)h0, s16[2 * b + 1] = d * (float)h1;
    }
    return bad;
}
