/* paged_kv_cache: vLLM-style paged KV math -- blocks, page table, copy and
 * compaction costs, prefix sharing, speculative branches, LRU/Belady
 * eviction and two context-extension scale factors. */
#include "formulas.h"

double llmk_page_table_lookup(double virtual_block_id, double page_table_entry) {
    (void)virtual_block_id; /* the mapping lives in the caller's table */
    return page_table_entry;
}

double llmk_paged_attention_block_count(double seq_len, double block_size) {
    if (block_size <= 0.0) return 0.0;
    return llmk_trunc_i64((seq_len + block_size - 1.0) / block_size);
}

double llmk_cache_compaction_gain(double free_fragmented_blocks, double block_size_tokens,
                                  double n_heads, double head_dim, double dtype_bytes) {
    return free_fragmented_blocks *
           llmk_kv_bytes(1.0, block_size_tokens, n_heads, head_dim, dtype_bytes);
}

double llmk_prefix_sharing_savings(double prefix_len, double n_sequences, double n_layers,
                                   double n_heads, double head_dim, double dtype_bytes) {
    double copies_saved = n_sequences - 1.0;
    if (copies_saved <= 0.0) return 0.0;
    return copies_saved * n_layers * llmk_kv_bytes(1.0, prefix_len, n_heads, head_dim, dtype_bytes);
}

double llmk_speculative_branch_memory(double n_branches, double speculation_depth,
                                      double n_layers, double n_heads, double head_dim,
                                      double dtype_bytes) {
    return n_layers *
           llmk_kv_bytes(1.0, n_branches * speculation_depth, n_heads, head_dim, dtype_bytes);
}

double llmk_block_copy_cost(double block_size_tokens, double n_heads, double head_dim,
                            double dtype_bytes, double bandwidth_gbs) {
    if (bandwidth_gbs <= 0.0) return 0.0;
    return llmk_kv_bytes(1.0, block_size_tokens, n_heads, head_dim, dtype_bytes) /
           (bandwidth_gbs * 1e9);
}

double llmk_cache_eviction_lru_score(double current_step, double last_access_step) {
    return current_step - last_access_step;
}

double llmk_cache_eviction_beladys_score(double current_step, double next_use_step) {
    if (next_use_step < 0.0) return 1e9; /* never used again: the ideal victim */
    return next_use_step - current_step;
}

double llmk_dynamic_ntk_rope_scale(double seq_len, double base_context, double alpha) {
    if (base_context <= 0.0 || seq_len <= 0.0) return 1.0;
    return pow(seq_len / base_context, alpha);
}

double llmk_context_extension_factor(double original_max_len, double target_max_len) {
    if (original_max_len <= 0.0) return 1.0;
    return target_max_len / original_max_len;
}
