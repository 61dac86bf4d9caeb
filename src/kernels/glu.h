/* Seed 002's GLU variants beside plain SwiGLU (the kernel table's swiglu),
 * in place on the gate g with the up projection u, n elements:
 *   gelu_glu      g = gelu(g) * u, GELU's tanh form
 *                 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))
 *   silu_limit    g = silu(min(g, limit)) * clip(u, -limit, limit)
 *                 (DeepSeek-V4's LimitedSwiGLU)
 *   swiglu_clamp  v = min(g, limit), c = clip(u, -limit, limit),
 *                 g = v sigmoid(alpha v) (c + 1)  (gpt-oss; biases already added)
 * exp is llmk_dsa_exp (dsa.h), tanh(y) = 1 - 2 / (exp(2y) + 1), sigmoid(y) =
 * 1 / (1 + exp(-y)) and silu(v) = v / (1 + exp(-v)); every step a separate f32
 * operation in the order written, so the scalar _ref kernels (glu.c) and the
 * AVX2 ones (glu_avx2.c) give the same bits. */
#ifndef LLMK_KERNELS_GLU_H
#define LLMK_KERNELS_GLU_H

#include <stdint.h>

struct llmk_glu_kernels {
    void (*gelu_glu)(float *g, const float *u, int64_t n);
    void (*silu_limit)(float *g, const float *u, int64_t n, float limit);
    void (*swiglu_clamp)(float *g, const float *u, int64_t n, float alpha, float limit);
};

extern const struct llmk_glu_kernels llmk_glu_kernels_ref;
#if defined(__x86_64__)
extern const struct llmk_glu_kernels llmk_glu_kernels_avx2;
#endif

#endif
