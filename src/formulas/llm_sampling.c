/* llm_sampling: token-selection values -- scaled logits, thresholds and
 * scores that a sampler chain applies to each candidate. */
#include "formulas.h"

double llmk_temperature_scale(double logit, double temperature) {
    /* temperature <= 0 means greedy: stretch the logits so the maximum dominates. */
    if (temperature <= 0.0) return logit * 1e9;
    return logit / temperature;
}

double llmk_top_k_threshold(double k, double k_th_logit) {
    (void)k; /* the caller's sort found the k-th logit */
    return k_th_logit;
}

double llmk_top_p_cumulative(double sorted_prob, double cumulative_so_far, double p) {
    (void)sorted_prob;
    return cumulative_so_far < p ? 1.0 : 0.0;
}

double llmk_min_p_threshold(double max_prob, double min_p) { return max_prob * min_p; }

double llmk_repetition_penalty_scale(double logit, double penalty) {
    if (penalty <= 0.0) return logit;
    return logit > 0.0 ? logit / penalty : logit * penalty;
}

double llmk_token_frequency_penalty(double logit, double count, double frequency_penalty,
                                    double presence_penalty) {
    return logit - count * frequency_penalty - (count > 0.0 ? presence_penalty : 0.0);
}

double llmk_typical_p_score(double token_log_prob, double entropy) {
    return fabs(token_log_prob + entropy);
}

double llmk_greedy_token_id(double logit, double max_logit) {
    return logit >= max_logit ? 1.0 : 0.0;
}

double llmk_beam_score_update(double prev_score, double token_log_prob) {
    return prev_score + token_log_prob;
}

double llmk_length_penalty(double length, double alpha) {
    return llmk_pow_approx((5.0 + length) / 6.0, alpha);
}

double llmk_pow_approx(double base, double exponent) {
    if (exponent == 0.0) return 1.0;
    if (base <= 0.0) return 0.0;
    return exp(exponent * log(base));
}
