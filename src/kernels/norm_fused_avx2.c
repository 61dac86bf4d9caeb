/* AVX2 normalization fusions (norm_fused.h): the references' arithmetic,
 * eight elements at a time; the reduction in llmk_f32_rmsnorm_avx2's double
 * lanes (the reference's lanes), so the same bits. */
#include "kernels/norm_fused.h"
#include "kernels/ops_f32.h" /* llmk_f32_inv_rms_avx2: the unfused rmsnorm's own 1 / rms */

#include <immintrin.h>

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF /* the tails' multiply-then-add stays two roundings, as in the reference */
#endif

/* x * r, then * w when there is one (a vector of 8) */
static inline __m256 normed(const float *x, const float *w, int64_t i, __m256 r) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), r);
    return w ? _mm256_mul_ps(v, _mm256_loadu_ps(w + i)) : v;
}

static void add_rmsnorm(float *out, const float *residual, const float *h, const float *w, int64_t n, float eps,
                        float scale) {
    float r = llmk_f32_inv_rms_avx2(h, n, eps);
    __m256 vr = _mm256_set1_ps(r), vs = _mm256_set1_ps(scale);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_add_ps(_mm256_loadu_ps(residual + i), normed(h, w, i, vr)), vs));
    for (; i < n; i++) {
        float y = w ? (h[i] * r) * w[i] : h[i] * r;
        out[i] = (residual[i] + y) * scale;
    }
}

static void rmsnorm2_add(float *out, const float *a, const float *wa, const float *b, const float *wb, int64_t n,
                         float eps) {
    float ra = llmk_f32_inv_rms_avx2(a, n, eps), rb = llmk_f32_inv_rms_avx2(b, n, eps);
    __m256 va = _mm256_set1_ps(ra), vb = _mm256_set1_ps(rb);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_add_ps(normed(a, wa, i, va), normed(b, wb, i, vb)));
    for (; i < n; i++) {
        float ya = wa ? (a[i] * ra) * wa[i] : a[i] * ra;
        float yb = wb ? (b[i] * rb) * wb[i] : b[i] * rb;
        out[i] = ya + yb;
    }
}

static void rmsnorm_multi3(float *const out[3], const float *x, const float *const w[3], int64_t n, float eps) {
    float r = llmk_f32_inv_rms_avx2(x, n, eps);
    __m256 vr = _mm256_set1_ps(r);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 xr = _mm256_mul_ps(_mm256_loadu_ps(x + i), vr);
        __m256 y0 = w[0] ? _mm256_mul_ps(xr, _mm256_loadu_ps(w[0] + i)) : xr;
        __m256 y1 = w[1] ? _mm256_mul_ps(xr, _mm256_loadu_ps(w[1] + i)) : xr;
        __m256 y2 = w[2] ? _mm256_mul_ps(xr, _mm256_loadu_ps(w[2] + i)) : xr;
        _mm256_storeu_ps(out[0] + i, y0), _mm256_storeu_ps(out[1] + i, y1), _mm256_storeu_ps(out[2] + i, y2);
    }
    for (; i < n; i++) {
        float xr = x[i] * r;
        for (int k = 0; k < 3; k++) out[k][i] = w[k] ? xr * w[k][i] : xr;
    }
}

const struct llmk_norm_kernels llmk_norm_kernels_avx2 = {
    .add_rmsnorm = add_rmsnorm,
    .rmsnorm2_add = rmsnorm2_add,
    .rmsnorm_multi3 = rmsnorm_multi3,
};
