#!/usr/bin/env bash
# Runs every benchmark program in $BUILD/bench/ (default build/bench). Each
# takes no arguments and prints its own figures; benchmarks never assert.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
status=0
for b in "$BUILD"/bench/*; do
    [ -f "$b" ] && [ -x "$b" ] || continue
    echo "== $b"
    "$b" || { echo "FAILED: $b"; status=1; }
done
exit $status
