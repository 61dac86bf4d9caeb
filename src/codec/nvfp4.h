/* NVFP4 (GGUF type 40, ggml's layout): blocks of 64 elements, 36 bytes:
 * four UE4M3 scales (one per 16 elements) then 32 bytes of E2M1 codes; in
 * sub-block s, byte qs[8 s + j] holds element 16 s + j in its low nibble and
 * element 16 s + j + 8 in its high one. A code is an E2M1 value (bit 3 the
 * sign; 0..7: 0, 0.5, 1, 1.5, 2, 3, 4, 6); a scale byte an unsigned E4M3
 * (bias 7, 3 mantissa bits; bit 7 ignored, 0x7f reads as 0, as ggml decodes
 * it). NVIDIA's format adds a per-tensor f32 scale over the block scales;
 * GGUF keeps that outside the blocks, so the row codec is the blocks alone
 * and the _scaled functions below carry the tensor scale. */
#ifndef LLMK_CODEC_NVFP4_H
#define LLMK_CODEC_NVFP4_H

#include <stdint.h>

#define LLMK_QK_NVFP4 64
typedef struct {
    uint8_t d[4];
    uint8_t qs[32];
} llmk_block_nvfp4;
_Static_assert(sizeof(llmk_block_nvfp4) == 36, "nvfp4 block is 36 bytes");

/* Half the UE4M3 scale (the doubled E2M1 grid llmk_mxfp4_values is the
 * value table); exact. */
float llmk_ue4m3_half_to_fp32(uint8_t x);

/* The per-tensor scale of x[0..n): amax / (448 * 6), so the largest block
 * scale lands on E4M3's largest value; 1 when amax is 0 or not finite. */
float llmk_nvfp4_tensor_scale(const float *x, int64_t n);
/* Blocks of x[i] / g (n whole blocks); and back, each value times g. */
void llmk_nvfp4_quantize_scaled(const float *x, int64_t n, float g, void *dst);
void llmk_nvfp4_dequantize_scaled(const void *src, int64_t n, float g, float *dst);

#endif
