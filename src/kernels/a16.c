/* 16-bit activations: quantization (see a16.h for the layout). */
#include "kernels/a16.h"
#include "kernels/r8.h"

#include "codec/blocks.h"
#include "codec/half.h"
#include "codec/codec.h"
#include "internal.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

size_t llmk_a16_row_bytes(int64_t k) { return (size_t)(k / LLMK_QK) * (LLMK_QK * 2 + 16); }

/* x rounded to nearest, ties to even, for |x| < 2^22: adding 1.5 * 2^23
 * leaves only the integer part in the mantissa (the build never enables
 * -ffast-math, which could fold the two operations away). */
static inline float round_even(float x) { return (x + 12582912.0f) - 12582912.0f; }

/* max |x| over a block as the largest bit pattern with the sign cleared:
 * for non-negative floats the integer order is the float order, and NaN and
 * infinity sort above every finite value, so the maximum keeps them (fmaxf
 * drops a NaN) and one compare per block tells a non-finite input. */
int llmk_a16_quantize_row_ref(const float *x, int64_t k, int64_t e0, int64_t e1, void *dst) {
    struct llmk_a16_row a = llmk_a16_row_at(dst, k);
    int16_t *q = a.q;
    float *dd = a.d, *ss = a.s, *s16 = a.h;
    int bad = 0;
    for (int64_t b = e0 / LLMK_QK; b < e1 / LLMK_QK; b++) {
        const float *xb = x + b * LLMK_QK;
        int16_t *qb = q + b * LLMK_QK;
        uint32_t mb = 0;
        for (int j = 0; j < LLMK_QK; j++) {
            uint32_t u;
            memcpy(&u, &xb[j], sizeof u);
            u &= 0x7fffffffu;
            mb = u > mb ? u : mb;
        }
        bad |= mb >= 0x7f800000u; /* exponent all ones: infinity or NaN */
        float amax;
        memcpy(&amax, &mb, sizeof amax);
        float d = amax / 32767.0f, id = d == 0 ? 0.0f : 1.0f / d;
        bool tiny = id > FLT_MAX; /* d below 2^-128: 1 / d overflows, divide instead */
        int32_t sum[2] = {0, 0};
        for (int j = 0; j < LLMK_QK; j++) {
            float v = round_even(tiny ? xb[j] / d : xb[j] * id);
            v = v > 32767.0f ? 32767.0f : v < -32767.0f ? -32767.0f : v;
            qb[j] = v == v ? (int16_t)v : 0; /* NaN input: 0 rather than an undefined conversion */
            sum[j / 16] += qb[j];
        }
        dd[b] = d;
        ss[b] = d * (float)(sum[0] + sum[1]); /* |sum| <= 32 * 32767 < 2^24: exact */
        s16[2 * b] = d * (float)sum[0], s16[2 * b + 1] = d * (float)sum[1];
    }
    return bad;
}

int llmk_a16_supports(uint32_t wtype) { return llmk_r8_layout(wtype) >= 0; }
