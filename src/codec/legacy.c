/* Scalar reference codecs for the plain float types and the 32-element block
 * codecs: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, IQ4_NL, MXFP4.
 *
 * Dequantization follows the format's arithmetic in f32 in the order gguf-py
 * uses (d * q, then + m), so results are bit-identical to gguf-py's. For the
 * codecs gguf-py quantizes (BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) quantize_ref
 * reproduces its rounding exactly, including Q4_0/Q5_0's f64 product. Blocks
 * are copied out with memcpy, so rows may sit at any address. */
#include "codec/blocks.h"
#include "codec/codec.h"
#include "codec/half.h"
#include "internal.h"

#include <float.h>
#include <math.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF /* bit-exactness needs separate multiply and add */
#endif

/* float -> integer without UB for NaN/inf/out-of-range (clamped; NaN -> 0). */
static inline int clamp_to_int(float v, int lo, int hi) {
    if (!(v == v)) return 0;
    if (v <= (float)lo) return lo;
    if (v >= (float)hi) return hi;
    return (int)v;
}

/* ---- F32, F16, BF16 ---------------------------------------------------- */

static void dequant_f32(const void *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * 4); }
static void quant_f32(const float *src, void *dst, int64_t n) { memcpy(dst, src, (size_t)n * 4); }

static void dequant_f16(const void *src, float *dst, int64_t n) {
    const unsigned char *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = llmk_fp16_to_fp32(llmk_ld_u16(s + 2 * i));
}
static void quant_f16(const float *src, void *dst, int64_t n) {
    unsigned char *d = dst;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = llmk_fp32_to_fp16(src[i]);
        memcpy(d + 2 * i, &h, 2);
    }
}
static void dequant_bf16(const void *src, float *dst, int64_t n) {
    const unsigned char *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = llmk_bf16_to_fp32(llmk_ld_u16(s + 2 * i));
}
static void quant_bf16(const float *src, void *dst, int64_t n) {
    unsigned char *d = dst;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = llmk_fp32_to_bf16(src[i]);
        memcpy(d + 2 * i, &h, 2);
    }
}

/* f32 dot in one sequential f32 sum: the reference the fast kernels are
 * compared with (they sum in another order, within a stated bound). */
static void dot_f32(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    const float *x = a;
    for (int64_t r = 0; r < nrows; r++) {
        const unsigned char *row = (const unsigned char *)w + (size_t)r * ws;
        float s = 0;
        for (int64_t i = 0; i < k; i++) {
            float v;
            memcpy(&v, row + 4 * i, 4);
            s += v * x[i];
        }
        y[r] = s;
    }
}
static void dot_f16(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    const float *x = a;
    for (int64_t r = 0; r < nrows; r++) {
        const unsigned char *row = (const unsigned char *)w + (size_t)r * ws;
        float s = 0;
        for (int64_t i = 0; i < k; i++) s += llmk_fp16_to_fp32(llmk_ld_u16(row + 2 * i)) * x[i];
        y[r] = s;
    }
}
static void dot_bf16(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    const float *x = a;
    for (int64_t r = 0; r < nrows; r++) {
        const unsigned char *row = (const unsigned char *)w + (size_t)r * ws;
        float s = 0;
        for (int64_t i = 0; i < k; i++) s += llmk_bf16_to_fp32(llmk_ld_u16(row + 2 * i)) * x[i];
        y[r] = s;
    }
}

/* ---- unpacking helpers ------------------------------------------------- */

/* 4-bit codecs: element j < 16 is the low nibble of qs[j], j >= 16 the high
 * nibble of qs[j - 16]. */
static inline int nib(const uint8_t *qs, int j) {
    return j < 16 ? (qs[j] & 0xf) : (qs[j - 16] >> 4);
}
/* 5-bit codecs: bit j of the little-endian 32-bit qh is element j's bit 4. */
static inline int hbit(const uint8_t qh[4], int j) { return (qh[j >> 3] >> (j & 7)) & 1; }

/* ---- Q4_0 --------------------------------------------------------------- */

static void dequant_q4_0(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK; b++) {
        llmk_block_q4_0 blk;
        memcpy(&blk, (const char *)src + b * sizeof blk, sizeof blk);
        float d = llmk_fp16_to_fp32(blk.d);
        for (int j = 0; j < LLMK_QK; j++) dst[b * LLMK_QK + j] = d * (float)(nib(blk.qs, j) - 8);
    }
}

/* Index of the first element with the largest |x| (numpy argmax of abs). */
static int argmax_abs(const float *x, int n) {
    int im = 0;
    float am = fabsf(x[0]);
    for (int j = 1; j < n; j++)
        if (fabsf(x[j]) > am) am = fabsf(x[j]), im = j;
    return im;
}

static void quant_q4_0(const float *src, void *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK; b++) {
        const float *x = src + b * LLMK_QK;
        float d = x[argmax_abs(x, LLMK_QK)] / -8.0f;
        float id = d == 0 ? 0.0f : 1.0f / d;
        llmk_block_q4_0 blk;
        blk.d = llmk_fp32_to_fp16(d);
        uint8_t q[LLMK_QK];
        for (int j = 0; j < LLMK_QK; j++)
            q[j] = (uint8_t)clamp_to_int(truncf((float)((double)x[j] * (double)id + 8.5)), 0, 15);
        for (int j = 0; j < 16; j++) blk.qs[j] = (uint8_t)(q[j] | (q[j + 16] << 4));
        memcpy((char *)dst + b * sizeof blk, &blk, sizeof blk);
    }
}

/* ---- Q4_1 --------------------------------------------------------------- */

static void dequant_q4_1(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK; b++) {
        llmk_block_q4_1 blk;
        memcpy(&blk, (const char *)src + b * sizeof blk, sizeof blk);
        float d = llmk_fp16_to_fp32(blk.d), m = llmk_fp16_to_fp32(blk.m);
        for (int j = 0; j < LLMK_QK; j++) dst[b * LLMK_QK + j] = d * (float)nib(blk.qs, j) + m;
    }
}

static void block_minmax(const float *x, int n, float *mn, float *mx) {
    *mn = *mx = x[0];
    for (int j = 1; j < n; j++) {
        if (x[j] < *mn) *mn = x[j];
        if (x[j] > *mx) *mx = x[j];
    }
}

static void quant_q4_1(const float *src, void *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK; b++) {
        const float *x = src + b * LLMK_QK;
        float mn, mx;
        block_minmax(x, LLMK_QK, &mn, &mx);
        float d = (mx - mn) / 15.0f;
        float id = d == 0 ? 0.0f : 1.0f / d;
        llmk_block_q4_1 blk;
        blk.d = llmk_fp32_to_fp16(d);
        blk.m = llmk_fp32_to_fp16(mn);
        uint8_t q[LLMK_QK];
        for (int j = 0; j < LLMK_QK; j++) {
            float v = (x[j] - mn) * id;
            v = v + 0.5f;
            q[j] = (uint8_t)clamp_to_int(truncf(v), 0, 15);
        }
        for (int j = 0; j < 16; j++) blk.qs[j] = (uint8_t)(q[j] | (q[j + 16] << 4));
        memcpy((char *)dst + b * sizeof blk, &blk, sizeof blk);
    }
}

/* ---- Q5_0 / Q5_1 --------------------------------------------------------- */

static void pack5(const uint8_t q[LLMK_QK], uint8_t qh[4], uint8_t qs[16]) {
    memset(qh, 0, 4);
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)((q[j] & 0xf) | ((q[j + 16] & 0xf) << 4));
    for (int j = 0; j < LLMK_QK; j++) qh[j >> 3] |= (uint8_t)(((q[j] >> 4) & 1) << (j & 7));
}

static void dequant_q5_0(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK; b++) {
        llmk_block_q5_0 blk;
        memcpy(&blk, (const char *)src + b * sizeof blk, sizeof blk);
        float d = llmk_fp16_to_fp32(blk.d);
        for (int j = 0; j < LLMK_QK; j++)
            dst[b * LLMK_QK + j] = d * (float)((nib(blk.qs, j) | (hbit(blk.qh, j) << 4)) - 16);
    }
}

static void quant_q5_0(const float *src, void *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK; b++) {
        const float *x = src + b * LLMK_QK;
        float d = x[argmax_abs(x, LLMK_QK)] / -16.0f;
        float id = d == 0 ? 0.0f : 1.0f / d;
        llmk_block_q5_0 blk;
        blk.d = llmk_fp32_to_fp16(d);
        uint8_t q[LLMK_QK];
        for (int j = 0; j < LLMK_QK; j++)
            q[j] = (uint8_t)clamp_to_int(truncf((float)((double)x[j] * (double)id + 16.5)), 0, 31);
        pack5(q, blk.qh, blk.qs);
        memcpy((char *)dst + b * sizeof blk, &blk, sizeof blk);
    }
}

static void dequant_q5_1(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK; b++) {
        llmk_block_q5_1 blk;
        memcpy(&blk, (const char *)src + b * sizeof blk, sizeof blk);
        float d = llmk_fp16_to_fp32(blk.d), m = llmk_fp16_to_fp32(blk.m);
        for (int j = 0; j < LLMK_QK; j++)
            dst[b * LLMK_QK + j] = d * (float)(nib(blk.qs, j) | (hbit(blk.qh, j) << 4)) + m;
    }
}

static void quant_q5_1(const float *src, void *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK; b++) {
        const float *x = src + b * LLMK_QK;
        float mn, mx;
        block_minmax(x, LLMK_QK, &mn, &mx);
        float d = (mx - mn) / 31.0f;
        float id = d == 0 ? 0.0f : 1.0f / d;
        llmk_block_q5_1 blk;
        blk.d = llmk_fp32_to_fp16(d);
        blk.m = llmk_fp32_to_fp16(mn);
        uint8_t q[LLMK_QK];
        for (int j = 0; j < LLMK_QK; j++) {
            float v = (x[j] - mn) * id;
            v = v + 0.5f;
            q[j] = (uint8_t)clamp_to_int(truncf(v), 0, 31);
        }
        pack5(q, blk.qh, blk.qs);
        memcpy((char *)dst + b * sizeof blk, &blk, sizeof blk);
    }
}

/* ---- Q8_0 / Q8_1 --------------------------------------------------------- */

static void dequant_q8_0(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK; b++) {
        llmk_block_q8_0 blk;
        memcpy(&blk, (const char *)src + b * sizeof blk, sizeof blk);
        float d = llmk_fp16_to_fp32(blk.d);
        for (int j = 0; j < LLMK_QK; j++) dst[b * LLMK_QK + j] = (float)blk.qs[j] * d;
    }
}

/* Symmetric 8-bit: d = max|x| / 127, q = round-half-away(x / d) (gguf-py's
 * np_roundf(x * (1/d)) in f32). *bad |= whether an element is NaN or
 * infinite (fmaxf drops a NaN: the bytes alone cannot tell). */
static float q8_block(const float *x, int8_t *q, int *bad) {
    float amax = 0;
    int nf = 0;
    for (int j = 0; j < LLMK_QK; j++) {
        float a = fabsf(x[j]);
        amax = fmaxf(amax, a);
        nf |= !(a <= FLT_MAX);
    }
    *bad |= nf;
    float d = amax / 127.0f;
    float id = d == 0 ? 0.0f : 1.0f / d;
    for (int j = 0; j < LLMK_QK; j++) q[j] = (int8_t)clamp_to_int(roundf(x[j] * id), -128, 127);
    return d;
}

int llmk_quantize_act_q8_0(const float *src, void *dst, int64_t n) {
    int bad = 0;
    for (int64_t b = 0; b < n / LLMK_QK; b++) {
        llmk_block_q8_0 blk;
        blk.d = llmk_fp32_to_fp16(q8_block(src + b * LLMK_QK, blk.qs, &bad));
        memcpy((char *)dst + b * sizeof blk, &blk, sizeof blk);
    }
    return bad;
}

static void quant_q8_0(const float *src, void *dst, int64_t n) { (void)llmk_quantize_act_q8_0(src, dst, n); }

static void dequant_q8_1(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK; b++) {
        llmk_block_q8_1 blk;
        memcpy(&blk, (const char *)src + b * sizeof blk, sizeof blk);
        float d = llmk_fp16_to_fp32(blk.d);
        for (int j = 0; j < LLMK_QK; j++) dst[b * LLMK_QK + j] = (float)blk.qs[j] * d;
    }
}

int llmk_quantize_act_q8_1(const float *src, void *dst, int64_t n) {
    int bad = 0;
    for (int64_t b = 0; b < n / LLMK_QK; b++) {
        llmk_block_q8_1 blk;
        float d = q8_block(src + b * LLMK_QK, blk.qs, &bad);
        int sum = 0;
        for (int j = 0; j < LLMK_QK; j++) sum += blk.qs[j];
        blk.d = llmk_fp32_to_fp16(d);
        blk.s = llmk_fp32_to_fp16((float)sum * d);
        memcpy((char *)dst + b * sizeof blk, &blk, sizeof blk);
    }
    return bad;
}

static void quant_q8_1(const float *src, void *dst, int64_t n) { (void)llmk_quantize_act_q8_1(src, dst, n); }

/* ---- IQ4_NL --------------------------------------------------------------- */

static void dequant_iq4_nl(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK; b++) {
        llmk_block_iq4_nl blk;
        memcpy(&blk, (const char *)src + b * sizeof blk, sizeof blk);
        float d = llmk_fp16_to_fp32(blk.d);
        for (int j = 0; j < LLMK_QK; j++)
            dst[b * LLMK_QK + j] = d * (float)llmk_iq4nl_values[nib(blk.qs, j)];
    }
}

/* gguf-py computes x * id + 8.5 in f64, casts to f32, then truncates. */

/* Index of the grid value nearest to v (grid ascending, 16 entries). */
static int nearest_grid(const int8_t *grid, float v) {
    int best = 0;
    float be = fabsf(v - grid[0]);
    for (int i = 1; i < 16; i++) {
        float e = fabsf(v - grid[i]);
        if (e < be) be = e, best = i;
    }
    return best;
}

/* Best scale for a non-linear grid over n values: try the largest-magnitude
 * element on a sweep of grid targets, assign each value its nearest grid
 * point, refit the scale by least squares, keep the lowest squared error.
 * Returns the scale; idx receives the grid indices for that scale. Exposed
 * to kquants.c (IQ4_XS) through codec_nl_fit. */
float llmk_codec_nl_fit(const float *x, int n, const int8_t *grid, uint8_t *idx);
float llmk_codec_nl_fit(const float *x, int n, const int8_t *grid, uint8_t *idx) {
    int im = argmax_abs(x, n);
    float xm = x[im];
    if (xm == 0 || !isfinite(xm)) {
        for (int j = 0; j < n; j++) idx[j] = (uint8_t)nearest_grid(grid, 0);
        return 0;
    }
    float best_err = INFINITY, best_d = 0;
    uint8_t cand[LLMK_QK_K];
    for (int t = -12; t <= 12; t++) {
        for (int side = 0; side < 2; side++) {
            float target = side == 0 ? (float)grid[0] + (float)t : (float)grid[15] + (float)t;
            if (target == 0) continue;
            float d0 = xm / target, id = 1.0f / d0;
            double sxg = 0, sgg = 0;
            for (int j = 0; j < n; j++) {
                cand[j] = (uint8_t)nearest_grid(grid, x[j] * id);
                double g = grid[cand[j]];
                sxg += (double)x[j] * g;
                sgg += g * g;
            }
            if (sgg == 0) continue;
            float d = (float)(sxg / sgg);
            double err = 0;
            for (int j = 0; j < n; j++) {
                double e = (double)x[j] - (double)d * grid[cand[j]];
                err += e * e;
            }
            if (err < best_err) {
                best_err = (float)err, best_d = d;
                memcpy(idx, cand, (size_t)n);
            }
        }
    }
    return best_d;
}

static void quant_iq4_nl(const float *src, void *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK; b++) {
        const float *x = src + b * LLMK_QK;
        uint8_t q[LLMK_QK];
        float d = llmk_codec_nl_fit(x, LLMK_QK, llmk_iq4nl_values, q);
        llmk_block_iq4_nl blk;
        blk.d = llmk_fp32_to_fp16(d);
        /* re-assign against the scale actually stored (f16-rounded) */
        float dq = llmk_fp16_to_fp32(blk.d);
        if (dq != 0)
            for (int j = 0; j < LLMK_QK; j++) q[j] = (uint8_t)nearest_grid(llmk_iq4nl_values, x[j] / dq);
        for (int j = 0; j < 16; j++) blk.qs[j] = (uint8_t)(q[j] | (q[j + 16] << 4));
        memcpy((char *)dst + b * sizeof blk, &blk, sizeof blk);
    }
}

/* ---- MXFP4 ------------------------------------------------------------------ */

static void dequant_mxfp4(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK; b++) {
        llmk_block_mxfp4 blk;
        memcpy(&blk, (const char *)src + b * sizeof blk, sizeof blk);
        float d = llmk_e8m0_half_to_fp32(blk.e);
        for (int j = 0; j < LLMK_QK; j++)
            dst[b * LLMK_QK + j] = (float)llmk_mxfp4_values[nib(blk.qs, j)] * d;
    }
}

/* Nearest E2M1 code for v (in units of the halved scale, so the grid is the
 * doubled values 0,1,2,3,4,6,8,12 and their negatives). */
static int mxfp4_code(float v) {
    static const int8_t pos[8] = {0, 1, 2, 3, 4, 6, 8, 12};
    float a = fabsf(v);
    int best = 0;
    float be = a;
    for (int i = 1; i < 8; i++) {
        float e = fabsf(a - pos[i]);
        if (e < be) be = e, best = i;
    }
    return (v < 0 && best != 0) ? best | 8 : best;
}

/* Shared exponent per OCP MX: the largest power of two with amax/scale <= 6
 * fits the E2M1 range; also try one step either side and keep the lowest
 * squared error (rounding can make the neighbour better). */
static void quant_mxfp4(const float *src, void *dst, int64_t n) {
    for (int64_t b = 0; b < n / LLMK_QK; b++) {
        const float *x = src + b * LLMK_QK;
        float amax = 0;
        for (int j = 0; j < LLMK_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
        int e0 = 0;
        if (amax > 0 && isfinite(amax)) {
            int ex;
            frexpf(amax, &ex);     /* amax in [2^(ex-1), 2^ex) */
            e0 = (ex - 1) - 2 + 127; /* floor(log2 amax) - emax(E2M1) + bias */
        }
        int best_e = 0;
        double best_err = INFINITY;
        for (int e = e0 - 1; e <= e0 + 1; e++) {
            if (e < 0 || e > 254) continue;
            float d = llmk_e8m0_half_to_fp32((uint8_t)e);
            double err = 0;
            for (int j = 0; j < LLMK_QK; j++) {
                double r = (double)x[j] - (double)llmk_mxfp4_values[mxfp4_code(x[j] / d)] * d;
                err += r * r;
            }
            if (err < best_err) best_err = err, best_e = e;
        }
        llmk_block_mxfp4 blk;
        blk.e = (uint8_t)best_e;
        float d = llmk_e8m0_half_to_fp32(blk.e);
        uint8_t q[LLMK_QK];
        for (int j = 0; j < LLMK_QK; j++) q[j] = (uint8_t)mxfp4_code(x[j] / d);
        for (int j = 0; j < 16; j++) blk.qs[j] = (uint8_t)(q[j] | (q[j + 16] << 4));
        memcpy((char *)dst + b * sizeof blk, &blk, sizeof blk);
    }
}

/* ---- dot products against Q8_0 / Q8_1 activations -------------------------- */
/* Per block an exact integer sum, scaled in f32 and accumulated in block order. */

#define DOT_ROWS(NAME, WBLK, ABLK, BODY)                                                   \
    static void NAME(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a,   \
                     float *y) {                                                          \
        const ABLK *ab = a;                                                               \
        for (int64_t r = 0; r < nrows; r++) {                                             \
            const char *row = (const char *)w + (size_t)r * ws;                           \
            float sum = 0;                                                                \
            for (int64_t b = 0; b < k / LLMK_QK; b++) {                                   \
                WBLK wb;                                                                  \
                memcpy(&wb, row + b * sizeof wb, sizeof wb);                              \
                const ABLK *xb = &ab[b];                                                  \
                int isum = 0;                                                             \
                BODY                                                                      \
            }                                                                             \
            y[r] = sum;                                                                   \
        }                                                                                 \
    }

DOT_ROWS(dot_q4_0, llmk_block_q4_0, llmk_block_q8_0, {
    for (int j = 0; j < LLMK_QK; j++) isum += (nib(wb.qs, j) - 8) * xb->qs[j];
    sum += llmk_fp16_to_fp32(wb.d) * llmk_fp16_to_fp32(xb->d) * (float)isum;
})
DOT_ROWS(dot_q4_1, llmk_block_q4_1, llmk_block_q8_1, {
    for (int j = 0; j < LLMK_QK; j++) isum += nib(wb.qs, j) * xb->qs[j];
    sum += llmk_fp16_to_fp32(wb.d) * llmk_fp16_to_fp32(xb->d) * (float)isum +
           llmk_fp16_to_fp32(wb.m) * llmk_fp16_to_fp32(xb->s);
})
DOT_ROWS(dot_q5_0, llmk_block_q5_0, llmk_block_q8_0, {
    for (int j = 0; j < LLMK_QK; j++) isum += ((nib(wb.qs, j) | (hbit(wb.qh, j) << 4)) - 16) * xb->qs[j];
    sum += llmk_fp16_to_fp32(wb.d) * llmk_fp16_to_fp32(xb->d) * (float)isum;
})
DOT_ROWS(dot_q5_1, llmk_block_q5_1, llmk_block_q8_1, {
    for (int j = 0; j < LLMK_QK; j++) isum += (nib(wb.qs, j) | (hbit(wb.qh, j) << 4)) * xb->qs[j];
    sum += llmk_fp16_to_fp32(wb.d) * llmk_fp16_to_fp32(xb->d) * (float)isum +
           llmk_fp16_to_fp32(wb.m) * llmk_fp16_to_fp32(xb->s);
})
DOT_ROWS(dot_q8_0, llmk_block_q8_0, llmk_block_q8_0, {
    for (int j = 0; j < LLMK_QK; j++) isum += wb.qs[j] * xb->qs[j];
    sum += llmk_fp16_to_fp32(wb.d) * llmk_fp16_to_fp32(xb->d) * (float)isum;
})
DOT_ROWS(dot_q8_1, llmk_block_q8_1, llmk_block_q8_1, {
    for (int j = 0; j < LLMK_QK; j++) isum += wb.qs[j] * xb->qs[j];
    sum += llmk_fp16_to_fp32(wb.d) * llmk_fp16_to_fp32(xb->d) * (float)isum;
})
DOT_ROWS(dot_iq4_nl, llmk_block_iq4_nl, llmk_block_q8_0, {
    for (int j = 0; j < LLMK_QK; j++) isum += llmk_iq4nl_values[nib(wb.qs, j)] * xb->qs[j];
    sum += llmk_fp16_to_fp32(wb.d) * llmk_fp16_to_fp32(xb->d) * (float)isum;
})
DOT_ROWS(dot_mxfp4, llmk_block_mxfp4, llmk_block_q8_0, {
    for (int j = 0; j < LLMK_QK; j++) isum += llmk_mxfp4_values[nib(wb.qs, j)] * xb->qs[j];
    sum += llmk_e8m0_half_to_fp32(wb.e) * llmk_fp16_to_fp32(xb->d) * (float)isum;
})

const struct llmk_codec llmk_codecs_legacy[] = {
    {LLMK_TYPE_F32, LLMK_TYPE_F32, dequant_f32, quant_f32, dot_f32},
    {LLMK_TYPE_F16, LLMK_TYPE_F32, dequant_f16, quant_f16, dot_f16},
    {LLMK_TYPE_BF16, LLMK_TYPE_F32, dequant_bf16, quant_bf16, dot_bf16},
    {LLMK_TYPE_Q4_0, LLMK_TYPE_Q8_0, dequant_q4_0, quant_q4_0, dot_q4_0},
    {LLMK_TYPE_Q4_1, LLMK_TYPE_Q8_1, dequant_q4_1, quant_q4_1, dot_q4_1},
    {LLMK_TYPE_Q5_0, LLMK_TYPE_Q8_0, dequant_q5_0, quant_q5_0, dot_q5_0},
    {LLMK_TYPE_Q5_1, LLMK_TYPE_Q8_1, dequant_q5_1, quant_q5_1, dot_q5_1},
    {LLMK_TYPE_Q8_0, LLMK_TYPE_Q8_0, dequant_q8_0, quant_q8_0, dot_q8_0},
    {LLMK_TYPE_Q8_1, LLMK_TYPE_Q8_1, dequant_q8_1, quant_q8_1, dot_q8_1},
    {LLMK_TYPE_IQ4_NL, LLMK_TYPE_Q8_0, dequant_iq4_nl, quant_iq4_nl, dot_iq4_nl},
    {LLMK_TYPE_MXFP4, LLMK_TYPE_Q8_0, dequant_mxfp4, quant_mxfp4, dot_mxfp4},
};
const size_t llmk_codecs_legacy_n = LLMK_ARRAY_LEN(llmk_codecs_legacy);
