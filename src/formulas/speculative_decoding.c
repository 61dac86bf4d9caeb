/* speculative_decoding: draft-then-verify math (acceptance, expected tokens,
 * speedup, Medusa heads), plus constrained decoding, structured-output repair,
 * contrastive decoding, token healing and a simplified watermark. */
#include "formulas.h"

double llmk_speculative_accept_prob(double target_prob, double draft_prob) {
    if (draft_prob <= 0.0) return 1.0;
    double r = target_prob / draft_prob;
    return r < 1.0 ? r : 1.0;
}

double llmk_speculative_expected_tokens(double acceptance_rate, double speculation_depth) {
    /* At a == 1 the geometric sum is g + 1 (every draft accepted plus the bonus token). */
    if (acceptance_rate == 1.0) return speculation_depth + 1.0;
    return (1.0 - pow(acceptance_rate, speculation_depth + 1.0)) / (1.0 - acceptance_rate);
}

double llmk_draft_model_speedup(double expected_tokens, double target_time, double draft_time,
                                double speculation_depth) {
    double total_time = speculation_depth * draft_time + target_time;
    if (total_time <= 0.0) return 1.0;
    return expected_tokens * target_time / total_time;
}

double llmk_medusa_head_acceptance(double target_prob, double medusa_prob) {
    if (medusa_prob <= 0.0) return 1.0;
    double r = target_prob / medusa_prob;
    return r < 1.0 ? r : 1.0;
}

double llmk_json_grammar_logit_mask(double logit, double allowed) {
    return allowed > 0.0 ? logit : -1e9;
}

double llmk_constrained_beam_score(double beam_score, double constraints_met,
                                   double total_constraints, double bonus) {
    if (total_constraints <= 0.0) return beam_score;
    return beam_score + bonus * constraints_met / total_constraints;
}

double llmk_structured_repair_score(double n_errors, double n_fields, double retry_count) {
    if (n_fields <= 0.0) return 0.0;
    double valid = 1.0 - n_errors / n_fields;
    if (valid < 0.0) valid = 0.0;
    if (valid > 1.0) valid = 1.0;
    double attempts = 1.0 + retry_count;
    return attempts > 0.0 ? valid / attempts : 0.0;
}

double llmk_contrastive_decode_score(double expert_log_prob, double amateur_log_prob,
                                     double amateur_weight) {
    return expert_log_prob - amateur_weight * amateur_log_prob;
}

double llmk_token_healing_overlap(double token_id, double overlap_chars) {
    (void)token_id; /* the caller's tokenizer measured the overlap */
    return overlap_chars;
}

double llmk_watermark_green_list_bias(double logit, double token_id, double green_list_hash,
                                      double delta) {
    /* Parity of (token_id + hash) via fmod, so large ids cannot overflow. */
    return fmod(token_id + green_list_hash, 2.0) == 0.0 ? logit + delta : logit;
}
