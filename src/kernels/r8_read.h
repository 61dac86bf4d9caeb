/* GGUF weight blocks read as "small integers times a per-16 scale plus a
 * per-32 offset", the form a later r8 record layout (r8.h) stores for the
 * types whose 32-element (sub-)blocks have it: Q5_1, Q3_K, Q4_K, Q5_K, Q6_K,
 * IQ4_XS and MXFP4. (Q2_K is not one: its mins are per 16 elements.)
 *
 * The reading is exact, not an approximation: s and m are exact f32 products
 * of the block's stored scales, so an integer kernel that sums v * a per
 * 16 elements and applies s and m afterwards computes with the very weights
 * the codec's dequantizer produces (tests/test_r8_read.c checks this against
 * the codecs bit for bit). */
#ifndef LLMK_KERNELS_R8_READ_H
#define LLMK_KERNELS_R8_READ_H

#include <stdint.h>

/* 32 consecutive weights of a tensor row as integers and f32 factors:
 * weight j (0..31) equals s[j / 16] * v[j] + m EXACTLY in real arithmetic
 * (s and m are exact f32 products of the block's stored scales). */
struct llmk_r8_sub {
    int8_t v[32];
    float s[2]; /* scale of elements 0..15 and of 16..31 */
    float m;    /* additive term; 0 for symmetric types */
};

/* Which types llmk_r8_read_sub takes. */
int llmk_r8_read_supports(uint32_t type);

/* Weights [32*sub, 32*sub + 32) of one GGUF block of `type` at `block`
 * (any address): sub is 0 for 32-element blocks, 0..7 for 256-element
 * super-blocks. `type` must be one llmk_r8_read_supports takes. */
void llmk_r8_read_sub(uint32_t type, const void *block, int sub, struct llmk_r8_sub *out);

/* The factors behind s and m for the types whose sub-blocks scale an f16
 * of the super-block by small integers (Q4_K, Q5_K, Q6_K, Q3_K, IQ4_XS): s[h] =
 * fp16(d) * sc[h] and m = -(fp16(dmin) * mn) (dmin, mn 0 where m is 0),
 * the very products llmk_r8_read_sub computes. Returns 0 for other types. */
struct llmk_r8_kscales {
    uint16_t d, dmin; /* f16 bits */
    int sc[2], mn;
};
int llmk_r8_read_kscales(uint32_t type, const void *block, int sub, struct llmk_r8_kscales *out);

#endif
