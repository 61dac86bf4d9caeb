/* Scalar reference codecs for the 256-element super-block codecs: Q2_K, Q3_K,
 * Q4_K, Q5_K, Q6_K, Q8_K and IQ4_XS.
 *
 * Dequantization is the format's arithmetic in f32 in gguf-py's order
 * ((d * scale) * q - (dmin * min)), bit-identical to gguf-py. gguf-py has no
 * quantizer for these, so quantize_ref is llmk's own (see "scale searches"):
 * a continuous least-squares fit per sub-block, then a search over f16
 * super-scales and integer sub-scales scored by the exact error of what
 * dequantization will reconstruct. tests/py/test_quant_rmse.py checks that its
 * RMSE is no worse than ggml's reference quantizers' on fixed datasets. */
#include "codec/blocks.h"
#include "codec/codec.h"
#include "codec/half.h"
#include "internal.h"

#include <float.h>
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
/* A K-quant block is chosen in two stages.
 * 1. Per sub-block a continuous fit: a sweep of candidate steps; each
 *    assignment is refit by least squares and re-assigned (Lloyd rounds) while
 *    that lowers the squared error; the lowest error is kept.
 * 2. The stored form: candidate f16 super-scales (the largest continuous
 *    sub-scale mapped onto each of the top few integer levels) and, for each,
 *    per sub-block a small neighbourhood of integer sub-scales (and mins)
 *    around the continuous fit, every candidate scored by the exact error of
 *    the values dequantization will produce (the same f32 arithmetic); the
 *    lowest total wins. Candidates are tried in a fixed order and ties keep the
 *    first, so the result depends only on the input. */

#define SUPER_TRIES 4 /* integer levels tried for the largest sub-scale */
#define MIN_TRIES 3   /* ... and for the largest min */
#define ULP_TRIES 1    /* f16 neighbours tried either side of the chosen super-scales */

/* f16 bits of a super-scale, kept finite (inf would poison every value) */
static uint16_t f16_scale(float v) {
    if (!(v == v)) return 0;
    uint16_t h = llmk_fp32_to_fp16(v);
    if ((h & 0x7c00u) == 0x7c00u) h = (uint16_t)((h & 0x8000u) | 0x7bffu);
    return h;
}

/* Nearest integer in [lo, hi] (halves round up, NaN -> lo): rnd without
 * branches or a libm call, for the searches' inner loops. */
static inline int rndq(float v, int lo, int hi) {
    v = v > (float)lo ? v : (float)lo;
    v = v < (float)hi ? v : (float)hi;
    return (int)(v - (float)lo + 0.5f) + lo;
}

/* q = round(x / dl) clamped; the one assignment rule for scoring and storing */
static inline int qsym(float x, float idl, int qmin, int qmax) { return rndq(x * idl, qmin, qmax); }
static inline int qaff(float x, float idl, float ml, int qmax) { return rndq((x + ml) * idl, 0, qmax); }

/* Squared error of x against dl*q, q assigned by qsym (q = 0 when dl = 0). */
static double err_sym(const float *x, int n, float dl, int qmin, int qmax) {
    double e = 0;
    if (dl == 0) {
        for (int j = 0; j < n; j++) e += (double)x[j] * x[j];
        return e;
    }
    float idl = 1.0f / dl;
    for (int j = 0; j < n; j++) {
        double r = (double)x[j] - (double)(dl * (float)qsym(x[j], idl, qmin, qmax));
        e += r * r;
    }
    return e;
}

/* Squared error of x against dl*q - ml (dequantization's order), q by qaff. */
static double err_affine(const float *x, int n, float dl, float ml, int qmax) {
    double e = 0;
    float idl = dl != 0 ? 1.0f / dl : 0.0f;
    for (int j = 0; j < n; j++) {
        int q = dl != 0 ? qaff(x[j], idl, ml, qmax) : 0;
        double r = (double)x[j] - (double)(dl * (float)q - ml);
        e += r * r;
    }
    return e;
}

/* Least-squares s for the assignment q = round(x / s0); 0 when none. */
static float sym_refit(const float *x, int n, float s0, int qmin, int qmax) {
    float is = 1.0f / s0;
    double sxq = 0, sqq = 0;
    for (int j = 0; j < n; j++) {
        int q = qsym(x[j], is, qmin, qmax);
        sxq += (double)x[j] * q;
        sqq += (double)q * q;
    }
    float s = sqq > 0 ? (float)(sxq / sqq) : 0.0f;
    return isfinite(s) ? s : 0.0f;
}

/* Continuous symmetric fit x ~ s*q, q in [qmin, qmax]. out[0]: the best s
 * mapping the largest-magnitude element towards qmin, out[1]: towards qmax
 * (the two signs of s; they differ when the range is asymmetric); err_out:
 * their squared errors. A sweep of targets, each refit once, then Lloyd
 * rounds from the best. */
static void fit_sym(const float *x, int n, int qmin, int qmax, float out[2], double err_out[2]) {
    float amax = 0, xm = 0;
    for (int j = 0; j < n; j++)
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]), xm = x[j];
    out[0] = out[1] = 0;
    err_out[0] = err_out[1] = err_sym(x, n, 0, qmin, qmax);
    if (amax == 0 || !isfinite(amax)) return;
    for (int side = 0; side < 2; side++) {
        double best_err = INFINITY;
        float best_s = xm / (float)(side ? qmax : qmin);
        for (int t = -10; t <= 10; t++) {
            float target = (side ? (float)qmax : (float)qmin) + 0.1f * (float)t;
            if (target == 0 || (target > 0) != (side == 1)) continue;
            float s2 = sym_refit(x, n, xm / target, qmin, qmax);
            if (s2 == 0) continue;
            double err = err_sym(x, n, s2, qmin, qmax);
            if (err < best_err) best_err = err, best_s = s2;
        }
        for (int round = 0; round < 4 && best_err < INFINITY; round++) {
            float s2 = sym_refit(x, n, best_s, qmin, qmax);
            if (s2 == 0 || s2 == best_s) break;
            double err = err_sym(x, n, s2, qmin, qmax);
            if (!(err < best_err)) break;
            best_err = err, best_s = s2;
        }
        out[side] = best_s;
        err_out[side] = best_err;
    }
}

/* Least squares x ~ s*q + off over fixed q with off <= 0 (the K-quants
 * subtract a non-negative min); returns 0 when no s >= 0 fits. */
static int affine_refit(const float *x, const uint8_t *q, int n, double *s, double *off) {
    double sq = 0, sqq = 0, sx = 0, sxq = 0;
    for (int j = 0; j < n; j++) sq += q[j], sqq += (double)q[j] * q[j], sx += x[j], sxq += (double)x[j] * q[j];
    double det = n * sqq - sq * sq;
    if (det > 0) {
        *s = (n * sxq - sq * sx) / det;
        *off = (sx - *s * sq) / n;
    } else {
        *off = 0;
        *s = sqq > 0 ? sxq / sqq : 0;
    }
    if (*off > 0) { /* min must be <= 0: refit the scale alone */
        *off = 0;
        *s = sqq > 0 ? sxq / sqq : 0;
    }
    return *s >= 0 && isfinite(*s) && isfinite(*off);
}

/* Continuous affine fit x ~ s*q - m, q in [0, qmax], s >= 0, m >= 0: sweep
 * the step (max-min)/(qmax + t/10) from the minimum, then Lloyd rounds. */
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
    uint8_t q[32];
    for (int t = -10; t <= 15; t++) {
        float s = (mx - mn) / ((float)qmax + 0.1f * (float)t), m = -mn;
        for (int round = 0; round < 5; round++) {
            float is = 1.0f / s;
            int changed = 0;
            for (int j = 0; j < n; j++) {
                uint8_t v = (uint8_t)qaff(x[j], is, m, qmax);
                changed |= round == 0 || v != q[j];
                q[j] = v;
            }
            if (!changed) break;
            double sd, off;
            if (!affine_refit(x, q, n, &sd, &off) || sd == 0) break;
            float s2 = (float)sd, m2 = (float)-off;
            double err = err_affine(x, n, s2, m2, qmax);
            if (round > 0 && !(err < best_err)) break;
            /* ties (exact fits) go to the finer step: more levels in use
             * leave the super-scale search more room */
            if (err <= best_err) best_err = err, best_s = s2, best_m = m2;
            else break; /* Lloyd rounds only from the best sweep candidate so far */
            s = s2, m = m2;
        }
    }
    *s_out = best_s;
    *m_out = best_m;
}

/* Integers near a / d: round - 1 .. round + 1, clamped to [lo, hi]. */
static int near_levels(float a, float d, int lo, int hi, int out[3]) {
    float r = d != 0 ? a / d : 0.0f;
    int f = rnd(r, lo - 2, hi + 2), k = 0;
    for (int c = f - 1; c <= f + 1; c++)
        if (c >= lo && c <= hi) out[k++] = c;
    if (k == 0) out[k++] = r < (float)lo ? lo : hi;
    return k;
}

/* Stage 2, symmetric codecs (Q3_K, Q6_K): nsub sub-blocks of len values,
 * sub-scales in [smin, smax] against the f16 super-scale (returned). */
static uint16_t encode_sym(const float *x, int nsub, int len, int qmin, int qmax, int smin, int smax,
                           int *sc_out) {
    float a[16][2];
    double ae[16][2];
    /* super-scale anchors: the largest sub-scale of either sign, and the two
     * largest of the sub-blocks' better-signed fits */
    float anchor[3] = {0, 0, 0};
    for (int i = 0; i < nsub; i++) {
        fit_sym(x + len * i, len, qmin, qmax, a[i], ae[i]);
        for (int k = 0; k < 2; k++)
            if (fabsf(a[i][k]) > fabsf(anchor[0])) anchor[0] = a[i][k];
        float b = a[i][ae[i][1] < ae[i][0]];
        if (fabsf(b) > fabsf(anchor[1])) anchor[2] = anchor[1], anchor[1] = b;
        else if (fabsf(b) > fabsf(anchor[2])) anchor[2] = b;
    }
    /* the fallback: everything zero */
    uint16_t best_dh = 0;
    double best = 0;
    for (int i = 0; i < nsub; i++) sc_out[i] = 0, best += err_sym(x + len * i, len, 0, qmin, qmax);
    for (int ai = 0; ai < 3; ai++) {
        float sm = anchor[ai];
        if (sm == 0 || !isfinite(sm) || (ai > 0 && sm == anchor[ai - 1])) continue;
        for (int side = 0; side < 2; side++) {
            for (int k = 0; k < (ai == 0 ? SUPER_TRIES : 3); k++) {
                int level = side ? smax - k : smin + k;
                uint16_t dh = f16_scale(sm / (float)level);
                float d = llmk_fp16_to_fp32(dh);
                if (d == 0) continue;
                double tot = 0;
                int sc[16];
                for (int i = 0; i < nsub && tot < best; i++) {
                    double be = INFINITY;
                    for (int side2 = 0; side2 < 2; side2++) {
                        int c[4], nc = near_levels(a[i][side2], d, smin, smax, c);
                        for (int u = 0; u < nc; u++) {
                            double e = err_sym(x + len * i, len, d * (float)c[u], qmin, qmax);
                            if (e < be) be = e, sc[i] = c[u];
                        }
                    }
                    tot += be;
                }
                if (tot < best) {
                    best = tot, best_dh = dh;
                    memcpy(sc_out, sc, (size_t)nsub * sizeof *sc);
                }
            }
        }
    }
    return best_dh;
}

/* Best (scale, min) integers of one affine sub-block for super-scales d,
 * dmin: sub-scales near s / d; for each, the min nearest m / dmin and the two
 * around the least-squares min of the values' assignment under that
 * sub-scale. */
static double affine_sub_best(const float *x, int len, int qmax, int lmax, float s, float m, float d,
                              float dmin, uint8_t *sc, uint8_t *mq) {
    int cs[3], cm[5], ns = 1, nm0 = 1;
    cs[0] = cm[0] = 0;
    if (d != 0) ns = near_levels(s, d, 0, lmax, cs);
    if (dmin != 0) cm[0] = rndq(m / dmin, 0, lmax);
    double be = INFINITY;
    for (int u = 0; u < ns; u++) {
        float dl = d * (float)cs[u];
        int nm = nm0;
        if (dmin != 0 && dl != 0) {
            float idl = 1.0f / dl, ml = dmin * (float)cm[0];
            double acc = 0;
            for (int j = 0; j < len; j++) acc += (double)(dl * (float)qaff(x[j], idl, ml, qmax)) - x[j];
            float lv = (float)(acc / len) / dmin;
            int f = rndq(floorf(lv), 0, lmax);
            for (int c = f; c <= f + 1 && c <= lmax; c++) {
                int dup = 0;
                for (int k = 0; k < nm; k++) dup |= cm[k] == c;
                if (!dup) cm[nm++] = c;
            }
        }
        for (int v = 0; v < nm; v++) {
            double e = err_affine(x, len, dl, dmin * (float)cm[v], qmax);
            if (e < be) be = e, *sc = (uint8_t)cs[u], *mq = (uint8_t)cm[v];
        }
    }
    return be;
}

/* Total error for super-scales (d, dmin), sub-scales searched near ar * s. */
static double affine_total(const float *x, int nsub, int len, int qmax, int lmax, const float *s,
                           const float *m, float ar, float d, float dmin, double bound, uint8_t *sc,
                           uint8_t *mq) {
    double tot = 0;
    for (int i = 0; i < nsub && tot < bound; i++)
        tot += affine_sub_best(x + len * i, len, qmax, lmax, s[i] * ar, m[i], d, dmin, &sc[i], &mq[i]);
    return tot;
}

/* Stage 2, affine codecs (Q2_K, Q4_K, Q5_K): sub-scales and mins in [0, lmax]
 * against two f16 super-scales. Candidates for d: the largest continuous
 * sub-scale at each of the top SUPER_TRIES levels, and that scale stretched by
 * qmax / (qmax - j) (the largest value one step lower, sub-scales searched
 * near the stretched fits too: other products of f16 scale, sub-scale and q,
 * which matters when the continuous fit is exact, e.g. constant rows). Then
 * dmin's candidates, then d's again when dmin moved. */
#define AFF_STRETCH 1
#define FINE_TRIES 2
#define AFF_STRETCH_TRIES 2
static void encode_affine(const float *x, int nsub, int len, int qmax, int lmax, uint16_t *dh_out,
                          uint16_t *dmh_out, uint8_t *sc_out, uint8_t *mq_out) {
    float s[16], m[16], smx = 0, mmx = 0;
    for (int i = 0; i < nsub; i++) {
        fit_affine(x + len * i, len, qmax, &s[i], &m[i]);
        smx = fmaxf(smx, s[i]);
        mmx = fmaxf(mmx, m[i]);
    }
    enum { ND = SUPER_TRIES + AFF_STRETCH * AFF_STRETCH_TRIES };
    uint16_t cd[ND], cm[MIN_TRIES];
    float car[ND];
    int nd = 0, nm = 0;
    if (smx > 0 && isfinite(smx)) {
        for (int k = 0; k < SUPER_TRIES; k++) car[nd] = 1, cd[nd++] = f16_scale(smx / (float)(lmax - k));
        for (int j = 1; j <= AFF_STRETCH && j < qmax; j++) {
            float ar = (float)qmax / (float)(qmax - j);
            for (int k = 0; k < AFF_STRETCH_TRIES; k++)
                car[nd] = ar, cd[nd++] = f16_scale(smx * ar / (float)(lmax - k));
        }
    }
    if (mmx > 0 && isfinite(mmx))
        for (int k = 0; k < MIN_TRIES; k++) cm[nm++] = f16_scale(mmx / (float)(lmax - k));
    uint16_t bd = nd ? cd[0] : 0, bm = nm ? cm[0] : 0;
    float bar = 1;
    uint8_t sc[16], mq[16];
    double best = affine_total(x, nsub, len, qmax, lmax, s, m, 1, llmk_fp16_to_fp32(bd), llmk_fp16_to_fp32(bm),
                               INFINITY, sc_out, mq_out);
    uint16_t bm0 = bm;
    for (int pass = 0; pass < 3; pass++) {
        int which = pass == 1; /* 0, 2: the scale's super-scale; 1: the min's */
        if (pass == 2 && bm == bm0) break;
        int nc = which ? nm : nd;
        for (int k = 0; k < nc; k++) {
            uint16_t td = which ? bd : cd[k], tm = which ? cm[k] : bm;
            float ar = which ? bar : car[k];
            if (td == bd && tm == bm && ar == bar) continue;
            double e = affine_total(x, nsub, len, qmax, lmax, s, m, ar, llmk_fp16_to_fp32(td),
                                    llmk_fp16_to_fp32(tm), best, sc, mq);
            if (e < best) {
                best = e, bd = td, bm = tm, bar = ar;
                memcpy(sc_out, sc, (size_t)nsub), memcpy(mq_out, mq, (size_t)nsub);
            }
        }
    }
    /* a fine scan of d within one sub-scale step either side: when every
     * sub-block sits near the top level, which d lands them all near their
     * fits is a matter of a fraction of a step */
    if (bd != 0) {
        float d0 = llmk_fp16_to_fp32(bd);
        for (int u = -FINE_TRIES; u <= FINE_TRIES; u++) {
            uint16_t td = f16_scale(d0 * (1.0f + (float)u / (float)(FINE_TRIES * lmax)));
            if (u == 0 || td == bd) continue;
            double e = affine_total(x, nsub, len, qmax, lmax, s, m, bar, llmk_fp16_to_fp32(td),
                                    llmk_fp16_to_fp32(bm), best, sc, mq);
            if (e < best) {
                best = e, bd = td;
                memcpy(sc_out, sc, (size_t)nsub), memcpy(mq_out, mq, (size_t)nsub);
            }
        }
    }
    /* last, the f16 neighbours of both super-scales (same sign, finite) */
    for (int which = 0; which < 2; which++) {
        uint16_t base = which ? bm : bd;
        if ((base & 0x7fffu) == 0) continue;
        for (int u = -ULP_TRIES; u <= ULP_TRIES; u++) {
            int h = (int)(base & 0x7fffu) + u;
            if (u == 0 || h <= 0 || h > 0x7bff) continue;
            uint16_t t = (uint16_t)((base & 0x8000u) | (unsigned)h);
            uint16_t td = which ? bd : t, tm = which ? t : bm;
            double e = affine_total(x, nsub, len, qmax, lmax, s, m, bar, llmk_fp16_to_fp32(td),
                                    llmk_fp16_to_fp32(tm), best, sc, mq);
            if (e < best) {
                best = e, bd = td, bm = tm;
                memcpy(sc_out, sc, (size_t)nsub), memcpy(mq_out, mq, (size_t)nsub);
            }
        }
    }
    *dh_out = bd;
    *dmh_out = bm;
}

/* ---- quantize ----------------------------------------------------------------- */

static void quant_q2_k(const float *src, void *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK_K; b++) {
        const float *x = src + b * LLMK_QK_K;
        llmk_block_q2_k blk;
        uint8_t sc[16], mq[16];
        encode_affine(x, 16, 16, 3, 15, &blk.d, &blk.dmin, sc, mq);
        float d = llmk_fp16_to_fp32(blk.d), dmin = llmk_fp16_to_fp32(blk.dmin);
        memset(blk.qs, 0, sizeof blk.qs);
        for (int i = 0; i < 16; i++) blk.scales[i] = (uint8_t)(sc[i] | (mq[i] << 4));
        for (int i = 0; i < 16; i++) {
            float dl = d * (float)sc[i], ml = dmin * (float)mq[i], idl = dl != 0 ? 1.0f / dl : 0.0f;
            for (int e = 16 * i; e < 16 * i + 16; e++) {
                int q = dl != 0 ? qaff(x[e], idl, ml, 3) : 0;
                blk.qs[(e >> 7) * 32 + (e & 31)] |= (uint8_t)(q << (2 * ((e >> 5) & 3)));
            }
        }
        memcpy((char *)dst + b * sizeof blk, &blk, sizeof blk);
    }
}

static void quant_q3_k(const float *src, void *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK_K; b++) {
        const float *x = src + b * LLMK_QK_K;
        llmk_block_q3_k blk;
        int sc[16];
        blk.d = encode_sym(x, 16, 16, -4, 3, -32, 31, sc);
        q3k_put_scales(blk.scales, sc);
        float d = llmk_fp16_to_fp32(blk.d);
        memset(blk.qs, 0, sizeof blk.qs);
        memset(blk.hmask, 0, sizeof blk.hmask);
        for (int e = 0; e < LLMK_QK_K; e++) {
            float dl = d * (float)sc[e >> 4];
            int q = (dl != 0 ? qsym(x[e], 1.0f / dl, -4, 3) : 0) + 4; /* 0..7 */
            blk.qs[(e >> 7) * 32 + (e & 31)] |= (uint8_t)((q & 3) << (2 * ((e >> 5) & 3)));
            if (q & 4) blk.hmask[e & 31] |= (uint8_t)(1u << (e >> 5));
        }
        memcpy((char *)dst + b * sizeof blk, &blk, sizeof blk);
    }
}

static void quant_q45_k(const float *x, int qmax, uint16_t *dh, uint16_t *dminh, uint8_t *scales,
                        uint8_t q[LLMK_QK_K]) {
    uint8_t sc[8], mq[8];
    encode_affine(x, 8, 32, qmax, 63, dh, dminh, sc, mq);
    put_scale_min(scales, sc, mq);
    float d = llmk_fp16_to_fp32(*dh), dmin = llmk_fp16_to_fp32(*dminh);
    for (int i = 0; i < 8; i++) {
        float dl = d * (float)sc[i], ml = dmin * (float)mq[i], idl = dl != 0 ? 1.0f / dl : 0.0f;
        for (int e = 32 * i; e < 32 * i + 32; e++) q[e] = (uint8_t)(dl != 0 ? qaff(x[e], idl, ml, qmax) : 0);
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
        llmk_block_q6_k blk;
        int sc[16];
        blk.d = encode_sym(x, 16, 16, -32, 31, -128, 127, sc);
        for (int i = 0; i < 16; i++) blk.scales[i] = (int8_t)sc[i];
        float d = llmk_fp16_to_fp32(blk.d);
        memset(blk.ql, 0, sizeof blk.ql);
        memset(blk.qh, 0, sizeof blk.qh);
        for (int e = 0; e < LLMK_QK_K; e++) {
            float dl = d * (float)sc[e >> 4];
            int q = (dl != 0 ? qsym(x[e], 1.0f / dl, -32, 31) : 0) + 32; /* 0..63 */
            int j = e >> 7, r = e & 127;
            blk.ql[j * 64 + (r & 63)] |= (uint8_t)((q & 0xf) << (4 * (r >> 6)));
            blk.qh[j * 32 + (r & 31)] |= (uint8_t)((q >> 4) << (2 * (r >> 5)));
        }
        memcpy((char *)dst + b * sizeof blk, &blk, sizeof blk);
    }
}

/* Q8_K is the K-quants' activation form: d = max|x| / 127 in f32 (not
 * rounded to f16), q = round(x / d), bsums = sums of 16 consecutive q.
 * Returns whether an element is NaN or infinite (see codec.h). */
int llmk_quantize_act_q8_k(const float *src, void *dst, int64_t n) {
    int bad = 0;
    for (int64_t b = 0; b < n / LLMK_QK_K; b++) {
        const float *x = src + b * LLMK_QK_K;
        float amax = 0;
        for (int e = 0; e < LLMK_QK_K; e++) {
            float a = fabsf(x[e]);
            amax = fmaxf(amax, a);
            bad |= !(a <= FLT_MAX);
        }
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
    return bad;
}

static void quant_q8_k(const float *src, void *dst, int64_t n) { (void)llmk_quantize_act_q8_k(src, dst, n); }

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
