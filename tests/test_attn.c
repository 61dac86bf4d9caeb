/* The executor's attention chunk kernels (src/kernels/attn*.c) for f32, f16
 * and q8_0 caches: each kernel's partials, merged by llmk_attn_merge over
 * chunks laid out as the executor lays out its cache (rows of n_head_kv
 * heads, a query reading one head), against an f64 softmax over the values
 * the cache holds (dequantized); and the AVX2 kernels against the _ref ones
 * within a stated bound (they differ in summation order, FMA and the vector
 * exp, so not bitwise). */
#include "check.h"
#include "codec/codec.h"
#include "codec/half.h"
#include "kernels/kernels.h"

#include <stdlib.h>
#include <string.h>

enum { HKV = 2, HEAD = 1, MAXN = 300, MAXHD = 512 };

static uint64_t rng = 7;
static float frand(void) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rng >> 40) & 0xffffff) / (float)(1 << 23) - 1.0f;
}

static float worst_vs64, worst_avx_ref; /* largest errors seen, relative to max |v| */

/* The cache of n positions in type t: bytes, and the values it holds (f32). */
static unsigned char *make_cache(uint32_t t, const float *x, int64_t n, int64_t stride, float *held, size_t *rb) {
    uint64_t b = 0;
    llmk_row_bytes(t, (uint64_t)stride, &b);
    *rb = (size_t)b;
    unsigned char *c = malloc((size_t)n * *rb);
    for (int64_t j = 0; j < n; j++) {
        unsigned char *row = c + (size_t)j * *rb;
        if (t == LLMK_TYPE_F32) memcpy(row, x + j * stride, (size_t)stride * sizeof(float));
        else if (t == LLMK_TYPE_F16)
            for (int64_t i = 0; i < stride; i++) ((uint16_t *)row)[i] = llmk_fp32_to_fp16(x[j * stride + i]);
        else llmk_quantize_row(t, x + j * stride, row, stride);
        llmk_dequantize_row(t, row, held + j * stride, stride);
    }
    return c;
}

/* out[hd] of one query over n keys, computed chunk by chunk with fn. */
static void attend(llmk_attn_chunk_fn fn, const float *q, const unsigned char *k, const unsigned char *v, size_t rb,
                   size_t head_off, int64_t n, int64_t stride, int hd, float *out, float *m0) {
    static float parts[(MAXN / LLMK_ATTN_CHUNK + 1) * (MAXHD + 2)], scores[LLMK_ATTN_CHUNK];
    int nc = (int)((n + LLMK_ATTN_CHUNK - 1) / LLMK_ATTN_CHUNK);
    for (int c = 0; c < nc; c++) {
        int64_t k0 = (int64_t)c * LLMK_ATTN_CHUNK, len = n - k0 < LLMK_ATTN_CHUNK ? n - k0 : LLMK_ATTN_CHUNK;
        fn(q, k + (size_t)k0 * rb + head_off, v + (size_t)k0 * rb + head_off, len, stride, hd,
           1.0f / sqrtf((float)hd), parts + (size_t)c * (hd + 2), scores);
    }
    *m0 = parts[0];
    llmk_attn_merge(parts, nc, hd, out);
}

static llmk_attn_chunk_fn pick(const struct llmk_kernels *x, uint32_t t) {
    return t == LLMK_TYPE_F32 ? x->attn_f32 : t == LLMK_TYPE_F16 ? x->attn_f16 : x->attn_q8_0;
}

/* The SIMD kernel sets this CPU runs (AVX2; AVX-512 where present): each is
 * checked against the reference, and its multi-query kernels against its
 * own single-query ones. */
static int simd_sets(struct llmk_kernels *sets) {
    int n = 0;
#if defined(__x86_64__)
    unsigned f = llmk_cpu_detect();
    if (f & LLMK_CPU_AVX2) llmk_kernels_attn_avx2(&sets[n++]);
    if (f & LLMK_CPU_AVX512) llmk_kernels_attn_avx512(&sets[n++]);
    static int said;
    if (!(f & LLMK_CPU_AVX512) && !said++) fprintf(stderr, "test_attn: no AVX-512, its kernels not tested here\n");
#else
    (void)sets;
#endif
    return n;
}

static void one(uint32_t t, int hd, int64_t n, float qamp) {
    int64_t stride = (int64_t)HKV * hd;
    float *kx = malloc((size_t)(n * stride) * sizeof(float)), *vx = malloc((size_t)(n * stride) * sizeof(float));
    float *kh = malloc((size_t)(n * stride) * sizeof(float)), *vh = malloc((size_t)(n * stride) * sizeof(float));
    float q[MAXHD], o_ref[MAXHD], o_avx[MAXHD];
    for (int64_t i = 0; i < n * stride; i++) kx[i] = frand(), vx[i] = 2.0f * frand();
    for (int d = 0; d < hd; d++) q[d] = qamp * frand();
    size_t rb;
    unsigned char *kc = make_cache(t, kx, n, stride, kh, &rb), *vc = make_cache(t, vx, n, stride, vh, &rb);
    size_t head_off = rb / HKV * HEAD; /* a head's row is whole blocks: rows split evenly */
    /* f64 reference over the held values of head HEAD */
    double s[MAXN], mx = -INFINITY, l = 0, o64[MAXHD] = {0}, vmax = 0;
    for (int64_t j = 0; j < n; j++) {
        double a = 0;
        for (int d = 0; d < hd; d++) a += (double)q[d] * kh[j * stride + HEAD * hd + d];
        s[j] = a / sqrt((double)hd);
        if (s[j] > mx) mx = s[j];
    }
    for (int64_t j = 0; j < n; j++) {
        double p = exp(s[j] - mx);
        l += p;
        for (int d = 0; d < hd; d++) {
            double x = vh[j * stride + HEAD * hd + d];
            o64[d] += p * x;
            if (fabs(x) > vmax) vmax = fabs(x);
        }
    }
    float m_ref, m_avx;
    attend(pick(llmk_kernels_ref(), t), q, kc, vc, rb, head_off, n, stride, hd, o_ref, &m_ref);
    double e_ref = 0;
    for (int d = 0; d < hd; d++) e_ref = fmax(e_ref, fabs(o_ref[d] - o64[d] / l));
    /* f32 scores over hd <= 128 terms: ~1e-6 relative; the softmax weights
     * carry that times |s|, the output a weighted mean of values */
    CHECK(e_ref <= 2e-5 * vmax);
    worst_vs64 = fmaxf(worst_vs64, (float)(e_ref / vmax));
    if (n <= LLMK_ATTN_CHUNK) CHECK(fabs(m_ref - mx) <= 1e-5 * (1 + fabs(mx)));
    struct llmk_kernels sets[2];
    int nsets = simd_sets(sets);
    for (int si = 0; si < nsets; si++) {
        const struct llmk_kernels avx = sets[si];
        attend(pick(&avx, t), q, kc, vc, rb, head_off, n, stride, hd, o_avx, &m_avx);
        double e = 0, e64 = 0;
        for (int d = 0; d < hd; d++) {
            e = fmax(e, fabs(o_avx[d] - o_ref[d]));
            e64 = fmax(e64, fabs(o_avx[d] - o64[d] / l));
        }
        /* the stated bound: SIMD kernels within 1e-5 x max|v| of the _ref kernel */
        CHECK(e <= 1e-5 * vmax);
        CHECK(e64 <= 2e-5 * vmax);
        CHECK(fabs(m_avx - m_ref) <= 1e-5 * (1 + fabs(m_ref)));
        worst_avx_ref = fmaxf(worst_avx_ref, (float)(e / vmax));
    }
    free(kx), free(vx), free(kh), free(vh), free(kc), free(vc);
}

/* The multi-query kernels equal the single-query kernel bit for bit, for
 * every mix of key counts (ragged, one key, a full chunk, runs of equal
 * counts) and head size. */
static void multi_of(const struct llmk_kernels *x, uint32_t t, int hd) {
    llmk_attn_multi_fn mf = t == LLMK_TYPE_F16 ? x->attn_multi_f16 : x->attn_multi_f32;
    if (!mf) return;
    enum { MQ = LLMK_ATTN_MULTI };
    int64_t stride = (int64_t)HKV * hd, n[MQ];
    float *kx = malloc(sizeof(float) * 128 * (size_t)stride), *vx = malloc(sizeof(float) * 128 * (size_t)stride);
    float *held = malloc(sizeof(float) * 128 * (size_t)stride);
    for (int64_t i = 0; i < 128 * stride; i++) kx[i] = frand(), vx[i] = frand();
    size_t rb;
    unsigned char *k = make_cache(t, kx, 128, stride, held, &rb), *v = make_cache(t, vx, 128, stride, held, &rb);
    static float qs[MQ][MAXHD], parts[2][MQ][MAXHD + 2], sc[2][MQ][128];
    for (int rep = 0; rep < 4 * MQ; rep++) {
        int nq = 1 + rep % MQ;
        /* every other pass in runs of equal key counts (the query heads of
         * one KV head at one position), which the kernels may take together */
        int run = rep % 2 ? 2 + rep / 2 % 4 : 1;
        for (int i = 0; i < nq; i++) {
            n[i] = rep % 5 == 0 ? 128 : i % run ? n[i - 1] : 1 + (int64_t)(frand() * 63.5f + 63.5f);
            for (int d = 0; d < hd; d++) qs[i][d] = 4.0f * frand();
        }
        const float *q[MQ];
        float *pp[MQ], *ss[MQ];
        for (int i = 0; i < MQ; i++) q[i] = qs[i], pp[i] = parts[0][i], ss[i] = sc[0][i];
        mf(nq, q, n, k, v, stride, hd, 0.125f, pp, ss);
        int ok = 1;
        for (int i = 0; i < nq; i++) {
            (t == LLMK_TYPE_F16 ? x->attn_f16 : x->attn_f32)(q[i], k, v, n[i], stride, hd, 0.125f, parts[1][i], sc[1][i]);
            ok &= memcmp(parts[0][i], parts[1][i], sizeof(float) * (size_t)(hd + 2)) == 0;
        }
        CHECK(ok);
    }
    free(kx), free(vx), free(held), free(k), free(v);
}

static void multi(uint32_t t, int hd) {
    struct llmk_kernels sets[2];
    int nsets = simd_sets(sets);
    for (int si = 0; si < nsets; si++) multi_of(&sets[si], t, hd);
    multi_of(llmk_kernels(), t, hd);
}

/* The f16 row converters equal llmk_fp32_to_fp16 bit for bit: random bit
 * patterns (every exponent, NaNs included), halfway cases, the subnormal
 * and overflow edges, ragged lengths. */
static void to_f16(void) {
    enum { N = 4099 };
    static float x[N];
    static uint16_t a[N], b[N];
    const uint32_t edges[] = {0x477fefffu, 0x477ff000u, 0x38800000u, 0x387fffffu, 0x33000000u, 0x33000001u,
                              0x32ffffffu, 0x7f800000u, 0x7f800001u, 0x7fc00000u, 0xffc01234u, 0x80000000u,
                              0x38801000u, 0x38803000u, 0x3f801000u, 0x3f803000u};
    uint32_t r = 12345;
    for (int i = 0; i < N; i++) {
        r = r * 1664525u + 1013904223u;
        uint32_t u = i < (int)(sizeof edges / sizeof edges[0]) ? edges[i] : r;
        memcpy(&x[i], &u, 4);
    }
    const struct llmk_kernels *ref = llmk_kernels_ref();
    ref->to_f16(x, a, N);
    int ok = 1;
    for (int i = 0; i < N; i++) ok &= a[i] == llmk_fp32_to_fp16(x[i]);
    CHECK(ok);
#if defined(__x86_64__)
    if (llmk_cpu_detect() & LLMK_CPU_AVX2) {
        struct llmk_kernels avx;
        memset(&avx, 0, sizeof avx);
        llmk_kernels_attn_avx2(&avx);
        for (int n = 0; n < 20; n++) { /* ragged tails keep the rest untouched */
            memset(b, 0xAB, sizeof b);
            avx.to_f16(x, b, n);
            ok = b[n] == 0xABAB;
            for (int i = 0; i < n; i++) ok &= b[i] == a[i];
            CHECK(ok);
        }
        avx.to_f16(x, b, N);
        CHECK(memcmp(a, b, sizeof a) == 0);
    }
#endif
}

/* The residual/bias adds give the scalar adds' bits, ragged lengths included. */
static void adds(void) {
    struct llmk_kernels sets[3];
    int nsets = simd_sets(sets);
    sets[nsets++] = *llmk_kernels_ref();
    const int64_t ns[] = {0, 1, 7, 8, 9, 31, 100};
    float x[100], y[100], want[100];
    for (int si = 0; si < nsets; si++)
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
            int64_t n = ns[ni];
            for (int64_t i = 0; i < 100; i++) x[i] = 1e3f * frand(), y[i] = frand(), want[i] = x[i];
            for (int64_t i = 0; i < n; i++) want[i] += y[i];
            sets[si].add(x, y, n);
            CHECK(memcmp(x, want, sizeof x) == 0);
        }
}

/* The SIMD merges give the reference's bits: one to nine chunks (the
 * single-chunk shortcut included), with and without a sink, head sizes with
 * and without a tail of fewer than 8, partials with -inf maxima (an empty
 * chunk) among them. */
static void merges(void) {
    struct llmk_kernels sets[2];
    int nsets = simd_sets(sets);
    enum { NC = 9 };
    static float parts[NC * (MAXHD + 2)], want[MAXHD], got[MAXHD];
    const int hds[5] = {20, 40, 64, 128, 256};
    for (int rep = 0; rep < 200; rep++) {
        int nc = 1 + rep % NC, hd = hds[rep / NC % 5];
        bool sink = rep % 3 == 1;
        float s = 3.0f * frand();
        for (int c = 0; c < nc; c++) {
            float *p = parts + c * (hd + 2);
            p[0] = rep % 7 == 3 && c == 1 ? -INFINITY : 6.0f * frand(), p[1] = 1.0f + 40.0f * (frand() + 0.5f);
            for (int d = 0; d < hd; d++) p[2 + d] = p[0] == -INFINITY ? 0.0f : 20.0f * frand();
        }
        if (sink) llmk_attn_merge_sink(parts, nc, hd, s, want);
        else llmk_attn_merge(parts, nc, hd, want);
        for (int si = 0; si < nsets; si++) {
            sets[si].attn_merge(parts, nc, hd, sink ? &s : NULL, got);
            CHECK(memcmp(want, got, sizeof(float) * (size_t)hd) == 0);
        }
        llmk_kernels()->attn_merge(parts, nc, hd, sink ? &s : NULL, got);
        CHECK(memcmp(want, got, sizeof(float) * (size_t)hd) == 0);
    }
}

int main(void) {
    to_f16();
    merges();
    adds();
    const uint32_t types[3] = {LLMK_TYPE_F32, LLMK_TYPE_F16, LLMK_TYPE_Q8_0};
    /* head sizes: 64-wide pieces and tails of 4 and 5 vectors (40 is no
     * multiple of Q8_0's 32), one to eight pieces (512: past the widest head
     * the multi-query form takes); Q8_0 pairs of blocks and an odd block */
    const int hds[7] = {32, 40, 64, 96, 128, 256, 512};
    const int64_t ns[6] = {1, 5, 8, 77, 128, MAXN}; /* partial vector tails, one full chunk, three chunks */
    const float amps[2] = {1.0f, 8.0f};            /* flat and peaked softmax */
    for (int ti = 0; ti < 3; ti++)
        for (int hi = 0; hi < 7; hi++)
            for (int ni = 0; ni < 6; ni++)
                for (int ai = 0; ai < 2; ai++)
                    if (types[ti] != LLMK_TYPE_Q8_0 || hds[hi] % 32 == 0) one(types[ti], hds[hi], ns[ni], amps[ai]);
    for (int hi = 0; hi < 7; hi++) multi(LLMK_TYPE_F32, hds[hi]), multi(LLMK_TYPE_F16, hds[hi]);
    fprintf(stderr, "attn: worst |ref - f64| %.3g x max|v|, worst |simd - ref| %.3g x max|v|\n", worst_vs64,
            worst_avx_ref);
    return check_summary("attn");
}
