/* Q4_1 weights in the "x2" layout (block pairs side by side), repacked at
 * executor init for the 8-bit AVX2 route, and the matching activation layout
 * ("q8_1x": the values of GGUF Q8_1 rearranged). The kernel is
 * gemm_q4_1_x2_q8_1x (weight type, layout, activation type: ggml's naming).
 *
 * Weight row (n_blocks of 32): the 16 nibble bytes of blocks 2p and 2p+1 side
 * by side (32 bytes per pair), so one 256-bit load unpacks to elements 0..15
 * of both blocks (low nibbles) and 16..31 of both (high nibbles); the scales
 * d and mins m as f16 in separate arrays, per group of 8 blocks in lane order
 * {0,2,4,6,1,3,5,7} (the order the kernel's horizontal adds leave the block
 * sums in), zero-padded to whole groups. An odd block count gets one zero
 * block appended. Activation row: per pair, elements 0..15 of both blocks then
 * 16..31 of both (64 bytes), then d and s (= d * sum q) as f32 in the same
 * lane order.
 *
 * Every output element is one (weight row, activation row) dot with a fixed
 * instruction sequence, whether computed in the matvec or the multi-row
 * kernel, so results do not depend on M, row grouping or thread count. */
#ifndef LLMK_KERNELS_Q4_1_X2_H
#define LLMK_KERNELS_Q4_1_X2_H

#include "llmk.h"

#include <stddef.h>
#include <stdint.h>

struct llmk_q4_1_x2 {
    int64_t n, k;       /* rows, elements per row (as the tensor) */
    int64_t nb, ng;     /* blocks per row (even), groups of 8 per row */
    uint8_t *qs;        /* [n][nb * 16] */
    uint16_t *d, *m;    /* [n][ng * 8] */
};

/* Repack a Q4_1 tensor (ne = {k, n}); allocates. */
int llmk_q4_1_x2_repack(const llmk_tensor_info *t, struct llmk_q4_1_x2 *out);
void llmk_q4_1_x2_free(struct llmk_q4_1_x2 *x);

/* Bytes of one q8_1x activation row of k elements (k whole blocks of 32). */
size_t llmk_q8_1x_row_bytes(int64_t k);
/* Quantize elements [e0, e1) of a row of k (e0, e1 multiples of 64, or e1 = k)
 * into the q8_1x row dst: GGUF Q8_1 quantization of each block, rearranged.
 * Returns nonzero when one of those elements is NaN or infinite. */
int llmk_q8_1x_quantize(const float *x, int64_t k, int64_t e0, int64_t e1, void *dst);

/* y[a * y_stride + r] for rows r in [r0, r1) and na activation rows
 * (act + a * act_stride). AVX2 (src/kernels/q4_1_x2_avx2.c). */
typedef void (*llmk_gemm_q4_1_x2_fn)(const struct llmk_q4_1_x2 *w, int64_t r0, int64_t r1, const void *act,
                                 size_t act_stride, int64_t na, float *y, int64_t y_stride);
#if defined(__x86_64__) || defined(__i386__)
void llmk_gemm_q4_1_x2_q8_1x_avx2(const struct llmk_q4_1_x2 *w, int64_t r0, int64_t r1, const void *act, size_t act_stride,
                        int64_t na, float *y, int64_t y_stride);
#endif
#endif
