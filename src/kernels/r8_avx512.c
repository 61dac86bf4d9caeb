/* AVX-512 VNNI kernels on r8-repacked weights: r8_avx2.c's products, two
 * 8-row groups per 512-bit register (one in each 256-bit half), the int16
 * pairs multiplied and accumulated by vpdpwssd.
 *
 * Same bits as the AVX2 kernels and the reference (r8.h): a block's integer
 * sum is exact in int32 whatever the order of its adds, and every f32
 * operation is the AVX2 kernel's, lane for lane. Only the pairing differs:
 * the decode walk (one activation row) pairs its runs 0+1 and 2+3, which sit
 * at the same block index and so share the broadcast activations; prefill
 * (several activation rows) pairs neighbouring groups. An odd one out goes
 * through the pair code with its record twice and the upper half dropped. */
#include "kernels/r8.h"
/* Eight activation rows per pass over a group pair: with 32 registers their
 * 24 accumulators still fit, and each unpacked weight register feeds twice
 * as many vpdpwssd as at four (pp512 1255 -> 1379 t/s, 4 pairs). */
#define R8_NA_MAX 8
/* MX4 records (MXFP4's portable form, LLMK_RECORDS=portable) go to the
 * AVX2 kernel, the same bits; this file reads MXFP4 as MXC. */
#define R8_HAS_MX4 0
#define R8_HAS_COMPACT 1
#include "kernels/r8_x86.h"

#include "codec/blocks.h"

#include <immintrin.h>
#include <string.h>

/* Block b of two 8-row group records ra, rb x activation rows q/d[0..NA),
 * into acc[0..NA) (lanes 0-7: ra's rows, 8-15: rb's). F32S: 1, Q4S's f32
 * scales and offsets before the nibbles, where Q4_1 (0) has f16 ones; 2,
 * Q4K's, the same values from its header; 3, Q40's (r8.h). */
INLINE void block_q4_1(int NA, int F32S, const unsigned char *ra, const unsigned char *rb, const int16_t *const *q,
                       const float *const *d, int64_t b, int64_t nb, const float *pre, __m512 *acc) {
    const int nib = F32S == 1 ? 64 : F32S >= 2 ? 0 : 32;
    /* Nibbles 2 and 3 of each u16 lane are masked in place, not shifted
     * down: they multiply as 256 w, summed in n23 apart from n01 and scaled
     * back by an exact arithmetic shift at the end. One shift per chunk
     * instead of three (the shifts and vpdpwssd share one port). No
     * overflow: |n23| <= 16 elements x 15 x 256 x 32767 < 2^31. */
    const __m512i lo = _mm512_set1_epi16(0x000f), hi = _mm512_set1_epi16(0x0f00);
    __m512i n01[R8_NA_MAX], n23[R8_NA_MAX];
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++) n01[i] = n23[i] = _mm512_setzero_si512();
    _Pragma("GCC unroll 4")
    for (int c = 0; c < 4; c++) {
        __m512i x = load_pair256(ra + nib + 32 * c, rb + nib + 32 * c), x4 = _mm512_srli_epi16(x, 4);
        __m512i p0 = _mm512_and_si512(x, lo), p1 = _mm512_and_si512(x4, lo);
        __m512i p2 = _mm512_and_si512(x, hi), p3 = _mm512_and_si512(x4, hi);
        _Pragma("GCC unroll 8")
        for (int i = 0; i < NA; i++) {
            const int16_t *qa = q[i] + b * LLMK_QK + 8 * c;
            n01[i] = _mm512_dpwssd_epi32(n01[i], p0, bcast32(qa));
            n01[i] = _mm512_dpwssd_epi32(n01[i], p1, bcast32(qa + 2));
            n23[i] = _mm512_dpwssd_epi32(n23[i], p2, bcast32(qa + 4));
            n23[i] = _mm512_dpwssd_epi32(n23[i], p3, bcast32(qa + 6));
        }
    }
    __m512 dw, mw;
    if (F32S == 2) compact_scales(LLMK_R8_Q4K, ra, rb, b, pre, &dw, &mw);
    else if (F32S == 3) dw = f16_pair(ra, rb, 128), mw = q40_min(dw);
    else dw = F32S ? f32_pair(ra, rb, 0) : f16_pair(ra, rb, 0), mw = F32S ? f32_pair(ra, rb, 32) : f16_pair(ra, rb, 16);
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++) {
        __m512i n = _mm512_add_epi32(n01[i], _mm512_srai_epi32(n23[i], 8));
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(n), _mm512_mul_ps(dw, _mm512_set1_ps(d[i][b])), acc[i]);
        acc[i] = _mm512_fmadd_ps(mw, _mm512_set1_ps(d[i][nb + b]), acc[i]);
    }
}

INLINE void block_q8_0(int NA, const unsigned char *ra, const unsigned char *rb, const int16_t *const *q,
                       const float *const *d, int64_t b, __m512 *acc) {
    __m512i n[R8_NA_MAX];
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++) n[i] = _mm512_setzero_si512();
    _Pragma("GCC unroll 4")
    for (int p = 0; p < 16; p++) {
        __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_load_si128((const __m128i *)(ra + 16 * p))),
                                            _mm_load_si128((const __m128i *)(rb + 16 * p)), 1);
        __m512i w = _mm512_cvtepi8_epi16(h);
        _Pragma("GCC unroll 8")
        for (int i = 0; i < NA; i++) n[i] = _mm512_dpwssd_epi32(n[i], w, bcast32(q[i] + b * LLMK_QK + 2 * p));
    }
    __m512 dw = f16_pair(ra, rb, 256);
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++)
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(n[i]), _mm512_mul_ps(dw, _mm512_set1_ps(d[i][b])), acc[i]);
}

/* NL4 (IQ4_NL, MODE 0): Q8_0's products, each 16-byte chunk of grid
 * indices looked up into pairs p and p + 8; XS4 (IQ4_XS, MODE 1): the same
 * lookups into Q8S's two half sums (pairs 0-7 are elements 0..15) and the
 * Q8K header's scales; MXC (MXFP4, MODE 2): NL4's on MXFP4's grid, with
 * the E8M0 scales. */
INLINE void block_nl4(int NA, int MODE, const unsigned char *ra, const unsigned char *rb, const int16_t *const *q,
                      const float *const *d, int64_t b, int64_t nb, const float *pre, __m512 *acc) {
    const int XS = MODE == 1;
    __m512i n[2][R8_NA_MAX];
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++) n[0][i] = n[1][i] = _mm512_setzero_si512();
    _Pragma("GCC unroll 4")
    for (int p = 0; p < 8; p += 2) { /* chunks p and p + 1 of both records: one register */
        __m512i x = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_inserti128_si256(
                _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(ra + 16 * p))),
                _mm_loadu_si128((const __m128i *)(const void *)(rb + 16 * p)), 1)),
            _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(ra + 16 * p + 16))),
                                    _mm_loadu_si128((const __m128i *)(const void *)(rb + 16 * p + 16)), 1),
            1);
        __m512i lo, hi;
        grid_values(MODE == 2 ? llmk_mxfp4_values : llmk_iq4nl_values, x, &lo, &hi);
        __m512i w[4] = {_mm512_cvtepi8_epi16(_mm512_castsi512_si256(lo)), _mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(lo, 1)),
                        _mm512_cvtepi8_epi16(_mm512_castsi512_si256(hi)), _mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(hi, 1))};
        const int pair[4] = {p, p + 1, p + 8, p + 9};
        _Pragma("GCC unroll 4")
        for (int c = 0; c < 4; c++)
            _Pragma("GCC unroll 8")
            for (int i = 0; i < NA; i++)
                n[XS && c >= 2][i] = _mm512_dpwssd_epi32(n[XS && c >= 2][i], w[c], bcast32(q[i] + b * LLMK_QK + 2 * pair[c]));
    }
    if (!XS) {
        __m512 dw = MODE == 2 ? e8m0_pair(ra, rb, 128) : f16_pair(ra, rb, 128);
        _Pragma("GCC unroll 8")
        for (int i = 0; i < NA; i++)
            acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(n[0][i]), _mm512_mul_ps(dw, _mm512_set1_ps(d[i][b])), acc[i]);
        return;
    }
    __m512 s0, s1; /* then the Q8K header's epilogue: Q8S's with m = +0 */
    compact_scales(LLMK_R8_XS4, ra, rb, b, pre, &s0, &s1);
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++) {
        __m512 da = _mm512_set1_ps(d[i][b]);
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(n[0][i]), _mm512_mul_ps(s0, da), acc[i]);
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(n[1][i]), _mm512_mul_ps(s1, da), acc[i]);
        acc[i] = _mm512_fmadd_ps(_mm512_setzero_ps(), _mm512_set1_ps(d[i][nb + b]), acc[i]);
    }
}

/* Q8S: Q8_0's products, elements 0..15 and 16..31 summed apart, each half
 * with its f32 scales, then the f32 offsets. TWO: 1, Q8S2 (an offset per
 * half); 3, Q8M (one scale and the offset from its header). */
INLINE void block_q8s(int NA, int TWO, const unsigned char *ra, const unsigned char *rb, const int16_t *const *q,
                      const float *const *d, int64_t b, int64_t nb, const float *pre, __m512 *acc) {
    __m512i n[2][R8_NA_MAX];
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++) n[0][i] = n[1][i] = _mm512_setzero_si512();
    _Pragma("GCC unroll 16")
    for (int p = 0; p < 16; p++) {
        __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_load_si128((const __m128i *)(ra + 16 * p))),
                                            _mm_load_si128((const __m128i *)(rb + 16 * p)), 1);
        __m512i w = _mm512_cvtepi8_epi16(h);
        _Pragma("GCC unroll 8")
        for (int i = 0; i < NA; i++)
            n[p / 8][i] = _mm512_dpwssd_epi32(n[p / 8][i], w, bcast32(q[i] + b * LLMK_QK + 2 * p));
    }
    __m512 s0, s1, mw;
    if (TWO == 3) compact_scales(LLMK_R8_Q8M, ra, rb, b, pre, &s0, &mw), s1 = s0;
    else s0 = f32_pair(ra, rb, 256), s1 = f32_pair(ra, rb, 288), mw = f32_pair(ra, rb, 320);
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++) {
        __m512 da = _mm512_set1_ps(d[i][b]);
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(n[0][i]), _mm512_mul_ps(s0, da), acc[i]);
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(n[1][i]), _mm512_mul_ps(s1, da), acc[i]);
        if (TWO != 1) {
            acc[i] = _mm512_fmadd_ps(mw, _mm512_set1_ps(d[i][nb + b]), acc[i]);
        } else { /* Q8S2: an offset per half, with the activation's half sums */
            acc[i] = _mm512_fmadd_ps(mw, _mm512_set1_ps(d[i][2 * nb + 2 * b]), acc[i]);
            acc[i] = _mm512_fmadd_ps(f32_pair(ra, rb, 352), _mm512_set1_ps(d[i][2 * nb + 2 * b + 1]), acc[i]);
        }
    }
}

INLINE void block_any(int NA, int L, const unsigned char *ra, const unsigned char *rb, const int16_t *const *q,
                      const float *const *d, int64_t b, int64_t nb, const float *pre, __m512 *acc) {
    if (L == LLMK_R8_Q4_1) block_q4_1(NA, 0, ra, rb, q, d, b, nb, NULL, acc);
    else if (L == LLMK_R8_Q4S) block_q4_1(NA, 1, ra, rb, q, d, b, nb, NULL, acc);
    else if (L == LLMK_R8_Q4K) block_q4_1(NA, 2, ra, rb, q, d, b, nb, pre, acc);
    else if (L == LLMK_R8_Q40) block_q4_1(NA, 3, ra, rb, q, d, b, nb, NULL, acc);
    else if (L == LLMK_R8_Q8S) block_q8s(NA, 0, ra, rb, q, d, b, nb, NULL, acc);
    else if (L == LLMK_R8_Q8M) block_q8s(NA, 3, ra, rb, q, d, b, nb, pre, acc);
    else if (L == LLMK_R8_Q8S2) block_q8s(NA, 1, ra, rb, q, d, b, nb, NULL, acc);
    else if (L == LLMK_R8_NL4) block_nl4(NA, 0, ra, rb, q, d, b, nb, NULL, acc);
    else if (L == LLMK_R8_XS4) block_nl4(NA, 1, ra, rb, q, d, b, nb, pre, acc);
    else if (L == LLMK_R8_MXC) block_nl4(NA, 2, ra, rb, q, d, b, nb, NULL, acc);
    else if (r8_expands(L)) { /* the portable form's products on the records they expand to */
        _Alignas(64) unsigned char ea[384], eb[384];
        const unsigned char *xb = r8_expand_pair(L, ra, rb, b, ea, eb);
        if (L == LLMK_R8_Q5C) block_q8_0(NA, ea, xb, q, d, b, acc);
        else block_q8s(NA, L == LLMK_R8_Q2C, ea, xb, q, d, b, nb, NULL, acc);
    }
    else block_q8_0(NA, ra, rb, q, d, b, acc);
}

#define R8_ACT_Q int16_t
#define R8_SPLIT_ACT split_act
#include "kernels/r8_walk_avx512.h"

#include "kernels/r8_entry.h"

void llmk_gemm_r8_a16_avx512(const struct llmk_r8 *w, int64_t r0, int64_t r1, const void *act, size_t as, int64_t m, float *y,
                             size_t ys, void *scratch, size_t scratch_bytes) {
    if (w->layout == LLMK_R8_MX4) llmk_gemm_r8_a16_avx2(w, r0, r1, act, as, m, y, ys, scratch, scratch_bytes);
    else r8_mm(w, r0, r1, act, as, m, y, ys, scratch, scratch_bytes);
}
