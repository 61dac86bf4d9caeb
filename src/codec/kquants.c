/* Scalar reference codecs for the 256-element super-block codecs: Q2_K, Q3_K,
 * Q4_K, Q5_K, Q6_K, Q8_K and IQ4_XS.
 *
 * Dequantization is the format's arithmetic in f32 in gguf-py's order
 * ((d * scale) * q - (dmin * min)), bit-identical to gguf-py. gguf-py has no
 * quantizer for these, so quantize_ref is llmk's own: per sub-block a scale
 * (and min) search that refits by least squares, then the sub-block scales
 * quantized against the super-block scale and the values re-rounded against
 * the scales actually stored. Its error is measured in tests/py/test_codecs.py. */
#include "codec/blocks.h"
#include "codec/codec.h"
#include "codec/half.h"
#include "internal.h"

#include <math.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

float llmk_codec_nl_fit(const float *x, int n, const int8_t *grid, uint8_t *idx);

/* round-half-away to int, NaN -> 0, clamped to [lo, hi] without UB */
static inline int rnd(float v, int lo, int hi) {
    if (!(v == v)) return 0;
    if (v <= (float)lo) return lo;
    if (v >= (float)hi) return hi;
    return (int)roundf(v);
}

/* 6-bit scale/min packing shared by Q4_K and Q5_K (12 bytes for 8 + 8). */
static void get_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xf) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}
static void put_scale_min(uint8_t *s, const uint8_t sc[8], const uint8_t m[8]) {
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        s[j + 4] = (uint8_t)((m[j] & 63) | ((m[j + 4] >> 4) << 6));
        s[j + 8] = (uint8_t)((sc[j + 4] & 0xf) | ((m[j + 4] & 0xf) << 4));
    }
}
/* Q3_K: 16 6-bit values (scale + 32) in 12 bytes. */
static int q3k_scale(const uint8_t *s, int i) {
    int lo = i < 8 ? (s[i] & 0xf) : (s[i - 8] >> 4);
    int hi = (s[8 + (i & 3)] >> (2 * (i >> 2))) & 3;
    return (lo | (hi << 4)) - 32;
}
static void q3k_put_scales(uint8_t *s, const int sc[16]) {
    memset(s, 0, 12);
    for (int i = 0; i < 16; i++) {
        int v = sc[i] + 32;
        if (i < 8) s[i] |= (uint8_t)(v & 0xf);
        else s[i - 8] |= (uint8_t)((v & 0xf) << 4);
        s[8 + (i & 3)] |= (uint8_t)(((v >> 4) & 3) << (2 * (i >> 2)));
    }
}

/* Element e of a Q2_K/Q3_K block: 2 bits at qs[(e/128)*32 + e%32] >> 2*((e/32)%4). */
static inline int q2bits(const uint8_t *qs, int e) {
    return (qs[(e >> 7) * 32 + (e & 31)] >> (2 * ((e >> 5) & 3))) & 3;
}
static inline int q6val(const llmk_block_q6_k *b, int e) {
    int j = e >> 7, r = e & 127;
    int lo = (b->ql[j * 64 + (r & 63)] >> (4 * (r >> 6))) & 0xf;
    int hi = (b->qh[j * 32 + (r & 31)] >> (2 * (r >> 5))) & 3;
    return (lo | (hi << 4)) - 32;
}
static inline int q4k_nib(const uint8_t *qs, int e) {
    int sb = e >> 5;
    return (qs[(sb >> 1) * 32 + (e & 31)] >> (4 * (sb & 1))) & 0xf;
}
static inline int iq4xs_ls(const llmk_block_iq4_xs *b, int ib) {
    int lo = (b->scales_l[ib >> 1] >> (4 * (ib & 1))) & 0xf;
    int hi = (b->scales_h >> (2 * ib)) & 3;
    return (lo | (hi << 4)) - 32;
}
static inline int iq4xs_nib(const uint8_t *qs, int e) {
    int ib = e >> 5, r = e & 31;
    return (qs[ib * 16 + (r & 15)] >> (4 * (r >> 4))) & 0xf;
}

#define LOAD(T, src, b) \
    T blk;              \
    memcpy(&blk, (const char *)(src) + (b) * sizeof(T), sizeof(T))

/* ---- dequantize ---------------------------------------------------------- */

static void dequant_q2_k(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK_K; b++) {
        LOAD(llmk_block_q2_k, src, b);
        float d = llmk_fp16_to_fp32(blk.d), dmin = llmk_fp16_to_fp32(blk.dmin);
        float *y = dst + b * LLMK_QK_K;
        for (int e = 0; e < LLMK_QK_K; e++) {
            int s = blk.scales[e >> 4];
            float dl = d * (float)(s & 0xf), ml = dmin * (float)(s >> 4);
            y[e] = dl * (float)q2bits(blk.qs, e) - ml;
        }
    }
}

static void dequant_q3_k(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK_K; b++) {
        LOAD(llmk_block_q3_k, src, b);
        float d = llmk_fp16_to_fp32(blk.d);
        float *y = dst + b * LLMK_QK_K;
        for (int e = 0; e < LLMK_QK_K; e++) {
            float dl = d * (float)q3k_scale(blk.scales, e >> 4);
            int h = (blk.hmask[e & 31] >> (e >> 5)) & 1;
            y[e] = dl * (float)(q2bits(blk.qs, e) - (h ? 0 : 4));
        }
    }
}

static void dequant_q4_k(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK_K; b++) {
        LOAD(llmk_block_q4_k, src, b);
        float d = llmk_fp16_to_fp32(blk.d), dmin = llmk_fp16_to_fp32(blk.dmin);
        float *y = dst + b * LLMK_QK_K;
        for (int sb = 0; sb < 8; sb++) {
            int sc, m;
            get_scale_min(blk.scales, sb, &sc, &m);
            float dl = d * (float)sc, ml = dmin * (float)m;
            for (int l = 0; l < 32; l++) {
                int e = sb * 32 + l;
                y[e] = dl * (float)q4k_nib(blk.qs, e) - ml;
            }
        }
    }
}

static void dequant_q5_k(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK_K; b++) {
        LOAD(llmk_block_q5_k, src, b);
        float d = llmk_fp16_to_fp32(blk.d), dmin = llmk_fp16_to_fp32(blk.dmin);
        float *y = dst + b * LLMK_QK_K;
        for (int sb = 0; sb < 8; sb++) {
            int sc, m;
            get_scale_min(blk.scales, sb, &sc, &m);
            float dl = d * (float)sc, ml = dmin * (float)m;
            for (int l = 0; l < 32; l++) {
                int e = sb * 32 + l;
                int q = q4k_nib(blk.qs, e) | (((blk.qh[l] >> sb) & 1) << 4);
                y[e] = dl * (float)q - ml;
            }
        }
    }
}

static void dequant_q6_k(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK_K; b++) {
        LOAD(llmk_block_q6_k, src, b);
        float d = llmk_fp16_to_fp32(blk.d);
        float *y = dst + b * LLMK_QK_K;
        for (int e = 0; e < LLMK_QK_K; e++) {
            float dl = d * (float)blk.scales[e >> 4];
            y[e] = dl * (float)q6val(&blk, e);
        }
    }
}

static void dequant_q8_k(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK_K; b++) {
        LOAD(llmk_block_q8_k, src, b);
        for (int e = 0; e < LLMK_QK_K; e++) dst[b * LLMK_QK_K + e] = blk.d * (float)blk.qs[e];
    }
}

static void dequant_iq4_xs(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK_K; b++) {
        LOAD(llmk_block_iq4_xs, src, b);
        float d = llmk_fp16_to_fp32(blk.d);
        float *y = dst + b * LLMK_QK_K;
        for (int ib = 0; ib < 8; ib++) {
            float dl = d * (float)iq4xs_ls(&blk, ib);
            for (int l = 0; l < 32; l++)
                y[ib * 32 + l] = dl * (float)llmk_iq4nl_values[iq4xs_nib(blk.qs, ib * 32 + l)];
        }
    }
}

/* ---- scale searches -------------------------------------------------------- */

/* Symmetric fit x ~ s*q, q integer in [qmin, qmax] (qmin = -qmax-1): the
 * largest-magnitude element is mapped onto a sweep of targets near qmin (and
 * near qmax, for the opposite sign), each candidate's q is refit by least
 * squares, the lowest squared error wins. Returns s (0 for an all-zero x). */
static float fit_sym(const float *x, int n, int qmin, int qmax) {
    float amax = 0, xm = 0;
    for (int j = 0; j < n; j++)
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]), xm = x[j];
    if (amax == 0 || !isfinite(amax)) return 0;
    double best_err = INFINITY;
    float best_s = xm / (float)qmin;
    for (int t = -9; t <= 9; t++) {
        for (int side = 0; side < 2; side++) {
            float target = (side ? (float)qmax : (float)qmin) + 0.1f * (float)t;
            if (target == 0) continue;
            float id = target / xm;
            double sxq = 0, sqq = 0;
            for (int j = 0; j < n; j++) {
                int q = rnd(x[j] * id, qmin, qmax);
                sxq += (double)x[j] * q;
                sqq += (double)q * q;
            }
            if (sqq == 0) continue;
            double s = sxq / sqq;
            double err = 0;
            for (int j = 0; j < n; j++) {
                double r = x[j] - s * rnd(x[j] * id, qmin, qmax);
                err += r * r;
            }
            if (err < best_err) best_err = err, best_s = (float)s;
        }
    }
    return best_s;
}

/* Affine fit x ~ s*q - m with q in [0, qmax], s >= 0, m >= 0 (the K-quants
 * subtract a non-negative min): sweep the step (max-min)/(qmax + t/10), refit
 * (s, m) by least squares for each assignment, keep the lowest error. */
static void fit_affine(const float *x, int n, int qmax, float *s_out, float *m_out) {
    float mn = x[0], mx = x[0];
    for (int j = 1; j < n; j++) {
        if (x[j] < mn) mn = x[j];
        if (x[j] > mx) mx = x[j];
    }
    if (mn > 0) mn = 0;
    if (!(mx > mn) || !isfinite(mx - mn)) {
        *s_out = 0;
        *m_out = isfinite(mn) ? -mn : 0;
        return;
    }
    double best_err = INFINITY;
    float best_s = (mx - mn) / (float)qmax, best_m = -mn;
    for (int t = -5; t <= 15; t++) {
        float step = (mx - mn) / ((float)qmax + 0.1f * (float)t);
        float id = 1.0f / step;
        double sq = 0, sqq = 0, sx = 0, sxq = 0;
        for (int j = 0; j < n; j++) {
            int q = rnd((x[j] - mn) * id, 0, qmax);
            sq += q, sqq += (double)q * q, sx += x[j], sxq += (double)x[j] * q;
        }
        double det = n * sqq - sq * sq, s, off; /* x ~ s*q + off */
        if (det > 0) {
            s = (n * sxq - sq * sx) / det;
            off = (sx - s * sq) / n;
        } else {
            s = step, off = mn;
        }
        if (off > 0) { /* min must be <= 0: refit the scale alone */
            off = 0;
            s = sqq > 0 ? sxq / sqq : 0;
        }
        if (s < 0) continue;
        double err = 0;
        for (int j = 0; j < n; j++) {
            double r = x[j] - (s * rnd((x[j] - mn) * id, 0, qmax) + off);
            err += r * r;
        }
        if (err < best_err) best_err = err, best_s = (float)s, best_m = (float)-off;
    }
    *s_out = best_s;
    *m_out = best_m;
}

/* Quantize sub-block scales (all >= 0) against one f16 super-scale with
 * nmax levels; returns the stored super-scale bits. */
static uint16_t quant_scales_pos(const float *s, int n, int nmax, uint8_t *out) {
    float mx = 0;
    for (int i = 0; i < n; i++) mx = fmaxf(mx, s[i]);
    uint16_t dh = llmk_fp32_to_fp16(mx / (float)nmax);
    float d = llmk_fp16_to_fp32(dh);
    for (int i = 0; i < n; i++) out[i] = (uint8_t)(d > 0 ? rnd(s[i] / d, 0, nmax) : 0);
    return dh;
}

/* Signed sub-block scales in [smin, smax] against one f16 super-scale,
 * mapping the largest-magnitude scale to smin. */
static uint16_t quant_scales_sym(const float *s, int n, int smin, int smax, int *out) {
    float amax = 0, sm = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(s[i]) > amax) amax = fabsf(s[i]), sm = s[i];
    uint16_t dh = llmk_fp32_to_fp16(amax > 0 ? sm / (float)smin : 0.0f);
    float d = llmk_fp16_to_fp32(dh);
    for (int i = 0; i < n; i++) out[i] = d != 0 ? rnd(s[i] / d, smin, smax) : 0;
    return dh;
}

/* q = round((x + ml) / dl) clamped, the re-rounding against stored scales. */
static inline int requant(float x, float dl, float ml, int lo, int hi) {
    return dl != 0 ? rnd((x + ml) / dl, lo, hi) : lo < 0 ? 0 : lo;
}

/* ---- quantize ----------------------------------------------------------------- */

static void quant_q2_k(const float *src, void *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK_K; b++) {
        const float *x = src + b * LLMK_QK_K;
        float s[16], m[16];
        for (int i = 0; i < 16; i++) fit_affine(x + 16 * i, 16, 3, &s[i], &m[i]);
        llmk_block_q2_k blk;
        uint8_t sc[16], mq[16];
        blk.d = quant_scales_pos(s, 16, 15, sc);
        blk.dmin = quant_scales_pos(m, 16, 15, mq);
        float d = llmk_fp16_to_fp32(blk.d), dmin = llmk_fp16_to_fp32(blk.dmin);
        memset(blk.qs, 0, sizeof blk.qs);
        for (int i = 0; i < 16; i++) blk.scales[i] = (uint8_t)(sc[i] | (mq[i] << 4));
        for (int e = 0; e < LLMK_QK_K; e++) {
            int i = e >> 4;
            int q = requant(x[e], d * (float)sc[i], dmin * (float)mq[i], 0, 3);
            blk.qs[(e >> 7) * 32 + (e & 31)] |= (uint8_t)(q << (2 * ((e >> 5) & 3)));
        }
        memcpy((char *)dst + b * sizeof blk, &blk, sizeof blk);
    }
}

static void quant_q3_k(const float *src, void *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK_K; b++) {
        const float *x = src + b * LLMK_QK_K;
        float s[16];
        for (int i = 0; i < 16; i++) s[i] = fit_sym(x + 16 * i, 16, -4, 3);
        llmk_block_q3_k blk;
        int sc[16];
        blk.d = quant_scales_sym(s, 16, -32, 31, sc);
        q3k_put_scales(blk.scales, sc);
        float d = llmk_fp16_to_fp32(blk.d);
        memset(blk.qs, 0, sizeof blk.qs);
        memset(blk.hmask, 0, sizeof blk.hmask);
        for (int e = 0; e < LLMK_QK_K; e++) {
            int q = requant(x[e], d * (float)sc[e >> 4], 0, -4, 3) + 4; /* 0..7 */
            blk.qs[(e >> 7) * 32 + (e & 31)] |= (uint8_t)((q & 3) << (2 * ((e >> 5) & 3)));
            if (q & 4) blk.hmask[e & 31] |= (uint8_t)(1u << (e >> 5));
        }
        memcpy((char *)dst + b * sizeof blk, &blk, sizeof blk);
    }
}

static void quant_q45_k(const float *x, int qmax, uint16_t *dh, uint16_t *dminh, uint8_t *scales,
                        uint8_t q[LLMK_QK_K]) {
    float s[8], m[8];
    for (int i = 0; i < 8; i++) fit_affine(x + 32 * i, 32, qmax, &s[i], &m[i]);
    uint8_t sc[8], mq[8];
    *dh = quant_scales_pos(s, 8, 63, sc);
    *dminh = quant_scales_pos(m, 8, 63, mq);
    put_scale_min(scales, sc, mq);
    float d = llmk_fp16_to_fp32(*dh), dmin = llmk_fp16_to_fp32(*dminh);
    for (int e = 0; e < LLMK_QK_K; e++) {
        int i = e >> 5;
        q[e] = (uint8_t)requant(x[e], d * (float)sc[i], dmin * (float)mq[i], 0, qmax);
    }
}

static void quant_q4_k(const float *src, void *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK_K; b++) {
        llmk_block_q4_k blk;
        uint8_t q[LLMK_QK_K];
        quant_q45_k(src + b * LLMK_QK_K, 15, &blk.d, &blk.dmin, blk.scales, q);
        memset(blk.qs, 0, sizeof blk.qs);
        for (int e = 0; e < LLMK_QK_K; e++) {
            int sb = e >> 5;
            blk.qs[(sb >> 1) * 32 + (e & 31)] |= (uint8_t)(q[e] << (4 * (sb & 1)));
        }
        memcpy((char *)dst + b * sizeof blk, &blk, sizeof blk);
    }
}

static void quant_q5_k(const float *src, void *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK_K; b++) {
        llmk_block_q5_k blk;
        uint8_t q[LLMK_QK_K];
        quant_q45_k(src + b * LLMK_QK_K, 31, &blk.d, &blk.dmin, blk.scales, q);
        memset(blk.qs, 0, sizeof blk.qs);
        memset(blk.qh, 0, sizeof blk.qh);
        for (int e = 0; e < LLMK_QK_K; e++) {
            int sb = e >> 5;
            blk.qs[(sb >> 1) * 32 + (e & 31)] |= (uint8_t)((q[e] & 0xf) << (4 * (sb & 1)));
            if (q[e] & 16) blk.qh[e & 31] |= (uint8_t)(1u << sb);
        }
        memcpy((char *)dst + b * sizeof blk, &blk, sizeof blk);
    }
}

static void quant_q6_k(const float *src, void *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK_K; b++) {
        const float *x = src + b * LLMK_QK_K;
        float s[16];
        for (int i = 0; i < 16; i++) s[i] = fit_sym(x + 16 * i, 16, -32, 31);
        llmk_block_q6_k blk;
        int sc[16];
        blk.d = quant_scales_sym(s, 16, -128, 127, sc);
        for (int i = 0; i < 16; i++) blk.scales[i] = (int8_t)sc[i];
        float d = llmk_fp16_to_fp32(blk.d);
        memset(blk.ql, 0, sizeof blk.ql);
        memset(blk.qh, 0, sizeof blk.qh);
        for (int e = 0; e < LLMK_QK_K; e++) {
            int q = requant(x[e], d * (float)sc[e >> 4], 0, -32, 31) + 32; /* 0..63 */
            int j = e >> 7, r = e & 127;
            blk.ql[j * 64 + (r & 63)] |= (uint8_t)((q & 0xf) << (4 * (r >> 6)));
            blk.qh[j * 32 + (r & 31)] |= (uint8_t)((q >> 4) << (2 * (r >> 5)));
        }
        memcpy((char *)dst + b * sizeof blk, &blk, sizeof blk);
    }
}

/* Q8_K is the K-quants' activation form: d = max|x| / 127 in f32 (not
 * rounded to f16), q = round(x / d), bsums = sums of 16 consecutive q. */
static void quant_q8_k(const float *src, void *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK_K; b++) {
        const float *x = src + b * LLMK_QK_K;
        float amax = 0;
        for (int e = 0; e < LLMK_QK_K; e++) amax = fmaxf(amax, fabsf(x[e]));
        llmk_block_q8_k blk;
        blk.d = amax / 127.0f;
        float id = blk.d == 0 ? 0.0f : 1.0f / blk.d;
        for (int e = 0; e < LLMK_QK_K; e++) blk.qs[e] = (int8_t)rnd(x[e] * id, -127, 127);
        for (int i = 0; i < 16; i++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += blk.qs[16 * i + l];
            blk.bsums[i] = (int16_t)s;
        }
        memcpy((char *)dst + b * sizeof blk, &blk, sizeof blk);
    }
}

static void quant_iq4_xs(const float *src, void *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK_K; b++) {
        const float *x = src + b * LLMK_QK_K;
        float s[8];
        uint8_t idx[32];
        for (int ib = 0; ib < 8; ib++) s[ib] = llmk_codec_nl_fit(x + 32 * ib, 32, llmk_iq4nl_values, idx);
        llmk_block_iq4_xs blk;
        int ls[8];
        blk.d = quant_scales_sym(s, 8, -32, 31, ls);
        float d = llmk_fp16_to_fp32(blk.d);
        blk.scales_h = 0;
        memset(blk.scales_l, 0, sizeof blk.scales_l);
        memset(blk.qs, 0, sizeof blk.qs);
        for (int ib = 0; ib < 8; ib++) {
            int v = ls[ib] + 32;
            blk.scales_l[ib >> 1] |= (uint8_t)((v & 0xf) << (4 * (ib & 1)));
            blk.scales_h |= (uint16_t)(((v >> 4) & 3) << (2 * ib));
            float dl = d * (float)ls[ib];
            for (int l = 0; l < 32; l++) {
                int q = 8; /* grid index of the value nearest 0 when dl = 0 */
                if (dl != 0) {
                    float v2 = x[ib * 32 + l] / dl, be = INFINITY;
                    for (int g = 0; g < 16; g++) {
                        float e = fabsf(v2 - llmk_iq4nl_values[g]);
                        if (e < be) be = e, q = g;
                    }
                }
                blk.qs[ib * 16 + (l & 15)] |= (uint8_t)(q << (4 * (l >> 4)));
            }
        }
        memcpy((char *)dst + b * sizeof blk, &blk, sizeof blk);
    }
}

/* ---- dot products against Q8_K activations ---------------------------------- */
/* Integer sums per sub-block, combined with the integer sub-block scales in
 * int32, then one f32 scale per super-block, accumulated in block order. */

static void dot_q2_k(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    const llmk_block_q8_k *ab = a;
    for (int64_t r = 0; r < nrows; r++) {
        const char *row = (const char *)w + (size_t)r * ws;
        float sum = 0;
        for (int64_t b = 0; b < k / LLMK_QK_K; b++) {
            LOAD(llmk_block_q2_k, row, b);
            const llmk_block_q8_k *xb = &ab[b];
            int isum = 0, msum = 0;
            for (int i = 0; i < 16; i++) {
                int s = 0;
                for (int l = 0; l < 16; l++) s += q2bits(blk.qs, 16 * i + l) * xb->qs[16 * i + l];
                isum += (blk.scales[i] & 0xf) * s;
                msum += (blk.scales[i] >> 4) * xb->bsums[i];
            }
            sum += xb->d * llmk_fp16_to_fp32(blk.d) * (float)isum -
                   xb->d * llmk_fp16_to_fp32(blk.dmin) * (float)msum;
        }
        y[r] = sum;
    }
}

static void dot_q3_k(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    const llmk_block_q8_k *ab = a;
    for (int64_t r = 0; r < nrows; r++) {
        const char *row = (const char *)w + (size_t)r * ws;
        float sum = 0;
        for (int64_t b = 0; b < k / LLMK_QK_K; b++) {
            LOAD(llmk_block_q3_k, row, b);
            const llmk_block_q8_k *xb = &ab[b];
            int isum = 0;
            for (int i = 0; i < 16; i++) {
                int s = 0;
                for (int l = 0; l < 16; l++) {
                    int e = 16 * i + l;
                    int q = q2bits(blk.qs, e) - (((blk.hmask[e & 31] >> (e >> 5)) & 1) ? 0 : 4);
                    s += q * xb->qs[e];
                }
                isum += q3k_scale(blk.scales, i) * s;
            }
            sum += xb->d * llmk_fp16_to_fp32(blk.d) * (float)isum;
        }
        y[r] = sum;
    }
}

static void dot_q4_k(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    const llmk_block_q8_k *ab = a;
    for (int64_t r = 0; r < nrows; r++) {
        const char *row = (const char *)w + (size_t)r * ws;
        float sum = 0;
        for (int64_t b = 0; b < k / LLMK_QK_K; b++) {
            LOAD(llmk_block_q4_k, row, b);
            const llmk_block_q8_k *xb = &ab[b];
            int isum = 0, msum = 0;
            for (int sb = 0; sb < 8; sb++) {
                int sc, m, s = 0;
                get_scale_min(blk.scales, sb, &sc, &m);
                for (int l = 0; l < 32; l++) s += q4k_nib(blk.qs, sb * 32 + l) * xb->qs[sb * 32 + l];
                isum += sc * s;
                msum += m * (xb->bsums[2 * sb] + xb->bsums[2 * sb + 1]);
            }
            sum += xb->d * llmk_fp16_to_fp32(blk.d) * (float)isum -
                   xb->d * llmk_fp16_to_fp32(blk.dmin) * (float)msum;
        }
        y[r] = sum;
    }
}

static void dot_q5_k(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    const llmk_block_q8_k *ab = a;
    for (int64_t r = 0; r < nrows; r++) {
        const char *row = (const char *)w + (size_t)r * ws;
        float sum = 0;
        for (int64_t b = 0; b < k / LLMK_QK_K; b++) {
            LOAD(llmk_block_q5_k, row, b);
            const llmk_block_q8_k *xb = &ab[b];
            int isum = 0, msum = 0;
            for (int sb = 0; sb < 8; sb++) {
                int sc, m, s = 0;
                get_scale_min(blk.scales, sb, &sc, &m);
                for (int l = 0; l < 32; l++) {
                    int q = q4k_nib(blk.qs, sb * 32 + l) | (((blk.qh[l] >> sb) & 1) << 4);
                    s += q * xb->qs[sb * 32 + l];
                }
                isum += sc * s;
                msum += m * (xb->bsums[2 * sb] + xb->bsums[2 * sb + 1]);
            }
            sum += xb->d * llmk_fp16_to_fp32(blk.d) * (float)isum -
                   xb->d * llmk_fp16_to_fp32(blk.dmin) * (float)msum;
        }
        y[r] = sum;
    }
}

static void dot_q6_k(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    const llmk_block_q8_k *ab = a;
    for (int64_t r = 0; r < nrows; r++) {
        const char *row = (const char *)w + (size_t)r * ws;
        float sum = 0;
        for (int64_t b = 0; b < k / LLMK_QK_K; b++) {
            LOAD(llmk_block_q6_k, row, b);
            const llmk_block_q8_k *xb = &ab[b];
            int isum = 0;
            for (int i = 0; i < 16; i++) {
                int s = 0;
                for (int l = 0; l < 16; l++) s += q6val(&blk, 16 * i + l) * xb->qs[16 * i + l];
                isum += blk.scales[i] * s;
            }
            sum += xb->d * llmk_fp16_to_fp32(blk.d) * (float)isum;
        }
        y[r] = sum;
    }
}

static void dot_q8_k(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    const llmk_block_q8_k *ab = a;
    for (int64_t r = 0; r < nrows; r++) {
        const char *row = (const char *)w + (size_t)r * ws;
        float sum = 0;
        for (int64_t b = 0; b < k / LLMK_QK_K; b++) {
            LOAD(llmk_block_q8_k, row, b);
            int isum = 0;
            for (int e = 0; e < LLMK_QK_K; e++) isum += blk.qs[e] * ab[b].qs[e];
            sum += blk.d * ab[b].d * (float)isum;
        }
        y[r] = sum;
    }
}

static void dot_iq4_xs(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    const llmk_block_q8_k *ab = a;
    for (int64_t r = 0; r < nrows; r++) {
        const char *row = (const char *)w + (size_t)r * ws;
        float sum = 0;
        for (int64_t b = 0; b < k / LLMK_QK_K; b++) {
            LOAD(llmk_block_iq4_xs, row, b);
            const llmk_block_q8_k *xb = &ab[b];
            int isum = 0;
            for (int ib = 0; ib < 8; ib++) {
                int s = 0;
                for (int l = 0; l < 32; l++)
                    s += llmk_iq4nl_values[iq4xs_nib(blk.qs, ib * 32 + l)] * xb->qs[ib * 32 + l];
                isum += iq4xs_ls(&blk, ib) * s;
            }
            sum += xb->d * llmk_fp16_to_fp32(blk.d) * (float)isum;
        }
        y[r] = sum;
    }
}

const struct llmk_codec llmk_codecs_k[] = {
    {LLMK_TYPE_Q2_K, LLMK_TYPE_Q8_K, dequant_q2_k, quant_q2_k, dot_q2_k},
    {LLMK_TYPE_Q3_K, LLMK_TYPE_Q8_K, dequant_q3_k, quant_q3_k, dot_q3_k},
    {LLMK_TYPE_Q4_K, LLMK_TYPE_Q8_K, dequant_q4_k, quant_q4_k, dot_q4_k},
    {LLMK_TYPE_Q5_K, LLMK_TYPE_Q8_K, dequant_q5_k, quant_q5_k, dot_q5_k},
    {LLMK_TYPE_Q6_K, LLMK_TYPE_Q8_K, dequant_q6_k, quant_q6_k, dot_q6_k},
    {LLMK_TYPE_Q8_K, LLMK_TYPE_Q8_K, dequant_q8_k, quant_q8_k, dot_q8_k},
    {LLMK_TYPE_IQ4_XS, LLMK_TYPE_Q8_K, dequant_iq4_xs, quant_iq4_xs, dot_iq4_xs},
};
const size_t llmk_codecs_k_n = LLMK_ARRAY_LEN(llmk_codecs_k);
