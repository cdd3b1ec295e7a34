#!/usr/bin/env bash
# The main job. For now: build tpnode and run a local 3-node mesh smoke test on loopback
# (three tpnode processes on 127.0.0.1-3 that form the mesh, print node 0's link table and exit).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh >/dev/null
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build --target tpnode
TPNODE=build/node/tpnode
echo "[quickstart] tpnode built: $($TPNODE --version)"

# Three free ports, one per node.
read -r p0 p1 p2 < <(python3 -c 'import socket
ss=[socket.socket() for _ in range(3)]
[s.bind(("127.0.0.1",0)) for s in ss]
print(*[s.getsockname()[1] for s in ss])')
peers="127.0.0.1:$p0,127.0.0.2:$p1,127.0.0.3:$p2"
logs=$(mktemp -d)
export TPNODE_CLUSTER_SECRET="quickstart-$RANDOM$RANDOM"
echo "[quickstart] starting a 3-node mesh on loopback: --peers $peers"
pids=()
for id in 2 1 0; do
  "$TPNODE" --node-id "$id" --peers "$peers" --connect-timeout 30 >"$logs/node$id.log" 2>&1 &
  pids[$id]=$!
done
status=0
for id in 0 1 2; do
  if ! wait "${pids[$id]}"; then
    echo "[quickstart] node $id failed:"
    cat "$logs/node$id.log"
    status=1
  fi
done
if ((status == 0)); then
  cat "$logs/node0.log"
  echo "[quickstart] all 3 nodes connected and exited cleanly"
fi
rm -rf "$logs"
exit $status
