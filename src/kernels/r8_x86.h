/* Helpers of the r8 kernel files (r8_avx2.c, r8_avx512.c), compiled into
 * each with that file's ISA flags; r8_entry.h is their shared entry. */
#ifndef LLMK_KERNELS_R8_X86_H
#define LLMK_KERNELS_R8_X86_H

#include "codec/blocks.h"
#include "kernels/r8.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

/* Software prefetch PF_AHEAD bytes ahead of the record being read, every
 * cache line of that far record: from DRAM the hardware prefetcher alone
 * left a single thread at ~7 GB/s of the ~14 it can read. The stream is
 * sequential (records, then the next group), so running past a group's end
 * still fetches what comes next. Distance: medians of 8 alternating tg96
 * runs at 2 threads, 2 KB 134, 4 KB 137-146, 8 KB 140 t/s. */
enum { PF_AHEAD = 4096 };
INLINE void prefetch_rec(const unsigned char *rec, int bytes) {
    for (int o = 0; o < bytes; o += 64) _mm_prefetch((const char *)rec + PF_AHEAD + o, _MM_HINT_T0);
}

/* Bytes of one record of layout L (r8.h), headers aside. */
#define R8_RECORD_BYTES(L) ((int)llmk_r8_record_stride(L))

/* prefetch_rec for block b's record at rec, and for a compact form the
 * next header (after every LLMK_R8_SUPER records), so the prefetches cover
 * the whole stream PF_AHEAD bytes ahead. */
INLINE void prefetch_block(int L, const unsigned char *rec, int64_t b) {
    prefetch_rec(rec, R8_RECORD_BYTES(L));
    if (llmk_r8_header_bytes(L) && b % LLMK_R8_SUPER == LLMK_R8_SUPER - 1)
        prefetch_rec(rec + R8_RECORD_BYTES(L), (int)llmk_r8_header_bytes(L));
}

/* Where the walk knows what it reads next (r8_walk_avx512.h's rows_na):
 * block b's record (and, at a super-block's start, its header) dist bytes
 * on, into L1, or into L2 with l2; dist 0: prefetch_block's stream. */
INLINE void prefetch_block_at(int L, const unsigned char *rec, int64_t b, size_t dist, int l2) {
    if (!dist) {
        prefetch_block(L, rec, b);
        return;
    }
    int h = llmk_r8_header_bytes(L) && b % LLMK_R8_SUPER == 0 ? (int)llmk_r8_header_bytes(L) : 0;
    const char *p = (const char *)rec - h + dist;
    if (l2)
        for (int o = 0; o < R8_RECORD_BYTES(L) + h; o += 64) _mm_prefetch(p + o, _MM_HINT_T1);
    else
        for (int o = 0; o < R8_RECORD_BYTES(L) + h; o += 64) _mm_prefetch(p + o, _MM_HINT_T0);
}

/* An a16 activation row's parts: int16 q[k], then the f32 scales. */
INLINE void split_act(const unsigned char *a, int64_t k, const int16_t **q, const float **d) {
    *q = (const int16_t *)a;
    *d = (const float *)(a + (size_t)k * 2);
}

/* Group g's 8 results into y (rows past r1 left out: a ragged last group). */
INLINE void store_group(float *y, int64_t g, int64_t r1, __m256 v) {
    int64_t r = g * 8, nr = r1 - r < 8 ? r1 - r : 8;
    if (nr == 8) {
        _mm256_storeu_ps(y + r, v);
    } else {
        float tmp[8];
        _mm256_storeu_ps(tmp, v);
        memcpy(y + r, tmp, (size_t)nr * sizeof(float));
    }
}

#if defined(__AVX512F__)
/* The AVX-512 files' loads (r8_avx512.c, r8_a8_avx512.c): two 8-row
 * groups' records side by side, a's in the low 256 bits, b's in the high. */

/* The 32 bits at p in every lane (activation elements: two int16, four int8). */
INLINE __m512i bcast32(const void *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm512_set1_epi32(v);
}

INLINE __m512i load_pair256(const unsigned char *a, const unsigned char *b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)a)),
                              _mm256_loadu_si256((const __m256i *)(const void *)b), 1);
}

/* Eight f16 scales from each record at byte offset off: lanes 0-7 from a, 8-15 from b. */
INLINE __m512 f16_pair(const unsigned char *a, const unsigned char *b, int off) {
    __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(a + off))),
                                        _mm_loadu_si128((const __m128i *)(const void *)(b + off)), 1);
    return _mm512_cvtph_ps(h);
}

/* Eight f32 values from each record at byte offset off: lanes 0-7 from a, 8-15 from b. */
INLINE __m512 f32_pair(const unsigned char *a, const unsigned char *b, int off) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps((const float *)(const void *)(a + off))),
                              _mm256_loadu_ps((const float *)(const void *)(b + off)), 1);
}

/* NL4 (r8.h): chunk bytes x (16 from each record per 128-bit lane, or 64
 * of one record) -> the grid values (16 int8 at grid: IQ4_NL's, or MXFP4's
 * for MXC) of their low nibbles (lo) and high nibbles (hi), Q8_0's int8
 * pair bytes. */
INLINE void grid_values(const int8_t *grid16, __m512i x, __m512i *lo, __m512i *hi) {
    const __m512i grid = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)grid16));
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    *lo = _mm512_shuffle_epi8(grid, _mm512_and_si512(x, m4));
    *hi = _mm512_shuffle_epi8(grid, _mm512_and_si512(_mm512_srli_epi16(x, 4), m4));
}

INLINE void nl4_values(__m512i x, __m512i *lo, __m512i *hi) { grid_values(llmk_iq4nl_values, x, lo, hi); }

/* MXC's scales (r8.h): the E8M0 bytes at offset off of each record as
 * llmk_e8m0_half_to_fp32's f32 (lanes 0-7 from a, 8-15 from b): e < 2 the
 * subnormal 2^21 << e, else (e - 1) << 23. */
INLINE __m512 e8m0_pair(const unsigned char *a, const unsigned char *b, int off) {
    __m128i e = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)(const void *)(a + off)),
                                   _mm_loadl_epi64((const __m128i *)(const void *)(b + off)));
    __m512i v = _mm512_cvtepu8_epi32(e);
    __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(v, _mm512_set1_epi32(1)), 23);
    __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), v);
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(_mm512_cmplt_epu32_mask(v, _mm512_set1_epi32(2)), normal, sub));
}

/* Q40's min (r8.h): -8 d, or the infinity the f16 of -8 d overflows to,
 * as Q4_1 records hold it. */
INLINE __m512 q40_min(__m512 d) {
    __m512 m = _mm512_mul_ps(d, _mm512_set1_ps(-8.0f));
    __mmask16 big = _mm512_cmp_ps_mask(_mm512_abs_ps(m), _mm512_set1_ps(65504.0f), _CMP_GT_OQ);
    __m512 inf = _mm512_or_ps(_mm512_and_ps(m, _mm512_set1_ps(-0.0f)), _mm512_set1_ps(INFINITY));
    return _mm512_mask_blend_ps(big, m, inf);
}

/* The 128 bytes of NL4-style nibble chunks at rec (r8.h) as the 256 bytes
 * of the int8 pairs they stand for: v[j] is bytes 64 j .. 64 j + 63. */
INLINE void chunk_nibbles(const unsigned char *rec, __m512i v[4]) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512i x0 = _mm512_loadu_si512(rec), x1 = _mm512_loadu_si512(rec + 64);
    v[0] = _mm512_and_si512(x0, m4), v[1] = _mm512_and_si512(x1, m4);
    v[2] = _mm512_and_si512(_mm512_srli_epi16(x0, 4), m4), v[3] = _mm512_and_si512(_mm512_srli_epi16(x1, 4), m4);
}

/* Q5C's and Q51's weights (r8.h) into the int8 pairs at out: the nibbles
 * less bias, plus 16 where the plane after the chunks has the byte's bit
 * (one masked add per 64). */
INLINE void five_bits(const unsigned char *rec, int bias, unsigned char *out) {
    const __m512i sixteen = _mm512_set1_epi8(16);
    __m512i v[4];
    chunk_nibbles(rec, v);
    _Pragma("GCC unroll 4")
    for (int j = 0; j < 4; j++) {
        uint64_t bits;
        memcpy(&bits, rec + 128 + 8 * j, sizeof bits);
        __m512i base = _mm512_sub_epi8(v[j], _mm512_set1_epi8((char)bias));
        _mm512_storeu_si512(out + 64 * j, _mm512_mask_add_epi8(base, _cvtu64_mask64(bits), base, sixteen));
    }
}

/* A Q5C record (r8.h) -> the Q8_0 record it stands for, at out (16-byte
 * aligned, as the Q8_0 code loads it; 272 bytes): q - 16, then the f16 d. */
INLINE void q5c_expand(const unsigned char *rec, unsigned char *out) {
    five_bits(rec, 16, out);
    memcpy(out + 256, rec + 160, 16);
}

/* The compact forms (r8.h): the header of block b's super-block, from the
 * block's record. */
INLINE const unsigned char *r8_header(int L, const unsigned char *rec, int64_t b) {
    return rec - (size_t)(b % LLMK_R8_SUPER) * llmk_r8_record_stride(L) - llmk_r8_header_bytes(L);
}

/* The f32 factors f[r] (at byte f of each header) times the integers
 * i[r] (8 bytes at off, u8 or int8): exact f32 products, as r8_read.h's.
 * Each half on its own (the loads fold into the widening and the
 * multiply), joined last. */
INLINE __m256 scaled8(const unsigned char *h, int f, int off, int is_signed) {
    __m128i i = _mm_loadl_epi64((const __m128i *)(const void *)(h + off));
    __m256i w = is_signed ? _mm256_cvtepi8_epi32(i) : _mm256_cvtepu8_epi32(i);
    return _mm256_mul_ps(_mm256_cvtepi32_ps(w), _mm256_loadu_ps((const float *)(const void *)(h + f)));
}
INLINE __m512 scaled_pair(const unsigned char *ha, const unsigned char *hb, int f, int off, int is_signed) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(scaled8(ha, f, off, is_signed)), scaled8(hb, f, off, is_signed), 1);
}

/* Block b's Q2C record (r8.h) -> the Q8S2 record it stands for, at out
 * (32-byte aligned, 384 bytes): the 2-bit weights by a shift and a mask
 * per 64, the f32 scales and offsets as the header's factors times its
 * integers (scaled8: exact products, read_q2_k's values). */
INLINE void q2c_expand(const unsigned char *rec, int64_t b, unsigned char *out) {
    const unsigned char *h = r8_header(LLMK_R8_Q2C, rec, b);
    const __m512i m2 = _mm512_set1_epi8(3);
    __m512i x = _mm512_loadu_si512(rec);
    _Pragma("GCC unroll 4")
    for (int j = 0; j < 4; j++) _mm512_storeu_si512(out + 64 * j, _mm512_and_si512(_mm512_srli_epi16(x, 2 * j), m2));
    int o = 64 + 32 * (int)(b % LLMK_R8_SUPER);
    _mm256_store_ps((float *)(void *)(out + 256), scaled8(h, 0, o, 0));       /* s0 = d * sc0 */
    _mm256_store_ps((float *)(void *)(out + 288), scaled8(h, 0, o + 8, 0));   /* s1 */
    _mm256_store_ps((float *)(void *)(out + 320), scaled8(h, 32, o + 16, 0)); /* m0 = (-dmin) * mn0 */
    _mm256_store_ps((float *)(void *)(out + 352), scaled8(h, 32, o + 24, 0)); /* m1 */
}

/* Block b's Q3C record (r8.h) -> the Q8S record it stands for, at out
 * (32-byte aligned, 352 bytes): per 64 weights the low bits less 4 and a
 * masked add of 4 where the third bit is set; s0 and s1 the Q8K header's products
 * (scaled8), m = +0. */
INLINE void q3c_expand(const unsigned char *rec, int64_t b, unsigned char *out) {
    const unsigned char *h = r8_header(LLMK_R8_Q3C, rec, b);
    const __m512i m2 = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4);
    __m512i x = _mm512_loadu_si512(rec);
    _Pragma("GCC unroll 4")
    for (int j = 0; j < 4; j++) {
        uint64_t bits;
        memcpy(&bits, rec + 64 + 8 * j, sizeof bits);
        __m512i base = _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(x, 2 * j), m2), four);
        _mm512_storeu_si512(out + 64 * j, _mm512_mask_add_epi8(base, _cvtu64_mask64(bits), base, four));
    }
    int o = 64 + 16 * (int)(b % LLMK_R8_SUPER);
    _mm256_store_ps((float *)(void *)(out + 256), scaled8(h, 0, o, 1));
    _mm256_store_ps((float *)(void *)(out + 288), scaled8(h, 32, o + 8, 1));
    _mm256_store_ps((float *)(void *)(out + 320), _mm256_setzero_ps());
}

/* Block b's Q6C record (r8.h) -> the Q8S record it stands for, at out
 * (32-byte aligned, 352 bytes): per 64 weights the nibble, or'd with the top
 * bits moved up by 4 (each byte's two bits shifted within its 16-bit lane
 * stay in their byte), less 32; s0, s1 and m as Q3C's. */
INLINE void q6c_expand(const unsigned char *rec, int64_t b, unsigned char *out) {
    const unsigned char *h = r8_header(LLMK_R8_Q6C, rec, b);
    const __m512i m2 = _mm512_set1_epi8(3), k32 = _mm512_set1_epi8(32);
    __m512i lo[4], hx = _mm512_loadu_si512(rec + 128);
    chunk_nibbles(rec, lo);
    _Pragma("GCC unroll 4")
    for (int j = 0; j < 4; j++) {
        __m512i top = _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hx, 2 * j), m2), 4);
        _mm512_storeu_si512(out + 64 * j, _mm512_sub_epi8(_mm512_or_si512(lo[j], top), k32));
    }
    int o = 64 + 16 * (int)(b % LLMK_R8_SUPER);
    _mm256_store_ps((float *)(void *)(out + 256), scaled8(h, 0, o, 1));
    _mm256_store_ps((float *)(void *)(out + 288), scaled8(h, 32, o + 8, 1));
    _mm256_store_ps((float *)(void *)(out + 320), _mm256_setzero_ps());
}

/* A Q51 record (r8.h) -> the Q8S record it stands for, at out (32-byte
 * aligned, 352 bytes): q itself, the f16 d and m widened exactly. */
INLINE void q51_expand(const unsigned char *rec, unsigned char *out) {
    five_bits(rec, 0, out);
    __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(rec + 160)));
    _mm256_store_ps((float *)(void *)(out + 256), d);
    _mm256_store_ps((float *)(void *)(out + 288), d);
    _mm256_store_ps((float *)(void *)(out + 320), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(rec + 176))));
}

/* The forms the kernels expand in L1 before their products (Q5C, Q2C, Q3C,
 * Q6C, Q51), the portable form each expands to and its record's bytes. */
INLINE int r8_expands(int L) {
    return L == LLMK_R8_Q5C || L == LLMK_R8_Q2C || L == LLMK_R8_Q3C || L == LLMK_R8_Q6C || L == LLMK_R8_Q51;
}
INLINE int r8_expanded_form(int L) {
    return L == LLMK_R8_Q5C ? LLMK_R8_Q8_0 : L == LLMK_R8_Q2C ? LLMK_R8_Q8S2 : LLMK_R8_Q8S;
}
INLINE size_t r8_expanded_bytes(int L) { return llmk_r8_record_stride(r8_expanded_form(L)); }

/* Block b's record rec of an expanding form L -> out (32-byte aligned). */
INLINE void r8_expand(int L, const unsigned char *rec, int64_t b, unsigned char *out) {
    if (L == LLMK_R8_Q5C) q5c_expand(rec, out);
    else if (L == LLMK_R8_Q2C) q2c_expand(rec, b, out);
    else if (L == LLMK_R8_Q3C) q3c_expand(rec, b, out);
    else if (L == LLMK_R8_Q51) q51_expand(rec, out);
    else q6c_expand(rec, b, out);
}

/* Block b's two records ra, rb (the same one for a group alone) expanded
 * into ea and eb (384 bytes each, 32-byte aligned); returns the second
 * record for the products (eb, or ea when alone). */
INLINE const unsigned char *r8_expand_pair(int L, const unsigned char *ra, const unsigned char *rb, int64_t b,
                                           unsigned char *ea, unsigned char *eb) {
    r8_expand(L, ra, b, ea);
    if (rb == ra) return ea;
    r8_expand(L, rb, b, eb);
    return eb;
}

/* Block b's two products of a compact form (r8.h): Q4K's and Q8M's s = d *
 * sc and m = (-dmin) * mn, the Q8K header's (XS4, Q3C, Q6C) s0 = d * sc0 and s1 = d * sc1; from pre where a
 * walk converted them already (x then y, 16 floats each, per block). */
INLINE void compact_scales(int L, const unsigned char *ra, const unsigned char *rb, int64_t b, const float *pre,
                           __m512 *x, __m512 *y) {
    if (pre) {
        *x = _mm512_load_ps(pre + 32 * b), *y = _mm512_load_ps(pre + 32 * b + 16);
        return;
    }
    const unsigned char *ha = r8_header(L, ra, b), *hb = r8_header(L, rb, b);
    int o = 64 + 16 * (int)(b % LLMK_R8_SUPER), sgn = L != LLMK_R8_Q4K && L != LLMK_R8_Q8M;
    *x = scaled_pair(ha, hb, 0, o, sgn);
    *y = scaled_pair(ha, hb, 32, o + 8, sgn);
}
#endif

#endif
