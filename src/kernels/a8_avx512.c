/* AVX-512 quantization of A8 activation rows: llmk_a8_quantize_row_ref's
 * bytes (a8.c), a block of 32 in two registers, each 16-element half
 * permuted into the stored order {0, 4, 1, 5, 2, 6, 3, 7} per 8 before the
 * rounding, narrowed by vpmovsdb, and summed whole for the half sums.
 * The amax, rounding, clamp and NaN rules are a8_avx2.c's (act_x86.h),
 * lane for lane. */
#include "kernels/a8.h"

#include "codec/blocks.h"
#include "kernels/act_x86.h"

#include <immintrin.h>
#include <string.h>

int llmk_a8_quantize_row_avx512(const float *x, int64_t k, int64_t e0, int64_t e1, void *dst) {
    struct llmk_a8_row a = llmk_a8_row_at(dst, k);
    int8_t *q = a.q;
    float *dd = a.d, *ss = a.s;
    int16_t *hh = a.h;
    const __m512i order = _mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
    int bad = 0;
    for (int64_t b = e0 / LLMK_QK; b < e1 / LLMK_QK; b++) {
        __m512 v[2];
        float d, id;
        int tiny;
        bad |= block_scale16(x + b * LLMK_QK, v, 127.0f, &d, &id, &tiny) >= 0x7f800000u;
        __m512i qi[2];
        for (int h = 0; h < 2; h++) {
            qi[h] = scale_round16(_mm512_permutexvar_ps(order, v[h]), d, id, tiny, 127.0f);
            _mm_storeu_si128((__m128i *)(void *)(q + b * LLMK_QK + 16 * h), _mm512_cvtsepi32_epi8(qi[h]));
        }
        __m128i half = sums2_epi32(qi[0], qi[1]);
        dd[b] = d;
        ss[b] = d * (float)(_mm_cvtsi128_si32(half) + _mm_extract_epi32(half, 1)); /* |sum| <= 32 * 127: exact */
        int32_t h01 = _mm_cvtsi128_si32(_mm_packs_epi32(half, half)); /* the two int16 half sums (|h| <= 16 * 127) */
        memcpy(hh + 2 * b, &h01, sizeof h01);
    }
    return bad;
}
