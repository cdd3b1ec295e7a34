#!/usr/bin/env bash
# CI stage: libFuzzer on the tokenizer (hostile vocabularies and text) for a bounded time,
# with ASan + UBSan. Separate clang build folder, one small target. Any crash, sanitizer
# report or broken round trip fails the stage.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${TPNODE_FUZZ_BUILD_DIR:-build-fuzz}
SECONDS_BUDGET=${TPNODE_TOKENIZER_FUZZ_SECONDS:-20}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPNODE_DEBUG_INFO=lines -DTPNODE_WERROR=ON \
      -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DTPNODE_FUZZ=ON \
      -DTPNODE_CUDA=OFF -DTPNODE_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD_DIR" -j "${TPNODE_JOBS:-2}" --target tokenizer_fuzz
corpus="$BUILD_DIR/corpus/tokenizer"
mkdir -p "$corpus"
# Seeds: one SPM and one BPE input with a few added tokens, merges and a multilingual text.
printf '\x01a\x01b\x01\xe2\x96\x81a\x01ab\x00Hello a b ab \xc3\xa9\xe2\x89\xa0' >"$corpus/seed-spm"
printf '\x08mh e\x01mhe l\x01c<|im_end|>\x01u<tool>\x00hel <|im_end|><tool> 123 \xe6\x95\xb0' \
  >"$corpus/seed-bpe"
"$BUILD_DIR/tests/model/tokenizer_fuzz" -max_total_time="$SECONDS_BUDGET" -max_len=2048 \
    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "$corpus"
echo "[fuzz] tokenizer: no crash in ${SECONDS_BUDGET}s"
