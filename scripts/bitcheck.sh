#!/usr/bin/env bash
# Bitwise comparison of two llmk binaries' logits over a matrix of
# configurations: a refactor that promises "no bit changes" runs this with the
# binary before and after (not part of CI: ~1 minute per binary, and it makes
# four re-quantized copies of the default model under $WORK).
#
#   scripts/bitcheck.sh OLD_LLMK NEW_LLMK [WORK_DIR]
#
# Configurations: Q4_1 with the default route, 8-bit activations (with and
# without repacking), scalar kernels, the AVX2 and no-SIMD CPU masks, the f32
# check route, f16/f32/q8_0 KV caches, the f32 path; Q8_0, Q4_0, Q4_K_M and
# IQ4_NL files (fast and scalar); the three tiny fixtures; 1 and 2 threads.
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=$1 NEW=$2 WORK=${3:-build/bitcheck}
MODEL="${LLMK_MODELS:-$HOME/.cache/llmk}/SmolLM2-135M-Instruct.Q4_1.gguf"
mkdir -p "$WORK"
for q in q8_0 q4_0 q4_k_m iq4_nl; do
    [ -f "$WORK/m_$q.gguf" ] || "$OLD" quantize "$MODEL" "$WORK/m_$q.gguf" "$q" >/dev/null
done
IDS=$(python3 -c "print(','.join(str((i*7919)%49000+3) for i in range(150)))")
SIDS=$(python3 -c "print(','.join(str((i*104729)%49000+3) for i in range(12)))")

run_all() { # BIN OUT
    local bin=$1 out=$2 t q f
    mkdir -p "$out"
    run() { local name=$1; shift; env "$@" >"$out/$name.bin" 2>"$out/$name.err" || echo "FAIL $name ($bin)"; }
    for t in 1 2; do
        run q41_t$t "$bin" logits -m "$MODEL" --ids "$IDS" -t $t
        run q41_q8_t$t LLMK_ACT=q8 "$bin" logits -m "$MODEL" --ids "$IDS" -t $t
        run q41_q8norepack_t$t LLMK_ACT=q8 LLMK_REPACK=0 "$bin" logits -m "$MODEL" --ids "$IDS" -t $t
        run q41_ref_t$t LLMK_KERNELS=ref "$bin" logits -m "$MODEL" --ids "$IDS" -t $t
        run q41_kvq8_t$t "$bin" logits -m "$MODEL" --ids "$IDS" -t $t --kv-type q8_0
        run q41_kvf32_t$t "$bin" logits -m "$MODEL" --ids "$IDS" -t $t --kv-type f32
        run q41_avx2_t$t LLMK_CPU_MASK=avx2 "$bin" logits -m "$MODEL" --ids "$IDS" -t $t
        run q41_none_t$t LLMK_CPU_MASK=none "$bin" logits -m "$MODEL" --ids "$SIDS" -t $t
        run q41_f32act_t$t LLMK_EXEC_F32ACT=1 "$bin" logits -m "$MODEL" --ids "$SIDS" -t $t
        for q in q8_0 q4_0 q4_k_m iq4_nl; do
            run ${q}_t$t "$bin" logits -m "$WORK/m_$q.gguf" --ids "$IDS" -t $t
            run ${q}_ref_t$t LLMK_KERNELS=ref "$bin" logits -m "$WORK/m_$q.gguf" --ids "$SIDS" -t $t
        done
    done
    run q41_path32 "$bin" logits -m "$MODEL" --ids "$SIDS" -t 2 --path f32
    for f in tests/fixtures/model/tiny/*.gguf; do
        run "tiny_$(basename "$f" .gguf)" "$bin" logits -m "$f" --ids 1,2,3,4,5,6,7,8,9 -t 2
    done
}
run_all "$OLD" "$WORK/old"
run_all "$NEW" "$WORK/new"
diffs=0 n=0
for f in "$WORK"/old/*.bin; do
    n=$((n + 1))
    cmp -s "$f" "$WORK/new/$(basename "$f")" || { echo "DIFF $(basename "$f" .bin)"; diffs=$((diffs + 1)); }
done
echo "bitcheck: $n configurations, $diffs differ"
[ "$diffs" -eq 0 ]
