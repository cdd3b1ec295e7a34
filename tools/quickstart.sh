#!/usr/bin/env bash
# The main job. For now: build tpnode and run a local 3-node mesh smoke test on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh >/dev/null
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build --target tpnode
echo "[quickstart] tpnode built: $(build/node/tpnode --version)"
