#!/usr/bin/env bash
# Runs the suite: C unit tests (optimised and ASan+UBSan builds), then the
# Python-driven tests that use the llmk binary the way a user does.
# The sanitizer pass runs with LLMK_TEST_LIGHT (tests/check.h: the long
# default-model parts run in the optimised pass only), and pytest leaves out
# the tests marked slow; `scripts/run_tests.sh --slow` (make test-slow) runs
# exactly those, so the two together are everything.
set -uo pipefail
cd "$(dirname "$0")/.."
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LLMK_BIN=build/llmk LLMK_SAN_BIN=build/san/llmk
failed=()
if [ "${1:-}" = --slow ]; then
    echo "== python tests marked slow"
    .venv/bin/python -m pytest -q -m slow tests/py || failed+=("tests/py -m slow")
else
    for build in build build/san; do
        for t in "$build"/tests/test_*; do
            [ -x "$t" ] || continue
            echo "== $t"
            if [ "$build" = build/san ]; then
                LLMK_TEST_LIGHT=1 "$t" || failed+=("$t")
            else
                "$t" || failed+=("$t")
            fi
        done
    done
    echo "== python tests (not slow)"
    .venv/bin/python -m pytest -q -m "not slow" --durations=15 tests/py || failed+=("tests/py")
fi
if [ ${#failed[@]} -gt 0 ]; then
    echo "FAILED: ${failed[*]}"
    exit 1
fi
echo "all tests passed"
