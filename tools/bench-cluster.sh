#!/usr/bin/env bash
# Cluster benchmark (issue 5): decode and prefill tokens/s of one model for the layouts
# 1x1 (1 and 2 threads), 1x2, 2x1 and 2x2 (nodes x local ranks, 1 thread per rank) on loopback,
# and llama.cpp on the same file: llama-bench with 1 and 2 threads, and llama.cpp RPC over two
# rpc-server processes (its multi-process mode), all in one run.
#   tools/bench-cluster.sh [MODEL.gguf]      (default: a generated ~250M-parameter Q8_0 llama)
# Env: LLAMA_CPP_BIN (a llama.cpp bin folder; default: the managed build of tools/llama-cpp.sh),
#      N_PROMPT (64), N_GEN (64), REPS (3). Prints a Markdown table.
set -euo pipefail
# The nodes started here share a fresh 256-bit cluster secret (docs/security.md).
export TPNODE_CLUSTER_SECRET=${TPNODE_CLUSTER_SECRET:-$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')}
cd "$(dirname "$0")/.."
BIN=build/node/tpnode
LLAMA_BIN=$(tools/llama-cpp.sh)
N_PROMPT=${N_PROMPT:-64}; N_GEN=${N_GEN:-64}; REPS=${REPS:-3}
MODEL=${1:-}
if [ -z "$MODEL" ]; then
  MODEL=build/bench-llama-250m-q8_0.gguf
  [ -s "$MODEL" ] || build/tools/make_test_model --out "$MODEL" --dim 1024 --layers 16 --heads 16 \
    --kv-heads 4 --ffn 2816 --vocab 32000 --type q8_0 --seed 7 >/dev/null
fi
PROMPT_IDS=$(python3 -c "print(','.join(str(1 + (i * 37) % 900) for i in range($N_PROMPT)))")

# One tpnode run: prints "prefill_tps decode_tps" (median of REPS).
tp_run() {  # $1 nodes, $2 tp, $3 threads
  local nodes=$1 tp=$2 threads=$3 results=()
  for rep in $(seq "$REPS"); do
    local peers="" pids=()
    for n in $(seq 0 $((nodes - 1))); do
      peers+="${peers:+,}127.0.0.$((n + 1)):$((21000 + rep * 10 + n))"
    done
    for n in $(seq $((nodes - 1)) -1 1); do
      $BIN --model "$MODEL" --node-id "$n" --peers "$peers" --tp "$tp" --threads "$threads" \
        --log-level warn --ctx-size 512 >/dev/null 2>&1 & pids+=($!)
    done
    local extra=()
    [ "$nodes" -gt 1 ] && extra=(--peers "$peers")
    results+=("$($BIN --model "$MODEL" --node-id 0 "${extra[@]}" --tp "$tp" --threads "$threads" \
      --ctx-size 512 --prompt-ids "$PROMPT_IDS" -n "$N_GEN" --json --log-level warn 2>/dev/null |
      python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["prefill_tps"], d["decode_tps"])')")
    for p in "${pids[@]}"; do wait "$p"; done
  done
  printf '%s\n' "${results[@]}" | python3 -c '
import sys, statistics
rows = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
print(statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows))'
}

# llama-bench: prints "prefill_tps decode_tps". Extra args are passed on (e.g. --rpc).
llama_run() {
  "$LLAMA_BIN/llama-bench" -m "$MODEL" -p "$N_PROMPT" -n "$N_GEN" -r "$REPS" -o json "$@" 2>/dev/null |
    python3 -c '
import json, sys
rows = json.load(sys.stdin)
pp = [r["avg_ts"] for r in rows if r["n_prompt"] > 0]
tg = [r["avg_ts"] for r in rows if r["n_gen"] > 0]
print(pp[0], tg[0])'
}

echo "model: $MODEL ($(du -h "$MODEL" | cut -f1)), prompt $N_PROMPT tokens, $N_GEN generated, median of $REPS"
echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')"
declare -A PF DC
run() {
  local pf dc
  read -r pf dc < <("${@:2}")
  PF["$1"]=$pf; DC["$1"]=$dc
  echo "  measured $1: prefill $pf decode $dc" >&2
}
run "tpnode 1x1 t1" tp_run 1 1 1
run "tpnode 1x1 t2" tp_run 1 1 2
run "tpnode 1x2 t1" tp_run 1 2 1
run "tpnode 2x1 t1" tp_run 2 1 1
run "tpnode 2x2 t1" tp_run 2 2 1
run "llama.cpp t1" llama_run -t 1
run "llama.cpp t2" llama_run -t 2
# llama.cpp RPC: two rpc-server processes with one thread each, the model split across them.
"$LLAMA_BIN/ggml-rpc-server" -H 127.0.0.1 -p 50152 -t 1 >/dev/null 2>&1 & R1=$!
"$LLAMA_BIN/ggml-rpc-server" -H 127.0.0.1 -p 50153 -t 1 >/dev/null 2>&1 & R2=$!
sleep 1
run "llama.cpp RPC 2 procs" llama_run -t 1 --rpc 127.0.0.1:50152,127.0.0.1:50153 -ngl 99
kill "$R1" "$R2" 2>/dev/null; wait 2>/dev/null || true

base=${DC["tpnode 1x1 t2"]}
rpc=${DC["llama.cpp RPC 2 procs"]}
echo
echo "| run | prefill tok/s | decode tok/s | decode vs tpnode 1x1 t2 | decode vs llama.cpp RPC |"
echo "|---|---|---|---|---|"
for k in "tpnode 1x1 t1" "tpnode 1x1 t2" "tpnode 1x2 t1" "tpnode 2x1 t1" "tpnode 2x2 t1" \
         "llama.cpp t1" "llama.cpp t2" "llama.cpp RPC 2 procs"; do
  python3 -c "print('| $k | %.1f | %.2f | %.2fx | %.2fx |' % (${PF[$k]}, ${DC[$k]}, ${DC[$k]}/$base, ${DC[$k]}/$rpc))"
done
