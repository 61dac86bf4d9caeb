/* Fast-path attention and activation kernels of the CPU executor
 * (src/exec_cpu.c): a scalar _ref version of each (src/kernels/attn.c),
 * AVX2 versions (src/kernels/attn_avx2.c) and AVX-512 attention chunks
 * (attn_avx512.c), in the kernel table (kernels.h).
 *
 * Attention over a cache is computed in fixed key chunks of LLMK_ATTN_CHUNK
 * positions: each chunk gives a partial (max score m, sum of exp l, weighted
 * value sum o), and partials are merged in chunk order by log-sum-exp. The
 * chunking depends only on the position, so a query's result is the same
 * whichever worker computes which chunk, and whether the query is decoded
 * alone or inside a prefill chunk. */
#ifndef LLMK_KERNELS_ATTN_H
#define LLMK_KERNELS_ATTN_H

#include <stdint.h>

#define LLMK_ATTN_CHUNK 128

/* Partial of one chunk: part = [m, l, o[0..hd)]. K/V rows are `stride`
 * elements apart, stored as f32, f16 or GGUF Q8_0 blocks (34 bytes per 32
 * elements: f16 scale, 32 int8); for Q8_0 hd and stride are multiples of 32,
 * so row j starts at block j * stride / 32. q stays f32: Q8_0 keys and values
 * are dequantized on the fly (scale applied once per block). scores:
 * LLMK_ATTN_CHUNK floats. */
typedef void (*llmk_attn_chunk_fn)(const float *q, const void *k, const void *v, int64_t n, int64_t stride,
                                   int hd, float scale, float *part, float *scores);
/* Up to LLMK_ATTN_MULTI queries (q[i], n[i] keys each, n[i] >= 1) over the
 * same chunk of keys: part[i] and scores[i] (LLMK_ATTN_CHUNK floats each)
 * exactly as the single-query kernel would give them (bit for bit), with
 * each K/V row read once for all queries (prefill: consecutive positions of
 * one sequence, times the query heads of one KV head). */
#define LLMK_ATTN_MULTI 16
typedef void (*llmk_attn_multi_fn)(int nq, const float *const *q, const int64_t *n, const void *k, const void *v,
                                   int64_t stride, int hd, float scale, float *const *part, float *const *scores);
/* g[i] = silu(g[i]) * u[i] */
typedef void (*llmk_swiglu_fn)(float *g, const float *u, int64_t n);

/* Merge nc partials (each hd + 2 floats, consecutive) in order into out[hd]. */
void llmk_attn_merge(const float *parts, int nc, int hd, float *out);
/* The same with an attention sink: a logit with no value, only in the
 * softmax's denominator (the partial [sink, 1, 0...] merged last). */
void llmk_attn_merge_sink(const float *parts, int nc, int hd, float sink, float *out);
/* Either of them, as the kernel table holds it (sink NULL: none); the SIMD
 * versions give their bits (the same operations per element, no FMA). */
typedef void (*llmk_attn_merge_fn)(const float *parts, int nc, int hd, const float *sink, float *out);

#endif
