/* Mixture-of-experts kernels, AVX2: the combine, 8 elements per step with
 * the scalar reference's operations lane by lane (a multiply, then an add;
 * never FMA), so its bits are the reference's. */
#include "kernels/moe.h"

#include <immintrin.h>

void llmk_moe_combine_avx2(float *x, const float *y, size_t y_stride, const float *w, int k, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 acc = _mm256_setzero_ps();
        for (int j = 0; j < k; j++)
            acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_set1_ps(w[j]), _mm256_loadu_ps(y + (size_t)j * y_stride + i)));
        _mm256_storeu_ps(x + i, _mm256_add_ps(_mm256_loadu_ps(x + i), acc));
    }
    if (i < n) llmk_moe_combine_ref(x + i, y + i, y_stride, w, k, n - i);
}
