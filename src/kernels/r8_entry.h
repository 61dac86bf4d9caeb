/* The entry of the r8 kernel files (r8_avx2.c, r8_avx512.c), compiled into
 * each with that file's ISA flags. Before including, a file defines
 *   rows_streams(L, w, g0, g1, r1, a, y, tab): one activation row x groups [g0, g1)
 *   rows_na(NA, L, w, g0, g1, r1, a, y, ys, tab, far): NA <= R8_NA_MAX activation rows x groups
 *   (far: 0, or the distance from each record to the one to prefetch into L2 instead of the
 *   near stream; r8_mm below)
 * (tab: NULL, or scratch for the tables of min(NA, LLMK_R8_TABLE_PASS) rows)
 * as always-inline functions (L: the record form, enum llmk_r8_layout), and
 * may set R8_NA_MAX (default 4: the AVX2 file's 16 registers); r8_mm calls
 * them with constant NA and L so that each combination is compiled on its
 * own. */
#ifndef LLMK_KERNELS_R8_ENTRY_H
#define LLMK_KERNELS_R8_ENTRY_H

#include "internal.h"
#include "kernels/r8.h"

#ifndef R8_NA_MAX
#define R8_NA_MAX 4 /* activation rows per pass over a group (rows_na's NA) */
#endif
#ifndef R8_HAS_MX4
#define R8_HAS_MX4 1 /* 0: the file has no MX4 block code, and its caller never passes MX4 records */
#endif

#ifndef R8_HAS_COMPACT
#define R8_HAS_COMPACT 0 /* 1: the file reads the compact forms (llmk_r8_compact, r8.h) */
#endif

#if R8_HAS_MX4
#define R8_CASE_MX4(X) case LLMK_R8_MX4: X(LLMK_R8_MX4); break;
#else
#define R8_CASE_MX4(X)
#endif
#if R8_HAS_COMPACT
#define R8_CASE_COMPACT(X) \
    case LLMK_R8_Q4K: X(LLMK_R8_Q4K); break; \
    case LLMK_R8_NL4: X(LLMK_R8_NL4); break; case LLMK_R8_XS4: X(LLMK_R8_XS4); break; \
    case LLMK_R8_Q8M: X(LLMK_R8_Q8M); break; case LLMK_R8_Q5C: X(LLMK_R8_Q5C); break; \
    case LLMK_R8_Q40: X(LLMK_R8_Q40); break; case LLMK_R8_Q2C: X(LLMK_R8_Q2C); break; \
    case LLMK_R8_Q3C: X(LLMK_R8_Q3C); break; case LLMK_R8_Q6C: X(LLMK_R8_Q6C); break; \
    case LLMK_R8_Q51: X(LLMK_R8_Q51); break; case LLMK_R8_MXC: X(LLMK_R8_MXC); break;
#else
#define R8_CASE_COMPACT(X)
#endif
/* X(L) with the record form as a constant (Q8_0 the default). */
#define R8_SWITCH(layout, X)                           \
    switch (layout) {                                  \
    case LLMK_R8_Q4_1: X(LLMK_R8_Q4_1); break;         \
    case LLMK_R8_Q8S: X(LLMK_R8_Q8S); break;           \
    case LLMK_R8_Q8S2: X(LLMK_R8_Q8S2); break;         \
    case LLMK_R8_Q4S: X(LLMK_R8_Q4S); break;           \
    R8_CASE_MX4(X)                                     \
    R8_CASE_COMPACT(X)                                 \
    default: X(LLMK_R8_Q8_0); break;                   \
    }

INLINE void r8_rows_l(int L, int na, const struct llmk_r8 *w, int64_t g0, int64_t g1, int64_t r1,
                      const unsigned char *const *a, float *y, size_t ys, void *tab, size_t far) {
    switch (na) {
#if R8_NA_MAX >= 8
    case 8: rows_na(8, L, w, g0, g1, r1, a, y, ys, tab, far); break;
    case 7: rows_na(7, L, w, g0, g1, r1, a, y, ys, tab, far); break;
#endif
#if R8_NA_MAX >= 6
    case 6: rows_na(6, L, w, g0, g1, r1, a, y, ys, tab, far); break;
    case 5: rows_na(5, L, w, g0, g1, r1, a, y, ys, tab, far); break;
#endif
    case 4: rows_na(4, L, w, g0, g1, r1, a, y, ys, tab, far); break;
    case 3: rows_na(3, L, w, g0, g1, r1, a, y, ys, tab, far); break;
    case 2: rows_na(2, L, w, g0, g1, r1, a, y, ys, tab, far); break;
    default: rows_na(1, L, w, g0, g1, r1, a, y, ys, tab, far); break;
    }
}

static void r8_rows(int layout, int na, const struct llmk_r8 *w, int64_t g0, int64_t g1, int64_t r1,
                    const unsigned char *const *a, float *y, size_t ys, void *tab, size_t far) {
#define R8_ROWS(L) r8_rows_l(L, na, w, g0, g1, r1, a, y, ys, tab, far)
    R8_SWITCH(layout, R8_ROWS)
#undef R8_ROWS
}

#ifdef R8_HAVE_FEW_ROWS
INLINE void r8_few_l(int L, int m, const struct llmk_r8 *w, int64_t g0, int64_t g1, int64_t r1,
                     const unsigned char *const *a, float *y, size_t ys) {
    switch (m) {
#if R8_HAVE_FEW_ROWS >= 4
    case 4: rows_few(4, L, w, g0, g1, r1, a, y, ys); break;
#endif
#if R8_HAVE_FEW_ROWS >= 3
    case 3: rows_few(3, L, w, g0, g1, r1, a, y, ys); break;
#endif
    default: rows_few(2, L, w, g0, g1, r1, a, y, ys); break;
    }
}
#endif

/* llmk_gemm_r8_a16_fn's contract (r8.h): one activation row walks its groups as
 * the file's streams; more go through rows_na R8_NA_MAX at a time. The
 * scratch goes to the file's functions only where it holds the tables of a
 * pass's rows (llmk_r8_scratch_bytes); each pass builds its own. */
static void r8_mm(const struct llmk_r8 *w, int64_t r0, int64_t r1, const void *act, size_t as, int64_t m, float *y,
                  size_t ys, void *scratch, size_t scratch_bytes) {
    if (r1 <= r0 || m <= 0) return;
    LLMK_CHECK(R8_HAS_COMPACT || !llmk_r8_compact(w->layout));
    int64_t g0 = r0 / 8, g1 = (r1 + 7) / 8;
    const unsigned char *ab = act;
    size_t need = llmk_r8_scratch_bytes(w->k, m);
    void *tab = scratch && need && scratch_bytes >= need ? scratch : NULL;
    if (m == 1) {
#define R8_STREAMS(L) rows_streams(L, w, g0, g1, r1, ab, y, tab)
        R8_SWITCH(w->layout, R8_STREAMS)
#undef R8_STREAMS
        return;
    }
#ifdef R8_HAVE_FEW_ROWS
    if (m <= R8_HAVE_FEW_ROWS) {
        const unsigned char *a[R8_HAVE_FEW_ROWS];
        for (int j = 0; j < (int)m; j++) a[j] = ab + (size_t)j * as;
#define R8_FEW(L) r8_few_l(L, (int)m, w, g0, g1, r1, a, y, ys)
        R8_SWITCH(w->layout, R8_FEW)
#undef R8_FEW
        return;
    }
#endif
#if defined(R8_HAVE_PRE) && R8_HAS_COMPACT
    bool expands = r8_expands(w->layout);
    if (m > R8_NA_MAX && ((llmk_r8_header_bytes(w->layout) && !expands && w->nb <= R8_PRE_MAX_NB) ||
                          (expands && w->nb <= r8_pre_expand_nb(w->layout)))) {
        if (w->layout == LLMK_R8_Q4K) rows_pre(LLMK_R8_Q4K, w, g0, g1, r1, ab, as, m, y, ys);
        else if (w->layout == LLMK_R8_Q2C) rows_pre(LLMK_R8_Q2C, w, g0, g1, r1, ab, as, m, y, ys);
        else if (w->layout == LLMK_R8_Q3C) rows_pre(LLMK_R8_Q3C, w, g0, g1, r1, ab, as, m, y, ys);
        else if (w->layout == LLMK_R8_Q6C) rows_pre(LLMK_R8_Q6C, w, g0, g1, r1, ab, as, m, y, ys);
        else if (w->layout == LLMK_R8_Q51) rows_pre(LLMK_R8_Q51, w, g0, g1, r1, ab, as, m, y, ys);
        else if (w->layout == LLMK_R8_Q5C) rows_pre(LLMK_R8_Q5C, w, g0, g1, r1, ab, as, m, y, ys);
        else if (w->layout == LLMK_R8_XS4) rows_pre(LLMK_R8_XS4, w, g0, g1, r1, ab, as, m, y, ys);
        else rows_pre(LLMK_R8_Q8M, w, g0, g1, r1, ab, as, m, y, ys); /* the last form with a header */
        return;
    }
#endif
    /* Past the first tile of rows the range's records come from cache:
     * the last tile fetches the next range's (the caller's next chunk of
     * R8_CHUNK rows, exec_cpu.c) into L2 instead, so that tile 0 there does
     * not wait on memory. One thread, 16 rows, from DRAM: Q8_0 49152 x 576
     * (the default model's LM head) 5.6 -> 3.0 ms, 4096 x 576 456 -> 249
     * us; Q4_1 49152 x 576 2.71 -> 2.56-2.70 ms. A 128 + 128 token B=16 run
     * (per-phase clocks, toggled): LM head 354-389 -> 227-244 ms, attention
     * output and FFN down 324-338 -> 256-279, S_TG 1089-1145 -> 1215-1317
     * t/s. Prefetching in every tile gave the same. */
    size_t range = (size_t)(g1 - g0) * (size_t)w->nb * w->block_bytes;
    for (int64_t i = 0; i < m; i += R8_NA_MAX) {
        int na = m - i < R8_NA_MAX ? (int)(m - i) : R8_NA_MAX;
        const unsigned char *a[R8_NA_MAX];
        for (int j = 0; j < R8_NA_MAX; j++) a[j] = ab + (size_t)(i + (j < na ? j : 0)) * as;
        size_t far = i > 0 && i + R8_NA_MAX >= m ? range : 0;
        r8_rows(w->layout, na, w, g0, g1, r1, a, y + (size_t)i * ys, ys, tab, far);
    }
}

#endif
