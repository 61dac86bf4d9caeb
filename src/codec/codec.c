/* Codec registry: the reference table per type id and the row conversions of
 * the public API. (The fast kernels are in the CPU kernel table,
 * src/kernels/kernels.h.) */
#include "codec/codec.h"
#include "codec/nvfp4.h"
#include "internal.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const struct llmk_codec *codec_tab[LLMK_TYPE_COUNT_];
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static const char *codec_names[LLMK_TYPE_COUNT_ + 1]; /* NULL-terminated */
static size_t n_codec_names;

static void codec_init(void) {
    for (size_t i = 0; i < llmk_codecs_legacy_n; i++) codec_tab[llmk_codecs_legacy[i].type] = &llmk_codecs_legacy[i];
    for (size_t i = 0; i < llmk_codecs_k_n; i++) codec_tab[llmk_codecs_k[i].type] = &llmk_codecs_k[i];
    codec_tab[LLMK_TYPE_NVFP4] = &llmk_codecs_nvfp4[0];
    for (uint32_t t = 0; t < LLMK_TYPE_COUNT_; t++)
        if (codec_tab[t]) codec_names[n_codec_names++] = llmk_type_name(t);
}

const struct llmk_codec *llmk_codec_get(uint32_t type) {
    pthread_once(&init_once, codec_init);
    return type < LLMK_TYPE_COUNT_ ? codec_tab[type] : NULL;
}

const char *const *llmk_codecs(size_t *n) {
    pthread_once(&init_once, codec_init);
    if (n) *n = n_codec_names;
    return codec_names;
}

/* Shared argument checks of the row conversions. */
static int row_args(const char *what, uint32_t type, const void *a, const void *b, int64_t n,
                    const struct llmk_codec **c) {
    if (!a || !b) return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: NULL buffer", what);
    if (n < 0) return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: negative length %lld", what, (long long)n);
    *c = llmk_codec_get(type);
    if (!*c) {
        const char *name = llmk_type_name(type);
        if (name) return llmk_fail(LLMK_UNSUPPORTED, "%s: no codec for type %s (%u)", what, name, type);
        return llmk_fail(LLMK_UNKNOWN_TYPE, "%s: unknown type id %u", what, type);
    }
    uint64_t bytes;
    return llmk_row_bytes(type, (uint64_t)n, &bytes);
}

float llmk_tensor_scale(uint32_t type, float amax) {
    return type == LLMK_TYPE_NVFP4 ? llmk_nvfp4_tensor_scale(&amax, 1) : 1.0f;
}

int llmk_quantize_row_scaled(uint32_t type, const float *src, void *dst, int64_t n, float scale) {
    if (scale == 1.0f) return llmk_quantize_row(type, src, dst, n);
    llmk_error_clear();
    const struct llmk_codec *c;
    int st = row_args("quantize_row_scaled", type, src, dst, n, &c);
    if (st != LLMK_OK) return st;
    if (type != LLMK_TYPE_NVFP4 || !(scale > 0) || !isfinite(scale))
        return llmk_fail(LLMK_INVALID_ARGUMENT, "quantize_row_scaled: scale %g for type %s (only NVFP4 takes one, "
                         "positive and finite)", (double)scale, llmk_type_name(type));
    llmk_nvfp4_quantize_scaled(src, n, scale, dst);
    return LLMK_OK;
}

int llmk_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n) {
    llmk_error_clear();
    const struct llmk_codec *c;
    int st = row_args("dequantize_row", type, src, dst, n, &c);
    if (st != LLMK_OK) return st;
    c->dequantize(src, dst, n);
    return LLMK_OK;
}

int llmk_quantize_row(uint32_t type, const float *src, void *dst, int64_t n) {
    llmk_error_clear();
    const struct llmk_codec *c;
    int st = row_args("quantize_row", type, src, dst, n, &c);
    if (st != LLMK_OK) return st;
    c->quantize(src, dst, n);
    return LLMK_OK;
}
