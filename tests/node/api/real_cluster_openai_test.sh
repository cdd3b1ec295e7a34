#!/usr/bin/env bash
# The openai-client checks (test_openai_client.py) and curl against a real 2-node cluster on
# loopback (node 0 serving with an API key, node 1 a worker), then 503 while the worker is down.
#   real_cluster_openai_test.sh MODEL.gguf    (ctest passes the build's llama-tiny-q8_0.gguf)
# Exit 77 (skipped) when the openai package is missing.
set -uo pipefail
# The nodes started here share a fresh 256-bit cluster secret (docs/security.md).
export TPNODE_CLUSTER_SECRET=${TPNODE_CLUSTER_SECRET:-$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')}
BIN=${TPNODE_BIN:?}
SRC=$(cd "$(dirname "$0")/../../.." && pwd)
MODEL=${1:?usage: real_cluster_openai_test.sh MODEL.gguf}
[ -s "$MODEL" ] || { echo "FAIL: $MODEL not found (build the target reference_models)"; exit 1; }
LOG=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$LOG"; }
trap cleanup EXIT
ports=$(python3 "$SRC/tests/support/free_ports.py" 127.0.0.1 127.0.0.2 127.0.0.1)
read -r p0 p1 api <<<"$ports"
peers="127.0.0.1:$p0,127.0.0.2:$p1"
echo "sk-test-$RANDOM" > "$LOG/keys"
KEY=$(cat "$LOG/keys")
common=(--model "$MODEL" --peers "$peers" --tp 1 --parallel 4 --ctx-size 512 --liveness-timeout 2)
"$BIN" "${common[@]}" --node-id 1 >"$LOG/n1.log" 2>&1 & W=$!; pids+=($W)
"$BIN" "${common[@]}" --node-id 0 --port "$api" --api-key-file "$LOG/keys" >"$LOG/n0.log" 2>&1 &
D=$!; pids+=($D)
base="http://127.0.0.1:$api"
for i in $(seq 1 300); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "$base/health")" = 200 ] && break; sleep 0.1
done
fail() { echo "FAIL: $*"; tail -20 "$LOG"/n0.log "$LOG"/n1.log; exit 1; }
[ "$(curl -s -o /dev/null -w '%{http_code}' "$base/health")" = 200 ] || fail "not ready"

# curl: a completion, a streamed chat, 401 without the key.
out=$(curl -s "$base/v1/completions" -H "Authorization: Bearer $KEY" \
  -H 'Content-Type: application/json' -d '{"prompt":"Hello","max_tokens":8,"temperature":0}')
echo "$out" | grep -q '"text_completion"' || fail "curl completion: $out"
sse=$(curl -sN "$base/v1/chat/completions" -H "Authorization: Bearer $KEY" \
  -H 'Content-Type: application/json' \
  -d '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":8,"stream":true}')
echo "$sse" | grep -q '^data: \[DONE\]' || fail "curl stream did not end with [DONE]: $sse"
code=$(curl -s -o /dev/null -w '%{http_code}' "$base/v1/models")
[ "$code" = 401 ] || fail "no key gave $code, not 401"
echo "ok: curl completion, streamed chat, 401"

# The official openai client.
TPNODE_API_BASE_URL="$base/v1" TPNODE_API_KEY="$KEY" \
  "$SRC/tools/venv-python.sh" "$SRC/tests/node/api/test_openai_client.py"
rc=$?
[ "$rc" = 77 ] && { echo "skipped: openai package missing"; exit 77; }
[ "$rc" = 0 ] || fail "openai client checks failed ($rc)"

# A worker down: 503.
kill -9 "$W"
for i in $(seq 1 50); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "$base/health")" = 503 ] && break; sleep 0.1
done
code=$(curl -s -o /dev/null -w '%{http_code}' "$base/v1/completions" -H "Authorization: Bearer $KEY" \
  -H 'Content-Type: application/json' -d '{"prompt":"Hello","max_tokens":4}')
[ "$code" = 503 ] || fail "completion with a worker down gave $code, not 503"
echo "ok: 503 while a worker is down"
kill -TERM "$D"; wait "$D"; rc0=$?
[ "$rc0" = 0 ] || fail "node 0 exit $rc0 after SIGTERM"
echo "ok: real 2-node cluster passes the openai-client and curl checks"
