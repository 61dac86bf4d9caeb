/* FP8-E4M3FN and FP4-E2M1 rounding (minifloat.h). */
#include "codec/minifloat.h"

#include "codec/half.h"

#include <math.h>

float llmk_round_e4m3(float x) {
    if (x != x) return x;
    uint32_t sign = llmk_f32_bits(x) & 0x80000000u;
    float a = fabsf(x), r;
    if (a < 0x1p-6f) { /* subnormal E4M3: multiples of 2^-9 */
        r = nearbyintf(a * 512.0f) * 0x1p-9f;
    } else { /* 3 mantissa bits: round the 20 dropped ones to nearest even */
        uint32_t b = llmk_f32_bits(a);
        b = (b + 0x7ffffu + ((b >> 20) & 1u)) & ~0xfffffu;
        r = llmk_f32_from_bits(b);
    }
    if (r > 448.0f) r = 448.0f;
    return llmk_f32_from_bits(llmk_f32_bits(r) | sign);
}

float llmk_round_e2m1(float x) {
    if (x != x) return x;
    uint32_t sign = llmk_f32_bits(x) & 0x80000000u;
    float a = fabsf(x), r;
    if (a < 1.0f) { /* subnormal E2M1: 0, 0.5 (and 1 by carry) */
        r = nearbyintf(a * 2.0f) * 0.5f;
    } else { /* 1 mantissa bit */
        uint32_t b = llmk_f32_bits(a);
        b = (b + 0x1fffffu + ((b >> 22) & 1u)) & ~0x3fffffu;
        r = llmk_f32_from_bits(b);
    }
    if (r > 6.0f) r = 6.0f;
    return llmk_f32_from_bits(llmk_f32_bits(r) | sign);
}
