#!/usr/bin/env bash
# llmk vs llama.cpp on the same GGUF file and thread count, in one run:
# `llmk bench --json` and bench/llamacpp_bench.py (llama.cpp through the PyPI
# package llama-cpp-python), then both figures and their ratio per test.
# Not part of CI. On a fresh machine it builds llama-cpp-python into a
# virtual environment under build/ (git-ignored); LLAMACPP_VENV points at an
# existing one instead.
#
#   bench/compare.sh [-m MODEL] [-t THREADS] [-p 512] [-n 128] [-d 0] [-r 3]
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL="${LLMK_MODELS:-$HOME/.cache/llmk}/SmolLM2-135M-Instruct.Q4_1.gguf"
THREADS=2 NP=512 NG=128 REPS=3 DEPTH=0
while [ $# -gt 0 ]; do
    case "$1" in
        -m) MODEL="$2"; shift 2 ;;
        -t) THREADS="$2"; shift 2 ;;
        -p) NP="$2"; shift 2 ;;
        -n) NG="$2"; shift 2 ;;
        -r) REPS="$2"; shift 2 ;;
        -d) DEPTH="$2"; shift 2 ;;
        -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
        *) echo "compare.sh: unknown option $1" >&2; exit 2 ;;
    esac
done

LLMK_BIN="${LLMK_BIN:-build/llmk}"
[ -x "$LLMK_BIN" ] || make -s all
VENV="${LLAMACPP_VENV:-build/bench-venv}"

# llama.cpp gets every x86 vector extension this CPU has except AMX:
# GGML_NATIVE would compile ggml's AMX matmul in wherever the CPU reports it,
# and on the Xeon VMs here (llama-cpp-python 0.3.36) that build segfaults in
# ggml_backend_amx_mul_mat on its first batch, so llama.cpp's fastest build
# that runs is its AVX-512 VNNI one. LLAMACPP_CMAKE_ARGS overrides.
llamacpp_isa_args() {
    local f a="-DGGML_NATIVE=OFF"
    f=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
    if [ "$f" = "  " ]; then echo "-DGGML_NATIVE=ON"; return; fi
    has() { case "$f" in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
    has avx && a+=" -DGGML_AVX=ON"
    has avx2 && a+=" -DGGML_AVX2=ON"
    has fma && a+=" -DGGML_FMA=ON"
    has f16c && a+=" -DGGML_F16C=ON"
    has bmi2 && a+=" -DGGML_BMI2=ON"
    has avx_vnni && a+=" -DGGML_AVX_VNNI=ON"
    if has avx512f && has avx512bw && has avx512vl && has avx512dq; then
        a+=" -DGGML_AVX512=ON"
        has avx512_vnni && a+=" -DGGML_AVX512_VNNI=ON"
        has avx512vbmi && a+=" -DGGML_AVX512_VBMI=ON"
        has avx512_bf16 && a+=" -DGGML_AVX512_BF16=ON"
    fi
    echo "$a"
}
if ! "$VENV/bin/python" -c "import llama_cpp" 2>/dev/null; then
    echo "compare.sh: building llama-cpp-python into $VENV (several minutes)" >&2
    python3 -m venv "$VENV"
    CMAKE_ARGS="${LLAMACPP_CMAKE_ARGS:-$(llamacpp_isa_args)}" "$VENV/bin/pip" install -q --no-cache-dir llama-cpp-python
fi

OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
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
