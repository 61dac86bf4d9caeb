/* AVX2 kernels for repacked Q4_1 x q8_1x (see xq4_1.h). Per pair of blocks:
 * one 256-bit load of weight nibbles, two maddubs against the activation
 * halves, one madd to i32 (lanes 0-3: block 2p, 4-7: block 2p+1); four pairs
 * fold through three hadds into the 8 block sums of a group, which are
 * scaled by d_w * d_a in one multiply and accumulated in one FMA. The min
 * term sum m_w * s_a runs as its own 8-lane FMA chain. */
#include "kernels/xq4_1.h"

#include <immintrin.h>

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#define PAIR(q, a) _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(_mm256_and_si256((q), m4), _mm256_loadu_si256((const __m256i *)(a))), \
                                     _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16((q), 4), m4), _mm256_loadu_si256((const __m256i *)(a) + 1))), ones)

/* NA activation rows against one weight row: the weight pair is unpacked
 * once per load and used by every activation row; each row's sequence of
 * operations is the same for NA = 1 and NA = 2. */
static inline void dot_rows(const struct llmk_xq4_1 *w, int64_t r, const unsigned char *act, size_t as, int na,
                            float *y, int64_t ys) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1), z = _mm256_setzero_si256();
    const uint8_t *q = w->qs + (size_t)r * (size_t)w->nb * 16;
    const uint16_t *d = w->d + (size_t)r * (size_t)w->ng * 8, *m = w->m + (size_t)r * (size_t)w->ng * 8;
    int64_t nb = w->nb, np = nb / 2;
    const unsigned char *a0 = act, *a1 = act + as;
    const float *da0 = (const float *)(a0 + nb * 32), *da1 = (const float *)(a1 + nb * 32);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, mac0 = acc0, mac1 = acc0;
    for (int64_t g = 0; g < w->ng; g++) {
        int64_t p0 = g * 4, npg = np - p0 < 4 ? np - p0 : 4;
        __m256i s0[4], s1[4];
        for (int i = 0; i < 4; i++) {
            if (i < npg) {
                __m256i qv = _mm256_loadu_si256((const __m256i *)(q + (p0 + i) * 32));
                s0[i] = PAIR(qv, a0 + (p0 + i) * 64);
                s1[i] = na > 1 ? PAIR(qv, a1 + (p0 + i) * 64) : z;
            } else {
                s0[i] = z, s1[i] = z;
            }
        }
        __m256 wd = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(d + g * 8)));
        __m256 wm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(m + g * 8)));
        __m256i h0 = _mm256_hadd_epi32(_mm256_hadd_epi32(s0[0], s0[1]), _mm256_hadd_epi32(s0[2], s0[3]));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(h0), _mm256_mul_ps(wd, _mm256_loadu_ps(da0 + g * 8)), acc0);
        mac0 = _mm256_fmadd_ps(wm, _mm256_loadu_ps(da0 + w->ng * 8 + g * 8), mac0);
        if (na > 1) {
            __m256i h1 = _mm256_hadd_epi32(_mm256_hadd_epi32(s1[0], s1[1]), _mm256_hadd_epi32(s1[2], s1[3]));
            acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(h1), _mm256_mul_ps(wd, _mm256_loadu_ps(da1 + g * 8)), acc1);
            mac1 = _mm256_fmadd_ps(wm, _mm256_loadu_ps(da1 + w->ng * 8 + g * 8), mac1);
        }
    }
    y[0] = hsum8(acc0) + hsum8(mac0);
    if (na > 1) y[ys] = hsum8(acc1) + hsum8(mac1);
}

void llmk_xq4_1_mm_avx2(const struct llmk_xq4_1 *w, int64_t r0, int64_t r1, const void *act, size_t act_stride,
                        int64_t na, float *y, int64_t y_stride) {
    const unsigned char *a = act;
    int64_t i = 0;
    for (; i + 2 <= na; i += 2)
        for (int64_t r = r0; r < r1; r++) dot_rows(w, r, a + (size_t)i * act_stride, act_stride, 2, y + i * y_stride + r, y_stride);
    for (; i < na; i++)
        for (int64_t r = r0; r < r1; r++) dot_rows(w, r, a + (size_t)i * act_stride, act_stride, 1, y + i * y_stride + r, y_stride);
}
