#!/usr/bin/env bash
# Inspection checked with independent tools: gguf-py reads the model file and compares every
# tensor with GET /v1/tensors/{name} (raw bit-exact, npy exact) on a 2x2 cluster (Q8_0) and a
# one-rank Q6_K server; the logit-lens example (tools/logit_lens.py) runs against a 1x2 F32
# server and checks that the last layer's lens reproduces the model's logits.
#   tests/node/inspection_python_test.sh MODEL_DIR   (the build's reference-models folder)
# Exit 77 (skipped) when numpy/gguf are missing.
set -uo pipefail
# The nodes started here share a fresh 256-bit cluster secret (docs/security.md).
export TPNODE_CLUSTER_SECRET=${TPNODE_CLUSTER_SECRET:-$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')}
BIN=${TPNODE_BIN:?}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
REF=${1:?usage: inspection_python_test.sh MODEL_DIR}
[ -s "$REF/llama-tiny-q8_0.gguf" ] || { echo "FAIL: no reference models in $REF (build the target reference_models)"; exit 1; }
PY="$SRC/tools/venv-python.sh"
"$PY" -c 'import numpy, gguf' 2>/dev/null || { echo "skipped: numpy/gguf missing"; exit 77; }
LOG=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$LOG"; }
trap cleanup EXIT
read -r p0 p1 a1 a2 a3 <<<"$(python3 "$SRC/tests/support/free_ports.py" \
  127.0.0.1 127.0.0.2 127.0.0.1 127.0.0.1 127.0.0.1)"
peers="127.0.0.1:$p0,127.0.0.2:$p1"
q8=(--model "$REF/llama-tiny-q8_0.gguf" --peers "$peers" --tp 2 --log-level warn)
"$BIN" "${q8[@]}" --node-id 1 >"$LOG/w.log" 2>&1 & pids+=($!)
"$BIN" "${q8[@]}" --node-id 0 --port "$a1" >"$LOG/d.log" 2>&1 & pids+=($!)
"$BIN" --model "$REF/llama-tiny-q6_k.gguf" --port "$a2" --log-level warn >"$LOG/q6.log" 2>&1 &
pids+=($!)
"$BIN" --model "$REF/llama-tiny-f32.gguf" --tp 2 --port "$a3" --log-level warn >"$LOG/f32.log" 2>&1 &
pids+=($!)
fail() { echo "FAIL: $*"; tail -n 20 "$LOG"/*.log; exit 1; }
for port in "$a1" "$a2" "$a3"; do
  for i in $(seq 1 300); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")" = 200 ] && break
    sleep 0.1
  done
done
"$PY" "$SRC/tools/check_tensors_gguf.py" --base "http://127.0.0.1:$a1" \
  --model "$REF/llama-tiny-q8_0.gguf" | tail -3 || fail "2x2 Q8_0 tensors differ from gguf-py"
"$PY" "$SRC/tools/check_tensors_gguf.py" --base "http://127.0.0.1:$a2" \
  --model "$REF/llama-tiny-q6_k.gguf" | tail -3 || fail "Q6_K tensors differ from gguf-py"
"$PY" "$SRC/tools/logit_lens.py" --base "http://127.0.0.1:$a3" --prompt-ids 1,450,483,310,344,338 \
  || fail "logit lens"
echo "ok: gguf-py agrees with every tensor read; the logit lens reproduces the logits"
