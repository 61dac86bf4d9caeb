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
/* MX4 records (MXFP4) go to the AVX2 kernel, the same bits: a VNNI form
 * waits for a machine that can run it. */
#define R8_HAS_MX4 0
#include "kernels/r8_x86.h"

#include "codec/blocks.h"

#include <immintrin.h>
#include <string.h>

INLINE __m512i bcast32(const int16_t *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm512_set1_epi32(v);
}

INLINE __m512i load_pair256(const unsigned char *a, const unsigned char *b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_load_si256((const __m256i *)a)),
                              _mm256_load_si256((const __m256i *)b), 1);
}

/* Eight f16 scales from each record, at byte offset off: lanes 0-7 from a, 8-15 from b. */
INLINE __m512 scales_pair(const unsigned char *a, const unsigned char *b, int off) {
    __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_load_si128((const __m128i *)(a + off))),
                                        _mm_load_si128((const __m128i *)(b + off)), 1);
    return _mm512_cvtph_ps(h);
}

/* Eight f32 values from each record, at byte offset off: lanes 0-7 from a, 8-15 from b. */
INLINE __m512 f32_pair(const unsigned char *a, const unsigned char *b, int off) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_load_ps((const float *)(a + off))),
                              _mm256_load_ps((const float *)(b + off)), 1);
}

/* Block b of two 8-row group records ra, rb x activation rows q/d[0..NA),
 * into acc[0..NA) (lanes 0-7: ra's rows, 8-15: rb's). F32S: Q4S's f32
 * scales and offsets before the nibbles, where Q4_1 has f16 ones. */
INLINE void block_q4_1(int NA, int F32S, const unsigned char *ra, const unsigned char *rb, const int16_t *const *q,
                       const float *const *d, int64_t b, int64_t nb, __m512 *acc) {
    const int nib = F32S ? 64 : 32;
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
    __m512 dw = F32S ? f32_pair(ra, rb, 0) : scales_pair(ra, rb, 0);
    __m512 mw = F32S ? f32_pair(ra, rb, 32) : scales_pair(ra, rb, 16);
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
    __m512 dw = scales_pair(ra, rb, 256);
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++)
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(n[i]), _mm512_mul_ps(dw, _mm512_set1_ps(d[i][b])), acc[i]);
}

/* Q8S: Q8_0's products, elements 0..15 and 16..31 summed apart, each half
 * with its f32 scales, then the f32 offsets. */
INLINE void block_q8s(int NA, int TWO, const unsigned char *ra, const unsigned char *rb, const int16_t *const *q,
                      const float *const *d, int64_t b, int64_t nb, __m512 *acc) {
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
    __m512 s0 = f32_pair(ra, rb, 256), s1 = f32_pair(ra, rb, 288), mw = f32_pair(ra, rb, 320);
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++) {
        __m512 da = _mm512_set1_ps(d[i][b]);
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(n[0][i]), _mm512_mul_ps(s0, da), acc[i]);
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(n[1][i]), _mm512_mul_ps(s1, da), acc[i]);
        if (!TWO) {
            acc[i] = _mm512_fmadd_ps(mw, _mm512_set1_ps(d[i][nb + b]), acc[i]);
        } else { /* Q8S2: an offset per half, with the activation's half sums */
            acc[i] = _mm512_fmadd_ps(mw, _mm512_set1_ps(d[i][2 * nb + 2 * b]), acc[i]);
            acc[i] = _mm512_fmadd_ps(f32_pair(ra, rb, 352), _mm512_set1_ps(d[i][2 * nb + 2 * b + 1]), acc[i]);
        }
    }
}

INLINE void block_any(int NA, int L, const unsigned char *ra, const unsigned char *rb, const int16_t *const *q,
                      const float *const *d, int64_t b, int64_t nb, __m512 *acc) {
    if (L == LLMK_R8_Q4_1) block_q4_1(NA, 0, ra, rb, q, d, b, nb, acc);
    else if (L == LLMK_R8_Q4S) block_q4_1(NA, 1, ra, rb, q, d, b, nb, acc);
    else if (L == LLMK_R8_Q8S) block_q8s(NA, 0, ra, rb, q, d, b, nb, acc);
    else if (L == LLMK_R8_Q8S2) block_q8s(NA, 1, ra, rb, q, d, b, nb, acc);
    else block_q8_0(NA, ra, rb, q, d, b, acc);
}

/* Two groups' records (ra, rb: the same one for a group alone) x activation
 * rows a[0..NA). */
INLINE void tile(int NA, int L, const unsigned char *ra, const unsigned char *rb, int64_t nb, int64_t k,
                 const unsigned char *const *a, __m512 *out) {
    const int rs = R8_RECORD_BYTES(L);
    __m512 acc[R8_NA_MAX];
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++) acc[i] = _mm512_setzero_ps();
    const int16_t *q[R8_NA_MAX];
    const float *d[R8_NA_MAX];
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++) split_act(a[i], k, &q[i], &d[i]);
    int two = ra != rb;
    for (int64_t b = 0; b < nb; b++, ra += rs, rb += rs) {
        prefetch_rec(ra, rs);
        if (two) prefetch_rec(rb, rs);
        block_any(NA, L, ra, rb, q, d, b, nb, acc);
    }
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++) out[i] = acc[i];
}

/* One activation row against NP pairs of streams (rec[2p], rec[2p + 1]),
 * interleaved block by block. */
INLINE void streams(int NP, int L, const unsigned char *const *rec, int64_t nb, int64_t k, const unsigned char *a,
                    __m512 *out) {
    const size_t rs = R8_RECORD_BYTES(L);
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    const int16_t *q;
    const float *d;
    split_act(a, k, &q, &d);
    for (int64_t b = 0; b < nb; b++) {
        _Pragma("GCC unroll 2")
        for (int p = 0; p < NP; p++) {
            const unsigned char *ra = rec[2 * p] + (size_t)b * rs, *rb = rec[2 * p + 1] + (size_t)b * rs;
            prefetch_rec(ra, (int)rs);
            if (rb != ra) prefetch_rec(rb, (int)rs);
            block_any(1, L, ra, rb, &q, &d, b, nb, &acc[p]);
        }
    }
    _Pragma("GCC unroll 2")
    for (int p = 0; p < NP; p++) out[p] = acc[p];
}

INLINE __m256 lo8(__m512 v) { return _mm512_castps512_ps256(v); }
INLINE __m256 hi8(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }

/* One activation row x groups [g0, g1) as the AVX2 kernel walks them:
 * LLMK_R8_RUNS contiguous runs side by side (r8.h). */
enum { NSTREAM = LLMK_R8_RUNS };
_Static_assert(NSTREAM == 4, "the decode walk pairs runs 0+1 and 2+3");
INLINE void rows_streams(int L, const struct llmk_r8 *w, int64_t g0, int64_t g1, int64_t r1, const unsigned char *a,
                         float *y, void *scratch) {
    (void)scratch; /* vpbroadcastd from memory is a plain load here: no tables */
    int64_t len = (g1 - g0 + NSTREAM - 1) / NSTREAM;
    size_t gb = (size_t)w->nb * w->block_bytes;
    for (int64_t i = 0; i < len; i++) {
        const unsigned char *rec[NSTREAM];
        int ns = 0;
        while (ns < NSTREAM && g0 + ns * len + i < g1) {
            rec[ns] = w->data + (size_t)(g0 + ns * len + i - w->g0) * gb;
            ns++;
        }
        if (ns % 2) rec[ns] = rec[ns - 1];
        __m512 out[2];
        if (ns > 2) streams(2, L, rec, w->nb, w->k, a, out);
        else streams(1, L, rec, w->nb, w->k, a, out);
        for (int s = 0; s < ns; s++) store_group(y, g0 + s * len + i, r1, s % 2 ? hi8(out[s / 2]) : lo8(out[s / 2]));
    }
}

/* A few activation rows (a verify step's drafts, a small batch) walk the
 * groups as the decode does, LLMK_R8_RUNS runs side by side. Each lane's
 * arithmetic is tile()'s, block after block: the same bits. */
#define R8_HAVE_FEW_ROWS 4 /* the most rows rows_few takes: its accumulators stay in registers */
INLINE void streams_few(int NA, int NP, int L, const unsigned char *const *rec, int64_t nb, int64_t k,
                        const unsigned char *const *a, __m512 out[][R8_HAVE_FEW_ROWS]) {
    const size_t rs = R8_RECORD_BYTES(L);
    __m512 acc[2][R8_HAVE_FEW_ROWS];
    const int16_t *q[R8_HAVE_FEW_ROWS];
    const float *d[R8_HAVE_FEW_ROWS];
    _Pragma("GCC unroll 4")
    for (int i = 0; i < NA; i++) {
        acc[0][i] = acc[1][i] = _mm512_setzero_ps();
        split_act(a[i], k, &q[i], &d[i]);
    }
    for (int64_t b = 0; b < nb; b++) {
        _Pragma("GCC unroll 2")
        for (int p = 0; p < NP; p++) {
            const unsigned char *ra = rec[2 * p] + (size_t)b * rs, *rb = rec[2 * p + 1] + (size_t)b * rs;
            prefetch_rec(ra, (int)rs);
            if (rb != ra) prefetch_rec(rb, (int)rs);
            block_any(NA, L, ra, rb, q, d, b, nb, acc[p]);
        }
    }
    _Pragma("GCC unroll 2")
    for (int p = 0; p < NP; p++)
        _Pragma("GCC unroll 4")
        for (int i = 0; i < NA; i++) out[p][i] = acc[p][i];
}

INLINE void rows_few(int NA, int L, const struct llmk_r8 *w, int64_t g0, int64_t g1, int64_t r1,
                     const unsigned char *const *a, float *y, size_t ys) {
    int64_t len = (g1 - g0 + NSTREAM - 1) / NSTREAM;
    size_t gb = (size_t)w->nb * w->block_bytes;
    for (int64_t i = 0; i < len; i++) {
        const unsigned char *rec[NSTREAM];
        int ns = 0;
        while (ns < NSTREAM && g0 + ns * len + i < g1) {
            rec[ns] = w->data + (size_t)(g0 + ns * len + i - w->g0) * gb;
            ns++;
        }
        if (ns % 2) rec[ns] = rec[ns - 1];
        __m512 out[2][R8_HAVE_FEW_ROWS];
        if (ns > 2) streams_few(NA, 2, L, rec, w->nb, w->k, a, out);
        else streams_few(NA, 1, L, rec, w->nb, w->k, a, out);
        for (int s = 0; s < ns; s++)
            for (int j = 0; j < NA; j++)
                store_group(y + (size_t)j * ys, g0 + s * len + i, r1,
                            s % 2 ? hi8(out[s / 2][j]) : lo8(out[s / 2][j]));
    }
}

/* NA activation rows x groups [g0, g1), two groups at a time. */
INLINE void rows_na(int NA, int L, const struct llmk_r8 *w, int64_t g0, int64_t g1, int64_t r1,
                    const unsigned char *const *a, float *y, size_t ys, void *scratch) {
    (void)scratch;
    size_t gb = (size_t)w->nb * w->block_bytes;
    for (int64_t g = g0; g < g1; g += 2) {
        const unsigned char *ra = w->data + (size_t)(g - w->g0) * gb;
        const unsigned char *rb = g + 1 < g1 ? ra + gb : ra;
        __m512 out[R8_NA_MAX];
        tile(NA, L, ra, rb, w->nb, w->k, a, out);
        _Pragma("GCC unroll 8")
        for (int i = 0; i < NA; i++) {
            store_group(y + (size_t)i * ys, g, r1, lo8(out[i]));
            if (g + 1 < g1) store_group(y + (size_t)i * ys, g + 1, r1, hi8(out[i]));
        }
    }
}

#include "kernels/r8_entry.h"

void llmk_gemm_r8_a16_avx512(const struct llmk_r8 *w, int64_t r0, int64_t r1, const void *act, size_t as, int64_t m, float *y,
                             size_t ys, void *scratch, size_t scratch_bytes) {
    if (w->layout == LLMK_R8_MX4) llmk_gemm_r8_a16_avx2(w, r0, r1, act, as, m, y, ys, scratch, scratch_bytes);
    else r8_mm(w, r0, r1, act, as, m, y, ys, scratch, scratch_bytes);
}
