#!/usr/bin/env bash
# CI stage: clang-tidy with the agreed checks (.clang-tidy: a few bug finders, warnings as
# errors) and Clang's thread-safety analysis (-Wthread-safety, reported as the check
# clang-diagnostic-thread-safety-*: guarded members touched without their common/mutex.h lock,
# TP_REQUIRES functions called without it) over the product sources (node/ mesh/ collectives/
# model/ common/; CUDA off, so model/cuda and collectives/cuda are not checked). node/api/ is left
# out: its Boost.Asio coroutines do not parse with clang 14 over libstdc++ 12 (no
# std::coroutine_traits). It only needs the compile commands of a clang CUDA-off configure (own
# folder, nothing is built). About 145 files: 2.5-6 minutes on 2 cores (153-345 s measured).
# TPNODE_TIDY_FILES: a regex (relative to the root) to check fewer files (e.g. 'mesh/').
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${TPNODE_TIDY_BUILD_DIR:-build-tidy}
JOBS=${TPNODE_JOBS:-2}
TIDY=${CLANG_TIDY:-$(command -v clang-tidy-14 || command -v clang-tidy)}
RUN_TIDY=${RUN_CLANG_TIDY:-$(command -v run-clang-tidy-14 || command -v run-clang-tidy)}
# TPNODE_PCH off: the compile commands of product sources that tests compile again would name a
# precompiled header that is never built here.
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPNODE_DEBUG_INFO=lines \
  -DCMAKE_C_COMPILER="$(command -v clang-14 || command -v clang)" \
  -DCMAKE_CXX_COMPILER="$(command -v clang++-14 || command -v clang++)" \
  -DTPNODE_CUDA=OFF -DTPNODE_BUILD_BENCH=OFF -DTPNODE_WERROR=OFF -DTPNODE_PCH=OFF >/dev/null
FILES=${TPNODE_TIDY_FILES:-'(?!node/api/)(node|mesh|collectives|model|common)/'}
LOG="$BUILD/clang-tidy.log"
# run-clang-tidy exits non-zero when a check fires (WarningsAsErrors); the log keeps the details.
if ! "$RUN_TIDY" -clang-tidy-binary "$TIDY" -p "$BUILD" -j "$JOBS" -quiet \
    -extra-arg=-Wthread-safety \
    "^$ROOT/${FILES}.*\.(cc|cpp)\$" >"$LOG" 2>&1; then
  grep -E -A3 '(warning|error):' "$LOG" | grep -v 'warnings generated' || tail -40 "$LOG"
  echo "[tidy] clang-tidy found problems (full log: $LOG)"
  exit 1
fi
echo "[tidy] product sources: no finding, no lock annotation violated"
