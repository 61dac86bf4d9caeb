/* NVFP4 codec (nvfp4.h): scalar reference quantize, dequantize and dot
 * against Q8_0 activations. Quantizing rounds to nearest even twice: the
 * block scale amax / 6 to E4M3 (saturating at 448), then each x / scale to
 * E2M1 (saturating at 6), so the bytes equal an ml_dtypes cast of the same
 * f32 values (tests/py/test_nvfp4.py). */
#include "codec/nvfp4.h"

#include "codec/blocks.h"
#include "codec/codec.h"
#include "codec/half.h"
#include "codec/minifloat.h"
#include "internal.h"

#include <math.h>
#include <string.h>

float llmk_ue4m3_half_to_fp32(uint8_t x) {
    if (x == 0 || x == 0x7f) return 0.0f;
    int e = (x >> 3) & 15, m = x & 7;
    return e == 0 ? ldexpf((float)m, -10) : ldexpf((float)(8 + m), e - 11);
}

/* The byte of an E4M3 value v in [0, 448] (one llmk_round_e4m3 gave). */
static uint8_t e4m3_byte(float v) {
    if (v < 0x1p-6f) return (uint8_t)(v * 512.0f); /* subnormal; 8 = 2^-6 = exponent 1 */
    uint32_t b = llmk_f32_bits(v);
    return (uint8_t)(((((b >> 23) & 255) - 127 + 7) << 3) | ((b >> 20) & 7));
}

/* The code of an E2M1 value r (one llmk_round_e2m1 gave; -0 keeps its sign). */
static uint8_t e2m1_code(float r) {
    float a = fabsf(r);
    uint8_t c = a < 0.25f ? 0 : a < 0.75f ? 1 : a < 1.25f ? 2 : a < 1.75f ? 3 : a < 2.5f ? 4 : a < 3.5f ? 5 : a < 5 ? 6 : 7;
    return (uint8_t)(c | (signbit(r) ? 8 : 0));
}

static void quant_block(const float *x, float g, int scaled, llmk_block_nvfp4 *blk) {
    for (int s = 0; s < 4; s++) {
        float v[16], amax = 0;
        for (int j = 0; j < 16; j++) {
            v[j] = scaled ? x[16 * s + j] / g : x[16 * s + j];
            if (fabsf(v[j]) > amax) amax = fabsf(v[j]);
        }
        float d = llmk_round_e4m3(amax / 6.0f);
        blk->d[s] = e4m3_byte(d);
        uint8_t q[16];
        for (int j = 0; j < 16; j++) q[j] = d > 0 ? e2m1_code(llmk_round_e2m1(v[j] / d)) : 0;
        for (int j = 0; j < 8; j++) blk->qs[8 * s + j] = (uint8_t)(q[j] | (q[j + 8] << 4));
    }
}

static void quant_nvfp4(const float *src, void *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK_NVFP4; b++) {
        llmk_block_nvfp4 blk;
        quant_block(src + b * LLMK_QK_NVFP4, 1.0f, 0, &blk);
        memcpy((char *)dst + b * sizeof blk, &blk, sizeof blk);
    }
}

void llmk_nvfp4_quantize_scaled(const float *x, int64_t n, float g, void *dst) {
    for (int64_t b = 0; b < n / LLMK_QK_NVFP4; b++) {
        llmk_block_nvfp4 blk;
        quant_block(x + b * LLMK_QK_NVFP4, g, 1, &blk);
        memcpy((char *)dst + b * sizeof blk, &blk, sizeof blk);
    }
}

static void dequant_nvfp4(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK_NVFP4; b++) {
        llmk_block_nvfp4 blk;
        memcpy(&blk, (const char *)src + b * sizeof blk, sizeof blk);
        for (int s = 0; s < 4; s++) {
            float d = llmk_ue4m3_half_to_fp32(blk.d[s]);
            float *y = dst + b * LLMK_QK_NVFP4 + 16 * s;
            for (int j = 0; j < 8; j++) {
                y[j] = (float)llmk_mxfp4_values[blk.qs[8 * s + j] & 15] * d;
                y[j + 8] = (float)llmk_mxfp4_values[blk.qs[8 * s + j] >> 4] * d;
            }
        }
    }
}

void llmk_nvfp4_dequantize_scaled(const void *src, int64_t n, float g, float *dst) {
    dequant_nvfp4(src, dst, n);
    for (int64_t i = 0; i < n; i++) dst[i] = dst[i] * g;
}

float llmk_nvfp4_tensor_scale(const float *x, int64_t n) {
    float amax = 0;
    for (int64_t i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]);
    float g = amax / (448.0f * 6.0f);
    return isfinite(amax) && g > 0 ? g : 1.0f;
}

/* Per sub-block an exact integer sum against its half of a Q8_0 block, then
 * sum += (scale * activation scale) * isum in block and sub-block order (the
 * AVX2 kernel keeps this order: the same bits). */
static void dot_nvfp4(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    const llmk_block_q8_0 *ab = a;
    for (int64_t r = 0; r < nrows; r++) {
        const char *row = (const char *)w + (size_t)r * ws;
        float sum = 0;
        for (int64_t b = 0; b < k / LLMK_QK_NVFP4; b++) {
            llmk_block_nvfp4 wb;
            memcpy(&wb, row + b * sizeof wb, sizeof wb);
            for (int s = 0; s < 4; s++) {
                const llmk_block_q8_0 *xb = &ab[2 * b + s / 2];
                const int8_t *xq = xb->qs + 16 * (s & 1);
                int isum = 0;
                for (int j = 0; j < 8; j++)
                    isum += llmk_mxfp4_values[wb.qs[8 * s + j] & 15] * xq[j] +
                            llmk_mxfp4_values[wb.qs[8 * s + j] >> 4] * xq[j + 8];
                sum = sum + (llmk_ue4m3_half_to_fp32(wb.d[s]) * llmk_fp16_to_fp32(xb->d)) * (float)isum;
            }
        }
        y[r] = sum;
    }
}

const struct llmk_codec llmk_codecs_nvfp4[] = {
    {LLMK_TYPE_NVFP4, LLMK_TYPE_Q8_0, dequant_nvfp4, quant_nvfp4, dot_nvfp4},
};
