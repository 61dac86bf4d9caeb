/* AVX2 + FMA + F16C kernels for weights x 16-bit activations (a16.h has the
 * arithmetic, which these follow bit for bit).
 *
 * Per group of 8 weight blocks: each block is widened to 32 int16 once
 * (Q4_1: u8 -> i16, then mask / shift the nibbles apart; Q8_0: i8 -> i16) and
 * multiplied with each activation row by two madds into 8 i32 lanes; three
 * levels of i32 horizontal adds and one cross-lane add leave the 8 exact block
 * sums in lanes 0..7, which are converted, scaled by dw * da and fused into
 * that row's 8-lane accumulator. The weight scales of a group are gathered
 * into one vector. NA (1..4) activation rows share the unpacked weights; each
 * row's sequence of operations is the same for every NA. */
#include "kernels/a16.h"

#include "codec/blocks.h"

#include <immintrin.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

INLINE float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

INLINE int32_t ld32(const void *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}
INLINE int16_t ld16(const void *p) {
    int16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The 32 weights of block b as int16: elements 0..15 in *lo, 16..31 in *hi. */
INLINE void unpack_q4_1(const unsigned char *w, int64_t b, __m256i *lo, __m256i *hi) {
    __m256i x = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(w + b * 20 + 4)));
    *lo = _mm256_and_si256(x, _mm256_set1_epi16(0x0f));
    *hi = _mm256_srli_epi16(x, 4);
}
INLINE void unpack_q8_0(const unsigned char *w, int64_t b, __m256i *lo, __m256i *hi) {
    *lo = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + b * 34 + 2)));
    *hi = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + b * 34 + 18)));
}

/* 8 i32 partial sums of block b's products with one activation row */
INLINE __m256i bsum(__m256i lo, __m256i hi, const int16_t *q, int64_t b) {
    const __m256i *a = (const __m256i *)(q + b * LLMK_QK);
    return _mm256_add_epi32(_mm256_madd_epi16(lo, _mm256_loadu_si256(a)),
                            _mm256_madd_epi16(hi, _mm256_loadu_si256(a + 1)));
}

/* Scales of blocks g*8 .. g*8+7 (zero past nb): Q4_1 d and m, Q8_0 d. */
INLINE void scales_q4_1(const unsigned char *w, int64_t b0, int64_t nb, __m256 *dw, __m256 *mw) {
    int32_t v[8];
    for (int l = 0; l < 8; l++) v[l] = b0 + l < nb ? ld32(w + (b0 + l) * 20) : 0;
    __m256i x = _mm256_loadu_si256((const __m256i *)v);
    /* per 128-bit lane (d0 m0 d1 m1 d2 m2 d3 m3) -> (d0 d1 d2 d3 m0 m1 m2 m3) */
    x = _mm256_shuffle_epi8(x, _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
                                                 0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15));
    x = _mm256_permute4x64_epi64(x, 0xd8); /* d0..d7 | m0..m7 */
    *dw = _mm256_cvtph_ps(_mm256_castsi256_si128(x));
    *mw = _mm256_cvtph_ps(_mm256_extracti128_si256(x, 1));
}
INLINE __m256 scales_q8_0(const unsigned char *w, int64_t b0, int64_t nb) {
    int16_t v[8];
    for (int l = 0; l < 8; l++) v[l] = b0 + l < nb ? ld16(w + (b0 + l) * 34) : 0;
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)v));
}

/* 8 floats at p, or the first n of them and zeros */
INLINE __m256 ld8(const float *p, int64_t n) {
    if (n >= 8) return _mm256_loadu_ps(p);
    float t[8] = {0};
    for (int64_t l = 0; l < n; l++) t[l] = p[l];
    return _mm256_loadu_ps(t);
}

/* One weight row (w) x NA activation rows (a[i]): y[i * ys]. */
INLINE void row_dot(int Q41, int NA, int64_t k, const unsigned char *w, const unsigned char *const *a, float *y,
                    size_t ys) {
    int64_t nb = k / LLMK_QK, ng = (nb + 7) / 8;
    const int16_t *q[4];
    const float *da[4], *sa[4];
    __m256 acc[4], mac[4];
    for (int i = 0; i < NA; i++) {
        q[i] = (const int16_t *)a[i];
        da[i] = (const float *)(a[i] + (size_t)k * 2), sa[i] = da[i] + nb;
        acc[i] = _mm256_setzero_ps(), mac[i] = _mm256_setzero_ps();
    }
    for (int64_t g = 0; g < ng; g++) {
        int64_t b0 = g * 8, n = nb - b0 < 8 ? nb - b0 : 8;
        /* per row: pairs of blocks hadded, pairs of pairs hadded, so the
         * block sums of quads 0-3 and 4-7 end as (b0 b1 b2 b3) in each lane */
        __m256i quad[2][4];
        for (int h = 0; h < 2; h++) {
            __m256i pair[2][4];
            for (int pp = 0; pp < 2; pp++) {
                __m256i s0[4], s1[4];
                int64_t b = b0 + h * 4 + pp * 2;
                for (int i = 0; i < NA; i++) s0[i] = s1[i] = _mm256_setzero_si256();
                if (b < b0 + n) {
                    __m256i lo, hi;
                    if (Q41) unpack_q4_1(w, b, &lo, &hi);
                    else unpack_q8_0(w, b, &lo, &hi);
                    for (int i = 0; i < NA; i++) s0[i] = bsum(lo, hi, q[i], b);
                }
                if (b + 1 < b0 + n) {
                    __m256i lo, hi;
                    if (Q41) unpack_q4_1(w, b + 1, &lo, &hi);
                    else unpack_q8_0(w, b + 1, &lo, &hi);
                    for (int i = 0; i < NA; i++) s1[i] = bsum(lo, hi, q[i], b + 1);
                }
                for (int i = 0; i < NA; i++) pair[pp][i] = _mm256_hadd_epi32(s0[i], s1[i]);
            }
            for (int i = 0; i < NA; i++) quad[h][i] = _mm256_hadd_epi32(pair[0][i], pair[1][i]);
        }
        __m256 dw, mw = _mm256_setzero_ps();
        if (Q41) scales_q4_1(w, b0, nb, &dw, &mw);
        else dw = scales_q8_0(w, b0, nb);
        for (int i = 0; i < NA; i++) {
            __m256i s = _mm256_add_epi32(_mm256_permute2x128_si256(quad[0][i], quad[1][i], 0x20),
                                         _mm256_permute2x128_si256(quad[0][i], quad[1][i], 0x31));
            __m256 p = _mm256_mul_ps(dw, ld8(da[i] + b0, n));
            acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), p, acc[i]);
            if (Q41) mac[i] = _mm256_fmadd_ps(mw, ld8(sa[i] + b0, n), mac[i]);
        }
    }
    for (int i = 0; i < NA; i++) y[(size_t)i * ys] = hsum8(Q41 ? _mm256_add_ps(acc[i], mac[i]) : acc[i]);
}

static void dot1_q4_1(int64_t k, const unsigned char *w, const unsigned char *const *a, float *y, size_t ys) {
    row_dot(1, 1, k, w, a, y, ys);
}
static void dot4_q4_1(int64_t k, const unsigned char *w, const unsigned char *const *a, float *y, size_t ys) {
    row_dot(1, 4, k, w, a, y, ys);
}
static void dot1_q8_0(int64_t k, const unsigned char *w, const unsigned char *const *a, float *y, size_t ys) {
    row_dot(0, 1, k, w, a, y, ys);
}
static void dot4_q8_0(int64_t k, const unsigned char *w, const unsigned char *const *a, float *y, size_t ys) {
    row_dot(0, 4, k, w, a, y, ys);
}

typedef void (*row_fn)(int64_t k, const unsigned char *w, const unsigned char *const *a, float *y, size_t ys);

/* Activation rows in groups of 4 (each weight row of the call unpacked once
 * per group), the remainder one at a time. */
static void dotm(row_fn f1, row_fn f4, int64_t k, const void *w, size_t ws, int64_t nrows, const void *a,
                 size_t as, int64_t m, float *y, size_t ys) {
    const unsigned char *wb = w, *ab = a;
    int64_t i = 0;
    for (; i + 4 <= m; i += 4) {
        const unsigned char *rows[4] = {ab + (size_t)i * as, ab + (size_t)(i + 1) * as, ab + (size_t)(i + 2) * as,
                                        ab + (size_t)(i + 3) * as};
        for (int64_t r = 0; r < nrows; r++) f4(k, wb + (size_t)r * ws, rows, y + (size_t)i * ys + r, ys);
    }
    for (; i < m; i++) {
        const unsigned char *row = ab + (size_t)i * as;
        for (int64_t r = 0; r < nrows; r++) f1(k, wb + (size_t)r * ws, &row, y + (size_t)i * ys + r, ys);
    }
}

void llmk_a16_dot_q4_1_avx2(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    const unsigned char *row = a;
    for (int64_t r = 0; r < nrows; r++) dot1_q4_1(k, (const unsigned char *)w + (size_t)r * ws, &row, y + r, 0);
}
void llmk_a16_dot_q8_0_avx2(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    const unsigned char *row = a;
    for (int64_t r = 0; r < nrows; r++) dot1_q8_0(k, (const unsigned char *)w + (size_t)r * ws, &row, y + r, 0);
}
void llmk_a16_dotm_q4_1_avx2(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, size_t as,
                             int64_t m, float *y, size_t ys) {
    dotm(dot1_q4_1, dot4_q4_1, k, w, ws, nrows, a, as, m, y, ys);
}
void llmk_a16_dotm_q8_0_avx2(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, size_t as,
                             int64_t m, float *y, size_t ys) {
    dotm(dot1_q8_0, dot4_q8_0, k, w, ws, nrows, a, as, m, y, ys);
}
