/* AVX-512 attention chunks (f32 and f16 caches) for head sizes 64, 128 and
 * 256 (SmolLM2 and the llama family; Llama 3, Qwen2.5/3; gemma3): a head
 * row is hd / 16 512-bit registers, so a key's score takes hd / 16 FMAs and
 * a value's accumulation as many, where the AVX2 kernels take twice that
 * (with a 2-uop conversion per f16 load). At 1024 positions of context
 * those FMAs, not memory, bounded a decode step's attention; in a 512-token
 * prefill of a head-128 model (qwen3moe-shaped) attention was 27% of the
 * time on the AVX2 kernels.
 *
 * The same structure as attn_avx2.c, so the same promises: a query's bits
 * depend only on its values and its chunk's keys, the multi-query form gives
 * each query the single-query kernel's bits. A key's score: a 16-lane
 * partial dot in dimension order, folded to 8 lanes (low half + high half),
 * then attn_x86.h's 8-key reduction. They are not the AVX2 kernels' bits
 * (another summation order); other head sizes go to the AVX2 kernels, for
 * both forms. Each function is compiled per head size (hd a constant where
 * the entries below call it): the registers of a row are arrays the
 * compiler keeps in registers (hd 256: 16 of q, 16 of o). */
#include "kernels/kernels.h"

#include "kernels/attn_x86.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

static struct llmk_kernels avx2; /* head sizes other than 64, 128 and 256 */

enum { HD_MAX = 256, NR_MAX = HD_MAX / 16 };

INLINE __m512 ld16(const void *p, int64_t i, int f16) {
    if (f16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i)));
    return _mm512_loadu_ps((const float *)p + i);
}

/* The hd elements of a cache row from element b on, as f32 registers. */
INLINE void ld_row(const void *x, int64_t b, int hd, int f16, __m512 *row) {
    _Pragma("GCC unroll 16")
    for (int r = 0; r < hd / 16; r++) row[r] = ld16(x, b + 16 * r, f16);
}

INLINE __m256 fold(__m512 s) {
    return _mm256_add_ps(_mm512_castps512_ps256(s), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1)));
}

/* attn_x86.h's vexp on 16 lanes: the same operations lane for lane (each
 * exact or correctly rounded per element), so the same values. */
INLINE __m512 vexp16(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    __m512 r2 = _mm512_mul_ps(r, r);
    __m512 y = _mm512_fmadd_ps(p, r2, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(y, _mm512_castsi512_ps(e));
}

/* attn_x86.h's exp_scores, 16 scores at a time: each 16's halves added to
 * the 8-lane sum in order (low, then high), as two of its 8-steps would, so
 * the same sum; the ragged end is exp_scores' own. */
INLINE float exp_scores16(float *scores, int64_t n, float m) {
    __m512 vm = _mm512_set1_ps(m);
    __m256 acc = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 e = vexp16(_mm512_sub_ps(_mm512_loadu_ps(scores + j), vm));
        _mm512_storeu_ps(scores + j, e);
        acc = _mm256_add_ps(acc, _mm512_castps512_ps256(e));
        acc = _mm256_add_ps(acc, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
    }
    return hsum8(exp_scores_from(scores, j, n, m, acc)); /* the last 1..15 as exp_scores takes them */
}

/* A key's folded partial, or zero for a key past nk (scores8_g's value). */
INLINE __m256 j_fold(__m512 s, int j, int nk) { return j < nk ? fold(s) : _mm256_setzero_ps(); }

/* Rows j..j+nr of an f16 cache side -> nr rows of hd f32 at dst. */
INLINE void to_f32_rows(float *dst, const void *x, int64_t j, int nr, int64_t stride, int hd) {
    for (int r = 0; r < nr; r++)
        for (int d = 0; d < hd; d += 16) _mm512_store_ps(dst + r * hd + d, ld16(x, (j + r) * stride + d, 1));
}

/* The multi-query form: queries with the same key count (the query heads of
 * one KV head at one position) go through together, G at a time, each K/V
 * row loaded and converted once for the group. Each query's operations are
 * chunk()'s, in its order, so its bits are the single-query kernel's; what
 * grouping buys is independent work: accum_vh's FMAs on a head row form a
 * chain over the keys (4 cycles a key), which G queries interleave.
 * bench_attn 2 3 (3 queries a pass): 2.8 -> 1.9 ns a query and key with the
 * cache kept, 5.4-5.8 -> 3.8-4.1 with the weights streamed between layers. */
INLINE int group_max(int hd) { return hd == 64 ? 4 : 2; } /* head 256: scores8_tile's, accum_g in passes */

/* Scores of 8 keys (rows k + j * stride, j < nk; missing keys score 0 and
 * are never used) for G queries: a key's 16-lane partial dot in dimension
 * order, folded to 8 lanes, then sum8_keys. */
INLINE void scores8_g(int G, const float *const *q, const void *k, int64_t stride, int hd, int nk, int f16,
                      __m256 *out) {
    __m256 a[4][8];
    _Pragma("GCC unroll 8")
    for (int j = 0; j < 8; j++) {
        if (j >= nk) {
            _Pragma("GCC unroll 4")
            for (int g = 0; g < G; g++) a[g][j] = _mm256_setzero_ps();
            continue;
        }
        __m512 kr[NR_MAX];
        ld_row(k, j * stride, hd, f16, kr);
        _Pragma("GCC unroll 4")
        for (int g = 0; g < G; g++) {
            __m512 s = _mm512_mul_ps(_mm512_loadu_ps(q[g]), kr[0]);
            _Pragma("GCC unroll 16")
            for (int r = 1; r < hd / 16; r++) s = _mm512_fmadd_ps(_mm512_loadu_ps(q[g] + 16 * r), kr[r], s);
            a[g][j] = fold(s);
        }
    }
    _Pragma("GCC unroll 4")
    for (int g = 0; g < G; g++) out[g] = sum8_keys(a[g]);
}

/* Head 256: four keys at a time with the dimension loop outside, G query
 * registers and four key registers feeding 4 G multiply-adds per 16
 * dimensions (a key at a time, a head-256 row's 16 registers left the
 * query's 16 to memory operands: two loads a multiply-add, and groups of
 * one). Each (query, key) chain is scores8_g's, so the same bits. With
 * groups of two and the shared f32 rows, a 16-query prefill pass 8.1 -> 7.4
 * ns a query and key, a decode step's 4 queries 10.3 -> 7.4; at head 128
 * it was slower (3.2 -> 3.7), so heads of 64 and 128 keep scores8_g. */
INLINE void scores8_tile(int G, const float *const *q, const void *k, int64_t stride, int hd, int nk, int f16,
                         __m256 *out) {
    static const _Alignas(64) float zero_row[HD_MAX]; /* a missing key's row (any values would do) */
    __m256 a[4][8];
    _Pragma("GCC unroll 2")
    for (int half = 0; half < 2; half++) {
        const void *kr[4];
        _Pragma("GCC unroll 4")
        for (int jj = 0; jj < 4; jj++) {
            int j = 4 * half + jj;
            kr[jj] = j >= nk ? (const void *)zero_row
                     : f16   ? (const void *)((const uint16_t *)k + j * stride)
                             : (const void *)((const float *)k + j * stride);
        }
        __m512 s4[4][4];
        _Pragma("GCC unroll 16")
        for (int r = 0; r < hd / 16; r++) {
            __m512 kv[4], qv[4];
            _Pragma("GCC unroll 4")
            for (int jj = 0; jj < 4; jj++) kv[jj] = ld16(kr[jj], 16 * r, f16); /* zero_row: zeros as f32 or f16 */
            _Pragma("GCC unroll 4")
            for (int g = 0; g < G; g++) qv[g] = _mm512_loadu_ps(q[g] + 16 * r);
            _Pragma("GCC unroll 4")
            for (int g = 0; g < G; g++)
                _Pragma("GCC unroll 4")
                for (int jj = 0; jj < 4; jj++)
                    s4[g][jj] = r == 0 ? _mm512_mul_ps(qv[g], kv[jj]) : _mm512_fmadd_ps(qv[g], kv[jj], s4[g][jj]);
        }
        _Pragma("GCC unroll 4")
        for (int g = 0; g < G; g++)
            _Pragma("GCC unroll 4")
            for (int jj = 0; jj < 4; jj++) a[g][4 * half + jj] = j_fold(s4[g][jj], 4 * half + jj, nk);
    }
    _Pragma("GCC unroll 4")
    for (int g = 0; g < G; g++) out[g] = sum8_keys(a[g]);
}

/* o[g][0..hd) += sum over keys j in [j0, j1), in order, of p[g]_j * v_j for
 * G queries (one FMA per element and key: the same bits in one run or in
 * pieces). */
INLINE void accum_g(int G, float *const *o, const float *const *p, const void *v, int64_t j0, int64_t j1,
                    int64_t stride, int hd, int f16) {
    /* dimensions in passes of at most 16 accumulators (each element's sum
     * over the keys is its own chain: passes do not change its bits) */
    const int nr = hd / 16, pass = G * nr > 16 ? 16 / G : nr;
    _Pragma("GCC unroll 4")
    for (int r0 = 0; r0 < nr; r0 += pass) {
        __m512 ov[4][NR_MAX];
        _Pragma("GCC unroll 4")
        for (int g = 0; g < G; g++)
            _Pragma("GCC unroll 16")
            for (int r = 0; r < pass; r++) ov[g][r] = _mm512_loadu_ps(o[g] + 16 * (r0 + r));
        for (int64_t j = j0; j < j1; j++) {
            __m512 vr[NR_MAX];
            _Pragma("GCC unroll 16")
            for (int r = 0; r < pass; r++) vr[r] = ld16(v, j * stride + 16 * (r0 + r), f16);
            _Pragma("GCC unroll 4")
            for (int g = 0; g < G; g++) {
                __m512 pj = _mm512_set1_ps(p[g][j]);
                _Pragma("GCC unroll 16")
                for (int r = 0; r < pass; r++) ov[g][r] = _mm512_fmadd_ps(pj, vr[r], ov[g][r]);
            }
        }
        _Pragma("GCC unroll 4")
        for (int g = 0; g < G; g++)
            _Pragma("GCC unroll 16")
            for (int r = 0; r < pass; r++) _mm512_storeu_ps(o[g] + 16 * (r0 + r), ov[g][r]);
    }
}

/* Keys [j, j + 8) of a group of G queries with n keys each: their scaled
 * scores kept, vm[0..G) raised. kr: the keys' rows (stride apart). */
INLINE void score_g(int G, const float *const *q, const void *kr, int64_t j, int64_t n, int64_t stride, int hd,
                    __m256 vs, float *const *scores, __m256 *vm, int f16) {
    int nk = n - j >= 8 ? 8 : (int)(n - j);
    __m256 t[4];
    if (hd >= 256) scores8_tile(G, q, kr, stride, hd, nk, f16, t);
    else scores8_g(G, q, kr, stride, hd, nk, f16, t);
    _Pragma("GCC unroll 4")
    for (int g = 0; g < G; g++) vm[g] = keep_scores(_mm256_mul_ps(t[g], vs), nk, scores[g] + j, vm[g]);
}

/* f(G) with the group size as a constant, the sizes past group_max(hd)
 * compiled out. */
#define BY_G(G_, hd, f)                                    \
    do {                                                   \
        if (group_max(hd) >= 4 && (G_) == 4) f(4);         \
        else if (group_max(hd) >= 3 && (G_) == 3) f(3);    \
        else if (group_max(hd) >= 2 && (G_) == 2) f(2);    \
        else f(1);                                         \
    } while (0)

INLINE void chunk_multi_hd(int nq, const float *const *q, const int64_t *n, const void *k, const void *v,
                           int64_t stride, int hd, float scale, float *const *part, float *const *scores, int f16) {
    /* groups: runs of queries with the same key count, at most group_max(hd) */
    int g0[LLMK_ATTN_MULTI + 1], ng = 0;
    for (int i = 0; i < nq; i++)
        if (!ng || n[i] != n[g0[ng - 1]] || i - g0[ng - 1] == group_max(hd)) g0[ng++] = i;
    g0[ng] = nq;
    int64_t nmax = 0;
    for (int i = 0; i < nq; i++) nmax = n[i] > nmax ? n[i] : nmax;
    __m256 vs = _mm256_set1_ps(scale), vm[LLMK_ATTN_MULTI];
    for (int i = 0; i < nq; i++) vm[i] = _mm256_set1_ps(-INFINITY);
    _Alignas(64) float buf[8 * HD_MAX];
    /* Grouped queries convert each f16 row once per group; converting it
     * once for all of them into f32 (buf) paid only for heads of 256. Head
     * 64, bench_attn 4 3 ROWS (2-5 rows of 3 queries): 4.1, 4.1, 3.1 ns a
     * query and key shared, 2.0, 1.9, 2.0 grouped; pp64 at depth 1024
     * +6-15%; qwen3moe's head 128 pp64 at 1024 +5-30%. */
    int share = f16 && nq >= MULTI_SHARE_MIN && hd >= 256;
    for (int64_t j = 0; j < nmax; j += 8) {
        prefetch_rows(k, j + 8, j + 16, nmax, stride, hd, f16);
        prefetch_rows(v, j, j + 8, nmax, stride, hd, f16);
        if (share) to_f32_rows(buf, k, j, nmax - j < 8 ? (int)(nmax - j) : 8, stride, hd);
        const void *kj = share ? (const void *)buf
                         : f16 ? (const void *)((const uint16_t *)k + j * stride)
                               : (const void *)((const float *)k + j * stride);
        for (int x = 0; x < ng; x++) {
            int i = g0[x];
            if (j >= n[i]) continue;
#define SCORE(G) score_g(G, q + i, kj, j, n[i], share ? hd : stride, hd, vs, scores + i, vm + i, f16 && !share)
            BY_G(g0[x + 1] - i, hd, SCORE);
#undef SCORE
        }
    }
    float *o[LLMK_ATTN_MULTI];
    for (int i = 0; i < nq; i++) {
        float m = hmax8(vm[i]);
        part[i][1] = exp_scores16(scores[i], n[i], m);
        part[i][0] = m;
        o[i] = part[i] + 2;
        memset(o[i], 0, (size_t)hd * sizeof(float));
    }
    const float *const *p = (const float *const *)scores;
    if (!share) { /* each group's keys in one run, its accumulators in registers */
        for (int x = 0; x < ng; x++) {
            int i = g0[x];
#define ACC(G) accum_g(G, o + i, p + i, v, 0, n[i], stride, hd, f16)
            BY_G(g0[x + 1] - i, hd, ACC);
#undef ACC
        }
        return;
    }
    for (int64_t j0 = 0; j0 < nmax; j0 += 8) {
        to_f32_rows(buf, v, j0, nmax - j0 < 8 ? (int)(nmax - j0) : 8, stride, hd);
        for (int x = 0; x < ng; x++) {
            int i = g0[x];
            int64_t j1 = j0 + 8 < n[i] ? j0 + 8 : n[i];
            if (j1 <= j0) continue;
            const float *pj[4];
            for (int g = 0; g < g0[x + 1] - i; g++) pj[g] = p[i + g] + j0;
#define ACC(G) accum_g(G, o + i, pj, buf, 0, j1 - j0, hd, hd, 0)
            BY_G(g0[x + 1] - i, hd, ACC);
#undef ACC
        }
    }
}

/* One query: the multi-query form's operations for a group of one. */
INLINE void chunk(const float *q, const void *k, const void *v, int64_t n, int64_t stride, int hd, float scale,
                  float *part, float *scores, int f16) {
    chunk_multi_hd(1, &q, &n, k, v, stride, hd, scale, &part, &scores, f16);
}

/* f(HD) with the head size as a constant, for the sizes this file takes. */
#define BY_HD(hd, f) \
    switch (hd) {      \
    case 64: f(64); break;   \
    case 128: f(128); break; \
    default: f(256); break;  \
    }
static int takes(int hd) { return hd == 64 || hd == 128 || hd == 256; }

static void chunk_f32(const float *q, const void *k, const void *v, int64_t n, int64_t stride, int hd, float scale,
                      float *part, float *scores) {
#define ONE(HD) chunk(q, k, v, n, stride, HD, scale, part, scores, 0)
    if (!takes(hd)) avx2.attn_f32(q, k, v, n, stride, hd, scale, part, scores);
    else BY_HD(hd, ONE)
#undef ONE
}
static void chunk_f16(const float *q, const void *k, const void *v, int64_t n, int64_t stride, int hd, float scale,
                      float *part, float *scores) {
#define ONE(HD) chunk(q, k, v, n, stride, HD, scale, part, scores, 1)
    if (!takes(hd)) avx2.attn_f16(q, k, v, n, stride, hd, scale, part, scores);
    else BY_HD(hd, ONE)
#undef ONE
}
static void multi_f32(int nq, const float *const *q, const int64_t *n, const void *k, const void *v, int64_t stride,
                      int hd, float scale, float *const *part, float *const *scores) {
#define ONE(HD) chunk_multi_hd(nq, q, n, k, v, stride, HD, scale, part, scores, 0)
    if (!takes(hd)) avx2.attn_multi_f32(nq, q, n, k, v, stride, hd, scale, part, scores);
    else BY_HD(hd, ONE)
#undef ONE
}
static void multi_f16(int nq, const float *const *q, const int64_t *n, const void *k, const void *v, int64_t stride,
                      int hd, float scale, float *const *part, float *const *scores) {
#define ONE(HD) chunk_multi_hd(nq, q, n, k, v, stride, HD, scale, part, scores, 1)
    if (!takes(hd)) avx2.attn_multi_f16(nq, q, n, k, v, stride, hd, scale, part, scores);
    else BY_HD(hd, ONE)
#undef ONE
}

void llmk_kernels_attn_avx512(struct llmk_kernels *k) {
    llmk_kernels_attn_avx2(&avx2);
    llmk_kernels_attn_avx2(k);
    k->attn_f32 = chunk_f32, k->attn_f16 = chunk_f16;
    k->attn_multi_f32 = multi_f32, k->attn_multi_f16 = multi_f16;
}
