/* Seed 002's normalization fusions, general f32 kernels (one pass over the
 * operands instead of a norm, a store and an add):
 *   add_rmsnorm     out = (residual + rms_norm(h) * w) * scale   (post-norm residual)
 *   rmsnorm2_add    out = rms_norm(a) * wa + rms_norm(b) * wb   (two norms and an add)
 *   rmsnorm_multi3  out_k = rms_norm(x) * w_k, k = 1..3         (one mean square, three scales)
 * rms_norm(x)[i] = x[i] * r with r = 1 / sqrt(mean(x^2) + eps) computed
 * exactly as llmk_f32_rmsnorm_ref computes it (8 double lanes, its combine,
 * its f32 rounding), and each output element the same f32 products in the
 * same order as the unfused sequence (x * r, then * w, then the add, then
 * * scale), so a fused kernel gives the bits of the norm kernel followed by
 * the add (tests/test_norm_fused.c). w may be NULL (no scale vector). out
 * may alias residual / a / x. The scalar _ref versions (norm_fused.c) and
 * the AVX2 ones (norm_fused_avx2.c) give the same bits; the kernel table
 * (kernels.h) holds the pair in use. */
#ifndef LLMK_KERNELS_NORM_FUSED_H
#define LLMK_KERNELS_NORM_FUSED_H

#include <stdint.h>

struct llmk_norm_kernels {
    void (*add_rmsnorm)(float *out, const float *residual, const float *h, const float *w, int64_t n, float eps,
                        float scale);
    void (*rmsnorm2_add)(float *out, const float *a, const float *wa, const float *b, const float *wb, int64_t n,
                         float eps);
    void (*rmsnorm_multi3)(float *const out[3], const float *x, const float *const w[3], int64_t n, float eps);
};

extern const struct llmk_norm_kernels llmk_norm_kernels_ref;
#if defined(__x86_64__)
extern const struct llmk_norm_kernels llmk_norm_kernels_avx2;
#endif

/* 1 / sqrt(mean(x^2) + eps) as llmk_f32_rmsnorm_ref rounds it. */
float llmk_f32_inv_rms_ref(const float *x, int64_t n, float eps);

#endif
