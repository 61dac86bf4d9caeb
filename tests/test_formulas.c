/* Seed 001's formula layer: every worked example with its exact value,
 * every division guard's safe default, the INT8 clamp, the truncating
 * ceiling idiom, the identity pass-throughs, and agreement of all six
 * memory formulas with the one KV byte helper. */
#include "check.h"
#include "llmk.h"
#include "llmk_formulas.h"

#include <math.h>

/* Qwen3-0.6B: 28 layers, 8 KV heads, head_dim 128; FP16; 2048 tokens. */
#define QL 28.0
#define QH 8.0
#define QD 128.0
#define F16 2.0
#define PER_LAYER 8388608.0 /* 8 MiB */
#define TOTAL 234881024.0   /* 224 MiB */

static void test_kv_bytes(void) {
    CHECK_EQ_DBL(llmk_kv_bytes(1, 2048, QH, QD, F16), PER_LAYER);
    CHECK_EQ_DBL(llmk_kv_bytes(3, 2048, QH, QD, F16), 3 * PER_LAYER);
    CHECK_EQ_DBL(llmk_kv_bytes(1, 32, 1, 1, 34.0 / 32.0), 68.0); /* q8_0: 34 bytes per 32 */
    CHECK_EQ_DBL(llmk_kv_bytes(1, 0, QH, QD, F16), 0.0);
}

static void test_kv_cache(void) {
    double per_layer = llmk_kv_cache_memory_per_layer(1, 2048, QH, QD, F16);
    CHECK_EQ_DBL(per_layer, PER_LAYER);
    CHECK_EQ_DBL(llmk_kv_cache_total_memory(per_layer, QL), TOTAL);
    CHECK_EQ_DBL(llmk_kv_cache_memory_per_layer(2, 1024, QH, QD, 4), 2 * PER_LAYER);

    CHECK_EQ_DBL(llmk_kv_cache_utilization(512, 2048), 0.25);
    CHECK_EQ_DBL(llmk_kv_cache_utilization(512, 0), 0.0);  /* guard */
    CHECK_EQ_DBL(llmk_kv_cache_utilization(512, -4), 0.0); /* guard */

    CHECK_EQ_DBL(llmk_kv_eviction_score_lru(100, 60), 40.0);
    CHECK_EQ_DBL(llmk_kv_eviction_score_h2o(0.5, 0.25), 0.125);

    CHECK_EQ_DBL(llmk_radix_cache_shared_prefix_len(10, 15, 12), 10.0);
    CHECK_EQ_DBL(llmk_radix_cache_shared_prefix_len(15, 10, 12), 10.0);
    CHECK_EQ_DBL(llmk_radix_cache_shared_prefix_len(10, 15, 7), 7.0);

    /* Exact round trip, a zero point, and the clamp at both ends. */
    CHECK_EQ_DBL(llmk_kv_quantization_error(1.0, 0.125, 0), 0.0);
    CHECK_EQ_DBL(llmk_kv_quantization_error(0.5, 0.25, 10), 0.0);
    CHECK_EQ_DBL(llmk_kv_quantization_error(0.3, 0.25, 0), 0.3 - 0.25);
    /* 100 / 0.5 = 200 -> clamped to 127 -> 63.5: error 36.5 (a wrap to -56
     * would give 128). */
    CHECK_EQ_DBL(llmk_kv_quantization_error(100.0, 0.5, 0), 36.5);
    CHECK_EQ_DBL(llmk_kv_quantization_error(-100.0, 0.5, 0), 36.0); /* -128 -> -64 */
    /* The clamp applies to the code including the zero point: 60 + 100 > 127. */
    CHECK_EQ_DBL(llmk_kv_quantization_error(30.0, 0.5, 100), 30.0 - 13.5);
    /* Round half to even: 0.375 / 0.25 = 1.5 -> 2 -> 0.5. */
    CHECK_EQ_DBL(llmk_kv_quantization_error(0.375, 0.25, 0), 0.125);
    CHECK_EQ_DBL(llmk_kv_quantization_error(-3.0, 0.0, 0), 3.0); /* guard */
    CHECK_EQ_DBL(llmk_kv_quantization_error(-3.0, -1.0, 0), 3.0);

    CHECK_EQ_DBL(llmk_incremental_decode_kv_append(41), 42.0);
    CHECK_EQ_DBL(llmk_incremental_decode_kv_append(0), 1.0);

    CHECK_EQ_DBL(llmk_prefix_cache_hit_bytes(2048, QL, QH, QD, F16), TOTAL);
    CHECK_EQ_DBL(llmk_prefix_cache_hit_bytes(0, QL, QH, QD, F16), 0.0);

    CHECK_EQ_DBL(llmk_kv_cache_tokens_for_budget(TOTAL, QL, QH, QD, F16), 2048.0);
    CHECK_EQ_DBL(llmk_kv_cache_tokens_for_budget(TOTAL - 1, QL, QH, QD, F16), 2047.0);
    CHECK_EQ_DBL(llmk_kv_cache_tokens_for_budget(TOTAL, 0, QH, QD, F16), 0.0); /* guard */
}

static void test_paged(void) {
    CHECK_EQ_DBL(llmk_page_table_lookup(5, 17), 17.0);
    CHECK_EQ_DBL(llmk_page_table_lookup(999, 17), 17.0);

    /* vLLM's 16-token blocks. */
    CHECK_EQ_DBL(llmk_paged_attention_block_count(2048, 16), 128.0);
    CHECK_EQ_DBL(llmk_paged_attention_block_count(2049, 16), 129.0);
    CHECK_EQ_DBL(llmk_paged_attention_block_count(2063, 16), 129.0);
    CHECK_EQ_DBL(llmk_paged_attention_block_count(1, 16), 1.0);
    CHECK_EQ_DBL(llmk_paged_attention_block_count(0, 16), 0.0);
    /* Truncation toward zero, not floor: (-20 + 15) / 16 = -0.3125 -> 0. */
    CHECK_EQ_DBL(llmk_paged_attention_block_count(-20, 16), 0.0);
    CHECK_EQ_DBL(llmk_paged_attention_block_count(2048, 0), 0.0);   /* guard */
    CHECK_EQ_DBL(llmk_paged_attention_block_count(2048, -16), 0.0); /* guard */

    /* 128 blocks of 16 tokens are one 2048-token layer. */
    CHECK_EQ_DBL(llmk_cache_compaction_gain(128, 16, QH, QD, F16), PER_LAYER);
    CHECK_EQ_DBL(llmk_cache_compaction_gain(0, 16, QH, QD, F16), 0.0);

    /* Two sequences sharing a 2048-token prefix save one whole copy. */
    CHECK_EQ_DBL(llmk_prefix_sharing_savings(2048, 2, QL, QH, QD, F16), TOTAL);
    CHECK_EQ_DBL(llmk_prefix_sharing_savings(2048, 5, QL, QH, QD, F16), 4 * TOTAL);
    CHECK_EQ_DBL(llmk_prefix_sharing_savings(2048, 1, QL, QH, QD, F16), 0.0);
    CHECK_EQ_DBL(llmk_prefix_sharing_savings(2048, 0, QL, QH, QD, F16), 0.0);

    /* n_branches x depth stands in for the token count. */
    CHECK_EQ_DBL(llmk_speculative_branch_memory(2, 1024, QL, QH, QD, F16), TOTAL);
    CHECK_EQ_DBL(llmk_speculative_branch_memory(4, 5, QL, QH, QD, F16),
                 QL * llmk_kv_bytes(1, 20, QH, QD, F16));

    /* One 16-token block is 65536 bytes; at 1 GB/s that is 65.536 us. */
    CHECK_EQ_DBL(llmk_block_copy_cost(16, QH, QD, F16, 1), 65536.0 / 1e9);
    CHECK_EQ_DBL(llmk_block_copy_cost(16, QH, QD, F16, 0), 0.0);  /* guard */
    CHECK_EQ_DBL(llmk_block_copy_cost(16, QH, QD, F16, -5), 0.0); /* guard */

    CHECK_EQ_DBL(llmk_cache_eviction_lru_score(10, 3), 7.0);
    CHECK_EQ_DBL(llmk_cache_eviction_beladys_score(10, 25), 15.0);
    CHECK_EQ_DBL(llmk_cache_eviction_beladys_score(10, -1), 1e9); /* never used again */

    CHECK_EQ_DBL(llmk_dynamic_ntk_rope_scale(8192, 4096, 1.0), 2.0);
    CHECK_EQ_DBL(llmk_dynamic_ntk_rope_scale(16384, 4096, 0.5), 2.0);
    CHECK_EQ_DBL(llmk_dynamic_ntk_rope_scale(8192, 0, 0.5), 1.0);  /* guard */
    CHECK_EQ_DBL(llmk_dynamic_ntk_rope_scale(0, 4096, 0.5), 1.0);  /* guard */
    CHECK_EQ_DBL(llmk_context_extension_factor(4096, 32768), 8.0);
    CHECK_EQ_DBL(llmk_context_extension_factor(0, 32768), 1.0);    /* guard */
}

static void test_sampling(void) {
    CHECK_EQ_DBL(llmk_temperature_scale(2.0, 0.5), 4.0);
    CHECK_EQ_DBL(llmk_temperature_scale(-3.0, 2.0), -1.5);
    CHECK_EQ_DBL(llmk_temperature_scale(2.0, 0.0), 2e9);  /* greedy */
    CHECK_EQ_DBL(llmk_temperature_scale(2.0, -1.0), 2e9);
    /* The generation_loop twin has the identical body. */
    const double logits[] = {2.0, -3.0, 0.0, 1e-7}, temps[] = {0.5, 2.0, 0.0, -1.0, 0.7};
    for (int i = 0; i < 4; i++)
        for (int t = 0; t < 5; t++)
            CHECK_EQ_DBL(llmk_temperature_logit_scale(logits[i], temps[t]),
                         llmk_temperature_scale(logits[i], temps[t]));

    CHECK_EQ_DBL(llmk_top_k_threshold(40, 3.5), 3.5);
    CHECK_EQ_DBL(llmk_top_k_threshold(1, -2.25), -2.25);

    CHECK_EQ_DBL(llmk_top_p_cumulative(0.3, 0.85, 0.9), 1.0);
    CHECK_EQ_DBL(llmk_top_p_cumulative(0.3, 0.9, 0.9), 0.0); /* strict < */
    CHECK_EQ_DBL(llmk_top_p_cumulative(999, 0.85, 0.9), 1.0); /* first argument unused */

    CHECK_EQ_DBL(llmk_min_p_threshold(0.5, 0.25), 0.125);
    CHECK_EQ_DBL(llmk_repetition_penalty_scale(2.0, 1.25), 1.6);
    CHECK_EQ_DBL(llmk_repetition_penalty_scale(-2.0, 1.25), -2.5);
    CHECK_EQ_DBL(llmk_repetition_penalty_scale(-2.0, 0.0), -2.0); /* guard */
    CHECK_EQ_DBL(llmk_token_frequency_penalty(5.0, 3, 0.5, 1.0), 2.5);
    CHECK_EQ_DBL(llmk_token_frequency_penalty(5.0, 0, 0.5, 1.0), 5.0);
    CHECK_EQ_DBL(llmk_typical_p_score(-2.0, 1.5), 0.5);
    CHECK_EQ_DBL(llmk_typical_p_score(-1.0, 1.5), 0.5);
    CHECK_EQ_DBL(llmk_greedy_token_id(3.0, 3.0), 1.0);
    CHECK_EQ_DBL(llmk_greedy_token_id(2.0, 3.0), 0.0);
    CHECK_EQ_DBL(llmk_greedy_token_id(NAN, 3.0), 0.0);
    CHECK_EQ_DBL(llmk_beam_score_update(-1.5, -0.25), -1.75);

    CHECK_NEAR(llmk_pow_approx(2.0, 10.0), 1024.0, 1e-9);
    CHECK_NEAR(llmk_pow_approx(9.0, 0.5), 3.0, 1e-12);
    CHECK_EQ_DBL(llmk_pow_approx(5.0, 0.0), 1.0);
    CHECK_EQ_DBL(llmk_pow_approx(0.0, 2.0), 0.0);
    CHECK_EQ_DBL(llmk_pow_approx(-2.0, 2.0), 0.0);
    CHECK_EQ_DBL(llmk_length_penalty(1.0, 1.0), 1.0);
    CHECK_NEAR(llmk_length_penalty(7.0, 1.0), 2.0, 1e-12);
    CHECK_NEAR(llmk_length_penalty(7.0, 0.6), pow(2.0, 0.6), 1e-12);
}

static void test_generation_loop(void) {
    CHECK_EQ_DBL(llmk_top_k_accept(0, 40), 1.0);
    CHECK_EQ_DBL(llmk_top_k_accept(39, 40), 1.0);
    CHECK_EQ_DBL(llmk_top_k_accept(40, 40), 0.0);
    CHECK_EQ_DBL(llmk_top_k_accept(1000, 0), 1.0); /* disabled */

    /* The second argument is compared, the first ignored (as the seed). */
    CHECK_EQ_DBL(llmk_top_p_cumulative_accept(999, 0.85, 0.9), 1.0);
    CHECK_EQ_DBL(llmk_top_p_cumulative_accept(0.1, 0.95, 0.9), 0.0);
    for (double c = 0.0; c <= 1.0; c += 0.125)
        CHECK_EQ_DBL(llmk_top_p_cumulative_accept(0.5, c, 0.6), llmk_top_p_cumulative(0.5, c, 0.6));

    CHECK_EQ_DBL(llmk_min_p_accept(0.125, 0.5, 0.25), 1.0);
    CHECK_EQ_DBL(llmk_min_p_accept(0.124, 0.5, 0.25), 0.0);

    /* surprise 2.0, entropy 1.5: deviation 0.5, the magnitude typical_p_score gives. */
    CHECK_EQ_DBL(llmk_typical_sampling_accept(-2.0, 1.5, 0.6), 1.0);
    CHECK_EQ_DBL(llmk_typical_sampling_accept(-2.0, 1.5, 0.5), 0.0);
    CHECK_EQ_DBL(llmk_typical_sampling_accept(-1.0, 1.5, 0.6), 1.0);

    CHECK_EQ_DBL(llmk_frequency_penalty_logit(5.0, 3, 0.5), 3.5);
    CHECK_EQ_DBL(llmk_presence_penalty_logit(5.0, 3, 1.0), 4.0);
    CHECK_EQ_DBL(llmk_presence_penalty_logit(5.0, 0, 1.0), 5.0);
    /* The two halves add up to llm_sampling's combined penalty. */
    CHECK_EQ_DBL(llmk_presence_penalty_logit(llmk_frequency_penalty_logit(5.0, 3, 0.5), 3, 1.0),
                 llmk_token_frequency_penalty(5.0, 3, 0.5, 1.0));

    CHECK_EQ_DBL(llmk_eos_stop_score(2, 2), 1.0);
    CHECK_EQ_DBL(llmk_eos_stop_score(3, 2), 0.0);
    CHECK_EQ_DBL(llmk_max_tokens_stop(10, 10), 1.0);
    CHECK_EQ_DBL(llmk_max_tokens_stop(9, 10), 0.0);
    CHECK_EQ_DBL(llmk_max_tokens_stop(1000, 0), 0.0); /* no limit */

    /* eta = min(eps, sqrt(eps) e^-H): at H = 0 it is eps = 0.0009; at
     * H = 5 it is 0.03 e^-5 = 0.000202, so a 0.0005 token passes. */
    CHECK_EQ_DBL(llmk_eta_sampling_accept(0.001, 0.0, 0.0009), 1.0);
    CHECK_EQ_DBL(llmk_eta_sampling_accept(0.0005, 0.0, 0.0009), 0.0);
    CHECK_EQ_DBL(llmk_eta_sampling_accept(0.0005, 5.0, 0.0009), 1.0);
    CHECK_EQ_DBL(llmk_eta_sampling_accept(0.0002, 5.0, 0.0009), 0.0);
}

static void test_speculative(void) {
    CHECK_EQ_DBL(llmk_speculative_accept_prob(0.3, 0.6), 0.5);
    CHECK_EQ_DBL(llmk_speculative_accept_prob(0.9, 0.6), 1.0);
    CHECK_EQ_DBL(llmk_speculative_accept_prob(0.3, 0.0), 1.0);  /* guard */
    CHECK_EQ_DBL(llmk_speculative_accept_prob(0.3, -1.0), 1.0); /* guard */

    /* 80% acceptance, four drafts: (1 - 0.8^5) / (1 - 0.8) = 3.3616. */
    double e = llmk_speculative_expected_tokens(0.8, 4);
    CHECK_NEAR(e, 3.3616, 1e-12);
    CHECK_EQ_DBL(e, (1.0 - pow(0.8, 5.0)) / (1.0 - 0.8));
    CHECK_EQ_DBL(llmk_speculative_expected_tokens(1.0, 4), 5.0); /* the limit */
    CHECK_EQ_DBL(llmk_speculative_expected_tokens(0.0, 4), 1.0);

    /* Chained: a 50 ms target step, a draft a sixth as costly: about 2x. */
    double s = llmk_draft_model_speedup(e, 50.0, 50.0 / 6.0, 4);
    CHECK_NEAR(s, 3.3616 * 0.6, 1e-12);
    CHECK(s > 1.9 && s < 2.1);
    CHECK_NEAR(llmk_draft_model_speedup(e, 50.0, 8.0, 4), 3.3616 * 50.0 / 82.0, 1e-12);
    CHECK_EQ_DBL(llmk_draft_model_speedup(e, 0.0, 0.0, 4), 1.0); /* guard */
    CHECK_EQ_DBL(llmk_draft_model_speedup(e, -50.0, 0.0, 4), 1.0);

    CHECK_EQ_DBL(llmk_medusa_head_acceptance(0.2, 0.4), 0.5);
    CHECK_EQ_DBL(llmk_medusa_head_acceptance(0.5, 0.4), 1.0);
    CHECK_EQ_DBL(llmk_medusa_head_acceptance(0.2, 0.0), 1.0); /* guard */

    CHECK_EQ_DBL(llmk_json_grammar_logit_mask(3.5, 1.0), 3.5);
    CHECK_EQ_DBL(llmk_json_grammar_logit_mask(3.5, 0.0), -1e9);
    CHECK_EQ_DBL(llmk_constrained_beam_score(-2.0, 1, 4, 2.0), -1.5);
    CHECK_EQ_DBL(llmk_constrained_beam_score(-2.0, 1, 0, 2.0), -2.0); /* guard */
    CHECK_EQ_DBL(llmk_structured_repair_score(1, 4, 0), 0.75);
    CHECK_EQ_DBL(llmk_structured_repair_score(1, 4, 2), 0.25);
    CHECK_EQ_DBL(llmk_structured_repair_score(10, 4, 0), 0.0);
    CHECK_EQ_DBL(llmk_structured_repair_score(1, 0, 0), 0.0); /* guard */
    CHECK_EQ_DBL(llmk_contrastive_decode_score(-1.0, -3.0, 0.5), 0.5);
    CHECK_EQ_DBL(llmk_token_healing_overlap(123, 3), 3.0);
    CHECK_EQ_DBL(llmk_watermark_green_list_bias(1.0, 4, 2, 2.0), 3.0);
    CHECK_EQ_DBL(llmk_watermark_green_list_bias(1.0, 5, 2, 2.0), 1.0);
    CHECK_EQ_DBL(llmk_watermark_green_list_bias(1.0, 151935, 1, 2.0), 3.0);
}

static void test_batching(void) {
    CHECK_EQ_DBL(llmk_admission_control_accept(800, 1000, 0.1), 1.0);
    CHECK_EQ_DBL(llmk_admission_control_accept(950, 1000, 0.1), 0.0); /* the margin matters */
    CHECK_EQ_DBL(llmk_admission_control_accept(950, 1000, 0.0), 1.0);

    CHECK_EQ_DBL(llmk_iteration_level_batch_size(1000, 300), 3.0);
    CHECK_EQ_DBL(llmk_iteration_level_batch_size(1000, 0), 0.0); /* guard */

    /* Same size and priority: 2 tokens in vs 200 in -> 201 / 3 = 67x. */
    double fresh = llmk_preemption_score(1, 2, 512), old = llmk_preemption_score(1, 200, 512);
    CHECK_EQ_DBL(fresh, 512.0 / 3.0);
    CHECK_EQ_DBL(old, 512.0 / 201.0);
    CHECK_NEAR(fresh / old, 67.0, 1e-12);
    CHECK_EQ_DBL(llmk_preemption_score(2, 2, 512), 512.0 / 6.0);
    CHECK_EQ_DBL(llmk_preemption_score(0, 2, 512), 1e9); /* guard */

    CHECK_EQ_DBL(llmk_chunked_prefill_chunks(5000, 2048), 3.0);
    CHECK_EQ_DBL(llmk_chunked_prefill_chunks(4096, 2048), 2.0);
    CHECK_EQ_DBL(llmk_chunked_prefill_chunks(4097, 2048), 3.0);
    CHECK_EQ_DBL(llmk_chunked_prefill_chunks(5000, 0), 0.0); /* guard */

    CHECK_EQ_DBL(llmk_decode_throughput(8, 40), 200.0);
    CHECK_EQ_DBL(llmk_decode_throughput(8, 0), 0.0); /* guard */
    CHECK_EQ_DBL(llmk_time_to_first_token(10, 3, 25), 85.0);
    CHECK_EQ_DBL(llmk_head_of_line_blocking_score(300, 100), 3.0);
    CHECK_EQ_DBL(llmk_head_of_line_blocking_score(300, 0), 1.0); /* guard */
    CHECK_EQ_DBL(llmk_batching_efficiency(30, 40), 0.75);
    CHECK_EQ_DBL(llmk_batching_efficiency(30, 0), 0.0); /* guard */
    CHECK_EQ_DBL(llmk_beam_memory_per_request(4, 2048, QL, QH, QD, F16), 4 * TOTAL);
    CHECK_EQ_DBL(llmk_request_latency(85, 101, 20), 2085.0);
    CHECK_EQ_DBL(llmk_request_latency(85, 1, 20), 85.0);
    CHECK_EQ_DBL(llmk_request_latency(85, 0, 20), 85.0);
}

/* No guarded function returns NaN or inf for its degenerate input. */
static void test_guards_finite(void) {
    const double z[] = {0.0, -1.0};
    for (int i = 0; i < 2; i++) {
        double v = z[i];
        CHECK(isfinite(llmk_kv_cache_utilization(5, v)));
        CHECK(isfinite(llmk_block_copy_cost(16, 8, 128, 2, v)));
        CHECK(isfinite(llmk_iteration_level_batch_size(5, v)));
        CHECK(isfinite(llmk_batching_efficiency(5, v)));
        CHECK(isfinite(llmk_head_of_line_blocking_score(5, v)));
        CHECK(isfinite(llmk_speculative_accept_prob(0.5, v)));
        CHECK(isfinite(llmk_medusa_head_acceptance(0.5, v)));
        CHECK(isfinite(llmk_paged_attention_block_count(5, v)));
        CHECK(isfinite(llmk_chunked_prefill_chunks(5, v)));
        CHECK(isfinite(llmk_decode_throughput(5, v)));
        CHECK(isfinite(llmk_context_extension_factor(v, 5)));
        CHECK(isfinite(llmk_dynamic_ntk_rope_scale(5, v, 0.5)));
        CHECK(isfinite(llmk_kv_quantization_error(5, v, 0)));
        CHECK(isfinite(llmk_preemption_score(v, 0, 5)));
        CHECK(isfinite(llmk_structured_repair_score(1, v, 0)));
        CHECK(isfinite(llmk_constrained_beam_score(1, 1, v, 1)));
        CHECK(isfinite(llmk_kv_cache_tokens_for_budget(5, v, 8, 128, 2)));
    }
    /* The integer idiom on values past int64's range stays defined. */
    CHECK_EQ_DBL(llmk_paged_attention_block_count(1e30, 1), 1e30);
    CHECK(isinf(llmk_chunked_prefill_chunks(INFINITY, 16)));
}

int main(void) {
    test_kv_bytes();
    test_kv_cache();
    test_paged();
    test_sampling();
    test_generation_loop();
    test_speculative();
    test_batching();
    test_guards_finite();
    return check_summary("test_formulas");
}
