/* AVX2 + FMA + F16C kernels on r8-repacked weights (r8.h has the layout and
 * the arithmetic, which these follow bit for bit).
 *
 * Per 8-row block record and activation row: 16 madds of an unpacked
 * register (8 rows x 2 int16 weights) with a broadcast activation pair, summed
 * exactly in int32 lanes (one lane per weight row), converted once, and fused
 * into the row's accumulator with the block's 8 scales. Up to NA = 4
 * activation rows share each unpacked register (prefill); each row's
 * sequence of operations is the same for every NA. */
#include "kernels/r8.h"
#include "kernels/r8_x86.h"

#include "codec/blocks.h"

#include <immintrin.h>
#include <string.h>

INLINE __m256i bcast32(const int16_t *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

/* The activation pair (elements e, e + 1) of row q in every 32-bit lane:
 * broadcast from the a16 row, or (TAB) loaded from the row's table of
 * pairs already broadcast (pair_table). */
INLINE __m256i pair(int TAB, const int16_t *q, int64_t e) {
    return TAB ? _mm256_load_si256((const __m256i *)(const void *)q + e / 2) : bcast32(q + e);
}

/* n + the products of 4 unpacked registers (8 rows x elements 2j, 2j+1 of
 * pair j) with the activation pairs of elements e, e + 2, e + 4, e + 6. */
INLINE __m256i madd4(__m256i n, __m256i w0, __m256i w1, __m256i w2, __m256i w3, int TAB, const int16_t *q, int64_t e) {
    __m256i s01 = _mm256_add_epi32(_mm256_madd_epi16(w0, pair(TAB, q, e)), _mm256_madd_epi16(w1, pair(TAB, q, e + 2)));
    __m256i s23 = _mm256_add_epi32(_mm256_madd_epi16(w2, pair(TAB, q, e + 4)), _mm256_madd_epi16(w3, pair(TAB, q, e + 6)));
    return _mm256_add_epi32(n, _mm256_add_epi32(s01, s23));
}

/* One block record (8 rows x 32 weights) x activation rows q/d[0..NA),
 * accumulated into acc[0..NA). Every caller runs each row through exactly
 * these operations in block order, so a row's bits do not depend on NA or
 * on how the groups are walked. */
INLINE void block_q4_1(int NA, int F32S, int TAB, const unsigned char *rec, const int16_t *const *q, const float *const *d,
                       int64_t b, int64_t nb, __m256 *acc) {
    /* Q4S (F32S): f32 scales and offsets before the nibbles, not f16 */
    const unsigned char *nib = rec + (F32S ? 64 : 32);
    const __m256i m4 = _mm256_set1_epi16(0x0f);
    __m256i n[4];
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++) n[i] = _mm256_setzero_si256();
    _Pragma("GCC unroll 1")
    for (int c = 0; c < 4; c++) {
        __m256i x = _mm256_load_si256((const __m256i *)(nib + 32 * c));
        __m256i p0 = _mm256_and_si256(x, m4), p1 = _mm256_and_si256(_mm256_srli_epi16(x, 4), m4);
        __m256i p2 = _mm256_and_si256(_mm256_srli_epi16(x, 8), m4), p3 = _mm256_srli_epi16(x, 12);
        _Pragma("GCC unroll 8")
        for (int i = 0; i < NA; i++) {
            n[i] = madd4(n[i], p0, p1, p2, p3, TAB, q[i], b * LLMK_QK + 8 * c);
        }
    }
    __m256 dw = F32S ? _mm256_load_ps((const float *)rec) : _mm256_cvtph_ps(_mm_load_si128((const __m128i *)rec));
    __m256 mw = F32S ? _mm256_load_ps((const float *)(rec + 32))
                     : _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(rec + 16)));
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++) {
        acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(n[i]), _mm256_mul_ps(dw, _mm256_broadcast_ss(d[i] + b)), acc[i]);
        acc[i] = _mm256_fmadd_ps(mw, _mm256_broadcast_ss(d[i] + nb + b), acc[i]);
    }
}

/* n[i] += the products of an int8 record's (Q8_0, Q8S) register pair p, p + 1
 * (the unpacked 8 rows x elements 2j, 2j+1 of pair j) with activation row
 * i's pairs of elements b * 32 + 2p and + 2. */
INLINE void int8_pair_sums(int NA, int TAB, const unsigned char *rec, const int16_t *const *q, int64_t b, int p,
                           __m256i *n) {
    __m256i w0 = _mm256_cvtepi8_epi16(_mm_load_si128((const __m128i *)(rec + 16 * p)));
    __m256i w1 = _mm256_cvtepi8_epi16(_mm_load_si128((const __m128i *)(rec + 16 * p + 16)));
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++) {
        int64_t e = b * LLMK_QK + 2 * p;
        n[i] = _mm256_add_epi32(n[i], _mm256_add_epi32(_mm256_madd_epi16(w0, pair(TAB, q[i], e)),
                                                       _mm256_madd_epi16(w1, pair(TAB, q[i], e + 2))));
    }
}

INLINE void block_q8_0(int NA, int TAB, const unsigned char *rec, const int16_t *const *q, const float *const *d, int64_t b,
                       __m256 *acc) {
    __m256i n[4];
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++) n[i] = _mm256_setzero_si256();
    _Pragma("GCC unroll 2")
    for (int p = 0; p < 16; p += 2) int8_pair_sums(NA, TAB, rec, q, b, p, n);
    __m256 dw = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(rec + 256)));
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++)
        acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(n[i]), _mm256_mul_ps(dw, _mm256_broadcast_ss(d[i] + b)), acc[i]);
}

/* MX4: per chunk of 32 bytes, the low and the high nibbles looked up in
 * MXFP4's grid give 4 of Q8_0's 16-byte pairs; then Q8_0's products with
 * the f32 scales. */
INLINE void block_mx4(int NA, int TAB, const unsigned char *rec, const int16_t *const *q, const float *const *d, int64_t b,
                      __m256 *acc) {
    const __m256i grid = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)llmk_mxfp4_values));
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256i n[4];
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++) n[i] = _mm256_setzero_si256();
    _Pragma("GCC unroll 1")
    for (int c = 0; c < 4; c++) {
        __m256i x = _mm256_load_si256((const __m256i *)(rec + 32 + 32 * c));
        __m256i lo = _mm256_shuffle_epi8(grid, _mm256_and_si256(x, m4));
        __m256i hi = _mm256_shuffle_epi8(grid, _mm256_and_si256(_mm256_srli_epi16(x, 4), m4));
        __m256i w[4] = {_mm256_cvtepi8_epi16(_mm256_castsi256_si128(lo)), _mm256_cvtepi8_epi16(_mm256_castsi256_si128(hi)),
                        _mm256_cvtepi8_epi16(_mm256_extracti128_si256(lo, 1)),
                        _mm256_cvtepi8_epi16(_mm256_extracti128_si256(hi, 1))};
        _Pragma("GCC unroll 8")
        for (int i = 0; i < NA; i++) {
            n[i] = madd4(n[i], w[0], w[1], w[2], w[3], TAB, q[i], b * LLMK_QK + 8 * c);
        }
    }
    __m256 dw = _mm256_load_ps((const float *)rec);
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++)
        acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(n[i]), _mm256_mul_ps(dw, _mm256_broadcast_ss(d[i] + b)), acc[i]);
}

/* Q8S: Q8_0's products summed apart for elements 0..15 and 16..31, each
 * half scaled by its f32 scale, then the f32 offset. Each half is summed
 * and scaled before the next starts: one set of NA int32 sums in registers,
 * not two (with four rows, two sets spilled: bench_a16 q6_k 3072x1024 at M=8
 * 223 -> 201 us a row on Zen 1; the same operations in the same order, so
 * the same bits). */
INLINE void block_q8s(int NA, int TWO, int TAB, const unsigned char *rec, const int16_t *const *q, const float *const *d,
                      int64_t b, int64_t nb, __m256 *acc) {
    _Pragma("GCC unroll 2")
    for (int h = 0; h < 2; h++) {
        __m256i n[4];
        _Pragma("GCC unroll 8")
        for (int i = 0; i < NA; i++) n[i] = _mm256_setzero_si256();
        _Pragma("GCC unroll 4")
        for (int p = 8 * h; p < 8 * h + 8; p += 2) int8_pair_sums(NA, TAB, rec, q, b, p, n);
        __m256 s = _mm256_load_ps((const float *)(rec + 256 + 32 * h));
        _Pragma("GCC unroll 8")
        for (int i = 0; i < NA; i++)
            acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(n[i]), _mm256_mul_ps(s, _mm256_broadcast_ss(d[i] + b)), acc[i]);
    }
    __m256 mw = _mm256_load_ps((const float *)(rec + 320));
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++) {
        if (!TWO) {
            acc[i] = _mm256_fmadd_ps(mw, _mm256_broadcast_ss(d[i] + nb + b), acc[i]);
        } else { /* Q8S2: an offset per half, with the activation's half sums */
            acc[i] = _mm256_fmadd_ps(mw, _mm256_broadcast_ss(d[i] + 2 * nb + 2 * b), acc[i]);
            acc[i] = _mm256_fmadd_ps(_mm256_load_ps((const float *)(rec + 352)),
                                     _mm256_broadcast_ss(d[i] + 2 * nb + 2 * b + 1), acc[i]);
        }
    }
}

/* One record of layout L x activation rows, into acc (TAB: q[i] are
 * pair tables). */
INLINE void block_any(int NA, int L, int TAB, const unsigned char *rec, const int16_t *const *q, const float *const *d,
                      int64_t b, int64_t nb, __m256 *acc) {
    if (L == LLMK_R8_Q4_1) block_q4_1(NA, 0, TAB, rec, q, d, b, nb, acc);
    else if (L == LLMK_R8_Q4S) block_q4_1(NA, 1, TAB, rec, q, d, b, nb, acc);
    else if (L == LLMK_R8_MX4) block_mx4(NA, TAB, rec, q, d, b, acc);
    else if (L == LLMK_R8_Q8S) block_q8s(NA, 0, TAB, rec, q, d, b, nb, acc);
    else if (L == LLMK_R8_Q8S2) block_q8s(NA, 1, TAB, rec, q, d, b, nb, acc);
    else block_q8_0(NA, TAB, rec, q, d, b, acc);
}

/* The eight rows of group g x activation rows a[0..NA): 8 results per row
 * (TAB: row i's pairs from its table, tab + i * k / 2). */
INLINE void tile(int NA, int L, int TAB, const unsigned char *rec, int64_t nb, int64_t k, const unsigned char *const *a,
                 const __m256i *tab, __m256 *out) {
    const int rb = R8_RECORD_BYTES(L);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const int16_t *q[4];
    const float *d[4];
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++) {
        split_act(a[i], k, &q[i], &d[i]);
        if (TAB) q[i] = (const int16_t *)(const void *)(tab + i * (k / 2));
    }
    for (int64_t b = 0; b < nb; b++, rec += rb) {
        prefetch_rec(rec, rb);
        block_any(NA, L, TAB, rec, q, d, b, nb, acc);
    }
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++) out[i] = acc[i];
}

/* One activation row against NS groups at once, each from its own stream
 * (rec[s]), interleaved block by block; each row's operations are tile(1)'s.
 * Why: from DRAM, a thread reading 4 distant streams in small steps kept
 * more misses in flight than one sequential stream (2 threads: 21-26 vs
 * 17-19 GB/s). */
INLINE void streams(int NS, int L, int TAB, const unsigned char *const *rec, int64_t nb, int64_t k,
                    const unsigned char *a, const __m256i *tab, __m256 *out) {
    const size_t rb = R8_RECORD_BYTES(L);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const int16_t *q;
    const float *d;
    split_act(a, k, &q, &d);
    if (TAB) q = (const int16_t *)(const void *)tab;
    for (int64_t b = 0; b < nb; b++) {
        _Pragma("GCC unroll 4")
        for (int s = 0; s < NS; s++) {
            const unsigned char *r = rec[s] + (size_t)b * rb;
            prefetch_rec(r, (int)rb);
            block_any(1, L, TAB, r, &q, &d, b, nb, &acc[s]);
        }
    }
    _Pragma("GCC unroll 4")
    for (int s = 0; s < NS; s++) out[s] = acc[s];
}

/* The activation row's pairs, each broadcast to a whole register: one
 * aligned load per multiply-add where a broadcast from the row cost more
 * (Zen 1, a one-row Q4_1 block: ~51 -> ~46 cycles a record). In the
 * caller's scratch, so a decode step allocates nothing. */
static void pair_table(const unsigned char *a, int64_t k, __m256i *t) {
    const int16_t *q = (const int16_t *)(const void *)a;
    for (int64_t j = 0; j < k / 2; j++) _mm256_store_si256(t + j, bcast32(q + 2 * j));
}

/* streams() with its stream count as a constant. */
INLINE void streams_ns(int ns, int L, int TAB, const unsigned char *const *rec, int64_t nb, int64_t k,
                       const unsigned char *a, const __m256i *tab, __m256 *out) {
    switch (ns) {
    case 4: streams(4, L, TAB, rec, nb, k, a, tab, out); break;
    case 3: streams(3, L, TAB, rec, nb, k, a, tab, out); break;
    case 2: streams(2, L, TAB, rec, nb, k, a, tab, out); break;
    default: streams(1, L, TAB, rec, nb, k, a, tab, out); break;
    }
}

/* One activation row x groups [g0, g1), cut into NSTREAM contiguous runs
 * read side by side. */
enum { NSTREAM = LLMK_R8_RUNS };
INLINE void rows_streams(int L, const struct llmk_r8 *w, int64_t g0, int64_t g1, int64_t r1, const unsigned char *a,
                         float *y, void *scratch) {
    __m256i *tab = scratch;
    if (tab) pair_table(a, w->k, tab);
    int64_t len = (g1 - g0 + NSTREAM - 1) / NSTREAM;
    size_t gb = (size_t)w->nb * w->block_bytes;
    for (int64_t i = 0; i < len; i++) {
        const unsigned char *rec[NSTREAM] = {0};
        int ns = 0;
        while (ns < NSTREAM && g0 + ns * len + i < g1) {
            rec[ns] = w->data + (size_t)(g0 + ns * len + i - w->g0) * gb;
            ns++;
        }
        __m256 out[NSTREAM];
        if (tab) streams_ns(ns, L, 1, rec, w->nb, w->k, a, tab, out);
        else streams_ns(ns, L, 0, rec, w->nb, w->k, a, NULL, out);
        for (int s = 0; s < ns; s++) store_group(y, g0 + s * len + i, r1, out[s]);
    }
}

/* NA activation rows x groups [g0, g1): full groups stored directly, a
 * partial last group (rows past r1) through a buffer. */
INLINE void rows_na(int NA, int L, const struct llmk_r8 *w, int64_t g0, int64_t g1, int64_t r1,
                    const unsigned char *const *a, float *y, size_t ys, void *scratch, size_t far) {
    (void)far; /* no second prefetch distance here (r8_entry.h) */
    /* Tables pay off over a long run of groups: a few rows against a
     * worker's whole range (batched decode, speculative verification:
     * B=2 decode +12%). Prefill's 64-row chunks (8 groups) would rebuild
     * them for every chunk, which cost what the loads saved. */
    __m256i *tab = g1 - g0 >= 16 ? scratch : NULL;
    _Pragma("GCC unroll 8")
    for (int i = 0; tab && i < NA; i++) pair_table(a[i], w->k, tab + i * (w->k / 2));
    for (int64_t g = g0; g < g1; g++) {
        const unsigned char *rec = w->data + (size_t)(g - w->g0) * (size_t)w->nb * w->block_bytes;
        __m256 out[4];
        if (tab) tile(NA, L, 1, rec, w->nb, w->k, a, tab, out);
        else tile(NA, L, 0, rec, w->nb, w->k, a, NULL, out);
        _Pragma("GCC unroll 8")
        for (int i = 0; i < NA; i++) store_group(y + (size_t)i * ys, g, r1, out[i]);
    }
}

#include "kernels/r8_entry.h"

void llmk_gemm_r8_a16_avx2(const struct llmk_r8 *w, int64_t r0, int64_t r1, const void *act, size_t as, int64_t m, float *y,
                           size_t ys, void *scratch, size_t scratch_bytes) {
    r8_mm(w, r0, r1, act, as, m, y, ys, scratch, scratch_bytes);
}
