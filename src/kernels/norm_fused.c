/* Scalar references of the normalization fusions (norm_fused.h). */
#include "kernels/norm_fused.h"

#include <math.h>
#include <stddef.h>

/* llmk_f32_rmsnorm_ref's reduction (src/kernels/ops_f32.c): 8 double lanes,
 * the tail in lane 0, ((0+1)+(2+3))+((4+5)+(6+7)). */
float llmk_f32_inv_rms_ref(const float *x, int64_t n, float eps) {
    double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) s[l] += (double)x[i + l] * x[i + l];
    for (; i < n; i++) s[0] += (double)x[i] * x[i];
    double ss = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    return (float)(1.0 / sqrt(ss / (double)n + (double)eps));
}

static void add_rmsnorm_ref(float *out, const float *residual, const float *h, const float *w, int64_t n, float eps,
                            float scale) {
    float r = llmk_f32_inv_rms_ref(h, n, eps);
    for (int64_t i = 0; i < n; i++) {
        float y = w ? (h[i] * r) * w[i] : h[i] * r;
        out[i] = (residual[i] + y) * scale;
    }
}

static void rmsnorm2_add_ref(float *out, const float *a, const float *wa, const float *b, const float *wb, int64_t n,
                             float eps) {
    float ra = llmk_f32_inv_rms_ref(a, n, eps), rb = llmk_f32_inv_rms_ref(b, n, eps);
    for (int64_t i = 0; i < n; i++) {
        float ya = wa ? (a[i] * ra) * wa[i] : a[i] * ra;
        float yb = wb ? (b[i] * rb) * wb[i] : b[i] * rb;
        out[i] = ya + yb;
    }
}

static void rmsnorm_multi3_ref(float *const out[3], const float *x, const float *const w[3], int64_t n, float eps) {
    float r = llmk_f32_inv_rms_ref(x, n, eps);
    /* out[k] may alias x: read x[i] once per element before any store */
    for (int64_t i = 0; i < n; i++) {
        float xr = x[i] * r;
        for (int k = 0; k < 3; k++) out[k][i] = w[k] ? xr * w[k][i] : xr;
    }
}

const struct llmk_norm_kernels llmk_norm_kernels_ref = {
    .add_rmsnorm = add_rmsnorm_ref,
    .rmsnorm2_add = rmsnorm2_add_ref,
    .rmsnorm_multi3 = rmsnorm_multi3_ref,
};
