#!/usr/bin/env bash
# Mesh fuzzing: builds the libFuzzer targets of the frame decoder and the handshake parser with
# clang (ASan + UBSan) in their own build folder and runs each for a bounded time. Fails on any
# crash, leak or sanitizer report. TPNODE_FUZZ_SECONDS (default 20) per target.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${TPNODE_FUZZ_BUILD_DIR:-build-fuzz}
SECONDS_PER_TARGET=${TPNODE_FUZZ_SECONDS:-20}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPNODE_DEBUG_INFO=lines \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DTPNODE_FUZZ=ON -DTPNODE_BUILD_BENCH=OFF -DTPNODE_WERROR=ON -DTPNODE_CUDA=OFF >/dev/null
cmake --build "$BUILD" --target frame_fuzz handshake_fuzz
for target in frame_fuzz handshake_fuzz; do
  corpus="$BUILD/corpus-$target"
  mkdir -p "$corpus"
  echo "[fuzz] $target for ${SECONDS_PER_TARGET}s"
  # Inputs that once crashed a target are replayed first, then fuzzing goes on from them.
  regressions="tests/mesh/fuzz/regressions/$target"
  "$BUILD/tests/mesh/fuzz/$target" -max_total_time="$SECONDS_PER_TARGET" -max_len=9000 \
    -print_final_stats=1 -artifact_prefix="$BUILD/$target-" "$corpus" "$regressions" 2>&1 |
    tail -n 12
done
echo "[fuzz] no crash"
