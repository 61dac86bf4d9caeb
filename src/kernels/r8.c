/* r8 repacking, the scalar reference products and the kernel choice (the
 * layout and the shared arithmetic are in r8.h). */
#include "kernels/r8.h"

#include "codec/blocks.h"
#include "codec/codec.h"
#include "codec/half.h"
#include "internal.h"
#include "kernels/a16.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

static void put_u16(unsigned char *p, uint16_t v) { memcpy(p, &v, sizeof v); }

/* One Q4_1 record from the 8 GGUF blocks src[r] (NULL: a padding row). */
static void pack_q4_1(unsigned char *dst, const llmk_block_q4_1 *const src[8]) {
    memset(dst, 0, 160);
    for (int r = 0; r < 8; r++) {
        if (!src[r]) continue;
        put_u16(dst + 2 * r, llmk_ld_u16(&src[r]->d));
        put_u16(dst + 16 + 2 * r, llmk_ld_u16(&src[r]->m));
        /* GGUF Q4_1: element j < 16 is the low nibble of qs[j], j >= 16 the high nibble of qs[j - 16] */
        unsigned v[32];
        for (int j = 0; j < 16; j++) v[j] = src[r]->qs[j] & 0x0f, v[j + 16] = src[r]->qs[j] >> 4;
        for (int c = 0; c < 4; c++)
            for (int e = 0; e < 2; e++) /* lane 2r + e: nibble s holds element 8c + 2s + e */
                put_u16(dst + 32 + 32 * c + 2 * (2 * r + e),
                        (uint16_t)(v[8 * c + e] | v[8 * c + 2 + e] << 4 | v[8 * c + 4 + e] << 8 | v[8 * c + 6 + e] << 12));
    }
}

static void pack_q8_0(unsigned char *dst, const llmk_block_q8_0 *const src[8]) {
    memset(dst, 0, 272);
    for (int r = 0; r < 8; r++) {
        if (!src[r]) continue;
        for (int j = 0; j < LLMK_QK; j++) dst[16 * (j / 2) + 2 * r + j % 2] = (unsigned char)src[r]->qs[j];
        put_u16(dst + 256 + 2 * r, llmk_ld_u16(&src[r]->d));
    }
}

/* Repacked weights are streamed whole every token: on 4 KB pages SmolLM2's
 * 96 MB are 24k TLB misses per token. Buffers of 2 MB and more get 2 MB
 * alignment and ask for transparent huge pages (a hint; Linux only). */
void *llmk_r8_buffer(size_t bytes) {
    enum { HUGE = 2 << 20 };
    if (bytes < HUGE) return aligned_alloc(64, (bytes + 63) / 64 * 64);
    void *p = aligned_alloc(HUGE, (bytes + HUGE - 1) / HUGE * HUGE);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (p) madvise(p, (bytes + HUGE - 1) / HUGE * HUGE, MADV_HUGEPAGE);
#endif
    return p;
}

int llmk_r8_size(const llmk_tensor_info *t, size_t *bytes) {
    if (!llmk_a16_supports(t->type) || t->ne[0] % LLMK_QK != 0 || t->ne[0] == 0)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "r8: tensor %s is %s with rows of %llu", t->name,
                         llmk_type_name(t->type) ? llmk_type_name(t->type) : "?", (unsigned long long)t->ne[0]);
    uint64_t b, groups = (t->ne[1] + 7) / 8, nb = t->ne[0] / LLMK_QK;
    if (!llmk_mul_u64(groups * nb, t->type == LLMK_TYPE_Q4_1 ? 160 : 272, &b) || b > SIZE_MAX / 2)
        return llmk_fail(LLMK_DIMENSION_OVERFLOW, "r8: tensor %s too large", t->name);
    *bytes = ((size_t)b + 63) / 64 * 64;
    return LLMK_OK;
}

size_t llmk_r8_view_bytes(const llmk_tensor_info *t, int64_t g0, int64_t g1) {
    size_t rec = t->type == LLMK_TYPE_Q4_1 ? 160 : 272;
    return ((size_t)(g1 - g0) * (size_t)(t->ne[0] / LLMK_QK) * rec + 63) / 64 * 64;
}

void llmk_r8_place_view(const llmk_tensor_info *t, struct llmk_r8 *w, unsigned char *data, int64_t g0, int64_t g1) {
    memset(w, 0, sizeof *w);
    w->type = t->type;
    w->k = (int64_t)t->ne[0], w->n = (int64_t)t->ne[1], w->nb = w->k / LLMK_QK;
    w->block_bytes = t->type == LLMK_TYPE_Q4_1 ? 160 : 272;
    w->data = data;
    w->g0 = g0, w->g1 = g1;
}

void llmk_r8_place(const llmk_tensor_info *t, struct llmk_r8 *w, unsigned char *data) {
    llmk_r8_place_view(t, w, data, 0, ((int64_t)t->ne[1] + 7) / 8);
}

int llmk_r8_alloc(const llmk_tensor_info *t, struct llmk_r8 *w) {
    memset(w, 0, sizeof *w);
    size_t bytes;
    int st = llmk_r8_size(t, &bytes);
    if (st != LLMK_OK) return st;
    unsigned char *data = llmk_r8_buffer(bytes);
    if (!data) return llmk_fail(LLMK_OUT_OF_MEMORY, "r8: repacking %s (%zu bytes)", t->name, bytes);
    llmk_r8_place(t, w, data);
    w->owned = 1;
    return LLMK_OK;
}

int64_t llmk_r8_groups(const struct llmk_r8 *w) { return (w->n + 7) / 8; }

void llmk_r8_pack(const llmk_tensor_info *t, struct llmk_r8 *w, int64_t g0, int64_t g1) {
    size_t sb = t->type == LLMK_TYPE_Q4_1 ? sizeof(llmk_block_q4_1) : sizeof(llmk_block_q8_0);
    const unsigned char *src = t->data;
    LLMK_CHECK(g0 >= w->g0 && g1 <= w->g1);
    for (int64_t g = g0; g < g1; g++)
        for (int64_t b = 0; b < w->nb; b++) {
            const void *blk[8];
            for (int r = 0; r < 8; r++) {
                int64_t row = g * 8 + r;
                blk[r] = row < w->n ? src + ((size_t)row * (size_t)w->nb + (size_t)b) * sb : NULL;
            }
            unsigned char *dst = w->data + ((size_t)(g - w->g0) * (size_t)w->nb + (size_t)b) * w->block_bytes;
            if (t->type == LLMK_TYPE_Q4_1) pack_q4_1(dst, (const llmk_block_q4_1 *const *)blk);
            else pack_q8_0(dst, (const llmk_block_q8_0 *const *)blk);
        }
}

int llmk_r8_repack(const llmk_tensor_info *t, struct llmk_r8 *w) {
    int st = llmk_r8_alloc(t, w);
    if (st == LLMK_OK) llmk_r8_pack(t, w, 0, llmk_r8_groups(w));
    return st;
}

void llmk_r8_free(struct llmk_r8 *w) {
    if (!w) return;
    if (w->owned) free(w->data);
    memset(w, 0, sizeof *w);
}

/* ---- scalar reference ------------------------------------------------------ */

/* Activation row: int16 q[k], then f32 d[nb], then f32 s[nb] (a16.h). */
static float ref_row_q4_1(int64_t k, const unsigned char *w, const unsigned char *a) {
    int64_t nb = k / LLMK_QK;
    const int16_t *q = (const int16_t *)a;
    const float *da = (const float *)(a + (size_t)k * 2), *sa = da + nb;
    float acc = 0;
    for (int64_t b = 0; b < nb; b++) {
        llmk_block_q4_1 wb;
        memcpy(&wb, w + (size_t)b * sizeof wb, sizeof wb);
        const int16_t *qb = q + b * LLMK_QK;
        int32_t n = 0;
        for (int j = 0; j < LLMK_QK / 2; j++) n += (int32_t)(wb.qs[j] & 0x0f) * qb[j] + (int32_t)(wb.qs[j] >> 4) * qb[j + 16];
        acc = fmaf((float)n, llmk_fp16_to_fp32(wb.d) * da[b], acc);
        acc = fmaf(llmk_fp16_to_fp32(wb.m), sa[b], acc);
    }
    return acc;
}

static float ref_row_q8_0(int64_t k, const unsigned char *w, const unsigned char *a) {
    int64_t nb = k / LLMK_QK;
    const int16_t *q = (const int16_t *)a;
    const float *da = (const float *)(a + (size_t)k * 2);
    float acc = 0;
    for (int64_t b = 0; b < nb; b++) {
        llmk_block_q8_0 wb;
        memcpy(&wb, w + (size_t)b * sizeof wb, sizeof wb);
        const int16_t *qb = q + b * LLMK_QK;
        int32_t n = 0;
        for (int j = 0; j < LLMK_QK; j++) n += (int32_t)wb.qs[j] * qb[j];
        acc = fmaf((float)n, llmk_fp16_to_fp32(wb.d) * da[b], acc);
    }
    return acc;
}

void llmk_r8_ref_q4_1(int64_t k, const void *w, size_t ws, int64_t r0, int64_t r1, const void *act, size_t as,
                      int64_t m, float *y, size_t ys) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t r = r0; r < r1; r++)
            y[(size_t)i * ys + (size_t)r] =
                ref_row_q4_1(k, (const unsigned char *)w + (size_t)r * ws, (const unsigned char *)act + (size_t)i * as);
}

void llmk_r8_ref_q8_0(int64_t k, const void *w, size_t ws, int64_t r0, int64_t r1, const void *act, size_t as,
                      int64_t m, float *y, size_t ys) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t r = r0; r < r1; r++)
            y[(size_t)i * ys + (size_t)r] =
                ref_row_q8_0(k, (const unsigned char *)w + (size_t)r * ws, (const unsigned char *)act + (size_t)i * as);
}
