/* Codec registry: the reference table per type id, the row conversions of
 * the public API, and the start-up choice of dot kernel per codec. */
#include "codec/codec.h"
#include "internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct llmk_codec *codec_tab[LLMK_TYPE_COUNT_];
static llmk_dot_fn dot_tab[LLMK_TYPE_COUNT_];
static const char *dot_names[LLMK_TYPE_COUNT_];
static unsigned cpu_flags;
static char features_text[2048];
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static const char *codec_names[LLMK_TYPE_COUNT_ + 1]; /* NULL-terminated */
static size_t n_codec_names;

static void ref_names(void) {
    /* "<codec>_ref" strings live in a static pool: no allocation to free */
    static char pool[LLMK_TYPE_COUNT_][24];
    for (uint32_t t = 0; t < LLMK_TYPE_COUNT_; t++) {
        if (!codec_tab[t]) continue;
        snprintf(pool[t], sizeof pool[t], "%s_ref", llmk_type_name(t));
        dot_names[t] = pool[t];
        dot_tab[t] = codec_tab[t]->dot;
    }
}

static void codec_init(void) {
    for (size_t i = 0; i < llmk_codecs_legacy_n; i++) codec_tab[llmk_codecs_legacy[i].type] = &llmk_codecs_legacy[i];
    for (size_t i = 0; i < llmk_codecs_k_n; i++) codec_tab[llmk_codecs_k[i].type] = &llmk_codecs_k[i];
    ref_names();
    for (uint32_t t = 0; t < LLMK_TYPE_COUNT_; t++)
        if (codec_tab[t]) codec_names[n_codec_names++] = llmk_type_name(t);
    cpu_flags = llmk_cpu_detect();
    int ref_only = llmk_config_kernels()->ref_kernels;
    if (!ref_only) {
#if defined(__x86_64__)
        if (cpu_flags & LLMK_CPU_AVX2) llmk_codec_register_avx2(dot_tab, dot_names);
#elif defined(__aarch64__)
        if (cpu_flags & LLMK_CPU_NEON) llmk_codec_register_neon(dot_tab, dot_names);
#endif
    }
    size_t o = 0;
    o += (size_t)snprintf(features_text + o, sizeof features_text - o, "cpu:%s%s%s%s%s%s%s\n",
                          cpu_flags ? "" : " scalar", (cpu_flags & LLMK_CPU_AVX2) ? " avx2 fma f16c" : "",
                          (cpu_flags & LLMK_CPU_AVX512) ? " avx512f/bw/vl/dq" : "",
                          (cpu_flags & LLMK_CPU_AVX512_VNNI) ? " avx512vnni" : "",
                          (cpu_flags & LLMK_CPU_AVX512_BF16) ? " avx512bf16" : "",
                          (cpu_flags & LLMK_CPU_NEON) ? " neon" : "",
                          (cpu_flags & LLMK_CPU_NEON_DOTPROD) ? " dotprod" : "");
    for (uint32_t t = 0; t < LLMK_TYPE_COUNT_ && o < sizeof features_text; t++)
        if (codec_tab[t])
            o += (size_t)snprintf(features_text + o, sizeof features_text - o, "%s: %s\n",
                                  llmk_type_name(t), dot_names[t]);
}

const struct llmk_codec *llmk_codec_get(uint32_t type) {
    pthread_once(&init_once, codec_init);
    return type < LLMK_TYPE_COUNT_ ? codec_tab[type] : NULL;
}

llmk_dot_fn llmk_codec_dot(uint32_t type, const char **kernel_name) {
    pthread_once(&init_once, codec_init);
    if (type >= LLMK_TYPE_COUNT_ || !codec_tab[type]) return NULL;
    if (kernel_name) *kernel_name = dot_names[type];
    return dot_tab[type];
}

const char *llmk_cpu_features(void) {
    pthread_once(&init_once, codec_init);
    return features_text;
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
