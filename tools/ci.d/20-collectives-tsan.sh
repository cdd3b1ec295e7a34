#!/usr/bin/env bash
# CI stage: the in-process collective tests (ranks and nodes as threads, over FakeNetwork and over
# the real TCP mesh on loopback) under ThreadSanitizer, and the GPU ranks' device all-reduce
# against an emulated CUDA runtime (tests/collectives/cuda/emulated: CPU threads as streams).
# Separate build folder, only the collectives test targets (and what they depend on). The largest
# cases are skipped here (they run in the normal build); everything else runs. Any race report fails the stage.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${TPNODE_TSAN_BUILD_DIR:-build-tsan}
JOBS=${TPNODE_JOBS:-2}
TARGETS=(collectives_reduce_test collectives_local_group_test collectives_hierarchical_test
         collectives_hierarchical_ops_test collectives_tcp_test device_comm_emulated_test
         device_comm_emulated_nccl_test)
# -Wno-error=tsan: GCC warns that Boost.Asio's atomic_thread_fence (in the tpnode binary, which
# every test target depends on) is not supported by TSan; that is not our code under test.
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPNODE_DEBUG_INFO=lines -DTPNODE_WERROR=ON \
      -DCMAKE_CXX_FLAGS=-Wno-error=tsan -DTPNODE_SANITIZE=thread -DTPNODE_CUDA=OFF -DTPNODE_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS" --target "${TARGETS[@]}"
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
for t in "${TARGETS[@]}"; do
  echo "[tsan] $t"
  "$BUILD_DIR/tests/collectives/$t" --gtest_brief=1 \
      --gtest_filter='-*64MiB*:*r4_n16777216*:*r3_n8388611*:*LargeOdd*:*RingLargeRepeated*'
done
echo "[tsan] collectives: no data race reported"
