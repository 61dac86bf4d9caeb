/* Exact conversions between f32 and the 16-bit float formats GGUF stores:
 * IEEE binary16 (f16) and bfloat16 (bf16). Header-only so any file (codecs,
 * kernels, model code) can include it. f16 -> f32 and bf16 -> f32 are exact
 * for every input; f32 -> f16 rounds to nearest even with subnormals, overflow
 * to inf and NaN kept NaN; f32 -> bf16 rounds to nearest even and quiets NaN
 * the way ggml/gguf-py do, so quantized blocks match theirs bit for bit. */
#ifndef LLMK_CODEC_HALF_H
#define LLMK_CODEC_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t llmk_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float llmk_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float llmk_fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return llmk_f32_from_bits(sign | 0x7f800000u | (man << 13));
    if (exp != 0) return llmk_f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
    /* zero or subnormal: man * 2^-24 is exact in f32 */
    float v = (float)man * 0x1p-24f;
    return sign ? -v : v;
}

static inline uint16_t llmk_fp32_to_fp16(float f) {
    uint32_t x = llmk_f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN: quiet, keep the top of the payload */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
    if (ax >= 0x38800000u) {                                   /* normal f16 (>= 2^-14) */
        uint32_t r = ax - (112u << 23);
        r += 0xfffu + ((r >> 13) & 1u);
        return (uint16_t)(sign | (r >> 13));
    }
    /* f16 subnormal or zero: round |f| / 2^-24 to nearest even. */
    uint32_t e = ax >> 23;
    if (e < 102) return sign; /* below 2^-25: rounds to zero */
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t s = 126u - e; /* 14..24 */
    uint32_t q = m >> s, rem = m & ((1u << s) - 1u), half = 1u << (s - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (uint16_t)(sign | q);
}

static inline float llmk_bf16_to_fp32(uint16_t h) {
    return llmk_f32_from_bits((uint32_t)h << 16);
}

static inline uint16_t llmk_fp32_to_bf16(float f) {
    uint32_t x = llmk_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 64u); /* quiet NaN */
    uint64_t r = ((uint64_t)x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    return (uint16_t)r;
}

#endif
