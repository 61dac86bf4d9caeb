/* A minimal test harness: CHECK-style macros that count, and a summary line.
 * Each tests/test_*.c is its own program; main() calls its test functions and
 * returns check_summary(). */
#ifndef LLMK_TEST_CHECK_H
#define LLMK_TEST_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_passed, check_failed;

#define CHECK(cond)                                                                     \
    do {                                                                                \
        if (cond) {                                                                     \
            check_passed++;                                                             \
        } else {                                                                        \
            check_failed++;                                                             \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);             \
        }                                                                               \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                              \
    do {                                                                                \
        long long va_ = (long long)(a), vb_ = (long long)(b);                           \
        if (va_ == vb_) {                                                               \
            check_passed++;                                                             \
        } else {                                                                        \
            check_failed++;                                                             \
            fprintf(stderr, "FAIL %s:%d: %s == %s (%lld vs %lld)\n", __FILE__, __LINE__, \
                    #a, #b, va_, vb_);                                                  \
        }                                                                               \
    } while (0)

/* Exact equality of doubles (worked examples are exact). */
#define CHECK_EQ_DBL(a, b)                                                              \
    do {                                                                                \
        double va_ = (a), vb_ = (b);                                                    \
        if (va_ == vb_) {                                                               \
            check_passed++;                                                             \
        } else {                                                                        \
            check_failed++;                                                             \
            fprintf(stderr, "FAIL %s:%d: %s == %s (%.17g vs %.17g)\n", __FILE__,        \
                    __LINE__, #a, #b, va_, vb_);                                        \
        }                                                                               \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                           \
    do {                                                                                \
        double va_ = (a), vb_ = (b);                                                    \
        if (fabs(va_ - vb_) <= (tol)) {                                                 \
            check_passed++;                                                             \
        } else {                                                                        \
            check_failed++;                                                             \
            fprintf(stderr, "FAIL %s:%d: %s ~ %s (%.17g vs %.17g, tol %g)\n", __FILE__, \
                    __LINE__, #a, #b, va_, vb_, (double)(tol));                         \
        }                                                                               \
    } while (0)

#define CHECK_STATUS(expr, want)                                                        \
    do {                                                                                \
        int got_ = (expr);                                                              \
        if (got_ == (want)) {                                                           \
            check_passed++;                                                             \
        } else {                                                                        \
            check_failed++;                                                             \
            fprintf(stderr, "FAIL %s:%d: %s -> %d %s, want %d %s (%s)\n", __FILE__,     \
                    __LINE__, #expr, got_, llmk_status_name(got_), (int)(want),         \
                    llmk_status_name(want), llmk_last_error());                         \
        }                                                                               \
    } while (0)

/* The default model's path: $LLMK_MODELS/<file>, else ~/.cache/llmk/<file>
 * (where scripts/fetch_model.sh puts it). With heavy set and LLMK_TEST_LIGHT
 * in the environment, NULL: the sanitizer pass of scripts/run_tests.sh skips
 * a test's long default-model part (minutes under ASan), which the optimised
 * pass runs in full; the tiny models take the same code paths under the
 * sanitizers, and the sanitized llmk runs the default model in tests/py. */
static inline const char *check_default_model(const char *test, int heavy) {
    static char path[4096];
    const char *dir = getenv("LLMK_MODELS"), *home = getenv("HOME");
    if (heavy && getenv("LLMK_TEST_LIGHT")) {
        printf("%s: LLMK_TEST_LIGHT set, default-model part skipped\n", test);
        return NULL;
    }
    if (dir && *dir) snprintf(path, sizeof path, "%s/SmolLM2-135M-Instruct.Q4_1.gguf", dir);
    else snprintf(path, sizeof path, "%s/.cache/llmk/SmolLM2-135M-Instruct.Q4_1.gguf", home ? home : ".");
    return path;
}

static inline int check_summary(const char *name) {
    printf("%s: %d passed, %d failed\n", name, check_passed, check_failed);
    return check_failed ? 1 : 0;
}

#endif
