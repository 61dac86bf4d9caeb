/* Block layouts of the GGUF codecs, exactly as the format stores them (the
 * little-endian ggml structs). Each is defined once here and checked by a
 * static assertion against the format's block size; C kernels (and a later
 * CUDA backend) include this file. f16 fields are raw IEEE binary16 bits.
 *
 * Alignment: blocks with 16-bit fields need 2-byte alignment (Q8_K: 4).
 * GGUF tensor data is 32-byte aligned and every block size is a multiple of
 * its alignment, so rows in a mapped file are always aligned; the _ref
 * codecs copy each block out with memcpy and accept any address. */
#ifndef LLMK_CODEC_BLOCKS_H
#define LLMK_CODEC_BLOCKS_H

#include <stdint.h>

#define LLMK_QK 32   /* elements per block of the 32-element codecs */
#define LLMK_QK_K 256 /* elements per super-block of the K-quants and IQ4_XS */

typedef struct { uint16_t d; uint8_t qs[LLMK_QK / 2]; } llmk_block_q4_0;
typedef struct { uint16_t d, m; uint8_t qs[LLMK_QK / 2]; } llmk_block_q4_1;
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[LLMK_QK / 2]; } llmk_block_q5_0;
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[LLMK_QK / 2]; } llmk_block_q5_1;
typedef struct { uint16_t d; int8_t qs[LLMK_QK]; } llmk_block_q8_0;
/* s = d * sum(qs), precomputed for the _1 weight codecs' min term. */
typedef struct { uint16_t d, s; int8_t qs[LLMK_QK]; } llmk_block_q8_1;
/* Q2_K: 16 sub-blocks of 16; scales byte = min(4 bits) << 4 | scale(4 bits). */
typedef struct {
    uint8_t scales[LLMK_QK_K / 16];
    uint8_t qs[LLMK_QK_K / 4];
    uint16_t d, dmin;
} llmk_block_q2_k;
/* Q3_K: 2 low bits in qs, high bit in hmask (set = no -4 offset); 16 6-bit
 * signed (offset 32) scales packed in 12 bytes. */
typedef struct {
    uint8_t hmask[LLMK_QK_K / 8];
    uint8_t qs[LLMK_QK_K / 4];
    uint8_t scales[12];
    uint16_t d;
} llmk_block_q3_k;
/* Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins packed in 12 bytes. */
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qs[LLMK_QK_K / 2];
} llmk_block_q4_k;
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[LLMK_QK_K / 8];
    uint8_t qs[LLMK_QK_K / 2];
} llmk_block_q5_k;
/* Q6_K: 4 low bits in ql, 2 high bits in qh, value offset 32; 16 int8 scales. */
typedef struct {
    uint8_t ql[LLMK_QK_K / 2];
    uint8_t qh[LLMK_QK_K / 4];
    int8_t scales[LLMK_QK_K / 16];
    uint16_t d;
} llmk_block_q6_k;
/* Q8_K: activation form of the K-quants; f32 scale, bsums = sums of 16 qs. */
typedef struct {
    float d;
    int8_t qs[LLMK_QK_K];
    int16_t bsums[LLMK_QK_K / 16];
} llmk_block_q8_k;
typedef struct { uint16_t d; uint8_t qs[LLMK_QK / 2]; } llmk_block_iq4_nl;
/* IQ4_XS: 8 sub-blocks of 32, 6-bit scales (offset 32): low 4 bits in
 * scales_l (two per byte), high 2 bits in scales_h (two bits per sub-block). */
typedef struct {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[LLMK_QK_K / 64];
    uint8_t qs[LLMK_QK_K / 2];
} llmk_block_iq4_xs;
/* MXFP4 (OCP microscaling): E8M0 shared exponent and 32 E2M1 values. */
typedef struct { uint8_t e; uint8_t qs[LLMK_QK / 2]; } llmk_block_mxfp4;

_Static_assert(sizeof(llmk_block_q4_0) == 18, "q4_0 block is 18 bytes");
_Static_assert(sizeof(llmk_block_q4_1) == 20, "q4_1 block is 20 bytes");
_Static_assert(sizeof(llmk_block_q5_0) == 22, "q5_0 block is 22 bytes");
_Static_assert(sizeof(llmk_block_q5_1) == 24, "q5_1 block is 24 bytes");
_Static_assert(sizeof(llmk_block_q8_0) == 34, "q8_0 block is 34 bytes");
_Static_assert(sizeof(llmk_block_q8_1) == 36, "q8_1 block is 36 bytes");
_Static_assert(sizeof(llmk_block_q2_k) == 84, "q2_k block is 84 bytes");
_Static_assert(sizeof(llmk_block_q3_k) == 110, "q3_k block is 110 bytes");
_Static_assert(sizeof(llmk_block_q4_k) == 144, "q4_k block is 144 bytes");
_Static_assert(sizeof(llmk_block_q5_k) == 176, "q5_k block is 176 bytes");
_Static_assert(sizeof(llmk_block_q6_k) == 210, "q6_k block is 210 bytes");
_Static_assert(sizeof(llmk_block_q8_k) == 292, "q8_k block is 292 bytes");
_Static_assert(sizeof(llmk_block_iq4_nl) == 18, "iq4_nl block is 18 bytes");
_Static_assert(sizeof(llmk_block_iq4_xs) == 136, "iq4_xs block is 136 bytes");
_Static_assert(sizeof(llmk_block_mxfp4) == 17, "mxfp4 block is 17 bytes");

/* Non-linear 4-bit grids (format constants). */
static const int8_t llmk_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                             1,    13,   25,  38,  53,  69,  89,  113};
/* E2M1 values doubled (so they are integers); the E8M0 scale is halved to match. */
static const int8_t llmk_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* 2^(e-128) as f32 (E8M0 scale, halved for the doubled E2M1 grid); exact,
 * subnormal for e < 2. */
static inline float llmk_e8m0_half_to_fp32(uint8_t e) {
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    __builtin_memcpy(&f, &bits, sizeof f);
    return f;
}

#endif
