/* AVX2 GLU variants (glu.h): the references' operations, eight lanes at a
 * time, the tails through the references themselves. */
#include "kernels/glu.h"

#include "kernels/exp_x86.h"

#include <immintrin.h>

static inline __m256 set(float x) { return _mm256_set1_ps(x); }
/* min(g, limit), and clip(u, -limit, limit) as max then min (the references' order) */
static inline __m256 vmin(__m256 x, float l) { return _mm256_min_ps(x, set(l)); }
static inline __m256 vclip(__m256 x, float l) { return _mm256_min_ps(_mm256_max_ps(x, set(-l)), set(l)); }

static void gelu_glu(float *g, const float *u, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(g + i);
        __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
        __m256 y = _mm256_mul_ps(set(0.7978845608028654f), _mm256_add_ps(x, _mm256_mul_ps(set(0.044715f), x3)));
        __m256 e = llmk_vexp_dsa(_mm256_mul_ps(set(2.0f), y));
        __m256 t = _mm256_sub_ps(set(1.0f), _mm256_div_ps(set(2.0f), _mm256_add_ps(e, set(1.0f))));
        __m256 r = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(set(0.5f), x), _mm256_add_ps(set(1.0f), t)),
                                 _mm256_loadu_ps(u + i));
        _mm256_storeu_ps(g + i, r);
    }
    llmk_glu_kernels_ref.gelu_glu(g + i, u + i, n - i);
}

static void silu_limit(float *g, const float *u, int64_t n, float limit) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = vmin(_mm256_loadu_ps(g + i), limit), c = vclip(_mm256_loadu_ps(u + i), limit);
        __m256 e = llmk_vexp_dsa(_mm256_xor_ps(v, set(-0.0f)));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(_mm256_div_ps(v, _mm256_add_ps(set(1.0f), e)), c));
    }
    llmk_glu_kernels_ref.silu_limit(g + i, u + i, n - i, limit);
}

static void swiglu_clamp(float *g, const float *u, int64_t n, float alpha, float limit) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = vmin(_mm256_loadu_ps(g + i), limit), c = vclip(_mm256_loadu_ps(u + i), limit);
        __m256 e = llmk_vexp_dsa(_mm256_xor_ps(_mm256_mul_ps(set(alpha), v), set(-0.0f)));
        __m256 s = _mm256_div_ps(set(1.0f), _mm256_add_ps(set(1.0f), e));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(_mm256_mul_ps(v, s), _mm256_add_ps(c, set(1.0f))));
    }
    llmk_glu_kernels_ref.swiglu_clamp(g + i, u + i, n - i, alpha, limit);
}

const struct llmk_glu_kernels llmk_glu_kernels_avx2 = {
    .gelu_glu = gelu_glu,
    .silu_limit = silu_limit,
    .swiglu_clamp = swiglu_clamp,
};
