/* 16-bit activations (src/kernels/a16.h) and their Q4_1 / Q8_0 products
 * (src/kernels/r8.h): the AVX2 kernels on repacked weights equal the scalar
 * reference bit for bit (random data, extreme scales, zero blocks, ragged
 * block, weight-row and activation-row counts, any 8-aligned row range);
 * results do not depend on how many rows are computed together;
 * quantization round-trips within half a step and is the same whether a row
 * is quantized at once or in parts; the quantizers report a NaN or infinity
 * in their input (and only that); and the dot is within 1e-4 (relative to
 * sum |w x|) of an f64 dot of the dequantized weights with the f32 inputs. */
#include "check.h"
#include "codec/blocks.h"
#include "codec/codec.h"
#include "codec/half.h"
#include "kernels/a16.h"
#include "kernels/kernels.h"
#include "kernels/r8.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float unif(void) { return (float)rnd() / 4294967296.0f * 2.0f - 1.0f; } /* [-1, 1) */

/* an activation block scale: mostly ordinary, sometimes extreme or zero */
static float act_scale(int extreme) {
    if (!extreme) return 0.5f + 4.0f * (unif() + 1.0f);
    static const float s[] = {0.0f, 1e-37f, 1e-30f, 1e-12f, 3e-5f, 1e6f, 1e15f, 1e20f};
    return s[rnd() % (sizeof s / sizeof s[0])];
}

/* Activations: k floats, per block a scale; some blocks all zero, some with
 * one outlier of `outlier` times the scale. */
static void fill_x(float *x, int64_t k, int extreme, float outlier) {
    for (int64_t b = 0; b < k / 32; b++) {
        float s = rnd() % 7 == 0 ? 0.0f : act_scale(extreme);
        for (int j = 0; j < 32; j++) x[b * 32 + j] = s * unif();
        if (rnd() % 5 == 0) x[b * 32 + rnd() % 32] = s * outlier;
    }
}

static uint16_t f16_of(float f) { return llmk_fp32_to_fp16(f); }

/* weight scale as f16: ordinary, subnormal, large, negative or zero */
static uint16_t w_scale(int extreme) {
    if (!extreme) return f16_of(0.001f + 0.02f * (unif() + 1.0f));
    switch (rnd() % 7) {
    case 0: return 0;
    case 1: return (uint16_t)(1 + rnd() % 0x3ff); /* subnormal */
    case 2: return f16_of(100.0f * unif());
    case 3: return (uint16_t)(0x8000u | f16_of(0.01f));
    case 4: return f16_of(12000.0f * (unif() >= 0 ? 1 : -1) + 4000.0f * unif()); /* Q4_0's -8 d past f16: -inf */
    default: return f16_of(0.05f * unif());
    }
}

static void fill_q4_1(unsigned char *w, int64_t nb, int extreme) {
    for (int64_t b = 0; b < nb; b++) {
        llmk_block_q4_1 blk;
        blk.d = w_scale(extreme), blk.m = w_scale(extreme);
        for (int j = 0; j < 16; j++) blk.qs[j] = (uint8_t)rnd();
        memcpy(w + b * sizeof blk, &blk, sizeof blk);
    }
}
static void fill_q8_0(unsigned char *w, int64_t nb, int extreme) {
    for (int64_t b = 0; b < nb; b++) {
        llmk_block_q8_0 blk;
        blk.d = w_scale(extreme);
        for (int j = 0; j < 32; j++) blk.qs[j] = (int8_t)rnd(); /* -128 included */
        memcpy(w + b * sizeof blk, &blk, sizeof blk);
    }
}

static void fill_q4_0(unsigned char *w, int64_t nb, int extreme) {
    for (int64_t b = 0; b < nb; b++) {
        llmk_block_q4_0 blk;
        blk.d = w_scale(extreme);
        for (int j = 0; j < 16; j++) blk.qs[j] = (uint8_t)rnd();
        memcpy(w + b * sizeof blk, &blk, sizeof blk);
    }
}
static void fill_q5_0(unsigned char *w, int64_t nb, int extreme) {
    for (int64_t b = 0; b < nb; b++) {
        llmk_block_q5_0 blk;
        blk.d = w_scale(extreme);
        for (int j = 0; j < 4; j++) blk.qh[j] = (uint8_t)rnd();
        for (int j = 0; j < 16; j++) blk.qs[j] = (uint8_t)rnd();
        memcpy(w + b * sizeof blk, &blk, sizeof blk);
    }
}
static void fill_q5_1(unsigned char *w, int64_t nb, int extreme) {
    for (int64_t b = 0; b < nb; b++) {
        llmk_block_q5_1 blk;
        blk.d = w_scale(extreme), blk.m = w_scale(extreme);
        for (int j = 0; j < 4; j++) blk.qh[j] = (uint8_t)rnd();
        for (int j = 0; j < 16; j++) blk.qs[j] = (uint8_t)rnd();
        memcpy(w + b * sizeof blk, &blk, sizeof blk);
    }
}
static void fill_iq4_nl(unsigned char *w, int64_t nb, int extreme) {
    for (int64_t b = 0; b < nb; b++) {
        llmk_block_iq4_nl blk;
        blk.d = w_scale(extreme);
        for (int j = 0; j < 16; j++) blk.qs[j] = (uint8_t)rnd();
        memcpy(w + b * sizeof blk, &blk, sizeof blk);
    }
}

/* A 256-element type's row: random bytes, then finite f16 scales (and
 * MXFP4's exponent in a range whose products stay finite); nb counts 32s. */
static void fill_super(uint32_t type, unsigned char *w, int64_t nb, int extreme) {
    size_t bs = llmk_type_block_bytes(type), n = (size_t)(nb * LLMK_QK / (int64_t)llmk_type_block_elems(type));
    for (size_t i = 0; i < n * bs; i++) w[i] = (unsigned char)rnd();
    for (size_t i = 0; i < n; i++) {
        unsigned char *b = w + i * bs;
        uint16_t d0 = w_scale(extreme), d1 = w_scale(extreme);
        switch (type) {
        case LLMK_TYPE_Q3_K: memcpy(b + offsetof(llmk_block_q3_k, d), &d0, 2); break;
        case LLMK_TYPE_Q2_K:
            memcpy(b + offsetof(llmk_block_q2_k, d), &d0, 2), memcpy(b + offsetof(llmk_block_q2_k, dmin), &d1, 2);
            break;
        case LLMK_TYPE_Q6_K: memcpy(b + offsetof(llmk_block_q6_k, d), &d0, 2); break;
        /* extreme: every exponent up to 2^21, the subnormal scales of e 0 and 1 among them */
        case LLMK_TYPE_MXFP4: b[0] = (uint8_t)(extreme ? rnd() % 150 : 100 + rnd() % 40); break;
        case LLMK_TYPE_IQ4_XS: memcpy(b, &d0, 2); break;
        default: memcpy(b, &d0, 2), memcpy(b + 2, &d1, 2); /* Q4_K, Q5_K: d, dmin */
        }
    }
}
#define FILL_SUPER(name, TYPE) \
    static void fill_##name(unsigned char *w, int64_t nb, int extreme) { fill_super(TYPE, w, nb, extreme); }
FILL_SUPER(q2_k, LLMK_TYPE_Q2_K)
FILL_SUPER(q3_k, LLMK_TYPE_Q3_K)
FILL_SUPER(q4_k, LLMK_TYPE_Q4_K)
FILL_SUPER(q5_k, LLMK_TYPE_Q5_K)
FILL_SUPER(q6_k, LLMK_TYPE_Q6_K)
FILL_SUPER(iq4_xs, LLMK_TYPE_IQ4_XS)
FILL_SUPER(mxfp4, LLMK_TYPE_MXFP4)

static const int64_t ks[] = {32, 64, 96, 224, 256, 288, 544, 576, 608, 1536, 2080};

static int bits_equal(const float *a, const float *b, int64_t n) { return memcmp(a, b, (size_t)n * sizeof *a) == 0; }

static void test_quantize(void) {
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        int64_t k = ks[ki], nb = k / 32;
        size_t rb = llmk_a16_row_bytes(k);
        CHECK_EQ_INT(rb, (size_t)nb * 80);
        float *x = malloc((size_t)k * sizeof *x);
        unsigned char *q1 = malloc(rb), *q2 = malloc(rb);
        for (int rep = 0; rep < 20; rep++) {
            fill_x(x, k, rep % 2, 40.0f);
            llmk_kernels()->act_quant[LLMK_ACT_A16](x, k, 0, k, q1);
            memset(q2, 0xa5, rb);
            for (int64_t e0 = 0; e0 < k;) { /* in random parts of whole blocks */
                int64_t e1 = e0 + 32 * (1 + rnd() % 3);
                if (e1 > k) e1 = k;
                llmk_kernels()->act_quant[LLMK_ACT_A16](x, k, e0, e1, q2);
                e0 = e1;
            }
            CHECK(memcmp(q1, q2, rb) == 0);
            const int16_t *q = (const int16_t *)q1;
            const float *d = (const float *)(q1 + k * 2), *s = d + nb;
            int ok = 1;
            for (int64_t b = 0; b < nb; b++) {
                float amax = 0;
                int32_t sum = 0;
                for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[b * 32 + j]));
                if (d[b] != amax / 32767.0f) ok = 0;
                for (int j = 0; j < 32; j++) {
                    double err = fabs((double)x[b * 32 + j] - (double)q[b * 32 + j] * d[b]);
                    /* half a step, plus the rounding of x / d and of d itself
                     * (absolute 2^-150 when d is subnormal, times |q| <= 32767) */
                    if (err > 0.5 * d[b] * (1 + 1e-5) + 1e-6 * amax + 32768 * 0x1p-150) ok = 0;
                    if (q[b * 32 + j] < -32767) ok = 0;
                    sum += q[b * 32 + j];
                }
                if (amax == 0 && (d[b] != 0 || s[b] != 0)) ok = 0;
                if (s[b] != d[b] * (float)sum) ok = 0;
            }
            CHECK(ok);
        }
        free(x), free(q1), free(q2);
    }
    /* an all-zero block: d = 0, s = 0, q = 0 */
    float z[32] = {0};
    unsigned char q[80];
    memset(q, 0xff, sizeof q);
    llmk_kernels()->act_quant[LLMK_ACT_A16](z, 32, 0, 32, q);
    int allz = 1;
    for (size_t i = 0; i < sizeof q; i++) allz &= q[i] == 0;
    CHECK(allz);
}

/* The AVX2 quantizer writes the same bytes as the reference, including NaN
 * and infinite inputs, subnormal block maxima (the divide path), signed
 * zeros and partial ranges. */
static void test_quantize_avx2(int have_avx2) {
#if defined(__x86_64__)
    if (!have_avx2) return;
    static const float special[] = {0.0f, -0.0f, NAN, INFINITY, -INFINITY, 1e-45f, 1e-40f, 3e-39f, 1e38f, -3e38f,
                                    0.5f, -0.5f, 1.5f, 2.5f, 32767.0f};
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        int64_t k = ks[ki];
        size_t rb = llmk_a16_row_bytes(k);
        float *x = malloc((size_t)k * sizeof *x);
        unsigned char *q1 = malloc(rb), *q2 = malloc(rb);
        for (int rep = 0; rep < 40; rep++) {
            fill_x(x, k, rep % 2, 40.0f);
            if (rep % 4 == 3)
                for (int64_t j = 0; j < k; j++)
                    if (rnd() % 5 == 0) x[j] = special[rnd() % (sizeof special / sizeof special[0])];
            if (rep % 8 == 5) /* a block whose maximum is subnormal: 1 / d overflows */
                for (int j = 0; j < 32; j++) x[j] = (float)(j - 16) * 1e-41f;
            int64_t e0 = 32 * (int64_t)(rnd() % (uint32_t)(k / 32)), e1 = k;
            memset(q1, 0x5a, rb), memset(q2, 0x5a, rb);
            int r1 = llmk_a16_quantize_row_ref(x, k, e0, e1, q1);
            CHECK_EQ_INT(llmk_a16_quantize_row_avx2(x, k, e0, e1, q2), r1);
            CHECK(memcmp(q1, q2, rb) == 0);
            if (llmk_cpu_detect() & LLMK_CPU_AVX512) {
                memset(q2, 0x5a, rb);
                CHECK_EQ_INT(llmk_a16_quantize_row_avx512(x, k, e0, e1, q2), r1);
                CHECK(memcmp(q1, q2, rb) == 0);
            }
        }
        free(x), free(q1), free(q2);
    }
#else
    (void)have_avx2;
#endif
}

/* The quantizers' report of non-finite input, for every variant this CPU
 * runs: a block holding a NaN (either sign), +inf or -inf is reported, and
 * its d is not finite; the largest finite magnitudes are not reported and
 * quantize as before; blocks outside [e0, e1) are neither read for the report
 * nor written; the variants agree on the result and on the bytes. */
typedef int (*a16_quant_fn)(const float *x, int64_t k, int64_t e0, int64_t e1, void *dst);

static void test_nonfinite(int have_avx2) {
    a16_quant_fn fns[3] = {llmk_a16_quantize_row_ref, NULL, NULL};
    int nfn = 1;
#if defined(__x86_64__)
    if (have_avx2) fns[nfn++] = llmk_a16_quantize_row_avx2;
    if (llmk_cpu_detect() & LLMK_CPU_AVX512) fns[nfn++] = llmk_a16_quantize_row_avx512;
#else
    (void)have_avx2;
#endif
    enum { K = 128, NB = K / 32 };
    static const float bad[] = {NAN, -NAN, INFINITY, -INFINITY};
    static const float edge[] = {FLT_MAX, -FLT_MAX, 3e38f, 0x1p-149f}; /* finite: largest, smallest */
    float x[K];
    unsigned char q[3][NB * 80], clean[NB * 80];
    for (int rep = 0; rep < 64; rep++) {
        fill_x(x, K, rep % 2, 40.0f);
        int blk = rep % NB, j = (int)(rnd() % 32);
        llmk_a16_quantize_row_ref(x, K, 0, K, clean);
        float v = rep < 32 ? bad[rep % 4] : edge[rep % 4];
        x[blk * 32 + j] = v;
        int want = rep < 32;
        for (int f = 0; f < nfn; f++) {
            memset(q[f], 0x5a, sizeof q[f]);
            CHECK_EQ_INT(fns[f](x, K, 0, K, q[f]) != 0, want);
            float d;
            memcpy(&d, q[f] + K * 2 + blk * 4, sizeof d);
            CHECK(isfinite(d) == !want);
            /* the other blocks, alone: unreported, the clean bytes */
            int64_t e0 = blk == 0 ? 32 : 0, e1 = blk == 0 ? K : 32 * blk;
            memset(q[f], 0x5a, sizeof q[f]);
            CHECK_EQ_INT(fns[f](x, K, e0, e1, q[f]), 0);
            CHECK(memcmp(q[f] + e0 * 2, clean + e0 * 2, (size_t)(e1 - e0) * 2) == 0);
            /* the block alone */
            CHECK_EQ_INT(fns[f](x, K, blk * 32, blk * 32 + 32, q[f]) != 0, want);
        }
        for (int f = 1; f < nfn; f++) {
            fns[0](x, K, 0, K, q[0]), fns[f](x, K, 0, K, q[f]);
            CHECK(memcmp(q[0], q[f], sizeof q[0]) == 0);
        }
    }
    /* every element of a block non-finite, and an all-zero row */
    for (int i = 0; i < K; i++) x[i] = i < 32 ? NAN : 0.0f;
    for (int f = 0; f < nfn; f++) CHECK(fns[f](x, K, 0, K, q[f]) != 0 && fns[f](x, K, 32, K, q[f]) == 0);
}

typedef void (*mk_fn)(unsigned char *w, int64_t nb, int extreme);

struct wtype {
    const char *name;
    uint32_t type;
    size_t bs;
    mk_fn fill;
    double worst_rel; /* worst |y - f64 dot| / sum |w x| seen by the accuracy checks */
};

/* The repacked kernels this CPU runs (AVX2; AVX-512 VNNI where present):
 * each must give the reference's bits. */
static llmk_gemm_r8_a16_fn kernels[2];
static unsigned kernel_forms[2]; /* the record forms each reads (r8.h): every one is checked */
static int n_kernels;
static int compact_checked;      /* kernel checks on a compact form (Q4K, Q8K) */

static void test_dots(struct wtype *t, int have_avx2, float outlier) {
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        int64_t k = ks[ki], nb = k / 32;
        for (int extreme = 0; extreme < 2; extreme++) {
            /* up to 17 groups: one activation row reads them as 4 streams of uneven length */
            /* and up to 33 groups: a few activation rows read pair tables over 16 or more */
            /* and now and then more than 4 tiles of 8 rows (a compact form's prefill walk) */
            int64_t nrows = 1 + rnd() % 263, m = rnd() % 8 ? 1 + rnd() % 9 : 33 + rnd() % 8;
            if (k % (int64_t)llmk_type_block_elems(t->type)) continue; /* rows of whole blocks only */
            size_t ws = (size_t)(k / (int64_t)llmk_type_block_elems(t->type)) * t->bs, rb = llmk_a16_row_bytes(k), as = rb + 8 * (rnd() % 3);
            unsigned char *w = malloc(ws * (size_t)nrows), *a = malloc(as * (size_t)m);
            float *x = malloc((size_t)k * m * sizeof *x);
            float *y_ref = malloc((size_t)nrows * m * sizeof(float)), *y_fast = malloc((size_t)nrows * m * sizeof(float));
            float *y_1 = malloc((size_t)nrows * m * sizeof(float));
            for (int64_t r = 0; r < nrows; r++) t->fill(w + r * ws, nb, extreme);
            for (int64_t i = 0; i < m; i++) {
                fill_x(x + i * k, k, extreme, outlier);
                llmk_kernels()->act_quant[LLMK_ACT_A16](x + i * k, k, 0, k, a + i * as);
            }
            llmk_r8_ref(t->type, k, w, ws, 0, nrows, a, as, m, y_ref, (size_t)nrows);
            /* one weight row and one activation row at a time: the same bits */
            for (int64_t i = 0; i < m; i++)
                for (int64_t r = 0; r < nrows; r++)
                    llmk_r8_ref(t->type, k, w, ws, r, r + 1, a + i * as, as, 1, y_1 + i * nrows, (size_t)nrows);
            CHECK(bits_equal(y_ref, y_1, nrows * m));
            for (int kf = 0; have_avx2 && kf < 2 * n_kernels; kf++) {
                int kn = kf / 2;
                unsigned forms = kf % 2 ? kernel_forms[kn] : 0;
                if (kf % 2 && llmk_r8_form(t->type, forms) == llmk_r8_layout(t->type)) continue; /* no other form */
                llmk_gemm_r8_a16_fn kern = kernels[kn];
                llmk_tensor_info ti;
                memset(&ti, 0, sizeof ti);
                ti.name = "w", ti.type = t->type, ti.ne[0] = (uint64_t)k, ti.ne[1] = (uint64_t)nrows, ti.data = w;
                ti.n_bytes = ws * (size_t)nrows;
                struct llmk_r8 rw;
                CHECK_EQ_INT(llmk_r8_repack(&ti, forms, &rw), LLMK_OK);
                compact_checked += llmk_r8_compact(rw.layout);
                size_t sb = llmk_r8_scratch_bytes(k, m);
                void *scratch = sb ? aligned_alloc(32, (sb + 31) / 32 * 32) : NULL;
                kern(&rw, 0, nrows, a, as, m, y_fast, (size_t)nrows, scratch, sb);
                CHECK(bits_equal(y_ref, y_fast, nrows * m));
                /* without scratch (no tables): the same bits */
                memset(y_fast, 0, (size_t)nrows * m * sizeof(float));
                kern(&rw, 0, nrows, a, as, m, y_fast, (size_t)nrows, NULL, 0);
                CHECK(bits_equal(y_ref, y_fast, nrows * m));
                free(scratch);
                /* an 8-aligned sub-range, activation rows one at a time, with tables */
                sb = llmk_r8_scratch_bytes(k, 1);
                scratch = aligned_alloc(32, (sb + 31) / 32 * 32);
                int64_t r0 = 8 * (int64_t)(rnd() % (uint32_t)((nrows + 7) / 8)), r1 = r0 + 1 + rnd() % (nrows - r0);
                memset(y_fast, 0, (size_t)nrows * m * sizeof(float));
                for (int64_t i = 0; i < m; i++) kern(&rw, r0, r1, a + i * as, as, 1, y_fast + i * nrows, 0, scratch, sb);
                free(scratch);
                int ok = 1;
                for (int64_t i = 0; i < m; i++)
                    for (int64_t r = 0; r < nrows; r++) {
                        float want = r >= r0 && r < r1 ? y_ref[i * nrows + r] : 0.0f;
                        ok &= memcmp(&want, &y_fast[i * nrows + r], sizeof want) == 0;
                    }
                CHECK(ok);
                llmk_r8_free(&rw);
            }
            if (!extreme) {
                /* accuracy against f64 of the dequantized weights and the f32
                 * inputs: within the activation rounding bound sum |w| d / 2
                 * (+ f32 accumulation), and the relative error recorded */
                const struct llmk_codec *c = llmk_codec_get(t->type);
                float *wf = malloc((size_t)k * sizeof *wf);
                int ok = 1;
                for (int64_t r = 0; r < nrows; r++) {
                    c->dequantize(w + r * ws, wf, k);
                    for (int64_t i = 0; i < m; i++) {
                        const float *da = (const float *)(a + i * as + k * 2);
                        double dot = 0, mag = 0, bound = 0;
                        for (int64_t j = 0; j < k; j++) {
                            dot += (double)wf[j] * x[i * k + j], mag += fabs((double)wf[j] * x[i * k + j]);
                            bound += fabs((double)wf[j]) * da[j / 32] * 0.5;
                        }
                        double err = fabs(y_ref[i * nrows + r] - dot);
                        if (err > bound * (1 + 1e-4) + 1e-5 * mag) ok = 0;
                        double rel = mag > 0 ? err / mag : 0;
                        if (rel > t->worst_rel) t->worst_rel = rel;
                    }
                }
                CHECK(ok);
                free(wf);
            }
            free(w), free(a), free(x), free(y_ref), free(y_fast), free(y_1);
        }
    }
}

/* Exact small case: Q4_1 with d = 1, m = 0 and activations that quantize
 * exactly (amax 32767): the dot is the integer sum. */
static void test_exact(void) {
    llmk_block_q4_1 blk = {f16_of(1.0f), f16_of(0.5f), {0}};
    float x[32];
    for (int j = 0; j < 16; j++) blk.qs[j] = (uint8_t)(j | (15 - j) << 4);
    for (int j = 0; j < 32; j++) x[j] = (float)(j - 16) * 1000.0f;
    x[0] = -32767.0f;
    unsigned char a[80];
    llmk_kernels()->act_quant[LLMK_ACT_A16](x, 32, 0, 32, a);
    double want = 0;
    for (int j = 0; j < 32; j++) want += ((j < 16 ? j : 31 - j) + 0.5) * x[j];
    float y;
    llmk_r8_ref(LLMK_TYPE_Q4_1, 32, &blk, sizeof blk, 0, 1, a, sizeof a, 1, &y, 1);
    CHECK_EQ_DBL(y, want);
}

/* The largest integer block sums the kernels can meet: every Q4_1 nibble
 * 15 (or Q8_0 byte -128) against activations all at +-32767. The AVX-512
 * kernel sums the upper nibbles scaled by 256 (r8_avx512.c), which fits int32
 * with little to spare: the kernels must still give the reference's bits. */
static void test_largest_sums(void) {
    enum { K = 64, N = 24, M = 2 };
    size_t as = llmk_a16_row_bytes(K);
    unsigned char a[M * 80 * (K / 32)];
    float x[M * K];
    for (int j = 0; j < K; j++) x[j] = 1.0f, x[K + j] = -3.0f;
    for (int i = 0; i < M; i++) llmk_kernels()->act_quant[LLMK_ACT_A16](x + i * K, K, 0, K, a + i * as);
    for (int q8 = 0; q8 < 2; q8++) {
        size_t bs = q8 ? sizeof(llmk_block_q8_0) : sizeof(llmk_block_q4_1), ws = bs * (K / 32);
        unsigned char w[N * sizeof(llmk_block_q8_0) * (K / 32)];
        for (int r = 0; r < N; r++)
            for (int b = 0; b < K / 32; b++) {
                unsigned char *blk = w + r * ws + b * bs;
                if (q8) {
                    llmk_block_q8_0 q = {f16_of(1.0f), {0}};
                    memset(q.qs, 0x80, sizeof q.qs);
                    memcpy(blk, &q, sizeof q);
                } else {
                    llmk_block_q4_1 q = {f16_of(1.0f), f16_of(0.0f), {0}};
                    memset(q.qs, 0xff, sizeof q.qs);
                    memcpy(blk, &q, sizeof q);
                }
            }
        float y_ref[M * N], y_k[M * N];
        llmk_r8_ref(q8 ? LLMK_TYPE_Q8_0 : LLMK_TYPE_Q4_1, K, w, ws, 0, N, a, as, M, y_ref, N);
        CHECK(fabs(y_ref[0] - (q8 ? -128.0 : 15.0) * K) < 1e-3 * 128 * K);
        for (int kn = 0; kn < n_kernels; kn++) {
            llmk_tensor_info ti;
            memset(&ti, 0, sizeof ti);
            ti.name = "w", ti.type = q8 ? LLMK_TYPE_Q8_0 : LLMK_TYPE_Q4_1, ti.ne[0] = K, ti.ne[1] = N, ti.data = w;
            ti.n_bytes = ws * N;
            struct llmk_r8 rw;
            CHECK_EQ_INT(llmk_r8_repack(&ti, 0, &rw), LLMK_OK);
            _Alignas(32) unsigned char scratch[M * (K / 2) * 32];
            kernels[kn](&rw, 0, N, a, as, M, y_k, N, scratch, sizeof scratch);
            CHECK(bits_equal(y_ref, y_k, M * N));
            for (int i = 0; i < M; i++) kernels[kn](&rw, 0, N, a + i * as, as, 1, y_k + i * N, 0, scratch, sizeof scratch);
            CHECK(bits_equal(y_ref, y_k, M * N));
            llmk_r8_free(&rw);
        }
    }
}

int main(void) {
    int have_avx2 = (llmk_cpu_detect() & LLMK_CPU_AVX2) != 0;
    if (!have_avx2) fprintf(stderr, "test_a16: no AVX2, reference only\n");
    test_quantize();
    test_quantize_avx2(have_avx2);
    test_nonfinite(have_avx2);
    test_exact();
    /* Q4_0 shares Q4_1's record layout, Q5_0 and IQ4_NL Q8_0's, Q5_1 is a Q8S (r8.h) */
    struct wtype types[] = {
        {"q4_1", LLMK_TYPE_Q4_1, sizeof(llmk_block_q4_1), fill_q4_1, 0},
        {"q8_0", LLMK_TYPE_Q8_0, sizeof(llmk_block_q8_0), fill_q8_0, 0},
        {"q4_0", LLMK_TYPE_Q4_0, sizeof(llmk_block_q4_0), fill_q4_0, 0},
        {"q5_0", LLMK_TYPE_Q5_0, sizeof(llmk_block_q5_0), fill_q5_0, 0},
        {"iq4_nl", LLMK_TYPE_IQ4_NL, sizeof(llmk_block_iq4_nl), fill_iq4_nl, 0},
        /* the Q8S record: f32 scales per 16, an f32 offset */
        {"q5_1", LLMK_TYPE_Q5_1, sizeof(llmk_block_q5_1), fill_q5_1, 0},
        {"q2_k", LLMK_TYPE_Q2_K, sizeof(llmk_block_q2_k), fill_q2_k, 0}, /* Q8S2 */
        {"q3_k", LLMK_TYPE_Q3_K, sizeof(llmk_block_q3_k), fill_q3_k, 0},
        {"q4_k", LLMK_TYPE_Q4_K, sizeof(llmk_block_q4_k), fill_q4_k, 0},
        {"q5_k", LLMK_TYPE_Q5_K, sizeof(llmk_block_q5_k), fill_q5_k, 0},
        {"q6_k", LLMK_TYPE_Q6_K, sizeof(llmk_block_q6_k), fill_q6_k, 0},
        {"iq4_xs", LLMK_TYPE_IQ4_XS, sizeof(llmk_block_iq4_xs), fill_iq4_xs, 0},
        {"mxfp4", LLMK_TYPE_MXFP4, sizeof(llmk_block_mxfp4), fill_mxfp4, 0},
    };
    enum { NT = sizeof types / sizeof types[0] };
#if !defined(__x86_64__)
    have_avx2 = 0;
#else
    kernels[n_kernels++] = llmk_gemm_r8_a16_avx2;
    if (llmk_cpu_detect() & LLMK_CPU_AVX512_VNNI)
        kernel_forms[n_kernels] = LLMK_R8_COMPACT, kernels[n_kernels++] = llmk_gemm_r8_a16_avx512;
    else fprintf(stderr, "test_a16: no AVX-512 VNNI, its r8 kernel not tested here\n");
#endif
    if (have_avx2) test_largest_sums();
    for (int t = 0; t < NT; t++) CHECK(llmk_a16_supports(types[t].type));
    CHECK_EQ_INT(llmk_kernels()->gemm_rows_a16 == llmk_r8_ref, 1);
    /* blocks with 40x outliers (coarse steps for the other elements) */
    for (int rep = 0; rep < 8; rep++)
        for (int t = 0; t < NT; t++) test_dots(&types[t], have_avx2, 40.0f);
    fprintf(stderr, "test_a16: 40x outliers: worst relative error");
    for (int t = 0; t < NT; t++) fprintf(stderr, " %s %.2g", types[t].name, types[t].worst_rel), types[t].worst_rel = 0;
    /* milder data (4x outliers): the relative error stays below 1e-4 */
    for (int rep = 0; rep < 8; rep++)
        for (int t = 0; t < NT; t++) test_dots(&types[t], have_avx2, 4.0f);
    fprintf(stderr, "\ntest_a16: 4x outliers: worst relative error");
    for (int t = 0; t < NT; t++) {
        fprintf(stderr, " %s %.2g", types[t].name, types[t].worst_rel);
        CHECK(types[t].worst_rel < 1e-4);
    }
    fprintf(stderr, "\n");
    if (n_kernels > 1) CHECK(compact_checked > 0); /* Q4_K, Q6_K, Q3_K and IQ4_XS in Q4K and Q8K records */
    return check_summary("a16");
}
