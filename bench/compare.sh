#!/usr/bin/env bash
# llmk vs llama.cpp on the same GGUF file and thread count, in one run:
# `llmk bench --json` and bench/llamacpp_bench.py (llama.cpp through the PyPI
# package llama-cpp-python), then both figures and their ratio per test.
# Not part of CI. On a fresh machine it builds llama-cpp-python into a
# virtual environment under build/ (git-ignored); LLAMACPP_VENV points at an
# existing one instead.
#
# With -B LIST, the batched comparison instead: `llmk bench -B LIST --json`
# and llama.cpp's llama-batched-bench (built once from the same version's
# sources by bench/llamacpp_tools.sh), B sequences of -p prompt and -n
# generated tokens each (default 128 and 128 with -B), S_PP and S_TG side by
# side per B, and llmk's S_TG(B)/S_TG(1).
#
# With -T TYPES, the same comparison on each type's file, made once by
# llama.cpp's llama-quantize from an f32 copy of the model (cached under
# build/bench-types), then one table of every type's ratios.
#
# With -R N (single model or -B), N rounds of both benches, llmk and
# llama.cpp alternately (which one goes first alternates too), and each
# ratio as the median of the rounds' ratios: on a shared host whose speed
# drifts over minutes, figures taken back to back compare the engines, two
# figures taken minutes apart partly compare the host with itself.
#
#   bench/compare.sh [-m MODEL] [-t THREADS] [-p 512] [-n 128] [-d 0] [-r 3] [-R 1]
#   bench/compare.sh -B 1,4,16 [-m MODEL] [-t THREADS] [-p 128] [-n 128] [-R 1]
#   bench/compare.sh -T Q4_0,Q4_K_M,Q5_K_M,Q6_K,Q8_0,IQ4_NL [-m MODEL] [-t THREADS] [-r 3]
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL="${LLMK_MODELS:-$HOME/.cache/llmk}/SmolLM2-135M-Instruct.Q4_1.gguf"
THREADS=2 NP="" NG="" REPS=3 DEPTH=0 BATCH="" TYPES="" ROUNDS=1
while [ $# -gt 0 ]; do
    case "$1" in
        -m) MODEL="$2"; shift 2 ;;
        -t) THREADS="$2"; shift 2 ;;
        -p) NP="$2"; shift 2 ;;
        -n) NG="$2"; shift 2 ;;
        -r) REPS="$2"; shift 2 ;;
        -d) DEPTH="$2"; shift 2 ;;
        -B) BATCH="$2"; shift 2 ;;
        -T) TYPES="$2"; shift 2 ;;
        -R) ROUNDS="$2"; shift 2 ;;
        -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
        *) echo "compare.sh: unknown option $1" >&2; exit 2 ;;
    esac
done

if [ -n "$BATCH" ]; then
    NP="${NP:-128}" NG="${NG:-128}"
    if ! [[ "$BATCH" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]]; then
        echo "compare.sh: -B takes a list of sequence counts, as 1,4,16" >&2; exit 2
    fi
    if [ "$DEPTH" != 0 ]; then
        echo "compare.sh: -d does not apply to -B (llama-batched-bench has no depth)" >&2; exit 2
    fi
fi
if ! [[ "$ROUNDS" =~ ^[1-9][0-9]?$ ]]; then
    echo "compare.sh: -R takes a round count from 1 to 99" >&2; exit 2
fi
if [ -n "$TYPES" ]; then
    [ "$ROUNDS" = 1 ] || { echo "compare.sh: -R does not apply to -T" >&2; exit 2; }
    if ! [[ "$TYPES" =~ ^[A-Za-z0-9_]+(,[A-Za-z0-9_]+)*$ ]]; then
        echo "compare.sh: -T takes a list of llama-quantize types, as Q4_0,Q4_K_M" >&2; exit 2
    fi
    [ -z "$BATCH" ] || { echo "compare.sh: -T and -B do not go together" >&2; exit 2; }
fi
NP="${NP:-512}" NG="${NG:-128}"

LLMK_BIN="${LLMK_BIN:-build/llmk}"
[ -x "$LLMK_BIN" ] || make -s all
if [ -n "$BATCH" ] && ! grep -qE -- '(^|[^[:alnum:]-])-B([^[:alnum:]-]|$)' <<<"$("$LLMK_BIN" bench --help 2>&1 || true)"; then
    echo "compare.sh: $LLMK_BIN bench has no -B (the batched bench of issue 17); build an llmk that has it, or drop -B" >&2
    exit 1
fi
VENV="${LLAMACPP_VENV:-build/bench-venv}"

# llamacpp_isa_args (the ISA flags llama.cpp is built with: all this CPU has
# but AMX; LLAMACPP_CMAKE_ARGS overrides) and llamacpp_tools_build.
. bench/llamacpp_tools.sh
if ! "$VENV/bin/python" -c "import llama_cpp" 2>/dev/null; then
    echo "compare.sh: building llama-cpp-python into $VENV (several minutes)" >&2
    python3 -m venv "$VENV"
    CMAKE_ARGS="${LLAMACPP_CMAKE_ARGS:-$(llamacpp_isa_args)}" "$VENV/bin/pip" install -q --no-cache-dir llama-cpp-python
fi

OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

if [ -n "$BATCH" ]; then
    TOOLS="${LLAMACPP_TOOLS:-build/llamacpp-tools}"
    llamacpp_tools_build "$VENV" "$TOOLS"
    maxb="$(tr ',' '\n' <<<"$BATCH" | sort -n | tail -1)"
    # Each sequence gets ctx/max(B) cells (llama.cpp rounds up to 256); a
    # test that does not fit is skipped silently, so compare_batched.py
    # checks every B came back. Each writes into the round's folder $1.
    batched_llama() {
        "$TOOLS/bin/llama-batched-bench" -m "$MODEL" -c "$((maxb * (NP + NG)))" -b 2048 -ub 512 \
            -npp "$NP" -ntg "$NG" -npl "$BATCH" -t "$THREADS" -tb "$THREADS" --output-format jsonl \
            > "$1/llamacpp.jsonl"
    }
    batched_llmk() {
        if ! "$LLMK_BIN" bench -m "$MODEL" -B "$BATCH" -p "$NP" -n "$NG" -t "$THREADS" --json > "$1/llmk.json"; then
            echo "compare.sh: $LLMK_BIN bench -B failed (see above)" >&2
            exit 1
        fi
    }
    files=()
    for i in $(seq 1 "$ROUNDS"); do
        d="$OUT/round$i"
        mkdir -p "$d"
        if [ $((i % 2)) = 1 ]; then batched_llama "$d"; batched_llmk "$d"; else batched_llmk "$d"; batched_llama "$d"; fi
        files+=("$d/llmk.json" "$d/llamacpp.jsonl")
    done
    python3 bench/compare_batched.py "${files[@]}" --model "$MODEL" --threads "$THREADS" --batch "$BATCH"
    exit 0
fi

# compare_one MODEL DIR: both benches on MODEL into DIR, and their table.
compare_one() {
    "$VENV/bin/python" bench/llamacpp_bench.py -m "$1" -p "$NP" -n "$NG" -t "$THREADS" -r "$REPS" -d "$DEPTH" \
        > "$2/llamacpp.json"
    "$LLMK_BIN" bench -m "$1" -p "$NP" -n "$NG" -t "$THREADS" -r "$REPS" -d "$DEPTH" --json > "$2/llmk.json"
    python3 bench/compare_table.py one "$2/llmk.json" "$2/llamacpp.json" "$1" "$THREADS"
}

if [ -z "$TYPES" ] && [ "$ROUNDS" = 1 ]; then
    compare_one "$MODEL" "$OUT"
    exit 0
fi
if [ -z "$TYPES" ]; then
    # -R: each engine's figures into the round's folder $1, alternately
    llama_one() {
        "$VENV/bin/python" bench/llamacpp_bench.py -m "$MODEL" -p "$NP" -n "$NG" -t "$THREADS" -r "$REPS" \
            -d "$DEPTH" > "$1/llamacpp.json"
    }
    llmk_one() {
        "$LLMK_BIN" bench -m "$MODEL" -p "$NP" -n "$NG" -t "$THREADS" -r "$REPS" -d "$DEPTH" --json > "$1/llmk.json"
    }
    for i in $(seq 1 "$ROUNDS"); do
        d="$OUT/round$i"
        mkdir -p "$d"
        if [ $((i % 2)) = 1 ]; then llama_one "$d"; llmk_one "$d"; else llmk_one "$d"; llama_one "$d"; fi
    done
    python3 bench/compare_table.py rounds "$OUT" "$ROUNDS" "$MODEL" "$THREADS"
    exit 0
fi

# -T: each type's file from one f32 copy, by llama-quantize (kept between runs)
TOOLS="${LLAMACPP_TOOLS:-build/llamacpp-tools}"
llamacpp_tools_build "$VENV" "$TOOLS"
TDIR="${LLMK_BENCH_TYPES:-build/bench-types}"
mkdir -p "$TDIR"
base="$(basename "$MODEL" .gguf)"
f32="$TDIR/$base.f32.gguf"
[ -s "$f32" ] || "$LLMK_BIN" quantize "$MODEL" "$f32" f32 > /dev/null
for t in ${TYPES//,/ }; do
    f="$TDIR/$base.$t.gguf"
    if [ ! -s "$f" ] || [ "$f" -ot "$f32" ]; then
        "$TOOLS/bin/llama-quantize" "$f32" "$f" "$t" > "$OUT/quantize.$t.log" 2>&1 ||
            { echo "compare.sh: llama-quantize to $t failed (see $OUT/quantize.$t.log)" >&2; cat "$OUT/quantize.$t.log" >&2; exit 1; }
    fi
    mkdir -p "$OUT/$t"
    compare_one "$f" "$OUT/$t"
    echo
done
python3 bench/compare_table.py types "$OUT" "$THREADS" ${TYPES//,/ }
