/* AVX2 products of r8 records with 8-bit activation rows (a8.h), the
 * reference's bits: Q4_1 and Q4S records (Q4_0, Q4_1, Q4_K weights) below,
 * the int8 records (Q5_0; Q5_1 and the K-quants on Q8S) at int8_group.
 *
 * Per record (8 rows x 32 weights) and activation row: each 32-byte chunk
 * of nibbles, masked and shifted once, gives two registers of weight bytes
 * (row r's elements {0,4,1,5} and {2,6,3,7} of the chunk's 8 in its 32-bit
 * lane r), and one vpmaddubsw of each with the broadcast activation bytes
 * in that order leaves pair sums in int16. The record's 8 such products add
 * up in int16 (each |pair| <= 2 * 15 * 127, eight of them <= 30480: no
 * overflow) and one vpmaddwd with ones folds the pairs into the row's exact
 * int32 sum: 9 multiply instructions a record and row where the A16
 * kernel issues 16. */
#include "kernels/a8.h"
#include "kernels/r8.h"
#include "kernels/r8_x86.h"

#include "codec/blocks.h"
#include "internal.h"

#include <immintrin.h>
#include <stdbool.h>
#include <string.h>

INLINE __m256i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

/* Block b of one Q4_1 or Q4S record x activation rows q/d[0..NA), into
 * acc[0..NA). F32S: a Q4S record, f32 scales and offsets before the
 * nibbles. */
INLINE void block_q4(int NA, int F32S, const unsigned char *rec, const int8_t *const *q, const float *const *d,
                     int64_t b, int64_t nb, __m256 *acc) {
    const unsigned char *nib = rec + (F32S ? 64 : 32);
    const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    __m256i s[4];
    _Pragma("GCC unroll 4")
    for (int i = 0; i < NA; i++) s[i] = _mm256_setzero_si256();
    _Pragma("GCC unroll 4")
    for (int c = 0; c < 4; c++) {
        __m256i x = _mm256_load_si256((const __m256i *)(const void *)(nib + 32 * c));
        __m256i lo = _mm256_and_si256(x, m4), hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), m4);
        _Pragma("GCC unroll 4")
        for (int i = 0; i < NA; i++) {
            const int8_t *qa = q[i] + b * LLMK_QK + 8 * c;
            s[i] = _mm256_add_epi16(s[i], _mm256_add_epi16(_mm256_maddubs_epi16(lo, bcast4(qa)),
                                                           _mm256_maddubs_epi16(hi, bcast4(qa + 4))));
        }
    }
    __m256 dw = F32S ? _mm256_load_ps((const float *)(const void *)rec)
                     : _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(const void *)rec));
    __m256 mw = F32S ? _mm256_load_ps((const float *)(const void *)(rec + 32))
                     : _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(const void *)(rec + 16)));
    _Pragma("GCC unroll 4")
    for (int i = 0; i < NA; i++) {
        __m256 n = _mm256_cvtepi32_ps(_mm256_madd_epi16(s[i], ones));
        acc[i] = _mm256_fmadd_ps(n, _mm256_mul_ps(dw, _mm256_broadcast_ss(d[i] + b)), acc[i]);
        acc[i] = _mm256_fmadd_ps(mw, _mm256_broadcast_ss(d[i] + nb + b), acc[i]);
    }
}

/* s[i] += an int8 record's (Q8_0, Q8S) elements 8g..8g+7 times activation
 * row i's. Pairs 4g..4g+3 interleaved by bytes give the A8 order (lane r:
 * row r's elements {0,4,1,5} and {2,6,3,7}); vpmaddubsw wants unsigned
 * weights, so it takes |w| and the activations with w's sign (vpsignb: 0
 * where w is 0). A product pair is at most 2 x 32 x 127 for the Q8S types
 * a8.h admits (a half, two groups, adds four: 32512) and 2 x 16 x 127 for
 * Q5_0 (the block, four groups, adds eight: 32512), all within int16.
 * WIDE (Q8_0 weights, |w| <= 128): a pair reaches 2 x 128 x 127 = 32512
 * alone, so each is widened to int32 (vpmaddwd with ones) before adding
 * and s holds int32 sums. */
INLINE void int8_group(int NA, int WIDE, const unsigned char *rec, int g, const int8_t *const *q, int64_t b,
                       __m256i *s) {
    const unsigned char *p = rec + 64 * g;
    __m128i p0 = _mm_load_si128((const __m128i *)(const void *)p), p1 = _mm_load_si128((const __m128i *)(const void *)(p + 16));
    __m128i p2 = _mm_load_si128((const __m128i *)(const void *)(p + 32)), p3 = _mm_load_si128((const __m128i *)(const void *)(p + 48));
    __m256i w0 = _mm256_set_m128i(_mm_unpackhi_epi8(p0, p2), _mm_unpacklo_epi8(p0, p2));
    __m256i w1 = _mm256_set_m128i(_mm_unpackhi_epi8(p1, p3), _mm_unpacklo_epi8(p1, p3));
    __m256i u0 = _mm256_abs_epi8(w0), u1 = _mm256_abs_epi8(w1);
    _Pragma("GCC unroll 4")
    for (int i = 0; i < NA; i++) {
        const int8_t *qa = q[i] + b * LLMK_QK + 8 * g;
        __m256i m0 = _mm256_maddubs_epi16(u0, _mm256_sign_epi8(bcast4(qa), w0));
        __m256i m1 = _mm256_maddubs_epi16(u1, _mm256_sign_epi8(bcast4(qa + 4), w1));
        if (WIDE) {
            const __m256i ones = _mm256_set1_epi16(1);
            s[i] = _mm256_add_epi32(s[i], _mm256_add_epi32(_mm256_madd_epi16(m0, ones), _mm256_madd_epi16(m1, ones)));
        } else {
            s[i] = _mm256_add_epi16(s[i], _mm256_add_epi16(m0, m1));
        }
    }
}

/* Block b of one Q8_0 record (Q5_0 weights; WIDE: Q8_0's) or Q8S record
 * (two halves, each with its f32 scales, then the f32 offsets) x activation
 * rows. */
INLINE void block_i8(int NA, int Q8S, int WIDE, const unsigned char *rec, const int8_t *const *q, const float *const *d,
                     int64_t b, int64_t nb, __m256 *acc) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i s[4];
    _Pragma("GCC unroll 2")
    for (int h = 0; h < 2; h++) {
        if (h == 0 || Q8S) {
            _Pragma("GCC unroll 4")
            for (int i = 0; i < NA; i++) s[i] = _mm256_setzero_si256();
        }
        int8_group(NA, WIDE, rec, 2 * h, q, b, s);
        int8_group(NA, WIDE, rec, 2 * h + 1, q, b, s);
        if (!Q8S && h == 0) continue;
        __m256 sc = Q8S ? _mm256_load_ps((const float *)(const void *)(rec + 256 + 32 * h))
                        : _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(const void *)(rec + 256)));
        _Pragma("GCC unroll 4")
        for (int i = 0; i < NA; i++) {
            __m256 n = _mm256_cvtepi32_ps(WIDE ? s[i] : _mm256_madd_epi16(s[i], ones));
            acc[i] = _mm256_fmadd_ps(n, _mm256_mul_ps(sc, _mm256_broadcast_ss(d[i] + b)), acc[i]);
        }
    }
    if (Q8S) {
        __m256 mw = _mm256_load_ps((const float *)(const void *)(rec + 320));
        _Pragma("GCC unroll 4")
        for (int i = 0; i < NA; i++) acc[i] = _mm256_fmadd_ps(mw, _mm256_broadcast_ss(d[i] + nb + b), acc[i]);
    }
}

/* Record bytes of the layouts this file takes. */
#define A8_RECORD_BYTES(L) ((L) == LLMK_R8_Q4_1 ? 160 : (L) == LLMK_R8_Q4S ? 192 : (L) == LLMK_R8_Q8S ? 352 : 272)

/* NA activation rows x groups [g0, g1) of w (records of layout L; WIDE:
 * int8 weights past +-32, sums widened pair by pair). */
INLINE void rows_a8(int NA, int L, int WIDE, const struct llmk_r8 *w, int64_t g0, int64_t g1, int64_t r1,
                    const unsigned char *const *a, float *y, size_t ys) {
    const int rb = A8_RECORD_BYTES(L);
    const int8_t *q[4];
    const float *d[4];
    _Pragma("GCC unroll 4")
    for (int i = 0; i < NA; i++) q[i] = (const int8_t *)a[i], d[i] = (const float *)(const void *)(a[i] + w->k);
    for (int64_t g = g0; g < g1; g++) {
        const unsigned char *rec = w->data + (size_t)(g - w->g0) * (size_t)w->nb * w->block_bytes;
        __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int64_t b = 0; b < w->nb; b++, rec += rb) {
            prefetch_rec(rec, rb);
            if (L == LLMK_R8_Q4_1 || L == LLMK_R8_Q4S) block_q4(NA, L == LLMK_R8_Q4S, rec, q, d, b, w->nb, acc);
            else block_i8(NA, L == LLMK_R8_Q8S, WIDE, rec, q, d, b, w->nb, acc);
        }
        _Pragma("GCC unroll 4")
        for (int i = 0; i < NA; i++) store_group(y + (size_t)i * ys, g, r1, acc[i]);
    }
}

INLINE void rows_l(int L, int WIDE, int na, const struct llmk_r8 *w, int64_t g0, int64_t g1, int64_t r1,
                   const unsigned char *const *a, float *y, size_t ys) {
    switch (na) {
    case 4: rows_a8(4, L, WIDE, w, g0, g1, r1, a, y, ys); break;
    case 3: rows_a8(3, L, WIDE, w, g0, g1, r1, a, y, ys); break;
    case 2: rows_a8(2, L, WIDE, w, g0, g1, r1, a, y, ys); break;
    default: rows_a8(1, L, WIDE, w, g0, g1, r1, a, y, ys); break;
    }
}

/* Int8 records whose weights reach past +-32: Q8_0 (+-128) and the IQ4
 * grid's (+-127). */
static bool wide_type(uint32_t t) { return t == LLMK_TYPE_Q8_0 || t == LLMK_TYPE_IQ4_NL || t == LLMK_TYPE_IQ4_XS; }

void llmk_gemm_r8_a8_avx2(const struct llmk_r8 *w, int64_t r0, int64_t r1, const void *act, size_t as, int64_t m,
                          float *y, size_t ys, void *scratch, size_t scratch_bytes) {
    (void)scratch, (void)scratch_bytes;
    if (r1 <= r0 || m <= 0) return;
    LLMK_CHECK(llmk_a8_supports(w->type) && !llmk_r8_compact(w->layout)); /* the portable forms only */
    int64_t g0 = r0 / 8, g1 = (r1 + 7) / 8;
    const unsigned char *ab = act;
    for (int64_t i = 0; i < m; i += 4) {
        int na = m - i < 4 ? (int)(m - i) : 4;
        const unsigned char *a[4];
        for (int j = 0; j < 4; j++) a[j] = ab + (size_t)(i + (j < na ? j : 0)) * as;
        float *yi = y + (size_t)i * ys;
        bool wide = wide_type(w->type);
        switch (w->layout) {
        case LLMK_R8_Q4_1: rows_l(LLMK_R8_Q4_1, 0, na, w, g0, g1, r1, a, yi, ys); break;
        case LLMK_R8_Q4S: rows_l(LLMK_R8_Q4S, 0, na, w, g0, g1, r1, a, yi, ys); break;
        case LLMK_R8_Q8S:
            if (wide) rows_l(LLMK_R8_Q8S, 1, na, w, g0, g1, r1, a, yi, ys);
            else rows_l(LLMK_R8_Q8S, 0, na, w, g0, g1, r1, a, yi, ys);
            break;
        default:
            if (wide) rows_l(LLMK_R8_Q8_0, 1, na, w, g0, g1, r1, a, yi, ys);
            else rows_l(LLMK_R8_Q8_0, 0, na, w, g0, g1, r1, a, yi, ys);
            break;
        }
    }
}
