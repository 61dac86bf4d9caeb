/* AVX2 + FMA + F16C attention chunk and SwiGLU kernels of the executor (see
 * attn.h). exp is a vector polynomial (Cephes' expf coefficients, published
 * constants) with about 1 ulp of error in the range softmax uses; every lane
 * follows the same instruction sequence, so results depend only on values,
 * never on where a chunk or row starts. */
#include "kernels/kernels.h"

#include "codec/blocks.h"
#include "codec/codec.h"
#include "codec/half.h"

#include "kernels/attn_x86.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

static inline __m256 ld(const void *p, int64_t i, int f16) {
    if (f16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
    return _mm256_loadu_ps((const float *)p + i);
}

/* Scores of 8 keys (rows k + j * stride, j < nk; missing keys score 0 and are
 * never used): per key 8-lane partial dots over the head, then one shared
 * transpose-and-add that gives every key the same summation order
 * ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)), whichever slot it has. */
static inline __attribute__((always_inline)) __m256 scores8(const float *q, const void *k, int64_t stride, int hd, int nk, int f16) {
    __m256 a[8];
    _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) a[j] = _mm256_setzero_ps();
    for (int d = 0; d < hd; d += 8) {
        __m256 qd = _mm256_loadu_ps(q + d);
        _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++)
            if (j < nk) a[j] = _mm256_fmadd_ps(qd, ld(k, j * stride + d, f16), a[j]);
    }
    return sum8_keys(a);
}

/* Scaled scores of keys j..j+7 (those below n) into scores[j..]; returns
 * vm raised to them (a maximum: exact in any order). Prefetches the next
 * group's keys and, when v is given, this group's values (read after the
 * softmax). */
static inline __attribute__((always_inline)) __m256 score_group(const float *q, const void *k, int64_t j, int64_t n,
                                                                int64_t stride, int hd, __m256 vs, float *scores,
                                                                __m256 vm, int f16, const void *v) {
    prefetch_rows(k, j + 8, j + 16, n, stride, hd, f16);
    if (v) prefetch_rows(v, j, j + 8, n, stride, hd, f16);
    const void *kj = f16 ? (const void *)((const uint16_t *)k + j * stride) : (const void *)((const float *)k + j * stride);
    int nk = n - j >= 8 ? 8 : (int)(n - j);
    return keep_scores(_mm256_mul_ps(scores8(q, kj, stride, hd, nk, f16), vs), nk, scores + j, vm);
}

/* o[0..64) += sum over keys j in [j0, j1), in order, of p_j * v_j (one FMA
 * per element and key: the same bits whether the keys come in one run or
 * in pieces, as o round-trips through memory exactly). */
static inline __attribute__((always_inline)) void accum_v64(float *o, const float *p, const void *v, int64_t j0,
                                                            int64_t j1, int64_t stride, int f16) {
    __m256 o0 = _mm256_loadu_ps(o), o1 = _mm256_loadu_ps(o + 8), o2 = _mm256_loadu_ps(o + 16), o3 = _mm256_loadu_ps(o + 24);
    __m256 o4 = _mm256_loadu_ps(o + 32), o5 = _mm256_loadu_ps(o + 40), o6 = _mm256_loadu_ps(o + 48), o7 = _mm256_loadu_ps(o + 56);
    for (int64_t j = j0; j < j1; j++) {
        __m256 pj = _mm256_set1_ps(p[j]);
        int64_t b = j * stride;
        o0 = _mm256_fmadd_ps(pj, ld(v, b, f16), o0);
        o1 = _mm256_fmadd_ps(pj, ld(v, b + 8, f16), o1);
        o2 = _mm256_fmadd_ps(pj, ld(v, b + 16, f16), o2);
        o3 = _mm256_fmadd_ps(pj, ld(v, b + 24, f16), o3);
        o4 = _mm256_fmadd_ps(pj, ld(v, b + 32, f16), o4);
        o5 = _mm256_fmadd_ps(pj, ld(v, b + 40, f16), o5);
        o6 = _mm256_fmadd_ps(pj, ld(v, b + 48, f16), o6);
        o7 = _mm256_fmadd_ps(pj, ld(v, b + 56, f16), o7);
    }
    _mm256_storeu_ps(o, o0), _mm256_storeu_ps(o + 8, o1), _mm256_storeu_ps(o + 16, o2);
    _mm256_storeu_ps(o + 24, o3), _mm256_storeu_ps(o + 32, o4), _mm256_storeu_ps(o + 40, o5);
    _mm256_storeu_ps(o + 48, o6), _mm256_storeu_ps(o + 56, o7);
}

static inline __attribute__((always_inline)) void chunk(const float *q, const void *k, const void *v, int64_t n, int64_t stride, int hd,
                         float scale, float *part, float *scores, int f16) {
    __m256 vs = _mm256_set1_ps(scale), vm = _mm256_set1_ps(-INFINITY);
    for (int64_t j = 0; j < n; j += 8)
        vm = score_group(q, k, j, n, stride, hd, vs, scores, vm, f16, v);
    float m = hmax8(vm);
    float l = exp_scores(scores, n, m), *o = part + 2;
    int64_t j;
    if (hd == 64) {
        memset(o, 0, 64 * sizeof(float));
        accum_v64(o, scores, v, 0, n, stride, f16);
    } else {
        for (int d = 0; d < hd; d += 8) {
            __m256 acc = _mm256_setzero_ps();
            for (j = 0; j < n; j++) acc = _mm256_fmadd_ps(_mm256_set1_ps(scores[j]), ld(v, j * stride + d, f16), acc);
            _mm256_storeu_ps(o + d, acc);
        }
    }
    part[0] = m;
    part[1] = l;
}

static void chunk_f32(const float *q, const void *k, const void *v, int64_t n, int64_t stride, int hd, float scale,
                      float *part, float *scores) {
    chunk(q, k, v, n, stride, hd, scale, part, scores, 0);
}
static void chunk_f16(const float *q, const void *k, const void *v, int64_t n, int64_t stride, int hd, float scale,
                      float *part, float *scores) {
    chunk(q, k, v, n, stride, hd, scale, part, scores, 1);
}

/* The multi-query form of chunk() (attn_multi64.h for head size 64; other
 * sizes query by query). */
static inline __attribute__((always_inline)) __m256 scores8_64(const float *q, const void *kj, int64_t stride, int nk,
                                                               int f16) {
    return scores8(q, kj, stride, 64, nk, f16);
}
static inline __attribute__((always_inline)) __m256 score_group_64(const float *q, const void *k, int64_t j, int64_t n,
                                                                   int64_t stride, __m256 vs, float *scores, __m256 vm,
                                                                   int f16, const void *v) {
    return score_group(q, k, j, n, stride, 64, vs, scores, vm, f16, v);
}
static inline __attribute__((always_inline)) void to_f32_rows(float *dst, const void *x, int64_t j, int nr,
                                                              int64_t stride) {
    for (int r = 0; r < nr; r++)
        for (int d = 0; d < 64; d += 8) _mm256_store_ps(dst + r * 64 + d, ld(x, (j + r) * stride + d, 1));
}

#include "kernels/attn_multi64.h"

static inline __attribute__((always_inline)) void chunk_multi(int nq, const float *const *q, const int64_t *n,
                                                              const void *k, const void *v, int64_t stride, int hd,
                                                              float scale, float *const *part, float *const *scores,
                                                              int f16) {
    if (hd != 64)
        for (int i = 0; i < nq; i++) chunk(q[i], k, v, n[i], stride, hd, scale, part[i], scores[i], f16);
    else
        chunk_multi64(nq, q, n, k, v, stride, scale, part, scores, f16);
}

static void multi_f32(int nq, const float *const *q, const int64_t *n, const void *k, const void *v, int64_t stride,
                      int hd, float scale, float *const *part, float *const *scores) {
    chunk_multi(nq, q, n, k, v, stride, hd, scale, part, scores, 0);
}
static void multi_f16(int nq, const float *const *q, const int64_t *n, const void *k, const void *v, int64_t stride,
                      int hd, float scale, float *const *part, float *const *scores) {
    chunk_multi(nq, q, n, k, v, stride, hd, scale, part, scores, 1);
}

/* 8 int8 -> 8 f32 (exact) */
static inline __m256 i8f(const int8_t *p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}
static inline float q8_scale(const unsigned char *blk) { return _cvtsh_ss(llmk_ld_u16(blk)); }

/* Q8_0 K/V (see attn.h): per key, each block's q . k in two 8-lane sums
 * scaled once by the block's d; per value block, one weight p * d times the
 * dequantized int8s. hd = 64 keeps the output in registers. */
static void chunk_q8_0(const float *q, const void *k, const void *v, int64_t n, int64_t stride, int hd, float scale,
                       float *part, float *scores) {
    const size_t bb = sizeof(llmk_block_q8_0), rb = (size_t)(stride / LLMK_QK) * bb;
    const int nb = hd / LLMK_QK;
    const unsigned char *K = k, *V = v;
    float m = -INFINITY;
    for (int64_t j = 0; j < n; j++) {
        const unsigned char *row = K + (size_t)j * rb;
        __m256 acc = _mm256_setzero_ps();
        for (int b = 0; b < nb; b++) {
            const unsigned char *blk = row + (size_t)b * bb;
            const int8_t *qs = (const int8_t *)(blk + 2);
            const float *qb = q + b * LLMK_QK;
            __m256 s0 = _mm256_mul_ps(_mm256_loadu_ps(qb), i8f(qs));
            __m256 s1 = _mm256_mul_ps(_mm256_loadu_ps(qb + 8), i8f(qs + 8));
            s0 = _mm256_fmadd_ps(_mm256_loadu_ps(qb + 16), i8f(qs + 16), s0);
            s1 = _mm256_fmadd_ps(_mm256_loadu_ps(qb + 24), i8f(qs + 24), s1);
            acc = _mm256_fmadd_ps(_mm256_set1_ps(q8_scale(blk)), _mm256_add_ps(s0, s1), acc);
        }
        float s = hsum8(acc) * scale;
        scores[j] = s;
        if (s > m) m = s;
    }
    float l = exp_scores(scores, n, m), *o = part + 2;
    if (hd == 64) {
        __m256 o0 = _mm256_setzero_ps(), o1 = o0, o2 = o0, o3 = o0, o4 = o0, o5 = o0, o6 = o0, o7 = o0;
        for (int64_t j = 0; j < n; j++) {
            const unsigned char *b0 = V + (size_t)j * rb, *b1 = b0 + bb;
            const int8_t *q0 = (const int8_t *)(b0 + 2), *q1 = (const int8_t *)(b1 + 2);
            __m256 c0 = _mm256_set1_ps(scores[j] * q8_scale(b0)), c1 = _mm256_set1_ps(scores[j] * q8_scale(b1));
            o0 = _mm256_fmadd_ps(c0, i8f(q0), o0);
            o1 = _mm256_fmadd_ps(c0, i8f(q0 + 8), o1);
            o2 = _mm256_fmadd_ps(c0, i8f(q0 + 16), o2);
            o3 = _mm256_fmadd_ps(c0, i8f(q0 + 24), o3);
            o4 = _mm256_fmadd_ps(c1, i8f(q1), o4);
            o5 = _mm256_fmadd_ps(c1, i8f(q1 + 8), o5);
            o6 = _mm256_fmadd_ps(c1, i8f(q1 + 16), o6);
            o7 = _mm256_fmadd_ps(c1, i8f(q1 + 24), o7);
        }
        _mm256_storeu_ps(o, o0), _mm256_storeu_ps(o + 8, o1), _mm256_storeu_ps(o + 16, o2);
        _mm256_storeu_ps(o + 24, o3), _mm256_storeu_ps(o + 32, o4), _mm256_storeu_ps(o + 40, o5);
        _mm256_storeu_ps(o + 48, o6), _mm256_storeu_ps(o + 56, o7);
    } else { /* the same arithmetic per element, one block of outputs at a time */
        for (int b = 0; b < nb; b++) {
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (int64_t j = 0; j < n; j++) {
                const unsigned char *blk = V + (size_t)j * rb + (size_t)b * bb;
                const int8_t *qs = (const int8_t *)(blk + 2);
                __m256 c = _mm256_set1_ps(scores[j] * q8_scale(blk));
                a0 = _mm256_fmadd_ps(c, i8f(qs), a0);
                a1 = _mm256_fmadd_ps(c, i8f(qs + 8), a1);
                a2 = _mm256_fmadd_ps(c, i8f(qs + 16), a2);
                a3 = _mm256_fmadd_ps(c, i8f(qs + 24), a3);
            }
            float *ob = o + b * LLMK_QK;
            _mm256_storeu_ps(ob, a0), _mm256_storeu_ps(ob + 8, a1), _mm256_storeu_ps(ob + 16, a2);
            _mm256_storeu_ps(ob + 24, a3);
        }
    }
    part[0] = m;
    part[1] = l;
}

static inline __m256 silu_mul(__m256 g, __m256 u) {
    __m256 e = vexp(_mm256_sub_ps(_mm256_setzero_ps(), g));
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

static void swiglu(float *g, const float *u, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(g + i, silu_mul(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i)));
    if (i < n) {
        float tg[8] = {0}, tu[8] = {0};
        for (int64_t j = i; j < n; j++) tg[j - i] = g[j], tu[j - i] = u[j];
        _mm256_storeu_ps(tg, silu_mul(_mm256_loadu_ps(tg), _mm256_loadu_ps(tu)));
        for (int64_t j = i; j < n; j++) g[j] = tg[j - i];
    }
}

/* x += y lane by lane: the scalar adds' bits (one IEEE add per element). */
static void add(float *x, const float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) x[i] += y[i];
}

/* F16C rounds to nearest even, handles subnormals and quiets NaNs keeping
 * the top of the payload: llmk_fp32_to_fp16's results (tests/test_attn.c).
 * The scalar one took ~15 cycles a value, 384 per layer on the worker
 * appending the K/V heads. */
static void to_f16(const float *src, uint16_t *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) dst[i] = llmk_fp32_to_fp16(src[i]);
}

void llmk_kernels_attn_avx2(struct llmk_kernels *k) {
    k->attn_f32 = chunk_f32, k->attn_f16 = chunk_f16, k->attn_q8_0 = chunk_q8_0;
    k->attn_multi_f32 = multi_f32, k->attn_multi_f16 = multi_f16;
    k->attn_head_multiple = 8;
    k->swiglu = swiglu, k->add = add, k->to_f16 = to_f16;
}
