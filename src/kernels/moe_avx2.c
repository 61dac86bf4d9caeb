/* Mixture-of-experts kernels, AVX2: the combine, 8 elements per step with
 * the scalar reference's operations lane by lane (a multiply, then an add;
 * never FMA), so its bits are the reference's. */
#include "kernels/moe.h"

#include <immintrin.h>

void llmk_moe_combine_avx2(float *x, const float *const *y, const float *w, int k, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 acc = _mm256_setzero_ps();
        for (int j = 0; j < k; j++)
            acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_set1_ps(w[j]), _mm256_loadu_ps(y[j] + i)));
        _mm256_storeu_ps(x + i, _mm256_add_ps(_mm256_loadu_ps(x + i), acc));
    }
    for (; i < n; i++) { /* the reference's arithmetic on the tail */
        float acc = 0.0f;
        for (int j = 0; j < k; j++) {
            float prod = w[j] * y[j][i];
            acc += prod;
        }
        x[i] += acc;
    }
}
