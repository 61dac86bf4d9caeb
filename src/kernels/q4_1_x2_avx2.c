/* AVX2 kernels for repacked Q4_1 x q8_1x (see q4_1_x2.h). Per pair of blocks:
 * one 256-bit load of weight nibbles, two maddubs against the activation
 * halves, one madd to i32 (lanes 0-3: block 2p, 4-7: block 2p+1); four pairs
 * fold through three hadds into the 8 block sums of a group, which are
 * scaled by d_w * d_a in one multiply and accumulated in one FMA. The min
 * term sum m_w * s_a runs as its own 8-lane FMA chain. */
#include "kernels/q4_1_x2.h"

#include <immintrin.h>

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* i16 sums of a pair (|.| <= 2 * 2 * 15 * 127 = 7620): lanes 0-7 block 2p, 8-15 block 2p+1 */
#define PAIR(q, a) _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_and_si256((q), m4), _mm256_loadu_si256((const __m256i *)(a))), \
                                    _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16((q), 4), m4), _mm256_loadu_si256((const __m256i *)(a) + 1)))

/* Block sums of pair p of one activation row (a points at the row's pairs). */
#define SUMS(qv, a, p) PAIR(qv, (a) + (p) * 64)
/* Four pairs' i16 sums -> the 8 block sums in lanes {0,2,4,6,1,3,5,7}: adjacent
 * i16 adds (|.| <= 15240, no overflow), widening adds to i32, then one i32
 * horizontal add. Integer sums are exact, so the grouping does not matter. */
#define FOLD(s0, s1, s2, s3) _mm256_hadd_epi32(_mm256_madd_epi16(_mm256_hadd_epi16(s0, s1), ones), \
                                               _mm256_madd_epi16(_mm256_hadd_epi16(s2, s3), ones))

/* One weight row against one (NA = 1) or two (NA = 2) activation rows. The
 * weight pairs are loaded and unpacked once for both rows; each row's
 * sequence of operations is the same for NA = 1 and NA = 2, and a tail group
 * (fewer than 4 pairs) folds zero vectors in place of the missing pairs. */
#define DOT_BODY(NA)                                                                                           \
    const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1), z = _mm256_setzero_si256();       \
    const uint8_t *q = w->qs + (size_t)r * (size_t)w->nb * 16;                                                 \
    const uint16_t *d = w->d + (size_t)r * (size_t)w->ng * 8, *m = w->m + (size_t)r * (size_t)w->ng * 8;       \
    int64_t nb = w->nb, np = nb / 2, ng = w->ng, nfull = np / 4;                                               \
    const unsigned char *a1 = a0 + as;                                                                         \
    const float *da0 = (const float *)(a0 + nb * 32), *da1 = (const float *)(a1 + nb * 32);                   \
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, mac0 = acc0, mac1 = acc0;                                   \
    for (int64_t g = 0; g < ng; g++) {                                                                         \
        int64_t p0 = g * 4;                                                                                    \
        __m256i x0, x1, x2, x3, y0 = z, y1 = z, y2 = z, y3 = z;                                                \
        if (g < nfull) {                                                                                       \
            __m256i q0 = _mm256_loadu_si256((const __m256i *)(q + p0 * 32));                                  \
            __m256i q1 = _mm256_loadu_si256((const __m256i *)(q + p0 * 32 + 32));                             \
            __m256i q2 = _mm256_loadu_si256((const __m256i *)(q + p0 * 32 + 64));                             \
            __m256i q3 = _mm256_loadu_si256((const __m256i *)(q + p0 * 32 + 96));                             \
            x0 = SUMS(q0, a0, p0), x1 = SUMS(q1, a0, p0 + 1), x2 = SUMS(q2, a0, p0 + 2), x3 = SUMS(q3, a0, p0 + 3); \
            if (NA > 1) y0 = SUMS(q0, a1, p0), y1 = SUMS(q1, a1, p0 + 1), y2 = SUMS(q2, a1, p0 + 2), y3 = SUMS(q3, a1, p0 + 3); \
        } else {                                                                                               \
            __m256i xs[4] = {z, z, z, z}, xt[4] = {z, z, z, z};                                                \
            for (int64_t i = 0; p0 + i < np; i++) {                                                            \
                __m256i qv = _mm256_loadu_si256((const __m256i *)(q + (p0 + i) * 32));                        \
                xs[i] = SUMS(qv, a0, p0 + i);                                                                  \
                if (NA > 1) xt[i] = SUMS(qv, a1, p0 + i);                                                      \
            }                                                                                                  \
            x0 = xs[0], x1 = xs[1], x2 = xs[2], x3 = xs[3], y0 = xt[0], y1 = xt[1], y2 = xt[2], y3 = xt[3];     \
        }                                                                                                      \
        __m256 wd = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(d + g * 8)));                          \
        __m256 wm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(m + g * 8)));                           \
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(FOLD(x0, x1, x2, x3)), _mm256_mul_ps(wd, _mm256_loadu_ps(da0 + g * 8)), acc0); \
        mac0 = _mm256_fmadd_ps(wm, _mm256_loadu_ps(da0 + ng * 8 + g * 8), mac0);                              \
        if (NA > 1) {                                                                                          \
            acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(FOLD(y0, y1, y2, y3)), _mm256_mul_ps(wd, _mm256_loadu_ps(da1 + g * 8)), acc1); \
            mac1 = _mm256_fmadd_ps(wm, _mm256_loadu_ps(da1 + ng * 8 + g * 8), mac1);                          \
        }                                                                                                      \
    }                                                                                                          \
    y[0] = hsum8(acc0) + hsum8(mac0);                                                                          \
    if (NA > 1) y[ys] = hsum8(acc1) + hsum8(mac1);

static void dot1(const struct llmk_q4_1_x2 *w, int64_t r, const unsigned char *a0, size_t as, float *y, int64_t ys) {
    (void)ys;
    DOT_BODY(1)
}
static void dot2(const struct llmk_q4_1_x2 *w, int64_t r, const unsigned char *a0, size_t as, float *y, int64_t ys) {
    DOT_BODY(2)
}

void llmk_gemm_q4_1_x2_q8_1x_avx2(const struct llmk_q4_1_x2 *w, int64_t r0, int64_t r1, const void *act, size_t act_stride,
                        int64_t na, float *y, int64_t y_stride) {
    const unsigned char *a = act;
    int64_t i = 0;
    for (; i + 2 <= na; i += 2)
        for (int64_t r = r0; r < r1; r++) dot2(w, r, a + (size_t)i * act_stride, act_stride, y + i * y_stride + r, y_stride);
    for (; i < na; i++)
        for (int64_t r = r0; r < r1; r++) dot1(w, r, a + (size_t)i * act_stride, act_stride, y + i * y_stride + r, y_stride);
}
