#!/usr/bin/env bash
# Mesh benchmark on loopback: the mesh's round trips and bandwidth (tools/meshbench) next to a
# raw blocking TCP ping-pong (same tool, same run) and single-stream iperf3. Prints the raw
# figures and a Markdown table of ratios for docs/benchmarks.md.
#   tools/bench-mesh.sh [meshbench args...]      e.g. --iters 5000 --bw-mib 1024
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${TPNODE_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" --target meshbench >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"; [ -n "${iperf_pid:-}" ] && kill "$iperf_pid" 2>/dev/null || true' EXIT

port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
iperf3 -s -1 -B 127.0.0.1 -p "$port" >/dev/null 2>&1 &
iperf_pid=$!
sleep 0.5
iperf3 -c 127.0.0.1 -p "$port" -t 5 -P 1 -J >"$out/iperf.json"
wait "$iperf_pid" 2>/dev/null || true
iperf_pid=""

"$BUILD/tools/meshbench/meshbench" "$@" | tee "$out/meshbench.txt"

python3 - "$out/iperf.json" "$out/meshbench.txt" <<'PY'
import json, re, sys
iperf = json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 1e9
lat, bw = {}, {}
for line in open(sys.argv[2]):
    m = re.match(r"(\w+) (\d+) p50_us=([\d.]+) p99_us=([\d.]+)", line)
    if m: lat[(m[1], int(m[2]))] = (float(m[3]), float(m[4]))
    m = re.match(r"(\w+)_bw (\d+) gbit_s=([\d.]+)", line)
    if m: bw[(m[1], int(m[2]))] = float(m[3])
def size(n): return f"{n >> 20} MiB" if n >= 1 << 20 else (f"{n >> 10} KiB" if n >= 1024 else f"{n} B")
print(f"\niperf3 single stream: {iperf:.2f} Gbit/s\n")
print("| message | mesh p50 / p99 (us) | raw TCP p50 / p99 (us) | mesh/TCP p50 |")
print("|---|---|---|---|")
for n in sorted({k[1] for k in lat}):
    m, t = lat[("mesh", n)], lat[("tcp", n)]
    print(f"| {size(n)} | {m[0]:.1f} / {m[1]:.1f} | {t[0]:.1f} / {t[1]:.1f} | {m[0]/t[0]:.2f}x |")
print("\n| message | mesh Gbit/s | raw TCP Gbit/s | mesh/TCP | mesh/iperf3 |")
print("|---|---|---|---|---|")
for n in sorted({k[1] for k in bw}):
    m, t = bw[("mesh", n)], bw[("tcp", n)]
    print(f"| {size(n)} | {m:.2f} | {t:.2f} | {m/t:.2f} | {m/iperf:.2f} |")
PY
