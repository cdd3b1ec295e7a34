#!/usr/bin/env bash
# Fuzzes the OpenAI request parser (tests/node/api/fuzz/openai_request_fuzz.cc) with libFuzzer
# (clang, ASan + UBSan) in its own build folder for a bounded time. Fails on any crash, leak or
# sanitizer report. TPNODE_FUZZ_SECONDS (default 20). Seeds: a few valid requests of each
# endpoint, and a dictionary of the field names. Inputs that once failed
# (tests/node/api/fuzz/regressions) are replayed first, then fuzzing goes on from them.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${TPNODE_FUZZ_BUILD_DIR:-build-fuzz}
SECONDS_TO_RUN=${TPNODE_FUZZ_SECONDS:-20}
if ! command -v clang++ >/dev/null; then
  echo "[api-fuzz] clang++ not found; skipped" >&2
  exit 0
fi
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPNODE_DEBUG_INFO=lines \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DTPNODE_FUZZ=ON -DTPNODE_BUILD_BENCH=OFF -DTPNODE_WERROR=ON -DTPNODE_CUDA=OFF >/dev/null
cmake --build "$BUILD" --target openai_request_fuzz
corpus="$BUILD/corpus-openai_request_fuzz"
mkdir -p "$corpus"
# Byte 0: 0 = /v1/completions, 1 = /v1/chat/completions; then the body.
printf '\000{"prompt": "Hello", "max_tokens": 8, "temperature": 0.5, "stop": ["a"]}' \
  >"$corpus/seed-completion"
printf '\000{"prompt": [1, 2, 3], "logprobs": 2, "taps": [{"layer": 1, "point": "residual"}]}' \
  >"$corpus/seed-completion-taps"
printf '\001{"messages": [{"role": "user", "content": "Hi"}], "stream": true, "stream_options": {"include_usage": true}}' \
  >"$corpus/seed-chat"
printf '\001{"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}], "logprobs": true, "top_logprobs": 3, "seed": 7}' \
  >"$corpus/seed-chat-parts"
echo "[api-fuzz] openai_request_fuzz for ${SECONDS_TO_RUN}s"
"$BUILD/tests/node/api/fuzz/openai_request_fuzz" -max_total_time="$SECONDS_TO_RUN" \
  -max_len=4096 -rss_limit_mb=2048 -print_final_stats=1 \
  -dict=tests/node/api/fuzz/openai_request.dict -artifact_prefix="$BUILD/openai_request_fuzz-" \
  "$corpus" tests/node/api/fuzz/regressions 2>&1 | tail -n 12
echo "[api-fuzz] no crash"
