/* AVX2 + FMA + F16C dot kernels for the super-block codecs against Q8_K
 * activations (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_XS) and the 32-element
 * non-linear codecs against Q8_0 activations (IQ4_NL, MXFP4). Built with
 * those flags (the *_avx2.c rule) and registered from
 * the kernel table (src/kernels/kernels.c) only when CPUID reports them.
 *
 * Super-block codecs: per super-block the exact integer sums of _ref (isum,
 * and msum for the codecs with mins) come from u8 x s8 maddubs products per
 * sub-block, weighted by the sub-block scales in one i16 madd each; then the
 * super-block's f32 combination is _ref's own expression in _ref's order.
 * The integer sums are exact and no f32 operation is reordered, so these
 * kernels give _ref's bits exactly (no FMA contraction: see the pragma).
 * Weights with an offset (Q3_K: -4, Q6_K: -32) are dotted as unsigned and
 * the offset taken back through the activation's bsums (sum of 16 qs), which
 * the Q8_K quantizer always fills.
 *
 * IQ4_NL and MXFP4: grid values by a 16-entry byte shuffle, signed x signed
 * products via |w| and sign(a, w) (Q8_0 activations hold [-127, 127]), one
 * f32 FMA per block into 8 lanes per row, reduced once per row: _ref's
 * values up to f32 summation order. Four rows a pass share each activation
 * block; the per-row sequence is the same for a pass of 4 and of 1, so a
 * row's result never depends on its neighbours. */
#include "codec/blocks.h"
#include "codec/codec.h"
#include "codec/half.h"
#include "internal.h"
#include "kernels/kernels.h"

#include <immintrin.h>
#include <string.h>

/* The per-super-block f32 expressions must round exactly like _ref's. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

static inline __m256i ld256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
static inline __m128i ld128(const void *p) { return _mm_loadu_si128((const __m128i *)p); }
static inline float h2f(const void *p) { return _cvtsh_ss(llmk_ld_u16(p)); }
static inline float ldf(const void *p) {
    float v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline uint32_t ld32u(const void *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline uint64_t ld64u(const void *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline int hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}
static inline int hsum_i32x4(__m128i s) {
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}
static inline float hsum_f32(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Sub-block scales as i16: sc holds 8 of them in both 128-bit lanes. The
 * result carries scale lo in every i16 of the low lane and scale hi in the
 * high lane, for a 32-element vector that spans two 16-element sub-blocks
 * (lo == hi for a 32-element sub-block). lo, hi are constants after
 * unrolling, so the shuffle control folds to a constant. */
static inline __m256i scale_pair(__m256i sc, int lo, int hi) {
    __m256i ctl = _mm256_set_m128i(_mm_set1_epi16((short)(0x0100 + 0x0202 * hi)),
                                   _mm_set1_epi16((short)(0x0100 + 0x0202 * lo)));
    return _mm256_shuffle_epi8(sc, ctl);
}

/* sum over pairs of u8 * s8 weighted by i16 scales: maddubs cannot saturate
 * for any codec here (largest pair: 2 * 128 * 127 for Q8_K weights), and
 * madd with scales up to |128| stays far inside i32. */
static inline __m256i mad_scaled(__m256i u, __m256i s, __m256i scale) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), scale);
}

/* 16 bytes of packed nibbles -> 32 u8 in element order (low nibbles are
 * elements 0..15 in the low lane, high nibbles 16..31 in the high lane). */
static inline __m256i nib32(const uint8_t *qs) {
    __m256i v = _mm256_broadcastsi128_si256(ld128(qs));
    return _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_setr_epi64x(0, 0, 4, 4)), _mm256_set1_epi8(0x0f));
}

/* Move bit `from` of every byte to bit `to` and clear the rest (shifts of
 * 16-bit words move no wanted bit across a byte boundary for from, to < 8). */
#define BIT_TO(v, from, to, mask)                                                              \
    _mm256_and_si256((from) >= (to) ? _mm256_srli_epi16(v, (from) >= (to) ? (from) - (to) : 0)         \
                                    : _mm256_slli_epi16(v, (to) > (from) ? (to) - (from) : 0),          \
                     _mm256_set1_epi8((char)(mask)))

/* ---- Q2_K: q in 0..3, 16 sub-blocks of 16, 4-bit scale and min ------------------ */
static void dot_q2_k(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    const llmk_block_q8_k *ab = a;
    const int64_t nb = k / LLMK_QK_K;
    const __m128i m4 = _mm_set1_epi8(0x0f);
    for (int64_t r = 0; r < nrows; r++) {
        const llmk_block_q2_k *wb = (const llmk_block_q2_k *)((const char *)w + (size_t)r * ws);
        float sum = 0;
        for (int64_t b = 0; b < nb; b++) {
            const llmk_block_q2_k *x = &wb[b];
            const llmk_block_q8_k *q8 = &ab[b];
            __m128i raw = ld128(x->scales);
            __m128i sc = _mm_and_si128(raw, m4), mn = _mm_and_si128(_mm_srli_epi16(raw, 4), m4);
            int msum = hsum_i32(_mm256_madd_epi16(_mm256_cvtepu8_epi16(mn), ld256(q8->bsums)));
            __m256i sch[2] = {_mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sc)),
                              _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_srli_si128(sc, 8)))};
            __m256i acc0 = _mm256_setzero_si256(), acc1 = acc0;
            _Pragma("GCC unroll 2") for (int j = 0; j < 2; j++) {
                /* 32 bytes of qs hold elements 128j + 32g + l at bits 2g */
                __m256i q = ld256(x->qs + 32 * j);
                const int8_t *av = q8->qs + 128 * j;
                acc0 = _mm256_add_epi32(acc0, mad_scaled(_mm256_and_si256(q, _mm256_set1_epi8(3)), ld256(av),
                                                         scale_pair(sch[j], 0, 1)));
                acc1 = _mm256_add_epi32(acc1, mad_scaled(BIT_TO(q, 2, 0, 3), ld256(av + 32), scale_pair(sch[j], 2, 3)));
                acc0 = _mm256_add_epi32(acc0, mad_scaled(BIT_TO(q, 4, 0, 3), ld256(av + 64), scale_pair(sch[j], 4, 5)));
                acc1 = _mm256_add_epi32(acc1, mad_scaled(BIT_TO(q, 6, 0, 3), ld256(av + 96), scale_pair(sch[j], 6, 7)));
            }
            int isum = hsum_i32(_mm256_add_epi32(acc0, acc1));
            sum += q8->d * h2f(&x->d) * (float)isum - q8->d * h2f(&x->dmin) * (float)msum;
        }
        y[r] = sum;
    }
}

/* ---- Q3_K: q = 2 low bits + 4 * hmask bit - 4, 16 sub-blocks, 6-bit signed scales - */

/* The 16 scales (6-bit, stored + 32) as signed bytes: low nibbles of bytes
 * 0..7 then their high nibbles, each with 2 bits from bytes 8..11. */
static inline __m128i q3k_scales(const uint8_t *s) {
    uint64_t lo = ld64u(s);
    uint32_t h = ld32u(s + 8);
    uint64_t hi_a = (h & 0x03030303u) | (uint64_t)((h >> 2) & 0x03030303u) << 32;
    uint64_t hi_b = ((h >> 4) & 0x03030303u) | (uint64_t)((h >> 6) & 0x03030303u) << 32;
    uint64_t sa = (lo & 0x0f0f0f0f0f0f0f0full) | hi_a << 4;
    uint64_t sb = ((lo >> 4) & 0x0f0f0f0f0f0f0f0full) | hi_b << 4;
    return _mm_sub_epi8(_mm_set_epi64x((long long)sb, (long long)sa), _mm_set1_epi8(32));
}

static void dot_q3_k(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    const llmk_block_q8_k *ab = a;
    const int64_t nb = k / LLMK_QK_K;
    for (int64_t r = 0; r < nrows; r++) {
        const llmk_block_q3_k *wb = (const llmk_block_q3_k *)((const char *)w + (size_t)r * ws);
        float sum = 0;
        for (int64_t b = 0; b < nb; b++) {
            const llmk_block_q3_k *x = &wb[b];
            const llmk_block_q8_k *q8 = &ab[b];
            __m128i sc = q3k_scales(x->scales);
            /* the -4 offset: 4 * sum_i sc_i * bsums_i */
            __m256i off = _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc), ld256(q8->bsums));
            __m256i sch[2] = {_mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(sc)),
                              _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_srli_si128(sc, 8)))};
            __m256i hm = ld256(x->hmask);
            __m256i acc0 = _mm256_setzero_si256(), acc1 = acc0;
            _Pragma("GCC unroll 2") for (int j = 0; j < 2; j++) {
                __m256i q = ld256(x->qs + 32 * j);
                const int8_t *av = q8->qs + 128 * j;
                /* element 128j + 32g + l: bits 2g of qs byte l, bit 4j + g of hmask byte l */
                __m256i u0 = _mm256_or_si256(_mm256_and_si256(q, _mm256_set1_epi8(3)), BIT_TO(hm, 4 * j + 0, 2, 4));
                __m256i u1 = _mm256_or_si256(BIT_TO(q, 2, 0, 3), BIT_TO(hm, 4 * j + 1, 2, 4));
                __m256i u2 = _mm256_or_si256(BIT_TO(q, 4, 0, 3), BIT_TO(hm, 4 * j + 2, 2, 4));
                __m256i u3 = _mm256_or_si256(BIT_TO(q, 6, 0, 3), BIT_TO(hm, 4 * j + 3, 2, 4));
                acc0 = _mm256_add_epi32(acc0, mad_scaled(u0, ld256(av), scale_pair(sch[j], 0, 1)));
                acc1 = _mm256_add_epi32(acc1, mad_scaled(u1, ld256(av + 32), scale_pair(sch[j], 2, 3)));
                acc0 = _mm256_add_epi32(acc0, mad_scaled(u2, ld256(av + 64), scale_pair(sch[j], 4, 5)));
                acc1 = _mm256_add_epi32(acc1, mad_scaled(u3, ld256(av + 96), scale_pair(sch[j], 6, 7)));
            }
            __m256i tot = _mm256_sub_epi32(_mm256_add_epi32(acc0, acc1), _mm256_slli_epi32(off, 2));
            int isum = hsum_i32(tot);
            sum += q8->d * h2f(&x->d) * (float)isum;
        }
        y[r] = sum;
    }
}

/* ---- Q4_K / Q5_K: 8 sub-blocks of 32, 6-bit scales and mins ------------------------ */

/* Scales (sc) and mins (mn) of the 12-byte packing as 8 u8 each: sub-blocks
 * 0..3 take the low 6 bits of bytes 0..3 / 4..7; 4..7 take a nibble of
 * bytes 8..11 and the top 2 bits of bytes 0..3 / 4..7. */
static inline void k_scales_mins(const uint8_t *s, __m128i *sc, __m128i *mn) {
    uint32_t s0 = ld32u(s), s1 = ld32u(s + 4), s2 = ld32u(s + 8);
    uint32_t sc_lo = s0 & 0x3f3f3f3fu, mn_lo = s1 & 0x3f3f3f3fu;
    uint32_t sc_hi = (s2 & 0x0f0f0f0fu) | ((s0 >> 2) & 0x30303030u);
    uint32_t mn_hi = ((s2 >> 4) & 0x0f0f0f0fu) | ((s1 >> 2) & 0x30303030u);
    *sc = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)sc_hi, (int)sc_lo));
    *mn = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)mn_hi, (int)mn_lo));
}
/* sum over sub-blocks of min * (sum of its 32 activation q) */
static inline int k_minsum(__m128i mn, const int16_t *bsums) {
    __m128i pairs = _mm_hadd_epi16(ld128(bsums), ld128(bsums + 8)); /* |.| <= 32 * 127 */
    return hsum_i32x4(_mm_madd_epi16(mn, pairs));
}

static void dot_q4_k(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    const llmk_block_q8_k *ab = a;
    const int64_t nb = k / LLMK_QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int64_t r = 0; r < nrows; r++) {
        const llmk_block_q4_k *wb = (const llmk_block_q4_k *)((const char *)w + (size_t)r * ws);
        float sum = 0;
        for (int64_t b = 0; b < nb; b++) {
            const llmk_block_q4_k *x = &wb[b];
            const llmk_block_q8_k *q8 = &ab[b];
            __m128i sc8, mn8;
            k_scales_mins(x->scales, &sc8, &mn8);
            int msum = k_minsum(mn8, q8->bsums);
            __m256i sc = _mm256_broadcastsi128_si256(sc8);
            __m256i acc0 = _mm256_setzero_si256(), acc1 = acc0;
            /* qs[32j + l]: low nibble is sub-block 2j, high nibble 2j + 1 */
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
                __m256i q = ld256(x->qs + 32 * j);
                __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                acc0 = _mm256_add_epi32(acc0, mad_scaled(lo, ld256(q8->qs + 64 * j), scale_pair(sc, 2 * j, 2 * j)));
                acc1 = _mm256_add_epi32(acc1, mad_scaled(hi, ld256(q8->qs + 64 * j + 32),
                                                         scale_pair(sc, 2 * j + 1, 2 * j + 1)));
            }
            int isum = hsum_i32(_mm256_add_epi32(acc0, acc1));
            sum += q8->d * h2f(&x->d) * (float)isum - q8->d * h2f(&x->dmin) * (float)msum;
        }
        y[r] = sum;
    }
}

static void dot_q5_k(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    const llmk_block_q8_k *ab = a;
    const int64_t nb = k / LLMK_QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int64_t r = 0; r < nrows; r++) {
        const llmk_block_q5_k *wb = (const llmk_block_q5_k *)((const char *)w + (size_t)r * ws);
        float sum = 0;
        for (int64_t b = 0; b < nb; b++) {
            const llmk_block_q5_k *x = &wb[b];
            const llmk_block_q8_k *q8 = &ab[b];
            __m128i sc8, mn8;
            k_scales_mins(x->scales, &sc8, &mn8);
            int msum = k_minsum(mn8, q8->bsums);
            __m256i sc = _mm256_broadcastsi128_si256(sc8);
            __m256i qh = ld256(x->qh); /* bit sb of byte l: element l of sub-block sb, value bit 4 */
            __m256i acc0 = _mm256_setzero_si256(), acc1 = acc0;
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
                __m256i q = ld256(x->qs + 32 * j);
                __m256i lo = _mm256_or_si256(_mm256_and_si256(q, m4), BIT_TO(qh, 2 * j, 4, 0x10));
                __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), BIT_TO(qh, 2 * j + 1, 4, 0x10));
                acc0 = _mm256_add_epi32(acc0, mad_scaled(lo, ld256(q8->qs + 64 * j), scale_pair(sc, 2 * j, 2 * j)));
                acc1 = _mm256_add_epi32(acc1, mad_scaled(hi, ld256(q8->qs + 64 * j + 32),
                                                         scale_pair(sc, 2 * j + 1, 2 * j + 1)));
            }
            int isum = hsum_i32(_mm256_add_epi32(acc0, acc1));
            sum += q8->d * h2f(&x->d) * (float)isum - q8->d * h2f(&x->dmin) * (float)msum;
        }
        y[r] = sum;
    }
}

/* ---- Q6_K: q = 4 bits of ql + 2 bits of qh - 32, 16 sub-blocks, i8 scales ---------- */
static void dot_q6_k(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    const llmk_block_q8_k *ab = a;
    const int64_t nb = k / LLMK_QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int64_t r = 0; r < nrows; r++) {
        const llmk_block_q6_k *wb = (const llmk_block_q6_k *)((const char *)w + (size_t)r * ws);
        float sum = 0;
        for (int64_t b = 0; b < nb; b++) {
            const llmk_block_q6_k *x = &wb[b];
            const llmk_block_q8_k *q8 = &ab[b];
            __m128i sc = ld128(x->scales);
            /* the -32 offset: 32 * sum_i sc_i * bsums_i */
            __m256i off = _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc), ld256(q8->bsums));
            __m256i sch[2] = {_mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(sc)),
                              _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_srli_si128(sc, 8)))};
            __m256i acc0 = _mm256_setzero_si256(), acc1 = acc0;
            _Pragma("GCC unroll 2") for (int j = 0; j < 2; j++) {
                /* element 128j + 32g + l: nibble g/2 of ql[64j + 32(g%2) + l], bits 2g of qh[32j + l] */
                __m256i l0 = ld256(x->ql + 64 * j), l1 = ld256(x->ql + 64 * j + 32), h = ld256(x->qh + 32 * j);
                const int8_t *av = q8->qs + 128 * j;
                __m256i u0 = _mm256_or_si256(_mm256_and_si256(l0, m4), BIT_TO(h, 0, 4, 0x30));
                __m256i u1 = _mm256_or_si256(_mm256_and_si256(l1, m4), BIT_TO(h, 2, 4, 0x30));
                __m256i u2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), BIT_TO(h, 4, 4, 0x30));
                __m256i u3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), BIT_TO(h, 6, 4, 0x30));
                acc0 = _mm256_add_epi32(acc0, mad_scaled(u0, ld256(av), scale_pair(sch[j], 0, 1)));
                acc1 = _mm256_add_epi32(acc1, mad_scaled(u1, ld256(av + 32), scale_pair(sch[j], 2, 3)));
                acc0 = _mm256_add_epi32(acc0, mad_scaled(u2, ld256(av + 64), scale_pair(sch[j], 4, 5)));
                acc1 = _mm256_add_epi32(acc1, mad_scaled(u3, ld256(av + 96), scale_pair(sch[j], 6, 7)));
            }
            __m256i tot = _mm256_sub_epi32(_mm256_add_epi32(acc0, acc1), _mm256_slli_epi32(off, 5));
            int isum = hsum_i32(tot);
            sum += q8->d * h2f(&x->d) * (float)isum;
        }
        y[r] = sum;
    }
}

/* ---- Q8_K weights: signed x signed ------------------------------------------------- */
static void dot_q8_k(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    const llmk_block_q8_k *ab = a;
    const int64_t nb = k / LLMK_QK_K;
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t r = 0; r < nrows; r++) {
        const llmk_block_q8_k *wb = (const llmk_block_q8_k *)((const char *)w + (size_t)r * ws);
        float sum = 0;
        for (int64_t b = 0; b < nb; b++) {
            const llmk_block_q8_k *x = &wb[b];
            const llmk_block_q8_k *q8 = &ab[b];
            __m256i acc0 = _mm256_setzero_si256(), acc1 = acc0;
            /* |w| as u8 (-128 becomes 128) against sign(a, w); a never holds -128 */
            _Pragma("GCC unroll 4") for (int j = 0; j < 8; j += 2) {
                __m256i w0 = ld256(x->qs + 32 * j), w1 = ld256(x->qs + 32 * j + 32);
                acc0 = _mm256_add_epi32(acc0, mad_scaled(_mm256_sign_epi8(w0, w0),
                                                         _mm256_sign_epi8(ld256(q8->qs + 32 * j), w0), ones));
                acc1 = _mm256_add_epi32(acc1, mad_scaled(_mm256_sign_epi8(w1, w1),
                                                         _mm256_sign_epi8(ld256(q8->qs + 32 * j + 32), w1), ones));
            }
            int isum = hsum_i32(_mm256_add_epi32(acc0, acc1));
            sum += ldf(&x->d) * q8->d * (float)isum;
        }
        y[r] = sum;
    }
}

/* ---- IQ4_XS: 8 sub-blocks of 32 on the IQ4_NL grid, 6-bit signed scales ------------ */

/* The 8 sub-block scales as i16: a low nibble of scales_l and 2 bits of
 * scales_h each, minus 32; the nibbles and bit pairs are spread to one byte
 * per sub-block with shifts and masks in 64-bit integers. */
static inline __m128i iq4xs_scales(uint16_t sh, const uint8_t *sl) {
    uint64_t n = ld32u(sl);
    n = (n | n << 16) & 0x0000ffff0000ffffull;
    n = (n | n << 8) & 0x00ff00ff00ff00ffull; /* byte b of sl at byte 2b */
    n = (n | n << 4) & 0x0f0f0f0f0f0f0f0full; /* its low nibble at 2b, high at 2b + 1 */
    uint64_t h = (uint64_t)(sh & 0xff) | (uint64_t)(sh >> 8) << 32;
    h = (h | h << 12) & 0x000f000f000f000full;
    h = (h | h << 6) & 0x0303030303030303ull; /* bit pair ib at byte ib */
    __m128i v = _mm_sub_epi8(_mm_cvtsi64_si128((long long)(n | h << 4)), _mm_set1_epi8(32));
    return _mm_cvtepi8_epi16(v);
}

static void dot_iq4_xs(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    const llmk_block_q8_k *ab = a;
    const int64_t nb = k / LLMK_QK_K;
    const __m256i grid = _mm256_broadcastsi128_si256(ld128(llmk_iq4nl_values));
    for (int64_t r = 0; r < nrows; r++) {
        const llmk_block_iq4_xs *wb = (const llmk_block_iq4_xs *)((const char *)w + (size_t)r * ws);
        float sum = 0;
        for (int64_t b = 0; b < nb; b++) {
            const llmk_block_iq4_xs *x = &wb[b];
            const llmk_block_q8_k *q8 = &ab[b];
            __m256i sc = _mm256_broadcastsi128_si256(iq4xs_scales(llmk_ld_u16(&x->scales_h), x->scales_l));
            __m256i acc0 = _mm256_setzero_si256(), acc1 = acc0;
            _Pragma("GCC unroll 8") for (int ib = 0; ib < 8; ib++) {
                __m256i v = _mm256_shuffle_epi8(grid, nib32(x->qs + 16 * ib));
                __m256i p = mad_scaled(_mm256_sign_epi8(v, v), _mm256_sign_epi8(ld256(q8->qs + 32 * ib), v),
                                       scale_pair(sc, ib, ib));
                if (ib & 1) acc1 = _mm256_add_epi32(acc1, p);
                else acc0 = _mm256_add_epi32(acc0, p);
            }
            int isum = hsum_i32(_mm256_add_epi32(acc0, acc1));
            sum += q8->d * h2f(&x->d) * (float)isum;
        }
        y[r] = sum;
    }
}

/* ---- IQ4_NL and MXFP4 against Q8_0: 32-element blocks on a 16-value grid ----------- */

/* R rows (ws bytes apart) of 32-element blocks of BSZ bytes whose nibbles
 * start at byte QOFF, with f32 block scale SCALE(block pointer). */
#define DEFINE_GRID_ROWS(NAME, BSZ, QOFF, SCALE, GRID)                                         \
    static inline void NAME##_rows(int R, const char *w, size_t ws, const llmk_block_q8_0 *ab,  \
                                   int64_t nb, float *y) {                                     \
        const __m256i grid = _mm256_broadcastsi128_si256(ld128(GRID));                         \
        const __m256i ones = _mm256_set1_epi16(1);                                             \
        __m256 acc[4];                                                                         \
        for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();                              \
        for (int64_t b = 0; b < nb; b++) {                                                     \
            __m256i av = ld256(ab[b].qs);                                                      \
            float da = h2f(&ab[b].d);                                                          \
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                              \
                const uint8_t *blk = (const uint8_t *)w + (size_t)r * ws + (size_t)b * (BSZ);    \
                __m256i v = _mm256_shuffle_epi8(grid, nib32(blk + (QOFF)));                    \
                __m256i p = mad_scaled(_mm256_sign_epi8(v, v), _mm256_sign_epi8(av, v), ones);  \
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(SCALE(blk) * da), acc[r]); \
            }                                                                                  \
        }                                                                                      \
        for (int r = 0; r < R; r++) y[r] = hsum_f32(acc[r]);                                   \
    }                                                                                          \
    static void dot_##NAME(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a,   \
                           float *y) {                                                         \
        int64_t r = 0, nb = k / LLMK_QK;                                                       \
        for (; r + 4 <= nrows; r += 4) NAME##_rows(4, (const char *)w + (size_t)r * ws, ws, a, nb, y + r); \
        for (; r < nrows; r++) NAME##_rows(1, (const char *)w + (size_t)r * ws, ws, a, nb, y + r); \
    }

#define IQ4NL_SCALE(blk) h2f(blk)
#define MXFP4_SCALE(blk) llmk_e8m0_half_to_fp32((blk)[0])
DEFINE_GRID_ROWS(iq4_nl, sizeof(llmk_block_iq4_nl), 2, IQ4NL_SCALE, llmk_iq4nl_values)
DEFINE_GRID_ROWS(mxfp4, sizeof(llmk_block_mxfp4), 1, MXFP4_SCALE, llmk_mxfp4_values)

void llmk_kernels_dot_kq_avx2(struct llmk_type_kernels *k) {
    k[LLMK_TYPE_Q2_K].vec_dot = dot_q2_k, k[LLMK_TYPE_Q2_K].vec_dot_name = "q2_k_avx2";
    k[LLMK_TYPE_Q3_K].vec_dot = dot_q3_k, k[LLMK_TYPE_Q3_K].vec_dot_name = "q3_k_avx2";
    k[LLMK_TYPE_Q4_K].vec_dot = dot_q4_k, k[LLMK_TYPE_Q4_K].vec_dot_name = "q4_k_avx2";
    k[LLMK_TYPE_Q5_K].vec_dot = dot_q5_k, k[LLMK_TYPE_Q5_K].vec_dot_name = "q5_k_avx2";
    k[LLMK_TYPE_Q6_K].vec_dot = dot_q6_k, k[LLMK_TYPE_Q6_K].vec_dot_name = "q6_k_avx2";
    k[LLMK_TYPE_Q8_K].vec_dot = dot_q8_k, k[LLMK_TYPE_Q8_K].vec_dot_name = "q8_k_avx2";
    k[LLMK_TYPE_IQ4_XS].vec_dot = dot_iq4_xs, k[LLMK_TYPE_IQ4_XS].vec_dot_name = "iq4_xs_avx2";
    k[LLMK_TYPE_IQ4_NL].vec_dot = dot_iq4_nl, k[LLMK_TYPE_IQ4_NL].vec_dot_name = "iq4_nl_avx2";
    k[LLMK_TYPE_MXFP4].vec_dot = dot_mxfp4, k[LLMK_TYPE_MXFP4].vec_dot_name = "mxfp4_avx2";
}
