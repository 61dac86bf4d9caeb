/* Mixture-of-experts kernels (seed 002's MoE tier, CPU form): the router
 * (softmax, top-k with ties to the lower expert index, renormalisation), the
 * expert tile map that groups a batch's (row, slot) pairs by expert for
 * prefill, the gathered matvec over one expert of a quantized 3-D stack, and
 * the weighted combine of the selected experts' outputs in a fixed order.
 *
 * Shaped to be reused beyond qwen3moe: the combine takes any number of slots
 * (a shared expert is one more slot with weight 1), and the gathered matvec
 * runs whatever codec the stack has (gpt-oss's MXFP4 experts need only a
 * codec with a dot kernel; their biases and clamped SwiGLU are an epilogue
 * on the gate/up outputs, as SwiGLU is here). */
#ifndef LLMK_KERNELS_MOE_H
#define LLMK_KERNELS_MOE_H

#include "llmk.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct llmk_type_kernels;

enum { LLMK_MOE_KMAX = 64 }; /* most experts per token (top-k) any kernel takes */

/* Route one token: p = softmax(logits[0..n_expert)), the k experts of
 * largest logit (equal logits: the lower index first; NaN never beats a
 * number) in descending order into sel[0..k), and their probabilities into
 * w[0..k), divided by their sum when norm. Softmax and the sum in double,
 * each weight rounded once to float. */
void llmk_moe_router_ref(const float *logits, int n_expert, int k, bool norm, int32_t *sel, float *w);
/* The same (bitwise: sel and w) in O(n_expert k) comparisons; the kernel
 * table's router. */
void llmk_moe_router_topk(const float *logits, int n_expert, int k, bool norm, int32_t *sel, float *w);

/* Group the slots of n_rows routed rows by expert: off[0..n_expert] is the
 * prefix count (expert e's entries are slots[off[e]..off[e+1])), each entry
 * is row * k + j (slot j of row), rows ascending within an expert. A pure
 * function of the selections: the same map whatever thread builds it. */
void llmk_moe_tile_map(const int32_t *sel, int32_t n_rows, int k, int n_expert, int32_t *off, int32_t *slots);

/* Gathered matvec: y[i * y_stride + r - r0] = dot(row r of expert e of the
 * 3-D stack w (ne[0] = k_in, ne[1] rows per expert), activation row i) for
 * r in [r0, r1), i in [0, m); activations a_stride bytes apart in the
 * codec's activation form (f32 for F32 weights). Each element is the
 * type's vec_dot on that pair, so its bits do not depend on m, r0, r1 or
 * which other experts a call runs. */
void llmk_moe_expert_matvec(const struct llmk_type_kernels *tk, const llmk_tensor_info *w, int64_t e, int64_t r0,
                            int64_t r1, const void *act, size_t a_stride, int64_t m, float *y, size_t y_stride);

/* x[i] += sum over slots j = 0..k-1, in that order, of w[j] * y[j][i] (each
 * product rounded, then added: no fused multiply-add), for i in [0, n). The
 * slots' rows are pointers: wherever the experts wrote them (the executor's
 * are in tile-map order; a shared expert's row is one more slot). */
typedef void (*llmk_moe_combine_fn)(float *x, const float *const *y, const float *w, int k, int64_t n);
void llmk_moe_combine_ref(float *x, const float *const *y, const float *w, int k, int64_t n);
void llmk_moe_combine_avx2(float *x, const float *const *y, const float *w, int k, int64_t n);

#endif
