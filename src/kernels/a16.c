/* 16-bit activations: quantization, scalar reference dots and the dispatcher
 * (see a16.h for the layout and the shared arithmetic). */
#include "kernels/a16.h"

#include "codec/blocks.h"
#include "codec/half.h"
#include "internal.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

size_t llmk_a16_row_bytes(int64_t k) { return (size_t)(k / LLMK_QK) * (LLMK_QK * 2 + 8); }

/* x rounded to nearest, ties to even, for |x| < 2^22: adding 1.5 * 2^23
 * leaves only the integer part in the mantissa (the build never enables
 * -ffast-math, which could fold the two operations away). */
static inline float round_even(float x) { return (x + 12582912.0f) - 12582912.0f; }

void llmk_a16_quantize_row(const float *x, int64_t k, int64_t e0, int64_t e1, void *dst) {
    int64_t nb = k / LLMK_QK;
    unsigned char *row = dst;
    int16_t *q = (int16_t *)row;
    float *dd = (float *)(row + (size_t)k * 2), *ss = dd + nb;
    for (int64_t b = e0 / LLMK_QK; b < e1 / LLMK_QK; b++) {
        const float *xb = x + b * LLMK_QK;
        int16_t *qb = q + b * LLMK_QK;
        float amax = 0;
        for (int j = 0; j < LLMK_QK; j++) amax = fmaxf(amax, fabsf(xb[j]));
        float d = amax / 32767.0f, id = d == 0 ? 0.0f : 1.0f / d;
        bool tiny = id > FLT_MAX; /* d below 2^-128: 1 / d overflows, divide instead */
        int32_t sum = 0;
        for (int j = 0; j < LLMK_QK; j++) {
            float v = round_even(tiny ? xb[j] / d : xb[j] * id);
            v = v > 32767.0f ? 32767.0f : v < -32767.0f ? -32767.0f : v;
            qb[j] = v == v ? (int16_t)v : 0; /* NaN input: 0 rather than an undefined conversion */
            sum += qb[j];
        }
        dd[b] = d;
        ss[b] = d * (float)sum; /* |sum| <= 32 * 32767 < 2^24: exact */
    }
}

/* Per-block weight data: the exact integer sum with an activation block,
 * the weight scale and (Q4_1) min. */
static inline int32_t isum_q4_1(const llmk_block_q4_1 *wb, const int16_t *qa) {
    int32_t s = 0;
    for (int j = 0; j < LLMK_QK / 2; j++)
        s += (int32_t)(wb->qs[j] & 0x0f) * qa[j] + (int32_t)(wb->qs[j] >> 4) * qa[j + LLMK_QK / 2];
    return s;
}
static inline int32_t isum_q8_0(const llmk_block_q8_0 *wb, const int16_t *qa) {
    int32_t s = 0;
    for (int j = 0; j < LLMK_QK; j++) s += (int32_t)wb->qs[j] * qa[j];
    return s;
}

static inline float lanes_sum(const float v[8]) {
    return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
}

static float dot_q4_1_row(int64_t k, const unsigned char *w, const unsigned char *a) {
    int64_t nb = k / LLMK_QK, ng = (nb + 7) / 8;
    const int16_t *q = (const int16_t *)a;
    const float *da = (const float *)(a + (size_t)k * 2), *sa = da + nb;
    float acc[8] = {0}, mac[8] = {0};
    for (int64_t g = 0; g < ng; g++)
        for (int l = 0; l < 8; l++) {
            int64_t b = g * 8 + l;
            float f = 0, p = 0, mw = 0, s = 0;
            if (b < nb) {
                llmk_block_q4_1 wb;
                memcpy(&wb, w + (size_t)b * sizeof wb, sizeof wb);
                f = (float)isum_q4_1(&wb, q + b * LLMK_QK);
                p = llmk_fp16_to_fp32(wb.d) * da[b];
                mw = llmk_fp16_to_fp32(wb.m), s = sa[b];
            }
            acc[l] = fmaf(f, p, acc[l]);
            mac[l] = fmaf(mw, s, mac[l]);
        }
    float v[8];
    for (int l = 0; l < 8; l++) v[l] = acc[l] + mac[l];
    return lanes_sum(v);
}

static float dot_q8_0_row(int64_t k, const unsigned char *w, const unsigned char *a) {
    int64_t nb = k / LLMK_QK, ng = (nb + 7) / 8;
    const int16_t *q = (const int16_t *)a;
    const float *da = (const float *)(a + (size_t)k * 2);
    float acc[8] = {0};
    for (int64_t g = 0; g < ng; g++)
        for (int l = 0; l < 8; l++) {
            int64_t b = g * 8 + l;
            float f = 0, p = 0;
            if (b < nb) {
                llmk_block_q8_0 wb;
                memcpy(&wb, w + (size_t)b * sizeof wb, sizeof wb);
                f = (float)isum_q8_0(&wb, q + b * LLMK_QK);
                p = llmk_fp16_to_fp32(wb.d) * da[b];
            }
            acc[l] = fmaf(f, p, acc[l]);
        }
    return lanes_sum(acc);
}

void llmk_a16_dot_q4_1_ref(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    for (int64_t r = 0; r < nrows; r++) y[r] = dot_q4_1_row(k, (const unsigned char *)w + (size_t)r * ws, a);
}
void llmk_a16_dot_q8_0_ref(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    for (int64_t r = 0; r < nrows; r++) y[r] = dot_q8_0_row(k, (const unsigned char *)w + (size_t)r * ws, a);
}
void llmk_a16_dotm_q4_1_ref(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, size_t as,
                            int64_t m, float *y, size_t ys) {
    for (int64_t i = 0; i < m; i++)
        llmk_a16_dot_q4_1_ref(k, w, ws, nrows, (const unsigned char *)a + (size_t)i * as, y + (size_t)i * ys);
}
void llmk_a16_dotm_q8_0_ref(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, size_t as,
                            int64_t m, float *y, size_t ys) {
    for (int64_t i = 0; i < m; i++)
        llmk_a16_dot_q8_0_ref(k, w, ws, nrows, (const unsigned char *)a + (size_t)i * as, y + (size_t)i * ys);
}

/* ---- dispatch ------------------------------------------------------------- */

static const struct llmk_a16_kernels k_ref = {"a16_ref", llmk_a16_dot_q4_1_ref, llmk_a16_dot_q8_0_ref,
                                              llmk_a16_dotm_q4_1_ref, llmk_a16_dotm_q8_0_ref};
#if defined(__x86_64__) || defined(__i386__)
static const struct llmk_a16_kernels k_avx2 = {"a16_avx2", llmk_a16_dot_q4_1_avx2, llmk_a16_dot_q8_0_avx2,
                                               llmk_a16_dotm_q4_1_avx2, llmk_a16_dotm_q8_0_avx2};
#endif

const struct llmk_a16_kernels *llmk_a16_kernels_ref(void) { return &k_ref; }

static const struct llmk_a16_kernels *chosen = &k_ref;
static pthread_once_t choose_once = PTHREAD_ONCE_INIT;

static void choose(void) {
#if defined(__x86_64__) || defined(__i386__)
    const char *e = getenv("LLMK_KERNELS");
    if ((llmk_cpu_detect() & LLMK_CPU_AVX2) && !(e && strcmp(e, "ref") == 0)) chosen = &k_avx2;
#endif
}

const struct llmk_a16_kernels *llmk_a16_kernels(void) {
    pthread_once(&choose_once, choose);
    return chosen;
}

int llmk_a16_supports(uint32_t wtype) { return wtype == LLMK_TYPE_Q4_1 || wtype == LLMK_TYPE_Q8_0; }
