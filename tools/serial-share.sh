#!/usr/bin/env bash
# How much of a rank's prefill runs outside its thread pool: perf samples (CPU time, so a machine
# shared with other work skews it less than wall-clock time) of one `tpnode --threads N` run of
# an N_PROMPT-token prompt (default 128, as tools/bench-model.sh's pp), split into
#   serial     on the rank's thread inside LlamaRank::forward, outside ThreadPool::run
#   parallel   inside ThreadPool::work, on any thread of the pool
#   waiting    the rank's thread in ThreadPool::run with no task left (the run's last tasks
#              still running elsewhere)
#   idle       a worker between runs (spinning or descheduled)
# and prints the serial share of the forward pass's work (serial / (serial + parallel)) with the
# functions the serial samples fall in. Needs perf (DWARF call graphs) and a RelWithDebInfo build.
#
#   tools/serial-share.sh MODEL.gguf [THREADS] [N_PROMPT]
#   BUILD=build-x FREQ=4000 tools/serial-share.sh MODEL.gguf 2
set -euo pipefail
MODEL=${1:?usage: tools/serial-share.sh MODEL.gguf [THREADS] [N_PROMPT]}
THREADS=${2:-2}
N_PROMPT=${3:-128}
BUILD=${BUILD:-build}
FREQ=${FREQ:-2000}
data=$(mktemp)
trap 'rm -f "$data"' EXIT
perf record -q -F "$FREQ" -m 2048 --call-graph dwarf,16384 -o "$data" -- \
  "$BUILD/node/tpnode" --model "$MODEL" --prompt-ids "$(seq -s, 1 "$N_PROMPT")" -n 1 \
  --threads "$THREADS" --json --log-level warn >/dev/null
perf script -i "$data" -F tid,ip,sym --no-inline 2>/dev/null | python3 -c '
import collections, sys

samples, cur = [], None
for line in sys.stdin:
    line = line.rstrip("\n")
    if not line.strip():
        if cur: samples.append(cur)
        cur = None
    elif not line.startswith("\t"):
        cur = (line.split()[0], [])
    elif cur is not None:
        parts = line.strip().split(" ", 1)
        cur[1].append(parts[1] if len(parts) > 1 else "?")
if cur: samples.append(cur)

def has(chain, s): return any(s in f for f in chain)
def ends(chain, s): return any(f.endswith(s) for f in chain)
forward = collections.Counter(t for t, c in samples if has(c, "LlamaRank::forward"))
if not forward: sys.exit("no samples in LlamaRank::forward (perf without DWARF unwinding?)")
rank = forward.most_common(1)[0][0]
count, where = collections.Counter(), collections.Counter()
for tid, c in samples:
    if ends(c, "ThreadPool::work"):
        count["parallel"] += 1
    elif tid == rank and has(c, "LlamaRank::forward"):
        if has(c, "ThreadPool::run"):
            count["waiting"] += 1
        else:
            count["serial"] += 1
            where[next((f for f in c if "LlamaRank::" in f or "MoeFfn::" in f), "?")[:100]] += 1
    elif has(c, "workerLoop"):
        count["idle"] += 1
serial = count["serial"]
work = serial + count["parallel"]
print("samples: " + ", ".join(f"{k} {count[k]}" for k in ("serial", "parallel", "waiting", "idle")))
print(f"serial share of the forward pass: {serial}/{work} = {100 * serial / work:.1f} %")
for f, n in where.most_common(8): print(f"  {n:6d}  {f}")
'
