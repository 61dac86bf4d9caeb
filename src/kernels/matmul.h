/* Quantized matmul y = x . W^T, internal interface.
 *
 * For the CPU executor that runs whole phases inside one pool region:
 * llmk_qmm_init validates a problem once (no allocation; the caller supplies
 * the activation scratch of llmk_qmm_act_bytes), then every worker calls
 * llmk_qmm_run(plan, pool, ith, nth). The public llmk_quantized_matmul wraps
 * the two with its own scratch. */
#ifndef LLMK_KERNELS_MATMUL_H
#define LLMK_KERNELS_MATMUL_H

#include "codec/codec.h"
#include "pool.h"

/* Multi-activation dot: y[i * y_stride + r] = dot(weight row r, activation
 * row i) for r in [0, nrows), i in [0, m); weight rows w_stride bytes apart,
 * activation rows a_stride bytes apart (the codec's activation form). Each
 * element is bitwise identical to what the codec's row kernel
 * (llmk_codec_dot) gives for that pair, whatever nrows, m or the grouping:
 * it only reuses each unpacked weight block across several activation rows. */
typedef void (*llmk_dotm_fn)(int64_t k, const void *w, size_t w_stride, int64_t nrows,
                             const void *a, size_t a_stride, int64_t m, float *y, size_t y_stride);

/* The multi-activation kernel paired with the dot kernel this process uses
 * for `type`, or NULL when there is none (then loop llmk_codec_dot over the
 * activation rows: same bits, less reuse). */
llmk_dotm_fn llmk_codec_dotm(uint32_t type);
/* src/codec/dot_avx2.c: the multi-activation kernel matching one of its own
 * row kernels, else NULL. Call only when the CPU has AVX2. */
llmk_dotm_fn llmk_avx2_dotm(llmk_dot_fn dot);

enum llmk_qmm_route { LLMK_QMM_AUTO = 0, LLMK_QMM_MATVEC, LLMK_QMM_SMALL, LLMK_QMM_TILED };

struct llmk_qmm {
    uint32_t wtype, act_type;
    const void *w;
    size_t w_stride;   /* bytes per weight row */
    int64_t n, k, m;
    const float *x;    /* m rows, stride k */
    float *y;          /* m rows, stride n */
    void *act;         /* quantized activations, m rows of act_stride bytes (or x for f32) */
    size_t act_stride;
    int route;         /* resolved enum llmk_qmm_route */
    llmk_dot_fn dot;
    llmk_dotm_fn dotm;       /* NULL: no multi-activation kernel for this codec */
    llmk_quant_fn act_quant; /* NULL when activations stay f32 */
};

/* Bytes of activation scratch for m rows of k (0 for f32-activation codecs).
 * LLMK_OK or a status for an unknown type / k not whole blocks / overflow. */
int llmk_qmm_act_bytes(uint32_t wtype, int64_t m, int64_t k, size_t *bytes);
/* Validate and plan; route LLMK_QMM_AUTO picks by m (or LLMK_MATMUL_ROUTE). */
int llmk_qmm_init(struct llmk_qmm *p, uint32_t wtype, const void *w, int64_t n, int64_t k,
                  const float *x, int64_t m, float *y, void *act_scratch, int route);
/* Worker ith of nth inside a pool region: quantize its share of activation
 * rows, cross the pool barrier, compute its share of output rows. Every
 * worker of the region must call it (the barrier counts them). */
void llmk_qmm_run(const struct llmk_qmm *p, llmk_pool *pool, int ith, int nth);

#endif
