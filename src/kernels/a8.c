/* 8-bit activations: quantization and the scalar reference products (a8.h). */
#include "kernels/a8.h"

#include "codec/blocks.h"
#include "codec/codec.h"
#include "codec/half.h"
#include "internal.h"
#include "kernels/r8_read.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* Byte i of each group of 8 holds element P[i] of the group (a8.h). */
static const int a8_order[8] = {0, 4, 1, 5, 2, 6, 3, 7};

size_t llmk_a8_row_bytes(int64_t k) { return (size_t)(k / LLMK_QK) * (LLMK_QK + 8); }

int llmk_a8_supports(uint32_t wtype) {
    return wtype == LLMK_TYPE_Q4_0 || wtype == LLMK_TYPE_Q4_1 || wtype == LLMK_TYPE_Q4_K;
}

/* x rounded to nearest, ties to even, for |x| < 2^22 (as in a16.c). */
static inline float round_even(float x) { return (x + 12582912.0f) - 12582912.0f; }

int llmk_a8_quantize_row_ref(const float *x, int64_t k, int64_t e0, int64_t e1, void *dst) {
    int64_t nb = k / LLMK_QK;
    int8_t *q = dst;
    float *dd = (float *)(void *)((unsigned char *)dst + (size_t)k), *ss = dd + nb;
    int bad = 0;
    for (int64_t b = e0 / LLMK_QK; b < e1 / LLMK_QK; b++) {
        const float *xb = x + b * LLMK_QK;
        uint32_t mb = 0; /* max |x| as a bit pattern: NaN and infinity sort above the rest */
        for (int j = 0; j < LLMK_QK; j++) {
            uint32_t u;
            memcpy(&u, &xb[j], sizeof u);
            u &= 0x7fffffffu;
            mb = u > mb ? u : mb;
        }
        bad |= mb >= 0x7f800000u;
        float amax;
        memcpy(&amax, &mb, sizeof amax);
        float d = amax / 127.0f, id = d == 0 ? 0.0f : 1.0f / d;
        bool tiny = id > FLT_MAX; /* 1 / d overflows: divide instead */
        int32_t sum = 0;
        for (int j = 0; j < LLMK_QK; j++) {
            const float xj = xb[(j & ~7) + a8_order[j & 7]];
            float v = round_even(tiny ? xj / d : xj * id);
            v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
            q[b * LLMK_QK + j] = v == v ? (int8_t)v : 0;
            sum += q[b * LLMK_QK + j];
        }
        dd[b] = d;
        ss[b] = d * (float)sum; /* |sum| <= 32 * 127: exact */
    }
    return bad;
}

/* Element j of a Q4_0 / Q4_1 block: low nibbles are elements 0..15. */
static int nibble(const uint8_t *qs, int j) { return j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4; }

/* One row's products (a8.h) on its GGUF blocks. Q4_0's offset -8 is the
 * min -8 d rounded to f16, as the r8 record holds it (r8.c); Q4_K's
 * sub-blocks are read as r8.c packs them. */
static float ref_row(uint32_t type, int64_t k, const unsigned char *w, const unsigned char *a) {
    int64_t nb = k / LLMK_QK;
    const int8_t *q = (const int8_t *)a;
    const float *da = (const float *)(const void *)(a + (size_t)k), *sa = da + nb;
    float acc = 0;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *qs;
        float dw, mw;
        struct llmk_r8_sub sub;
        if (type == LLMK_TYPE_Q4_K) { /* Q4S: nibbles times d * sc, less dmin * mn (r8_read.h) */
            llmk_r8_read_sub(type, w + (size_t)(b / 8) * sizeof(llmk_block_q4_k), (int)(b % 8), &sub);
            dw = sub.s[0], mw = sub.m, qs = NULL;
        } else if (type == LLMK_TYPE_Q4_0) {
            llmk_block_q4_0 blk;
            memcpy(&blk, w + (size_t)b * sizeof blk, sizeof blk);
            dw = llmk_fp16_to_fp32(llmk_ld_u16(&blk.d));
            mw = llmk_fp16_to_fp32(llmk_fp32_to_fp16(-8.0f * dw));
            qs = w + (size_t)b * sizeof blk + offsetof(llmk_block_q4_0, qs);
        } else {
            llmk_block_q4_1 blk;
            memcpy(&blk, w + (size_t)b * sizeof blk, sizeof blk);
            dw = llmk_fp16_to_fp32(llmk_ld_u16(&blk.d)), mw = llmk_fp16_to_fp32(llmk_ld_u16(&blk.m));
            qs = w + (size_t)b * sizeof blk + offsetof(llmk_block_q4_1, qs);
        }
        int32_t n = 0;
        for (int j = 0; j < LLMK_QK; j++) {
            int e = (j & ~7) + a8_order[j & 7];
            n += (qs ? nibble(qs, e) : sub.v[e]) * q[b * LLMK_QK + j];
        }
        acc = fmaf((float)n, dw * da[b], acc);
        acc = fmaf(mw, sa[b], acc);
    }
    return acc;
}

void llmk_r8_a8_ref(uint32_t type, int64_t k, const void *w, size_t ws, int64_t r0, int64_t r1, const void *act,
                    size_t as, int64_t m, float *y, size_t ys) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t r = r0; r < r1; r++)
            y[(size_t)i * ys + (size_t)r] = ref_row(type, k, (const unsigned char *)w + (size_t)r * ws,
                                                    (const unsigned char *)act + (size_t)i * as);
}
