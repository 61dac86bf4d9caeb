/* AVX2 + FMA + F16C dot kernels (this file is built with those flags and only
 * registered when CPUID reports them). Integer block sums are exact (same
 * values as the _ref kernels); the f32 accumulation runs in 8 lanes and is
 * reduced once per row, so results differ from _ref by rounding only.
 *
 * Matvec is memory-bound: each kernel walks R rows at once (R = 4, then 1 for
 * the tail) so an activation block is loaded once per R weight blocks. The
 * per-row sequence of operations is the same for R = 4 and R = 1, so a row's
 * result does not depend on how rows are grouped or split across threads. */
#include "codec/blocks.h"
#include "codec/codec.h"
#include "codec/half.h"
#include "internal.h"

#include <immintrin.h>

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

/* 16 bytes of packed nibbles -> 32 bytes: low nibbles (elements 0..15) in
 * the low lane, high nibbles (16..31) in the high lane. */
static inline __m256i unpack_nib(const uint8_t *qs) {
    __m128i v = _mm_loadu_si128((const __m128i *)qs);
    __m128i m = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

/* sum of u8 * s8 products in 8 int32 lanes (no saturation for |u| <= 128,
 * |s| <= 127), as f32 */
static inline __m256 dot_us(__m256i u, __m256i s) {
    __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
    return _mm256_cvtepi32_ps(p);
}
/* signed x signed via |w| and sign(a, w); a must not hold -128 (activation
 * quantizers produce [-127, 127]). */
static inline __m256 dot_ss(__m256i w, __m256i a) {
    return dot_us(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
}

#define ROWS_LOOP(KERNEL)                                                                    \
    int64_t r = 0;                                                                           \
    for (; r + 4 <= nrows; r += 4) KERNEL(4, (const char *)w + (size_t)r * ws, ws, a, y + r, k); \
    for (; r < nrows; r++) KERNEL(1, (const char *)w + (size_t)r * ws, ws, a, y + r, k)

static inline void q4_1_rows(int R, const char *w, size_t ws, const void *a, float *y, int64_t k) {
    const llmk_block_q8_1 *ab = a;
    __m256 acc[4];
    float macc[4];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps(), macc[r] = 0;
    for (int64_t b = 0; b < k / LLMK_QK; b++) {
        __m256i av = _mm256_loadu_si256((const __m256i *)ab[b].qs);
        float da = h2f(ab[b].d), sa = h2f(ab[b].s);
        for (int r = 0; r < R; r++) {
            const llmk_block_q4_1 *wb = (const llmk_block_q4_1 *)(w + (size_t)r * ws) + b;
            __m256 p = dot_us(unpack_nib(wb->qs), av);
            acc[r] = _mm256_fmadd_ps(p, _mm256_set1_ps(h2f(wb->d) * da), acc[r]);
            macc[r] += h2f(wb->m) * sa;
        }
    }
    for (int r = 0; r < R; r++) y[r] = hsum8(acc[r]) + macc[r];
}
static void dot_q4_1(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    ROWS_LOOP(q4_1_rows);
}

static inline void q4_0_rows(int R, const char *w, size_t ws, const void *a, float *y, int64_t k) {
    const llmk_block_q8_0 *ab = a;
    __m256 acc[4];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    const __m256i eight = _mm256_set1_epi8(8);
    for (int64_t b = 0; b < k / LLMK_QK; b++) {
        __m256i av = _mm256_loadu_si256((const __m256i *)ab[b].qs);
        float da = h2f(ab[b].d);
        for (int r = 0; r < R; r++) {
            const llmk_block_q4_0 *wb = (const llmk_block_q4_0 *)(w + (size_t)r * ws) + b;
            __m256 p = dot_ss(_mm256_sub_epi8(unpack_nib(wb->qs), eight), av);
            acc[r] = _mm256_fmadd_ps(p, _mm256_set1_ps(h2f(wb->d) * da), acc[r]);
        }
    }
    for (int r = 0; r < R; r++) y[r] = hsum8(acc[r]);
}
static void dot_q4_0(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    ROWS_LOOP(q4_0_rows);
}

static inline void q8_0_rows(int R, const char *w, size_t ws, const void *a, float *y, int64_t k) {
    const llmk_block_q8_0 *ab = a;
    __m256 acc[4];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < k / LLMK_QK; b++) {
        __m256i av = _mm256_loadu_si256((const __m256i *)ab[b].qs);
        float da = h2f(ab[b].d);
        for (int r = 0; r < R; r++) {
            const llmk_block_q8_0 *wb = (const llmk_block_q8_0 *)(w + (size_t)r * ws) + b;
            __m256 p = dot_ss(_mm256_loadu_si256((const __m256i *)wb->qs), av);
            acc[r] = _mm256_fmadd_ps(p, _mm256_set1_ps(h2f(wb->d) * da), acc[r]);
        }
    }
    for (int r = 0; r < R; r++) y[r] = hsum8(acc[r]);
}
static void dot_q8_0(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    ROWS_LOOP(q8_0_rows);
}

/* Q5_0: bit j of qh becomes bit 4 of element j. */
static inline __m256i q5_high(const uint8_t qh[4]) {
    uint32_t h;
    __builtin_memcpy(&h, qh, 4);
    /* byte i of the result takes bit i of h: broadcast the 4 bytes to their
     * 8-byte groups, then test each byte's own bit */
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303ll, 0x0202020202020202ll,
                                           0x0101010101010101ll, 0x0000000000000000ll);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), shuf);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i on = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(on, _mm256_set1_epi8(0x10));
}

static inline void q5_0_rows(int R, const char *w, size_t ws, const void *a, float *y, int64_t k) {
    const llmk_block_q8_0 *ab = a;
    __m256 acc[4];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    const __m256i sixteen = _mm256_set1_epi8(16);
    for (int64_t b = 0; b < k / LLMK_QK; b++) {
        __m256i av = _mm256_loadu_si256((const __m256i *)ab[b].qs);
        float da = h2f(ab[b].d);
        for (int r = 0; r < R; r++) {
            const llmk_block_q5_0 *wb = (const llmk_block_q5_0 *)(w + (size_t)r * ws) + b;
            __m256i q = _mm256_or_si256(unpack_nib(wb->qs), q5_high(wb->qh));
            __m256 p = dot_ss(_mm256_sub_epi8(q, sixteen), av);
            acc[r] = _mm256_fmadd_ps(p, _mm256_set1_ps(h2f(wb->d) * da), acc[r]);
        }
    }
    for (int r = 0; r < R; r++) y[r] = hsum8(acc[r]);
}
static void dot_q5_0(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    ROWS_LOOP(q5_0_rows);
}

static inline void q5_1_rows(int R, const char *w, size_t ws, const void *a, float *y, int64_t k) {
    const llmk_block_q8_1 *ab = a;
    __m256 acc[4];
    float macc[4];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps(), macc[r] = 0;
    for (int64_t b = 0; b < k / LLMK_QK; b++) {
        __m256i av = _mm256_loadu_si256((const __m256i *)ab[b].qs);
        float da = h2f(ab[b].d), sa = h2f(ab[b].s);
        for (int r = 0; r < R; r++) {
            const llmk_block_q5_1 *wb = (const llmk_block_q5_1 *)(w + (size_t)r * ws) + b;
            __m256i q = _mm256_or_si256(unpack_nib(wb->qs), q5_high(wb->qh));
            acc[r] = _mm256_fmadd_ps(dot_us(q, av), _mm256_set1_ps(h2f(wb->d) * da), acc[r]);
            macc[r] += h2f(wb->m) * sa;
        }
    }
    for (int r = 0; r < R; r++) y[r] = hsum8(acc[r]) + macc[r];
}
static void dot_q5_1(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    ROWS_LOOP(q5_1_rows);
}

/* Plain float rows against f32 activations: 32 elements per step in four
 * 8-lane accumulators, a scalar tail, fixed order per row. */
#define FLOAT_ROWS(NAME, ESZ, LOAD8, LOAD1)                                                   \
    static inline void NAME##_rows(int R, const char *w, size_t ws, const void *a, float *y,  \
                                   int64_t k) {                                             \
        const float *x = a;                                                                 \
        for (int r = 0; r < R; r++) {                                                       \
            const char *row = w + (size_t)r * ws;                                           \
            __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;                      \
            int64_t i = 0;                                                                  \
            for (; i + 32 <= k; i += 32) {                                                  \
                s0 = _mm256_fmadd_ps(LOAD8(row + (i + 0) * ESZ), _mm256_loadu_ps(x + i + 0), s0);   \
                s1 = _mm256_fmadd_ps(LOAD8(row + (i + 8) * ESZ), _mm256_loadu_ps(x + i + 8), s1);   \
                s2 = _mm256_fmadd_ps(LOAD8(row + (i + 16) * ESZ), _mm256_loadu_ps(x + i + 16), s2); \
                s3 = _mm256_fmadd_ps(LOAD8(row + (i + 24) * ESZ), _mm256_loadu_ps(x + i + 24), s3); \
            }                                                                               \
            for (; i + 8 <= k; i += 8)                                                      \
                s0 = _mm256_fmadd_ps(LOAD8(row + i * ESZ), _mm256_loadu_ps(x + i), s0);     \
            float s = hsum8(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));   \
            for (; i < k; i++) s += LOAD1(row + i * ESZ) * x[i];                            \
            y[r] = s;                                                                       \
        }                                                                                   \
    }                                                                                       \
    static void dot_##NAME(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, \
                           float *y) {                                                      \
        NAME##_rows((int)nrows, (const char *)w, ws, a, y, k);                              \
    }

static inline __m256 ld8_f32(const char *p) { return _mm256_loadu_ps((const float *)p); }
static inline float ld1_f32(const char *p) {
    float v;
    __builtin_memcpy(&v, p, 4);
    return v;
}
static inline __m256 ld8_f16(const char *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
static inline float ld1_f16(const char *p) { return h2f(llmk_ld_u16(p)); }
static inline __m256 ld8_bf16(const char *p) {
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
static inline float ld1_bf16(const char *p) { return llmk_bf16_to_fp32(llmk_ld_u16(p)); }

FLOAT_ROWS(f32, 4, ld8_f32, ld1_f32)
FLOAT_ROWS(f16, 2, ld8_f16, ld1_f16)
FLOAT_ROWS(bf16, 2, ld8_bf16, ld1_bf16)

void llmk_codec_register_avx2(llmk_dot_fn *tab, const char **names) {
    tab[LLMK_TYPE_Q4_0] = dot_q4_0, names[LLMK_TYPE_Q4_0] = "q4_0_avx2";
    tab[LLMK_TYPE_Q4_1] = dot_q4_1, names[LLMK_TYPE_Q4_1] = "q4_1_avx2";
    tab[LLMK_TYPE_Q5_0] = dot_q5_0, names[LLMK_TYPE_Q5_0] = "q5_0_avx2";
    tab[LLMK_TYPE_Q5_1] = dot_q5_1, names[LLMK_TYPE_Q5_1] = "q5_1_avx2";
    tab[LLMK_TYPE_Q8_0] = dot_q8_0, names[LLMK_TYPE_Q8_0] = "q8_0_avx2";
    tab[LLMK_TYPE_F32] = dot_f32, names[LLMK_TYPE_F32] = "f32_avx2";
    tab[LLMK_TYPE_F16] = dot_f16, names[LLMK_TYPE_F16] = "f16_avx2";
    tab[LLMK_TYPE_BF16] = dot_bf16, names[LLMK_TYPE_BF16] = "bf16_avx2";
}
