#!/usr/bin/env bash
# Split plans over shaped links: 4 tpnode nodes, each in its own network namespace on a bridge
# (tools/netns-lib.sh), every link shaped to RATE (tc tbf) with DELAY ms of one-way delay between
# nodes (tc netem where the kernel has it; else tools/delay-proxy.py in front of every node's
# mesh port and every ggml-rpc-server, and the run says so). For each delay, every plan serves
# the OpenAI API from node 0 and tools/loadtest.py (run inside node 0's namespace, so the API
# traffic never crosses a shaped link) measures tokens/s and time to first token with 1 client
# (decode at batch 1) and with 16 concurrent clients:
#   tensor   4 nodes x 1 rank, --split tensor (two all-reduces per layer over the links)
#   pp4      4 nodes x 1 rank, --pp 4 (one stage per node)
#   pp2x2    4 nodes x 1 rank, --pp 2 (2 stages of 2 nodes: tensor inside a stage, over links)
#   pp2tp2   2 nodes x 2 ranks, --pp 2 (2 stages, tensor inside each node; nodes 2-3 idle)
#   auto     4 nodes x 1 rank, --split auto (the plan it picked, and the rank figures it measured,
#            are read from node 0's log)
#   llama    llama.cpp RPC: ggml-rpc-server (1 thread) in nodes 1-3, llama-server in node 0
#            with --rpc to the three and -ngl 99 (its layer split across the servers)
# Every tpnode rank and every rpc-server has one thread; on a machine with fewer cores than
# ranks, node k (4-node plans) and rpc-server k are pinned to core k mod NPROC with taskset, and
# the two 2-rank nodes of pp2tp2 are not pinned (PIN=0 turns pinning off).
#
#   tools/bench-pipeline.sh [MODEL.gguf]   (as root) default model: the 0.9 B Llama Q8_0 that
#                                           tools/bench-model.sh writes into
#                                           ${TPNODE_BENCH_MODELS:-build/bench-models}
#   env: DELAYS ("1 5", ms one-way), RATE (1gbit), PLANS ("tensor pp4 pp2x2 pp2tp2 auto llama"),
#        CLIENTS ("1 16"), SECONDS_1 (30), SECONDS_N (45), MAX_TOKENS_1 (64), MAX_TOKENS_N (32),
#        CTX (512, per slot), OUT (build/bench-pipeline.jsonl), PIN (1), LLAMA_CPP_BIN
# Writes one JSON object per measurement to OUT (and --split auto's prediction block, with the
# rank figures every node measured, to OUT less .jsonl plus -auto-<delay>ms.log) and prints a
# markdown table (docs/benchmarks.md) on stdout: tokens/s, TTFT p50 / p99, the ratio to llama.cpp
# RPC and to the best 4-node plan (tensor, pp4, pp2x2: the plans --split auto chooses among on 4
# nodes of 1 rank; pp2tp2 runs on 2 nodes and is shown beside them, not counted as the best) at
# the same delay and load, and what --split auto picked. Each delay's link row has the round
# trip node 0's mesh measures to node 1 (through the proxy where there is one) and the iperf3
# goodput of the shaped link (TBF_BURST bytes of burst, default 3000). A batch-1 run
# lasts SECONDS_1 plus the request in flight at the end; 16 clients likewise.
# Exit 77 without namespaces.
set -uo pipefail
export TPNODE_CLUSTER_SECRET=${TPNODE_CLUSTER_SECRET:-$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')}
cd "$(dirname "$0")/.." || exit 1
. tools/netns-lib.sh
BUILD=${TPNODE_BUILD_DIR:-build}
BIN=${TPNODE_BIN:-$BUILD/node/tpnode}
MODEL=${1:-${TPNODE_BENCH_MODELS:-$BUILD/bench-models}/llama-0.9b-q8_0.gguf}
DELAYS=${DELAYS:-"1 5"}
RATE=${RATE:-1gbit}
PLANS=${PLANS:-"tensor pp4 pp2x2 pp2tp2 auto llama"}
CLIENTS=${CLIENTS:-"1 16"}
SECS1=${SECONDS_1:-30}; SECSN=${SECONDS_N:-45}
MAXT1=${MAX_TOKENS_1:-64}; MAXTN=${MAX_TOKENS_N:-32}
CTX=${CTX:-512}
OUT=${OUT:-$BUILD/bench-pipeline.jsonl}
PIN=${PIN:-1}
SLOTS=16
for c in $CLIENTS; do [ "$c" -gt "$SLOTS" ] && SLOTS=$c; done
[ -x "$BIN" ] || { echo "no $BIN: build the tpnode target first" >&2; exit 1; }
[ -s "$MODEL" ] || { echo "no $MODEL: tools/bench-model.sh writes it (or pass a GGUF)" >&2; exit 1; }
if [[ " $PLANS " == *" llama "* ]]; then
  LLAMA_BIN=$(tools/llama-cpp.sh) || exit 1
  export LD_LIBRARY_PATH="$LLAMA_BIN:${LD_LIBRARY_PATH:-}"
fi
LOGS=$(mktemp -d)
cleanup() {
  netns_delete
  rm -rf "$LOGS"
}
trap cleanup EXIT INT TERM
log() { echo "[bench-pipeline] $*" >&2; }

netns_create "tpb$$" 4 10.79.0
case $? in 0) ;; 77) echo "skipped: cannot create network namespaces"; exit 77 ;; *) exit 1 ;; esac
NPROC=$(nproc)
MESH=9700; RPC=50060; API=18090
load1() { cut -d' ' -f1 /proc/loadavg; }
emit() { echo "$1" >>"$OUT"; log "$1"; }
pin() {  # $1 node (or rpc-server) index: the taskset prefix
  [ "$PIN" = 1 ] && [ "$NPROC" -lt 4 ] && echo "taskset -c $(($1 % NPROC))"
}
wait_health() {  # $1 port; $2 pid of node 0 (gives up when it exits)
  for _ in $(seq 1 1500); do
    [ "$(netns_exec 0 curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1/health")" = 200 ] &&
      return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.2
  done
  return 1
}
stop_all() {  # $@ pids: node 0 (or llama-server) first; it stops before the rest get TERM
  local p first=1
  for p in "$@"; do
    if [ "$first" = 1 ]; then
      kill -TERM "$p" 2>/dev/null
      for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
      first=0
    fi
    kill -TERM "$p" 2>/dev/null
  done
  for p in "$@"; do
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null
  done
}

# One server per plan and delay; every client count runs against it.
serve_tpnode() {  # $1 plan, $2 delay; sets SERVER_PIDS, PLAN_TEXT
  local plan=$1 nodes=4 tp=1 args=() peers="" k
  case $plan in
    tensor) args=(--split tensor) ;;
    pp4) args=(--pp 4) ;;
    pp2x2) args=(--pp 2) ;;
    pp2tp2) nodes=2; tp=2; args=(--pp 2) ;;
    auto) args=(--split auto) ;;
    *) log "unknown plan $plan"; return 1 ;;
  esac
  for k in $(seq 0 $((nodes - 1))); do peers+="${peers:+,}$NETNS_SUBNET.$((k + 1)):$MESH"; done
  local common=(--model "$MODEL" --peers "$peers" --tp "$tp" --threads 1 --parallel "$SLOTS"
                --ctx-size "$CTX" --connect-timeout 120 --log-level info "${args[@]}")
  SERVER_PIDS=()
  for k in $(seq $((nodes - 1)) -1 0); do
    local extra=() p=()
    [ "$NETNS_NETEM" = 1 ] || extra=(--mesh-listen "$NETNS_SUBNET.$((k + 1)):$((MESH + 1))")
    [ "$k" = 0 ] && extra+=(--port "$API")
    [ "$nodes" = 4 ] && read -r -a p <<<"$(pin "$k")"
    netns_spawn "$k" "$LOGS/${plan}_$2_n$k.log" "${p[@]}" "$BIN" "${common[@]}" --node-id "$k" \
      "${extra[@]}"
    SERVER_PIDS=("$NETNS_PID" "${SERVER_PIDS[@]}")
  done
  wait_health "$API" "${SERVER_PIDS[0]}" || { tail -5 "$LOGS/${plan}_$2_n0.log" >&2; return 1; }
  # The plan node 0 runs: --split auto's " chosen: <plan>" line (node/split_plan.cc), else its
  # pipeline plan line, else the tensor shard plan.
  PLAN_TEXT=$(grep -m1 -E "^ chosen: " "$LOGS/${plan}_$2_n0.log" | sed -E 's/^ chosen: //')
  # --split auto's prediction block, kept beside OUT (the logs are removed at exit).
  [ "$plan" = auto ] && grep -A 8 "\[driver\] split auto" "$LOGS/${plan}_$2_n0.log" \
    >"${OUT%.jsonl}-auto-$2ms.log"
  RATES_TEXT=$(grep -m1 -oE "rank: [0-9.]+ GB/s read, [0-9.]+ GMAC/s( \([^)]*\))?" \
               "$LOGS/${plan}_$2_n0.log" | sed -E 's/^rank: //')
  [ -n "$PLAN_TEXT" ] ||
    PLAN_TEXT=$(grep -iE "pipeline plan|shard plan for" "$LOGS/${plan}_$2_n0.log" |
                head -1 | sed -E 's/^.*\[model\] //; s/^.*\] //; s/:$//')
}

serve_llama() {  # $1 delay; sets SERVER_PIDS, PLAN_TEXT
  local k servers="" p=()
  SERVER_PIDS=()
  for k in 1 2 3; do
    local port=$RPC
    [ "$NETNS_NETEM" = 1 ] || port=$((RPC + 1))
    read -r -a p <<<"$(pin "$k")"
    netns_spawn "$k" "$LOGS/llama_$1_rpc$k.log" "${p[@]}" "$LLAMA_BIN/ggml-rpc-server" \
      -H "$NETNS_SUBNET.$((k + 1))" -p "$port" -t 1
    SERVER_PIDS+=("$NETNS_PID")
    servers+="${servers:+,}$NETNS_SUBNET.$((k + 1)):$RPC"
  done
  sleep 1
  read -r -a p <<<"$(pin 0)"
  netns_spawn 0 "$LOGS/llama_$1_server.log" "${p[@]}" "$LLAMA_BIN/llama-server" -m "$MODEL" \
    --rpc "$servers" -ngl 99 -t 1 --parallel "$SLOTS" -c $((CTX * SLOTS)) --host 127.0.0.1 \
    --port "$API"
  SERVER_PIDS=("$NETNS_PID" "${SERVER_PIDS[@]}")
  wait_health "$API" "${SERVER_PIDS[0]}" || { tail -5 "$LOGS/llama_$1_server.log" >&2; return 1; }
  PLAN_TEXT="llama.cpp RPC: 3 ggml-rpc-server x 1 thread, layers split by llama.cpp"
  RATES_TEXT=""
}

# iperf3 goodput node 0 -> node 1 across the shaped link (3 s, no proxy), in bits/s.
measure_goodput() {
  command -v iperf3 >/dev/null || { echo 0; return; }
  netns_spawn 1 /dev/null iperf3 -s -1 -p 5299
  local sp=$NETNS_PID
  sleep 0.5
  netns_exec 0 iperf3 -c "$NETNS_SUBNET.2" -p 5299 -t 3 -J 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"])' ||
    echo 0
  wait "$sp" 2>/dev/null
}

# The round trip node 0 measures to node 1 at formation (mesh-only mode), in microseconds.
measure_rtt() {
  local peers="$NETNS_SUBNET.1:$MESH,$NETNS_SUBNET.2:$MESH" l0=() l1=()
  [ "$NETNS_NETEM" = 1 ] || { l0=(--mesh-listen "$NETNS_SUBNET.1:$((MESH + 1))");
                              l1=(--mesh-listen "$NETNS_SUBNET.2:$((MESH + 1))"); }
  netns_spawn 1 /dev/null "$BIN" --node-id 1 --peers "$peers" "${l1[@]}" --connect-timeout 30
  local w=$NETNS_PID
  netns_exec 0 timeout 60 "$BIN" --node-id 0 --peers "$peers" "${l0[@]}" --connect-timeout 30 \
    </dev/null 2>/dev/null | awk '$1 == "node" && $2 == "0" && $3 == "-" { print $4 }' | tail -1
  wait "$w" 2>/dev/null
}

: >"$OUT"
emit "{\"kind\":\"setup\",\"model\":\"$(basename "$MODEL")\",\"rate\":\"$RATE\",\"nproc\":$NPROC,\"pin\":$PIN,\"date\":\"$(date -u +%FT%TZ)\",\"load1\":$(load1)}"
for delay in $DELAYS; do
  netns_stop_proxies
  netns_shape "$RATE" "$delay" || { log "tc failed"; exit 1; }
  how="netem"
  if [ "$NETNS_NETEM" != 1 ]; then
    how="delay-proxy"
    log "tc netem is not available in this kernel: tbf $RATE on every link, ${delay} ms one-way from tools/delay-proxy.py in front of every node"
    netns_proxies "$delay" "$MESH" $((MESH + 1)) 86400 || exit 1
    netns_proxies "$delay" "$RPC" $((RPC + 1)) 86400 || exit 1
  fi
  emit "{\"kind\":\"link\",\"delay_ms\":$delay,\"rate\":\"$RATE\",\"burst\":$NETNS_BURST,\"delay_by\":\"$how\",\"rtt_us\":$(measure_rtt),\"iperf3_bps\":$(measure_goodput)}"
  for plan in $PLANS; do
    log "delay $delay ms: $plan"
    if [ "$plan" = llama ]; then serve_llama "$delay"; else serve_tpnode "$plan" "$delay"; fi ||
      { why=$(cat "$LOGS/${plan}_${delay}_n0.log" "$LOGS/llama_${delay}_server.log" 2>/dev/null | tail -n 3 |
              grep -v '^==' | tr -d '"\\' | tr '\n' ' ' | cut -c1-300)
        emit "{\"kind\":\"run\",\"delay_ms\":$delay,\"plan\":\"$plan\",\"error\":\"server did not start: $why\"}";
        stop_all "${SERVER_PIDS[@]}"; continue; }
    for c in $CLIENTS; do
      secs=$SECS1; maxt=$MAXT1
      [ "$c" -gt 1 ] && { secs=$SECSN; maxt=$MAXTN; }
      before=$(load1)
      res=$(netns_exec 0 python3 tools/loadtest.py --base "http://127.0.0.1:$API" --clients "$c" \
            --seconds "$secs" --max-tokens "$maxt" --json 2>/dev/null | tail -1)
      [ -n "$res" ] || res='{"error":"loadtest failed"}'
      emit "$(python3 -c 'import json,sys
r = json.loads(sys.argv[1]); r.pop("rss_kib_before", None); r.pop("rss_kib_after", None)
r.update(kind="run", delay_ms=float(sys.argv[2]), plan=sys.argv[3], clients_run=int(sys.argv[4]),
         max_tokens=int(sys.argv[5]), plan_text=sys.argv[6], load1_before=float(sys.argv[7]),
         load1_after=float(sys.argv[8]))
if sys.argv[9]: r["rank_rates"] = sys.argv[9]
print(json.dumps(r))' "$res" "$delay" "$plan" "$c" "$maxt" "$PLAN_TEXT" "$before" "$(load1)" \
        "$RATES_TEXT")"
    done
    stop_all "${SERVER_PIDS[@]}"
  done
done
emit "{\"kind\":\"done\",\"date\":\"$(date -u +%FT%TZ)\",\"load1\":$(load1)}"

python3 - "$OUT" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
setup = next(r for r in rows if r["kind"] == "setup")
links = {r["delay_ms"]: r for r in rows if r["kind"] == "link"}
runs = [r for r in rows if r["kind"] == "run" and "tokens_per_s" in r]
failed = [r for r in rows if r["kind"] == "run" and "tokens_per_s" not in r]
# The plans --split auto chooses among (4 nodes x 1 rank); pp2tp2 is another cluster (2 x 2).
four_node = ("tensor", "pp4", "pp2x2")
names = {"tensor": "tensor-only 4x1", "pp4": "pipeline 4 stages", "pp2x2": "hybrid 2 stages x 2 nodes",
         "pp2tp2": "hybrid 2 stages x tp 2 (2 nodes)", "auto": "--split auto", "llama": "llama.cpp RPC"}
print(f"Model {setup['model']}, links {setup['rate']}; {setup['nproc']} cores "
      f"(pinning {'on' if setup['pin'] else 'off'}); started {setup['date']}, load {setup['load1']}.\n")
print("| delay (RTT) | clients | plan | tok/s | TTFT p50 ms | TTFT p99 ms | vs llama.cpp RPC | vs best 4-node plan | load |")
print("|---|---|---|---|---|---|---|---|---|")
summary = []
for d in sorted({r["delay_ms"] for r in runs}):
    for c in sorted({r["clients_run"] for r in runs}):
        group = [r for r in runs if r["delay_ms"] == d and r["clients_run"] == c]
        llama = next((r["tokens_per_s"] for r in group if r["plan"] == "llama"), None)
        tp = [r for r in group if r["plan"] in four_node]
        best = max(tp, key=lambda r: r["tokens_per_s"]) if tp else None
        link = links.get(d, {})
        for r in group:
            vs_l = f"{r['tokens_per_s'] / llama:.2f}x" if llama else "-"
            vs_b = f"{r['tokens_per_s'] / best['tokens_per_s']:.2f}x" if best and r["plan"] != "llama" else "-"
            err = f" ({r['errors']} errors)" if r.get("errors") else ""
            mbit = f", {link['iperf3_bps'] / 1e6:.0f} Mbit/s" if link.get("iperf3_bps") else ""
            print(f"| {d:g} ms ({link.get('rtt_us', '?')} us{mbit}, {link.get('delay_by', '?')}) | {c} | "
                  f"{names.get(r['plan'], r['plan'])} | {r['tokens_per_s']}{err} | {r['ttft_p50_ms']} | "
                  f"{r['ttft_p99_ms']} | {vs_l} | {vs_b} | {r['load1_before']}-{r['load1_after']} |")
        auto = next((r for r in group if r["plan"] == "auto"), None)
        two = next((r for r in group if r["plan"] == "pp2tp2"), None)
        if best:
            s = f"- {d:g} ms, {c} client(s): best 4-node plan {names[best['plan']]}"
            if llama:
                s += f" at {best['tokens_per_s'] / llama:.2f}x llama.cpp RPC"
            if auto:
                s += (f"; --split auto picked \"{auto['plan_text']}\" at "
                      f"{auto['tokens_per_s'] / best['tokens_per_s']:.2f}x the best 4-node plan")
                if auto.get("rank_rates"):
                    s += f" (rank: {auto['rank_rates']})"
            if two:
                s += (f"; 2 nodes x tp 2 (not a 4-node plan) at "
                      f"{two['tokens_per_s'] / best['tokens_per_s']:.2f}x it")
            summary.append(s)
for r in failed:
    summary.append(f"- {r['delay_ms']:g} ms, {names.get(r['plan'], r['plan'])}: {r.get('error', 'failed')}")
print()
print("\n".join(summary))
PY
