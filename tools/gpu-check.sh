#!/usr/bin/env bash
# The GPU checks of issues 8 and 9 on a host with an NVIDIA GPU (a lent H200), as one prepared
# script. Two steps, because the GPU host may lack this project's build dependencies and can
# download nothing:
#
#   tools/gpu-check.sh bundle   here (CUDA toolkit + the Debian deps): builds the GPU targets in
#                               $TPNODE_BUILD_DIR (default build/, configured with CUDA) and
#                               packs them, stripped, with their shared libraries (not libc,
#                               libstdc++, libcuda or NCCL: the GPU host's own are used), the
#                               sha256 of every generated reference model
#                               (<build>/reference-models) and tests/data/reference into
#                               gpu-bundle/bundle.tar.xz (ignored by git; ~35 MB, under the
#                               device tool's 64 MiB carry limit). The models themselves are
#                               not carried: `run` and `test` generate them there with the
#                               bundle's make_test_model from tests/data/reference/models.txt
#                               (a few seconds) and refuse to go on when one's sha256 differs
#                               from the one built here. It also carries Debian's
#                               redis-server (when installed here) with every library it
#                               loads and its own ld-linux loader, started as bin/redis-server
#                               through that loader, so that the GPU host's libc does not matter
#                               (the Redis KV tier's GPU test; without it that test skips).
#                               TPNODE_GPU_BINARIES="tpnode gpu_cluster_test" packs only those
#                               binaries (and make_test_model), TPNODE_GPU_MODELS="llama-tiny-f32"
#                               has only those reference models generated there.
#   tools/gpu-check.sh run [OUTDIR]
#                               there: unpacks the bundle into a temporary folder and runs, each
#                               with its own time limit (about 5 minutes in all):
#                                 kernels.log   cuda_kernels_test (every kernel vs the CPU)
#                                 comm.log      device_comm_test (host, p2p, nccl transports)
#                                               and placement_test (--tp vs visible devices)
#                                 rank.log      cuda_rank_test (tp=1/tp=2 GPU ranks, stages, paged KV, vs
#                                               llama.cpp, CPU ranks, graphs on/off) and
#                                               gpu_cluster_test (tpnode processes, GPU ranks,
#                                               1x1 .. 2x2 layouts, pipeline stages, the
#                                               Redis KV tier through the bundle's redis-server)
#                                 bench.log     cuda_gemv_bench, device_allreduce_bench, tpnode
#                                               decode on a generated ~1B Q8_0 model (tp=1 with
#                                               and without CUDA graphs, tp=2 on GPU 0)
#                                 tptopo.json, tptopo.log   tptopo's GPU checks
#                                 machine.txt   nvidia-smi, topology, libraries
#                                 summary.txt   exit status and gtest totals of every step
#                               into OUTDIR (default $OUT, else gpu-check-out/).
#   tools/gpu-check.sh test BINARY [ARGS...]
#                               there: unpacks the bundle and runs one of its binaries (e.g.
#                               gpu_cluster_test --gtest_filter='*GpuKvTier*') with the
#                               environment of `run`; its exit status.
#
# With the device tool: `run` with carry ["gpu-bundle"], command `tools/gpu-check.sh run`,
# timeout_s ~420. Exit status: 0 when every step passed, 1 otherwise (see summary.txt).
set -uo pipefail
cd "$(dirname "$0")/.."

GPU_BINARIES=(tpnode tptopo make_test_model cuda_kernels_test device_comm_test cuda_rank_test
  gpu_cluster_test placement_test cuda_gemv_bench device_allreduce_bench)
if [ -n "${TPNODE_GPU_BINARIES:-}" ]; then
  read -r -a GPU_BINARIES <<<"$TPNODE_GPU_BINARIES"
  # The reference models are generated on the GPU host.
  [[ " ${GPU_BINARIES[*]} " == *" make_test_model "* ]] || GPU_BINARIES+=(make_test_model)
fi

# bundle_redis STAGE: Debian's redis-server into STAGE/redis (the binary, the libraries ldd names
# and the loader), started by STAGE/bin/redis-server through that loader with only those
# libraries. Nothing when redis-server is not installed here.
bundle_redis() {
  local stage=$1 server loader
  server=$(command -v redis-server) || {
    echo "[gpu-check] no redis-server here: the bundle carries none" >&2
    return 0
  }
  server=$(readlink -f "$server")
  mkdir -p "$stage/redis/lib"
  # Debian's redis-server is a link to redis-check-rdb: the name it runs under decides.
  cp "$server" "$stage/redis/redis-server"
  ldd "$server" | awk '/=> \// {print $3}' | while read -r lib; do cp -L "$lib" "$stage/redis/lib/"; done
  loader=$(ldd "$server" | awk '/ld-linux/ {print $1}')
  cp -L "$loader" "$stage/redis/lib/ld-linux.so"
  cat >"$stage/bin/redis-server" <<'EOS'
#!/bin/sh
# Debian's redis-server, with the libraries and the loader it was built against.
d=$(cd "$(dirname "$0")/../redis" && pwd)
exec "$d/lib/ld-linux.so" --library-path "$d/lib" "$d/redis-server" "$@"
EOS
  chmod +x "$stage/bin/redis-server"
}

bundle() {
  set -e
  local build=${TPNODE_BUILD_DIR:-build}
  if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S . -B "$build" -G Ninja -DTPNODE_CUDA=ON >/dev/null
  fi
  if ! grep -q '^CUDA_cudart_LIBRARY:FILEPATH=/' "$build/CMakeCache.txt"; then
    echo "[gpu-check] $build was configured without CUDA" >&2
    return 1
  fi
  local targets=() known
  known=$(cmake --build "$build" --target help)
  for t in "${GPU_BINARIES[@]}"; do
    if grep -q "^$t:" <<<"$known"; then targets+=("$t"); fi
  done
  cmake --build "$build" -j"${TPNODE_JOBS:-2}" --target "${targets[@]}" reference_models
  local stage
  stage=$(mktemp -d)
  mkdir -p "$stage/bin" "$stage/lib" "$stage/src/tests/data"
  for t in "${targets[@]}"; do
    local path
    path=$(find "$build" -type f -name "$t" -perm -u+x | head -1)
    strip -o "$stage/bin/$t" "$path"
    ldd "$path" | awk '/=> \// {print $3}' | while read -r lib; do
      case "$(basename "$lib")" in
        libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | ld-linux* | libcuda.so* | \
          libnccl.so* | libstdc++.so* | libgcc_s.so*) ;; # the GPU host's own (newer) ones
        *) cp -Ln "$lib" "$stage/lib/" 2>/dev/null || true ;;
      esac
    done
  done
  bundle_redis "$stage"
  # Only the models' sha256: unpack generates the models (regenerate_models).
  mkdir -p "$stage/reference-models"
  if [ -n "${TPNODE_GPU_MODELS:-}" ]; then
    for m in $TPNODE_GPU_MODELS; do cp "$build/reference-models/$m.gguf.sha256" "$stage/reference-models/"; done
  else
    cp "$build"/reference-models/*.gguf.sha256 "$stage/reference-models/"
  fi
  cp -r tests/data/reference "$stage/src/tests/data/"
  mkdir -p gpu-bundle
  tar -C "$stage" -cf - . | xz -T2 -6 >gpu-bundle/bundle.tar.xz
  rm -rf "$stage"
  du -sh gpu-bundle/bundle.tar.xz
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

# step NAME LIMIT_S LOG CMD...: runs CMD with a time limit, appends its output to LOG and a line
# to the summary.
step() {
  local name=$1 limit=$2 log=$3
  shift 3
  local t0=$SECONDS
  echo "===== $name: $*" >>"$log"
  timeout -k 5 "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  local totals
  totals=$(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\]|tests? ran' "$log" | tail -4 | tr '\n' ' ')
  printf '%-28s rc=%-3s %4ss  %s\n' "$name" "$rc" "$((SECONDS - t0))" "$totals" >>"$SUMMARY"
  [ "$rc" -eq 0 ] || FAILED=1
  return 0
}

decode_bench() {
  local bin=$1 model=$2 log=$3
  local ids
  ids=$(seq -s, 1 32)
  for args in "--tp 1" "--tp 1 --cuda-graphs off" "--tp 2 --devices 0,0"; do
    echo "== tpnode decode: $args" >>"$log"
    # shellcheck disable=SC2086
    timeout -k 5 120 "$bin" --model "$model" --backend cuda $args --prompt-ids "$ids" \
      --n-predict 256 --ignore-eos --json --ctx-size 1024 --parallel 1 2>>"$log.stderr" >>"$log" ||
      { echo "tpnode decode ($args) failed rc=$?" >>"$log"; FAILED=1; }
  done
  echo "== tpnode decode: --tp 1 with TPNODE_CUDA_PROFILE=1 (phase breakdown, graphs off)" >>"$log"
  TPNODE_CUDA_PROFILE=1 timeout -k 5 120 "$bin" --model "$model" --backend cuda --tp 1 \
    --prompt-ids "$ids" --n-predict 64 --ignore-eos --json --ctx-size 1024 --parallel 1 \
    2>>"$log.stderr" >/dev/null || { echo "profiled decode failed rc=$?" >>"$log"; FAILED=1; }
  grep -E '\[gpu\]|\[model\] rank|error|Error' "$log.stderr" | head -40 >>"$log"
}

# regenerate_models DIR: every reference model whose sha256 the bundle carries in DIR, generated
# by the bundle's make_test_model with its line of tests/data/reference/models.txt and checked
# against that sha256 (the tests compare against outputs recorded for exactly those bytes).
regenerate_models() {
  local dir=$1 list=$WORK/src/tests/data/reference/models.txt sum stem args want got
  for sum in "$dir"/*.gguf.sha256; do
    [ -e "$sum" ] || continue
    stem=$(basename "$sum" .gguf.sha256)
    args=$(awk -v s="$stem" '$1 == s { $1 = ""; print; exit }' "$list")
    if [ -z "$args" ]; then
      echo "[gpu-check] reference model $stem is not in tests/data/reference/models.txt"
      return 1
    fi
    # shellcheck disable=SC2086
    "$WORK/bin/make_test_model" --out "$dir/$stem.gguf" $args >/dev/null || {
      echo "[gpu-check] make_test_model failed for reference model $stem"
      return 1
    }
    want=$(cut -c1-64 "$sum")
    got=$(sha256sum "$dir/$stem.gguf" | cut -c1-64)
    if [ "$want" != "$got" ]; then
      echo "[gpu-check] reference model $stem generated here has sha256 $got, the build's has" \
        "$want: its recorded outputs would not apply; rebuild the bundle from this checkout"
      return 1
    fi
  done
}

# unpack: the bundle into a new temporary folder $WORK (the reference models generated there),
# and the environment its binaries run in.
unpack() {
  if [ ! -f gpu-bundle/bundle.tar.xz ]; then
    echo "[gpu-check] no gpu-bundle/bundle.tar.xz: run 'tools/gpu-check.sh bundle' first"
    return 1
  fi
  WORK=$(mktemp -d)
  tar -C "$WORK" -xJf gpu-bundle/bundle.tar.xz
  regenerate_models "$WORK/reference-models" || return 1
  NCCL_DIR=$(find_nccl || true)
  export LD_LIBRARY_PATH="$WORK/lib${NCCL_DIR:+:$NCCL_DIR}:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export TPNODE_SOURCE_DIR="$WORK/src" TPNODE_TEST_MODEL_DIR="$WORK/reference-models"
  export TPNODE_BIN="$WORK/bin/tpnode"  # the multi-process tests start it
  if [ -x "$WORK/bin/redis-server" ]; then export TPNODE_REDIS_SERVER="$WORK/bin/redis-server"; fi
}

# test_one BINARY [ARGS...]: one binary of the bundle, in its environment.
test_one() {
  unpack || return 1
  local bin=$1
  shift
  "$WORK/bin/$bin" "$@"
}

run_checks() {
  local out=${1:-${OUT:-gpu-check-out}}
  mkdir -p "$out"
  SUMMARY="$out/summary.txt"
  FAILED=0
  : >"$SUMMARY"
  if ! unpack >>"$SUMMARY"; then
    cat "$SUMMARY"
    return 1
  fi
  local work=$WORK nccl=$NCCL_DIR bin=$WORK/bin
  {
    date -u
    uname -a
    echo "NCCL library dir: ${nccl:-not found}"
    nvidia-smi || true
    nvidia-smi topo -m || true
    for b in "$bin"/*; do
      echo "== ldd $b"
      ldd "$b" | grep -E 'not found|cuda|nccl' || true
    done
  } >"$out/machine.txt" 2>&1
  # The ~1B Q8_0 decode model (2048 dim, 16 layers, ffn 8192, 32000 vocab: 1.1 B parameters),
  # generated while the tests run.
  local model=$work/llama-1b-q8_0.gguf
  ("$bin/make_test_model" --out "$model" --type q8_0 --dim 2048 --layers 16 --heads 32 \
    --kv-heads 8 --ffn 8192 --vocab 32000 >"$work/make_model.log" 2>&1) &
  local maker=$!
  [ -x "$bin/cuda_kernels_test" ] && step cuda_kernels_test 150 "$out/kernels.log" "$bin/cuda_kernels_test"
  [ -x "$bin/device_comm_test" ] && step device_comm_test 150 "$out/comm.log" "$bin/device_comm_test"
  # Out-of-bounds and misaligned accesses of every kernel (compute-sanitizer works on the
  # Firecracker machines; skipped where it is missing).
  if command -v compute-sanitizer >/dev/null 2>&1 && [ -x "$bin/cuda_kernels_test" ]; then
    step "memcheck cuda_kernels_test" 150 "$out/kernels.log" compute-sanitizer --tool memcheck \
      --error-exitcode 1 "$bin/cuda_kernels_test" --gtest_filter='-*LongContexts*'
  fi
  [ -x "$bin/cuda_rank_test" ] && step cuda_rank_test 300 "$out/rank.log" "$bin/cuda_rank_test"
  [ -x "$bin/gpu_cluster_test" ] && step gpu_cluster_test 240 "$out/rank.log" "$bin/gpu_cluster_test"
  [ -x "$bin/placement_test" ] && step placement_test 30 "$out/comm.log" "$bin/placement_test"
  local bench=$out/bench.log
  [ -x "$bin/cuda_gemv_bench" ] && step cuda_gemv_bench 60 "$bench" "$bin/cuda_gemv_bench"
  [ -x "$bin/device_allreduce_bench" ] &&
    step device_allreduce_bench 90 "$bench" "$bin/device_allreduce_bench"
  step tptopo 120 "$out/tptopo.log" sh -c "'$bin/tptopo' --json --gpu-mib 1024 --mem-mib 256 >'$out/tptopo.json'"
  wait "$maker" || { echo "make_test_model failed" >>"$SUMMARY"; FAILED=1; }
  if [ -f "$model" ]; then
    local t0=$SECONDS
    decode_bench "$bin/tpnode" "$model" "$bench"
    printf '%-28s %4ss\n' "tpnode decode (see bench.log)" "$((SECONDS - t0))" >>"$SUMMARY"
    grep '^{' "$bench" | grep decode_tps >>"$SUMMARY" || true
  fi
  echo "overall: $([ "$FAILED" -eq 0 ] && echo passed || echo FAILED)" >>"$SUMMARY"
  cat "$SUMMARY"
  return "$FAILED"
}

case "${1:-run}" in
  bundle) bundle ;;
  run) run_checks "${2:-}" ;;
  test)
    shift
    test_one "$@"
    ;;
  *)
    echo "usage: tools/gpu-check.sh bundle | run [OUTDIR] | test BINARY [ARGS...]" >&2
    exit 2
    ;;
esac
