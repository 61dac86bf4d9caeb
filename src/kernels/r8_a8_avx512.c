/* AVX-512 VNNI products of r8 records with 8-bit activation rows (a8.h):
 * r8_a8_avx2.c's arithmetic, two 8-row groups per 512-bit register (one in
 * each 256-bit half, r8_walk_avx512.h's walks), the byte products summed by
 * vpdpbusd straight into int32: four products per lane and instruction,
 * where the AVX2 kernel needs vpmaddubsw, an int16 add and a final
 * vpmaddwd, and no int16 bound on the sums.
 *
 * Same bits as the AVX2 kernel and the reference: a block's (or half
 * block's) integer sum is exact in int32 whatever the order of its adds,
 * and the f32 steps are the AVX2 kernel's, lane for lane. */
#include "kernels/a8.h"
#include "kernels/r8.h"
#define R8_NA_MAX 8 /* as r8_avx512.c: 8 rows' accumulators fit the 32 registers */
#define R8_HAS_MX4 0
#define R8_HAS_COMPACT 1
#include "kernels/r8_x86.h"

#include "codec/blocks.h"
#include "internal.h"

#include <immintrin.h>
#include <string.h>

/* acc[i] += n[i] x (dw x the activation's scale) and, with mw, mw x its
 * offset term: the AVX2 kernel's two fmas. */
INLINE void scale_into(int NA, const __m512i *n, __m512 dw, const __m512 *mw, const float *const *d, int64_t b,
                       int64_t nb, __m512 *acc) {
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++) {
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(n[i]), _mm512_mul_ps(dw, _mm512_set1_ps(d[i][b])), acc[i]);
        if (mw) acc[i] = _mm512_fmadd_ps(*mw, _mm512_set1_ps(d[i][nb + b]), acc[i]);
    }
}

/* Block b of two Q4_1 (F32S 0), Q4S (1) or Q4K (2) records: each 32-byte
 * chunk of nibbles, masked and shifted once, gives row r's elements
 * {0,4,1,5} and {2,6,3,7} of the chunk's 8 in 32-bit lane r, the
 * activation's order. */
INLINE void block_q4(int NA, int F32S, const unsigned char *ra, const unsigned char *rb, const int8_t *const *q,
                     const float *const *d, int64_t b, int64_t nb, const float *pre, __m512 *acc) {
    const int nib = F32S == 1 ? 64 : F32S >= 2 ? 0 : 32;
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512i n[R8_NA_MAX];
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++) n[i] = _mm512_setzero_si512();
    _Pragma("GCC unroll 4")
    for (int c = 0; c < 4; c++) {
        __m512i x = load_pair256(ra + nib + 32 * c, rb + nib + 32 * c);
        __m512i lo = _mm512_and_si512(x, m4), hi = _mm512_and_si512(_mm512_srli_epi16(x, 4), m4);
        _Pragma("GCC unroll 8")
        for (int i = 0; i < NA; i++) {
            const int8_t *qa = q[i] + b * LLMK_QK + 8 * c;
            n[i] = _mm512_dpbusd_epi32(n[i], lo, bcast32(qa));
            n[i] = _mm512_dpbusd_epi32(n[i], hi, bcast32(qa + 4));
        }
    }
    __m512 dw, mw;
    if (F32S == 2) compact_scales(LLMK_R8_Q4K, ra, rb, b, pre, &dw, &mw);
    else if (F32S == 3) dw = f16_pair(ra, rb, 128), mw = q40_min(dw);
    else dw = F32S ? f32_pair(ra, rb, 0) : f16_pair(ra, rb, 0), mw = F32S ? f32_pair(ra, rb, 32) : f16_pair(ra, rb, 16);
    scale_into(NA, n, dw, &mw, d, b, nb, acc);
}

/* n[i] += two int8 records' (Q8_0, Q8S) elements 8g..8g+7, plus 128, times
 * activation row i's. A record's 16-byte pairs 4g..4g+3 (rows 0-7, two
 * elements each), gathered by qword so that each 128-bit lane holds a
 * four-row half of one record, then interleaved by bytes, give the A8
 * order. vpdpbusd wants unsigned weights: w + 128 (w xor 0x80) is, and the
 * extra 128 x the activations' sum, the same for every row, comes off once
 * a half (sub_half). Per row and group that leaves the two vpdpbusd, where
 * taking |w| and moving w's sign onto the activations cost two more. */
INLINE __m512i pairs4(int NL, const unsigned char *r, int g) {
    if (!NL) return _mm512_loadu_si512(r + 64 * g);
    __m512i lo, hi; /* NL4: pairs 0-7 are the low nibbles of chunks 0-7, pairs 8-15 the high ones */
    nl4_values(_mm512_loadu_si512(r + 64 * (g & 1)), &lo, &hi);
    return g < 2 ? lo : hi;
}

INLINE void int8_group(int NA, int NL, const unsigned char *ra, const unsigned char *rb, int g, const int8_t *const *q,
                       int64_t b, __m512i *n) {
    const __m512i ia = _mm512_set_epi64(11, 9, 10, 8, 3, 1, 2, 0), ib = _mm512_set_epi64(15, 13, 14, 12, 7, 5, 6, 4);
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    __m512i va = pairs4(NL, ra, g), vb = pairs4(NL, rb, g);
    __m512i x = _mm512_permutex2var_epi64(va, ia, vb), y = _mm512_permutex2var_epi64(va, ib, vb);
    __m512i u0 = _mm512_xor_si512(_mm512_unpacklo_epi8(x, y), bias);
    __m512i u1 = _mm512_xor_si512(_mm512_unpackhi_epi8(x, y), bias);
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++) {
        const int8_t *qa = q[i] + b * LLMK_QK + 8 * g;
        n[i] = _mm512_dpbusd_epi32(n[i], u0, bcast32(qa));
        n[i] = _mm512_dpbusd_epi32(n[i], u1, bcast32(qa + 4));
    }
}

/* n[i] -= 128 x row i's activation sum over halves h0..h1 of block b (the
 * row's int16 half sums follow its scales and offsets, a8.h). */
INLINE void sub_half(int NA, const float *const *d, int64_t b, int64_t nb, int h0, int h1, __m512i *n) {
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++) {
        const int16_t *hs = (const int16_t *)(const void *)(d[i] + 2 * nb) + 2 * b;
        int32_t sum = 0;
        for (int h = h0; h <= h1; h++) sum += hs[h];
        n[i] = _mm512_sub_epi32(n[i], _mm512_set1_epi32(128 * sum));
    }
}

/* Block b of two Q8_0 records (Q5_0 and Q8_0 weights; MODE 0), Q8S
 * records (1: two halves, each with its f32 scales, then the f32
 * offsets), NL4 ones (3: Q8_0's with the pairs looked up from grid
 * indices), XS4 ones (4: Q8S's with NL4's lookups, the scales from the
 * header and offsets +0) or Q8M ones (5: Q8S's with one scale and the
 * offset from Q4K's header). */
INLINE void block_i8(int NA, int MODE, const unsigned char *ra, const unsigned char *rb, const int8_t *const *q,
                     const float *const *d, int64_t b, int64_t nb, const float *pre, __m512 *acc) {
    const int Q8S = MODE == 3 ? 0 : MODE >= 4 ? 2 : MODE, NL = MODE == 3 || MODE == 4, M = MODE == 5;
    __m512i n[R8_NA_MAX];
    __m512 ks[2], km = _mm512_setzero_ps(); /* XS4's m (the Q8K header's): +0, fma'd as Q8S's is */
    if (M) compact_scales(LLMK_R8_Q8M, ra, rb, b, pre, &ks[0], &km), ks[1] = ks[0];
    else if (Q8S == 2) compact_scales(LLMK_R8_XS4, ra, rb, b, pre, &ks[0], &ks[1]);
    _Pragma("GCC unroll 2")
    for (int h = 0; h < 2; h++) {
        if (h == 0 || Q8S) {
            _Pragma("GCC unroll 8")
            for (int i = 0; i < NA; i++) n[i] = _mm512_setzero_si512();
        }
        int8_group(NA, NL, ra, rb, 2 * h, q, b, n);
        int8_group(NA, NL, ra, rb, 2 * h + 1, q, b, n);
        if (!Q8S && h == 0) continue;
        sub_half(NA, d, b, nb, Q8S ? h : 0, h, n);
        __m512 sc = Q8S == 2 ? ks[h] : Q8S ? f32_pair(ra, rb, 256 + 32 * h) : f16_pair(ra, rb, NL ? 128 : 256);
        scale_into(NA, n, sc, NULL, d, b, nb, acc);
    }
    if (Q8S) {
        __m512 mw = Q8S == 2 ? km : f32_pair(ra, rb, 320);
        _Pragma("GCC unroll 8")
        for (int i = 0; i < NA; i++) acc[i] = _mm512_fmadd_ps(mw, _mm512_set1_ps(d[i][nb + b]), acc[i]);
    }
}

/* Only the layouts llmk_a8_supports' types repack to reach here (the entry
 * checks); the others' case of the entry's switch falls to Q8_0's code,
 * never run. */
INLINE void block_any(int NA, int L, const unsigned char *ra, const unsigned char *rb, const int8_t *const *q,
                      const float *const *d, int64_t b, int64_t nb, const float *pre, __m512 *acc) {
    if (r8_expands(L)) { /* the portable form's products on the records they expand to (Q2_K has no A8) */
        _Alignas(64) unsigned char ea[384], eb[384];
        const unsigned char *xb = r8_expand_pair(L, ra, rb, b, ea, eb);
        block_i8(NA, L == LLMK_R8_Q5C ? 0 : 1, ea, xb, q, d, b, nb, NULL, acc);
        return;
    }
    if (L == LLMK_R8_Q4_1 || L == LLMK_R8_Q4S || L == LLMK_R8_Q4K || L == LLMK_R8_Q40)
        block_q4(NA, L == LLMK_R8_Q4S ? 1 : L == LLMK_R8_Q4K ? 2 : L == LLMK_R8_Q40 ? 3 : 0, ra, rb, q, d, b, nb, pre, acc);
    else block_i8(NA,
                  L == LLMK_R8_Q8S   ? 1
                  : L == LLMK_R8_NL4 ? 3
                  : L == LLMK_R8_XS4 ? 4
                  : L == LLMK_R8_Q8M ? 5
                                     : 0,
                  ra, rb, q, d, b, nb, pre, acc);
}

/* An a8 activation row's parts: int8 q[k], then the f32 scales and offsets. */
INLINE void split_a8(const unsigned char *a, int64_t k, const int8_t **q, const float **d) {
    *q = (const int8_t *)a;
    *d = (const float *)(const void *)(a + k);
}

#define R8_ACT_Q int8_t
#define R8_SPLIT_ACT split_a8
#include "kernels/r8_walk_avx512.h"

#include "kernels/r8_entry.h"

void llmk_gemm_r8_a8_avx512(const struct llmk_r8 *w, int64_t r0, int64_t r1, const void *act, size_t as, int64_t m,
                            float *y, size_t ys, void *scratch, size_t scratch_bytes) {
    LLMK_CHECK(llmk_a8_supports(w->type));
    r8_mm(w, r0, r1, act, as, m, y, ys, scratch, scratch_bytes);
}
