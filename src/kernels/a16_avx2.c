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

/* The 32 weights of block b of a group as int16: elements 0..15 in lo, 16..31 in hi. */
#define UNPACK(b, lo, hi)                                                                                  \
    do {                                                                                                   \
        if (Q41) {                                                                                         \
            __m256i x_ = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(wg + (b) * 20 + 4)));      \
            lo = _mm256_and_si256(x_, m4), hi = _mm256_srli_epi16(x_, 4);                                 \
        } else {                                                                                           \
            lo = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(wg + (b) * 34 + 2)));             \
            hi = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(wg + (b) * 34 + 18)));            \
        }                                                                                                  \
    } while (0)

/* 8 i32 partial sums of block b's products with activation row i */
#define BSUM(i, b, lo, hi)                                                                                 \
    _mm256_add_epi32(_mm256_madd_epi16(lo, _mm256_loadu_si256((const __m256i *)(q##i + (b) * LLMK_QK))),  \
                     _mm256_madd_epi16(hi, _mm256_loadu_si256((const __m256i *)(q##i + (b) * LLMK_QK + 16))))

/* blocks b, b+1 of every row (a block at or past NB counts as zero): their
 * partial sums hadded into p0..p3 */
#define PAIR(b, p0, p1, p2, p3)                                                                            \
    do {                                                                                                   \
        __m256i e0_ = z, e1_ = z, e2_ = z, e3_ = z, f0_ = z, f1_ = z, f2_ = z, f3_ = z, lo_, hi_;          \
        if ((b) < NB) {                                                                                    \
            UNPACK(b, lo_, hi_);                                                                           \
            e0_ = BSUM(0, b, lo_, hi_);                                                                    \
            if (NA > 1) e1_ = BSUM(1, b, lo_, hi_);                                                        \
            if (NA > 2) e2_ = BSUM(2, b, lo_, hi_);                                                        \
            if (NA > 3) e3_ = BSUM(3, b, lo_, hi_);                                                        \
        }                                                                                                  \
        if ((b) + 1 < NB) {                                                                                \
            UNPACK((b) + 1, lo_, hi_);                                                                     \
            f0_ = BSUM(0, (b) + 1, lo_, hi_);                                                              \
            if (NA > 1) f1_ = BSUM(1, (b) + 1, lo_, hi_);                                                  \
            if (NA > 2) f2_ = BSUM(2, (b) + 1, lo_, hi_);                                                  \
            if (NA > 3) f3_ = BSUM(3, (b) + 1, lo_, hi_);                                                  \
        }                                                                                                  \
        p0 = _mm256_hadd_epi32(e0_, f0_);                                                                  \
        if (NA > 1) p1 = _mm256_hadd_epi32(e1_, f1_);                                                      \
        if (NA > 2) p2 = _mm256_hadd_epi32(e2_, f2_);                                                      \
        if (NA > 3) p3 = _mm256_hadd_epi32(e3_, f3_);                                                      \
    } while (0)

/* blocks b..b+3: pairs hadded again, so each 128-bit lane holds (b b+1 b+2 b+3) */
#define QUAD(b, u0, u1, u2, u3)                                                                            \
    do {                                                                                                   \
        __m256i a0_ = z, a1_ = z, a2_ = z, a3_ = z, c0_ = z, c1_ = z, c2_ = z, c3_ = z;                    \
        PAIR(b, a0_, a1_, a2_, a3_);                                                                       \
        PAIR((b) + 2, c0_, c1_, c2_, c3_);                                                                 \
        u0 = _mm256_hadd_epi32(a0_, c0_);                                                                  \
        if (NA > 1) u1 = _mm256_hadd_epi32(a1_, c1_);                                                      \
        if (NA > 2) u2 = _mm256_hadd_epi32(a2_, c2_);                                                      \
        if (NA > 3) u3 = _mm256_hadd_epi32(a3_, c3_);                                                      \
    } while (0)

/* 8 floats of a group's scales or sums; past NB (a last, partial group)
 * masked to zero without reading them */
#define LD8(p) (NB >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, tailmask))

/* row i: the 8 block sums (quads lo, hi), scaled and accumulated */
#define ACC(i, lo, hi)                                                                                     \
    do {                                                                                                   \
        __m256i s_ = _mm256_add_epi32(_mm256_permute2x128_si256(lo, hi, 0x20),                             \
                                      _mm256_permute2x128_si256(lo, hi, 0x31));                            \
        acc##i = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s_), _mm256_mul_ps(dw, LD8(d##i)), acc##i);            \
        if (Q41) mac##i = _mm256_fmadd_ps(mw, LD8(s##i), mac##i);                                          \
    } while (0)

/* the weight block field at byte offset o of block l of the group, or 0 past NB */
#define WF32(l) ((l) < NB ? ld32(wg + (l) * 20) : 0)
#define WF16(l) ((l) < NB ? ld16(wg + (l) * 34) : 0)

/* One group of NB (<= 8) blocks: weights at wg, activation row i's values at
 * q<i>, its scales and sums at d<i>, s<i>. Lanes past NB are zeros. */
#define GROUP()                                                                                            \
    do {                                                                                                   \
        __m256i x0 = z, x1 = z, x2 = z, x3 = z, v0 = z, v1 = z, v2 = z, v3 = z;                            \
        QUAD(0, x0, x1, x2, x3);                                                                           \
        QUAD(4, v0, v1, v2, v3);                                                                           \
        __m256 dw, mw = _mm256_setzero_ps();                                                               \
        if (Q41) {                                                                                         \
            /* (d, m) pairs; per 128-bit lane (d0 m0 .. d3 m3) -> (d0..d3 m0..m3), then d0..d7 | m0..m7 */ \
            /* built by inserts (a set of 8 ints goes through the stack and stalls) */                   \
            __m128i l_ = _mm_insert_epi32(_mm_insert_epi32(_mm_insert_epi32(_mm_cvtsi32_si128(WF32(0)),    \
                                                                            WF32(1), 1), WF32(2), 2), WF32(3), 3); \
            __m128i h_ = _mm_insert_epi32(_mm_insert_epi32(_mm_insert_epi32(_mm_cvtsi32_si128(WF32(4)),    \
                                                                            WF32(5), 1), WF32(6), 2), WF32(7), 3); \
            __m256i dm_ = _mm256_set_m128i(h_, l_);                                                        \
            dm_ = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(dm_, dsel), 0xd8);                         \
            dw = _mm256_cvtph_ps(_mm256_castsi256_si128(dm_));                                             \
            mw = _mm256_cvtph_ps(_mm256_extracti128_si256(dm_, 1));                                        \
        } else {                                                                                           \
            dw = _mm256_cvtph_ps(_mm_setr_epi16(WF16(0), WF16(1), WF16(2), WF16(3), WF16(4), WF16(5),      \
                                                WF16(6), WF16(7)));                                        \
        }                                                                                                  \
        ACC(0, x0, v0);                                                                                    \
        if (NA > 1) ACC(1, x1, v1);                                                                        \
        if (NA > 2) ACC(2, x2, v2);                                                                        \
        if (NA > 3) ACC(3, x3, v3);                                                                        \
    } while (0)

/* One weight row (w) x NA activation rows (a[i]): y[i * ys]. */
INLINE void row_dot(int Q41, int NA, int64_t k, const unsigned char *w, const unsigned char *const *a, float *y,
                    size_t ys) {
    const __m256i m4 = _mm256_set1_epi16(0x0f), z = _mm256_setzero_si256();
    const __m256i dsel = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
                                          0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    const size_t bs = Q41 ? 20 : 34;
    int64_t nb = k / LLMK_QK, nfull = nb / 8, rest = nb - nfull * 8;
    const unsigned char *a0 = a[0], *a1 = a[NA > 1 ? 1 : 0], *a2 = a[NA > 2 ? 2 : 0], *a3 = a[NA > 3 ? 3 : 0];
    const float *D0 = (const float *)(a0 + (size_t)k * 2), *D1 = (const float *)(a1 + (size_t)k * 2);
    const float *D2 = (const float *)(a2 + (size_t)k * 2), *D3 = (const float *)(a3 + (size_t)k * 2);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    __m256 mac0 = acc0, mac1 = acc0, mac2 = acc0, mac3 = acc0;
    __m256i tailmask = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)rest), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (int64_t g = 0; g <= nfull; g++) {
        if (g == nfull && !rest) break;
        const unsigned char *wg = w + (size_t)g * 8 * bs;
        const int16_t *q0 = (const int16_t *)a0 + g * 256, *q1 = (const int16_t *)a1 + g * 256;
        const int16_t *q2 = (const int16_t *)a2 + g * 256, *q3 = (const int16_t *)a3 + g * 256;
        const float *d0 = D0 + g * 8, *d1 = D1 + g * 8, *d2 = D2 + g * 8, *d3 = D3 + g * 8;
        const float *s0 = d0 + nb, *s1 = d1 + nb, *s2 = d2 + nb, *s3 = d3 + nb;
        if (g < nfull) {
            const int64_t NB = 8;
            GROUP();
        } else {
            const int64_t NB = rest;
            GROUP();
        }
    }
    y[0] = hsum8(Q41 ? _mm256_add_ps(acc0, mac0) : acc0);
    if (NA > 1) y[ys] = hsum8(Q41 ? _mm256_add_ps(acc1, mac1) : acc1);
    if (NA > 2) y[2 * ys] = hsum8(Q41 ? _mm256_add_ps(acc2, mac2) : acc2);
    if (NA > 3) y[3 * ys] = hsum8(Q41 ? _mm256_add_ps(acc3, mac3) : acc3);
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
