#!/usr/bin/env bash
# Fuzz the GGUF reader with libFuzzer (clang, ASan + UBSan) for a bounded time:
# LLMK_FUZZ_SECONDS (default 60). Starts from fuzz/corpus/gguf; new inputs go
# to build/fuzz/corpus (copy interesting ones into fuzz/corpus/gguf to keep
# them in the replay that `make test` runs). A crash leaves its input in
# build/fuzz/ and makes this script fail.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${LLMK_FUZZ_SECONDS:-60}
out=build/fuzz
mkdir -p "$out/corpus"
# Only the reader's own sources: the target must not depend on the rest of the tree.
srcs=(fuzz/fuzz_gguf.c src/gguf.c src/status.c src/codec/types.c)
flags=(-std=c11 -D_GNU_SOURCE -g -O1 -Iinclude -Isrc -Wall -Wextra -Werror -Wno-unused-parameter
       -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all)
if clang "${flags[@]}" -fsanitize=fuzzer "${srcs[@]}" -o "$out/fuzz_gguf" 2>"$out/build.log"; then
    echo "fuzz: running $out/fuzz_gguf for ${secs}s"
    ASAN_OPTIONS=detect_leaks=1 "$out/fuzz_gguf" -max_total_time="$secs" -max_len=4096 \
        -rss_limit_mb=2048 -artifact_prefix="$out/" -print_final_stats=1 \
        "$out/corpus" fuzz/corpus/gguf
else
    # Without libFuzzer's runtime (clang without compiler-rt), replay the corpus at least.
    cat "$out/build.log" >&2
    echo "fuzz: libFuzzer unavailable; replaying the corpus only" >&2
    clang "${flags[@]}" -DLLMK_FUZZ_REPLAY "${srcs[@]}" -o "$out/fuzz_gguf_replay"
    "$out/fuzz_gguf_replay" fuzz/corpus/gguf/*
    exit 1
fi
