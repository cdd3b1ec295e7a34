#!/usr/bin/env bash
# Decode throughput of a pipeline split under load: STAGES stages (one node each, loopback,
# one rank of --threads 1 per node) serving CLIENTS concurrent streaming clients for SECONDS_RUN
# seconds (tools/loadtest.py), for each tpnode binary given, ROUNDS times in alternation (a
# loaded machine drifts: compare binaries within one run). Prints one row per binary and round,
# and each binary's tokens/s against the first one's. Each node runs in its own session
# (setsid): where the kernel groups CPU time by session (sched_autogroup), every node then gets
# its own share of a shared machine, as on its own host, instead of the stages splitting one.
#   tools/bench-pipeline-fill.sh [BIN...]   (default: build/node/tpnode)
#   env: MODEL (default tools/fetch-model.sh), STAGES (2), CLIENTS (16), SLOTS (CLIENTS),
#        SECONDS_RUN (30), ROUNDS (2), MAX_TOKENS (32)
set -euo pipefail
export TPNODE_CLUSTER_SECRET=${TPNODE_CLUSTER_SECRET:-$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')}
cd "$(dirname "$0")/.."
MODEL=${MODEL:-$(tools/fetch-model.sh)}
STAGES=${STAGES:-2}; CLIENTS=${CLIENTS:-16}; SLOTS=${SLOTS:-$CLIENTS}
SECS=${SECONDS_RUN:-30}; ROUNDS=${ROUNDS:-2}; MAXT=${MAX_TOKENS:-32}
BINS=("$@"); [ ${#BINS[@]} -gt 0 ] || BINS=(build/node/tpnode)
RES=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap 'cleanup; rm -rf "$RES"' EXIT
wait_health() { for _ in $(seq 1 600); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "$1/health")" = 200 ] && return 0; sleep 0.2; done; return 1; }

peers=""
for s in $(seq 0 $((STAGES - 1))); do peers+="${peers:+,}127.0.0.$((s + 1)):$((23600 + s))"; done
echo "model $MODEL; $STAGES stages x 1 rank; $CLIENTS clients x ${SECS}s, $SLOTS slots," \
     "max_tokens $MAXT; $ROUNDS round(s); $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq 1 "$ROUNDS"); do
  for i in "${!BINS[@]}"; do
    bin=${BINS[$i]}
    common=(--model "$MODEL" --peers "$peers" --pp "$STAGES" --threads 1 --parallel "$SLOTS"
            --ctx-size 512 --log-level warn)
    pids=()
    for s in $(seq $((STAGES - 1)) -1 1); do
      setsid "$bin" "${common[@]}" --node-id "$s" & pids+=($!)
    done
    setsid "$bin" "${common[@]}" --node-id 0 --port 23680 & pids+=($!); D=$!
    wait_health http://127.0.0.1:23680
    python3 tools/loadtest.py --base http://127.0.0.1:23680 --clients "$CLIENTS" \
      --seconds "$SECS" --max-tokens "$MAXT" --json > "$RES/$i.$round.json" || true
    overlapped=$(curl -s http://127.0.0.1:23680/metrics |
                 awk '/^tpnode_pipeline_overlapped_steps_total /{print $2}')
    echo "${overlapped:-0}" > "$RES/$i.$round.overlap"
    kill -TERM "$D"; for p in "${pids[@]}"; do wait "$p" || true; done; pids=()
  done
done
python3 - "$RES" "$ROUNDS" "${BINS[@]}" <<'PY'
import json, sys
res, rounds, bins = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print("| binary | round | requests | errors | tokens/s | TTFT p50 ms | overlapped steps |")
print("|---|---|---|---|---|---|---|")
total = [0.0] * len(bins)
for r in range(1, rounds + 1):
    for i, b in enumerate(bins):
        j = json.load(open(f"{res}/{i}.{r}.json"))
        o = open(f"{res}/{i}.{r}.overlap").read().strip()
        total[i] += j["tokens_per_s"]
        print(f"| {b} | {r} | {j['requests']} | {j['errors']} | {j['tokens_per_s']} | "
              f"{j['ttft_p50_ms']} | {o} |")
for i, b in enumerate(bins[1:], 1):
    print(f"tokens/s {b} / {bins[0]}: {total[i] / total[0]:.2f}x (sum over {rounds} round(s))")
PY
