/* Dot kernels and quantized matmul.
 * - Every codec's chosen dot kernel (fast where the CPU has one) against its
 *   _ref: exactly when all f32 arithmetic is exact (power-of-two scales,
 *   small integers: the integer block sums must agree bit for bit), and on
 *   random data with ragged row counts and extreme scales within
 *   |fast - ref| <= k * 2^-22 * sum|w_i a_i| (two f32 summation orders).
 * - Codec-specific integer edges (extreme sub-block scales and quants, MXFP4
 *   exponent extremes) and the super-block kernels' bitwise match with _ref.
 * - llmk_quantized_matmul: bitwise identical for 1, 2 and 3 threads and for
 *   one row or many; close to an f64 product of the dequantized weights.
 * - vec_dotm (multi-activation kernels): bitwise identical to the row
 *   kernel for ragged row/activation counts and at the integer extremes. */
#include "check.h"
#include "codec/blocks.h"
#include "codec/codec.h"
#include "codec/half.h"
#include "internal.h"
#include "kernels/kernels.h"
#include "llmk.h"
#include "pool.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint32_t rnd32(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}
static float unif(void) { return (float)(rnd32() >> 8) / 8388608.0f - 1.0f; } /* [-1, 1) */

static const uint32_t types[] = {
    LLMK_TYPE_F32,  LLMK_TYPE_F16,  LLMK_TYPE_BF16, LLMK_TYPE_Q4_0, LLMK_TYPE_Q4_1,   LLMK_TYPE_Q5_0,
    LLMK_TYPE_Q5_1, LLMK_TYPE_Q8_0, LLMK_TYPE_Q8_1, LLMK_TYPE_Q2_K, LLMK_TYPE_Q3_K,   LLMK_TYPE_Q4_K,
    LLMK_TYPE_Q5_K, LLMK_TYPE_Q6_K, LLMK_TYPE_Q8_K, LLMK_TYPE_IQ4_NL, LLMK_TYPE_IQ4_XS, LLMK_TYPE_MXFP4,
    LLMK_TYPE_NVFP4};

static size_t row_bytes(uint32_t t, int64_t k) {
    uint64_t b = 0;
    llmk_row_bytes(t, (uint64_t)k, &b);
    return (size_t)b;
}

/* sum |w_i a_i| from the dequantized operands (the scale of the rounding bound) */
static double abs_dot(uint32_t wt, const void *w, uint32_t at, const void *a, int64_t k) {
    float *wf = malloc((size_t)k * 4), *af = malloc((size_t)k * 4);
    llmk_dequantize_row(wt, w, wf, k);
    if (at == LLMK_TYPE_F32) memcpy(af, a, (size_t)k * 4);
    else llmk_dequantize_row(at, a, af, k);
    double s = 0;
    for (int64_t i = 0; i < k; i++) s += fabs((double)wf[i] * af[i]);
    free(wf), free(af);
    return s;
}

/* Overwrite every f16 scale field of a row with the value h (per layout). */
static void set_scales(uint32_t t, unsigned char *row, int64_t k, uint16_t h) {
    size_t bb = llmk_type_block_bytes(t);
    int64_t nb = k / llmk_type_block_elems(t);
    for (int64_t b = 0; b < nb; b++) {
        unsigned char *p = row + (size_t)b * bb;
        int offs[2] = {-1, -1};
        switch (t) {
        case LLMK_TYPE_Q4_0: case LLMK_TYPE_Q5_0: case LLMK_TYPE_Q8_0: case LLMK_TYPE_IQ4_NL:
        case LLMK_TYPE_IQ4_XS: offs[0] = 0; break;
        case LLMK_TYPE_Q4_1: case LLMK_TYPE_Q5_1: case LLMK_TYPE_Q8_1: case LLMK_TYPE_Q4_K:
        case LLMK_TYPE_Q5_K: offs[0] = 0, offs[1] = 2; break;
        case LLMK_TYPE_Q2_K: offs[0] = 80, offs[1] = 82; break;
        case LLMK_TYPE_Q3_K: offs[0] = 108; break;
        case LLMK_TYPE_Q6_K: offs[0] = 208; break;
        case LLMK_TYPE_Q8_K: { float d = llmk_fp16_to_fp32(h); memcpy(p, &d, 4); } break;
        case LLMK_TYPE_MXFP4: p[0] = 125; break;
        case LLMK_TYPE_NVFP4: memset(p, 0x38, 4); break; /* UE4M3 1.0 in every sub-block */
        }
        for (int i = 0; i < 2; i++)
            if (offs[i] >= 0) memcpy(p + offs[i], &h, 2);
    }
}

/* Activation row in form `at` built directly: integers in [-15, 15] with a
 * power-of-two scale, so every product and sum in either kernel is exact. */
static void exact_act(uint32_t at, void *a, int64_t k) {
    if (at == LLMK_TYPE_F32) {
        float *x = a;
        for (int64_t i = 0; i < k; i++) x[i] = (float)((int)(rnd32() % 31) - 15) * 0.125f;
        return;
    }
    int64_t be = llmk_type_block_elems(at), nb = k / be;
    for (int64_t b = 0; b < nb; b++) {
        int8_t q[256];
        int sum = 0;
        for (int64_t i = 0; i < be; i++) q[i] = (int8_t)((int)(rnd32() % 31) - 15), sum += q[i];
        if (at == LLMK_TYPE_Q8_K) {
            llmk_block_q8_k blk = {.d = 0.125f};
            memcpy(blk.qs, q, 256);
            for (int i = 0; i < 16; i++) {
                int s = 0;
                for (int l = 0; l < 16; l++) s += q[16 * i + l];
                blk.bsums[i] = (int16_t)s;
            }
            memcpy((char *)a + b * sizeof blk, &blk, sizeof blk);
        } else if (at == LLMK_TYPE_Q8_1) {
            llmk_block_q8_1 blk = {.d = llmk_fp32_to_fp16(0.125f), .s = llmk_fp32_to_fp16(0.125f * (float)sum)};
            memcpy(blk.qs, q, 32);
            memcpy((char *)a + b * sizeof blk, &blk, sizeof blk);
        } else {
            llmk_block_q8_0 blk = {.d = llmk_fp32_to_fp16(0.125f)};
            memcpy(blk.qs, q, 32);
            memcpy((char *)a + b * sizeof blk, &blk, sizeof blk);
        }
    }
}

static void test_dot_exact_and_bounded(void) {
    for (size_t ti = 0; ti < LLMK_ARRAY_LEN(types); ti++) {
        uint32_t t = types[ti];
        const struct llmk_codec *c = llmk_codec_get(t);
        const char *name = NULL;
        llmk_dot_fn fast = llmk_kernels()->type[t].vec_dot;
        name = llmk_kernels()->type[t].vec_dot_name;
        CHECK(c && fast && name);
        int64_t be = llmk_type_block_elems(t);
        int64_t ks[] = {be == 1 ? 1 : 32, be == 1 ? 7 : 64, be == 1 ? 37 : 96, 256, 576, 1536 + be * (be == 1 ? 5 : 0)};
        for (size_t kk = 0; kk < LLMK_ARRAY_LEN(ks); kk++) {
            int64_t k = ks[kk];
            if (k % be) continue;
            size_t rb = row_bytes(t, k), ab = c->act_type == LLMK_TYPE_F32 ? (size_t)k * 4 : row_bytes(c->act_type, k);
            int64_t nrows = 1 + (int64_t)(rnd32() % 9);
            unsigned char *w = aligned_alloc(64, (rb * (size_t)nrows + 63) / 64 * 64);
            unsigned char *a = aligned_alloc(64, (ab + 63) / 64 * 64);
            float *y0 = malloc((size_t)nrows * 4), *y1 = malloc((size_t)nrows * 4);
            for (int pass = 0; pass < 2; pass++) {
                /* pass 0: exact arithmetic; pass 1: random data, extreme scales */
                if (t == LLMK_TYPE_F32 || t == LLMK_TYPE_F16 || t == LLMK_TYPE_BF16) {
                    float *tmp = malloc((size_t)k * 4);
                    for (int64_t r = 0; r < nrows; r++) {
                        float sc = pass ? ldexpf(1.0f, (int)(rnd32() % 20) - 10) : 1.0f;
                        for (int64_t i = 0; i < k; i++)
                            tmp[i] = pass ? unif() * sc : (float)((int)(rnd32() % 17) - 8);
                        llmk_quantize_row(t, tmp, w + (size_t)r * rb, k);
                    }
                    free(tmp);
                } else {
                    for (size_t i = 0; i < rb * (size_t)nrows; i++) w[i] = (unsigned char)rnd32();
                    for (int64_t r = 0; r < nrows; r++) {
                        uint16_t h = pass ? (uint16_t)(0x0400 + rnd32() % 0x7000) /* 2^-14 .. ~2^13 */
                                          : llmk_fp32_to_fp16(0.25f);
                        set_scales(t, w + (size_t)r * rb, k, h);
                    }
                    if (t == LLMK_TYPE_MXFP4 && pass)
                        for (int64_t b = 0; b < k / 32; b++) w[(size_t)b * 17] = (uint8_t)(100 + rnd32() % 50);
                }
                if (pass == 0) exact_act(c->act_type, a, k);
                else {
                    float *x = malloc((size_t)k * 4);
                    /* Q8 activation scales are f16: |x| up to 2^12 keeps them finite */
                    float sc = ldexpf(1.0f, (int)(rnd32() % 32) - 20);
                    for (int64_t i = 0; i < k; i++) x[i] = unif() * sc;
                    if (c->act_type == LLMK_TYPE_F32) memcpy(a, x, (size_t)k * 4);
                    else llmk_quantize_row(c->act_type, x, a, k);
                    free(x);
                }
                c->dot(k, w, rb, nrows, a, y0);
                fast(k, w, rb, nrows, a, y1);
                int bad = 0;
                for (int64_t r = 0; r < nrows; r++) {
                    if (pass == 0) {
                        bad += memcmp(&y0[r], &y1[r], 4) != 0;
                    } else {
                        double tol = (double)k * 0x1p-22 * abs_dot(t, w + (size_t)r * rb, c->act_type, a, k);
                        bad += !(fabs((double)y0[r] - y1[r]) <= tol);
                    }
                    /* a row's value must not depend on its neighbours */
                    float single;
                    fast(k, w + (size_t)r * rb, rb, 1, a, &single);
                    bad += memcmp(&single, &y1[r], 4) != 0;
                }
                if (bad)
                    fprintf(stderr, "%s (%s) k=%lld rows=%lld pass %d: %d mismatches (ref %g fast %g)\n",
                            llmk_type_name(t), name, (long long)k, (long long)nrows, pass, bad, y0[0], y1[0]);
                CHECK_EQ_INT(bad, 0);
            }
            free(w), free(a), free(y0), free(y1);
        }
    }
}

/* Activation row in form at (Q8_0 or Q8_K) from the integers q (|q| <= 127)
 * with scale d, bsums filled as the Q8_K quantizer fills them. */
static void act_from_q(uint32_t at, void *a, int64_t k, const int8_t *q, float d) {
    if (at == LLMK_TYPE_Q8_K) {
        for (int64_t b = 0; b < k / 256; b++) {
            llmk_block_q8_k blk = {.d = d};
            memcpy(blk.qs, q + b * 256, 256);
            for (int i = 0; i < 16; i++) {
                int s = 0;
                for (int l = 0; l < 16; l++) s += blk.qs[16 * i + l];
                blk.bsums[i] = (int16_t)s;
            }
            memcpy((char *)a + b * sizeof blk, &blk, sizeof blk);
        }
    } else {
        for (int64_t b = 0; b < k / 32; b++) {
            llmk_block_q8_0 blk = {.d = llmk_fp32_to_fp16(d)};
            memcpy(blk.qs, q + b * 32, 32);
            memcpy((char *)a + b * sizeof blk, &blk, sizeof blk);
        }
    }
}

/* Codec-specific edges of the integer paths, fast against _ref:
 * - every weight byte one pattern (0x00, 0xff, 0x80, 0x7f, 0xaa, 0x55) or
 *   random, so sub-block scales and mins sit at their extremes (Q2_K 0/15,
 *   Q3_K and IQ4_XS -32/31, Q4_K/Q5_K 0/63, Q6_K -128/127) together with
 *   extreme quants, against activations of all +127, all -127, alternating
 *   and random; power-of-two scales keep all f32 work exact, so fast == ref
 *   bit for bit (k <= 768: IQ4_NL partial sums stay below 2^24).
 * - the super-block codecs (their f32 combination per super-block is
 *   _ref's expression, see dot_kq_avx2.c) bit for bit also with random f16
 *   super-scales over the whole finite range and quantized activations.
 * - MXFP4 at the E8M0 exponent extremes (0, 1: subnormal scales; 254, 255:
 *   2^126, 2^127) with activation scales that keep every product finite and
 *   normal, within the summation-order bound. */
static void test_dot_extremes(void) {
    static const uint32_t xt[] = {LLMK_TYPE_Q2_K, LLMK_TYPE_Q3_K, LLMK_TYPE_Q4_K, LLMK_TYPE_Q5_K, LLMK_TYPE_Q6_K,
                                  LLMK_TYPE_Q8_K, LLMK_TYPE_IQ4_XS, LLMK_TYPE_IQ4_NL, LLMK_TYPE_MXFP4};
    static const int fills[] = {0x00, 0xff, 0x80, 0x7f, 0xaa, 0x55, -1 /* random */};
    const int64_t ks[] = {256, 768};
    for (size_t ti = 0; ti < LLMK_ARRAY_LEN(xt); ti++) {
        uint32_t t = xt[ti];
        const struct llmk_codec *c = llmk_codec_get(t);
        const char *name = NULL;
        llmk_dot_fn fast = llmk_kernels()->type[t].vec_dot;
        name = llmk_kernels()->type[t].vec_dot_name;
        int superblock = llmk_type_block_elems(t) == 256;
        for (size_t kk = 0; kk < LLMK_ARRAY_LEN(ks); kk++) {
            int64_t k = ks[kk], nrows = 5;
            size_t rb = row_bytes(t, k), ab = row_bytes(c->act_type, k);
            unsigned char *w = aligned_alloc(64, (rb * (size_t)nrows + 63) / 64 * 64);
            unsigned char *a = aligned_alloc(64, (ab + 63) / 64 * 64);
            int8_t *q = malloc((size_t)k);
            float y0[5], y1[5];
            int bad = 0;
            for (size_t fi = 0; fi < LLMK_ARRAY_LEN(fills); fi++)
                for (int am = 0; am < 4; am++) {
                    for (size_t i = 0; i < rb * (size_t)nrows; i++)
                        w[i] = (unsigned char)(fills[fi] >= 0 ? fills[fi] : (int)(rnd32() & 0xff));
                    for (int64_t r = 0; r < nrows; r++) set_scales(t, w + (size_t)r * rb, k, llmk_fp32_to_fp16(0.25f));
                    for (int64_t i = 0; i < k; i++)
                        q[i] = (int8_t)(am == 0 ? 127 : am == 1 ? -127 : am == 2 ? (i % 2 ? 127 : -127)
                                                                         : (int)(rnd32() % 255) - 127);
                    act_from_q(c->act_type, a, k, q, 0.125f);
                    c->dot(k, w, rb, nrows, a, y0);
                    fast(k, w, rb, nrows, a, y1);
                    bad += memcmp(y0, y1, sizeof(float) * (size_t)nrows) != 0;
                }
            if (superblock) {
                for (int rep = 0; rep < 8; rep++) {
                    for (size_t i = 0; i < rb * (size_t)nrows; i++) w[i] = (unsigned char)rnd32();
                    for (int64_t r = 0; r < nrows; r++)
                        set_scales(t, w + (size_t)r * rb, k, (uint16_t)(1 + rnd32() % 0x7bff));
                    float *x = malloc((size_t)k * 4);
                    float sc = ldexpf(1.0f, (int)(rnd32() % 40) - 20);
                    for (int64_t i = 0; i < k; i++) x[i] = unif() * sc;
                    llmk_quantize_row(c->act_type, x, a, k);
                    free(x);
                    c->dot(k, w, rb, nrows, a, y0);
                    fast(k, w, rb, nrows, a, y1);
                    bad += memcmp(y0, y1, sizeof(float) * (size_t)nrows) != 0;
                }
            }
            if (t == LLMK_TYPE_MXFP4) {
                static const uint8_t es[] = {0, 1, 2, 127, 128, 253, 254, 255};
                for (size_t ei = 0; ei < LLMK_ARRAY_LEN(es); ei++) {
                    for (size_t i = 0; i < rb * (size_t)nrows; i++) w[i] = (unsigned char)rnd32();
                    for (int64_t b = 0; b < k / 32 * nrows; b++) w[(size_t)b * 17] = es[ei];
                    /* small exponents meet large activations and the reverse */
                    float da = es[ei] < 128 ? 8.0f : 0x1p-27f;
                    for (int64_t i = 0; i < k; i++) q[i] = (int8_t)((int)(rnd32() % 255) - 127);
                    act_from_q(LLMK_TYPE_Q8_0, a, k, q, da);
                    c->dot(k, w, rb, nrows, a, y0);
                    fast(k, w, rb, nrows, a, y1);
                    for (int64_t r = 0; r < nrows; r++) {
                        /* sum |w_i a_i| in f64 from the grid: the dequantized f32
                         * weights would overflow at e = 255 */
                        const unsigned char *row = w + (size_t)r * rb;
                        double s = 0;
                        for (int64_t i = 0; i < k; i++) {
                            const unsigned char *blk = row + (size_t)(i / 32) * 17;
                            int j = (int)(i % 32), nb = j < 16 ? blk[1 + j] & 15 : blk[1 + j - 16] >> 4;
                            s += fabs((double)llmk_mxfp4_values[nb] * q[i]) * ldexp(1.0, blk[0] - 128) *
                                 llmk_fp16_to_fp32(llmk_fp32_to_fp16(da));
                        }
                        double tol = (double)k * 0x1p-22 * s;
                        bad += !(isfinite(y0[r]) && fabs((double)y0[r] - y1[r]) <= tol);
                    }
                }
            }
            if (bad) fprintf(stderr, "%s (%s) k=%lld: %d extreme cases differ from _ref\n", llmk_type_name(t), name,
                             (long long)k, bad);
            CHECK_EQ_INT(bad, 0);
            free(w), free(a), free(q);
        }
    }
}

static void test_matmul(void) {
    const uint32_t mt[] = {LLMK_TYPE_Q4_1, LLMK_TYPE_Q8_0, LLMK_TYPE_F32, LLMK_TYPE_Q4_K, LLMK_TYPE_F16};
    llmk_pool *p2 = NULL, *p3 = NULL;
    CHECK_STATUS(llmk_pool_create(2, &p2), LLMK_OK);
    CHECK_STATUS(llmk_pool_create(3, &p3), LLMK_OK);
    for (size_t ti = 0; ti < LLMK_ARRAY_LEN(mt); ti++) {
        uint32_t t = mt[ti];
        int64_t n = 77, k = 512, ms[] = {1, 3, 9, 40, 37};
        size_t rb = row_bytes(t, k);
        float *wf = malloc((size_t)(n * k) * 4);
        for (int64_t i = 0; i < n * k; i++) wf[i] = unif();
        unsigned char *w = aligned_alloc(64, (rb * (size_t)n + 63) / 64 * 64);
        for (int64_t r = 0; r < n; r++) llmk_quantize_row(t, wf + r * k, w + (size_t)r * rb, k);
        for (int64_t r = 0; r < n; r++) llmk_dequantize_row(t, w + (size_t)r * rb, wf + r * k, k);
        for (size_t mi = 0; mi < LLMK_ARRAY_LEN(ms); mi++) {
            int64_t m = ms[mi];
            float *x = malloc((size_t)(m * k) * 4), *y1 = malloc((size_t)(m * n) * 4);
            float *y2 = malloc((size_t)(m * n) * 4);
            for (int64_t i = 0; i < m * k; i++) x[i] = unif();
            CHECK_STATUS(llmk_quantized_matmul(NULL, t, w, n, k, x, m, y1), LLMK_OK);
            CHECK_STATUS(llmk_quantized_matmul(p2, t, w, n, k, x, m, y2), LLMK_OK);
            CHECK(memcmp(y1, y2, (size_t)(m * n) * 4) == 0);
            CHECK_STATUS(llmk_quantized_matmul(p3, t, w, n, k, x, m, y2), LLMK_OK);
            CHECK(memcmp(y1, y2, (size_t)(m * n) * 4) == 0);
            /* m rows at once (tiles, vec_dotm) give each row's bits of a
             * one-row call (the row kernel streaming the weights) */
            for (int64_t i = 0; i < m; i++) {
                CHECK_STATUS(llmk_quantized_matmul(NULL, t, w, n, k, x + i * k, 1, y2), LLMK_OK);
                CHECK(memcmp(y1 + i * n, y2, (size_t)n * 4) == 0);
            }
            /* close to the f64 product of the dequantized weights (activation
             * quantization costs up to ~1/127 of sum|w x| per element) */
            int far = 0;
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) {
                    double s = 0, sa = 0;
                    for (int64_t l = 0; l < k; l++)
                        s += (double)wf[j * k + l] * x[i * k + l], sa += fabs((double)wf[j * k + l] * x[i * k + l]);
                    far += !(fabs(s - y1[i * n + j]) <= 0.01 * sa);
                }
            CHECK_EQ_INT(far, 0);
            free(x), free(y1), free(y2);
        }
        free(wf), free(w);
    }
    /* refusals */
    float x[64] = {0}, y[4];
    unsigned char w[256] = {0};
    CHECK_STATUS(llmk_quantized_matmul(NULL, LLMK_TYPE_Q4_0, w, 2, 33, x, 1, y), LLMK_BAD_TENSOR_INFO);
    CHECK_STATUS(llmk_quantized_matmul(NULL, LLMK_TYPE_Q4_0, w, 0, 32, x, 1, y), LLMK_EMPTY_DIMENSION);
    CHECK_STATUS(llmk_quantized_matmul(NULL, 16, w, 1, 256, x, 1, y), LLMK_TENSOR_TYPE_UNSUPPORTED);
    CHECK_STATUS(llmk_quantized_matmul(NULL, LLMK_TYPE_Q4_0, w + 1, 1, 32, x, 1, y), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_quantized_matmul(NULL, LLMK_TYPE_Q4_0, NULL, 1, 32, x, 1, y), LLMK_INVALID_ARGUMENT);
    llmk_pool_free(p2);
    llmk_pool_free(p3);
}

/* vec_dotm (where a codec has one) against the row kernel: every
 * element bitwise identical for ragged row counts and activation counts that
 * are not multiples of the tiles, random data and the integer extremes
 * (nibbles 15 / |q| = 127 against activations of +-127). */
static void test_dotm(void) {
    const uint32_t mt[] = {LLMK_TYPE_Q4_1, LLMK_TYPE_Q8_0, LLMK_TYPE_F32, LLMK_TYPE_F16, LLMK_TYPE_BF16};
    for (size_t ti = 0; ti < LLMK_ARRAY_LEN(mt); ti++) {
        uint32_t t = mt[ti];
        llmk_dotm_fn dm = llmk_kernels()->type[t].vec_dotm;
        llmk_dot_fn d = llmk_kernels()->type[t].vec_dot;
        if (!dm) continue; /* no multi-activation kernel on this CPU */
        const struct llmk_codec *c = llmk_codec_get(t);
        bool flt = llmk_type_block_elems(t) == 1; /* float rows: any k, the 8-lane and scalar tails too */
        const int64_t ks[] = {32, 96, 576, 1536, 9216}, kf[] = {1, 7, 45, 576, 1003}; /* 9216: past the pre-converted scale buffer */
        for (size_t kk = 0; kk < LLMK_ARRAY_LEN(ks); kk++) {
            int64_t k = flt ? kf[kk] : ks[kk], n = 1 + (int64_t)(rnd32() % 11), m = 1 + (int64_t)(rnd32() % 10);
            size_t rb = row_bytes(t, k), ab = row_bytes(c->act_type, k);
            unsigned char *w = aligned_alloc(64, (rb * (size_t)n + 63) / 64 * 64);
            unsigned char *a = aligned_alloc(64, (ab * (size_t)m + 63) / 64 * 64);
            float *x = malloc((size_t)k * 4), *y1 = malloc((size_t)(n * m) * 4), *y2 = malloc((size_t)(n * m) * 4);
            for (int extreme = 0; extreme < 2; extreme++) {
                for (int64_t r = 0; r < n; r++) {
                    for (int64_t i = 0; i < k; i++) x[i] = extreme ? (i % 2 ? 1.0f : 0.999f) : unif();
                    llmk_quantize_row(t, x, w + (size_t)r * rb, k);
                }
                for (int64_t i = 0; i < m; i++) {
                    for (int64_t l = 0; l < k; l++) x[l] = extreme ? ((i + l / 32) % 2 ? 1.0f : -1.0f) : unif() * 3.0f;
                    llmk_quantize_row(c->act_type, x, a + (size_t)i * ab, k);
                }
                for (int64_t i = 0; i < m; i++) d(k, w, rb, n, a + (size_t)i * ab, y1 + i * n);
                dm(k, w, rb, n, a, ab, m, y2, (size_t)n);
                CHECK(memcmp(y1, y2, (size_t)(n * m) * 4) == 0);
                /* one weight row at a time through dotm: still the same bits */
                for (int64_t r = 0; r < n; r++) dm(k, w + (size_t)r * rb, rb, 1, a, ab, m, y2 + r, (size_t)n);
                CHECK(memcmp(y1, y2, (size_t)(n * m) * 4) == 0);
                if (extreme) {
                    /* the integer sums at their extremes must still match _ref exactly
                     * up to f32 rounding: compare against the reference kernel */
                    float ref;
                    c->dot(k, w, rb, 1, a, &ref);
                    double tol = (double)k * 0x1p-22 * abs_dot(t, w, c->act_type, a, k);
                    CHECK(fabs((double)ref - y1[0]) <= tol);
                }
            }
            free(w), free(a), free(x), free(y1), free(y2);
        }
    }
}

int main(void) {
    printf("%s", llmk_cpu_features());
    test_dot_exact_and_bounded();
    test_dot_extremes();
    test_matmul();
    test_dotm();
    return check_summary("codec_dot");
}
