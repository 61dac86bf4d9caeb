/* Seed 000's status vocabulary and its four shape checks: every code, every
 * boundary, and the order in which the rules apply. */
#include "check.h"
#include "internal.h"
#include "llmk.h"
#include "llmk_primitives.h"

#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

static void test_status_names(void) {
    /* Numbers and names exactly as seed 000 lists them. */
    static const struct {
        int code;
        const char *name;
    } seed[] = {
        {560, "llmk_ok"},
        {561, "llmk_empty_dimension"},
        {562, "llmk_a_length_mismatch"},
        {563, "llmk_b_length_mismatch"},
        {564, "llmk_dimension_too_large"},
        {565, "llmk_code_out_of_range"},
        {566, "llmk_cache_length_mismatch"},
        {567, "llmk_new_length_mismatch"},
        {568, "llmk_logits_length_mismatch"},
        {569, "llmk_gemv_a_length_mismatch"},
        {570, "llmk_gemv_x_length_mismatch"},
        {571, "llmk_cache_capacity_exceeded"},
    };
    for (size_t i = 0; i < sizeof seed / sizeof seed[0]; i++)
        CHECK(strcmp(llmk_status_name(seed[i].code), seed[i].name) == 0);
    CHECK_EQ_INT(LLMK_OK, 560);
    CHECK_EQ_INT(LLMK_CACHE_CAPACITY_EXCEEDED, 571);
    CHECK_EQ_INT(LLMK_MAX_DIM, 1 << 24);
    /* Not a code: the vocabulary's own fallback. */
    CHECK(strcmp(llmk_status_name(0), "llmk_code_out_of_range") == 0);
    CHECK(strcmp(llmk_status_name(559), "llmk_code_out_of_range") == 0);
    CHECK(strcmp(llmk_status_name(580), "llmk_code_out_of_range") == 0);
    CHECK(strcmp(llmk_status_name(-562), "llmk_code_out_of_range") == 0);
    CHECK(strcmp(llmk_status_name(LLMK_NAN_INPUT), "llmk_nan_input") == 0);
}

static void test_residual_check(void) {
    /* The seed's two worked calls. */
    CHECK_STATUS(llmk_residual_dims_check(6, 6, 6), 560);
    CHECK_STATUS(llmk_residual_dims_check(6, 2, 6), 562);
    CHECK(strstr(llmk_last_error(), "2") && strstr(llmk_last_error(), "6"));
    CHECK_STATUS(llmk_residual_dims_check(6, 6, 2), 563);
    CHECK_STATUS(llmk_residual_dims_check(6, 7, 6), 562);
    CHECK_STATUS(llmk_residual_dims_check(0, 0, 0), 561);
    CHECK_STATUS(llmk_residual_dims_check(-1, -1, -1), 561);
    CHECK_STATUS(llmk_residual_dims_check(1, 1, 1), 560);
    CHECK_STATUS(llmk_residual_dims_check(LLMK_MAX_DIM, LLMK_MAX_DIM, LLMK_MAX_DIM), 560);
    CHECK_STATUS(llmk_residual_dims_check(LLMK_MAX_DIM + 1LL, LLMK_MAX_DIM + 1LL, LLMK_MAX_DIM + 1LL), 564);
    CHECK_STATUS(llmk_residual_dims_check(INT64_MAX, 6, 6), 564);
    /* a is checked before b. */
    CHECK_STATUS(llmk_residual_dims_check(6, 1, 1), 562);
}

static void test_kv_check(void) {
    CHECK_STATUS(llmk_kv_append_dims_check(6, 3, 6, 3), 560);
    CHECK_STATUS(llmk_kv_append_dims_check(0, 3, 0, 3), 560); /* prefill: empty cache */
    CHECK_STATUS(llmk_kv_append_dims_check(6, 0, 6, 0), 561); /* an empty append */
    CHECK_STATUS(llmk_kv_append_dims_check(-1, 3, -1, 3), 561);
    CHECK_STATUS(llmk_kv_append_dims_check(6, -2, 6, -2), 561);
    CHECK_STATUS(llmk_kv_append_dims_check(6, 3, 5, 3), 566);
    CHECK_STATUS(llmk_kv_append_dims_check(6, 3, 6, 4), 567);
    CHECK_STATUS(llmk_kv_append_dims_check(6, 3, 5, 4), 566); /* cache first */
    CHECK_STATUS(llmk_kv_append_dims_check(LLMK_MAX_DIM + 1LL, 1, 0, 1), 564);
    CHECK_STATUS(llmk_kv_append_dims_check(0, LLMK_MAX_DIM + 1LL, 0, 0), 564);
    /* Each part fits, the grown cache does not. */
    CHECK_STATUS(llmk_kv_append_dims_check(LLMK_MAX_DIM, 1, LLMK_MAX_DIM, 1), 564);
    CHECK_STATUS(llmk_kv_append_dims_check(LLMK_MAX_DIM - 1, 1, LLMK_MAX_DIM - 1, 1), 560);
}

static void test_argmax_check(void) {
    CHECK_STATUS(llmk_argmax_dims_check(3, 3), 560);
    CHECK_STATUS(llmk_argmax_dims_check(0, 0), 561);
    CHECK_STATUS(llmk_argmax_dims_check(-5, 3), 561);
    CHECK_STATUS(llmk_argmax_dims_check(3, 2), 568);
    CHECK_STATUS(llmk_argmax_dims_check(3, 4), 568);
    CHECK_STATUS(llmk_argmax_dims_check(LLMK_MAX_DIM + 1LL, LLMK_MAX_DIM + 1LL), 564);
    CHECK_STATUS(llmk_argmax_dims_check(151936, 151936), 560);
}

static void test_gemv_check(void) {
    CHECK_STATUS(llmk_gemv_dims_check(2, 3, 6, 2), 560);
    CHECK_STATUS(llmk_gemv_dims_check(0, 3, 0, 0), 561);
    CHECK_STATUS(llmk_gemv_dims_check(2, 0, 0, 2), 561);
    CHECK_STATUS(llmk_gemv_dims_check(2, 3, 5, 2), 569);
    CHECK_STATUS(llmk_gemv_dims_check(2, 3, 7, 2), 569);
    CHECK_STATUS(llmk_gemv_dims_check(2, 3, 6, 3), 570);
    CHECK_STATUS(llmk_gemv_dims_check(2, 3, 6, 1), 570);
    CHECK_STATUS(llmk_gemv_dims_check(2, 3, 5, 1), 569); /* a before x */
    CHECK_STATUS(llmk_gemv_dims_check(LLMK_MAX_DIM + 1LL, 1, LLMK_MAX_DIM + 1LL, LLMK_MAX_DIM + 1LL), 564);
    CHECK_STATUS(llmk_gemv_dims_check(1, LLMK_MAX_DIM + 1LL, LLMK_MAX_DIM + 1LL, 1), 564);
    /* The largest shape: m*n = 2^48 is computed without overflow. */
    int64_t big = LLMK_MAX_DIM;
    CHECK_STATUS(llmk_gemv_dims_check(big, big, big * big, big), 560);
    CHECK_STATUS(llmk_gemv_dims_check(big, big, big * big - 1, big), 569);
}

/* The failure detail: a caller that prefixes the callee's message with its
 * own ("key: <detail>") gets both intact, and a call that succeeds leaves
 * no stale detail behind. */
static void test_error_detail(void) {
    llmk_fail(LLMK_TRUNCATED_FILE, "header: file has %d bytes, too short for the magic", 3);
    llmk_fail(LLMK_BAD_HYPERPARAMETER, "%s: %s", "model.gguf", llmk_last_error());
    CHECK(strcmp(llmk_last_error(), "model.gguf: header: file has 3 bytes, too short for the magic") == 0);
    /* a message longer than the buffer is cut, never overrun */
    char big[2000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    llmk_fail(LLMK_IO_ERROR, "%s", big);
    llmk_fail(LLMK_IO_ERROR, "k: %s", llmk_last_error());
    CHECK(strncmp(llmk_last_error(), "k: xxx", 6) == 0 && strlen(llmk_last_error()) < sizeof big);

    /* through the public API: a short file, prefixed by its path */
    char path[] = "/tmp/llmk_test_contract_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, "GGU", 3) == 3);
    close(fd);
    llmk_gguf *g = NULL;
    CHECK_STATUS(llmk_gguf_open(path, &g), LLMK_TRUNCATED_FILE);
    char want[256];
    snprintf(want, sizeof want, "%s: header: file has 3 bytes, too short for the magic", path);
    CHECK(strcmp(llmk_last_error(), want) == 0);
    if (strcmp(llmk_last_error(), want) != 0) fprintf(stderr, "got '%s'\n", llmk_last_error());
    unlink(path);

    /* success clears it */
    uint32_t type;
    CHECK_STATUS(llmk_type_from_name("q4_0", &type), LLMK_OK);
    CHECK(*llmk_last_error() == 0);
    CHECK(llmk_type_from_name("no_such_codec", &type) != LLMK_OK && *llmk_last_error());
    CHECK_STATUS(llmk_gemv_dims_check(2, 3, 6, 2), LLMK_OK);
    CHECK(*llmk_last_error() == 0);
}

int main(void) {
    test_error_detail();
    test_status_names();
    test_residual_check();
    test_kv_check();
    test_argmax_check();
    test_gemv_check();
    return check_summary("test_contract");
}
