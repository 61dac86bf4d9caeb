/* AVX2 DSA kernels (dsa.h): the references' operations, eight lanes at a
 * time, so every result has the same bits. No FMA anywhere: the references
 * multiply and add separately (they run on CPUs without FMA too). */
#include "kernels/dsa.h"

#include "codec/half.h"
#include "kernels/exp_x86.h"

#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)) */
static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float dot(const float *a, const float *b, int n) {
    __m256 s = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) s = _mm256_add_ps(s, _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    float t = hsum(s);
    for (; i < n; i++) t = t + a[i] * b[i];
    return t;
}

/* Four keys against one query row: four accumulators side by side (the
 * query loaded once), each reduced as dot() reduces it. */
static inline void dot4(const float *q, const float *k0, const float *k1, const float *k2, const float *k3, int n,
                        float *t) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 a = _mm256_loadu_ps(q + i);
        s0 = _mm256_add_ps(s0, _mm256_mul_ps(a, _mm256_loadu_ps(k0 + i)));
        s1 = _mm256_add_ps(s1, _mm256_mul_ps(a, _mm256_loadu_ps(k1 + i)));
        s2 = _mm256_add_ps(s2, _mm256_mul_ps(a, _mm256_loadu_ps(k2 + i)));
        s3 = _mm256_add_ps(s3, _mm256_mul_ps(a, _mm256_loadu_ps(k3 + i)));
    }
    t[0] = hsum(s0), t[1] = hsum(s1), t[2] = hsum(s2), t[3] = hsum(s3);
    for (; i < n; i++) {
        t[0] = t[0] + q[i] * k0[i];
        t[1] = t[1] + q[i] * k1[i];
        t[2] = t[2] + q[i] * k2[i];
        t[3] = t[3] + q[i] * k3[i];
    }
}

static void scores_decode(const float *q, const float *k, const float *w, int64_t n_q, int n_heads, int dim,
                          int64_t n_keys, float *out) {
    for (int64_t m = 0; m < n_q; m++) {
        int64_t n = 0;
        float t[4];
        for (; n + 4 <= n_keys; n += 4) {
            const float *kn = k + (size_t)n * dim;
            float acc[4] = {0, 0, 0, 0};
            for (int h = 0; h < n_heads; h++) {
                dot4(q + ((size_t)m * n_heads + h) * dim, kn, kn + dim, kn + 2 * dim, kn + 3 * dim, dim, t);
                float wh = w[m * n_heads + h];
                for (int j = 0; j < 4; j++) acc[j] = acc[j] + (t[j] > 0 ? t[j] : 0.0f) * wh;
            }
            memcpy(out + m * n_keys + n, acc, sizeof acc);
        }
        for (; n < n_keys; n++) {
            float acc = 0;
            for (int h = 0; h < n_heads; h++) {
                float d = dot(q + ((size_t)m * n_heads + h) * dim, k + (size_t)n * dim, dim);
                acc = acc + (d > 0 ? d : 0.0f) * w[m * n_heads + h];
            }
            out[m * n_keys + n] = acc;
        }
    }
}

/* Prefill: key tiles outermost so a tile of keys stays in cache for every
 * query row; per row the decode kernel's arithmetic. */
#define KEY_TILE 64
static void scores_prefill(const float *q, const float *k, const float *w, int64_t n_q, int n_heads, int dim,
                           int64_t n_keys, float *out) {
    float *t = malloc(sizeof(float) * KEY_TILE);
    for (int64_t n0 = 0; n0 < n_keys; n0 += KEY_TILE) {
        int64_t nt = n_keys - n0 < KEY_TILE ? n_keys - n0 : KEY_TILE;
        for (int64_t m = 0; m < n_q; m++) {
            if (!t) { /* no scratch: straight into the output row */
                scores_decode(q + (size_t)m * n_heads * dim, k + (size_t)n0 * dim, w + m * n_heads, 1, n_heads, dim,
                              nt, out + m * n_keys + n0);
                continue;
            }
            scores_decode(q + (size_t)m * n_heads * dim, k + (size_t)n0 * dim, w + m * n_heads, 1, n_heads, dim, nt,
                          t);
            memcpy(out + m * n_keys + n0, t, sizeof(float) * (size_t)nt);
        }
    }
    free(t);
}

static void keys(const float *scores, int64_t n, uint16_t *out) {
    int64_t i = 0;
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
    for (; i + 8 <= n; i += 8) {
        __m256 s = _mm256_loadu_ps(scores + i);
        __m256i x = _mm256_castps_si256(s);
        /* bf16 nearest even (no NaN here: those lanes are replaced below) */
        __m256i b = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, bias),
                                                       _mm256_and_si256(_mm256_srli_epi32(x, 16), one)), 16);
        __m256i neg = _mm256_srai_epi32(_mm256_slli_epi32(b, 16), 31); /* all ones where the sign is set */
        __m256i key = _mm256_and_si256(_mm256_xor_si256(b, _mm256_or_si256(neg, _mm256_set1_epi32(0x8000))),
                                       _mm256_set1_epi32(0xffff));
        __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(s, s, _CMP_UNORD_Q));
        key = _mm256_andnot_si256(nan, key);
        __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(key), _mm256_extracti128_si256(key, 1));
        _mm_storeu_si128((__m128i *)(out + i), packed);
    }
    for (; i < n; i++) out[i] = llmk_dsa_score_key(scores[i]);
}

/* Gathered rows are scattered over the cache: fetch a row's lines ahead of
 * use (the hardware prefetcher cannot guess a gather). */
static inline void prefetch_row(const float *p, int n, int l2) {
    for (int i = 0; i < n; i += 16) {
        if (l2) _mm_prefetch((const char *)(p + i), _MM_HINT_T1);
        else _mm_prefetch((const char *)(p + i), _MM_HINT_T0);
    }
}

static void attn_part(const float *q, const float *const *krows, const float *const *vrows, int64_t n, int dk,
                      int dv, float scale, int key_tile, float *part, float *scratch) {
    float mx = -INFINITY, l = 0, *o = part + 2;
    const int dv8 = dv & ~7;
    memset(o, 0, sizeof(float) * (size_t)dv);
    for (int64_t j0 = 0; j0 < n; j0 += key_tile) {
        int64_t nt = n - j0 < key_tile ? n - j0 : key_tile, j = 0;
        const float *const *kr = krows + j0;
        float tm = mx;
        for (; j + 4 <= nt; j += 4) {
            for (int64_t f = j0 + j + 8; f < j0 + j + 12 && f < n; f++) prefetch_row(krows[f], dk, 0);
            for (int64_t f = j0 + j; f < j0 + j + 4; f++) prefetch_row(vrows[f], dv, 1); /* read after the softmax */
            dot4(q, kr[j], kr[j + 1], kr[j + 2], kr[j + 3], dk, scratch + j);
        }
        for (; j < nt; j++) scratch[j] = dot(q, kr[j], dk);
        for (j = 0; j < nt; j++) {
            float s = scratch[j] * scale; /* (the reference's product, after the dot) */
            scratch[j] = s;
            if (s > tm) tm = s;
        }
        if (mx != -INFINITY) {
            float alpha = llmk_dsa_exp(mx - tm);
            __m256 va = _mm256_set1_ps(alpha);
            l = l * alpha;
            int d = 0;
            for (; d < dv8; d += 8) _mm256_storeu_ps(o + d, _mm256_mul_ps(_mm256_loadu_ps(o + d), va));
            for (; d < dv; d++) o[d] = o[d] * alpha;
        }
        mx = tm;
        __m256 vm = _mm256_set1_ps(mx);
        for (j = 0; j + 8 <= nt; j += 8)
            _mm256_storeu_ps(scratch + j, llmk_vexp_dsa(_mm256_sub_ps(_mm256_loadu_ps(scratch + j), vm)));
        for (; j < nt; j++) scratch[j] = llmk_dsa_exp(scratch[j] - mx);
        for (j = 0; j < nt; j++) l = l + scratch[j];
        for (j = 0; j < nt; j++) {
            const float *vr = vrows[j0 + j];
            __m256 p = _mm256_set1_ps(scratch[j]);
            int d = 0;
            for (; d < dv8; d += 8)
                _mm256_storeu_ps(o + d, _mm256_add_ps(_mm256_loadu_ps(o + d), _mm256_mul_ps(p, _mm256_loadu_ps(vr + d))));
            for (; d < dv; d++) o[d] = o[d] + scratch[j] * vr[d];
        }
    }
    part[0] = mx;
    part[1] = l;
}

/* llmk_round_e4m3 (limit 448, 3 mantissa bits, subnormal step 2^-9) or
 * llmk_round_e2m1 (6, 1 bit, 0.5) per lane, on finite values. */
static inline __m256 vround_fp(__m256 x, float sub_min, float sub_inv, float sub_step, int drop, float maxv) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 a = _mm256_andnot_ps(sign, x);
    __m256 sub = _mm256_mul_ps(_mm256_round_ps(_mm256_mul_ps(a, _mm256_set1_ps(sub_inv)),
                                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                               _mm256_set1_ps(sub_step));
    __m256i b = _mm256_castps_si256(a);
    __m256i odd = _mm256_and_si256(_mm256_srli_epi32(b, drop), _mm256_set1_epi32(1));
    b = _mm256_add_epi32(_mm256_add_epi32(b, _mm256_set1_epi32((1 << (drop - 1)) - 1)), odd);
    b = _mm256_andnot_si256(_mm256_set1_epi32((1 << drop) - 1), b);
    __m256 r = _mm256_blendv_ps(_mm256_castsi256_ps(b), sub, _mm256_cmp_ps(a, _mm256_set1_ps(sub_min), _CMP_LT_OQ));
    r = _mm256_min_ps(r, _mm256_set1_ps(maxv));
    return _mm256_or_ps(r, _mm256_and_ps(sign, x));
}

static inline float vamax(const float *x, int n) {
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_loadu_ps(x + i)));
    float t[8], r = 0;
    _mm256_storeu_ps(t, m);
    for (int i = 0; i < 8; i++) r = t[i] > r ? t[i] : r;
    return r;
}

static void kv_qat(float *x, int64_t n, bool f16_round) {
    for (int64_t b = 0; b < n; b += 64) {
        float amax = vamax(x + b, 64);
        __m256 s = _mm256_set1_ps((amax > 1e-4f ? amax : 1e-4f) / 448.0f);
        for (int i = 0; i < 64; i += 8) {
            __m256 y = _mm256_mul_ps(vround_fp(_mm256_div_ps(_mm256_loadu_ps(x + b + i), s), 0x1p-6f, 512.0f, 0x1p-9f, 20,
                                               448.0f),
                                     s);
            if (f16_round) y = _mm256_cvtph_ps(_mm256_cvtps_ph(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            _mm256_storeu_ps(x + b + i, y);
        }
    }
}

/* One butterfly stage inside each 8-lane vector: partner = lane ^ h; the
 * lower lane keeps a + b, the upper one a - b (as lower - upper). */
static inline __m256 stage_in(__m256 v, __m256 partner, int upper_mask) {
    __m256 sum = _mm256_add_ps(v, partner), dif = _mm256_sub_ps(partner, v);
    switch (upper_mask) {
    case 0xaa: return _mm256_blend_ps(sum, dif, 0xaa);
    case 0xcc: return _mm256_blend_ps(sum, dif, 0xcc);
    default: return _mm256_blend_ps(sum, dif, 0xf0);
    }
}

static void hadamard(float *x, int64_t n) {
    for (int64_t b = 0; b < n; b += 128) {
        __m256 v[16];
        for (int i = 0; i < 16; i++) {
            __m256 t = _mm256_loadu_ps(x + b + 8 * i);
            t = stage_in(t, _mm256_permute_ps(t, 0xb1), 0xaa);                /* h = 1 */
            t = stage_in(t, _mm256_permute_ps(t, 0x4e), 0xcc);                /* h = 2 */
            v[i] = stage_in(t, _mm256_permute2f128_ps(t, t, 0x01), 0xf0);     /* h = 4 */
        }
        for (int h = 1; h < 16; h <<= 1) /* h = 8 .. 64 elements: whole vectors */
            for (int i = 0; i < 16; i += 2 * h)
                for (int j = i; j < i + h; j++) {
                    __m256 a = v[j], c = v[j + h];
                    v[j] = _mm256_add_ps(a, c);
                    v[j + h] = _mm256_sub_ps(a, c);
                }
        const __m256 sc = _mm256_set1_ps(0.0883883476483184405f);
        for (int i = 0; i < 16; i++) _mm256_storeu_ps(x + b + 8 * i, _mm256_mul_ps(v[i], sc));
    }
}

static void fp4_qat(float *x, int64_t n) {
    for (int64_t b = 0; b < n; b += 32) {
        float amax = vamax(x + b, 32);
        if (!(amax > 0)) continue;
        __m256 s = _mm256_set1_ps(llmk_dsa_e8m0_scale(amax));
        for (int i = 0; i < 32; i += 8)
            _mm256_storeu_ps(x + b + i, _mm256_mul_ps(vround_fp(_mm256_div_ps(_mm256_loadu_ps(x + b + i), s), 1.0f,
                                                                2.0f, 0.5f, 22, 6.0f),
                                                      s));
    }
}

const struct llmk_dsa_kernels llmk_dsa_kernels_avx2 = {
    .name = "avx2",
    .indexer_scores = scores_prefill,
    .indexer_score_decode = scores_decode,
    .score_keys = keys,
    .attn_part = attn_part,
    .kv_qat = kv_qat,
    .hadamard128 = hadamard,
    .fp4_qat = fp4_qat,
};
