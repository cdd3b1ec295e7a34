#!/usr/bin/env bash
# Serving load test (issue 6): 32 concurrent streaming clients for 2 minutes against a 2x2 tpnode
# cluster on loopback, then against llama.cpp's llama-server on the same model with the same
# number of slots and threads (2 threads: one per tpnode rank on each of the 2 nodes would be
# 4; the machine has 2 cores, so both get 2 threads' worth of cores in total).
#   tools/bench-serving.sh [MODEL.gguf]     env: CLIENTS (32), SECONDS_RUN (120), SLOTS (8),
#                                            MAX_TOKENS (32), LLAMA_CPP_BIN (a llama.cpp bin
#                                            folder; default: the managed build, tools/llama-cpp.sh)
set -euo pipefail
# The nodes started here share a fresh 256-bit cluster secret (docs/security.md).
export TPNODE_CLUSTER_SECRET=${TPNODE_CLUSTER_SECRET:-$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')}
cd "$(dirname "$0")/.."
MODEL=${1:-$(tools/fetch-model.sh)}
CLIENTS=${CLIENTS:-32}; SECS=${SECONDS_RUN:-120}; SLOTS=${SLOTS:-8}; MAXT=${MAX_TOKENS:-32}
LLAMA_BIN=$(tools/llama-cpp.sh)
RES=$(mktemp -d)
BIN=build/node/tpnode
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap 'cleanup; rm -rf "$RES"' EXIT
wait_health() { for i in $(seq 1 600); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "$1/health")" = 200 ] && return 0; sleep 0.2; done; return 1; }

echo "model $MODEL; $CLIENTS clients x ${SECS}s, $SLOTS slots, max_tokens $MAXT; $(nproc) cores"
common=(--model "$MODEL" --peers 127.0.0.1:23500,127.0.0.2:23501 --tp 2 --threads 1
        --parallel "$SLOTS" --ctx-size 512 --log-level warn)
$BIN "${common[@]}" --node-id 1 & pids+=($!); W=$!
$BIN "${common[@]}" --node-id 0 --port 23580 & pids+=($!); D=$!
wait_health http://127.0.0.1:23580
echo "== tpnode 2 nodes x 2 ranks"
python3 tools/loadtest.py --base http://127.0.0.1:23580 --clients "$CLIENTS" --seconds "$SECS" \
  --max-tokens "$MAXT" --pids "$D,$W" --json | tee "$RES/tpnode.json" || true
curl -s http://127.0.0.1:23580/metrics | grep -E "^tpnode_(sequences|api_active)" || true
kill -TERM "$D"; wait "$D" || true; wait "$W" || true; pids=()

echo "== llama-server (--parallel $SLOTS, -t 2)"
"$LLAMA_BIN/llama-server" -m "$MODEL" --host 127.0.0.1 --port 23590 -t 2 --parallel "$SLOTS" \
  -c $((512 * SLOTS)) --log-disable >/dev/null 2>&1 & pids+=($!); L=$!
wait_health http://127.0.0.1:23590
python3 tools/loadtest.py --base http://127.0.0.1:23590 --clients "$CLIENTS" --seconds "$SECS" \
  --max-tokens "$MAXT" --pids "$L" --json | tee "$RES/llama.json" || true
kill "$L"; wait "$L" || true; pids=()
python3 - "$RES" <<'PY'
import json, sys
t = json.load(open(sys.argv[1] + "/tpnode.json")); l = json.load(open(sys.argv[1] + "/llama.json"))
print("| server | requests | errors | tokens/s | TTFT p50 ms | TTFT p99 ms |")
print("|---|---|---|---|---|---|")
for name, r in (("tpnode 2x2", t), ("llama-server", l)):
    print(f"| {name} | {r['requests']} | {r['errors']} | {r['tokens_per_s']} | {r['ttft_p50_ms']} | {r['ttft_p99_ms']} |")
print(f"ratio tokens/s tpnode/llama-server: {t['tokens_per_s']/l['tokens_per_s']:.2f}x; "
      f"TTFT p99 ratio: {t['ttft_p99_ms']/l['ttft_p99_ms']:.2f}x")
PY
