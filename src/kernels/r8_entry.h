/* The entry of the r8 kernel files (r8_avx2.c, r8_avx512.c), compiled into
 * each with that file's ISA flags. Before including, a file defines
 *   rows_streams(L, w, g0, g1, r1, a, y): one activation row x groups [g0, g1)
 *   rows_na(NA, L, w, g0, g1, r1, a, y, ys): NA <= R8_NA_MAX activation rows x groups
 * as always-inline functions (L: the record form, enum llmk_r8_layout), and
 * may set R8_NA_MAX (default 4: the AVX2 file's 16 registers); r8_mm calls
 * them with constant NA and L so that each combination is compiled on its
 * own. */
#ifndef LLMK_KERNELS_R8_ENTRY_H
#define LLMK_KERNELS_R8_ENTRY_H

#include "kernels/r8.h"

#ifndef R8_NA_MAX
#define R8_NA_MAX 4 /* activation rows per pass over a group (rows_na's NA) */
#endif
#ifndef R8_HAS_MX4
#define R8_HAS_MX4 1 /* 0: the file has no MX4 block code, and its caller never passes MX4 records */
#endif

static void r8_rows(int layout, int na, const struct llmk_r8 *w, int64_t g0, int64_t g1, int64_t r1,
                    const unsigned char *const *a, float *y, size_t ys) {
#define R8_NA(N)                                                           \
    case N:                                                                \
        if (layout == LLMK_R8_Q4_1) rows_na(N, LLMK_R8_Q4_1, w, g0, g1, r1, a, y, ys); \
        else if (layout == LLMK_R8_Q8S) rows_na(N, LLMK_R8_Q8S, w, g0, g1, r1, a, y, ys); \
        else if (layout == LLMK_R8_Q8S2) rows_na(N, LLMK_R8_Q8S2, w, g0, g1, r1, a, y, ys); \
        else if (layout == LLMK_R8_Q4S) rows_na(N, LLMK_R8_Q4S, w, g0, g1, r1, a, y, ys); \
        else if (R8_HAS_MX4 && layout == LLMK_R8_MX4) rows_na(N, LLMK_R8_MX4, w, g0, g1, r1, a, y, ys); \
        else rows_na(N, LLMK_R8_Q8_0, w, g0, g1, r1, a, y, ys);            \
        break;
    switch (na) {
#if R8_NA_MAX >= 8
        R8_NA(8)
        R8_NA(7)
#endif
#if R8_NA_MAX >= 6
        R8_NA(6)
        R8_NA(5)
#endif
        R8_NA(4)
        R8_NA(3)
        R8_NA(2)
    default:
        R8_NA(1)
    }
#undef R8_NA
}

/* llmk_gemm_r8_a16_fn's contract (r8.h): one activation row walks its groups as
 * the file's streams; more go through rows_na R8_NA_MAX at a time. */
static void r8_mm(const struct llmk_r8 *w, int64_t r0, int64_t r1, const void *act, size_t as, int64_t m, float *y,
                  size_t ys) {
    if (r1 <= r0 || m <= 0) return;
    int64_t g0 = r0 / 8, g1 = (r1 + 7) / 8;
    const unsigned char *ab = act;
    if (m == 1) {
        if (w->layout == LLMK_R8_Q4_1) rows_streams(LLMK_R8_Q4_1, w, g0, g1, r1, ab, y);
        else if (w->layout == LLMK_R8_Q8S) rows_streams(LLMK_R8_Q8S, w, g0, g1, r1, ab, y);
        else if (w->layout == LLMK_R8_Q8S2) rows_streams(LLMK_R8_Q8S2, w, g0, g1, r1, ab, y);
        else if (w->layout == LLMK_R8_Q4S) rows_streams(LLMK_R8_Q4S, w, g0, g1, r1, ab, y);
        else if (R8_HAS_MX4 && w->layout == LLMK_R8_MX4) rows_streams(LLMK_R8_MX4, w, g0, g1, r1, ab, y);
        else rows_streams(LLMK_R8_Q8_0, w, g0, g1, r1, ab, y);
        return;
    }
#ifdef R8_HAVE_FEW_ROWS
    if (m <= R8_HAVE_FEW_ROWS) {
        const unsigned char *a[R8_HAVE_FEW_ROWS];
        for (int j = 0; j < (int)m; j++) a[j] = ab + (size_t)j * as;
#define R8_FEW(N)                                                                           \
    case N:                                                                                 \
        if (w->layout == LLMK_R8_Q4_1) rows_few(N, LLMK_R8_Q4_1, w, g0, g1, r1, a, y, ys);    \
        else if (w->layout == LLMK_R8_Q8S) rows_few(N, LLMK_R8_Q8S, w, g0, g1, r1, a, y, ys); \
        else if (w->layout == LLMK_R8_Q8S2) rows_few(N, LLMK_R8_Q8S2, w, g0, g1, r1, a, y, ys); \
        else if (w->layout == LLMK_R8_Q4S) rows_few(N, LLMK_R8_Q4S, w, g0, g1, r1, a, y, ys);   \
        else if (R8_HAS_MX4 && w->layout == LLMK_R8_MX4) rows_few(N, LLMK_R8_MX4, w, g0, g1, r1, a, y, ys); \
        else rows_few(N, LLMK_R8_Q8_0, w, g0, g1, r1, a, y, ys);                            \
        break;
        switch (m) {
            R8_FEW(4)
            R8_FEW(3)
        default:
            R8_FEW(2)
        }
#undef R8_FEW
        return;
    }
#endif
    for (int64_t i = 0; i < m; i += R8_NA_MAX) {
        int na = m - i < R8_NA_MAX ? (int)(m - i) : R8_NA_MAX;
        const unsigned char *a[R8_NA_MAX];
        for (int j = 0; j < R8_NA_MAX; j++) a[j] = ab + (size_t)(i + (j < na ? j : 0)) * as;
        r8_rows(w->layout, na, w, g0, g1, r1, a, y + (size_t)i * ys, ys);
    }
}

#endif
