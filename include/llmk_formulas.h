/*
 * llmk_formulas.h — seed 001's formula layer (src/formulas/): 61 scalar functions
 * for KV memory, paging, sampling, generation-loop decisions, speculative
 * decoding and continuous batching. Used by the planner (llmk plan), the
 * sampler and the memory checks; public for applications that plan.
 */
#ifndef LLMK_FORMULAS_H
#define LLMK_FORMULAS_H

#include "llmk.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * 61 scalar formulas in six modules (src/formulas/), double in, double out,
 * no buffers, no state, no randomness. Names are seed 001's with the llmk_
 * prefix. Conventions:
 *   - a decision returns 1.0 (yes / accept / stop) or 0.0;
 *   - a division guard returns the listed safe default, never NaN or inf,
 *     for the documented degenerate input (NaN arguments propagate);
 *   - "trunc" is the seed's integer ceiling idiom: the quotient truncated
 *     toward zero as a 64-bit integer, never a call to ceil();
 *   - byte counts are bytes, times are in the unit their argument names say.
 * See docs/formulas.md for which functions have callers in llmk.
 */

/* The one KV byte count every memory formula below uses:
 * 2 (K and V) x batch x tokens x n_heads x head_dim x dtype_bytes.
 * dtype_bytes may be fractional (q8_0 stores 34 bytes per 32 values). */
LLMK_API double llmk_kv_bytes(double batch, double tokens, double n_heads, double head_dim,
                     double dtype_bytes);

/* ---- kv_cache: plain (non-paged) KV-cache sizing, eviction, quantization ---- */
/* Bytes of K+V for one layer: llmk_kv_bytes(batch, seq_len, n_heads, head_dim, dtype_bytes).
 * Qwen3-0.6B at 2048 tokens, FP16: (1, 2048, 8, 128, 2) = 8388608. */
LLMK_API double llmk_kv_cache_memory_per_layer(double batch, double seq_len, double n_heads,
                                      double head_dim, double dtype_bytes);
/* per_layer_bytes x n_layers. */
LLMK_API double llmk_kv_cache_total_memory(double per_layer_bytes, double n_layers);
/* used_tokens / max_tokens; 0.0 when max_tokens <= 0. */
LLMK_API double llmk_kv_cache_utilization(double used_tokens, double max_tokens);
/* LRU eviction priority: current_time - last_access_time (older = evict first). */
LLMK_API double llmk_kv_eviction_score_lru(double current_time, double last_access_time);
/* Heavy-Hitter Oracle keep-priority: attention_mass x recency (recency in
 * [0, 1], 1 = just used). The lowest score is the eviction candidate. */
LLMK_API double llmk_kv_eviction_score_h2o(double attention_mass, double recency);
/* min(match_len, prefix_a_len, prefix_b_len): a claimed match is capped at the
 * shorter sequence. (10, 15, 12) = 10. */
LLMK_API double llmk_radix_cache_shared_prefix_len(double prefix_a_len, double prefix_b_len,
                                          double match_len);
/* |value - dequant(quant(value))| for asymmetric INT8: code = rint(value /
 * scale) + zero_point (round half to even), CLAMPED to [-128, 127], then
 * (code - zero_point) x scale. scale <= 0 (no representable grid): |value|. */
LLMK_API double llmk_kv_quantization_error(double value, double scale, double zero_point);
/* current_len + 1: the cache length after a one-token decode step. */
LLMK_API double llmk_incremental_decode_kv_append(double current_len);
/* Bytes of K+V a prefix-cache hit of prefix_len tokens saves recomputing, all
 * layers: n_layers x llmk_kv_bytes(1, prefix_len, n_heads, head_dim, dtype_bytes). */
LLMK_API double llmk_prefix_cache_hit_bytes(double prefix_len, double n_layers, double n_heads,
                                   double head_dim, double dtype_bytes);
/* Tokens (batch 1, all layers) that fit a memory budget:
 * trunc(budget_bytes / (n_layers x llmk_kv_bytes(1, 1, ...))); 0.0 when the
 * per-token size is <= 0. (Named by llmk; the seed lists it only by count.) */
LLMK_API double llmk_kv_cache_tokens_for_budget(double budget_bytes, double n_layers, double n_heads,
                                       double head_dim, double dtype_bytes);

/* ---- paged_kv_cache: vLLM-style paged KV math ---- */
/* Identity: returns page_table_entry; virtual_block_id is the caller's key
 * into a table that lives on the caller's side. */
LLMK_API double llmk_page_table_lookup(double virtual_block_id, double page_table_entry);
/* Blocks for seq_len tokens: trunc((seq_len + block_size - 1) / block_size).
 * 0.0 when block_size <= 0. (2048, 16) = 128; (2049, 16) = 129. */
LLMK_API double llmk_paged_attention_block_count(double seq_len, double block_size);
/* Bytes (one layer) reclaimed by compacting free_fragmented_blocks partly
 * used blocks: blocks x llmk_kv_bytes(1, block_size_tokens, n_heads, head_dim, dtype_bytes). */
LLMK_API double llmk_cache_compaction_gain(double free_fragmented_blocks, double block_size_tokens,
                                  double n_heads, double head_dim, double dtype_bytes);
/* Bytes saved when n_sequences share one copy of a prefix_len-token prefix
 * instead of one each: max(n_sequences - 1, 0) x n_layers x
 * llmk_kv_bytes(1, prefix_len, n_heads, head_dim, dtype_bytes). */
LLMK_API double llmk_prefix_sharing_savings(double prefix_len, double n_sequences, double n_layers,
                                   double n_heads, double head_dim, double dtype_bytes);
/* K+V bytes of speculative branches, all layers: n_layers x
 * llmk_kv_bytes(1, n_branches x speculation_depth, n_heads, head_dim, dtype_bytes). */
LLMK_API double llmk_speculative_branch_memory(double n_branches, double speculation_depth,
                                      double n_layers, double n_heads, double head_dim,
                                      double dtype_bytes);
/* Seconds to copy one block (one layer) at bandwidth_gbs GB/s (1e9 bytes/s):
 * llmk_kv_bytes(1, block_size_tokens, ...) / (bandwidth_gbs x 1e9);
 * 0.0 when bandwidth_gbs <= 0. */
LLMK_API double llmk_block_copy_cost(double block_size_tokens, double n_heads, double head_dim,
                            double dtype_bytes, double bandwidth_gbs);
/* LRU in scheduler steps: current_step - last_access_step. */
LLMK_API double llmk_cache_eviction_lru_score(double current_step, double last_access_step);
/* Belady (offline optimal): next_use_step - current_step, the distance to
 * the next use; 1e9 when next_use_step < 0 ("never used again"). Highest
 * score is evicted first. */
LLMK_API double llmk_cache_eviction_beladys_score(double current_step, double next_use_step);
/* NTK-aware RoPE scale: (seq_len / base_context) ^ alpha; 1.0 (no scaling)
 * when base_context <= 0 or seq_len <= 0. */
LLMK_API double llmk_dynamic_ntk_rope_scale(double seq_len, double base_context, double alpha);
/* Linear context extension: target_max_len / original_max_len; 1.0 when
 * original_max_len <= 0. */
LLMK_API double llmk_context_extension_factor(double original_max_len, double target_max_len);

/* ---- llm_sampling: values (scaled logits, thresholds, scores) ---- */
/* logit / temperature; logit x 1e9 when temperature <= 0 (routes to greedy). */
LLMK_API double llmk_temperature_scale(double logit, double temperature);
/* Identity: returns k_th_logit (the k-th largest logit, found by the
 * caller's sort); tokens below it are outside the top k. */
LLMK_API double llmk_top_k_threshold(double k, double k_th_logit);
/* 1.0 while cumulative_so_far < p (the token is still inside the nucleus),
 * else 0.0; sorted_prob is not used. */
LLMK_API double llmk_top_p_cumulative(double sorted_prob, double cumulative_so_far, double p);
/* max_prob x min_p: tokens with a lower probability are dropped. */
LLMK_API double llmk_min_p_threshold(double max_prob, double min_p);
/* Repetition penalty (CTRL) for a token already in the context: logit /
 * penalty when logit > 0, logit x penalty otherwise; the logit unchanged when
 * penalty <= 0. */
LLMK_API double llmk_repetition_penalty_scale(double logit, double penalty);
/* OpenAI-style: logit - count x frequency_penalty - (count > 0 ? presence_penalty : 0). */
LLMK_API double llmk_token_frequency_penalty(double logit, double count, double frequency_penalty,
                                    double presence_penalty);
/* Locally typical sampling: |token_log_prob + entropy|, the distance of the
 * token's surprise (-log p) from the entropy. Lower is more typical. */
LLMK_API double llmk_typical_p_score(double token_log_prob, double entropy);
/* 1.0 when logit >= max_logit (this candidate is the maximum), else 0.0. */
LLMK_API double llmk_greedy_token_id(double logit, double max_logit);
/* Beam score after one more token: prev_score + token_log_prob. */
LLMK_API double llmk_beam_score_update(double prev_score, double token_log_prob);
/* GNMT length penalty ((5 + length) / 6) ^ alpha, through llmk_pow_approx. */
LLMK_API double llmk_length_penalty(double length, double alpha);
/* base ^ exponent as exp(exponent x log(base)) for base > 0; 1.0 when
 * exponent == 0; 0.0 for base <= 0 otherwise. */
LLMK_API double llmk_pow_approx(double base, double exponent);

/* ---- generation_loop: the same decisions as accept/stop signals ---- */
/* Identical to llmk_temperature_scale. */
LLMK_API double llmk_temperature_logit_scale(double logit, double temperature);
/* 1.0 when token_rank (0-based) < k; k <= 0 disables top-k (always 1.0). */
LLMK_API double llmk_top_k_accept(double token_rank, double k);
/* As the seed: 1.0 when the SECOND argument < p, else 0.0; the first is not
 * used. Pass the cumulative mass before this token as the second argument. */
LLMK_API double llmk_top_p_cumulative_accept(double cumulative_prob, double token_prob, double p);
/* 1.0 when token_prob >= max_prob x min_p. */
LLMK_API double llmk_min_p_accept(double token_prob, double max_prob, double min_p);
/* 1.0 when |(-token_log_prob) - entropy| < tau. */
LLMK_API double llmk_typical_sampling_accept(double token_log_prob, double entropy, double tau);
/* logit - count x penalty. */
LLMK_API double llmk_frequency_penalty_logit(double logit, double count, double penalty);
/* logit - penalty when count > 0, else logit. */
LLMK_API double llmk_presence_penalty_logit(double logit, double count, double penalty);
/* 1.0 when token_id == eos_id (stop), else 0.0. */
LLMK_API double llmk_eos_stop_score(double token_id, double eos_id);
/* Eta sampling (Hewitt et al.): 1.0 when token_prob > min(epsilon,
 * sqrt(epsilon) x exp(-entropy)). */
LLMK_API double llmk_eta_sampling_accept(double token_prob, double entropy, double epsilon);
/* 1.0 when max_new_tokens > 0 and n_generated >= max_new_tokens. (Named by llmk.) */
LLMK_API double llmk_max_tokens_stop(double n_generated, double max_new_tokens);

/* ---- speculative_decoding: draft/verify, constrained decoding, structure ---- */
/* min(1, target_prob / draft_prob); 1.0 when draft_prob <= 0. */
LLMK_API double llmk_speculative_accept_prob(double target_prob, double draft_prob);
/* Tokens per speculative step: (1 - a^(g+1)) / (1 - a) for acceptance rate a
 * and depth g; g + 1 at a == 1 (the limit). (0.8, 4) = 3.3616. */
LLMK_API double llmk_speculative_expected_tokens(double acceptance_rate, double speculation_depth);
/* Speedup over plain decoding: expected_tokens x target_time / total_time
 * with total_time = speculation_depth x draft_time + target_time; 1.0 when
 * total_time <= 0. (3.3616, 50, 8, 4) = 2.0498. */
LLMK_API double llmk_draft_model_speedup(double expected_tokens, double target_time, double draft_time,
                                double speculation_depth);
/* Medusa head: min(1, target_prob / medusa_prob); 1.0 when medusa_prob <= 0. */
LLMK_API double llmk_medusa_head_acceptance(double target_prob, double medusa_prob);
/* logit when allowed > 0, else -1e9 (finite, so later arithmetic stays finite). */
LLMK_API double llmk_json_grammar_logit_mask(double logit, double allowed);
/* beam_score + bonus x constraints_met / total_constraints; beam_score when
 * total_constraints <= 0. */
LLMK_API double llmk_constrained_beam_score(double beam_score, double constraints_met,
                                   double total_constraints, double bonus);
/* Retry score of a structured output: clamp(1 - n_errors / n_fields, 0, 1) /
 * (1 + retry_count); 0.0 when n_fields <= 0. */
LLMK_API double llmk_structured_repair_score(double n_errors, double n_fields, double retry_count);
/* Contrastive decoding: expert_log_prob - amateur_weight x amateur_log_prob. */
LLMK_API double llmk_contrastive_decode_score(double expert_log_prob, double amateur_log_prob,
                                     double amateur_weight);
/* Identity: returns overlap_chars (computed by the caller's tokenizer). */
LLMK_API double llmk_token_healing_overlap(double token_id, double overlap_chars);
/* Simplified watermark: logit + delta when (token_id + green_list_hash) is
 * even (fmod 2 == 0), else logit. */
LLMK_API double llmk_watermark_green_list_bias(double logit, double token_id, double green_list_hash,
                                      double delta);

/* ---- continuous_batching: iteration-level scheduling ---- */
/* 1.0 when request_kv_tokens <= available_kv_tokens x (1 - safety_margin). */
LLMK_API double llmk_admission_control_accept(double request_kv_tokens, double available_kv_tokens,
                                     double safety_margin);
/* Sequences that fit the next iteration: trunc(available_kv_tokens /
 * avg_seq_remaining); 0.0 when avg_seq_remaining <= 0. */
LLMK_API double llmk_iteration_level_batch_size(double available_kv_tokens, double avg_seq_remaining);
/* kv_cache_tokens / (seq_priority x (tokens_generated + 1)): the highest
 * score is preempted first, so a just-started sequence goes before one that
 * has sunk work; 1e9 when the denominator is <= 0. (1, 2, 512) / (1, 200, 512) = 67. */
LLMK_API double llmk_preemption_score(double seq_priority, double tokens_generated,
                             double kv_cache_tokens);
/* trunc((prompt_len + chunk_size - 1) / chunk_size); 0.0 when chunk_size <= 0.
 * (5000, 2048) = 3. */
LLMK_API double llmk_chunked_prefill_chunks(double prompt_len, double chunk_size);
/* Tokens per second: batch_size x 1000 / step_time_ms; 0.0 when step_time_ms <= 0. */
LLMK_API double llmk_decode_throughput(double batch_size, double step_time_ms);
/* queue_wait_ms + n_prefill_chunks x chunk_time_ms. */
LLMK_API double llmk_time_to_first_token(double queue_wait_ms, double n_prefill_chunks,
                                double chunk_time_ms);
/* head_wait_ms / avg_wait_ms; 1.0 (no blocking) when avg_wait_ms <= 0. */
LLMK_API double llmk_head_of_line_blocking_score(double head_wait_ms, double avg_wait_ms);
/* achieved_compute / theoretical_max_compute; 0.0 when the maximum is <= 0. */
LLMK_API double llmk_batching_efficiency(double achieved_compute, double theoretical_max_compute);
/* Beam search KV bytes for one request: beam_width x n_layers x
 * llmk_kv_bytes(1, seq_len, n_heads, head_dim, dtype_bytes). */
LLMK_API double llmk_beam_memory_per_request(double beam_width, double seq_len, double n_layers,
                                    double n_heads, double head_dim, double dtype_bytes);
/* End-to-end latency: ttft_ms + max(n_output_tokens - 1, 0) x tpot_ms. (Named by llmk.) */
LLMK_API double llmk_request_latency(double ttft_ms, double n_output_tokens, double tpot_ms);

#ifdef __cplusplus
}
#endif
#endif /* LLMK_FORMULAS_H */
