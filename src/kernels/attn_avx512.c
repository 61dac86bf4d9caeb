/* AVX-512 attention chunks (f32 and f16 caches) for head sizes 64, 128 and
 * 256 (SmolLM2 and the llama family; Llama 3, Qwen2.5/3; gemma3): a head
 * row is hd / 16 512-bit registers, so a key's score takes hd / 16 FMAs and
 * a value's accumulation as many, where the AVX2 kernels take twice that
 * (with a 2-uop conversion per f16 load). At 1024 positions of context
 * those FMAs, not memory, bounded a decode step's attention; in a 512-token
 * prefill of a head-128 model (qwen3moe-shaped) attention was 27% of the
 * time on the AVX2 kernels.
 *
 * The same structure as attn_avx2.c, so the same promises: a query's bits
 * depend only on its values and its chunk's keys, the multi-query form gives
 * each query the single-query kernel's bits. A key's score: a 16-lane
 * partial dot in dimension order, folded to 8 lanes (low half + high half),
 * then attn_x86.h's 8-key reduction. They are not the AVX2 kernels' bits
 * (another summation order); other head sizes go to the AVX2 kernels, for
 * both forms. Each function is compiled per head size (hd a constant where
 * the entries below call it): the registers of a row are arrays the
 * compiler keeps in registers (hd 256: 16 of q, 16 of o). */
#include "kernels/kernels.h"

#include "kernels/attn_x86.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

static struct llmk_kernels avx2; /* head sizes other than 64, 128 and 256 */

enum { HD_MAX = 256, NR_MAX = HD_MAX / 16 };

INLINE __m512 ld16(const void *p, int64_t i, int f16) {
    if (f16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i)));
    return _mm512_loadu_ps((const float *)p + i);
}

INLINE __m256 fold(__m512 s) {
    return _mm256_add_ps(_mm512_castps512_ps256(s), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1)));
}

/* Scores of 8 keys (rows k + j * stride, j < nk; missing keys score 0 and
 * are never used). */
INLINE __m256 scores8_hd(const float *q, const void *k, int64_t stride, int hd, int nk, int f16) {
    __m512 qv[NR_MAX];
    _Pragma("GCC unroll 16")
    for (int r = 0; r < hd / 16; r++) qv[r] = _mm512_loadu_ps(q + 16 * r);
    __m256 a[8];
    _Pragma("GCC unroll 8")
    for (int j = 0; j < 8; j++) {
        if (j < nk) {
            int64_t b = j * stride;
            __m512 s = _mm512_mul_ps(qv[0], ld16(k, b, f16));
            _Pragma("GCC unroll 16")
            for (int r = 1; r < hd / 16; r++) s = _mm512_fmadd_ps(qv[r], ld16(k, b + 16 * r, f16), s);
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
    prefetch_rows(k, j + 8, j + 16, n, stride, hd, f16);
    if (v) prefetch_rows(v, j, j + 8, n, stride, hd, f16);
    const void *kj = f16 ? (const void *)((const uint16_t *)k + j * stride) : (const void *)((const float *)k + j * stride);
    int nk = n - j >= 8 ? 8 : (int)(n - j);
    return keep_scores(_mm256_mul_ps(scores8_hd(q, kj, stride, hd, nk, f16), vs), nk, scores + j, vm);
}

/* o[0..hd) += sum over keys j in [j0, j1), in order, of p_j * v_j (one FMA
 * per element and key: the same bits in one run or in pieces). */
INLINE void accum_vh(float *o, const float *p, const void *v, int64_t j0, int64_t j1, int64_t stride, int hd,
                     int f16) {
    __m512 ov[NR_MAX];
    _Pragma("GCC unroll 16")
    for (int r = 0; r < hd / 16; r++) ov[r] = _mm512_loadu_ps(o + 16 * r);
    for (int64_t j = j0; j < j1; j++) {
        __m512 pj = _mm512_set1_ps(p[j]);
        int64_t b = j * stride;
        _Pragma("GCC unroll 16")
        for (int r = 0; r < hd / 16; r++) ov[r] = _mm512_fmadd_ps(pj, ld16(v, b + 16 * r, f16), ov[r]);
    }
    _Pragma("GCC unroll 16")
    for (int r = 0; r < hd / 16; r++) _mm512_storeu_ps(o + 16 * r, ov[r]);
}

INLINE void chunk(const float *q, const void *k, const void *v, int64_t n, int64_t stride, int hd, float scale,
                  float *part, float *scores, int f16) {
    __m256 vs = _mm256_set1_ps(scale), vm = _mm256_set1_ps(-INFINITY);
    for (int64_t j = 0; j < n; j += 8) vm = score_group_hd(q, k, j, n, stride, hd, vs, scores, vm, f16, v);
    float m = hmax8(vm);
    float l = exp_scores(scores, n, m), *o = part + 2;
    memset(o, 0, (size_t)hd * sizeof(float));
    accum_vh(o, scores, v, 0, n, stride, hd, f16);
    part[0] = m;
    part[1] = l;
}

/* Rows j..j+nr of an f16 cache side -> nr rows of hd f32 at dst. */
INLINE void to_f32_rows(float *dst, const void *x, int64_t j, int nr, int64_t stride, int hd) {
    for (int r = 0; r < nr; r++)
        for (int d = 0; d < hd; d += 16) _mm512_store_ps(dst + r * hd + d, ld16(x, (j + r) * stride + d, 1));
}

#include "kernels/attn_multi.h"

/* f(HD) with the head size as a constant, for the sizes this file takes. */
#define BY_HD(hd, f) \
    switch (hd) {      \
    case 64: f(64); break;   \
    case 128: f(128); break; \
    default: f(256); break;  \
    }
static int takes(int hd) { return hd == 64 || hd == 128 || hd == 256; }

static void chunk_f32(const float *q, const void *k, const void *v, int64_t n, int64_t stride, int hd, float scale,
                      float *part, float *scores) {
#define ONE(HD) chunk(q, k, v, n, stride, HD, scale, part, scores, 0)
    if (!takes(hd)) avx2.attn_f32(q, k, v, n, stride, hd, scale, part, scores);
    else BY_HD(hd, ONE)
#undef ONE
}
static void chunk_f16(const float *q, const void *k, const void *v, int64_t n, int64_t stride, int hd, float scale,
                      float *part, float *scores) {
#define ONE(HD) chunk(q, k, v, n, stride, HD, scale, part, scores, 1)
    if (!takes(hd)) avx2.attn_f16(q, k, v, n, stride, hd, scale, part, scores);
    else BY_HD(hd, ONE)
#undef ONE
}
static void multi_f32(int nq, const float *const *q, const int64_t *n, const void *k, const void *v, int64_t stride,
                      int hd, float scale, float *const *part, float *const *scores) {
#define ONE(HD) chunk_multi_hd(nq, q, n, k, v, stride, HD, scale, part, scores, 0)
    if (!takes(hd)) avx2.attn_multi_f32(nq, q, n, k, v, stride, hd, scale, part, scores);
    else BY_HD(hd, ONE)
#undef ONE
}
static void multi_f16(int nq, const float *const *q, const int64_t *n, const void *k, const void *v, int64_t stride,
                      int hd, float scale, float *const *part, float *const *scores) {
#define ONE(HD) chunk_multi_hd(nq, q, n, k, v, stride, HD, scale, part, scores, 1)
    if (!takes(hd)) avx2.attn_multi_f16(nq, q, n, k, v, stride, hd, scale, part, scores);
    else BY_HD(hd, ONE)
#undef ONE
}

void llmk_kernels_attn_avx512(struct llmk_kernels *k) {
    llmk_kernels_attn_avx2(&avx2);
    llmk_kernels_attn_avx2(k);
    k->attn_f32 = chunk_f32, k->attn_f16 = chunk_f16;
    k->attn_multi_f32 = multi_f32, k->attn_multi_f16 = multi_f16;
}
