/* Q4_1 and Q8_0 weights repacked eight rows at a time ("r8") for the
 * int16-activation kernels (activation rows in the a16 format, a16.h).
 *
 * Why: a row-at-a-time dot needs a horizontal reduction per 32-element block
 * (each block has its own scale), and that shuffling, not the multiplies,
 * bounded the A16 kernels at ~6 cycles per block. With eight weight rows
 * interleaved, one madd of (8 rows x 2 elements of int16 weights) with a
 * broadcast pair of activations leaves one partial sum per ROW in each 32-bit
 * lane: no horizontal adds at all, and the eight block scales of a group are
 * one 128-bit load.
 *
 * Layout: rows in groups of 8 (the last group zero-padded), each group a run
 * of nb blocks (nb = k / 32), each block one record in one of three forms:
 *   Q4_1 (160 bytes): f16 d[8], f16 m[8], then 4 chunks of 32 bytes; chunk c
 *     read as 16 little-endian u16 lanes L: nibble s (bits 4s..4s+3) of lane
 *     L is the weight of row L / 2, element 8c + 2s + L % 2.
 *   Q8_0 (272 bytes): 16 pairs of 16 bytes, pair p: byte 2r + e is row r's
 *     element 2p + e; then f16 d[8].
 *   Q8S (352 bytes): Q8_0's 256 bytes of int8 pairs, then f32 s0[8] (the
 *     scale of elements 0..15), f32 s1[8] (16..31), f32 m[8]: the K-quants,
 *     Q5_1, IQ4_XS and MXFP4, whose 32 weights are small integers times a
 *     per-16 scale plus a per-32 offset (r8_read.h), all exact in f32.
 *   Q8S2 (384 bytes): Q8S with an offset per 16: m0[8] for elements 0..15
 *     where Q8S has m, then m1[8] (16..31): Q2_K, whose mins are per 16.
 *   Q4S (192 bytes): f32 s[8] (one scale per 32), f32 m[8], then Q4_1's 4
 *     chunks of nibbles: Q4_K, whose sub-blocks are 4-bit unsigned integers
 *     times d * sc less dmin * mn (exact f32 products, r8_read.h), kept at
 *     6 bits a weight where Q8S took 11.
 *   Q4K (152 bytes a block, the compact Q4S): per 8 blocks (one K-quant
 *     super-block of 256 elements) a 192-byte header, f32 d[8], f32 -dmin[8]
 *     and for each of the 8 blocks u8 sc[8] then u8 mn[8], followed by the 8
 *     blocks' 4 chunks of Q4_1 nibbles (128 bytes each). s = d * sc and m =
 *     (-dmin) * mn in f32 are Q4S's values exactly (r8_read.h), so the
 *     arithmetic is Q4S's; 4.75 bits a weight where Q4S takes 6 (the file 4.5).
 *   The Q8K header (192 bytes per 8 blocks, before XS4's, Q3C's and Q6C's
 *     records): f32 d[8] twice and for each block int8 sc0[8] then int8
 *     sc1[8], for the types whose m is 0 and s an f16 times an int8; s0 =
 *     d * sc0, s1 = d * sc1, m = +0 are Q8S's values. (Q8K records, Q8_0's
 *     int8 pairs under it at 8.75 bits a weight, were Q6_K's and Q3_K's
 *     form until Q6C and Q3C took their place; gone.)
 *   NL4 (144 bytes, the compact Q8_0 of IQ4_NL): 8 chunks of 16 bytes, chunk
 *     p byte 2r + e: the low nibble is the IQ4_NL grid index of row r's
 *     element 2p + e, the high nibble of element 2p + 16 + e (one table
 *     lookup per nibble half gives Q8_0's int8 pairs p and p + 8); then
 *     f16 d[8]. Q8_0's arithmetic, 4.5 bits a weight (the file's) where
 *     Q8_0 records take 8.5.
 *   Q8M (280 bytes a block, the compact Q8S of Q5_K): Q4K's header (f32 d,
 *     -dmin, u8 sc and mn per block) before every 8 records of Q8S's int8
 *     pairs. s0 = s1 = d * sc, m = (-dmin) * mn: Q8S's arithmetic, 8.75
 *     bits a weight where Q8S takes 11 (the file 5.5).
 *   Q5C (176 bytes, the compact Q8_0 of Q5_0, the file's bytes): 8 chunks
 *     of 16 bytes whose low nibbles are the low 4 bits of (q + 16) for
 *     Q8_0's pair p and high nibbles for pair p + 8 (as NL4), then 32 bytes
 *     of fifth bits, bit i for byte i of the Q8_0 record the block expands
 *     to, then f16 d[8]. The kernels expand a record into that Q8_0 record
 *     (a masked add per 64 weights) and run Q8_0's products on it: Q8_0's
 *     bits, 5.5 bits a weight where Q8_0 records take 8.5.
 *   Q40 (144 bytes, the compact Q4_1 of Q4_0, the file's bytes): Q4_1's 4
 *     chunks of nibbles, then f16 d[8]; the kernels make Q4_1's min m =
 *     -8 d in f32, which is the f16 of -8 d that Q4_1 records hold (a
 *     multiple of 8 of an f16 is exact in f16 up to its overflow to
 *     infinity, which the kernels make too): Q4_1's bits, 4.5 bits a weight
 *     where Q4_1 records take 5. (A NaN d gives NaN either way; which NaN
 *     may differ.)
 *   XS4 (152 bytes a block, the compact Q8S of IQ4_XS): the Q8K header (its
 *     sc0 and sc1 both the sub-block's scale) before every 8 records of
 *     NL4's 128 bytes of grid indices (no scales). Q8S's arithmetic (the
 *     low nibbles are elements 0..15, the high ones 16..31), 4.75 bits a
 *     weight where Q8S takes 11 (the file 4.25).
 *   Q2C (64 bytes a block, the compact Q8S2 of Q2_K): per 8 blocks a
 *     320-byte header, f32 d[8], f32 -dmin[8] and for each of the 8 blocks
 *     u8 sc0[8], sc1[8], mn0[8], mn1[8] (the 4-bit scales and mins of
 *     elements 0..15 and 16..31), then per block the 2-bit weights: bits
 *     2j..2j+1 of byte i are byte 64 j + i of Q8_0's int8 pairs. The
 *     kernels expand a record into the Q8S2 record it stands for (s0 = d *
 *     sc0, m0 = (-dmin) * mn0, ...: read_q2_k's values exactly, in L1) and
 *     run Q8S2's products on it: 3.25 bits a weight where Q8S2 takes 12
 *     (the file 2.625).
 *   Q3C (96 bytes a block, the compact Q8S of Q3_K): the Q8K header before
 *     every 8 records of the weights u = q + 4 (0..7): their low 2 bits as
 *     Q2C's 64 bytes, then 32 bytes of their third bits, bit x % 8 of byte
 *     x / 8 for byte x of the int8 pairs. The kernels expand a record into
 *     the Q8S record it stands for (u - 4 and a masked add of 4 per 64
 *     weights; s0, s1 the header's products, m = +0) and run Q8S's products
 *     on it: 3.75 bits a weight where Q8S takes 11 (the file 3.44).
 *   Q6C (192 bytes a block, the compact Q8S of Q6_K): the Q8K header before
 *     every 8 records of u = q + 32 (0..63): its low 4 bits as NL4's chunks
 *     (128 bytes: nibble h of chunk byte c is byte 128 h + c of the int8
 *     pairs), then its top 2 bits as Q2C's 64 bytes. Expanded into the Q8S
 *     record it stands for, as Q3C's: 6.75 bits a weight where Q8S takes 11
 *     (the file 6.56).
 *   Q51 (192 bytes, the compact Q8S of Q5_1, the file's bytes): Q5C's
 *     nibble chunks and fifth-bit plane (of q itself, 0..31), then f16
 *     d[8] and f16 m[8]. Expanded into the Q8S record it stands for (s0 =
 *     s1 = d, m as f32, exact): Q8S's bits, 6 bits a weight where Q8S
 *     takes 11.
 *   MXC (136 bytes, the compact MX4 of MXFP4, the file's bytes): NL4's 8
 *     chunks of grid indices, here into MXFP4's doubled E2M1 grid (the
 *     file's nibbles as they are), then u8 e[8], the E8M0 exponents, from
 *     which the kernels make MX4's f32 scale 2^(e - 128) exactly
 *     (llmk_e8m0_half_to_fp32). MX4's arithmetic, 4.25 bits a weight where
 *     MX4 takes 5. No header: the next record starts 8 bytes into a
 *     16-byte unit, so its loads are unaligned ones.
 *     The other headers are 192 bytes so that every record starts a cache line;
 *     their f32 factors save the kernels a conversion a block. The compact
 *     forms trade a few instructions a block for a quarter less to stream:
 *     only the AVX-512 kernels read them (llmk_kernels.r8_forms).
 *   MX4 (160 bytes): f32 s[8] (one scale per 32), then 4 chunks of 32
 *     bytes of indices into MXFP4's doubled E2M1 grid (llmk_mxfp4_values):
 *     chunk c, byte 16h + 2r + e: the low nibble is row r's element
 *     8c + 4h + e, the high nibble element 8c + 4h + 2 + e (so one table
 *     lookup per nibble half gives Q8_0's int8 pairs). MXFP4, 5 bits a
 *     weight where Q8S took 11.
 * So every unpacked 256-bit register holds (row r: elements j, j+1) in its
 * 32-bit lane r, ready for a madd with the broadcast activations (a_j, a_j+1).
 *
 * Arithmetic (shared bit for bit by llmk_r8_ref and the AVX2 kernels, and
 * independent of how rows are grouped, so results never depend on M, the
 * partition or the thread count): for weight row r and activation row i,
 *   acc = 0; for each block b in order:
 *     Q4_1, Q8_0: n_b = sum_j qw_j * qa_j, exact in int32; f_b = (float)n_b
 *       (nearest even); acc = fmaf(f_b, dw_b * da_b, acc)
 *       Q4_1 only: acc = fmaf(mw_b, sa_b, acc)
 *     Q8S: n0, n1 the sums over elements 0..15 and 16..31;
 *       acc = fmaf((float)n0, s0_b * da_b, acc);
 *       acc = fmaf((float)n1, s1_b * da_b, acc); acc = fmaf(m_b, sa_b, acc)
 *     Q8S2: the same two products, then acc = fmaf(m0_b, h_2b, acc);
 *       acc = fmaf(m1_b, h_2b+1, acc) (h: the activation's half sums, a16.h)
 *     Q4S, Q4K: Q4_1's with the f32 s_b and m_b for dw_b and mw_b
 *     MX4, MXC: Q8_0's with the f32 s_b for dw_b
 *   y = acc. */
#ifndef LLMK_KERNELS_R8_H
#define LLMK_KERNELS_R8_H

#include "llmk.h"

#include <stddef.h>
#include <stdint.h>

enum { LLMK_R8_ROWS = 8 };

/* The record forms (the kernels' compile-time layout parameter). */
enum llmk_r8_layout {
    LLMK_R8_Q8_0 = 0, LLMK_R8_Q4_1 = 1, LLMK_R8_Q8S = 2, LLMK_R8_Q8S2 = 3, LLMK_R8_Q4S = 4, LLMK_R8_MX4 = 5,
    LLMK_R8_Q4K = 6, /* 7: Q8K records, gone */ LLMK_R8_NL4 = 8, LLMK_R8_XS4 = 9, LLMK_R8_Q8M = 10, LLMK_R8_Q5C = 11,
    LLMK_R8_Q40 = 12, LLMK_R8_Q2C = 13, LLMK_R8_Q3C = 14, LLMK_R8_Q6C = 15, LLMK_R8_Q51 = 16,
    LLMK_R8_MXC = 17
};

/* Record-form choices, a kernel table's llmk_kernels.r8_forms: the forms
 * its r8 kernels read besides the portable ones. */
enum { LLMK_R8_COMPACT = 1 };

/* Blocks per header of the compact forms (a K-quant super-block). */
enum { LLMK_R8_SUPER = 8 };

/* Bytes of one block's record within its group (without the header). */
static inline size_t llmk_r8_record_stride(int layout) {
    switch (layout) {
    case LLMK_R8_Q4_1:
    case LLMK_R8_MX4: return 160;
    case LLMK_R8_Q8S: return 352;
    case LLMK_R8_Q8S2: return 384;
    case LLMK_R8_Q4S: return 192;
    case LLMK_R8_Q4K:
    case LLMK_R8_XS4: return 128;
    case LLMK_R8_Q8M: return 256;
    case LLMK_R8_NL4:
    case LLMK_R8_Q40: return 144;
    case LLMK_R8_Q5C: return 176;
    case LLMK_R8_Q2C: return 64;
    case LLMK_R8_Q3C: return 96;
    case LLMK_R8_Q6C:
    case LLMK_R8_Q51: return 192;
    case LLMK_R8_MXC: return 136;
    default: return 272;
    }
}

/* Whether a form is one of the compact ones only the AVX-512 kernels read. */
static inline int llmk_r8_compact(int layout) { return layout >= LLMK_R8_Q4K; }

/* Bytes of the header before every LLMK_R8_SUPER records (compact forms). */
static inline size_t llmk_r8_header_bytes(int layout) {
    if (layout == LLMK_R8_Q2C) return 320;
    return layout == LLMK_R8_Q4K || layout == LLMK_R8_XS4 || layout == LLMK_R8_Q8M ||
                   layout == LLMK_R8_Q3C || layout == LLMK_R8_Q6C
               ? 192
               : 0;
}

/* Where block b's record starts in its group. */
static inline size_t llmk_r8_record_offset(int layout, int64_t b) {
    size_t h = llmk_r8_header_bytes(layout), rs = llmk_r8_record_stride(layout);
    if (!h) return (size_t)b * rs;
    return (size_t)(b / LLMK_R8_SUPER) * (h + LLMK_R8_SUPER * rs) + h + (size_t)(b % LLMK_R8_SUPER) * rs;
}

struct llmk_r8 {
    uint32_t type;        /* the weights' GGUF type */
    int layout;           /* enum llmk_r8_layout */
    int64_t n, k, nb;     /* rows, elements per row, blocks per row */
    size_t block_bytes;   /* bytes of one 8-row block record, headers included (a group is nb of them) */
    unsigned char *data;  /* groups [g0, g1): [g1 - g0][nb][block_bytes], 64-byte aligned */
    int64_t g0, g1;       /* the whole tensor is [0, ceil(n / 8)); a view holds fewer (a worker's share) */
    int owned;            /* data is this struct's (llmk_r8_alloc), else a caller's arena */
};

/* The record form a weight type is repacked into: Q4_1 for Q4_0 and Q4_1
 * (Q4_0's offset -8 as the min -8 d); Q8_0 for Q8_0, Q5_0 (q - 16) and
 * IQ4_NL (its grid values), which are int8 with one f16 scale; Q4S for
 * Q4_K; MX4 for MXFP4; Q8S for the other types r8_read.h reads; -1 for a
 * type without one. */
int llmk_r8_layout(uint32_t type);
/* The record form of a type given the forms the kernels read (forms:
 * LLMK_R8_COMPACT or 0): where compact Q4K for Q4_K, Q8M for Q5_K, Q6C for
 * Q6_K, Q3C for Q3_K, NL4 for IQ4_NL, XS4 for IQ4_XS, Q5C for Q5_0, Q40 for Q4_0, Q2C for Q2_K,
 * Q51 for Q5_1, MXC for MXFP4, else
 * llmk_r8_layout's. Every form of a type gives
 * the same bits. */
int llmk_r8_form(uint32_t type, unsigned forms);

/* Repack a tensor of a type llmk_r8_layout knows (the types llmk_a16_supports names) (ne = {k, n}, k a multiple of 32)
 * into llmk_r8_form(type, forms); allocates. Every function below that sizes or places takes the same forms. */
int llmk_r8_repack(const llmk_tensor_info *t, unsigned forms, struct llmk_r8 *out);
void llmk_r8_free(struct llmk_r8 *w);
/* The same in steps, so the packing can be split across threads and all of
 * a model's tensors can share one huge-page arena: validate and size (a
 * multiple of 64), place at data (the caller's, 64-byte aligned) or allocate,
 * then pack groups [g0, g1) of 8 rows (any split gives the same bytes).
 * llmk_r8_place_view places only groups [g0, g1) (llmk_r8_view_bytes of
 * them), so that each worker's shares of successive matmuls can lie in one
 * stream; kernels and llmk_r8_pack take only rows inside the view.
 * llmk_r8_buffer: an allocation for repacked weights (free()), on 2 MB
 * pages where the OS grants them. */
int llmk_r8_size(const llmk_tensor_info *t, unsigned forms, size_t *bytes);
void llmk_r8_place(const llmk_tensor_info *t, unsigned forms, struct llmk_r8 *w, unsigned char *data);
size_t llmk_r8_view_bytes(const llmk_tensor_info *t, unsigned forms, int64_t g0, int64_t g1);
void llmk_r8_place_view(const llmk_tensor_info *t, unsigned forms, struct llmk_r8 *w, unsigned char *data, int64_t g0,
                        int64_t g1);
int llmk_r8_alloc(const llmk_tensor_info *t, unsigned forms, struct llmk_r8 *w);
void *llmk_r8_buffer(size_t bytes);
int64_t llmk_r8_groups(const struct llmk_r8 *w);
void llmk_r8_pack(const llmk_tensor_info *t, struct llmk_r8 *w, int64_t g0, int64_t g1);
/* The same from a copy of just those rows: rows holds t's rows from
 * g0 * 8 to min(g1 * 8, n) (what a read of the file range gives). */
void llmk_r8_pack_rows(const llmk_tensor_info *t, const void *rows, struct llmk_r8 *w, int64_t g0, int64_t g1);

/* y[i * y_stride + r] = dot(weight row r, activation row i) for r in
 * [r0, r1) and i in [0, m); activation rows (a16 format) a_stride bytes
 * apart. r0 must be a multiple of 8, and [r0, r1) inside w's groups.
 * scratch (32-byte aligned, scratch_bytes long) is the kernel's to write:
 * with llmk_r8_scratch_bytes(w->k, m) bytes, a kernel may keep tables
 * there; with fewer (NULL, 0) it computes the same bits without them. */
typedef void (*llmk_gemm_r8_a16_fn)(const struct llmk_r8 *w, int64_t r0, int64_t r1, const void *act, size_t a_stride,
                                    int64_t m, float *y, size_t y_stride, void *scratch, size_t scratch_bytes);

/* The scratch that lets a call of m activation rows of k elements read each
 * row's pairs from a table of broadcast registers (AVX2: one 32-byte entry
 * per pair, for the LLMK_R8_TABLE_PASS rows of a pass over the weights);
 * calls of more rows than LLMK_R8_TABLE_ROWS use none. */
enum { LLMK_R8_TABLE_ROWS = 8, LLMK_R8_TABLE_PASS = 4 };
static inline size_t llmk_r8_scratch_bytes(int64_t k, int64_t m) {
    int64_t rows = m < LLMK_R8_TABLE_PASS ? m : LLMK_R8_TABLE_PASS;
    return m <= LLMK_R8_TABLE_ROWS ? (size_t)rows * (size_t)(k / 2) * 32 : 0;
}

/* With one activation row the AVX2 kernel reads rows [r0, r1) as this many
 * contiguous runs side by side (groups r0/8 + s*len + i, len the groups
 * divided by it, rounded up): more DRAM misses in flight than one run. */
enum { LLMK_R8_RUNS = 4 };

/* The same products from the original GGUF rows of any type llmk_r8_layout
 * knows (w: the tensor's data, rows w_stride bytes apart; rows [r0, r1) of
 * it): the scalar reference, and the path for CPUs without AVX2 (no
 * repacking needed). */
void llmk_r8_ref(uint32_t type, int64_t k, const void *w, size_t w_stride, int64_t r0, int64_t r1, const void *act,
                 size_t a_stride, int64_t m, float *y, size_t y_stride);

/* AVX2 + FMA + F16C (src/kernels/r8_avx2.c); only when llmk_cpu_detect()
 * reports LLMK_CPU_AVX2. The portable forms only (none of llmk_r8_compact's). */
void llmk_gemm_r8_a16_avx2(const struct llmk_r8 *w, int64_t r0, int64_t r1, const void *act, size_t a_stride, int64_t m,
                           float *y, size_t y_stride, void *scratch, size_t scratch_bytes);

/* AVX-512 F/BW/VL + VNNI (src/kernels/r8_avx512.c), the same bits as the
 * AVX2 kernel; only when llmk_cpu_detect() reports LLMK_CPU_AVX512_VNNI. */
void llmk_gemm_r8_a16_avx512(const struct llmk_r8 *w, int64_t r0, int64_t r1, const void *act, size_t a_stride, int64_t m,
                             float *y, size_t y_stride, void *scratch, size_t scratch_bytes);

#endif
