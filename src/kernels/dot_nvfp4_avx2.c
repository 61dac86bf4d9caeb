/* AVX2 NVFP4 x Q8_0 dot (the codec's dot_nvfp4 in src/codec/nvfp4.c): the
 * integer sum of each 16-element sub-block by byte shuffles and pair
 * multiplies (exact), then the reference's f32 steps in its order, so the
 * result has the same bits. */
#include "kernels/kernels.h"

#include "codec/blocks.h"
#include "codec/half.h"
#include "codec/nvfp4.h"

#include <immintrin.h>
#include <string.h>

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* Integer sums of sub-blocks 2p and 2p + 1 (16 code bytes at q) against
 * the 32 activations at a. */
static inline void isum_pair(const uint8_t *q, const int8_t *a, __m256i grid, int *s0, int *s1) {
    __m128i b = _mm_loadu_si128((const __m128i *)q), m = _mm_set1_epi8(15);
    __m128i lo = _mm_and_si128(b, m), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m);
    /* element order: low nibbles of bytes 0..7, their high nibbles, then bytes 8..15 likewise */
    __m256i idx = _mm256_set_m128i(_mm_unpackhi_epi64(lo, hi), _mm_unpacklo_epi64(lo, hi));
    __m256i v = _mm256_shuffle_epi8(grid, idx), av = _mm256_loadu_si256((const __m256i *)a);
    __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(av, v));
    __m256i x = _mm256_madd_epi16(p, _mm256_set1_epi16(1));
    x = _mm256_hadd_epi32(x, x);
    x = _mm256_hadd_epi32(x, x);
    *s0 = _mm256_extract_epi32(x, 0);
    *s1 = _mm256_extract_epi32(x, 4);
}

static void dot_nvfp4(int64_t k, const void *w, size_t ws, int64_t nrows, const void *a, float *y) {
    const llmk_block_q8_0 *ab = a;
    const __m256i grid = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)llmk_mxfp4_values));
    for (int64_t r = 0; r < nrows; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * ws;
        float sum = 0;
        for (int64_t b = 0; b < k / LLMK_QK_NVFP4; b++) {
            const uint8_t *blk = row + (size_t)b * sizeof(llmk_block_nvfp4);
            int is[4];
            isum_pair(blk + 4, ab[2 * b].qs, grid, &is[0], &is[1]);
            isum_pair(blk + 20, ab[2 * b + 1].qs, grid, &is[2], &is[3]);
            for (int s = 0; s < 4; s++) {
                uint16_t h;
                memcpy(&h, &ab[2 * b + s / 2].d, 2);
                sum = sum + (llmk_ue4m3_half_to_fp32(blk[s]) * llmk_fp16_to_fp32(h)) * (float)is[s];
            }
        }
        y[r] = sum;
    }
}

void llmk_kernels_dot_nvfp4_avx2(struct llmk_type_kernels *k) {
    k[LLMK_TYPE_NVFP4].vec_dot = dot_nvfp4, k[LLMK_TYPE_NVFP4].vec_dot_name = "nvfp4_avx2";
}
