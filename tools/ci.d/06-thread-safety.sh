#!/usr/bin/env bash
# CI stage: Clang's thread-safety analysis (-Wthread-safety, as errors) over the mesh and
# collectives libraries, whose locks carry TP_GUARDED_BY / TP_REQUIRES annotations
# (common/thread_annotations.h, common/mutex.h). Own build folder, clang, -O0, only those
# targets; other warnings are left to the GCC build. A lock-discipline mistake fails the build.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${TPNODE_TSA_BUILD_DIR:-build-thread-safety}
JOBS=${TPNODE_JOBS:-2}
CXX_COMPILER=${TPNODE_CLANGXX:-$(command -v clang++-14 || command -v clang++)}
C_COMPILER=${TPNODE_CLANG:-$(command -v clang-14 || command -v clang)}
# A build type of our own, so that no -O2 -g is added to the flags below.
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=ThreadSafety \
  -DCMAKE_C_COMPILER="$C_COMPILER" -DCMAKE_CXX_COMPILER="$CXX_COMPILER" \
  -DTPNODE_CUDA=OFF -DTPNODE_WERROR=OFF -DTPNODE_BUILD_BENCH=OFF \
  "-DCMAKE_CXX_FLAGS=-O0 -Wthread-safety -Werror=thread-safety" >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target tpnode_mesh tpnode_collectives
echo "[thread-safety] mesh and collectives: no lock annotation violated"
