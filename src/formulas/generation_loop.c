/* generation_loop: the sampling decisions restated as accept (1.0) / reject
 * (0.0) and stop signals, plus eta sampling's entropy-adaptive gate. */
#include "formulas.h"

double llmk_temperature_logit_scale(double logit, double temperature) {
    if (temperature <= 0.0) return logit * 1e9;
    return logit / temperature;
}

double llmk_top_k_accept(double token_rank, double k) {
    if (k <= 0.0) return 1.0; /* top-k disabled */
    return token_rank < k ? 1.0 : 0.0;
}

double llmk_top_p_cumulative_accept(double cumulative_prob, double token_prob, double p) {
    /* The seed compares its second argument and ignores the first; kept. */
    (void)cumulative_prob;
    return token_prob < p ? 1.0 : 0.0;
}

double llmk_min_p_accept(double token_prob, double max_prob, double min_p) {
    return token_prob >= max_prob * min_p ? 1.0 : 0.0;
}

double llmk_typical_sampling_accept(double token_log_prob, double entropy, double tau) {
    double surprise = -token_log_prob;
    return fabs(surprise - entropy) < tau ? 1.0 : 0.0;
}

double llmk_frequency_penalty_logit(double logit, double count, double penalty) {
    return logit - count * penalty;
}

double llmk_presence_penalty_logit(double logit, double count, double penalty) {
    return count > 0.0 ? logit - penalty : logit;
}

double llmk_eos_stop_score(double token_id, double eos_id) {
    return token_id == eos_id ? 1.0 : 0.0;
}

double llmk_eta_sampling_accept(double token_prob, double entropy, double epsilon) {
    double eta = sqrt(epsilon) * exp(-entropy);
    if (epsilon < eta) eta = epsilon;
    return token_prob > eta ? 1.0 : 0.0;
}

double llmk_max_tokens_stop(double n_generated, double max_new_tokens) {
    return max_new_tokens > 0.0 && n_generated >= max_new_tokens ? 1.0 : 0.0;
}
