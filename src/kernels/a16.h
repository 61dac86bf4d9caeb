/* 16-bit activations ("A16") for Q4_1 and Q8_0 weights.
 *
 * 8-bit activations (Q8_0/Q8_1) cost the default model KL ~3e-3 against the
 * f32 path; int16 activations cut the activation error by ~256x for about
 * the same integer work per weight (one madd per 16 products).
 *
 * Activation row of k elements (k whole blocks of 32), nb = k / 32:
 *   int16 q[k]      element i = d[i / 32] * q[i]
 *   float d[nb]     d = amax / 32767 of the block (0 for an all-zero block)
 *   float s[nb]     s = d * (float)sum(q of the block)  (Q4_1's min term)
 * (llmk_a16_row_bytes(k) = 72 * nb bytes; q, d, s are each 4-byte aligned
 * when the row is.) q = round-to-nearest-even(x * (1 / d)), clamped to
 * [-32767, 32767].
 *
 * Dot of one weight row with one activation row, the arithmetic the scalar
 * reference and the AVX2 kernels share bit for bit:
 *   per block b: i_b = sum_j qw_j * qa_j exactly in int32 (|15*32767*32| and
 *   |128*32767*32| < 2^31); f_b = (float)i_b rounded to nearest even (Q8_0
 *   sums can exceed 2^24); p_b = dw_b * da_b (f32 multiply);
 *   lane l = b % 8 of acc: acc_l = fmaf(f_b, p_b, acc_l), and for Q4_1 also
 *   mac_l = fmaf(mw_b, sa_b, mac_l); blocks past the row end in the last
 *   group of 8 are computed as zeros (f = p = mw = sa = 0).
 *   Q4_1: v_l = acc_l + mac_l; Q8_0: v_l = acc_l;
 *   y = ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)).
 * So each output depends only on its own weight row and activation row,
 * never on how many rows are computed together or by which thread. */
#ifndef LLMK_KERNELS_A16_H
#define LLMK_KERNELS_A16_H

#include "codec/codec.h"
#include "kernels/matmul.h"

#include <stddef.h>
#include <stdint.h>

/* Bytes of one activation row of k elements (k a multiple of 32). */
size_t llmk_a16_row_bytes(int64_t k);

/* Quantize elements [e0, e1) of the row x (k elements; e0, e1 multiples of
 * 32) into the activation row dst (the row's start, llmk_a16_row_bytes(k)),
 * writing only those blocks: any split of a row gives the same bytes. */
void llmk_a16_quantize_row(const float *x, int64_t k, int64_t e0, int64_t e1, void *dst);

/* Scalar references (llmk_dot_fn / llmk_dotm_fn shapes; k elements per row,
 * weight rows w_stride bytes apart, activation rows a_stride bytes apart). */
void llmk_a16_dot_q4_1_ref(int64_t k, const void *w, size_t w_stride, int64_t nrows, const void *a, float *y);
void llmk_a16_dot_q8_0_ref(int64_t k, const void *w, size_t w_stride, int64_t nrows, const void *a, float *y);
void llmk_a16_dotm_q4_1_ref(int64_t k, const void *w, size_t w_stride, int64_t nrows, const void *a,
                            size_t a_stride, int64_t m, float *y, size_t y_stride);
void llmk_a16_dotm_q8_0_ref(int64_t k, const void *w, size_t w_stride, int64_t nrows, const void *a,
                            size_t a_stride, int64_t m, float *y, size_t y_stride);

/* AVX2 + FMA + F16C kernels (src/kernels/a16_avx2.c); call only when
 * llmk_cpu_detect() reports LLMK_CPU_AVX2. The dotm kernels unpack each
 * weight block once for up to 4 activation rows. */
void llmk_a16_dot_q4_1_avx2(int64_t k, const void *w, size_t w_stride, int64_t nrows, const void *a, float *y);
void llmk_a16_dot_q8_0_avx2(int64_t k, const void *w, size_t w_stride, int64_t nrows, const void *a, float *y);
void llmk_a16_dotm_q4_1_avx2(int64_t k, const void *w, size_t w_stride, int64_t nrows, const void *a,
                             size_t a_stride, int64_t m, float *y, size_t y_stride);
void llmk_a16_dotm_q8_0_avx2(int64_t k, const void *w, size_t w_stride, int64_t nrows, const void *a,
                             size_t a_stride, int64_t m, float *y, size_t y_stride);

struct llmk_a16_kernels {
    const char *name; /* "a16_avx2" or "a16_ref" */
    llmk_dot_fn dot_q4_1, dot_q8_0;
    llmk_dotm_fn dotm_q4_1, dotm_q8_0;
};

/* The kernels for this CPU (AVX2 when llmk_cpu_detect() has it, unless
 * LLMK_KERNELS=ref), chosen once; llmk_a16_kernels_ref() is the scalar set. */
const struct llmk_a16_kernels *llmk_a16_kernels(void);
const struct llmk_a16_kernels *llmk_a16_kernels_ref(void);
/* Whether a weight type has A16 kernels (Q4_1, Q8_0). */
int llmk_a16_supports(uint32_t wtype);

#endif
