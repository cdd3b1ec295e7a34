#!/usr/bin/env bash
# The Redis KV tier's effect on time to first token: one long prompt (max_tokens 1, so the
# request time is the time to the first token) answered by a cluster computing it (cluster A,
# Redis empty), by A again (its own prefix cache), by a fresh cluster B sharing A's Redis (the
# prefix loaded from Redis), and by a cluster C without Redis. Each cluster is one node with
# --tp 2 on loopback; the model is make_test_model's (random weights, Q8_0).
#   tools/bench-kv-tier.sh      Env: WORDS (420 words of the letters vocabulary, ~730 tokens)
# Needs build/node/tpnode, build/tools/make_test_model, redis-server and curl.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${TPNODE_BIN:-build/node/tpnode}
WORDS=${WORDS:-420}
DIR=$(mktemp -d); PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$DIR"' EXIT
build/tools/make_test_model --out "$DIR/m.gguf" --dim 1024 --layers 8 --heads 16 --kv-heads 4 \
  --ffn 2816 --type q8_0 > /dev/null
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
RP=$(port)
redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no --dir "$DIR" > "$DIR/redis.log" 2>&1 &
PIDS+=($!)
PROMPT=$(python3 -c "import random;random.seed(3);print(' '.join(random.choice(['a','b','ab','ba']) for _ in range($WORDS)))")
start() {  # $1 port, then extra flags; the pid goes to PIDS
  local p=$1; shift
  "$BIN" --model "$DIR/m.gguf" --tp 2 --threads 1 --parallel 2 --ctx-size 1024 --kv-block-size 16 \
    --port "$p" --log-level warn "$@" > "$DIR/n$p.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 600); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "127.0.0.1:$p/health")" = 200 ] && return; sleep 0.1
  done
  echo "node on port $p did not become healthy" >&2; exit 1
}
ask() {  # $1 port, $2 label: prints a table row
  local t; t=$(curl -s -o "$DIR/out.json" -w '%{time_total}' "127.0.0.1:$1/v1/completions" \
    -H 'content-type: application/json' -d "{\"prompt\":\"$PROMPT\",\"max_tokens\":1,\"temperature\":0}")
  python3 -c "import json,sys;u=json.load(open('$DIR/out.json'))['usage'];print(f'| $2 | {u[\"prompt_tokens\"]} | {u[\"prompt_tokens_details\"][\"cached_tokens\"]} | {float(sys.argv[1]):.3f} |')" "$t"
}
# A metric's value, summed over its labeled series (tpnode_kv_redis_blocks_stored_total{node,rank}).
metric() {
  curl -s "127.0.0.1:$1/metrics" |
    awk -v m="$2" '$1 == m || index($1, m "{") == 1 {s += $2; n++} END {if (n) print s}'
}
echo "| request | prompt tokens | cached tokens | time to first token (s) |"
echo "|---|---|---|---|"
REDIS=(--kv-cache-redis-url "redis://127.0.0.1:$RP")
A=$(port); start "$A" "${REDIS[@]}"
ask "$A" "A: computed (Redis empty)"
for _ in $(seq 100); do  # the writer threads store asynchronously: 2 ranks x cached blocks
  stored=$(metric "$A" tpnode_kv_redis_blocks_stored_total); cached=$(metric "$A" tpnode_kv_blocks_cached)
  [ "${stored%.*}" -ge $((2 * ${cached%.*})) ] && break
  sleep 0.1
done
ask "$A" "A again: its own prefix cache"
kill "${PIDS[-1]}"
B=$(port); start "$B" "${REDIS[@]}"
ask "$B" "B: prefix loaded from Redis"
echo "B: tpnode_kv_redis_blocks_fetched_total $(metric "$B" tpnode_kv_redis_blocks_fetched_total)" >&2
kill "${PIDS[-1]}"
C=$(port); start "$C"
ask "$C" "C: no Redis"
