/* AVX-512 quantization of A16 activation rows: llmk_a16_quantize_row_ref's
 * bytes (a16.c), a block of 32 in two registers (the halves of its half
 * sums), narrowed by vpmovsdw. The amax, rounding, clamp and NaN rules are
 * a16_avx2.c's (act_x86.h), lane for lane. */
#include "kernels/a16.h"

#include "codec/blocks.h"
#include "kernels/act_x86.h"

#include <immintrin.h>

int llmk_a16_quantize_row_avx512(const float *x, int64_t k, int64_t e0, int64_t e1, void *dst) {
    struct llmk_a16_row a = llmk_a16_row_at(dst, k);
    int16_t *q = a.q;
    float *dd = a.d, *ss = a.s, *s16 = a.h;
    int bad = 0;
    for (int64_t b = e0 / LLMK_QK; b < e1 / LLMK_QK; b++) {
        __m512 v[2];
        float d, id;
        int tiny;
        bad |= block_scale16(x + b * LLMK_QK, v, 32767.0f, &d, &id, &tiny) >= 0x7f800000u;
        __m512i qi[2];
        for (int h = 0; h < 2; h++) {
            qi[h] = scale_round16(v[h], d, id, tiny, 32767.0f);
            _mm256_storeu_si256((__m256i *)(void *)(q + b * LLMK_QK + 16 * h), _mm512_cvtsepi32_epi16(qi[h]));
        }
        __m128i half = sums2_epi32(qi[0], qi[1]);
        dd[b] = d;
        ss[b] = d * (float)(_mm_cvtsi128_si32(half) + _mm_extract_epi32(half, 1)); /* |sum| <= 32 * 32767 < 2^24: exact */
        _mm_storel_pi((__m64 *)(void *)(s16 + 2 * b), _mm_mul_ps(_mm_cvtepi32_ps(half), _mm_set1_ps(d)));
    }
    return bad;
}
