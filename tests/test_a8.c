/* 8-bit activations (src/kernels/a8.h) and their products with the weight
 * types a8.h takes (4-bit records, and int8 records within +-32): the quantizer stores each block's bytes in the kernel's order,
 * with d = amax / 127 and s = d * sum q, the same bytes whether a row is
 * quantized at once or in parts, and reports a NaN or infinity; the AVX2
 * kernel on repacked weights equals the scalar reference bit for bit
 * (random and extreme data, ragged row and activation-row counts, any
 * 8-aligned row range, the largest int16 partial sums); and the reference
 * is within the activation rounding bound of an f64 dot of the dequantized
 * weights with the f32 inputs. */
#include "check.h"
#include "codec/blocks.h"
#include "codec/codec.h"
#include "codec/half.h"
#include "internal.h"
#include "kernels/a8.h"
#include "kernels/kernels.h"
#include "kernels/r8.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float unif(void) { return (float)rnd() / 4294967296.0f * 2.0f - 1.0f; }

static const int order[8] = {0, 4, 1, 5, 2, 6, 3, 7};
static const int64_t ks[] = {32, 64, 96, 256, 576, 1536, 2080};

static int avx512_checked; /* kernel checks the AVX-512 VNNI kernel took part in */
static int compact_checked; /* of them on a compact record form (Q4K, Q8K) */

static int bits_equal(const float *a, const float *b, int64_t n) { return memcmp(a, b, (size_t)n * sizeof *a) == 0; }

/* Activations: per block a scale (sometimes zero or extreme) and one outlier in five. */
static void fill_x(float *x, int64_t k, int extreme) {
    static const float ext[] = {0.0f, 1e-37f, 1e-12f, 3e-5f, 1e6f, 1e20f};
    for (int64_t b = 0; b < k / 32; b++) {
        float s = rnd() % 7 == 0 ? 0.0f : extreme ? ext[rnd() % 6] : 0.5f + 4.0f * (unif() + 1.0f);
        for (int j = 0; j < 32; j++) x[b * 32 + j] = s * unif();
        if (rnd() % 5 == 0) x[b * 32 + rnd() % 32] = s * 20.0f;
    }
}

static uint16_t w_scale(int extreme) {
    if (!extreme) return llmk_fp32_to_fp16(0.001f + 0.02f * (unif() + 1.0f));
    switch (rnd() % 4) {
    case 0: return 0;
    case 1: return (uint16_t)(1 + rnd() % 0x3ff); /* subnormal */
    case 2: return llmk_fp32_to_fp16(100.0f * unif());
    default: return (uint16_t)(0x8000u | llmk_fp32_to_fp16(0.01f));
    }
}

/* A row of nb blocks of 32 weights: random bytes under finite f16 scales
 * (d, and the Q4_1 / Q5_1 min or the K-quants' dmin where they have one). */
static void fill_w(uint32_t type, unsigned char *w, int64_t nb, int extreme) {
    size_t bs = llmk_type_block_bytes(type), n = (size_t)(nb * 32 / (int64_t)llmk_type_block_elems(type));
    for (size_t i = 0; i < n * bs; i++) w[i] = (unsigned char)rnd();
    for (size_t i = 0; i < n; i++) {
        unsigned char *b = w + i * bs;
        uint16_t d = w_scale(extreme), m = w_scale(extreme);
        size_t doff = type == LLMK_TYPE_Q3_K ? offsetof(llmk_block_q3_k, d)
                      : type == LLMK_TYPE_Q6_K ? offsetof(llmk_block_q6_k, d) : 0;
        memcpy(b + doff, &d, 2);
        if (type == LLMK_TYPE_Q4_1 || type == LLMK_TYPE_Q5_1 || type == LLMK_TYPE_Q4_K || type == LLMK_TYPE_Q5_K)
            memcpy(b + 2, &m, 2); /* m, or dmin */
    }
}

/* Bytes in the kernel's order, d, s, split rows, NaN reporting. */
static void test_quantize(void) {
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        int64_t k = ks[ki], nb = k / 32;
        size_t rb = llmk_a8_row_bytes(k);
        CHECK_EQ_INT(rb, (size_t)nb * 44);
        float *x = malloc((size_t)k * sizeof *x);
        unsigned char *a = malloc(rb), *a2 = malloc(rb);
        fill_x(x, k, 0);
        CHECK_EQ_INT(llmk_a8_quantize_row_ref(x, k, 0, k, a), 0);
        const int8_t *q = (const int8_t *)a;
        const float *d = (const float *)(void *)(a + k), *s = d + nb;
        const int16_t *h = (const int16_t *)(const void *)(s + nb);
        int ok = 1;
        for (int64_t b = 0; b < nb; b++) {
            double amax = 0;
            int32_t sum = 0, half[2] = {0, 0};
            for (int j = 0; j < 32; j++) amax = fmax(amax, fabs((double)x[b * 32 + j]));
            ok &= d[b] == (float)amax / 127.0f;
            for (int j = 0; j < 32; j++) {
                int8_t qj = q[b * 32 + j];
                float xj = x[b * 32 + (j & ~7) + order[j & 7]];
                sum += qj, half[j / 16] += qj;
                /* within half a step of the element it stands for, never -128 */
                ok &= qj >= -127 && (d[b] == 0 ? qj == 0 : fabs((double)xj - (double)d[b] * qj) <= 0.5001 * d[b]);
            }
            ok &= s[b] == d[b] * (float)sum && h[2 * b] == half[0] && h[2 * b + 1] == half[1];
        }
        CHECK(ok);
        /* in two parts: the same bytes */
        int64_t cut = 32 * (int64_t)(rnd() % (uint32_t)(nb + 1));
        memset(a2, 0xa5, rb);
        llmk_a8_quantize_row_ref(x, k, 0, cut, a2);
        llmk_a8_quantize_row_ref(x, k, cut, k, a2);
        CHECK(memcmp(a, a2, rb) == 0);
        /* a NaN or an infinity is reported, in its own block only */
        x[k - 1] = rnd() % 2 ? NAN : -INFINITY;
        CHECK_EQ_INT(llmk_a8_quantize_row_ref(x, k, k - 32, k, a2) != 0, 1);
        CHECK_EQ_INT(llmk_a8_quantize_row_ref(x, k, 0, k - 32, a2), 0);
        free(x), free(a), free(a2);
    }
}

/* The AVX2 quantizer, and the AVX-512 one where the CPU has it, write the
 * reference's bytes and report the same:
 * ordinary, extreme and all-zero blocks, tiny scales (1 / d overflows),
 * a NaN or an infinity, rows in parts. */
static void test_quantize_simd(int have_avx2) {
#if defined(__x86_64__)
    if (!have_avx2) return;
    typedef int (*quant_fn)(const float *, int64_t, int64_t, int64_t, void *);
    quant_fn fns[2] = {llmk_a8_quantize_row_avx2, llmk_a8_quantize_row_avx512};
    int nfn = llmk_cpu_detect() & LLMK_CPU_AVX512 ? 2 : 1;
    if (nfn == 1) fprintf(stderr, "test_a8: no AVX-512, its quantizer not run\n");
    static const float tiny[] = {1e-39f, 3e-41f, 1.4e-45f};
    for (int rep = 0; rep < 80; rep++) {
        int64_t k = ks[rep % (int)(sizeof ks / sizeof ks[0])], nb = k / 32;
        float *x = malloc((size_t)k * sizeof *x);
        fill_x(x, k, rep % 2);
        if (rep % 5 == 1) x[rnd() % k] = tiny[rnd() % 3], x[0] = tiny[rnd() % 3];
        if (rep % 5 == 2) for (int j = 0; j < 32; j++) x[j] = tiny[rnd() % 3] * unif();
        if (rep % 5 == 3) x[rnd() % k] = rnd() % 2 ? NAN : INFINITY;
        if (rep % 5 == 4) for (int j = 0; j < 32; j++) x[j] = 0.0f;
        size_t rb = llmk_a8_row_bytes(k);
        unsigned char *a = malloc(rb), *b = malloc(rb);
        int ra = llmk_a8_quantize_row_ref(x, k, 0, k, a);
        for (int f = 0; f < nfn; f++) {
            memset(b, 0x5a, rb);
            int64_t cut = 32 * (int64_t)(rnd() % (uint32_t)(nb + 1));
            int rb1 = fns[f](x, k, 0, cut, b), rb2 = fns[f](x, k, cut, k, b);
            CHECK_EQ_INT(ra != 0, (rb1 | rb2) != 0);
            CHECK(memcmp(a, b, rb) == 0);
        }
        free(x), free(a), free(b);
    }
#else
    (void)have_avx2;
#endif
}

/* The AVX2 kernel, and the AVX-512 one where the CPU has VNNI, on w
 * repacked (n rows of k, ws bytes apart) x m activation rows give y_ref's
 * bits. */
static void check_kernel(uint32_t type, int64_t k, unsigned char *w, size_t ws, int64_t n, const unsigned char *a,
                         size_t as, int64_t m, const float *y_ref) {
#if defined(__x86_64__)
    llmk_tensor_info ti;
    memset(&ti, 0, sizeof ti);
    ti.name = "w", ti.type = type, ti.ne[0] = (uint64_t)k, ti.ne[1] = (uint64_t)n, ti.data = w;
    ti.n_bytes = ws * (size_t)n;
    struct llmk_r8 rw;
    float *y = malloc((size_t)(n * m) * sizeof *y);
    CHECK_EQ_INT(llmk_r8_repack(&ti, 0, &rw), LLMK_OK);
    llmk_gemm_r8_a8_avx2(&rw, 0, n, a, as, m, y, (size_t)n, NULL, 0);
    CHECK(bits_equal(y_ref, y, n * m));
    for (unsigned forms = 0; forms <= LLMK_R8_COMPACT && (llmk_cpu_detect() & LLMK_CPU_AVX512_VNNI); forms++) {
        if (forms) { /* the compact forms, which only the AVX-512 kernel reads */
            llmk_r8_free(&rw);
            CHECK_EQ_INT(llmk_r8_repack(&ti, forms, &rw), LLMK_OK);
            compact_checked += llmk_r8_compact(rw.layout);
        }
        memset(y, 0, (size_t)(n * m) * sizeof *y);
        llmk_gemm_r8_a8_avx512(&rw, 0, n, a, as, m, y, (size_t)n, NULL, 0);
        CHECK(bits_equal(y_ref, y, n * m));
        avx512_checked++;
    }
    llmk_r8_free(&rw);
    free(y);
#else
    (void)type, (void)k, (void)w, (void)ws, (void)n, (void)a, (void)as, (void)m, (void)y_ref;
#endif
}

/* The AVX2 kernel against the reference; the reference against f64. */
static void test_dots(uint32_t type, int have_avx2, int extreme) {
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        int64_t k = ks[ki], nb = k / 32, nrows = 1 + rnd() % 83,
                m = rnd() % 8 ? 1 + rnd() % 9 : 33 + rnd() % 8; /* now and then > 4 tiles */
        if (k % (int64_t)llmk_type_block_elems(type)) continue;
        size_t ws = (size_t)(k / (int64_t)llmk_type_block_elems(type)) * llmk_type_block_bytes(type);
        size_t as = llmk_a8_row_bytes(k) + 4 * (rnd() % 3);
        unsigned char *w = malloc(ws * (size_t)nrows), *a = malloc(as * (size_t)m);
        float *x = malloc((size_t)(k * m) * sizeof *x), *y_ref = malloc((size_t)(nrows * m) * sizeof(float));
        float *y = malloc((size_t)(nrows * m) * sizeof(float));
        fill_w(type, w, nb * nrows, extreme);
        for (int64_t i = 0; i < m; i++) {
            fill_x(x + i * k, k, extreme);
            llmk_a8_quantize_row_ref(x + i * k, k, 0, k, a + i * as);
        }
        llmk_r8_a8_ref(type, k, w, ws, 0, nrows, a, as, m, y_ref, (size_t)nrows);
#if defined(__x86_64__)
        if (have_avx2) {
            llmk_tensor_info ti;
            memset(&ti, 0, sizeof ti);
            ti.name = "w", ti.type = type, ti.ne[0] = (uint64_t)k, ti.ne[1] = (uint64_t)nrows, ti.data = w;
            ti.n_bytes = ws * (size_t)nrows;
            struct llmk_r8 rw, rc;
            CHECK_EQ_INT(llmk_r8_repack(&ti, 0, &rw), LLMK_OK);
            check_kernel(type, k, w, ws, nrows, a, as, m, y_ref);
            /* an 8-aligned sub-range, one activation row at a time (the decode walk) */
            int64_t r0 = 8 * (int64_t)(rnd() % (uint32_t)((nrows + 7) / 8)), r1 = r0 + 1 + rnd() % (nrows - r0);
            llmk_gemm_r8_a16_fn fns[3] = {llmk_gemm_r8_a8_avx2, llmk_gemm_r8_a8_avx512, llmk_gemm_r8_a8_avx512};
            int nfn = llmk_cpu_detect() & LLMK_CPU_AVX512_VNNI ? 3 : 1;
            if (nfn == 3) CHECK_EQ_INT(llmk_r8_repack(&ti, LLMK_R8_COMPACT, &rc), LLMK_OK);
            for (int f = 0; f < nfn; f++) {
                const struct llmk_r8 *rf = f == 2 ? &rc : &rw; /* the AVX-512 kernel on both forms */
                memset(y, 0, (size_t)(nrows * m) * sizeof(float));
                for (int64_t i = 0; i < m; i++) fns[f](rf, r0, r1, a + i * as, as, 1, y + i * nrows, 0, NULL, 0);
                int ok = 1;
                for (int64_t i = 0; i < m; i++)
                    for (int64_t r = 0; r < nrows; r++) {
                        float want = r >= r0 && r < r1 ? y_ref[i * nrows + r] : 0.0f;
                        ok &= memcmp(&want, &y[i * nrows + r], sizeof want) == 0;
                    }
                CHECK(ok);
            }
            llmk_r8_free(&rw);
            if (nfn == 3) llmk_r8_free(&rc);
        }
#else
        (void)have_avx2, (void)y;
#endif
        if (!extreme) { /* |error| <= sum |w| d_a / 2 (+ f32 accumulation) */
            float *wf = malloc((size_t)k * sizeof *wf);
            int ok = 1;
            for (int64_t r = 0; r < nrows; r++) {
                llmk_codec_get(type)->dequantize(w + r * ws, wf, k);
                for (int64_t i = 0; i < m; i++) {
                    const float *da = (const float *)(void *)(a + i * as + k);
                    double dot = 0, mag = 0, bound = 0;
                    for (int64_t j = 0; j < k; j++) {
                        dot += (double)wf[j] * x[i * k + j], mag += fabs((double)wf[j] * x[i * k + j]);
                        bound += fabs((double)wf[j]) * da[j / 32] * 0.5;
                    }
                    ok &= fabs(y_ref[i * nrows + r] - dot) <= bound * (1 + 1e-4) + 1e-5 * mag;
                }
            }
            CHECK(ok);
            free(wf);
        }
        free(w), free(a), free(x), free(y_ref), free(y);
    }
}

/* The largest int16 sums the kernel meets, against activations all +-127:
 * Q4_1 nibbles all 15 (a record's eight products, 30480), Q5_0 weights all
 * -16 (eight, 32512), Q6_K all -32 (a half's four, 32512), Q8_0 all -128
 * and IQ4_NL all -127 (one pair, 32512 and 32258, widened at once). */
static void test_largest_sums(int have_avx2) {
    enum { K = 256, N = 16 };
    static const uint32_t types[] = {LLMK_TYPE_Q4_1, LLMK_TYPE_Q5_0, LLMK_TYPE_Q6_K, LLMK_TYPE_Q8_0, LLMK_TYPE_IQ4_NL};
    static const double wval[] = {15.0, -16.0, -32.0, -128.0, -127.0};
    for (int t = 0; t < 5; t++) {
        size_t bs = llmk_type_block_bytes(types[t]), ws = (size_t)(K / (int64_t)llmk_type_block_elems(types[t])) * bs;
        unsigned char *w = calloc(N, ws);
        uint16_t one = llmk_fp32_to_fp16(1.0f);
        for (size_t i = 0; i < N * ws / bs; i++) {
            unsigned char *blk = w + i * bs;
            if (types[t] == LLMK_TYPE_Q4_1) {
                memcpy(blk, &one, 2), memset(blk + offsetof(llmk_block_q4_1, qs), 0xff, 16); /* m 0 */
            } else if (types[t] == LLMK_TYPE_Q5_0) {
                memcpy(blk, &one, 2); /* qs and qh zero: every weight 0 - 16 */
            } else if (types[t] == LLMK_TYPE_IQ4_NL) {
                memcpy(blk, &one, 2); /* qs zero: every weight the grid's first, -127 */
            } else if (types[t] == LLMK_TYPE_Q8_0) {
                memcpy(blk, &one, 2), memset(blk + offsetof(llmk_block_q8_0, qs), 0x80, 32); /* -128 */
            } else {
                memcpy(blk + offsetof(llmk_block_q6_k, d), &one, 2); /* ql, qh zero: 0 - 32, scales 1 */
                memset(blk + offsetof(llmk_block_q6_k, scales), 1, 16);
            }
        }
        float x[2 * K];
        for (int j = 0; j < K; j++) x[j] = 1.0f, x[K + j] = -3.0f;
        size_t as = llmk_a8_row_bytes(K);
        unsigned char a[2 * 44 * (K / 32)];
        for (int i = 0; i < 2; i++) llmk_a8_quantize_row_ref(x + i * K, K, 0, K, a + i * as);
        float y_ref[2 * N];
        llmk_r8_a8_ref(types[t], K, w, ws, 0, N, a, as, 2, y_ref, N);
        CHECK(fabs(y_ref[0] - wval[t] * K) < 1e-4 * fabs(wval[t]) * K);
        CHECK(fabs(y_ref[N] + 3.0 * wval[t] * K) < 1e-4 * 3.0 * fabs(wval[t]) * K);
        if (have_avx2) check_kernel(types[t], K, w, ws, N, a, as, 2, y_ref);
        free(w);
    }
}

int main(void) {
    int have_avx2 = (llmk_cpu_detect() & LLMK_CPU_AVX2) != 0;
    if (!have_avx2) fprintf(stderr, "test_a8: no AVX2, reference only\n");
    static const uint32_t types[] = {LLMK_TYPE_Q4_0, LLMK_TYPE_Q4_1, LLMK_TYPE_Q4_K, LLMK_TYPE_Q5_0,
                                     LLMK_TYPE_Q8_0, LLMK_TYPE_IQ4_NL, LLMK_TYPE_Q5_1, LLMK_TYPE_Q3_K,
                                     LLMK_TYPE_Q5_K, LLMK_TYPE_Q6_K, LLMK_TYPE_IQ4_XS};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) CHECK(llmk_a8_supports(types[t]));
    /* Q2_K has offsets per 16; MXFP4 has no A8 form yet */
    CHECK(!llmk_a8_supports(LLMK_TYPE_MXFP4) && !llmk_a8_supports(LLMK_TYPE_Q2_K));
    test_quantize();
    test_quantize_simd(have_avx2);
    test_largest_sums(have_avx2);
    for (int rep = 0; rep < 6; rep++)
        for (int extreme = 0; extreme < 2; extreme++) {
            for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) test_dots(types[t], have_avx2, extreme);
        }
    if (llmk_cpu_detect() & LLMK_CPU_AVX512_VNNI) CHECK(avx512_checked > 0 && compact_checked > 0);
    else fprintf(stderr, "test_a8: no AVX-512 VNNI, its kernel not run\n");
    return check_summary("a8");
}
