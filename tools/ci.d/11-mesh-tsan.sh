#!/usr/bin/env bash
# ThreadSanitizer run of the mesh's concurrent data path: the in-process mesh tests (nodes as
# threads over loopback) and the link tests, built with -fsanitize=thread in their own build
# folder (only those targets). Fails on any data race report.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${TPNODE_TSAN_BUILD_DIR:-build-tsan}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPNODE_SANITIZE=thread \
  -DTPNODE_DEBUG_INFO=lines -DTPNODE_BUILD_BENCH=OFF -DTPNODE_WERROR=ON -DTPNODE_CUDA=OFF \
  -DCMAKE_CXX_FLAGS=-Wno-error=tsan >/dev/null
cmake --build "$BUILD" --target mesh_test link_test
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
"$BUILD/tests/mesh/mesh_test" --gtest_brief=1
"$BUILD/tests/mesh/link_test" --gtest_brief=1
echo "[tsan] mesh: no data race reported"
