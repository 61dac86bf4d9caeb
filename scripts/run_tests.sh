#!/usr/bin/env bash
# Runs the whole suite: C unit tests (optimised and ASan+UBSan builds), then
# the Python-driven tests that use the llmk binary the way a user does.
set -uo pipefail
cd "$(dirname "$0")/.."
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
failed=()
for build in build build/san; do
    for t in "$build"/tests/test_*; do
        [ -x "$t" ] || continue
        echo "== $t"
        if ! "$t"; then failed+=("$t"); fi
    done
done
echo "== python tests"
if ! LLMK_BIN=build/llmk LLMK_SAN_BIN=build/san/llmk .venv/bin/python -m pytest -q tests/py; then
    failed+=("tests/py")
fi
if [ ${#failed[@]} -gt 0 ]; then
    echo "FAILED: ${failed[*]}"
    exit 1
fi
echo "all tests passed"
