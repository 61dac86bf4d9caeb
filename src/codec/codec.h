/* Internal codec interface: one table entry per GGUF codec with its scalar
 * reference kernels (the fast ones are in src/kernels/kernels.h).
 *
 * Every weight codec pairs with an activation form for its dot product:
 *   F32, F16, BF16                      -> f32 activations
 *   Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4,
 *   NVFP4                               -> Q8_0 activations
 *   Q4_1, Q5_1, Q8_1                    -> Q8_1 activations (s carries the min term)
 *   Q2_K..Q6_K, Q8_K, IQ4_XS            -> Q8_K activations
 * Activations are quantized with the act codec's quantize function. */
#ifndef LLMK_CODEC_CODEC_H
#define LLMK_CODEC_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "llmk.h"

/* n is whole blocks (checked by the caller). */
typedef void (*llmk_dequant_fn)(const void *src, float *dst, int64_t n);
typedef void (*llmk_quant_fn)(const float *src, void *dst, int64_t n);
/* y[r] = dot(row r of w, a) for r in [0, nrows): each row holds k elements
 * (whole blocks) and starts w_stride bytes after the previous one; a is one
 * activation row of k elements in the codec's activation form. Each y[r]
 * depends only on its own row and a (never on nrows), so any split of the
 * rows gives bitwise identical results. */
typedef void (*llmk_dot_fn)(int64_t k, const void *w, size_t w_stride, int64_t nrows,
                            const void *a, float *y);

struct llmk_codec {
    uint32_t type;
    uint32_t act_type;            /* LLMK_TYPE_F32, _Q8_0, _Q8_1 or _Q8_K */
    llmk_dequant_fn dequantize;   /* _ref */
    llmk_quant_fn quantize;       /* _ref */
    llmk_dot_fn dot;              /* _ref */
};

/* The activation forms' quantizers: the Q8_0, Q8_1 and Q8_K codecs'
 * quantize (the same bytes), returning nonzero when an element is NaN or
 * infinite. Their maximum drops a NaN, so without the result a corrupt
 * activation would pass on as ordinary numbers; the executor fails instead. */
typedef int (*llmk_act_quant_fn)(const float *src, void *dst, int64_t n);
int llmk_quantize_act_q8_0(const float *src, void *dst, int64_t n);
int llmk_quantize_act_q8_1(const float *src, void *dst, int64_t n);
int llmk_quantize_act_q8_k(const float *src, void *dst, int64_t n);

/* The codec of a type id, or NULL when llmk has none. */
const struct llmk_codec *llmk_codec_get(uint32_t type);

/* Per-family reference tables (src/codec/legacy.c, src/codec/kquants.c). */
extern const struct llmk_codec llmk_codecs_legacy[];
extern const size_t llmk_codecs_legacy_n;
extern const struct llmk_codec llmk_codecs_nvfp4[]; /* src/codec/nvfp4.c: one entry */
extern const struct llmk_codec llmk_codecs_k[];
extern const size_t llmk_codecs_k_n;

/* Read a little-endian f16 field of a block without alignment assumptions. */
static inline uint16_t llmk_ld_u16(const void *p) {
    uint16_t v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}

#endif
