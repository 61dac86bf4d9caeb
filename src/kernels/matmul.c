/* The public quantized matmul y = x . W^T (llmk.h) on the kernel table.
 *
 * Every y element is one (weight row, activation row) product of the type's
 * vec_dot, or of its vec_dotm, which gives the same bits (kernels.h); so the
 * row split across workers and the tiling below change the loop order only,
 * never the bits of y.
 *
 * Tiling: a worker walks its band of weight rows in chunks of CHUNK rows, and
 * each chunk meets the activation rows TILE_M at a time, so both operands are
 * reused from cache. One activation row streams the whole band (the row
 * kernel takes 4 weight rows a pass: 15-25% faster than 1-row tiles of
 * vec_dotm there). Sizes measured on the 2-core Zen 3 dev VM with the
 * earlier bench/bench_routes: 16..128 rows x 16..64 activation rows were flat
 * within the noise; 4-8 row chunks were 5-30% slower. */
#include "internal.h"
#include "kernels/kernels.h"
#include "pool.h"

#include <stdlib.h>
#include <string.h>

enum { CHUNK = 64, TILE_M = 32 };

struct qmm {
    const struct llmk_type_kernels *tk;
    llmk_act_quant_row_fn quant; /* NULL: f32 activations */
    const char *w;
    size_t w_stride, act_stride;
    int64_t n, k, m;
    const float *x;
    float *y;
    unsigned char *act;
    llmk_pool *pool;
};

static size_t type_align(uint32_t t) {
    return t == LLMK_TYPE_MXFP4 ? 1 : (t == LLMK_TYPE_F32 || t == LLMK_TYPE_Q8_K) ? 4 : 2;
}

static void qmm_worker(void *ctx, int ith, int nth) {
    const struct qmm *p = ctx;
    int64_t lo, hi;
    if (p->quant) {
        llmk_split_range(p->m, ith, nth, &lo, &hi);
        for (int64_t i = lo; i < hi; i++)
            p->quant(p->x + i * p->k, p->k, 0, p->k, p->act + (size_t)i * p->act_stride);
        llmk_pool_barrier(p->pool);
    }
    llmk_split_range(p->n, ith, nth, &lo, &hi);
    if (p->m == 1) {
        p->tk->vec_dot(p->k, p->w + (size_t)lo * p->w_stride, p->w_stride, hi - lo, p->act, p->y + lo);
        return;
    }
    for (int64_t i0 = 0; i0 < p->m; i0 += TILE_M) {
        int64_t i1 = i0 + TILE_M < p->m ? i0 + TILE_M : p->m;
        for (int64_t c0 = lo; c0 < hi; c0 += CHUNK) {
            int64_t c1 = c0 + CHUNK < hi ? c0 + CHUNK : hi;
            const char *wc = p->w + (size_t)c0 * p->w_stride;
            if (p->tk->vec_dotm)
                p->tk->vec_dotm(p->k, wc, p->w_stride, c1 - c0, p->act + (size_t)i0 * p->act_stride, p->act_stride,
                                i1 - i0, p->y + i0 * p->n + c0, (size_t)p->n);
            else
                for (int64_t i = i0; i < i1; i++)
                    p->tk->vec_dot(p->k, wc, p->w_stride, c1 - c0, p->act + (size_t)i * p->act_stride,
                                   p->y + i * p->n + c0);
        }
    }
}

/* Sizes checked, the codec's activation form and its row bytes. */
static int qmm_check(uint32_t wtype, const void *w, int64_t n, int64_t k, const float *x, int64_t m, const float *y,
                     uint64_t *w_row, uint64_t *act_row, uint32_t *act_type) {
    const struct llmk_codec *c = llmk_codec_get(wtype);
    if (!c) return llmk_fail(LLMK_TENSOR_TYPE_UNSUPPORTED, "quantized_matmul: no codec for weight type %u (%s)", wtype,
                             llmk_type_name(wtype) ? llmk_type_name(wtype) : "unknown");
    if (!w || !x || !y) return llmk_fail(LLMK_INVALID_ARGUMENT, "quantized_matmul: NULL argument");
    if (n < 1 || k < 1 || m < 1)
        return llmk_fail(LLMK_EMPTY_DIMENSION, "quantized_matmul: n=%lld k=%lld m=%lld (each must be >= 1)",
                         (long long)n, (long long)k, (long long)m);
    int st = llmk_row_bytes(wtype, (uint64_t)k, w_row);
    if (st != LLMK_OK) return st;
    *act_type = c->act_type;
    *act_row = (uint64_t)k * sizeof(float);
    if (c->act_type != LLMK_TYPE_F32 && (st = llmk_row_bytes(c->act_type, (uint64_t)k, act_row)) != LLMK_OK) return st;
    uint64_t tmp;
    if (!llmk_mul_u64(*w_row, (uint64_t)n, &tmp) || !llmk_mul_u64(*act_row, (uint64_t)m, &tmp) || tmp > SIZE_MAX / 2 ||
        !llmk_mul_u64((uint64_t)m, (uint64_t)n, &tmp))
        return llmk_fail(LLMK_DIMENSION_OVERFLOW, "quantized_matmul: n=%lld k=%lld m=%lld overflow a size",
                         (long long)n, (long long)k, (long long)m);
    if ((uintptr_t)w % type_align(wtype) != 0)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "quantized_matmul: weights at %p not aligned to %zu bytes for %s", w,
                         type_align(wtype), llmk_type_name(wtype));
    return LLMK_OK;
}

int llmk_quantized_matmul(llmk_pool *pool, uint32_t wtype, const void *w, int64_t n, int64_t k, const float *x,
                          int64_t m, float *y) {
    llmk_error_clear();
    uint64_t w_row = 0, act_row = 0;
    uint32_t act_type = LLMK_TYPE_F32;
    int st = qmm_check(wtype, w, n, k, x, m, y, &w_row, &act_row, &act_type);
    if (st != LLMK_OK) return st;
    const struct llmk_kernels *K = llmk_kernels();
    struct qmm p = {.tk = &K->type[wtype], .w = w, .w_stride = (size_t)w_row, .act_stride = (size_t)act_row,
                    .n = n, .k = k, .m = m, .x = x, .y = y, .pool = pool, .act = (unsigned char *)(uintptr_t)x};
    if (act_type != LLMK_TYPE_F32) {
        p.quant = K->act_quant[act_type == LLMK_TYPE_Q8_0 ? LLMK_ACT_Q8_0
                               : act_type == LLMK_TYPE_Q8_1 ? LLMK_ACT_Q8_1 : LLMK_ACT_Q8_K];
        if (!(p.act = malloc((size_t)(act_row * (uint64_t)m))))
            return llmk_fail(LLMK_OUT_OF_MEMORY, "quantized_matmul: %llu bytes of activation scratch",
                             (unsigned long long)(act_row * (uint64_t)m));
    }
    llmk_pool_run(pool, qmm_worker, &p);
    if (p.quant) free(p.act);
    return LLMK_OK;
}
