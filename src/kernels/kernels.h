/* The CPU kernel table: every kernel the library runs on the CPU, chosen once
 * per process from the features this CPU has (src/cpu.c, masked by
 * llmk_config.cpu_mask) and llmk_config.ref_kernels (every entry its scalar
 * _ref). ggml's type_traits_cpu idea with a file per ISA: the scalar
 * references live beside their formats (src/codec/ and the kernel files), each
 * *_avx2.c / *_avx512.c / *_neon.c file defines its ISA's versions, and
 * src/kernels/kernels.c is the one place that puts them in the table. Nothing
 * else chooses a kernel: the executor plan (src/plan.c), the f32 path, the
 * public matmul and the attention read their functions from here.
 *
 * Every fast entry gives the same bits as the _ref entry it replaces
 * (tests/test_codec_dot.c, test_attn.c, test_a16.c, test_model.c check each
 * pair), so the choice never changes a result, only its speed.
 *
 * Names follow ggml's convention where a kernel is specific to a weight
 * layout: weight type x layout x activation type, e.g. gemm_q4_1_r8_a16 (Q4_1
 * weights repacked 8 rows at a time, src/kernels/r8.h, times int16
 * activations, src/kernels/a16.h) and gemm_q4_1_x2_q8_1x (Q4_1 with block
 * pairs side by side, src/kernels/q4_1_x2.h, times the matching rearranged Q8_1). */
#ifndef LLMK_KERNELS_KERNELS_H
#define LLMK_KERNELS_KERNELS_H

#include "codec/codec.h"
#include "kernels/attn.h"
#include "kernels/dsa.h"
#include "kernels/glu.h"
#include "kernels/norm_fused.h"
#include "kernels/moe.h"
#include "kernels/r8.h"
#include "kernels/q4_1_x2.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Activation formats a quantized matmul reads (a bit each in a plan's
 * qmask): the codecs' own Q8_0 / Q8_1 / Q8_K, Q8_1X (Q8_1 rearranged for
 * the x2 Q4_1 layout), A16 (int16, src/kernels/a16.h) and A8 (int8 in the
 * r8 kernels' order, src/kernels/a8.h). */
enum llmk_act_form {
    LLMK_ACT_Q8_0 = 0,
    LLMK_ACT_Q8_1,
    LLMK_ACT_Q8_K,
    LLMK_ACT_Q8_1X,
    LLMK_ACT_A16,
    LLMK_ACT_A8,
    LLMK_ACT_FORMS
};

/* Quantize elements [e0, e1) of the f32 row x (k elements) into the
 * activation row that starts at row (the whole row's layout; only the blocks
 * of [e0, e1) are written, so any split of a row gives the same bytes). e0
 * and e1 are multiples of the form's block (llmk_kernels.act_block), or e1 =
 * k. Returns nonzero when one of those elements is NaN or infinite: the
 * matmul that reads the bytes would turn it into ordinary numbers. */
typedef int (*llmk_act_quant_row_fn)(const float *x, int64_t k, int64_t e0, int64_t e1, void *row);

/* Multi-activation dot: y[i * y_stride + r] = dot(weight row r, activation
 * row i) for r in [0, nrows), i in [0, m); weight rows w_stride bytes apart,
 * activation rows a_stride bytes apart (the codec's activation form). Each
 * element is bitwise identical to the type's vec_dot for that pair, whatever
 * nrows, m or the grouping: it only reuses each unpacked weight block across
 * several activation rows. */
typedef void (*llmk_dotm_fn)(int64_t k, const void *w, size_t w_stride, int64_t nrows, const void *a,
                             size_t a_stride, int64_t m, float *y, size_t y_stride);

/* Per GGUF type (ggml's type_traits_cpu). */
struct llmk_type_kernels {
    llmk_dot_fn vec_dot;      /* rows . one activation row (codec.h); NULL: no codec */
    llmk_dotm_fn vec_dotm;    /* rows . several activation rows; NULL: loop vec_dot */
    const char *vec_dot_name; /* "q4_1_avx2", "q8_0_ref" */
};

struct llmk_kernels {
    const char *name; /* the widest ISA in use: "ref", "avx2", "avx512", "neon" */
    unsigned cpu;     /* the features it was chosen for (enum llmk_cpu_feature) */
    struct llmk_type_kernels type[LLMK_TYPE_COUNT_];

    /* activations */
    llmk_act_quant_row_fn act_quant[LLMK_ACT_FORMS];
    uint32_t act_block[LLMK_ACT_FORMS]; /* elements per block of each form */

    /* matmuls on repacked weights; NULL: the layout is not available here */
    llmk_gemm_r8_a16_fn gemm_r8_a16;        /* Q4_1 and Q8_0 in the r8 layout x A16 */
    llmk_gemm_r8_a16_fn gemm_r8_a8;         /* Q4_0 and Q4_1 in the r8 layout x A8 */
    unsigned r8_forms;                      /* record forms both r8 kernels read beyond the portable
                                             * ones (LLMK_R8_COMPACT or 0; r8.h) */
    llmk_gemm_q4_1_x2_fn gemm_q4_1_x2_q8_1x; /* Q4_1 in the x2 layout x Q8_1X */
    /* A16 products on the GGUF rows (no repacking) of any type r8.h knows:
     * the reference of gemm_r8_a16, and the route where that is NULL */
    void (*gemm_rows_a16)(uint32_t type, int64_t k, const void *w, size_t w_stride, int64_t r0, int64_t r1,
                          const void *act, size_t a_stride, int64_t m, float *y, size_t y_stride);
    /* the same for A8 (a8.h) */
    void (*gemm_rows_a8)(uint32_t type, int64_t k, const void *w, size_t w_stride, int64_t r0, int64_t r1,
                         const void *act, size_t a_stride, int64_t m, float *y, size_t y_stride);

    /* f32 vector ops (the executor's and the f32 path's) */
    float (*f32_dot)(const float *a, const float *b, int64_t n);
    /* many f32_dots at once, each with its bits (llmk_f32_dots) */
    void (*f32_dots)(const float *w, size_t ws, int64_t nr, const float *x, size_t xs, int64_t nt, int64_t n, float *y,
                     size_t ys);
    /* the dot of one Q4_0/Q4_1/Q8_0 row with f32 x, decoded on the fly; 0
     * for other types (then dequantize the row); NULL: none */
    int (*f32_rowdot)(uint32_t type, const void *row, const float *x, int64_t n, float *out);
    void (*rmsnorm)(float *out, const float *x, const float *w, int64_t n, float eps);
    void (*rope)(float *x, int n_heads, int head_dim, const float *cs, bool neox);
    llmk_swiglu_fn swiglu;
    void (*add)(float *x, const float *y, int64_t n);           /* x[i] += y[i] */
    void (*to_f16)(const float *src, uint16_t *dst, int64_t n); /* llmk_fp32_to_fp16 per element */
    int64_t (*argmax)(const float *x, int64_t n);               /* first maximum, NaNs skipped; -1: none */
    bool (*nonfinite)(const float *x, int64_t n);               /* any NaN or infinity */

    /* attention over one chunk of a cache, per KV type (attn.h); multi:
     * several queries per K/V pass, NULL where there is none. min_head_dim
     * multiple: head sizes the fast chunks take (others use the ref chunks) */
    llmk_attn_chunk_fn attn_f32, attn_f16, attn_q8_0;
    llmk_attn_multi_fn attn_multi_f32, attn_multi_f16;
    llmk_attn_merge_fn attn_merge; /* a query's chunk partials into its output */
    int attn_head_multiple;

    uint64_t (*read_xor)(const void *p, size_t bytes); /* the bandwidth probe (readbw.h) */

    /* DeepSeek sparse attention kernels (dsa.h): scalar or AVX2, the same bits */
    const struct llmk_dsa_kernels *dsa;
    /* seed 002's norm fusions (norm_fused.h): scalar or AVX2, the same bits */
    const struct llmk_norm_kernels *norm;
    /* seed 002's GLU variants beside swiglu (glu.h): scalar or AVX2, the same bits */
    const struct llmk_glu_kernels *glu;
    /* mixture of experts (moe.h): the router a one-pass selection (scalar,
     * the reference's bits), the combine an AVX2 form */
    void (*moe_router)(const float *logits, int n_expert, int k, bool norm, int32_t *sel, float *w);
    llmk_moe_combine_fn moe_combine;
};

/* The table this process uses, filled on first use; and the scalar one. */
const struct llmk_kernels *llmk_kernels(void);
const struct llmk_kernels *llmk_kernels_ref(void);

/* The ISA files' parts of the table: each sets the entries it has. */
void llmk_kernels_dot_avx2(struct llmk_type_kernels *type);
void llmk_kernels_dot_kq_avx2(struct llmk_type_kernels *type);
void llmk_kernels_dot_neon(struct llmk_type_kernels *type);
void llmk_kernels_dot_nvfp4_avx2(struct llmk_type_kernels *type);
/* attention chunks, swiglu, add, to_f16: the references (attn.c), AVX2 and
 * AVX-512 (attn_avx2.c, attn_avx512.c; the latter over the AVX2 entries) */
void llmk_kernels_attn_ref(struct llmk_kernels *k);
void llmk_kernels_attn_avx2(struct llmk_kernels *k);
void llmk_kernels_attn_avx512(struct llmk_kernels *k);

/* CPU features (src/cpu.c; the bits are enum llmk_cpu_feature): detected,
 * masked by llmk_config.cpu_mask. */
unsigned llmk_cpu_detect(void);

#endif
