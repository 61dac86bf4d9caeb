/* 8-bit activations ("A8") for the r8 kernels: llama.cpp's activation
 * precision (one int8 and one f32 scale a 32-element block), with the
 * integer products at twice A16's rate on AVX2: vpmaddubsw multiplies 32
 * byte pairs where vpmaddwd multiplies 16 int16 pairs, and on Zen 1 both
 * issue on the one integer-multiply pipe, which bounds prefill and batched
 * decode (docs/batching.md). A16 (a16.h) stays the default for its ~256x
 * smaller activation error; this form is the opt-in mode LLMK_ACT=a8.
 *
 * Activation row of k elements (k whole blocks of 32), nb = k / 32:
 *   int8 q[k]    block b's element 8g + P[i] at byte 32 b + 8 g + i, with
 *                P = {0, 4, 1, 5, 2, 6, 3, 7}: the order in which the
 *                kernel's unpacked Q4_1 records hold their weights (r8.h)
 *   float d[nb]  d = amax / 127 of the block (0 for an all-zero block)
 *   float s[nb]  s = d * (float)sum(q of the block)  (Q4_1's min term)
 *   int16 h[2nb] h[2b + i] = sum(q of elements 16 i .. 16 i + 15 of block
 *                b), the VNNI kernel's correction for unsigned int8
 *                weights (w + 128)
 * (llmk_a8_row_bytes(k) = 44 * nb bytes.) q = round-to-nearest-even(x *
 * (1 / d)), clamped to [-127, 127].
 *
 * Products: r8.h's arithmetic for the weights' record form (Q4_1 for Q4_0
 * and Q4_1, Q4S for Q4_K, Q8_0 for Q5_0, Q8_0 and IQ4_NL, Q8S for Q5_1, Q3_K,
 * Q5_K, Q6_K and IQ4_XS)
 * with 8-bit qa: exact int32 block (or half-block) sums, then the same
 * fmaf steps with the same scales, so neither the walk nor the ISA changes
 * a bit. */
#ifndef LLMK_KERNELS_A8_H
#define LLMK_KERNELS_A8_H

#include "kernels/r8.h"

#include <stddef.h>
#include <stdint.h>

/* Bytes of one activation row of k elements (k a multiple of 32). */
size_t llmk_a8_row_bytes(int64_t k);

/* The parts of the activation row at row (k elements), as laid out above. */
struct llmk_a8_row {
    int8_t *q;
    float *d, *s;
    int16_t *h;
};
static inline struct llmk_a8_row llmk_a8_row_at(void *row, int64_t k) {
    int64_t nb = k / 32;
    float *d = (float *)(void *)((unsigned char *)row + (size_t)k);
    return (struct llmk_a8_row){(int8_t *)row, d, d + nb, (int16_t *)(void *)(d + 2 * nb)};
}

/* Quantize elements [e0, e1) of the row x (k elements; e0, e1 multiples of
 * 32) into the row dst, writing only those blocks; nonzero when one of
 * them is NaN or infinite (llmk_a16_quantize_row_ref's contract). */
int llmk_a8_quantize_row_ref(const float *x, int64_t k, int64_t e0, int64_t e1, void *dst);
/* The same bytes and result with AVX2, and with AVX-512 (F/BW/VL/DQ): the
 * kernel table's act_quant[LLMK_ACT_A8]. */
int llmk_a8_quantize_row_avx2(const float *x, int64_t k, int64_t e0, int64_t e1, void *dst);
int llmk_a8_quantize_row_avx512(const float *x, int64_t k, int64_t e0, int64_t e1, void *dst);

/* Whether weights of this type have A8 products: Q4_0, Q4_1, Q4_K, the
 * int8-record types whose weights stay within +-32 (Q5_0, Q5_1, Q3_K,
 * Q5_K, Q6_K), and Q8_0, IQ4_NL and IQ4_XS, whose sums the AVX2 kernel
 * widens pair by pair. */
int llmk_a8_supports(uint32_t wtype);

/* The products above on the GGUF rows (llmk_r8_ref's arguments), the
 * scalar reference. */
void llmk_r8_a8_ref(uint32_t type, int64_t k, const void *w, size_t w_stride, int64_t r0, int64_t r1, const void *act,
                    size_t a_stride, int64_t m, float *y, size_t y_stride);

/* The same on r8-repacked weights (llmk_gemm_r8_a16_fn's contract; the
 * scratch is unused), AVX2 + FMA; only with LLMK_CPU_AVX2. */
void llmk_gemm_r8_a8_avx2(const struct llmk_r8 *w, int64_t r0, int64_t r1, const void *act, size_t a_stride, int64_t m,
                          float *y, size_t y_stride, void *scratch, size_t scratch_bytes);
/* The same bits with AVX-512 VNNI (vpdpbusd); only with LLMK_CPU_AVX512_VNNI. */
void llmk_gemm_r8_a8_avx512(const struct llmk_r8 *w, int64_t r0, int64_t r1, const void *act, size_t a_stride,
                            int64_t m, float *y, size_t y_stride, void *scratch, size_t scratch_bytes);

#endif
