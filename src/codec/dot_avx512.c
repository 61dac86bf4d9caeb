/* AVX-512 dot kernels (F/BW/VL/DQ; VNNI used when present). Two 32-element
 * blocks per 512-bit step, each block's integer sum reduced inside its own
 * 256-bit half, then scaled by its own (d_w * d_a): the integer sums are the
 * _ref values exactly, the f32 accumulation order is this kernel's own.
 * Rows are processed 4 at a time with the same per-row sequence as the tail,
 * so a row's result does not depend on its neighbours. Registered only when
 * CPUID and the OS report AVX-512 (and VNNI for the _vnni variants). */
#include "codec/blocks.h"
#include "codec/codec.h"
#include "codec/half.h"
#include "internal.h"

#include <immintrin.h>

static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

static inline float hsum16(__m512 v) { return _mm512_reduce_add_ps(v); }

static inline __m256i unpack_nib(const uint8_t *qs) {
    __m128i v = _mm_loadu_si128((const __m128i *)qs);
    __m128i m = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

/* u8 x s8 sums in 16 int32 lanes: lanes 0..7 from block 0, 8..15 from block 1 */
static inline __m512i dot_us_vnni(__m512i u, __m512i s) {
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, s);
}
static inline __m512i dot_us_plain(__m512i u, __m512i s) {
    return _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1));
}

/* lanes 0..7 scaled by s0, 8..15 by s1 */
static inline __m512 two_scales(float s0, float s1) {
    return _mm512_insertf32x8(_mm512_set1_ps(s0), _mm256_set1_ps(s1), 1);
}

#define Q4_1_KERNEL(SUFFIX, DOTUS)                                                              \
    static inline void q4_1_rows_##SUFFIX(int R, const char *w, size_t ws, const void *a,      \
                                          float *y, int64_t k) {                               \
        const llmk_block_q8_1 *ab = a;                                                         \
        int64_t nb = k / LLMK_QK;                                                              \
        __m512 acc[4];                                                                         \
        float macc[4];                                                                         \
        for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps(), macc[r] = 0;                 \
        int64_t b = 0;                                                                         \
        for (; b + 2 <= nb; b += 2) {                                                          \
            __m512i av = _mm512_inserti64x4(                                                   \
                _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)ab[b].qs)),         \
                _mm256_loadu_si256((const __m256i *)ab[b + 1].qs), 1);                         \
            float da0 = h2f(ab[b].d), da1 = h2f(ab[b + 1].d);                                  \
            float sa0 = h2f(ab[b].s), sa1 = h2f(ab[b + 1].s);                                  \
            for (int r = 0; r < R; r++) {                                                      \
                const llmk_block_q4_1 *wb = (const llmk_block_q4_1 *)(w + (size_t)r * ws) + b; \
                __m512i wv = _mm512_inserti64x4(_mm512_castsi256_si512(unpack_nib(wb[0].qs)), \
                                                unpack_nib(wb[1].qs), 1);                      \
                __m512 p = _mm512_cvtepi32_ps(DOTUS(wv, av));                                  \
                acc[r] = _mm512_fmadd_ps(p, two_scales(h2f(wb[0].d) * da0, h2f(wb[1].d) * da1), acc[r]); \
                macc[r] += h2f(wb[0].m) * sa0;                                                 \
                macc[r] += h2f(wb[1].m) * sa1;                                                 \
            }                                                                                  \
        }                                                                                      \
        for (; b < nb; b++) { /* odd tail block: upper half zero */                           \
            __m512i av = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)ab[b].qs)); \
            av = _mm512_inserti64x4(av, _mm256_setzero_si256(), 1);                             \
            float da = h2f(ab[b].d), sa = h2f(ab[b].s);                                        \
            for (int r = 0; r < R; r++) {                                                      \
                const llmk_block_q4_1 *wb = (const llmk_block_q4_1 *)(w + (size_t)r * ws) + b; \
                __m512i wv = _mm512_inserti64x4(_mm512_castsi256_si512(unpack_nib(wb->qs)),   \
                                                _mm256_setzero_si256(), 1);                    \
                __m512 p = _mm512_cvtepi32_ps(DOTUS(wv, av));                                  \
                acc[r] = _mm512_fmadd_ps(p, two_scales(h2f(wb->d) * da, 0.0f), acc[r]);        \
                macc[r] += h2f(wb->m) * sa;                                                    \
            }                                                                                  \
        }                                                                                      \
        for (int r = 0; r < R; r++) y[r] = hsum16(acc[r]) + macc[r];                           \
    }                                                                                          \
    static void dot_q4_1_##SUFFIX(int64_t k, const void *w, size_t ws, int64_t nrows,         \
                                  const void *a, float *y) {                                   \
        int64_t r = 0;                                                                         \
        for (; r + 4 <= nrows; r += 4) q4_1_rows_##SUFFIX(4, (const char *)w + (size_t)r * ws, ws, a, y + r, k); \
        for (; r < nrows; r++) q4_1_rows_##SUFFIX(1, (const char *)w + (size_t)r * ws, ws, a, y + r, k); \
    }

/* Q8_0 x Q8_0: signed x signed through |w| and sign(a, w) (a never -128). */
#define Q8_0_KERNEL(SUFFIX, DOTUS)                                                              \
    static inline __m512i q8_pair_##SUFFIX(__m512i wv, __m512i av) {                           \
        __m512i aw = _mm512_abs_epi8(wv);                                                      \
        __mmask64 neg = _mm512_movepi8_mask(wv);                                               \
        __m512i sa = _mm512_mask_sub_epi8(av, neg, _mm512_setzero_si512(), av);                \
        return DOTUS(aw, sa);                                                                  \
    }                                                                                          \
    static inline void q8_0_rows_##SUFFIX(int R, const char *w, size_t ws, const void *a,      \
                                          float *y, int64_t k) {                               \
        const llmk_block_q8_0 *ab = a;                                                         \
        int64_t nb = k / LLMK_QK;                                                              \
        __m512 acc[4];                                                                         \
        for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();                              \
        int64_t b = 0;                                                                         \
        for (; b + 2 <= nb; b += 2) {                                                          \
            __m512i av = _mm512_inserti64x4(                                                   \
                _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)ab[b].qs)),         \
                _mm256_loadu_si256((const __m256i *)ab[b + 1].qs), 1);                         \
            float da0 = h2f(ab[b].d), da1 = h2f(ab[b + 1].d);                                  \
            for (int r = 0; r < R; r++) {                                                      \
                const llmk_block_q8_0 *wb = (const llmk_block_q8_0 *)(w + (size_t)r * ws) + b; \
                __m512i wv = _mm512_inserti64x4(                                               \
                    _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)wb[0].qs)),     \
                    _mm256_loadu_si256((const __m256i *)wb[1].qs), 1);                         \
                __m512 p = _mm512_cvtepi32_ps(q8_pair_##SUFFIX(wv, av));                       \
                acc[r] = _mm512_fmadd_ps(p, two_scales(h2f(wb[0].d) * da0, h2f(wb[1].d) * da1), acc[r]); \
            }                                                                                  \
        }                                                                                      \
        for (; b < nb; b++) {                                                                  \
            __m512i av = _mm512_inserti64x4(                                                   \
                _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)ab[b].qs)),         \
                _mm256_setzero_si256(), 1);                                                    \
            float da = h2f(ab[b].d);                                                           \
            for (int r = 0; r < R; r++) {                                                      \
                const llmk_block_q8_0 *wb = (const llmk_block_q8_0 *)(w + (size_t)r * ws) + b; \
                __m512i wv = _mm512_inserti64x4(                                               \
                    _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)wb->qs)),       \
                    _mm256_setzero_si256(), 1);                                                \
                __m512 p = _mm512_cvtepi32_ps(q8_pair_##SUFFIX(wv, av));                       \
                acc[r] = _mm512_fmadd_ps(p, two_scales(h2f(wb->d) * da, 0.0f), acc[r]);        \
            }                                                                                  \
        }                                                                                      \
        for (int r = 0; r < R; r++) y[r] = hsum16(acc[r]);                                     \
    }                                                                                          \
    static void dot_q8_0_##SUFFIX(int64_t k, const void *w, size_t ws, int64_t nrows,         \
                                  const void *a, float *y) {                                   \
        int64_t r = 0;                                                                         \
        for (; r + 4 <= nrows; r += 4) q8_0_rows_##SUFFIX(4, (const char *)w + (size_t)r * ws, ws, a, y + r, k); \
        for (; r < nrows; r++) q8_0_rows_##SUFFIX(1, (const char *)w + (size_t)r * ws, ws, a, y + r, k); \
    }

Q4_1_KERNEL(avx512, dot_us_plain)
Q4_1_KERNEL(avx512vnni, dot_us_vnni)
Q8_0_KERNEL(avx512, dot_us_plain)
Q8_0_KERNEL(avx512vnni, dot_us_vnni)

void llmk_codec_register_avx512(llmk_dot_fn *tab, const char **names, unsigned cpu) {
    if (cpu & LLMK_CPU_AVX512_VNNI) {
        tab[LLMK_TYPE_Q4_1] = dot_q4_1_avx512vnni, names[LLMK_TYPE_Q4_1] = "q4_1_avx512vnni";
        tab[LLMK_TYPE_Q8_0] = dot_q8_0_avx512vnni, names[LLMK_TYPE_Q8_0] = "q8_0_avx512vnni";
    } else {
        tab[LLMK_TYPE_Q4_1] = dot_q4_1_avx512, names[LLMK_TYPE_Q4_1] = "q4_1_avx512";
        tab[LLMK_TYPE_Q8_0] = dot_q8_0_avx512, names[LLMK_TYPE_Q8_0] = "q8_0_avx512";
    }
}
