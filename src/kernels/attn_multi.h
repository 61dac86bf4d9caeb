/* The multi-query attention chunk of attn_avx2.c (any head size that is a
 * multiple of 8, up to MULTI_HD_MAX), compiled with its ISA flags
 * (attn_avx512.c has its own, which takes queries with the same key count
 * together; with 16 registers an AVX2 head row of 64 already fills half).
 * Before including, the file defines, always inline:
 *   scores8_hd(q, kj, stride, hd, nk, f16): scores of 8 keys from row kj on
 *   score_group_hd(q, k, j, n, stride, hd, vs, scores, vm, f16, v): keys
 *       j..j+7 scaled into scores[j..], vm raised, next keys (and v's)
 *       prefetched
 *   accum_vh(o, p, v, j0, j1, stride, hd, f16): o += p_j v_j over [j0, j1)
 *   to_f32_rows(dst, x, j, nr, stride, hd): rows j..j+nr of an f16 side as
 *       f32, hd apart
 * and its single-query chunk gives each query exactly these operations:
 * scores group by group, hmax8, exp_scores, o zeroed, then the values in
 * order (o round-trips through memory exactly, so groups of 8 keys give the
 * bits of one run). */
#ifndef LLMK_KERNELS_ATTN_MULTI_H
#define LLMK_KERNELS_ATTN_MULTI_H

#include "kernels/attn.h"
#include "kernels/attn_x86.h"

#include <string.h>

/* The widest head the multi-query form takes (its f16 rows are converted
 * into a stack buffer of 8 rows). */
enum { MULTI_HD_MAX = 256 };

static inline __attribute__((always_inline)) void chunk_multi_hd(int nq, const float *const *q, const int64_t *n,
                                                                 const void *k, const void *v, int64_t stride, int hd,
                                                                 float scale, float *const *part,
                                                                 float *const *scores, int f16) {
    int64_t nmax = 0;
    for (int i = 0; i < nq; i++) nmax = n[i] > nmax ? n[i] : nmax;
    __m256 vs = _mm256_set1_ps(scale), vm[LLMK_ATTN_MULTI];
    for (int i = 0; i < nq; i++) vm[i] = _mm256_set1_ps(-INFINITY);
    _Alignas(64) float buf[8 * MULTI_HD_MAX];
    int share = f16 && nq >= MULTI_SHARE_MIN;
    for (int64_t j = 0; j < nmax; j += 8) {
        if (share) {
            prefetch_rows(k, j + 8, j + 16, nmax, stride, hd, 1);
            prefetch_rows(v, j, j + 8, nmax, stride, hd, 1);
            to_f32_rows(buf, k, j, nmax - j < 8 ? (int)(nmax - j) : 8, stride, hd);
        }
        for (int i = 0; i < nq; i++) {
            if (j >= n[i]) continue;
            if (share) {
                int ni = n[i] - j < 8 ? (int)(n[i] - j) : 8;
                vm[i] = keep_scores(_mm256_mul_ps(scores8_hd(q[i], buf, hd, hd, ni, 0), vs), ni, scores[i] + j, vm[i]);
            } else {
                vm[i] = score_group_hd(q[i], k, j, n[i], stride, hd, vs, scores[i], vm[i], f16, i == 0 ? v : NULL);
            }
        }
    }
    for (int i = 0; i < nq; i++) {
        float m = hmax8(vm[i]);
        part[i][1] = exp_scores(scores[i], n[i], m);
        part[i][0] = m;
        memset(part[i] + 2, 0, (size_t)hd * sizeof(float));
    }
    for (int64_t j0 = 0; j0 < nmax; j0 += 8) {
        if (share) to_f32_rows(buf, v, j0, nmax - j0 < 8 ? (int)(nmax - j0) : 8, stride, hd);
        for (int i = 0; i < nq; i++) {
            int64_t j1 = j0 + 8 < n[i] ? j0 + 8 : n[i];
            if (!share) accum_vh(part[i] + 2, scores[i], v, j0, j1, stride, hd, f16);
            else if (j1 > j0) accum_vh(part[i] + 2, scores[i] + j0, buf, 0, j1 - j0, hd, hd, 0);
        }
    }
}

#endif
