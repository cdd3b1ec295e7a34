#!/usr/bin/env python3
"""What Redis KV tier loads cost a running request under a pipeline split (--pp 2).

  tools/bench-tier-pipeline.py [--bin build/node/tpnode] [--maker build/tools/make_test_model]
                               [--arrivals 6] [--words 240] [--decode 400] [--threads 1]

A cluster of 2 nodes on loopback (--pp 2: one stage per node, one CPU rank of --threads threads
each) serves one streaming request R (a short prompt, --decode tokens, ignore_eos) while
--arrivals other requests (max_tokens 1) come one after the other, each with a long prompt of its
own (--words words of the letters vocabulary, --kv-block-size 16). Three ways, each on a fresh
cluster (empty local prefix cache):
  off    no Redis: every arrival's prompt is prefilled
  local  no Redis; the arrivals' prompts were answered once before R: their prefixes are hits in
         the local prefix cache (nothing is loaded, nothing prefilled but the last block)
  redis  the arrivals' prompts were answered by an earlier cluster of the same layout that
         stored them in one redis-server: each arrival loads its prefix from Redis
Printed per way (a markdown table): R's decode tokens/s and inter-token latency (p50, p99, max)
while the arrivals run (from the first arrival sent to the last answered), the arrivals' mean
time to first token, and the tier counters. The model is make_test_model's (random weights,
Q8_0, 1024 dim, 8 layers). Standard library only; needs redis-server on the PATH.
"""
import argparse
import http.client
import json
import os
import random
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, body, timeout=300):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("POST", "/v1/completions", json.dumps(body), {"content-type": "application/json"})
    r = c.getresponse()
    data = r.read()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {data[:300]!r}")
    return json.loads(data)


def metric(port, name):
    """A metric's value on node 0, summed over its labeled series (0 when missing)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/metrics")
    total = 0.0
    for line in c.getresponse().read().decode().splitlines():
        key, _, value = line.rpartition(" ")
        if key == name or key.startswith(name + "{"):
            total += float(value)
    return total


class Cluster:
    """Node 1 and node 0 of a --pp 2 cluster; node 0 serves the API on `port`."""

    def __init__(self, args, tmp, tag, extra):
        self.port = free_port()
        peers = f"127.0.0.1:{free_port()},127.0.0.1:{free_port()}"
        env = dict(os.environ, TPNODE_CLUSTER_SECRET=secrets.token_hex(32))
        common = [args.bin, "--model", f"{tmp}/m.gguf", "--peers", peers, "--pp", "2",
                  "--threads", str(args.threads), "--parallel", "2", "--ctx-size", "1024",
                  "--kv-block-size", "16", "--kv-blocks", "512", "--log-level", "warn"] + extra
        self.procs = []
        for node in (1, 0):
            cmd = common + ["--node-id", str(node)]
            if node == 0:
                cmd += ["--port", str(self.port)]
            log = open(f"{tmp}/{tag}_n{node}.log", "w")
            self.procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=log))
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"cluster {tag} did not become healthy (logs in {tmp})")

    def stop(self):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


def stream_tokens(port, prompt, n, times, started):
    """R: a streaming completion; the arrival time of every token into `times`."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = {"prompt": prompt, "max_tokens": n, "temperature": 0, "ignore_eos": True,
            "stream": True}
    c.request("POST", "/v1/completions", json.dumps(body), {"content-type": "application/json"})
    r = c.getresponse()
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        if chunk.get("choices") and chunk["choices"][0].get("text"):
            times.append(time.perf_counter())
            if len(times) == 8:
                started.set()
    started.set()


def run_way(args, tmp, way, prompts, redis_url):
    extra = ["--kv-cache-redis-url", redis_url] if way == "redis" else []
    if way == "redis":  # an earlier cluster of the same layout computes and stores them
        first = Cluster(args, tmp, "redis_first", extra)
        for p in prompts:
            post(first.port, {"prompt": p, "max_tokens": 1, "temperature": 0})
        want = 2 * sum(len(p.split()) for p in prompts) // 16 // 2  # about half the blocks
        deadline = time.time() + 60
        while time.time() < deadline:
            if metric(first.port, "tpnode_kv_redis_blocks_stored_total") >= want:
                break
            time.sleep(0.2)
        time.sleep(1)  # the writers finish the rest
        first.stop()
    c = Cluster(args, tmp, way, extra)
    try:
        if way == "local":
            for p in prompts:
                post(c.port, {"prompt": p, "max_tokens": 1, "temperature": 0})
        times, started = [], threading.Event()
        r = threading.Thread(target=stream_tokens,
                             args=(c.port, "b a ab", args.decode, times, started))
        r.start()
        started.wait(600)
        t0 = time.perf_counter()
        ttft, cached = [], 0
        for p in prompts:
            s = time.perf_counter()
            out = post(c.port, {"prompt": p, "max_tokens": 1, "temperature": 0})
            ttft.append(time.perf_counter() - s)
            cached += out["usage"]["prompt_tokens_details"]["cached_tokens"]
        t1 = time.perf_counter()
        r.join()
        if times[-1] < t1:
            print(f"warning ({way}): R finished before the arrivals did; raise --decode",
                  file=sys.stderr)
        window = [t for t in times if t0 <= t <= t1]
        gaps = sorted(b - a for a, b in zip(times, times[1:]) if t0 <= b <= t1)
        whole = (len(times) - 1) / (times[-1] - times[0])
        return {
            "way": way,
            "tps_window": len(window) / (t1 - t0),
            "tps_whole": whole,
            "itl_p50": statistics.median(gaps) * 1e3,
            "itl_p99": gaps[min(len(gaps) - 1, int(0.99 * len(gaps)))] * 1e3,
            "itl_max": gaps[-1] * 1e3,
            "ttft": statistics.mean(ttft) * 1e3,
            "cached": cached,
            "fetched": metric(c.port, "tpnode_kv_redis_blocks_fetched_total"),
        }
    finally:
        c.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/node/tpnode")
    ap.add_argument("--maker", default="build/tools/make_test_model")
    ap.add_argument("--arrivals", type=int, default=6)
    ap.add_argument("--words", type=int, default=240)
    ap.add_argument("--decode", type=int, default=400)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--ways", default="off,local,redis")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-tier-pp-")
    redis = None
    try:
        subprocess.run([args.maker, "--out", f"{tmp}/m.gguf", "--dim", "1024", "--layers", "8",
                        "--heads", "16", "--kv-heads", "4", "--ffn", "2816", "--type", "q8_0"],
                       check=True, stdout=subprocess.DEVNULL)
        rport = free_port()
        redis = subprocess.Popen(["redis-server", "--port", str(rport), "--bind", "127.0.0.1",
                                  "--save", "", "--appendonly", "no", "--dir", tmp],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rng = random.Random(7)
        prompts = [" ".join(rng.choice(["a", "b", "ab", "ba"]) for _ in range(args.words))
                   for _ in range(args.arrivals)]
        print("| way | R tok/s while arrivals run | R tok/s whole run | R inter-token p50 / p99 / "
              "max (ms) | arrivals' TTFT mean (ms) | cached tokens | blocks fetched |")
        print("|---|---|---|---|---|---|---|")
        for way in args.ways.split(","):
            m = run_way(args, tmp, way, prompts, f"redis://127.0.0.1:{rport}")
            print(f"| {m['way']} | {m['tps_window']:.1f} | {m['tps_whole']:.1f} | "
                  f"{m['itl_p50']:.1f} / {m['itl_p99']:.1f} / {m['itl_max']:.1f} | "
                  f"{m['ttft']:.0f} | {m['cached']} | {m['fetched']:.0f} |", flush=True)
    finally:
        if redis:
            redis.terminate()
            redis.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
