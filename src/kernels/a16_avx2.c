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
#include "kernels/act_x86.h"

#include <immintrin.h>

int llmk_a16_quantize_row_avx2(const float *x, int64_t k, int64_t e0, int64_t e1, void *dst) {
    struct llmk_a16_row a = llmk_a16_row_at(dst, k);
    int16_t *q = a.q;
    float *dd = a.d, *ss = a.s, *s16 = a.h;
    int bad = 0;
    for (int64_t b = e0 / LLMK_QK; b < e1 / LLMK_QK; b++) {
        __m256 v[4];
        float d, id;
        int tiny;
        bad |= block_scale(x + b * LLMK_QK, v, 32767.0f, &d, &id, &tiny) >= 0x7f800000u;
        __m256 vid = _mm256_set1_ps(id), vd = _mm256_set1_ps(d);
        __m256i qi[4];
        for (int j = 0; j < 4; j++) qi[j] = round_clamp(tiny ? _mm256_div_ps(v[j], vd) : _mm256_mul_ps(v[j], vid), 32767.0f);
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
