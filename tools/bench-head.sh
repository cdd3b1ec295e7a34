#!/usr/bin/env bash
# Output-head layout benchmark (issue 7): decode and prefill tokens/s of one model with
# `--head vocab-parallel` and `--head replicated`, interleaved run by run, for the layouts
# 1x2 and 2x1 (and 2x2) on loopback. The `--head auto` default follows what this measures.
#   tools/bench-head.sh [MODEL.gguf]   (default: the quickstart's gemma-3-270m, ~/.cache/tpnode)
# Env: N_PROMPT (64), N_GEN (64), REPS (3), LAYOUTS ("1x2 2x1 2x2"). Prints a Markdown table.
set -euo pipefail
# The nodes started here share a fresh 256-bit cluster secret (docs/security.md).
export TPNODE_CLUSTER_SECRET=${TPNODE_CLUSTER_SECRET:-$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')}
cd "$(dirname "$0")/.."
BIN=${TPNODE_BIN:-build/node/tpnode}
MODEL=${1:-$(tools/fetch-model.sh)}
N_PROMPT=${N_PROMPT:-64}; N_GEN=${N_GEN:-64}; REPS=${REPS:-3}; LAYOUTS=${LAYOUTS:-"1x2 2x1 2x2"}
[ -s "$MODEL" ] || { echo "model $MODEL not found (tools/fetch-model.sh obtains it)" >&2; exit 1; }
PROMPT_IDS=$(python3 -c "print(','.join(str(1 + (i * 37) % 900) for i in range($N_PROMPT)))")
RESULTS=$(mktemp); trap 'rm -f "$RESULTS"' EXIT

run() {  # $1 nodes, $2 tp, $3 head, $4 rep -> "prefill_tps decode_tps"
  local nodes=$1 tp=$2 head=$3 rep=$4 peers="" pids=()
  for n in $(seq 0 $((nodes - 1))); do peers+="${peers:+,}127.0.0.$((n + 1)):$((22000 + rep * 10 + n))"; done
  for n in $(seq $((nodes - 1)) -1 1); do
    $BIN --model "$MODEL" --node-id "$n" --peers "$peers" --tp "$tp" --threads 1 --head "$head" \
      --log-level warn --ctx-size 512 >/dev/null 2>&1 & pids+=($!)
  done
  $BIN --model "$MODEL" --node-id 0 --peers "$peers" --tp "$tp" --threads 1 --head "$head" \
    --ctx-size 512 --prompt-ids "$PROMPT_IDS" -n "$N_GEN" --json --log-level warn 2>/dev/null |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["prefill_tps"], d["decode_tps"])'
  for p in "${pids[@]}"; do wait "$p"; done
}

for layout in $LAYOUTS; do
  nodes=${layout%x*}; tp=${layout#*x}
  for rep in $(seq "$REPS"); do
    for head in vocab-parallel replicated; do
      echo "$layout $head $(run "$nodes" "$tp" "$head" "$rep")" >> "$RESULTS"
    done
  done
done
python3 - "$RESULTS" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    layout, head, pre, dec = line.split()
    rows.setdefault((layout, head), []).append((float(pre), float(dec)))
print("| layout | head | prefill tok/s | decode tok/s | decode vs vocab-parallel |")
print("|---|---|---|---|---|")
for layout in dict.fromkeys(k[0] for k in rows):
    base = statistics.median(d for _, d in rows[(layout, "vocab-parallel")])
    for head in ("vocab-parallel", "replicated"):
        r = rows[(layout, head)]
        pre = statistics.median(p for p, _ in r); dec = statistics.median(d for _, d in r)
        print(f"| {layout} | {head} | {pre:.1f} | {dec:.1f} | {dec / base:.2f}x |")
PY
