/* llmk_r8_read_sub (src/kernels/r8_read.h): every 32-element sub-block of
 * Q5_1, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS and MXFP4 blocks, read as v, s, m,
 * gives back the codec's own dequantized weights: (float)((double)s[j/16] *
 * v[j] + m) equals the dequantizer's output. Blocks are random bytes (the f16
 * scales any finite value: zero, subnormal, negative, up to 65504) and the
 * codecs' own quantizations of random rows; each sits at an odd address.
 * Also: v stays in each type's integer range (so in int8), and
 * llmk_r8_read_supports names exactly these types.
 *
 * Tolerance: none, every type is bit-exact (compared as floats, so -0 == +0).
 * Each dequantizer is an exact product (an f16 or power-of-two scale times
 * small integers, at most 11 + 6 + 5 = 22 significant bits for Q5_K, 23 for
 * Q6_K and IQ4_XS, well inside f32's 24) followed by at most one rounded add
 * (Q5_1's + m, Q4_K/Q5_K's - dmin * mn, itself exact). The double sum here is
 * exact too (all terms are multiples of 2^-24 below 2^27, or for MXFP4 one
 * product), so rounding it to float is that same single rounding. MXFP4
 * blocks with e >= 254 overflow to inf at |v| = 12 in both (the codec reads
 * e = 255 as 2^127, not NaN). The ulp machinery below stays so that a type
 * whose formula rounds twice could be given 1 ulp. */
#include "check.h"
#include "codec/codec.h"
#include "codec/half.h"
#include "kernels/r8_read.h"
#include "llmk.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float unif(void) { return (float)rnd() / 4294967296.0f * 2.0f - 1.0f; } /* [-1, 1) */

struct rtype {
    uint32_t type;
    const char *name;
    int vmin, vmax;      /* range of v */
    int f16[2];          /* byte offsets of the block's f16 scales (-1: none) */
    int max_ulp;         /* tolerance (see the top comment: 0 for all) */
};

static const struct rtype types[] = {
    {LLMK_TYPE_Q5_1, "q5_1", 0, 31, {0, 2}, 0},
    {LLMK_TYPE_Q3_K, "q3_k", -4, 3, {108, -1}, 0},
    {LLMK_TYPE_Q4_K, "q4_k", 0, 15, {0, 2}, 0},
    {LLMK_TYPE_Q5_K, "q5_k", 0, 31, {0, 2}, 0},
    {LLMK_TYPE_Q6_K, "q6_k", -32, 31, {208, -1}, 0},
    {LLMK_TYPE_IQ4_XS, "iq4_xs", -127, 113, {0, -1}, 0},
    {LLMK_TYPE_MXFP4, "mxfp4", -12, 12, {-1, -1}, 0},
};
enum { NT = sizeof types / sizeof types[0] };

/* A finite f16 scale: half the time any finite bit pattern (zero,
 * subnormal, negative, huge), else an ordinary weight scale. */
static uint16_t f16_scale(void) {
    if (rnd() & 1) {
        uint16_t h = (uint16_t)rnd();
        if ((h & 0x7c00u) == 0x7c00u) h ^= 0x4000u; /* inf/NaN exponent -> finite */
        return h;
    }
    return llmk_fp32_to_fp16(0.05f * unif());
}

/* Distance in ulps of two non-NaN floats (0 for -0 vs +0). */
static int64_t ulp_dist(float a, float b) {
    if (a == b) return 0;
    int64_t ia = (int32_t)llmk_f32_bits(a), ib = (int32_t)llmk_f32_bits(b);
    if (ia < 0) ia = (int64_t)INT32_MIN - ia;
    if (ib < 0) ib = (int64_t)INT32_MIN - ib;
    return ia > ib ? ia - ib : ib - ia;
}

/* Compare every sub-block of one block against the codec's dequantization;
 * returns the number of mismatching elements (and v out of range). */
static int check_block(const struct rtype *rt, const unsigned char *blk, uint32_t elems) {
    float y[256];
    llmk_codec_get(rt->type)->dequantize(blk, y, elems);
    int bad = 0;
    for (int sub = 0; sub < (int)elems / 32; sub++) {
        struct llmk_r8_sub o;
        memset(&o, 0x5a, sizeof o); /* a field left unwritten shows */
        llmk_r8_read_sub(rt->type, blk, sub, &o);
        for (int j = 0; j < 32; j++) {
            float want = y[32 * sub + j];
            float got = (float)((double)o.s[j / 16] * o.v[j] + o.m);
            int ok = o.v[j] >= rt->vmin && o.v[j] <= rt->vmax && !isnan(got) && !isnan(want) &&
                     ulp_dist(got, want) <= rt->max_ulp;
            if (!ok && bad++ == 0)
                fprintf(stderr, "%s sub %d elem %d: v %d s %.9g m %.9g -> %.9g, codec %.9g\n", rt->name, sub, j,
                        o.v[j], (double)o.s[j / 16], (double)o.m, (double)got, (double)want);
        }
    }
    return bad;
}

/* Random bytes with finite f16 scales. */
static void test_random_blocks(const struct rtype *rt) {
    uint32_t bytes = llmk_type_block_bytes(rt->type), elems = llmk_type_block_elems(rt->type);
    unsigned char buf[1 + 256];
    unsigned char *blk = buf + 1; /* odd address: the reader must not assume alignment */
    int bad = 0;
    for (int rep = 0; rep < 4000; rep++) {
        for (uint32_t i = 0; i < bytes; i++) blk[i] = (uint8_t)rnd();
        for (int f = 0; f < 2; f++)
            if (rt->f16[f] >= 0) {
                uint16_t h = f16_scale();
                memcpy(blk + rt->f16[f], &h, sizeof h);
            }
        bad += check_block(rt, blk, elems);
    }
    if (bad) fprintf(stderr, "%s random blocks: %d mismatches\n", rt->name, bad);
    CHECK_EQ_INT(bad, 0);
}

/* The codec's quantization of random rows: plain, offset (the mins
 * matter), wide-ranging magnitudes, outliers, constants and zeros. */
static void fill_row(float *x, int kind) {
    float scale = powf(10.0f, 4.0f * unif() - 2.0f), off = kind == 1 ? 3.0f * scale * unif() : 0.0f;
    for (int i = 0; i < 256; i++) {
        switch (kind) {
        case 0: case 1: x[i] = scale * unif() + off; break;
        case 2: x[i] = (i % 32 < 16 ? scale : scale * 1e-3f) * unif(); break; /* halves differ in size */
        case 3: x[i] = scale * unif() * (rnd() % 17 == 0 ? 30.0f : 1.0f); break;
        case 4: x[i] = i < 128 ? -scale : scale; break;
        default: x[i] = 0.0f; break;
        }
    }
}

static void test_quantized(const struct rtype *rt) {
    uint32_t bytes = llmk_type_block_bytes(rt->type), elems = llmk_type_block_elems(rt->type);
    unsigned char q[1 + 256]; /* 256 elements of any of these types fit (Q6_K: 210 bytes) */
    float x[256];
    int bad = 0;
    for (int rep = 0; rep < 60; rep++) {
        fill_row(x, rep % 6);
        llmk_codec_get(rt->type)->quantize(x, q + 1, 256);
        for (uint32_t b = 0; b < 256 / elems; b++) bad += check_block(rt, q + 1 + b * bytes, elems);
    }
    if (bad) fprintf(stderr, "%s quantized blocks: %d mismatches\n", rt->name, bad);
    CHECK_EQ_INT(bad, 0);
}

static void test_supports(void) {
    for (uint32_t t = 0; t < LLMK_TYPE_COUNT_ + 8; t++) {
        int want = 0;
        for (int i = 0; i < NT; i++) want |= types[i].type == t;
        if (llmk_r8_read_supports(t) != want) fprintf(stderr, "supports(%u) != %d\n", t, want);
        CHECK_EQ_INT(llmk_r8_read_supports(t), want);
    }
}

int main(void) {
    test_supports();
    for (int i = 0; i < NT; i++) {
        CHECK(llmk_codec_get(types[i].type) != NULL);
        test_random_blocks(&types[i]);
        test_quantized(&types[i]);
    }
    return check_summary("r8_read");
}
