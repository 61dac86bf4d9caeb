/* Codec unit tests: exact half conversions, block sizes against the type
 * table, quantize -> dequantize error bounds per codec, argument refusals.
 * Bit-exactness against gguf-py lives in tests/py/test_codecs.py. */
#include "check.h"
#include "codec/blocks.h"
#include "codec/codec.h"
#include "codec/half.h"
#include "internal.h"
#include "kernels/q4_1_x2.h"
#include "llmk.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd32(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}
static float gauss(void) {
    float u = ((float)rnd32() + 1.0f) / 4294967296.0f, v = (float)rnd32() / 4294967296.0f;
    return sqrtf(-2 * logf(u)) * cosf(6.2831853f * v);
}

/* Nearest-even f16 of f by brute force over neighbours, in double. */
static uint16_t fp16_brute(float f) {
    double v = fabs((double)f);
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    if (v >= 65520.0) return sign | 0x7c00;
    uint16_t best = 0;
    double be = INFINITY;
    for (uint32_t h = 0; h < 0x7c00; h++) {
        double e = fabs((double)llmk_fp16_to_fp32((uint16_t)h) - v);
        if (e < be || (e == be && !(h & 1))) be = e, best = (uint16_t)h;
    }
    return sign | best;
}

static void test_half(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = llmk_fp16_to_fp32((uint16_t)h);
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
            bad += !isnan(f);
            continue;
        }
        bad += llmk_fp32_to_fp16(f) != h; /* exact round trip of every non-NaN */
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_DBL(llmk_fp16_to_fp32(0x0001), 0x1p-24);  /* smallest subnormal */
    CHECK_EQ_DBL(llmk_fp16_to_fp32(0x03ff), 1023 * 0x1p-24);
    CHECK_EQ_DBL(llmk_fp16_to_fp32(0x7bff), 65504.0);
    CHECK(isinf(llmk_fp16_to_fp32(0xfc00)) && llmk_fp16_to_fp32(0xfc00) < 0);
    CHECK_EQ_INT(llmk_fp32_to_fp16(65519.99f), 0x7bff);
    CHECK_EQ_INT(llmk_fp32_to_fp16(65520.0f), 0x7c00);
    CHECK_EQ_INT(llmk_fp32_to_fp16(0x1p-25f), 0);           /* tie to even: 0 */
    CHECK_EQ_INT(llmk_fp32_to_fp16(0x1.000002p-25f), 1);    /* just above the tie */
    CHECK_EQ_INT(llmk_fp32_to_fp16(3 * 0x1p-25f), 2);       /* 1.5 ulp ties to 2 */
    CHECK_EQ_INT(llmk_fp32_to_fp16(-0.0f), 0x8000);
    CHECK((llmk_fp32_to_fp16(NAN) & 0x7e00) == 0x7e00);
    /* random floats over the whole f16 range vs brute force */
    int mism = 0;
    for (int i = 0; i < 60; i++) {
        float f = ldexpf((float)(rnd32() & 0xffffff) / 16777216.0f, (int)(rnd32() % 44) - 28);
        if (rnd32() & 1) f = -f;
        mism += llmk_fp32_to_fp16(f) != fp16_brute(f);
    }
    CHECK_EQ_INT(mism, 0);
    /* bf16: exact widening; rounding to nearest even; NaN stays NaN */
    CHECK_EQ_DBL(llmk_bf16_to_fp32(0x3f80), 1.0);
    CHECK_EQ_INT(llmk_fp32_to_bf16(llmk_f32_from_bits(0x3f808000u)), 0x3f80); /* tie, even */
    CHECK_EQ_INT(llmk_fp32_to_bf16(llmk_f32_from_bits(0x3f818000u)), 0x3f82); /* tie, up */
    CHECK_EQ_INT(llmk_fp32_to_bf16(llmk_f32_from_bits(0x3f808001u)), 0x3f81);
    CHECK(isnan(llmk_bf16_to_fp32(llmk_fp32_to_bf16(NAN))));
}

static const uint32_t all_types[] = {
    LLMK_TYPE_F32,  LLMK_TYPE_F16,  LLMK_TYPE_BF16, LLMK_TYPE_Q4_0, LLMK_TYPE_Q4_1,   LLMK_TYPE_Q5_0,
    LLMK_TYPE_Q5_1, LLMK_TYPE_Q8_0, LLMK_TYPE_Q8_1, LLMK_TYPE_Q2_K, LLMK_TYPE_Q3_K,   LLMK_TYPE_Q4_K,
    LLMK_TYPE_Q5_K, LLMK_TYPE_Q6_K, LLMK_TYPE_Q8_K, LLMK_TYPE_IQ4_NL, LLMK_TYPE_IQ4_XS, LLMK_TYPE_MXFP4,
    LLMK_TYPE_NVFP4};

/* Relative RMSE ceilings of quantize->dequantize on Gaussian data: a loose
 * envelope per bit width (a broken packing or scale gives errors near 1). */
static double rmse_ceiling(uint32_t t) {
    switch (t) {
    case LLMK_TYPE_F32: return 0;
    case LLMK_TYPE_F16: return 1e-3;
    case LLMK_TYPE_BF16: return 4e-3;
    case LLMK_TYPE_Q8_0: case LLMK_TYPE_Q8_1: case LLMK_TYPE_Q8_K: return 0.01;
    case LLMK_TYPE_Q6_K: return 0.03;
    case LLMK_TYPE_Q5_0: case LLMK_TYPE_Q5_1: case LLMK_TYPE_Q5_K: return 0.06;
    case LLMK_TYPE_Q4_0: case LLMK_TYPE_Q4_1: case LLMK_TYPE_Q4_K: case LLMK_TYPE_IQ4_NL:
    case LLMK_TYPE_IQ4_XS: case LLMK_TYPE_MXFP4: case LLMK_TYPE_NVFP4: return 0.13;
    case LLMK_TYPE_Q3_K: return 0.25;
    case LLMK_TYPE_Q2_K: return 0.45;
    }
    return 0;
}

static void test_roundtrip(void) {
    enum { N = 4096 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    unsigned char *q = malloc(N * 4);
    for (int i = 0; i < N; i++) x[i] = gauss();
    double sx = 0;
    for (int i = 0; i < N; i++) sx += (double)x[i] * x[i];
    for (size_t k = 0; k < LLMK_ARRAY_LEN(all_types); k++) {
        uint32_t t = all_types[k];
        CHECK(llmk_codec_get(t) != NULL);
        CHECK_STATUS(llmk_quantize_row(t, x, q, N), LLMK_OK);
        CHECK_STATUS(llmk_dequantize_row(t, q, y, N), LLMK_OK);
        double se = 0;
        for (int i = 0; i < N; i++) se += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        double rel = sqrt(se / sx);
        if (rel > rmse_ceiling(t)) fprintf(stderr, "%s: relative rmse %g\n", llmk_type_name(t), rel);
        CHECK(rel <= rmse_ceiling(t));
        /* zeros stay zeros; constants come back close */
        float z[256] = {0}, c[256], back[256];
        CHECK_STATUS(llmk_quantize_row(t, z, q, 256), LLMK_OK);
        CHECK_STATUS(llmk_dequantize_row(t, q, back, 256), LLMK_OK);
        int nz = 0;
        for (int i = 0; i < 256; i++) nz += back[i] != 0;
        CHECK_EQ_INT(nz, 0);
        for (int i = 0; i < 256; i++) c[i] = -2.5f;
        CHECK_STATUS(llmk_quantize_row(t, c, q, 256), LLMK_OK);
        CHECK_STATUS(llmk_dequantize_row(t, q, back, 256), LLMK_OK);
        /* E2M1 cannot hold 2.5 at any shared exponent: 2 or 3 */
        CHECK_NEAR(back[17], -2.5, t == LLMK_TYPE_MXFP4 ? 0.5 : 0.2);
    }
    free(x), free(y), free(q);
}

static void test_sizes_and_refusals(void) {
    CHECK_EQ_INT(sizeof(llmk_block_q4_k), llmk_type_block_bytes(LLMK_TYPE_Q4_K));
    CHECK_EQ_INT(sizeof(llmk_block_q8_1), llmk_type_block_bytes(LLMK_TYPE_Q8_1));
    CHECK_EQ_INT(sizeof(llmk_block_mxfp4), llmk_type_block_bytes(LLMK_TYPE_MXFP4));
    CHECK_EQ_INT(sizeof(llmk_block_iq4_xs), llmk_type_block_bytes(LLMK_TYPE_IQ4_XS));
    float f[64];
    unsigned char b[64];
    CHECK_STATUS(llmk_dequantize_row(LLMK_TYPE_Q4_0, b, f, 33), LLMK_BAD_TENSOR_INFO);
    CHECK_STATUS(llmk_dequantize_row(99, b, f, 32), LLMK_UNKNOWN_TYPE);
    CHECK_STATUS(llmk_dequantize_row(16, b, f, 256), LLMK_UNSUPPORTED);
    CHECK_STATUS(llmk_quantize_row(LLMK_TYPE_Q8_0, NULL, b, 32), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_quantize_row(LLMK_TYPE_Q8_0, f, b, -32), LLMK_INVALID_ARGUMENT);
    size_t n = 0;
    const char *const *names = llmk_codecs(&n);
    CHECK_EQ_INT(n, LLMK_ARRAY_LEN(all_types));
    CHECK(names[n] == NULL);
    CHECK(strstr(llmk_cpu_features(), "q4_1: ") != NULL);
}

/* The activation forms' quantizers (Q8_0, Q8_1, Q8_K, and the executor's
 * q8_1x built on Q8_1; scalar only) report a NaN (either sign), +inf or -inf
 * in their input, not the largest or smallest finite magnitudes, and write
 * the codec quantizer's bytes whatever the input. */
static void test_act_nonfinite(void) {
    static const float bad[] = {NAN, -NAN, INFINITY, -INFINITY}, edge[] = {FLT_MAX, -FLT_MAX, 3e38f, 0x1p-149f};
    static const struct {
        uint32_t type;
        llmk_act_quant_fn fn;
    } forms[] = {{LLMK_TYPE_Q8_0, llmk_quantize_act_q8_0}, {LLMK_TYPE_Q8_1, llmk_quantize_act_q8_1},
                 {LLMK_TYPE_Q8_K, llmk_quantize_act_q8_k}};
    enum { N = 512 };
    float x[N];
    static unsigned char a[N * 2], b[N * 2];
    for (size_t fi = 0; fi < sizeof forms / sizeof forms[0]; fi++)
        for (int rep = 0; rep < 24; rep++) {
            for (int i = 0; i < N; i++) x[i] = gauss();
            int want = rep % 3 == 0 ? -1 : rep % 3 == 1; /* -1: clean data */
            if (want >= 0) x[rnd32() % N] = want ? bad[rep % 4] : edge[rep % 4];
            memset(a, 0x5a, sizeof a), memset(b, 0x5a, sizeof b);
            CHECK_EQ_INT(forms[fi].fn(x, a, N) != 0, want == 1);
            CHECK_STATUS(llmk_quantize_row(forms[fi].type, x, b, N), LLMK_OK);
            CHECK(memcmp(a, b, sizeof a) == 0);
        }
    /* q8_1x: only the blocks of [e0, e1) count */
    enum { K = 256 };
    size_t rb = llmk_q8_1x_row_bytes(K);
    CHECK(rb <= sizeof a);
    for (int rep = 0; rep < 16; rep++) {
        for (int i = 0; i < K; i++) x[i] = gauss();
        int at = (int)(rnd32() % K);
        x[at] = rep < 8 ? bad[rep % 4] : edge[rep % 4];
        int64_t e0 = at < 128 ? 128 : 0, e1 = e0 + 128; /* the half without it */
        CHECK_EQ_INT(llmk_q8_1x_quantize(x, K, 0, K, a) != 0, rep < 8);
        CHECK_EQ_INT(llmk_q8_1x_quantize(x, K, e0, e1, a), 0);
        CHECK_EQ_INT(llmk_q8_1x_quantize(x, K, 128 - e0, 256 - e0, a) != 0, rep < 8);
    }
}

int main(void) {
    test_half();
    test_roundtrip();
    test_sizes_and_refusals();
    test_act_nonfinite();
    return check_summary("codec");
}
