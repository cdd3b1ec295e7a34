#!/usr/bin/env bash
# Prefill and decode tokens/s of tpnode (one process, tp=1) next to llama.cpp's llama-bench on
# the same GGUF files, at 1 and 2 threads, plus copy/read bandwidth and the decode bound
# (weight bytes per token / read bandwidth). Runs of the two alternate so both see the same
# machine load; each figure is the median of REPS runs.
#
#   tools/bench-model.sh                      # ~0.5 B-parameter Q8_0 and Q4_K models (generated)
#   REPS=5 THREADS="1 2" tools/bench-model.sh
# llama-bench is the managed build's (tools/llama-cpp.sh; LLAMA_CPP_BIN picks another).
#   MODELS="a.gguf b.gguf" tools/bench-model.sh   # other files
#
# Prints one markdown table (for docs/benchmarks.md) on stdout; progress on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${TPNODE_BUILD_DIR:-build}
LLAMA_BENCH=$(tools/llama-cpp.sh)/llama-bench
REPS=${REPS:-3}
THREADS=${THREADS:-"1 2"}
N_PROMPT=${N_PROMPT:-64}
N_GEN=${N_GEN:-32}
DIR=${TPNODE_BENCH_MODELS:-$BUILD/bench-models}

cmake --build "$BUILD" --target tpnode make_test_model copy_bandwidth >&2
mkdir -p "$DIR"
if [ -z "${MODELS:-}" ]; then
  MODELS=""
  # ~0.55 B parameters: dim 1024, 32 layers, 16 heads (4 kv), ffn 4096, vocab 32000.
  for type in q8_0 q4_k; do
    f="$DIR/llama-0.5b-$type.gguf"
    if [ ! -s "$f" ]; then
      echo "[bench-model] generating $f" >&2
      "$BUILD/tools/make_test_model" --out "$f" --dim 1024 --layers 32 --heads 16 --kv-heads 4 \
        --ffn 4096 --vocab 32000 --type "$type" --seed 5
    fi
    MODELS="$MODELS $f"
  done
fi
[ -x "$LLAMA_BENCH" ] || { echo "[bench-model] llama-bench not found at $LLAMA_BENCH" >&2; exit 1; }
export LD_LIBRARY_PATH="$(dirname "$LLAMA_BENCH"):${LD_LIBRARY_PATH:-}"
PROMPT_IDS=$(seq -s, 1 "$N_PROMPT")

median() { python3 -c 'import sys,statistics; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }

echo "| model | threads | tpnode prefill t/s | llama.cpp pp$N_PROMPT t/s | ratio | tpnode decode t/s | llama.cpp tg$N_GEN t/s | ratio | decode GB/s | read GB/s | % of bound |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for t in $THREADS; do
  bw=$("$BUILD/tools/copy_bandwidth" --mib 256 --threads "$t" --reps 3)
  read_gbps=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["read_gbps"])' "$bw")
  echo "[bench-model] threads=$t bandwidth $bw" >&2
  for m in $MODELS; do
    tp_pp=(); tp_tg=(); ll_pp=(); ll_tg=(); bytes=0
    for r in $(seq "$REPS"); do
      out=$("$BUILD/node/tpnode" --model "$m" --prompt-ids "$PROMPT_IDS" -n "$((N_GEN + 1))" \
            --threads "$t" --json --log-level warn)
      tp_pp+=("$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["prefill_tps"])' "$out")")
      tp_tg+=("$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["decode_tps"])' "$out")")
      bytes=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["decode_weight_bytes"])' "$out")
      lj=$("$LLAMA_BENCH" -m "$m" -p "$N_PROMPT" -n "$N_GEN" -t "$t" -r 1 -o json 2>/dev/null)
      ll_pp+=("$(python3 -c 'import json,sys; print([x["avg_ts"] for x in json.loads(sys.argv[1]) if x["n_prompt"]>0][0])' "$lj")")
      ll_tg+=("$(python3 -c 'import json,sys; print([x["avg_ts"] for x in json.loads(sys.argv[1]) if x["n_gen"]>0][0])' "$lj")")
      echo "[bench-model] $(basename "$m") t=$t rep $r: tpnode ${tp_pp[-1]} / ${tp_tg[-1]}, llama.cpp ${ll_pp[-1]} / ${ll_tg[-1]}" >&2
    done
    a=$(median "${tp_pp[@]}"); b=$(median "${ll_pp[@]}"); c=$(median "${tp_tg[@]}"); d=$(median "${ll_tg[@]}")
    python3 - "$m" "$t" "$a" "$b" "$c" "$d" "$bytes" "$read_gbps" <<'PY'
import os, sys
m, t, a, b, c, d, nbytes, rd = sys.argv[1:]
a, b, c, d, nbytes, rd = map(float, (a, b, c, d, nbytes, rd))
gbps = c * nbytes / 1e9
print(f"| {os.path.basename(m)} | {t} | {a:.1f} | {b:.1f} | {a/b:.2f}x | {c:.1f} | {d:.1f} | {c/d:.2f}x | {gbps:.1f} | {rd:.1f} | {100*gbps/rd:.0f}% |")
PY
  done
done
