#!/usr/bin/env bash
# GPU checks of tptopo (issue 9) on a host with NVIDIA GPUs, e.g. a lent H200. Two steps, because
# the GPU host may lack this project's build dependencies and cannot download anything:
#
#   tools/gpu-check.sh bundle [DIR]   here (a machine with the CUDA toolkit and the deps): builds
#                                     tptopo with CUDA into build-gpu/ and copies it, stripped,
#                                     with its shared libraries (not libc, libstdc++, libcuda or
#                                     NCCL: the GPU host's own are used) into
#                                     DIR (default gpu-bundle/, ignored by git; ~8 MB).
#                                     TPNODE_BUILD_DIR=build reuses a CUDA-enabled build folder
#   tools/gpu-check.sh run [OUTDIR]   there: runs tptopo's checks with the bundle (or, without
#                                     one, builds tptopo there) and writes into OUTDIR (default
#                                     $OUT, else gpu-check-out/): machine.txt (nvidia-smi, topo),
#                                     tptopo.txt (table), tptopo.json, tptopo-tp.json (--tp = the
#                                     GPU count), tptopo.log (progress), summary.txt
#
# With the device tool: `run` with carry ["gpu-bundle"] and command `tools/gpu-check.sh run`
# (timeout_s ~300). NCCL comes from the GPU host: its libnccl.so.2 (the nvidia-nccl-cu13 wheel
# of the CUDA image, or the toolkit's) is found below and put on LD_LIBRARY_PATH.
# Exit status: 0 when every GPU check ran and passed, 1 otherwise (see summary.txt).
set -euo pipefail
cd "$(dirname "$0")/.."

bundle() {
  local dir=${1:-gpu-bundle}
  local build=${TPNODE_BUILD_DIR:-build-gpu}  # an existing CUDA-enabled build folder is reused
  if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S . -B "$build" -G Ninja -DTPNODE_CUDA=ON -DTPNODE_BUILD_TESTS=OFF \
      -DTPNODE_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES="90-real;90-virtual" >/dev/null
  fi
  if ! grep -q '^CUDA_cudart_LIBRARY:FILEPATH=/' "$build/CMakeCache.txt"; then
    echo "[gpu-check] $build was configured without CUDA" >&2
    return 1
  fi
  cmake --build "$build" -j"${TPNODE_JOBS:-2}" --target tptopo
  rm -rf "$dir" && mkdir -p "$dir/lib"
  strip -o "$dir/tptopo" "$build/tools/tptopo/tptopo"
  ldd "$build/tools/tptopo/tptopo" | awk '/=> \// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | ld-linux* | libcuda.so* | \
        libnccl.so* | libstdc++.so* | libgcc_s.so*) ;; # the GPU host's own (newer) ones
      *) cp -L "$lib" "$dir/lib/" ;;
    esac
  done
  du -sh "$dir"
}

find_nccl() {
  local candidates=()
  for py in python3 /opt/torch/.venv/bin/python3; do
    command -v "$py" >/dev/null 2>&1 || continue
    local d
    d=$("$py" -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' \
      2>/dev/null) && candidates+=("$d")
  done
  candidates+=(/usr/local/cuda/lib64 /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu)
  for d in "${candidates[@]}"; do
    if [ -e "$d/libnccl.so.2" ]; then
      echo "$d"
      return
    fi
  done
}

run_checks() {
  local out=${1:-${OUT:-gpu-check-out}}
  mkdir -p "$out"
  local bin
  if [ -x gpu-bundle/tptopo ]; then
    bin=gpu-bundle/tptopo
    export LD_LIBRARY_PATH="$PWD/gpu-bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  else
    echo "[gpu-check] no gpu-bundle/: building tptopo here" | tee "$out/summary.txt"
    bundle gpu-bundle >>"$out/summary.txt" 2>&1 || { cat "$out/summary.txt"; return 1; }
    bin=gpu-bundle/tptopo
    export LD_LIBRARY_PATH="$PWD/gpu-bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  local nccl
  nccl=$(find_nccl || true)
  [ -n "$nccl" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$nccl"
  {
    date -u
    uname -a
    echo "NCCL library dir: ${nccl:-not found}"
    nvidia-smi || true
    nvidia-smi topo -m || true
    ldd "$bin" || true
  } >"$out/machine.txt" 2>&1
  local gpus
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  [ "${gpus:-0}" -ge 1 ] || gpus=1
  set +e
  timeout 240 "$bin" --gpu-mib 1024 --mem-mib 256 >"$out/tptopo.txt" 2>"$out/tptopo.log"
  local code_table=$?
  timeout 240 "$bin" --json --gpu-mib 1024 --mem-mib 256 >"$out/tptopo.json" 2>>"$out/tptopo.log"
  local code_json=$?
  timeout 240 "$bin" --json --gpu-mib 256 --mem-mib 64 --tp "$gpus" >"$out/tptopo-tp.json" \
    2>>"$out/tptopo.log"
  local code_tp=$?
  {
    echo "tptopo exit codes: table $code_table, json $code_json, --tp $gpus json $code_tp"
    python3 - "$out/tptopo.json" <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:
    print("summary: could not read tptopo.json:", e)
    sys.exit(1)
h = j["hosts"][0]
c = h["cuda"]
print("verdict:", j["verdict"])
print("cuda available:", c["available"], "| reason:", c["reason"])
print("driver", c["driver_version"], "runtime", c["runtime_version"], "nccl", c["nccl_version"])
for d in c["devices"]:
    print("device", d["index"], d["name"], d["memory_bytes"], d["pci_bus_id"], "cc", d["compute_capability"])
for s in c["staging"]:
    print("staging gpu %d: h2d %.1f GB/s, d2h %.1f GB/s" % (s["device"], s["h2d_gbps"], s["d2h_gbps"]))
n = c["nccl"]
print("nccl: ran %s ok %s devices %d bytes %d time %.1f us algbw %.1f GB/s error %s" % (
    n["ran"], n["ok"], n["devices"], n["bytes"], n["time_us"], n["algbw_gbps"], n["error"]))
for ch in j["checks"]:
    if ch["name"].startswith("gpu"):
        print(ch["verdict"], ch["name"], ch["scope"], ch["detail"])
ok = c["available"] and n["ok"] and all(
    ch["verdict"] != "failed" for ch in j["checks"] if ch["name"].startswith("gpu"))
sys.exit(0 if ok else 1)
PY
  } >>"$out/summary.txt" 2>&1
  local status=$?
  set -e
  cat "$out/summary.txt"
  return $status
}

case "${1:-run}" in
  bundle) bundle "${2:-gpu-bundle}" ;;
  run) run_checks "${2:-}" ;;
  *)
    echo "usage: tools/gpu-check.sh bundle [DIR] | run [OUTDIR]" >&2
    exit 2
    ;;
esac
