#!/usr/bin/env bash
# Runs every benchmark program in $BUILD/bench/ (default build/bench), then
# `llmk bench` on the default model. Each prints its own figures; benchmarks
# never assert. bench/compare.sh (llama.cpp side by side) is separate.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
status=0
for b in "$BUILD"/bench/*; do
    [ -f "$b" ] && [ -x "$b" ] || continue
    echo "== $b"
    "$b" || { echo "FAILED: $b"; status=1; }
done
# End-to-end throughput on the default model (llama-bench style rows).
echo "== $BUILD/llmk bench (default model, ${LLMK_BENCH_THREADS:-2} threads)"
"$BUILD"/llmk bench -t "${LLMK_BENCH_THREADS:-2}" || { echo "FAILED: llmk bench"; status=1; }
exit $status
