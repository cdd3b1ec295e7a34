#!/usr/bin/env python3
"""Cost model of one tpnode decode step (batch 1), the tables of docs/scaling.md.

  tools/scaling-model.py gpu [--model NAME] [--bytes-per-param 2] [--hbm-eff 0.8] ...
      Tokens/s predicted for 1-8 nodes x 1-8 GPUs over 10/25/100/400 Gb/s, TCP and NCCL,
      for Gemma-3 270M, Llama-3 8B and Llama-3 70B, and where tensor parallelism stops paying.
  tools/scaling-model.py check build/netns-cluster.jsonl
      The same model on this machine's CPU ranks, calibrated on the 1x1 / 1x2 runs and the link
      measurements in the file (tools/netns-cluster.sh), next to the measured cluster runs.
  tools/scaling-model.py split --nodes 4 --tp 1 --rtt-us 2000 --gbit 1 --layers 16 ...
      The plans `--split auto` compares (tensor, hybrid, pipeline; node/split_plan.h), batch 1
      and --parallel sequences, and the one it would choose.
  tools/scaling-model.py split-check tests/node/split_plan_cases.json
      Checks the cases the C++ model is tested with (exit 1 on a difference).

Step time (seconds), what the code does (docs/scaling.md explains each term):
  T = t_cmd + t_compute + 2 * n_layer * t_allreduce(n_embd * 4 bytes) + t_logits + t_sample
  t_cmd       driver -> workers step command: one one-way latency (nodes > 1)
  t_compute   weight bytes read per token by one rank / bandwidth of one rank (+ per-layer
              fixed cost on GPUs)
  t_allreduce local op (shared memory / NVLink) + inter-node op (direct exchange below
              the 256 KiB crossover: alpha + (nodes-1) * B / R; from 3 nodes the runtime may
              measure the tree faster at startup and use it, which this model does not cover;
              ring above it:
              2 (nodes-1) alpha + 2 (nodes-1)/nodes * B / R)
  t_logits    vocab-parallel head: all-gather of n_vocab f32 logits (local, then nodes-1 blocks
              of n_vocab*4/nodes bytes from every node, then a local broadcast)
Only the Python standard library is used.
"""
import argparse
import json
import math
import statistics
import sys

KIB = 1024
CROSSOVER = 256 * KIB  # collectives/options.h: direct below, ring at and above (whole message)

# Hyperparameters (public model cards / GGUF metadata). tied: head shares token_embd.
MODELS = {
    "gemma3-270m": dict(label="Gemma-3 270M", n_embd=640, n_layer=18, n_head=4, n_kv=1,
                        head_dim=256, n_ff=2048, n_vocab=262144, tied=True),
    "llama3-8b": dict(label="Llama-3 8B", n_embd=4096, n_layer=32, n_head=32, n_kv=8,
                      head_dim=128, n_ff=14336, n_vocab=128256, tied=False),
    "llama3-70b": dict(label="Llama-3 70B", n_embd=8192, n_layer=80, n_head=64, n_kv=8,
                       head_dim=128, n_ff=28672, n_vocab=128256, tied=False),
    # The generated model of tools/netns-cluster.sh (make_test_model --dim 1024 ...).
    "test-250m": dict(label="test 250M q8_0", n_embd=1024, n_layer=16, n_head=16, n_kv=4,
                      head_dim=64, n_ff=2816, n_vocab=32000, tied=False),
}


def tp_ok(m, tp):
    """model/shard_plan.h: whole query heads per rank; kv heads split or replicated evenly."""
    if m["n_head"] % tp:
        return False
    return m["n_kv"] % tp == 0 or tp % m["n_kv"] == 0


def rank_params(m, tp):
    """Weights one rank reads for one token (the embedding row is negligible)."""
    d, hd = m["n_embd"], m["head_dim"]
    kv_heads = max(m["n_kv"] // tp, 1)  # replicated when n_kv < tp
    layer = (2 * d * m["n_head"] * hd / tp  # attn_q (rows) + attn_output (cols)
             + 2 * d * kv_heads * hd  # attn_k, attn_v
             + 3 * d * m["n_ff"] / tp)  # ffn gate, up (rows), down (cols)
    head_rows = m["n_vocab"] / tp if m["n_vocab"] % tp == 0 else m["n_vocab"]
    return m["n_layer"] * layer + head_rows * d


def kv_bytes(m, tp, ctx, elem_bytes):
    """K and V read by one rank for one token at position ctx."""
    return 2 * m["n_layer"] * max(m["n_kv"] // tp, 1) * m["head_dim"] * ctx * elem_bytes


def inter_allreduce(nbytes, nodes, alpha, rate):
    """One inter-node all-reduce of nbytes on every node; rate: bytes/s of the node's link."""
    if nodes == 1:
        return 0.0
    if nbytes < CROSSOVER:  # direct: every node sends its partial to every other node
        return alpha + (nodes - 1) * nbytes / rate
    return 2 * (nodes - 1) * alpha + 2 * (nodes - 1) / nodes * nbytes / rate


def step(m, nodes, g, hw, net):
    """Decode step components (seconds) for nodes x g ranks. hw/net: dicts (see gpu/check)."""
    tp = nodes * g
    d, V, L = m["n_embd"], m["n_vocab"], m["n_layer"]
    B = d * 4  # the all-reduces are f32
    c = {}
    w = rank_params(m, tp) * hw["bytes_per_param"] + kv_bytes(m, tp, hw["ctx"], hw["kv_bytes"])
    c["compute"] = hw["compute"](w, nodes, g) + L * hw["t_layer"]
    local = hw["local"](B, g)
    inter = inter_allreduce(B, nodes, net["alpha"] + net["staging"], net["rate"])
    c["allreduce"] = 2 * L * (local + inter)
    c["logits"] = 0.0
    if tp > 1 and V % tp == 0:
        # local all-gather of this node's rows; then, across nodes, the leader exchanges the
        # node blocks and broadcasts the whole vector locally
        c["logits"] = hw["local"](V * 4 / nodes, g)
        if nodes > 1:
            c["logits"] += hw["local"](V * 4, g)
            c["logits"] += net["alpha"] + net["staging"] + (nodes - 1) * (V * 4 / nodes) / net["rate"]
    c["cmd"] = net["alpha"] + (nodes - 2) * net["send"] if nodes > 1 else 0.0
    c["sample"] = hw["sample"](V)
    c["total"] = sum(c.values())
    c["weight_bytes_rank"] = w
    return c


# ---------------------------------------------------------------------------- GPU tables

GB = 1e9


def gpu_hw(args):
    bw = args.hbm_tbps * 1e12 * args.hbm_eff

    def local(nbytes, g):
        if g == 1:
            return 0.0
        # NCCL-class intra-node all-reduce on NVLink: ~6 us at 2 GPUs, +2 us per doubling
        return (args.nvlink_alpha_us + 2.0 * (math.log2(g) - 1)) * 1e-6 + \
            2 * (g - 1) / g * nbytes / (args.nvlink_gbps * GB)

    return dict(bytes_per_param=args.bytes_per_param, ctx=args.ctx, kv_bytes=2,
                compute=lambda w, nodes, g: w / bw, t_layer=args.layer_us * 1e-6, local=local,
                sample=lambda V: V * args.sample_ns * 1e-9 + V * 4 / (args.pcie_gbps * GB))


def gpu_net(args, transport, gbit):
    line = gbit * 1e9 / 8
    if transport == "tcp":
        rate = min(args.tcp_eff * line, args.tcp_stream_gbit * 1e9 / 8 * args.sockets)
        return dict(alpha=args.tcp_alpha_us * 1e-6, staging=args.staging_us * 1e-6, rate=rate,
                    send=2e-6)
    rate = args.nccl_eff * line
    return dict(alpha=args.nccl_alpha_us * 1e-6, staging=0.0, rate=rate, send=2e-6)


def fits(m, nodes, g, args):
    """A rank holds its layer shards, its head rows and the replicated token_embd."""
    held = (rank_params(m, nodes * g) + m["n_vocab"] * m["n_embd"]) * args.bytes_per_param
    return held <= args.gpu_mem_gb * 1e9 * 0.9


def valid_layouts(m, args):
    return [(n, g) for n in (1, 2, 4, 8) for g in (1, 2, 4, 8)
            if tp_ok(m, n * g) and fits(m, n, g, args)]


def cmd_gpu(args):
    hw = gpu_hw(args)
    models = [args.model] if args.model else ["gemma3-270m", "llama3-8b", "llama3-70b"]
    links = [10, 25, 100, 400]
    for name in models:
        m = MODELS[name]
        layouts = valid_layouts(m, args)
        skipped = [f"{n}x{g}" for n in (1, 2, 4, 8) for g in (1, 2, 4, 8) if (n, g) not in layouts]
        wlabel = ("bf16 weights" if args.bytes_per_param == 2
                  else f"{args.bytes_per_param:g} bytes per weight")
        print(f"\n#### {m['label']}: decode tokens/s (step ms), {wlabel}\n")
        print("| nodes x GPUs | " + " | ".join(f"TCP {l} Gb/s" for l in links) + " | " +
              " | ".join(f"NCCL {l} Gb/s" for l in links) + " |")
        print("|---|" + "---|" * (2 * len(links)))
        for n, g in layouts:
            cells = []
            for transport in ("tcp", "nccl"):
                for gbit in links:
                    if n == 1 and not (transport == "tcp" and gbit == links[0]):
                        cells.append("=")
                        continue
                    t = step(m, n, g, hw, gpu_net(args, transport, gbit))["total"]
                    cells.append(f"{1 / t:,.0f} ({t * 1e3:.2f})")
            print(f"| {n} x {g} | " + " | ".join(cells) + " |")
        if skipped:
            print(f"\nNot possible: {', '.join(skipped)} (tp must divide n_head={m['n_head']} and "
                  f"be a multiple or divisor of n_kv={m['n_kv']}, and a rank's weights must fit "
                  f"in {args.gpu_mem_gb:.0f} GB).")
        gmax = max(g for n, g in layouts if n == 1)
        print(f"\n#### {m['label']}: where the step time goes (ms), {gmax} GPUs per node\n")
        print("| layout, link | compute | all-reduces | logits | cmd | sample | total |")
        print("|---|---|---|---|---|---|---|")
        for n, transport, gbit in [(1, "nccl", 100), (2, "tcp", 10), (2, "tcp", 100),
                                   (2, "nccl", 400), (4, "tcp", 25), (4, "nccl", 400)]:
            if (n, gmax) not in layouts:
                continue
            c = step(m, n, gmax, hw, gpu_net(args, transport, gbit))
            link = "one node" if n == 1 else f"{transport.upper()} {gbit} Gb/s"
            print(f"| {n} x {gmax}, {link} | " + " | ".join(
                f"{c[k] * 1e3:.3f}" for k in ("compute", "allreduce", "logits", "cmd", "sample",
                                              "total")) + " |")
    print("\n#### Where tensor parallelism stops paying\n")
    print("| model | transport | link | best layout | tok/s | best 1-node | best 2-node | "
          "best 4-node | best 8-node |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in models:
        m = MODELS[name]
        layouts = valid_layouts(m, args)
        for transport in ("tcp", "nccl"):
            for gbit in links:
                net = gpu_net(args, transport, gbit)
                tps = {l: 1 / step(m, l[0], l[1], hw, net)["total"] for l in layouts}
                best = max(tps, key=tps.get)

                def best_for(n):
                    cand = [l for l in tps if l[0] == n]
                    if not cand:
                        return "-"
                    b = max(cand, key=tps.get)
                    return f"{tps[b]:,.0f} ({b[0]}x{b[1]})"
                print(f"| {m['label']} | {transport.upper()} | {gbit} Gb/s | {best[0]} x {best[1]} "
                      f"| {tps[best]:,.0f} | " + " | ".join(best_for(n) for n in (1, 2, 4, 8)) + " |")


# ---------------------------------------------------------------------------- CPU check

def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                rows.append(json.loads(line))
    return rows


def med(rows, **kv):
    v = [r["decode_tps"] for r in rows if "decode_tps" in r and r["decode_tps"] > 0 and
         all(r.get(k) == x for k, x in kv.items())]
    return statistics.median(v) if v else None


def spread(rows, **kv):
    v = [r["decode_tps"] for r in rows if "decode_tps" in r and r["decode_tps"] > 0 and
         all(r.get(k) == x for k, x in kv.items())]
    return f"{min(v):.1f}-{max(v):.1f}" if v else "-"


def cmd_check(args):
    rows = load(args.file)
    m = MODELS["test-250m"]
    bpp = 34 / 32  # q8_0: 32 weights in 34 bytes
    cores = args.cores
    t11 = 1 / med(rows, kind="calib", nodes=1, tp=1, threads=1)
    t12 = 1 / med(rows, kind="calib", nodes=1, tp=1, threads=2)
    t1x2 = 1 / med(rows, kind="calib", nodes=1, tp=2, threads=1)
    w1 = rank_params(m, 1) * bpp
    bw1 = w1 / t11  # what one thread of ours gets (one core, less what the load takes)

    # Two readings of "2 cores" (docs/scaling.md): dedicated cores (ranks beyond 2 share them)
    # or a fair share per thread (every runnable thread of ours gets what the calibration
    # thread got, as when many other threads load the machine).
    def dedicated(w_rank, nodes, g):
        ranks = nodes * g
        return w_rank * ranks / (min(ranks, cores) * bw1)

    def fair(w_rank, nodes, g):
        return w_rank / bw1

    # Local op (shared memory) per all-reduce, derived: 1x2 minus its compute (the same in
    # both readings for 2 ranks), over the 2 * n_layer all-reduces and the logits gather.
    w2 = rank_params(m, 2) * bpp
    local_ar = max(0.0, (t1x2 - dedicated(w2, 1, 2)) / (2 * m["n_layer"] + 1))

    def hw(compute):
        return dict(bytes_per_param=bpp, ctx=24, kv_bytes=4, compute=compute, t_layer=0.0,
                    local=lambda nbytes, g: local_ar if g > 1 else 0.0, sample=lambda V: 0.0)
    print("Calibration (medians of the calib runs):\n")
    print(f"- 1x1, 1 thread: {1 / t11:.2f} tok/s -> {bw1 / 1e9:.2f} GB/s of weights per thread "
          f"({w1 / 1e6:.0f} MB read per token)")
    print(f"- 1x1, 2 threads: {1 / t12:.2f} tok/s ({t11 / t12:.2f}x one thread)")
    print(f"- 1x2, 1 thread per rank: {1 / t1x2:.2f} tok/s -> local all-reduce (shared memory) "
          f"{local_ar * 1e6:,.0f} us each (derived)")
    links = {r["rate"]: r for r in rows if r.get("kind") == "link"}
    base = {}  # (nodes, g) -> (measured, predicted) step seconds on the unshaped link
    deltas = []
    print("\n| tbf rate | iperf3 Mbit/s | mesh RTT us | layout | predicted tok/s, dedicated cores |"
          " predicted tok/s, fair share | measured tok/s, median (range) | measured / predicted "
          "(fair share) | network share of the predicted step (fair share) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for rate, link in links.items():
        goodput = link["iperf3_bps"] / 8
        net = dict(alpha=link["rtt_us"] / 2 * 1e-6, staging=0.0, rate=goodput, send=5e-6)
        for nodes, g in [(2, 1), (4, 1), (2, 2)]:
            meas = med(rows, kind="cluster", rate=rate, nodes=nodes, tp=g)
            if meas is None:
                continue
            preds = []
            for compute in (dedicated, fair):
                c = step(m, nodes, g, hw(compute), net)
                # tbf lets `burst` bytes through at once after an idle gap (the compute between
                # two all-reduces refills it): take it off each shaped message.
                if rate != "none":
                    burst = link.get("burst", 0)
                    saved = min(burst, (nodes - 1) * m["n_embd"] * 4) / goodput * 2 * m["n_layer"]
                    saved += min(burst, (nodes - 1) * m["n_vocab"] * 4 / nodes) / goodput
                    c["total"] -= saved
                preds.append(c)
            c = preds[1]
            netshare = (c["total"] - c["compute"] - 2 * m["n_layer"] * (local_ar if g > 1 else 0)
                        ) / c["total"]
            if rate == "none":
                base[(nodes, g)] = (1 / meas, c["total"])
            elif (nodes, g) in base:
                mb, pb = base[(nodes, g)]
                deltas.append(f"| {rate} | {nodes}x{g} | {(c['total'] - pb) * 1e3:.1f} | "
                              f"{(1 / meas - mb) * 1e3:.1f} |")
            print(f"| {rate} | {link['iperf3_bps'] / 1e6:,.0f} | {link['rtt_us']:.0f} | "
                  f"{nodes}x{g} | {1 / preds[0]['total']:.2f} | {1 / c['total']:.2f} | "
                  f"{meas:.2f} ({spread(rows, kind='cluster', rate=rate, nodes=nodes, tp=g)}) | "
                  f"{meas * c['total']:.2f} | {netshare:.0%} |")
    if deltas:
        print("\nWhat shaping adds to the step (ms), against the same layout unshaped: "
              "predicted vs measured (medians)\n")
        print("| tbf rate | layout | predicted extra ms | measured extra ms |")
        print("|---|---|---|---|")
        print("\n".join(deltas))
    loads = [r.get("load1_before") for r in rows if "load1_before" in r]
    if loads:
        print(f"\nLoad average (1 min) before the runs: {min(loads)} .. {max(loads)}")


# --split auto's cost model: the same formulas as node/split_plan.cc (docs/scaling.md,
# "The model `--split auto` runs"). Keep the two in step: split-check runs the cases that
# tests/node/split_plan_test.cc checks the C++ model with.
def split_compute(nbytes, macs, b, ranks, c):
    return max(nbytes / (ranks * c["rank_read_bytes_per_s"]), b * macs / (ranks * c["rank_macs_per_s"]))


def split_parts(m, c, stages, b):
    n = c["nodes"] // stages
    ranks = n * c["ranks_per_node"]
    alpha = c["rtt_us"] * 1e-6 / 2
    r = c["link_bytes_per_s"]
    layers = m["n_layer"] / stages
    hidden = 4.0 * m["n_embd"] * b
    t_ar = c["local_allreduce_us"] * 1e-6 if c["ranks_per_node"] > 1 else 0.0
    if n > 1:
        t_ar += alpha + (n - 1) * hidden / r
    return {
        "stage_compute": split_compute(m["layer_bytes"] / stages, m["layer_macs"] / stages, b, ranks, c),
        "head": split_compute(m["head_bytes"], m["head_macs"], b, ranks, c),
        "stage_allreduce": 2 * layers * t_ar,
        "logits": alpha + (n - 1) * 4.0 * m["n_vocab"] * b / n / r if n > 1 else 0.0,
        "boundary": alpha + hidden / r if stages > 1 else 0.0,
        "command": alpha if c["nodes"] > 1 else 0.0,
    }


def split_sequential(p, stages, b):
    t = {
        "compute_ms": (stages * p["stage_compute"] + p["head"]) * 1e3,
        "allreduce_ms": (stages * p["stage_allreduce"] + p["logits"]) * 1e3,
        "boundary_ms": (stages * p["boundary"] if stages > 1 else 0.0) * 1e3,
        "command_ms": p["command"] * 1e3,
    }
    t["step_ms"] = t["compute_ms"] + t["allreduce_ms"] + t["boundary_ms"] + t["command_ms"]
    t["tokens_per_s"] = b / (t["step_ms"] * 1e-3)
    return t


def split_predict(m, c, stages):
    parallel = max(1, c["parallel"])
    out = {"stages": stages, "nodes_per_stage": c["nodes"] // stages, "parallel": parallel,
           "batch1": split_sequential(split_parts(m, c, stages, 1), stages, 1),
           "batch": split_sequential(split_parts(m, c, stages, parallel), stages, parallel)}
    if c.get("pipeline_overlaps_decode") and stages > 1 and parallel > 1:
        micro = min(parallel, stages)
        mb = parallel / micro
        q = split_parts(m, c, stages, mb)
        chain = split_sequential(q, stages, mb)
        stage0 = q["stage_compute"] + q["head"] + q["stage_allreduce"] + q["logits"] + q["boundary"]
        chain["step_ms"] = max(micro * stage0 * 1e3, chain["step_ms"])
        chain["tokens_per_s"] = parallel / (chain["step_ms"] * 1e-3)
        out["batch"] = chain
    out["objective"] = out["batch1"]["tokens_per_s"] if parallel <= 1 else out["batch"]["tokens_per_s"]
    return out


def split_name(p, tp):
    s, n = p["stages"], p["nodes_per_stage"]
    if s == 1:
        return f"tensor {n}x{tp}"
    if n == 1:
        return f"pipeline {s} stages" + (f" (tp {tp} each)" if tp > 1 else "")
    return f"hybrid {s} stages x {n} nodes" + (f" x tp {tp}" if tp > 1 else "")


def split_plans(m, c):
    plans = [split_predict(m, c, s) for s in range(1, c["nodes"] + 1)
             if c["nodes"] % s == 0 and s <= m["n_layer"]]
    best = None
    for i, p in enumerate(plans):  # ascending stages: a tie keeps the fewer
        if best is None or p["objective"] > plans[best]["objective"] * (1 + 1e-9):
            best = i
    return plans, best


def cmd_split(args):
    m = {"n_layer": args.layers, "n_embd": args.embd, "n_vocab": args.vocab,
         "layer_bytes": args.layer_gb * 1e9, "layer_macs": args.layer_gmacs * 1e9,
         "head_bytes": args.head_gb * 1e9, "head_macs": args.head_gmacs * 1e9}
    c = {"nodes": args.nodes, "ranks_per_node": args.tp, "parallel": args.parallel,
         "rtt_us": args.rtt_us, "link_bytes_per_s": args.gbit * 1e9 / 8,
         "rank_read_bytes_per_s": args.rank_gbps * 1e9, "rank_macs_per_s": args.rank_gmacs * 1e9,
         "local_allreduce_us": args.local_us, "pipeline_overlaps_decode": args.overlap}
    plans, best = split_plans(m, c)
    print(f"| plan | batch 1 tok/s | step ms (compute, all-reduce, boundaries, command) | "
          f"{c['parallel']} sequences tok/s |")
    print("|---|---|---|---|")
    for i, p in enumerate(plans):
        b1 = p["batch1"]
        mark = " (chosen)" if i == best else ""
        print(f"| {split_name(p, args.tp)}{mark} | {b1['tokens_per_s']:.1f} | {b1['step_ms']:.2f} "
              f"({b1['compute_ms']:.2f}, {b1['allreduce_ms']:.2f}, {b1['boundary_ms']:.2f}, "
              f"{b1['command_ms']:.3f}) | {p['batch']['tokens_per_s']:.1f} |")


def cmd_split_check(args):
    with open(args.file) as f:
        cases = json.load(f)
    bad = 0
    for case in cases:
        plans, best = split_plans(case["model"], case["cluster"])
        got = {"chosen_stages": plans[best]["stages"],
               "batch1_tokens_per_s": [p["batch1"]["tokens_per_s"] for p in plans],
               "batch_tokens_per_s": [p["batch"]["tokens_per_s"] for p in plans]}
        want = case["expect"]
        ok = got["chosen_stages"] == want["chosen_stages"] and all(
            math.isclose(a, b, rel_tol=1e-9) for key in ("batch1_tokens_per_s", "batch_tokens_per_s")
            for a, b in zip(got[key], want[key], strict=True))
        print(f"{'ok' if ok else 'DIFFERS'}: {case['name']}: {got}")
        bad += 0 if ok else 1
    return 1 if bad else 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gpu", help="GPU cluster tables (assumed hardware, see docs/scaling.md)")
    g.add_argument("--model", choices=list(MODELS))
    g.add_argument("--bytes-per-param", type=float, default=2.0, help="2 = bf16 weights")
    g.add_argument("--ctx", type=int, default=1024, help="position of the decoded token")
    g.add_argument("--hbm-tbps", type=float, default=4.8, help="H200 HBM3e peak")
    g.add_argument("--hbm-eff", type=float, default=0.8, help="share of peak a GEMV reaches")
    g.add_argument("--gpu-mem-gb", type=float, default=141)
    g.add_argument("--layer-us", type=float, default=10.0, help="fixed GPU cost per layer")
    g.add_argument("--nvlink-alpha-us", type=float, default=6.0)
    g.add_argument("--nvlink-gbps", type=float, default=450.0, help="GB/s one direction")
    g.add_argument("--pcie-gbps", type=float, default=25.0, help="GB/s device -> host")
    g.add_argument("--sample-ns", type=float, default=1.0, help="host sampling per logit")
    g.add_argument("--tcp-alpha-us", type=float, default=25.0, help="one-way, per message")
    g.add_argument("--staging-us", type=float, default=10.0, help="TCP: GPU<->host copies")
    g.add_argument("--tcp-eff", type=float, default=0.9)
    g.add_argument("--tcp-stream-gbit", type=float, default=40.0, help="one TCP stream's cap")
    g.add_argument("--sockets", type=int, default=1, help="--sockets-per-peer")
    g.add_argument("--nccl-alpha-us", type=float, default=10.0, help="one-way, per message")
    g.add_argument("--nccl-eff", type=float, default=0.9)
    c = sub.add_parser("check", help="predicted vs measured, from tools/netns-cluster.sh output")
    c.add_argument("file")
    c.add_argument("--cores", type=int, default=2)
    sp = sub.add_parser("split", help="the plans --split auto compares (node/split_plan.h)")
    sp.add_argument("--nodes", type=int, required=True)
    sp.add_argument("--tp", type=int, default=1)
    sp.add_argument("--parallel", type=int, default=1)
    sp.add_argument("--rtt-us", type=float, required=True, help="slowest link's round trip")
    sp.add_argument("--gbit", type=float, required=True, help="slowest link, Gbit/s")
    sp.add_argument("--layers", type=int, required=True)
    sp.add_argument("--embd", type=int, required=True)
    sp.add_argument("--vocab", type=int, required=True)
    sp.add_argument("--layer-gb", type=float, required=True, help="all layers' weights, GB")
    sp.add_argument("--layer-gmacs", type=float, default=0.0, help="per token (default: bytes)")
    sp.add_argument("--head-gb", type=float, required=True)
    sp.add_argument("--head-gmacs", type=float, default=0.0, help="per token (default: bytes)")
    sp.add_argument("--rank-gbps", type=float, default=4.0, help="weights one rank reads, GB/s")
    sp.add_argument("--rank-gmacs", type=float, default=16.0, help="one rank, G multiply-adds/s")
    sp.add_argument("--local-us", type=float, default=10.0, help="local all-reduce (tp > 1)")
    sp.add_argument("--overlap", action="store_true", help="decode micro-batches overlap")
    sc = sub.add_parser("split-check", help="the C++ model's test cases (split_plan_cases.json)")
    sc.add_argument("file")
    args = p.parse_args()
    if args.cmd == "split":
        args.layer_gmacs = args.layer_gmacs or args.layer_gb
        args.head_gmacs = args.head_gmacs or args.head_gb
    return {"gpu": cmd_gpu, "check": cmd_check, "split": cmd_split,
            "split-check": cmd_split_check}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
