# shellcheck shell=bash
# Network-namespace "hosts" for tests and benchmarks (sourced, not run). N namespaces, each
# with one veth "NIC" to a bridge that lives in a namespace of its own, so the machine's own
# network is never touched. Only namespaces created here are touched; netns_delete removes
# them (the veth pairs go with them).
#
#   . tools/netns-lib.sh
#   netns_create PREFIX N SUBNET     # PREFIX: <= 9 characters, unique (e.g. tpx$$);
#                                     # node k (0-based) is namespace ${PREFIX}n$k at SUBNET.(k+1)
#                                     # on its eth0; returns 77 when namespaces cannot be created
#   netns_shape RATE [DELAY_MS]      # every link, both directions: tbf RATE (tc syntax, or
#                                     # "none"), plus netem DELAY_MS one-way when the kernel has
#                                     # netem (NETNS_NETEM=1 then; 0 when it has not: use
#                                     # tools/delay-proxy.py in front of each node instead)
#   netns_exec K CMD...              # run CMD in node K's namespace (foreground)
#   netns_spawn K LOG CMD...         # run CMD in node K's namespace in the background, stdin
#                                     # /dev/null, output to LOG; NETNS_PID is CMD's own pid (a
#                                     # signal to it reaches CMD, not a subshell); netns_delete
#                                     # kills (SIGKILL) every CMD still running
#   netns_proxies DELAY_MS PORT INNER_PORT SECONDS
#                                     # where netem is missing: tools/delay-proxy.py in node k's
#                                     # namespace forwards SUBNET.(k+1):PORT to :INNER_PORT with
#                                     # DELAY_MS each way (the server binds INNER_PORT, e.g. with
#                                     # --mesh-listen; clients dial PORT); pids in NETNS_PROXY_PIDS
#   netns_delete                     # kill what netns_spawn and netns_proxies started, remove
#                                     # every namespace netns_create made
#
# Shaping: both ends of each veth get the qdisc (the node's egress and the bridge port's egress),
# so every node has a full-duplex link of RATE and one-way delay DELAY_MS between any two nodes
# is 2 x DELAY_MS with netem on both ends: netns_shape puts DELAY_MS / 2 on each end.
# Needs root (CAP_NET_ADMIN).

NETNS_PREFIX=""
NETNS_COUNT=0
NETNS_SUBNET=""
NETNS_NETEM=0
NETNS_PROXY_PIDS=()
NETNS_SPAWNED_PIDS=()
NETNS_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NETNS_BURST=${TBF_BURST:-3000}  # bytes: about two full-size packets, the least tbf takes at MTU 1500

netns_create() {  # $1 prefix, $2 count, $3 subnet (a.b.c)
  NETNS_PREFIX=$1
  NETNS_COUNT=$2
  NETNS_SUBNET=$3
  local subnet=$3 k ns br=${1}b
  ip netns add "$br" 2>/dev/null || { NETNS_COUNT=0; return 77; }
  ip -n "$br" link add br0 type bridge && ip -n "$br" link set br0 up && ip -n "$br" link set lo up ||
    return 77
  for k in $(seq 0 $((NETNS_COUNT - 1))); do
    ns=${NETNS_PREFIX}n$k
    ip netns add "$ns" || return 77
    ip link add "${NETNS_PREFIX}v$k" type veth peer name "${NETNS_PREFIX}p$k" || return 77
    ip link set "${NETNS_PREFIX}v$k" netns "$ns"
    ip link set "${NETNS_PREFIX}p$k" netns "$br"
    ip -n "$ns" link set "${NETNS_PREFIX}v$k" name eth0
    ip -n "$br" link set "${NETNS_PREFIX}p$k" name "p$k"
    ip -n "$br" link set "p$k" master br0
    ip -n "$br" link set "p$k" up
    ip -n "$ns" addr add "$subnet.$((k + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
  done
  return 0
}

_netns_shape_dev() {  # $1 rate, $2 half delay (ms, or empty), $3 namespace, $4 device
  ip netns exec "$3" tc qdisc del dev "$4" root 2>/dev/null
  [ "$1" = none ] && [ -z "$2" ] && return 0
  if [ -n "$2" ] && [ "$NETNS_NETEM" = 1 ]; then
    local netem_rate=()
    [ "$1" != none ] && netem_rate=(rate "$1")
    ip netns exec "$3" tc qdisc add dev "$4" root netem delay "${2}ms" "${netem_rate[@]}" limit 10000 ||
      return 1
  elif [ "$1" != none ]; then
    ip netns exec "$3" tc qdisc add dev "$4" root tbf rate "$1" burst "$NETNS_BURST" limit 4mb ||
      return 1
  fi
  return 0
}

netns_shape() {  # $1 rate or none, $2 one-way delay in ms between two nodes (optional)
  local rate=$1 delay=${2:-} half="" k
  NETNS_NETEM=0
  if [ -n "$delay" ] && [ "$delay" != 0 ]; then
    if ip netns exec "${NETNS_PREFIX}n0" tc qdisc add dev eth0 root netem delay 1ms 2>/dev/null; then
      ip netns exec "${NETNS_PREFIX}n0" tc qdisc del dev eth0 root
      NETNS_NETEM=1
      half=$(python3 -c "print($delay / 2)")
    fi
  fi
  for k in $(seq 0 $((NETNS_COUNT - 1))); do
    _netns_shape_dev "$rate" "$half" "${NETNS_PREFIX}n$k" eth0 || return 1
    _netns_shape_dev "$rate" "$half" "${NETNS_PREFIX}b" "p$k" || return 1
  done
  return 0
}

netns_exec() {  # $1 node, then the command
  local k=$1
  shift
  ip netns exec "${NETNS_PREFIX}n$k" "$@"
}

netns_spawn() {  # $1 node, $2 log file, then the command
  local k=$1 out=$2
  shift 2
  # A simple command run with & forks once and ip execs CMD: $! is CMD.
  ip netns exec "${NETNS_PREFIX}n$k" "$@" </dev/null >"$out" 2>&1 &
  # shellcheck disable=SC2034  # read by the caller
  NETNS_PID=$!
  NETNS_SPAWNED_PIDS+=("$NETNS_PID")
}

netns_proxies() {  # $1 one-way delay ms, $2 public port, $3 inner port, $4 max seconds
  local k log
  for k in $(seq 0 $((NETNS_COUNT - 1))); do
    log=$(mktemp)
    ip netns exec "${NETNS_PREFIX}n$k" python3 "$NETNS_LIB_DIR/delay-proxy.py" \
      --listen "$NETNS_SUBNET.$((k + 1)):$2" --target "$NETNS_SUBNET.$((k + 1)):$3" \
      --delay-ms "$1" --max-seconds "$4" >"$log" 2>&1 &
    NETNS_PROXY_PIDS+=($!)
    for _ in $(seq 1 100); do grep -q ready "$log" && break; sleep 0.05; done
    grep -q ready "$log" || { cat "$log" >&2; rm -f "$log"; return 1; }
    rm -f "$log"
  done
  return 0
}

netns_stop_proxies() {
  local p
  for p in "${NETNS_PROXY_PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  NETNS_PROXY_PIDS=()
}

netns_delete() {
  local k p
  for p in "${NETNS_SPAWNED_PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  NETNS_SPAWNED_PIDS=()
  netns_stop_proxies
  [ -n "$NETNS_PREFIX" ] || return 0
  for k in $(seq 0 $((NETNS_COUNT - 1))); do ip netns del "${NETNS_PREFIX}n$k" 2>/dev/null; done
  ip netns del "${NETNS_PREFIX}b" 2>/dev/null
  return 0
}
