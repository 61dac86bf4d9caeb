/* Seed 002's norm fusions (src/kernels/norm_fused.h): the AVX2 kernels equal
 * the scalar references bit for bit; each fused kernel equals the unfused
 * sequence (llmk_f32_rmsnorm_ref, then the add / scale) bit for bit; and
 * both are close to the formula in double precision. Odd lengths (tails),
 * NULL weights, outputs aliasing an input. */
#include "check.h"
#include "internal.h"
#include "kernels/kernels.h"
#include "kernels/norm_fused.h"
#include "kernels/ops_f32.h"

#include <stdlib.h>

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

static int same(const float *a, const float *b, int64_t n) { return memcmp(a, b, sizeof(float) * (size_t)n) == 0; }

static double rms_inv64(const float *x, int64_t n, float eps) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return 1.0 / sqrt(s / (double)n + eps);
}

static void one_length(const struct llmk_norm_kernels *fast, int64_t n, int with_w) {
    enum { MAXN = 1100 };
    static float r[MAXN], h[MAXN], a[MAXN], w1[MAXN], w2[MAXN], w3[MAXN], o[6][MAXN], t[MAXN];
    for (int64_t i = 0; i < n; i++)
        r[i] = frand() * 4, h[i] = frand() * 30, a[i] = frand() * 1e-3f, w1[i] = 1 + frand(), w2[i] = frand(),
        w3[i] = 2 * frand();
    const float *wa = with_w ? w1 : NULL, *wb = with_w ? w2 : NULL;
    const float eps = 1e-6f, scale = 0.7f;
    /* add_rmsnorm */
    llmk_norm_kernels_ref.add_rmsnorm(o[0], r, h, wa, n, eps, scale);
    if (fast) {
        fast->add_rmsnorm(o[1], r, h, wa, n, eps, scale);
        CHECK(same(o[0], o[1], n));
    }
    llmk_f32_rmsnorm_ref(t, h, wa, n, eps);
    for (int64_t i = 0; i < n; i++) t[i] = (r[i] + t[i]) * scale;
    CHECK(same(o[0], t, n));
    double ih = rms_inv64(h, n, eps), worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double want = (r[i] + h[i] * ih * (wa ? wa[i] : 1)) * scale;
        worst = fmax(worst, fabs(want - o[0][i]));
    }
    CHECK(worst < 1e-5);
    memcpy(o[2], r, sizeof(float) * (size_t)n); /* out aliasing the residual */
    llmk_norm_kernels_ref.add_rmsnorm(o[2], o[2], h, wa, n, eps, scale);
    CHECK(same(o[0], o[2], n));
    /* rmsnorm2_add */
    llmk_norm_kernels_ref.rmsnorm2_add(o[0], h, wa, a, wb, n, eps);
    if (fast) {
        fast->rmsnorm2_add(o[1], h, wa, a, wb, n, eps);
        CHECK(same(o[0], o[1], n));
    }
    llmk_f32_rmsnorm_ref(t, h, wa, n, eps);
    llmk_f32_rmsnorm_ref(o[3], a, wb, n, eps);
    for (int64_t i = 0; i < n; i++) t[i] = t[i] + o[3][i];
    CHECK(same(o[0], t, n));
    double ia = rms_inv64(a, n, eps);
    worst = 0;
    for (int64_t i = 0; i < n; i++)
        worst = fmax(worst, fabs(h[i] * ih * (wa ? wa[i] : 1) + a[i] * ia * (wb ? wb[i] : 1) - o[0][i]));
    CHECK(worst < 1e-5);
    /* rmsnorm_multi3 */
    const float *const w3s[3] = {wa, wb, with_w ? w3 : NULL};
    float *const outs_r[3] = {o[0], o[1], o[2]}, *const outs_f[3] = {o[3], o[4], o[5]};
    llmk_norm_kernels_ref.rmsnorm_multi3(outs_r, h, w3s, n, eps);
    if (fast) {
        fast->rmsnorm_multi3(outs_f, h, w3s, n, eps);
        for (int k = 0; k < 3; k++) CHECK(same(outs_r[k], outs_f[k], n));
    }
    for (int k = 0; k < 3; k++) {
        llmk_f32_rmsnorm_ref(t, h, w3s[k], n, eps);
        CHECK(same(outs_r[k], t, n));
    }
}

int main(void) {
    const struct llmk_norm_kernels *fast = NULL;
#if defined(__x86_64__)
    if (llmk_kernels()->cpu & LLMK_CPU_AVX2) fast = &llmk_norm_kernels_avx2;
#endif
    if (!fast) fprintf(stderr, "test_norm_fused: no AVX2, the fast set is not tested here\n");
    static const int64_t ns[] = {1, 7, 8, 9, 64, 129, 576, 1100};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (int w = 0; w < 2; w++) one_length(fast, ns[i], w);
    CHECK(llmk_kernels()->norm != NULL);
    return check_summary("norm_fused");
}
