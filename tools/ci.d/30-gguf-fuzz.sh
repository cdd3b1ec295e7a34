#!/usr/bin/env bash
# Fuzzes the GGUF parser (tests/model/gguf_fuzz.cc) with libFuzzer for ~30 s.
# clang, separate build dir (build-fuzz/), only that target. Seeds: a few generated models.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${TPNODE_GGUF_FUZZ_BUILD_DIR:-build-fuzz-gguf}  # own dir: other CXX flags than build-fuzz
SECONDS_TO_RUN=${TPNODE_FUZZ_SECONDS:-30}
if ! command -v clang++ >/dev/null; then
  echo "[gguf-fuzz] clang++ not found; skipped" >&2
  exit 0
fi
FLAGS="-fsanitize=fuzzer-no-link,address -fno-omit-frame-pointer"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPNODE_FUZZ=ON \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_CXX_FLAGS="$FLAGS" -DCMAKE_C_FLAGS="$FLAGS" >/dev/null
cmake --build "$BUILD" -j "$(nproc)" --target gguf_fuzz make_test_model
CORPUS="$BUILD/gguf-corpus"
mkdir -p "$CORPUS"
# Seeds: small generated models of a few types and architectures.
"$BUILD/tools/make_test_model" --out "$CORPUS/llama_q8.gguf" --dim 64 --heads 2 --kv-heads 1 \
  --ffn 64 --layers 1 --vocab 260 --type q8_0 >/dev/null
"$BUILD/tools/make_test_model" --out "$CORPUS/qwen2_f16.gguf" --arch qwen2 --dim 32 --heads 2 \
  --kv-heads 2 --ffn 32 --layers 1 --vocab 260 --type f16 >/dev/null
echo "[gguf-fuzz] fuzzing for ${SECONDS_TO_RUN}s"
ASAN_OPTIONS=detect_leaks=1 "$BUILD/tests/model/gguf_fuzz" -max_total_time="$SECONDS_TO_RUN" \
  -max_len=65536 -rss_limit_mb=2048 -print_final_stats=1 "$CORPUS" 2>&1 | tail -n 12
echo "[gguf-fuzz] ok"
