/* Scalar references of the GLU variants (glu.h). */
#include "kernels/glu.h"

#include "kernels/dsa.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* The clamps in the operand order of the vector min / max. */
static inline float min_l(float x, float l) { return x < l ? x : l; }
static inline float max_l(float x, float l) { return x > l ? x : l; }

static void gelu_glu_ref(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float x = g[i];
        float y = 0.7978845608028654f * (x + 0.044715f * ((x * x) * x));
        float t = 1.0f - 2.0f / (llmk_dsa_exp(2.0f * y) + 1.0f);
        g[i] = ((0.5f * x) * (1.0f + t)) * u[i];
    }
}

static void silu_limit_ref(float *g, const float *u, int64_t n, float limit) {
    for (int64_t i = 0; i < n; i++) {
        float v = min_l(g[i], limit), c = min_l(max_l(u[i], -limit), limit);
        g[i] = (v / (1.0f + llmk_dsa_exp(-v))) * c;
    }
}

static void swiglu_clamp_ref(float *g, const float *u, int64_t n, float alpha, float limit) {
    for (int64_t i = 0; i < n; i++) {
        float v = min_l(g[i], limit), c = min_l(max_l(u[i], -limit), limit);
        float s = 1.0f / (1.0f + llmk_dsa_exp(-(alpha * v)));
        g[i] = (v * s) * (c + 1.0f);
    }
}

const struct llmk_glu_kernels llmk_glu_kernels_ref = {
    .gelu_glu = gelu_glu_ref,
    .silu_limit = silu_limit_ref,
    .swiglu_clamp = swiglu_clamp_ref,
};
