#include "kernels/ops_f32.h"

#include "codec/blocks.h"
#include "codec/codec.h"
#include "codec/half.h"
#include "internal.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

float llmk_f32_dot(const float *restrict a, const float *restrict b, int64_t n) {
    /* Eight named partial sums (not an array: cheap under sanitizers too). */
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
        s4 += a[i + 4] * b[i + 4];
        s5 += a[i + 5] * b[i + 5];
        s6 += a[i + 6] * b[i + 6];
        s7 += a[i + 7] * b[i + 7];
    }
    float s = ((s0 + s4) + (s1 + s5)) + ((s2 + s6) + (s3 + s7));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

void llmk_f32_dots(const float *w, size_t ws, int64_t nr, const float *x, size_t xs, int64_t nt, int64_t n, float *y,
                   size_t ys) {
    for (int64_t t = 0; t < nt; t++)
        for (int64_t r = 0; r < nr; r++) y[(size_t)t * ys + (size_t)r] = llmk_f32_dot(w + (size_t)r * ws, x + (size_t)t * xs, n);
}

int64_t llmk_f32_argmax(const float *x, int64_t n) {
    int64_t bi = -1;
    float best = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (x[i] > best || (bi < 0 && x[i] == best)) best = x[i], bi = i;
    return bi;
}

/* An exponent of all ones (infinity or NaN), tested on the bits: integer
 * operations the compiler can vectorize, and no floating-point exception. */
bool llmk_f32_nonfinite(const float *x, int64_t n) {
    uint32_t any = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        any |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return any != 0;
}

/* The sum of squares runs in 8 independent double lanes, added in a fixed
 * order at the end: one serial chain of double adds cost ~4 cycles per
 * element, which made the norm ~2% of a decode step. */
void llmk_f32_rmsnorm_ref(float *out, const float *x, const float *w, int64_t n, float eps) {
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        s0 += (double)x[i] * x[i], s1 += (double)x[i + 1] * x[i + 1];
        s2 += (double)x[i + 2] * x[i + 2], s3 += (double)x[i + 3] * x[i + 3];
        s4 += (double)x[i + 4] * x[i + 4], s5 += (double)x[i + 5] * x[i + 5];
        s6 += (double)x[i + 6] * x[i + 6], s7 += (double)x[i + 7] * x[i + 7];
    }
    for (; i < n; i++) s0 += (double)x[i] * x[i];
    double ss = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7));
    float r = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
    if (w)
        for (i = 0; i < n; i++) out[i] = (x[i] * r) * w[i];
    else
        for (i = 0; i < n; i++) out[i] = x[i] * r;
}

void llmk_f32_rope_ref(float *x, int n_heads, int head_dim, const float *cs, bool neox) {
    int half = head_dim / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (int64_t)h * head_dim;
        for (int i = 0; i < half; i++) {
            int i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
            float c = cs[2 * i], s = cs[2 * i + 1];
            float a = v[i0], b = v[i1];
            v[i0] = a * c - b * s;
            v[i1] = a * s + b * c;
        }
    }
}

void llmk_rope_cs_table(const double *inv_freq, int half, int32_t n_pos, double af, float *cs) {
    for (int32_t pos = 0; pos < n_pos; pos++)
        for (int i = 0; i < half; i++) {
            double a = (double)pos * inv_freq[i];
            cs[((int64_t)pos * half + i) * 2] = (float)(cos(a) * af);
            cs[((int64_t)pos * half + i) * 2 + 1] = (float)(sin(a) * af);
        }
}

void llmk_scale_f32(float *x, int64_t n, float s) {
    for (int64_t i = 0; i < n; i++) x[i] *= s;
}

void llmk_softcap_f32(float *x, int64_t n, float c) {
    for (int64_t i = 0; i < n; i++) x[i] = c * tanhf(x[i] / c);
}

void llmk_f32_swiglu(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

void llmk_f32_attend(const float *q, const float *k, const float *v, int64_t n_kv, int64_t kv_stride, int head_dim,
                     float scale, float sink, float *scores, float *out) {
    float (*dot)(const float *, const float *, int64_t) = llmk_kernels()->f32_dot;
    float mx = sink;
    for (int64_t j = 0; j < n_kv; j++) {
        scores[j] = dot(q, k + j * kv_stride, head_dim) * scale;
        if (scores[j] > mx) mx = scores[j];
    }
    double sum = expf(sink - mx); /* 0 without a sink */
    for (int64_t j = 0; j < n_kv; j++) {
        scores[j] = expf(scores[j] - mx);
        sum += scores[j];
    }
    float inv = (float)(1.0 / sum);
    for (int d = 0; d < head_dim; d++) out[d] = 0;
    for (int64_t j = 0; j < n_kv; j++) {
        float p = scores[j] * inv;
        const float *vr = v + j * kv_stride;
        for (int d = 0; d < head_dim; d++) out[d] += p * vr[d];
    }
}

/* Row decoders for the codecs the default models use, written so the compiler
 * can vectorise them; each element is computed with the same f32 expression
 * as the codec's _ref dequantizer (tests check bitwise equality), everything
 * else goes through llmk_dequantize_row. */
static void dequant_q4_0_row(const void *src, float *restrict dst, int64_t n) {
    const llmk_block_q4_0 *restrict b = src;
    for (int64_t ib = 0; ib < n / LLMK_QK; ib++, dst += LLMK_QK) {
        float d = llmk_fp16_to_fp32(b[ib].d);
        const uint8_t *restrict qs = b[ib].qs;
        for (int j = 0; j < LLMK_QK / 2; j++) {
            dst[j] = d * (float)((int)(qs[j] & 0xf) - 8);
            dst[j + LLMK_QK / 2] = d * (float)((int)(qs[j] >> 4) - 8);
        }
    }
}

static void dequant_q4_1_row(const void *src, float *restrict dst, int64_t n) {
    const llmk_block_q4_1 *restrict b = src;
    for (int64_t ib = 0; ib < n / LLMK_QK; ib++, dst += LLMK_QK) {
        float d = llmk_fp16_to_fp32(b[ib].d), m = llmk_fp16_to_fp32(b[ib].m);
        const uint8_t *restrict qs = b[ib].qs;
        for (int j = 0; j < LLMK_QK / 2; j++) {
            dst[j] = d * (float)(qs[j] & 0xf) + m;
            dst[j + LLMK_QK / 2] = d * (float)(qs[j] >> 4) + m;
        }
    }
}

static void dequant_q8_0_row(const void *src, float *restrict dst, int64_t n) {
    const llmk_block_q8_0 *restrict b = src;
    for (int64_t ib = 0; ib < n / LLMK_QK; ib++, dst += LLMK_QK) {
        float d = llmk_fp16_to_fp32(b[ib].d);
        for (int j = 0; j < LLMK_QK; j++) dst[j] = d * (float)b[ib].qs[j];
    }
}

int llmk_f32_dequant_row(uint32_t type, const void *src, float *dst, int64_t n) {
    switch (type) {
    case LLMK_TYPE_Q4_0: dequant_q4_0_row(src, dst, n); return LLMK_OK;
    case LLMK_TYPE_Q4_1: dequant_q4_1_row(src, dst, n); return LLMK_OK;
    case LLMK_TYPE_Q8_0: dequant_q8_0_row(src, dst, n); return LLMK_OK;
    case LLMK_TYPE_F32: memcpy(dst, src, (size_t)n * sizeof *dst); return LLMK_OK;
    default: return llmk_dequantize_row(type, src, dst, n);
    }
}

enum { MATMUL_MAX = 4 };

/* Up to MATMUL_MAX matrices sharing one input, run as one pool region: their
 * rows are numbered one after another and that joint range is split, so a
 * Q/K/V or gate/up group costs one region instead of several. Each output
 * element is computed exactly as by a single-matrix call. */
struct matmul_ctx {
    int n_mat;
    const llmk_tensor_info *w[MATMUL_MAX];
    float *y[MATMUL_MAX];
    int64_t n_out[MATMUL_MAX], first[MATMUL_MAX + 1]; /* first[i]: joint index of matrix i's row 0 */
    uint64_t row_bytes[MATMUL_MAX];
    const float *x;
    int64_t n_tok, n_in;
    float *scratch;
    int64_t scratch_stride;
    const struct llmk_kernels *K;
    atomic_int status;
};

static void matmul_worker(void *arg, int ith, int nth) {
    struct matmul_ctx *c = arg;
    int64_t lo, hi;
    llmk_split_range(c->first[c->n_mat], ith, nth, &lo, &hi);
    float *row = c->scratch + (int64_t)ith * c->scratch_stride;
    for (int im = 0; im < c->n_mat; im++) {
        int64_t r0 = lo > c->first[im] ? lo - c->first[im] : 0;
        int64_t r1 = (hi < c->first[im + 1] ? hi : c->first[im + 1]) - c->first[im];
        if (r0 >= r1) continue;
        const llmk_tensor_info *w = c->w[im];
        const unsigned char *base = w->data;
        uint64_t rb = c->row_bytes[im];
        float *y = c->y[im];
        /* One activation row: decode-and-dot in registers when a kernel has
         * it (bitwise equal to decoding the row and calling the dot). */
        int (*rowdot)(uint32_t, const void *, const float *, int64_t, float *) = c->K->f32_rowdot;
        if (c->n_tok == 1 && rowdot && rowdot(w->type, base + (uint64_t)r0 * rb, c->x, c->n_in, &y[r0])) {
            for (int64_t r = r0 + 1; r < r1; r++) rowdot(w->type, base + (uint64_t)r * rb, c->x, c->n_in, &y[r]);
            continue;
        }
        for (int64_t r = r0; r < r1; r++) {
            int st = llmk_f32_dequant_row(w->type, base + (uint64_t)r * rb, row, c->n_in);
            if (st != LLMK_OK) {
                atomic_store(&c->status, st);
                return;
            }
            c->K->f32_dots(row, 0, 1, c->x, (size_t)c->n_in, c->n_tok, c->n_in, &y[r], (size_t)c->n_out[im]);
        }
    }
}

int llmk_f32_matmul_multi(llmk_pool *pool, int n_mat, const llmk_tensor_info *const *w, const float *x,
                          int64_t n_tok, float *const *y, float *scratch, int64_t scratch_stride) {
    struct matmul_ctx c = {.n_mat = n_mat, .x = x, .n_tok = n_tok, .scratch = scratch,
                           .scratch_stride = scratch_stride};
    LLMK_CHECK(n_mat >= 1 && n_mat <= MATMUL_MAX);
    c.n_in = (int64_t)w[0]->ne[0];
    LLMK_CHECK(scratch_stride >= c.n_in);
    for (int i = 0; i < n_mat; i++) {
        LLMK_CHECK((int64_t)w[i]->ne[0] == c.n_in);
        c.w[i] = w[i];
        c.y[i] = y[i];
        c.n_out[i] = (int64_t)w[i]->ne[1];
        c.first[i + 1] = c.first[i] + c.n_out[i];
        if (llmk_row_bytes(w[i]->type, w[i]->ne[0], &c.row_bytes[i]) != LLMK_OK)
            return llmk_fail(LLMK_TENSOR_TYPE_UNSUPPORTED, "matmul: tensor %s: bad row type %u", w[i]->name,
                             w[i]->type);
    }
    atomic_init(&c.status, LLMK_OK);
    c.K = llmk_kernels();
    llmk_pool_run(pool, matmul_worker, &c);
    int st = atomic_load(&c.status);
    if (st != LLMK_OK)
        return llmk_fail(st, "matmul: tensor %s: row decode failed (%s)", w[0]->name, llmk_status_name(st));
    return LLMK_OK;
}

int llmk_f32_matmul(llmk_pool *pool, const llmk_tensor_info *w, const float *x, int64_t n_tok,
                    float *y, float *scratch, int64_t scratch_stride) {
    return llmk_f32_matmul_multi(pool, 1, &w, x, n_tok, &y, scratch, scratch_stride);
}
