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
#   bench/compare.sh [-m MODEL] [-t THREADS] [-p 512] [-n 128] [-d 0] [-r 3]
#   bench/compare.sh -B 1,4,16 [-m MODEL] [-t THREADS] [-p 128] [-n 128]
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL="${LLMK_MODELS:-$HOME/.cache/llmk}/SmolLM2-135M-Instruct.Q4_1.gguf"
THREADS=2 NP="" NG="" REPS=3 DEPTH=0 BATCH=""
while [ $# -gt 0 ]; do
    case "$1" in
        -m) MODEL="$2"; shift 2 ;;
        -t) THREADS="$2"; shift 2 ;;
        -p) NP="$2"; shift 2 ;;
        -n) NG="$2"; shift 2 ;;
        -r) REPS="$2"; shift 2 ;;
        -d) DEPTH="$2"; shift 2 ;;
        -B) BATCH="$2"; shift 2 ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
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
    # checks every B came back.
    "$TOOLS/bin/llama-batched-bench" -m "$MODEL" -c "$((maxb * (NP + NG)))" -b 2048 -ub 512 \
        -npp "$NP" -ntg "$NG" -npl "$BATCH" -t "$THREADS" -tb "$THREADS" --output-format jsonl \
        > "$OUT/llamacpp.jsonl"
    if ! "$LLMK_BIN" bench -m "$MODEL" -B "$BATCH" -p "$NP" -n "$NG" -t "$THREADS" --json > "$OUT/llmk.json"; then
        echo "compare.sh: $LLMK_BIN bench -B failed (see above)" >&2
        exit 1
    fi
    python3 bench/compare_batched.py "$OUT/llmk.json" "$OUT/llamacpp.jsonl" \
        --model "$MODEL" --threads "$THREADS" --batch "$BATCH"
    exit 0
fi

"$VENV/bin/python" bench/llamacpp_bench.py -m "$MODEL" -p "$NP" -n "$NG" -t "$THREADS" -r "$REPS" -d "$DEPTH" > "$OUT/llamacpp.json"
"$LLMK_BIN" bench -m "$MODEL" -p "$NP" -n "$NG" -t "$THREADS" -r "$REPS" -d "$DEPTH" --json > "$OUT/llmk.json"

python3 - "$OUT/llmk.json" "$OUT/llamacpp.json" "$MODEL" "$THREADS" <<'EOF'
import json, os, sys
ours, theirs = (json.load(open(p)) for p in sys.argv[1:3])
key = lambda o: (o["n_prompt"], o["n_gen"])
t = {key(o): o for o in theirs}
print(f"model {os.path.basename(sys.argv[3])}, {sys.argv[4]} threads")
print(f"| {'test':>12} | {'llmk t/s':>18} | {'llama.cpp t/s':>18} | {'ratio':>6} |")
print(f"| {'-'*12} | {'-'*18} | {'-'*18} | {'-'*6} |")
for o in ours:
    name = f"pp{o['n_prompt']}" if o["n_prompt"] else f"tg{o['n_gen']}"
    if o.get("n_depth"):
        name += f"@d{o['n_depth']}"
    l = t.get(key(o))
    if not l:
        continue
    print(f"| {name:>12} | {o['avg_ts']:8.2f} ± {o['stddev_ts']:7.2f} | {l['avg_ts']:8.2f} ± {l['stddev_ts']:7.2f} "
          f"| {o['avg_ts'] / l['avg_ts']:5.2f}x |")
for o in ours:
    if "effective_gbs" in o:
        llc = o.get("llc_bytes", 0)
        fit = f" (the weights fit in the {llc / 1e6:.0f} MB last-level cache)" if llc > o["weight_bytes_per_token"] else ""
        print(f"llmk decode: {o['effective_gbs']:.1f} GB/s of weights, machine reads {o['machine_read_gbs']:.1f} GB/s{fit}")
EOF
