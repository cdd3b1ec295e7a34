#!/usr/bin/env bash
# All-reduce side by side: tpnode (`tpbench allreduce`), Gloo (libgloo-dev, TCP transport) and
# Open MPI (MPI_Allreduce, TCP BTL), 2 and 4 processes on loopback, f32, same sizes and
# iteration counts, buffers allocated once and reused by all three. Each configuration runs
# ROUNDS times interleaved (tpnode, gloo, mpi, floor, tpnode, ...) and the median of the
# per-round p50 is reported, so that background load hits all alike. "floor" (sizes below
# 1 MiB): tools/bench/tcp_floor.cc, the message pattern of tpnode's small-message algorithm on
# raw sockets (2 processes: direct exchange; more: tree), what any TCP implementation of that
# pattern pays on this machine.
# Placement: mpirun binds each process to its own core when there are at least as many cores as
# processes (and binds nothing when it oversubscribes). The script does the same for tpnode
# (taskset -c i for process i) and tcp_floor (pins its own processes): both spin while they
# wait, and two spinning processes that the kernel starts on one core take 22 us per 4 KiB
# all-reduce instead of 5.5 us until it moves one. Gloo is left unbound: it sleeps while it
# waits, and its I/O thread must not share the main thread's core (bound, it took 4 ms per
# call). BIND=0 binds nothing but MPI.
#   tools/bench-allreduce.sh                 # prints a markdown table (for docs/benchmarks.md)
#   PROCS="2" SIZES=4K,16K ROUNDS=1 tools/bench-allreduce.sh
# Needs: libgloo-dev openmpi-bin libopenmpi-dev (tools/install-deps.sh), a built tpbench.
set -euo pipefail
# The nodes started here share a fresh 256-bit cluster secret (docs/security.md).
export TPNODE_CLUSTER_SECRET=${TPNODE_CLUSTER_SECRET:-$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')}
cd "$(dirname "$0")/.."
BUILD_DIR=${TPNODE_BUILD_DIR:-build}
PROCS=${PROCS:-"2 4"}
SIZES=${SIZES:-4K,16K,64K,16M,64M}
ROUNDS=${ROUNDS:-3}
ITERS_SMALL=${ITERS_SMALL:-1000}  # sizes below 1 MiB
ITERS_LARGE=${ITERS_LARGE:-20}
OUT=${OUT:-$BUILD_DIR/bench-allreduce}
BIND=${BIND:-1}
CORES=$(nproc)
mkdir -p "$OUT" "$BUILD_DIR/bench-peers"

cmake --build "$BUILD_DIR" --target tpbench >/dev/null
TPBENCH=$BUILD_DIR/tools/tpbench/tpbench
GLOO=$BUILD_DIR/bench-peers/gloo_allreduce
MPI=$BUILD_DIR/bench-peers/mpi_allreduce
FLOOR=$BUILD_DIR/bench-peers/tcp_floor
c++ -O2 -std=c++17 tools/bench/gloo_allreduce.cc -o "$GLOO" -lgloo -lpthread
c++ -O2 -std=c++17 tools/bench/tcp_floor.cc -o "$FLOOR"
mpicxx -O2 tools/bench/mpi_allreduce.cc -o "$MPI"

bytes_list() {  # 4K,16M -> 4096,16777216
  local out="" s n m
  for s in ${1//,/ }; do
    n=${s%[KkMmGg]}; m=1
    case "$s" in *[Kk]) m=1024 ;; *[Mm]) m=1048576 ;; *[Gg]) m=1073741824 ;; esac
    out+="${out:+,}$((n * m))"
  done
  echo "$out"
}
SMALL=""; LARGE=""
for b in $(bytes_list "$SIZES" | tr , ' '); do
  if ((b < 1048576)); then SMALL+="${SMALL:+,}$b"; else LARGE+="${LARGE:+,}$b"; fi
done

# The command prefix that binds process $1 of $2 (as mpirun would), or nothing.
bind() {
  if [ "$BIND" = 1 ] && (($2 <= CORES)); then echo "taskset -c $(($1 % CORES))"; fi
}
run_tpnode() {  # procs sizes iters -> JSON on stdout
  local n=$1 sizes=$2 iters=$3 base peers="" i pids=()
  base=$((20000 + RANDOM % 20000))
  for ((i = 0; i < n; i++)); do peers+="${peers:+,}127.0.0.$((i + 1)):$((base + i))"; done
  for ((i = 1; i < n; i++)); do
    $(bind $i "$n") "$TPBENCH" allreduce --node-id $i --peers "$peers" --tp 1 --sizes "$sizes" \
      --iters "$iters" --json >/dev/null &
    pids+=($!)
  done
  timeout 600 $(bind 0 "$n") "$TPBENCH" allreduce --node-id 0 --peers "$peers" --tp 1 \
    --sizes "$sizes" --iters "$iters" --json
  wait "${pids[@]}"
}
run_gloo() {
  local n=$1 sizes=$2 iters=$3 dir i pids=()
  dir=$(mktemp -d)
  for ((i = 1; i < n; i++)); do
    "$GLOO" $i $n "$dir" "$sizes" "$iters" "$iters" >/dev/null &
    pids+=($!)
  done
  timeout 600 "$GLOO" 0 $n "$dir" "$sizes" "$iters" "$iters"
  wait "${pids[@]}"
  rm -rf "$dir"
}
run_mpi() {
  local n=$1 sizes=$2 iters=$3
  timeout 600 mpirun --allow-run-as-root --oversubscribe -np $n --mca pml ob1 \
    --mca btl tcp,self --mca btl_tcp_if_include lo "$MPI" "$sizes" "$iters" "$iters" 2>/dev/null
}

run_floor() {
  timeout 600 "$FLOOR" "$1" "$2" "$3" "$BIND"
}

for n in $PROCS; do
  for ((r = 0; r < ROUNDS; r++)); do
    for impl in tpnode gloo mpi floor; do
      f="$OUT/${impl}_n${n}_r${r}.json"
      {
        [ -n "$SMALL" ] && "run_$impl" "$n" "$SMALL" "$ITERS_SMALL"
        [ -n "$LARGE" ] && [ "$impl" != floor ] && "run_$impl" "$n" "$LARGE" "$ITERS_LARGE"
        true
      } >"$f"
      echo "[bench] $impl n=$n round $r done" >&2
    done
  done
done

python3 - "$OUT" "$PROCS" "$ROUNDS" <<'PY'
import json, statistics, sys, glob, os
out, procs, rounds = sys.argv[1], sys.argv[2].split(), int(sys.argv[3])
def load(impl, n):
    per = {}
    for r in range(rounds):
        for line in open(os.path.join(out, f"{impl}_n{n}_r{r}.json")):
            line = line.strip()
            if not line.startswith("["): continue
            for o in json.loads(line):
                per.setdefault(o["bytes"], []).append(o)
    return {b: {"p50": statistics.median(x["p50_us"] for x in v),
                "busbw": statistics.median(x["busbw_GBps"] for x in v)} for b, v in per.items()}
def human(b):
    for unit, s in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= s: return f"{b // s} {unit}"
    return f"{b} B"
print("| procs | size | tpnode p50 us | Gloo p50 us | MPI p50 us | lat. vs Gloo | lat. vs MPI "
      "| TCP floor p50 us | floor vs MPI "
      "| tpnode busbw GB/s | Gloo busbw | MPI busbw | busbw vs Gloo | busbw vs MPI |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for n in procs:
    t, g, m, f = load("tpnode", n), load("gloo", n), load("mpi", n), load("floor", n)
    for b in sorted(t):
        floor = (f"{f[b]['p50']:.1f} | {f[b]['p50'] / m[b]['p50']:.2f}" if b in f else "- | -")
        print(f"| {n} | {human(b)} | {t[b]['p50']:.1f} | {g[b]['p50']:.1f} | {m[b]['p50']:.1f} "
              f"| {t[b]['p50'] / g[b]['p50']:.2f} | {t[b]['p50'] / m[b]['p50']:.2f} | {floor} "
              f"| {t[b]['busbw']:.3f} | {g[b]['busbw']:.3f} | {m[b]['busbw']:.3f} "
              f"| {t[b]['busbw'] / g[b]['busbw']:.2f} | {t[b]['busbw'] / m[b]['busbw']:.2f} |")
PY
