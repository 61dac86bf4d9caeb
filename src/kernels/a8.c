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

size_t llmk_a8_row_bytes(int64_t k) { return (size_t)(k / LLMK_QK) * (LLMK_QK + 12); }

/* The 4-bit types and the int8-record types (a8.h): not Q2_K (its offsets
 * per 16) or MXFP4 (not yet). */
int llmk_a8_supports(uint32_t wtype) {
    switch (wtype) {
    case LLMK_TYPE_Q4_0:
    case LLMK_TYPE_Q4_1:
    case LLMK_TYPE_Q4_K:
    case LLMK_TYPE_Q5_0:
    case LLMK_TYPE_Q8_0:
    case LLMK_TYPE_IQ4_NL:
    case LLMK_TYPE_IQ4_XS:
    case LLMK_TYPE_Q5_1:
    case LLMK_TYPE_Q3_K:
    case LLMK_TYPE_Q5_K:
    case LLMK_TYPE_Q6_K: return 1;
    default: return 0;
    }
}

/* x rounded to nearest, ties to even, for |x| < 2^22 (as in a16.c). */
static inline float round_even(float x) { return (x + 12582912.0f) - 12582912.0f; }

int llmk_a8_quantize_row_ref(const float *x, int64_t k, int64_t e0, int64_t e1, void *dst) {
    struct llmk_a8_row a = llmk_a8_row_at(dst, k);
    int8_t *q = a.q;
    float *dd = a.d, *ss = a.s;
    int16_t *hh = a.h;
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
        int32_t half[2] = {0, 0};
        for (int j = 0; j < LLMK_QK; j++) {
            const float xj = xb[(j & ~7) + a8_order[j & 7]];
            float v = round_even(tiny ? xj / d : xj * id);
            v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
            q[b * LLMK_QK + j] = v == v ? (int8_t)v : 0;
            half[j / 16] += q[b * LLMK_QK + j]; /* the order stays within groups of 8 */
        }
        dd[b] = d;
        ss[b] = d * (float)(half[0] + half[1]); /* |sum| <= 32 * 127: exact */
        hh[2 * b] = (int16_t)half[0], hh[2 * b + 1] = (int16_t)half[1];
    }
    return bad;
}

/* Element j of a 32-element block's 16 nibble bytes: low nibbles are
 * elements 0..15. */
static int nibble(const uint8_t *qs, int j) { return j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4; }

/* Block b of a row (its GGUF bytes at row) as its r8 record holds it:
 * integer weights v, scales s (one per 16 elements) and offset m (r8.h).
 * Q4_0's offset -8 is the min -8 d rounded to f16 (r8.c); the types in
 * 256-element super-blocks and Q5_1 as r8_read.h reads them. */
static void read_block(uint32_t type, const unsigned char *row, int64_t b, struct llmk_r8_sub *o) {
    if (type == LLMK_TYPE_IQ4_NL) {
        const unsigned char *blk = row + (size_t)b * sizeof(llmk_block_iq4_nl);
        o->s[0] = o->s[1] = llmk_fp16_to_fp32(llmk_ld_u16(blk)), o->m = 0;
        for (int j = 0; j < LLMK_QK; j++) o->v[j] = llmk_iq4nl_values[nibble(blk + offsetof(llmk_block_iq4_nl, qs), j)];
        return;
    }
    if (type == LLMK_TYPE_Q8_0) {
        const unsigned char *blk = row + (size_t)b * sizeof(llmk_block_q8_0);
        o->s[0] = o->s[1] = llmk_fp16_to_fp32(llmk_ld_u16(blk)), o->m = 0;
        memcpy(o->v, blk + offsetof(llmk_block_q8_0, qs), LLMK_QK);
        return;
    }
    if (type == LLMK_TYPE_Q4_0 || type == LLMK_TYPE_Q4_1 || type == LLMK_TYPE_Q5_0) {
        size_t bs = llmk_type_block_bytes(type);
        const unsigned char *blk = row + (size_t)b * bs;
        float d = llmk_fp16_to_fp32(llmk_ld_u16(blk)); /* d leads all three blocks */
        o->s[0] = o->s[1] = d, o->m = 0;
        if (type == LLMK_TYPE_Q5_0) {
            const uint8_t *qh = blk + offsetof(llmk_block_q5_0, qh), *qs = blk + offsetof(llmk_block_q5_0, qs);
            for (int j = 0; j < LLMK_QK; j++) o->v[j] = (int8_t)((nibble(qs, j) | ((qh[j >> 3] >> (j & 7)) & 1) << 4) - 16);
            return;
        }
        const uint8_t *qs = blk + (type == LLMK_TYPE_Q4_0 ? offsetof(llmk_block_q4_0, qs) : offsetof(llmk_block_q4_1, qs));
        for (int j = 0; j < LLMK_QK; j++) o->v[j] = (int8_t)nibble(qs, j);
        o->m = type == LLMK_TYPE_Q4_0 ? llmk_fp16_to_fp32(llmk_fp32_to_fp16(-8.0f * d))
                                      : llmk_fp16_to_fp32(llmk_ld_u16(blk + offsetof(llmk_block_q4_1, m)));
        return;
    }
    int64_t per = llmk_type_block_elems(type) / LLMK_QK;
    llmk_r8_read_sub(type, row + (size_t)(b / per) * llmk_type_block_bytes(type), (int)(b % per), o);
}

/* One row's products (a8.h): A16's arithmetic for the record form (r8.h)
 * on 8-bit activations in their stored order. */
static float ref_row(uint32_t type, int64_t k, const unsigned char *w, const unsigned char *a) {
    int64_t nb = k / LLMK_QK;
    int layout = llmk_r8_layout(type);
    const int8_t *q = (const int8_t *)a;
    const float *da = (const float *)(const void *)(a + (size_t)k), *sa = da + nb;
    float acc = 0;
    for (int64_t b = 0; b < nb; b++) {
        struct llmk_r8_sub o;
        read_block(type, w, b, &o);
        int32_t n[2] = {0, 0};
        for (int j = 0; j < LLMK_QK; j++) n[j / 16] += o.v[(j & ~7) + a8_order[j & 7]] * q[b * LLMK_QK + j];
        if (layout == LLMK_R8_Q8S) {
            acc = fmaf((float)n[0], o.s[0] * da[b], acc);
            acc = fmaf((float)n[1], o.s[1] * da[b], acc);
        } else {
            acc = fmaf((float)(n[0] + n[1]), o.s[0] * da[b], acc);
        }
        if (layout != LLMK_R8_Q8_0) acc = fmaf(o.m, sa[b], acc);
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
