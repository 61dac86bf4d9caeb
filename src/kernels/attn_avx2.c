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
/* element i of an f32 or f16 row */
static inline const void *at(const void *p, int64_t i, int f16) {
    return f16 ? (const void *)((const uint16_t *)p + i) : (const void *)((const float *)p + i);
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

/* o[0..8 nv) += sum over keys j in [j0, j1), in order, of p_j * v_j, nv <= 8
 * vectors (one FMA per element and key: the same bits whether the keys come
 * in one run or in pieces, as o round-trips through memory exactly). The nv
 * accumulators are independent chains: one chain per 8 elements, key after
 * key, waits an FMA latency per key (hd 128: 2.0x slower chunks). */
static inline __attribute__((always_inline)) void accum_v(float *o, const float *p, const void *v, int64_t j0,
                                                          int64_t j1, int64_t stride, int nv, int f16) {
    __m256 a[8];
    _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) a[i] = i < nv ? _mm256_loadu_ps(o + 8 * i) : _mm256_setzero_ps();
    for (int64_t j = j0; j < j1; j++) {
        __m256 pj = _mm256_set1_ps(p[j]);
        int64_t b = j * stride;
        _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++)
            if (i < nv) a[i] = _mm256_fmadd_ps(pj, ld(v, b + 8 * i, f16), a[i]);
    }
    _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++)
        if (i < nv) _mm256_storeu_ps(o + 8 * i, a[i]);
}

/* o[0..hd) += sum over keys j in [j0, j1) of p_j * v_j: 64 elements at a
 * time (eight chains in registers), then the rest. */
static inline __attribute__((always_inline)) void accum_vh(float *o, const float *p, const void *v, int64_t j0,
                                                           int64_t j1, int64_t stride, int hd, int f16) {
    int d = 0;
    for (; d + 64 <= hd; d += 64) accum_v(o + d, p, at(v, d, f16), j0, j1, stride, 8, f16);
    if (d < hd) accum_v(o + d, p, at(v, d, f16), j0, j1, stride, (hd - d) / 8, f16);
}

static inline __attribute__((always_inline)) void chunk(const float *q, const void *k, const void *v, int64_t n, int64_t stride, int hd,
                         float scale, float *part, float *scores, int f16) {
    __m256 vs = _mm256_set1_ps(scale), vm = _mm256_set1_ps(-INFINITY);
    for (int64_t j = 0; j < n; j += 8)
        vm = score_group(q, k, j, n, stride, hd, vs, scores, vm, f16, v);
    float m = hmax8(vm);
    float l = exp_scores(scores, n, m), *o = part + 2;
    memset(o, 0, (size_t)hd * sizeof(float));
    accum_vh(o, scores, v, 0, n, stride, hd, f16);
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

/* The multi-query form of chunk() (attn_multi.h; heads wider than
 * MULTI_HD_MAX query by query). */
static inline __attribute__((always_inline)) __m256 scores8_hd(const float *q, const void *kj, int64_t stride, int hd,
                                                               int nk, int f16) {
    return scores8(q, kj, stride, hd, nk, f16);
}
static inline __attribute__((always_inline)) __m256 score_group_hd(const float *q, const void *k, int64_t j, int64_t n,
                                                                   int64_t stride, int hd, __m256 vs, float *scores,
                                                                   __m256 vm, int f16, const void *v) {
    return score_group(q, k, j, n, stride, hd, vs, scores, vm, f16, v);
}
static inline __attribute__((always_inline)) void to_f32_rows(float *dst, const void *x, int64_t j, int nr,
                                                              int64_t stride, int hd) {
    for (int r = 0; r < nr; r++)
        for (int d = 0; d < hd; d += 8) _mm256_store_ps(dst + r * hd + d, ld(x, (j + r) * stride + d, 1));
}

#include "kernels/attn_multi.h"

static inline __attribute__((always_inline)) void chunk_multi(int nq, const float *const *q, const int64_t *n,
                                                              const void *k, const void *v, int64_t stride, int hd,
                                                              float scale, float *const *part, float *const *scores,
                                                              int f16) {
    if (hd > MULTI_HD_MAX)
        for (int i = 0; i < nq; i++) chunk(q[i], k, v, n[i], stride, hd, scale, part[i], scores[i], f16);
    else
        chunk_multi_hd(nq, q, n, k, v, stride, hd, scale, part, scores, f16);
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

/* o[0..32 nblk) = sum over keys j < n, in order, of p_j d_j times value
 * blocks b..b+nblk of row j (V points at block b of row 0): per key and
 * block one weight p_j * d, then one FMA per element, each in its own chain
 * (two blocks give eight chains: a chain per 8 elements key after key waits
 * an FMA latency per key). */
static inline __attribute__((always_inline)) void q8_values(float *o, const unsigned char *V, const float *p, int64_t n,
                                                            size_t rb, int nblk) {
    const size_t bb = sizeof(llmk_block_q8_0);
    __m256 a[8];
    _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) a[i] = _mm256_setzero_ps();
    for (int64_t j = 0; j < n; j++) {
        _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
            if (h >= nblk) continue;
            const unsigned char *blk = V + (size_t)j * rb + (size_t)h * bb;
            const int8_t *qs = (const int8_t *)(blk + 2);
            __m256 c = _mm256_set1_ps(p[j] * q8_scale(blk));
            _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) a[4 * h + i] = _mm256_fmadd_ps(c, i8f(qs + 8 * i), a[4 * h + i]);
        }
    }
    _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++)
        if (i < 4 * nblk) _mm256_storeu_ps(o + 8 * i, a[i]);
}

/* Q8_0 K/V (see attn.h): per key, each block's q . k in two 8-lane sums
 * scaled once by the block's d; per value block, one weight p * d times the
 * dequantized int8s. */
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
    int b = 0;
    for (; b + 2 <= nb; b += 2) q8_values(o + b * LLMK_QK, V + (size_t)b * bb, scores, n, rb, 2);
    if (b < nb) q8_values(o + b * LLMK_QK, V + (size_t)b * bb, scores, n, rb, 1);
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

/* llmk_attn_merge(_sink)'s operations, eight elements at a time: each
 * element is zeroed, gets p * w added chunk by chunk, then times 1 / l, and
 * the scalar steps (the maximum, expf, l) are the reference's. In a
 * 512-token prefill the scalar merge was 2-3% of the time. */
static void merge(const float *parts, int nc, int hd, const float *sink, float *out) {
    int d8 = hd / 8 * 8;
    if (!sink && nc == 1) { /* exp(0) = 1: o / l, as the reference's shortcut */
        float inv = 1.0f / parts[1];
        for (int d = 0; d < d8; d += 8) _mm256_storeu_ps(out + d, _mm256_mul_ps(_mm256_loadu_ps(parts + 2 + d), _mm256_set1_ps(inv)));
        for (int d = d8; d < hd; d++) out[d] = parts[2 + d] * inv;
        return;
    }
    float mx = sink ? *sink : -INFINITY;
    for (int c = 0; c < nc; c++)
        if (parts[(int64_t)c * (hd + 2)] > mx) mx = parts[(int64_t)c * (hd + 2)];
    float l = 0;
    memset(out, 0, (size_t)hd * sizeof *out);
    for (int c = 0; c < nc; c++) {
        const float *p = parts + (int64_t)c * (hd + 2);
        float w = expf(p[0] - mx);
        l += p[1] * w;
        __m256 vw = _mm256_set1_ps(w);
        for (int d = 0; d < d8; d += 8)
            _mm256_storeu_ps(out + d, _mm256_add_ps(_mm256_loadu_ps(out + d), _mm256_mul_ps(_mm256_loadu_ps(p + 2 + d), vw)));
        for (int d = d8; d < hd; d++) out[d] += p[2 + d] * w;
    }
    if (sink) l += expf(*sink - mx);
    float inv = 1.0f / l;
    for (int d = 0; d < d8; d += 8) _mm256_storeu_ps(out + d, _mm256_mul_ps(_mm256_loadu_ps(out + d), _mm256_set1_ps(inv)));
    for (int d = d8; d < hd; d++) out[d] *= inv;
}

void llmk_kernels_attn_avx2(struct llmk_kernels *k) {
    k->attn_f32 = chunk_f32, k->attn_f16 = chunk_f16, k->attn_q8_0 = chunk_q8_0;
    k->attn_multi_f32 = multi_f32, k->attn_multi_f16 = multi_f16;
    k->attn_merge = merge;
    k->attn_head_multiple = 8;
    k->swiglu = swiglu, k->add = add, k->to_f16 = to_f16;
}
