#!/usr/bin/env bash
# A/B of tpnode's CPU weight layouts on one GGUF file, next to llama.cpp's llama-bench: per rep
# it runs tpnode with the default layout (A: Q4_K repacked 16 rows per group on AVX-512),
# tpnode with TPNODE_INTERLEAVE=4 (B: the 4-row interleave used before) and llama-bench, in
# turn, so all three see the same machine load. Prints one markdown row per thread count with
# the median prefill / decode tokens/s and the ratios to llama.cpp.
#
#   MODEL=build/bench-models/llama-0.5b-q4_k.gguf REPS=5 THREADS="1 2" tools/bench-layout-ab.sh
# llama-bench is the managed build's (tools/llama-cpp.sh; LLAMA_CPP_BIN picks another).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${TPNODE_BUILD_DIR:-build}
LLAMA_BENCH=$(tools/llama-cpp.sh)/llama-bench
MODEL=${MODEL:?MODEL=path to a GGUF file}
REPS=${REPS:-5}
THREADS=${THREADS:-1}
N_PROMPT=${N_PROMPT:-64}
N_GEN=${N_GEN:-32}

cmake --build "$BUILD" --target tpnode >&2
export LD_LIBRARY_PATH="$(dirname "$LLAMA_BENCH"):${LD_LIBRARY_PATH:-}"
PROMPT_IDS=$(seq -s, 1 "$N_PROMPT")
tpnode() {
  "$BUILD/node/tpnode" --model "$MODEL" --prompt-ids "$PROMPT_IDS" -n "$((N_GEN + 1))" \
    --threads "$1" --json --log-level warn
}

echo "| model | threads | prefill A | prefill B | llama.cpp pp$N_PROMPT | A/llama | B/llama | decode A | decode B | llama.cpp tg$N_GEN | A/llama | B/llama |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for t in $THREADS; do
  rows=()
  for r in $(seq "$REPS"); do
    a=$(tpnode "$t")
    b=$(TPNODE_INTERLEAVE=4 tpnode "$t")
    l=$("$LLAMA_BENCH" -m "$MODEL" -p "$N_PROMPT" -n "$N_GEN" -t "$t" -r 1 -o json 2>/dev/null)
    rows+=("$(python3 - "$a" "$b" "$l" <<'PY'
import json, sys
a, b, l = (json.loads(x) for x in sys.argv[1:])
lp = [x["avg_ts"] for x in l if x["n_prompt"] > 0][0]
lg = [x["avg_ts"] for x in l if x["n_gen"] > 0][0]
print(a["prefill_tps"], b["prefill_tps"], lp, a["decode_tps"], b["decode_tps"], lg)
PY
)")
    echo "[bench-layout-ab] t=$t rep $r: A/B/llama.cpp prefill, decode: ${rows[-1]}" >&2
  done
  python3 - "$MODEL" "$t" "${rows[@]}" <<'PY'
import os, statistics, sys
m, t, *rows = sys.argv[1:]
cols = list(zip(*[[float(v) for v in r.split()] for r in rows]))
pa, pb, pl, da, db, dl = (statistics.median(c) for c in cols)
# ratios: median of the per-rep ratios (each rep's runs saw the same load)
r = lambda i, j: statistics.median(x / y for x, y in zip(cols[i], cols[j]))
print(f"| {os.path.basename(m)} | {t} | {pa:.1f} | {pb:.1f} | {pl:.1f} | {r(0,2):.2f}x | {r(1,2):.2f}x "
      f"| {da:.1f} | {db:.1f} | {dl:.1f} | {r(3,5):.2f}x | {r(4,5):.2f}x |")
PY
done
