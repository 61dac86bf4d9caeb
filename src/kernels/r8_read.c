/* Reading GGUF blocks as integers, per-16 scales and a per-32 offset
 * (r8_read.h). The bit unpacking mirrors the dequantizers in
 * src/codec/kquants.c and src/codec/legacy.c, which are the truth; it is
 * written again here (as the SIMD dot kernels do) rather than shared, so the
 * codec files stay untouched and tests/test_r8_read.c compares two
 * independent readings.
 *
 * Fields are read through byte offsets (offsetof) and llmk_ld_u16 rather
 * than by copying the whole block: a 256-element block is read 8 times, once
 * per sub-block, and the copy would cost more than the reading.
 *
 * Why every s and m is an exact f32: each is a stored scale (an f16, 11
 * significant bits, or a power of two) times a small integer, and the
 * product of an 11-bit and a b-bit integer has at most 11 + b <= 24 bits;
 * f16 magnitudes (2^-24 .. 65504) times integers below 2^8 stay inside the
 * f32 normal range, so nothing is rounded. Per type:
 *   Q5_1   s = d, m = m: f16 values as they are.
 *   Q4_K, Q5_K  s = d * sc, m = -(dmin * mn), sc and mn in 0..63: <= 17 bits.
 *   Q6_K   s = d * sc, sc in -128..127: |sc| needs <= 7 bits, so <= 18 bits.
 *   Q3_K   s = d * (sc - 32), in -32..31: <= 5 bits, so <= 16 bits.
 *   IQ4_XS s = d * (ls - 32), in -32..31: <= 16 bits.
 *   MXFP4  s = 2^(e - 128) (the E8M0 scale halved for the doubled E2M1 grid),
 *          a power of two from 2^-128 (an f32 subnormal, still exact) to 2^127. */
#include "kernels/r8_read.h"

#include "codec/blocks.h"
#include "codec/codec.h"
#include "codec/half.h"
#include "llmk.h"

#include <stddef.h>

#define FIELD(T, f, blk) ((const uint8_t *)(blk) + offsetof(T, f))
#define F16(T, f, blk) llmk_fp16_to_fp32(llmk_ld_u16(FIELD(T, f, blk)))

int llmk_r8_read_supports(uint32_t type) {
    switch (type) {
    case LLMK_TYPE_Q5_1:
    case LLMK_TYPE_Q3_K:
    case LLMK_TYPE_Q4_K:
    case LLMK_TYPE_Q5_K:
    case LLMK_TYPE_Q6_K:
    case LLMK_TYPE_IQ4_XS:
    case LLMK_TYPE_MXFP4: return 1;
    default: return 0;
    }
}

/* Element j of a 32-element block's 16 nibble bytes: low nibbles are
 * elements 0..15, high nibbles 16..31 (Q5_1, MXFP4). */
static inline int nib32(const uint8_t *qs, int j) { return j < 16 ? (qs[j] & 0xf) : (qs[j - 16] >> 4); }

static void read_q5_1(const void *b, struct llmk_r8_sub *o) {
    const uint8_t *qs = FIELD(llmk_block_q5_1, qs, b), *qh = FIELD(llmk_block_q5_1, qh, b);
    for (int j = 0; j < 32; j++) o->v[j] = (int8_t)(nib32(qs, j) | (((qh[j >> 3] >> (j & 7)) & 1) << 4));
    o->s[0] = o->s[1] = F16(llmk_block_q5_1, d, b);
    o->m = F16(llmk_block_q5_1, m, b);
}

static void read_mxfp4(const void *b, struct llmk_r8_sub *o) {
    const uint8_t *qs = FIELD(llmk_block_mxfp4, qs, b);
    for (int j = 0; j < 32; j++) o->v[j] = llmk_mxfp4_values[nib32(qs, j)];
    o->s[0] = o->s[1] = llmk_e8m0_half_to_fp32(*FIELD(llmk_block_mxfp4, e, b));
    o->m = 0.0f;
}

/* Q4_K / Q5_K: the 6-bit scale and min of sub-block j in the 12 packed
 * bytes (0..3: scales 0..3 and their top bits for 4..7; 4..7: the same for
 * the mins; 8..11: low nibbles of scales / mins 4..7). */
static void k_scale_min(const uint8_t *s, int j, int *sc, int *mn) {
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xf) | ((s[j - 4] >> 6) << 4);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* Q4_K and Q5_K share the scale layout and the nibble layout (sub-blocks
 * 2i and 2i+1 are the low and high nibbles of qs[32i .. 32i+31]); Q5_K adds
 * bit `sub` of qh[l] as bit 4. The 12 scale bytes and the d/dmin fields sit
 * at the same offsets in both blocks. */
static void read_q45_k(const void *b, int sub, const uint8_t *qh, struct llmk_r8_sub *o) {
    const uint8_t *qs = (const uint8_t *)b + (qh ? offsetof(llmk_block_q5_k, qs) : offsetof(llmk_block_q4_k, qs));
    const uint8_t *q = qs + (sub >> 1) * 32;
    int shift = 4 * (sub & 1);
    for (int l = 0; l < 32; l++) {
        int v = (q[l] >> shift) & 0xf;
        if (qh) v |= ((qh[l] >> sub) & 1) << 4;
        o->v[l] = (int8_t)v;
    }
    int sc, mn;
    k_scale_min(FIELD(llmk_block_q4_k, scales, b), sub, &sc, &mn);
    o->s[0] = o->s[1] = F16(llmk_block_q4_k, d, b) * (float)sc;
    o->m = -(F16(llmk_block_q4_k, dmin, b) * (float)mn);
}

/* Q3_K: 16 6-bit scales (stored + 32): low nibbles in bytes 0..7 (scales
 * 0..7 low, 8..15 high nibble), top 2 bits in bytes 8..11. */
static int q3k_scale(const uint8_t *s, int i) {
    int lo = i < 8 ? (s[i] & 0xf) : (s[i - 8] >> 4);
    int hi = (s[8 + (i & 3)] >> (2 * (i >> 2))) & 3;
    return (lo | (hi << 4)) - 32;
}

/* Q3_K element e: 2 bits at qs[(e/128)*32 + e%32] >> 2*((e/32)%4), bit 2
 * from hmask[e%32] bit e/32 (set = no -4 offset, i.e. v = q - 4). */
static void read_q3_k(const void *b, int sub, struct llmk_r8_sub *o) {
    const uint8_t *qs = FIELD(llmk_block_q3_k, qs, b), *hm = FIELD(llmk_block_q3_k, hmask, b);
    const uint8_t *q = qs + (sub >> 2) * 32;
    int shift = 2 * (sub & 3);
    for (int l = 0; l < 32; l++) {
        int v = ((q[l] >> shift) & 3) | (((hm[l] >> sub) & 1) << 2);
        o->v[l] = (int8_t)(v - 4);
    }
    const uint8_t *sc = FIELD(llmk_block_q3_k, scales, b);
    float d = F16(llmk_block_q3_k, d, b);
    o->s[0] = d * (float)q3k_scale(sc, 2 * sub);
    o->s[1] = d * (float)q3k_scale(sc, 2 * sub + 1);
    o->m = 0.0f;
}

/* Q6_K element e (j = e/128, r = e%128): low 4 bits at ql[64j + r%64] >>
 * 4*(r/64), high 2 bits at qh[32j + r%32] >> 2*(r/32); v = q - 32. */
static void read_q6_k(const void *b, int sub, struct llmk_r8_sub *o) {
    const uint8_t *ql = FIELD(llmk_block_q6_k, ql, b) + (sub >> 2) * 64 + (sub & 1) * 32;
    const uint8_t *qh = FIELD(llmk_block_q6_k, qh, b) + (sub >> 2) * 32;
    int lshift = 4 * ((sub >> 1) & 1), hshift = 2 * (sub & 3);
    for (int l = 0; l < 32; l++) {
        int v = ((ql[l] >> lshift) & 0xf) | (((qh[l] >> hshift) & 3) << 4);
        o->v[l] = (int8_t)(v - 32);
    }
    const int8_t *sc = (const int8_t *)FIELD(llmk_block_q6_k, scales, b);
    float d = F16(llmk_block_q6_k, d, b);
    o->s[0] = d * (float)sc[2 * sub];
    o->s[1] = d * (float)sc[2 * sub + 1];
    o->m = 0.0f;
}

/* IQ4_XS sub-block ib: 6-bit scale (stored + 32), low 4 bits in
 * scales_l[ib/2] >> 4*(ib%2), top 2 in scales_h >> 2*ib; element l at
 * qs[16 ib + l%16] >> 4*(l/16), an index into the IQ4_NL grid. */
static void read_iq4_xs(const void *b, int sub, struct llmk_r8_sub *o) {
    const uint8_t *qs = FIELD(llmk_block_iq4_xs, qs, b) + sub * 16;
    for (int l = 0; l < 32; l++) o->v[l] = llmk_iq4nl_values[nib32(qs, l)];
    int lo = (FIELD(llmk_block_iq4_xs, scales_l, b)[sub >> 1] >> (4 * (sub & 1))) & 0xf;
    int hi = (llmk_ld_u16(FIELD(llmk_block_iq4_xs, scales_h, b)) >> (2 * sub)) & 3;
    o->s[0] = o->s[1] = F16(llmk_block_iq4_xs, d, b) * (float)((lo | (hi << 4)) - 32);
    o->m = 0.0f;
}

void llmk_r8_read_sub(uint32_t type, const void *block, int sub, struct llmk_r8_sub *out) {
    switch (type) {
    case LLMK_TYPE_Q5_1: read_q5_1(block, out); break;
    case LLMK_TYPE_MXFP4: read_mxfp4(block, out); break;
    case LLMK_TYPE_Q4_K: read_q45_k(block, sub, NULL, out); break;
    case LLMK_TYPE_Q5_K: read_q45_k(block, sub, FIELD(llmk_block_q5_k, qh, block), out); break;
    case LLMK_TYPE_Q3_K: read_q3_k(block, sub, out); break;
    case LLMK_TYPE_Q6_K: read_q6_k(block, sub, out); break;
    case LLMK_TYPE_IQ4_XS: read_iq4_xs(block, sub, out); break;
    default: break; /* not a supported type: callers ask llmk_r8_read_supports first */
    }
}

int llmk_r8_read_kscales(uint32_t type, const void *b, int sub, struct llmk_r8_kscales *o) {
    o->dmin = 0, o->mn = 0;
    switch (type) {
    case LLMK_TYPE_Q4_K:
    case LLMK_TYPE_Q5_K: /* the d, dmin and scale bytes at Q4_K's offsets (read_q45_k) */
        o->d = llmk_ld_u16(FIELD(llmk_block_q4_k, d, b)), o->dmin = llmk_ld_u16(FIELD(llmk_block_q4_k, dmin, b));
        k_scale_min(FIELD(llmk_block_q4_k, scales, b), sub, &o->sc[0], &o->mn);
        o->sc[1] = o->sc[0];
        return 1;
    case LLMK_TYPE_Q6_K: {
        const int8_t *sc = (const int8_t *)FIELD(llmk_block_q6_k, scales, b);
        o->d = llmk_ld_u16(FIELD(llmk_block_q6_k, d, b)), o->sc[0] = sc[2 * sub], o->sc[1] = sc[2 * sub + 1];
        return 1;
    }
    case LLMK_TYPE_Q3_K: {
        const uint8_t *sc = FIELD(llmk_block_q3_k, scales, b);
        o->d = llmk_ld_u16(FIELD(llmk_block_q3_k, d, b));
        o->sc[0] = q3k_scale(sc, 2 * sub), o->sc[1] = q3k_scale(sc, 2 * sub + 1);
        return 1;
    }
    case LLMK_TYPE_IQ4_XS: {
        int lo = (FIELD(llmk_block_iq4_xs, scales_l, b)[sub >> 1] >> (4 * (sub & 1))) & 0xf;
        int hi = (llmk_ld_u16(FIELD(llmk_block_iq4_xs, scales_h, b)) >> (2 * sub)) & 3;
        o->d = llmk_ld_u16(FIELD(llmk_block_iq4_xs, d, b)), o->sc[0] = o->sc[1] = (lo | (hi << 4)) - 32;
        return 1;
    }
    default: return 0;
    }
}
