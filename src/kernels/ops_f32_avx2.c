/* AVX2 versions of the f32 path's row dot products (src/kernels/ops_f32.c).
 * Bitwise equal to the baseline code by construction: the 8 lanes of one
 * __m256 accumulator are the 8 partial sums of llmk_f32_dot (lane k takes
 * elements k, k+8, k+16, ...), every weight is decoded with the same f32
 * multiply and add as the scalar decoders (separate mul and add, never FMA),
 * and the lanes are combined in llmk_f32_dot's order. */
#include "kernels/ops_f32.h"

#include "codec/blocks.h"
#include "codec/half.h"

#include <immintrin.h>
#include <math.h>

static inline float combine(__m256 acc) {
    float s[8];
    _mm256_storeu_ps(s, acc);
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

/* Bytes 0..7 of v widened to 8 floats. */
static inline __m256 u8x8_to_ps(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)); }
static inline __m256 i8x8_to_ps(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }

float llmk_f32_dot_avx2(const float *a, const float *b, int64_t n) {
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    float s = combine(acc);
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* An R x T tile of dots: R rows against T vectors, R * T independent
 * accumulators (each llmk_f32_dot_avx2's lanes and order), every row and
 * vector register loaded once per 8 elements for the whole tile. */
static inline __attribute__((always_inline)) void dots_tile(int R, int T, const float *w, size_t ws, const float *x,
                                                            size_t xs, int64_t n, float *y, size_t ys) {
    __m256 acc[8][4];
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4") for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 xv[4];
        _Pragma("GCC unroll 4") for (int t = 0; t < T; t++) xv[t] = _mm256_loadu_ps(x + (size_t)t * xs + i);
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
            __m256 wv = _mm256_loadu_ps(w + (size_t)r * ws + i);
            _Pragma("GCC unroll 4") for (int t = 0; t < T; t++) acc[r][t] = _mm256_add_ps(acc[r][t], _mm256_mul_ps(wv, xv[t]));
        }
    }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) {
            const float *a = w + (size_t)r * ws, *b = x + (size_t)t * xs;
            float s = combine(acc[r][t]);
            for (int64_t j = i; j < n; j++) s += a[j] * b[j];
            y[(size_t)t * ys + (size_t)r] = s;
        }
}

/* Tiles of 2 rows x 4 vectors where there are 4 vectors (prefill: a row
 * pair is read once per 4 tokens, the tokens stay in L1), 8 rows x 1
 * otherwise (decode: one token against the router's rows). */
void llmk_f32_dots_avx2(const float *w, size_t ws, int64_t nr, const float *x, size_t xs, int64_t nt, int64_t n,
                        float *y, size_t ys) {
    int64_t t = 0;
    for (; t + 4 <= nt; t += 4) {
        const float *xt = x + (size_t)t * xs;
        float *yt = y + (size_t)t * ys;
        int64_t r = 0;
        for (; r + 2 <= nr; r += 2) dots_tile(2, 4, w + (size_t)r * ws, ws, xt, xs, n, yt + r, ys);
        if (r < nr) dots_tile(1, 4, w + (size_t)r * ws, ws, xt, xs, n, yt + r, ys);
    }
    for (; t < nt; t++) {
        const float *xt = x + (size_t)t * xs;
        float *yt = y + (size_t)t * ys;
        int64_t r = 0;
        for (; r + 8 <= nr; r += 8) dots_tile(8, 1, w + (size_t)r * ws, ws, xt, xs, n, yt + r, ys);
        for (; r + 4 <= nr; r += 4) dots_tile(4, 1, w + (size_t)r * ws, ws, xt, xs, n, yt + r, ys);
        for (; r < nr; r++) dots_tile(1, 1, w + (size_t)r * ws, ws, xt, xs, n, yt + r, ys);
    }
}

int llmk_f32_rowdot_avx2(uint32_t type, const void *row, const float *x, int64_t n, float *out) {
    __m256 acc = _mm256_setzero_ps();
    int64_t nb = n / LLMK_QK;
    if (type == LLMK_TYPE_Q4_1) {
        const llmk_block_q4_1 *b = row;
        const __m128i low = _mm_set1_epi8(0xf);
        for (int64_t ib = 0; ib < nb; ib++, x += LLMK_QK) {
            __m256 d = _mm256_set1_ps(llmk_fp16_to_fp32(b[ib].d)), m = _mm256_set1_ps(llmk_fp16_to_fp32(b[ib].m));
            __m128i qs = _mm_loadu_si128((const __m128i *)b[ib].qs);
            __m128i lo = _mm_and_si128(qs, low), hi = _mm_and_si128(_mm_srli_epi16(qs, 4), low);
            __m256 w0 = _mm256_add_ps(_mm256_mul_ps(d, u8x8_to_ps(lo)), m);
            __m256 w1 = _mm256_add_ps(_mm256_mul_ps(d, u8x8_to_ps(_mm_srli_si128(lo, 8))), m);
            __m256 w2 = _mm256_add_ps(_mm256_mul_ps(d, u8x8_to_ps(hi)), m);
            __m256 w3 = _mm256_add_ps(_mm256_mul_ps(d, u8x8_to_ps(_mm_srli_si128(hi, 8))), m);
            acc = _mm256_add_ps(acc, _mm256_mul_ps(w0, _mm256_loadu_ps(x)));
            acc = _mm256_add_ps(acc, _mm256_mul_ps(w1, _mm256_loadu_ps(x + 8)));
            acc = _mm256_add_ps(acc, _mm256_mul_ps(w2, _mm256_loadu_ps(x + 16)));
            acc = _mm256_add_ps(acc, _mm256_mul_ps(w3, _mm256_loadu_ps(x + 24)));
        }
    } else if (type == LLMK_TYPE_Q4_0) {
        const llmk_block_q4_0 *b = row;
        const __m128i low = _mm_set1_epi8(0xf), eight = _mm_set1_epi8(8);
        for (int64_t ib = 0; ib < nb; ib++, x += LLMK_QK) {
            __m256 d = _mm256_set1_ps(llmk_fp16_to_fp32(b[ib].d));
            __m128i qs = _mm_loadu_si128((const __m128i *)b[ib].qs);
            __m128i lo = _mm_sub_epi8(_mm_and_si128(qs, low), eight);
            __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(qs, 4), low), eight);
            acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_mul_ps(d, i8x8_to_ps(lo)), _mm256_loadu_ps(x)));
            acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_mul_ps(d, i8x8_to_ps(_mm_srli_si128(lo, 8))), _mm256_loadu_ps(x + 8)));
            acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_mul_ps(d, i8x8_to_ps(hi)), _mm256_loadu_ps(x + 16)));
            acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_mul_ps(d, i8x8_to_ps(_mm_srli_si128(hi, 8))), _mm256_loadu_ps(x + 24)));
        }
    } else if (type == LLMK_TYPE_Q8_0) {
        const llmk_block_q8_0 *b = row;
        for (int64_t ib = 0; ib < nb; ib++, x += LLMK_QK) {
            __m256 d = _mm256_set1_ps(llmk_fp16_to_fp32(b[ib].d));
            for (int r = 0; r < 4; r++) {
                __m128i q = _mm_loadl_epi64((const __m128i *)(b[ib].qs + 8 * r));
                acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_mul_ps(d, i8x8_to_ps(q)), _mm256_loadu_ps(x + 8 * r)));
            }
        }
    } else {
        return 0;
    }
    *out = combine(acc);
    return 1;
}

/* Two passes: the maximum (max_ps(x, m) keeps m where x is NaN, so NaNs are
 * skipped), then the first index holding it. Branch-free over the row,
 * where the scalar loop's data-dependent branch cost ~6 cycles an element
 * on a 49K-logit row. */
int64_t llmk_f32_argmax_avx2(const float *x, int64_t n) {
    __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
        m1 = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), m1);
    }
    float lanes[8], best = -INFINITY;
    _mm256_storeu_ps(lanes, _mm256_max_ps(m0, m1));
    for (int k = 0; k < 8; k++) best = lanes[k] > best ? lanes[k] : best;
    for (; i < n; i++) best = x[i] > best ? x[i] : best;
    const __m256 b = _mm256_set1_ps(best);
    for (i = 0; i + 8 <= n; i += 8) {
        int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), b, _CMP_EQ_OQ));
        if (hit) return i + __builtin_ctz((unsigned)hit);
    }
    for (; i < n; i++)
        if (x[i] == best) return i;
    return -1;
}

bool llmk_f32_nonfinite_avx2(const float *x, int64_t n) {
    const __m256i e = _mm256_set1_epi32(0x7f800000);
    __m256i any = _mm256_setzero_si256();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i u = _mm256_castps_si256(_mm256_loadu_ps(x + i));
        any = _mm256_or_si256(any, _mm256_cmpeq_epi32(_mm256_and_si256(u, e), e));
    }
    return !_mm256_testz_si256(any, any) || llmk_f32_nonfinite(x + i, n - i);
}

/* llmk_f32_rmsnorm_ref's arithmetic, vectorized: its 8 double lanes s0..s7
 * are the lanes of two 4-double accumulators (each square a double product
 * of exact conversions, then an add: no FMA, as the scalar code compiles
 * under -std=c11), combined in its order; the scaling is the same two f32
 * multiplies per element. The scalar loops took ~3000 cycles on a 576-wide
 * row, ~4% of a 2-thread decode step where each worker norms it. */
float llmk_f32_inv_rms_avx2(const float *x, int64_t n, float eps) {
    __m256d a = _mm256_setzero_pd(), b = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256d lo = _mm256_cvtps_pd(_mm_loadu_ps(x + i)), hi = _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4));
        a = _mm256_add_pd(a, _mm256_mul_pd(lo, lo));
        b = _mm256_add_pd(b, _mm256_mul_pd(hi, hi));
    }
    double s[8];
    _mm256_storeu_pd(s, a);
    _mm256_storeu_pd(s + 4, b);
    for (; i < n; i++) s[0] += (double)x[i] * x[i];
    double ss = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    return (float)(1.0 / sqrt(ss / (double)n + (double)eps));
}

void llmk_f32_rmsnorm_avx2(float *out, const float *x, const float *w, int64_t n, float eps) {
    int64_t i;
    float r = llmk_f32_inv_rms_avx2(x, n, eps);
    __m256 vr = _mm256_set1_ps(r);
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vr);
        if (w) v = _mm256_mul_ps(v, _mm256_loadu_ps(w + i));
        _mm256_storeu_ps(out + i, v);
    }
    for (; i < n; i++) out[i] = w ? (x[i] * r) * w[i] : x[i] * r;
}

/* llmk_f32_rope_ref vectorized, 4 pairs (interleaved) or 8 (neox) at a
 * time: a' = a c - b s by mul, mul, sub and b' = a s + b c as b c + a s
 * (addsub's odd lanes; the add commutes exactly), so the same bits. The
 * table cs holds (cos, sin) pairs, one per pair of dimensions. */
void llmk_f32_rope_avx2(float *x, int n_heads, int head_dim, const float *cs, bool neox) {
    int half = head_dim / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (int64_t)h * head_dim;
        int i = 0;
        if (!neox) {
            for (; i + 4 <= half; i += 4) { /* dimensions 2i .. 2i + 7 */
                __m256 p = _mm256_loadu_ps(v + 2 * i), t = _mm256_loadu_ps(cs + 2 * i);
                __m256 c = _mm256_moveldup_ps(t), s = _mm256_movehdup_ps(t);
                __m256 sw = _mm256_permute_ps(p, 0xb1); /* (b, a) per pair */
                _mm256_storeu_ps(v + 2 * i, _mm256_addsub_ps(_mm256_mul_ps(p, c), _mm256_mul_ps(sw, s)));
            }
        } else {
            for (; i + 8 <= half; i += 8) { /* dimensions i .. i + 7 with i + half .. */
                __m256 t0 = _mm256_loadu_ps(cs + 2 * i), t1 = _mm256_loadu_ps(cs + 2 * i + 8);
                /* even / odd elements of (t0, t1), back in order across the 128-bit halves */
                __m256 c = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(t0, t1, 0x88)), 0xd8));
                __m256 s = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(t0, t1, 0xdd)), 0xd8));
                __m256 a = _mm256_loadu_ps(v + i), b = _mm256_loadu_ps(v + i + half);
                _mm256_storeu_ps(v + i, _mm256_sub_ps(_mm256_mul_ps(a, c), _mm256_mul_ps(b, s)));
                _mm256_storeu_ps(v + i + half, _mm256_add_ps(_mm256_mul_ps(b, c), _mm256_mul_ps(a, s)));
            }
        }
        for (; i < half; i++) {
            int i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
            float c = cs[2 * i], s = cs[2 * i + 1];
            float a = v[i0], b = v[i1];
            v[i0] = a * c - b * s;
            v[i1] = a * s + b * c;
        }
    }
}
