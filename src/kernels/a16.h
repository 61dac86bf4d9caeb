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
 *   float h[2 nb]   h[2b + i] = d * (float)sum(q of the block's 16-element
 *                   half i)  (Q2_K's mins, one per 16 weights)
 * (llmk_a16_row_bytes(k) = 80 * nb bytes; q, d, s, h are each 4-byte aligned
 * when the row is.) q = round-to-nearest-even(x * (1 / d)), clamped to
 * [-32767, 32767].
 *
 * The products with Q4_1 / Q8_0 weights are in r8.h (weights repacked 8 rows
 * at a time for AVX2; a scalar reference on the GGUF rows). */
#ifndef LLMK_KERNELS_A16_H
#define LLMK_KERNELS_A16_H

#include <stddef.h>
#include <stdint.h>

/* Bytes of one activation row of k elements (k a multiple of 32). */
size_t llmk_a16_row_bytes(int64_t k);

/* The parts of the activation row at row (k elements), as laid out above. */
struct llmk_a16_row {
    int16_t *q;
    float *d, *s, *h;
};
static inline struct llmk_a16_row llmk_a16_row_at(void *row, int64_t k) {
    int64_t nb = k / 32;
    float *d = (float *)(void *)((unsigned char *)row + (size_t)k * 2);
    return (struct llmk_a16_row){(int16_t *)row, d, d + nb, d + 2 * nb};
}

/* Quantize elements [e0, e1) of the row x (k elements; e0, e1 multiples of
 * 32) into the activation row dst (the row's start, llmk_a16_row_bytes(k)),
 * writing only those blocks: any split of a row gives the same bytes.
 * Returns nonzero when one of those elements is NaN or infinite: the block's
 * amax is then that NaN or infinity, so its d and s are too (the bytes are
 * meaningless, and the caller is to fail rather than use them). */
/* The scalar reference and the SIMD versions give the same bytes and result
 * (the kernel table's act_quant[LLMK_ACT_A16] is the one in use). */
int llmk_a16_quantize_row_ref(const float *x, int64_t k, int64_t e0, int64_t e1, void *dst);
int llmk_a16_quantize_row_avx2(const float *x, int64_t k, int64_t e0, int64_t e1, void *dst);
/* The same with AVX-512 F/BW (llmk_cpu_detect() reports LLMK_CPU_AVX512). */
int llmk_a16_quantize_row_avx512(const float *x, int64_t k, int64_t e0, int64_t e1, void *dst);

/* Whether a weight type has A16 kernels: the types r8.h repacks. */
int llmk_a16_supports(uint32_t wtype);

#endif
