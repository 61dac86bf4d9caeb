/* Quantized matmul y = x . W^T routed by the number of activation rows m.
 *
 * Every y element is one call of the codec's dot kernel on (weight row,
 * activation row), and dot results do not depend on how rows are grouped
 * (src/codec/codec.h), so routes and thread counts only change the loop order
 * and never the bits of y. Work is split by output (weight) rows with
 * llmk_split_range.
 *
 * Routes:
 *   matvec (m = 1): each worker streams its band of weight rows once.
 *   small  (m <= SMALL_MAX_M): a worker walks its band in chunks of CHUNK_SMALL
 *          rows with every activation row passing over each chunk.
 *   tiled  (larger m): chunks of CHUNK_TILED weight rows against tiles of
 *          TILE_M activation rows, so both operands are reused from cache.
 * small and tiled call the codec's multi-activation kernel (llmk_codec_dotm)
 * per chunk when it has one (AVX2 q4_1, q8_0: each weight block unpacked
 * once per 4 activation rows; same bits as the row kernel), else the row
 * kernel once per activation row and chunk.
 *
 * Crossovers and sizes, measured with bench/bench_routes (1 thread, fastest
 * of >= 7 interleaved calls, 3 runs) on the 2-core AMD EPYC (Zen 3, AVX2)
 * dev VM while other builds and tests ran (load 4-5): us per call,
 * matvec / small (chunk 16) / tiled (64 rows x 32):
 *   q4_1 576x576    m=1 18/23/22   m=2 36/36/35   m=4 73/64/62   m=16 345/269/268  m=128 2591/2972/2612
 *   q4_1 1536x576   m=1 43/55/54   m=2 85/85/83   m=4 178/147/143 m=16 702/582/572 m=128 5909/5045/4714
 *   q8_0 1536x576   m=1 54/69/68   m=2 104/104/85 m=4 198/157/154 m=16 767/592/590 m=128 6985/5118/5497
 *   q4_k 1536x512   m=1 41/41/41   m=4 161/164/162  m=32 1353/1362/1410   (all routes equal:
 *   q6_k 1536x512   m=1 46/46/46   m=4 183/181/180  m=32 1533/1535/1507    no dotm kernel)
 * - matvec -> chunked at m = 2: at m = 1 the row kernel (4 weight rows a
 *   pass) beats dotm's 1-row tiles by 15-25%; at m = 2 the routes are even;
 *   from m = 4 the chunked routes win by 10-25% (weight unpacks shared).
 * - small -> tiled at m > 4 (SMALL_MAX_M): dotm takes activation rows 4 at a
 *   time, so up to 4 rows each weight row is read once whatever the chunk;
 *   beyond, tiled (64 x 32) was equal to or a few percent faster than
 *   small (chunk 16) at every m measured.
 * - chunk sizes: 16..128 weight rows and TILE_M 16..64 are flat within the
 *   noise (+-5%, the VM's bimodal slow phases swing whole runs by ~20%);
 *   chunks of 4-8 rows were 5-30% slower (per-call set-up), 256 x 64
 *   slightly slower. CHUNK_SMALL = CHUNK_TILED = 64 and TILE_M = 32 sit in
 *   the flat region; at these shapes the weights (<= 0.6 MB) sit in L2/L3,
 *   so larger shapes or another machine may prefer other sizes: re-measure with the levers
 *   below. Since every route gives the same bits, changing the thresholds
 *   cannot change any output. */
#include "kernels/matmul.h"

#include "internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { SMALL_MAX_M = 4, CHUNK_SMALL = 64, CHUNK_TILED = 64, TILE_M = 32 };

/* The chunk sizes in use: the defaults above unless the configuration's
 * matmul_chunk_small, matmul_chunk_tiled or matmul_tile_m set them, a lever
 * for re-measuring with bench/bench_routes. */
static int64_t size_or(int32_t v, int64_t dflt) { return v > 0 ? v : dflt; }

int llmk_qmm_act_bytes(uint32_t wtype, int64_t m, int64_t k, size_t *bytes) {
    const struct llmk_codec *c = llmk_codec_get(wtype);
    if (!c) return llmk_fail(LLMK_TENSOR_TYPE_UNSUPPORTED, "matmul: no codec for weight type %u (%s)",
                             wtype, llmk_type_name(wtype) ? llmk_type_name(wtype) : "unknown");
    if (m < 0 || k < 1) return llmk_fail(LLMK_INVALID_ARGUMENT, "matmul: m=%lld k=%lld", (long long)m, (long long)k);
    uint64_t wb, ab = 0, total;
    int st = llmk_row_bytes(wtype, (uint64_t)k, &wb);
    if (st != LLMK_OK) return st;
    if (c->act_type != LLMK_TYPE_F32) {
        st = llmk_row_bytes(c->act_type, (uint64_t)k, &ab);
        if (st != LLMK_OK) return st;
    }
    if (!llmk_mul_u64(ab, (uint64_t)m, &total) || total > SIZE_MAX)
        return llmk_fail(LLMK_DIMENSION_OVERFLOW, "matmul: activation scratch for m=%lld k=%lld overflows",
                         (long long)m, (long long)k);
    *bytes = (size_t)total;
    return LLMK_OK;
}

llmk_dotm_fn llmk_codec_dotm(uint32_t type) {
#if defined(__x86_64__)
    llmk_dot_fn d = llmk_codec_dot(type, NULL);
    if (d && (llmk_cpu_detect() & LLMK_CPU_AVX2)) return llmk_avx2_dotm(d);
#else
    LLMK_UNUSED(type);
#endif
    return NULL;
}


static size_t type_align(uint32_t t) {
    return t == LLMK_TYPE_MXFP4 ? 1 : (t == LLMK_TYPE_F32 || t == LLMK_TYPE_Q8_K) ? 4 : 2;
}

int llmk_qmm_init(struct llmk_qmm *p, uint32_t wtype, const void *w, int64_t n, int64_t k,
                  const float *x, int64_t m, float *y, void *act_scratch, int route) {
    if (!p || !w || !x || !y) return llmk_fail(LLMK_INVALID_ARGUMENT, "matmul: NULL argument");
    if (n < 1 || k < 1 || m < 1)
        return llmk_fail(LLMK_EMPTY_DIMENSION, "matmul: n=%lld k=%lld m=%lld (each must be >= 1)",
                         (long long)n, (long long)k, (long long)m);
    size_t act_bytes;
    int st = llmk_qmm_act_bytes(wtype, m, k, &act_bytes);
    if (st != LLMK_OK) return st;
    uint64_t wb, tmp;
    llmk_row_bytes(wtype, (uint64_t)k, &wb);
    if (!llmk_mul_u64(wb, (uint64_t)n, &tmp) || !llmk_mul_u64((uint64_t)m, (uint64_t)k, &tmp) ||
        !llmk_mul_u64((uint64_t)m, (uint64_t)n, &tmp))
        return llmk_fail(LLMK_DIMENSION_OVERFLOW, "matmul: n=%lld k=%lld m=%lld overflow a size",
                         (long long)n, (long long)k, (long long)m);
    if ((uintptr_t)w % type_align(wtype) != 0)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "matmul: weights at %p not aligned to %zu bytes for %s",
                         w, type_align(wtype), llmk_type_name(wtype));
    const struct llmk_codec *c = llmk_codec_get(wtype);
    memset(p, 0, sizeof *p);
    p->wtype = wtype, p->act_type = c->act_type, p->w = w, p->w_stride = (size_t)wb;
    p->n = n, p->k = k, p->m = m, p->x = x, p->y = y;
    p->dot = llmk_codec_dot(wtype, NULL);
    p->dotm = llmk_codec_dotm(wtype);
    if (c->act_type == LLMK_TYPE_F32) {
        p->act = (void *)(uintptr_t)x, p->act_stride = (size_t)k * sizeof(float);
    } else {
        if (!act_scratch) return llmk_fail(LLMK_INVALID_ARGUMENT, "matmul: %s needs activation scratch of %zu bytes",
                                           llmk_type_name(wtype), act_bytes);
        p->act = act_scratch, p->act_stride = act_bytes / (size_t)m;
        p->act_quant = llmk_codec_get(c->act_type)->quantize;
    }
    if (route == LLMK_QMM_AUTO) route = llmk_cfg()->matmul_route; /* 0 is auto too */
    if (route == LLMK_QMM_AUTO) route = m == 1 ? LLMK_QMM_MATVEC : m <= SMALL_MAX_M ? LLMK_QMM_SMALL : LLMK_QMM_TILED;
    p->route = route;
    return LLMK_OK;
}

static inline const void *act_row(const struct llmk_qmm *p, int64_t i) {
    return (const char *)p->act + (size_t)i * p->act_stride;
}

void llmk_qmm_run(const struct llmk_qmm *p, llmk_pool *pool, int ith, int nth) {
    if (p->act_quant) {
        int64_t lo, hi;
        llmk_split_range(p->m, ith, nth, &lo, &hi);
        for (int64_t i = lo; i < hi; i++)
            p->act_quant(p->x + i * p->k, (char *)p->act + (size_t)i * p->act_stride, p->k);
        llmk_pool_barrier(pool);
    }
    int64_t r0, r1;
    llmk_split_range(p->n, ith, nth, &r0, &r1);
    const char *w = p->w;
    if (p->route == LLMK_QMM_MATVEC) {
        for (int64_t i = 0; i < p->m; i++)
            p->dot(p->k, w + (size_t)r0 * p->w_stride, p->w_stride, r1 - r0, act_row(p, i), p->y + i * p->n + r0);
        return;
    }
    const llmk_config *cf = llmk_cfg();
    int64_t chunk = p->route == LLMK_QMM_SMALL ? size_or(cf->matmul_chunk_small, CHUNK_SMALL)
                                               : size_or(cf->matmul_chunk_tiled, CHUNK_TILED);
    int64_t tm = p->route == LLMK_QMM_SMALL ? p->m : size_or(cf->matmul_tile_m, TILE_M);
    for (int64_t i0 = 0; i0 < p->m; i0 += tm) {
        int64_t i1 = i0 + tm < p->m ? i0 + tm : p->m;
        for (int64_t c0 = r0; c0 < r1; c0 += chunk) {
            int64_t c1 = c0 + chunk < r1 ? c0 + chunk : r1;
            if (p->dotm)
                p->dotm(p->k, w + (size_t)c0 * p->w_stride, p->w_stride, c1 - c0, act_row(p, i0),
                        p->act_stride, i1 - i0, p->y + i0 * p->n + c0, (size_t)p->n);
            else
                for (int64_t i = i0; i < i1; i++)
                    p->dot(p->k, w + (size_t)c0 * p->w_stride, p->w_stride, c1 - c0, act_row(p, i),
                           p->y + i * p->n + c0);
        }
    }
}

struct qmm_job {
    const struct llmk_qmm *p;
    llmk_pool *pool;
};
static void qmm_worker(void *ctx, int ith, int nth) {
    const struct qmm_job *j = ctx;
    llmk_qmm_run(j->p, j->pool, ith, nth);
}

int llmk_quantized_matmul(llmk_pool *pool, uint32_t wtype, const void *w, int64_t n, int64_t k,
                          const float *x, int64_t m, float *y) {
    llmk_error_clear();
    if (m < 1) return llmk_fail(LLMK_EMPTY_DIMENSION, "quantized_matmul: m=%lld", (long long)m);
    size_t act_bytes;
    int st = llmk_qmm_act_bytes(wtype, m, k, &act_bytes);
    if (st != LLMK_OK) return st;
    void *scratch = NULL;
    if (act_bytes) {
        scratch = malloc(act_bytes);
        if (!scratch) return llmk_fail(LLMK_OUT_OF_MEMORY, "quantized_matmul: %zu bytes of activation scratch", act_bytes);
    }
    struct llmk_qmm p;
    st = llmk_qmm_init(&p, wtype, w, n, k, x, m, y, scratch, LLMK_QMM_AUTO);
    if (st == LLMK_OK) {
        struct qmm_job job = {&p, pool};
        llmk_pool_run(pool, qmm_worker, &job);
    }
    free(scratch);
    return st;
}
