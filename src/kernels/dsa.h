/* DeepSeek/GLM sparse attention (DSA, seed 002): the lightning indexer's
 * scores, the per-row top-k over them, the sparse attention that runs a
 * sliding local window plus the selected pooled rows plus per-head sinks in
 * one flash-softmax pass, and the two quantization-aware round trips
 * (FP8-E4M3FN KV, Hadamard + FP4-E2M1 indexer activations).
 *
 * Every kernel accepts any number of query rows qL >= 1 (decode, MTP verify
 * qL = 2, prefill). One call is one sequence; batches are separate calls.
 *
 * The checked entry points llmk_dsa_* validate shapes (sizes over the limits
 * below, overflowing products, NULL buffers, indices outside the pooled rows
 * are refused with a status and a message) and then run the kernels of a
 * struct llmk_dsa_kernels: the scalar references (dsa.c) or the AVX2 ones
 * (dsa_avx2.c), bit for bit the same, taken from the kernel table
 * (kernels.h) unless the caller passes a set (the tests pass both).
 *
 * Fixed arithmetic, shared by ref and fast:
 *  - dot(a, b) over n: eight partial sums s[l] += a[i+l] * b[i+l] (multiply,
 *    then add; never fused) over whole groups of 8, combined as
 *    ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)), then the tail
 *    elements added in order;
 *  - exp: llmk_dsa_exp (a polynomial with the same operations per lane);
 *  - every other sum runs in index order. */
#ifndef LLMK_KERNELS_DSA_H
#define LLMK_KERNELS_DSA_H

#include "codec/minifloat.h"

#include <stdbool.h>
#include <stdint.h>

/* Limits of the checked entry points (hostile sizes are refused, not run). */
#define LLMK_DSA_MAX_HEADS 1024
#define LLMK_DSA_MAX_HEAD_DIM 1024
#define LLMK_DSA_MAX_TOPK 65536
#define LLMK_DSA_MAX_ROWS ((int64_t)1 << 28) /* query rows, cache and pooled rows */
#define LLMK_DSA_DECODE_MAX_Q 4              /* qL of llmk_dsa_indexer_score_decode */

/* The seed's levers, as configuration. key_tile: keys per online-softmax
 * step of the sparse attention (128 or 256; 0: auto, 128 for top-k lists up
 * to 128 entries, 256 for denser ones). split: the split-KV route, the key
 * list cut into that many contiguous chunks whose partials (max, sum, values)
 * merge in chunk order (1: off; 0: auto, on for decode-shaped calls, qL <= 4
 * with one KV head, where chunks are what a threaded caller would spread
 * over cores). Both change rounding, never what is attended; ref and fast
 * give the same bits for the same values. */
struct llmk_dsa_params {
    int key_tile;
    int split;
};

/* The sparse attention's operands. Query row m sits at absolute position
 * pos0 + m of the local cache and attends, in this order:
 *  1. the local rows max(0, pos - window + 1) .. pos (window 0: none);
 *  2. the pooled rows idx[m * topk + t], t < topk, in list order (-1: no row);
 *  3. the sink: a logit sinks[h] that joins the softmax's denominator and
 *     brings no value (sinks NULL: none).
 * A row listed twice counts twice (the caller's top-k never lists one twice;
 * a local row that is also pooled is the caller's model's business).
 * Layouts (f32, contiguous): q [n_q][n_heads][dk]; local k [n_local][n_kv][dk],
 * v [n_local][n_kv][dv]; pooled pk [n_pool][n_kv][dk], pv [n_pool][n_kv][dv];
 * out [n_q][n_heads][dv]. Query head h reads KV head h / (n_heads / n_kv).
 * A query with nothing to attend (no local row, no pooled row) gets zeros. */
struct llmk_dsa_attn {
    int64_t n_q, pos0;
    int n_heads, n_kv, dk, dv;
    const float *q;
    const float *k, *v;
    int64_t n_local, window;
    const float *pk, *pv;
    int64_t n_pool;
    const int32_t *idx;
    int topk;
    const float *sinks;
    float scale;
    struct llmk_dsa_params params;
};

/* One head's flash-softmax partial over n gathered keys: key j's row is
 * krows[j] (dk floats), its value vrows[j] (dv floats). part = [max, sum,
 * o[0..dv)] unnormalised, keys taken key_tile at a time: per tile the scores
 * s_j = dot(q, k_j) * scale, the running max raised to the tile's, the sum
 * and o rescaled by exp(old - new) (skipped while nothing was seen), then
 * p_j = exp(s_j - max) added to the sum in order and p_j * v_j to o in order.
 * scratch: key_tile floats. n = 0 gives max -inf, sum 0, o zeros. */
typedef void (*llmk_dsa_attn_part_fn)(const float *q, const float *const *krows, const float *const *vrows, int64_t n,
                                      int dk, int dv, float scale, int key_tile, float *part, float *scratch);

/* out[m][n] = sum over h in order of relu(dot(q[m][h], k[n])) * w[m][h], for
 * m < n_q, n < n_keys (q [n_q][n_heads][dim], k [n_keys][dim], w
 * [n_q][n_heads]). The prefill form walks query tiles against key tiles with
 * per-head tile scores; the decode form (n_q <= 4) sums each score over the
 * heads directly. Both give the same bits. */
typedef void (*llmk_dsa_scores_fn)(const float *q, const float *k, const float *w, int64_t n_q, int n_heads, int dim,
                                   int64_t n_keys, float *out);

/* The 16-bit ordering key of each score (llmk_dsa_score_key). */
typedef void (*llmk_dsa_keys_fn)(const float *scores, int64_t n, uint16_t *keys);

/* In-place QAT round trips over n elements (whole blocks): see
 * llmk_dsa_kv_qat and llmk_dsa_indexer_qat. */
typedef void (*llmk_dsa_kv_qat_fn)(float *x, int64_t n, bool f16_round);
typedef void (*llmk_dsa_hadamard_fn)(float *x, int64_t n); /* each 128-block, scaled by 128^-1/2 */
typedef void (*llmk_dsa_fp4_fn)(float *x, int64_t n);      /* per-32 FP4-E2M1 round trip */

struct llmk_dsa_kernels {
    const char *name;
    llmk_dsa_scores_fn indexer_scores, indexer_score_decode;
    llmk_dsa_keys_fn score_keys;
    llmk_dsa_attn_part_fn attn_part;
    llmk_dsa_kv_qat_fn kv_qat;
    llmk_dsa_hadamard_fn hadamard128;
    llmk_dsa_fp4_fn fp4_qat;
};

/* The scalar set and the AVX2 set (x86-64 only). */
extern const struct llmk_dsa_kernels llmk_dsa_kernels_ref;
#if defined(__x86_64__)
extern const struct llmk_dsa_kernels llmk_dsa_kernels_avx2;
#endif

/* Scalar exp of the DSA kernels: Cephes' expf polynomial (published
 * constants) after a clamp to [-87, 88] and a split by ln 2, every step a
 * separate multiply or add so a vector version matches it lane for lane;
 * about 1 ulp from expf over the range softmax uses. NaN stays NaN. */
float llmk_dsa_exp(float x);

/* Ordering key of a score: the score rounded to bf16 (nearest even), its bits
 * mapped so that unsigned order is numeric order; NaN maps to 0, below -inf. */
uint16_t llmk_dsa_score_key(float s);

/* The FP4 block scale: amax / 6 rounded up to a power of two (amax > 0). */
float llmk_dsa_e8m0_scale(float amax);

/* ---- checked entry points (status LLMK_OK or an error with a message) ----
 * kt: the kernel set, NULL for the kernel table's. */

int llmk_dsa_indexer_scores(const struct llmk_dsa_kernels *kt, const float *q, const float *k, const float *w,
                            int64_t n_q, int n_heads, int dim, int64_t n_keys, float *out);
/* The same values for 1 <= n_q <= 4, without the per-head tile scores. */
int llmk_dsa_indexer_score_decode(const struct llmk_dsa_kernels *kt, const float *q, const float *k, const float *w,
                                  int64_t n_q, int n_heads, int dim, int64_t n_keys, float *out);

/* Per row m < n_q of scores (row_stride floats apart), the top k of its first
 * n_valid[m] entries (n_valid NULL: all n_keys) by llmk_dsa_score_key, by a
 * two-pass radix select (high byte, then low byte). Among equal keys the lower
 * index wins, so the set is exactly the first k of a stable descending sort
 * of the keys. idx[m][0..k) lists the set in increasing index order, padded
 * with -1 where a row has fewer than k valid entries. */
int llmk_dsa_topk_indices(const struct llmk_dsa_kernels *kt, const float *scores, int64_t n_q, int64_t n_keys,
                          int64_t row_stride, const int64_t *n_valid, int k, int32_t *idx);

/* out = the sparse attention of a (see struct llmk_dsa_attn). */
int llmk_dsa_sparse_attention(const struct llmk_dsa_kernels *kt, const struct llmk_dsa_attn *a, float *out);

/* The resolved levers of a call (params 0 = auto). */
struct llmk_dsa_params llmk_dsa_resolve(const struct llmk_dsa_attn *a);

/* KV QAT, in place, n a multiple of 64: per block of 64, s = max(amax, 1e-4)
 * / 448, x = e4m3(x / s) * s, then (f16_round) rounded to f16 and back. */
int llmk_dsa_kv_qat(const struct llmk_dsa_kernels *kt, float *x, int64_t n, bool f16_round);

/* Indexer QAT, in place, n a multiple of 128: per block of 128, the
 * Walsh-Hadamard transform (butterflies with strides 1, 2, 4 .. 64, a + b
 * above a - b) times 128^-1/2; then per block of 32, s = amax / 6 rounded up
 * to a power of two (an E8M0 scale), x = e2m1(x / s) * s (amax 0: zeros). */
int llmk_dsa_indexer_qat(const struct llmk_dsa_kernels *kt, float *x, int64_t n);
/* The Hadamard step alone (tests compare it with a dense transform). */
int llmk_dsa_hadamard128(const struct llmk_dsa_kernels *kt, float *x, int64_t n);

#endif
