/* The walks of the AVX-512 r8 kernel files (r8_avx512.c: A16, r8_a8_avx512.c:
 * A8) over their two-group block code, compiled into each with its ISA
 * flags. Before including, a file defines
 *   R8_ACT_Q                 the activation element type (int16_t, int8_t)
 *   R8_SPLIT_ACT(a, k, q, d) an activation row's elements and f32 scales
 *   block_any(NA, L, ra, rb, q, d, b, nb, acc): block b of the two records
 *       ra, rb (the same one for a group alone) x NA activation rows, into
 *       acc[0..NA) (lanes 0-7: ra's rows, 8-15: rb's)
 * and R8_NA_MAX; it then includes r8_entry.h for the entry. The walks only
 * order blocks and groups: each lane's arithmetic is block_any's, block
 * after block, so every walk gives the same bits. */
#ifndef LLMK_KERNELS_R8_WALK_AVX512_H
#define LLMK_KERNELS_R8_WALK_AVX512_H

#include "kernels/r8_x86.h"

/* Two groups' records (ra, rb: the same one for a group alone) x activation
 * rows a[0..NA); a compact form's scales from pre where not NULL; each
 * record's prefetch dist bytes on (into L2 with l2), or prefetch_block's
 * stream with dist 0. */
INLINE void tile(int NA, int L, const unsigned char *ra, const unsigned char *rb, int64_t nb, int64_t k,
                 const unsigned char *const *a, const float *pre, size_t dist, int l2, __m512 *out) {
    __m512 acc[R8_NA_MAX];
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++) acc[i] = _mm512_setzero_ps();
    const R8_ACT_Q *q[R8_NA_MAX];
    const float *d[R8_NA_MAX];
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++) R8_SPLIT_ACT(a[i], k, &q[i], &d[i]);
    int two = ra != rb;
    for (int64_t b = 0; b < nb; b++) {
        size_t o = llmk_r8_record_offset(L, b);
        prefetch_block_at(L, ra + o, b, dist, l2);
        if (two) prefetch_block_at(L, rb + o, b, dist, l2);
        block_any(NA, L, ra + o, rb + o, q, d, b, nb, pre, acc);
    }
    _Pragma("GCC unroll 8")
    for (int i = 0; i < NA; i++) out[i] = acc[i];
}

INLINE __m256 lo8(__m512 v) { return _mm512_castps512_ps256(v); }
INLINE __m256 hi8(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }

/* The decode walk, as the AVX2 kernel's: LLMK_R8_RUNS contiguous runs of
 * groups side by side (r8.h). */
enum { NSTREAM = LLMK_R8_RUNS };
_Static_assert(NSTREAM == 4, "the decode walk pairs runs 0+1 and 2+3");
/* Step i of the runs (len groups each) over [g0, g1): the records of the
 * runs that reach it into rec, an odd one out paired with itself; returns
 * how many runs do. */
INLINE int run_records(const struct llmk_r8 *w, int64_t g0, int64_t g1, int64_t len, int64_t i,
                       const unsigned char **rec) {
    size_t gb = (size_t)w->nb * w->block_bytes;
    int ns = 0;
    while (ns < NSTREAM && g0 + ns * len + i < g1) {
        rec[ns] = w->data + (size_t)(g0 + ns * len + i - w->g0) * gb;
        ns++;
    }
    if (ns % 2) rec[ns] = rec[ns - 1];
    return ns;
}

/* One activation row (decode), or a few (a verify step's drafts, a small
 * batch), walk the runs in pairs, interleaved block by block. Each lane's
 * arithmetic is tile()'s, block after block: the same bits. */
/* The most rows rows_few takes. At 4 its accumulators and block sums no
 * longer fit the registers (a 4-row verify step at depth 512 took 4.1-4.3
 * ms through it, 3.4-3.9 through rows_na); once rows_na prefetched each
 * next pair, 3 rows went faster through it too (best of 60 at depth 512,
 * three alternations: 2.99, 3.10, 3.06 -> 2.54-2.74, 2.68-2.76, 2.83-2.97
 * ms); 2 rows were a draw. */
#define R8_HAVE_FEW_ROWS 2
INLINE void streams_few(int NA, int NP, int L, const unsigned char *const *rec, int64_t nb, int64_t k,
                        const unsigned char *const *a, __m512 out[][R8_HAVE_FEW_ROWS]) {
    __m512 acc[2][R8_HAVE_FEW_ROWS];
    const R8_ACT_Q *q[R8_HAVE_FEW_ROWS];
    const float *d[R8_HAVE_FEW_ROWS];
    _Pragma("GCC unroll 4")
    for (int i = 0; i < NA; i++) {
        acc[0][i] = acc[1][i] = _mm512_setzero_ps();
        R8_SPLIT_ACT(a[i], k, &q[i], &d[i]);
    }
    for (int64_t b = 0; b < nb; b++) {
        _Pragma("GCC unroll 2")
        for (int p = 0; p < NP; p++) {
            size_t o = llmk_r8_record_offset(L, b);
            const unsigned char *ra = rec[2 * p] + o, *rb = rec[2 * p + 1] + o;
            prefetch_block(L, ra, b);
            if (rb != ra) prefetch_block(L, rb, b);
            block_any(NA, L, ra, rb, q, d, b, nb, NULL, acc[p]);
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
    for (int64_t i = 0; i < len; i++) {
        const unsigned char *rec[NSTREAM];
        int ns = run_records(w, g0, g1, len, i, rec);
        __m512 out[2][R8_HAVE_FEW_ROWS];
        if (ns > 2) streams_few(NA, 2, L, rec, w->nb, w->k, a, out);
        else streams_few(NA, 1, L, rec, w->nb, w->k, a, out);
        for (int s = 0; s < ns; s++)
            for (int j = 0; j < NA; j++)
                store_group(y + (size_t)j * ys, g0 + s * len + i, r1,
                            s % 2 ? hi8(out[s / 2][j]) : lo8(out[s / 2][j]));
    }
}

/* One activation row: rows_few's walk with NA = 1. */
INLINE void rows_streams(int L, const struct llmk_r8 *w, int64_t g0, int64_t g1, int64_t r1, const unsigned char *a,
                         float *y, void *scratch) {
    (void)scratch; /* vpbroadcastd from memory is a plain load here: no tables */
    const unsigned char *as[1] = {a};
    rows_few(1, L, w, g0, g1, r1, as, y, 0);
}

/* NA activation rows x groups [g0, g1), two groups at a time; each pair's
 * records prefetched into L1 as the pair before it is read (the stream's
 * fixed 4 KB ahead fell behind the pair's second group wherever a group
 * is longer than that: Q8_0 at k = 576 is 4.9 KB; one thread, 8 rows of
 * a 49152 x 576 Q8_0 from DRAM 3.6 -> 1.5 ms, 4 rows 1.5 -> 1.0, Q4_1
 * unchanged), or with far (r8_entry.h's r8_mm) the next range's into L2. */
INLINE void rows_na(int NA, int L, const struct llmk_r8 *w, int64_t g0, int64_t g1, int64_t r1,
                    const unsigned char *const *a, float *y, size_t ys, void *scratch, size_t far) {
    (void)scratch;
    size_t gb = (size_t)w->nb * w->block_bytes;
    for (int64_t g = g0; g < g1; g += 2) {
        const unsigned char *ra = w->data + (size_t)(g - w->g0) * gb;
        const unsigned char *rb = g + 1 < g1 ? ra + gb : ra;
        __m512 out[R8_NA_MAX];
        tile(NA, L, ra, rb, w->nb, w->k, a, NULL, far ? far : 2 * gb, far != 0, out);
        _Pragma("GCC unroll 8")
        for (int i = 0; i < NA; i++) {
            store_group(y + (size_t)i * ys, g, r1, lo8(out[i]));
            if (g + 1 < g1) store_group(y + (size_t)i * ys, g + 1, r1, hi8(out[i]));
        }
    }
}

/* Prefill on a compact form: a group pair's scales converted once into
 * pre for up to R8_PRE_TILES tiles of activation rows, where each tile
 * would convert them again (5-9% of a Q4_K_M file's pp512); Q5C's, Q2C's,
 * Q3C's and Q6C's records expanded once into the Q8_0, Q8S2 and Q8S records
 * the tiles then read. The tiles go in
 * the inner loop only that far, so that their rows stay in L2 and the
 * pair's records in L1. Each lane's arithmetic is tile()'s: the same bits. */
enum { R8_PRE_TILES = 4, R8_PRE_MAX_NB = 512 /* 64 KB of stack */ };
/* The most blocks a row of an expanding form may have for rows_pre: a pair's
 * expanded records fill the same 64 KB. */
INLINE int64_t r8_pre_expand_nb(int L) { return (int64_t)(R8_PRE_MAX_NB * 32 * sizeof(float) / (2 * r8_expanded_bytes(L))); }
#define R8_HAVE_PRE 1

INLINE void compact_pre(int L, const unsigned char *ra, const unsigned char *rb, int64_t nb, float *pre) {
    for (int64_t b = 0; b < nb; b++) {
        size_t o = llmk_r8_record_offset(L, b);
        __m512 x, y;
        compact_scales(L, ra + o, rb + o, b, NULL, &x, &y);
        _mm512_store_ps(pre + 32 * b, x);
        _mm512_store_ps(pre + 32 * b + 16, y);
    }
}

/* tile() with the tile's row count as a constant. */
INLINE void tile_pre(int na, int L, const unsigned char *ra, const unsigned char *rb, int64_t nb, int64_t k,
                     const unsigned char *const *a, const float *pre, __m512 *out) {
    switch (na) {
    case 8: tile(8, L, ra, rb, nb, k, a, pre, 0, 0, out); break;
    case 7: tile(7, L, ra, rb, nb, k, a, pre, 0, 0, out); break;
    case 6: tile(6, L, ra, rb, nb, k, a, pre, 0, 0, out); break;
    case 5: tile(5, L, ra, rb, nb, k, a, pre, 0, 0, out); break;
    case 4: tile(4, L, ra, rb, nb, k, a, pre, 0, 0, out); break;
    case 3: tile(3, L, ra, rb, nb, k, a, pre, 0, 0, out); break;
    case 2: tile(2, L, ra, rb, nb, k, a, pre, 0, 0, out); break;
    default: tile(1, L, ra, rb, nb, k, a, pre, 0, 0, out); break;
    }
}

/* m activation rows (as bytes apart) x groups [g0, g1) of a compact form
 * with nb <= R8_PRE_MAX_NB. */
INLINE void rows_pre(int L, const struct llmk_r8 *w, int64_t g0, int64_t g1, int64_t r1, const unsigned char *act,
                     size_t as, int64_t m, float *y, size_t ys) {
    _Static_assert(R8_NA_MAX == 8, "tile_pre takes up to 8 rows");
    _Alignas(64) float pre[R8_PRE_MAX_NB * 32];
    size_t gb = (size_t)w->nb * w->block_bytes;
    for (int64_t i0 = 0; i0 < m; i0 += R8_NA_MAX * R8_PRE_TILES) {
        int64_t i1 = i0 + R8_NA_MAX * R8_PRE_TILES < m ? i0 + R8_NA_MAX * R8_PRE_TILES : m;
        for (int64_t g = g0; g < g1; g += 2) {
            const unsigned char *ra = w->data + (size_t)(g - w->g0) * gb;
            const unsigned char *rb = g + 1 < g1 ? ra + gb : ra;
            if (r8_expands(L)) { /* the pair as groups of the portable form in pre */
                size_t es = r8_expanded_bytes(L);
                unsigned char *ea = (unsigned char *)pre, *eb = ea + (size_t)w->nb * es;
                int two = rb != ra;
                for (int64_t b = 0; b < w->nb; b++) {
                    size_t o = llmk_r8_record_offset(L, b);
                    r8_expand_pair(L, ra + o, rb + o, b, ea + (size_t)b * es, eb + (size_t)b * es);
                }
                ra = ea, rb = two ? eb : ea;
            } else {
                compact_pre(L, ra, rb, w->nb, pre);
            }
            for (int64_t i = i0; i < i1; i += R8_NA_MAX) {
                int na = i1 - i < R8_NA_MAX ? (int)(i1 - i) : R8_NA_MAX;
                const unsigned char *a[R8_NA_MAX];
                for (int j = 0; j < R8_NA_MAX; j++) a[j] = act + (size_t)(i + (j < na ? j : 0)) * as;
                __m512 out[R8_NA_MAX];
                if (r8_expands(L)) tile_pre(na, r8_expanded_form(L), ra, rb, w->nb, w->k, a, NULL, out);
                else tile_pre(na, L, ra, rb, w->nb, w->k, a, pre, out);
                for (int j = 0; j < na; j++) {
                    store_group(y + (size_t)(i + j) * ys, g, r1, lo8(out[j]));
                    if (g + 1 < g1) store_group(y + (size_t)(i + j) * ys, g + 1, r1, hi8(out[j]));
                }
            }
        }
    }
}

#endif
