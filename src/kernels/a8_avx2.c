/* AVX2 quantization of A8 activation rows: the same bytes as
 * llmk_a8_quantize_row_ref (a8.c), a block of 32 at a time, with
 * a16_avx2.c's amax, rounding, clamp and NaN rules (act_x86.h). Each 8
 * elements are permuted into the stored order {0, 4, 1, 5, 2, 6, 3, 7}
 * before the packing, which keeps lane order once its 128-bit halves are
 * put back in place. */
#include "kernels/a8.h"

#include "codec/blocks.h"
#include "kernels/act_x86.h"

#include <immintrin.h>

int llmk_a8_quantize_row_avx2(const float *x, int64_t k, int64_t e0, int64_t e1, void *dst) {
    struct llmk_a8_row a = llmk_a8_row_at(dst, k);
    int8_t *q = a.q;
    float *dd = a.d, *ss = a.s;
    int16_t *hh = a.h;
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    int bad = 0;
    for (int64_t b = e0 / LLMK_QK; b < e1 / LLMK_QK; b++) {
        __m256 v[4];
        float d, id;
        int tiny;
        bad |= block_scale(x + b * LLMK_QK, v, 127.0f, &d, &id, &tiny) >= 0x7f800000u;
        __m256 vid = _mm256_set1_ps(id), vd = _mm256_set1_ps(d);
        __m256i qi[4];
        for (int j = 0; j < 4; j++) {
            __m256 t = _mm256_permutevar8x32_ps(v[j], order);
            qi[j] = round_clamp(tiny ? _mm256_div_ps(t, vd) : _mm256_mul_ps(t, vid), 127.0f);
        }
        /* packs works per 128-bit half: the 4-byte groups come out as (qi[0]
         * lo, qi[1] lo, qi[2] lo, qi[3] lo | qi[0] hi, ...); the permute puts
         * each register's lo and hi back together */
        __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(void *)(q + b * LLMK_QK), p);
        int32_t h0 = hsum_epi32(_mm256_add_epi32(qi[0], qi[1])), h1 = hsum_epi32(_mm256_add_epi32(qi[2], qi[3]));
        dd[b] = d;
        ss[b] = d * (float)(h0 + h1); /* |sum| <= 32 * 127: exact */
        hh[2 * b] = (int16_t)h0, hh[2 * b + 1] = (int16_t)h1;
    }
    return bad;
}
