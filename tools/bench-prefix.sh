#!/usr/bin/env bash
# Prefix caching under load (issue 21): 32 streaming chat clients whose requests share a
# ~1000-token system prompt, and a multi-turn chat workload (each client's earlier turns are the
# prefix of its next), against tpnode with its prefix cache off, on (local), and with the Redis
# KV tier, and against llama.cpp's llama-server with its prompt cache on the same model, the same
# number of slots and the same cores. The client is tools/prefixload.py (docs/benchmarks.md,
# "Prefix caching", says what each column means).
#
#   tools/bench-prefix.sh [MODEL.gguf]          (default model: tools/fetch-model.sh's gemma-3-270m)
#
# Env (defaults in brackets):
#   CLIENTS [32]        concurrent clients in both workloads
#   PREFIX_TOKENS [1000] size of the shared system prompt (sized with the server's /tokenize)
#   SECONDS_RUN [40]    shared-prefix workload: clients start requests for this long (requests in
#                       flight then finish: with caching off that drain takes longer than the run)
#   REQUESTS [0]        shared-prefix workload: > 0: this many requests per client instead
#   TURNS [3]           chat workload: turns per conversation
#   OPEN_TOKENS [200]   chat workload: size of each conversation's own opening message
#   MAX_TOKENS [16]     generated tokens per request (ignore_eos: always this many)
#   PROBES [3]          no-load probe: prefixes, each sent uncached then cached
#   WORKLOADS ["shared chat"]  MODES ["off local redis llama"]
#   SLOTS [8]           tpnode --parallel = llama-server --parallel
#   CTX [2048]          tpnode --ctx-size per slot; llama-server -c CTX x SLOTS (the same KV positions)
#   NODES [2] TP [2] THREADS [1]   tpnode layout: NODES processes x TP ranks, THREADS per rank
#   LLAMA_THREADS [NODES x TP x THREADS, at most nproc]   llama-server -t
#   KV_BLOCKS, KV_BLOCK_SIZE       tpnode --kv-blocks / --kv-block-size when set
#   LLAMA_SERVER_ARGS   more llama-server flags (e.g. "--cache-reuse 256")
#   LLAMA_SWA_FULL [1]  0: run llama-server without --swa-full
#   LLAMA_CPP_BIN       a llama.cpp bin folder (default: the managed build, tools/llama-cpp.sh)
#   TPNODE_BIN [build/node/tpnode]   OUT_DIR  keep the JSON results there (default: a temporary
#                       folder, removed at exit)
# Modes: off = tpnode --prefix-cache off; local = --prefix-cache on; redis = a redis-server of its
# own on a loopback port, a first tpnode cluster ("redis-a") serves the probe's first step and both
# workloads with --kv-cache-redis-url, is stopped, and a second cluster started fresh on the same
# Redis serves them again: its local cache starts empty, so what it finds cached at first came
# from Redis. If tpnode refuses --kv-cache-redis-url the Redis rows say so and the run goes on.
# llama = llama-server --parallel SLOTS -c CTX*SLOTS -t LLAMA_THREADS --swa-full (full-size
# sliding-window cache, so a slot's cached prompt can be reused, as tpnode keeps every layer's KV)
# with its defaults --cache-prompt on, --cache-ram 8192 MiB, --cache-reuse 0.
# Prints markdown tables (for docs/benchmarks.md) on stdout; progress on stderr. Everything is on
# loopback; every process started here is stopped at exit.
set -euo pipefail
# The nodes started here share a fresh 256-bit cluster secret (docs/security.md).
export TPNODE_CLUSTER_SECRET=${TPNODE_CLUSTER_SECRET:-$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')}
cd "$(dirname "$0")/.."
MODEL=${1:-$(tools/fetch-model.sh)}
CLIENTS=${CLIENTS:-32}; PREFIX_TOKENS=${PREFIX_TOKENS:-1000}; SECS=${SECONDS_RUN:-40}
REQUESTS=${REQUESTS:-0}; TURNS=${TURNS:-3}; OPEN_TOKENS=${OPEN_TOKENS:-200}
MAXT=${MAX_TOKENS:-16}; PROBES=${PROBES:-3}; WORKLOADS=${WORKLOADS:-"shared chat"}
MODES=${MODES:-"off local redis llama"}; SLOTS=${SLOTS:-8}; CTX=${CTX:-2048}
NODES=${NODES:-2}; TP=${TP:-2}; THREADS=${THREADS:-1}
CORES=$(nproc); LT=$((NODES * TP * THREADS)); [ "$LT" -le "$CORES" ] || LT=$CORES
LLAMA_THREADS=${LLAMA_THREADS:-$LT}
BIN=${TPNODE_BIN:-build/node/tpnode}
[ -x "$BIN" ] || { echo "no $BIN: build the target tpnode first (or set TPNODE_BIN)" >&2; exit 1; }
PY="python3 tools/prefixload.py"
TAG=$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
if [ -n "${OUT_DIR:-}" ]; then RES=$OUT_DIR; mkdir -p "$RES"; KEEP=1; else RES=$(mktemp -d); KEEP=0; fi
LOGS=$(mktemp -d)
pids=()
cleanup() {
  local p
  trap - EXIT
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  sleep 0.5
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  [ "$KEEP" = 1 ] || rm -rf "$RES"
  rm -rf "$LOGS"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
log() { echo "[bench-prefix] $*" >&2; }
note() { echo "$*" >>"$RES/notes.txt"; log "note: $*"; }
: >"$RES/notes.txt"
# A kept folder from an earlier run: its results (and its sized prompt) must not leak into this one.
rm -f "$RES/prompt.json" "$RES/facts.json" "$RES"/*.shared.json "$RES"/*.chat.json \
  "$RES"/*.probe.json "$RES"/*.metrics.txt
free_ports() { python3 -c 'import socket,sys
ss=[socket.socket() for _ in range(int(sys.argv[1]))]
[s.bind(("127.0.0.1",0)) for s in ss]
print(*[s.getsockname()[1] for s in ss])' "$1"; }

# Waits for URL/health = 200 while every pid given stays alive; 1 when one exits or after 120 s.
wait_health() {
  local url=$1 p; shift
  for _ in $(seq 1 600); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/health")" = 200 ] && return 0
    for p in "$@"; do kill -0 "$p" 2>/dev/null || return 1; done
    sleep 0.2
  done
  return 1
}

running=()  # the processes of the server now up
API=""
forget() {  # drops pids that were waited for (their ids may be reused) from the exit cleanup
  local keep=() p q gone
  for p in "${pids[@]}"; do
    gone=0; for q in "$@"; do [ "$p" = "$q" ] && gone=1; done
    [ "$gone" = 1 ] || keep+=("$p")
  done
  pids=("${keep[@]}")
}
stop_running() {
  local p
  for p in "${running[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${running[@]}"; do wait "$p" 2>/dev/null || true; done
  forget "${running[@]}"
  running=()
}

# start_tpnode NAME [extra tpnode flags...]: NODES processes on loopback; 1 when it does not come up.
start_tpnode() {
  local name=$1; shift
  local ports peers="" i
  read -r -a ports <<<"$(free_ports $((NODES + 1)))"
  API=http://127.0.0.1:${ports[$NODES]}
  local common=(--model "$MODEL" --tp "$TP" --threads "$THREADS" --parallel "$SLOTS"
                --ctx-size "$CTX" --log-level warn "$@")
  [ -n "${KV_BLOCKS:-}" ] && common+=(--kv-blocks "$KV_BLOCKS")
  [ -n "${KV_BLOCK_SIZE:-}" ] && common+=(--kv-block-size "$KV_BLOCK_SIZE")
  if [ "$NODES" -gt 1 ]; then
    for i in $(seq 0 $((NODES - 1))); do peers+="${peers:+,}127.0.0.$((i + 1)):${ports[$i]}"; done
    common+=(--peers "$peers")
    for i in $(seq $((NODES - 1)) -1 1); do
      "$BIN" "${common[@]}" --node-id "$i" >"$LOGS/$name.node$i.log" 2>&1 &
      pids+=($!); running+=($!)
    done
    common+=(--node-id 0)
  fi
  "$BIN" "${common[@]}" --port "${ports[$NODES]}" >"$LOGS/$name.node0.log" 2>&1 &
  pids+=($!); running+=($!)
  if ! wait_health "$API" "${running[@]}"; then
    stop_running
    return 1
  fi
}

start_llama() {
  local port
  port=$(free_ports 1); API=http://127.0.0.1:$port
  # shellcheck disable=SC2086  # LLAMA_SERVER_ARGS is a list of flags
  "$LLAMA_BIN/llama-server" -m "$MODEL" --host 127.0.0.1 --port "$port" $LLAMA_FLAGS \
    >"$LOGS/llama.log" 2>&1 &
  pids+=($!); running+=($!)
  wait_health "$API" "${running[@]}" || { stop_running; return 1; }
}

ensure_prompt() {
  [ -s "$RES/prompt.json" ] && return 0
  $PY make-prompt --base "$API" --tokens "$PREFIX_TOKENS" --out "$RES/prompt.json"
  log "system prompt: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["tokens"], "tokens, counted by", d["counted_by"])' "$RES/prompt.json")"
}

# run_workloads KEY PROBE_TAG PROBE_STEPS: the probe, then each workload, into $RES/KEY.*.json.
run_workloads() {
  local key=$1 tag=$2 steps=$3 wl
  ensure_prompt
  log "$key: probe ($PROBES prefixes x $steps requests, one at a time)"
  $PY probe --base "$API" --prompt-file "$RES/prompt.json" --tag "$tag" --prefixes "$PROBES" \
    --requests-per-prefix "$steps" --max-tokens "$MAXT" >"$RES/$key.probe.json" || true
  for wl in $WORKLOADS; do
    log "$key: $wl workload ($CLIENTS clients)"
    case $wl in
      shared) $PY shared --base "$API" --prompt-file "$RES/prompt.json" --clients "$CLIENTS" \
                --seconds "$SECS" --requests "$REQUESTS" --max-tokens "$MAXT" \
                >"$RES/$key.shared.json" || true ;;
      chat) $PY chat --base "$API" --prompt-file "$RES/prompt.json" --clients "$CLIENTS" \
              --turns "$TURNS" --open-tokens "$OPEN_TOKENS" --max-tokens "$MAXT" \
              >"$RES/$key.chat.json" || true ;;
      *) log "unknown workload $wl (shared, chat)"; exit 2 ;;
    esac
    python3 -c 'import json,sys
r = json.load(open(sys.argv[1]))
print("[bench-prefix]   %d requests, %d errors, %s tok/s, TTFT p50 %s ms, cached share %s %s" % (
    r["requests"], r["errors"], r["tokens_per_s"], r["ttft_ms"]["all"]["p50"], r["cached_share"],
    r["first_errors"][:1]), file=sys.stderr)' "$RES/$key.$wl.json" || true
  done
  curl -s "$API/metrics" | grep -E '^tpnode_(prefix|kv_|redis|kv_cache)' >"$RES/$key.metrics.txt" || true
}

LAYOUT="$NODES node(s) x $TP rank(s) x $THREADS thread(s)"
log "model $MODEL; tpnode $LAYOUT; $SLOTS slots x $CTX ctx; $CLIENTS clients; $CORES cores"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
mode_list=()
for mode in $MODES; do
  case $mode in
    off|local)
      label="tpnode ${NODES}x${TP}, prefix cache $([ "$mode" = off ] && echo off || echo on)"
      mode_list+=("$mode:$label")
      log "== $label"
      if start_tpnode "$mode" --prefix-cache "$([ "$mode" = off ] && echo off || echo on)"; then
        run_workloads "$mode" "$TAG-$mode" 2
        stop_running
      else
        note "$label did not start: $(tail -3 "$LOGS/$mode.node0.log" | tr '\n' ' ')"
      fi ;;
    redis)
      mode_list+=("redis-a:tpnode ${NODES}x${TP} + Redis, first cluster (stores)"
                  "redis:tpnode ${NODES}x${TP} + Redis, second cluster (loads)")
      log "== tpnode + Redis KV tier"
      if ! command -v redis-server >/dev/null; then
        note "Redis rows not available: no redis-server on this machine (Debian: redis-server)"
        continue
      fi
      rport=$(free_ports 1)
      mkdir -p "$LOGS/redis"
      redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no \
        --dir "$LOGS/redis" >"$LOGS/redis.log" 2>&1 &
      pids+=($!); RPID=$!
      for _ in $(seq 1 50); do
        [ "$(redis-cli -p "$rport" ping 2>/dev/null)" = PONG ] && break; sleep 0.1
      done
      url=redis://127.0.0.1:$rport
      if start_tpnode redis-a --prefix-cache on --kv-cache-redis-url "$url"; then
        run_workloads redis-a "$TAG-redis" 1
        stop_running
        note "Redis after the first cluster: $(redis-cli -p "$rport" dbsize) keys, $(redis-cli -p "$rport" info memory | grep -m1 '^used_memory_human' | tr -d '\r')"
        if start_tpnode redis --prefix-cache on --kv-cache-redis-url "$url"; then
          run_workloads redis "$TAG-redis" 2
          stop_running
          note "Redis after both clusters: $(redis-cli -p "$rport" dbsize) keys, $(redis-cli -p "$rport" info memory | grep -m1 '^used_memory_human' | tr -d '\r')"
        else
          note "Redis second cluster did not start: $(tail -3 "$LOGS/redis.node0.log" | tr '\n' ' ')"
        fi
      else
        why=$(grep -h -i 'redis' "$LOGS"/redis-a.node*.log 2>/dev/null | head -1 || true)
        note "Redis rows not available: tpnode did not start with --kv-cache-redis-url (${why:-$(tail -2 "$LOGS/redis-a.node0.log" | tr '\n' ' ')})"
      fi
      kill -TERM "$RPID" 2>/dev/null || true; wait "$RPID" 2>/dev/null || true; forget "$RPID" ;;
    llama)
      LLAMA_BIN=$(tools/llama-cpp.sh)
      export LD_LIBRARY_PATH="$LLAMA_BIN:${LD_LIBRARY_PATH:-}"
      LLAMA_FLAGS="-t $LLAMA_THREADS --parallel $SLOTS -c $((CTX * SLOTS))"
      [ "${LLAMA_SWA_FULL:-1}" = 0 ] || LLAMA_FLAGS+=" --swa-full"
      LLAMA_FLAGS+=" ${LLAMA_SERVER_ARGS:-}"
      label="llama-server --parallel $SLOTS -t $LLAMA_THREADS (prompt cache)"
      mode_list+=("llama:$label")
      log "== $label"
      if start_llama; then
        run_workloads llama "$TAG-llama" 2
        stop_running
      else
        note "llama-server did not start: $(tail -3 "$LOGS/llama.log" | tr '\n' ' ')"
      fi ;;
    *) log "unknown mode $mode (off, local, redis, llama)"; exit 2 ;;
  esac
done

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -z "$(git status --porcelain 2>/dev/null)" ] || commit+=" (with uncommitted changes)"
MODE_LIST=$(printf '%s\n' "${mode_list[@]}") LAYOUT=$LAYOUT COMMIT=$commit \
LOAD_BEFORE=$LOAD_BEFORE LLAMA_FLAGS=${LLAMA_FLAGS:-} \
COMMAND="CLIENTS=$CLIENTS PREFIX_TOKENS=$PREFIX_TOKENS SECONDS_RUN=$SECS REQUESTS=$REQUESTS TURNS=$TURNS OPEN_TOKENS=$OPEN_TOKENS MAX_TOKENS=$MAXT PROBES=$PROBES SLOTS=$SLOTS CTX=$CTX NODES=$NODES TP=$TP THREADS=$THREADS MODES=\"$MODES\" WORKLOADS=\"$WORKLOADS\" tools/bench-prefix.sh $(basename "$MODEL")" \
python3 - "$RES" "$MODEL" <<'PY'
import json, os, platform, subprocess, sys, time
res, model = sys.argv[1:]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")),
           platform.processor())
try:
    llama = subprocess.run(["tools/llama-cpp.sh", "--version"], capture_output=True, text=True).stdout.strip()
except OSError:
    llama = ""
prompt = {}
try:
    prompt = json.load(open(os.path.join(res, "prompt.json")))
except (OSError, ValueError):
    pass
modes = [m.split(":", 1) for m in os.environ["MODE_LIST"].splitlines() if m]
notes = [l.strip() for l in open(os.path.join(res, "notes.txt")) if l.strip()]
if prompt:
    notes.insert(0, f"shared system prompt: {prompt['tokens']} tokens ({prompt['counted_by']})")
facts = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu,
         "cores": os.cpu_count(), "load_before": os.environ["LOAD_BEFORE"],
         "commit": os.environ["COMMIT"], "command": os.environ["COMMAND"],
         "model": os.path.basename(model), "layout": "tpnode " + os.environ["LAYOUT"],
         "llama_cpp": llama, "llama_server_flags": os.environ["LLAMA_FLAGS"], "modes": modes,
         "notes": notes}
json.dump(facts, open(os.path.join(res, "facts.json"), "w"), indent=1)
PY
for f in "$RES"/*.metrics.txt; do
  [ -s "$f" ] && log "$(basename "$f" .metrics.txt) /metrics: $(grep -E '^tpnode_(prefix|redis|kv_cache)' "$f" | tr '\n' ' ')"
done
$PY report --dir "$RES"
[ "$KEEP" = 1 ] && log "results kept in $RES"
exit 0
