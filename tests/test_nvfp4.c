/* NVFP4's per-tensor scale (src/codec/nvfp4.h): quantize_scaled equals the
 * row codec on x / g byte for byte, dequantize_scaled is the row codec's
 * values times g, and a tensor far past the block scales' range (where the
 * bare blocks saturate at 6 * 448) round-trips within the format's error.
 * (The row codec itself is checked against ml_dtypes in tests/py/test_nvfp4.py,
 * its dot in test_codec_dot.c.) */
#include "check.h"
#include "codec/nvfp4.h"
#include "internal.h"

#include <stdlib.h>

int main(void) {
    enum { N = 64 * 40 };
    static float x[N], xs[N], back[N], back2[N];
    static unsigned char a[N / 64 * 36], b[N / 64 * 36];
    uint64_t s = 12345;
    for (int i = 0; i < N; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x[i] = ((float)(s >> 40) / 16777216.0f - 0.5f) * (i < N / 2 ? 3e4f : 1e-4f);
    }
    float g = llmk_nvfp4_tensor_scale(x, N);
    CHECK(g > 1.0f);
    for (int i = 0; i < N; i++) xs[i] = x[i] / g;
    llmk_nvfp4_quantize_scaled(x, N, g, a);
    CHECK_STATUS(llmk_quantize_row(LLMK_TYPE_NVFP4, xs, b, N), LLMK_OK);
    CHECK(memcmp(a, b, sizeof a) == 0);
    llmk_nvfp4_dequantize_scaled(a, N, g, back);
    CHECK_STATUS(llmk_dequantize_row(LLMK_TYPE_NVFP4, a, back2, N), LLMK_OK);
    int same = 1, within = 1;
    for (int i = 0; i < N; i++) same &= back[i] == back2[i] * g;
    CHECK(same);
    for (int i = 0; i < N / 2; i++) /* the large half: E2M1 steps over exact-enough scales */
        within &= fabsf(back[i] - x[i]) <= 0.3f * 1.5e4f;
    CHECK(within);
    CHECK_EQ_DBL(llmk_nvfp4_tensor_scale(x + N / 2, 0), 1.0);
    CHECK_EQ_DBL(llmk_ue4m3_half_to_fp32(0x7f), 0.0);
    CHECK_EQ_DBL(llmk_ue4m3_half_to_fp32(0x7e), 224.0); /* 448 / 2 */
    CHECK_EQ_DBL(llmk_ue4m3_half_to_fp32(0x01), 0x1p-10);
    return check_summary("nvfp4");
}
