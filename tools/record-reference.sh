#!/usr/bin/env bash
# Records llama.cpp's outputs on the reference models into tests/data/reference/cases (see
# tests/data/reference/README.md): for every model of tests/data/reference/models.txt (generated
# into <build>/reference-models by the build) and every prompt of tests/data/reference/prompts,
# tools/reference/llama_reference.cc -- compiled here against the managed llama.cpp
# (tools/llama-cpp.sh) -- writes <model>__<prompt>.json and .logits.npy (float32, except float16
# for the K-quant models, whose tolerances are far above float16's rounding).
#   tools/record-reference.sh [BUILD_DIR [STEM...]]   (default: build, configured already)
# With STEMs, only those models' cases are recorded again; the other cases stay as they are.
# Env: as tools/llama-cpp.sh (LLAMA_CPP_BIN is not enough here: the headers are needed too).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
shift || true
ONLY=("$@")
REF=tests/data/reference
LLAMA_BIN=$(tools/llama-cpp.sh)
LLAMA_SRC=$(tools/llama-cpp.sh --src)
VERSION=$(tools/llama-cpp.sh --version)

cmake --build "$BUILD" --target reference_models >&2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"${CXX:-c++}" -std=c++17 -O2 tools/reference/llama_reference.cc -o "$TMP/llama_reference" \
  -I"$LLAMA_SRC/include" -I"$LLAMA_SRC/ggml/include" -L"$LLAMA_BIN" -lllama -lggml -lggml-base \
  -Wl,-rpath,"$LLAMA_BIN"

if [ ${#ONLY[@]} -eq 0 ]; then
  rm -rf "$REF/cases"
else
  for stem in "${ONLY[@]}"; do rm -f "$REF/cases/${stem}__"*; done
fi
mkdir -p "$REF/cases"
grep -v '^#' "$REF/models.txt" | while read -r stem _; do
  [ -n "$stem" ] || continue
  if [ ${#ONLY[@]} -gt 0 ] && [[ " ${ONLY[*]} " != *" $stem "* ]]; then continue; fi
  model="$BUILD/reference-models/$stem.gguf"
  sha=$(cut -c1-64 "$model.sha256")
  f16=(--f16)
  case "$stem" in *f32* | *f16* | *q8_0* | *q4_0*) f16=() ;; esac  # (*f16* also holds *bf16*)
  for prompt in "$REF"/prompts/*.txt; do
    name=$(basename "$prompt" .txt)
    echo "[record-reference] $stem / $name" >&2
    "$TMP/llama_reference" "$model" "$prompt" "$REF/cases/${stem}__$name" --n-gen 32 "${f16[@]}" \
      --meta "case=${stem}__$name" --meta "model=$stem.gguf" --meta "model_sha256=$sha" \
      --meta "prompt_name=$name" --meta "llama_cpp=$VERSION, CPU, Release"
  done
done
du -sh "$REF/cases" >&2
