/* The status vocabulary: code -> name, and the thread-local failure detail. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const struct {
    int code;
    const char *name;
} status_names[] = {
    {LLMK_OK, "llmk_ok"},
    {LLMK_EMPTY_DIMENSION, "llmk_empty_dimension"},
    {LLMK_A_LENGTH_MISMATCH, "llmk_a_length_mismatch"},
    {LLMK_B_LENGTH_MISMATCH, "llmk_b_length_mismatch"},
    {LLMK_DIMENSION_TOO_LARGE, "llmk_dimension_too_large"},
    {LLMK_CODE_OUT_OF_RANGE, "llmk_code_out_of_range"},
    {LLMK_CACHE_LENGTH_MISMATCH, "llmk_cache_length_mismatch"},
    {LLMK_NEW_LENGTH_MISMATCH, "llmk_new_length_mismatch"},
    {LLMK_LOGITS_LENGTH_MISMATCH, "llmk_logits_length_mismatch"},
    {LLMK_GEMV_A_LENGTH_MISMATCH, "llmk_gemv_a_length_mismatch"},
    {LLMK_GEMV_X_LENGTH_MISMATCH, "llmk_gemv_x_length_mismatch"},
    {LLMK_CACHE_CAPACITY_EXCEEDED, "llmk_cache_capacity_exceeded"},
    {LLMK_INVALID_ARGUMENT, "llmk_invalid_argument"},
    {LLMK_OUT_OF_MEMORY, "llmk_out_of_memory"},
    {LLMK_IO_ERROR, "llmk_io_error"},
    {LLMK_UNSUPPORTED, "llmk_unsupported"},
    {LLMK_BUFFER_TOO_SMALL, "llmk_buffer_too_small"},
    {LLMK_NOT_FOUND, "llmk_not_found"},
    {LLMK_INTERRUPTED, "llmk_interrupted"},
    {LLMK_NAN_INPUT, "llmk_nan_input"},
    {LLMK_BAD_MAGIC, "llmk_bad_magic"},
    {LLMK_BAD_VERSION, "llmk_bad_version"},
    {LLMK_TRUNCATED_FILE, "llmk_truncated_file"},
    {LLMK_COUNT_TOO_LARGE, "llmk_count_too_large"},
    {LLMK_DIMENSION_OVERFLOW, "llmk_dimension_overflow"},
    {LLMK_BAD_ALIGNMENT, "llmk_bad_alignment"},
    {LLMK_OFFSET_OUT_OF_FILE, "llmk_offset_out_of_file"},
    {LLMK_UNKNOWN_TYPE, "llmk_unknown_type"},
    {LLMK_BAD_STRING, "llmk_bad_string"},
    {LLMK_DUPLICATE_NAME, "llmk_duplicate_name"},
    {LLMK_TYPE_MISMATCH, "llmk_type_mismatch"},
    {LLMK_BAD_TENSOR_INFO, "llmk_bad_tensor_info"},
    {LLMK_TENSOR_DATA_OVERLAP, "llmk_tensor_data_overlap"},
    {LLMK_UNSUPPORTED_ARCHITECTURE, "llmk_unsupported_architecture"},
    {LLMK_UNSUPPORTED_FEATURE, "llmk_unsupported_feature"},
    {LLMK_MISSING_TENSOR, "llmk_missing_tensor"},
    {LLMK_TENSOR_SHAPE_MISMATCH, "llmk_tensor_shape_mismatch"},
    {LLMK_TENSOR_TYPE_UNSUPPORTED, "llmk_tensor_type_unsupported"},
    {LLMK_BAD_HYPERPARAMETER, "llmk_bad_hyperparameter"},
    {LLMK_TOKENIZER_UNSUPPORTED, "llmk_tokenizer_unsupported"},
    {LLMK_TOKENIZER_BAD_DATA, "llmk_tokenizer_bad_data"},
    {LLMK_INVALID_TOKEN, "llmk_invalid_token"},
    {LLMK_INVALID_UTF8, "llmk_invalid_utf8"},
    {LLMK_CONTEXT_FULL, "llmk_context_full"},
    {LLMK_BAD_SAMPLER_CONFIG, "llmk_bad_sampler_config"},
    {LLMK_TEMPLATE_UNKNOWN, "llmk_template_unknown"},
    {LLMK_BAD_REQUEST, "llmk_bad_request"},
    {LLMK_OUTPUT_IS_INPUT, "llmk_output_is_input"},
    {LLMK_CONTEXT_OVER_TRAIN, "llmk_context_over_train"},
    {LLMK_QUEUE_FULL, "llmk_queue_full"},
    {LLMK_BAD_GRAMMAR, "llmk_bad_grammar"},
};

const char *llmk_status_name(int code) {
    for (size_t i = 0; i < LLMK_ARRAY_LEN(status_names); i++)
        if (status_names[i].code == code) return status_names[i].name;
    return "llmk_code_out_of_range";
}

static _Thread_local char last_error[512];

const char *llmk_last_error(void) { return last_error; }

void llmk_error_clear(void) { last_error[0] = 0; }

/* Formats into a scratch buffer first: callers may pass llmk_last_error()
 * itself as an argument ("%s: %s", key, llmk_last_error()) to prefix the
 * callee's detail, and vsnprintf into its own source is undefined. */
int llmk_fail(int status, const char *fmt, ...) {
    char msg[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(last_error, msg, sizeof msg);
    return status;
}
