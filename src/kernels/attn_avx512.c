/* AVX-512 attention chunks (f32 and f16 caches) for head size 64, the
 * llama-family norm: a head row is four 512-bit registers, so a key's score
 * takes 4 FMAs and a value's accumulation 4, where the AVX2 kernels take 8
 * each (with a 2-uop conversion per f16 load). At 1024 positions of context
 * those FMAs, not memory, bounded a decode step's attention.
 *
 * The same structure as attn_avx2.c, so the same promises: a query's bits
 * depend only on its values and its chunk's keys, the multi-query form gives
 * each query the single-query kernel's bits. A key's score: a 16-lane
 * partial dot in dimension order, folded to 8 lanes (low half + high half),
 * then attn_x86.h's 8-key reduction. They are not the AVX2 kernels' bits
 * (another summation order); other head sizes go to the AVX2 kernels, for
 * both forms. */
#include "kernels/kernels.h"

#include "kernels/attn_x86.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

static struct llmk_kernels avx2; /* head sizes other than 64 */

INLINE __m512 ld16(const void *p, int64_t i, int f16) {
    if (f16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i)));
    return _mm512_loadu_ps((const float *)p + i);
}

INLINE __m256 fold(__m512 s) {
    return _mm256_add_ps(_mm512_castps512_ps256(s), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1)));
}

/* Scores of 8 keys (rows k + j * stride, j < nk; missing keys score 0 and
 * are never used). The attn_multi.h helpers here take hd only for its
 * signature: this file runs head size 64 alone. */
INLINE __m256 scores8_hd(const float *q, const void *k, int64_t stride, int hd, int nk, int f16) {
    (void)hd;
    __m512 q0 = _mm512_loadu_ps(q), q1 = _mm512_loadu_ps(q + 16), q2 = _mm512_loadu_ps(q + 32),
           q3 = _mm512_loadu_ps(q + 48);
    __m256 a[8];
    _Pragma("GCC unroll 8")
    for (int j = 0; j < 8; j++) {
        if (j < nk) {
            int64_t b = j * stride;
            __m512 s = _mm512_mul_ps(q0, ld16(k, b, f16));
            s = _mm512_fmadd_ps(q1, ld16(k, b + 16, f16), s);
            s = _mm512_fmadd_ps(q2, ld16(k, b + 32, f16), s);
            s = _mm512_fmadd_ps(q3, ld16(k, b + 48, f16), s);
            a[j] = fold(s);
        } else {
            a[j] = _mm256_setzero_ps();
        }
    }
    return sum8_keys(a);
}

/* Scaled scores of keys j..j+7 (those below n) into scores[j..]; returns vm
 * raised to them. Prefetches the next group's keys and, when v is given,
 * this group's values. */
INLINE __m256 score_group_hd(const float *q, const void *k, int64_t j, int64_t n, int64_t stride, int hd, __m256 vs,
                             float *scores, __m256 vm, int f16, const void *v) {
    prefetch_rows(k, j + 8, j + 16, n, stride, 64, f16);
    if (v) prefetch_rows(v, j, j + 8, n, stride, 64, f16);
    const void *kj = f16 ? (const void *)((const uint16_t *)k + j * stride) : (const void *)((const float *)k + j * stride);
    int nk = n - j >= 8 ? 8 : (int)(n - j);
    return keep_scores(_mm256_mul_ps(scores8_hd(q, kj, stride, hd, nk, f16), vs), nk, scores + j, vm);
}

/* o[0..64) += sum over keys j in [j0, j1), in order, of p_j * v_j (one FMA
 * per element and key: the same bits in one run or in pieces). */
INLINE void accum_vh(float *o, const float *p, const void *v, int64_t j0, int64_t j1, int64_t stride, int hd,
                     int f16) {
    (void)hd;
    __m512 o0 = _mm512_loadu_ps(o), o1 = _mm512_loadu_ps(o + 16), o2 = _mm512_loadu_ps(o + 32),
           o3 = _mm512_loadu_ps(o + 48);
    for (int64_t j = j0; j < j1; j++) {
        __m512 pj = _mm512_set1_ps(p[j]);
        int64_t b = j * stride;
        o0 = _mm512_fmadd_ps(pj, ld16(v, b, f16), o0);
        o1 = _mm512_fmadd_ps(pj, ld16(v, b + 16, f16), o1);
        o2 = _mm512_fmadd_ps(pj, ld16(v, b + 32, f16), o2);
        o3 = _mm512_fmadd_ps(pj, ld16(v, b + 48, f16), o3);
    }
    _mm512_storeu_ps(o, o0), _mm512_storeu_ps(o + 16, o1), _mm512_storeu_ps(o + 32, o2);
    _mm512_storeu_ps(o + 48, o3);
}

INLINE void chunk(const float *q, const void *k, const void *v, int64_t n, int64_t stride, float scale, float *part,
                  float *scores, int f16) {
    __m256 vs = _mm256_set1_ps(scale), vm = _mm256_set1_ps(-INFINITY);
    for (int64_t j = 0; j < n; j += 8) vm = score_group_hd(q, k, j, n, stride, 64, vs, scores, vm, f16, v);
    float m = hmax8(vm);
    float l = exp_scores(scores, n, m), *o = part + 2;
    memset(o, 0, 64 * sizeof(float));
    accum_vh(o, scores, v, 0, n, stride, 64, f16);
    part[0] = m;
    part[1] = l;
}

/* Rows j..j+nr of an f16 cache side -> nr rows of 64 f32 at dst. */
INLINE void to_f32_rows(float *dst, const void *x, int64_t j, int nr, int64_t stride, int hd) {
    (void)hd;
    for (int r = 0; r < nr; r++)
        for (int d = 0; d < 64; d += 16) _mm512_store_ps(dst + r * 64 + d, ld16(x, (j + r) * stride + d, 1));
}

#include "kernels/attn_multi.h"

static void chunk_f32(const float *q, const void *k, const void *v, int64_t n, int64_t stride, int hd, float scale,
                      float *part, float *scores) {
    if (hd != 64) avx2.attn_f32(q, k, v, n, stride, hd, scale, part, scores);
    else chunk(q, k, v, n, stride, scale, part, scores, 0);
}
static void chunk_f16(const float *q, const void *k, const void *v, int64_t n, int64_t stride, int hd, float scale,
                      float *part, float *scores) {
    if (hd != 64) avx2.attn_f16(q, k, v, n, stride, hd, scale, part, scores);
    else chunk(q, k, v, n, stride, scale, part, scores, 1);
}
static void multi_f32(int nq, const float *const *q, const int64_t *n, const void *k, const void *v, int64_t stride,
                      int hd, float scale, float *const *part, float *const *scores) {
    if (hd != 64) avx2.attn_multi_f32(nq, q, n, k, v, stride, hd, scale, part, scores);
    else chunk_multi_hd(nq, q, n, k, v, stride, 64, scale, part, scores, 0);
}
static void multi_f16(int nq, const float *const *q, const int64_t *n, const void *k, const void *v, int64_t stride,
                      int hd, float scale, float *const *part, float *const *scores) {
    if (hd != 64) avx2.attn_multi_f16(nq, q, n, k, v, stride, hd, scale, part, scores);
    else chunk_multi_hd(nq, q, n, k, v, stride, 64, scale, part, scores, 1);
}

void llmk_kernels_attn_avx512(struct llmk_kernels *k) {
    llmk_kernels_attn_avx2(&avx2);
    llmk_kernels_attn_avx2(k);
    k->attn_f32 = chunk_f32, k->attn_f16 = chunk_f16;
    k->attn_multi_f32 = multi_f32, k->attn_multi_f16 = multi_f16;
}
