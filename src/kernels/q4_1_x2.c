/* Q4_1 repacking and the q8_1x activation layout (see q4_1_x2.h). */
#include "kernels/q4_1_x2.h"

#include "codec/blocks.h"
#include "codec/codec.h"
#include "codec/half.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* lane -> block within a group of 8, and its inverse */
static const int lane_block[8] = {0, 2, 4, 6, 1, 3, 5, 7};
static const int block_lane[8] = {0, 4, 1, 5, 2, 6, 3, 7};

int llmk_q4_1_x2_repack(const llmk_tensor_info *t, struct llmk_q4_1_x2 *x) {
    memset(x, 0, sizeof *x);
    if (t->type != LLMK_TYPE_Q4_1 || t->ne[0] % LLMK_QK != 0)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "q4_1_x2: tensor %s is %s with rows of %llu", t->name,
                         llmk_type_name(t->type), (unsigned long long)t->ne[0]);
    int64_t kb = (int64_t)t->ne[0] / LLMK_QK;
    x->n = (int64_t)t->ne[1], x->k = (int64_t)t->ne[0];
    x->nb = (kb + 1) / 2 * 2;
    x->ng = (x->nb + 7) / 8;
    uint64_t nq, ns;
    if (!llmk_mul_u64((uint64_t)x->n, (uint64_t)x->nb * 16, &nq) || !llmk_mul_u64((uint64_t)x->n, (uint64_t)x->ng * 16, &ns))
        return llmk_fail(LLMK_DIMENSION_OVERFLOW, "q4_1_x2: tensor %s too large", t->name);
    x->qs = calloc(1, (size_t)nq);
    x->d = calloc(1, (size_t)ns);
    x->m = calloc(1, (size_t)ns);
    if (!x->qs || !x->d || !x->m) {
        llmk_q4_1_x2_free(x);
        return llmk_fail(LLMK_OUT_OF_MEMORY, "q4_1_x2: repacking %s (%llu bytes)", t->name, (unsigned long long)(nq + 2 * ns));
    }
    const llmk_block_q4_1 *src = t->data;
    for (int64_t r = 0; r < x->n; r++) {
        uint8_t *q = x->qs + (size_t)r * (size_t)x->nb * 16;
        uint16_t *d = x->d + (size_t)r * (size_t)x->ng * 8, *m = x->m + (size_t)r * (size_t)x->ng * 8;
        for (int64_t b = 0; b < kb; b++) {
            const llmk_block_q4_1 *blk = &src[r * kb + b];
            int64_t p = b / 2, half = b % 2;
            memcpy(q + p * 32 + half * 16, blk->qs, 16);
            int64_t g = b / 8, lane = block_lane[b % 8];
            d[g * 8 + lane] = llmk_ld_u16(&blk->d);
            m[g * 8 + lane] = llmk_ld_u16(&blk->m);
        }
    }
    return LLMK_OK;
}

void llmk_q4_1_x2_free(struct llmk_q4_1_x2 *x) {
    free(x->qs), free(x->d), free(x->m);
    memset(x, 0, sizeof *x);
}

size_t llmk_q8_1x_row_bytes(int64_t k) {
    int64_t kb = k / LLMK_QK, nb = (kb + 1) / 2 * 2, ng = (nb + 7) / 8;
    return (size_t)nb * 32 + (size_t)ng * 8 * 2 * sizeof(float);
}

int llmk_q8_1x_quantize(const float *x, int64_t k, int64_t e0, int64_t e1, void *dst) {
    int64_t kb = k / LLMK_QK, nb = (kb + 1) / 2 * 2, ng = (nb + 7) / 8;
    int8_t *qs = dst;
    float *da = (float *)((char *)dst + nb * 32), *sa = da + ng * 8;
    int64_t b1 = e1 == k ? nb : e1 / LLMK_QK;
    int bad = 0;
    (void)lane_block;
    for (int64_t b = e0 / LLMK_QK; b < b1; b++) {
        llmk_block_q8_1 blk;
        if (b < kb) bad |= llmk_quantize_act_q8_1(x + b * LLMK_QK, &blk, LLMK_QK);
        else memset(&blk, 0, sizeof blk); /* the padding block of an odd count */
        int64_t p = b / 2, half = b % 2;
        memcpy(qs + p * 64 + half * 16, blk.qs, 16);
        memcpy(qs + p * 64 + 32 + half * 16, blk.qs + 16, 16);
        int64_t lane = (b / 8) * 8 + block_lane[b % 8];
        da[lane] = llmk_fp16_to_fp32(llmk_ld_u16(&blk.d));
        sa[lane] = llmk_fp16_to_fp32(llmk_ld_u16(&blk.s));
    }
    /* scale lanes past the last block stay zero: the buffer is zeroed at init
     * and nothing writes them */
    return bad;
}
