/* Helpers shared by the x86 attention kernels (attn_avx2.c, attn_avx512.c),
 * compiled into each with that file's ISA flags: the vector exp, the softmax
 * over a chunk's scores and the 8-key reduction, so that the two files give
 * a score or a probability through the same operations. */
#ifndef LLMK_KERNELS_ATTN_X86_H
#define LLMK_KERNELS_ATTN_X86_H

#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

static inline __m256 vexp(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    __m256 r2 = _mm256_mul_ps(r, r);
    __m256 y = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* scores[i] = exp(scores[i] - m) for i in [j, n), each 8 added to the
 * 8-lane sum acc in order (a ragged end padded with zeros); returns acc. */
static inline __attribute__((always_inline)) __m256 exp_scores_from(float *scores, int64_t j, int64_t n, float m,
                                                                    __m256 acc) {
    __m256 vm = _mm256_set1_ps(m);
    for (; j + 8 <= n; j += 8) {
        __m256 e = vexp(_mm256_sub_ps(_mm256_loadu_ps(scores + j), vm));
        _mm256_storeu_ps(scores + j, e);
        acc = _mm256_add_ps(acc, e);
    }
    if (j < n) {
        float t[8];
        for (int i = 0; i < 8; i++) t[i] = j + i < n ? scores[j + i] : -INFINITY; /* exp(-inf) = 0 */
        __m256 e = vexp(_mm256_sub_ps(_mm256_loadu_ps(t), vm));
        e = _mm256_and_ps(e, _mm256_cmp_ps(_mm256_loadu_ps(t), _mm256_set1_ps(-INFINITY), _CMP_NEQ_OQ));
        _mm256_storeu_ps(t, e);
        for (int64_t i = j; i < n; i++) scores[i] = t[i - j];
        acc = _mm256_add_ps(acc, e);
    }
    return acc;
}

/* scores[j] = exp(scores[j] - m); returns their sum: lane j % 8 of an
 * 8-lane sum, then hsum8 (a function of the chunk's scores alone, and chunks
 * are fixed key ranges, so the same bits wherever the chunk is computed). */
static inline __attribute__((always_inline)) float exp_scores(float *scores, int64_t n, float m) {
    return hsum8(exp_scores_from(scores, 0, n, m, _mm256_setzero_ps()));
}

/* Eight keys' 8-lane partial dots a[0..8) -> their 8 sums, lane j = key j:
 * one transpose-and-add giving every key the same summation order
 * ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)), whichever slot it has. */
static inline __attribute__((always_inline)) __m256 sum8_keys(const __m256 *a) {
    __m256 h01 = _mm256_hadd_ps(a[0], a[1]), h23 = _mm256_hadd_ps(a[2], a[3]);
    __m256 h45 = _mm256_hadd_ps(a[4], a[5]), h67 = _mm256_hadd_ps(a[6], a[7]);
    __m256 h0123 = _mm256_hadd_ps(h01, h23), h4567 = _mm256_hadd_ps(h45, h67);
    /* half 0 of h0123: keys 0..3 over lanes 0..3, half 1: over lanes 4..7 */
    return _mm256_add_ps(_mm256_permute2f128_ps(h0123, h4567, 0x20), _mm256_permute2f128_ps(h0123, h4567, 0x31));
}

/* A group's nk <= 8 scaled scores t (lane j = key j) stored at scores;
 * returns vm raised to them (lanes past nk left out). */
static inline __attribute__((always_inline)) __m256 keep_scores(__m256 t, int nk, float *scores, __m256 vm) {
    if (nk == 8) {
        _mm256_storeu_ps(scores, t);
        return _mm256_max_ps(vm, t);
    }
    float b[8];
    _mm256_storeu_ps(b, t);
    for (int x = 0; x < nk; x++) scores[x] = b[x];
    for (int x = nk; x < 8; x++) b[x] = -INFINITY;
    return _mm256_max_ps(vm, _mm256_loadu_ps(b));
}

/* From this many queries (prefill: rows x the query heads of one KV head)
 * each group of 8 f16 rows is converted once into f32 for all of them: the
 * conversion is exact, so every query sees the values it would convert
 * itself, through the f32 form's operations. pp64 @ d1024 +7% (AVX2) and
 * +21% (AVX-512, with the head batching); with the 3 queries of a decode
 * step, from a cache in L3, it was slower than converting per query. */
enum { MULTI_SHARE_MIN = 6 };

static inline float hmax8(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Prefetch rows j0..j1 (clamped to n) of a cache side: a decode step finds
 * the cache cold (the step's weight stream evicted it), and the 8 strided
 * rows a score group reads are more streams than the hardware prefetcher
 * follows. Always inline: left to the inliner, GCC's pure-const pass found
 * a function that only prefetches `const` and deleted its calls (from
 * ca776d1 on; tests/py/test_codegen.py now checks the objects). */
static inline __attribute__((always_inline)) void prefetch_rows(const void *base, int64_t j0, int64_t j1, int64_t n,
                                                                 int64_t stride, int hd, int f16) {
    if (j1 > n) j1 = n;
    size_t es = f16 ? 2 : 4;
    for (int64_t j = j0; j < j1; j++)
        for (size_t o = 0; o < (size_t)hd * es; o += 64)
            _mm_prefetch((const char *)base + (size_t)(j * stride) * es + o, _MM_HINT_T0);
}

#endif
