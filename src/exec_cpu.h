/* The CPU executor: runs a model's phase program (src/program.h) on a
 * persistent worker pool. One llmk_pool_run per evaluation; inside it every
 * worker walks the whole program, takes its share of each phase by a
 * partition that depends only on the shape, and crosses a barrier between
 * phases. All scratch and the KV block pool (n_seq sequence slots sharing
 * n_kv_blocks blocks, src/kvpool.h; docs/paged_kv.md) are allocated at
 * init; nothing is allocated and no thread is created per token.
 *
 * Determinism (tests/test_exec.c): every output element is computed by one
 * worker in a fixed order, so logits are bitwise identical for any thread
 * count, for a sequence alone or inside a batched decode step, for prefill in
 * one chunk or token by token, and in phase-at-a-time mode. docs/executor.md. */
#ifndef LLMK_EXEC_CPU_H
#define LLMK_EXEC_CPU_H

#include "model.h"
#include "program.h"

#include <stdbool.h>
#include <stdint.h>

struct llmk_exec_params {
    int32_t n_ctx;     /* KV capacity per sequence; <= 0: the model's n_ctx_train (capped at 4096) */
    int32_t n_threads; /* <= 0: one per online CPU */
    int32_t n_batch;   /* rows per forward chunk (prefill); <= 0: 512 */
    int32_t n_seq;     /* sequence slots; <= 0: 1 */
    int32_t n_kv_blocks; /* KV pool blocks of LLMK_KV_BLOCK positions; <= 0: n_seq x ceil(n_ctx / LLMK_KV_BLOCK) */
    uint32_t kv_type;  /* LLMK_TYPE_F32 (default when 0), LLMK_TYPE_F16 or LLMK_TYPE_Q8_0 (head_dim % 32 == 0) */
    bool allow_long_ctx; /* as llmk_session_params */
    uint64_t mem_limit;  /* as llmk_session_params */
    llmk_progress_callback progress; /* as llmk_session_params: called during init */
    void *progress_user;
};

struct llmk_exec;

int llmk_exec_init(const struct llmk_model *m, const struct llmk_exec_params *p, struct llmk_exec **out);
void llmk_exec_free(struct llmk_exec *ex);

/* Append n tokens to sequence seq at its position and advance it. logits:
 * NULL (no LM head), the last row, or all n rows (all_positions); cap in
 * floats. On failure the position is unchanged. A NaN or infinity in the
 * activations (met where they are quantized or checked: Q/K/V, logits) fails
 * the call with LLMK_NAN_INPUT naming the phase, sequence and position. */
int llmk_exec_eval(struct llmk_exec *ex, int32_t seq, const int32_t *ids, size_t n, float *logits, size_t cap,
                   bool all_positions);
/* The same, but out receives the final hidden states instead of logits:
 * n_embd floats per row, output_norm's RMSNorm of the residual stream (the
 * vector the LM head multiplies), and no LM head runs. A row's bits are
 * those the logits call quantizes for its LM head, for any thread count or
 * split; NaN or infinity in it is LLMK_NAN_INPUT naming output_norm. */
int llmk_exec_eval_hidden(struct llmk_exec *ex, int32_t seq, const int32_t *ids, size_t n, float *out, size_t cap,
                          bool all_positions);
/* One decode step for B distinct sequences: row b appends ids[b] to seqs[b].
 * logits (may be NULL): B rows of n_vocab. argmax (may be NULL): B ids.
 * Failures (LLMK_NAN_INPUT as llmk_exec_eval) advance no sequence. */
int llmk_exec_decode_batch(struct llmk_exec *ex, const int32_t *seqs, const int32_t *ids, size_t B, float *logits,
                           size_t cap, int32_t *argmax);
/* Any rows in one pass (n <= the executor's rows, max(n_batch, n_seq)): row
 * i appends ids[i] to seqs[i] (a sequence's rows take its next positions in
 * call order), prefill chunks and decode rows alike, so one weight pass
 * serves them all. logits receives one row per want[i], in call order. The
 * caller has checked ranges, ids and room; LLMK_CACHE_CAPACITY_EXCEEDED
 * when the pool cannot hold them (nothing moved). A row's bits are those of
 * any other grouping. */
int llmk_exec_run_rows(struct llmk_exec *ex, const int32_t *seqs, const int32_t *ids, const bool *want, size_t n,
                       float *logits, size_t cap);
/* Greedy id of each logits row of the last call that ran the LM head
 * (row i of its logits). */
int32_t llmk_exec_argmax(const struct llmk_exec *ex, size_t row);
/* Forget seq's tokens from pos on; pos 0 frees the slot (its full blocks
 * stay cached for a later prefix). A cut inside a shared block copies the
 * kept positions to a block of the sequence's own (LLMK_CACHE_CAPACITY_EXCEEDED
 * when there is none). */
int llmk_exec_truncate(struct llmk_exec *ex, int32_t seq, int32_t pos);
int32_t llmk_exec_pos(const struct llmk_exec *ex, int32_t seq);
int32_t llmk_exec_n_ctx(const struct llmk_exec *ex);
int32_t llmk_exec_rows_cap(const struct llmk_exec *ex); /* rows one pass takes: max(n_batch, n_seq) */
int llmk_exec_n_threads(const struct llmk_exec *ex);
const struct llmk_program *llmk_exec_program(const struct llmk_exec *ex);
const char *llmk_exec_kernels(const struct llmk_exec *ex);

/* A whole generation in one executor call (seed 003's single launch): each
 * entry's sequence is fed `id` at its first step, and the token chosen from
 * a step's logits (the argmax phase's, or `sampler`'s draw) at the next,
 * until max_tokens tokens were chosen, cb returns nonzero, or the context
 * is full (llmk_gen_seq, include/llmk.h). cb(user, entry, token) runs on the calling thread between steps.
 * The tokens are bitwise those of one llmk_exec_decode_batch per token. On a
 * failure (LLMK_NAN_INPUT, LLMK_CACHE_CAPACITY_EXCEEDED, a sampler's) the
 * failing step is undone and earlier steps stay. */
int llmk_exec_generate(struct llmk_exec *ex, const llmk_gen_seq *g, size_t n, llmk_gen_callback cb, void *user);

/* The KV pool (llmk_context's functions of the same names, include/llmk.h). */
int llmk_exec_seq_start(struct llmk_exec *ex, int32_t seq, const int32_t *ids, size_t n, int32_t *n_cached);
int32_t llmk_exec_blocks_needed(const struct llmk_exec *ex, int32_t seq, int32_t n);
int32_t llmk_exec_blocks_available(const struct llmk_exec *ex); /* free + cached */
/* Undo evals of seq since it had pos tokens (their blocks are unregistered,
 * so no prefix hit finds them): a caller's all-or-nothing failure path. */
int llmk_exec_rollback(struct llmk_exec *ex, int32_t seq, int32_t pos);
void llmk_exec_kv_info(const struct llmk_exec *ex, llmk_kv_info *out);

/* Phase-at-a-time mode: one pool region per phase, timed. Bitwise identical
 * to the fused run. Timings accumulate until reset: ns[i] for phase i. */
void llmk_exec_set_phase_mode(struct llmk_exec *ex, bool on);
void llmk_exec_reset_timings(struct llmk_exec *ex);
const double *llmk_exec_phase_ns(const struct llmk_exec *ex);

#endif
