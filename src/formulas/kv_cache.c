/* kv_cache: plain (non-paged) KV-cache sizing, eviction scores, radix-prefix
 * length and INT8 round-trip error. */
#include "formulas.h"

double llmk_kv_cache_memory_per_layer(double batch, double seq_len, double n_heads,
                                      double head_dim, double dtype_bytes) {
    return llmk_kv_bytes(batch, seq_len, n_heads, head_dim, dtype_bytes);
}

double llmk_kv_cache_total_memory(double per_layer_bytes, double n_layers) {
    return per_layer_bytes * n_layers;
}

double llmk_kv_cache_utilization(double used_tokens, double max_tokens) {
    if (max_tokens <= 0.0) return 0.0;
    return used_tokens / max_tokens;
}

double llmk_kv_eviction_score_lru(double current_time, double last_access_time) {
    return current_time - last_access_time;
}

double llmk_kv_eviction_score_h2o(double attention_mass, double recency) {
    return attention_mass * recency;
}

double llmk_radix_cache_shared_prefix_len(double prefix_a_len, double prefix_b_len,
                                          double match_len) {
    double shorter = prefix_a_len < prefix_b_len ? prefix_a_len : prefix_b_len;
    return match_len < shorter ? match_len : shorter;
}

double llmk_kv_quantization_error(double value, double scale, double zero_point) {
    if (scale <= 0.0) return fabs(value);
    double code = nearbyint(value / scale) + zero_point;
    /* Clamp, never wrap: an out-of-range value pays a large error instead of
     * flipping sign. */
    if (code < -128.0) code = -128.0;
    if (code > 127.0) code = 127.0;
    return fabs(value - (code - zero_point) * scale);
}

double llmk_incremental_decode_kv_append(double current_len) { return current_len + 1.0; }

double llmk_prefix_cache_hit_bytes(double prefix_len, double n_layers, double n_heads,
                                   double head_dim, double dtype_bytes) {
    return n_layers * llmk_kv_bytes(1.0, prefix_len, n_heads, head_dim, dtype_bytes);
}

double llmk_kv_cache_tokens_for_budget(double budget_bytes, double n_layers, double n_heads,
                                       double head_dim, double dtype_bytes) {
    double per_token = n_layers * llmk_kv_bytes(1.0, 1.0, n_heads, head_dim, dtype_bytes);
    if (!(per_token > 0.0)) return 0.0;
    return llmk_trunc_i64(budget_bytes / per_token);
}
