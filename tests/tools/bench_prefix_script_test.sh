#!/usr/bin/env bash
# tools/bench-prefix.sh end to end, scaled down: the tiny reference model on a single-node tpnode,
# 2 clients, modes off, local and redis (tpnode serves the Redis rows, or the report says why it
# cannot: no redis-server, or a tpnode that refuses --kv-cache-redis-url). Checks the report's
# tables: both workloads and the probe for off and local with no failed request, the cached
# requests and the ratio lines only where the prefix cache is on.
#   bench_prefix_script_test.sh MODEL.gguf      (ctest passes llama-tiny-q8_0.gguf; TPNODE_BIN)
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
MODEL=${1:?usage: bench_prefix_script_test.sh MODEL.gguf}
[ -s "$MODEL" ] || { echo "FAIL: $MODEL not found (build the target reference_models)"; exit 1; }
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
fail() { echo "FAIL: $*"; cat "$OUT/report.md" "$OUT/err.txt"; exit 1; }
MODES="off local redis" CLIENTS=2 SLOTS=2 SECONDS_RUN=1 TURNS=2 PREFIX_TOKENS=64 OPEN_TOKENS=30 \
  MAX_TOKENS=4 PROBES=1 NODES=1 TP=1 THREADS=1 CTX=512 TPNODE_BIN=${TPNODE_BIN:?} \
  timeout 120 "$SRC/tools/bench-prefix.sh" "$MODEL" >"$OUT/report.md" 2>"$OUT/err.txt" \
  || fail "bench-prefix.sh exited $?"
md=$OUT/report.md
for t in "#### Shared prefix" "#### Multi-turn chat" "#### Probe: one request at a time, no load" \
         "#### Ratios" "#### Machine and run"; do
  grep -qxF "$t" "$md" || fail "no '$t' section"
done
# Rows of off and local: requests > 0, 0 errors (shared and chat tables).
for mode in "prefix cache off" "prefix cache on"; do
  n=$(grep -c "^| tpnode 1x1, $mode | [1-9][0-9]* | 0 |" "$md")
  [ "$n" = 2 ] || fail "$mode: $n workload rows with requests and no errors, not 2"
done
# Caching off: no cached request; on: cached ones, and its probe found the prefix cached.
grep -q "^| tpnode 1x1, prefix cache off | [0-9]* | 0 | [0-9.]* | 0 | .* | 0 | - / - |" "$md" \
  || fail "caching off reported cached requests"
grep -q "^| tpnode 1x1, prefix cache on | [0-9]* | 0 | [0-9.]* | 0\.[0-9]* | .* | [1-9][0-9]* | [0-9.]* / " "$md" \
  || fail "the prefix cache found nothing cached"
grep -q "^| tpnode 1x1, prefix cache on | [0-9.]* | [0-9.]* | [0-9.]*x | \[[1-9]" "$md" \
  || fail "probe: the second request of a prefix was not cached"
grep -q "^- TTFT p50 cached / not cached, no load (local): [0-9.]*x (goal <= 0.2x)" "$md" \
  || fail "no probe ratio line"
# Redis: rows with figures, or a note that says why not.
if ! grep -q "^| tpnode 1x1 + Redis, second cluster (loads) | [1-9]" "$md"; then
  grep -q "^- Redis rows not available: " "$md" || fail "no Redis rows and no note saying why"
fi
grep -q "^- commit: " "$md" || fail "no commit in the facts"
echo "ok: $(grep -c '^| tpnode' "$md") table rows"
