/* f32 CPU ops for the first decode path (LLMK_PATH_F32) and the executor: fixed
 * summation orders that depend only on the shape, so results are bitwise
 * reproducible for any thread count. */
#ifndef LLMK_OPS_F32_H
#define LLMK_OPS_F32_H

#include "llmk.h"
#include "pool.h"

#include <stdbool.h>
#include <stdint.h>

/* sum_i a[i]*b[i] in a fixed order (8 interleaved partial sums, combined
 * pairwise, then the tail). */
float llmk_f32_dot(const float *a, const float *b, int64_t n);
/* y[t * ys + r] = llmk_f32_dot(w + r * ws, x + t * xs, n) for r < nr, t < nt
 * (strides in floats): many dots at once, each with llmk_f32_dot's bits.
 * The AVX2 form runs a tile of rows x vectors side by side: one dot is a
 * chain of dependent adds (~3 cycles per 8 elements), which bounded the MoE
 * router (48 dots of 1024 per token and layer). */
void llmk_f32_dots(const float *w, size_t ws, int64_t nr, const float *x, size_t xs, int64_t nt, int64_t n, float *y,
                   size_t ys);

/* out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i] (w may be NULL: no scale).
 * out may equal x. The mean of squares is accumulated in double. The scalar
 * definition and the AVX2 version give the same bits (the same double lanes,
 * the same order); the kernel table (kernels.h) holds the one in use. */
void llmk_f32_rmsnorm_ref(float *out, const float *x, const float *w, int64_t n, float eps);
void llmk_f32_rmsnorm_avx2(float *out, const float *x, const float *w, int64_t n, float eps);
/* Its 1 / rms(x) alone (the same lanes and order), for the fused norms (norm_fused_avx2.c). */
float llmk_f32_inv_rms_avx2(const float *x, int64_t n, float eps);

/* Rotate n_heads vectors of head_dim in x by the angles in cs (head_dim/2
 * (cos, sin) pairs for one position). neox: pairs (i, i + head_dim/2);
 * otherwise adjacent pairs (2i, 2i+1). The scalar definition and the AVX2
 * version give the same bits (per pair the same two products and one add or
 * subtract). */
void llmk_f32_rope_ref(float *x, int n_heads, int head_dim, const float *cs, bool neox);
void llmk_f32_rope_avx2(float *x, int n_heads, int head_dim, const float *cs, bool neox);

/* cs[pos][i] = (cos, sin) of pos * inv_freq[i], times af (YaRN's attention
 * factor; 1 otherwise), for pos < n_pos, i < half: in double, rounded once
 * to f32 (the f32 path's and the executor's RoPE table). */
void llmk_rope_cs_table(const double *inv_freq, int half, int32_t n_pos, double af, float *cs);
/* x[i] *= s. */
void llmk_scale_f32(float *x, int64_t n, float s);
/* x[i] = c * tanh(x[i] / c): a final logit soft-cap. */
void llmk_softcap_f32(float *x, int64_t n, float c);

/* g[i] = silu(g[i]) * u[i]. */
void llmk_f32_swiglu(float *g, const float *u, int64_t n);

/* One head's attention for one query over n_kv cached positions: K and V
 * rows are head_dim floats, kv_stride floats apart. scores: n_kv scratch.
 * sink: a logit only in the softmax's denominator (gpt-oss's attention
 * sinks); -INFINITY for none, which gives the bits of no sink. */
void llmk_f32_attend(const float *q, const float *k, const float *v, int64_t n_kv, int64_t kv_stride, int head_dim,
                     float scale, float sink, float *scores, float *out);

/* The index of the first maximum of x[0..n), NaNs skipped; -1 when there is
 * none (n <= 0 or every element NaN). */
int64_t llmk_f32_argmax(const float *x, int64_t n);
int64_t llmk_f32_argmax_avx2(const float *x, int64_t n);

/* Whether x[0..n) holds a NaN or an infinity (the executor's check of the
 * values no quantizer reads: Q/K/V before the cache, the logits). The AVX2
 * version gives the same answer. */
bool llmk_f32_nonfinite(const float *x, int64_t n);
bool llmk_f32_nonfinite_avx2(const float *x, int64_t n);

/* Decode one row of n elements (whole blocks; caller checked the type and
 * size): Q4_0, Q4_1, Q8_0 and F32 inline and bitwise equal to
 * llmk_dequantize_row, other types through it. */
int llmk_f32_dequant_row(uint32_t type, const void *src, float *dst, int64_t n);

/* y[t*n_out + r] = dot(row r of w, x[t*n_in ..]) for t < n_tok, r < n_out,
 * w being a 2-D tensor [n_in, n_out] of any type llmk_dequantize_row decodes.
 * Rows are dequantized one at a time into scratch (n_in floats per pool
 * worker, scratch_stride floats apart) and split across the pool by
 * llmk_split_range over r, so every y element has one fixed summation order. */
int llmk_f32_matmul(llmk_pool *pool, const llmk_tensor_info *w, const float *x, int64_t n_tok,
                    float *y, float *scratch, int64_t scratch_stride);

/* The same for n_mat (1..4) matrices sharing x and n_in, in one pool region:
 * y[i] receives matrix i's rows. Bitwise equal to n_mat separate calls. */
int llmk_f32_matmul_multi(llmk_pool *pool, int n_mat, const llmk_tensor_info *const *w, const float *x,
                          int64_t n_tok, float *const *y, float *scratch, int64_t scratch_stride);

/* AVX2 kernels (src/kernels/ops_f32_avx2.c, x86-64 only), bitwise equal to
 * the baseline ones (the kernel table's entries where the CPU has AVX2).
 * rowdot: the dot
 * of one Q4_0/Q4_1/Q8_0 row with x, decoded on the fly; returns 0 for other
 * types. */
float llmk_f32_dot_avx2(const float *a, const float *b, int64_t n);
void llmk_f32_dots_avx2(const float *w, size_t ws, int64_t nr, const float *x, size_t xs, int64_t nt, int64_t n,
                        float *y, size_t ys);
int llmk_f32_rowdot_avx2(uint32_t type, const void *row, const float *x, int64_t n, float *out);

#endif
