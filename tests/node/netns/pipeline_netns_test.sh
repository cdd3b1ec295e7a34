#!/usr/bin/env bash
# Every split over real links: up to 4 tpnode nodes, each in its own network namespace with one
# veth link to a bridge (tools/netns-lib.sh), every link shaped to 1 Gbit/s (tbf) with 1 ms of
# one-way delay between nodes (tc netem when the kernel has it, else tools/delay-proxy.py in
# front of every node's mesh port). Checks against one rank:
#   1. reference model llama-tiny-f32 (2 layers): pipeline 2 stages (tp 1 and tp 2), pipeline x
#      tensor 2 stages x 2 nodes, tensor-only over 4 nodes give the greedy tokens of one rank,
#      which are llama.cpp's (tests/data/reference/cases);
#   2. a generated 4-layer model: pipeline 4 stages (a short prompt, and 100 prompt ids whose
#      step is cut into micro-batches that overlap across the stages) and an uneven 2-stage
#      split give one node's greedy tokens and exactly its teacher-forced logits (--dump-logits:
#      every prompt and generated row); 2 stages x tp 2, 2 stages x 2 nodes and tensor-only over
#      4 nodes give its greedy tokens (they sum in another order, as pipeline_multiprocess_test).
# Usage: pipeline_netns_test.sh REFERENCE_MODEL_DIR REFERENCE_DATA_DIR
#        env TPNODE_BIN, TPNODE_MAKE_TEST_MODEL. Exit 77 (ctest: skipped) without namespaces.
set -uo pipefail
export TPNODE_CLUSTER_SECRET=${TPNODE_CLUSTER_SECRET:-$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')}
BIN=${TPNODE_BIN:?}
MAKE_MODEL=${TPNODE_MAKE_TEST_MODEL:?}
REF_MODELS=${1:?reference model dir}
REF_DATA=${2:?reference data dir}
SRC=$(cd "$(dirname "$0")/../../.." && pwd)
. "$SRC/tools/netns-lib.sh"
WORK=$(mktemp -d)
cleanup() {
  netns_delete
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$WORK"/*.log; do [ -e "$f" ] && { echo "== $f"; tail -20 "$f"; }; done
  exit 1
}

netns_create "tpp$$" 4 10.78.0
case $? in 0) ;; 77) echo "skipped: cannot create network namespaces"; exit 77 ;; *) fail "netns" ;; esac
netns_shape 1gbit 1 || fail "tc tbf on the veth links"
MESH_PORT=9600
if [ "$NETNS_NETEM" = 1 ]; then
  echo "links: 1 Gbit/s, netem 1 ms one-way between nodes"
else
  echo "note: tc netem is not available in this kernel; links: tbf 1 Gbit/s, 1 ms one-way from" \
       "tools/delay-proxy.py in front of every node"
  netns_proxies 1 "$MESH_PORT" $((MESH_PORT + 1)) 600 || fail "delay proxies did not start"
fi

# Runs a cluster; sets OUT to node 0's --json line. $1 tag, $2 nodes, $3 tp, then flags for
# every node up to "--", then node 0's flags.
cluster() {
  local tag=$1 nodes=$2 tp=$3 peers="" k pids=() rc=0 out
  shift 3
  local all=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do all+=("$1"); shift; done
  shift
  for k in $(seq 0 $((nodes - 1))); do peers+="${peers:+,}10.78.0.$((k + 1)):$MESH_PORT"; done
  local common=(--model "$MODEL" --peers "$peers" --tp "$tp" --connect-timeout 30
                --log-level warn "${all[@]}")
  listen() { [ "$NETNS_NETEM" = 1 ] || echo "--mesh-listen 10.78.0.$(($1 + 1)):$((MESH_PORT + 1))"; }
  if [ "$nodes" = 1 ]; then
    out=$(timeout 120 "$BIN" --model "$MODEL" --tp "$tp" --log-level warn "${all[@]}" "$@" </dev/null \
          2>"$WORK/${tag}_n0.log" | grep '^{')
  else
    for k in $(seq 1 $((nodes - 1))); do
      # shellcheck disable=SC2046
      netns_spawn "$k" "$WORK/${tag}_n$k.log" "$BIN" "${common[@]}" --node-id "$k" $(listen "$k")
      pids+=("$NETNS_PID")
    done
    # shellcheck disable=SC2046
    out=$(netns_exec 0 timeout 120 "$BIN" "${common[@]}" --node-id 0 $(listen 0) "$@" </dev/null \
          2>"$WORK/${tag}_n0.log" | grep '^{')
  fi
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  [ "$rc" = 0 ] || fail "$tag: a worker exited $rc"
  [ -n "$out" ] || fail "$tag: no JSON from node 0"
  OUT=$out
}
field() { python3 -c "import json,sys; print(json.dumps(json.loads(sys.argv[1])[sys.argv[2]]))" "$1" "$2"; }

# 1. The reference model against llama.cpp's tokens (= one rank's).
MODEL=$REF_MODELS/llama-tiny-f32.gguf
CASE=$REF_DATA/cases/llama-tiny-f32__en_sentence.json
want=$(python3 -c "import json,sys; print(json.dumps(json.load(open(sys.argv[1]))['generated_ids']))" "$CASE")
[ -n "$want" ] || fail "no recorded tokens in $CASE"
GEN=(--prompt "$(cat "$REF_DATA/prompts/en_sentence.txt")" -n 32 --json)
cluster ref_one 1 1 -- "${GEN[@]}"; one=$OUT
[ "$(field "$one" ids)" = "$want" ] || fail "one rank: $(field "$one" ids) != llama.cpp $want"
while read -r tag nodes tp flags; do
  # shellcheck disable=SC2086
  cluster "ref_$tag" "$nodes" "$tp" $flags -- "${GEN[@]}"; got=$OUT
  [ "$(field "$got" ids)" = "$want" ] || fail "reference $tag: $(field "$got" ids) != one rank $want"
  echo "ok: reference model, $tag ($nodes nodes x tp $tp $flags): one rank's tokens"
done <<'EOF'
pp2 2 1 --pp 2
pp2xtp2 2 2 --pp 2
pp2x2nodes 4 1 --pp 2
tensor4 4 1 --split tensor
EOF

# 2. A 4-layer model: tokens and exact logits of one node.
MODEL=$WORK/four_layer_q8.gguf
"$MAKE_MODEL" --out "$MODEL" --layers 4 --vocab 512 --type q8_0 >/dev/null || fail "make_test_model"
LONG=$(python3 -c "print(','.join(str(1 + (i * 37) % 500) for i in range(100)))")
for prompt in short long; do
  if [ $prompt = short ]; then P=(--prompt "a b ab ba"); else P=(--prompt-ids "$LONG"); fi
  cluster "4l_${prompt}_one" 1 1 -- "${P[@]}" -n 24 --json --dump-logits "$WORK/one_$prompt.npy"
  one=$OUT
  ids=$(field "$one" ids)
  [ "$(python3 -c "import json,sys; print(len(json.loads(sys.argv[1])))" "$ids")" = 24 ] ||
    fail "4 layers, one node: $ids"
  while read -r tag nodes tp logits flags; do
    npy=$WORK/${tag}_$prompt.npy
    # shellcheck disable=SC2086
    cluster "4l_${prompt}_$tag" "$nodes" "$tp" $flags -- "${P[@]}" -n 24 --json --dump-logits "$npy"
    got=$OUT
    [ "$(field "$got" ids)" = "$ids" ] || fail "4 layers $prompt $tag: $(field "$got" ids) != one node $ids"
    if [ "$logits" = exact ]; then
      cmp -s "$npy" "$WORK/one_$prompt.npy" || fail "4 layers $prompt $tag: logits differ from one node's"
      echo "ok: 4 layers, $prompt prompt, $tag: one node's tokens and logits (bit-exact)"
    else
      echo "ok: 4 layers, $prompt prompt, $tag: one node's tokens"
    fi
  done <<'EOF'
pp4 4 1 exact --pp 4
pp2uneven 2 1 exact --pp 2 --pp-layers 0-2,3
pp2xtp2 2 2 tokens --pp 2
pp2x2nodes 4 1 tokens --pp 2
tensor4 4 1 tokens --split tensor
EOF
done
echo "ok: every split over the shaped netns links"
