/* Scalar reference attention / SwiGLU kernels of the executor (attn.h), as
 * the kernel table's references (kernels.h). */
#include "kernels/kernels.h"
#include "internal.h"

#include "codec/blocks.h"
#include "codec/codec.h"
#include "codec/half.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static inline float kv_at(const void *p, int64_t i, int f16) {
    return f16 ? llmk_fp16_to_fp32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

static void chunk_ref(const float *q, const void *k, const void *v, int64_t n, int64_t stride, int hd,
                      float scale, float *part, float *scores, int f16) {
    float m = -INFINITY;
    for (int64_t j = 0; j < n; j++) {
        float s = 0;
        for (int d = 0; d < hd; d++) s += q[d] * kv_at(k, j * stride + d, f16);
        s *= scale;
        scores[j] = s;
        if (s > m) m = s;
    }
    float l = 0, *o = part + 2;
    for (int d = 0; d < hd; d++) o[d] = 0;
    for (int64_t j = 0; j < n; j++) {
        float p = expf(scores[j] - m);
        l += p;
        for (int d = 0; d < hd; d++) o[d] += p * kv_at(v, j * stride + d, f16);
    }
    part[0] = m;
    part[1] = l;
}

static void chunk_ref_f32(const float *q, const void *k, const void *v, int64_t n, int64_t stride, int hd,
                          float scale, float *part, float *scores) {
    chunk_ref(q, k, v, n, stride, hd, scale, part, scores, 0);
}
static void chunk_ref_f16(const float *q, const void *k, const void *v, int64_t n, int64_t stride, int hd,
                          float scale, float *part, float *scores) {
    chunk_ref(q, k, v, n, stride, hd, scale, part, scores, 1);
}

/* Q8_0 rows: the scale is applied once per block, to the block's q . k sum
 * and to the softmax weight of the block's values (p * d, then * qs). */
static void chunk_ref_q8_0(const float *q, const void *k, const void *v, int64_t n, int64_t stride, int hd,
                           float scale, float *part, float *scores) {
    const size_t bb = sizeof(llmk_block_q8_0), rb = (size_t)(stride / LLMK_QK) * bb;
    const int nb = hd / LLMK_QK;
    float m = -INFINITY;
    for (int64_t j = 0; j < n; j++) {
        const unsigned char *row = (const unsigned char *)k + (size_t)j * rb;
        float s = 0;
        for (int b = 0; b < nb; b++) {
            const unsigned char *blk = row + (size_t)b * bb;
            const int8_t *qs = (const int8_t *)(blk + 2);
            float a = 0;
            for (int i = 0; i < LLMK_QK; i++) a += q[b * LLMK_QK + i] * (float)qs[i];
            s += llmk_fp16_to_fp32(llmk_ld_u16(blk)) * a;
        }
        s *= scale;
        scores[j] = s;
        if (s > m) m = s;
    }
    float l = 0, *o = part + 2;
    for (int d = 0; d < hd; d++) o[d] = 0;
    for (int64_t j = 0; j < n; j++) {
        float p = expf(scores[j] - m);
        l += p;
        const unsigned char *row = (const unsigned char *)v + (size_t)j * rb;
        for (int b = 0; b < nb; b++) {
            const unsigned char *blk = row + (size_t)b * bb;
            const int8_t *qs = (const int8_t *)(blk + 2);
            float c = p * llmk_fp16_to_fp32(llmk_ld_u16(blk));
            for (int i = 0; i < LLMK_QK; i++) o[b * LLMK_QK + i] += c * (float)qs[i];
        }
    }
    part[0] = m;
    part[1] = l;
}

static void add_ref(float *x, const float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] += y[i];
}

static void swiglu_ref(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

void llmk_attn_merge(const float *parts, int nc, int hd, float *out) {
    if (nc == 1) { /* exp(0) = 1: the single-chunk case is just o / l */
        float inv = 1.0f / parts[1];
        for (int d = 0; d < hd; d++) out[d] = parts[2 + d] * inv;
        return;
    }
    float mx = -INFINITY;
    for (int c = 0; c < nc; c++)
        if (parts[(int64_t)c * (hd + 2)] > mx) mx = parts[(int64_t)c * (hd + 2)];
    float l = 0;
    for (int d = 0; d < hd; d++) out[d] = 0;
    for (int c = 0; c < nc; c++) {
        const float *p = parts + (int64_t)c * (hd + 2);
        float w = expf(p[0] - mx);
        l += p[1] * w;
        for (int d = 0; d < hd; d++) out[d] += p[2 + d] * w;
    }
    float inv = 1.0f / l;
    for (int d = 0; d < hd; d++) out[d] *= inv;
}

void llmk_attn_merge_sink(const float *parts, int nc, int hd, float sink, float *out) {
    float mx = sink;
    for (int c = 0; c < nc; c++)
        if (parts[(int64_t)c * (hd + 2)] > mx) mx = parts[(int64_t)c * (hd + 2)];
    float l = 0;
    for (int d = 0; d < hd; d++) out[d] = 0;
    for (int c = 0; c < nc; c++) {
        const float *p = parts + (int64_t)c * (hd + 2);
        float w = expf(p[0] - mx);
        l += p[1] * w;
        for (int d = 0; d < hd; d++) out[d] += p[2 + d] * w;
    }
    l += expf(sink - mx);
    float inv = 1.0f / l;
    for (int d = 0; d < hd; d++) out[d] *= inv;
}

static void merge_ref(const float *parts, int nc, int hd, const float *sink, float *out) {
    if (sink) llmk_attn_merge_sink(parts, nc, hd, *sink, out);
    else llmk_attn_merge(parts, nc, hd, out);
}

static void to_f16_ref(const float *src, uint16_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = llmk_fp32_to_fp16(src[i]);
}

void llmk_kernels_attn_ref(struct llmk_kernels *k) {
    k->attn_f32 = chunk_ref_f32, k->attn_f16 = chunk_ref_f16, k->attn_q8_0 = chunk_ref_q8_0;
    k->attn_multi_f32 = NULL, k->attn_multi_f16 = NULL;
    k->attn_merge = merge_ref;
    k->attn_head_multiple = 1;
    k->swiglu = swiglu_ref, k->add = add_ref, k->to_f16 = to_f16_ref;
}
