/* Rounding f32 to the OCP minifloats the FP8/FP4 codecs and the DSA QAT
 * kernels use: FP8-E4M3FN (bias 7, 3 mantissa bits, subnormal step 2^-9,
 * largest 448) and FP4-E2M1 (bias 1, 1 mantissa bit, step 0.5, largest 6).
 * Round to nearest, ties to even, as ml_dtypes' casts do; values past the
 * largest finite saturate to it (an ml_dtypes E4M3FN cast gives NaN there);
 * NaN stays NaN; the sign is kept (-0 too). The result is an f32 holding the
 * minifloat's value exactly. */
#ifndef LLMK_CODEC_MINIFLOAT_H
#define LLMK_CODEC_MINIFLOAT_H

float llmk_round_e4m3(float x);
float llmk_round_e2m1(float x);

#endif
