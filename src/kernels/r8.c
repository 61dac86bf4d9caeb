/* r8 repacking, the scalar reference products and the kernel choice (the
 * layout and the shared arithmetic are in r8.h). */
#include "kernels/r8.h"

#include "codec/blocks.h"
#include "codec/codec.h"
#include "codec/half.h"
#include "internal.h"
#include "kernels/a16.h"
#include "kernels/r8_read.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

static void put_u16(unsigned char *p, uint16_t v) { memcpy(p, &v, sizeof v); }

int llmk_r8_layout(uint32_t type) {
    switch (type) {
    case LLMK_TYPE_Q4_0:
    case LLMK_TYPE_Q4_1: return LLMK_R8_Q4_1;
    case LLMK_TYPE_Q5_0:
    case LLMK_TYPE_IQ4_NL:
    case LLMK_TYPE_Q8_0: return LLMK_R8_Q8_0;
    case LLMK_TYPE_Q2_K: return LLMK_R8_Q8S2;
    case LLMK_TYPE_Q4_K: return LLMK_R8_Q4S;
    case LLMK_TYPE_MXFP4: return LLMK_R8_MX4;
    default: return llmk_r8_read_supports(type) ? LLMK_R8_Q8S : -1;
    }
}

int llmk_r8_form(uint32_t type, unsigned forms) {
    int layout = llmk_r8_layout(type);
    if (!(forms & LLMK_R8_COMPACT)) return layout;
    if (layout == LLMK_R8_Q4S) return LLMK_R8_Q4K;
    if (type == LLMK_TYPE_IQ4_XS) return LLMK_R8_XS4;
    if (type == LLMK_TYPE_Q5_K) return LLMK_R8_Q8M;
    if (type == LLMK_TYPE_Q3_K) return LLMK_R8_Q3C;
    if (type == LLMK_TYPE_Q6_K) return LLMK_R8_Q6C;
    if (type == LLMK_TYPE_IQ4_NL) return LLMK_R8_NL4;
    if (type == LLMK_TYPE_Q5_0) return LLMK_R8_Q5C;
    if (type == LLMK_TYPE_Q4_0) return LLMK_R8_Q40;
    if (type == LLMK_TYPE_Q2_K) return LLMK_R8_Q2C;
    if (type == LLMK_TYPE_Q5_1) return LLMK_R8_Q51;
    if (type == LLMK_TYPE_MXFP4) return LLMK_R8_MXC;
    return layout;
}

/* One GGUF block of a supported type as the layout's fields: the f16 scale
 * d, the f16 min m (Q4_1 layout) and the 32 integer weights v (nibbles
 * 0..15 in the Q4_1 layout, int8 in the Q8_0 one). Q4_0's offset of -8
 * becomes the min -8 d: exact in f16 unless it overflows (|d| > 8188), and
 * then the reference sees the same infinity. */
struct r8_block {
    uint16_t d, m;
    int v[LLMK_QK];
};

static int nibble(const uint8_t *qs, int j) { return j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4; }

static void read_block(uint32_t type, const unsigned char *src, struct r8_block *o) {
    switch (type) {
    case LLMK_TYPE_Q4_0: {
        llmk_block_q4_0 b;
        memcpy(&b, src, sizeof b);
        o->d = llmk_ld_u16(&b.d), o->m = llmk_fp32_to_fp16(-8.0f * llmk_fp16_to_fp32(o->d));
        for (int j = 0; j < LLMK_QK; j++) o->v[j] = nibble(b.qs, j);
        break;
    }
    case LLMK_TYPE_Q4_1: {
        llmk_block_q4_1 b;
        memcpy(&b, src, sizeof b);
        o->d = llmk_ld_u16(&b.d), o->m = llmk_ld_u16(&b.m);
        for (int j = 0; j < LLMK_QK; j++) o->v[j] = nibble(b.qs, j);
        break;
    }
    case LLMK_TYPE_Q5_0: {
        llmk_block_q5_0 b;
        memcpy(&b, src, sizeof b);
        o->d = llmk_ld_u16(&b.d), o->m = 0;
        for (int j = 0; j < LLMK_QK; j++) o->v[j] = (nibble(b.qs, j) | ((b.qh[j >> 3] >> (j & 7)) & 1) << 4) - 16;
        break;
    }
    case LLMK_TYPE_IQ4_NL: {
        llmk_block_iq4_nl b;
        memcpy(&b, src, sizeof b);
        o->d = llmk_ld_u16(&b.d), o->m = 0;
        for (int j = 0; j < LLMK_QK; j++) o->v[j] = llmk_iq4nl_values[nibble(b.qs, j)];
        break;
    }
    default: { /* Q8_0 */
        llmk_block_q8_0 b;
        memcpy(&b, src, sizeof b);
        o->d = llmk_ld_u16(&b.d), o->m = 0;
        for (int j = 0; j < LLMK_QK; j++) o->v[j] = b.qs[j];
    }
    }
}

/* Row r's 32 nibbles (v[j] in 0..15) into the 4 chunks of 32 bytes at dst:
 * lane 2r + e of chunk c, nibble s, holds element 8c + 2s + e. */
static void put_nibbles(unsigned char *dst, int r, const int *v) {
    for (int c = 0; c < 4; c++)
        for (int e = 0; e < 2; e++)
            put_u16(dst + 32 * c + 2 * (2 * r + e),
                    (uint16_t)(v[8 * c + e] | v[8 * c + 2 + e] << 4 | v[8 * c + 4 + e] << 8 | v[8 * c + 6 + e] << 12));
}

/* The byte of Q8_0's 16 pairs of 16 bytes that holds row r's element j:
 * byte 2r + e of pair p is element 2p + e (Q8_0, Q8S and the forms whose
 * planes the kernels expand into them). */
static int pair_byte(int r, int j) { return 16 * (j / 2) + 2 * r + j % 2; }

/* Row r's 32 int8 weights into Q8_0's pairs at dst. */
static void put_pairs(unsigned char *dst, int r, const int8_t *v) {
    for (int j = 0; j < LLMK_QK; j++) dst[pair_byte(r, j)] = (unsigned char)v[j];
}

/* Row r's 32 four-bit values u (0..15) into NL4's 8 chunks of 16 bytes at
 * dst: byte 2r + e of chunk p holds element 2p + e in its low nibble and
 * element 2p + 16 + e in its high one, Q8_0's pairs p and p + 8 (NL4, XS4,
 * Q5C). */
static void put_chunks(unsigned char *dst, int r, const int *u) {
    for (int p = 0; p < 8; p++)
        for (int e = 0; e < 2; e++) dst[16 * p + 2 * r + e] = (unsigned char)(u[2 * p + e] | u[2 * p + 16 + e] << 4);
}

/* One Q4_1-layout record from 8 blocks (NULL: a padding row). */
static void pack_q4_1(unsigned char *dst, const struct r8_block *const src[8]) {
    memset(dst, 0, 160);
    for (int r = 0; r < 8; r++) {
        if (!src[r]) continue;
        put_u16(dst + 2 * r, src[r]->d);
        put_u16(dst + 16 + 2 * r, src[r]->m);
        put_nibbles(dst + 32, r, src[r]->v);
    }
}

static void pack_q8_0(unsigned char *dst, const struct r8_block *const src[8]) {
    memset(dst, 0, 272);
    for (int r = 0; r < 8; r++) {
        if (!src[r]) continue;
        int8_t v[LLMK_QK];
        for (int j = 0; j < LLMK_QK; j++) v[j] = (int8_t)src[r]->v[j];
        put_pairs(dst, r, v);
        put_u16(dst + 256 + 2 * r, src[r]->d);
    }
}

/* Weights [32 b, 32 b + 32) of a row (its GGUF bytes at row), as Q8S holds
 * them: weight j = s[j / 16] * v[j] + m, exactly (r8_read.h). */
static void read_q8s(uint32_t type, const unsigned char *row, int64_t b, struct llmk_r8_sub *o) {
    uint32_t be = llmk_type_block_elems(type), sb = llmk_type_block_bytes(type);
    int64_t per = be / LLMK_QK; /* 32-element parts per GGUF block: 1 or 8 */
    llmk_r8_read_sub(type, row + (size_t)(b / per) * sb, (int)(b % per), o);
}

/* Q2_K's weights [32 b, 32 b + 32): 2-bit q times d * (scale nibble) per
 * 16, less dmin * (min nibble) per 16 (exact f32 products: an f16 times a
 * 4-bit integer). v = q, s[h], m[h] = -dmin * min_h. Element e of a
 * super-block: bits 2 ((e % 128) / 32) of qs[32 (e / 128) + e % 32]; its
 * scale byte is scales[e / 16]. */
static void read_q2_k(const unsigned char *row, int64_t b, struct llmk_r8_sub *o, float m[2]) {
    llmk_block_q2_k q;
    memcpy(&q, row + (size_t)(b / 8) * sizeof q, sizeof q);
    float d = llmk_fp16_to_fp32(llmk_ld_u16(&q.d)), dmin = llmk_fp16_to_fp32(llmk_ld_u16(&q.dmin));
    int e0 = (int)(b % 8) * LLMK_QK;
    for (int h = 0; h < 2; h++) {
        int sc = q.scales[(e0 + 16 * h) / 16];
        o->s[h] = d * (float)(sc & 0xf), m[h] = -(dmin * (float)(sc >> 4));
    }
    for (int j = 0; j < LLMK_QK; j++) {
        int e = e0 + j;
        o->v[j] = (int8_t)((q.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3);
    }
    o->m = m[0];
}

static void put_f32(unsigned char *p, float v) { memcpy(p, &v, sizeof v); }

/* Q8S, or Q8S2 with m1 (the offsets of elements 16..31) after m. */
static void pack_q8s(unsigned char *dst, const struct llmk_r8_sub *const src[8], const float (*m1)[2], int two) {
    memset(dst, 0, two ? 384 : 352);
    for (int r = 0; r < 8; r++) {
        if (!src[r]) continue;
        put_pairs(dst, r, src[r]->v);
        put_f32(dst + 256 + 4 * r, src[r]->s[0]);
        put_f32(dst + 288 + 4 * r, src[r]->s[1]);
        put_f32(dst + 320 + 4 * r, src[r]->m);
        if (two) put_f32(dst + 352 + 4 * r, m1[r][1]);
    }
}

/* Q4S from 8 sub-blocks read as r8_read.h gives them (s[0] == s[1] and v
 * in 0..15 for the types llmk_r8_layout sends here). */
static void pack_q4s(unsigned char *dst, const struct llmk_r8_sub *const src[8]) {
    memset(dst, 0, 192);
    for (int r = 0; r < 8; r++) {
        if (!src[r]) continue;
        int v[LLMK_QK];
        for (int j = 0; j < LLMK_QK; j++) v[j] = src[r]->v[j];
        put_f32(dst + 4 * r, src[r]->s[0]);
        put_f32(dst + 32 + 4 * r, src[r]->m);
        put_nibbles(dst + 64, r, v);
    }
}

/* The index of value v in MXFP4's grid (0 and -0 are both 0: either). */
static int mx4_index(int v) {
    for (int i = 0; i < 16; i++)
        if (llmk_mxfp4_values[i] == v) return i;
    LLMK_CHECK(!"MXFP4 weight off its grid");
    return 0;
}

/* MX4 from 8 sub-blocks read as r8_read.h gives MXFP4's (s[0] == s[1], v on
 * the grid, m = 0). */
static void pack_mx4(unsigned char *dst, const struct llmk_r8_sub *const src[8]) {
    memset(dst, 0, 160);
    for (int r = 0; r < 8; r++) {
        if (!src[r]) continue;
        put_f32(dst + 4 * r, src[r]->s[0]);
        for (int c = 0; c < 4; c++)
            for (int h = 0; h < 2; h++)
                for (int e = 0; e < 2; e++) {
                    const int8_t *v = src[r]->v + 8 * c + 4 * h + e;
                    dst[32 + 32 * c + 16 * h + 2 * r + e] = (unsigned char)(mx4_index(v[0]) | mx4_index(v[2]) << 4);
                }
    }
}

/* A block's share of its group: its record and 1/8 of a header. */
static size_t record_bytes(int layout) {
    return llmk_r8_record_stride(layout) + llmk_r8_header_bytes(layout) / LLMK_R8_SUPER;
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

int llmk_r8_size(const llmk_tensor_info *t, unsigned forms, size_t *bytes) {
    if (!llmk_a16_supports(t->type) || t->ne[0] % LLMK_QK != 0 || t->ne[0] == 0 ||
        t->ne[0] % llmk_type_block_elems(t->type) != 0)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "r8: tensor %s is %s with rows of %llu", t->name,
                         llmk_type_name(t->type) ? llmk_type_name(t->type) : "?", (unsigned long long)t->ne[0]);
    uint64_t b, groups = (t->ne[1] + 7) / 8, nb = t->ne[0] / LLMK_QK;
    if (!llmk_mul_u64(groups * nb, record_bytes(llmk_r8_form(t->type, forms)), &b) || b > SIZE_MAX / 2)
        return llmk_fail(LLMK_DIMENSION_OVERFLOW, "r8: tensor %s too large", t->name);
    *bytes = ((size_t)b + 63) / 64 * 64;
    return LLMK_OK;
}

size_t llmk_r8_view_bytes(const llmk_tensor_info *t, unsigned forms, int64_t g0, int64_t g1) {
    size_t rec = record_bytes(llmk_r8_form(t->type, forms));
    return ((size_t)(g1 - g0) * (size_t)(t->ne[0] / LLMK_QK) * rec + 63) / 64 * 64;
}

void llmk_r8_place_view(const llmk_tensor_info *t, unsigned forms, struct llmk_r8 *w, unsigned char *data, int64_t g0,
                        int64_t g1) {
    memset(w, 0, sizeof *w);
    w->type = t->type, w->layout = llmk_r8_form(t->type, forms);
    w->k = (int64_t)t->ne[0], w->n = (int64_t)t->ne[1], w->nb = w->k / LLMK_QK;
    w->block_bytes = record_bytes(w->layout);
    w->data = data;
    w->g0 = g0, w->g1 = g1;
}

void llmk_r8_place(const llmk_tensor_info *t, unsigned forms, struct llmk_r8 *w, unsigned char *data) {
    llmk_r8_place_view(t, forms, w, data, 0, ((int64_t)t->ne[1] + 7) / 8);
}

int llmk_r8_alloc(const llmk_tensor_info *t, unsigned forms, struct llmk_r8 *w) {
    memset(w, 0, sizeof *w);
    size_t bytes;
    int st = llmk_r8_size(t, forms, &bytes);
    if (st != LLMK_OK) return st;
    unsigned char *data = llmk_r8_buffer(bytes);
    if (!data) return llmk_fail(LLMK_OUT_OF_MEMORY, "r8: repacking %s (%zu bytes)", t->name, bytes);
    llmk_r8_place(t, forms, w, data);
    w->owned = 1;
    return LLMK_OK;
}

int64_t llmk_r8_groups(const struct llmk_r8 *w) { return (w->n + 7) / 8; }

/* The compact forms' integer scales of row r's sub-block b: checked to give
 * the read's s and m bit for bit (the Q8K header's m is Q8S's +0), which is what makes them the same
 * arithmetic as Q4S's and Q8S's (NaN and infinite scales included). */
static void read_kscales(uint32_t type, const unsigned char *row, int64_t b, const struct llmk_r8_sub *sub,
                         struct llmk_r8_kscales *o) {
    int64_t per = llmk_type_block_elems(type) / LLMK_QK;
    int ok = llmk_r8_read_kscales(type, row + (size_t)(b / per) * llmk_type_block_bytes(type), (int)(b % per), o);
    bool mins = type == LLMK_TYPE_Q4_K || type == LLMK_TYPE_Q5_K;
    float d = llmk_fp16_to_fp32(o->d), m = mins ? -(llmk_fp16_to_fp32(o->dmin) * (float)o->mn) : 0.0f;
    for (int h = 0; h < 2; h++) {
        float s = d * (float)o->sc[h];
        LLMK_CHECK(ok && (memcmp(&s, &sub->s[h], sizeof s) == 0 || (isnan(s) && isnan(sub->s[h]))));
    }
    LLMK_CHECK(memcmp(&m, &sub->m, sizeof m) == 0 || (isnan(m) && isnan(sub->m)));
}

/* The index of value v in the IQ4_NL grid (IQ4_XS's too). */
static int nl_index(int v) {
    for (int i = 0; i < 16; i++)
        if (llmk_iq4nl_values[i] == v) return i;
    LLMK_CHECK(!"IQ4 weight off its grid");
    return 0;
}

/* Row r's 32 weights v (-4..3) into a Q3C record (r8.h): v + 4's low 2 bits
 * and its third bit at the places of their bytes of the int8 pairs. */
static void put_q3c(unsigned char *rec, int r, const int8_t *v) {
    for (int j = 0; j < LLMK_QK; j++) {
        int x = pair_byte(r, j), u = v[j] + 4;
        LLMK_CHECK(u >= 0 && u < 8);
        rec[x % 64] |= (unsigned char)((u & 3) << (2 * (x / 64)));
        rec[64 + x / 8] |= (unsigned char)((u >> 2) << (x % 8));
    }
}

/* Row r's 32 weights v (-32..31) into a Q6C record (r8.h): v + 32's low
 * nibble and top 2 bits at the places of their bytes of the int8 pairs. */
static void put_q6c(unsigned char *rec, int r, const int8_t *v) {
    for (int j = 0; j < LLMK_QK; j++) {
        int x = pair_byte(r, j), u = v[j] + 32;
        LLMK_CHECK(u >= 0 && u < 64);
        rec[x % 128] |= (unsigned char)((u & 15) << (4 * (x / 128)));
        rec[128 + x % 64] |= (unsigned char)((u >> 4) << (2 * (x / 64)));
    }
}

/* Block b's record of a compact form at rec, and its part of the header
 * hdr (r8.h): Q4K's nibbles as Q4S's, Q8M's int8 pairs as Q8S's, XS4's
 * grid indices as NL4's, Q3C's bit planes. */
static void pack_compact(int layout, unsigned char *hdr, unsigned char *rec, int64_t b,
                         const struct llmk_r8_sub *const src[8], const struct llmk_r8_kscales *ks) {
    unsigned char *part = hdr + 64 + 16 * (b % LLMK_R8_SUPER);
    memset(rec, 0, llmk_r8_record_stride(layout));
    memset(part, 0, 16);
    for (int r = 0; r < 8; r++) {
        if (!src[r]) { /* a padding row: zero factors */
            put_f32(hdr + 4 * r, 0.0f), put_f32(hdr + 32 + 4 * r, 0.0f);
            continue;
        }
        float d = llmk_fp16_to_fp32(ks[r].d);
        put_f32(hdr + 4 * r, d);
        int mins = layout == LLMK_R8_Q4K || layout == LLMK_R8_Q8M; /* Q4K's header: -dmin, sc, mn */
        put_f32(hdr + 32 + 4 * r, mins ? -llmk_fp16_to_fp32(ks[r].dmin) : d); /* m = (-dmin) * mn exactly */
        part[r] = (unsigned char)(int8_t)ks[r].sc[0], part[8 + r] = (unsigned char)(int8_t)(mins ? ks[r].mn : ks[r].sc[1]);
        int u[LLMK_QK];
        for (int e = 0; e < LLMK_QK; e++) u[e] = layout == LLMK_R8_XS4 ? nl_index(src[r]->v[e]) : src[r]->v[e];
        if (layout == LLMK_R8_Q4K) put_nibbles(rec, r, u);
        else if (layout == LLMK_R8_XS4) put_chunks(rec, r, u);
        else if (layout == LLMK_R8_Q3C) put_q3c(rec, r, src[r]->v);
        else if (layout == LLMK_R8_Q6C) put_q6c(rec, r, src[r]->v);
        else put_pairs(rec, r, src[r]->v);
    }
}

/* An NL4 record (r8.h) from 8 IQ4_NL blocks' bytes, or an MXC one from
 * MXFP4's (NULL: a padding row): both blocks are a scale (sb bytes: f16 d,
 * u8 e) then 16 bytes of nibbles that are already grid indices; the
 * records keep the nibbles as chunks and the scales after them, as they
 * are. */
static void pack_grid(unsigned char *dst, const unsigned char *const src[8], size_t sb) {
    memset(dst, 0, 128 + 8 * sb);
    for (int r = 0; r < 8; r++) {
        if (!src[r]) continue;
        int u[LLMK_QK];
        for (int e = 0; e < LLMK_QK; e++) u[e] = nibble(src[r] + sb, e);
        put_chunks(dst, r, u);
        memcpy(dst + 128 + sb * (size_t)r, src[r], sb);
    }
}
_Static_assert(offsetof(llmk_block_iq4_nl, qs) == 2 && offsetof(llmk_block_mxfp4, qs) == 1,
               "IQ4_NL and MXFP4 blocks: the scale, then the nibbles");

/* A Q40 record (r8.h) from 8 blocks as read_block gives Q4_0's (NULL: a
 * padding row). */
static void pack_q40(unsigned char *dst, const struct r8_block *const src[8]) {
    memset(dst, 0, 144);
    for (int r = 0; r < 8; r++) {
        if (!src[r]) continue;
        put_nibbles(dst, r, src[r]->v);
        put_u16(dst + 128 + 2 * r, src[r]->d);
    }
}

/* Row r's 32 five-bit values q (0..31) as Q5C and Q51 hold them (r8.h):
 * the low nibbles in NL4's chunks, bit 4 in the plane after them at its
 * byte of the int8 pairs. */
static void put_five(unsigned char *dst, int r, const int *q) {
    int u[LLMK_QK];
    for (int j = 0; j < LLMK_QK; j++) {
        int x = pair_byte(r, j);
        u[j] = q[j] & 15;
        if (q[j] & 16) dst[128 + x / 8] |= (unsigned char)(1u << (x % 8));
    }
    put_chunks(dst, r, u);
}

/* A Q5C record (r8.h) from 8 blocks as read_block gives Q5_0's (v = q -
 * 16; NULL: a padding row, left zero: weights -16 times d = 0, in lanes no
 * result is stored from). */
static void pack_q5c(unsigned char *dst, const struct r8_block *const src[8]) {
    memset(dst, 0, 176);
    for (int r = 0; r < 8; r++) {
        if (!src[r]) continue;
        int q[LLMK_QK];
        for (int j = 0; j < LLMK_QK; j++) q[j] = src[r]->v[j] + 16;
        put_five(dst, r, q);
        put_u16(dst + 160 + 2 * r, src[r]->d);
    }
}

/* Block b's Q2C record at rec and its part of the header hdr (r8.h), from
 * the 8 rows' Q2_K bytes (NULL: a padding row, all zero) and their reads
 * (read_q2_k: sub, mins), which the integer scales are checked to give. */
static void pack_q2c(unsigned char *hdr, unsigned char *rec, int64_t b, const unsigned char *const rows[8],
                     const struct llmk_r8_sub *sub, const float (*mins)[2]) {
    unsigned char *part = hdr + 64 + 32 * (b % LLMK_R8_SUPER);
    memset(rec, 0, 64);
    memset(part, 0, 32);
    for (int r = 0; r < 8; r++) {
        if (!rows[r]) {
            put_f32(hdr + 4 * r, 0.0f), put_f32(hdr + 32 + 4 * r, 0.0f);
            continue;
        }
        llmk_block_q2_k q;
        memcpy(&q, rows[r] + (size_t)(b / 8) * sizeof q, sizeof q);
        float d = llmk_fp16_to_fp32(llmk_ld_u16(&q.d)), ndmin = -llmk_fp16_to_fp32(llmk_ld_u16(&q.dmin));
        put_f32(hdr + 4 * r, d), put_f32(hdr + 32 + 4 * r, ndmin);
        for (int h = 0; h < 2; h++) {
            int sc = q.scales[(int)(b % 8) * 2 + h];
            part[8 * h + r] = (unsigned char)(sc & 0xf), part[16 + 8 * h + r] = (unsigned char)(sc >> 4);
            float s = d * (float)(sc & 0xf), m = ndmin * (float)(sc >> 4); /* (-dmin) mn is -(dmin mn) exactly */
            LLMK_CHECK((memcmp(&s, &sub[r].s[h], sizeof s) == 0 || (isnan(s) && isnan(sub[r].s[h]))) &&
                       (memcmp(&m, &mins[r][h], sizeof m) == 0 || (isnan(m) && isnan(mins[r][h]))));
        }
        for (int j = 0; j < LLMK_QK; j++) {
            int x = pair_byte(r, j);
            rec[x % 64] |= (unsigned char)(sub[r].v[j] << (2 * (x / 64)));
        }
    }
}

/* A Q51 record (r8.h) from 8 Q5_1 blocks' bytes (NULL: a padding row,
 * left zero). */
static void pack_q51(unsigned char *dst, const unsigned char *const src[8]) {
    memset(dst, 0, 192);
    for (int r = 0; r < 8; r++) {
        if (!src[r]) continue;
        llmk_block_q5_1 b;
        memcpy(&b, src[r], sizeof b);
        int q[LLMK_QK];
        for (int j = 0; j < LLMK_QK; j++) q[j] = nibble(b.qs, j) | ((b.qh[j >> 3] >> (j & 7)) & 1) << 4;
        put_five(dst, r, q);
        put_u16(dst + 160 + 2 * r, llmk_ld_u16(&b.d));
        put_u16(dst + 176 + 2 * r, llmk_ld_u16(&b.m));
    }
}

/* Group g's block b (group data at gdata): the 8 rows' records from their
 * GGUF bytes, which src holds from row row0 on. */
static void pack_record(const llmk_tensor_info *t, const unsigned char *src, int64_t row0, const struct llmk_r8 *w,
                        int64_t g, int64_t b, unsigned char *gdata) {
    size_t rowb = (size_t)(t->n_bytes / t->ne[1]), sb = llmk_type_block_bytes(t->type);
    unsigned char *dst = gdata + llmk_r8_record_offset(w->layout, b);
    bool compact = llmk_r8_header_bytes(w->layout) > 0;
    struct r8_block blk[8];
    struct llmk_r8_sub q8s[8];
    struct llmk_r8_kscales ks[8];
    float mins[8][2];
    const void *p[8];
    for (int r = 0; r < 8; r++) {
        int64_t row = g * 8 + r;
        p[r] = NULL;
        if (row >= w->n) continue;
        const unsigned char *rp = src + (size_t)(row - row0) * rowb;
        if (w->layout == LLMK_R8_NL4 || w->layout == LLMK_R8_Q51 || w->layout == LLMK_R8_MXC) {
            p[r] = rp + (size_t)b * sb;
            continue;
        }
        if (w->layout == LLMK_R8_Q2C) {
            read_q2_k(rp, b, &q8s[r], mins[r]), p[r] = rp;
            continue;
        }
        if (w->layout == LLMK_R8_Q8S2) read_q2_k(rp, b, &q8s[r], mins[r]), p[r] = &q8s[r];
        else if (w->layout != LLMK_R8_Q4_1 && w->layout != LLMK_R8_Q8_0 && w->layout != LLMK_R8_Q5C &&
                 w->layout != LLMK_R8_Q40)
            read_q8s(t->type, rp, b, &q8s[r]), p[r] = &q8s[r]; /* the forms of r8_read.h's reading */
        else read_block(t->type, rp + (size_t)b * sb, &blk[r]), p[r] = &blk[r];
        if (compact) read_kscales(t->type, rp, b, &q8s[r], &ks[r]);
    }
    const struct llmk_r8_sub *const *sub = (const struct llmk_r8_sub *const *)p;
    if (w->layout == LLMK_R8_Q2C)
        pack_q2c(dst - (size_t)(b % LLMK_R8_SUPER) * 64 - llmk_r8_header_bytes(w->layout), dst, b,
                 (const unsigned char *const *)p, q8s, (const float(*)[2])mins);
    else if (w->layout == LLMK_R8_NL4 || w->layout == LLMK_R8_MXC)
        pack_grid(dst, (const unsigned char *const *)p, w->layout == LLMK_R8_MXC ? 1 : 2);
    else if (w->layout == LLMK_R8_Q51) pack_q51(dst, (const unsigned char *const *)p);
    else if (w->layout == LLMK_R8_Q5C) pack_q5c(dst, (const struct r8_block *const *)p);
    else if (w->layout == LLMK_R8_Q40) pack_q40(dst, (const struct r8_block *const *)p);
    else if (compact) pack_compact(w->layout, dst - (size_t)(b % LLMK_R8_SUPER) * llmk_r8_record_stride(w->layout) -
                                             llmk_r8_header_bytes(w->layout), dst, b, sub, ks);
    else if (w->layout == LLMK_R8_Q4_1) pack_q4_1(dst, (const struct r8_block *const *)p);
    else if (w->layout == LLMK_R8_Q8_0) pack_q8_0(dst, (const struct r8_block *const *)p);
    else if (w->layout == LLMK_R8_Q4S) pack_q4s(dst, sub);
    else if (w->layout == LLMK_R8_MX4) pack_mx4(dst, sub);
    else pack_q8s(dst, sub, (const float(*)[2])mins, w->layout == LLMK_R8_Q8S2);
}

void llmk_r8_pack_rows(const llmk_tensor_info *t, const void *rows, struct llmk_r8 *w, int64_t g0, int64_t g1) {
    LLMK_CHECK(g0 >= w->g0 && g1 <= w->g1);
    for (int64_t g = g0; g < g1; g++)
        for (int64_t b = 0; b < w->nb; b++)
            pack_record(t, rows, g0 * 8, w, g, b, w->data + (size_t)(g - w->g0) * (size_t)w->nb * w->block_bytes);
}

void llmk_r8_pack(const llmk_tensor_info *t, struct llmk_r8 *w, int64_t g0, int64_t g1) {
    size_t rowb = (size_t)(t->n_bytes / t->ne[1]);
    llmk_r8_pack_rows(t, (const unsigned char *)t->data + (size_t)g0 * 8 * rowb, w, g0, g1);
}

int llmk_r8_repack(const llmk_tensor_info *t, unsigned forms, struct llmk_r8 *w) {
    int st = llmk_r8_alloc(t, forms, w);
    if (st == LLMK_OK) llmk_r8_pack(t, w, 0, llmk_r8_groups(w));
    return st;
}

void llmk_r8_free(struct llmk_r8 *w) {
    if (!w) return;
    if (w->owned) free(w->data);
    memset(w, 0, sizeof *w);
}

/* ---- scalar reference ------------------------------------------------------ */

/* Activation row: int16 q[k], then f32 d[nb], then f32 s[nb] (a16.h). The
 * arithmetic of r8.h on the blocks as read_block gives them. */
static float ref_row(uint32_t type, int64_t k, const unsigned char *w, const unsigned char *a) {
    int64_t nb = k / LLMK_QK;
    size_t sb = llmk_type_block_bytes(type);
    int min = llmk_r8_layout(type) == LLMK_R8_Q4_1;
    const int16_t *q = (const int16_t *)a;
    const float *da = (const float *)(a + (size_t)k * 2), *sa = da + nb;
    float acc = 0;
    for (int64_t b = 0; b < nb; b++) {
        struct r8_block wb;
        read_block(type, w + (size_t)b * sb, &wb);
        const int16_t *qb = q + b * LLMK_QK;
        int32_t n = 0;
        for (int j = 0; j < LLMK_QK; j++) n += (int32_t)wb.v[j] * qb[j];
        acc = fmaf((float)n, llmk_fp16_to_fp32(wb.d) * da[b], acc);
        if (min) acc = fmaf(llmk_fp16_to_fp32(wb.m), sa[b], acc);
    }
    return acc;
}

/* Q8S's and Q8S2's arithmetic (r8.h) on the weights as read_q8s and
 * read_q2_k give them. */
static float ref_row_q8s(uint32_t type, int64_t k, const unsigned char *w, const unsigned char *a) {
    int64_t nb = k / LLMK_QK;
    const int16_t *q = (const int16_t *)a;
    const float *da = (const float *)(a + (size_t)k * 2), *sa = da + nb, *ha = sa + nb;
    bool two = type == LLMK_TYPE_Q2_K;
    float acc = 0;
    for (int64_t b = 0; b < nb; b++) {
        struct llmk_r8_sub wb;
        float m[2] = {0, 0};
        if (two) read_q2_k(w, b, &wb, m);
        else read_q8s(type, w, b, &wb);
        const int16_t *qb = q + b * LLMK_QK;
        int32_t n[2] = {0, 0};
        for (int j = 0; j < LLMK_QK; j++) n[j / 16] += (int32_t)wb.v[j] * qb[j];
        acc = fmaf((float)n[0], wb.s[0] * da[b], acc);
        acc = fmaf((float)n[1], wb.s[1] * da[b], acc);
        if (!two) {
            acc = fmaf(wb.m, sa[b], acc);
        } else {
            acc = fmaf(m[0], ha[2 * b], acc);
            acc = fmaf(m[1], ha[2 * b + 1], acc);
        }
    }
    return acc;
}

/* Q4S's and MX4's arithmetic (r8.h): Q4_1's (Q8_0's for MX4, no offset)
 * with the f32 scale and offset. */
static float ref_row_q4s(uint32_t type, int64_t k, const unsigned char *w, const unsigned char *a) {
    bool offset = llmk_r8_layout(type) == LLMK_R8_Q4S;
    int64_t nb = k / LLMK_QK;
    const int16_t *q = (const int16_t *)a;
    const float *da = (const float *)(a + (size_t)k * 2), *sa = da + nb;
    float acc = 0;
    for (int64_t b = 0; b < nb; b++) {
        struct llmk_r8_sub wb;
        read_q8s(type, w, b, &wb);
        const int16_t *qb = q + b * LLMK_QK;
        int32_t n = 0;
        for (int j = 0; j < LLMK_QK; j++) n += (int32_t)wb.v[j] * qb[j];
        acc = fmaf((float)n, wb.s[0] * da[b], acc);
        if (offset) acc = fmaf(wb.m, sa[b], acc);
    }
    return acc;
}

/* Every type's reference: the arithmetic of its record form (r8.h). */
void llmk_r8_ref(uint32_t type, int64_t k, const void *w, size_t ws, int64_t r0, int64_t r1, const void *act,
                 size_t as, int64_t m, float *y, size_t ys) {
    int layout = llmk_r8_layout(type);
    for (int64_t i = 0; i < m; i++)
        for (int64_t r = r0; r < r1; r++) {
            const unsigned char *wr = (const unsigned char *)w + (size_t)r * ws;
            const unsigned char *ar = (const unsigned char *)act + (size_t)i * as;
            float v;
            if (layout == LLMK_R8_Q4S || layout == LLMK_R8_MX4) v = ref_row_q4s(type, k, wr, ar);
            else if (layout == LLMK_R8_Q8S || layout == LLMK_R8_Q8S2) v = ref_row_q8s(type, k, wr, ar);
            else v = ref_row(type, k, wr, ar);
            y[(size_t)i * ys + (size_t)r] = v;
        }
}

