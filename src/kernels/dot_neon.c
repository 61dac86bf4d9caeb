/* NEON dot kernels for arm64 (baseline ARMv8 NEON: widening multiplies, no
 * dotprod extension, since the build gives this file no extra -march flags).
 * Integer block sums are exact; f32 accumulation runs in 4 lanes. Rows are
 * independent, one at a time. Compiled only on aarch64 (the Makefile filters
 * *_neon.c elsewhere); cross-checked with aarch64-linux-gnu-gcc. */
#include "codec/blocks.h"
#include "codec/codec.h"
#include "codec/half.h"
#include "internal.h"
#include "kernels/kernels.h"

#include <arm_neon.h>

/* sum of 32 int8 x int8 products as 4 int32 lanes */
static inline int32x4_t dot32(int8x16_t w0, int8x16_t w1, int8x16_t a0, int8x16_t a1) {
    int16x8_t p0 = vmull_s8(vget_low_s8(w0), vget_low_s8(a0));
    p0 = vmlal_s8(p0, vget_high_s8(w0), vget_high_s8(a0));
    int16x8_t p1 = vmull_s8(vget_low_s8(w1), vget_low_s8(a1));
    p1 = vmlal_s8(p1, vget_high_s8(w1), vget_high_s8(a1));
    return vaddq_s32(vpaddlq_s16(p0), vpaddlq_s16(p1));
}

static void dot_q4_1(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    const llmk_block_q8_1 *ab = a;
    for (int64_t r = 0; r < nrows; r++) {
        const llmk_block_q4_1 *wb = (const llmk_block_q4_1 *)((const char *)w + (size_t)r * ws);
        float32x4_t acc = vdupq_n_f32(0);
        float macc = 0;
        for (int64_t b = 0; b < k / LLMK_QK; b++) {
            uint8x16_t q = vld1q_u8(wb[b].qs);
            int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f)));
            int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(q, 4));
            int32x4_t s = dot32(lo, hi, vld1q_s8(ab[b].qs), vld1q_s8(ab[b].qs + 16));
            float sc = llmk_fp16_to_fp32(wb[b].d) * llmk_fp16_to_fp32(ab[b].d);
            acc = vmlaq_n_f32(acc, vcvtq_f32_s32(s), sc);
            macc += llmk_fp16_to_fp32(wb[b].m) * llmk_fp16_to_fp32(ab[b].s);
        }
        y[r] = vaddvq_f32(acc) + macc;
    }
}

static void dot_q8_0(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    const llmk_block_q8_0 *ab = a;
    for (int64_t r = 0; r < nrows; r++) {
        const llmk_block_q8_0 *wb = (const llmk_block_q8_0 *)((const char *)w + (size_t)r * ws);
        float32x4_t acc = vdupq_n_f32(0);
        for (int64_t b = 0; b < k / LLMK_QK; b++) {
            int32x4_t s = dot32(vld1q_s8(wb[b].qs), vld1q_s8(wb[b].qs + 16), vld1q_s8(ab[b].qs),
                                vld1q_s8(ab[b].qs + 16));
            float sc = llmk_fp16_to_fp32(wb[b].d) * llmk_fp16_to_fp32(ab[b].d);
            acc = vmlaq_n_f32(acc, vcvtq_f32_s32(s), sc);
        }
        y[r] = vaddvq_f32(acc);
    }
}

void llmk_kernels_dot_neon(struct llmk_type_kernels *k) {
    k[LLMK_TYPE_Q4_1].vec_dot = dot_q4_1, k[LLMK_TYPE_Q4_1].vec_dot_name = "q4_1_neon";
    k[LLMK_TYPE_Q8_0].vec_dot = dot_q8_0, k[LLMK_TYPE_Q8_0].vec_dot_name = "q8_0_neon";
}
