#!/usr/bin/env bash
# Fuzz llmk with libFuzzer (clang, ASan + UBSan), each target for a bounded time:
#   LLMK_FUZZ_SECONDS  seconds per target (default 60)
#   LLMK_FUZZ_TARGETS  which targets, space- or comma-separated (default: all)
# Targets (fuzz/fuzz_<name>.c; input layouts are documented at the top of each):
#   gguf       the GGUF reader alone (built from the reader's own sources)
#   tokenizer  vocabulary GGUF + text: load, encode, streaming decode
#   model      GGUF model image: llmk_model_load_memory, then a tiny eval
#   chat       template (text or GGUF) + messages JSON: parse, recognise, render
#   serve      llmk serve's request parser: an HTTP body -> a checked request
#   safetensors the safetensors reader (one file of a Hugging Face checkpoint)
#   hf         config.json + tokenizer.json + tokenizer_config.json -> the folder's GGUF view
#   grammar    GBNF text (+ NUL + a string): parse, then match the string's prefixes
#   json_schema  JSON Schema text -> GBNF, which the grammar parser must accept
# Each starts from fuzz/corpus/<name>; new inputs go to build/fuzz/corpus/<name>
# (minimise interesting ones into fuzz/corpus/<name> with -merge=1 to keep them
# in the replay that `make test` runs). A crash, leak, hang or sanitizer report
# leaves its input as build/fuzz/<name>-crash-* (or leak-, timeout-, oom-), the
# remaining targets still run, and the script fails at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${LLMK_FUZZ_SECONDS:-60}
targets=${LLMK_FUZZ_TARGETS:-gguf tokenizer model chat serve safetensors hf grammar json_schema}
targets=${targets//,/ }
out=build/fuzz
san=(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
flags=(-std=c11 -D_GNU_SOURCE -g -O1 -Iinclude -Isrc -Wall -Wextra -Werror -Wno-unused-parameter "${san[@]}")
libs=(-lpcre2-8 -lcjson -lpthread -lm)
mkdir -p "$out"

# Longest input per target: room for the seeds' sizes and some growth, small
# enough to keep executions fast.
max_len() {
    case $1 in
        gguf|safetensors) echo 4096 ;; tokenizer) echo 24576 ;; model|hf) echo 65536 ;; chat) echo 8192 ;;
        *) echo 4096 ;;
    esac
}

for t in $targets; do
    [ -f "fuzz/fuzz_$t.c" ] || { echo "fuzz: no target '$t' (fuzz/fuzz_$t.c)" >&2; exit 2; }
done

# The library with coverage instrumentation (for every target but gguf),
# built once through the Makefile into its own directory.
lib=()
if [[ " $targets " != " gguf " ]]; then
    echo "fuzz: building the instrumented library in $out/lib"
    make -s BUILD="$out/lib" CC=clang OPT=-O1 \
        EXTRA_CFLAGS="-fsanitize=fuzzer-no-link ${san[*]}" "$out/lib/libllmk.a" >"$out/lib-build.log" 2>&1 ||
        { cat "$out/lib-build.log" >&2; exit 1; }
    lib=("$out/lib/libllmk.a")
fi

failed=()
for t in $targets; do
    if [ "$t" = gguf ]; then
        # Only the reader's own sources: this target must not depend on the rest of the tree.
        srcs=(fuzz/fuzz_gguf.c src/gguf.c src/status.c src/codec/types.c)
        link=()
    else
        srcs=("fuzz/fuzz_$t.c")
        # the server's parser is the command's code, not the library's
        [ "$t" = serve ] && srcs+=(app/serve_api.c app/serve_embed.c app/embed_pool.c app/gen_opts.c app/cli.c)
        link=("${lib[@]}" "${libs[@]}")
    fi
    mkdir -p "$out/corpus/$t"
    if clang "${flags[@]}" -fsanitize=fuzzer "${srcs[@]}" "${link[@]}" -o "$out/fuzz_$t" 2>"$out/build_$t.log"; then
        echo "fuzz: running $out/fuzz_$t for ${secs}s"
        if ! ASAN_OPTIONS=detect_leaks=1 "$out/fuzz_$t" -max_total_time="$secs" -max_len="$(max_len "$t")" \
            -timeout=20 -rss_limit_mb=2048 -artifact_prefix="$out/$t-" -print_final_stats=1 \
            "$out/corpus/$t" "fuzz/corpus/$t"; then
            failed+=("$t")
        fi
    else
        # Without libFuzzer's runtime (clang without compiler-rt), replay the corpus at least.
        cat "$out/build_$t.log" >&2
        echo "fuzz: libFuzzer unavailable; replaying fuzz/corpus/$t only" >&2
        clang "${flags[@]}" -DLLMK_FUZZ_REPLAY "${srcs[@]}" "${link[@]}" -o "$out/fuzz_${t}_replay"
        "$out/fuzz_${t}_replay" "fuzz/corpus/$t"/*
        failed+=("$t (not fuzzed)")
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: FAILED: ${failed[*]}" >&2
    exit 1
fi
echo "fuzz: all targets ran clean"
