/* AVX-512 quantization of A16 activation rows: llmk_a16_quantize_row_ref's
 * bytes (a16.c), a block of 32 in two registers (the halves of its half
 * sums), narrowed by vpmovsdw. The amax, rounding, clamp and NaN rules are
 * a16_avx2.c's (act_x86.h), lane for lane. */
#include "kernels/a16.h"

#include "codec/blocks.h"

#include <float.h>
#include <immintrin.h>
#include <string.h>

int llmk_a16_quantize_row_avx512(const float *x, int64_t k, int64_t e0, int64_t e1, void *dst) {
    int64_t nb = k / LLMK_QK;
    unsigned char *row = dst;
    int16_t *q = (int16_t *)row;
    float *dd = (float *)(row + (size_t)k * 2), *ss = dd + nb, *s16 = ss + nb;
    const __m512i mag = _mm512_set1_epi32(0x7fffffff);
    const __m512 lo = _mm512_set1_ps(-32767.0f), hi = _mm512_set1_ps(32767.0f);
    int bad = 0;
    for (int64_t b = e0 / LLMK_QK; b < e1 / LLMK_QK; b++) {
        const float *xb = x + b * LLMK_QK;
        __m512 v[2] = {_mm512_loadu_ps(xb), _mm512_loadu_ps(xb + 16)};
        /* amax as the largest sign-cleared bit pattern: a NaN or infinity above every number */
        __m512i m = _mm512_max_epi32(_mm512_and_si512(_mm512_castps_si512(v[0]), mag),
                                     _mm512_and_si512(_mm512_castps_si512(v[1]), mag));
        uint32_t mb = (uint32_t)_mm512_reduce_max_epi32(m);
        bad |= mb >= 0x7f800000u;
        float amax;
        memcpy(&amax, &mb, sizeof amax);
        float d = amax / 32767.0f, id = d == 0 ? 0.0f : 1.0f / d;
        int tiny = id > FLT_MAX; /* 1 / d overflows: divide instead */
        int32_t half[2];
        for (int h = 0; h < 2; h++) {
            __m512 t = tiny ? _mm512_div_ps(v[h], _mm512_set1_ps(d)) : _mm512_mul_ps(v[h], _mm512_set1_ps(id));
            t = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            __mmask16 ord = _mm512_cmp_ps_mask(t, t, _CMP_ORD_Q); /* before the clamp, which turns NaN into -32767 */
            t = _mm512_maskz_mov_ps(ord, _mm512_min_ps(_mm512_max_ps(t, lo), hi));
            __m512i qi = _mm512_cvtps_epi32(t);
            _mm256_storeu_si256((__m256i *)(void *)(q + b * LLMK_QK + 16 * h), _mm512_cvtsepi32_epi16(qi));
            half[h] = _mm512_reduce_add_epi32(qi);
        }
        dd[b] = d;
        ss[b] = d * (float)(half[0] + half[1]); /* |sum| <= 32 * 32767 < 2^24: exact */
        s16[2 * b] = d * (float)half[0], s16[2 * b + 1] = d * (float)half[1];
    }
    return bad;
}
