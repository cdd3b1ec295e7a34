#!/usr/bin/env bash
# tpnode clusters across shaped links, on one machine (docs/scaling.md checks its cost model
# against this). Creates 4 network namespaces (nodes) and a fifth holding a bridge
# (tools/netns-lib.sh); each node has one veth pair to the bridge, shaped in both directions
# with `tc qdisc ... tbf rate R burst TBF_BURST` (egress of the node's end and egress of the
# bridge's end), so every node has a full-duplex "NIC" of rate R. Only namespaces created here are touched, and all of them are deleted on
# exit (the veth pairs go with them).
#
# tc netem (delay/loss) is NOT available in this kernel ("Specified qdisc kind is unknown"),
# so no latency is added: the link latency is that of the veth path, measured here; tbf (and
# htb) shaping works.
#
#   tools/netns-cluster.sh [--model M] [--rates "none 1gbit 200mbit"] [--layouts "2x1 4x1 2x2"]
#                          [--reps 2] [--n 32] [--out FILE.jsonl]
# Writes one JSON object per measurement (kind: calib | link | cluster) to --out (default
# build/netns-cluster.jsonl) and to stdout; tools/scaling-model.py check FILE prints predicted
# vs measured. Calibration (1x1 with 1 and 2 threads, 1x2) runs first and last, in the same
# session.
# Needs root (CAP_NET_ADMIN); exits 77 when namespaces cannot be created.
set -uo pipefail
# The nodes started here share a fresh 256-bit cluster secret (docs/security.md).
export TPNODE_CLUSTER_SECRET=${TPNODE_CLUSTER_SECRET:-$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')}
cd "$(dirname "$0")/.." || exit 1
BIN=${TPNODE_BIN:-build/node/tpnode}
MODEL=""; RATES="none 1gbit 200mbit"; LAYOUTS="2x1 4x1 2x2"; REPS=2; NGEN=32
OUT=build/netns-cluster.jsonl
while [ $# -gt 0 ]; do
  case $1 in
    --model) MODEL=$2; shift 2 ;;
    --rates) RATES=$2; shift 2 ;;
    --layouts) LAYOUTS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --n) NGEN=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -z "$MODEL" ]; then
  MODEL=build/bench-llama-250m-q8_0.gguf
  [ -s "$MODEL" ] || build/tools/make_test_model --out "$MODEL" --dim 1024 --layers 16 --heads 16 \
    --kv-heads 4 --ffn 2816 --vocab 32000 --type q8_0 --seed 7 >/dev/null || exit 1
fi
[ -x "$BIN" ] || { echo "no $BIN: build the tpnode target first" >&2; exit 1; }

. tools/netns-lib.sh
TAG=tpsc$$
NODES=4
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  netns_delete
}
trap cleanup EXIT INT TERM

netns_create "$TAG" "$NODES" 10.77.0
case $? in 0) ;; 77) echo "skipped: cannot create network namespaces"; exit 77 ;; *) exit 1 ;; esac
shape() {  # $1: rate (tc syntax) or none; both directions of every node's link
  netns_shape "$1" || { echo "tc tbf failed" >&2; exit 1; }
}

load1() { cut -d' ' -f1 /proc/loadavg; }
emit() { echo "$1" | tee -a "$OUT"; }
PORT=21000
PROMPT_IDS=$(python3 -c "print(','.join(str(1 + (i * 37) % 900) for i in range(16)))")

# One generation; prints "prefill_tps decode_tps" or "fail".
run_layout() {  # $1 nodes, $2 tp, $3 threads
  local nodes=$1 tp=$2 threads=$3 peers="" pids=() k
  PORT=$((PORT + 1))
  for k in $(seq 0 $((nodes - 1))); do peers+="${peers:+,}10.77.0.$((k + 1)):$PORT"; done
  local common=(--model "$MODEL" --tp "$tp" --threads "$threads" --ctx-size 256 --log-level warn
                --connect-timeout 60 --liveness-timeout 30)
  local extra=()
  if [ "$nodes" -gt 1 ]; then
    extra=(--peers "$peers")
    for k in $(seq $((nodes - 1)) -1 1); do
      ip netns exec "${TAG}n$k" "$BIN" "${common[@]}" --node-id "$k" --peers "$peers" \
        >/dev/null 2>&1 & pids+=($!); PIDS+=($!)
    done
  fi
  ip netns exec "${TAG}n0" timeout 300 "$BIN" "${common[@]}" --node-id 0 "${extra[@]}" \
    --prompt-ids "$PROMPT_IDS" -n "$NGEN" --json 2>/dev/null |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["prefill_tps"], d["decode_tps"])' ||
    echo fail
  for p in "${pids[@]}"; do wait "$p"; done
}

measure() {  # $1 kind, $2 rate, $3 nodes, $4 tp, $5 threads
  local before after res
  for rep in $(seq "$REPS"); do
    before=$(load1)
    res=$(run_layout "$3" "$4" "$5")
    after=$(load1)
    if [ "$res" = fail ]; then
      emit "{\"kind\":\"$1\",\"rate\":\"$2\",\"nodes\":$3,\"tp\":$4,\"threads\":$5,\"rep\":$rep,\"error\":\"run failed\",\"load1\":$before}"
      continue
    fi
    read -r pf dc <<< "$res"
    emit "{\"kind\":\"$1\",\"rate\":\"$2\",\"nodes\":$3,\"tp\":$4,\"threads\":$5,\"rep\":$rep,\"prefill_tps\":$pf,\"decode_tps\":$dc,\"load1_before\":$before,\"load1_after\":$after}"
  done
}

# Link: iperf3 goodput node0 -> node1 (3 s) and the mesh's 64-byte round trip (median of 20).
measure_link() {  # $1 rate
  ip netns exec "${TAG}n1" iperf3 -s -1 -p 5299 >/dev/null 2>&1 & local sp=$!; PIDS+=("$sp")
  sleep 0.5
  local bps
  bps=$(ip netns exec "${TAG}n0" iperf3 -c 10.77.0.2 -p 5299 -t 3 -J 2>/dev/null |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"])' ||
        echo 0)
  wait "$sp" 2>/dev/null
  PORT=$((PORT + 1))
  local peers="10.77.0.1:$PORT,10.77.0.2:$PORT"
  ip netns exec "${TAG}n1" "$BIN" --node-id 1 --peers "$peers" --log-level warn >/dev/null 2>&1 &
  local wp=$!; PIDS+=("$wp")
  local rtt
  rtt=$(ip netns exec "${TAG}n0" timeout 60 "$BIN" --node-id 0 --peers "$peers" --log-level warn \
        2>/dev/null | awk '/^node 0/ {print $4}')
  wait "$wp"
  emit "{\"kind\":\"link\",\"rate\":\"$1\",\"iperf3_bps\":${bps:-0},\"rtt_us\":${rtt:-0},\"burst\":$NETNS_BURST,\"load1\":$(load1)}"
}

echo "# $(date -u +%FT%TZ) model=$MODEL ($(stat -c %s "$MODEL") bytes) n=$NGEN reps=$REPS" \
     "cores=$(nproc) uptime:$(uptime)" | tee -a "$OUT"
shape none
measure calib none 1 1 1
measure calib none 1 1 2
measure calib none 1 2 1
for rate in $RATES; do
  shape "$rate"
  measure_link "$rate"
  for layout in $LAYOUTS; do
    measure cluster "$rate" "${layout%x*}" "${layout#*x}" 1
  done
done
shape none  # calibration again at the end: the machine's load drifts
measure calib none 1 1 1
measure calib none 1 1 2
measure calib none 1 2 1
echo "# done $(date -u +%FT%TZ) uptime:$(uptime)" | tee -a "$OUT"
