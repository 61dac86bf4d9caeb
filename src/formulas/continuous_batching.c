/* continuous_batching: an iteration-level scheduler's per-step arithmetic --
 * admission, batch size, preemption order, chunked prefill, throughput and
 * latency figures, and beam-search memory. */
#include "formulas.h"

double llmk_admission_control_accept(double request_kv_tokens, double available_kv_tokens,
                                     double safety_margin) {
    /* Keep a fraction of the budget in reserve before comparing. */
    double budget = available_kv_tokens * (1.0 - safety_margin);
    return request_kv_tokens <= budget ? 1.0 : 0.0;
}

double llmk_iteration_level_batch_size(double available_kv_tokens, double avg_seq_remaining) {
    if (avg_seq_remaining <= 0.0) return 0.0;
    return llmk_trunc_i64(available_kv_tokens / avg_seq_remaining);
}

double llmk_preemption_score(double seq_priority, double tokens_generated,
                             double kv_cache_tokens) {
    /* Dividing by tokens_generated + 1 protects sunk work: of two equal
     * sequences, the one that just started is the cheaper one to restart. */
    double denom = seq_priority * (tokens_generated + 1.0);
    if (denom <= 0.0) return 1e9;
    return kv_cache_tokens / denom;
}

double llmk_chunked_prefill_chunks(double prompt_len, double chunk_size) {
    if (chunk_size <= 0.0) return 0.0;
    return llmk_trunc_i64((prompt_len + chunk_size - 1.0) / chunk_size);
}

double llmk_decode_throughput(double batch_size, double step_time_ms) {
    if (step_time_ms <= 0.0) return 0.0;
    return batch_size * 1000.0 / step_time_ms;
}

double llmk_time_to_first_token(double queue_wait_ms, double n_prefill_chunks,
                                double chunk_time_ms) {
    return queue_wait_ms + n_prefill_chunks * chunk_time_ms;
}

double llmk_head_of_line_blocking_score(double head_wait_ms, double avg_wait_ms) {
    if (avg_wait_ms <= 0.0) return 1.0;
    return head_wait_ms / avg_wait_ms;
}

double llmk_batching_efficiency(double achieved_compute, double theoretical_max_compute) {
    if (theoretical_max_compute <= 0.0) return 0.0;
    return achieved_compute / theoretical_max_compute;
}

double llmk_beam_memory_per_request(double beam_width, double seq_len, double n_layers,
                                    double n_heads, double head_dim, double dtype_bytes) {
    return beam_width * n_layers * llmk_kv_bytes(1.0, seq_len, n_heads, head_dim, dtype_bytes);
}

double llmk_request_latency(double ttft_ms, double n_output_tokens, double tpot_ms) {
    double later = n_output_tokens - 1.0;
    return ttft_ms + (later > 0.0 ? later * tpot_ms : 0.0);
}
