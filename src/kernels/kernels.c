/* The CPU kernel table (kernels.h): the scalar references, then each ISA's
 * entries over them, once per process. */
#include "kernels/kernels.h"

#include "codec/blocks.h"
#include "internal.h"
#include "kernels/a16.h"
#include "kernels/a8.h"
#include "kernels/ops_f32.h"
#include "kernels/readbw.h"

#include <pthread.h>
#include <stdio.h>

/* The codec forms' quantizers in the row-and-range shape of the others: the
 * blocks of [e0, e1) land where they lie in the whole row. */
static int act_q8_0(const float *x, int64_t k, int64_t e0, int64_t e1, void *row) {
    (void)k;
    return llmk_quantize_act_q8_0(x + e0, (unsigned char *)row + (size_t)(e0 / LLMK_QK) * llmk_type_block_bytes(LLMK_TYPE_Q8_0),
                                  e1 - e0);
}
static int act_q8_1(const float *x, int64_t k, int64_t e0, int64_t e1, void *row) {
    (void)k;
    return llmk_quantize_act_q8_1(x + e0, (unsigned char *)row + (size_t)(e0 / LLMK_QK) * llmk_type_block_bytes(LLMK_TYPE_Q8_1),
                                  e1 - e0);
}
static int act_q8_k(const float *x, int64_t k, int64_t e0, int64_t e1, void *row) {
    (void)k;
    return llmk_quantize_act_q8_k(x + e0, (unsigned char *)row + (size_t)(e0 / LLMK_QK_K) * llmk_type_block_bytes(LLMK_TYPE_Q8_K),
                                  e1 - e0);
}

static void ref_table(struct llmk_kernels *k) {
    static char names[LLMK_TYPE_COUNT_][24]; /* "<codec>_ref": static, nothing to free */
    k->name = "ref";
    for (uint32_t t = 0; t < LLMK_TYPE_COUNT_; t++) {
        const struct llmk_codec *c = llmk_codec_get(t);
        if (!c) continue;
        snprintf(names[t], sizeof names[t], "%s_ref", llmk_type_name(t));
        k->type[t] = (struct llmk_type_kernels){.vec_dot = c->dot, .vec_dot_name = names[t]};
    }
    k->act_quant[LLMK_ACT_Q8_0] = act_q8_0, k->act_block[LLMK_ACT_Q8_0] = LLMK_QK;
    k->act_quant[LLMK_ACT_Q8_1] = act_q8_1, k->act_block[LLMK_ACT_Q8_1] = LLMK_QK;
    k->act_quant[LLMK_ACT_Q8_K] = act_q8_k, k->act_block[LLMK_ACT_Q8_K] = LLMK_QK_K;
    k->act_quant[LLMK_ACT_Q8_1X] = llmk_q8_1x_quantize, k->act_block[LLMK_ACT_Q8_1X] = 2 * LLMK_QK;
    k->act_quant[LLMK_ACT_A16] = llmk_a16_quantize_row_ref, k->act_block[LLMK_ACT_A16] = LLMK_QK;
    k->act_quant[LLMK_ACT_A8] = llmk_a8_quantize_row_ref, k->act_block[LLMK_ACT_A8] = LLMK_QK;
    k->gemm_rows_a16 = llmk_r8_ref;
    k->gemm_rows_a8 = llmk_r8_a8_ref;
    k->f32_dot = llmk_f32_dot;
    k->f32_dots = llmk_f32_dots;
    k->rmsnorm = llmk_f32_rmsnorm_ref;
    k->rope = llmk_f32_rope_ref;
    k->argmax = llmk_f32_argmax;
    k->nonfinite = llmk_f32_nonfinite;
    llmk_kernels_attn_ref(k);
    k->read_xor = llmk_read_xor_ref;
    k->dsa = &llmk_dsa_kernels_ref;
    k->norm = &llmk_norm_kernels_ref;
    k->glu = &llmk_glu_kernels_ref;
    k->moe_router = llmk_moe_router_ref;
    k->moe_combine = llmk_moe_combine_ref;
}

#if defined(__x86_64__)
static void x86_table(struct llmk_kernels *k, unsigned f) {
    if (!(f & LLMK_CPU_AVX2)) return;
    k->name = "avx2";
    llmk_kernels_dot_avx2(k->type);
    llmk_kernels_dot_kq_avx2(k->type);
    llmk_kernels_dot_nvfp4_avx2(k->type);
    k->act_quant[LLMK_ACT_A16] = (f & LLMK_CPU_AVX512) ? llmk_a16_quantize_row_avx512 : llmk_a16_quantize_row_avx2;
    k->act_quant[LLMK_ACT_A8] = (f & LLMK_CPU_AVX512) ? llmk_a8_quantize_row_avx512 : llmk_a8_quantize_row_avx2;
    k->gemm_r8_a16 = (f & LLMK_CPU_AVX512_VNNI) ? llmk_gemm_r8_a16_avx512 : llmk_gemm_r8_a16_avx2;
    k->gemm_r8_a8 = (f & LLMK_CPU_AVX512_VNNI) ? llmk_gemm_r8_a8_avx512 : llmk_gemm_r8_a8_avx2;
    /* The compact K-quant records cost the kernels a few instructions a
     * block and save a quarter of the bytes a decode streams: the AVX-512
     * kernels read them (docs/executor.md, "Compact records"). */
    k->r8_forms = (f & LLMK_CPU_AVX512_VNNI) ? LLMK_R8_COMPACT : 0;
    k->gemm_q4_1_x2_q8_1x = llmk_gemm_q4_1_x2_q8_1x_avx2;
    k->f32_dot = llmk_f32_dot_avx2;
    k->f32_dots = llmk_f32_dots_avx2;
    k->f32_rowdot = llmk_f32_rowdot_avx2;
    k->rmsnorm = llmk_f32_rmsnorm_avx2;
    k->rope = llmk_f32_rope_avx2;
    k->argmax = llmk_f32_argmax_avx2;
    k->nonfinite = llmk_f32_nonfinite_avx2;
    k->read_xor = llmk_read_xor_avx2;
    k->dsa = &llmk_dsa_kernels_avx2;
    k->norm = &llmk_norm_kernels_avx2;
    k->glu = &llmk_glu_kernels_avx2;
    k->moe_combine = llmk_moe_combine_avx2;
    if (f & LLMK_CPU_AVX512) {
        llmk_kernels_attn_avx512(k);
        k->name = "avx512";
    } else {
        llmk_kernels_attn_avx2(k);
    }
}
#endif

static struct llmk_kernels ref_k, chosen_k;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void fill(void) {
    ref_table(&ref_k);
    chosen_k = ref_k;
    chosen_k.cpu = llmk_cpu_detect();
    if (llmk_config_kernels()->ref_kernels) return;
    chosen_k.moe_router = llmk_moe_router_topk; /* scalar: any CPU */
#if defined(__x86_64__)
    x86_table(&chosen_k, chosen_k.cpu);
#elif defined(__aarch64__)
    if (chosen_k.cpu & LLMK_CPU_NEON) {
        llmk_kernels_dot_neon(chosen_k.type);
        chosen_k.name = "neon";
    }
#endif
}

const struct llmk_kernels *llmk_kernels(void) {
    pthread_once(&once, fill);
    return &chosen_k;
}

const struct llmk_kernels *llmk_kernels_ref(void) {
    pthread_once(&once, fill);
    return &ref_k;
}

/* "cpu: avx2 fma f16c ...", then "<type>: <kernel>" per codec (llmk info --system). */
static char features_text[2048];
static pthread_once_t features_once = PTHREAD_ONCE_INIT;

static void describe(void) {
    const struct llmk_kernels *k = llmk_kernels();
    unsigned f = k->cpu;
    size_t o = (size_t)snprintf(features_text, sizeof features_text, "cpu:%s%s%s%s%s%s%s\n", f ? "" : " scalar",
                                (f & LLMK_CPU_AVX2) ? " avx2 fma f16c" : "",
                                (f & LLMK_CPU_AVX512) ? " avx512f/bw/vl/dq" : "",
                                (f & LLMK_CPU_AVX512_VNNI) ? " avx512vnni" : "",
                                (f & LLMK_CPU_AVX512_BF16) ? " avx512bf16" : "", (f & LLMK_CPU_NEON) ? " neon" : "",
                                (f & LLMK_CPU_NEON_DOTPROD) ? " dotprod" : "");
    for (uint32_t t = 0; t < LLMK_TYPE_COUNT_ && o < sizeof features_text; t++)
        if (k->type[t].vec_dot)
            o += (size_t)snprintf(features_text + o, sizeof features_text - o, "%s: %s\n", llmk_type_name(t),
                                  k->type[t].vec_dot_name);
}

const char *llmk_cpu_features(void) {
    pthread_once(&features_once, describe);
    return features_text;
}
