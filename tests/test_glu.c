/* Seed 002's GLU variants (src/kernels/glu.h): the AVX2 kernels equal the
 * scalar references bit for bit (ragged lengths, values past the limits,
 * large magnitudes), and both follow the formulas evaluated in double. */
#include "check.h"
#include "internal.h"
#include "kernels/glu.h"
#include "kernels/kernels.h"

#include <stdlib.h>

static uint64_t rng = 0x853c49e6748fea9bull;
static float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

enum { N = 1000 };

static double gelu64(double x) { return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
static double clip64(double x, double l) { return x < -l ? -l : x > l ? l : x; }

int main(void) {
    const struct llmk_glu_kernels *fast = NULL;
#if defined(__x86_64__)
    if (llmk_kernels()->cpu & LLMK_CPU_AVX2) fast = &llmk_glu_kernels_avx2;
#endif
    if (!fast) fprintf(stderr, "test_glu: no AVX2, the fast set is not tested here\n");
    static float g[N], u[N], a[N], b[N];
    for (int i = 0; i < N; i++) {
        float s = i % 5 == 0 ? 40.0f : i % 5 == 1 ? 0.01f : 8.0f; /* past the limits, tiny, ordinary */
        g[i] = frand() * s, u[i] = frand() * s;
    }
    const float limit = 7.0f, alpha = 1.702f;
    static const int64_t ns[] = {1, 7, 8, 13, 64, N};
    for (int kind = 0; kind < 3; kind++)
        for (size_t li = 0; li < sizeof ns / sizeof ns[0]; li++) {
            int64_t n = ns[li];
            memcpy(a, g, sizeof g), memcpy(b, g, sizeof g);
            const struct llmk_glu_kernels *r = &llmk_glu_kernels_ref;
            if (kind == 0) r->gelu_glu(a, u, n);
            if (kind == 1) r->silu_limit(a, u, n, limit);
            if (kind == 2) r->swiglu_clamp(a, u, n, alpha, limit);
            if (fast) {
                if (kind == 0) fast->gelu_glu(b, u, n);
                if (kind == 1) fast->silu_limit(b, u, n, limit);
                if (kind == 2) fast->swiglu_clamp(b, u, n, alpha, limit);
                CHECK(memcmp(a, b, sizeof(float) * (size_t)n) == 0);
                CHECK(memcmp(a + n, g + n, sizeof(float) * (size_t)(N - n)) == 0); /* nothing past n */
            }
            double worst = 0;
            for (int64_t i = 0; i < n; i++) {
                double x = g[i], want;
                if (kind == 0) want = gelu64(x) * u[i];
                else if (kind == 1) {
                    double v = x < limit ? x : limit;
                    want = v / (1 + exp(-v)) * clip64(u[i], limit);
                } else {
                    double v = x < limit ? x : limit;
                    want = v / (1 + exp(-alpha * v)) * (clip64(u[i], limit) + 1);
                }
                double e = fabs(want - a[i]) / (1 + fabs(want));
                worst = e > worst ? e : worst;
            }
            CHECK(worst < 1e-5);
        }
    CHECK(llmk_kernels()->glu != NULL);
    return check_summary("glu");
}
