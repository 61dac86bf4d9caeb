/* AVX2 + FMA + F16C dot kernels (this file is built with those flags and only
 * put in the kernel table when CPUID reports them). Integer block sums are exact (same
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
#include "kernels/kernels.h"

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

/* ---- Q4_1 x Q8_1 and Q8_0 x Q8_0 ----------------------------------------------
 * The fixed computation for one (weight row, activation row) pair, block by
 * block in order: the block's exact integer sum in 8 i32 lanes, converted and
 * fused into an 8-lane f32 accumulator with the scale product dw*da; for Q4_1
 * the min term mw*sa goes to a separate 4-lane accumulator. y = hsum8(acc)
 * (+ the min sum). Both scale products come from one f16 pair conversion:
 * the weight block's (d, m) times the activation block's (d, s) (pre-converted
 * once per call), so a block costs no scalar scale work.
 * One tile kernel runs R weight rows x M activation rows with the same
 * per-pair sequence: the row kernel (matvec) uses R = 4, M = 1 (four
 * independent accumulation chains), the multi-activation kernel R = 1, M = 4
 * (each unpacked weight block serves four activation rows). Results are
 * therefore bitwise identical across kernels and groupings. */

enum {
    TILE_M = 4, /* activation rows per weight-block unpack in dotm */
    TILE_R = 4, /* weight rows per pass in the row kernel */
    MAXB = 256  /* activation scales pre-converted on the stack up to this many blocks */
};

static inline int32_t ld32(const void *p) {
    int32_t v;
    __builtin_memcpy(&v, p, 4);
    return v;
}

/* A block's f16 head as f32 x4: pair -> (d, m|s, d, m|s), else (d, d, d, d). */
static inline __m128 head4(const void *blk, int pair) {
    if (pair) return _mm_cvtph_ps(_mm_set1_epi32(ld32(blk)));
    return _mm_cvtph_ps(_mm_set1_epi16((short)llmk_ld_u16(blk)));
}

/* 16 bytes of nibbles -> 32 u8 in element order: low nibbles (0..15) in the
 * low lane, high nibbles (16..31) in the high lane (one broadcast load, one
 * variable shift, one and). */
static inline __m256i nib32(const uint8_t *qs) {
    __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    return _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_setr_epi64x(0, 0, 4, 4)), _mm256_set1_epi8(0x0f));
}

/* u8 x s8 products of one block summed into 8 i32 lanes */
static inline __m256i mad_us(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
static inline __m256i ld256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* Per-codec pieces: the weight operand of block b (shared by every
 * activation row) and its product with an activation block. Q8_0 is signed
 * x signed: |w| as the unsigned operand, sign(a, w) as the signed one (a never
 * holds -128: the activation quantizer produces [-127, 127]). */
#define Q4_1_WOP(wb, b) nib32(((const llmk_block_q4_1 *)(wb))[b].qs)
#define Q4_1_PROD(wop, ab, b) mad_us(wop, ld256(((const llmk_block_q8_1 *)(ab))[b].qs))
#define Q8_0_WOP(wb, b) ld256(((const llmk_block_q8_0 *)(wb))[b].qs)
#define Q8_0_PROD(wop, ab, b)                                                                  \
    mad_us(_mm256_sign_epi8(wop, wop), _mm256_sign_epi8(ld256(((const llmk_block_q8_0 *)(ab))[b].qs), wop))

/* R weight rows (ws bytes apart) x M activation rows (as bytes apart):
 * y[i * ys + r] = dot. Activation heads come from pre (nb per row, pre_stride
 * apart) or, when pre is NULL, are converted here (the same values). */
#define DEFINE_TILE(CODEC, WBLK, ABLK, PAIR)                                                   \
    static inline __attribute__((always_inline)) void CODEC##_tile(                            \
        int64_t nb, const char *w, size_t ws, int R, const char *a, size_t as, int M,          \
        const __m128 *pre, size_t pre_stride, float *y, size_t ys) {                           \
        __m256 acc[TILE_R][TILE_M];                                                            \
        __m128 accm[TILE_R][TILE_M];                                                           \
        for (int r = 0; r < R; r++)                                                            \
            for (int i = 0; i < M; i++) acc[r][i] = _mm256_setzero_ps(), accm[r][i] = _mm_setzero_ps(); \
        for (int64_t b = 0; b < nb; b++) {                                                     \
            __m128 pa[TILE_M];                                                                 \
            _Pragma("GCC unroll 4") for (int i = 0; i < M; i++)                                \
                pa[i] = pre ? pre[(size_t)i * pre_stride + (size_t)b]                          \
                            : head4((const ABLK *)(a + (size_t)i * as) + b, PAIR);             \
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                              \
                const WBLK *wb = (const WBLK *)(w + (size_t)r * ws);                           \
                __m256i wop = CODEC##_WOP(wb, b);                                              \
                __m128 hw = head4(wb + b, PAIR);                                               \
                _Pragma("GCC unroll 4") for (int i = 0; i < M; i++) {                          \
                    __m128 prod = _mm_mul_ps(hw, pa[i]);                                       \
                    __m256i is = CODEC##_PROD(wop, a + (size_t)i * as, b);                     \
                    acc[r][i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_broadcastss_ps(prod), acc[r][i]); \
                    if (PAIR) accm[r][i] = _mm_add_ps(accm[r][i], prod);                       \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        for (int r = 0; r < R; r++)                                                            \
            for (int i = 0; i < M; i++) {                                                      \
                float v = hsum8(acc[r][i]);                                                    \
                if (PAIR) v += _mm_cvtss_f32(_mm_shuffle_ps(accm[r][i], accm[r][i], 1));       \
                y[(size_t)i * ys + (size_t)r] = v;                                             \
            }                                                                                  \
    }
DEFINE_TILE(Q4_1, llmk_block_q4_1, llmk_block_q8_1, 1)
DEFINE_TILE(Q8_0, llmk_block_q8_0, llmk_block_q8_0, 0)

/* Pre-convert the activation heads of M rows (nb <= MAXB blocks each). */
static inline void pre_heads(int pair, size_t bs, int64_t nb, const char *a, size_t as, int M, __m128 *pre,
                             size_t pre_stride) {
    for (int i = 0; i < M; i++)
        for (int64_t b = 0; b < nb; b++) pre[(size_t)i * pre_stride + (size_t)b] = head4(a + (size_t)i * as + (size_t)b * bs, pair);
}

/* Row kernel: every weight row against one activation row, TILE_R rows a pass. */
#define DEFINE_DOT(CODEC, NAME, ABLK, PAIR)                                                    \
    static void NAME(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) { \
        int64_t nb = k / LLMK_QK;                                                              \
        __m128 pre[MAXB];                                                                      \
        const __m128 *pp = NULL;                                                               \
        if (nb <= MAXB) pre_heads(PAIR, sizeof(ABLK), nb, a, 0, 1, pre, 0), pp = pre;          \
        int64_t r = 0;                                                                         \
        for (; r + TILE_R <= nrows; r += TILE_R)                                               \
            CODEC##_tile(nb, (const char *)w + (size_t)r * ws, ws, TILE_R, a, 0, 1, pp, 0, y + r, 0); \
        for (; r < nrows; r++)                                                                 \
            CODEC##_tile(nb, (const char *)w + (size_t)r * ws, ws, 1, a, 0, 1, pp, 0, y + r, 0); \
    }
DEFINE_DOT(Q4_1, dot_q4_1, llmk_block_q8_1, 1)
DEFINE_DOT(Q8_0, dot_q8_0, llmk_block_q8_0, 0)

/* Multi-activation kernel: y[i * ys + r] = dot(weight row r, activation row
 * i) for r < nrows, i < m. Activation rows go TILE_M at a time; inside a tile
 * each weight row's blocks are unpacked once for all of its rows. */
#define DEFINE_DOTM(CODEC, NAME, ABLK, PAIR)                                                   \
    static void NAME(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, size_t as, \
                     int64_t m, float *y, size_t ys) {                                         \
        int64_t nb = k / LLMK_QK;                                                              \
        __m128 pre[TILE_M * MAXB];                                                             \
        for (int64_t i0 = 0; i0 < m; i0 += TILE_M) {                                           \
            int M = m - i0 < TILE_M ? (int)(m - i0) : TILE_M;                                  \
            const char *at0 = (const char *)a + (size_t)i0 * as;                               \
            const __m128 *pp = NULL;                                                           \
            if (nb <= MAXB) pre_heads(PAIR, sizeof(ABLK), nb, at0, as, M, pre, MAXB), pp = pre; \
            float *yt = y + (size_t)i0 * ys;                                                   \
            for (int64_t r = 0; r < nrows; r++) {                                              \
                const char *wr = (const char *)w + (size_t)r * ws;                             \
                switch (M) {                                                                   \
                case 4: CODEC##_tile(nb, wr, ws, 1, at0, as, 4, pp, MAXB, yt + r, ys); break;  \
                case 3: CODEC##_tile(nb, wr, ws, 1, at0, as, 3, pp, MAXB, yt + r, ys); break;  \
                case 2: CODEC##_tile(nb, wr, ws, 1, at0, as, 2, pp, MAXB, yt + r, ys); break;  \
                default: CODEC##_tile(nb, wr, ws, 1, at0, as, 1, pp, MAXB, yt + r, ys); break; \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }
DEFINE_DOTM(Q4_1, dotm_q4_1, llmk_block_q8_1, 1)
DEFINE_DOTM(Q8_0, dotm_q8_0, llmk_block_q8_0, 0)


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

/* vec_dotm for float rows: two activation rows per pass over a weight row,
 * each weight vector loaded (converted from f16/bf16) once for both; every
 * (row, activation) pair runs NAME##_rows's operations in its order, so the
 * bits are vec_dot's. (Verifying drafts and batched decode on an F16 model
 * paid the conversion once per activation row.) */
#define FLOAT_ROWS2(NAME, ESZ, LOAD8, LOAD1)                                                     \
    static void NAME##_rows2(int R, const char *w, size_t ws, const float *x, const float *z,    \
                             float *y, float *v, int64_t k) {                                    \
        for (int r = 0; r < R; r++) {                                                          \
            const char *row = w + (size_t)r * ws;                                              \
            __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;                         \
            __m256 t0 = s0, t1 = s0, t2 = s0, t3 = s0;                                         \
            int64_t i = 0;                                                                     \
            for (; i + 32 <= k; i += 32) {                                                     \
                __m256 w0 = LOAD8(row + (i + 0) * ESZ), w1 = LOAD8(row + (i + 8) * ESZ);       \
                __m256 w2 = LOAD8(row + (i + 16) * ESZ), w3 = LOAD8(row + (i + 24) * ESZ);     \
                s0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i + 0), s0);                      \
                t0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(z + i + 0), t0);                      \
                s1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + i + 8), s1);                      \
                t1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(z + i + 8), t1);                      \
                s2 = _mm256_fmadd_ps(w2, _mm256_loadu_ps(x + i + 16), s2);                     \
                t2 = _mm256_fmadd_ps(w2, _mm256_loadu_ps(z + i + 16), t2);                     \
                s3 = _mm256_fmadd_ps(w3, _mm256_loadu_ps(x + i + 24), s3);                     \
                t3 = _mm256_fmadd_ps(w3, _mm256_loadu_ps(z + i + 24), t3);                     \
            }                                                                                  \
            for (; i + 8 <= k; i += 8) {                                                       \
                __m256 w0 = LOAD8(row + i * ESZ);                                              \
                s0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i), s0);                          \
                t0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(z + i), t0);                          \
            }                                                                                  \
            float s = hsum8(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));      \
            float t = hsum8(_mm256_add_ps(_mm256_add_ps(t0, t1), _mm256_add_ps(t2, t3)));      \
            for (; i < k; i++) {                                                               \
                float wi = LOAD1(row + i * ESZ);                                               \
                s += wi * x[i];                                                                \
                t += wi * z[i];                                                                \
            }                                                                                  \
            y[r] = s, v[r] = t;                                                                \
        }                                                                                      \
    }                                                                                          \
    static void dotm_##NAME(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, \
                            size_t as, int64_t m, float *y, size_t ys) {                       \
        const char *ab = a;                                                                    \
        int64_t j = 0;                                                                         \
        for (; j + 2 <= m; j += 2)                                                             \
            NAME##_rows2((int)nrows, (const char *)w, ws, (const float *)(ab + (size_t)j * as), \
                         (const float *)(ab + (size_t)(j + 1) * as), y + (size_t)j * ys,       \
                         y + (size_t)(j + 1) * ys, k);                                         \
        if (j < m) NAME##_rows((int)nrows, (const char *)w, ws, ab + (size_t)j * as, y + (size_t)j * ys, k); \
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
FLOAT_ROWS2(f32, 4, ld8_f32, ld1_f32)
FLOAT_ROWS2(f16, 2, ld8_f16, ld1_f16)
FLOAT_ROWS2(bf16, 2, ld8_bf16, ld1_bf16)

void llmk_kernels_dot_avx2(struct llmk_type_kernels *k) {
    k[LLMK_TYPE_Q4_0].vec_dot = dot_q4_0, k[LLMK_TYPE_Q4_0].vec_dot_name = "q4_0_avx2";
    k[LLMK_TYPE_Q4_1].vec_dot = dot_q4_1, k[LLMK_TYPE_Q4_1].vec_dot_name = "q4_1_avx2";
    k[LLMK_TYPE_Q5_0].vec_dot = dot_q5_0, k[LLMK_TYPE_Q5_0].vec_dot_name = "q5_0_avx2";
    k[LLMK_TYPE_Q5_1].vec_dot = dot_q5_1, k[LLMK_TYPE_Q5_1].vec_dot_name = "q5_1_avx2";
    k[LLMK_TYPE_Q8_0].vec_dot = dot_q8_0, k[LLMK_TYPE_Q8_0].vec_dot_name = "q8_0_avx2";
    k[LLMK_TYPE_F32].vec_dot = dot_f32, k[LLMK_TYPE_F32].vec_dot_name = "f32_avx2";
    k[LLMK_TYPE_F16].vec_dot = dot_f16, k[LLMK_TYPE_F16].vec_dot_name = "f16_avx2";
    k[LLMK_TYPE_BF16].vec_dot = dot_bf16, k[LLMK_TYPE_BF16].vec_dot_name = "bf16_avx2";

    k[LLMK_TYPE_Q4_1].vec_dotm = dotm_q4_1;
    k[LLMK_TYPE_Q8_0].vec_dotm = dotm_q8_0;
    k[LLMK_TYPE_F32].vec_dotm = dotm_f32;
    k[LLMK_TYPE_F16].vec_dotm = dotm_f16;
    k[LLMK_TYPE_BF16].vec_dotm = dotm_bf16;
}
